/*
 * admit.c - the node-devices check: charge the inflight Workloads on the pool's copies of the
 * ledgers, then place this Workload's Pods one by one with the allocator's own packing, undoing
 * what the verdict placed before it returns.
 */
#include "core/admit.h"

#include "base/diag.h"
#include "base/err.h"
#include "core/alloc.h"
#include "core/fit.h"
#include "core/geometry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tsr_check_state_name(enum tsr_check_state s)
{
        switch (s) {
        case TSR_CHECK_READY:
                return "Ready";
        case TSR_CHECK_RETRY:
                return "Retry";
        case TSR_CHECK_REJECTED:
                return "Rejected";
        case TSR_CHECK_PENDING:
                break;
        }
        return "Pending";
}

/* What a walk without a hostname-level assignment learnt: for this flavor and demand, no node
 * before by_name[from] can host one Pod of the base. */
struct fit_memo {
        bool used;
        unsigned flavor;
        struct tsr_demand demand;
        size_t from;
};

#define FIT_MEMOS 16

/* One node a verdict changed: its ledger before, at saved[at]. */
struct undo {
        size_t node, at;
};

struct tsr_admit_pool {
        struct tsr_admit_node *nodes; /* .ledger unused: the node's ledger is at offset[k] */
        size_t n, cap;
        size_t *offset;
        struct tsr_accel_ledger *ledger;
        size_t n_accels, accel_cap;
        size_t *by_name; /* node indexes in name order */
        /* the verdict in progress: a node is saved once, when stamp[k] == epoch */
        unsigned *stamp, epoch;
        struct undo *undo;
        size_t n_undo, undo_cap;
        struct tsr_accel_ledger *saved;
        size_t n_saved, saved_cap;
        struct fit_memo memo[FIT_MEMOS];
        unsigned memo_next;
};

static struct tsr_accel_ledger *ledger_of(const struct tsr_admit_pool *p, size_t node)
{
        return &p->ledger[p->offset[node]];
}

/* Grows *v (of *cap elements of size) to hold need; false when out of memory. */
static bool reserve(void **v, size_t *cap, size_t need, size_t size)
{
        size_t want = *cap ? *cap : 16;
        void *grown;

        if (need <= *cap)
                return true;
        while (want < need)
                want *= 2;
        grown = realloc(*v, want * size);
        if (!grown)
                return false;
        *v = grown;
        *cap = want;
        return true;
}

static void forget_walks(struct tsr_admit_pool *p)
{
        memset(p->memo, 0, sizeof(p->memo));
}

/* Grows the per-node arrays to hold need nodes; false when out of memory. */
static bool reserve_nodes(struct tsr_admit_pool *p, size_t need)
{
        size_t cap = p->cap, c2 = p->cap, c3 = p->cap, c4 = p->cap;

        if (!reserve((void **)&p->nodes, &cap, need, sizeof(*p->nodes)) ||
            !reserve((void **)&p->offset, &c2, need, sizeof(*p->offset)) ||
            !reserve((void **)&p->by_name, &c3, need, sizeof(*p->by_name)) ||
            !reserve((void **)&p->stamp, &c4, need, sizeof(*p->stamp)))
                return false;
        p->cap = cap;
        return true;
}

/* Appends node k's entry and ledger; the caller orders by_name. */
static void append_node(struct tsr_admit_pool *p, const struct tsr_admit_node *node)
{
        size_t k = p->n++;

        p->nodes[k] = *node;
        p->nodes[k].ledger = NULL;
        p->offset[k] = p->n_accels;
        p->stamp[k] = 0;
        if (node->n)
                memcpy(&p->ledger[p->n_accels], node->ledger, node->n * sizeof(*node->ledger));
        p->n_accels += node->n;
}

int tsr_admit_pool_add(struct tsr_admit_pool *p, const struct tsr_admit_node *node, size_t *index,
                       struct tsr_diag *diag)
{
        size_t k = p->n, at = p->n;

        if (!reserve_nodes(p, k + 1) || !reserve((void **)&p->ledger, &p->accel_cap,
                                                 p->n_accels + node->n + 1, sizeof(*p->ledger)))
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        append_node(p, node);
        while (at > 0 && strcmp(p->nodes[p->by_name[at - 1]].name, node->name) > 0)
                at--;
        memmove(&p->by_name[at + 1], &p->by_name[at], (k - at) * sizeof(*p->by_name));
        p->by_name[at] = k;
        forget_walks(p);
        *index = k;
        return 0;
}

size_t tsr_admit_pool_nodes(const struct tsr_admit_pool *p)
{
        return p->n;
}

static int by_node_name(const void *a, const void *b)
{
        const struct tsr_admit_node *x = *(const struct tsr_admit_node *const *)a;
        const struct tsr_admit_node *y = *(const struct tsr_admit_node *const *)b;
        int c = strcmp(x->name, y->name);

        return c ? c : (x > y) - (x < y);
}

int tsr_admit_pool_new(const struct tsr_admit_node *nodes, size_t n_nodes,
                       struct tsr_admit_pool **out, struct tsr_diag *diag)
{
        struct tsr_admit_pool *p = calloc(1, sizeof(*p));
        const struct tsr_admit_node **order = malloc((n_nodes + 1) * sizeof(*order));
        size_t total = 0;

        for (size_t k = 0; k < n_nodes; k++)
                total += nodes[k].n;
        if (!p || !order || !reserve_nodes(p, n_nodes + 1) ||
            !reserve((void **)&p->ledger, &p->accel_cap, total + 1, sizeof(*p->ledger))) {
                free(order);
                tsr_admit_pool_free(p);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        p->epoch = 1;
        for (size_t k = 0; k < n_nodes; k++) {
                append_node(p, &nodes[k]);
                order[k] = &p->nodes[k];
        }
        qsort(order, n_nodes, sizeof(*order), by_node_name);
        for (size_t i = 0; i < n_nodes; i++)
                p->by_name[i] = (size_t)(order[i] - p->nodes);
        free(order);
        *out = p;
        return 0;
}

void tsr_admit_pool_free(struct tsr_admit_pool *p)
{
        if (!p)
                return;
        free(p->nodes);
        free(p->offset);
        free(p->ledger);
        free(p->by_name);
        free(p->stamp);
        free(p->undo);
        free(p->saved);
        free(p);
}

/*
 * Places one Pod of ps on node k; 0, TSR_ENOSPC or TSR_ENOMEM. Inside a verdict (undo) the
 * node's ledger is saved the first time a Pod lands there; a charge (no undo) writes the base.
 */
static int place_pod(struct tsr_admit_pool *p, size_t k, const struct tsr_admit_podset *ps,
                     bool undo)
{
        const struct tsr_admit_node *node = &p->nodes[k];
        struct tsr_accel_ledger *l = ledger_of(p, k);
        int rc;

        if (!node->present || node->flavor != ps->flavor)
                return TSR_ENOSPC;
        if (!undo || p->stamp[k] == p->epoch)
                return tsr_alloc_place(node->caps, l, node->n, &ps->demand, NULL, NULL, 0, NULL);
        /* a failed placement changes nothing: keep the copy only when one succeeds */
        if (!reserve((void **)&p->saved, &p->saved_cap, p->n_saved + node->n + 1,
                     sizeof(*p->saved)) ||
            !reserve((void **)&p->undo, &p->undo_cap, p->n_undo + 1, sizeof(*p->undo)))
                return TSR_ENOMEM;
        if (node->n)
                memcpy(&p->saved[p->n_saved], l, node->n * sizeof(*l));
        rc = tsr_alloc_place(node->caps, l, node->n, &ps->demand, NULL, NULL, 0, NULL);
        if (rc)
                return rc;
        p->undo[p->n_undo++] = (struct undo){k, p->n_saved};
        p->n_saved += node->n;
        p->stamp[k] = p->epoch;
        return 0;
}

/* Puts back every node the verdict changed and opens the next verdict. */
static void undo_verdict(struct tsr_admit_pool *p)
{
        for (size_t u = p->n_undo; u-- > 0;) {
                const struct undo *x = &p->undo[u];

                if (p->nodes[x->node].n)
                        memcpy(ledger_of(p, x->node), &p->saved[x->at],
                               p->nodes[x->node].n * sizeof(*p->saved));
        }
        p->n_undo = 0;
        p->n_saved = 0;
        if (++p->epoch == 0) {
                memset(p->stamp, 0, p->n * sizeof(*p->stamp));
                p->epoch = 1;
        }
}

static int check_placements(const struct tsr_admit_pool *p, const struct tsr_admit_workload *w,
                            struct tsr_diag *diag)
{
        for (size_t q = 0; q < w->n_podsets; q++)
                for (size_t x = 0; x < w->podsets[q].n_placements; x++)
                        if (w->podsets[q].placements[x].node >= p->n)
                                return tsr_diag_set(
                                    diag, TSR_EINVAL, "Workload %s places Pods on node %zu of %zu",
                                    w->name, w->podsets[q].placements[x].node, p->n);
        return 0;
}

int tsr_admit_pool_charge(struct tsr_admit_pool *p, const struct tsr_admit_workload *w,
                          struct tsr_diag *diag)
{
        int rc = check_placements(p, w, diag);

        if (rc)
                return rc;
        for (size_t q = 0; q < w->n_podsets; q++) {
                const struct tsr_admit_podset *ps = &w->podsets[q];

                for (size_t x = 0; x < ps->n_placements; x++) {
                        const struct tsr_admit_placement *pl = &ps->placements[x];

                        /* Best effort: a Pod that no longer fits cannot be charged. */
                        for (unsigned i = 0; i < pl->pods; i++)
                                if (place_pod(p, pl->node, ps, false))
                                        break;
                }
        }
        forget_walks(p);
        return 0;
}

/* Describes what node k still offers the demand, after the charges so far. */
static void describe_free(const struct tsr_admit_node *node, const struct tsr_accel_ledger *l,
                          const struct tsr_demand *d, char *out, size_t len)
{
        unsigned count = 0, partitioned = 0;
        int64_t best = -1;

        for (size_t i = 0; i < node->n; i++) {
                const struct tsr_accel_cap *c = &node->caps[i];

                switch (d->family) {
                case TSR_FAMILY_EXCLUSIVE:
                        count += tsr_fit_whole(c, &l[i]);
                        break;
                case TSR_FAMILY_SHARED:
                        count += tsr_fit_share(c, &l[i]);
                        break;
                case TSR_FAMILY_SLICED:
                        if (tsr_fit_slice(c, &l[i], 0) && l[i].remaining > best)
                                best = l[i].remaining;
                        break;
                case TSR_FAMILY_PARTITIONED: {
                        const struct tsr_mig_profile *mp;
                        unsigned p;

                        if (!c->partitioned)
                                break;
                        partitioned++;
                        mp = tsr_product_profile(c->product, d->profile);
                        if (!mp)
                                break;
                        p = (unsigned)(mp - c->product->profiles);
                        if ((c->offered >> p) & 1u)
                                count += tsr_geometry_free_count(
                                    mp, tsr_geometry_occupied(c->product, &l[i].live),
                                    tsr_geometry_live_count(&l[i].live, p));
                        break;
                }
                default:
                        break;
                }
        }
        switch (d->family) {
        case TSR_FAMILY_EXCLUSIVE:
                snprintf(out, len, "%u free", count);
                break;
        case TSR_FAMILY_SHARED:
                snprintf(out, len, "%u with a free share", count);
                break;
        case TSR_FAMILY_SLICED:
                if (best < 0)
                        snprintf(out, len, "no accelerator with a free slice slot");
                else
                        snprintf(out, len, "the freest accelerator has %lld units",
                                 (long long)best);
                break;
        case TSR_FAMILY_PARTITIONED:
                if (!partitioned)
                        snprintf(out, len, "no partitioned accelerator");
                else
                        snprintf(out, len, "%u free %s placement%s", count, d->profile,
                                 count == 1 ? "" : "s");
                break;
        default:
                snprintf(out, len, "nothing");
                break;
        }
}

static void retry(struct tsr_admit_verdict *out, const struct tsr_admit_workload *w,
                  const struct tsr_admit_podset *ps, const char *where, unsigned placed,
                  unsigned wanted, const char *have)
{
        char need[160], role[96] = "";

        if (w->n_podsets > 1)
                snprintf(role, sizeof(role), " for role \"%s\"", ps->name);
        tsr_demand_describe(&ps->demand, need, sizeof(need));
        out->state = TSR_CHECK_RETRY;
        snprintf(out->message, sizeof(out->message),
                 "%s fits %u of %u Pod%s%s: each needs %s, %s; will retry as capacity frees", where,
                 placed, wanted, wanted == 1 ? "" : "s", role, need, have);
}

/* PodSet order: partitions first, then more units per accelerator, then family, then index. */
static int order(const struct tsr_admit_podset *a, const struct tsr_admit_podset *b)
{
        int64_t ua = tsr_demand_units_per_card(&a->demand);
        int64_t ub = tsr_demand_units_per_card(&b->demand);
        bool pa = a->demand.family == TSR_FAMILY_PARTITIONED;
        bool pb = b->demand.family == TSR_FAMILY_PARTITIONED;

        if (pa != pb)
                return pa ? -1 : 1;
        if (ua != ub)
                return ua > ub ? -1 : 1;
        if (a->demand.family != b->demand.family)
                return a->demand.family < b->demand.family ? -1 : 1;
        return 0;
}

static void sort_podsets(const struct tsr_admit_workload *w, size_t *idx)
{
        for (size_t i = 0; i < w->n_podsets; i++) {
                size_t at = i;

                while (at > 0 && order(&w->podsets[idx[at - 1]], &w->podsets[i]) > 0) {
                        idx[at] = idx[at - 1];
                        at--;
                }
                idx[at] = i;
        }
}

static bool same_demand(const struct tsr_demand *a, const struct tsr_demand *b)
{
        return a->family == b->family && a->cards == b->cards && a->units == b->units &&
               a->mixed == b->mixed && !strcmp(a->profile, b->profile);
}

/* The walk's memo for ps's flavor and demand, a new one (from 0) when there is none. */
static struct fit_memo *walk_memo(struct tsr_admit_pool *p, const struct tsr_admit_podset *ps)
{
        struct fit_memo *m;

        for (size_t i = 0; i < FIT_MEMOS; i++)
                if (p->memo[i].used && p->memo[i].flavor == ps->flavor &&
                    same_demand(&p->memo[i].demand, &ps->demand))
                        return &p->memo[i];
        m = &p->memo[p->memo_next++ % FIT_MEMOS];
        *m = (struct fit_memo){.used = true, .flavor = ps->flavor, .demand = ps->demand};
        return m;
}

/*
 * Places ps's Pods over the flavor's whole pool, nodes in name order, from the first node that
 * could host one; returns the Pods left. The memo moves past a node only while every node so far
 * held none of them and no earlier PodSet of this verdict touched it.
 */
static unsigned walk_pool(struct tsr_admit_pool *p, const struct tsr_admit_podset *ps, int *err)
{
        struct fit_memo *m = walk_memo(p, ps);
        unsigned left = ps->count;
        bool learning = true;

        for (size_t i = m->from; i < p->n && left > 0; i++) {
                size_t k = p->by_name[i];
                bool touched = p->stamp[k] == p->epoch;
                unsigned before = left;
                int rc = 0;

                while (left > 0 && (rc = place_pod(p, k, ps, true)) == 0)
                        left--;
                if (rc == TSR_ENOMEM) {
                        *err = rc;
                        return left;
                }
                learning &= left == before && !touched;
                if (learning)
                        m->from = i + 1;
        }
        return left;
}

/* Places one PodSet; false with *out set to Retry when it does not fit (or *err on ENOMEM). */
static bool judge_podset(struct tsr_admit_pool *p, const struct tsr_admit_workload *w,
                         const struct tsr_admit_podset *ps, struct tsr_admit_verdict *out, int *err)
{
        char where[300], have[160];
        unsigned left;

        if (ps->demand.family == TSR_FAMILY_NONE)
                return true;
        if (ps->flavor == TSR_ADMIT_NO_FLAVOR) {
                out->state = TSR_CHECK_RETRY;
                snprintf(out->message, sizeof(out->message),
                         "the Workload's admission does not resolve to a single accelerator "
                         "flavor%s%s%s; will retry once it does",
                         w->n_podsets > 1 ? " for role \"" : "", w->n_podsets > 1 ? ps->name : "",
                         w->n_podsets > 1 ? "\"" : "");
                return false;
        }
        for (size_t x = 0; x < ps->n_placements; x++) {
                const struct tsr_admit_placement *pl = &ps->placements[x];
                const struct tsr_admit_node *node = &p->nodes[pl->node];
                unsigned placed = 0;
                int rc = 0;

                snprintf(where, sizeof(where), "node \"%s\"", node->name);
                if (!node->present) {
                        char role[96] = "";

                        if (w->n_podsets > 1)
                                snprintf(role, sizeof(role), " for role \"%s\"", ps->name);
                        out->state = TSR_CHECK_RETRY;
                        snprintf(out->message, sizeof(out->message),
                                 "node \"%s\" assigned%s no longer exists; will retry as "
                                 "capacity frees",
                                 node->name, role);
                        return false;
                }
                while (placed < pl->pods && (rc = place_pod(p, pl->node, ps, true)) == 0)
                        placed++;
                if (rc == TSR_ENOMEM) {
                        *err = rc;
                        return false;
                }
                if (placed < pl->pods) {
                        /* A node of another flavor offers this PodSet nothing. */
                        if (node->flavor != ps->flavor)
                                snprintf(have, sizeof(have), "none in the PodSet's flavor");
                        else
                                describe_free(node, ledger_of(p, pl->node), &ps->demand, have,
                                              sizeof(have));
                        retry(out, w, ps, where, placed, pl->pods, have);
                        return false;
                }
        }
        if (ps->n_placements)
                return true;
        left = walk_pool(p, ps, err);
        if (*err)
                return false;
        if (left > 0) {
                snprintf(where, sizeof(where), "the flavor's node pool");
                snprintf(have, sizeof(have), "%u more do not fit", left);
                retry(out, w, ps, where, ps->count - left, ps->count, have);
                return false;
        }
        return true;
}

int tsr_admit_pool_judge(struct tsr_admit_pool *p, const struct tsr_admit_workload *w,
                         struct tsr_admit_verdict *out, struct tsr_diag *diag)
{
        size_t order_buf[8], *podsets = order_buf;
        struct tsr_admit_verdict v = {.state = TSR_CHECK_READY};
        int rc = check_placements(p, w, diag), err = 0;

        if (rc)
                return rc;
        if (w->n_podsets > 8 && !(podsets = malloc(w->n_podsets * sizeof(*podsets))))
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        sort_podsets(w, podsets);
        snprintf(v.message, sizeof(v.message), "%s", TSR_ADMIT_READY_MESSAGE);
        for (size_t q = 0; q < w->n_podsets; q++)
                if (!judge_podset(p, w, &w->podsets[podsets[q]], &v, &err))
                        break;
        undo_verdict(p);
        if (podsets != order_buf)
                free(podsets);
        if (err)
                return tsr_diag_set(diag, err, "out of memory");
        *out = v;
        return 0;
}

int tsr_admit_judge(const struct tsr_admit_node *nodes, size_t n_nodes,
                    const struct tsr_admit_workload *inflight, size_t n_inflight,
                    const struct tsr_admit_workload *w, struct tsr_admit_verdict *out,
                    struct tsr_diag *diag)
{
        struct tsr_admit_pool *p = NULL;
        int rc = tsr_admit_pool_new(nodes, n_nodes, &p, diag);

        for (size_t i = 0; i < n_inflight && !rc; i++)
                rc = tsr_admit_pool_charge(p, &inflight[i], diag);
        if (!rc)
                rc = tsr_admit_pool_judge(p, w, out, diag);
        tsr_admit_pool_free(p);
        return rc;
}
