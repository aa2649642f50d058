/*
 * sched.c - the kube-scheduler framework the FGD artifact's score plugins run in.
 */
#include "replay/policy_int.h"

#include "base/err.h"

#include <stdlib.h>

int tsr__sched_init(struct tsr__sched *s, size_t n_nodes, struct tsr_rng *rng)
{
        size_t n = n_nodes ? n_nodes : 1;

        s->node = malloc(n * sizeof(*s->node));
        s->score = malloc(n * sizeof(*s->score));
        s->gpu = malloc(n * sizeof(*s->gpu));
        s->order = malloc(n * sizeof(*s->order));
        if (!s->node || !s->score || !s->gpu || !s->order) {
                tsr__sched_release(s);
                return TSR_ENOMEM;
        }
        for (size_t i = 0; i < n_nodes; i++) /* the run's node names: a random permutation */
                s->order[i] = i;
        tsr_rng_shuffle(rng, s->order, n_nodes, sizeof(*s->order));
        return 0;
}

void tsr__sched_release(struct tsr__sched *s)
{
        free(s->node);
        free(s->score);
        free(s->gpu);
        free(s->order);
        s->order = NULL;
        s->node = NULL;
        s->score = NULL;
        s->gpu = NULL;
}

/* Min-max normalisation to 0..100, integer as the framework's NormalizeScore does it. */
static void normalize(int64_t *score, size_t n)
{
        int64_t hi = INT64_MIN, lo = INT64_MAX;

        for (size_t i = 0; i < n; i++) {
                hi = score[i] > hi ? score[i] : hi;
                lo = score[i] < lo ? score[i] : lo;
        }
        for (size_t i = 0; i < n; i++)
                score[i] = hi == lo ? 0 : (score[i] - lo) * 100 / (hi - lo);
}

static int random_gpu(const struct tsr_rnode *n, unsigned milli, struct tsr_rng *rng)
{
        unsigned fit = 0;
        int pick = -1;

        for (unsigned g = 0; g < n->n_gpus; g++)
                if (n->free[g] >= (int)milli && tsr_rng_below(rng, ++fit) == 0)
                        pick = (int)g;
        return pick;
}

bool tsr__sched_place(const struct tsr_policy_env *env, struct tsr__sched *s, void *state,
                      tsr__score_fn score, bool normalize_scores, enum tsr__gpu_rule rule,
                      const struct tsr_rpod *pod, struct tsr_rplace *out)
{
        const struct tsr_rcluster *c = env->cluster;
        size_t n = 0, win = 0, ties = 0;
        const struct tsr_rnode *node;

        for (size_t k = 0; k < c->n_nodes; k++) {
                size_t i = s->order[k];

                if (!tsr_rnode_fits(&c->nodes[i], pod))
                        continue;
                s->node[n] = i;
                s->gpu[n] = -1;
                s->score[n] = score(env, state, i, pod, &s->gpu[n]);
                n++;
        }
        if (!n)
                return false;
        if (normalize_scores)
                normalize(s->score, n);
        for (size_t k = 0; k < n; k++) { /* the maximum; among equals, per env->ties */
                if (!ties || s->score[k] > s->score[win]) {
                        win = k;
                        ties = 1;
                } else if (s->score[k] == s->score[win] && env->ties == TSR_TIES_RANDOM &&
                           tsr_rng_below(env->rng, ++ties) == 0) {
                        win = k;
                }
        }
        node = &c->nodes[s->node[win]];
        out->node = s->node[win];
        if (!pod->num_gpu) {
                out->n_gpus = 0;
        } else if (pod->fractional) {
                int g = s->gpu[win] >= 0        ? s->gpu[win]
                        : rule == TSR__GPU_BEST ? tsr_rnode_best_gpu(node, pod->milli)
                                                : random_gpu(node, pod->milli, env->rng);

                out->n_gpus = 1;
                out->gpu[0] = (uint8_t)g;
        } else {
                tsr_rnode_whole_gpus(node, pod->num_gpu, out);
        }
        return true;
}
