/*
 * node_devices.c - the `gpustack-node-devices` AdmissionCheck controller (gate 3). For every
 * Workload that holds a quota reservation, is not evicted, not finished and not yet admitted, it
 * builds the snapshot core/admit.h judges: the ledger of every node of the pool rebuilt from the
 * Pods bound there (one read), the Workload's PodSets with their TAS assignments, and the inflight
 * Workloads (admitted, or holding this check's Ready) with the Pods the ledger does not hold yet.
 * A Pod is held once its allocation record names every container that asks for an accelerator;
 * a finished Pod counts as held. It writes a verdict only when the state or message changes, with
 * the transition time only when the state does. It never preempts and never answers Rejected.
 */
#include "sim/actors.h"

#include "core/demand.h"
#include "core/instancetype.h"
#include "sim/resources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct snapshot {
        struct tsr_admit_node *nodes;
        struct tsr_accel_ledger *ledgers; /* SIM_GPUS_MAX per node */
        size_t *node_of;                  /* snapshot index -> cluster node */
        size_t n;
};

static bool build_snapshot(const struct tsr_cluster *c, const struct sim_pool *pool,
                           struct snapshot *s)
{
        struct sim_flavor flavors[SIM_FLAVORS_MAX];
        int *node_flavor = malloc((c->n_nodes ? c->n_nodes : 1) * sizeof(*node_flavor));
        size_t nf;

        s->n = 0;
        s->nodes = calloc(c->n_nodes ? c->n_nodes : 1, sizeof(*s->nodes));
        s->ledgers = calloc(c->n_nodes ? c->n_nodes : 1, SIM_GPUS_MAX * sizeof(*s->ledgers));
        s->node_of = calloc(c->n_nodes ? c->n_nodes : 1, sizeof(*s->node_of));
        if (!node_flavor || !s->nodes || !s->ledgers || !s->node_of) {
                free(node_flavor);
                return false;
        }
        tsr_cluster_flavors(c, pool, flavors, &nf, node_flavor);
        for (size_t i = 0; i < c->n_nodes; i++) {
                struct tsr_admit_node *an = &s->nodes[s->n];
                struct tsr_accel_ledger *l = &s->ledgers[s->n * SIM_GPUS_MAX];

                if (node_flavor[i] < 0 || tsr_cluster_ledger(c, i, l, NULL))
                        continue;
                an->name = c->nodes[i].name;
                an->present = true;
                an->flavor = (unsigned)node_flavor[i];
                an->caps = c->nodes[i].caps;
                an->ledger = l;
                an->n = c->nodes[i].gpu_count;
                s->node_of[s->n++] = i;
        }
        free(node_flavor);
        return true;
}

static void snapshot_release(struct snapshot *s)
{
        free(s->nodes);
        free(s->ledgers);
        free(s->node_of);
}

static int snapshot_index(const struct snapshot *s, size_t node)
{
        for (size_t k = 0; k < s->n; k++)
                if (s->node_of[k] == node)
                        return (int)k;
        return -1;
}

/* Whether Pod p's allocation record names every container that asks for an accelerator. */
static bool held(const struct sim_pod *p, const struct tsr_manufacturer *m)
{
        struct tsr_container_allocation alloc[TSR_ALLOC_CONTAINERS_MAX];
        struct tsr_pod_spec *spec;
        size_t na;
        bool all = true;

        if (tsr_cluster_pod_finished(p))
                return true;
        if (p->node < 0 ||
            tsr_cluster_pod_allocation(p, alloc, TSR_ALLOC_CONTAINERS_MAX, &na, NULL) ||
            tsr_pod_spec_new(p->obj, &spec, NULL))
                return false;
        for (size_t i = 0; i < spec->req.n && all; i++) {
                struct tsr_demand d;
                bool named = false;

                tsr_demand_of_container(&spec->req, i, m, &d);
                if (d.family == TSR_FAMILY_NONE)
                        continue;
                for (size_t a = 0; a < na; a++)
                        named |= !strcmp(alloc[a].container, spec->req.c[i].name);
                all = named;
        }
        free(spec);
        return all;
}

/* One Workload as the judge reads it. */
struct judged {
        struct tsr_admit_podset podsets[SIM_PODSETS_MAX];
        struct tsr_admit_placement *placements;
        struct tsr_admit_workload w;
};

/*
 * Fills j from w. For an inflight Workload (inflight true) each placement counts only the Pods of
 * that node not yet held. Returns false when out of memory.
 */
static bool judged_of(const struct tsr_cluster *c, const struct sim_workload *w,
                      const struct snapshot *s, const struct tsr_manufacturer *m, bool inflight,
                      struct judged *j)
{
        size_t total = 0, used = 0;

        for (size_t p = 0; p < w->n_podsets; p++)
                total += w->podsets[p].n_assign;
        j->placements = calloc(total ? total : 1, sizeof(*j->placements));
        if (!j->placements)
                return false;
        for (size_t p = 0; p < w->n_podsets; p++) {
                const struct sim_podset *ps = &w->podsets[p];
                struct tsr_admit_podset *ap = &j->podsets[p];
                struct tsr_pod_spec *spec;

                memset(ap, 0, sizeof(*ap));
                ap->name = ps->name;
                ap->count = ps->count;
                ap->flavor = ps->flavor < 0 ? TSR_ADMIT_NO_FLAVOR : (unsigned)ps->flavor;
                if (tsr_pod_spec_new(ps->tmpl, &spec, NULL) == 0) {
                        tsr_demand_of_pod(&spec->req, m, &ap->demand);
                        free(spec);
                }
                ap->placements = &j->placements[used];
                for (size_t a = 0; a < ps->n_assign; a++) {
                        int at = snapshot_index(s, ps->assign[a].node);
                        unsigned pods = ps->assign[a].count;

                        if (at < 0)
                                continue;
                        if (inflight) {
                                for (size_t k = 0; k < c->n_pods; k++) {
                                        const struct sim_pod *pod = &c->pods[k];

                                        if (pod->node == (int)ps->assign[a].node && pods > 0 &&
                                            !strcmp(pod->workload, w->name) &&
                                            !strcmp(pod->ns, w->ns) &&
                                            !strcmp(pod->podset, ps->name) && held(pod, m))
                                                pods--;
                                }
                        }
                        j->placements[used++] = (struct tsr_admit_placement){(size_t)at, pods};
                        ap->n_placements++;
                }
        }
        j->w.name = w->name;
        j->w.n_podsets = w->n_podsets;
        j->w.podsets = j->podsets;
        return true;
}

/* The pool of Workload w (its ClusterQueue's InstanceType), or NULL for a CPU pool. */
static bool pool_of(const struct tsr_cluster *c, const struct sim_workload *w, struct sim_pool *out)
{
        struct sim_pool pools[SIM_POOLS_MAX];
        size_t np;

        tsr_cluster_pools(c, pools, &np);
        for (size_t i = 0; i < np; i++) {
                if (strcmp(pools[i].name, w->cluster_queue) || !pools[i].product)
                        continue;
                *out = pools[i];
                return true;
        }
        return false;
}

/* The Workloads the check must count as inflight while judging w. */
static bool inflight(const struct sim_workload *o, const struct sim_workload *w)
{
        return o != w && o->reserved && !o->finished &&
               !strcmp(o->cluster_queue, w->cluster_queue) &&
               (o->admitted || (o->has_check && o->check == TSR_CHECK_READY));
}

static bool judge(struct tsr_cluster *c, struct sim_workload *w)
{
        struct sim_pool pool;
        struct snapshot s = {0};
        struct judged *mine = NULL, *others = NULL;
        struct tsr_admit_workload *list = NULL;
        struct tsr_admit_verdict v;
        const struct tsr_manufacturer *m;
        size_t n = 0;
        bool moved = false;

        if (!pool_of(c, w, &pool) || !build_snapshot(c, &pool, &s))
                goto out;
        m = tsr_catalog_manufacturer(pool.product->manufacturer);
        mine = calloc(1, sizeof(*mine));
        others = calloc(c->n_workloads ? c->n_workloads : 1, sizeof(*others));
        list = calloc(c->n_workloads ? c->n_workloads : 1, sizeof(*list));
        if (!mine || !others || !list || !judged_of(c, w, &s, m, false, mine))
                goto out;
        for (size_t k = 0; k < c->n_workloads; k++) {
                if (!inflight(&c->workloads[k], w))
                        continue;
                if (!judged_of(c, &c->workloads[k], &s, m, true, &others[n]))
                        goto out;
                list[n] = others[n].w;
                n++;
        }
        if (tsr_admit_judge(s.nodes, s.n, list, n, &mine->w, &v, NULL))
                goto out;
        if (v.state != w->check || strcmp(v.message, w->check_msg)) {
                if (v.state != w->check)
                        w->check_changed = c->now;
                w->check = v.state;
                snprintf(w->check_msg, sizeof(w->check_msg), "%s", v.message);
                moved = true;
        }
out:
        for (size_t k = 0; others && k < n; k++)
                free(others[k].placements);
        if (mine)
                free(mine->placements);
        free(mine);
        free(others);
        free(list);
        snapshot_release(&s);
        return moved;
}

bool sim_node_devices_check(struct tsr_cluster *c)
{
        bool moved = false;

        for (size_t k = 0; k < c->n_workloads; k++) {
                struct sim_workload *w = &c->workloads[k];

                if (!w->reserved || w->evicted || w->finished || w->admitted || !w->has_check)
                        continue;
                moved |= judge(c, w);
        }
        return moved;
}
