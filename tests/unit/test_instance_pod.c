/*
 * test_instance_pod.c - codec/instance_pod: the Pod and Service of an Instance, its allocations
 * and its status.
 *
 * The InstanceTypes are the ones the controller writes (codec/instancetype_object over a node of
 * eight H100 80GB, GPUs 0-1 in MIG mode, and the generic CPU pool), and the Instances are first
 * defaulted by the Instance webhook (webhook/instance.c), as on a cluster. Each family is built and
 * its Pod compared key by key: whole GPUs, a slice with and without a cores percentage, a
 * partition, CPU-only; overcommit on and off, with and without the strict-quota rule; SSH on and
 * off (the sidecar's visibility request, the key Secret, shareProcessNamespace); ports and none
 * (the Service); nodeName as a hostname selector; the runtime class on accelerated types only.
 * The host limits sized here for an Instance the webhook never saw equal the webhook's own, for
 * every family. Bad input is refused naming the field: an InstanceType without status (ESTALE),
 * an unoffered profile (with the offered set), counts other than 1, a profile with a slice
 * percentage, an accelerator on a CPU-only type, a manufacturer without partitions, a missing
 * image or volume, a model volume. The allocations merge groups and drop fields the CRD lacks;
 * the status reads Ready, Starting (gated, unscheduled), Failed, the addresses and the node
 * ports. An allocation-failure loop ends every build in the result or TSR_ENOMEM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/instance_pod.h"
#include "codec/instancetype_object.h"
#include "core/chain.h"
#include "core/instancetype.h"
#include "webhook/instance.h"

#include "support/catalog_fixtures.h"
#include "support/failing_alloc.h"
#include "support/json_text.h"
#include "support/review_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H100_NAME "NVIDIA H100 80GB HBM3"
#define H100_POOL "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
#define CPU_POOL  "gpustack--generic-linux-amd64"
#define UID       "0f1e2d3c-0000-4000-8000-000000000001"

static json_t *h100_type, *cpu_type;

/* ---- fixtures ----------------------------------------------------------------------------- */

static struct tsr_chain_pool pool_of(const struct tsr_product *p)
{
        struct tsr_chain_pool pool;

        memset(&pool, 0, sizeof(pool));
        pool.product = p;
        snprintf(pool.os, sizeof(pool.os), "linux");
        snprintf(pool.arch, sizeof(pool.arch), "amd64");
        assert_int_equal(tsr_instancetype_name(p, "linux", "amd64", pool.name, sizeof(pool.name)),
                         0);
        tsr_instancetype_entrance(pool.name, pool.entrance);
        return pool;
}

static json_t *lookup_type(void *ctx, const char *name)
{
        (void)ctx;
        if (!strcmp(name, H100_POOL))
                return json_incref(h100_type);
        if (!strcmp(name, CPU_POOL))
                return json_incref(cpu_type);
        return NULL;
}

static int setup(void **state)
{
        static struct fx_node nd;
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_chain_pool hp = pool_of(h100), cp = pool_of(NULL);
        struct tsr_pool_views v, none;
        struct tsr_pool_node pn;
        struct tsr_view cpu = {64, 16, 64};

        (void)state;
        fx_node_build(&nd, h100, 8, 0x03, NULL, 0);
        pn = (struct tsr_pool_node){nd.caps, nd.ledger, nd.n};
        tsr_views_compute(&pn, 1, &v);
        h100_type = tsr_instancetype_object_build(&hp, &v, &(struct tsr_view){0}, NULL);
        memset(&none, 0, sizeof(none));
        cpu_type = tsr_instancetype_object_build(&cp, &none, &cpu, NULL);
        assert_non_null(h100_type);
        assert_non_null(cpu_type);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(h100_type, "metadata"), "name")),
            H100_POOL);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(cpu_type, "metadata"), "name")),
            CPU_POOL);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        json_decref(h100_type);
        json_decref(cpu_type);
        return 0;
}

/* An Instance "i" in team-a of type with the given extra spec members and resources. */
static json_t *instance(const char *type, const char *res, const char *extra)
{
        char text[2048];

        snprintf(text, sizeof(text),
                 "{\"apiVersion\":\"worker.gpustack.ai/v1alpha1\",\"kind\":\"Instance\","
                 "\"metadata\":{\"name\":\"i\",\"namespace\":\"team-a\",\"uid\":\"" UID "\"},"
                 "\"spec\":{\"type\":\"%s\",\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\","
                 "\"86400\"],\"volume\":{\"ephemeral\":{\"capacity\":\"1Gi\"}}%s%s%s%s}}",
                 type, res ? ",\"resources\":{" : "", res ? res : "", res ? "}" : "",
                 extra ? extra : "");
        return json_fx_load(text);
}

/* inst after the Instance webhook's defaulting (CREATE) with overcommit oc. */
static json_t *defaulted(json_t *inst, bool oc)
{
        struct tsr_webhook_lookup l;
        struct tsr_verdict v;
        struct tsr_diag diag;
        char *text = json_fx_dump(inst);
        json_t *out;

        tsr_webhook_lookup_init(&l);
        l.instancetype = lookup_type;
        l.settings.value[TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT] = oc;
        assert_int_equal(review_fx_run(tsr_webhook_instance_mutate, &l, "CREATE", "team-a", text,
                                       NULL, &v, &diag),
                         0);
        free(text);
        if (!v.allowed)
                fail_msg("the webhook refused the fixture: %s", v.message);
        assert_non_null(v.patched);
        out = v.patched;
        json_decref(inst);
        return out;
}

static struct tsr_instance_pod_opts opts(bool overcommit, bool strict)
{
        struct tsr_instance_pod_opts o;

        memset(&o, 0, sizeof(o));
        tsr_settings_defaults(&o.settings);
        o.settings.value[TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT] = overcommit;
        o.strict_quota = strict;
        o.runtime_class = "nvidia";
        return o;
}

static json_t *at(json_t *o, const char *path)
{
        char buf[256], *save = NULL, *tok;

        snprintf(buf, sizeof(buf), "%s", path);
        for (tok = strtok_r(buf, "|", &save); tok && o; tok = strtok_r(NULL, "|", &save)) {
                char *end;
                long idx = strtol(tok, &end, 10);

                o = *end || end == tok ? json_object_get(o, tok) : json_array_get(o, (size_t)idx);
        }
        return o;
}

/* The string at a '|'-separated path (array indexes as numbers), "" when absent. */
static const char *s(json_t *o, const char *path)
{
        const char *v = json_string_value(at(o, path));

        return v ? v : "";
}

static void expect_json(json_t *got, const char *want_text, const char *what)
{
        json_t *want = json_fx_load(want_text);

        if (!json_equal(got, want)) {
                char *g = json_fx_dump(got);

                fail_msg("%s: got %s, want %s", what, g ? g : "(null)", want_text);
        }
        json_decref(want);
}

/* Builds inst (taken) against type; fails unless it succeeds. */
static void build(json_t *inst, json_t *type, struct tsr_instance_pod_opts o, json_t **pod,
                  json_t **svc)
{
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        *pod = *svc = (json_t *)1;
        if (tsr_instance_pod_build(inst, type, &o, pod, svc, &diag))
                fail_msg("build: %s", diag.msg);
        json_decref(inst);
}

/* Builds inst (taken) and expects rc with a message containing needle; nothing written. */
static void refused(json_t *inst, json_t *type, int rc, const char *needle)
{
        struct tsr_instance_pod_opts o = opts(true, true);
        json_t *pod = (json_t *)1, *svc = (json_t *)1;
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        assert_int_equal(tsr_instance_pod_build(inst, type, &o, &pod, &svc, &diag), rc);
        assert_ptr_equal(pod, (json_t *)1);
        assert_ptr_equal(svc, (json_t *)1);
        if (!strstr(diag.msg, needle))
                fail_msg("message \"%s\" lacks \"%s\"", diag.msg, needle);
        json_decref(inst);
}

/* ---- the families --------------------------------------------------------------------------- */

static void test_whole(void **state)
{
        json_t *pod, *svc, *c;
        char entrance[40];

        (void)state;
        build(defaulted(instance(H100_POOL, "\"accelerator\":\"2\"", NULL), true), h100_type,
              opts(true, true), &pod, &svc);
        tsr_instancetype_entrance(H100_POOL, entrance);
        assert_null(svc);
        /* metadata: name, namespace, the queue and instance labels, the owner */
        expect_json(at(pod, "metadata"),
                    "{\"name\":\"i\",\"namespace\":\"team-a\",\"labels\":{"
                    "\"worker.gpustack.ai/instance\":\"" UID "\","
                    "\"kueue.x-k8s.io/queue-name\":\"gpustack-fnv64-e4768a65ca0ce96b\"},"
                    "\"ownerReferences\":[{\"apiVersion\":\"worker.gpustack.ai/v1alpha1\","
                    "\"kind\":\"Instance\",\"name\":\"i\",\"uid\":\"" UID "\","
                    "\"controller\":true}]}",
                    "metadata");
        assert_string_equal(s(pod, "metadata|labels|kueue.x-k8s.io/queue-name"), entrance);
        assert_true(json_is_true(at(pod, "spec|hostIPC")));
        assert_true(json_is_false(at(pod, "spec|automountServiceAccountToken")));
        assert_null(at(pod, "spec|shareProcessNamespace"));
        assert_null(at(pod, "spec|nodeSelector"));
        assert_string_equal(s(pod, "spec|runtimeClassName"), "nvidia");
        assert_int_equal(json_array_size(at(pod, "spec|containers")), 1);
        c = at(pod, "spec|containers|0");
        assert_string_equal(s(c, "name"), "main");
        assert_string_equal(s(c, "image"), "ubuntu:24.04");
        assert_string_equal(s(c, "imagePullPolicy"), "IfNotPresent");
        expect_json(at(c, "command"), "[\"sleep\",\"86400\"]", "command");
        /* 2 whole GPUs; the webhook sized 2 x (12 cores, 192Gi); strict quota: requests 0 */
        expect_json(at(c, "resources"),
                    "{\"limits\":{\"cpu\":\"24\",\"memory\":\"384Gi\",\"ephemeral-storage\":"
                    "\"15Gi\",\"nvidia.com/gpu\":\"2\"},\"requests\":{\"cpu\":\"0\",\"memory\":"
                    "\"0\",\"ephemeral-storage\":\"0\",\"nvidia.com/gpu\":\"2\"}}",
                    "whole resources");
        expect_json(at(pod, "spec|volumes"),
                    "[{\"name\":\"workspace\",\"emptyDir\":{\"sizeLimit\":\"1Gi\"}}]", "volumes");
        expect_json(at(c, "volumeMounts"),
                    "[{\"name\":\"workspace\",\"mountPath\":\"/workspace\"}]", "mounts");
        expect_json(at(c, "securityContext"), "{\"runAsUser\":0}", "securityContext");
        json_decref(pod);
}

static void test_overcommit(void **state)
{
        json_t *inst = defaulted(instance(H100_POOL, "\"accelerator\":\"2\"", NULL), true);
        json_t *pod, *svc;

        (void)state;
        /* overcommit, no strict quota: upstream's 100m per core and 128Mi per Gi */
        build(json_incref(inst), h100_type, opts(true, false), &pod, &svc);
        expect_json(at(pod, "spec|containers|0|resources|requests"),
                    "{\"cpu\":\"2400m\",\"memory\":\"48Gi\",\"ephemeral-storage\":\"1920Mi\","
                    "\"nvidia.com/gpu\":\"2\"}",
                    "overcommit requests");
        json_decref(pod);
        /* no overcommit: requests = limits */
        build(json_incref(inst), h100_type, opts(false, false), &pod, &svc);
        expect_json(at(pod, "spec|containers|0|resources|requests"),
                    "{\"cpu\":\"24\",\"memory\":\"384Gi\",\"ephemeral-storage\":\"15Gi\","
                    "\"nvidia.com/gpu\":\"2\"}",
                    "requests = limits");
        json_decref(pod);
        /* the strict-quota rule wins over either */
        build(json_incref(inst), h100_type, opts(false, true), &pod, &svc);
        expect_json(at(pod, "spec|containers|0|resources|requests"),
                    "{\"cpu\":\"0\",\"memory\":\"0\",\"ephemeral-storage\":\"0\","
                    "\"nvidia.com/gpu\":\"2\"}",
                    "strict");
        expect_json(at(pod, "spec|containers|0|resources|limits|cpu"), "\"24\"", "limit stays");
        json_decref(pod);
        json_decref(inst);
        /* a fractional core rounds up before scaling (upstream's Value()) */
        inst =
            instance(H100_POOL, "\"accelerator\":\"1\",\"cpu\":\"1500m\",\"ram\":\"1536Mi\"", NULL);
        build(inst, h100_type, opts(true, false), &pod, &svc);
        expect_json(at(pod, "spec|containers|0|resources|requests"),
                    "{\"cpu\":\"200m\",\"memory\":\"128Mi\",\"nvidia.com/gpu\":\"1\"}", "rounding");
        json_decref(pod);
}

static void test_slice(void **state)
{
        json_t *pod, *svc;

        (void)state;
        build(defaulted(instance(H100_POOL,
                                 "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":50,"
                                 "\"acceleratorSlicedCoresPercentage\":30",
                                 NULL),
                        true),
              h100_type, opts(true, true), &pod, &svc);
        /* 50 % of one unit (12 cores, 192Gi) */
        expect_json(at(pod, "spec|containers|0|resources|limits"),
                    "{\"cpu\":\"6\",\"memory\":\"96Gi\",\"ephemeral-storage\":\"15Gi\","
                    "\"nvidia.com/gpu.sliced\":\"1\",\"nvidia.com/gpu.sliced.memory-percentage\":"
                    "\"50\",\"nvidia.com/gpu.sliced.cores-percentage\":\"30\"}",
                    "slice limits");
        expect_json(at(pod, "spec|containers|0|resources|requests"),
                    "{\"cpu\":\"0\",\"memory\":\"0\",\"ephemeral-storage\":\"0\","
                    "\"nvidia.com/gpu.sliced\":\"1\",\"nvidia.com/gpu.sliced.memory-percentage\":"
                    "\"50\",\"nvidia.com/gpu.sliced.cores-percentage\":\"30\"}",
                    "slice requests");
        json_decref(pod);
        /* without a cores percentage the key is left to the Pod webhook's default (the Instance
         * was not defaulted here: the webhook would copy the memory percentage in) */
        build(instance(H100_POOL,
                       "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":25,"
                       "\"cpu\":\"3\",\"ram\":\"48Gi\"",
                       NULL),
              h100_type, opts(true, true), &pod, &svc);
        expect_json(at(pod, "spec|containers|0|resources|limits"),
                    "{\"cpu\":\"3\",\"memory\":\"48Gi\",\"nvidia.com/gpu.sliced\":\"1\","
                    "\"nvidia.com/gpu.sliced.memory-percentage\":\"25\"}",
                    "slice without cores");
        json_decref(pod);
}

static void test_partition(void **state)
{
        json_t *pod, *svc;

        (void)state;
        build(defaulted(instance(H100_POOL,
                                 "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                                 "\"1g.10gb\"",
                                 NULL),
                        true),
              h100_type, opts(true, true), &pod, &svc);
        /* 1g.10gb is 9984 of 81920 MiB: 12 % of a unit (12 cores, 192Gi) */
        expect_json(at(pod, "spec|containers|0|resources|limits"),
                    "{\"cpu\":\"1440m\",\"memory\":\"24739011624960m\",\"ephemeral-storage\":"
                    "\"15Gi\",\"nvidia.com/gpu.partitioned\":\"1\","
                    "\"nvidia.com/gpu.partitioned.mig-1g.10gb\":\"1\"}",
                    "partition limits");
        expect_json(at(pod, "spec|containers|0|resources|requests|nvidia.com/gpu.partitioned"),
                    "\"1\"", "partition request");
        json_decref(pod);
}

static void test_cpu_only(void **state)
{
        json_t *pod, *svc;

        (void)state;
        build(defaulted(instance(CPU_POOL, "\"cpu\":\"2\"", NULL), true), cpu_type,
              opts(true, true), &pod, &svc);
        assert_null(at(pod, "spec|runtimeClassName"));
        /* 2 cores x 2Gi; the generic queue covers cpu: 800m per core; memory 0 */
        expect_json(at(pod, "spec|containers|0|resources"),
                    "{\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\",\"ephemeral-storage\":"
                    "\"15Gi\"},\"requests\":{\"cpu\":\"1600m\",\"memory\":\"0\","
                    "\"ephemeral-storage\":\"0\"}}",
                    "cpu-only");
        json_decref(pod);
        build(defaulted(instance(CPU_POOL, "\"cpu\":\"2\"", NULL), false), cpu_type,
              opts(false, true), &pod, &svc);
        expect_json(at(pod, "spec|containers|0|resources|requests"),
                    "{\"cpu\":\"2\",\"memory\":\"0\",\"ephemeral-storage\":\"0\"}",
                    "cpu-only, no overcommit");
        json_decref(pod);
        build(instance(CPU_POOL, "\"cpu\":\"2\",\"ram\":\"3Gi\"", NULL), cpu_type,
              opts(false, false), &pod, &svc);
        expect_json(at(pod, "spec|containers|0|resources"),
                    "{\"limits\":{\"cpu\":\"2\",\"memory\":\"3Gi\"},\"requests\":{\"cpu\":\"2\","
                    "\"memory\":\"3Gi\"}}",
                    "cpu-only, no overcommit, not strict, no local storage");
        json_decref(pod);
}

/* The webhook's sizing and the codec's fallback give the same limits, for every family. */
static void test_fallback_equals_webhook(void **state)
{
        static const struct {
                const char *type, *res;
        } rows[] = {
            {H100_POOL, "\"accelerator\":\"1\""},
            {H100_POOL, "\"accelerator\":\"3\""},
            {H100_POOL, "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":37"},
            {H100_POOL, "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":37,"
                        "\"acceleratorSlicedCoresPercentage\":20"},
            {H100_POOL, "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":\"3g.40gb\""},
            {H100_POOL, "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":\"7g.80gb\""},
            {CPU_POOL, "\"cpu\":\"3\""},
            {CPU_POOL, NULL},
        };

        (void)state;
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                json_t *type = strcmp(rows[i].type, H100_POOL) ? cpu_type : h100_type;
                json_t *a, *b, *sa, *sb;
                json_t *la, *lb;

                build(defaulted(instance(rows[i].type, rows[i].res, NULL), true), type,
                      opts(true, true), &a, &sa);
                build(instance(rows[i].type, rows[i].res, NULL), type, opts(true, true), &b, &sb);
                la = at(a, "spec|containers|0|resources|limits");
                lb = at(b, "spec|containers|0|resources|limits");
                if (!json_equal(at(la, "cpu"), at(lb, "cpu")) ||
                    !json_equal(at(la, "memory"), at(lb, "memory"))) {
                        char *x = json_fx_dump(la), *y = json_fx_dump(lb);

                        fail_msg("row %zu: webhook-sized %s, codec-sized %s", i, x, y);
                }
                json_decref(a);
                json_decref(b);
        }
}

static void test_ssh(void **state)
{
        json_t *pod, *svc, *sshd;

        (void)state;
        build(defaulted(instance(H100_POOL, "\"accelerator\":\"2\"",
                                 ",\"sshPublicKey\":{\"name\":\"my-keys\"},\"volumeMount\":"
                                 "\"/data\""),
                        true),
              h100_type, opts(true, true), &pod, &svc);
        assert_true(json_is_true(at(pod, "spec|shareProcessNamespace")));
        assert_int_equal(json_array_size(at(pod, "spec|containers")), 2);
        assert_string_equal(s(pod, "spec|containers|0|name"), "main");
        sshd = at(pod, "spec|containers|1");
        expect_json(sshd,
                    "{\"name\":\"sshd\",\"image\":\"" TSR_INSTANCE_SSHD_IMAGE "\","
                    "\"imagePullPolicy\":\"IfNotPresent\",\"stdin\":true,\"tty\":true,"
                    "\"securityContext\":{\"capabilities\":{\"add\":[\"SYS_ADMIN\","
                    "\"SYS_PTRACE\"]}},\"env\":[{\"name\":\"VOLUME_MOUNT_PATH\",\"value\":"
                    "\"/data\"}],\"volumeMounts\":[{\"name\":\"sshd-authorized-keys\","
                    "\"mountPath\":\"/var/run/sshd-authorized-keys\",\"readOnly\":true}],"
                    "\"resources\":{\"limits\":{\"device.gpustack.ai/nvidia.visibility\":\"2\"},"
                    "\"requests\":{\"device.gpustack.ai/nvidia.visibility\":\"2\"}}}",
                    "sshd");
        expect_json(at(pod, "spec|volumes|1"),
                    "{\"name\":\"sshd-authorized-keys\",\"secret\":{\"secretName\":\"my-keys\","
                    "\"defaultMode\":384}}",
                    "keys volume");
        expect_json(at(pod, "spec|containers|0|volumeMounts"),
                    "[{\"name\":\"workspace\",\"mountPath\":\"/data\"}]", "main's mount");
        json_decref(pod);
        /* a partition's sidecar asks for one visibility token */
        build(instance(H100_POOL,
                       "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":\"3g.40gb\"",
                       ",\"sshPublicKey\":{\"name\":\"k\"}"),
              h100_type, opts(true, true), &pod, &svc);
        expect_json(at(pod, "spec|containers|1|resources|limits"),
                    "{\"device.gpustack.ai/nvidia.visibility\":\"1\"}", "partition sshd");
        json_decref(pod);
        /* CPU-only: a sidecar without any device request; an empty key name is no SSH */
        build(instance(CPU_POOL, NULL, ",\"sshPublicKey\":{\"name\":\"k\"}"), cpu_type,
              opts(true, true), &pod, &svc);
        assert_null(at(pod, "spec|containers|1|resources"));
        json_decref(pod);
        build(instance(CPU_POOL, NULL, ",\"sshPublicKey\":{\"name\":\"\"}"), cpu_type,
              opts(true, true), &pod, &svc);
        assert_int_equal(json_array_size(at(pod, "spec|containers")), 1);
        assert_null(at(pod, "spec|shareProcessNamespace"));
        json_decref(pod);
}

static void test_ports_and_more(void **state)
{
        json_t *pod, *svc;
        struct tsr_instance_pod_opts o = opts(true, true);

        (void)state;
        o.runtime_class = NULL;
        build(instance(H100_POOL, "\"accelerator\":\"1\"",
                       ",\"ports\":[{\"port\":8080},{\"port\":53,\"protocol\":\"UDP\","
                       "\"name\":\"dns\"}],\"env\":[{\"name\":\"A\",\"value\":\"b\"}],"
                       "\"nodeName\":\"node-h100\",\"privileged\":true,\"imagePullPolicy\":"
                       "\"Always\",\"imagePullSecret\":{\"name\":\"regcred\"},"
                       "\"additionalVolumes\":[{\"mountPath\":\"/models\",\"readOnly\":true,"
                       "\"persistent\":{\"name\":\"models\"}},{\"mountPath\":\"/etc/x\","
                       "\"subPath\":\"x\",\"configMap\":{\"name\":\"cm\"}},{\"mountPath\":"
                       "\"/s\",\"secret\":{\"name\":\"sec\"}},{\"mountPath\":\"/h\","
                       "\"hostPath\":{\"path\":\"/opt\",\"type\":\"Directory\"}}]"),
              h100_type, o, &pod, &svc);
        assert_null(at(pod, "spec|runtimeClassName"));
        expect_json(at(pod, "spec|nodeSelector"), "{\"kubernetes.io/hostname\":\"node-h100\"}",
                    "nodeName");
        assert_null(at(pod, "spec|nodeName"));
        expect_json(at(pod, "spec|imagePullSecrets"), "[{\"name\":\"regcred\"}]", "pull secret");
        expect_json(at(pod, "spec|containers|0|ports"),
                    "[{\"name\":\"tcp-8080\",\"containerPort\":8080,\"protocol\":\"TCP\"},"
                    "{\"name\":\"udp-53\",\"containerPort\":53,\"protocol\":\"UDP\"}]",
                    "container ports");
        expect_json(at(pod, "spec|containers|0|env"), "[{\"name\":\"A\",\"value\":\"b\"}]", "env");
        expect_json(at(pod, "spec|containers|0|securityContext"),
                    "{\"runAsUser\":0,\"privileged\":true}", "privileged");
        assert_string_equal(s(pod, "spec|containers|0|imagePullPolicy"), "Always");
        expect_json(at(pod, "spec|volumes"),
                    "[{\"name\":\"workspace\",\"emptyDir\":{\"sizeLimit\":\"1Gi\"}},"
                    "{\"name\":\"additional-0\",\"persistentVolumeClaim\":{\"claimName\":"
                    "\"models\"}},{\"name\":\"additional-1\",\"configMap\":{\"name\":\"cm\"}},"
                    "{\"name\":\"additional-2\",\"secret\":{\"secretName\":\"sec\"}},"
                    "{\"name\":\"additional-3\",\"hostPath\":{\"path\":\"/opt\",\"type\":"
                    "\"Directory\"}}]",
                    "volumes");
        expect_json(at(pod, "spec|containers|0|volumeMounts"),
                    "[{\"name\":\"workspace\",\"mountPath\":\"/workspace\"},"
                    "{\"name\":\"additional-0\",\"mountPath\":\"/models\",\"readOnly\":true},"
                    "{\"name\":\"additional-1\",\"mountPath\":\"/etc/x\",\"subPath\":\"x\"},"
                    "{\"name\":\"additional-2\",\"mountPath\":\"/s\"},"
                    "{\"name\":\"additional-3\",\"mountPath\":\"/h\"}]",
                    "mounts");
        assert_non_null(svc);
        expect_json(svc,
                    "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"i\","
                    "\"namespace\":\"team-a\",\"labels\":{\"worker.gpustack.ai/instance\":"
                    "\"" UID "\"},\"ownerReferences\":[{\"apiVersion\":"
                    "\"worker.gpustack.ai/v1alpha1\",\"kind\":\"Instance\",\"name\":\"i\","
                    "\"uid\":\"" UID "\",\"controller\":true}]},\"spec\":{\"type\":\"NodePort\","
                    "\"selector\":{\"worker.gpustack.ai/instance\":\"" UID "\"},\"ports\":["
                    "{\"name\":\"tcp-8080\",\"port\":8080,\"protocol\":\"TCP\",\"targetPort\":"
                    "8080},{\"name\":\"udp-53\",\"port\":53,\"protocol\":\"UDP\",\"targetPort\":"
                    "53}]}}",
                    "service");
        json_decref(pod);
        json_decref(svc);
        /* a persistent workspace */
        build(json_fx_load("{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"uid\":\"u\"},"
                           "\"spec\":{\"type\":\"x\",\"image\":\"i\",\"volume\":{\"persistent\":"
                           "{\"name\":\"home\"}}}}"),
              cpu_type, o, &pod, &svc);
        expect_json(at(pod, "spec|volumes"),
                    "[{\"name\":\"workspace\",\"persistentVolumeClaim\":{\"claimName\":\"home\"}}]",
                    "persistent");
        json_decref(pod);
}

/* ---- bad input ---------------------------------------------------------------------------- */

static void test_refused(void **state)
{
        json_t *bare = json_deep_copy(h100_type), *amd;

        (void)state;
        json_object_del(bare, "status");
        refused(instance(H100_POOL, "\"accelerator\":\"1\"", NULL), bare, TSR_ESTALE,
                "status.entrance is not set yet");
        json_object_set_new(bare, "status", json_pack("{s:s}", "entrance", "lq"));
        json_object_del(json_object_get(bare, "spec"), "acceleratorGroup");
        refused(instance(H100_POOL, "\"accelerator\":\"1\"", NULL), bare, TSR_ESTALE,
                "status.detail.manufacturer is not set yet");
        json_decref(bare);
        refused(instance(H100_POOL,
                         "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                         "\"9g.99gb\"",
                         NULL),
                h100_type, TSR_EINVAL,
                "spec.resources.acceleratorPartitionedProfile: \"9g.99gb\" is not offered by "
                "InstanceType " H100_POOL " (status.detail.slicedDetail.physical.profiles offers "
                "[1g.10gb");
        refused(instance(H100_POOL,
                         "\"accelerator\":\"2\",\"acceleratorPartitionedProfile\":"
                         "\"3g.40gb\"",
                         NULL),
                h100_type, TSR_EINVAL,
                "spec.resources.accelerator: must be exactly 1 for a partitioned request");
        refused(instance(H100_POOL,
                         "\"accelerator\":\"2\",\"acceleratorSlicedMemoryPercentage\":"
                         "10",
                         NULL),
                h100_type, TSR_EINVAL,
                "spec.resources.accelerator: must be exactly 1 for a sliced request");
        refused(instance(H100_POOL,
                         "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":"
                         "10,\"acceleratorPartitionedProfile\":\"3g.40gb\"",
                         NULL),
                h100_type, TSR_EINVAL, "mutually exclusive");
        refused(instance(H100_POOL,
                         "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":"
                         "101",
                         NULL),
                h100_type, TSR_EINVAL, "acceleratorSlicedMemoryPercentage: must be within");
        refused(instance(H100_POOL, "\"accelerator\":\"1500m\"", NULL), h100_type, TSR_EINVAL,
                "spec.resources.accelerator: must be a whole");
        refused(instance(CPU_POOL, "\"accelerator\":\"1\"", NULL), cpu_type, TSR_EINVAL,
                "not acceleratable");
        refused(instance(CPU_POOL, "\"acceleratorPartitionedProfile\":\"3g.40gb\"", NULL), cpu_type,
                TSR_EINVAL, "not acceleratable");
        refused(instance(H100_POOL, "\"cpu\":\"abc\"", NULL), h100_type, TSR_EINVAL,
                "spec.resources.cpu is not a quantity");
        refused(instance(H100_POOL, "\"accelerator\":\"1\"",
                         ",\"additionalVolumes\":[{\"mountPath\":\"/m\",\"model\":{"
                         "\"artifactRef\":{\"name\":\"m\"}}}]"),
                h100_type, TSR_EINVAL, "spec.additionalVolumes[0].model");
        refused(instance(H100_POOL, "\"accelerator\":\"1\"", ",\"ports\":[{\"port\":0}]"),
                h100_type, TSR_EINVAL, "spec.ports[0].port");
        refused(json_fx_load("{\"metadata\":{\"name\":\"i\",\"namespace\":\"n\",\"uid\":\"u\"},"
                             "\"spec\":{\"type\":\"t\",\"volume\":{\"ephemeral\":{\"capacity\":"
                             "\"1Gi\"}}}}"),
                cpu_type, TSR_EINVAL, "spec.image is required");
        refused(json_fx_load("{\"metadata\":{\"name\":\"i\",\"namespace\":\"n\",\"uid\":\"u\"},"
                             "\"spec\":{\"type\":\"t\",\"image\":\"x\"}}"),
                cpu_type, TSR_EINVAL, "spec.volume: exactly one");
        refused(json_fx_load("{\"metadata\":{\"name\":\"i\",\"namespace\":\"n\"},\"spec\":{}}"),
                cpu_type, TSR_EINVAL, "uid are required");
        /* a manufacturer without a partition kind */
        amd = json_fx_load("{\"spec\":{\"acceleratable\":true,\"unitResources\":{\"cpu\":\"12\","
                           "\"ram\":\"192Gi\"}},\"status\":{\"entrance\":\"lq\",\"detail\":{"
                           "\"manufacturer\":\"amd\",\"memory\":\"196608Mi\"}}}");
        refused(
            instance("amd", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":\"x\"", NULL),
            amd, TSR_EINVAL, "manufacturer amd does not support hardware partitioning");
        json_decref(amd);
}

/* ---- reading back ------------------------------------------------------------------------- */

#define ALLOC_MAIN                                                                                 \
        "{\\\"main\\\":{\\\"deviceIDs\\\":[\\\"a\\\"],\\\"devices\\\":{\\\"groups\\\":[{"          \
        "\\\"id\\\":\\\"nvidia-h100\\\",\\\"manufacturer\\\":\\\"nvidia\\\",\\\"accelerators\\\":" \
        "[{\\\"id\\\":\\\"GPU-0\\\",\\\"index\\\":0,\\\"mode\\\":4,\\\"allocated\\\":197000,"      \
        "\\\"allocatedPhysicalProfile\\\":\\\"1g.10gb\\\",\\\"allocatedPhysicalPlacements\\\":"    \
        "[{\\\"start\\\":6,\\\"length\\\":1}],\\\"allocatedPhysicalID\\\":\\\"MIG-1\\\","          \
        "\\\"extra\\\":1}]}]}},"                                                                   \
        "\\\"other\\\":{\\\"deviceIDs\\\":[],\\\"devices\\\":{\\\"groups\\\":[{"                   \
        "\\\"id\\\":\\\"nvidia-h100\\\",\\\"manufacturer\\\":\\\"nvidia\\\",\\\"accelerators\\\":" \
        "[{\\\"id\\\":\\\"GPU-0\\\",\\\"index\\\":0,\\\"mode\\\":1},{\\\"id\\\":\\\"GPU-3\\\","    \
        "\\\"index\\\":3,\\\"mode\\\":1,\\\"allocated\\\":1600000}]}]}}}"

static void test_allocations(void **state)
{
        json_t *pod =
            json_fx_load("{\"metadata\":{\"annotations\":{"
                         "\"device.gpustack.ai/accelerator.allocated\":\"" ALLOC_MAIN "\"}}}");
        json_t *out = (json_t *)1;
        struct tsr_diag diag;

        (void)state;
        assert_int_equal(tsr_instance_allocations(pod, &out, &diag), 0);
        expect_json(out,
                    "[{\"id\":\"nvidia-h100\",\"manufacturer\":\"nvidia\",\"accelerators\":["
                    "{\"id\":\"GPU-0\",\"index\":0,\"mode\":4,\"allocated\":197000,"
                    "\"allocatedPhysicalProfile\":\"1g.10gb\",\"allocatedPhysicalPlacements\":"
                    "[{\"start\":6,\"length\":1}],\"allocatedPhysicalID\":\"MIG-1\"},"
                    "{\"id\":\"GPU-3\",\"index\":3,\"mode\":1,\"allocated\":1600000}]}]",
                    "allocations: merged by group, a repeated GPU once, unknown fields dropped");
        json_decref(out);
        json_decref(pod);
        pod = json_fx_load("{\"metadata\":{}}");
        assert_int_equal(tsr_instance_allocations(pod, &out, &diag), 0);
        assert_null(out);
        json_decref(pod);
        pod = json_fx_load("{\"metadata\":{\"annotations\":{"
                           "\"device.gpustack.ai/accelerator.allocated\":\"{\\\"main\\\":1}\"}}}");
        out = (json_t *)1;
        assert_int_equal(tsr_instance_allocations(pod, &out, &diag), TSR_EPARSE);
        assert_ptr_equal(out, (json_t *)1);
        json_decref(pod);
}

static void test_status(void **state)
{
        json_t *inst = instance(H100_POOL, "\"accelerator\":\"1\"", ",\"ports\":[{\"port\":22}]");
        json_t *pod, *st, *svc, *node;
        struct tsr_diag diag;

        (void)state;
        pod = json_fx_load("{\"metadata\":{\"annotations\":{"
                           "\"device.gpustack.ai/accelerator.allocated\":\"" ALLOC_MAIN "\"}},"
                           "\"spec\":{\"nodeName\":\"node-h100\"},\"status\":{\"phase\":"
                           "\"Running\",\"hostIP\":\"127.0.0.1\",\"podIP\":\"10.1.0.1\","
                           "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
        svc = json_fx_load("{\"spec\":{\"ports\":[{\"name\":\"tcp-22\",\"port\":22}]}}");
        /* no nodePort yet: no ports; the Node has no address: the Pod's hostIP */
        assert_int_equal(tsr_instance_pod_status(inst, pod, svc, NULL, &st, &diag), 0);
        assert_string_equal(s(st, "phase"), "Ready");
        assert_null(at(st, "phaseMessage"));
        assert_string_equal(s(st, "nodeName"), "node-h100");
        expect_json(at(st, "hostIPs"), "[{\"ip\":\"127.0.0.1\"}]", "hostIPs from the Pod");
        expect_json(at(st, "podIPs"), "[{\"ip\":\"10.1.0.1\"}]", "podIPs");
        assert_null(at(st, "ports"));
        assert_int_equal(json_array_size(at(st, "allocations|0|accelerators")), 2);
        json_decref(st);
        json_object_set_new(at(svc, "spec|ports|0"), "nodePort", json_integer(30022));
        node = json_fx_load("{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":"
                            "\"10.0.0.5\"},{\"type\":\"Hostname\",\"address\":\"h\"},{\"type\":"
                            "\"ExternalIP\",\"address\":\"1.2.3.4\"}]}}");
        assert_int_equal(tsr_instance_pod_status(inst, pod, svc, node, &st, &diag), 0);
        expect_json(at(st, "hostIPs"), "[{\"ip\":\"1.2.3.4\"},{\"ip\":\"10.0.0.5\"}]",
                    "hostIPs from the Node, external first");
        expect_json(at(st, "ports"), "[{\"port\":22,\"protocol\":\"TCP\",\"nodePort\":30022}]",
                    "ports");
        json_decref(st);
        json_decref(pod);
        /* gated by Kueue */
        pod =
            json_fx_load("{\"metadata\":{\"labels\":{\"kueue.x-k8s.io/queue-name\":\"lq\"}},"
                         "\"spec\":{\"schedulingGates\":[{\"name\":\"kueue.x-k8s.io/admission\"}]},"
                         "\"status\":{\"phase\":\"Pending\"}}");
        assert_int_equal(tsr_instance_pod_status(inst, pod, NULL, NULL, &st, &diag), 0);
        assert_string_equal(s(st, "phase"), "Starting");
        assert_string_equal(s(st, "phaseMessage"), "waiting for admission by Kueue (queue lq)");
        assert_null(at(st, "nodeName"));
        assert_null(at(st, "allocations"));
        json_decref(st);
        json_decref(pod);
        /* unschedulable */
        pod = json_fx_load("{\"spec\":{},\"status\":{\"phase\":\"Pending\",\"conditions\":["
                           "{\"type\":\"PodScheduled\",\"status\":\"False\",\"message\":"
                           "\"0/2 nodes are available\"}]}}");
        assert_int_equal(tsr_instance_pod_status(inst, pod, NULL, NULL, &st, &diag), 0);
        assert_string_equal(s(st, "phaseMessage"), "not scheduled: 0/2 nodes are available");
        json_decref(st);
        json_decref(pod);
        /* running, not ready */
        pod = json_fx_load("{\"spec\":{\"nodeName\":\"n\"},\"status\":{\"phase\":\"Running\","
                           "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}");
        assert_int_equal(tsr_instance_pod_status(inst, pod, NULL, NULL, &st, &diag), 0);
        assert_string_equal(s(st, "phase"), "Starting");
        assert_string_equal(s(st, "phaseMessage"), "waiting for the Pod to be ready on n");
        json_decref(st);
        json_decref(pod);
        /* failed */
        pod = json_fx_load("{\"spec\":{\"nodeName\":\"n\"},\"status\":{\"phase\":\"Failed\","
                           "\"reason\":\"UnexpectedAdmissionError\",\"message\":\"Allocate "
                           "failed\"}}");
        assert_int_equal(tsr_instance_pod_status(inst, pod, NULL, NULL, &st, &diag), 0);
        assert_string_equal(s(st, "phase"), "Failed");
        assert_string_equal(s(st, "phaseMessage"),
                            "its Pod failed (UnexpectedAdmissionError): Allocate failed; stop "
                            "and start the Instance to run it again");
        json_decref(st);
        json_decref(pod);
        json_decref(svc);
        json_decref(node);
        json_decref(inst);
}

/* Every build under a failing allocator ends in the unfailed result or TSR_ENOMEM. */
static void test_alloc_failure(void **state)
{
        json_t *inst = defaulted(instance(H100_POOL, "\"accelerator\":\"2\"",
                                          ",\"sshPublicKey\":{\"name\":\"k\"},\"ports\":[{\"port\":"
                                          "22}],\"env\":[{\"name\":\"A\",\"value\":\"b\"}]"),
                                 true);
        struct tsr_instance_pod_opts o = opts(true, true);
        json_t *want_pod, *want_svc;
        struct tsr_diag diag;
        long budget;

        (void)state;
        assert_int_equal(tsr_instance_pod_build(inst, h100_type, &o, &want_pod, &want_svc, &diag),
                         0);
        json_set_alloc_funcs(failing_malloc, free);
        for (budget = 0; budget < 400; budget++) {
                json_t *pod = NULL, *svc = NULL;
                int rc;

                failing_alloc_budget(budget);
                rc = tsr_instance_pod_build(inst, h100_type, &o, &pod, &svc, &diag);
                failing_alloc_budget(-1);
                if (rc == 0) {
                        assert_true(json_equal(pod, want_pod) && json_equal(svc, want_svc));
                        json_decref(pod);
                        json_decref(svc);
                        break;
                }
                if (rc != TSR_ENOMEM)
                        fail_msg("budget %ld: %d (%s)", budget, rc, diag.msg);
                assert_null(pod);
                assert_null(svc);
        }
        json_set_alloc_funcs(malloc, free);
        assert_true(budget < 400);
        json_decref(want_pod);
        json_decref(want_svc);
        json_decref(inst);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_whole),    cmocka_unit_test(test_overcommit),
            cmocka_unit_test(test_slice),    cmocka_unit_test(test_partition),
            cmocka_unit_test(test_cpu_only), cmocka_unit_test(test_fallback_equals_webhook),
            cmocka_unit_test(test_ssh),      cmocka_unit_test(test_ports_and_more),
            cmocka_unit_test(test_refused),  cmocka_unit_test(test_allocations),
            cmocka_unit_test(test_status),   cmocka_unit_test(test_alloc_failure),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
