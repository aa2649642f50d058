/*
 * workqueue.h - the controller's rate-limited work queue, with client-go's semantics: keys (a
 * string naming what to reconcile, "workload/<ns>/<name>"), not events.
 *
 * - A key is queued at most once: adding a key already waiting does nothing.
 * - A key being processed (handed out by get, not yet done) is never handed out twice at once;
 *   added meanwhile, it is marked dirty and queued again when done is called.
 * - add_after queues a key once a delay has passed (the earliest of several delays wins).
 * - add_rate_limited queues a key after its own backoff: base_ms * 2^(failures) capped at max_ms,
 *   failures counting the rate-limited adds since the last forget.
 * - shutdown wakes every get, which then returns false; later adds are ignored.
 *
 * Ownership: tsr_workqueue_new returns a new queue (free with tsr_workqueue_free, after every
 * thread left get). Keys are copied. Thread-safe: one mutex, one condition variable.
 */
#ifndef TSR_CONTROLLER_WORKQUEUE_H
#define TSR_CONTROLLER_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>

#define TSR_WORKQUEUE_KEY_MAX 512 /* the longest key, NUL included */

struct tsr_workqueue;

/* A new empty queue; base_ms 0 takes 5, max_ms 0 takes 60000. NULL when out of memory. */
struct tsr_workqueue *tsr_workqueue_new(unsigned base_ms, unsigned max_ms);

void tsr_workqueue_free(struct tsr_workqueue *q);

/* Queues key now. Returns 0, TSR_EINVAL (empty or too long) or TSR_ENOMEM. */
int tsr_workqueue_add(struct tsr_workqueue *q, const char *key);

/* Queues key once ms milliseconds have passed. Same returns. */
int tsr_workqueue_add_after(struct tsr_workqueue *q, const char *key, unsigned ms);

/* Queues key after its backoff, and counts one more failure. Same returns. */
int tsr_workqueue_add_rate_limited(struct tsr_workqueue *q, const char *key);

/* Clears key's failure count. */
void tsr_workqueue_forget(struct tsr_workqueue *q, const char *key);

/* Key's failure count. */
unsigned tsr_workqueue_failures(struct tsr_workqueue *q, const char *key);

/*
 * Waits for a key and copies it into key (TSR_WORKQUEUE_KEY_MAX bytes); the key is then
 * processing until tsr_workqueue_done. Returns false once the queue is shut down.
 */
bool tsr_workqueue_get(struct tsr_workqueue *q, char *key);

/*
 * Without waiting, hands out up to max keys waiting now that start with prefix, oldest first, as
 * tsr_workqueue_get would one by one (each processing until tsr_workqueue_done); the other keys
 * keep their places. Returns how many were copied into keys (0 once shut down).
 */
size_t tsr_workqueue_take_matching(struct tsr_workqueue *q, const char *prefix,
                                   char (*keys)[TSR_WORKQUEUE_KEY_MAX], size_t max);

/* Ends the processing of key; queues it again if it was added meanwhile. */
void tsr_workqueue_done(struct tsr_workqueue *q, const char *key);

/* Keys waiting now (not the delayed ones, not the processing ones). */
size_t tsr_workqueue_len(struct tsr_workqueue *q);

/* Wakes every waiting get; they return false, and later adds are ignored. */
void tsr_workqueue_shutdown(struct tsr_workqueue *q);

#endif
