/*
 * cache.c - one watcher thread per resource, each a reflector in client-go's sense: list (all
 * pages, one snapshot) into a fresh map and swap it in, then watch from the list's
 * resourceVersion; every event replaces or removes one map entry and moves the resume point, as
 * does every BOOKMARK. A 410 (an HTTP 410, or an ERROR event with code 410) sends the watcher back
 * to list, at once the first time, after the backoff when the watch that followed the relist
 * brought no event before its own 410 (a server answering every watch 410 gets a few requests
 * a second at most, not a tight loop); any other failure retries the watch from the resume point
 * after a capped exponential backoff with jitter. A watch the server ends cleanly is resumed at
 * once. A 401 or 403 also sends the watcher back to list (after the backoff), and a 410, 401 or 403
 * marks the resource stale (c->stale, st.stale) until that list completes: the map is kept and
 * still served, but it is known to miss changes (tsr_kube_cache_current). A watch silent for
 * opts.watch_stall_s (no byte at all, headers, events and bookmarks counted) is a stall:
 * counted, logged, the resource stale until the next event, bookmark or list, and the watch
 * resumed at once from the resume point (history is not lost, so no list is needed).
 *
 * Health: every failure (a list or watch error, a 410) is logged, at most once per resource every
 * 10 s with the number held back, and counted; the stats carry when the resource last made
 * progress (a list, an event, a bookmark, a watch that began) and since when it is stale, which
 * tsr_kube_cache_render_metrics exposes as tessera_kube_watch_* series.
 *
 * Locking: c->lock (a rwlock) guards every watcher's map and counters; readers hold it shared
 * to find an object and copy it. Writers never modify a stored object: an event's object replaces
 * the old one. A reader gets a deep copy (codec/json_tree.h: no loop check, a stored object is a
 * tree) rather than a shared reference because jansson's
 * reference count is not safe to share between threads: json_incref in jansson.h reads the count
 * without an atomic load while another thread's json_decref changes it atomically, and the last
 * json_decref frees without an acquire barrier (ThreadSanitizer reports both). A copy costs
 * microseconds for objects of a few kilobytes and leaves every stored object, and its count, to
 * the watcher thread alone; the reader owns what it got and it never changes. c->mu guards
 * stop and the synced bits and, with c->cond, lets shutdown interrupt a backoff sleep; each
 * watcher's cancel token interrupts its request in flight, so tsr_kube_cache_free returns within
 * milliseconds.
 *
 * Only the resources of the mask get a watcher (and a thread); the others keep an empty map
 * forever. The change callback is called by a watcher after it released c->lock: after a list
 * swapped in a map that differs from the one it replaced (json_equal; the first list always
 * counts), and after an event that stored or removed an object. The Pods' watcher lists and
 * watches with its field selector, so the API server filters the Pods of other nodes out (a Pod
 * that stops matching arrives as DELETED).
 */
#include "kube/cache.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "base/log_limit.h"
#include "base/timespec.h"
#include "codec/instancetype_entrance.h"
#include "codec/json_tree.h"
#include "codec/object_revision.h"
#include "core/settings.h"
#include "kube/client.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_BACKOFF_INITIAL_MS 500u
#define DEFAULT_BACKOFF_MAX_MS     30000u
#define DEFAULT_WATCH_TIMEOUT_S    300L
#define DEFAULT_WATCH_STALL_S      150L /* 2.5 x the watch cache's bookmark a minute */
#define DEFAULT_PAGE_LIMIT         500L
#define SHORT_WATCH_MS             1000 /* a clean end sooner than this without events is a failure */
#define LOG_EVERY_MS               10000
#define KEY_MAX                    512

#define PATH_MAX_LEN               256
#define DEFAULT_SETTINGS_NAMESPACE "gpustack-system"
#define NODE_NAME_MAX              253
#define NODE_SELECTOR              "spec.nodeName="

/*
 * What each watcher lists and watches. A path with "%s" is the namespaced collection of the
 * operator's namespace (opts.settings_namespace). An optional resource does not hold back
 * tsr_kube_cache_synced: the Settings API is served by the operator itself, so it is down
 * whenever the operator is, and the values a process starts with stand in meanwhile.
 */
static const struct {
        const char *name;
        const char *path;
        bool namespaced;
        bool optional;
} resources[TSR_KUBE_CACHE_N_RESOURCES] = {
    [TSR_KUBE_CACHE_INSTANCETYPES] = {"instancetypes",
                                      "/apis/worker.gpustack.ai/v1alpha1/instancetypes", false,
                                      false},
    [TSR_KUBE_CACHE_LOCALQUEUES] = {"localqueues", "/apis/kueue.x-k8s.io/v1beta2/localqueues", true,
                                    false},
    [TSR_KUBE_CACHE_CLUSTERQUEUES] = {"clusterqueues", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
                                      false, false},
    [TSR_KUBE_CACHE_KVCACHEPOOLBINDINGS] = {"kvcachepoolbindings",
                                            "/apis/worker.gpustack.ai/v1alpha1/kvcachepoolbindings",
                                            true, false},
    [TSR_KUBE_CACHE_KVCACHEPOOLS] = {"kvcachepools",
                                     "/apis/worker.gpustack.ai/v1alpha1/kvcachepools", false,
                                     false},
    [TSR_KUBE_CACHE_KVCACHEBACKENDS] = {"kvcachebackends",
                                        "/apis/worker.gpustack.ai/v1alpha1/kvcachebackends", false,
                                        false},
    [TSR_KUBE_CACHE_SETTINGS] = {"settings", "/apis/gpustack.ai/v1/namespaces/%s/settings", true,
                                 true},
    [TSR_KUBE_CACHE_PODS] = {"pods", "/api/v1/pods", true, false},
    [TSR_KUBE_CACHE_NODES] = {"nodes", "/api/v1/nodes", false, false},
    [TSR_KUBE_CACHE_DEVICES] = {"devices", "/apis/worker.gpustack.ai/v1alpha1/devices", false,
                                false},
    [TSR_KUBE_CACHE_NAMESPACES] = {"namespaces", "/api/v1/namespaces", false, false},
    [TSR_KUBE_CACHE_WORKLOADS] = {"workloads", "/apis/kueue.x-k8s.io/v1beta2/workloads", true,
                                  false},
    [TSR_KUBE_CACHE_RESOURCEFLAVORS] = {"resourceflavors",
                                        "/apis/kueue.x-k8s.io/v1beta2/resourceflavors", false,
                                        false},
    [TSR_KUBE_CACHE_TOPOLOGIES] = {"topologies", "/apis/kueue.x-k8s.io/v1beta2/topologies", false,
                                   false},
    [TSR_KUBE_CACHE_ADMISSIONCHECKS] = {"admissionchecks",
                                        "/apis/kueue.x-k8s.io/v1beta2/admissionchecks", false,
                                        false},
    [TSR_KUBE_CACHE_INSTANCES] = {"instances", "/apis/worker.gpustack.ai/v1alpha1/instances", true,
                                  false},
};

struct watcher {
        struct tsr_kube_cache *c;
        enum tsr_kube_cache_resource r;
        pthread_t thread;
        bool started;
        struct tsr_kube_cancel cancel;
        uint64_t rng;
        char rv[64];             /* the resume point; only the watcher thread touches it */
        char path[PATH_MAX_LEN]; /* the collection; set before the thread starts */
        char field_selector[sizeof(NODE_SELECTOR) + NODE_NAME_MAX]; /* "" for none; likewise */
        json_t *objects;                /* key -> object; guarded by c->lock */
        unsigned long generation;       /* bumped with every change of objects; likewise */
        struct tsr_kube_cache_stats st; /* guarded by c->lock */
        int64_t progress_ms;            /* the last progress (monotonic); guarded by c->lock */
        int64_t failing_since_ms;       /* the first failure of the current run, 0 if none;
                                           guarded by c->lock, as the two below */
        int64_t watch_began_ms;         /* when the watch in flight began, 0 if none */
        int64_t stale_since_ms;         /* when it became stale, 0 while current */
        bool stale_from_stall;          /* stale because its watch stalled, until the next
                                           event, bookmark or list; the watcher thread's */
        struct tsr_log_limit log;       /* failures' log lines */
};

struct tsr_kube_cache {
        struct tsr_kube_client *client;
        struct tsr_kube_cache_opts opts;
        pthread_rwlock_t lock;
        pthread_mutex_t mu;
        pthread_cond_t cond; /* CLOCK_MONOTONIC; signalled on stop and on every first sync */
        atomic_bool stop;
        unsigned watched; /* the mask: bit per resource with a watcher; set before any starts */
        unsigned synced;  /* bit per resource; guarded by mu */
        unsigned stale;   /* bit per resource sent back to list by a 410, 401, 403; guarded by mu */
        struct watcher w[TSR_KUBE_CACHE_N_RESOURCES];
};

/* ---- time --------------------------------------------------------------------------------- */

static struct timespec deadline_in(int64_t ms)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return tsr_timespec_add_ms(ts, ms);
}

static bool stopping(struct tsr_kube_cache *c)
{
        return atomic_load(&c->stop);
}

/* Sleeps ms unless the cache stops first. */
static void nap(struct tsr_kube_cache *c, int64_t ms)
{
        struct timespec until = deadline_in(ms);

        pthread_mutex_lock(&c->mu);
        while (!atomic_load(&c->stop))
                if (pthread_cond_timedwait(&c->cond, &c->mu, &until))
                        break;
        pthread_mutex_unlock(&c->mu);
}

static uint64_t next_rand(struct watcher *w)
{
        w->rng ^= w->rng << 13;
        w->rng ^= w->rng >> 7;
        w->rng ^= w->rng << 17;
        return w->rng;
}

/* The failures'th retry delay: initial * 2^(failures-1) plus up to half again, capped. */
static void backoff(struct watcher *w, unsigned failures, long retry_after_s)
{
        const struct tsr_kube_cache_opts *o = &w->c->opts;
        int64_t ms = o->backoff_initial_ms;

        for (unsigned i = 1; i < failures && ms < o->backoff_max_ms; i++)
                ms *= 2;
        ms += ms > 1 ? (int64_t)(next_rand(w) % (uint64_t)(ms / 2 + 1)) : 0;
        if (retry_after_s > 0 && ms < retry_after_s * 1000)
                ms = retry_after_s * 1000;
        if (ms > o->backoff_max_ms)
                ms = o->backoff_max_ms;
        nap(w->c, ms);
}

/* ---- the map ------------------------------------------------------------------------------ */

/* The map key of an object: "name" or "namespace/name". 0, or -1 when it has no usable name. */
static int key_of(const struct watcher *w, const char *ns, const char *name, char *key)
{
        int n;

        if (!name || !*name)
                return -1;
        if (resources[w->r].namespaced)
                n = snprintf(key, KEY_MAX, "%s/%s", ns ? ns : "", name);
        else
                n = snprintf(key, KEY_MAX, "%s", name);
        return n < 0 || n >= KEY_MAX ? -1 : 0;
}

static const char *meta_str(json_t *obj, const char *field)
{
        return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

static void set_rv(struct watcher *w, const char *rv)
{
        if (!rv || !*rv || strlen(rv) >= sizeof(w->rv))
                return;
        strcpy(w->rv, rv);
        strcpy(w->st.resource_version, rv);
}

/* The watcher's field selector, or NULL. */
static const char *selector_of(const struct watcher *w)
{
        return w->field_selector[0] ? w->field_selector : NULL;
}

/* Tells the owner that w's resource changed; the caller holds no lock of the cache. */
static void notify(struct watcher *w)
{
        if (w->c->opts.on_change)
                w->c->opts.on_change(w->c->opts.ctx, w->r);
}

/* Marks w's resource stale (or current again) for tsr_kube_cache_current and its stats. */
static void set_stale(struct watcher *w, bool stale)
{
        struct tsr_kube_cache *c = w->c;

        pthread_rwlock_wrlock(&c->lock);
        if (stale && !w->st.stale)
                w->stale_since_ms = tsr_monotonic_ms();
        if (!stale)
                w->stale_since_ms = 0;
        w->st.stale = stale;
        pthread_rwlock_unlock(&c->lock);
        pthread_mutex_lock(&c->mu);
        if (stale)
                c->stale |= 1u << w->r;
        else
                c->stale &= ~(1u << w->r);
        pthread_mutex_unlock(&c->mu);
}

/* Whether an answer refused the watcher's credentials (it has seen nothing since). */
static bool refused(const struct tsr_kube_result *res)
{
        return res->http == 401 || res->http == 403;
}

/* Records and logs (rate-limited) a failure; what is the watcher's next step, for the log. */
static void note_error(struct watcher *w, const struct tsr_diag *diag, const char *what,
                       enum tsr_log_level level)
{
        unsigned long held;
        char held_text[24];

        pthread_rwlock_wrlock(&w->c->lock);
        snprintf(w->st.last_error, sizeof(w->st.last_error), "%s", diag->msg);
        if (!w->failing_since_ms)
                w->failing_since_ms = tsr_monotonic_ms();
        pthread_rwlock_unlock(&w->c->lock);
        if (!tsr_log_limit_pass(&w->log, &held))
                return;
        snprintf(held_text, sizeof(held_text), "%lu", held);
        tsr_log(level, "watch failed", "resource", resources[w->r].name, "next", what, "error",
                diag->msg, "held_back", held_text, NULL);
}

/* A watch began at began_ms (0: it ended). */
static void watching(struct watcher *w, int64_t began_ms)
{
        pthread_rwlock_wrlock(&w->c->lock);
        w->watch_began_ms = began_ms;
        pthread_rwlock_unlock(&w->c->lock);
}

/* The resource's watch works again: its failing run is over. */
static void healthy(struct watcher *w)
{
        pthread_rwlock_wrlock(&w->c->lock);
        w->failing_since_ms = 0;
        pthread_rwlock_unlock(&w->c->lock);
}

/* The resource made progress: a list, an event, a bookmark, a watch the server took. */
static void progressed(struct watcher *w)
{
        pthread_rwlock_wrlock(&w->c->lock);
        w->progress_ms = tsr_monotonic_ms();
        pthread_rwlock_unlock(&w->c->lock);
}

/* Lists the resource into a fresh map and swaps it in. */
static int relist(struct watcher *w, bool after_gone, struct tsr_kube_result *res,
                  struct tsr_diag *diag)
{
        struct tsr_kube_cache *c = w->c;
        struct tsr_kube_list_opts lo = {
            .field_selector = selector_of(w), .limit = c->opts.page_limit, .cancel = &w->cancel};
        json_t *list, *map, *item, *old;
        const char *rv;
        char key[KEY_MAX];
        bool first;
        size_t i;
        int rc;

        rc = tsr_kube_client_list_all(c->client, w->path, &lo, &list, res, diag);
        if (rc)
                return rc;
        rv = meta_str(list, "resourceVersion");
        if (!rv || !*rv || strlen(rv) >= sizeof(w->rv)) {
                json_decref(list);
                return tsr_diag_set(diag, TSR_EPARSE, "list %s: no usable resourceVersion",
                                    resources[w->r].name);
        }
        map = json_object();
        if (!map) {
                json_decref(list);
                return tsr_diag_set(diag, TSR_ENOMEM, "list %s: out of memory",
                                    resources[w->r].name);
        }
        json_array_foreach(json_object_get(list, "items"), i, item)
        {
                if (key_of(w, meta_str(item, "namespace"), meta_str(item, "name"), key))
                        continue;
                if (json_object_set(map, key, item)) {
                        json_decref(map);
                        json_decref(list);
                        return tsr_diag_set(diag, TSR_ENOMEM, "list %s: out of memory",
                                            resources[w->r].name);
                }
        }

        pthread_rwlock_wrlock(&c->lock);
        old = w->objects;
        w->objects = map;
        w->generation++;
        set_rv(w, rv);
        first = !w->st.lists;
        w->st.lists++;
        if (after_gone)
                w->st.relists_gone++;
        w->st.synced = true;
        w->st.stale = false;
        w->stale_since_ms = 0;
        w->progress_ms = tsr_monotonic_ms();
        w->st.objects = json_object_size(map);
        pthread_rwlock_unlock(&c->lock);
        json_decref(list);

        pthread_mutex_lock(&c->mu);
        c->synced |= 1u << w->r;
        c->stale &= ~(1u << w->r);
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->mu);
        /* Only this thread writes the map, so comparing it without the lock is safe. */
        if (first || !json_equal(old, map))
                notify(w);
        json_decref(old);
        return 0;
}

/*
 * The API server does not serve the resource (its CRD is not installed: the first list is a
 * 404). The cache holds none of it, which is the truth, and counts as synced so that a process
 * needing other kinds is not held unready; the watcher keeps listing after a backoff, so a CRD
 * installed later is picked up. Only before the first list succeeds: a 404 later (an API server
 * restarting before its CRD handlers are up) keeps what was held rather than empty it.
 */
static void mark_not_served(struct watcher *w)
{
        struct tsr_kube_cache *c = w->c;
        json_t *empty = json_object(), *old;

        if (!empty)
                return;
        pthread_rwlock_wrlock(&c->lock);
        old = w->objects;
        w->objects = empty;
        w->generation++;
        w->st.synced = true;
        w->st.objects = 0;
        pthread_rwlock_unlock(&c->lock);
        json_decref(old);

        pthread_mutex_lock(&c->mu);
        c->synced |= 1u << w->r;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->mu);
}

/* ---- the watch ---------------------------------------------------------------------------- */

enum { STOP_GONE = 1, STOP_ERROR = 2 };

struct watch_ctx {
        struct watcher *w;
        struct tsr_diag diag; /* why STOP_ERROR */
};

static int on_event(void *arg, const struct tsr_kube_event *ev)
{
        struct watch_ctx *x = arg;
        struct watcher *w = x->w;
        char key[KEY_MAX];
        bool changed = false;
        int rc = 0;

        if (ev->type == TSR_KUBE_ERROR) {
                if (ev->code == 410)
                        return STOP_GONE;
                tsr_diag_set(&x->diag, TSR_EIO, "watch %s: ERROR event %d %s: %.200s",
                             resources[w->r].name, ev->code, ev->reason, ev->message);
                return STOP_ERROR;
        }
        pthread_rwlock_wrlock(&w->c->lock);
        switch (ev->type) {
        case TSR_KUBE_ADDED:
        case TSR_KUBE_MODIFIED:
                if (!key_of(w, ev->ns, ev->name, key)) {
                        if (json_object_set(w->objects, key, ev->object))
                                rc = STOP_ERROR;
                        changed = !rc;
                        w->st.events++;
                }
                break;
        case TSR_KUBE_DELETED:
                if (!key_of(w, ev->ns, ev->name, key)) {
                        changed = json_object_del(w->objects, key) == 0;
                        w->st.events++;
                }
                break;
        case TSR_KUBE_BOOKMARK:
                w->st.bookmarks++;
                break;
        default:
                break;
        }
        if (!rc) {
                set_rv(w, ev->resource_version);
                w->progress_ms = tsr_monotonic_ms();
                w->failing_since_ms = 0; /* an event or bookmark: the watch works */
        }
        w->st.objects = json_object_size(w->objects);
        w->generation += changed;
        pthread_rwlock_unlock(&w->c->lock);
        if (rc)
                tsr_diag_set(&x->diag, TSR_ENOMEM, "watch %s: out of memory", resources[w->r].name);
        if (!rc && w->stale_from_stall) { /* the watch delivers again */
                w->stale_from_stall = false;
                set_stale(w, false);
        }
        if (changed)
                notify(w);
        return rc;
}

static void *watcher_main(void *arg)
{
        struct watcher *w = arg;
        struct tsr_kube_cache *c = w->c;
        unsigned failures = 0, gone_run = 0; /* 410s with no event between them */
        bool need_list = true, gone = false;

        while (!stopping(c)) {
                struct tsr_kube_watch_opts wo = {0};
                struct tsr_kube_result res = {0};
                struct watch_ctx x = {w, {0}};
                struct tsr_diag diag;
                int64_t t0;
                int rc;

                tsr_diag_clear(&diag);
                if (need_list) {
                        rc = relist(w, gone, &res, &diag);
                        if (stopping(c))
                                break;
                        if (rc) {
                                if (rc == TSR_ENOTFOUND && !w->st.lists)
                                        mark_not_served(w);
                                else if (refused(&res) && w->st.lists)
                                        set_stale(w, true);
                                note_error(w, &diag, "list again after a backoff",
                                           res.http == 404 ? TSR_LOG_DEBUG : TSR_LOG_WARN);
                                /* Not served (its CRD not installed): the truth is "none". */
                                if (res.http == 404)
                                        healthy(w);
                                backoff(w, ++failures, res.retry_after_s);
                                continue;
                        }
                        need_list = gone = false;
                        failures = 0;
                }

                wo.field_selector = selector_of(w);
                wo.resource_version = w->rv;
                wo.timeout_s = c->opts.watch_timeout_s;
                wo.bookmarks = true;
                wo.stall_s = c->opts.watch_stall_s;
                wo.cancel = &w->cancel;
                pthread_rwlock_wrlock(&c->lock);
                w->st.watches++;
                pthread_rwlock_unlock(&c->lock);
                t0 = tsr_monotonic_ms();
                watching(w, t0);
                rc = tsr_kube_client_watch(c->client, w->path, &wo, on_event, &x, &res, &diag);
                if (stopping(c))
                        break;
                watching(w, 0);
                /* Events, or a watch that lasted: the failing run is over. */
                if (res.events || (rc == 0 && tsr_monotonic_ms() - t0 >= SHORT_WATCH_MS))
                        healthy(w);
                if (res.events)
                        failures = gone_run = 0;
                if (res.http == 200 && !res.stalled)
                        progressed(w); /* the server took the watch */
                /* Silence past the bookmarks' pace: a half-open connection or a wedged server. */
                if (res.stalled) {
                        pthread_rwlock_wrlock(&c->lock);
                        w->st.stalls++;
                        w->st.watch_failures++;
                        pthread_rwlock_unlock(&c->lock);
                        set_stale(w, true);
                        w->stale_from_stall = true;
                        note_error(w, &diag, "watch again from the resume point", TSR_LOG_WARN);
                        continue; /* the stall itself waited stall_s */
                }
                if (rc == STOP_GONE || res.http == 410) {
                        set_stale(w, true);
                        need_list = gone = true;
                        tsr_diag_set(&diag, TSR_EIO,
                                     "watch %s: 410 Gone (its resourceVersion %s is compacted)",
                                     resources[w->r].name, w->rv);
                        /* Twice in a row with nothing between: the server is not settling. */
                        if (gone_run++) {
                                note_error(w, &diag, "list again after a backoff", TSR_LOG_WARN);
                                backoff(w, gone_run - 1, res.retry_after_s);
                        } else {
                                note_error(w, &diag, "list again", TSR_LOG_INFO);
                        }
                        continue;
                }
                /* The collection went away (its CRD deleted): list again, backing off. */
                if (res.http == 404)
                        need_list = true;
                /* Credentials refused: what happened meanwhile is seen by listing again. */
                if (refused(&res)) {
                        set_stale(w, true);
                        need_list = true;
                }
                if (rc == 0 && (res.events || tsr_monotonic_ms() - t0 >= SHORT_WATCH_MS))
                        continue;
                if (rc == STOP_ERROR)
                        diag = x.diag;
                else if (rc == 0)
                        tsr_diag_set(&diag, TSR_EIO, "watch %s: ended at once without events",
                                     resources[w->r].name);
                note_error(w, &diag, "watch again after a backoff", TSR_LOG_WARN);
                if (res.http == 404)
                        healthy(w);
                pthread_rwlock_wrlock(&c->lock);
                w->st.watch_failures++;
                pthread_rwlock_unlock(&c->lock);
                backoff(w, ++failures, res.retry_after_s);
        }
        return NULL;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* Checks what opts asks to watch; 0 or TSR_EINVAL with diag. */
static int check_opts(const struct tsr_kube_cache_opts *o, struct tsr_diag *diag)
{
        const unsigned all = (1u << TSR_KUBE_CACHE_N_RESOURCES) - 1;
        const char *node = o->pods_node;

        if (o->resources & ~all)
                return tsr_diag_set(diag, TSR_EINVAL, "kube cache: unknown resources in mask %#x",
                                    o->resources);
        if (strlen(o->settings_namespace) > 63)
                return tsr_diag_set(diag, TSR_EINVAL, "kube cache: namespace %.80s is too long",
                                    o->settings_namespace);
        if (!(o->resources & TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_PODS)))
                return 0;
        if (!node || !*node || strlen(node) > NODE_NAME_MAX || strpbrk(node, ",=\\/"))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "kube cache: watching pods needs a node name, not \"%.80s\"",
                                    node ? node : "");
        return 0;
}

static void stop_and_join(struct tsr_kube_cache *c)
{
        pthread_mutex_lock(&c->mu);
        atomic_store(&c->stop, true);
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->mu);
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++)
                if (c->w[r].started)
                        tsr_kube_cancel_fire(&c->w[r].cancel);
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                if (c->w[r].started)
                        pthread_join(c->w[r].thread, NULL);
                c->w[r].started = false;
        }
}

void tsr_kube_cache_free(struct tsr_kube_cache *c)
{
        if (!c)
                return;
        stop_and_join(c);
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                json_decref(c->w[r].objects);
                tsr_kube_cancel_release(&c->w[r].cancel);
        }
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->mu);
        pthread_rwlock_destroy(&c->lock);
        free(c);
}

int tsr_kube_cache_new_opts(struct tsr_kube_client *client, const struct tsr_kube_cache_opts *opts,
                            struct tsr_kube_cache **out, struct tsr_diag *diag)
{
        struct tsr_kube_cache *c = calloc(1, sizeof(*c));
        pthread_condattr_t ca;
        int r, cancels = 0;

        if (!c)
                return tsr_diag_set(diag, TSR_ENOMEM, "kube cache: out of memory");
        c->client = client;
        if (opts)
                c->opts = *opts;
        if (!c->opts.backoff_initial_ms)
                c->opts.backoff_initial_ms = DEFAULT_BACKOFF_INITIAL_MS;
        if (!c->opts.backoff_max_ms)
                c->opts.backoff_max_ms = DEFAULT_BACKOFF_MAX_MS;
        if (c->opts.backoff_max_ms < c->opts.backoff_initial_ms)
                c->opts.backoff_max_ms = c->opts.backoff_initial_ms;
        if (c->opts.watch_stall_s <= 0)
                c->opts.watch_stall_s = DEFAULT_WATCH_STALL_S;
        if (c->opts.watch_timeout_s <= 0)
                c->opts.watch_timeout_s = DEFAULT_WATCH_TIMEOUT_S;
        if (c->opts.page_limit <= 0)
                c->opts.page_limit = DEFAULT_PAGE_LIMIT;
        if (!c->opts.settings_namespace || !*c->opts.settings_namespace)
                c->opts.settings_namespace = DEFAULT_SETTINGS_NAMESPACE;
        if (!c->opts.resources)
                c->opts.resources = TSR_KUBE_CACHE_WEBHOOK_RESOURCES;
        r = check_opts(&c->opts, diag);
        if (r) {
                free(c);
                return r;
        }
        c->watched = c->opts.resources;
        atomic_init(&c->stop, false);
        if (pthread_rwlock_init(&c->lock, NULL)) {
                free(c);
                return tsr_diag_set(diag, TSR_ENOMEM, "kube cache: out of memory");
        }
        if (pthread_mutex_init(&c->mu, NULL)) {
                pthread_rwlock_destroy(&c->lock);
                free(c);
                return tsr_diag_set(diag, TSR_ENOMEM, "kube cache: out of memory");
        }
        if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
            pthread_cond_init(&c->cond, &ca)) {
                pthread_mutex_destroy(&c->mu);
                pthread_rwlock_destroy(&c->lock);
                free(c);
                return tsr_diag_set(diag, TSR_ENOMEM, "kube cache: out of memory");
        }
        pthread_condattr_destroy(&ca);
        for (r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                struct watcher *w = &c->w[r];

                w->c = c;
                w->r = (enum tsr_kube_cache_resource)r;
                w->st.optional = resources[r].optional;
                if (strstr(resources[r].path, "%s"))
                        snprintf(w->path, sizeof(w->path), resources[r].path,
                                 c->opts.settings_namespace);
                else
                        snprintf(w->path, sizeof(w->path), "%s", resources[r].path);
                if (r == TSR_KUBE_CACHE_PODS && (c->watched & TSR_KUBE_CACHE_BIT(r)))
                        snprintf(w->field_selector, sizeof(w->field_selector), NODE_SELECTOR "%s",
                                 c->opts.pods_node);
                w->rng = ((uint64_t)tsr_monotonic_ms() << 8) ^
                         (0x9E3779B97F4A7C15ull * (uint64_t)(r + 1));
                w->log = (struct tsr_log_limit)TSR_LOG_LIMIT_INIT(LOG_EVERY_MS);
                w->objects = json_object();
                if (!w->objects || tsr_kube_cancel_init(&w->cancel))
                        goto nomem;
                cancels++;
        }
        /* Published before the first watcher starts: a change callback may reach the cache
         * through the pointer its caller stored from *out. */
        *out = c;
        for (r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                if (!(c->watched & TSR_KUBE_CACHE_BIT(r)))
                        continue;
                if (pthread_create(&c->w[r].thread, NULL, watcher_main, &c->w[r])) {
                        stop_and_join(c);
                        *out = NULL;
                        tsr_kube_cache_free(c);
                        return tsr_diag_set(diag, TSR_EIO,
                                            "kube cache: cannot start the %s watcher thread",
                                            resources[r].name);
                }
                c->w[r].started = true;
        }
        return 0;

nomem:
        for (r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                json_decref(c->w[r].objects);
                if (r < cancels)
                        tsr_kube_cancel_release(&c->w[r].cancel);
        }
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->mu);
        pthread_rwlock_destroy(&c->lock);
        free(c);
        return tsr_diag_set(diag, TSR_ENOMEM, "kube cache: out of memory");
}

int tsr_kube_cache_new(struct tsr_kube_client *client, struct tsr_kube_cache **out,
                       struct tsr_diag *diag)
{
        return tsr_kube_cache_new_opts(client, NULL, out, diag);
}

/* ---- readers ------------------------------------------------------------------------------ */

/* The synced bits every watched required (not optional) resource must have. */
static unsigned required_mask(const struct tsr_kube_cache *c)
{
        unsigned m = 0;

        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++)
                if (!resources[r].optional)
                        m |= 1u << r;
        return m & c->watched;
}

bool tsr_kube_cache_synced(struct tsr_kube_cache *c)
{
        const unsigned need = required_mask(c);
        bool all;

        pthread_mutex_lock(&c->mu);
        all = (c->synced & need) == need;
        pthread_mutex_unlock(&c->mu);
        return all;
}

bool tsr_kube_cache_current(struct tsr_kube_cache *c)
{
        const unsigned need = required_mask(c);
        bool all;

        pthread_mutex_lock(&c->mu);
        all = (c->synced & need) == need && !(c->stale & need);
        pthread_mutex_unlock(&c->mu);
        return all;
}

bool tsr_kube_cache_wait_synced(struct tsr_kube_cache *c, unsigned timeout_ms)
{
        struct timespec until = deadline_in(timeout_ms);
        const unsigned need = required_mask(c);
        bool done;

        pthread_mutex_lock(&c->mu);
        while ((c->synced & need) != need && !atomic_load(&c->stop))
                if (pthread_cond_timedwait(&c->cond, &c->mu, &until))
                        break;
        done = (c->synced & need) == need;
        pthread_mutex_unlock(&c->mu);
        return done;
}

static json_t *lookup(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r, const char *ns,
                      const char *name)
{
        char key[KEY_MAX];
        json_t *v;

        if (!name || key_of(&c->w[r], ns, name, key))
                return NULL;
        pthread_rwlock_rdlock(&c->lock);
        v = json_object_get(c->w[r].objects, key);
        v = v ? tsr_json_copy(v) : NULL;
        pthread_rwlock_unlock(&c->lock);
        return v;
}

json_t *tsr_kube_cache_instancetype(struct tsr_kube_cache *c, const char *name)
{
        return lookup(c, TSR_KUBE_CACHE_INSTANCETYPES, NULL, name);
}

json_t *tsr_kube_cache_localqueue(struct tsr_kube_cache *c, const char *ns, const char *name)
{
        if (!ns)
                return NULL;
        return lookup(c, TSR_KUBE_CACHE_LOCALQUEUES, ns, name);
}

json_t *tsr_kube_cache_clusterqueue(struct tsr_kube_cache *c, const char *name)
{
        return lookup(c, TSR_KUBE_CACHE_CLUSTERQUEUES, NULL, name);
}

json_t *tsr_kube_cache_kvcache_binding(struct tsr_kube_cache *c, const char *ns, const char *name)
{
        if (!ns)
                return NULL;
        return lookup(c, TSR_KUBE_CACHE_KVCACHEPOOLBINDINGS, ns, name);
}

json_t *tsr_kube_cache_kvcache_pool(struct tsr_kube_cache *c, const char *name)
{
        return lookup(c, TSR_KUBE_CACHE_KVCACHEPOOLS, NULL, name);
}

json_t *tsr_kube_cache_kvcache_backend(struct tsr_kube_cache *c, const char *name)
{
        return lookup(c, TSR_KUBE_CACHE_KVCACHEBACKENDS, NULL, name);
}

json_t *tsr_kube_cache_setting(struct tsr_kube_cache *c, const char *ns, const char *name)
{
        if (!ns)
                return NULL;
        return lookup(c, TSR_KUBE_CACHE_SETTINGS, ns, name);
}

void tsr_kube_cache_settings(struct tsr_kube_cache *c, const char *ns,
                             struct tsr_settings *settings)
{
        for (int s = 0; s < TSR_N_SETTINGS; s++) {
                json_t *obj = tsr_kube_cache_setting(c, ns, tsr_setting_name((enum tsr_setting)s));
                const char *v =
                    json_string_value(json_object_get(json_object_get(obj, "spec"), "value"));
                struct tsr_diag diag;

                if (v)
                        tsr_setting_parse((enum tsr_setting)s, v, &settings->value[s], &diag);
                json_decref(obj);
        }
}

json_t *tsr_kube_cache_pod(struct tsr_kube_cache *c, const char *ns, const char *name)
{
        if (!ns)
                return NULL;
        return lookup(c, TSR_KUBE_CACHE_PODS, ns, name);
}

json_t *tsr_kube_cache_pod_by_uid(struct tsr_kube_cache *c, const char *uid)
{
        json_t *found = NULL, *obj;
        const char *key;

        if (!uid)
                return NULL;
        pthread_rwlock_rdlock(&c->lock);
        json_object_foreach(c->w[TSR_KUBE_CACHE_PODS].objects, key, obj)
        {
                const char *v = meta_str(obj, "uid");

                if (v && !strcmp(v, uid)) {
                        found = tsr_json_copy(obj);
                        break;
                }
        }
        pthread_rwlock_unlock(&c->lock);
        return found;
}

json_t *tsr_kube_cache_get(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r, const char *ns,
                           const char *name)
{
        if ((unsigned)r >= TSR_KUBE_CACHE_N_RESOURCES || (resources[r].namespaced && !ns))
                return NULL;
        return lookup(c, r, ns, name);
}

json_t *tsr_kube_cache_list(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r)
{
        json_t *out = json_array(), *obj;
        const char *key;

        if (!out || (unsigned)r >= TSR_KUBE_CACHE_N_RESOURCES)
                return out;
        pthread_rwlock_rdlock(&c->lock);
        json_object_foreach(c->w[r].objects, key, obj)
        {
                if (json_array_append_new(out, tsr_json_copy(obj))) {
                        json_decref(out);
                        out = NULL;
                        break;
                }
        }
        pthread_rwlock_unlock(&c->lock);
        return out;
}

json_t *tsr_kube_cache_pods(struct tsr_kube_cache *c)
{
        return tsr_kube_cache_list(c, TSR_KUBE_CACHE_PODS);
}

unsigned long tsr_kube_cache_generation(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r)
{
        unsigned long g;

        if ((unsigned)r >= TSR_KUBE_CACHE_N_RESOURCES)
                return 0;
        pthread_rwlock_rdlock(&c->lock);
        g = c->w[r].generation;
        pthread_rwlock_unlock(&c->lock);
        return g;
}

/* Whether a and b carry the same metadata.resourceVersion (a missing one never matches). */
static bool same_version(json_t *a, json_t *b)
{
        const char *va = meta_str(a, "resourceVersion"), *vb = meta_str(b, "resourceVersion");

        return va && vb && *va && !strcmp(va, vb);
}

int tsr_kube_cache_mirror(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r, json_t *mirror,
                          json_t *changed)
{
        json_t *obj;
        const char *key;
        void *it;
        int rc = 0;

        if ((unsigned)r >= TSR_KUBE_CACHE_N_RESOURCES || !json_is_object(mirror) ||
            !json_is_array(changed))
                return TSR_EINVAL;
        pthread_rwlock_rdlock(&c->lock);
        json_object_foreach(c->w[r].objects, key, obj)
        {
                json_t *m = json_object_get(mirror, key), *copy;

                if (m && same_version(m, obj))
                        continue;
                copy = tsr_json_copy(obj);
                if (!copy || json_object_set_new(mirror, key, copy) ||
                    json_array_append_new(changed, json_string(key))) {
                        rc = TSR_ENOMEM;
                        break;
                }
        }
        json_object_foreach_safe(mirror, it, key, obj)
        {
                if (rc || json_object_get(c->w[r].objects, key))
                        continue;
                if (json_array_append_new(changed, json_string(key)))
                        rc = TSR_ENOMEM;
                else
                        json_object_del(mirror, key);
        }
        pthread_rwlock_unlock(&c->lock);
        return rc;
}

const char *tsr_kube_cache_resource_name(enum tsr_kube_cache_resource r)
{
        return (unsigned)r < TSR_KUBE_CACHE_N_RESOURCES ? resources[r].name : "";
}

json_t *tsr_kube_cache_instancetype_by_entrance(struct tsr_kube_cache *c, const char *lq,
                                                size_t *matches)
{
        json_t *found;
        size_t n;

        pthread_rwlock_rdlock(&c->lock);
        found = tsr_instancetype_entrance_scan(c->w[TSR_KUBE_CACHE_INSTANCETYPES].objects, lq, &n);
        found = n == 1 ? tsr_json_copy(found) : NULL;
        pthread_rwlock_unlock(&c->lock);
        if (matches)
                *matches = n;
        return found;
}

bool tsr_kube_cache_instancetype_revision_by_entrance(struct tsr_kube_cache *c, const char *lq,
                                                      char *rev, size_t len)
{
        json_t *found;
        bool ok;
        size_t n;

        pthread_rwlock_rdlock(&c->lock);
        found = tsr_instancetype_entrance_scan(c->w[TSR_KUBE_CACHE_INSTANCETYPES].objects, lq, &n);
        ok = n == 1 && tsr_object_revision(found, rev, len);
        pthread_rwlock_unlock(&c->lock);
        return ok;
}

/*
 * How long w's lists and watches have kept failing (c->lock held): from the first failure of the
 * run, until an event arrives or a watch lasts; a watch in flight for over SHORT_WATCH_MS counts
 * as working already (a quiet resource's watch may bring nothing for minutes).
 */
static double seconds_failing(const struct watcher *w)
{
        int64_t now = tsr_monotonic_ms();

        if (!w->failing_since_ms ||
            (w->watch_began_ms && now - w->watch_began_ms >= SHORT_WATCH_MS))
                return 0;
        return (double)(now - w->failing_since_ms) / 1e3;
}

void tsr_kube_cache_stats(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r,
                          struct tsr_kube_cache_stats *out)
{
        if ((unsigned)r >= TSR_KUBE_CACHE_N_RESOURCES) {
                memset(out, 0, sizeof(*out));
                return;
        }
        pthread_rwlock_rdlock(&c->lock);
        *out = c->w[r].st;
        out->seconds_since_progress =
            c->w[r].progress_ms ? (double)(tsr_monotonic_ms() - c->w[r].progress_ms) / 1e3 : -1;
        out->seconds_failing = seconds_failing(&c->w[r]);
        out->seconds_stale = c->w[r].stale_since_ms
                                 ? (double)(tsr_monotonic_ms() - c->w[r].stale_since_ms) / 1e3
                                 : 0;
        pthread_rwlock_unlock(&c->lock);
}

int tsr_kube_cache_render_metrics(struct tsr_kube_cache *c, struct tsr_buf *out)
{
        /* Each series reads one field of struct tsr_kube_cache_stats: a counter (unsigned long)
         * or a gauge of seconds (double). */
        static const struct {
                const char *name, *type, *help;
                size_t field;
        } series[] = {
            {"lists_total", "counter", "Completed lists.",
             offsetof(struct tsr_kube_cache_stats, lists)},
            {"relists_gone_total", "counter", "Lists caused by a 410 Gone.",
             offsetof(struct tsr_kube_cache_stats, relists_gone)},
            {"requests_total", "counter", "Watch requests started.",
             offsetof(struct tsr_kube_cache_stats, watches)},
            {"failures_total", "counter", "Watches ended by an error.",
             offsetof(struct tsr_kube_cache_stats, watch_failures)},
            {"events_total", "counter", "Watch events applied.",
             offsetof(struct tsr_kube_cache_stats, events)},
            {"stalls_total", "counter",
             "Watches ended because nothing came (no event, no bookmark) for the stall limit.",
             offsetof(struct tsr_kube_cache_stats, stalls)},
            {"stale_seconds", "gauge",
             "How long it has been stale: a 410, 401 or 403 not yet listed past, or a stalled "
             "watch not yet delivering again (0: current).",
             offsetof(struct tsr_kube_cache_stats, seconds_stale)},
            {"failing_seconds", "gauge",
             "How long its lists and watches have kept failing (0: healthy).",
             offsetof(struct tsr_kube_cache_stats, seconds_failing)},
            {"progress_age_seconds", "gauge",
             "Seconds since the last list, event, bookmark or accepted watch (-1: never).",
             offsetof(struct tsr_kube_cache_stats, seconds_since_progress)},
        };
        int rc = 0;

        for (size_t k = 0; !rc && k < sizeof(series) / sizeof(series[0]); k++) {
                bool counter = !strcmp(series[k].type, "counter");

                rc = tsr_buf_addf(
                    out, "# HELP tessera_kube_watch_%s %s\n# TYPE tessera_kube_watch_%s %s\n",
                    series[k].name, series[k].help, series[k].name, series[k].type);
                for (int r = 0; !rc && r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                        struct tsr_kube_cache_stats st;
                        const char *at = (const char *)&st + series[k].field;
                        unsigned long n;
                        double v;

                        if (!(c->watched & TSR_KUBE_CACHE_BIT(r)))
                                continue;
                        tsr_kube_cache_stats(c, (enum tsr_kube_cache_resource)r, &st);
                        if (counter) {
                                memcpy(&n, at, sizeof(n));
                                rc = tsr_buf_addf(out,
                                                  "tessera_kube_watch_%s{resource=\"%s\"} %lu\n",
                                                  series[k].name, resources[r].name, n);
                        } else {
                                memcpy(&v, at, sizeof(v));
                                rc = tsr_buf_addf(out,
                                                  "tessera_kube_watch_%s{resource=\"%s\"} %.3f\n",
                                                  series[k].name, resources[r].name, v);
                        }
                }
        }
        return rc ? TSR_ENOMEM : 0;
}
