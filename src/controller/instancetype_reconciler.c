/*
 * instancetype_reconciler.c - the InstanceTypes of the derived pools on a cluster: authored from
 * the managed nodes, torn down through a finalizer, and their status kept (the four views and the
 * rest of codec/instancetype_object.h, the one builder the simulator prints from too).
 *
 *   authoring   with the Setting instance-type-derived-from-node (default true) each pool's
 *               InstanceType is created when missing, with the per-product unit preset; created
 *               only, never edited afterwards (an admin's displayName, description or inactive
 *               stays theirs).
 *   finalizer   every InstanceType of a derived pool carries TSR_INSTANCETYPE_FINALIZER (added
 *               and removed by a JSON patch that tests what it changes). When one is being
 *               deleted, the chain (chain_reconciler.c) stops deriving its ClusterQueue, which is
 *               drained (HoldAndDrain) and deleted once it reserves nothing; once the queue is
 *               gone the finalizer is removed and the deletion completes. A pool its nodes still
 *               derive gets a fresh InstanceType on the next pass.
 *   status      written wholesale through the status subresource (ctl_put_status: a PUT
 *               guarded by the resourceVersion), only when it differs from the cached one: the
 * views from the pool's nodes' capability (their Devices spec) joined with their ledger (the
 * Devices status the device managers publish), so Pods allocating and freeing move it; the CPU view
 * of the generic pool from its nodes' allocatable CPU less what its ClusterQueue reserves; phase
 * from the ClusterQueue: Active while its Active condition is True, Inactive when the InstanceType
 * is inactive (stopPolicy Hold), Draining while HoldAndDrain (every view then reads 0), Deleting
 * during teardown, else Pending with the queue's condition message (or its absence) as
 * phaseMessage.
 * An InstanceType of ours (it carries the finalizer) that no managed node derives any more is
 * reported from the pool it names, with no node in it: every view 0, its phase its draining
 * queue's (Draining while HoldAndDrain, Pending once the queue is gone). One that never was ours
 * is left as it is.
 */
#include "controller/controller_int.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "base/quantity.h"
#include "codec/devices_object.h"
#include "codec/instancetype_object.h"
#include "controller/managed_nodes.h"
#include "core/catalog.h"
#include "core/views.h"
#include "kube/cache.h"
#include "kube/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IT_PATH "/apis/worker.gpustack.ai/v1alpha1/instancetypes"

/* The index of the teardown finalizer in obj's metadata.finalizers, or -1. */
static int finalizer_index(json_t *obj)
{
        json_t *f = json_object_get(json_object_get(obj, "metadata"), "finalizers"), *v;
        size_t i;

        json_array_foreach(f, i, v)
        {
                if (json_is_string(v) && !strcmp(json_string_value(v), TSR_INSTANCETYPE_FINALIZER))
                        return (int)i;
        }
        return -1;
}

static bool has_finalizer(json_t *obj)
{
        return finalizer_index(obj) >= 0;
}

/*
 * Adds (want) or removes the teardown finalizer of the cached InstanceType it by a JSON patch
 * that tests what it changes, so no other finalizer is touched, a copy that moved on fails
 * (retried with backoff) and an object that is gone is never re-created.
 */
static int set_finalizer(struct tsr_controller *c, json_t *it, bool want)
{
        const char *name = ctl_meta_str(it, "name");
        json_t *meta = json_object_get(it, "metadata"), *ops;
        int at = finalizer_index(it);
        char path[512], elem[64];
        struct tsr_diag diag;
        int rc;

        if (want == (at >= 0))
                return 0;
        snprintf(elem, sizeof(elem), "/metadata/finalizers/%d", at);
        if (!want)
                ops = json_pack("[{s:s, s:s, s:s}, {s:s, s:s}]", "op", "test", "path", elem,
                                "value", TSR_INSTANCETYPE_FINALIZER, "op", "remove", "path", elem);
        else if (json_is_array(json_object_get(meta, "finalizers")))
                ops = json_pack("[{s:s, s:s, s:s}]", "op", "add", "path", "/metadata/finalizers/-",
                                "value", TSR_INSTANCETYPE_FINALIZER);
        else
                ops = json_pack("[{s:s, s:s, s:O}, {s:s, s:s, s:[s]}]", "op", "test", "path",
                                "/metadata/resourceVersion", "value",
                                json_object_get(meta, "resourceVersion"), "op", "add", "path",
                                "/metadata/finalizers", "value", TSR_INSTANCETYPE_FINALIZER);
        if (!ops)
                return TSR_ENOMEM;
        tsr_diag_clear(&diag);
        rc = snprintf(path, sizeof(path), IT_PATH "/%s", name ? name : "") < (int)sizeof(path)
                 ? tsr_kube_client_patch(c->cfg.client, path, TSR_KUBE_PATCH_JSON, ops, NULL, NULL,
                                         NULL, &diag)
                 : TSR_ETOOBIG;
        json_decref(ops);
        if (rc == TSR_ENOTFOUND && !want)
                rc = 0;
        if (rc)
                tsr_log(TSR_LOG_WARN, "InstanceType finalizer not changed", "name", name, "error",
                        diag.msg, NULL);
        return rc;
}

/* Creates pool p's InstanceType. An existing one (another replica, a race) is success. */
static int author(struct tsr_controller *c, const struct tsr_chain_pool *p)
{
        json_t *obj = tsr_instancetype_object_authored(p), *created = NULL;
        struct tsr_diag diag;
        char *body;
        int rc;

        if (!obj || !(body = json_dumps(obj, JSON_COMPACT))) {
                json_decref(obj);
                return TSR_ENOMEM;
        }
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_request(c->cfg.client, "POST", IT_PATH, "application/json", body,
                                     strlen(body), NULL, &created, NULL, &diag);
        if (!rc) {
                tsr_log(TSR_LOG_INFO, "InstanceType authored", "name", p->name, NULL);
                ctl_event(c, created, "Normal", "Authored",
                          "derived from the managed nodes of its pool");
        } else if (rc == TSR_EEXIST) {
                rc = 0;
        } else {
                tsr_log(TSR_LOG_WARN, "InstanceType not authored", "name", p->name, "error",
                        diag.msg, NULL);
        }
        free(body);
        json_decref(created);
        json_decref(obj);
        return rc;
}

/* The ClusterQueue's status.flavorsReservation of resource for flavor, in whole units. */
static int64_t reserved(json_t *cq, const char *flavor, const char *resource)
{
        json_t *flavors = json_object_get(json_object_get(cq, "status"), "flavorsReservation"), *f;
        size_t i, k;

        json_array_foreach(flavors, i, f)
        {
                json_t *r;

                if (!json_is_string(json_object_get(f, "name")) ||
                    strcmp(json_string_value(json_object_get(f, "name")), flavor))
                        continue;
                json_array_foreach(json_object_get(f, "resources"), k, r)
                {
                        const char *name = json_string_value(json_object_get(r, "name"));
                        const char *total = json_string_value(json_object_get(r, "total"));
                        struct tsr_quantity q;
                        struct tsr_diag diag;
                        int64_t milli;

                        if (name && total && !strcmp(name, resource) &&
                            !tsr_quantity_parse(total, &q, &diag) &&
                            !tsr_quantity_milli(&q, &milli))
                                return (milli + 999) / 1000;
                }
        }
        return 0;
}

/*
 * The generic pool's CPU view: capacity is its nodes' allocatable cores, remaining that less
 * what its ClusterQueue reserves, onceMaxRequest the most one Pod could still get: per flavor
 * (nodes of one size) the smaller of a node's cores and the flavor's free cores. An accelerated
 * pool's CPU view is 0/0, as upstream prints it.
 */
static void cpu_view(const struct tsr_chain_node *nodes, size_t n, const struct tsr_chain_pool *p,
                     json_t *cq, struct tsr_view *out)
{
        struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
        struct tsr_diag diag;
        size_t nf = 0;

        memset(out, 0, sizeof(*out));
        if (p->product ||
            tsr_chain_flavors(nodes, n, p, flavors, TSR_CHAIN_FLAVORS_MAX, &nf, NULL, &diag))
                return;
        for (size_t f = 0; f < nf; f++) {
                int64_t total = (int64_t)flavors[f].per_node * flavors[f].nodes;
                int64_t free_cores = total - reserved(cq, flavors[f].name, "cpu");
                int64_t once =
                    free_cores < (int64_t)flavors[f].per_node ? free_cores : flavors[f].per_node;

                if (free_cores < 0)
                        free_cores = 0;
                out->capacity += total;
                out->remaining += free_cores;
                if (once > out->once_max)
                        out->once_max = once;
        }
}

/* Pool p's views from its managed nodes' capability and published ledger. */
static int pool_views(const struct ctl_nodes *nodes, const struct tsr_chain_pool *p,
                      struct tsr_pool_views *out)
{
        struct tsr_pool_node *pool = calloc(nodes->n + 1, sizeof(*pool));
        struct tsr_accel_ledger *ledgers =
            calloc((nodes->n + 1) * CTL_NODE_ACCELS_MAX, sizeof(*ledgers));
        size_t n = 0;
        int rc = 0;

        if (!pool || !ledgers) {
                rc = TSR_ENOMEM;
                goto out;
        }
        for (size_t i = 0; p->product && i < nodes->n; i++) {
                const struct ctl_node *node = &nodes->v[i];
                struct tsr_accel_ledger *l = &ledgers[n * CTL_NODE_ACCELS_MAX];
                struct tsr_diag diag;

                if (node->fault[0] || !tsr_chain_node_in_pool(&node->chain, p))
                        continue;
                tsr_diag_clear(&diag);
                if (tsr_devices_object_ledger(node->devices, node->caps, node->chain.accel_count, l,
                                              &diag)) {
                        /* A ledger that cannot be read counts as untouched, and says so. */
                        tsr_log(TSR_LOG_WARN, "Devices ledger unreadable", "node", node->name,
                                "error", diag.msg, NULL);
                        for (unsigned a = 0; a < node->chain.accel_count; a++)
                                tsr_ledger_reset(&l[a]);
                }
                pool[n].caps = node->caps;
                pool[n].ledger = l;
                pool[n].n = node->chain.accel_count;
                n++;
        }
        tsr_views_compute(pool, n, out);
out:
        free(pool);
        free(ledgers);
        return rc;
}

/* The queue's condition type's object, or NULL. */
static json_t *queue_condition(json_t *cq, const char *type)
{
        json_t *conds = json_object_get(json_object_get(cq, "status"), "conditions"), *cond;
        size_t i;

        json_array_foreach(conds, i, cond)
        {
                const char *t = json_string_value(json_object_get(cond, "type"));

                if (t && !strcmp(t, type))
                        return cond;
        }
        return NULL;
}

/* The phase of InstanceType it (cached, may be NULL) with ClusterQueue cq (may be NULL). */
static void state_of(json_t *it, json_t *cq, bool served, struct tsr_instancetype_state *st,
                     char *msg, size_t msg_len)
{
        json_t *active = queue_condition(cq, "Active");
        const char *stop =
            json_string_value(json_object_get(json_object_get(cq, "spec"), "stopPolicy"));

        memset(st, 0, sizeof(*st));
        msg[0] = '\0';
        st->phase_message = msg;
        if (ctl_meta_str(it, "deletionTimestamp")) {
                st->phase = "Deleting";
                st->draining = true;
                snprintf(msg, msg_len, "tearing down: its ClusterQueue drains, then is deleted");
        } else if (stop && !strcmp(stop, "HoldAndDrain")) {
                st->phase = "Draining";
                st->draining = true;
                snprintf(msg, msg_len, "its ClusterQueue is HoldAndDrain");
        } else if (json_is_true(json_object_get(json_object_get(it, "spec"), "inactive"))) {
                st->phase = "Inactive";
                snprintf(msg, msg_len, "inactive: its ClusterQueue holds new admissions");
        } else if (json_is_string(json_object_get(active, "status")) &&
                   !strcmp(json_string_value(json_object_get(active, "status")), "True")) {
                st->phase = "Active";
        } else {
                const char *why = json_string_value(json_object_get(active, "message"));

                st->phase = "Pending";
                if (!served)
                        snprintf(msg, msg_len, "no managed node serves this pool");
                else if (!cq)
                        snprintf(msg, msg_len, "its ClusterQueue does not exist yet");
                else
                        snprintf(msg, msg_len, "its ClusterQueue is not active%s%s",
                                 why ? ": " : "", why ? why : "");
        }
}

/* Writes pool p's status (served: some managed node derives it) when it differs from the cached
 * InstanceType it's. */
static int write_status(struct tsr_controller *c, const struct ctl_nodes *nodes,
                        const struct tsr_chain_pool *p, bool served, json_t *it)
{
        json_t *cq = tsr_kube_cache_clusterqueue(c->cache, p->name), *status;
        struct tsr_instancetype_state st;
        struct tsr_pool_views v;
        struct tsr_view cpu;
        struct tsr_diag diag;
        char msg[512], path[512];
        int rc;

        rc = pool_views(nodes, p, &v);
        if (rc) {
                json_decref(cq);
                return rc;
        }
        cpu_view(nodes->chain, nodes->n, p, cq, &cpu);
        state_of(it, cq, served, &st, msg, sizeof(msg));
        json_decref(cq);
        status = tsr_instancetype_object_status(p, &v, &cpu, &st);
        tsr_diag_clear(&diag);
        rc = snprintf(path, sizeof(path), IT_PATH "/%s/status", p->name) < (int)sizeof(path)
                 ? ctl_put_status(c, path, it, status, NULL, &diag)
                 : (json_decref(status), TSR_ETOOBIG);
        if (rc)
                tsr_log(TSR_LOG_WARN, "InstanceType status not written", "name", p->name, "error",
                        diag.msg, NULL);
        return rc;
}

/* Finishes the teardown of InstanceType it once its ClusterQueue is gone. */
static int finish_teardown(struct tsr_controller *c, json_t *it)
{
        const char *name = ctl_meta_str(it, "name");
        json_t *cq;

        if (!name || !ctl_meta_str(it, "deletionTimestamp") || !has_finalizer(it))
                return 0;
        cq = tsr_kube_cache_clusterqueue(c->cache, name);
        json_decref(cq);
        if (cq) {
                ctl_enqueue(c, "chain"); /* the chain drains and deletes it */
                return 0;
        }
        tsr_log(TSR_LOG_INFO, "InstanceType torn down", "name", name, NULL);
        return set_finalizer(c, it, false);
}

static bool derived(const struct tsr_chain_pool *pools, size_t np, const char *name)
{
        for (size_t p = 0; name && p < np; p++)
                if (!strcmp(pools[p].name, name))
                        return true;
        return false;
}

/*
 * The pool an InstanceType of ours stood for, read back from it (its name, entrance label, os,
 * arch and product), for one no managed node derives any more. Returns 0, or TSR_EINVAL when
 * the object does not say.
 */
static int pool_of(json_t *it, struct tsr_chain_pool *out)
{
        json_t *spec = json_object_get(it, "spec");
        const char *name = ctl_meta_str(it, "name");
        const char *entrance = json_string_value(json_object_get(
            json_object_get(json_object_get(it, "metadata"), "labels"), TSR_INSTANCETYPE_ENTRANCE));
        const char *os = json_string_value(json_object_get(spec, "os"));
        const char *arch = json_string_value(json_object_get(spec, "arch"));
        const char *product = json_string_value(
            json_object_get(json_object_get(json_object_get(it, "status"), "detail"), "product"));

        memset(out, 0, sizeof(*out));
        if (!name || !entrance || !os || !arch || strlen(name) >= sizeof(out->name) ||
            strlen(entrance) >= sizeof(out->entrance) || strlen(os) >= sizeof(out->os) ||
            strlen(arch) >= sizeof(out->arch))
                return TSR_EINVAL;
        if (json_is_true(json_object_get(spec, "acceleratable")) &&
            !(out->product = product ? tsr_catalog_product_by_name(product) : NULL))
                return TSR_EINVAL;
        memcpy(out->name, name, strlen(name) + 1);
        memcpy(out->entrance, entrance, strlen(entrance) + 1);
        memcpy(out->os, os, strlen(os) + 1);
        memcpy(out->arch, arch, strlen(arch) + 1);
        return 0;
}

int ctl_instancetypes_reconcile(struct tsr_controller *c, unsigned *requeue_ms)
{
        struct tsr_settings settings = c->cfg.settings;
        const struct ctl_nodes *nodes;
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        struct tsr_diag diag;
        json_t *list, *it;
        size_t np = 0, i;
        int rc, failed = 0;
        bool tearing = false;

        tsr_kube_cache_settings(c->cache, c->ns, &settings);
        tsr_diag_clear(&diag);
        nodes = ctl_nodes_view(c, &diag);
        rc = nodes ? tsr_chain_pools(nodes->chain, nodes->n, pools, TSR_CHAIN_POOLS_MAX, &np, &diag)
                   : TSR_ENOMEM;
        if (rc) {
                tsr_log(TSR_LOG_WARN, "InstanceTypes not derived", "error",
                        diag.msg[0] ? diag.msg : tsr_strerror(rc), NULL);
                goto out;
        }
        for (size_t p = 0; p < np; p++) {
                it = tsr_kube_cache_instancetype(c->cache, pools[p].name);
                if (!it) {
                        if (settings.value[TSR_SETTING_INSTANCE_TYPE_DERIVED_FROM_NODE])
                                failed |= author(c, &pools[p]);
                        continue;
                }
                /* A finalizer added moves the object on: its status is written on the pass
                 * the cache's change queues, not with this copy's resourceVersion. */
                if (!ctl_meta_str(it, "deletionTimestamp") && !has_finalizer(it))
                        failed |= set_finalizer(c, it, true);
                else
                        failed |= write_status(c, nodes, &pools[p], true, it);
                json_decref(it);
        }
        list = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_INSTANCETYPES);
        json_array_foreach(list, i, it)
        {
                struct tsr_chain_pool gone;

                if (ctl_meta_str(it, "deletionTimestamp") && has_finalizer(it)) {
                        tearing = true;
                        failed |= finish_teardown(c, it);
                } else if (has_finalizer(it) && !derived(pools, np, ctl_meta_str(it, "name")) &&
                           !pool_of(it, &gone)) {
                        failed |= write_status(c, nodes, &gone, false, it);
                }
        }
        json_decref(list);
        rc = failed ? TSR_EIO : 0;
out:
        if (tearing)
                *requeue_ms = 5000;
        return rc;
}
