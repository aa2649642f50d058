/*
 * capability.h - what one accelerator can serve, as its device manager detected it: the
 * `Devices` spec side. An accelerator is in exactly one population: unpartitioned (exclusive,
 * shared and logical slices) or partitioned (partitions only, of its offered profiles).
 *
 * Offered profiles are the product's fixed set minus those with no legal placement and those whose
 * per-profile key would not be a valid resource name ("+me", "+me.all", "+gfx"). The capability
 * never moves with allocations; it changes only on re-detection. Pure value type.
 */
#ifndef TSR_CORE_CAPABILITY_H
#define TSR_CORE_CAPABILITY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/catalog.h"

#define TSR_UUID_MAX       96
#define TSR_PCI_BUS_ID_MAX 32

struct tsr_accel_cap {
        unsigned index;                      /* position in its group, from 0 */
        char uuid[TSR_UUID_MAX];             /* "GPU-..." */
        char pci_bus_id[TSR_PCI_BUS_ID_MAX]; /* as the driver reports it, "" when unknown */
        const struct tsr_product *product;
        bool partitioned;      /* MIG mode was on at detection */
        uint32_t offered;      /* partitioned: bit i = product profile i is offered */
        unsigned slice_slots;  /* unpartitioned: logical slices it can host */
        bool cores_overcommit; /* unpartitioned: each slice may claim 100 % compute */
};

/*
 * Fills *out for accelerator index of product p detected with MIG mode mig_on. uuid is copied
 * (truncated to TSR_UUID_MAX - 1). A product without MIG is never partitioned. The PCI bus id is
 * left "" (tsr_capability_set_pci_bus_id).
 */
void tsr_capability_detect(const struct tsr_product *p, unsigned index, const char *uuid,
                           bool mig_on, struct tsr_accel_cap *out);

/* Copies the driver's PCI bus id bus_id ("00000000:8D:00.0") into c, truncated to fit. */
void tsr_capability_set_pci_bus_id(struct tsr_accel_cap *c, const char *bus_id);

/* Number of instances of profile i an empty partitioned accelerator hosts (its static ceiling). */
unsigned tsr_capability_profile_ceiling(const struct tsr_accel_cap *c, unsigned i);

/* The largest static ceiling over the offered profiles ("count=7" on an H100). */
unsigned tsr_capability_partition_count(const struct tsr_accel_cap *c);

#endif
