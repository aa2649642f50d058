/*
 * instancetype.c - the InstanceType validating and defaulting webhooks (instancetype.h).
 */
#include "webhook/instancetype.h"

#include "base/diag.h"
#include "base/err.h"
#include "core/instancetype.h"
#include "webhook/field_error.h"
#include "webhook/json_read.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GENERAL_GROUP_GENERIC "generic"
#define LABEL_ACCELERATABLE   "feature.gpustack.ai/acceleratable"
#define LABEL_OS              "kubernetes.io/os"
#define LABEL_ARCH            "kubernetes.io/arch"
#define PREFIX_ACCELERATABLE  "acceleratable.feature.gpustack.ai/"
#define PREFIX_GENERAL        "general.feature.gpustack.ai/"
#define LABEL_QUEUE_ENTRANCE  "schedule.gpustack.ai/queue-entrance"
#define GI_SUFFIX             "Gi"
#define MSG_POSITIVE_GI       "must be a positive integer with a case-sensitive \"Gi\" suffix"

/* The object's name: metadata.name, else the review's. */
static const char *name_of(const struct tsr_review *review, json_t *obj)
{
        const char *name = tsr_json_str(obj, "metadata.name");

        return name && *name ? name : review->name;
}

/*
 * As tsr_json_read_string, also taking a JSON integer as its decimal text in buf (len bytes): the
 * unit spec this project renders carries the core count as a number.
 */
static int read_text(json_t *obj, const char *path, char *buf, size_t len, const char **out,
                     struct tsr_diag *diag)
{
        json_t *v = tsr_json_at(obj, path);

        if (!json_is_integer(v))
                return tsr_json_read_string(obj, path, out, diag);
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        *out = buf;
        return 0;
}

/* Go's strconv.ParseInt(s, 10, 32) succeeding with a value above zero, on len bytes of s. */
static bool positive_int32(const char *s, size_t len)
{
        int64_t v = 0;
        bool neg = false;
        size_t i = 0;

        if (len && (s[0] == '+' || s[0] == '-')) {
                neg = s[0] == '-';
                i = 1;
        }
        if (i == len)
                return false;
        for (; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (s[i] - '0');
                if (v > INT32_MAX + INT64_C(1))
                        return false;
        }
        if (neg)
                return false; /* zero or negative, or out of range: never positive */
        return v > 0 && v <= INT32_MAX;
}

/* Exactly 1 as strconv.ParseInt(s, 10, 32) reads it ("1", "+1", "01"). */
static bool int32_is_one(const char *s)
{
        size_t i = (s[0] == '+') ? 1 : 0;

        if (!s[i])
                return false;
        for (; s[i] == '0'; i++)
                ;
        return !strcmp(s + i, "1");
}

/* A positive integer followed by the case-sensitive suffix "Gi". */
static bool positive_gi(const char *s)
{
        size_t len = strlen(s);

        return len > 2 && !strcmp(s + len - 2, GI_SUFFIX) && positive_int32(s, len - 2);
}

static int validate_create(const struct tsr_review *review, json_t *obj,
                           struct tsr_verdict *verdict, struct tsr_diag *diag)
{
        const char *group, *os, *arch, *cpu, *ram, *storage;
        char cpu_buf[24], ram_buf[24], storage_buf[24];
        struct tsr_field_list errs;
        bool accel;
        int rc;

        tsr_field_list_clear(&errs);
        if ((rc = tsr_json_read_bool(obj, "spec.acceleratable", &accel, diag)) ||
            (rc = tsr_json_read_string(obj, "spec.acceleratorGroup", &group, diag)) ||
            (rc = tsr_json_read_string(obj, "spec.os", &os, diag)) ||
            (rc = tsr_json_read_string(obj, "spec.arch", &arch, diag)) ||
            (rc = read_text(obj, "spec.unitResources.cpu", cpu_buf, sizeof(cpu_buf), &cpu, diag)) ||
            (rc = read_text(obj, "spec.unitResources.ram", ram_buf, sizeof(ram_buf), &ram, diag)) ||
            (rc = read_text(obj, "spec.localStorage", storage_buf, sizeof(storage_buf), &storage,
                            diag)))
                return rc;
        if (accel && !*group)
                tsr_field_required(&errs, "spec.acceleratorGroup",
                                   "must be specified when acceleratable is true");
        if (!*os)
                tsr_field_required(&errs, "spec.os", "must be specified");
        if (!*arch)
                tsr_field_required(&errs, "spec.arch", "must be specified");
        if (accel && !positive_int32(cpu, strlen(cpu)))
                tsr_field_invalid_str(&errs, "spec.unitResources.cpu", cpu,
                                      "must be a positive integer with no unit suffix");
        else if (!accel && !int32_is_one(cpu))
                tsr_field_invalid_str(&errs, "spec.unitResources.cpu", cpu,
                                      "must be 1 when acceleratable is false");
        if (!positive_gi(ram))
                tsr_field_invalid_str(&errs, "spec.unitResources.ram", ram, MSG_POSITIVE_GI);
        if (!positive_gi(storage))
                tsr_field_invalid_str(&errs, "spec.localStorage", storage, MSG_POSITIVE_GI);
        if (errs.n)
                tsr_field_list_deny_invalid(verdict, TSR_INSTANCETYPE_KIND, name_of(review, obj),
                                            &errs);
        else
                tsr_verdict_allow(verdict);
        return 0;
}

/* Whether key is one of the admin-editable spec fields an update may change. */
static bool editable(const char *key)
{
        return !strcmp(key, "displayName") || !strcmp(key, "inactive");
}

/* The two specs decode to the same value but for the editable fields. Allocates nothing. */
static bool same_frozen_spec(json_t *a, json_t *b)
{
        const char *key;
        json_t *m;

        json_object_foreach(a, key, m)
        {
                if (!editable(key) && !tsr_json_equal_zero(m, json_object_get(b, key)))
                        return false;
        }
        json_object_foreach(b, key, m)
        {
                if (!editable(key) && !json_object_get(a, key) && !tsr_json_is_zero(m))
                        return false;
        }
        return true;
}

static int validate_update(const struct tsr_review *review, struct tsr_verdict *verdict,
                           struct tsr_diag *diag)
{
        json_t *spec_old = json_object_get(review->old_object, "spec");
        json_t *spec_new = json_object_get(review->object, "spec");
        struct tsr_field_list errs;

        if ((spec_old && !json_is_object(spec_old) && !json_is_null(spec_old)) ||
            (spec_new && !json_is_object(spec_new) && !json_is_null(spec_new)))
                return tsr_diag_set(diag, TSR_EPARSE, "InstanceType spec is not an object");
        if (same_frozen_spec(spec_old, spec_new)) {
                tsr_verdict_allow(verdict);
                return 0;
        }
        tsr_field_list_clear(&errs);
        tsr_field_forbidden(&errs, "spec", "is immutable except displayName and inactive");
        tsr_field_list_deny_invalid(verdict, TSR_INSTANCETYPE_KIND,
                                    name_of(review, review->old_object), &errs);
        return 0;
}

int tsr_webhook_instancetype_validate(const struct tsr_webhook_lookup *lookup,
                                      const struct tsr_review *review, struct tsr_verdict *verdict,
                                      struct tsr_diag *diag)
{
        json_t *spec = json_object_get(review->object, "spec");

        (void)lookup;
        if (!review->object) {
                tsr_verdict_allow(verdict);
                return 0;
        }
        if (spec && !json_is_object(spec) && !json_is_null(spec))
                return tsr_diag_set(diag, TSR_EPARSE, "InstanceType spec is not an object");
        if (!strcmp(review->operation, "CREATE"))
                return validate_create(review, review->object, verdict, diag);
        if (!strcmp(review->operation, "UPDATE") && review->old_object)
                return validate_update(review, verdict, diag);
        tsr_verdict_allow(verdict);
        return 0;
}

/* Sets labels[key] = value. Returns 0 or TSR_ENOMEM. */
static int set_label(json_t *labels, const char *key, const char *value, struct tsr_diag *diag)
{
        if (json_object_set_new(labels, key, json_string(value)))
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        return 0;
}

/*
 * Sets labels[prefix + name] = "true". The key is composed whole, never cut to a buffer: a cut key
 * would be another label, and one cut inside a UTF-8 sequence jansson refuses. 0 or TSR_ENOMEM.
 */
static int set_feature_label(json_t *labels, const char *prefix, const char *name,
                             struct tsr_diag *diag)
{
        size_t n = strlen(prefix);
        char *key = malloc(n + strlen(name) + 1);
        int rc;

        if (!key)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        memcpy(key, prefix, n);
        strcpy(key + n, name);
        rc = set_label(labels, key, "true", diag);
        free(key);
        return rc;
}

static bool has_prefix(const char *s, const char *prefix)
{
        return !strncmp(s, prefix, strlen(prefix));
}

/* Stamps the schedule labels and the entrance label on obj (the copy being defaulted). */
static int stamp_labels(const struct tsr_review *review, json_t *obj, bool accel, bool aware,
                        struct tsr_diag *diag)
{
        json_t *meta = json_object_get(obj, "metadata"), *labels, *sched, *v, *tmp;
        const char *general, *group, *os, *arch, *key, *name;
        char entrance[TSR_ENTRANCE_LEN + 1];
        int rc;

        if ((rc = tsr_json_read_string(obj, "spec.generalGroup", &general, diag)) ||
            (rc = tsr_json_read_string(obj, "spec.acceleratorGroup", &group, diag)) ||
            (rc = tsr_json_read_string(obj, "spec.os", &os, diag)) ||
            (rc = tsr_json_read_string(obj, "spec.arch", &arch, diag)))
                return rc;
        if (!meta) {
                if (json_object_set_new(obj, "metadata", json_object()))
                        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                meta = json_object_get(obj, "metadata");
        }
        if (!json_is_object(meta))
                return tsr_diag_set(diag, TSR_EPARSE, "InstanceType metadata is not an object");
        labels = json_object_get(meta, "labels");
        if (!labels || json_is_null(labels)) {
                if (json_object_set_new(meta, "labels", json_object()))
                        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                labels = json_object_get(meta, "labels");
        }
        if (!json_is_object(labels))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "InstanceType metadata.labels is not an object");
        sched = json_object();
        if (!sched)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        rc = set_label(sched, LABEL_ACCELERATABLE, accel ? "true" : "false", diag);
        if (!rc && *os)
                rc = set_label(sched, LABEL_OS, os, diag);
        if (!rc && *arch)
                rc = set_label(sched, LABEL_ARCH, arch, diag);
        if (!rc && accel && *group)
                rc = set_feature_label(sched, PREFIX_ACCELERATABLE, group, diag);
        if (!rc && aware && *general && strcmp(general, GENERAL_GROUP_GENERIC))
                rc = set_feature_label(sched, PREFIX_GENERAL, general, diag);
        /* A feature key the spec no longer names (a group or acceleratable change) goes. */
        json_object_foreach_safe(labels, tmp, key, v)
        {
                if (rc)
                        break;
                if (!json_object_get(sched, key) &&
                    (has_prefix(key, PREFIX_GENERAL) || has_prefix(key, PREFIX_ACCELERATABLE)))
                        json_object_del(labels, key);
        }
        if (!rc && json_object_update(labels, sched))
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        json_decref(sched);
        name = name_of(review, obj);
        if (!rc && *name) {
                tsr_instancetype_entrance(name, entrance);
                rc = set_label(labels, LABEL_QUEUE_ENTRANCE, entrance, diag);
        }
        return rc;
}

int tsr_webhook_instancetype_mutate(const struct tsr_webhook_lookup *lookup,
                                    const struct tsr_review *review, struct tsr_verdict *verdict,
                                    struct tsr_diag *diag)
{
        json_t *obj, *spec;
        const char *general, *group;
        bool accel;
        int rc;

        if (!review->object ||
            (strcmp(review->operation, "CREATE") && strcmp(review->operation, "UPDATE"))) {
                tsr_verdict_allow(verdict);
                return 0;
        }
        spec = json_object_get(review->object, "spec");
        if (spec && !json_is_object(spec) && !json_is_null(spec))
                return tsr_diag_set(diag, TSR_EPARSE, "InstanceType spec is not an object");
        if (!json_is_object(review->object))
                return tsr_diag_set(diag, TSR_EPARSE, "InstanceType is not an object");
        obj = json_deep_copy(review->object);
        if (!obj)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        spec = json_object_get(obj, "spec");
        if (!json_is_object(spec)) {
                rc = json_object_set_new(obj, "spec", json_object());
                spec = json_object_get(obj, "spec");
                if (rc || !spec) {
                        json_decref(obj);
                        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                }
        }
        if ((rc = tsr_json_read_string(obj, "spec.generalGroup", &general, diag)) ||
            (rc = tsr_json_read_bool(obj, "spec.acceleratable", &accel, diag)) ||
            (rc = tsr_json_read_string(obj, "spec.acceleratorGroup", &group, diag))) {
                json_decref(obj);
                return rc;
        }
        if (!*general &&
            json_object_set_new(spec, "generalGroup", json_string(GENERAL_GROUP_GENERIC))) {
                json_decref(obj);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        if (!accel || *group)
                rc = stamp_labels(
                    review, obj, accel,
                    lookup->settings.value[TSR_SETTING_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER], diag);
        if (rc) {
                json_decref(obj);
                return rc;
        }
        verdict->patched = obj;
        tsr_verdict_allow(verdict);
        return 0;
}
