/*
 * kueue.c - the Kueue the simulator runs: its Pod integration (one Workload per queued Pod, or
 * per complete pod group), the scheduler that reserves quota (gate 2) and places every PodSet
 * with Topology-Aware Scheduling at hostname level, and the controller that admits a Workload
 * whose checks are Ready or evicts and requeues one whose check says Retry
 * (spec/kubernetes-contracts.md §3.8).
 *
 * Flavors are tried smallest per-node count first (spec/upstream-behavior.md §9). A PodSet fits a
 * flavor when the ClusterQueue's unused quota covers its credits (CPU for the generic pool) and
 * TAS can place every Pod: each node of the flavor hosts as many Pods as its allocatable minus
 * usage allows for every resource the Pod asks for, after its node affinity (the fit pin
 * included) selects it; usage is the requests of the unfinished Pods bound there plus the Pods
 * reserved Workloads were assigned there but are not bound yet. Queues are TAS-only without a
 * topology request, so the implied mode is unconstrained: nodes with the least free capacity
 * first, ties by name, which fills small gaps before opening a free node.
 */
#include "sim/actors.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/fnv.h"
#include "base/quantity.h"
#include "codec/admit_snapshot.h"
#include "codec/affinity.h"
#include "codec/kueue_chain.h"
#include "core/credits.h"
#include "core/pod_resources.h"
#include "core/tas.h"
#include "sim/resources.h"

#include <nettle/sha1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Workloads from Pods ------------------------------------------------------------------ */

/* Kueue's Workload name for a Pod: pod-<name>-<5 hex of SHA-1("Pod\n\n<name>\n<uid>")>. */
static void workload_name_for_pod(const struct sim_pod *p, char *out, size_t len)
{
        struct sha1_ctx ctx;
        uint8_t digest[SHA1_DIGEST_SIZE];

        sha1_init(&ctx);
        sha1_update(&ctx, 5, (const uint8_t *)"Pod\n\n");
        sha1_update(&ctx, strlen(p->name), (const uint8_t *)p->name);
        sha1_update(&ctx, 1, (const uint8_t *)"\n");
        sha1_update(&ctx, strlen(p->uid), (const uint8_t *)p->uid);
        sha1_digest(&ctx, sizeof(digest), digest);
        snprintf(out, len, "pod-%.*s-%02x%02x%x", (int)(len > 240 ? 240 : len), p->name, digest[0],
                 digest[1], digest[2] >> 4);
}

/* The Pod template of a PodSet: the Pod's labels, annotations and spec. */
static json_t *template_of(const struct sim_pod *p)
{
        json_t *meta = json_object_get(p->obj, "metadata");
        json_t *labels = json_object_get(meta, "labels");
        json_t *ann = json_object_get(meta, "annotations");

        return json_pack("{s:{s:O?, s:O?}, s:O}", "metadata", "labels", labels, "annotations", ann,
                         "spec", json_object_get(p->obj, "spec"));
}

/* A role name for a pod group's PodSet: 8 hex of FNV-1a-64 over the Pod spec's JSON. */
static void role_of(const struct sim_pod *p, char *out, size_t len)
{
        char *s = json_dumps(json_object_get(p->obj, "spec"), JSON_COMPACT | JSON_SORT_KEYS);

        snprintf(out, len, "%08llx",
                 (unsigned long long)(s ? tsr_fnv1a64_str(s) & 0xffffffffu : 0));
        free(s);
}

/* Names w as p's Workload. */
static void name_workload(struct tsr_cluster *c, struct sim_pod *p, const struct sim_workload *w,
                          const char *role)
{
        snprintf(p->workload, sizeof(p->workload), "%s", w->name);
        snprintf(p->podset, sizeof(p->podset), "%s", role);
        p->workload_at = (int)(w - c->workloads);
        c->membership_gen++;
}

/* Adds Pod p to w's PodSets (a new one for a new role). Returns false past SIM_PODSETS_MAX. */
static bool add_to_podset(struct tsr_cluster *c, struct sim_workload *w, struct sim_pod *p,
                          const char *role)
{
        size_t k;

        for (k = 0; k < w->n_podsets; k++)
                if (!strcmp(w->podsets[k].name, role))
                        break;
        if (k == w->n_podsets) {
                if (k >= SIM_PODSETS_MAX)
                        return false;
                snprintf(w->podsets[k].name, sizeof(w->podsets[k].name), "%s", role);
                w->podsets[k].tmpl = template_of(p);
                w->n_podsets++;
        }
        w->podsets[k].count++;
        name_workload(c, p, w, role);
        return true;
}

/* Creates the Workload of a single queued Pod. */
static bool create_single(struct tsr_cluster *c, size_t k)
{
        struct sim_workload *w = sim_workload_add(c);
        struct sim_pod *p = &c->pods[k];

        if (!w)
                return false;
        workload_name_for_pod(p, w->name, sizeof(w->name));
        snprintf(w->ns, sizeof(w->ns), "%s", p->ns);
        snprintf(w->queue, sizeof(w->queue), "%s", sim_pod_label(p, SIM_QUEUE_LABEL));
        add_to_podset(c, w, p, "main");
        sim_webhook_workload(c, w);
        return true;
}

/* The declared size of Pod p's group, or 0 when the annotation is missing or malformed. */
static unsigned group_total(const struct sim_pod *p)
{
        const char *v = json_string_value(json_object_get(
            json_object_get(json_object_get(p->obj, "metadata"), "annotations"), SIM_GROUP_COUNT));
        char *end;
        unsigned long n;

        if (!v)
                return 0;
        n = strtoul(v, &end, 10);
        return *end || n == 0 || n > 10000 ? 0 : (unsigned)n;
}

/* Creates the Workload of pod group g in namespace ns once all its Pods exist. */
static bool create_group(struct tsr_cluster *c, const char *ns, const char *g, unsigned total)
{
        struct sim_workload *w;
        unsigned have = 0;

        for (size_t k = 0; k < c->n_pods; k++) {
                const char *pg = sim_pod_label(&c->pods[k], SIM_GROUP_LABEL);

                have += pg && !strcmp(pg, g) && !strcmp(c->pods[k].ns, ns);
        }
        if (have < total)
                return false;
        w = sim_workload_add(c);
        if (!w)
                return false;
        snprintf(w->name, sizeof(w->name), "%s", g);
        snprintf(w->ns, sizeof(w->ns), "%s", ns);
        snprintf(w->group, sizeof(w->group), "%s", g);
        for (size_t k = 0; k < c->n_pods; k++) {
                struct sim_pod *p = &c->pods[k];
                const char *pg = sim_pod_label(p, SIM_GROUP_LABEL);
                char role[16];

                if (!pg || strcmp(pg, g) || strcmp(p->ns, ns))
                        continue;
                if (!w->queue[0])
                        snprintf(w->queue, sizeof(w->queue), "%s",
                                 sim_pod_label(p, SIM_QUEUE_LABEL));
                role_of(p, role, sizeof(role));
                if (!add_to_podset(c, w, p, role))
                        break;
        }
        sim_webhook_workload(c, w);
        return true;
}

/* The index in c->workloads of p's Workload, or -1. */
static ptrdiff_t workload_of(const struct sim_pod *p)
{
        return p->workload[0] ? p->workload_at : -1;
}

static bool member_of(const struct tsr_cluster *c, const struct sim_pod *p,
                      const struct sim_workload *w)
{
        return workload_of(p) == w - c->workloads;
}

static void ungate(struct sim_pod *p, const struct sim_workload *w, const char *node);

/* Unfinished members of w's PodSet ps that are bound to node i or ungated towards it. */
static unsigned sent_to(const struct tsr_cluster *c, const struct sim_workload *w,
                        const struct sim_podset *ps, size_t i)
{
        unsigned n = 0;

        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];
                const char *target = json_string_value(json_object_get(
                    json_object_get(json_object_get(p->obj, "spec"), "nodeSelector"),
                    TSR_CHAIN_HOSTNAME_LABEL));

                if (!member_of(c, p, w) || strcmp(p->podset, ps->name) ||
                    tsr_cluster_pod_finished(p))
                        continue;
                n += p->node == (int)i ||
                     (p->node < 0 && !p->gated && target && !strcmp(target, c->nodes[i].name));
        }
        return n;
}

/*
 * A Pod that joins a group created before it -- the replacement of a member that finished or was
 * deleted -- takes the missing member's place in its role (the PodSet count stays the group's
 * declared size), and when the Workload is admitted it goes where the missing one was assigned.
 * A Pod with no such place stays gated, with a message. Returns true when it joined.
 */
static bool join_group(struct tsr_cluster *c, struct sim_workload *w, size_t k)
{
        struct sim_pod *p = &c->pods[k];
        struct sim_podset *ps = NULL;
        char role[16];
        unsigned live = 0;

        role_of(p, role, sizeof(role));
        for (size_t s = 0; s < w->n_podsets; s++)
                if (!strcmp(w->podsets[s].name, role))
                        ps = &w->podsets[s];
        for (size_t q = 0; ps && q < c->n_pods; q++)
                live += member_of(c, &c->pods[q], w) && !strcmp(c->pods[q].podset, role) &&
                        !tsr_cluster_pod_finished(&c->pods[q]);
        if (!ps) {
                snprintf(p->message, sizeof(p->message),
                         "pod group %s has no role this Pod's spec matches", w->name);
                return false;
        }
        if (live >= ps->count) {
                snprintf(p->message, sizeof(p->message),
                         "pod group %s already has the %u Pods of this role it declared", w->name,
                         ps->count);
                return false;
        }
        name_workload(c, p, w, role);
        p->message[0] = '\0';
        for (size_t a = 0; w->admitted && !w->finished && a < ps->n_assign; a++) {
                if (sent_to(c, w, ps, ps->assign[a].node) < ps->assign[a].count) {
                        ungate(p, w, c->nodes[ps->assign[a].node].name);
                        break;
                }
        }
        return true;
}

static bool holds_quota(const struct sim_workload *w)
{
        return w->reserved && !w->finished;
}

static void quota_take(struct tsr_cluster *c, const struct sim_workload *w, int sign);

bool sim_kueue_sync(struct tsr_cluster *c)
{
        unsigned *members;
        bool moved = false;

        for (size_t k = 0; k < c->n_pods; k++) {
                struct sim_pod *p = &c->pods[k];
                const char *group;
                int w;

                if (p->workload[0] || !sim_pod_label(p, SIM_QUEUE_LABEL) ||
                    tsr_cluster_pod_finished(p))
                        continue;
                group = sim_pod_label(p, SIM_GROUP_LABEL);
                if (!group) {
                        moved |= create_single(c, k);
                        continue;
                }
                w = tsr_cluster_workload(c, p->ns, group);
                if (w >= 0)
                        moved |= join_group(c, &c->workloads[w], k);
                else if (group_total(p))
                        moved |= create_group(c, p->ns, group, group_total(p));
        }
        if (c->membership_gen == c->membership_seen)
                return moved; /* no Workload can have finished or emptied since the last count */
        /* members[3 * i]: Workload i's members, then those finished, then those failed */
        members = calloc(3 * c->n_workloads + 1, sizeof(*members));
        if (!members)
                return moved;
        c->membership_seen = c->membership_gen;
        for (size_t k = 0; k < c->n_pods; k++) {
                ptrdiff_t i = workload_of(&c->pods[k]);

                if (i < 0)
                        continue;
                members[3 * i]++;
                members[3 * i + 1] += tsr_cluster_pod_finished(&c->pods[k]);
                members[3 * i + 2] += c->pods[k].phase == SIM_FAILED;
        }
        /* descending: a removal moves only the Workloads already done */
        for (size_t i = c->n_workloads; i-- > 0;) {
                struct sim_workload *w = &c->workloads[i];
                unsigned done = members[3 * i + 1], failed = members[3 * i + 2];

                if (members[3 * i] == 0) {
                        if (holds_quota(w))
                                quota_take(c, w, -1);
                        sim_workload_remove(c, i);
                        moved = true;
                } else if (!w->finished && done == members[3 * i]) {
                        if (holds_quota(w))
                                quota_take(c, w, -1);
                        w->finished = true;
                        w->failed = failed > 0;
                        w->finished_at = c->now;
                        moved = true;
                }
        }
        free(members);
        return moved;
}

/* ---- node capacity and usage, as TAS counts them ------------------------------------------ */

/* The resources one Pod of a PodSet asks for (a new pod_resources; free()), or NULL. */
static struct pod_resources *podset_request(const struct sim_podset *ps)
{
        struct pod_resources *r = malloc(sizeof(*r));
        struct tsr_pod_spec *spec;

        if (!r)
                return NULL;
        if (tsr_pod_spec_new(ps->tmpl, &spec, NULL)) {
                free(r);
                return NULL;
        }
        pod_spec_resources(&spec->req, r);
        free(spec);
        return r;
}

/*
 * sim_kueue_tas_states (actors.h). The bound Pods are counted in one pass over the Pods:
 * bound[k] holds, for the k-th assignment of the Workloads holding quota (in Workload, PodSet,
 * assignment order), its members bound to the assigned node. A Workload seen with every
 * assigned Pod bound is marked (sim_workload.bound_all) and skipped from then on: a bound Pod
 * stays bound until it is deleted, which clears the mark (a Workload is only evicted, and so
 * only given a new assignment, before it is admitted: none of its Pods is bound then).
 */
struct sim_node_state *sim_kueue_tas_states(struct tsr_cluster *c)
{
        struct sim_node_state *ns = sim_node_states(c);
        size_t *first = malloc((c->n_workloads + 1) * sizeof(*first));
        unsigned *bound = NULL;
        size_t n_assign = 0, from = sim_workloads_from(c); /* at rest below: bound_all or done */

        if (!ns || !first)
                goto fail;
        for (size_t k = from; k < c->n_workloads; k++) {
                const struct sim_workload *w = &c->workloads[k];

                first[k] = n_assign;
                for (size_t s = 0; holds_quota(w) && !w->bound_all && s < w->n_podsets; s++)
                        n_assign += w->podsets[s].n_assign;
        }
        bound = calloc(n_assign + 1, sizeof(*bound));
        if (!bound)
                goto fail;
        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];
                ptrdiff_t i = p->node < 0 ? -1 : workload_of(p);
                const struct sim_workload *w = i < 0 ? NULL : &c->workloads[i];
                size_t at;

                if (!w || (size_t)i < from || !holds_quota(w) || w->bound_all)
                        continue;
                at = first[i];
                for (size_t s = 0; s < w->n_podsets; s++) {
                        const struct sim_podset *ps = &w->podsets[s];

                        for (size_t a = 0; a < ps->n_assign; a++, at++)
                                bound[at] += ps->assign[a].node == (size_t)p->node &&
                                             !strcmp(p->podset, ps->name);
                }
        }
        for (size_t k = from; k < c->n_workloads; k++) {
                struct sim_workload *w = &c->workloads[k];
                size_t at = first[k];
                bool all = true;

                if (!holds_quota(w) || w->bound_all)
                        continue;
                for (size_t s = 0; s < w->n_podsets; s++) {
                        const struct sim_podset *ps = &w->podsets[s];
                        struct pod_resources *req = NULL;

                        for (size_t a = 0; a < ps->n_assign; a++, at++) {
                                if (ps->assign[a].count <= bound[at])
                                        continue;
                                all = false;
                                /* out of memory (either): not charged */
                                if (!req && !(req = podset_request(ps)))
                                        continue;
                                sim_node_state_charge(&ns[ps->assign[a].node], req,
                                                      ps->assign[a].count - bound[at]);
                        }
                        free(req);
                }
                w->bound_all = all;
        }
        free(first);
        free(bound);
        return ns;
fail:
        free(first);
        free(bound);
        if (ns)
                sim_node_states_free(ns, c->n_nodes);
        return NULL;
}

/* ---- quota -------------------------------------------------------------------------------- */

/*
 * What one Pod of ps costs in the pool's quota resource: credits, or CPU milli-cores. The
 * template never changes: try_reserve keeps the cost per pool model (ps->quota_*) for the
 * quota sums that follow.
 */
static int64_t quota_per_pod(const struct tsr_chain_pool *pool, const struct sim_podset *ps)
{
        struct tsr_pod_spec *spec;
        int64_t v;

        if (ps->quota_known && ps->quota_product == pool->product)
                return ps->quota;
        if (tsr_pod_spec_new(ps->tmpl, &spec, NULL))
                return 0;
        v = pool->product ? tsr_credits_of_pod(
                                &spec->req, tsr_catalog_manufacturer(pool->product->manufacturer))
                          : tsr_pod_request(&spec->req, "cpu", true);
        free(spec);
        return v;
}

static void remember_quota(const struct tsr_chain_pool *pool, struct sim_podset *ps)
{
        ps->quota = quota_per_pod(pool, ps);
        ps->quota_product = pool->product;
        ps->quota_known = true;
}

static int64_t mul_sat(int64_t a, unsigned b)
{
        return b && a > INT64_MAX / b ? INT64_MAX : a * b;
}

/* Quota of flavor f of pool used by the Workloads that hold a reservation in it, counted now. */
static int64_t quota_counted(const struct tsr_cluster *c, const struct tsr_chain_pool *pool, int f)
{
        int64_t used = 0;

        for (size_t k = 0; k < c->n_workloads; k++) {
                const struct sim_workload *w = &c->workloads[k];

                if (!holds_quota(w) || strcmp(w->cluster_queue, pool->name))
                        continue;
                for (size_t s = 0; s < w->n_podsets; s++)
                        if (w->podsets[s].flavor == f)
                                used += mul_sat(quota_per_pod(pool, &w->podsets[s]),
                                                w->podsets[s].count);
        }
        return used;
}

/* The running sums of ClusterQueue cq, or NULL when the sums hold none. */
static const struct sim_quota_sum *quota_find(const struct tsr_cluster *c, const char *cq)
{
        for (size_t i = 0; i < c->n_quota; i++)
                if (!strcmp(c->quota[i].cluster_queue, cq))
                        return &c->quota[i];
        return NULL;
}

/*
 * The running sums of ClusterQueue cq (added when new), or NULL past TSR_CHAIN_POOLS_MAX or for a
 * name longer than the sums hold (then the callers count instead).
 */
static struct sim_quota_sum *quota_sum(struct tsr_cluster *c, const char *cq)
{
        const struct sim_quota_sum *found = quota_find(c, cq);
        size_t len = strlen(cq);
        struct sim_quota_sum *q;

        if (found)
                return &c->quota[found - c->quota];
        if (c->n_quota == TSR_CHAIN_POOLS_MAX || len >= sizeof(q->cluster_queue))
                return NULL;
        q = &c->quota[c->n_quota++];
        memset(q, 0, sizeof(*q));
        memcpy(q->cluster_queue, cq, len + 1);
        return q;
}

/* Recounts every ClusterQueue's sums from the Workloads (quota_counted's, per pool). */
static void quota_recount(struct tsr_cluster *c)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        size_t np;

        tsr_cluster_pools(c, pools, &np);
        c->n_quota = 0;
        c->quota_valid = true;
        for (size_t p = 0; p < np; p++) {
                struct sim_quota_sum *q = quota_sum(c, pools[p].name);

                if (!q) {
                        c->quota_valid = false;
                        return;
                }
                for (int f = 0; f < TSR_CHAIN_FLAVORS_MAX; f++)
                        q->used[f] = quota_counted(c, &pools[p], f);
        }
}

/*
 * Adds (sign 1) or takes back (-1) w's reserved quota in the running sums: each PodSet's cost
 * per Pod as try_reserve remembered it in its pool (what quota_counted reads) times its count.
 * Called while w holds its quota. A ClusterQueue the sums cannot hold drops them (recounted).
 */
static void quota_take(struct tsr_cluster *c, const struct sim_workload *w, int sign)
{
        struct sim_quota_sum *q;

        if (!c->quota_valid)
                return;
        q = quota_sum(c, w->cluster_queue);
        if (!q) {
                c->quota_valid = false;
                return;
        }
        for (size_t s = 0; s < w->n_podsets; s++) {
                const struct sim_podset *ps = &w->podsets[s];

                if (ps->flavor >= 0 && ps->flavor < TSR_CHAIN_FLAVORS_MAX)
                        q->used[ps->flavor] += sign * mul_sat(ps->quota, ps->count);
        }
}

/* Quota of flavor f of pool used by the Workloads that hold a reservation in it (kept). */
static int64_t quota_used(struct tsr_cluster *c, const struct tsr_chain_pool *pool, int f)
{
        const struct sim_quota_sum *q;

        if (!c->quota_valid)
                quota_recount(c);
        q = c->quota_valid ? quota_sum(c, pool->name) : NULL;
        return q && f >= 0 && f < TSR_CHAIN_FLAVORS_MAX ? q->used[f] : quota_counted(c, pool, f);
}

static void quota_name(const struct tsr_chain_pool *pool, char *out, size_t len)
{
        if (pool->product)
                tsr_credits_resource(tsr_catalog_manufacturer(pool->product->manufacturer), out,
                                     len);
        else
                snprintf(out, len, "cpu");
}

static void quantity_text(int64_t v, bool milli, char *out)
{
        struct tsr_quantity q = {v, milli ? -3 : 0, TSR_QF_DECIMAL_SI};

        tsr_quantity_format(&q, out);
}

int sim_kueue_check(const struct tsr_cluster *c, struct tsr_diag *diag)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        size_t np;

        tsr_cluster_pools(c, pools, &np);
        for (size_t p = 0; p < np; p++) {
                struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
                size_t nf;

                tsr_cluster_flavors(c, &pools[p], flavors, &nf, NULL);
                for (size_t f = 0; f < nf; f++) {
                        int64_t used = quota_counted(c, &pools[p], (int)f);
                        const struct sim_quota_sum *q =
                            c->quota_valid ? quota_find(c, pools[p].name) : NULL;

                        if (q && q->used[f] != used)
                                return tsr_diag_set(diag, TSR_ESTALE,
                                                    "flavor %s: %lld of quota kept reserved, "
                                                    "%lld counted",
                                                    flavors[f].name, (long long)q->used[f],
                                                    (long long)used);
                        if (used > flavors[f].nominal)
                                return tsr_diag_set(diag, TSR_ESTALE,
                                                    "flavor %s: %lld of %lld quota reserved",
                                                    flavors[f].name, (long long)used,
                                                    (long long)flavors[f].nominal);
                }
        }
        return 0;
}

/* ---- reservation -------------------------------------------------------------------------- */

struct attempt {
        const struct tsr_chain_pool *pool;
        struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
        size_t n_flavors;
        int *node_flavor;
        struct sim_node_state *nodes;
        /* what a failed attempt puts back: the usage of each node it charged, before */
        bool *saved;
        size_t *touched, n_touched;
        struct pod_resources **before; /* before[t]: node touched[t]'s charges; NULL: none */
        char why[1024];
};

/*
 * Keeps node i's usage the first time the attempt charges it: a copy of its charges, if it has
 * any. Returns false when out of memory.
 */
static bool attempt_save(struct attempt *a, size_t i)
{
        const struct pod_resources *charged = a->nodes[i].charged;
        struct pod_resources *copy = NULL;

        if (a->saved[i])
                return true;
        if (charged) {
                copy = malloc(sizeof(*copy));
                if (!copy)
                        return false;
                pod_resources_copy(copy, charged);
        }
        a->saved[i] = true;
        a->before[a->n_touched] = copy;
        a->touched[a->n_touched++] = i;
        return true;
}

/* Puts back every node the attempt charged, or (keep) just drops the copies. */
static void attempt_release(struct attempt *a, bool keep)
{
        for (size_t t = 0; t < a->n_touched; t++) {
                struct sim_node_state *s = &a->nodes[a->touched[t]];
                struct pod_resources *copy = a->before[t];

                if (!keep && copy)
                        pod_resources_copy(s->charged, copy);
                else if (!keep)
                        sim_node_state_uncharge(s);
                free(copy);
        }
        a->n_touched = 0;
}

/* Tries to place ps on flavor f by TAS; fills ps->assign and charges the nodes on success. */
static bool tas_place(const struct tsr_cluster *c, struct attempt *a, struct sim_podset *ps, int f,
                      const struct pod_resources *req, char *why, size_t len)
{
        struct tsr_tas_candidate *cand = malloc((c->n_nodes ? c->n_nodes : 1) * sizeof(*cand));
        struct tsr_tas_take *take = malloc((c->n_nodes ? c->n_nodes : 1) * sizeof(*take));
        unsigned total = 0, affinity = 0, in_flavor = 0, by_res = 0;
        const char *res_name = NULL;
        size_t n = 0, n_take;
        bool ok = false;

        if (!cand || !take) {
                snprintf(why, len, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < c->n_nodes; i++) {
                const char *short_of;
                unsigned fits;

                if (a->node_flavor[i] != f)
                        continue;
                in_flavor++;
                if (!tsr_affinity_matches(json_object_get(ps->tmpl, "spec"), c->nodes[i].name,
                                          a->nodes[i].labels)) {
                        affinity++;
                        continue;
                }
                fits = sim_node_state_fits(&a->nodes[i], req, &short_of);
                if (!fits) {
                        by_res++;
                        res_name = short_of;
                        continue;
                }
                total += fits;
                cand[n++] = (struct tsr_tas_candidate){i, c->nodes[i].name, fits};
        }
        if (!tsr_tas_assign(cand, n, ps->count, take, &n_take)) {
                struct tsr_chain_topology topology;
                size_t o;

                tsr_chain_topology(&topology);
                if (total)
                        o = (size_t)snprintf(why, len,
                                             "topology \"%s\" allows to fit only %u out of %u "
                                             "pod(s). Total nodes: %u",
                                             topology.name, total, ps->count, in_flavor);
                else
                        o = (size_t)snprintf(why, len,
                                             "topology \"%s\" doesn't allow to fit any of %u "
                                             "pod(s). Total nodes: %u",
                                             topology.name, ps->count, in_flavor);
                if (o < len && (affinity || by_res))
                        o += (size_t)snprintf(why + o, len - o, "; excluded: ");
                if (o < len && affinity)
                        o += (size_t)snprintf(why + o, len - o, "affinity: %u%s", affinity,
                                              by_res ? ", " : "");
                if (o < len && by_res)
                        snprintf(why + o, len - o, "resource \"%s\": %u", res_name, by_res);
                goto out;
        }
        ps->assign = calloc(n_take ? n_take : 1, sizeof(*ps->assign));
        if (!ps->assign) {
                snprintf(why, len, "out of memory");
                goto out;
        }
        ps->n_assign = 0;
        for (size_t x = 0; x < n_take; x++) {
                ps->assign[ps->n_assign++] = (struct sim_assignment){take[x].node, take[x].count};
                if (!attempt_save(a, take[x].node) ||
                    !sim_node_state_charge(&a->nodes[take[x].node], req, take[x].count)) {
                        /* the charges made stay until the attempt is put back or kept: out of
                         * memory, usage is overcounted, never under */
                        snprintf(why, len, "out of memory");
                        free(ps->assign);
                        ps->assign = NULL;
                        ps->n_assign = 0;
                        goto out;
                }
        }
        ok = true;
out:
        free(cand);
        free(take);
        return ok;
}

/* Tries to reserve quota for w with every node's usage in nodes; on failure w->pending says why. */
static bool try_reserve(struct tsr_cluster *c, struct sim_workload *w, struct sim_node_state *nodes)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        struct attempt a = {.nodes = nodes};
        int64_t tentative[TSR_CHAIN_FLAVORS_MAX] = {0};
        char qname[TSR_KEY_MAX], more[TSR_QUANTITY_STR_MAX];
        size_t np, s;
        bool ok = false;

        tsr_cluster_pools(c, pools, &np);
        a.pool = tsr_cluster_pool_by_entrance(pools, np, w->queue);
        if (!a.pool) {
                snprintf(w->pending, sizeof(w->pending), "LocalQueue %s doesn't exist", w->queue);
                return false;
        }
        a.node_flavor = malloc((c->n_nodes ? c->n_nodes : 1) * sizeof(*a.node_flavor));
        a.saved = calloc(c->n_nodes + 1, sizeof(*a.saved));
        a.touched = malloc((c->n_nodes + 1) * sizeof(*a.touched));
        a.before = malloc((c->n_nodes + 1) * sizeof(*a.before));
        if (!a.node_flavor || !a.saved || !a.touched || !a.before)
                goto out;
        tsr_cluster_flavors(c, a.pool, a.flavors, &a.n_flavors, a.node_flavor);
        quota_name(a.pool, qname, sizeof(qname));
        for (s = 0; s < w->n_podsets; s++) {
                struct sim_podset *ps = &w->podsets[s];
                struct pod_resources *req = podset_request(ps);
                int64_t need;

                remember_quota(a.pool, ps);
                need = mul_sat(ps->quota, ps->count);
                size_t o = 0;
                int chosen = -1;

                for (size_t f = 0; req && f < a.n_flavors && chosen < 0; f++) {
                        int64_t used = quota_used(c, a.pool, (int)f) + tentative[f];
                        char tas[512];

                        if (o && o < sizeof(a.why))
                                o += (size_t)snprintf(a.why + o, sizeof(a.why) - o, ", ");
                        if (need > a.flavors[f].nominal - used) {
                                quantity_text(need - (a.flavors[f].nominal - used),
                                              !a.pool->product, more);
                                if (o < sizeof(a.why))
                                        o += (size_t)snprintf(
                                            a.why + o, sizeof(a.why) - o,
                                            "insufficient unused quota for %s in flavor %s, %s "
                                            "more needed",
                                            qname, a.flavors[f].name, more);
                                continue;
                        }
                        if (!tas_place(c, &a, ps, (int)f, req, tas, sizeof(tas))) {
                                if (o < sizeof(a.why))
                                        o += (size_t)snprintf(a.why + o, sizeof(a.why) - o, "%s",
                                                              tas);
                                continue;
                        }
                        chosen = (int)f;
                        tentative[f] += need;
                }
                free(req);
                if (chosen < 0) {
                        if (!a.n_flavors)
                                snprintf(a.why, sizeof(a.why), "no flavor serves the queue");
                        snprintf(w->pending, sizeof(w->pending),
                                 "couldn't assign flavors to pod set %s: %s", ps->name, a.why);
                        break;
                }
                ps->flavor = chosen;
        }
        if (s < w->n_podsets) {
                for (size_t k = 0; k < w->n_podsets; k++) {
                        free(w->podsets[k].assign);
                        w->podsets[k].assign = NULL;
                        w->podsets[k].n_assign = 0;
                        w->podsets[k].flavor = -1;
                }
                attempt_release(&a, false);
                goto out;
        }
        w->reserved = true;
        w->reserved_at = c->now;
        snprintf(w->cluster_queue, sizeof(w->cluster_queue), "%s", a.pool->name);
        quota_take(c, w, 1);
        w->pending[0] = '\0';
        w->evicted = false; /* re-reserving quota clears the eviction */
        w->has_check = a.pool->product != NULL;
        w->check = TSR_CHECK_PENDING;
        ok = true;
out:
        if (a.before)
                attempt_release(&a, true);
        free(a.node_flavor);
        free(a.saved);
        free(a.touched);
        free(a.before);
        return ok;
}

bool sim_kueue_schedule(struct tsr_cluster *c)
{
        struct sim_node_state *nodes = NULL;
        bool moved = false;

        for (size_t k = sim_workloads_from(c); k < c->n_workloads; k++) {
                struct sim_workload *w = &c->workloads[k];

                if (w->reserved || w->finished || w->requeue_at > c->now)
                        continue;
                if (!nodes) {
                        nodes = sim_kueue_tas_states(c);
                        if (!nodes)
                                return false;
                }
                moved |= try_reserve(c, w, nodes);
        }
        sim_node_states_free(nodes, c->n_nodes);
        return moved;
}

/* ---- admission and eviction --------------------------------------------------------------- */

/* Removes Kueue's admission gate from Pod p and pins it to node name (the topology ungater). */
static void ungate(struct sim_pod *p, const struct sim_workload *w, const char *node)
{
        json_t *spec = json_object_get(p->obj, "spec");
        json_t *gates = json_object_get(spec, "schedulingGates");
        json_t *selector = json_object_get(spec, "nodeSelector");
        json_t *labels = json_object_get(json_object_get(p->obj, "metadata"), "labels");

        for (size_t g = json_array_size(gates); g-- > 0;) {
                const char *name =
                    json_string_value(json_object_get(json_array_get(gates, g), "name"));

                if (name && !strcmp(name, SIM_ADMISSION_GATE))
                        json_array_remove(gates, g);
        }
        if (gates && json_array_size(gates) == 0)
                json_object_del(spec, "schedulingGates");
        if (!json_is_object(selector)) {
                selector = json_object();
                json_object_set_new(spec, "nodeSelector", selector);
        }
        json_object_set_new(selector, TSR_CHAIN_HOSTNAME_LABEL, json_string(node));
        json_object_set_new(labels, TSR_KUEUE_PODSET_LABEL, json_string(p->podset));
        sim_pod_set_annotation(p->obj, TSR_KUEUE_WORKLOAD_ANNOTATION, w->name);
        p->gated = false;
}

static void admit(struct tsr_cluster *c, struct sim_workload *w)
{
        w->admitted = true;
        w->admitted_at = c->now;
        for (size_t s = 0; s < w->n_podsets; s++) {
                const struct sim_podset *ps = &w->podsets[s];
                size_t a = 0;
                unsigned used = 0;

                for (size_t k = 0; k < c->n_pods && a < ps->n_assign; k++) {
                        struct sim_pod *p = &c->pods[k];

                        if (!member_of(c, p, w) || strcmp(p->podset, ps->name) || !p->gated)
                                continue;
                        ungate(p, w, c->nodes[ps->assign[a].node].name);
                        if (++used == ps->assign[a].count) {
                                a++;
                                used = 0;
                        }
                }
        }
}

static void evict(struct tsr_cluster *c, struct sim_workload *w)
{
        snprintf(w->evicted_msg, sizeof(w->evicted_msg),
                 "Evicted due to AdmissionCheck in Retry state: \"%s\" (%s)",
                 TSR_KUEUE_NODE_DEVICES, w->check_msg);
        quota_take(c, w, -1);
        w->evicted = true;
        w->evicted_at = c->now;
        w->reserved = false;
        for (size_t s = 0; s < w->n_podsets; s++) {
                free(w->podsets[s].assign);
                w->podsets[s].assign = NULL;
                w->podsets[s].n_assign = 0;
                w->podsets[s].flavor = -1;
        }
        w->requeue_at = w->check_changed + SIM_RETRY_SECONDS;
        if (w->requeue_at <= c->now)
                w->requeue_at = c->now;
        snprintf(w->pending, sizeof(w->pending), "Workload is requeued after eviction");
        w->check = TSR_CHECK_PENDING;
        snprintf(w->check_msg, sizeof(w->check_msg),
                 "Reset to Pending after eviction. Previously: Retry");
        w->retry_count++;
}

bool sim_kueue_admit(struct tsr_cluster *c)
{
        bool moved = false;

        for (size_t k = sim_workloads_from(c); k < c->n_workloads; k++) {
                struct sim_workload *w = &c->workloads[k];

                if (!holds_quota(w) || w->admitted)
                        continue;
                if (!w->has_check || w->check == TSR_CHECK_READY) {
                        admit(c, w);
                        moved = true;
                } else if (w->check == TSR_CHECK_RETRY) {
                        evict(c, w);
                        moved = true;
                }
        }
        return moved;
}
