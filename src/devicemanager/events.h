/*
 * events.h - the device manager's Kubernetes Events, posted off the caller's thread: a refused
 * allocation (Warning AllocationRefused), a failed MIG carve (Warning MIGCarveFailed) and MIG
 * recovery after a restart (Normal RebootRecovered), on the Pod when it is known, else on the
 * node.
 *
 * Emit never blocks on the API server: it dedupes and queues under one mutex, and one worker
 * thread posts. Dedupe: an Event with the same (reason, object, message) as one emitted less than
 * window_ms ago is suppressed, so a kubelet retrying a refused Allocate cannot flood the API
 * server (the last EVENTS_RECENT_MAX keys are remembered; the oldest is forgotten first). At most
 * EVENTS_QUEUE_MAX Events wait; more are dropped. A failed post is logged and counted, never
 * retried.
 *
 * Ownership: tsr_dm_events_new returns a new object (free with tsr_dm_events_free, which stops
 * the worker; Events still queued are dropped); the post callback's ctx is borrowed until then.
 * Thread-safe.
 */
#ifndef TSR_DEVICEMANAGER_EVENTS_H
#define TSR_DEVICEMANAGER_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/diag.h"
#include "kube/event.h"

#define TSR_DM_EVENTS_COMPONENT "tessera-device-manager"

struct tsr_dm_events;

struct tsr_dm_events_opts {
        const char *node;   /* copied: the object when no Pod is named, and reportingInstance */
        unsigned window_ms; /* dedupe window; 0: 60000 */
        /* Posts one Event (the worker thread). Returns 0 or an error with diag. */
        int (*post)(void *ctx, const struct tsr_kube_event_record *ev, struct tsr_diag *diag);
        void *ctx;
};

/* What the Events have done, for tests and logs. */
struct tsr_dm_events_stats {
        unsigned long emitted, suppressed, dropped, posted, failed;
};

/* Starts the worker. Returns 0 and *out, TSR_ENOMEM or TSR_EIO (no thread). */
int tsr_dm_events_new(const struct tsr_dm_events_opts *opts, struct tsr_dm_events **out);

void tsr_dm_events_free(struct tsr_dm_events *e);

/*
 * Queues an Event of type ("Normal", "Warning") and reason (CamelCase) with message on pod
 * ("namespace/name"; NULL or "": the node), at now_ms (a monotonic clock). Returns true when
 * queued, false when suppressed by the dedupe window or dropped (queue full).
 */
bool tsr_dm_events_emit(struct tsr_dm_events *e, const char *pod, const char *type,
                        const char *reason, const char *message, int64_t now_ms);

void tsr_dm_events_stats(struct tsr_dm_events *e, struct tsr_dm_events_stats *out);

#endif
