/*
 * credits.h - gate 2: what a Pod costs in its manufacturer's Kueue `credits` resource, and what a
 * pool's ClusterQueue may spend.
 *
 * Kueue's resources.transformations (the chart helper, spec/upstream-behavior.md §9), strategy
 * Replace, per manufacturer m:
 *   <base>                                  -> credits.gpustack.ai/<m>: 1,600,000 per accelerator
 *   <base>.shared                           -> 160,000 per share
 *   <base>.sliced.units, multiplyBy .sliced -> 1 per unit, times the .sliced count
 *   <base>.partitioned.units                -> 1 per unit (only with a partition kind)
 * Each input is the Pod's effective request of that key (pod_resources.h). A ClusterQueue's
 * nominal quota for a flavor is its accelerator capacity x 1,600,000. Arithmetic saturates at
 * INT64_MAX rather than wrapping. Pure.
 */
#ifndef TSR_CORE_CREDITS_H
#define TSR_CORE_CREDITS_H

#include <stddef.h>
#include <stdint.h>

#include "core/catalog.h"
#include "core/keys.h"
#include "core/request.h"

/* "credits.gpustack.ai/" + the manufacturer key. */
#define TSR_CREDITS_PREFIX "credits.gpustack.ai/"

#define TSR_CREDITS_TRANSFORMATIONS_MAX 6

/* One row of Kueue's resources.transformations (strategy Replace) into m's credits resource. */
struct tsr_credits_transformation {
        enum tsr_key_kind input;
        enum tsr_key_kind multiply_by; /* TSR_KEY_NONE: none */
        int64_t credits;               /* per unit of input */
};

/*
 * Writes manufacturer m's transformations, in the table's order above, into
 * out[0..TSR_CREDITS_TRANSFORMATIONS_MAX) and returns how many (6 with a partition kind, else 4):
 * then <base>.sliced -> 0 and (with a partition kind) <base>.partitioned -> 0, which replace the
 * bare counts so that Kueue v0.17.0, which lacks quotaCheckStrategy IgnoreUndeclared, does not
 * look for them in a credits-only queue (docs/kueue-config.md).
 * tsr_credits_of_pod applies them; codec/kueue_config.h hands them to Kueue.
 */
size_t tsr_credits_transformations(const struct tsr_manufacturer *m,
                                   struct tsr_credits_transformation *out);

/* Writes m's credits resource name ("credits.gpustack.ai/nvidia") into out (len bytes). */
void tsr_credits_resource(const struct tsr_manufacturer *m, char *out, size_t len);

/* The credits the Pod's requests of m's keys transform into. */
int64_t tsr_credits_of_pod(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m);

/* Nominal quota of a flavor holding accelerators accelerators (accelerators x M, saturating). */
int64_t tsr_credits_quota(int64_t accelerators);

#endif
