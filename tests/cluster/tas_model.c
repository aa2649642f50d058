/*
 * tas_model.c - the model's side of the differential test (test_tas_fidelity.py): tessera's
 * core placement rule (core/tas.h) fed the very objects the test sends to Kueue v0.17.
 *
 * Reads one JSON object on standard input:
 *   config        the Kueue Configuration Kueue runs (its resources.transformations and
 *                 excludeResourcePrefixes are applied to each Pod's requests, as Kueue does when
 *                 it builds the Workload)
 *   nodes         Node objects (metadata.labels, status.allocatable)
 *   flavors       ResourceFlavor objects (spec.nodeLabels)
 *   clusterQueues ClusterQueue objects (spec.resourceGroups: covered resources, flavors in order,
 *                 nominal quotas)
 *   localQueues   LocalQueue objects (spec.clusterQueue)
 *   pods          Pod objects in submission order (the queue-name label, requests, node
 *                 affinity and nodeSelector)
 * and prints {"placements": {POD: NODE or null}}: each Pod placed, one at a time, on the state its
 * predecessors left, by Kueue's flavor assignment (the ClusterQueue's flavors in order; a flavor
 * fits when every requested resource is covered, the quota has room and TAS places the Pod) and
 * TAS at hostname level (the flavor's nodes that match its nodeLabels and the Pod's affinity,
 * counted and ordered by tsr_tas_fits / tsr_tas_before, plus the `pods` resource). A Pod that does
 * not fit is dropped, as the test deletes it on the real cluster. Quantities are compared in
 * milli-units. Exit status 2 with a message on malformed input.
 *
 * Kueue v0.17.0's accounting, which this model reproduces (docs/internals/tas-fidelity.md): TAS
 * counts a Pod by its raw requests (the Pod spec, before exclusions and transformations), but a
 * reserved Workload's TAS usage on its node is its admission's transformed requests (credits in
 * place of the accelerator keys). After TAS picks a node, the scheduler checks the transformed
 * requests against that node's room once more; when they do not fit, the Workload is skipped
 * ("Workload no longer fits after processing another workload") and the model drops it. TAS
 * usage is kept per flavor, so flavors that select the same node do not see each other's Pods
 * there. The flavor walk is Kueue's eventual one: it retries a Workload from the next flavor
 * after a TAS failure, so the first flavor where quota and TAS both fit wins. Both accounting
 * rules are Kueue v0.17.0 bugs (kubernetes-sigs/kueue#12005, #10659); tessera's simulator and
 * replay count raw requests per node across flavors, as the fixed Kueue does.
 *
 * Ownership: a run's state lives until exit (the flavors' usage tables are freed there).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/quantity.h"
#include "codec/affinity.h"
#include "core/tas.h"
#include "sim/resources.h"

#define RES_MAX 32

struct amounts {
        size_t n;
        const char *name[RES_MAX];
        int64_t milli[RES_MAX];
};

static _Noreturn void die(const char *what)
{
        fprintf(stderr, "tas_model: %s\n", what);
        exit(2);
}

/* name's one stored copy: amounts outlive the Pod whose requests named the resource. */
static const char *intern(const char *name)
{
        static char names[4 * RES_MAX][128];
        static size_t n;

        for (size_t k = 0; k < n; k++)
                if (!strcmp(names[k], name))
                        return names[k];
        if (n == 4 * RES_MAX || strlen(name) >= sizeof(names[0]))
                die("too many resource names, or one too long");
        return strcpy(names[n++], name);
}

static int64_t *slot(struct amounts *a, const char *name)
{
        for (size_t k = 0; k < a->n; k++)
                if (!strcmp(a->name[k], name))
                        return &a->milli[k];
        if (a->n == RES_MAX)
                die("too many resources");
        a->name[a->n] = intern(name);
        a->milli[a->n] = 0;
        return &a->milli[a->n++];
}

static int64_t get(const struct amounts *a, const char *name, int64_t absent)
{
        for (size_t k = 0; k < a->n; k++)
                if (!strcmp(a->name[k], name))
                        return a->milli[k];
        return absent;
}

static int64_t milli_of(json_t *v)
{
        struct tsr_quantity q;
        int64_t m;

        if (json_is_integer(v))
                return json_integer_value(v) * 1000;
        if (!json_is_string(v) || tsr_quantity_parse(json_string_value(v), &q, NULL) ||
            tsr_quantity_milli(&q, &m))
                die("a quantity is malformed");
        return m;
}

static void read_amounts(json_t *map, struct amounts *out)
{
        const char *k;
        json_t *v;

        out->n = 0;
        json_object_foreach(map, k, v) * slot(out, k) = milli_of(v);
}

/* The Pod's effective request per resource (the simulator's pod_spec_resources, Kubernetes'
 * PodRequests), in milli-units; the names live in store. TAS's "pods" is added by place(). */
static void pod_requests(json_t *pod, struct pod_resources *store, struct amounts *out)
{
        struct tsr_pod_spec *spec;

        if (tsr_pod_spec_new(pod, &spec, NULL))
                die("a Pod is malformed");
        pod_spec_resources(&spec->req, store);
        free(spec);
        out->n = 0;
        for (size_t k = 0; k < store->n; k++)
                if (strcmp(store->r[k].name, "pods"))
                        *slot(out, store->r[k].name) = strcmp(store->r[k].name, "cpu")
                                                           ? store->r[k].value * 1000
                                                           : store->r[k].value;
}

/* Kueue's exclusions and transformations (strategy Replace) of one pod's raw requests. */
static void workload_requests(json_t *config, const struct amounts *raw, struct amounts *out)
{
        json_t *res = json_object_get(config, "resources");
        json_t *t, *p;
        size_t i;

        out->n = 0;
        for (size_t r = 0; r < raw->n; r++) {
                bool gone = false;

                json_array_foreach(json_object_get(res, "excludeResourcePrefixes"), i, p) gone |=
                    !strncmp(raw->name[r], json_string_value(p), strlen(json_string_value(p)));
                json_array_foreach(json_object_get(res, "transformations"), i, t)
                {
                        const char *k;
                        json_t *v, *by = json_object_get(t, "multiplyBy");
                        int64_t times = 1000;

                        if (strcmp(json_string_value(json_object_get(t, "input")), raw->name[r]))
                                continue;
                        if (by)
                                times = get(raw, json_string_value(by), 0);
                        json_object_foreach(json_object_get(t, "outputs"), k, v)
                        {
                                *slot(out, k) += milli_of(v) / 1000 * raw->milli[r] / 1000 * times;
                        }
                        gone |=
                            json_is_string(json_object_get(t, "strategy")) &&
                            !strcmp(json_string_value(json_object_get(t, "strategy")), "Replace");
                }
                if (!gone)
                        *slot(out, raw->name[r]) += raw->milli[r];
        }
        for (size_t r = 0; r < out->n; r++)
                if (!out->milli[r]) { /* a zero output is no request */
                        out->name[r] = out->name[out->n - 1];
                        out->milli[r--] = out->milli[--out->n];
                }
}

static json_t *by_name(json_t *items, const char *name)
{
        json_t *o;
        size_t i;

        json_array_foreach(items, i, o) if (!strcmp(json_string_value(json_object_get(
                                                        json_object_get(o, "metadata"), "name")),
                                                    name)) return o;
        return NULL;
}

static const char *name_of(json_t *o)
{
        return json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
}

static bool labels_match(json_t *want, json_t *labels)
{
        const char *k;
        json_t *v;

        json_object_foreach(want, k, v)
        {
                json_t *have = json_object_get(labels, k);

                if (!have || !json_equal(have, v))
                        return false;
        }
        return true;
}

struct model {
        json_t *in, *nodes;
        struct amounts *alloc; /* per node */
        size_t n_nodes;
};

/*
 * One flavor's usage: its quota across queues (no cohorts in the test), and its TAS usage per
 * node. Kueue v0.17.0 keeps TAS usage per flavor (TASFlavorCache), so a node that two flavors
 * select (the generic flavors of one CPU model differ by name only) is charged in the flavor that
 * placed the Pod and looks that much emptier to the other.
 */
struct flavor_usage {
        const char *name;
        struct amounts quota;
        struct amounts *node; /* per node */
};

static struct flavor_usage flavors_used[256];
static size_t n_flavors_used;

static struct flavor_usage *flavor_usage(const char *flavor, size_t n_nodes)
{
        struct flavor_usage *f;

        for (size_t k = 0; k < n_flavors_used; k++)
                if (!strcmp(flavors_used[k].name, flavor))
                        return &flavors_used[k];
        if (n_flavors_used == 256)
                die("too many flavors");
        f = &flavors_used[n_flavors_used++];
        f->name = flavor;
        f->node = calloc(n_nodes + 1, sizeof(*f->node));
        if (!f->node)
                die("out of memory");
        return f;
}

/*
 * The scheduler's last check of the node TAS chose (TASFlavorSnapshot.Fits): one more Pod of the
 * transformed requests req fits the node's allocatable less its TAS usage; a resource the node
 * does not list fits nothing.
 */
static bool usage_fits(const struct amounts *alloc, const struct amounts *used,
                       const struct amounts *req)
{
        for (size_t x = 0; x < req->n; x++) {
                int64_t have = get(alloc, req->name[x], -1);

                if (have < 0 || have - get(used, req->name[x], 0) < req->milli[x])
                        return false;
        }
        return true;
}

/* Places pod; returns the node index or -1. */
static long place(struct model *m, json_t *pod)
{
        json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
        const char *lq_name =
            json_string_value(json_object_get(labels, "kueue.x-k8s.io/queue-name"));
        json_t *lq = lq_name ? by_name(json_object_get(m->in, "localQueues"), lq_name) : NULL;
        json_t *cq = lq ? by_name(json_object_get(m->in, "clusterQueues"),
                                  json_string_value(
                                      json_object_get(json_object_get(lq, "spec"), "clusterQueue")))
                        : NULL;
        json_t *group, *fl;
        struct pod_resources store;
        struct amounts raw, req;
        size_t g, f;

        if (!cq)
                die("a Pod's queue is unknown");
        pod_requests(pod, &store, &raw);
        workload_requests(json_object_get(m->in, "config"), &raw, &req);
        json_array_foreach(json_object_get(json_object_get(cq, "spec"), "resourceGroups"), g, group)
        {
                json_t *covered = json_object_get(group, "coveredResources");

                for (size_t r = 0; r < req.n; r++) {
                        bool in = false;
                        json_t *c;
                        size_t i;

                        json_array_foreach(covered, i, c) in |=
                            !strcmp(json_string_value(c), req.name[r]);
                        if (!in)
                                return -1; /* v0.17: an uncovered resource never fits */
                }
                json_array_foreach(json_object_get(group, "flavors"), f, fl)
                {
                        const char *fname = json_string_value(json_object_get(fl, "name"));
                        json_t *rf = by_name(json_object_get(m->in, "flavors"), fname);
                        struct flavor_usage *fu = flavor_usage(fname, m->n_nodes);
                        struct amounts *qu = &fu->quota;
                        struct tsr_tas_candidate best = {0};
                        bool quota_ok = true, found = false;
                        json_t *qr;
                        size_t i;

                        json_array_foreach(json_object_get(fl, "resources"), i, qr)
                        {
                                const char *rn = json_string_value(json_object_get(qr, "name"));
                                int64_t want = get(&req, rn, 0);

                                if (want && get(qu, rn, 0) + want >
                                                milli_of(json_object_get(qr, "nominalQuota")))
                                        quota_ok = false;
                        }
                        if (!quota_ok || !rf)
                                continue;
                        for (size_t n = 0; n < json_array_size(m->nodes); n++) {
                                json_t *node = json_array_get(m->nodes, n);
                                json_t *nl =
                                    json_object_get(json_object_get(node, "metadata"), "labels");
                                struct tsr_tas_resource r[RES_MAX + 1];
                                struct tsr_tas_candidate c;
                                size_t k = 0;

                                if (!labels_match(
                                        json_object_get(json_object_get(rf, "spec"), "nodeLabels"),
                                        nl) ||
                                    !tsr_affinity_matches(json_object_get(pod, "spec"),
                                                          name_of(node), nl))
                                        continue;
                                for (size_t x = 0; x < raw.n; x++)
                                        r[k++] = (struct tsr_tas_resource){
                                            get(&m->alloc[n], raw.name[x], -1),
                                            get(&fu->node[n], raw.name[x], 0), raw.milli[x]};
                                r[k++] =
                                    (struct tsr_tas_resource){get(&m->alloc[n], "pods", -1),
                                                              get(&fu->node[n], "pods", 0), 1000};
                                c = (struct tsr_tas_candidate){n, name_of(node),
                                                               tsr_tas_fits(r, k, NULL)};
                                if (c.fits && (!found || tsr_tas_before(&c, &best))) {
                                        best = c;
                                        found = true;
                                }
                        }
                        if (!found)
                                continue;
                        if (!usage_fits(&m->alloc[best.node], &fu->node[best.node], &req))
                                return -1; /* skipped: "no longer fits" */
                        for (size_t x = 0; x < req.n; x++) {
                                *slot(&fu->node[best.node], req.name[x]) += req.milli[x];
                                *slot(qu, req.name[x]) += req.milli[x];
                        }
                        *slot(&fu->node[best.node], "pods") += 1000;
                        return (long)best.node;
                }
        }
        return -1;
}

int main(void)
{
        json_error_t err;
        json_t *in = json_loadf(stdin, 0, &err), *out, *placements, *pod;
        struct model m = {0};
        size_t i;

        if (!json_is_object(in))
                die("standard input is not a JSON object");
        m.in = in;
        m.nodes = json_object_get(in, "nodes");
        m.alloc = calloc(json_array_size(m.nodes) + 1, sizeof(*m.alloc));
        m.n_nodes = json_array_size(m.nodes);
        if (!m.alloc)
                die("out of memory");
        for (size_t n = 0; n < json_array_size(m.nodes); n++)
                read_amounts(json_object_get(json_object_get(json_array_get(m.nodes, n), "status"),
                                             "allocatable"),
                             &m.alloc[n]);
        placements = json_object();
        json_array_foreach(json_object_get(in, "pods"), i, pod)
        {
                long at = place(&m, pod);

                json_object_set_new(placements, name_of(pod),
                                    at < 0 ? json_null()
                                           : json_string(name_of(json_array_get(m.nodes, at))));
        }
        out = json_pack("{s:o}", "placements", placements);
        json_dumpf(out, stdout, JSON_SORT_KEYS);
        putchar('\n');
        json_decref(out);
        json_decref(in);
        free(m.alloc);
        for (size_t k = 0; k < n_flavors_used; k++)
                free(flavors_used[k].node);
        return 0;
}
