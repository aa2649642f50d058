/*
 * hooks.h - the entry points the interposer replaces, in one list, and the real ones behind them.
 *
 * TSR_VGPU_CUDA_HOOKS and TSR_VGPU_NVML_HOOKS name each exported symbol with its function type;
 * the library defines a function of that name and type (memory.c, launch.c, context.c,
 * procaddr.c, nvml_hooks.c) and reaches the driver's through tsr_vgpu_real, resolved once from
 * the driver's own handle (dlopen of libcuda.so.1 / libnvidia-ml.so.1), never by global lookup, so
 * a program that dlopen()s the driver privately is served too. TSR_VGPU_NVML_CALLS are NVML
 * functions the interposer only calls. A pointer is NULL when the driver lacks the symbol; a hook
 * whose real entry point is NULL answers CUDA_ERROR_NOT_SUPPORTED (NVML_ERROR_FUNCTION_NOT_FOUND).
 *
 * cuGetProcAddress results are mapped by address (tsr_vgpu_hook_for_real): the driver hands out
 * the addresses of its exported versioned symbols, so an address equal to a hooked symbol's real
 * one is replaced by the hook, and any other (a version the interposer does not know) passes
 * through. dlsym results are mapped by name (tsr_vgpu_hook_named) when the symbol was found in
 * the driver's own library.
 */
#ifndef TSR_VGPU_HOOKS_H
#define TSR_VGPU_HOOKS_H

#include <stdbool.h>

#include "nvml/nvml_api.h"
#include "vgpu/cuda_abi.h"

#define TSR_VGPU_CUDA_HOOKS(X)                                                                     \
        X(cuInit, tsr_cu_init_fn)                                                                  \
        X(cuMemAlloc, tsr_cu_mem_alloc_v1_fn)                                                      \
        X(cuMemAlloc_v2, tsr_cu_mem_alloc_fn)                                                      \
        X(cuMemAllocPitch, tsr_cu_mem_alloc_pitch_v1_fn)                                           \
        X(cuMemAllocPitch_v2, tsr_cu_mem_alloc_pitch_fn)                                           \
        X(cuMemAllocManaged, tsr_cu_mem_alloc_managed_fn)                                          \
        X(cuMemFree, tsr_cu_mem_free_v1_fn)                                                        \
        X(cuMemFree_v2, tsr_cu_mem_free_fn)                                                        \
        X(cuMemAllocAsync, tsr_cu_mem_alloc_async_fn)                                              \
        X(cuMemAllocAsync_ptsz, tsr_cu_mem_alloc_async_fn)                                         \
        X(cuMemAllocFromPoolAsync, tsr_cu_mem_alloc_from_pool_async_fn)                            \
        X(cuMemAllocFromPoolAsync_ptsz, tsr_cu_mem_alloc_from_pool_async_fn)                       \
        X(cuMemFreeAsync, tsr_cu_mem_free_async_fn)                                                \
        X(cuMemFreeAsync_ptsz, tsr_cu_mem_free_async_fn)                                           \
        X(cuArrayCreate, tsr_cu_array_create_v1_fn)                                                \
        X(cuArrayCreate_v2, tsr_cu_array_create_fn)                                                \
        X(cuArray3DCreate, tsr_cu_array3d_create_v1_fn)                                            \
        X(cuArray3DCreate_v2, tsr_cu_array3d_create_fn)                                            \
        X(cuArrayDestroy, tsr_cu_array_destroy_fn)                                                 \
        X(cuMipmappedArrayCreate, tsr_cu_mipmapped_array_create_fn)                                \
        X(cuMipmappedArrayDestroy, tsr_cu_mipmapped_array_destroy_fn)                              \
        X(cuMemCreate, tsr_cu_mem_create_fn)                                                       \
        X(cuMemRelease, tsr_cu_mem_release_fn)                                                     \
        X(cuMemGetInfo, tsr_cu_mem_get_info_v1_fn)                                                 \
        X(cuMemGetInfo_v2, tsr_cu_mem_get_info_fn)                                                 \
        X(cuDeviceTotalMem, tsr_cu_device_total_mem_v1_fn)                                         \
        X(cuDeviceTotalMem_v2, tsr_cu_device_total_mem_fn)                                         \
        X(cuLaunchKernel, tsr_cu_launch_kernel_fn)                                                 \
        X(cuLaunchKernel_ptsz, tsr_cu_launch_kernel_fn)                                            \
        X(cuLaunchKernelEx, tsr_cu_launch_kernel_ex_fn)                                            \
        X(cuLaunchKernelEx_ptsz, tsr_cu_launch_kernel_ex_fn)                                       \
        X(cuLaunchCooperativeKernel, tsr_cu_launch_cooperative_kernel_fn)                          \
        X(cuLaunchCooperativeKernel_ptsz, tsr_cu_launch_cooperative_kernel_fn)                     \
        X(cuGraphLaunch, tsr_cu_graph_launch_fn)                                                   \
        X(cuGraphLaunch_ptsz, tsr_cu_graph_launch_fn)                                              \
        X(cuDevicePrimaryCtxRetain, tsr_cu_device_primary_ctx_retain_fn)                           \
        X(cuCtxCreate_v2, tsr_cu_ctx_create_fn)                                                    \
        X(cuGetProcAddress, tsr_cu_get_proc_address_fn)                                            \
        X(cuGetProcAddress_v2, tsr_cu_get_proc_address_v2_fn)

/* Driver entry points the interposer calls but does not replace. */
#define TSR_VGPU_CUDA_CALLS(X) X(cuCtxGetDevice, tsr_cu_ctx_get_device_fn)

typedef nvmlReturn_t tsr_nvml_init_fn(void);
typedef nvmlReturn_t tsr_nvml_handle_by_index_fn(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t tsr_nvml_get_index_fn(nvmlDevice_t device, unsigned int *index);
typedef nvmlReturn_t tsr_nvml_memory_info_fn(nvmlDevice_t device, nvmlMemory_t *memory);
typedef nvmlReturn_t tsr_nvml_memory_info_v2_fn(nvmlDevice_t device, nvmlMemory_v2_t *memory);
typedef nvmlReturn_t tsr_nvml_utilization_fn(nvmlDevice_t device, nvmlUtilization_t *u);
typedef nvmlReturn_t tsr_nvml_process_utilization_fn(nvmlDevice_t device,
                                                     nvmlProcessUtilizationSample_t *samples,
                                                     unsigned int *count,
                                                     unsigned long long last_seen);
typedef nvmlReturn_t tsr_nvml_running_processes_fn(nvmlDevice_t device, unsigned int *count,
                                                   nvmlProcessInfo_t *infos);

#define TSR_VGPU_NVML_HOOKS(X)                                                                     \
        X(nvmlDeviceGetMemoryInfo, tsr_nvml_memory_info_fn)                                        \
        X(nvmlDeviceGetMemoryInfo_v2, tsr_nvml_memory_info_v2_fn)

#define TSR_VGPU_NVML_CALLS(X)                                                                     \
        X(nvmlInit_v2, tsr_nvml_init_fn)                                                           \
        X(nvmlDeviceGetHandleByIndex_v2, tsr_nvml_handle_by_index_fn)                              \
        X(nvmlDeviceGetIndex, tsr_nvml_get_index_fn)                                               \
        X(nvmlDeviceGetUtilizationRates, tsr_nvml_utilization_fn)                                  \
        X(nvmlDeviceGetProcessUtilization, tsr_nvml_process_utilization_fn)                        \
        X(nvmlDeviceGetComputeRunningProcesses_v3, tsr_nvml_running_processes_fn)

#define TSR_VGPU_DECLARE_HOOK(name, type) extern type name;
TSR_VGPU_CUDA_HOOKS(TSR_VGPU_DECLARE_HOOK)
TSR_VGPU_NVML_HOOKS(TSR_VGPU_DECLARE_HOOK)

#define TSR_VGPU_REAL_FIELD(name, type) type *name;
struct tsr_vgpu_real {
        TSR_VGPU_CUDA_HOOKS(TSR_VGPU_REAL_FIELD)
        TSR_VGPU_CUDA_CALLS(TSR_VGPU_REAL_FIELD)
        TSR_VGPU_NVML_HOOKS(TSR_VGPU_REAL_FIELD)
        TSR_VGPU_NVML_CALLS(TSR_VGPU_REAL_FIELD)
};

/* The driver's entry points; valid after tsr_vgpu_cuda() / tsr_vgpu_nvml() (state.h). */
extern struct tsr_vgpu_real tsr_vgpu_real;

/* The CUDA hook whose real entry point is addr, or NULL (resolves the driver's symbols first). */
void *tsr_vgpu_hook_for_real(const void *addr);

/* Whether name is one of the hooked exported symbols (no resolution, no locking; early.h-safe). */
bool tsr_vgpu_is_hooked_name(const char *name);

/* The hook exported as name (dlsym included), or NULL; early.h-safe. */
void *tsr_vgpu_hook_named(const char *name);

#endif
