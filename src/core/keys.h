/*
 * keys.h - accelerator resource key names: composing them, classifying them, validating them.
 *
 * The key families of spec/upstream-behavior.md §1.2: <base> (exclusive), <base>.shared,
 * <base>.sliced with its four counting sub-keys, <base>.partitioned with .units and one
 * .<kind>-<profile> key per profile, and device.gpustack.ai/<manufacturer>.visibility. A name is
 * classified only when its base is a known manufacturer's; an unknown sub-key is TSR_KEY_NONE.
 * A profile whose key would not be a Kubernetes qualified name ("+me") has no key at all: it is
 * excluded, never rewritten. Pure; thread-safe.
 */
#ifndef TSR_CORE_KEYS_H
#define TSR_CORE_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/catalog.h"

struct tsr_buf;

/* The longest resource name we compose or accept (prefix 253 + '/' + name 63). */
#define TSR_KEY_MAX 320

enum tsr_family {
        TSR_FAMILY_NONE,
        TSR_FAMILY_EXCLUSIVE,
        TSR_FAMILY_SHARED,
        TSR_FAMILY_SLICED,
        TSR_FAMILY_PARTITIONED,
        TSR_FAMILY_VISIBILITY,
};

/* KEY_KIND(ENUM, suffix, family); suffix is appended to the manufacturer's base. */
#define TSR_KEY_KIND_MAP(XX)                                                                       \
        XX(EXCLUSIVE, "", EXCLUSIVE)                                                               \
        XX(SHARED, ".shared", SHARED)                                                              \
        XX(SLICED, ".sliced", SLICED)                                                              \
        XX(SLICED_UNITS, ".sliced.units", SLICED)                                                  \
        XX(SLICED_CORES, ".sliced.cores-percentage", SLICED)                                       \
        XX(SLICED_MEMORY_PERCENT, ".sliced.memory-percentage", SLICED)                             \
        XX(SLICED_MEMORY_MIB, ".sliced.memory-mib", SLICED)                                        \
        XX(PARTITIONED, ".partitioned", PARTITIONED)                                               \
        XX(PARTITIONED_UNITS, ".partitioned.units", PARTITIONED)

enum tsr_key_kind {
        TSR_KEY_NONE,
#define XX(E, suffix, fam) TSR_KEY_##E,
        TSR_KEY_KIND_MAP(XX)
#undef XX
            TSR_KEY_PARTITIONED_PROFILE, /* <base>.partitioned.<kind>-<profile> */
        TSR_KEY_VISIBILITY,              /* device.gpustack.ai/<manufacturer>.visibility */
};

struct tsr_key_class {
        enum tsr_key_kind kind;
        const struct tsr_manufacturer *manufacturer; /* NULL when kind is TSR_KEY_NONE */
        const char *profile;                         /* into the classified name; profile keys */
        size_t profile_len;
};

/* Classifies the resource name name. Never fails: an unknown name is TSR_KEY_NONE. */
void tsr_key_classify(const char *name, struct tsr_key_class *out);

/* Returns the family a key kind belongs to. */
enum tsr_family tsr_key_family(enum tsr_key_kind kind);

/* Returns the family's name as upstream messages print it ("exclusive", "sliced", ...). */
const char *tsr_family_name(enum tsr_family f);

/*
 * Writes the resource name of kind for manufacturer m into out (TSR_KEY_MAX bytes). profile is
 * the profile name for TSR_KEY_PARTITIONED_PROFILE and ignored otherwise. Returns 0, or
 * TSR_EINVAL when m has no partition kind and a partition key is asked for, or when the composed
 * name is not a valid resource name (a "+me" profile).
 */
int tsr_key_format(char *out, const struct tsr_manufacturer *m, enum tsr_key_kind kind,
                   const char *profile);

/* True when s[0..len) is a Kubernetes qualified name segment (IsQualifiedName's name part). */
bool tsr_key_is_name_segment(const char *s, size_t len);

/* True when the full resource name is valid: optional DNS-1123 prefix '/' qualified name. */
bool tsr_key_is_resource_name(const char *s);

#endif
