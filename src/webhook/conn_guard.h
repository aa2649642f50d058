/*
 * conn_guard.h - the webhook's connection and memory budget: what keeps any number of clients,
 * idle, slow or sending large bodies, from starving the API server's reviews.
 *
 *   - A connection budget (max_connections) over all clients and a per-client share
 *     (max_per_client, by source address, IPv4 and its IPv6-mapped form alike). A connection
 *     past the client's share is closed as it is accepted, before any TLS work. One that finds
 *     the budget full evicts the connection that has waited longest outside a request (idle, or
 *     still in its handshake or headers), so a flood of slow clients cannot lock a real client
 *     out; only when every connection is inside a request is it closed. Worker threads accepting
 *     at the same instant may each pass the share or the budget by one (a connection counts
 *     from its slot, taken just after the accept policy).
 *   - Deadlines, by wall clock from the phase's start (a byte a second does not extend them):
 *     a new connection has header_deadline_s for its TLS handshake and first request's headers;
 *     a request, request_deadline_s from its headers to its answer sent (body included); a
 *     kept-alive connection between requests, idle_timeout_s (0: none). Under pressure (the
 *     budget nine-tenths full) a connection not inside a request gets one second.
 *   - A memory budget (body_memory) over every review body held at once: a chunk that would pass
 *     it is refused (the server closes that connection at once).
 * /readyz tells the truth through tsr_conn_guard_exhausted: not ready while no new connection
 * can get in, or while the largest review (max_body) would not fit the memory left or a body
 * was refused for memory in the last 2 s.
 * A connection past a deadline is cut with shutdown(2); the server's loop then sees its end and
 * closes it. Refusals and cuts are counted (tsr_conn_guard_render) and logged at most once per
 * reason every 10 s with the number since the last line.
 *
 * Invariants: a slot is in use from tsr_conn_guard_opened to tsr_conn_guard_closed, and the
 * reaper touches a slot's descriptor only under the guard's mutex, which closed also takes: the
 * server calls closed before its loop closes the descriptor, so it is never reused while
 * the reaper can see it. body bytes reserved are released by whoever reserved them.
 * Ownership: tsr_conn_guard_new returns a guard with its reaper thread running; tsr_conn_guard_free
 * stops the thread and frees it (every connection closed first).
 * Thread-safety: every function may be called from any thread.
 */
#ifndef TSR_WEBHOOK_CONN_GUARD_H
#define TSR_WEBHOOK_CONN_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct tsr_buf;
struct tsr_diag;
struct tsr_conn_guard;
struct tsr_conn_slot;

#define TSR_CONN_MAX_DEFAULT         1024
#define TSR_CONN_PER_CLIENT_DEFAULT  256
#define TSR_CONN_HEADER_DEADLINE_S   10
#define TSR_CONN_REQUEST_DEADLINE_S  30 /* the API server's longest webhook timeout */
#define TSR_CONN_BODY_MEMORY_DEFAULT ((size_t)128 << 20)
#define TSR_CONN_SLACK               64 /* slots past the budget: evicted ones still closing */

struct tsr_conn_guard_config {
        unsigned max_connections;    /* 1..65536 */
        unsigned max_per_client;     /* 1..max_connections */
        unsigned header_deadline_s;  /* >= 1 */
        unsigned request_deadline_s; /* >= 1 */
        unsigned idle_timeout_s;     /* 0: a kept-alive connection waits without a deadline */
        size_t body_memory;          /* >= max_body */
        size_t max_body;             /* the largest review (the server sets it) */
        /*
         * Count refusals and cuts but log none: the probe port, where a scrape's kept-alive
         * connection is cut at every idle deadline as a matter of course.
         */
        bool quiet;
};

/* The defaults above as a config (idle_timeout_s and max_body are the server's own). */
#define TSR_CONN_GUARD_DEFAULTS                                                                    \
        ((struct tsr_conn_guard_config){                                                           \
            .max_connections = TSR_CONN_MAX_DEFAULT,                                               \
            .max_per_client = TSR_CONN_PER_CLIENT_DEFAULT,                                         \
            .header_deadline_s = TSR_CONN_HEADER_DEADLINE_S,                                       \
            .request_deadline_s = TSR_CONN_REQUEST_DEADLINE_S,                                     \
            .body_memory = TSR_CONN_BODY_MEMORY_DEFAULT,                                           \
        })

/* Checks cfg and starts the reaper. TSR_EINVAL naming the bad field, or TSR_ENOMEM. */
int tsr_conn_guard_new(const struct tsr_conn_guard_config *cfg, struct tsr_conn_guard **out,
                       struct tsr_diag *diag);

void tsr_conn_guard_free(struct tsr_conn_guard *g);

/* The accept policy: true when a connection from addr fits the budget and the client's share. */
bool tsr_conn_guard_admit(struct tsr_conn_guard *g, const struct sockaddr *addr, socklen_t len);

/*
 * True while the slots are all but taken (half the slack left) and some hold connections cut but
 * not closed yet: a connection accepted now could be refused, though room is moments away. The
 * server leaves new connections in the listen queue meanwhile: under a flood of clients, each of
 * which evicts an older one, accepting faster than the evicted close would refuse real clients for
 * want of slots.
 */
bool tsr_conn_guard_closing_full(struct tsr_conn_guard *g);

/* A connection accepted on fd from addr; its slot, or NULL (no room: the caller closes it). */
struct tsr_conn_slot *tsr_conn_guard_opened(struct tsr_conn_guard *g, int fd,
                                            const struct sockaddr *addr);

/* The connection is about to be closed; slot may be NULL. */
void tsr_conn_guard_closed(struct tsr_conn_guard *g, struct tsr_conn_slot *slot);

/* A request's headers are complete / its answer is sent (the next request's wait begins). */
void tsr_conn_guard_request_begin(struct tsr_conn_guard *g, struct tsr_conn_slot *slot);
void tsr_conn_guard_request_end(struct tsr_conn_guard *g, struct tsr_conn_slot *slot);

/* Reserves n body bytes; false (nothing reserved, counted) when the memory budget would pass. */
bool tsr_conn_guard_body_reserve(struct tsr_conn_guard *g, size_t n);
void tsr_conn_guard_body_release(struct tsr_conn_guard *g, size_t n);

/* True with why filled while new connections are refused for want of room (for /readyz). */
bool tsr_conn_guard_exhausted(struct tsr_conn_guard *g, char *why, size_t why_len);

/* Appends the tessera_webhook_connections* and tessera_webhook_body_* series to out. */
int tsr_conn_guard_render(struct tsr_conn_guard *g, struct tsr_buf *out);

#endif
