/*
 * webhooks.c - the simulated API server's admission chain, running the same handlers
 * `tessera webhook` serves (src/webhook/) over a lookup that reads the virtual cluster.
 *
 * Order, as the API server calls them: the mutating configurations sorted by name, so
 * `gpustack-worker-mutation` (gate 1's Pod mutate) before Kueue's (the admission scheduling gate
 * on a queued Pod), then the validating webhooks on the mutated object (gate 1's rules). Each
 * mutating answer travels as the RFC 6902 patch the real server would send, and the API server's
 * half applies it. A Workload CREATE goes through the Workload fit pin the same way.
 */
#include "sim/actors.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "codec/json_patch.h"
#include "codec/kueue_chain.h"
#include "sim/render.h"
#include "webhook/pod.h"
#include "webhook/workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POD_WEBHOOK_MUTATE   "mutate.gpustack-worker.core.v1.pod"
#define POD_WEBHOOK_VALIDATE "validate.gpustack-worker.core.v1.pod"
#define KUEUE_MANAGED_LABEL  "kueue.x-k8s.io/managed"

/* ---- the lookup the handlers read the virtual cluster through ------------------------------ */

static const struct tsr_chain_pool *find_pool(const struct tsr_cluster *c,
                                              struct tsr_chain_pool *pools, const char *name,
                                              const char *entrance)
{
        size_t np;

        tsr_cluster_pools(c, pools, &np);
        for (size_t i = 0; i < np; i++)
                if ((name && !strcmp(pools[i].name, name)) ||
                    (entrance && !strcmp(pools[i].entrance, entrance)))
                        return &pools[i];
        return NULL;
}

/*
 * Pool p's InstanceType (p points into pools, tsr_cluster_pools' copy), built once per
 * c->nodes_gen: a Pod's admission reads it up to three times (gate 1's mutate and validate, the
 * Workload webhook) with nothing moved between. The handlers only read what a lookup returns
 * (the daemons' cache hands out objects it never modifies in place either). A new reference, or
 * NULL.
 */
static json_t *instancetype_of(struct tsr_cluster *c, const struct tsr_chain_pool *pools,
                               const struct tsr_chain_pool *p)
{
        struct sim_instancetype_memo *m;

        if (!p)
                return NULL;
        m = &c->instancetypes[p - pools];
        if (!m->obj || m->gen != c->nodes_gen) {
                json_decref(m->obj);
                m->obj = sim_instancetype_json(c, p);
                m->gen = c->nodes_gen;
        }
        return json_incref(m->obj);
}

static json_t *lookup_instancetype(void *ctx, const char *name)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];

        return instancetype_of(ctx, pools, find_pool(ctx, pools, name, NULL));
}

static json_t *lookup_by_entrance(void *ctx, const char *lq, size_t *matches)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        const struct tsr_chain_pool *p = find_pool(ctx, pools, NULL, lq);

        if (matches)
                *matches = p != NULL;
        return instancetype_of(ctx, pools, p);
}

/* The entrance LocalQueue exists in every namespace and points at its pool's ClusterQueue. */
static json_t *lookup_localqueue(void *ctx, const char *ns, const char *name)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        const struct tsr_chain_pool *p = find_pool(ctx, pools, NULL, name);
        json_t *lq;

        return p && !tsr_kueue_local_queue(p, ns, &lq, NULL) ? lq : NULL;
}

static json_t *lookup_clusterqueue(void *ctx, const char *name)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        const struct tsr_chain_pool *p = find_pool(ctx, pools, name, NULL);

        return p ? sim_clusterqueue_json(ctx, p) : NULL;
}

static struct tsr_webhook_lookup lookup_of(struct tsr_cluster *c)
{
        struct tsr_webhook_lookup l;

        tsr_webhook_lookup_init(&l);
        l.ctx = c;
        l.instancetype = lookup_instancetype;
        l.instancetype_by_entrance = lookup_by_entrance;
        l.localqueue = lookup_localqueue;
        l.clusterqueue = lookup_clusterqueue;
        l.settings = c->settings;
        return l;
}

/* ---- the API server's half ----------------------------------------------------------------- */

static int deny(struct tsr_buf *out, const char *webhook, const char *msg)
{
        return tsr_buf_addf(out,
                            "Error from server (Forbidden): admission webhook \"%s\" denied "
                            "the request: %s\n",
                            webhook, msg);
}

/* Applies what a mutating handler answered: the patch from *obj to patched. */
static int apply_answer(json_t **obj, json_t *patched, struct tsr_diag *diag)
{
        json_t *ops = NULL;
        int rc;

        if (!patched)
                return 0;
        rc = tsr_json_patch_diff(*obj, patched, &ops);
        if (rc)
                return tsr_diag_set(diag, rc, "out of memory");
        rc = tsr_json_patch_apply(obj, ops, diag);
        json_decref(ops);
        return rc;
}

/* A CREATE review of obj (borrowed) of the given kind in namespace ns. */
static struct tsr_review create_review(json_t *obj, const char *kind, const char *ns)
{
        struct tsr_review r;

        memset(&r, 0, sizeof(r));
        snprintf(r.uid, sizeof(r.uid), "sim");
        snprintf(r.operation, sizeof(r.operation), "CREATE");
        snprintf(r.kind, sizeof(r.kind), "%s", kind);
        snprintf(r.ns, sizeof(r.ns), "%s", ns ? ns : "");
        r.object = obj;
        return r;
}

/* Runs one handler on *obj; a denial is printed, a patch applied. */
static int call(struct tsr_cluster *c, tsr_webhook_handler handler, const char *webhook,
                json_t **obj, const char *kind, struct tsr_buf *out, bool *denied,
                struct tsr_diag *diag)
{
        struct tsr_webhook_lookup lookup = lookup_of(c);
        const char *ns =
            json_string_value(json_object_get(json_object_get(*obj, "metadata"), "namespace"));
        struct tsr_review review = create_review(*obj, kind, ns);
        struct tsr_verdict *v = calloc(1, sizeof(*v));
        int rc;

        if (!v)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        rc = handler(&lookup, &review, v, diag);
        if (!rc && !v->allowed) {
                *denied = true;
                rc = deny(out, webhook, v->message);
        } else if (!rc) {
                rc = apply_answer(obj, v->patched, diag);
        }
        json_decref(v->patched);
        free(v);
        return rc;
}

/* Kueue's Pod webhook: a queued Pod waits behind the admission scheduling gate. */
static int kueue_gate(json_t **pod, struct tsr_diag *diag)
{
        json_t *mutated = json_deep_copy(*pod), *spec, *gates;
        int rc;

        if (!mutated)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        spec = json_object_get(mutated, "spec");
        gates = json_object_get(spec, "schedulingGates");
        if (!json_is_array(gates)) {
                gates = json_array();
                json_object_set_new(spec, "schedulingGates", gates);
        }
        json_array_append_new(gates, json_pack("{s:s}", "name", SIM_ADMISSION_GATE));
        json_object_set_new(json_object_get(json_object_get(mutated, "metadata"), "labels"),
                            KUEUE_MANAGED_LABEL, json_string("true"));
        rc = apply_answer(pod, mutated, diag);
        json_decref(mutated);
        return rc;
}

int sim_webhook_pod(struct tsr_cluster *c, json_t **pod, struct tsr_buf *out, bool *denied,
                    struct tsr_diag *diag)
{
        int rc;

        *denied = false;
        if (!json_string_value(json_object_get(
                json_object_get(json_object_get(*pod, "metadata"), "labels"), SIM_QUEUE_LABEL)))
                return 0; /* every webhook here selects on the queue label */
        rc = call(c, tsr_webhook_pod_mutate, POD_WEBHOOK_MUTATE, pod, "Pod", out, denied, diag);
        if (!rc && !*denied)
                rc = kueue_gate(pod, diag);
        if (!rc && !*denied)
                rc = call(c, tsr_webhook_pod_validate, POD_WEBHOOK_VALIDATE, pod, "Pod", out,
                          denied, diag);
        return rc;
}

void sim_webhook_workload(struct tsr_cluster *c, struct sim_workload *w)
{
        json_t *obj = sim_workload_json(c, w), *podset;
        struct tsr_buf ignored = TSR_BUF_INIT;
        bool denied = false;
        size_t i;

        /* failurePolicy Ignore: whatever goes wrong leaves the Workload as it is */
        if (!obj || call(c, tsr_webhook_workload_mutate, "mutate.gpustack-worker.workload", &obj,
                         "Workload", &ignored, &denied, NULL) == 0) {
                json_array_foreach(json_object_get(json_object_get(obj, "spec"), "podSets"), i,
                                   podset)
                {
                        json_t *tmpl = json_object_get(podset, "template");

                        if (i < w->n_podsets && tmpl) {
                                json_decref(w->podsets[i].tmpl);
                                w->podsets[i].tmpl = json_incref(tmpl);
                        }
                }
        }
        tsr_buf_release(&ignored);
        json_decref(obj);
}
