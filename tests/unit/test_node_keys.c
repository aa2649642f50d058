/*
 * test_node_keys.c - core/node_keys: the accelerator keys a node advertises, against the
 * walkthrough of seeds/nvidia-mig.md on node-h100 (eight H100 80GB HBM3):
 *   step 1    every GPU MIG off, idle;
 *   step 2.2  every GPU MIG on, idle;
 *   step 2.4  one 3g.40gb at start 0 on GPU 0;
 *   step 3    GPUs 0-2 MIG on, 3-7 off, idle;
 *   step 3.1  step 3 plus a 3g.40gb at 0 on GPU 0 and a 50 % slice (800,000 units) on GPU 5.
 * Every key's capacity and allocatable is asserted, and the key set is exactly the expected one:
 * device-plugin pools read 0 rather than vanish, counting keys are absent while their bare pool is
 * 0, "+me" profiles never get a key. Also: tokens of an accelerator held in another mode are
 * unhealthy (allocatable < capacity); a manufacturer without a partition kind has no .partitioned
 * key; Hygon-like slots (4, no overcommit) and partitions; an empty node; mixed products refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "core/node_keys.h"

#include "support/catalog_fixtures.h"

#include <stdio.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define H100_NAME "NVIDIA H100 80GB HBM3"

static void project(const struct fx_node *nd, struct tsr_node_keys *keys)
{
        const struct tsr_manufacturer *m =
            tsr_catalog_manufacturer(nd->caps[0].product->manufacturer);
        struct tsr_diag d;
        int rc;

        tsr_diag_clear(&d);
        rc = tsr_node_keys_project(m, nd->caps, nd->ledger, nd->n, keys, &d);
        if (rc != 0)
                fail_msg("node_keys_project = %s (%s)", tsr_err_name(rc), d.msg);
}

struct want_key {
        const char *name;
        int64_t capacity, allocatable;
};

/* Asserts keys holds exactly the want rows (any order), each with its two values. */
static void expect_keys(const struct tsr_node_keys *keys, const struct want_key *want, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                const struct tsr_node_key *k = tsr_node_keys_find(keys, want[i].name);

                if (!k)
                        fail_msg("key %s is missing", want[i].name);
                if (k->capacity != want[i].capacity || k->allocatable != want[i].allocatable)
                        fail_msg("%s = %lld/%lld, want %lld/%lld", want[i].name,
                                 (long long)k->capacity, (long long)k->allocatable,
                                 (long long)want[i].capacity, (long long)want[i].allocatable);
        }
        for (size_t i = 0; i < keys->n; i++) {
                bool known = false;

                for (size_t j = 0; j < n; j++)
                        known |= strcmp(keys->keys[i].name, want[j].name) == 0;
                if (!known)
                        fail_msg("unexpected key %s = %lld", keys->keys[i].name,
                                 (long long)keys->keys[i].capacity);
        }
        assert_int_equal(keys->n, n);
}

static void test_node_keys__step1_all_logical(void **state)
{
        static const struct want_key want[] = {
            {"nvidia.com/gpu", 8, 8},
            {"nvidia.com/gpu.partitioned", 0, 0},
            {"nvidia.com/gpu.shared", 80, 80},
            {"nvidia.com/gpu.sliced", 1024, 1024},
            {"nvidia.com/gpu.sliced.cores-percentage", 102400, 102400},
            {"nvidia.com/gpu.sliced.memory-mib", 655360, 655360},
            {"nvidia.com/gpu.sliced.memory-percentage", 800, 800},
            {"nvidia.com/gpu.sliced.units", 12800000, 12800000},
            {"device.gpustack.ai/nvidia.visibility", 4096, 4096},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, fx_product(H100_NAME), 8, 0, NULL, 0);
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
        assert_null(tsr_node_keys_find(&keys, "nvidia.com/gpu.partitioned.units"));
}

static void test_node_keys__step2_2_all_physical(void **state)
{
        static const struct want_key want[] = {
            {"nvidia.com/gpu", 0, 0},
            {"nvidia.com/gpu.partitioned", 56, 56},
            {"nvidia.com/gpu.partitioned.mig-1g.10gb", 56, 56},
            {"nvidia.com/gpu.partitioned.mig-1g.20gb", 32, 32},
            {"nvidia.com/gpu.partitioned.mig-2g.20gb", 24, 24},
            {"nvidia.com/gpu.partitioned.mig-3g.40gb", 16, 16},
            {"nvidia.com/gpu.partitioned.mig-4g.40gb", 8, 8},
            {"nvidia.com/gpu.partitioned.mig-7g.80gb", 8, 8},
            {"nvidia.com/gpu.partitioned.units", 12800000, 12800000},
            {"nvidia.com/gpu.shared", 0, 0},
            {"nvidia.com/gpu.sliced", 0, 0},
            {"device.gpustack.ai/nvidia.visibility", 4096, 4096},
        };
        static const char *const order[] = {"1g.10gb", "1g.20gb", "2g.20gb",
                                            "3g.40gb", "4g.40gb", "7g.80gb"};
        struct fx_node nd;
        struct tsr_node_keys keys;
        size_t at = 0;

        (void)state;
        fx_node_build(&nd, fx_product(H100_NAME), 8, 0xff, NULL, 0);
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
        /* Profiles follow the product table's order. */
        for (size_t i = 0; i < keys.n && at < N_ELEMS(order); i++) {
                char name[TSR_KEY_MAX];

                snprintf(name, sizeof(name), "nvidia.com/gpu.partitioned.mig-%s", order[at]);
                if (strcmp(keys.keys[i].name, name) == 0)
                        at++;
        }
        assert_int_equal(at, N_ELEMS(order));
}

static void test_node_keys__step2_4_one_3g_instance(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        /* 3g.40gb: floor(40448 x 1600000 / 81920) = 790000 units. */
        const struct tsr_alloc_record recs[] = {
            {0, TSR_MODE_PARTITIONED, 790000, 0, fx_pidx(h100, "3g.40gb"), 0, false},
        };
        static const struct want_key want[] = {
            {"nvidia.com/gpu", 0, 0},
            {"nvidia.com/gpu.partitioned", 53, 53},
            {"nvidia.com/gpu.partitioned.mig-1g.10gb", 52, 52},
            {"nvidia.com/gpu.partitioned.mig-1g.20gb", 30, 30},
            {"nvidia.com/gpu.partitioned.mig-2g.20gb", 22, 22},
            {"nvidia.com/gpu.partitioned.mig-3g.40gb", 16, 16},
            {"nvidia.com/gpu.partitioned.mig-4g.40gb", 7, 7},
            {"nvidia.com/gpu.partitioned.mig-7g.80gb", 7, 7},
            {"nvidia.com/gpu.partitioned.units", 12800000, 12800000},
            {"nvidia.com/gpu.shared", 0, 0},
            {"nvidia.com/gpu.sliced", 0, 0},
            {"device.gpustack.ai/nvidia.visibility", 4096, 4096},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, h100, 8, 0xff, recs, N_ELEMS(recs));
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
}

static void test_node_keys__step3_mixed(void **state)
{
        static const struct want_key want[] = {
            {"nvidia.com/gpu", 5, 5},
            {"nvidia.com/gpu.partitioned", 21, 21},
            {"nvidia.com/gpu.partitioned.mig-1g.10gb", 21, 21},
            {"nvidia.com/gpu.partitioned.mig-1g.20gb", 12, 12},
            {"nvidia.com/gpu.partitioned.mig-2g.20gb", 9, 9},
            {"nvidia.com/gpu.partitioned.mig-3g.40gb", 6, 6},
            {"nvidia.com/gpu.partitioned.mig-4g.40gb", 3, 3},
            {"nvidia.com/gpu.partitioned.mig-7g.80gb", 3, 3},
            {"nvidia.com/gpu.partitioned.units", 4800000, 4800000},
            {"nvidia.com/gpu.shared", 50, 50},
            {"nvidia.com/gpu.sliced", 640, 640},
            {"nvidia.com/gpu.sliced.cores-percentage", 64000, 64000},
            {"nvidia.com/gpu.sliced.memory-mib", 409600, 409600},
            {"nvidia.com/gpu.sliced.memory-percentage", 500, 500},
            {"nvidia.com/gpu.sliced.units", 8000000, 8000000},
            {"device.gpustack.ai/nvidia.visibility", 4096, 4096},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, fx_product(H100_NAME), 8, 0x07, NULL, 0);
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
}

static void test_node_keys__step3_1_both_kinds(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        const struct tsr_alloc_record recs[] = {
            {0, TSR_MODE_PARTITIONED, 790000, 0, fx_pidx(h100, "3g.40gb"), 0, false},
            {5, TSR_MODE_SLICED, 800000, 0, -1, 0, false},
        };
        /*
         * The partition keys are the seed's; the logical counting keys do not move; GPU 5 now
         * held Sliced makes its exclusive token and its ten shared tokens unhealthy.
         */
        static const struct want_key want[] = {
            {"nvidia.com/gpu", 5, 4},
            {"nvidia.com/gpu.partitioned", 18, 18},
            {"nvidia.com/gpu.partitioned.mig-1g.10gb", 17, 17},
            {"nvidia.com/gpu.partitioned.mig-1g.20gb", 10, 10},
            {"nvidia.com/gpu.partitioned.mig-2g.20gb", 7, 7},
            {"nvidia.com/gpu.partitioned.mig-3g.40gb", 6, 6},
            {"nvidia.com/gpu.partitioned.mig-4g.40gb", 2, 2},
            {"nvidia.com/gpu.partitioned.mig-7g.80gb", 2, 2},
            {"nvidia.com/gpu.partitioned.units", 4800000, 4800000},
            {"nvidia.com/gpu.shared", 50, 40},
            {"nvidia.com/gpu.sliced", 640, 640},
            {"nvidia.com/gpu.sliced.cores-percentage", 64000, 64000},
            {"nvidia.com/gpu.sliced.memory-mib", 409600, 409600},
            {"nvidia.com/gpu.sliced.memory-percentage", 500, 500},
            {"nvidia.com/gpu.sliced.units", 8000000, 8000000},
            {"device.gpustack.ai/nvidia.visibility", 4096, 4096},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, h100, 8, 0x07, recs, N_ELEMS(recs));
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
}

static void test_node_keys__other_mode_tokens_unhealthy(void **state)
{
        const struct tsr_alloc_record recs[] = {
            {0, TSR_MODE_EXCLUSIVE, 0, 0, -1, 0, false},
            {1, TSR_MODE_SHARED, 0, 1, -1, 0, false},
            {2, TSR_MODE_SLICED, 320000, 0, -1, 0, false},
            {2, TSR_MODE_SLICED, 320000, 0, -1, 0, false},
        };
        /* Healthy: gpu on GPUs 0,3-7; shared on 1,3-7; sliced on 2,3-7 (six GPUs each). */
        static const struct want_key want[] = {
            {"nvidia.com/gpu", 8, 6},
            {"nvidia.com/gpu.partitioned", 0, 0},
            {"nvidia.com/gpu.shared", 80, 60},
            {"nvidia.com/gpu.sliced", 1024, 768},
            {"nvidia.com/gpu.sliced.cores-percentage", 102400, 102400},
            {"nvidia.com/gpu.sliced.memory-mib", 655360, 655360},
            {"nvidia.com/gpu.sliced.memory-percentage", 800, 800},
            {"nvidia.com/gpu.sliced.units", 12800000, 12800000},
            {"device.gpustack.ai/nvidia.visibility", 4096, 4096},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, fx_product(H100_NAME), 8, 0, recs, N_ELEMS(recs));
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
}

static void test_node_keys__no_partition_kind_no_partition_keys(void **state)
{
        static const struct tsr_product mi300 = {
            "AMD Instinct MI300X", TSR_MFR_AMD, 196608, 12, 192, NULL, 0};
        static const struct want_key want[] = {
            {"amd.com/gpu", 2, 2},
            {"amd.com/gpu.shared", 20, 20},
            {"amd.com/gpu.sliced", 256, 256},
            {"amd.com/gpu.sliced.cores-percentage", 25600, 25600},
            {"amd.com/gpu.sliced.memory-mib", 393216, 393216},
            {"amd.com/gpu.sliced.memory-percentage", 200, 200},
            {"amd.com/gpu.sliced.units", 3200000, 3200000},
            {"device.gpustack.ai/amd.visibility", 1024, 1024},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, &mi300, 2, 0x3, NULL, 0);
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
}

/* Without overcommit a card's cores budget is 100 %, however many slots it has. */
static void test_node_keys__hygon_slices(void **state)
{
        static const struct want_key want[] = {
            {"hygon.com/dcu", 2, 2},
            {"hygon.com/dcu.partitioned", 0, 0},
            {"hygon.com/dcu.shared", 20, 20},
            {"hygon.com/dcu.sliced", 8, 8},
            {"hygon.com/dcu.sliced.cores-percentage", 200, 200},
            {"hygon.com/dcu.sliced.memory-mib", 131040, 131040},
            {"hygon.com/dcu.sliced.memory-percentage", 200, 200},
            {"hygon.com/dcu.sliced.units", 3200000, 3200000},
            {"device.gpustack.ai/hygon.visibility", 1024, 1024},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, &fx_hygon_c3000, 2, 0, NULL, 0);
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
}

/*
 * Two partitioned C-3000s, a 4g.31gb at 0 on the first: its slices 0-1 are taken, so 2g.15gb has
 * 2 free (2, 3), 4g.31gb 1 live + 1 free (2), 8g.63gb none; largest free 2, pool 1 + 2. The second
 * card adds 4 / 2 / 1, pool 4.
 */
static void test_node_keys__hygon_partitions(void **state)
{
        const struct tsr_alloc_record recs[] = {
            {0, TSR_MODE_PARTITIONED, 800000, 0, 1, 0, false},
        };
        static const struct want_key want[] = {
            {"hygon.com/dcu", 0, 0},
            {"hygon.com/dcu.partitioned", 7, 7},
            {"hygon.com/dcu.partitioned.mig-2g.15gb", 6, 6},
            {"hygon.com/dcu.partitioned.mig-4g.31gb", 4, 4},
            {"hygon.com/dcu.partitioned.mig-8g.63gb", 1, 1},
            {"hygon.com/dcu.partitioned.units", 3200000, 3200000},
            {"hygon.com/dcu.shared", 0, 0},
            {"hygon.com/dcu.sliced", 0, 0},
            {"device.gpustack.ai/hygon.visibility", 1024, 1024},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, &fx_hygon_c3000, 2, 0x3, recs, N_ELEMS(recs));
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
}

/* A full partitioned GPU still registers every pool; its profile keys carry the live instance. */
static void test_node_keys__full_gpu_keeps_keys(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        const struct tsr_alloc_record recs[] = {
            {0, TSR_MODE_PARTITIONED, 1585000, 0, fx_pidx(h100, "7g.80gb"), 0, false},
        };
        static const struct want_key want[] = {
            {"nvidia.com/gpu", 0, 0},
            {"nvidia.com/gpu.partitioned", 1, 1},
            {"nvidia.com/gpu.partitioned.mig-1g.10gb", 0, 0},
            {"nvidia.com/gpu.partitioned.mig-1g.20gb", 0, 0},
            {"nvidia.com/gpu.partitioned.mig-2g.20gb", 0, 0},
            {"nvidia.com/gpu.partitioned.mig-3g.40gb", 0, 0},
            {"nvidia.com/gpu.partitioned.mig-4g.40gb", 0, 0},
            {"nvidia.com/gpu.partitioned.mig-7g.80gb", 1, 1},
            {"nvidia.com/gpu.partitioned.units", 1600000, 1600000},
            {"nvidia.com/gpu.shared", 0, 0},
            {"nvidia.com/gpu.sliced", 0, 0},
            {"device.gpustack.ai/nvidia.visibility", 512, 512},
        };
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, h100, 1, 0x1, recs, N_ELEMS(recs));
        project(&nd, &keys);
        expect_keys(&keys, want, N_ELEMS(want));
}

static void test_node_keys__empty_node(void **state)
{
        static const struct want_key want[] = {
            {"nvidia.com/gpu", 0, 0},
            {"nvidia.com/gpu.partitioned", 0, 0},
            {"nvidia.com/gpu.shared", 0, 0},
            {"nvidia.com/gpu.sliced", 0, 0},
            {"device.gpustack.ai/nvidia.visibility", 0, 0},
        };
        struct tsr_node_keys keys;

        (void)state;
        assert_int_equal(tsr_node_keys_project(tsr_catalog_manufacturer(TSR_MFR_NVIDIA), NULL, NULL,
                                               0, &keys, NULL),
                         0);
        expect_keys(&keys, want, N_ELEMS(want));
}

static void test_node_keys__mixed_products_refused(void **state)
{
        struct tsr_accel_cap caps[2];
        struct tsr_accel_ledger ledger[2];
        struct tsr_node_keys keys, before;
        struct tsr_diag d;

        (void)state;
        tsr_capability_detect(fx_product(H100_NAME), 0, "GPU-0", false, &caps[0]);
        tsr_capability_detect(fx_product("NVIDIA A30"), 1, "GPU-1", false, &caps[1]);
        assert_int_equal(tsr_ledger_build(caps, 2, NULL, 0, ledger, NULL), 0);
        memset(&keys, 0x77, sizeof(keys));
        before = keys;
        tsr_diag_clear(&d);
        assert_int_equal(tsr_node_keys_project(tsr_catalog_manufacturer(TSR_MFR_NVIDIA), caps,
                                               ledger, 2, &keys, &d),
                         TSR_EINVAL);
        assert_int_equal(d.code, TSR_EINVAL);
        assert_true(d.msg[0] != '\0');
        assert_memory_equal(&keys, &before, sizeof(keys));
}

static void test_node_keys__find(void **state)
{
        struct fx_node nd;
        struct tsr_node_keys keys;

        (void)state;
        fx_node_build(&nd, fx_product(H100_NAME), 1, 0, NULL, 0);
        project(&nd, &keys);
        assert_null(tsr_node_keys_find(&keys, "nvidia.com/gp"));
        assert_null(tsr_node_keys_find(&keys, "nvidia.com/gpu.partitioned.units"));
        assert_null(tsr_node_keys_find(&keys, ""));
        assert_non_null(tsr_node_keys_find(&keys, "nvidia.com/gpu.sliced"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_node_keys__step1_all_logical),
            cmocka_unit_test(test_node_keys__step2_2_all_physical),
            cmocka_unit_test(test_node_keys__step2_4_one_3g_instance),
            cmocka_unit_test(test_node_keys__step3_mixed),
            cmocka_unit_test(test_node_keys__step3_1_both_kinds),
            cmocka_unit_test(test_node_keys__other_mode_tokens_unhealthy),
            cmocka_unit_test(test_node_keys__no_partition_kind_no_partition_keys),
            cmocka_unit_test(test_node_keys__hygon_slices),
            cmocka_unit_test(test_node_keys__hygon_partitions),
            cmocka_unit_test(test_node_keys__full_gpu_keeps_keys),
            cmocka_unit_test(test_node_keys__empty_node),
            cmocka_unit_test(test_node_keys__mixed_products_refused),
            cmocka_unit_test(test_node_keys__find),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
