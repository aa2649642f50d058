/*
 * affinity.c - node selector evaluation and pin insertion over jansson PodSpecs.
 */
#include "codec/affinity.h"

#include "codec/json_tree.h"

#include "base/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The required terms, NULL when absent or JSON null (a nil pointer to Kubernetes). */
static json_t *required_terms(json_t *spec)
{
        json_t *na = json_object_get(json_object_get(spec, "affinity"), "nodeAffinity");
        json_t *terms =
            json_object_get(json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution"),
                            "nodeSelectorTerms");

        return json_is_null(terms) ? NULL : terms;
}

static bool in_values(json_t *values, const char *v)
{
        size_t i;
        json_t *x;

        json_array_foreach(values, i, x)
        {
                if (json_is_string(x) && !strcmp(json_string_value(x), v))
                        return true;
        }
        return false;
}

/* Go's strconv.ParseInt(s, 10, 64): an optional sign, then digits only (no blanks). */
static bool parse_int(const char *s, long long *out)
{
        char *end;
        const char *d = s && (*s == '+' || *s == '-') ? s + 1 : s;

        if (!d || *d < '0' || *d > '9')
                return false;
        errno = 0;
        *out = strtoll(s, &end, 10);
        return *end == '\0' && errno == 0;
}

/*
 * A requirement Kubernetes cannot turn into a selector (labels.NewRequirement refuses it: In and
 * NotIn without values, Exists and DoesNotExist with values, Gt and Lt without exactly one
 * integer) makes its term match nothing, as the scheduler drops such terms.
 */
static bool expression_holds(json_t *e, const char *actual)
{
        const char *op = json_string_value(json_object_get(e, "operator"));
        json_t *values = json_object_get(e, "values");
        long long have, want;

        if (!op)
                return false;
        if (!strcmp(op, "Exists"))
                return json_array_size(values) == 0 && actual != NULL;
        if (!strcmp(op, "DoesNotExist"))
                return json_array_size(values) == 0 && actual == NULL;
        if (!strcmp(op, "In"))
                return json_array_size(values) > 0 && actual && in_values(values, actual);
        if (!strcmp(op, "NotIn"))
                return json_array_size(values) > 0 && (!actual || !in_values(values, actual));
        if ((!strcmp(op, "Gt") || !strcmp(op, "Lt")) && json_array_size(values) == 1) {
                if (!parse_int(actual, &have) ||
                    !parse_int(json_string_value(json_array_get(values, 0)), &want))
                        return false;
                return op[0] == 'G' ? have > want : have < want;
        }
        return false;
}

static bool term_matches(json_t *term, const char *node_name, json_t *labels)
{
        json_t *exprs = json_object_get(term, "matchExpressions");
        json_t *fields = json_object_get(term, "matchFields");
        size_t i;
        json_t *e;

        if (json_array_size(exprs) == 0 && json_array_size(fields) == 0)
                return false;
        json_array_foreach(exprs, i, e)
        {
                const char *key = json_string_value(json_object_get(e, "key"));

                if (!key || !expression_holds(e, json_string_value(json_object_get(labels, key))))
                        return false;
        }
        json_array_foreach(fields, i, e)
        {
                const char *key = json_string_value(json_object_get(e, "key"));
                const char *op = json_string_value(json_object_get(e, "operator"));

                /* A field selector takes In or NotIn with exactly one value. */
                if (!key || strcmp(key, "metadata.name") || !op ||
                    (strcmp(op, "In") && strcmp(op, "NotIn")) ||
                    json_array_size(json_object_get(e, "values")) != 1 ||
                    !expression_holds(e, node_name))
                        return false;
        }
        return true;
}

bool tsr_affinity_matches(json_t *spec, const char *node_name, json_t *labels)
{
        json_t *selector = json_object_get(spec, "nodeSelector");
        json_t *terms = required_terms(spec);
        const char *key;
        json_t *v, *term;
        size_t i;

        json_object_foreach(selector, key, v)
        {
                const char *have = json_string_value(json_object_get(labels, key));

                if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)))
                        return false;
        }
        if (!terms)
                return true;
        json_array_foreach(terms, i, term)
        {
                if (term_matches(term, node_name, labels))
                        return true;
        }
        return false;
}

static json_t *requirement_json(const struct tsr_node_requirement *r)
{
        return json_pack("{s:s, s:s, s:[s]}", "key", r->key, "operator", r->op, "values", r->value);
}

static bool has_expression(json_t *exprs, json_t *want)
{
        size_t i;
        json_t *e;

        json_array_foreach(exprs, i, e)
        {
                if (json_equal(e, want))
                        return true;
        }
        return false;
}

/* obj[key], where a JSON null reads as absent (Kubernetes decodes it as a nil pointer). */
static json_t *get_present(json_t *obj, const char *key)
{
        json_t *c = json_object_get(obj, key);

        return json_is_null(c) ? NULL : c;
}

/*
 * Ensures (*obj)[key] is an object, creating it, and moves *obj to it. 0, TSR_EPARSE when it is
 * something else, or TSR_ENOMEM.
 */
static int child_object(json_t **obj, const char *key)
{
        json_t *c = get_present(*obj, key);

        if (c) {
                *obj = c;
                return json_is_object(c) ? 0 : TSR_EPARSE;
        }
        c = json_object();
        if (!c || json_object_set_new(*obj, key, c))
                return TSR_ENOMEM;
        *obj = c;
        return 0;
}

/* Appends each requirement to exprs unless an identical expression is there already. */
static int add_pins(json_t *exprs, const struct tsr_node_requirement *reqs, size_t n)
{
        for (size_t k = 0; k < n; k++) {
                json_t *e = requirement_json(&reqs[k]);

                if (!e)
                        return TSR_ENOMEM;
                if (has_expression(exprs, e))
                        json_decref(e);
                else if (json_array_append_new(exprs, e))
                        return TSR_ENOMEM;
        }
        return 0;
}

/* The term's expressions and fields are arrays (or absent) and every entry an object. */
static bool term_well_formed(json_t *term, json_t *exprs, json_t *fields)
{
        size_t i;
        json_t *e;

        if (!json_is_object(term) || (exprs && !json_is_array(exprs)) ||
            (fields && !json_is_array(fields)))
                return false;
        json_array_foreach(exprs, i, e)
        {
                if (!json_is_object(e))
                        return false;
        }
        json_array_foreach(fields, i, e)
        {
                if (!json_is_object(e))
                        return false;
        }
        return true;
}

int tsr_affinity_require(json_t *spec, const struct tsr_node_requirement *reqs, size_t n,
                         bool *changed)
{
        json_t *work, *terms, *term, *required;
        size_t i;
        int rc = 0;

        *changed = false;
        if (n == 0)
                return 0;
        if (!json_is_object(spec))
                return TSR_EPARSE;
        /* Only spec.affinity is read and written: the work is a copy of it alone. */
        work = json_object();
        if (!work || (json_object_get(spec, "affinity") &&
                      json_object_set_new(work, "affinity",
                                          tsr_json_copy(json_object_get(spec, "affinity"))))) {
                json_decref(work);
                return TSR_ENOMEM;
        }
        required = work;
        rc = child_object(&required, "affinity");
        if (!rc)
                rc = child_object(&required, "nodeAffinity");
        if (!rc)
                rc = child_object(&required, "requiredDuringSchedulingIgnoredDuringExecution");
        if (rc) {
                json_decref(work);
                return rc;
        }
        terms = get_present(required, "nodeSelectorTerms");
        if (!terms) {
                /* No required affinity yet: one term holding only the pins. */
                json_t *exprs = json_array();
                json_t *fresh = json_pack("[{s:o}]", "matchExpressions", exprs);

                if (!fresh || add_pins(exprs, reqs, n)) {
                        json_decref(fresh);
                        json_decref(work);
                        return TSR_ENOMEM;
                }
                if (json_object_set_new(required, "nodeSelectorTerms", fresh)) {
                        json_decref(work);
                        return TSR_ENOMEM;
                }
                terms = NULL; /* done: the loop below has nothing to add */
        } else if (!json_is_array(terms)) {
                json_decref(work);
                return TSR_EPARSE;
        }
        json_array_foreach(terms, i, term)
        {
                json_t *exprs = get_present(term, "matchExpressions");
                json_t *fields = get_present(term, "matchFields");

                if (!term_well_formed(term, exprs, fields)) {
                        rc = TSR_EPARSE;
                        break;
                }
                if (json_array_size(exprs) == 0 && json_array_size(fields) == 0)
                        continue; /* matches nothing; a pin must not make it match */
                if (!exprs) {
                        exprs = json_array();
                        if (!exprs || json_object_set_new(term, "matchExpressions", exprs)) {
                                rc = TSR_ENOMEM;
                                break;
                        }
                }
                rc = add_pins(exprs, reqs, n);
                if (rc)
                        break;
        }
        /* One set is all or nothing. */
        if (!rc &&
            !json_equal(json_object_get(work, "affinity"), json_object_get(spec, "affinity"))) {
                rc = json_object_set(spec, "affinity", json_object_get(work, "affinity"))
                         ? TSR_ENOMEM
                         : 0;
                *changed = rc == 0;
        }
        json_decref(work);
        return rc;
}
