/*
 * instancetype.h - the worker.gpustack.ai/v1alpha1 InstanceType webhooks: validating and
 * defaulting (seeds/admission.md "The InstanceType and Instance webhooks";
 * spec/upstream-behavior.md §9, §10). Both are registered on CREATE and UPDATE with failurePolicy
 * Fail, and both keep working on an InstanceType being deleted: their rules read nothing but the
 * object, so the "update while deleting" guard is not theirs (seeds/admission.md "Update validation
 * while an object is deleted").
 *
 * Validating, CREATE - the complete admin input, read independently of any Setting; every broken
 * rule is listed in one 422 answer,
 *   InstanceType.worker.gpustack.ai "<name>" is invalid: [<e1>, <e2>, ...]
 * with the errors
 *   spec.acceleratorGroup: Required value: must be specified when acceleratable is true
 *   spec.os: Required value: must be specified
 *   spec.arch: Required value: must be specified
 *   spec.unitResources.cpu: Invalid value: "<cpu>": must be a positive integer with no unit suffix
 *       (accelerated: any unitless positive integer that fits int32, Go's strconv.ParseInt syntax)
 *   spec.unitResources.cpu: Invalid value: "<cpu>": must be 1 when acceleratable is false
 *       (CPU-only: exactly one core)
 *   spec.unitResources.ram: Invalid value: "<ram>": must be a positive integer with a
 *       case-sensitive "Gi" suffix
 *   spec.localStorage: Invalid value: "<v>": must be a positive integer with a case-sensitive "Gi"
 *       suffix
 * A unit field written as a JSON number reads as its decimal text (this project's own rendering,
 * src/sim/render.c, writes the core count as a number); any other non-string type is TSR_EPARSE.
 * Validating, UPDATE - only immutability is checked (a legacy object stored before a tightened
 * create rule can still be renamed or taken out of service): the spec, with displayName and
 * inactive masked, must decode to the same value as the stored one (an absent field equals its
 * zero value), else
 *   InstanceType.worker.gpustack.ai "<name>" is invalid: spec: Forbidden: is immutable except
 *   displayName and inactive
 * Upstream's newest code also lets `description` change; the seed names only displayName and
 * inactive, and the seed wins (DESIGN.md), so description is frozen here.
 *
 * Defaulting (CREATE and UPDATE):
 *   - an empty spec.generalGroup becomes "generic";
 *   - an accelerated type without spec.acceleratorGroup gets nothing more (validation refuses it);
 *   - the pool's schedule labels: feature.gpustack.ai/acceleratable "true"|"false",
 *     kubernetes.io/os and kubernetes.io/arch (when set), acceleratable.feature.gpustack.ai/<group>
 *     "true" on an accelerated type, general.feature.gpustack.ai/<generalGroup> "true" only while
 *     instance-type-aware-cpu-manufacturer is on and the group is not "generic"; any other label
 *     under those two feature prefixes (left by a group or acceleratable change) is removed;
 *   - schedule.gpustack.ai/queue-entrance: gpustack-fnv64-<16 hex of FNV-1a-64 of the name>, the
 *     LocalQueue fronting the type's ClusterQueue (tsr_instancetype_entrance).
 *   No descriptor is enriched from a ResourceFlavor: the newest upstream computes the observed
 *   descriptor into status.detail from its reconciler instead, and the handler lookup reads no
 *   ResourceFlavors (so no cpuDetail fold either).
 *
 * Both handlers are pure (handler.h). A review that is not CREATE/UPDATE, or has no object, is
 * allowed unchanged. An object of the wrong shape (spec or labels not an object, a field of the
 * wrong JSON type) is TSR_EPARSE with diag; memory exhaustion is TSR_ENOMEM.
 */
#ifndef TSR_WEBHOOK_INSTANCETYPE_H
#define TSR_WEBHOOK_INSTANCETYPE_H

#include "webhook/handler.h"

#define TSR_INSTANCETYPE_KIND "InstanceType.worker.gpustack.ai"

/* The validating handler (a tsr_webhook_handler). The lookup is not read. */
int tsr_webhook_instancetype_validate(const struct tsr_webhook_lookup *lookup,
                                      const struct tsr_review *review, struct tsr_verdict *verdict,
                                      struct tsr_diag *diag);

/*
 * The defaulting handler (a tsr_webhook_handler); reads the Setting
 * instance-type-aware-cpu-manufacturer from lookup.
 */
int tsr_webhook_instancetype_mutate(const struct tsr_webhook_lookup *lookup,
                                    const struct tsr_review *review, struct tsr_verdict *verdict,
                                    struct tsr_diag *diag);

#endif
