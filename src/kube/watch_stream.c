/*
 * watch_stream.c - a byte-level scanner that follows JSON nesting (strings and escapes) to find
 * where each top-level object ends, appending whole runs of bytes to the pending event at once;
 * jansson then decodes the complete event. The scanner never interprets the JSON beyond quotes,
 * backslashes and brackets, so a malformed event is caught by jansson, not guessed at.
 */
#include "kube/watch_stream.h"

#include "base/diag.h"
#include "base/err.h"

#include <string.h>

static const char *const type_names[] = {
    [TSR_KUBE_ADDED] = "ADDED",     [TSR_KUBE_MODIFIED] = "MODIFIED",
    [TSR_KUBE_DELETED] = "DELETED", [TSR_KUBE_BOOKMARK] = "BOOKMARK",
    [TSR_KUBE_ERROR] = "ERROR",
};

const char *tsr_kube_event_type_name(enum tsr_kube_event_type type)
{
        if ((unsigned)type >= sizeof(type_names) / sizeof(type_names[0]))
                return "?";
        return type_names[type];
}

/* ---- one event ---------------------------------------------------------------------------- */

static const char *string_at(json_t *o, const char *k1, const char *k2)
{
        json_t *v = json_object_get(o, k1);

        if (k2)
                v = json_object_get(v, k2);
        return json_is_string(v) ? json_string_value(v) : "";
}

int tsr_kube_event_decode(const char *text, size_t len, json_t **root, struct tsr_kube_event *ev,
                          struct tsr_diag *diag)
{
        struct tsr_kube_event e;
        json_error_t jerr;
        json_t *doc, *type, *object, *code;
        size_t t, n_types = sizeof(type_names) / sizeof(type_names[0]);

        doc = json_loadb(text, len, 0, &jerr);
        if (!doc)
                return tsr_diag_set(diag, TSR_EPARSE, "watch event: %s (column %d)", jerr.text,
                                    jerr.column);
        if (!json_is_object(doc)) {
                json_decref(doc);
                return tsr_diag_set(diag, TSR_EPARSE, "watch event: not a JSON object");
        }
        type = json_object_get(doc, "type");
        if (!json_is_string(type)) {
                json_decref(doc);
                return tsr_diag_set(diag, TSR_EPARSE, "watch event: no \"type\" string");
        }
        for (t = 0; t < n_types; t++)
                if (!strcmp(json_string_value(type), type_names[t]))
                        break;
        if (t == n_types) {
                tsr_diag_set(diag, TSR_EPARSE, "watch event: unknown type \"%.64s\"",
                             json_string_value(type));
                json_decref(doc);
                return TSR_EPARSE;
        }
        object = json_object_get(doc, "object");
        if (!json_is_object(object)) {
                tsr_diag_set(diag, TSR_EPARSE, "watch event: %s without an \"object\" object",
                             type_names[t]);
                json_decref(doc);
                return TSR_EPARSE;
        }
        memset(&e, 0, sizeof(e));
        e.type = (enum tsr_kube_event_type)t;
        e.object = object;
        e.resource_version = string_at(object, "metadata", "resourceVersion");
        e.name = string_at(object, "metadata", "name");
        e.ns = string_at(object, "metadata", "namespace");
        e.reason = "";
        e.message = "";
        if (e.type == TSR_KUBE_ERROR) {
                code = json_object_get(object, "code");
                if (json_is_integer(code) && json_integer_value(code) > 0 &&
                    json_integer_value(code) < 1000)
                        e.code = (int)json_integer_value(code);
                e.reason = string_at(object, "reason", NULL);
                e.message = string_at(object, "message", NULL);
        }
        *root = doc;
        *ev = e;
        return 0;
}

/* ---- the stream --------------------------------------------------------------------------- */

void tsr_kube_watch_stream_init(struct tsr_kube_watch_stream *s, size_t max_event)
{
        memset(s, 0, sizeof(*s));
        tsr_buf_init(&s->pending);
        s->pending.max = (max_event ? max_event : TSR_KUBE_EVENT_MAX) + 1;
}

void tsr_kube_watch_stream_release(struct tsr_kube_watch_stream *s)
{
        size_t max = s->pending.max;

        tsr_buf_release(&s->pending);
        memset(s, 0, sizeof(*s));
        tsr_buf_init(&s->pending);
        s->pending.max = max;
}

static int append(struct tsr_kube_watch_stream *s, const char *p, size_t n, struct tsr_diag *diag)
{
        int rc = tsr_buf_add(&s->pending, p, n);

        if (rc == TSR_ETOOBIG)
                return tsr_diag_set(diag, rc, "watch stream: event %zu exceeds %zu bytes",
                                    s->events + 1, s->pending.max - 1);
        if (rc)
                return tsr_diag_set(diag, rc, "watch stream: out of memory");
        return 0;
}

static int deliver(struct tsr_kube_watch_stream *s, tsr_kube_event_fn fn, void *ctx,
                   struct tsr_diag *diag)
{
        struct tsr_kube_event ev;
        json_t *root;
        int rc;

        rc = tsr_kube_event_decode(s->pending.ptr, s->pending.len, &root, &ev, diag);
        tsr_buf_reset(&s->pending);
        if (rc)
                return rc;
        s->events++;
        rc = fn(ctx, &ev);
        json_decref(root);
        return rc;
}

int tsr_kube_watch_stream_feed(struct tsr_kube_watch_stream *s, const void *data, size_t len,
                               tsr_kube_event_fn fn, void *ctx, struct tsr_diag *diag)
{
        const char *p = data;
        size_t i = 0, start = 0;
        int rc;

        while (i < len) {
                char ch = p[i];

                if (s->depth == 0) {
                        if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n') {
                                i++;
                                continue;
                        }
                        if (ch != '{')
                                return tsr_diag_set(diag, TSR_EPARSE,
                                                    "watch stream: byte 0x%02x at offset %zu is "
                                                    "outside an event",
                                                    (unsigned char)ch, s->consumed + i);
                        start = i;
                        s->depth = 1;
                        i++;
                        continue;
                }
                i++;
                /* The ceiling is checked at every byte, so that it trips at the same byte
                 * however the stream was cut into reads. */
                if (s->pending.len + (i - start) > s->pending.max - 1)
                        return tsr_diag_set(diag, TSR_ETOOBIG,
                                            "watch stream: event %zu exceeds %zu bytes",
                                            s->events + 1, s->pending.max - 1);
                if (s->in_string) {
                        if (s->escaped)
                                s->escaped = false;
                        else if (ch == '\\')
                                s->escaped = true;
                        else if (ch == '"')
                                s->in_string = false;
                        continue;
                }
                if (ch == '"') {
                        s->in_string = true;
                } else if (ch == '{' || ch == '[') {
                        if (++s->depth > TSR_KUBE_EVENT_DEPTH_MAX)
                                return tsr_diag_set(diag, TSR_EPARSE,
                                                    "watch stream: event %zu nests deeper than %d",
                                                    s->events + 1, TSR_KUBE_EVENT_DEPTH_MAX);
                } else if (ch == '}' || ch == ']') {
                        if (--s->depth == 0) {
                                rc = append(s, p + start, i - start, diag);
                                if (!rc)
                                        rc = deliver(s, fn, ctx, diag);
                                if (rc)
                                        return rc;
                        }
                }
        }
        if (s->depth > 0) {
                rc = append(s, p + start, len - start, diag);
                if (rc)
                        return rc;
        }
        s->consumed += len;
        return 0;
}

int tsr_kube_watch_stream_finish(struct tsr_kube_watch_stream *s, struct tsr_diag *diag)
{
        if (s->depth > 0)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "watch stream: ended inside event %zu (%zu bytes pending)",
                                    s->events + 1, s->pending.len);
        return 0;
}
