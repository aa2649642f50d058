/*
 * test_credits.c - core/credits, gate 2: Kueue's resources.transformations of
 * spec/upstream-behavior.md §9 (strategy Replace, per manufacturer m):
 *   <base>                                  -> credits.gpustack.ai/<m>: 1,600,000 per accelerator
 *   <base>.shared                           -> 160,000 per share
 *   <base>.sliced.units, multiplyBy .sliced -> 1 per unit, times the .sliced count
 *   <base>.partitioned.units                -> 1 per unit, only for a manufacturer with a kind
 * each applied to the Pod's effective request of the key (init containers take the max, app
 * containers add up); the resource name credits.gpustack.ai/<m> for all nine manufacturers; a
 * flavor's nominal quota = accelerators x 1,600,000 ("nominalQuota: 1600k" for one A10G); and
 * saturation at INT64_MAX (INT64_MAX / 1,600,000 = 5,764,607,523,034.23...).
 *
 * Pods are compact container rows ("key=value" lists parsed with tsr_quantity_parse). Expected
 * values are hand arithmetic from the transformation table, never the code's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/catalog.h"
#include "core/credits.h"

#include "support/pod_rows.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define M          INT64_C(1600000)

#define APP     TSR_CG_APP
#define INIT    TSR_CG_INIT
#define SIDECAR TSR_CG_SIDECAR

#define G   "nvidia.com/gpu"
#define SH  G ".shared"
#define SL  G ".sliced"
#define SLU SL ".units"
#define PCT SL ".memory-percentage"
#define PT  G ".partitioned"
#define PTU PT ".units"

#define ROW_CONTAINERS 4
#define ROW_LIST_MAX   384

struct crow {
        enum tsr_container_group group;
        const char *limits;
        const char *requests;
};

struct row {
        const char *what;
        enum tsr_manufacturer_id m;
        struct pod_row c[ROW_CONTAINERS]; /* up to the first with neither list */
        int64_t want;
};

/* The pod a row builds, and the text its items borrow. Static: a tsr_pod_req is large. */
static struct pod_rows built;

static const struct tsr_pod_req *build_pod(const struct row *r)
{
        return pod_rows_build(&built, ROW_LIST_MAX, r->what, r->c, ROW_CONTAINERS,
                              POD_ROWS_INDEX_POSITION);
}

static void check_rows(const struct row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                const struct row *r = &rows[i];
                int64_t got = tsr_credits_of_pod(build_pod(r), tsr_catalog_manufacturer(r->m));

                if (got != r->want)
                        fail_msg("%s: %lld credits, want %lld", r->what, (long long)got,
                                 (long long)r->want);
        }
}

static void test_credits__resource_name(void **state)
{
        /* spec/upstream-behavior.md §1.1: the nine manufacturer keys. */
        static const struct {
                enum tsr_manufacturer_id id;
                const char *want;
        } rows[] = {
            {TSR_MFR_AMD, "credits.gpustack.ai/amd"},
            {TSR_MFR_ASCEND, "credits.gpustack.ai/ascend"},
            {TSR_MFR_CAMBRICON, "credits.gpustack.ai/cambricon"},
            {TSR_MFR_HYGON, "credits.gpustack.ai/hygon"},
            {TSR_MFR_ILUVATAR, "credits.gpustack.ai/iluvatar"},
            {TSR_MFR_METAX, "credits.gpustack.ai/metax"},
            {TSR_MFR_MTHREADS, "credits.gpustack.ai/mthreads"},
            {TSR_MFR_NVIDIA, "credits.gpustack.ai/nvidia"},
            {TSR_MFR_THEAD, "credits.gpustack.ai/thead"},
        };
        char out[64];

        (void)state;
        assert_int_equal(N_ELEMS(rows), TSR_MFR__COUNT);
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                memset(out, 'x', sizeof(out));
                tsr_credits_resource(tsr_catalog_manufacturer(rows[i].id), out, sizeof(out));
                assert_string_equal(out, rows[i].want);
        }
        /* A short buffer gets a NUL-terminated prefix. */
        memset(out, 'x', sizeof(out));
        tsr_credits_resource(tsr_catalog_manufacturer(TSR_MFR_NVIDIA), out, 8);
        assert_string_equal(out, "credits");
        assert_int_equal(out[8], 'x');
}

static void test_credits__exclusive_and_shared(void **state)
{
        static const struct row rows[] = {
            {"one whole", TSR_MFR_NVIDIA, {{APP, G "=1", NULL}}, 1600000},
            {"two whole", TSR_MFR_NVIDIA, {{APP, G "=2", NULL}}, 3200000},
            {"eight whole", TSR_MFR_NVIDIA, {{APP, NULL, G "=8"}}, 12800000},
            {"two apps add up",
             TSR_MFR_NVIDIA,
             {{APP, G "=1", NULL}, {APP, G "=2", NULL}},
             4800000},
            /* effective request max(1, 2) = 2 */
            {"init takes the max",
             TSR_MFR_NVIDIA,
             {{INIT, G "=2", NULL}, {APP, G "=1", NULL}},
             3200000},
            {"one share", TSR_MFR_NVIDIA, {{APP, SH "=1", NULL}}, 160000},
            {"two shares", TSR_MFR_NVIDIA, {{APP, SH "=2", NULL}}, 320000},
            {"ten shares", TSR_MFR_NVIDIA, {{APP, SH "=10", NULL}}, 1600000},
            {"shares over two apps",
             TSR_MFR_NVIDIA,
             {{APP, SH "=2", NULL}, {APP, SH "=3", NULL}},
             800000},
            /* requests first: 3 shares, not 4 */
            {"shares request wins", TSR_MFR_NVIDIA, {{APP, SH "=4", SH "=3"}}, 480000},
            /* both inputs map to the same output and add up: 1600000 + 160000 */
            {"whole + share", TSR_MFR_NVIDIA, {{APP, G "=1 " SH "=1", NULL}}, 1760000},
            {"amd whole", TSR_MFR_AMD, {{APP, "amd.com/gpu=1", NULL}}, 1600000},
            {"ascend shares", TSR_MFR_ASCEND, {{APP, "huawei.com/npu.shared=3", NULL}}, 480000},
            {"hygon whole", TSR_MFR_HYGON, {{APP, "hygon.com/dcu=4", NULL}}, 6400000},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_credits__sliced_units_multiplied_by_sliced(void **state)
{
        static const struct row rows[] = {
            {"50 % slice",
             TSR_MFR_NVIDIA,
             {{APP, SL "=1 " SLU "=800000 " PCT "=50", NULL}},
             800000},
            {"folded into both lists",
             TSR_MFR_NVIDIA,
             {{APP, SL "=1 " SLU "=640000", SL "=1 " SLU "=640000"}},
             640000},
            /* units x .sliced: 800000 x 2 */
            {"two slices multiply", TSR_MFR_NVIDIA, {{APP, SL "=2 " SLU "=800000", NULL}}, 1600000},
            /* the Pod's effective .sliced (1 + 1) times its effective units (480000 + 480000) */
            {"two slicing apps",
             TSR_MFR_NVIDIA,
             {{APP, SL "=1 " SLU "=480000", NULL}, {APP, SL "=1 " SLU "=480000", NULL}},
             1920000},
            {"units in 1600k form", TSR_MFR_NVIDIA, {{APP, SL "=1 " SLU "=1600k", NULL}}, 1600000},
            /* the memory and cores keys are not transformed */
            {"percentage alone",
             TSR_MFR_NVIDIA,
             {{APP, SL "=1 " PCT "=50 " SL ".cores-percentage=100", NULL}},
             0},
            {"metax slice",
             TSR_MFR_METAX,
             {{APP, "metax-tech.com/gpu.sliced=1 metax-tech.com/gpu.sliced.units=320000", NULL}},
             320000},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_credits__partitioned_units_only_with_a_kind(void **state)
{
        static const struct row rows[] = {
            {"nvidia 3g.40gb",
             TSR_MFR_NVIDIA,
             {{APP, PT "=1 " PT ".mig-3g.40gb=1 " PTU "=800000", NULL}},
             800000},
            /* 16380 x 1600000 / 65520 = 400000 */
            {"hygon 2g.15gb",
             TSR_MFR_HYGON,
             {{APP,
               "hygon.com/dcu.partitioned=1 hygon.com/dcu.partitioned.mig-2g.15gb=1 "
               "hygon.com/dcu.partitioned.units=400000",
               NULL}},
             400000},
            {"thead 4g.48gb",
             TSR_MFR_THEAD,
             {{APP,
               "alibabacloud.com/ppu.partitioned=1 alibabacloud.com/ppu.partitioned.units=800000",
               NULL}},
             800000},
            /* x 1: no multiplyBy, so .partitioned does not scale it */
            {"no multiplyBy", TSR_MFR_NVIDIA, {{APP, PT "=2 " PTU "=800000", NULL}}, 800000},
            {"the card and profile keys are not transformed",
             TSR_MFR_NVIDIA,
             {{APP, PT "=1 " PT ".mig-3g.40gb=1", NULL}},
             0},
            /* AMD has no partition kind: its .partitioned.units is no key of it. */
            {"amd has no kind",
             TSR_MFR_AMD,
             {{APP, "amd.com/gpu.partitioned=1 amd.com/gpu.partitioned.units=800000", NULL}},
             0},
            {"ascend has no kind",
             TSR_MFR_ASCEND,
             {{APP, "huawei.com/npu.partitioned.units=800000", NULL}},
             0},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_credits__other_keys_cost_nothing(void **state)
{
        static const struct row rows[] = {
            {"no containers", TSR_MFR_NVIDIA, {{0}}, 0},
            {"cpu and memory", TSR_MFR_NVIDIA, {{APP, "cpu=4 memory=16Gi", "cpu=1"}}, 0},
            {"visibility",
             TSR_MFR_NVIDIA,
             {{APP, "device.gpustack.ai/nvidia.visibility=1", NULL}},
             0},
            {"rdma", TSR_MFR_NVIDIA, {{APP, "device.gpustack.ai/rdma=1", NULL}}, 0},
            {"another manufacturer's keys",
             TSR_MFR_NVIDIA,
             {{APP, "amd.com/gpu=2 hygon.com/dcu.shared=1", NULL}},
             0},
            {"nvidia keys on an amd pool", TSR_MFR_AMD, {{APP, G "=2", NULL}}, 0},
            {"the credits key itself",
             TSR_MFR_NVIDIA,
             {{APP, "credits.gpustack.ai/nvidia=1600000", NULL}},
             0},
            {"only the manufacturer's own keys count",
             TSR_MFR_NVIDIA,
             {{APP, "amd.com/gpu=2 " G "=1", NULL}},
             1600000},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_credits__saturation(void **state)
{
        static const struct row rows[] = {
            /* 5764607523034 x 1600000 = 9223372036854400000 <= INT64_MAX */
            {"largest exact whole",
             TSR_MFR_NVIDIA,
             {{APP, G "=5764607523034", NULL}},
             INT64_C(9223372036854400000)},
            {"one more saturates", TSR_MFR_NVIDIA, {{APP, G "=5764607523035", NULL}}, INT64_MAX},
            /* 9223372036854400000 + 480000 > INT64_MAX */
            {"the sum saturates",
             TSR_MFR_NVIDIA,
             {{APP, G "=5764607523034 " SH "=3", NULL}},
             INT64_MAX},
            {"units x slices saturates",
             TSR_MFR_NVIDIA,
             {{APP, SL "=2 " SLU "=9E", NULL}},
             INT64_MAX},
            {"partitioned units near the top",
             TSR_MFR_NVIDIA,
             {{APP, PTU "=9E", NULL}, {APP, G "=1", NULL}},
             INT64_C(9000000000001600000)},
            {"partitioned units saturate the sum",
             TSR_MFR_NVIDIA,
             {{APP, PTU "=9E " SH "=2000000000000", NULL}},
             INT64_MAX},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_credits__quota(void **state)
{
        static const struct {
                int64_t accelerators;
                int64_t want;
        } rows[] = {
            {0, 0},
            {1, 1600000}, /* "nominalQuota: 1600k" for one A10G */
            {8, 12800000},
            {64, 102400000},
            {INT64_C(5764607523034), INT64_C(9223372036854400000)},
            {INT64_C(5764607523035), INT64_MAX},
            {INT64_MAX, INT64_MAX},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                int64_t got = tsr_credits_quota(rows[i].accelerators);

                if (got != rows[i].want)
                        fail_msg("quota of %lld accelerators = %lld, want %lld",
                                 (long long)rows[i].accelerators, (long long)got,
                                 (long long)rows[i].want);
        }
        assert_int_equal(tsr_credits_quota(1), M);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_credits__resource_name),
            cmocka_unit_test(test_credits__exclusive_and_shared),
            cmocka_unit_test(test_credits__sliced_units_multiplied_by_sliced),
            cmocka_unit_test(test_credits__partitioned_units_only_with_a_kind),
            cmocka_unit_test(test_credits__other_keys_cost_nothing),
            cmocka_unit_test(test_credits__saturation),
            cmocka_unit_test(test_credits__quota),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
