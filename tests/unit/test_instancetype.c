/*
 * test_instancetype.c - core/instancetype: InstanceType naming and unit presets
 * (spec/upstream-behavior.md §9, §10; seeds/nvidia-mig.md walkthrough).
 *
 * Covers: the group id (lower-cased driver name, words joined by '-', the manufacturer's own word
 * and "tesla" dropped), aKey = <manufacturer>-<group id>, the InstanceType / ClusterQueue names
 * gpustack--nvidia-h100-80gb-hbm3-linux-amd64 and gpustack--generic-linux-amd64, their entrance
 * LocalQueues exactly as the seed prints them (gpustack-fnv64-e4768a65ca0ce96b and
 * gpustack-fnv64-3b93966fd73eb9ec, 31 characters), the unit presets (12/192Gi/100Gi on an H100,
 * 1/2Gi/100Gi CPU-only, the small/medium/large tiers), and TSR_ETOOBIG on every buffer one byte
 * too small, with out left untouched (DESIGN.md: *out is written only on success).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "core/instancetype.h"

#include "support/catalog_fixtures.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define H100_NAME "NVIDIA H100 80GB HBM3"

struct id_row {
        const char *product;
        const char *group, *akey;
};

static const struct id_row id_rows[] = {
    {H100_NAME, "h100-80gb-hbm3", "nvidia-h100-80gb-hbm3"},
    {"NVIDIA H100 PCIe", "h100-pcie", "nvidia-h100-pcie"},
    {"NVIDIA A10G", "a10g", "nvidia-a10g"},
    {"Tesla T4", "t4", "nvidia-t4"},
    {"NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb", "nvidia-a100-sxm4-40gb"},
    {"NVIDIA A100 80GB PCIe", "a100-80gb-pcie", "nvidia-a100-80gb-pcie"},
    {"NVIDIA A30", "a30", "nvidia-a30"},
    {"NVIDIA GH200 480GB", "gh200-480gb", "nvidia-gh200-480gb"},
    {"NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell-server-edition",
     "nvidia-rtx-pro-6000-blackwell-server-edition"},
};

static void test_instancetype__group_id_and_accel_key(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(id_rows); i++) {
                const struct tsr_product *p = fx_product(id_rows[i].product);
                char out[TSR_NAME_MAX];

                assert_int_equal(tsr_instancetype_group_id(p, out, sizeof(out)), 0);
                assert_string_equal(out, id_rows[i].group);
                assert_int_equal(tsr_instancetype_accel_key(p, out, sizeof(out)), 0);
                assert_string_equal(out, id_rows[i].akey);
        }
}

static void test_instancetype__manufacturer_word_dropped(void **state)
{
        char out[TSR_NAME_MAX];

        (void)state;
        assert_int_equal(tsr_instancetype_group_id(&fx_hygon_k100, out, sizeof(out)), 0);
        assert_string_equal(out, "k100");
        assert_int_equal(tsr_instancetype_accel_key(&fx_hygon_k100, out, sizeof(out)), 0);
        assert_string_equal(out, "hygon-k100");
}

static void test_instancetype__names(void **state)
{
        char out[TSR_NAME_MAX];

        (void)state;
        assert_int_equal(
            tsr_instancetype_name(fx_product(H100_NAME), "linux", "amd64", out, sizeof(out)), 0);
        assert_string_equal(out, "gpustack--nvidia-h100-80gb-hbm3-linux-amd64");
        assert_int_equal(tsr_instancetype_name(NULL, "linux", "amd64", out, sizeof(out)), 0);
        assert_string_equal(out, "gpustack--generic-linux-amd64");
        assert_int_equal(
            tsr_instancetype_name(fx_product("NVIDIA A10G"), "linux", "arm64", out, sizeof(out)),
            0);
        assert_string_equal(out, "gpustack--nvidia-a10g-linux-arm64");
}

static void test_instancetype__entrance_names_from_the_seed(void **state)
{
        char out[64];

        (void)state;
        memset(out, 'Z', sizeof(out));
        tsr_instancetype_entrance("gpustack--nvidia-h100-80gb-hbm3-linux-amd64", out);
        assert_string_equal(out, "gpustack-fnv64-e4768a65ca0ce96b");
        assert_int_equal(strlen(out), TSR_ENTRANCE_LEN);
        for (size_t i = TSR_ENTRANCE_LEN + 1; i < sizeof(out); i++)
                assert_int_equal(out[i], 'Z'); /* 32 bytes are enough */
        tsr_instancetype_entrance("gpustack--generic-linux-amd64", out);
        assert_string_equal(out, "gpustack-fnv64-3b93966fd73eb9ec");
        assert_int_equal(strlen(out), TSR_ENTRANCE_LEN);
}

/* FNV-1a-64 of "" is the offset basis; of "a" the published test vector af63dc4c8601ec8c. */
static void test_instancetype__entrance_hash_vectors(void **state)
{
        char out[TSR_ENTRANCE_LEN + 1];

        (void)state;
        tsr_instancetype_entrance("", out);
        assert_string_equal(out, "gpustack-fnv64-cbf29ce484222325");
        tsr_instancetype_entrance("a", out);
        assert_string_equal(out, "gpustack-fnv64-af63dc4c8601ec8c");
}

struct unit_row {
        const char *product; /* NULL: CPU-only */
        unsigned cpu, ram, storage;
};

static void test_instancetype__unit_presets(void **state)
{
        static const struct unit_row rows[] = {
            {H100_NAME, 12, 192, 100},               /* xlarge */
            {"NVIDIA H200", 12, 192, 100},           /* xlarge */
            {"NVIDIA A100-SXM4-80GB", 12, 128, 100}, /* large */
            {"NVIDIA A100-SXM4-40GB", 8, 64, 100},   /* medium */
            {"Tesla T4", 8, 32, 100},                /* small */
            {NULL, 1, 2, 100},                       /* CPU-only 1c / 2Gi / 100Gi */
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                struct tsr_unit_spec u =
                    tsr_instancetype_unit(rows[i].product ? fx_product(rows[i].product) : NULL);

                if (u.cpu != rows[i].cpu || u.ram_gib != rows[i].ram ||
                    u.storage_gib != rows[i].storage)
                        fail_msg("%s: %u/%uGi/%uGi, want %u/%uGi/%uGi",
                                 rows[i].product ? rows[i].product : "CPU-only", u.cpu, u.ram_gib,
                                 u.storage_gib, rows[i].cpu, rows[i].ram, rows[i].storage);
        }
}

typedef int (*namer)(char *out, size_t len);

static int group_h100(char *out, size_t len)
{
        return tsr_instancetype_group_id(fx_product(H100_NAME), out, len);
}

static int akey_h100(char *out, size_t len)
{
        return tsr_instancetype_accel_key(fx_product(H100_NAME), out, len);
}

static int name_h100(char *out, size_t len)
{
        return tsr_instancetype_name(fx_product(H100_NAME), "linux", "amd64", out, len);
}

static int name_generic(char *out, size_t len)
{
        return tsr_instancetype_name(NULL, "linux", "amd64", out, len);
}

/* want fits exactly in strlen(want) + 1 bytes; every smaller buffer is TSR_ETOOBIG, untouched. */
static void expect_exact_fit(namer f, const char *want)
{
        size_t need = strlen(want) + 1;
        char out[TSR_NAME_MAX + 8];

        memset(out, 'Z', sizeof(out));
        assert_int_equal(f(out, need), 0);
        assert_string_equal(out, want);
        for (size_t len = 0; len < need; len++) {
                int rc;

                memset(out, 'Z', sizeof(out));
                rc = f(out, len);
                if (rc != TSR_ETOOBIG)
                        fail_msg("\"%s\" into %zu bytes: %s, want TSR_ETOOBIG", want, len,
                                 tsr_err_name(rc));
                for (size_t i = 0; i < sizeof(out); i++)
                        if (out[i] != 'Z')
                                fail_msg("\"%s\" into %zu bytes: out[%zu] written on failure", want,
                                         len, i);
        }
}

static void test_instancetype__too_small_buffers(void **state)
{
        (void)state;
        expect_exact_fit(group_h100, "h100-80gb-hbm3");
        expect_exact_fit(akey_h100, "nvidia-h100-80gb-hbm3");
        expect_exact_fit(name_h100, "gpustack--nvidia-h100-80gb-hbm3-linux-amd64");
        expect_exact_fit(name_generic, "gpustack--generic-linux-amd64");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_instancetype__group_id_and_accel_key),
            cmocka_unit_test(test_instancetype__manufacturer_word_dropped),
            cmocka_unit_test(test_instancetype__names),
            cmocka_unit_test(test_instancetype__entrance_names_from_the_seed),
            cmocka_unit_test(test_instancetype__entrance_hash_vectors),
            cmocka_unit_test(test_instancetype__unit_presets),
            cmocka_unit_test(test_instancetype__too_small_buffers),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
