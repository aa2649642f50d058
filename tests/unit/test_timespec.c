/*
 * test_timespec.c - cmocka suite for base/timespec: adding milliseconds carries into the seconds
 * exactly at 1e9 ns, the milliseconds between two instants (truncated, negative backwards), and
 * the reached test on both sides of a deadline to the nanosecond.
 *
 * Invariants: every row asserts exact fields; no test depends on another's state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/timespec.h"

static void test_add_ms(void **state)
{
        static const struct {
                struct timespec t;
                int64_t ms;
                struct timespec want;
        } rows[] = {
            {{10, 0}, 0, {10, 0}},
            {{10, 0}, 1, {10, 1000000}},
            {{10, 0}, 2500, {12, 500000000}},
            {{10, 999000000}, 1, {11, 0}},
            {{10, 999999999}, 1, {11, 999999}},
            {{10, 500000000}, 300000, {310, 500000000}},
        };

        (void)state;
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                struct timespec got = tsr_timespec_add_ms(rows[i].t, rows[i].ms);

                assert_int_equal(got.tv_sec, rows[i].want.tv_sec);
                assert_int_equal(got.tv_nsec, rows[i].want.tv_nsec);
        }
}

static void test_ms_between(void **state)
{
        struct timespec a = {10, 900000000}, b = {12, 100000000}, c = {12, 100999999};

        (void)state;
        assert_int_equal(tsr_timespec_ms_between(&a, &b), 1200);
        assert_int_equal(tsr_timespec_ms_between(&b, &a), -1200);
        assert_int_equal(tsr_timespec_ms_between(&b, &c), 0); /* 0.999999 ms truncates */
        assert_int_equal(tsr_timespec_ms_between(&a, &a), 0);
}

static void test_reached(void **state)
{
        struct timespec deadline = {20, 500};
        struct timespec before = {20, 499}, at = {20, 500}, after = {20, 501},
                        earlier_s = {19, 900}, later_s = {21, 0};

        (void)state;
        assert_false(tsr_timespec_reached(&before, &deadline));
        assert_true(tsr_timespec_reached(&at, &deadline));
        assert_true(tsr_timespec_reached(&after, &deadline));
        assert_false(tsr_timespec_reached(&earlier_s, &deadline));
        assert_true(tsr_timespec_reached(&later_s, &deadline));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_add_ms),
            cmocka_unit_test(test_ms_between),
            cmocka_unit_test(test_reached),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
