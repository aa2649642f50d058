/*
 * nvml_hooks.c - NVML's memory report seen from inside the slice: total is the slice's limit,
 * used what the container's processes hold (the shared budget), free the rest, on the device whose
 * NVML index is the limit's CUDA ordinal (one visible GPU per slice: both are 0). Devices without
 * a limit, and processes without control, see the driver's figures.
 */
#include "vgpu/hooks.h"
#include "vgpu/state.h"

#define EXPORT __attribute__((visibility("default")))

/*
 * Overwrites the driver's (total, used, free) of NVML device h with the slice's, when it has a
 * limit below the device's memory. Returns whether it did.
 */
static bool slice_view(const struct tsr_vgpu_state *s, nvmlDevice_t h, unsigned long long *total,
                       unsigned long long *used, unsigned long long *free_bytes)
{
        uint64_t limit, held;
        unsigned index;

        if (!s->control || !tsr_vgpu_real.nvmlDeviceGetIndex ||
            tsr_vgpu_real.nvmlDeviceGetIndex(h, &index) != NVML_SUCCESS ||
            index >= TSR_VGPU_DEVICES_MAX || !(limit = tsr_vgpu_limit(s, (int)index)) ||
            *total <= limit)
                return false;
        held = tsr_vgpu_region_used(s->region, (int)index);
        *total = limit;
        *used = held < limit ? held : limit;
        *free_bytes = limit - *used;
        return true;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_nvml();
        nvmlReturn_t rc;

        if (!tsr_vgpu_real.nvmlDeviceGetMemoryInfo)
                return NVML_ERROR_FUNCTION_NOT_FOUND;
        rc = tsr_vgpu_real.nvmlDeviceGetMemoryInfo(device, memory);
        if (rc == NVML_SUCCESS && memory)
                slice_view(s, device, &memory->total, &memory->used, &memory->free);
        return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_nvml();
        nvmlReturn_t rc;

        if (!tsr_vgpu_real.nvmlDeviceGetMemoryInfo_v2)
                return NVML_ERROR_FUNCTION_NOT_FOUND;
        rc = tsr_vgpu_real.nvmlDeviceGetMemoryInfo_v2(device, memory);
        if (rc == NVML_SUCCESS && memory &&
            slice_view(s, device, &memory->total, &memory->used, &memory->free))
                memory->reserved = 0;
        return rc;
}
