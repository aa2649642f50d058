/*
 * preferred.c - the packing hint: pick accelerators on a ledger copy where every accelerator
 * without an available token reads as held, then name one available token of each pick.
 */
#include "deviceplugin/preferred.h"

#include "base/err.h"
#include "core/alloc.h"
#include "core/tokens.h"

#include <stdlib.h>
#include <string.h>

static bool chosen(const char **out, size_t n, const char *id)
{
        for (size_t i = 0; i < n; i++)
                if (!strcmp(out[i], id))
                        return true;
        return false;
}

/* Appends the first available token of accelerator a not chosen yet; false when none is left. */
static bool take_token_of(const struct tsr_dp_node *node, const char *const *available,
                          size_t n_avail, unsigned a, const char **out, size_t *n_out)
{
        char dev[TSR_UUID_MAX];
        unsigned idx;

        for (size_t i = 0; i < n_avail; i++) {
                if (tsr_token_parse(available[i], node->group, dev, &idx) ||
                    tsr_dp_node_find(node, dev) != (int)a || chosen(out, *n_out, available[i]))
                        continue;
                out[(*n_out)++] = available[i];
                return true;
        }
        return false;
}

/* Packs the rest of a bound-family request; false when the packing order cannot fill it. */
static bool pack(const struct tsr_dp_node *node, struct tsr_accel_ledger *copy, enum tsr_family f,
                 const char *const *available, size_t n_avail, unsigned want, int64_t slice_units,
                 const char **out, size_t *n_out)
{
        struct tsr_alloc_pick picks[TSR_ALLOC_BATCH_MAX];
        bool has_token[TSR_ALLOC_BATCH_MAX] = {false};
        char dev[TSR_UUID_MAX];
        unsigned idx;
        int rc;

        if (want == 0)
                return true;
        if (node->n > TSR_ALLOC_BATCH_MAX || want > TSR_ALLOC_BATCH_MAX)
                return false;
        for (size_t i = 0; i < n_avail; i++) {
                int a;

                if (tsr_token_parse(available[i], node->group, dev, &idx) ||
                    (a = tsr_dp_node_find(node, dev)) < 0 || chosen(out, *n_out, available[i]))
                        continue;
                has_token[a] = true;
        }
        /* distinct accelerators: one already chosen (a must-include token) is not picked again */
        for (size_t i = 0; i < *n_out; i++) {
                int a;

                if (!tsr_token_parse(out[i], node->group, dev, &idx) &&
                    (a = tsr_dp_node_find(node, dev)) >= 0)
                        has_token[a] = false;
        }
        for (size_t a = 0; a < node->n; a++) {
                if (has_token[a])
                        continue;
                copy[a].mode = TSR_MODE_EXCLUSIVE; /* reads as held: never picked */
                copy[a].remaining = 0;
        }
        rc = f == TSR_FAMILY_EXCLUSIVE
                 ? tsr_alloc_pick_exclusive(node->caps, copy, node->n, want, picks)
             : f == TSR_FAMILY_SHARED
                 ? tsr_alloc_pick_shared(node->caps, copy, node->n, want, picks)
                 : tsr_alloc_pick_slice(node->caps, copy, node->n,
                                        slice_units > 0 ? slice_units : 1, picks);
        if (rc || (f == TSR_FAMILY_SLICED && want != 1))
                return false;
        for (unsigned k = 0; k < want; k++)
                if (!take_token_of(node, available, n_avail, picks[k].accel, out, n_out))
                        return false;
        return true;
}

int tsr_dp_preferred(const struct tsr_dp_node *node, const struct tsr_accel_ledger *ledger,
                     enum tsr_family f, const char *const *available, size_t n_avail,
                     const char *const *must, size_t n_must, unsigned size, int64_t slice_units,
                     const char **out, size_t *n_out)
{
        bool bound = f == TSR_FAMILY_EXCLUSIVE || f == TSR_FAMILY_SHARED || f == TSR_FAMILY_SLICED;
        struct tsr_accel_ledger *copy = NULL;
        size_t base;

        *n_out = 0;
        for (size_t i = 0; i < n_must && *n_out < size; i++)
                if (!chosen(out, *n_out, must[i]))
                        out[(*n_out)++] = must[i];
        base = *n_out;
        if (bound && *n_out < size) {
                copy = malloc(node->n * sizeof(*copy));
                if (!copy)
                        return TSR_ENOMEM;
                memcpy(copy, ledger, node->n * sizeof(*copy));
                if (!pack(node, copy, f, available, n_avail, (unsigned)(size - *n_out), slice_units,
                          out, n_out))
                        *n_out = base;
                free(copy);
        }
        for (size_t i = 0; i < n_avail && *n_out < size; i++)
                if (!chosen(out, *n_out, available[i]))
                        out[(*n_out)++] = available[i];
        return 0;
}
