/*
 * fgd.c - Fragmentation Gradient Descent (spec/fgd-benchmark-protocol.md §4): a node's score is
 * int(100 * sigmoid(-delta / 1000)), delta the growth of its fragment F_n(M) if the pod were
 * placed there; a fractional pod tries every GPU that fits and keeps the best (ties: lowest
 * index), a whole-GPU pod takes the lowest-index free GPUs, a CPU-only pod only reduces CPU.
 *
 * State: the framework's scratch and each node's current F_n(M), recomputed when a pod binds
 * there (F depends on the node alone, so no other node's value moves).
 */
#include "replay/policy_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct fgd {
        struct tsr__sched sched;
        double *frag; /* per node: F_n(M) now */
};

static int fgd_start(const struct tsr_policy_env *env, void **state)
{
        const struct tsr_rcluster *c = env->cluster;
        struct fgd *f = calloc(1, sizeof(*f));

        if (!f || tsr__sched_init(&f->sched, c->n_nodes, env->rng) ||
            !(f->frag = malloc((c->n_nodes ? c->n_nodes : 1) * sizeof(*f->frag)))) {
                if (f)
                        tsr__sched_release(&f->sched);
                free(f);
                return -1;
        }
        for (size_t i = 0; i < c->n_nodes; i++)
                f->frag[i] = tsr_frag_rnode(env->typical, &c->nodes[i]);
        *state = f;
        return 0;
}

static void fgd_stop(void *state)
{
        struct fgd *f = state;

        if (!f)
                return;
        tsr__sched_release(&f->sched);
        free(f->frag);
        free(f);
}

static int64_t score_of(double delta)
{
        return (int64_t)(100.0 / (1.0 + exp(delta / 1000.0)));
}

static int64_t fgd_score(const struct tsr_policy_env *env, void *state, size_t node,
                         const struct tsr_rpod *pod, int *gpu)
{
        const struct fgd *f = state;
        const struct tsr_rnode *n = &env->cluster->nodes[node];
        int16_t after[TSR_TRACE_GPUS_MAX];
        int64_t cpu = n->cpu_free - pod->cpu, best = -1;

        memcpy(after, n->free, sizeof(after));
        if (!pod->num_gpu)
                return score_of(tsr_frag_node(env->typical, n->model, cpu, after, n->n_gpus) -
                                f->frag[node]);
        if (!pod->fractional) {
                struct tsr_rplace pl;

                tsr_rnode_whole_gpus(n, pod->num_gpu, &pl);
                for (unsigned k = 0; k < pl.n_gpus; k++)
                        after[pl.gpu[k]] = 0;
                return score_of(tsr_frag_node(env->typical, n->model, cpu, after, n->n_gpus) -
                                f->frag[node]);
        }
        for (unsigned g = 0; g < n->n_gpus; g++) {
                bool seen = false;
                int64_t s;

                if (n->free[g] < (int)pod->milli)
                        continue;
                for (unsigned e = 0; e < g && !seen; e++) /* an equal GPU scores the same */
                        seen = n->free[e] == n->free[g];
                if (seen)
                        continue;
                after[g] = (int16_t)(n->free[g] - (int)pod->milli);
                s = score_of(tsr_frag_node(env->typical, n->model, cpu, after, n->n_gpus) -
                             f->frag[node]);
                after[g] = n->free[g];
                if (s > best) {
                        best = s;
                        *gpu = (int)g;
                }
        }
        return best;
}

static bool fgd_place(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                      struct tsr_rplace *out)
{
        struct fgd *f = state;

        return tsr__sched_place(env, &f->sched, f, fgd_score, false, TSR__GPU_BEST, pod, out);
}

static void fgd_bound(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                      const struct tsr_rplace *pl)
{
        struct fgd *f = state;

        (void)pod;
        f->frag[pl->node] = tsr_frag_rnode(env->typical, &env->cluster->nodes[pl->node]);
}

const struct tsr__policy_ops tsr__policy_fgd = {"FGD", fgd_start, fgd_stop, fgd_place, fgd_bound};
