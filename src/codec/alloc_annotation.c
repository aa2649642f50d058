/*
 * alloc_annotation.c - jansson encode/decode of the allocation annotation. Keys are written
 * sorted so the annotation is byte-stable.
 */
#include "codec/alloc_annotation.h"

#include "base/diag.h"
#include "base/err.h"

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

int tsr_alloc_annotation_decode(const char *json, struct tsr_container_allocation *out, size_t max,
                                size_t *n, struct tsr_diag *diag)
{
        json_error_t err;
        json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &err);
        const char *name;
        json_t *entry;
        size_t count = 0;
        int rc = 0;

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
