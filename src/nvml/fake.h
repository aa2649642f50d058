/*
 * fake.h - the fake GPU backend: a node's GPUs in memory, with real MIG placement rules, fault
 * injection and crash-safe persistence for the simulator and the tests.
 *
 * Identity is deterministic: UUIDs derive from FNV-1a-64 of the node name and GPU index (and the
 * instance's creation sequence for MIG devices), so a simulation prints the same bytes every run.
 * Creating an instance on an occupied or illegal placement fails with TSR_ENOSPC as NVML's
 * INSUFFICIENT_RESOURCES does; switching MIG mode while instances exist fails with TSR_EINUSE; a
 * GPU instance with a compute instance on it refuses destruction with TSR_EINUSE. The driver's
 * profile answers (profile_info, placements) are the catalog's rows unless overridden with
 * tsr_fake_gpus_set_driver_starts.
 *
 * Operations outside the vtable model what others do behind tessera's back (the operator switching
 * MIG mode, an instance vanishing, a hand-made carve or subdivision); they bypass injected faults
 * and hooks but are persisted like every mutation.
 *
 * Ownership: tsr_fake_gpus_new / _load / _from_spec return a new object (free with
 * tsr_fake_gpus_free); node_name and paths are copied. Not thread-safe.
 */
#ifndef TSR_NVML_FAKE_H
#define TSR_NVML_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "core/catalog.h"
#include "nvml/gpu_ops.h"

struct tsr_fake_gpus;

/* The fake backend's vtable; its `be` argument is a struct tsr_fake_gpus *. */
extern const struct tsr_gpu_ops tsr_fake_gpu_ops;

/*
 * Creates count GPUs of product on node node_name; GPU i starts with MIG mode mig_on[i] (mig_on
 * may be NULL: all off), nothing pending. Returns 0 and *out, or TSR_ENOMEM / TSR_EINVAL.
 */
int tsr_fake_gpus_new(const char *node_name, const struct tsr_product *product, unsigned count,
                      const bool *mig_on, struct tsr_fake_gpus **out);

/*
 * As tsr_fake_gpus_new from a text spec "PRODUCT:COUNT[:MODES[:PENDING]]": PRODUCT is the driver
 * name ("NVIDIA A30"), MODES is "mig" (all on), "off" (the default) or one 0/1 per GPU ("1100"),
 * PENDING the same for the pending mode (default: MODES). TSR_EINVAL with diag on a bad spec.
 */
int tsr_fake_gpus_from_spec(const char *node_name, const char *spec, struct tsr_fake_gpus **out,
                            struct tsr_diag *diag);

void tsr_fake_gpus_free(struct tsr_fake_gpus *f);

/* The product the GPUs are. */
const struct tsr_product *tsr_fake_gpus_product(const struct tsr_fake_gpus *f);

/*
 * The operator switches GPU gpu's MIG mode, as on Hopper: effective at once, nothing pending.
 * TSR_EINUSE while instances exist, TSR_ENOTSUP on a product without MIG, TSR_ENOTFOUND.
 */
int tsr_fake_gpus_set_mig_mode(struct tsr_fake_gpus *f, unsigned gpu, bool on);

/* The operator asks for MIG mode on, as on Ampere: pending until a reset (current unchanged). */
int tsr_fake_gpus_set_mig_pending(struct tsr_fake_gpus *f, unsigned gpu, bool on);

/*
 * Makes the driver report starts (bit s = legal start s) as the placements of profile
 * gi_profile_id, and enforce them on create; starts == 0: the driver lacks the profile
 * (profile_info answers TSR_ENOTSUP). TSR_ENOTFOUND for an id the product does not list.
 */
int tsr_fake_gpus_set_driver_starts(struct tsr_fake_gpus *f, unsigned gi_profile_id,
                                    uint32_t starts);

/* Compute instances one fake GPU instance holds at most. */
#define TSR_FAKE_CI_MAX 8

struct tsr_fake_ci {
        unsigned id, slices; /* compute slices */
        char uuid[TSR_GPU_UUID_MAX];
};

/*
 * The compute instances of GPU instance gi_id in creation order (gi_list shows only the first):
 * what the fake NVML library walks. TSR_ENOTFOUND, TSR_ETOOBIG.
 */
int tsr_fake_gpus_ci_list(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id,
                          struct tsr_fake_ci *out, size_t max, size_t *n);

/* ---- fault injection ---- */

enum tsr_fake_op {
        TSR_FAKE_GI_CREATE,
        TSR_FAKE_CI_CREATE,
        TSR_FAKE_CI_DESTROY,
        TSR_FAKE_GI_DESTROY,
        TSR_FAKE_GI_LIST,
        TSR_FAKE_PLACEMENTS,
        TSR_FAKE_OP__COUNT
};

/*
 * The next `times` calls of op (on any GPU) fail with err (a negative TSR_E*: TSR_EINUSE,
 * TSR_EPERM, TSR_ENOSPC, ...) and change nothing. times == 0 clears the fault.
 */
void tsr_fake_gpus_fail(struct tsr_fake_gpus *f, enum tsr_fake_op op, int err, unsigned times);

/* GPU instance gi_id (and its compute instances) disappears behind the caller's back. */
int tsr_fake_gpus_vanish(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id);

/*
 * Someone subdivided GPU instance gi_id by hand: it ends with two compute instances, of 1 and
 * slices - 1 compute slices (nvidia-smi mig -dci, then -cci twice). TSR_EINVAL for a one-slice
 * GPU instance.
 */
int tsr_fake_gpus_subdivide(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id);

/*
 * An out-of-band carve without any ownership marker: a GPU instance of gi_profile_id at start,
 * plus a whole compute instance when with_ci. *gi_id on success; errors as gi_create.
 */
int tsr_fake_gpus_carve(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_profile_id,
                        unsigned start, bool with_ci, unsigned *gi_id);

/* ---- persistence and crash points ---- */

/*
 * Writes the state (GPUs, modes, instances, driver overrides; not faults or hooks) to path as
 * JSON, durably: a temporary file in the same directory, fsync, rename, fsync of the directory.
 */
int tsr_fake_gpus_save(const struct tsr_fake_gpus *f, const char *path);

/*
 * Reads a state written by tsr_fake_gpus_save. TSR_EIO, TSR_EPARSE, TSR_ENOMEM, with diag naming
 * the fault: the JSON error's line and column, or the field ("gpus[0].instances[1]: ...").
 */
int tsr_fake_gpus_load(const char *path, struct tsr_fake_gpus **out, struct tsr_diag *diag);

/*
 * Auto-save: from now on every mutation saves the state to path before the call returns (a failed
 * save is that call's error; the in-memory change stands). path NULL turns it off.
 */
int tsr_fake_gpus_persist(struct tsr_fake_gpus *f, const char *path);

/*
 * hook(arg, point) runs at the named points of the mutating vtable calls: "gi_create:before",
 * "gi_create:after", "ci_create:before", "ci_create:after", "ci_destroy:before",
 * "ci_destroy:after", "gi_destroy:before", "gi_destroy:after". "before" runs ahead of the change,
 * "after" once it is made and saved. A crash test _exit()s there. hook NULL removes it.
 */
void tsr_fake_gpus_set_hook(struct tsr_fake_gpus *f, void (*hook)(void *arg, const char *point),
                            void *arg);

#endif
