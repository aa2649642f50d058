/*
 * nvml.h - the NVML backend of struct tsr_gpu_ops: libnvidia-ml.so.1 loaded with dlopen, every
 * symbol resolved by name (nvml_api.h), so tessera builds and runs without the driver installed
 * and only `tessera device-manager` / `tessera nvml probe` need it at run time.
 *
 * nvmlReturn_t codes map to TSR_E* as gpu_ops.h says; the failing call's name and the driver's
 * nvmlErrorString text are kept and returned by error_detail. The backend never changes a GPU's
 * MIG mode and never resets a GPU.
 *
 * Ownership and threads: tsr_nvml_open returns a new object (free with tsr_nvml_close, which shuts
 * NVML down and unloads the library). One object is used by one thread at a time (its last-error
 * text is per object); NVML itself is thread-safe and reference-counts nvmlInit, so several objects
 * may live in one process, each on its own thread.
 */
#ifndef TSR_NVML_NVML_H
#define TSR_NVML_NVML_H

#include "base/diag.h"
#include "nvml/gpu_ops.h"

/* The library loaded when neither the caller nor $TSR_NVML_LIBRARY names one. */
#define TSR_NVML_LIBRARY_DEFAULT "libnvidia-ml.so.1"

struct tsr_nvml;

/* The NVML backend's vtable; its `be` argument is a struct tsr_nvml *. */
extern const struct tsr_gpu_ops tsr_nvml_gpu_ops;

/*
 * Loads library (NULL: $TSR_NVML_LIBRARY, else TSR_NVML_LIBRARY_DEFAULT), resolves every symbol
 * and initializes NVML. Returns 0 and *out, or TSR_ENOTFOUND when the library cannot be loaded,
 * TSR_ENOTSUP when it lacks a symbol (a driver older than R470), the mapped nvmlInit_v2 error, or
 * TSR_ENOMEM; diag says which.
 */
int tsr_nvml_open(const char *library, struct tsr_nvml **out, struct tsr_diag *diag);

/* Shuts NVML down and unloads the library. n may be NULL. */
void tsr_nvml_close(struct tsr_nvml *n);

/* The library path tsr_nvml_open loaded. Valid until tsr_nvml_close. */
const char *tsr_nvml_library(const struct tsr_nvml *n);

#endif
