/*
 * pod.h - gate 1's two Pod handlers: `mutate.gpustack-worker.core.v1.pod` (folds, defaults, the
 * shared card-count pin) and `validate.gpustack-worker.core.v1.pod` (the seven request rules).
 * Both follow handler.h; see pod.c for what they read.
 */
#ifndef TSR_WEBHOOK_POD_H
#define TSR_WEBHOOK_POD_H

#include "codec/json_pick.h"
#include "webhook/handler.h"

int tsr_webhook_pod_mutate(const struct tsr_webhook_lookup *lookup, const struct tsr_review *review,
                           struct tsr_verdict *verdict, struct tsr_diag *diag);

int tsr_webhook_pod_validate(const struct tsr_webhook_lookup *lookup,
                             const struct tsr_review *review, struct tsr_verdict *verdict,
                             struct tsr_diag *diag);

/*
 * Everything either handler (and the dispatcher's deletion guard) reads of the Pod: the review
 * decodes only this (codec/json_pick.h), so a new read of the Pod must be named here first.
 */
extern const struct tsr_json_pick tsr_webhook_pod_reads[];

#endif
