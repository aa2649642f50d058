/*
 * instancetype_object.h - the worker.gpustack.ai/v1alpha1 `InstanceType` of one pool, as the
 * controller authors and reports it on a cluster and the simulator prints it: one builder for
 * both, so a scenario and a cluster show the same object and the same `kubectl get
 * instancetypes` rows (spec/upstream-behavior.md §5, §9, §10, §15).
 *
 *   metadata  {name: the pool's (= its ClusterQueue's), labels
 *             {schedule.gpustack.ai/queue-entrance: the entrance LocalQueue}}
 *   spec      {acceleratable, os, arch, unitResources {cpu, ram} and localStorage (the unit
 *             preset as spec strings, core/printable.h), generalGroup: "generic" (the value
 *             the InstanceType webhook defaults), and acceleratorGroup: aKey for an accelerated
 *             pool} -- authored once; the controller never edits it afterwards
 *   status    {phase, phaseMessage (when given), entrance,
 *             accelerator | acceleratorShared | acceleratorSliced: {capacity, onceMaxRequest,
 *             remaining}, acceleratorPartitioned: the same plus remainingProfiles and
 *             allocatedProfiles [{name, count}] over every offered profile, cpu: the CPU view,
 *             detail {manufacturer, product, memory "<MiB>Mi" (accelerated pools),
 *             slicedDetail {logical {coresPercentageOvercommit, count}, physical {count,
 *             profiles [{name, count, memoryMib}]}} (capability only)},
 *             printable {unit, accelerator, cpu, partitions}: the tessera extension the CRD's
 *             printer columns read, from core/printable.h's one formatter}
 * A draining pool (its ClusterQueue is HoldAndDrain) reports every view and profile count at 0
 * (the profiles still listed); slicedDetail, being capability, does not change.
 *
 * Ownership: every input is borrowed for the call; each builder returns a new object
 * (json_decref) or NULL when out of memory. Pure; thread-safe.
 */
#ifndef TSR_CODEC_INSTANCETYPE_OBJECT_H
#define TSR_CODEC_INSTANCETYPE_OBJECT_H

#include <jansson.h>
#include <stdbool.h>

#include "core/chain.h"
#include "core/views.h"

#define TSR_INSTANCETYPE_API_VERSION "worker.gpustack.ai/v1alpha1"
#define TSR_INSTANCETYPE_KIND        "InstanceType"
#define TSR_INSTANCETYPE_ENTRANCE    "schedule.gpustack.ai/queue-entrance"
/* The controller's teardown finalizer (tessera's name: upstream's was not found). */
#define TSR_INSTANCETYPE_FINALIZER "worker.gpustack.ai/instancetype-teardown"

/* What the status reports besides the views. */
struct tsr_instancetype_state {
        const char *phase;         /* "Active", "Inactive", ...; NULL reads "Active" */
        const char *phase_message; /* NULL or "": left out */
        bool draining;             /* every view and profile count reads 0 */
};

/* {apiVersion, kind, metadata {name, labels}, spec} of pool p: what the controller creates. */
json_t *tsr_instancetype_object_authored(const struct tsr_chain_pool *p);

/* The status of pool p with views v and CPU view cpu in state st. */
json_t *tsr_instancetype_object_status(const struct tsr_chain_pool *p,
                                       const struct tsr_pool_views *v, const struct tsr_view *cpu,
                                       const struct tsr_instancetype_state *st);

/* The whole object: tsr_instancetype_object_authored with the status set. */
json_t *tsr_instancetype_object_build(const struct tsr_chain_pool *p,
                                      const struct tsr_pool_views *v, const struct tsr_view *cpu,
                                      const struct tsr_instancetype_state *st);

#endif
