/*
 * fit.h - the per-card fit labels a node publishes for each accelerator model
 * (spec/upstream-behavior.md §6, "Per-card fit labels"): filters for Kueue TAS, never charged.
 *
 *   sliced-max-free-units.fit.gpustack.ai/<aKey>  the largest ledger `remaining` of any one
 *       accelerator that can serve a logical slice (unpartitioned, free or already sliced) and
 *       still has a free slice slot; 0 when every one is full.
 *   shared-free-cards.fit.gpustack.ai/<aKey>      how many accelerators can still grant an
 *       ownership share (unpartitioned, free or shared, remaining >= one share).
 * Both labels exist only while the model has an unpartitioned accelerator on the node; a
 * partition-only node carries neither. <aKey> is "<manufacturer>-<group id>". Pure.
 */
#ifndef TSR_CORE_FIT_H
#define TSR_CORE_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/capability.h"
#include "core/ledger.h"

#define TSR_FIT_SLICED_PREFIX "sliced-max-free-units.fit.gpustack.ai/"
#define TSR_FIT_SHARED_PREFIX "shared-free-cards.fit.gpustack.ai/"

struct tsr_fit_labels {
        bool present; /* the node has an unpartitioned accelerator of the model */
        int64_t sliced_max_free_units;
        int64_t shared_free_cards;
};

/* Projects the fit labels of the n accelerators of one model on a node (caps, ledger aligned). */
void tsr_fit_labels_project(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                            size_t n, struct tsr_fit_labels *out);

/* True when accelerator cap with ledger l can take one more logical slice of units units. */
bool tsr_fit_slice(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l,
                   int64_t units);

/* True when accelerator cap with ledger l can grant one more ownership share. */
bool tsr_fit_share(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l);

/* True when accelerator cap with ledger l is whole and free for an exclusive claim. */
bool tsr_fit_whole(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l);

#endif
