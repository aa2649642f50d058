/*
 * instance_reconciler.c - Instances on a cluster: each one run by a Pod of its own name (and a
 * Service when it has ports), built by codec/instance_pod.h, its status read back from them; and
 * running Instances stopped when their pool stops admitting.
 *
 *   key instance/<ns>/<name>   queued when the Instance's spec or deletion changes (its
 *                              generation, deletionTimestamp or uid: the status the controller
 *                              writes queues nothing), when its InstanceType's spec,
 * status.entrance, status.detail or deletion changes, when the ClusterQueue of its type appears,
 * goes or changes stopPolicy, and once on becoming leader. key instances-drained/<cq> queued when
 * the ClusterQueue <cq> is seen with stopPolicy HoldAndDrain in a version not seen so before: every
 * running Instance of that type is stopped, even when the queue was set back since (the chain puts
 * back a hand-set stop policy at once, but Kueue has already evicted what ran). The change
 * callbacks (ctl_instances_on_change) run on the watchers' threads and only diff a signature per
 * object against the last one seen (one map per resource, each touched by its own watcher's
 * callbacks only, which never overlap) and queue keys.
 *
 * One Instance's reconcile:
 *   deleting   (deletionTimestamp: some finalizer holds it) phase Deleting; its Pod is deleted
 *              (the garbage collector deletes it too, through the owner reference), looked at
 *              again every INSTANCE_POLL_MS until gone.
 *   spec.stop  its Pod is deleted, phase Stopping (the rest of the status kept) until the Pod is
 *              gone, then the status is {phase: Stopped}, as upstream writes it. The Service stays
 *              (its node ports with it) until the Instance is deleted.
 *   stopped by the pool: an Instance whose InstanceType is gone or being deleted, or whose type's
 *              ClusterQueue is HoldAndDrain, gets spec.stop=true (a JSON patch testing the uid)
 *              and an Event saying why, instead of a Pod its queue would never admit. A queue
 *              on Hold (the type is inactive) is not a stop: the Pod is made and waits in Kueue.
 *              The Instance webhook refuses to stop a Starting Instance, so one in phase
 *              Starting is first written phase Stopping (the status subresource is not behind
 *              the webhook).
 *   running    the Pod is read with one GET (the controller caches no Pods); missing, it is
 *              built and created (POST); present, it is never changed: when it no longer
 *              contains what the Instance asks for now (a setting or the type changed since),
 *              the phaseMessage says so and where, and it is left as it is. The Service is
 *              server-side applied when it is missing or differs (one GET each time, for its
 *              node ports). The status (codec/instance_pod.h: Starting, Ready or Failed, node,
 *              addresses, node ports, allocations) is written when it differs.
 * Status is written through the status subresource only when it changed: a PUT of the cached
 * Instance with the new status, guarded by its resourceVersion (a stale copy gets 409 and the key
 * is retried with backoff). A build the InstanceType is not ready for (TSR_ESTALE) reads phase
 * Starting with the reason and is looked at again after INSTANCE_RETRY_MS; one the Instance
 * cannot have (TSR_EINVAL) reads phase Failed with a Warning Event, and waits for a change.
 *
 * Cost: with no Pod watch, each Instance costs one Pod GET per reconcile (and one Service GET
 * with ports), every INSTANCE_POLL_MS while Starting, Stopping or Deleting and every
 * INSTANCE_READY_POLL_MS while Ready (to notice a Pod that failed or vanished); a Stopped or
 * Failed one costs nothing until it changes.
 */
#include "controller/controller_int.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "codec/instance_pod.h"
#include "controller/workqueue.h"
#include "core/catalog.h"
#include "kube/cache.h"
#include "kube/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INSTANCES_API          "/apis/worker.gpustack.ai/v1alpha1"
#define RUNTIMECLASSES         "/apis/node.k8s.io/v1/runtimeclasses"
#define INSTANCE_POLL_MS       2000
#define INSTANCE_READY_POLL_MS 30000
#define INSTANCE_RETRY_MS      5000
#define DRAINED_KEY            "instances-drained/"

/* ---- change callbacks --------------------------------------------------------------------- */

/* obj.a.b (obj.a when b is NULL) as a string, "" when absent. */
static const char *str_of(json_t *obj, const char *a, const char *b)
{
        json_t *v = json_object_get(obj, a);

        if (b)
                v = json_object_get(v, b);

        return json_is_string(v) ? json_string_value(v) : "";
}

/* The part of an object whose change concerns its Instances, as a string (free it). */
static char *signature(enum tsr_kube_cache_resource r, json_t *obj)
{
        json_t *meta = json_object_get(obj, "metadata"), *sig;
        char *out;

        if (r == TSR_KUBE_CACHE_INSTANCES)
                sig = json_pack("{s:O?, s:O?, s:b}", "uid", json_object_get(meta, "uid"),
                                "generation", json_object_get(meta, "generation"), "deleting",
                                json_object_get(meta, "deletionTimestamp") != NULL);
        else if (r == TSR_KUBE_CACHE_INSTANCETYPES)
                sig =
                    json_pack("{s:O?, s:b, s:O?, s:O?, s:O?}", "uid", json_object_get(meta, "uid"),
                              "deleting", json_object_get(meta, "deletionTimestamp") != NULL,
                              "spec", json_object_get(obj, "spec"), "entrance",
                              json_object_get(json_object_get(obj, "status"), "entrance"), "detail",
                              json_object_get(json_object_get(obj, "status"), "detail"));
        else
                sig = json_pack("{s:O?, s:s}", "uid", json_object_get(meta, "uid"), "stop",
                                str_of(obj, "spec", "stopPolicy"));
        out = sig ? json_dumps(sig, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(sig);
        return out;
}

static void enqueue_instance(struct tsr_controller *c, const char *ns, const char *name)
{
        char key[TSR_WORKQUEUE_KEY_MAX];

        if (ns && name && snprintf(key, sizeof(key), "instance/%s/%s", ns, name) < (int)sizeof(key))
                ctl_enqueue(c, key);
}

/* Queues every cached Instance of a type in types (a set; NULL: every Instance). */
static void enqueue_of_types(struct tsr_controller *c, json_t *types)
{
        json_t *list = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_INSTANCES), *inst;
        size_t i;

        json_array_foreach(list, i, inst)
        {
                if (!types || json_object_get(types, str_of(inst, "spec", "type")))
                        enqueue_instance(c, ctl_meta_str(inst, "namespace"),
                                         ctl_meta_str(inst, "name"));
        }
        json_decref(list);
}

void ctl_instances_enqueue_all(struct tsr_controller *c)
{
        enqueue_of_types(c, NULL);
}

/* The map of resource r's last signatures, or NULL for a resource Instances do not follow. */
static json_t *seen_of(struct tsr_controller *c, enum tsr_kube_cache_resource r)
{
        switch (r) {
        case TSR_KUBE_CACHE_INSTANCES:
                return c->seen_instances;
        case TSR_KUBE_CACHE_INSTANCETYPES:
                return c->seen_instancetypes;
        case TSR_KUBE_CACHE_CLUSTERQUEUES:
                return c->seen_clusterqueues;
        default:
                return NULL;
        }
}

void ctl_instances_on_change(struct tsr_controller *c, enum tsr_kube_cache_resource r)
{
        json_t *seen = seen_of(c, r), *list, *obj, *now, *types, *v;
        char key[TSR_WORKQUEUE_KEY_MAX];
        const char *k;
        size_t i;
        void *tmp;

        if (!seen)
                return;
        list = tsr_kube_cache_list(c->cache, r);
        now = json_object();
        types = json_object();
        if (!list || !now || !types) {
                tsr_log(TSR_LOG_ERROR, "Instances not queued: out of memory", NULL);
                goto out;
        }
        json_array_foreach(list, i, obj)
        {
                const char *ns = ctl_meta_str(obj, "namespace"), *name = ctl_meta_str(obj, "name");
                char *sig;

                if (!name)
                        continue;
                snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
                sig = signature(r, obj);
                if (!sig)
                        continue;
                v = json_object_get(seen, key);
                if (!v || strcmp(json_string_value(v), sig)) {
                        if (r == TSR_KUBE_CACHE_INSTANCES)
                                enqueue_instance(c, ns, name);
                        else
                                json_object_set_new(types, name, json_true());
                        if (r == TSR_KUBE_CACHE_CLUSTERQUEUES &&
                            !strcmp(str_of(obj, "spec", "stopPolicy"), "HoldAndDrain") &&
                            snprintf(key, sizeof(key), DRAINED_KEY "%s", name) < (int)sizeof(key))
                                ctl_enqueue(c, key);
                        snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
                }
                json_object_set_new(now, key, json_string(sig));
                free(sig);
        }
        /* gone since */
        json_object_foreach_safe(seen, tmp, k, v)
        {
                const char *slash = strchr(k, '/');

                if (json_object_get(now, k) || !slash)
                        continue;
                if (r == TSR_KUBE_CACHE_INSTANCES) {
                        snprintf(key, sizeof(key), "%.*s", (int)(slash - k), k);
                        enqueue_instance(c, key, slash + 1);
                } else {
                        json_object_set_new(types, slash + 1, json_true());
                }
        }
        json_object_clear(seen);
        json_object_update(seen, now);
        if (r != TSR_KUBE_CACHE_INSTANCES && json_object_size(types))
                enqueue_of_types(c, types);
out:
        json_decref(list);
        json_decref(now);
        json_decref(types);
}

int ctl_instances_init(struct tsr_controller *c)
{
        c->seen_instances = json_object();
        c->seen_instancetypes = json_object();
        c->seen_clusterqueues = json_object();
        return c->seen_instances && c->seen_instancetypes && c->seen_clusterqueues ? 0 : TSR_ENOMEM;
}

void ctl_instances_release(struct tsr_controller *c)
{
        json_decref(c->seen_instances);
        json_decref(c->seen_instancetypes);
        json_decref(c->seen_clusterqueues);
        c->seen_instances = c->seen_instancetypes = c->seen_clusterqueues = NULL;
}

/* ---- writes ------------------------------------------------------------------------------- */

/* Writes status (taken) on the cached Instance inst unless it already says it. */
static int write_status(struct tsr_controller *c, json_t *inst, json_t *status)
{
        const char *ns = ctl_meta_str(inst, "namespace"), *name = ctl_meta_str(inst, "name");
        char path[600], phase[64];
        struct tsr_diag diag;
        int rc;

        bool wrote = false;

        snprintf(phase, sizeof(phase), "%s", str_of(status, "phase", NULL));
        tsr_diag_clear(&diag);
        rc = snprintf(path, sizeof(path), INSTANCES_API "/namespaces/%s/instances/%s/status", ns,
                      name) < (int)sizeof(path)
                 ? ctl_put_status(c, path, inst, status, &wrote, &diag)
                 : (json_decref(status), TSR_ETOOBIG);
        if (rc == TSR_ENOTFOUND)
                rc = 0; /* gone meanwhile */
        else if (rc)
                tsr_log(TSR_LOG_WARN, "Instance status not written", "namespace", ns, "name", name,
                        "uid", ctl_meta_str(inst, "uid"), "error", diag.msg, NULL);
        else if (wrote)
                tsr_log(TSR_LOG_DEBUG, "Instance status written", "namespace", ns, "name", name,
                        "phase", phase, NULL);
        return rc;
}

/* The cached status with phase and message (NULL: none) set. A new object or NULL. */
static json_t *status_with(json_t *inst, const char *phase, const char *msg)
{
        json_t *st = json_object_get(inst, "status");

        st = json_is_object(st) ? json_deep_copy(st) : json_object();
        if (!st || json_object_set_new(st, "phase", json_string(phase)) ||
            (msg ? json_object_set_new(st, "phaseMessage", json_string(msg))
                 : json_object_del(st, "phaseMessage") * 0)) {
                json_decref(st);
                return NULL;
        }
        return st;
}

/* GET of ns/<collection>/name: 0 and *out (NULL when absent), or the error (logged). */
static int get_object(struct tsr_controller *c, const char *collection, const char *ns,
                      const char *name, json_t **out)
{
        struct tsr_diag diag;
        char path[600];
        int rc;

        *out = NULL;
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/%s/%s", ns, collection, name);
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_get(c->cfg.client, path, out, NULL, &diag);
        if (rc == TSR_ENOTFOUND) {
                *out = NULL;
                return 0;
        }
        if (rc)
                tsr_log(TSR_LOG_WARN, "Instance object not read", "path", path, "error", diag.msg,
                        NULL);
        return rc;
}

/* Whether obj's controller owner is the Instance of uid. */
static bool controlled_by(json_t *obj, const char *uid)
{
        json_t *refs = json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), *ref;
        size_t i;

        json_array_foreach(refs, i, ref)
        {
                if (json_is_true(json_object_get(ref, "controller")))
                        return uid &&
                               !strcmp(str_of(ref, "kind", NULL), TSR_INSTANCE_OBJECT_KIND) &&
                               !strcmp(str_of(ref, "uid", NULL), uid);
        }
        return false;
}

/* Deletes the Instance's Pod pod unless it is already being deleted. */
static int delete_pod(struct tsr_controller *c, json_t *inst, json_t *pod)
{
        const char *ns = ctl_meta_str(pod, "namespace"), *name = ctl_meta_str(pod, "name");
        struct tsr_diag diag;
        char path[600];
        int rc;

        if (ctl_meta_str(pod, "deletionTimestamp"))
                return 0;
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, name);
        tsr_diag_clear(&diag);
        rc = ctl_delete(c, path, &diag);
        if (rc)
                tsr_log(TSR_LOG_WARN, "Instance Pod not deleted", "namespace", ns, "name", name,
                        "error", diag.msg, NULL);
        else
                tsr_log(TSR_LOG_INFO, "Instance Pod deleted", "namespace", ns, "name", name, "uid",
                        ctl_meta_str(inst, "uid"), NULL);
        return rc;
}

/*
 * Stops Instance inst for reason: spec.stop=true by a JSON patch that tests its uid, and an
 * Event. One in phase Starting is written phase Stopping first (the webhook refuses to stop a
 * Starting Instance).
 */
static int stop_instance(struct tsr_controller *c, json_t *inst, const char *reason)
{
        const char *ns = ctl_meta_str(inst, "namespace"), *name = ctl_meta_str(inst, "name");
        const char *uid = ctl_meta_str(inst, "uid");
        struct tsr_diag diag;
        char path[600], msg[600];
        json_t *ops;
        int rc;

        if (!strcmp(str_of(inst, "status", "phase"), TSR_INSTANCE_STARTING) &&
            (rc = write_status(c, inst, status_with(inst, TSR_INSTANCE_STOPPING, reason))))
                return rc;
        ops = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:b}]", "op", "test", "path", "/metadata/uid",
                        "value", uid ? uid : "", "op", "add", "path", "/spec/stop", "value", true);
        if (!ops)
                return TSR_ENOMEM;
        snprintf(path, sizeof(path), INSTANCES_API "/namespaces/%s/instances/%s", ns, name);
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_patch(c->cfg.client, path, TSR_KUBE_PATCH_JSON, ops, NULL, NULL, NULL,
                                   &diag);
        json_decref(ops);
        if (rc == TSR_ENOTFOUND)
                return 0;
        if (rc) {
                tsr_log(TSR_LOG_WARN, "Instance not stopped", "namespace", ns, "name", name, "uid",
                        uid, "reason", reason, "error", diag.msg, NULL);
                return rc;
        }
        tsr_log(TSR_LOG_INFO, "Instance stopped", "namespace", ns, "name", name, "uid", uid,
                "reason", reason, NULL);
        snprintf(msg, sizeof(msg), "spec.stop set to true: %s", reason);
        ctl_event(c, inst, "Normal", "Stopped", msg);
        return 0;
}

/* Why Instance inst, not stopped, must stop (into why), or false. */
static bool must_stop(struct tsr_controller *c, json_t *inst, char *why, size_t len)
{
        const char *type = str_of(inst, "spec", "type");
        json_t *it = tsr_kube_cache_instancetype(c->cache, type), *cq;
        bool stop = true;

        if (!it) {
                snprintf(why, len, "its InstanceType %s no longer exists", type);
        } else if (ctl_meta_str(it, "deletionTimestamp")) {
                snprintf(why, len, "its InstanceType %s is being deleted", type);
        } else {
                cq = tsr_kube_cache_clusterqueue(c->cache, type);
                stop = !strcmp(str_of(cq, "spec", "stopPolicy"), "HoldAndDrain");
                if (stop)
                        snprintf(why, len,
                                 "its ClusterQueue %s is HoldAndDrain: Kueue admits nothing and "
                                 "evicts what runs",
                                 type);
                json_decref(cq);
        }
        json_decref(it);
        return stop;
}

/* ---- one Instance ------------------------------------------------------------------------- */

/* The build options: the Settings, the strict quota rule, the RuntimeClass when it exists. */
static int build_opts(struct tsr_controller *c, json_t *it, struct tsr_instance_pod_opts *o)
{
        const struct tsr_manufacturer *m = tsr_catalog_manufacturer_by_key(
            str_of(json_object_get(it, "status"), "detail", "manufacturer"));
        struct tsr_diag diag;
        char path[400];
        json_t *rc_obj = NULL;
        int rc;

        memset(o, 0, sizeof(*o));
        o->settings = c->cfg.settings;
        tsr_kube_cache_settings(c->cache, c->ns, &o->settings);
        /* Kueue v0.17.0: no quotaCheckStrategy IgnoreUndeclared (docs/kueue-config.md) */
        o->strict_quota = true;
        if (!m || !m->runtime_class ||
            !json_is_true(json_object_get(json_object_get(it, "spec"), "acceleratable")))
                return 0;
        snprintf(path, sizeof(path), RUNTIMECLASSES "/%s", m->runtime_class);
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_get(c->cfg.client, path, &rc_obj, NULL, &diag);
        json_decref(rc_obj);
        if (rc == TSR_ENOTFOUND)
                return 0; /* as upstream: the runtime class only when it exists */
        if (rc) {
                tsr_log(TSR_LOG_WARN, "RuntimeClass not read", "name", m->runtime_class, "error",
                        diag.msg, NULL);
                return rc;
        }
        o->runtime_class = m->runtime_class;
        return 0;
}

/* The first path where have lacks what want holds (objects recursively, arrays element by
 * element of equal length), written into path; false when have contains want. */
static bool differs_at(json_t *have, json_t *want, char *path, size_t len)
{
        size_t used = strlen(path), i;
        const char *key;
        json_t *v;

        if (json_is_object(want)) {
                if (!json_is_object(have))
                        return true;
                json_object_foreach(want, key, v)
                {
                        snprintf(path + used, len - used, "%s%s", used ? "." : "", key);
                        if (differs_at(json_object_get(have, key), v, path, len))
                                return true;
                        path[used] = '\0';
                }
                return false;
        }
        if (json_is_array(want)) {
                if (!json_is_array(have) || json_array_size(have) != json_array_size(want))
                        return true;
                json_array_foreach(want, i, v)
                {
                        snprintf(path + used, len - used, "[%zu]", i);
                        if (differs_at(json_array_get(have, i), v, path, len))
                                return true;
                        path[used] = '\0';
                }
                return false;
        }
        return !json_equal(have, want);
}

/* Applies the Service svc (borrowed) unless have already contains it; *out: the Service. */
static int ensure_service(struct tsr_controller *c, json_t *svc, json_t *have, json_t **out)
{
        const char *ns = ctl_meta_str(svc, "namespace"), *name = ctl_meta_str(svc, "name");
        char path[600], at[256] = "";
        struct tsr_diag diag;
        int rc;

        *out = NULL;
        if (have && !differs_at(have, svc, at, sizeof(at))) {
                *out = json_incref(have);
                return 0;
        }
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/services/%s", ns, name);
        tsr_diag_clear(&diag);
        rc = ctl_apply(c, path, svc, CTL_MANAGER, out, &diag);
        if (rc)
                tsr_log(TSR_LOG_WARN, "Instance Service not applied", "namespace", ns, "name", name,
                        "error", diag.msg, NULL);
        else
                tsr_log(TSR_LOG_INFO,
                        have ? "Instance Service updated" : "Instance Service created", "namespace",
                        ns, "name", name, NULL);
        return rc;
}

/* Creates the Pod pod (borrowed); *out: the created Pod. A stale Service of the Instance with
 * no ports any more is deleted first. */
static int create_pod(struct tsr_controller *c, json_t *inst, json_t *pod, json_t *svc,
                      json_t **out)
{
        const char *ns = ctl_meta_str(pod, "namespace"), *name = ctl_meta_str(pod, "name");
        struct tsr_diag diag;
        char path[600], *body;
        json_t *old = NULL;
        int rc;

        *out = NULL;
        if (!svc && !(rc = get_object(c, "services", ns, name, &old)) && old &&
            controlled_by(old, ctl_meta_str(inst, "uid"))) {
                snprintf(path, sizeof(path), "/api/v1/namespaces/%s/services/%s", ns, name);
                tsr_diag_clear(&diag);
                rc = ctl_delete(c, path, &diag);
                if (rc)
                        tsr_log(TSR_LOG_WARN, "stale Instance Service not deleted", "namespace", ns,
                                "name", name, "error", diag.msg, NULL);
        }
        json_decref(old);
        if (!(body = json_dumps(pod, JSON_COMPACT)))
                return TSR_ENOMEM;
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", ns);
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_request(c->cfg.client, "POST", path, "application/json", body,
                                     strlen(body), NULL, out, NULL, &diag);
        free(body);
        if (rc)
                tsr_log(TSR_LOG_WARN, "Instance Pod not created", "namespace", ns, "name", name,
                        "uid", ctl_meta_str(inst, "uid"), "error", diag.msg, NULL);
        else
                tsr_log(TSR_LOG_INFO, "Instance Pod created", "namespace", ns, "name", name, "uid",
                        ctl_meta_str(inst, "uid"), NULL);
        return rc;
}

/* The running half: ensure the Pod and the Service, report the status. */
static int run_instance(struct tsr_controller *c, json_t *inst, unsigned *requeue_ms)
{
        const char *ns = ctl_meta_str(inst, "namespace"), *name = ctl_meta_str(inst, "name");
        const char *uid = ctl_meta_str(inst, "uid");
        json_t *it = tsr_kube_cache_instancetype(c->cache, str_of(inst, "spec", "type"));
        json_t *pod = NULL, *want = NULL, *svc_want = NULL, *svc_have = NULL, *svc = NULL;
        json_t *node = NULL, *st = NULL;
        struct tsr_instance_pod_opts o;
        struct tsr_diag diag;
        char where[256] = "", msg[768], diag_build[TSR_DIAG_MSG_MAX] = "";
        const char *phase;
        int rc;

        if ((rc = get_object(c, "pods", ns, name, &pod)))
                goto out;
        if (pod && !controlled_by(pod, uid)) {
                snprintf(msg, sizeof(msg),
                         "a Pod named %s exists that is not this Instance's: delete it, or "
                         "rename the Instance",
                         name);
                rc = write_status(c, inst, status_with(inst, TSR_INSTANCE_FAILED, msg));
                goto out;
        }
        if (pod && ctl_meta_str(pod, "deletionTimestamp")) {
                rc = write_status(c, inst,
                                  status_with(inst, TSR_INSTANCE_STARTING,
                                              "waiting for its previous Pod to be deleted"));
                *requeue_ms = INSTANCE_POLL_MS;
                goto out;
        }
        if ((rc = build_opts(c, it, &o)))
                goto out;
        tsr_diag_clear(&diag);
        rc = tsr_instance_pod_build(inst, it, &o, &want, &svc_want, &diag);
        if (rc == TSR_ESTALE || rc == TSR_EINVAL) {
                bool bad = rc == TSR_EINVAL;

                if (pod) { /* a live Pod: report it, and say why it could not be compared */
                        snprintf(diag_build, sizeof(diag_build), "%s", diag.msg);
                        rc = 0;
                } else {
                        const char *was = str_of(inst, "status", "phase");

                        if (bad && strcmp(was, TSR_INSTANCE_FAILED))
                                ctl_event(c, inst, "Warning", "InvalidInstance", diag.msg);
                        tsr_log(bad ? TSR_LOG_WARN : TSR_LOG_INFO, "Instance Pod not built",
                                "namespace", ns, "name", name, "uid", uid, "error", diag.msg, NULL);
                        rc = write_status(
                            c, inst,
                            status_with(inst, bad ? TSR_INSTANCE_FAILED : TSR_INSTANCE_STARTING,
                                        diag.msg));
                        if (!bad)
                                *requeue_ms = INSTANCE_RETRY_MS;
                        goto out;
                }
        } else if (rc) {
                goto out;
        }
        if (!pod) {
                if ((rc = create_pod(c, inst, want, svc_want, &pod)))
                        goto out;
        } else if (want && differs_at(pod, want, where, sizeof(where))) {
                tsr_log(TSR_LOG_DEBUG, "Instance Pod differs; left as it is", "namespace", ns,
                        "name", name, "at", where, NULL);
        }
        if (svc_want && (!(rc = get_object(c, "services", ns, name, &svc_have))))
                rc = ensure_service(c, svc_want, svc_have, &svc);
        if (rc)
                goto out;
        node = tsr_kube_cache_get(c->cache, TSR_KUBE_CACHE_NODES, NULL,
                                  str_of(pod, "spec", "nodeName"));
        tsr_diag_clear(&diag);
        rc = tsr_instance_pod_status(inst, pod, svc, node, &st, &diag);
        if (rc) {
                tsr_log(TSR_LOG_WARN, "Instance status not read from its Pod", "namespace", ns,
                        "name", name, "error", diag.msg, NULL);
                goto out;
        }
        if (!want || where[0]) {
                const char *was = str_of(st, "phaseMessage", NULL);

                if (want)
                        snprintf(msg, sizeof(msg),
                                 "%s%sits Pod differs from what the Instance asks for now (at "
                                 "%s): left as it is; stop and start the Instance to recreate it",
                                 was, *was ? "; " : "", where);
                else
                        snprintf(msg, sizeof(msg),
                                 "%s%sits Pod cannot be rebuilt to compare (%s): left as it is",
                                 was, *was ? "; " : "", diag_build);
                if (json_object_set_new(st, "phaseMessage", json_string(msg))) {
                        rc = TSR_ENOMEM;
                        goto out;
                }
        }
        phase = json_string_value(json_object_get(st, "phase"));
        if (!strcmp(phase, TSR_INSTANCE_READY))
                *requeue_ms = INSTANCE_READY_POLL_MS;
        else if (!strcmp(phase, TSR_INSTANCE_STARTING))
                *requeue_ms = INSTANCE_POLL_MS;
        if (strcmp(phase, str_of(inst, "status", "phase")))
                tsr_log(TSR_LOG_INFO, "Instance phase", "namespace", ns, "name", name, "uid", uid,
                        "phase", phase, NULL);
        rc = write_status(c, inst, st);
        st = NULL;
out:
        json_decref(it);
        json_decref(pod);
        json_decref(want);
        json_decref(svc_want);
        json_decref(svc_have);
        json_decref(svc);
        json_decref(node);
        json_decref(st);
        return rc;
}

int ctl_instance_reconcile(struct tsr_controller *c, const char *ns, const char *name,
                           unsigned *requeue_ms)
{
        json_t *inst = tsr_kube_cache_get(c->cache, TSR_KUBE_CACHE_INSTANCES, ns, name);
        json_t *pod = NULL, *spec;
        const char *uid;
        char why[512];
        int rc = 0;

        if (!inst)
                return 0; /* deleted: the garbage collector takes its Pod and Service */
        uid = ctl_meta_str(inst, "uid");
        spec = json_object_get(inst, "spec");
        if (ctl_meta_str(inst, "deletionTimestamp")) {
                if (!(rc = get_object(c, "pods", ns, name, &pod)) && pod && controlled_by(pod, uid))
                        rc = delete_pod(c, inst, pod);
                if (!rc)
                        rc = write_status(c, inst,
                                          status_with(inst, TSR_INSTANCE_DELETING,
                                                      pod ? "its Pod is being deleted" : NULL));
                if (pod)
                        *requeue_ms = INSTANCE_POLL_MS;
        } else if (json_is_true(json_object_get(spec, "stop"))) {
                if (!(rc = get_object(c, "pods", ns, name, &pod)) && pod &&
                    !controlled_by(pod, uid)) {
                        json_decref(pod);
                        pod = NULL;
                }
                if (!rc && pod) {
                        rc = delete_pod(c, inst, pod);
                        if (!rc)
                                rc = write_status(c, inst,
                                                  status_with(inst, TSR_INSTANCE_STOPPING,
                                                              "its Pod is being deleted"));
                        *requeue_ms = INSTANCE_POLL_MS;
                } else if (!rc) {
                        rc = write_status(c, inst,
                                          json_pack("{s:s}", "phase", TSR_INSTANCE_STOPPED));
                }
        } else if (must_stop(c, inst, why, sizeof(why))) {
                rc = stop_instance(c, inst, why);
        } else {
                rc = run_instance(c, inst, requeue_ms);
        }
        json_decref(pod);
        json_decref(inst);
        return rc;
}

int ctl_instances_drained(struct tsr_controller *c, const char *cq)
{
        json_t *list = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_INSTANCES), *inst;
        char why[512];
        size_t i;
        int failed = 0;

        snprintf(why, sizeof(why),
                 "its ClusterQueue %s was set to HoldAndDrain: Kueue admits nothing and evicts "
                 "what runs",
                 cq);
        json_array_foreach(list, i, inst)
        {
                json_t *spec = json_object_get(inst, "spec");

                if (strcmp(str_of(inst, "spec", "type"), cq) ||
                    json_is_true(json_object_get(spec, "stop")) ||
                    ctl_meta_str(inst, "deletionTimestamp"))
                        continue;
                failed |= stop_instance(c, inst, why) != 0;
        }
        json_decref(list);
        return failed ? TSR_EIO : 0;
}
