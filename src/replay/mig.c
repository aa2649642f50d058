/*
 * mig.c - the MIG variant: profile rounding, the partitioned cluster, tessera's placement over
 * src/core (TAS on the partition keys, the core allocator), the run and its table.
 */
#include "replay/mig.h"

#include "base/err.h"
#include "core/catalog.h"
#include "core/demand.h"
#include "core/geometry.h"
#include "core/keys.h"
#include "core/node_keys.h"
#include "core/tas.h"
#include "replay/arrival.h"
#include "replay/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID "GPU-replay-mig"

uint32_t tsr_mig_offered(const struct tsr_product *p)
{
        struct tsr_accel_cap cap;

        tsr_capability_detect(p, 0, UUID, true, &cap);
        return cap.partitioned ? cap.offered : 0;
}

/* True when profile a is a better rounding target than b: less memory, then fewer compute
 * slices (b < 0: no candidate yet). */
static bool rounds_before(const struct tsr_product *p, unsigned a, int b)
{
        const struct tsr_mig_profile *pa = &p->profiles[a], *pb;

        if (b < 0)
                return true;
        pb = &p->profiles[b];
        if (tsr_mig_profile_nominal_mib(pa) != tsr_mig_profile_nominal_mib(pb))
                return tsr_mig_profile_nominal_mib(pa) < tsr_mig_profile_nominal_mib(pb);
        return pa->compute_slices < pb->compute_slices;
}

int tsr_mig_round(const struct tsr_product *p, unsigned gpu_milli)
{
        uint32_t offered = tsr_mig_offered(p);
        int best = -1;

        for (unsigned q = 0; q < p->n_profiles && q < TSR_MIG_PROFILES_MAX; q++) {
                uint64_t mib = tsr_mig_profile_nominal_mib(&p->profiles[q]);

                if (!((offered >> q) & 1u))
                        continue;
                /* gpu_milli / 1000 x vram <= mib, exactly */
                if ((uint64_t)gpu_milli * p->vram_mib > mib * TSR_TRACE_MILLI)
                        continue;
                if (rounds_before(p, q, best))
                        best = (int)q;
        }
        return best;
}

int tsr_mig_full_profile(const struct tsr_product *p)
{
        uint32_t offered = tsr_mig_offered(p);
        unsigned width = tsr_product_mig_width(p);
        int best = -1;

        for (unsigned q = 0; q < p->n_profiles && q < TSR_MIG_PROFILES_MAX; q++)
                if (((offered >> q) & 1u) && p->profiles[q].size == width &&
                    (best < 0 || tsr_mig_profile_nominal_mib(&p->profiles[q]) >
                                     tsr_mig_profile_nominal_mib(&p->profiles[best])))
                        best = (int)q;
        return best;
}

int64_t tsr_mig_units(const struct tsr_product *p, unsigned q)
{
        return (int64_t)(tsr_mig_profile_nominal_mib(&p->profiles[q]) *
                         (uint64_t)TSR_UNITS_PER_ACCEL / p->vram_mib);
}

static int64_t allocatable(const struct tsr_node_keys *keys, const struct tsr_manufacturer *m,
                           enum tsr_key_kind kind, const char *profile)
{
        char name[TSR_KEY_MAX];
        const struct tsr_node_key *k;

        if (tsr_key_format(name, m, kind, profile))
                return 0;
        k = tsr_node_keys_find(keys, name);
        return k ? k->allocatable : 0;
}

/* Node i's free partition keys: what it advertises minus what its live instances request. */
static void refresh(struct tsr_mig_cluster *c, size_t i)
{
        const struct tsr_manufacturer *m = tsr_catalog_manufacturer(c->product->manufacturer);
        const struct tsr_accel_cap *caps = c->caps + c->first[i];
        const struct tsr_accel_ledger *l = c->ledger + c->first[i];
        unsigned n = c->rc->nodes[i].n_gpus;
        struct tsr_mig_free *f = &c->free[i];
        struct tsr_node_keys keys;

        memset(f, 0, sizeof(*f));
        if (!n || tsr_node_keys_project(m, caps, l, n, &keys, NULL))
                return;
        f->pool = allocatable(&keys, m, TSR_KEY_PARTITIONED, NULL);
        f->units = allocatable(&keys, m, TSR_KEY_PARTITIONED_UNITS, NULL);
        for (unsigned q = 0; q < c->product->n_profiles && q < TSR_MIG_PROFILES_MAX; q++)
                if ((caps[0].offered >> q) & 1u)
                        f->profile[q] = allocatable(&keys, m, TSR_KEY_PARTITIONED_PROFILE,
                                                    c->product->profiles[q].name);
        for (unsigned g = 0; g < n; g++) {
                f->pool -= l[g].live.n;
                f->units -= l[g].allocated;
                for (unsigned k = 0; k < l[g].live.n; k++)
                        f->profile[l[g].live.inst[k].profile]--;
        }
}

int tsr_mig_cluster_init(struct tsr_mig_cluster *c, const struct tsr_product *p,
                         struct tsr_rcluster *rc, const struct tsr_trace_node *nodes,
                         struct tsr_diag *diag)
{
        size_t n = rc->n_nodes ? rc->n_nodes : 1, cards = 0;

        memset(c, 0, sizeof(*c));
        if (!tsr_mig_offered(p) || tsr_mig_full_profile(p) < 0)
                return tsr_diag_set(diag, TSR_EINVAL, "%s has no MIG profiles to partition with",
                                    p->name);
        c->product = p;
        c->rc = rc;
        c->nodes = nodes;
        c->width = tsr_product_mig_width(p);
        for (unsigned q = 0; q < p->n_profiles && q < TSR_MIG_PROFILES_MAX; q++)
                c->units[q] = tsr_mig_units(p, q);
        c->first = malloc(n * sizeof(*c->first));
        c->free = malloc(n * sizeof(*c->free));
        c->by_name = malloc(n * sizeof(*c->by_name));
        if (!c->first || !c->free || !c->by_name)
                goto nomem;
        for (size_t i = 0; i < rc->n_nodes; i++) {
                unsigned g = rc->nodes[i].n_gpus;
                size_t f = 0;

                c->first[i] = cards;
                cards += g;
                while (g && f < c->n_flavors && c->flavor[f] < g)
                        f++;
                if (g && (f == c->n_flavors || c->flavor[f] != g)) {
                        memmove(c->flavor + f + 1, c->flavor + f,
                                (c->n_flavors - f) * sizeof(c->flavor[0]));
                        c->flavor[f] = g;
                        c->n_flavors++;
                }
        }
        if (tsr_trace_nodes_by_name(nodes, rc->n_nodes, c->by_name))
                goto nomem;
        c->caps = malloc((cards ? cards : 1) * sizeof(*c->caps));
        c->ledger = malloc((cards ? cards : 1) * sizeof(*c->ledger));
        if (!c->caps || !c->ledger)
                goto nomem;
        for (size_t i = 0; i < rc->n_nodes; i++) {
                for (unsigned g = 0; g < rc->nodes[i].n_gpus; g++) {
                        tsr_capability_detect(p, g, UUID, true, &c->caps[c->first[i] + g]);
                        tsr_ledger_reset(&c->ledger[c->first[i] + g]);
                }
                refresh(c, i);
        }
        c->total_slices = (int64_t)cards * c->width;
        return 0;
nomem:
        tsr_mig_cluster_release(c);
        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
}

void tsr_mig_cluster_release(struct tsr_mig_cluster *c)
{
        free(c->first);
        free(c->free);
        free(c->by_name);
        free(c->caps);
        free(c->ledger);
        memset(c, 0, sizeof(*c));
}

bool tsr_mig_task_of(const struct tsr_mig_cluster *c, const struct tsr_trace_pod *p,
                     struct tsr_mig_task *out)
{
        struct tsr_mig_task t = {p->cpu_milli, p->memory_mib, -1, 0, p->gpu_milli};

        if (!p->num_gpu) {
                t.milli = 0;
        } else if (tsr_trace_pod_fractional(p)) {
                t.profile = tsr_mig_round(c->product, p->gpu_milli);
                t.cards = 1;
        } else {
                t.profile = tsr_mig_full_profile(c->product);
                t.cards = p->num_gpu;
        }
        *out = t;
        return !t.cards || t.profile >= 0;
}

/* How many tasks like t node i still fits, as TAS counts it (0: none). */
static int64_t fits(const struct tsr_mig_cluster *c, size_t i, const struct tsr_mig_task *t)
{
        const struct tsr_rnode *n = &c->rc->nodes[i];
        struct tsr_tas_resource r[TSR_RNODE_TAS_RESOURCES + 3];
        size_t k = tsr_rnode_tas_resources(n, t->cpu, t->mem, r);

        if (t->cards) {
                const struct tsr_mig_free *f = &c->free[i];

                if (!n->n_gpus)
                        return 0;
                /* .partitioned, .partitioned.mig-<q>, .partitioned.units: one instance per card */
                r[k++] = (struct tsr_tas_resource){f->pool, 0, t->cards};
                r[k++] = (struct tsr_tas_resource){f->profile[t->profile], 0, t->cards};
                r[k++] = (struct tsr_tas_resource){f->units, 0, t->cards * c->units[t->profile]};
        }
        return tsr_tas_fits(r, k, NULL);
}

/* TAS over the nodes with gpus GPUs (0: every node): the fewest fits, ties by name. */
static size_t least_fits(const struct tsr_mig_cluster *c, const struct tsr_mig_task *t,
                         unsigned gpus)
{
        struct tsr_tas_candidate best = {SIZE_MAX, NULL, 0};

        for (size_t k = 0; k < c->rc->n_nodes; k++) {
                size_t i = c->by_name[k];
                struct tsr_tas_candidate cand;

                if (gpus && c->rc->nodes[i].n_gpus != gpus)
                        continue;
                cand = (struct tsr_tas_candidate){i, c->nodes[i].name, fits(c, i, t)};
                if (cand.fits && (best.node == SIZE_MAX || tsr_tas_before(&cand, &best)))
                        best = cand;
        }
        return best.node;
}

static void demand_of(const struct tsr_mig_cluster *c, const struct tsr_mig_task *t,
                      struct tsr_demand *d)
{
        memset(d, 0, sizeof(*d));
        d->family = TSR_FAMILY_PARTITIONED;
        d->cards = 1;
        d->units = c->units[t->profile];
        snprintf(d->profile, sizeof(d->profile), "%s", c->product->profiles[t->profile].name);
}

bool tsr_mig_place(const struct tsr_mig_cluster *c, const struct tsr_mig_task *t,
                   struct tsr_mig_place *out)
{
        struct tsr_accel_ledger scratch[TSR_TRACE_GPUS_MAX];
        const struct tsr_accel_cap *caps;
        struct tsr_demand d;
        size_t best = SIZE_MAX;
        unsigned n_gpus;

        if (!t->cards) {
                best = least_fits(c, t, 0);
        } else {
                if (t->profile < 0 || t->cards > TSR_TRACE_GPUS_MAX)
                        return false;
                for (size_t f = 0; f < c->n_flavors && best == SIZE_MAX; f++)
                        best = least_fits(c, t, c->flavor[f]);
        }
        if (best == SIZE_MAX)
                return false;
        out->node = best;
        out->n = 0;
        if (!t->cards)
                return true;
        caps = c->caps + c->first[best];
        n_gpus = c->rc->nodes[best].n_gpus;
        memcpy(scratch, c->ledger + c->first[best], n_gpus * sizeof(scratch[0]));
        demand_of(c, t, &d);
        for (unsigned k = 0; k < t->cards; k++) {
                if (tsr_alloc_pick_partition(caps, scratch, NULL, n_gpus, d.profile, &out->pick[k]))
                        return false; /* gate 5 refuses: TAS counted what the cards cannot hold */
                tsr_alloc_charge(caps, scratch, &d, &out->pick[k]);
        }
        out->n = t->cards;
        return true;
}

void tsr_mig_bind(struct tsr_mig_cluster *c, const struct tsr_mig_task *t,
                  const struct tsr_mig_place *pl)
{
        struct tsr_rpod cpu_part = {.cpu = t->cpu, .mem = t->mem};
        struct tsr_rplace at = {.node = pl->node};
        struct tsr_demand d;

        tsr_rcluster_bind(c->rc, &cpu_part, &at);
        if (!t->cards)
                return;
        demand_of(c, t, &d);
        for (unsigned k = 0; k < pl->n; k++) {
                tsr_alloc_charge(c->caps + c->first[pl->node], c->ledger + c->first[pl->node], &d,
                                 &pl->pick[k]);
                c->used_slices += c->product->profiles[t->profile].size;
        }
        refresh(c, pl->node);
}

enum { HELD, USED, DROPPED, N_VALUES };

int tsr_mig_run(struct tsr_replay_setup *s, const struct tsr_product *p, uint64_t seed,
                struct tsr_mig_result *out, struct tsr_diag *diag)
{
        struct tsr_rcluster *rc = &s->cluster;
        struct tsr_mig_cluster c;
        const struct tsr_trace_pod **order = NULL;
        struct tsr_replay_bins *b = calloc(1, sizeof(*b));
        double cap = (double)rc->total_milli, v[N_VALUES] = {0, 0, 0};
        int64_t used_milli = 0;
        struct tsr_rng rng;
        size_t n = 0;
        int rc_ = 0;

        memset(out, 0, sizeof(*out));
        tsr_rng_seed(&rng, seed);
        tsr_rcluster_reset(rc, s->nodes);
        if (!b || tsr_replay_order_build(s->pods, s->n_pods,
                                         (int64_t)llround(s->tune * (double)rc->total_milli), &rng,
                                         &order, &n, &out->clones)) {
                free(b);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        rc_ = tsr_mig_cluster_init(&c, p, rc, s->nodes, diag);
        if (rc_)
                goto out;
        out->total_slices = c.total_slices;
        tsr_replay_bins_add(b, 0, rc->total_milli, v, N_VALUES);
        for (size_t k = 0; k < n; k++) {
                struct tsr_mig_task t;
                struct tsr_mig_place pl;
                bool known = tsr_mig_task_of(&c, order[k], &t);

                if (known && tsr_mig_place(&c, &t, &pl)) {
                        tsr_mig_bind(&c, &t, &pl);
                        used_milli += (int64_t)t.milli * t.cards;
                        out->placed++;
                } else if (!t.cards) {
                        out->dropped_cpu++;
                } else if (tsr_trace_pod_fractional(order[k])) {
                        out->dropped_fractional++;
                } else {
                        out->dropped_whole++;
                }
                if (known && t.cards)
                        out->arrived_slices += (int64_t)t.cards * p->profiles[t.profile].size;
                out->arrived_milli += tsr_replay_request(order[k]);
                v[HELD] = (double)c.used_slices / (double)c.total_slices * 100.0;
                v[USED] = (double)used_milli / cap * 100.0;
                v[DROPPED] = (double)(out->dropped_fractional + out->dropped_whole);
                tsr_replay_bins_add(b, out->arrived_milli, rc->total_milli, v, N_VALUES);
        }
        for (unsigned x = 0; x < TSR_REPLAY_POINTS; x++) {
                out->have[x] = tsr_replay_bins_point(b, x, v, N_VALUES);
                out->held_pct[x] = out->have[x] ? v[HELD] : 0;
                out->used_pct[x] = out->have[x] ? v[USED] : 0;
                if (x == 100)
                        out->dropped_at_100 = out->have[x] ? v[DROPPED] : 0;
        }
        out->pods = n;
        out->used_slices = c.used_slices;
        tsr_mig_cluster_release(&c);
out:
        free(order);
        free(b);
        return rc_;
}

double tsr_mig_unallocated_gpus(const struct tsr_replay_setup *s, const struct tsr_mig_result *r,
                                unsigned x)
{
        return (100.0 - r->held_pct[x]) / 100.0 * s->cluster.total_gpus;
}

/* The mapping over the pod list: tasks per profile, whole GPUs, CPU-only tasks. */
static int mapping_line(struct tsr_buf *out, const struct tsr_replay_setup *s,
                        const struct tsr_product *p)
{
        size_t per[TSR_MIG_PROFILES_MAX] = {0}, whole = 0, gpus = 0, cpu = 0;
        int full = tsr_mig_full_profile(p), rc = tsr_buf_adds(out, "the pod list as MIG tasks:");
        const char *sep = " fractional";

        for (size_t i = 0; i < s->n_pods; i++) {
                const struct tsr_trace_pod *pod = &s->pods[i];
                int q = tsr_trace_pod_fractional(pod) ? tsr_mig_round(p, pod->gpu_milli) : full;

                if (!pod->num_gpu) {
                        cpu++;
                } else if (!tsr_trace_pod_fractional(pod)) {
                        whole++;
                        gpus += pod->num_gpu;
                } else if (q >= 0) {
                        per[q]++; /* every fraction is covered: the full profile covers all */
                }
        }
        for (unsigned q = 0; !rc && q < p->n_profiles && q < TSR_MIG_PROFILES_MAX; q++) {
                if (!per[q])
                        continue;
                rc = tsr_buf_addf(out, "%s %s %zu", sep, p->profiles[q].name, per[q]);
                sep = ",";
        }
        return rc ? rc
                  : tsr_buf_addf(out, "; whole-GPU %zu (%zu x %s); CPU-only %zu\n", whole, gpus,
                                 p->profiles[full].name, cpu);
}

int tsr_mig_report_table(struct tsr_buf *out, const char *trace, const struct tsr_replay_setup *s,
                         const struct tsr_product *p, const struct tsr_mig_result *runs,
                         const double *seconds, size_t n)
{
        double *v = calloc((n ? n : 1) * 3, sizeof(*v)), dropped = 0;
        struct tsr_replay_stat held, used, unalloc, sec;
        int rc;

        if (!v)
                return TSR_ENOMEM;
        for (size_t k = 0; k < n; k++) {
                v[k] = runs[k].held_pct[100];
                v[n + k] = runs[k].used_pct[100];
                v[2 * n + k] = tsr_mig_unallocated_gpus(s, &runs[k], 100);
        }
        held = tsr_replay_stat_of(v, n);
        used = tsr_replay_stat_of(v + n, n);
        unalloc = tsr_replay_stat_of(v + 2 * n, n);
        sec = tsr_replay_stat_of(seconds, n);
        free(v);
        rc = tsr_buf_addf(out,
                          "MIG variant, trace %s on %s (every GPU partitioned, %u memory slices "
                          "each): %zu nodes, %u GPUs, %zu pods (first seed: +%zu clones to %.0f "
                          "%% of GPU capacity)\n",
                          trace, p->name, tsr_product_mig_width(p), s->n_nodes,
                          s->cluster.total_gpus, s->n_pods, n ? runs[0].clones : 0, s->tune * 100);
        rc = rc ? rc : mapping_line(out, s, p);
        rc = rc ? rc
                : tsr_buf_addf(out, "\n%-10s %-15s %-15s %-17s %-15s %s\n", "policy", "held@100 %",
                               "used@100 %", "unalloc GPUs", "GPU drops@100", "s/seed");
        for (size_t k = 0; k < n; k++)
                dropped += runs[k].dropped_at_100 / (double)n;
        rc = rc ? rc
                : tsr_buf_addf(out,
                               "%-10s %6.2f ± %-6.2f %6.2f ± %-6.2f %7.1f ± %-7.1f %-15.1f %.2f\n",
                               "tessera", held.mean, held.sd, used.mean, used.sd, unalloc.mean,
                               unalloc.sd, dropped, sec.mean);
        rc = rc ? rc
                : tsr_buf_addf(out, "\nheld GPU %% (mean over seeds) by arrived workload %%\n%-10s",
                               "policy");
        for (size_t i = 0; !rc && i < TSR_REPLAY_CURVE_POINTS; i++)
                rc = tsr_buf_addf(out, " %7u", tsr_replay_curve_points[i]);
        rc = rc ? rc : tsr_buf_addf(out, "\n%-10s", "tessera");
        for (size_t i = 0; !rc && i < TSR_REPLAY_CURVE_POINTS; i++) {
                double sum = 0;

                for (size_t k = 0; k < n; k++)
                        sum += runs[k].held_pct[tsr_replay_curve_points[i]];
                rc = tsr_buf_addf(out, " %7.2f", n ? sum / (double)n : 0);
        }
        return rc ? rc : tsr_buf_adds(out, "\n\n");
}
