/*
 * events.c - the dedupe table, the queue and the worker of events.h.
 */
#include "devicemanager/events.h"

#include "base/err.h"
#include "base/fnv.h"
#include "base/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENTS_RECENT_MAX 128
#define EVENTS_QUEUE_MAX  32

struct recent {
        uint64_t key;
        int64_t at_ms;
        bool used;
};

struct item {
        char ns[254], name[254];
        bool pod;
        char type[16], reason[64], message[768];
};

struct tsr_dm_events {
        struct tsr_dm_events_opts opts;
        char node[254];
        pthread_mutex_t mu;
        pthread_cond_t cond;
        pthread_t thread;
        bool stopping;
        struct recent recent[EVENTS_RECENT_MAX];
        struct item queue[EVENTS_QUEUE_MAX];
        size_t head, n;
        struct tsr_dm_events_stats stats;
};

static void *worker(void *arg)
{
        struct tsr_dm_events *e = arg;
        struct item it;

        pthread_mutex_lock(&e->mu);
        for (;;) {
                while (!e->stopping && !e->n)
                        pthread_cond_wait(&e->cond, &e->mu);
                if (e->stopping)
                        break;
                it = e->queue[e->head];
                e->head = (e->head + 1) % EVENTS_QUEUE_MAX;
                e->n--;
                pthread_mutex_unlock(&e->mu);
                struct tsr_kube_event_record ev = {
                    .api_version = "v1",
                    .kind = it.pod ? "Pod" : "Node",
                    .name = it.name,
                    .namespace_ = it.pod ? it.ns : NULL,
                    .type = it.type,
                    .reason = it.reason,
                    .message = it.message,
                    .component = TSR_DM_EVENTS_COMPONENT,
                    .instance = e->node,
                };
                struct tsr_diag diag;
                int rc;

                tsr_diag_clear(&diag);
                rc = e->opts.post(e->opts.ctx, &ev, &diag);
                if (rc)
                        tsr_log(TSR_LOG_WARN, "cannot record an Event", "object", it.name, "reason",
                                it.reason, "error", diag.msg[0] ? diag.msg : tsr_strerror(rc),
                                NULL);
                pthread_mutex_lock(&e->mu);
                if (rc)
                        e->stats.failed++;
                else
                        e->stats.posted++;
        }
        pthread_mutex_unlock(&e->mu);
        return NULL;
}

int tsr_dm_events_new(const struct tsr_dm_events_opts *opts, struct tsr_dm_events **out)
{
        struct tsr_dm_events *e = calloc(1, sizeof(*e));

        if (!e)
                return TSR_ENOMEM;
        e->opts = *opts;
        if (!e->opts.window_ms)
                e->opts.window_ms = 60000;
        snprintf(e->node, sizeof(e->node), "%s", opts->node ? opts->node : "");
        pthread_mutex_init(&e->mu, NULL);
        pthread_cond_init(&e->cond, NULL);
        if (pthread_create(&e->thread, NULL, worker, e)) {
                pthread_cond_destroy(&e->cond);
                pthread_mutex_destroy(&e->mu);
                free(e);
                return TSR_EIO;
        }
        *out = e;
        return 0;
}

void tsr_dm_events_free(struct tsr_dm_events *e)
{
        if (!e)
                return;
        pthread_mutex_lock(&e->mu);
        e->stopping = true;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
        pthread_cond_destroy(&e->cond);
        pthread_mutex_destroy(&e->mu);
        free(e);
}

/* FNV-1a over the parts, each with its NUL. */
static uint64_t key_of(const char *reason, const char *object, const char *message)
{
        const char *parts[3] = {reason, object, message};
        uint64_t h = TSR_FNV64_OFFSET;

        for (int i = 0; i < 3; i++)
                h = tsr_fnv1a64_update(h, parts[i], strlen(parts[i]) + 1);
        return h;
}

/* True when key was emitted within the window; else remembers it now (the oldest slot is
 * reused). Under mu. */
static bool seen_recently(struct tsr_dm_events *e, uint64_t key, int64_t now_ms)
{
        struct recent *slot = &e->recent[0];

        for (size_t i = 0; i < EVENTS_RECENT_MAX; i++) {
                struct recent *r = &e->recent[i];

                if (r->used && r->key == key) {
                        if (now_ms - r->at_ms < (int64_t)e->opts.window_ms)
                                return true;
                        slot = r;
                        break;
                }
                if (!r->used ? slot->used : slot->used && r->at_ms < slot->at_ms)
                        slot = r;
        }
        *slot = (struct recent){key, now_ms, true};
        return false;
}

bool tsr_dm_events_emit(struct tsr_dm_events *e, const char *pod, const char *type,
                        const char *reason, const char *message, int64_t now_ms)
{
        const char *slash = pod ? strchr(pod, '/') : NULL;
        uint64_t key = key_of(reason, pod && *pod ? pod : e->node, message);
        struct item *it;
        bool queued = false;

        pthread_mutex_lock(&e->mu);
        e->stats.emitted++;
        if (seen_recently(e, key, now_ms)) {
                e->stats.suppressed++;
        } else if (e->n == EVENTS_QUEUE_MAX) {
                e->stats.dropped++;
        } else {
                it = &e->queue[(e->head + e->n) % EVENTS_QUEUE_MAX];
                memset(it, 0, sizeof(*it));
                it->pod = slash && slash != pod && slash[1];
                if (it->pod) {
                        snprintf(it->ns, sizeof(it->ns), "%.*s", (int)(slash - pod), pod);
                        snprintf(it->name, sizeof(it->name), "%s", slash + 1);
                } else {
                        snprintf(it->name, sizeof(it->name), "%s", e->node);
                }
                snprintf(it->type, sizeof(it->type), "%s", type);
                snprintf(it->reason, sizeof(it->reason), "%s", reason);
                snprintf(it->message, sizeof(it->message), "%s", message);
                e->n++;
                queued = true;
                pthread_cond_signal(&e->cond);
        }
        pthread_mutex_unlock(&e->mu);
        return queued;
}

void tsr_dm_events_stats(struct tsr_dm_events *e, struct tsr_dm_events_stats *out)
{
        pthread_mutex_lock(&e->mu);
        *out = e->stats;
        pthread_mutex_unlock(&e->mu);
}
