/*
 * mig.h - the MIG variant of the fragmentation benchmark: the trace's node list with every GPU
 * replaced by one MIG-capable product, every GPU partitioned (MIG mode on), each task rounded to
 * a MIG profile and placed by tessera's chain over src/core.
 *
 * Mapping of a trace task onto the product p (vram_mib V, axis of W memory slices):
 *   fractional (num_gpu 1, gpu_milli < 1000): it asks gpu_milli / 1000 x V MiB and takes one
 *     instance of the smallest offered profile whose memory (as its name states it,
 *     tsr_mig_profile_nominal_mib) covers that; ties by fewest compute slices, then table order.
 *     On an H100 80GB: <= 125 milli 1g.10gb, <= 250 1g.20gb, <= 500 3g.40gb, above 7g.80gb.
 *   whole-GPU (gpu_milli 1000): num_gpu instances of the full-GPU profile (the offered profile
 *     spanning the whole axis, 7g.80gb), one per GPU, all on one node.
 *   CPU-only: CPU, memory and a pod slot.
 * The trace's gpu_spec is dropped: every GPU is the one product. Each instance of profile q is
 * charged as Allocate records it: its placement and q's units, nominal_mib(q) x M / V.
 *
 * tessera's placement, per task (what a cluster of partitioned nodes running tessera does):
 * 1. Flavors: one per GPUs-per-node count, smallest first (Kueue's order for one product); a
 *    CPU-only task has one generic flavor of every node.
 * 2. TAS at hostname level: per node, how many such tasks it still fits for every resource
 *    asked -- CPU, memory, pod slots, `.partitioned` (cards instances), `.partitioned.<kind>-<q>`
 *    (cards), `.partitioned.units` (cards x units) -- where a key's free amount is the node's
 *    allocatable (tsr_node_keys_project: per GPU its live instances plus the largest free count
 *    of any offered profile for `.partitioned`, live plus free count of q for the profile key)
 *    minus what the live instances request. The node with the fewest fits wins, ties by name;
 *    the first flavor with a fitting node takes the task.
 * 3. Gate 5: tsr_alloc_pick_partition (the most-occupied partitioned card with a free placement,
 *    ties by position; its lowest free legal start), charged with tsr_alloc_charge, once per
 *    instance.
 *
 * Measure: memory slices held (a profile's span; on every product in the table a profile's
 * nominal memory is span / W of V, so slices and memory give the same percentage).
 *
 * Ownership: a cluster borrows the replay cluster (CPU, memory, pod slots: replay/cluster.h) and
 * the trace nodes (names) for its life; release with tsr_mig_cluster_release. Pure; not
 * thread-safe.
 */
#ifndef TSR_REPLAY_MIG_H
#define TSR_REPLAY_MIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/diag.h"
#include "core/alloc.h"
#include "core/capability.h"
#include "core/ledger.h"
#include "replay/cluster.h"
#include "replay/run.h"

/* The offered profiles of product p when partitioned (bit i: profile i); 0 without MIG. */
uint32_t tsr_mig_offered(const struct tsr_product *p);

/* The profile a fractional task of gpu_milli rounds to on p (mapping above), or -1 when none
 * covers it. */
int tsr_mig_round(const struct tsr_product *p, unsigned gpu_milli);

/* The full-GPU profile of p: the offered profile spanning the whole axis, or -1. */
int tsr_mig_full_profile(const struct tsr_product *p);

/* The units one instance of profile q charges: nominal_mib(q) x M / vram_mib. */
int64_t tsr_mig_units(const struct tsr_product *p, unsigned q);

struct tsr_mig_task {
        int64_t cpu, mem;
        int profile;    /* product profile index; -1 for a CPU-only task */
        unsigned cards; /* instances, one per GPU; 0 for a CPU-only task */
        unsigned milli; /* the trace's gpu_milli per GPU: what the task itself uses */
};

struct tsr_mig_place {
        size_t node;
        unsigned n; /* == the task's cards */
        struct tsr_alloc_pick pick[TSR_TRACE_GPUS_MAX];
};

/* A node's TAS view of its partition keys: allocatable minus requested. */
struct tsr_mig_free {
        int64_t pool, units;
        int64_t profile[TSR_MIG_PROFILES_MAX];
};

struct tsr_mig_cluster {
        const struct tsr_product *product;
        struct tsr_rcluster *rc;            /* borrowed: CPU, memory, pod slots */
        const struct tsr_trace_node *nodes; /* borrowed: names */
        struct tsr_accel_cap *caps;         /* node i's GPUs at caps + first[i] */
        struct tsr_accel_ledger *ledger;    /* aligned with caps */
        size_t *first;
        struct tsr_mig_free *free;               /* per node, recomputed when the node is bound */
        size_t *by_name;                         /* every node index, by name */
        unsigned flavor[TSR_TRACE_GPUS_MAX + 1]; /* GPUs-per-node counts, ascending */
        size_t n_flavors;
        unsigned width; /* memory slices per GPU */
        int64_t units[TSR_MIG_PROFILES_MAX];
        int64_t total_slices, used_slices;
};

/* Builds the partitioned cluster over rc (as it stands: call after tsr_rcluster_reset) and nodes
 * (the trace nodes rc was built from). 0, or TSR_EINVAL (p has no MIG) / TSR_ENOMEM with diag. */
int tsr_mig_cluster_init(struct tsr_mig_cluster *c, const struct tsr_product *p,
                         struct tsr_rcluster *rc, const struct tsr_trace_node *nodes,
                         struct tsr_diag *diag);

void tsr_mig_cluster_release(struct tsr_mig_cluster *c);

/* The task a trace pod becomes on c's product (mapping above). False when a fractional pod's
 * size rounds to no profile (cannot happen below the full-GPU profile's memory). */
bool tsr_mig_task_of(const struct tsr_mig_cluster *c, const struct tsr_trace_pod *p,
                     struct tsr_mig_task *out);

/* tessera's placement of t (steps 1-3 above), c unchanged; false when nothing fits. */
bool tsr_mig_place(const struct tsr_mig_cluster *c, const struct tsr_mig_task *t,
                   struct tsr_mig_place *out);

/* Charges t at pl (a placement tsr_mig_place chose): CPU, memory, pod slot, ledgers, slices. */
void tsr_mig_bind(struct tsr_mig_cluster *c, const struct tsr_mig_task *t,
                  const struct tsr_mig_place *pl);

/* One MIG run of a trace: the protocol's order for seed, placed by tessera's chain on product. */
struct tsr_mig_result {
        double held_pct[TSR_REPLAY_POINTS]; /* memory slices held / the cluster's slices */
        double used_pct[TSR_REPLAY_POINTS]; /* the placed tasks' own gpu_milli / capacity */
        bool have[TSR_REPLAY_POINTS];
        size_t pods, placed, clones;
        size_t dropped_cpu, dropped_fractional, dropped_whole; /* at the end */
        double dropped_at_100; /* GPU tasks dropped by arrival 100 % (the point's mean) */
        int64_t arrived_milli, arrived_slices; /* asked, placed or not */
        int64_t total_slices, used_slices;     /* at the end */
};

/* Runs the MIG variant on s's nodes and pods (s's cluster is reset and used for CPU, memory and
 * pod slots). 0, or TSR_EINVAL / TSR_ENOMEM with diag. */
int tsr_mig_run(struct tsr_replay_setup *s, const struct tsr_product *p, uint64_t seed,
                struct tsr_mig_result *out, struct tsr_diag *diag);

/* Unallocated GPUs at point x: (100 - held) % of the cluster's GPUs. */
double tsr_mig_unallocated_gpus(const struct tsr_replay_setup *s, const struct tsr_mig_result *r,
                                unsigned x);

/* Appends one trace's table: the mapping's profile counts over s's pods, mean +- SD over runs
 * [0..n) of held and used GPU share, unallocated GPUs and GPU tasks dropped at 100 %, wall time per
 * seed (seconds[0..n)), and the held share from 80 to 130 %. 0, or a tsr_buf error. */
int tsr_mig_report_table(struct tsr_buf *out, const char *trace, const struct tsr_replay_setup *s,
                         const struct tsr_product *p, const struct tsr_mig_result *runs,
                         const double *seconds, size_t n);

#endif
