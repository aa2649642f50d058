/*
 * cluster.h - the replayed cluster's state under the FGD protocol (spec/fgd-benchmark-protocol.md
 * §1 step 8): per node free CPU, memory and pod slots, and per GPU its free gpu_milli; the hard
 * filters every policy shares; binding a placement.
 *
 * Invariants: 0 <= free[g] <= 1000; cpu_free, mem_free >= 0; used_milli is the sum over nodes of
 * their allocated gpu_milli. A pod is resolved once (tsr_rcluster_pod) into the models it may
 * use as a bit set over the cluster's model table (at most TSR_RCLUSTER_MODELS_MAX models).
 *
 * Ownership: the cluster owns its node array (tsr_rcluster_release); it keeps no pointer into
 * the trace. Pure; not thread-safe (one replay per cluster).
 */
#ifndef TSR_REPLAY_CLUSTER_H
#define TSR_REPLAY_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "core/tas.h"
#include "replay/trace.h"

#define TSR_RCLUSTER_MODELS_MAX 64
#define TSR_RNODE_PODS_MAX      1001 /* the simulator's pods allocatable per node */
#define TSR_RNODE_TAS_RESOURCES 3    /* cpu, memory, pods */
#define TSR_RTAGS               (TSR_TRACE_GPUS_MAX + 1) /* 0: GPU-sharing, k: k whole GPUs */

struct tsr_rnode {
        int64_t cpu_cap, mem_cap, cpu_free, mem_free;
        unsigned n_gpus, pods;
        unsigned model; /* index in the cluster's models */
        int16_t free[TSR_TRACE_GPUS_MAX];
        unsigned tag_pods[TSR_RTAGS]; /* GPU pods bound here, by GpuClustering tag */
};

struct tsr_rpod {
        int64_t cpu, mem;
        unsigned num_gpu, milli; /* milli per GPU */
        uint64_t models;         /* bit m: may use model m (all bits: no constraint) */
        bool fractional;
};

struct tsr_rplace {
        size_t node;
        unsigned n_gpus;
        uint8_t gpu[TSR_TRACE_GPUS_MAX];
};

struct tsr_rcluster {
        struct tsr_rnode *nodes;
        size_t n_nodes;
        char models[TSR_RCLUSTER_MODELS_MAX][TSR_TRACE_MODEL_MAX];
        size_t n_models;
        int64_t total_milli, used_milli;
        unsigned total_gpus;
};

/* Builds the cluster of nodes[0..n), every resource free. 0, TSR_ENOMEM, or TSR_ETOOBIG (more
 * than TSR_RCLUSTER_MODELS_MAX models) with diag. */
int tsr_rcluster_init(struct tsr_rcluster *c, const struct tsr_trace_node *nodes, size_t n,
                      struct tsr_diag *diag);

void tsr_rcluster_release(struct tsr_rcluster *c);

/* Frees every resource again (a new seed's run). */
void tsr_rcluster_reset(struct tsr_rcluster *c, const struct tsr_trace_node *nodes);

/* The pod as the replay sees it. */
void tsr_rcluster_pod(const struct tsr_rcluster *c, const struct tsr_trace_pod *p,
                      struct tsr_rpod *out);

/* The hard filters: CPU, memory, pod slots, GPU model, and the GPU fit (a fractional pod: one
 * GPU with free >= milli; a whole-GPU pod: num_gpu fully free GPUs). */
bool tsr_rnode_fits(const struct tsr_rnode *n, const struct tsr_rpod *p);

/* The node's CPU, memory and pod slots as TAS counts them for a pod asking cpu and mem
 * (out[0..TSR_RNODE_TAS_RESOURCES)); the policies append their accelerator resources. Returns
 * how many it wrote. */
size_t tsr_rnode_tas_resources(const struct tsr_rnode *n, int64_t cpu, int64_t mem,
                               struct tsr_tas_resource *out);

/* The fitting GPU with the least free milli, ties to the lowest index; -1 when none. */
int tsr_rnode_best_gpu(const struct tsr_rnode *n, unsigned milli);

/* The number of fully free GPUs. */
unsigned tsr_rnode_free_gpus(const struct tsr_rnode *n);

/* Sum of free milli over the node's GPUs. */
int64_t tsr_rnode_free_milli(const struct tsr_rnode *n);

/* Fills pl for a whole-GPU pod: the lowest-index fully free GPUs (the node must fit it). */
void tsr_rnode_whole_gpus(const struct tsr_rnode *n, unsigned count, struct tsr_rplace *pl);

/* Charges p to the placement's node and GPUs (a fractional pod: pl->gpu[0]). */
void tsr_rcluster_bind(struct tsr_rcluster *c, const struct tsr_rpod *p,
                       const struct tsr_rplace *pl);

#endif
