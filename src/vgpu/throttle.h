/*
 * throttle.h - the slice's share of a device's cores (CUDA_DEVICE_SM_LIMIT), held by delaying
 * kernel launches.
 *
 * A launch costs its blocks (gridDim x*y*z; a graph launch the process's average kernel). The
 * container's processes draw from one token bucket per device in the shared region, refilled at
 * a rate in blocks per second and capped at 100 ms of it; a launch passes while the bucket is
 * positive (a launch larger than the bucket runs it into debt) and otherwise sleeps for the time
 * the debt takes to refill. One watcher thread per process samples the slice's utilization
 * (utilization.h) every 100 ms (the first process to a sample takes it, so the container samples
 * once) and moves the rate towards the one that would have met the limit,
 * admitted-rate × limit / measured: the first measurement replaces the starting guess outright,
 * later ones are averaged with the current rate and bounded to a factor of 4 per sample; a rate
 * that went unused (no launch waited) is not raised. Accuracy is measured, not
 * assumed: tests/vgpu and tools/gpu/vgpu_check.sh report it (docs/vgpu.md).
 */
#ifndef TSR_VGPU_THROTTLE_H
#define TSR_VGPU_THROTTLE_H

#include <stdint.h>

#include "vgpu/state.h"

/* Blocks a launch of that grid costs (at least 1). */
uint64_t tsr_vgpu_grid_blocks(unsigned gx, unsigned gy, unsigned gz);

/* The cost of a launch whose grid is unknown (a graph): the process's average kernel. */
uint64_t tsr_vgpu_average_blocks(void);

/* Returns once a launch of blocks on dev fits the slice's share (at once when it has none). */
void tsr_vgpu_throttle_admit(const struct tsr_vgpu_state *s, int dev, uint64_t blocks);

#endif
