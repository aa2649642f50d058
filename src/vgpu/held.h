/*
 * held.h - what this process holds on the devices: each live allocation's handle with its device
 * and the bytes it was charged, so that a free returns exactly what its allocation took.
 *
 * A handle is unique within its kind (device pointers, arrays, mipmapped arrays, VMM handles are
 * separate spaces). Process-local (a fork child starts empty); thread-safe.
 */
#ifndef TSR_VGPU_HELD_H
#define TSR_VGPU_HELD_H

#include <stdbool.h>
#include <stdint.h>

enum tsr_vgpu_kind {
        TSR_VGPU_HELD_POINTER, /* cuMemAlloc*, managed, async and pool allocations */
        TSR_VGPU_HELD_ARRAY,
        TSR_VGPU_HELD_MIPMAPPED,
        TSR_VGPU_HELD_VMM, /* cuMemCreate's physical allocations */
};

/* Records handle. Returns false when memory runs out (nothing recorded). */
bool tsr_vgpu_held_add(enum tsr_vgpu_kind kind, uint64_t handle, int dev, uint64_t bytes);

/* Removes handle, giving what it was charged. Returns false when it is not held. */
bool tsr_vgpu_held_take(enum tsr_vgpu_kind kind, uint64_t handle, int *dev, uint64_t *bytes);

#endif
