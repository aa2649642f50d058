/*
 * catalog.c - expands the .def tables into static const arrays and looks rows up by key.
 * The tables are tiny (nine manufacturers, a few dozen products), so lookups are linear scans.
 */
#include "core/catalog.h"

#include <string.h>

static const struct tsr_manufacturer manufacturers[] = {
#define MANUFACTURER(E, key, pci, base, rt, kind, slots, oc)                                       \
        {TSR_MFR_##E, key, pci, base, rt, kind, slots, oc},
#include "core/manufacturers.def"
#undef MANUFACTURER
};

/* One static array per MIG table, named mig_<TABLE>. */
#define MIG_PROFILE(name, id, idx, mem, c, size, starts, max)                                      \
        {name, id, idx, mem, c, size, starts, max},
#define MIG_TABLE(T, ...) static const struct tsr_mig_profile mig_##T[] = {__VA_ARGS__};
#include "core/mig_profiles.def"
#undef MIG_TABLE
#undef MIG_PROFILE

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const struct tsr_product products[] = {
#define PRODUCT(E, M, name, vram, cpu, ram, T)                                                     \
        {name, TSR_MFR_##M, vram, cpu, ram, mig_##T, COUNT(mig_##T)},
#define PRODUCT_NOMIG(E, M, name, vram, cpu, ram) {name, TSR_MFR_##M, vram, cpu, ram, NULL, 0},
#include "core/products.def"
#undef PRODUCT_NOMIG
#undef PRODUCT
};

const struct tsr_manufacturer *tsr_catalog_manufacturer(enum tsr_manufacturer_id id)
{
        if ((unsigned)id >= TSR_MFR__COUNT)
                return NULL;
        return &manufacturers[id];
}

const struct tsr_manufacturer *tsr_catalog_manufacturer_by_key(const char *key)
{
        for (size_t i = 0; i < TSR_MFR__COUNT; i++)
                if (strcmp(manufacturers[i].key, key) == 0)
                        return &manufacturers[i];
        return NULL;
}

size_t tsr_catalog_products(const struct tsr_product **out)
{
        *out = products;
        return COUNT(products);
}

const struct tsr_product *tsr_catalog_product_by_name(const char *name)
{
        for (size_t i = 0; i < COUNT(products); i++)
                if (strcmp(products[i].name, name) == 0)
                        return &products[i];
        return NULL;
}

bool tsr_product_has_mig(const struct tsr_product *p)
{
        return p->n_profiles > 0;
}

unsigned tsr_product_mig_width(const struct tsr_product *p)
{
        unsigned width = 0;

        for (size_t i = 0; i < p->n_profiles; i++) {
                const struct tsr_mig_profile *mp = &p->profiles[i];

                for (unsigned s = 0; s < TSR_MIG_AXIS_MAX; s++)
                        if ((mp->starts >> s) & 1u && s + mp->size > width)
                                width = s + mp->size;
        }
        return width;
}

const struct tsr_mig_profile *tsr_product_profile(const struct tsr_product *p, const char *name)
{
        for (size_t i = 0; i < p->n_profiles; i++)
                if (strcmp(p->profiles[i].name, name) == 0)
                        return &p->profiles[i];
        return NULL;
}

uint64_t tsr_mig_profile_nominal_mib(const struct tsr_mig_profile *p)
{
        const char *dot = strchr(p->name, '.');
        uint64_t gb = 0;
        const char *s;

        if (!dot)
                return 0;
        for (s = dot + 1; *s >= '0' && *s <= '9'; s++) {
                if (gb > UINT64_MAX / 10240)
                        return 0;
                gb = gb * 10 + (uint64_t)(*s - '0');
        }
        if (s == dot + 1 || strncmp(s, "gb", 2) != 0)
                return 0;
        return gb * 1024;
}

unsigned tsr_mig_profile_start_count(const struct tsr_mig_profile *p)
{
        return (unsigned)__builtin_popcount(p->starts);
}
