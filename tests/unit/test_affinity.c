/*
 * test_affinity.c - codec/affinity: node constraints of a PodSpec, matched and pinned.
 *
 * tsr_affinity_matches: spec.nodeSelector (every pair equal), then the required node affinity:
 * terms ORed, a term's expressions ANDed, an empty term (no expressions, no fields) matching
 * nothing, the operators In, NotIn, Exists, DoesNotExist, Gt and Lt (integers in
 * strconv.ParseInt's syntax on both sides), requirements Kubernetes refuses to build making their
 * term match nothing, matchFields on metadata.name with In/NotIn and one value.
 *
 * tsr_affinity_require (spec/upstream-behavior.md §6): with no required node affinity, one term
 * holding only the pins; otherwise the pins ANDed into every non-empty term, empty terms left
 * alone (and still matching nothing afterwards), an identical (key, operator, values) expression
 * never added twice (not even when the pins repeat one), other parts of the spec untouched;
 * *changed true exactly when spec changed; a malformed affinity shape gives TSR_EPARSE with spec
 * byte-identical; an allocation-failure loop gives TSR_ENOMEM with spec byte-identical.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "codec/affinity.h"

#include "support/failing_alloc.h"
#include "support/json_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define SLICED "sliced-max-free-units.fit.gpustack.ai/nvidia-h100"
#define SHARED "shared-free-cards.fit.gpustack.ai/nvidia-h100"

/* ---- matching ----------------------------------------------------------------------------- */

static void expect_match(const char *spec_text, const char *node, const char *labels_text,
                         bool want)
{
        json_t *spec = json_fx_load(spec_text), *labels = json_fx_load(labels_text);

        if (tsr_affinity_matches(spec, node, labels) != want)
                fail_msg("%s on node %s %s: want %s", spec_text, node, labels_text,
                         want ? "a match" : "no match");
        json_decref(spec);
        json_decref(labels);
}

/* A spec whose required node affinity is one term of the one expression e. */
static void expect_expr(const char *e, const char *labels_text, bool want)
{
        char spec[1024];

        snprintf(
            spec, sizeof(spec),
            "{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
            "{\"nodeSelectorTerms\":[{\"matchExpressions\":[%s]}]}}}}",
            e);
        expect_match(spec, "node-1", labels_text, want);
}

static void expect_terms(const char *terms, const char *node, const char *labels_text, bool want)
{
        char spec[2048];

        snprintf(
            spec, sizeof(spec),
            "{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
            "{\"nodeSelectorTerms\":%s}}}}",
            terms);
        expect_match(spec, node, labels_text, want);
}

static void test_affinity__no_constraints(void **state)
{
        (void)state;
        expect_match("{}", "n", "{}", true);
        expect_match("{\"containers\":[]}", "n", "{\"a\":\"1\"}", true);
        expect_match("{\"nodeSelector\":{}}", "n", "{}", true);
        expect_match("{\"affinity\":{}}", "n", "{}", true);
        expect_match("{\"affinity\":{\"nodeAffinity\":{}}}", "n", "{}", true);
        expect_match("{\"affinity\":{\"podAntiAffinity\":{}}}", "n", "{}", true);
        /* Preferred terms never filter. */
        expect_match("{\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuring"
                     "Execution\":[{\"weight\":1,\"preference\":{\"matchExpressions\":[{\"key\":"
                     "\"a\",\"operator\":\"In\",\"values\":[\"x\"]}]}}]}}}",
                     "n", "{}", true);
        /* A null list of terms is no list (a nil pointer to Kubernetes). */
        expect_terms("null", "n", "{}", true);
}

static void test_affinity__node_selector(void **state)
{
        static const char *spec = "{\"nodeSelector\":{\"zone\":\"a\",\"gpu\":\"h100\"}}";

        (void)state;
        expect_match(spec, "n", "{\"zone\":\"a\",\"gpu\":\"h100\"}", true);
        expect_match(spec, "n", "{\"zone\":\"a\",\"gpu\":\"h100\",\"other\":\"x\"}", true);
        expect_match(spec, "n", "{\"zone\":\"a\"}", false);
        expect_match(spec, "n", "{\"zone\":\"b\",\"gpu\":\"h100\"}", false);
        expect_match(spec, "n", "{\"zone\":\"A\",\"gpu\":\"h100\"}", false);
        expect_match(spec, "n", "{}", false);
        expect_match("{\"nodeSelector\":{\"zone\":\"\"}}", "n", "{\"zone\":\"\"}", true);
        expect_match("{\"nodeSelector\":{\"zone\":\"\"}}", "n", "{}", false);
        expect_match("{\"nodeSelector\":{\"n\":1}}", "n", "{\"n\":\"1\"}", false);
        /* nodeSelector and the required affinity must both hold. */
        expect_match("{\"nodeSelector\":{\"zone\":\"a\"},\"affinity\":{\"nodeAffinity\":{"
                     "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
                     "[{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}]}]}}}}",
                     "n", "{\"zone\":\"a\"}", false);
        expect_match("{\"nodeSelector\":{\"zone\":\"a\"},\"affinity\":{\"nodeAffinity\":{"
                     "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
                     "[{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}]}]}}}}",
                     "n", "{\"zone\":\"b\",\"gpu\":\"x\"}", false);
        expect_match("{\"nodeSelector\":{\"zone\":\"a\"},\"affinity\":{\"nodeAffinity\":{"
                     "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
                     "[{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}]}]}}}}",
                     "n", "{\"zone\":\"a\",\"gpu\":\"x\"}", true);
}

static void test_affinity__set_operators(void **state)
{
        static const char *in = "{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}";
        static const char *notin =
            "{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"a\",\"b\"]}";
        static const char *exists = "{\"key\":\"zone\",\"operator\":\"Exists\"}";
        static const char *absent = "{\"key\":\"zone\",\"operator\":\"DoesNotExist\"}";

        (void)state;
        expect_expr(in, "{\"zone\":\"a\"}", true);
        expect_expr(in, "{\"zone\":\"b\"}", true);
        expect_expr(in, "{\"zone\":\"c\"}", false);
        expect_expr(in, "{\"zone\":\"\"}", false);
        expect_expr(in, "{}", false);
        expect_expr(in, "{\"Zone\":\"a\"}", false);
        expect_expr(notin, "{\"zone\":\"a\"}", false);
        expect_expr(notin, "{\"zone\":\"b\"}", false);
        expect_expr(notin, "{\"zone\":\"c\"}", true);
        expect_expr(notin, "{}", true); /* an absent label is not in any set */
        expect_expr(exists, "{\"zone\":\"\"}", true);
        expect_expr(exists, "{\"zone\":\"a\"}", true);
        expect_expr(exists, "{}", false);
        expect_expr(absent, "{}", true);
        expect_expr(absent, "{\"zone\":\"\"}", false);
        expect_expr(absent, "{\"other\":\"x\"}", true);
        /* Exists and DoesNotExist with an empty list of values are still well-formed. */
        expect_expr("{\"key\":\"zone\",\"operator\":\"Exists\",\"values\":[]}", "{\"zone\":\"a\"}",
                    true);
}

static void test_affinity__integer_operators(void **state)
{
        static const char *gt = "{\"key\":\"n\",\"operator\":\"Gt\",\"values\":[\"7\"]}";
        static const char *lt = "{\"key\":\"n\",\"operator\":\"Lt\",\"values\":[\"0\"]}";

        (void)state;
        expect_expr(gt, "{\"n\":\"8\"}", true);
        expect_expr(gt, "{\"n\":\"7\"}", false);
        expect_expr(gt, "{\"n\":\"6\"}", false);
        expect_expr(gt, "{\"n\":\"10\"}", true); /* numbers, not strings: "10" > "7" */
        expect_expr(gt, "{\"n\":\"007\"}", false);
        expect_expr(gt, "{\"n\":\"008\"}", true);
        expect_expr(gt, "{\"n\":\"+8\"}", true);
        expect_expr(gt, "{\"n\":\"9223372036854775807\"}", true);
        expect_expr(gt, "{}", false);
        /* Not integers in strconv.ParseInt's syntax: no match either way. */
        expect_expr(gt, "{\"n\":\"\"}", false);
        expect_expr(gt, "{\"n\":\"abc\"}", false);
        expect_expr(gt, "{\"n\":\"8.5\"}", false);
        expect_expr(gt, "{\"n\":\"8k\"}", false);
        expect_expr(gt, "{\"n\":\" 8\"}", false);
        expect_expr(gt, "{\"n\":\"8 \"}", false);
        expect_expr(gt, "{\"n\":\"0x10\"}", false);
        expect_expr(gt, "{\"n\":\"+\"}", false);
        expect_expr(gt, "{\"n\":\"--8\"}", false);
        expect_expr(gt, "{\"n\":\"9223372036854775808\"}", false); /* overflows int64 */
        expect_expr(lt, "{\"n\":\"-1\"}", true);
        expect_expr(lt, "{\"n\":\"-9223372036854775808\"}", true);
        expect_expr(lt, "{\"n\":\"0\"}", false);
        expect_expr(lt, "{\"n\":\"-0\"}", false);
        expect_expr(lt, "{\"n\":\"1\"}", false);
        expect_expr("{\"key\":\"n\",\"operator\":\"Lt\",\"values\":[\"-5\"]}", "{\"n\":\"-6\"}",
                    true);
        /* The pins' shape: free units Gt need-1. */
        expect_expr("{\"key\":\"" SLICED "\",\"operator\":\"Gt\",\"values\":[\"799999\"]}",
                    "{\"" SLICED "\":\"800000\"}", true);
        expect_expr("{\"key\":\"" SLICED "\",\"operator\":\"Gt\",\"values\":[\"799999\"]}",
                    "{\"" SLICED "\":\"640000\"}", false);
        /* The value must be exactly one integer. */
        expect_expr("{\"key\":\"n\",\"operator\":\"Gt\",\"values\":[\"1\",\"2\"]}", "{\"n\":\"8\"}",
                    false);
        expect_expr("{\"key\":\"n\",\"operator\":\"Gt\",\"values\":[]}", "{\"n\":\"8\"}", false);
        expect_expr("{\"key\":\"n\",\"operator\":\"Gt\"}", "{\"n\":\"8\"}", false);
        expect_expr("{\"key\":\"n\",\"operator\":\"Gt\",\"values\":[\"x\"]}", "{\"n\":\"8\"}",
                    false);
        expect_expr("{\"key\":\"n\",\"operator\":\"Gt\",\"values\":[7]}", "{\"n\":\"8\"}", false);
        expect_expr("{\"key\":\"n\",\"operator\":\"Lt\",\"values\":[\" 9\"]}", "{\"n\":\"8\"}",
                    false);
}

/* Requirements labels.NewRequirement refuses make the term match nothing. */
static void test_affinity__invalid_requirements(void **state)
{
        (void)state;
        expect_expr("{\"key\":\"zone\",\"operator\":\"In\",\"values\":[]}", "{\"zone\":\"a\"}",
                    false);
        expect_expr("{\"key\":\"zone\",\"operator\":\"In\"}", "{\"zone\":\"a\"}", false);
        expect_expr("{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[]}", "{\"zone\":\"a\"}",
                    false);
        expect_expr("{\"key\":\"zone\",\"operator\":\"NotIn\"}", "{}", false);
        expect_expr("{\"key\":\"zone\",\"operator\":\"Exists\",\"values\":[\"a\"]}",
                    "{\"zone\":\"a\"}", false);
        expect_expr("{\"key\":\"zone\",\"operator\":\"DoesNotExist\",\"values\":[\"a\"]}", "{}",
                    false);
        expect_expr("{\"key\":\"zone\",\"operator\":\"in\",\"values\":[\"a\"]}", "{\"zone\":\"a\"}",
                    false);
        expect_expr("{\"key\":\"zone\",\"operator\":\"Equals\",\"values\":[\"a\"]}",
                    "{\"zone\":\"a\"}", false);
        expect_expr("{\"key\":\"zone\",\"values\":[\"a\"]}", "{\"zone\":\"a\"}", false);
        expect_expr("{\"operator\":\"Exists\"}", "{\"zone\":\"a\"}", false);
        /* Only its own term: another term can still match. */
        expect_terms("[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[]}"
                     "]},{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"Exists\"}]}]",
                     "n", "{\"zone\":\"a\"}", true);
}

static void test_affinity__terms_or_expressions_and(void **state)
{
        static const char *two_terms =
            "[{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\"}]},"
            "{\"matchExpressions\":[{\"key\":\"b\",\"operator\":\"In\",\"values\":[\"1\"]}]}]";
        static const char *two_exprs =
            "[{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\"},"
            "{\"key\":\"b\",\"operator\":\"In\",\"values\":[\"1\"]}]}]";

        (void)state;
        expect_terms(two_terms, "n", "{\"a\":\"x\"}", true);
        expect_terms(two_terms, "n", "{\"b\":\"1\"}", true);
        expect_terms(two_terms, "n", "{\"a\":\"x\",\"b\":\"1\"}", true);
        expect_terms(two_terms, "n", "{\"b\":\"2\"}", false);
        expect_terms(two_terms, "n", "{}", false);
        expect_terms(two_exprs, "n", "{\"a\":\"x\",\"b\":\"1\"}", true);
        expect_terms(two_exprs, "n", "{\"a\":\"x\"}", false);
        expect_terms(two_exprs, "n", "{\"b\":\"1\"}", false);
        expect_terms(two_exprs, "n", "{\"a\":\"x\",\"b\":\"2\"}", false);
}

/* A term with neither expressions nor fields matches nothing; no terms match nothing. */
static void test_affinity__empty_terms(void **state)
{
        static const char *exists_a = "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":"
                                      "\"Exists\"}]}";
        char terms[512];

        (void)state;
        expect_terms("[]", "n", "{}", false);
        expect_terms("[{}]", "n", "{}", false);
        expect_terms("[{}]", "n", "{\"a\":\"x\"}", false);
        expect_terms("[{\"matchExpressions\":[]}]", "n", "{\"a\":\"x\"}", false);
        expect_terms("[{\"matchExpressions\":[],\"matchFields\":[]}]", "n", "{}", false);
        expect_terms("[{\"matchExpressions\":null}]", "n", "{}", false);
        snprintf(terms, sizeof(terms), "[{},%s,{\"matchFields\":[]}]", exists_a);
        expect_terms(terms, "n", "{\"a\":\"x\"}", true);
        expect_terms(terms, "n", "{}", false);
}

static void test_affinity__match_fields(void **state)
{
        static const char *in = "[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                                "\"values\":[\"node-1\"]}]}]";
        static const char *notin = "[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":"
                                   "\"NotIn\",\"values\":[\"node-1\"]}]}]";
        static const char *both =
            "[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":"
            "[\"node-1\"]}],\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\"}]}]";

        (void)state;
        expect_terms(in, "node-1", "{}", true);
        expect_terms(in, "node-2", "{}", false);
        expect_terms(in, "node-1", "{\"metadata.name\":\"node-2\"}", true); /* not a label */
        expect_terms(notin, "node-1", "{}", false);
        expect_terms(notin, "node-2", "{}", true);
        expect_terms(both, "node-1", "{\"a\":\"x\"}", true);
        expect_terms(both, "node-1", "{}", false);
        expect_terms(both, "node-2", "{\"a\":\"x\"}", false);
        /* Labels never satisfy matchFields, and a field selector is not a label selector. */
        expect_terms("[{\"matchFields\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"x\"]}]}]",
                     "node-1", "{\"a\":\"x\"}", false);
        expect_terms("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"Exists\"}]}]",
                     "node-1", "{}", false);
        expect_terms("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                     "\"values\":[\"node-1\",\"node-2\"]}]}]",
                     "node-1", "{}", false);
        expect_terms("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                     "\"values\":[]}]}]",
                     "node-1", "{}", false);
        expect_terms("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"Gt\","
                     "\"values\":[\"1\"]}]}]",
                     "1000", "{}", false);
        /* ORed with a label term. */
        expect_terms("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":"
                     "[\"node-1\"]}]},{\"matchExpressions\":[{\"key\":\"a\",\"operator\":"
                     "\"Exists\"}]}]",
                     "node-2", "{\"a\":\"x\"}", true);
}

/* ---- pinning ------------------------------------------------------------------------------ */

static struct tsr_node_requirement req(const char *key, long long value)
{
        struct tsr_node_requirement r;

        memset(&r, 0, sizeof(r));
        snprintf(r.key, sizeof(r.key), "%s", key);
        snprintf(r.op, sizeof(r.op), "Gt");
        snprintf(r.value, sizeof(r.value), "%lld", value);
        return r;
}

/* Pins spec_text with reqs and wants want_text (NULL: unchanged) and want_changed. */
static void expect_require(const char *spec_text, const struct tsr_node_requirement *reqs, size_t n,
                           const char *want_text)
{
        json_t *spec = json_fx_load(spec_text),
               *want = json_fx_load(want_text ? want_text : spec_text);
        bool changed = !want_text;
        int rc = tsr_affinity_require(spec, reqs, n, &changed);

        if (rc != 0)
                fail_msg("pinning %s: %s", spec_text, tsr_err_name(rc));
        if (!json_equal(spec, want)) {
                char *got = json_fx_dump(spec);

                fail_msg("pinning %s gave\n  %s\nwant\n  %s", spec_text, got,
                         want_text ? want_text : spec_text);
        }
        if (changed != (want_text != NULL))
                fail_msg("pinning %s: changed %d, want %d", spec_text, changed, want_text != NULL);
        /* Pinning is idempotent. */
        changed = true;
        assert_int_equal(tsr_affinity_require(spec, reqs, n, &changed), 0);
        assert_false(changed);
        assert_true(json_equal(spec, want));
        json_decref(spec);
        json_decref(want);
}

#define REQUIRED(terms)                                                                            \
        "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"     \
        "\"nodeSelectorTerms\":" terms "}}}"
#define PIN_SLICED "{\"key\":\"" SLICED "\",\"operator\":\"Gt\",\"values\":[\"799999\"]}"
#define PIN_SHARED "{\"key\":\"" SHARED "\",\"operator\":\"Gt\",\"values\":[\"1\"]}"
#define ZONE_IN    "{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\"]}"

static void test_affinity__require_creates_one_term(void **state)
{
        struct tsr_node_requirement pins[] = {req(SLICED, 799999), req(SHARED, 1)};

        (void)state;
        expect_require("{\"containers\":[{\"name\":\"c\"}]}", pins, 1,
                       "{\"containers\":[{\"name\":\"c\"}]," REQUIRED(
                           "[{\"matchExpressions\":[" PIN_SLICED "]}]") "}");
        expect_require(
            "{}", pins, 2,
            "{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "," PIN_SHARED "]}]") "}");
        /* Other affinities and the nodeSelector are kept; preferred terms are not touched. */
        expect_require(
            "{\"nodeSelector\":{\"zone\":\"a\"},\"affinity\":{\"podAntiAffinity\":{\"x\":1}}}",
            pins, 1,
            "{\"nodeSelector\":{\"zone\":\"a\"},\"affinity\":{\"podAntiAffinity\":{\"x\":1},"
            "\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
            "\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_SLICED "]}]}}}}");
        expect_require(
            "{\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":"
            "[{\"weight\":1,\"preference\":{}}]}}}",
            pins, 1,
            "{\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":"
            "[{\"weight\":1,\"preference\":{}}],\"requiredDuringSchedulingIgnoredDuringExecution\":"
            "{\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_SLICED "]}]}}}}");
        /* A required selector without terms, or nulls, read as absent. */
        expect_require(
            "{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
            "{}}}}",
            pins, 1, "{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "]}]") "}");
        expect_require("{\"affinity\":null}", pins, 1,
                       "{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "]}]") "}");
        expect_require("{\"affinity\":{\"nodeAffinity\":null}}", pins, 1,
                       "{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "]}]") "}");
        expect_require(
            "{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
            "null}}}",
            pins, 1, "{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "]}]") "}");
        expect_require("{" REQUIRED("null") "}", pins, 1,
                       "{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "]}]") "}");
        /* The same pin twice is written once. */
        {
                struct tsr_node_requirement twice[] = {req(SHARED, 1), req(SHARED, 1)};

                expect_require("{}", twice, 2,
                               "{" REQUIRED("[{\"matchExpressions\":[" PIN_SHARED "]}]") "}");
        }
}

static void test_affinity__require_ands_into_every_term(void **state)
{
        struct tsr_node_requirement pins[] = {req(SLICED, 799999), req(SHARED, 1)};

        (void)state;
        expect_require("{" REQUIRED("[{\"matchExpressions\":[" ZONE_IN "]}]") "}", pins, 1,
                       "{" REQUIRED("[{\"matchExpressions\":[" ZONE_IN "," PIN_SLICED "]}]") "}");
        expect_require(
            "{" REQUIRED("[{\"matchExpressions\":[" ZONE_IN "]},"
                         "{\"matchExpressions\":[{\"key\":\"b\",\"operator\":\"Exists\"}]}]") "}",
            pins, 2,
            "{" REQUIRED("[{\"matchExpressions\":[" ZONE_IN "," PIN_SLICED "," PIN_SHARED "]},"
                         "{\"matchExpressions\":[{\"key\":\"b\",\"operator\":\"Exists\"},"
                         "" PIN_SLICED "," PIN_SHARED "]}]") "}");
        /* A term with only fields gains expressions; its fields stay. */
        expect_require(
            "{" REQUIRED("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                         "\"values\":[\"n1\"]}]}]") "}",
            pins, 1,
            "{" REQUIRED("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                         "\"values\":[\"n1\"]}],\"matchExpressions\":[" PIN_SLICED "]}]") "}");
        expect_require(
            "{" REQUIRED("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                         "\"values\":[\"n1\"]}],\"matchExpressions\":null}]") "}",
            pins, 1,
            "{" REQUIRED("[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                         "\"values\":[\"n1\"]}],\"matchExpressions\":[" PIN_SLICED "]}]") "}");
}

static void test_affinity__require_skips_empty_terms(void **state)
{
        struct tsr_node_requirement pins[] = {req(SLICED, 799999)};
        static const char *labels_pinned = "{\"" SLICED "\":\"1600000\"}";
        json_t *spec, *labels;
        bool changed;

        (void)state;
        /* Only empty terms: nothing to AND into, nothing changes. */
        expect_require("{" REQUIRED("[{}]") "}", pins, 1, NULL);
        expect_require("{" REQUIRED("[{},{\"matchExpressions\":[]},{\"matchFields\":[]}]") "}",
                       pins, 1, NULL);
        expect_require("{" REQUIRED("[]") "}", pins, 1, NULL);
        /* Empty terms beside a real one: only the real one is pinned. */
        expect_require("{" REQUIRED("[{},{\"matchExpressions\":[" ZONE_IN "]},"
                                    "{\"matchExpressions\":[]}]") "}",
                       pins, 1,
                       "{" REQUIRED("[{},{\"matchExpressions\":[" ZONE_IN "," PIN_SLICED "]},"
                                    "{\"matchExpressions\":[]}]") "}");

        /* After pinning, an empty term still matches nothing, even on a node the pins allow. */
        spec = json_fx_load("{" REQUIRED("[{},{\"matchExpressions\":[" ZONE_IN "]}]") "}");
        labels = json_fx_load(labels_pinned);
        assert_int_equal(tsr_affinity_require(spec, pins, 1, &changed), 0);
        assert_true(changed);
        assert_false(tsr_affinity_matches(spec, "n", labels));
        json_object_set_new(labels, "zone", json_string("a"));
        assert_true(tsr_affinity_matches(spec, "n", labels));
        json_object_set_new(labels, SLICED, json_string("640000"));
        assert_false(tsr_affinity_matches(spec, "n", labels));
        json_decref(spec);
        json_decref(labels);
}

static void test_affinity__require_never_duplicates(void **state)
{
        struct tsr_node_requirement pins[] = {req(SLICED, 799999), req(SHARED, 1)};
        struct tsr_node_requirement other_value[] = {req(SLICED, 1599999)};

        (void)state;
        /* Already there (as the pin, identical key, operator and values): unchanged. */
        expect_require("{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "]}]") "}", pins, 1,
                       NULL);
        expect_require("{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "," ZONE_IN "]}]") "}",
                       pins, 1, NULL);
        /* One of two there: only the other is added. */
        expect_require("{" REQUIRED("[{\"matchExpressions\":[" PIN_SHARED "]},"
                                    "{\"matchExpressions\":[" ZONE_IN "]}]") "}",
                       pins, 2,
                       "{" REQUIRED("[{\"matchExpressions\":[" PIN_SHARED "," PIN_SLICED "]},"
                                    "{\"matchExpressions\":[" ZONE_IN "," PIN_SLICED "," PIN_SHARED
                                    "]}]") "}");
        /* The same key with another value, or another operator, is another expression. */
        expect_require("{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED "]}]") "}", other_value,
                       1,
                       "{" REQUIRED("[{\"matchExpressions\":[" PIN_SLICED ",{\"key\":\"" SLICED
                                    "\",\"operator\":\"Gt\",\"values\":[\"1599999\"]}]}]") "}");
        expect_require(
            "{" REQUIRED("[{\"matchExpressions\":[{\"key\":\"" SLICED "\",\"operator\":\"Exists\"}"
                         "]}]") "}",
            pins, 1,
            "{" REQUIRED("[{\"matchExpressions\":[{\"key\":\"" SLICED "\",\"operator\":\"Exists\"},"
                         "" PIN_SLICED "]}]") "}");
}

static void test_affinity__require_nothing_to_pin(void **state)
{
        json_t *spec = json_fx_load("[1]");
        bool changed = true;

        (void)state;
        expect_require("{}", NULL, 0, NULL);
        expect_require("{" REQUIRED("[{}]") "}", NULL, 0, NULL);
        /* With no pins nothing is read, so not even a malformed spec is refused. */
        assert_int_equal(tsr_affinity_require(spec, NULL, 0, &changed), 0);
        assert_false(changed);
        json_decref(spec);
}

static void test_affinity__require_malformed(void **state)
{
        static const char *specs[] = {
            "[]",
            "\"spec\"",
            "null",
            "{\"affinity\":\"x\"}",
            "{\"affinity\":[]}",
            "{\"affinity\":{\"nodeAffinity\":[]}}",
            "{\"affinity\":{\"nodeAffinity\":true}}",
            "{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
            "1}}}",
            "{" REQUIRED("{}") "}",
            "{" REQUIRED("\"terms\"") "}",
            "{" REQUIRED("[\"term\"]") "}",
            "{" REQUIRED("[null]") "}",
            "{" REQUIRED("[{\"matchExpressions\":[" ZONE_IN "]},[]]") "}",
            "{" REQUIRED("[{\"matchExpressions\":{}}]") "}",
            "{" REQUIRED("[{\"matchExpressions\":\"zone\"}]") "}",
            "{" REQUIRED("[{\"matchExpressions\":[" ZONE_IN ",5]}]") "}",
            "{" REQUIRED("[{\"matchExpressions\":[null]}]") "}",
            "{" REQUIRED("[{\"matchFields\":\"x\"}]") "}",
            "{" REQUIRED("[{\"matchFields\":[\"x\"]}]") "}",
            "{" REQUIRED("[{\"matchExpressions\":[],\"matchFields\":{}}]") "}",
        };
        struct tsr_node_requirement pins[] = {req(SLICED, 799999)};

        (void)state;
        for (size_t i = 0; i < N_ELEMS(specs); i++) {
                json_t *spec = json_fx_load(specs[i]), *saved = json_deep_copy(spec);
                char *before = json_fx_dump(spec), *after;
                bool changed = true;
                int rc = tsr_affinity_require(spec, pins, 1, &changed);

                if (rc != TSR_EPARSE)
                        fail_msg("pinning %s: %s, want TSR_EPARSE", specs[i], tsr_err_name(rc));
                assert_false(changed);
                assert_true(json_equal(spec, saved));
                after = json_fx_dump(spec);
                assert_string_equal(before, after);
                free(before);
                free(after);
                json_decref(spec);
                json_decref(saved);
        }
}

/* ---- allocation failure ------------------------------------------------------------------- */

static void test_affinity__require_allocation_failure(void **state)
{
        static const char *specs[] = {
            "{\"containers\":[{\"name\":\"c\"}]}",
            "{\"nodeSelector\":{\"a\":\"b\"}," REQUIRED("[{},{\"matchExpressions\":[" ZONE_IN "]},"
                                                        "{\"matchFields\":[{\"key\":\"metadata."
                                                        "name\",\"operator\":\"In\",\"values\":["
                                                        "\"n\"]}]}]") "}",
        };
        struct tsr_node_requirement pins[] = {req(SLICED, 799999), req(SHARED, 1)};

        (void)state;
        for (size_t s = 0; s < N_ELEMS(specs); s++) {
                bool done = false;

                for (long k = 0; k < 10000 && !done; k++) {
                        json_t *spec = json_fx_load(specs[s]), *saved = json_deep_copy(spec);
                        char *before = json_fx_dump(spec), *after;
                        bool changed = true;
                        int rc;

                        json_set_alloc_funcs(failing_malloc, free);
                        failing_alloc_budget(k);
                        rc = tsr_affinity_require(spec, pins, 2, &changed);
                        failing_alloc_budget(-1);
                        json_set_alloc_funcs(malloc, free);
                        after = json_fx_dump(spec);
                        if (rc == 0) {
                                done = true;
                                assert_true(changed);
                                assert_false(json_equal(spec, saved));
                        } else {
                                assert_int_equal(rc, TSR_ENOMEM);
                                assert_false(changed);
                                assert_true(json_equal(spec, saved));
                                assert_string_equal(before, after);
                        }
                        free(before);
                        free(after);
                        json_decref(spec);
                        json_decref(saved);
                }
                assert_true(done);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_affinity__no_constraints),
            cmocka_unit_test(test_affinity__node_selector),
            cmocka_unit_test(test_affinity__set_operators),
            cmocka_unit_test(test_affinity__integer_operators),
            cmocka_unit_test(test_affinity__invalid_requirements),
            cmocka_unit_test(test_affinity__terms_or_expressions_and),
            cmocka_unit_test(test_affinity__empty_terms),
            cmocka_unit_test(test_affinity__match_fields),
            cmocka_unit_test(test_affinity__require_creates_one_term),
            cmocka_unit_test(test_affinity__require_ands_into_every_term),
            cmocka_unit_test(test_affinity__require_skips_empty_terms),
            cmocka_unit_test(test_affinity__require_never_duplicates),
            cmocka_unit_test(test_affinity__require_nothing_to_pin),
            cmocka_unit_test(test_affinity__require_malformed),
            cmocka_unit_test(test_affinity__require_allocation_failure),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
