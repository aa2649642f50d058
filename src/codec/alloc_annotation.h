/*
 * alloc_annotation.h - the `device.gpustack.ai/accelerator.allocated` Pod annotation: the
 * allocation record the device plugin writes and every ledger is rebuilt from.
 *
 * Wire shape (spec/upstream-behavior.md §8): a JSON object keyed by container name, each value
 * {"devices": {"groups": [{"id", "manufacturer", "accelerators": [AcceleratorAllocation...]}]},
 *  "deviceIDs": [...]}; an AcceleratorAllocation carries id, index, mode (upstream enum),
 * allocated, and for a partition allocatedPhysicalProfile, allocatedPhysicalPlacements
 * [{start, length}] and allocatedPhysicalID (the MIG device UUID); a slice carries
 * allocatedSlices. Decoding is strict: a missing or mistyped field fails, so a corrupt record
 * never charges a guessed accelerator. Ownership: encode returns a new string (free with free()).
 */
#ifndef TSR_CODEC_ALLOC_ANNOTATION_H
#define TSR_CODEC_ALLOC_ANNOTATION_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/catalog.h"
#include "core/ledger.h"

struct tsr_diag;

#define TSR_ALLOC_ANNOTATION     "device.gpustack.ai/accelerator.allocated"
#define TSR_ALLOC_ACCELS_MAX     16
#define TSR_ALLOC_CONTAINERS_MAX 16

struct tsr_accel_allocation {
        char id[TSR_UUID_MAX];
        unsigned index;
        enum tsr_mode mode;
        int64_t allocated;
        unsigned slices;        /* sliced: slots taken, normally 1 */
        char profile[64];       /* partitioned: "3g.40gb"; "" otherwise */
        unsigned start, length; /* partitioned: placement */
        char physical_id[96];   /* partitioned: MIG device UUID */
};

struct tsr_container_allocation {
        char container[64];
        char group_id[128];
        char manufacturer[32];
        size_t n;
        struct tsr_accel_allocation accels[TSR_ALLOC_ACCELS_MAX];
        size_t n_device_ids;
        char device_ids[TSR_ALLOC_ACCELS_MAX][256];
};

/* Encodes n container allocations as the annotation value into *out. Returns 0 or TSR_ENOMEM. */
int tsr_alloc_annotation_encode(const struct tsr_container_allocation *c, size_t n, char **out);

/*
 * Decodes the annotation value json into out[0..max). Returns 0 with *n set, TSR_EPARSE with a
 * message naming the bad field, or TSR_ETOOBIG past max containers or accelerators.
 */
int tsr_alloc_annotation_decode(const char *json, struct tsr_container_allocation *out, size_t max,
                                size_t *n, struct tsr_diag *diag);

/*
 * Decodes Pod pod's allocation annotation (metadata.annotations[TSR_ALLOC_ANNOTATION]) into
 * out[0..max) as tsr_alloc_annotation_decode does. Returns 0 with *n set (0 when the Pod has no
 * annotation), or that function's errors. Borrows pod.
 */
int tsr_alloc_annotation_of_pod(json_t *pod, struct tsr_container_allocation *out, size_t max,
                                size_t *n, struct tsr_diag *diag);

/*
 * Appends the ledger records of one Pod's decoded allocation (alloc[0..na), on accelerators of
 * product p) to recs[*nrec..max): one per accelerator entry, partitions with their profile index
 * (-1 when p lacks the profile, which tsr_ledger_build then refuses) and placement; finished marks
 * a Pod in phase Succeeded or Failed. Returns 0, or TSR_ETOOBIG when more than max records would
 * be needed (*nrec then counts those appended).
 */
int tsr_alloc_annotation_records(const struct tsr_container_allocation *alloc, size_t na,
                                 const struct tsr_product *p, bool finished,
                                 struct tsr_alloc_record *recs, size_t max, size_t *nrec);

#endif
