/*
 * managed_nodes.h - the controller's view of the nodes it manages, read from its caches: every
 * Node (with the Setting node-management-manual on, only those labelled gpustack.ai/managed=true
 * and those with a Devices object), sorted by name. A Node with a Devices object of its name (the
 * device manager runs there) serves its product's pool; one without serves only the generic CPU
 * pool. Each carries what the chain reads of it (core/chain.h: os, arch, allocatable CPU, the
 * product and its accelerator count) and the capability read back from its Devices
 * (tsr_devices_object_capabilities). The node feature labels, the Kueue chain and the
 * AdmissionCheck's snapshot all start from this one view.
 *
 * A Node whose Devices object cannot be read (an unknown product, a malformed spec) is managed
 * but serves no accelerator pool; the fault is kept in its `fault` for the caller to report.
 * Ownership: ctl_nodes_view lends the controller's memo (ctl_nodes_release frees it when the
 * controller stops), ctl_node_load fills one entry (release with ctl_node_release); each entry owns
 * copies of its Node and Devices (NULL for a CPU-only node) objects, and its chain node points into
 * the entry.
 */
#ifndef TSR_CONTROLLER_MANAGED_NODES_H
#define TSR_CONTROLLER_MANAGED_NODES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/capability.h"
#include "core/chain.h"

struct tsr_controller;
struct tsr_diag;

#define CTL_NODE_ACCELS_MAX 64
/* The cache kinds the view is read from: the Nodes, the Devices and the Settings. */
#define CTL_NODES_VIEW_KINDS 3

struct ctl_node {
        struct tsr_chain_node chain; /* its strings point into the fields below */
        char name[254], os[TSR_CHAIN_VALUE_MAX], arch[TSR_CHAIN_VALUE_MAX];
        json_t *node, *devices;
        struct tsr_accel_cap *caps; /* chain.accel_count of them */
        char fault[512];            /* why the Devices object serves nothing, "" if it does */
};

struct ctl_nodes {
        struct ctl_node *v;
        struct tsr_chain_node *chain; /* v[i].chain, index-aligned: what core/chain.h takes */
        size_t n;
};

/*
 * The managed nodes as the caches hold them now: the worker's memo (c->nodes_view), built again
 * only when the Nodes, the Devices or the Settings changed since it was built (their cache
 * generations), so a reconcile that reads the pool costs nothing when the pool did not move.
 * Borrowed until the next call; only the worker thread calls it. NULL with diag on TSR_ENOMEM.
 */
const struct ctl_nodes *ctl_nodes_view(struct tsr_controller *c, struct tsr_diag *diag);

/*
 * Loads one node: node (a cached Node, borrowed) and its Devices object. Returns 0 with
 * *managed false when it is not managed (or has no usable name), 0 with *managed true and
 * *out filled (release with ctl_node_release), or TSR_ENOMEM (*out then empty). A node's own
 * reconciler reads it alone, so its cost does not grow with the pool.
 */
int ctl_node_load(struct tsr_controller *c, json_t *node, struct ctl_node *out, bool *managed);

void ctl_node_release(struct ctl_node *n);

void ctl_nodes_release(struct ctl_nodes *nodes);

#endif
