/*
 * admission_review.c - AdmissionReview v1 decode and encode; base64 by nettle.
 */
#include "codec/admission_review.h"

#include "base/diag.h"
#include "base/buf.h"
#include "base/err.h"
#include "codec/json_patch.h"
#include "codec/json_pick.h"
#include "codec/json_tree.h"

#include <nettle/base64.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REVIEW_API  "admission.k8s.io/v1"
#define REVIEW_KIND "AdmissionReview"

void tsr_verdict_allow(struct tsr_verdict *v)
{
        v->allowed = true;
        v->code = 0;
        v->reason[0] = '\0';
        v->message[0] = '\0';
}

void tsr_verdict_deny(struct tsr_verdict *v, int code, const char *reason, const char *fmt, ...)
{
        va_list ap;

        v->allowed = false;
        v->code = code;
        snprintf(v->reason, sizeof(v->reason), "%s", reason);
        va_start(ap, fmt);
        vsnprintf(v->message, sizeof(v->message), fmt, ap);
        va_end(ap);
}

void tsr_verdict_warn(struct tsr_verdict *v, const char *fmt, ...)
{
        va_list ap;

        if (v->n_warnings >= TSR_VERDICT_WARNINGS)
                return;
        va_start(ap, fmt);
        vsnprintf(v->warnings[v->n_warnings++], sizeof(v->warnings[0]), fmt, ap);
        va_end(ap);
}

/* Copies the string field key of obj into out (len bytes); absent is "", a non-string fails. */
static int field(json_t *obj, const char *key, char *out, size_t len, const char *where,
                 struct tsr_diag *diag)
{
        json_t *v = json_object_get(obj, key);
        const char *s;

        out[0] = '\0';
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return tsr_diag_set(diag, TSR_EPARSE, "%s.%s must be a string", where, key);
        s = json_string_value(v);
        if (strlen(s) >= len)
                return tsr_diag_set(diag, TSR_EPARSE, "%s.%s is longer than %zu bytes", where, key,
                                    len - 1);
        memcpy(out, s, strlen(s) + 1);
        return 0;
}

/* Reads a {group, version, kind|resource} object. */
static int gvk(json_t *obj, const char *key, char *group, char *version, char *last,
               const char *last_key, const char *where, struct tsr_diag *diag)
{
        json_t *v = json_object_get(obj, key);
        int rc;

        group[0] = version[0] = last[0] = '\0';
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v))
                return tsr_diag_set(diag, TSR_EPARSE, "%s.%s must be an object", where, key);
        rc = field(v, "group", group, TSR_REVIEW_FIELD_MAX, where, diag);
        if (!rc)
                rc = field(v, "version", version, 64, where, diag);
        if (!rc)
                rc = field(v, last_key, last, TSR_REVIEW_FIELD_MAX, where, diag);
        return rc;
}

/*
 * The body as a tree: only what the review's own fields and object_reads name when the picker
 * can, else whole. Returns 0 (*root NULL: not JSON, jerr says why) or TSR_ENOMEM.
 */
static int load(const char *body, size_t len, const struct tsr_json_pick *object_reads,
                json_t **root, json_error_t *jerr)
{
        const struct tsr_json_pick picks[] = {
            {"apiVersion", NULL},
            {"kind", NULL},
            {"request.uid", NULL},
            {"request.operation", NULL},
            {"request.kind", NULL},
            {"request.resource", NULL},
            {"request.subResource", NULL},
            {"request.name", NULL},
            {"request.namespace", NULL},
            {"request.dryRun", NULL},
            {"request.object", object_reads},
            {"request.oldObject", object_reads},
            {NULL, NULL},
        };
        int rc;

        *root = NULL;
        if (object_reads) {
                rc = tsr_json_pick_load(body, len, picks, root);
                if (rc || *root)
                        return rc;
        }
        *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, jerr);
        return 0;
}

int tsr_review_decode(const char *body, size_t len, const struct tsr_json_pick *object_reads,
                      struct tsr_review *out, json_t **doc, struct tsr_diag *diag)
{
        struct tsr_review r;
        json_error_t jerr;
        json_t *root, *req, *dry;
        char rgroup[TSR_REVIEW_FIELD_MAX], rversion[64];
        const char *api, *kind;
        int rc = load(body, len, object_reads, &root, &jerr);

        if (rc)
                return tsr_diag_set(diag, rc, "out of memory");
        memset(&r, 0, sizeof(r));
        if (!root)
                return tsr_diag_set(diag, TSR_EPARSE, "the body is not JSON: %s (line %d)",
                                    jerr.text, jerr.line);
        api = json_string_value(json_object_get(root, "apiVersion"));
        kind = json_string_value(json_object_get(root, "kind"));
        req = json_object_get(root, "request");
        if (!json_is_object(root) || !api || strcmp(api, REVIEW_API) || !kind ||
            strcmp(kind, REVIEW_KIND)) {
                json_decref(root);
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "expected apiVersion " REVIEW_API ", kind " REVIEW_KIND);
        }
        if (!json_is_object(req)) {
                json_decref(root);
                return tsr_diag_set(diag, TSR_EPARSE, "the AdmissionReview carries no request");
        }
        rc = field(req, "uid", r.uid, sizeof(r.uid), "request", diag);
        if (!rc)
                rc = field(req, "operation", r.operation, sizeof(r.operation), "request", diag);
        if (!rc)
                rc = gvk(req, "kind", r.group, r.version, r.kind, "kind", "request", diag);
        if (!rc)
                rc =
                    gvk(req, "resource", rgroup, rversion, r.resource, "resource", "request", diag);
        if (!rc)
                rc = field(req, "subResource", r.subresource, sizeof(r.subresource), "request",
                           diag);
        if (!rc)
                rc = field(req, "name", r.name, sizeof(r.name), "request", diag);
        if (!rc)
                rc = field(req, "namespace", r.ns, sizeof(r.ns), "request", diag);
        if (!rc && !r.uid[0])
                rc = tsr_diag_set(diag, TSR_EPARSE, "request.uid is required");
        if (!rc && strcmp(r.operation, "CREATE") && strcmp(r.operation, "UPDATE") &&
            strcmp(r.operation, "DELETE") && strcmp(r.operation, "CONNECT"))
                rc = tsr_diag_set(diag, TSR_EPARSE,
                                  "request.operation must be CREATE, UPDATE, DELETE or CONNECT");
        dry = json_object_get(req, "dryRun");
        if (!rc && dry && !json_is_null(dry) && !json_is_boolean(dry))
                rc = tsr_diag_set(diag, TSR_EPARSE, "request.dryRun must be a boolean");
        if (rc) {
                json_decref(root);
                return rc;
        }
        r.dry_run = json_is_true(dry);
        r.object = json_object_get(req, "object");
        r.old_object = json_object_get(req, "oldObject");
        if (json_is_null(r.object))
                r.object = NULL;
        if (json_is_null(r.old_object))
                r.old_object = NULL;
        *out = r;
        *doc = root;
        return 0;
}

/* The base64 of s (len bytes) as a new string, or NULL. */
static char *base64(const char *s, size_t len)
{
        char *out = malloc(BASE64_ENCODE_RAW_LENGTH(len) + 1);

        if (!out)
                return NULL;
        base64_encode_raw(out, len, (const uint8_t *)s);
        out[BASE64_ENCODE_RAW_LENGTH(len)] = '\0';
        return out;
}

/*
 * The base64 of the JSON Patch from `from` to `to` into *out, or NULL when they are equal.
 * 0 or TSR_ENOMEM.
 */
static int patch_text(json_t *from, json_t *to, char **out)
{
        struct tsr_buf text = TSR_BUF_INIT;
        size_t n_ops = 0;
        int rc = tsr_json_patch_diff_text(from ? from : json_null(), to, &text, &n_ops);

        *out = NULL;
        if (!rc && n_ops)
                *out = base64(text.ptr, text.len);
        tsr_buf_release(&text);
        return rc ? rc : n_ops && !*out ? TSR_ENOMEM : 0;
}

static int put_text(struct tsr_buf *b, const char *s)
{
        return tsr_json_write_text(b, s, strlen(s));
}

int tsr_review_encode(const struct tsr_review *review, const struct tsr_verdict *v, bool mutating,
                      char **out)
{
        struct tsr_buf b = TSR_BUF_INIT;
        char *patch = NULL;
        int rc = 0;

        *out = NULL;
        if (v->allowed && mutating && v->patched)
                rc = patch_text(review->object, v->patched, &patch);
        if (!rc)
                rc = tsr_buf_adds(&b, "{\"apiVersion\":\"" REVIEW_API "\",\"kind\":\"" REVIEW_KIND
                                      "\",\"response\":{\"uid\":") ||
                     put_text(&b, review->uid) ||
                     tsr_buf_adds(&b, v->allowed ? ",\"allowed\":true" : ",\"allowed\":false");
        if (!rc && !v->allowed)
                rc = tsr_buf_addf(&b, ",\"status\":{\"code\":%d,\"reason\":",
                                  v->code < 400 ? 400 : v->code) ||
                     put_text(&b, v->reason[0] ? v->reason : "Forbidden") ||
                     tsr_buf_adds(&b, ",\"message\":") || put_text(&b, v->message) ||
                     tsr_buf_adds(&b, ",\"status\":\"Failure\"}");
        if (!rc && patch)
                rc = tsr_buf_adds(&b, ",\"patch\":\"") || tsr_buf_adds(&b, patch) ||
                     tsr_buf_adds(&b, "\",\"patchType\":\"JSONPatch\"");
        for (size_t i = 0; !rc && i < v->n_warnings; i++)
                rc = tsr_buf_adds(&b, i ? "," : ",\"warnings\":[") || put_text(&b, v->warnings[i]);
        if (!rc && v->n_warnings)
                rc = tsr_buf_addch(&b, ']');
        if (!rc)
                rc = tsr_buf_adds(&b, "}}");
        free(patch);
        if (!rc)
                *out = tsr_buf_detach(&b);
        tsr_buf_release(&b);
        return rc ? TSR_ENOMEM : *out ? 0 : TSR_ENOMEM;
}
