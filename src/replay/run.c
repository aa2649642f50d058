/*
 * run.c - the protocol's loop: order, tuning, placement, measurement.
 */
#include "replay/run.h"

#include "base/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tsr_replay_setup_init(struct tsr_replay_setup *s, const struct tsr_trace_node *nodes,
                          size_t n_nodes, const struct tsr_trace_pod *pods, size_t n_pods,
                          double tune, struct tsr_diag *diag)
{
        int rc;

        memset(s, 0, sizeof(*s));
        if (!n_nodes)
                return tsr_diag_set(diag, TSR_EINVAL, "the node list is empty");
        if (!(tune > 0 && tune <= 100))
                return tsr_diag_set(diag, TSR_EINVAL, "tune %g is not in (0, 100]", tune);
        s->nodes = nodes;
        s->n_nodes = n_nodes;
        s->pods = pods;
        s->n_pods = n_pods;
        s->tune = tune;
        s->ties = TSR_TIES_FIRST;
        rc = tsr_rcluster_init(&s->cluster, nodes, n_nodes, diag);
        if (rc)
                return rc;
        if (!s->cluster.total_gpus) {
                tsr_rcluster_release(&s->cluster);
                return tsr_diag_set(diag, TSR_EINVAL, "the node list has no GPU");
        }
        rc = tsr_frag_workload_new(&s->cluster, pods, n_pods, &s->typical, diag);
        if (rc)
                tsr_rcluster_release(&s->cluster);
        return rc;
}

void tsr_replay_setup_release(struct tsr_replay_setup *s)
{
        tsr_frag_workload_free(&s->typical);
        tsr_rcluster_release(&s->cluster);
}

static int64_t request(const struct tsr_trace_pod *p)
{
        return (int64_t)p->num_gpu * (p->num_gpu ? p->gpu_milli : 0);
}

struct order {
        const struct tsr_trace_pod **v;
        size_t n, cap;
};

static int by_name(const void *a, const void *b)
{
        return strcmp((*(const struct tsr_trace_pod *const *)a)->name,
                      (*(const struct tsr_trace_pod *const *)b)->name);
}

/* The submission order: by name, shuffled, tuned. Sets *clones. 0 or TSR_ENOMEM. */
static int submission(const struct tsr_replay_setup *s, struct tsr_rng *rng, struct order *o,
                      size_t *clones)
{
        int64_t total = 0, target = (int64_t)llround(s->tune * (double)s->cluster.total_milli);

        o->cap = s->n_pods + 16;
        o->n = s->n_pods;
        o->v = malloc(o->cap * sizeof(*o->v));
        if (!o->v)
                return TSR_ENOMEM;
        for (size_t i = 0; i < s->n_pods; i++) {
                o->v[i] = &s->pods[i];
                total += request(&s->pods[i]);
        }
        qsort(o->v, o->n, sizeof(*o->v), by_name);
        for (size_t i = o->n; i > 1; i--) {
                size_t j = (size_t)tsr_rng_below(rng, i);
                const struct tsr_trace_pod *t = o->v[i - 1];

                o->v[i - 1] = o->v[j];
                o->v[j] = t;
        }
        *clones = 0;
        if (total < target && s->n_pods) {
                for (;;) {
                        const struct tsr_trace_pod *c = &s->pods[tsr_rng_below(rng, s->n_pods)];

                        if (total + request(c) > target)
                                break;
                        if (o->n == o->cap) {
                                const struct tsr_trace_pod **v =
                                    realloc(o->v, 2 * o->cap * sizeof(*v));

                                if (!v)
                                        return TSR_ENOMEM;
                                o->v = v;
                                o->cap *= 2;
                        }
                        o->v[o->n++] = c;
                        total += request(c);
                        ++*clones;
                }
        }
        while (total > target && o->n) {
                size_t j = (size_t)tsr_rng_below(rng, o->n);

                total -= request(o->v[j]);
                memmove(&o->v[j], &o->v[j + 1], (o->n - j - 1) * sizeof(*o->v));
                o->n--;
        }
        return 0;
}

struct bins {
        double alloc[TSR_REPLAY_POINTS], frag[TSR_REPLAY_POINTS], rate[TSR_REPLAY_POINTS];
        unsigned n[TSR_REPLAY_POINTS];
};

static void record(struct bins *b, const struct tsr_rcluster *c, int64_t arrived, double frag)
{
        double cap = (double)c->total_milli, free_milli = cap - (double)c->used_milli;
        long x = lround((double)arrived / cap * 100.0);

        if (x < 0 || x >= TSR_REPLAY_POINTS)
                return;
        b->alloc[x] += (double)c->used_milli / cap * 100.0;
        b->frag[x] += frag / cap * 100.0;
        b->rate[x] += free_milli > 0 ? frag / free_milli * 100.0 : 0;
        b->n[x]++;
}

static void points(const struct bins *b, struct tsr_replay_result *r)
{
        for (int x = 0; x < TSR_REPLAY_POINTS; x++) {
                int from = b->n[x] ? x : x + 1 < TSR_REPLAY_POINTS && b->n[x + 1] ? x + 1 : x - 1;

                r->have[x] = from >= 0 && b->n[from];
                if (!r->have[x])
                        continue;
                r->alloc_pct[x] = b->alloc[from] / b->n[from];
                r->frag_total_pct[x] = b->frag[from] / b->n[from];
                r->frag_rate_pct[x] = b->rate[from] / b->n[from];
        }
}

int tsr_replay_run(struct tsr_replay_setup *s, enum tsr_policy_id policy, uint64_t seed,
                   struct tsr_replay_result *out, struct tsr_diag *diag)
{
        struct tsr_rcluster *c = &s->cluster;
        struct tsr_policy_env env = {c, &s->typical, NULL, s->nodes, s->ties};
        struct tsr_policy *p = NULL;
        struct order o = {0};
        struct tsr_rng rng;
        struct bins *b = calloc(1, sizeof(*b));
        double *node_frag = malloc(c->n_nodes * sizeof(*node_frag)), frag = 0;
        int64_t arrived = 0;
        int rc;

        memset(out, 0, sizeof(*out));
        tsr_rng_seed(&rng, seed);
        env.rng = &rng;
        tsr_rcluster_reset(c, s->nodes);
        if (!b || !node_frag || submission(s, &rng, &o, &out->clones)) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        rc = tsr_policy_new(policy, &env, &p, diag);
        if (rc)
                goto out;
        for (size_t i = 0; i < c->n_nodes; i++) {
                node_frag[i] = tsr_frag_rnode(&s->typical, &c->nodes[i]);
                frag += node_frag[i];
        }
        record(b, c, 0, frag);
        for (size_t k = 0; k < o.n; k++) {
                struct tsr_rpod pod;
                struct tsr_rplace pl;

                tsr_rcluster_pod(c, o.v[k], &pod);
                if (tsr_policy_place(p, &pod, &pl)) {
                        tsr_rcluster_bind(c, &pod, &pl);
                        tsr_policy_bound(p, &pod, &pl);
                        frag -= node_frag[pl.node];
                        node_frag[pl.node] = tsr_frag_rnode(&s->typical, &c->nodes[pl.node]);
                        frag += node_frag[pl.node];
                        out->placed++;
                }
                arrived += request(o.v[k]);
                record(b, c, arrived, frag);
        }
        points(b, out);
        out->pods = o.n;
        out->arrived_milli = arrived;
        out->used_milli = c->used_milli;
out:
        tsr_policy_free(p);
        free(o.v);
        free(b);
        free(node_frag);
        return rc;
}

double tsr_replay_unallocated_gpus(const struct tsr_replay_setup *s,
                                   const struct tsr_replay_result *r, unsigned x)
{
        return (100.0 - r->alloc_pct[x]) / 100.0 * s->cluster.total_gpus;
}
