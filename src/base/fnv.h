/*
 * fnv.h - FNV-1a, 64 bit: the hash upstream uses for LocalQueue names and topology profiles.
 * Pure; safe from any thread.
 */
#ifndef TSR_BASE_FNV_H
#define TSR_BASE_FNV_H

#include <stddef.h>
#include <stdint.h>

#define TSR_FNV64_OFFSET UINT64_C(0xcbf29ce484222325)
#define TSR_FNV64_PRIME  UINT64_C(0x100000001b3)

/* Continues an FNV-1a-64 hash h over len bytes of data (start with TSR_FNV64_OFFSET). */
uint64_t tsr_fnv1a64_update(uint64_t h, const void *data, size_t len);

/* Returns FNV-1a-64 of the NUL-terminated string s. */
uint64_t tsr_fnv1a64_str(const char *s);

#endif
