/*
 * test_devices_object.c - codec/devices_object: the Devices object of a node (spec from the
 * capability, status from the ledger) and the fit labels of its Node.
 *
 *   mixed node        an H100 pair, one unpartitioned with a slice, one partitioned with a
 *                     3g.40gb instance: every field of spec and status, profiles in table order
 *   no accelerators   empty groups on both sides
 *   mixed products    TSR_EINVAL, nothing written
 *   fit labels        the spec's example values; a partition-only node gets none
 *   out of memory     every allocation failing in turn: TSR_ENOMEM, no leak (ASan), *out untouched
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/devices_object.h"
#include "core/fit.h"
#include "core/ledger.h"
#include "support/catalog_fixtures.h"
#include "support/failing_alloc.h"

#include <stdlib.h>
#include <string.h>

#define H100 "NVIDIA H100 80GB HBM3"

/* The H100 pair: GPU 0 unpartitioned with a 640000-unit slice, GPU 1 with 3g.40gb at start 4. */
static void mixed_node(struct fx_node *nd)
{
        const struct tsr_product *p = fx_product(H100);
        const struct tsr_alloc_record recs[] = {
            {.accel = 0, .mode = TSR_MODE_SLICED, .units = 640000, .profile = -1},
            {.accel = 1,
             .mode = TSR_MODE_PARTITIONED,
             .units = 800000,
             .profile = fx_pidx(p, "3g.40gb"),
             .start = 4},
        };

        fx_node_build(nd, p, 2, 0x2, recs, 2);
}

static json_t *at(json_t *o, const char *path)
{
        char buf[256], *save = NULL;

        strcpy(buf, path);
        for (char *t = strtok_r(buf, ".", &save); t && o; t = strtok_r(NULL, ".", &save))
                o = json_is_array(o) ? json_array_get(o, strtoul(t, NULL, 10))
                                     : json_object_get(o, t);
        return o;
}

static const char *str(json_t *o, const char *path)
{
        return json_string_value(at(o, path));
}

static long long num(json_t *o, const char *path)
{
        json_t *v = at(o, path);

        if (!json_is_integer(v))
                fail_msg("%s is not an integer", path);
        return json_integer_value(v);
}

/* The {name, count} entry named name of the array at path, or -1. */
static long long profile_count(json_t *o, const char *path, const char *name)
{
        json_t *e;
        size_t i;

        json_array_foreach(at(o, path), i,
                           e) if (!strcmp(str(e, "name"), name)) return num(e, "count");
        return -1;
}

static void test_mixed_node(void **state)
{
        struct fx_node nd;
        struct tsr_diag diag;
        json_t *o = NULL, *profiles;
        const struct tsr_product *p = fx_product(H100);
        unsigned offered = 0;

        (void)state;
        mixed_node(&nd);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_devices_object_build("node-h100", nd.caps, nd.ledger, nd.n, &o, &diag),
                         0);
        assert_string_equal(str(o, "apiVersion"), "worker.gpustack.ai/v1alpha1");
        assert_string_equal(str(o, "kind"), "Devices");
        assert_string_equal(str(o, "metadata.name"), "node-h100");
        assert_int_equal(json_object_size(json_object_get(o, "metadata")), 1);

        /* spec: the capability */
        assert_int_equal(json_array_size(at(o, "spec.groups")), 1);
        assert_string_equal(str(o, "spec.groups.0.id"), "h100-80gb-hbm3");
        assert_string_equal(str(o, "spec.groups.0.manufacturer"), "nvidia");
        assert_string_equal(str(o, "spec.groups.0.name"), H100);
        assert_int_equal(num(o, "spec.groups.0.memory"), p->vram_mib);
        assert_string_equal(str(o, "spec.groups.0.accelerators.0.id"), "GPU");
        assert_int_equal(num(o, "spec.groups.0.accelerators.1.index"), 1);
        assert_int_equal(num(o, "spec.groups.0.accelerators.0.status.logicalSliced.count"),
                         nd.caps[0].slice_slots);
        assert_true(json_is_boolean(
            at(o, "spec.groups.0.accelerators.0.status.logicalSliced.coresPercentageOvercommit")));
        assert_null(at(o, "spec.groups.0.accelerators.0.status.partitioned"));
        assert_int_equal(num(o, "spec.groups.0.accelerators.1.status.partitioned.count"), 7);
        profiles = at(o, "spec.groups.0.accelerators.1.status.partitioned.profiles");
        for (unsigned i = 0; i < p->n_profiles; i++)
                offered += (nd.caps[1].offered >> i) & 1u;
        assert_int_equal(json_array_size(profiles), offered);
        assert_string_equal(str(profiles, "0.name"), "1g.10gb"); /* table order */
        assert_int_equal(
            profile_count(o, "spec.groups.0.accelerators.1.status.partitioned.profiles", "3g.40gb"),
            2);
        assert_int_equal(num(profiles, "0.id"), 19);
        assert_true(num(profiles, "0.memoryMib") > 0);

        /* status: the ledger */
        assert_string_equal(str(o, "status.groups.0.id"), "h100-80gb-hbm3");
        assert_string_equal(str(o, "status.groups.0.manufacturer"), "nvidia");
        assert_null(at(o, "status.groups.0.name"));
        assert_int_equal(num(o, "status.groups.0.accelerators.0.mode"), TSR_MODE_SLICED);
        assert_int_equal(num(o, "status.groups.0.accelerators.0.allocated"), 640000);
        assert_int_equal(num(o, "status.groups.0.accelerators.0.remaining"), 960000);
        assert_int_equal(num(o, "status.groups.0.accelerators.0.allocatedSlices"), 1);
        assert_null(at(o, "status.groups.0.accelerators.0.remainingProfiles"));
        assert_int_equal(num(o, "status.groups.0.accelerators.1.mode"), TSR_MODE_PARTITIONED);
        assert_int_equal(num(o, "status.groups.0.accelerators.1.allocated"),
                         nd.ledger[1].allocated);
        assert_int_equal(num(o, "status.groups.0.accelerators.1.remaining"),
                         nd.ledger[1].remaining);
        assert_null(at(o, "status.groups.0.accelerators.1.allocatedSlices"));
        assert_int_equal(
            profile_count(o, "status.groups.0.accelerators.1.allocatedProfiles", "3g.40gb"), 1);
        assert_int_equal(
            profile_count(o, "status.groups.0.accelerators.1.remainingProfiles", "3g.40gb"), 1);
        assert_int_equal(
            profile_count(o, "status.groups.0.accelerators.1.allocatedProfiles", "7g.80gb"), 0);
        assert_int_equal(
            profile_count(o, "status.groups.0.accelerators.1.remainingProfiles", "7g.80gb"), 0);
        assert_int_equal(
            profile_count(o, "status.groups.0.accelerators.1.remainingProfiles", "1g.10gb"), 4);
        assert_int_equal(json_array_size(at(o, "status.groups.0.accelerators.1.allocatedProfiles")),
                         offered);
        json_decref(o);
}

static void test_no_accelerators(void **state)
{
        struct tsr_diag diag;
        json_t *o = NULL;

        (void)state;
        assert_int_equal(tsr_devices_object_build("cpu-node", NULL, NULL, 0, &o, &diag), 0);
        assert_string_equal(str(o, "metadata.name"), "cpu-node");
        assert_true(json_is_array(at(o, "spec.groups")));
        assert_int_equal(json_array_size(at(o, "spec.groups")), 0);
        assert_int_equal(json_array_size(at(o, "status.groups")), 0);
        json_decref(o);
}

static void test_mixed_products(void **state)
{
        struct fx_node nd;
        struct tsr_diag diag;
        json_t *o = (json_t *)&diag, *labels = json_object();

        (void)state;
        mixed_node(&nd);
        nd.caps[1].product = fx_product("NVIDIA A100-SXM4-80GB");
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_devices_object_build("n", nd.caps, nd.ledger, nd.n, &o, &diag),
                         TSR_EINVAL);
        assert_ptr_equal(o, (json_t *)&diag);
        assert_non_null(strstr(diag.msg, "different products"));
        assert_int_equal(tsr_devices_fit_labels(nd.caps, nd.ledger, nd.n, labels, &diag),
                         TSR_EINVAL);
        assert_int_equal(json_object_size(labels), 0);
        json_decref(labels);
}

static const char *label(json_t *labels, const char *prefix)
{
        char key[256];

        snprintf(key, sizeof(key), "%snvidia-h100-80gb-hbm3", prefix);
        return json_string_value(json_object_get(labels, key));
}

static void test_fit_labels(void **state)
{
        const struct tsr_product *p = fx_product(H100);
        /* The spec's example: remaining {640000, 640000, 1600000} -> 1600000. */
        const struct tsr_alloc_record slices[] = {
            {.accel = 0, .mode = TSR_MODE_SLICED, .units = 960000, .profile = -1},
            {.accel = 1, .mode = TSR_MODE_SLICED, .units = 960000, .profile = -1},
        };
        struct fx_node nd;
        struct tsr_diag diag;
        json_t *labels = json_object();

        (void)state;
        fx_node_build(&nd, p, 3, 0, slices, 2);
        assert_int_equal(tsr_devices_fit_labels(nd.caps, nd.ledger, nd.n, labels, &diag), 0);
        assert_int_equal(json_object_size(labels), 2);
        assert_string_equal(label(labels, TSR_FIT_SLICED_PREFIX), "1600000");
        assert_string_equal(label(labels, TSR_FIT_SHARED_PREFIX), "1"); /* only the free one */

        /* {640000, 640000} -> 640000; the labels are replaced in place. */
        fx_node_build(&nd, p, 2, 0, slices, 2);
        assert_int_equal(tsr_devices_fit_labels(nd.caps, nd.ledger, nd.n, labels, &diag), 0);
        assert_string_equal(label(labels, TSR_FIT_SLICED_PREFIX), "640000");
        assert_string_equal(label(labels, TSR_FIT_SHARED_PREFIX), "0");
        json_decref(labels);

        /* Partition-only: no label at all. */
        labels = json_object();
        fx_node_build(&nd, p, 2, 0x3, NULL, 0);
        assert_int_equal(tsr_devices_fit_labels(nd.caps, nd.ledger, nd.n, labels, &diag), 0);
        assert_int_equal(json_object_size(labels), 0);
        assert_int_equal(tsr_devices_fit_labels(NULL, NULL, 0, labels, &diag), 0);
        assert_int_equal(json_object_size(labels), 0);
        json_decref(labels);
}

static void test_out_of_memory(void **state)
{
        struct fx_node nd;
        json_t *want = NULL;
        bool built = false, labelled = false;

        (void)state;
        mixed_node(&nd);
        assert_int_equal(
            tsr_devices_object_build("node-h100", nd.caps, nd.ledger, nd.n, &want, NULL), 0);
        json_set_alloc_funcs(failing_malloc, free);
        for (long k = 0; k < 100000 && !(built && labelled); k++) {
                struct tsr_diag diag;
                json_t *o = NULL, *labels;
                int rc;

                tsr_diag_clear(&diag);
                failing_alloc_budget(k);
                rc = tsr_devices_object_build("node-h100", nd.caps, nd.ledger, nd.n, &o, &diag);
                failing_alloc_budget(-1);
                if (rc == 0) {
                        built = true;
                        assert_true(json_equal(o, want));
                        json_decref(o);
                } else {
                        assert_int_equal(rc, TSR_ENOMEM);
                        assert_null(o);
                        assert_non_null(strstr(diag.msg, "out of memory"));
                }

                labels = json_object();
                failing_alloc_budget(k);
                rc = tsr_devices_fit_labels(nd.caps, nd.ledger, nd.n, labels, &diag);
                failing_alloc_budget(-1);
                if (rc == 0)
                        labelled = true;
                else
                        assert_int_equal(rc, TSR_ENOMEM);
                json_decref(labels);
        }
        json_set_alloc_funcs(malloc, free);
        assert_true(built && labelled);
        json_decref(want);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_mixed_node),     cmocka_unit_test(test_no_accelerators),
            cmocka_unit_test(test_mixed_products), cmocka_unit_test(test_fit_labels),
            cmocka_unit_test(test_out_of_memory),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
