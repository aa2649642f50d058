/*
 * cluster.h - the simulator's virtual cluster: nodes with fake GPUs and a device manager each,
 * Pods, a virtual clock, and the gate path a Pod takes from `kubectl apply` to a device.
 *
 * Invariants: every ledger is rebuilt from the allocation annotations of the Pods bound to its
 * node (never edited); a node's capability changes only when its device manager (re)detects;
 * hardware instances outlive their Pods until the reclaim loop destroys them (3 consecutive passes
 * that find the owner gone; passes run on Pod deletion and every 60 s of virtual time). Time moves
 * only through tsr_cluster_advance. The cluster owns every object in it. Single-threaded.
 */
#ifndef TSR_SIM_CLUSTER_H
#define TSR_SIM_CLUSTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "codec/alloc_annotation.h"
#include "core/capability.h"
#include "core/ledger.h"
#include "core/node_keys.h"
#include "core/views.h"
#include "nvml/fake.h"

struct tsr_diag;
struct tsr_buf;

#define SIM_NAME_MAX       254
#define SIM_GPUS_MAX       64
#define SIM_MARKERS_MAX    256
#define SIM_RECLAIM_PERIOD 60 /* reclaimResyncInterval, seconds */
#define SIM_RECLAIM_MISSES 3  /* reclaimMaxMisses */

/* The ownership marker the allocator writes with a MIG instance. */
struct sim_marker {
        char pod_uid[40];
        char container[64];
        unsigned gpu, gi_id, ci_id;
        char profile[64];
        char mig_uuid[TSR_GPU_UUID_MAX];
        unsigned misses; /* consecutive reclaim passes that found the Pod gone */
};

struct sim_orphan {
        unsigned gpu, gi_id;
        unsigned misses;
};

struct sim_node {
        char name[SIM_NAME_MAX];
        char os[32], arch[32];
        int64_t cpu_milli;
        int64_t memory_bytes;
        const struct tsr_product *product; /* NULL on a CPU-only node */
        unsigned gpu_count;
        struct tsr_fake_gpus *gpus;
        struct tsr_accel_cap caps[SIM_GPUS_MAX]; /* the device manager's detection */
        size_t n_markers;
        struct sim_marker markers[SIM_MARKERS_MAX];
        size_t n_orphans;
        struct sim_orphan orphans[SIM_MARKERS_MAX];
};

enum sim_phase { SIM_PENDING, SIM_RUNNING, SIM_SUCCEEDED, SIM_FAILED };

struct sim_pod {
        char name[SIM_NAME_MAX];
        char ns[SIM_NAME_MAX];
        char uid[40];
        json_t *obj; /* the Pod as stored (after admission mutation) */
        int node;    /* index into nodes, -1 while unbound */
        enum sim_phase phase;
        int64_t created;  /* virtual seconds */
        char reason[512]; /* why it is pending */
        char ip[16];      /* status.podIP once bound: 10.244.<node>.<n> */
};

struct tsr_cluster {
        size_t n_nodes;
        struct sim_node *nodes;
        size_t n_pods, cap_pods;
        struct sim_pod *pods;
        int64_t now;       /* virtual seconds since the run started */
        int64_t next_pass; /* next periodic reclaim pass */
        unsigned uid_seq;
        unsigned ip_seq; /* Pods bound so far: the host part of the next Pod IP */
};

/* One accelerator pool: an InstanceType derived from nodes. */
struct sim_pool {
        char name[SIM_NAME_MAX];
        char entrance[32];
        const struct tsr_product *product; /* NULL: the generic CPU pool */
        char os[32], arch[32];
};

#define SIM_POOLS_MAX 32

/* Creates an empty cluster. Cannot fail. */
void tsr_cluster_init(struct tsr_cluster *c);

/* Frees everything the cluster owns. */
void tsr_cluster_release(struct tsr_cluster *c);

/*
 * Adds a node. product may be NULL (CPU-only, gpu_count 0). mig_on (may be NULL) gives each GPU's
 * MIG mode at boot; the device manager detects at once. Returns 0, TSR_EEXIST, TSR_ENOMEM or
 * TSR_EINVAL (diag says why).
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
 * Rebuilds node i's ledger from its Pods' annotations into ledger[0..gpu_count). Returns 0 or the
 * ledger's error (a corrupt annotation).
 */
int tsr_cluster_ledger(const struct tsr_cluster *c, size_t i, struct tsr_accel_ledger *ledger,
                       struct tsr_diag *diag);

/* Projects node i's accelerator keys. Returns 0 or an error. */
int tsr_cluster_node_keys(const struct tsr_cluster *c, size_t i, struct tsr_node_keys *out,
                          struct tsr_diag *diag);

/* Fills pools[0..*n) with the InstanceTypes the nodes derive, sorted by name. */
void tsr_cluster_pools(const struct tsr_cluster *c, struct sim_pool *pools, size_t *n);

/* Computes the four views of pool p. Returns 0 or an error. */
int tsr_cluster_pool_views(const struct tsr_cluster *c, const struct sim_pool *p,
                           struct tsr_pool_views *out, struct tsr_diag *diag);

/* CPU view of pool p: capacity cores, the largest node's free cores, all free cores. */
void tsr_cluster_pool_cpu(const struct tsr_cluster *c, const struct sim_pool *p,
                          struct tsr_view *out);

/* Returns the index of Pod ns/name, or -1. */
int tsr_cluster_pod(const struct tsr_cluster *c, const char *ns, const char *name);

/*
 * Applies a Pod object (takes ownership of pod) through gate 1. On admission it appends the
 * API server's answer ("pod/NAME created") to out; on a denial, the denial text. Returns 0 in
 * both cases (a denial is output), or an error for a malformed object.
 */
int tsr_cluster_apply_pod(struct tsr_cluster *c, json_t *pod, struct tsr_buf *out,
                          struct tsr_diag *diag);

/* Deletes Pod ns/name. Returns 0 or TSR_ENOTFOUND. */
int tsr_cluster_delete_pod(struct tsr_cluster *c, const char *ns, const char *name);

/* Advances the virtual clock by seconds, running every reclaim pass that falls due. */
void tsr_cluster_advance(struct tsr_cluster *c, int64_t seconds);

/* Decodes Pod p's allocation annotation. Returns 0 (n = 0 without one) or an error. */
int tsr_cluster_pod_allocation(const struct sim_pod *p, struct tsr_container_allocation *out,
                               size_t max, size_t *n, struct tsr_diag *diag);

#endif
