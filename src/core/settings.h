/*
 * settings.h - the upstream operator's boolean Settings that tessera's rules read
 * (spec/upstream-behavior.md §12; upstream docs/reference/settings.md), with their defaults and
 * the GPUSTACK_<UPPER_SNAKE> environment variable that seeds each.
 *
 * A value is parsed as Go's strconv.ParseBool does: 1 t T TRUE true True, 0 f F FALSE false False.
 *
 * Ownership: plain data; the catalog is static and immutable. Pure; thread-safe.
 */
#ifndef TSR_CORE_SETTINGS_H
#define TSR_CORE_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

struct tsr_diag;

enum tsr_setting {
        TSR_SETTING_WORKLOAD_FIT_AFFINITY,
        TSR_SETTING_INSTANCE_TYPE_DERIVED_FROM_NODE,
        TSR_SETTING_INSTANCE_TYPE_DRAIN_WHEN_NO_FLAVORS,
        TSR_SETTING_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER,
        TSR_SETTING_INSTANCE_TYPE_MIXED_ON_NODE,
        TSR_SETTING_NODE_MANAGEMENT_MANUAL,
        TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT,
        TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED,
        TSR_N_SETTINGS
};

/* Every Setting's value, indexed by enum tsr_setting. */
struct tsr_settings {
        bool value[TSR_N_SETTINGS];
};

/* The Setting's name ("workload-fit-affinity"). */
const char *tsr_setting_name(enum tsr_setting s);

/* The environment variable that seeds it ("GPUSTACK_WORKLOAD_FIT_AFFINITY"). */
const char *tsr_setting_env(enum tsr_setting s);

/* Its upstream default. */
bool tsr_setting_default(enum tsr_setting s);

/* The Setting named name, or -1. */
int tsr_setting_find(const char *name);

/* Fills *out with every default. */
void tsr_settings_defaults(struct tsr_settings *out);

/* Go's strconv.ParseBool: 1 t T TRUE true True / 0 f F FALSE false False; false otherwise. */
bool tsr_parse_bool(const char *text, bool *out);

/*
 * Parses text as a boolean into *out. Returns 0, or TSR_EINVAL with diag naming the Setting
 * (what) and the accepted spellings.
 */
int tsr_setting_parse(enum tsr_setting s, const char *text, bool *out, struct tsr_diag *diag);

#endif
