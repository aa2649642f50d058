/*
 * test_mig_crash.c - crash safety of carve and reclaim. For every crash point of the two
 * operations (the fake GPUs' "gi_create:before" ... "gi_destroy:after" and the marker store's
 * "marker_put:after" / "marker_remove:after"), a child process runs the operation over GPUs
 * persisted to a file and a files marker store in a temporary directory, and _exit()s at the
 * point. The parent then restarts -- loads the GPUs' state, new store and reclaimer objects over
 * the same directory -- runs recovery, the retried Allocate (carve) and reclaim passes, and checks
 * that no instance leaked (every live GPU instance is marked by a live Pod) and nothing is
 * allocated twice (no two markers or claims on one placement, no overlapping instances).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "support/mig_node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CRASHED 77

static const char *const carve_points[] = {"gi_create:before", "gi_create:after",
                                           "ci_create:before", "ci_create:after",
                                           "marker_put:after"};
static const char *const reclaim_points[] = {"ci_destroy:before", "ci_destroy:after",
                                             "gi_destroy:before", "gi_destroy:after",
                                             "marker_remove:after"};

static const char *crash_at;

static void crash_hook(void *arg, const char *point)
{
        (void)arg;
        if (!strcmp(point, crash_at))
                _exit(CRASHED);
}

struct dirs {
        char root[64], pods[96], state[96];
};

static void make_dirs(struct dirs *d)
{
        snprintf(d->root, sizeof(d->root), "/tmp/tsr-mig-crash-XXXXXX");
        assert_non_null(mkdtemp(d->root));
        snprintf(d->pods, sizeof(d->pods), "%s/pods", d->root);
        snprintf(d->state, sizeof(d->state), "%s/gpus.json", d->root);
        assert_int_equal(mkdir(d->pods, 0755), 0);
}

static void remove_dirs(const struct dirs *d)
{
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", d->root);
        assert_int_equal(system(cmd), 0);
}

/* Runs op in a child that crashes at point; asserts it got there. */
static void crash_child(struct mx_node *n, const char *point, void (*op)(struct mx_node *))
{
        int status = 0;
        pid_t pid;

        crash_at = point;
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                tsr_fake_gpus_set_hook(n->fake, crash_hook, NULL);
                tsr_mig_store_set_hook(n->store, crash_hook, NULL);
                op(n);
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != CRASHED)
                fail_msg("the operation never reached %s", point);
}

/* The restart: the parent's objects are dropped and rebuilt from disk. */
static void restart(struct mx_node *n, const struct dirs *d)
{
        struct tsr_mig_recovery rec;
        struct tsr_fake_gpus *f;

        tsr_mig_reclaimer_free(n->reclaimer);
        tsr_mig_store_free(n->store);
        tsr_fake_gpus_free(n->fake);
        assert_int_equal(tsr_fake_gpus_load(d->state, &f, NULL), 0);
        assert_int_equal(tsr_fake_gpus_persist(f, d->state), 0);
        mx_init_loaded(n, f, d->pods);
        assert_int_equal(tsr_mig_reclaim_recover(n->reclaimer, &rec, NULL), 0);
        assert_int_equal(rec.corrupt, 0); /* durable writes: never a torn marker */
}

static size_t all_instances(struct mx_node *n)
{
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        size_t k = 0;

        for (unsigned g = 0; g < MX_GPUS; g++)
                k += mx_instances(n, g, in);
        return k;
}

static void setup(struct mx_node *n, const struct dirs *d)
{
        mx_init(n, d->pods);
        assert_int_equal(tsr_fake_gpus_persist(n->fake, d->state), 0);
        assert_int_equal(mx_allocate(n, "pod-a", "3g.40gb", NULL), 0);
        assert_int_equal(mx_allocate(n, "pod-b", "1g.10gb", NULL), 0);
}

static void carve_op(struct mx_node *n)
{
        mx_allocate(n, "pod-new", "3g.40gb", NULL);
}

static void test_carve_crashes(void **state)
{
        static struct mx_node n;

        (void)state;
        for (size_t i = 0; i < sizeof(carve_points) / sizeof(carve_points[0]); i++) {
                struct dirs d;

                make_dirs(&d);
                setup(&n, &d);
                crash_child(&n, carve_points[i], carve_op);
                restart(&n, &d);
                mx_check(&n, false);
                /* the kubelet retries the Allocate: one instance, reused or adopted */
                assert_int_equal(mx_allocate(&n, "pod-new", "3g.40gb", NULL), 0);
                mx_settle(&n);
                mx_check(&n, true);
                assert_int_equal(all_instances(&n), 3);
                assert_int_equal(mx_markers(&n), 3);
                /* and everything is reclaimed once the Pods go */
                for (size_t k = 0; k < n.n_pods; k++)
                        n.pods[k].live = false;
                mx_settle(&n);
                assert_int_equal(all_instances(&n), 0);
                assert_int_equal(mx_markers(&n), 0);
                mx_release(&n);
                remove_dirs(&d);
        }
}

static void reclaim_op(struct mx_node *n)
{
        mx_settle(n);
}

static void test_reclaim_crashes(void **state)
{
        static struct mx_node n;

        (void)state;
        for (size_t i = 0; i < sizeof(reclaim_points) / sizeof(reclaim_points[0]); i++) {
                struct dirs d;

                make_dirs(&d);
                setup(&n, &d);
                mx_pod(&n, "pod-a")->live = false;
                crash_child(&n, reclaim_points[i], reclaim_op);
                restart(&n, &d);
                mx_check(&n, false);
                mx_settle(&n);
                mx_check(&n, true);
                assert_int_equal(all_instances(&n), 1); /* pod-b's */
                assert_int_equal(mx_markers(&n), 1);
                /* a new Pod fits where pod-a was, exactly once */
                assert_int_equal(mx_allocate(&n, "pod-c", "3g.40gb", NULL), 0);
                mx_check(&n, true);
                mx_release(&n);
                remove_dirs(&d);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_carve_crashes),
            cmocka_unit_test(test_reclaim_crashes),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
