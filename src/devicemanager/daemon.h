/*
 * daemon.h - `tessera device-manager` as a library: one node's accelerators served to the
 * kubelet and kept true in the API server.
 *
 * Start: unless slice isolation is off, install the slice interposer into its host directory
 * (refusing to start, naming the path, when the library cannot be read or written); detect the
 * GPUs once (re-detection is a restart: a MIG mode change applies then), run
 * MIG recovery (it only logs), build the agent over the detected capability -- reading back the
 * grant journal (grants_file) a previous run left, refusing to start, naming the file, when it
 * cannot be trusted -- one plugin per family, and the kubelet link. Then a reconcile thread, every
 * poll interval: lists the Pods bound to the node (the API server's fieldSelector spec.nodeName);
 * when they changed, tells the agent (ListAndWatch updates follow) and runs a reclaim pass; retries
 * unrecorded allocation annotations; publishes the node's capacity keys, fit labels and Devices
 * object when the agent reported a change since the last publish (a grant, the Pods) or the last
 * attempt failed; and runs a reclaim pass at least every reclaim interval (the upstream resync, 60
 * s). Allocate reads the Pods fresh from the API server every time (one uncached list), so a Pod
 * the scheduler has just bound is never missed.
 *
 * Observability: the probe server's callbacks read readiness (the kubelet link's registrations)
 * and the metrics (devicemanager/metrics.h: Allocate answers, reclaim passes, publish failures);
 * refused Allocates, failed MIG carves and MIG recovery after a restart are Events
 * (devicemanager/events.h), posted by their own thread.
 * Ownership: the daemon borrows the API client and the GPU backend until stop returns.
 * Start/stop from one thread; ready and metrics from any thread between them.
 */
#ifndef TSR_DEVICEMANAGER_DAEMON_H
#define TSR_DEVICEMANAGER_DAEMON_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"
#include "devicemanager/isolation.h"
#include "kube/client.h"
#include "mig/node.h"

struct tsr_buf;
struct tsr_dm_daemon;

struct tsr_dm_daemon_config {
        const char *node_name;
        const char *plugin_dir;    /* /var/lib/kubelet/device-plugins */
        const char *podres_socket; /* /var/lib/kubelet/pod-resources/kubelet.sock; NULL: off */
        const char *pods_dir;      /* /var/lib/kubelet/pods: MIG ownership markers */
        const char *grants_file;   /* the grant journal; NULL: <pods_dir>/.tessera-grants.json */
        struct tsr_kube_client *client;
        struct tsr_mig_gpus gpus;
        bool identify_by_kubelet; /* GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET */
        bool sliced_gate;         /* GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE */
        bool release_terminated;  /* GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS */
        /* Logical slices' isolation (devicemanager/isolation.h): the mode, the library to
         * install, the install directory as the daemon sees it and as the host does (NULL: the
         * same). Unless off, start installs the library first and fails when it cannot. */
        enum tsr_dm_isolation_mode isolation;
        const char *vgpu_library; /* TSR_DM_VGPU_LIBRARY */
        const char *vgpu_dir;     /* TSR_DM_VGPU_DIR */
        const char *vgpu_host_dir;
        unsigned poll_ms;    /* Pods poll: 2000 */
        unsigned reclaim_ms; /* reclaim resync: 60000 */
};

/* Starts the daemon. Returns 0 and *out, or an error with diag (nothing left running). */
int tsr_dm_daemon_start(const struct tsr_dm_daemon_config *cfg, struct tsr_dm_daemon **out,
                        struct tsr_diag *diag);

/*
 * Readiness (the probe server's callback; any thread): true when every plugin is registered with
 * the current kubelet, else false with why naming the resources that are not.
 */
bool tsr_dm_daemon_ready(void *daemon, char *why, size_t why_len);

/* Appends the metrics (devicemanager/metrics.h; the probe server's callback, any thread).
 * Returns 0 or a buffer error. */
int tsr_dm_daemon_metrics(void *daemon, struct tsr_buf *out);

/* Stops everything (servers, sockets, threads) and frees the daemon. NULL is a no-op. */
void tsr_dm_daemon_stop(struct tsr_dm_daemon *d);

#endif
