/*
 * tas.h - Kueue's Topology-Aware Scheduling at hostname level, the one placement rule every
 * model of tessera's chain runs (the simulator's Kueue and both replay variants). Queues are
 * TAS-only without a topology request, so a PodSet is placed in the unconstrained mode
 * (spec/kubernetes-contracts.md §3.5; Kueue's topology_aware_scheduling.md, "LeastFreeCapacity" for
 * unconstrained PodSets):
 *
 *   count    a node holds min over the resources a Pod asks (want > 0) of
 *            floor((allocatable - used) / want) more Pods; an absent resource (allocatable < 0)
 *            or one short of a single Pod holds none; usage below zero counts as zero;
 *   order    the nodes of the flavor that pass the PodSet's node affinity and hold at least one
 *            Pod, fewest Pods first, ties by node name (byte order);
 *   assign   along that order each node takes as many of the PodSet's Pods as it holds until
 *            all are placed; when the nodes hold fewer than the PodSet's count nothing is
 *            assigned (the flavor does not fit, the next one in the ClusterQueue's order is
 *            tried by the caller).
 *
 * A PodSet of one Pod lands on the first node of the order: tsr_tas_before is the comparison
 * both the sort (tsr_tas_assign) and a caller's linear scan use, so the two cannot disagree.
 *
 * Ownership: every function borrows its inputs for the call and writes only the caller's
 * storage. Pure; thread-safe. Cost: the count is O(resources); the assignment sorts the
 * candidates (O(n log n), n = the flavor's nodes, a few thousand at most).
 */
#ifndef TSR_CORE_TAS_H
#define TSR_CORE_TAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* More Pods than any count a caller reports; counts are clamped to it. */
#define TSR_TAS_FITS_MAX INT64_C(1000000)

/* One resource a Pod asks for on one node. */
struct tsr_tas_resource {
        int64_t allocatable; /* < 0: the node does not advertise the resource */
        int64_t used;        /* by the Pods bound or assigned there */
        int64_t want;        /* per Pod; <= 0: not asked, not counted */
};

/*
 * How many Pods asking r[0..n) the node holds (0..TSR_TAS_FITS_MAX). When it holds none and
 * short_of is not NULL, *short_of is the first resource that admits no Pod; -1 otherwise.
 * A Pod that asks for nothing is held TSR_TAS_FITS_MAX times.
 */
int64_t tsr_tas_fits(const struct tsr_tas_resource *r, size_t n, int *short_of);

/* A node that holds at least one Pod of the PodSet. */
struct tsr_tas_candidate {
        size_t node; /* the caller's index */
        const char *name;
        int64_t fits; /* > 0 */
};

/* Whether a comes before b in TAS's order: fewer fits, ties by name. */
bool tsr_tas_before(const struct tsr_tas_candidate *a, const struct tsr_tas_candidate *b);

/* count Pods on one node. */
struct tsr_tas_take {
        size_t node;
        unsigned count;
};

/*
 * Sorts c[0..n) into TAS's order and assigns count Pods along it into out[0..*n_out) (out has
 * room for n). Returns false, with *n_out = 0, when the candidates hold fewer than count Pods.
 */
bool tsr_tas_assign(struct tsr_tas_candidate *c, size_t n, unsigned count, struct tsr_tas_take *out,
                    size_t *n_out);

#endif
