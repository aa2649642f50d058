/*
 * admit_snapshot.c - gate 3's snapshot: each node's ledger from its Pods, the inflight
 * Workloads less the Pods already held, hostnames and flavor names turned into the indexes
 * core/admit.h reads, then its verdict.
 */
#include "codec/admit_snapshot.h"

#include "base/diag.h"
#include "base/err.h"
#include "codec/alloc_annotation.h"
#include "codec/pod_spec.h"
#include "core/demand.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS_FIRST 256

static const char *meta_str(json_t *obj, const char *key)
{
        const char *v = json_string_value(json_object_get(json_object_get(obj, "metadata"), key));

        return v ? v : "";
}

/* Appends one Pod's records to *recs (*cap of them), doubling it up to the ceiling. */
static int add_records(const struct tsr_container_allocation *alloc, size_t na,
                       const struct tsr_product *p, bool finished, struct tsr_alloc_record **recs,
                       size_t *cap, size_t *nrec)
{
        size_t before = *nrec;

        while (tsr_alloc_annotation_records(alloc, na, p, finished, *recs, *cap, nrec)) {
                struct tsr_alloc_record *grown;

                *nrec = before;
                if (*cap >= TSR_ADMIT_SNAPSHOT_RECORDS_MAX)
                        return TSR_ETOOBIG;
                grown = realloc(*recs, 2 * *cap * sizeof(**recs));
                if (!grown)
                        return TSR_ENOMEM;
                *recs = grown;
                *cap *= 2;
        }
        return 0;
}

int tsr_admit_snapshot_ledger(const struct tsr_snapshot_node *node, struct tsr_accel_ledger *out,
                              struct tsr_diag *diag)
{
        struct tsr_container_allocation *alloc;
        struct tsr_alloc_record *recs;
        size_t nrec = 0, cap = RECORDS_FIRST;
        int rc = 0;

        for (size_t g = 0; g < node->n; g++)
                tsr_ledger_reset(&out[g]);
        if (!node->product)
                return 0;
        alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*alloc));
        recs = malloc(cap * sizeof(*recs));
        if (!alloc || !recs) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        for (size_t k = 0; k < node->n_pods && !rc; k++) {
                json_t *pod = node->pods[k];
                struct tsr_diag why;
                size_t na;

                tsr_diag_clear(&why);
                rc = tsr_alloc_annotation_of_pod(pod, alloc, TSR_ALLOC_CONTAINERS_MAX, &na, &why);
                if (rc) {
                        tsr_diag_set(diag, rc, "Pod %s/%s: %s", meta_str(pod, "namespace"),
                                     meta_str(pod, "name"), why.msg);
                        break;
                }
                rc = add_records(alloc, na, node->product, tsr_pod_finished(pod), &recs, &cap,
                                 &nrec);
                if (rc == TSR_ETOOBIG)
                        tsr_diag_set(diag, rc, "more than %d allocation records",
                                     TSR_ADMIT_SNAPSHOT_RECORDS_MAX);
                else if (rc)
                        tsr_diag_set(diag, rc, "out of memory");
        }
        if (!rc)
                rc = tsr_ledger_build(node->caps, node->n, recs, nrec, out, diag);
out:
        free(alloc);
        free(recs);
        return rc;
}

bool tsr_admit_snapshot_judges(const struct tsr_snapshot_workload *w)
{
        return w->active && w->reserved && w->has_check && !w->evicted && !w->finished &&
               !w->admitted;
}

/* Whether o is inflight in cluster_queue (a Workload judged is never inflight to itself). */
static bool inflight(const struct tsr_snapshot_workload *o, const char *cluster_queue)
{
        return o->reserved && !o->finished && !strcmp(o->cluster_queue, cluster_queue) &&
               (o->admitted || (o->has_check && o->check == TSR_CHECK_READY));
}

/* What makes a Pod a member of a PodSet: its namespace, Workload annotation and PodSet label. */
struct pod_key {
        const char *ns, *workload, *podset; /* NULL when the Pod lacks one */
};

static struct pod_key pod_key_of(json_t *pod)
{
        json_t *meta = json_object_get(pod, "metadata");

        return (struct pod_key){
            json_string_value(json_object_get(meta, "namespace")),
            json_string_value(json_object_get(json_object_get(meta, "annotations"),
                                              TSR_KUEUE_WORKLOAD_ANNOTATION)),
            json_string_value(
                json_object_get(json_object_get(meta, "labels"), TSR_KUEUE_PODSET_LABEL)),
        };
}

/* Whether the Pod of key belongs to PodSet podset of w. */
static bool member(const struct pod_key *key, const struct tsr_snapshot_workload *w,
                   const char *podset)
{
        return key->workload && key->ns && key->podset && !strcmp(key->workload, w->name) &&
               !strcmp(key->ns, w->ns) && !strcmp(key->podset, podset);
}

/* tsr_admit_snapshot_held, decoding into alloc (TSR_ALLOC_CONTAINERS_MAX entries). */
static bool held_into(json_t *pod, const struct tsr_manufacturer *m,
                      struct tsr_container_allocation *alloc)
{
        struct tsr_pod_spec *spec;
        size_t na;
        bool all = true;

        if (tsr_pod_finished(pod))
                return true;
        if (tsr_alloc_annotation_of_pod(pod, alloc, TSR_ALLOC_CONTAINERS_MAX, &na, NULL) ||
            tsr_pod_spec_new(pod, &spec, NULL))
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

bool tsr_admit_snapshot_held(json_t *pod, const struct tsr_manufacturer *m)
{
        struct tsr_container_allocation *alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*alloc));
        bool held = alloc && held_into(pod, m, alloc);

        free(alloc);
        return held;
}

/* The snapshot in core/admit.h's terms: the pool, and what names resolve against. */
struct tsr_admit_snapshot {
        const struct tsr_product *product;
        const struct tsr_manufacturer *m;
        const struct tsr_snapshot_node *nodes; /* borrowed; pool index k is nodes[k] */
        size_t n_nodes;
        const struct tsr_snapshot_workload *workloads; /* borrowed, for a charged target */
        size_t n_workloads;
        const struct tsr_snapshot_node **by_name; /* nodes sorted by name */
        const char **flavors; /* distinct flavor names of the nodes; index = flavor */
        size_t n_flavors;
        char **gone; /* hostnames no listed node carries, owned; pool index n_nodes + i */
        size_t n_gone;
        bool *listed_charged; /* listed_charged[i]: workloads[i] is charged */
        const struct tsr_snapshot_workload **charged; /* borrowed, those not listed */
        size_t n_charged;
        struct tsr_admit_pool *pool;
        struct pod_key **keys; /* keys[k]: node k's Pods' keys, read the first time they count */
        struct tsr_container_allocation *alloc; /* held_into's scratch, allocated when first used */
};

/* The keys of node k's Pods, read once per snapshot; NULL when out of memory. */
static const struct pod_key *node_keys(struct tsr_admit_snapshot *s, size_t k)
{
        const struct tsr_snapshot_node *n = &s->nodes[k];

        if (s->keys[k])
                return s->keys[k];
        s->keys[k] = malloc((n->n_pods + 1) * sizeof(**s->keys));
        for (size_t x = 0; s->keys[k] && x < n->n_pods; x++)
                s->keys[k][x] = pod_key_of(n->pods[x]);
        return s->keys[k];
}

/* Whether Pod x of node k is held: the caller's memo, else read here. */
static bool snapshot_held(struct tsr_admit_snapshot *s, size_t k, size_t x)
{
        const struct tsr_snapshot_node *n = &s->nodes[k];

        if (n->held)
                return n->held[x];
        if (!s->alloc && !(s->alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*s->alloc))))
                return false; /* not held: charged, as an unreadable record is */
        return held_into(n->pods[x], s->m, s->alloc);
}

static int by_name(const void *a, const void *b)
{
        return strcmp((*(const struct tsr_snapshot_node *const *)a)->name,
                      (*(const struct tsr_snapshot_node *const *)b)->name);
}

static int name_is(const void *key, const void *node)
{
        return strcmp(key, (*(const struct tsr_snapshot_node *const *)node)->name);
}

/* Whether hostname is a listed node; *out its pool index when it is. */
static bool listed_index(const struct tsr_admit_snapshot *s, const char *hostname, size_t *out)
{
        const struct tsr_snapshot_node *const *at =
            bsearch(hostname, s->by_name, s->n_nodes, sizeof(*s->by_name), name_is);

        if (at)
                *out = (size_t)(*at - s->nodes);
        return at != NULL;
}

/* The pool index of hostname, adding a gone node the first time a hostname is unknown. */
static int node_index(struct tsr_admit_snapshot *s, const char *hostname, size_t *out,
                      struct tsr_diag *diag)
{
        struct tsr_admit_node gone = {.present = false, .flavor = TSR_ADMIT_NO_FLAVOR};
        char **grown;

        if (listed_index(s, hostname, out))
                return 0;
        for (size_t i = 0; i < s->n_gone; i++)
                if (!strcmp(s->gone[i], hostname)) {
                        *out = s->n_nodes + i;
                        return 0;
                }
        grown = realloc(s->gone, (s->n_gone + 1) * sizeof(*s->gone));
        if (!grown)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        s->gone = grown;
        if (!(s->gone[s->n_gone] = strdup(hostname)))
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        gone.name = s->gone[s->n_gone++];
        return tsr_admit_pool_add(s->pool, &gone, out, diag);
}

/* The index of flavor name; a name no node carries gets s->n_flavors, which serves nothing. */
static unsigned flavor_index(const struct tsr_admit_snapshot *s, const char *name)
{
        size_t f = 0;

        if (!name)
                return TSR_ADMIT_NO_FLAVOR;
        while (f < s->n_flavors && strcmp(s->flavors[f], name))
                f++;
        return (unsigned)f;
}

/* Makes the pool from every node's ledger (the caller's memo, or rebuilt here). */
static int build_pool(struct tsr_admit_snapshot *s, struct tsr_diag *diag)
{
        struct tsr_admit_node *anodes = malloc((s->n_nodes + 1) * sizeof(*anodes));
        struct tsr_accel_ledger *ledgers;
        size_t n_accels = 0, used = 0;
        int rc = 0;

        for (size_t k = 0; k < s->n_nodes; k++)
                n_accels += s->nodes[k].ledger ? 0 : s->nodes[k].n;
        ledgers = malloc((n_accels + 1) * sizeof(*ledgers));
        if (!anodes || !ledgers) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        for (size_t k = 0; k < s->n_nodes && !rc; k++) {
                const struct tsr_snapshot_node *sn = &s->nodes[k];
                const struct tsr_accel_ledger *l = sn->ledger;
                unsigned f = flavor_index(s, sn->flavor);
                struct tsr_diag why;

                if (!l) {
                        tsr_diag_clear(&why);
                        rc = tsr_admit_snapshot_ledger(sn, &ledgers[used], &why);
                        if (rc)
                                rc = tsr_diag_set(diag, rc, "node %s: %s", sn->name, why.msg);
                        l = &ledgers[used];
                        used += sn->n;
                }
                if (sn->flavor && f == s->n_flavors)
                        s->flavors[s->n_flavors++] = sn->flavor;
                anodes[k] = (struct tsr_admit_node){
                    .name = sn->name,
                    .present = sn->present,
                    .flavor = f,
                    .caps = sn->caps,
                    .ledger = l,
                    .n = sn->n,
                };
                s->by_name[k] = sn;
        }
        qsort(s->by_name, s->n_nodes, sizeof(*s->by_name), by_name);
        if (!rc)
                rc = tsr_admit_pool_new(anodes, s->n_nodes, &s->pool, diag);
out:
        free(anodes);
        free(ledgers);
        return rc;
}

static size_t domains_of(const struct tsr_snapshot_workload *w)
{
        size_t n = 0;

        for (size_t p = 0; p < w->n_podsets; p++)
                n += w->podsets[p].n_domains;
        return n;
}

/* w in core/admit.h's terms, in arrays of its own (admit_workload_release frees them). */
struct admit_workload {
        struct tsr_admit_workload w;
        struct tsr_admit_podset *podsets;
        struct tsr_admit_placement *placements;
};

static void admit_workload_release(struct admit_workload *aw)
{
        free(aw->podsets);
        free(aw->placements);
}

/*
 * Reads w into *out. For an inflight Workload (charge) each domain counts only the Pods on its
 * node that are not held yet.
 */
static int admit_workload(struct tsr_admit_snapshot *s, const struct tsr_snapshot_workload *w,
                          bool charge, struct admit_workload *out, struct tsr_diag *diag)
{
        size_t n_placements = 0;

        out->podsets = calloc(w->n_podsets + 1, sizeof(*out->podsets));
        out->placements = malloc((domains_of(w) + 1) * sizeof(*out->placements));
        if (!out->podsets || !out->placements)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        for (size_t p = 0; p < w->n_podsets; p++) {
                const struct tsr_snapshot_podset *ps = &w->podsets[p];
                struct tsr_admit_podset *ap = &out->podsets[p];
                struct tsr_pod_spec *spec;
                struct tsr_diag why;
                unsigned unheld = 0;
                int rc;

                ap->name = ps->name;
                ap->count = ps->count;
                ap->flavor = flavor_index(s, ps->flavor);
                ap->placements = &out->placements[n_placements];
                for (size_t d = 0; d < ps->n_domains; d++) {
                        unsigned pods = ps->domains[d].pods;
                        size_t k;

                        /* A charge on a node the snapshot does not list would land on a gone
                         * node, which serves nothing and so holds no charge: it is left out,
                         * and a Workload charged nowhere else is not even read. */
                        if (charge && !listed_index(s, ps->domains[d].node, &k))
                                continue;
                        rc = charge ? 0 : node_index(s, ps->domains[d].node, &k, diag);
                        if (rc)
                                return rc;
                        const struct pod_key *keys =
                            charge && pods > 0 && k < s->n_nodes ? node_keys(s, k) : NULL;

                        if (charge && pods > 0 && k < s->n_nodes && !keys)
                                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                        for (size_t x = 0; keys && pods > 0 && x < s->nodes[k].n_pods; x++)
                                if (member(&keys[x], w, ps->name) && snapshot_held(s, k, x))
                                        pods--;
                        out->placements[n_placements++] = (struct tsr_admit_placement){k, pods};
                        ap->n_placements++;
                        unheld += pods;
                }
                /* A charge whose Pods are all held places nothing: its demand is not read. */
                if (charge && !unheld)
                        continue;
                tsr_diag_clear(&why);
                rc = tsr_pod_spec_new(ps->tmpl, &spec, &why);
                if (rc)
                        return tsr_diag_set(diag, rc, "Workload %s/%s PodSet %s: %s", w->ns,
                                            w->name, ps->name, why.msg);
                tsr_demand_of_pod(&spec->req, s->m, &ap->demand);
                free(spec);
        }
        out->w = (struct tsr_admit_workload){w->name, w->n_podsets, out->podsets};
        return 0;
}

void tsr_admit_snapshot_free(struct tsr_admit_snapshot *s)
{
        if (!s)
                return;
        tsr_admit_pool_free(s->pool);
        for (size_t i = 0; i < s->n_gone; i++)
                free(s->gone[i]);
        free(s->gone);
        free(s->by_name);
        free(s->flavors);
        for (size_t k = 0; s->keys && k < s->n_nodes; k++)
                free(s->keys[k]);
        free(s->keys);
        free(s->charged);
        free(s->listed_charged);
        free(s->alloc);
        free(s);
}

static bool same_workload(const struct tsr_snapshot_workload *a,
                          const struct tsr_snapshot_workload *b)
{
        return !strcmp(a->ns, b->ns) && !strcmp(a->name, b->name);
}

/*
 * Where w's charge is marked: its flag when w points into the listed Workloads (compared as
 * addresses: w may point anywhere), else NULL.
 */
static bool *listed_flag(const struct tsr_admit_snapshot *s, const struct tsr_snapshot_workload *w)
{
        uintptr_t at = (uintptr_t)w, lo = (uintptr_t)s->workloads;

        if (!s->n_workloads || at < lo || at >= lo + s->n_workloads * sizeof(*w) ||
            (at - lo) % sizeof(*w))
                return NULL;
        return &s->listed_charged[(at - lo) / sizeof(*w)];
}

static bool is_charged(const struct tsr_admit_snapshot *s, const struct tsr_snapshot_workload *w)
{
        for (size_t i = 0; i < s->n_charged; i++)
                if (same_workload(s->charged[i], w))
                        return true;
        for (size_t i = 0; i < s->n_workloads; i++)
                if (s->listed_charged[i] && same_workload(&s->workloads[i], w))
                        return true;
        return false;
}

/* Charges w and marks it, without asking whether it was charged before. */
static int charge(struct tsr_admit_snapshot *s, const struct tsr_snapshot_workload *w,
                  struct tsr_diag *diag)
{
        struct admit_workload aw = {0};
        bool *flag = listed_flag(s, w);
        int rc = 0;

        if (!flag) {
                const struct tsr_snapshot_workload **grown =
                    realloc(s->charged, (s->n_charged + 1) * sizeof(*s->charged));

                if (!grown)
                        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                s->charged = grown;
        }
        rc = admit_workload(s, w, true, &aw, diag);
        if (!rc)
                rc = tsr_admit_pool_charge(s->pool, &aw.w, diag);
        if (!rc && flag)
                *flag = true;
        else if (!rc)
                s->charged[s->n_charged++] = w;
        admit_workload_release(&aw);
        return rc;
}

int tsr_admit_snapshot_charge(struct tsr_admit_snapshot *s, const struct tsr_snapshot_workload *w,
                              struct tsr_diag *diag)
{
        const bool *flag = listed_flag(s, w);

        if (flag ? *flag : is_charged(s, w))
                return 0;
        return charge(s, w, diag);
}

/* The snapshot with every Workload inflight in cluster_queue charged, skip (if any) left out. */
static int snapshot_open(const struct tsr_product *product, const struct tsr_snapshot_node *nodes,
                         size_t n_nodes, const struct tsr_snapshot_workload *workloads,
                         size_t n_workloads, const char *cluster_queue,
                         const struct tsr_snapshot_workload *skip, struct tsr_admit_snapshot **out,
                         struct tsr_diag *diag)
{
        struct tsr_admit_snapshot *s;
        int rc;

        if (!product)
                return tsr_diag_set(diag, TSR_EINVAL, "the pool has no accelerator model");
        s = calloc(1, sizeof(*s));
        if (!s)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        *s = (struct tsr_admit_snapshot){
            .product = product,
            .m = tsr_catalog_manufacturer(product->manufacturer),
            .nodes = nodes,
            .n_nodes = n_nodes,
            .workloads = workloads,
            .n_workloads = n_workloads,
        };
        s->by_name = malloc((n_nodes + 1) * sizeof(*s->by_name));
        s->flavors = malloc((n_nodes + 1) * sizeof(*s->flavors));
        s->listed_charged = calloc(n_workloads + 1, sizeof(*s->listed_charged));
        s->keys = calloc(n_nodes + 1, sizeof(*s->keys));
        rc = !s->by_name || !s->flavors || !s->listed_charged || !s->keys
                 ? tsr_diag_set(diag, TSR_ENOMEM, "out of memory")
                 : build_pool(s, diag);
        for (size_t i = 0; i < n_workloads && !rc; i++)
                if (inflight(&workloads[i], cluster_queue) &&
                    !(skip && same_workload(&workloads[i], skip)))
                        rc = charge(s, &workloads[i], diag);
        if (rc) {
                tsr_admit_snapshot_free(s);
                return rc;
        }
        *out = s;
        return 0;
}

int tsr_admit_snapshot_new(const struct tsr_product *product, const struct tsr_snapshot_node *nodes,
                           size_t n_nodes, const struct tsr_snapshot_workload *workloads,
                           size_t n_workloads, const char *cluster_queue,
                           struct tsr_admit_snapshot **out, struct tsr_diag *diag)
{
        return snapshot_open(product, nodes, n_nodes, workloads, n_workloads, cluster_queue, NULL,
                             out, diag);
}

int tsr_admit_snapshot_verdict(struct tsr_admit_snapshot *s,
                               const struct tsr_snapshot_workload *target,
                               struct tsr_admit_verdict *out, struct tsr_diag *diag)
{
        struct admit_workload aw = {0};
        int rc;

        const bool *flag = listed_flag(s, target);

        if (flag ? *flag : is_charged(s, target))
                return tsr_admit_snapshot_judge(s->product, s->nodes, s->n_nodes, s->workloads,
                                                s->n_workloads, target, out, diag);
        rc = admit_workload(s, target, false, &aw, diag);
        if (!rc)
                rc = tsr_admit_pool_judge(s->pool, &aw.w, out, diag);
        admit_workload_release(&aw);
        return rc;
}

int tsr_admit_snapshot_judge(const struct tsr_product *product,
                             const struct tsr_snapshot_node *nodes, size_t n_nodes,
                             const struct tsr_snapshot_workload *workloads, size_t n_workloads,
                             const struct tsr_snapshot_workload *target,
                             struct tsr_admit_verdict *out, struct tsr_diag *diag)
{
        struct tsr_admit_snapshot *s = NULL;
        struct admit_workload aw = {0};
        int rc = snapshot_open(product, nodes, n_nodes, workloads, n_workloads,
                               target->cluster_queue, target, &s, diag);

        if (!rc)
                rc = admit_workload(s, target, false, &aw, diag);
        if (!rc)
                rc = tsr_admit_pool_judge(s->pool, &aw.w, out, diag);
        admit_workload_release(&aw);
        tsr_admit_snapshot_free(s);
        return rc;
}
