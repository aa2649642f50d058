/*
 * test_kueue_config.c - codec/kueue_config, the Kueue Configuration `tessera kueue-config`
 * prints, and codec/json_yaml, the YAML it prints it as.
 *
 * Covers: apiVersion config.kueue.x-k8s.io/v1beta2; the release namespace as Kueue's own and,
 * with kube-system, excluded by managedJobsNamespaceSelector (once when it is kube-system); the
 * pod integration; the feature gates (AssignQueueLabelsForPods off, TopologyAwareScheduling and
 * TASBalancedPlacement on, nothing v0.17.0 lacks) and no quotaCheckStrategy; the
 * transformations: 9 manufacturers x 4 rows (the fourth a zero-cost .sliced) plus a
 * partitioned.units and a zero-cost .partitioned row for the three with a partition kind (hygon,
 * nvidia, thead) = 42, strategy Replace, in catalog order, NVIDIA's first four exactly as
 * spec/upstream-behavior.md §9 writes them, the sliced row's multiplyBy; the excluded request
 * descriptors (9 x 3 sliced ones, a profile-key prefix per partition kind and 9 visibility keys,
 * never a quota key); a bad namespace (TSR_EINVAL); an allocation-failure loop. YAML: a
 * hand-written document's exact text (strings a YAML 1.1 parser would read as numbers, booleans or
 * null double-quoted, empty containers as {} and []), the whole Configuration read back by the
 * simulator's YAML reader (src/sim/yaml_json.h) equal to the JSON, and a full buffer leaving it as
 * it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "codec/json_yaml.h"
#include "codec/kueue_config.h"
#include "sim/yaml_json.h"

#include "support/failing_alloc.h"
#include "support/json_text.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static json_t *config(const char *ns)
{
        json_t *cfg = NULL;

        assert_int_equal(tsr_kueue_config(ns, &cfg, NULL), 0);
        return cfg;
}

static void expect(json_t *got, const char *want_text)
{
        json_t *want = json_fx_load(want_text);

        if (!json_equal(got, want)) {
                char *g = json_fx_dump(got), *w = json_fx_dump(want);

                fail_msg("got  %s\nwant %s", g, w);
        }
        json_decref(want);
}

static void test_kueue_config__fields(void **state)
{
        json_t *cfg = config("gpustack-system");

        (void)state;
        assert_string_equal(json_string_value(json_object_get(cfg, "apiVersion")),
                            "config.kueue.x-k8s.io/v1beta2");
        assert_string_equal(json_string_value(json_object_get(cfg, "kind")), "Configuration");
        assert_string_equal(json_string_value(json_object_get(cfg, "namespace")),
                            "gpustack-system");
        assert_true(json_is_false(json_object_get(cfg, "manageJobsWithoutQueueName")));
        expect(json_object_get(cfg, "managedJobsNamespaceSelector"),
               "{\"matchExpressions\": [{\"key\": \"kubernetes.io/metadata.name\", \"operator\": "
               "\"NotIn\", \"values\": [\"kube-system\", \"gpustack-system\"]}]}");
        expect(json_object_get(cfg, "integrations"), "{\"frameworks\": [\"pod\"]}");
        expect(json_object_get(cfg, "featureGates"),
               "{\"AssignQueueLabelsForPods\": false, \"TopologyAwareScheduling\": true, "
               "\"TASBalancedPlacement\": true}");
        /* excludeResourcePrefixes and transformations; no quotaCheckStrategy (v0.17.0 lacks it) */
        assert_int_equal(json_object_size(json_object_get(cfg, "resources")), 2);
        assert_null(json_object_get(json_object_get(cfg, "resources"), "quotaCheckStrategy"));
        json_decref(cfg);

        cfg = config("kube-system");
        expect(json_object_get(cfg, "managedJobsNamespaceSelector"),
               "{\"matchExpressions\": [{\"key\": \"kubernetes.io/metadata.name\", \"operator\": "
               "\"NotIn\", \"values\": [\"kube-system\"]}]}");
        json_decref(cfg);
}

static void test_kueue_config__transformations(void **state)
{
        json_t *cfg = config("gpustack-system");
        json_t *t = json_object_get(json_object_get(cfg, "resources"), "transformations"), *row;
        size_t i, nvidia = 0;

        (void)state;
        assert_int_equal(json_array_size(t), 9 * 4 + 3 * 2);
        expect(json_array_get(t, 0), "{\"input\": \"amd.com/gpu\", \"strategy\": \"Replace\", "
                                     "\"outputs\": {\"credits.gpustack.ai/amd\": \"1600000\"}}");
        json_array_foreach(t, i, row)
        {
                const char *in = json_string_value(json_object_get(row, "input"));

                assert_string_equal(json_string_value(json_object_get(row, "strategy")), "Replace");
                if (!strcmp(in, "nvidia.com/gpu"))
                        nvidia = i;
        }
        expect(json_array_get(t, nvidia),
               "{\"input\": \"nvidia.com/gpu\", \"strategy\": \"Replace\", \"outputs\": "
               "{\"credits.gpustack.ai/nvidia\": \"1600000\"}}");
        expect(json_array_get(t, nvidia + 1),
               "{\"input\": \"nvidia.com/gpu.shared\", \"strategy\": \"Replace\", \"outputs\": "
               "{\"credits.gpustack.ai/nvidia\": \"160000\"}}");
        expect(json_array_get(t, nvidia + 2),
               "{\"input\": \"nvidia.com/gpu.sliced.units\", \"strategy\": \"Replace\", "
               "\"multiplyBy\": \"nvidia.com/gpu.sliced\", \"outputs\": "
               "{\"credits.gpustack.ai/nvidia\": \"1\"}}");
        expect(json_array_get(t, nvidia + 3),
               "{\"input\": \"nvidia.com/gpu.partitioned.units\", \"strategy\": \"Replace\", "
               "\"outputs\": {\"credits.gpustack.ai/nvidia\": \"1\"}}");
        expect(json_array_get(t, nvidia + 4),
               "{\"input\": \"nvidia.com/gpu.sliced\", \"strategy\": \"Replace\", \"outputs\": "
               "{\"credits.gpustack.ai/nvidia\": \"0\"}}");
        expect(json_array_get(t, nvidia + 5),
               "{\"input\": \"nvidia.com/gpu.partitioned\", \"strategy\": \"Replace\", "
               "\"outputs\": {\"credits.gpustack.ai/nvidia\": \"0\"}}");
        /* T-Head, last in the catalog, partitions too */
        expect(json_array_get(t, json_array_size(t) - 3),
               "{\"input\": \"alibabacloud.com/ppu.partitioned.units\", \"strategy\": "
               "\"Replace\", \"outputs\": {\"credits.gpustack.ai/thead\": \"1\"}}");
        json_decref(cfg);
}

static void test_kueue_config__excluded_descriptors(void **state)
{
        json_t *cfg = config("gpustack-system");
        json_t *ex = json_object_get(json_object_get(cfg, "resources"), "excludeResourcePrefixes");
        json_t *row;
        size_t i, nvidia = 0;

        (void)state;
        assert_int_equal(json_array_size(ex), 9 * 4 + 3);
        json_array_foreach(ex, i, row)
        {
                const char *p = json_string_value(row);

                assert_non_null(p);
                /* never a quota key: the counts, the units and the whole-card key stay counted */
                assert_null(strstr(p, ".units"));
                assert_true(strcmp(p + strlen(p) - 7, ".sliced") != 0);
                if (!strcmp(p, "nvidia.com/gpu.sliced.cores-percentage"))
                        nvidia = i;
        }
        expect(json_array_get(ex, 0), "\"amd.com/gpu.sliced.cores-percentage\"");
        expect(json_array_get(ex, nvidia + 1), "\"nvidia.com/gpu.sliced.memory-percentage\"");
        expect(json_array_get(ex, nvidia + 2), "\"nvidia.com/gpu.sliced.memory-mib\"");
        /* every profile key (nvidia.com/gpu.partitioned.mig-3g.40gb), not .partitioned.units */
        expect(json_array_get(ex, nvidia + 3), "\"nvidia.com/gpu.partitioned.mig-\"");
        /* an SSH sidecar's visibility request, outside the families */
        expect(json_array_get(ex, nvidia + 4), "\"device.gpustack.ai/nvidia.visibility\"");
        expect(json_array_get(ex, 3), "\"device.gpustack.ai/amd.visibility\"");
        expect(json_array_get(ex, json_array_size(ex) - 2),
               "\"alibabacloud.com/ppu.partitioned.mig-\"");
        expect(json_array_get(ex, json_array_size(ex) - 1),
               "\"device.gpustack.ai/thead.visibility\"");
        json_decref(cfg);
}

static void test_kueue_config__bad_namespace(void **state)
{
        const char *bad[] = {"",
                             "Gpustack",
                             "-x",
                             "x-",
                             "a_b",
                             "a.b",
                             "0123456789012345678901234567890123456789012345678901234567890123"};
        struct tsr_diag diag;
        json_t *cfg = NULL;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(tsr_kueue_config(bad[i], &cfg, &diag), TSR_EINVAL);
                assert_null(cfg);
                assert_non_null(strstr(diag.msg, "RFC 1123 label"));
        }
}

static void test_json_yaml__text(void **state)
{
        json_t *v = json_fx_load(
            "{\"kind\": \"Configuration\", \"n\": 3, \"on\": true, \"off\": null, \"nested\": "
            "{\"list\": [\"pod\", {\"input\": \"nvidia.com/gpu\"}], \"empty\": {}, \"none\": []}, "
            "\"quoted\": [\"1600000\", \"true\", \"Yes\", \"\", \"~\", \"-x\", \".5\", \"y\"], "
            "\"spaced key\": \"a: b\"}");
        struct tsr_buf out = TSR_BUF_INIT;

        (void)state;
        assert_int_equal(tsr_json_yaml_emit(v, &out, NULL), 0);
        assert_string_equal(out.ptr, "kind: Configuration\n"
                                     "\"n\": 3\n" /* n: YAML 1.1's false */
                                     "\"on\": true\n"
                                     "\"off\": null\n"
                                     "nested:\n"
                                     "  list:\n"
                                     "  - pod\n"
                                     "  - input: nvidia.com/gpu\n"
                                     "  empty: {}\n"
                                     "  none: []\n"
                                     "quoted:\n"
                                     "- \"1600000\"\n"
                                     "- \"true\"\n"
                                     "- \"Yes\"\n"
                                     "- \"\"\n"
                                     "- \"~\"\n"
                                     "- \"-x\"\n"
                                     "- \".5\"\n"
                                     "- \"y\"\n"
                                     "spaced key: 'a: b'\n");
        tsr_buf_release(&out);
        json_decref(v);
}

static void test_json_yaml__config_reads_back(void **state)
{
        json_t *cfg = config("gpustack-system"), *docs = NULL;
        struct tsr_buf out = TSR_BUF_INIT;

        (void)state;
        assert_int_equal(tsr_json_yaml_emit(cfg, &out, NULL), 0);
        assert_int_equal(tsr_yaml_load_all(out.ptr, out.len, 0, &docs, NULL, NULL), 0);
        assert_int_equal(json_array_size(docs), 1);
        assert_true(json_equal(json_array_get(docs, 0), cfg));
        json_decref(docs);
        json_decref(cfg);
        tsr_buf_release(&out);
}

static void test_json_yaml__full_buffer(void **state)
{
        json_t *cfg = config("gpustack-system");
        struct tsr_buf out = TSR_BUF_INIT;
        struct tsr_diag diag;

        (void)state;
        out.max = 64;
        assert_int_equal(tsr_buf_adds(&out, "kept\n"), 0);
        assert_int_equal(tsr_json_yaml_emit(cfg, &out, &diag), TSR_ETOOBIG);
        assert_string_equal(out.ptr, "kept\n");
        assert_non_null(strstr(diag.msg, "the output is full"));
        tsr_buf_release(&out);
        json_decref(cfg);
}

static void test_kueue_config__out_of_memory(void **state)
{
        json_t *want = config("gpustack-system");
        bool built = false;

        (void)state;
        json_set_alloc_funcs(failing_malloc, free);
        for (long k = 0; k < 100000 && !built; k++) {
                struct tsr_diag diag;
                json_t *cfg = NULL;
                int rc;

                failing_alloc_budget(k);
                rc = tsr_kueue_config("gpustack-system", &cfg, &diag);
                failing_alloc_budget(-1);
                if (rc == 0) {
                        built = true;
                        assert_true(json_equal(cfg, want));
                        json_decref(cfg);
                } else {
                        assert_int_equal(rc, TSR_ENOMEM);
                        assert_null(cfg);
                }
        }
        json_set_alloc_funcs(malloc, free);
        assert_true(built);
        json_decref(want);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_kueue_config__fields),
            cmocka_unit_test(test_kueue_config__transformations),
            cmocka_unit_test(test_kueue_config__excluded_descriptors),
            cmocka_unit_test(test_kueue_config__bad_namespace),
            cmocka_unit_test(test_json_yaml__text),
            cmocka_unit_test(test_json_yaml__config_reads_back),
            cmocka_unit_test(test_json_yaml__full_buffer),
            cmocka_unit_test(test_kueue_config__out_of_memory),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
