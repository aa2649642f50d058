/*
 * kueue_config.c - the Kueue Configuration from the catalog.
 */
#include "codec/kueue_config.h"

#include "base/diag.h"
#include "base/err.h"
#include "core/credits.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define SYSTEM_NAMESPACE "kube-system"

/* A DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, 63 characters at most. */
static bool namespace_name(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

/* One transformation row of manufacturer m as Kueue reads it. */
static json_t *transformation(const struct tsr_manufacturer *m,
                              const struct tsr_credits_transformation *t)
{
        char input[TSR_KEY_MAX], by[TSR_KEY_MAX], credits[TSR_KEY_MAX], amount[24];
        json_t *row;

        if (tsr_key_format(input, m, t->input, NULL) ||
            (t->multiply_by != TSR_KEY_NONE && tsr_key_format(by, m, t->multiply_by, NULL)))
                return NULL;
        tsr_credits_resource(m, credits, sizeof(credits));
        snprintf(amount, sizeof(amount), "%lld", (long long)t->credits);
        row = json_pack("{s:s, s:s}", "input", input, "strategy", "Replace");
        if (row && t->multiply_by != TSR_KEY_NONE &&
            json_object_set_new(row, "multiplyBy", json_string(by))) {
                json_decref(row);
                return NULL;
        }
        if (row && json_object_set_new(row, "outputs", json_pack("{s:s}", credits, amount))) {
                json_decref(row);
                return NULL;
        }
        return row;
}

/* Every manufacturer's transformations, in the catalog's order. */
static json_t *transformations(void)
{
        json_t *list = json_array();

        for (int id = 0; list && id < TSR_MFR__COUNT; id++) {
                const struct tsr_manufacturer *m =
                    tsr_catalog_manufacturer((enum tsr_manufacturer_id)id);
                struct tsr_credits_transformation t[TSR_CREDITS_TRANSFORMATIONS_MAX];
                size_t n = tsr_credits_transformations(m, t);

                for (size_t i = 0; list && i < n; i++)
                        if (json_array_append_new(list, transformation(m, &t[i]))) {
                                json_decref(list);
                                list = NULL;
                        }
        }
        return list;
}

/*
 * The request descriptors Kueue must not count as quota, every manufacturer's in the catalog's
 * order: a slice's <base>.sliced.cores-percentage, .sliced.memory-percentage and
 * .sliced.memory-mib (the fold turned them into .sliced.units) and, with a partition kind, every
 * profile key <base>.partitioned.<kind>- (the fold turned it into .partitioned.units); and the
 * manufacturer's visibility key device.gpustack.ai/<m>.visibility, an SSH sidecar's view of what
 * its Pod's other containers hold (outside the families: it costs nothing). Kueue drops them
 * before its transformations, so they reach neither the quota nor TAS.
 */
static json_t *excluded_prefixes(void)
{
        static const enum tsr_key_kind descriptors[] = {
            TSR_KEY_SLICED_CORES, TSR_KEY_SLICED_MEMORY_PERCENT, TSR_KEY_SLICED_MEMORY_MIB};
        json_t *list = json_array();
        char key[TSR_KEY_MAX], prefix[TSR_KEY_MAX + 32];

        for (int id = 0; list && id < TSR_MFR__COUNT; id++) {
                const struct tsr_manufacturer *m =
                    tsr_catalog_manufacturer((enum tsr_manufacturer_id)id);
                int rc = 0;

                for (size_t i = 0; !rc && i < sizeof(descriptors) / sizeof(descriptors[0]); i++)
                        rc = tsr_key_format(key, m, descriptors[i], NULL) ||
                             json_array_append_new(list, json_string(key));
                if (!rc && m->partition_kind) {
                        rc = tsr_key_format(key, m, TSR_KEY_PARTITIONED, NULL);
                        snprintf(prefix, sizeof(prefix), "%s.%s-", key, m->partition_kind);
                        rc = rc || json_array_append_new(list, json_string(prefix));
                }
                if (!rc)
                        rc = tsr_key_format(key, m, TSR_KEY_VISIBILITY, NULL) ||
                             json_array_append_new(list, json_string(key));
                if (rc) {
                        json_decref(list);
                        list = NULL;
                }
        }
        return list;
}

int tsr_kueue_config(const char *ns, json_t **out, struct tsr_diag *diag)
{
        json_t *cfg, *excluded;

        if (!namespace_name(ns))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "namespace \"%s\": must be a lower-case RFC 1123 label", ns);
        excluded = strcmp(ns, SYSTEM_NAMESPACE) ? json_pack("[s, s]", SYSTEM_NAMESPACE, ns)
                                                : json_pack("[s]", ns);
        cfg = json_pack(
            "{s:s, s:s, s:s, s:b, s:{s:[{s:s, s:s, s:o}]}, s:{s:[s]}, s:{s:b, s:b, "
            "s:b}, s:{s:o, s:o}}",
            "apiVersion", TSR_KUEUE_CONFIG_API_VERSION, "kind", "Configuration", "namespace", ns,
            "manageJobsWithoutQueueName", 0, "managedJobsNamespaceSelector", "matchExpressions",
            "key", "kubernetes.io/metadata.name", "operator", "NotIn", "values", excluded,
            "integrations", "frameworks", "pod", "featureGates", "AssignQueueLabelsForPods", 0,
            "TopologyAwareScheduling", 1, "TASBalancedPlacement", 1, "resources",
            "excludeResourcePrefixes", excluded_prefixes(), "transformations", transformations());
        if (!cfg)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        *out = cfg;
        return 0;
}
