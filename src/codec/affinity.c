/*
 * affinity.c - node selector evaluation and pin insertion over jansson PodSpecs.
 */
#include "codec/affinity.h"

#include "base/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static json_t *required_terms(json_t *spec)
{
        json_t *na = json_object_get(json_object_get(spec, "affinity"), "nodeAffinity");

        return json_object_get(
            json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution"),
            "nodeSelectorTerms");
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

static bool parse_int(const char *s, long long *out)
{
        char *end;

        if (!s || !*s)
                return false;
        errno = 0;
        *out = strtoll(s, &end, 10);
        return *end == '\0' && errno == 0;
}

static bool expression_holds(json_t *e, const char *actual)
{
        const char *op = json_string_value(json_object_get(e, "operator"));
        json_t *values = json_object_get(e, "values");
        long long have, want;

        if (!op)
                return false;
        if (!strcmp(op, "Exists"))
                return actual != NULL;
        if (!strcmp(op, "DoesNotExist"))
                return actual == NULL;
        if (!strcmp(op, "In"))
                return actual && in_values(values, actual);
        if (!strcmp(op, "NotIn"))
                return !actual || !in_values(values, actual);
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

                if (!key || strcmp(key, "metadata.name") || !expression_holds(e, node_name))
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

/* Ensures obj[key] is an object (creating it), or fails when it is something else. */
static json_t *child_object(json_t *obj, const char *key)
{
        json_t *c = json_object_get(obj, key);

        if (c)
                return json_is_object(c) ? c : NULL;
        c = json_object();
        if (!c || json_object_set_new(obj, key, c))
                return NULL;
        return c;
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
        work = json_deep_copy(spec);
        if (!work)
                return TSR_ENOMEM;
        required = child_object(child_object(child_object(work, "affinity"), "nodeAffinity"),
                                "requiredDuringSchedulingIgnoredDuringExecution");
        if (!required) {
                json_decref(work);
                return TSR_EPARSE;
        }
        terms = json_object_get(required, "nodeSelectorTerms");
        if (!terms) {
                /* No required affinity yet: one term holding only the pins. */
                json_t *exprs = json_array();

                terms = json_pack("[{s:o}]", "matchExpressions", exprs);
                for (size_t k = 0; terms && k < n && !rc; k++)
                        rc = json_array_append_new(exprs, requirement_json(&reqs[k])) ? TSR_ENOMEM
                                                                                      : 0;
                if (!terms || rc || json_object_set_new(required, "nodeSelectorTerms", terms)) {
                        json_decref(work);
                        return TSR_ENOMEM;
                }
        } else if (!json_is_array(terms)) {
                json_decref(work);
                return TSR_EPARSE;
        }
        json_array_foreach(terms, i, term)
        {
                json_t *exprs = json_object_get(term, "matchExpressions");
                bool empty = json_array_size(exprs) == 0 &&
                             json_array_size(json_object_get(term, "matchFields")) == 0;

                if (!json_is_object(term) || (exprs && !json_is_array(exprs))) {
                        rc = TSR_EPARSE;
                        break;
                }
                if (empty)
                        continue; /* matches nothing; a pin must not make it match */
                if (!exprs) {
                        exprs = json_array();
                        if (!exprs || json_object_set_new(term, "matchExpressions", exprs)) {
                                rc = TSR_ENOMEM;
                                break;
                        }
                }
                for (size_t k = 0; k < n && !rc; k++) {
                        json_t *e = requirement_json(&reqs[k]);

                        if (!e)
                                rc = TSR_ENOMEM;
                        else if (has_expression(exprs, e))
                                json_decref(e);
                        else if (json_array_append_new(exprs, e))
                                rc = TSR_ENOMEM;
                }
        }
        if (!rc && !json_equal(work, spec)) {
                json_object_update(spec, work);
                *changed = true;
        }
        json_decref(work);
        return rc;
}
