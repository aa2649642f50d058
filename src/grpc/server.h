/*
 * server.h - the server side of gRPC over one HTTP/2 connection (nghttp2), with no I/O: the
 * transport feeds the bytes it reads with tsr_grpc_server_conn_feed and writes what
 * tsr_grpc_server_conn_output hands back (spec/kubernetes-contracts.md §2.5).
 *
 * A connection answers a method table: path -> unary handler or server-streaming handler. The
 * server's SETTINGS are queued at creation, before any byte of the client is read (grpc-go
 * clients give up without them). Per request, in this order: a content-type that does not start
 * with application/grpc gets HTTP 415; an unknown path gets a Trailers-Only UNIMPLEMENTED (12); a
 * grpc-encoding other than identity gets UNIMPLEMENTED; a request that is not exactly one message
 * gets INTERNAL, one over the ceiling RESOURCE_EXHAUSTED. A missing `te: trailers` is tolerated.
 * Responses are HEADERS, DATA, then trailers (grpc-status, percent-encoded grpc-message); a
 * non-OK status before any message is sent Trailers-Only. Trailers sent before the client's
 * END_STREAM are followed by RST_STREAM(NO_ERROR).
 *
 * Server streaming. The streaming handler gets a struct tsr_grpc_stream. Messages pushed to it
 * (tsr_grpc_stream_push) are queued under the stream's own mutex and sent in order; the stream
 * stays open until the owner finishes it (tsr_grpc_stream_finish), the client cancels
 * (RST_STREAM), the connection goes away or tsr_grpc_server_conn_shutdown ends it with status 0.
 * Each of those ends is reported once, on the thread driving the connection, through the table's
 * `closed` callback. Push and finish are safe from any thread: they call the connection's wakeup
 * function (tsr_grpc_server_conn_set_wakeup) so that the driving thread calls
 * tsr_grpc_server_conn_output again; after the stream has ended they return TSR_ESTALE.
 *
 * Threads and ownership: a connection is driven by one thread at a time (feed, output, shutdown,
 * free); handlers and `closed` run on that thread, inside feed or output. The table and `user`
 * are borrowed for the connection's life. A stream is reference-counted: the connection holds one
 * reference until the stream ends; a handler that keeps the stream past its return takes its own
 * with tsr_grpc_stream_ref and drops it with tsr_grpc_stream_unref, from any thread.
 */
#ifndef TSR_GRPC_SERVER_H
#define TSR_GRPC_SERVER_H

#include "base/buf.h"
#include "grpc/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tsr_diag;
struct tsr_grpc_server_conn;
struct tsr_grpc_stream;

/*
 * A unary method. st arrives as OK with an empty message. On OK the handler appends the encoded
 * response (one message, unframed) to resp; any other st->code is sent as the call's status with
 * no message. A negative return is sent as INTERNAL naming the error.
 */
typedef int (*tsr_grpc_unary_fn)(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                                 struct tsr_grpc_status *st);

/*
 * A server-streaming method. Push the first messages now or later; leave st OK to keep the
 * stream open. A non-OK st (or a negative return, sent as INTERNAL) ends the call at once, and
 * messages already pushed are sent before that status.
 */
typedef int (*tsr_grpc_stream_fn)(void *user, struct tsr_grpc_stream *stream, const uint8_t *req,
                                  size_t len, struct tsr_grpc_status *st);

/* Why a stream ended. */
enum tsr_grpc_stream_end {
        TSR_GRPC_END_FINISHED,  /* the owner's tsr_grpc_stream_finish reached the client */
        TSR_GRPC_END_CANCELLED, /* the client reset the stream (RST_STREAM) */
        TSR_GRPC_END_SHUTDOWN,  /* tsr_grpc_server_conn_shutdown ended it with status 0 */
        TSR_GRPC_END_CONN_LOST, /* the connection failed or was freed first */
};

/* Called once for every stream a streaming handler was given, when it ends (see above). */
typedef void (*tsr_grpc_stream_closed_fn)(void *user, struct tsr_grpc_stream *stream,
                                          enum tsr_grpc_stream_end why);

struct tsr_grpc_method {
        const char *path;        /* "/v1beta1.DevicePlugin/Allocate" */
        tsr_grpc_unary_fn unary; /* exactly one of unary and stream is set */
        tsr_grpc_stream_fn stream;
};

struct tsr_grpc_service_table {
        const struct tsr_grpc_method *methods;
        size_t n_methods;
        tsr_grpc_stream_closed_fn closed; /* may be NULL */
        size_t max_message;               /* request ceiling, 0: TSR_GRPC_MESSAGE_MAX_DEFAULT */
};

/* Wakes the thread driving a connection; must be safe from any thread, and must not block. */
typedef void (*tsr_grpc_wakeup_fn)(void *ctx);

/*
 * Returns in *out a new connection (free with tsr_grpc_server_conn_free) whose SETTINGS are
 * already queued for output. Returns 0 or TSR_ENOMEM.
 */
int tsr_grpc_server_conn_new(const struct tsr_grpc_service_table *table, void *user,
                             struct tsr_grpc_server_conn **out);

/* Sets the function push and finish call from other threads. Call before the first feed. */
void tsr_grpc_server_conn_set_wakeup(struct tsr_grpc_server_conn *c, tsr_grpc_wakeup_fn fn,
                                     void *ctx);

/*
 * Feeds bytes read from the peer; handlers run inside. Returns 0, or TSR_EPARSE when the bytes
 * broke HTTP/2 (a GOAWAY is then queued: flush the output and close), or TSR_ENOMEM, with diag.
 */
int tsr_grpc_server_conn_feed(struct tsr_grpc_server_conn *c, const uint8_t *data, size_t len,
                              struct tsr_diag *diag);

/*
 * Appends every byte ready to send to out (nothing when none is) and picks up what other threads
 * pushed. Returns 0, TSR_ENOMEM / TSR_ETOOBIG (out's ceiling) or TSR_EIO (nghttp2 failed).
 */
int tsr_grpc_server_conn_output(struct tsr_grpc_server_conn *c, struct tsr_buf *out);

/* False once the connection has nothing more to read or write: the transport closes it. */
bool tsr_grpc_server_conn_alive(const struct tsr_grpc_server_conn *c);

/*
 * Graceful end: every open stream is ended with grpc-status 0 after its queued messages, and a
 * GOAWAY tells the client to open no new stream. Keep calling output until alive is false.
 */
void tsr_grpc_server_conn_shutdown(struct tsr_grpc_server_conn *c);

/* Frees c; streams still open end with TSR_GRPC_END_CONN_LOST. NULL is a no-op. */
void tsr_grpc_server_conn_free(struct tsr_grpc_server_conn *c);

/*
 * Queues one message (encoded, unframed) on the stream. Any thread. Returns 0, TSR_ESTALE when the
 * stream has ended (the message is dropped), TSR_ETOOBIG above the stream's queue ceiling
 * (64 MiB) or TSR_ENOMEM.
 */
int tsr_grpc_stream_push(struct tsr_grpc_stream *s, const uint8_t *msg, size_t len);

/*
 * Ends the stream with st after the queued messages. Any thread. Returns 0, or TSR_ESTALE when
 * it has already ended or is ending.
 */
int tsr_grpc_stream_finish(struct tsr_grpc_stream *s, const struct tsr_grpc_status *st);

/* True once the stream has ended or is ending (no push will be sent). Any thread. */
bool tsr_grpc_stream_ended(struct tsr_grpc_stream *s);

/* The path of the method the stream answers; valid while a reference is held. */
const char *tsr_grpc_stream_path(const struct tsr_grpc_stream *s);

/* Takes a reference; any thread. */
void tsr_grpc_stream_ref(struct tsr_grpc_stream *s);

/* Drops a reference; the last one frees the stream. Any thread. NULL is a no-op. */
void tsr_grpc_stream_unref(struct tsr_grpc_stream *s);

#endif
