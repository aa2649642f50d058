/*
 * views.c - four-view projection. One pass over every accelerator of the pool; per-node figures
 * feed the onceMaxRequest maxima.
 */
#include "core/views.h"

#include "core/geometry.h"

#include <string.h>

static void max_into(int64_t *dst, int64_t v)
{
        if (v > *dst)
                *dst = v;
}

static void unpartitioned(const struct tsr_accel_cap *c, const struct tsr_accel_ledger *l,
                          struct tsr_pool_views *v, int64_t *node_free, int64_t *node_shareable)
{
        v->ex.capacity++;
        v->sh.capacity += TSR_SHARES_PER_ACCEL;
        v->sl.capacity += 100;
        v->logical_present = true;
        v->logical_overcommit |= c->cores_overcommit;
        v->logical_count += c->slice_slots;
        if (l->mode == TSR_MODE_NONE) {
                v->ex.remaining++;
                (*node_free)++;
        }
        if (l->mode == TSR_MODE_NONE || l->mode == TSR_MODE_SHARED) {
                int64_t shares = l->remaining / TSR_UNITS_PER_SHARE;

                v->sh.remaining += shares;
                if (shares > 0)
                        (*node_shareable)++;
        }
        if ((l->mode == TSR_MODE_NONE || l->mode == TSR_MODE_SLICED) &&
            l->allocated_slices < c->slice_slots) {
                int64_t pct = l->remaining / TSR_UNITS_PER_PERCENT;

                v->sl.remaining += pct;
                max_into(&v->sl.once_max, pct);
        }
}

static void partitioned(const struct tsr_accel_cap *c, const struct tsr_accel_ledger *l,
                        struct tsr_pool_views *v)
{
        const struct tsr_product *p = c->product;
        uint32_t occupied = tsr_geometry_occupied(p, &l->live);
        unsigned largest = tsr_geometry_largest_free(p, c->offered, &l->live);

        v->physical_present = true;
        v->pt.capacity += tsr_capability_partition_count(c);
        v->physical_count += tsr_capability_partition_count(c);
        v->pt.remaining += largest;
        if (largest > 0)
                v->pt.once_max = 1;
        for (unsigned i = 0; i < p->n_profiles && i < TSR_MIG_PROFILES_MAX; i++) {
                unsigned live = tsr_geometry_live_count(&l->live, i);
                size_t slot;

                if (!((c->offered >> i) & 1u))
                        continue;
                for (slot = 0; slot < v->n_profiles; slot++)
                        if (v->remaining_profiles[slot].name == p->profiles[i].name)
                                break;
                if (slot == v->n_profiles) {
                        v->remaining_profiles[slot].name = p->profiles[i].name;
                        v->remaining_profiles[slot].memory_mib =
                            tsr_mig_profile_nominal_mib(&p->profiles[i]);
                        v->allocated_profiles[slot] = v->remaining_profiles[slot];
                        v->physical_profiles[slot] = v->remaining_profiles[slot];
                        v->n_profiles++;
                }
                v->remaining_profiles[slot].count +=
                    tsr_geometry_free_count(&p->profiles[i], occupied, live);
                v->allocated_profiles[slot].count += live;
                v->physical_profiles[slot].count += tsr_capability_profile_ceiling(c, i);
        }
}

void tsr_views_compute(const struct tsr_pool_node *nodes, size_t n_nodes,
                       struct tsr_pool_views *out)
{
        memset(out, 0, sizeof(*out));
        for (size_t k = 0; k < n_nodes; k++) {
                int64_t node_free = 0, node_shareable = 0;

                for (size_t i = 0; i < nodes[k].n; i++) {
                        const struct tsr_accel_cap *c = &nodes[k].caps[i];
                        const struct tsr_accel_ledger *l = &nodes[k].ledger[i];

                        if (c->partitioned)
                                partitioned(c, l, out);
                        else
                                unpartitioned(c, l, out, &node_free, &node_shareable);
                }
                max_into(&out->ex.once_max, node_free);
                max_into(&out->sh.once_max, node_shareable);
        }
}
