/*
 * instancetype.h - InstanceTypes derived from nodes: names, entrance LocalQueue, unit presets.
 *
 * Names follow upstream (spec/upstream-behavior.md §9): an accelerated pool is
 * gpustack--<aKey>-<os>-<arch> with aKey = <manufacturer>-<groupId> ("nvidia-h100-80gb-hbm3"), the
 * CPU pool gpustack--generic-<os>-<arch>; the entrance LocalQueue is gpustack-fnv64-<16 hex of
 * FNV-1a-64 of the ClusterQueue name> (31 characters). A function that returns TSR_ETOOBIG leaves
 * out untouched. Pure.
 */
#ifndef TSR_CORE_INSTANCETYPE_H
#define TSR_CORE_INSTANCETYPE_H

#include <stddef.h>

#include "core/catalog.h"

#define TSR_NAME_MAX     254
#define TSR_ENTRANCE_LEN 31

struct tsr_unit_spec {
        unsigned cpu; /* cores */
        unsigned ram_gib;
        unsigned storage_gib;
};

/*
 * Writes the group id of product p ("h100-80gb-hbm3": the lower-cased driver name, words joined
 * by '-', the manufacturer's own word and "tesla" dropped) into out (len bytes). Returns 0 or
 * TSR_ETOOBIG.
 */
int tsr_instancetype_group_id(const struct tsr_product *p, char *out, size_t len);

/* Writes aKey, "<manufacturer>-<group id>", into out. Returns 0 or TSR_ETOOBIG. */
int tsr_instancetype_accel_key(const struct tsr_product *p, char *out, size_t len);

/*
 * Writes the InstanceType (and ClusterQueue) name for pool product p, or for the generic CPU pool
 * when p is NULL, on os/arch. Returns 0 or TSR_ETOOBIG.
 */
int tsr_instancetype_name(const struct tsr_product *p, const char *os, const char *arch, char *out,
                          size_t len);

/* Writes the entrance LocalQueue name of the ClusterQueue cq into out (at least 32 bytes). */
void tsr_instancetype_entrance(const char *cq, char *out);

/* The unit preset of product p, or of the CPU-only type when p is NULL (1c / 2Gi / 100Gi). */
struct tsr_unit_spec tsr_instancetype_unit(const struct tsr_product *p);

#endif
