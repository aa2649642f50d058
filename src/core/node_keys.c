/*
 * node_keys.c - node capacity / allocatable projection for one manufacturer's accelerators.
 */
#include "core/node_keys.h"

#include "base/diag.h"
#include "base/err.h"
#include "core/tokens.h"

#include <string.h>

static void put(struct tsr_node_keys *out, const struct tsr_manufacturer *m, enum tsr_key_kind kind,
                const char *profile, int64_t cap, int64_t alloc)
{
        struct tsr_node_key *k = &out->keys[out->n];

        if (out->n >= TSR_NODE_KEYS_MAX || tsr_key_format(k->name, m, kind, profile) != 0)
                return;
        k->capacity = cap;
        k->allocatable = alloc;
        out->n++;
}

/* Adds accelerator i's tokens of family f to the pool's capacity and allocatable. */
static void add_tokens(enum tsr_family f, const struct tsr_accel_cap *c,
                       const struct tsr_accel_ledger *l, int64_t *cap, int64_t *alloc)
{
        unsigned healthy;

        *cap += tsr_tokens_count(f, c, l, &healthy);
        *alloc += healthy;
}

int tsr_node_keys_project(const struct tsr_manufacturer *m, const struct tsr_accel_cap *caps,
                          const struct tsr_accel_ledger *ledger, size_t n,
                          struct tsr_node_keys *out, struct tsr_diag *diag)
{
        struct tsr_node_keys keys = {0};
        int64_t whole = 0, whole_ok = 0, shared = 0, shared_ok = 0, slots = 0, slots_ok = 0;
        int64_t cores = 0, parted = 0, parted_pool = 0, parted_ok = 0, visible = 0, visible_ok = 0;
        int64_t vram = 0;
        int64_t per_profile[TSR_MIG_PROFILES_MAX] = {0};
        const struct tsr_product *product = n ? caps[0].product : NULL;

        for (size_t i = 0; i < n; i++) {
                const struct tsr_accel_cap *c = &caps[i];
                const struct tsr_accel_ledger *l = &ledger[i];

                if (c->product != product)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "accelerators of %s and %s in one key projection",
                                            product->name, c->product->name);
                add_tokens(TSR_FAMILY_EXCLUSIVE, c, l, &whole, &whole_ok);
                add_tokens(TSR_FAMILY_SHARED, c, l, &shared, &shared_ok);
                add_tokens(TSR_FAMILY_SLICED, c, l, &slots, &slots_ok);
                add_tokens(TSR_FAMILY_PARTITIONED, c, l, &parted_pool, &parted_ok);
                add_tokens(TSR_FAMILY_VISIBILITY, c, l, &visible, &visible_ok);
                if (!c->partitioned) {
                        cores += c->cores_overcommit ? (int64_t)c->slice_slots * 100 : 100;
                        vram += (int64_t)c->product->vram_mib;
                        continue;
                }
                parted++;
                uint32_t occupied = tsr_geometry_occupied(c->product, &l->live);
                for (unsigned p = 0; p < c->product->n_profiles && p < TSR_MIG_PROFILES_MAX; p++) {
                        unsigned live = tsr_geometry_live_count(&l->live, p);

                        if (!((c->offered >> p) & 1u))
                                continue;
                        per_profile[p] += live + tsr_geometry_free_count(&c->product->profiles[p],
                                                                         occupied, live);
                }
        }

        put(&keys, m, TSR_KEY_EXCLUSIVE, NULL, whole, whole_ok);
        if (m->partition_kind)
                put(&keys, m, TSR_KEY_PARTITIONED, NULL, parted_pool, parted_ok);
        put(&keys, m, TSR_KEY_SHARED, NULL, shared, shared_ok);
        put(&keys, m, TSR_KEY_SLICED, NULL, slots, slots_ok);
        if (slots > 0) {
                put(&keys, m, TSR_KEY_SLICED_CORES, NULL, cores, cores);
                put(&keys, m, TSR_KEY_SLICED_MEMORY_MIB, NULL, vram, vram);
                put(&keys, m, TSR_KEY_SLICED_MEMORY_PERCENT, NULL, whole * 100, whole * 100);
                put(&keys, m, TSR_KEY_SLICED_UNITS, NULL, whole * TSR_UNITS_PER_ACCEL,
                    whole * TSR_UNITS_PER_ACCEL);
        }
        if (m->partition_kind && parted_pool > 0) {
                put(&keys, m, TSR_KEY_PARTITIONED_UNITS, NULL, parted * TSR_UNITS_PER_ACCEL,
                    parted * TSR_UNITS_PER_ACCEL);
                for (unsigned p = 0; product && p < product->n_profiles && p < TSR_MIG_PROFILES_MAX;
                     p++) {
                        bool offered = false;

                        for (size_t i = 0; i < n; i++)
                                offered |= caps[i].partitioned && ((caps[i].offered >> p) & 1u);
                        if (offered)
                                put(&keys, m, TSR_KEY_PARTITIONED_PROFILE,
                                    product->profiles[p].name, per_profile[p], per_profile[p]);
                }
        }
        put(&keys, m, TSR_KEY_VISIBILITY, NULL, visible, visible_ok);
        *out = keys;
        return 0;
}

const struct tsr_node_key *tsr_node_keys_find(const struct tsr_node_keys *keys, const char *name)
{
        for (size_t i = 0; i < keys->n; i++)
                if (strcmp(keys->keys[i].name, name) == 0)
                        return &keys->keys[i];
        return NULL;
}
