/*
 * test_printable.c - core/printable: the composite cells of `kubectl get instancetypes`.
 *
 * From views computed by tsr_views_compute on eight H100 80GB (seeds/nvidia-mig.md): step 1 idle
 * all-logical reads "12/192Gi/100Gi", "8/8 8/80 100/800 0/0", no partitions; step 2.4 (one
 * 3g.40gb at slice 0) reads "0/0 0/0 0/0 1/52" and the remainingProfiles list in table order. The
 * CPU pool's unit "1/2Gi/100Gi" and CPU view "128/132". The unit spec's strings are canonical
 * Kubernetes quantities ("1Ti", "1k"), a view's counts plain integers ("8000"); int64 extremes fit
 * without truncation; a profile list too long for the cell is cut after its last whole entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/printable.h"

#include "support/catalog_fixtures.h"

#include <stdio.h>
#include <string.h>

#define H100_NAME "NVIDIA H100 80GB HBM3"

static void views_of(const struct fx_node *nd, struct tsr_pool_views *v)
{
        struct tsr_pool_node pn = {nd->caps, nd->ledger, nd->n};

        tsr_views_compute(&pn, 1, v);
}

static void test_printable__walkthrough_step1_idle(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_unit_spec u = tsr_instancetype_unit(h100);
        struct tsr_view cpu = {0, 0, 0};
        static struct fx_node nd;
        struct tsr_pool_views v;
        struct tsr_printable p;

        (void)state;
        fx_node_build(&nd, h100, 8, 0, NULL, 0);
        views_of(&nd, &v);
        memset(&p, 0x6b, sizeof(p)); /* every field must be written */
        tsr_printable_fill(&u, &v, &cpu, &p);
        assert_string_equal(p.unit, "12/192Gi/100Gi");
        assert_string_equal(p.accelerator, "8/8 8/80 100/800 0/0");
        assert_string_equal(p.cpu, "0/0");
        assert_string_equal(p.partitions, "");
}

static void test_printable__walkthrough_step2_4_one_3g(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_unit_spec u = tsr_instancetype_unit(h100);
        struct tsr_alloc_record r = {0, TSR_MODE_PARTITIONED, 790000, 0, 0, 0, false};
        struct tsr_view cpu = {0, 0, 0};
        static struct fx_node nd;
        struct tsr_pool_views v;
        struct tsr_printable p;

        (void)state;
        r.profile = fx_pidx(h100, "3g.40gb");
        fx_node_build(&nd, h100, 8, 0xff, &r, 1);
        views_of(&nd, &v);
        tsr_printable_fill(&u, &v, &cpu, &p);
        assert_string_equal(p.accelerator, "0/0 0/0 0/0 1/52");
        assert_string_equal(p.partitions,
                            "1g.10gb:52,1g.20gb:30,2g.20gb:22,3g.40gb:15,4g.40gb:7,7g.80gb:7");
}

static void test_printable__cpu_pool(void **state)
{
        struct tsr_unit_spec u = tsr_instancetype_unit(NULL);
        struct tsr_view cpu = {132, 128, 132};
        struct tsr_pool_views v;
        struct tsr_printable p;

        (void)state;
        memset(&v, 0, sizeof(v));
        tsr_printable_fill(&u, &v, &cpu, &p);
        assert_string_equal(p.unit, "1/2Gi/100Gi");
        assert_string_equal(p.accelerator, "0/0 0/0 0/0 0/0");
        assert_string_equal(p.cpu, "128/132");
        assert_string_equal(p.partitions, "");
}

static void test_printable__quantities_and_counts(void **state)
{
        struct tsr_unit_spec u = {1000, 1024, 1536};
        struct tsr_view cpu = {INT64_MAX, INT64_MIN, INT64_MAX};
        struct tsr_pool_views v;
        struct tsr_unit_text t;
        struct tsr_printable p;
        char want[256];

        (void)state;
        tsr_printable_unit_text(&u, &t);
        assert_string_equal(t.cpu, "1k");
        assert_string_equal(t.ram, "1Ti");
        assert_string_equal(t.storage, "1536Gi");
        memset(&v, 0, sizeof(v));
        v.ex = (struct tsr_view){8000, 8000, 8000};
        v.sh = (struct tsr_view){0, INT64_MIN, INT64_MIN};
        v.sl = (struct tsr_view){0, INT64_MAX, INT64_MAX};
        v.pt = (struct tsr_view){0, INT64_MIN, INT64_MAX};
        tsr_printable_fill(&u, &v, &cpu, &p);
        assert_string_equal(p.unit, "1k/1Ti/1536Gi");
        snprintf(want, sizeof(want), "8000/8000 %lld/%lld %lld/%lld %lld/%lld",
                 (long long)INT64_MIN, (long long)INT64_MIN, (long long)INT64_MAX,
                 (long long)INT64_MAX, (long long)INT64_MIN, (long long)INT64_MAX);
        assert_string_equal(p.accelerator, want);
        snprintf(want, sizeof(want), "%lld/%lld", (long long)INT64_MIN, (long long)INT64_MAX);
        assert_string_equal(p.cpu, want);
}

static void test_printable__long_profile_list_cut_whole(void **state)
{
        static const char name[] = "a-profile-name-long-enough-to-overflow-the-cell-0123456789";
        struct tsr_unit_spec u = {1, 2, 100};
        struct tsr_view cpu = {0, 0, 0};
        struct tsr_pool_views v;
        struct tsr_printable p;
        char entry[128];
        size_t len, n;

        (void)state;
        memset(&v, 0, sizeof(v));
        v.n_profiles = TSR_MIG_PROFILES_MAX;
        for (size_t i = 0; i < v.n_profiles; i++) {
                v.remaining_profiles[i].name = name;
                v.remaining_profiles[i].count = INT64_MAX;
        }
        tsr_printable_fill(&u, &v, &cpu, &p);
        len = strlen(p.partitions);
        n = (size_t)snprintf(entry, sizeof(entry), "%s:%lld", name, (long long)INT64_MAX);
        assert_true(len < sizeof(p.partitions));
        /* Whole entries only: k entries and k-1 commas. */
        assert_int_equal((len + 1) % (n + 1), 0);
        assert_true((len + 1) / (n + 1) < TSR_MIG_PROFILES_MAX);
        assert_true(len + 1 + n + 1 > sizeof(p.partitions) - 1); /* the next one would not fit */
        assert_string_equal(p.partitions + len - n, entry);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_printable__walkthrough_step1_idle),
            cmocka_unit_test(test_printable__walkthrough_step2_4_one_3g),
            cmocka_unit_test(test_printable__cpu_pool),
            cmocka_unit_test(test_printable__quantities_and_counts),
            cmocka_unit_test(test_printable__long_profile_list_cut_whole),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
