/*
 * region.h - the budget a container's processes share: a file mapped MAP_SHARED by every process
 * of the slice (CUDA_DEVICE_MEMORY_SHARED_CACHE), holding per process the bytes it holds on each
 * device and per device the compute throttle's state.
 *
 * Invariants, under the region's lock (a process-shared robust mutex):
 *   - used[d] is the sum of procs[*].used[d] over live slots; a slot is live while its pid runs
 *     with the start time it joined with (a recycled pid is not mistaken for the old process);
 *   - a process that dies holding the lock leaves it recoverable (EOWNERDEAD): the next locker
 *     recomputes used[] from the slots, so a half-applied update is never kept;
 *   - a dead process's slot is reaped (its bytes returned) before any reservation is refused and
 *     before any report of what is used.
 * The file is created 0666 (the container's processes may run as different users) with a magic
 * and size header; a file of another layout is refused, never reinterpreted. Not a security
 * boundary: a process of the container can write the file (docs/vgpu.md "What it is not").
 *
 * Ownership: tsr_vgpu_region_open maps the file for the process's lifetime; nothing is unmapped.
 * Thread-safe; fork-aware (a child joins under its own pid on first use).
 */
#ifndef TSR_VGPU_REGION_H
#define TSR_VGPU_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vgpu/config.h"

#define TSR_VGPU_PROCS_MAX 1024

/* The compute throttle's shared state for one device (throttle.c owns its meaning). */
struct tsr_vgpu_throttle_state {
        int64_t tokens;      /* blocks that may launch now; negative: debt */
        int64_t rate;        /* blocks per second refilled; 0: not calibrated yet */
        uint64_t refill_ns;  /* CLOCK_MONOTONIC of the last refill */
        uint64_t sample_ns;  /* CLOCK_MONOTONIC of the last utilization sample */
        uint64_t admitted;   /* blocks admitted since the last sample */
        uint32_t waited;     /* a launch waited since the last sample */
        uint32_t last_util;  /* the last measured utilization, percent */
        uint32_t calibrated; /* the rate came from a measurement, not the first guess */
};

struct tsr_vgpu_region;

/*
 * Maps (creating it if needed, with its parent directories) the region at path. Returns 0 and
 * *out, or -1 with err saying what failed (the file of another layout included).
 */
int tsr_vgpu_region_open(const char *path, struct tsr_vgpu_region **out, char *err, size_t len);

/*
 * Reserves bytes on device dev for this process when the container's total stays within limit
 * (0: no limit). Returns true when reserved. Reaps dead processes before refusing.
 */
bool tsr_vgpu_region_reserve(struct tsr_vgpu_region *r, int dev, uint64_t bytes, uint64_t limit);

/* Returns bytes this process holds on dev to the budget (clamped at what it holds). */
void tsr_vgpu_region_release(struct tsr_vgpu_region *r, int dev, uint64_t bytes);

/* The bytes the container's live processes hold on dev (dead ones reaped first). */
uint64_t tsr_vgpu_region_used(struct tsr_vgpu_region *r, int dev);

/* Records the pid NVML knows this process by (0: unknown). */
void tsr_vgpu_region_set_host_pid(struct tsr_vgpu_region *r, unsigned host_pid);

/* Copies the live processes' NVML pids into pids[0..max); returns how many. */
size_t tsr_vgpu_region_host_pids(struct tsr_vgpu_region *r, unsigned *pids, size_t max);

/*
 * Runs fn(state of dev, arg) under the region's lock and returns its result: the throttle's one
 * way to its shared state.
 */
int tsr_vgpu_region_with_throttle(struct tsr_vgpu_region *r, int dev,
                                  int (*fn)(struct tsr_vgpu_throttle_state *s, void *arg),
                                  void *arg);

#endif
