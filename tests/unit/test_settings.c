/*
 * test_settings.c - core/settings: the catalog (names unique, found by name, env names derived as
 * GPUSTACK_<UPPER_SNAKE>, upstream defaults) and Go's ParseBool spellings, with everything else
 * refused naming the Setting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "core/settings.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void test_catalog(void **state)
{
        struct tsr_settings s;

        (void)state;
        tsr_settings_defaults(&s);
        for (int i = 0; i < TSR_N_SETTINGS; i++) {
                const char *name = tsr_setting_name((enum tsr_setting)i);
                char env[96] = "GPUSTACK_";
                size_t n = strlen(env);

                assert_int_equal(tsr_setting_find(name), i);
                for (const char *p = name; *p; p++)
                        env[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
                env[n] = '\0';
                assert_string_equal(tsr_setting_env((enum tsr_setting)i), env);
                assert_int_equal(s.value[i], tsr_setting_default((enum tsr_setting)i));
        }
        assert_int_equal(tsr_setting_find("no-such-setting"), -1);
        /* Upstream defaults (spec/upstream-behavior.md §12). */
        assert_true(s.value[TSR_SETTING_WORKLOAD_FIT_AFFINITY]);
        assert_false(s.value[TSR_SETTING_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER]);
        assert_false(s.value[TSR_SETTING_NODE_MANAGEMENT_MANUAL]);
        assert_true(s.value[TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT]);
        assert_true(s.value[TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED]);
}

static void test_parse(void **state)
{
        static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
        static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
        static const char *const bad[] = {"", "yes", "on", "tRUE", "2", " true", "true "};
        struct tsr_diag diag;
        bool v;

        (void)state;
        for (size_t i = 0; i < 6; i++) {
                v = false;
                assert_int_equal(
                    tsr_setting_parse(TSR_SETTING_WORKLOAD_FIT_AFFINITY, yes[i], &v, &diag), 0);
                assert_true(v);
                assert_int_equal(
                    tsr_setting_parse(TSR_SETTING_WORKLOAD_FIT_AFFINITY, no[i], &v, &diag), 0);
                assert_false(v);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                v = true;
                tsr_diag_clear(&diag);
                assert_int_equal(
                    tsr_setting_parse(TSR_SETTING_NODE_MANAGEMENT_MANUAL, bad[i], &v, &diag),
                    TSR_EINVAL);
                assert_true(v);
                assert_non_null(strstr(diag.msg, "setting node-management-manual takes true or "
                                                 "false"));
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_catalog),
            cmocka_unit_test(test_parse),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
