/*
 * test_capability.c - core/capability: detection of one accelerator's population and offer.
 *
 * Covers: an H100 with MIG on offers its six key-safe profiles (1g.10gb+me excluded) with static
 * ceilings 7/4/3/2/1/1 and partition count 7 (seeds/nvidia-mig.md step 2.2, "GPU 0 partitioned:
 * count=7 profiles=..."); MIG off gives 128 overcommitted slice slots (step 1); the RTX PRO 6000
 * offers only 1g.24gb, 1g.24gb-me, 2g.48gb, 2g.48gb-me and 4g.96gb; the A30 offers 1g.6gb,
 * 2g.12gb and 4g.24gb; a product without MIG, or of a manufacturer without a partition kind, is
 * never partitioned; a profile with no legal placement is not offered; Hygon-like slice slots (4,
 * no overcommit) and a Hygon C-3000-like partition table (spec/upstream-behavior.md §8); uuid copy
 * and truncation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/capability.h"

#include "support/catalog_fixtures.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define S(n)       (UINT32_C(1) << (n))

/* A MIG table on a manufacturer with no partition kind still yields no partitions. */
static const struct tsr_product cambricon_mig = {"Cambricon MLU-X",
                                                 TSR_MFR_CAMBRICON,
                                                 65520,
                                                 12,
                                                 128,
                                                 fx_hygon_c3000_profiles,
                                                 N_ELEMS(fx_hygon_c3000_profiles)};

/* Asserts the offered set is exactly the named profiles, each with its ceiling. */
static void expect_offer(const struct tsr_accel_cap *c, const char *const *names,
                         const unsigned *ceilings, size_t n, unsigned count)
{
        const struct tsr_product *p = c->product;
        uint32_t want = 0;

        assert_true(c->partitioned);
        assert_int_equal(c->slice_slots, 0);
        assert_false(c->cores_overcommit);
        for (size_t i = 0; i < n; i++) {
                const struct tsr_mig_profile *mp = tsr_product_profile(p, names[i]);
                unsigned idx;

                if (!mp)
                        fail_msg("%s has no profile %s", p->name, names[i]);
                idx = (unsigned)(mp - p->profiles);
                want |= S(idx);
                if (tsr_capability_profile_ceiling(c, idx) != ceilings[i])
                        fail_msg("%s %s: ceiling %u, want %u", p->name, names[i],
                                 tsr_capability_profile_ceiling(c, idx), ceilings[i]);
        }
        if (c->offered != want)
                fail_msg("%s: offered %#x, want %#x", p->name, (unsigned)c->offered,
                         (unsigned)want);
        for (unsigned i = 0; i < p->n_profiles; i++)
                if (!(want & S(i)))
                        assert_int_equal(tsr_capability_profile_ceiling(c, i), 0);
        assert_int_equal(tsr_capability_partition_count(c), count);
}

static void test_capability__h100_mig_on(void **state)
{
        static const char *const names[] = {"1g.10gb", "1g.20gb", "2g.20gb",
                                            "3g.40gb", "4g.40gb", "7g.80gb"};
        static const unsigned ceilings[] = {7, 4, 3, 2, 1, 1};
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(fx_product("NVIDIA H100 80GB HBM3"), 3, "GPU-h100-3", true, &c);
        assert_int_equal(c.index, 3);
        assert_string_equal(c.uuid, "GPU-h100-3");
        expect_offer(&c, names, ceilings, N_ELEMS(names), 7);
        assert_int_equal(__builtin_popcount(c.offered), 6);
}

static void test_capability__h100_mig_off(void **state)
{
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(fx_product("NVIDIA H100 80GB HBM3"), 0, "GPU-0", false, &c);
        assert_false(c.partitioned);
        assert_int_equal(c.offered, 0);
        assert_int_equal(c.slice_slots, 128);
        assert_true(c.cores_overcommit);
        assert_int_equal(tsr_capability_partition_count(&c), 0);
        for (unsigned i = 0; i < c.product->n_profiles; i++)
                assert_int_equal(tsr_capability_profile_ceiling(&c, i), 0);
}

static void test_capability__rtx_pro_6000(void **state)
{
        static const char *const names[] = {"1g.24gb", "1g.24gb-me", "2g.48gb", "2g.48gb-me",
                                            "4g.96gb"};
        static const unsigned ceilings[] = {4, 4, 2, 2, 1};
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(fx_product("NVIDIA RTX PRO 6000 Blackwell Server Edition"), 0,
                              "GPU-r", true, &c);
        expect_offer(&c, names, ceilings, N_ELEMS(names), 4);
}

static void test_capability__a30(void **state)
{
        static const char *const names[] = {"1g.6gb", "2g.12gb", "4g.24gb"};
        static const unsigned ceilings[] = {4, 2, 1};
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(fx_product("NVIDIA A30"), 1, "GPU-a30", true, &c);
        expect_offer(&c, names, ceilings, N_ELEMS(names), 4);
        tsr_capability_detect(fx_product("NVIDIA A30"), 1, "GPU-a30", false, &c);
        assert_false(c.partitioned);
        assert_int_equal(c.slice_slots, 128);
}

static void test_capability__a100_40gb(void **state)
{
        static const char *const names[] = {"1g.5gb",  "1g.10gb", "2g.10gb",
                                            "3g.20gb", "4g.20gb", "7g.40gb"};
        static const unsigned ceilings[] = {7, 4, 3, 2, 1, 1};
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(fx_product("NVIDIA A100-SXM4-40GB"), 0, "GPU-a", true, &c);
        expect_offer(&c, names, ceilings, N_ELEMS(names), 7);
}

static void test_capability__non_mig_product_never_partitioned(void **state)
{
        static const char *const names[] = {"NVIDIA L4", "Tesla T4", "NVIDIA A10G", "NVIDIA L40S"};

        (void)state;
        for (size_t i = 0; i < N_ELEMS(names); i++) {
                struct tsr_accel_cap c;

                tsr_capability_detect(fx_product(names[i]), 0, "GPU-x", true, &c);
                assert_false(c.partitioned);
                assert_int_equal(c.offered, 0);
                assert_int_equal(c.slice_slots, 128);
                assert_true(c.cores_overcommit);
                assert_int_equal(tsr_capability_partition_count(&c), 0);
        }
}

static void test_capability__no_partition_kind_never_partitioned(void **state)
{
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(&cambricon_mig, 0, "MLU-0", true, &c);
        assert_false(c.partitioned);
        assert_int_equal(c.offered, 0);
        assert_int_equal(c.slice_slots, 16);
        assert_false(c.cores_overcommit);
        assert_int_equal(tsr_capability_partition_count(&c), 0);
}

static void test_capability__hygon_slice_slots(void **state)
{
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(&fx_hygon_k100, 2, "DCU-2", true, &c);
        assert_false(c.partitioned);
        assert_int_equal(c.slice_slots, 4);
        assert_false(c.cores_overcommit);
        tsr_capability_detect(&fx_hygon_c3000, 2, "DCU-2", false, &c);
        assert_false(c.partitioned);
        assert_int_equal(c.slice_slots, 4);
        assert_false(c.cores_overcommit);
}

static void test_capability__hygon_partitioned(void **state)
{
        static const char *const names[] = {"2g.15gb", "4g.31gb", "8g.63gb"};
        static const unsigned ceilings[] = {4, 2, 1};
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(&fx_hygon_c3000, 0, "DCU-0", true, &c);
        expect_offer(&c, names, ceilings, N_ELEMS(names), 4);
}

/* A profile with no legal placement is not offered; one capped below its starts keeps its cap. */
static void test_capability__no_placement_not_offered(void **state)
{
        static const struct tsr_mig_profile profiles[] = {
            {"1g.10gb", 19, 0, 9984, 1, 1, S(0) | S(1) | S(2) | S(3), 2},
            {"2g.20gb", 14, 1, 20096, 2, 2, 0, 2},
            {"4g.40gb", 5, 3, 40448, 4, 4, S(0), 1},
        };
        static const struct tsr_product p = {"fake", TSR_MFR_NVIDIA, 40960, 8, 64, profiles, 3};
        static const char *const names[] = {"1g.10gb", "4g.40gb"};
        static const unsigned ceilings[] = {2, 1};
        struct tsr_accel_cap c;

        (void)state;
        tsr_capability_detect(&p, 0, "GPU-f", true, &c);
        expect_offer(&c, names, ceilings, N_ELEMS(names), 2);
}

static void test_capability__uuid_copy_and_truncation(void **state)
{
        char long_uuid[200];
        struct tsr_accel_cap c;

        (void)state;
        memset(long_uuid, 'u', sizeof(long_uuid) - 1);
        long_uuid[sizeof(long_uuid) - 1] = '\0';
        memset(&c, 0x5a, sizeof(c));
        tsr_capability_detect(fx_product("NVIDIA L4"), 7, long_uuid, false, &c);
        assert_int_equal(c.index, 7);
        assert_int_equal(strlen(c.uuid), TSR_UUID_MAX - 1);
        assert_memory_equal(c.uuid, long_uuid, TSR_UUID_MAX - 1);
        tsr_capability_detect(fx_product("NVIDIA L4"), 0, "", false, &c);
        assert_string_equal(c.uuid, "");
        assert_string_equal(c.pci_bus_id, ""); /* detection knows none until it is set */
        tsr_capability_set_pci_bus_id(&c, "00000000:8D:00.0");
        assert_string_equal(c.pci_bus_id, "00000000:8D:00.0");
        tsr_capability_set_pci_bus_id(&c, long_uuid);
        assert_int_equal(strlen(c.pci_bus_id), TSR_PCI_BUS_ID_MAX - 1);
        tsr_capability_set_pci_bus_id(&c, "");
        assert_string_equal(c.pci_bus_id, "");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_capability__h100_mig_on),
            cmocka_unit_test(test_capability__h100_mig_off),
            cmocka_unit_test(test_capability__rtx_pro_6000),
            cmocka_unit_test(test_capability__a30),
            cmocka_unit_test(test_capability__a100_40gb),
            cmocka_unit_test(test_capability__non_mig_product_never_partitioned),
            cmocka_unit_test(test_capability__no_partition_kind_never_partitioned),
            cmocka_unit_test(test_capability__hygon_slice_slots),
            cmocka_unit_test(test_capability__hygon_partitioned),
            cmocka_unit_test(test_capability__no_placement_not_offered),
            cmocka_unit_test(test_capability__uuid_copy_and_truncation),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
