/*
 * server.c - libmicrohttpd glue: per-request state accumulates the body, the completion callback
 * frees it, an atomic count of reviews in flight lets shutdown drain.
 *
 * Invariants: every request but a 413 refused from its headers has a struct request from its
 * first call to the completion callback; one that is a review (a POST of JSON to a route) is
 * counted in in_flight for that whole time. Responses are built from malloc'd bodies that
 * libmicrohttpd frees. A review is answered under the worker thread's JSON arena
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
#include "webhook/metrics.h"
#include "webhook/tls_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
/* Bytes of one connection's libmicrohttpd pool (see where the daemon starts). */
#define CONNECTION_POOL_BYTES ((size_t)16 << 10)

/* TLS 1.2 and 1.3 only: the API server's Go client never offers less. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

struct listener {
        struct tsr_webhook_server *server;
        struct MHD_Daemon *daemon;
        bool tls;
        unsigned port;
};

struct tsr_webhook_server {
        struct tsr_webhook_server_config cfg;
        struct tsr_tls_store *tls;
        struct tsr_metrics *metrics;
        struct tsr_conn_guard *guard; /* the webhook port's connections and body memory */
        struct tsr_log_limit mhd_log; /* libmicrohttpd's messages: a client can cause them */
        const char **names;
        struct listener webhooks, probes;
        atomic_int in_flight;
        atomic_bool stopping;
};

/*
 * One request, from its headers to the completion callback. Every response is queued on a call
 * after the first: libmicrohttpd closes a connection whose response was queued in the first call,
 * which only a refusal before a large body should do (413).
 */
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
static enum MHD_Result reply(struct tsr_webhook_server *s, struct MHD_Connection *c,
                             unsigned status, char *body, const char *content_type,
                             const char *allow)
{
        struct MHD_Response *resp;
        enum MHD_Result ok;

        if (!body) {
                status = MHD_HTTP_INTERNAL_SERVER_ERROR;
                resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        } else {
                resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
        }
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        if (allow)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
        if (atomic_load(&s->stopping))
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        ok = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ok;
}

static enum MHD_Result reply_status(struct tsr_webhook_server *s, struct MHD_Connection *c,
                                    unsigned status, const char *message, const char *allow)
{
        return reply(s, c, status, tsr_webhook_status_body((int)status, message),
                     "application/json", allow);
}

static enum MHD_Result reply_text(struct tsr_webhook_server *s, struct MHD_Connection *c,
                                  unsigned status, const char *text)
{
        return reply(s, c, status, strdup(text), "text/plain; charset=utf-8", NULL);
}

static size_t route_index(const struct tsr_webhook_server *s, const struct tsr_webhook_route *r)
{
        return (size_t)(r - s->cfg.routes);
}

static const struct tsr_webhook_route *find_route(const struct tsr_webhook_server *s,
                                                  const char *url)
{
        for (size_t i = 0; i < s->cfg.n_routes; i++)
                if (!strcmp(s->cfg.routes[i].path, url))
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

static enum MHD_Result serve_readyz(struct tsr_webhook_server *s, struct MHD_Connection *c)
{
        char why[TSR_WEBHOOK_WHY_MAX] = "";

        if (atomic_load(&s->stopping))
                return reply_text(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down\n");
        if (tsr_conn_guard_exhausted(s->guard, why, sizeof(why) - 1)) {
                strcat(why, "\n");
                return reply_text(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, why);
        }
        if (s->cfg.ready && !s->cfg.ready(s->cfg.ctx, why, sizeof(why))) {
                char line[TSR_WEBHOOK_WHY_MAX + 1];

                snprintf(line, sizeof(line), "%s\n", why[0] ? why : "not ready");
                return reply_text(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, line);
        }
        return reply_text(s, c, MHD_HTTP_OK, "ok\n");
}

static enum MHD_Result serve_metrics(struct tsr_webhook_server *s, struct MHD_Connection *c)
{
        struct tsr_buf out = TSR_BUF_INIT;
        char *text;

        if (tsr_metrics_render(s->metrics, &out) || tsr_conn_guard_render(s->guard, &out) ||
            (s->cfg.metrics && s->cfg.metrics(s->cfg.ctx, &out)) ||
            tsr_build_info_render("webhook", &out)) {
                tsr_buf_release(&out);
                return reply(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "text/plain", NULL);
        }
        text = tsr_buf_detach(&out);
        return reply(s, c, MHD_HTTP_OK, text, "text/plain; version=0.0.4; charset=utf-8", NULL);
}

static enum MHD_Result serve_get(struct tsr_webhook_server *s, struct MHD_Connection *c,
                                 const char *url, const char *method)
{
        if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
                return reply_status(s, c, MHD_HTTP_METHOD_NOT_ALLOWED, "use GET", "GET, HEAD");
        if (!strcmp(url, "/healthz"))
                return reply_text(s, c, MHD_HTTP_OK, "ok\n");
        if (!strcmp(url, "/readyz"))
                return serve_readyz(s, c);
        return serve_metrics(s, c);
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
static enum MHD_Result refuse(struct tsr_webhook_server *s, struct MHD_Connection *c,
                              const struct tsr_webhook_route *route, unsigned status,
                              double seconds, const char *msg)
{
        char code[8];

        snprintf(code, sizeof(code), "%u", status);
        tsr_metrics_observe(s->metrics, route_index(s, route), (int)status, seconds, false, NULL,
                            false);
        tsr_log(status >= 500 ? TSR_LOG_WARN : TSR_LOG_INFO, "review refused", "webhook",
                route->name, "http", code, "error", msg, NULL);
        return reply_status(s, c, status, msg,
                            status == MHD_HTTP_METHOD_NOT_ALLOWED ? "POST" : NULL);
}

static enum MHD_Result refuse_too_big(struct tsr_webhook_server *s, struct MHD_Connection *c,
                                      const struct tsr_webhook_route *route, double seconds)
{
        char msg[96];

        snprintf(msg, sizeof(msg), "the review exceeds %zu bytes", s->cfg.max_body);
        return refuse(s, c, route, MHD_HTTP_CONTENT_TOO_LARGE, seconds, msg);
}

/* The body is complete: answer the review. */
static enum MHD_Result serve_review(struct tsr_webhook_server *s, struct MHD_Connection *c,
                                    struct request *r)
{
        struct tsr_webhook_lookup lookup;
        struct tsr_webhook_outcome o;
        char *body = NULL, why[TSR_WEBHOOK_WHY_MAX] = "";
        enum MHD_Result ok;
        int rc;

        if (r->too_big)
                return refuse_too_big(s, c, r->route, seconds_since(&r->start));
        if (s->cfg.ready && !s->cfg.ready(s->cfg.ctx, why, sizeof(why))) {
                char msg[sizeof("not ready: ") + TSR_WEBHOOK_WHY_MAX];

                /* Answering from a cache that has not listed everything would deny wrongly. */
                snprintf(msg, sizeof(msg), "not ready: %s", why);
                return refuse(s, c, r->route, MHD_HTTP_SERVICE_UNAVAILABLE,
                              seconds_since(&r->start), msg);
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
        ok = reply(s, c, (unsigned)o.http_status, body, "application/json", NULL);
        tsr_metrics_observe(s->metrics, route_index(s, r->route), o.http_status,
                            seconds_since(&r->start), o.http_status == 200 && !o.allowed, o.rule,
                            o.patched);
        log_review(r->route, &o, seconds_since(&r->start));
        tsr_json_arena_end();
        return ok;
}

/* The guard's slot of a webhook-port connection (NULL when it has none). */
static struct tsr_conn_slot *slot_of(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

/* The first call: what the headers decide. Returns MHD_YES with *con_cls set, or a 413 queued. */
static enum MHD_Result begin(struct listener *l, struct MHD_Connection *c, const char *url,
                             const char *method, void **con_cls)
{
        struct tsr_webhook_server *s = l->server;
        const struct tsr_webhook_route *route = l->tls ? find_route(s, url) : NULL;
        unsigned long long declared;
        const char *length;
        struct request *r;

        length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        declared = length ? strtoull(length, NULL, 10) : 0;
        /* Not worth reading to keep the connection: refused now, and the connection closes. */
        if (route && declared / DRAIN_FACTOR > s->cfg.max_body)
                return refuse_too_big(s, c, route, 0);
        r = calloc(1, sizeof(*r));
        if (!r)
                return MHD_NO;
        if (l->tls)
                tsr_conn_guard_request_begin(s->guard, slot_of(c));
        r->route = route;
        tsr_buf_init(&r->body);
        r->body.max = s->cfg.max_body + 1;
        r->too_big = declared > s->cfg.max_body; /* read and discarded, then answered 413 */
        clock_gettime(CLOCK_MONOTONIC, &r->start);
        if (route && strcmp(method, MHD_HTTP_METHOD_POST))
                r->refuse = MHD_HTTP_METHOD_NOT_ALLOWED;
        else if (route && !is_json(MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                               MHD_HTTP_HEADER_CONTENT_TYPE)))
                r->refuse = MHD_HTTP_UNSUPPORTED_MEDIA_TYPE;
        else if (route) {
                r->counted = true;
                atomic_fetch_add(&s->in_flight, 1);
        }
        *con_cls = r;
        return MHD_YES;
}

/* The request is complete (its body, if any, read): answer it. */
static enum MHD_Result finish(struct listener *l, struct MHD_Connection *c, const char *url,
                              const char *method, struct request *r)
{
        struct tsr_webhook_server *s = l->server;
        double seconds = seconds_since(&r->start);

        if (r->refuse == MHD_HTTP_METHOD_NOT_ALLOWED)
                return refuse(s, c, r->route, r->refuse, seconds, "admission reviews are POSTed");
        if (r->refuse == MHD_HTTP_UNSUPPORTED_MEDIA_TYPE)
                return refuse(s, c, r->route, r->refuse, seconds,
                              "the review must be sent as application/json");
        if (r->route)
                return serve_review(s, c, r);
        if (!strcmp(url, "/healthz") || !strcmp(url, "/readyz") || !strcmp(url, "/metrics"))
                return serve_get(s, c, url, method);
        return reply_status(s, c, MHD_HTTP_NOT_FOUND, "no webhook is served at this path", NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct listener *l = cls;
        struct request *r = *con_cls;

        (void)version;
        if (!r)
                return begin(l, c, url, method, con_cls);
        if (*upload_data_size) {
                /*
                 * Past the memory budget the connection is closed at once: libmicrohttpd cannot
                 * answer before the body ends, and holding it would hold the memory.
                 */
                if (r->counted && !r->too_big) {
                        if (!tsr_conn_guard_body_reserve(l->server->guard, *upload_data_size))
                                return MHD_NO;
                        r->reserved += *upload_data_size;
                }
                if (r->counted && !r->too_big &&
                    tsr_buf_add(&r->body, upload_data, *upload_data_size))
                        r->too_big = true;
                /*
                 * A body nobody reads (a refusal, a probe, an unknown path) is dropped, up to a
                 * point: past it the connection is cut rather than drained forever.
                 */
                if (!r->counted || r->too_big) {
                        r->discarded += *upload_data_size;
                        if (r->discarded / DRAIN_FACTOR > l->server->cfg.max_body)
                                return MHD_NO;
                }
                *upload_data_size = 0;
                return MHD_YES;
        }
        return finish(l, c, url, method, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct listener *l = cls;
        struct request *r = *con_cls;

        (void)toe;
        if (l->tls)
                tsr_conn_guard_request_end(l->server->guard, slot_of(c));
        if (!r)
                return;
        if (r->counted)
                atomic_fetch_sub(&l->server->in_flight, 1);
        tsr_conn_guard_body_release(l->server->guard, r->reserved);
        tsr_buf_release(&r->body);
        free(r);
        *con_cls = NULL;
}

/*
 * Every accepted connection sends without Nagle's delay: a response leaves in two TLS records
 * (headers, body), and the second would otherwise wait for the peer's delayed ACK of the first,
 * some 40 ms per review on a keep-alive connection. A webhook-port connection takes a slot of
 * the guard for its life (libmicrohttpd notifies the close before it closes the descriptor); one
 * that finds none is cut at once.
 */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
        struct listener *l = cls;
        const union MHD_ConnectionInfo *info, *client;
        int one = 1;

        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (l->tls)
                        tsr_conn_guard_closed(l->server->guard, *socket_context);
                *socket_context = NULL;
                return;
        }
        info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info)
                return;
        setsockopt(info->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (!l->tls)
                return;
        client = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        *socket_context = tsr_conn_guard_opened(l->server->guard, info->connect_fd,
                                                client ? client->client_addr : NULL);
        if (!*socket_context)
                shutdown(info->connect_fd, SHUT_RDWR);
}

/* The webhook port's accept policy: the guard's budget and per-client share. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
        struct listener *l = cls;

        return tsr_conn_guard_admit(l->server->guard, addr, len) ? MHD_YES : MHD_NO;
}

/*
 * libmicrohttpd's own messages, at most one every 10 s: a client decides how many there are
 * (every connection closed before its TLS handshake is one).
 */
static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
        struct tsr_webhook_server *s = cls;
        unsigned long held;
        char msg[512], held_text[24];
        size_t n;

        if (!tsr_log_limit_pass(&s->mhd_log, &held))
                return;
        snprintf(held_text, sizeof(held_text), "%lu", held);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        n = strlen(msg);
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
                msg[--n] = '\0';
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
 * Starts one daemon. The TLS options travel as varargs: the certificate callback is a function
 * pointer, which an option array could carry only as a data pointer.
 */
static struct MHD_Daemon *start_daemon(struct listener *l, unsigned flags, unsigned port,
                                       const struct MHD_OptionItem *opts)
{
        if (l->tls)
                return MHD_start_daemon(
                    flags | MHD_USE_TLS, (uint16_t)port, on_accept, l, on_request, l,
                    MHD_OPTION_ARRAY, opts, MHD_OPTION_HTTPS_CERT_CALLBACK, &tsr_tls_store_retrieve,
                    MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES, MHD_OPTION_END);
        return MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, l, MHD_OPTION_ARRAY,
                                opts, MHD_OPTION_END);
}

static int listen_on(struct tsr_webhook_server *s, struct listener *l, unsigned port,
                     struct tsr_diag *diag)
{
        const struct tsr_webhook_server_config *cfg = &s->cfg;
        /*
         * poll(), not epoll: with a thread pool, quiescing an epoll daemon removes the listening
         * socket from every worker's epoll set from the caller's thread and aborts if a worker
         * got there first (libmicrohttpd 0.9.75); with poll() it goes through the ITC channel.
         */
        unsigned flags =
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
        unsigned threads = l->tls ? cfg->threads : 1;
        struct sockaddr_storage ss;
        struct sockaddr *addr = NULL;
        struct MHD_OptionItem opts[12];
        size_t n = 0;
        const union MHD_DaemonInfo *info;

        if (cfg->bind) {
                int family = bind_address(cfg->bind, port, &ss);

                if (family < 0)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "--bind %s is not an IPv4 or IPv6 address", cfg->bind);
                if (family == AF_INET6)
                        flags |= MHD_USE_IPv6;
                addr = (struct sockaddr *)&ss;
        } else {
                flags |= MHD_USE_DUAL_STACK;
        }
        /* The logger first: libmicrohttpd reports options parsed before it on its own stderr. */
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_error, s};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, l};
        opts[n++] =
            (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, l};
        opts[n++] = (struct MHD_OptionItem){
            MHD_OPTION_CONNECTION_TIMEOUT,
            (intptr_t)(l->tls ? cfg->idle_timeout_s : PROBE_IDLE_TIMEOUT_S), NULL};
        /* A hard ceiling past the guard's budget (its slots' slack); probes get a few. */
        opts[n++] = (struct MHD_OptionItem){
            MHD_OPTION_CONNECTION_LIMIT,
            (intptr_t)(l->tls ? cfg->guard.max_connections + TSR_CONN_SLACK : PROBE_CONNECTIONS),
            NULL};
        /*
         * Each connection's pool holds one request's headers and read buffer and is zeroed
         * after every request: 16 KiB instead of libmicrohttpd's 32 KiB halves that clearing
         * (a request's headers from the API server take well under 1 KiB; the body streams
         * through the buffer into the request's own).
         */
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                            (intptr_t)CONNECTION_POOL_BYTES, NULL};
        if (threads > 1)
                opts[n++] =
                    (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL};
        if (addr)
                opts[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, addr};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

        l->daemon = start_daemon(l, flags, port, opts);
        if (!l->daemon && !cfg->bind) {
                /* No IPv6 on this host: every IPv4 address instead. */
                flags &= ~(unsigned)MHD_USE_DUAL_STACK;
                l->daemon = start_daemon(l, flags, port, opts);
        }
        if (!l->daemon)
                return tsr_diag_set(diag, TSR_EIO, "cannot listen on port %u (in use?)", port);
        info = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_BIND_PORT);
        l->port = info ? info->port : port;
        return 0;
}

/*
 * Every connection of the budget needs a descriptor: the soft limit is raised toward the hard
 * one when it is lower (a container's default is often 1024). Below it, accept fails and
 * libmicrohttpd logs it.
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
        if (s->webhooks.daemon)
                MHD_stop_daemon(s->webhooks.daemon);
        if (s->probes.daemon)
                MHD_stop_daemon(s->probes.daemon);
        tsr_conn_guard_free(s->guard); /* after the daemons: every connection is closed */
        tsr_tls_store_free(s->tls);    /* uninstalls it */
        tsr_metrics_free(s->metrics);
        free(s->names);
        free(s);
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
        s->mhd_log = (struct tsr_log_limit)TSR_LOG_LIMIT_INIT(10000);
        s->webhooks = (struct listener){s, NULL, true, 0};
        s->probes = (struct listener){s, NULL, false, 0};
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
        rc = tsr_conn_guard_new(&s->cfg.guard, &s->guard, diag);
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
        raise_open_files(cfg->guard.max_connections);
        rc = listen_on(s, &s->webhooks, cfg->port, diag);
        if (!rc && cfg->probe_port >= 0)
                rc = listen_on(s, &s->probes, (unsigned)cfg->probe_port, diag);
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
        return s->probes.daemon ? s->probes.port : 0;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

        nanosleep(&ts, NULL);
}

static unsigned open_connections(const struct listener *l)
{
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

        return info ? info->num_connections : 0;
}

/*
 * Hands the connections waiting in the quiesced listening socket's queue to the daemon: closing
 * the socket with them queued would reset them, and a client (the API server dialling before
 * its endpoints dropped this replica) would see a reset instead of an answer. Each is answered
 * with Connection: close, as every answer during the drain.
 */
static unsigned adopt_queued(struct tsr_webhook_server *s, MHD_socket fd)
{
        unsigned n = 0;

        for (;; n++) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                int c = accept(fd, (struct sockaddr *)&ss, &len);

                if (c < 0)
                        return n;
                /* libmicrohttpd closes the socket itself when it cannot take it. */
                MHD_add_connection(s->webhooks.daemon, c, (struct sockaddr *)&ss, len);
        }
}

void tsr_webhook_server_stop(struct tsr_webhook_server *s, unsigned delay_ms, unsigned grace_ms)
{
        MHD_socket fd;
        int64_t deadline;

        if (!s)
                return;
        atomic_store(&s->stopping, true); /* not ready; every answer now closes its connection */
        sleep_ms(delay_ms);
        fd = MHD_quiesce_daemon(s->webhooks.daemon);
        if (fd != MHD_INVALID_SOCKET)
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        /*
         * Kept-alive connections stay open after the quiesce: each closes after its next answer,
         * or at the deadline. Reviews in flight are answered first; connections still queued on
         * the listening socket are taken in and answered too.
         */
        deadline = tsr_monotonic_ms() + grace_ms;
        do {
                /* An adopted connection reaches the count on its worker's next turn. */
                unsigned adopted = fd != MHD_INVALID_SOCKET ? adopt_queued(s, fd) : 0;

                if (!adopted && !atomic_load(&s->in_flight) && !open_connections(&s->webhooks))
                        break;
                sleep_ms(10);
        } while (tsr_monotonic_ms() < deadline);
        if (atomic_load(&s->in_flight) > 0)
                tsr_log(TSR_LOG_WARN, "shutdown grace ended with reviews in flight", NULL);
        server_free(s);
        if (fd != MHD_INVALID_SOCKET)
                close(fd);
}

unsigned tsr_webhook_default_threads(void)
{
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        return n < 1 ? 1 : n > 16 ? 16 : (unsigned)n;
}
