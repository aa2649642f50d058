/*
 * leader.c - the Lease elector of leader.h: one thread that reads the Lease every retry period
 * and creates, renews or takes it over. The Lease is written whole with a PUT carrying the
 * resourceVersion it was read at (optimistic concurrency: a 409 means another replica wrote first).
 *
 * Locking: l->mu guards leader, stop and the renew time; the thread alone touches the observed
 * record. l->cond (CLOCK_MONOTONIC) lets stop interrupt the retry sleep.
 */
#include "controller/leader.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "base/timespec.h"
#include "kube/client.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEASE_API     "/apis/coordination.k8s.io/v1/namespaces/%s/leases"
#define PATH_LEN      640
#define RECORD_LEN    512
#define IDENTITY_LEN  254
#define MICROTIME_LEN 64

struct tsr_leader {
        struct tsr_kube_client *client;
        struct tsr_leader_config cfg;
        char ns[254], name[254], identity[IDENTITY_LEN];
        pthread_t thread;
        pthread_mutex_t mu;
        pthread_cond_t cond;
        bool stop, leader, lost;
        struct timespec renewed; /* monotonic time of the last successful create/renew */
        /* the thread's own: the Lease record last seen and when it was seen to change */
        char observed[RECORD_LEN];
        struct timespec observed_at;
};

static struct timespec mono_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return t;
}

/* MicroTime as the API server writes it: 2026-12-03T17:50:31.123456Z. */
static void microtime_now(char *out)
{
        struct timespec t;
        struct tm tm;
        char secs[32];

        clock_gettime(CLOCK_REALTIME, &t);
        gmtime_r(&t.tv_sec, &tm);
        strftime(secs, sizeof(secs), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(out, MICROTIME_LEN, "%s.%06ldZ", secs, t.tv_nsec / 1000);
}

static const char *spec_str(json_t *lease, const char *field)
{
        return json_string_value(json_object_get(json_object_get(lease, "spec"), field));
}

static long long spec_int(json_t *lease, const char *field)
{
        return json_integer_value(json_object_get(json_object_get(lease, "spec"), field));
}

/* The Lease body naming holder (NULL: released) at resourceVersion rv (NULL: a create). */
static json_t *lease_body(const struct tsr_leader *l, const char *holder, const char *rv,
                          const char *acquired, long long transitions, unsigned duration_s)
{
        char now[MICROTIME_LEN];
        json_t *meta, *spec, *body;

        microtime_now(now);
        meta = json_pack("{s:s, s:s}", "name", l->name, "namespace", l->ns);
        if (meta && rv)
                json_object_set_new(meta, "resourceVersion", json_string(rv));
        spec = json_pack("{s:s, s:i, s:s, s:s, s:I}", "holderIdentity", holder ? holder : "",
                         "leaseDurationSeconds", (int)duration_s, "acquireTime",
                         acquired ? acquired : now, "renewTime", now, "leaseTransitions",
                         (json_int_t)transitions);
        body = json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "coordination.k8s.io/v1", "kind",
                         "Lease", "metadata", meta, "spec", spec);
        return body;
}

static int write_lease(struct tsr_leader *l, const char *method, json_t *body)
{
        char path[PATH_LEN];
        char *text;
        struct tsr_diag diag;
        int rc, n;

        if (!body)
                return TSR_ENOMEM;
        n = snprintf(path, sizeof(path), LEASE_API, l->ns);
        if (!strcmp(method, "PUT"))
                snprintf(path + n, sizeof(path) - (size_t)n, "/%s", l->name);
        text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!text)
                return TSR_ENOMEM;
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_request(l->client, method, path, "application/json", text,
                                     strlen(text), NULL, NULL, NULL, &diag);
        free(text);
        if (rc && rc != TSR_EEXIST && rc != TSR_ESTALE)
                tsr_log(TSR_LOG_WARN, "lease write failed", "lease", l->name, "error", diag.msg,
                        NULL);
        return rc;
}

static unsigned lease_seconds(const struct tsr_leader *l)
{
        return (l->cfg.lease_ms + 999) / 1000;
}

/*
 * One round: reads the Lease and creates, renews or takes it over. Returns true when this
 * replica holds it after the round.
 */
static bool campaign(struct tsr_leader *l)
{
        char path[PATH_LEN], record[RECORD_LEN];
        json_t *lease = NULL;
        struct tsr_diag diag;
        const char *holder, *rv;
        struct timespec now = mono_now();
        long long transitions;
        bool mine = false;
        int rc;

        snprintf(path, sizeof(path), LEASE_API "/%s", l->ns, l->name);
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_get(l->client, path, &lease, NULL, &diag);
        if (rc == TSR_ENOTFOUND)
                return write_lease(l, "POST",
                                   lease_body(l, l->identity, NULL, NULL, 0, lease_seconds(l))) ==
                       0;
        if (rc) {
                tsr_log(TSR_LOG_WARN, "lease read failed", "lease", l->name, "error", diag.msg,
                        NULL);
                return false;
        }
        holder = spec_str(lease, "holderIdentity");
        rv = json_string_value(
            json_object_get(json_object_get(lease, "metadata"), "resourceVersion"));
        transitions = spec_int(lease, "leaseTransitions");
        snprintf(record, sizeof(record), "%s|%s|%lld", holder ? holder : "",
                 spec_str(lease, "renewTime") ? spec_str(lease, "renewTime") : "", transitions);
        if (strcmp(record, l->observed)) {
                snprintf(l->observed, sizeof(l->observed), "%s", record);
                l->observed_at = now;
        }
        if (holder && !strcmp(holder, l->identity)) {
                mine = write_lease(l, "PUT",
                                   lease_body(l, l->identity, rv, spec_str(lease, "acquireTime"),
                                              transitions, lease_seconds(l))) == 0;
        } else {
                long long held_s = spec_int(lease, "leaseDurationSeconds");

                if (!holder || !*holder ||
                    tsr_timespec_ms_between(&l->observed_at, &now) >= held_s * 1000) {
                        mine = write_lease(l, "PUT",
                                           lease_body(l, l->identity, rv, NULL, transitions + 1,
                                                      lease_seconds(l))) == 0;
                        if (mine)
                                tsr_log(TSR_LOG_INFO, "lease taken over", "lease", l->name, "from",
                                        holder ? holder : "", NULL);
                }
        }
        json_decref(lease);
        return mine;
}

/* Releases the Lease if this replica holds it: empty holder, a one-second duration. */
static void release(struct tsr_leader *l)
{
        char path[PATH_LEN];
        json_t *lease = NULL;
        const char *holder;

        snprintf(path, sizeof(path), LEASE_API "/%s", l->ns, l->name);
        if (tsr_kube_client_get(l->client, path, &lease, NULL, NULL))
                return;
        holder = spec_str(lease, "holderIdentity");
        if (holder && !strcmp(holder, l->identity) &&
            write_lease(l, "PUT",
                        lease_body(l, NULL,
                                   json_string_value(json_object_get(
                                       json_object_get(lease, "metadata"), "resourceVersion")),
                                   spec_str(lease, "acquireTime"),
                                   spec_int(lease, "leaseTransitions"), 1)) == 0)
                tsr_log(TSR_LOG_INFO, "lease released", "lease", l->name, NULL);
        json_decref(lease);
}

static void *elector_main(void *arg)
{
        struct tsr_leader *l = arg;

        for (;;) {
                bool mine, started = false, lost = false;
                struct timespec now, until;

                pthread_mutex_lock(&l->mu);
                if (l->stop) {
                        pthread_mutex_unlock(&l->mu);
                        break;
                }
                pthread_mutex_unlock(&l->mu);
                mine = campaign(l);
                now = mono_now();
                pthread_mutex_lock(&l->mu);
                if (mine) {
                        started = !l->leader;
                        l->leader = true;
                        l->renewed = now;
                } else if (l->leader &&
                           tsr_timespec_ms_between(&l->renewed, &now) >= l->cfg.renew_ms) {
                        l->leader = false;
                        l->lost = lost = true;
                }
                pthread_mutex_unlock(&l->mu);
                if (started) {
                        tsr_log(TSR_LOG_INFO, "became leader", "lease", l->name, "identity",
                                l->identity, NULL);
                        if (l->cfg.on_started)
                                l->cfg.on_started(l->cfg.ctx);
                }
                if (lost) {
                        tsr_log(TSR_LOG_ERROR, "leader lease lost", "lease", l->name, "identity",
                                l->identity, NULL);
                        if (l->cfg.on_lost)
                                l->cfg.on_lost(l->cfg.ctx);
                        break;
                }
                until = tsr_timespec_add_ms(mono_now(), l->cfg.retry_ms);
                pthread_mutex_lock(&l->mu);
                while (!l->stop)
                        if (pthread_cond_timedwait(&l->cond, &l->mu, &until))
                                break;
                pthread_mutex_unlock(&l->mu);
        }
        return NULL;
}

int tsr_leader_start(struct tsr_kube_client *client, const struct tsr_leader_config *cfg,
                     struct tsr_leader **out, struct tsr_diag *diag)
{
        struct tsr_leader *l;
        pthread_condattr_t ca;

        if (!cfg->namespace_ || !*cfg->namespace_ || !cfg->name || !*cfg->name || !cfg->identity ||
            !*cfg->identity || strlen(cfg->identity) >= IDENTITY_LEN ||
            strlen(cfg->namespace_) >= sizeof(l->ns) || strlen(cfg->name) >= sizeof(l->name))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "leader election needs a Lease namespace, a name and an "
                                    "identity of at most 253 characters");
        l = calloc(1, sizeof(*l));
        if (!l)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        l->client = client;
        l->cfg = *cfg;
        if (!l->cfg.lease_ms)
                l->cfg.lease_ms = 15000;
        if (!l->cfg.renew_ms)
                l->cfg.renew_ms = 10000;
        if (!l->cfg.retry_ms)
                l->cfg.retry_ms = 2000;
        if (l->cfg.renew_ms >= l->cfg.lease_ms || l->cfg.retry_ms >= l->cfg.renew_ms) {
                free(l);
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "leader election: the retry period (%u ms) must be shorter "
                                    "than the renew deadline (%u ms), and that than the lease "
                                    "duration (%u ms)",
                                    cfg->retry_ms, cfg->renew_ms, cfg->lease_ms);
        }
        snprintf(l->ns, sizeof(l->ns), "%s", cfg->namespace_);
        snprintf(l->name, sizeof(l->name), "%s", cfg->name);
        snprintf(l->identity, sizeof(l->identity), "%s", cfg->identity);
        l->cfg.namespace_ = l->ns;
        l->cfg.name = l->name;
        l->cfg.identity = l->identity;
        pthread_mutex_init(&l->mu, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&l->cond, &ca);
        pthread_condattr_destroy(&ca);
        if (pthread_create(&l->thread, NULL, elector_main, l)) {
                pthread_cond_destroy(&l->cond);
                pthread_mutex_destroy(&l->mu);
                free(l);
                return tsr_diag_set(diag, TSR_EIO, "leader election: cannot start its thread");
        }
        *out = l;
        return 0;
}

bool tsr_leader_is_leader(struct tsr_leader *l)
{
        bool v;
        struct timespec now = mono_now();

        pthread_mutex_lock(&l->mu);
        v = l->leader && tsr_timespec_ms_between(&l->renewed, &now) < l->cfg.renew_ms;
        pthread_mutex_unlock(&l->mu);
        return v;
}

void tsr_leader_stop(struct tsr_leader *l)
{
        bool held;

        if (!l)
                return;
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        held = l->leader && !l->lost;
        if (held)
                release(l);
        pthread_cond_destroy(&l->cond);
        pthread_mutex_destroy(&l->mu);
        free(l);
}
