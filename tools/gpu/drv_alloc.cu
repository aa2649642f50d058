/*
 * drv_alloc.cu - the memory-limit probe of the vgpu check (tools/gpu/vgpu_check.sh) through the
 * CUDA driver API, linked against libcuda directly (so calls bind by symbol name, cuMemAlloc_v2
 * and friends, the path LD_PRELOAD interposes without cuGetProcAddress).
 *
 * Usage: drv_alloc --mode limited|bare --limit-mib L
 * With L/2 held by cuMemAlloc, each of cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged,
 * cuArray3DCreate, cuMemCreate (virtual memory management) and cuMemAllocAsync asks for 3L/4
 * (past the limit: limited must refuse with CUDA_ERROR_OUT_OF_MEMORY, bare must grant) and then
 * L/8 (within it: both grant); last, L/2 once everything is freed. Each attempt prints
 *   RESULT path=<api> step=<what> bytes=<n> rc=<code> err=<name> got=ok|oom|error
 *          expect=ok|oom verdict=pass|FAIL
 * then "SUMMARY failures=<n>". Exit 0 when nothing FAILed, 1 otherwise, 2 when CUDA could not
 * start. Host code only: no kernel.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024ull)

static bool limited;
static unsigned long long limit_bytes;
static int failures;
static CUdevice dev;

static void result(const char *path, const char *step, unsigned long long bytes, CUresult rc,
                   const char *expect)
{
        const char *name = NULL;
        const char *got = rc == CUDA_SUCCESS ? "ok" : rc == CUDA_ERROR_OUT_OF_MEMORY ? "oom" : "error";
        const char *verdict = strcmp(expect, got) == 0 ? "pass" : "FAIL";

        if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || name == NULL)
                name = "?";
        if (verdict[0] == 'F')
                failures++;
        printf("RESULT path=%s step=%s bytes=%llu rc=%d err=%s got=%s expect=%s verdict=%s\n", path,
               step, bytes, (int)rc, name, got, expect, verdict);
        fflush(stdout);
}

static const char *over(void)
{
        return limited ? "oom" : "ok";
}

static void meminfo(const char *tag)
{
        size_t free_bytes = 0, total = 0;
        CUresult rc = cuMemGetInfo(&free_bytes, &total);

        printf("MEMINFO tag=%s rc=%d free_mib=%llu total_mib=%llu\n", tag, (int)rc,
               (unsigned long long)free_bytes / MIB, (unsigned long long)total / MIB);
        fflush(stdout);
}

/* ---- the allocation paths --------------------------------------------------------------- */

struct handle {
        CUdeviceptr ptr;
        CUarray array;
        CUmemGenericAllocationHandle vmm;
};

static CUstream stream;

static CUresult alloc_plain(struct handle *h, unsigned long long bytes)
{
        return cuMemAlloc(&h->ptr, bytes);
}

static CUresult alloc_pitch(struct handle *h, unsigned long long bytes)
{
        size_t pitch = 0;

        return cuMemAllocPitch(&h->ptr, &pitch, MIB, bytes / MIB, 16);
}

static CUresult alloc_managed(struct handle *h, unsigned long long bytes)
{
        return cuMemAllocManaged(&h->ptr, bytes, CU_MEM_ATTACH_GLOBAL);
}

static CUresult alloc_array3d(struct handle *h, unsigned long long bytes)
{
        CUDA_ARRAY3D_DESCRIPTOR d;

        memset(&d, 0, sizeof d);
        d.Width = 1024;
        d.Height = 1024;
        d.Depth = bytes / (4 * MIB); /* 1024 x 1024 floats (4 MiB) a slice */
        d.Format = CU_AD_FORMAT_FLOAT;
        d.NumChannels = 1;
        return cuArray3DCreate(&h->array, &d);
}

static CUmemAllocationProp vmm_prop(void)
{
        CUmemAllocationProp prop;

        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        return prop;
}

static CUresult alloc_vmm(struct handle *h, unsigned long long bytes)
{
        CUmemAllocationProp prop = vmm_prop();
        size_t gran = 0;
        CUresult rc = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);

        if (rc != CUDA_SUCCESS)
                return rc;
        if (gran > 0)
                bytes = (bytes + gran - 1) / gran * gran;
        return cuMemCreate(&h->vmm, bytes, &prop, 0);
}

static CUresult alloc_async(struct handle *h, unsigned long long bytes)
{
        CUresult rc = cuMemAllocAsync(&h->ptr, bytes, stream);

        if (rc == CUDA_SUCCESS)
                rc = cuStreamSynchronize(stream);
        return rc;
}

static CUresult free_ptr(struct handle *h)
{
        return cuMemFree(h->ptr);
}

static CUresult free_array(struct handle *h)
{
        return cuArrayDestroy(h->array);
}

static CUresult free_vmm(struct handle *h)
{
        return cuMemRelease(h->vmm);
}

static CUresult free_async(struct handle *h)
{
        CUresult rc = cuMemFreeAsync(h->ptr, stream);

        if (rc == CUDA_SUCCESS)
                rc = cuStreamSynchronize(stream);
        return rc;
}

struct path {
        const char *name;
        CUresult (*alloc)(struct handle *h, unsigned long long bytes);
        CUresult (*release)(struct handle *h);
};

static const struct path paths[] = {
        {"cuMemAlloc", alloc_plain, free_ptr},
        {"cuMemAllocPitch", alloc_pitch, free_ptr},
        {"cuMemAllocManaged", alloc_managed, free_ptr},
        {"cuArray3DCreate", alloc_array3d, free_array},
        {"cuMemCreate", alloc_vmm, free_vmm},
        {"cuMemAllocAsync", alloc_async, free_async},
};

static void probe_path(const struct path *p)
{
        unsigned long long half = limit_bytes / 2, big = limit_bytes / 4 * 3, small = limit_bytes / 8;
        struct handle h;
        CUdeviceptr hold = 0;
        CUresult rc;

        rc = cuMemAlloc(&hold, half);
        result(p->name, "hold_half_by_cuMemAlloc", half, rc, "ok");
        if (rc != CUDA_SUCCESS)
                return;
        memset(&h, 0, sizeof h);
        rc = p->alloc(&h, big);
        result(p->name, "three_quarters_past_limit", big, rc, over());
        if (rc == CUDA_SUCCESS)
                result(p->name, "free_three_quarters", big, p->release(&h), "ok");
        memset(&h, 0, sizeof h);
        rc = p->alloc(&h, small);
        result(p->name, "eighth_within_limit", small, rc, "ok");
        if (rc == CUDA_SUCCESS)
                result(p->name, "free_eighth", small, p->release(&h), "ok");
        result(p->name, "free_hold", half, cuMemFree(hold), "ok");
}

int main(int argc, char **argv)
{
        unsigned long long limit_mib = 0;
        const char *mode = NULL;
        CUcontext ctx = NULL;
        CUdeviceptr last = 0;
        CUresult rc;

        for (int i = 1; i + 1 < argc; i += 2) {
                if (strcmp(argv[i], "--mode") == 0)
                        mode = argv[i + 1];
                else if (strcmp(argv[i], "--limit-mib") == 0)
                        limit_mib = strtoull(argv[i + 1], NULL, 10);
        }
        if (mode == NULL || limit_mib < 256) {
                fprintf(stderr, "usage: drv_alloc --mode limited|bare --limit-mib L\n");
                return 2;
        }
        limited = strcmp(mode, "limited") == 0;
        limit_bytes = limit_mib * MIB;
        printf("START drv_alloc mode=%s limit_mib=%llu\n", mode, limit_mib);
        fflush(stdout);

        /* The primary context, as cudart uses; cuCtxCreate's signature changed in CUDA 13. */
        rc = cuInit(0);
        if (rc == CUDA_SUCCESS)
                rc = cuDeviceGet(&dev, 0);
        if (rc == CUDA_SUCCESS)
                rc = cuDevicePrimaryCtxRetain(&ctx, dev);
        if (rc == CUDA_SUCCESS)
                rc = cuCtxSetCurrent(ctx);
        if (rc == CUDA_SUCCESS)
                rc = cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
        result("init", "context", 0, rc, "ok");
        if (rc != CUDA_SUCCESS) {
                printf("SUMMARY failures=%d init_failed=1\n", failures);
                return 2;
        }
        meminfo("before");
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
                probe_path(&paths[i]);
        rc = cuMemAlloc(&last, limit_bytes / 2);
        result("cuMemAlloc", "half_after_all_freed", limit_bytes / 2, rc, "ok");
        if (rc == CUDA_SUCCESS)
                (void)cuMemFree(last);
        meminfo("end");
        printf("SUMMARY failures=%d mode=%s limit_mib=%llu\n", failures, mode, limit_mib);
        return failures == 0 ? 0 : 1;
}
