/*
 * node_devices.c - the `gpustack-node-devices` AdmissionCheck controller (gate 3), an adapter
 * over codec/admit_snapshot.h, which `tessera controller` calls too. Each pass lists, once per
 * ClusterQueue that has a Workload to judge (tsr_admit_snapshot_judges), in the snapshot's
 * neutral form, the nodes of its pool with the Pod objects bound to each (their ledgers from the
 * cluster's per-node memo) and the Workloads of the ClusterQueue with their PodSets and TAS
 * assignments, and keeps one snapshot for all of that queue's verdicts: a Workload answered Ready
 * is charged for those judged after it, exactly as a snapshot made afresh per verdict would read
 * it, and one that loses its Ready makes the snapshot anew (a charge is never taken back). Ledgers
 * and Pods do not move during a pass, and ClusterQueues do not share inflight Workloads, so
 * judging queue by queue in cluster order gives what judging Workload by Workload did. It writes
 * a verdict only when the state or message changes, with the transition time only when the state
 * does. It never preempts and never answers Rejected.
 */
#include "sim/actors.h"

#include "codec/admit_snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The cluster as the snapshot reads it, for one pool. Points into the cluster. */
struct view {
        struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX]; /* the pool's */
        size_t n_flavors;
        struct tsr_snapshot_node *nodes;
        size_t n_nodes;
        json_t **pods;     /* every bound Pod, grouped by node */
        size_t *pod_at;    /* pods[x] is c->pods[pod_at[x]] */
        const bool **held; /* held[i]: node i's memo (its Pods are pods[]'s), or NULL */
        size_t *end;       /* node i's Pods are pods[i ? end[i - 1] : 0 .. end[i]) */
        struct tsr_accel_ledger *ledgers; /* SIM_GPUS_MAX per node: tsr_cluster_ledger's */
        struct tsr_snapshot_workload *workloads;
        size_t n_workloads;
        struct tsr_snapshot_podset *podsets; /* SIM_PODSETS_MAX per Workload */
        struct tsr_snapshot_domain *domains;
        size_t *index; /* index[k]: cluster Workload k's entry in workloads, or SIZE_MAX */
};

static void view_release(struct view *v)
{
        free(v->nodes);
        free(v->pods);
        free(v->pod_at);
        free(v->held);
        free(v->end);
        free(v->ledgers);
        free(v->workloads);
        free(v->podsets);
        free(v->domains);
        free(v->index);
}

/* w's state, without its PodSets. */
static void state_of(const struct sim_workload *w, struct tsr_snapshot_workload *out)
{
        *out = (struct tsr_snapshot_workload){
            .ns = w->ns,
            .name = w->name,
            .cluster_queue = w->cluster_queue,
            .active = true,
            .reserved = w->reserved,
            .admitted = w->admitted,
            .evicted = w->evicted,
            .finished = w->finished,
            .has_check = w->has_check,
            .check = w->check,
            .check_message = w->check_msg,
        };
}

/* Lists the pool's nodes with the Pods bound to each. Returns false when out of memory. */
static bool view_nodes(const struct tsr_cluster *c, const struct tsr_chain_pool *pool,
                       struct view *v)
{
        size_t *end = v->end = calloc(c->n_nodes + 1, sizeof(*end));
        int *node_flavor = malloc((c->n_nodes ? c->n_nodes : 1) * sizeof(*node_flavor));
        bool ok = false;

        v->nodes = calloc(c->n_nodes ? c->n_nodes : 1, sizeof(*v->nodes));
        v->pods = malloc((c->n_pods ? c->n_pods : 1) * sizeof(*v->pods));
        v->pod_at = malloc((c->n_pods ? c->n_pods : 1) * sizeof(*v->pod_at));
        v->held = calloc(c->n_nodes + 1, sizeof(*v->held));
        v->ledgers = malloc((c->n_nodes ? c->n_nodes : 1) * SIM_GPUS_MAX * sizeof(*v->ledgers));
        if (!end || !node_flavor || !v->nodes || !v->pods || !v->pod_at || !v->held || !v->ledgers)
                goto out;
        /* node i's Pods (its list of bound Pods, in cluster order) end at end[i] */
        for (size_t i = 0, at = 0; i < c->n_nodes; i++) {
                for (size_t x = 0; x < c->nodes[i].n_bound; x++, at++) {
                        v->pod_at[at] = c->nodes[i].bound[x];
                        v->pods[at] = c->pods[c->nodes[i].bound[x]].obj;
                }
                end[i] = at;
        }
        tsr_cluster_flavors(c, pool, v->flavors, &v->n_flavors, node_flavor);
        for (size_t i = 0; i < c->n_nodes; i++) {
                const struct sim_node *n = &c->nodes[i];
                size_t first = i ? end[i - 1] : 0, n_held = 0;
                struct tsr_accel_ledger *l = &v->ledgers[i * SIM_GPUS_MAX];

                if (node_flavor[i] < 0)
                        continue;
                const bool *held = tsr_cluster_held(c, i, &n_held);

                /* The memo's ledger; a node whose ledger fails is left to the judge to report. */
                if (tsr_cluster_ledger(c, i, l, NULL))
                        l = NULL;
                if (held && n_held != end[i] - first)
                        held = NULL;
                v->held[i] = held;
                v->nodes[v->n_nodes++] = (struct tsr_snapshot_node){
                    .name = n->name,
                    .present = true,
                    .flavor = v->flavors[node_flavor[i]].name,
                    .product = n->product,
                    .caps = n->caps,
                    .n = n->gpu_count,
                    .pods = &v->pods[first],
                    .n_pods = end[i] - first,
                    .ledger = l,
                    .held = held,
                };
        }
        ok = true;
out:
        free(node_flavor);
        return ok;
}

/* Whether w's settled memo may be set or read: admitted and still holding its quota. */
static bool may_settle(const struct sim_workload *w)
{
        return w->admitted && w->reserved && !w->evicted;
}

/*
 * Marks settled every Workload that is admitted and, on every node TAS assigned it, has as many
 * of its Pods of that PodSet bound and held as the assignment counts (from the cluster's own
 * Workload references and the node memo's held states, no Pod object read). Such a Workload is
 * inflight, but the snapshot charges none of its Pods (a held Pod is in its node's ledger), so
 * it need not be listed: a pass then costs what is still moving, not every Workload that ran.
 * A Pod the cluster does not tie to the Workload, but whose object names it, could only make
 * the snapshot's held count larger, never a settled Workload's charge non-zero.
 *
 * The mark is a memo (sim_workload.settled): a held Pod stays held and bound until it is
 * deleted, so only a member's deletion (tsr_cluster_delete_pod) clears it (an eviction only
 * meets a Workload not admitted yet), and the Workloads marked already are not counted again. Out
 * of memory, nothing new is marked.
 */
static void mark_settled(struct tsr_cluster *c, const struct view *v)
{
        size_t *first = malloc((c->n_workloads + 1) * sizeof(*first));
        unsigned *missing = NULL; /* per assignment, in Workload, PodSet, assignment order */
        size_t n_assign = 0, from = sim_workloads_from(c); /* at rest below: settled or done */

        if (!first)
                return;
        for (size_t k = from; k < c->n_workloads; k++) {
                const struct sim_workload *w = &c->workloads[k];

                first[k] = n_assign;
                for (size_t s = 0; may_settle(w) && !w->settled && s < w->n_podsets; s++)
                        n_assign += w->podsets[s].n_assign;
        }
        missing = malloc((n_assign + 1) * sizeof(*missing));
        if (!missing) {
                free(first);
                return;
        }
        for (size_t k = from; k < c->n_workloads; k++) {
                const struct sim_workload *w = &c->workloads[k];
                size_t at = first[k];

                for (size_t s = 0; may_settle(w) && !w->settled && s < w->n_podsets; s++)
                        for (size_t a = 0; a < w->podsets[s].n_assign; a++)
                                missing[at++] = w->podsets[s].assign[a].count;
        }
        for (size_t i = 0; i < c->n_nodes; i++) {
                size_t start = i ? v->end[i - 1] : 0;

                for (size_t x = 0; v->held[i] && start + x < v->end[i]; x++) {
                        const struct sim_pod *p = &c->pods[v->pod_at[start + x]];
                        const struct sim_workload *w;
                        size_t at;

                        if (!v->held[i][x] || !p->workload[0] || p->workload_at < 0 ||
                            (size_t)p->workload_at < from)
                                continue;
                        w = &c->workloads[p->workload_at];
                        if (!may_settle(w) || w->settled)
                                continue;
                        at = first[p->workload_at];
                        for (size_t s = 0; s < w->n_podsets; at += w->podsets[s++].n_assign) {
                                const struct sim_podset *ps = &w->podsets[s];

                                if (strcmp(p->podset, ps->name))
                                        continue;
                                for (size_t a = 0; a < ps->n_assign; a++)
                                        if (ps->assign[a].node == i && missing[at + a]) {
                                                missing[at + a]--;
                                                break;
                                        }
                        }
                }
        }
        for (size_t k = from; k < c->n_workloads; k++) {
                struct sim_workload *w = &c->workloads[k];
                size_t end = k + 1 < c->n_workloads ? first[k + 1] : n_assign;
                bool settled = may_settle(w);

                if (w->settled || !settled)
                        continue;
                for (size_t at = first[k]; at < end; at++)
                        settled &= missing[at] == 0;
                w->settled = settled;
        }
        free(first);
        free(missing);
}

/* Whether the view lists o beside w: same ClusterQueue, and not settled. */
static bool listed(const struct sim_workload *o, const struct sim_workload *w)
{
        return !(o->settled && may_settle(o)) && !strcmp(o->cluster_queue, w->cluster_queue);
}

/*
 * Lists the Workloads of w's ClusterQueue (w among them) that are not settled (nor below the
 * watermark: sim_workloads_from), their flavor indexes read as the pool's flavor names, and where
 * each cluster Workload sits in the list. Returns false when out of memory.
 */
static bool view_workloads(struct tsr_cluster *c, const struct sim_workload *w, struct view *v)
{
        size_t n = 0, n_domains = 0, used = 0, from = sim_workloads_from(c);

        for (size_t k = from; k < c->n_workloads; k++) {
                const struct sim_workload *o = &c->workloads[k];

                if (!listed(o, w))
                        continue;
                n++;
                for (size_t p = 0; p < o->n_podsets; p++)
                        n_domains += o->podsets[p].n_assign;
        }
        v->workloads = calloc(n + 1, sizeof(*v->workloads));
        v->podsets = calloc(n * SIM_PODSETS_MAX + 1, sizeof(*v->podsets));
        v->domains = calloc(n_domains + 1, sizeof(*v->domains));
        v->index = malloc((c->n_workloads + 1) * sizeof(*v->index));
        if (!v->workloads || !v->podsets || !v->domains || !v->index)
                return false;
        for (size_t k = 0; k < from; k++)
                v->index[k] = SIZE_MAX; /* at rest: settled or finished, never listed */
        for (size_t k = from; k < c->n_workloads; k++) {
                const struct sim_workload *o = &c->workloads[k];
                struct tsr_snapshot_workload *sw = &v->workloads[v->n_workloads];
                struct tsr_snapshot_podset *sp = &v->podsets[v->n_workloads * SIM_PODSETS_MAX];

                v->index[k] = SIZE_MAX;
                if (!listed(o, w))
                        continue;
                v->index[k] = v->n_workloads;
                state_of(o, sw);
                sw->n_podsets = o->n_podsets;
                sw->podsets = sp;
                for (size_t p = 0; p < o->n_podsets; p++) {
                        const struct sim_podset *ps = &o->podsets[p];

                        sp[p] = (struct tsr_snapshot_podset){
                            .name = ps->name,
                            .count = ps->count,
                            .tmpl = ps->tmpl,
                            .flavor = ps->flavor >= 0 && (size_t)ps->flavor < v->n_flavors
                                          ? v->flavors[ps->flavor].name
                                          : NULL,
                            .n_domains = ps->n_assign,
                            .domains = &v->domains[used],
                        };
                        for (size_t a = 0; a < ps->n_assign; a++)
                                v->domains[used++] = (struct tsr_snapshot_domain){
                                    c->nodes[ps->assign[a].node].name, ps->assign[a].count};
                }
                v->n_workloads++;
        }
        return true;
}

/* The pool of Workload w (its ClusterQueue's InstanceType), or false for a CPU pool. */
static bool pool_of(const struct tsr_cluster *c, const struct sim_workload *w,
                    struct tsr_chain_pool *out)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
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

/* Writes verdict on w (and its view entry e); returns whether it moved anything. */
static bool record(const struct tsr_cluster *c, struct sim_workload *w,
                   struct tsr_snapshot_workload *e, const struct tsr_admit_verdict *verdict)
{
        if (verdict->state == w->check && !strcmp(verdict->message, w->check_msg))
                return false;
        if (verdict->state != w->check)
                w->check_changed = c->now;
        w->check = verdict->state;
        snprintf(w->check_msg, sizeof(w->check_msg), "%s", verdict->message);
        e->check = w->check; /* e->check_message is w->check_msg */
        return true;
}

/*
 * Judges every Workload of first's ClusterQueue the check judges, first and after, in cluster
 * order, through one snapshot of the pool: a Workload answered Ready is charged for the next
 * ones, as a fresh snapshot would; one that loses its Ready makes the snapshot anew. Marks each
 * one judged in done.
 */
static bool judge_queue(struct tsr_cluster *c, size_t first, bool *done)
{
        struct sim_workload *w0 = &c->workloads[first];
        struct tsr_chain_pool pool;
        struct tsr_admit_snapshot *snap = NULL;
        struct view v = {0};
        bool moved = false, have_pool = pool_of(c, w0, &pool);
        bool viewed = have_pool && view_nodes(c, &pool, &v);

        if (viewed)
                mark_settled(c, &v);
        viewed = viewed && view_workloads(c, w0, &v);

        for (size_t k = first; k < c->n_workloads; k++) {
                struct sim_workload *w = &c->workloads[k];
                struct tsr_snapshot_workload state, *e;
                struct tsr_admit_verdict verdict;
                bool was_ready;

                state_of(w, &state);
                if (!tsr_admit_snapshot_judges(&state) ||
                    strcmp(w->cluster_queue, w0->cluster_queue))
                        continue;
                done[k] = true;
                if (!viewed)
                        continue;
                e = &v.workloads[v.index[k]];
                if (!snap && tsr_admit_snapshot_new(pool.product, v.nodes, v.n_nodes, v.workloads,
                                                    v.n_workloads, w0->cluster_queue, &snap, NULL))
                        continue;
                if (tsr_admit_snapshot_verdict(snap, e, &verdict, NULL))
                        continue;
                was_ready = w->has_check && w->check == TSR_CHECK_READY;
                if (!record(c, w, e, &verdict))
                        continue;
                moved = true;
                if (was_ready) { /* its charge cannot be taken back */
                        tsr_admit_snapshot_free(snap);
                        snap = NULL;
                } else if (verdict.state == TSR_CHECK_READY &&
                           tsr_admit_snapshot_charge(snap, e, NULL)) {
                        tsr_admit_snapshot_free(snap);
                        snap = NULL;
                }
        }
        tsr_admit_snapshot_free(snap);
        view_release(&v);
        return moved;
}

bool sim_node_devices_check(struct tsr_cluster *c)
{
        bool *done = calloc(c->n_workloads + 1, sizeof(*done));
        bool moved = false;

        if (!done)
                return false;
        for (size_t k = sim_workloads_from(c); k < c->n_workloads; k++) {
                struct tsr_snapshot_workload state;

                if (done[k])
                        continue;
                state_of(&c->workloads[k], &state);
                if (tsr_admit_snapshot_judges(&state))
                        moved |= judge_queue(c, k, done);
        }
        free(done);
        return moved;
}
