/*
 * conn_guard.c - the slots, the accept policy, the reaper thread and the body budget of
 * conn_guard.h. One mutex guards the slots; the body budget and the counters are atomics.
 */
#include "webhook/conn_guard.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "base/log_limit.h"
#include "base/timespec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define REAP_EVERY_MS          200
#define PRESSURE_GRACE_MS      1000
#define LOG_EVERY_MS           10000
#define BODY_REFUSED_RECENT_MS 2000 /* a body refusal this recent keeps /readyz at 503 */

enum phase { PHASE_FIRST, PHASE_REQUEST, PHASE_IDLE };

struct tsr_conn_slot {
        bool used, cut;
        int fd;
        unsigned char client[16]; /* the source address, IPv4 as IPv6-mapped */
        enum phase phase;
        int64_t since_ms; /* when the phase began */
};

#define REFUSAL_MAP(XX)                                                                            \
        XX(BUDGET, "budget")                                                                       \
        XX(PER_CLIENT, "per_client")
#define CUT_MAP(XX)                                                                                \
        XX(EVICTED, "evicted")                                                                     \
        XX(HEADER, "header_deadline")                                                              \
        XX(REQUEST, "request_deadline")                                                            \
        XX(IDLE, "idle_deadline")                                                                  \
        XX(PRESSURE, "pressure")

#define AS_ENUM(id, name) REFUSED_##id,
enum refusal { REFUSAL_MAP(AS_ENUM) N_REFUSALS };
#undef AS_ENUM
#define AS_ENUM(id, name) CUT_##id,
enum cut { CUT_MAP(AS_ENUM) N_CUTS };
#undef AS_ENUM
#define AS_NAME(id, name) name,
static const char *const refusal_names[] = {REFUSAL_MAP(AS_NAME)};
static const char *const cut_names[] = {CUT_MAP(AS_NAME)};
#undef AS_NAME

struct tsr_conn_guard {
        struct tsr_conn_guard_config cfg;
        pthread_mutex_t mu;
        pthread_cond_t wake;
        pthread_t reaper;
        bool stopping;
        struct tsr_conn_slot *slots;
        size_t n_slots, open, cut; /* open counts the cut ones until they close */
        _Atomic size_t body_bytes;
        atomic_ulong refused[N_REFUSALS], cuts[N_CUTS], body_refusals;
        _Atomic int64_t body_refused_ms; /* the last body refusal (monotonic), 0 if none */
        struct tsr_log_limit refusal_log[N_REFUSALS], cut_log[N_CUTS], body_log;
};

/* addr's address as 16 bytes (IPv4 mapped into IPv6); false for another family. */
static bool client_of(const struct sockaddr *addr, unsigned char out[16])
{
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

        if (addr && addr->sa_family == AF_INET) {
                memcpy(out, mapped, sizeof(mapped));
                memcpy(out + 12, &((const struct sockaddr_in *)addr)->sin_addr, 4);
                return true;
        }
        if (addr && addr->sa_family == AF_INET6) {
                memcpy(out, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
                return true;
        }
        return false;
}

static void client_text(const unsigned char client[16], char *out, size_t len)
{
        if (!memcmp(client, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12))
                inet_ntop(AF_INET, client + 12, out, (socklen_t)len);
        else
                inet_ntop(AF_INET6, client, out, (socklen_t)len);
}

static void log_limited(struct tsr_log_limit *limit, const char *msg, const char *key,
                        const char *value, const char *client)
{
        unsigned long held;
        char held_text[24];

        if (!tsr_log_limit_pass(limit, &held))
                return;
        snprintf(held_text, sizeof(held_text), "%lu", held);
        tsr_log(TSR_LOG_WARN, msg, key, value, "client", client, "held_back", held_text, NULL);
}

/* Cuts slot (the mutex held): its descriptor is still open, closed() takes the mutex first. */
static void cut(struct tsr_conn_guard *g, struct tsr_conn_slot *slot, enum cut why)
{
        char text[INET6_ADDRSTRLEN];

        shutdown(slot->fd, SHUT_RDWR);
        slot->cut = true;
        g->cut++;
        atomic_fetch_add(&g->cuts[why], 1);
        client_text(slot->client, text, sizeof(text));
        if (!g->cfg.quiet)
                log_limited(&g->cut_log[why], "connection cut", "reason", cut_names[why], text);
}

/* The connection that has waited longest outside a request, or NULL (the mutex held). */
static struct tsr_conn_slot *longest_waiting(struct tsr_conn_guard *g)
{
        struct tsr_conn_slot *best = NULL;

        for (size_t i = 0; i < g->n_slots; i++) {
                struct tsr_conn_slot *slot = &g->slots[i];

                if (slot->used && !slot->cut && slot->phase != PHASE_REQUEST &&
                    (!best || slot->since_ms < best->since_ms))
                        best = slot;
        }
        return best;
}

bool tsr_conn_guard_admit(struct tsr_conn_guard *g, const struct sockaddr *addr, socklen_t len)
{
        unsigned char client[16];
        char text[INET6_ADDRSTRLEN] = "";
        size_t same = 0;
        enum refusal why = N_REFUSALS;

        (void)len;
        if (!client_of(addr, client))
                return true; /* not an IP connection: nothing to share out */
        pthread_mutex_lock(&g->mu);
        for (size_t i = 0; i < g->n_slots; i++)
                if (g->slots[i].used && !g->slots[i].cut && !memcmp(g->slots[i].client, client, 16))
                        same++;
        if (same >= g->cfg.max_per_client) {
                why = REFUSED_PER_CLIENT;
        } else if (g->open - g->cut >= g->cfg.max_connections) {
                struct tsr_conn_slot *victim = g->open < g->n_slots ? longest_waiting(g) : NULL;

                if (victim)
                        cut(g, victim, CUT_EVICTED);
                else
                        why = REFUSED_BUDGET;
        }
        pthread_mutex_unlock(&g->mu);
        if (why == N_REFUSALS)
                return true;
        atomic_fetch_add(&g->refused[why], 1);
        client_text(client, text, sizeof(text));
        if (!g->cfg.quiet)
                log_limited(&g->refusal_log[why], "connection refused", "reason",
                            refusal_names[why], text);
        return false;
}

struct tsr_conn_slot *tsr_conn_guard_opened(struct tsr_conn_guard *g, int fd,
                                            const struct sockaddr *addr)
{
        struct tsr_conn_slot *slot = NULL;

        pthread_mutex_lock(&g->mu);
        for (size_t i = 0; i < g->n_slots && !slot; i++)
                if (!g->slots[i].used)
                        slot = &g->slots[i];
        if (slot) {
                memset(slot, 0, sizeof(*slot));
                slot->used = true;
                slot->fd = fd;
                if (!client_of(addr, slot->client))
                        memset(slot->client, 0, sizeof(slot->client));
                slot->phase = PHASE_FIRST;
                slot->since_ms = tsr_monotonic_ms();
                g->open++;
        }
        pthread_mutex_unlock(&g->mu);
        return slot;
}

void tsr_conn_guard_closed(struct tsr_conn_guard *g, struct tsr_conn_slot *slot)
{
        if (!slot)
                return;
        pthread_mutex_lock(&g->mu);
        if (slot->used) {
                slot->used = false;
                g->open--;
                if (slot->cut)
                        g->cut--;
        }
        pthread_mutex_unlock(&g->mu);
}

static void enter(struct tsr_conn_guard *g, struct tsr_conn_slot *slot, enum phase phase)
{
        if (!slot)
                return;
        pthread_mutex_lock(&g->mu);
        slot->phase = phase;
        slot->since_ms = tsr_monotonic_ms();
        pthread_mutex_unlock(&g->mu);
}

void tsr_conn_guard_request_begin(struct tsr_conn_guard *g, struct tsr_conn_slot *slot)
{
        enter(g, slot, PHASE_REQUEST);
}

void tsr_conn_guard_request_end(struct tsr_conn_guard *g, struct tsr_conn_slot *slot)
{
        enter(g, slot, PHASE_IDLE);
}

bool tsr_conn_guard_body_reserve(struct tsr_conn_guard *g, size_t n)
{
        size_t before = atomic_fetch_add(&g->body_bytes, n);

        if (before + n <= g->cfg.body_memory)
                return true;
        atomic_fetch_sub(&g->body_bytes, n);
        atomic_fetch_add(&g->body_refusals, 1);
        atomic_store(&g->body_refused_ms, tsr_monotonic_ms());
        log_limited(&g->body_log, "review refused", "reason", "body_memory", "");
        return false;
}

void tsr_conn_guard_body_release(struct tsr_conn_guard *g, size_t n)
{
        atomic_fetch_sub(&g->body_bytes, n);
}

/* How long slot may stay in its phase, in ms, or -1 for no deadline. */
static int64_t allowance_ms(const struct tsr_conn_guard *g, const struct tsr_conn_slot *slot,
                            bool pressure, enum cut *why)
{
        if (slot->phase == PHASE_REQUEST) {
                *why = CUT_REQUEST;
                return (int64_t)g->cfg.request_deadline_s * 1000;
        }
        if (pressure) {
                *why = CUT_PRESSURE;
                return PRESSURE_GRACE_MS;
        }
        if (slot->phase == PHASE_FIRST) {
                *why = CUT_HEADER;
                return (int64_t)g->cfg.header_deadline_s * 1000;
        }
        *why = CUT_IDLE;
        return g->cfg.idle_timeout_s ? (int64_t)g->cfg.idle_timeout_s * 1000 : -1;
}

/* One pass: every connection past its allowance is cut. Called with the mutex held. */
static void reap(struct tsr_conn_guard *g)
{
        int64_t now = tsr_monotonic_ms();
        bool pressure = (uint64_t)(g->open - g->cut) * 10 >= (uint64_t)g->cfg.max_connections * 9;

        for (size_t i = 0; i < g->n_slots; i++) {
                struct tsr_conn_slot *slot = &g->slots[i];
                int64_t allowed;
                enum cut why;

                if (!slot->used || slot->cut)
                        continue;
                allowed = allowance_ms(g, slot, pressure, &why);
                if (allowed >= 0 && now - slot->since_ms > allowed)
                        cut(g, slot, why);
        }
}

static void *reaper_main(void *arg)
{
        struct tsr_conn_guard *g = arg;

        pthread_mutex_lock(&g->mu);
        while (!g->stopping) {
                struct timespec until;

                clock_gettime(CLOCK_MONOTONIC, &until);
                until.tv_nsec += (long)REAP_EVERY_MS * 1000000L;
                until.tv_sec += until.tv_nsec / 1000000000L;
                until.tv_nsec %= 1000000000L;
                pthread_cond_timedwait(&g->wake, &g->mu, &until);
                if (!g->stopping)
                        reap(g);
        }
        pthread_mutex_unlock(&g->mu);
        return NULL;
}

static int check_config(const struct tsr_conn_guard_config *cfg, struct tsr_diag *diag)
{
        if (cfg->max_connections < 1 || cfg->max_connections > 65536)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "--max-connections must be within 1..65536, got %u",
                                    cfg->max_connections);
        if (cfg->max_per_client < 1 || cfg->max_per_client > cfg->max_connections)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "--max-connections-per-client must be within 1..%u "
                                    "(--max-connections), got %u",
                                    cfg->max_connections, cfg->max_per_client);
        if (!cfg->header_deadline_s)
                return tsr_diag_set(diag, TSR_EINVAL, "--header-timeout must be at least 1s");
        if (!cfg->request_deadline_s)
                return tsr_diag_set(diag, TSR_EINVAL, "--request-timeout must be at least 1s");
        if (!cfg->body_memory)
                return tsr_diag_set(diag, TSR_EINVAL, "--max-body-memory must be positive");
        return 0;
}

int tsr_conn_guard_new(const struct tsr_conn_guard_config *cfg, struct tsr_conn_guard **out,
                       struct tsr_diag *diag)
{
        struct tsr_conn_guard *g;
        pthread_condattr_t attr;
        int rc = check_config(cfg, diag);

        if (rc)
                return rc;
        g = calloc(1, sizeof(*g));
        if (!g)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        g->cfg = *cfg;
        /* Room past the budget for evicted connections still closing. */
        g->n_slots = (size_t)cfg->max_connections + TSR_CONN_SLACK;
        g->slots = calloc(g->n_slots, sizeof(*g->slots));
        for (size_t i = 0; i < N_REFUSALS; i++)
                g->refusal_log[i] = (struct tsr_log_limit)TSR_LOG_LIMIT_INIT(LOG_EVERY_MS);
        for (size_t i = 0; i < N_CUTS; i++)
                g->cut_log[i] = (struct tsr_log_limit)TSR_LOG_LIMIT_INIT(LOG_EVERY_MS);
        g->body_log = (struct tsr_log_limit)TSR_LOG_LIMIT_INIT(LOG_EVERY_MS);
        pthread_mutex_init(&g->mu, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&g->wake, &attr);
        pthread_condattr_destroy(&attr);
        if (!g->slots || pthread_create(&g->reaper, NULL, reaper_main, g)) {
                pthread_cond_destroy(&g->wake);
                pthread_mutex_destroy(&g->mu);
                free(g->slots);
                free(g);
                return tsr_diag_set(diag, TSR_ENOMEM, "cannot start the connection reaper");
        }
        *out = g;
        return 0;
}

void tsr_conn_guard_free(struct tsr_conn_guard *g)
{
        if (!g)
                return;
        pthread_mutex_lock(&g->mu);
        g->stopping = true;
        pthread_cond_signal(&g->wake);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->reaper, NULL);
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->mu);
        free(g->slots);
        free(g);
}

bool tsr_conn_guard_closing_full(struct tsr_conn_guard *g)
{
        bool full;

        pthread_mutex_lock(&g->mu);
        /* Half the slack kept: workers accepting at the same instant each take one. */
        full = g->cut > 0 && g->open + TSR_CONN_SLACK / 2 >= g->n_slots;
        pthread_mutex_unlock(&g->mu);
        return full;
}

bool tsr_conn_guard_exhausted(struct tsr_conn_guard *g, char *why, size_t why_len)
{
        size_t live, body = atomic_load(&g->body_bytes);
        int64_t refused_ms;
        bool full;

        pthread_mutex_lock(&g->mu);
        live = g->open - g->cut;
        full = live >= g->cfg.max_connections && !longest_waiting(g);
        pthread_mutex_unlock(&g->mu);
        if (full) {
                snprintf(why, why_len,
                         "the connection budget is exhausted: all %zu connections are inside a "
                         "request (--max-connections %u)",
                         live, g->cfg.max_connections);
                return true;
        }
        /*
         * A refusal closes its connection and returns that body's bytes at once, so the bytes
         * held alone would say "room" the moment after; a refusal in the last seconds counts.
         */
        refused_ms = atomic_load(&g->body_refused_ms);
        if (body + g->cfg.max_body > g->cfg.body_memory ||
            (refused_ms && tsr_monotonic_ms() - refused_ms < BODY_REFUSED_RECENT_MS)) {
                snprintf(why, why_len,
                         "the review memory budget is exhausted: %zu of %zu bytes held, bodies "
                         "refused for want of room",
                         body, g->cfg.body_memory);
                return true;
        }
        return false;
}

int tsr_conn_guard_render(struct tsr_conn_guard *g, struct tsr_buf *out)
{
        size_t open;
        int rc;

        pthread_mutex_lock(&g->mu);
        open = g->open - g->cut;
        pthread_mutex_unlock(&g->mu);
        rc = tsr_buf_addf(out,
                          "# HELP tessera_webhook_connections Open connections on the webhook "
                          "port.\n# TYPE tessera_webhook_connections gauge\n"
                          "tessera_webhook_connections %zu\n"
                          "# HELP tessera_webhook_connections_max The connection budget "
                          "(--max-connections).\n# TYPE tessera_webhook_connections_max gauge\n"
                          "tessera_webhook_connections_max %u\n"
                          "# HELP tessera_webhook_connections_refused_total Connections closed "
                          "as accepted, by reason.\n"
                          "# TYPE tessera_webhook_connections_refused_total counter\n",
                          open, g->cfg.max_connections);
        for (size_t i = 0; !rc && i < N_REFUSALS; i++)
                rc = tsr_buf_addf(out,
                                  "tessera_webhook_connections_refused_total{reason=\"%s\"} %lu\n",
                                  refusal_names[i], atomic_load(&g->refused[i]));
        if (!rc)
                rc = tsr_buf_addf(out, "# HELP tessera_webhook_connections_cut_total Connections "
                                       "cut past a deadline, by reason.\n"
                                       "# TYPE tessera_webhook_connections_cut_total counter\n");
        for (size_t i = 0; !rc && i < N_CUTS; i++)
                rc = tsr_buf_addf(out, "tessera_webhook_connections_cut_total{reason=\"%s\"} %lu\n",
                                  cut_names[i], atomic_load(&g->cuts[i]));
        if (!rc)
                rc = tsr_buf_addf(
                    out,
                    "# HELP tessera_webhook_body_bytes Review body bytes held now.\n"
                    "# TYPE tessera_webhook_body_bytes gauge\ntessera_webhook_body_bytes %zu\n"
                    "# HELP tessera_webhook_body_bytes_max The review memory budget "
                    "(--max-body-memory).\n# TYPE tessera_webhook_body_bytes_max gauge\n"
                    "tessera_webhook_body_bytes_max %zu\n"
                    "# HELP tessera_webhook_body_refusals_total Reviews whose connection was "
                    "closed because their body would pass the memory budget.\n"
                    "# TYPE tessera_webhook_body_refusals_total counter\n"
                    "tessera_webhook_body_refusals_total %lu\n",
                    atomic_load(&g->body_bytes), g->cfg.body_memory,
                    atomic_load(&g->body_refusals));
        return rc;
}
