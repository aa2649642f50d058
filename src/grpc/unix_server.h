/*
 * unix_server.h - gRPC server on a unix socket: the transport around the no-I/O server.h
 * (spec/kubernetes-contracts.md §2.2, §2.5).
 *
 * One accept thread and one thread per connection. A connection thread owns its socket, its
 * tsr_grpc_server_conn and an eventfd that is the connection's wakeup, so a tsr_grpc_stream_push
 * from any thread makes it send. Handlers and the table's `closed` callback run on connection
 * threads, several at once when several clients are connected: `user` must be safe for that.
 * The owner learns that a client cancelled or went away through `closed` (TSR_GRPC_END_CANCELLED
 * or TSR_GRPC_END_CONN_LOST). tsr_grpc_unix_server_stop closes the listener, ends every open
 * stream with grpc-status 0 and a GOAWAY, waits up to one second per connection for those bytes
 * to leave and for the peer to close its end (the server shuts its write side first and reads
 * until then, so no frame the peer sent late turns into a broken pipe before it reads the
 * trailers), joins every thread and removes the socket file; `closed` has then run for every
 * stream.
 *
 * Ownership: the server borrows table and user until stop returns.
 */
#ifndef TSR_GRPC_UNIX_SERVER_H
#define TSR_GRPC_UNIX_SERVER_H

#include "grpc/server.h"

struct tsr_diag;
struct tsr_grpc_unix_server;

/*
 * Listens on path (a stale socket file there is removed first; any other file is refused with
 * TSR_EEXIST) and starts serving. Returns 0 with a new server in *out (stop and free with
 * tsr_grpc_unix_server_stop), TSR_EINVAL (path too long), TSR_EEXIST, TSR_EIO or TSR_ENOMEM, with
 * diag.
 */
int tsr_grpc_unix_server_start(const char *path, const struct tsr_grpc_service_table *table,
                               void *user, struct tsr_grpc_unix_server **out,
                               struct tsr_diag *diag);

/* Stops the server gracefully (see above) and frees it. NULL is a no-op. */
void tsr_grpc_unix_server_stop(struct tsr_grpc_unix_server *s);

#endif
