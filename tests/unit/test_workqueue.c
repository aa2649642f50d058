/*
 * test_workqueue.c - cmocka suite for controller/workqueue: a key waits once however often it is
 * added; a key added while it is processed comes back once after done, never to two workers at
 * once; delays hand keys out in due order and the earliest delay of a key wins; rate-limited adds
 * back off exponentially to the cap and forget resets them; shutdown wakes a blocked get; and
 * four threads hammering a few keys never see one key twice at once (run under TSan in CI).
 *
 * Invariants: every test makes its own queue; timing assertions only bound from below (a delayed
 * key is never early) or use generous ceilings, so a loaded machine cannot fail them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/err.h"
#include "controller/workqueue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t now_ms(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void test_dedup(void **state)
{
        struct tsr_workqueue *q = tsr_workqueue_new(0, 0);
        char key[TSR_WORKQUEUE_KEY_MAX];

        (void)state;
        assert_non_null(q);
        assert_int_equal(tsr_workqueue_add(q, "a"), 0);
        assert_int_equal(tsr_workqueue_add(q, "b"), 0);
        assert_int_equal(tsr_workqueue_add(q, "a"), 0);
        assert_int_equal(tsr_workqueue_len(q), 2);
        assert_true(tsr_workqueue_get(q, key));
        assert_string_equal(key, "a");
        assert_true(tsr_workqueue_get(q, key));
        assert_string_equal(key, "b");
        assert_int_equal(tsr_workqueue_len(q), 0);
        tsr_workqueue_done(q, "a");
        tsr_workqueue_done(q, "b");
        assert_int_equal(tsr_workqueue_len(q), 0);
        assert_int_equal(tsr_workqueue_add(q, ""), TSR_EINVAL);
        {
                char longest[TSR_WORKQUEUE_KEY_MAX + 1];

                memset(longest, 'k', sizeof(longest) - 2);
                longest[sizeof(longest) - 2] = '\0'; /* 511 characters: the longest key */
                assert_int_equal(tsr_workqueue_add(q, longest), 0);
                longest[sizeof(longest) - 2] = 'k';
                longest[sizeof(longest) - 1] = '\0'; /* 512: one too many */
                assert_int_equal(tsr_workqueue_add(q, longest), TSR_EINVAL);
        }
        tsr_workqueue_free(q);
}

static void test_dirty_while_processing(void **state)
{
        struct tsr_workqueue *q = tsr_workqueue_new(0, 0);
        char key[TSR_WORKQUEUE_KEY_MAX];

        (void)state;
        tsr_workqueue_add(q, "a");
        assert_true(tsr_workqueue_get(q, key));
        tsr_workqueue_add(q, "a"); /* processing: marked dirty, not handed out */
        tsr_workqueue_add(q, "a");
        assert_int_equal(tsr_workqueue_len(q), 0);
        tsr_workqueue_done(q, "a");
        assert_int_equal(tsr_workqueue_len(q), 1); /* once, however often it was added */
        assert_true(tsr_workqueue_get(q, key));
        assert_string_equal(key, "a");
        tsr_workqueue_done(q, "a");
        assert_int_equal(tsr_workqueue_len(q), 0);
        tsr_workqueue_free(q);
}

/*
 * A batch takes the waiting keys of a prefix, oldest first, up to its size; the others keep their
 * order; a key taken is processing (added again it waits for done, once); a delayed key joins a
 * batch only once due.
 */
static void test_take_matching(void **state)
{
        struct tsr_workqueue *q = tsr_workqueue_new(0, 0);
        char keys[3][TSR_WORKQUEUE_KEY_MAX], key[TSR_WORKQUEUE_KEY_MAX];

        (void)state;
        tsr_workqueue_add(q, "workload/a");
        tsr_workqueue_add(q, "chain");
        tsr_workqueue_add(q, "workload/b");
        tsr_workqueue_add(q, "workload/c");
        tsr_workqueue_add(q, "node/x");
        tsr_workqueue_add(q, "workload/d");
        tsr_workqueue_add_after(q, "workload/e", 60000);
        assert_int_equal(tsr_workqueue_take_matching(q, "workload/", keys, 2), 2);
        assert_string_equal(keys[0], "workload/a");
        assert_string_equal(keys[1], "workload/b");
        assert_int_equal(tsr_workqueue_len(q), 4);
        tsr_workqueue_add(q, "workload/a"); /* processing: dirty, not waiting */
        assert_int_equal(tsr_workqueue_len(q), 4);
        assert_int_equal(tsr_workqueue_take_matching(q, "workload/", keys, 3), 2);
        assert_string_equal(keys[0], "workload/c");
        assert_string_equal(keys[1], "workload/d");
        assert_int_equal(tsr_workqueue_take_matching(q, "workload/", keys, 3), 0);
        assert_true(tsr_workqueue_get(q, key));
        assert_string_equal(key, "chain");
        assert_true(tsr_workqueue_get(q, key));
        assert_string_equal(key, "node/x");
        for (const char *const *k =
                 (const char *const[]){"chain", "node/x", "workload/a", "workload/b", "workload/c",
                                       "workload/d", NULL};
             *k; k++)
                tsr_workqueue_done(q, *k);
        assert_int_equal(tsr_workqueue_len(q), 1); /* workload/a, added while processing */
        assert_int_equal(tsr_workqueue_take_matching(q, "workload/", keys, 3), 1);
        assert_string_equal(keys[0], "workload/a");
        tsr_workqueue_done(q, "workload/a");
        tsr_workqueue_shutdown(q);
        tsr_workqueue_add(q, "workload/f");
        assert_int_equal(tsr_workqueue_take_matching(q, "workload/", keys, 3), 0);
        tsr_workqueue_free(q);
}

static void test_delays(void **state)
{
        struct tsr_workqueue *q = tsr_workqueue_new(0, 0);
        char key[TSR_WORKQUEUE_KEY_MAX];
        int64_t t0 = now_ms();

        (void)state;
        tsr_workqueue_add_after(q, "late", 300);
        tsr_workqueue_add_after(q, "soon", 100);
        tsr_workqueue_add_after(q, "late", 5000); /* the earlier delay stands */
        assert_int_equal(tsr_workqueue_len(q), 0);
        assert_true(tsr_workqueue_get(q, key));
        assert_string_equal(key, "soon");
        assert_true(now_ms() - t0 >= 100);
        assert_true(tsr_workqueue_get(q, key));
        assert_string_equal(key, "late");
        assert_true(now_ms() - t0 >= 300);
        assert_true(now_ms() - t0 < 4000);
        tsr_workqueue_free(q);
}

static void test_rate_limited(void **state)
{
        struct tsr_workqueue *q = tsr_workqueue_new(40, 100);
        char key[TSR_WORKQUEUE_KEY_MAX];
        int64_t t0;

        (void)state;
        for (unsigned want = 40, i = 0; i<4; i++, want = want * 2> 100 ? 100 : want * 2) {
                t0 = now_ms();
                assert_int_equal(tsr_workqueue_add_rate_limited(q, "k"), 0);
                assert_int_equal(tsr_workqueue_failures(q, "k"), i + 1);
                assert_true(tsr_workqueue_get(q, key));
                assert_true(now_ms() - t0 >= want); /* 40, 80, then the 100 cap */
                tsr_workqueue_done(q, "k");
        }
        tsr_workqueue_forget(q, "k");
        assert_int_equal(tsr_workqueue_failures(q, "k"), 0);
        t0 = now_ms();
        tsr_workqueue_add_rate_limited(q, "k");
        assert_true(tsr_workqueue_get(q, key));
        assert_true(now_ms() - t0 >= 40);
        assert_true(now_ms() - t0 < 2000);
        tsr_workqueue_free(q);
}

static void *blocked_get(void *arg)
{
        char key[TSR_WORKQUEUE_KEY_MAX];

        return tsr_workqueue_get(arg, key) ? (void *)1 : NULL;
}

static void test_shutdown(void **state)
{
        struct tsr_workqueue *q = tsr_workqueue_new(0, 0);
        pthread_t t;
        void *got = (void *)1;

        (void)state;
        assert_int_equal(pthread_create(&t, NULL, blocked_get, q), 0);
        tsr_workqueue_add_after(q, "never", 60000);
        tsr_workqueue_shutdown(q);
        pthread_join(t, &got);
        assert_null(got);
        assert_int_equal(tsr_workqueue_add(q, "after"), 0); /* ignored */
        assert_int_equal(tsr_workqueue_len(q), 0);
        tsr_workqueue_free(q);
}

#define KEYS    4
#define ROUNDS  2000
#define WORKERS 4

struct hammer {
        struct tsr_workqueue *q;
        atomic_int busy[KEYS];
        atomic_int overlaps, handled, added;
};

static void *worker(void *arg)
{
        struct hammer *h = arg;
        char key[TSR_WORKQUEUE_KEY_MAX];

        while (tsr_workqueue_get(h->q, key)) {
                int k = key[1] - '0';

                if (atomic_fetch_add(&h->busy[k], 1) != 0)
                        atomic_fetch_add(&h->overlaps, 1);
                atomic_fetch_add(&h->handled, 1);
                atomic_fetch_sub(&h->busy[k], 1);
                tsr_workqueue_done(h->q, key);
        }
        return NULL;
}

static void test_concurrent(void **state)
{
        struct hammer h = {.q = tsr_workqueue_new(0, 0)};
        pthread_t t[WORKERS];
        char key[3] = "k0";

        (void)state;
        for (int i = 0; i < WORKERS; i++)
                assert_int_equal(pthread_create(&t[i], NULL, worker, &h), 0);
        for (int r = 0; r < ROUNDS; r++) {
                key[1] = (char)('0' + r % KEYS);
                assert_int_equal(tsr_workqueue_add(h.q, key), 0);
        }
        while (tsr_workqueue_len(h.q) > 0) {
                struct timespec ms = {0, 1000000};

                nanosleep(&ms, NULL);
        }
        tsr_workqueue_shutdown(h.q);
        for (int i = 0; i < WORKERS; i++)
                pthread_join(t[i], NULL);
        assert_int_equal(atomic_load(&h.overlaps), 0);
        assert_true(atomic_load(&h.handled) >= KEYS);
        assert_true(atomic_load(&h.handled) <= ROUNDS);
        tsr_workqueue_free(h.q);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_dedup),         cmocka_unit_test(test_dirty_while_processing),
            cmocka_unit_test(test_delays),        cmocka_unit_test(test_rate_limited),
            cmocka_unit_test(test_shutdown),      cmocka_unit_test(test_concurrent),
            cmocka_unit_test(test_take_matching),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
