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
