/*
 * affinity.h - a PodSpec's node constraints in JSON: matching a node's labels against them (what
 * the scheduler and Kueue TAS do), and ANDing tessera's pin requirements into them (what the Pod
 * and Workload webhooks do).
 *
 * A node matches when every spec.nodeSelector pair equals its label and, when
 * spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution is set, at least one
 * of its nodeSelectorTerms matches: a term matches when all its matchExpressions hold (operators
 * In, NotIn, Exists, DoesNotExist, Gt, Lt; Gt/Lt compare integers) and it is not empty (a term
 * with neither expressions nor fields matches nothing, as in Kubernetes). matchFields supports
 * metadata.name with In/NotIn and one value. A requirement Kubernetes would refuse to build (In or
 * NotIn without values, Exists or DoesNotExist with values, Gt or Lt without exactly one integer
 * in strconv.ParseInt's syntax) makes its term match nothing, as the scheduler drops such terms.
 * A JSON null reads as absent throughout.
 *
 * Pinning (spec/upstream-behavior.md §6): with no required node affinity, one term holding only
 * the pins is created; otherwise the pins are ANDed into every term, empty terms are skipped and
 * an identical (key, operator, values) expression is never added twice.
 * Ownership: every function borrows its arguments; pinning edits spec in place.
 */
#ifndef TSR_CODEC_AFFINITY_H
#define TSR_CODEC_AFFINITY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/pin.h"

/* True when node name with labels (a JSON object of strings) satisfies spec's constraints. */
bool tsr_affinity_matches(json_t *spec, const char *node_name, json_t *labels);

/*
 * ANDs the n requirements into spec's required node affinity. Sets *changed when spec was
 * modified. Returns 0, TSR_EPARSE when the existing affinity is not the shape Kubernetes
 * accepts, or TSR_ENOMEM (spec is then unchanged).
 */
int tsr_affinity_require(json_t *spec, const struct tsr_node_requirement *reqs, size_t n,
                         bool *changed);

#endif
