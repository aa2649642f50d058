/*
 * carve.h - reserving the MIG instance one container gets (gate 5's partition Allocate), with its
 * ownership marker (spec/upstream-behavior.md §8 "MIG ownership marker", seeds/nvidia-mig.md
 * "Requesting a partition"); and reading back, live, the instance a container holds (the grant of
 * its Pod's SSH sidecar, tsr_mig_held).
 *
 * Reserve order, exactly:
 *   1. reuse: the container's own marker, when its GPU instance is live and still carries the
 *      recorded MIG UUID (and is whole, and of the requested profile, and the card still offers
 *      it). An own marker that fails any of that -- corrupt, instance gone or recreated (a GPU
 *      reset or a reboot), another profile -- FAILS CLOSED (TSR_ESTALE): no fallback, no second
 *      instance for the same container (seeds/nvidia-mig.md "Node reboot recovery");
 *   2. adopt: an unmarked live GPU instance of the requested profile on a partitioned card that
 *      offers it, lowest card then lowest start, that no allocation annotation claims (the ledger's
 *      placements), that is not subdivided, on a card no corrupt marker names (that marker may be
 *      its owner's). One left without a compute instance (a carve interrupted after the GPU
 *      instance) gets its compute instance now;
 *   3. create: core/alloc.h's partition pick (pack, lowest free legal start) over the ledger and
 *      the live hardware of every card, so an instance not yet reclaimed is never double-booked;
 *      GPU instance, then a compute instance covering it; a failed compute instance destroys the
 *      new GPU instance.
 * The marker is written durably (marker_store.h) BEFORE success is reported; a failed write undoes
 * what this call created. A crash at any point leaves either no marker (the retried Allocate adopts
 * the instance, or reclaim destroys it as an orphan once the card drains) or a marker for a whole
 * instance (the retry reuses it). docs/internals/mig.md has the argument.
 *
 * LOCKING: the caller holds, for the whole call, the MIG lock of every card of the node (the
 * device manager's node-wide allocation mutex, which also serialises identify -> reserve; the
 * simulator is single-threaded). reserve may choose any card, and reclaim (reclaim.h) must not
 * interleave with it on the same card. The library takes no lock itself.
 *
 * Ownership: borrows everything; fills *out only on success.
 */
#ifndef TSR_MIG_CARVE_H
#define TSR_MIG_CARVE_H

#include <stddef.h>

#include "core/capability.h"
#include "core/ledger.h"
#include "mig/marker_store.h"
#include "mig/node.h"

struct tsr_mig_request {
        const char *pod_uid;
        const char *container;
        const char *profile; /* "3g.40gb" */
};

enum tsr_mig_how { TSR_MIG_REUSED, TSR_MIG_ADOPTED, TSR_MIG_CREATED };

/*
 * What Allocate injects (marker.mig_uuid: NVIDIA_VISIBLE_DEVICES) and records in the
 * AcceleratorAllocation (card index gpu, marker.card as id, marker.profile, marker.start and
 * marker.length as the placement, marker.mig_uuid as allocatedPhysicalID).
 */
struct tsr_mig_grant {
        enum tsr_mig_how how;
        unsigned gpu;                 /* card index */
        int profile;                  /* the product's profile index */
        struct tsr_mig_marker marker; /* as written */
};

/*
 * Reserves the instance of req on the node's GPUs. caps[0..n) and ledger[0..n) are index-aligned
 * with the GPUs' indices (the device manager's detection and the ledger rebuilt from the
 * allocation annotations). Returns 0 with *out; TSR_ESTALE when the container's own marker fails
 * closed; TSR_ENOTFOUND when no card offers the profile; TSR_ENOSPC when none has room; a backend
 * error (diag: "failed to create GPU instance 3g.40gb: Insufficient Resources", "failed to create
 * compute instance on 3g.40gb: ...") or a store error. diag says why in every case.
 */
int tsr_mig_reserve(const struct tsr_mig_gpus *gpus, struct tsr_mig_store *store,
                    const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                    size_t n, const struct tsr_mig_request *req, struct tsr_mig_grant *out,
                    struct tsr_diag *diag);

/*
 * The MIG instance container (pod_uid, container) holds on card (the GPU UUID its allocation
 * records), as its ownership marker says, checked against the hardware now: what a visibility
 * sidecar of the same Pod is shown, never the parent GPU (seeds/nvidia-mig.md "An SSH-enabled
 * Instance sees its partition, not the GPU"). Reads the store once and the GPUs once; checks, in
 * this order, each failure FAILING CLOSED with TSR_ESTALE and diag naming the case:
 *   - the container has a marker on card                ("... is missing"; a corrupt one: "... is
 *                                                         corrupt (why)");
 *   - it names card, a GPU of caps[0..n)                ("... names GPU X, not GPU Y ..." when its
 *                                                         only marker is on another card, or X is
 *                                                         not this node's);
 *   - that GPU is in MIG mode and still offers the recorded profile: the detected capability and
 *     the driver's profile_info now, with the catalog's id ("... records profile P, which GPU X no
 *     longer offers", "(MIG mode is off)" when it is);
 *   - GPU instance giID is live                         ("... is gone"; without a compute
 *                                                         instance: "... is gone: ...");
 *   - it is whole                                       ("... was subdivided by hand");
 *   - and carries the recorded MIG UUID, since a destroyed instance's id can be reassigned
 *     ("... was recreated: GPU instance N now carries MIG-...").
 * Returns 0 with *out (the marker) and *gpu (its index), TSR_ESTALE as above, or the store's or
 * backend's read error (diag says which). Reads only: nothing is created, destroyed or written.
 *
 * LOCKING: as tsr_mig_reserve: the caller holds the node's MIG lock across this call AND the use
 * of *out, so the instance checked is the one granted (reclaim cannot destroy it in between).
 */
int tsr_mig_held(const struct tsr_mig_gpus *gpus, struct tsr_mig_store *store,
                 const struct tsr_accel_cap *caps, size_t n, const char *pod_uid,
                 const char *container, const char *card, struct tsr_mig_marker *out, unsigned *gpu,
                 struct tsr_diag *diag);

#endif
