/*
 * baselines.c - the FGD artifact's baseline score plugins, from the protocol note's definitions
 * (spec/fgd-benchmark-protocol.md §3.3). Scores are integers, higher wins, random ties:
 *
 * - Random: a uniformly random feasible node; the GPU is a random one that fits.
 * - DotProd (dimext merge, norm max): node (free CPU / 128000, free GPU milli / 8000) dot pod
 *   (CPU / 128000, GPU milli / 8000), halved; score 100 * (1 - dot/2).
 * - GpuClustering: bands by the tags of the node's GPU pods (share-gpu, or k whole GPUs): only
 *   this pod's tag 75..100, this tag among others 50..75, no GPU pod 25..50, other tags only
 *   0..25; within a band + 25 * (8000 - free GPU milli) / 8000. CPU-only pods score 0.
 * - GpuPacking: fits into partly used GPUs 100 - (their free %)/10 (floor 50); needs fully free
 *   GPUs of a partly used node 50 - that many (floor 33); an idle node 33 - its GPU count.
 *   CPU-only pods score 0.
 * - BestFit: 100 * (1 - [0.5 (free CPU - CPU)/128000 + 0.5 (free GPU - GPU)/8000]), min-max
 *   normalised across the feasible nodes.
 * Every one but Random picks a fractional pod's GPU best-fit.
 */
#include "replay/policy_int.h"

#include <stdlib.h>

#define MAX_SPEC_CPU 128000.0 /* milli-CPU of the largest node shape */
#define MAX_SPEC_GPU 8000     /* milli-GPU of the largest node shape */
#define MAX_SCORE    100

static int scored_start(const struct tsr_policy_env *env, void **state)
{
        struct tsr__sched *s = calloc(1, sizeof(*s));

        if (!s || tsr__sched_init(s, env->cluster->n_nodes, env->rng)) {
                free(s);
                return -1;
        }
        *state = s;
        return 0;
}

static void scored_stop(void *state)
{
        if (state)
                tsr__sched_release(state);
        free(state);
}

static int64_t pod_gpu_milli(const struct tsr_rpod *p)
{
        return (int64_t)p->num_gpu * p->milli;
}

/* ---- Random --------------------------------------------------------------------------------- */

/* A uniform draw per feasible node: the maximum is a uniformly random node, whatever the tie
 * rule (the artifact's PreScore picks one feasible node at random and scores it 100). */
static int64_t random_score(const struct tsr_policy_env *env, void *state, size_t node,
                            const struct tsr_rpod *pod, int *gpu)
{
        (void)state, (void)node, (void)pod, (void)gpu;
        return (int64_t)(tsr_rng_next(env->rng) >> 1);
}

static bool random_place(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                         struct tsr_rplace *out)
{
        return tsr__sched_place(env, state, state, random_score, false, TSR__GPU_RANDOM, pod, out);
}

const struct tsr__policy_ops tsr__policy_random = {"Random", scored_start, scored_stop,
                                                   random_place, NULL};

/* ---- DotProd -------------------------------------------------------------------------------- */

static int64_t dotprod_score(const struct tsr_policy_env *env, void *state, size_t node,
                             const struct tsr_rpod *pod, int *gpu)
{
        const struct tsr_rnode *n = &env->cluster->nodes[node];
        double dot = (double)n->cpu_free / MAX_SPEC_CPU * ((double)pod->cpu / MAX_SPEC_CPU) +
                     (double)tsr_rnode_free_milli(n) / MAX_SPEC_GPU *
                         ((double)pod_gpu_milli(pod) / MAX_SPEC_GPU);

        (void)state, (void)gpu;
        return (int64_t)(MAX_SCORE * (1.0 - dot / 2));
}

static bool dotprod_place(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                          struct tsr_rplace *out)
{
        return tsr__sched_place(env, state, state, dotprod_score, false, TSR__GPU_BEST, pod, out);
}

const struct tsr__policy_ops tsr__policy_dotprod = {"DotProd", scored_start, scored_stop,
                                                    dotprod_place, NULL};

/* ---- GpuClustering -------------------------------------------------------------------------- */

static int64_t clustering_score(const struct tsr_policy_env *env, void *state, size_t node,
                                const struct tsr_rpod *pod, int *gpu)
{
        const struct tsr_rnode *n = &env->cluster->nodes[node];
        unsigned tag = pod->fractional ? 0 : pod->num_gpu, tags = 0;
        int64_t within = MAX_SCORE / 4 * (MAX_SPEC_GPU - tsr_rnode_free_milli(n)) / MAX_SPEC_GPU;

        (void)state, (void)gpu;
        if (!pod->num_gpu)
                return 0;
        for (unsigned t = 0; t < TSR_RTAGS; t++)
                tags += n->tag_pods[t] > 0;
        if (n->tag_pods[tag])
                return within + (tags == 1 ? MAX_SCORE * 3 / 4 : MAX_SCORE * 2 / 4);
        return within + (tags == 0 ? MAX_SCORE / 4 : 0);
}

static bool clustering_place(const struct tsr_policy_env *env, void *state,
                             const struct tsr_rpod *pod, struct tsr_rplace *out)
{
        return tsr__sched_place(env, state, state, clustering_score, false, TSR__GPU_BEST, pod,
                                out);
}

const struct tsr__policy_ops tsr__policy_gpu_clustering = {"GpuClustering", scored_start,
                                                           scored_stop, clustering_place, NULL};

/* ---- GpuPacking ----------------------------------------------------------------------------- */

static int64_t packing_score(const struct tsr_policy_env *env, void *state, size_t node,
                             const struct tsr_rpod *pod, int *gpu)
{
        const struct tsr_rnode *n = &env->cluster->nodes[node];
        unsigned free_gpus = tsr_rnode_free_gpus(n), need = pod->num_gpu, fully = 0;
        int64_t free_pct = 0;
        bool used[TSR_TRACE_GPUS_MAX] = {false};

        (void)state, (void)gpu;
        if (!pod->num_gpu)
                return 0;
        if (free_gpus == n->n_gpus) {
                int64_t s = MAX_SCORE / 3 - (int64_t)free_gpus;

                return s > (int64_t)free_gpus ? s : (int64_t)free_gpus;
        }
        while (need) { /* fullest fitting GPU first, as the best-fit pick takes them */
                int best = -1;

                for (unsigned g = 0; g < n->n_gpus; g++)
                        if (!used[g] && n->free[g] >= (int)pod->milli &&
                            (best < 0 || n->free[g] < n->free[best]))
                                best = (int)g;
                used[best] = true;
                need--;
                if (n->free[best] == TSR_TRACE_MILLI)
                        fully++;
                else
                        free_pct += n->free[best] * 100 / TSR_TRACE_MILLI;
        }
        if (fully) {
                int64_t s = MAX_SCORE / 2 - (int64_t)fully;

                return s > MAX_SCORE / 3 ? s : MAX_SCORE / 3;
        }
        return MAX_SCORE - free_pct / 10 > MAX_SCORE / 2 ? MAX_SCORE - free_pct / 10
                                                         : MAX_SCORE / 2;
}

static bool packing_place(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                          struct tsr_rplace *out)
{
        return tsr__sched_place(env, state, state, packing_score, false, TSR__GPU_BEST, pod, out);
}

const struct tsr__policy_ops tsr__policy_gpu_packing = {"GpuPacking", scored_start, scored_stop,
                                                        packing_place, NULL};

/* ---- BestFit -------------------------------------------------------------------------------- */

static int64_t best_fit_score(const struct tsr_policy_env *env, void *state, size_t node,
                              const struct tsr_rpod *pod, int *gpu)
{
        const struct tsr_rnode *n = &env->cluster->nodes[node];
        double left = 0.5 * (double)(n->cpu_free - pod->cpu) / MAX_SPEC_CPU +
                      0.5 * (double)(tsr_rnode_free_milli(n) - pod_gpu_milli(pod)) / MAX_SPEC_GPU;

        (void)state, (void)gpu;
        return (int64_t)((1.0 - left) * MAX_SCORE);
}

static bool best_fit_place(const struct tsr_policy_env *env, void *state,
                           const struct tsr_rpod *pod, struct tsr_rplace *out)
{
        return tsr__sched_place(env, state, state, best_fit_score, true, TSR__GPU_BEST, pod, out);
}

const struct tsr__policy_ops tsr__policy_best_fit = {"BestFit", scored_start, scored_stop,
                                                     best_fit_place, NULL};
