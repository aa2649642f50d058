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

/*
 * Polls expr every 10 ms for up to wait_ms; fails the running cmocka test with what when it stays
 * false (the including file has cmocka.h).
 */
#define EVENTUALLY_WITHIN(expr, wait_ms, what)                                                     \
        do {                                                                                       \
                long deadline_ = now_ms() + (wait_ms);                                             \
                while (!(expr)) {                                                                  \
                        if (now_ms() > deadline_)                                                  \
                                fail_msg("not within %d ms: %s", (int)(wait_ms), what);            \
                        sleep_ms(10);                                                              \
                }                                                                                  \
        } while (0)

#endif
