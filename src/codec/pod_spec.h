/*
 * pod_spec.h - reading a Pod object (jansson) into the core's request model and its phase, and
 * writing gate 1's edits back: shared by the webhook, gate 3's snapshot and the simulator.
 * Resource values may be JSON strings or numbers, as a manifest writes them. Borrowing: the
 * tsr_pod_req points into pod's strings and into text, valid while both live.
 */
#ifndef TSR_CODEC_POD_SPEC_H
#define TSR_CODEC_POD_SPEC_H

#include <jansson.h>
#include <stdbool.h>

#include "core/request.h"

struct tsr_diag;

/* Text storage for numeric resource values rendered as strings. */
struct tsr_pod_spec_text {
        char values[TSR_CONTAINERS_MAX * 2 * TSR_RES_MAX][24]; /* an int64 in decimal fits */
        size_t n;
};

/*
 * Reads pod's containers, initContainers (restartPolicy Always marks a sidecar) and their
 * resources into *out. Returns 0, or TSR_EPARSE naming the field that is not a quantity, or
 * TSR_ETOOBIG past TSR_CONTAINERS_MAX containers or TSR_RES_MAX resources in one list, with
 * a message in the API server's own form ("spec.containers: Too many: 33: must have at most
 * 32 items").
 */
int tsr_pod_spec_read(json_t *pod, struct tsr_pod_req *out, struct tsr_pod_spec_text *text,
                      struct tsr_diag *diag);

/* A Pod (or template) read into the core model, with the text its numbers were rendered into. */
struct tsr_pod_spec {
        struct tsr_pod_req req;
        struct tsr_pod_spec_text text;
};

/*
 * Reads pod (a Pod or a Pod template: {"metadata", "spec"}) into a new struct tsr_pod_spec (free
 * with free()). Valid while pod lives and is not modified. Returns 0 or an error of
 * tsr_pod_spec_read.
 */
int tsr_pod_spec_new(json_t *pod, struct tsr_pod_spec **out, struct tsr_diag *diag);

/* True when Pod pod's status.phase is Succeeded or Failed: its containers no longer run. */
bool tsr_pod_finished(json_t *pod);

/*
 * Writes edit into the Pod copy pod: the container's requests and limits. pod may share subtrees
 * with the Pod it was made from (codec/json_tree.h, tsr_json_share): each container on the way is
 * made pod's own first. 0, TSR_EINVAL (no such container) or TSR_ENOMEM.
 */
int tsr_pod_spec_write_edit(json_t *pod, const struct tsr_pod_req *req,
                            const struct tsr_res_edit *e);

#endif
