/*
 * webhook_bench.c - throughput and latency of `tessera webhook`'s HTTPS server, over TLS
 * keep-alive, for the Pod fold next to the same server answering a fixed response.
 *
 * One process starts one server with tsr_webhook_server_start on a loopback ephemeral port, with
 * two routes:
 *   fold   the real route of the Pod fold (/mutate-gpustack-worker-core-v1-pod,
 *          tsr_webhook_pod_mutate) over an in-memory InstanceType, read the way the watch cache
 *          reads it (a read lock and a label scan per review for its revision, and, when the
 *          revision is not one this worker read before, a tsr_json_copy, as the cache;
 *          --no-revision-lookup copies on every review);
 *   fixed  /bench-fixed-response on the same server, whose handler ignores the object and allows
 *          without a patch. The review is still decoded and the response encoded by dispatch.h,
 *          so the ratio fold/fixed isolates what the fold itself costs on top of HTTP, TLS and the
 *          AdmissionReview codec.
 * Both are checked once before any timing (fold: 200, allowed, a JSONPatch; fixed: 200, allowed,
 * no patch). Then, for each concurrency C, C client threads each open one TLS connection (GnuTLS,
 * SNI and certificate verification against the CA, ALPN http/1.1) and POST the same Pod
 * AdmissionReview back to back for a warm-up and a measured window; both routes are measured at
 * each concurrency, in alternating order. The handshakes are outside the timing.
 *
 * With --nginx-port, a third server is driven the same way: nginx (Debian's package, started by
 * bench/run.sh --nginx) answering the same request with a fixed AdmissionReview response over TLS
 * 1.3 on loopback, checked first like the fixed route; its rates are the ceiling an HTTPS server
 * reaches on this machine, and fold/nginx says how near the fold comes to it.
 *
 * The server answers each review under a JSON arena (codec/json_arena.h), as `tessera webhook`
 * does; --no-json-arena leaves jansson on malloc and free, to measure what the arena is worth.
 *
 * Output: plain text, every number measured in this run. Exit status 1 when any request failed.
 * Speed targets belong here, never in the unit tests.
 */
#include "bench_common.h"
#include "pod_review.h"
#include "base/diag.h"
#include "base/err.h"
#include "codec/json_arena.h"
#include "codec/instancetype_entrance.h"
#include "codec/json_tree.h"
#include "codec/object_revision.h"
#include "codec/admission_review.h"
#include "webhook/dispatch.h"
#include "webhook/handler.h"
#include "webhook/pod.h"
#include "webhook/routes.h"
#include "webhook/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FOLD_PATH    "/mutate-gpustack-worker-core-v1-pod"
#define FIXED_PATH   "/bench-fixed-response"
#define SERVICE_HOST "gpustack-worker-webhook.gpustack-system.svc"
#define QUEUE        BENCH_POD_QUEUE
#define RESPONSE_MAX (64 * 1024)
#define CONC_MAX     16
#define CLIENTS_MAX  1024
#define ENTRANCE     "schedule.gpustack.ai/queue-entrance"

/* ---- the request ----------------------------------------------------------------------- */

/* What the API server sends before the body (Go's net/http client, with the timeout query). */
#define REQUEST_HEAD                                                                               \
        "POST %s?timeout=10s HTTP/1.1\r\n"                                                         \
        "Host: " SERVICE_HOST ":443\r\n"                                                           \
        "User-Agent: kube-apiserver-admission\r\n"                                                 \
        "Accept: application/json, */*\r\n"                                                        \
        "Content-Type: application/json\r\n"                                                       \
        "Content-Length: %zu\r\n"                                                                  \
        "Accept-Encoding: gzip\r\n\r\n"

/* Returns the HTTP/1.1 request the API server would send to path (malloc'd), its length in *len. */
static char *build_request(const char *path, size_t *len, size_t *body_len)
{
        char *body = bench_pod_review(body_len), *req;
        int head;

        if (!body)
                return NULL;
        head = snprintf(NULL, 0, REQUEST_HEAD, path, *body_len);
        req = head > 0 ? malloc((size_t)head + *body_len + 1) : NULL;
        if (req) {
                snprintf(req, (size_t)head + 1, REQUEST_HEAD, path, *body_len);
                memcpy(req + head, body, *body_len + 1);
                *len = (size_t)head + *body_len;
        }
        free(body);
        return req;
}

/* ---- the servers' side ------------------------------------------------------------------ */

/*
 * The InstanceTypes the fold reads, held the way the watch cache holds them: objects by name
 * behind a read-write lock, scanned by label, the match returned as a deep copy.
 */
struct fixture {
        pthread_rwlock_t lock;
        json_t *instancetypes; /* name -> InstanceType */
};

/* Upstream's shape: the per-card VRAM is status.detail.memory, a quantity string. */
static json_t *instancetype_new(const char *name, const char *entrance, const char *group,
                                json_int_t memory_mib, json_t *profiles)
{
        char memory[32];

        snprintf(memory, sizeof(memory), "%lldMi", (long long)memory_mib);
        return json_pack(
            "{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s}, s:{s:{s:s, s:{s:{s:o}}}}}",
            "apiVersion", "worker.gpustack.ai/v1alpha1", "kind", "InstanceType", "metadata", "name",
            name, "uid", name, "resourceVersion", "1", "labels", ENTRANCE, entrance, "spec",
            "acceleratorGroup", group, "status", "detail", "memory", memory, "slicedDetail",
            "physical", "profiles", profiles);
}

static int fixture_init(struct fixture *f)
{
        json_t *h100 = instancetype_new("nvidia-h100-sliced", QUEUE, "nvidia-h100-80gb-hbm3", 81559,
                                        json_pack("[{s:s, s:i, s:i}, {s:s, s:i, s:i}]", "name",
                                                  "1g.10gb", "count", 7, "memoryMib", 9856, "name",
                                                  "3g.40gb", "count", 2, "memoryMib", 40192));
        json_t *a100 = instancetype_new(
            "nvidia-a100-mig", "a100-mig", "nvidia-a100-sxm4-80gb", 81920,
            json_pack("[{s:s, s:i, s:i}]", "name", "1g.10gb", "count", 7, "memoryMib", 9728));

        int rc;

        pthread_rwlock_init(&f->lock, NULL);
        f->instancetypes = json_object();
        if (!f->instancetypes) {
                json_decref(h100);
                json_decref(a100);
                return -1;
        }
        /* json_object_set_new takes the reference even when it fails. */
        rc = json_object_set_new(f->instancetypes, "nvidia-h100-sliced", h100);
        rc |= json_object_set_new(f->instancetypes, "nvidia-a100-mig", a100);
        return rc ? -1 : 0;
}

static void fixture_release(struct fixture *f)
{
        json_decref(f->instancetypes);
        pthread_rwlock_destroy(&f->lock);
}

static json_t *instancetype_by_entrance(void *ctx, const char *lq, size_t *matches)
{
        struct fixture *f = ctx;
        json_t *found;
        size_t n;

        pthread_rwlock_rdlock(&f->lock);
        found = tsr_instancetype_entrance_scan(f->instancetypes, lq, &n);
        found = n == 1 ? tsr_json_copy(found) : NULL;
        pthread_rwlock_unlock(&f->lock);
        if (matches)
                *matches = n;
        return found;
}

/* --no-revision-lookup: the fold copies and reads the InstanceType on every review. */
static bool no_revision_lookup;

/* The cache's revision lookup: the same scan, no copy (kube/cache.h). */
static bool instancetype_revision_by_entrance(void *ctx, const char *lq, char *rev, size_t len)
{
        struct fixture *f = ctx;
        json_t *found;
        size_t n;
        bool ok;

        pthread_rwlock_rdlock(&f->lock);
        found = tsr_instancetype_entrance_scan(f->instancetypes, lq, &n);
        ok = n == 1 && tsr_object_revision(found, rev, len);
        pthread_rwlock_unlock(&f->lock);
        return ok;
}

static void fill_lookup(void *ctx, struct tsr_webhook_lookup *lookup)
{
        tsr_webhook_lookup_init(lookup);
        lookup->ctx = ctx;
        lookup->instancetype_by_entrance = instancetype_by_entrance;
        if (!no_revision_lookup)
                lookup->instancetype_revision_by_entrance = instancetype_revision_by_entrance;
}

static bool always_ready(void *ctx, char *why, size_t why_len)
{
        (void)ctx;
        (void)why;
        (void)why_len;
        return true;
}

/*
 * The fixed response: allowed, no patch, whatever the object. The route decodes what the fold
 * decodes (the Pod's reads), so fold/fixed is the fold's own work.
 */
static int allow_unchanged(const struct tsr_webhook_lookup *lookup, const struct tsr_review *review,
                           struct tsr_verdict *verdict, struct tsr_diag *diag)
{
        (void)lookup;
        (void)review;
        (void)diag;
        tsr_verdict_allow(verdict);
        return 0;
}

static const struct tsr_webhook_route fixed_route = {
    FIXED_PATH,      "bench.fixed-response", "", "v1", "Pod", true, false,
    allow_unchanged, tsr_webhook_pod_reads,
};

/* ---- the client ------------------------------------------------------------------------- */

struct conn {
        int fd;
        gnutls_session_t tls;
        char buf[RESPONSE_MAX];
        size_t have;
};

/* Connects and handshakes to 127.0.0.1:port. Returns 0, or -1 with a line on stderr. */
static int conn_open(struct conn *c, gnutls_certificate_credentials_t cred, unsigned port)
{
        static const gnutls_datum_t alpn = {(unsigned char *)"http/1.1", 8};
        struct sockaddr_in sa;
        int one = 1, rc;

        c->have = 0;
        c->tls = NULL;
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0) {
                perror("bench: socket");
                return -1;
        }
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
                perror("bench: connect");
                return -1;
        }
        if ((rc = gnutls_init(&c->tls, GNUTLS_CLIENT)) < 0 ||
            (rc = gnutls_set_default_priority(c->tls)) < 0 ||
            (rc = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, cred)) < 0 ||
            (rc = gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, SERVICE_HOST,
                                         strlen(SERVICE_HOST))) < 0 ||
            (rc = gnutls_alpn_set_protocols(c->tls, &alpn, 1, 0)) < 0) {
                fprintf(stderr, "bench: TLS session: %s\n", gnutls_strerror(rc));
                return -1;
        }
        gnutls_session_set_verify_cert(c->tls, SERVICE_HOST, 0);
        gnutls_transport_set_int(c->tls, c->fd);
        gnutls_handshake_set_timeout(c->tls, GNUTLS_DEFAULT_HANDSHAKE_TIMEOUT);
        do {
                rc = gnutls_handshake(c->tls);
        } while (rc < 0 && !gnutls_error_is_fatal(rc));
        if (rc < 0) {
                fprintf(stderr, "bench: TLS handshake with port %u: %s\n", port,
                        gnutls_strerror(rc));
                if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
                        gnutls_datum_t why = {NULL, 0};
                        unsigned status = gnutls_session_get_verify_cert_status(c->tls);

                        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509,
                                                                         &why, 0) == 0)
                                fprintf(stderr, "bench: %s\n", why.data);
                        gnutls_free(why.data);
                }
                return -1;
        }
        return 0;
}

static void conn_close(struct conn *c)
{
        if (c->tls) {
                gnutls_bye(c->tls, GNUTLS_SHUT_WR);
                gnutls_deinit(c->tls);
                c->tls = NULL;
        }
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

/* Reads more bytes into c->buf. Returns 0, or -1 on EOF, a TLS error or a full buffer. */
static int conn_fill(struct conn *c)
{
        ssize_t n;

        if (c->have >= sizeof(c->buf))
                return -1;
        do {
                n = gnutls_record_recv(c->tls, c->buf + c->have, sizeof(c->buf) - c->have);
        } while (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED);
        if (n <= 0)
                return -1;
        c->have += (size_t)n;
        return 0;
}

/*
 * Sends req and reads one response: the status into *status, the body at *body (inside c->buf,
 * valid until the next call) and its length into *body_len, the whole response's length into
 * *total. Returns 0 or -1 (the connection is unusable).
 */
static int round_trip(struct conn *c, const char *req, size_t req_len, int *status,
                      const char **body, size_t *body_len, size_t *total)
{
        size_t sent = 0, head = 0, clen = 0;
        bool have_clen = false;
        const char *end = NULL, *line;

        while (sent < req_len) {
                ssize_t n = gnutls_record_send(c->tls, req + sent, req_len - sent);

                if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
                        continue;
                if (n <= 0)
                        return -1;
                sent += (size_t)n;
        }
        for (;;) {
                for (size_t i = 3; i < c->have && !end; i++)
                        if (!memcmp(c->buf + i - 3, "\r\n\r\n", 4))
                                end = c->buf + i + 1;
                if (end)
                        break;
                if (conn_fill(c))
                        return -1;
        }
        head = (size_t)(end - c->buf);
        if (head < 12 || memcmp(c->buf, "HTTP/1.1 ", 9))
                return -1;
        *status = atoi(c->buf + 9);
        for (line = memchr(c->buf, '\n', head); line && line + 1 < end;
             line = memchr(line + 1, '\n', (size_t)(end - line - 1))) {
                static const char cl[] = "content-length:";

                if ((size_t)(end - line - 1) > sizeof(cl) - 1 &&
                    !strncasecmp(line + 1, cl, sizeof(cl) - 1)) {
                        clen = strtoul(line + 1 + sizeof(cl) - 1, NULL, 10);
                        have_clen = true;
                }
        }
        if (!have_clen || head + clen > sizeof(c->buf))
                return -1;
        while (c->have < head + clen)
                if (conn_fill(c))
                        return -1;
        if (c->have != head + clen)
                return -1; /* nothing else was asked for */
        *body = c->buf + head;
        *body_len = clen;
        *total = head + clen;
        c->have = 0;
        return 0;
}

/* ---- the load --------------------------------------------------------------------------- */

struct phase {
        gnutls_certificate_credentials_t cred;
        const char *req;
        size_t req_len;
        unsigned port;
        pthread_barrier_t barrier;
        int64_t measure_from, until; /* set between the two barrier waits */
};

struct worker {
        pthread_t thread;
        struct phase *phase;
        uint32_t *lat_ns; /* latencies of the reviews completed in the window */
        size_t n, cap;
        size_t failed;
};

static int record(struct worker *w, int64_t ns)
{
        if (w->n == w->cap) {
                size_t cap = w->cap ? w->cap * 2 : 4096;
                uint32_t *p = realloc(w->lat_ns, cap * sizeof(*p));

                if (!p)
                        return -1;
                w->lat_ns = p;
                w->cap = cap;
        }
        w->lat_ns[w->n++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
        return 0;
}

static void *worker_run(void *arg)
{
        struct worker *w = arg;
        struct phase *p = w->phase;
        struct conn *c = malloc(sizeof(*c));
        bool ok = c && conn_open(c, p->cred, p->port) == 0;

        pthread_barrier_wait(&p->barrier); /* everyone has connected */
        pthread_barrier_wait(&p->barrier); /* the clock is set */
        for (int64_t t0 = bench_now_ns(); ok && t0 < p->until; t0 = bench_now_ns()) {
                const char *body;
                size_t body_len, total;
                int status = 0;
                int64_t t1;

                if (round_trip(c, p->req, p->req_len, &status, &body, &body_len, &total)) {
                        fprintf(stderr, "bench: port %u: the connection failed mid-review\n",
                                p->port);
                        ok = false;
                        break;
                }
                t1 = bench_now_ns();
                if (status != 200) {
                        fprintf(stderr, "bench: port %u: HTTP %d: %.*s\n", p->port, status,
                                (int)body_len, body);
                        w->failed++;
                        continue;
                }
                if (t1 >= p->measure_from && t1 < p->until && record(w, t1 - t0)) {
                        ok = false;
                        break;
                }
        }
        if (!ok)
                w->failed++;
        if (c) {
                conn_close(c);
                free(c);
        }
        return NULL;
}

/* Latencies gathered over the rounds of one server at one concurrency. */
struct series {
        uint32_t *lat_ns;
        size_t n, cap;
        size_t failed;
        double seconds; /* measured seconds summed over the rounds */
};

struct result {
        double per_second;
        double p50_ms, p99_ms;
        size_t reviews, failed;
};

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

        return (x > y) - (x < y);
}

/* The nearest-rank percentile q (0..1] of sorted v[0..n), in milliseconds. */
static double percentile_ms(const uint32_t *v, size_t n, double q)
{
        size_t rank;

        if (!n)
                return 0;
        rank = (size_t)(q * (double)n + 0.999999);
        if (rank < 1)
                rank = 1;
        if (rank > n)
                rank = n;
        return (double)v[rank - 1] / 1e6;
}

/* Sorts s and summarises it into *out; releases s. */
static void series_finish(struct series *s, struct result *out)
{
        memset(out, 0, sizeof(*out));
        out->failed = s->failed;
        out->reviews = s->n;
        if (s->n) {
                qsort(s->lat_ns, s->n, sizeof(*s->lat_ns), cmp_u32);
                out->per_second = (double)s->n / s->seconds;
                out->p50_ms = percentile_ms(s->lat_ns, s->n, 0.50);
                out->p99_ms = percentile_ms(s->lat_ns, s->n, 0.99);
        }
        free(s->lat_ns);
        memset(s, 0, sizeof(*s));
}

/*
 * Runs clients connections against p->port for warmup + seconds and appends what was measured
 * to *s. Returns 0 or -1 (no memory).
 */
static int measure(struct phase *p, unsigned clients, double warmup, double seconds,
                   struct series *s)
{
        struct worker *w = calloc(clients, sizeof(*w));
        size_t total = s->n;
        unsigned started = 0;
        int rc = 0;

        if (!w)
                return -1;
        pthread_barrier_init(&p->barrier, NULL, clients + 1);
        for (; started < clients; started++) {
                w[started].phase = p;
                if (pthread_create(&w[started].thread, NULL, worker_run, &w[started]))
                        break;
        }
        if (started < clients) {
                /* Cannot happen with sane limits; the barrier would never open. */
                fprintf(stderr, "bench: cannot start %u client threads\n", clients);
                abort();
        }
        pthread_barrier_wait(&p->barrier);
        p->measure_from = bench_now_ns() + (int64_t)(warmup * 1e9);
        p->until = p->measure_from + (int64_t)(seconds * 1e9);
        pthread_barrier_wait(&p->barrier);
        for (unsigned i = 0; i < clients; i++) {
                pthread_join(w[i].thread, NULL);
                total += w[i].n;
                s->failed += w[i].failed;
        }
        pthread_barrier_destroy(&p->barrier);
        if (total > s->cap) {
                uint32_t *grown = realloc(s->lat_ns, total * sizeof(*grown));

                if (grown) {
                        s->lat_ns = grown;
                        s->cap = total;
                } else {
                        rc = -1;
                }
        }
        for (unsigned i = 0; i < clients; i++) {
                if (!rc)
                        memcpy(s->lat_ns + s->n, w[i].lat_ns, w[i].n * sizeof(*s->lat_ns));
                if (!rc)
                        s->n += w[i].n;
                free(w[i].lat_ns);
        }
        free(w);
        s->seconds += seconds;
        return rc;
}

/* ---- the check before timing ------------------------------------------------------------ */

/*
 * Sends one review to port and checks the answer: 200, allowed, and a JSONPatch when want_patch
 * (none otherwise). Prints what it saw. Returns 0 or -1.
 */
static int verify(gnutls_certificate_credentials_t cred, unsigned port, const char *name,
                  const char *req, size_t req_len, bool want_patch, size_t *response_bytes)
{
        struct conn *c = malloc(sizeof(*c));
        const char *body;
        size_t body_len, total;
        int status = 0, rc = -1;
        json_t *doc = NULL, *resp;
        json_error_t err;
        const char *patch_type, *patch;
        bool allowed;

        if (!c)
                return -1;
        if (conn_open(c, cred, port) ||
            round_trip(c, req, req_len, &status, &body, &body_len, &total)) {
                fprintf(stderr, "bench: %s: no answer\n", name);
                goto out;
        }
        if (status != 200) {
                fprintf(stderr, "bench: %s: HTTP %d: %.*s\n", name, status, (int)body_len, body);
                goto out;
        }
        doc = json_loadb(body, body_len, 0, &err);
        resp = json_object_get(doc, "response");
        allowed = json_is_true(json_object_get(resp, "allowed"));
        patch_type = json_string_value(json_object_get(resp, "patchType"));
        patch = json_string_value(json_object_get(resp, "patch"));
        if (!allowed ||
            (want_patch && (!patch_type || strcmp(patch_type, "JSONPatch") || !patch || !*patch)) ||
            (!want_patch && (patch_type || patch))) {
                fprintf(stderr, "bench: %s: expected allowed %s a patch, got: %.*s\n", name,
                        want_patch ? "with" : "without", (int)body_len, body);
                goto out;
        }
        if (want_patch) {
                gnutls_datum_t b64 = {(unsigned char *)(uintptr_t)patch, (unsigned)strlen(patch)};
                gnutls_datum_t raw = {NULL, 0};
                json_t *ops = NULL;

                if (gnutls_base64_decode2(&b64, &raw) == 0)
                        ops = json_loadb((const char *)raw.data, raw.size, 0, &err);
                if (!json_is_array(ops) || !json_array_size(ops)) {
                        fprintf(stderr, "bench: %s: the patch is not a JSON Patch array\n", name);
                        json_decref(ops);
                        gnutls_free(raw.data);
                        goto out;
                }
                printf("check %-5s HTTP 200, allowed, JSONPatch of %zu operations (%u bytes):\n",
                       name, json_array_size(ops), raw.size);
                printf("            %.*s%s\n", raw.size > 150 ? 150 : (int)raw.size,
                       (const char *)raw.data, raw.size > 150 ? " ..." : "");
                json_decref(ops);
                gnutls_free(raw.data);
        } else {
                printf("check %-5s HTTP 200, allowed, no patch\n", name);
        }
        *response_bytes = total;
        rc = 0;
out:
        json_decref(doc);
        conn_close(c);
        free(c);
        return rc;
}

static void describe_tls(gnutls_certificate_credentials_t cred, unsigned port)
{
        struct conn *c = malloc(sizeof(*c));

        if (c && conn_open(c, cred, port) == 0) {
                char *desc = gnutls_session_get_desc(c->tls);
                gnutls_datum_t proto = {NULL, 0};

                gnutls_alpn_get_selected_protocol(c->tls, &proto);
                printf("tls:        %s, ALPN %.*s, GnuTLS %s\n", desc ? desc : "?",
                       proto.data ? (int)proto.size : 4,
                       proto.data ? (const char *)proto.data : "none", gnutls_check_version(NULL));
                gnutls_free(desc);
        }
        if (c) {
                conn_close(c);
                free(c);
        }
}

/* ---- main ------------------------------------------------------------------------------- */

struct options {
        const char *cert, *key, *ca;
        unsigned nginx_port; /* 0: no nginx to compare with */
        unsigned threads;
        bool no_json_arena;
        bool no_revision_lookup;
        double seconds, warmup;
        unsigned rounds;
        unsigned conc[CONC_MAX];
        size_t n_conc;
};

static void usage(FILE *f)
{
        fprintf(f,
                "usage: bench_webhook --cert FILE --key FILE --ca FILE [options]\n"
                "  --cert FILE         the servers' PEM chain (SAN " SERVICE_HOST ")\n"
                "  --key FILE          its PEM private key\n"
                "  --ca FILE           the CA the client verifies the chain against\n"
                "  --threads N         worker threads of the server (default: as tessera webhook,\n"
                "                      one per CPU, at most 16)\n"
                "  --seconds S         measured seconds per point (default 3)\n"
                "  --warmup S          unmeasured seconds before each round (default 0.5)\n"
                "  --rounds N          split each point in N rounds, alternating the servers\n"
                "                      (default 3)\n"
                "  --concurrency LIST  client connections per point (default 1,4,16,64)\n"
                "  --nginx-port P      also drive the fixed response nginx serves on\n"
                "                      127.0.0.1:P (bench/run.sh --nginx starts one)\n"
                "  --no-json-arena     jansson on malloc and free, not the per-review arena\n"
                "  --no-revision-lookup  copy and read the InstanceType on every review, as a\n"
                "                      lookup without the cache's revision lookup does\n"
                "bench/run.sh makes the certificates and runs this.\n");
}

static int parse_conc(const char *s, struct options *o)
{
        char *end;

        o->n_conc = 0;
        for (;;) {
                unsigned long v;

                errno = 0;
                v = strtoul(s, &end, 10);
                if (errno || end == s || v < 1 || v > CLIENTS_MAX || o->n_conc == CONC_MAX)
                        return -1;
                o->conc[o->n_conc++] = (unsigned)v;
                if (*end == '\0')
                        return 0;
                if (*end != ',')
                        return -1;
                s = end + 1;
        }
}

static int parse_seconds(const char *s, double *out, double min)
{
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || *end || !(v >= min) || v > 3600)
                return -1;
        *out = v;
        return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
        enum {
                OPT_CERT = 256,
                OPT_KEY,
                OPT_CA,
                OPT_THREADS,
                OPT_SECONDS,
                OPT_WARMUP,
                OPT_ROUNDS,
                OPT_CONC,
                OPT_NGINX,
                OPT_NO_ARENA,
                OPT_NO_REVISION
        };
        static const struct option longs[] = {
            {"cert", required_argument, NULL, OPT_CERT},
            {"key", required_argument, NULL, OPT_KEY},
            {"ca", required_argument, NULL, OPT_CA},
            {"threads", required_argument, NULL, OPT_THREADS},
            {"seconds", required_argument, NULL, OPT_SECONDS},
            {"warmup", required_argument, NULL, OPT_WARMUP},
            {"rounds", required_argument, NULL, OPT_ROUNDS},
            {"concurrency", required_argument, NULL, OPT_CONC},
            {"nginx-port", required_argument, NULL, OPT_NGINX},
            {"no-json-arena", no_argument, NULL, OPT_NO_ARENA},
            {"no-revision-lookup", no_argument, NULL, OPT_NO_REVISION},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        int opt;

        memset(o, 0, sizeof(*o));
        o->threads = tsr_webhook_default_threads();
        o->seconds = 3;
        o->warmup = 0.5;
        o->rounds = 3;
        o->conc[0] = 1;
        o->conc[1] = 4;
        o->conc[2] = 16;
        o->conc[3] = 64;
        o->n_conc = 4;
        while ((opt = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
                char *end;
                unsigned long v;

                switch (opt) {
                case OPT_CERT:
                        o->cert = optarg;
                        break;
                case OPT_KEY:
                        o->key = optarg;
                        break;
                case OPT_CA:
                        o->ca = optarg;
                        break;
                case OPT_THREADS:
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (errno || end == optarg || *end || v < 1 || v > 256) {
                                fprintf(stderr, "bench: --threads must be within 1..256\n");
                                return -1;
                        }
                        o->threads = (unsigned)v;
                        break;
                case OPT_SECONDS:
                        if (parse_seconds(optarg, &o->seconds, 0.01)) {
                                fprintf(stderr, "bench: bad --seconds %s\n", optarg);
                                return -1;
                        }
                        break;
                case OPT_WARMUP:
                        if (parse_seconds(optarg, &o->warmup, 0)) {
                                fprintf(stderr, "bench: bad --warmup %s\n", optarg);
                                return -1;
                        }
                        break;
                case OPT_ROUNDS:
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (errno || end == optarg || *end || v < 1 || v > 100) {
                                fprintf(stderr, "bench: --rounds must be within 1..100\n");
                                return -1;
                        }
                        o->rounds = (unsigned)v;
                        break;
                case OPT_CONC:
                        if (parse_conc(optarg, o)) {
                                fprintf(stderr, "bench: --concurrency takes a list such as "
                                                "1,4,16,64 (each 1..1024, at most 16)\n");
                                return -1;
                        }
                        break;
                case OPT_NGINX:
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (errno || end == optarg || *end || v < 1 || v > 65535) {
                                fprintf(stderr, "bench: --nginx-port must be within 1..65535\n");
                                return -1;
                        }
                        o->nginx_port = (unsigned)v;
                        break;
                case OPT_NO_ARENA:
                        o->no_json_arena = true;
                        break;
                case OPT_NO_REVISION:
                        o->no_revision_lookup = true;
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                default:
                        usage(stderr);
                        return -1;
                }
        }
        if (optind != argc || !o->cert || !o->key || !o->ca) {
                usage(stderr);
                return -1;
        }
        return 0;
}

static int start_server(const struct options *o, const struct tsr_webhook_route *routes,
                        struct fixture *fx, struct tsr_webhook_server **out)
{
        struct tsr_webhook_server_config cfg = {
            .bind = "127.0.0.1",
            .port = 0,
            .probe_port = -1,
            .cert_file = o->cert,
            .key_file = o->key,
            .threads = o->threads,
            .max_body = TSR_WEBHOOK_MAX_BODY_DEFAULT,
            .idle_timeout_s = 90,
            .guard = TSR_CONN_GUARD_DEFAULTS,
            .routes = routes,
            .n_routes = 2,
            .lookup = fill_lookup,
            .ready = always_ready,
            .ctx = fx,
        };
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_webhook_server_start(&cfg, out, &diag);
        if (rc)
                fprintf(stderr, "bench: cannot start the server: %s (%s)\n", diag.msg,
                        tsr_strerror(rc));
        return rc;
}

int main(int argc, char **argv)
{
        struct options o;
        struct fixture fx;
        struct tsr_webhook_server *server = NULL;
        struct tsr_webhook_route routes[2];
        gnutls_certificate_credentials_t cred = NULL;
        const struct tsr_webhook_route *fold_route = tsr_webhook_route_find(FOLD_PATH);
        char *req = NULL, *req_fixed = NULL, model[128];
        size_t req_len = 0, fixed_len = 0, body_len = 0, fold_bytes = 0, fixed_bytes = 0,
               nginx_bytes = 0, failed = 0;
        unsigned port;
        int status = 1, rc;

        if (parse_options(argc, argv, &o))
                return 2;
        no_revision_lookup = o.no_revision_lookup;
        if (!o.no_json_arena)
                tsr_json_arena_install(); /* before the server's threads, as tessera webhook */
        signal(SIGPIPE, SIG_IGN);
        if (fixture_init(&fx)) {
                fprintf(stderr, "bench: out of memory\n");
                fixture_release(&fx);
                return 1;
        }
        req = build_request(FOLD_PATH, &req_len, &body_len);
        req_fixed = build_request(FIXED_PATH, &fixed_len, &body_len);
        if (!req || !req_fixed || !fold_route)
                goto out;
        if ((rc = gnutls_certificate_allocate_credentials(&cred)) < 0 ||
            (rc = gnutls_certificate_set_x509_trust_file(cred, o.ca, GNUTLS_X509_FMT_PEM)) <= 0) {
                fprintf(stderr, "bench: no CA certificate in %s: %s\n", o.ca,
                        rc < 0 ? gnutls_strerror(rc) : "none found");
                goto out;
        }
        routes[0] = *fold_route;
        routes[1] = fixed_route;
        if (start_server(&o, routes, &fx, &server))
                goto out;
        port = tsr_webhook_server_port(server);

        bench_cpu_model(model, sizeof(model));
        printf("machine:    %ld CPUs online (%s), 1-minute load average %.2f before the run\n",
               sysconf(_SC_NPROCESSORS_ONLN), model, bench_load_average());
        printf("server:     127.0.0.1:%u, %u worker threads: fold (%s) at " FOLD_PATH
               ", the fixed response at " FIXED_PATH "; clients in the same process; "
               "reviews under a JSON arena: %s; InstanceType read per review: %s\n",
               port, o.threads, fold_route->name, o.no_json_arena ? "no" : "yes",
               o.no_revision_lookup ? "yes" : "no (kept while its revision holds)");
        describe_tls(cred, port);
        if (verify(cred, port, "fold", req, req_len, true, &fold_bytes) ||
            verify(cred, port, "fixed", req_fixed, fixed_len, false, &fixed_bytes) ||
            (o.nginx_port &&
             verify(cred, o.nginx_port, "nginx", req_fixed, fixed_len, false, &nginx_bytes)))
                goto out;
        printf("bytes:      request %zu (AdmissionReview body %zu); response fold %zu, fixed "
               "%zu, nginx %zu (HTTP, before TLS framing)\n",
               req_len, body_len, fold_bytes, fixed_bytes, nginx_bytes);
        if (o.nginx_port)
                printf("nginx:      127.0.0.1:%u, the same request, a fixed AdmissionReview "
                       "response from its own configuration (bench/run.sh --nginx)\n",
                       o.nginx_port);
        printf(
            "timing:     per point and route, %.2f s measured in %u rounds (routes alternating), "
            "each after %.2f s warm-up on fresh connections; one keep-alive connection per "
            "client thread; latency = first request byte sent to last response byte read\n\n",
            o.seconds, o.rounds, o.warmup);
        printf("%11s | %12s %8s %8s | %12s %8s %8s | %10s", "", "fold", "", "", "fixed", "", "",
               "");
        if (o.nginx_port)
                printf(" | %12s %8s %8s | %10s %11s", "nginx", "", "", "", "");
        printf("\n%11s | %12s %8s %8s | %12s %8s %8s | %10s", "concurrency", "reviews/s", "p50 ms",
               "p99 ms", "reviews/s", "p50 ms", "p99 ms", "fold/fixed");
        if (o.nginx_port)
                printf(" | %12s %8s %8s | %10s %11s", "reviews/s", "p50 ms", "p99 ms", "fold/nginx",
                       "fixed/nginx");
        printf("\n");
        fflush(stdout);
        for (size_t i = 0; i < o.n_conc; i++) {
                struct phase pf = {.cred = cred, .req = req, .req_len = req_len, .port = port};
                struct phase px = {
                    .cred = cred, .req = req_fixed, .req_len = fixed_len, .port = port};
                struct phase pn = {
                    .cred = cred, .req = req_fixed, .req_len = fixed_len, .port = o.nginx_port};
                struct phase *phases[3] = {&pf, &px, &pn};
                struct series series[3];
                struct result res[3];
                unsigned n_phases = o.nginx_port ? 3 : 2;
                double slice = o.seconds / o.rounds;
                int bad = 0;

                /*
                 * The measured time is split in rounds and the order rotates (fold, fixed[,
                 * nginx]; fixed, [nginx,] fold; ...), so no server always runs on a warmer or a
                 * quieter machine; this one is shared.
                 */
                memset(series, 0, sizeof(series));
                for (unsigned r = 0; r < o.rounds && !bad; r++)
                        for (unsigned k = 0; k < n_phases && !bad; k++) {
                                unsigned at = (r + (unsigned)i + k) % n_phases;

                                bad = measure(phases[at], o.conc[i], o.warmup, slice, &series[at]);
                        }
                for (unsigned k = 0; k < n_phases; k++) {
                        series_finish(&series[k], &res[k]);
                        failed += res[k].failed;
                }
                if (bad) {
                        fprintf(stderr, "bench: out of memory\n");
                        goto out;
                }
                printf("%11u | %12.0f %8.3f %8.3f | %12.0f %8.3f %8.3f | %10.2f", o.conc[i],
                       res[0].per_second, res[0].p50_ms, res[0].p99_ms, res[1].per_second,
                       res[1].p50_ms, res[1].p99_ms,
                       res[1].per_second > 0 ? res[0].per_second / res[1].per_second : 0.0);
                if (o.nginx_port)
                        printf(" | %12.0f %8.3f %8.3f | %10.2f %11.2f", res[2].per_second,
                               res[2].p50_ms, res[2].p99_ms,
                               res[2].per_second > 0 ? res[0].per_second / res[2].per_second : 0.0,
                               res[2].per_second > 0 ? res[1].per_second / res[2].per_second : 0.0);
                printf("\n");
                fflush(stdout);
        }
        printf("\nload:       1-minute load average %.2f after the run (other processes share "
               "these CPUs: compare the ratio, not the absolute rates, across runs)\n",
               bench_load_average());
        if (failed)
                fprintf(stderr, "bench: %zu requests or connections failed\n", failed);
        else
                status = 0;
out:
        tsr_webhook_server_stop(server, 0, 1000);
        if (cred)
                gnutls_certificate_free_credentials(cred);
        free(req);
        free(req_fixed);
        fixture_release(&fx);
        return status;
}
