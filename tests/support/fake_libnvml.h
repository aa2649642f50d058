/*
 * fake_libnvml.h - a stand-in for libnvidia-ml.so.1 (fake_libnvml.c, built as a shared module that
 * tests dlopen by path): the NVML symbols of src/nvml/nvml_api.h over the fake backend's model
 * (src/nvml/fake.h), so src/nvml/nvml.c runs for real without a GPU.
 *
 * nvmlInit_v2 builds the model when its reference count goes from 0 to 1, from
 *   $TSR_FAKE_NVML_STATE  a state file of tsr_fake_gpus_save, loaded and then auto-saved to, so a
 *                         second process sees the first one's instances; or else
 *   $TSR_FAKE_NVML        a spec "PRODUCT:COUNT[:MODES[:PENDING]]" (tsr_fake_gpus_from_spec);
 * with neither, it fails with NVML_ERROR_DRIVER_NOT_LOADED. nvmlShutdown to 0 frees the model and
 * every handle. Handles are pointers into fixed pools, stable while the library is initialized.
 * Not thread-safe (tests call it from one thread).
 */
#ifndef TSR_TESTS_FAKE_LIBNVML_H
#define TSR_TESTS_FAKE_LIBNVML_H

#include "nvml/fake.h"

/*
 * The model behind the library while it is initialized, else NULL: tests resolve this symbol with
 * dlsym and inject faults through the fake backend's API (tsr_fake_gpus_fail, _vanish, ...).
 */
struct tsr_fake_gpus *tsr_fake_nvml_model(void);

#endif
