/*
 * mig_optimum.c - memoised exhaustive search over (node, GPU, start) per task, tessera's online
 * run on the same instance, random instances and their gap.
 */
#include "replay/mig_optimum.h"

#include "base/err.h"
#include "core/geometry.h"
#include "replay/cluster.h"
#include "replay/mig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMO_MIN (1u << 10)
#define MEMO_MAX (1u << 22) /* entries: 64 MiB */
#define TUNE_PCT 130        /* the protocol's 130 %, in slices asked */

unsigned tsr_mig_small_slices(const struct tsr_mig_small *in)
{
        unsigned gpus = 0;

        for (unsigned i = 0; i < in->n_nodes && i < TSR_MIG_OPT_NODES_MAX; i++)
                gpus += in->gpus[i];
        return gpus * tsr_product_mig_width(in->product);
}

/* Disjoint legal placements of mp on an empty GPU, ignoring its instance cap. */
static unsigned placements(const struct tsr_mig_profile *mp)
{
        struct tsr_mig_profile uncapped = *mp;

        uncapped.max_instances = TSR_MIG_AXIS_MAX;
        return tsr_geometry_free_count(&uncapped, 0, 0);
}

struct entry {
        uint64_t key;
        uint8_t k; /* task index + 1; 0: empty */
        uint8_t value;
};

struct search {
        const struct tsr_mig_small *in;
        enum tsr_mig_opt_mode mode;
        unsigned n_gpus, first[TSR_MIG_OPT_NODES_MAX + 1]; /* node i: GPUs first[i]..first[i+1] */
        uint32_t all;                                      /* every slice of one GPU */
        unsigned rest[TSR_MIG_OPT_TASKS_MAX + 1];          /* slices asked by tasks k.. */
        struct entry *memo;
        size_t cap, used;
        int err;
};

static uint64_t mix(uint64_t x)
{
        x ^= x >> 30;
        x *= UINT64_C(0xbf58476d1ce4e5b9);
        x ^= x >> 27;
        x *= UINT64_C(0x94d049bb133111eb);
        return x ^ (x >> 31);
}

/* The state relabelled: each node's masks descending, nodes by (GPU count, masks), packed. */
static uint64_t canonical(const struct search *s, const uint32_t *mask)
{
        uint32_t node[TSR_MIG_OPT_NODES_MAX][TSR_MIG_OPT_GPUS_MAX];
        unsigned order[TSR_MIG_OPT_NODES_MAX], n = s->in->n_nodes;
        uint64_t key = 0;

        for (unsigned i = 0; i < n; i++) {
                unsigned g = s->first[i + 1] - s->first[i];

                order[i] = i;
                for (unsigned a = 0; a < g; a++) {
                        uint32_t m = mask[s->first[i] + a];
                        unsigned b = a;

                        for (; b > 0 && node[i][b - 1] < m; b--)
                                node[i][b] = node[i][b - 1];
                        node[i][b] = m;
                }
        }
        for (unsigned a = 1; a < n; a++) {
                unsigned x = order[a], b = a;

                for (; b > 0; b--) {
                        unsigned y = order[b - 1], gx = s->in->gpus[x], gy = s->in->gpus[y];

                        if (gy < gx || (gy == gx && memcmp(node[y], node[x], gx * 4) <= 0))
                                break;
                        order[b] = y;
                }
                order[b] = x;
        }
        for (unsigned a = 0; a < n; a++)
                for (unsigned g = 0; g < s->in->gpus[order[a]]; g++)
                        key = key << TSR_MIG_OPT_WIDTH_MAX | node[order[a]][g];
        return key;
}

static struct entry *slot(struct entry *memo, size_t cap, uint64_t key, unsigned k)
{
        size_t i = (size_t)mix(key * 31 + k) & (cap - 1);

        while (memo[i].k && (memo[i].k != k + 1 || memo[i].key != key))
                i = (i + 1) & (cap - 1);
        return &memo[i];
}

/* Doubles the memo; -1 past MEMO_MAX or out of memory (s->err set). */
static int grow(struct search *s)
{
        size_t cap = s->cap ? s->cap * 2 : MEMO_MIN;
        struct entry *memo;

        if (cap > MEMO_MAX) {
                s->err = TSR_ETOOBIG;
                return -1;
        }
        memo = calloc(cap, sizeof(*memo));
        if (!memo) {
                s->err = TSR_ENOMEM;
                return -1;
        }
        for (size_t i = 0; i < s->cap; i++)
                if (s->memo[i].k)
                        *slot(memo, cap, s->memo[i].key, s->memo[i].k - 1u) = s->memo[i];
        free(s->memo);
        s->memo = memo;
        s->cap = cap;
        return 0;
}

static unsigned best_from(struct search *s, unsigned k, uint32_t *mask);

/* The best over placing task k (into *placed: whether any placement exists), within bound. */
static unsigned best_placed(struct search *s, unsigned k, uint32_t *mask, unsigned bound,
                            unsigned best, bool *placed)
{
        const struct tsr_mig_profile *mp = &s->in->product->profiles[s->in->profile[k]];

        for (unsigned i = 0; i < s->in->n_nodes && best < bound; i++)
                for (unsigned g = s->first[i]; g < s->first[i + 1] && best < bound; g++) {
                        bool twin = false;

                        for (unsigned h = s->first[i]; h < g; h++)
                                twin |=
                                    mask[h] == mask[g]; /* same node, same state: same sub-tree */
                        for (unsigned st = 0; !twin && st < TSR_MIG_OPT_WIDTH_MAX && best < bound;
                             st++) {
                                uint32_t span = tsr_geometry_span(st, mp->size);
                                unsigned v;

                                if (!((mp->starts >> st) & 1u) || (mask[g] & span) ||
                                    (span & ~s->all))
                                        continue;
                                *placed = true;
                                mask[g] |= span;
                                v = mp->size + best_from(s, k + 1, mask);
                                mask[g] &= ~span;
                                if (v > best)
                                        best = v;
                        }
                }
        return best;
}

static unsigned best_from(struct search *s, unsigned k, uint32_t *mask)
{
        unsigned free_slices = 0, bound, best = 0;
        bool placed = false;
        struct entry *e;
        uint64_t key;

        if (k == s->in->n_tasks || s->err)
                return 0;
        for (unsigned g = 0; g < s->n_gpus; g++)
                free_slices += (unsigned)__builtin_popcount(s->all & ~mask[g]);
        bound = s->rest[k] < free_slices ? s->rest[k] : free_slices;
        if (!bound)
                return 0;
        key = canonical(s, mask);
        e = slot(s->memo, s->cap, key, k);
        if (e->k)
                return e->value;
        best = best_placed(s, k, mask, bound, 0, &placed);
        if (best < bound && (s->mode == TSR_MIG_OPT_DROPS || !placed)) {
                unsigned v = best_from(s, k + 1, mask);

                best = v > best ? v : best;
        }
        if (s->err)
                return 0;
        if (2 * (s->used + 1) > s->cap && grow(s))
                return 0;
        e = slot(s->memo, s->cap, key, k); /* the memo may have grown below */
        *e = (struct entry){key, (uint8_t)(k + 1), (uint8_t)best};
        s->used++;
        return best;
}

static int check(const struct tsr_mig_small *in, struct tsr_diag *diag)
{
        const struct tsr_product *p = in->product;
        uint32_t offered = p ? tsr_mig_offered(p) : 0;
        unsigned gpus = 0;

        if (!offered || tsr_product_mig_width(p) > TSR_MIG_OPT_WIDTH_MAX)
                return tsr_diag_set(diag, TSR_EINVAL, "the product has no MIG axis to search");
        if (!in->n_nodes || in->n_nodes > TSR_MIG_OPT_NODES_MAX ||
            in->n_tasks > TSR_MIG_OPT_TASKS_MAX)
                return tsr_diag_set(
                    diag, TSR_EINVAL, "%u nodes, %zu tasks: want 1..%d nodes, at most %d tasks",
                    in->n_nodes, in->n_tasks, TSR_MIG_OPT_NODES_MAX, TSR_MIG_OPT_TASKS_MAX);
        for (unsigned i = 0; i < in->n_nodes; i++) {
                if (!in->gpus[i])
                        return tsr_diag_set(diag, TSR_EINVAL, "node %u has no GPU", i);
                gpus += in->gpus[i];
        }
        if (gpus > TSR_MIG_OPT_GPUS_MAX)
                return tsr_diag_set(diag, TSR_EINVAL, "%u GPUs: at most %d", gpus,
                                    TSR_MIG_OPT_GPUS_MAX);
        for (size_t k = 0; k < in->n_tasks; k++) {
                unsigned q = in->profile[k];

                if (q >= p->n_profiles || !((offered >> q) & 1u))
                        return tsr_diag_set(diag, TSR_EINVAL, "task %zu: profile %u not offered", k,
                                            q);
                if (p->profiles[q].max_instances < placements(&p->profiles[q]))
                        return tsr_diag_set(diag, TSR_ENOTSUP,
                                            "task %zu: %s's instance cap binds before its "
                                            "placements run out",
                                            k, p->profiles[q].name);
        }
        return 0;
}

/* Places the witness: per task the first choice that keeps the optimum (a placement before a
 * drop). */
static void witness(struct search *s, struct tsr_mig_solution *out)
{
        uint32_t mask[TSR_MIG_OPT_GPUS_MAX] = {0};

        for (unsigned k = 0; k < s->in->n_tasks; k++) {
                const struct tsr_mig_profile *mp = &s->in->product->profiles[s->in->profile[k]];
                unsigned target = best_from(s, k, mask);
                bool found = false;

                out->choice[k] = (struct tsr_mig_choice){-1, 0, 0};
                for (unsigned i = 0; i < s->in->n_nodes && !found; i++)
                        for (unsigned g = s->first[i]; g < s->first[i + 1] && !found; g++)
                                for (unsigned st = 0; st < TSR_MIG_OPT_WIDTH_MAX && !found; st++) {
                                        uint32_t span = tsr_geometry_span(st, mp->size);

                                        if (!((mp->starts >> st) & 1u) || (mask[g] & span) ||
                                            (span & ~s->all))
                                                continue;
                                        mask[g] |= span;
                                        found = mp->size + best_from(s, k + 1, mask) == target;
                                        if (!found)
                                                mask[g] &= ~span;
                                        else
                                                out->choice[k] = (struct tsr_mig_choice){
                                                    (int)i, g - s->first[i], st};
                                }
        }
}

int tsr_mig_optimum_solve(const struct tsr_mig_small *in, enum tsr_mig_opt_mode mode,
                          struct tsr_mig_solution *out, struct tsr_diag *diag)
{
        struct search s = {.in = in, .mode = mode};
        struct tsr_mig_solution sol = {0};
        uint32_t mask[TSR_MIG_OPT_GPUS_MAX] = {0};
        int rc = check(in, diag);

        if (rc)
                return rc;
        for (unsigned i = 0; i < in->n_nodes; i++) {
                s.first[i] = s.n_gpus;
                s.n_gpus += in->gpus[i];
        }
        s.first[in->n_nodes] = s.n_gpus;
        s.all = tsr_geometry_span(0, tsr_product_mig_width(in->product));
        for (size_t k = in->n_tasks; k-- > 0;)
                s.rest[k] = s.rest[k + 1] + in->product->profiles[in->profile[k]].size;
        if (grow(&s))
                return tsr_diag_set(diag, s.err, "out of memory");
        sol.slices = best_from(&s, 0, mask);
        if (!s.err)
                witness(&s, &sol);
        sol.states = s.used;
        free(s.memo);
        if (s.err)
                return tsr_diag_set(diag, s.err, "the search passed %u memo entries", MEMO_MAX);
        *out = sol;
        return 0;
}

int tsr_mig_online(const struct tsr_mig_small *in, struct tsr_mig_solution *out,
                   struct tsr_diag *diag)
{
        struct tsr_trace_node nodes[TSR_MIG_OPT_NODES_MAX];
        struct tsr_mig_solution sol = {0};
        struct tsr_rcluster rc;
        struct tsr_mig_cluster c;
        int err = check(in, diag);

        if (err)
                return err;
        memset(nodes, 0, sizeof(nodes));
        for (unsigned i = 0; i < in->n_nodes; i++) {
                snprintf(nodes[i].name, sizeof(nodes[i].name), "node-%u", i);
                nodes[i].cpu_milli = nodes[i].memory_mib = INT64_C(1) << 40;
                nodes[i].gpus = in->gpus[i];
                snprintf(nodes[i].model, sizeof(nodes[i].model), "MIG");
        }
        err = tsr_rcluster_init(&rc, nodes, in->n_nodes, diag);
        if (err)
                return err;
        err = tsr_mig_cluster_init(&c, in->product, &rc, nodes, diag);
        for (size_t k = 0; !err && k < in->n_tasks; k++) {
                struct tsr_mig_task t = {0, 0, in->profile[k], 1, 0};
                struct tsr_mig_place pl;

                sol.choice[k] = (struct tsr_mig_choice){-1, 0, 0};
                if (!tsr_mig_place(&c, &t, &pl))
                        continue;
                tsr_mig_bind(&c, &t, &pl);
                sol.choice[k] =
                    (struct tsr_mig_choice){(int)pl.node, pl.pick[0].accel, pl.pick[0].start};
                sol.slices += in->product->profiles[t.profile].size;
        }
        if (!err)
                tsr_mig_cluster_release(&c);
        tsr_rcluster_release(&rc);
        if (!err)
                *out = sol;
        return err;
}

int tsr_mig_small_draw(const struct tsr_product *p, const unsigned *milli, size_t n,
                       size_t max_tasks, struct tsr_rng *rng, struct tsr_mig_small *out)
{
        struct tsr_mig_small in = {.product = p};
        unsigned asked = 0, target;

        if (!n || !max_tasks || max_tasks > TSR_MIG_OPT_TASKS_MAX)
                return TSR_EINVAL;
        in.n_nodes = 1 + (unsigned)tsr_rng_below(rng, 2);
        for (unsigned i = 0; i < in.n_nodes; i++)
                in.gpus[i] = 1 + (unsigned)tsr_rng_below(rng, 2);
        target = tsr_mig_small_slices(&in) * TUNE_PCT;
        while (in.n_tasks < max_tasks && asked * 100 < target) {
                int q = tsr_mig_round(p, milli[tsr_rng_below(rng, n)]);

                if (q < 0)
                        return TSR_EINVAL;
                in.profile[in.n_tasks++] = (uint8_t)q;
                asked += p->profiles[q].size;
        }
        *out = in;
        return 0;
}

int tsr_mig_gap_add(struct tsr_mig_gap *g, const struct tsr_mig_small *in, struct tsr_diag *diag)
{
        struct tsr_mig_solution opt, wc, tessera;
        double slices = tsr_mig_small_slices(in), ratio, ratio_wc;
        int rc = tsr_mig_optimum_solve(in, TSR_MIG_OPT_DROPS, &opt, diag);

        rc = rc ? rc : tsr_mig_optimum_solve(in, TSR_MIG_OPT_WORK_CONSERVING, &wc, diag);
        rc = rc ? rc : tsr_mig_online(in, &tessera, diag);
        if (rc)
                return rc;
        ratio = opt.slices ? (double)tessera.slices / opt.slices : 1;
        ratio_wc = wc.slices ? (double)tessera.slices / wc.slices : 1;
        if (!g->n || ratio < g->ratio_worst) {
                g->ratio_worst = ratio;
                g->worst = *in;
                g->worst_opt = opt;
                g->worst_tessera = tessera;
        }
        if (!g->n || ratio_wc < g->ratio_wc_worst) {
                g->ratio_wc_worst = ratio_wc;
                g->worst_wc = *in;
                g->worst_wc_opt = wc;
                g->worst_wc_tessera = tessera;
        }
        g->n++;
        g->tasks += in->n_tasks;
        g->optimal += tessera.slices == opt.slices;
        g->optimal_wc += tessera.slices == wc.slices;
        g->ratio_sum += ratio;
        g->ratio_wc_sum += ratio_wc;
        g->opt_pct += opt.slices / slices * 100;
        g->wc_pct += wc.slices / slices * 100;
        g->tessera_pct += tessera.slices / slices * 100;
        if (opt.states > g->states_max)
                g->states_max = opt.states;
        if (wc.states > g->states_max)
                g->states_max = wc.states;
        return 0;
}

void tsr_mig_gap_merge(struct tsr_mig_gap *into, const struct tsr_mig_gap *g)
{
        if (!g->n)
                return;
        if (!into->n || g->ratio_worst < into->ratio_worst) {
                into->ratio_worst = g->ratio_worst;
                into->worst = g->worst;
                into->worst_opt = g->worst_opt;
                into->worst_tessera = g->worst_tessera;
        }
        if (!into->n || g->ratio_wc_worst < into->ratio_wc_worst) {
                into->ratio_wc_worst = g->ratio_wc_worst;
                into->worst_wc = g->worst_wc;
                into->worst_wc_opt = g->worst_wc_opt;
                into->worst_wc_tessera = g->worst_wc_tessera;
        }
        into->n += g->n;
        into->tasks += g->tasks;
        into->optimal += g->optimal;
        into->optimal_wc += g->optimal_wc;
        into->ratio_sum += g->ratio_sum;
        into->ratio_wc_sum += g->ratio_wc_sum;
        into->opt_pct += g->opt_pct;
        into->wc_pct += g->wc_pct;
        into->tessera_pct += g->tessera_pct;
        into->seconds += g->seconds;
        if (g->states_max > into->states_max)
                into->states_max = g->states_max;
}

int tsr_mig_gap_header(struct tsr_buf *out)
{
        return tsr_buf_addf(out,
                            "%-10s %6s %5s  %-26s  %-26s   %-22s  %6s  %s\n"
                            "%-10s %6s %5s  %8s  %6s  %6s   %8s  %6s  %6s   %6s  %6s  %6s  %6s  "
                            "%s\n",
                            "", "", "", "tessera vs optimum", "vs work-conserving opt.",
                            "held slices % (mean)", "", "", "batch", "inst.", "tasks", "=opt.",
                            "mean", "worst", "=opt.", "mean", "worst", "opt.", "w-c", "tessera",
                            "states", "s");
}

static int solution_line(struct tsr_buf *out, const char *who, const struct tsr_mig_small *in,
                         const struct tsr_mig_solution *s)
{
        int rc = tsr_buf_addf(out, "    %-8s %2u slices:", who, s->slices);

        for (size_t k = 0; !rc && k < in->n_tasks; k++)
                rc = s->choice[k].node < 0 ? tsr_buf_adds(out, " drop")
                                           : tsr_buf_addf(out, " n%d/g%u@%u", s->choice[k].node,
                                                          s->choice[k].gpu, s->choice[k].start);
        return rc ? rc : tsr_buf_adds(out, "\n");
}

/* One worst instance: its cluster, tasks, the optimum's and tessera's solutions. */
static int worst_lines(struct tsr_buf *out, const char *what, double ratio,
                       const struct tsr_mig_small *in, const struct tsr_mig_solution *opt,
                       const struct tsr_mig_solution *tessera)
{
        int rc = tsr_buf_addf(out, "  worst against the %s (tessera / optimum %.4f): GPUs per node",
                              what, ratio);

        for (unsigned i = 0; !rc && i < in->n_nodes; i++)
                rc = tsr_buf_addf(out, " %u", in->gpus[i]);
        rc = rc ? rc : tsr_buf_adds(out, "; tasks in order:");
        for (size_t k = 0; !rc && k < in->n_tasks; k++)
                rc = tsr_buf_addf(out, " %s", in->product->profiles[in->profile[k]].name);
        rc = rc ? rc : tsr_buf_adds(out, "\n");
        rc = rc ? rc : solution_line(out, "optimum", in, opt);
        return rc ? rc : solution_line(out, "tessera", in, tessera);
}

int tsr_mig_gap_report(struct tsr_buf *out, const char *label, const struct tsr_mig_gap *g,
                       bool worst)
{
        double n = g->n ? (double)g->n : 1;
        int rc = tsr_buf_addf(
            out,
            "%-10s %6zu %5.1f  %6.1f %%  %6.4f  %6.4f   %6.1f %%  %6.4f  %6.4f   %6.2f  %6.2f  "
            "%6.2f  %6zu  %.2f\n",
            label, g->n, (double)g->tasks / n, g->optimal / n * 100, g->ratio_sum / n,
            g->ratio_worst, g->optimal_wc / n * 100, g->ratio_wc_sum / n, g->ratio_wc_worst,
            g->opt_pct / n, g->wc_pct / n, g->tessera_pct / n, g->states_max, g->seconds);

        if (rc || !worst || !g->n)
                return rc;
        rc = worst_lines(out, "optimum", g->ratio_worst, &g->worst, &g->worst_opt,
                         &g->worst_tessera);
        if (rc || g->ratio_wc_worst >= 1)
                return rc;
        return worst_lines(out, "work-conserving optimum", g->ratio_wc_worst, &g->worst_wc,
                           &g->worst_wc_opt, &g->worst_wc_tessera);
}
