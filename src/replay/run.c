/*
 * run.c - the protocol's loop: order, tuning, placement, measurement.
 */
#include "replay/run.h"

#include "replay/arrival.h"

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

/* The three values each event records: allocation, fragment / capacity, fragment / free. */
static void record(struct tsr_replay_bins *b, const struct tsr_rcluster *c, int64_t arrived,
                   double frag)
{
        double cap = (double)c->total_milli, free_milli = cap - (double)c->used_milli;
        double v[3] = {(double)c->used_milli / cap * 100.0, frag / cap * 100.0,
                       free_milli > 0 ? frag / free_milli * 100.0 : 0};

        tsr_replay_bins_add(b, arrived, c->total_milli, v, 3);
}

static void points(const struct tsr_replay_bins *b, struct tsr_replay_result *r)
{
        for (unsigned x = 0; x < TSR_REPLAY_POINTS; x++) {
                double v[3];

                r->have[x] = tsr_replay_bins_point(b, x, v, 3);
                if (!r->have[x])
                        continue;
                r->alloc_pct[x] = v[0];
                r->frag_total_pct[x] = v[1];
                r->frag_rate_pct[x] = v[2];
        }
}

const char *tsr_replay_shape_name(enum tsr_replay_shape s)
{
        static const char *const names[TSR_REPLAY_SHAPES] = {"CPU-starved nodes", "1-GPU nodes",
                                                             "2-GPU nodes",       "4-GPU nodes",
                                                             "8-GPU nodes",       "other nodes"};

        return s < TSR_REPLAY_SHAPES ? names[s] : "?";
}

/* The least CPU a GPU shape of the typical workload asks (0 when none asks a GPU: then no node
 * is CPU-starved). */
static int64_t least_gpu_task_cpu(const struct tsr_frag_workload *w)
{
        int64_t least = INT64_MAX;

        for (size_t m = 0; m < w->n; m++)
                if (w->shape[m].milli && w->shape[m].cpu < least)
                        least = w->shape[m].cpu;
        return least == INT64_MAX ? 0 : least;
}

/* Where the cluster's unallocated GPUs are now, by node shape (run.h). */
static void idle_by_shape(const struct tsr_rcluster *c, int64_t starved_below, double *idle)
{
        for (size_t i = 0; i < c->n_nodes; i++) {
                const struct tsr_rnode *n = &c->nodes[i];
                enum tsr_replay_shape shape;

                if (n->cpu_free < starved_below)
                        shape = TSR_SHAPE_CPU_STARVED;
                else
                        shape = n->n_gpus == 1   ? TSR_SHAPE_GPU1
                                : n->n_gpus == 2 ? TSR_SHAPE_GPU2
                                : n->n_gpus == 4 ? TSR_SHAPE_GPU4
                                : n->n_gpus == 8 ? TSR_SHAPE_GPU8
                                                 : TSR_SHAPE_OTHER;
                idle[shape] += (double)tsr_rnode_free_milli(n) / TSR_TRACE_MILLI;
        }
}

int tsr_replay_run(struct tsr_replay_setup *s, enum tsr_policy_id policy, uint64_t seed,
                   struct tsr_replay_result *out, struct tsr_diag *diag)
{
        struct tsr_rcluster *c = &s->cluster;
        struct tsr_policy_env env = {c, &s->typical, NULL, s->nodes, s->ties, s->label_lag};
        struct tsr_policy *p = NULL;
        const struct tsr_trace_pod **order = NULL;
        size_t n_order = 0;
        struct tsr_rng rng;
        struct tsr_replay_bins *b = calloc(1, sizeof(*b));
        int64_t target = (int64_t)llround(s->tune * (double)c->total_milli);
        double *node_frag = malloc(c->n_nodes * sizeof(*node_frag)), frag = 0;
        int64_t arrived = 0, starved_below = least_gpu_task_cpu(&s->typical);
        int rc;

        memset(out, 0, sizeof(*out));
        tsr_rng_seed(&rng, seed);
        env.rng = &rng;
        tsr_rcluster_reset(c, s->nodes);
        if (!b || !node_frag ||
            tsr_replay_order_build(s->pods, s->n_pods, target, &rng, &order, &n_order,
                                   &out->clones)) {
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
        for (size_t k = 0; k < n_order; k++) {
                struct tsr_rpod pod;
                struct tsr_rplace pl;

                tsr_rcluster_pod(c, order[k], &pod);
                if (tsr_policy_place(p, &pod, &pl)) {
                        tsr_rcluster_bind(c, &pod, &pl);
                        tsr_policy_bound(p, &pod, &pl);
                        frag -= node_frag[pl.node];
                        node_frag[pl.node] = tsr_frag_rnode(&s->typical, &c->nodes[pl.node]);
                        frag += node_frag[pl.node];
                        out->placed++;
                }
                arrived += tsr_replay_request(order[k]);
                record(b, c, arrived, frag);
                if (!out->have_idle && arrived >= c->total_milli) {
                        idle_by_shape(c, starved_below, out->idle_gpus);
                        out->have_idle = true;
                }
        }
        points(b, out);
        out->pods = n_order;
        out->arrived_milli = arrived;
        out->used_milli = c->used_milli;
out:
        tsr_policy_free(p);
        free(order);
        free(b);
        free(node_frag);
        return rc;
}

double tsr_replay_unallocated_gpus(const struct tsr_replay_setup *s,
                                   const struct tsr_replay_result *r, unsigned x)
{
        return (100.0 - r->alloc_pct[x]) / 100.0 * s->cluster.total_gpus;
}
