/*
 * server.h - the HTTPS server of `tessera webhook`: HTTP/1.1 with keep-alive over GnuTLS, on the
 * epoll workers of http_loop.h (spec/kubernetes-contracts.md §1.1).
 *
 * The webhook port serves, over TLS 1.2 or 1.3 with the certificate of tls_store.h (reloaded when
 * its files change):
 *   POST <route path>  an AdmissionReview, answered by dispatch.h; a query string such as the
 *                      API server's ?timeout=10s is ignored. Any other method is 405, a body
 *                      that is not application/json 415, one over max_body bytes 413, and a
 *                      review while the cluster state is not ready 503 (answering from a cache
 *                      that has not listed everything would deny wrongly).
 *   GET /healthz       200 while the process serves (liveness)
 *   GET /readyz        200 once the cluster state is ready and until shutdown begins, else 503
 *                      naming why (readiness)
 *   GET /metrics       the Prometheus text of metrics.h
 * and anything else 404. The probe port, when configured, serves the three GET endpoints over
 * plain HTTP, for kubelet probes and a Prometheus scrape that carries no client certificate.
 *
 * One logfmt line (log.h) is written per review: at info for denials and errors, at debug for
 * allowed reviews, always with the request uid.
 *
 * Shutdown (tsr_webhook_server_stop) first reports not-ready for delay_ms while still serving, so
 * the API server's endpoints drop this replica, every answer from then on closing its connection;
 * then waits up to grace_ms for the reviews in flight and for the kept-alive connections (each
 * closes after its next answer; connections still arriving are taken in and answered, not
 * reset), and closes what is left.
 *
 * One server per process: GnuTLS's certificate callback is process-wide (tls_store.h).
 * Ownership: the config and everything it points to are borrowed and must outlive the server.
 * Thread-safety: the lookup and ready callbacks are called from many threads at once.
 */
#ifndef TSR_WEBHOOK_SERVER_H
#define TSR_WEBHOOK_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "webhook/conn_guard.h"
#include "webhook/dispatch.h"

struct tsr_buf;
struct tsr_diag;
struct tsr_webhook_server;

#define TSR_WEBHOOK_MAX_BODY_DEFAULT ((size_t)7 << 20) /* controller-runtime's request limit */

/*
 * The room the server gives a ready callback's why, NUL included. A reason quotes the API
 * server's own Status message (a 403 names the user, the resource, its group and scope: some
 * 200 bytes), and reaches the user whole, in /readyz and in the 503 the API server reports.
 */
#define TSR_WEBHOOK_WHY_MAX 768

struct tsr_webhook_server_config {
        const char *bind;        /* an IPv4 or IPv6 literal; NULL: every address */
        unsigned port;           /* the webhook port; 0: an ephemeral one */
        int probe_port;          /* plain-HTTP probes and metrics; -1: none, 0: ephemeral */
        const char *cert_file;   /* PEM chain, leaf first */
        const char *key_file;    /* PEM private key */
        unsigned threads;        /* worker threads, 1..256 (tsr_webhook_default_threads) */
        size_t max_body;         /* the largest review accepted, in bytes */
        unsigned idle_timeout_s; /* an idle keep-alive connection is closed after this; 0 never */
        /* The webhook port's connection and memory budget (its idle_timeout_s is the above). */
        struct tsr_conn_guard_config guard;
        const struct tsr_webhook_route *routes;
        size_t n_routes;
        /* Fills *lookup with the cluster state one review reads (its current Settings included). */
        void (*lookup)(void *ctx, struct tsr_webhook_lookup *lookup);
        /* True when the cluster state can be answered from; else false with why (why_len bytes,
         * TSR_WEBHOOK_WHY_MAX) filled. */
        bool (*ready)(void *ctx, char *why, size_t why_len);
        /* Appends the cluster state's own series to /metrics (NULL: none). 0 or an error. */
        int (*metrics)(void *ctx, struct tsr_buf *out);
        void *ctx;
};

/*
 * Loads the certificate and starts listening. Returns 0 and *out, or TSR_EINVAL (a bad bind
 * address, port or thread count), TSR_EIO / TSR_EPARSE (the certificate files; a port in use),
 * TSR_EINUSE (another server runs in this process) or TSR_ENOMEM, with diag.
 */
int tsr_webhook_server_start(const struct tsr_webhook_server_config *cfg,
                             struct tsr_webhook_server **out, struct tsr_diag *diag);

/* The port the webhooks listen on (the chosen one when cfg->port was 0). */
unsigned tsr_webhook_server_port(const struct tsr_webhook_server *s);

/* The probe port, or 0 when there is none. */
unsigned tsr_webhook_server_probe_port(const struct tsr_webhook_server *s);

/* Drains and stops as described above, then frees s. s may be NULL. */
void tsr_webhook_server_stop(struct tsr_webhook_server *s, unsigned delay_ms, unsigned grace_ms);

/* The worker threads a webhook runs by default: one per online CPU, at most 16. */
unsigned tsr_webhook_default_threads(void);

#endif
