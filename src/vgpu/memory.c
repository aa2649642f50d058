/*
 * memory.c - device memory counted against the slice: every allocation path reserves its bytes in
 * the shared budget (region.h) before the driver is asked, and gives them back when the driver
 * refuses or the handle is freed; what the driver and NVML report is the slice's.
 *
 * What an allocation is charged (docs/vgpu.md "What is counted"): the bytes asked for; a pitched
 * allocation its pitch × height (known after the driver answers, so the difference to the asked
 * width × height is reserved afterwards and the allocation undone when it does not fit); an array
 * its extent × channels × element size (16 bytes for a format this file does not know); a
 * mipmapped array the sum of its levels; a VMM physical allocation its size on the device its
 * properties name. Managed memory counts in full. Async and pool allocations count when made and
 * return when freed, whatever the pool keeps. The device is the current context's. Devices past
 * TSR_VGPU_DEVICES_MAX and calls without control pass through uncounted.
 */
#include <stdint.h>

#include "vgpu/held.h"
#include "vgpu/hooks.h"
#include "vgpu/state.h"

#define EXPORT __attribute__((visibility("default")))

/* The current context's device when control applies to it, else -1. */
static int counted_device(const struct tsr_vgpu_state *s)
{
        CUdevice dev;

        if (!s->control || !tsr_vgpu_real.cuCtxGetDevice ||
            tsr_vgpu_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
            dev >= TSR_VGPU_DEVICES_MAX)
                return -1;
        return dev;
}

/* Reserves bytes on dev; false: the allocation must answer out of memory. */
static bool reserve(const struct tsr_vgpu_state *s, int dev, uint64_t bytes)
{
        if (tsr_vgpu_region_reserve(s->region, dev, bytes, tsr_vgpu_limit(s, dev)))
                return true;
        tsr_vgpu_log(3, "device %d: %llu bytes refused, past the slice's %llu", dev,
                     (unsigned long long)bytes, (unsigned long long)tsr_vgpu_limit(s, dev));
        return false;
}

/*
 * After the driver's answer rc to an allocation of handle reserved as bytes on dev: records it,
 * or returns the reservation when the driver refused. Returns what the hook answers.
 */
static CUresult settle(const struct tsr_vgpu_state *s, CUresult rc, enum tsr_vgpu_kind kind,
                       uint64_t handle, int dev, uint64_t bytes)
{
        if (rc != CUDA_SUCCESS) {
                tsr_vgpu_region_release(s->region, dev, bytes);
                return rc;
        }
        if (!tsr_vgpu_held_add(kind, handle, dev, bytes)) {
                /* cannot remember it, so it could never be returned: keep it charged */
                tsr_vgpu_log(1, "out of host memory recording an allocation of %llu bytes",
                             (unsigned long long)bytes);
        }
        return CUDA_SUCCESS;
}

/* After the driver freed handle (rc): returns its bytes to the budget. */
static CUresult returned(const struct tsr_vgpu_state *s, CUresult rc, enum tsr_vgpu_kind kind,
                         uint64_t handle)
{
        uint64_t bytes;
        int dev;

        if (rc == CUDA_SUCCESS && s->control && tsr_vgpu_held_take(kind, handle, &dev, &bytes))
                tsr_vgpu_region_release(s->region, dev, bytes);
        return rc;
}

/* A state on which an allocation may proceed; NULL: refuse (the environment is unusable). */
static const struct tsr_vgpu_state *alloc_state(void)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        return s->failed ? NULL : s;
}

#define REAL_OR_UNSUPPORTED(name)                                                                  \
        if (!tsr_vgpu_real.name)                                                                   \
        return CUDA_ERROR_NOT_SUPPORTED

/* ---- linear memory ------------------------------------------------------------------------- */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
        const struct tsr_vgpu_state *s = alloc_state();
        CUresult rc;
        int dev;

        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        REAL_OR_UNSUPPORTED(cuMemAlloc_v2);
        if ((dev = counted_device(s)) < 0 || !dptr)
                return tsr_vgpu_real.cuMemAlloc_v2(dptr, bytes);
        if (!reserve(s, dev, bytes))
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = tsr_vgpu_real.cuMemAlloc_v2(dptr, bytes);
        return settle(s, rc, TSR_VGPU_HELD_POINTER, rc ? 0 : *dptr, dev, bytes);
}

EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes)
{
        const struct tsr_vgpu_state *s = alloc_state();
        CUresult rc;
        int dev;

        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        REAL_OR_UNSUPPORTED(cuMemAlloc);
        if ((dev = counted_device(s)) < 0 || !dptr)
                return tsr_vgpu_real.cuMemAlloc(dptr, bytes);
        if (!reserve(s, dev, bytes))
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = tsr_vgpu_real.cuMemAlloc(dptr, bytes);
        return settle(s, rc, TSR_VGPU_HELD_POINTER, rc ? 0 : *dptr, dev, bytes);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
        const struct tsr_vgpu_state *s = alloc_state();
        CUresult rc;
        int dev;

        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        REAL_OR_UNSUPPORTED(cuMemAllocManaged);
        if ((dev = counted_device(s)) < 0 || !dptr)
                return tsr_vgpu_real.cuMemAllocManaged(dptr, bytes, flags);
        if (!reserve(s, dev, bytes))
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = tsr_vgpu_real.cuMemAllocManaged(dptr, bytes, flags);
        return settle(s, rc, TSR_VGPU_HELD_POINTER, rc ? 0 : *dptr, dev, bytes);
}

/*
 * A pitched allocation: width × height reserved first (the least it can take), the rest of
 * pitch × height once the driver chose the pitch; undone when that does not fit.
 */
static CUresult pitched(const struct tsr_vgpu_state *s, int dev, CUresult rc, uint64_t handle,
                        uint64_t asked, uint64_t taken, CUresult (*undo)(uint64_t handle))
{
        if (rc != CUDA_SUCCESS) {
                tsr_vgpu_region_release(s->region, dev, asked);
                return rc;
        }
        if (taken > asked && !reserve(s, dev, taken - asked)) {
                undo(handle);
                tsr_vgpu_region_release(s->region, dev, asked);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return settle(s, CUDA_SUCCESS, TSR_VGPU_HELD_POINTER, handle, dev,
                      taken > asked ? taken : asked);
}

static CUresult free_v2(uint64_t handle)
{
        return tsr_vgpu_real.cuMemFree_v2 ? tsr_vgpu_real.cuMemFree_v2(handle)
                                          : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult free_v1(uint64_t handle)
{
        return tsr_vgpu_real.cuMemFree ? tsr_vgpu_real.cuMemFree((CUdeviceptr_v1)handle)
                                       : CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                   unsigned int elem)
{
        const struct tsr_vgpu_state *s = alloc_state();
        uint64_t asked;
        CUresult rc;
        int dev;

        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        REAL_OR_UNSUPPORTED(cuMemAllocPitch_v2);
        if ((dev = counted_device(s)) < 0 || !dptr || !pitch ||
            (height && width > UINT64_MAX / height))
                return tsr_vgpu_real.cuMemAllocPitch_v2(dptr, pitch, width, height, elem);
        asked = (uint64_t)width * height;
        if (!reserve(s, dev, asked))
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = tsr_vgpu_real.cuMemAllocPitch_v2(dptr, pitch, width, height, elem);
        return pitched(s, dev, rc, rc ? 0 : *dptr, asked, rc ? 0 : (uint64_t)*pitch * height,
                       free_v2);
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
                                unsigned int height, unsigned int elem)
{
        const struct tsr_vgpu_state *s = alloc_state();
        uint64_t asked;
        CUresult rc;
        int dev;

        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        REAL_OR_UNSUPPORTED(cuMemAllocPitch);
        if ((dev = counted_device(s)) < 0 || !dptr || !pitch)
                return tsr_vgpu_real.cuMemAllocPitch(dptr, pitch, width, height, elem);
        asked = (uint64_t)width * height;
        if (!reserve(s, dev, asked))
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = tsr_vgpu_real.cuMemAllocPitch(dptr, pitch, width, height, elem);
        return pitched(s, dev, rc, rc ? 0 : *dptr, asked, rc ? 0 : (uint64_t)*pitch * height,
                       free_v1);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        REAL_OR_UNSUPPORTED(cuMemFree_v2);
        return returned(s, tsr_vgpu_real.cuMemFree_v2(dptr), TSR_VGPU_HELD_POINTER, dptr);
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        REAL_OR_UNSUPPORTED(cuMemFree);
        return returned(s, tsr_vgpu_real.cuMemFree(dptr), TSR_VGPU_HELD_POINTER, dptr);
}

/* ---- stream-ordered allocations ------------------------------------------------------------ */

/* One body for cuMemAllocAsync[_ptsz] and cuMemAllocFromPoolAsync[_ptsz]: real is either. */
static CUresult alloc_async(tsr_cu_mem_alloc_async_fn *real,
                            tsr_cu_mem_alloc_from_pool_async_fn *real_pool, CUdeviceptr *dptr,
                            size_t bytes, CUmemoryPool pool, CUstream stream)
{
        const struct tsr_vgpu_state *s = alloc_state();
        CUresult rc;
        int dev;

        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (!real && !real_pool)
                return CUDA_ERROR_NOT_SUPPORTED;
        if ((dev = counted_device(s)) < 0 || !dptr)
                return real ? real(dptr, bytes, stream) : real_pool(dptr, bytes, pool, stream);
        if (!reserve(s, dev, bytes))
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = real ? real(dptr, bytes, stream) : real_pool(dptr, bytes, pool, stream);
        return settle(s, rc, TSR_VGPU_HELD_POINTER, rc ? 0 : *dptr, dev, bytes);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
        tsr_vgpu_cuda();
        return alloc_async(tsr_vgpu_real.cuMemAllocAsync, NULL, dptr, bytes, NULL, stream);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
        tsr_vgpu_cuda();
        return alloc_async(tsr_vgpu_real.cuMemAllocAsync_ptsz, NULL, dptr, bytes, NULL, stream);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                        CUstream stream)
{
        tsr_vgpu_cuda();
        return alloc_async(NULL, tsr_vgpu_real.cuMemAllocFromPoolAsync, dptr, bytes, pool, stream);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                             CUstream stream)
{
        tsr_vgpu_cuda();
        return alloc_async(NULL, tsr_vgpu_real.cuMemAllocFromPoolAsync_ptsz, dptr, bytes, pool,
                           stream);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        REAL_OR_UNSUPPORTED(cuMemFreeAsync);
        return returned(s, tsr_vgpu_real.cuMemFreeAsync(dptr, stream), TSR_VGPU_HELD_POINTER, dptr);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        REAL_OR_UNSUPPORTED(cuMemFreeAsync_ptsz);
        return returned(s, tsr_vgpu_real.cuMemFreeAsync_ptsz(dptr, stream), TSR_VGPU_HELD_POINTER,
                        dptr);
}

/* ---- arrays -------------------------------------------------------------------------------- */

static uint64_t element_bytes(CUarray_format f)
{
        switch (f) {
        case CU_AD_FORMAT_UNSIGNED_INT8:
        case CU_AD_FORMAT_SIGNED_INT8:
                return 1;
        case CU_AD_FORMAT_UNSIGNED_INT16:
        case CU_AD_FORMAT_SIGNED_INT16:
        case CU_AD_FORMAT_HALF:
                return 2;
        case CU_AD_FORMAT_UNSIGNED_INT32:
        case CU_AD_FORMAT_SIGNED_INT32:
        case CU_AD_FORMAT_FLOAT:
                return 4;
        }
        return 16; /* a block-compressed or newer format: the widest element, never less */
}

static uint64_t at_least_one(uint64_t v)
{
        return v ? v : 1;
}

/* width × height × depth × channels × element bytes, saturating at UINT64_MAX. */
static uint64_t extent_bytes(uint64_t w, uint64_t h, uint64_t d, unsigned channels,
                             CUarray_format f)
{
        uint64_t factors[] = {at_least_one(w), at_least_one(h), at_least_one(d),
                              at_least_one(channels), element_bytes(f)};
        uint64_t bytes = 1;

        for (size_t i = 0; i < sizeof(factors) / sizeof(factors[0]); i++) {
                if (bytes > UINT64_MAX / factors[i])
                        return UINT64_MAX;
                bytes *= factors[i];
        }
        return bytes;
}

struct array_args {
        CUarray *arr; /* the created array, or */
        CUmipmappedArray *mip;
        const void *desc;
        unsigned levels;
};

/* One body for every array creation: bytes known from the descriptor, create runs the driver. */
static CUresult array_create(enum tsr_vgpu_kind kind, uint64_t bytes,
                             CUresult (*create)(const struct array_args *a),
                             const struct array_args *a)
{
        const struct tsr_vgpu_state *s = alloc_state();
        uint64_t handle = 0;
        CUresult rc;
        int dev;

        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if ((dev = counted_device(s)) < 0 || (!a->arr && !a->mip))
                return create(a);
        if (!reserve(s, dev, bytes))
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = create(a);
        if (rc == CUDA_SUCCESS)
                handle = a->arr ? (uint64_t)(uintptr_t)*a->arr : (uint64_t)(uintptr_t)*a->mip;
        return settle(s, rc, kind, handle, dev, bytes);
}

static CUresult create_mipmapped(const struct array_args *a)
{
        return tsr_vgpu_real.cuMipmappedArrayCreate(a->mip, a->desc, a->levels);
}

/* An array entry point: its descriptor's extent (depth: 1 for 2D) charged, then the driver's. */
#define ARRAY_HOOK(name, descriptor, depth)                                                        \
        static CUresult create_##name(const struct array_args *a)                                  \
        {                                                                                          \
                return tsr_vgpu_real.name(a->arr, a->desc);                                        \
        }                                                                                          \
                                                                                                   \
        EXPORT CUresult name(CUarray *arr, const descriptor *d)                                    \
        {                                                                                          \
                struct array_args a = {arr, NULL, d, 0};                                           \
                                                                                                   \
                tsr_vgpu_cuda();                                                                   \
                REAL_OR_UNSUPPORTED(name);                                                         \
                if (!d)                                                                            \
                        return tsr_vgpu_real.name(arr, d);                                         \
                return array_create(                                                               \
                    TSR_VGPU_HELD_ARRAY,                                                           \
                    extent_bytes(d->Width, d->Height, depth, d->NumChannels, d->Format),           \
                    create_##name, &a);                                                            \
        }

ARRAY_HOOK(cuArrayCreate_v2, CUDA_ARRAY_DESCRIPTOR, 1)
ARRAY_HOOK(cuArrayCreate, CUDA_ARRAY_DESCRIPTOR_v1, 1)
ARRAY_HOOK(cuArray3DCreate_v2, CUDA_ARRAY3D_DESCRIPTOR, d->Depth)
ARRAY_HOOK(cuArray3DCreate, CUDA_ARRAY3D_DESCRIPTOR_v1, d->Depth)

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *arr, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                       unsigned int levels)
{
        struct array_args a = {NULL, arr, d, levels};
        uint64_t bytes = 0, w, h, z;

        tsr_vgpu_cuda();
        REAL_OR_UNSUPPORTED(cuMipmappedArrayCreate);
        if (!d)
                return tsr_vgpu_real.cuMipmappedArrayCreate(arr, d, levels);
        w = d->Width;
        h = d->Height;
        z = d->Depth;
        for (unsigned l = 0; l < (levels ? levels : 1); l++) {
                uint64_t level = extent_bytes(w, h, z, d->NumChannels, d->Format);

                bytes = bytes > UINT64_MAX - level ? UINT64_MAX : bytes + level;
                w = w > 1 ? w / 2 : w;
                h = h > 1 ? h / 2 : h;
                z = z > 1 ? z / 2 : z;
        }
        return array_create(TSR_VGPU_HELD_MIPMAPPED, bytes, create_mipmapped, &a);
}

EXPORT CUresult cuArrayDestroy(CUarray arr)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        REAL_OR_UNSUPPORTED(cuArrayDestroy);
        return returned(s, tsr_vgpu_real.cuArrayDestroy(arr), TSR_VGPU_HELD_ARRAY,
                        (uint64_t)(uintptr_t)arr);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray arr)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        REAL_OR_UNSUPPORTED(cuMipmappedArrayDestroy);
        return returned(s, tsr_vgpu_real.cuMipmappedArrayDestroy(arr), TSR_VGPU_HELD_MIPMAPPED,
                        (uint64_t)(uintptr_t)arr);
}

/* ---- virtual memory management ------------------------------------------------------------- */

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
        const struct tsr_vgpu_state *s = alloc_state();
        CUresult rc;
        int dev;

        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        REAL_OR_UNSUPPORTED(cuMemCreate);
        if (!s->control || !handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            prop->location.id < 0 || prop->location.id >= TSR_VGPU_DEVICES_MAX)
                return tsr_vgpu_real.cuMemCreate(handle, bytes, prop, flags);
        dev = prop->location.id;
        if (!reserve(s, dev, bytes))
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = tsr_vgpu_real.cuMemCreate(handle, bytes, prop, flags);
        return settle(s, rc, TSR_VGPU_HELD_VMM, rc ? 0 : *handle, dev, bytes);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();

        REAL_OR_UNSUPPORTED(cuMemRelease);
        return returned(s, tsr_vgpu_real.cuMemRelease(handle), TSR_VGPU_HELD_VMM, handle);
}

/* ---- what the driver reports --------------------------------------------------------------- */

/* The slice's view of (free, total) on dev, from the driver's. */
static void slice_view(const struct tsr_vgpu_state *s, int dev, uint64_t *free_bytes,
                       uint64_t *total)
{
        uint64_t limit = tsr_vgpu_limit(s, dev), used;

        if (!s->control || !limit)
                return;
        used = tsr_vgpu_region_used(s->region, dev);
        if (*total > limit)
                *total = limit;
        if (*free_bytes > (used < limit ? limit - used : 0))
                *free_bytes = used < limit ? limit - used : 0;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();
        uint64_t f, t;
        CUresult rc;
        int dev;

        REAL_OR_UNSUPPORTED(cuMemGetInfo_v2);
        rc = tsr_vgpu_real.cuMemGetInfo_v2(free_bytes, total);
        if (rc != CUDA_SUCCESS || !free_bytes || !total || (dev = counted_device(s)) < 0)
                return rc;
        f = *free_bytes;
        t = *total;
        slice_view(s, dev, &f, &t);
        *free_bytes = (size_t)f;
        *total = (size_t)t;
        return rc;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();
        uint64_t f, t;
        CUresult rc;
        int dev;

        REAL_OR_UNSUPPORTED(cuMemGetInfo);
        rc = tsr_vgpu_real.cuMemGetInfo(free_bytes, total);
        if (rc != CUDA_SUCCESS || !free_bytes || !total || (dev = counted_device(s)) < 0)
                return rc;
        f = *free_bytes;
        t = *total;
        slice_view(s, dev, &f, &t);
        *free_bytes = (unsigned int)f;
        *total = (unsigned int)t;
        return rc;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();
        uint64_t limit = tsr_vgpu_limit(s, dev);
        CUresult rc;

        REAL_OR_UNSUPPORTED(cuDeviceTotalMem_v2);
        rc = tsr_vgpu_real.cuDeviceTotalMem_v2(bytes, dev);
        if (rc == CUDA_SUCCESS && bytes && s->control && limit && *bytes > limit)
                *bytes = (size_t)limit;
        return rc;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_cuda();
        uint64_t limit = tsr_vgpu_limit(s, dev);
        CUresult rc;

        REAL_OR_UNSUPPORTED(cuDeviceTotalMem);
        rc = tsr_vgpu_real.cuDeviceTotalMem(bytes, dev);
        if (rc == CUDA_SUCCESS && bytes && s->control && limit && *bytes > limit)
                *bytes = (unsigned int)limit;
        return rc;
}
