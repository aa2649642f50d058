/*
 * kueue_chain.c - the chain's Kueue objects as JSON.
 */
#include "codec/kueue_chain.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "core/credits.h"
#include "core/printable.h"

#include <stdio.h>
#include <string.h>

static int nomem(struct tsr_diag *diag)
{
        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
}

int tsr_kueue_labels_set(json_t *labels, const struct tsr_chain_labels *l)
{
        for (size_t i = 0; i < l->n; i++)
                if (json_object_set_new(labels, l->l[i].key, json_string(l->l[i].value)))
                        return TSR_ENOMEM;
        return 0;
}

/* {apiVersion, kind, metadata: {name}} with spec, both stolen. */
static json_t *object(const char *kind, const char *name, json_t *spec)
{
        return json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion", TSR_KUEUE_API_VERSION, "kind",
                         kind, "metadata", "name", name, "spec", spec);
}

/*
 * The labels a flavor and its queue carry: type, <feature key>=true, os, arch, and with count
 * set, <feature key>.count and .capacity (flavors only).
 */
static json_t *schedule_labels(const struct tsr_chain_pool *p, const char *type,
                               const struct tsr_chain_flavor *count)
{
        char key[TSR_KEY_MAX], sub[TSR_KEY_MAX + 16], value[32];
        json_t *l;

        if (tsr_chain_feature_key(p, key))
                return NULL;
        l = json_pack("{s:s, s:s, s:s, s:s}", TSR_KUEUE_TYPE_LABEL, type, key, "true",
                      TSR_CHAIN_OS_LABEL, p->os, TSR_CHAIN_ARCH_LABEL, p->arch);
        if (!l || !count)
                return l;
        snprintf(sub, sizeof(sub), "%s.count", key);
        snprintf(value, sizeof(value), "%u", count->per_node);
        if (json_object_set_new(l, sub, json_string(value)))
                goto fail;
        snprintf(sub, sizeof(sub), "%s.capacity", key);
        snprintf(value, sizeof(value), "%llu",
                 (unsigned long long)count->nodes * (unsigned long long)count->per_node);
        if (json_object_set_new(l, sub, json_string(value)))
                goto fail;
        return l;
fail:
        json_decref(l);
        return NULL;
}

/* The notes (note.gpustack.ai/<key> annotations) of pool p's flavors and queue. */
static json_t *notes(const struct tsr_chain_pool *p)
{
        struct tsr_unit_spec u = tsr_instancetype_unit(p->product);
        struct tsr_unit_text ut;
        char memory[32] = "";

        tsr_printable_unit_text(&u, &ut);
        if (p->product)
                snprintf(memory, sizeof(memory), "%lluMi",
                         (unsigned long long)p->product->vram_mib);
        /* tessera's catalog names no family; the generic pool's "manufacturer" is its key */
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
                         TSR_KUEUE_NOTE_PREFIX "acceleratable", p->product ? "true" : "false",
                         TSR_KUEUE_NOTE_PREFIX "manufacturer",
                         p->product ? tsr_catalog_manufacturer(p->product->manufacturer)->key
                                    : TSR_CHAIN_GENERAL_KEY,
                         TSR_KUEUE_NOTE_PREFIX "product", p->product ? p->product->name : "",
                         TSR_KUEUE_NOTE_PREFIX "family", "", TSR_KUEUE_NOTE_PREFIX "memory", memory,
                         TSR_KUEUE_NOTE_PREFIX "unitCPU", ut.cpu, TSR_KUEUE_NOTE_PREFIX "unitRAM",
                         ut.ram, TSR_KUEUE_NOTE_PREFIX "localStorage", ut.storage);
}

/* Moves labels and annotations (stolen) into obj's metadata; NULL ones fail. */
static int set_metadata(json_t *obj, json_t *labels, json_t *annotations)
{
        json_t *meta = json_object_get(obj, "metadata");
        int rc = 0;

        if (!labels || json_object_set(meta, "labels", labels))
                rc = TSR_ENOMEM;
        if (!annotations || json_object_set(meta, "annotations", annotations))
                rc = TSR_ENOMEM;
        json_decref(labels);
        json_decref(annotations);
        return rc;
}

/* Takes obj: *out = obj when it and the rest (rc) built, else releases it: TSR_ENOMEM. */
static int finish(json_t *obj, int rc, json_t **out, struct tsr_diag *diag)
{
        if (!obj || rc) {
                json_decref(obj);
                return nomem(diag);
        }
        *out = obj;
        return 0;
}

int tsr_kueue_resource_flavor(const struct tsr_chain_pool *p, const struct tsr_chain_flavor *f,
                              json_t **out, struct tsr_diag *diag)
{
        struct tsr_chain_labels node_labels;
        struct tsr_chain_topology t;
        json_t *obj, *selector;
        int rc = tsr_chain_flavor_node_labels(p, f, &node_labels, diag);

        if (rc)
                return rc;
        tsr_chain_topology(&t);
        selector = json_object();
        if (selector && tsr_kueue_labels_set(selector, &node_labels)) {
                json_decref(selector);
                selector = NULL;
        }
        obj = object("ResourceFlavor", f->name,
                     json_pack("{s:o, s:[{s:s}], s:s}", "nodeLabels", selector, "tolerations",
                               "operator", "Exists", "topologyName", t.name));
        if (obj)
                rc = set_metadata(obj, schedule_labels(p, TSR_KUEUE_TYPE_NODES, f), notes(p));
        return finish(obj, rc, out, diag);
}

static const char *stop_name(enum tsr_kueue_stop_policy stop)
{
        switch (stop) {
        case TSR_KUEUE_STOP_HOLD:
                return "Hold";
        case TSR_KUEUE_STOP_HOLD_AND_DRAIN:
                return "HoldAndDrain";
        case TSR_KUEUE_STOP_NONE:
                break;
        }
        return "None";
}

static json_t *quantity(int64_t v, bool milli)
{
        char s[TSR_QUANTITY_STR_MAX];
        struct tsr_quantity q = {v, milli ? -3 : 0, TSR_QF_DECIMAL_SI};

        return json_string(tsr_quantity_format(&q, s));
}

/*
 * The resource groups: one covering resource over flavors[0..n) with their nominal quotas, or
 * none without a flavor (a group lists one flavor at least).
 */
static json_t *resource_groups(const struct tsr_chain_pool *p, const char *resource,
                               const struct tsr_chain_flavor *flavors, size_t n)
{
        json_t *list = json_array();

        for (size_t i = 0; list && i < n; i++)
                if (json_array_append_new(
                        list, json_pack("{s:s, s:[{s:s, s:o}]}", "name", flavors[i].name,
                                        "resources", "name", resource, "nominalQuota",
                                        quantity(flavors[i].nominal, !p->product)))) {
                        json_decref(list);
                        list = NULL;
                }
        if (!list || n > 0)
                return json_pack("[{s:[s], s:o}]", "coveredResources", resource, "flavors", list);
        json_decref(list);
        return json_array();
}

int tsr_kueue_cluster_queue(const struct tsr_chain_pool *p, const struct tsr_chain_flavor *flavors,
                            size_t n, enum tsr_kueue_stop_policy stop, bool check_active,
                            json_t **out, struct tsr_diag *diag)
{
        char resource[TSR_KEY_MAX] = "cpu";
        json_t *obj, *spec;
        int rc = 0;

        if (n > TSR_KUEUE_GROUP_FLAVORS_MAX)
                return tsr_diag_set(diag, TSR_ETOOBIG,
                                    "ClusterQueue %s: %zu flavors, one resource group holds %d",
                                    p->name, n, TSR_KUEUE_GROUP_FLAVORS_MAX);
        if (p->product)
                tsr_credits_resource(tsr_catalog_manufacturer(p->product->manufacturer), resource,
                                     sizeof(resource));
        spec = json_pack("{s:{}, s:s, s:{s:s, s:s}, s:{s:s, s:{s:s}, s:s}, s:o}",
                         "namespaceSelector", "stopPolicy", stop_name(stop), "flavorFungibility",
                         "whenCanBorrow", "TryNextFlavor", "whenCanPreempt", "MayStopSearch",
                         "preemption", "reclaimWithinCohort", "Never", "borrowWithinCohort",
                         "policy", "Never", "withinClusterQueue", "LowerPriority", "resourceGroups",
                         resource_groups(p, resource, flavors, n));
        if (spec && p->product && check_active &&
            json_object_set_new(
                spec, "admissionChecksStrategy",
                json_pack("{s:[{s:s}]}", "admissionChecks", "name", TSR_KUEUE_NODE_DEVICES))) {
                json_decref(spec);
                spec = NULL;
        }
        obj = object("ClusterQueue", p->name, spec);
        if (obj)
                rc = set_metadata(obj, schedule_labels(p, TSR_KUEUE_TYPE_INSTANCETYPES, NULL),
                                  notes(p));
        return finish(obj, rc, out, diag);
}

int tsr_kueue_local_queue(const struct tsr_chain_pool *p, const char *ns, json_t **out,
                          struct tsr_diag *diag)
{
        if (!ns || !*ns)
                return tsr_diag_set(diag, TSR_EINVAL, "LocalQueue %s: no namespace", p->entrance);
        return finish(json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s}}", "apiVersion",
                                TSR_KUEUE_API_VERSION, "kind", "LocalQueue", "metadata", "name",
                                p->entrance, "namespace", ns, "annotations",
                                TSR_KUEUE_QUEUE_ANNOTATION, p->name, "spec", "clusterQueue",
                                p->name),
                      0, out, diag);
}

int tsr_kueue_topology(json_t **out, struct tsr_diag *diag)
{
        struct tsr_chain_topology t;
        json_t *levels = json_array();

        tsr_chain_topology(&t);
        for (size_t i = 0; levels && i < t.n_levels; i++)
                if (json_array_append_new(levels, json_pack("{s:s}", "nodeLabel", t.levels[i]))) {
                        json_decref(levels);
                        levels = NULL;
                }
        return finish(object("Topology", t.name, json_pack("{s:o}", "levels", levels)), 0, out,
                      diag);
}

int tsr_kueue_admission_check(json_t **out, struct tsr_diag *diag)
{
        return finish(
            object("AdmissionCheck", TSR_KUEUE_NODE_DEVICES,
                   json_pack("{s:s}", "controllerName", TSR_KUEUE_NODE_DEVICES_CONTROLLER)),
            0, out, diag);
}
