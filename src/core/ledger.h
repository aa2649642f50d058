/*
 * ledger.h - the per-accelerator ledger: the `Devices` status side, rebuilt from allocation
 * records, never edited by hand.
 *
 * Each accelerator starts at mode NONE with TSR_UNITS_PER_ACCEL remaining. A record charges its
 * accelerator: exclusive takes everything, a share takes TSR_UNITS_PER_SHARE, a slice its units and
 * one slice slot, a partition its units and its placement. The first record fixes the mode; a
 * record in another mode still charges (the ledger reports what the Pods hold), remaining is
 * clamped at 0. Records of finished Pods stop charging every family but partitions and MetaX or
 * Cambricon slices (upstream GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS, §8). tsr_ledger_build is the
 * one function that computes it.
 * Pure; the caller owns every array.
 */
#ifndef TSR_CORE_LEDGER_H
#define TSR_CORE_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/capability.h"
#include "core/geometry.h"
#include "core/keys.h"

struct tsr_diag;

/* Upstream DeviceAllocationMode values, as the allocation annotation writes them. */
enum tsr_mode {
        TSR_MODE_NONE = 0,
        TSR_MODE_EXCLUSIVE = 1,
        TSR_MODE_SHARED = 2,
        TSR_MODE_SLICED = 3,
        TSR_MODE_PARTITIONED = 4,
};

/* Returns "None", "Exclusive", "Shared", "Sliced" or "Partitioned". */
const char *tsr_mode_name(enum tsr_mode m);

/* The mode a grant of family f charges: TSR_MODE_NONE for visibility (it charges nothing) and
 * TSR_FAMILY_NONE. */
enum tsr_mode tsr_mode_of_family(enum tsr_family f);

/* One accelerator's charge by one container of one Pod. */
struct tsr_alloc_record {
        unsigned accel; /* index of the accelerator in its group */
        enum tsr_mode mode;
        int64_t units;   /* units charged (exclusive: the whole accelerator) */
        unsigned shares; /* shared: ownership shares held, normally 1 */
        int profile;     /* partitioned: product profile index, else -1 */
        unsigned start;  /* partitioned: first memory slice */
        bool finished;   /* the Pod is Succeeded or Failed */
};

struct tsr_accel_ledger {
        enum tsr_mode mode;
        int64_t allocated;         /* units charged */
        int64_t remaining;         /* TSR_UNITS_PER_ACCEL - allocated, clamped at 0 */
        unsigned allocated_slices; /* sliced: slots taken */
        struct tsr_mig_live live;  /* partitioned: live placements */
};

/* Sets l to an untouched accelerator: mode NONE, TSR_UNITS_PER_ACCEL remaining, nothing live. */
void tsr_ledger_reset(struct tsr_accel_ledger *l);

/*
 * Charges one record to accelerator cap's ledger entry l, as tsr_ledger_build does for each
 * record (a finished Pod's record charges only a partition). Returns 0, or TSR_EINVAL when a
 * partition record names a profile or placement the accelerator cannot hold (l unchanged).
 */
int tsr_ledger_charge(const struct tsr_accel_cap *cap, struct tsr_accel_ledger *l,
                      const struct tsr_alloc_record *r, struct tsr_diag *diag);

/*
 * Rebuilds the ledger of n accelerators (caps[i].index == i) from nrec records into out[0..n).
 * Returns 0, or TSR_EINVAL with a message when a record names an accelerator past n, or a
 * partition record names a profile or placement the accelerator cannot hold (two records on
 * overlapping slices). On failure out is unspecified: callers pass scratch storage.
 */
int tsr_ledger_build(const struct tsr_accel_cap *caps, size_t n,
                     const struct tsr_alloc_record *recs, size_t nrec, struct tsr_accel_ledger *out,
                     struct tsr_diag *diag);

/*
 * Checks the ledger invariants of one accelerator (remaining + allocated budget, slots within the
 * capability, placements legal and disjoint, mode consistent with the population). Returns 0, or
 * TSR_ESTALE with the first broken invariant in diag.
 */
int tsr_ledger_check(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l,
                     struct tsr_diag *diag);

#endif
