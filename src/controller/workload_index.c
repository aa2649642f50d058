/*
 * workload_index.c - the parsed Workload view of workload_index.h: a refresh walks the mirror
 * once, keeps the entries whose copy did not change and parses the others.
 */
#include "controller/workload_index.h"

#include "base/err.h"
#include "codec/kueue_workload.h"
#include "kube/cache.h"

#include <stdlib.h>
#include <string.h>

static int by_key(const void *a, const void *b)
{
        return strcmp(((const struct ctl_workload_entry *)a)->key,
                      ((const struct ctl_workload_entry *)b)->key);
}

static int key_is(const void *key, const void *entry)
{
        return strcmp(key, ((const struct ctl_workload_entry *)entry)->key);
}

const struct ctl_workload_entry *ctl_workload_index_find(const struct ctl_workload_index *x,
                                                         const char *key)
{
        return x->n ? bsearch(key, x->v, x->n, sizeof(*x->v), key_is) : NULL;
}

static void entry_release(struct ctl_workload_entry *e)
{
        free(e->key);
        json_decref(e->obj);
        tsr_kueue_workload_free(e->parsed);
        memset(e, 0, sizeof(*e));
}

static void entries_release(struct ctl_workload_entry *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                entry_release(&v[i]);
        free(v);
}

void ctl_workload_index_release(struct ctl_workload_index *x)
{
        entries_release(x->v, x->n);
        json_decref(x->mirror);
        x->v = NULL;
        x->n = 0;
        x->mirror = NULL;
        x->built = false;
}

/* Fills e for key and obj (the mirror's copy): the old entry's parse when it read this copy. */
static int entry_for(struct ctl_workload_index *x, struct ctl_workload_entry *old, size_t n_old,
                     const char *key, json_t *obj, struct ctl_workload_entry *e)
{
        struct ctl_workload_entry *was =
            n_old ? bsearch(key, old, n_old, sizeof(*old), key_is) : NULL;
        int rc;

        if (was && was->obj == obj) {
                *e = *was;
                memset(was, 0, sizeof(*was));
                was->key = e->key; /* still sorted for the searches after: freed with e */
                return 0;
        }
        e->key = strdup(key);
        if (!e->key)
                return TSR_ENOMEM;
        e->obj = json_incref(obj);
        x->parses++;
        rc = tsr_kueue_workload_parse(obj, &e->parsed, NULL);
        if (rc == TSR_ENOMEM) { /* not remembered as malformed: the refresh fails instead */
                entry_release(e);
                return rc;
        }
        if (rc)
                e->parsed = NULL; /* malformed: not judged, not counted */
        return 0;
}

int ctl_workload_index_refresh(struct ctl_workload_index *x, struct tsr_kube_cache *cache)
{
        unsigned long gen = tsr_kube_cache_generation(cache, TSR_KUBE_CACHE_WORKLOADS);
        struct ctl_workload_entry *old = x->v, *v;
        size_t n_old = x->n, n = 0;
        json_t *changed, *obj;
        const char *key;
        int rc;

        if (x->built && gen == x->generation)
                return 0;
        if (!x->mirror && !(x->mirror = json_object()))
                return TSR_ENOMEM;
        changed = json_array();
        rc = changed ? tsr_kube_cache_mirror(cache, TSR_KUBE_CACHE_WORKLOADS, x->mirror, changed)
                     : TSR_ENOMEM;
        json_decref(changed);
        v = rc ? NULL : calloc(json_object_size(x->mirror) + 1, sizeof(*v));
        if (!rc && !v)
                rc = TSR_ENOMEM;
        json_object_foreach(x->mirror, key, obj)
        {
                if (rc)
                        break;
                rc = entry_for(x, old, n_old, key, obj, &v[n]);
                if (!rc)
                        n++;
        }
        /* What was not carried over is gone or replaced; a kept entry left only its key behind
         * (it now belongs to the new entry), so it is cleared before the release. */
        for (size_t i = 0; i < n_old; i++)
                if (!old[i].obj)
                        old[i].key = NULL;
        entries_release(old, n_old);
        x->v = NULL;
        x->n = 0;
        if (rc) {
                entries_release(v, n);
                ctl_workload_index_release(x);
                return rc;
        }
        qsort(v, n, sizeof(*v), by_key);
        x->v = v;
        x->n = n;
        x->generation = gen;
        x->built = true;
        return 0;
}
