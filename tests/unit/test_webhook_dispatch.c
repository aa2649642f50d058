/*
 * test_webhook_dispatch.c - webhook/dispatch: from a request body to the response the API server
 * reads, over stub handlers so each path of the contract is seen on its own: an undecodable body
 * is HTTP 400 with a metav1.Status; a review of another kind is denied with 400 naming both kinds
 * and never reaches the handler; the deletion guard skips UPDATEs of an object being deleted (and
 * only UPDATEs, and only on a guarded route); a handler's TSR_EPARSE becomes a 400 denial and any
 * other error HTTP 500; the uid is echoed; a mutating verdict is answered with the JSON Patch from
 * the object to the patched copy, a validating one never. Last, the real route table: every path
 * is unique, starts with /mutate- or /validate- as its kind says, and is found by its path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "webhook/dispatch.h"
#include "webhook/routes.h"

#include "support/json_text.h"

#include <nettle/base64.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int calls;
static int stub_rc;

/* Allows, adding metadata.labels.seen=yes to a copy of the object. */
static int stub_handler(const struct tsr_webhook_lookup *lookup, const struct tsr_review *review,
                        struct tsr_verdict *verdict, struct tsr_diag *diag)
{
        json_t *labels;

        (void)lookup;
        calls++;
        if (stub_rc)
                return tsr_diag_set(diag, stub_rc, "the stub fails");
        tsr_verdict_allow(verdict);
        verdict->patched = json_deep_copy(review->object);
        labels = json_object_get(json_object_get(verdict->patched, "metadata"), "labels");
        json_object_set_new(labels, "seen", json_string("yes"));
        return 0;
}

/* Denies with a message whose last character was cut in half, as a full buffer cuts it. */
static int cut_handler(const struct tsr_webhook_lookup *lookup, const struct tsr_review *review,
                       struct tsr_verdict *verdict, struct tsr_diag *diag)
{
        (void)lookup;
        (void)review;
        (void)diag;
        calls++;
        tsr_verdict_deny(verdict, 403, "Forbidden", "type \"gr\xc3\xbc\xc3\"");
        tsr_verdict_warn(verdict, "\xff warned");
        return 0;
}

static const struct tsr_webhook_route cut = {"/c",  "c.example.com", "",          "v1", "Pod",
                                             false, false,           cut_handler, NULL};

static const struct tsr_webhook_route mutating = {"/m", "m.example.com", "",           "v1", "Pod",
                                                  true, false,           stub_handler, NULL};
static const struct tsr_webhook_route validating = {"/v",  "v.example.com", "",  "v1", "Pod", false,
                                                    false, stub_handler,    NULL};
static const struct tsr_webhook_route guarded = {"/g",       "g.example.com", "worker.gpustack.ai",
                                                 "v1alpha1", "Instance",      true,
                                                 true,       stub_handler,    NULL};

static const struct tsr_webhook_lookup no_lookup;

static int setup(void **state)
{
        (void)state;
        calls = 0;
        stub_rc = 0;
        return 0;
}

/* A review of kind group/version/kind with operation op and the given object JSON (or "null"). */
static char *review(const char *group, const char *version, const char *kind, const char *op,
                    const char *object)
{
        char *text = malloc(4096);
        int n;

        assert_non_null(text);
        n = snprintf(text, 4096,
                     "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                     "\"request\":{\"uid\":\"705ab4f5-6393-11e8-b7cc-42010a800002\","
                     "\"kind\":{\"group\":\"%s\",\"version\":\"%s\",\"kind\":\"%s\"},"
                     "\"resource\":{\"group\":\"%s\",\"version\":\"%s\",\"resource\":\"x\"},"
                     "\"name\":\"p\",\"namespace\":\"ns\",\"operation\":\"%s\","
                     "\"object\":%s,\"oldObject\":%s}}",
                     group, version, kind, group, version, op, object, object);

        assert_true(n > 0 && n < 4096);
        return text;
}

static const char *pod = "{\"metadata\":{\"name\":\"p\",\"labels\":{}}}";
static const char *deleting_pod =
    "{\"metadata\":{\"name\":\"p\",\"labels\":{},\"deletionTimestamp\":\"2026-12-02T00:00:00Z\"}}";

/* Dispatches text on route; returns the response document (json_decref). */
static json_t *run(const struct tsr_webhook_route *route, const char *text,
                   struct tsr_webhook_outcome *o)
{
        char *body = NULL;
        json_t *doc;

        assert_int_equal(tsr_webhook_dispatch(route, &no_lookup, text, strlen(text), &body, o), 0);
        assert_non_null(body);
        doc = json_fx_load(body);
        free(body);
        return doc;
}

static json_t *response(json_t *doc)
{
        assert_string_equal(json_string_value(json_object_get(doc, "apiVersion")),
                            "admission.k8s.io/v1");
        assert_string_equal(json_string_value(json_object_get(doc, "kind")), "AdmissionReview");
        return json_object_get(doc, "response");
}

static void test_undecodable_bodies_are_400_status(void **state)
{
        static const char *bodies[] = {
            "",
            "not json",
            "[]",
            "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\","
            "\"request\":{\"uid\":\"u\",\"operation\":\"CREATE\"}}",
            "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\"}",
            "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
            "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
            "\"request\":{\"operation\":\"CREATE\"}}",
            "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
            "\"request\":{\"uid\":\"u\",\"operation\":\"PATCH\"}}",
        };

        (void)state;
        for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
                struct tsr_webhook_outcome o;
                json_t *doc = run(&mutating, bodies[i], &o);

                assert_int_equal(o.http_status, 400);
                assert_false(o.decoded);
                assert_string_equal(json_string_value(json_object_get(doc, "kind")), "Status");
                assert_int_equal(json_integer_value(json_object_get(doc, "code")), 400);
                assert_string_equal(json_string_value(json_object_get(doc, "reason")),
                                    "BadRequest");
                assert_non_null(strstr(json_string_value(json_object_get(doc, "message")),
                                       "not an AdmissionReview: "));
                json_decref(doc);
        }
        assert_int_equal(calls, 0);
}

static void test_wrong_kind_is_denied_before_the_handler(void **state)
{
        struct tsr_webhook_outcome o;
        char *text = review("apps", "v1", "Deployment", "CREATE", pod);
        json_t *doc = run(&mutating, text, &o), *resp = response(doc);

        (void)state;
        assert_int_equal(calls, 0);
        assert_int_equal(o.http_status, 200);
        assert_false(o.allowed);
        assert_string_equal(o.rule, "wrong-kind");
        assert_false(json_is_true(json_object_get(resp, "allowed")));
        assert_string_equal(json_string_value(json_object_get(resp, "uid")),
                            "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(resp, "status"), "code")), 400);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(resp, "status"), "message")),
            "webhook m.example.com admits Pod core/v1, not Deployment apps/v1");
        assert_null(json_object_get(resp, "patch"));
        json_decref(doc);
        free(text);

        /* The version counts too: the registration's matchPolicy converts to the one named. */
        text = review("", "v2", "Pod", "CREATE", pod);
        doc = run(&mutating, text, &o);
        assert_false(o.allowed);
        assert_int_equal(calls, 0);
        json_decref(doc);
        free(text);
}

static void test_deletion_guard(void **state)
{
        struct tsr_webhook_outcome o;
        char *text;
        json_t *doc;

        (void)state;
        stub_rc = TSR_EIO; /* a call to the handler would show as HTTP 500 */
        text = review("worker.gpustack.ai", "v1alpha1", "Instance", "UPDATE", deleting_pod);
        doc = run(&guarded, text, &o);
        assert_int_equal(o.http_status, 200);
        assert_true(o.allowed);
        assert_false(o.patched);
        assert_int_equal(calls, 0);
        assert_true(json_is_true(json_object_get(response(doc), "allowed")));
        assert_null(json_object_get(response(doc), "patch"));
        json_decref(doc);
        free(text);

        /* A CREATE of such an object is not an update during teardown: the handler runs. */
        text = review("worker.gpustack.ai", "v1alpha1", "Instance", "CREATE", deleting_pod);
        doc = run(&guarded, text, &o);
        assert_int_equal(o.http_status, 500);
        assert_int_equal(calls, 1);
        json_decref(doc);
        free(text);

        /* An UPDATE without deletionTimestamp runs it too. */
        text = review("worker.gpustack.ai", "v1alpha1", "Instance", "UPDATE", pod);
        doc = run(&guarded, text, &o);
        assert_int_equal(calls, 2);
        json_decref(doc);
        free(text);

        /* An unguarded route runs its handler on an object being deleted. */
        stub_rc = 0;
        text = review("", "v1", "Pod", "UPDATE", deleting_pod);
        doc = run(&mutating, text, &o);
        assert_int_equal(calls, 3);
        assert_true(o.patched);
        json_decref(doc);
        free(text);
}

static void test_handler_errors(void **state)
{
        struct tsr_webhook_outcome o;
        char *text = review("", "v1", "Pod", "CREATE", pod);
        json_t *doc, *status;

        (void)state;
        stub_rc = TSR_EPARSE;
        doc = run(&mutating, text, &o);
        assert_int_equal(o.http_status, 200);
        assert_false(o.allowed);
        assert_string_equal(o.rule, "malformed-object");
        status = json_object_get(response(doc), "status");
        assert_int_equal(json_integer_value(json_object_get(status, "code")), 400);
        assert_string_equal(json_string_value(json_object_get(status, "message")),
                            "cannot read the Pod: the stub fails");
        json_decref(doc);

        stub_rc = TSR_EIO;
        doc = run(&mutating, text, &o);
        assert_int_equal(o.http_status, 500);
        assert_string_equal(json_string_value(json_object_get(doc, "reason")), "InternalError");
        assert_string_equal(json_string_value(json_object_get(doc, "message")), "the stub fails");
        json_decref(doc);
        free(text);
}

/* Decodes the base64 patch of a response into JSON. */
static json_t *patch_of(json_t *resp)
{
        const char *b64 = json_string_value(json_object_get(resp, "patch"));
        struct base64_decode_ctx ctx;
        uint8_t raw[4096];
        size_t n = sizeof(raw);
        char text[4097];

        assert_non_null(b64);
        base64_decode_init(&ctx);
        assert_true(base64_decode_update(&ctx, &n, raw, strlen(b64), b64));
        assert_true(base64_decode_final(&ctx));
        memcpy(text, raw, n);
        text[n] = '\0';
        return json_fx_load(text);
}

static void test_mutating_patch_and_validating_none(void **state)
{
        struct tsr_webhook_outcome o;
        char *text = review("", "v1", "Pod", "CREATE", pod);
        json_t *doc = run(&mutating, text, &o), *resp = response(doc);
        json_t *patch, *want;

        (void)state;
        assert_true(o.allowed);
        assert_true(o.patched);
        assert_string_equal(o.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_string_equal(o.operation, "CREATE");
        assert_string_equal(json_string_value(json_object_get(resp, "patchType")), "JSONPatch");
        patch = patch_of(resp);
        want =
            json_fx_load("[{\"op\":\"add\",\"path\":\"/metadata/labels/seen\",\"value\":\"yes\"}]");
        assert_true(json_equal(patch, want));
        json_decref(patch);
        json_decref(want);
        json_decref(doc);

        doc = run(&validating, text, &o);
        resp = response(doc);
        assert_true(o.allowed);
        assert_false(o.patched);
        assert_null(json_object_get(resp, "patch"));
        assert_null(json_object_get(resp, "patchType"));
        json_decref(doc);
        free(text);
}

/* Text that is not UTF-8 is answered, each stray byte as U+FFFD (Go's encoding/json does so). */
static void test_message_cut_inside_a_character(void **state)
{
        struct tsr_webhook_outcome o;
        char *text = review("", "v1", "Pod", "CREATE", pod);
        json_t *doc = run(&cut, text, &o), *resp = response(doc);

        (void)state;
        assert_int_equal(calls, 1);
        assert_int_equal(o.http_status, 200);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(resp, "status"), "message")),
            "type \"gr\xc3\xbc\xef\xbf\xbd\"");
        assert_string_equal(json_string_value(json_array_get(json_object_get(resp, "warnings"), 0)),
                            "\xef\xbf\xbd warned");
        json_decref(doc);
        free(text);
}

static void test_route_table(void **state)
{
        (void)state;
        assert_true(tsr_webhook_n_routes > 0);
        for (size_t i = 0; i < tsr_webhook_n_routes; i++) {
                const struct tsr_webhook_route *r = &tsr_webhook_routes[i];
                const char *prefix = r->mutating ? "/mutate-" : "/validate-";

                assert_int_equal(strncmp(r->path, prefix, strlen(prefix)), 0);
                assert_int_equal(strncmp(r->name, prefix + 1, strlen(prefix) - 2), 0);
                assert_ptr_equal(tsr_webhook_route_find(r->path), r);
                assert_non_null(r->handler);
                for (size_t j = 0; j < i; j++) {
                        assert_string_not_equal(r->path, tsr_webhook_routes[j].path);
                        assert_string_not_equal(r->name, tsr_webhook_routes[j].name);
                }
        }
        assert_null(tsr_webhook_route_find("/mutate"));
        assert_null(tsr_webhook_route_find("/mutate-gpustack-worker-core-v1-pod?timeout=10s"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_undecodable_bodies_are_400_status, setup),
            cmocka_unit_test_setup(test_wrong_kind_is_denied_before_the_handler, setup),
            cmocka_unit_test_setup(test_deletion_guard, setup),
            cmocka_unit_test_setup(test_handler_errors, setup),
            cmocka_unit_test_setup(test_mutating_patch_and_validating_none, setup),
            cmocka_unit_test_setup(test_message_cut_inside_a_character, setup),
            cmocka_unit_test_setup(test_route_table, setup),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
