/*
 * nvml_api.h - our own declarations of the NVML subset tessera calls, so that nothing is needed
 * from the driver at build time (spec/mig-geometry-and-nvml.md §4, from go-nvml's copy of nvml.h,
 * NVML_API_VERSION 13). Types, constants and struct field order are exactly the header's; the
 * functions are declared under their exported (versioned) symbol names, which is what dlsym
 * resolves: nvml.c only takes their types, and tests/support/fake_libnvml.c defines them.
 *
 * Only what tessera calls is here (nvml.c and the slice interposer, src/vgpu/); add a declaration
 * together with its first caller.
 */
#ifndef TSR_NVML_NVML_API_H
#define TSR_NVML_NVML_API_H

typedef int nvmlReturn_t;

#define NVML_SUCCESS                         0
#define NVML_ERROR_UNINITIALIZED             1
#define NVML_ERROR_INVALID_ARGUMENT          2
#define NVML_ERROR_NOT_SUPPORTED             3
#define NVML_ERROR_NO_PERMISSION             4
#define NVML_ERROR_NOT_FOUND                 6
#define NVML_ERROR_INSUFFICIENT_SIZE         7
#define NVML_ERROR_DRIVER_NOT_LOADED         9
#define NVML_ERROR_LIBRARY_NOT_FOUND         12
#define NVML_ERROR_FUNCTION_NOT_FOUND        13
#define NVML_ERROR_GPU_IS_LOST               15
#define NVML_ERROR_RESET_REQUIRED            16
#define NVML_ERROR_IN_USE                    19
#define NVML_ERROR_INSUFFICIENT_RESOURCES    23
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN                   999

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE  0x1

/* GPU-instance profile indices (the argument of nvmlDeviceGetGpuInstanceProfileInfo). */
#define NVML_GPU_INSTANCE_PROFILE_COUNT 0x12

/* Compute-instance profile indices. */
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE       0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE       0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE       0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE       0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE       0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE       0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE       0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1  0x7
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL   0x8
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT         0x9
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0

#define NVML_DEVICE_NAME_V2_BUFFER_SIZE        96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE        96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE     32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE  16
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80

typedef struct {
        unsigned int start; /* index of the first occupied memory slice */
        unsigned int size;  /* number of memory slices occupied */
} nvmlGpuInstancePlacement_t;

typedef struct {
        unsigned int start; /* compute slices within the GPU instance */
        unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st { /* v1, 48 bytes */
        unsigned int id;                       /* driver profile id */
        unsigned int isP2pSupported;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int copyEngineCount;
        unsigned int decoderCount;
        unsigned int encoderCount;
        unsigned int jpegCount;
        unsigned int ofaCount;
        unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceInfo_st { /* 24 bytes */
        nvmlDevice_t device;            /* parent */
        unsigned int id;
        unsigned int profileId;
        nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_st { /* v1, 36 bytes */
        unsigned int id;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int sharedCopyEngineCount;
        unsigned int sharedDecoderCount;
        unsigned int sharedEncoderCount;
        unsigned int sharedJpegCount;
        unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceInfo_st { /* 32 bytes */
        nvmlDevice_t device;                /* the MIG device handle */
        nvmlGpuInstance_t gpuInstance;
        unsigned int id;
        unsigned int profileId;
        nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

typedef struct nvmlPciInfo_st { /* 68 bytes */
        char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
        unsigned int domain;
        unsigned int bus;
        unsigned int device;
        unsigned int pciDeviceId; /* (device << 16) | vendor */
        unsigned int pciSubSystemId;
        char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct { /* 24 bytes */
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_t;

typedef struct {              /* 40 bytes */
        unsigned int version; /* nvmlMemory_v2 */
        unsigned long long total;
        unsigned long long reserved;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
        unsigned int gpu;    /* percent of the sample period a kernel ran */
        unsigned int memory; /* percent of it device memory was read or written */
} nvmlUtilization_t;

typedef struct {
        unsigned int pid;
        unsigned long long timeStamp; /* CPU timestamp, microseconds */
        unsigned int smUtil;
        unsigned int memUtil;
        unsigned int encUtil;
        unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct { /* nvmlProcessInfo_v2_t, what the _v3 process queries fill */
        unsigned int pid;
        unsigned long long usedGpuMemory;
        unsigned int gpuInstanceId;
        unsigned int computeInstanceId;
} nvmlProcessInfo_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info);
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count);
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance);
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count);
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance);
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info);
nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info);
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance);
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance);
nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info);
nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance);

/* Every symbol nvml.c resolves with dlsym, as X(name) (the slice interposer resolves its own
 * list, vgpu/hooks.h). */
#define TSR_NVML_SYMBOLS(X)                                                                        \
        X(nvmlInit_v2)                                                                             \
        X(nvmlShutdown)                                                                            \
        X(nvmlErrorString)                                                                         \
        X(nvmlSystemGetDriverVersion)                                                              \
        X(nvmlDeviceGetCount_v2)                                                                   \
        X(nvmlDeviceGetHandleByIndex_v2)                                                           \
        X(nvmlDeviceGetName)                                                                       \
        X(nvmlDeviceGetUUID)                                                                       \
        X(nvmlDeviceGetPciInfo_v3)                                                                 \
        X(nvmlDeviceGetMemoryInfo)                                                                 \
        X(nvmlDeviceGetMigMode)                                                                    \
        X(nvmlDeviceGetGpuInstanceProfileInfo)                                                     \
        X(nvmlDeviceGetGpuInstancePossiblePlacements_v2)                                           \
        X(nvmlDeviceCreateGpuInstanceWithPlacement)                                                \
        X(nvmlDeviceGetGpuInstances)                                                               \
        X(nvmlDeviceGetGpuInstanceById)                                                            \
        X(nvmlGpuInstanceGetInfo)                                                                  \
        X(nvmlGpuInstanceDestroy)                                                                  \
        X(nvmlGpuInstanceGetComputeInstanceProfileInfo)                                            \
        X(nvmlGpuInstanceCreateComputeInstance)                                                    \
        X(nvmlGpuInstanceGetComputeInstances)                                                      \
        X(nvmlGpuInstanceGetComputeInstanceById)                                                   \
        X(nvmlComputeInstanceGetInfo_v2)                                                           \
        X(nvmlComputeInstanceDestroy)

#endif
