/*
 * kueue_config.h - the Kueue Configuration tessera's chain needs (`tessera kueue-config`), for
 * Kueue v0.17.0: config.kueue.x-k8s.io/v1beta2, kind Configuration (seeds/admission.md "Known
 * behavior: the deployed Kueue Configuration"; spec/upstream-behavior.md §9; docs/kueue-config.md
 * says what each field does):
 *
 *   namespace                     the release namespace (Kueue runs beside the operator)
 *   manageJobsWithoutQueueName    false: only queue-labelled Pods are Kueue's
 *   managedJobsNamespaceSelector  kubernetes.io/metadata.name NotIn [kube-system, <release ns>]
 *   integrations.frameworks       [pod]
 *   featureGates                  AssignQueueLabelsForPods false, TopologyAwareScheduling true,
 *                                 TASBalancedPlacement true
 *   resources.transformations     per manufacturer row of core/manufacturers.def, in table order,
 *                                 strategy Replace, core/credits.h's table: <base> -> 1600000,
 *                                 <base>.shared -> 160000, <base>.sliced.units multiplyBy
 *                                 <base>.sliced -> 1, and with a partition kind
 *                                 <base>.partitioned.units -> 1, each into
 *                                 credits.gpustack.ai/<manufacturer>
 *   resources.excludeResourcePrefixes  per manufacturer, in table order: <base>.sliced.cores-
 *                                 percentage, <base>.sliced.memory-percentage,
 *                                 <base>.sliced.memory-mib and, with a partition kind,
 *                                 <base>.partitioned.<kind>- (the profile keys): the request
 *                                 descriptors gate 1 folded into units, which a credits-only
 *                                 ClusterQueue would otherwise refuse ("resource ... unavailable
 *                                 in ClusterQueue"; v0.17.0 has no IgnoreUndeclared)
 *
 * What the seed asks for and v0.17.0 lacks is left out, because v0.17.0 refuses a Configuration
 * naming it (strict decoding; an unknown feature gate stops the manager):
 * resources.quotaCheckStrategy: IgnoreUndeclared and the TASRespectNodeAffinityPreferred gate.
 * The deployment's own fields (webhook, certificates, leader election, metrics, health) are not
 * here: whoever runs Kueue adds them.
 *
 * Ownership: returns a new object in *out (json_decref), written only on success. Pure;
 * thread-safe.
 */
#ifndef TSR_CODEC_KUEUE_CONFIG_H
#define TSR_CODEC_KUEUE_CONFIG_H

#include <jansson.h>

struct tsr_diag;

#define TSR_KUEUE_CONFIG_API_VERSION "config.kueue.x-k8s.io/v1beta2"
#define TSR_KUEUE_CONFIG_NAMESPACE   "gpustack-system" /* the release namespace by default */

/*
 * The Configuration for release namespace ns. Returns 0, TSR_EINVAL (ns is not a namespace
 * name) or TSR_ENOMEM, with diag.
 */
int tsr_kueue_config(const char *ns, json_t **out, struct tsr_diag *diag);

#endif
