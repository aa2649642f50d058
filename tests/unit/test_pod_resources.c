/*
 * test_pod_resources.c - core/pod_resources: a Pod's effective request of one resource, as the
 * scheduler and Kueue count it (Kubernetes PodRequests with native sidecars).
 *
 * Every row is a Pod written as compact container rows ("key=value key=value" lists for limits and
 * requests, parsed with tsr_quantity_parse; containers in the order pod_spec_read produces them:
 * init list, then app list) and the value it must get. Covered: a container's request is read from
 * requests first, falling back to limits (an explicit 0 request stands); keys match exactly;
 * Value() and MilliValue() round up; app containers add up; ordinary init containers take the
 * max; native sidecars add to the running sum and to every later init container, never to an
 * earlier one: max(sum(app) + sum(sidecars), max_i(init_i + sum(sidecars before i))); sums
 * saturate at INT64_MAX, as does a value MilliValue cannot hold.
 *
 * Expected values are hand arithmetic from the Kubernetes formula above, never the code's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/pod_resources.h"

#include "support/pod_rows.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define APP     TSR_CG_APP
#define INIT    TSR_CG_INIT
#define SIDECAR TSR_CG_SIDECAR

#define ROW_CONTAINERS 6
#define ROW_LIST_MAX   256

struct row {
        const char *what;
        struct pod_row c[ROW_CONTAINERS]; /* up to the first with neither list */
        const char *key;
        bool milli;
        int64_t want;
};

/* The pod a row builds, and the text its items borrow. Static: a tsr_pod_req is large. */
static struct pod_rows built;

static const struct tsr_pod_req *build_pod(const struct row *r)
{
        return pod_rows_build(&built, ROW_LIST_MAX, r->what, r->c, ROW_CONTAINERS,
                              POD_ROWS_INDEX_IN_GROUP);
}

static void check_rows(const struct row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                const struct row *r = &rows[i];
                int64_t got = tsr_pod_request(build_pod(r), r->key, r->milli);

                if (got != r->want)
                        fail_msg("%s: %s%s = %lld, want %lld", r->what, r->key,
                                 r->milli ? " (milli)" : "", (long long)got, (long long)r->want);
        }
}

static void test_pod_resources__requests_then_limits(void **state)
{
        static const struct row rows[] = {
            {"request wins over limit", {{APP, "cpu=2", "cpu=500m"}}, "cpu", true, 500},
            {"limit alone", {{APP, "cpu=2", NULL}}, "cpu", true, 2000},
            {"limit fills a key requests lack",
             {{APP, "cpu=2 memory=1Gi", "cpu=1"}},
             "memory",
             false,
             1073741824},
            {"an explicit 0 request stands",
             {{APP, "nvidia.com/gpu=4", "nvidia.com/gpu=0"}},
             "nvidia.com/gpu",
             false,
             0},
            {"neither list names it", {{APP, "cpu=2", "memory=1Gi"}}, "nvidia.com/gpu", false, 0},
            {"no containers", {{0}}, "cpu", true, 0},
            {"keys match exactly, not by prefix",
             {{APP, "nvidia.com/gpu.shared=3", "nvidia.com/gpu.sliced=1"}},
             "nvidia.com/gpu",
             false,
             0},
            {"the sub-key itself",
             {{APP, "nvidia.com/gpu=1 nvidia.com/gpu.shared=3", NULL}},
             "nvidia.com/gpu.shared",
             false,
             3},
            {"first of several keys",
             {{APP, NULL, "memory=64Mi cpu=250m nvidia.com/gpu=2"}},
             "nvidia.com/gpu",
             false,
             2},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_pod_resources__rounding(void **state)
{
        static const struct row rows[] = {
            /* Value() rounds up to the next integer. */
            {"1500m Value", {{APP, NULL, "cpu=1500m"}}, "cpu", false, 2},
            {"1m Value", {{APP, NULL, "cpu=1m"}}, "cpu", false, 1},
            {"0.1 Value", {{APP, NULL, "cpu=0.1"}}, "cpu", false, 1},
            {"1n Value", {{APP, NULL, "cpu=1n"}}, "cpu", false, 1},
            {"2 Value", {{APP, NULL, "cpu=2"}}, "cpu", false, 2},
            {"2000m Value", {{APP, NULL, "cpu=2000m"}}, "cpu", false, 2},
            {"0 Value", {{APP, NULL, "cpu=0"}}, "cpu", false, 0},
            {"1Ki Value", {{APP, NULL, "memory=1Ki"}}, "memory", false, 1024},
            {"1.5Gi Value", {{APP, NULL, "memory=1.5Gi"}}, "memory", false, 1610612736},
            {"12e6 Value", {{APP, NULL, "x=12e6"}}, "x", false, 12000000},
            {"1600k Value", {{APP, NULL, "x=1600k"}}, "x", false, 1600000},
            /* MilliValue() rounds up to the next thousandth. */
            {"1500m milli", {{APP, NULL, "cpu=1500m"}}, "cpu", true, 1500},
            {"0.0015 milli", {{APP, NULL, "cpu=0.0015"}}, "cpu", true, 2},
            {"1n milli", {{APP, NULL, "cpu=1n"}}, "cpu", true, 1},
            {"1u milli", {{APP, NULL, "cpu=1u"}}, "cpu", true, 1},
            {"2 milli", {{APP, NULL, "cpu=2"}}, "cpu", true, 2000},
            {"1Ki milli", {{APP, NULL, "memory=1Ki"}}, "memory", true, 1024000},
            /* Each container rounds on its own before the sum: 1 + 1, not ceil(0.2). */
            {"two 100m Value", {{APP, NULL, "cpu=100m"}, {APP, NULL, "cpu=100m"}}, "cpu", false, 2},
            {"two 100m milli",
             {{APP, NULL, "cpu=100m"}, {APP, NULL, "cpu=100m"}},
             "cpu",
             true,
             200},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_pod_resources__app_containers_add_up(void **state)
{
        static const struct row rows[] = {
            {"one app", {{APP, "nvidia.com/gpu=2", NULL}}, "nvidia.com/gpu", false, 2},
            {"two apps",
             {{APP, "nvidia.com/gpu=1", NULL}, {APP, "nvidia.com/gpu=2", NULL}},
             "nvidia.com/gpu",
             false,
             3},
            {"three apps, one without the key",
             {{APP, NULL, "cpu=250m"}, {APP, "memory=1Gi", NULL}, {APP, NULL, "cpu=1"}},
             "cpu",
             true,
             1250},
            {"limits and requests mixed across apps",
             {{APP, "nvidia.com/gpu.shared=2", NULL},
              {APP, "nvidia.com/gpu.shared=9", "nvidia.com/gpu.shared=3"}},
             "nvidia.com/gpu.shared",
             false,
             5},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_pod_resources__init_containers_take_the_max(void **state)
{
        static const struct row rows[] = {
            {"init above the apps",
             {{INIT, NULL, "cpu=3"}, {INIT, NULL, "cpu=2"}, {APP, NULL, "cpu=1"}},
             "cpu",
             true,
             3000},
            {"apps above every init",
             {{INIT, NULL, "cpu=3"}, {APP, NULL, "cpu=2"}, {APP, NULL, "cpu=2"}},
             "cpu",
             true,
             4000},
            {"inits never add up",
             {{INIT, NULL, "cpu=2"}, {INIT, NULL, "cpu=4"}, {INIT, NULL, "cpu=3"}},
             "cpu",
             true,
             4000},
            {"init only", {{INIT, "nvidia.com/gpu=2", NULL}}, "nvidia.com/gpu", false, 2},
            {"init equal to the apps",
             {{INIT, NULL, "cpu=2"}, {APP, NULL, "cpu=1"}, {APP, NULL, "cpu=1"}},
             "cpu",
             true,
             2000},
            {"init rounds on its own",
             {{INIT, NULL, "cpu=1100m"}, {APP, NULL, "cpu=1"}},
             "cpu",
             false,
             2},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_pod_resources__native_sidecars(void **state)
{
        static const struct row rows[] = {
            /* max(2 + 1, -) */
            {"sidecar runs beside the apps",
             {{SIDECAR, NULL, "cpu=1"}, {APP, NULL, "cpu=2"}},
             "cpu",
             true,
             3000},
            /* max(1 + 3, 5 + 0) = 5: the sidecar starts after the init container */
            {"sidecar after the init",
             {{INIT, NULL, "cpu=5"}, {SIDECAR, NULL, "cpu=3"}, {APP, NULL, "cpu=1"}},
             "cpu",
             true,
             5000},
            /* max(1 + 3, 5 + 3) = 8 */
            {"sidecar before the init",
             {{SIDECAR, NULL, "cpu=3"}, {INIT, NULL, "cpu=5"}, {APP, NULL, "cpu=1"}},
             "cpu",
             true,
             8000},
            /* running 1 + (1 + 2) = 4; init a: 4 + 1 = 5; init b: 4 + (1 + 2) = 7 */
            {"each init sees the sidecars before it",
             {{SIDECAR, NULL, "cpu=1"},
              {INIT, NULL, "cpu=4"},
              {SIDECAR, NULL, "cpu=2"},
              {INIT, NULL, "cpu=4"},
              {APP, NULL, "cpu=1"}},
             "cpu",
             true,
             7000},
            /* running 6 + 1 = 7; init: 2 + 1 = 3 */
            {"sidecar in the running sum beats an init",
             {{SIDECAR, NULL, "cpu=1"}, {INIT, NULL, "cpu=2"}, {APP, NULL, "cpu=6"}},
             "cpu",
             true,
             7000},
            /* no apps: running = 2 + 3 = 5; the init before them sees none: 4 */
            {"sidecars alone",
             {{INIT, NULL, "cpu=4"}, {SIDECAR, NULL, "cpu=2"}, {SIDECAR, NULL, "cpu=3"}},
             "cpu",
             true,
             5000},
            /* the sidecar's limit is its request when requests lack the key */
            {"sidecar limit",
             {{SIDECAR, "memory=1Gi", "cpu=1"}, {APP, NULL, "memory=1Gi"}},
             "memory",
             false,
             2147483648},
            /* a sidecar without the key adds nothing */
            {"sidecar without the key",
             {{SIDECAR, NULL, "cpu=1"},
              {INIT, NULL, "nvidia.com/gpu=1"},
              {APP, NULL, "nvidia.com/gpu=1"}},
             "nvidia.com/gpu",
             false,
             1},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_pod_resources__saturation(void **state)
{
        /* 9E = 9 x 10^18 fits int64 (INT64_MAX = 9223372036854775807); two of them do not. */
        static const struct row rows[] = {
            {"one 9E", {{APP, NULL, "x=9E"}}, "x", false, INT64_C(9000000000000000000)},
            {"two 9E apps", {{APP, NULL, "x=9E"}, {APP, NULL, "x=9E"}}, "x", false, INT64_MAX},
            {"9E app + 9E sidecar",
             {{SIDECAR, NULL, "x=9E"}, {APP, NULL, "x=9E"}},
             "x",
             false,
             INT64_MAX},
            {"9E sidecar + 9E init",
             {{SIDECAR, NULL, "x=9E"}, {INIT, NULL, "x=9E"}},
             "x",
             false,
             INT64_MAX},
            {"9E milli does not fit", {{APP, NULL, "x=9E"}}, "x", true, INT64_MAX},
            {"9223372036854775807 exactly",
             {{APP, NULL, "x=9223372036854775807"}},
             "x",
             false,
             INT64_MAX},
            {"INT64_MAX + 1",
             {{APP, NULL, "x=9223372036854775807"}, {APP, NULL, "x=1"}},
             "x",
             false,
             INT64_MAX},
            {"saturated sum plus more stays saturated",
             {{APP, NULL, "x=9E"}, {APP, NULL, "x=9E"}, {APP, NULL, "x=9E"}},
             "x",
             false,
             INT64_MAX},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_pod_resources__container_request(void **state)
{
        static const struct row rows[] = {
            {"requests first", {{APP, "cpu=2", "cpu=1500m"}}, "cpu", false, 2},
            {"limits fallback", {{APP, "cpu=2500m", NULL}}, "cpu", true, 2500},
            {"absent", {{APP, "cpu=2", NULL}}, "memory", false, 0},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                const struct tsr_pod_req *p = build_pod(&rows[i]);
                int64_t got = tsr_container_request(&p->c[0], rows[i].key, rows[i].milli);

                if (got != rows[i].want)
                        fail_msg("%s: %lld, want %lld", rows[i].what, (long long)got,
                                 (long long)rows[i].want);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pod_resources__requests_then_limits),
            cmocka_unit_test(test_pod_resources__rounding),
            cmocka_unit_test(test_pod_resources__app_containers_add_up),
            cmocka_unit_test(test_pod_resources__init_containers_take_the_max),
            cmocka_unit_test(test_pod_resources__native_sidecars),
            cmocka_unit_test(test_pod_resources__saturation),
            cmocka_unit_test(test_pod_resources__container_request),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
