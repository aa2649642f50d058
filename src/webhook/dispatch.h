/*
 * dispatch.h - one admission webhook route, and the step from a request body to the response
 * body the API server reads (spec/kubernetes-contracts.md §1.1-§1.3). No I/O: the server
 * (server.h) feeds it bytes and writes back what it returns.
 *
 * What a body gets:
 *   - not an AdmissionReview v1 (not JSON, wrong apiVersion or kind, no request uid): HTTP 400
 *     with a metav1.Status naming the fault. There is no uid to echo, so no verdict is possible;
 *     the API server applies the webhook's failurePolicy.
 *   - a review of a kind the route does not admit: HTTP 200, denied with code 400 naming both
 *     kinds (a registration pointing the wrong rules at this path, which a denial makes visible).
 *   - an UPDATE of an object carrying metadata.deletionTimestamp on a route with deletion_guard:
 *     allowed unchanged, the handler not called (seeds/admission.md, "update while deleting").
 *   - otherwise the handler's verdict. A handler that finds the object of the wrong shape
 *     (TSR_EPARSE) gets a denial with code 400 and its message, as controller-runtime answers a
 *     decode failure; any other handler error is HTTP 500 (failurePolicy decides).
 *
 * Ownership: routes are static data. tsr_webhook_dispatch returns a new body in *response (free()).
 * Thread-safe when the lookup is.
 */
#ifndef TSR_WEBHOOK_DISPATCH_H
#define TSR_WEBHOOK_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"
#include "codec/json_pick.h"
#include "webhook/handler.h"

struct tsr_webhook_route {
        const char *path;    /* the service path, "/mutate-gpustack-worker-core-v1-pod" */
        const char *name;    /* the webhook's name in its configuration */
        const char *group;   /* the admitted kind: "" for the core group */
        const char *version; /* "v1" */
        const char *kind;    /* "Pod" */
        bool mutating;       /* a mutating webhook may patch; a validating one never does */
        bool deletion_guard; /* skip UPDATEs of an object being deleted */
        tsr_webhook_handler handler;
        /* What the handler reads of the object (codec/json_pick.h), or NULL for all of it. */
        const struct tsr_json_pick *reads;
};

/* What happened to one review, for the log line and the metrics. */
struct tsr_webhook_outcome {
        int http_status; /* 200, 400 or 500 */
        bool decoded;    /* a review was decoded: the fields below it are set */
        bool allowed;
        bool patched;                      /* the response carries a patch */
        int code;                          /* a denial's status code */
        char rule[48];                     /* a denial's rule, or "" */
        char error[TSR_DIAG_MSG_MAX + 64]; /* why the status is not 200 */
        char uid[64];                      /* the request uid (truncated for logging) */
        char operation[16];
        char kind[64];
        char ns[64];
        char name[128];
};

/*
 * Answers body (len bytes) for route with the cluster state lookup gives. Fills *out and returns
 * 0 with the response body in *response (JSON; an AdmissionReview when http_status is 200, a
 * metav1.Status otherwise), or TSR_ENOMEM.
 */
int tsr_webhook_dispatch(const struct tsr_webhook_route *route,
                         const struct tsr_webhook_lookup *lookup, const char *body, size_t len,
                         char **response, struct tsr_webhook_outcome *out);

/* A metav1.Status body for an HTTP error: {"kind":"Status",...,"code":code,"message":message}. */
char *tsr_webhook_status_body(int code, const char *message);

#endif
