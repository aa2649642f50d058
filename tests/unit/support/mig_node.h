/*
 * mig_node.h - one node for the src/mig tests: fake GPUs of a product, a marker store (memory, or
 * files under a directory), the device manager's detection, and the Pods it serves, with their
 * allocations as the claims a reclaim pass sees. Allocate rebuilds the ledger from those claims
 * the way the device manager does, then calls tsr_mig_reserve.
 *
 * mx_check asserts the two crash-safety invariants: no double allocation (no two markers or
 * claims on one placement, no overlapping instances) and, with settled, no leak (every live GPU
 * instance is marked by a live Pod). Ownership: the node owns its fake, store and reclaimer.
 */
#ifndef TSR_TEST_SUPPORT_MIG_NODE_H
#define TSR_TEST_SUPPORT_MIG_NODE_H

#include <stdbool.h>

#include "core/capability.h"
#include "mig/carve.h"
#include "mig/reclaim.h"
#include "nvml/fake.h"

#define MX_GPUS 2
#define MX_PODS 16

struct mx_pod {
        char uid[40];
        bool live;
        bool granted;
        struct tsr_mig_grant grant;
};

struct mx_node {
        struct tsr_fake_gpus *fake;
        struct tsr_mig_gpus gpus;
        struct tsr_mig_store *store;
        struct tsr_mig_reclaimer *reclaimer;
        struct tsr_accel_cap caps[MX_GPUS];
        size_t n_pods;
        struct mx_pod pods[MX_PODS];
        unsigned logs[3]; /* log lines per level */
        char last_log[1024];
};

/* An H100 node with MX_GPUS MIG GPUs; pods_dir NULL: a memory store. */
void mx_init(struct mx_node *n, const char *pods_dir);

/* As mx_init over GPUs loaded from state (a restart): new store and reclaimer objects. */
void mx_init_loaded(struct mx_node *n, struct tsr_fake_gpus *fake, const char *pods_dir);

/* Frees the fake, store and reclaimer (not the pods: a restart keeps them). */
void mx_release(struct mx_node *n);

/* The Pod named uid, added live when new. */
struct mx_pod *mx_pod(struct mx_node *n, const char *uid);

/* Allocate for container "main" of Pod uid: the rc of tsr_mig_reserve; records the claim. */
int mx_allocate(struct mx_node *n, const char *uid, const char *profile, struct tsr_diag *diag);

/* One reclaim pass over the live Pods and their claims; its rc. */
int mx_pass(struct mx_node *n, struct tsr_mig_pass_stats *stats);

/* Runs passes until nothing changes (at most 12). */
void mx_settle(struct mx_node *n);

/* The live GPU instances of gpu. */
size_t mx_instances(struct mx_node *n, unsigned gpu, struct tsr_gpu_instance *out);

/* The number of markers (corrupt ones included). */
size_t mx_markers(struct mx_node *n);

/* Asserts no double allocation; with settled also no leak. */
void mx_check(struct mx_node *n, bool settled);

#endif
