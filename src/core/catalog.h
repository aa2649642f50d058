/*
 * catalog.h - the static tables: manufacturers, accelerator products, MIG profiles.
 *
 * The data lives in manufacturers.def, products.def and mig_profiles.def (X-macro files); this
 * module only expands and looks them up. Every pointer returned here points into static const
 * storage, valid for the life of the process. Pure and thread-safe.
 *
 * A MIG axis is never assumed to be 8 wide: tsr_product_mig_width derives it from the placement
 * table as max(start + size), which is 4 on an A30 and 12 on an RTX PRO 6000.
 */
#ifndef TSR_CORE_CATALOG_H
#define TSR_CORE_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Units (and credits) of one whole accelerator: upstream ResourceMaxUnits, "M". */
#define TSR_UNITS_PER_ACCEL INT64_C(1600000)
/* Ownership shares per accelerator and the units of one share. */
#define TSR_SHARES_PER_ACCEL 10
#define TSR_UNITS_PER_SHARE  (TSR_UNITS_PER_ACCEL / TSR_SHARES_PER_ACCEL)
/* Units of one memory percentage point. */
#define TSR_UNITS_PER_PERCENT (TSR_UNITS_PER_ACCEL / 100)
/* Device-plugin tokens per accelerator of the visibility resource. */
#define TSR_VISIBILITY_TOKENS_PER_ACCEL 512
/* Widest MIG axis a table may describe (bits of a uint32_t mask). */
#define TSR_MIG_AXIS_MAX 32
/* Most profiles one product may list. */
#define TSR_MIG_PROFILES_MAX 16

enum tsr_manufacturer_id {
#define MANUFACTURER(E, key, pci, base, rt, kind, slots, oc) TSR_MFR_##E,
#include "core/manufacturers.def"
#undef MANUFACTURER
        TSR_MFR__COUNT
};

struct tsr_manufacturer {
        enum tsr_manufacturer_id id;
        const char *key;            /* "nvidia" */
        const char *pci_vendor;     /* "10de" */
        const char *base;           /* resource base, "nvidia.com/gpu" */
        const char *runtime_class;  /* "nvidia", or NULL */
        const char *partition_kind; /* "mig", or NULL: no .partitioned* keys */
        unsigned slice_slots;       /* logical slices per accelerator */
        bool cores_overcommit;      /* each slice may claim up to 100 % of compute */
};

struct tsr_mig_profile {
        const char *name;       /* "3g.40gb", as the driver names it */
        unsigned gi_profile_id; /* nvmlGpuInstanceProfileInfo_t.id */
        unsigned nvml_index;    /* NVML_GPU_INSTANCE_PROFILE_* */
        uint64_t memory_mib;
        unsigned compute_slices;
        unsigned size;          /* span in memory slices */
        uint32_t starts;        /* bit s set: s is a legal start */
        unsigned max_instances; /* instanceCount */
};

struct tsr_product {
        const char *name; /* driver-reported name, "NVIDIA H100 80GB HBM3" */
        enum tsr_manufacturer_id manufacturer;
        uint64_t vram_mib;
        unsigned unit_cpu;                      /* InstanceType unit preset: cores */
        unsigned unit_ram_gib;                  /* InstanceType unit preset: GiB */
        const struct tsr_mig_profile *profiles; /* NULL when the product has no MIG */
        size_t n_profiles;
};

/* Returns the manufacturer row for id (never NULL for a valid id). */
const struct tsr_manufacturer *tsr_catalog_manufacturer(enum tsr_manufacturer_id id);

/* Returns the manufacturer whose key is key ("nvidia"), or NULL. */
const struct tsr_manufacturer *tsr_catalog_manufacturer_by_key(const char *key);

/* Returns the product the driver reports as name (exact match), or NULL. */
const struct tsr_product *tsr_catalog_product_by_name(const char *name);

/* Returns the number of products and, in *out, the first of them (an array). */
size_t tsr_catalog_products(const struct tsr_product **out);

/* True when the product can run in MIG mode. */
bool tsr_product_has_mig(const struct tsr_product *p);

/* Width of the product's MIG axis, max(start + size) over every placement; 0 without MIG. */
unsigned tsr_product_mig_width(const struct tsr_product *p);

/* Returns the product's profile named name, or NULL. */
const struct tsr_mig_profile *tsr_product_profile(const struct tsr_product *p, const char *name);

/*
 * The profile's memory as its name states it, in MiB: "3g.40gb" is 40 x 1024 = 40960. This is the
 * memoryMib the capability publishes and the partition fold divides (seeds/nvidia-mig.md: a
 * 3g.40gb and a logical 40Gi slice cost the same); memory_mib is what the driver reports (-lgip).
 * 0 when the name states no "<n>gb".
 */
uint64_t tsr_mig_profile_nominal_mib(const struct tsr_mig_profile *p);

/* Number of legal starts of profile p. */
unsigned tsr_mig_profile_start_count(const struct tsr_mig_profile *p);

#endif
