/*
 * test_dm_publish.c - devicemanager/publish against the fake API server (tests/peers/
 * fake_apiserver.py) over TLS on loopback: Node status.capacity / allocatable, Node labels and
 * the Devices object, as the device manager of node-a (two H100s, GPU 1 in MIG mode) writes them.
 *
 * The Node starts as a kubelet would leave it: the device-plugin pools, cpu, a stale per-profile
 * key of ours, an unknown nvidia sub-key and another manufacturer's key; labels with a stale fit
 * label of ours, another manufacturer's fit label and a label of nobody's. In order:
 *   first publish     GET Node, status patch, labels patch, GET Devices (404), POST, status patch:
 *                     every wanted key in capacity and allocatable, the stale key nulled, the
 *                     pools and other keys untouched, the fit labels right, our stale label
 *                     gone, the Devices object equal to the codec's; merge patches only
 *   steady state      the same publish sends no request
 *   ledger change     keys, labels and Devices status follow; then steady again
 *   stale keys        a capability change drops the .partitioned.* keys from the Node and
 *                     patches the Devices spec
 *   presence gating   with the Node's .partitioned pool at 0 its keys are held back (and the
 *                     Node is read again on every call) until the pool comes up
 *   API errors        a failing Node status patch, then a failing Devices status patch: the
 *                     call fails, the record is unchanged, the next call writes
 *   Devices deleted   deleted behind a known record, or with a fresh record: created again
 *   bad arguments     a bad node name, another manufacturer's accelerators: no request
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "codec/devices_object.h"
#include "core/keys.h"
#include "core/node_keys.h"
#include "devicemanager/publish.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/kubeconfig.h"
#include "support/catalog_fixtures.h"

#include "fake_apiserver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE      "node-a"
#define NODE_PATH "/api/v1/nodes/" NODE
#define DEV_PATH  "/apis/worker.gpustack.ai/v1alpha1/devices/" NODE
#define H100      "NVIDIA H100 80GB HBM3"
#define MERGE     "application/merge-patch+json"

static struct {
        char dir[256];
        struct fake_apiserver fake;
        struct tsr_kube_client *client;
        struct tsr_dm_published last;
        struct fx_node nd;
} W;

/* ---- fixtures ----------------------------------------------------------------------------- */

/* node-a's accelerators: parted (bit i: MIG mode), slices slice records of 320000 on GPU 0,
 * parts 3g.40gb instances on GPU 1 (starts 4, then 0). */
static void accelerators(uint32_t parted, unsigned slices, unsigned parts)
{
        const struct tsr_product *p = fx_product(H100);
        struct tsr_alloc_record recs[8];
        size_t n = 0;

        for (unsigned i = 0; i < slices; i++)
                recs[n++] = (struct tsr_alloc_record){
                    .accel = 0, .mode = TSR_MODE_SLICED, .units = 320000, .profile = -1};
        for (unsigned i = 0; i < parts; i++)
                recs[n++] = (struct tsr_alloc_record){.accel = 1,
                                                      .mode = TSR_MODE_PARTITIONED,
                                                      .units = 800000,
                                                      .profile = fx_pidx(p, "3g.40gb"),
                                                      .start = i ? 0 : 4};
        fx_node_build(&W.nd, p, 2, parted, recs, n);
}

static int publish(void)
{
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        return tsr_dm_publish(W.client, NODE, W.nd.caps, W.nd.ledger, W.nd.n, &W.last, &diag);
}

/* Publishes and returns how many API requests the call made (it must succeed). */
static long publish_requests(void)
{
        long r0 = fake_stat(&W.fake, "requests");
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_dm_publish(W.client, NODE, W.nd.caps, W.nd.ledger, W.nd.n, &W.last, &diag);
        if (rc)
                fail_msg("publish: %s: %s", tsr_err_name(rc), diag.msg);
        if (diag.msg[0]) /* a diag is filled only on failure */
                fail_msg("publish succeeded but left a message: %s", diag.msg);
        return fake_stat(&W.fake, "requests") - r0;
}

static json_t *get(const char *path)
{
        struct tsr_diag diag;
        json_t *o = NULL;

        tsr_diag_clear(&diag);
        if (tsr_kube_client_get(W.fake.ctl, path, &o, NULL, &diag))
                fail_msg("GET %s: %s", path, diag.msg);
        return o;
}

static const char *node_str(json_t *node, const char *a, const char *b, const char *key)
{
        return json_string_value(
            json_object_get(json_object_get(json_object_get(node, a), b), key));
}

/* The node-capacity keys the fixture projects (name -> quantity), as publish must write them. */
static json_t *wanted_keys(bool partitioned_up)
{
        struct tsr_node_keys keys;
        json_t *want = json_object();

        assert_int_equal(tsr_node_keys_project(tsr_catalog_manufacturer_by_key("nvidia"), W.nd.caps,
                                               W.nd.ledger, W.nd.n, &keys, NULL),
                         0);
        for (size_t i = 0; i < keys.n; i++) {
                struct tsr_key_class kc;
                char s[TSR_QUANTITY_STR_MAX];
                struct tsr_quantity q =
                    tsr_quantity_from_int(keys.keys[i].capacity, TSR_QF_DECIMAL_SI);

                tsr_key_classify(keys.keys[i].name, &kc);
                if (kc.kind == TSR_KEY_SLICED || kc.kind == TSR_KEY_PARTITIONED ||
                    kc.kind == TSR_KEY_EXCLUSIVE || kc.kind == TSR_KEY_SHARED ||
                    kc.kind == TSR_KEY_VISIBILITY)
                        continue;
                if (!partitioned_up && tsr_key_family(kc.kind) == TSR_FAMILY_PARTITIONED)
                        continue;
                json_object_set_new(want, keys.keys[i].name,
                                    json_string(tsr_quantity_format(&q, s)));
        }
        return want;
}

/* Every node-capacity key of nvidia on the Node's map, name -> value. */
static json_t *ours_on(json_t *map)
{
        json_t *out = json_object(), *v;
        const char *k;

        json_object_foreach(map, k, v)
        {
                if (!strncmp(k, "nvidia.com/gpu.sliced.", 22) ||
                    !strncmp(k, "nvidia.com/gpu.partitioned.", 27))
                        json_object_set(out, k, v);
        }
        json_object_del(out, "nvidia.com/gpu.sliced.bogus");
        return out;
}

/* The Node holds exactly the wanted keys in capacity and allocatable. */
static void assert_node_keys(bool partitioned_up)
{
        json_t *node = get(NODE_PATH), *want = wanted_keys(partitioned_up);
        json_t *st = json_object_get(node, "status");
        json_t *cap = ours_on(json_object_get(st, "capacity"));
        json_t *alloc = ours_on(json_object_get(st, "allocatable"));

        if (!json_equal(cap, want) || !json_equal(alloc, want)) {
                char *a = json_dumps(cap, JSON_SORT_KEYS), *b = json_dumps(want, JSON_SORT_KEYS);

                fail_msg("node keys %s, want %s", a, b);
        }
        json_decref(cap);
        json_decref(alloc);
        json_decref(want);
        json_decref(node);
}

/* The Devices object on the server has the codec's spec and status. */
static void assert_devices(void)
{
        json_t *got = get(DEV_PATH), *want = NULL;

        assert_int_equal(
            tsr_devices_object_build(NODE, W.nd.caps, W.nd.ledger, W.nd.n, &want, NULL), 0);
        assert_true(json_equal(json_object_get(got, "spec"), json_object_get(want, "spec")));
        assert_true(json_equal(json_object_get(got, "status"), json_object_get(want, "status")));
        json_decref(got);
        json_decref(want);
}

static void set_pool(const char *value)
{
        char patch[256];

        snprintf(patch, sizeof(patch),
                 "{\"status\":{\"capacity\":{\"nvidia.com/gpu.partitioned\":\"%s\"},"
                 "\"allocatable\":{\"nvidia.com/gpu.partitioned\":\"%s\"}}}",
                 value, value);
        json_decref(fake_patch(&W.fake, NODE_PATH "/status", patch));
}

/* ---- setup -------------------------------------------------------------------------------- */

#define POOLS                                                                                      \
        "\"cpu\":\"8\",\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpu.shared\":\"10\","                 \
        "\"nvidia.com/gpu.sliced\":\"8\",\"nvidia.com/gpu.partitioned\":\"7\","                    \
        "\"device.gpustack.ai/nvidia.visibility\":\"1024\","                                       \
        "\"nvidia.com/gpu.partitioned.mig-9g.90gb\":\"3\",\"nvidia.com/gpu.sliced.bogus\":\"1\","  \
        "\"amd.com/gpu.sliced.units\":\"5\""

static int group_setup(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        const char *kc, *token;

        (void)state;
        fake_certs(W.dir, sizeof(W.dir));
        fake_start(&W.fake, W.dir, "t1", 0, NULL);
        token = fake_write_file(W.dir, "token", "t1\n");
        kc = fake_kubeconfig(&W.fake, "kubeconfig", token, NULL);
        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        if (tsr_kube_kubeconfig_load(&cfg, kc, NULL, &diag) ||
            tsr_kube_client_new(&cfg, NULL, &W.client, &diag))
                fail_msg("client: %s", diag.msg);
        tsr_kube_config_release(&cfg);

        json_decref(fake_create(
            &W.fake, "/api/v1/nodes",
            "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"" NODE "\","
            "\"labels\":{\"keep\":\"me\","
            "\"shared-free-cards.fit.gpustack.ai/nvidia-a100-sxm4-80gb\":\"2\","
            "\"sliced-max-free-units.fit.gpustack.ai/amd-mi300x\":\"9\"}}}"));
        json_decref(fake_patch(&W.fake, NODE_PATH "/status",
                               "{\"status\":{\"capacity\":{" POOLS "},\"allocatable\":{" POOLS
                               "}}}"));
        tsr_dm_published_init(&W.last, tsr_catalog_manufacturer_by_key("nvidia"));
        accelerators(0x2, 1, 1);
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        tsr_dm_published_release(&W.last);
        tsr_kube_client_free(W.client);
        fake_stop(&W.fake);
        fake_remove_dir(W.dir);
        return 0;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_first_publish(void **state)
{
        json_t *node, *stats, *types;

        (void)state;
        assert_int_equal(publish_requests(), 6);
        assert_node_keys(true);
        node = get(NODE_PATH);
        /* The pools, cpu, unknown and foreign keys: untouched; the stale profile key: gone. */
        assert_string_equal(node_str(node, "status", "capacity", "nvidia.com/gpu"), "1");
        assert_string_equal(node_str(node, "status", "capacity", "nvidia.com/gpu.shared"), "10");
        assert_string_equal(node_str(node, "status", "capacity", "nvidia.com/gpu.sliced"), "8");
        assert_string_equal(node_str(node, "status", "allocatable", "nvidia.com/gpu.partitioned"),
                            "7");
        assert_string_equal(
            node_str(node, "status", "capacity", "device.gpustack.ai/nvidia.visibility"), "1024");
        assert_string_equal(node_str(node, "status", "capacity", "cpu"), "8");
        assert_string_equal(node_str(node, "status", "capacity", "nvidia.com/gpu.sliced.bogus"),
                            "1");
        assert_string_equal(node_str(node, "status", "allocatable", "amd.com/gpu.sliced.units"),
                            "5");
        assert_null(node_str(node, "status", "capacity", "nvidia.com/gpu.partitioned.mig-9g.90gb"));
        assert_null(
            node_str(node, "status", "allocatable", "nvidia.com/gpu.partitioned.mig-9g.90gb"));
        assert_string_equal(node_str(node, "status", "capacity", "nvidia.com/gpu.sliced.units"),
                            "1600k");
        /* Labels: ours set, our stale one gone, the others kept. */
        assert_string_equal(node_str(node, "metadata", "labels",
                                     "sliced-max-free-units.fit.gpustack.ai/nvidia-h100-80gb-hbm3"),
                            "1280000");
        assert_string_equal(node_str(node, "metadata", "labels",
                                     "shared-free-cards.fit.gpustack.ai/nvidia-h100-80gb-hbm3"),
                            "0");
        assert_null(node_str(node, "metadata", "labels",
                             "shared-free-cards.fit.gpustack.ai/nvidia-a100-sxm4-80gb"));
        assert_string_equal(node_str(node, "metadata", "labels",
                                     "sliced-max-free-units.fit.gpustack.ai/amd-mi300x"),
                            "9");
        assert_string_equal(node_str(node, "metadata", "labels", "keep"), "me");
        json_decref(node);
        assert_devices();

        stats = fake_stats(&W.fake);
        types = json_object_get(stats, "patch_types");
        assert_int_equal(json_object_size(types), 1);
        assert_int_equal(json_integer_value(json_object_get(types, MERGE)), 1 + 3); /* setup's */
        json_decref(stats);
}

static void test_steady_state(void **state)
{
        (void)state;
        assert_int_equal(publish_requests(), 0);
        assert_int_equal(publish_requests(), 0);
}

static void test_ledger_change(void **state)
{
        json_t *node;

        (void)state;
        accelerators(0x2, 3, 2);
        /* GET Node, status patch (per-profile keys move), labels patch, Devices status patch. */
        assert_int_equal(publish_requests(), 4);
        assert_node_keys(true);
        node = get(NODE_PATH);
        assert_string_equal(node_str(node, "metadata", "labels",
                                     "sliced-max-free-units.fit.gpustack.ai/nvidia-h100-80gb-hbm3"),
                            "640000");
        json_decref(node);
        assert_devices();
        assert_int_equal(publish_requests(), 0);
}

static void test_stale_keys(void **state)
{
        json_t *node;

        (void)state;
        accelerators(0x0, 3, 0); /* GPU 1 leaves MIG mode: no partitioned population */
        assert_true(publish_requests() > 0);
        assert_node_keys(true);
        node = get(NODE_PATH);
        assert_null(node_str(node, "status", "capacity", "nvidia.com/gpu.partitioned.units"));
        assert_null(
            node_str(node, "status", "allocatable", "nvidia.com/gpu.partitioned.mig-3g.40gb"));
        assert_string_equal(node_str(node, "status", "capacity", "nvidia.com/gpu.partitioned"),
                            "7");
        json_decref(node);
        assert_devices();
        assert_int_equal(publish_requests(), 0);
}

static void test_presence_gating(void **state)
{
        (void)state;
        set_pool("0");
        accelerators(0x2, 1, 1);
        assert_true(publish_requests() > 0);
        assert_node_keys(false); /* .partitioned.* held back, .sliced.* written */
        assert_devices();
        /* Held back: the next calls read the Node again, and write nothing else. */
        assert_int_equal(publish_requests(), 1);
        assert_int_equal(publish_requests(), 1);
        set_pool("7");
        assert_int_equal(publish_requests(), 2); /* GET Node, status patch */
        assert_node_keys(true);
        assert_int_equal(publish_requests(), 0);
}

/* A deep copy of the record's JSON, to compare after a failed call. */
static void assert_record_is(const json_t *const saved[4], bool node_known)
{
        assert_true(json_equal(W.last.capacity, (json_t *)(uintptr_t)saved[0]));
        assert_true(json_equal(W.last.labels, (json_t *)(uintptr_t)saved[1]));
        assert_true(json_equal(W.last.spec, (json_t *)(uintptr_t)saved[2]));
        assert_true(json_equal(W.last.status, (json_t *)(uintptr_t)saved[3]));
        assert_int_equal(W.last.node_known, node_known);
}

static void failing_round(const char *match, unsigned slices, unsigned parts)
{
        json_t *saved[4] = {json_deep_copy(W.last.capacity), json_deep_copy(W.last.labels),
                            json_deep_copy(W.last.spec), json_deep_copy(W.last.status)};
        bool known = W.last.node_known;
        char body[256];

        snprintf(body, sizeof(body), "{\"status\":500,\"count\":1,\"match\":\"%s\"}", match);
        json_decref(fake_control(&W.fake, "fail", body));
        accelerators(0x2, slices, parts);
        assert_int_equal(publish(), TSR_EIO);
        assert_record_is((const json_t *const *)saved, known);
        assert_true(publish_requests() > 0);
        assert_node_keys(true);
        assert_devices();
        assert_int_equal(publish_requests(), 0);
        for (int i = 0; i < 4; i++)
                json_decref(saved[i]);
}

static void test_api_errors(void **state)
{
        (void)state;
        failing_round(NODE_PATH "/status", 1, 2); /* a per-profile key moves */
        failing_round(DEV_PATH "/status", 2, 2);
}

static void test_devices_deleted(void **state)
{
        (void)state;
        /* Behind a known record: the status patch meets a 404, the object is created again. */
        fake_delete(&W.fake, DEV_PATH);
        accelerators(0x2, 1, 1);
        assert_true(publish_requests() > 0);
        assert_devices();
        /* A fresh record (a restart): everything read again, only the Devices object written. */
        fake_delete(&W.fake, DEV_PATH);
        tsr_dm_published_release(&W.last);
        tsr_dm_published_init(&W.last, tsr_catalog_manufacturer_by_key("nvidia"));
        assert_int_equal(publish_requests(), 4); /* GET Node, GET Devices, POST, status patch */
        assert_devices();
        assert_node_keys(true);
        assert_int_equal(publish_requests(), 0);
}

static void test_bad_arguments(void **state)
{
        struct tsr_dm_published amd;
        struct tsr_diag diag;
        long r0 = fake_stat(&W.fake, "requests");

        (void)state;
        assert_int_equal(
            tsr_dm_publish(W.client, "Node_A", W.nd.caps, W.nd.ledger, W.nd.n, &W.last, &diag),
            TSR_EINVAL);
        assert_int_equal(
            tsr_dm_publish(W.client, NULL, W.nd.caps, W.nd.ledger, W.nd.n, &W.last, &diag),
            TSR_EINVAL);
        tsr_dm_published_init(&amd, tsr_catalog_manufacturer_by_key("amd"));
        assert_int_equal(
            tsr_dm_publish(W.client, NODE, W.nd.caps, W.nd.ledger, W.nd.n, &amd, &diag),
            TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "not amd's"));
        tsr_dm_published_release(&amd);
        assert_int_equal(fake_stat(&W.fake, "requests"), r0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_first_publish),   cmocka_unit_test(test_steady_state),
            cmocka_unit_test(test_ledger_change),   cmocka_unit_test(test_stale_keys),
            cmocka_unit_test(test_presence_gating), cmocka_unit_test(test_api_errors),
            cmocka_unit_test(test_devices_deleted), cmocka_unit_test(test_bad_arguments),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
