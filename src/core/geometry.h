/*
 * geometry.h - MIG placement arithmetic on one GPU: which profiles still fit next to the live
 * instances, how many, and where the next one goes.
 *
 * A GPU's live instances are a set of {profile, start} on its memory-slice axis. A profile fits at
 * a legal start when [start, start + size) overlaps no occupied slice. Its free count is the
 * largest set of mutually non-overlapping legal placements that fit (all placements of one
 * profile have the same size, so taking the lowest fitting start first is optimal), capped by the
 * profile's instanceCount minus its live instances. A GPU's contribution to a pool figure is the
 * largest free count over its offered profiles, never their sum: the profiles compete for the same
 * slices. Pure; thread-safe.
 */
#ifndef TSR_CORE_GEOMETRY_H
#define TSR_CORE_GEOMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/catalog.h"

struct tsr_mig_instance {
        uint8_t profile; /* index into the product's profile table */
        uint8_t start;   /* first memory slice */
};

/* The live instances of one GPU. Invariant: n <= TSR_MIG_AXIS_MAX, placements do not overlap. */
struct tsr_mig_live {
        unsigned n;
        struct tsr_mig_instance inst[TSR_MIG_AXIS_MAX];
};

/* Bit mask of the slices [start, start + size). */
uint32_t tsr_geometry_span(unsigned start, unsigned size);

/* Occupied-slice mask of the live instances of a GPU of product p. */
uint32_t tsr_geometry_occupied(const struct tsr_product *p, const struct tsr_mig_live *live);

/* Number of live instances of profile index profile. */
unsigned tsr_geometry_live_count(const struct tsr_mig_live *live, unsigned profile);

/*
 * How many more instances of profile mp fit into a GPU whose occupied slices are occupied and
 * which already hosts live_of_profile instances of it.
 */
unsigned tsr_geometry_free_count(const struct tsr_mig_profile *mp, uint32_t occupied,
                                 unsigned live_of_profile);

/* The lowest legal start of mp that overlaps nothing in occupied, or -1 when none does. */
int tsr_geometry_lowest_start(const struct tsr_mig_profile *mp, uint32_t occupied);

/*
 * The largest free count over the profiles of p selected by offered (bit i = profile i), for the
 * live instances live. 0 when nothing fits.
 */
unsigned tsr_geometry_largest_free(const struct tsr_product *p, uint32_t offered,
                                   const struct tsr_mig_live *live);

/*
 * Adds an instance of profile at start to live. Returns 0, or TSR_EINVAL when start is not a
 * legal start of the profile or the placement overlaps a live one (live unchanged).
 */
int tsr_geometry_add(const struct tsr_product *p, struct tsr_mig_live *live, unsigned profile,
                     unsigned start);

#endif
