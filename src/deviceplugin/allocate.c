/*
 * allocate.c - Allocate for accelerator-bound claims.
 */
#include "deviceplugin/allocate.h"

#include "base/err.h"
#include "core/alloc.h"
#include "core/tokens.h"

#include <stdio.h>
#include <string.h>

bool tsr_dp_grant_expose(struct tsr_dp_grant *g, const char *uuid)
{
        size_t used = strlen(g->visible), add = strlen(uuid) + (used ? 1 : 0);

        if (used + add >= sizeof(g->visible))
                return false;
        snprintf(g->visible + used, sizeof(g->visible) - used, "%s%s", used ? "," : "", uuid);
        return true;
}

/* The refusal check; with the gate off a slice is checked for another mode only. */
static bool refused(const struct tsr_dp_node *node, const struct tsr_accel_ledger *ledger,
                    enum tsr_family f, const unsigned *accels, size_t n, int64_t units, bool gate,
                    char *msg, size_t len)
{
        static const unsigned only = 0; /* the one accelerator of a one-element view */
        struct tsr_accel_ledger one;

        if (f != TSR_FAMILY_SLICED || gate)
                return tsr_alloc_refuse(node->caps, ledger, node->n, f, accels, n, units, msg, len);
        for (size_t k = 0; k < n; k++) {
                one = ledger[accels[k]];
                one.allocated_slices = 0;
                if (tsr_alloc_refuse(&node->caps[accels[k]], &one, 1, f, &only, 1, 0, msg, len))
                        return true;
        }
        return false;
}

int tsr_dp_allocate_bound(const struct tsr_dp_node *node, struct tsr_accel_ledger *ledger,
                          enum tsr_family f, const char *const *ids, size_t n_ids,
                          int64_t slice_units, bool sliced_gate, const char *container,
                          struct tsr_dp_grant *out, char *msg, size_t len)
{
        unsigned accels[TSR_ALLOC_ACCELS_MAX];
        struct tsr_demand d = {.family = f, .cards = (unsigned)n_ids};

        if (f != TSR_FAMILY_EXCLUSIVE && f != TSR_FAMILY_SHARED && f != TSR_FAMILY_SLICED) {
                snprintf(msg, len, "%s is not an accelerator-bound family", tsr_family_name(f));
                return TSR_EINVAL;
        }
        if (n_ids == 0 || n_ids > TSR_ALLOC_ACCELS_MAX) {
                snprintf(msg, len, "a claim of %zu %s tokens is outside 1..%d", n_ids,
                         tsr_family_name(f), TSR_ALLOC_ACCELS_MAX);
                return TSR_EINVAL;
        }
        if (f == TSR_FAMILY_SLICED) {
                d.units = slice_units;
                d.cards = 1;
        }
        for (size_t k = 0; k < n_ids; k++) {
                char dev[TSR_UUID_MAX];
                unsigned idx;
                int a = -1;

                if (tsr_token_parse(ids[k], node->group, dev, &idx) ||
                    (a = tsr_dp_node_find(node, dev)) < 0) {
                        snprintf(msg, len, "device %s is not a %s token of this node", ids[k],
                                 node->group);
                        return TSR_EPARSE;
                }
                accels[k] = (unsigned)a;
        }
        if (refused(node, ledger, f, accels, n_ids, d.units, sliced_gate, msg, len))
                return TSR_ENOSPC;
        memset(out, 0, sizeof(*out));
        snprintf(out->alloc.container, sizeof(out->alloc.container), "%s", container);
        snprintf(out->alloc.group_id, sizeof(out->alloc.group_id), "%.*s",
                 (int)sizeof(out->alloc.group_id) - 1, node->group);
        snprintf(out->alloc.manufacturer, sizeof(out->alloc.manufacturer), "%s", node->m->key);
        for (size_t k = 0; k < n_ids; k++) {
                const struct tsr_accel_cap *c = &node->caps[accels[k]];
                struct tsr_accel_allocation *aa = &out->alloc.accels[out->alloc.n++];
                struct tsr_alloc_pick pick = {accels[k], -1, 0};

                snprintf(aa->id, sizeof(aa->id), "%s", c->uuid);
                aa->index = c->index;
                aa->allocated = tsr_demand_units_per_card(&d);
                aa->slices = f == TSR_FAMILY_SLICED;
                aa->mode = tsr_alloc_charge(node->caps, ledger, &d, &pick);
                snprintf(out->alloc.device_ids[out->alloc.n_device_ids++],
                         sizeof(out->alloc.device_ids[0]), "%s", ids[k]);
                if (f != TSR_FAMILY_SLICED || k == 0)
                        tsr_dp_grant_expose(out, c->uuid);
        }
        return 0;
}
