/*
 * demand.h - what a Pod asks of one manufacturer's accelerators, as gates 3 and 5 see it.
 *
 * A Pod's demand is one family with one shape (gate 1 guarantees that for every queued Pod):
 *   exclusive    cards whole accelerators (the sum of <base> over its containers);
 *   shared       one ownership share on each of cards distinct accelerators (sum of .shared);
 *   sliced       one slice of units units on one accelerator (the folded .sliced.units);
 *   partitioned  one instance of profile on one partitioned accelerator (units:
 * .partitioned.units). Init and app containers both count (spec/upstream-behavior.md §7 "Demand
 * parsing"); native sidecars may not hold accelerators. A Pod that mixes families reports the first
 * found in the order exclusive, shared, sliced, partitioned, with mixed set: the allocator still
 * serves each container on its own, but no whole-Pod fit can be promised. Pure; borrows the
 * request.
 */
#ifndef TSR_CORE_DEMAND_H
#define TSR_CORE_DEMAND_H

#include <stdbool.h>
#include <stdint.h>

#include "core/keys.h"
#include "core/request.h"

#define TSR_PROFILE_MAX 64
/* A card count past any node's accelerators; larger requests saturate here. */
#define TSR_DEMAND_CARDS_MAX 4096

struct tsr_demand {
        enum tsr_family family;        /* TSR_FAMILY_NONE: no accelerator of the manufacturer */
        unsigned cards;                /* exclusive, shared: accelerators; sliced, partitioned: 1 */
        int64_t units;                 /* sliced, partitioned: units on the one accelerator */
        char profile[TSR_PROFILE_MAX]; /* partitioned: the profile name */
        bool mixed;                    /* more than one family was asked for */
};

/* The demand of the whole Pod on manufacturer m's accelerators. Never fails. */
void tsr_demand_of_pod(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m,
                       struct tsr_demand *out);

/* The demand of container index i alone (what one Allocate call serves). Never fails. */
void tsr_demand_of_container(const struct tsr_pod_req *pod, size_t i,
                             const struct tsr_manufacturer *m, struct tsr_demand *out);

/* Per accelerator units a demand charges: M for exclusive, one share for shared, else units. */
int64_t tsr_demand_units_per_card(const struct tsr_demand *d);

/* Writes a short human description ("2 whole accelerators", "a free 3g.40gb placement"). */
void tsr_demand_describe(const struct tsr_demand *d, char *out, size_t len);

#endif
