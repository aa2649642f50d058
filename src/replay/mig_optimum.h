/*
 * mig_optimum.h - the MIG variant on small instances: the exact offline optimum by exhaustive
 * search, tessera's online result on the same instance (replay/mig.h), and their gap over many
 * random instances drawn from a trace's fractional task sizes.
 *
 * An instance: 1..TSR_MIG_OPT_NODES_MAX nodes of one MIG product, each with 1..TSR_TRACE_GPUS_MAX
 * GPUs (at most TSR_MIG_OPT_GPUS_MAX in all), every GPU partitioned and empty, and a sequence of
 * at most TSR_MIG_OPT_TASKS_MAX tasks in arrival order, each one instance of an offered profile
 * asking no CPU or memory (the comparison isolates placement). A solution says per task where
 * it went (node, GPU, start) or that it was dropped; its value is the memory slices held.
 *
 * The optimum, over every way to place (any node, GPU and legal start that overlaps nothing
 * placed before) or drop each task:
 *   TSR_MIG_OPT_DROPS            drops allowed: the best any placement, online or offline, can
 *                                reach on this order;
 *   TSR_MIG_OPT_WORK_CONSERVING  a task that fits somewhere must be placed: the best of every
 *                                scheduler that, like tessera's chain, never refuses a task it
 *                                could place -- so tessera's gap to it is the cost of its
 *                                placement choices alone, and this optimum's gap to the first is
 *                                the cost of never refusing.
 * Search: f(k, S) = the best slices tasks k.. add to state S (per GPU its occupied slices), the
 * maximum over dropping task k (when allowed) and each placement p of size_k + f(k+1, S + p);
 * memoised on (k, S with GPUs sorted within each node and nodes sorted: a relabelling that
 * changes nothing), cut short once it reaches the slices still asked or still free. Exact while
 * no profile's per-GPU instance cap binds before its legal placements run out (so the state can
 * be occupancy alone): true of every 8-slice product, whose caps 7/4/3/2/1 equal their disjoint
 * placements; an instance using a profile whose cap binds (a "+me" one) is refused.
 *
 * Pure and deterministic. Ownership: the caller's structs; the search's memo is freed before
 * returning.
 */
#ifndef TSR_REPLAY_MIG_OPTIMUM_H
#define TSR_REPLAY_MIG_OPTIMUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/diag.h"
#include "core/catalog.h"
#include "replay/rng.h"

#define TSR_MIG_OPT_NODES_MAX 4
#define TSR_MIG_OPT_GPUS_MAX  4
#define TSR_MIG_OPT_TASKS_MAX 16
#define TSR_MIG_OPT_WIDTH_MAX 16 /* memory slices per GPU the search packs */

enum tsr_mig_opt_mode { TSR_MIG_OPT_DROPS, TSR_MIG_OPT_WORK_CONSERVING };

struct tsr_mig_small {
        const struct tsr_product *product;
        unsigned n_nodes;
        unsigned gpus[TSR_MIG_OPT_NODES_MAX]; /* per node */
        size_t n_tasks;
        uint8_t profile[TSR_MIG_OPT_TASKS_MAX]; /* product profile index per task, in order */
};

struct tsr_mig_choice {
        int node; /* -1: dropped */
        unsigned gpu, start;
};

struct tsr_mig_solution {
        unsigned slices; /* memory slices held at the end */
        struct tsr_mig_choice choice[TSR_MIG_OPT_TASKS_MAX];
        size_t states; /* the search's memo entries (0 for tessera's) */
};

/* The memory slices of the instance's cluster. */
unsigned tsr_mig_small_slices(const struct tsr_mig_small *in);

/* The optimum of in under mode, with a solution reaching it. 0, or with diag TSR_EINVAL (an
 * instance past the limits, a profile not offered), TSR_ENOTSUP (a profile whose instance cap
 * binds), TSR_ENOMEM or TSR_ETOOBIG (the memo passed its ceiling). */
int tsr_mig_optimum_solve(const struct tsr_mig_small *in, enum tsr_mig_opt_mode mode,
                          struct tsr_mig_solution *out, struct tsr_diag *diag);

/* tessera's online result on in: each task placed by tsr_mig_place and bound as it arrives. 0, or
 * TSR_EINVAL / TSR_ENOMEM with diag. */
int tsr_mig_online(const struct tsr_mig_small *in, struct tsr_mig_solution *out,
                   struct tsr_diag *diag);

/* A random instance on product p: 1-2 nodes of 1-2 GPUs, then tasks drawn uniformly with
 * replacement from milli[0..n) (a trace's fractional gpu_milli, one entry per task, so sizes
 * come at the trace's frequencies) and rounded (tsr_mig_round) until the slices asked reach
 * 130 % of the cluster's or max_tasks (<= TSR_MIG_OPT_TASKS_MAX) are drawn. 0 or TSR_EINVAL. */
int tsr_mig_small_draw(const struct tsr_product *p, const unsigned *milli, size_t n,
                       size_t max_tasks, struct tsr_rng *rng, struct tsr_mig_small *out);

/* The gap over a batch of instances: tessera against both optima. */
struct tsr_mig_gap {
        size_t n;
        size_t optimal, optimal_wc; /* instances where tessera reached each optimum */
        double ratio_sum, ratio_worst, ratio_wc_sum, ratio_wc_worst; /* tessera / optimum */
        double opt_pct, wc_pct, tessera_pct; /* sums of slices held / cluster slices, % */
        size_t states_max, tasks;
        double seconds;                       /* the caller's: wall time of the batch */
        struct tsr_mig_small worst, worst_wc; /* the first instances of each worst ratio */
        struct tsr_mig_solution worst_opt, worst_tessera, worst_wc_opt, worst_wc_tessera;
};

/* Adds instance in to g (solving both optima and running tessera). 0, or as the solvers. */
int tsr_mig_gap_add(struct tsr_mig_gap *g, const struct tsr_mig_small *in, struct tsr_diag *diag);

/* Adds batch g to into (seconds too). */
void tsr_mig_gap_merge(struct tsr_mig_gap *into, const struct tsr_mig_gap *g);

/* Appends the column heads of tsr_mig_gap_report's lines. */
int tsr_mig_gap_header(struct tsr_buf *out);

/* Appends one batch's line (label: "seed 42") and, when worst is set, its worst instances. */
int tsr_mig_gap_report(struct tsr_buf *out, const char *label, const struct tsr_mig_gap *g,
                       bool worst);

#endif
