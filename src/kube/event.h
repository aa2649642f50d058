/*
 * event.h - recording a core/v1 Event (POST /api/v1/namespaces/{ns}/events): the one way every
 * tessera process writes one. The Event lives in its object's namespace ("default" for a
 * cluster-scoped object), named by generateName "tessera-", with source.component and
 * reportingComponent the writer, reportingInstance its instance, count 1 and firstTimestamp =
 * lastTimestamp = now (RFC 3339, seconds).
 *
 * Ownership: every string is borrowed for the call. Blocking: one API request.
 */
#ifndef TSR_KUBE_EVENT_H
#define TSR_KUBE_EVENT_H

#include <stddef.h>

#include "base/diag.h"
#include "kube/client.h"

struct tsr_kube_event_record {
        /* involvedObject; api_version, namespace_ and uid may be NULL (left out) */
        const char *api_version, *kind, *name, *namespace_, *uid;
        const char *type; /* "Normal" or "Warning" */
        const char *reason, *message;
        const char *component, *instance; /* the writer: "tessera-device-manager", its node */
};

/* Now as RFC 3339 in UTC, seconds ("2026-12-05T06:40:45Z"), into out (at least 21 bytes). */
void tsr_kube_now_rfc3339(char *out, size_t len);

/* POSTs the Event. Returns 0, TSR_EINVAL (no name), TSR_ENOMEM, or the client's errors, with
 * diag. */
int tsr_kube_event_post(struct tsr_kube_client *c, const struct tsr_kube_event_record *ev,
                        struct tsr_diag *diag);

#endif
