/*
 * geometry.c - interval overlap on a memory-slice axis of at most 32 slices, as bit masks.
 * Overlap of [a, a+n) with an occupied set is one AND; the free count of a profile walks its
 * legal starts in increasing order, taking each that fits both the GPU and the placements
 * already taken in this count.
 */
#include "core/geometry.h"

#include "base/err.h"

uint32_t tsr_geometry_span(unsigned start, unsigned size)
{
        uint64_t bits = (size >= 32 ? UINT64_C(0xffffffff) : ((UINT64_C(1) << size) - 1));

        return (uint32_t)(bits << start);
}

uint32_t tsr_geometry_occupied(const struct tsr_product *p, const struct tsr_mig_live *live)
{
        uint32_t mask = 0;

        for (unsigned i = 0; i < live->n; i++) {
                const struct tsr_mig_profile *mp = &p->profiles[live->inst[i].profile];

                mask |= tsr_geometry_span(live->inst[i].start, mp->size);
        }
        return mask;
}

unsigned tsr_geometry_live_count(const struct tsr_mig_live *live, unsigned profile)
{
        unsigned n = 0;

        for (unsigned i = 0; i < live->n; i++)
                if (live->inst[i].profile == profile)
                        n++;
        return n;
}

unsigned tsr_geometry_free_count(const struct tsr_mig_profile *mp, uint32_t occupied,
                                 unsigned live_of_profile)
{
        unsigned count = 0, cap;

        if (live_of_profile >= mp->max_instances)
                return 0;
        cap = mp->max_instances - live_of_profile;
        for (unsigned s = 0; s < TSR_MIG_AXIS_MAX && count < cap; s++) {
                uint32_t span;

                if (!((mp->starts >> s) & 1u) || s + mp->size > TSR_MIG_AXIS_MAX)
                        continue;
                span = tsr_geometry_span(s, mp->size);
                if (occupied & span)
                        continue;
                occupied |= span;
                count++;
        }
        return count;
}

int tsr_geometry_lowest_start(const struct tsr_mig_profile *mp, uint32_t occupied)
{
        for (unsigned s = 0; s < TSR_MIG_AXIS_MAX; s++) {
                if (!((mp->starts >> s) & 1u) || s + mp->size > TSR_MIG_AXIS_MAX)
                        continue;
                if (!(occupied & tsr_geometry_span(s, mp->size)))
                        return (int)s;
        }
        return -1;
}

unsigned tsr_geometry_largest_free(const struct tsr_product *p, uint32_t offered,
                                   const struct tsr_mig_live *live)
{
        uint32_t occupied = tsr_geometry_occupied(p, live);
        unsigned best = 0;

        for (size_t i = 0; i < p->n_profiles; i++) {
                unsigned n;

                if (!((offered >> i) & 1u))
                        continue;
                n = tsr_geometry_free_count(&p->profiles[i], occupied,
                                            tsr_geometry_live_count(live, (unsigned)i));
                if (n > best)
                        best = n;
        }
        return best;
}

int tsr_geometry_add(const struct tsr_product *p, struct tsr_mig_live *live, unsigned profile,
                     unsigned start)
{
        const struct tsr_mig_profile *mp;

        if (profile >= p->n_profiles || start >= TSR_MIG_AXIS_MAX || live->n >= TSR_MIG_AXIS_MAX)
                return TSR_EINVAL;
        mp = &p->profiles[profile];
        if (!((mp->starts >> start) & 1u))
                return TSR_EINVAL;
        if (tsr_geometry_occupied(p, live) & tsr_geometry_span(start, mp->size))
                return TSR_EINVAL;
        live->inst[live->n].profile = (uint8_t)profile;
        live->inst[live->n].start = (uint8_t)start;
        live->n++;
        return 0;
}
