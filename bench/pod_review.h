/*
 * pod_review.h - the AdmissionReview the benchmarks send and decode: a Pod as a ReplicaSet
 * controller creates it (two containers, env, volumes, the projected service-account token, the
 * default tolerations, the queue label (BENCH_POD_QUEUE), half the memory of one sliced H100), 3.6
 * KB compact, as the API server sends it.
 *
 * Ownership: bench_pod_review returns a new string (free()), its length in *len; NULL when
 * memory ran out. Call it outside any JSON arena (codec/json_arena.h): the text comes from
 * json_dumps.
 */
#ifndef TSR_BENCH_POD_REVIEW_H
#define TSR_BENCH_POD_REVIEW_H

#include <stddef.h>

/* The LocalQueue the Pod names (kueue.x-k8s.io/queue-name). */
#define BENCH_POD_QUEUE "h100-sliced"

char *bench_pod_review(size_t *len);

#endif
