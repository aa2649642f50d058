/*
 * test_mig_reclaim.c - mig/reclaim.h through every situation of the MIG seed's runbook: a dead
 * Pod's instance after the 3-pass debounce; an orphan only on a drained card, with a consecutive
 * debounce; an IN_USE straggler retried and logged at 8; a vanished instance losing its marker; a
 * hand-subdivided instance stopping the whole pass; a corrupt marker held while its Pod lives and
 * removed once it is gone; the attribution self-check; reboot recovery failing closed; an
 * unreadable pods directory destroying nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "support/mig_node.h"

#include <stdio.h>
#include <string.h>

static struct mx_node n;

static size_t all_instances(void)
{
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        size_t k = 0;

        for (unsigned g = 0; g < MX_GPUS; g++)
                k += mx_instances(&n, g, in);
        return k;
}

static void test_dead_pod_debounce(void **state)
{
        struct tsr_mig_pass_stats st;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), 0);
        assert_int_equal(mx_allocate(&n, "pod-b", "3g.40gb", NULL), 0);
        assert_int_equal(mx_pass(&n, &st), 0);
        assert_int_equal(st.destroyed, 0);
        mx_pod(&n, "pod-a")->live = false;
        for (int i = 1; i < TSR_MIG_RECLAIM_MAX_MISSES; i++) {
                assert_int_equal(mx_pass(&n, &st), 0);
                assert_int_equal(st.destroyed, 0);
        }
        /* the owner coming back resets the count */
        mx_pod(&n, "pod-a")->live = true;
        assert_int_equal(mx_pass(&n, &st), 0);
        mx_pod(&n, "pod-a")->live = false;
        for (int i = 1; i < TSR_MIG_RECLAIM_MAX_MISSES; i++)
                assert_int_equal(mx_pass(&n, &st), 0);
        assert_int_equal(all_instances(), 2);
        assert_int_equal(mx_pass(&n, &st), 0);
        assert_int_equal(st.destroyed, 1);
        assert_int_equal(st.markers_removed, 1);
        assert_int_equal(all_instances(), 1);
        assert_int_equal(mx_markers(&n), 1);
        mx_check(&n, true);
        mx_release(&n);
}

static void test_orphan_only_when_drained(void **state)
{
        struct tsr_mig_pass_stats st;
        unsigned gi;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.gpu, 0);
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 0, 9, 4, true, &gi), 0);
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 1, 9, 4, false, &gi), 0);
        for (int i = 0; i < TSR_MIG_RECLAIM_MAX_MISSES - 1; i++) {
                assert_int_equal(mx_pass(&n, &st), 0);
                assert_int_equal(st.destroyed, 0);
        }
        /* GPU 1 is drained: its orphan goes on the third pass; GPU 0's stays while pod-a holds it
         */
        assert_int_equal(mx_pass(&n, &st), 0);
        assert_int_equal(st.destroyed, 1);
        assert_int_equal(all_instances(), 2);
        for (int i = 0; i < 5; i++)
                assert_int_equal(mx_pass(&n, NULL), 0);
        assert_int_equal(all_instances(), 2);
        /* pod-a goes: both its instance and the orphan are reclaimed */
        mx_pod(&n, "pod-a")->live = false;
        mx_settle(&n);
        assert_int_equal(all_instances(), 0);
        assert_int_equal(mx_markers(&n), 0);
        mx_release(&n);
}

static void test_in_use_straggler(void **state)
{
        struct tsr_mig_pass_stats st;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "2g.20gb", NULL), 0);
        assert_int_equal(mx_allocate(&n, "pod-b", "2g.20gb", NULL), 0);
        mx_pod(&n, "pod-a")->live = false;
        for (int i = 1; i < TSR_MIG_RECLAIM_MAX_MISSES; i++)
                assert_int_equal(mx_pass(&n, NULL), 0);
        tsr_fake_gpus_fail(n.fake, TSR_FAKE_CI_DESTROY, TSR_EINUSE,
                           TSR_MIG_RECLAIM_MAX_DESTROY_MISSES);
        for (int i = 1; i <= TSR_MIG_RECLAIM_MAX_DESTROY_MISSES; i++) {
                assert_int_equal(mx_pass(&n, &st), 0);
                assert_int_equal(st.in_use, 1);
                assert_int_equal(st.destroyed, 0);
                assert_int_equal(n.logs[TSR_MIG_LOG_WARN], i == TSR_MIG_RECLAIM_MAX_DESTROY_MISSES);
        }
        assert_non_null(strstr(n.last_log, "still in use after 8 reclaim passes"));
        assert_int_equal(mx_markers(&n), 2); /* kept for the retry */
        /* the sibling was never blocked */
        assert_int_equal(mx_allocate(&n, "pod-c", "2g.20gb", NULL), 0);
        assert_int_equal(mx_pass(&n, &st), 0);
        assert_int_equal(st.destroyed, 1);
        mx_check(&n, true);
        mx_release(&n);
}

static void test_vanished_instance(void **state)
{
        struct tsr_mig_pass_stats st;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), 0);
        assert_int_equal(tsr_fake_gpus_vanish(n.fake, 0, mx_pod(&n, "pod-a")->grant.marker.gi_id),
                         0);
        /* its Pod still lives: the marker stays, its allocation fails closed */
        mx_settle(&n);
        assert_int_equal(mx_markers(&n), 1);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), TSR_ESTALE);
        mx_pod(&n, "pod-a")->live = false;
        for (int i = 1; i < TSR_MIG_RECLAIM_MAX_MISSES; i++)
                assert_int_equal(mx_pass(&n, NULL), 0);
        assert_int_equal(mx_pass(&n, &st), 0);
        assert_int_equal(st.markers_removed, 1);
        assert_int_equal(st.destroyed, 0);
        assert_int_equal(mx_markers(&n), 0);
        mx_release(&n);
}

static void test_subdivided_stops_the_node(void **state)
{
        struct tsr_diag diag;
        unsigned gi;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), 0);
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 1, 9, 0, true, &gi), 0);
        assert_int_equal(tsr_fake_gpus_subdivide(n.fake, 1, gi), 0);
        mx_pod(&n, "pod-a")->live = false;
        for (int i = 0; i < 6; i++) {
                tsr_diag_clear(&diag);
                assert_int_equal(tsr_mig_reclaim_pass(n.reclaimer,
                                                      &(struct tsr_mig_view){NULL, 0, NULL, 0},
                                                      NULL, &diag),
                                 TSR_ENOTSUP);
                assert_non_null(strstr(diag.msg, "subdivided"));
        }
        assert_int_equal(n.logs[TSR_MIG_LOG_ERROR], 6);
        assert_int_equal(all_instances(), 2); /* nothing reclaimed on any GPU */
        assert_int_equal(mx_markers(&n), 1);
        mx_release(&n);
}

static void test_corrupt_marker(void **state)
{
        struct tsr_mig_pass_stats st;
        unsigned gi;

        (void)state;
        mx_init(&n, NULL);
        mx_pod(&n, "pod-x");
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 1, 9, 0, true, &gi), 0);
        assert_int_equal(
            tsr_mig_store_memory_put_raw(n.store, "pod-x", "main", n.caps[1].uuid, "{\"torn"), 0);
        for (int i = 1; i <= TSR_MIG_RECLAIM_MAX_CORRUPT_HOLD_MISSES; i++) {
                assert_int_equal(mx_pass(&n, &st), 0);
                assert_int_equal(st.destroyed, 0);
                assert_int_equal(n.logs[TSR_MIG_LOG_WARN],
                                 i == TSR_MIG_RECLAIM_MAX_CORRUPT_HOLD_MISSES);
        }
        assert_non_null(strstr(n.last_log, "corrupt MIG marker"));
        assert_int_equal(all_instances(), 1);
        /* its Pod goes: the marker is removed after the debounce, then the orphan */
        mx_pod(&n, "pod-x")->live = false;
        mx_settle(&n);
        assert_int_equal(mx_markers(&n), 0);
        assert_int_equal(all_instances(), 0);
        mx_release(&n);
}

static void test_self_check(void **state)
{
        struct tsr_mig_pass_stats st;
        struct mx_pod *b;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), 0);
        b = mx_pod(&n, "pod-b"); /* claims pod-a's placement by annotation */
        b->granted = true;
        b->grant = mx_pod(&n, "pod-a")->grant;
        mx_pod(&n, "pod-a")->live = false;
        mx_settle(&n);
        assert_int_equal(all_instances(), 1);
        assert_true(n.logs[TSR_MIG_LOG_ERROR] > 0);
        assert_non_null(strstr(n.last_log, "claims placement"));
        b->live = false;
        assert_int_equal(mx_pass(&n, &st), 0);
        assert_int_equal(st.destroyed, 1);
        mx_release(&n);
}

static void test_reboot_recovery(void **state)
{
        struct tsr_mig_recovery rec;
        const struct tsr_product *p;
        struct tsr_fake_gpus *fresh;
        const bool on[MX_GPUS] = {true, true};

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), 0);
        assert_int_equal(mx_allocate(&n, "pod-b", "3g.40gb", NULL), 0);
        /* reboot: the same GPUs come back with no instances; markers survive */
        p = tsr_fake_gpus_product(n.fake);
        assert_int_equal(tsr_fake_gpus_new("node-a", p, MX_GPUS, on, &fresh), 0);
        tsr_fake_gpus_free(n.fake);
        n.fake = fresh;
        n.gpus.be = fresh;
        tsr_mig_reclaimer_free(n.reclaimer);
        assert_int_equal(tsr_mig_reclaimer_new(&n.gpus, n.store, NULL, NULL, &n.reclaimer), 0);
        assert_int_equal(tsr_mig_reclaim_recover(n.reclaimer, &rec, NULL), 0);
        assert_int_equal(rec.markers, 2);
        assert_int_equal(rec.stale, 2);
        assert_int_equal(rec.orphans, 0);
        /* a lingering Pod's allocation fails closed; a new instance carves fresh */
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), TSR_ESTALE);
        assert_int_equal(mx_allocate(&n, "pod-c", "3g.40gb", NULL), 0);
        /* a new GI may reuse an old id: the stale marker never claims it */
        mx_pod(&n, "pod-a")->live = false;
        mx_pod(&n, "pod-b")->live = false;
        mx_settle(&n);
        assert_int_equal(mx_markers(&n), 1);
        assert_int_equal(all_instances(), 1);
        mx_check(&n, true);
        mx_release(&n);
}

static void test_unreadable_pods_dir(void **state)
{
        struct tsr_mig_recovery rec;
        struct tsr_diag diag;

        (void)state;
        mx_init(&n, "/nonexistent/tsr-pods");
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 0, 9, 0, true, &(unsigned){0}), 0);
        assert_int_equal(tsr_mig_reclaim_recover(n.reclaimer, &rec, NULL), TSR_EIO);
        for (int i = 0; i < 6; i++) {
                tsr_diag_clear(&diag);
                assert_int_equal(tsr_mig_reclaim_pass(n.reclaimer,
                                                      &(struct tsr_mig_view){NULL, 0, NULL, 0},
                                                      NULL, &diag),
                                 TSR_EIO);
        }
        assert_int_equal(all_instances(), 1);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), TSR_EIO);
        mx_release(&n);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_dead_pod_debounce),
            cmocka_unit_test(test_orphan_only_when_drained),
            cmocka_unit_test(test_in_use_straggler),
            cmocka_unit_test(test_vanished_instance),
            cmocka_unit_test(test_subdivided_stops_the_node),
            cmocka_unit_test(test_corrupt_marker),
            cmocka_unit_test(test_self_check),
            cmocka_unit_test(test_reboot_recovery),
            cmocka_unit_test(test_unreadable_pods_dir),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
