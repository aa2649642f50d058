/*
 * identify.h - which Pod and container an Allocate call serves. The kubelet's Allocate carries
 * only device IDs, so the plugin names the container itself (spec/upstream-behavior.md §8):
 *
 *  1. by the kubelet (pod-resources List, when the caller has it): a container the kubelet
 *     already lists with exactly these device IDs of the resource (a repeated Allocate); else,
 *     among the Pods the kubelet lists, the oldest container that requests the resource with
 *     this many tokens, holds none of it yet, and is not reserved;
 *  2. the fallback (no pod-resources answer): the same choice among the Pods bound to the node in
 *     phase Pending.
 * "Requests with this many tokens": the container's limit (else request) of the resource equals
 * the number of IDs. GetPreferredAllocation names the container the same way before the IDs are
 * chosen: ids NULL skips step 1's repeated-Allocate match and keeps the count. A container already
 * in the Pod's allocation annotation, or reserved by an earlier Allocate (the caller's predicate),
 * is never chosen twice; Pods being deleted are skipped. A visibility container (an SSH sidecar
 * shown what the rest of its Pod holds, spec/upstream-behavior.md §1.2) is named only in a Pod
 * none of whose containers asking for the node's accelerators still waits: each is annotated,
 * reserved, or (with a view) holds devices. The kubelet allocates a Pod's containers one after
 * another, so that is the Pod it is admitting, not the oldest pending one; a Pod asking for
 * nothing else qualifies at once (its sidecar sees "void"). Oldest is by
 * metadata.creationTimestamp, then namespace/name, then container order. The caller holds the
 * node's allocation lock so that identify, refuse and reserve are one step. Pure; pods and the
 * kubelet view are only read.
 */
#ifndef TSR_DEVICEPLUGIN_IDENTIFY_H
#define TSR_DEVICEPLUGIN_IDENTIFY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "codec/alloc_annotation.h"
#include "core/demand.h"
#include "deviceplugin/node.h"

/* One container's devices of one resource, as pod-resources lists them. */
struct tsr_dp_held {
        const char *ns, *pod, *container, *resource;
        const char *const *ids;
        size_t n_ids;
};

/* The kubelet's pod-resources List, flattened. */
struct tsr_dp_kubelet_view {
        const struct tsr_dp_held *held; /* every container's devices, any resource */
        size_t n_held;
        const char *const *pod_ns; /* the Pods the kubelet lists: namespaces and names */
        const char *const *pod_name;
        size_t n_pods;
};

/* Says whether (Pod UID, container) already holds a reservation of the caller's. */
typedef bool (*tsr_dp_reserved_fn)(void *ctx, const char *uid, const char *container);

/* Copies the caller's reservation for (Pod UID, container) into *out; false when it holds none
 * (or only one that charges nothing). */
typedef bool (*tsr_dp_granted_fn)(void *ctx, const char *uid, const char *container,
                                  struct tsr_container_allocation *out);

struct tsr_dp_identity {
        json_t *pod; /* borrowed from pods */
        char container[64];
        struct tsr_demand demand; /* the container's demand on the node's manufacturer */
        bool by_kubelet;          /* named through pod-resources */
};

/*
 * Names the Pod and container an Allocate of ids[0..n_ids) on resource serves (ids NULL: n_ids
 * tokens not chosen yet). pods is the array of Pods bound to the node (API server); kv may be
 * NULL (the fallback). Returns 0 with *out, or TSR_ENOTFOUND with the reason in msg.
 */
int tsr_dp_identify(const struct tsr_dp_node *node, json_t *pods,
                    const struct tsr_dp_kubelet_view *kv, const char *resource,
                    const char *const *ids, size_t n_ids, tsr_dp_reserved_fn reserved, void *ctx,
                    struct tsr_dp_identity *out, char *msg, size_t len);

/* Whether Pod a comes before Pod b in the order containers are named in:
 * metadata.creationTimestamp, then namespace, then name (the order the kubelet admits Pods in). */
bool tsr_dp_pod_older(json_t *a, json_t *b);

/*
 * A retried Allocate: the kubelet asks again for a container whose first answer it never got (the
 * plugin died between making the grant and answering). Among the Pods the kubelet lists (kv is
 * required: without it a retry cannot be told from a second container asking the same), the
 * oldest container that requests resource with n_ids tokens, that the kubelet lists holding none
 * of it, and that already holds a grant of the resource's family -- the caller's reservation
 * (granted), else its entry in the Pod's allocation annotation -- whose device IDs are exactly ids
 * (ids NULL: any). Exactly, for a partition too (its tokens name no card): the IDs are all that
 * tells one lost answer from another, and serving one container another's grant would hand a
 * device to two. Returns 0 with *out and the grant in *grant, or TSR_ENOTFOUND (TSR_ENOMEM).
 * The caller serves the grant again and charges nothing new: tsr_dp_identify never names such a
 * container, so a lost answer otherwise fails the retry and strands the grant until the Pod goes.
 * When tsr_dp_identify names a waiting container too, the older Pod's is the one the kubelet is
 * admitting (tsr_dp_pod_older; a tie goes to the waiting one).
 */
int tsr_dp_identify_retry(const struct tsr_dp_node *node, json_t *pods,
                          const struct tsr_dp_kubelet_view *kv, const char *resource,
                          const char *const *ids, size_t n_ids, tsr_dp_granted_fn granted,
                          void *ctx, struct tsr_dp_identity *out,
                          struct tsr_container_allocation *grant);

/*
 * The fewest units any waiting container asks with resource: among the Pods bound to the node in
 * phase Pending (or without a phase) and not being deleted, whatever the kubelet lists, the
 * containers that request resource (any count), are not in their Pod's allocation annotation and
 * are not reserved; only demands with units count (a slice, a partition). Returns 0 with *units,
 * TSR_ENOTFOUND when there is none, or TSR_ENOMEM. What GetPreferredAllocation packs a slice by
 * when tsr_dp_identify names nobody.
 */
int tsr_dp_smallest_pending(const struct tsr_dp_node *node, json_t *pods, const char *resource,
                            tsr_dp_reserved_fn reserved, void *ctx, int64_t *units);

#endif
