/*
 * gpu_ops.h - the hardware boundary: what tessera asks of a GPU driver, as a vtable.
 *
 * Two backends implement it: the NVML backend (dlopen of libnvidia-ml.so.1, issue 5) and the fake
 * backend (fake.h), which models MIG geometry exactly: GPU instances on the product's placement
 * table with one full compute instance each. Every call returns 0 or a negative TSR_E* code:
 * TSR_EINUSE for NVML_ERROR_IN_USE, TSR_ENOSPC for INSUFFICIENT_RESOURCES, TSR_ENOTFOUND for
 * NOT_FOUND, TSR_EINVAL for a bad argument. A backend object is owned by one thread at a time.
 */
#ifndef TSR_NVML_GPU_OPS_H
#define TSR_NVML_GPU_OPS_H

#include <stdbool.h>
#include <stddef.h>

#define TSR_GPU_NAME_MAX      96
#define TSR_GPU_UUID_MAX      96
#define TSR_GPU_BUS_MAX       32
#define TSR_GPU_INSTANCES_MAX 32

struct tsr_gpu_info {
        char name[TSR_GPU_NAME_MAX];  /* "NVIDIA H100 80GB HBM3" */
        char uuid[TSR_GPU_UUID_MAX];  /* "GPU-..." */
        char bus_id[TSR_GPU_BUS_MAX]; /* "00000000:8D:00.0" */
        unsigned long long memory_mib;
        bool mig_current; /* MIG mode as the driver reports it now */
};

struct tsr_gpu_instance {
        unsigned gi_id;
        unsigned gi_profile_id;          /* nvmlGpuInstanceProfileInfo_t.id */
        unsigned start, size;            /* placement, memory slices */
        unsigned n_ci;                   /* compute instances on it */
        unsigned ci_id;                  /* the first compute instance's id */
        char mig_uuid[TSR_GPU_UUID_MAX]; /* MIG device UUID of the first compute instance */
};

struct tsr_gpu_ops {
        int (*device_count)(void *be, unsigned *out);
        int (*device_info)(void *be, unsigned gpu, struct tsr_gpu_info *out);
        int (*set_mig_mode)(void *be, unsigned gpu, bool on);
        /* Creates a GPU instance of gi_profile_id at start; *gi_id on success. */
        int (*gi_create)(void *be, unsigned gpu, unsigned gi_profile_id, unsigned start,
                         unsigned *gi_id);
        /* Creates a compute instance covering the whole GPU instance; its MIG UUID in *uuid. */
        int (*ci_create)(void *be, unsigned gpu, unsigned gi_id, unsigned *ci_id,
                         char uuid[TSR_GPU_UUID_MAX]);
        int (*ci_destroy)(void *be, unsigned gpu, unsigned gi_id, unsigned ci_id);
        int (*gi_destroy)(void *be, unsigned gpu, unsigned gi_id);
        /* Lists the GPU instances of gpu, in placement order. */
        int (*gi_list)(void *be, unsigned gpu, struct tsr_gpu_instance *out, size_t max, size_t *n);
};

#endif
