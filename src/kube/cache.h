/*
 * cache.h - a typed, watch-fed cache of the API server objects the webhook, the controller and
 * the device manager read: worker.gpustack.ai/v1alpha1 InstanceTypes (cluster-scoped),
 * KVCachePoolBindings (namespaced), KVCachePools and KVCacheBackends (cluster-scoped),
 * kueue.x-k8s.io/v1beta2 LocalQueues (namespaced) and ClusterQueues (cluster-scoped), the
 * operator's runtime gpustack.ai/v1 Settings (listed in the operator's namespace only; an
 * aggregated API, often not served), core v1 Pods bound to one node (a node agent's view:
 * fieldSelector spec.nodeName=<node>, every namespace), and for the controller core v1 Nodes and
 * Namespaces, worker.gpustack.ai/v1alpha1 Devices and Instances, and kueue.x-k8s.io/v1beta2
 * Workloads, ResourceFlavors, Topologies and AdmissionChecks. The kinds are rows of one table
 * (cache.c); tsr_kube_cache_get and tsr_kube_cache_list read any of them.
 *
 * A cache watches the resources of its mask (tsr_kube_cache_opts.resources); the default is the
 * webhook's set, TSR_KUBE_CACHE_WEBHOOK_RESOURCES (everything but the Pods). A resource outside
 * the mask has no watcher: it holds nothing, its lookups find nothing, and it does not count for
 * tsr_kube_cache_synced.
 *
 * One watcher thread per resource keeps it current: list, then watch from the list's
 * resourceVersion with bookmarks; a 410 Gone (or an ERROR event carrying one) re-lists; a dropped
 * or failed watch retries with capped exponential backoff; the token file is re-read on each
 * connection. A resource the API server does not serve (a 404 on its first list: its CRD is not
 * installed) counts as synced and empty, and is listed again after a backoff; a 404 on a watch
 * sends the watcher back to list, and a 404 on a later list keeps what it held. A watcher sent
 * back to list by a 410 (its history is gone: what it missed is unknown) or by a 401 or 403 (its
 * credentials were refused: it has seen nothing since) is stale until that list completes: it
 * keeps serving what it held (tsr_kube_cache_synced stays true), but tsr_kube_cache_current is
 * false, for a caller that must not act on a view known to be incomplete. A watch that brings
 * nothing for opts.watch_stall_s (no event and no BOOKMARK: the API server's watch cache sends
 * one a minute, so silence that long is a half-open connection or a wedged server or proxy) is
 * cut, logged and counted as a stall and resumed at once from the resume point; the resource is
 * stale from the stall until its next event, bookmark or list. Readers take a
 * shared lock; a reader receives its own reference to an object, valid after the cache moves on
 * (objects are never modified in place, only replaced). An optional change callback
 * (opts.on_change) runs on the resource's watcher thread, outside every lock of the cache, after
 * the resource's first list, after each later list that changed what it holds and after each
 * ADDED, MODIFIED or DELETED event that changed it; callbacks of one resource never overlap,
 * those of different resources may run concurrently. *out is set before the first watcher starts,
 * so a callback may use the cache through the pointer its caller stored there.
 *
 * Ownership: tsr_kube_cache_new returns a new cache (stop and free with tsr_kube_cache_free). Every
 * lookup returns a new jansson reference (json_decref) or NULL. Thread-safe.
 */
#ifndef TSR_KUBE_CACHE_H
#define TSR_KUBE_CACHE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct tsr_diag;
struct tsr_settings;
struct tsr_kube_client;
struct tsr_buf;
struct tsr_kube_cache;

/*
 * Starts the watchers over client (borrowed; it must outlive the cache). Returns 0 and *out, or
 * TSR_ENOMEM / TSR_EIO (a thread could not start) with diag.
 */
int tsr_kube_cache_new(struct tsr_kube_client *client, struct tsr_kube_cache **out,
                       struct tsr_diag *diag);

/* Stops the watchers (joins their threads) and frees everything. c may be NULL. */
void tsr_kube_cache_free(struct tsr_kube_cache *c);

/*
 * True once every watched resource but the optional Settings has completed its first list (what
 * readiness reports). The Settings are served by the operator's aggregated API, down whenever the
 * operator is; until they list, the Setting lookups find nothing and callers use their started-with
 * values.
 */
bool tsr_kube_cache_synced(struct tsr_kube_cache *c);

/*
 * True when tsr_kube_cache_synced is and no watched required resource is stale (sent back to
 * list by a 410, 401 or 403 and not listed since, or stalled and not delivering since): what the
 * controller writes from.
 */
bool tsr_kube_cache_current(struct tsr_kube_cache *c);

/* The InstanceType named name, or NULL. */
json_t *tsr_kube_cache_instancetype(struct tsr_kube_cache *c, const char *name);

/*
 * The one InstanceType whose label schedule.gpustack.ai/queue-entrance equals lq, or NULL; *matches
 * (may be NULL) receives how many carry it (the webhook refuses anything but exactly one).
 */
json_t *tsr_kube_cache_instancetype_by_entrance(struct tsr_kube_cache *c, const char *lq,
                                                size_t *matches);

/*
 * The revision (codec/object_revision.h) of that one InstanceType into rev (len bytes), without
 * copying it: true when exactly one carries the label and its revision fits.
 */
bool tsr_kube_cache_instancetype_revision_by_entrance(struct tsr_kube_cache *c, const char *lq,
                                                      char *rev, size_t len);

/* The LocalQueue ns/name, or NULL. */
json_t *tsr_kube_cache_localqueue(struct tsr_kube_cache *c, const char *ns, const char *name);

/* The ClusterQueue named name, or NULL. */
json_t *tsr_kube_cache_clusterqueue(struct tsr_kube_cache *c, const char *name);

/* The KVCachePoolBinding ns/name, or NULL. */
json_t *tsr_kube_cache_kvcache_binding(struct tsr_kube_cache *c, const char *ns, const char *name);

/* The KVCachePool named name, or NULL. */
json_t *tsr_kube_cache_kvcache_pool(struct tsr_kube_cache *c, const char *name);

/* The KVCacheBackend named name, or NULL. */
json_t *tsr_kube_cache_kvcache_backend(struct tsr_kube_cache *c, const char *name);

/* The Setting ns/name, or NULL. */
json_t *tsr_kube_cache_setting(struct tsr_kube_cache *c, const char *ns, const char *name);

/*
 * Overrides each Setting in *settings (the started-with values) with its runtime Setting object
 * in namespace ns (spec.value), when the cache holds one and its value parses; otherwise the
 * value in *settings stays.
 */
void tsr_kube_cache_settings(struct tsr_kube_cache *c, const char *ns,
                             struct tsr_settings *settings);

/* The Pod (of the watched node) ns/name, or NULL. */
json_t *tsr_kube_cache_pod(struct tsr_kube_cache *c, const char *ns, const char *name);

/* The Pod (of the watched node) whose metadata.uid is uid, or NULL. A scan: O(pods held). */
json_t *tsr_kube_cache_pod_by_uid(struct tsr_kube_cache *c, const char *uid);

/*
 * A new JSON array (json_decref) of every Pod held, one consistent snapshot, in no particular
 * order; an empty array when Pods are not watched; NULL when out of memory.
 */
json_t *tsr_kube_cache_pods(struct tsr_kube_cache *c);

/* ---- additions: tuning, readiness wait and counters (tests, metrics) ----------------------- */

/* The resources, for the mask, the change callback and tsr_kube_cache_stats. */
enum tsr_kube_cache_resource {
        TSR_KUBE_CACHE_INSTANCETYPES,
        TSR_KUBE_CACHE_LOCALQUEUES,
        TSR_KUBE_CACHE_CLUSTERQUEUES,
        TSR_KUBE_CACHE_KVCACHEPOOLBINDINGS,
        TSR_KUBE_CACHE_KVCACHEPOOLS,
        TSR_KUBE_CACHE_KVCACHEBACKENDS,
        TSR_KUBE_CACHE_SETTINGS,
        TSR_KUBE_CACHE_PODS, /* core v1 Pods with spec.nodeName = opts.pods_node */
        /* the controller's: read through tsr_kube_cache_get / tsr_kube_cache_list */
        TSR_KUBE_CACHE_NODES,           /* core v1 Nodes */
        TSR_KUBE_CACHE_DEVICES,         /* worker.gpustack.ai/v1alpha1 Devices (cluster-scoped) */
        TSR_KUBE_CACHE_NAMESPACES,      /* core v1 Namespaces */
        TSR_KUBE_CACHE_WORKLOADS,       /* kueue.x-k8s.io/v1beta2 Workloads (namespaced) */
        TSR_KUBE_CACHE_RESOURCEFLAVORS, /* kueue.x-k8s.io/v1beta2, cluster-scoped */
        TSR_KUBE_CACHE_TOPOLOGIES,      /* kueue.x-k8s.io/v1beta2, cluster-scoped */
        TSR_KUBE_CACHE_ADMISSIONCHECKS, /* kueue.x-k8s.io/v1beta2, cluster-scoped */
        TSR_KUBE_CACHE_INSTANCES,       /* worker.gpustack.ai/v1alpha1 Instances (namespaced) */
        TSR_KUBE_CACHE_N_RESOURCES,
};

/* The mask bit of resource r. */
#define TSR_KUBE_CACHE_BIT(r) (1u << (r))

/* Every resource the webhook reads: the default mask. */
#define TSR_KUBE_CACHE_WEBHOOK_RESOURCES                                                           \
        (TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_INSTANCETYPES) |                                        \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_LOCALQUEUES) |                                          \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_CLUSTERQUEUES) |                                        \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_KVCACHEPOOLBINDINGS) |                                  \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_KVCACHEPOOLS) |                                         \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_KVCACHEBACKENDS) |                                      \
         TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_SETTINGS))

/*
 * Any resource by kind: the object ns/name of resource r (ns ignored for a cluster-scoped one,
 * required for a namespaced one), or NULL.
 */
json_t *tsr_kube_cache_get(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r, const char *ns,
                           const char *name);

/*
 * A new JSON array (json_decref) of every object of resource r held, one consistent snapshot, in
 * no particular order; empty when r is not watched; NULL when out of memory.
 */
json_t *tsr_kube_cache_list(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r);

/*
 * How many times resource r's objects have changed: every list, every event that changed what it
 * holds, and the emptying of a kind not served. A memo a caller built from what it read after
 * taking the generation stays current while the generation is the same. 0 for an unknown r.
 */
unsigned long tsr_kube_cache_generation(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r);

/*
 * Brings mirror (a caller's JSON object, key -> a copy of an object of r, as this function last
 * left it; empty the first time) up to date with resource r, under one read lock: an object
 * whose metadata.resourceVersion differs from its copy's (or that has none) is copied again, a
 * key the cache no longer holds is removed, and every key set or removed is appended to
 * changed (a caller's JSON array). The key is "ns/name" for a namespaced kind, "name" for a
 * cluster-scoped one. Costs a lookup per object held plus a copy per object changed. Returns 0,
 * TSR_EINVAL (not an object and an array, or an unknown r), or TSR_ENOMEM (mirror then holds
 * part of the update: the caller starts again from an empty one).
 */
int tsr_kube_cache_mirror(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r, json_t *mirror,
                          json_t *changed);

/* The resource's plural name ("instancetypes"). */
const char *tsr_kube_cache_resource_name(enum tsr_kube_cache_resource r);

/*
 * What to watch and how; zero fields take the defaults shown. The n-th consecutive failure waits
 * backoff_initial_ms * 2^(n-1) plus up to half again (jitter), at most backoff_max_ms, or longer
 * when a 429 or 503 said Retry-After (still capped). The strings are read during
 * tsr_kube_cache_new_opts only.
 */
struct tsr_kube_cache_opts {
        unsigned backoff_initial_ms;    /* 500 */
        unsigned backoff_max_ms;        /* 30000 */
        long watch_timeout_s;           /* 300: timeoutSeconds of each watch (the server ends it) */
        long watch_stall_s;             /* 150: a watch that brings nothing (no event, no
                                           bookmark) this long is stalled: cut and resumed */
        long page_limit;                /* 500: list page size */
        const char *settings_namespace; /* "gpustack-system": where the Settings are read */
        unsigned resources;             /* TSR_KUBE_CACHE_BIT mask; 0: the webhook's set */
        const char *pods_node;          /* the node whose Pods are watched; required with PODS */
        /* Called as the file comment says; NULL: none. ctx is passed back, borrowed. */
        void (*on_change)(void *ctx, enum tsr_kube_cache_resource r);
        void *ctx;
};

/*
 * tsr_kube_cache_new with tuning (opts may be NULL: the defaults). Same returns, and TSR_EINVAL
 * for a mask naming no known resource or an unknown one, or Pods without a valid pods_node (a
 * node name: 1 to 253 characters, no ',', '=', '\' or '/').
 */
int tsr_kube_cache_new_opts(struct tsr_kube_client *client, const struct tsr_kube_cache_opts *opts,
                            struct tsr_kube_cache **out, struct tsr_diag *diag);

/* Waits up to timeout_ms for tsr_kube_cache_synced; returns its value then. */
bool tsr_kube_cache_wait_synced(struct tsr_kube_cache *c, unsigned timeout_ms);

/* What one resource's watcher has done so far. */
struct tsr_kube_cache_stats {
        unsigned long lists;           /* completed lists (the first one included) */
        unsigned long relists_gone;    /* lists caused by a 410 (HTTP or ERROR event) */
        unsigned long watches;         /* watch requests started */
        unsigned long watch_failures;  /* watches ended by an error: dropped, 401, 5xx, ERROR */
        unsigned long events;          /* ADDED, MODIFIED and DELETED events applied */
        unsigned long bookmarks;       /* BOOKMARK events */
        unsigned long stalls;          /* watches cut after watch_stall_s of silence */
        size_t objects;                /* objects held now */
        bool synced;                   /* the first list completed */
        bool stale;                    /* a 410, 401 or 403 since the last list (it lists again),
                                          or a stall since the last event, bookmark or list */
        bool optional;                 /* not needed for tsr_kube_cache_synced (the Settings) */
        double seconds_since_progress; /* since the last list, event, bookmark or watch the
                                          server took; -1 before the first list */
        double seconds_failing;        /* how long its lists and watches have kept failing
                                          (410s, refusals, errors), until an event arrives or
                                          a watch lasts a second; 0 while healthy */
        double seconds_stale;      /* how long it has been stale (a stall, or a 410, 401 or 403 its
                                      list has not got past yet); 0 while current */
        char resource_version[64]; /* the resume point: the last list, event or bookmark's */
        char last_error[512];      /* the last failure's message, "" if none yet */
};

/* Copies resource r's counters into *out (a consistent snapshot). */
void tsr_kube_cache_stats(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r,
                          struct tsr_kube_cache_stats *out);

/*
 * Appends, for every watched resource, the watch health in Prometheus text:
 *   tessera_kube_watch_lists_total{resource}           completed lists
 *   tessera_kube_watch_relists_gone_total{resource}    lists caused by a 410
 *   tessera_kube_watch_requests_total{resource}        watch requests started
 *   tessera_kube_watch_failures_total{resource}        watches ended by an error
 *   tessera_kube_watch_events_total{resource}          events applied
 *   tessera_kube_watch_stalls_total{resource}          watches cut after watch_stall_s of silence
 *   tessera_kube_watch_stale_seconds{resource}         how long it has been stale (0: current)
 *   tessera_kube_watch_failing_seconds{resource}       how long it has kept failing (0: healthy)
 *   tessera_kube_watch_progress_age_seconds{resource}  since its last progress (-1: never)
 * 0, or TSR_ENOMEM.
 */
int tsr_kube_cache_render_metrics(struct tsr_kube_cache *c, struct tsr_buf *out);

#endif
