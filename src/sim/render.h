/*
 * render.h - what kubectl and nvidia-smi print for the simulator's objects. JSON objects use the
 * upstream field names and Kubernetes' canonical quantities, keys sorted as the API server's
 * encoder writes maps. Every function appends to out and returns 0 or a buffer/JSON error.
 */
#ifndef TSR_SIM_RENDER_H
#define TSR_SIM_RENDER_H

#include <stdbool.h>

#include "sim/cluster.h"

struct tsr_buf;
struct tsr_diag;

/* Appends v (takes its reference) as indented JSON with sorted keys, as kubectl -o json prints. */
int sim_render_dump(json_t *v, struct tsr_buf *out);

struct sim_table;

/*
 * Prints what a `kubectl get` collected: with json, the one object asked for by name or a List
 * of items; otherwise the table t.
 */
int sim_render_result(json_t *items, bool by_name, bool json, const struct sim_table *t,
                      struct tsr_buf *out);

/* apimachinery's duration.HumanDuration of s whole seconds ("8s", "3m", "2m30s", "5h"). */
void sim_render_age(int64_t s, char *out, size_t len);

/* An RFC 3339 timestamp of virtual second t (the simulation starts at 2026-01-01T00:00:00Z). */
void sim_render_time(int64_t t, char *out, size_t len);

/* Pool p as its InstanceType object (a new reference), or NULL on a corrupt ledger. */
json_t *sim_instancetype_json(const struct tsr_cluster *c, const struct tsr_chain_pool *p);

/*
 * Pool p as its ClusterQueue (codec/kueue_chain.h, a new reference): stopPolicy None, the
 * gpustack-node-devices check referenced when p is accelerated. NULL when out of memory.
 */
json_t *sim_clusterqueue_json(const struct tsr_cluster *c, const struct tsr_chain_pool *p);

/* Whether what names a kind of the Kueue chain sim_render_chain prints ("clusterqueues", ...). */
bool sim_render_chain_kind(const char *what);

/*
 * `kubectl get resourceflavors|clusterqueues|localqueues|topologies|admissionchecks [NAME]
 * [-o json]` (what as sim_render_chain_kind accepts it): the objects `tessera controller`
 * applies, a NAME table without -o json; LocalQueues in namespace ns.
 */
int sim_render_chain(const struct tsr_cluster *c, const char *what, const char *ns,
                     const char *name, bool json, struct tsr_buf *out, struct tsr_diag *diag);

/* Workload w as its kueue.x-k8s.io/v1beta2 object (a new reference). */
json_t *sim_workload_json(const struct tsr_cluster *c, const struct sim_workload *w);

/* `kubectl get workloads [NAME] [-o json]` in namespace ns. */
int sim_render_workloads(const struct tsr_cluster *c, const char *ns, const char *name, bool json,
                         struct tsr_buf *out);

/* `kubectl get instancetypes [NAME] [-o wide|json]`. name may be NULL. */
int sim_render_instancetypes(const struct tsr_cluster *c, const char *name, const char *output,
                             struct tsr_buf *out, struct tsr_diag *diag);

/* `kubectl get node NAME -o json`. */
int sim_render_node(const struct tsr_cluster *c, size_t node, struct tsr_buf *out,
                    struct tsr_diag *diag);

/* `kubectl get devices NAME [-o json]`: the summary lines, or the Devices object. */
int sim_render_devices(const struct tsr_cluster *c, size_t node, bool json, struct tsr_buf *out,
                       struct tsr_diag *diag);

/* `kubectl get pods [-o wide]` over namespace ns, or one Pod (`kubectl get pod NAME`). */
int sim_render_pods(const struct tsr_cluster *c, const char *ns, const char *name, bool wide,
                    struct tsr_buf *out);

/* `kubectl get pod NAME -o json`. */
int sim_render_pod_json(const struct tsr_cluster *c, size_t pod, struct tsr_buf *out);

/* `kubectl exec POD -- nvidia-smi -L`: the devices the container sees. */
int sim_render_container_smi(const struct tsr_cluster *c, size_t pod, struct tsr_buf *out,
                             struct tsr_diag *diag);

#endif
