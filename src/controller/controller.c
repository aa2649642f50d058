/*
 * controller.c - the controller's wiring (controller.h): the caches and their change callbacks,
 * the elector, the worker thread that runs one key at a time, and the three writes reconcilers
 * share (apply, delete, Event).
 *
 * Change callbacks only queue keys, coarse ones: a change among the Nodes or Devices queues the
 * chain and every node's labels; one among the Workloads queues the scan, which queues each
 * Workload waiting for the check. The work queue folds repeats, so a burst of events costs one
 * reconcile. Becoming leader queues everything once; a standby's worker drops what it is handed.
 */
#include "controller/controller_int.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "controller/leader.h"
#include "controller/workqueue.h"
#include "kube/cache.h"
#include "kube/client.h"
#include "kube/event.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CTL_RESOURCES                                                                              \
        (TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_NODES) | TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_DEVICES) |   \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_NAMESPACES) |                                           \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_WORKLOADS) |                                            \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_CLUSTERQUEUES) |                                        \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_LOCALQUEUES) |                                          \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_RESOURCEFLAVORS) |                                      \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_TOPOLOGIES) |                                           \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_ADMISSIONCHECKS) |                                      \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_INSTANCETYPES) |                                        \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_SETTINGS) |                                             \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_INSTANCES))

static const char *const kind_names[CTL_N_KINDS] = {
    [CTL_KIND_ADMISSIONCHECK] = "admissioncheck",
    [CTL_KIND_NODE] = "node",
    [CTL_KIND_CHAIN] = "chain",
    [CTL_KIND_WORKLOADS] = "workloads",
    [CTL_KIND_WORKLOAD] = "workload",
    [CTL_KIND_INSTANCETYPES] = "instancetypes",
    [CTL_KIND_INSTANCE] = "instance",
    [CTL_KIND_INSTANCES_DRAINED] = "instances-drained",
    [CTL_KIND_WEBHOOK_CERTS] = "webhook-certs",
};

void ctl_enqueue(struct tsr_controller *c, const char *key)
{
        if (tsr_workqueue_add(c->queue, key))
                tsr_log(TSR_LOG_ERROR, "cannot queue", "key", key, NULL);
}

/* Queues node/<name> for every Node held. */
static void enqueue_nodes(struct tsr_controller *c)
{
        json_t *nodes = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_NODES), *n;
        char key[TSR_WORKQUEUE_KEY_MAX];
        size_t i;

        json_array_foreach(nodes, i, n)
        {
                const char *name = ctl_meta_str(n, "name");

                if (name && snprintf(key, sizeof(key), "node/%s", name) < (int)sizeof(key))
                        ctl_enqueue(c, key);
        }
        json_decref(nodes);
}

static void on_change(void *ctx, enum tsr_kube_cache_resource r)
{
        struct tsr_controller *c = ctx;

        ctl_instances_on_change(c, r); /* Instances, InstanceTypes, ClusterQueues */
        switch (r) {
        case TSR_KUBE_CACHE_NODES:
        case TSR_KUBE_CACHE_DEVICES:
                enqueue_nodes(c);
                ctl_enqueue(c, "chain");
                ctl_enqueue(c, "workloads");
                ctl_enqueue(c, "instancetypes");
                break;
        case TSR_KUBE_CACHE_CLUSTERQUEUES:
        case TSR_KUBE_CACHE_INSTANCETYPES:
                ctl_enqueue(c, "chain");
                ctl_enqueue(c, "instancetypes");
                break;
        case TSR_KUBE_CACHE_SETTINGS:
                ctl_enqueue(c, "instancetypes");
                break;
        case TSR_KUBE_CACHE_NAMESPACES:
        case TSR_KUBE_CACHE_LOCALQUEUES:
        case TSR_KUBE_CACHE_RESOURCEFLAVORS:
        case TSR_KUBE_CACHE_TOPOLOGIES:
                ctl_enqueue(c, "chain");
                break;
        case TSR_KUBE_CACHE_ADMISSIONCHECKS:
                ctl_enqueue(c, "admissioncheck");
                ctl_enqueue(c, "chain");
                break;
        case TSR_KUBE_CACHE_WORKLOADS:
                ctl_enqueue(c, "workloads");
                break;
        default:
                break;
        }
}

static void on_started(void *ctx)
{
        struct tsr_controller *c = ctx;

        atomic_store(&c->leading, true);
        ctl_enqueue(c, "admissioncheck");
        ctl_enqueue(c, "chain");
        ctl_enqueue(c, "workloads");
        ctl_enqueue(c, "instancetypes");
        enqueue_nodes(c);
        ctl_instances_enqueue_all(c);
        if (c->cert_ns[0])
                ctl_enqueue(c, "webhook-certs");
}

static void on_lost(void *ctx)
{
        struct tsr_controller *c = ctx;

        atomic_store(&c->leading, false);
        if (c->cfg.on_lost)
                c->cfg.on_lost(c->cfg.ctx);
}

/* Runs the reconciler of key. Returns its result; *requeue_ms asks for a later look. */
static int dispatch(struct tsr_controller *c, const char *key, enum ctl_kind *kind,
                    unsigned *requeue_ms)
{
        char ns[254], name[254];

        *requeue_ms = 0;
        if (!strcmp(key, "admissioncheck"))
                return *kind = CTL_KIND_ADMISSIONCHECK, ctl_admission_check_reconcile(c);
        if (!strcmp(key, "chain"))
                return *kind = CTL_KIND_CHAIN, ctl_chain_reconcile(c, requeue_ms);
        if (!strcmp(key, "instancetypes"))
                return *kind = CTL_KIND_INSTANCETYPES, ctl_instancetypes_reconcile(c, requeue_ms);
        if (!strcmp(key, "webhook-certs"))
                return *kind = CTL_KIND_WEBHOOK_CERTS, ctl_webhook_certs_reconcile(c, requeue_ms);
        if (!strcmp(key, "workloads"))
                return *kind = CTL_KIND_WORKLOADS, ctl_workloads_scan(c), 0;
        if (!strncmp(key, "node/", 5))
                return *kind = CTL_KIND_NODE, ctl_node_features_reconcile(c, key + 5);
        if (!strncmp(key, "instances-drained/", 18))
                return *kind = CTL_KIND_INSTANCES_DRAINED, ctl_instances_drained(c, key + 18);
        if (!strncmp(key, "instance/", 9)) {
                *kind = CTL_KIND_INSTANCE;
                if (sscanf(key, "instance/%253[^/]/%253s", ns, name) != 2)
                        return TSR_EINVAL;
                return ctl_instance_reconcile(c, ns, name, requeue_ms);
        }
        *kind = CTL_KIND_WORKLOAD; /* an unknown key: dropped after its backoffs */
        return TSR_EINVAL;
}

/* Counts key's reconcile of kind and queues it again as its result rc and requeue_ms ask. */
static void finish(struct tsr_controller *c, const char *key, enum ctl_kind kind, int rc,
                   unsigned requeue_ms)
{
        atomic_fetch_add(&c->reconciles[kind], 1);
        if (rc) {
                atomic_fetch_add(&c->failures[kind], 1);
                tsr_workqueue_add_rate_limited(c->queue, key);
        } else {
                tsr_workqueue_forget(c->queue, key);
                if (requeue_ms)
                        tsr_workqueue_add_after(c->queue, key, requeue_ms);
        }
        tsr_workqueue_done(c->queue, key);
}

/*
 * The Workloads waiting for the check are judged in batches: every workload key waiting when
 * one is handed out (up to CTL_WORKLOAD_BATCH) goes with it, so their nodes' Pods are read, and the
 * inflight Workloads charged, once for all of them.
 */
static void judge_workloads(struct tsr_controller *c, const char *first)
{
        char(*keys)[TSR_WORKQUEUE_KEY_MAX] = c->batch;
        int rc[CTL_WORKLOAD_BATCH];
        char count[24];
        size_t n;

        strcpy(keys[0], first);
        n = 1 +
            tsr_workqueue_take_matching(c->queue, "workload/", keys + 1, CTL_WORKLOAD_BATCH - 1);
        snprintf(count, sizeof(count), "%zu", n);
        tsr_log(TSR_LOG_DEBUG, "judging Workloads", "count", count, "first", first, NULL);
        ctl_workloads_reconcile(c, keys, n, rc);
        for (size_t i = 0; i < n; i++)
                finish(c, keys[i], CTL_KIND_WORKLOAD, rc[i], 0);
}

static void *worker_main(void *arg)
{
        struct tsr_controller *c = arg;
        char key[TSR_WORKQUEUE_KEY_MAX];

        while (tsr_workqueue_get(c->queue, key)) {
                enum ctl_kind kind = CTL_KIND_WORKLOAD;
                unsigned requeue_ms = 0;
                int rc;

                if (!atomic_load(&c->leading) || !tsr_kube_cache_current(c->cache)) {
                        /* a standby writes nothing; a cache not listed yet, or known to miss
                         * changes (stale: relisting after a 410, 401 or 403), would write
                         * wrongly. Keys come back when this replica leads (on_started) or the
                         * cache is current. */
                        if (atomic_load(&c->leading))
                                tsr_workqueue_add_after(c->queue, key, 500);
                        tsr_workqueue_done(c->queue, key);
                        continue;
                }
                if (!strncmp(key, "workload/", 9)) {
                        judge_workloads(c, key);
                        continue;
                }
                rc = dispatch(c, key, &kind, &requeue_ms);
                finish(c, key, kind, rc, requeue_ms);
        }
        return NULL;
}

int ctl_apply(struct tsr_controller *c, const char *path, json_t *obj, const char *manager,
              json_t **out, struct tsr_diag *diag)
{
        struct tsr_kube_patch_opts po = {.field_manager = manager, .force = true};
        int rc = tsr_kube_client_patch(c->cfg.client, path, TSR_KUBE_PATCH_APPLY, obj, &po, out,
                                       NULL, diag);

        if (!rc)
                atomic_fetch_add(&c->applies, 1);
        return rc;
}

int ctl_put_status(struct tsr_controller *c, const char *path, json_t *cached, json_t *status,
                   bool *wrote, struct tsr_diag *diag)
{
        json_t *obj;
        char *body = NULL;
        int rc;

        if (wrote)
                *wrote = false;
        if (!status)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        if (json_equal(status, json_object_get(cached, "status"))) {
                json_decref(status);
                return 0;
        }
        obj = json_deep_copy(cached);
        if (!obj || json_object_set_new(obj, "status", status) ||
            !(body = json_dumps(obj, JSON_COMPACT))) {
                if (!obj)
                        json_decref(status);
                json_decref(obj);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        rc = tsr_kube_client_request(c->cfg.client, "PUT", path, "application/json", body,
                                     strlen(body), NULL, NULL, NULL, diag);
        if (wrote)
                *wrote = !rc;
        free(body);
        json_decref(obj);
        return rc;
}

int ctl_delete(struct tsr_controller *c, const char *path, struct tsr_diag *diag)
{
        int rc = tsr_kube_client_request(c->cfg.client, "DELETE", path, NULL, NULL, 0, NULL, NULL,
                                         NULL, diag);

        if (rc == TSR_ENOTFOUND)
                return 0;
        if (!rc)
                atomic_fetch_add(&c->deletes, 1);
        return rc;
}

const char *ctl_meta_str(json_t *obj, const char *field)
{
        return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

void ctl_now_rfc3339(char *out, size_t len)
{
        tsr_kube_now_rfc3339(out, len);
}

void ctl_event(struct tsr_controller *c, json_t *obj, const char *type, const char *reason,
               const char *message)
{
        json_t *meta = json_object_get(obj, "metadata");
        struct tsr_kube_event_record ev = {
            .api_version = json_string_value(json_object_get(obj, "apiVersion")),
            .kind = json_string_value(json_object_get(obj, "kind")),
            .name = json_string_value(json_object_get(meta, "name")),
            .namespace_ = json_string_value(json_object_get(meta, "namespace")),
            .uid = json_string_value(json_object_get(meta, "uid")),
            .type = type,
            .reason = reason,
            .message = message,
            .component = CTL_MANAGER,
            .instance = c->identity,
        };
        struct tsr_diag diag;
        int rc;

        if (!ev.name)
                return;
        tsr_diag_clear(&diag);
        rc = tsr_kube_event_post(c->cfg.client, &ev, &diag);
        if (rc)
                tsr_log(TSR_LOG_WARN, "cannot record an Event", "object", ev.name, "reason", reason,
                        "error", diag.msg[0] ? diag.msg : tsr_strerror(rc), NULL);
        else
                atomic_fetch_add(&c->events, 1);
}

/* Splits "ns/name" into ns and name (each < 254 bytes). 0 or -1. */
static int split_ref(const char *ref, char *ns, char *name)
{
        const char *slash = strchr(ref, '/');

        if (!slash || slash == ref || !slash[1] || strchr(slash + 1, '/') ||
            (size_t)(slash - ref) >= 254 || strlen(slash + 1) >= 254)
                return -1;
        snprintf(ns, 254, "%.*s", (int)(slash - ref), ref);
        snprintf(name, 254, "%s", slash + 1);
        return 0;
}

/* The webhook certificates' configuration (webhook_certs.c), when cfg->cert_secret is set. */
static int certs_init(struct tsr_controller *c, struct tsr_diag *diag)
{
        const struct tsr_controller_config *cfg = &c->cfg;
        char svc_ns[254], svc[254];

        if (!cfg->cert_secret || !*cfg->cert_secret)
                return 0;
        if (split_ref(cfg->cert_secret, c->cert_ns, c->cert_name) || !cfg->cert_service ||
            split_ref(cfg->cert_service, svc_ns, svc))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "controller: the webhook certificates need a Secret and a "
                                    "Service as NAMESPACE/NAME");
        snprintf(c->cert_secret, sizeof(c->cert_secret), "%s", cfg->cert_secret);
        snprintf(c->cert_configurations, sizeof(c->cert_configurations), "%s",
                 cfg->cert_configurations ? cfg->cert_configurations : "");
        if (!c->cfg.cert_validity_s)
                c->cfg.cert_validity_s = 365ull * 86400;
        if (!c->cfg.cert_ca_validity_s)
                c->cfg.cert_ca_validity_s = 3650ull * 86400;
        for (int i = 0; i < CTL_CERT_DNS_N; i++) {
                static const char *const suffix[CTL_CERT_DNS_N] = {"", "", ".svc",
                                                                   ".svc.cluster.local"};
                size_t len = strlen(svc) + strlen(svc_ns) + strlen(suffix[i]) + 2;

                c->cert_dns[i] = malloc(len);
                if (!c->cert_dns[i])
                        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                if (i)
                        snprintf(c->cert_dns[i], len, "%s.%s%s", svc, svc_ns, suffix[i]);
                else
                        snprintf(c->cert_dns[i], len, "%s", svc);
        }
        return 0;
}

int tsr_controller_start(const struct tsr_controller_config *cfg, struct tsr_controller **out,
                         struct tsr_diag *diag)
{
        struct tsr_controller *c = calloc(1, sizeof(*c));
        struct tsr_kube_cache_opts co = {.resources = CTL_RESOURCES, .on_change = on_change};
        int rc;

        if (!c)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        c->cfg = *cfg;
        snprintf(c->ns, sizeof(c->ns), "%s", cfg->namespace_ ? cfg->namespace_ : "gpustack-system");
        snprintf(c->identity, sizeof(c->identity), "%s", cfg->identity ? cfg->identity : "");
        snprintf(c->lease, sizeof(c->lease), "%s",
                 cfg->lease_name ? cfg->lease_name : "tessera-controller");
        if (!c->cfg.requeue_after_s)
                c->cfg.requeue_after_s = 30;
        c->queue = tsr_workqueue_new(50, 30000);
        c->verdicts = json_object();
        if (!c->queue || !c->verdicts || ctl_instances_init(c)) {
                tsr_workqueue_free(c->queue);
                json_decref(c->verdicts);
                ctl_instances_release(c);
                free(c);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        co.ctx = c;
        co.settings_namespace = c->ns;
        rc = certs_init(c, diag);
        if (!rc)
                rc = tsr_kube_cache_new_opts(cfg->client, &co, &c->cache, diag);
        if (!rc && pthread_create(&c->worker, NULL, worker_main, c))
                rc = tsr_diag_set(diag, TSR_EIO, "controller: cannot start the worker thread");
        c->worker_started = !rc;
        if (!rc && cfg->leader_elect) {
                struct tsr_leader_config lc = {
                    .namespace_ = c->ns,
                    .name = c->lease,
                    .identity = c->identity,
                    .lease_ms = cfg->lease_ms,
                    .renew_ms = cfg->renew_ms,
                    .retry_ms = cfg->retry_ms,
                    .on_started = on_started,
                    .on_lost = on_lost,
                    .ctx = c,
                };

                rc = tsr_leader_start(cfg->client, &lc, &c->leader, diag);
        } else if (!rc) {
                on_started(c);
        }
        if (rc) {
                tsr_controller_stop(c);
                return rc;
        }
        *out = c;
        return 0;
}

bool tsr_controller_ready(struct tsr_controller *c, char *why, size_t why_len)
{
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                struct tsr_kube_cache_stats st;

                if (!(CTL_RESOURCES & TSR_KUBE_CACHE_BIT(r)))
                        continue;
                tsr_kube_cache_stats(c->cache, (enum tsr_kube_cache_resource)r, &st);
                if (!st.synced || st.stale) {
                        snprintf(why, why_len, "the %s cache %s%s%s",
                                 tsr_kube_cache_resource_name((enum tsr_kube_cache_resource)r),
                                 st.synced ? "is listing again" : "has not listed yet",
                                 st.last_error[0] ? ": " : "", st.last_error);
                        return false;
                }
        }
        return true;
}

int tsr_controller_metrics(struct tsr_controller *c, struct tsr_buf *out)
{
        int rc = tsr_buf_addf(out,
                              "# HELP tessera_controller_leader Whether this replica holds the "
                              "Lease.\n# TYPE tessera_controller_leader gauge\n"
                              "tessera_controller_leader %d\n"
                              "# HELP tessera_controller_queue_depth Keys waiting.\n"
                              "# TYPE tessera_controller_queue_depth gauge\n"
                              "tessera_controller_queue_depth %zu\n"
                              "# HELP tessera_controller_reconciles_total Reconciles by kind "
                              "and result.\n# TYPE tessera_controller_reconciles_total counter\n",
                              atomic_load(&c->leading) ? 1 : 0, tsr_workqueue_len(c->queue));

        for (int k = 0; !rc && k < CTL_N_KINDS; k++) {
                unsigned long all = atomic_load(&c->reconciles[k]);
                unsigned long bad = atomic_load(&c->failures[k]);

                rc = tsr_buf_addf(out,
                                  "tessera_controller_reconciles_total{kind=\"%s\",result=\"ok\"} "
                                  "%lu\ntessera_controller_reconciles_total{kind=\"%s\",result="
                                  "\"error\"} %lu\n",
                                  kind_names[k], all - bad, kind_names[k], bad);
        }
        if (!rc)
                rc = tsr_buf_addf(
                    out,
                    "# HELP tessera_controller_verdicts_total AdmissionCheck verdicts written, by "
                    "state; unchanged ones are not written.\n"
                    "# TYPE tessera_controller_verdicts_total counter\n"
                    "tessera_controller_verdicts_total{state=\"Ready\"} %lu\n"
                    "tessera_controller_verdicts_total{state=\"Retry\"} %lu\n"
                    "tessera_controller_verdicts_total{state=\"unchanged\"} %lu\n"
                    "# HELP tessera_controller_verdict_snapshots_total Gate-3 snapshots judged: "
                    "each reads its nodes' Pods once for the Workloads queued together.\n"
                    "# TYPE tessera_controller_verdict_snapshots_total counter\n"
                    "tessera_controller_verdict_snapshots_total %lu\n"
                    "# HELP tessera_controller_writes_total Writes to the API server.\n"
                    "# TYPE tessera_controller_writes_total counter\n"
                    "tessera_controller_writes_total{verb=\"apply\"} %lu\n"
                    "tessera_controller_writes_total{verb=\"delete\"} %lu\n"
                    "tessera_controller_writes_total{verb=\"event\"} %lu\n",
                    atomic_load(&c->verdicts_ready), atomic_load(&c->verdicts_retry),
                    atomic_load(&c->verdicts_unchanged), atomic_load(&c->verdict_snapshots),
                    atomic_load(&c->applies), atomic_load(&c->deletes), atomic_load(&c->events));
        if (!rc && c->cert_ns[0])
                rc = tsr_buf_addf(
                    out,
                    "# HELP tessera_webhook_cert_expiry_timestamp_seconds When the webhook's "
                    "certificates expire (0: none yet).\n"
                    "# TYPE tessera_webhook_cert_expiry_timestamp_seconds gauge\n"
                    "tessera_webhook_cert_expiry_timestamp_seconds{cert=\"serving\"} %lld\n"
                    "tessera_webhook_cert_expiry_timestamp_seconds{cert=\"ca\"} %lld\n"
                    "# HELP tessera_webhook_cert_rotations_total Webhook certificates issued.\n"
                    "# TYPE tessera_webhook_cert_rotations_total counter\n"
                    "tessera_webhook_cert_rotations_total{cert=\"serving\"} %lu\n"
                    "tessera_webhook_cert_rotations_total{cert=\"ca\"} %lu\n"
                    "# HELP tessera_webhook_cert_bundle_patches_total caBundle patches of the "
                    "webhook configurations.\n"
                    "# TYPE tessera_webhook_cert_bundle_patches_total counter\n"
                    "tessera_webhook_cert_bundle_patches_total %lu\n",
                    (long long)atomic_load(&c->cert_not_after[0]),
                    (long long)atomic_load(&c->cert_not_after[1]),
                    atomic_load(&c->cert_rotations[0]), atomic_load(&c->cert_rotations[1]),
                    atomic_load(&c->cert_bundle_patches));
        if (!rc && c->cache)
                rc = tsr_kube_cache_render_metrics(c->cache, out);
        return rc;
}

void tsr_controller_stop(struct tsr_controller *c)
{
        if (!c)
                return;
        atomic_store(&c->leading, false);
        tsr_workqueue_shutdown(c->queue);
        if (c->worker_started)
                pthread_join(c->worker, NULL);
        tsr_leader_stop(c->leader); /* releases the Lease once nothing more is written */
        tsr_kube_cache_free(c->cache);
        tsr_workqueue_free(c->queue);
        json_decref(c->verdicts);
        ctl_nodes_release(&c->nodes_view);
        ctl_workload_index_release(&c->workloads);
        ctl_instances_release(c);
        for (int i = 0; i < CTL_CERT_DNS_N; i++)
                free(c->cert_dns[i]);
        free(c);
}
