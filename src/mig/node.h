/*
 * node.h - what the MIG adapter reads of a node: its GPUs through the gpu_ops vtable, as one
 * snapshot of every card's UUID, MIG mode and live GPU instances; the logging callback the caller
 * provides; and the test of whether a marker names a live instance.
 *
 * A snapshot is taken under the node's MIG lock (see carve.h) and is valid until the lock is
 * released; any decision to destroy re-reads the card first (tsr_mig_card_read).
 *
 * Ownership: tsr_mig_snapshot_new returns a new snapshot (free with free()). Pure but for the
 * vtable calls; no globals.
 */
#ifndef TSR_MIG_NODE_H
#define TSR_MIG_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"
#include "codec/mig_marker.h"
#include "nvml/gpu_ops.h"

#define TSR_MIG_CARDS_MAX 64

/* A node's GPU backend: the vtable and its object (borrowed). */
struct tsr_mig_gpus {
        const struct tsr_gpu_ops *ops;
        void *be;
};

enum tsr_mig_log_level { TSR_MIG_LOG_INFO, TSR_MIG_LOG_WARN, TSR_MIG_LOG_ERROR };

/* The caller's logger: one event per call, msg valid only during the call. */
typedef void tsr_mig_log_fn(void *arg, enum tsr_mig_log_level level, const char *msg);

struct tsr_mig_card {
        char uuid[TSR_GPU_UUID_MAX];
        bool mig; /* MIG mode in effect: only then does the card hold instances */
        size_t n;
        struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX]; /* placement order */
};

struct tsr_mig_snapshot {
        unsigned n;
        struct tsr_mig_card card[TSR_MIG_CARDS_MAX]; /* card[i] is GPU index i; [0..n) allocated */
};

/*
 * Reads every GPU of gpus into a new snapshot *out. Returns 0, TSR_ENOMEM, TSR_ETOOBIG (more than
 * TSR_MIG_CARDS_MAX GPUs), or the backend's error with diag naming the GPU and the driver's detail.
 */
int tsr_mig_snapshot_new(const struct tsr_mig_gpus *gpus, struct tsr_mig_snapshot **out,
                         struct tsr_diag *diag);

/* (Re-)reads GPU gpu into *card. 0 or the backend's error with diag. */
int tsr_mig_card_read(const struct tsr_mig_gpus *gpus, unsigned gpu, struct tsr_mig_card *card,
                      struct tsr_diag *diag);

/* The index of the card whose UUID is uuid, or -1. */
int tsr_mig_snapshot_find(const struct tsr_mig_snapshot *s, const char *uuid);

/*
 * The instance marker m owns on card, or NULL: the GPU instance m->gi_id whose compute instance
 * still carries m->mig_uuid (a destroyed instance's id can be reassigned, so the id alone proves
 * nothing). With half_destroyed, also a GPU instance m->gi_id at m->start with no compute instance
 * left: the remains of a destroy interrupted between compute and GPU instance, which only reclaim
 * may accept.
 */
const struct tsr_gpu_instance *tsr_mig_owned(const struct tsr_mig_card *card,
                                             const struct tsr_mig_marker *m, bool half_destroyed);

/* NVML's own name of err ("Insufficient Resources", "In use by another client", ...). */
const char *tsr_mig_nvml_error(int err);

#endif
