/*
 * webhooks.c - the admission webhooks a Pod or Workload CREATE passes through in the simulated
 * API server, in the order the API server calls them: the MutatingWebhookConfiguration
 * `gpustack-worker-mutation` sorts before Kueue's, so gate 1 folds a Pod's units before Kueue
 * sees it. A mutating webhook answers a JSON Patch; the API server applies it. Gate 1 judges the
 * Pod once: its rules do not read what its own mutation writes (the folded units, the cores
 * default, the card-count pin), so the verdict on the mutated Pod would be the same.
 */
#include "sim/actors.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "codec/affinity.h"
#include "codec/json_patch.h"
#include "core/instancetype.h"
#include "core/keys.h"
#include "core/pin.h"
#include "core/request.h"
#include "sim/resources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POD_WEBHOOK_MUTATE   "mutate.gpustack-worker.core.v1.pod"
#define POD_WEBHOOK_VALIDATE "validate.gpustack-worker.core.v1.pod"
#define KUEUE_MANAGED_LABEL  "kueue.x-k8s.io/managed"

static int deny(struct tsr_buf *out, const char *webhook, const char *msg)
{
        return tsr_buf_addf(out,
                            "Error from server (Forbidden): admission webhook \"%s\" denied "
                            "the request: %s\n",
                            webhook, msg);
}

/* The API server's half of a mutating webhook: diff what the webhook built, apply the patch. */
static int answer_patch(json_t **pod, json_t *mutated, struct tsr_diag *diag)
{
        json_t *ops = NULL;
        int rc = tsr_json_patch_diff(*pod, mutated, &ops);

        if (rc)
                return tsr_diag_set(diag, rc, "out of memory");
        rc = tsr_json_patch_apply(pod, ops, diag);
        json_decref(ops);
        return rc;
}

/* The fold pool gate 1 divides by: the InstanceType's accelerator memory and offered profiles. */
static int fold_pool(struct tsr_cluster *c, const struct sim_pool *pool,
                     struct tsr_pool_views *views, struct tsr_fold_pool *fold,
                     struct tsr_diag *diag)
{
        int rc = tsr_cluster_pool_views(c, pool, views, diag);

        if (rc)
                return rc;
        fold->manufacturer = tsr_catalog_manufacturer(pool->product->manufacturer);
        fold->memory_mib = pool->product->vram_mib;
        fold->n_profiles = views->n_profiles;
        fold->profiles = views->physical_profiles;
        return 0;
}

/* gpustack's Pod webhook (gate 1): mutate (folds, defaults, card-count pin), then validate. */
static int gate1(struct tsr_cluster *c, const struct sim_pool *pool, json_t **pod,
                 struct tsr_buf *out, bool *denied, struct tsr_diag *diag)
{
        struct tsr_pool_views views;
        struct tsr_fold_pool fold;
        struct tsr_request_verdict *v = malloc(sizeof(*v));
        struct tsr_node_requirement pin;
        struct tsr_pod_spec *ps = NULL;
        char akey[TSR_NAME_MAX], msg[TSR_FIELD_ERRORS_MAX * TSR_FIELD_ERROR_LEN];
        json_t *mutated = NULL;
        bool changed;
        int rc;

        if (!v)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        rc = fold_pool(c, pool, &views, &fold, diag);
        if (!rc)
                rc = tsr_pod_spec_new(*pod, &ps, diag);
        if (!rc)
                rc = tsr_request_evaluate(&ps->req, &fold, v, diag);
        if (rc)
                goto out;
        if (v->n_errors) {
                *denied = true;
                rc = deny(out, POD_WEBHOOK_VALIDATE, tsr_request_message(v, msg, sizeof(msg)));
                goto out;
        }
        mutated = json_deep_copy(*pod);
        if (!mutated) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < v->n_edits && !rc; i++)
                rc = tsr_pod_spec_write_edit(mutated, &ps->req, &v->edits[i]);
        if (!rc && tsr_instancetype_accel_key(pool->product, akey, sizeof(akey)) == 0 &&
            tsr_pin_card_count(&ps->req, fold.manufacturer, akey, &pin))
                rc = tsr_affinity_require(json_object_get(mutated, "spec"), &pin, 1, &changed);
        if (rc == TSR_EPARSE) {
                *denied = true;
                rc = deny(out, POD_WEBHOOK_MUTATE,
                          "spec.affinity.nodeAffinity: Invalid value: the required node affinity "
                          "cannot take the card-count pin");
                goto out;
        }
        if (!rc)
                rc = answer_patch(pod, mutated, diag);
out:
        json_decref(mutated);
        free(ps);
        free(v);
        return rc;
}

/* Kueue's Pod webhook: a queued Pod waits behind the admission scheduling gate. */
static int kueue_gate(json_t **pod, struct tsr_diag *diag)
{
        json_t *mutated = json_deep_copy(*pod), *spec, *labels, *gates;
        json_t *meta;
        int rc = 0;

        if (!mutated)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        meta = json_object_get(mutated, "metadata");
        labels = json_object_get(meta, "labels");
        spec = json_object_get(mutated, "spec");
        gates = json_object_get(spec, "schedulingGates");
        if (!json_is_array(gates)) {
                gates = json_array();
                json_object_set_new(spec, "schedulingGates", gates);
        }
        json_array_append_new(gates, json_pack("{s:s}", "name", SIM_ADMISSION_GATE));
        json_object_set_new(labels, KUEUE_MANAGED_LABEL, json_string("true"));
        rc = answer_patch(pod, mutated, diag);
        json_decref(mutated);
        return rc;
}

/* A Pod on a CPU-only pool's queue may not ask for accelerators: no divisor can size them. */
static int refuse_accelerators(const struct sim_pool *pool, const char *queue, json_t *pod,
                               struct tsr_buf *out, bool *denied, struct tsr_diag *diag)
{
        struct tsr_pod_spec *ps;
        char msg[1024];
        int rc = tsr_pod_spec_new(pod, &ps, diag);

        if (rc)
                return rc;
        for (size_t i = 0; i < ps->req.n && !*denied; i++) {
                const struct tsr_container_req *ct = &ps->req.c[i];
                const struct tsr_res_item *lists[2] = {ct->requests, ct->limits};
                size_t counts[2] = {ct->n_requests, ct->n_limits};

                for (int l = 0; l < 2 && !*denied; l++) {
                        for (size_t x = 0; x < counts[l] && !*denied; x++) {
                                struct tsr_key_class kc;

                                tsr_key_classify(lists[l][x].key, &kc);
                                if (kc.kind == TSR_KEY_NONE)
                                        continue;
                                snprintf(msg, sizeof(msg),
                                         "spec: Forbidden: the InstanceType %s behind queue %s "
                                         "offers no accelerators; remove %s",
                                         pool->name, queue, lists[l][x].key);
                                *denied = true;
                        }
                }
        }
        free(ps);
        return *denied ? deny(out, POD_WEBHOOK_VALIDATE, msg) : 0;
}

int sim_webhook_pod(struct tsr_cluster *c, json_t **pod, struct tsr_buf *out, bool *denied,
                    struct tsr_diag *diag)
{
        struct sim_pool pools[SIM_POOLS_MAX];
        const struct sim_pool *pool;
        const char *queue = json_string_value(json_object_get(
            json_object_get(json_object_get(*pod, "metadata"), "labels"), SIM_QUEUE_LABEL));
        size_t np;
        int rc;

        *denied = false;
        if (!queue)
                return 0; /* every webhook here selects on the queue label */
        tsr_cluster_pools(c, pools, &np);
        pool = tsr_cluster_pool_by_entrance(pools, np, queue);
        if (!pool) {
                char msg[256];

                snprintf(msg, sizeof(msg),
                         "no InstanceType carries " SIM_ENTRANCE_LABEL "=%s; a Pod on this queue "
                         "cannot be sized",
                         queue);
                *denied = true;
                return deny(out, POD_WEBHOOK_MUTATE, msg);
        }
        if (pool->product) {
                rc = gate1(c, pool, pod, out, denied, diag);
                if (rc || *denied)
                        return rc;
        } else {
                rc = refuse_accelerators(pool, queue, *pod, out, denied, diag);
                if (rc || *denied)
                        return rc;
        }
        return kueue_gate(pod, diag);
}

/* Whether the Workload fit pin applies to w: its queue fronts an accelerated InstanceType. */
static const struct sim_pool *pinned_pool(struct tsr_cluster *c, const struct sim_workload *w,
                                          struct sim_pool *pools, size_t *np)
{
        const struct sim_pool *pool;

        if (!c->workload_fit_affinity || w->reserved || strncmp(w->queue, "gpustack-fnv64-", 15))
                return NULL;
        tsr_cluster_pools(c, pools, np);
        pool = tsr_cluster_pool_by_entrance(pools, *np, w->queue);
        return pool && pool->product ? pool : NULL;
}

void sim_webhook_workload(struct tsr_cluster *c, struct sim_workload *w)
{
        struct sim_pool pools[SIM_POOLS_MAX];
        const struct sim_pool *pool;
        char akey[TSR_NAME_MAX];
        size_t np;

        pool = pinned_pool(c, w, pools, &np);
        if (!pool || tsr_instancetype_accel_key(pool->product, akey, sizeof(akey)))
                return;
        for (size_t p = 0; p < w->n_podsets; p++) {
                struct tsr_node_requirement pins[TSR_PIN_MAX];
                struct tsr_pod_spec *ps;
                json_t *mutated;
                size_t n;
                bool changed;

                if (tsr_pod_spec_new(w->podsets[p].tmpl, &ps, NULL))
                        continue; /* failurePolicy Ignore: leave it unchanged */
                n = tsr_pin_workload(
                    &ps->req, tsr_catalog_manufacturer(pool->product->manufacturer), akey, pins);
                free(ps);
                mutated = json_deep_copy(w->podsets[p].tmpl);
                if (n && mutated &&
                    tsr_affinity_require(json_object_get(mutated, "spec"), pins, n, &changed) ==
                        0 &&
                    changed)
                        answer_patch(&w->podsets[p].tmpl, mutated, NULL);
                json_decref(mutated);
        }
}
