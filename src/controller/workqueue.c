/*
 * workqueue.c - the queue of workqueue.h. State, all under q->mu:
 *   fifo       keys waiting, in order (a growable array of owned strings);
 *   state      key -> flags: WAITING (in fifo), PROCESSING (handed out), DIRTY (added while
 *              processing: queued again at done), and the key's failure count;
 *   delayed    {key, due} pairs; get moves the due ones into fifo before waiting until the next.
 * The state map is a jansson object used as a hash table, touched only under the mutex.
 */
#include "controller/workqueue.h"

#include "base/err.h"
#include "base/timespec.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAITING    1
#define PROCESSING 2
#define DIRTY      4

struct delayed {
        char *key;
        struct timespec due;
};

struct tsr_workqueue {
        pthread_mutex_t mu;
        pthread_cond_t cond; /* CLOCK_MONOTONIC */
        bool shut;
        unsigned base_ms, max_ms;
        char **fifo;
        size_t head, n, cap; /* fifo[head .. head+n) */
        json_t *state;       /* key -> [flags, failures] */
        struct delayed *delayed;
        size_t n_delayed, cap_delayed;
};

static struct timespec mono_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return t;
}

struct tsr_workqueue *tsr_workqueue_new(unsigned base_ms, unsigned max_ms)
{
        struct tsr_workqueue *q = calloc(1, sizeof(*q));
        pthread_condattr_t ca;

        if (!q)
                return NULL;
        q->state = json_object();
        if (!q->state) {
                free(q);
                return NULL;
        }
        q->base_ms = base_ms ? base_ms : 5;
        q->max_ms = max_ms ? max_ms : 60000;
        pthread_mutex_init(&q->mu, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&q->cond, &ca);
        pthread_condattr_destroy(&ca);
        return q;
}

void tsr_workqueue_free(struct tsr_workqueue *q)
{
        if (!q)
                return;
        for (size_t i = 0; i < q->n; i++)
                free(q->fifo[q->head + i]);
        for (size_t i = 0; i < q->n_delayed; i++)
                free(q->delayed[i].key);
        free(q->fifo);
        free(q->delayed);
        json_decref(q->state);
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->mu);
        free(q);
}

static bool key_ok(const char *key)
{
        return key && *key && strlen(key) < TSR_WORKQUEUE_KEY_MAX;
}

/* The flags and failures of key (0, 0 when unknown). */
static void state_of(struct tsr_workqueue *q, const char *key, int *flags, int *failures)
{
        json_t *s = json_object_get(q->state, key);

        *flags = (int)json_integer_value(json_array_get(s, 0));
        *failures = (int)json_integer_value(json_array_get(s, 1));
}

/* Stores key's state; a key with neither flags nor failures is dropped. 0 or TSR_ENOMEM. */
static int set_state(struct tsr_workqueue *q, const char *key, int flags, int failures)
{
        if (!flags && !failures)
                return json_object_del(q->state, key), 0;
        return json_object_set_new(q->state, key, json_pack("[i,i]", flags, failures)) ? TSR_ENOMEM
                                                                                       : 0;
}

/* Appends key to the fifo (the caller checked it is not waiting). 0 or TSR_ENOMEM. */
static int push(struct tsr_workqueue *q, const char *key)
{
        char *copy;

        if (q->head + q->n == q->cap) {
                if (q->head > 0) {
                        memmove(q->fifo, q->fifo + q->head, q->n * sizeof(*q->fifo));
                        q->head = 0;
                } else {
                        size_t cap = q->cap ? q->cap * 2 : 64;
                        char **grown = realloc(q->fifo, cap * sizeof(*grown));

                        if (!grown)
                                return TSR_ENOMEM;
                        q->fifo = grown;
                        q->cap = cap;
                }
        }
        copy = strdup(key);
        if (!copy)
                return TSR_ENOMEM;
        q->fifo[q->head + q->n++] = copy;
        return 0;
}

/* Queues key now, under q->mu. */
static int add_locked(struct tsr_workqueue *q, const char *key)
{
        int flags, failures, rc;

        state_of(q, key, &flags, &failures);
        if (flags & WAITING)
                return 0;
        if (flags & PROCESSING)
                return set_state(q, key, flags | DIRTY, failures);
        rc = push(q, key);
        if (!rc)
                rc = set_state(q, key, flags | WAITING, failures);
        if (!rc)
                pthread_cond_signal(&q->cond);
        return rc;
}

int tsr_workqueue_add(struct tsr_workqueue *q, const char *key)
{
        int rc = 0;

        if (!key_ok(key))
                return TSR_EINVAL;
        pthread_mutex_lock(&q->mu);
        if (!q->shut)
                rc = add_locked(q, key);
        pthread_mutex_unlock(&q->mu);
        return rc;
}

/* Queues key at due, under q->mu: an earlier due of the same key stands. */
static int add_at_locked(struct tsr_workqueue *q, const char *key, struct timespec due)
{
        for (size_t i = 0; i < q->n_delayed; i++) {
                if (strcmp(q->delayed[i].key, key))
                        continue;
                if (tsr_timespec_ms_between(&due, &q->delayed[i].due) > 0)
                        q->delayed[i].due = due;
                pthread_cond_broadcast(&q->cond);
                return 0;
        }
        if (q->n_delayed == q->cap_delayed) {
                size_t cap = q->cap_delayed ? q->cap_delayed * 2 : 16;
                struct delayed *grown = realloc(q->delayed, cap * sizeof(*grown));

                if (!grown)
                        return TSR_ENOMEM;
                q->delayed = grown;
                q->cap_delayed = cap;
        }
        q->delayed[q->n_delayed].key = strdup(key);
        if (!q->delayed[q->n_delayed].key)
                return TSR_ENOMEM;
        q->delayed[q->n_delayed++].due = due;
        pthread_cond_broadcast(&q->cond);
        return 0;
}

int tsr_workqueue_add_after(struct tsr_workqueue *q, const char *key, unsigned ms)
{
        int rc = 0;

        if (!key_ok(key))
                return TSR_EINVAL;
        if (ms == 0)
                return tsr_workqueue_add(q, key);
        pthread_mutex_lock(&q->mu);
        if (!q->shut)
                rc = add_at_locked(q, key, tsr_timespec_add_ms(mono_now(), ms));
        pthread_mutex_unlock(&q->mu);
        return rc;
}

int tsr_workqueue_add_rate_limited(struct tsr_workqueue *q, const char *key)
{
        int flags, failures, rc = 0;
        int64_t ms;

        if (!key_ok(key))
                return TSR_EINVAL;
        pthread_mutex_lock(&q->mu);
        if (!q->shut) {
                state_of(q, key, &flags, &failures);
                ms = q->base_ms;
                for (int i = 0; i < failures && ms < q->max_ms; i++)
                        ms *= 2;
                if (ms > q->max_ms)
                        ms = q->max_ms;
                rc = set_state(q, key, flags, failures + 1);
                if (!rc)
                        rc = add_at_locked(q, key, tsr_timespec_add_ms(mono_now(), ms));
        }
        pthread_mutex_unlock(&q->mu);
        return rc;
}

void tsr_workqueue_forget(struct tsr_workqueue *q, const char *key)
{
        int flags, failures;

        if (!key_ok(key))
                return;
        pthread_mutex_lock(&q->mu);
        state_of(q, key, &flags, &failures);
        set_state(q, key, flags, 0);
        pthread_mutex_unlock(&q->mu);
}

unsigned tsr_workqueue_failures(struct tsr_workqueue *q, const char *key)
{
        int flags, failures = 0;

        if (!key_ok(key))
                return 0;
        pthread_mutex_lock(&q->mu);
        state_of(q, key, &flags, &failures);
        pthread_mutex_unlock(&q->mu);
        return (unsigned)failures;
}

/*
 * Moves the due delayed keys into the fifo, under q->mu. Returns true with *next set to the
 * earliest remaining due time, false when none remains.
 */
static bool promote_due(struct tsr_workqueue *q, struct timespec *next)
{
        struct timespec now = mono_now();
        bool any = false;
        size_t i = 0;

        while (i < q->n_delayed) {
                struct delayed *d = &q->delayed[i];

                if (tsr_timespec_reached(&now, &d->due)) {
                        add_locked(q, d->key);
                        free(d->key);
                        q->delayed[i] = q->delayed[--q->n_delayed];
                        continue;
                }
                if (!any || tsr_timespec_ms_between(&d->due, next) > 0)
                        *next = d->due;
                any = true;
                i++;
        }
        return any;
}

bool tsr_workqueue_get(struct tsr_workqueue *q, char *key)
{
        struct timespec next;
        int flags, failures;
        char *k;

        pthread_mutex_lock(&q->mu);
        for (;;) {
                bool timed;

                if (q->shut) {
                        pthread_mutex_unlock(&q->mu);
                        return false;
                }
                timed = promote_due(q, &next);
                if (q->n)
                        break;
                if (timed)
                        pthread_cond_timedwait(&q->cond, &q->mu, &next);
                else
                        pthread_cond_wait(&q->cond, &q->mu);
        }
        k = q->fifo[q->head++];
        if (--q->n == 0)
                q->head = 0;
        state_of(q, k, &flags, &failures);
        set_state(q, k, (flags & ~WAITING) | PROCESSING, failures);
        strcpy(key, k);
        free(k);
        pthread_mutex_unlock(&q->mu);
        return true;
}

size_t tsr_workqueue_take_matching(struct tsr_workqueue *q, const char *prefix,
                                   char (*keys)[TSR_WORKQUEUE_KEY_MAX], size_t max)
{
        struct timespec next;
        size_t taken = 0, kept = 0, len = strlen(prefix);
        int flags, failures;

        pthread_mutex_lock(&q->mu);
        if (!q->shut)
                promote_due(q, &next);
        for (size_t i = 0; i < q->n; i++) {
                char *k = q->fifo[q->head + i];

                if (q->shut || taken == max || strncmp(k, prefix, len)) {
                        q->fifo[q->head + kept++] = k; /* stays, in its order */
                        continue;
                }
                state_of(q, k, &flags, &failures);
                set_state(q, k, (flags & ~WAITING) | PROCESSING, failures);
                strcpy(keys[taken++], k);
                free(k);
        }
        q->n = kept;
        if (!q->n)
                q->head = 0;
        pthread_mutex_unlock(&q->mu);
        return taken;
}

void tsr_workqueue_done(struct tsr_workqueue *q, const char *key)
{
        int flags, failures;

        if (!key_ok(key))
                return;
        pthread_mutex_lock(&q->mu);
        state_of(q, key, &flags, &failures);
        set_state(q, key, flags & ~(PROCESSING | DIRTY), failures);
        if ((flags & DIRTY) && !q->shut)
                add_locked(q, key);
        pthread_mutex_unlock(&q->mu);
}

size_t tsr_workqueue_len(struct tsr_workqueue *q)
{
        size_t n;

        pthread_mutex_lock(&q->mu);
        n = q->n;
        pthread_mutex_unlock(&q->mu);
        return n;
}

void tsr_workqueue_shutdown(struct tsr_workqueue *q)
{
        pthread_mutex_lock(&q->mu);
        q->shut = true;
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->mu);
}
