/*
 * elf_lookup.c - one object's own definition of a name, from its GNU hash table (elf_lookup.h).
 */
#define _GNU_SOURCE
#include "vgpu/elf_lookup.h"

#include <elf.h>
#include <stdint.h>
#include <sys/auxv.h>

/* The dynamic section's tables; the loader may or may not have relocated their addresses. */
struct tables {
        const ElfW(Sym) * symtab;
        const char *strtab;
        const uint32_t *gnu_hash;
        const ElfW(Half) * versym;
};

static TSR_VGPU_EARLY const void *at(const struct link_map *map, ElfW(Addr) p)
{
        return (const void *)(p < map->l_addr ? p + map->l_addr : p);
}

static TSR_VGPU_EARLY bool tables_of(const struct link_map *map, struct tables *t)
{
        t->symtab = NULL;
        t->strtab = NULL;
        t->gnu_hash = NULL;
        t->versym = NULL;
        if (!map->l_ld)
                return false;
        for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
                if (d->d_tag == DT_SYMTAB)
                        t->symtab = at(map, d->d_un.d_ptr);
                else if (d->d_tag == DT_STRTAB)
                        t->strtab = at(map, d->d_un.d_ptr);
                else if (d->d_tag == DT_GNU_HASH)
                        t->gnu_hash = at(map, d->d_un.d_ptr);
                else if (d->d_tag == DT_VERSYM)
                        t->versym = at(map, d->d_un.d_ptr);
        }
        return t->symtab && t->strtab && t->gnu_hash;
}

static TSR_VGPU_EARLY uint32_t gnu_hash(const char *name)
{
        uint32_t h = 5381;

        for (const unsigned char *p = (const unsigned char *)name; *p; p++)
                h = h * 33 + *p;
        return h;
}

/* Whether symbol i of t is a definition of name the loader would bind to. */
static TSR_VGPU_EARLY bool binds(const struct tables *t, uint32_t i, const char *name)
{
        const ElfW(Sym) *s = &t->symtab[i];
        int bind = ELF64_ST_BIND(s->st_info), type = ELF64_ST_TYPE(s->st_info);

        return s->st_shndx != SHN_UNDEF && (bind == STB_GLOBAL || bind == STB_WEAK) &&
               (type == STT_FUNC || type == STT_OBJECT || type == STT_GNU_IFUNC ||
                type == STT_NOTYPE) &&
               !(t->versym && (t->versym[i] & 0x8000)) &&
               tsr_vgpu_same(t->strtab + s->st_name, name);
}

void *tsr_vgpu_elf_lookup(const struct link_map *map, const char *name)
{
        struct tables t;
        uint32_t hash, n_buckets, sym_offset, bloom_size, i;
        const ElfW(Addr) * bloom;
        const uint32_t *buckets, *chain;

        if (!tables_of(map, &t))
                return NULL;
        n_buckets = t.gnu_hash[0];
        sym_offset = t.gnu_hash[1];
        bloom_size = t.gnu_hash[2];
        if (!n_buckets)
                return NULL;
        bloom = (const ElfW(Addr) *)(const void *)&t.gnu_hash[4];
        buckets = (const uint32_t *)(const void *)&bloom[bloom_size];
        chain = &buckets[n_buckets];
        hash = gnu_hash(name);
        i = buckets[hash % n_buckets];
        if (i < sym_offset)
                return NULL;
        for (;; i++) {
                uint32_t h = chain[i - sym_offset];

                if ((h | 1) == (hash | 1) && binds(&t, i, name)) {
                        const ElfW(Sym) *s = &t.symtab[i];
                        uintptr_t addr = map->l_addr + s->st_value;

                        if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC) {
                                union {
                                        uintptr_t address;
                                        void *(*resolver)(unsigned long hwcap);
                                } r = {addr};

                                return r.resolver(getauxval(AT_HWCAP));
                        }
                        return (void *)addr;
                }
                if (h & 1)
                        return NULL;
        }
}
