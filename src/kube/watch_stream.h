/*
 * watch_stream.h - the body of a watch response (spec/kubernetes-contracts.md §4.3) cut into
 * events and decoded, with no I/O: bytes in, events out, so that it can be fuzzed.
 *
 * The body is a stream of JSON objects {"type":T,"object":{...}}. The API server ends each with
 * a newline, but the splitter does not rely on that, nor on chunk or read boundaries: it tracks
 * JSON nesting (strings and escapes included) and cuts an event where its outermost object
 * closes. Whitespace between events is skipped; anything else outside an event is malformed.
 * T is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR; an ERROR's object is a metav1.Status whose
 * code (410 for an expired resourceVersion) the decoder lifts out.
 *
 * Ownership: a stream owns its pending bytes (release with tsr_kube_watch_stream_release). An
 * event handed to a callback borrows everything it points to for the duration of the call;
 * json_incref ev->object to keep it. Not thread-safe: one stream per watch.
 */
#ifndef TSR_KUBE_WATCH_STREAM_H
#define TSR_KUBE_WATCH_STREAM_H

#include "base/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct tsr_diag;

/* Default ceiling on one event's encoded size. */
#define TSR_KUBE_EVENT_MAX ((size_t)16 << 20)

/* Deepest JSON nesting the splitter follows (jansson refuses deeper documents anyway). */
#define TSR_KUBE_EVENT_DEPTH_MAX 512

enum tsr_kube_event_type {
        TSR_KUBE_ADDED,
        TSR_KUBE_MODIFIED,
        TSR_KUBE_DELETED,
        TSR_KUBE_BOOKMARK,
        TSR_KUBE_ERROR,
};

/* One decoded watch event. */
struct tsr_kube_event {
        enum tsr_kube_event_type type;
        json_t *object;               /* the event's object (an object), borrowed */
        const char *resource_version; /* object.metadata.resourceVersion, "" when absent */
        const char *name;             /* object.metadata.name, "" when absent */
        const char *ns;               /* object.metadata.namespace, "" when absent */
        int code;                     /* ERROR: the Status code (410 = Gone), 0 when absent */
        const char *reason;           /* ERROR: the Status reason ("Expired"), "" when absent */
        const char *message;          /* ERROR: the Status message, "" when absent */
};

/*
 * Called for each event, in stream order. Returns 0 to go on; any other value stops the feed,
 * which returns that value unchanged (use positive values for the caller's own stop reasons).
 */
typedef int (*tsr_kube_event_fn)(void *ctx, const struct tsr_kube_event *ev);

struct tsr_kube_watch_stream {
        struct tsr_buf pending; /* bytes of the event being assembled */
        unsigned depth;         /* open objects and arrays in pending; 0 between events */
        bool in_string;         /* inside a JSON string */
        bool escaped;           /* the previous byte was a backslash inside a string */
        size_t consumed;        /* bytes fed so far (for messages) */
        size_t events;          /* events delivered so far */
};

/* The name the API server uses for type ("ADDED"), or "?" for a value outside the enum. */
const char *tsr_kube_event_type_name(enum tsr_kube_event_type type);

/*
 * Decodes one event's text (len bytes, no NUL needed). Returns 0 with *root set to a new
 * reference that ev points into (json_decref it when done with ev), or TSR_EPARSE (not JSON, not
 * an object, no or unknown "type", "object" missing or not an object) / TSR_ENOMEM with diag;
 * *root and *ev are written only on success.
 */
int tsr_kube_event_decode(const char *text, size_t len, json_t **root, struct tsr_kube_event *ev,
                          struct tsr_diag *diag);

/* Initialises s, empty, refusing events over max_event bytes (0: TSR_KUBE_EVENT_MAX). */
void tsr_kube_watch_stream_init(struct tsr_kube_watch_stream *s, size_t max_event);

/* Frees s's pending bytes and re-initialises it empty with the same ceiling. */
void tsr_kube_watch_stream_release(struct tsr_kube_watch_stream *s);

/*
 * Feeds len bytes (borrowed), calling fn(ctx, ev) for every event they complete. Returns 0, fn's
 * first non-zero return, or TSR_EPARSE (bytes outside an event, nesting deeper than
 * TSR_KUBE_EVENT_DEPTH_MAX, an event that does not decode) / TSR_ETOOBIG (an event over the
 * ceiling) / TSR_ENOMEM with diag. After a non-zero return the stream is spent: release it.
 */
int tsr_kube_watch_stream_feed(struct tsr_kube_watch_stream *s, const void *data, size_t len,
                               tsr_kube_event_fn fn, void *ctx, struct tsr_diag *diag);

/*
 * Ends the stream: 0 when nothing but whitespace is pending, else TSR_EPARSE (the stream stopped
 * inside an event) with diag.
 */
int tsr_kube_watch_stream_finish(struct tsr_kube_watch_stream *s, struct tsr_diag *diag);

#endif
