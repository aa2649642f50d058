/*
 * alloc.c - most-occupied-first packing for every family, and Allocate's refusals.
 */
#include "core/alloc.h"

#include "base/err.h"
#include "core/fit.h"
#include "core/geometry.h"

#include <stdio.h>
#include <string.h>

int tsr_alloc_pick_slice(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                         size_t n, int64_t units, struct tsr_alloc_pick *out)
{
        size_t best = n;

        for (size_t i = 0; i < n; i++) {
                const struct tsr_accel_ledger *l = &ledger[i];

                if (!tsr_fit_slice(&caps[i], l, units))
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

int tsr_alloc_pick_exclusive(const struct tsr_accel_cap *caps,
                             const struct tsr_accel_ledger *ledger, size_t n, unsigned count,
                             struct tsr_alloc_pick *out)
{
        unsigned have = 0;

        for (size_t i = 0; i < n; i++)
                have += tsr_fit_whole(&caps[i], &ledger[i]);
        if (have < count)
                return TSR_ENOSPC;
        have = 0;
        for (size_t i = 0; i < n && have < count; i++) {
                if (!tsr_fit_whole(&caps[i], &ledger[i]))
                        continue;
                out[have++] = (struct tsr_alloc_pick){(unsigned)i, -1, 0};
        }
        return 0;
}

/* Shared order: fewer remaining units first (the busier accelerator), then position. */
static bool share_before(const struct tsr_accel_ledger *ledger, size_t a, size_t b)
{
        return ledger[a].remaining != ledger[b].remaining
                   ? ledger[a].remaining < ledger[b].remaining
                   : a < b;
}

int tsr_alloc_pick_shared(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                          size_t n, unsigned count, struct tsr_alloc_pick *out)
{
        unsigned have = 0;
        size_t prev = n;

        for (size_t i = 0; i < n; i++)
                have += tsr_fit_share(&caps[i], &ledger[i]);
        if (have < count)
                return TSR_ENOSPC;
        /* Successive minima in (remaining, position) order, each after the previous one. */
        for (unsigned k = 0; k < count; k++) {
                size_t best = n;

                for (size_t i = 0; i < n; i++) {
                        if (!tsr_fit_share(&caps[i], &ledger[i]))
                                continue;
                        if (prev != n && !share_before(ledger, prev, i))
                                continue;
                        if (best == n || share_before(ledger, i, best))
                                best = i;
                }
                out[k] = (struct tsr_alloc_pick){(unsigned)best, -1, 0};
                prev = best;
        }
        return 0;
}

static void record_pick(struct tsr_alloc_pick *picks, size_t max, size_t *n_picks,
                        const struct tsr_alloc_pick *p)
{
        if (picks && *n_picks < max)
                picks[*n_picks] = *p;
        (*n_picks)++;
}

enum tsr_mode tsr_alloc_charge(const struct tsr_accel_cap *caps, struct tsr_accel_ledger *ledger,
                               const struct tsr_demand *d, const struct tsr_alloc_pick *p)
{
        struct tsr_alloc_record r = {.accel = p->accel, .profile = -1, .shares = 1};

        switch (d->family) {
        case TSR_FAMILY_EXCLUSIVE:
                r.mode = TSR_MODE_EXCLUSIVE;
                r.units = TSR_UNITS_PER_ACCEL;
                break;
        case TSR_FAMILY_SHARED:
                r.mode = TSR_MODE_SHARED;
                r.units = TSR_UNITS_PER_SHARE;
                break;
        case TSR_FAMILY_SLICED:
                r.mode = TSR_MODE_SLICED;
                r.units = d->units;
                break;
        case TSR_FAMILY_PARTITIONED:
                r.mode = TSR_MODE_PARTITIONED;
                r.units = d->units;
                r.profile = p->profile;
                r.start = p->start;
                break;
        default:
                return TSR_MODE_NONE;
        }
        tsr_ledger_charge(&caps[p->accel], &ledger[p->accel], &r, NULL);
        return r.mode;
}

int tsr_alloc_place(const struct tsr_accel_cap *caps, struct tsr_accel_ledger *ledger, size_t n,
                    const struct tsr_demand *d, const uint32_t *hw_occupied,
                    struct tsr_alloc_pick *picks, size_t max, size_t *n_picks)
{
        struct tsr_alloc_pick one, many[TSR_ALLOC_BATCH_MAX];
        size_t dummy = 0;
        int rc = 0;

        if (!n_picks)
                n_picks = &dummy;
        *n_picks = 0;
        switch (d->family) {
        case TSR_FAMILY_NONE:
        case TSR_FAMILY_VISIBILITY:
                return 0;
        case TSR_FAMILY_EXCLUSIVE:
        case TSR_FAMILY_SHARED:
                if (d->cards > TSR_ALLOC_BATCH_MAX || d->cards > n)
                        return TSR_ENOSPC;
                rc = d->family == TSR_FAMILY_EXCLUSIVE
                         ? tsr_alloc_pick_exclusive(caps, ledger, n, d->cards, many)
                         : tsr_alloc_pick_shared(caps, ledger, n, d->cards, many);
                if (rc)
                        return rc;
                for (unsigned k = 0; k < d->cards; k++) {
                        tsr_alloc_charge(caps, ledger, d, &many[k]);
                        record_pick(picks, max, n_picks, &many[k]);
                }
                return 0;
        case TSR_FAMILY_SLICED:
                rc = tsr_alloc_pick_slice(caps, ledger, n, d->units, &one);
                break;
        case TSR_FAMILY_PARTITIONED:
                rc = tsr_alloc_pick_partition(caps, ledger, hw_occupied, n, d->profile, &one);
                break;
        }
        if (rc)
                return rc;
        tsr_alloc_charge(caps, ledger, d, &one);
        record_pick(picks, max, n_picks, &one);
        return 0;
}

static const struct tsr_accel_cap *cap_at(const struct tsr_accel_cap *caps, size_t n, unsigned a)
{
        return a < n ? &caps[a] : NULL;
}

bool tsr_alloc_refuse(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                      size_t n, enum tsr_family family, const unsigned *accels, size_t count,
                      int64_t units, char *msg, size_t len)
{
        enum tsr_mode want = family == TSR_FAMILY_EXCLUSIVE ? TSR_MODE_EXCLUSIVE
                             : family == TSR_FAMILY_SHARED  ? TSR_MODE_SHARED
                                                            : TSR_MODE_SLICED;

        for (size_t k = 0; k < count; k++) {
                const struct tsr_accel_cap *c = cap_at(caps, n, accels[k]);
                const struct tsr_accel_ledger *l;

                if (!c) {
                        snprintf(msg, len, "no accelerator %u on this node", accels[k]);
                        return true;
                }
                l = &ledger[accels[k]];
                if (c->partitioned) {
                        snprintf(msg, len,
                                 "accelerator %s (index %u) is partitioned and serves partitions "
                                 "only",
                                 c->uuid, c->index);
                        return true;
                }
                if (l->mode != TSR_MODE_NONE && (l->mode != want || want == TSR_MODE_EXCLUSIVE)) {
                        snprintf(msg, len,
                                 "accelerator %s (index %u) is held in %s mode; %s %s claim "
                                 "cannot share it",
                                 c->uuid, c->index, tsr_mode_name(l->mode),
                                 family == TSR_FAMILY_EXCLUSIVE ? "an" : "a",
                                 tsr_family_name(family));
                        return true;
                }
                for (size_t j = 0; j < k && family == TSR_FAMILY_SHARED; j++) {
                        if (accels[j] == accels[k]) {
                                snprintf(msg, len,
                                         "a shared grant holds one share per accelerator; two "
                                         "tokens name accelerator %s (index %u)",
                                         c->uuid, c->index);
                                return true;
                        }
                }
                if (family == TSR_FAMILY_SHARED && l->remaining < TSR_UNITS_PER_SHARE) {
                        snprintf(msg, len, "accelerator %s (index %u) has no free share left",
                                 c->uuid, c->index);
                        return true;
                }
                if (family == TSR_FAMILY_SLICED && l->allocated_slices >= c->slice_slots) {
                        snprintf(msg, len,
                                 "accelerator %s (index %u) already holds all %u of its slice "
                                 "slots",
                                 c->uuid, c->index, c->slice_slots);
                        return true;
                }
                if (family == TSR_FAMILY_SLICED && l->remaining < units) {
                        snprintf(msg, len,
                                 "accelerator %s (index %u) has %lld free units; the slice needs "
                                 "%lld",
                                 c->uuid, c->index, (long long)l->remaining, (long long)units);
                        return true;
                }
        }
        return false;
}
