/*
 * alloc.h - gate 5's decisions: which accelerators a claim goes to (the packing order the device
 * plugin offers the kubelet as its preferred allocation, and the partition placement it makes
 * itself), and which claims Allocate refuses.
 *
 * Exclusive claims take free whole accelerators, ties (all of them) by position. Shares go to the
 * most-occupied accelerators that can still grant one (a shared one before a free one), ties by
 * position, on distinct accelerators.
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
#include "core/demand.h"
#include "core/ledger.h"

struct tsr_diag;

/* Most accelerators one exclusive or shared claim may name. */
#define TSR_ALLOC_BATCH_MAX 64

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

/*
 * Picks count free whole accelerators for an exclusive claim into out[0..count). Returns 0, or
 * TSR_ENOSPC when fewer are free (out untouched).
 */
int tsr_alloc_pick_exclusive(const struct tsr_accel_cap *caps,
                             const struct tsr_accel_ledger *ledger, size_t n, unsigned count,
                             struct tsr_alloc_pick *out);

/*
 * Picks count distinct accelerators that can each grant one ownership share into out[0..count).
 * Returns 0, or TSR_ENOSPC when fewer can (out untouched).
 */
int tsr_alloc_pick_shared(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                          size_t n, unsigned count, struct tsr_alloc_pick *out);

/*
 * Charges one pick of demand d to ledger as Allocate records it (exclusive: the whole
 * accelerator; a share; a slice of d->units and a slot; a partition of d->units at p's
 * placement) and returns the mode charged (TSR_MODE_NONE for a family with no charge). The pick
 * must fit (a pick of this module, or an allocation Allocate did not refuse).
 */
enum tsr_mode tsr_alloc_charge(const struct tsr_accel_cap *caps, struct tsr_accel_ledger *ledger,
                               const struct tsr_demand *d, const struct tsr_alloc_pick *p);

/*
 * Places demand d (one Pod's, or one container's) on the n accelerators in the packing order
 * above and charges ledger in place, as Allocate will record it. picks (may be NULL) receives
 * the chosen accelerators, at most max of them, and *n_picks their number. Returns 0, or
 * TSR_ENOSPC / TSR_ENOTFOUND (no accelerator offers the profile) with ledger unchanged.
 */
int tsr_alloc_place(const struct tsr_accel_cap *caps, struct tsr_accel_ledger *ledger, size_t n,
                    const struct tsr_demand *d, const uint32_t *hw_occupied,
                    struct tsr_alloc_pick *picks, size_t max, size_t *n_picks);

/*
 * Allocate's refusal of an accelerator-bound claim the kubelet made: the tokens of family on the
 * accelerators accels[0..count) (repeats mean several tokens of one accelerator), units per
 * accelerator for a slice. Writes the FailedPrecondition message into msg and returns true when
 * the claim is refused: an accelerator held in another mode, a shared grant with two tokens of
 * one accelerator, a slice on an accelerator with no free slot or too few units.
 */
bool tsr_alloc_refuse(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                      size_t n, enum tsr_family family, const unsigned *accels, size_t count,
                      int64_t units, char *msg, size_t len);

#endif
