/*
 * alloc.c - most-occupied-first packing for slices and partitions.
 */
#include "core/alloc.h"

#include "base/err.h"
#include "core/geometry.h"

#include <string.h>

int tsr_alloc_pick_slice(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                         size_t n, int64_t units, struct tsr_alloc_pick *out)
{
        size_t best = n;

        for (size_t i = 0; i < n; i++) {
                const struct tsr_accel_ledger *l = &ledger[i];

                if (caps[i].partitioned || caps[i].slice_slots == 0)
                        continue;
                if (l->mode != TSR_MODE_NONE && l->mode != TSR_MODE_SLICED)
                        continue;
                if (l->remaining < units || l->allocated_slices >= caps[i].slice_slots)
                        continue;
                if (best == n || l->remaining < ledger[best].remaining)
                        best = i;
        }
        if (best == n)
                return TSR_ENOSPC;
        out->accel = (unsigned)best;
        out->profile = -1;
        out->start = 0;
        return 0;
}

int tsr_alloc_pick_partition(const struct tsr_accel_cap *caps,
                             const struct tsr_accel_ledger *ledger, const uint32_t *hw_occupied,
                             size_t n, const char *profile, struct tsr_alloc_pick *out)
{
        size_t best = n;
        int best_used = -1, best_start = -1, best_profile = -1;
        bool offered = false;

        for (size_t i = 0; i < n; i++) {
                const struct tsr_accel_cap *c = &caps[i];
                const struct tsr_mig_profile *mp;
                uint32_t occupied;
                int p = -1, start, used;

                if (!c->partitioned)
                        continue;
                for (unsigned k = 0; k < c->product->n_profiles; k++)
                        if (((c->offered >> k) & 1u) &&
                            strcmp(c->product->profiles[k].name, profile) == 0)
                                p = (int)k;
                if (p < 0)
                        continue;
                offered = true;
                mp = &c->product->profiles[p];
                occupied = tsr_geometry_occupied(c->product, &ledger[i].live);
                if (hw_occupied)
                        occupied |= hw_occupied[i];
                if (tsr_geometry_free_count(
                        mp, occupied, tsr_geometry_live_count(&ledger[i].live, (unsigned)p)) == 0)
                        continue;
                start = tsr_geometry_lowest_start(mp, occupied);
                used = __builtin_popcount(occupied);
                if (start < 0 || used <= best_used)
                        continue;
                best = i;
                best_used = used;
                best_start = start;
                best_profile = p;
        }
        if (!offered)
                return TSR_ENOTFOUND;
        if (best == n)
                return TSR_ENOSPC;
        out->accel = (unsigned)best;
        out->profile = best_profile;
        out->start = (unsigned)best_start;
        return 0;
}
