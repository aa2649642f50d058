/*
 * early.h - code that may run before the process's sanitizer runtime is up.
 *
 * A sanitizer runtime resolves the functions it intercepts with dlsym(RTLD_NEXT, ...) while it
 * initialises, and that dlsym is the interposer's (procaddr.c). Everything on that path is
 * TSR_VGPU_EARLY: not instrumented, and calling nothing a sanitizer intercepts (no libc string
 * functions, no memcpy, no dlopen) — only the loader's own dlvsym, dladdr1 and the libc dlsym.
 * Outside sanitizer builds the attribute changes nothing.
 */
#ifndef TSR_VGPU_EARLY_H
#define TSR_VGPU_EARLY_H

#include <stdbool.h>
#include <stddef.h>

/* clang's second attribute also drops ThreadSanitizer's function entry and exit hooks */
#if defined(__has_attribute) && __has_attribute(disable_sanitizer_instrumentation)
#define TSR_VGPU_EARLY                                                                             \
        __attribute__((no_sanitize("address", "undefined", "thread"),                              \
                       disable_sanitizer_instrumentation, noinline))
#else
#define TSR_VGPU_EARLY __attribute__((no_sanitize("address", "undefined", "thread"), noinline))
#endif

/* Whether s starts with prefix. */
TSR_VGPU_EARLY bool tsr_vgpu_starts_with(const char *s, const char *prefix);

/* Whether a and b are the same string. */
TSR_VGPU_EARLY bool tsr_vgpu_same(const char *a, const char *b);

/* The part of path after its last '/'. */
TSR_VGPU_EARLY const char *tsr_vgpu_base_name(const char *path);

#endif
