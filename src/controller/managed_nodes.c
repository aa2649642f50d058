/*
 * managed_nodes.c - the managed-node view of managed_nodes.h, built from one copy of the cached
 * Nodes and one of the cached Devices.
 */
#include "controller/managed_nodes.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "codec/devices_object.h"
#include "controller/controller_int.h"
#include "kube/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void label_or(json_t *node, const char *key, const char *dflt, char *out, size_t len)
{
        const char *v = json_string_value(
            json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"), key));

        snprintf(out, len, "%s", v && *v ? v : dflt);
}

/* The Node's allocatable CPU in milli-cores, 0 when absent or unreadable. */
static int64_t cpu_milli(json_t *node)
{
        const char *s = json_string_value(json_object_get(
            json_object_get(json_object_get(node, "status"), "allocatable"), "cpu"));
        struct tsr_quantity q;
        int64_t m = 0;

        if (!s || tsr_quantity_parse(s, &q, NULL) || tsr_quantity_milli(&q, &m) || m < 0)
                return 0;
        return m;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct ctl_node *)a)->name, ((const struct ctl_node *)b)->name);
}

/* Points e's chain node at e's own name, os and arch (again after e moved). */
static void point_chain(struct ctl_node *e)
{
        e->chain.name = e->name;
        e->chain.os = e->os;
        e->chain.arch = e->arch;
}

/* Fills e from Node node and its Devices devices (both taken; devices NULL: CPU-only). */
static int fill(struct ctl_node *e, json_t *node, json_t *devices)
{
        struct tsr_diag diag;
        size_t n = 0;

        memset(e, 0, sizeof(*e));
        e->node = node;
        e->devices = devices;
        snprintf(e->name, sizeof(e->name), "%s", ctl_meta_str(node, "name"));
        label_or(node, TSR_CHAIN_OS_LABEL, "linux", e->os, sizeof(e->os));
        label_or(node, TSR_CHAIN_ARCH_LABEL, "amd64", e->arch, sizeof(e->arch));
        point_chain(e);
        e->chain.cpu_milli = cpu_milli(node);
        e->caps = calloc(CTL_NODE_ACCELS_MAX, sizeof(*e->caps));
        if (!e->caps)
                return TSR_ENOMEM;
        tsr_diag_clear(&diag);
        if (devices &&
            tsr_devices_object_capabilities(devices, e->caps, CTL_NODE_ACCELS_MAX, &n, &diag)) {
                snprintf(e->fault, sizeof(e->fault), "%s", diag.msg);
                n = 0;
        }
        e->chain.product = n ? e->caps[0].product : NULL;
        e->chain.accel_count = (unsigned)n;
        return 0;
}

/* Whether the Setting node-management-manual is on (read once per load). */
static bool manual_management(struct tsr_controller *c)
{
        struct tsr_settings settings = c->cfg.settings;

        tsr_kube_cache_settings(c->cache, c->ns, &settings);
        return settings.value[TSR_SETTING_NODE_MANAGEMENT_MANUAL];
}

/*
 * Loads node as ctl_node_load says. A Node with no Devices object is managed (CPU-only) unless
 * management is manual, when only one labelled gpustack.ai/managed=true is.
 */
static int load(struct tsr_controller *c, json_t *node, bool manual, struct ctl_node *out,
                bool *managed)
{
        const char *name = ctl_meta_str(node, "name");
        const char *label = json_string_value(json_object_get(
            json_object_get(json_object_get(node, "metadata"), "labels"), TSR_CHAIN_MANAGED_LABEL));
        json_t *devices;
        int rc;

        *managed = false;
        if (!name || strlen(name) >= sizeof(out->name))
                return 0;
        devices = tsr_kube_cache_get(c->cache, TSR_KUBE_CACHE_DEVICES, NULL, name);
        if (!devices && manual && !(label && !strcmp(label, "true")))
                return 0;
        rc = fill(out, json_incref(node), devices);
        if (rc) {
                ctl_node_release(out);
                return rc;
        }
        *managed = true;
        return 0;
}

int ctl_node_load(struct tsr_controller *c, json_t *node, struct ctl_node *out, bool *managed)
{
        return load(c, node, manual_management(c), out, managed);
}

/* Loads every managed node into *out. 0, or TSR_ENOMEM with diag (*out then empty). */
static int nodes_load(struct tsr_controller *c, struct ctl_nodes *out, struct tsr_diag *diag)
{
        json_t *nodes = tsr_kube_cache_list(c->cache, TSR_KUBE_CACHE_NODES), *node;
        bool manual = manual_management(c);
        size_t i;
        int rc = 0;

        memset(out, 0, sizeof(*out));
        if (!nodes)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        out->v = calloc(json_array_size(nodes) + 1, sizeof(*out->v));
        if (!out->v) {
                json_decref(nodes);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        json_array_foreach(nodes, i, node)
        {
                bool managed;

                rc = load(c, node, manual, &out->v[out->n], &managed);
                if (rc)
                        break;
                if (managed)
                        out->n++;
        }
        json_decref(nodes);
        if (rc) {
                ctl_nodes_release(out);
                return tsr_diag_set(diag, rc, "out of memory");
        }
        qsort(out->v, out->n, sizeof(*out->v), by_name);
        out->chain = calloc(out->n + 1, sizeof(*out->chain));
        if (!out->chain) {
                ctl_nodes_release(out);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        for (i = 0; i < out->n; i++) {
                /* the sort moved the entries: their chain strings are pointed at them again */
                point_chain(&out->v[i]);
                out->chain[i] = out->v[i].chain;
        }
        return 0;
}

/* The kinds the view is read from, whose generations say when to build it again. */
static const enum tsr_kube_cache_resource view_kinds[CTL_NODES_VIEW_KINDS] = {
    TSR_KUBE_CACHE_NODES, TSR_KUBE_CACHE_DEVICES, TSR_KUBE_CACHE_SETTINGS};

const struct ctl_nodes *ctl_nodes_view(struct tsr_controller *c, struct tsr_diag *diag)
{
        unsigned long gen[CTL_NODES_VIEW_KINDS];
        bool same = c->nodes_view_built;

        /* Taken before reading: a change during the read leaves the memo older than its
         * generations say, so the next call builds it again, never the other way round. */
        for (size_t k = 0; k < CTL_NODES_VIEW_KINDS; k++) {
                gen[k] = tsr_kube_cache_generation(c->cache, view_kinds[k]);
                same &= gen[k] == c->nodes_view_gen[k];
        }
        if (same)
                return &c->nodes_view;
        ctl_nodes_release(&c->nodes_view);
        c->nodes_view_built = false;
        if (nodes_load(c, &c->nodes_view, diag))
                return NULL;
        memcpy(c->nodes_view_gen, gen, sizeof(gen));
        c->nodes_view_built = true;
        return &c->nodes_view;
}

void ctl_node_release(struct ctl_node *n)
{
        json_decref(n->node);
        json_decref(n->devices);
        free(n->caps);
        memset(n, 0, sizeof(*n));
}

void ctl_nodes_release(struct ctl_nodes *nodes)
{
        for (size_t i = 0; i < nodes->n; i++)
                ctl_node_release(&nodes->v[i]);
        free(nodes->v);
        free(nodes->chain);
        memset(nodes, 0, sizeof(*nodes));
}
