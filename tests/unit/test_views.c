/*
 * test_views.c - core/views: the InstanceType four-view status (EX/SH/SL/PT capacity,
 * onceMaxRequest, remaining), remainingProfiles / allocatedProfiles and slicedDetail, against the
 * walkthrough of seeds/nvidia-mig.md on node-h100 (steps 1, 2.2, 2.4, 3, 3.1) under DESIGN.md's
 * normative rule: SH onceMaxRequest is the largest node's count of accelerators with a free share
 * (8 idle GPUs read 8/80, not the recorded 80/80) and PT onceMaxRequest is 1 or 0 (the recorded
 * 7/52, 7/21, 7/17 read 1/52, 1/21, 1/17).
 *
 * Also: every offered profile is listed even at 0; slicedDetail (physical count 56, per-profile
 * ceilings) does not move with allocations; onceMaxRequest across several nodes is the largest
 * single node's (EX, SH) or accelerator's (SL), never a sum; partial shares, slices and full slot
 * tables; the 12-unit RTX PRO 6000 and the 4-unit A30.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/views.h"

#include "support/catalog_fixtures.h"

#include <stdlib.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define H100_NAME   "NVIDIA H100 80GB HBM3"
#define RTXPRO_NAME "NVIDIA RTX PRO 6000 Blackwell Server Edition"

static void compute(const struct fx_node *nodes, size_t n, struct tsr_pool_views *v)
{
        struct tsr_pool_node pn[4];

        for (size_t i = 0; i < n; i++) {
                pn[i].caps = nodes[i].caps;
                pn[i].ledger = nodes[i].ledger;
                pn[i].n = nodes[i].n;
        }
        memset(v, 0x6b, sizeof(*v)); /* every field must be written */
        tsr_views_compute(pn, n, v);
}

static void expect_view(const char *what, const struct tsr_view *v, int64_t capacity, int64_t once,
                        int64_t remaining)
{
        if (v->capacity != capacity || v->once_max != once || v->remaining != remaining)
                fail_msg("%s: capacity %lld, %lld/%lld; want capacity %lld, %lld/%lld", what,
                         (long long)v->capacity, (long long)v->once_max, (long long)v->remaining,
                         (long long)capacity, (long long)once, (long long)remaining);
}

/* The four views as the kubectl column prints them, plus capacities. */
struct four {
        int64_t ex[3], sh[3], sl[3], pt[3]; /* capacity, onceMaxRequest, remaining */
};

static void expect_four(const struct tsr_pool_views *v, const struct four *w)
{
        expect_view("EX", &v->ex, w->ex[0], w->ex[1], w->ex[2]);
        expect_view("SH", &v->sh, w->sh[0], w->sh[1], w->sh[2]);
        expect_view("SL", &v->sl, w->sl[0], w->sl[1], w->sl[2]);
        expect_view("PT", &v->pt, w->pt[0], w->pt[1], w->pt[2]);
}

struct fig {
        const char *name;
        int64_t count;
};

/* The memory a profile's name states: "3g.40gb" is 40 GiB. */
static uint64_t named_mib(const char *name)
{
        return (uint64_t)strtoull(strchr(name, '.') + 1, NULL, 10) * 1024;
}

/* Asserts a profile list holds exactly want, in order, with the memory its name states. */
static void expect_figures(const char *what, const struct tsr_profile_figure *got, size_t n,
                           const struct tsr_product *p, const struct fig *want, size_t nwant)
{
        if (n != nwant)
                fail_msg("%s: %zu profiles, want %zu", what, n, nwant);
        for (size_t i = 0; i < n; i++) {
                const struct tsr_mig_profile *mp = tsr_product_profile(p, want[i].name);

                if (!got[i].name || strcmp(got[i].name, want[i].name) != 0 ||
                    got[i].count != want[i].count)
                        fail_msg("%s[%zu]: %s=%lld, want %s=%lld", what, i,
                                 got[i].name ? got[i].name : "(null)", (long long)got[i].count,
                                 want[i].name, (long long)want[i].count);
                assert_non_null(mp);
                assert_int_equal(got[i].memory_mib, named_mib(want[i].name));
        }
}

/* Step 2.2's slicedDetail.physical: 8 x (7, 4, 3, 2, 1, 1), count 56. */
static const struct fig h100_physical_8[] = {
    {"1g.10gb", 56}, {"1g.20gb", 32}, {"2g.20gb", 24},
    {"3g.40gb", 16}, {"4g.40gb", 8},  {"7g.80gb", 8},
};
static const struct fig h100_physical_3[] = {
    {"1g.10gb", 21}, {"1g.20gb", 12}, {"2g.20gb", 9},
    {"3g.40gb", 6},  {"4g.40gb", 3},  {"7g.80gb", 3},
};
static const struct fig h100_none_allocated[] = {
    {"1g.10gb", 0}, {"1g.20gb", 0}, {"2g.20gb", 0}, {"3g.40gb", 0}, {"4g.40gb", 0}, {"7g.80gb", 0},
};
static const struct fig h100_one_3g_allocated[] = {
    {"1g.10gb", 0}, {"1g.20gb", 0}, {"2g.20gb", 0}, {"3g.40gb", 1}, {"4g.40gb", 0}, {"7g.80gb", 0},
};

static struct tsr_alloc_record mig_3g_at_0(void)
{
        /* 3g.40gb: floor(40448 x 1600000 / 81920) = 790000 units. */
        struct tsr_alloc_record r = {0, TSR_MODE_PARTITIONED, 790000, 0, 0, 0, false};

        r.profile = fx_pidx(fx_product(H100_NAME), "3g.40gb");
        return r;
}

static void test_views__step1_all_logical(void **state)
{
        static const struct four want = {{8, 8, 8}, {80, 8, 80}, {800, 100, 800}, {0, 0, 0}};
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nd, fx_product(H100_NAME), 8, 0, NULL, 0);
        compute(&nd, 1, &v);
        expect_four(&v, &want);
        assert_int_equal(v.n_profiles, 0);
        assert_true(v.logical_present);
        assert_true(v.logical_overcommit);
        assert_int_equal(v.logical_count, 1024);
        assert_false(v.physical_present);
        assert_int_equal(v.physical_count, 0);
}

static void test_views__step2_2_all_physical(void **state)
{
        static const struct four want = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {56, 1, 56}};
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nd, h100, 8, 0xff, NULL, 0);
        compute(&nd, 1, &v);
        expect_four(&v, &want);
        /* Nothing allocated: remaining per profile equals the static ceilings. */
        expect_figures("remainingProfiles", v.remaining_profiles, v.n_profiles, h100,
                       h100_physical_8, N_ELEMS(h100_physical_8));
        expect_figures("allocatedProfiles", v.allocated_profiles, v.n_profiles, h100,
                       h100_none_allocated, N_ELEMS(h100_none_allocated));
        expect_figures("physical.profiles", v.physical_profiles, v.n_profiles, h100,
                       h100_physical_8, N_ELEMS(h100_physical_8));
        assert_false(v.logical_present);
        assert_int_equal(v.logical_count, 0);
        assert_true(v.physical_present);
        assert_int_equal(v.physical_count, 56);
}

static void test_views__step2_4_one_3g_instance(void **state)
{
        static const struct four want = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {56, 1, 52}};
        /* Seven untouched GPUs plus the carved one (slices 4-7 free): free counts only. */
        static const struct fig remaining[] = {
            {"1g.10gb", 49 + 3}, {"1g.20gb", 28 + 2}, {"2g.20gb", 21 + 1},
            {"3g.40gb", 14 + 1}, {"4g.40gb", 7 + 0},  {"7g.80gb", 7 + 0},
        };
        const struct tsr_product *h100 = fx_product(H100_NAME);
        const struct tsr_alloc_record recs[] = {mig_3g_at_0()};
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nd, h100, 8, 0xff, recs, N_ELEMS(recs));
        compute(&nd, 1, &v);
        expect_four(&v, &want);
        expect_figures("remainingProfiles", v.remaining_profiles, v.n_profiles, h100, remaining,
                       N_ELEMS(remaining));
        expect_figures("allocatedProfiles", v.allocated_profiles, v.n_profiles, h100,
                       h100_one_3g_allocated, N_ELEMS(h100_one_3g_allocated));
        /* slicedDetail still reports count 56 and 4g.40gb: 8 after the carve. */
        expect_figures("physical.profiles", v.physical_profiles, v.n_profiles, h100,
                       h100_physical_8, N_ELEMS(h100_physical_8));
        assert_int_equal(v.physical_count, 56);
}

static void test_views__step3_mixed(void **state)
{
        static const struct four want = {{5, 5, 5}, {50, 5, 50}, {500, 100, 500}, {21, 1, 21}};
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nd, h100, 8, 0x07, NULL, 0);
        compute(&nd, 1, &v);
        expect_four(&v, &want);
        expect_figures("remainingProfiles", v.remaining_profiles, v.n_profiles, h100,
                       h100_physical_3, N_ELEMS(h100_physical_3));
        expect_figures("physical.profiles", v.physical_profiles, v.n_profiles, h100,
                       h100_physical_3, N_ELEMS(h100_physical_3));
        assert_true(v.logical_present);
        assert_true(v.logical_overcommit);
        assert_int_equal(v.logical_count, 640);
        assert_true(v.physical_present);
        assert_int_equal(v.physical_count, 21);
}

static void test_views__step3_1_both_kinds(void **state)
{
        /* Seed: 4/4 40/40 100/450 7/17, read under DESIGN.md: 4/4 4/40 100/450 1/17. */
        static const struct four want = {{5, 4, 4}, {50, 4, 40}, {500, 100, 450}, {21, 1, 17}};
        static const struct fig remaining[] = {
            {"1g.10gb", 14 + 3}, {"1g.20gb", 8 + 2}, {"2g.20gb", 6 + 1},
            {"3g.40gb", 4 + 1},  {"4g.40gb", 2 + 0}, {"7g.80gb", 2 + 0},
        };
        const struct tsr_product *h100 = fx_product(H100_NAME);
        const struct tsr_alloc_record recs[] = {
            mig_3g_at_0(), {5, TSR_MODE_SLICED, 800000, 0, -1, 0, false}, /* 50 % of GPU 5 */
        };
        struct fx_node before, nd;
        struct tsr_pool_views v0, v;

        (void)state;
        fx_node_build(&before, h100, 8, 0x07, NULL, 0);
        fx_node_build(&nd, h100, 8, 0x07, recs, N_ELEMS(recs));
        compute(&before, 1, &v0);
        compute(&nd, 1, &v);
        expect_four(&v, &want);
        expect_figures("remainingProfiles", v.remaining_profiles, v.n_profiles, h100, remaining,
                       N_ELEMS(remaining));
        expect_figures("allocatedProfiles", v.allocated_profiles, v.n_profiles, h100,
                       h100_one_3g_allocated, N_ELEMS(h100_one_3g_allocated));
        /* slicedDetail is capability only: identical before and after both allocations. */
        assert_int_equal(v.logical_present, v0.logical_present);
        assert_int_equal(v.logical_overcommit, v0.logical_overcommit);
        assert_int_equal(v.logical_count, v0.logical_count);
        assert_int_equal(v.physical_present, v0.physical_present);
        assert_int_equal(v.physical_count, v0.physical_count);
        assert_int_equal(v.physical_count, 21);
        expect_figures("physical.profiles", v.physical_profiles, v.n_profiles, h100,
                       h100_physical_3, N_ELEMS(h100_physical_3));
}

/* A profile a sibling filled reads 0 instead of vanishing; PT onceMaxRequest drops to 0. */
static void test_views__full_pool_lists_profiles_at_zero(void **state)
{
        static const struct four want = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {14, 0, 0}};
        static const struct fig allocated[] = {
            {"1g.10gb", 0}, {"1g.20gb", 0}, {"2g.20gb", 0},
            {"3g.40gb", 2}, {"4g.40gb", 0}, {"7g.80gb", 1},
        };
        static const struct fig ceilings[] = {
            {"1g.10gb", 14}, {"1g.20gb", 8}, {"2g.20gb", 6},
            {"3g.40gb", 4},  {"4g.40gb", 2}, {"7g.80gb", 2},
        };
        const struct tsr_product *h100 = fx_product(H100_NAME);
        const struct tsr_alloc_record recs[] = {
            {0, TSR_MODE_PARTITIONED, 1585000, 0, fx_pidx(h100, "7g.80gb"), 0, false},
            {1, TSR_MODE_PARTITIONED, 790000, 0, fx_pidx(h100, "3g.40gb"), 0, false},
            {1, TSR_MODE_PARTITIONED, 790000, 0, fx_pidx(h100, "3g.40gb"), 4, false},
        };
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nd, h100, 2, 0x3, recs, N_ELEMS(recs));
        compute(&nd, 1, &v);
        expect_four(&v, &want);
        expect_figures("remainingProfiles", v.remaining_profiles, v.n_profiles, h100,
                       h100_none_allocated, N_ELEMS(h100_none_allocated));
        expect_figures("allocatedProfiles", v.allocated_profiles, v.n_profiles, h100, allocated,
                       N_ELEMS(allocated));
        expect_figures("physical.profiles", v.physical_profiles, v.n_profiles, h100, ceilings,
                       N_ELEMS(ceilings));
}

/* EX and SH take the largest single node's count, never the pool's sum. */
static void test_views__multi_node_once_max_is_largest_node(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_alloc_record recs[6];
        struct fx_node nodes[2];
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nodes[0], h100, 8, 0, NULL, 0);
        fx_node_build(&nodes[1], h100, 3, 0, NULL, 0);
        compute(nodes, 2, &v);
        {
                static const struct four want = {
                    {11, 8, 11}, {110, 8, 110}, {1100, 100, 1100}, {0, 0, 0}};

                expect_four(&v, &want);
        }
        assert_int_equal(v.logical_count, 11 * 128);

        /* Six exclusive GPUs on the big node leave it 2 free; the small node's 3 is larger. */
        for (unsigned i = 0; i < 6; i++) {
                struct tsr_alloc_record r = {i, TSR_MODE_EXCLUSIVE, 0, 0, -1, 0, false};

                recs[i] = r;
        }
        fx_node_build(&nodes[0], h100, 8, 0, recs, 6);
        compute(nodes, 2, &v);
        {
                static const struct four want = {
                    {11, 3, 5}, {110, 3, 50}, {1100, 100, 500}, {0, 0, 0}};

                expect_four(&v, &want);
        }
        /* Order of nodes does not matter. */
        {
                struct fx_node swapped[2];

                swapped[0] = nodes[1];
                swapped[1] = nodes[0];
                compute(swapped, 2, &v);
                assert_int_equal(v.ex.once_max, 3);
                assert_int_equal(v.sh.once_max, 3);
        }
}

/* PT across nodes: capacity and remaining add up, onceMaxRequest stays 1; physical adds up. */
static void test_views__multi_node_partitions(void **state)
{
        static const struct four want = {{2, 2, 2}, {20, 2, 20}, {200, 100, 200}, {42, 1, 38}};
        const struct tsr_product *h100 = fx_product(H100_NAME);
        const struct tsr_alloc_record recs[] = {mig_3g_at_0()};
        struct fx_node nodes[2];
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nodes[0], h100, 4, 0x0f, recs, N_ELEMS(recs)); /* 3 + 3 x 7 = 24 */
        fx_node_build(&nodes[1], h100, 4, 0x03, NULL, 0);             /* 2 x 7 = 14 */
        compute(nodes, 2, &v);
        expect_four(&v, &want);
        assert_int_equal(v.physical_count, 42);
        assert_int_equal(v.logical_count, 256);
}

static void test_views__shares(void **state)
{
        struct tsr_alloc_record recs[14];
        size_t n = 0;
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        /* GPU 0: ten shares held (full); GPU 1: three shares (7 free); GPU 2: free. */
        for (int i = 0; i < 10; i++) {
                struct tsr_alloc_record r = {0, TSR_MODE_SHARED, 0, 1, -1, 0, false};

                recs[n++] = r;
        }
        for (int i = 0; i < 3; i++) {
                struct tsr_alloc_record r = {1, TSR_MODE_SHARED, 0, 1, -1, 0, false};

                recs[n++] = r;
        }
        fx_node_build(&nd, fx_product(H100_NAME), 3, 0, recs, n);
        compute(&nd, 1, &v);
        {
                /* SH: GPUs 1 and 2 still have a free share; 7 + 10 shares. */
                static const struct four want = {
                    {3, 1, 1}, {30, 2, 17}, {300, 100, 100}, {0, 0, 0}};

                expect_four(&v, &want);
        }
}

static void test_views__slices(void **state)
{
        const struct tsr_alloc_record recs[] = {
            {0, TSR_MODE_SLICED, 480000, 0, -1, 0, false}, /* 30 % -> 70 % left */
            {1, TSR_MODE_SLICED, 960000, 0, -1, 0, false}, /* 60 % -> 40 % left */
            {2, TSR_MODE_SLICED, 800001, 0, -1, 0, false}, /* 799999 left: 49 % */
        };
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nd, fx_product(H100_NAME), 3, 0, recs, N_ELEMS(recs));
        compute(&nd, 1, &v);
        {
                /* The freest single accelerator's percent, not the sum. */
                static const struct four want = {{3, 0, 0}, {30, 0, 0}, {300, 70, 159}, {0, 0, 0}};

                expect_four(&v, &want);
        }
}

/* A card holding all its slice slots takes no further slice however much memory is left. */
static void test_views__full_slot_table(void **state)
{
        struct tsr_alloc_record recs[5];
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        for (unsigned i = 0; i < 4; i++) { /* four 10 % slices on card 0 */
                struct tsr_alloc_record r = {0, TSR_MODE_SLICED, 160000, 0, -1, 0, false};

                recs[i] = r;
        }
        {
                struct tsr_alloc_record r = {1, TSR_MODE_SLICED, 1280000, 0, -1, 0, false};

                recs[4] = r; /* one 80 % slice on card 1: 20 % and 3 slots left */
        }
        fx_node_build(&nd, &fx_hygon_k100, 2, 0, recs, N_ELEMS(recs));
        compute(&nd, 1, &v);
        {
                static const struct four want = {{2, 0, 0}, {20, 0, 0}, {200, 20, 20}, {0, 0, 0}};

                expect_four(&v, &want);
        }
        assert_true(v.logical_present);
        assert_false(v.logical_overcommit);
        assert_int_equal(v.logical_count, 8);
}

static void test_views__rtx_pro_6000(void **state)
{
        static const struct fig idle[] = {
            {"1g.24gb", 4}, {"1g.24gb-me", 4}, {"2g.48gb", 2}, {"2g.48gb-me", 2}, {"4g.96gb", 1},
        };
        /* A 2g.48gb at 0 takes slices 0-5: the 1g starts 6 and 9 and the 2g start 6 stay. */
        static const struct fig after[] = {
            {"1g.24gb", 2}, {"1g.24gb-me", 2}, {"2g.48gb", 1}, {"2g.48gb-me", 1}, {"4g.96gb", 0},
        };
        static const struct fig allocated[] = {
            {"1g.24gb", 0}, {"1g.24gb-me", 0}, {"2g.48gb", 1}, {"2g.48gb-me", 0}, {"4g.96gb", 0},
        };
        const struct tsr_product *rtx = fx_product(RTXPRO_NAME);
        const struct tsr_alloc_record recs[] = {
            {0, TSR_MODE_PARTITIONED, 789583, 0, fx_pidx(rtx, "2g.48gb"), 0, false},
        };
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nd, rtx, 1, 0x1, NULL, 0);
        compute(&nd, 1, &v);
        expect_view("PT", &v.pt, 4, 1, 4);
        expect_figures("remainingProfiles", v.remaining_profiles, v.n_profiles, rtx, idle,
                       N_ELEMS(idle));
        fx_node_build(&nd, rtx, 1, 0x1, recs, N_ELEMS(recs));
        compute(&nd, 1, &v);
        expect_view("PT", &v.pt, 4, 1, 2);
        expect_figures("remainingProfiles", v.remaining_profiles, v.n_profiles, rtx, after,
                       N_ELEMS(after));
        expect_figures("allocatedProfiles", v.allocated_profiles, v.n_profiles, rtx, allocated,
                       N_ELEMS(allocated));
        expect_figures("physical.profiles", v.physical_profiles, v.n_profiles, rtx, idle,
                       N_ELEMS(idle));
        assert_int_equal(v.physical_count, 4);
}

static void test_views__a30(void **state)
{
        static const struct fig idle[] = {{"1g.6gb", 8}, {"2g.12gb", 4}, {"4g.24gb", 2}};
        const struct tsr_product *a30 = fx_product("NVIDIA A30");
        struct fx_node nd;
        struct tsr_pool_views v;

        (void)state;
        fx_node_build(&nd, a30, 2, 0x3, NULL, 0);
        compute(&nd, 1, &v);
        expect_view("PT", &v.pt, 8, 1, 8);
        expect_figures("remainingProfiles", v.remaining_profiles, v.n_profiles, a30, idle,
                       N_ELEMS(idle));
        assert_int_equal(v.physical_count, 8);
}

static void test_views__empty_pool(void **state)
{
        static const struct four want = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
        struct tsr_pool_views v;

        (void)state;
        memset(&v, 0x6b, sizeof(v));
        tsr_views_compute(NULL, 0, &v);
        expect_four(&v, &want);
        assert_int_equal(v.n_profiles, 0);
        assert_false(v.logical_present);
        assert_false(v.physical_present);
        assert_int_equal(v.logical_count, 0);
        assert_int_equal(v.physical_count, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_views__step1_all_logical),
            cmocka_unit_test(test_views__step2_2_all_physical),
            cmocka_unit_test(test_views__step2_4_one_3g_instance),
            cmocka_unit_test(test_views__step3_mixed),
            cmocka_unit_test(test_views__step3_1_both_kinds),
            cmocka_unit_test(test_views__full_pool_lists_profiles_at_zero),
            cmocka_unit_test(test_views__multi_node_once_max_is_largest_node),
            cmocka_unit_test(test_views__multi_node_partitions),
            cmocka_unit_test(test_views__shares),
            cmocka_unit_test(test_views__slices),
            cmocka_unit_test(test_views__full_slot_table),
            cmocka_unit_test(test_views__rtx_pro_6000),
            cmocka_unit_test(test_views__a30),
            cmocka_unit_test(test_views__empty_pool),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
