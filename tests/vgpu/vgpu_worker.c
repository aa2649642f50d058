/*
 * vgpu_worker.c - a CUDA program the slice tests drive (test_vgpu.c), one command per line on
 * stdin, one answer line on stdout. It links the fake driver and the fake NVML by name, so under
 * LD_PRELOAD its calls go to the interposer as a program built against libcuda's would; `mode`
 * switches to entry points fetched the way the CUDA runtime fetches them.
 *
 * Commands (IDs are indices into the worker's table of live allocations; every answer starts
 * with the CUresult or nvmlReturn_t of the call):
 *   mode direct|gpa2|gpa1|ptsz|dlsym  entry points: linked by name; dlopen("libcuda.so.1") and
 *                                     cuGetProcAddress_v2 (CUDA 12.4) of base names; the same
 *                                     with cuGetProcAddress; _v2 with the per-thread-default-
 *                                     stream flag; dlsym of the exported names on the handle
 *   init | ctx DEV | primary DEV | pop
 *   alloc v2|v1|managed|async|pool BYTES         -> rc ID
 *   alloc pitch WIDTH HEIGHT ELEM                -> rc ID PITCH
 *   alloc array WIDTH HEIGHT FORMAT CHANNELS     -> rc ID
 *   alloc array3d W H D FORMAT CHANNELS          -> rc ID
 *   alloc mipmap W H D FORMAT CHANNELS LEVELS    -> rc ID
 *   alloc vmm BYTES DEV                          -> rc ID
 *   free ID | freeraw ADDRESS
 *   meminfo | meminfo1 -> rc FREE TOTAL;  totalmem DEV -> rc BYTES
 *   nvml IDX | nvml2 IDX -> rc TOTAL USED FREE;  util IDX -> rc GPU;  procs IDX -> rc N PID USED
 *   gpa NAME VERSION FLAGS EXPECTED   -> rc STATUS SAME (SAME: the pointer is dlsym(EXPECTED))
 *   compute MS GRID kernel|ex|coop|graph -> rc BUSY_ALL BUSY_TAIL LAUNCHES: launches back to back
 *                                     for MS ms, synchronizes; the busy fraction of the fake
 *                                     device over the whole run and over its last two thirds
 *   pid -> 0 PID;  exit
 * Owns the table and the dlopen handle until exit.
 */
#include "fake_cuda.h"
#include "fake_nvml.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALLOCS_MAX        4096
#define WORKER_LIFETIME_S 900
#define LINE_MAX_         512

typedef CUresult default_pool_fn(CUmemoryPool *pool, CUdevice dev);
typedef CUresult set_current_fn(CUcontext ctx);
typedef CUresult pop_current_fn(CUcontext *ctx);
typedef CUresult sync_fn(void);
typedef CUresult module_load_fn(CUmodule *module, const void *image);
typedef CUresult get_function_fn(CUfunction *f, CUmodule module, const char *name);
typedef CUresult stream_create_fn(CUstream *stream, unsigned int flags);
typedef CUresult graph_create_fn(CUgraph *graph, unsigned int flags);
typedef CUresult graph_instantiate_fn(CUgraphExec *exec, CUgraph graph, unsigned long long flags);

/* X(field, type, base name, exported symbol, cudaVersion asked for) */
#define API(X)                                                                                     \
        X(init, tsr_cu_init_fn, "cuInit", cuInit, 12040)                                           \
        X(ctx_create, tsr_cu_ctx_create_fn, "cuCtxCreate", cuCtxCreate_v2, 12040)                  \
        X(primary_retain, tsr_cu_device_primary_ctx_retain_fn, "cuDevicePrimaryCtxRetain",         \
          cuDevicePrimaryCtxRetain, 12040)                                                         \
        X(set_current, set_current_fn, "cuCtxSetCurrent", cuCtxSetCurrent, 12040)                  \
        X(pop_current, pop_current_fn, "cuCtxPopCurrent", cuCtxPopCurrent_v2, 12040)               \
        X(synchronize, sync_fn, "cuCtxSynchronize", cuCtxSynchronize, 12040)                       \
        X(mem_get_info, tsr_cu_mem_get_info_fn, "cuMemGetInfo", cuMemGetInfo_v2, 12040)            \
        X(mem_get_info_v1, tsr_cu_mem_get_info_v1_fn, "cuMemGetInfo", cuMemGetInfo, 3010)          \
        X(total_mem, tsr_cu_device_total_mem_fn, "cuDeviceTotalMem", cuDeviceTotalMem_v2, 12040)   \
        X(alloc, tsr_cu_mem_alloc_fn, "cuMemAlloc", cuMemAlloc_v2, 12040)                          \
        X(alloc_v1, tsr_cu_mem_alloc_v1_fn, "cuMemAlloc", cuMemAlloc, 3010)                        \
        X(alloc_pitch, tsr_cu_mem_alloc_pitch_fn, "cuMemAllocPitch", cuMemAllocPitch_v2, 12040)    \
        X(alloc_managed, tsr_cu_mem_alloc_managed_fn, "cuMemAllocManaged", cuMemAllocManaged,      \
          12040)                                                                                   \
        X(free, tsr_cu_mem_free_fn, "cuMemFree", cuMemFree_v2, 12040)                              \
        X(free_v1, tsr_cu_mem_free_v1_fn, "cuMemFree", cuMemFree, 3010)                            \
        X(alloc_async, tsr_cu_mem_alloc_async_fn, "cuMemAllocAsync", cuMemAllocAsync, 12040)       \
        X(alloc_pool, tsr_cu_mem_alloc_from_pool_async_fn, "cuMemAllocFromPoolAsync",              \
          cuMemAllocFromPoolAsync, 12040)                                                          \
        X(free_async, tsr_cu_mem_free_async_fn, "cuMemFreeAsync", cuMemFreeAsync, 12040)           \
        X(default_pool, default_pool_fn, "cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool,   \
          12040)                                                                                   \
        X(array_create, tsr_cu_array_create_fn, "cuArrayCreate", cuArrayCreate_v2, 12040)          \
        X(array3d_create, tsr_cu_array3d_create_fn, "cuArray3DCreate", cuArray3DCreate_v2, 12040)  \
        X(array_destroy, tsr_cu_array_destroy_fn, "cuArrayDestroy", cuArrayDestroy, 12040)         \
        X(mipmap_create, tsr_cu_mipmapped_array_create_fn, "cuMipmappedArrayCreate",               \
          cuMipmappedArrayCreate, 12040)                                                           \
        X(mipmap_destroy, tsr_cu_mipmapped_array_destroy_fn, "cuMipmappedArrayDestroy",            \
          cuMipmappedArrayDestroy, 12040)                                                          \
        X(mem_create, tsr_cu_mem_create_fn, "cuMemCreate", cuMemCreate, 12040)                     \
        X(mem_release, tsr_cu_mem_release_fn, "cuMemRelease", cuMemRelease, 12040)                 \
        X(module_load, module_load_fn, "cuModuleLoadData", cuModuleLoadData, 12040)                \
        X(get_function, get_function_fn, "cuModuleGetFunction", cuModuleGetFunction, 12040)        \
        X(stream_create, stream_create_fn, "cuStreamCreate", cuStreamCreate, 12040)                \
        X(launch, tsr_cu_launch_kernel_fn, "cuLaunchKernel", cuLaunchKernel, 12040)                \
        X(launch_ex, tsr_cu_launch_kernel_ex_fn, "cuLaunchKernelEx", cuLaunchKernelEx, 12040)      \
        X(launch_coop, tsr_cu_launch_cooperative_kernel_fn, "cuLaunchCooperativeKernel",           \
          cuLaunchCooperativeKernel, 12040)                                                        \
        X(graph_create, graph_create_fn, "cuGraphCreate", cuGraphCreate, 12040)                    \
        X(graph_instantiate, graph_instantiate_fn, "cuGraphInstantiateWithFlags",                  \
          cuGraphInstantiateWithFlags, 12040)                                                      \
        X(graph_launch, tsr_cu_graph_launch_fn, "cuGraphLaunch", cuGraphLaunch, 12040)

static struct {
#define FIELD(f, type, base, sym, version) type *f;
        API(FIELD)
#undef FIELD
} api;

enum akind { A_LINEAR, A_LINEAR_V1, A_ASYNC, A_ARRAY, A_MIPMAP, A_VMM };

static struct {
        enum akind kind;
        uint64_t handle;
        bool live;
} allocs[ALLOCS_MAX];
static size_t n_allocs;

static void *libcuda; /* dlopen handle of the runtime-style modes */
static CUfunction kernel;
static CUgraphExec graph_exec;

static void *open_libcuda(void)
{
        if (!libcuda)
                libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!libcuda)
                fprintf(stderr, "worker: dlopen libcuda.so.1: %s\n", dlerror());
        return libcuda;
}

/* Resolves every entry point of the table for mode; 0, or -1 (named on stderr). */
static int set_mode(const char *mode)
{
        tsr_cu_get_proc_address_v2_fn *gpa2 = NULL;
        tsr_cu_get_proc_address_fn *gpa1 = NULL;
        CUdriverProcAddressQueryResult status;
        cuuint64_t flags = 0;
        void *h, *p;

        if (!strcmp(mode, "direct")) {
#define DIRECT(f, type, base, sym, version) api.f = sym;
                API(DIRECT)
#undef DIRECT
                return 0;
        }
        h = open_libcuda();
        if (!h)
                return -1;
        if (!strcmp(mode, "dlsym")) {
#define DLSYM(f, type, base, sym, version)                                                         \
        p = dlsym(h, #sym);                                                                        \
        if (!p) {                                                                                  \
                fprintf(stderr, "worker: dlsym %s: %s\n", #sym, dlerror());                        \
                return -1;                                                                         \
        }                                                                                          \
        memcpy(&api.f, &p, sizeof(p));
                API(DLSYM)
#undef DLSYM
                return 0;
        }
        if (!strcmp(mode, "gpa2") || !strcmp(mode, "ptsz")) {
                p = dlsym(h, "cuGetProcAddress_v2");
                memcpy(&gpa2, &p, sizeof(p));
                flags = strcmp(mode, "ptsz") ? CU_GET_PROC_ADDRESS_DEFAULT
                                             : CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        } else if (!strcmp(mode, "gpa1")) {
                p = dlsym(h, "cuGetProcAddress");
                memcpy(&gpa1, &p, sizeof(p));
        } else {
                fprintf(stderr, "worker: unknown mode %s\n", mode);
                return -1;
        }
        if (!gpa1 && !gpa2) {
                fprintf(stderr, "worker: dlsym cuGetProcAddress: %s\n", dlerror());
                return -1;
        }
#define GPA(f, type, base, sym, version)                                                           \
        p = NULL;                                                                                  \
        if ((gpa2 ? gpa2(base, &p, version, flags, &status) : gpa1(base, &p, version, flags)) ||   \
            !p) {                                                                                  \
                fprintf(stderr, "worker: cuGetProcAddress %s %d failed\n", base, version);         \
                return -1;                                                                         \
        }                                                                                          \
        memcpy(&api.f, &p, sizeof(p));
        API(GPA)
#undef GPA
        return 0;
}

static void answer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void answer(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

static long record(enum akind kind, uint64_t handle)
{
        if (n_allocs == ALLOCS_MAX)
                return -1;
        allocs[n_allocs].kind = kind;
        allocs[n_allocs].handle = handle;
        allocs[n_allocs].live = true;
        return (long)n_allocs++;
}

static uint64_t arg(char **argv, int argc, int i)
{
        return i < argc ? strtoull(argv[i], NULL, 0) : 0;
}

static CUresult current_pool(CUmemoryPool *pool)
{
        static CUmemoryPool cached;
        CUdevice dev = 0;
        CUresult rc;

        if (cached) {
                *pool = cached;
                return CUDA_SUCCESS;
        }
        rc = cuCtxGetDevice(&dev);
        if (!rc)
                rc = api.default_pool(&cached, dev);
        *pool = cached;
        return rc;
}

static void do_alloc(char **argv, int argc)
{
        const char *what = argc > 1 ? argv[1] : "";
        uint64_t a = arg(argv, argc, 2), b = arg(argv, argc, 3), c = arg(argv, argc, 4);
        uint64_t d = arg(argv, argc, 5), e = arg(argv, argc, 6), f = arg(argv, argc, 7);
        CUresult rc = CUDA_ERROR_INVALID_VALUE;
        CUdeviceptr ptr = 0;
        CUdeviceptr_v1 ptr32 = 0;
        size_t pitch = 0;
        enum akind kind = A_LINEAR;
        uint64_t handle = 0;

        if (!strcmp(what, "v2")) {
                rc = api.alloc(&ptr, a);
        } else if (!strcmp(what, "v1")) {
                rc = api.alloc_v1(&ptr32, (unsigned)a);
                ptr = ptr32;
                kind = A_LINEAR_V1;
        } else if (!strcmp(what, "managed")) {
                rc = api.alloc_managed(&ptr, a, CU_MEM_ATTACH_GLOBAL);
        } else if (!strcmp(what, "async")) {
                rc = api.alloc_async(&ptr, a, NULL);
                kind = A_ASYNC;
        } else if (!strcmp(what, "pool")) {
                CUmemoryPool pool = NULL;

                rc = current_pool(&pool);
                if (!rc)
                        rc = api.alloc_pool(&ptr, a, pool, NULL);
                kind = A_ASYNC;
        } else if (!strcmp(what, "pitch")) {
                rc = api.alloc_pitch(&ptr, &pitch, a, b, (unsigned)c);
        } else if (!strcmp(what, "array")) {
                CUDA_ARRAY_DESCRIPTOR desc = {.Width = a,
                                              .Height = b,
                                              .Format = (CUarray_format)c,
                                              .NumChannels = (unsigned)d};
                CUarray arr = NULL;

                rc = api.array_create(&arr, &desc);
                ptr = (uint64_t)(uintptr_t)arr;
                kind = A_ARRAY;
        } else if (!strcmp(what, "array3d") || !strcmp(what, "mipmap")) {
                CUDA_ARRAY3D_DESCRIPTOR desc = {.Width = a,
                                                .Height = b,
                                                .Depth = c,
                                                .Format = (CUarray_format)d,
                                                .NumChannels = (unsigned)e};
                CUarray arr = NULL;
                CUmipmappedArray mip = NULL;

                if (what[0] == 'a') {
                        rc = api.array3d_create(&arr, &desc);
                        ptr = (uint64_t)(uintptr_t)arr;
                        kind = A_ARRAY;
                } else {
                        rc = api.mipmap_create(&mip, &desc, (unsigned)f);
                        ptr = (uint64_t)(uintptr_t)mip;
                        kind = A_MIPMAP;
                }
        } else if (!strcmp(what, "vmm")) {
                CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                            .location = {CU_MEM_LOCATION_TYPE_DEVICE, (int)b}};

                rc = api.mem_create(&handle, a, &prop, 0);
                ptr = handle;
                kind = A_VMM;
        }
        if (rc)
                answer("%d -1", rc);
        else if (!strcmp(what, "pitch"))
                answer("%d %ld %zu", rc, record(kind, ptr), pitch);
        else
                answer("%d %ld", rc, record(kind, ptr));
}

static void do_free(uint64_t id)
{
        CUresult rc = CUDA_ERROR_INVALID_VALUE;
        uint64_t h;

        if (id >= n_allocs || !allocs[id].live) {
                answer("%d", rc);
                return;
        }
        h = allocs[id].handle;
        switch (allocs[id].kind) {
        case A_LINEAR:
                rc = api.free(h);
                break;
        case A_LINEAR_V1:
                rc = api.free_v1((CUdeviceptr_v1)h);
                break;
        case A_ASYNC:
                rc = api.free_async(h, NULL);
                break;
        case A_ARRAY:
                rc = api.array_destroy((CUarray)(uintptr_t)h);
                break;
        case A_MIPMAP:
                rc = api.mipmap_destroy((CUmipmappedArray)(uintptr_t)h);
                break;
        case A_VMM:
                rc = api.mem_release(h);
                break;
        }
        if (!rc)
                allocs[id].live = false;
        answer("%d", rc);
}

static CUresult prepare_kernels(void)
{
        static const char image[] = "fake module";
        CUmodule module = NULL;
        CUgraph graph = NULL;
        CUresult rc = CUDA_SUCCESS;

        if (kernel)
                return rc;
        rc = api.module_load(&module, image);
        if (!rc)
                rc = api.get_function(&kernel, module, "spin");
        if (!rc)
                rc = api.graph_create(&graph, 0);
        if (!rc)
                rc = api.graph_instantiate(&graph_exec, graph, 0);
        return rc;
}

static CUresult launch_one(const char *how, unsigned grid)
{
        CUlaunchConfig cfg = {.gridDimX = grid,
                              .gridDimY = 1,
                              .gridDimZ = 1,
                              .blockDimX = 128,
                              .blockDimY = 1,
                              .blockDimZ = 1};

        if (!strcmp(how, "ex"))
                return api.launch_ex(&cfg, kernel, NULL, NULL);
        if (!strcmp(how, "coop"))
                return api.launch_coop(kernel, grid, 1, 1, 128, 1, 1, 0, NULL, NULL);
        if (!strcmp(how, "graph"))
                return api.graph_launch(graph_exec, NULL);
        return api.launch(kernel, grid, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL);
}

static void do_compute(uint64_t ms, unsigned grid, const char *how)
{
        uint64_t start, tail, stop, end, launches = 0;
        CUdevice dev = 0;
        CUresult rc = prepare_kernels();

        if (!rc)
                rc = cuCtxGetDevice(&dev);
        start = tsr_fake_cuda_now_ns();
        stop = start + ms * 1000000ull;
        tail = start + ms * 1000000ull / 3;
        while (!rc && tsr_fake_cuda_now_ns() < stop) {
                rc = launch_one(how, grid);
                launches++;
        }
        if (!rc)
                rc = api.synchronize();
        end = tsr_fake_cuda_now_ns();
        if (rc) {
                answer("%d 0 0 %" PRIu64, rc, launches);
                return;
        }
        answer("%d %.4f %.4f %" PRIu64, rc,
               (double)tsr_fake_cuda_busy_ns(dev, start, end) / (double)(end - start),
               (double)tsr_fake_cuda_busy_ns(dev, tail, end) / (double)(end - tail), launches);
}

static void do_nvml(const char *cmd, unsigned idx)
{
        nvmlDevice_t dev = NULL;
        nvmlReturn_t rc = nvmlDeviceGetHandleByIndex_v2(idx, &dev);

        if (!rc && !strcmp(cmd, "nvml")) {
                nvmlMemory_t m = {0};

                rc = nvmlDeviceGetMemoryInfo(dev, &m);
                answer("%d %llu %llu %llu", rc, m.total, m.used, m.free);
        } else if (!rc && !strcmp(cmd, "nvml2")) {
                nvmlMemory_v2_t m = {.version = nvmlMemory_v2};

                rc = nvmlDeviceGetMemoryInfo_v2(dev, &m);
                answer("%d %llu %llu %llu", rc, m.total, m.used, m.free);
        } else if (!rc && !strcmp(cmd, "util")) {
                nvmlUtilization_t u = {0};

                rc = nvmlDeviceGetUtilizationRates(dev, &u);
                answer("%d %u", rc, u.gpu);
        } else if (!rc) {
                nvmlProcessInfo_t p[4] = {{0}};
                unsigned n = 4;

                rc = nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, p);
                answer("%d %u %u %llu", rc, n, n ? p[0].pid : 0, n ? p[0].usedGpuMemory : 0);
        } else {
                answer("%d", rc);
        }
}

static void do_gpa(char **argv, int argc)
{
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
        tsr_cu_get_proc_address_v2_fn *gpa2;
        void *h = open_libcuda(), *p = NULL, *want;
        CUresult rc;

        if (!h || argc < 5) {
                answer("%d", CUDA_ERROR_INVALID_VALUE);
                return;
        }
        want = dlsym(h, argv[4]);
        p = dlsym(h, "cuGetProcAddress_v2");
        memcpy(&gpa2, &p, sizeof(p));
        p = NULL;
        rc = gpa2(argv[1], &p, (int)strtol(argv[2], NULL, 0), strtoull(argv[3], NULL, 0), &status);
        answer("%d %d %d", rc, (int)status, p && p == want);
}

static void execute(char **argv, int argc)
{
        const char *cmd = argv[0];
        CUcontext ctx = NULL;
        size_t f = 0, t = 0;
        unsigned f1 = 0, t1 = 0;
        CUresult rc;

        if (!strcmp(cmd, "mode")) {
                answer("%d", argc > 1 && set_mode(argv[1]) == 0 ? 0 : CUDA_ERROR_INVALID_VALUE);
        } else if (!strcmp(cmd, "init")) {
                answer("%d", api.init(0));
        } else if (!strcmp(cmd, "ctx")) {
                answer("%d", api.ctx_create(&ctx, 0, (CUdevice)arg(argv, argc, 1)));
        } else if (!strcmp(cmd, "primary")) {
                rc = api.primary_retain(&ctx, (CUdevice)arg(argv, argc, 1));
                answer("%d", rc ? rc : api.set_current(ctx));
        } else if (!strcmp(cmd, "pop")) {
                answer("%d", api.pop_current(&ctx));
        } else if (!strcmp(cmd, "alloc")) {
                do_alloc(argv, argc);
        } else if (!strcmp(cmd, "free")) {
                do_free(arg(argv, argc, 1));
        } else if (!strcmp(cmd, "freeraw")) {
                answer("%d", api.free(arg(argv, argc, 1)));
        } else if (!strcmp(cmd, "meminfo")) {
                rc = api.mem_get_info(&f, &t);
                answer("%d %zu %zu", rc, f, t);
        } else if (!strcmp(cmd, "meminfo1")) {
                rc = api.mem_get_info_v1(&f1, &t1);
                answer("%d %u %u", rc, f1, t1);
        } else if (!strcmp(cmd, "totalmem")) {
                rc = api.total_mem(&t, (CUdevice)arg(argv, argc, 1));
                answer("%d %zu", rc, t);
        } else if (!strcmp(cmd, "nvml") || !strcmp(cmd, "nvml2") || !strcmp(cmd, "util") ||
                   !strcmp(cmd, "procs")) {
                do_nvml(cmd, (unsigned)arg(argv, argc, 1));
        } else if (!strcmp(cmd, "gpa")) {
                do_gpa(argv, argc);
        } else if (!strcmp(cmd, "compute")) {
                do_compute(arg(argv, argc, 1), (unsigned)arg(argv, argc, 2),
                           argc > 3 ? argv[3] : "kernel");
        } else if (!strcmp(cmd, "pid")) {
                answer("0 %ld", (long)getpid());
        } else {
                answer("%d unknown command", CUDA_ERROR_INVALID_VALUE);
        }
}

int main(void)
{
        char line[LINE_MAX_], *argv[16], *save = NULL;
        int argc;

        alarm(WORKER_LIFETIME_S); /* a worker stuck in a call must not outlive its test */
        set_mode("direct");
        if (nvmlInit_v2() != NVML_SUCCESS)
                fprintf(stderr, "worker: nvmlInit_v2 failed\n");
        while (fgets(line, sizeof(line), stdin)) {
                argc = 0;
                for (char *tok = strtok_r(line, " \t\n", &save); tok && argc < 16;
                     tok = strtok_r(NULL, " \t\n", &save))
                        argv[argc++] = tok;
                if (!argc)
                        continue;
                if (!strcmp(argv[0], "exit"))
                        break;
                execute(argv, argc);
        }
        nvmlShutdown();
        if (libcuda)
                dlclose(libcuda);
        return 0;
}
