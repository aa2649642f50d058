/*
 * fake_libnvml.c - the NVML C API (src/nvml/nvml_api.h) over the fake backend's model; see
 * fake_libnvml.h. Geometry, ids, UUIDs and error semantics are the fake backend's: this file only
 * translates handles, structs and return codes, so the two backends cannot drift apart.
 */
#include "fake_libnvml.h"

#include "base/err.h"
#include "nvml/nvml_api.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX 1024

struct nvmlDevice_st {
        unsigned gpu, gi_id, ci_id;
        bool mig; /* a MIG device handle: the compute instance gi_id/ci_id */
};

struct nvmlGpuInstance_st {
        unsigned gpu, gi_id;
};

struct nvmlComputeInstance_st {
        unsigned gpu, gi_id, ci_id;
};

static struct {
        unsigned refs;
        struct tsr_fake_gpus *model;
        size_t n_dev, n_gi, n_ci;
        struct nvmlDevice_st dev[POOL_MAX];
        struct nvmlGpuInstance_st gi[POOL_MAX];
        struct nvmlComputeInstance_st ci[POOL_MAX];
} lib;

/* Compute slices of NVML_COMPUTE_INSTANCE_PROFILE_* index i (0 for those the fake lacks). */
static const unsigned ci_slices[NVML_COMPUTE_INSTANCE_PROFILE_COUNT] = {
    [NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE] = 1, [NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE] = 2,
    [NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE] = 3, [NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE] = 4,
    [NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE] = 7, [NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE] = 8,
    [NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE] = 6,
};

struct tsr_fake_gpus *tsr_fake_nvml_model(void)
{
        return lib.model;
}

static nvmlReturn_t to_nvml(int rc)
{
        switch (rc) {
        case 0:
                return NVML_SUCCESS;
        case TSR_EINVAL:
                return NVML_ERROR_INVALID_ARGUMENT;
        case TSR_ENOTSUP:
                return NVML_ERROR_NOT_SUPPORTED;
        case TSR_EPERM:
                return NVML_ERROR_NO_PERMISSION;
        case TSR_ENOTFOUND:
                return NVML_ERROR_NOT_FOUND;
        case TSR_ETOOBIG:
                return NVML_ERROR_INSUFFICIENT_SIZE;
        case TSR_EINUSE:
                return NVML_ERROR_IN_USE;
        case TSR_ENOSPC:
                return NVML_ERROR_INSUFFICIENT_RESOURCES;
        default:
                return NVML_ERROR_UNKNOWN;
        }
}

#define OPS(fn, ...) to_nvml(tsr_fake_gpu_ops.fn(lib.model, __VA_ARGS__))

static struct nvmlDevice_st *dev_handle(unsigned gpu, bool mig, unsigned gi_id, unsigned ci_id)
{
        for (size_t i = 0; i < lib.n_dev; i++) {
                struct nvmlDevice_st *d = &lib.dev[i];

                if (d->gpu == gpu && d->mig == mig &&
                    (!mig || (d->gi_id == gi_id && d->ci_id == ci_id)))
                        return d;
        }
        if (lib.n_dev == POOL_MAX)
                abort(); /* a test leaking handles: fail loudly */
        lib.dev[lib.n_dev] = (struct nvmlDevice_st){gpu, gi_id, ci_id, mig};
        return &lib.dev[lib.n_dev++];
}

static struct nvmlGpuInstance_st *gi_handle(unsigned gpu, unsigned gi_id)
{
        for (size_t i = 0; i < lib.n_gi; i++)
                if (lib.gi[i].gpu == gpu && lib.gi[i].gi_id == gi_id)
                        return &lib.gi[i];
        if (lib.n_gi == POOL_MAX)
                abort();
        lib.gi[lib.n_gi] = (struct nvmlGpuInstance_st){gpu, gi_id};
        return &lib.gi[lib.n_gi++];
}

static struct nvmlComputeInstance_st *ci_handle(unsigned gpu, unsigned gi_id, unsigned ci_id)
{
        for (size_t i = 0; i < lib.n_ci; i++)
                if (lib.ci[i].gpu == gpu && lib.ci[i].gi_id == gi_id && lib.ci[i].ci_id == ci_id)
                        return &lib.ci[i];
        if (lib.n_ci == POOL_MAX)
                abort();
        lib.ci[lib.n_ci] = (struct nvmlComputeInstance_st){gpu, gi_id, ci_id};
        return &lib.ci[lib.n_ci++];
}

/* The live GPU instance behind h, or NOT_FOUND once it is gone. */
static nvmlReturn_t gi_of(const struct nvmlGpuInstance_st *h, struct tsr_gpu_instance *out)
{
        struct tsr_gpu_instance list[TSR_GPU_INSTANCES_MAX];
        size_t n = 0;
        nvmlReturn_t r;

        if (!lib.model || !h)
                return lib.model ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
        r = OPS(gi_list, h->gpu, list, TSR_GPU_INSTANCES_MAX, &n);
        for (size_t i = 0; r == NVML_SUCCESS && i < n; i++)
                if (list[i].gi_id == h->gi_id) {
                        *out = list[i];
                        return NVML_SUCCESS;
                }
        return r == NVML_SUCCESS ? NVML_ERROR_NOT_FOUND : r;
}

static nvmlReturn_t ci_of(unsigned gpu, unsigned gi_id, unsigned ci_id, struct tsr_fake_ci *out)
{
        struct tsr_fake_ci cis[TSR_FAKE_CI_MAX];
        size_t n = 0;
        nvmlReturn_t r;

        if (!lib.model)
                return NVML_ERROR_UNINITIALIZED;
        r = to_nvml(tsr_fake_gpus_ci_list(lib.model, gpu, gi_id, cis, TSR_FAKE_CI_MAX, &n));
        for (size_t i = 0; r == NVML_SUCCESS && i < n; i++)
                if (cis[i].id == ci_id) {
                        *out = cis[i];
                        return NVML_SUCCESS;
                }
        return r == NVML_SUCCESS ? NVML_ERROR_NOT_FOUND : r;
}

static nvmlReturn_t copy_str(char *out, unsigned len, const char *s)
{
        if (!out)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (strlen(s) >= len)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(out, s, strlen(s) + 1);
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
        const char *state = getenv("TSR_FAKE_NVML_STATE"), *spec = getenv("TSR_FAKE_NVML");
        int rc;

        if (lib.refs++)
                return NVML_SUCCESS;
        if (state && *state) {
                rc = tsr_fake_gpus_load(state, &lib.model, NULL);
                if (!rc && (rc = tsr_fake_gpus_persist(lib.model, state)) != 0)
                        tsr_fake_gpus_free(lib.model);
        } else if (spec && *spec) {
                rc = tsr_fake_gpus_from_spec("fake-node", spec, &lib.model, NULL);
        } else {
                rc = TSR_ENOTFOUND;
        }
        if (rc) {
                lib.model = NULL;
                lib.refs = 0;
                return NVML_ERROR_DRIVER_NOT_LOADED;
        }
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
        if (!lib.refs)
                return NVML_ERROR_UNINITIALIZED;
        if (--lib.refs == 0) {
                tsr_fake_gpus_free(lib.model);
                memset(&lib, 0, sizeof(lib));
        }
        return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
        switch (result) {
        case NVML_SUCCESS:
                return "Success";
        case NVML_ERROR_UNINITIALIZED:
                return "Uninitialized";
        case NVML_ERROR_INVALID_ARGUMENT:
                return "Invalid Argument";
        case NVML_ERROR_NOT_SUPPORTED:
                return "Not Supported";
        case NVML_ERROR_NO_PERMISSION:
                return "Insufficient Permissions";
        case NVML_ERROR_NOT_FOUND:
                return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE:
                return "Insufficient Size";
        case NVML_ERROR_DRIVER_NOT_LOADED:
                return "Driver Not Loaded";
        case NVML_ERROR_IN_USE:
                return "In use by another client";
        case NVML_ERROR_INSUFFICIENT_RESOURCES:
                return "Insufficient Resources";
        default:
                return "Unknown Error";
        }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
        return lib.model ? copy_str(version, length, "570.133.20-fake") : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
        if (!lib.model)
                return NVML_ERROR_UNINITIALIZED;
        return to_nvml(tsr_fake_gpu_ops.device_count(lib.model, deviceCount));
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
        unsigned count = 0;

        if (!lib.model)
                return NVML_ERROR_UNINITIALIZED;
        tsr_fake_gpu_ops.device_count(lib.model, &count);
        if (index >= count || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        *device = dev_handle(index, false, 0, 0);
        return NVML_SUCCESS;
}

/* The GPU behind device (a MIG device answers for its parent). */
static nvmlReturn_t info_of(nvmlDevice_t device, struct tsr_gpu_info *info)
{
        if (!lib.model)
                return NVML_ERROR_UNINITIALIZED;
        if (!device)
                return NVML_ERROR_INVALID_ARGUMENT;
        return OPS(device_info, device->gpu, info);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
        struct tsr_gpu_info info;
        nvmlReturn_t r = info_of(device, &info);

        return r ? r : copy_str(name, length, info.name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
        struct tsr_gpu_info info;
        struct tsr_fake_ci ci;
        nvmlReturn_t r = info_of(device, &info);

        if (r)
                return r;
        if (!device->mig)
                return copy_str(uuid, length, info.uuid);
        r = ci_of(device->gpu, device->gi_id, device->ci_id, &ci);
        return r ? r : copy_str(uuid, length, ci.uuid);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
        struct tsr_gpu_info info;
        nvmlReturn_t r = info_of(device, &info);

        if (r)
                return r;
        memset(pci, 0, sizeof(*pci));
        memcpy(pci->busId, info.bus_id, sizeof(pci->busId));
        memcpy(pci->busIdLegacy, info.bus_id + 4, sizeof(pci->busIdLegacy) - 1);
        pci->pciDeviceId = info.pci_device_id;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
        struct tsr_gpu_info info;
        nvmlReturn_t r = info_of(device, &info);

        if (r)
                return r;
        memory->total = memory->free = info.memory_mib << 20;
        memory->used = 0;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
        struct tsr_gpu_info info;
        nvmlReturn_t r = info_of(device, &info);

        if (r)
                return r;
        if (!info.mig_capable)
                return NVML_ERROR_NOT_SUPPORTED;
        *currentMode = info.mig_current ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
        *pendingMode = info.mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
        struct tsr_gpu_profile_info p;
        nvmlReturn_t r;

        if (!lib.model)
                return NVML_ERROR_UNINITIALIZED;
        if (!device || device->mig)
                return NVML_ERROR_INVALID_ARGUMENT;
        r = OPS(profile_info, device->gpu, profile, &p);
        if (r)
                return r;
        memset(info, 0, sizeof(*info));
        info->id = p.id;
        info->sliceCount = p.slices;
        info->instanceCount = p.instance_count;
        info->memorySizeMB = p.memory_mib;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count)
{
        struct tsr_gpu_placement pl[TSR_GPU_PLACEMENTS_MAX];
        size_t n = 0;
        nvmlReturn_t r;

        if (!lib.model)
                return NVML_ERROR_UNINITIALIZED;
        if (!device || device->mig || !count)
                return NVML_ERROR_INVALID_ARGUMENT;
        r = OPS(placements, device->gpu, profileId, pl, TSR_GPU_PLACEMENTS_MAX, &n);
        if (r)
                return r;
        if (placements && *count < n)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        for (size_t i = 0; placements && i < n; i++)
                placements[i] = (nvmlGpuInstancePlacement_t){pl[i].start, pl[i].size};
        *count = (unsigned)n;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance)
{
        nvmlGpuInstancePlacement_t pl[TSR_GPU_PLACEMENTS_MAX];
        unsigned n = TSR_GPU_PLACEMENTS_MAX, gi_id;
        nvmlReturn_t r = nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profileId, pl, &n);

        if (r)
                return r;
        if (!placement || !gpuInstance || placement->size != pl[0].size)
                return NVML_ERROR_INVALID_ARGUMENT;
        r = OPS(gi_create, device->gpu, profileId, placement->start, &gi_id);
        if (r)
                return r;
        *gpuInstance = gi_handle(device->gpu, gi_id);
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count)
{
        struct tsr_gpu_instance list[TSR_GPU_INSTANCES_MAX];
        struct tsr_gpu_info info;
        size_t n = 0;
        unsigned k = 0;
        nvmlReturn_t r = info_of(device, &info);

        if (r)
                return r;
        if (!info.mig_current)
                return NVML_ERROR_NOT_SUPPORTED;
        r = OPS(gi_list, device->gpu, list, TSR_GPU_INSTANCES_MAX, &n);
        for (size_t i = 0; !r && i < n; i++)
                if (list[i].gi_profile_id == profileId)
                        gpuInstances[k++] = gi_handle(device->gpu, list[i].gi_id);
        if (!r)
                *count = k;
        return r;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance)
{
        struct tsr_gpu_instance in;
        struct nvmlGpuInstance_st probe;
        nvmlReturn_t r;

        if (!device)
                return NVML_ERROR_INVALID_ARGUMENT;
        probe = (struct nvmlGpuInstance_st){device->gpu, id};
        r = gi_of(&probe, &in);
        if (!r)
                *gpuInstance = gi_handle(device->gpu, id);
        return r;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
        struct tsr_gpu_instance in;
        nvmlReturn_t r = gi_of(gpuInstance, &in);

        if (r)
                return r;
        info->device = dev_handle(gpuInstance->gpu, false, 0, 0);
        info->id = in.gi_id;
        info->profileId = in.gi_profile_id;
        info->placement = (nvmlGpuInstancePlacement_t){in.start, in.size};
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
        struct tsr_gpu_instance in;
        nvmlReturn_t r = gi_of(gpuInstance, &in);

        return r ? r : OPS(gi_destroy, gpuInstance->gpu, gpuInstance->gi_id);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info)
{
        struct tsr_gpu_instance in;
        nvmlReturn_t r = gi_of(gpuInstance, &in);

        if (r)
                return r;
        if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
            engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!ci_slices[profile] || ci_slices[profile] > in.slices)
                return NVML_ERROR_NOT_SUPPORTED;
        memset(info, 0, sizeof(*info));
        info->id = profile; /* observed: CI profile ids are the indices (spec §2.4) */
        info->sliceCount = ci_slices[profile];
        info->instanceCount = in.slices / ci_slices[profile];
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance)
{
        struct tsr_gpu_instance in;
        char uuid[TSR_GPU_UUID_MAX];
        unsigned ci_id;
        nvmlReturn_t r = gi_of(gpuInstance, &in);

        if (r)
                return r;
        if (profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT || !ci_slices[profileId])
                return NVML_ERROR_INVALID_ARGUMENT;
        if (ci_slices[profileId] != in.slices)
                return NVML_ERROR_NOT_SUPPORTED; /* the fake creates whole compute instances */
        r = OPS(ci_create, gpuInstance->gpu, gpuInstance->gi_id, &ci_id, uuid);
        if (!r)
                *computeInstance = ci_handle(gpuInstance->gpu, gpuInstance->gi_id, ci_id);
        return r;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count)
{
        struct tsr_gpu_instance in;
        struct tsr_fake_ci cis[TSR_FAKE_CI_MAX];
        size_t n = 0;
        unsigned k = 0;
        nvmlReturn_t r = gi_of(gpuInstance, &in);

        if (r)
                return r;
        if (profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
                return NVML_ERROR_INVALID_ARGUMENT;
        r = to_nvml(tsr_fake_gpus_ci_list(lib.model, gpuInstance->gpu, gpuInstance->gi_id, cis,
                                          TSR_FAKE_CI_MAX, &n));
        for (size_t i = 0; !r && i < n; i++)
                if (cis[i].slices == ci_slices[profileId])
                        computeInstances[k++] =
                            ci_handle(gpuInstance->gpu, gpuInstance->gi_id, cis[i].id);
        if (!r)
                *count = k;
        return r;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance)
{
        struct tsr_fake_ci ci;
        nvmlReturn_t r;

        if (!gpuInstance)
                return NVML_ERROR_INVALID_ARGUMENT;
        r = ci_of(gpuInstance->gpu, gpuInstance->gi_id, id, &ci);
        if (!r)
                *computeInstance = ci_handle(gpuInstance->gpu, gpuInstance->gi_id, id);
        return r;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info)
{
        struct tsr_fake_ci ci;
        nvmlReturn_t r;

        if (!computeInstance)
                return NVML_ERROR_INVALID_ARGUMENT;
        r = ci_of(computeInstance->gpu, computeInstance->gi_id, computeInstance->ci_id, &ci);
        if (r)
                return r;
        memset(info, 0, sizeof(*info));
        info->device = dev_handle(computeInstance->gpu, true, computeInstance->gi_id, ci.id);
        info->gpuInstance = gi_handle(computeInstance->gpu, computeInstance->gi_id);
        info->id = ci.id;
        for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; p++)
                if (ci_slices[p] == ci.slices) {
                        info->profileId = p;
                        break;
                }
        info->placement = (nvmlComputeInstancePlacement_t){0, ci.slices};
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
        if (!lib.model)
                return NVML_ERROR_UNINITIALIZED;
        if (!computeInstance)
                return NVML_ERROR_INVALID_ARGUMENT;
        return OPS(ci_destroy, computeInstance->gpu, computeInstance->gi_id,
                   computeInstance->ci_id);
}
