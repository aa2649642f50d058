/*
 * allocate.h - Allocate for an accelerator-bound claim (exclusive, shared, sliced): the kubelet
 * chose the accelerators by choosing the tokens, so the plugin checks them and records them.
 *
 * Refusals (FailedPrecondition upstream, spec/upstream-behavior.md §8) come from core/alloc.h's
 * tsr_alloc_refuse: a card held in another mode, two shares on one card, a slice on a card with
 * no free slot or too few units. With the sliced allocate gate off, a slice is refused only for
 * another mode: it is granted and the ledger clamps at 0. A granted claim is charged to the ledger
 * in place and described as the container's entry of the allocation annotation. The caller holds
 * the node's allocation lock across identify, refuse and charge. Pure.
 */
#ifndef TSR_DEVICEPLUGIN_ALLOCATE_H
#define TSR_DEVICEPLUGIN_ALLOCATE_H

#include <stdbool.h>
#include <stddef.h>

#include "codec/alloc_annotation.h"
#include "core/demand.h"
#include "core/ledger.h"
#include "deviceplugin/node.h"

/* Room for the comma-separated UUIDs a container sees. */
#define TSR_DP_VISIBLE_MAX (TSR_ALLOC_ACCELS_MAX * TSR_UUID_MAX)

struct tsr_dp_grant {
        struct tsr_container_allocation alloc; /* the container's annotation entry */
        char visible[TSR_DP_VISIBLE_MAX];      /* UUIDs to expose, comma-separated */
};

/*
 * Allocates ids[0..n_ids) of family f (exclusive, shared or sliced) to container. slice_units is
 * the slice's units (from the container's request; ignored for other families). Returns 0 with
 * *out filled and ledger charged; TSR_EPARSE when an ID is not a token of this node; TSR_EINVAL
 * for an empty or oversized claim or another family; TSR_ENOSPC when the claim is refused. msg
 * receives the reason for any non-zero return.
 */
int tsr_dp_allocate_bound(const struct tsr_dp_node *node, struct tsr_accel_ledger *ledger,
                          enum tsr_family f, const char *const *ids, size_t n_ids,
                          int64_t slice_units, bool sliced_gate, const char *container,
                          struct tsr_dp_grant *out, char *msg, size_t len);

/* Appends uuid to a grant's visible list (comma-separated); false when it does not fit. */
bool tsr_dp_grant_expose(struct tsr_dp_grant *g, const char *uuid);

#endif
