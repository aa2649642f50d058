/*
 * admit_snapshot.h - gate 3's snapshot, built in one place for every caller (seeds/admission.md
 * "Gate 3"; spec/upstream-behavior.md §7). The simulator's node_devices.c and `tessera
 * controller` fill the same neutral structs, from their own objects or from the API server's,
 * and tsr_admit_snapshot_judge turns them into what core/admit.h judges:
 *   - the ledger of every node, rebuilt from the allocation annotations of the Pods bound there
 *     (tsr_admit_snapshot_ledger, the one implementation of "the ledger from a node's Pods":
 *     the simulator's tsr_cluster_ledger calls it too). A Pod in phase Succeeded or Failed is
 *     recorded as finished, so the ledger stops charging what the kubelet took back;
 *   - the inflight Workloads: every other Workload of the target's ClusterQueue that holds its
 *     quota reservation, is not finished, and is admitted or holds this check's Ready. Each of
 *     its hostname-level domains counts the Pods there that the ledger does not hold yet. A
 *     domain on a node the snapshot does not list is left out (that node serves nothing here),
 *     so a caller that lists only the target's nodes pays only for the charges on them;
 *   - a Pod is held once its allocation record names every container that asks for an
 *     accelerator of the pool's manufacturer; a finished Pod is held. The ledger and the held
 *     Pods come from the same Pods, so no Pod is counted twice or missed;
 *   - a Pod belongs to PodSet P of Workload ns/W when it is in namespace ns, its annotation
 *     kueue.x-k8s.io/workload is W and its label kueue.x-k8s.io/podset is P;
 *   - names resolve here: a domain names its node by hostname, and a hostname that no listed
 *     node carries, or a listed node that is not present, is a node whose Node object is gone
 *     (it serves nothing). Flavors match by ResourceFlavor name.
 * One Pod's demand is read from its PodSet's template with the pool's manufacturer
 * (core/demand.h).
 *
 * Ownership: every input is borrowed for the call (for a snapshot's life, below); the Pod and
 * template objects are only read. No I/O. Thread-safe on inputs no other thread mutates.
 */
#ifndef TSR_CODEC_ADMIT_SNAPSHOT_H
#define TSR_CODEC_ADMIT_SNAPSHOT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/admit.h"
#include "core/catalog.h"
#include "core/ledger.h"

struct tsr_diag;

#define TSR_KUEUE_WORKLOAD_ANNOTATION "kueue.x-k8s.io/workload"
#define TSR_KUEUE_PODSET_LABEL        "kueue.x-k8s.io/podset"
/* Ceiling on the allocation records of one node's Pods, finished ones included. */
#define TSR_ADMIT_SNAPSHOT_RECORDS_MAX 65536

/* One node of the pool, read once (its Pods uncached). Names are distinct within a snapshot. */
struct tsr_snapshot_node {
        const char *name;
        bool present;                      /* the Node object exists */
        const char *flavor;                /* its ResourceFlavor's name; NULL: none of the pool's */
        const struct tsr_product *product; /* its accelerators' model; NULL: none */
        const struct tsr_accel_cap *caps;  /* n accelerators, caps[i].index == i */
        size_t n;
        json_t *const *pods; /* the Pods bound to the node (spec.nodeName), n_pods of them */
        size_t n_pods;
        /* NULL, or what tsr_admit_snapshot_ledger returned 0 with for exactly these Pods (a
         * caller's memo of it, kept while the node's Pods have not changed): used as is. */
        const struct tsr_accel_ledger *ledger;
        /* NULL, or tsr_admit_snapshot_held(pods[i], the product's manufacturer) for each Pod (a
         * caller's memo, kept while the Pods have not changed). */
        const bool *held;
};

/* Pods of a PodSet that the topology assignment puts on one node (the hostname level). */
struct tsr_snapshot_domain {
        const char *node; /* hostname; distinct within a PodSet */
        unsigned pods;
};

struct tsr_snapshot_podset {
        const char *name;
        unsigned count;     /* Pods admitted (the assignment's count, else the spec's) */
        json_t *tmpl;       /* the Pod template {"metadata", "spec"} */
        const char *flavor; /* the flavor of its accelerator credits; NULL: no single one */
        size_t n_domains;   /* 0: no hostname-level assignment */
        const struct tsr_snapshot_domain *domains;
};

/* A Kueue Workload as gate 3 reads it. */
struct tsr_snapshot_workload {
        const char *ns, *name;
        const char *cluster_queue; /* status.admission.clusterQueue; "" without admission */
        size_t n_podsets;
        const struct tsr_snapshot_podset *podsets;
        bool active;                                /* spec.active (Kueue's default: true) */
        bool reserved, admitted, evicted, finished; /* conditions with status True */
        bool has_check;             /* status.admissionChecks lists gpustack-node-devices */
        enum tsr_check_state check; /* its state (TSR_CHECK_PENDING without one) */
        const char *check_message;  /* its message ("" without one) */
};

/*
 * Rebuilds node's ledger from its Pods' allocation annotations into out[0..node->n): all reset,
 * and with node->product every record charged by tsr_ledger_build. Returns 0, or TSR_EPARSE /
 * TSR_ETOOBIG (an annotation that does not decode, "Pod ns/name: ..."), TSR_ETOOBIG (past
 * TSR_ADMIT_SNAPSHOT_RECORDS_MAX records), TSR_EINVAL (a record the accelerators cannot hold) or
 * TSR_ENOMEM, with diag; out is then unspecified.
 */
int tsr_admit_snapshot_ledger(const struct tsr_snapshot_node *node, struct tsr_accel_ledger *out,
                              struct tsr_diag *diag);

/*
 * Whether pod is held for manufacturer m's accelerators: finished, or its allocation record
 * names every container that asks for one. A record that does not decode is not held.
 */
bool tsr_admit_snapshot_held(json_t *pod, const struct tsr_manufacturer *m);

/*
 * Whether the check judges w now: it is active, holds its quota reservation, lists the check, and
 * is not evicted, finished or admitted yet.
 */
bool tsr_admit_snapshot_judges(const struct tsr_snapshot_workload *w);

/*
 * A snapshot judged many times (core/admit.h's struct tsr_admit_pool underneath): the ledgers
 * read and the Workloads inflight in cluster_queue charged once, at tsr_admit_snapshot_new, then
 * one verdict per target at the cost of what it places. A Workload that turns inflight later is
 * added with tsr_admit_snapshot_charge (charges are never taken back: a caller whose Workload
 * stops being inflight makes a new snapshot). A verdict on a Workload the snapshot charged is
 * judged without it, from the borrowed arrays as they stand (tsr_admit_snapshot_judge). Every
 * verdict equals tsr_admit_snapshot_judge's on the same nodes and Workloads.
 *
 * Ownership: nodes, workloads and every Workload charged are borrowed for the snapshot's life
 * and must not change under it; the snapshot owns its pool. One caller at a time.
 */
struct tsr_admit_snapshot;

/* Returns 0 with *out, or the errors of tsr_admit_snapshot_judge with diag. */
int tsr_admit_snapshot_new(const struct tsr_product *product, const struct tsr_snapshot_node *nodes,
                           size_t n_nodes, const struct tsr_snapshot_workload *workloads,
                           size_t n_workloads, const char *cluster_queue,
                           struct tsr_admit_snapshot **out, struct tsr_diag *diag);

/* Charges w (now inflight) once; a Workload charged already is left as is. */
int tsr_admit_snapshot_charge(struct tsr_admit_snapshot *s, const struct tsr_snapshot_workload *w,
                              struct tsr_diag *diag);

/* Judges target; 0 with *out, or the errors of tsr_admit_snapshot_judge with diag. */
int tsr_admit_snapshot_verdict(struct tsr_admit_snapshot *s,
                               const struct tsr_snapshot_workload *target,
                               struct tsr_admit_verdict *out, struct tsr_diag *diag);

void tsr_admit_snapshot_free(struct tsr_admit_snapshot *s);

/*
 * Judges target for the pool of product over nodes[0..n_nodes): charges the inflight Workloads
 * among workloads[0..n_workloads) (target may be one of them; it is told apart by namespace and
 * name), then places target (core/admit.h): a snapshot made, judged once and freed. Returns 0
 * with *out, or with diag: the errors of tsr_admit_snapshot_ledger ("node X: ..."), TSR_EPARSE /
 * TSR_ETOOBIG (a PodSet template that is not a Pod, "Workload ns/name PodSet P: ..."), TSR_EINVAL
 * (product NULL) or TSR_ENOMEM. No verdict is guessed from a snapshot that could not be read.
 */
int tsr_admit_snapshot_judge(const struct tsr_product *product,
                             const struct tsr_snapshot_node *nodes, size_t n_nodes,
                             const struct tsr_snapshot_workload *workloads, size_t n_workloads,
                             const struct tsr_snapshot_workload *target,
                             struct tsr_admit_verdict *out, struct tsr_diag *diag);

#endif
