/*
 * client.h - an API server client on libcurl (spec/kubernetes-contracts.md §4): GET, LIST with
 * resourceVersion / limit / continue, WATCH as a streaming GET whose body watch_stream.h cuts
 * into events, PATCH (merge, JSON patch, server-side apply) and any other verb.
 *
 * Every request is one curl easy handle driven through a multi handle, so that a cancel token
 * (struct tsr_kube_cancel) fired from another thread wakes it at once. TLS and authentication
 * come from the config the client copied: CA, client certificate and key (PEM bytes are handed
 * to libcurl through anonymous memory files, as curl's GnuTLS backend takes paths only), and the
 * bearer token, re-read from token_file on every request because bound tokens rotate (the last
 * good token is kept while the file cannot be read). HTTP/2 is offered over TLS, HTTP/1.1 is
 * used otherwise.
 *
 * Errors: a request that got no HTTP response (connection, TLS, timeout, cancel) is TSR_EIO
 * with res->http == 0. A non-2xx response maps to a code by status — 400, 415, 422: TSR_EINVAL;
 * 404: TSR_ENOTFOUND; 409: TSR_EEXIST (reason AlreadyExists) or TSR_ESTALE (Conflict); 410:
 * TSR_ESTALE; 413: TSR_ETOOBIG; others (401, 403, 429, 5xx): TSR_EIO — with res->http set, and
 * diag quoting the method, path, status and the Status object's reason and message.
 *
 * Ownership: tsr_kube_client_new returns a new client (free with tsr_kube_client_free), which
 * copies the config. Responses are new jansson references (json_decref). Thread-safe: any number
 * of threads may issue requests on one client at once; a cancel token serves one request at a
 * time.
 */
#ifndef TSR_KUBE_CLIENT_H
#define TSR_KUBE_CLIENT_H

#include "kube/watch_stream.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct tsr_diag;
struct tsr_kube_config;
struct tsr_kube_client;

/* What came back besides the body. */
struct tsr_kube_result {
        long http;          /* HTTP status, 0 when no response came */
        long retry_after_s; /* a 429's or 503's Retry-After in seconds, else 0 */
        size_t events;      /* watch: events delivered */
        bool stalled;       /* watch: ended by stall_s of silence */
};

/*
 * A cancel token: fire it from any thread to end the request it is attached to (and every
 * later one) promptly. Ownership: the caller owns it (init / release); a request borrows it.
 */
struct tsr_kube_cancel {
        pthread_mutex_t mu;
        atomic_bool fired;
        void *multi; /* the curl multi handle of the request in flight, or NULL */
};

/* Initialises k, not fired. Returns 0 or TSR_ENOMEM. */
int tsr_kube_cancel_init(struct tsr_kube_cancel *k);

/* Releases k (no request may be using it). */
void tsr_kube_cancel_release(struct tsr_kube_cancel *k);

/* Fires k: the request in flight ends within milliseconds, later ones fail at once. */
void tsr_kube_cancel_fire(struct tsr_kube_cancel *k);

/* Whether k has fired. */
bool tsr_kube_cancel_fired(struct tsr_kube_cancel *k);

/* Client-wide limits; zero fields take the defaults shown. */
struct tsr_kube_client_opts {
        long connect_timeout_ms; /* 10000 */
        long request_timeout_ms; /* 60000: a whole non-watch request */
        size_t max_body;         /* 256 MiB: a non-watch response body */
        const char *user_agent;  /* "tessera/<version>" */
};

/*
 * Makes a client for cfg (copied). opts may be NULL. Returns 0 and *out, or TSR_EINVAL (no
 * server), TSR_EIO (libcurl could not start, a PEM memory file could not be made) or
 * TSR_ENOMEM, with diag.
 */
int tsr_kube_client_new(const struct tsr_kube_config *cfg, const struct tsr_kube_client_opts *opts,
                        struct tsr_kube_client **out, struct tsr_diag *diag);

/* Frees c (no request may be in flight). c may be NULL. */
void tsr_kube_client_free(struct tsr_kube_client *c);

/* The server URL ("https://host:port"), valid until the client is freed. */
const char *tsr_kube_client_server(const struct tsr_kube_client *c);

/* The namespace of the config (in-cluster: the Pod's), valid until the client is freed. */
const char *tsr_kube_client_namespace(const struct tsr_kube_client *c);

/*
 * Any request: method on path (an absolute path with its query, already escaped; see
 * tsr_kube_query_add), with body (body_len bytes, may be NULL) sent as content_type. On a 2xx
 * returns 0 and *out: the parsed JSON body, or NULL when the body is empty (out may be NULL to
 * discard it). cancel and res may be NULL. Errors as the file comment says; a 2xx body that is
 * not JSON is TSR_EPARSE.
 */
int tsr_kube_client_request(struct tsr_kube_client *c, const char *method, const char *path,
                            const char *content_type, const char *body, size_t body_len,
                            struct tsr_kube_cancel *cancel, json_t **out,
                            struct tsr_kube_result *res, struct tsr_diag *diag);

/* GET path: tsr_kube_client_request with no body. */
int tsr_kube_client_get(struct tsr_kube_client *c, const char *path, json_t **out,
                        struct tsr_kube_result *res, struct tsr_diag *diag);

/* List options (ListOptions); NULL or 0 fields are left out of the query. */
struct tsr_kube_list_opts {
        const char *label_selector;
        const char *field_selector;
        const char *resource_version; /* NULL: a consistent (most recent) read */
        const char *continue_token;
        long limit; /* page size */
        struct tsr_kube_cancel *cancel;
};

/*
 * One page of the collection at path (".../instancetypes"). Returns 0 and *out (the XList
 * object), or the errors of tsr_kube_client_request (an expired continue token: TSR_ESTALE,
 * res->http 410).
 */
int tsr_kube_client_list(struct tsr_kube_client *c, const char *path,
                         const struct tsr_kube_list_opts *opts, json_t **out,
                         struct tsr_kube_result *res, struct tsr_diag *diag);

/*
 * Every page of the collection (opts->limit per page, opts->continue_token ignored), as one XList
 * object whose items are all the pages' items and whose metadata.resourceVersion is the
 * snapshot's (the first page's). Items without kind or apiVersion get the list's (kind minus
 * "List"). Same returns as tsr_kube_client_list; TSR_EPARSE when a page is not a list.
 */
int tsr_kube_client_list_all(struct tsr_kube_client *c, const char *path,
                             const struct tsr_kube_list_opts *opts, json_t **out,
                             struct tsr_kube_result *res, struct tsr_diag *diag);

/* Watch options; NULL or 0 fields are left out of the query. */
struct tsr_kube_watch_opts {
        const char *label_selector;
        const char *field_selector;
        const char *resource_version; /* the list's, or the last event's or bookmark's */
        long timeout_s;               /* timeoutSeconds: the server ends the watch cleanly */
        bool bookmarks;               /* allowWatchBookmarks=true */
        long stall_s;                 /* > 0: this long without a byte (an event, a bookmark, the
                                         reply's headers) ends the watch as stalled */
        size_t max_event;             /* 0: TSR_KUBE_EVENT_MAX */
        struct tsr_kube_cancel *cancel;
};

/*
 * Watches the collection at path: a streaming GET (watch=1) whose events go to fn(ctx, ev) in
 * order (watch_stream.h); blocks until the stream ends. Returns 0 when the server ended the
 * stream cleanly; fn's non-zero return (the stream is closed); TSR_EIO when the connection broke
 * (a dropped watch), timed out (timeout_s plus a margin), stalled (stall_s without a byte:
 * res->stalled) or cancel fired (res->http is then the watch's 200 if it had started); TSR_EPARSE
 * when the body is malformed; or the errors of tsr_kube_client_request for a non-2xx reply (HTTP
 * 410: TSR_ESTALE, res->http 410).
 */
int tsr_kube_client_watch(struct tsr_kube_client *c, const char *path,
                          const struct tsr_kube_watch_opts *opts, tsr_kube_event_fn fn, void *ctx,
                          struct tsr_kube_result *res, struct tsr_diag *diag);

/* The patch types of spec/kubernetes-contracts.md §4.4. */
enum tsr_kube_patch_type {
        TSR_KUBE_PATCH_MERGE, /* application/merge-patch+json (RFC 7386) */
        TSR_KUBE_PATCH_JSON,  /* application/json-patch+json (RFC 6902) */
        TSR_KUBE_PATCH_APPLY, /* application/apply-patch+yaml (server-side apply; JSON body) */
};

/* PatchOptions; NULL or false fields are left out of the query. */
struct tsr_kube_patch_opts {
        const char *field_manager; /* required for apply */
        bool force;                /* apply only: take over conflicting fields */
        bool dry_run;              /* dryRun=All */
};

/*
 * PATCH path with body (borrowed; serialized compactly). Returns 0 and *out (the object after
 * the patch; out may be NULL), TSR_EINVAL without a request for an apply without field_manager,
 * or the errors of tsr_kube_client_request.
 */
int tsr_kube_client_patch(struct tsr_kube_client *c, const char *path,
                          enum tsr_kube_patch_type type, json_t *body,
                          const struct tsr_kube_patch_opts *opts, json_t **out,
                          struct tsr_kube_result *res, struct tsr_diag *diag);

/*
 * Appends "?name=value" (or "&name=value" when path already has a query) to the path in *b,
 * percent-escaping value. Returns 0 or the errors of tsr_buf_add.
 */
int tsr_kube_query_add(struct tsr_buf *b, const char *name, const char *value);

#endif
