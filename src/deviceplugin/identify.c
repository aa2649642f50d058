/*
 * identify.c - naming the container an Allocate serves.
 */
#include "deviceplugin/identify.h"

#include "base/err.h"
#include "codec/alloc_annotation.h"
#include "codec/pod_spec.h"
#include "core/pod_resources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str_at(json_t *o, const char *a, const char *b)
{
        return json_string_value(json_object_get(json_object_get(o, a), b));
}

static const char *or_empty(const char *s)
{
        return s ? s : "";
}

static bool same_set(const char *const *a, size_t na, const char *const *b, size_t nb)
{
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++) {
                bool found = false;

                for (size_t j = 0; j < nb && !found; j++)
                        found = !strcmp(a[i], b[j]);
                if (!found)
                        return false;
        }
        return true;
}

/* What the kubelet lists container holding of resource (NULL: of any resource), or NULL. */
static const struct tsr_dp_held *held_by(const struct tsr_dp_kubelet_view *kv, const char *ns,
                                         const char *pod, const char *container,
                                         const char *resource)
{
        for (size_t i = 0; i < kv->n_held; i++) {
                const struct tsr_dp_held *h = &kv->held[i];

                if (!strcmp(h->ns, ns) && !strcmp(h->pod, pod) &&
                    !strcmp(h->container, container) &&
                    (!resource || !strcmp(h->resource, resource)) && h->n_ids > 0)
                        return h;
        }
        return NULL;
}

static bool kubelet_lists(const struct tsr_dp_kubelet_view *kv, const char *ns, const char *pod)
{
        for (size_t i = 0; i < kv->n_pods; i++)
                if (!strcmp(kv->pod_ns[i], ns) && !strcmp(kv->pod_name[i], pod))
                        return true;
        return false;
}

/* True when the Pod's allocation annotation already names container. */
static bool annotated(json_t *pod, const char *container)
{
        const char *v = json_string_value(
            json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"),
                            TSR_ALLOC_ANNOTATION));
        json_t *doc;
        bool has;

        if (!v)
                return false;
        doc = json_loads(v, 0, NULL);
        has = json_object_get(doc, container) != NULL;
        json_decref(doc);
        return has;
}

bool tsr_dp_pod_older(json_t *a, json_t *b)
{
        int c = strcmp(or_empty(str_at(a, "metadata", "creationTimestamp")),
                       or_empty(str_at(b, "metadata", "creationTimestamp")));

        if (c)
                return c < 0;
        c = strcmp(or_empty(str_at(a, "metadata", "namespace")),
                   or_empty(str_at(b, "metadata", "namespace")));
        if (c)
                return c < 0;
        return strcmp(or_empty(str_at(a, "metadata", "name")),
                      or_empty(str_at(b, "metadata", "name"))) < 0;
}

/* Whether pod can be served at all: named, not being deleted, its spec readable into spec. */
static bool servable(json_t *pod, struct tsr_pod_spec *spec)
{
        return str_at(pod, "metadata", "uid") && str_at(pod, "metadata", "namespace") &&
               str_at(pod, "metadata", "name") &&
               !json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") &&
               !tsr_pod_spec_read(pod, &spec->req, &spec->text, NULL);
}

/* Whether the phase makes pod a fallback candidate: Pending, or no phase yet. */
static bool pending(json_t *pod)
{
        const char *phase = str_at(pod, "status", "phase");

        return !phase || !strcmp(phase, "Pending");
}

/* Whether container c of pod (uid ns/name) was served: annotated, reserved, or holding devices. */
static bool served(json_t *pod, const char *uid, const char *ns, const char *name, const char *c,
                   const struct tsr_dp_kubelet_view *kv, tsr_dp_reserved_fn reserved, void *ctx)
{
        return (reserved && reserved(ctx, uid, c)) || annotated(pod, c) ||
               (kv && held_by(kv, ns, name, c, NULL));
}

/*
 * Whether no container of pod still waits for the node's accelerators. A visibility container
 * shows what the rest of its Pod holds, and the kubelet allocates a Pod's containers one after
 * the other, so its own Pod is the one being admitted: every accelerator container served.
 */
static bool accelerators_served(const struct tsr_dp_node *node, json_t *pod,
                                const struct tsr_dp_kubelet_view *kv, tsr_dp_reserved_fn reserved,
                                void *ctx, const struct tsr_pod_req *req)
{
        const char *uid = str_at(pod, "metadata", "uid");
        const char *ns = str_at(pod, "metadata", "namespace");
        const char *name = str_at(pod, "metadata", "name");

        for (size_t i = 0; i < req->n; i++) {
                struct tsr_demand d;

                tsr_demand_of_container(req, i, node->m, &d);
                if (d.family != TSR_FAMILY_NONE &&
                    !served(pod, uid, ns, name, req->c[i].name, kv, reserved, ctx))
                        return false;
        }
        return true;
}

/*
 * Fills out with the container of pod that requests resource with n tokens, if any is free. A
 * visibility resource (visibility) is served only in a Pod whose accelerator containers are.
 */
static bool candidate_in(const struct tsr_dp_node *node, json_t *pod,
                         const struct tsr_dp_kubelet_view *kv, const char *resource, size_t n,
                         bool visibility, tsr_dp_reserved_fn reserved, void *ctx,
                         struct tsr_pod_spec *spec, struct tsr_dp_identity *out)
{
        const char *uid = str_at(pod, "metadata", "uid");
        const char *ns = str_at(pod, "metadata", "namespace");
        const char *name = str_at(pod, "metadata", "name");

        if (!servable(pod, spec) ||
            (visibility && !accelerators_served(node, pod, kv, reserved, ctx, &spec->req)))
                return false;
        for (size_t i = 0; i < spec->req.n; i++) {
                const struct tsr_container_req *c = &spec->req.c[i];
                int64_t want = tsr_container_request(c, resource, false);

                if (want != (int64_t)n || (reserved && reserved(ctx, uid, c->name)) ||
                    annotated(pod, c->name) || (kv && held_by(kv, ns, name, c->name, resource)))
                        continue;
                out->pod = pod;
                snprintf(out->container, sizeof(out->container), "%s", c->name);
                tsr_demand_of_container(&spec->req, i, node->m, &out->demand);
                return true;
        }
        return false;
}

int tsr_dp_identify(const struct tsr_dp_node *node, json_t *pods,
                    const struct tsr_dp_kubelet_view *kv, const char *resource,
                    const char *const *ids, size_t n_ids, tsr_dp_reserved_fn reserved, void *ctx,
                    struct tsr_dp_identity *out, char *msg, size_t len)
{
        struct tsr_pod_spec *spec = malloc(sizeof(*spec));
        struct tsr_dp_identity best = {0}, cand;
        char vis[TSR_KEY_MAX];
        bool visibility =
            !tsr_dp_resource_name(node, TSR_FAMILY_VISIBILITY, vis) && !strcmp(vis, resource);
        json_t *pod;
        size_t i;
        bool found = false;

        if (!spec) {
                snprintf(msg, len, "out of memory");
                return TSR_ENOMEM;
        }
        /* a repeated Allocate: the kubelet already lists these devices for a container */
        for (size_t h = 0; kv && ids && h < kv->n_held && !found; h++) {
                const struct tsr_dp_held *held = &kv->held[h];

                if (strcmp(held->resource, resource) ||
                    !same_set(held->ids, held->n_ids, ids, n_ids))
                        continue;
                json_array_foreach(pods, i, pod)
                {
                        const char *ns = str_at(pod, "metadata", "namespace");
                        const char *name = str_at(pod, "metadata", "name");

                        if (!ns || !name || strcmp(ns, held->ns) || strcmp(name, held->pod) ||
                            tsr_pod_spec_read(pod, &spec->req, &spec->text, NULL))
                                continue;
                        for (size_t c = 0; c < spec->req.n && !found; c++) {
                                if (strcmp(spec->req.c[c].name, held->container))
                                        continue;
                                best.pod = pod;
                                snprintf(best.container, sizeof(best.container), "%s",
                                         held->container);
                                tsr_demand_of_container(&spec->req, c, node->m, &best.demand);
                                found = true;
                        }
                        if (found)
                                break;
                }
        }
        json_array_foreach(pods, i, pod)
        {
                if (found)
                        break;
                if (kv ? !kubelet_lists(kv, or_empty(str_at(pod, "metadata", "namespace")),
                                        or_empty(str_at(pod, "metadata", "name")))
                       : !pending(pod))
                        continue;
                if (!candidate_in(node, pod, kv, resource, n_ids, visibility, reserved, ctx, spec,
                                  &cand))
                        continue;
                if (!best.pod || tsr_dp_pod_older(cand.pod, best.pod))
                        best = cand;
        }
        free(spec);
        if (!best.pod) {
                snprintf(msg, len,
                         "no %s container on this node requests %zu %s device(s) and is waiting "
                         "for them",
                         kv ? "kubelet-admitted" : "pending", n_ids, resource);
                return TSR_ENOTFOUND;
        }
        best.by_kubelet = kv != NULL;
        *out = best;
        return 0;
}

/* Whether g, a grant of container, is one of family f naming ids[0..n_ids) (see the header). */
static bool grant_matches(const struct tsr_container_allocation *g, enum tsr_family f,
                          const char *const *ids, size_t n_ids)
{
        const char *granted[TSR_ALLOC_ACCELS_MAX];

        if (!g->n || tsr_mode_of_family(f) == TSR_MODE_NONE)
                return false;
        for (size_t x = 0; x < g->n; x++)
                if (g->accels[x].mode != tsr_mode_of_family(f))
                        return false;
        if (!ids)
                return true;
        for (size_t k = 0; k < g->n_device_ids; k++)
                granted[k] = g->device_ids[k];
        return same_set(granted, g->n_device_ids, ids, n_ids);
}

/* Container name's grant in pod (uid): the caller's reservation, else the annotation entry. */
static bool grant_of(json_t *pod, const char *uid, const char *name, tsr_dp_granted_fn granted,
                     void *ctx, struct tsr_container_allocation *alloc,
                     struct tsr_container_allocation *out)
{
        size_t na = 0;

        if (granted && granted(ctx, uid, name, out))
                return true;
        if (tsr_alloc_annotation_of_pod(pod, alloc, TSR_ALLOC_CONTAINERS_MAX, &na, NULL))
                return false;
        for (size_t i = 0; i < na; i++)
                if (!strcmp(alloc[i].container, name)) {
                        *out = alloc[i];
                        return true;
                }
        return false;
}

int tsr_dp_identify_retry(const struct tsr_dp_node *node, json_t *pods,
                          const struct tsr_dp_kubelet_view *kv, const char *resource,
                          const char *const *ids, size_t n_ids, tsr_dp_granted_fn granted,
                          void *ctx, struct tsr_dp_identity *out,
                          struct tsr_container_allocation *grant)
{
        struct tsr_pod_spec *spec = malloc(sizeof(*spec));
        struct tsr_container_allocation *alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*alloc));
        struct tsr_container_allocation *g = malloc(sizeof(*g));
        struct tsr_dp_identity best = {0};
        json_t *pod;
        size_t i;
        int rc = TSR_ENOTFOUND;

        if (!spec || !alloc || !g) {
                rc = TSR_ENOMEM;
                goto out;
        }
        json_array_foreach(pods, i, pod)
        {
                const char *uid = str_at(pod, "metadata", "uid");
                const char *ns = str_at(pod, "metadata", "namespace");
                const char *name = str_at(pod, "metadata", "name");

                if (!kv || !servable(pod, spec) || !kubelet_lists(kv, ns, name) ||
                    (best.pod && !tsr_dp_pod_older(pod, best.pod)))
                        continue;
                for (size_t c = 0; c < spec->req.n; c++) {
                        const struct tsr_container_req *cr = &spec->req.c[c];
                        struct tsr_demand d;

                        if (tsr_container_request(cr, resource, false) != (int64_t)n_ids ||
                            held_by(kv, ns, name, cr->name, resource) ||
                            !grant_of(pod, uid, cr->name, granted, ctx, alloc, g))
                                continue;
                        tsr_demand_of_container(&spec->req, c, node->m, &d);
                        if (!grant_matches(g, d.family, ids, n_ids))
                                continue;
                        best.pod = pod;
                        snprintf(best.container, sizeof(best.container), "%s", cr->name);
                        best.demand = d;
                        best.by_kubelet = true;
                        *grant = *g;
                        rc = 0;
                        break;
                }
        }
        if (!rc)
                *out = best;
out:
        free(spec);
        free(alloc);
        free(g);
        return rc;
}

int tsr_dp_smallest_pending(const struct tsr_dp_node *node, json_t *pods, const char *resource,
                            tsr_dp_reserved_fn reserved, void *ctx, int64_t *units)
{
        struct tsr_pod_spec *spec = malloc(sizeof(*spec));
        int64_t least = 0;
        json_t *pod;
        size_t i;

        if (!spec)
                return TSR_ENOMEM;
        json_array_foreach(pods, i, pod)
        {
                const char *uid = str_at(pod, "metadata", "uid");

                if (!pending(pod) || !servable(pod, spec))
                        continue;
                for (size_t c = 0; c < spec->req.n; c++) {
                        const struct tsr_container_req *cr = &spec->req.c[c];
                        struct tsr_demand d;

                        if (tsr_container_request(cr, resource, false) <= 0 ||
                            (reserved && reserved(ctx, uid, cr->name)) || annotated(pod, cr->name))
                                continue;
                        tsr_demand_of_container(&spec->req, c, node->m, &d);
                        if (d.units > 0 && (!least || d.units < least))
                                least = d.units;
                }
        }
        free(spec);
        if (!least)
                return TSR_ENOTFOUND;
        *units = least;
        return 0;
}
