/*
 * instancetype_detail.h - what an InstanceType object says about its accelerators, read the way
 * every upstream version stores it. The one reader behind the handlers that size a request
 * against a pool: the Pod fold (pod.c) and the Instance rules and defaulting (instance.c).
 *
 * The per-accelerator VRAM, in MiB, is looked for in this order:
 *   1. status.detail.memory - the current upstream: a quantity string ("81920Mi", "80Gi"), written
 *      by the status writer once it has computed the detail;
 *   2. spec.memory - older upstream versions: a quantity string ("80Gi"); this project's former
 *      rendering: an integer, in MiB.
 * A field that is absent, null or "" is skipped; when neither holds a value the memory is 0: the
 * detail is not computed yet, which a caller that needs the memory answers with upstream's
 * retryable "... not ready yet ...; retry", never a permanent denial. A value that is there must
 * be a positive whole number of MiB that fits in int64 bytes, else it is refused with a message
 * naming the field and the value (upstream's "parse memory %q of instance type %s: ..." and
 * "instance type %s has non-positive memory %q" wording). The first field holding a value
 * decides: a malformed status.detail.memory is refused, not passed over for spec.memory.
 *
 * The rest of status.detail: the manufacturer and slicedDetail (logical count and overcommit,
 * physical count, the offered profiles with their count and memoryMib). Every absent field reads
 * as "", 0 or false; a field of the wrong JSON type is refused; a profile entry without a name
 * is skipped; at most TSR_MIG_PROFILES_MAX profiles are kept, in the object's order.
 *
 * Invariants: *out is written only on success. The readers never allocate.
 * Ownership: every string in *out (manufacturer, profile names) is borrowed from the object it
 * was read from, valid while that object is. Pure; safe from any thread on objects no other thread
 * mutates.
 */
#ifndef TSR_WEBHOOK_INSTANCETYPE_DETAIL_H
#define TSR_WEBHOOK_INSTANCETYPE_DETAIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/views.h"

struct tsr_diag;

struct tsr_instancetype_detail {
        const char *manufacturer; /* status.detail.manufacturer, "" until computed */
        bool sliced_detail;       /* status.detail.slicedDetail is an object */
        bool logical_overcommit;  /* slicedDetail.logical.coresPercentageOvercommit */
        int64_t logical_count;    /* slicedDetail.logical.count */
        int64_t physical_count;   /* slicedDetail.physical.count */
        size_t n_profiles;        /* slicedDetail.physical.profiles with a name */
        struct tsr_profile_figure profiles[TSR_MIG_PROFILES_MAX]; /* names borrowed */
};

/*
 * Reads InstanceType it's per-accelerator VRAM in MiB into *mib: a positive value, or 0 when no
 * field holds one yet. Returns 0, or TSR_EPARSE with diag when the value present is not a
 * quantity, not positive, not a whole number of MiB, or too large (*mib untouched).
 */
int tsr_instancetype_detail_memory_mib(json_t *it, uint64_t *mib, struct tsr_diag *diag);

/* Reads status.detail of InstanceType it into *out. Returns 0 or TSR_EPARSE with diag. */
int tsr_instancetype_detail_read(json_t *it, struct tsr_instancetype_detail *out,
                                 struct tsr_diag *diag);

/* The offered profile named name in d, or NULL. */
const struct tsr_profile_figure *
tsr_instancetype_detail_profile(const struct tsr_instancetype_detail *d, const char *name);

#endif
