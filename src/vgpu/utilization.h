/*
 * utilization.h - how busy the slice keeps a device, as NVML measures it, and which NVML pids are
 * the slice's.
 *
 * NVML names processes by the host's pids, which a container does not see; a process learns its
 * own around context creation: the pids NVML lists on the device before and after — getpid() when
 * it is listed (the host's pid namespace), else the one pid that appeared, else unknown. The
 * slice's utilization is the sum of its known processes' SM utilization; when none is known, or
 * the driver cannot report per process, the device's utilization stands in (it counts the
 * neighbours too, so the slice is throttled harder than its share, never softer).
 * Thread-safe; NVML is opened on first use (state.h).
 */
#ifndef TSR_VGPU_UTILIZATION_H
#define TSR_VGPU_UTILIZATION_H

#include <stdbool.h>

#include "vgpu/state.h"

#define TSR_VGPU_PROBE_PIDS 64

/* The pids NVML lists on a device at one moment. */
struct tsr_vgpu_pid_probe {
        unsigned pids[TSR_VGPU_PROBE_PIDS];
        unsigned n;
        bool ok; /* NVML answered */
};

/* Lists the processes on dev before a context is made. */
void tsr_vgpu_pid_probe_before(int dev, struct tsr_vgpu_pid_probe *before);

/* After the context on dev was made: records this process's NVML pid when it can be told. */
void tsr_vgpu_pid_probe_after(const struct tsr_vgpu_state *s, int dev,
                              const struct tsr_vgpu_pid_probe *before);

/* The slice's SM utilization of dev in percent since the last call, or -1 when unmeasurable. */
int tsr_vgpu_utilization(const struct tsr_vgpu_state *s, int dev);

#endif
