/*
 * event.c - a core/v1 Event built with jansson and POSTed through the client.
 */
#include "kube/event.h"

#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void tsr_kube_now_rfc3339(char *out, size_t len)
{
        time_t now = time(NULL);
        struct tm tm;

        gmtime_r(&now, &tm);
        strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int tsr_kube_event_post(struct tsr_kube_client *c, const struct tsr_kube_event_record *ev,
                        struct tsr_diag *diag)
{
        const char *ns = ev->namespace_ && *ev->namespace_ ? ev->namespace_ : "default";
        char path[320], when[32];
        char *text;
        json_t *body;
        int rc;

        if (!ev->name || !*ev->name)
                return tsr_diag_set(diag, TSR_EINVAL, "an Event needs its object's name");
        tsr_kube_now_rfc3339(when, sizeof(when));
        body = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s?, s:s, s:s, s:s?, s:s?}, s:s, s:s, s:s, "
                         "s:{s:s}, s:s, s:s, s:i, s:s, s:s}",
                         "apiVersion", "v1", "kind", "Event", "metadata", "generateName",
                         "tessera-", "namespace", ns, "involvedObject", "apiVersion",
                         ev->api_version, "kind", ev->kind, "name", ev->name, "namespace",
                         ev->namespace_, "uid", ev->uid, "type", ev->type, "reason", ev->reason,
                         "message", ev->message, "source", "component", ev->component,
                         "firstTimestamp", when, "lastTimestamp", when, "count", 1,
                         "reportingComponent", ev->component, "reportingInstance", ev->instance);
        text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!text)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns);
        rc = tsr_kube_client_request(c, "POST", path, "application/json", text, strlen(text), NULL,
                                     NULL, NULL, diag);
        free(text);
        return rc;
}
