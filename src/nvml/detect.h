/*
 * detect.h - detection: what a node's GPUs can serve, from a backend (gpu_ops.h), as the
 * `Devices` capability (core/capability.h).
 *
 * Per GPU: the product by the driver's name (catalog), the MIG mode in effect now (a pending
 * change is reported, not acted on: the capability moves only when the device manager restarts
 * and detects again, seeds/nvidia-mig.md "Node reboot recovery"), and for a partitioned GPU the
 * product's fixed profile set (seeds/nvidia-mig.md "How partition profiles are discovered", with
 * its exclusions applied by tsr_capability_detect) cross-checked with the driver where it answers:
 * a profile the driver lacks, or reports with another id, slice count or placement list, is
 * excluded. A driver that does not answer (no permission, an old driver) leaves the catalog's set.
 *
 * Every exclusion and oddity is reported through note(arg, gpu, message), called synchronously;
 * message is valid only during the call. A GPU whose product the catalog lacks is reported and
 * skipped. Reads only: nothing here creates, destroys or switches anything.
 */
#ifndef TSR_NVML_DETECT_H
#define TSR_NVML_DETECT_H

#include <stddef.h>

#include "base/diag.h"
#include "core/capability.h"
#include "nvml/gpu_ops.h"

typedef void tsr_detect_note_fn(void *arg, unsigned gpu, const char *msg);

/*
 * Detects the GPUs of backend be into out[0..*n) (at most max; cap.index is the GPU's driver
 * index). note may be NULL. Returns 0, TSR_ETOOBIG when more than max GPUs are known, or the
 * backend's error for a GPU it cannot describe (diag names the GPU and the driver's message).
 */
int tsr_nvml_detect(const struct tsr_gpu_ops *ops, void *be, struct tsr_accel_cap *out, size_t max,
                    size_t *n, tsr_detect_note_fn *note, void *arg, struct tsr_diag *diag);

#endif
