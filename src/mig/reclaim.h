/*
 * reclaim.h - the MIG reclaim loop's pass, and recovery on start (spec/upstream-behavior.md §8
 * "Reclaim", seeds/nvidia-mig.md "Reclaim", "Limitations", "Node reboot recovery").
 *
 * A pass first reads everything -- every marker (a store that cannot be listed ends the pass: a
 * marker we cannot see may own any instance) and every GPU -- and decides nothing when a read
 * fails. A GPU instance somebody subdivided by hand (tsr_gpu_instance_subdivided) ends the pass
 * too, with an error each pass and nothing reclaimed on any card of the node, as the seed's
 * "Limitations" says, until it is back to one compute instance. Then:
 *
 *   marker, Pod live          -> keep; its counters reset.
 *   marker, Pod absent        -> one miss; at TSR_MIG_RECLAIM_MAX_MISSES consecutive misses its
 *                                instance is destroyed (below) and then the marker removed. An
 *                                instance already gone (vanished, or wiped by a reset) only loses
 *                                its marker. A live Pod's marker whose instance is gone stays: that
 *                                Pod's allocation fails closed (carve.h) until it is recreated.
 *   corrupt marker            -> attributed to the Pod its path names: while that Pod is live it
 *                                is held (kept; no orphan on its card is destroyed, since it may be
 *                                the marker's), logged once it has been held for
 *                                TSR_MIG_RECLAIM_MAX_CORRUPT_HOLD_MISSES passes; once the Pod has
 *                                been absent for TSR_MIG_RECLAIM_MAX_MISSES passes the file is
 *                                removed (its instance, if any, becomes an orphan).
 *   unmarked instance         -> an orphan: destroyed only while its card is drained (no
 *                                allocation annotation names the card), after
 *                                TSR_MIG_RECLAIM_MAX_MISSES consecutive drained passes; a card that
 *                                is not drained resets the count.
 *
 * Destroying re-reads the card, checks the instance is still the one decided on, runs the
 * attribution self-check (no live Pod's annotation claims an overlapping placement on that card,
 * else it is held and logged), then destroys the compute instance and then the GPU instance. IN_USE
 * keeps everything for the next pass (a straggler, or a hand-carved instance someone is using),
 * logged when it reaches TSR_MIG_RECLAIM_MAX_DESTROY_MISSES consecutive refusals.
 *
 * LOCKING: as carve.h: the caller holds the node's MIG lock for the whole pass (a pass calls no
 * blocking API besides the driver's and the store's). Ownership: the reclaimer borrows gpus and
 * store for its lifetime and owns its debounce state; views are borrowed per call. Logging goes
 * only through the caller's callback (may be NULL).
 */
#ifndef TSR_MIG_RECLAIM_H
#define TSR_MIG_RECLAIM_H

#include <stdbool.h>
#include <stddef.h>

#include "mig/marker_store.h"
#include "mig/node.h"

#define TSR_MIG_RECLAIM_MAX_MISSES              3 /* reclaimMaxMisses */
#define TSR_MIG_RECLAIM_MAX_DESTROY_MISSES      8 /* reclaimMaxDestroyMisses */
#define TSR_MIG_RECLAIM_MAX_CORRUPT_HOLD_MISSES 8 /* reclaimMaxCorruptHoldMisses */

/* One allocation annotation entry of a Pod bound to the node (any mode). */
struct tsr_mig_claim {
        const char *pod_uid;
        const char *card;       /* the accelerator's UUID */
        bool partition;         /* a placement follows */
        unsigned start, length; /* partition: its placement */
};

/* What the caller knows of the cluster at the time of a pass. */
struct tsr_mig_view {
        const char *const *live; /* UIDs of the Pods that exist (any phase, terminating included) */
        size_t n_live;
        const struct tsr_mig_claim *claims; /* the annotations of the Pods bound to this node */
        size_t n_claims;
};

/* What one pass did, for callers and tests. */
struct tsr_mig_pass_stats {
        unsigned destroyed;       /* instances destroyed (owner gone or orphan) */
        unsigned markers_removed; /* markers removed (after a destroy, a vanished instance, or a
                                     dead Pod's corrupt marker) */
        unsigned in_use;          /* destroys refused with IN_USE */
        unsigned held;            /* decisions held: corrupt markers, self-check */
};

/* What recovery found. */
struct tsr_mig_recovery {
        unsigned markers; /* valid markers */
        unsigned stale;   /* of them, naming an instance that no longer exists */
        unsigned corrupt; /* corrupt markers */
        unsigned orphans; /* live instances no marker names */
};

struct tsr_mig_reclaimer;

/* A reclaimer over gpus and store (both borrowed). 0 or TSR_ENOMEM. */
int tsr_mig_reclaimer_new(const struct tsr_mig_gpus *gpus, struct tsr_mig_store *store,
                          tsr_mig_log_fn *log, void *log_arg, struct tsr_mig_reclaimer **out);

void tsr_mig_reclaimer_free(struct tsr_mig_reclaimer *r);

/*
 * Recovery on start (after a restart, a GPU reset or a node reboot): reads every marker and card
 * and logs, per marker whose instance is gone, that its Pod's allocation fails closed until the Pod
 * is recreated (seeds/nvidia-mig.md "Node reboot recovery"); destroys and removes NOTHING -- the
 * debounced passes do that once the Pods are seen gone. Returns 0 with *out, or the store's or
 * backend's error (an unreadable pods directory: TSR_EIO), after which passes will not act either.
 */
int tsr_mig_reclaim_recover(struct tsr_mig_reclaimer *r, struct tsr_mig_recovery *out,
                            struct tsr_diag *diag);

/*
 * One reclaim pass. Returns 0 with *stats (may be NULL); the store's or backend's read error, or
 * TSR_ENOTSUP for a subdivided instance, having destroyed nothing. Individual destroy failures are
 * logged and retried next pass, not returned.
 */
int tsr_mig_reclaim_pass(struct tsr_mig_reclaimer *r, const struct tsr_mig_view *view,
                         struct tsr_mig_pass_stats *stats, struct tsr_diag *diag);

#endif
