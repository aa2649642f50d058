/*
 * http_loop.h - the webhook's HTTP/1.1 transport: listening sockets, a pool of worker threads
 * each running its own epoll, TLS sessions (GnuTLS, non-blocking) and keep-alive connections.
 * It frames requests (http_request.h) and writes responses; what a request means is its owner's
 * (server.c), reached through the callbacks below, which run on the worker thread that owns the
 * connection (accept_wait, on_accept and on_open on the one that accepted it).
 *
 * A request's life, per connection, one at a time (a pipelined request waits in the buffer):
 *   on_head      its head is read. The owner may answer at once (tsr_http_respond): the answer
 *                is sent and the connection closed without reading the body. Otherwise a client
 *                that sent Expect: 100-continue gets its 100 Continue now. Returning false
 *                closes the connection at once, unanswered.
 *   on_body      each piece of the body as it arrives (Content-Length or chunked). Returning
 *                false closes the connection at once, unanswered.
 *   on_complete  the body is read: the owner answers (a request left unanswered gets a 500).
 *   on_done      once the answer is sent, or the connection is gone first. Exactly once for
 *                every on_head, on every path.
 * A head the parser refuses (400, 414, 417, 431, 501, 505) is answered by the loop with a
 * metav1.Status-free plain body and the connection closed; the owner is not called.
 *
 * An answer is written whole as one buffer: status line, Content-Type, Content-Length, Allow when
 * given, Connection: close when the answer closes the connection, the empty line and the body (not
 * for HEAD), in one TLS record up to 16 KiB. A connection whose client asked to close, or an
 * HTTP/1.0 client that did not ask to keep it, is closed after its answer.
 *
 * Connections: accept_wait may hold new connections in the listen queue; on_accept decides
 * from the peer address before any TLS work (false: closed);
 * on_open gives a connection its owner state (NULL: closed at once), on the worker that accepted
 * it, before it is handed to the worker that will own it; on_close is called once,
 * just before the descriptor is closed, so the owner may shut it down from another thread until
 * then (a deadline reaper does: the loop reads the end and closes it). A TLS handshake that
 * fails is reported through on_error (rate limiting is the owner's) and the connection closed.
 *
 * Invariants: a connection belongs to one worker for its life and is touched only by it; the
 * listening sockets are shared (EPOLLEXCLUSIVE wakes one worker per connection queued), and the
 * worker that accepts a connection hands it to the worker with the fewest connections (itself
 * on a tie), so a burst of clients is spread over the workers whichever one was awake.
 * Ownership: tsr_http_loop_start copies the config; the callbacks' ctx is borrowed.
 * Thread-safety: tsr_http_loop_open_connections may be called from any thread.
 */
#ifndef TSR_WEBHOOK_HTTP_LOOP_H
#define TSR_WEBHOOK_HTTP_LOOP_H

#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "webhook/http_request.h"

struct tsr_diag;
struct tsr_http_loop;
struct tsr_http_conn;

struct tsr_http_listen {
        int fd;                                /* a bound, listening, non-blocking socket (taken) */
        gnutls_certificate_credentials_t cred; /* NULL: plain HTTP */
        const char *priorities;                /* GnuTLS priority string with cred */
        void *ctx;                             /* handed to every callback of its connections */
};

struct tsr_http_callbacks {
        /* True to leave the listen queue alone for now (the loop asks again on its next turn). */
        bool (*accept_wait)(void *ctx);
        bool (*on_accept)(void *ctx, const struct sockaddr *addr, socklen_t len);
        void *(*on_open)(void *ctx, int fd, const struct sockaddr *addr);
        void (*on_close)(void *ctx, void *conn_state);
        /* See above; on_head sets *req_state, the request's own pointer, for the others. */
        bool (*on_head)(void *ctx, struct tsr_http_conn *c, const struct tsr_http_request *r,
                        void **req_state);
        bool (*on_body)(void *ctx, struct tsr_http_conn *c, const char *data, size_t len,
                        void *req_state);
        void (*on_complete)(void *ctx, struct tsr_http_conn *c, const struct tsr_http_request *r,
                            void *req_state);
        void (*on_done)(void *ctx, struct tsr_http_conn *c, void *req_state);
        void (*on_error)(void *ctx, const char *what, const char *detail);
};

#define TSR_HTTP_LISTEN_MAX 2

struct tsr_http_loop_config {
        struct tsr_http_listen listen[TSR_HTTP_LISTEN_MAX];
        size_t n_listen;
        unsigned threads;
        struct tsr_http_callbacks cb;
};

/* Starts the workers. Returns 0 and *out, or TSR_ENOMEM / TSR_EIO with diag. */
int tsr_http_loop_start(const struct tsr_http_loop_config *cfg, struct tsr_http_loop **out,
                        struct tsr_diag *diag);

/*
 * Stops the workers: every connection is closed (on_done for a request in progress, then
 * on_close), the listening sockets too. l may be NULL.
 */
void tsr_http_loop_stop(struct tsr_http_loop *l);

/* Connections open on listener i. */
unsigned tsr_http_loop_open_connections(struct tsr_http_loop *l, size_t i);

/*
 * Answers the request in progress on c (from on_head or on_complete only): status, body (malloc'd,
 * taken; NULL for an empty one), its Content-Type, an Allow header or NULL, and whether the
 * connection closes after it. The first answer of a request counts; a second is freed and ignored.
 */
void tsr_http_respond(struct tsr_http_conn *c, unsigned status, char *body,
                      const char *content_type, const char *allow, bool close);

/* The per-connection state on_open gave c. */
void *tsr_http_conn_state(const struct tsr_http_conn *c);

#endif
