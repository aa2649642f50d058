/*
 * cache_lookup.c - adapters from the handler lookup's void *ctx to the cache's typed calls.
 */
#include "webhook/cache_lookup.h"

#include "base/diag.h"
#include "kube/cache.h"
#include "webhook/server.h"

#include <stdio.h>

#define WAITING "waiting for the first list of "
#define STALE   "stale, its watch lost (410) or refused and not listed again: "

/*
 * The longest reason tsr_cache_lookup_ready writes fits the room the server gives it: the API
 * server's Status message in a last_error is quoted whole, never cut mid-sentence.
 */
_Static_assert(TSR_WEBHOOK_WHY_MAX >= sizeof(WAITING "kvcachepoolbindings: ") +
                                          sizeof(((struct tsr_kube_cache_stats *)0)->last_error),
               "TSR_WEBHOOK_WHY_MAX cannot hold a readiness reason");
_Static_assert(TSR_WEBHOOK_WHY_MAX >= sizeof(STALE "kvcachepoolbindings for 99999999999 s: ") +
                                          sizeof(((struct tsr_kube_cache_stats *)0)->last_error),
               "TSR_WEBHOOK_WHY_MAX cannot hold a staleness reason");

static json_t *instancetype(void *ctx, const char *name)
{
        return tsr_kube_cache_instancetype(ctx, name);
}

static json_t *instancetype_by_entrance(void *ctx, const char *lq, size_t *matches)
{
        return tsr_kube_cache_instancetype_by_entrance(ctx, lq, matches);
}

static bool instancetype_revision_by_entrance(void *ctx, const char *lq, char *rev, size_t len)
{
        return tsr_kube_cache_instancetype_revision_by_entrance(ctx, lq, rev, len);
}

static json_t *localqueue(void *ctx, const char *ns, const char *name)
{
        return tsr_kube_cache_localqueue(ctx, ns, name);
}

static json_t *clusterqueue(void *ctx, const char *name)
{
        return tsr_kube_cache_clusterqueue(ctx, name);
}

static json_t *kvcache_binding(void *ctx, const char *ns, const char *name)
{
        return tsr_kube_cache_kvcache_binding(ctx, ns, name);
}

static json_t *kvcache_pool(void *ctx, const char *name)
{
        return tsr_kube_cache_kvcache_pool(ctx, name);
}

static json_t *kvcache_backend(void *ctx, const char *name)
{
        return tsr_kube_cache_kvcache_backend(ctx, name);
}

void tsr_cache_lookup_fill(void *ctx, struct tsr_webhook_lookup *lookup)
{
        struct tsr_cache_lookup *l = ctx;

        tsr_webhook_lookup_init(lookup);
        lookup->ctx = l->cache;
        lookup->instancetype = instancetype;
        lookup->instancetype_by_entrance = instancetype_by_entrance;
        lookup->instancetype_revision_by_entrance = instancetype_revision_by_entrance;
        lookup->localqueue = localqueue;
        lookup->clusterqueue = clusterqueue;
        lookup->kvcache_binding = kvcache_binding;
        lookup->kvcache_pool = kvcache_pool;
        lookup->kvcache_backend = kvcache_backend;
        lookup->settings = l->settings;
        lookup->system_namespace = l->system_namespace;
        /* The runtime Setting objects override the started-with values. */
        tsr_kube_cache_settings(l->cache, l->system_namespace, &lookup->settings);
}

bool tsr_cache_lookup_ready(void *ctx, char *why, size_t why_len)
{
        struct tsr_cache_lookup *l = ctx;
        bool synced = tsr_kube_cache_synced(l->cache);

        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                struct tsr_kube_cache_stats st;
                const char *name = tsr_kube_cache_resource_name((enum tsr_kube_cache_resource)r);

                tsr_kube_cache_stats(l->cache, (enum tsr_kube_cache_resource)r, &st);
                if (!synced && !st.synced && !st.optional) {
                        snprintf(why, why_len, WAITING "%s%s%s", name, st.last_error[0] ? ": " : "",
                                 st.last_error);
                        return false;
                }
                if (st.stale && st.seconds_stale > TSR_CACHE_STALE_GRACE_S && !st.optional) {
                        snprintf(why, why_len, STALE "%s for %.0f s%s%s", name, st.seconds_stale,
                                 st.last_error[0] ? ": " : "", st.last_error);
                        return false;
                }
        }
        if (synced)
                return true;
        snprintf(why, why_len, "waiting for the cache to sync");
        return false;
}

int tsr_cache_lookup_metrics(void *ctx, struct tsr_buf *out)
{
        struct tsr_cache_lookup *l = ctx;

        return tsr_kube_cache_render_metrics(l->cache, out);
}
