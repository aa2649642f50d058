/*
 * client.c - requests on libcurl. Each request sets up its thread's easy handle for this client
 * (a session, below: the connection is kept between requests) from the client's settings (URL,
 * TLS files, headers with a freshly read token), drives it through the session's multi handle so
 * that a cancel token can wake curl_multi_poll, and turns the outcome into a TSR_E* code, a
 * struct tsr_kube_result and, on failure, a diag that quotes the API server's Status.
 */
#define _GNU_SOURCE /* memfd_create */

#include "kube/client.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/fnv.h"
#include "base/err.h"
#include "base/timespec.h"
#include "kube/config.h"
#include "kube/kube_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DEFAULT_CONNECT_TIMEOUT_MS 10000L
#define DEFAULT_REQUEST_TIMEOUT_MS 60000L
#define DEFAULT_MAX_BODY           ((size_t)256 << 20)
#define TOKEN_FILE_MAX             ((size_t)64 << 10)
#define WATCH_TIMEOUT_MARGIN_S     30L
#define LIST_PAGES_MAX             10000 /* 5,000,000 objects at the cache's 500 a page */
#define CONTINUE_SEEN              8     /* a loop of up to this many pages is caught at once */

/* A PEM held in an anonymous memory file, reachable by path for libcurl. */
struct memfile {
        int fd;
        char path[48];
};

struct tsr_kube_client {
        uint64_t id; /* distinct for every client made: what a thread's session belongs to */
        struct tsr_kube_config cfg;
        long connect_timeout_ms;
        long request_timeout_ms;
        size_t max_body;
        char *user_agent;
        char *base_url;   /* scheme://host:port requests go to (tls-server-name swaps the host) */
        char *connect_to; /* "name:port:host:port" when tls-server-name is set, else NULL */
        struct memfile ca, cert, key;
        pthread_mutex_t token_mu;
        char *token; /* the last good bearer token, or NULL */
};

/* ---- sessions: one easy handle and its multi per thread and client ------------------------ */

/*
 * A thread's requests through one client reuse one easy handle and one multi handle, whose
 * connection cache keeps the connection (and its TLS session) alive between requests: a request
 * after the first costs no TCP or TLS handshake and no certificate load. libcurl does not support
 * sharing connections between threads, so each thread holds sessions of its own, one per client
 * for the last SESSIONS_MAX clients it used (the least recently used one makes room). A session
 * holds a reference of libcurl's global state, so it may outlive every client; it ends with its
 * thread (the key's destructor), when its client is freed on that thread, or when it makes room.
 */
#define SESSIONS_MAX 4

struct session {
        uint64_t client; /* 0: a free slot */
        uint64_t used;   /* the thread's request count at its last use */
        CURLM *m;
        CURL *h;
};

struct sessions {
        struct session s[SESSIONS_MAX];
        uint64_t requests;
};

static pthread_key_t session_key;
static pthread_once_t session_once = PTHREAD_ONCE_INIT;
static bool session_key_ok;
static atomic_uint_fast64_t next_client_id = 1;

static void session_end(struct session *s)
{
        if (!s->client)
                return;
        curl_easy_cleanup(s->h);
        curl_multi_cleanup(s->m);
        memset(s, 0, sizeof(*s));
        curl_global_cleanup();
}

static void sessions_end(void *arg)
{
        struct sessions *all = arg;

        for (size_t i = 0; i < SESSIONS_MAX; i++)
                session_end(&all->s[i]);
        free(all);
}

static void session_key_make(void)
{
        session_key_ok = pthread_key_create(&session_key, sessions_end) == 0;
}

/* This thread's sessions, made the first time; NULL when out of memory. */
static struct sessions *thread_sessions(void)
{
        struct sessions *all;

        pthread_once(&session_once, session_key_make);
        if (!session_key_ok)
                return NULL;
        all = pthread_getspecific(session_key);
        if (!all && (all = calloc(1, sizeof(*all))) && pthread_setspecific(session_key, all)) {
                free(all);
                all = NULL;
        }
        return all;
}

/* Ends this thread's session of client id, if it has one. */
static void session_forget(uint64_t id)
{
        struct sessions *all = thread_sessions();

        for (size_t i = 0; all && i < SESSIONS_MAX; i++)
                if (all->s[i].client == id)
                        session_end(&all->s[i]);
}

/* This thread's session for client id, made as needed; NULL when out of memory. */
static struct session *session_of(uint64_t id)
{
        struct sessions *all = thread_sessions();
        struct session *s = NULL;

        if (!all)
                return NULL;
        all->requests++;
        for (size_t i = 0; i < SESSIONS_MAX; i++) {
                if (all->s[i].client == id) {
                        all->s[i].used = all->requests;
                        return &all->s[i];
                }
                if (!s || all->s[i].used < s->used)
                        s = &all->s[i]; /* a free slot (used 0) or the least recently used */
        }
        session_end(s);
        if (curl_global_init(CURL_GLOBAL_DEFAULT))
                return NULL;
        s->m = curl_multi_init();
        s->h = curl_easy_init();
        if (!s->m || !s->h) {
                curl_easy_cleanup(s->h);
                curl_multi_cleanup(s->m);
                memset(s, 0, sizeof(*s));
                curl_global_cleanup();
                return NULL;
        }
        s->client = id;
        s->used = all->requests;
        return s;
}

/* ---- cancel tokens ------------------------------------------------------------------------ */

int tsr_kube_cancel_init(struct tsr_kube_cancel *k)
{
        if (pthread_mutex_init(&k->mu, NULL))
                return TSR_ENOMEM;
        atomic_init(&k->fired, false);
        k->multi = NULL;
        return 0;
}

void tsr_kube_cancel_release(struct tsr_kube_cancel *k)
{
        pthread_mutex_destroy(&k->mu);
}

void tsr_kube_cancel_fire(struct tsr_kube_cancel *k)
{
        pthread_mutex_lock(&k->mu);
        atomic_store(&k->fired, true);
        if (k->multi)
                curl_multi_wakeup(k->multi);
        pthread_mutex_unlock(&k->mu);
}

bool tsr_kube_cancel_fired(struct tsr_kube_cancel *k)
{
        return atomic_load(&k->fired);
}

/* ---- the client --------------------------------------------------------------------------- */

static int memfile_make(struct memfile *m, const char *name, const char *data, size_t len)
{
        size_t off = 0;

        m->fd = memfd_create(name, MFD_CLOEXEC);
        if (m->fd < 0)
                return TSR_EIO;
        while (off < len) {
                ssize_t w = write(m->fd, data + off, len - off);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return TSR_EIO;
                off += (size_t)w;
        }
        snprintf(m->path, sizeof(m->path), "/proc/self/fd/%d", m->fd);
        return 0;
}

static void memfile_close(struct memfile *m)
{
        if (m->fd >= 0)
                close(m->fd);
        m->fd = -1;
        m->path[0] = '\0';
}

/* base_url and connect_to from the server URL and tls-server-name. */
static int urls_make(struct tsr_kube_client *c, struct tsr_diag *diag)
{
        CURLU *u;
        char *host = NULL, *port = NULL, *scheme = NULL;
        size_t n;
        int rc = 0;

        if (!c->cfg.tls_server_name) {
                c->base_url = strdup(c->cfg.server);
                return c->base_url ? 0 : TSR_ENOMEM;
        }
        u = curl_url();
        if (!u)
                return TSR_ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, c->cfg.server, 0) ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) ||
            curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) ||
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0)) {
                rc = tsr_diag_set(diag, TSR_EINVAL, "server \"%.200s\" is not a valid URL",
                                  c->cfg.server);
                goto out;
        }
        n = strlen(scheme) + strlen(c->cfg.tls_server_name) + strlen(port) + 8;
        c->base_url = malloc(n);
        if (c->base_url)
                snprintf(c->base_url, n, "%s://%s:%s", scheme, c->cfg.tls_server_name, port);
        n = strlen(c->cfg.tls_server_name) + strlen(host) + 2 * strlen(port) + 8;
        c->connect_to = malloc(n);
        if (c->connect_to)
                snprintf(c->connect_to, n, "%s:%s:%s:%s", c->cfg.tls_server_name, port, host, port);
        if (!c->base_url || !c->connect_to)
                rc = TSR_ENOMEM;
out:
        curl_free(host);
        curl_free(port);
        curl_free(scheme);
        curl_url_cleanup(u);
        return rc;
}

void tsr_kube_client_free(struct tsr_kube_client *c)
{
        if (!c)
                return;
        session_forget(c->id);
        memfile_close(&c->ca);
        memfile_close(&c->cert);
        memfile_close(&c->key);
        if (c->token) {
                memset(c->token, 0, strlen(c->token));
                free(c->token);
        }
        pthread_mutex_destroy(&c->token_mu);
        free(c->user_agent);
        free(c->base_url);
        free(c->connect_to);
        tsr_kube_config_release(&c->cfg);
        free(c);
        curl_global_cleanup();
}

int tsr_kube_client_new(const struct tsr_kube_config *cfg, const struct tsr_kube_client_opts *opts,
                        struct tsr_kube_client **out, struct tsr_diag *diag)
{
        struct tsr_kube_client *c;
        int rc;

        if (!cfg->server || !*cfg->server)
                return tsr_diag_set(diag, TSR_EINVAL, "kube client: the config has no server");
        if (curl_global_init(CURL_GLOBAL_DEFAULT))
                return tsr_diag_set(diag, TSR_EIO, "kube client: libcurl failed to initialise");
        c = calloc(1, sizeof(*c));
        if (!c) {
                curl_global_cleanup();
                return tsr_diag_set(diag, TSR_ENOMEM, "kube client: out of memory");
        }
        c->ca.fd = c->cert.fd = c->key.fd = -1;
        c->id = atomic_fetch_add(&next_client_id, 1);
        if (pthread_mutex_init(&c->token_mu, NULL)) {
                free(c);
                curl_global_cleanup();
                return tsr_diag_set(diag, TSR_ENOMEM, "kube client: out of memory");
        }
        c->connect_timeout_ms = opts && opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms
                                                                     : DEFAULT_CONNECT_TIMEOUT_MS;
        c->request_timeout_ms = opts && opts->request_timeout_ms > 0 ? opts->request_timeout_ms
                                                                     : DEFAULT_REQUEST_TIMEOUT_MS;
        c->max_body = opts && opts->max_body ? opts->max_body : DEFAULT_MAX_BODY;
        c->user_agent = strdup(opts && opts->user_agent ? opts->user_agent : "tessera/0.1.0");
        rc = c->user_agent ? tsr_kube_config_copy(&c->cfg, cfg) : TSR_ENOMEM;
        if (rc) {
                tsr_diag_set(diag, rc, "kube client: out of memory");
                goto fail;
        }
        rc = urls_make(c, diag);
        if (rc) {
                if (rc == TSR_ENOMEM)
                        tsr_diag_set(diag, rc, "kube client: out of memory");
                goto fail;
        }
        if ((c->cfg.ca_pem &&
             memfile_make(&c->ca, "tsr-kube-ca", c->cfg.ca_pem, c->cfg.ca_pem_len)) ||
            (c->cfg.cert_pem &&
             memfile_make(&c->cert, "tsr-kube-cert", c->cfg.cert_pem, c->cfg.cert_pem_len)) ||
            (c->cfg.key_pem &&
             memfile_make(&c->key, "tsr-kube-key", c->cfg.key_pem, c->cfg.key_pem_len))) {
                rc = tsr_diag_set(diag, TSR_EIO, "kube client: cannot hold a PEM in memory: %s",
                                  strerror(errno));
                goto fail;
        }
        if (c->cfg.token && !(c->token = strdup(c->cfg.token))) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "kube client: out of memory");
                goto fail;
        }
        *out = c;
        return 0;
fail:
        tsr_kube_client_free(c);
        return rc;
}

const char *tsr_kube_client_server(const struct tsr_kube_client *c)
{
        return c->cfg.server;
}

const char *tsr_kube_client_namespace(const struct tsr_kube_client *c)
{
        return c->cfg.ns ? c->cfg.ns : "default";
}

/* ---- one request -------------------------------------------------------------------------- */

/* A copy of the bearer token to send now (re-reading token_file), or NULL for none. */
static char *token_now(struct tsr_kube_client *c)
{
        char *t = NULL, *copy = NULL;
        size_t n;

        pthread_mutex_lock(&c->token_mu);
        if (c->cfg.token_file &&
            !tsr__kube_read_file(c->cfg.token_file, TOKEN_FILE_MAX, &t, &n, NULL)) {
                while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' ' ||
                             t[n - 1] == '\t'))
                        t[--n] = '\0';
                if (n && !strpbrk(t, "\r\n")) {
                        if (c->token) {
                                memset(c->token, 0, strlen(c->token));
                                free(c->token);
                        }
                        c->token = t;
                        t = NULL;
                }
                if (t) {
                        memset(t, 0, n);
                        free(t);
                }
        }
        if (c->token)
                copy = strdup(c->token);
        pthread_mutex_unlock(&c->token_mu);
        return copy;
}

struct transfer {
        CURL *h;
        struct tsr_buf body; /* the body (non-watch, or a watch's non-2xx reply) */
        bool overflow;       /* body passed its ceiling */
        /* watch only */
        struct tsr_kube_watch_stream *stream;
        tsr_kube_event_fn fn;
        void *ctx;
        int stream_rc; /* the first non-zero return of the stream feed */
        struct tsr_diag stream_diag;
};

static size_t on_write(char *data, size_t size, size_t nmemb, void *arg)
{
        struct transfer *t = arg;
        size_t n = size * nmemb;
        long code = 0;

        if (t->stream) {
                curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &code);
                if (code >= 200 && code < 300) {
                        t->stream_rc = tsr_kube_watch_stream_feed(t->stream, data, n, t->fn, t->ctx,
                                                                  &t->stream_diag);
                        return t->stream_rc ? 0 : n;
                }
        }
        if (tsr_buf_add(&t->body, data, n)) {
                t->overflow = true;
                return 0;
        }
        return n;
}

/* Bytes h has received so far, headers included. */
static curl_off_t received(CURL *h)
{
        curl_off_t body = 0;
        long headers = 0;

        curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &body);
        curl_easy_getinfo(h, CURLINFO_HEADER_SIZE, &headers);
        return body + headers;
}

/*
 * Runs h to completion, cancel, or stall_ms (> 0) without a byte received (*stalled, the result
 * OPERATION_TIMEDOUT). Returns curl's result for the transfer.
 */
static CURLcode perform(CURLM *m, CURL *h, struct tsr_kube_cancel *cancel, long stall_ms,
                        bool *cancelled, bool *stalled)
{
        CURLcode result = CURLE_FAILED_INIT;
        CURLMsg *msg;
        int running = 1, left;
        int64_t last_byte_ms = tsr_monotonic_ms();
        curl_off_t seen = 0;
        int poll_ms = stall_ms > 0 && stall_ms < 4000 ? (int)(stall_ms / 4) : 1000;

        *cancelled = *stalled = false;
        if (curl_multi_add_handle(m, h))
                return CURLE_OUT_OF_MEMORY;
        if (cancel) {
                pthread_mutex_lock(&cancel->mu);
                cancel->multi = m;
                pthread_mutex_unlock(&cancel->mu);
        }
        while (running) {
                if (cancel && atomic_load(&cancel->fired)) {
                        *cancelled = true;
                        result = CURLE_ABORTED_BY_CALLBACK;
                        break;
                }
                if (curl_multi_perform(m, &running) != CURLM_OK)
                        break;
                if (stall_ms > 0 && running) {
                        curl_off_t now_seen = received(h);
                        int64_t now = tsr_monotonic_ms();

                        if (now_seen != seen) {
                                seen = now_seen;
                                last_byte_ms = now;
                        } else if (now - last_byte_ms >= stall_ms) {
                                *stalled = true;
                                result = CURLE_OPERATION_TIMEDOUT;
                                break;
                        }
                }
                if (running && curl_multi_poll(m, NULL, 0, poll_ms, NULL) != CURLM_OK)
                        break;
        }
        while ((msg = curl_multi_info_read(m, &left)))
                if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
                        result = msg->data.result;
        if (cancel) {
                pthread_mutex_lock(&cancel->mu);
                cancel->multi = NULL;
                pthread_mutex_unlock(&cancel->mu);
        }
        curl_multi_remove_handle(m, h); /* the connection stays in m's cache, unless cut short */
        return result;
}

/* The path up to its query, for messages. */
static int path_len(const char *path)
{
        size_t n = strcspn(path, "?");

        return n > 300 ? 300 : (int)n;
}

/* The code and message of a non-2xx reply. */
static int http_error(const char *method, const char *path, long http, const struct tsr_buf *body,
                      struct tsr_diag *diag)
{
        json_t *st = json_loadb(body->ptr, body->len, 0, NULL);
        const char *reason = json_string_value(json_object_get(st, "reason"));
        const char *message = json_string_value(json_object_get(st, "message"));
        int code;

        switch (http) {
        case 400:
        case 415:
        case 422:
                code = TSR_EINVAL;
                break;
        case 404:
                code = TSR_ENOTFOUND;
                break;
        case 409:
                code = reason && !strcmp(reason, "AlreadyExists") ? TSR_EEXIST : TSR_ESTALE;
                break;
        case 410:
                code = TSR_ESTALE;
                break;
        case 413:
                code = TSR_ETOOBIG;
                break;
        default:
                code = TSR_EIO;
                break;
        }
        if (message)
                tsr_diag_set(diag, code, "%s %.*s: HTTP %ld %s: %.300s", method, path_len(path),
                             path, http, reason ? reason : "", message);
        else
                tsr_diag_set(diag, code, "%s %.*s: HTTP %ld %.200s", method, path_len(path), path,
                             http, body->len < 200 ? body->ptr : "");
        json_decref(st);
        return code;
}

struct request {
        const char *method;
        const char *path;
        const char *content_type;
        const char *body;
        size_t body_len;
        struct tsr_kube_cancel *cancel;
        long timeout_ms; /* 0: none */
        long stall_s;    /* > 0: this long without a byte ends it (res->stalled) */
};

/*
 * Runs one request into t (initialised by the caller). Returns 0 for a 2xx, else the mapped
 * code with diag; res->http set either way.
 */
static int run(struct tsr_kube_client *c, const struct request *rq, struct transfer *t,
               struct tsr_kube_result *res, struct tsr_diag *diag)
{
        struct curl_slist *hdrs = NULL, *connect_to = NULL, *more;
        struct tsr_buf line = TSR_BUF_INIT;
        char errbuf[CURL_ERROR_SIZE] = "";
        struct curl_header *ra;
        char *token = NULL, *url = NULL;
        struct session *session;
        bool cancelled, stalled;
        CURLcode cc;
        long http = 0;
        int rc = 0;

        res->http = 0;
        res->retry_after_s = 0;
        res->stalled = false;
        session = session_of(c->id);
        if (!session)
                return tsr_diag_set(diag, TSR_ENOMEM, "kube client: out of memory");
        t->h = session->h;
        if (rq->cancel && tsr_kube_cancel_fired(rq->cancel)) {
                rc = tsr_diag_set(diag, TSR_EIO, "%s %.*s: cancelled", rq->method,
                                  path_len(rq->path), rq->path);
                goto out;
        }
        url = malloc(strlen(c->base_url) + strlen(rq->path) + 1);
        if (!url) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "kube client: out of memory");
                goto out;
        }
        strcpy(url, c->base_url);
        strcat(url, rq->path);

        token = token_now(c);
        rc = tsr_buf_adds(&line, "Accept: application/json");
        if (!rc && (more = curl_slist_append(hdrs, line.ptr)))
                hdrs = more;
        else
                rc = TSR_ENOMEM;
        if (!rc && token) {
                tsr_buf_reset(&line);
                rc = tsr_buf_addf(&line, "Authorization: Bearer %s", token);
                if (!rc && (more = curl_slist_append(hdrs, line.ptr)))
                        hdrs = more;
                else
                        rc = TSR_ENOMEM;
                memset(line.ptr, 0, line.len);
        }
        if (!rc && rq->content_type) {
                tsr_buf_reset(&line);
                rc = tsr_buf_addf(&line, "Content-Type: %s", rq->content_type);
                if (!rc && (more = curl_slist_append(hdrs, line.ptr)))
                        hdrs = more;
                else
                        rc = TSR_ENOMEM;
        }
        if (!rc && (more = curl_slist_append(hdrs, "Expect:")))
                hdrs = more;
        else
                rc = rc ? rc : TSR_ENOMEM;
        if (!rc && c->connect_to && !(connect_to = curl_slist_append(NULL, c->connect_to)))
                rc = TSR_ENOMEM;
        if (rc) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "kube client: out of memory");
                goto out;
        }

        curl_easy_setopt(t->h, CURLOPT_URL, url);
        curl_easy_setopt(t->h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(t->h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(t->h, CURLOPT_PROTOCOLS_STR, "https,http");
        curl_easy_setopt(t->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(t->h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
        curl_easy_setopt(t->h, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
        curl_easy_setopt(t->h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(t->h, CURLOPT_USERAGENT, c->user_agent);
        curl_easy_setopt(t->h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(t->h, CURLOPT_ACCEPT_ENCODING, "");
        if (connect_to)
                curl_easy_setopt(t->h, CURLOPT_CONNECT_TO, connect_to);
        if (c->cfg.insecure_skip_tls_verify) {
                curl_easy_setopt(t->h, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(t->h, CURLOPT_SSL_VERIFYHOST, 0L);
        } else if (c->ca.fd >= 0 || c->cfg.ca_file) {
                /* Only the configured CA, as client-go: not the system's CA directory too. */
                curl_easy_setopt(t->h, CURLOPT_CAINFO, c->ca.fd >= 0 ? c->ca.path : c->cfg.ca_file);
                curl_easy_setopt(t->h, CURLOPT_CAPATH, NULL);
        }
        if (c->cert.fd >= 0 || c->cfg.cert_file) {
                curl_easy_setopt(t->h, CURLOPT_SSLCERTTYPE, "PEM");
                curl_easy_setopt(t->h, CURLOPT_SSLCERT,
                                 c->cert.fd >= 0 ? c->cert.path : c->cfg.cert_file);
                curl_easy_setopt(t->h, CURLOPT_SSLKEYTYPE, "PEM");
                curl_easy_setopt(t->h, CURLOPT_SSLKEY,
                                 c->key.fd >= 0 ? c->key.path : c->cfg.key_file);
        }
        if (strcmp(rq->method, "GET"))
                curl_easy_setopt(t->h, CURLOPT_CUSTOMREQUEST, rq->method);
        if (rq->body) {
                curl_easy_setopt(t->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
                curl_easy_setopt(t->h, CURLOPT_POSTFIELDS, rq->body);
        }
        curl_easy_setopt(t->h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(t->h, CURLOPT_WRITEDATA, t);

        cc = perform(session->m, t->h, rq->cancel, rq->stall_s * 1000, &cancelled, &stalled);
        curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &http);
        res->http = http;
        if (curl_easy_header(t->h, "Retry-After", 0, CURLH_HEADER, -1, &ra) == CURLHE_OK &&
            ra->value)
                res->retry_after_s = strtol(ra->value, NULL, 10);
        if (res->retry_after_s < 0)
                res->retry_after_s = 0;

        if (t->stream && t->stream_rc) {
                rc = t->stream_rc;
                if (rc < 0 && diag)
                        *diag = t->stream_diag;
        } else if (cancelled) {
                rc = tsr_diag_set(diag, TSR_EIO, "%s %.*s: cancelled", rq->method,
                                  path_len(rq->path), rq->path);
        } else if (t->overflow) {
                rc = tsr_diag_set(diag, TSR_ETOOBIG, "%s %.*s: response body over %zu bytes",
                                  rq->method, path_len(rq->path), rq->path, t->body.max - 1);
        } else if (http >= 300 || (http && http < 200)) {
                rc = http_error(rq->method, rq->path, http, &t->body, diag);
        } else if (stalled) {
                res->stalled = true;
                rc = tsr_diag_set(diag, TSR_EIO,
                                  "%s %.*s: stalled: nothing received for %ld s (no event, no "
                                  "bookmark)",
                                  rq->method, path_len(rq->path), rq->path, rq->stall_s);
        } else if (cc != CURLE_OK) {
                rc = tsr_diag_set(diag, TSR_EIO, "%s %.*s: %s", rq->method, path_len(rq->path),
                                  rq->path, errbuf[0] ? errbuf : curl_easy_strerror(cc));
        }
out:
        if (token) {
                memset(token, 0, strlen(token));
                free(token);
        }
        tsr_buf_release(&line);
        curl_slist_free_all(hdrs);
        curl_slist_free_all(connect_to);
        free(url);
        curl_easy_reset(t->h); /* no option left pointing at this call's buffers */
        t->h = NULL;
        return rc;
}

int tsr_kube_client_request(struct tsr_kube_client *c, const char *method, const char *path,
                            const char *content_type, const char *body, size_t body_len,
                            struct tsr_kube_cancel *cancel, json_t **out,
                            struct tsr_kube_result *res, struct tsr_diag *diag)
{
        struct request rq = {method,   path,   content_type,          body,
                             body_len, cancel, c->request_timeout_ms, 0};
        struct tsr_kube_result local;
        struct transfer t;
        json_error_t jerr;
        json_t *doc = NULL;
        int rc;

        memset(&t, 0, sizeof(t));
        tsr_buf_init(&t.body);
        t.body.max = c->max_body + 1;
        rc = run(c, &rq, &t, res ? res : &local, diag);
        if (!rc && t.body.len) {
                doc = json_loadb(t.body.ptr, t.body.len, 0, &jerr);
                if (!doc)
                        rc = tsr_diag_set(diag, TSR_EPARSE, "%s %.*s: reply is not JSON: %s",
                                          method, path_len(path), path, jerr.text);
        }
        tsr_buf_release(&t.body);
        if (rc)
                return rc;
        if (out)
                *out = doc;
        else
                json_decref(doc);
        return 0;
}

int tsr_kube_client_get(struct tsr_kube_client *c, const char *path, json_t **out,
                        struct tsr_kube_result *res, struct tsr_diag *diag)
{
        return tsr_kube_client_request(c, "GET", path, NULL, NULL, 0, NULL, out, res, diag);
}

/* ---- queries ------------------------------------------------------------------------------ */

static int escape_into(struct tsr_buf *b, const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        int rc = 0;

        for (; *s && !rc; s++) {
                unsigned char ch = (unsigned char)*s;

                if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
                        rc = tsr_buf_addch(b, (char)ch);
                } else {
                        char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};

                        rc = tsr_buf_add(b, e, 3);
                }
        }
        return rc;
}

int tsr_kube_query_add(struct tsr_buf *b, const char *name, const char *value)
{
        int rc = tsr_buf_addch(b, strchr(b->ptr, '?') ? '&' : '?');

        if (!rc)
                rc = escape_into(b, name);
        if (!rc)
                rc = tsr_buf_addch(b, '=');
        if (!rc)
                rc = escape_into(b, value);
        return rc;
}

static int query_opt(struct tsr_buf *b, const char *name, const char *value)
{
        return value && *value ? tsr_kube_query_add(b, name, value) : 0;
}

static int query_long(struct tsr_buf *b, const char *name, long value)
{
        char num[32];

        if (value <= 0)
                return 0;
        snprintf(num, sizeof(num), "%ld", value);
        return tsr_kube_query_add(b, name, num);
}

/* ---- list --------------------------------------------------------------------------------- */

int tsr_kube_client_list(struct tsr_kube_client *c, const char *path,
                         const struct tsr_kube_list_opts *opts, json_t **out,
                         struct tsr_kube_result *res, struct tsr_diag *diag)
{
        static const struct tsr_kube_list_opts none;
        struct tsr_buf p = TSR_BUF_INIT;
        json_t *doc = NULL;
        int rc;

        if (!opts)
                opts = &none;
        rc = tsr_buf_adds(&p, path);
        rc = rc ? rc : query_opt(&p, "labelSelector", opts->label_selector);
        rc = rc ? rc : query_opt(&p, "fieldSelector", opts->field_selector);
        rc = rc ? rc : query_opt(&p, "resourceVersion", opts->resource_version);
        rc = rc ? rc : query_long(&p, "limit", opts->limit);
        rc = rc ? rc : query_opt(&p, "continue", opts->continue_token);
        if (rc) {
                tsr_buf_release(&p);
                return tsr_diag_set(diag, rc, "list %.200s: path too long", path);
        }
        rc = tsr_kube_client_request(c, "GET", p.ptr, NULL, NULL, 0, opts->cancel, &doc, res, diag);
        tsr_buf_release(&p);
        if (rc)
                return rc;
        if (!json_is_object(doc) || !json_is_array(json_object_get(doc, "items"))) {
                json_decref(doc);
                return tsr_diag_set(diag, TSR_EPARSE, "list %.200s: reply is not a list", path);
        }
        *out = doc;
        return 0;
}

/* Gives items lacking kind or apiVersion the list's. */
static int fill_kinds(json_t *items, json_t *list)
{
        const char *list_kind = json_string_value(json_object_get(list, "kind"));
        json_t *api_version = json_object_get(list, "apiVersion"), *kind = NULL, *item;
        size_t i, n;

        if (list_kind && (n = strlen(list_kind)) > 4 && !strcmp(list_kind + n - 4, "List")) {
                kind = json_stringn(list_kind, n - 4);
                if (!kind)
                        return TSR_ENOMEM;
        }
        json_array_foreach(items, i, item)
        {
                if (kind && !json_object_get(item, "kind") && json_object_set(item, "kind", kind)) {
                        json_decref(kind);
                        return TSR_ENOMEM;
                }
                if (json_is_string(api_version) && !json_object_get(item, "apiVersion") &&
                    json_object_set(item, "apiVersion", api_version)) {
                        json_decref(kind);
                        return TSR_ENOMEM;
                }
        }
        json_decref(kind);
        return 0;
}

int tsr_kube_client_list_all(struct tsr_kube_client *c, const char *path,
                             const struct tsr_kube_list_opts *opts, json_t **out,
                             struct tsr_kube_result *res, struct tsr_diag *diag)
{
        struct tsr_kube_list_opts page = {0};
        json_t *all = NULL, *doc = NULL;
        uint64_t seen[CONTINUE_SEEN] = {0}; /* the last tokens' hashes, a ring */
        char *token = NULL;
        int rc = 0;

        if (opts)
                page = *opts;
        page.continue_token = NULL;
        for (int n = 0; n < LIST_PAGES_MAX; n++) {
                const char *cont;
                uint64_t h;

                rc = tsr_kube_client_list(c, path, &page, &doc, res, diag);
                if (rc)
                        break;
                rc = fill_kinds(json_object_get(doc, "items"), doc);
                if (!rc && !all) {
                        all = doc;
                        doc = NULL;
                } else if (!rc) {
                        rc = json_array_extend(json_object_get(all, "items"),
                                               json_object_get(doc, "items"))
                                 ? TSR_ENOMEM
                                 : 0;
                }
                if (rc) {
                        tsr_diag_set(diag, rc, "list %.200s: out of memory", path);
                        break;
                }
                cont = json_string_value(
                    json_object_get(json_object_get(doc ? doc : all, "metadata"), "continue"));
                if (!cont || !*cont) {
                        json_t *md = json_object_get(all, "metadata");

                        if (json_is_object(md))
                                json_object_del(md, "continue");
                        json_decref(doc);
                        free(token);
                        *out = all;
                        return 0;
                }
                /* A token seen a few pages ago: the server is paging in a loop. */
                h = tsr_fnv1a64_str(cont);
                for (int k = 0; k < CONTINUE_SEEN && !rc; k++)
                        if (seen[k] == h)
                                rc = tsr_diag_set(diag, TSR_EPARSE,
                                                  "list %.200s: page %d repeats the continue token "
                                                  "of an earlier page (the API server is paging "
                                                  "in a loop)",
                                                  path, n + 1);
                if (rc)
                        break;
                seen[n % CONTINUE_SEEN] = h;
                free(token);
                token = strdup(cont);
                json_decref(doc);
                doc = NULL;
                if (!token) {
                        rc = tsr_diag_set(diag, TSR_ENOMEM, "list %.200s: out of memory", path);
                        break;
                }
                page.continue_token = token;
                page.resource_version = NULL; /* the continue token carries the snapshot */
        }
        if (!rc)
                rc = tsr_diag_set(diag, TSR_ETOOBIG, "list %.200s: more than %d pages", path,
                                  LIST_PAGES_MAX);
        json_decref(doc);
        json_decref(all);
        free(token);
        return rc;
}

/* ---- watch -------------------------------------------------------------------------------- */

int tsr_kube_client_watch(struct tsr_kube_client *c, const char *path,
                          const struct tsr_kube_watch_opts *opts, tsr_kube_event_fn fn, void *ctx,
                          struct tsr_kube_result *res, struct tsr_diag *diag)
{
        static const struct tsr_kube_watch_opts none;
        struct tsr_kube_watch_stream stream;
        struct tsr_kube_result local;
        struct tsr_buf p = TSR_BUF_INIT;
        struct request rq;
        struct transfer t;
        int rc;

        if (!opts)
                opts = &none;
        if (!res)
                res = &local;
        res->events = 0;
        rc = tsr_buf_adds(&p, path);
        rc = rc ? rc : tsr_kube_query_add(&p, "watch", "1");
        rc = rc ? rc : query_opt(&p, "labelSelector", opts->label_selector);
        rc = rc ? rc : query_opt(&p, "fieldSelector", opts->field_selector);
        rc = rc ? rc : query_opt(&p, "resourceVersion", opts->resource_version);
        rc =
            rc ? rc : (opts->bookmarks ? tsr_kube_query_add(&p, "allowWatchBookmarks", "true") : 0);
        rc = rc ? rc : query_long(&p, "timeoutSeconds", opts->timeout_s);
        if (rc) {
                tsr_buf_release(&p);
                return tsr_diag_set(diag, rc, "watch %.200s: path too long", path);
        }
        tsr_kube_watch_stream_init(&stream, opts->max_event);
        memset(&t, 0, sizeof(t));
        tsr_buf_init(&t.body);
        t.body.max = (size_t)1 << 20;
        t.stream = &stream;
        t.fn = fn;
        t.ctx = ctx;
        rq = (struct request){
            "GET",
            p.ptr,
            NULL,
            NULL,
            0,
            opts->cancel,
            opts->timeout_s > 0 ? (opts->timeout_s + WATCH_TIMEOUT_MARGIN_S) * 1000L : 0,
            opts->stall_s};
        rc = run(c, &rq, &t, res, diag);
        res->events = stream.events;
        if (!rc)
                rc = tsr_kube_watch_stream_finish(&stream, diag);
        tsr_kube_watch_stream_release(&stream);
        tsr_buf_release(&t.body);
        tsr_buf_release(&p);
        return rc;
}

/* ---- patch -------------------------------------------------------------------------------- */

int tsr_kube_client_patch(struct tsr_kube_client *c, const char *path,
                          enum tsr_kube_patch_type type, json_t *body,
                          const struct tsr_kube_patch_opts *opts, json_t **out,
                          struct tsr_kube_result *res, struct tsr_diag *diag)
{
        static const char *const types[] = {
            [TSR_KUBE_PATCH_MERGE] = "application/merge-patch+json",
            [TSR_KUBE_PATCH_JSON] = "application/json-patch+json",
            [TSR_KUBE_PATCH_APPLY] = "application/apply-patch+yaml",
        };
        static const struct tsr_kube_patch_opts none;
        struct tsr_buf p = TSR_BUF_INIT;
        char *text;
        int rc;

        if (!opts)
                opts = &none;
        if ((unsigned)type > TSR_KUBE_PATCH_APPLY)
                return tsr_diag_set(diag, TSR_EINVAL, "patch %.200s: unknown patch type", path);
        if (type == TSR_KUBE_PATCH_APPLY && (!opts->field_manager || !*opts->field_manager))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "patch %.200s: fieldManager is required for apply patch", path);
        rc = tsr_buf_adds(&p, path);
        rc = rc ? rc : query_opt(&p, "fieldManager", opts->field_manager);
        rc = rc ? rc : (opts->force ? tsr_kube_query_add(&p, "force", "true") : 0);
        rc = rc ? rc : (opts->dry_run ? tsr_kube_query_add(&p, "dryRun", "All") : 0);
        if (rc) {
                tsr_buf_release(&p);
                return tsr_diag_set(diag, rc, "patch %.200s: path too long", path);
        }
        text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text) {
                tsr_buf_release(&p);
                return tsr_diag_set(diag, TSR_ENOMEM, "patch %.200s: out of memory", path);
        }
        rc = tsr_kube_client_request(c, "PATCH", p.ptr, types[type], text, strlen(text), NULL, out,
                                     res, diag);
        free(text);
        tsr_buf_release(&p);
        return rc;
}
