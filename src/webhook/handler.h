/*
 * handler.h - the contract every admission handler of `tessera webhook` implements. A handler is a
 * pure function of a decoded AdmissionReview request and the cluster state it may read through a
 * lookup table: no I/O, no clock, no globals. The server (server.c) decodes the review, calls the
 * handler its path names, and encodes the verdict (codec/admission_review.h): a mutating handler's
 * changes travel back as the RFC 6902 patch from the request's object to verdict->patched; a
 * validating handler never patches.
 *
 * The request and verdict types, and tsr_verdict_allow/deny, live in codec/admission_review.h.
 *
 * Ownership: the request and everything it points to are borrowed for the call. A handler that
 * mutates sets verdict->patched to a new reference (the caller json_decrefs it); lookups return
 * new references (json_decref) or NULL.
 */
#ifndef TSR_WEBHOOK_HANDLER_H
#define TSR_WEBHOOK_HANDLER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "codec/admission_review.h"
#include "core/settings.h"

struct tsr_diag;

#define TSR_SYSTEM_NAMESPACE_DEFAULT "gpustack-system"

/*
 * What a handler may read of the cluster: the webhook's watch cache, the simulator's cluster, or
 * a test's fixtures. A NULL reader means "this process cannot read that kind", which a handler
 * that needs it reports as an error (HTTP 500) rather than as the object's absence.
 */
struct tsr_webhook_lookup {
        void *ctx;
        json_t *(*instancetype)(void *ctx, const char *name);
        /* The one InstanceType labelled schedule.gpustack.ai/queue-entrance=lq; *matches counts. */
        json_t *(*instancetype_by_entrance)(void *ctx, const char *lq, size_t *matches);
        /*
         * Optional: the revision ("uid/resourceVersion") of that one InstanceType into rev (len
         * bytes), without copying it; false when there is not exactly one, or it has no uid or
         * resourceVersion, or they do not fit. Lets the Pod webhook reuse what it read of an
         * unchanged InstanceType (pod.c); NULL: it reads the object on every review.
         */
        bool (*instancetype_revision_by_entrance)(void *ctx, const char *lq, char *rev, size_t len);
        json_t *(*localqueue)(void *ctx, const char *ns, const char *name);
        json_t *(*clusterqueue)(void *ctx, const char *name);
        /* worker.gpustack.ai/v1alpha1 KVCachePoolBinding (namespaced), KVCachePool, KVCacheBackend
         */
        json_t *(*kvcache_binding)(void *ctx, const char *ns, const char *name);
        json_t *(*kvcache_pool)(void *ctx, const char *name);
        json_t *(*kvcache_backend)(void *ctx, const char *name);
        struct tsr_settings settings; /* the Settings the handlers read */
        const char *system_namespace; /* the operator's namespace; NULL: the default */
};

/* Fills *l with no readers, every Setting at its default and the default namespace. */
void tsr_webhook_lookup_init(struct tsr_webhook_lookup *l);

/*
 * A handler fills *verdict (zeroed by the caller, allowed false) and returns 0, or returns an
 * error (TSR_EPARSE for an object of the wrong shape, TSR_ENOMEM) with diag: the server then
 * answers 400 (or 500) rather than a verdict.
 */
typedef int (*tsr_webhook_handler)(const struct tsr_webhook_lookup *lookup,
                                   const struct tsr_review *review, struct tsr_verdict *verdict,
                                   struct tsr_diag *diag);

#endif
