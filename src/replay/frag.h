/*
 * frag.h - task-distribution-aware GPU fragmentation (FGD, ATC'23 §3;
 * spec/fgd-benchmark-protocol.md §2.2): the target workload M of typical task shapes and the
 * fragment F_n(M) of a node.
 *
 * M: the original trace pods grouped by (cpu_milli, gpu_milli, num_gpu, gpu_spec) -- memory is
 * not part of the key, CPU-only pods are -- groups sorted by count descending (ties by shape
 * descending), kept until they cover >= 95 % of the pods, renormalised to probabilities p_m.
 *
 * F_n(m), in milli-GPU, with free_g the GPUs' free milli and free_n their sum: free_n when m asks
 * for no GPU, when the node's model is not one m accepts, or when the node cannot host m (fewer
 * than num_gpu GPUs with free_g >= gpu_milli, or less free CPU than m asks); otherwise the free
 * milli of the GPUs too small for m. F_n(M) = sum_m p_m F_n(m). Memory is ignored. The value
 * depends on the multiset of free_g only, not on GPU order.
 *
 * Pure. Ownership: tsr_frag_workload_new returns a new workload (free with
 * tsr_frag_workload_free).
 */
#ifndef TSR_REPLAY_FRAG_H
#define TSR_REPLAY_FRAG_H

#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "replay/cluster.h"

#define TSR_FRAG_POPULARITY 95 /* percent of pods the typical shapes cover */

struct tsr_frag_shape {
        int64_t cpu;
        unsigned milli, num_gpu;
        uint64_t models; /* as tsr_rpod.models */
        unsigned count;  /* original pods of this shape */
        double p;
};

struct tsr_frag_workload {
        struct tsr_frag_shape *shape;
        size_t n;
};

/* Builds M from the original pods[0..n). 0, or TSR_ENOMEM / TSR_EINVAL (no pod) with diag. */
int tsr_frag_workload_new(const struct tsr_rcluster *c, const struct tsr_trace_pod *pods, size_t n,
                          struct tsr_frag_workload *out, struct tsr_diag *diag);

void tsr_frag_workload_free(struct tsr_frag_workload *w);

/* F_n(M) of a node of the given model with cpu_free and GPUs free[0..n_gpus). */
double tsr_frag_node(const struct tsr_frag_workload *w, unsigned model, int64_t cpu_free,
                     const int16_t *free, unsigned n_gpus);

/* F_n(M) of node n as it stands. */
double tsr_frag_rnode(const struct tsr_frag_workload *w, const struct tsr_rnode *n);

#endif
