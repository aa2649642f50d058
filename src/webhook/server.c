/*
 * server.c - the webhook's routes over the HTTP transport of http_loop.h: per-request state
 * accumulates the body, on_done frees it, an atomic count of reviews in flight lets shutdown
 * drain.
 *
 * Invariants: every request the loop hands on_head has a struct request from then to on_done
 * (except one refused at its head for a body too large to read, answered at once); one that is a
 * review (a POST of JSON to a route) is counted in in_flight for that whole time. Answers are
 * malloc'd bodies the loop frees. A review is answered under the worker thread's JSON arena
 * (codec/json_arena.h), from the cache lookup to the log line: every jansson value it makes is
 * gone when the arena ends, and only the malloc'd body and the outcome's own arrays outlive it.
 */
#include "webhook/server.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "base/log_limit.h"
#include "base/timespec.h"
#include "base/version.h"
#include "codec/json_arena.h"
#include "webhook/conn_guard.h"
#include "webhook/http_loop.h"
#include "webhook/metrics.h"
#include "webhook/tls_store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * A review declared larger than max_body is read and discarded, so that the connection survives
 * its 413, unless it is DRAIN_FACTOR times larger: then it is refused at once and the connection
 * closed.
 */
#define DRAIN_FACTOR 8

/* The probe port's connections: the kubelet's probes and a scrape or two. */
#define PROBE_CONNECTIONS    64
#define PROBE_IDLE_TIMEOUT_S 10

/* TLS 1.2 and 1.3 only: the API server's Go client never offers less. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* The loop's listener indices. */
enum { WEBHOOKS, PROBES };

struct listener {
        struct tsr_webhook_server *server;
        struct tsr_conn_guard *guard; /* its connections' budget and deadlines */
        bool tls;
        unsigned port;
};

struct tsr_webhook_server {
        struct tsr_webhook_server_config cfg;
        struct tsr_tls_store *tls;
        gnutls_certificate_credentials_t cred; /* serves the store's current pair */
        struct tsr_metrics *metrics;
        struct tsr_log_limit http_log; /* the transport's messages: a client can cause them */
        const char **names;
        struct listener webhooks, probes;
        bool has_probes;
        struct tsr_http_loop *loop;
        atomic_int in_flight;
        atomic_bool stopping;
};

/* One request, from its head to on_done. */
struct request {
        const struct tsr_webhook_route *route; /* NULL: a probe endpoint or an unknown path */
        unsigned refuse;                       /* a 405 or 415 decided from the headers, or 0 */
        bool counted;                          /* a review in flight (in_flight counts it) */
        struct tsr_buf body;
        size_t reserved; /* body bytes reserved from the guard's memory budget */
        bool too_big;
        unsigned long long discarded; /* body bytes read and dropped */
        struct timespec start;
};

static double seconds_since(const struct timespec *start)
{
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/*
 * Queues body (malloc'd, taken; NULL answers 500 without one) with status and content_type, and
 * allow as the Allow header of a 405. While the server stops, every answer closes its
 * connection: a client that kept it alive would lose a request the drain cuts.
 */
static void reply(struct tsr_webhook_server *s, struct tsr_http_conn *c, unsigned status,
                  char *body, const char *content_type, const char *allow)
{
        if (!body)
                status = 500;
        tsr_http_respond(c, status, body, content_type, allow, atomic_load(&s->stopping));
}

static void reply_status(struct tsr_webhook_server *s, struct tsr_http_conn *c, unsigned status,
                         const char *message, const char *allow)
{
        reply(s, c, status, tsr_webhook_status_body((int)status, message), "application/json",
              allow);
}

static void reply_text(struct tsr_webhook_server *s, struct tsr_http_conn *c, unsigned status,
                       const char *text)
{
        reply(s, c, status, strdup(text), "text/plain; charset=utf-8", NULL);
}

static size_t route_index(const struct tsr_webhook_server *s, const struct tsr_webhook_route *r)
{
        return (size_t)(r - s->cfg.routes);
}

static const struct tsr_webhook_route *find_route(const struct tsr_webhook_server *s,
                                                  const char *path)
{
        for (size_t i = 0; i < s->cfg.n_routes; i++)
                if (!strcmp(s->cfg.routes[i].path, path))
                        return &s->cfg.routes[i];
        return NULL;
}

static bool is_json(const char *content_type)
{
        static const char json[] = "application/json";
        size_t n = sizeof(json) - 1;

        return content_type && !strncasecmp(content_type, json, n) &&
               (content_type[n] == '\0' || content_type[n] == ';' || content_type[n] == ' ');
}

static void serve_readyz(struct tsr_webhook_server *s, struct tsr_http_conn *c)
{
        char why[TSR_WEBHOOK_WHY_MAX] = "";

        if (atomic_load(&s->stopping)) {
                reply_text(s, c, 503, "shutting down\n");
        } else if (tsr_conn_guard_exhausted(s->webhooks.guard, why, sizeof(why) - 1)) {
                strcat(why, "\n");
                reply_text(s, c, 503, why);
        } else if (s->cfg.ready && !s->cfg.ready(s->cfg.ctx, why, sizeof(why))) {
                char line[TSR_WEBHOOK_WHY_MAX + 1];

                snprintf(line, sizeof(line), "%s\n", why[0] ? why : "not ready");
                reply_text(s, c, 503, line);
        } else {
                reply_text(s, c, 200, "ok\n");
        }
}

static void serve_metrics(struct tsr_webhook_server *s, struct tsr_http_conn *c)
{
        struct tsr_buf out = TSR_BUF_INIT;

        if (tsr_metrics_render(s->metrics, &out) ||
            tsr_conn_guard_render(s->webhooks.guard, &out) ||
            (s->cfg.metrics && s->cfg.metrics(s->cfg.ctx, &out)) ||
            tsr_build_info_render("webhook", &out)) {
                tsr_buf_release(&out);
                reply(s, c, 500, NULL, "text/plain", NULL);
                return;
        }
        reply(s, c, 200, tsr_buf_detach(&out), "text/plain; version=0.0.4; charset=utf-8", NULL);
}

static void serve_get(struct tsr_webhook_server *s, struct tsr_http_conn *c, const char *path,
                      const char *method)
{
        if (strcmp(method, "GET") && strcmp(method, "HEAD"))
                reply_status(s, c, 405, "use GET", "GET, HEAD");
        else if (!strcmp(path, "/healthz"))
                reply_text(s, c, 200, "ok\n");
        else if (!strcmp(path, "/readyz"))
                serve_readyz(s, c);
        else
                serve_metrics(s, c);
}

static void log_review(const struct tsr_webhook_route *route, const struct tsr_webhook_outcome *o,
                       double seconds)
{
        char status[8], code[8], ms[24];
        enum tsr_log_level level = TSR_LOG_INFO;

        if (o->http_status == 200 && o->allowed)
                level = TSR_LOG_DEBUG;
        else if (o->http_status >= 500)
                level = TSR_LOG_ERROR;
        snprintf(status, sizeof(status), "%d", o->http_status);
        snprintf(code, sizeof(code), "%d", o->code);
        snprintf(ms, sizeof(ms), "%.3f", seconds * 1e3);
        tsr_log(level, "review", "uid", o->uid, "webhook", route->name, "operation", o->operation,
                "kind", o->kind, "namespace", o->ns, "name", o->name, "http", status, "allowed",
                o->allowed ? "true" : "false", "code", code, "rule", o->rule, "patched",
                o->patched ? "true" : "false", "error", o->error, "ms", ms, NULL);
}

/* A review refused before its handler (405, 413, 415, 503): counted, logged and answered. */
static void refuse(struct tsr_webhook_server *s, struct tsr_http_conn *c,
                   const struct tsr_webhook_route *route, unsigned status, double seconds,
                   const char *msg)
{
        char code[8];

        snprintf(code, sizeof(code), "%u", status);
        tsr_metrics_observe(s->metrics, route_index(s, route), (int)status, seconds, false, NULL,
                            false);
        tsr_log(status >= 500 ? TSR_LOG_WARN : TSR_LOG_INFO, "review refused", "webhook",
                route->name, "http", code, "error", msg, NULL);
        reply_status(s, c, status, msg, status == 405 ? "POST" : NULL);
}

static void refuse_too_big(struct tsr_webhook_server *s, struct tsr_http_conn *c,
                           const struct tsr_webhook_route *route, double seconds)
{
        char msg[96];

        snprintf(msg, sizeof(msg), "the review exceeds %zu bytes", s->cfg.max_body);
        refuse(s, c, route, 413, seconds, msg);
}

/* The body is complete: answer the review. */
static void serve_review(struct tsr_webhook_server *s, struct tsr_http_conn *c, struct request *r)
{
        struct tsr_webhook_lookup lookup;
        struct tsr_webhook_outcome o;
        char *body = NULL, why[TSR_WEBHOOK_WHY_MAX] = "";
        int rc;

        if (r->too_big) {
                refuse_too_big(s, c, r->route, seconds_since(&r->start));
                return;
        }
        if (s->cfg.ready && !s->cfg.ready(s->cfg.ctx, why, sizeof(why))) {
                char msg[sizeof("not ready: ") + TSR_WEBHOOK_WHY_MAX];

                /* Answering from a cache that has not listed everything would deny wrongly. */
                snprintf(msg, sizeof(msg), "not ready: %s", why);
                refuse(s, c, r->route, 503, seconds_since(&r->start), msg);
                return;
        }
        tsr_json_arena_begin();
        memset(&lookup, 0, sizeof(lookup));
        s->cfg.lookup(s->cfg.ctx, &lookup);
        rc = tsr_webhook_dispatch(r->route, &lookup, r->body.ptr, r->body.len, &body, &o);
        if (rc) {
                memset(&o, 0, sizeof(o));
                o.http_status = 500;
                snprintf(o.error, sizeof(o.error), "%s", tsr_strerror(rc));
                body = NULL;
        }
        reply(s, c, (unsigned)o.http_status, body, "application/json", NULL);
        tsr_metrics_observe(s->metrics, route_index(s, r->route), o.http_status,
                            seconds_since(&r->start), o.http_status == 200 && !o.allowed, o.rule,
                            o.patched);
        log_review(r->route, &o, seconds_since(&r->start));
        tsr_json_arena_end();
}

/* The head is read: what it decides. False closes the connection; a 413 may be answered now. */
static bool on_head(void *ctx, struct tsr_http_conn *c, const struct tsr_http_request *h,
                    void **req_state)
{
        struct listener *l = ctx;
        struct tsr_webhook_server *s = l->server;
        const struct tsr_webhook_route *route = l->tls ? find_route(s, h->path) : NULL;
        unsigned long long declared = h->has_length ? h->content_length : 0;
        struct request *r;

        /* Not worth reading to keep the connection: refused now, and the connection closes. */
        if (route && declared / DRAIN_FACTOR > s->cfg.max_body) {
                refuse_too_big(s, c, route, 0);
                return true;
        }
        r = calloc(1, sizeof(*r));
        if (!r)
                return false;
        tsr_conn_guard_request_begin(l->guard, tsr_http_conn_state(c));
        r->route = route;
        tsr_buf_init(&r->body);
        r->body.max = s->cfg.max_body + 1;
        r->too_big = declared > s->cfg.max_body; /* read and discarded, then answered 413 */
        clock_gettime(CLOCK_MONOTONIC, &r->start);
        if (route && strcmp(h->method, "POST"))
                r->refuse = 405;
        else if (route && !is_json(h->has_content_type ? h->content_type : NULL))
                r->refuse = 415;
        else if (route) {
                r->counted = true;
                atomic_fetch_add(&s->in_flight, 1);
        }
        *req_state = r;
        return true;
}

/* A piece of the body. False closes the connection at once. */
static bool on_body(void *ctx, struct tsr_http_conn *c, const char *data, size_t len,
                    void *req_state)
{
        struct listener *l = ctx;
        struct request *r = req_state;

        (void)c;
        if (!r)
                return false;
        /*
         * Past the memory budget the connection is closed at once: holding it would hold the
         * memory, and the body must be read before an answer.
         */
        if (r->counted && !r->too_big) {
                if (!tsr_conn_guard_body_reserve(l->guard, len))
                        return false;
                r->reserved += len;
                if (tsr_buf_add(&r->body, data, len))
                        r->too_big = true;
        }
        /*
         * A body nobody reads (a refusal, a probe, an unknown path) is dropped, up to a point:
         * past it the connection is cut rather than drained forever.
         */
        if (!r->counted || r->too_big) {
                r->discarded += len;
                if (r->discarded / DRAIN_FACTOR > l->server->cfg.max_body)
                        return false;
        }
        return true;
}

/* The request is complete (its body, if any, read): answer it. */
static void on_complete(void *ctx, struct tsr_http_conn *c, const struct tsr_http_request *h,
                        void *req_state)
{
        struct listener *l = ctx;
        struct tsr_webhook_server *s = l->server;
        struct request *r = req_state;
        double seconds;

        if (!r)
                return;
        seconds = seconds_since(&r->start);
        if (r->refuse == 405)
                refuse(s, c, r->route, 405, seconds, "admission reviews are POSTed");
        else if (r->refuse == 415)
                refuse(s, c, r->route, 415, seconds, "the review must be sent as application/json");
        else if (r->route)
                serve_review(s, c, r);
        else if (!strcmp(h->path, "/healthz") || !strcmp(h->path, "/readyz") ||
                 !strcmp(h->path, "/metrics"))
                serve_get(s, c, h->path, h->method);
        else
                reply_status(s, c, 404, "no webhook is served at this path", NULL);
}

static void on_done(void *ctx, struct tsr_http_conn *c, void *req_state)
{
        struct listener *l = ctx;
        struct request *r = req_state;

        tsr_conn_guard_request_end(l->guard, tsr_http_conn_state(c));
        if (!r)
                return;
        if (r->counted)
                atomic_fetch_sub(&l->server->in_flight, 1);
        tsr_conn_guard_body_release(l->guard, r->reserved);
        tsr_buf_release(&r->body);
        free(r);
}

/* Every slot taken, some by connections closing: they wait in the listen queue a moment. */
static bool accept_wait(void *ctx)
{
        struct listener *l = ctx;

        return tsr_conn_guard_closing_full(l->guard);
}

/* The accept policy: the listener's guard, its budget and per-client share. */
static bool on_accept(void *ctx, const struct sockaddr *addr, socklen_t len)
{
        struct listener *l = ctx;

        return tsr_conn_guard_admit(l->guard, addr, len);
}

/* A connection takes a slot of its listener's guard for its life; one that finds none is closed. */
static void *on_open(void *ctx, int fd, const struct sockaddr *addr)
{
        struct listener *l = ctx;

        return tsr_conn_guard_opened(l->guard, fd, addr);
}

static void on_close(void *ctx, void *conn_state)
{
        struct listener *l = ctx;

        tsr_conn_guard_closed(l->guard, conn_state);
}

/*
 * The transport's own messages (a TLS handshake that failed, an accept that failed), at most one
 * every 10 s: a client decides how many there are (every connection closed before its TLS
 * handshake is one).
 */
static void on_error(void *ctx, const char *what, const char *detail)
{
        struct listener *l = ctx;
        unsigned long held;
        char held_text[24], msg[256];

        if (!tsr_log_limit_pass(&l->server->http_log, &held))
                return;
        snprintf(held_text, sizeof(held_text), "%lu", held);
        snprintf(msg, sizeof(msg), "%s: %s", what, detail);
        tsr_log(TSR_LOG_WARN, "http", "detail", msg, "held_back", held_text, NULL);
}

/* Fills *ss for bind (NULL: unset) and port; returns the address family, or -1 for a bad one. */
static int bind_address(const char *bind, unsigned port, struct sockaddr_storage *ss)
{
        struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;

        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET, bind, &v4->sin_addr) == 1) {
                v4->sin_family = AF_INET;
                v4->sin_port = htons((uint16_t)port);
                return AF_INET;
        }
        if (inet_pton(AF_INET6, bind, &v6->sin6_addr) == 1) {
                v6->sin6_family = AF_INET6;
                v6->sin6_port = htons((uint16_t)port);
                return AF_INET6;
        }
        return -1;
}

/*
 * A listening socket on port (0: an ephemeral one) at cfg->bind, or on every address (IPv6
 * dual-stack, else IPv4). Returns 0 with *out (non-blocking) and the bound port, or TSR_EINVAL /
 * TSR_EIO with diag.
 */
static int listen_socket(const struct tsr_webhook_server_config *cfg, unsigned port, int *out,
                         unsigned *bound, struct tsr_diag *diag)
{
        struct sockaddr_storage ss;
        socklen_t len;
        int family, fd, one = 1, zero = 0;

        if (cfg->bind) {
                family = bind_address(cfg->bind, port, &ss);
                if (family < 0)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "--bind %s is not an IPv4 or IPv6 address", cfg->bind);
        } else {
                struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;

                memset(&ss, 0, sizeof(ss));
                v6->sin6_family = family = AF_INET6;
                v6->sin6_addr = in6addr_any;
                v6->sin6_port = htons((uint16_t)port);
        }
        fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 && !cfg->bind) {
                /* No IPv6 on this host: every IPv4 address instead. */
                struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;

                memset(&ss, 0, sizeof(ss));
                v4->sin_family = family = AF_INET;
                v4->sin_addr.s_addr = htonl(INADDR_ANY);
                v4->sin_port = htons((uint16_t)port);
                fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        }
        if (fd < 0)
                return tsr_diag_set(diag, TSR_EIO, "cannot open a socket: %s", strerror(errno));
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (family == AF_INET6 && !cfg->bind)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        len = family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, SOMAXCONN)) {
                close(fd);
                return tsr_diag_set(diag, TSR_EIO, "cannot listen on port %u (in use?)", port);
        }
        len = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
                close(fd);
                return tsr_diag_set(diag, TSR_EIO, "cannot read the port bound: %s",
                                    strerror(errno));
        }
        *bound = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
        *out = fd;
        return 0;
}

/*
 * Every connection of the budget needs a descriptor: the soft limit is raised toward the hard
 * one when it is lower (a container's default is often 1024). Below it, accept fails and
 * the loop logs it.
 */
static void raise_open_files(unsigned max_connections)
{
        rlim_t want = (rlim_t)max_connections + TSR_CONN_SLACK + PROBE_CONNECTIONS + 256;
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
                return;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl))
                tsr_log(TSR_LOG_WARN, "cannot raise the open-file limit for --max-connections",
                        NULL);
}

static int check_config(const struct tsr_webhook_server_config *cfg, struct tsr_diag *diag)
{
        if (cfg->port > 65535 || cfg->probe_port > 65535 || cfg->probe_port < -1)
                return tsr_diag_set(diag, TSR_EINVAL, "a port must be within 0..65535");
        if (cfg->threads < 1 || cfg->threads > 256)
                return tsr_diag_set(diag, TSR_EINVAL, "--threads must be within 1..256, got %u",
                                    cfg->threads);
        if (!cfg->max_body)
                return tsr_diag_set(diag, TSR_EINVAL, "--max-body must be positive");
        if (cfg->guard.body_memory < cfg->max_body)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "--max-body-memory (%zu) must hold at least one review of "
                                    "--max-body (%zu)",
                                    cfg->guard.body_memory, cfg->max_body);
        if (!cfg->lookup || !cfg->n_routes)
                return tsr_diag_set(diag, TSR_EINVAL, "no routes or no lookup");
        return 0;
}

static void server_free(struct tsr_webhook_server *s)
{
        tsr_http_loop_stop(s->loop); /* every connection closed, its guard slot given back */
        tsr_conn_guard_free(s->webhooks.guard);
        tsr_conn_guard_free(s->probes.guard);
        if (s->cred)
                gnutls_certificate_free_credentials(s->cred);
        tsr_tls_store_free(s->tls); /* uninstalls it */
        tsr_metrics_free(s->metrics);
        free(s->names);
        free(s);
}

/*
 * The probe port's guard: a few connections, short deadlines, no review bodies, and no log lines
 * (a Prometheus scrape's kept-alive connection outlives the idle deadline between scrapes).
 */
static int probe_guard(const struct tsr_webhook_server_config *cfg, struct tsr_conn_guard **out,
                       struct tsr_diag *diag)
{
        struct tsr_conn_guard_config g = {
            .max_connections = PROBE_CONNECTIONS,
            .max_per_client = PROBE_CONNECTIONS,
            .header_deadline_s = PROBE_IDLE_TIMEOUT_S,
            .request_deadline_s = PROBE_IDLE_TIMEOUT_S,
            .idle_timeout_s = PROBE_IDLE_TIMEOUT_S,
            .body_memory = cfg->max_body,
            .max_body = cfg->max_body,
            .quiet = true,
        };

        return tsr_conn_guard_new(&g, out, diag);
}

/* Opens the listening sockets and starts the loop. */
static int start_loop(struct tsr_webhook_server *s, struct tsr_diag *diag)
{
        const struct tsr_webhook_server_config *cfg = &s->cfg;
        struct tsr_http_loop_config lc = {
            .threads = cfg->threads,
            .cb = {accept_wait, on_accept, on_open, on_close, on_head, on_body, on_complete,
                   on_done, on_error},
        };
        int fd, rc = listen_socket(cfg, cfg->port, &fd, &s->webhooks.port, diag);

        if (rc)
                return rc;
        lc.listen[lc.n_listen++] =
            (struct tsr_http_listen){fd, s->cred, TLS_PRIORITIES, &s->webhooks};
        if (s->has_probes) {
                rc = listen_socket(cfg, (unsigned)cfg->probe_port, &fd, &s->probes.port, diag);
                if (rc) {
                        close(lc.listen[0].fd);
                        return rc;
                }
                lc.listen[lc.n_listen++] = (struct tsr_http_listen){fd, NULL, NULL, &s->probes};
        }
        return tsr_http_loop_start(&lc, &s->loop, diag);
}

int tsr_webhook_server_start(const struct tsr_webhook_server_config *cfg,
                             struct tsr_webhook_server **out, struct tsr_diag *diag)
{
        struct tsr_webhook_server *s;
        int rc = check_config(cfg, diag);

        if (rc)
                return rc;
        s = calloc(1, sizeof(*s));
        if (!s)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        s->cfg = *cfg;
        s->http_log = (struct tsr_log_limit)TSR_LOG_LIMIT_INIT(10000);
        s->webhooks = (struct listener){s, NULL, true, 0};
        s->probes = (struct listener){s, NULL, false, 0};
        s->has_probes = cfg->probe_port >= 0;
        s->names = calloc(cfg->n_routes, sizeof(*s->names));
        if (s->names)
                for (size_t i = 0; i < cfg->n_routes; i++)
                        s->names[i] = cfg->routes[i].name;
        s->metrics = s->names ? tsr_metrics_new(s->names, cfg->n_routes) : NULL;
        if (!s->metrics) {
                server_free(s);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        s->cfg.guard.idle_timeout_s = cfg->idle_timeout_s;
        s->cfg.guard.max_body = cfg->max_body;
        rc = tsr_conn_guard_new(&s->cfg.guard, &s->webhooks.guard, diag);
        if (!rc && s->has_probes)
                rc = probe_guard(cfg, &s->probes.guard, diag);
        if (!rc)
                rc = tsr_tls_store_new(cfg->cert_file, cfg->key_file, &s->tls, diag);
        if (rc) {
                server_free(s);
                return rc;
        }
        if (tsr_tls_store_install(s->tls)) {
                server_free(s);
                return tsr_diag_set(diag, TSR_EINUSE,
                                    "another TLS webhook server runs in this process (the "
                                    "certificate callback is process-wide)");
        }
        if (gnutls_certificate_allocate_credentials(&s->cred) < 0) {
                s->cred = NULL;
                server_free(s);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        gnutls_certificate_set_retrieve_function2(s->cred, tsr_tls_store_retrieve);
        raise_open_files(cfg->guard.max_connections);
        rc = start_loop(s, diag);
        if (rc) {
                server_free(s);
                return rc;
        }
        *out = s;
        return 0;
}

unsigned tsr_webhook_server_port(const struct tsr_webhook_server *s)
{
        return s->webhooks.port;
}

unsigned tsr_webhook_server_probe_port(const struct tsr_webhook_server *s)
{
        return s->has_probes ? s->probes.port : 0;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

        nanosleep(&ts, NULL);
}

void tsr_webhook_server_stop(struct tsr_webhook_server *s, unsigned delay_ms, unsigned grace_ms)
{
        int64_t deadline;

        if (!s)
                return;
        atomic_store(&s->stopping, true); /* not ready; every answer now closes its connection */
        sleep_ms(delay_ms);
        /*
         * Kept-alive connections stay open: each closes after its next answer, or at the
         * deadline. Reviews in flight are answered first; connections still arriving on the
         * listening socket are taken in and answered too (with Connection: close).
         */
        deadline = tsr_monotonic_ms() + grace_ms;
        while ((atomic_load(&s->in_flight) || tsr_http_loop_open_connections(s->loop, WEBHOOKS)) &&
               tsr_monotonic_ms() < deadline)
                sleep_ms(10);
        if (atomic_load(&s->in_flight) > 0)
                tsr_log(TSR_LOG_WARN, "shutdown grace ended with reviews in flight", NULL);
        server_free(s);
}

unsigned tsr_webhook_default_threads(void)
{
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        return n < 1 ? 1 : n > 16 ? 16 : (unsigned)n;
}
