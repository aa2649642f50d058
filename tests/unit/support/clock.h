/*
 * clock.h - the monotonic clock and the sleep the tests' waits share: milliseconds since an
 * arbitrary origin (CLOCK_MONOTONIC), and a sleep of ms milliseconds (nanosleep, not resumed
 * when a signal cuts it short: every caller polls in a loop against a deadline).
 *
 * Ownership: nothing is allocated; thread-safe.
 */
#ifndef TSR_TEST_SUPPORT_CLOCK_H
#define TSR_TEST_SUPPORT_CLOCK_H

/* Milliseconds on the monotonic clock. */
long now_ms(void);

/* Sleeps about ms milliseconds. */
void sleep_ms(long ms);

#endif
