/*
 * state.h - the interposer's process-wide state: the slice's configuration, the shared budget and
 * the driver handles, made once on first need (any hook; never from a constructor, so a process
 * that never touches CUDA or NVML pays nothing).
 *
 * tsr_vgpu_state() reads the environment and maps the budget; a malformed environment or a budget
 * that cannot be mapped leaves the state failed (fail closed: cuInit answers
 * CUDA_ERROR_INVALID_VALUE and every allocation CUDA_ERROR_OUT_OF_MEMORY, with one message on
 * stderr naming the cause). tsr_vgpu_cuda() / tsr_vgpu_nvml() open the driver and fill
 * tsr_vgpu_real (hooks.h) on top. Read-only once made; thread-safe.
 */
#ifndef TSR_VGPU_STATE_H
#define TSR_VGPU_STATE_H

#include <stdbool.h>

#include "vgpu/config.h"
#include "vgpu/region.h"

struct tsr_vgpu_state {
        struct tsr_vgpu_config cfg;
        bool failed;                    /* the environment or the budget is unusable */
        bool control;                   /* limits apply (not failed, not CUDA_DISABLE_CONTROL) */
        bool throttled;                 /* some device has an SM limit and throttling is on */
        struct tsr_vgpu_region *region; /* when control */
};

/* The state, made on first call. */
const struct tsr_vgpu_state *tsr_vgpu_state(void);

/* The state with the CUDA driver's entry points resolved (tsr_vgpu_real). */
const struct tsr_vgpu_state *tsr_vgpu_cuda(void);

/* The state with NVML's entry points resolved; NVML initialised once when present. */
const struct tsr_vgpu_state *tsr_vgpu_nvml(void);

/* The device's memory limit in bytes (0: none) for CUDA ordinal / NVML index dev. */
uint64_t tsr_vgpu_limit(const struct tsr_vgpu_state *s, int dev);

/* The real dlsym (the libc's, behind the interposer's own); early.h-safe. */
void *tsr_vgpu_real_dlsym(void *handle, const char *name);

/* Logs "tessera-vgpu: <msg>" to stderr when level <= LIBCUDA_LOG_LEVEL (0 error .. 4 debug). */
void tsr_vgpu_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
