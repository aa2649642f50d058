/*
 * instance.h - the worker.gpustack.ai/v1alpha1 Instance webhooks: validating and defaulting
 * (seeds/admission.md "The InstanceType and Instance webhooks", "Update validation while an object
 * is deleted"; spec/upstream-behavior.md §10). Both are registered on CREATE and UPDATE with
 * failurePolicy Fail, and read the InstanceType spec.type names through lookup->instancetype.
 *
 * Update while deleting: Instance is the one kind that KEEPS the guard. An UPDATE whose object
 * carries metadata.deletionTimestamp never reaches these handlers: their routes set
 * deletion_guard (routes.c, dispatch.h), because the defaulting half reads the InstanceType and
 * fails closed: an InstanceType deleted ahead of its Instances would otherwise leave each one
 * undeletable (a finalizer-clearing update is an UPDATE).
 *
 * Validating, CREATE (every broken rule in one answer where upstream lists them):
 *   metadata.namespace: Invalid value: "<ns>": cannot create instance in reserved namespace
 *       (403; the reserved namespaces are kube-system and the operator's own)
 *   spec.type: Required value: type must be specified                                  (403)
 *   spec.type: Not found: "<type>"        (403; only an Instance that is not stopped needs one)
 *   Internal error occurred: instance type <t> is not ready yet; retry
 *       (500, retryable: a slice or partition request before the accelerator detail is computed)
 * then, 422 Instance.worker.gpustack.ai "<name>" is invalid: [...], resources against the type:
 *   partition profile (spec.resources.acceleratorPartitionedProfile) on an accelerated type:
 *     Forbidden: a hardware partition and a logical slice percentage are mutually exclusive;
 *         clear acceleratorSlicedMemoryPercentage and acceleratorSlicedCoresPercentage
 *     Invalid value: "<p>": manufacturer <m> does not support hardware partitioning
 *         (status.detail.manufacturer has no partition kind in the catalog)
 *     Forbidden: instance type <t> does not offer hardware partitioning
 *         (status.detail.slicedDetail.physical.count is 0)
 *     Invalid value: "<p>": instance type <t> does not offer this partition profile; offered:
 *         [<a> <b> ...]   (the offered set of status.detail.slicedDetail.physical.profiles, Go's
 *         %v of a []string)
 *     Invalid value: "<p>": partition profile name does not yield a valid resource name
 *     spec.resources.accelerator: Invalid value: "<n>": accelerator request must be exactly 1 for
 *         a partitioned request
 *   logical slice (a non-zero acceleratorSliced*Percentage):
 *     spec.resources.acceleratorSlicedMemoryPercentage: Forbidden: instance type <t> does not
 *         offer logical slicing   (status.detail.slicedDetail.logical.count is 0; on a pool that
 *         offers partitions instead the error points at acceleratorPartitionedProfile and says
 *         "...does not offer logical slicing; request a hardware partition with
 *         acceleratorPartitionedProfile")
 *     <path>: Invalid value: <n>: must be between 0 and 100
 *     spec.resources.accelerator: Invalid value: "<n>": accelerator request must be exactly 1 for
 *         a sliced request
 *   whole accelerators (no profile, no percentage):
 *     accelerator request cannot be negative | accelerator request must be a whole number of cards
 *     | exceeds the accelerator capacity <c> of instance type <t>   (status.accelerator.capacity:
 *     the pool's total, not what is unrequested now)
 *   a CPU-only type: accelerator request must not be specified for non-acceleratable instance type
 *   CPU request cannot be negative | RAM request cannot be negative | local storage request cannot
 *     be negative
 *   CPU-only type, CPU against status.cpu.capacity (the pool's total, never the largest node's nor
 *     what is free now, so a request that must wait is admitted and waits in its queue):
 *     instance type <t> has no CPU capacity: no managed node currently backs it
 *     | exceeds the CPU capacity <c> of instance type <t>
 *   the unit spec, with count = the accelerator count (accelerated) or the CPU count (CPU-only),
 *   at least 1: exceeds the maximum CPU <unitCPU x count> of instance type <t> (accelerated only)
 *     | exceeds the maximum RAM <unitRAM x count> of instance type <t>
 *     | exceeds the local storage <spec.localStorage> of instance type <t>
 *   the volume: cannot specify both ephemeral and persistent of volume | either ephemeral or
 *     persistent of volume should be specified | capacity of ephemeral volume must be positive |
 *     name of the persistent volume must be specified
 *
 * Validating, UPDATE: while the stored Instance is not stopped, type, image, imagePullPolicy,
 * command, privileged, ports, env, volumeMount, imagePullSecret, resources, sshPublicKey and
 * nodeName are immutable ("spec.<f>: Forbidden: <f> is immutable"); volume always is. Starting a
 * stopped Instance (spec.stop true -> false) needs status.phase "Stopped" ("spec.stop: Forbidden:
 * can only start stopped instance"), an existing InstanceType, and passes the CREATE resource
 * checks again, so the unit spec is enforced on Create and on Update (a resumed Instance whose
 * resources were edited while stopped). Stopping one in phase "Starting" is refused ("spec.stop:
 * Forbidden: cannot stop starting instance").
 *
 * Not checked, for want of a lookup: spec.nodeName naming an existing Node (upstream refuses an
 * unknown node on CREATE), and additionalVolumes.
 *
 * Defaulting (CREATE and UPDATE): imagePullPolicy IfNotPresent, volumeMount /workspace, an empty
 * resources object; then, for an Instance with a type that is not stopped, from its InstanceType
 * (missing: 403 "spec.type: Not found"): on an accelerated type an absent accelerator count
 * becomes 1; a partition profile sizes host CPU/RAM by its share of the card's VRAM (profile
 * memoryMib x 100 / status.detail.memory in MiB, clamped to 1..100; an offered profile that cannot
 * be sized yet is a 500 retry), a logical slice by its memory percentage (the other percentage
 * copied from the one set; a zero count becomes 1), a whole-card request by unit x count (count 0
 * read as 1); a CPU-only type's CPU defaults to 1 and its RAM is unitRAM x cores. CPU and RAM are
 * rewritten whenever instance-general-resources-overcommit is on (the default), else only when
 * zero. A zero localStorage becomes 15Gi, capped at the InstanceType's localStorage. Quantities are
 * written as canonical strings ("2", "32Gi", "1200m").
 *
 * Reading the InstanceType: upstream's shape (status.detail.manufacturer, status.detail.memory as
 * a quantity, unitResources.cpu as a string; the simulator renders the same) and older shapes
 * (this project's former rendering: no detail manufacturer, spec.memory in MiB as a number,
 * unitResources.cpu as a number) are all read. The accelerator detail counts as computed when it
 * names a manufacturer or carries slicedDetail; without a detail manufacturer the manufacturer is
 * the accelerator group's first word ("nvidia-h100-80gb-hbm3" -> nvidia). The detail and the
 * card's VRAM are read by instancetype_detail.h, the reader the Pod webhook shares: status.detail.
 * memory, else spec.memory (a quantity string, or an integer in MiB); a memory that is there but
 * malformed fails a defaulting that needs it with TSR_EPARSE.
 *
 * Both handlers are pure (handler.h). DELETE and CONNECT are allowed unchanged. A field of the
 * wrong JSON type is TSR_EPARSE with diag; a lookup without an instancetype reader is TSR_EINVAL;
 * memory exhaustion is TSR_ENOMEM.
 */
#ifndef TSR_WEBHOOK_INSTANCE_H
#define TSR_WEBHOOK_INSTANCE_H

#include "webhook/handler.h"

#define TSR_INSTANCE_KIND "Instance.worker.gpustack.ai"

/* The validating handler (a tsr_webhook_handler); reads the system namespace from lookup. */
int tsr_webhook_instance_validate(const struct tsr_webhook_lookup *lookup,
                                  const struct tsr_review *review, struct tsr_verdict *verdict,
                                  struct tsr_diag *diag);

/*
 * The defaulting handler (a tsr_webhook_handler); reads the Setting
 * instance-general-resources-overcommit from lookup.
 */
int tsr_webhook_instance_mutate(const struct tsr_webhook_lookup *lookup,
                                const struct tsr_review *review, struct tsr_verdict *verdict,
                                struct tsr_diag *diag);

#endif
