/*
 * test_kube_watch_stream.c - kube/watch_stream: a watch body cut into events with no I/O.
 *
 * Decoding one event: every type, the resourceVersion / name / namespace lifted out, an ERROR's
 * Status code, reason and message (the 410 "too old resource version" of
 * spec/kubernetes-contracts.md §4.3), a BOOKMARK with only metadata.resourceVersion; and each
 * malformed shape refused with a message (not JSON, not an object, no type, unknown type, object
 * missing or not an object).
 *
 * The stream: the API server's newline-terminated events split at every byte position (and fed
 * byte by byte) give the same events as one feed; events with no separator at all, or with CRLF
 * and blanks between; braces, brackets, quotes and backslashes inside strings; bytes outside an
 * event refused with their offset; finish inside an event refused; the event-size ceiling
 * (TSR_ETOOBIG); the nesting ceiling; a callback's non-zero return stopping the feed. Last, a
 * randomized round trip: thousands of random events (random nesting, hostile strings) serialized,
 * joined by random whitespace and fed in random chunk sizes come out equal (json_equal), in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "kube/watch_stream.h"

#include "support/json_text.h"
#include "support/rng.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- one event ---------------------------------------------------------------------------- */

static void decode_ok(const char *text, struct tsr_kube_event *ev, json_t **root)
{
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_kube_event_decode(text, strlen(text), root, ev, &diag);
        if (rc)
                fail_msg("%s: %s (%s)", text, tsr_err_name(rc), diag.msg);
}

static void test_decode_types(void **state)
{
        static const char *const types[] = {"ADDED", "MODIFIED", "DELETED"};
        struct tsr_kube_event ev;
        json_t *root;
        char text[256];

        (void)state;
        for (int t = 0; t < 3; t++) {
                snprintf(text, sizeof(text),
                         "{\"type\":\"%s\",\"object\":{\"kind\":\"LocalQueue\",\"metadata\":"
                         "{\"name\":\"lq\",\"namespace\":\"ns\",\"resourceVersion\":\"12\"}}}",
                         types[t]);
                decode_ok(text, &ev, &root);
                assert_int_equal(ev.type, (enum tsr_kube_event_type)t);
                assert_string_equal(tsr_kube_event_type_name(ev.type), types[t]);
                assert_string_equal(ev.resource_version, "12");
                assert_string_equal(ev.name, "lq");
                assert_string_equal(ev.ns, "ns");
                assert_int_equal(ev.code, 0);
                assert_ptr_equal(ev.object, json_object_get(root, "object"));
                json_decref(root);
        }

        decode_ok("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"InstanceType\",\"apiVersion\":"
                  "\"worker.gpustack.ai/v1alpha1\",\"metadata\":{\"resourceVersion\":\"99\"}}}",
                  &ev, &root);
        assert_int_equal(ev.type, TSR_KUBE_BOOKMARK);
        assert_string_equal(ev.resource_version, "99");
        assert_string_equal(ev.name, "");
        assert_string_equal(ev.ns, "");
        json_decref(root);

        decode_ok("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                  "\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource "
                  "version: 5 (9)\",\"reason\":\"Expired\",\"code\":410}}",
                  &ev, &root);
        assert_int_equal(ev.type, TSR_KUBE_ERROR);
        assert_int_equal(ev.code, 410);
        assert_string_equal(ev.reason, "Expired");
        assert_string_equal(ev.message, "too old resource version: 5 (9)");
        assert_string_equal(ev.resource_version, "");
        json_decref(root);

        /* An ERROR whose Status has no usable code. */
        decode_ok("{\"type\":\"ERROR\",\"object\":{\"code\":\"410\"}}", &ev, &root);
        assert_int_equal(ev.code, 0);
        assert_string_equal(ev.reason, "");
        json_decref(root);
        assert_string_equal(tsr_kube_event_type_name((enum tsr_kube_event_type)99), "?");
}

static void test_decode_refusals(void **state)
{
        static const struct {
                const char *text, *msg;
        } bad[] = {
            {"{\"type\":", "watch event:"},
            {"[1,2]", "not a JSON object"},
            {"{\"object\":{}}", "no \"type\" string"},
            {"{\"type\":7,\"object\":{}}", "no \"type\" string"},
            {"{\"type\":\"CHANGED\",\"object\":{}}", "unknown type \"CHANGED\""},
            {"{\"type\":\"ADDED\"}", "ADDED without an \"object\" object"},
            {"{\"type\":\"DELETED\",\"object\":\"x\"}", "DELETED without an \"object\" object"},
        };
        struct tsr_kube_event ev, untouched;
        json_t *root = (json_t *)1;

        (void)state;
        memset(&untouched, 0x5a, sizeof(untouched));
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct tsr_diag diag;
                int rc;

                ev = untouched;
                tsr_diag_clear(&diag);
                rc = tsr_kube_event_decode(bad[i].text, strlen(bad[i].text), &root, &ev, &diag);
                assert_int_equal(rc, TSR_EPARSE);
                assert_non_null(strstr(diag.msg, bad[i].msg));
                assert_ptr_equal(root, (json_t *)1);
                assert_memory_equal(&ev, &untouched, sizeof(ev));
        }
}

/* ---- the stream --------------------------------------------------------------------------- */

struct got {
        json_t *events; /* array of the decoded roots' {"type","object"} */
        int stop_at;    /* return 7 when this many events have come, 0: never */
};

static int keep(void *ctx, const struct tsr_kube_event *ev)
{
        struct got *g = ctx;
        json_t *e = json_pack("{s:s, s:O}", "type", tsr_kube_event_type_name(ev->type), "object",
                              ev->object);

        assert_non_null(e);
        assert_int_equal(json_array_append_new(g->events, e), 0);
        return g->stop_at && (int)json_array_size(g->events) == g->stop_at ? 7 : 0;
}

/* Feeds text in pieces of the sizes in cuts (0-terminated; the rest in one piece). */
static json_t *feed_cut(const char *text, size_t len, const size_t *cuts, int *rc_out,
                        struct tsr_diag *diag)
{
        struct tsr_kube_watch_stream s;
        struct got g = {json_array(), 0};
        size_t off = 0;
        int rc = 0;

        tsr_kube_watch_stream_init(&s, 0);
        for (; cuts && *cuts && !rc && off < len; cuts++) {
                size_t n = *cuts < len - off ? *cuts : len - off;

                rc = tsr_kube_watch_stream_feed(&s, text + off, n, keep, &g, diag);
                off += n;
        }
        if (!rc && off < len)
                rc = tsr_kube_watch_stream_feed(&s, text + off, len - off, keep, &g, diag);
        if (!rc)
                rc = tsr_kube_watch_stream_finish(&s, diag);
        tsr_kube_watch_stream_release(&s);
        *rc_out = rc;
        return g.events;
}

static const char api_server_body[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"InstanceType\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"2\",\"labels\":{\"x\":\"{[}]\\\"\\\\\"}}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"InstanceType\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"3\"},\"spec\":{\"list\":[[1],[2,{\"k\":\"}\"}]]}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"InstanceType\",\"metadata\":"
    "{\"resourceVersion\":\"5\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"InstanceType\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"6\",\"annotations\":{\"u\":\"\\u00e9\\u007b\"}}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";

static void test_every_split(void **state)
{
        size_t len = strlen(api_server_body);
        json_t *whole, *parts;
        int rc;

        (void)state;
        whole = feed_cut(api_server_body, len, NULL, &rc, NULL);
        assert_int_equal(rc, 0);
        assert_int_equal(json_array_size(whole), 5);
        assert_string_equal(json_string_value(json_object_get(json_array_get(whole, 3), "type")),
                            "DELETED");
        assert_string_equal(
            json_string_value(json_object_get(
                json_object_get(json_object_get(json_object_get(json_array_get(whole, 0), "object"),
                                                "metadata"),
                                "labels"),
                "x")),
            "{[}]\"\\");

        for (size_t at = 1; at < len; at++) {
                size_t cuts[] = {at, 0};

                parts = feed_cut(api_server_body, len, cuts, &rc, NULL);
                assert_int_equal(rc, 0);
                if (!json_equal(parts, whole))
                        fail_msg("split at byte %zu gives other events", at);
                json_decref(parts);
        }
        {
                size_t ones[sizeof(api_server_body)];

                for (size_t i = 0; i < len; i++)
                        ones[i] = 1;
                ones[len] = 0;
                parts = feed_cut(api_server_body, len, ones, &rc, NULL);
                assert_int_equal(rc, 0);
                assert_true(json_equal(parts, whole));
                json_decref(parts);
        }
        json_decref(whole);
}

static void test_separators(void **state)
{
        const char *glued = "{\"type\":\"ADDED\",\"object\":{}}{\"type\":\"DELETED\",\"object\":{}}"
                            "\r\n \t\r\n{\"type\":\"BOOKMARK\",\"object\":{}}\n\n";
        json_t *events;
        int rc;

        (void)state;
        events = feed_cut(glued, strlen(glued), NULL, &rc, NULL);
        assert_int_equal(rc, 0);
        assert_int_equal(json_array_size(events), 3);
        json_decref(events);

        events = feed_cut(" \n\r\n", 4, NULL, &rc, NULL);
        assert_int_equal(rc, 0);
        assert_int_equal(json_array_size(events), 0);
        json_decref(events);
}

#define TEXT(s) (s), strlen(s)

static void test_refusals(void **state)
{
        struct tsr_kube_watch_stream s;
        struct got g = {NULL, 0};
        struct tsr_diag diag;
        json_t *events;
        char deep[2048];
        size_t n = 0;
        int rc;

        (void)state;
        tsr_diag_clear(&diag);
        events = feed_cut(TEXT("{\"type\":\"ADDED\",\"object\":{}}\nxyz"), NULL, &rc, &diag);
        assert_int_equal(rc, TSR_EPARSE);
        assert_non_null(strstr(diag.msg, "byte 0x78 at offset 29 is outside an event"));
        assert_int_equal(json_array_size(events), 1);
        json_decref(events);

        tsr_diag_clear(&diag);
        events = feed_cut(TEXT("{\"type\":\"ADDED\",\"object\":{\"a\":\"}"), NULL, &rc, &diag);
        assert_int_equal(rc, TSR_EPARSE);
        assert_non_null(strstr(diag.msg, "ended inside event 1"));
        json_decref(events);

        tsr_diag_clear(&diag);
        events = feed_cut(TEXT("{\"type\":\"ADDED\",\"object\":[}}\n"), NULL, &rc, &diag);
        assert_int_equal(rc, TSR_EPARSE);
        assert_non_null(strstr(diag.msg, "watch event:"));
        json_decref(events);

        /* The size ceiling. */
        g.events = json_array();
        tsr_kube_watch_stream_init(&s, 40);
        tsr_diag_clear(&diag);
        rc = tsr_kube_watch_stream_feed(&s, "{\"type\":\"ADDED\",\"object\":{}}\n", 29, keep, &g,
                                        &diag);
        assert_int_equal(rc, 0);
        rc = tsr_kube_watch_stream_feed(&s, "{\"type\":\"ADDED\",\"object\":{\"pad\":", 32, keep,
                                        &g, &diag);
        assert_int_equal(rc, 0);
        rc = tsr_kube_watch_stream_feed(&s, "\"0123456789\"}}", 14, keep, &g, &diag);
        assert_int_equal(rc, TSR_ETOOBIG);
        assert_non_null(strstr(diag.msg, "event 2 exceeds 40 bytes"));
        tsr_kube_watch_stream_release(&s);
        json_decref(g.events);

        /* The nesting ceiling. */
        n += (size_t)snprintf(deep, sizeof(deep), "{\"type\":\"ADDED\",\"object\":{\"a\":");
        while (n < sizeof(deep) - 1)
                deep[n++] = '[';
        deep[n] = '\0';
        tsr_diag_clear(&diag);
        events = feed_cut(deep, n, NULL, &rc, &diag);
        assert_int_equal(rc, TSR_EPARSE);
        assert_non_null(strstr(diag.msg, "nests deeper than"));
        json_decref(events);
}

static void test_callback_stops(void **state)
{
        struct tsr_kube_watch_stream s;
        struct got g = {json_array(), 2};

        (void)state;
        tsr_kube_watch_stream_init(&s, 0);
        assert_int_equal(tsr_kube_watch_stream_feed(&s, api_server_body, strlen(api_server_body),
                                                    keep, &g, NULL),
                         7);
        assert_int_equal(json_array_size(g.events), 2);
        assert_int_equal(s.events, 2);
        tsr_kube_watch_stream_release(&s);
        assert_int_equal(s.pending.len, 0);
        json_decref(g.events);
}

/* ---- randomized round trip ---------------------------------------------------------------- */

static json_t *random_string(void)
{
        static const char alphabet[] = "ab{}[]\"\\/ \n\t:,\x01";
        char s[24];
        size_t n = rnd(sizeof(s) - 1);

        for (size_t i = 0; i < n; i++)
                s[i] = alphabet[rnd(sizeof(alphabet) - 1)];
        s[n] = '\0';
        return json_string(s);
}

static json_t *random_value(int depth)
{
        unsigned k = depth > 4 ? rnd(3) : rnd(6);
        json_t *v;

        switch (k) {
        case 0:
                return random_string();
        case 1:
                return json_integer((json_int_t)rnd(100000) - 50000);
        case 2:
                return rnd(2) ? json_true() : json_null();
        case 3:
        case 4:
                v = json_object();
                for (unsigned i = rnd(4); i > 0; i--) {
                        json_t *key = random_string();

                        json_object_set_new(v, json_string_value(key), random_value(depth + 1));
                        json_decref(key);
                }
                return v;
        default:
                v = json_array();
                for (unsigned i = rnd(4); i > 0; i--)
                        json_array_append_new(v, random_value(depth + 1));
                return v;
        }
}

static void test_random_round_trip(void **state)
{
        static const char *const types[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
        static const char *const seps[] = {"\n", "", "\r\n", "  \n\t"};

        (void)state;
        rng_seed(20260814);
        for (int round = 0; round < 200; round++) {
                json_t *want = json_array(), *got;
                char *text = NULL;
                size_t len = 0, cap = 0, cuts[64];
                int rc, n_events = 1 + (int)rnd(12);

                for (int e = 0; e < n_events; e++) {
                        json_t *obj = json_object(), *ev;
                        char *s;
                        size_t sl;

                        json_object_set_new(obj, "metadata",
                                            json_pack("{s:s}", "resourceVersion", "1"));
                        json_object_set_new(obj, "data", random_value(0));
                        ev = json_pack("{s:s, s:o}", "type", types[rnd(5)], "object", obj);
                        s = json_dumps(ev, JSON_COMPACT | (rnd(2) ? JSON_INDENT(1) : 0));
                        sl = strlen(s);
                        const char *sep = seps[rnd(4)];
                        size_t need = len + sl + strlen(sep) + 1;

                        if (need > cap) {
                                cap = need * 2;
                                text = realloc(text, cap);
                                assert_non_null(text);
                        }
                        memcpy(text + len, s, sl);
                        len += sl;
                        memcpy(text + len, sep, strlen(sep));
                        len += strlen(sep);
                        free(s);
                        json_array_append_new(want, ev);
                }
                for (size_t i = 0; i < 63; i++)
                        cuts[i] = 1 + rnd(40);
                cuts[63] = 0;
                got = feed_cut(text, len, cuts, &rc, NULL);
                assert_int_equal(rc, 0);
                if (!json_equal(got, want))
                        fail_msg("round %d: events differ after the stream", round);
                json_decref(got);
                json_decref(want);
                free(text);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_decode_types),      cmocka_unit_test(test_decode_refusals),
            cmocka_unit_test(test_every_split),       cmocka_unit_test(test_separators),
            cmocka_unit_test(test_refusals),          cmocka_unit_test(test_callback_stops),
            cmocka_unit_test(test_random_round_trip),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
