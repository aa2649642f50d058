/*
 * client.h - the client side of gRPC over one HTTP/2 connection (nghttp2), with no I/O: the
 * transport writes what tsr_grpc_client_conn_output hands back and feeds the bytes it reads
 * (spec/kubernetes-contracts.md §2.5).
 *
 * The client preface and SETTINGS are queued at creation. A call sends HEADERS (:method POST,
 * :scheme http, :path, :authority localhost, te: trailers, grpc-timeout when given,
 * content-type: application/grpc) and its one request message with END_STREAM. Its result is a
 * gRPC status, decided once, when the call ends:
 *   - a response whose :status is not 200 maps that HTTP status (grpc's
 *     http-grpc-status-mapping: 400 INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED,
 *     404 UNIMPLEMENTED, 429/502/503/504 UNAVAILABLE, others UNKNOWN);
 *   - a content-type not application/grpc* is INTERNAL;
 *   - grpc-status from the trailers (or a Trailers-Only reply), grpc-message percent-decoded;
 *   - a stream that ends without trailers is INTERNAL; RST_STREAM maps NO_ERROR, PROTOCOL_ERROR
 *     and INTERNAL_ERROR (and other codes) to INTERNAL, REFUSED_STREAM to UNAVAILABLE, CANCEL to
 *     CANCELLED;
 *   - a malformed or oversized response message is INTERNAL / RESOURCE_EXHAUSTED (the stream is
 *     reset with CANCEL), and a unary call answered OK with other than one message is INTERNAL.
 *
 * Messages: a unary call keeps its one response message (tsr_grpc_call_response); a call started
 * with a message callback (server streaming) hands every message to it, in order, as it arrives.
 *
 * Threads and ownership: a connection and its calls are driven by one thread at a time. A call
 * belongs to the caller (free with tsr_grpc_call_free), also after its connection is freed; the
 * connection keeps a list of its calls and ends those still open with UNAVAILABLE when it fails
 * or is freed. Callbacks run inside feed and borrow the message for the call's duration.
 */
#ifndef TSR_GRPC_CLIENT_H
#define TSR_GRPC_CLIENT_H

#include "base/buf.h"
#include "grpc/message.h"
#include "grpc/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tsr_diag;
struct tsr_grpc_client_conn;
struct tsr_grpc_call;

/*
 * Returns in *out a new connection (free with tsr_grpc_client_conn_free), its preface queued.
 * max_message is the response ceiling (0: TSR_GRPC_MESSAGE_MAX_DEFAULT). Returns 0 or TSR_ENOMEM.
 */
int tsr_grpc_client_conn_new(size_t max_message, struct tsr_grpc_client_conn **out);

/* Ends calls still open with UNAVAILABLE (they stay the caller's) and frees c. NULL: no-op. */
void tsr_grpc_client_conn_free(struct tsr_grpc_client_conn *c);

/*
 * Feeds bytes read from the server; message callbacks run inside. Returns 0, or TSR_EPARSE when
 * the bytes broke HTTP/2 (open calls then end with UNAVAILABLE), with diag.
 */
int tsr_grpc_client_conn_feed(struct tsr_grpc_client_conn *c, const uint8_t *data, size_t len,
                              struct tsr_diag *diag);

/* Appends every byte ready to send to out. Returns 0, TSR_ENOMEM / TSR_ETOOBIG or TSR_EIO. */
int tsr_grpc_client_conn_output(struct tsr_grpc_client_conn *c, struct tsr_buf *out);

/* Ends every open call with code and msg (the transport lost the socket, say). */
void tsr_grpc_client_conn_fail(struct tsr_grpc_client_conn *c, int code, const char *msg);

/*
 * Starts a call of path ("/v1beta1.Registration/Register") with one request message (encoded,
 * unframed; copied). timeout_ms > 0 sends grpc-timeout (the transport enforces the deadline with
 * tsr_grpc_call_cancel). on_message NULL makes a unary call; otherwise every response message
 * goes to on_message(ctx, ...), whose non-zero return cancels the call with CANCELLED. Returns 0
 * with a new call in *out (free with tsr_grpc_call_free), TSR_EINVAL (path not "/..."),
 * TSR_ENOMEM or TSR_EIO (the connection takes no new stream).
 */
int tsr_grpc_client_call_start(struct tsr_grpc_client_conn *c, const char *path, const uint8_t *req,
                               size_t len, uint64_t timeout_ms, tsr_grpc_message_fn on_message,
                               void *ctx, struct tsr_grpc_call **out);

/* True once the call has its final status. */
bool tsr_grpc_call_done(const struct tsr_grpc_call *call);

/* The final status; valid once done, until the call is freed. */
const struct tsr_grpc_status *tsr_grpc_call_status(const struct tsr_grpc_call *call);

/* A unary call's response message (encoded); valid once done with OK, until the call is freed. */
const struct tsr_buf *tsr_grpc_call_response(const struct tsr_grpc_call *call);

/* Ends an open call now with code and msg, resetting its stream with CANCEL. Done calls: no-op. */
void tsr_grpc_call_cancel(struct tsr_grpc_call *call, int code, const char *msg);

/* Frees call, cancelling it (CANCELLED) first if still open. NULL is a no-op. */
void tsr_grpc_call_free(struct tsr_grpc_call *call);

#endif
