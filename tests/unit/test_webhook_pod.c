/*
 * test_webhook_pod.c - webhook/pod: gate 1's two Pod handlers against every shape an InstanceType
 * carries its per-accelerator VRAM in (instancetype_detail.h).
 *
 * One H100 80GB pool, written four ways: status.detail.memory "81920Mi" and "80Gi" (the current
 * upstream), spec.memory "80Gi" (an older upstream), spec.memory 81920 (this project's former
 * rendering, MiB). The same three Pods (a 50 % slice, a 20480 MiB slice, a 3g.40gb partition)
 * must get the same patched Pod from each, with the fold's upstream numbers (800000, 400000,
 * 800000 units). Then the pool before its detail is computed (no memory anywhere, with and
 * without slicedDetail): an exclusive, a shared and a CPU-only Pod are admitted and an exclusive
 * one left unchanged, a slice and a partition get the retryable 503 from both halves, a Pod-wide
 * rule still denies at once; a partition whose profile has no memoryMib yet is retried too.
 * Last, a memory that is there but is not a quantity ("eighty") or not positive: a folding Pod's
 * review fails with TSR_EPARSE and a message naming the field and the value, while a Pod that
 * needs no memory is still admitted. And a Pod past what gate 1 sizes (33 containers, or 33
 * resources in one list) is denied by both halves in the API server's own "Too many" wording
 * instead of failing the review (an HTTP 500 before), while 32 of each are still judged. Last,
 * with the cache's revision lookup, the fold source kept per revision answers every review as
 * reading the object afresh does, and an unchanged revision copies nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/object_revision.h"
#include "webhook/pod.h"

#include "support/json_text.h"
#include "support/review_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the InstanceTypes ---------------------------------------------------------------------- */

#define SPEC_WITH(extra)                                                                           \
        "\"spec\":{\"acceleratable\":true,\"os\":\"linux\",\"arch\":\"amd64\","                    \
        "\"acceleratorGroup\":\"nvidia-h100-80gb-hbm3\",\"unitResources\":{\"cpu\":\"12\","        \
        "\"ram\":\"192Gi\"},\"localStorage\":\"100Gi\"" extra "}"
#define SPEC SPEC_WITH("")
#define SLICED_DETAIL                                                                              \
        "\"slicedDetail\":{\"logical\":{\"coresPercentageOvercommit\":true,\"count\":128},"        \
        "\"physical\":{\"count\":7,\"profiles\":[{\"name\":\"1g.10gb\",\"count\":7,"               \
        "\"memoryMib\":10240},{\"name\":\"3g.40gb\",\"count\":2,\"memoryMib\":40960},"             \
        "{\"name\":\"2g.20gb\",\"count\":3}]}}"
#define IT(spec, detail)                                                                           \
        "{\"apiVersion\":\"worker.gpustack.ai/v1alpha1\",\"kind\":\"InstanceType\","               \
        "\"metadata\":{\"name\":\"h100\",\"labels\":{\"schedule.gpustack.ai/queue-entrance\":"     \
        "\"q\"}}," spec ",\"status\":{\"phase\":\"Active\",\"detail\":{" detail "}}}"
#define MFR "\"manufacturer\":\"nvidia\",\"product\":\"NVIDIA H100 80GB HBM3\","

static const char *const shapes[] = {
    IT(SPEC, MFR "\"memory\":\"81920Mi\"," SLICED_DETAIL),
    IT(SPEC, MFR "\"memory\":\"80Gi\"," SLICED_DETAIL),
    IT(SPEC_WITH(",\"memory\":\"80Gi\""), SLICED_DETAIL),
    IT(SPEC_WITH(",\"memory\":81920"), SLICED_DETAIL),
};
static const char *const shape_names[] = {
    "status.detail.memory 81920Mi",
    "status.detail.memory 80Gi",
    "spec.memory \"80Gi\" (older upstream)",
    "spec.memory 81920 (MiB, former rendering)",
};

/* Not computed yet: the detail without a memory, and a type with no status at all. */
static const char not_ready[] = IT(SPEC, MFR SLICED_DETAIL);
static const char bare[] = "{\"metadata\":{\"name\":\"h100\"}," SPEC "}";

static json_t *current; /* the one InstanceType the lookup finds */
static int copies;      /* by_entrance calls: each one a copy the cache would make */

static json_t *by_entrance(void *ctx, const char *lq, size_t *matches)
{
        (void)ctx;
        *matches = current && !strcmp(lq, "q");
        copies++;
        return *matches ? json_incref(current) : NULL;
}

static bool revision_by_entrance(void *ctx, const char *lq, char *rev, size_t len)
{
        (void)ctx;
        return current && !strcmp(lq, "q") && tsr_object_revision(current, rev, len);
}

static struct tsr_webhook_lookup lookup;

static void use(const char *text)
{
        json_decref(current);
        current = json_fx_load(text);
}

static int setup(void **state)
{
        (void)state;
        tsr_webhook_lookup_init(&lookup);
        lookup.instancetype_by_entrance = by_entrance;
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        json_decref(current);
        current = NULL;
        return 0;
}

/* ---- the Pods ------------------------------------------------------------------------------- */

#define POD(limits)                                                                                \
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":"      \
        "\"team-a\",\"labels\":{\"kueue.x-k8s.io/queue-name\":\"q\"}},\"spec\":{\"containers\":"   \
        "[{\"name\":\"main\",\"image\":\"vllm\",\"resources\":{\"limits\":{" limits "},"           \
        "\"requests\":{" limits "}}}]}}"

#define SLICE_PCT                                                                                  \
        POD("\"nvidia.com/gpu.sliced\":\"1\",\"nvidia.com/gpu.sliced.memory-percentage\":\"50\"")
#define SLICE_MIB                                                                                  \
        POD("\"nvidia.com/gpu.sliced\":\"1\",\"nvidia.com/gpu.sliced.memory-mib\":\"20480\"")
#define PARTITION                                                                                  \
        POD("\"nvidia.com/gpu.partitioned\":\"1\","                                                \
            "\"nvidia.com/gpu.partitioned.mig-3g.40gb\":\"1\"")
#define PARTITION_UNSIZED                                                                          \
        POD("\"nvidia.com/gpu.partitioned\":\"1\","                                                \
            "\"nvidia.com/gpu.partitioned.mig-2g.20gb\":\"1\"")
#define EXCLUSIVE POD("\"nvidia.com/gpu\":\"2\"")
#define SHARED    POD("\"nvidia.com/gpu.shared\":\"1\"")
#define CPU_ONLY  POD("\"cpu\":\"2\"")
#define MIXED     POD("\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpu.sliced\":\"1\"")

struct fold {
        const char *name, *pod;
        const char *key; /* the folded key, and its value */
        const char *units;
};

static const struct fold folds[] = {
    {"a 50% slice", SLICE_PCT, "nvidia.com/gpu.sliced.units", "800000"},
    {"a 20480 MiB slice", SLICE_MIB, "nvidia.com/gpu.sliced.units", "400000"},
    {"a 3g.40gb partition", PARTITION, "nvidia.com/gpu.partitioned.units", "800000"},
};

static const char *resource(json_t *pod, const char *list, const char *key)
{
        json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);

        return json_string_value(
            json_object_get(json_object_get(json_object_get(c, "resources"), list), key));
}

static int mutate(const char *pod, struct tsr_verdict *v, struct tsr_diag *d)
{
        return review_fx_run(tsr_webhook_pod_mutate, &lookup, "CREATE", "team-a", pod, NULL, v, d);
}

static int validate(const char *pod, struct tsr_verdict *v, struct tsr_diag *d)
{
        return review_fx_run(tsr_webhook_pod_validate, &lookup, "CREATE", "team-a", pod, NULL, v,
                             d);
}

/* ---- the tests ------------------------------------------------------------------------------ */

/* Sets the current InstanceType's uid and resourceVersion. */
static void stamp(const char *uid, const char *rv)
{
        json_t *meta = json_object_get(current, "metadata");

        assert_int_equal(json_object_set_new(meta, "uid", json_string(uid)), 0);
        assert_int_equal(json_object_set_new(meta, "resourceVersion", json_string(rv)), 0);
}

/* Both halves' answers to pod, with the lookup as it is now, as one comparable string. */
static char *answers(const char *pod)
{
        static char out[16384];
        struct tsr_verdict v;
        struct tsr_diag d;
        char *patched;
        int rc = mutate(pod, &v, &d);
        size_t n;

        patched = v.patched && !rc ? json_fx_dump(v.patched) : NULL;
        json_decref(rc ? NULL : v.patched);
        n = (size_t)snprintf(out, sizeof(out), "mutate rc %d allowed %d code %d %s patched %s", rc,
                             v.allowed, v.code, rc ? d.msg : v.message, patched ? patched : "-");
        free(patched);
        assert_true(n < sizeof(out));
        rc = validate(pod, &v, &d);
        snprintf(out + n, sizeof(out) - n, "; validate rc %d allowed %d code %d %s", rc, v.allowed,
                 v.code, rc ? d.msg : v.message);
        return strdup(out);
}

/*
 * With the revision lookup, a fold source read once is reused while the InstanceType's revision
 * holds, and read again when it moves: every answer equals the one read afresh (no revision
 * lookup), through a memory computed late, a new memory, a recreated object (new uid, same
 * resourceVersion) and the first revision seen again; an unchanged revision copies nothing.
 */
static void test_pod__kept_source_follows_the_revision(void **state)
{
        static const char forty[] = IT(SPEC, MFR "\"memory\":\"40Gi\"," SLICED_DETAIL);
        const struct {
                const char *text, *uid, *rv;
                bool unchanged; /* the revision of the step before */
        } steps[] = {
            {shapes[0], "u1", "1", false}, {shapes[0], "u1", "1", true},
            {not_ready, "u1", "2", false}, {shapes[1], "u1", "3", false},
            {forty, "u2", "3", false},     {forty, "u2", "3", true},
            {shapes[0], "u1", "1", false},
        };
        static const char *const pods[] = {SLICE_PCT,         SLICE_MIB, PARTITION,
                                           PARTITION_UNSIZED, EXCLUSIVE, CPU_ONLY};
        char *first_mib = NULL, *forty_mib = NULL;

        (void)state;
        for (size_t i = 0; i < N_ELEMS(steps); i++) {
                use(steps[i].text);
                stamp(steps[i].uid, steps[i].rv);
                for (size_t p = 0; p < N_ELEMS(pods); p++) {
                        char *fresh, *kept;
                        int before;

                        lookup.instancetype_revision_by_entrance = NULL;
                        fresh = answers(pods[p]);
                        lookup.instancetype_revision_by_entrance = revision_by_entrance;
                        before = copies;
                        kept = answers(pods[p]);
                        if (strcmp(fresh, kept))
                                fail_msg("step %zu, Pod %zu: read afresh\n  %s\nbut kept\n  %s", i,
                                         p, fresh, kept);
                        if (steps[i].unchanged)
                                assert_int_equal(copies, before);
                        if (pods[p] == pods[1] && i == 0)
                                first_mib = strdup(kept);
                        if (pods[p] == pods[1] && i == 4)
                                forty_mib = strdup(kept);
                        free(fresh);
                        free(kept);
                }
        }
        /* The new memory was seen: the same MiB slice folds to other units. */
        assert_non_null(first_mib);
        assert_non_null(forty_mib);
        assert_string_not_equal(first_mib, forty_mib);
        free(first_mib);
        free(forty_mib);
        lookup.instancetype_revision_by_entrance = NULL;
}

/* Every shape of the memory folds the same Pods to the same patched object. */
static void test_pod__every_memory_shape_folds_alike(void **state)
{
        (void)state;
        for (size_t f = 0; f < N_ELEMS(folds); f++) {
                json_t *first = NULL;

                for (size_t s = 0; s < N_ELEMS(shapes); s++) {
                        struct tsr_verdict v;
                        struct tsr_diag d;
                        int rc;

                        use(shapes[s]);
                        rc = mutate(folds[f].pod, &v, &d);
                        if (rc || !v.allowed || !v.patched)
                                fail_msg("%s against %s: rc %s (%s), allowed %d, %d %s",
                                         folds[f].name, shape_names[s], tsr_err_name(rc), d.msg,
                                         v.allowed, v.code, v.message);
                        for (int l = 0; l < 2; l++) {
                                const char *list = l ? "limits" : "requests";
                                const char *got = resource(v.patched, list, folds[f].key);

                                if (!got || strcmp(got, folds[f].units))
                                        fail_msg("%s against %s: %s[%s] = %s, want %s",
                                                 folds[f].name, shape_names[s], list, folds[f].key,
                                                 got ? got : "(none)", folds[f].units);
                        }
                        if (!first) {
                                first = v.patched;
                        } else {
                                if (!json_equal(first, v.patched)) {
                                        char *a = json_fx_dump(first), *b = json_fx_dump(v.patched);

                                        fail_msg("%s: %s patches\n  %s\nbut %s patches\n  %s",
                                                 folds[f].name, shape_names[0], a, shape_names[s],
                                                 b);
                                }
                                json_decref(v.patched);
                        }
                        rc = validate(folds[f].pod, &v, &d);
                        if (rc || !v.allowed)
                                fail_msg("%s against %s: validation rc %s, allowed %d (%s)",
                                         folds[f].name, shape_names[s], tsr_err_name(rc), v.allowed,
                                         v.message);
                }
                json_decref(first);
        }
}

/* Before the detail is computed: no fold, no memory needed; a fold retries. */
static void test_pod__no_memory_yet(void **state)
{
        static const char *const admitted[] = {EXCLUSIVE, SHARED, CPU_ONLY};
        static const char *const retried[] = {SLICE_PCT, SLICE_MIB, PARTITION};
        static const char *const types[] = {not_ready, bare};
        static const char memory_retry[] = "the accelerator memory of the InstanceType behind "
                                           "queue q is not ready yet; retry";
        static const char profiles_retry[] = "the partition profiles of the InstanceType behind "
                                             "queue q are not ready yet; retry";

        (void)state;
        for (size_t t = 0; t < N_ELEMS(types); t++) {
                struct tsr_verdict v;
                struct tsr_diag d;

                use(types[t]);
                for (size_t i = 0; i < N_ELEMS(admitted); i++) {
                        assert_int_equal(mutate(admitted[i], &v, &d), 0);
                        if (!v.allowed)
                                fail_msg("type %zu, Pod %zu: mutation denied %d %s", t, i, v.code,
                                         v.message);
                        if (i == 0) { /* exclusive: admitted unchanged */
                                json_t *pod = json_fx_load(admitted[i]);

                                assert_true(v.patched && json_equal(v.patched, pod));
                                json_decref(pod);
                        }
                        json_decref(v.patched);
                        assert_int_equal(validate(admitted[i], &v, &d), 0);
                        if (!v.allowed)
                                fail_msg("type %zu, Pod %zu: validation denied %d %s", t, i, v.code,
                                         v.message);
                }
                for (size_t i = 0; i < N_ELEMS(retried); i++) {
                        int (*half[2])(const char *, struct tsr_verdict *,
                                       struct tsr_diag *) = {mutate, validate};

                        for (int h = 0; h < 2; h++) {
                                assert_int_equal(half[h](retried[i], &v, &d), 0);
                                assert_false(v.allowed);
                                assert_null(v.patched);
                                assert_int_equal(v.code, 503);
                                assert_string_equal(v.message, memory_retry);
                        }
                }
                /* A Pod-wide rule needs no memory: denied for good, by the validating half. */
                assert_int_equal(validate(MIXED, &v, &d), 0);
                assert_false(v.allowed);
                assert_int_equal(v.code, 403);
                assert_non_null(strstr(v.message, "a Pod may request only one accelerator "
                                                  "family, found [exclusive sliced]"));
        }
        /* The memory is there, the profile's memoryMib is not yet. */
        {
                struct tsr_verdict v;
                struct tsr_diag d;

                use(shapes[0]);
                assert_int_equal(mutate(PARTITION_UNSIZED, &v, &d), 0);
                assert_int_equal(v.code, 503);
                assert_string_equal(v.message, profiles_retry);
        }
}

/* A memory that is there but malformed: a clear error for a folding Pod, no harm to the rest. */
static void test_pod__malformed_memory(void **state)
{
        static const struct {
                const char *it, *msg;
        } rows[] = {
            {IT(SPEC, MFR "\"memory\":\"eighty\"," SLICED_DETAIL),
             "parse memory \"eighty\" of instance type h100 (status.detail.memory): quantities "
             "must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
            {IT(SPEC_WITH(",\"memory\":\"eighty\""), SLICED_DETAIL),
             "parse memory \"eighty\" of instance type h100 (spec.memory): quantities must match "
             "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
            {IT(SPEC, MFR "\"memory\":\"0\"," SLICED_DETAIL),
             "instance type h100 has non-positive memory \"0\" (status.detail.memory)"},
            {IT(SPEC_WITH(",\"memory\":-1"), SLICED_DETAIL),
             "instance type h100 has non-positive memory -1 (spec.memory, MiB)"},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                struct tsr_verdict v;
                struct tsr_diag d;

                use(rows[i].it);
                assert_int_equal(mutate(SLICE_MIB, &v, &d), TSR_EPARSE);
                assert_null(v.patched);
                assert_string_equal(d.msg, rows[i].msg);
                assert_int_equal(validate(PARTITION, &v, &d), TSR_EPARSE);
                assert_string_equal(d.msg, rows[i].msg);
                assert_int_equal(mutate(EXCLUSIVE, &v, &d), 0);
                assert_true(v.allowed);
                json_decref(v.patched);
        }
}

/* A queued Pod with n_containers CPU-only containers, the first with n_resources limits. */
static char *crowded_pod(unsigned n_containers, unsigned n_resources)
{
        size_t cap = 64 * 1024, len = 0;
        char *out = malloc(cap);

        assert_non_null(out);
        len += (size_t)snprintf(out + len, cap - len,
                                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
                                "\"p\",\"namespace\":\"team-a\",\"labels\":{\"kueue.x-k8s.io/"
                                "queue-name\":\"q\"}},\"spec\":{\"containers\":[");
        for (unsigned c = 0; c < n_containers; c++) {
                len += (size_t)snprintf(out + len, cap - len,
                                        "%s{\"name\":\"c%u\",\"resources\":{\"limits\":{\"cpu\":"
                                        "\"1\"",
                                        c ? "," : "", c);
                for (unsigned r = 1; c == 0 && r < n_resources; r++)
                        len +=
                            (size_t)snprintf(out + len, cap - len, ",\"example.com/r%u\":\"1\"", r);
                len += (size_t)snprintf(out + len, cap - len, "}}}");
        }
        snprintf(out + len, cap - len, "]}}");
        return out;
}

static void test_pod__too_many(void **state)
{
        static const struct {
                unsigned containers, resources;
                const char *msg; /* NULL: judged as usual (allowed) */
        } rows[] = {
            {32, 32, NULL},
            {33, 1,
             "spec.containers: Too many: 33: must have at most 32 items (containers and "
             "initContainers together) (the most tessera's Pod webhook sizes)"},
            {1, 33,
             "spec.containers[0].resources.limits: Too many: 33: must have at most 32 items "
             "(the most tessera's Pod webhook sizes)"},
        };

        (void)state;
        use(shapes[0]);
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                char *pod = crowded_pod(rows[i].containers, rows[i].resources);
                struct tsr_verdict v;
                struct tsr_diag d;

                assert_int_equal(mutate(pod, &v, &d), 0);
                assert_int_equal(v.allowed, rows[i].msg == NULL);
                json_decref(v.patched);
                assert_int_equal(validate(pod, &v, &d), 0);
                assert_int_equal(v.allowed, rows[i].msg == NULL);
                if (rows[i].msg) {
                        assert_int_equal(v.code, 403);
                        assert_string_equal(v.message, rows[i].msg);
                }
                free(pod);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_pod__every_memory_shape_folds_alike, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_pod__no_memory_yet, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pod__malformed_memory, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pod__too_many, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pod__kept_source_follows_the_revision, setup,
                                            teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
