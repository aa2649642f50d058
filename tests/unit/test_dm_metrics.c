/*
 * test_dm_metrics.c - cmocka suite for devicemanager/metrics: the exposition renders every metric
 * with HELP and TYPE, allocations for every family from zero, refusals only once seen and by
 * (family, reason), carves and failures, reclaims summed and the straggler gauge replaced, publish
 * failures, the registrations given, and tessera_build_info; four threads observing while a fifth
 * renders lose no count (run under TSan in CI, suite devicemanager).
 *
 * Invariants: every test makes its own metrics object; series are matched as whole lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/buf.h"
#include "devicemanager/metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define P "tessera_device_manager_"

static void render(struct tsr_dm_metrics *m, unsigned long regs, struct tsr_buf *b)
{
        tsr_buf_init(b);
        assert_int_equal(tsr_dm_metrics_render(m, regs, b), 0);
}

/* Whether text holds line as a whole line. */
static int has_line(const char *text, const char *line)
{
        size_t n = strlen(line);

        for (const char *p = strstr(text, line); p; p = strstr(p + 1, line))
                if ((p == text || p[-1] == '\n') && p[n] == '\n')
                        return 1;
        return 0;
}

static void test_empty(void **state)
{
        static const char *const lines[] = {
            "# TYPE " P "allocations_total counter",
            P "allocations_total{family=\"exclusive\"} 0",
            P "allocations_total{family=\"visibility\"} 0",
            "# TYPE " P "allocation_refusals_total counter",
            P "mig_carves_total 0",
            P "mig_carve_failures_total 0",
            P "mig_reclaims_total 0",
            "# TYPE " P "mig_reclaim_stragglers gauge",
            P "mig_reclaim_stragglers 0",
            P "publish_failures_total 0",
            P "kubelet_registrations_total 7",
            "# TYPE tessera_build_info gauge",
        };
        struct tsr_dm_metrics *m = tsr_dm_metrics_new();
        struct tsr_buf b;

        (void)state;
        assert_non_null(m);
        render(m, 7, &b);
        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
                if (!has_line(b.ptr, lines[i]))
                        fail_msg("missing line %s in\n%s", lines[i], b.ptr);
        assert_null(strstr(b.ptr, P "allocation_refusals_total{"));
        assert_non_null(strstr(b.ptr, "tessera_build_info{component=\"device-manager\""));
        tsr_buf_release(&b);
        tsr_dm_metrics_free(m);
}

static void test_counts(void **state)
{
        struct tsr_dm_metrics *m = tsr_dm_metrics_new();
        struct tsr_buf b;

        (void)state;
        tsr_dm_metrics_allocation(m, TSR_FAMILY_SHARED, NULL, false, false);
        tsr_dm_metrics_allocation(m, TSR_FAMILY_SHARED, NULL, false, false);
        tsr_dm_metrics_allocation(m, TSR_FAMILY_PARTITIONED, NULL, true, false);
        tsr_dm_metrics_allocation(m, TSR_FAMILY_PARTITIONED, "carve_failed", false, true);
        tsr_dm_metrics_allocation(m, TSR_FAMILY_EXCLUSIVE, "no_capacity", false, false);
        tsr_dm_metrics_allocation(m, TSR_FAMILY_EXCLUSIVE, "no_capacity", false, false);
        tsr_dm_metrics_allocation(m, TSR_FAMILY_SLICED, "no_capacity", false, false);
        tsr_dm_metrics_allocation(m, TSR_FAMILY_NONE, NULL, false, false); /* not a family */
        tsr_dm_metrics_reclaim(m, 2, 1);
        tsr_dm_metrics_reclaim(m, 1, 0);
        tsr_dm_metrics_publish_failed(m);
        render(m, 0, &b);
        assert_true(has_line(b.ptr, P "allocations_total{family=\"shared\"} 2"));
        assert_true(has_line(b.ptr, P "allocations_total{family=\"partitioned\"} 1"));
        assert_true(has_line(b.ptr, P "allocations_total{family=\"exclusive\"} 0"));
        assert_true(has_line(
            b.ptr, P "allocation_refusals_total{family=\"exclusive\",reason=\"no_capacity\"} 2"));
        assert_true(has_line(
            b.ptr, P "allocation_refusals_total{family=\"sliced\",reason=\"no_capacity\"} 1"));
        assert_true(has_line(
            b.ptr,
            P "allocation_refusals_total{family=\"partitioned\",reason=\"carve_failed\"} 1"));
        assert_true(has_line(b.ptr, P "mig_carves_total 1"));
        assert_true(has_line(b.ptr, P "mig_carve_failures_total 1"));
        assert_true(has_line(b.ptr, P "mig_reclaims_total 3"));
        assert_true(has_line(b.ptr, P "mig_reclaim_stragglers 0"));
        assert_true(has_line(b.ptr, P "publish_failures_total 1"));
        tsr_buf_release(&b);
        tsr_dm_metrics_free(m);
}

#define THREADS 4
#define ROUNDS  2000

static void *observe(void *arg)
{
        struct tsr_dm_metrics *m = arg;

        for (int i = 0; i < ROUNDS; i++) {
                tsr_dm_metrics_allocation(m, TSR_FAMILY_SLICED, (i & 1) ? "no_capacity" : NULL,
                                          false, false);
                tsr_dm_metrics_publish_failed(m);
        }
        return NULL;
}

static void test_concurrent(void **state)
{
        struct tsr_dm_metrics *m = tsr_dm_metrics_new();
        pthread_t th[THREADS];
        struct tsr_buf b;
        char want[160];

        (void)state;
        for (int i = 0; i < THREADS; i++)
                assert_int_equal(pthread_create(&th[i], NULL, observe, m), 0);
        for (int i = 0; i < 50; i++) {
                render(m, 0, &b);
                tsr_buf_release(&b);
        }
        for (int i = 0; i < THREADS; i++)
                pthread_join(th[i], NULL);
        render(m, 0, &b);
        snprintf(want, sizeof(want), P "allocations_total{family=\"sliced\"} %d",
                 THREADS * ROUNDS / 2);
        assert_true(has_line(b.ptr, want));
        snprintf(want, sizeof(want),
                 P "allocation_refusals_total{family=\"sliced\",reason=\"no_capacity\"} %d",
                 THREADS * ROUNDS / 2);
        assert_true(has_line(b.ptr, want));
        snprintf(want, sizeof(want), P "publish_failures_total %d", THREADS * ROUNDS);
        assert_true(has_line(b.ptr, want));
        tsr_buf_release(&b);
        tsr_dm_metrics_free(m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_empty),
            cmocka_unit_test(test_counts),
            cmocka_unit_test(test_concurrent),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
