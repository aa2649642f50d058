/*
 * instancetype_detail.c - reading an InstanceType's accelerator detail (instancetype_detail.h).
 */
#include "webhook/instancetype_detail.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "webhook/json_read.h"

#include <string.h>

#define MIB (INT64_C(1) << 20)

/* apimachinery's resource.ErrFormatWrong, which upstream's "parse memory" error wraps. */
#define FORMAT_WRONG                                                                               \
        "quantities must match the regular expression "                                            \
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

static const char *name_of(json_t *it)
{
        const char *name = tsr_json_str(it, "metadata.name");

        return name && *name ? name : "(unnamed)";
}

/* Converts the quantity text s, read from field of it, into MiB. */
static int text_mib(json_t *it, const char *field, const char *s, uint64_t *mib,
                    struct tsr_diag *diag)
{
        struct tsr_quantity q, zero = tsr_quantity_from_int(0, TSR_QF_DECIMAL_SI);
        int64_t bytes;
        int rc = tsr_quantity_parse(s, &q, NULL);

        if (rc == TSR_EPARSE)
                return tsr_diag_set(
                    diag, TSR_EPARSE,
                    "parse memory \"%.64s\" of instance type %s (%s): " FORMAT_WRONG, s,
                    name_of(it), field);
        if (!rc && tsr_quantity_cmp(&q, &zero) <= 0)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "instance type %s has non-positive memory \"%.64s\" (%s)",
                                    name_of(it), s, field);
        if (rc || tsr_quantity_value(&q, &bytes))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "instance type %s has memory \"%.64s\" (%s) too large to count "
                                    "in bytes",
                                    name_of(it), s, field);
        if (!tsr_quantity_is_int(&q, bytes) || bytes % MIB)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "instance type %s has memory \"%.64s\" (%s) that is not a "
                                    "whole number of MiB",
                                    name_of(it), s, field);
        *mib = (uint64_t)(bytes / MIB);
        return 0;
}

int tsr_instancetype_detail_memory_mib(json_t *it, uint64_t *mib, struct tsr_diag *diag)
{
        json_t *v = tsr_json_at(it, "status.detail.memory");
        json_int_t n;

        if (v && !json_is_null(v)) {
                if (!json_is_string(v))
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "status.detail.memory of instance type %s is not a "
                                            "string",
                                            name_of(it));
                if (*json_string_value(v))
                        return text_mib(it, "status.detail.memory", json_string_value(v), mib,
                                        diag);
        }
        v = tsr_json_at(it, "spec.memory");
        if (json_is_string(v) && *json_string_value(v))
                return text_mib(it, "spec.memory", json_string_value(v), mib, diag);
        if (json_is_integer(v)) {
                /* This project's former rendering: the count of MiB. */
                n = json_integer_value(v);
                if (n <= 0)
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "instance type %s has non-positive memory %lld "
                                            "(spec.memory, MiB)",
                                            name_of(it), (long long)n);
                if (n > INT64_MAX / MIB)
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "instance type %s has memory %lld (spec.memory, MiB) "
                                            "too large to count in bytes",
                                            name_of(it), (long long)n);
                *mib = (uint64_t)n;
                return 0;
        }
        if (v && !json_is_null(v) && !json_is_string(v))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "spec.memory of instance type %s is neither a quantity string "
                                    "nor an integer",
                                    name_of(it));
        *mib = 0;
        return 0;
}

int tsr_instancetype_detail_read(json_t *it, struct tsr_instancetype_detail *out,
                                 struct tsr_diag *diag)
{
        static const char profiles_path[] = "status.detail.slicedDetail.physical.profiles";
        struct tsr_instancetype_detail d;
        json_t *profiles = tsr_json_at(it, profiles_path), *p;
        size_t i;
        int rc;

        memset(&d, 0, sizeof(d));
        if ((rc = tsr_json_read_string(it, "status.detail.manufacturer", &d.manufacturer, diag)) ||
            (rc = tsr_json_read_bool(it,
                                     "status.detail.slicedDetail.logical.coresPercentageOvercommit",
                                     &d.logical_overcommit, diag)) ||
            (rc = tsr_json_read_int(it, "status.detail.slicedDetail.logical.count",
                                    &d.logical_count, diag)) ||
            (rc = tsr_json_read_int(it, "status.detail.slicedDetail.physical.count",
                                    &d.physical_count, diag)))
                return rc;
        if (profiles && !json_is_null(profiles) && !json_is_array(profiles))
                return tsr_diag_set(diag, TSR_EPARSE, "%s is not an array", profiles_path);
        d.sliced_detail = json_is_object(tsr_json_at(it, "status.detail.slicedDetail"));
        json_array_foreach(profiles, i, p)
        {
                struct tsr_profile_figure *f = &d.profiles[d.n_profiles];
                const char *name = json_string_value(json_object_get(p, "name"));
                json_int_t mib = json_integer_value(json_object_get(p, "memoryMib"));

                if (!name || !*name || d.n_profiles >= TSR_MIG_PROFILES_MAX)
                        continue;
                f->name = name;
                f->count = json_integer_value(json_object_get(p, "count"));
                f->memory_mib = mib > 0 ? (uint64_t)mib : 0; /* 0: not sized yet */
                d.n_profiles++;
        }
        *out = d;
        return 0;
}

const struct tsr_profile_figure *
tsr_instancetype_detail_profile(const struct tsr_instancetype_detail *d, const char *name)
{
        for (size_t i = 0; i < d->n_profiles; i++)
                if (!strcmp(d->profiles[i].name, name))
                        return &d->profiles[i];
        return NULL;
}
