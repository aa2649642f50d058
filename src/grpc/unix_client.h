/*
 * unix_client.h - blocking gRPC client calls over a unix socket: the transport around the no-I/O
 * client.h. Each call or stream has its own connection and runs on the caller's thread, so a
 * device plugin can call Register while its own server answers the kubelet's dial-back on the
 * server's threads (spec/kubernetes-contracts.md §2.2).
 *
 * Ownership: a stream client is the caller's (close with tsr_grpc_unix_stream_close); it is
 * driven by one thread at a time.
 */
#ifndef TSR_GRPC_UNIX_CLIENT_H
#define TSR_GRPC_UNIX_CLIENT_H

#include "base/buf.h"
#include "grpc/status.h"

#include <stddef.h>
#include <stdint.h>

struct tsr_grpc_unix_stream;

/*
 * One unary call on a new connection to socket_path: method is the path
 * ("/v1beta1.Registration/Register"), req the encoded request. timeout_ms > 0 is the deadline
 * (sent as grpc-timeout; DEADLINE_EXCEEDED when it passes). The outcome is *st: a connection
 * failure is UNAVAILABLE. On OK, the response message is appended to resp. Returns 0 (st set) or
 * TSR_EINVAL / TSR_ENOMEM before any call was made.
 */
int tsr_grpc_unix_call(const char *socket_path, const char *method, const uint8_t *req, size_t len,
                       int timeout_ms, struct tsr_buf *resp, struct tsr_grpc_status *st);

/*
 * Opens a server-streaming call on a new connection. Returns 0 with *out (close with
 * tsr_grpc_unix_stream_close), or TSR_EIO (*st UNAVAILABLE: no connection), TSR_EINVAL, TSR_ENOMEM.
 */
int tsr_grpc_unix_stream_open(const char *socket_path, const char *method, const uint8_t *req,
                              size_t len, struct tsr_grpc_unix_stream **out,
                              struct tsr_grpc_status *st);

enum tsr_grpc_unix_next {
        TSR_GRPC_UNIX_END = 0,     /* the call ended; *st holds its status */
        TSR_GRPC_UNIX_MESSAGE = 1, /* msg holds the next message */
        TSR_GRPC_UNIX_TIMEOUT = 2, /* nothing within timeout_ms; the call is still open */
};

/*
 * Waits up to timeout_ms (< 0: forever) for the next message. Messages that arrived before the
 * end are all returned before TSR_GRPC_UNIX_END. Returns an enum tsr_grpc_unix_next value, or
 * TSR_ENOMEM. msg is reset and filled only for TSR_GRPC_UNIX_MESSAGE.
 */
int tsr_grpc_unix_stream_next(struct tsr_grpc_unix_stream *s, int timeout_ms, struct tsr_buf *msg,
                              struct tsr_grpc_status *st);

/* Cancels the call if open (RST_STREAM(CANCEL) is sent), closes the connection, frees s. */
void tsr_grpc_unix_stream_close(struct tsr_grpc_unix_stream *s);

#endif
