/*
 * devices_object.h - the worker.gpustack.ai/v1alpha1 `Devices` object of one node (kind Devices,
 * cluster-scoped, metadata.name = the node's name; spec/upstream-behavior.md §5 and §8) and the
 * per-card fit labels of its Node (§6), as the device manager publishes them and the simulator
 * prints them.
 *
 *   spec.groups[0]    {id: <group id>, manufacturer, name: <driver name>, memory: <VRAM MiB>,
 *                     accelerators: [{id: <UUID>, index, status: {logicalSliced:
 *                     {coresPercentageOvercommit, count}} or {partitioned: {count, profiles:
 *                     [{name, count: <static ceiling>, memoryMib, id: <GI profile id>}]}}}]}
 *                     -- the capability; it never moves with allocations
 *   status.groups[0]  {id, manufacturer, accelerators: [{id, index, mode, allocated, remaining,
 *                     and allocatedSlices (unpartitioned) or remainingProfiles and
 *                     allocatedProfiles [{name, count}] over every offered profile
 *                     (partitioned)}]} -- the ledger
 * With no accelerator both lists of groups are empty. Offered profiles are listed in the
 * product's table order.
 *
 * Ownership: tsr_devices_object_build returns a new object (json_decref); caps and ledger are
 * borrowed and only read. Pure; thread-safe.
 */
#ifndef TSR_CODEC_DEVICES_OBJECT_H
#define TSR_CODEC_DEVICES_OBJECT_H

#include <jansson.h>
#include <stddef.h>

#include "core/capability.h"
#include "core/ledger.h"

struct tsr_diag;

#define TSR_DEVICES_API_VERSION "worker.gpustack.ai/v1alpha1"
#define TSR_DEVICES_KIND        "Devices"

/*
 * Builds the Devices object of node for the n accelerators caps[0..n) (one product) with their
 * ledger entries ledger[0..n). Returns 0 and *out, or TSR_EINVAL (accelerators of different
 * products) or TSR_ENOMEM, with diag.
 */
int tsr_devices_object_build(const char *node, const struct tsr_accel_cap *caps,
                             const struct tsr_accel_ledger *ledger, size_t n, json_t **out,
                             struct tsr_diag *diag);

/*
 * Sets the two fit labels of the n accelerators caps[0..n) (one product) with ledger on the
 * object labels (name -> decimal string): TSR_FIT_SLICED_PREFIX<aKey> and
 * TSR_FIT_SHARED_PREFIX<aKey>, when the model has an unpartitioned accelerator
 * (tsr_fit_labels_project); nothing otherwise. A key that is not a valid label key is skipped
 * (upstream does too). Returns 0, or TSR_ENOMEM or TSR_ETOOBIG (aKey too
 * long) with diag.
 */
int tsr_devices_fit_labels(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                           size_t n, json_t *labels, struct tsr_diag *diag);

#endif
