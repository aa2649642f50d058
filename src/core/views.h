/*
 * views.h - the InstanceType four-view status of one accelerator pool (seeds/admission.md
 * "Four-view status"), the per-profile lists and the capability-only slicedDetail.
 *
 * Every accelerator feeds exactly one group by its capability: EX/SH/SL count unpartitioned
 * accelerators, PT partitioned ones.
 *   EX  remaining: free accelerators (mode NONE); onceMaxRequest: the largest node's count.
 *   SH  remaining: free shares on free or shared accelerators; onceMaxRequest: the largest node's
 *       count of accelerators that still have a free share (DESIGN.md: 8 idle GPUs read 8/80).
 *   SL  remaining: free memory percent on free or sliced accelerators with a free slot;
 *       onceMaxRequest: the freest single accelerator's percent.
 *   PT  remaining: per partitioned accelerator its largest free count, summed; onceMaxRequest: 1
 *       while any accelerator can host an instance, else 0.
 * remainingProfiles / allocatedProfiles list every offered profile, at 0 too. slicedDetail reads
 * only the capability and never moves with allocations. Pure.
 */
#ifndef TSR_CORE_VIEWS_H
#define TSR_CORE_VIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/capability.h"
#include "core/ledger.h"

struct tsr_view {
        int64_t capacity;
        int64_t once_max;
        int64_t remaining;
};

struct tsr_profile_figure {
        const char *name; /* static: the catalog's profile name */
        int64_t count;
        uint64_t memory_mib;
};

struct tsr_pool_views {
        struct tsr_view ex, sh, sl, pt;
        size_t n_profiles; /* offered profiles */
        struct tsr_profile_figure remaining_profiles[TSR_MIG_PROFILES_MAX];
        struct tsr_profile_figure allocated_profiles[TSR_MIG_PROFILES_MAX];
        bool logical_present; /* any unpartitioned accel */
        bool logical_overcommit;
        int64_t logical_count;  /* slice slots */
        bool physical_present;  /* any partitioned accel */
        int64_t physical_count; /* sum of partition counts */
        struct tsr_profile_figure physical_profiles[TSR_MIG_PROFILES_MAX]; /* static ceilings */
};

/* One node's accelerators of the pool's product: caps and ledgers, index-aligned. */
struct tsr_pool_node {
        const struct tsr_accel_cap *caps;
        const struct tsr_accel_ledger *ledger;
        size_t n;
};

/* Computes the views of the pool made of nodes[0..n_nodes) into *out. */
void tsr_views_compute(const struct tsr_pool_node *nodes, size_t n_nodes,
                       struct tsr_pool_views *out);

#endif
