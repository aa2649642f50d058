/*
 * controller.h - `tessera controller` as a library: gates 2 and 3 on a real cluster
 * (docs/controller.md).
 *
 * Every replica keeps watch-fed caches (kube/cache.h) of the Nodes, Devices, Namespaces and
 * Kueue's Workloads, ClusterQueues, LocalQueues, ResourceFlavors, Topologies and AdmissionChecks,
 * and campaigns for the Lease (leader.h). Only the leader writes: one worker thread takes keys off
 * a rate-limited work queue (workqueue.h) fed by the caches' change callbacks and runs the
 * reconciler the key names:
 *   "admissioncheck"          the gpustack-node-devices AdmissionCheck, applied and kept Active
 *                             (node_devices_check.c);
 *   "node/<name>"             the Node's feature labels (node_features.c);
 *   "chain"                   the Kueue chain derived from the managed nodes (chain_reconciler.c);
 *   "workloads"               a scan that queues every Workload waiting for this check;
 *   "workload/<ns>/<name>"    the check's verdict on one Workload (node_devices_check.c);
 *   "webhook-certs"           the webhook's Secret and caBundles, with --webhook-cert-secret
 *                             (webhook_certs.c), every minute and at each renewal time.
 * A reconciler that fails is retried after its key's backoff. A Retry verdict needs no timer of
 * ours: Kueue evicts the Workload and reserves quota for it again after requeueAfterSeconds, and
 * that new reservation is a watch event that queues its key. Until the caches have listed
 * everything, and while one lists again after a 410, 401 or 403 (tsr_kube_cache_current), nothing
 * is written and readiness says why.
 *
 * Ownership: the config is copied; the client is borrowed and must outlive the controller.
 * Thread-safety: tsr_controller_ready and tsr_controller_metrics may be called from any thread.
 */
#ifndef TSR_CONTROLLER_CONTROLLER_H
#define TSR_CONTROLLER_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/settings.h"

struct tsr_buf;
struct tsr_diag;
struct tsr_kube_client;
struct tsr_controller;

struct tsr_controller_config {
        struct tsr_kube_client *client;
        const char *namespace_; /* the release namespace: the Lease, excluded from LocalQueues */
        const char *identity;   /* this replica, for the Lease */
        const char *lease_name; /* "tessera-controller" */
        bool leader_elect;      /* false: lead at once (one replica, tests) */
        unsigned lease_ms, renew_ms, retry_ms; /* leader.h; 0: its defaults */
        unsigned requeue_after_s;              /* a Retry's requeueAfterSeconds: 30 */
        struct tsr_settings settings;
        /* tessera's own webhook certificates (webhook_certs.c); cert_secret NULL or "": off */
        const char *cert_secret;         /* "ns/name" of the kubernetes.io/tls Secret */
        const char *cert_service;        /* "ns/name" of the webhook Service (the DNS names) */
        const char *cert_configurations; /* "name[,name]": Mutating/ValidatingWebhookConfigs */
        unsigned long long cert_validity_s, cert_ca_validity_s; /* 0: one year, ten years */
        void (*on_lost)(void *ctx); /* the Lease was lost: the process should exit; may be NULL */
        void *ctx;
};

/* Starts the caches and the elector. Returns 0 and *out, or an error with diag. */
int tsr_controller_start(const struct tsr_controller_config *cfg, struct tsr_controller **out,
                         struct tsr_diag *diag);

/* Ready once every cache has listed and none is listing again after a 410, 401 or 403
 * (tsr_kube_cache_current); else false with why (why_len bytes) filled. */
bool tsr_controller_ready(struct tsr_controller *c, char *why, size_t why_len);

/* Appends the Prometheus text exposition of the controller's counters to out. 0 or an error. */
int tsr_controller_metrics(struct tsr_controller *c, struct tsr_buf *out);

/* Stops the worker, releases the Lease, stops the caches, frees c. c may be NULL. */
void tsr_controller_stop(struct tsr_controller *c);

#endif
