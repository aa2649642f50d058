/*
 * nvml_view.h - what NVML says about device memory, for the vgpu check (tools/gpu/vgpu_check.sh).
 *
 * nvml_view(tag) dlopen()s libnvidia-ml.so.1 (no NVML header or link line is needed, so this
 * builds on a machine without the driver) and prints one line per device:
 *   NVML tag=<tag> index=<i> total_mib=<n> used_mib=<n> free_mib=<n>
 * or "NVML tag=<tag> error=<what>". Run under the slice interposer it shows the view a
 * container's nvidia-smi and NVML clients get; without it, the physical device.
 * Header-only and both C and C++ (nvcc includes it from alloc_limit.cu).
 */
#ifndef TSR_GPU_NVML_VIEW_H
#define TSR_GPU_NVML_VIEW_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

struct nvml_view_memory {
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
};

typedef int nvml_view_init_fn(void);
typedef int nvml_view_count_fn(unsigned int *count);
typedef int nvml_view_handle_fn(unsigned int index, void **device);
typedef int nvml_view_memory_fn(void *device, struct nvml_view_memory *memory);

/* Resolves name in lib into *fn (a function pointer) without an object-to-function cast. */
static int nvml_view_sym(void *lib, const char *name, void *fn, size_t size)
{
        void *sym = dlsym(lib, name);

        if (sym == NULL)
                return -1;
        memcpy(fn, &sym, size);
        return 0;
}

static void nvml_view(const char *tag)
{
        nvml_view_init_fn *init = NULL;
        nvml_view_count_fn *count = NULL;
        nvml_view_handle_fn *handle = NULL;
        nvml_view_memory_fn *memory = NULL;
        unsigned int n = 0;
        void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
        int rc;

        if (lib == NULL) {
                printf("NVML tag=%s error=dlopen:%s\n", tag, dlerror());
                fflush(stdout);
                return;
        }
        if (nvml_view_sym(lib, "nvmlInit_v2", &init, sizeof init) != 0 ||
            nvml_view_sym(lib, "nvmlDeviceGetCount_v2", &count, sizeof count) != 0 ||
            nvml_view_sym(lib, "nvmlDeviceGetHandleByIndex_v2", &handle, sizeof handle) != 0 ||
            nvml_view_sym(lib, "nvmlDeviceGetMemoryInfo", &memory, sizeof memory) != 0) {
                printf("NVML tag=%s error=dlsym\n", tag);
                fflush(stdout);
                return;
        }
        rc = init();
        if (rc == 0)
                rc = count(&n);
        if (rc != 0) {
                printf("NVML tag=%s error=init:%d\n", tag, rc);
                fflush(stdout);
                return;
        }
        for (unsigned int i = 0; i < n; i++) {
                struct nvml_view_memory m = {0, 0, 0};
                void *dev = NULL;

                rc = handle(i, &dev);
                if (rc == 0)
                        rc = memory(dev, &m);
                if (rc != 0) {
                        printf("NVML tag=%s index=%u error=%d\n", tag, i, rc);
                        continue;
                }
                printf("NVML tag=%s index=%u total_mib=%llu used_mib=%llu free_mib=%llu\n", tag, i,
                       m.total >> 20, m.used >> 20, m.free >> 20);
        }
        fflush(stdout);
        /* No nvmlShutdown: the interposer in this process may still be using NVML. */
}

#endif
