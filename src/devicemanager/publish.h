/*
 * publish.h - what the device manager writes to the API server for its node, each a projection
 * of capability x ledger (spec/upstream-behavior.md §4, §6, §8; spec/kubernetes-contracts.md
 * §4.4, §4.5):
 *
 *   node-capacity keys  <base>.sliced.units, .sliced.cores-percentage, .sliced.memory-percentage,
 *                       .sliced.memory-mib, .partitioned.units, .partitioned.<kind>-<profile>
 *                       (core/node_keys.h), in the Node's status.capacity and
 *                       status.allocatable (the same value in both), by a merge patch of
 *                       PATCH /api/v1/nodes/<node>/status. Presence gating: a .sliced.* key is
 *                       written only while <base>.sliced is present and above 0 in the Node's
 *                       status.capacity, a .partitioned.* key likewise with <base>.partitioned.
 *                       Stale cleanup: a node-capacity key of this manufacturer on the Node
 *                       (capacity or allocatable) that is not written now is nulled. The device-
 *                       plugin pools (<base>, .shared, .sliced, .partitioned, visibility) are
 *                       the kubelet's: never written, never nulled; nor is any other key.
 *   fit labels          sliced-max-free-units.fit.gpustack.ai/<aKey> and
 *                       shared-free-cards.fit.gpustack.ai/<aKey> (codec/devices_object.h), by a
 *                       merge patch of metadata.labels (PATCH /api/v1/nodes/<node>); a fit label
 *                       of this manufacturer's models ("<manufacturer>-" aKeys) not written now
 *                       is nulled (its population is gone).
 *   the Devices object  worker.gpustack.ai/v1alpha1 devices/<node> (codec/devices_object.h):
 *                       created (POST) when missing, spec merge-patched when it differs, status
 *                       merge-patched through the status subresource when it differs.
 *
 * Only on change: struct tsr_dm_published remembers what the last successful call wrote. A call
 * whose projection equals it sends no request at all. When the Node's keys or labels differ
 * from it (or it knows nothing yet) the call reads the Node once (GET) and patches only what the
 * Node does not already hold; when the Devices object is not known yet it reads it (GET). A
 * call that withheld keys by presence gating leaves the Node unknown, so the next call reads it
 * again (the kubelet may have registered the pool meanwhile). The caller resyncs (to heal edits
 * made by others) by releasing and re-initialising the record.
 *
 * Errors: the first failing request ends the call with its code and diag (kube/client.h);
 * the record is then left exactly as it was, so the next call retries everything that differs
 * (every patch is idempotent; a Devices object found missing is created).
 *
 * Ownership: the record owns its JSON (tsr_dm_published_release frees it); tsr_dm_publish
 * borrows the client, caps and ledger. Not thread-safe per record: one publisher per node.
 */
#ifndef TSR_DEVICEMANAGER_PUBLISH_H
#define TSR_DEVICEMANAGER_PUBLISH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/capability.h"
#include "core/catalog.h"
#include "core/ledger.h"

struct tsr_diag;
struct tsr_kube_client;

/* What the last successful tsr_dm_publish wrote. */
struct tsr_dm_published {
        const struct tsr_manufacturer *manufacturer; /* whose keys and labels these are */
        bool node_known;  /* the Node holds capacity and labels (none withheld by gating) */
        json_t *capacity; /* node-capacity key -> quantity string written; NULL: unknown */
        json_t *labels;   /* fit label -> value written; NULL: unknown */
        json_t *spec;     /* the Devices spec the server holds; NULL: unknown */
        json_t *status;   /* the Devices status the server holds; NULL: unknown */
};

/* Initialises p for manufacturer m (the daemon's; borrowed, static): nothing known. */
void tsr_dm_published_init(struct tsr_dm_published *p, const struct tsr_manufacturer *m);

/* Frees p's JSON; p may be initialised again. */
void tsr_dm_published_release(struct tsr_dm_published *p);

/*
 * Publishes the keys, labels and Devices object of node (a DNS-1123 subdomain) for its n
 * accelerators caps[0..n) (one product of last's manufacturer) with ledger[0..n), writing only
 * what differs from *last, and on success records what it wrote in *last. Returns 0, TSR_EINVAL
 * (a bad node name; accelerators of different products or of another manufacturer) without a
 * request, TSR_ENOMEM, or the errors of kube/client.h (a missing Node: TSR_ENOTFOUND), with
 * diag; on any error *last is unchanged.
 */
int tsr_dm_publish(struct tsr_kube_client *c, const char *node, const struct tsr_accel_cap *caps,
                   const struct tsr_accel_ledger *ledger, size_t n, struct tsr_dm_published *last,
                   struct tsr_diag *diag);

#endif
