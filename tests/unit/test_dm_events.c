/*
 * test_dm_events.c - cmocka suite for devicemanager/events: an Event on a Pod names the Pod in its
 * namespace, one without names the node; the same (reason, object, message) within the window is
 * suppressed and posted again after it, another message or object is not; a full queue drops
 * instead of blocking; a failed post is counted. The post callback records and can block, so the
 * worker's progress is stepped by the test (threaded: suite devicemanager, run under TSan in CI).
 *
 * Invariants: every test makes its own events object; waits poll the stats with a ceiling.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/err.h"
#include "devicemanager/events.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct recorder {
        pthread_mutex_t mu;
        pthread_cond_t cond;
        bool hold; /* the post waits while set */
        int fail;  /* the post's return */
        size_t n;
        char kind[8][8], ns[8][64], name[8][64], reason[8][32], type[8][16], comp[8][32];
};

static int post(void *ctx, const struct tsr_kube_event_record *ev, struct tsr_diag *diag)
{
        struct recorder *r = ctx;
        int rc;

        pthread_mutex_lock(&r->mu);
        while (r->hold)
                pthread_cond_wait(&r->cond, &r->mu);
        if (r->n < 8) {
                snprintf(r->kind[r->n], sizeof(r->kind[0]), "%s", ev->kind);
                snprintf(r->ns[r->n], sizeof(r->ns[0]), "%s", ev->namespace_ ? ev->namespace_ : "");
                snprintf(r->name[r->n], sizeof(r->name[0]), "%s", ev->name);
                snprintf(r->reason[r->n], sizeof(r->reason[0]), "%s", ev->reason);
                snprintf(r->type[r->n], sizeof(r->type[0]), "%s", ev->type);
                snprintf(r->comp[r->n], sizeof(r->comp[0]), "%s", ev->component);
        }
        r->n++;
        rc = r->fail ? tsr_diag_set(diag, r->fail, "refused") : 0;
        pthread_mutex_unlock(&r->mu);
        return rc;
}

static void recorder_init(struct recorder *r)
{
        memset(r, 0, sizeof(*r));
        pthread_mutex_init(&r->mu, NULL);
        pthread_cond_init(&r->cond, NULL);
}

static void release(struct recorder *r)
{
        pthread_mutex_lock(&r->mu);
        r->hold = false;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->mu);
}

/* Waits (at most 5 s) until posted + failed reaches n. */
static void wait_done(struct tsr_dm_events *e, unsigned long n)
{
        struct tsr_dm_events_stats st;
        struct timespec ms = {0, 1000000};

        for (int i = 0; i < 5000; i++) {
                tsr_dm_events_stats(e, &st);
                if (st.posted + st.failed >= n)
                        return;
                nanosleep(&ms, NULL);
        }
        fail_msg("only %lu of %lu Events posted", st.posted + st.failed, n);
}

static struct tsr_dm_events *start(struct recorder *r, unsigned window_ms)
{
        struct tsr_dm_events_opts o = {"node-a", window_ms, post, r};
        struct tsr_dm_events *e = NULL;

        assert_int_equal(tsr_dm_events_new(&o, &e), 0);
        return e;
}

static void test_objects(void **state)
{
        struct recorder r;
        struct tsr_dm_events *e;

        (void)state;
        recorder_init(&r);
        e = start(&r, 0);
        assert_true(tsr_dm_events_emit(e, "team-a/p1", "Warning", "AllocationRefused", "m", 0));
        assert_true(tsr_dm_events_emit(e, NULL, "Normal", "RebootRecovered", "m", 0));
        assert_true(tsr_dm_events_emit(e, "", "Warning", "MIGCarveFailed", "m", 0));
        wait_done(e, 3);
        assert_string_equal(r.kind[0], "Pod");
        assert_string_equal(r.ns[0], "team-a");
        assert_string_equal(r.name[0], "p1");
        assert_string_equal(r.type[0], "Warning");
        assert_string_equal(r.comp[0], "tessera-device-manager");
        assert_string_equal(r.kind[1], "Node");
        assert_string_equal(r.ns[1], "");
        assert_string_equal(r.name[1], "node-a");
        assert_string_equal(r.reason[1], "RebootRecovered");
        assert_string_equal(r.kind[2], "Node");
        tsr_dm_events_free(e);
}

static void test_dedupe(void **state)
{
        struct tsr_dm_events_stats st;
        struct recorder r;
        struct tsr_dm_events *e;

        (void)state;
        recorder_init(&r);
        e = start(&r, 1000);
        assert_true(tsr_dm_events_emit(e, "ns/p", "Warning", "AllocationRefused", "full", 0));
        for (int i = 1; i < 100; i++) /* a kubelet retrying every 10 ms */
                assert_false(
                    tsr_dm_events_emit(e, "ns/p", "Warning", "AllocationRefused", "full", i * 10));
        assert_true(tsr_dm_events_emit(e, "ns/p", "Warning", "AllocationRefused", "other", 500));
        assert_true(tsr_dm_events_emit(e, "ns/q", "Warning", "AllocationRefused", "full", 500));
        assert_true(tsr_dm_events_emit(e, "ns/p", "Warning", "AllocationRefused", "full", 1000));
        assert_false(tsr_dm_events_emit(e, "ns/p", "Warning", "AllocationRefused", "full", 1999));
        wait_done(e, 4);
        tsr_dm_events_stats(e, &st);
        assert_int_equal(st.emitted, 104);
        assert_int_equal(st.suppressed, 100);
        assert_int_equal(st.posted, 4);
        assert_int_equal(st.dropped, 0);
        tsr_dm_events_free(e);
}

static void test_full_and_failed(void **state)
{
        struct tsr_dm_events_stats st;
        struct recorder r;
        struct tsr_dm_events *e;
        char msg[16];
        int queued = 0;

        (void)state;
        recorder_init(&r);
        r.hold = true; /* the worker blocks in its first post */
        r.fail = TSR_EIO;
        e = start(&r, 0);
        for (int i = 0; i < 100; i++) {
                snprintf(msg, sizeof(msg), "m%d", i);
                queued += tsr_dm_events_emit(e, "ns/p", "Warning", "AllocationRefused", msg, 0);
        }
        tsr_dm_events_stats(e, &st);
        assert_int_equal(st.dropped, (unsigned long)(100 - queued));
        assert_true(st.dropped > 0);
        release(&r);
        wait_done(e, (unsigned long)queued);
        tsr_dm_events_stats(e, &st);
        assert_int_equal(st.failed, (unsigned long)queued);
        assert_int_equal(st.posted, 0);
        tsr_dm_events_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_objects),
            cmocka_unit_test(test_dedupe),
            cmocka_unit_test(test_full_and_failed),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
