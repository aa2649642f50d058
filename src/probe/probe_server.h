/*
 * probe_server.h - a daemon's plain-HTTP endpoints for kubelet probes and a Prometheus
 * scrape: GET /healthz (200 while the process serves), GET /readyz (200 when the ready callback
 * says so, else 503 naming why), GET /metrics (the metrics callback's text); any other path 404,
 * any other method 405. One libmicrohttpd thread.
 *
 * Ownership: the config is copied; its callbacks' ctx is borrowed until tsr_probe_server_stop.
 * The callbacks run on the server's thread.
 */
#ifndef TSR_PROBE_PROBE_SERVER_H
#define TSR_PROBE_PROBE_SERVER_H

#include <stdbool.h>
#include <stddef.h>

struct tsr_buf;
struct tsr_diag;
struct tsr_probe_server;

struct tsr_probe_server_config {
        const char *bind; /* an IPv4 literal; NULL: every address */
        unsigned port;    /* 0: an ephemeral one */
        bool (*ready)(void *ctx, char *why, size_t why_len);
        int (*metrics)(void *ctx, struct tsr_buf *out);
        void *ctx;
};

/* Listens. Returns 0 and *out, or TSR_EINVAL (a bad bind address or port) or TSR_EIO (the port
 * is taken), with diag. */
int tsr_probe_server_start(const struct tsr_probe_server_config *cfg, struct tsr_probe_server **out,
                           struct tsr_diag *diag);

/* The port listened on. */
unsigned tsr_probe_server_port(const struct tsr_probe_server *s);

/* Stops listening and frees s. s may be NULL. */
void tsr_probe_server_stop(struct tsr_probe_server *s);

#endif
