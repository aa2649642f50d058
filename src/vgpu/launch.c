/*
 * launch.c - the driver entry points that start work or make contexts: kernel and graph launches
 * pass the slice's throttle first (throttle.h), context creation teaches the process its NVML pid
 * (utilization.h), and cuInit refuses when the slice's environment is unusable (state.h).
 */
#include "vgpu/hooks.h"
#include "vgpu/state.h"
#include "vgpu/throttle.h"
#include "vgpu/utilization.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT CUresult cuInit(unsigned int flags)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        if (s->failed)
                return CUDA_ERROR_INVALID_VALUE;
        if (!tsr_vgpu_real.cuInit)
                return CUDA_ERROR_NOT_SUPPORTED;
        return tsr_vgpu_real.cuInit(flags);
}

/* Waits for the slice's share before a launch of blocks on the current context's device. */
static void admit(uint64_t blocks)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();
        CUdevice dev;

        if (s->throttled && tsr_vgpu_real.cuCtxGetDevice &&
            tsr_vgpu_real.cuCtxGetDevice(&dev) == CUDA_SUCCESS)
                tsr_vgpu_throttle_admit(s, dev, blocks);
}

/* cuLaunchKernel and its _ptsz twin: the grid's blocks admitted, then the driver's. */
#define LAUNCH_KERNEL_HOOK(name)                                                                   \
        EXPORT CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,      \
                             unsigned int bx, unsigned int by, unsigned int bz,                    \
                             unsigned int shared, CUstream stream, void **params, void **extra)    \
        {                                                                                          \
                admit(tsr_vgpu_grid_blocks(gx, gy, gz));                                           \
                if (!tsr_vgpu_real.name)                                                           \
                        return CUDA_ERROR_NOT_SUPPORTED;                                           \
                return tsr_vgpu_real.name(f, gx, gy, gz, bx, by, bz, shared, stream, params,       \
                                          extra);                                                  \
        }

/* cuLaunchCooperativeKernel and its _ptsz twin. */
#define LAUNCH_COOPERATIVE_HOOK(name)                                                              \
        EXPORT CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,      \
                             unsigned int bx, unsigned int by, unsigned int bz,                    \
                             unsigned int shared, CUstream stream, void **params)                  \
        {                                                                                          \
                admit(tsr_vgpu_grid_blocks(gx, gy, gz));                                           \
                if (!tsr_vgpu_real.name)                                                           \
                        return CUDA_ERROR_NOT_SUPPORTED;                                           \
                return tsr_vgpu_real.name(f, gx, gy, gz, bx, by, bz, shared, stream, params);      \
        }

/* cuLaunchKernelEx and its _ptsz twin: the config's grid. */
#define LAUNCH_EX_HOOK(name)                                                                       \
        EXPORT CUresult name(const CUlaunchConfig *config, CUfunction f, void **params,            \
                             void **extra)                                                         \
        {                                                                                          \
                if (config)                                                                        \
                        admit(tsr_vgpu_grid_blocks(config->gridDimX, config->gridDimY,             \
                                                   config->gridDimZ));                             \
                if (!tsr_vgpu_real.name)                                                           \
                        return CUDA_ERROR_NOT_SUPPORTED;                                           \
                return tsr_vgpu_real.name(config, f, params, extra);                               \
        }

/* cuGraphLaunch and its _ptsz twin: a graph's grid is unknown, it costs the average kernel. */
#define GRAPH_LAUNCH_HOOK(name)                                                                    \
        EXPORT CUresult name(CUgraphExec exec, CUstream stream)                                    \
        {                                                                                          \
                admit(tsr_vgpu_average_blocks());                                                  \
                if (!tsr_vgpu_real.name)                                                           \
                        return CUDA_ERROR_NOT_SUPPORTED;                                           \
                return tsr_vgpu_real.name(exec, stream);                                           \
        }

LAUNCH_KERNEL_HOOK(cuLaunchKernel)
LAUNCH_KERNEL_HOOK(cuLaunchKernel_ptsz)
LAUNCH_COOPERATIVE_HOOK(cuLaunchCooperativeKernel)
LAUNCH_COOPERATIVE_HOOK(cuLaunchCooperativeKernel_ptsz)
LAUNCH_EX_HOOK(cuLaunchKernelEx)
LAUNCH_EX_HOOK(cuLaunchKernelEx_ptsz)
GRAPH_LAUNCH_HOOK(cuGraphLaunch)
GRAPH_LAUNCH_HOOK(cuGraphLaunch_ptsz)

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();
        struct tsr_vgpu_pid_probe before;
        CUresult rc;

        if (!tsr_vgpu_real.cuDevicePrimaryCtxRetain)
                return CUDA_ERROR_NOT_SUPPORTED;
        if (!s->throttled)
                return tsr_vgpu_real.cuDevicePrimaryCtxRetain(ctx, dev);
        tsr_vgpu_pid_probe_before(dev, &before);
        rc = tsr_vgpu_real.cuDevicePrimaryCtxRetain(ctx, dev);
        if (rc == CUDA_SUCCESS)
                tsr_vgpu_pid_probe_after(s, dev, &before);
        return rc;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();
        struct tsr_vgpu_pid_probe before;
        CUresult rc;

        if (!tsr_vgpu_real.cuCtxCreate_v2)
                return CUDA_ERROR_NOT_SUPPORTED;
        if (!s->throttled)
                return tsr_vgpu_real.cuCtxCreate_v2(ctx, flags, dev);
        tsr_vgpu_pid_probe_before(dev, &before);
        rc = tsr_vgpu_real.cuCtxCreate_v2(ctx, flags, dev);
        if (rc == CUDA_SUCCESS)
                tsr_vgpu_pid_probe_after(s, dev, &before);
        return rc;
}
