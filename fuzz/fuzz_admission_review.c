/*
 * fuzz_admission_review.c - bytes as an HTTP body for one of the admission webhooks `tessera
 * webhook` serves: tsr_webhook_dispatch over the real route table and handlers (webhook/routes.h),
 * with the AdmissionReview decoder and encoder (codec/admission_review.h) on either side.
 *
 * Input: byte 0 selects the route, tsr_webhook_routes[byte 0 % tsr_webhook_n_routes] (0 mutate
 * InstanceType, 1 mutate Instance, 2 mutate KV-cache Pod, 3 mutate Pod, 4 mutate Workload,
 * 5 validate InstanceType, 6 validate Instance, 7 validate KV-cache Pod, 8 validate Pod); the
 * quotient byte 0 / tsr_webhook_n_routes flips Settings from their defaults (bit 0
 * workload-fit-affinity, bit 1 instance-general-resources-overcommit, bit 2
 * model-deployment-kv-cache-dtype-owned, bit 3 instance-type-aware-cpu-manufacturer) and with
 * bit 4 makes team-a the system namespace. The rest is the body. The lookup answers from a fixed
 * cluster built once: InstanceTypes (MIG H100 as this project renders it, a logically sliced
 * H100, a CPU pool, an AMD pool, one not yet detailed, two sharing one entrance), their
 * LocalQueues in team-a and marked ClusterQueues, one foreign ClusterQueue, and KV-cache
 * Bindings, pools and backends.
 *
 * Properties: dispatch returns 0; the body is JSON; HTTP 400 exactly when tsr_review_decode
 * refuses the body, with a metav1.Status of code 400, and a decoded review gets 200, or 500 with a
 * Status of code 500; a 200 is an admission.k8s.io/v1 AdmissionReview whose response echoes the
 * request uid, says allowed as a boolean, carries a Failure status with code >= 400 exactly when
 * denied, and agrees with the outcome; a validating route never answers a patch; a patch is
 * patchType JSONPatch, base64 of a non-empty JSON array that applies to a copy of request.object
 * and changes it; the same body answers byte for byte the same twice, the second time under a
 * JSON arena (codec/json_arena.h) that ends with every value freed; the handlers leave the
 * lookup's objects as they were; every response is byte for byte jansson's compact dump of itself.
 * A route that decodes only what its handler reads (route->reads, codec/json_pick.h) answers byte
 * for byte as the same route decoding the whole body, and its decoded object is the whole object
 * pruned by the reference model, or the whole object where the picker declined (as it does for a
 * NUL byte after a number, which jansson skips).
 */
#include "base/diag.h"
#include "codec/admission_review.h"
#include "codec/instancetype_entrance.h"
#include "codec/json_arena.h"
#include "codec/json_patch.h"
#include "webhook/dispatch.h"
#include "webhook/handler.h"
#include "webhook/routes.h"
#include "json_pick_model.h"

#include <nettle/base64.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BODY_MAX (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ENTRANCE     "schedule.gpustack.ai/queue-entrance"
#define OWNED        "\"labels\":{\"resource.gpustack.ai/type\":\"instancetypes\"}"
#define MIG          "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
#define LQ_MIG       "gpustack-fnv64-e4768a65ca0ce96b"
#define SLICED       "gpustack--nvidia-h100-sliced-linux-amd64"
#define LQ_SLICED    "gpustack-fnv64-00000000000000a1"
#define GENERIC      "gpustack--generic-linux-amd64"
#define LQ_GENERIC   "gpustack-fnv64-3b93966fd73eb9ec"
#define LQ_AMD       "gpustack-fnv64-00000000000000a3"
#define LQ_NEW       "gpustack-fnv64-00000000000000a4"
#define LQ_DUP       "gpustack-fnv64-00000000000000dd"
#define UNITS        "\"unitResources\":{\"cpu\":12,\"ram\":\"192Gi\"},\"localStorage\":\"100Gi\""
#define LEDGER_TRUE  "\"conditions\":[{\"type\":\"QuotaLedgerAvailable\",\"status\":\"True\"}]"
#define EP           "\"clientEndpoint\":\"pool-a.gpustack-system:50051\","
#define POOL(be, st) "{\"spec\":{\"backends\":[\"" be "\"]},\"status\":{" st "}}"
#define BINDING(pool)                                                                              \
        "{\"metadata\":{\"namespace\":\"team-a\"},\"spec\":{\"poolRef\":{\"name\":\"" pool "\"},"  \
        "\"domain\":{\"name\":\"team-a-chat\",\"blockSize\":16,\"dtype\":\"fp8\"}}}"
#define IT(name, lq, spec, status)                                                                 \
        "instancetypes", name,                                                                     \
            "{\"metadata\":{\"name\":\"" name "\",\"labels\":{\"" ENTRANCE "\":\"" lq "\"}},"      \
            "\"spec\":{" spec "},\"status\":{" status "}}"
#define LQ(name, cq) "localqueues", "team-a/" name, "{\"spec\":{\"clusterQueue\":\"" cq "\"}}"
#define CQ(name)     "clusterqueues", name, "{\"metadata\":{" OWNED "}}"

/* The cluster the lookup reads: {kind, key, JSON} rows (a namespaced object's key is ns/name). */
static const struct {
        const char *kind, *key, *json;
} rows[] = {
    {IT(MIG, LQ_MIG,
        "\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100-80gb-hbm3\",\"os\":\"linux\","
        "\"arch\":\"amd64\",\"memory\":81559," UNITS,
        "\"cpu\":{\"capacity\":\"192\"},\"accelerator\":{\"capacity\":\"0\"},\"detail\":{"
        "\"slicedDetail\":{\"logical\":{\"count\":0},\"physical\":{\"count\":9,\"profiles\":["
        "{\"name\":\"1g.10gb\",\"count\":7,\"memoryMib\":9856},"
        "{\"name\":\"3g.40gb\",\"count\":2,\"memoryMib\":40192}]}}}")},
    {IT(SLICED, LQ_SLICED,
        "\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100-80gb-hbm3\",\"os\":\"linux\","
        "\"arch\":\"amd64\",\"memory\":81559," UNITS,
        "\"cpu\":{\"capacity\":\"192\"},\"accelerator\":{\"capacity\":\"8\"},\"detail\":{"
        "\"manufacturer\":\"nvidia\",\"memory\":\"81559Mi\",\"slicedDetail\":{\"logical\":"
        "{\"count\":128},\"physical\":{\"count\":0}}}")},
    {IT(GENERIC, LQ_GENERIC,
        "\"acceleratable\":false,\"os\":\"linux\",\"arch\":\"amd64\",\"unitResources\":"
        "{\"cpu\":\"1\",\"ram\":\"2Gi\"},\"localStorage\":\"100Gi\"",
        "\"cpu\":{\"capacity\":\"64\"}")},
    {IT("amd-mi300x", LQ_AMD,
        "\"acceleratable\":true,\"acceleratorGroup\":\"amd-mi300x\",\"memory\":196608," UNITS,
        "\"accelerator\":{\"capacity\":\"8\"},\"detail\":{\"manufacturer\":\"amd\","
        "\"slicedDetail\":{\"logical\":{\"count\":128}}}")},
    {IT("h100-new", LQ_NEW,
        "\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100-80gb-hbm3\",\"memory\":"
        "81559," UNITS,
        "")},
    {IT("dup-a", LQ_DUP, "\"acceleratable\":false", "")},
    {IT("dup-b", LQ_DUP, "\"acceleratable\":false", "")},
    {LQ(LQ_MIG, MIG)},
    {LQ(LQ_SLICED, SLICED)},
    {LQ(LQ_GENERIC, GENERIC)},
    {LQ(LQ_NEW, "h100-new")},
    {LQ("gpustack-fnv64-00000000000000ee", "foreign")},
    {CQ(MIG)},
    {CQ(SLICED)},
    {CQ(GENERIC)},
    {CQ("h100-new")},
    {"clusterqueues", "foreign", "{\"metadata\":{}}"},
    {"bindings", "team-a/chat", BINDING("pool-a")},
    {"bindings", "team-a/down", BINDING("pool-down")},
    {"bindings", "team-a/single", BINDING("pool-single")},
    {"bindings", "team-a/mixed", BINDING("pool-mixed")},
    {"bindings", "team-a/cann", BINDING("pool-cann")},
    {"bindings", "team-a/nobackend", BINDING("pool-nobackend")},
    {"bindings", "team-a/nopool", BINDING("missing")},
    {"bindings", "team-a/gone",
     "{\"metadata\":{\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},"
     "\"spec\":{\"poolRef\":{\"name\":\"pool-a\"}}}"},
    {"bindings", "team-a/nodtype",
     "{\"spec\":{\"poolRef\":{\"name\":\"pool-a\"},\"domain\":{\"name\":\"d\"}}}"},
    {"pools", "pool-a", POOL("be-tcp", EP LEDGER_TRUE)},
    {"pools", "pool-down",
     POOL("be-tcp", EP "\"conditions\":[{\"type\":\"QuotaLedgerAvailable\",\"status\":\"False\","
                       "\"reason\":\"LedgerUnreachable\",\"message\":\"connection refused\"}]")},
    {"pools", "pool-single",
     POOL("be-tcp", EP "\"conditions\":[{\"type\":\"QuotaLedgerAvailable\",\"status\":\"False\","
                       "\"reason\":\"MultiTenancyDisabled\"}]")},
    {"pools", "pool-mixed", POOL("be-mixed", EP LEDGER_TRUE)},
    {"pools", "pool-cann", POOL("be-cann", EP LEDGER_TRUE)},
    {"pools", "pool-nobackend", "{\"spec\":{},\"status\":{" EP LEDGER_TRUE "}}"},
    {"backends", "be-tcp",
     "{\"metadata\":{\"name\":\"be-tcp\"},\"spec\":{\"transport\":{\"protocol\":\"TCP\"}}}"},
    {"backends", "be-mixed",
     "{\"metadata\":{\"name\":\"be-mixed\"},\"spec\":{\"connection\":{\"managed\":{\"members\":["
     "{\"transport\":{\"protocol\":\"RDMA\"}},{},{\"transport\":{\"protocol\":\"RDMA\"}}]}}}}"},
    {"backends", "be-cann",
     "{\"metadata\":{\"name\":\"be-cann\"},\"spec\":{\"transport\":{\"protocol\":\"TCP\"},"
     "\"connection\":{\"managed\":{\"members\":[{},{\"transport\":{\"protocol\":\"CANN\"}}]}}}}"},
};

static json_t *fixture;  /* the cluster, by kind and key */
static json_t *pristine; /* a deep copy, to see that no handler changed it */

static json_t *get(const char *kind, const char *key)
{
        json_t *o = json_object_get(json_object_get(fixture, kind), key);

        return o ? json_incref(o) : NULL;
}

static json_t *get_ns(const char *kind, const char *ns, const char *name)
{
        char key[2 * TSR_REVIEW_FIELD_MAX + 2];

        if (strlen(ns) + strlen(name) + 2 > sizeof(key))
                return NULL;
        strcpy(key, ns);
        strcat(key, "/");
        strcat(key, name);
        return get(kind, key);
}

static json_t *read_instancetype(void *ctx, const char *name)
{
        (void)ctx;
        return get("instancetypes", name);
}

static json_t *read_by_entrance(void *ctx, const char *lq, size_t *matches)
{
        size_t n;
        json_t *found =
            tsr_instancetype_entrance_scan(json_object_get(fixture, "instancetypes"), lq, &n);

        (void)ctx;
        *matches = n;
        return n == 1 ? json_incref(found) : NULL;
}

static json_t *read_localqueue(void *ctx, const char *ns, const char *name)
{
        (void)ctx;
        return get_ns("localqueues", ns, name);
}

static json_t *read_clusterqueue(void *ctx, const char *name)
{
        (void)ctx;
        return get("clusterqueues", name);
}

static json_t *read_binding(void *ctx, const char *ns, const char *name)
{
        (void)ctx;
        return get_ns("bindings", ns, name);
}

static json_t *read_pool(void *ctx, const char *name)
{
        (void)ctx;
        return get("pools", name);
}

static json_t *read_backend(void *ctx, const char *name)
{
        (void)ctx;
        return get("backends", name);
}

static void setup(void)
{
        json_error_t err;

        tsr_json_arena_install();
        fixture = json_object();
        for (size_t i = 0; fixture && i < sizeof(rows) / sizeof(rows[0]); i++) {
                json_t *kind = json_object_get(fixture, rows[i].kind);
                json_t *obj = json_loads(rows[i].json, JSON_REJECT_DUPLICATES, &err);

                if (!kind) {
                        json_object_set_new(fixture, rows[i].kind, json_object());
                        kind = json_object_get(fixture, rows[i].kind);
                }
                if (!obj || json_object_get(kind, rows[i].key) ||
                    json_object_set_new(kind, rows[i].key, obj))
                        abort();
        }
        pristine = json_deep_copy(fixture);
        if (!fixture || !pristine)
                abort();
}

static void lookup_for(unsigned variant, struct tsr_webhook_lookup *x)
{
        static const enum tsr_setting flips[] = {
            TSR_SETTING_WORKLOAD_FIT_AFFINITY,
            TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT,
            TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED,
            TSR_SETTING_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER,
        };

        tsr_webhook_lookup_init(x);
        x->instancetype = read_instancetype;
        x->instancetype_by_entrance = read_by_entrance;
        x->localqueue = read_localqueue;
        x->clusterqueue = read_clusterqueue;
        x->kvcache_binding = read_binding;
        x->kvcache_pool = read_pool;
        x->kvcache_backend = read_backend;
        for (size_t i = 0; i < sizeof(flips) / sizeof(flips[0]); i++)
                if (variant & (1u << i))
                        x->settings.value[flips[i]] = !x->settings.value[flips[i]];
        if (variant & 16u)
                x->system_namespace = "team-a";
}

static bool is_string(json_t *obj, const char *key, const char *want)
{
        const char *s = json_string_value(json_object_get(obj, key));

        return s && (!want || !strcmp(s, want));
}

/* A metav1.Status of code for an HTTP error. */
static void check_status(json_t *body, int code)
{
        json_t *c = json_object_get(body, "code");

        if (!is_string(body, "kind", "Status") || !is_string(body, "apiVersion", "v1") ||
            !is_string(body, "status", "Failure") || !is_string(body, "message", NULL) ||
            !json_is_integer(c) || json_integer_value(c) != code ||
            json_object_get(body, "response"))
                abort();
}

/* The base64 text b64 decoded as JSON, or abort(). */
static json_t *decode_patch(const char *b64)
{
        struct base64_decode_ctx ctx;
        size_t len = strlen(b64), n = BASE64_DECODE_LENGTH(len);
        uint8_t *raw = malloc(n + 1);
        json_error_t err;
        json_t *ops;

        if (!raw)
                abort();
        base64_decode_init(&ctx);
        if (!base64_decode_update(&ctx, &n, raw, len, b64) || !base64_decode_final(&ctx))
                abort();
        ops = json_loadb((const char *)raw, n, JSON_REJECT_DUPLICATES, &err);
        free(raw);
        if (!ops)
                abort();
        return ops;
}

/* A patch answered for object: a non-empty JSON Patch that applies to a copy and changes it. */
static void check_patch(json_t *resp, json_t *object)
{
        json_t *ops = decode_patch(json_string_value(json_object_get(resp, "patch")));
        json_t *doc = object ? json_deep_copy(object) : json_null();
        struct tsr_diag diag;

        if (!is_string(resp, "patchType", "JSONPatch") || !json_is_array(ops) ||
            json_array_size(ops) == 0 || !doc)
                abort();
        tsr_diag_clear(&diag);
        if (tsr_json_patch_apply(&doc, ops, &diag))
                abort();
        if (json_equal(doc, object ? object : json_null()))
                abort();
        json_decref(doc);
        json_decref(ops);
}

/* A 200: the AdmissionReview answering review on route, in agreement with the outcome. */
static void check_review(const struct tsr_webhook_route *route, const struct tsr_review *review,
                         json_t *body, const struct tsr_webhook_outcome *out)
{
        json_t *resp = json_object_get(body, "response"), *allowed, *status, *code, *patch, *w;
        size_t i;

        allowed = json_object_get(resp, "allowed");
        status = json_object_get(resp, "status");
        patch = json_object_get(resp, "patch");
        if (!is_string(body, "apiVersion", "admission.k8s.io/v1") ||
            !is_string(body, "kind", "AdmissionReview") || !json_is_object(resp) ||
            !is_string(resp, "uid", review->uid) || !json_is_boolean(allowed) ||
            json_is_true(allowed) != out->allowed)
                abort();
        if (out->allowed) {
                if (status)
                        abort();
        } else {
                code = json_object_get(status, "code");
                if (!json_is_object(status) || !json_is_integer(code) ||
                    json_integer_value(code) < 400 ||
                    json_integer_value(code) != (out->code < 400 ? 400 : out->code) ||
                    !is_string(status, "status", "Failure") || !is_string(status, "reason", NULL) ||
                    !is_string(status, "message", NULL))
                        abort();
        }
        if ((patch != NULL) != out->patched || (patch && (!route->mutating || !out->allowed)))
                abort();
        if (patch)
                check_patch(resp, review->object);
        else if (json_object_get(resp, "patchType"))
                abort();
        w = json_object_get(resp, "warnings");
        if (w && (!json_is_array(w) || json_array_size(w) > TSR_VERDICT_WARNINGS))
                abort();
        json_array_foreach(w, i, status)
        {
                if (!json_is_string(status))
                        abort();
        }
}

static bool same_outcome(const struct tsr_webhook_outcome *a, const struct tsr_webhook_outcome *b)
{
        return a->http_status == b->http_status && a->decoded == b->decoded &&
               a->allowed == b->allowed && a->patched == b->patched && a->code == b->code &&
               !strcmp(a->rule, b->rule) && !strcmp(a->error, b->error) &&
               !strcmp(a->uid, b->uid) && !strcmp(a->operation, b->operation) &&
               !strcmp(a->kind, b->kind) && !strcmp(a->ns, b->ns) && !strcmp(a->name, b->name);
}

/*
 * The route reading only route->reads answers as the route reading everything; both decodes agree
 * on every field and the picked object is the whole one pruned.
 */
static void check_picked_like_whole(const struct tsr_webhook_route *route,
                                    const struct tsr_webhook_lookup *lookup, const char *text,
                                    size_t len, const char *response,
                                    const struct tsr_webhook_outcome *out)
{
        struct tsr_webhook_route whole = *route;
        struct tsr_webhook_outcome whole_out;
        struct tsr_review picked_review, whole_review;
        struct tsr_diag picked_diag, whole_diag;
        json_t *picked_doc = NULL, *whole_doc = NULL;
        char *whole_response = NULL;
        int picked_rc, whole_rc;

        whole.reads = NULL;
        if (tsr_webhook_dispatch(&whole, lookup, text, len, &whole_response, &whole_out) ||
            !whole_response || strcmp(response, whole_response) || !same_outcome(out, &whole_out))
                abort();
        free(whole_response);
        tsr_diag_clear(&picked_diag);
        tsr_diag_clear(&whole_diag);
        picked_rc =
            tsr_review_decode(text, len, route->reads, &picked_review, &picked_doc, &picked_diag);
        whole_rc = tsr_review_decode(text, len, NULL, &whole_review, &whole_doc, &whole_diag);
        if (picked_rc != whole_rc || strcmp(picked_diag.msg, whole_diag.msg))
                abort();
        if (!picked_rc) {
                json_t *objects[2][2] = {{picked_review.object, whole_review.object},
                                         {picked_review.old_object, whole_review.old_object}};

                if (strcmp(picked_review.uid, whole_review.uid) ||
                    strcmp(picked_review.operation, whole_review.operation) ||
                    strcmp(picked_review.kind, whole_review.kind) ||
                    strcmp(picked_review.name, whole_review.name) ||
                    strcmp(picked_review.ns, whole_review.ns) ||
                    picked_review.dry_run != whole_review.dry_run)
                        abort();
                for (int i = 0; i < 2; i++) {
                        json_t *model;

                        if (!objects[i][0] != !objects[i][1])
                                abort();
                        if (!objects[i][1])
                                continue;
                        /* Picked, or read whole where the picker declined the body. */
                        model = model_pick(objects[i][1], route->reads);
                        if (!model_same_text(objects[i][0], model) &&
                            !model_same_text(objects[i][0], objects[i][1]))
                                abort();
                        json_decref(model);
                }
        }
        json_decref(picked_doc);
        json_decref(whole_doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const struct tsr_webhook_route *route;
        struct tsr_webhook_outcome out, again;
        struct tsr_webhook_lookup lookup;
        struct tsr_review review;
        struct tsr_diag diag;
        json_t *body, *doc = NULL;
        json_error_t err;
        const char *text;
        char *response = NULL, *response2 = NULL;
        size_t len;
        int refused;

        if (size < 1 || size - 1 > BODY_MAX)
                return 0;
        if (!fixture)
                setup();
        route = &tsr_webhook_routes[data[0] % tsr_webhook_n_routes];
        lookup_for((unsigned)(data[0] / tsr_webhook_n_routes), &lookup);
        text = (const char *)data + 1;
        len = size - 1;

        if (tsr_webhook_dispatch(route, &lookup, text, len, &response, &out) || !response)
                abort();
        /* The second time under a JSON arena, as `tessera webhook` answers: the same bytes, and
         * every jansson value it made freed by the end. */
        tsr_json_arena_begin();
        if (tsr_webhook_dispatch(route, &lookup, text, len, &response2, &again) || !response2 ||
            strcmp(response, response2) || !same_outcome(&out, &again))
                abort();
        if (tsr_json_arena_end() != 0)
                abort();
        if (!json_equal(fixture, pristine))
                abort();
        if (route->reads)
                check_picked_like_whole(route, &lookup, text, len, response, &out);

        body = json_loads(response, JSON_REJECT_DUPLICATES, &err);
        if (!json_is_object(body))
                abort();
        /* The response is written as jansson writes it: its compact dump gives the same bytes. */
        {
                char *again_text = json_dumps(body, JSON_COMPACT);

                if (!again_text || strcmp(again_text, response))
                        abort();
                free(again_text);
        }
        tsr_diag_clear(&diag);
        refused = tsr_review_decode(text, len, NULL, &review, &doc, &diag);
        if (refused) {
                if (out.http_status != 400 || out.decoded)
                        abort();
                check_status(body, 400);
        } else if (out.http_status == 500) {
                if (!out.decoded)
                        abort();
                check_status(body, 500);
        } else {
                if (out.http_status != 200 || !out.decoded ||
                    strncmp(out.uid, review.uid, sizeof(out.uid) - 1))
                        abort();
                check_review(route, &review, body, &out);
        }
        json_decref(doc);
        json_decref(body);
        free(response);
        free(response2);
        return 0;
}
