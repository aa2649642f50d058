/*
 * dispatch.c - decode, check the route's kind and the deletion guard, call the handler, encode.
 */
#include "webhook/dispatch.h"

#include "base/diag.h"
#include "base/buf.h"
#include "base/err.h"
#include "codec/json_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *status_reason(int code)
{
        switch (code) {
        case 400:
                return "BadRequest";
        case 404:
                return "NotFound";
        case 405:
                return "MethodNotAllowed";
        case 413:
                return "RequestEntityTooLarge";
        case 415:
                return "UnsupportedMediaType";
        case 503:
                return "ServiceUnavailable";
        default:
                return "InternalError";
        }
}

char *tsr_webhook_status_body(int code, const char *message)
{
        struct tsr_buf b = TSR_BUF_INIT;
        char *text = NULL;

        /* As jansson would write {kind, apiVersion, metadata, status, message, reason, code}. */
        if (!tsr_buf_adds(&b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                              "\"status\":\"Failure\",\"message\":") &&
            !tsr_json_write_text(&b, message, strlen(message)) &&
            !tsr_buf_addf(&b, ",\"reason\":\"%s\",\"code\":%d}", status_reason(code), code))
                text = tsr_buf_detach(&b);
        tsr_buf_release(&b);
        return text;
}

/* Copies src into dst (n bytes), cut to fit: these copies only label log lines and metrics. */
static void copy(char *dst, size_t n, const char *src)
{
        size_t len = strnlen(src, n - 1);

        memcpy(dst, src, len);
        dst[len] = '\0';
}

/* True when the review is an UPDATE of an object whose deletion has begun. */
static bool updating_while_deleting(const struct tsr_review *review)
{
        json_t *meta = json_object_get(review->object, "metadata");
        json_t *ts = json_object_get(meta, "deletionTimestamp");

        return !strcmp(review->operation, "UPDATE") && ts && !json_is_null(ts);
}

static bool admits(const struct tsr_webhook_route *route, const struct tsr_review *review)
{
        return !strcmp(review->group, route->group) && !strcmp(review->version, route->version) &&
               !strcmp(review->kind, route->kind);
}

/* Runs the route's handler (or its short-cuts) into verdict; returns 0, or an HTTP 500 cause. */
static int decide(const struct tsr_webhook_route *route, const struct tsr_webhook_lookup *lookup,
                  const struct tsr_review *review, struct tsr_verdict *verdict,
                  struct tsr_diag *diag)
{
        int rc;

        if (!admits(route, review)) {
                tsr_verdict_deny(verdict, 400, "BadRequest",
                                 "webhook %s admits %s %s/%s, not %s %s/%s", route->name,
                                 route->kind, route->group[0] ? route->group : "core",
                                 route->version, review->kind,
                                 review->group[0] ? review->group : "core", review->version);
                copy(verdict->rule, sizeof(verdict->rule), "wrong-kind");
                return 0;
        }
        if (route->deletion_guard && updating_while_deleting(review)) {
                tsr_verdict_allow(verdict);
                return 0;
        }
        rc = route->handler(lookup, review, verdict, diag);
        if (rc == TSR_EPARSE) {
                json_decref(verdict->patched);
                memset(verdict, 0, sizeof(*verdict));
                tsr_verdict_deny(verdict, 400, "BadRequest", "cannot read the %s: %s", route->kind,
                                 diag->msg);
                copy(verdict->rule, sizeof(verdict->rule), "malformed-object");
                return 0;
        }
        return rc;
}

int tsr_webhook_dispatch(const struct tsr_webhook_route *route,
                         const struct tsr_webhook_lookup *lookup, const char *body, size_t len,
                         char **response, struct tsr_webhook_outcome *out)
{
        struct tsr_review review;
        struct tsr_verdict verdict;
        struct tsr_diag diag;
        json_t *doc = NULL;
        int rc;

        memset(out, 0, sizeof(*out));
        tsr_diag_clear(&diag);
        rc = tsr_review_decode(body, len, route->reads, &review, &doc, &diag);
        if (rc == TSR_ENOMEM)
                return rc;
        if (rc) {
                out->http_status = 400;
                snprintf(out->error, sizeof(out->error), "not an AdmissionReview: %s", diag.msg);
                *response = tsr_webhook_status_body(400, out->error);
                return *response ? 0 : TSR_ENOMEM;
        }
        out->decoded = true;
        copy(out->uid, sizeof(out->uid), review.uid);
        copy(out->operation, sizeof(out->operation), review.operation);
        copy(out->kind, sizeof(out->kind), review.kind);
        copy(out->ns, sizeof(out->ns), review.ns);
        copy(out->name, sizeof(out->name), review.name);

        memset(&verdict, 0, sizeof(verdict));
        rc = decide(route, lookup, &review, &verdict, &diag);
        if (rc == TSR_ENOMEM) {
                json_decref(verdict.patched);
                json_decref(doc);
                return rc;
        }
        if (rc) {
                out->http_status = 500;
                snprintf(out->error, sizeof(out->error), "%s",
                         diag.msg[0] ? diag.msg : tsr_strerror(rc));
                *response = tsr_webhook_status_body(500, out->error);
                rc = *response ? 0 : TSR_ENOMEM;
        } else {
                out->http_status = 200;
                out->allowed = verdict.allowed;
                out->code = verdict.allowed ? 0 : verdict.code;
                copy(out->rule, sizeof(out->rule), verdict.rule);
                out->patched = route->mutating && verdict.allowed && verdict.patched &&
                               !json_equal(verdict.patched, review.object);
                rc = tsr_review_encode(&review, &verdict, route->mutating, response);
        }
        json_decref(verdict.patched);
        json_decref(doc);
        return rc;
}
