/*
 * node_devices_check.c - the gpustack-node-devices AdmissionCheck (gate 3) on a cluster: the
 * AdmissionCheck object, applied at start-up (retried with backoff until Kueue's CRD serves it)
 * and kept Active, and the verdict on one Workload at a time.
 *
 * A Workload is judged when it holds its quota reservation, lists this check, and is active and
 * not evicted, finished or admitted (tsr_admit_snapshot_judges). Its snapshot is the one
 * codec/admit_snapshot.h builds for the simulator too: the pool is the chain's pool named by
 * status.admission.clusterQueue (core/chain.h), each node's flavor the chain's, its capability
 * read back from its Devices object, its ledger rebuilt from its Pods read once, uncached
 * (fieldSelector spec.nodeName); the nodes read are those the topology assignment names, or the
 * whole pool when a PodSet has no hostname-level assignment. A node whose Pods cannot be read
 * leaves the Workload unjudged and the key retried (a ledger that is not ready gives no verdict).
 *
 * Inflight Workloads count from the cache, and from this controller's memory of the Ready
 * verdicts it wrote that the cache does not show yet: two Workloads judged inside one window
 * never both get the same accelerators. The memory (c->verdicts, the worker's alone) forgets a
 * Workload once the cache shows its verdict, once it is gone or no longer reserved.
 *
 * A verdict is written only when its state or message differs from what the Workload carries:
 * server-side apply of status.admissionChecks[gpustack-node-devices] as the field manager
 * gpustack-node-devices, with the Workload's uid and resourceVersion (a stale copy gets a 409 and
 * is retried on a fresh one), lastTransitionTime moved only with the state, and
 * requeueAfterSeconds (30) on Retry. It never answers Rejected and never preempts.
 */
#include "controller/controller_int.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "codec/admit_snapshot.h"
#include "codec/kueue_chain.h"
#include "codec/kueue_workload.h"
#include "controller/managed_nodes.h"
#include "controller/workload_index.h"
#include "controller/workqueue.h"
#include "kube/cache.h"
#include "kube/client.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KUEUE_API "/apis/kueue.x-k8s.io/v1beta2"

/* ---- the AdmissionCheck object ------------------------------------------------------------ */

#define AC_PATH KUEUE_API "/admissionchecks/" TSR_KUEUE_NODE_DEVICES

bool ctl_admission_check_active(struct tsr_controller *c, json_t **cached)
{
        json_t *ac = tsr_kube_cache_get(c->cache, TSR_KUBE_CACHE_ADMISSIONCHECKS, NULL,
                                        TSR_KUEUE_NODE_DEVICES);
        json_t *conds = json_object_get(json_object_get(ac, "status"), "conditions"), *cond;
        bool active = false;
        size_t i;

        json_array_foreach(conds, i, cond)
        {
                const char *type = json_string_value(json_object_get(cond, "type"));
                const char *st = json_string_value(json_object_get(cond, "status"));

                if (type && st && !strcmp(type, "Active"))
                        active = !strcmp(st, "True");
        }
        if (cached)
                *cached = ac;
        else
                json_decref(ac);
        return active;
}

static bool controller_name_is_ours(json_t *ac)
{
        const char *v =
            json_string_value(json_object_get(json_object_get(ac, "spec"), "controllerName"));

        return v && !strcmp(v, TSR_KUEUE_NODE_DEVICES_CONTROLLER);
}

int ctl_admission_check_reconcile(struct tsr_controller *c)
{
        struct tsr_diag diag;
        json_t *obj = NULL, *cached = NULL, *after = NULL, *status;
        char now[32];
        int rc;

        tsr_diag_clear(&diag);
        if (ctl_admission_check_active(c, &cached) && controller_name_is_ours(cached)) {
                json_decref(cached);
                return 0;
        }
        json_decref(cached);
        rc = tsr_kueue_admission_check(&obj, &diag);
        if (!rc)
                rc = ctl_apply(c, AC_PATH, obj, CTL_MANAGER, &after, &diag);
        json_decref(obj);
        if (rc) {
                /* Kueue's CRD not established yet (404) is the common case: retried with backoff.
                 */
                tsr_log(TSR_LOG_WARN, "AdmissionCheck not applied", "name", TSR_KUEUE_NODE_DEVICES,
                        "error", diag.msg, NULL);
                return rc;
        }
        ctl_now_rfc3339(now, sizeof(now));
        status = json_pack(
            "{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s, s:s, s:s, s:I}]}}", "apiVersion",
            TSR_KUEUE_API_VERSION, "kind", "AdmissionCheck", "metadata", "name",
            TSR_KUEUE_NODE_DEVICES, "status", "conditions", "type", "Active", "status", "True",
            "reason", "Ready", "message", "tessera controller answers this check",
            "lastTransitionTime", now, "observedGeneration",
            json_integer_value(json_object_get(json_object_get(after, "metadata"), "generation")));
        rc = status ? ctl_apply(c, AC_PATH "/status", status, CTL_MANAGER_CHECK, NULL, &diag)
                    : TSR_ENOMEM;
        if (rc) {
                tsr_log(TSR_LOG_WARN, "AdmissionCheck not made Active", "error", diag.msg, NULL);
        } else {
                tsr_log(TSR_LOG_INFO, "AdmissionCheck Active", "name", TSR_KUEUE_NODE_DEVICES,
                        NULL);
                ctl_event(c, after, "Normal", "Active", "tessera controller answers this check");
                ctl_enqueue(c, "chain"); /* the accelerated queues may reference it now */
        }
        json_decref(status);
        json_decref(after);
        return rc;
}

/* ---- the verdicts ---------------------------------------------------------------------- */

/* How long a written Ready is remembered at most when the cache never shows it (a relist that
 * skipped the change): past it, the Workload is judged again from what the cache holds. */
#define VERDICT_MEMORY_MS 30000

static int64_t mono_ms(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The memory key of a Workload: "ns/name". */
static void memory_key(const struct tsr_snapshot_workload *w, char *out, size_t len)
{
        snprintf(out, len, "%s/%s", w->ns, w->name);
}

/* Whether the memory holds a Ready the cache does not show yet for w (uid obj's). */
static bool remembered_ready(struct tsr_controller *c, const struct tsr_snapshot_workload *w,
                             json_t *obj)
{
        char key[600];
        json_t *m;
        const char *uid;

        memory_key(w, key, sizeof(key));
        m = json_object_get(c->verdicts, key);
        uid = json_string_value(json_object_get(m, "uid"));
        if (!m)
                return false;
        if (!uid || !ctl_meta_str(obj, "uid") || strcmp(uid, ctl_meta_str(obj, "uid")) ||
            !w->reserved || (w->has_check && w->check == TSR_CHECK_READY) ||
            mono_ms() - json_integer_value(json_object_get(m, "at")) > VERDICT_MEMORY_MS) {
                json_object_del(c->verdicts, key); /* gone, replaced, released, or shown */
                return false;
        }
        return true;
}

/* The cached Workloads as the index holds them parsed; those the memory says are Ready marked
 * so. The objects and the strings the snapshot structs point at are the index's, valid until
 * its next refresh. */
struct workloads {
        json_t **obj; /* obj[i]: the object w[i] was read from */
        struct tsr_snapshot_workload *w;
        size_t n;
        size_t *of_entry; /* of_entry[e]: the index's entry e as w[i], SIZE_MAX: malformed */
};

static void workloads_release(struct workloads *ws)
{
        free(ws->w);
        free(ws->obj);
        free(ws->of_entry);
        memset(ws, 0, sizeof(*ws));
}

static int workloads_load(struct tsr_controller *c, struct workloads *ws)
{
        const struct ctl_workload_index *x = &c->workloads;
        int rc = ctl_workload_index_refresh(&c->workloads, c->cache);

        memset(ws, 0, sizeof(*ws));
        if (rc)
                return rc;
        ws->w = calloc(x->n + 1, sizeof(*ws->w));
        ws->obj = calloc(x->n + 1, sizeof(*ws->obj));
        ws->of_entry = calloc(x->n + 1, sizeof(*ws->of_entry));
        if (!ws->w || !ws->obj || !ws->of_entry) {
                workloads_release(ws);
                return TSR_ENOMEM;
        }
        for (size_t i = 0; i < x->n; i++) {
                const struct tsr_kueue_workload *k = x->v[i].parsed;

                ws->of_entry[i] = k ? ws->n : SIZE_MAX;
                if (!k)
                        continue; /* malformed: not judged, not counted */
                ws->obj[ws->n] = x->v[i].obj;
                ws->w[ws->n] = k->w;
                if (remembered_ready(c, &k->w, x->v[i].obj)) {
                        ws->w[ws->n].has_check = true;
                        ws->w[ws->n].check = TSR_CHECK_READY;
                }
                ws->n++;
        }
        return 0;
}

void ctl_workloads_scan(struct tsr_controller *c)
{
        struct workloads ws;
        char key[TSR_WORKQUEUE_KEY_MAX];

        if (workloads_load(c, &ws))
                return;
        for (size_t i = 0; i < ws.n; i++)
                if (tsr_admit_snapshot_judges(&ws.w[i]) &&
                    snprintf(key, sizeof(key), "workload/%s/%s", ws.w[i].ns, ws.w[i].name) <
                        (int)sizeof(key))
                        ctl_enqueue(c, key);
        workloads_release(&ws);
}

/* The Pods bound to node, read from the API server (a new array), or NULL with diag. */
static json_t *node_pods(struct tsr_controller *c, const char *node, struct tsr_diag *diag)
{
        struct tsr_kube_list_opts lo = {.limit = 500};
        char selector[300];
        json_t *list = NULL, *items;

        snprintf(selector, sizeof(selector), "spec.nodeName=%s", node);
        lo.field_selector = selector;
        if (tsr_kube_client_list_all(c->cfg.client, "/api/v1/pods", &lo, &list, NULL, diag))
                return NULL;
        items = json_incref(json_object_get(list, "items"));
        json_decref(list);
        return items;
}

/* Whether a judged Workload names node in one of its PodSets' domains. */
static bool named(const struct tsr_snapshot_workload *const *targets, size_t n, const char *node)
{
        for (size_t t = 0; t < n; t++)
                for (size_t p = 0; p < targets[t]->n_podsets; p++)
                        for (size_t d = 0; d < targets[t]->podsets[p].n_domains; d++)
                                if (!strcmp(targets[t]->podsets[p].domains[d].node, node))
                                        return true;
        return false;
}

/* Whether every PodSet of every judged Workload has a hostname-level assignment. */
static bool all_placed(const struct tsr_snapshot_workload *const *targets, size_t n)
{
        for (size_t t = 0; t < n; t++)
                for (size_t p = 0; p < targets[t]->n_podsets; p++)
                        if (!targets[t]->podsets[p].n_domains)
                                return false;
        return true;
}

/* The pool's snapshot nodes, with their Pods read (pods[i] owned). */
struct pool_nodes {
        struct tsr_snapshot_node *v; /* v[i].flavor points into flavors */
        json_t **pods;               /* one array per node */
        json_t ***pod_ptrs;
        size_t n;
        struct tsr_chain_flavor *flavors; /* the pool's, TSR_CHAIN_FLAVORS_MAX of them */
};

static void pool_nodes_release(struct pool_nodes *pn)
{
        for (size_t i = 0; i < pn->n; i++) {
                json_decref(pn->pods[i]);
                free(pn->pod_ptrs[i]);
        }
        free(pn->v);
        free(pn->pods);
        free(pn->pod_ptrs);
        free(pn->flavors);
        memset(pn, 0, sizeof(*pn));
}

/*
 * Fills pn with the nodes of the pool of ClusterQueue cq that the n targets need (those they
 * name, or the whole pool when one of them names none), and *product with the pool's model.
 * Returns 0, TSR_ENOTFOUND (no such accelerated pool), or an error reading Pods, with diag.
 */
static int pool_nodes_load(struct tsr_controller *c, const struct ctl_nodes *nodes, const char *cq,
                           const struct tsr_snapshot_workload *const *targets, size_t n_targets,
                           struct pool_nodes *pn, const struct tsr_product **product,
                           struct tsr_diag *diag)
{
        bool whole_pool = !all_placed(targets, n_targets);
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        int *node_flavor = calloc(nodes->n + 1, sizeof(*node_flavor));
        const struct tsr_chain_pool *pool = NULL;
        size_t np = 0, nf = 0;
        int rc = 0;

        memset(pn, 0, sizeof(*pn));
        pn->v = calloc(nodes->n + 1, sizeof(*pn->v));
        pn->pods = calloc(nodes->n + 1, sizeof(*pn->pods));
        pn->pod_ptrs = calloc(nodes->n + 1, sizeof(*pn->pod_ptrs));
        /* on the heap: the snapshot nodes' flavor names point into it after this returns */
        pn->flavors = calloc(TSR_CHAIN_FLAVORS_MAX, sizeof(*pn->flavors));
        if (!node_flavor || !pn->v || !pn->pods || !pn->pod_ptrs || !pn->flavors) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        rc = tsr_chain_pools(nodes->chain, nodes->n, pools, TSR_CHAIN_POOLS_MAX, &np, diag);
        for (size_t i = 0; !rc && i < np; i++)
                if (!strcmp(pools[i].name, cq) && pools[i].product)
                        pool = &pools[i];
        if (!rc && !pool)
                rc =
                    tsr_diag_set(diag, TSR_ENOTFOUND,
                                 "ClusterQueue %s is no accelerated pool of the managed nodes", cq);
        if (!rc)
                rc = tsr_chain_flavors(nodes->chain, nodes->n, pool, pn->flavors,
                                       TSR_CHAIN_FLAVORS_MAX, &nf, node_flavor, diag);
        for (size_t i = 0; !rc && i < nodes->n; i++) {
                const struct ctl_node *n = &nodes->v[i];
                struct tsr_snapshot_node *sn = &pn->v[pn->n];
                json_t *pods, *pod;
                size_t k;

                if (node_flavor[i] < 0 || (!whole_pool && !named(targets, n_targets, n->name)))
                        continue;
                pods = node_pods(c, n->name, diag);
                if (!pods) {
                        rc = TSR_EIO;
                        break;
                }
                pn->pods[pn->n] = pods;
                pn->pod_ptrs[pn->n] = calloc(json_array_size(pods) + 1, sizeof(json_t *));
                if (!pn->pod_ptrs[pn->n]) {
                        pn->n++;
                        rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                        break;
                }
                json_array_foreach(pods, k, pod) pn->pod_ptrs[pn->n][k] = pod;
                sn->name = n->name;
                sn->present = true;
                sn->flavor = pn->flavors[node_flavor[i]].name;
                sn->product = n->chain.product;
                sn->caps = n->caps;
                sn->n = n->chain.accel_count;
                sn->pods = pn->pod_ptrs[pn->n];
                sn->n_pods = json_array_size(pods);
                pn->n++;
        }
        if (!rc)
                *product = pool->product;
out:
        free(node_flavor);
        return rc;
}

/* Writes verdict v on Workload obj (its cached copy, borrowed) as this check's state. */
static int write_verdict(struct tsr_controller *c, json_t *obj,
                         const struct tsr_snapshot_workload *w, const struct tsr_admit_verdict *v,
                         struct tsr_diag *diag)
{
        char path[640], now[32];
        const char *when = NULL;
        json_t *entry, *body,
            *checks = json_object_get(json_object_get(obj, "status"), "admissionChecks"), *ac;
        size_t i;
        int rc;

        json_array_foreach(checks, i, ac)
        {
                const char *name = json_string_value(json_object_get(ac, "name"));

                if (name && !strcmp(name, TSR_KUEUE_NODE_DEVICES) &&
                    w->check == v->state) /* the state stands: so does its transition time */
                        when = json_string_value(json_object_get(ac, "lastTransitionTime"));
        }
        ctl_now_rfc3339(now, sizeof(now));
        entry = json_pack("{s:s, s:s, s:s, s:s}", "name", TSR_KUEUE_NODE_DEVICES, "state",
                          tsr_check_state_name(v->state), "message", v->message,
                          "lastTransitionTime", when ? when : now);
        if (entry && v->state == TSR_CHECK_RETRY)
                json_object_set_new(entry, "requeueAfterSeconds",
                                    json_integer(c->cfg.requeue_after_s));
        body = json_pack("{s:s, s:s, s:{s:s, s:s, s:s?, s:s?}, s:{s:[o]}}", "apiVersion",
                         TSR_KUEUE_API_VERSION, "kind", "Workload", "metadata", "name", w->name,
                         "namespace", w->ns, "uid", ctl_meta_str(obj, "uid"), "resourceVersion",
                         ctl_meta_str(obj, "resourceVersion"), "status", "admissionChecks", entry);
        snprintf(path, sizeof(path), KUEUE_API "/namespaces/%s/workloads/%s/status", w->ns,
                 w->name);
        rc = body ? ctl_apply(c, path, body, CTL_MANAGER_CHECK, NULL, diag)
                  : tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        json_decref(body);
        return rc;
}

/* Writes and records the verdict v on target (its cached object obj); 0 or the write's error. */
static int give_verdict(struct tsr_controller *c, json_t *obj,
                        const struct tsr_snapshot_workload *target,
                        const struct tsr_admit_verdict *v, const char *key)
{
        struct tsr_diag diag;
        int rc;

        if (target->has_check && target->check == v->state &&
            !strcmp(target->check_message, v->message)) {
                atomic_fetch_add(&c->verdicts_unchanged, 1);
                return 0;
        }
        tsr_diag_clear(&diag);
        rc = write_verdict(c, obj, target, v, &diag);
        if (rc) {
                tsr_log(rc == TSR_ESTALE ? TSR_LOG_DEBUG : TSR_LOG_WARN, "verdict not written",
                        "workload", key, "error", diag.msg, NULL);
                return rc;
        }
        atomic_fetch_add(v->state == TSR_CHECK_READY ? &c->verdicts_ready : &c->verdicts_retry, 1);
        if (v->state == TSR_CHECK_READY)
                json_object_set_new(c->verdicts, key,
                                    json_pack("{s:s?, s:I}", "uid", ctl_meta_str(obj, "uid"), "at",
                                              (json_int_t)mono_ms()));
        else
                json_object_del(c->verdicts, key);
        tsr_log(TSR_LOG_INFO, "verdict", "workload", key, "uid", ctl_meta_str(obj, "uid"), "state",
                tsr_check_state_name(v->state), "message", v->message, NULL);
        ctl_event(c, obj, v->state == TSR_CHECK_READY ? "Normal" : "Warning",
                  v->state == TSR_CHECK_READY ? "NodeDevicesReady" : "NodeDevicesRetry",
                  v->message);
        return 0;
}

/*
 * Judges the m keys group[0..m) of ClusterQueue cq (keys[t] names ws->w[at[t]]; the group in the
 * order the keys were queued) against one snapshot: their nodes' Pods read once, the inflight
 * Workloads charged once, and each Ready written charged before the next is judged. rc[t]
 * receives each one's result.
 */
static void judge_group(struct tsr_controller *c, const struct ctl_nodes *nodes,
                        struct workloads *ws, const char *cq, const size_t *at,
                        char (*keys)[TSR_WORKQUEUE_KEY_MAX], const size_t *group, size_t m, int *rc)
{
        const struct tsr_snapshot_workload **targets = calloc(m + 1, sizeof(*targets));
        const struct tsr_product *product = NULL;
        struct tsr_admit_snapshot *s = NULL;
        struct pool_nodes pn = {0};
        struct tsr_diag diag;
        int err = targets ? 0 : TSR_ENOMEM;

        tsr_diag_clear(&diag);
        for (size_t g = 0; targets && g < m; g++)
                targets[g] = &ws->w[at[group[g]]];
        if (!err)
                err = pool_nodes_load(c, nodes, cq, targets, m, &pn, &product, &diag);
        if (err == TSR_ENOTFOUND) {
                for (size_t g = 0; g < m; g++) {
                        tsr_log(TSR_LOG_WARN, "Workload not judged", "workload", keys[group[g]] + 9,
                                "error", diag.msg, NULL);
                        rc[group[g]] = 0;
                }
                goto out;
        }
        if (!err)
                err = tsr_admit_snapshot_new(product, pn.v, pn.n, ws->w, ws->n, cq, &s, &diag);
        if (!err)
                atomic_fetch_add(&c->verdict_snapshots, 1);
        for (size_t g = 0; g < m; g++) {
                const char *key = keys[group[g]] + 9; /* "ns/name" */
                struct tsr_admit_verdict v;
                int *r = &rc[group[g]];

                if (!atomic_load(&c->leading)) {
                        /* the Lease lost mid-batch: a standby writes nothing (the rest come
                         * back with the scan when this replica leads again) */
                        *r = 0;
                        continue;
                }
                *r = err ? err : tsr_admit_snapshot_verdict(s, targets[g], &v, &diag);
                if (*r) {
                        tsr_log(TSR_LOG_WARN, "Workload not judged: the ledger is not ready",
                                "workload", key, "error", diag.msg, NULL);
                        continue;
                }
                *r = give_verdict(c, ws->obj[at[group[g]]], targets[g], &v, key);
                if (*r || v.state != TSR_CHECK_READY)
                        continue;
                /* A Ready written: the next verdicts find its accelerators taken. Without the
                 * charge (out of memory) the rest of the group is not judged on this snapshot:
                 * they come back, judged on a fresh one. */
                if (!json_object_get(c->verdicts, key))
                        err = tsr_diag_set(&diag, TSR_ENOMEM, "out of memory");
                else
                        err = tsr_admit_snapshot_charge(s, targets[g], &diag);
        }
out:
        tsr_admit_snapshot_free(s);
        pool_nodes_release(&pn);
        free(targets);
}

void ctl_workloads_reconcile(struct tsr_controller *c, char (*keys)[TSR_WORKQUEUE_KEY_MAX],
                             size_t n, int *rc)
{
        struct workloads ws = {0};
        const struct ctl_nodes *nodes = NULL;
        size_t *at = calloc(n + 1, sizeof(*at)), *group = calloc(n + 1, sizeof(*group));
        bool *done = calloc(n + 1, sizeof(*done));
        struct tsr_diag diag;
        int err;

        tsr_diag_clear(&diag);
        err = at && group && done ? workloads_load(c, &ws) : TSR_ENOMEM;
        if (!err && !(nodes = ctl_nodes_view(c, &diag)))
                err = TSR_ENOMEM;
        for (size_t t = 0; t < n; t++) {
                rc[t] = err;
                if (err)
                        continue;
                /* "workload/<ns>/<name>": judged unless gone, not waiting for the check, or
                 * answered Ready already while the cache does not show it yet */
                const struct ctl_workload_entry *e =
                    ctl_workload_index_find(&c->workloads, keys[t] + 9);
                size_t i = e ? ws.of_entry[e - c->workloads.v] : SIZE_MAX;

                at[t] = i;
                done[t] = i == SIZE_MAX || !tsr_admit_snapshot_judges(&ws.w[i]) ||
                          json_object_get(c->verdicts, keys[t] + 9);
        }
        /* One snapshot per ClusterQueue. */
        for (size_t t = 0; !err && t < n; t++) {
                const char *cq;
                size_t m = 0;

                if (done[t])
                        continue; /* at[t] may be SIZE_MAX: a Workload gone or malformed */
                cq = ws.w[at[t]].cluster_queue;
                for (size_t u = t; u < n; u++)
                        if (!done[u] && !strcmp(ws.w[at[u]].cluster_queue, cq)) {
                                group[m++] = u;
                                done[u] = true;
                        }
                judge_group(c, nodes, &ws, cq, at, keys, group, m, rc);
        }
        workloads_release(&ws);
        free(at);
        free(group);
        free(done);
}
