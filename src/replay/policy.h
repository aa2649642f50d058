/*
 * policy.h - the placement policies a replay compares: the FGD artifact's kube-scheduler score
 * plugins (Random, DotProd, GpuClustering, GpuPacking, BestFit and FGD itself;
 * spec/fgd-benchmark-protocol.md §3.3, §4) and tessera's own admission chain.
 *
 * A policy places one pod at a time on the cluster as it stands (no departures, no retries) or
 * says that nothing fits; the replay then binds the placement and tells the policy (bound), so a
 * policy with its own view of the nodes (tessera's ledgers) keeps it in step.
 *
 * Ownership: a policy instance (tsr_policy_new) borrows the cluster, the typical workload and
 * the random stream for its life; free it with tsr_policy_free. Not thread-safe.
 */
#ifndef TSR_REPLAY_POLICY_H
#define TSR_REPLAY_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"
#include "replay/cluster.h"
#include "replay/frag.h"
#include "replay/rng.h"

enum tsr_policy_id {
        TSR_POLICY_RANDOM,
        TSR_POLICY_DOTPROD,
        TSR_POLICY_GPU_CLUSTERING,
        TSR_POLICY_GPU_PACKING,
        TSR_POLICY_BEST_FIT,
        TSR_POLICY_FGD,
        TSR_POLICY_TESSERA,
        TSR_POLICY_COUNT
};

/* How the kube-scheduler framework breaks ties between equal top scores. */
enum tsr_ties {
        TSR_TIES_FIRST,  /* the first in the run's node order (a random permutation per seed) */
        TSR_TIES_RANDOM, /* uniformly at random (upstream selectHost) */
};

/* What a policy sees. */
struct tsr_policy_env {
        struct tsr_rcluster *cluster;
        const struct tsr_frag_workload *typical; /* M, for FGD */
        struct tsr_rng *rng;
        const struct tsr_trace_node *nodes; /* names, for tessera's ties by name */
        enum tsr_ties ties;
        /* tessera: binds between a change to a node's cards and its fit labels showing it (the
         * device manager's publish and coalescing window, counted in binds); 0: at once */
        unsigned label_lag;
};

struct tsr_policy;

/* The policy's name as the command line and the reports spell it ("FGD"); NULL past the end. */
const char *tsr_policy_name(enum tsr_policy_id id);

/* The policy named name (case-insensitive); -1 when none. */
int tsr_policy_by_name(const char *name);

/* A new instance of policy id over env. 0, or TSR_ENOMEM with diag. */
int tsr_policy_new(enum tsr_policy_id id, const struct tsr_policy_env *env, struct tsr_policy **out,
                   struct tsr_diag *diag);

void tsr_policy_free(struct tsr_policy *p);

/* Chooses a placement for pod; false when no node fits (the pod is dropped). */
bool tsr_policy_place(struct tsr_policy *p, const struct tsr_rpod *pod, struct tsr_rplace *out);

/* The replay bound pod at pl (call after tsr_rcluster_bind). */
void tsr_policy_bound(struct tsr_policy *p, const struct tsr_rpod *pod,
                      const struct tsr_rplace *pl);

#endif
