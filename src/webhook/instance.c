/*
 * instance.c - the Instance validating and defaulting webhooks (instance.h).
 */
#include "webhook/instance.h"

#include "base/diag.h"
#include "base/err.h"
#include "core/catalog.h"
#include "core/keys.h"
#include "webhook/field_error.h"
#include "webhook/instancetype_detail.h"
#include "webhook/json_read.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define P_ACCEL    "spec.resources.accelerator"
#define P_CPU      "spec.resources.cpu"
#define P_RAM      "spec.resources.ram"
#define P_STORAGE  "spec.resources.localStorage"
#define P_MEM_PCT  "spec.resources.acceleratorSlicedMemoryPercentage"
#define P_CORE_PCT "spec.resources.acceleratorSlicedCoresPercentage"
#define P_PROFILE  "spec.resources.acceleratorPartitionedProfile"

#define PHASE_STOPPED         "Stopped"
#define PHASE_STARTING        "Starting"
#define STORAGE_DEFAULT_BYTES (INT64_C(15) << 30) /* 15Gi */

/* ---- reading the two objects -------------------------------------------------------------- */

/* What an Instance asks for: spec.resources. */
struct inst_res {
        bool present; /* spec.resources is set */
        struct tsr_quantity cpu, ram, storage, accel;
        bool has_accel;
        int64_t mem_pct, cores_pct;
        const char *profile; /* "" when none */
};

/* What an InstanceType offers. */
struct itype {
        const char *name;
        json_t *obj; /* the InstanceType, borrowed: its memory is read when a profile is sized */
        bool accel;
        const char *unit_cpu, *unit_ram, *local_storage; /* "" when unset */
        char unit_cpu_text[24];                          /* unit_cpu written as a JSON number */
        struct tsr_quantity cpu_capacity, accel_capacity;
        const char *manufacturer; /* the detail's (or group's), "" until the detail is computed */
        char manufacturer_key[32];
        struct tsr_instancetype_detail detail; /* status.detail: counts and offered profiles */
};

static int read_quantity(json_t *obj, const char *path, struct tsr_quantity *q, bool *present,
                         struct tsr_diag *diag)
{
        bool dummy;

        return tsr_json_quantity(obj, path, q, present ? present : &dummy, diag);
}

static int read_res(json_t *inst, struct inst_res *r, struct tsr_diag *diag)
{
        json_t *res = tsr_json_at(inst, "spec.resources");
        int rc;

        memset(r, 0, sizeof(*r));
        r->profile = "";
        if (!res || json_is_null(res))
                return 0;
        if (!json_is_object(res))
                return tsr_diag_set(diag, TSR_EPARSE, "spec.resources is not an object");
        r->present = true;
        if ((rc = read_quantity(inst, P_CPU, &r->cpu, NULL, diag)) ||
            (rc = read_quantity(inst, P_RAM, &r->ram, NULL, diag)) ||
            (rc = read_quantity(inst, P_STORAGE, &r->storage, NULL, diag)) ||
            (rc = read_quantity(inst, P_ACCEL, &r->accel, &r->has_accel, diag)) ||
            (rc = tsr_json_read_int(inst, P_MEM_PCT, &r->mem_pct, diag)) ||
            (rc = tsr_json_read_int(inst, P_CORE_PCT, &r->cores_pct, diag)) ||
            (rc = tsr_json_read_string(inst, P_PROFILE, &r->profile, diag)))
                return rc;
        return 0;
}

static int read_itype(json_t *it, const char *name, struct itype *t, struct tsr_diag *diag)
{
        json_t *v;
        int rc;

        memset(t, 0, sizeof(*t));
        t->name = name;
        v = tsr_json_at(it, "spec.acceleratable");
        if (v && !json_is_boolean(v) && !json_is_null(v))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "InstanceType spec.acceleratable is not a "
                                    "boolean");
        t->accel = json_is_true(v);
        t->obj = it;
        v = tsr_json_at(it, "spec.unitResources.cpu");
        if (json_is_integer(v)) {
                /* Upstream writes a string ("12"); this project's former rendering a number. */
                snprintf(t->unit_cpu_text, sizeof(t->unit_cpu_text), "%" JSON_INTEGER_FORMAT,
                         json_integer_value(v));
                t->unit_cpu = t->unit_cpu_text;
        } else if ((rc = tsr_json_read_string(it, "spec.unitResources.cpu", &t->unit_cpu, diag))) {
                return rc;
        }
        if ((rc = tsr_json_read_string(it, "spec.unitResources.ram", &t->unit_ram, diag)) ||
            (rc = tsr_json_read_string(it, "spec.localStorage", &t->local_storage, diag)) ||
            (rc = tsr_instancetype_detail_read(it, &t->detail, diag)) ||
            (rc = read_quantity(it, "status.cpu.capacity", &t->cpu_capacity, NULL, diag)) ||
            (rc = read_quantity(it, "status.accelerator.capacity", &t->accel_capacity, NULL, diag)))
                return rc;
        t->manufacturer = t->detail.manufacturer;
        if (!*t->manufacturer && t->detail.sliced_detail) {
                /*
                 * A detail computed without a manufacturer (this project's former rendering): the
                 * accelerator group names it, "<manufacturer>-<group id>".
                 */
                const char *group = tsr_json_str_or_empty(it, "spec.acceleratorGroup");
                size_t n = strcspn(group, "-");

                if (n && n < sizeof(t->manufacturer_key)) {
                        memcpy(t->manufacturer_key, group, n);
                        t->manufacturer_key[n] = '\0';
                        t->manufacturer = t->manufacturer_key;
                }
        }
        return 0;
}

/* ---- quantity arithmetic ------------------------------------------------------------------ */

static char *qstr(const struct tsr_quantity *q, char *buf)
{
        return tsr_quantity_format(q, buf);
}

static int qsign(const struct tsr_quantity *q)
{
        return (q->value > 0) - (q->value < 0);
}

/* Quantity.Value(): rounded up to an integer; saturates on overflow. */
static int64_t qvalue(const struct tsr_quantity *q)
{
        int64_t v;

        if (tsr_quantity_value(q, &v))
                return q->value < 0 ? INT64_MIN : INT64_MAX;
        return v;
}

/* Quantity.AsInt64 succeeding: q is exactly an integer. */
static bool qis_integer(const struct tsr_quantity *q)
{
        int64_t v;

        return !tsr_quantity_value(q, &v) && tsr_quantity_is_int(q, v);
}

/* Parses the unit string s ("4", "16Gi") and multiplies it by count. 0 or TSR_EPARSE/ERANGE. */
static int unit_times(const char *s, int64_t count, struct tsr_quantity *out)
{
        struct tsr_quantity q;

        if (tsr_quantity_parse(s, &q, NULL))
                return TSR_EPARSE;
        if (__builtin_mul_overflow(q.value, count, &q.value))
                return TSR_ERANGE;
        *out = q;
        return 0;
}

/* Parses the unit string s and takes pct percent of it, rounded up to a milli. */
static int unit_percent(const char *s, int64_t pct, struct tsr_quantity *out)
{
        struct tsr_quantity q;
        int64_t milli, num;

        if (tsr_quantity_parse(s, &q, NULL))
                return TSR_EPARSE;
        if (tsr_quantity_milli(&q, &milli) || __builtin_mul_overflow(milli, pct, &num))
                return TSR_ERANGE;
        out->value = num / 100 + (num % 100 > 0);
        out->scale = -3;
        out->format = q.format;
        return 0;
}

/* ---- the resource rules ------------------------------------------------------------------- */

/* Go's %v of the offered profile names: "[a b c]". */
static void offered_list(const struct itype *t, char *out, size_t len)
{
        size_t used = (size_t)snprintf(out, len, "[");

        for (size_t i = 0; i < t->detail.n_profiles && used < len; i++)
                used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "",
                                         t->detail.profiles[i].name);
        if (used < len)
                snprintf(out + used, len - used, "]");
}

/* A slice or a partition is one instance on one card: the count must be exactly 1. */
static void single_card(const struct inst_res *r, const char *kind, struct tsr_field_list *errs)
{
        char b[TSR_QUANTITY_STR_MAX];

        if (r->has_accel && tsr_quantity_is_int(&r->accel, 1))
                return;
        tsr_field_invalid_str(errs, P_ACCEL, r->has_accel ? qstr(&r->accel, b) : "0",
                              "accelerator request must be exactly 1 for a %s request", kind);
}

static void check_partition(const struct itype *t, const struct inst_res *r,
                            struct tsr_field_list *errs)
{
        const struct tsr_manufacturer *m = tsr_catalog_manufacturer_by_key(t->manufacturer);
        char offered[TSR_FIELD_LIST_LEN / 2], key[TSR_KEY_MAX];

        if (r->mem_pct || r->cores_pct)
                tsr_field_forbidden(errs, P_PROFILE,
                                    "a hardware partition and a logical slice percentage are "
                                    "mutually exclusive; clear acceleratorSlicedMemoryPercentage "
                                    "and acceleratorSlicedCoresPercentage");
        if (!m || !m->partition_kind) {
                tsr_field_invalid_str(errs, P_PROFILE, r->profile,
                                      "manufacturer %s does not support hardware partitioning",
                                      t->manufacturer);
                return;
        }
        if (t->detail.physical_count <= 0) {
                tsr_field_forbidden(errs, P_PROFILE,
                                    "instance type %s does not offer hardware partitioning",
                                    t->name);
                return;
        }
        if (!tsr_instancetype_detail_profile(&t->detail, r->profile)) {
                offered_list(t, offered, sizeof(offered));
                tsr_field_invalid_str(
                    errs, P_PROFILE, r->profile,
                    "instance type %s does not offer this partition profile; offered: %s", t->name,
                    offered);
        } else if (tsr_key_format(key, m, TSR_KEY_PARTITIONED_PROFILE, r->profile)) {
                tsr_field_invalid_str(errs, P_PROFILE, r->profile,
                                      "partition profile name does not yield a valid resource "
                                      "name");
        }
        single_card(r, "partitioned", errs);
}

static void check_slice(const struct itype *t, const struct inst_res *r,
                        struct tsr_field_list *errs)
{
        if (t->detail.logical_count <= 0) {
                if (t->detail.physical_count > 0)
                        tsr_field_forbidden(errs, P_PROFILE,
                                            "instance type %s does not offer logical slicing; "
                                            "request a hardware partition with "
                                            "acceleratorPartitionedProfile",
                                            t->name);
                else
                        tsr_field_forbidden(errs, P_MEM_PCT,
                                            "instance type %s does not offer logical slicing",
                                            t->name);
                return;
        }
        if (r->mem_pct < 0 || r->mem_pct > 100)
                tsr_field_invalid_int(errs, P_MEM_PCT, r->mem_pct, "must be between 0 and 100");
        if (r->cores_pct < 0 || r->cores_pct > 100)
                tsr_field_invalid_int(errs, P_CORE_PCT, r->cores_pct, "must be between 0 and 100");
        single_card(r, "sliced", errs);
}

static void check_whole(const struct itype *t, const struct inst_res *r,
                        struct tsr_field_list *errs)
{
        char b[TSR_QUANTITY_STR_MAX], c[TSR_QUANTITY_STR_MAX];

        if (!r->has_accel)
                return;
        if (qsign(&r->accel) < 0)
                tsr_field_invalid_str(errs, P_ACCEL, qstr(&r->accel, b),
                                      "accelerator request cannot be negative");
        else if (!qis_integer(&r->accel))
                tsr_field_invalid_str(errs, P_ACCEL, qstr(&r->accel, b),
                                      "accelerator request must be a whole number of cards");
        else if (tsr_quantity_cmp(&r->accel, &t->accel_capacity) > 0)
                tsr_field_invalid_str(errs, P_ACCEL, qstr(&r->accel, b),
                                      "exceeds the accelerator capacity %s of instance type %s",
                                      qstr(&t->accel_capacity, c), t->name);
}

/* The unit-spec caps: CPU (accelerated), RAM, local storage. */
static void check_units(const struct itype *t, const struct inst_res *r,
                        struct tsr_field_list *errs)
{
        char b[TSR_QUANTITY_STR_MAX], c[TSR_QUANTITY_STR_MAX];
        struct tsr_quantity max;
        int64_t count = 1;

        if (t->accel) {
                if (r->has_accel && qvalue(&r->accel) > 1)
                        count = qvalue(&r->accel);
        } else if (qvalue(&r->cpu) > 1) {
                count = qvalue(&r->cpu);
        }
        if (t->accel && !unit_times(t->unit_cpu, count, &max) &&
            tsr_quantity_cmp(&r->cpu, &max) > 0)
                tsr_field_invalid_str(errs, P_CPU, qstr(&r->cpu, b),
                                      "exceeds the maximum CPU %s of instance type %s",
                                      qstr(&max, c), t->name);
        if (!unit_times(t->unit_ram, count, &max) && tsr_quantity_cmp(&r->ram, &max) > 0)
                tsr_field_invalid_str(errs, P_RAM, qstr(&r->ram, b),
                                      "exceeds the maximum RAM %s of instance type %s",
                                      qstr(&max, c), t->name);
        if (*t->local_storage && !tsr_quantity_parse(t->local_storage, &max, NULL) &&
            tsr_quantity_cmp(&r->storage, &max) > 0)
                tsr_field_invalid_str(errs, P_STORAGE, qstr(&r->storage, b),
                                      "exceeds the local storage %s of instance type %s",
                                      qstr(&max, c), t->name);
}

/* Every resource rule of a create (or a start) against the InstanceType. */
static void check_resources(const struct itype *t, const struct inst_res *r,
                            struct tsr_field_list *errs)
{
        char b[TSR_QUANTITY_STR_MAX], c[TSR_QUANTITY_STR_MAX];

        if (t->accel) {
                if (*r->profile)
                        check_partition(t, r, errs);
                else if (r->mem_pct || r->cores_pct)
                        check_slice(t, r, errs);
                else
                        check_whole(t, r, errs);
        } else if (r->has_accel && qsign(&r->accel)) {
                tsr_field_invalid_str(errs, P_ACCEL, qstr(&r->accel, b),
                                      "accelerator request must not be specified for "
                                      "non-acceleratable instance type");
        }
        if (qsign(&r->cpu) < 0) {
                tsr_field_invalid_str(errs, P_CPU, qstr(&r->cpu, b),
                                      "CPU request cannot be negative");
        } else if (!t->accel && tsr_quantity_cmp(&r->cpu, &t->cpu_capacity) > 0) {
                if (!qsign(&t->cpu_capacity))
                        tsr_field_invalid_str(errs, P_CPU, qstr(&r->cpu, b),
                                              "instance type %s has no CPU capacity: no managed "
                                              "node currently backs it",
                                              t->name);
                else
                        tsr_field_invalid_str(errs, P_CPU, qstr(&r->cpu, b),
                                              "exceeds the CPU capacity %s of instance type %s",
                                              qstr(&t->cpu_capacity, c), t->name);
        }
        if (qsign(&r->ram) < 0)
                tsr_field_invalid_str(errs, P_RAM, qstr(&r->ram, b),
                                      "RAM request cannot be negative");
        if (qsign(&r->storage) < 0)
                tsr_field_invalid_str(errs, P_STORAGE, qstr(&r->storage, b),
                                      "local storage request cannot be negative");
        check_units(t, r, errs);
}

/* A slice or partition request whose accelerator detail the reconciler has not computed yet. */
static bool share_not_ready(const struct itype *t, const struct inst_res *r)
{
        return t->accel && r->present && (r->mem_pct || r->cores_pct || *r->profile) &&
               !*t->manufacturer;
}

static void deny_not_ready(struct tsr_verdict *v, const char *type)
{
        tsr_verdict_deny(v, 500, "InternalError",
                         "Internal error occurred: instance type %s is not ready yet; retry", type);
}

/* ---- shared helpers ----------------------------------------------------------------------- */

static const char *name_of(const struct tsr_review *review, json_t *obj)
{
        const char *name = tsr_json_str(obj, "metadata.name");

        return name && *name ? name : review->name;
}

static void check_volume(json_t *inst, struct tsr_field_list *errs, struct tsr_diag *diag, int *rc)
{
        json_t *eph = tsr_json_at(inst, "spec.volume.ephemeral");
        json_t *per = tsr_json_at(inst, "spec.volume.persistent");
        bool has_eph = eph && !json_is_null(eph), has_per = per && !json_is_null(per);
        struct tsr_quantity cap;
        char b[TSR_QUANTITY_STR_MAX];

        if (has_eph && has_per) {
                tsr_field_forbidden(errs, "spec.volume",
                                    "cannot specify both ephemeral and persistent of volume");
        } else if (!has_eph && !has_per) {
                tsr_field_required(errs, "spec.volume",
                                   "either ephemeral or persistent of volume should be specified");
        } else if (has_eph) {
                *rc = read_quantity(inst, "spec.volume.ephemeral.capacity", &cap, NULL, diag);
                if (!*rc && qsign(&cap) <= 0)
                        tsr_field_invalid_str(errs, "spec.volume.ephemeral.capacity", qstr(&cap, b),
                                              "capacity of ephemeral volume must be positive");
        } else if (!*tsr_json_str_or_empty(inst, "spec.volume.persistent.name")) {
                tsr_field_required(errs, "spec.volume.persistent.name",
                                   "name of the persistent volume must be specified");
        }
}

/* ---- validating --------------------------------------------------------------------------- */

static int validate_create(const struct tsr_webhook_lookup *x, const struct tsr_review *review,
                           struct tsr_verdict *verdict, struct tsr_diag *diag)
{
        json_t *inst = review->object, *it = NULL;
        const char *ns = tsr_json_str(inst, "metadata.namespace"), *type;
        const char *sys = x->system_namespace ? x->system_namespace : TSR_SYSTEM_NAMESPACE_DEFAULT;
        struct tsr_field_list errs;
        struct inst_res r;
        struct itype t;
        bool stop;
        int rc;

        if (!ns || !*ns)
                ns = review->ns;
        if (!x->instancetype)
                return tsr_diag_set(diag, TSR_EINVAL, "the lookup cannot read InstanceTypes");
        tsr_field_list_clear(&errs);
        if ((rc = tsr_json_read_string(inst, "spec.type", &type, diag)) ||
            (rc = tsr_json_read_bool(inst, "spec.stop", &stop, diag)) ||
            (rc = read_res(inst, &r, diag)))
                return rc;
        if (!strcmp(ns, "kube-system") || !strcmp(ns, sys)) {
                tsr_field_invalid_str(&errs, "metadata.namespace", ns,
                                      "cannot create instance in reserved namespace");
                tsr_verdict_deny(verdict, 403, "Forbidden", "%s", errs.item[0]);
                return 0;
        }
        if (!*type) {
                tsr_field_required(&errs, "spec.type", "type must be specified");
                tsr_verdict_deny(verdict, 403, "Forbidden", "%s", errs.item[0]);
                return 0;
        }
        if (!stop) {
                it = x->instancetype(x->ctx, type);
                if (!it) {
                        tsr_field_not_found(&errs, "spec.type", type);
                        tsr_verdict_deny(verdict, 403, "Forbidden", "%s", errs.item[0]);
                        return 0;
                }
                rc = read_itype(it, type, &t, diag);
                if (rc) {
                        json_decref(it);
                        return rc;
                }
                if (r.present) {
                        if (share_not_ready(&t, &r)) {
                                deny_not_ready(verdict, type);
                                json_decref(it);
                                return 0;
                        }
                        check_resources(&t, &r, &errs);
                }
        }
        check_volume(inst, &errs, diag, &rc);
        json_decref(it);
        if (rc)
                return rc;
        if (errs.n)
                tsr_field_list_deny_invalid(verdict, TSR_INSTANCE_KIND, name_of(review, inst),
                                            &errs);
        else
                tsr_verdict_allow(verdict);
        return 0;
}

/* The fields that may change only while the Instance is stopped, in upstream's order. */
static const char *const frozen_while_running[] = {
    "type", "image",       "imagePullPolicy", "command",   "privileged",   "ports",
    "env",  "volumeMount", "imagePullSecret", "resources", "sshPublicKey", "nodeName",
};

static int validate_update(const struct tsr_webhook_lookup *x, const struct tsr_review *review,
                           struct tsr_verdict *verdict, struct tsr_diag *diag)
{
        json_t *old = review->old_object, *inst = review->object, *it;
        json_t *so = json_object_get(old, "spec"), *sn = json_object_get(inst, "spec");
        const char *phase = tsr_json_str_or_empty(old, "status.phase"), *type;
        struct tsr_field_list errs;
        bool stopped, stop_new;
        struct inst_res r;
        struct itype t;
        char path[64];
        int rc;

        if (!x->instancetype)
                return tsr_diag_set(diag, TSR_EINVAL, "the lookup cannot read InstanceTypes");
        if ((rc = tsr_json_read_bool(old, "spec.stop", &stopped, diag)) ||
            (rc = tsr_json_read_bool(inst, "spec.stop", &stop_new, diag)) ||
            (rc = tsr_json_read_string(inst, "spec.type", &type, diag)) ||
            (rc = read_res(inst, &r, diag)))
                return rc;
        tsr_field_list_clear(&errs);
        for (size_t i = 0; !stopped && i < sizeof(frozen_while_running) / sizeof(char *); i++) {
                const char *f = frozen_while_running[i];

                if (tsr_json_equal_zero(json_object_get(so, f), json_object_get(sn, f)))
                        continue;
                snprintf(path, sizeof(path), "spec.%s", f);
                tsr_field_forbidden(&errs, path, "%s is immutable", f);
        }
        if (!tsr_json_equal_zero(json_object_get(so, "volume"), json_object_get(sn, "volume")))
                tsr_field_forbidden(&errs, "spec.volume", "volume is immutable");
        if (stopped && !stop_new) {
                if (strcmp(phase, PHASE_STOPPED))
                        tsr_field_forbidden(&errs, "spec.stop", "can only start stopped instance");
                it = x->instancetype(x->ctx, type);
                if (!it) {
                        tsr_field_not_found(&errs, "spec.type", type);
                } else {
                        rc = read_itype(it, type, &t, diag);
                        if (!rc && r.present && share_not_ready(&t, &r)) {
                                deny_not_ready(verdict, type);
                                json_decref(it);
                                return 0;
                        }
                        if (!rc && r.present)
                                check_resources(&t, &r, &errs);
                        json_decref(it);
                        if (rc)
                                return rc;
                }
        } else if (!stopped && stop_new && !strcmp(phase, PHASE_STARTING)) {
                tsr_field_forbidden(&errs, "spec.stop", "cannot stop starting instance");
        }
        if (errs.n)
                tsr_field_list_deny_invalid(verdict, TSR_INSTANCE_KIND, name_of(review, inst),
                                            &errs);
        else
                tsr_verdict_allow(verdict);
        return 0;
}

int tsr_webhook_instance_validate(const struct tsr_webhook_lookup *lookup,
                                  const struct tsr_review *review, struct tsr_verdict *verdict,
                                  struct tsr_diag *diag)
{
        if (review->object && !strcmp(review->operation, "CREATE"))
                return validate_create(lookup, review, verdict, diag);
        if (review->object && review->old_object && !strcmp(review->operation, "UPDATE"))
                return validate_update(lookup, review, verdict, diag);
        tsr_verdict_allow(verdict);
        return 0;
}

/* ---- defaulting --------------------------------------------------------------------------- */

/*
 * The share of one card's VRAM (instancetype_detail.h) the requested profile occupies, in percent
 * (1..100). *pct is 0 for no profile or an unoffered one (validation refuses that on its own
 * terms). Returns 0, 1 when the profile is offered but cannot be sized yet (its memoryMib or the
 * card's memory not computed), or TSR_EPARSE with diag when the card's memory is malformed.
 */
static int profile_percent(const struct itype *t, const char *profile, int64_t *pct,
                           struct tsr_diag *diag)
{
        const struct tsr_profile_figure *p;
        uint64_t card;
        int rc;

        *pct = 0;
        if (!*profile || !(p = tsr_instancetype_detail_profile(&t->detail, profile)))
                return 0;
        if ((rc = tsr_instancetype_detail_memory_mib(t->obj, &card, diag)))
                return rc;
        if (!p->memory_mib || !card)
                return 1;
        *pct = p->memory_mib >= card ? 100 : (int64_t)(p->memory_mib * 100 / card);
        if (*pct < 1)
                *pct = 1;
        return 0;
}

static int set_quantity(json_t *res, const char *key, const struct tsr_quantity *q)
{
        char b[TSR_QUANTITY_STR_MAX];

        return json_object_set_new(res, key, json_string(qstr(q, b))) ? TSR_ENOMEM : 0;
}

static int set_string(json_t *obj, const char *key, const char *value)
{
        return json_object_set_new(obj, key, json_string(value)) ? TSR_ENOMEM : 0;
}

/* Why a unit could not be scaled, as upstream's field.InternalError reads (denied 403). */
static void deny_unit(struct tsr_verdict *v, const char *path, const char *what, const char *type)
{
        tsr_verdict_deny(v, 403, "Forbidden",
                         "%s: Internal error: invalid %s unit of instance type %s", path, what,
                         type);
}

/*
 * Sizes CPU (when cpu_too) and RAM on res from the unit spec: percent of one unit when pct > 0,
 * else count units. Returns 0, TSR_ENOMEM, or 1 after denying v.
 */
static int size_units(json_t *res, const struct itype *t, const struct inst_res *r, bool cpu_too,
                      int64_t pct, int64_t count, bool overcommit, struct tsr_verdict *v)
{
        struct tsr_quantity q;
        int rc;

        if (cpu_too && (overcommit || !qsign(&r->cpu))) {
                if (pct ? unit_percent(t->unit_cpu, pct, &q) : unit_times(t->unit_cpu, count, &q)) {
                        deny_unit(v, P_CPU, "CPU", t->name);
                        return 1;
                }
                if ((rc = set_quantity(res, "cpu", &q)))
                        return rc;
        }
        if (overcommit || !qsign(&r->ram)) {
                if (pct ? unit_percent(t->unit_ram, pct, &q) : unit_times(t->unit_ram, count, &q)) {
                        deny_unit(v, P_RAM, "RAM", t->name);
                        return 1;
                }
                if ((rc = set_quantity(res, "ram", &q)))
                        return rc;
        }
        return 0;
}

/*
 * Defaults res (spec.resources of the copy) from InstanceType t. 0, TSR_ENOMEM, TSR_EPARSE (diag:
 * the type's memory is malformed) or 1 (denied).
 */
static int default_resources(json_t *res, const struct itype *t, const struct inst_res *r,
                             bool overcommit, struct tsr_verdict *v, struct tsr_diag *diag)
{
        struct tsr_quantity one = tsr_quantity_from_int(1, TSR_QF_DECIMAL_SI), cap, q;
        int64_t pct, count;
        int rc = 0;

        if (t->accel) {
                struct inst_res cur = *r;

                if (!cur.has_accel) {
                        if ((rc = set_quantity(res, "accelerator", &one)))
                                return rc;
                        cur.accel = one;
                        cur.has_accel = true;
                }
                rc = profile_percent(t, cur.profile, &pct, diag);
                if (rc < 0)
                        return rc;
                if (rc) {
                        tsr_verdict_deny(v, 500, "InternalError",
                                         "Internal error occurred: instance type %s is not ready "
                                         "yet (partition profile \"%s\" cannot be sized from the "
                                         "observed accelerator detail); retry",
                                         t->name, cur.profile);
                        return 1;
                }
                if (pct > 0) {
                        if (!qvalue(&cur.accel) && (rc = set_quantity(res, "accelerator", &one)))
                                return rc;
                        rc = size_units(res, t, &cur, true, pct, 1, overcommit, v);
                } else if (t->detail.logical_count > 0 && (cur.mem_pct > 0 || cur.cores_pct > 0)) {
                        if (!qvalue(&cur.accel) && (rc = set_quantity(res, "accelerator", &one)))
                                return rc;
                        if (cur.mem_pct > 0 && !cur.cores_pct)
                                rc = json_object_set_new(res, "acceleratorSlicedCoresPercentage",
                                                         json_integer(cur.mem_pct));
                        else if (cur.cores_pct > 0 && !cur.mem_pct)
                                rc = json_object_set_new(res, "acceleratorSlicedMemoryPercentage",
                                                         json_integer(cur.cores_pct));
                        if (rc)
                                return TSR_ENOMEM;
                        pct = cur.mem_pct > 0 ? cur.mem_pct : cur.cores_pct;
                        rc = size_units(res, t, &cur, true, pct, 1, overcommit, v);
                } else {
                        count = qvalue(&cur.accel);
                        if (count <= 0)
                                count = 1;
                        rc = size_units(res, t, &cur, true, 0, count, overcommit, v);
                }
        } else {
                count = 1;
                if (!qsign(&r->cpu))
                        rc = set_quantity(res, "cpu", &one);
                else
                        count = qvalue(&r->cpu);
                if (!rc)
                        rc = size_units(res, t, r, false, 0, count, overcommit, v);
        }
        if (rc || qsign(&r->storage))
                return rc;
        q.value = STORAGE_DEFAULT_BYTES;
        q.scale = 0;
        q.format = TSR_QF_BINARY_SI;
        if (*t->local_storage && !tsr_quantity_parse(t->local_storage, &cap, NULL) &&
            tsr_quantity_cmp(&q, &cap) > 0)
                q = cap;
        return set_quantity(res, "localStorage", &q);
}

/* The object's spec.<key> object, created when absent. NULL on ENOMEM or a non-object. */
static json_t *child_object(json_t *parent, const char *key)
{
        json_t *c = json_object_get(parent, key);

        if (!c || json_is_null(c)) {
                if (json_object_set_new(parent, key, json_object()))
                        return NULL;
                c = json_object_get(parent, key);
        }
        return json_is_object(c) ? c : NULL;
}

int tsr_webhook_instance_mutate(const struct tsr_webhook_lookup *lookup,
                                const struct tsr_review *review, struct tsr_verdict *verdict,
                                struct tsr_diag *diag)
{
        json_t *obj, *spec, *res, *it = NULL;
        const char *type;
        struct inst_res r;
        struct itype t;
        bool stop;
        int rc;

        if (!review->object ||
            (strcmp(review->operation, "CREATE") && strcmp(review->operation, "UPDATE"))) {
                tsr_verdict_allow(verdict);
                return 0;
        }
        if (!json_is_object(review->object))
                return tsr_diag_set(diag, TSR_EPARSE, "Instance is not an object");
        if (!lookup->instancetype)
                return tsr_diag_set(diag, TSR_EINVAL, "the lookup cannot read InstanceTypes");
        if ((rc = tsr_json_read_string(review->object, "spec.type", &type, diag)) ||
            (rc = tsr_json_read_bool(review->object, "spec.stop", &stop, diag)) ||
            (rc = read_res(review->object, &r, diag)))
                return rc;
        if ((spec = json_object_get(review->object, "spec")) && !json_is_object(spec) &&
            !json_is_null(spec))
                return tsr_diag_set(diag, TSR_EPARSE, "spec is not an object");
        obj = json_deep_copy(review->object);
        if (!obj)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        rc = TSR_ENOMEM;
        if (!(spec = child_object(obj, "spec")))
                goto fail;
        if (!*tsr_json_str_or_empty(spec, "imagePullPolicy") &&
            set_string(spec, "imagePullPolicy", "IfNotPresent"))
                goto fail;
        if (!*tsr_json_str_or_empty(spec, "volumeMount") &&
            set_string(spec, "volumeMount", "/workspace"))
                goto fail;
        if (!(res = child_object(spec, "resources")))
                goto fail;
        if (*type && !stop) {
                it = lookup->instancetype(lookup->ctx, type);
                if (!it) {
                        struct tsr_field_list errs;

                        tsr_field_list_clear(&errs);
                        tsr_field_not_found(&errs, "spec.type", type);
                        tsr_verdict_deny(verdict, 403, "Forbidden", "%s", errs.item[0]);
                        json_decref(obj);
                        return 0;
                }
                if ((rc = read_itype(it, type, &t, diag)))
                        goto fail;
                if (share_not_ready(&t, &r)) {
                        deny_not_ready(verdict, type);
                        json_decref(it);
                        json_decref(obj);
                        return 0;
                }
                rc = default_resources(
                    res, &t, &r,
                    lookup->settings.value[TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT],
                    verdict, diag);
                json_decref(it);
                it = NULL;
                if (rc == 1) {
                        json_decref(obj);
                        return 0;
                }
                if (rc)
                        goto fail;
        }
        verdict->patched = obj;
        tsr_verdict_allow(verdict);
        return 0;
fail:
        json_decref(it);
        json_decref(obj);
        if (rc == TSR_ENOMEM)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        return rc;
}
