/*
 * config.h - what a logical slice's environment tells the interposer (docs/vgpu.md "Environment").
 *
 * The contract is HAMi-core's, so either library can be mounted into a container:
 *   CUDA_DEVICE_MEMORY_LIMIT        every device's memory limit: a size, bytes without a unit,
 *                                   or k/m/g/t (optionally followed by i, iB or B), 1024-based
 *   CUDA_DEVICE_MEMORY_LIMIT_<i>    device ordinal i's limit (0 <= i < TSR_VGPU_DEVICES_MAX),
 *                                   overriding the one above
 *   CUDA_DEVICE_SM_LIMIT            every device's share of the cores, in percent (0 or 100:
 *                                   no throttling), and CUDA_DEVICE_SM_LIMIT_<i> per device
 *   CUDA_DEVICE_MEMORY_SHARED_CACHE the shared budget file of the container's processes
 *                                   (default /tmp/cudevshr.cache)
 *   CUDA_DISABLE_CONTROL            "true" or "1": pass every call through untouched
 *   GPU_CORE_UTILIZATION_POLICY     "default", "force" (throttle even while alone on the
 *                                   device; tessera always does) or "disable" (no throttling)
 *   LIBCUDA_LOG_LEVEL               0 errors only .. 4 debug (default 2: warnings)
 * A limit of 0 is no limit. A malformed value is an error naming the variable and the value, so
 * the interposer fails closed (no device is usable) rather than handing out the whole GPU.
 * Pure; tsr_vgpu_config_parse reads only its arguments.
 */
#ifndef TSR_VGPU_CONFIG_H
#define TSR_VGPU_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSR_VGPU_DEVICES_MAX   16
#define TSR_VGPU_PATH_MAX      256
#define TSR_VGPU_DEFAULT_CACHE "/tmp/cudevshr.cache"

struct tsr_vgpu_config {
        bool disabled;                               /* CUDA_DISABLE_CONTROL */
        bool throttle_disabled;                      /* GPU_CORE_UTILIZATION_POLICY=disable */
        uint64_t memory_limit[TSR_VGPU_DEVICES_MAX]; /* bytes; 0: no limit */
        unsigned sm_limit[TSR_VGPU_DEVICES_MAX];     /* percent in [1,100]; 0: no throttling */
        char cache_path[TSR_VGPU_PATH_MAX];          /* CUDA_DEVICE_MEMORY_SHARED_CACHE */
        int log_level;                               /* LIBCUDA_LOG_LEVEL, 0..4 */
};

/*
 * Reads the slice from envp[0..] ("NAME=value" strings, NULL-terminated; later entries win).
 * Returns 0 with *out filled (defaults for what is absent), or -1 with err naming the variable,
 * its value and what is wrong (*out is then partly filled and must not be used).
 */
int tsr_vgpu_config_parse(const char *const *envp, struct tsr_vgpu_config *out, char *err,
                          size_t len);

/* Parses a size as CUDA_DEVICE_MEMORY_LIMIT takes it into *bytes. Returns 0, or -1. */
int tsr_vgpu_parse_size(const char *s, uint64_t *bytes);

#endif
