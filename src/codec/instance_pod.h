/*
 * instance_pod.h - an Instance (worker.gpustack.ai/v1alpha1, namespaced) as the objects that run
 * it: the Pod and the Service `tessera controller` makes for it, and the Instance status read
 * back from them (spec/upstream-behavior.md §10, §15 "InstanceReconciler"; seeds/nvidia-mig.md
 * "Through the `Instance` API" and "An SSH-enabled `Instance` sees its partition").
 *
 * The Pod (tsr_instance_pod_build):
 *   metadata  the Instance's name and namespace; labels kueue.x-k8s.io/queue-name = the
 *             InstanceType's status.entrance (its entrance LocalQueue) and TSR_INSTANCE_LABEL =
 *             the Instance's uid (what the Service selects; a uid, because an Instance name may
 *             be longer than a label value's 63 characters); one ownerReference to the Instance
 *             (controller: true, blockOwnerDeletion left out: the garbage collector deletes the
 *             Pod and the Service with the Instance)
 *   spec      hostIPC: true, automountServiceAccountToken: false, enableServiceLinks: false (as
 *             upstream); runtimeClassName = opts.runtime_class on an accelerated type (the
 *             caller names it only when the manufacturer's RuntimeClass exists, as upstream);
 *             spec.nodeName becomes nodeSelector {kubernetes.io/hostname: <node>}, never
 *             spec.nodeName (a bound Pod would bypass Kueue's scheduling gate); imagePullSecrets
 *             from spec.imagePullSecret; volume "workspace" (spec.volume: ephemeral -> emptyDir
 *             with sizeLimit, persistent -> the claim) mounted at spec.volumeMount (default
 *             /workspace); spec.additionalVolumes[i] as volume "additional-<i>" (persistent,
 *             configMap, secret or hostPath; a model artifact is refused: not supported yet)
 *   main      image, imagePullPolicy, command, env, ports (named "<protocol>-<port>" in lower
 *             case, as upstream), securityContext {runAsUser: 0, privileged when spec.privileged}
 *   resources the accelerator keys in main, requests = limits (core/keys.h names):
 *               accelerator "N" alone                 <base>: N (whole GPUs)
 *               "1" + acceleratorSlicedMemoryPercentage (+ acceleratorSlicedCoresPercentage)
 *                                                     <base>.sliced: 1, .sliced.memory-percentage,
 *                                                     (.sliced.cores-percentage)
 *               "1" + acceleratorPartitionedProfile P <base>.partitioned: 1,
 *                                                     <base>.partitioned.<kind>-P: 1
 *               no accelerator (CPU-only type, or 0)  none
 *             (the Pod webhook, gate 1, folds the .units keys in; they are not written here).
 *             Host limits: cpu, memory and ephemeral-storage = spec.resources cpu, ram and
 *             localStorage, which the Instance webhook sized from the InstanceType's unit spec
 *             (src/webhook/instance.c: whole GPUs x the count, a slice by its memory percentage
 *             of one unit, a partition by its profile's share of the GPU's VRAM, CPU-only: ram =
 *             unit ram x cores). An Instance admitted without that webhook (cpu or ram absent or
 *             0) is sized here by the same rule (tests/unit/test_instance_pod.c keeps the two
 *             equal); localStorage absent leaves ephemeral-storage out.
 *             Host requests: with the Setting instance-general-resources-overcommit (default
 *             true) upstream's kuberequest.ScaleToOvercommit: cpu 100m per (rounded-up) core on
 *             an accelerated type, 800m on a CPU-only one; memory and ephemeral-storage 128Mi per
 *             whole Gi; without it, requests = limits. With opts.strict_quota (what the
 *             controller passes: Kueue v0.17.0 has no quotaCheckStrategy IgnoreUndeclared, and
 *             refuses a Workload with a non-zero request of any resource its ClusterQueue does
 *             not cover, while it skips a zero one) every host request the pool's ClusterQueue
 *             does not cover is written "0": cpu, memory and ephemeral-storage on an accelerated
 *             type (its queue covers only credits), memory and ephemeral-storage on a CPU-only
 *             one (its queue covers cpu). The limits stay.
 *   sshd      only when spec.sshPublicKey.name is set: container "sshd" (image
 *             opts.sshd_image, default TSR_INSTANCE_SSHD_IMAGE; stdin, tty; capabilities
 *             SYS_ADMIN and SYS_PTRACE; env VOLUME_MOUNT_PATH; the Secret named by
 *             sshPublicKey.name mounted read-only at TSR_INSTANCE_SSHD_KEYS, mode 0600) and
 *             shareProcessNamespace: true. On an accelerated Instance it requests the
 *             manufacturer's visibility key device.gpustack.ai/<m>.visibility = the whole-GPU
 *             count (1 for a slice or a partition): the device manager grants it exactly what
 *             `main` holds, a partition as its MIG device (devicemanager/agent.c).
 * The Service (*service; NULL when spec.ports is empty): the Instance's name and namespace, the
 * same label and ownerReference, type NodePort, selector {TSR_INSTANCE_LABEL: uid}, one port per
 * spec.ports entry {name, port, protocol, targetPort: port}.
 *
 * The status (tsr_instance_pod_status) of a live Pod, with its Service and Node (either may be
 * NULL): phase Ready when the Pod is Running and its Ready condition True; Failed when the Pod
 * has ended (Succeeded or Failed: it will not run again; stop and start the Instance);
 * otherwise Starting, phaseMessage saying what it waits for (Kueue's admission while the Pod is
 * scheduling-gated, else the PodScheduled or Ready condition's message). nodeName, hostIPs (the
 * Node's ExternalIP then InternalIP addresses, else the Pod's hostIPs / hostIP), podIPs (podIPs,
 * else podIP), ports (spec.ports with each Service port's nodePort, once every one has one), and
 * allocations (tsr_instance_allocations).
 *
 * Invariants: pure (no I/O, no clock); every input is borrowed for the call and never modified;
 * *out is written only on success. Errors: TSR_ESTALE when the InstanceType is not ready yet
 * (no status.entrance, no accelerator detail, a profile's memory or the GPU's not computed: retry
 * later), TSR_EINVAL when the Instance asks for what its type cannot give or is malformed (a
 * profile the type does not offer, a slice or partition count other than 1, ...), each with diag
 * naming the field; TSR_ENOMEM.
 * Ownership: each builder returns new objects (json_decref). Thread-safe.
 */
#ifndef TSR_CODEC_INSTANCE_POD_H
#define TSR_CODEC_INSTANCE_POD_H

#include <jansson.h>
#include <stdbool.h>

#include "core/settings.h"

struct tsr_diag;

#define TSR_INSTANCE_OBJECT_API_VERSION "worker.gpustack.ai/v1alpha1"
#define TSR_INSTANCE_OBJECT_KIND        "Instance"
/* The label on the Pod and the Service naming the Instance (its uid); the Service selects it. */
#define TSR_INSTANCE_LABEL "worker.gpustack.ai/instance"
/*
 * The sshd sidecar's image when the caller names none: tessera's name for an image that runs
 * sshd with the keys mounted at TSR_INSTANCE_SSHD_KEYS and enters `main`'s namespaces (nsenter
 * through the shared process namespace). Not built by this repository; upstream takes it from
 * its Setting instance-ssh-server-image.
 */
#define TSR_INSTANCE_SSHD_IMAGE "tessera-sshd:0.1.0"
#define TSR_INSTANCE_SSHD_KEYS  "/var/run/sshd-authorized-keys"

/* The phases the controller writes (upstream's five, and Failed). */
#define TSR_INSTANCE_STARTING "Starting"
#define TSR_INSTANCE_READY    "Ready"
#define TSR_INSTANCE_STOPPING "Stopping"
#define TSR_INSTANCE_STOPPED  "Stopped"
#define TSR_INSTANCE_DELETING "Deleting"
#define TSR_INSTANCE_FAILED   "Failed"

struct tsr_instance_pod_opts {
        struct tsr_settings settings; /* instance-general-resources-overcommit is read */
        bool strict_quota;            /* host requests the pool's queue does not cover are 0 */
        const char *runtime_class;    /* NULL or "": none */
        const char *sshd_image;       /* NULL or "": TSR_INSTANCE_SSHD_IMAGE */
};

/*
 * Builds the Pod (*pod) and the Service (*service, NULL when the Instance has no ports) of
 * Instance inst with InstanceType itype (its status included). Returns 0, TSR_ESTALE, TSR_EINVAL
 * (diag names the field) or TSR_ENOMEM; neither output is written on failure.
 */
int tsr_instance_pod_build(json_t *inst, json_t *itype, const struct tsr_instance_pod_opts *opts,
                           json_t **pod, json_t **service, struct tsr_diag *diag);

/*
 * status.allocations of a Pod: the groups of its device.gpustack.ai/accelerator.allocated
 * annotation (codec/alloc_annotation.h), every container's merged by group id in the annotation's
 * container order, each accelerator entry kept with the fields the Instance CRD has (a repeated
 * accelerator id keeps its first entry). *out is NULL when the Pod has no annotation. Returns 0,
 * TSR_EPARSE (the annotation does not decode; diag says why) or TSR_ENOMEM.
 */
int tsr_instance_allocations(json_t *pod, json_t **out, struct tsr_diag *diag);

/*
 * The status of Instance inst run by pod (live: no deletionTimestamp), with its Service svc and
 * the Node node it is bound to (both may be NULL), as the file comment says. Returns 0 and *out
 * (a new object), TSR_EPARSE (the allocation annotation) or TSR_ENOMEM.
 */
int tsr_instance_pod_status(json_t *inst, json_t *pod, json_t *svc, json_t *node, json_t **out,
                            struct tsr_diag *diag);

#endif
