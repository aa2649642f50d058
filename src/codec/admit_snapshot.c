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

/* Whether o is inflight while w is judged. */
static bool inflight(const struct tsr_snapshot_workload *o, const struct tsr_snapshot_workload *w)
{
        return (strcmp(o->ns, w->ns) || strcmp(o->name, w->name)) && o->reserved && !o->finished &&
               !strcmp(o->cluster_queue, w->cluster_queue) &&
               (o->admitted || (o->has_check && o->check == TSR_CHECK_READY));
}

/* Whether pod belongs to PodSet podset of w. */
static bool member(json_t *pod, const struct tsr_snapshot_workload *w, const char *podset)
{
        json_t *meta = json_object_get(pod, "metadata");
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        const char *wl = json_string_value(
            json_object_get(json_object_get(meta, "annotations"), TSR_KUEUE_WORKLOAD_ANNOTATION));
        const char *ps = json_string_value(
            json_object_get(json_object_get(meta, "labels"), TSR_KUEUE_PODSET_LABEL));

        return ns && wl && ps && !strcmp(ns, w->ns) && !strcmp(wl, w->name) && !strcmp(ps, podset);
}

/* Whether pod's allocation record names every container that asks for m's accelerators. */
static bool held(json_t *pod, const struct tsr_manufacturer *m,
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

/* The snapshot in core/admit.h's terms, and the scratch it is built in. */
struct build {
        const struct tsr_snapshot_node *nodes;
        size_t n_nodes;
        const struct tsr_manufacturer *m;
        struct tsr_admit_node *anodes; /* n_nodes listed, then the gone hostnames */
        size_t n_anodes;
        const struct tsr_snapshot_node **by_name; /* nodes sorted by name */
        const char **flavors; /* distinct flavor names of the nodes; index = flavor */
        size_t n_flavors;
        struct tsr_accel_ledger *ledgers;
        struct tsr_admit_podset *podsets;
        size_t n_podsets;
        struct tsr_admit_placement *placements;
        size_t n_placements;
        struct tsr_admit_workload *inflight;
        size_t n_inflight;
        struct tsr_container_allocation *alloc; /* held()'s scratch */
};

static int by_name(const void *a, const void *b)
{
        return strcmp((*(const struct tsr_snapshot_node *const *)a)->name,
                      (*(const struct tsr_snapshot_node *const *)b)->name);
}

static int name_is(const void *key, const void *node)
{
        return strcmp(key, (*(const struct tsr_snapshot_node *const *)node)->name);
}

/* The node index of hostname, appending a gone node the first time a hostname is unknown. */
static size_t node_index(struct build *b, const char *hostname)
{
        const struct tsr_snapshot_node *const *at =
            bsearch(hostname, b->by_name, b->n_nodes, sizeof(*b->by_name), name_is);

        if (at)
                return (size_t)(*at - b->nodes);
        for (size_t k = b->n_nodes; k < b->n_anodes; k++)
                if (!strcmp(b->anodes[k].name, hostname))
                        return k;
        b->anodes[b->n_anodes] = (struct tsr_admit_node){
            .name = hostname, .present = false, .flavor = TSR_ADMIT_NO_FLAVOR};
        return b->n_anodes++;
}

/* The index of flavor name; a name no node carries gets b->n_flavors, which serves nothing. */
static unsigned flavor_index(const struct build *b, const char *name)
{
        size_t f = 0;

        if (!name)
                return TSR_ADMIT_NO_FLAVOR;
        while (f < b->n_flavors && strcmp(b->flavors[f], name))
                f++;
        return (unsigned)f;
}

static int build_nodes(struct build *b, struct tsr_diag *diag)
{
        size_t used = 0;

        for (size_t k = 0; k < b->n_nodes; k++) {
                const struct tsr_snapshot_node *sn = &b->nodes[k];
                struct tsr_accel_ledger *l = &b->ledgers[used];
                struct tsr_diag why;
                unsigned f = flavor_index(b, sn->flavor);
                int rc;

                tsr_diag_clear(&why);
                rc = 0;
                if (sn->ledger)
                        memcpy(l, sn->ledger, sn->n * sizeof(*l));
                else
                        rc = tsr_admit_snapshot_ledger(sn, l, &why);
                if (rc)
                        return tsr_diag_set(diag, rc, "node %s: %s", sn->name, why.msg);
                if (sn->flavor && f == b->n_flavors)
                        b->flavors[b->n_flavors++] = sn->flavor;
                b->anodes[k] = (struct tsr_admit_node){
                    .name = sn->name,
                    .present = sn->present,
                    .flavor = f,
                    .caps = sn->caps,
                    .ledger = l,
                    .n = sn->n,
                };
                b->by_name[k] = sn;
                used += sn->n;
        }
        b->n_anodes = b->n_nodes;
        qsort(b->by_name, b->n_nodes, sizeof(*b->by_name), by_name);
        return 0;
}

/*
 * Appends w's PodSets to b and fills *out. For an inflight Workload each domain counts only the
 * Pods on its node that are not held yet.
 */
static int add_workload(struct build *b, const struct tsr_snapshot_workload *w, bool charge,
                        struct tsr_admit_workload *out, struct tsr_diag *diag)
{
        struct tsr_admit_podset *aps = &b->podsets[b->n_podsets];

        for (size_t p = 0; p < w->n_podsets; p++) {
                const struct tsr_snapshot_podset *ps = &w->podsets[p];
                struct tsr_admit_podset *ap = &aps[p];
                struct tsr_pod_spec *spec;
                struct tsr_diag why;
                int rc;

                tsr_diag_clear(&why);
                rc = tsr_pod_spec_new(ps->tmpl, &spec, &why);
                if (rc)
                        return tsr_diag_set(diag, rc, "Workload %s/%s PodSet %s: %s", w->ns,
                                            w->name, ps->name, why.msg);
                memset(ap, 0, sizeof(*ap));
                tsr_demand_of_pod(&spec->req, b->m, &ap->demand);
                free(spec);
                ap->name = ps->name;
                ap->count = ps->count;
                ap->flavor = flavor_index(b, ps->flavor);
                ap->placements = &b->placements[b->n_placements];
                for (size_t d = 0; d < ps->n_domains; d++) {
                        size_t k = node_index(b, ps->domains[d].node);
                        unsigned pods = ps->domains[d].pods;

                        for (size_t x = 0; charge && k < b->n_nodes && x < b->nodes[k].n_pods;
                             x++) {
                                json_t *pod = b->nodes[k].pods[x];

                                if (pods > 0 && member(pod, w, ps->name) &&
                                    held(pod, b->m, b->alloc))
                                        pods--;
                        }
                        b->placements[b->n_placements++] = (struct tsr_admit_placement){k, pods};
                        ap->n_placements++;
                }
        }
        b->n_podsets += w->n_podsets;
        *out = (struct tsr_admit_workload){w->name, w->n_podsets, aps};
        return 0;
}

static void build_release(struct build *b)
{
        free(b->anodes);
        free(b->by_name);
        free(b->flavors);
        free(b->ledgers);
        free(b->podsets);
        free(b->placements);
        free(b->inflight);
        free(b->alloc);
}

static size_t domains_of(const struct tsr_snapshot_workload *w)
{
        size_t n = 0;

        for (size_t p = 0; p < w->n_podsets; p++)
                n += w->podsets[p].n_domains;
        return n;
}

int tsr_admit_snapshot_judge(const struct tsr_product *product,
                             const struct tsr_snapshot_node *nodes, size_t n_nodes,
                             const struct tsr_snapshot_workload *workloads, size_t n_workloads,
                             const struct tsr_snapshot_workload *target,
                             struct tsr_admit_verdict *out, struct tsr_diag *diag)
{
        struct build b = {.nodes = nodes, .n_nodes = n_nodes};
        struct tsr_admit_workload mine;
        size_t n_accels = 0, n_podsets = target->n_podsets, n_domains = domains_of(target);
        size_t n_inflight = 0;
        int rc;

        if (!product)
                return tsr_diag_set(diag, TSR_EINVAL, "the pool has no accelerator model");
        b.m = tsr_catalog_manufacturer(product->manufacturer);
        for (size_t k = 0; k < n_nodes; k++)
                n_accels += nodes[k].n;
        for (size_t i = 0; i < n_workloads; i++) {
                if (!inflight(&workloads[i], target))
                        continue;
                n_inflight++;
                n_podsets += workloads[i].n_podsets;
                n_domains += domains_of(&workloads[i]);
        }
        b.anodes = malloc((n_nodes + n_domains + 1) * sizeof(*b.anodes));
        b.by_name = malloc((n_nodes + 1) * sizeof(*b.by_name));
        b.flavors = malloc((n_nodes + 1) * sizeof(*b.flavors));
        b.ledgers = malloc((n_accels + 1) * sizeof(*b.ledgers));
        b.podsets = malloc((n_podsets + 1) * sizeof(*b.podsets));
        b.placements = malloc((n_domains + 1) * sizeof(*b.placements));
        b.inflight = malloc((n_inflight + 1) * sizeof(*b.inflight));
        b.alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*b.alloc));
        if (!b.anodes || !b.by_name || !b.flavors || !b.ledgers || !b.podsets || !b.placements ||
            !b.inflight || !b.alloc) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        rc = build_nodes(&b, diag);
        if (!rc)
                rc = add_workload(&b, target, false, &mine, diag);
        for (size_t i = 0; i < n_workloads && !rc; i++)
                if (inflight(&workloads[i], target))
                        rc = add_workload(&b, &workloads[i], true, &b.inflight[b.n_inflight++],
                                          diag);
        if (!rc)
                rc = tsr_admit_judge(b.anodes, b.n_anodes, b.inflight, b.n_inflight, &mine, out,
                                     diag);
out:
        build_release(&b);
        return rc;
}
