/*
 * test_devices_object.c - codec/devices_object: the Devices object of a node (spec from the
 * capability, status from the ledger) and the fit labels of its Node.
 *
 *   mixed node        an H100 pair, one unpartitioned with a slice, one partitioned with a
 *                     3g.40gb instance: every field of spec and status in the upstream shape
 *                     (topology, logicalSliced / physicalSliced with the H100 table's counts,
 *                     slices and placements, the group's sliced detail, the live placement),
 *                     profiles in table order
 *   sliced detail     a group of one population has only that half of the detail, summed over
 *                     its cards; live placements are listed by start whatever the record order
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
        tsr_capability_set_pci_bus_id(&nd->caps[1], "00000000:91:00.0");
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

/* The entry of the array a named name (fails when none is). */
static json_t *profile(json_t *a, const char *name)
{
        json_t *e;
        size_t i;

        json_array_foreach(a, i, e) if (!strcmp(str(e, "name"), name)) return e;
        fail_msg("no profile %s", name);
        return NULL;
}

/* topology: the five strings the schema requires, the bus id bus and nothing else known. */
static void expect_topology(json_t *o, const char *path, const char *bus)
{
        static const char *const keys[] = {"pciRootId", "pciClass", "numaAffinity", "cpuAffinity"};
        json_t *t = at(o, path);

        assert_int_equal(json_object_size(t), 5);
        assert_string_equal(str(t, "pciBusId"), bus);
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                assert_string_equal(str(t, keys[i]), "");
}

/* placements of e: one {start, length} per start of the list starts ("0,4"), in order. */
static void expect_placements(json_t *e, unsigned length, const char *starts)
{
        json_t *pl = at(e, "placements");
        char buf[64], *save = NULL;
        size_t k = 0;

        strcpy(buf, starts);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), k++) {
                assert_int_equal(num(json_array_get(pl, k), "start"), strtol(t, NULL, 10));
                assert_int_equal(num(json_array_get(pl, k), "length"), length);
                assert_int_equal(json_object_size(json_array_get(pl, k)), 2);
        }
        assert_int_equal(json_array_size(pl), k);
}

/* A physicalSliced profile entry against the catalog's row i of p: exactly the upstream keys. */
static void expect_profile(json_t *e, const struct tsr_product *p, unsigned i)
{
        const struct tsr_mig_profile *mp = &p->profiles[i];
        json_t *pl = at(e, "placements");
        struct tsr_accel_cap c;
        uint32_t starts = 0;
        size_t k;
        json_t *v;

        tsr_capability_detect(p, 0, "GPU", true, &c);
        assert_int_equal(json_object_size(e), 6); /* no profile id */
        assert_string_equal(str(e, "name"), mp->name);
        assert_int_equal(num(e, "memoryMib"), tsr_mig_profile_nominal_mib(mp));
        assert_int_equal(num(e, "computeSlices"), mp->compute_slices);
        assert_int_equal(num(e, "memorySlices"), mp->size);
        assert_int_equal(num(e, "count"), tsr_capability_profile_ceiling(&c, i));
        assert_int_equal(json_array_size(pl), tsr_mig_profile_start_count(mp));
        json_array_foreach(pl, k, v)
        {
                assert_int_equal(num(v, "length"), mp->size);
                if (k)
                        assert_true(num(v, "start") > num(json_array_get(pl, k - 1), "start"));
                starts |= UINT32_C(1) << num(v, "start");
        }
        assert_int_equal(starts, mp->starts);
}

/* acceleratorSlicedDetail.physical.profiles is exactly want ("name:count:memoryMib,..."). */
static void expect_detail_profiles(json_t *o, const char *want)
{
        json_t *a = at(o, "spec.groups.0.acceleratorSlicedDetail.physical.profiles"), *e;
        char got[512] = "";
        size_t i;

        json_array_foreach(a, i, e)
        {
                assert_int_equal(json_object_size(e), 3);
                snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s:%lld:%lld",
                         i ? "," : "", str(e, "name"), num(e, "count"), num(e, "memoryMib"));
        }
        assert_string_equal(got, want);
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
        assert_int_equal(json_array_size(at(o, "spec.groups.0.accelerators.1.physicalIndexes")), 1);
        assert_int_equal(num(o, "spec.groups.0.accelerators.1.physicalIndexes.0"), 1);
        expect_topology(o, "spec.groups.0.accelerators.0.topology", "");
        expect_topology(o, "spec.groups.0.accelerators.1.topology", "00000000:91:00.0");
        assert_false(json_is_true(at(o, "spec.groups.0.accelerators.0.status.unhealthy")));
        assert_true(json_is_boolean(at(o, "spec.groups.0.accelerators.1.status.unhealthy")));
        assert_false(json_is_true(at(o, "spec.groups.0.accelerators.1.status.unhealthy")));

        /* GPU 0, unpartitioned: logicalSliced only */
        assert_int_equal(num(o, "spec.groups.0.accelerators.0.status.logicalSliced.count"),
                         nd.caps[0].slice_slots);
        assert_true(json_is_true(
            at(o, "spec.groups.0.accelerators.0.status.logicalSliced.coresPercentageOvercommit")));
        assert_null(at(o, "spec.groups.0.accelerators.0.status.physicalSliced"));
        assert_null(at(o, "spec.groups.0.accelerators.0.status.partitioned"));
        assert_int_equal(json_object_size(at(o, "spec.groups.0.accelerators.0.status")), 2);

        /* GPU 1, partitioned: physicalSliced only, every offered profile in table order */
        assert_null(at(o, "spec.groups.0.accelerators.1.status.logicalSliced"));
        assert_null(at(o, "spec.groups.0.accelerators.1.status.partitioned"));
        assert_int_equal(num(o, "spec.groups.0.accelerators.1.status.physicalSliced.count"), 7);
        profiles = at(o, "spec.groups.0.accelerators.1.status.physicalSliced.profiles");
        for (unsigned i = 0; i < p->n_profiles; i++)
                offered += (nd.caps[1].offered >> i) & 1u;
        assert_int_equal(offered, 6); /* 1g.10gb+me is not offered */
        assert_int_equal(json_array_size(profiles), offered);
        for (unsigned i = 0, k = 0; i < p->n_profiles; i++)
                if ((nd.caps[1].offered >> i) & 1u)
                        expect_profile(json_array_get(profiles, k++), p, i);
        assert_string_equal(str(profiles, "0.name"), "1g.10gb"); /* table order */
        assert_string_equal(str(profiles, "5.name"), "7g.80gb");
        /* The H100 table itself: 1g.10gb x7 at 0..6, 3g.40gb x2 at 0 and 4, 7g.80gb once at 0. */
        expect_placements(profile(profiles, "1g.10gb"), 1, "0,1,2,3,4,5,6");
        assert_int_equal(num(profile(profiles, "1g.10gb"), "count"), 7);
        assert_int_equal(num(profile(profiles, "1g.10gb"), "memoryMib"), 10240);
        assert_int_equal(num(profile(profiles, "1g.10gb"), "computeSlices"), 1);
        assert_int_equal(num(profile(profiles, "1g.10gb"), "memorySlices"), 1);
        expect_placements(profile(profiles, "1g.20gb"), 2, "0,2,4,6");
        expect_placements(profile(profiles, "2g.20gb"), 2, "0,2,4");
        assert_int_equal(num(profile(profiles, "2g.20gb"), "count"), 3);
        expect_placements(profile(profiles, "3g.40gb"), 4, "0,4");
        assert_int_equal(num(profile(profiles, "3g.40gb"), "count"), 2);
        assert_int_equal(num(profile(profiles, "3g.40gb"), "computeSlices"), 3);
        expect_placements(profile(profiles, "4g.40gb"), 4, "0");
        expect_placements(profile(profiles, "7g.80gb"), 8, "0");
        assert_int_equal(num(profile(profiles, "7g.80gb"), "count"), 1);
        assert_int_equal(num(profile(profiles, "7g.80gb"), "memoryMib"), 81920);
        assert_int_equal(num(profile(profiles, "7g.80gb"), "computeSlices"), 7);
        assert_int_equal(num(profile(profiles, "7g.80gb"), "memorySlices"), 8);

        /* the group's aggregate: one card of each population */
        assert_true(json_is_true(
            at(o, "spec.groups.0.acceleratorSlicedDetail.logical.coresPercentageOvercommit")));
        assert_int_equal(num(o, "spec.groups.0.acceleratorSlicedDetail.logical.count"),
                         nd.caps[0].slice_slots);
        assert_int_equal(num(o, "spec.groups.0.acceleratorSlicedDetail.physical.count"), 7);
        expect_detail_profiles(o, "1g.10gb:7:10240,1g.20gb:4:20480,2g.20gb:3:20480,"
                                  "3g.40gb:2:40960,4g.40gb:1:40960,7g.80gb:1:81920");

        /* status: the ledger */
        assert_string_equal(str(o, "status.groups.0.id"), "h100-80gb-hbm3");
        assert_string_equal(str(o, "status.groups.0.manufacturer"), "nvidia");
        assert_null(at(o, "status.groups.0.name"));
        assert_int_equal(num(o, "status.groups.0.accelerators.0.mode"), TSR_MODE_SLICED);
        assert_int_equal(num(o, "status.groups.0.accelerators.0.allocated"), 640000);
        assert_int_equal(num(o, "status.groups.0.accelerators.0.remaining"), 960000);
        assert_int_equal(num(o, "status.groups.0.accelerators.0.allocatedSlices"), 1);
        assert_null(at(o, "status.groups.0.accelerators.0.remainingProfiles"));
        assert_null(at(o, "status.groups.0.accelerators.0.allocatedPhysicalPlacements"));
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
        /* the live 3g.40gb at start 4 */
        assert_int_equal(
            json_array_size(at(o, "status.groups.0.accelerators.1.allocatedPhysicalPlacements")),
            1);
        assert_int_equal(
            num(o, "status.groups.0.accelerators.1.allocatedPhysicalPlacements.0.start"), 4);
        assert_int_equal(
            num(o, "status.groups.0.accelerators.1.allocatedPhysicalPlacements.0.length"), 4);
        json_decref(o);
}

/* The group's aggregate per population, and live placements listed by start. */
static void test_sliced_detail(void **state)
{
        const struct tsr_product *p = fx_product(H100);
        /* Out of start order on GPU 0: 1g.20gb at 6, 3g.40gb at 0, 1g.10gb at 4. */
        const struct tsr_alloc_record parts[] = {
            {.accel = 0,
             .mode = TSR_MODE_PARTITIONED,
             .units = 400000,
             .profile = fx_pidx(p, "1g.20gb"),
             .start = 6},
            {.accel = 0,
             .mode = TSR_MODE_PARTITIONED,
             .units = 800000,
             .profile = fx_pidx(p, "3g.40gb"),
             .start = 0},
            {.accel = 0,
             .mode = TSR_MODE_PARTITIONED,
             .units = 200000,
             .profile = fx_pidx(p, "1g.10gb"),
             .start = 4},
        };
        struct fx_node nd;
        json_t *o = NULL, *pl;

        (void)state;
        /* All unpartitioned: logical only, the slots summed. */
        fx_node_build(&nd, p, 3, 0x0, NULL, 0);
        assert_int_equal(tsr_devices_object_build("n", nd.caps, nd.ledger, nd.n, &o, NULL), 0);
        assert_int_equal(num(o, "spec.groups.0.acceleratorSlicedDetail.logical.count"),
                         3 * nd.caps[0].slice_slots);
        assert_null(at(o, "spec.groups.0.acceleratorSlicedDetail.physical"));
        json_decref(o);

        /* All partitioned: physical only, counts and ceilings summed, memoryMib carried. */
        fx_node_build(&nd, p, 2, 0x3, parts, 3);
        assert_int_equal(tsr_devices_object_build("n", nd.caps, nd.ledger, nd.n, &o, NULL), 0);
        assert_null(at(o, "spec.groups.0.acceleratorSlicedDetail.logical"));
        assert_int_equal(num(o, "spec.groups.0.acceleratorSlicedDetail.physical.count"), 14);
        expect_detail_profiles(o, "1g.10gb:14:10240,1g.20gb:8:20480,2g.20gb:6:20480,"
                                  "3g.40gb:4:40960,4g.40gb:2:40960,7g.80gb:2:81920");
        /* The capability never moves with allocations: both cards' spec sides are alike. */
        assert_true(json_equal(at(o, "spec.groups.0.accelerators.0.status"),
                               at(o, "spec.groups.0.accelerators.1.status")));
        pl = at(o, "status.groups.0.accelerators.0.allocatedPhysicalPlacements");
        assert_int_equal(json_array_size(pl), 3);
        assert_int_equal(num(pl, "0.start"), 0);
        assert_int_equal(num(pl, "0.length"), 4);
        assert_int_equal(num(pl, "1.start"), 4);
        assert_int_equal(num(pl, "1.length"), 1);
        assert_int_equal(num(pl, "2.start"), 6);
        assert_int_equal(num(pl, "2.length"), 2);
        assert_null(at(o, "status.groups.0.accelerators.1.allocatedPhysicalPlacements"));
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

/* The capabilities read back from a built object are the ones it was built from; faults are
 * named. */
static void test_capabilities_read_back(void **state)
{
        struct fx_node nd;
        struct tsr_accel_cap back[16];
        struct tsr_diag diag;
        json_t *o = NULL, *g;
        size_t n = 99;

        (void)state;
        mixed_node(&nd);
        tsr_capability_set_pci_bus_id(&nd.caps[1], "00000000:8D:00.0");
        assert_int_equal(tsr_devices_object_build("node-h100", nd.caps, nd.ledger, nd.n, &o, NULL),
                         0);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_devices_object_capabilities(o, back, 16, &n, &diag), 0);
        assert_int_equal(n, nd.n);
        assert_memory_equal(back, nd.caps, nd.n * sizeof(*back));
        assert_int_equal(tsr_devices_object_capabilities(o, back, nd.n - 1, &n, &diag),
                         TSR_ETOOBIG);
        assert_non_null(strstr(diag.msg, "more than"));

        g = json_array_get(json_object_get(json_object_get(o, "spec"), "groups"), 0);
        json_object_del(json_array_get(json_object_get(g, "accelerators"), 1), "index");
        assert_int_equal(tsr_devices_object_capabilities(o, back, 16, &n, &diag), TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "accelerators[1]"));
        json_object_set_new(g, "name", json_string("NVIDIA Nothing"));
        assert_int_equal(tsr_devices_object_capabilities(o, back, 16, &n, &diag), TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "\"NVIDIA Nothing\" is no product"));
        json_decref(o);

        o = json_pack("{s:{s:[]}}", "spec", "groups");
        assert_int_equal(tsr_devices_object_capabilities(o, back, 16, &n, &diag), 0);
        assert_int_equal(n, 0);
        json_decref(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_mixed_node),
            cmocka_unit_test(test_sliced_detail),
            cmocka_unit_test(test_no_accelerators),
            cmocka_unit_test(test_mixed_products),
            cmocka_unit_test(test_fit_labels),
            cmocka_unit_test(test_out_of_memory),
            cmocka_unit_test(test_capabilities_read_back),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
