/*
 * cache_lookup.h - what `tessera webhook`'s handlers read of the cluster: the kube watch cache
 * (kube/cache.h) behind the handler lookup (handler.h), plus the Settings and the operator's
 * namespace. A Setting is the runtime gpustack.ai/v1 Setting object of that name in the operator's
 * namespace (spec.value) when the API server serves one and its value parses, else the value the
 * process was started with (GPUSTACK_* environment, --setting). Also the server's readiness (the
 * cache has completed its first list of every resource and none is stale for long) and the
 * cache's watch metrics.
 *
 * Ownership: the source borrows the cache and settings (they outlive it). Thread-safe: the
 * cache is, and the rest is read-only after setup.
 */
#ifndef TSR_WEBHOOK_CACHE_LOOKUP_H
#define TSR_WEBHOOK_CACHE_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/settings.h"
#include "webhook/handler.h"

struct tsr_buf;
struct tsr_kube_cache;

struct tsr_cache_lookup {
        struct tsr_kube_cache *cache;
        struct tsr_settings settings;
        const char *system_namespace;
};

/* The server's lookup callback (server.h); ctx is a struct tsr_cache_lookup. */
void tsr_cache_lookup_fill(void *ctx, struct tsr_webhook_lookup *lookup);

/* How long a resource may stay stale (kube/cache.h) before the server is not ready. */
#define TSR_CACHE_STALE_GRACE_S 5.0

/*
 * The server's ready callback: true once the cache has synced and no resource has been stale
 * for more than TSR_CACHE_STALE_GRACE_S (its watch lost to a 410, or refused by a 401 or 403,
 * and no list since has got through: answering from it would miss changes), else why names what it
 * waits on and the API server's last answer for it, whole in a why of TSR_WEBHOOK_WHY_MAX bytes
 * (server.h).
 */
bool tsr_cache_lookup_ready(void *ctx, char *why, size_t why_len);

/* The server's metrics callback: the cache's watch health (kube/cache.h). */
int tsr_cache_lookup_metrics(void *ctx, struct tsr_buf *out);

#endif
