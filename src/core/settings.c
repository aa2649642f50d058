/*
 * settings.c - the Setting catalog and Go's boolean spellings.
 */
#include "core/settings.h"

#include "base/diag.h"
#include "base/err.h"

#include <string.h>

static const struct {
        const char *name, *env;
        bool value;
} catalog[TSR_N_SETTINGS] = {
    [TSR_SETTING_WORKLOAD_FIT_AFFINITY] = {"workload-fit-affinity",
                                           "GPUSTACK_WORKLOAD_FIT_AFFINITY", true},
    [TSR_SETTING_INSTANCE_TYPE_DERIVED_FROM_NODE] = {"instance-type-derived-from-node",
                                                     "GPUSTACK_INSTANCE_TYPE_DERIVED_FROM_NODE",
                                                     true},
    [TSR_SETTING_INSTANCE_TYPE_DRAIN_WHEN_NO_FLAVORS] =
        {"instance-type-drain-when-no-flavors", "GPUSTACK_INSTANCE_TYPE_DRAIN_WHEN_NO_FLAVORS",
         true},
    [TSR_SETTING_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER] =
        {"instance-type-aware-cpu-manufacturer", "GPUSTACK_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER",
         false},
    [TSR_SETTING_INSTANCE_TYPE_MIXED_ON_NODE] = {"instance-type-mixed-on-node",
                                                 "GPUSTACK_INSTANCE_TYPE_MIXED_ON_NODE", true},
    [TSR_SETTING_NODE_MANAGEMENT_MANUAL] = {"node-management-manual",
                                            "GPUSTACK_NODE_MANAGEMENT_MANUAL", false},
    [TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT] =
        {"instance-general-resources-overcommit", "GPUSTACK_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT",
         true},
    [TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED] =
        {"model-deployment-kv-cache-dtype-owned", "GPUSTACK_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED",
         true},
};

const char *tsr_setting_name(enum tsr_setting s)
{
        return catalog[s].name;
}

const char *tsr_setting_env(enum tsr_setting s)
{
        return catalog[s].env;
}

bool tsr_setting_default(enum tsr_setting s)
{
        return catalog[s].value;
}

int tsr_setting_find(const char *name)
{
        for (int i = 0; i < TSR_N_SETTINGS; i++)
                if (!strcmp(catalog[i].name, name))
                        return i;
        return -1;
}

void tsr_settings_defaults(struct tsr_settings *out)
{
        for (int i = 0; i < TSR_N_SETTINGS; i++)
                out->value[i] = catalog[i].value;
}

bool tsr_parse_bool(const char *text, bool *out)
{
        static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
        static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                if (!strcmp(text, yes[i])) {
                        *out = true;
                        return true;
                }
                if (!strcmp(text, no[i])) {
                        *out = false;
                        return true;
                }
        }
        return false;
}

int tsr_setting_parse(enum tsr_setting s, const char *text, bool *out, struct tsr_diag *diag)
{
        if (tsr_parse_bool(text, out))
                return 0;
        return tsr_diag_set(diag, TSR_EINVAL, "setting %s takes true or false, not \"%s\"",
                            catalog[s].name, text);
}
