/*
 * fake_cuda.h - a fake CUDA driver (libcuda.so.1, built from fake_cuda.c) for testing the slice
 * interposer (src/vgpu/) without a GPU, and what it exports besides the driver API.
 *
 * Contract, for what it implements (everything else is absent, so dlsym of it fails):
 *   Devices   FAKE_CUDA_DEVICES devices (default 1, at most FAKE_CUDA_DEVICES_MAX; 0: cuInit
 *             answers CUDA_ERROR_NO_DEVICE), each with FAKE_CUDA_TOTAL_MIB MiB (default 81920)
 *             and FAKE_CUDA_SM_COUNT multiprocessors (default 132). The environment is read once,
 *             at the first call into the library. State is per process: every process has its
 *             own devices; there is nothing shared between processes.
 *   Init      cuInit(0) first: every other call but cuDriverGetVersion and cuGetProcAddress*
 *             answers CUDA_ERROR_NOT_INITIALIZED before it.
 *   Contexts  a per-thread stack: cuCtxCreate pushes a new context, cuCtxPushCurrent pushes,
 *             cuCtxPopCurrent pops, cuCtxSetCurrent replaces the top (NULL pops it), cuCtxDestroy
 *             destroys and pops it where it is this thread's current one (other threads that hold
 *             it see CUDA_ERROR_INVALID_CONTEXT). cuDevicePrimaryCtxRetain returns the device's
 *             one primary context (reference counted, not made current).
 *   Memory    allocations, arrays, pools and VMM handles need a current context (else
 *             CUDA_ERROR_INVALID_CONTEXT) and are charged to its device (cuMemCreate: to
 *             prop->location.id; cuMemAllocFromPoolAsync: to the pool's device). Sizes: linear
 *             memory its bytes; pitch: pitch (width rounded up to 512) x height; arrays: Width x
 *             max(Height,1) x max(Depth,1) x NumChannels x element size; mipmapped arrays: the sum
 *             of the levels, each extent halved per level (min 1). An allocation past the device's
 *             total answers CUDA_ERROR_OUT_OF_MEMORY; size 0 CUDA_ERROR_INVALID_VALUE. cuMemCreate
 *             takes multiples of FAKE_CUDA_GRANULARITY (cuMemGetAllocationGranularity). Addresses
 *             and handles are numbers, never host memory: a whole 80 GiB device can be allocated.
 *             The 32-bit entry points (cuMemAlloc, ...) allocate below 4 GiB (3.75 GiB per
 *             process). A free of an address or handle the fake did not hand out, or of the wrong
 *             kind, answers CUDA_ERROR_INVALID_VALUE (arrays: CUDA_ERROR_INVALID_HANDLE).
 *             cuMemGetInfo reports the current context's device: total, and total - used.
 *   Kernels   a launch (cuLaunchKernel, Ex, Cooperative, graph) needs a current context and a
 *             function from cuModuleGetFunction (graphs: an exec from cuGraphInstantiate); it
 *             costs gridX x gridY x gridZ x FAKE_CUDA_BLOCK_NS (default 10000) ns of device time
 *             (a graph FAKE_CUDA_GRAPH_BLOCKS blocks), queued on the device's one timeline: it runs
 *             from max(now, busy_until). A launch returns at once unless more than
 *             FAKE_CUDA_QUEUE_NS of work is then queued, in which case it sleeps until only that
 *             much is left. cuCtxSynchronize and cuStreamSynchronize sleep until busy_until.
 *             The busy intervals are kept (the last FAKE_CUDA_HISTORY of them, adjacent ones
 *             merged) for tsr_fake_cuda_busy_ns.
 *   Lookup    cuGetProcAddress and _v2 map a base name, a cudaVersion and the flags to the
 *             fake's own versioned entry point (cuMemAlloc: cuMemAlloc_v2 from 3020, cuMemAlloc
 *             below; _ptsz under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM where one
 *             exists); an unknown name is CUDA_ERROR_NOT_FOUND with
 *             CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, a version older than the function's
 *             CUDA_ERROR_NOT_FOUND with CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT. The pointers
 *             come from a static table of this library's own functions (it is linked
 *             -Bsymbolic), never from dlsym, so an interposer never sees itself as the driver.
 * Thread-safe: one mutex guards all state; launches and synchronizes sleep outside it.
 */
#ifndef TSR_TESTS_VGPU_FAKE_CUDA_H
#define TSR_TESTS_VGPU_FAKE_CUDA_H

#include "vgpu/cuda_abi.h"

#include <stdbool.h>
#include <stdint.h>

#define FAKE_CUDA_DEVICES_MAX  8
#define FAKE_CUDA_GRANULARITY  (2u << 20)
#define FAKE_CUDA_GRAPH_BLOCKS 100
#define FAKE_CUDA_QUEUE_NS     50000000ull
#define FAKE_CUDA_HISTORY      16384
#define FAKE_CUDA_VERSION      12040

/* ---- driver API types and constants the interposer's cuda_abi.h leaves out --------------- */

typedef struct CUmod_st *CUmodule;
typedef struct CUgraph_st *CUgraph;
typedef struct {
        char bytes[16];
} CUuuid;

#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_STREAM_LEGACY                         ((CUstream)0x1)
#define CU_STREAM_PER_THREAD                     ((CUstream)0x2)
#define CU_MEM_ALLOC_GRANULARITY_MINIMUM         0x0

/* ---- the driver API the fake exports (the exported symbol names) -------------------------- */

tsr_cu_init_fn cuInit;
CUresult cuDriverGetVersion(int *version);
tsr_cu_device_get_count_fn cuDeviceGetCount;
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev);
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
tsr_cu_device_total_mem_fn cuDeviceTotalMem_v2;
tsr_cu_device_total_mem_v1_fn cuDeviceTotalMem;

tsr_cu_ctx_create_fn cuCtxCreate_v2;
CUresult cuCtxCreate(CUcontext *ctx, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxDestroy(CUcontext ctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *ctx);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPushCurrent(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *ctx);
CUresult cuCtxPopCurrent(CUcontext *ctx);
tsr_cu_ctx_get_device_fn cuCtxGetDevice;
CUresult cuCtxSynchronize(void);
tsr_cu_device_primary_ctx_retain_fn cuDevicePrimaryCtxRetain;
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);

tsr_cu_mem_get_info_fn cuMemGetInfo_v2;
tsr_cu_mem_get_info_v1_fn cuMemGetInfo;
tsr_cu_mem_alloc_fn cuMemAlloc_v2;
tsr_cu_mem_alloc_v1_fn cuMemAlloc;
tsr_cu_mem_alloc_pitch_fn cuMemAllocPitch_v2;
tsr_cu_mem_alloc_pitch_v1_fn cuMemAllocPitch;
tsr_cu_mem_alloc_managed_fn cuMemAllocManaged;
tsr_cu_mem_free_fn cuMemFree_v2;
tsr_cu_mem_free_v1_fn cuMemFree;
tsr_cu_mem_alloc_async_fn cuMemAllocAsync, cuMemAllocAsync_ptsz;
tsr_cu_mem_alloc_from_pool_async_fn cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz;
tsr_cu_mem_free_async_fn cuMemFreeAsync, cuMemFreeAsync_ptsz;
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
tsr_cu_array_create_fn cuArrayCreate_v2;
tsr_cu_array_create_v1_fn cuArrayCreate;
tsr_cu_array3d_create_fn cuArray3DCreate_v2;
tsr_cu_array3d_create_v1_fn cuArray3DCreate;
tsr_cu_array_destroy_fn cuArrayDestroy;
tsr_cu_mipmapped_array_create_fn cuMipmappedArrayCreate;
tsr_cu_mipmapped_array_destroy_fn cuMipmappedArrayDestroy;
tsr_cu_mem_create_fn cuMemCreate;
tsr_cu_mem_release_fn cuMemRelease;
CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       int option);

CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleUnload(CUmodule module);
CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name);
CUresult cuStreamCreate(CUstream *stream, unsigned int flags);
CUresult cuStreamDestroy_v2(CUstream stream);
CUresult cuStreamSynchronize(CUstream stream);
CUresult cuStreamSynchronize_ptsz(CUstream stream);
tsr_cu_launch_kernel_fn cuLaunchKernel, cuLaunchKernel_ptsz;
tsr_cu_launch_kernel_ex_fn cuLaunchKernelEx, cuLaunchKernelEx_ptsz;
tsr_cu_launch_cooperative_kernel_fn cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz;
CUresult cuGraphCreate(CUgraph *graph, unsigned int flags);
CUresult cuGraphDestroy(CUgraph graph);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
CUresult cuGraphExecDestroy(CUgraphExec exec);
tsr_cu_graph_launch_fn cuGraphLaunch, cuGraphLaunch_ptsz;

tsr_cu_get_proc_address_fn cuGetProcAddress;
tsr_cu_get_proc_address_v2_fn cuGetProcAddress_v2;

/* ---- the fake's own exports: what its fake NVML and the tests read ------------------------ */

/* CLOCK_MONOTONIC in nanoseconds: the clock of the device timelines. */
uint64_t tsr_fake_cuda_now_ns(void);

/* The number of fake devices (FAKE_CUDA_DEVICES), read without cuInit. */
int tsr_fake_cuda_device_count(void);

/* Nanoseconds device dev was busy within [since_ns, until_ns); 0 for a device that is not. */
uint64_t tsr_fake_cuda_busy_ns(int dev, uint64_t since_ns, uint64_t until_ns);

/* Whether this process holds a context (created, or a retained primary one) on device dev. */
bool tsr_fake_cuda_has_context(int dev);

/* Device dev's total and allocated bytes. Returns 0, or -1 for no such device. */
int tsr_fake_cuda_memory(int dev, uint64_t *total, uint64_t *used);

#endif
