/*
 * chain_reconciler.c - the Kueue chain derived from the managed nodes (core/chain.h), kept on the
 * cluster: the hostname Topology, a ResourceFlavor per (pool, per-node count), a ClusterQueue per
 * pool (credits or cpu quota, the AdmissionCheck referenced once it is Active; stopPolicy Hold
 * while the pool's InstanceType is inactive, none derived while it is being deleted, so that
 * queue is retired and the InstanceType's teardown can finish), and the pool's
 * entrance LocalQueue in every namespace but the system ones (kube-system, kube-public,
 * kube-node-lease, the release namespace) and those being deleted.
 *
 * Every object is server-side applied whole with the field manager tessera-controller, and only
 * when the cached object lacks something the derived one says (a field, a label, a value), so a
 * quiet cluster costs no writes. Objects this controller made (by their resource.gpustack.ai/type
 * label, the LocalQueues by their schedule.gpustack.ai/queue annotation, the Topologies by their
 * gpustack-fnv64- name) that no node contributes to any more are removed: a ClusterQueue is first
 * set to HoldAndDrain and deleted once it reserves nothing (looked at again every 15 s, as
 * upstream's NodeQueueReconciler does); the others at once.
 */
#include "controller/controller_int.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "codec/kueue_chain.h"
#include "controller/managed_nodes.h"
#include "kube/cache.h"
#include "kube/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KUEUE_API            "/apis/kueue.x-k8s.io/v1beta2"
#define DRAIN_RECHECK_MS     15000
#define TOPOLOGY_NAME_PREFIX "gpustack-fnv64-"

/* What one reconcile derived: names, as JSON objects used as sets. */
struct derived {
        json_t *flavors, *queues, *local_queues /* "ns/name" */, *topologies;
};

static const char *label(json_t *obj, const char *key)
{
        return json_string_value(
            json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), key));
}

/* Whether every field of want is in have with the same value (objects recursively; arrays
 * element by element and of equal length; scalars equal). */
static bool contains(json_t *have, json_t *want)
{
        const char *key;
        json_t *v;
        size_t i;

        if (json_is_object(want)) {
                if (!json_is_object(have))
                        return false;
                json_object_foreach(want, key, v)
                {
                        if (!contains(json_object_get(have, key), v))
                                return false;
                }
                return true;
        }
        if (json_is_array(want)) {
                if (!json_is_array(have) || json_array_size(have) != json_array_size(want))
                        return false;
                json_array_foreach(want, i, v)
                {
                        if (!contains(json_array_get(have, i), v))
                                return false;
                }
                return true;
        }
        return json_equal(have, want);
}

/*
 * Applies obj (taken) at collection/name unless the cached copy of resource r already holds
 * it. A ClusterQueue that should no longer reference the check while its copy does counts as
 * changed. Returns 0 or the apply's error (logged).
 */
static int apply_if_changed(struct tsr_controller *c, enum tsr_kube_cache_resource r,
                            const char *collection, json_t *obj)
{
        const char *name = ctl_meta_str(obj, "name"), *ns = ctl_meta_str(obj, "namespace");
        json_t *cached = tsr_kube_cache_get(c->cache, r, ns, name);
        char path[512];
        struct tsr_diag diag;
        int rc = 0;
        bool same = cached && contains(cached, obj);

        if (same && r == TSR_KUBE_CACHE_CLUSTERQUEUES &&
            !json_object_get(json_object_get(obj, "spec"), "admissionChecksStrategy") &&
            json_object_get(json_object_get(cached, "spec"), "admissionChecksStrategy"))
                same = false;
        if (!same) {
                if (ns)
                        snprintf(path, sizeof(path), "%s/namespaces/%s/%s/%s", KUEUE_API, ns,
                                 collection, name);
                else
                        snprintf(path, sizeof(path), "%s/%s/%s", KUEUE_API, collection, name);
                tsr_diag_clear(&diag);
                rc = ctl_apply(c, path, obj, CTL_MANAGER, NULL, &diag);
                if (rc)
                        tsr_log(TSR_LOG_WARN, "chain object not applied", "kind",
                                json_string_value(json_object_get(obj, "kind")), "name", name,
                                "namespace", ns, "error", diag.msg, NULL);
                else if (!cached)
                        tsr_log(TSR_LOG_INFO, "chain object created", "kind",
                                json_string_value(json_object_get(obj, "kind")), "name", name,
                                "namespace", ns, NULL);
        }
        json_decref(cached);
        json_decref(obj);
        return rc;
}

/* Whether namespace obj gets the entrance LocalQueues. */
static bool queue_namespace(const struct tsr_controller *c, json_t *obj)
{
        static const char *const system[] = {"kube-system", "kube-public", "kube-node-lease"};
        const char *name = ctl_meta_str(obj, "name");

        if (!name || !strcmp(name, c->ns) || ctl_meta_str(obj, "deletionTimestamp"))
                return false;
        for (size_t i = 0; i < sizeof(system) / sizeof(system[0]); i++)
                if (!strcmp(name, system[i]))
                        return false;
        return true;
}

/* Applies one pool: its flavors, its ClusterQueue, its LocalQueues in namespaces. */
static int apply_pool(struct tsr_controller *c, const struct tsr_chain_node *nodes, size_t n_nodes,
                      const struct tsr_chain_pool *p, json_t *namespaces, bool active,
                      struct derived *d)
{
        struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
        struct tsr_diag diag;
        size_t nf = 0, i;
        json_t *obj, *ns, *it;
        int rc, first = 0;

        tsr_diag_clear(&diag);
        rc = tsr_chain_flavors(nodes, n_nodes, p, flavors, TSR_CHAIN_FLAVORS_MAX, &nf, NULL, &diag);
        for (size_t f = 0; !rc && f < nf; f++) {
                rc = tsr_kueue_resource_flavor(p, &flavors[f], &obj, &diag);
                if (!rc) {
                        json_object_set_new(d->flavors, flavors[f].name, json_true());
                        first |= apply_if_changed(c, TSR_KUBE_CACHE_RESOURCEFLAVORS,
                                                  "resourceflavors", obj);
                }
        }
        it = tsr_kube_cache_instancetype(c->cache, p->name);
        if (!rc && !ctl_meta_str(it, "deletionTimestamp"))
                rc = tsr_kueue_cluster_queue(
                    p, flavors, nf,
                    json_is_true(json_object_get(json_object_get(it, "spec"), "inactive"))
                        ? TSR_KUEUE_STOP_HOLD
                        : TSR_KUEUE_STOP_NONE,
                    active && p->product, &obj, &diag);
        else
                obj = NULL; /* its InstanceType tears down: retire() drains the queue */
        json_decref(it);
        if (!rc && obj) {
                json_object_set_new(d->queues, p->name, json_true());
                first |= apply_if_changed(c, TSR_KUBE_CACHE_CLUSTERQUEUES, "clusterqueues", obj);
        }
        json_array_foreach(namespaces, i, ns)
        {
                char key[600];

                if (rc || !queue_namespace(c, ns))
                        continue;
                rc = tsr_kueue_local_queue(p, ctl_meta_str(ns, "name"), &obj, &diag);
                if (rc)
                        break;
                snprintf(key, sizeof(key), "%s/%s", ctl_meta_str(ns, "name"), p->entrance);
                json_object_set_new(d->local_queues, key, json_true());
                first |= apply_if_changed(c, TSR_KUBE_CACHE_LOCALQUEUES, "localqueues", obj);
        }
        if (rc)
                tsr_log(TSR_LOG_WARN, "pool not derived", "pool", p->name, "error", diag.msg, NULL);
        return rc ? rc : first;
}

/* Drains and then deletes a ClusterQueue no pool derives. Sets *pending while it reserves. */
static int retire_queue(struct tsr_controller *c, json_t *cq, bool *pending)
{
        const char *name = ctl_meta_str(cq, "name");
        const char *stop =
            json_string_value(json_object_get(json_object_get(cq, "spec"), "stopPolicy"));
        json_int_t reserving = json_integer_value(
            json_object_get(json_object_get(cq, "status"), "reservingWorkloads"));
        char path[400];
        struct tsr_diag diag;
        int rc = 0;

        snprintf(path, sizeof(path), KUEUE_API "/clusterqueues/%s", name);
        tsr_diag_clear(&diag);
        if (!stop || strcmp(stop, "HoldAndDrain")) {
                json_t *patch = json_pack("{s:{s:s}}", "spec", "stopPolicy", "HoldAndDrain");

                rc = patch ? tsr_kube_client_patch(c->cfg.client, path, TSR_KUBE_PATCH_MERGE, patch,
                                                   NULL, NULL, NULL, &diag)
                           : TSR_ENOMEM;
                json_decref(patch);
                if (!rc) {
                        ctl_event(c, cq, "Normal", "Draining",
                                  "no pool derives this queue any more (no managed node "
                                  "contributes, or its InstanceType is being deleted): "
                                  "HoldAndDrain, deleted once it reserves nothing");
                        *pending = true;
                }
        } else if (reserving > 0) {
                *pending = true;
        } else {
                rc = ctl_delete(c, path, &diag);
                if (!rc)
                        tsr_log(TSR_LOG_INFO, "chain object deleted", "kind", "ClusterQueue",
                                "name", name, NULL);
        }
        if (rc)
                tsr_log(TSR_LOG_WARN, "queue not retired", "name", name, "error", diag.msg, NULL);
        return rc;
}

/* Removes what this controller made and no longer derives. */
static int retire(struct tsr_controller *c, const struct derived *d, bool *pending)
{
        json_t *list, *obj;
        struct tsr_diag diag;
        char path[600], key[600];
        size_t i;
        int rc = 0;

        list = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_CLUSTERQUEUES);
        json_array_foreach(list, i, obj)
        {
                const char *type = label(obj, TSR_KUEUE_TYPE_LABEL);

                if (type && !strcmp(type, TSR_KUEUE_TYPE_INSTANCETYPES) &&
                    !json_object_get(d->queues, ctl_meta_str(obj, "name")))
                        rc |= retire_queue(c, obj, pending);
        }
        json_decref(list);
        list = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_LOCALQUEUES);
        json_array_foreach(list, i, obj)
        {
                json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");

                if (!json_object_get(ann, TSR_KUEUE_QUEUE_ANNOTATION))
                        continue;
                snprintf(key, sizeof(key), "%s/%s", ctl_meta_str(obj, "namespace"),
                         ctl_meta_str(obj, "name"));
                if (json_object_get(d->local_queues, key))
                        continue;
                snprintf(path, sizeof(path), KUEUE_API "/namespaces/%s/localqueues/%s",
                         ctl_meta_str(obj, "namespace"), ctl_meta_str(obj, "name"));
                tsr_diag_clear(&diag);
                rc |= ctl_delete(c, path, &diag);
        }
        json_decref(list);
        list = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_RESOURCEFLAVORS);
        json_array_foreach(list, i, obj)
        {
                const char *type = label(obj, TSR_KUEUE_TYPE_LABEL);

                if (!type || strcmp(type, TSR_KUEUE_TYPE_NODES) ||
                    json_object_get(d->flavors, ctl_meta_str(obj, "name")))
                        continue;
                snprintf(path, sizeof(path), KUEUE_API "/resourceflavors/%s",
                         ctl_meta_str(obj, "name"));
                tsr_diag_clear(&diag);
                rc |= ctl_delete(c, path, &diag);
        }
        json_decref(list);
        list = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_TOPOLOGIES);
        json_array_foreach(list, i, obj)
        {
                const char *name = ctl_meta_str(obj, "name");

                if (!name || strncmp(name, TOPOLOGY_NAME_PREFIX, strlen(TOPOLOGY_NAME_PREFIX)) ||
                    json_object_get(d->topologies, name))
                        continue;
                snprintf(path, sizeof(path), KUEUE_API "/topologies/%s", name);
                tsr_diag_clear(&diag);
                rc |= ctl_delete(c, path, &diag);
        }
        json_decref(list);
        return rc ? TSR_EIO : 0;
}

int ctl_chain_reconcile(struct tsr_controller *c, unsigned *requeue_ms)
{
        const struct ctl_nodes *nodes;
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        struct derived d = {json_object(), json_object(), json_object(), json_object()};
        struct tsr_diag diag;
        json_t *namespaces = NULL, *topo;
        size_t np = 0;
        bool active, pending = false;
        int rc, failed = 0;

        tsr_diag_clear(&diag);
        nodes = ctl_nodes_view(c, &diag);
        rc = nodes ? 0 : TSR_ENOMEM;
        if (!rc && (!d.flavors || !d.queues || !d.local_queues || !d.topologies ||
                    !(namespaces = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_NAMESPACES))))
                rc = TSR_ENOMEM;
        if (!rc)
                rc =
                    tsr_chain_pools(nodes->chain, nodes->n, pools, TSR_CHAIN_POOLS_MAX, &np, &diag);
        if (rc) {
                tsr_log(TSR_LOG_WARN, "chain not derived", "error",
                        diag.msg[0] ? diag.msg : tsr_strerror(rc), NULL);
                goto out;
        }
        if (np && !tsr_kueue_topology(&topo, &diag)) {
                json_object_set_new(d.topologies, ctl_meta_str(topo, "name"), json_true());
                failed |= apply_if_changed(c, TSR_KUBE_CACHE_TOPOLOGIES, "topologies", topo);
        }
        active = ctl_admission_check_active(c, NULL);
        for (size_t p = 0; p < np; p++)
                failed |= apply_pool(c, nodes->chain, nodes->n, &pools[p], namespaces, active, &d);
        /* Retire only after a clean pass: a half-applied pass must not delete what it missed. */
        if (!failed)
                failed |= retire(c, &d, &pending);
        rc = failed ? TSR_EIO : 0;
out:
        if (pending)
                *requeue_ms = DRAIN_RECHECK_MS;
        json_decref(namespaces);
        json_decref(d.flavors);
        json_decref(d.queues);
        json_decref(d.local_queues);
        json_decref(d.topologies);
        return rc;
}
