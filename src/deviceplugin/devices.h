/*
 * devices.h - the device list a family's plugin streams to the kubelet (ListAndWatch): every
 * token of every accelerator, with its health, as core/tokens.h defines them.
 *
 * Order is accelerator index, then token index, so two lists of an unchanged node compare equal
 * element by element (the plugin sends an update only when the list changed). Ownership: the
 * array is the caller's (free with free()). Pure.
 */
#ifndef TSR_DEVICEPLUGIN_DEVICES_H
#define TSR_DEVICEPLUGIN_DEVICES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/ledger.h"
#include "core/tokens.h"
#include "deviceplugin/node.h"

struct tsr_dp_device {
        char id[TSR_TOKEN_ID_MAX];
        unsigned accel; /* index of the accelerator the token belongs to */
        bool healthy;
};

/*
 * Lists family f's tokens on node given its ledger (index-aligned with node->caps) into a new
 * array *out of *n entries (NULL and 0 when there are none). Returns 0, or TSR_ENOMEM, or
 * TSR_EINVAL when a token ID cannot be formed (a UUID with ':').
 */
int tsr_dp_devices(const struct tsr_dp_node *node, const struct tsr_accel_ledger *ledger,
                   enum tsr_family f, struct tsr_dp_device **out, size_t *n);

/* True when a[0..na) and b[0..nb) are the same list (IDs and health, in order). */
bool tsr_dp_devices_equal(const struct tsr_dp_device *a, size_t na, const struct tsr_dp_device *b,
                          size_t nb);

#endif
