/*
 * node_keys.h - the accelerator keys a node advertises, projected from capability x ledger.
 *
 * Device-plugin pools (<base>, .shared, .sliced, .partitioned, visibility) are always registered,
 * so they read 0 rather than vanish; capacity counts every token, allocatable the healthy ones (a
 * token of an accelerator held in another mode is Unhealthy). Node-capacity keys (.sliced.units,
 * the other .sliced.* budgets, .partitioned.units, one .partitioned.<kind>-<profile> per offered
 * profile) exist only while their bare pool's capacity is above 0, and allocatable equals
 * capacity for them. Per-profile keys and the .partitioned pool count allocated + remaining, so
 * the scheduler's subtraction of live requests comes out right (seeds/nvidia-mig.md §2.4).
 * Pure.
 */
#ifndef TSR_CORE_NODE_KEYS_H
#define TSR_CORE_NODE_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "core/capability.h"
#include "core/keys.h"
#include "core/ledger.h"

struct tsr_diag;

/* Enough for the fixed keys plus one per profile. */
#define TSR_NODE_KEYS_MAX (16 + TSR_MIG_PROFILES_MAX)

struct tsr_node_key {
        char name[TSR_KEY_MAX];
        int64_t capacity;
        int64_t allocatable;
};

struct tsr_node_keys {
        size_t n;
        struct tsr_node_key keys[TSR_NODE_KEYS_MAX];
};

/*
 * Projects the keys of the n accelerators of one manufacturer m on a node (caps and their
 * ledgers, index-aligned) into *out, in a fixed order (pools, then counting keys, profiles in
 * table order). All accelerators share one product. Returns 0, or TSR_EINVAL when accelerators
 * of different products are mixed (out untouched).
 */
int tsr_node_keys_project(const struct tsr_manufacturer *m, const struct tsr_accel_cap *caps,
                          const struct tsr_accel_ledger *ledger, size_t n,
                          struct tsr_node_keys *out, struct tsr_diag *diag);

/* Returns the key named name in keys, or NULL. */
const struct tsr_node_key *tsr_node_keys_find(const struct tsr_node_keys *keys, const char *name);

#endif
