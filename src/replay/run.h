/*
 * run.h - one replay of a trace under the FGD protocol (spec/fgd-benchmark-protocol.md §1):
 * the pods sorted by name and shuffled with the seed, tuned to `tune` x the cluster's GPU capacity
 * (below it: clones drawn uniformly with replacement appended until the next would pass the
 * target; above it: random pods removed until it is met), then placed one at a time by the
 * policy, a pod that fits nowhere dropped, nothing ever leaving. After every pod the allocated
 * GPU milli, the cluster's fragment F(M) and the arrived GPU milli (placed or not) are recorded
 * and binned by arrival = round(arrived / capacity * 100); a point's value is the mean of its
 * bin's events, or of the next bin's, then the previous one's, when it has none.
 *
 * When the arrived GPU milli first reaches the cluster's capacity (arrival 100 %), the run also
 * notes where the unallocated GPUs are, by node shape: a node whose free CPU is below what the
 * least CPU-hungry GPU shape of the typical workload asks is CPU-starved (no typical GPU task can
 * use its idle GPUs); every other node counts by its GPU count (1, 2, 4, 8, other).
 *
 * Ownership: a setup borrows the trace arrays for its life (tsr_replay_setup_release). Pure and
 * deterministic: the same setup, policy and seed give the same result.
 */
#ifndef TSR_REPLAY_RUN_H
#define TSR_REPLAY_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "replay/cluster.h"
#include "replay/frag.h"
#include "replay/policy.h"
#include "replay/trace.h"

#define TSR_REPLAY_POINTS 131 /* arrival 0 .. 130 % */

/* The node shapes the unallocated GPUs at arrival 100 % are counted by. */
enum tsr_replay_shape {
        TSR_SHAPE_CPU_STARVED,
        TSR_SHAPE_GPU1,
        TSR_SHAPE_GPU2,
        TSR_SHAPE_GPU4,
        TSR_SHAPE_GPU8,
        TSR_SHAPE_OTHER,
        TSR_REPLAY_SHAPES
};

/* "CPU-starved nodes", "1-GPU nodes", ... */
const char *tsr_replay_shape_name(enum tsr_replay_shape s);

struct tsr_replay_setup {
        const struct tsr_trace_node *nodes;
        size_t n_nodes;
        const struct tsr_trace_pod *pods;
        size_t n_pods;
        double tune;        /* 1.3 */
        enum tsr_ties ties; /* the framework's tie-break; tsr_replay_setup_init: FIRST */
        unsigned label_lag; /* tessera's fit-label lag in binds (policy.h); init: 0 */
        struct tsr_rcluster cluster;
        struct tsr_frag_workload typical;
};

struct tsr_replay_result {
        double alloc_pct[TSR_REPLAY_POINTS];      /* allocated GPU milli / capacity */
        double frag_total_pct[TSR_REPLAY_POINTS]; /* F(M) / capacity */
        double frag_rate_pct[TSR_REPLAY_POINTS];  /* F(M) / free GPU milli */
        bool have[TSR_REPLAY_POINTS];             /* the point has a value */
        double idle_gpus[TSR_REPLAY_SHAPES]; /* unallocated GPUs by node shape at arrival 100 % */
        bool have_idle;                      /* the run reached arrival 100 % */
        size_t pods, placed, clones;         /* submitted, bound, of them tuned-in clones */
        int64_t arrived_milli, used_milli;   /* at the end */
};

/* Prepares the cluster and the typical workload of a trace. 0, or an error with diag. */
int tsr_replay_setup_init(struct tsr_replay_setup *s, const struct tsr_trace_node *nodes,
                          size_t n_nodes, const struct tsr_trace_pod *pods, size_t n_pods,
                          double tune, struct tsr_diag *diag);

void tsr_replay_setup_release(struct tsr_replay_setup *s);

/* Runs policy with seed. 0, or TSR_ENOMEM with diag. */
int tsr_replay_run(struct tsr_replay_setup *s, enum tsr_policy_id policy, uint64_t seed,
                   struct tsr_replay_result *out, struct tsr_diag *diag);

/* Unallocated GPUs at arrival point x: (100 - alloc) % of the cluster's GPUs. */
double tsr_replay_unallocated_gpus(const struct tsr_replay_setup *s,
                                   const struct tsr_replay_result *r, unsigned x);

#endif
