/*
 * json_read.c - reading Kubernetes objects decoded by jansson (json_read.h).
 */
#include "webhook/json_read.h"

#include "base/diag.h"
#include "base/err.h"

#include <stdio.h>
#include <string.h>

json_t *tsr_json_at(json_t *root, const char *path)
{
        const char *p = path;
        json_t *v = root;

        while (v && *p) {
                const char *dot = strchr(p, '.');
                size_t n = dot ? (size_t)(dot - p) : strlen(p);

                if (!json_is_object(v))
                        return NULL;
                v = json_object_getn(v, p, n);
                p += n;
                if (*p == '.')
                        p++;
        }
        return v;
}

const char *tsr_json_str(json_t *root, const char *path)
{
        return json_string_value(tsr_json_at(root, path));
}

const char *tsr_json_str_or_empty(json_t *root, const char *path)
{
        const char *s = tsr_json_str(root, path);

        return s ? s : "";
}

bool tsr_json_bool(json_t *root, const char *path)
{
        return json_is_true(tsr_json_at(root, path));
}

int tsr_json_quantity(json_t *root, const char *path, struct tsr_quantity *out, bool *present,
                      struct tsr_diag *diag)
{
        json_t *v = tsr_json_at(root, path);
        struct tsr_quantity q;
        char text[64];
        int rc;

        memset(out, 0, sizeof(*out));
        *present = false;
        if (!v || json_is_null(v))
                return 0;
        if (json_is_integer(v)) {
                *out = tsr_quantity_from_int((int64_t)json_integer_value(v), TSR_QF_DECIMAL_SI);
                *present = true;
                return 0;
        }
        if (json_is_real(v)) {
                snprintf(text, sizeof(text), "%.17g", json_real_value(v));
                rc = tsr_quantity_parse(text, &q, NULL);
        } else if (json_is_string(v)) {
                rc = tsr_quantity_parse(json_string_value(v), &q, NULL);
        } else {
                rc = TSR_EPARSE;
        }
        if (rc)
                return tsr_diag_set(diag, TSR_EPARSE, "%s: not a quantity", path);
        *out = q;
        *present = true;
        return 0;
}

bool tsr_json_is_zero(json_t *v)
{
        const char *key;
        json_t *m;
        size_t i;

        if (!v)
                return true;
        switch (json_typeof(v)) {
        case JSON_NULL:
        case JSON_FALSE:
                return true;
        case JSON_TRUE:
                return false;
        case JSON_INTEGER:
                return json_integer_value(v) == 0;
        case JSON_REAL:
                return json_real_value(v) == 0.0;
        case JSON_STRING:
                return json_string_length(v) == 0;
        case JSON_ARRAY:
                json_array_foreach(v, i, m)
                {
                        if (!tsr_json_is_zero(m))
                                return false;
                }
                return true;
        case JSON_OBJECT:
                json_object_foreach(v, key, m)
                {
                        if (!tsr_json_is_zero(m))
                                return false;
                }
                return true;
        }
        return false;
}

bool tsr_json_equal_zero(json_t *a, json_t *b)
{
        const char *key;
        json_t *m;
        size_t i;

        if (tsr_json_is_zero(a) && tsr_json_is_zero(b))
                return true;
        if (!a || !b)
                return false;
        if (json_is_number(a) && json_is_number(b))
                return json_number_value(a) == json_number_value(b) &&
                       (!json_is_integer(a) || !json_is_integer(b) ||
                        json_integer_value(a) == json_integer_value(b));
        if (json_typeof(a) != json_typeof(b))
                return false;
        switch (json_typeof(a)) {
        case JSON_STRING:
                return json_string_length(a) == json_string_length(b) &&
                       !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
        case JSON_ARRAY:
                if (json_array_size(a) != json_array_size(b))
                        return false;
                json_array_foreach(a, i, m)
                {
                        if (!tsr_json_equal_zero(m, json_array_get(b, i)))
                                return false;
                }
                return true;
        case JSON_OBJECT:
                json_object_foreach(a, key, m)
                {
                        if (!tsr_json_equal_zero(m, json_object_get(b, key)))
                                return false;
                }
                json_object_foreach(b, key, m)
                {
                        if (!json_object_get(a, key) && !tsr_json_is_zero(m))
                                return false;
                }
                return true;
        default:
                return json_equal(a, b);
        }
}

/* The value at path, or NULL when absent or null; else a type error when test(value) fails. */
static int typed(json_t *root, const char *path, int (*test)(const json_t *), const char *what,
                 json_t **out, struct tsr_diag *diag)
{
        json_t *v = tsr_json_at(root, path);

        *out = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!test(v))
                return tsr_diag_set(diag, TSR_EPARSE, "%s is not %s", path, what);
        *out = v;
        return 0;
}

static int is_string(const json_t *v)
{
        return json_is_string(v);
}

static int is_integer(const json_t *v)
{
        return json_is_integer(v);
}

static int is_boolean(const json_t *v)
{
        return json_is_boolean(v);
}

int tsr_json_read_string(json_t *root, const char *path, const char **out, struct tsr_diag *diag)
{
        json_t *v;
        int rc = typed(root, path, is_string, "a string", &v, diag);

        *out = v ? json_string_value(v) : "";
        return rc;
}

int tsr_json_read_int(json_t *root, const char *path, int64_t *out, struct tsr_diag *diag)
{
        json_t *v;
        int rc = typed(root, path, is_integer, "an integer", &v, diag);

        *out = v ? (int64_t)json_integer_value(v) : 0;
        return rc;
}

int tsr_json_read_bool(json_t *root, const char *path, bool *out, struct tsr_diag *diag)
{
        json_t *v;
        int rc = typed(root, path, is_boolean, "a boolean", &v, diag);

        *out = v && json_is_true(v);
        return rc;
}
