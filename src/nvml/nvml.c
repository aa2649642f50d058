/*
 * nvml.c - struct tsr_gpu_ops over libnvidia-ml.so.1 (spec/mig-geometry-and-nvml.md §4.5 call
 * sequences). Device handles are fetched per call by index; GPU- and compute-instance handles by
 * id, so nothing stale is kept between calls.
 */
#include "nvml/nvml.h"

#include "base/err.h"
#include "nvml/nvml_api.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(TSR_GPU_NAME_MAX >= NVML_DEVICE_NAME_V2_BUFFER_SIZE, "name buffer");
_Static_assert(TSR_GPU_UUID_MAX >= NVML_DEVICE_UUID_V2_BUFFER_SIZE, "UUID buffer");
_Static_assert(TSR_GPU_BUS_MAX >= NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE, "bus id buffer");

#if UINTPTR_MAX == UINT64_MAX /* the sizes spec §4.3 checked on x86_64 LP64 */
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48, "nvmlGpuInstanceProfileInfo_t");
_Static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24, "nvmlGpuInstanceInfo_t");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36, "nvmlComputeInstanceProfileInfo_t");
_Static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "nvmlComputeInstanceInfo_t");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t");
#endif

/* Compute instances one GPU instance may hold (a 7g or 8g split into 1g compute instances). */
#define CI_MAX 8

struct nvml_syms {
#define X(name) __typeof__(name) *name;
        TSR_NVML_SYMBOLS(X)
#undef X
};

struct tsr_nvml {
        void *dl;
        struct nvml_syms api;
        char library[256];
        char detail[192];
};

static int map_return(nvmlReturn_t r)
{
        switch (r) {
        case NVML_SUCCESS:
                return 0;
        case NVML_ERROR_INVALID_ARGUMENT:
                return TSR_EINVAL;
        case NVML_ERROR_NOT_SUPPORTED:
                return TSR_ENOTSUP;
        case NVML_ERROR_NO_PERMISSION:
                return TSR_EPERM;
        case NVML_ERROR_NOT_FOUND:
                return TSR_ENOTFOUND;
        case NVML_ERROR_INSUFFICIENT_SIZE:
                return TSR_ETOOBIG;
        case NVML_ERROR_IN_USE:
                return TSR_EINUSE;
        case NVML_ERROR_INSUFFICIENT_RESOURCES:
                return TSR_ENOSPC;
        default:
                return TSR_EBACKEND;
        }
}

/* Maps r, keeping "<call>: <driver message>" as the error detail when it failed. */
static int check(struct tsr_nvml *n, const char *call, nvmlReturn_t r)
{
        if (r != NVML_SUCCESS)
                snprintf(n->detail, sizeof(n->detail), "%s: %s", call, n->api.nvmlErrorString(r));
        return map_return(r);
}

#define NV(n, fn, ...) check(n, #fn, (n)->api.fn(__VA_ARGS__))

/*
 * One step of a walk over profile indices: NOT_SUPPORTED and INVALID_ARGUMENT mean "no such
 * profile here" (1: skip it); 0 on success; any other failure is an error.
 */
static int walk_step(struct tsr_nvml *n, const char *call, nvmlReturn_t r)
{
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT)
                return 1;
        return check(n, call, r);
}

#define WALK(n, fn, ...) walk_step(n, #fn, (n)->api.fn(__VA_ARGS__))

int tsr_nvml_open(const char *library, struct tsr_nvml **out, struct tsr_diag *diag)
{
        struct tsr_nvml *n;
        const char *env = getenv("TSR_NVML_LIBRARY");
        void *sym;
        int rc;

        if (!library)
                library = env && *env ? env : TSR_NVML_LIBRARY_DEFAULT;
        n = calloc(1, sizeof(*n));
        if (!n)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        snprintf(n->library, sizeof(n->library), "%s", library);
        n->dl = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (!n->dl) {
                rc = tsr_diag_set(diag, TSR_ENOTFOUND,
                                  "NVML library %s not found: is the NVIDIA driver installed? (%s)",
                                  library, dlerror());
                free(n);
                return rc;
        }
#define X(name)                                                                                    \
        sym = dlsym(n->dl, #name);                                                                 \
        memcpy(&n->api.name, &sym, sizeof(sym));                                                   \
        if (!sym) {                                                                                \
                rc = tsr_diag_set(diag, TSR_ENOTSUP,                                               \
                                  "NVML library %s lacks %s: the driver is too old for MIG",       \
                                  library, #name);                                                 \
                goto fail;                                                                         \
        }
        TSR_NVML_SYMBOLS(X)
#undef X
        rc = check(n, "nvmlInit_v2", n->api.nvmlInit_v2());
        if (rc) {
                tsr_diag_set(diag, rc, "%s", n->detail);
                goto fail;
        }
        *out = n;
        return 0;
fail:
        dlclose(n->dl);
        free(n);
        return rc;
}

void tsr_nvml_close(struct tsr_nvml *n)
{
        if (!n)
                return;
        n->api.nvmlShutdown();
        dlclose(n->dl);
        free(n);
}

const char *tsr_nvml_library(const struct tsr_nvml *n)
{
        return n->library;
}

static int device(struct tsr_nvml *n, unsigned gpu, nvmlDevice_t *dev)
{
        return NV(n, nvmlDeviceGetHandleByIndex_v2, gpu, dev);
}

static int gpu_instance(struct tsr_nvml *n, unsigned gpu, unsigned gi_id, nvmlGpuInstance_t *gi)
{
        nvmlDevice_t dev;
        int rc = device(n, gpu, &dev);

        return rc ? rc : NV(n, nvmlDeviceGetGpuInstanceById, dev, gi_id, gi);
}

static int nvml_driver_version(void *be, char *out, size_t len)
{
        struct tsr_nvml *n = be;
        char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
        int rc = NV(n, nvmlSystemGetDriverVersion, v, sizeof(v));

        if (rc)
                return rc;
        if (strlen(v) >= len)
                return TSR_ETOOBIG;
        memcpy(out, v, strlen(v) + 1);
        return 0;
}

static int nvml_count(void *be, unsigned *out)
{
        struct tsr_nvml *n = be;
        unsigned c;
        int rc = NV(n, nvmlDeviceGetCount_v2, &c);

        if (!rc)
                *out = c;
        return rc;
}

static int nvml_info(void *be, unsigned gpu, struct tsr_gpu_info *out)
{
        struct tsr_nvml *n = be;
        struct tsr_gpu_info info = {0};
        nvmlDevice_t dev;
        nvmlPciInfo_t pci;
        nvmlMemory_t mem;
        unsigned cur = 0, pend = 0;
        nvmlReturn_t r;
        int rc = device(n, gpu, &dev);

        if (!rc)
                rc = NV(n, nvmlDeviceGetName, dev, info.name, sizeof(info.name));
        if (!rc)
                rc = NV(n, nvmlDeviceGetUUID, dev, info.uuid, sizeof(info.uuid));
        if (!rc)
                rc = NV(n, nvmlDeviceGetPciInfo_v3, dev, &pci);
        if (!rc)
                rc = NV(n, nvmlDeviceGetMemoryInfo, dev, &mem);
        if (rc)
                return rc;
        snprintf(info.bus_id, sizeof(info.bus_id), "%.*s", (int)sizeof(pci.busId) - 1, pci.busId);
        info.pci_device_id = pci.pciDeviceId;
        info.memory_mib = mem.total >> 20;
        r = n->api.nvmlDeviceGetMigMode(dev, &cur, &pend);
        if (r != NVML_ERROR_NOT_SUPPORTED) { /* NOT_SUPPORTED: not MIG-capable, mode off */
                rc = check(n, "nvmlDeviceGetMigMode", r);
                if (rc)
                        return rc;
                info.mig_capable = true;
                info.mig_current = cur == NVML_DEVICE_MIG_ENABLE;
                info.mig_pending = pend == NVML_DEVICE_MIG_ENABLE;
        }
        *out = info;
        return 0;
}

static int nvml_profile_info(void *be, unsigned gpu, unsigned nvml_index,
                             struct tsr_gpu_profile_info *out)
{
        struct tsr_nvml *n = be;
        nvmlGpuInstanceProfileInfo_t info;
        nvmlDevice_t dev;
        int rc = device(n, gpu, &dev);

        if (!rc)
                rc = NV(n, nvmlDeviceGetGpuInstanceProfileInfo, dev, nvml_index, &info);
        if (rc)
                return rc;
        *out = (struct tsr_gpu_profile_info){
            .id = info.id,
            .slices = info.sliceCount,
            .instance_count = info.instanceCount,
            .memory_mib = info.memorySizeMB,
        };
        return 0;
}

static int by_start(const void *a, const void *b)
{
        const nvmlGpuInstancePlacement_t *x = a, *y = b;

        return (x->start > y->start) - (x->start < y->start);
}

static int nvml_placements(void *be, unsigned gpu, unsigned gi_profile_id,
                           struct tsr_gpu_placement *out, size_t max, size_t *n_out)
{
        struct tsr_nvml *n = be;
        nvmlGpuInstancePlacement_t pl[TSR_GPU_PLACEMENTS_MAX];
        unsigned count = 0;
        nvmlDevice_t dev;
        int rc = device(n, gpu, &dev);

        if (!rc)
                rc = NV(n, nvmlDeviceGetGpuInstancePossiblePlacements_v2, dev, gi_profile_id, NULL,
                        &count);
        if (!rc && (count > TSR_GPU_PLACEMENTS_MAX || count > max))
                rc = TSR_ETOOBIG;
        if (!rc)
                rc = NV(n, nvmlDeviceGetGpuInstancePossiblePlacements_v2, dev, gi_profile_id, pl,
                        &count);
        if (rc)
                return rc;
        qsort(pl, count, sizeof(pl[0]), by_start);
        for (unsigned i = 0; i < count; i++)
                out[i] = (struct tsr_gpu_placement){pl[i].start, pl[i].size};
        *n_out = count;
        return 0;
}

static int nvml_gi_create(void *be, unsigned gpu, unsigned gi_profile_id, unsigned start,
                          unsigned *gi_id)
{
        struct tsr_nvml *n = be;
        struct tsr_gpu_placement pl[TSR_GPU_PLACEMENTS_MAX];
        nvmlGpuInstancePlacement_t at = {start, 0};
        nvmlGpuInstanceInfo_t info;
        nvmlGpuInstance_t gi;
        nvmlDevice_t dev;
        size_t np = 0;
        int rc = nvml_placements(be, gpu, gi_profile_id, pl, TSR_GPU_PLACEMENTS_MAX, &np);

        for (size_t i = 0; !rc && i < np; i++)
                if (pl[i].start == start)
                        at.size = pl[i].size;
        if (!rc && at.size == 0)
                return TSR_ENOSPC; /* not a legal start, as INSUFFICIENT_RESOURCES says */
        if (!rc)
                rc = device(n, gpu, &dev);
        if (!rc)
                rc = NV(n, nvmlDeviceCreateGpuInstanceWithPlacement, dev, gi_profile_id, &at, &gi);
        if (!rc)
                rc = NV(n, nvmlGpuInstanceGetInfo, gi, &info);
        if (!rc)
                *gi_id = info.id;
        return rc;
}

/*
 * The compute-instance profile covering all of gi: the one with the most slices, first by index
 * (so 7_SLICE wins over 7_SLICE_NVL), skipping 1_SLICE_REV1 as NVIDIA's DRA driver does.
 */
static int whole_ci_profile(struct tsr_nvml *n, nvmlGpuInstance_t gi,
                            nvmlComputeInstanceProfileInfo_t *out)
{
        bool found = false;

        for (unsigned idx = 0; idx < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; idx++) {
                nvmlComputeInstanceProfileInfo_t info;
                int rc;

                if (idx == NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
                        continue;
                rc = WALK(n, nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, idx,
                          NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
                if (rc < 0)
                        return rc;
                if (rc)
                        continue;
                if (!found || info.sliceCount > out->sliceCount)
                        *out = info;
                found = true;
        }
        if (!found)
                snprintf(n->detail, sizeof(n->detail),
                         "nvmlGpuInstanceGetComputeInstanceProfileInfo: no profile");
        return found ? 0 : TSR_ENOTSUP;
}

static int nvml_ci_create(void *be, unsigned gpu, unsigned gi_id, unsigned *ci_id,
                          char uuid[TSR_GPU_UUID_MAX])
{
        struct tsr_nvml *n = be;
        nvmlComputeInstanceProfileInfo_t prof;
        nvmlComputeInstanceInfo_t info;
        nvmlComputeInstance_t ci;
        nvmlGpuInstance_t gi;
        char u[TSR_GPU_UUID_MAX];
        int rc = gpu_instance(n, gpu, gi_id, &gi);

        if (!rc)
                rc = whole_ci_profile(n, gi, &prof);
        if (!rc)
                rc = NV(n, nvmlGpuInstanceCreateComputeInstance, gi, prof.id, &ci);
        if (!rc)
                rc = NV(n, nvmlComputeInstanceGetInfo_v2, ci, &info);
        if (!rc)
                rc = NV(n, nvmlDeviceGetUUID, info.device, u, sizeof(u));
        if (rc)
                return rc;
        *ci_id = info.id;
        memcpy(uuid, u, sizeof(u));
        return 0;
}

static int nvml_ci_destroy(void *be, unsigned gpu, unsigned gi_id, unsigned ci_id)
{
        struct tsr_nvml *n = be;
        nvmlComputeInstance_t ci;
        nvmlGpuInstance_t gi;
        int rc = gpu_instance(n, gpu, gi_id, &gi);

        if (!rc)
                rc = NV(n, nvmlGpuInstanceGetComputeInstanceById, gi, ci_id, &ci);
        return rc ? rc : NV(n, nvmlComputeInstanceDestroy, ci);
}

static int nvml_gi_destroy(void *be, unsigned gpu, unsigned gi_id)
{
        struct tsr_nvml *n = be;
        nvmlGpuInstance_t gi;
        int rc = gpu_instance(n, gpu, gi_id, &gi);

        return rc ? rc : NV(n, nvmlGpuInstanceDestroy, gi);
}

/* Counts gi's compute instances into in; the lowest-id one is "the first". */
static int list_cis(struct tsr_nvml *n, nvmlGpuInstance_t gi, struct tsr_gpu_instance *in)
{
        for (unsigned idx = 0; idx < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; idx++) {
                nvmlComputeInstanceProfileInfo_t prof;
                nvmlComputeInstance_t cis[CI_MAX];
                unsigned count = 0;
                int rc = WALK(n, nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, idx,
                              NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &prof);

                if (rc < 0)
                        return rc;
                if (rc)
                        continue;
                rc = NV(n, nvmlGpuInstanceGetComputeInstances, gi, prof.id, cis, &count);
                for (unsigned k = 0; !rc && k < count && k < CI_MAX; k++) {
                        nvmlComputeInstanceInfo_t info;

                        rc = NV(n, nvmlComputeInstanceGetInfo_v2, cis[k], &info);
                        if (rc || (in->n_ci++ && info.id >= in->ci_id))
                                continue;
                        in->ci_id = info.id;
                        in->ci_slices = prof.sliceCount;
                        rc = NV(n, nvmlDeviceGetUUID, info.device, in->mig_uuid,
                                sizeof(in->mig_uuid));
                }
                if (rc)
                        return rc;
        }
        return 0;
}

static int by_placement(const void *a, const void *b)
{
        const struct tsr_gpu_instance *x = a, *y = b;

        return (x->start > y->start) - (x->start < y->start);
}

static int nvml_gi_list(void *be, unsigned gpu, struct tsr_gpu_instance *out, size_t max,
                        size_t *n_out)
{
        struct tsr_nvml *n = be;
        struct tsr_gpu_instance found[TSR_GPU_INSTANCES_MAX];
        size_t nf = 0;
        nvmlDevice_t dev;
        int rc = device(n, gpu, &dev);

        for (unsigned idx = 0; !rc && idx < NVML_GPU_INSTANCE_PROFILE_COUNT; idx++) {
                nvmlGpuInstanceProfileInfo_t prof;
                nvmlGpuInstance_t gis[TSR_GPU_INSTANCES_MAX];
                unsigned count = 0;
                nvmlReturn_t r;

                rc = WALK(n, nvmlDeviceGetGpuInstanceProfileInfo, dev, idx, &prof);
                if (rc) {
                        rc = rc < 0 ? rc : 0;
                        continue;
                }
                r = n->api.nvmlDeviceGetGpuInstances(dev, prof.id, gis, &count);
                if (r == NVML_ERROR_NOT_SUPPORTED)
                        break; /* MIG mode off: no instances */
                rc = check(n, "nvmlDeviceGetGpuInstances", r);
                for (unsigned k = 0; !rc && k < count; k++) {
                        nvmlGpuInstanceInfo_t info;

                        if (nf == TSR_GPU_INSTANCES_MAX) {
                                rc = TSR_ETOOBIG;
                                break;
                        }
                        rc = NV(n, nvmlGpuInstanceGetInfo, gis[k], &info);
                        if (rc)
                                break;
                        found[nf] = (struct tsr_gpu_instance){
                            .gi_id = info.id,
                            .gi_profile_id = info.profileId,
                            .start = info.placement.start,
                            .size = info.placement.size,
                            .slices = prof.sliceCount,
                        };
                        rc = list_cis(n, gis[k], &found[nf++]);
                }
        }
        if (!rc && nf > max)
                rc = TSR_ETOOBIG;
        if (rc)
                return rc;
        qsort(found, nf, sizeof(found[0]), by_placement);
        memcpy(out, found, nf * sizeof(found[0]));
        *n_out = nf;
        return 0;
}

static const char *nvml_error_detail(void *be)
{
        return ((struct tsr_nvml *)be)->detail;
}

const struct tsr_gpu_ops tsr_nvml_gpu_ops = {
    .driver_version = nvml_driver_version,
    .device_count = nvml_count,
    .device_info = nvml_info,
    .profile_info = nvml_profile_info,
    .placements = nvml_placements,
    .gi_create = nvml_gi_create,
    .ci_create = nvml_ci_create,
    .ci_destroy = nvml_ci_destroy,
    .gi_destroy = nvml_gi_destroy,
    .gi_list = nvml_gi_list,
    .error_detail = nvml_error_detail,
};
