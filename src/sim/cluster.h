/*
 * cluster.h - the simulator's virtual cluster: nodes with fake GPUs and a device manager each,
 * Pods, Kueue Workloads, a virtual clock, and the five gates a Pod passes from `kubectl apply` to a
 * device.
 *
 * The actors, each in its own file, run in this order at every reconcile until nothing moves:
 *   webhooks.c      at create: gate 1 (the Pod webhook's rules, folds and card-count pin, sent
 *                   back as a JSON Patch), Kueue's Pod scheduling gate, the Workload fit pin;
 *   kueue.c         Workloads from queued Pods, quota reservation over the pool's flavors with
 *                   TAS placement (gate 2), admission or eviction on the check's verdict, requeue;
 *   node_devices.c  the `gpustack-node-devices` AdmissionCheck (gate 3);
 *   scheduler.c     binding ungated Pods to nodes whose allocatable keys fit (gate 4);
 *   kubelet.c       device-plugin allocation under the node's lock (gate 5), MIG carving with
 *                   ownership markers, containers that finish, and the reclaim loop.
 * Invariants: every ledger is rebuilt from the allocation annotations of the Pods bound to its
 * node (never edited); a node's capability changes only when its device manager (re)detects;
 * hardware instances outlive their Pods until the reclaim loop (src/mig/reclaim.h, over each node's
 * in-memory marker store) destroys them (3 consecutive passes that find the owner gone; passes run
 * on Pod deletion and every 60 s of virtual time). Time moves
 * only through tsr_cluster_advance. The cluster owns every object in it. Single-threaded.
 */
#ifndef TSR_SIM_CLUSTER_H
#define TSR_SIM_CLUSTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "codec/alloc_annotation.h"
#include "core/admit.h"
#include "core/capability.h"
#include "core/chain.h"
#include "core/ledger.h"
#include "core/settings.h"
#include "core/node_keys.h"
#include "core/views.h"
#include "nvml/fake.h"

struct tsr_diag;
struct tsr_buf;
struct tsr_mig_reclaimer;
struct tsr_mig_store;

#define SIM_NAME_MAX       254
#define SIM_GPUS_MAX       64
#define SIM_PODSETS_MAX    8
#define SIM_RECLAIM_PERIOD 60 /* reclaimResyncInterval, seconds */
#define SIM_RETRY_SECONDS  30 /* the check's requeueAfterSeconds */
/* Appended to an allocation failure that only a not-yet-reclaimed instance explains. */
#define SIM_RECLAIM_GAP                                                                            \
        " (an instance of a deleted Pod still occupies it until the reclaimer destroys it)"

#define SIM_QUEUE_LABEL    "kueue.x-k8s.io/queue-name"
#define SIM_GROUP_LABEL    "kueue.x-k8s.io/pod-group-name"
#define SIM_GROUP_COUNT    "kueue.x-k8s.io/pod-group-total-count"
#define SIM_ADMISSION_GATE "kueue.x-k8s.io/admission"
#define SIM_ENTRANCE_LABEL "schedule.gpustack.ai/queue-entrance"

struct sim_node {
        char name[SIM_NAME_MAX];
        char os[32], arch[32];
        int64_t cpu_milli;
        int64_t memory_bytes;
        const struct tsr_product *product; /* NULL on a CPU-only node */
        unsigned gpu_count;
        struct tsr_fake_gpus *gpus;
        struct tsr_accel_cap caps[SIM_GPUS_MAX]; /* the device manager's detection */
        struct tsr_mig_store *markers;           /* the ownership markers (memory store) */
        struct tsr_mig_reclaimer *reclaimer;     /* the reclaim loop's debounce state */
        unsigned long gen;            /* bumped by sim_node_changed: its Pods or detection moved */
        struct sim_ledger_memo *memo; /* its ledger as of a gen (cluster.c) */
        /* the Pods bound here, as indices into the cluster's pods in ascending order: added by
         * sim_pod_bind, removed and shifted by tsr_cluster_delete_pod */
        size_t *bound, n_bound, cap_bound;
};

enum sim_phase { SIM_PENDING, SIM_RUNNING, SIM_SUCCEEDED, SIM_FAILED };

/* The fields every reconcile pass reads come first, so a pass over the Pods reads one line each. */
struct sim_pod {
        json_t *obj; /* the Pod as stored (after admission mutation); status.phase: phase */
        int node;    /* index into nodes, -1 while unbound */
        /* the index in workloads of the Workload named workload, or -1 (none, or none by that
         * name any more): kueue.c sets it when it names the Workload, and sim_workload_remove
         * shifts it with the Workloads, so finding a Pod's Workload reads no name */
        int workload_at;
        enum sim_phase phase;
        bool gated;                  /* holds Kueue's admission scheduling gate */
        bool finish_failed;          /* they exit non-zero */
        int64_t created;             /* virtual seconds */
        int64_t finish_at;           /* when its containers exit; -1: they run until deleted */
        char workload[SIM_NAME_MAX]; /* its Workload ("" for a Pod outside Kueue) */
        char podset[64];
        char name[SIM_NAME_MAX];
        char ns[SIM_NAME_MAX];
        char uid[40];
        char reason[64];   /* status.reason: UnexpectedAdmissionError */
        char message[512]; /* status.message, or the PodScheduled condition's message */
        char ip[16];       /* status.podIP once bound: 10.244.<node>.<n> */
};

/* Pods of a PodSet that TAS assigned to one node. */
struct sim_assignment {
        size_t node;
        unsigned count;
};

struct sim_podset {
        char name[64];
        unsigned count;
        json_t *tmpl; /* the Pod template: {"metadata": {...}, "spec": {...}} */
        int flavor;   /* index into the pool's flavors while quota is reserved, else -1 */
        size_t n_assign;
        struct sim_assignment *assign; /* TAS topology assignment (hostname level) */
        /* kueue.c's memo of one Pod's quota cost in the pool of quota_product's model */
        bool quota_known;
        const struct tsr_product *quota_product;
        int64_t quota;
};

/* As in sim_pod, the state every pass reads first, the names and messages after it. */
struct sim_workload {
        /* status */
        bool reserved;
        bool admitted;
        bool evicted;
        bool finished;
        bool failed;
        bool has_check; /* the ClusterQueue references gpustack-node-devices */
        /* node_devices.c's memo while admitted: every Pod TAS assigned is bound and held, so
         * gate 3 charges none of them; cleared by a member's deletion (only a Workload not
         * admitted yet is ever evicted) */
        bool settled;
        /* kueue.c's memo while it holds quota: every Pod TAS assigned is bound there, so TAS
         * counts none of its assignment on top of the bound Pods; cleared by a member's
         * deletion */
        bool bound_all;
        enum tsr_check_state check;
        unsigned retry_count;
        size_t n_podsets;
        int64_t requeue_at; /* 0: no backoff pending */
        int64_t check_changed;
        int64_t created;
        int64_t reserved_at;
        int64_t admitted_at;
        int64_t evicted_at;
        int64_t finished_at;
        char cluster_queue[SIM_NAME_MAX];
        char name[SIM_NAME_MAX];
        char ns[SIM_NAME_MAX];
        char uid[40];
        char queue[64];
        char group[SIM_NAME_MAX]; /* the pod group, "" for a single Pod */
        struct sim_podset podsets[SIM_PODSETS_MAX];
        char pending[1280];                            /* why quota is not reserved */
        char evicted_msg[TSR_ADMIT_MESSAGE_MAX + 128]; /* evict(): check_msg and its frame */
        char check_msg[TSR_ADMIT_MESSAGE_MAX];
};

struct tsr_cluster {
        size_t n_nodes;
        struct sim_node *nodes;
        struct tsr_chain_node *chain; /* nodes[i] as the Kueue chain reads it (core/chain.h) */
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX]; /* what the chain derives, kept by */
        size_t n_pools;                                   /* tsr_cluster_add_node */
        size_t n_pods, cap_pods;
        struct sim_pod *pods;
        size_t n_workloads, cap_workloads;
        struct sim_workload *workloads;
        /* every Workload below this index is at rest (sim_workload_at_rest): the actors' walks
         * start here (sim_workloads_from); lowered by sim_workload_changed, which
         * sim_workload_remove calls too */
        size_t workloads_at_rest;
        /* bumped by every change that can finish or empty a Workload: a Pod named a Workload's
         * member, a Pod deleted, a Pod ending (Succeeded or Failed); sim_kueue_sync counts the
         * members again only when it moved since membership_seen */
        unsigned long membership_gen, membership_seen;
        /* bumped by every node's change (sim_node_changed) and by every node added: what an
         * InstanceType's views and CPU view are computed from */
        unsigned long nodes_gen;
        /* kueue.c's running sums of the quota reserved per ClusterQueue and flavor index: a
         * reservation adds its PodSets', an eviction, a finish or a removal takes them back;
         * recounted from the Workloads when !quota_valid (a node added may move flavor indexes) */
        struct sim_quota_sum {
                char cluster_queue[SIM_NAME_MAX];
                int64_t used[TSR_CHAIN_FLAVORS_MAX];
        } quota[TSR_CHAIN_POOLS_MAX];
        size_t n_quota;
        bool quota_valid;
        /* webhooks.c's memo of each pool's InstanceType object (pools[i]) as of nodes_gen */
        struct sim_instancetype_memo {
                json_t *obj;
                unsigned long gen;
        } instancetypes[TSR_CHAIN_POOLS_MAX];
        int64_t now;       /* virtual seconds since the run started */
        int64_t next_pass; /* next periodic reclaim pass */
        unsigned uid_seq;
        unsigned ip_seq;              /* Pods bound so far: the host part of the next Pod IP */
        struct tsr_settings settings; /* the Settings (only workload-fit-affinity varies) */
};

/* Creates an empty cluster. Cannot fail. */
void tsr_cluster_init(struct tsr_cluster *c);

/* Frees everything the cluster owns. */
void tsr_cluster_release(struct tsr_cluster *c);

/*
 * Applies cluster.settings: each known upstream setting name with a boolean value. Returns 0, or
 * TSR_EINVAL naming an unknown setting or a value of the wrong type.
 */
int tsr_cluster_setting(struct tsr_cluster *c, const char *name, json_t *value,
                        struct tsr_diag *diag);

/*
 * Adds a node. product may be NULL (CPU-only, gpu_count 0). mig_on (may be NULL) gives each GPU's
 * MIG mode at boot; the device manager detects at once. Returns 0, TSR_EEXIST, TSR_ENOMEM,
 * TSR_EINVAL, or TSR_ETOOBIG when the nodes would derive more pools or flavors than the chain
 * holds (diag says why).
 */
int tsr_cluster_add_node(struct tsr_cluster *c, const char *name, int64_t cpu_milli,
                         int64_t memory_bytes, const char *os, const char *arch,
                         const struct tsr_product *product, unsigned gpu_count, const bool *mig_on,
                         struct tsr_diag *diag);

/* Returns the index of node name, or -1. */
int tsr_cluster_node(const struct tsr_cluster *c, const char *name);

/* Re-runs detection on node i (a device manager restart). */
void tsr_cluster_redetect(struct tsr_cluster *c, size_t i);

/*
 * Whether each Pod bound to node i, in cluster order, is held for the node's accelerators
 * (tsr_admit_snapshot_held), kept per node generation; *n is how many. NULL for a node without
 * accelerators, or out of memory.
 */
const bool *tsr_cluster_held(const struct tsr_cluster *c, size_t i, size_t *n);

/*
 * Rebuilds node i's ledger from its Pods' annotations into ledger[0..gpu_count). Returns 0 or the
 * ledger's error (a corrupt annotation).
 */
int tsr_cluster_ledger(const struct tsr_cluster *c, size_t i, struct tsr_accel_ledger *ledger,
                       struct tsr_diag *diag);

/* Projects node i's accelerator keys. Returns 0 or an error. */
int tsr_cluster_node_keys(const struct tsr_cluster *c, size_t i, struct tsr_node_keys *out,
                          struct tsr_diag *diag);

/*
 * Node i's labels as the API server holds them (a reference to release with json_decref; the
 * object is shared with the node's memo, so callers only read it): the kubelet's
 * hostname, os and arch, the chain's feature labels (core/chain.h: the managed mark, the topology
 * profile, the general key, the accelerator model and count) and the per-card fit labels.
 * Returns NULL only when out of memory.
 */
json_t *tsr_cluster_node_labels(const struct tsr_cluster *c, size_t i);

/*
 * Node i's status.allocatable as a JSON object of canonical quantities (a new object): cpu,
 * memory, pods and every accelerator key. Returns NULL on a corrupt ledger or out of memory.
 */
json_t *tsr_cluster_node_allocatable(const struct tsr_cluster *c, size_t i);

/*
 * Fills pools[0..*n) (room for TSR_CHAIN_POOLS_MAX) with the InstanceTypes the nodes derive
 * (tsr_chain_pools), sorted by name. Cannot fail: tsr_cluster_add_node keeps the nodes within
 * the chain's bounds.
 */
void tsr_cluster_pools(const struct tsr_cluster *c, struct tsr_chain_pool *pools, size_t *n);

/* Returns the pool whose entrance LocalQueue is queue in pools[0..n), or NULL. */
const struct tsr_chain_pool *tsr_cluster_pool_by_entrance(const struct tsr_chain_pool *pools,
                                                          size_t n, const char *queue);

/*
 * Fills flavors[0..*n) (room for TSR_CHAIN_FLAVORS_MAX) with pool p's ResourceFlavors
 * (tsr_chain_flavors), smallest per-node count first, and sets node_flavor[i] to node i's flavor
 * index (-1 outside the pool; node_flavor may be NULL). Cannot fail, as tsr_cluster_pools.
 */
void tsr_cluster_flavors(const struct tsr_cluster *c, const struct tsr_chain_pool *p,
                         struct tsr_chain_flavor *flavors, size_t *n, int *node_flavor);

/* Computes the four views of pool p. Returns 0 or an error. */
int tsr_cluster_pool_views(const struct tsr_cluster *c, const struct tsr_chain_pool *p,
                           struct tsr_pool_views *out, struct tsr_diag *diag);

/* CPU view of pool p: capacity cores, the largest node's free cores, all free cores. */
void tsr_cluster_pool_cpu(const struct tsr_cluster *c, const struct tsr_chain_pool *p,
                          struct tsr_view *out);

/* Returns the index of Pod ns/name, or -1. */
int tsr_cluster_pod(const struct tsr_cluster *c, const char *ns, const char *name);

/* Returns the index of Workload ns/name, or -1. */
int tsr_cluster_workload(const struct tsr_cluster *c, const char *ns, const char *name);

/*
 * Creates a Pod object (takes ownership of pod) through the webhooks. On admission it appends the
 * API server's answer ("pod/NAME created") to out; on a denial, the denial text. Returns 0 in
 * both cases (a denial is output), or an error for a malformed object.
 */
int tsr_cluster_apply_pod(struct tsr_cluster *c, json_t *pod, struct tsr_buf *out,
                          struct tsr_diag *diag);

/* Deletes Pod ns/name. Returns 0 or TSR_ENOTFOUND. */
int tsr_cluster_delete_pod(struct tsr_cluster *c, const char *ns, const char *name);

/* Advances the virtual clock by seconds, running every timer that falls due. */
void tsr_cluster_advance(struct tsr_cluster *c, int64_t seconds);

/* Runs the actors until nothing moves (after any change to the cluster). */
void tsr_cluster_reconcile(struct tsr_cluster *c);

/* Decodes Pod p's allocation annotation. Returns 0 (n = 0 without one) or an error. */
int tsr_cluster_pod_allocation(const struct sim_pod *p, struct tsr_container_allocation *out,
                               size_t max, size_t *n, struct tsr_diag *diag);

/* True when Pod p no longer runs (Succeeded or Failed). */
bool tsr_cluster_pod_finished(const struct sim_pod *p);

/*
 * Checks every invariant the simulation promises (each ledger within budget and consistent with
 * its capability, hardware instances disjoint, quota usage within nominal, admitted Pods held).
 * Returns 0 or TSR_ESTALE with the first broken one in diag.
 */
int tsr_cluster_check(const struct tsr_cluster *c, struct tsr_diag *diag);

#endif
