/*
 * test_vgpu_config.c - the slice's environment (vgpu/config.h): sizes, per-device overrides in
 * either order, the switches, and a message naming the variable for every malformed value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vgpu/config.h"

#define MIB (UINT64_C(1) << 20)

static int parse(const char *const *envp, struct tsr_vgpu_config *c, char *err)
{
        err[0] = '\0';
        return tsr_vgpu_config_parse(envp, c, err, 512);
}

static void sizes(void **state)
{
        static const struct {
                const char *text;
                uint64_t bytes;
        } ok[] = {{"0", 0},
                  {"1", 1},
                  {"1k", 1024},
                  {"3m", 3 * MIB},
                  {"24576m", 24576 * MIB},
                  {"2G", 2048 * MIB},
                  {"5Mi", 5 * MIB},
                  {"5MiB", 5 * MIB},
                  {"7mB", 7 * MIB},
                  {"1t", MIB * MIB}};
        static const char *const bad[] = {"",
                                          "m",
                                          "-1",
                                          "1.5g",
                                          "12x",
                                          "1 g",
                                          "1gg",
                                          "1Gb2",
                                          "18446744073709551616",
                                          "17179869184g"};
        uint64_t b;

        (void)state;
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                assert_int_equal(tsr_vgpu_parse_size(ok[i].text, &b), 0);
                assert_int_equal(b, ok[i].bytes);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(tsr_vgpu_parse_size(bad[i], &b), -1);
}

static void defaults_and_overrides(void **state)
{
        const char *const none[] = {"PATH=/bin", NULL};
        /* the per-device value wins whichever comes first */
        const char *const envp[] = {"CUDA_DEVICE_MEMORY_LIMIT_1=512m",
                                    "CUDA_DEVICE_MEMORY_LIMIT=2g",
                                    "CUDA_DEVICE_SM_LIMIT=30",
                                    "CUDA_DEVICE_SM_LIMIT_2=100",
                                    "CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/s/a.cache",
                                    NULL};
        struct tsr_vgpu_config c;
        char err[512];

        (void)state;
        assert_int_equal(parse(none, &c, err), 0);
        assert_string_equal(c.cache_path, TSR_VGPU_DEFAULT_CACHE);
        assert_int_equal(c.memory_limit[0], 0);
        assert_int_equal(c.sm_limit[0], 0);
        assert_false(c.disabled);
        assert_int_equal(c.log_level, 2);

        assert_int_equal(parse(envp, &c, err), 0);
        assert_int_equal(c.memory_limit[0], 2048 * MIB);
        assert_int_equal(c.memory_limit[1], 512 * MIB);
        assert_int_equal(c.memory_limit[TSR_VGPU_DEVICES_MAX - 1], 2048 * MIB);
        assert_int_equal(c.sm_limit[0], 30);
        assert_int_equal(c.sm_limit[2], 0); /* 100 % is no throttling */
        assert_string_equal(c.cache_path, "/tmp/s/a.cache");
}

static void switches(void **state)
{
        const char *const on[] = {"CUDA_DISABLE_CONTROL=true",
                                  "GPU_CORE_UTILIZATION_POLICY=disable", "LIBCUDA_LOG_LEVEL=4",
                                  NULL};
        const char *const off[] = {"CUDA_DISABLE_CONTROL=false",
                                   "GPU_CORE_UTILIZATION_POLICY=force", NULL};
        struct tsr_vgpu_config c;
        char err[512];

        (void)state;
        assert_int_equal(parse(on, &c, err), 0);
        assert_true(c.disabled);
        assert_true(c.throttle_disabled);
        assert_int_equal(c.log_level, 4);
        assert_int_equal(parse(off, &c, err), 0);
        assert_false(c.disabled);
        assert_false(c.throttle_disabled);
}

static void errors_name_the_variable(void **state)
{
        static const struct {
                const char *entry;
                const char *says;
        } cases[] = {
            {"CUDA_DEVICE_MEMORY_LIMIT=12x", "CUDA_DEVICE_MEMORY_LIMIT=12x: not a size"},
            {"CUDA_DEVICE_MEMORY_LIMIT_3=lots", "CUDA_DEVICE_MEMORY_LIMIT_3=lots: not a size"},
            {"CUDA_DEVICE_MEMORY_LIMIT_16=1g", "CUDA_DEVICE_MEMORY_LIMIT_16=1g: device index"},
            {"CUDA_DEVICE_SM_LIMIT=101", "CUDA_DEVICE_SM_LIMIT=101: not a percentage"},
            {"CUDA_DEVICE_SM_LIMIT_0=-5", "CUDA_DEVICE_SM_LIMIT_0=-5: not a percentage"},
            {"CUDA_DEVICE_MEMORY_SHARED_CACHE=rel", "CUDA_DEVICE_MEMORY_SHARED_CACHE=rel: not an"},
            {"GPU_CORE_UTILIZATION_POLICY=x", "GPU_CORE_UTILIZATION_POLICY=x: not one of"},
            {"LIBCUDA_LOG_LEVEL=9", "LIBCUDA_LOG_LEVEL=9: not a level"},
        };
        struct tsr_vgpu_config c;
        char err[512];

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char *envp[] = {"CUDA_DEVICE_MEMORY_LIMIT=1g", cases[i].entry, NULL};

                assert_int_equal(parse(envp, &c, err), -1);
                if (!strstr(err, cases[i].says))
                        fail_msg("%s: got \"%s\"", cases[i].entry, err);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(sizes),
            cmocka_unit_test(defaults_and_overrides),
            cmocka_unit_test(switches),
            cmocka_unit_test(errors_name_the_variable),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
