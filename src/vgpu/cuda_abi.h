/*
 * cuda_abi.h - our own declarations of the CUDA driver API subset the slice interposer touches, so
 * that nothing is needed from the CUDA toolkit at build time. Types, constants, struct field order
 * and the exported (versioned) symbol names follow the driver API reference (cuda.h of CUDA 12);
 * the functions are declared as pointer types (tsr_cu_*_fn) because the interposer never calls the
 * driver by name: it resolves the real entry points with dlsym and defines hooks of these types.
 * tests/vgpu/fake_cuda.c implements them as a fake driver over one in-memory device.
 *
 * Only what the interposer or its fake driver needs is here; add a declaration with its first user.
 */
#ifndef TSR_VGPU_CUDA_ABI_H
#define TSR_VGPU_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;        /* CUdeviceptr_v2 */
typedef unsigned int CUdeviceptr_v1; /* the 32-bit pointers of the pre-3.2 entry points */
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUfunc_st *CUfunction;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUgraphExec_st *CUgraphExec;
typedef uint64_t CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;

#define CUDA_SUCCESS                0
#define CUDA_ERROR_INVALID_VALUE    1
#define CUDA_ERROR_OUT_OF_MEMORY    2
#define CUDA_ERROR_NOT_INITIALIZED  3
#define CUDA_ERROR_NO_DEVICE        100
#define CUDA_ERROR_INVALID_DEVICE   101
#define CUDA_ERROR_INVALID_CONTEXT  201
#define CUDA_ERROR_OPERATING_SYSTEM 304
#define CUDA_ERROR_INVALID_HANDLE   400
#define CUDA_ERROR_NOT_FOUND        500
#define CUDA_ERROR_NOT_SUPPORTED    801
#define CUDA_ERROR_UNKNOWN          999

/* cuGetProcAddress flags and the _v2 query result. */
#define CU_GET_PROC_ADDRESS_DEFAULT                   0
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM             1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2
typedef enum {
        CU_GET_PROC_ADDRESS_SUCCESS = 0,
        CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
        CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

/* cuMemAllocManaged attach flags. */
#define CU_MEM_ATTACH_GLOBAL 0x1
#define CU_MEM_ATTACH_HOST   0x2

/* Array element formats (CUarray_format) whose sizes the interposer knows. */
typedef enum {
        CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
        CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
        CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
        CU_AD_FORMAT_SIGNED_INT8 = 0x08,
        CU_AD_FORMAT_SIGNED_INT16 = 0x09,
        CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
        CU_AD_FORMAT_HALF = 0x10,
        CU_AD_FORMAT_FLOAT = 0x20,
} CUarray_format;

typedef struct {
        size_t Width;
        size_t Height;
        CUarray_format Format;
        unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR; /* CUDA_ARRAY_DESCRIPTOR_v2 */

typedef struct {
        size_t Width;
        size_t Height;
        size_t Depth;
        CUarray_format Format;
        unsigned int NumChannels;
        unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR; /* CUDA_ARRAY3D_DESCRIPTOR_v2 */

/* The pre-3.2 descriptors: 32-bit extents. */
typedef struct {
        unsigned int Width;
        unsigned int Height;
        CUarray_format Format;
        unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct {
        unsigned int Width;
        unsigned int Height;
        unsigned int Depth;
        CUarray_format Format;
        unsigned int NumChannels;
        unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

/* Virtual memory management: the physical allocation's properties (CUmemAllocationProp_v1). */
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define CU_MEM_LOCATION_TYPE_DEVICE   0x1
typedef struct {
        int type; /* CUmemLocationType */
        int id;
} CUmemLocation;

typedef struct {
        int type;                 /* CUmemAllocationType */
        int requestedHandleTypes; /* CUmemAllocationHandleType */
        CUmemLocation location;
        void *win32HandleMetaData;
        struct {
                unsigned char compressionType;
                unsigned char gpuDirectRDMACapable;
                unsigned short usage;
                unsigned char reserved[4];
        } allocFlags;
} CUmemAllocationProp;

typedef struct CUlaunchAttribute_st CUlaunchAttribute;

typedef struct {
        unsigned int gridDimX;
        unsigned int gridDimY;
        unsigned int gridDimZ;
        unsigned int blockDimX;
        unsigned int blockDimY;
        unsigned int blockDimZ;
        unsigned int sharedMemBytes;
        CUstream hStream;
        CUlaunchAttribute *attrs;
        unsigned int numAttrs;
} CUlaunchConfig;

/* ---- entry points, as function-pointer types (exported symbol in the comment) ------------- */

typedef CUresult tsr_cu_init_fn(unsigned int flags);                      /* cuInit */
typedef CUresult tsr_cu_ctx_get_device_fn(CUdevice *dev);                 /* cuCtxGetDevice */
typedef CUresult tsr_cu_device_get_count_fn(int *count);                  /* cuDeviceGetCount */
typedef CUresult tsr_cu_device_total_mem_fn(size_t *bytes, CUdevice dev); /* cuDeviceTotalMem_v2 */
typedef CUresult tsr_cu_device_total_mem_v1_fn(unsigned int *bytes,
                                               CUdevice dev);               /* cuDeviceTotalMem */
typedef CUresult tsr_cu_mem_get_info_fn(size_t *free_bytes, size_t *total); /* cuMemGetInfo_v2 */
typedef CUresult tsr_cu_mem_get_info_v1_fn(unsigned int *free_bytes,
                                           unsigned int *total);       /* cuMemGetInfo */
typedef CUresult tsr_cu_mem_alloc_fn(CUdeviceptr *dptr, size_t bytes); /* cuMemAlloc_v2 */
typedef CUresult tsr_cu_mem_alloc_v1_fn(CUdeviceptr_v1 *dptr, unsigned int bytes); /* cuMemAlloc */
typedef CUresult tsr_cu_mem_alloc_pitch_fn(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                           size_t height,
                                           unsigned int elem); /* cuMemAllocPitch_v2 */
typedef CUresult tsr_cu_mem_alloc_pitch_v1_fn(CUdeviceptr_v1 *dptr, unsigned int *pitch,
                                              unsigned int width, unsigned int height,
                                              unsigned int elem); /* cuMemAllocPitch */
typedef CUresult tsr_cu_mem_alloc_managed_fn(CUdeviceptr *dptr, size_t bytes,
                                             unsigned int flags); /* cuMemAllocManaged */
typedef CUresult tsr_cu_mem_free_fn(CUdeviceptr dptr);            /* cuMemFree_v2 */
typedef CUresult tsr_cu_mem_free_v1_fn(CUdeviceptr_v1 dptr);      /* cuMemFree */
typedef CUresult tsr_cu_mem_alloc_async_fn(CUdeviceptr *dptr, size_t bytes,
                                           CUstream stream); /* cuMemAllocAsync[_ptsz] */
typedef CUresult
tsr_cu_mem_alloc_from_pool_async_fn(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                    CUstream stream); /* cuMemAllocFromPoolAsync[_ptsz] */
typedef CUresult tsr_cu_mem_free_async_fn(CUdeviceptr dptr,
                                          CUstream stream); /* cuMemFreeAsync[_ptsz] */
typedef CUresult tsr_cu_array_create_fn(CUarray *arr,
                                        const CUDA_ARRAY_DESCRIPTOR *d); /* cuArrayCreate_v2 */
typedef CUresult tsr_cu_array_create_v1_fn(CUarray *arr,
                                           const CUDA_ARRAY_DESCRIPTOR_v1 *d); /* cuArrayCreate */
typedef CUresult
tsr_cu_array3d_create_fn(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR *d); /* cuArray3DCreate_v2 */
typedef CUresult
tsr_cu_array3d_create_v1_fn(CUarray *arr,
                            const CUDA_ARRAY3D_DESCRIPTOR_v1 *d); /* cuArray3DCreate */
typedef CUresult tsr_cu_array_destroy_fn(CUarray arr);            /* cuArrayDestroy */
typedef CUresult tsr_cu_mipmapped_array_create_fn(CUmipmappedArray *arr,
                                                  const CUDA_ARRAY3D_DESCRIPTOR *d,
                                                  unsigned int levels); /* cuMipmappedArrayCreate */
typedef CUresult
tsr_cu_mipmapped_array_destroy_fn(CUmipmappedArray arr); /* cuMipmappedArrayDestroy */
typedef CUresult tsr_cu_mem_create_fn(CUmemGenericAllocationHandle *handle, size_t bytes,
                                      const CUmemAllocationProp *prop,
                                      unsigned long long flags);             /* cuMemCreate */
typedef CUresult tsr_cu_mem_release_fn(CUmemGenericAllocationHandle handle); /* cuMemRelease */
typedef CUresult tsr_cu_launch_kernel_fn(CUfunction f, unsigned int gx, unsigned int gy,
                                         unsigned int gz, unsigned int bx, unsigned int by,
                                         unsigned int bz, unsigned int shared, CUstream stream,
                                         void **params, void **extra); /* cuLaunchKernel[_ptsz] */
typedef CUresult
tsr_cu_launch_cooperative_kernel_fn(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by, unsigned int bz,
                                    unsigned int shared, CUstream stream,
                                    void **params); /* cuLaunchCooperativeKernel[_ptsz] */
typedef CUresult tsr_cu_launch_kernel_ex_fn(const CUlaunchConfig *config, CUfunction f,
                                            void **params,
                                            void **extra); /* cuLaunchKernelEx[_ptsz] */
typedef CUresult tsr_cu_graph_launch_fn(CUgraphExec exec,
                                        CUstream stream); /* cuGraphLaunch[_ptsz] */
typedef CUresult tsr_cu_get_proc_address_fn(const char *symbol, void **pfn, int cuda_version,
                                            cuuint64_t flags); /* cuGetProcAddress */
typedef CUresult
tsr_cu_get_proc_address_v2_fn(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                              CUdriverProcAddressQueryResult *status); /* cuGetProcAddress_v2 */
typedef CUresult tsr_cu_device_primary_ctx_retain_fn(CUcontext *ctx,
                                                     CUdevice dev); /* cuDevicePrimaryCtxRetain */
typedef CUresult tsr_cu_ctx_create_fn(CUcontext *ctx, unsigned int flags,
                                      CUdevice dev); /* cuCtxCreate_v2 */

#endif
