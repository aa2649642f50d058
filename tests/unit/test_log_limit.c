/*
 * test_log_limit.c - base/log_limit: the first event of an interval passes, the rest are held
 * back and counted, the count goes to the next line that passes and starts again; four threads
 * racing through one interval let exactly one line pass.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include "base/log_limit.h"

static void sleep_ms(long ms)
{
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

        nanosleep(&ts, NULL);
}

static void test_interval(void **state)
{
        struct tsr_log_limit l = TSR_LOG_LIMIT_INIT(100);
        unsigned long held = 99;

        (void)state;
        assert_true(tsr_log_limit_pass(&l, &held));
        assert_int_equal(held, 0);
        for (int i = 0; i < 5; i++)
                assert_false(tsr_log_limit_pass(&l, &held));
        sleep_ms(150);
        assert_true(tsr_log_limit_pass(&l, &held));
        assert_int_equal(held, 5);
        assert_false(tsr_log_limit_pass(&l, &held));
        sleep_ms(150);
        assert_true(tsr_log_limit_pass(&l, &held));
        assert_int_equal(held, 1);
}

static struct tsr_log_limit shared = TSR_LOG_LIMIT_INIT(60000);
static int passed[4];

static void *racer(void *arg)
{
        int *count = arg;
        unsigned long held;

        for (int i = 0; i < 10000; i++)
                if (tsr_log_limit_pass(&shared, &held))
                        (*count)++;
        return NULL;
}

static void test_race(void **state)
{
        pthread_t t[4];
        int total = 0;

        (void)state;
        for (int i = 0; i < 4; i++)
                assert_int_equal(pthread_create(&t[i], NULL, racer, &passed[i]), 0);
        for (int i = 0; i < 4; i++) {
                pthread_join(t[i], NULL);
                total += passed[i];
        }
        assert_int_equal(total, 1);
        assert_int_equal(atomic_load(&shared.held), 39999);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_interval),
            cmocka_unit_test(test_race),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
