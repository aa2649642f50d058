/*
 * workload.h - the Workload fit pin (gate 4): a mutating handler on kueue.x-k8s.io/v1beta2
 * Workloads, CREATE and UPDATE, that ANDs the per-card fit-label requirements into each PodSet
 * template's required node affinity (spec/upstream-behavior.md §6). It never denies: anything it
 * cannot read leaves the Workload unchanged (its failurePolicy is Ignore). Follows handler.h.
 */
#ifndef TSR_WEBHOOK_WORKLOAD_H
#define TSR_WEBHOOK_WORKLOAD_H

#include "codec/kueue_chain.h"
#include "webhook/handler.h"

/* The label a ClusterQueue carries when this operator owns it (codec/kueue_chain.h). */
#define TSR_OWNED_QUEUE_LABEL TSR_KUEUE_TYPE_LABEL
#define TSR_OWNED_QUEUE_VALUE TSR_KUEUE_TYPE_INSTANCETYPES

int tsr_webhook_workload_mutate(const struct tsr_webhook_lookup *lookup,
                                const struct tsr_review *review, struct tsr_verdict *verdict,
                                struct tsr_diag *diag);

#endif
