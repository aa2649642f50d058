/*
 * test_webhook_instancetype.c - webhook/instancetype: the InstanceType validating and defaulting
 * handlers.
 *
 * Validating, table-driven: CREATE rows accepted and refused with the exact 422 text (one error
 * bare, several in brackets, in the rules' order); UPDATE rows where only displayName and inactive
 * may change, an absent field equals its zero value, and a legacy object breaking a create rule can
 * still be renamed; an object of the wrong shape is TSR_EPARSE; other operations are allowed.
 * Defaulting, table-driven: the object after defaulting, compared whole - generalGroup "generic",
 * the schedule labels with stale feature keys pruned and others kept, the entrance label
 * (gpustack-fnv64-<FNV-1a-64 of the name>, computed independently here), the awareness Setting
 * through the ext lookup, an accelerated type without a group left unlabelled. An
 * allocation-failure loop ends every run in the unfailed result or TSR_ENOMEM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "webhook/instancetype.h"

#include "support/failing_alloc.h"
#include "support/json_text.h"
#include "support/review_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define KIND    "InstanceType.worker.gpustack.ai"
#define GI_MSG  "must be a positive integer with a case-sensitive \"Gi\" suffix"
#define GENERIC "gpustack--generic-linux-amd64"
#define H100    "gpustack--nvidia-h100-linux-amd64"
#define LQ_GEN  "gpustack-fnv64-3b93966fd73eb9ec"
#define LQ_H100 "gpustack-fnv64-65ee45385e671d10"

/* A spec body for name with the given spec members. */
#define IT(name, spec) "{\"metadata\":{\"name\":\"" name "\"},\"spec\":{" spec "}}"
#define CPU_ONLY                                                                                   \
        "\"acceleratable\":false,\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":"           \
        "{\"cpu\":\"1\",\"ram\":\"2Gi\"},\"localStorage\":\"100Gi\""
#define ACCEL                                                                                      \
        "\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100\",\"os\":\"linux\","            \
        "\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"12\",\"ram\":\"192Gi\"},"                 \
        "\"localStorage\":\"100Gi\""

static struct tsr_webhook_lookup no_lookup; /* no readers, the default Settings */

/* Runs handler over op, object and old object (either may be NULL). */
static int run(tsr_webhook_handler h, const char *op, const char *obj, const char *old,
               struct tsr_verdict *v, struct tsr_diag *diag)
{
        return review_fx_run(h, &no_lookup, op, NULL, obj, old, v, diag);
}

struct row {
        const char *name;
        const char *op;
        const char *obj, *old;
        const char *want; /* NULL: allowed; else the exact 422 message */
};

static void check_rows(const struct row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct tsr_verdict v;
                struct tsr_diag diag;
                int rc = run(tsr_webhook_instancetype_validate, rows[i].op, rows[i].obj,
                             rows[i].old, &v, &diag);

                if (rc)
                        fail_msg("%s: rc %s (%s)", rows[i].name, tsr_err_name(rc), diag.msg);
                if (v.patched)
                        fail_msg("%s: a validating handler patched", rows[i].name);
                if (!rows[i].want) {
                        if (!v.allowed)
                                fail_msg("%s: denied: %s", rows[i].name, v.message);
                        continue;
                }
                if (v.allowed)
                        fail_msg("%s: allowed, want %s", rows[i].name, rows[i].want);
                if (v.code != 422 || strcmp(v.reason, "Invalid"))
                        fail_msg("%s: code %d reason %s", rows[i].name, v.code, v.reason);
                if (strcmp(v.message, rows[i].want))
                        fail_msg("%s:\n got  %s\n want %s", rows[i].name, v.message, rows[i].want);
        }
}

static void test_instancetype__create(void **state)
{
        static const struct row rows[] = {
            {"accelerated, complete", "CREATE", IT(H100, ACCEL), NULL, NULL},
            {"cpu-only, complete", "CREATE", IT(GENERIC, CPU_ONLY), NULL, NULL},
            {"cpu-only, +1 reads as 1", "CREATE",
             IT(GENERIC, "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"+1\","
                         "\"ram\":\"2Gi\"},\"localStorage\":\"100Gi\""),
             NULL, NULL},
            {"accelerated, int32 max cores", "CREATE",
             IT(H100, "\"acceleratable\":true,\"acceleratorGroup\":\"g\",\"os\":\"linux\","
                      "\"arch\":\"arm64\",\"unitResources\":{\"cpu\":\"2147483647\",\"ram\":"
                      "\"1Gi\"},\"localStorage\":\"1Gi\""),
             NULL, NULL},
            {"a core count written as a number (this project's rendering)", "CREATE",
             IT(H100, "\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100\",\"os\":"
                      "\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":12,\"ram\":"
                      "\"192Gi\"},\"localStorage\":\"100Gi\",\"memory\":81559"),
             NULL, NULL},
            {"a number where a Gi quantity belongs", "CREATE",
             IT("t", "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":1,"
                     "\"ram\":2},\"localStorage\":\"100Gi\""),
             NULL, KIND " \"t\" is invalid: spec.unitResources.ram: Invalid value: \"2\": " GI_MSG},
            {"empty spec: every rule, in order", "CREATE", "{\"metadata\":{\"name\":\"t\"}}", NULL,
             KIND " \"t\" is invalid: [spec.os: Required value: must be specified, spec.arch: "
                  "Required value: must be specified, spec.unitResources.cpu: Invalid value: \"\": "
                  "must be 1 when acceleratable is false, spec.unitResources.ram: Invalid value: "
                  "\"\": " GI_MSG ", spec.localStorage: Invalid value: \"\": " GI_MSG "]"},
            {"accelerated without a group", "CREATE",
             IT("t", "\"acceleratable\":true,\"os\":\"linux\",\"arch\":\"amd64\","
                     "\"unitResources\":{\"cpu\":\"4\",\"ram\":\"16Gi\"},\"localStorage\":"
                     "\"100Gi\""),
             NULL,
             KIND " \"t\" is invalid: spec.acceleratorGroup: Required value: must be specified "
                  "when acceleratable is true"},
            {"cpu-only with 2 cores", "CREATE",
             IT("t", "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"2\","
                     "\"ram\":\"2Gi\"},\"localStorage\":\"100Gi\""),
             NULL,
             KIND " \"t\" is invalid: spec.unitResources.cpu: Invalid value: \"2\": must be 1 "
                  "when acceleratable is false"},
            {"accelerated, a unit suffix", "CREATE",
             IT("t", "\"acceleratable\":true,\"acceleratorGroup\":\"g\",\"os\":\"linux\","
                     "\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"4c\",\"ram\":\"16Gi\"},"
                     "\"localStorage\":\"100Gi\""),
             NULL,
             KIND " \"t\" is invalid: spec.unitResources.cpu: Invalid value: \"4c\": must be a "
                  "positive integer with no unit suffix"},
            {"accelerated, zero and past int32", "CREATE",
             IT("t", "\"acceleratable\":true,\"acceleratorGroup\":\"g\",\"os\":\"linux\","
                     "\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"2147483648\",\"ram\":"
                     "\"0Gi\"},\"localStorage\":\"-1Gi\""),
             NULL,
             KIND " \"t\" is invalid: [spec.unitResources.cpu: Invalid value: \"2147483648\": "
                  "must be a positive integer with no unit suffix, spec.unitResources.ram: "
                  "Invalid value: \"0Gi\": " GI_MSG ", spec.localStorage: Invalid value: "
                  "\"-1Gi\": " GI_MSG "]"},
            {"suffixes are case-sensitive Gi", "CREATE",
             IT("t", "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"1\","
                     "\"ram\":\"16gi\"},\"localStorage\":\"100G\""),
             NULL,
             KIND " \"t\" is invalid: [spec.unitResources.ram: Invalid value: \"16gi\": " GI_MSG
                  ", spec.localStorage: Invalid value: \"100G\": " GI_MSG "]"},
            {"a bare suffix", "CREATE",
             IT("t", "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"1\","
                     "\"ram\":\"Gi\"},\"localStorage\":\"1.5Gi\""),
             NULL,
             KIND " \"t\" is invalid: [spec.unitResources.ram: Invalid value: \"Gi\": " GI_MSG
                  ", spec.localStorage: Invalid value: \"1.5Gi\": " GI_MSG "]"},
            {"a quote in a value is escaped as %q does", "CREATE",
             IT("t", "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"1\\\"\","
                     "\"ram\":\"2Gi\"},\"localStorage\":\"100Gi\""),
             NULL,
             KIND " \"t\" is invalid: spec.unitResources.cpu: Invalid value: \"1\\\"\": must be 1 "
                  "when acceleratable is false"},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_instancetype__update(void **state)
{
        static const struct row rows[] = {
            {"rename and deactivate", "UPDATE",
             IT(H100, ACCEL ",\"displayName\":\"H100\",\"inactive\":true"), IT(H100, ACCEL), NULL},
            {"a legacy cpu-only type with 4 cores is still renamable", "UPDATE",
             IT("t", "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"4\","
                     "\"ram\":\"2Gi\"},\"localStorage\":\"100Gi\",\"displayName\":\"x\""),
             IT("t", "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"4\","
                     "\"ram\":\"2Gi\"},\"localStorage\":\"100Gi\""),
             NULL},
            {"an absent field equals its zero value", "UPDATE",
             IT(GENERIC, CPU_ONLY ",\"generalGroup\":\"\",\"inactive\":false"),
             IT(GENERIC, "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"1\","
                         "\"ram\":\"2Gi\"},\"localStorage\":\"100Gi\""),
             NULL},
            {"a unit change", "UPDATE",
             IT(H100, "\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100\",\"os\":"
                      "\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"8\",\"ram\":"
                      "\"192Gi\"},\"localStorage\":\"100Gi\""),
             IT(H100, ACCEL),
             KIND " \"" H100 "\" is invalid: spec: Forbidden: is immutable except displayName and "
                  "inactive"},
            {"re-pointing the pool", "UPDATE",
             IT(H100, "\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-a100\",\"os\":"
                      "\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":\"12\",\"ram\":"
                      "\"192Gi\"},\"localStorage\":\"100Gi\""),
             IT(H100, ACCEL),
             KIND " \"" H100 "\" is invalid: spec: Forbidden: is immutable except displayName and "
                  "inactive"},
            {"description is frozen too (the seed's rule)", "UPDATE",
             IT(H100, ACCEL ",\"description\":\"new\""), IT(H100, ACCEL),
             KIND " \"" H100 "\" is invalid: spec: Forbidden: is immutable except displayName and "
                  "inactive"},
            {"a field added", "UPDATE", IT(GENERIC, CPU_ONLY ",\"generalGroup\":\"amd-epyc\""),
             IT(GENERIC, CPU_ONLY),
             KIND " \"" GENERIC "\" is invalid: spec: Forbidden: is immutable except displayName "
                  "and inactive"},
            {"delete", "DELETE", NULL, IT(H100, ACCEL), NULL},
            {"connect", "CONNECT", IT("t", ""), NULL, NULL},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_instancetype__wrong_shape(void **state)
{
        static const char *const objs[] = {
            "{\"metadata\":{\"name\":\"t\"},\"spec\":\"x\"}",
            IT("t", "\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":{\"cpu\":[4]}"),
            IT("t", "\"acceleratable\":\"yes\""),
        };
        struct tsr_verdict v;
        struct tsr_diag diag;

        (void)state;
        for (size_t i = 0; i < N_ELEMS(objs); i++) {
                assert_int_equal(
                    run(tsr_webhook_instancetype_validate, "CREATE", objs[i], NULL, &v, &diag),
                    TSR_EPARSE);
                assert_true(diag.msg[0] != '\0');
                if (i == 1)
                        continue; /* defaulting does not read the unit spec */
                assert_int_equal(
                    run(tsr_webhook_instancetype_mutate, "CREATE", objs[i], NULL, &v, &diag),
                    TSR_EPARSE);
                assert_null(v.patched);
        }
        assert_int_equal(
            run(tsr_webhook_instancetype_validate, "UPDATE", objs[0], IT("t", CPU_ONLY), &v, &diag),
            TSR_EPARSE);
}

/* ---- defaulting --------------------------------------------------------------------------- */

struct mrow {
        const char *name;
        bool aware;
        const char *op;
        const char *obj;
        const char *want; /* the object after defaulting */
};

static int mutate(const struct mrow *m, struct tsr_verdict *v, struct tsr_diag *diag)
{
        struct tsr_webhook_lookup x = no_lookup;
        struct tsr_review r;
        int rc;

        x.settings.value[TSR_SETTING_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER] = m->aware;
        memset(&r, 0, sizeof(r));
        memset(v, 0, sizeof(*v));
        tsr_diag_clear(diag);
        snprintf(r.operation, sizeof(r.operation), "%s", m->op);
        r.object = json_fx_load(m->obj);
        r.old_object = json_fx_load(m->obj);
        rc = tsr_webhook_instancetype_mutate(&x, &r, v, diag);
        json_decref(r.object);
        json_decref(r.old_object);
        return rc;
}

static const struct mrow mrows[] = {
    {"cpu-only", false, "CREATE", IT(GENERIC, CPU_ONLY),
     "{\"metadata\":{\"name\":\"" GENERIC "\",\"labels\":{\"feature.gpustack.ai/acceleratable\":"
     "\"false\",\"kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\","
     "\"schedule.gpustack.ai/queue-entrance\":\"" LQ_GEN "\"}},\"spec\":{" CPU_ONLY
     ",\"generalGroup\":\"generic\"}}"},
    {"accelerated: stale feature keys pruned, others kept, a set generalGroup kept", false,
     "CREATE",
     "{\"metadata\":{\"name\":\"" H100 "\",\"labels\":{\"app\":\"x\","
     "\"acceleratable.feature.gpustack.ai/nvidia-a100\":\"true\","
     "\"general.feature.gpustack.ai/amd-epyc-7763\":\"true\",\"feature.gpustack.ai/"
     "acceleratable\":\"false\"}},\"spec\":{" ACCEL ",\"generalGroup\":\"amd-epyc-7763\"}}",
     "{\"metadata\":{\"name\":\"" H100 "\",\"labels\":{\"app\":\"x\",\"feature.gpustack.ai/"
     "acceleratable\":\"true\",\"kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\","
     "\"acceleratable.feature.gpustack.ai/nvidia-h100\":\"true\","
     "\"schedule.gpustack.ai/queue-entrance\":\"" LQ_H100 "\"}},\"spec\":{" ACCEL
     ",\"generalGroup\":\"amd-epyc-7763\"}}"},
    {"aware: the CPU key joins", true, "UPDATE",
     IT(H100, ACCEL ",\"generalGroup\":\"amd-epyc-7763\""),
     "{\"metadata\":{\"name\":\"" H100 "\",\"labels\":{\"feature.gpustack.ai/acceleratable\":"
     "\"true\",\"kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\","
     "\"acceleratable.feature.gpustack.ai/nvidia-h100\":\"true\","
     "\"general.feature.gpustack.ai/amd-epyc-7763\":\"true\","
     "\"schedule.gpustack.ai/queue-entrance\":\"" LQ_H100 "\"}},\"spec\":{" ACCEL
     ",\"generalGroup\":\"amd-epyc-7763\"}}"},
    {"aware, generic: no CPU key", true, "CREATE", IT(GENERIC, CPU_ONLY),
     "{\"metadata\":{\"name\":\"" GENERIC "\",\"labels\":{\"feature.gpustack.ai/acceleratable\":"
     "\"false\",\"kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\","
     "\"schedule.gpustack.ai/queue-entrance\":\"" LQ_GEN "\"}},\"spec\":{" CPU_ONLY
     ",\"generalGroup\":\"generic\"}}"},
    {"accelerated without a group: only generalGroup", false, "CREATE",
     IT("t", "\"acceleratable\":true"),
     IT("t", "\"acceleratable\":true,\"generalGroup\":\"generic\"")},
    {"no os/arch: those labels are left out", false, "CREATE", IT("t", ""),
     "{\"metadata\":{\"name\":\"t\",\"labels\":{\"feature.gpustack.ai/acceleratable\":\"false\","
     "\"schedule.gpustack.ai/queue-entrance\":\"gpustack-fnv64-af63e94c860202a3\"}},"
     "\"spec\":{\"generalGroup\":\"generic\"}}"},
};

static void test_instancetype__default(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(mrows); i++) {
                struct tsr_verdict v;
                struct tsr_diag diag;
                json_t *want = json_fx_load(mrows[i].want);
                int rc = mutate(&mrows[i], &v, &diag);
                char *got;

                if (rc)
                        fail_msg("%s: rc %s (%s)", mrows[i].name, tsr_err_name(rc), diag.msg);
                if (!v.allowed || !v.patched)
                        fail_msg("%s: not allowed with a patch", mrows[i].name);
                got = json_fx_dump(v.patched);
                if (!json_equal(v.patched, want))
                        fail_msg("%s:\n got  %s\n want %s", mrows[i].name, got, mrows[i].want);
                free(got);
                json_decref(v.patched);
                json_decref(want);
        }
}

static void test_instancetype__default_passes_others(void **state)
{
        struct tsr_verdict v;
        struct tsr_diag diag;

        (void)state;
        assert_int_equal(
            run(tsr_webhook_instancetype_mutate, "DELETE", NULL, IT(H100, ACCEL), &v, &diag), 0);
        assert_true(v.allowed);
        assert_null(v.patched);
        /* The plain handler reads the Setting at its default: off. */
        assert_int_equal(run(tsr_webhook_instancetype_mutate, "CREATE",
                             IT(H100, ACCEL ",\"generalGroup\":\"amd\""), NULL, &v, &diag),
                         0);
        assert_non_null(v.patched);
        assert_null(
            json_object_get(json_object_get(json_object_get(v.patched, "metadata"), "labels"),
                            "general.feature.gpustack.ai/amd"));
        json_decref(v.patched);
}

static void test_instancetype__alloc_failures(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(mrows); i++) {
                struct tsr_webhook_lookup x = no_lookup;
                json_t *want = json_fx_load(mrows[i].want);

                x.settings.value[TSR_SETTING_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER] = mrows[i].aware;
                review_fx_alloc_loop(tsr_webhook_instancetype_mutate, &x, mrows[i].op, NULL,
                                     mrows[i].obj, want, 200, mrows[i].name);
                json_decref(want);
        }
        json_set_alloc_funcs(failing_malloc, free);
        for (long k = 0; k < 50; k++) {
                struct tsr_verdict v;
                struct tsr_diag diag;
                struct tsr_review r;
                int rc;

                memset(&r, 0, sizeof(r));
                memset(&v, 0, sizeof(v));
                snprintf(r.operation, sizeof(r.operation), "UPDATE");
                r.object = json_fx_load(IT(H100, ACCEL ",\"description\":\"x\""));
                r.old_object = json_fx_load(IT(H100, ACCEL));
                failing_alloc_budget(k);
                rc = tsr_webhook_instancetype_validate(&no_lookup, &r, &v, &diag);
                failing_alloc_budget(-1);
                assert_int_equal(rc, 0); /* the immutability check allocates nothing */
                assert_int_equal(v.code, 422);
                json_decref(r.object);
                json_decref(r.old_object);
        }
        json_set_alloc_funcs(malloc, free);
}

static int group_setup(void **state)
{
        (void)state;
        tsr_webhook_lookup_init(&no_lookup);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_instancetype__create),
            cmocka_unit_test(test_instancetype__update),
            cmocka_unit_test(test_instancetype__wrong_shape),
            cmocka_unit_test(test_instancetype__default),
            cmocka_unit_test(test_instancetype__default_passes_others),
            cmocka_unit_test(test_instancetype__alloc_failures),
        };

        return cmocka_run_group_tests(tests, group_setup, NULL);
}
