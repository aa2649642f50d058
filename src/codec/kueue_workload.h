/*
 * kueue_workload.h - a Kueue Workload (kueue.x-k8s.io/v1beta2, the storage version since
 * v0.16; spec/kubernetes-contracts.md §3.1, §3.2, §3.8) read into gate 3's neutral struct
 * (codec/admit_snapshot.h), as `tessera controller` gets it from the API server. Read:
 *   metadata.namespace, metadata.name   required, non-empty
 *   spec.active                         default true
 *   spec.podSets[1..8]                  {name (default "main", distinct), count (default 1),
 *                                       template (an object)}
 *   status.conditions[]                 {type, status}: QuotaReserved, Admitted, Evicted and
 *                                       Finished count when their status is "True"
 *   status.admission                    {clusterQueue, podSetAssignments[] {name (a PodSet's,
 *                                       once), flavors {resource: flavor}, count,
 *                                       topologyAssignment}}
 *   status.admissionChecks[]            {name, state, message}: the entry named
 *                                       TSR_KUEUE_NODE_DEVICES (codec/kueue_chain.h); state
 *                                       Pending, Ready, Retry or Rejected
 * A PodSet's flavor is the flavors entry of its accelerator credits resource (the one key that
 * starts with TSR_CREDITS_PREFIX); with none, or more than one, it has none and gate 3 answers
 * Retry. Its count is the assignment's when given (partial admission), else the spec's.
 * topologyAssignment is v0.17's compressed form (Kueue's TopologyAssignment): levels[1..16]
 * (node label keys, highest first) and slices[0..1000], each {domainCount (1..100000),
 * valuesPerLevel[one per level] {universal | individual {prefix?, suffix?, roots[domainCount]}},
 * podCounts {universal | individual[domainCount]}}, every count >= 1. A domain's value at a
 * level is the universal one, or prefix + roots[i] + suffix; the full assignment is the union of
 * the slices. Only the kubernetes.io/hostname level places Pods on nodes (a hostname is 1..253
 * characters, at most once per PodSet); an assignment without that level leaves the PodSet
 * without domains (judged over its flavor's whole pool). Other fields are ignored.
 *
 * Errors: TSR_EINVAL, "Workload ns/name: <field path>: <what is wrong>" (a type, a range, a
 * missing field, a length that disagrees with domainCount), TSR_ETOOBIG past
 * TSR_KUEUE_DOMAINS_MAX domains, TSR_ENOMEM. Ownership: parse returns a new struct
 * tsr_kueue_workload (free with tsr_kueue_workload_free) whose strings and templates borrow obj:
 * valid while obj lives and is not modified. Pure; thread-safe.
 */
#ifndef TSR_CODEC_KUEUE_WORKLOAD_H
#define TSR_CODEC_KUEUE_WORKLOAD_H

#include <jansson.h>

#include "codec/admit_snapshot.h"

struct tsr_diag;

#define TSR_KUEUE_PODSETS_MAX 8     /* spec.podSets maxItems */
#define TSR_KUEUE_DOMAINS_MAX 65536 /* hostname-level domains of one Workload, all PodSets */

struct tsr_kueue_workload {
        struct tsr_snapshot_workload w; /* points into obj and into the fields below */
        struct tsr_snapshot_podset podsets[TSR_KUEUE_PODSETS_MAX];
        struct tsr_snapshot_domain *domains; /* every PodSet's, in order */
        char *hostnames;                     /* the domains' node names, NUL-separated */
};

/* Reads obj into a new struct tsr_kueue_workload *out. Returns 0 or an error above, with diag. */
int tsr_kueue_workload_parse(json_t *obj, struct tsr_kueue_workload **out, struct tsr_diag *diag);

/* Frees k (NULL is a no-op). */
void tsr_kueue_workload_free(struct tsr_kueue_workload *k);

#endif
