/*
 * kueue_chain.h - the Kueue objects of the chain (core/chain.h), as `tessera controller`
 * server-side-applies them and the simulator shows them: kueue.x-k8s.io/v1beta2 (Kueue v0.17.0)
 * ResourceFlavor, ClusterQueue, LocalQueue, Topology and the gpustack-node-devices
 * AdmissionCheck, each a complete object (apiVersion, kind, metadata, spec), named, labelled and
 * noted as upstream's NodeFlavorReconciler / NodeQueueReconciler / NodeQueueEntranceReconciler
 * write them (spec/upstream-behavior.md §9, §15):
 *
 *   ResourceFlavor <flavor>  labels resource.gpustack.ai/type=nodes, <feature key>=true, os, arch,
 *                  <feature key>.count=<per node>, <feature key>.capacity=<nodes x per node>;
 *                  annotations note.gpustack.ai/{acceleratable, manufacturer, product, family,
 *                  memory, unitCPU, unitRAM, localStorage}; spec {nodeLabels: the chain's,
 *                  tolerations: [{operator: Exists}], topologyName: gpustack-<profile>}
 *   ClusterQueue <pool>      labels resource.gpustack.ai/type=instancetypes, <feature key>=true,
 *                  os, arch; the pool's notes; spec {namespaceSelector: {}, stopPolicy,
 *                  flavorFungibility {whenCanBorrow: TryNextFlavor, whenCanPreempt:
 *                  MayStopSearch}, preemption {reclaimWithinCohort: Never, borrowWithinCohort
 *                  {policy: Never}, withinClusterQueue: LowerPriority}, resourceGroups: one group
 *                  covering only credits.gpustack.ai/<manufacturer> (accelerated) or cpu
 *                  (generic) with the flavors in chain order and their nominalQuota (none when
 *                  the pool has no flavor), and admissionChecksStrategy {admissionChecks:
 *                  [{name: gpustack-node-devices}]} on an accelerated queue whose check is
 *                  Active}
 *   LocalQueue <entrance>    in one namespace; annotation schedule.gpustack.ai/queue=<pool>;
 *                  spec.clusterQueue=<pool>
 *   Topology gpustack-<profile>  spec.levels [{nodeLabel: <level>}...], ending at the hostname
 *   AdmissionCheck gpustack-node-devices  spec.controllerName worker.gpustack.ai/node-devices
 * Where Kueue v0.17.0 and upstream's Go differ, the object is what v0.17.0 admits: no
 * lendingLimit (its webhook refuses one on a queue without a cohort, and these queues have
 * none), and one resource group of at most 64 flavors (a covered resource may sit in one group
 * only). Quantities print as Kubernetes prints them (nominalQuota "12800k", cpu "16").
 *
 * Ownership: every builder borrows its inputs and returns a new object in *out (json_decref),
 * written only on success. Errors: TSR_ENOMEM, TSR_ETOOBIG (more flavors than one resource group
 * holds, a label too long), TSR_EINVAL (an empty namespace), with diag. Pure; thread-safe.
 */
#ifndef TSR_CODEC_KUEUE_CHAIN_H
#define TSR_CODEC_KUEUE_CHAIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/chain.h"

struct tsr_diag;

#define TSR_KUEUE_API_VERSION             "kueue.x-k8s.io/v1beta2"
#define TSR_KUEUE_TYPE_LABEL              "resource.gpustack.ai/type"
#define TSR_KUEUE_TYPE_NODES              "nodes"
#define TSR_KUEUE_TYPE_INSTANCETYPES      "instancetypes"
#define TSR_KUEUE_NOTE_PREFIX             "note.gpustack.ai/"
#define TSR_KUEUE_QUEUE_ANNOTATION        "schedule.gpustack.ai/queue"
#define TSR_KUEUE_NODE_DEVICES            "gpustack-node-devices"
#define TSR_KUEUE_NODE_DEVICES_CONTROLLER "worker.gpustack.ai/node-devices"
#define TSR_KUEUE_GROUP_FLAVORS_MAX       64

/* A ClusterQueue's spec.stopPolicy. */
enum tsr_kueue_stop_policy {
        TSR_KUEUE_STOP_NONE,
        TSR_KUEUE_STOP_HOLD,           /* the InstanceType is inactive */
        TSR_KUEUE_STOP_HOLD_AND_DRAIN, /* teardown, or a pool with no live flavor */
};

/* Sets every label of l on the JSON object labels. Returns 0 or TSR_ENOMEM. */
int tsr_kueue_labels_set(json_t *labels, const struct tsr_chain_labels *l);

/* The ResourceFlavor of flavor f of pool p. */
int tsr_kueue_resource_flavor(const struct tsr_chain_pool *p, const struct tsr_chain_flavor *f,
                              json_t **out, struct tsr_diag *diag);

/*
 * The ClusterQueue of pool p over its flavors[0..n) (tsr_chain_flavors' order). check_active:
 * the gpustack-node-devices AdmissionCheck is Active (referenced only by an accelerated queue).
 */
int tsr_kueue_cluster_queue(const struct tsr_chain_pool *p, const struct tsr_chain_flavor *flavors,
                            size_t n, enum tsr_kueue_stop_policy stop, bool check_active,
                            json_t **out, struct tsr_diag *diag);

/* The entrance LocalQueue of pool p in namespace ns. */
int tsr_kueue_local_queue(const struct tsr_chain_pool *p, const char *ns, json_t **out,
                          struct tsr_diag *diag);

/* The Topology every flavor references (tsr_chain_topology). */
int tsr_kueue_topology(json_t **out, struct tsr_diag *diag);

/* The gpustack-node-devices AdmissionCheck. */
int tsr_kueue_admission_check(json_t **out, struct tsr_diag *diag);

#endif
