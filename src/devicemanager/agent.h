/*
 * agent.h - one node's device plugins without their transport: the state every family's plugin
 * shares and the decisions it makes under the node's allocation lock.
 *
 * State: the detected accelerators (fixed for the agent's life: re-detection is a restart), the
 * GPU backend and the MIG marker store, and the reservations Allocate made that the Pods'
 * allocation annotations do not show yet. The ledger is rebuilt wholesale on every use from the
 * Pods bound to the node (their annotations; terminating Pods included, finished ones per
 * core/ledger.h) plus those reservations. A reservation is dropped once its Pod's annotation
 * names the container, or once its Pod is gone from a list fetched after it was made (the agent
 * fetches every list it settles reservations by under the node lock).
 *
 * Annotations the ledger cannot charge fail safe and loud. The ledger is built Pod by Pod, the
 * reservations first (the agent's own grants are trusted over an annotation contradicting them).
 * A Pod whose annotation does not decode, names an accelerator past the node's, or does not fit
 * next to what was charged before it (overlapping placements, a profile the GPU lacks) is left out
 * whole -- all its records, not just the bad one -- and logged once per Pod UID (level error, the
 * UID and the reason; again only if it heals and breaks anew). Every accelerator its annotation
 * names (by index or UUID; for one that does not decode, every GPU whose UUID its text holds) is
 * then held back: Allocate grants nothing new there (a bound claim is refused FailedPrecondition
 * naming the Pod; a partition is neither adopted nor created there, though a container's own
 * instance is still reused), GetPreferredAllocation never picks it, and its tokens read Unhealthy
 * in every list but visibility's, while the rest of the node keeps allocating and its lists keep
 * moving. That is sound: the claims left out all sit on held-back accelerators, so no new grant
 * can collide with them; it is coarse, holding a whole card back for one bad record. A held-back
 * accelerator serves again once the annotation is fixed or the Pod is gone.
 *
 * Allocate (spec/upstream-behavior.md §8): under one node-wide mutex, identify the container
 * (pod-resources first when the caller can ask it, else the oldest pending Pod), refuse or settle
 * the claim (accelerator-bound: the tokens name the cards; partitioned: carve or reuse a MIG
 * instance with its durable marker; visibility: the cards the Pod already holds, a partition as
 * its MIG device only, which tsr_mig_held reads back from its marker and checks live under the
 * lock, the sidecar refused FailedPrecondition -- never shown the GPU -- when that fails), and
 * reserve. A granted logical slice's answer also carries what its isolation caps (struct
 * tsr_dm_slice: its memory from its units and the card's, the container's cores-percentage).
 * A visibility grant is reserved too (charging nothing, never written into the annotation, kept
 * until its Pod is gone), so its container is not named twice; and a visibility container is
 * named only in a Pod whose accelerator containers are all served (deviceplugin/identify.h), the
 * Pod the kubelet is admitting, never merely the oldest pending one.
 * Durability (with opts.grants_path): every reservation that charges is written to the grant
 * journal (devicemanager/grant_file.h) under the lock, before the answer leaves; a grant that
 * cannot be journaled is not made (INTERNAL, reason journal), since a grant a crash forgets is one
 * a restart makes twice. tsr_dm_agent_new reads the journal back, before anything is served, as
 * reservations not yet recorded (a journal that does not decode fails it: nothing is served on a
 * guess); settling one rewrites the journal (best effort: a restart settles it again).
 * A retried Allocate (tsr_dp_identify_retry: with the kubelet's view, a container it lists without
 * devices of the resource that already holds a grant of it naming exactly these IDs) is the
 * kubelet asking again after the answer was lost in a crash (when a container still waits too, the
 * older Pod's is the one being admitted): it is served again
 * from that grant (the same accelerators; a partition's MIG device read back from its marker and
 * checked live), charging and recording nothing new; GetPreferredAllocation offers such a
 * container its granted IDs, so that the kubelet asks for exactly those. When that container is
 * the one being admitted but the IDs differ from its grant, the Allocate is refused
 * (FAILED_PRECONDITION, reason retry_mismatch): naming a younger container instead would grant
 * the devices to one Pod while the kubelet gives them to another.
 * Then, outside the lock, the allocation annotation is recorded on the Pod through the caller's
 * record function; a failed record is retried by tsr_dm_agent_sync. Every change that can move a
 * device list calls the subscribers (outside the lock), which read the device view.
 *
 * Pods reads: the pods callback is the daemon's API-server LIST, so each entry point reads once.
 * Allocate reads once: identify, refusal, ledger and reservation all use that snapshot, and so
 * does the annotation recorded after it (the Pod as the snapshot showed it, with the reservations
 * put over it) unless a reservation was settled in the meantime (then record reads again: an
 * annotation entry may have been written that the snapshot lacks). GetPreferredAllocation reads
 * once; tsr_dm_agent_ledger, _devices, _reclaim and _sync's settling once each (and sync once more
 * per annotation it retries).
 *
 * The device view: a ledger and held-back set the agent keeps for its plugins' ListAndWatch lists
 * (tsr_dm_agent_view_shape). tsr_dm_agent_changed and tsr_dm_agent_refresh_view take it from one
 * new snapshot; a reserving Allocate rebuilds it from its own snapshot with the grant reserved,
 * before it records and calls the subscribers. Views replace one another under the lock, in the
 * order their snapshots were taken, so a reader never sees an older view after a newer one.
 *
 * Threads: every function is safe from any thread; callbacks (pods, kubelet view, record,
 * subscribers, log) are called without the agent's lock held, except kubelet_view, which Allocate
 * and a slice's GetPreferredAllocation call under it, and pods, called under it except while an
 * annotation is being recorded (neither may call back into the agent). A subscriber may call
 * any function of the agent (the plugins call tsr_dm_agent_view_shape).
 * Ownership: tsr_dm_agent_new copies caps; opts' functions and contexts are borrowed for the
 * agent's life; the store and backend are borrowed too.
 */
#ifndef TSR_DEVICEMANAGER_AGENT_H
#define TSR_DEVICEMANAGER_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "core/capability.h"
#include "core/ledger.h"
#include "deviceplugin/allocate.h"
#include "deviceplugin/devices.h"
#include "deviceplugin/identify.h"
#include "deviceplugin/node.h"
#include "mig/marker_store.h"
#include "mig/node.h"
#include "mig/reclaim.h"

struct tsr_dm_agent;

/* gRPC status codes an answer carries (grpc/status.h has the full set). */
enum tsr_dm_code {
        TSR_DM_OK = 0,
        TSR_DM_INVALID_ARGUMENT = 3,
        TSR_DM_NOT_FOUND = 5,
        TSR_DM_FAILED_PRECONDITION = 9,
        TSR_DM_INTERNAL = 13,
        TSR_DM_UNAVAILABLE = 14,
};

struct tsr_dm_answer;

struct tsr_dm_agent_opts {
        struct tsr_mig_gpus gpus;    /* the GPU backend */
        struct tsr_mig_store *store; /* MIG ownership markers */
        bool sliced_gate;            /* GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE */
        bool identify_by_kubelet;    /* GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET */
        bool release_terminated;     /* GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS */
        /* The Pods bound to the node: a new JSON array reference, or NULL when unknown. */
        json_t *(*pods)(void *ctx);
        /*
         * pod-resources List, flattened into *kv (the agent frees it with kubelet_view_free).
         * Returns 0, or non-zero when the kubelet could not answer (Allocate falls back).
         */
        int (*kubelet_view)(void *ctx, struct tsr_dp_kubelet_view **kv);
        void (*kubelet_view_free)(void *ctx, struct tsr_dp_kubelet_view *kv);
        /* Writes the allocation annotation value json on the Pod ns/name (uid checked). */
        int (*record)(void *ctx, const char *ns, const char *name, const char *uid,
                      const char *json, struct tsr_diag *diag);
        void (*log)(void *ctx, const char *level, const char *msg);
        /* The grant journal's file (devicemanager/grant_file.h), or NULL: reservations live in
         * memory only (the simulator's and most unit tests'). Borrowed for the agent's life. */
        const char *grants_path;
        /* Told of every Allocate's answer for family f, after the node lock is released (metrics,
         * Events); NULL: nobody. Must not block. */
        void (*allocated)(void *ctx, enum tsr_family f, const struct tsr_dm_answer *ans);
        void *ctx;
};

/* What one container's Allocate answers. */
struct tsr_dm_answer {
        enum tsr_dm_code code;
        char message[512];                /* the status message when code is not OK */
        char visible[TSR_DP_VISIBLE_MAX]; /* NVIDIA_VISIBLE_DEVICES; "void" for none */
        char pod[320];                    /* ns/name of the container's Pod */
        char container[64];
        /* When code is not OK: the refusal rule as a short stable code (a static string):
         * internal, unidentified, mixed_families, held_back, invalid_device, duplicate_device,
         * no_capacity, marker_stale, no_profile, carve_failed, visibility, journal, pods_unknown.
         * NULL when granted. */
        const char *reason;
        bool carved;       /* a MIG instance was created for this grant */
        bool carve_failed; /* creating a MIG instance failed (the backend's error) */
        /* A granted logical slice: what its runtime isolation caps (devicemanager/isolation.h).
         * All zero for any other answer. */
        struct tsr_dm_slice {
                bool granted;        /* code is OK and the family is sliced */
                uint64_t memory_mib; /* units / TSR_UNITS_PER_ACCEL x the accelerator's memory,
                                      * rounded down (at least 1) */
                unsigned cores;      /* the container's .sliced.cores-percentage, (0,100]; 100
                                      * when it asks none */
                char uid[128];       /* the Pod's UID */
        } slice;
};

/*
 * Creates an agent over caps[0..n) (one product, caps[i].index == i). Returns 0 and *out, or
 * TSR_EINVAL (bad caps) / TSR_ENOMEM with diag.
 */
int tsr_dm_agent_new(const struct tsr_accel_cap *caps, size_t n,
                     const struct tsr_dm_agent_opts *opts, struct tsr_dm_agent **out,
                     struct tsr_diag *diag);

void tsr_dm_agent_free(struct tsr_dm_agent *a);

/* The node view the plugins serve (valid for the agent's life). */
const struct tsr_dp_node *tsr_dm_agent_node(const struct tsr_dm_agent *a);

/*
 * Adds a subscriber called after any change that can move a device list, once the device view
 * shows it. 0 or TSR_ENOMEM.
 */
int tsr_dm_agent_subscribe(struct tsr_dm_agent *a, void (*fn)(void *ctx), void *ctx);

/*
 * The Pods changed (the caller's pod source says so): takes the device view from one new
 * snapshot (one read of the Pods, none without subscribers), then calls the subscribers.
 */
void tsr_dm_agent_changed(struct tsr_dm_agent *a);

/*
 * Takes the device view from a new snapshot (one read of the Pods) without calling anyone.
 * Returns 0, or TSR_ENOMEM (the view unchanged).
 */
int tsr_dm_agent_refresh_view(struct tsr_dm_agent *a);

/*
 * Family f's shape in the device view into shape[0..n) (n = the node's accelerators;
 * tsr_dp_shape on the view's ledger, held-back accelerators' tokens Unhealthy but for
 * visibility): what tsr_dm_agent_devices would list when the view was taken. Reads no Pods.
 * Returns 0, or TSR_ESTALE when no view was taken yet.
 */
int tsr_dm_agent_view_shape(struct tsr_dm_agent *a, enum tsr_family f, struct tsr_dp_shape *shape);

/*
 * The current ledger into ledger[0..n) (n = the node's accelerators): what could be charged, a
 * Pod whose annotation cannot be left out (see the file comment; its accelerators are held back
 * from new grants, which the ledger does not show). Returns 0, or TSR_ENOMEM with diag.
 */
int tsr_dm_agent_ledger(struct tsr_dm_agent *a, struct tsr_accel_ledger *ledger,
                        struct tsr_diag *diag);

/* Family f's device list now (a new snapshot, one read of the Pods; tsr_dp_devices on its
 * ledger, every ID formatted anew; held-back accelerators' tokens Unhealthy but for visibility).
 * The device view is not touched. */
int tsr_dm_agent_devices(struct tsr_dm_agent *a, enum tsr_family f, struct tsr_dp_device **out,
                         size_t *n);

/*
 * GetPreferredAllocation for one container request (tsr_dp_preferred on the current ledger). A
 * slice packs by the units of the container Allocate would name now (tsr_dp_identify without IDs,
 * pod-resources first as Allocate asks it, under the node lock): the most-occupied offered card
 * that still fits it. When nobody can be named, by the smallest slice still waiting on the node
 * (tsr_dp_smallest_pending), so no card that cannot hold any waiting slice is preferred; with no
 * slice waiting, the most-occupied card with a free slot (any units). Advisory: Allocate decides.
 * A granting family's preference needs the Pods (a retried container is offered exactly what it
 * was granted): TSR_EIO when they could not be listed, nothing offered.
 */
int tsr_dm_agent_preferred(struct tsr_dm_agent *a, enum tsr_family f, const char *const *available,
                           size_t n_avail, const char *const *must, size_t n_must, unsigned size,
                           const char **out, size_t *n_out);

/* Allocate for one container request of family f (see the file comment). Never fails: *out
 * carries the status. */
void tsr_dm_agent_allocate(struct tsr_dm_agent *a, enum tsr_family f, const char *const *ids,
                           size_t n_ids, struct tsr_dm_answer *out);

/*
 * One MIG reclaim pass of r (mig/reclaim.h) under the node lock, with the Pods bound to the node
 * as the live set and their annotations plus the reservations as the claims. Returns the pass's
 * result, or TSR_ESTALE without a pass when the Pods are unknown (the pod source returned NULL):
 * nothing is destroyed on a guess.
 */
int tsr_dm_agent_reclaim(struct tsr_dm_agent *a, struct tsr_mig_reclaimer *r,
                         struct tsr_mig_pass_stats *stats, struct tsr_diag *diag);

/*
 * Drops settled reservations and records the ones whose annotation write failed. Returns how
 * many reservations remain unrecorded. Without reservations it reads no Pods.
 */
size_t tsr_dm_agent_sync(struct tsr_dm_agent *a);

#endif
