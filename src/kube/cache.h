/*
 * cache.h - a typed, watch-fed cache of the API server objects the webhook (and later the
 * controller and device manager) read: worker.gpustack.ai InstanceTypes (cluster-scoped) and
 * kueue.x-k8s.io/v1beta2 LocalQueues (namespaced) and ClusterQueues (cluster-scoped).
 *
 * One watcher thread per resource keeps it current: list, then watch from the list's
 * resourceVersion with bookmarks; a 410 Gone (or an ERROR event carrying one) re-lists; a dropped
 * or failed watch retries with capped exponential backoff; the token file is re-read on each
 * connection. Readers take a shared lock; a reader receives its own reference to an object, valid
 * after the cache moves on (objects are never modified in place, only replaced).
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
struct tsr_kube_client;
struct tsr_kube_cache;

/*
 * Starts the watchers over client (borrowed; it must outlive the cache). Returns 0 and *out, or
 * TSR_ENOMEM / TSR_EIO (a thread could not start) with diag.
 */
int tsr_kube_cache_new(struct tsr_kube_client *client, struct tsr_kube_cache **out,
                       struct tsr_diag *diag);

/* Stops the watchers (joins their threads) and frees everything. c may be NULL. */
void tsr_kube_cache_free(struct tsr_kube_cache *c);

/* True once every resource has completed its first list (what readiness reports). */
bool tsr_kube_cache_synced(struct tsr_kube_cache *c);

/* The InstanceType named name, or NULL. */
json_t *tsr_kube_cache_instancetype(struct tsr_kube_cache *c, const char *name);

/*
 * The one InstanceType whose label schedule.gpustack.ai/queue-entrance equals lq, or NULL; *matches
 * (may be NULL) receives how many carry it (the webhook refuses anything but exactly one).
 */
json_t *tsr_kube_cache_instancetype_by_entrance(struct tsr_kube_cache *c, const char *lq,
                                                size_t *matches);

/* The LocalQueue ns/name, or NULL. */
json_t *tsr_kube_cache_localqueue(struct tsr_kube_cache *c, const char *ns, const char *name);

/* The ClusterQueue named name, or NULL. */
json_t *tsr_kube_cache_clusterqueue(struct tsr_kube_cache *c, const char *name);

#endif
