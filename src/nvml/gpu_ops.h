/*
 * gpu_ops.h - the hardware boundary: what tessera asks of a GPU driver, as a vtable.
 *
 * Two backends implement it: the NVML backend (nvml.h: dlopen of libnvidia-ml.so.1) and the fake
 * backend (fake.h), which models MIG geometry on the catalog's placement tables. The vtable only
 * reads the GPUs and creates/destroys MIG instances: nothing here changes a GPU's MIG mode or
 * resets a GPU (the operator does that, seeds/nvidia-mig.md "Prerequisites").
 *
 * Errors: every call returns 0 or a negative TSR_E* code, mapped from nvmlReturn_t alike by both
 * backends: TSR_EINUSE for IN_USE, TSR_ENOSPC for INSUFFICIENT_RESOURCES (an occupied or illegal
 * placement included), TSR_EPERM for NO_PERMISSION, TSR_ENOTSUP for NOT_SUPPORTED (a profile or MIG
 * call the GPU does not have), TSR_ENOTFOUND for NOT_FOUND, TSR_EINVAL for a bad argument,
 * TSR_ETOOBIG when an output array is too small, TSR_EBACKEND for anything else. After a failure,
 * error_detail names the failing driver call and the driver's own message. Outputs are written only
 * on success.
 *
 * Ownership: the backend object `be` belongs to its creator; a backend object is used by one thread
 * at a time.
 */
#ifndef TSR_NVML_GPU_OPS_H
#define TSR_NVML_GPU_OPS_H

#include <stdbool.h>
#include <stddef.h>

#define TSR_GPU_NAME_MAX       96
#define TSR_GPU_UUID_MAX       96
#define TSR_GPU_BUS_MAX        32
#define TSR_GPU_INSTANCES_MAX  32
#define TSR_GPU_PLACEMENTS_MAX 32

struct tsr_gpu_info {
        char name[TSR_GPU_NAME_MAX];  /* "NVIDIA H100 80GB HBM3" */
        char uuid[TSR_GPU_UUID_MAX];  /* "GPU-..." */
        char bus_id[TSR_GPU_BUS_MAX]; /* "00000000:8D:00.0" */
        unsigned pci_device_id;       /* nvmlPciInfo_t.pciDeviceId, (device << 16) | 0x10DE */
        unsigned long long memory_mib;
        bool mig_capable; /* the driver answers MIG mode queries for this GPU */
        bool mig_current; /* MIG mode in effect now */
        bool mig_pending; /* MIG mode after the next GPU reset; == mig_current when none pending */
};

/* A GPU-instance profile as the driver reports it (nvmlGpuInstanceProfileInfo_t). */
struct tsr_gpu_profile_info {
        unsigned id;             /* driver profile id: what placements, create and list take */
        unsigned slices;         /* compute slices ("g") */
        unsigned instance_count; /* most instances of the profile per GPU */
        unsigned long long memory_mib;
};

/* A placement on the memory-slice axis (nvmlGpuInstancePlacement_t). */
struct tsr_gpu_placement {
        unsigned start, size;
};

struct tsr_gpu_instance {
        unsigned gi_id;
        unsigned gi_profile_id;          /* nvmlGpuInstanceProfileInfo_t.id */
        unsigned start, size;            /* placement, memory slices */
        unsigned slices;                 /* the GPU instance's compute slices */
        unsigned n_ci;                   /* compute instances on it */
        unsigned ci_id;                  /* the first compute instance's id (valid when n_ci > 0) */
        unsigned ci_slices;              /* the first compute instance's compute slices */
        char mig_uuid[TSR_GPU_UUID_MAX]; /* MIG device UUID of the first compute instance */
};

/*
 * True when someone subdivided the GPU instance by hand (nvidia-smi mig -cci): more than one
 * compute instance, or one that does not cover the whole GPU instance. Such an instance has no
 * single device id and is refused (seeds/nvidia-mig.md, "A partition is one whole GPU instance").
 */
static inline bool tsr_gpu_instance_subdivided(const struct tsr_gpu_instance *in)
{
        return in->n_ci > 1 || (in->n_ci == 1 && in->ci_slices != in->slices);
}

struct tsr_gpu_ops {
        /* The driver's version ("550.90.07") into out (at most len bytes, NUL included). */
        int (*driver_version)(void *be, char *out, size_t len);
        int (*device_count)(void *be, unsigned *out);
        int (*device_info)(void *be, unsigned gpu, struct tsr_gpu_info *out);
        /*
         * The GPU-instance profile at NVML index nvml_index (NVML_GPU_INSTANCE_PROFILE_*, the
         * catalog's nvml_index): TSR_ENOTSUP when the GPU lacks it, TSR_EINVAL past the driver's
         * last index.
         */
        int (*profile_info)(void *be, unsigned gpu, unsigned nvml_index,
                            struct tsr_gpu_profile_info *out);
        /* The possible placements of driver profile id gi_profile_id, ascending by start. */
        int (*placements)(void *be, unsigned gpu, unsigned gi_profile_id,
                          struct tsr_gpu_placement *out, size_t max, size_t *n);
        /* Creates a GPU instance of gi_profile_id at start; *gi_id on success. */
        int (*gi_create)(void *be, unsigned gpu, unsigned gi_profile_id, unsigned start,
                         unsigned *gi_id);
        /* Creates a compute instance covering the whole GPU instance; its MIG UUID in *uuid. */
        int (*ci_create)(void *be, unsigned gpu, unsigned gi_id, unsigned *ci_id,
                         char uuid[TSR_GPU_UUID_MAX]);
        /* Destroys a compute instance; its GPU instance stays. */
        int (*ci_destroy)(void *be, unsigned gpu, unsigned gi_id, unsigned ci_id);
        /* Destroys a GPU instance: TSR_EINUSE while a compute instance lives on it. */
        int (*gi_destroy)(void *be, unsigned gpu, unsigned gi_id);
        /* Lists the GPU instances of gpu, in placement order. */
        int (*gi_list)(void *be, unsigned gpu, struct tsr_gpu_instance *out, size_t max, size_t *n);
        /*
         * What the last failed call saw, "nvmlGpuInstanceDestroy: In use by another client";
         * "" before any failure. Valid until the next call on be.
         */
        const char *(*error_detail)(void *be);
};

#endif
