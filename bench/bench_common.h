/*
 * bench_common.h - what every benchmark needs besides the thing it measures: a monotonic clock,
 * a series of latencies summarised by nearest-rank percentiles, and a description of the machine
 * the numbers were measured on.
 *
 * Ownership: a series owns its array (bench_series_release frees it); it grows up to
 * BENCH_SERIES_MAX samples, past which bench_series_add refuses. Not thread-safe: one series is
 * fed by one thread. The machine functions read /proc and keep nothing.
 */
#ifndef TSR_BENCH_COMMON_H
#define TSR_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_NS_PER_SECOND 1000000000LL
#define BENCH_SERIES_MAX    (16u * 1024 * 1024)

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);

struct bench_series {
        int64_t *ns; /* samples in nanoseconds; sorted once bench_series_sort ran */
        size_t n, cap;
};

void bench_series_init(struct bench_series *s);

void bench_series_release(struct bench_series *s);

/* Appends one sample. Returns 0, or -1 (no memory, or BENCH_SERIES_MAX samples already). */
int bench_series_add(struct bench_series *s, int64_t ns);

/* Sorts the samples ascending (the percentiles below read a sorted series). */
void bench_series_sort(struct bench_series *s);

/* The nearest-rank percentile q (0..1] of a sorted series, in microseconds; 0 when empty. */
double bench_series_pct_us(const struct bench_series *s, double q);

/* The CPU model from /proc/cpuinfo into out, or "?". */
void bench_cpu_model(char *out, size_t len);

/* The 1-minute load average from /proc/loadavg, or -1. */
double bench_load_average(void);

#endif
