/*
 * report.h - what a replay prints: per trace a table of every policy at arrival 100 % (mean and
 * sample SD over the seeds of GPU allocation, unallocated GPUs, fragmentation rate; the published
 * FGD-artifact number beside it where there is one), the allocation curve at 80..130 %, the
 * unallocated GPUs at arrival 100 % by node shape (run.h), a CSV of every seed's curve, and an
 * SVG with two panels per trace: unallocated GPU % against arrived workload (80..130 %), one line
 * per policy (the mean over seeds) with the band from its least to its most seed and the
 * published mean at 100 % as a diamond; and one bar per policy of its unallocated GPUs at 100 %
 * stacked by node shape. Both panels have axis titles.
 *
 * Ownership: the caller's buffers; series borrow their results. Pure.
 */
#ifndef TSR_REPLAY_REPORT_H
#define TSR_REPLAY_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "replay/run.h"

/* Every seed of one policy on one trace. */
struct tsr_replay_series {
        enum tsr_policy_id policy;
        const uint64_t *seeds;
        const struct tsr_replay_result *runs; /* one per seed */
        const double *seconds;                /* wall time per seed */
        size_t n;
};

/* One trace's runs. */
struct tsr_replay_trace_report {
        const char *trace; /* "default" */
        const struct tsr_replay_setup *setup;
        const struct tsr_replay_series *series;
        size_t n_series;
};

/* The arrival points (%) the curve tables print. */
#define TSR_REPLAY_CURVE_POINTS 8
extern const unsigned tsr_replay_curve_points[TSR_REPLAY_CURVE_POINTS];

struct tsr_replay_stat {
        double mean, sd;
};

/* Mean and sample SD of v[0..n) (SD 0 below two values). */
struct tsr_replay_stat tsr_replay_stat_of(const double *v, size_t n);

/* Published unallocated GPUs at 100 % for (trace, policy), or -1 when the artifact has none. */
double tsr_replay_published(const char *trace, const char *policy);

/* The mean over the series' seeds of unallocated GPUs at 100 %. */
double tsr_replay_mean_unallocated(const struct tsr_replay_setup *s,
                                   const struct tsr_replay_series *v);

int tsr_replay_report_table(struct tsr_buf *out, const struct tsr_replay_trace_report *t);
int tsr_replay_report_csv(struct tsr_buf *out, const struct tsr_replay_trace_report *t, size_t n,
                          int header);
int tsr_replay_report_svg(struct tsr_buf *out, const struct tsr_replay_trace_report *t, size_t n);

#endif
