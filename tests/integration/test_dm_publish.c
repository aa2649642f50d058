/*
 * test_dm_publish.c - devicemanager/publish against a real kube-apiserver (tests/cluster/
 * controlplane.py through cluster_apiserver.h, tessera's CRDs installed) over TLS on loopback:
 * Node status.capacity / allocatable, Node labels and the Devices object, as the device manager
 * of node-a (two H100s, GPU 1 in MIG mode) writes them. The requests a call makes are counted by
 * the API server itself (apiserver_request_total: verb, resource, subresource, code). Only the
 * injected 500s run on the fake API server (tests/peers/fake_apiserver.py), with its own node-a.
 *
 * The Node starts as a kubelet would leave it: the device-plugin pools, cpu, a stale per-profile
 * key of ours, an unknown nvidia sub-key and another manufacturer's key; labels with a stale fit
 * label of ours, another manufacturer's fit label and a label of nobody's. In order:
 *   first publish     GET Node, status patch, labels patch, GET Devices (404), POST, status patch,
 *                     exactly, none of them server-side apply: every wanted key in capacity and
 *                     allocatable as the real server canonicalizes quantities, the stale key
 *                     nulled, the pools and other keys untouched, the fit labels right, our
 *                     stale label gone, the Devices object equal to the codec's after the real
 *                     CRD's validation and pruning
 *   steady state      the same publish sends no request
 *   ledger change     keys, labels and Devices status follow; then steady again
 *   stale keys        a capability change drops the .partitioned.* keys from the Node and
 *                     patches the Devices spec
 *   presence gating   with the Node's .partitioned pool at 0 its keys are held back (and the
 *                     Node is read again on every call) until the pool comes up
 *   API errors (fake) a failing Node status patch, then a failing Devices status patch: the
 *                     call fails, the record is unchanged, the next call writes; the fake also
 *                     shows that every patch is a merge patch (its Content-Type counters)
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

#include "cluster_apiserver.h"
#include "fake_apiserver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE      "node-a"
#define NODE_PATH "/api/v1/nodes/" NODE
#define DEV_PATH  "/apis/worker.gpustack.ai/v1alpha1/devices/" NODE
#define H100      "NVIDIA H100 80GB HBM3"
#define MERGE     "application/merge-patch+json"

/* A server (real or fake), the publisher's client and its record. */
struct world {
        struct cluster_apiserver *real; /* exactly one of real and fake */
        struct fake_apiserver *fake;
        char dir[256]; /* the fake's certificates and files */
        struct tsr_kube_client *client;
        struct tsr_dm_published last;
};

static struct cluster_apiserver C;
static struct fake_apiserver F;
static struct world R = {.real = &C}, FW = {.fake = &F};
static struct fx_node nd; /* the accelerators the next publish projects */

/* The resources whose requests count as the publisher's. */
static const char *const publisher_resources[] = {"nodes", "devices", NULL};

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
        fx_node_build(&nd, p, 2, parted, recs, n);
        /* The fixture names every card "GPU"; the real CRD keys spec.groups[].accelerators by id
         * (a list-map), so two cards need UUIDs of their own, as NVML reports them. */
        for (size_t i = 0; i < nd.n; i++)
                snprintf(nd.caps[i].uuid, sizeof(nd.caps[i].uuid),
                         "GPU-5a6b7c8d-0000-4000-8000-00000000000%zu", i);
}

static int publish(struct world *w)
{
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        return tsr_dm_publish(w->client, NODE, nd.caps, nd.ledger, nd.n, &w->last, &diag);
}

/* Publishes (it must succeed) and returns the requests it made, counted by the server. */
static json_t *publish_delta(struct world *w)
{
        json_t *before = w->real ? cluster_request_counts(w->real) : NULL, *delta;
        long r0 = w->real ? 0 : fake_stat(w->fake, "requests");
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_dm_publish(w->client, NODE, nd.caps, nd.ledger, nd.n, &w->last, &diag);
        if (rc)
                fail_msg("publish: %s: %s", tsr_err_name(rc), diag.msg);
        if (diag.msg[0]) /* a diag is filled only on failure */
                fail_msg("publish succeeded but left a message: %s", diag.msg);
        if (!w->real)
                return json_pack("{s:I}", "requests",
                                 (json_int_t)(fake_stat(w->fake, "requests") - r0));
        delta = cluster_request_delta(w->real, before, publisher_resources);
        json_decref(before);
        return delta;
}

/* Publishes and returns how many API requests the call made (it must succeed). */
static long publish_requests(struct world *w)
{
        json_t *delta = publish_delta(w);
        long n = cluster_delta_total(delta);

        json_decref(delta);
        return n;
}

/* The delta holds exactly want ("KEY=N" strings, NULL-terminated). */
static void assert_delta(json_t *delta, const char *const *want)
{
        json_t *expect = json_object();
        char *got, *exp;

        for (; *want; want++) {
                const char *eq = strrchr(*want, '=');
                char key[128];

                snprintf(key, sizeof(key), "%.*s", (int)(eq - *want), *want);
                json_object_set_new(expect, key, json_integer(atol(eq + 1)));
        }
        if (!json_equal(delta, expect)) {
                got = json_dumps(delta, JSON_SORT_KEYS);
                exp = json_dumps(expect, JSON_SORT_KEYS);
                fail_msg("requests %s, want %s", got, exp);
        }
        json_decref(expect);
}

static json_t *get(struct world *w, const char *path)
{
        struct tsr_diag diag;
        json_t *o = NULL;

        tsr_diag_clear(&diag);
        if (tsr_kube_client_get(w->real ? w->real->ctl : w->fake->ctl, path, &o, NULL, &diag))
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

        assert_int_equal(tsr_node_keys_project(tsr_catalog_manufacturer_by_key("nvidia"), nd.caps,
                                               nd.ledger, nd.n, &keys, NULL),
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
static void assert_node_keys(struct world *w, bool partitioned_up)
{
        json_t *node = get(w, NODE_PATH), *want = wanted_keys(partitioned_up);
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
static void assert_devices(struct world *w)
{
        json_t *got = get(w, DEV_PATH), *want = NULL;

        assert_int_equal(tsr_devices_object_build(NODE, nd.caps, nd.ledger, nd.n, &want, NULL), 0);
        for (const char *const *part = (const char *const[]){"spec", "status", NULL}; *part;
             part++) {
                if (!json_equal(json_object_get(got, *part), json_object_get(want, *part))) {
                        char *a = json_dumps(json_object_get(got, *part), JSON_SORT_KEYS);
                        char *b = json_dumps(json_object_get(want, *part), JSON_SORT_KEYS);

                        fail_msg("Devices %s on the server %s, the codec's %s", *part, a, b);
                }
        }
        json_decref(got);
        json_decref(want);
}

static void set_pool(struct world *w, const char *value)
{
        char patch[256];

        snprintf(patch, sizeof(patch),
                 "{\"status\":{\"capacity\":{\"nvidia.com/gpu.partitioned\":\"%s\"},"
                 "\"allocatable\":{\"nvidia.com/gpu.partitioned\":\"%s\"}}}",
                 value, value);
        json_decref(w->real ? cluster_patch(w->real, NODE_PATH "/status", patch)
                            : fake_patch(w->fake, NODE_PATH "/status", patch));
}

/* ---- setup -------------------------------------------------------------------------------- */

#define POOLS                                                                                      \
        "\"cpu\":\"8\",\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpu.shared\":\"10\","                 \
        "\"nvidia.com/gpu.sliced\":\"8\",\"nvidia.com/gpu.partitioned\":\"7\","                    \
        "\"device.gpustack.ai/nvidia.visibility\":\"1024\","                                       \
        "\"nvidia.com/gpu.partitioned.mig-9g.90gb\":\"3\",\"nvidia.com/gpu.sliced.bogus\":\"1\","  \
        "\"amd.com/gpu.sliced.units\":\"5\""

#define NODE_JSON                                                                                  \
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"" NODE "\","            \
        "\"labels\":{\"keep\":\"me\","                                                             \
        "\"shared-free-cards.fit.gpustack.ai/nvidia-a100-sxm4-80gb\":\"2\","                       \
        "\"sliced-max-free-units.fit.gpustack.ai/amd-mi300x\":\"9\"}}}"
#define NODE_STATUS "{\"status\":{\"capacity\":{" POOLS "},\"allocatable\":{" POOLS "}}}"

static void world_client(struct world *w, const char *kubeconfig)
{
        struct tsr_kube_config cfg;
        struct tsr_diag diag;

        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        if (tsr_kube_kubeconfig_load(&cfg, kubeconfig, NULL, &diag) ||
            tsr_kube_client_new(&cfg, NULL, &w->client, &diag))
                fail_msg("client: %s", diag.msg);
        tsr_kube_config_release(&cfg);
        tsr_dm_published_init(&w->last, tsr_catalog_manufacturer_by_key("nvidia"));
}

static int group_setup(void **state)
{
        struct cluster_opts o = {.suite = "dm-publish", .crds = true};
        const char *kc, *token;

        (void)state;
        cluster_start(&C, &o);
        token = cluster_write_file(&C, "token", C.token);
        kc = cluster_kubeconfig(&C, "kubeconfig", token, NULL, NULL);
        world_client(&R, kc);
        json_decref(cluster_create(&C, "/api/v1/nodes", NODE_JSON));
        json_decref(cluster_patch(&C, NODE_PATH "/status", NODE_STATUS));

        fake_certs(FW.dir, sizeof(FW.dir));
        fake_start(&F, FW.dir, "t1", 0, NULL);
        token = fake_write_file(FW.dir, "token", "t1\n");
        kc = fake_kubeconfig(&F, "kubeconfig", token, NULL);
        world_client(&FW, kc);
        json_decref(fake_create(&F, "/api/v1/nodes", NODE_JSON));
        json_decref(fake_patch(&F, NODE_PATH "/status", NODE_STATUS));
        accelerators(0x2, 1, 1);
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        tsr_dm_published_release(&R.last);
        tsr_kube_client_free(R.client);
        tsr_dm_published_release(&FW.last);
        tsr_kube_client_free(FW.client);
        fake_stop(&F);
        fake_remove_dir(FW.dir);
        return 0; /* main stops the control plane, knowing whether a case failed */
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_first_publish(void **state)
{
        json_t *node, *delta;

        (void)state;
        delta = publish_delta(&R);
        assert_delta(delta, (const char *const[]){"GET nodes 200=1", "PATCH nodes/status 200=1",
                                                  "PATCH nodes 200=1", "GET devices 404=1",
                                                  "POST devices 201=1",
                                                  "PATCH devices/status 200=1", NULL});
        json_decref(delta);
        assert_node_keys(&R, true);
        node = get(&R, NODE_PATH);
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
        assert_devices(&R);
}

static void test_steady_state(void **state)
{
        (void)state;
        assert_int_equal(publish_requests(&R), 0);
        assert_int_equal(publish_requests(&R), 0);
}

static void test_ledger_change(void **state)
{
        json_t *node, *delta;

        (void)state;
        accelerators(0x2, 3, 2);
        /* GET Node, status patch (per-profile keys move), labels patch, Devices status patch. */
        delta = publish_delta(&R);
        assert_delta(delta, (const char *const[]){"GET nodes 200=1", "PATCH nodes/status 200=1",
                                                  "PATCH nodes 200=1", "PATCH devices/status 200=1",
                                                  NULL});
        json_decref(delta);
        assert_node_keys(&R, true);
        node = get(&R, NODE_PATH);
        assert_string_equal(node_str(node, "metadata", "labels",
                                     "sliced-max-free-units.fit.gpustack.ai/nvidia-h100-80gb-hbm3"),
                            "640000");
        json_decref(node);
        assert_devices(&R);
        assert_int_equal(publish_requests(&R), 0);
}

static void test_stale_keys(void **state)
{
        json_t *node;

        (void)state;
        accelerators(0x0, 3, 0); /* GPU 1 leaves MIG mode: no partitioned population */
        assert_true(publish_requests(&R) > 0);
        assert_node_keys(&R, true);
        node = get(&R, NODE_PATH);
        assert_null(node_str(node, "status", "capacity", "nvidia.com/gpu.partitioned.units"));
        assert_null(
            node_str(node, "status", "allocatable", "nvidia.com/gpu.partitioned.mig-3g.40gb"));
        assert_string_equal(node_str(node, "status", "capacity", "nvidia.com/gpu.partitioned"),
                            "7");
        json_decref(node);
        assert_devices(&R);
        assert_int_equal(publish_requests(&R), 0);
}

static void test_presence_gating(void **state)
{
        json_t *delta;

        (void)state;
        set_pool(&R, "0");
        accelerators(0x2, 1, 1);
        assert_true(publish_requests(&R) > 0);
        assert_node_keys(&R, false); /* .partitioned.* held back, .sliced.* written */
        assert_devices(&R);
        /* Held back: the next calls read the Node again, and write nothing else. */
        for (int i = 0; i < 2; i++) {
                delta = publish_delta(&R);
                assert_delta(delta, (const char *const[]){"GET nodes 200=1", NULL});
                json_decref(delta);
        }
        set_pool(&R, "7");
        delta = publish_delta(&R);
        assert_delta(delta,
                     (const char *const[]){"GET nodes 200=1", "PATCH nodes/status 200=1", NULL});
        json_decref(delta);
        assert_node_keys(&R, true);
        assert_int_equal(publish_requests(&R), 0);
}

/* A deep copy of the record's JSON, to compare after a failed call. */
static void assert_record_is(struct world *w, const json_t *const saved[4], bool node_known)
{
        assert_true(json_equal(w->last.capacity, (json_t *)(uintptr_t)saved[0]));
        assert_true(json_equal(w->last.labels, (json_t *)(uintptr_t)saved[1]));
        assert_true(json_equal(w->last.spec, (json_t *)(uintptr_t)saved[2]));
        assert_true(json_equal(w->last.status, (json_t *)(uintptr_t)saved[3]));
        assert_int_equal(w->last.node_known, node_known);
}

static void failing_round(struct world *w, const char *match, unsigned slices, unsigned parts)
{
        json_t *saved[4] = {json_deep_copy(w->last.capacity), json_deep_copy(w->last.labels),
                            json_deep_copy(w->last.spec), json_deep_copy(w->last.status)};
        bool known = w->last.node_known;
        char body[256];

        snprintf(body, sizeof(body), "{\"status\":500,\"count\":1,\"match\":\"%s\"}", match);
        json_decref(fake_control(w->fake, "fail", body));
        accelerators(0x2, slices, parts);
        assert_int_equal(publish(w), TSR_EIO);
        assert_record_is(w, (const json_t *const *)saved, known);
        assert_true(publish_requests(w) > 0);
        assert_node_keys(w, true);
        assert_devices(w);
        assert_int_equal(publish_requests(w), 0);
        for (int i = 0; i < 4; i++)
                json_decref(saved[i]);
}

/* Injected 500s: the fake, with a node-a of its own and its own record. */
static void test_api_errors(void **state)
{
        json_t *stats, *types;

        (void)state;
        accelerators(0x2, 1, 1);
        assert_int_equal(publish_requests(&FW), 6);
        assert_node_keys(&FW, true);
        assert_devices(&FW);
        /* Merge patches only (the setup's one and the publisher's three). */
        stats = fake_stats(&F);
        types = json_object_get(stats, "patch_types");
        assert_int_equal(json_object_size(types), 1);
        assert_int_equal(json_integer_value(json_object_get(types, MERGE)), 1 + 3);
        json_decref(stats);

        failing_round(&FW, NODE_PATH "/status", 1, 2); /* a per-profile key moves */
        failing_round(&FW, DEV_PATH "/status", 2, 2);
}

static void test_devices_deleted(void **state)
{
        json_t *delta;

        (void)state;
        /*
         * Behind a known record: the ledger changes, the status patch meets a 404, the object is
         * read (404) and created again with its status.
         */
        cluster_delete(&C, DEV_PATH);
        accelerators(0x2, 2, 2);
        delta = publish_delta(&R);
        assert_delta(delta, (const char *const[]){"GET nodes 200=1", "PATCH nodes/status 200=1",
                                                  "PATCH nodes 200=1", "PATCH devices/status 404=1",
                                                  "GET devices 404=1", "POST devices 201=1",
                                                  "PATCH devices/status 200=1", NULL});
        json_decref(delta);
        assert_devices(&R);
        /* A fresh record (a restart): everything read again, only the Devices object written. */
        cluster_delete(&C, DEV_PATH);
        tsr_dm_published_release(&R.last);
        tsr_dm_published_init(&R.last, tsr_catalog_manufacturer_by_key("nvidia"));
        delta = publish_delta(&R);
        assert_delta(delta, (const char *const[]){"GET nodes 200=1", "GET devices 404=1",
                                                  "POST devices 201=1",
                                                  "PATCH devices/status 200=1", NULL});
        json_decref(delta);
        assert_devices(&R);
        assert_node_keys(&R, true);
        assert_int_equal(publish_requests(&R), 0);
}

static void test_bad_arguments(void **state)
{
        struct tsr_dm_published amd;
        struct tsr_diag diag;
        json_t *before = cluster_request_counts(&C), *delta;

        (void)state;
        assert_int_equal(
            tsr_dm_publish(R.client, "Node_A", nd.caps, nd.ledger, nd.n, &R.last, &diag),
            TSR_EINVAL);
        assert_int_equal(tsr_dm_publish(R.client, NULL, nd.caps, nd.ledger, nd.n, &R.last, &diag),
                         TSR_EINVAL);
        tsr_dm_published_init(&amd, tsr_catalog_manufacturer_by_key("amd"));
        assert_int_equal(tsr_dm_publish(R.client, NODE, nd.caps, nd.ledger, nd.n, &amd, &diag),
                         TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "not amd's"));
        tsr_dm_published_release(&amd);
        delta = cluster_request_delta(&C, before, publisher_resources);
        assert_int_equal(cluster_delta_total(delta), 0);
        json_decref(delta);
        json_decref(before);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_first_publish),   cmocka_unit_test(test_steady_state),
            cmocka_unit_test(test_ledger_change),   cmocka_unit_test(test_stale_keys),
            cmocka_unit_test(test_presence_gating), cmocka_unit_test(test_api_errors),
            cmocka_unit_test(test_devices_deleted), cmocka_unit_test(test_bad_arguments),
        };
        int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);

        cluster_stop(&C, failed != 0);
        return failed;
}
