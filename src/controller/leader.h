/*
 * leader.h - leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection
 * does it: one replica holds the Lease and renews it; the others watch it and take it over once it
 * has not moved for the lease duration.
 *
 * Every retry period a candidate reads the Lease. Absent: it creates it naming itself. Held by
 * itself: it renews (an update carrying the read resourceVersion, so two writers never both win;
 * the loser's 409 is a lost race, not an error). Held by another: it remembers when it last saw
 * the Lease's record (holder, renewTime, transitions) change, on its own monotonic clock, so a
 * skewed clock on the holder's machine does not matter, and takes the Lease over (acquireTime
 * now, leaseTransitions + 1) once that record has stood still for leaseDurationSeconds. An empty
 * holderIdentity (a holder that released it) may be taken at once.
 *
 * A leader that has not renewed within the renew deadline has lost the Lease: the lost callback
 * runs once, on the elector's thread, and the elector stops trying (the process is expected to
 * exit and restart, as controller-runtime's managers do; work done past the deadline could race
 * the next leader). tsr_leader_stop releases a held Lease (holderIdentity "", leaseDurationSeconds
 * 1) so a standby takes over within one retry period.
 *
 * Ownership: tsr_leader_start returns a new elector (stop and free with tsr_leader_stop); it
 * borrows the client, which must outlive it; the strings of the config are copied. Thread-safe:
 * tsr_leader_is_leader may be called from any thread.
 */
#ifndef TSR_CONTROLLER_LEADER_H
#define TSR_CONTROLLER_LEADER_H

#include <stdbool.h>

struct tsr_diag;
struct tsr_kube_client;
struct tsr_leader;

struct tsr_leader_config {
        const char *namespace_; /* the Lease's namespace */
        const char *name;       /* the Lease's name */
        const char *identity;   /* this replica: the Pod name, or host + pid */
        unsigned lease_ms;      /* leaseDurationSeconds (rounded up): 15000 */
        unsigned renew_ms;      /* renew deadline: 10000 */
        unsigned retry_ms;      /* retry period: 2000 */
        /* Called once on the elector's thread when this replica becomes leader / loses the Lease;
         * either may be NULL. */
        void (*on_started)(void *ctx);
        void (*on_lost)(void *ctx);
        void *ctx;
};

/* Starts campaigning. Returns 0 and *out, or TSR_EINVAL (a missing name, namespace or identity,
 * renew deadline not below the lease duration), TSR_ENOMEM or TSR_EIO (no thread), with diag. */
int tsr_leader_start(struct tsr_kube_client *client, const struct tsr_leader_config *cfg,
                     struct tsr_leader **out, struct tsr_diag *diag);

/* Whether this replica holds the Lease now (renewed within the renew deadline). */
bool tsr_leader_is_leader(struct tsr_leader *l);

/* Stops campaigning, releases the Lease if held, joins the thread, frees l. l may be NULL. */
void tsr_leader_stop(struct tsr_leader *l);

#endif
