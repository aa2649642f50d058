/*
 * arrival.h - the FGD protocol's submission order and arrival bins (spec/fgd-benchmark-protocol.md
 * §1), shared by the replay's two loops: run.c's (the gpu_milli policies) and the MIG variant's
 * (replay/mig.h), which place the same pods in the same order on the same arrival axis.
 *
 * Order: the pods sorted by name, shuffled with the caller's stream (Fisher-Yates from the last
 * position down), then tuned to a target of requested GPU milli (below it: clones drawn uniformly
 * with replacement appended until the next would pass the target; above it: random pods removed
 * until it is met). A stream seeded with s gives the pod order tsr_replay_run uses for seed s.
 *
 * Bins: each event adds up to TSR_REPLAY_BIN_VALUES values to the bin round(arrived / capacity *
 * 100); a point's value is the mean of its bin's events, or of the next bin's, then the previous
 * one's, when it has none.
 *
 * Pure. Ownership: tsr_replay_order_build returns a new array of pointers into pods (free with
 * free()); it borrows pods for the array's life.
 */
#ifndef TSR_REPLAY_ARRIVAL_H
#define TSR_REPLAY_ARRIVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "replay/rng.h"
#include "replay/run.h"
#include "replay/trace.h"

#define TSR_REPLAY_BIN_VALUES 4

/* The GPU milli a pod requests: num_gpu x gpu_milli (0 for a CPU-only pod). */
int64_t tsr_replay_request(const struct tsr_trace_pod *p);

/*
 * The submission order of pods[0..n) tuned to target milli: a new array in *out of *n_out
 * pointers, *clones of them tuned-in clones. 0, or TSR_ENOMEM (nothing written).
 */
int tsr_replay_order_build(const struct tsr_trace_pod *pods, size_t n, int64_t target,
                           struct tsr_rng *rng, const struct tsr_trace_pod ***out, size_t *n_out,
                           size_t *clones);

struct tsr_replay_bins {
        double sum[TSR_REPLAY_BIN_VALUES][TSR_REPLAY_POINTS];
        unsigned n[TSR_REPLAY_POINTS];
};

/* Adds one event's values v[0..nv) (nv <= TSR_REPLAY_BIN_VALUES) at arrived of capacity milli;
 * an event past the last point is not recorded. */
void tsr_replay_bins_add(struct tsr_replay_bins *b, int64_t arrived, int64_t capacity,
                         const double *v, size_t nv);

/* Point x's values into v[0..nv): false (v untouched) when neither it nor a neighbour has one. */
bool tsr_replay_bins_point(const struct tsr_replay_bins *b, unsigned x, double *v, size_t nv);

#endif
