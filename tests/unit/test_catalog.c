/*
 * test_catalog.c - core/catalog: the nine manufacturer rows against spec/upstream-behavior.md §1.1
 * (key, PCI vendor, resource base, runtime class, partition kind) and §3 (slice slots, compute
 * overcommit); product lookup by the driver-reported name; the MIG axis width derived from the
 * placement tables (8 on the datacenter family, 4 on an A30, 12 on an RTX PRO 6000, 0 without
 * MIG); profile lookup; legal start counts; and the 8-unit family's id set and instance counts of
 * spec/mig-geometry-and-nvml.md §2.1.
 *
 * Every expected value is typed from the specs, never read back from the tables under test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/catalog.h"

#include "support/catalog_fixtures.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define H100_NAME   "NVIDIA H100 80GB HBM3"
#define A30_NAME    "NVIDIA A30"
#define RTXPRO_NAME "NVIDIA RTX PRO 6000 Blackwell Server Edition"

struct mfr_row {
        enum tsr_manufacturer_id id;
        const char *key, *pci, *base, *runtime, *kind;
        unsigned slots;
        bool overcommit;
};

/* spec/upstream-behavior.md §1.1 (columns 1-5) and §3 (slices/accelerator, overcommit). */
static const struct mfr_row mfr_rows[] = {
    {TSR_MFR_AMD, "amd", "1002", "amd.com/gpu", "amd", NULL, 128, true},
    {TSR_MFR_ASCEND, "ascend", "19e5", "huawei.com/npu", "ascend", NULL, 63, true},
    {TSR_MFR_CAMBRICON, "cambricon", "cabc", "cambricon.com/mlu", "cambricon", NULL, 16, false},
    {TSR_MFR_HYGON, "hygon", "1d94", "hygon.com/dcu", "hygon", "mig", 4, false},
    {TSR_MFR_ILUVATAR, "iluvatar", "1e3e", "iluvatar.com/gpu", "iluvatar", NULL, 100, true},
    {TSR_MFR_METAX, "metax", "9999", "metax-tech.com/gpu", "metax", NULL, 16, false},
    {TSR_MFR_MTHREADS, "mthreads", "1ed5", "mthreads.com/gpu", "mthreads", NULL, 16, false},
    {TSR_MFR_NVIDIA, "nvidia", "10de", "nvidia.com/gpu", "nvidia", "mig", 128, true},
    {TSR_MFR_THEAD, "thead", "1ded", "alibabacloud.com/ppu", NULL, "mig", 128, true},
};

static void assert_str_or_null(const char *got, const char *want, const char *what)
{
        if (!want && !got)
                return;
        if (!want || !got || strcmp(got, want) != 0)
                fail_msg("%s: got \"%s\", want \"%s\"", what, got ? got : "(null)",
                         want ? want : "(null)");
}

static void test_catalog__nine_manufacturers(void **state)
{
        (void)state;
        assert_int_equal(TSR_MFR__COUNT, 9);
        assert_int_equal(N_ELEMS(mfr_rows), 9);
        for (size_t i = 0; i < N_ELEMS(mfr_rows); i++) {
                const struct mfr_row *w = &mfr_rows[i];
                const struct tsr_manufacturer *m = tsr_catalog_manufacturer(w->id);

                assert_non_null(m);
                assert_int_equal(m->id, w->id);
                assert_str_or_null(m->key, w->key, "key");
                assert_str_or_null(m->pci_vendor, w->pci, w->key);
                assert_str_or_null(m->base, w->base, w->key);
                assert_str_or_null(m->runtime_class, w->runtime, w->key);
                assert_str_or_null(m->partition_kind, w->kind, w->key);
                if (m->slice_slots != w->slots)
                        fail_msg("%s: %u slice slots, want %u", w->key, m->slice_slots, w->slots);
                if (m->cores_overcommit != w->overcommit)
                        fail_msg("%s: overcommit %d, want %d", w->key, m->cores_overcommit,
                                 w->overcommit);
                assert_ptr_equal(tsr_catalog_manufacturer_by_key(w->key), m);
        }
}

static void test_catalog__manufacturer_lookup_misses(void **state)
{
        (void)state;
        assert_null(tsr_catalog_manufacturer(TSR_MFR__COUNT));
        assert_null(tsr_catalog_manufacturer((enum tsr_manufacturer_id) - 1));
        assert_null(tsr_catalog_manufacturer_by_key("NVIDIA"));
        assert_null(tsr_catalog_manufacturer_by_key("nvidia.com/gpu"));
        assert_null(tsr_catalog_manufacturer_by_key("nvidi"));
        assert_null(tsr_catalog_manufacturer_by_key(""));
        assert_null(tsr_catalog_manufacturer_by_key("intel"));
}

static void test_catalog__product_by_driver_name(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);

        (void)state;
        assert_string_equal(h100->name, H100_NAME);
        assert_int_equal(h100->manufacturer, TSR_MFR_NVIDIA);
        assert_int_equal(h100->vram_mib, 81920); /* the walkthrough's 655360 / 8 */
        assert_true(tsr_product_has_mig(h100));
        assert_int_equal(fx_product(A30_NAME)->manufacturer, TSR_MFR_NVIDIA);
        assert_false(tsr_product_has_mig(fx_product("Tesla T4")));
        assert_false(tsr_product_has_mig(fx_product("NVIDIA L4")));
        assert_true(tsr_product_has_mig(fx_product("NVIDIA A100-SXM4-40GB")));
        /* Exact match only: no prefix, no case folding, no trimming. */
        assert_null(tsr_catalog_product_by_name("NVIDIA H100 80GB"));
        assert_null(tsr_catalog_product_by_name("nvidia h100 80gb hbm3"));
        assert_null(tsr_catalog_product_by_name("NVIDIA H100 80GB HBM3 "));
        assert_null(tsr_catalog_product_by_name("H100"));
        assert_null(tsr_catalog_product_by_name(""));
}

static void test_catalog__product_table_is_consistent(void **state)
{
        const struct tsr_product *products;
        size_t n = tsr_catalog_products(&products);

        (void)state;
        assert_true(n >= 15);
        for (size_t i = 0; i < n; i++) {
                const struct tsr_product *p = &products[i];

                /* Names are unique: the lookup finds each row itself. */
                assert_ptr_equal(tsr_catalog_product_by_name(p->name), p);
                assert_non_null(tsr_catalog_manufacturer(p->manufacturer));
                assert_true(p->vram_mib > 0);
                assert_true(p->n_profiles <= TSR_MIG_PROFILES_MAX);
                assert_int_equal(p->profiles == NULL, p->n_profiles == 0);
                for (size_t k = 0; k < p->n_profiles; k++) {
                        const struct tsr_mig_profile *mp = &p->profiles[k];

                        assert_true(mp->starts != 0);
                        assert_true(mp->max_instances >= 1);
                        assert_true(mp->max_instances <= tsr_mig_profile_start_count(mp));
                        assert_true(mp->memory_mib > 0 && mp->memory_mib <= p->vram_mib);
                        assert_ptr_equal(tsr_product_profile(p, mp->name), mp);
                }
        }
}

static void test_catalog__mig_axis_width(void **state)
{
        static const char *const eight[] = {
            "NVIDIA A100-SXM4-40GB",
            "NVIDIA A100-PCIE-40GB",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100 80GB PCIe",
            H100_NAME,
            "NVIDIA H100 PCIe",
            "NVIDIA H100 NVL",
            "NVIDIA GH200 480GB",
            "NVIDIA H20",
            "NVIDIA H200",
            "NVIDIA H200 NVL",
            "NVIDIA B200",
            "NVIDIA GB200",
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(eight); i++)
                if (tsr_product_mig_width(fx_product(eight[i])) != 8)
                        fail_msg("%s: axis %u, want 8", eight[i],
                                 tsr_product_mig_width(fx_product(eight[i])));
        assert_int_equal(tsr_product_mig_width(fx_product(A30_NAME)), 4);
        assert_int_equal(tsr_product_mig_width(fx_product(RTXPRO_NAME)), 12);
        assert_int_equal(tsr_product_mig_width(fx_product("NVIDIA L40S")), 0);
        assert_int_equal(tsr_product_mig_width(fx_product("Tesla T4")), 0);
}

/* A product with one profile of span 3 at start 5 only: the width is max(start + size) = 8. */
static void test_catalog__width_is_max_start_plus_size(void **state)
{
        static const struct tsr_mig_profile one[] = {
            {"2g.x", 1, 0, 1000, 2, 3, UINT32_C(1) << 5, 1},
        };
        static const struct tsr_mig_profile two[] = {
            {"1g.x", 1, 0, 1000, 1, 1, 0x7, 3},
            {"5g.x", 2, 1, 5000, 5, 10, UINT32_C(1) << 10, 1},
        };
        struct tsr_product p = {"fake", TSR_MFR_NVIDIA, 10000, 1, 1, one, 1};

        (void)state;
        assert_int_equal(tsr_product_mig_width(&p), 8);
        p.profiles = two;
        p.n_profiles = 2;
        assert_int_equal(tsr_product_mig_width(&p), 20);
}

static void test_catalog__profile_lookup(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        const struct tsr_mig_profile *mp = tsr_product_profile(h100, "3g.40gb");

        (void)state;
        /* spec/mig-geometry-and-nvml.md §2.1 and the H100 80GB table. */
        assert_non_null(mp);
        assert_string_equal(mp->name, "3g.40gb");
        assert_int_equal(mp->gi_profile_id, 9);
        assert_int_equal(mp->nvml_index, 0x2);
        assert_int_equal(mp->compute_slices, 3);
        assert_int_equal(mp->size, 4);
        assert_int_equal(mp->starts, (1u << 0) | (1u << 4));
        assert_int_equal(mp->max_instances, 2);
        /* The table keeps the "+me" rows: excluding them is the detector's rule. */
        assert_non_null(tsr_product_profile(h100, "1g.10gb+me"));
        /* An A100-40GB name is not an H100 profile, and names match exactly. */
        assert_null(tsr_product_profile(h100, "3g.20gb"));
        assert_null(tsr_product_profile(h100, "3G.40GB"));
        assert_null(tsr_product_profile(h100, "3g.40"));
        assert_null(tsr_product_profile(h100, ""));
        assert_null(tsr_product_profile(fx_product("NVIDIA L4"), "1g.10gb"));

        mp = tsr_product_profile(fx_product(A30_NAME), "2g.12gb");
        assert_non_null(mp);
        assert_int_equal(mp->gi_profile_id, 5);
        assert_int_equal(mp->size, 2);
        assert_int_equal(mp->starts, (1u << 0) | (1u << 2));
        assert_int_equal(mp->max_instances, 2);

        mp = tsr_product_profile(fx_product(RTXPRO_NAME), "2g.48gb");
        assert_non_null(mp);
        assert_int_equal(mp->gi_profile_id, 5);
        assert_int_equal(mp->size, 6);
        assert_int_equal(mp->starts, (1u << 0) | (1u << 6));
        mp = tsr_product_profile(fx_product(RTXPRO_NAME), "1g.24gb");
        assert_non_null(mp);
        assert_int_equal(mp->gi_profile_id, 14);
        assert_int_equal(mp->size, 3);
        assert_int_equal(mp->starts, (1u << 0) | (1u << 3) | (1u << 6) | (1u << 9));
}

struct start_count {
        const char *product, *profile;
        unsigned starts;
};

static void test_catalog__start_counts(void **state)
{
        static const struct start_count rows[] = {
            {H100_NAME, "1g.10gb", 7},
            {H100_NAME, "1g.10gb+me", 7},
            {H100_NAME, "1g.20gb", 4},
            {H100_NAME, "2g.20gb", 3},
            {H100_NAME, "3g.40gb", 2},
            {H100_NAME, "4g.40gb", 1},
            {H100_NAME, "7g.80gb", 1},
            {A30_NAME, "1g.6gb", 4},
            {A30_NAME, "2g.12gb", 2},
            {A30_NAME, "4g.24gb", 1},
            {RTXPRO_NAME, "1g.24gb", 4},
            {RTXPRO_NAME, "1g.24gb-me", 4},
            {RTXPRO_NAME, "2g.48gb", 2},
            {RTXPRO_NAME, "4g.96gb", 1},
            {"NVIDIA A100-SXM4-40GB", "1g.5gb", 7},
            {"NVIDIA A100-SXM4-40GB", "1g.10gb", 4},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                const struct tsr_mig_profile *mp =
                    tsr_product_profile(fx_product(rows[i].product), rows[i].profile);

                if (!mp)
                        fail_msg("%s has no profile %s", rows[i].product, rows[i].profile);
                if (tsr_mig_profile_start_count(mp) != rows[i].starts)
                        fail_msg("%s %s: %u starts, want %u", rows[i].product, rows[i].profile,
                                 tsr_mig_profile_start_count(mp), rows[i].starts);
        }
}

/*
 * spec §2.1: every 8-unit product exposes ids 19/20/15/14/9/5/0 with max counts 7/1/4/3/2/1/1,
 * sizes 1/1/2/2/4/4/8 and start sets {0..6}/{0..6}/{0,2,4,6}/{0,2,4}/{0,4}/{0}/{0}.
 */
static void test_catalog__eight_unit_family_geometry(void **state)
{
        static const unsigned ids[] = {19, 20, 15, 14, 9, 5, 0};
        static const unsigned maxes[] = {7, 1, 4, 3, 2, 1, 1};
        static const unsigned sizes[] = {1, 1, 2, 2, 4, 4, 8};
        static const uint32_t starts[] = {0x7f, 0x7f, 0x55, 0x15, 0x11, 0x01, 0x01};
        const struct tsr_product *products;
        size_t n = tsr_catalog_products(&products);
        unsigned family = 0;

        (void)state;
        for (size_t i = 0; i < n; i++) {
                const struct tsr_product *p = &products[i];

                if (tsr_product_mig_width(p) != 8)
                        continue;
                family++;
                assert_int_equal(p->n_profiles, 7);
                for (unsigned k = 0; k < 7; k++) {
                        const struct tsr_mig_profile *mp = &p->profiles[k];

                        if (mp->gi_profile_id != ids[k] || mp->max_instances != maxes[k] ||
                            mp->size != sizes[k] || mp->starts != starts[k])
                                fail_msg("%s %s: id %u max %u size %u starts %#x", p->name,
                                         mp->name, mp->gi_profile_id, mp->max_instances, mp->size,
                                         (unsigned)mp->starts);
                }
                /* The "+me" row is the second one and says so in its name. */
                assert_non_null(strstr(p->profiles[1].name, "+me"));
        }
        assert_int_equal(family, 13);
}

/* A profile's nominal memory is the size its name states (seeds/nvidia-mig.md). */
static void test_catalog__nominal_memory_from_the_name(void **state)
{
        static const struct {
                const char *product, *profile;
                uint64_t mib;
        } rows[] = {
            {"NVIDIA H100 80GB HBM3", "3g.40gb", 40960},
            {"NVIDIA H100 80GB HBM3", "1g.10gb+me", 10240},
            {"NVIDIA A100-SXM4-40GB", "1g.5gb", 5120},
            {"NVIDIA A30", "1g.6gb", 6144},
            {"NVIDIA H200", "7g.141gb", 144384},
            {"NVIDIA RTX PRO 6000 Blackwell Server Edition", "1g.24gb-me", 24576},
        };
        struct tsr_mig_profile bad = {.name = "3g"};

        (void)state;
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                const struct tsr_product *p = tsr_catalog_product_by_name(rows[i].product);
                const struct tsr_mig_profile *mp;

                assert_non_null(p);
                mp = tsr_product_profile(p, rows[i].profile);
                assert_non_null(mp);
                assert_int_equal(tsr_mig_profile_nominal_mib(mp), rows[i].mib);
        }
        assert_int_equal(tsr_mig_profile_nominal_mib(&bad), 0);
        bad.name = "3g.xgb";
        assert_int_equal(tsr_mig_profile_nominal_mib(&bad), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_catalog__nine_manufacturers),
            cmocka_unit_test(test_catalog__manufacturer_lookup_misses),
            cmocka_unit_test(test_catalog__product_by_driver_name),
            cmocka_unit_test(test_catalog__product_table_is_consistent),
            cmocka_unit_test(test_catalog__mig_axis_width),
            cmocka_unit_test(test_catalog__width_is_max_start_plus_size),
            cmocka_unit_test(test_catalog__profile_lookup),
            cmocka_unit_test(test_catalog__start_counts),
            cmocka_unit_test(test_catalog__eight_unit_family_geometry),
            cmocka_unit_test(test_catalog__nominal_memory_from_the_name),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
