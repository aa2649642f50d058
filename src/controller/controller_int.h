/*
 * controller_int.h - what the controller's reconcilers share: the controller itself (its caches,
 * queue, settings and counters) and the three ways they write (server-side apply, delete, Event).
 *
 * Every reconciler runs on the one worker thread, so none of them takes a lock of its own; they
 * read the caches (copies, kube/cache.h) and write through the client. A reconciler returns 0
 * when it is done with its key, or an error to have the key retried after its backoff.
 */
#ifndef TSR_CONTROLLER_CONTROLLER_INT_H
#define TSR_CONTROLLER_CONTROLLER_INT_H

#include "codec/kueue_chain.h"
#include "controller/controller.h"
#include "controller/managed_nodes.h"
#include "controller/workload_index.h"
#include "controller/workqueue.h"
#include "kube/cache.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

struct tsr_kube_cache;
struct tsr_leader;
struct tsr_workqueue;

/* The field managers of what the controller applies. */
#define CTL_MANAGER          "tessera-controller"
#define CTL_MANAGER_FEATURES "tessera-node-features"
#define CTL_MANAGER_CHECK    TSR_KUEUE_NODE_DEVICES /* upstream owns the verdicts as the check */

/* The reconcilers, for the counters. */
enum ctl_kind {
        CTL_KIND_ADMISSIONCHECK,
        CTL_KIND_NODE,
        CTL_KIND_CHAIN,
        CTL_KIND_WORKLOADS,
        CTL_KIND_WORKLOAD,
        CTL_KIND_INSTANCETYPES,
        CTL_KIND_INSTANCE,
        CTL_KIND_INSTANCES_DRAINED,
        CTL_KIND_WEBHOOK_CERTS,
        CTL_N_KINDS,
};

/* The most Workload keys judged in one batch (controller.c's judge_workloads). */
#define CTL_WORKLOAD_BATCH 64

/* The webhook Service's DNS names a serving certificate carries: name, name.ns, name.ns.svc,
 * name.ns.svc.cluster.local. */
#define CTL_CERT_DNS_N 4

struct tsr_controller {
        struct tsr_controller_config cfg;
        char ns[254], identity[254], lease[254];
        struct tsr_kube_cache *cache;
        struct tsr_workqueue *queue;
        struct tsr_leader *leader;
        pthread_t worker;
        bool worker_started;
        atomic_bool leading;
        json_t *verdicts; /* "ns/name" -> {uid, at}: Ready verdicts written, the worker's alone */
        /* managed_nodes.c: the worker's memo of the managed nodes and the cache generations of
         * the Nodes, Devices and Settings it was built from */
        struct ctl_nodes nodes_view;
        unsigned long nodes_view_gen[CTL_NODES_VIEW_KINDS];
        bool nodes_view_built;
        struct ctl_workload_index workloads; /* node_devices_check.c's, the worker's alone */
        char batch[CTL_WORKLOAD_BATCH][TSR_WORKQUEUE_KEY_MAX]; /* the worker's alone */
        /* instance_reconciler.c: "ns/name" -> the last signature seen, each map touched only by
         * its resource's change callbacks */
        json_t *seen_instances, *seen_instancetypes, *seen_clusterqueues;
        /* counters */
        atomic_ulong reconciles[CTL_N_KINDS], failures[CTL_N_KINDS];
        atomic_ulong verdicts_ready, verdicts_retry, verdicts_unchanged;
        atomic_ulong verdict_snapshots; /* snapshots judged: each read its nodes' Pods once */
        atomic_ulong applies, deletes, events;
        /* webhook_certs.c: the Secret and Service split from the config ("" cert_ns: off), the
         * configurations' names; [0] the serving certificate, [1] the CA */
        char cert_secret[508], cert_ns[254], cert_name[254], cert_configurations[1024];
        char *cert_dns[CTL_CERT_DNS_N];
        atomic_ulong cert_rotations[2], cert_bundle_patches;
        atomic_llong cert_not_after[2];
};

/* Server-side apply of obj (borrowed) at path (the object's own path, "/status" for status) as
 * manager, forcing ownership. *out (may be NULL) receives the object after. 0 or the client's
 * errors, with diag. */
int ctl_apply(struct tsr_controller *c, const char *path, json_t *obj, const char *manager,
              json_t **out, struct tsr_diag *diag);

/*
 * Writes status (taken; NULL: out of memory) on the cached object cached (borrowed) wholesale,
 * unless it already says it: a PUT at path (its status subresource) of the cached object with
 * the new status, guarded by its resourceVersion, so a copy that moved on gets a 409
 * (TSR_ESTALE) and is retried by the caller's backoff. Server-side apply cannot do this: an
 * emptied map it applies reads as null. Returns 0 (written or unchanged; *wrote, when not NULL,
 * says which) or the client's errors, with diag.
 */
int ctl_put_status(struct tsr_controller *c, const char *path, json_t *cached, json_t *status,
                   bool *wrote, struct tsr_diag *diag);

/* DELETE path; a 404 is success. 0 or the client's errors, with diag. */
int ctl_delete(struct tsr_controller *c, const char *path, struct tsr_diag *diag);

/* Records a core v1 Event (type "Normal" or "Warning") on obj (borrowed: its apiVersion, kind,
 * metadata name, namespace and uid). Best effort: a failure is logged, never returned. */
void ctl_event(struct tsr_controller *c, json_t *obj, const char *type, const char *reason,
               const char *message);

/* obj's metadata.<field> string, or NULL. */
const char *ctl_meta_str(json_t *obj, const char *field);

/* Whether the cached gpustack-node-devices AdmissionCheck's condition Active is True; *cached (may
 * be NULL) receives the cached object, or NULL (json_decref it). */
bool ctl_admission_check_active(struct tsr_controller *c, json_t **cached);

/* The wall-clock time as metav1.Time writes it ("2026-12-03T18:11:40Z"), len >= 21. */
void ctl_now_rfc3339(char *out, size_t len);

/* Queues key (logging an out-of-memory). */
void ctl_enqueue(struct tsr_controller *c, const char *key);

/* The reconcilers. */
int ctl_admission_check_reconcile(struct tsr_controller *c);
int ctl_node_features_reconcile(struct tsr_controller *c, const char *node);
struct ctl_node;
/* The credits capacity of managed node n (NULL: not managed) on Node object node (borrowed). */
int ctl_node_credits_reconcile(struct tsr_controller *c, const struct ctl_node *n, json_t *node);
/* *requeue_ms (0: none) asks for a look again (a draining ClusterQueue). */
int ctl_chain_reconcile(struct tsr_controller *c, unsigned *requeue_ms);
void ctl_workloads_scan(struct tsr_controller *c);
/* Authors, tears down and reports the InstanceTypes; *requeue_ms (0: none) while one tears
 * down. */
int ctl_instancetypes_reconcile(struct tsr_controller *c, unsigned *requeue_ms);
/* instance_reconciler.c: the maps of the change callbacks (0 or TSR_ENOMEM), released by
 * ctl_instances_release; the change callback (Instances, InstanceTypes, ClusterQueues: queues
 * the Instances a change concerns); every Instance queued (on becoming leader). */
int ctl_instances_init(struct tsr_controller *c);
void ctl_instances_release(struct tsr_controller *c);
void ctl_instances_on_change(struct tsr_controller *c, enum tsr_kube_cache_resource r);
void ctl_instances_enqueue_all(struct tsr_controller *c);
/* Runs (or stops) the Instance ns/name; *requeue_ms (0: none) while it starts, stops or runs. */
int ctl_instance_reconcile(struct tsr_controller *c, const char *ns, const char *name,
                           unsigned *requeue_ms);
/* Stops every running Instance of the type whose ClusterQueue cq was seen HoldAndDrain. */
int ctl_instances_drained(struct tsr_controller *c, const char *cq);
/* Keeps the webhook's Secret and the caBundles (webhook_certs.c); *requeue_ms: the next look
 * (the earlier of a renewal and the resync). */
int ctl_webhook_certs_reconcile(struct tsr_controller *c, unsigned *requeue_ms);
/*
 * Judges the Workloads of the n keys ("workload/<ns>/<name>") together, one snapshot per
 * ClusterQueue (a Retry is looked at again when Kueue reserves quota for it again); rc[i]
 * receives key i's result (0: done with it, else retried after its backoff).
 */
void ctl_workloads_reconcile(struct tsr_controller *c, char (*keys)[TSR_WORKQUEUE_KEY_MAX],
                             size_t n, int *rc);

#endif
