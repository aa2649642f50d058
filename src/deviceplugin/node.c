/*
 * node.c - a node's device-plugin view: families, resource names, accelerator lookup.
 */
#include "deviceplugin/node.h"

#include "base/err.h"

#include <string.h>

const enum tsr_family tsr_dp_families[TSR_DP_FAMILIES] = {
    TSR_FAMILY_EXCLUSIVE,   TSR_FAMILY_SHARED,     TSR_FAMILY_SLICED,
    TSR_FAMILY_PARTITIONED, TSR_FAMILY_VISIBILITY,
};

int tsr_dp_node_init(struct tsr_dp_node *out, const struct tsr_accel_cap *caps, size_t n)
{
        if (n == 0 || !caps[0].product)
                return TSR_EINVAL;
        for (size_t i = 0; i < n; i++)
                if (caps[i].product != caps[0].product || caps[i].index != i)
                        return TSR_EINVAL;
        out->product = caps[0].product;
        out->m = tsr_catalog_manufacturer(out->product->manufacturer);
        if (!out->m)
                return TSR_EINVAL;
        out->caps = caps;
        out->n = n;
        return tsr_instancetype_group_id(out->product, out->group, sizeof(out->group));
}

int tsr_dp_resource_name(const struct tsr_dp_node *node, enum tsr_family f, char *out)
{
        switch (f) {
        case TSR_FAMILY_EXCLUSIVE:
                return tsr_key_format(out, node->m, TSR_KEY_EXCLUSIVE, NULL);
        case TSR_FAMILY_SHARED:
                return tsr_key_format(out, node->m, TSR_KEY_SHARED, NULL);
        case TSR_FAMILY_SLICED:
                return tsr_key_format(out, node->m, TSR_KEY_SLICED, NULL);
        case TSR_FAMILY_PARTITIONED:
                return tsr_key_format(out, node->m, TSR_KEY_PARTITIONED, NULL);
        case TSR_FAMILY_VISIBILITY:
                return tsr_key_format(out, node->m, TSR_KEY_VISIBILITY, NULL);
        default:
                return TSR_EINVAL;
        }
}

int tsr_dp_node_find(const struct tsr_dp_node *node, const char *uuid)
{
        for (size_t i = 0; i < node->n; i++)
                if (!strcmp(node->caps[i].uuid, uuid))
                        return (int)i;
        return -1;
}
