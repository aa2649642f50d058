/*
 * fake_nvml.h - the NVML a slice's process sees over the fake CUDA driver (libnvidia-ml.so.1,
 * built from fake_nvml.c). The declarations are src/nvml/nvml_api.h's.
 *
 * Contract: NVML index i is fake CUDA device i (FAKE_CUDA_DEVICES of them), read from the fake
 * driver of the same process through its exports (fake_cuda.h; this library links it):
 *   memory        total = the device's, used = what this process allocated on it, free = the rest
 *                 (_v2: version must be nvmlMemory_v2, reserved 0)
 *   utilization   gpu = percent of the last FAKE_NVML_WINDOW_NS the device was busy, memory 0
 *   processes     getpid(), once this process holds a context on the device, with its used bytes
 *                 (nvmlDeviceGetComputeRunningProcesses_v3); nvmlDeviceGetProcessUtilization
 *                 gives that pid one sample, timeStamp = now in CLOCK_REALTIME microseconds,
 *                 smUtil = the utilization above, when timeStamp > lastSeenTimeStamp, else
 *                 NVML_ERROR_NOT_FOUND; a NULL buffer or a short count is
 *                 NVML_ERROR_INSUFFICIENT_SIZE with the count needed.
 * nvmlInit_v2 first (reference counted with nvmlShutdown); NVML_ERROR_UNINITIALIZED otherwise.
 */
#ifndef TSR_TESTS_VGPU_FAKE_NVML_H
#define TSR_TESTS_VGPU_FAKE_NVML_H

#include "nvml/nvml_api.h"

#define FAKE_NVML_WINDOW_NS 100000000ull

#endif
