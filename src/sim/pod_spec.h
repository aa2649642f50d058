/*
 * pod_spec.h - reading a Pod object (jansson) into the core's request model, and writing gate 1's
 * edits back. Resource values may be JSON strings or numbers, as a manifest writes them.
 * Borrowing: the tsr_pod_req points into pod's strings and into text, valid while both live.
 */
#ifndef TSR_SIM_POD_SPEC_H
#define TSR_SIM_POD_SPEC_H

#include <jansson.h>

#include "core/request.h"

struct tsr_diag;

/* Text storage for numeric resource values rendered as strings. */
struct pod_spec_text {
        char values[TSR_CONTAINERS_MAX * 2 * TSR_RES_MAX][32];
        size_t n;
};

/*
 * Reads pod's containers, initContainers (restartPolicy Always marks a sidecar) and their
 * resources into *out. Returns 0, or TSR_EPARSE naming the field that is not a quantity, or
 * TSR_ETOOBIG past the container or resource limits.
 */
int pod_spec_read(json_t *pod, struct tsr_pod_req *out, struct pod_spec_text *text,
                  struct tsr_diag *diag);

/*
 * Writes edit into the container's requests and limits. Returns 0, TSR_EINVAL (no such
 * container) or TSR_ENOMEM. req is only read for the container's list and position, but the edit
 * replaces JSON strings that req (and any other tsr_pod_req read from pod) may borrow: after an
 * edit, re-read the Pod with pod_spec_read before using such a request again.
 */
int pod_spec_apply_edit(json_t *pod, const struct tsr_pod_req *req, const struct tsr_res_edit *e);

/*
 * Sums the Pod's effective request of key name: the larger of the app containers' sum and any
 * init container's value (requests, falling back to limits). Writes the value rounded up (milli
 * when milli is true) into *out; 0 when absent.
 */
int64_t pod_spec_request(const struct tsr_pod_req *req, const char *name, bool milli);

#endif
