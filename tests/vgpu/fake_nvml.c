/*
 * fake_nvml.c - the fake NVML over the fake CUDA driver (contract in fake_nvml.h).
 *
 * Owns nothing but the init count and one handle per device (static, valid while initialised);
 * every number comes from the fake driver of this process (tsr_fake_cuda_*), so the two cannot
 * disagree. Entry points never call each other by their exported names, so an interposer of
 * some of them sees each call once.
 */
#include "fake_nvml.h"

#include "fake_cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct nvmlDevice_st {
        unsigned index;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned refs;
static struct nvmlDevice_st devices[FAKE_CUDA_DEVICES_MAX];

static bool initialised(void)
{
        bool up;

        pthread_mutex_lock(&lock);
        up = refs > 0;
        pthread_mutex_unlock(&lock);
        return up;
}

/* NVML_SUCCESS with *index the device's, or the error for a bad call. */
static nvmlReturn_t device_index(nvmlDevice_t device, unsigned *index)
{
        if (!initialised())
                return NVML_ERROR_UNINITIALIZED;
        if (!device || device < devices || device >= devices + FAKE_CUDA_DEVICES_MAX ||
            device->index >= (unsigned)tsr_fake_cuda_device_count())
                return NVML_ERROR_INVALID_ARGUMENT;
        *index = device->index;
        return NVML_SUCCESS;
}

/* Percent of the last FAKE_NVML_WINDOW_NS that device index was busy. */
static unsigned busy_percent(unsigned index)
{
        uint64_t now = tsr_fake_cuda_now_ns();
        uint64_t busy = tsr_fake_cuda_busy_ns((int)index, now - FAKE_NVML_WINDOW_NS, now);

        return (unsigned)((busy * 100 + FAKE_NVML_WINDOW_NS / 2) / FAKE_NVML_WINDOW_NS);
}

nvmlReturn_t nvmlInit_v2(void)
{
        unsigned i;

        pthread_mutex_lock(&lock);
        if (refs++ == 0)
                for (i = 0; i < FAKE_CUDA_DEVICES_MAX; i++)
                        devices[i].index = i;
        pthread_mutex_unlock(&lock);
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
        nvmlReturn_t rc = NVML_SUCCESS;

        pthread_mutex_lock(&lock);
        if (refs)
                refs--;
        else
                rc = NVML_ERROR_UNINITIALIZED;
        pthread_mutex_unlock(&lock);
        return rc;
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
        case NVML_ERROR_NOT_FOUND:
                return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE:
                return "Insufficient Size";
        case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
                return "Argument Version Mismatch";
        }
        return "Unknown Error";
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
        if (!initialised())
                return NVML_ERROR_UNINITIALIZED;
        if (!deviceCount)
                return NVML_ERROR_INVALID_ARGUMENT;
        *deviceCount = (unsigned)tsr_fake_cuda_device_count();
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
        if (!initialised())
                return NVML_ERROR_UNINITIALIZED;
        if (!device || index >= (unsigned)tsr_fake_cuda_device_count())
                return NVML_ERROR_INVALID_ARGUMENT;
        *device = &devices[index];
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
        unsigned i = 0;
        nvmlReturn_t rc = device_index(device, &i);

        if (!rc && !index)
                rc = NVML_ERROR_INVALID_ARGUMENT;
        if (!rc)
                *index = i;
        return rc;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
        unsigned i = 0;
        nvmlReturn_t rc = device_index(device, &i);

        if (!rc && (!name || !length))
                rc = NVML_ERROR_INVALID_ARGUMENT;
        if (!rc && (unsigned)snprintf(name, length, "Fake CUDA Device %u", i) >= length)
                rc = NVML_ERROR_INSUFFICIENT_SIZE;
        return rc;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
        unsigned i = 0;
        nvmlReturn_t rc = device_index(device, &i);

        if (!rc && (!uuid || !length))
                rc = NVML_ERROR_INVALID_ARGUMENT;
        if (!rc &&
            (unsigned)snprintf(uuid, length, "GPU-fa4ec0da-0000-4000-8000-%012u", i) >= length)
                rc = NVML_ERROR_INSUFFICIENT_SIZE;
        return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
        uint64_t total = 0, used = 0;
        unsigned i = 0;
        nvmlReturn_t rc = device_index(device, &i);

        if (!rc && !memory)
                rc = NVML_ERROR_INVALID_ARGUMENT;
        if (!rc) {
                tsr_fake_cuda_memory((int)i, &total, &used);
                memory->total = total;
                memory->used = used;
                memory->free = total - used;
        }
        return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
        uint64_t total = 0, used = 0;
        unsigned i = 0;
        nvmlReturn_t rc = device_index(device, &i);

        if (!rc && !memory)
                rc = NVML_ERROR_INVALID_ARGUMENT;
        if (!rc && memory->version != nvmlMemory_v2)
                rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        if (!rc) {
                tsr_fake_cuda_memory((int)i, &total, &used);
                memory->total = total;
                memory->reserved = 0;
                memory->used = used;
                memory->free = total - used;
        }
        return rc;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
        unsigned i = 0;
        nvmlReturn_t rc = device_index(device, &i);

        if (!rc && !utilization)
                rc = NVML_ERROR_INVALID_ARGUMENT;
        if (!rc) {
                utilization->gpu = busy_percent(i);
                utilization->memory = 0;
        }
        return rc;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp)
{
        struct timespec ts;
        unsigned long long now_us;
        unsigned i = 0;
        nvmlReturn_t rc = device_index(device, &i);

        if (!rc && !processSamplesCount)
                rc = NVML_ERROR_INVALID_ARGUMENT;
        if (rc)
                return rc;
        clock_gettime(CLOCK_REALTIME, &ts);
        now_us = (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
        if (!tsr_fake_cuda_has_context((int)i) || now_us <= lastSeenTimeStamp) {
                *processSamplesCount = 0;
                return NVML_ERROR_NOT_FOUND;
        }
        if (!utilization || *processSamplesCount < 1) {
                *processSamplesCount = 1;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        utilization[0] = (nvmlProcessUtilizationSample_t){
            .pid = (unsigned)getpid(), .timeStamp = now_us, .smUtil = busy_percent(i)};
        *processSamplesCount = 1;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
        uint64_t total = 0, used = 0;
        unsigned i = 0, n;
        nvmlReturn_t rc = device_index(device, &i);

        if (!rc && !infoCount)
                rc = NVML_ERROR_INVALID_ARGUMENT;
        if (rc)
                return rc;
        n = tsr_fake_cuda_has_context((int)i) ? 1 : 0;
        if (*infoCount < n || (n && !infos)) {
                *infoCount = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        *infoCount = n;
        if (n) {
                tsr_fake_cuda_memory((int)i, &total, &used);
                infos[0] = (nvmlProcessInfo_t){.pid = (unsigned)getpid(),
                                               .usedGpuMemory = used,
                                               .gpuInstanceId = 0xffffffffu,
                                               .computeInstanceId = 0xffffffffu};
        }
        return NVML_SUCCESS;
}
