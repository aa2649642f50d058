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
 *   ledger read back  tsr_devices_object_ledger inverts the status half: untouched, exclusive,
 *                     shared, sliced, partitioned (H100, A100, A30, several profiles per card) and
 *                     mixed nodes build, read back (capabilities, then the ledger) to the ledger
 *                     they were built from, field by field with live instances as a set, and give
 *                     the same pool views; a spec listed out of index order maps by index
 *   backtracking      placements whose first-fitting profile (table order, start order) is the
 *                     wrong one (2g.20gb at 0 next to 1g.20gb at 6; 4g.40gb at 0 next to 3g.40gb
 *                     at 4) still get their profiles; a truly ambiguous pair reads as one of its
 *                     two assignments with the same views
 *   ledger rejected   each malformed status (not an object, index, id, mode, negatives, slices,
 *                     placements off the axis, overlapping, taken by no profile, counts, a broken
 *                     invariant) is TSR_EINVAL with a message naming the accelerator and field
 *   ledger absent     no status, no groups, fewer accelerators: the missing ones read untouched
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
#include "core/views.h"
#include "support/catalog_fixtures.h"
#include "support/failing_alloc.h"

#include <stdlib.h>
#include <string.h>

#define H100 "NVIDIA H100 80GB HBM3"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

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

/* ---- the ledger read back ------------------------------------------------------------------ */

#define A100 "NVIDIA A100-SXM4-40GB"
#define A30  "NVIDIA A30"

static struct tsr_alloc_record whole(unsigned accel, enum tsr_mode mode, int64_t units)
{
        return (struct tsr_alloc_record){
            .accel = accel, .mode = mode, .units = units, .shares = 1, .profile = -1};
}

static struct tsr_alloc_record shares(unsigned accel, unsigned n)
{
        return (struct tsr_alloc_record){
            .accel = accel, .mode = TSR_MODE_SHARED, .shares = n, .profile = -1};
}

static struct tsr_alloc_record part(const struct tsr_product *p, unsigned accel,
                                    const char *profile, unsigned start, int64_t units)
{
        return (struct tsr_alloc_record){.accel = accel,
                                         .mode = TSR_MODE_PARTITIONED,
                                         .units = units,
                                         .profile = fx_pidx(p, profile),
                                         .start = start};
}

/* got equals want: every field, the live instances as a set (they never overlap). */
static void expect_ledger_equal(const struct tsr_accel_ledger *got,
                                const struct tsr_accel_ledger *want, size_t i)
{
        if (got->mode != want->mode || got->allocated != want->allocated ||
            got->remaining != want->remaining || got->allocated_slices != want->allocated_slices ||
            got->live.n != want->live.n)
                fail_msg("accelerator %zu: mode %d/%d allocated %lld/%lld remaining %lld/%lld "
                         "slices %u/%u live %u/%u (got/want)",
                         i, got->mode, want->mode, (long long)got->allocated,
                         (long long)want->allocated, (long long)got->remaining,
                         (long long)want->remaining, got->allocated_slices, want->allocated_slices,
                         got->live.n, want->live.n);
        for (unsigned k = 0; k < want->live.n; k++) {
                bool found = false;

                for (unsigned q = 0; q < got->live.n && !found; q++)
                        found = got->live.inst[q].profile == want->live.inst[k].profile &&
                                got->live.inst[q].start == want->live.inst[k].start;
                if (!found)
                        fail_msg("accelerator %zu: live profile %u at %u not read back", i,
                                 want->live.inst[k].profile, want->live.inst[k].start);
        }
}

static void expect_view_equal(const struct tsr_view *a, const struct tsr_view *b)
{
        assert_int_equal(a->capacity, b->capacity);
        assert_int_equal(a->once_max, b->once_max);
        assert_int_equal(a->remaining, b->remaining);
}

static void expect_figures_equal(const struct tsr_profile_figure *a,
                                 const struct tsr_profile_figure *b, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                assert_string_equal(a[i].name, b[i].name);
                assert_int_equal(a[i].count, b[i].count);
                assert_int_equal(a[i].memory_mib, b[i].memory_mib);
        }
}

/* tsr_views_compute gives the same views for the node with ledger a and with ledger b. */
static void expect_views_equal(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *a,
                               const struct tsr_accel_ledger *b, size_t n)
{
        const struct tsr_pool_node na = {caps, a, n}, nb = {caps, b, n};
        struct tsr_pool_views va, vb;

        tsr_views_compute(&na, 1, &va);
        tsr_views_compute(&nb, 1, &vb);
        expect_view_equal(&va.ex, &vb.ex);
        expect_view_equal(&va.sh, &vb.sh);
        expect_view_equal(&va.sl, &vb.sl);
        expect_view_equal(&va.pt, &vb.pt);
        assert_int_equal(va.n_profiles, vb.n_profiles);
        expect_figures_equal(va.remaining_profiles, vb.remaining_profiles, va.n_profiles);
        expect_figures_equal(va.allocated_profiles, vb.allocated_profiles, va.n_profiles);
        assert_int_equal(va.logical_present, vb.logical_present);
        assert_int_equal(va.logical_overcommit, vb.logical_overcommit);
        assert_int_equal(va.logical_count, vb.logical_count);
        assert_int_equal(va.physical_present, vb.physical_present);
        assert_int_equal(va.physical_count, vb.physical_count);
        expect_figures_equal(va.physical_profiles, vb.physical_profiles, va.n_profiles);
}

/* nd builds an object that reads back to nd's caps and ledger, with the same views. */
static void expect_round_trip(const struct fx_node *nd)
{
        struct tsr_accel_cap caps[FX_NODE_ACCEL];
        struct tsr_accel_ledger back[FX_NODE_ACCEL];
        struct tsr_diag diag;
        json_t *o = NULL;
        size_t n = 0;

        assert_int_equal(tsr_devices_object_build("n", nd->caps, nd->ledger, nd->n, &o, NULL), 0);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_devices_object_capabilities(o, caps, FX_NODE_ACCEL, &n, &diag), 0);
        assert_int_equal(n, nd->n);
        assert_memory_equal(caps, nd->caps, n * sizeof(*caps));
        if (tsr_devices_object_ledger(o, caps, n, back, &diag))
                fail_msg("ledger read back: %s", diag.msg);
        for (size_t i = 0; i < n; i++) {
                expect_ledger_equal(&back[i], &nd->ledger[i], i);
                assert_int_equal(tsr_ledger_check(&caps[i], &back[i], NULL), 0);
        }
        expect_views_equal(caps, nd->ledger, back, n);
        json_decref(o);
}

static void test_ledger_round_trip(void **state)
{
        const struct tsr_product *h100 = fx_product(H100), *a100 = fx_product(A100),
                                 *a30 = fx_product(A30);
        /* H100: 0 exclusive, 1 two shares + three, 2 two slices, 3 untouched (a finished
         * Pod's slice charges nothing) */
        const struct tsr_alloc_record whole_cards[] = {
            whole(0, TSR_MODE_EXCLUSIVE, 0),
            shares(1, 2),
            shares(1, 3),
            whole(2, TSR_MODE_SLICED, 320000),
            whole(2, TSR_MODE_SLICED, 480000),
            {.accel = 3, .mode = TSR_MODE_SLICED, .units = 1, .profile = -1, .finished = true},
        };
        /* H100, all partitioned: 0 four profiles; 1 2g.20gb at 0 beside 1g.20gb at 6 (the
         * first-fitting profile at 0 is 1g.20gb) and four 1g.10gb; 2 the whole 7g.80gb;
         * 3 4g.40gb at 0 beside 3g.40gb at 4; 4 nothing live */
        const struct tsr_alloc_record h100_parts[] = {
            part(h100, 0, "3g.40gb", 4, 600000),  part(h100, 0, "1g.20gb", 2, 200000),
            part(h100, 0, "1g.10gb", 1, 100000),  part(h100, 0, "1g.10gb", 0, 100000),
            part(h100, 1, "1g.20gb", 6, 200000),  part(h100, 1, "2g.20gb", 0, 400000),
            part(h100, 1, "1g.10gb", 2, 100000),  part(h100, 1, "1g.10gb", 3, 100000),
            part(h100, 1, "1g.10gb", 5, 100000),  part(h100, 1, "1g.10gb", 4, 100000),
            part(h100, 2, "7g.80gb", 0, 1600000), part(h100, 3, "3g.40gb", 4, 700000),
            part(h100, 3, "4g.40gb", 0, 900000),
        };
        /* A100 40GB: 0 3g.20gb, 2g.10gb, 1g.5gb; 1 1g.10gb at 6 and three 1g.5gb, one of a
         * finished Pod (a partition still charges); 2 unpartitioned, one slice */
        struct tsr_alloc_record a100_recs[] = {
            part(a100, 0, "3g.20gb", 0, 700000), part(a100, 0, "2g.10gb", 4, 450000),
            part(a100, 0, "1g.5gb", 6, 220000),  part(a100, 1, "1g.10gb", 6, 220000),
            part(a100, 1, "1g.5gb", 0, 220000),  part(a100, 1, "1g.5gb", 1, 220000),
            part(a100, 1, "1g.5gb", 3, 220000),  whole(2, TSR_MODE_SLICED, 800000),
        };
        /* A30: 0 2g.12gb and two 1g.6gb; 1 the whole 4g.24gb; 2 unpartitioned, exclusive */
        const struct tsr_alloc_record a30_recs[] = {
            part(a30, 0, "1g.6gb", 3, 400000), part(a30, 0, "2g.12gb", 0, 800000),
            part(a30, 0, "1g.6gb", 2, 400000), part(a30, 1, "4g.24gb", 0, 1600000),
            whole(2, TSR_MODE_EXCLUSIVE, 0),
        };
        /* mixed H100: 0 exclusive, 1 partitioned, 2 sliced, 3 partitioned untouched, 4 shared */
        const struct tsr_alloc_record mixed[] = {
            whole(0, TSR_MODE_EXCLUSIVE, 0),
            part(h100, 1, "2g.20gb", 2, 400000),
            part(h100, 1, "3g.40gb", 4, 800000),
            whole(2, TSR_MODE_SLICED, 160000),
            shares(4, 1),
        };
        struct fx_node nd;

        (void)state;
        a100_recs[6].finished = true;
        fx_node_build(&nd, h100, 3, 0x0, NULL, 0); /* untouched, unpartitioned */
        expect_round_trip(&nd);
        fx_node_build(&nd, h100, 2, 0x3, NULL, 0); /* untouched, partitioned */
        expect_round_trip(&nd);
        fx_node_build(&nd, h100, 4, 0x0, whole_cards, N_ELEMS(whole_cards));
        assert_int_equal(nd.ledger[1].allocated, 5 * TSR_UNITS_PER_SHARE);
        assert_int_equal(nd.ledger[2].allocated_slices, 2);
        expect_round_trip(&nd);
        fx_node_build(&nd, h100, 5, 0x1f, h100_parts, N_ELEMS(h100_parts));
        assert_int_equal(nd.ledger[1].live.n, 6);
        expect_round_trip(&nd);
        fx_node_build(&nd, a100, 3, 0x3, a100_recs, N_ELEMS(a100_recs));
        assert_int_equal(nd.ledger[1].live.n, 4);
        expect_round_trip(&nd);
        fx_node_build(&nd, a30, 3, 0x3, a30_recs, N_ELEMS(a30_recs));
        expect_round_trip(&nd);
        fx_node_build(&nd, h100, 5, 0xa, mixed, N_ELEMS(mixed));
        expect_round_trip(&nd);
}

/* A spec listed out of index order: out[j] is caps[j]'s, found by index. */
static void test_ledger_spec_out_of_order(void **state)
{
        const struct tsr_alloc_record recs[] = {whole(1, TSR_MODE_EXCLUSIVE, 0)};
        struct tsr_accel_cap caps[2];
        struct tsr_accel_ledger back[2];
        struct fx_node nd;
        json_t *o = NULL, *accs;
        size_t n = 0;

        (void)state;
        fx_node_build(&nd, fx_product(H100), 2, 0x0, recs, 1);
        assert_int_equal(tsr_devices_object_build("n", nd.caps, nd.ledger, nd.n, &o, NULL), 0);
        accs = at(o, "spec.groups.0.accelerators");
        json_array_insert(accs, 0, json_array_get(accs, 1));
        json_array_remove(accs, 2);
        assert_int_equal(tsr_devices_object_capabilities(o, caps, 2, &n, NULL), 0);
        assert_int_equal(caps[0].index, 1);
        assert_int_equal(tsr_devices_object_ledger(o, caps, n, back, NULL), 0);
        expect_ledger_equal(&back[0], &nd.ledger[1], 0);
        expect_ledger_equal(&back[1], &nd.ledger[0], 1);
        json_decref(o);
}

/*
 * A partitioned H100 whose status lists placements (start:length, ...) and allocatedProfiles
 * counts (name:count, ...), the rest none; returns the object (json_decref) and fills caps.
 */
static json_t *partitioned_h100(const char *placements, const char *counts,
                                struct tsr_accel_cap *caps)
{
        struct fx_node nd;
        char buf[256], *save = NULL;
        json_t *o = NULL, *acc, *pl = json_array(), *prof;
        size_t i;

        fx_node_build(&nd, fx_product(H100), 1, 0x1, NULL, 0);
        memcpy(caps, nd.caps, sizeof(*caps));
        assert_int_equal(tsr_devices_object_build("n", nd.caps, nd.ledger, nd.n, &o, NULL), 0);
        acc = at(o, "status.groups.0.accelerators.0");
        json_object_set_new(acc, "mode", json_integer(TSR_MODE_PARTITIONED));
        strcpy(buf, placements);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
                json_array_append_new(pl, json_pack("{s:i, s:i}", "start", atoi(t), "length",
                                                    atoi(strchr(t, ':') + 1)));
        json_object_set_new(acc, "allocatedPhysicalPlacements", pl);
        strcpy(buf, counts);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                *strchr(t, ':') = '\0';
                json_array_foreach(json_object_get(acc, "allocatedProfiles"), i,
                                   prof) if (!strcmp(str(prof, "name"), t))
                    json_object_set_new(prof, "count", json_integer(atoi(t + strlen(t) + 1)));
        }
        return o;
}

/* The profile read back at start in l, or NULL. */
static const char *profile_at(const struct tsr_accel_ledger *l, unsigned start)
{
        for (unsigned k = 0; k < l->live.n; k++)
                if (l->live.inst[k].start == start)
                        return fx_product(H100)->profiles[l->live.inst[k].profile].name;
        return NULL;
}

static void test_ledger_backtracking(void **state)
{
        const struct tsr_product *p = fx_product(H100);
        struct tsr_accel_cap cap;
        struct tsr_accel_ledger l, orig;
        struct tsr_diag diag;
        json_t *o;

        (void)state;
        /* 0:2 fits 1g.20gb first (table order), but only 1g.20gb sits at 6: 0 is the 2g.20gb. */
        o = partitioned_h100("0:2,6:2", "1g.20gb:1,2g.20gb:1", &cap);
        tsr_diag_clear(&diag);
        if (tsr_devices_object_ledger(o, &cap, 1, &l, &diag))
                fail_msg("%s", diag.msg);
        assert_int_equal(l.live.n, 2);
        assert_string_equal(profile_at(&l, 0), "2g.20gb");
        assert_string_equal(profile_at(&l, 6), "1g.20gb");
        json_decref(o);

        /* 0:4 fits 3g.40gb first, but 4:4 is only 3g.40gb's: 0 is the 4g.40gb. */
        o = partitioned_h100("0:4,4:4", "3g.40gb:1,4g.40gb:1", &cap);
        assert_int_equal(tsr_devices_object_ledger(o, &cap, 1, &l, &diag), 0);
        assert_string_equal(profile_at(&l, 0), "4g.40gb");
        assert_string_equal(profile_at(&l, 4), "3g.40gb");
        json_decref(o);

        /* Both chains, listed against start order, with two 1g.10gb beside them: 4:2 takes
         * 1g.20gb first, gives it up to 6:2, and 0:2 finds 1g.20gb gone. */
        o = partitioned_h100("4:2,6:2,0:2,2:1,3:1", "1g.20gb:1,2g.20gb:2,1g.10gb:2", &cap);
        assert_int_equal(tsr_devices_object_ledger(o, &cap, 1, &l, &diag), 0);
        assert_string_equal(profile_at(&l, 6), "1g.20gb");
        assert_string_equal(profile_at(&l, 0), "2g.20gb");
        assert_string_equal(profile_at(&l, 4), "2g.20gb");
        assert_string_equal(profile_at(&l, 2), "1g.10gb");
        json_decref(o);

        /* Truly ambiguous: 0:2 and 2:2 are 1g.20gb and 2g.20gb either way round; the object
         * cannot tell, and the reader's choice has the original's counts and views. */
        tsr_ledger_reset(&orig);
        orig.mode = TSR_MODE_PARTITIONED;
        assert_int_equal(tsr_geometry_add(p, &orig.live, fx_pidx(p, "2g.20gb"), 0), 0);
        assert_int_equal(tsr_geometry_add(p, &orig.live, fx_pidx(p, "1g.20gb"), 2), 0);
        o = partitioned_h100("0:2,2:2", "1g.20gb:1,2g.20gb:1", &cap);
        assert_int_equal(tsr_devices_object_ledger(o, &cap, 1, &l, &diag), 0);
        assert_int_equal(l.live.n, 2);
        assert_int_equal(tsr_geometry_live_count(&l.live, fx_pidx(p, "1g.20gb")), 1);
        assert_int_equal(tsr_geometry_live_count(&l.live, fx_pidx(p, "2g.20gb")), 1);
        assert_int_equal(tsr_geometry_occupied(p, &l.live), tsr_geometry_occupied(p, &orig.live));
        expect_views_equal(&cap, &orig, &l, 1);
        json_decref(o);
}

/* The mixed node's object (GPU 0 sliced, GPU 1 3g.40gb at 4); caps filled. */
static json_t *mixed_object(struct tsr_accel_cap *caps)
{
        struct fx_node nd;
        json_t *o = NULL;

        mixed_node(&nd);
        memcpy(caps, nd.caps, 2 * sizeof(*caps));
        assert_int_equal(tsr_devices_object_build("n", nd.caps, nd.ledger, nd.n, &o, NULL), 0);
        return o;
}

/* status accelerator i of o. */
static json_t *status_acc(json_t *o, unsigned i)
{
        char path[64];

        snprintf(path, sizeof(path), "status.groups.0.accelerators.%u", i);
        return at(o, path);
}

/* o (taken) reads as TSR_EINVAL with a message containing want and, if not NULL, also. */
static void expect_rejected(json_t *o, const struct tsr_accel_cap *caps, const char *want,
                            const char *also)
{
        struct tsr_accel_ledger out[2];
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        assert_int_equal(tsr_devices_object_ledger(o, caps, 2, out, &diag), TSR_EINVAL);
        if (!strstr(diag.msg, want) || (also && !strstr(diag.msg, also)))
                fail_msg("\"%s\" lacks \"%s\" / \"%s\"", diag.msg, want, also ? also : "");
        json_decref(o);
}

static void test_ledger_rejected(void **state)
{
        struct tsr_accel_cap caps[2];
        json_t *o, *pl;

        (void)state;
        o = mixed_object(caps); /* the unmodified object reads */
        {
                struct tsr_accel_ledger out[2];

                assert_int_equal(tsr_devices_object_ledger(o, caps, 2, out, NULL), 0);
        }
        json_decref(o);

        expect_rejected(json_integer(3), caps, "not an object", NULL);
        o = mixed_object(caps);
        json_object_set_new(at(o, "status"), "groups", json_string("x"));
        expect_rejected(o, caps, "status.groups is not a list", NULL);
        o = mixed_object(caps);
        json_array_set_new(at(o, "status.groups.0.accelerators"), 1, json_integer(1));
        expect_rejected(o, caps, "accelerators[1] is not an object", NULL);

        o = mixed_object(caps); /* an index outside [0, n) */
        json_object_set_new(status_acc(o, 1), "index", json_integer(2));
        expect_rejected(o, caps, "index 2 names no accelerator", "accelerators[1]");
        o = mixed_object(caps);
        json_object_set_new(status_acc(o, 1), "index", json_integer(-1));
        expect_rejected(o, caps, "index is missing, not an integer or negative", NULL);
        o = mixed_object(caps);
        json_object_set_new(status_acc(o, 1), "index", json_integer(0));
        expect_rejected(o, caps, "(accelerator 0): index is listed twice", NULL);
        o = mixed_object(caps);
        json_object_set_new(status_acc(o, 1), "id", json_string("GPU-other"));
        expect_rejected(o, caps, "(accelerator 1): id GPU-other is not the spec", NULL);

        o = mixed_object(caps); /* a mode outside the enum */
        json_object_set_new(status_acc(o, 0), "mode", json_integer(5));
        expect_rejected(o, caps, "(accelerator 0): mode 5 is not an allocation mode", NULL);
        o = mixed_object(caps);
        json_object_del(status_acc(o, 1), "mode");
        expect_rejected(o, caps, "(accelerator 1): mode is missing", NULL);

        o = mixed_object(caps); /* negative numbers */
        json_object_set_new(status_acc(o, 0), "allocated", json_integer(-5));
        expect_rejected(o, caps, "(accelerator 0): allocated -5 is negative", NULL);
        o = mixed_object(caps);
        json_object_set_new(status_acc(o, 1), "remaining", json_integer(-1));
        expect_rejected(o, caps, "(accelerator 1): remaining -1 is negative", NULL);
        o = mixed_object(caps);
        json_object_set_new(status_acc(o, 0), "allocatedSlices", json_integer(-2));
        expect_rejected(o, caps, "(accelerator 0): allocatedSlices -2 is negative", NULL);
        o = mixed_object(caps);
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedProfiles"), 0), "count",
                            json_integer(-1));
        expect_rejected(o, caps, "(accelerator 1): allocatedProfiles[0] (1g.10gb) count -1",
                        "negative");
        o = mixed_object(caps);
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedPhysicalPlacements"), 0),
                            "start", json_integer(-4));
        expect_rejected(o, caps, "(accelerator 1): allocatedPhysicalPlacements[0] start -4",
                        "negative");

        o = mixed_object(caps); /* slices past the slots */
        json_object_set_new(status_acc(o, 0), "allocatedSlices",
                            json_integer(caps[0].slice_slots + 1));
        expect_rejected(o, caps, "(accelerator 0): allocatedSlices", "is above its");

        o = mixed_object(caps); /* a placement no offered profile takes: no length-2 at 1 */
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedPhysicalPlacements"), 0),
                            "start", json_integer(1));
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedPhysicalPlacements"), 0),
                            "length", json_integer(2));
        expect_rejected(o, caps, "(accelerator 1): allocatedPhysicalPlacements[0] (start 1",
                        "is no placement of a profile it offers");
        o = mixed_object(caps); /* length 3: no profile's */
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedPhysicalPlacements"), 0),
                            "length", json_integer(3));
        expect_rejected(o, caps, "is no placement of a profile it offers", NULL);
        o = mixed_object(caps);
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedPhysicalPlacements"), 0),
                            "length", json_integer(40));
        expect_rejected(o, caps, "off the 32-slice axis", NULL);

        o = mixed_object(caps); /* overlapping placements: 1g.10gb at 5 inside 3g.40gb at 4 */
        pl = at(status_acc(o, 1), "allocatedPhysicalPlacements");
        json_array_append_new(pl, json_pack("{s:i, s:i}", "start", 5, "length", 1));
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedProfiles"), 0), "count",
                            json_integer(1));
        expect_rejected(o, caps, "(accelerator 1): allocatedPhysicalPlacements[1] (start 5",
                        "overlaps another placement");

        o = mixed_object(caps); /* counts that do not match the placements: one too many */
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedProfiles"), 0), "count",
                            json_integer(1));
        expect_rejected(o, caps, "(accelerator 1): allocatedProfiles counts 2 partitions",
                        "do not match");
        o = mixed_object(caps); /* the right total, the wrong profile: 4:4 is no 4g.40gb */
        json_object_set_new(profile(at(status_acc(o, 1), "allocatedProfiles"), "3g.40gb"), "count",
                            json_integer(0));
        json_object_set_new(profile(at(status_acc(o, 1), "allocatedProfiles"), "4g.40gb"), "count",
                            json_integer(1));
        expect_rejected(o, caps, "(accelerator 1): allocatedProfiles counts do not match",
                        "placement at 4");
        o = mixed_object(caps); /* placements dropped while counted */
        json_object_del(status_acc(o, 1), "allocatedPhysicalPlacements");
        expect_rejected(o, caps, "counts 1 partitions, which do not match the 0", NULL);
        o = mixed_object(caps);
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedProfiles"), 2), "name",
                            json_string("1g.10gb+me"));
        expect_rejected(o, caps, "names 1g.10gb+me, not a profile it offers", NULL);
        o = mixed_object(caps);
        json_object_set_new(json_array_get(at(status_acc(o, 1), "allocatedProfiles"), 2), "name",
                            json_string("3g.40gb"));
        expect_rejected(o, caps, "allocatedProfiles lists 3g.40gb twice", NULL);
        o = mixed_object(caps);
        json_object_del(status_acc(o, 1), "allocatedProfiles");
        expect_rejected(o, caps, "(accelerator 1): allocatedProfiles is missing", NULL);

        o = mixed_object(caps); /* a broken ledger invariant, by tsr_ledger_check */
        json_object_set_new(status_acc(o, 0), "remaining", json_integer(1));
        expect_rejected(o, caps, "accelerator 0: remaining 1 is not M - allocated", NULL);
        o = mixed_object(caps);
        json_object_set_new(status_acc(o, 0), "mode", json_integer(TSR_MODE_PARTITIONED));
        expect_rejected(o, caps, "accelerator 0: unpartitioned but holds partitions", NULL);
        o = mixed_object(caps); /* over-charged: tsr_ledger_build makes it, the check refuses */
        json_object_set_new(status_acc(o, 0), "allocated", json_integer(2 * TSR_UNITS_PER_ACCEL));
        json_object_set_new(status_acc(o, 0), "remaining", json_integer(0));
        expect_rejected(o, caps, "accelerator 0: charged 3200000 units past its budget", NULL);
}

static void test_ledger_absent(void **state)
{
        struct tsr_accel_cap caps[2];
        struct tsr_accel_ledger out[2], untouched;
        struct fx_node nd;
        json_t *o;

        (void)state;
        tsr_ledger_reset(&untouched);
        mixed_node(&nd);
        o = mixed_object(caps); /* no status at all: before the first status write */
        json_object_del(o, "status");
        memset(out, 0x5a, sizeof(out));
        assert_int_equal(tsr_devices_object_ledger(o, caps, 2, out, NULL), 0);
        expect_ledger_equal(&out[0], &untouched, 0);
        expect_ledger_equal(&out[1], &untouched, 1);
        json_object_set_new(o, "status", json_object()); /* a status without groups */
        memset(out, 0x5a, sizeof(out));
        assert_int_equal(tsr_devices_object_ledger(o, caps, 2, out, NULL), 0);
        expect_ledger_equal(&out[1], &untouched, 1);
        json_object_set_new(o, "status", json_pack("{s:[]}", "groups"));
        assert_int_equal(tsr_devices_object_ledger(o, caps, 2, out, NULL), 0);
        expect_ledger_equal(&out[0], &untouched, 0);
        json_decref(o);

        o = mixed_object(caps); /* fewer accelerators: the listed one reads, the other is new */
        json_array_remove(at(o, "status.groups.0.accelerators"), 0);
        assert_int_equal(tsr_devices_object_ledger(o, caps, 2, out, NULL), 0);
        expect_ledger_equal(&out[0], &untouched, 0);
        expect_ledger_equal(&out[1], &nd.ledger[1], 1);
        json_decref(o);

        assert_int_equal(tsr_devices_object_ledger(o = json_object(), NULL, 0, NULL, NULL), 0);
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
            cmocka_unit_test(test_ledger_round_trip),
            cmocka_unit_test(test_ledger_spec_out_of_order),
            cmocka_unit_test(test_ledger_backtracking),
            cmocka_unit_test(test_ledger_rejected),
            cmocka_unit_test(test_ledger_absent),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
