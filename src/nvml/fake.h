/*
 * fake.h - the fake GPU backend: a node's GPUs in memory, with real MIG placement rules.
 *
 * Identity is deterministic: UUIDs derive from FNV-1a-64 of the node name and GPU index (and the
 * instance's creation sequence for MIG devices), so a simulation prints the same bytes every run.
 * Creating an instance on an occupied or illegal placement fails with TSR_ENOSPC as NVML's
 * INSUFFICIENT_RESOURCES does; switching MIG mode while instances exist fails with TSR_EINUSE; a
 * GPU instance with a compute instance on it refuses destruction with TSR_EINUSE.
 * Ownership: tsr_fake_gpus_new returns a new object (free with tsr_fake_gpus_free); it copies
 * node_name. Not thread-safe.
 */
#ifndef TSR_NVML_FAKE_H
#define TSR_NVML_FAKE_H

#include <stdbool.h>

#include "core/catalog.h"
#include "nvml/gpu_ops.h"

struct tsr_fake_gpus;

/* The fake backend's vtable; its `be` argument is a struct tsr_fake_gpus *. */
extern const struct tsr_gpu_ops tsr_fake_gpu_ops;

/*
 * Creates count GPUs of product on node node_name; GPU i starts with MIG mode mig_on[i] (mig_on
 * may be NULL: all off). Returns 0 and *out, or TSR_ENOMEM / TSR_EINVAL.
 */
int tsr_fake_gpus_new(const char *node_name, const struct tsr_product *product, unsigned count,
                      const bool *mig_on, struct tsr_fake_gpus **out);

void tsr_fake_gpus_free(struct tsr_fake_gpus *f);

/* The product the GPUs are. */
const struct tsr_product *tsr_fake_gpus_product(const struct tsr_fake_gpus *f);

#endif
