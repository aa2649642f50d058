/*
 * node.h - one node's accelerators as its device plugins serve them: the detected capabilities,
 * the token group, and the resource each family registers with the kubelet.
 *
 * One manufacturer and one product per node view (a node with two models runs one view per
 * group). Five resources are always registered, so their pools read 0 rather than vanish:
 * <base> (exclusive), <base>.shared, <base>.sliced, <base>.partitioned (when the manufacturer has
 * a partition kind) and device.gpustack.ai/<manufacturer>.visibility.
 * Ownership: the view borrows caps; the caller keeps them alive and unchanged while it is used
 * (capabilities change only on re-detection, which builds a new view). Pure.
 */
#ifndef TSR_DEVICEPLUGIN_NODE_H
#define TSR_DEVICEPLUGIN_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/capability.h"
#include "core/catalog.h"
#include "core/instancetype.h"
#include "core/keys.h"

/* The families a node registers a device plugin for, in registration order. */
#define TSR_DP_FAMILIES 5
extern const enum tsr_family tsr_dp_families[TSR_DP_FAMILIES];

struct tsr_dp_node {
        const struct tsr_manufacturer *m;
        const struct tsr_product *product;
        const struct tsr_accel_cap *caps; /* caps[i].index == i */
        size_t n;
        char group[TSR_NAME_MAX]; /* token group: the InstanceType group id of the product */
};

/*
 * Fills *out for the n accelerators caps (one product, at least one). Returns 0, or TSR_EINVAL
 * when n is 0, products are mixed, or an index is out of place.
 */
int tsr_dp_node_init(struct tsr_dp_node *out, const struct tsr_accel_cap *caps, size_t n);

/*
 * Writes the resource name family f registers (TSR_KEY_MAX bytes). Returns 0, or TSR_EINVAL for a
 * family the node's manufacturer does not serve (partitioned without a partition kind, none).
 */
int tsr_dp_resource_name(const struct tsr_dp_node *node, enum tsr_family f, char *out);

/* The accelerator whose UUID is uuid, or -1. */
int tsr_dp_node_find(const struct tsr_dp_node *node, const char *uuid);

#endif
