/*
 * timespec.h - millisecond arithmetic on struct timespec, as the daemons' loops use it for
 * deadlines and elapsed times (the clock is read by the caller: CLOCK_MONOTONIC for intervals,
 * CLOCK_REALTIME for pthread_cond_timedwait), and the one monotonic millisecond clock every
 * module reads its intervals from. Results are normalized (0 <= tv_nsec < 1e9). Safe from any
 * thread; all but tsr_monotonic_ms are pure.
 */
#ifndef TSR_BASE_TIMESPEC_H
#define TSR_BASE_TIMESPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* t plus ms milliseconds (ms >= 0). */
struct timespec tsr_timespec_add_ms(struct timespec t, int64_t ms);

/* The milliseconds from `from` to `to`, truncated; negative when `to` is earlier. */
int64_t tsr_timespec_ms_between(const struct timespec *from, const struct timespec *to);

/* CLOCK_MONOTONIC in milliseconds: for intervals and deadlines, never for wall time. */
int64_t tsr_monotonic_ms(void);

/* True when now is at or past deadline. */
bool tsr_timespec_reached(const struct timespec *now, const struct timespec *deadline);

#endif
