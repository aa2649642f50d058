/*
 * workload_index.h - the controller's parsed view of the cached Kueue Workloads, kept between
 * verdicts instead of copied and parsed again for each one.
 *
 * Invariants: the entries are sorted by key ("ns/name"), one per Workload the cache held at the
 * last refresh; each holds its own reference to the mirror's copy of the object and the parse
 * of that copy (NULL when it is malformed: such a Workload is neither judged nor counted). A
 * refresh does nothing while the cache's Workload generation has not moved; otherwise it copies
 * only the Workloads whose resourceVersion moved (tsr_kube_cache_mirror) and parses only those:
 * an entry whose copy is the one the mirror still holds keeps its parse (the entry's reference
 * keeps a replaced copy alive, so a new copy never takes an old one's address).
 *
 * Ownership: the worker thread's alone (no lock). The objects and parses are borrowed by callers
 * until the next refresh or the release.
 */
#ifndef TSR_CONTROLLER_WORKLOAD_INDEX_H
#define TSR_CONTROLLER_WORKLOAD_INDEX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct tsr_kube_cache;
struct tsr_kueue_workload;

struct ctl_workload_entry {
        char *key;
        json_t *obj;                       /* a reference of the entry's own */
        struct tsr_kueue_workload *parsed; /* NULL: malformed */
};

struct ctl_workload_index {
        json_t *mirror; /* "ns/name" -> copy (kube/cache.h's tsr_kube_cache_mirror) */
        struct ctl_workload_entry *v;
        size_t n;
        unsigned long generation; /* the cache's, when last refreshed */
        bool built;
        unsigned long parses; /* Workloads parsed so far (the bench's and tests' counter) */
};

/*
 * Brings x up to date with cache. Returns 0, or TSR_ENOMEM (x is then empty and the next call
 * starts again from nothing).
 */
int ctl_workload_index_refresh(struct ctl_workload_index *x, struct tsr_kube_cache *cache);

/* The entry of key ("ns/name"), or NULL. */
const struct ctl_workload_entry *ctl_workload_index_find(const struct ctl_workload_index *x,
                                                         const char *key);

/* Frees everything x holds; x is empty after (a refresh builds it again). */
void ctl_workload_index_release(struct ctl_workload_index *x);

#endif
