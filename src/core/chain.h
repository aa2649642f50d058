/*
 * chain.h - the Kueue chain derived from nodes (spec/upstream-behavior.md §9 and the
 * NodeFlavorReconciler / NodeQueueReconciler / NodeQueueEntranceReconciler rows of §15): which
 * pools (InstanceType = ClusterQueue, with its entrance LocalQueue) the nodes make, the
 * ResourceFlavors of a pool by per-node count, the hostname Topology every flavor references,
 * and the feature labels a node carries so that each flavor's nodeLabels select exactly its
 * pool's nodes. The simulator and `tessera controller` both derive the chain here; codec/
 * kueue_chain.h renders it as Kueue objects.
 *
 * Rules, with gKey "generic" (instance-type-aware-cpu-manufacturer off, the only mode tessera
 * runs):
 *   pools    a generic CPU pool gpustack--generic-<os>-<arch> per (os, arch) over every node
 *            of it, plus an accelerated pool gpustack--<aKey>-<os>-<arch> per (product, os,
 *            arch) over the nodes with at least one accelerator of that product
 *            (instance-type-mixed-on-node on: an accelerated node serves both); sorted by name;
 *   flavors  a pool's nodes grouped by per-node count (accelerators, or whole cores:
 *            cpu_milli / 1000, for the generic pool), smallest count first, named
 *            gpustack--generic--<aKey>-<os>-<arch>-<N>d or gpustack--generic-<os>-<arch>-<N>c;
 *            nominal quota = sum over the member nodes of tsr_credits_quota(N) (credits), or
 *            of cpu_milli (CPU milli-cores, the generic pool);
 *   topology levels [kubernetes.io/hostname] (no TopologySource is read), profile fnv64-<16 hex
 *            of FNV-1a-64 over the NUL-delimited level keys>, Topology gpustack-<profile>;
 *   labels   a node: gpustack.ai/managed=true, topology.gpustack.ai/profile=<profile>,
 *            general.feature.gpustack.ai/generic=true, and with accelerators
 *            acceleratable.feature.gpustack.ai/<aKey>=true and <that key>.count=<N>; a flavor's
 *            nodeLabels: the managed mark, kubernetes.io/os and kubernetes.io/arch, the
 *            general key, the profile, and for an accelerated flavor its <aKey> and
 *            <aKey>.count. The kubelet's own labels (hostname, os, arch) are not the chain's.
 * A node is invalid (TSR_EINVAL) when its os or arch is not a Kubernetes label value or its
 * product's <aKey>.capacity is not a label name; a name that does not fit TSR_NAME_MAX, or more
 * pools or flavors than the caller's room, is TSR_ETOOBIG. A function that fails leaves *n,
 * node_flavor and *out untouched; the pools and flavors arrays may have been used as scratch.
 *
 * Ownership: every function borrows its inputs for the call; the outputs are the caller's
 * storage, and a pool or flavor keeps no pointer into the nodes (only the static product row).
 * Pure; thread-safe. Cost: O(nodes x pools) and O(nodes x flavors), a few thousand nodes.
 */
#ifndef TSR_CORE_CHAIN_H
#define TSR_CORE_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/catalog.h"
#include "core/instancetype.h"
#include "core/keys.h"

struct tsr_diag;

#define TSR_CHAIN_POOLS_MAX   32
#define TSR_CHAIN_FLAVORS_MAX 64 /* Kueue v1beta2: the flavors of one resource group */
#define TSR_CHAIN_VALUE_MAX   64 /* a label value, 63 characters, and its NUL */
#define TSR_CHAIN_LABELS_MAX  8
#define TSR_CHAIN_LEVELS_MAX  1

#define TSR_CHAIN_GENERAL_KEY    "generic"
#define TSR_CHAIN_MANAGED_LABEL  "gpustack.ai/managed"
#define TSR_CHAIN_PROFILE_LABEL  "topology.gpustack.ai/profile"
#define TSR_CHAIN_GENERAL_PREFIX "general.feature.gpustack.ai/"
#define TSR_CHAIN_HOSTNAME_LABEL "kubernetes.io/hostname"
#define TSR_CHAIN_OS_LABEL       "kubernetes.io/os"
#define TSR_CHAIN_ARCH_LABEL     "kubernetes.io/arch"

/* A node as the chain reads it. */
struct tsr_chain_node {
        const char *name;
        const char *os, *arch;             /* kubernetes.io/os and kubernetes.io/arch */
        const struct tsr_product *product; /* NULL: CPU-only */
        unsigned accel_count;              /* accelerators of product; 0 serves no such pool */
        int64_t cpu_milli;
};

/* A pool: an InstanceType and its ClusterQueue (same name), entered by one LocalQueue name. */
struct tsr_chain_pool {
        char name[TSR_NAME_MAX];
        char entrance[TSR_ENTRANCE_LEN + 1];
        const struct tsr_product *product; /* NULL: the generic CPU pool */
        char os[TSR_CHAIN_VALUE_MAX], arch[TSR_CHAIN_VALUE_MAX];
};

/* A ResourceFlavor: the nodes of a pool with one per-node count. */
struct tsr_chain_flavor {
        char name[TSR_NAME_MAX];
        unsigned per_node; /* accelerators per node, or whole cores for the generic pool */
        unsigned nodes;    /* how many nodes it holds */
        int64_t nominal;   /* its quota: credits, or CPU milli-cores (saturating) */
};

struct tsr_chain_topology {
        size_t n_levels;
        const char *levels[TSR_CHAIN_LEVELS_MAX]; /* node label keys, outermost first */
        char profile[32];                         /* "fnv64-<16 hex>" */
        char name[48];                            /* "gpustack-<profile>" */
};

struct tsr_chain_label {
        char key[TSR_KEY_MAX];
        char value[TSR_CHAIN_VALUE_MAX];
};

struct tsr_chain_labels {
        size_t n;
        struct tsr_chain_label l[TSR_CHAIN_LABELS_MAX];
};

/*
 * Fills pools[0..*n) with the pools nodes[0..n_nodes) derive, sorted by name. Returns 0,
 * TSR_EINVAL (an invalid node) or TSR_ETOOBIG (more than max pools, a name too long), with diag.
 */
int tsr_chain_pools(const struct tsr_chain_node *nodes, size_t n_nodes,
                    struct tsr_chain_pool *pools, size_t max, size_t *n, struct tsr_diag *diag);

/* Whether node serves pool p: the generic pool spans every node of its os/arch. */
bool tsr_chain_node_in_pool(const struct tsr_chain_node *node, const struct tsr_chain_pool *p);

/*
 * Fills flavors[0..*n) with pool p's flavors over nodes[0..n_nodes), smallest per-node count
 * first, and, when node_flavor is not NULL, sets node_flavor[i] to node i's flavor index (-1
 * outside the pool). Returns 0 or TSR_ETOOBIG (more than max flavors, a name too long), with
 * diag.
 */
int tsr_chain_flavors(const struct tsr_chain_node *nodes, size_t n_nodes,
                      const struct tsr_chain_pool *p, struct tsr_chain_flavor *flavors, size_t max,
                      size_t *n, int *node_flavor, struct tsr_diag *diag);

/* The Topology every derived flavor references (hostname level only). Cannot fail. */
void tsr_chain_topology(struct tsr_chain_topology *out);

/*
 * Writes the feature key of pool p, "general.feature.gpustack.ai/generic" or
 * "acceleratable.feature.gpustack.ai/<aKey>", into out (TSR_KEY_MAX bytes). Returns 0 or
 * TSR_ETOOBIG.
 */
int tsr_chain_feature_key(const struct tsr_chain_pool *p, char *out);

/* The feature labels of node n (header). Returns 0 or TSR_EINVAL / TSR_ETOOBIG, with diag. */
int tsr_chain_node_labels(const struct tsr_chain_node *n, struct tsr_chain_labels *out,
                          struct tsr_diag *diag);

/* The nodeLabels of flavor f of pool p (header). Returns 0 or TSR_ETOOBIG, with diag. */
int tsr_chain_flavor_node_labels(const struct tsr_chain_pool *p, const struct tsr_chain_flavor *f,
                                 struct tsr_chain_labels *out, struct tsr_diag *diag);

#endif
