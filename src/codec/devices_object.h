/*
 * devices_object.h - the worker.gpustack.ai/v1alpha1 `Devices` object of one node (kind Devices,
 * cluster-scoped, metadata.name = the node's name; spec/upstream-behavior.md §5 and §8) and the
 * per-card fit labels of its Node (§6), as the device manager publishes them and the simulator
 * prints them.
 *
 * The shape is the upstream CRD's (gpustack-operator api/worker/v1alpha1, Devices), so an API
 * server holding that CRD prunes nothing but the one tessera extension marked below:
 *
 *   spec.groups[0]    {id: <group id>, manufacturer, name: <driver name>, memory: <VRAM MiB>,
 *                     acceleratorSlicedDetail: {
 *                       logical: {coresPercentageOvercommit, count: <slice slots, summed>}
 *                         -- only when some accelerator is unpartitioned,
 *                       physical: {count: <partition counts, summed>, profiles: [{name,
 *                         count: <static ceilings, summed>, memoryMib}]}
 *                         -- only when some accelerator is partitioned},
 *                     accelerators: [{id: <UUID>, index, physicalIndexes: [index],
 *                       topology: {pciBusId: <the driver's, "" unknown>, pciRootId: "",
 *                         pciClass: "", numaAffinity: "", cpuAffinity: ""},
 *                       status: {unhealthy: false, and
 *                         logicalSliced: {coresPercentageOvercommit, count: <slice slots>}
 *                           (unpartitioned) or
 *                         physicalSliced: {count: <largest ceiling>, profiles: [{name, memoryMib,
 *                           computeSlices, memorySlices: <size on the memory-slice axis>,
 *                           count: <static ceiling>, placements: [{start, length}] <every legal
 *                           placement on an empty accelerator, by start>}]} (partitioned)}}]}
 *                     -- the capability; it never moves with allocations
 *   status.groups[0]  {id, manufacturer, accelerators: [{id, index, mode, allocated, remaining,
 *                     and allocatedSlices (unpartitioned; a tessera extension the upstream
 *                     schema lacks) or remainingProfiles and allocatedProfiles [{name, count}]
 *                     over every offered profile, and, while a partition is live,
 *                     allocatedPhysicalPlacements [{start, length}] of the live partitions by
 *                     start (partitioned)}]} -- the ledger
 * With no accelerator both lists of groups are empty. An accelerator's offered profiles are
 * listed in the product's table order, the group's as they first appear; memoryMib is the profile's
 * nominal size (tsr_mig_profile_nominal_mib). tessera does not probe health, so a detected
 * accelerator is never unhealthy; it reads no PCI tree, NUMA node or CPU list, so those topology
 * fields are "" (the schema requires them).
 *
 * The readers invert the two halves: tsr_devices_object_capabilities the spec,
 * tsr_devices_object_ledger the status, which recovers each live partition's profile (the object
 * carries only its {start, length}) from allocatedProfiles' counts. Where two assignments of
 * profiles to placements both fit the counts (a 1g.20gb at 0 and a 2g.20gb at 2, or the other way
 * round), the object does not tell them apart and the reader returns one of them; every figure
 * derived from the ledger (counts per profile, occupied slices, free counts, views) is the same.
 *
 * Ownership: tsr_devices_object_build returns a new object (json_decref); caps and ledger are
 * borrowed and only read. The readers borrow devices (the ledger reader caps too, only read) and
 * fill the caller's arrays (caps, out); on failure those hold unspecified values (callers pass
 * scratch storage). Pure; thread-safe.
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

/*
 * The capability side read back from a Devices object (what the controller judges with): each
 * spec accelerator as tsr_capability_detect makes it for the group's product (found by its driver
 * name), partitioned when it carries status.physicalSliced, with its PCI bus id. One product per
 * object. Returns 0 with caps[0..*n), or TSR_EINVAL (not an object, an unknown product, a second
 * product, an accelerator without id, index or status) or TSR_ETOOBIG (more than max), with
 * diag. devices is borrowed.
 */
int tsr_devices_object_capabilities(json_t *devices, struct tsr_accel_cap *caps, size_t max,
                                    size_t *n, struct tsr_diag *diag);

/*
 * The ledger side read back from a Devices object: out[j] is the ledger entry of caps[j], the
 * accelerator whose status entry (in any status group) has index caps[j].index. caps[0..n) are what
 * tsr_devices_object_capabilities returned for the same object, so with caps[i].index == i (as
 * it returns for what tsr_devices_object_build writes) out is index-aligned as tsr_ledger_build's
 * is. Each status accelerator needs its spec accelerator's id, mode (0-4) and non-negative
 * allocated and remaining; an unpartitioned one's allocatedSlices, when present, is within the
 * cap's slice slots (absent, as an API server holding the upstream CRD prunes it, it reads 0); a
 * partitioned one needs allocatedProfiles [{name, count}] naming offered profiles at most once
 * (an unlisted one counts 0) and allocatedPhysicalPlacements [{start, length}] (absent: none
 * live), disjoint, each a legal placement of an offered profile of that length; the counts must
 * total the placements and admit an assignment of profiles to them (found by backtracking over
 * augmenting paths, never greedily). remainingProfiles and the group's id and manufacturer are
 * derived and not read. An accelerator absent from status (no status yet, or fewer listed) reads
 * as untouched (tsr_ledger_reset). The result must pass tsr_ledger_check (an over-charged entry,
 * allocated above TSR_UNITS_PER_ACCEL, is refused). Returns 0 with out[0..n), or TSR_EINVAL with
 * diag naming the position, the accelerator index and the field (not an object, an index naming
 * no accelerator of caps or listed twice, another id, a mode outside the enum, a negative
 * number, slices past the slots, a placement off the axis, overlapping or taken by no offered
 * profile, counts that do not match the placements, a broken ledger invariant). devices and caps
 * are borrowed; on failure out[0..n) is unspecified (pass scratch storage).
 */
int tsr_devices_object_ledger(json_t *devices, const struct tsr_accel_cap *caps, size_t n,
                              struct tsr_accel_ledger *out, struct tsr_diag *diag);

#endif
