/*
 * alloc_annotation.c - jansson encode/decode of the allocation annotation. Keys are written
 * sorted so the annotation is byte-stable.
 */
#include "codec/alloc_annotation.h"

#include "base/diag.h"
#include "base/err.h"
#include "codec/json_subset.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static json_t *accel_json(const struct tsr_accel_allocation *a)
{
        json_t *o = json_object();

        json_object_set_new(o, "id", json_string(a->id));
        json_object_set_new(o, "index", json_integer(a->index));
        json_object_set_new(o, "mode", json_integer(a->mode));
        if (a->allocated)
                json_object_set_new(o, "allocated", json_integer(a->allocated));
        if (a->mode == TSR_MODE_SLICED)
                json_object_set_new(o, "allocatedSlices", json_integer(a->slices));
        if (a->mode == TSR_MODE_PARTITIONED) {
                json_t *pl = json_object();

                json_object_set_new(o, "allocatedPhysicalProfile", json_string(a->profile));
                json_object_set_new(pl, "start", json_integer(a->start));
                json_object_set_new(pl, "length", json_integer(a->length));
                json_object_set_new(o, "allocatedPhysicalPlacements", json_pack("[o]", pl));
                json_object_set_new(o, "allocatedPhysicalID", json_string(a->physical_id));
        }
        return o;
}

int tsr_alloc_annotation_encode(const struct tsr_container_allocation *c, size_t n, char **out)
{
        json_t *root = json_object();
        char *s;

        if (!root)
                return TSR_ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_t *accels = json_array(), *ids = json_array(), *group, *entry;

                for (size_t k = 0; k < c[i].n; k++)
                        json_array_append_new(accels, accel_json(&c[i].accels[k]));
                for (size_t k = 0; k < c[i].n_device_ids; k++)
                        json_array_append_new(ids, json_string(c[i].device_ids[k]));
                group = json_pack("{s:s, s:s, s:o}", "id", c[i].group_id, "manufacturer",
                                  c[i].manufacturer, "accelerators", accels);
                entry = json_pack("{s:{s:[o]}, s:o}", "devices", "groups", group, "deviceIDs", ids);
                if (!entry) {
                        json_decref(root);
                        return TSR_ENOMEM;
                }
                json_object_set_new(root, c[i].container, entry);
        }
        s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(root);
        if (!s)
                return TSR_ENOMEM;
        *out = s;
        return 0;
}

static int get_str(json_t *o, const char *key, char *dst, size_t len, bool required,
                   struct tsr_diag *diag)
{
        json_t *v = json_object_get(o, key);

        if (!v && !required) {
                dst[0] = '\0';
                return 0;
        }
        if (!json_is_string(v) || json_string_length(v) >= len)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "allocation record: \"%s\" must be a "
                                    "string",
                                    key);
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

static int get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *dst, bool required,
                   struct tsr_diag *diag)
{
        json_t *v = json_object_get(o, key);

        if (!v && !required) {
                *dst = 0;
                return 0;
        }
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "allocation record: \"%s\" must be an "
                                    "integer in [%lld, %lld]",
                                    key, (long long)lo, (long long)hi);
        *dst = json_integer_value(v);
        return 0;
}

static int decode_accel(json_t *o, struct tsr_accel_allocation *a, struct tsr_diag *diag)
{
        int64_t v = 0; /* get_int writes it only on success; gcc -O3 cannot tell */
        int rc;

        memset(a, 0, sizeof(*a));
        if (!json_is_object(o))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "allocation record: accelerator must be an "
                                    "object");
        rc = get_str(o, "id", a->id, sizeof(a->id), true, diag);
        if (!rc)
                rc = get_int(o, "index", 0, 1023, &v, true, diag);
        if (rc)
                return rc;
        a->index = (unsigned)v;
        rc = get_int(o, "mode", TSR_MODE_NONE, TSR_MODE_PARTITIONED, &v, true, diag);
        if (rc)
                return rc;
        a->mode = (enum tsr_mode)v;
        rc = get_int(o, "allocated", 0, INT32_MAX, &a->allocated, false, diag);
        if (!rc)
                rc = get_int(o, "allocatedSlices", 0, 1024, &v, false, diag);
        if (rc)
                return rc;
        a->slices = (unsigned)v;
        if (a->mode != TSR_MODE_PARTITIONED)
                return 0;
        json_t *pl = json_array_get(json_object_get(o, "allocatedPhysicalPlacements"), 0);

        rc = get_str(o, "allocatedPhysicalProfile", a->profile, sizeof(a->profile), true, diag);
        if (!rc)
                rc = get_str(o, "allocatedPhysicalID", a->physical_id, sizeof(a->physical_id),
                             false, diag);
        if (rc)
                return rc;
        if (!json_is_object(pl))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "allocation record: a partition needs "
                                    "\"allocatedPhysicalPlacements\"");
        rc = get_int(pl, "start", 0, 31, &v, true, diag);
        if (rc)
                return rc;
        a->start = (unsigned)v;
        rc = get_int(pl, "length", 1, 32, &v, true, diag);
        if (rc)
                return rc;
        a->length = (unsigned)v;
        return 0;
}

/* ---- the fast path: a record in the JSON subset, read in place (codec/json_subset.h) ------ */

/* Copies str into dst[len] when it fits (the jansson path's "shorter than len"). */
static bool copy_str(const struct tsr_jsub_str *str, char *dst, size_t len)
{
        if (str->len >= len)
                return false;
        memcpy(dst, str->p, str->len);
        dst[str->len] = '\0';
        return true;
}

static bool int_in(struct tsr_jsub *s, int64_t lo, int64_t hi, int64_t *v)
{
        return tsr_jsub_int(s, v) && *v >= lo && *v <= hi;
}

/* The next value is a string shorter than len: copied into dst. */
static bool string_in(struct tsr_jsub *s, char *dst, size_t len)
{
        struct tsr_jsub_str str;

        return tsr_jsub_string(s, &str) && copy_str(&str, dst, len);
}

/* allocatedPhysicalPlacements: its first element's start and length, the rest read over. */
static bool subset_placements(struct tsr_jsub *s, struct tsr_accel_allocation *a, bool *got)
{
        struct tsr_jsub_str key;
        bool start = false, length = false;
        int64_t v;

        if (!tsr_jsub_array(s))
                return false;
        if (!tsr_jsub_element(s))
                return !s->outside; /* [] */
        if (!tsr_jsub_object(s))
                return false;
        while (tsr_jsub_key(s, &key)) {
                if (tsr_jsub_is(&key, "start")) {
                        if (!int_in(s, 0, 31, &v))
                                return false;
                        a->start = (unsigned)v;
                        start = true;
                } else if (tsr_jsub_is(&key, "length")) {
                        if (!int_in(s, 1, 32, &v))
                                return false;
                        a->length = (unsigned)v;
                        length = true;
                } else if (!tsr_jsub_skip(s)) {
                        return false;
                }
        }
        while (tsr_jsub_element(s))
                tsr_jsub_skip(s);
        *got = start && length;
        return !s->outside;
}

/* One accelerator object, as decode_accel reads it; false declines. */
static bool subset_accel(struct tsr_jsub *s, struct tsr_accel_allocation *a)
{
        struct tsr_jsub_str key;
        bool id = false, index = false, mode = false, profile = false, placed = false;
        int64_t v;

        memset(a, 0, sizeof(*a));
        if (!tsr_jsub_object(s))
                return false;
        while (tsr_jsub_key(s, &key)) {
                bool ok;

                if (tsr_jsub_is(&key, "id")) {
                        ok = id = string_in(s, a->id, sizeof(a->id));
                } else if (tsr_jsub_is(&key, "index")) {
                        ok = index = int_in(s, 0, 1023, &v);
                        a->index = (unsigned)v;
                } else if (tsr_jsub_is(&key, "mode")) {
                        ok = mode = int_in(s, TSR_MODE_NONE, TSR_MODE_PARTITIONED, &v);
                        a->mode = (enum tsr_mode)v;
                } else if (tsr_jsub_is(&key, "allocated")) {
                        ok = int_in(s, 0, INT32_MAX, &a->allocated);
                } else if (tsr_jsub_is(&key, "allocatedSlices")) {
                        ok = int_in(s, 0, 1024, &v);
                        a->slices = (unsigned)v;
                } else if (tsr_jsub_is(&key, "allocatedPhysicalProfile")) {
                        ok = profile = string_in(s, a->profile, sizeof(a->profile));
                } else if (tsr_jsub_is(&key, "allocatedPhysicalID")) {
                        ok = string_in(s, a->physical_id, sizeof(a->physical_id));
                } else if (tsr_jsub_is(&key, "allocatedPhysicalPlacements")) {
                        ok = subset_placements(s, a, &placed);
                } else {
                        ok = tsr_jsub_skip(s);
                }
                if (!ok)
                        return false;
        }
        if (s->outside || !id || !index || !mode)
                return false;
        if (a->mode != TSR_MODE_PARTITIONED) { /* decode_accel reads no partition field */
                a->profile[0] = a->physical_id[0] = '\0';
                a->start = a->length = 0;
                return true;
        }
        return profile && placed;
}

/* devices.groups[0]: its id, manufacturer and accelerators; the other groups read over. */
static bool subset_groups(struct tsr_jsub *s, struct tsr_container_allocation *c, bool *got)
{
        struct tsr_jsub_str key;
        bool accels = false;

        if (!tsr_jsub_array(s) || !tsr_jsub_element(s) || !tsr_jsub_object(s))
                return false;
        while (tsr_jsub_key(s, &key)) {
                bool ok;

                if (tsr_jsub_is(&key, "id")) {
                        ok = string_in(s, c->group_id, sizeof(c->group_id));
                } else if (tsr_jsub_is(&key, "manufacturer")) {
                        ok = string_in(s, c->manufacturer, sizeof(c->manufacturer));
                } else if (tsr_jsub_is(&key, "accelerators")) {
                        ok = accels = tsr_jsub_array(s);
                        while (ok && tsr_jsub_element(s))
                                ok = c->n < TSR_ALLOC_ACCELS_MAX &&
                                     subset_accel(s, &c->accels[c->n++]);
                } else {
                        ok = tsr_jsub_skip(s);
                }
                if (!ok)
                        return false;
        }
        while (tsr_jsub_element(s))
                tsr_jsub_skip(s);
        *got = accels;
        return !s->outside;
}

/* One container's entry; false declines. */
static bool subset_entry(struct tsr_jsub *s, struct tsr_container_allocation *c)
{
        struct tsr_jsub_str key, str;
        bool groups = false;

        if (!tsr_jsub_object(s))
                return false;
        while (tsr_jsub_key(s, &key)) {
                bool ok = true;

                if (tsr_jsub_is(&key, "devices")) {
                        struct tsr_jsub_str inner;

                        ok = tsr_jsub_object(s);
                        while (ok && tsr_jsub_key(s, &inner))
                                ok = tsr_jsub_is(&inner, "groups") ? subset_groups(s, c, &groups)
                                                                   : tsr_jsub_skip(s);
                } else if (tsr_jsub_is(&key, "deviceIDs")) {
                        /* as the jansson path: strings kept up to the first that is not one or
                         * does not fit; the rest read over */
                        bool taking = true;

                        ok = tsr_jsub_array(s);
                        while (ok && tsr_jsub_element(s)) {
                                if (taking && c->n_device_ids < TSR_ALLOC_ACCELS_MAX &&
                                    tsr_jsub_peek(s) == '"') {
                                        ok = tsr_jsub_string(s, &str);
                                        if (ok && copy_str(&str, c->device_ids[c->n_device_ids],
                                                           sizeof(c->device_ids[0])))
                                                c->n_device_ids++;
                                        else
                                                taking = false;
                                } else {
                                        taking = false;
                                        ok = tsr_jsub_skip(s);
                                }
                        }
                } else {
                        ok = tsr_jsub_skip(s);
                }
                if (!ok || s->outside)
                        return false;
        }
        return !s->outside && groups;
}

/* Decodes json in the subset into out; false declines (the jansson path then decides). */
static bool decode_subset(const char *json, struct tsr_container_allocation *out, size_t max,
                          size_t *n)
{
        struct tsr_jsub s;
        struct tsr_jsub_str name;
        size_t count = 0;

        tsr_jsub_init(&s, json, strlen(json));
        if (!tsr_jsub_object(&s))
                return false;
        while (tsr_jsub_key(&s, &name)) {
                struct tsr_container_allocation *c = &out[count];

                if (count >= max || !copy_str(&name, c->container, sizeof(c->container)))
                        return false;
                c->group_id[0] = c->manufacturer[0] = '\0';
                c->n = c->n_device_ids = 0;
                if (!subset_entry(&s, c))
                        return false;
                count++;
        }
        if (!tsr_jsub_end(&s))
                return false;
        *n = count;
        return true;
}

/* ---- the jansson path: everything, with a message for what is wrong -------------------- */

int tsr_alloc_annotation_decode(const char *json, struct tsr_container_allocation *out, size_t max,
                                size_t *n, struct tsr_diag *diag)
{
        json_error_t err;
        json_t *root;
        const char *name;
        json_t *entry;
        size_t count = 0;
        int rc = 0;

        if (decode_subset(json, out, max, n))
                return 0;
        root = json_loads(json, JSON_REJECT_DUPLICATES, &err);

        if (!json_is_object(root)) {
                json_decref(root);
                return tsr_diag_set(diag, TSR_EPARSE, "allocation record is not a JSON object%s%s",
                                    root ? "" : ": ", root ? "" : err.text);
        }
        json_object_foreach(root, name, entry)
        {
                struct tsr_container_allocation *c;
                json_t *group, *accels, *ids, *v;
                size_t i;

                if (count >= max) {
                        rc = tsr_diag_set(diag, TSR_ETOOBIG,
                                          "allocation record names more than "
                                          "%zu containers",
                                          max);
                        goto out;
                }
                c = &out[count];
                /* only what is read is cleared: accels[0..n) and device_ids[0..n_device_ids) are
                 * written below as they are counted (an 8.5 KB memset cost more than the parse) */
                c->group_id[0] = c->manufacturer[0] = '\0';
                c->n = c->n_device_ids = 0;
                if (strlen(name) >= sizeof(c->container)) {
                        rc = tsr_diag_set(diag, TSR_EPARSE,
                                          "allocation record: container name "
                                          "too long");
                        goto out;
                }
                memcpy(c->container, name, strlen(name) + 1);
                group =
                    json_array_get(json_object_get(json_object_get(entry, "devices"), "groups"), 0);
                accels = json_object_get(group, "accelerators");
                if (!json_is_object(group) || !json_is_array(accels)) {
                        rc = tsr_diag_set(diag, TSR_EPARSE,
                                          "allocation record of \"%s\": no "
                                          "devices.groups[0].accelerators",
                                          name);
                        goto out;
                }
                rc = get_str(group, "id", c->group_id, sizeof(c->group_id), false, diag);
                if (!rc)
                        rc = get_str(group, "manufacturer", c->manufacturer,
                                     sizeof(c->manufacturer), false, diag);
                if (rc)
                        goto out;
                if (json_array_size(accels) > TSR_ALLOC_ACCELS_MAX) {
                        rc = tsr_diag_set(diag, TSR_ETOOBIG,
                                          "allocation record of \"%s\": too "
                                          "many accelerators",
                                          name);
                        goto out;
                }
                json_array_foreach(accels, i, v)
                {
                        rc = decode_accel(v, &c->accels[i], diag);
                        if (rc)
                                goto out;
                        c->n++;
                }
                ids = json_object_get(entry, "deviceIDs");
                json_array_foreach(ids, i, v)
                {
                        if (i >= TSR_ALLOC_ACCELS_MAX || !json_is_string(v) ||
                            json_string_length(v) >= sizeof(c->device_ids[0]))
                                break;
                        memcpy(c->device_ids[i], json_string_value(v), json_string_length(v) + 1);
                        c->n_device_ids++;
                }
                count++;
        }
        *n = count;
out:
        json_decref(root);
        return rc;
}

int tsr_alloc_annotation_of_pod(json_t *pod, struct tsr_container_allocation *out, size_t max,
                                size_t *n, struct tsr_diag *diag)
{
        json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
        const char *v = json_string_value(json_object_get(ann, TSR_ALLOC_ANNOTATION));

        *n = 0;
        if (!v)
                return 0;
        return tsr_alloc_annotation_decode(v, out, max, n, diag);
}

int tsr_alloc_annotation_records(const struct tsr_container_allocation *alloc, size_t na,
                                 const struct tsr_product *p, bool finished,
                                 struct tsr_alloc_record *recs, size_t max, size_t *nrec)
{
        for (size_t a = 0; a < na; a++) {
                for (size_t x = 0; x < alloc[a].n; x++) {
                        const struct tsr_accel_allocation *aa = &alloc[a].accels[x];
                        const struct tsr_mig_profile *mp = NULL;

                        if (*nrec >= max)
                                return TSR_ETOOBIG;
                        if (aa->mode == TSR_MODE_PARTITIONED)
                                mp = tsr_product_profile(p, aa->profile);
                        recs[(*nrec)++] = (struct tsr_alloc_record){
                            .accel = aa->index,
                            .mode = aa->mode,
                            .units = aa->allocated,
                            .shares = 1,
                            .profile = mp ? (int)(mp - p->profiles) : -1,
                            .start = aa->start,
                            .finished = finished,
                        };
                }
        }
        return 0;
}
