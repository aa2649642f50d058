/*
 * alloc.h - gate 5's placement decisions for the slice and partition families: which accelerator,
 * and for a partition which memory slices.
 *
 * A logical slice goes to the most-occupied accelerator that still fits it (fewest remaining
 * units; one already serving slices beats a pristine one), ties by position: a free or
 * already-sliced, unpartitioned accelerator with the units and a free slice slot. A partition
 * packs the same way over partitioned accelerators (most occupied memory slices first, ties by
 * position) and takes the lowest free legal start. Occupancy is the ledger's placements plus any
 * live hardware the caller passes (an instance not yet reclaimed), so placement never double-books
 * the hardware. Pure.
 */
#ifndef TSR_CORE_ALLOC_H
#define TSR_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "core/capability.h"
#include "core/ledger.h"

struct tsr_alloc_pick {
        unsigned accel; /* index of the chosen accelerator */
        int profile;    /* partition: product profile index, else -1 */
        unsigned start; /* partition: first memory slice */
};

/*
 * Picks the accelerator for a slice of units among n (caps and ledger index-aligned). Returns 0
 * with *out, or TSR_ENOSPC when no accelerator can hold it (out untouched).
 */
int tsr_alloc_pick_slice(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                         size_t n, int64_t units, struct tsr_alloc_pick *out);

/*
 * Picks accelerator and placement for one instance of the profile named profile. hw_occupied,
 * when not NULL, holds per accelerator the memory slices live hardware occupies beyond the
 * ledger. Returns 0 with *out, TSR_ENOTFOUND when no accelerator offers the profile, or TSR_ENOSPC
 * when none has a free placement for it (out untouched).
 */
int tsr_alloc_pick_partition(const struct tsr_accel_cap *caps,
                             const struct tsr_accel_ledger *ledger, const uint32_t *hw_occupied,
                             size_t n, const char *profile, struct tsr_alloc_pick *out);

#endif
