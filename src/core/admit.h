/*
 * admit.h - gate 3: the `gpustack-node-devices` AdmissionCheck's verdict on one Workload
 * (seeds/admission.md "Gate 3"; spec/upstream-behavior.md §7).
 *
 * Kueue has reserved quota and, under TAS, named the node of every Pod. The check asks whether
 * those nodes' accelerators, per accelerator, can really host the Pods:
 *   - It works on a copy of each node's ledger (rebuilt by the caller from the Pods bound there),
 *     either once per verdict (tsr_admit_judge) or once for many (struct tsr_admit_pool).
 *   - It first charges the inflight Workloads: every other Workload on the node that is admitted
 *     or holds this check's Ready, for its Pods the ledger does not hold yet (the caller counts
 *     them). A Workload without a hostname-level assignment is not inflight.
 *   - Then it places this Workload's PodSets, partitions first, then larger units per
 *     accelerator first, then by family, each Pod exactly as the allocator would place it
 *     (alloc.h tsr_alloc_place: the fullest accelerator that still fits, ties by position), so
 *     two 30 % slices share a free accelerator, two 60 % slices do not, an accelerator that holds
 *     its full slice slots takes no more, shares land on distinct accelerators, and a partitioned
 *     accelerator hosts as many instances as its free placements allow.
 *   - Each node named in a PodSet's topology assignment must host its own share; a PodSet
 *     without one is placed Pod by Pod over its flavor's whole node pool (nodes in name order).
 *     A node whose Node object is gone serves nothing.
 *   - The per-accelerator budget is global to the Workload: two PodSets on one flavor cannot
 *     spend one accelerator twice. An accelerator serves a PodSet only when its node belongs to
 *     the PodSet's flavor.
 * The verdict is Ready or Retry, never Rejected; the Retry message names what is short, where,
 * and (for a Workload of more than one PodSet) the starved role. Pure: no I/O, no globals;
 * tsr_admit_judge frees its scratch before returning, a pool owns its own.
 */
#ifndef TSR_CORE_ADMIT_H
#define TSR_CORE_ADMIT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/capability.h"
#include "core/demand.h"
#include "core/ledger.h"

struct tsr_diag;

/* Room for the longest Retry message (admit.c's retry: a 299-byte place, a 95-byte role, a
 * 159-byte need and a 159-byte have besides its own words), so none is ever cut; Kueue keeps up
 * to 32768 bytes of an AdmissionCheck state's message. */
#define TSR_ADMIT_MESSAGE_MAX 1024
#define TSR_ADMIT_READY_MESSAGE                                                                    \
        "the assigned flavor pool has enough free cards to place the request"

/* One node of the snapshot: its accelerators of the pool's model and their rebuilt ledger. */
struct tsr_admit_node {
        const char *name;
        bool present; /* the Node object exists */
        unsigned flavor;
        const struct tsr_accel_cap *caps;
        const struct tsr_accel_ledger *ledger;
        size_t n;
};

/* Pods of a PodSet that the topology assignment puts on node (an index into the snapshot). */
struct tsr_admit_placement {
        size_t node;
        unsigned pods;
};

/* A PodSet whose admission names no single accelerator flavor (its credits resource). */
#define TSR_ADMIT_NO_FLAVOR UINT_MAX

struct tsr_admit_podset {
        const char *name;
        unsigned count; /* Pods in the PodSet */
        struct tsr_demand demand;
        unsigned flavor;     /* or TSR_ADMIT_NO_FLAVOR: judged Retry */
        size_t n_placements; /* 0: no hostname-level assignment */
        const struct tsr_admit_placement *placements;
};

struct tsr_admit_workload {
        const char *name;
        size_t n_podsets;
        const struct tsr_admit_podset *podsets;
};

enum tsr_check_state {
        TSR_CHECK_PENDING,
        TSR_CHECK_READY,
        TSR_CHECK_RETRY,
        TSR_CHECK_REJECTED,
};

/* Kueue's spelling of a check state ("Pending", "Ready", "Retry", "Rejected"). */
const char *tsr_check_state_name(enum tsr_check_state s);

struct tsr_admit_verdict {
        enum tsr_check_state state; /* TSR_CHECK_READY or TSR_CHECK_RETRY */
        char message[TSR_ADMIT_MESSAGE_MAX];
};

/*
 * A pool judged many times: its nodes put in name order once, their ledgers copied once, the
 * inflight Workloads charged once (tsr_admit_pool_charge), then any number of verdicts. A verdict
 * works on the pool's own ledgers through an undo log: it copies a node's ledger only when it
 * places a Pod there, and restores those nodes before it returns, so it costs what it places, not
 * what the pool holds, and leaves the pool exactly as it found it. A PodSet without a
 * hostname-level assignment starts its name-order walk where the last walk for the same flavor
 * and demand found the first node that could still host one Pod (the base only fills between
 * charges, so every node before that one still cannot); a charge or an added node forgets those
 * starts. Every verdict equals tsr_admit_judge's on the same nodes and charges.
 *
 * Ownership: the pool copies the nodes' ledgers; their names and caps are borrowed for its life.
 * One caller at a time.
 */
struct tsr_admit_pool;

/* Returns 0 with *out, or TSR_ENOMEM with diag. */
int tsr_admit_pool_new(const struct tsr_admit_node *nodes, size_t n_nodes,
                       struct tsr_admit_pool **out, struct tsr_diag *diag);

/* Adds one node (its ledger copied) at index *index, the next free one. 0 or TSR_ENOMEM. */
int tsr_admit_pool_add(struct tsr_admit_pool *pool, const struct tsr_admit_node *node,
                       size_t *index, struct tsr_diag *diag);

/* Nodes in the pool (the indexes placements name run below it). */
size_t tsr_admit_pool_nodes(const struct tsr_admit_pool *pool);

/*
 * Charges an inflight Workload into the pool for good (best effort: a Pod that no longer fits is
 * not charged). Returns 0, or TSR_EINVAL (a placement names no node of the pool; nothing charged).
 */
int tsr_admit_pool_charge(struct tsr_admit_pool *pool, const struct tsr_admit_workload *inflight,
                          struct tsr_diag *diag);

/* Judges w against the pool as it stands. 0 with *out, TSR_EINVAL or TSR_ENOMEM with diag. */
int tsr_admit_pool_judge(struct tsr_admit_pool *pool, const struct tsr_admit_workload *w,
                         struct tsr_admit_verdict *out, struct tsr_diag *diag);

void tsr_admit_pool_free(struct tsr_admit_pool *pool);

/*
 * Judges w against the nodes after charging the inflight Workloads (their placements count the
 * Pods not yet held): a pool made, charged and judged once. Returns 0 with *out, TSR_EINVAL (a
 * placement names no snapshot node) or TSR_ENOMEM, with diag.
 */
int tsr_admit_judge(const struct tsr_admit_node *nodes, size_t n_nodes,
                    const struct tsr_admit_workload *inflight, size_t n_inflight,
                    const struct tsr_admit_workload *w, struct tsr_admit_verdict *out,
                    struct tsr_diag *diag);

#endif
