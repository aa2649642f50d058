/*
 * admit.c - the node-devices check: charge the inflight Workloads on scratch copies of the
 * ledgers, then place this Workload's Pods one by one with the allocator's own packing.
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

struct scratch {
        struct tsr_accel_ledger *ledger; /* per node, n accelerators each, at offsets[k] */
        size_t *offset;
};

static struct tsr_accel_ledger *ledger_of(const struct scratch *s, size_t node)
{
        return &s->ledger[s->offset[node]];
}

static int scratch_init(struct scratch *s, const struct tsr_admit_node *nodes, size_t n_nodes)
{
        size_t total = 0;

        s->offset = malloc((n_nodes ? n_nodes : 1) * sizeof(*s->offset));
        if (!s->offset)
                return TSR_ENOMEM;
        for (size_t k = 0; k < n_nodes; k++) {
                s->offset[k] = total;
                total += nodes[k].n;
        }
        s->ledger = malloc((total ? total : 1) * sizeof(*s->ledger));
        if (!s->ledger) {
                free(s->offset);
                return TSR_ENOMEM;
        }
        for (size_t k = 0; k < n_nodes; k++)
                if (nodes[k].n)
                        memcpy(ledger_of(s, k), nodes[k].ledger,
                               nodes[k].n * sizeof(*nodes[k].ledger));
        return 0;
}

static void scratch_release(struct scratch *s)
{
        free(s->ledger);
        free(s->offset);
}

/* Places one Pod of ps on node k; 0 or TSR_ENOSPC. */
static int place_pod(const struct tsr_admit_node *nodes, struct scratch *s, size_t k,
                     const struct tsr_admit_podset *ps)
{
        if (!nodes[k].present || nodes[k].flavor != ps->flavor)
                return TSR_ENOSPC;
        return tsr_alloc_place(nodes[k].caps, ledger_of(s, k), nodes[k].n, &ps->demand, NULL, NULL,
                               0, NULL);
}

static int charge_inflight(const struct tsr_admit_node *nodes, size_t n_nodes, struct scratch *s,
                           const struct tsr_admit_workload *w, struct tsr_diag *diag)
{
        for (size_t p = 0; p < w->n_podsets; p++) {
                const struct tsr_admit_podset *ps = &w->podsets[p];

                for (size_t x = 0; x < ps->n_placements; x++) {
                        const struct tsr_admit_placement *pl = &ps->placements[x];

                        if (pl->node >= n_nodes)
                                return tsr_diag_set(diag, TSR_EINVAL,
                                                    "Workload %s places Pods on node %zu of %zu",
                                                    w->name, pl->node, n_nodes);
                        /* Best effort: a Pod that no longer fits cannot be charged. */
                        for (unsigned i = 0; i < pl->pods; i++)
                                if (place_pod(nodes, s, pl->node, ps))
                                        break;
                }
        }
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

/* Nodes in name order, for the whole-pool placement. */
static void sort_nodes(const struct tsr_admit_node *nodes, size_t n, size_t *idx)
{
        for (size_t i = 0; i < n; i++) {
                size_t at = i;

                while (at > 0 && strcmp(nodes[idx[at - 1]].name, nodes[i].name) > 0) {
                        idx[at] = idx[at - 1];
                        at--;
                }
                idx[at] = i;
        }
}

/* Places one PodSet; returns false with *out set to Retry when it does not fit. */
static bool judge_podset(const struct tsr_admit_node *nodes, size_t n_nodes, struct scratch *s,
                         const size_t *by_name, const struct tsr_admit_workload *w,
                         const struct tsr_admit_podset *ps, struct tsr_admit_verdict *out)
{
        char where[300], have[160];
        unsigned left = ps->count;

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
                const struct tsr_admit_node *node = &nodes[pl->node];
                unsigned placed = 0;

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
                while (placed < pl->pods && place_pod(nodes, s, pl->node, ps) == 0)
                        placed++;
                if (placed < pl->pods) {
                        /* A node of another flavor offers this PodSet nothing. */
                        if (node->flavor != ps->flavor)
                                snprintf(have, sizeof(have), "none in the PodSet's flavor");
                        else
                                describe_free(node, ledger_of(s, pl->node), &ps->demand, have,
                                              sizeof(have));
                        retry(out, w, ps, where, placed, pl->pods, have);
                        return false;
                }
        }
        if (ps->n_placements)
                return true;
        for (size_t i = 0; i < n_nodes && left > 0; i++)
                while (left > 0 && place_pod(nodes, s, by_name[i], ps) == 0)
                        left--;
        if (left > 0) {
                snprintf(where, sizeof(where), "the flavor's node pool");
                snprintf(have, sizeof(have), "%u more do not fit", left);
                retry(out, w, ps, where, ps->count - left, ps->count, have);
                return false;
        }
        return true;
}

int tsr_admit_judge(const struct tsr_admit_node *nodes, size_t n_nodes,
                    const struct tsr_admit_workload *inflight, size_t n_inflight,
                    const struct tsr_admit_workload *w, struct tsr_admit_verdict *out,
                    struct tsr_diag *diag)
{
        struct scratch s;
        size_t *podsets = NULL, *by_name = NULL;
        struct tsr_admit_verdict v = {.state = TSR_CHECK_READY};
        int rc;

        for (size_t p = 0; p < w->n_podsets; p++)
                for (size_t x = 0; x < w->podsets[p].n_placements; x++)
                        if (w->podsets[p].placements[x].node >= n_nodes)
                                return tsr_diag_set(
                                    diag, TSR_EINVAL, "Workload %s places Pods on node %zu of %zu",
                                    w->name, w->podsets[p].placements[x].node, n_nodes);
        rc = scratch_init(&s, nodes, n_nodes);
        if (rc)
                return tsr_diag_set(diag, rc, "out of memory");
        podsets = malloc((w->n_podsets ? w->n_podsets : 1) * sizeof(*podsets));
        by_name = malloc((n_nodes ? n_nodes : 1) * sizeof(*by_name));
        if (!podsets || !by_name) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n_inflight && !rc; i++)
                rc = charge_inflight(nodes, n_nodes, &s, &inflight[i], diag);
        if (rc)
                goto out;
        sort_podsets(w, podsets);
        sort_nodes(nodes, n_nodes, by_name);
        snprintf(v.message, sizeof(v.message), "%s", TSR_ADMIT_READY_MESSAGE);
        for (size_t p = 0; p < w->n_podsets; p++)
                if (!judge_podset(nodes, n_nodes, &s, by_name, w, &w->podsets[podsets[p]], &v))
                        break;
        *out = v;
out:
        free(podsets);
        free(by_name);
        scratch_release(&s);
        return rc;
}
