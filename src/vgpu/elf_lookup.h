/*
 * elf_lookup.h - the definition of a name in one loaded object itself, read from its dynamic
 * symbol table through its GNU hash table, as the loader would find it there: a defined global or
 * weak symbol of the default version (a hidden old version is skipped), an IFUNC resolved.
 *
 * It is how the interposer answers dlsym(RTLD_NEXT) for a caller object by object: unlike a dlsym
 * on a dlopen handle it needs no loader lock, allocates nothing and calls nothing a sanitizer
 * intercepts, so it is early.h-safe. An object without a GNU hash table (rare: every Debian 12
 * object has one) answers NULL.
 */
#ifndef TSR_VGPU_ELF_LOOKUP_H
#define TSR_VGPU_ELF_LOOKUP_H

#include <link.h>

#include "vgpu/early.h"

/* name as object map defines it, or NULL. */
TSR_VGPU_EARLY void *tsr_vgpu_elf_lookup(const struct link_map *map, const char *name);

#endif
