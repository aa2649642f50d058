/*
 * policy_int.h - what the policies share inside src/replay: the operations table each policy
 * file fills, and the kube-scheduler framework the score plugins run in.
 *
 * The framework (tsr__sched_place): every node that passes the hard filters is scored
 * (percentageOfNodesToScore 100), scores are optionally min-max normalised to 0..100 (BestFit),
 * the maximum wins with ties broken uniformly at random, and the GPUs are chosen: a whole-GPU pod
 * takes the lowest-index fully free GPUs; a fractional pod the GPU the score plugin chose, else
 * by the policy's rule (best: least free that fits, ties lowest index; random: any that fits).
 */
#ifndef TSR_REPLAY_POLICY_INT_H
#define TSR_REPLAY_POLICY_INT_H

#include "replay/policy.h"

struct tsr__policy_ops {
        const char *name;
        /* Allocates the policy's state into *state (NULL when it needs none). 0 or TSR_ENOMEM. */
        int (*start)(const struct tsr_policy_env *env, void **state);
        void (*stop)(void *state);
        bool (*place)(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                      struct tsr_rplace *out);
        void (*bound)(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                      const struct tsr_rplace *pl);
};

enum tsr__gpu_rule { TSR__GPU_BEST, TSR__GPU_RANDOM };

/* A score plugin: the node's score for pod; may set *gpu to the GPU a fractional pod takes. */
typedef int64_t (*tsr__score_fn)(const struct tsr_policy_env *env, void *state, size_t node,
                                 const struct tsr_rpod *pod, int *gpu);

/* Scratch the framework needs, one entry per node. */
struct tsr__sched {
        size_t *order; /* the nodes in the order the framework visits them */
        size_t *node;
        int64_t *score;
        int *gpu;
};

/* Draws the node order from rng. 0 or TSR_ENOMEM. */
int tsr__sched_init(struct tsr__sched *s, size_t n_nodes, struct tsr_rng *rng);
void tsr__sched_release(struct tsr__sched *s);

bool tsr__sched_place(const struct tsr_policy_env *env, struct tsr__sched *s, void *state,
                      tsr__score_fn score, bool normalize, enum tsr__gpu_rule rule,
                      const struct tsr_rpod *pod, struct tsr_rplace *out);

extern const struct tsr__policy_ops tsr__policy_random, tsr__policy_dotprod,
    tsr__policy_gpu_clustering, tsr__policy_gpu_packing, tsr__policy_best_fit, tsr__policy_fgd,
    tsr__policy_tessera;

#endif
