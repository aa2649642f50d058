/*
 * actors.h - the simulator's actors, internal to sim/. tsr_cluster_reconcile runs the bool
 * functions in the order listed until none reports progress; each returns true when it changed
 * something another actor may react to. All borrow the cluster; none keeps pointers into it
 * across calls (its arrays move when they grow).
 */
#ifndef TSR_SIM_ACTORS_H
#define TSR_SIM_ACTORS_H

#include <jansson.h>
#include <stdbool.h>

#include "sim/cluster.h"

struct tsr_buf;
struct tsr_diag;

/* ---- webhooks.c: the mutating and validating webhooks ---- */

/*
 * Runs a Pod CREATE through the webhooks in the API server's order: gpustack's Pod webhook
 * (gate 1: rules, folds, card-count pin, applied as the JSON Patch it answers) and Kueue's Pod
 * webhook (the admission scheduling gate). *pod may be replaced by the patched object. Sets
 * *denied and appends the API server's denial to out when a webhook refuses. Returns 0 or an
 * error for an object no webhook could read.
 */
int sim_webhook_pod(struct tsr_cluster *c, json_t **pod, struct tsr_buf *out, bool *denied,
                    struct tsr_diag *diag);

/* The Workload webhook on CREATE: ANDs the fit pin into each PodSet template when it applies. */
void sim_webhook_workload(struct tsr_cluster *c, struct sim_workload *w);

/* ---- kueue.c: the Kueue controller and scheduler ---- */

/* Creates Workloads for queued Pods, finishes and removes them with their Pods. */
bool sim_kueue_sync(struct tsr_cluster *c);

/* Reserves quota (flavor + TAS assignment) for pending Workloads whose backoff has passed. */
bool sim_kueue_schedule(struct tsr_cluster *c);

/* Admits Workloads whose checks are all Ready (ungating their Pods), evicts those on Retry. */
bool sim_kueue_admit(struct tsr_cluster *c);

/*
 * The nodes as TAS counts them (what sim_kueue_schedule places against): the scheduler's usage
 * plus, for every Workload holding quota, the Pods TAS assigned to a node and not bound there yet
 * (a new array, sim_node_states_free), or NULL when out of memory.
 */
struct sim_node_state *sim_kueue_tas_states(struct tsr_cluster *c);

/* Quota usage within every flavor's nominal quota. 0 or TSR_ESTALE with diag. */
int sim_kueue_check(const struct tsr_cluster *c, struct tsr_diag *diag);

/* ---- node_devices.c: the gpustack-node-devices AdmissionCheck controller ---- */

/* Writes the check's verdict on every Workload it may judge. */
bool sim_node_devices_check(struct tsr_cluster *c);

/* ---- scheduler.c: kube-scheduler ---- */

/* Binds every ungated pending Pod to a node whose allocatable keys fit it, then admits it there. */
bool sim_scheduler_bind(struct tsr_cluster *c);

/* ---- kubelet.c: kubelet, device plugins and the MIG reclaimer ---- */

/*
 * Admits Pod k just bound to its node: device-plugin allocation for every container that asks
 * for an accelerator, then the containers start. A refused allocation fails the Pod with
 * UnexpectedAdmissionError.
 */
void sim_kubelet_admit(struct tsr_cluster *c, size_t k);

/* Kubernetes' spelling of a Pod phase: "Pending", "Running", "Succeeded" or "Failed". */
const char *sim_pod_phase_name(enum sim_phase phase);

/* Ends the containers whose exit time has come (Succeeded or Failed). */
void sim_kubelet_finish_due(struct tsr_cluster *c);

/* One pass of node i's MIG reclaim loop. */
void sim_kubelet_reclaim_pass(struct tsr_cluster *c, size_t i);

/* ---- cluster.c: shared helpers ---- */

#include "sim/resources.h"

/*
 * What the scheduler and Kueue's TAS read of one node. alloc and bound point into the node's memo
 * (kept per node generation, not copied per pass); the first charge (sim_node_state_charge)
 * gives the state a copy of its own (charged), and its usage is that copy from then on
 * (sim_node_state_used).
 */
struct sim_node_state {
        const struct pod_resources *alloc; /* allocatable */
        const struct pod_resources *bound; /* requests of the unfinished Pods bound there */
        struct pod_resources *charged;     /* bound plus what TAS charged: NULL until it does */
        json_t *labels;
};

/* State s's usage: what TAS charged on top of the bound Pods, or the bound Pods' requests. */
static inline const struct pod_resources *sim_node_state_used(const struct sim_node_state *s)
{
        return s->charged ? s->charged : s->bound;
}

/* The state of every node (free with sim_node_states_free), or NULL when out of memory. */
struct sim_node_state *sim_node_states(const struct tsr_cluster *c);

/*
 * The requests of the unfinished Pods bound to node i (its list of bound Pods), computed afresh
 * (what a state's bound holds; the node memo keeps it per generation).
 */
void sim_node_used(const struct tsr_cluster *c, size_t i, struct pod_resources *out);

/*
 * Adds count Pods of request req to state s's usage (its own copy from then on). Returns false,
 * charging nothing, when out of memory.
 */
bool sim_node_state_charge(struct sim_node_state *s, const struct pod_resources *req,
                           unsigned count);

/* Drops every charge of state s: its usage is the bound Pods' again. */
void sim_node_state_uncharge(struct sim_node_state *s);

/* Recomputes node i's state s (after a Pod was bound there), dropping its charges. */
void sim_node_state_refresh(const struct tsr_cluster *c, struct sim_node_state *s, size_t i);

void sim_node_states_free(struct sim_node_state *s, size_t n);

/*
 * How many more Pods of request req node state s holds (allocatable minus used, for every
 * resource req asks for); when none, *short_of names the first resource that runs out.
 */
unsigned sim_node_state_fits(const struct sim_node_state *s, const struct pod_resources *req,
                             const char **short_of);

/* Adds count Pods of request req to usage u (saturating). */
void sim_resources_charge(struct pod_resources *u, const struct pod_resources *req, unsigned count);

/*
 * Binds Pod k to node i (spec.nodeName, the node's list of bound Pods, its generation). Returns
 * 0, or TSR_ENOMEM with nothing changed.
 */
int sim_pod_bind(struct tsr_cluster *c, size_t k, size_t i);

/* Pod p's label key, or NULL. */
const char *sim_pod_label(const struct sim_pod *p, const char *key);

/* Sets metadata.annotations[key] = value on a Pod object. */
void sim_pod_set_annotation(json_t *pod, const char *key, const char *value);

/*
 * Node i's ledger inputs changed: a Pod was bound there or deleted from it, one of its Pods moved
 * phase or got its allocation annotation, or its GPUs were detected again. Every such change calls
 * this, so tsr_cluster_ledger may serve the ledger it computed at the same generation. i < 0
 * (an unbound Pod) is ignored.
 */
void sim_node_changed(struct tsr_cluster *c, int i);

/* Appends a zeroed Workload (uid and creation time set) and returns it, or NULL (no memory). */
struct sim_workload *sim_workload_add(struct tsr_cluster *c);

/*
 * Whether w is at rest: finished, or admitted with every Pod TAS assigned it bound (bound_all)
 * and, when it waits on the check, held (settled). No actor has anything to do with such a
 * Workload until one of its Pods is deleted (sim_workload_changed).
 */
bool sim_workload_at_rest(const struct sim_workload *w);

/*
 * The index the actors' walks over the Workloads start at: the watermark
 * c->workloads_at_rest, first moved past the Workloads now at rest.
 */
size_t sim_workloads_from(struct tsr_cluster *c);

/* Workload k may no longer be at rest (one of its Pods was deleted): the walks include it again. */
void sim_workload_changed(struct tsr_cluster *c, size_t k);

/* Removes Workload k (later indices shift down, the Pods' workload_at with them). */
void sim_workload_remove(struct tsr_cluster *c, size_t k);

#endif
