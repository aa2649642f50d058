/*
 * test_json_pick.c - codec/json_pick, the picker that builds only what a reader names.
 *
 * A real AdmissionReview of a Pod (managedFields keys with escaped quotes, \u003c escapes, UTF-8,
 * an affinity, a sidecar) is picked, not declined, with the Pod reads the webhook uses, and the
 * tree holds exactly the named members. Every kind of text jansson refuses is declined; the valid
 * texts the picker cannot vouch for (a 16-character number, a three-digit exponent, nesting past
 * the limit, too many keys open) are declined too, never built. Thousands of random documents,
 * and copies with one byte changed, go through the fuzz target's property (built only where
 * jansson accepts, and then equal to jansson's tree pruned by the reference model), and a good
 * share of them must be built for the check to count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/json_pick.h"
#include "webhook/pod.h"

#include "json_pick_model.h"
#include "support/rng.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef REVIEW_FILE
#error "REVIEW_FILE names a Pod AdmissionReview of fuzz/corpus/admission_review"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern unsigned long fuzz_json_pick_built;

static const struct tsr_json_pick review_picks[] = {
    {"apiVersion", NULL},
    {"request.uid", NULL},
    {"request.object", tsr_webhook_pod_reads},
    {"request.oldObject", tsr_webhook_pod_reads},
    {NULL, NULL},
};

static char *read_review(size_t *len)
{
        FILE *f = fopen(REVIEW_FILE, "rb");
        char *text = malloc(1 << 16);

        assert_non_null(f);
        assert_non_null(text);
        *len = fread(text, 1, 1 << 16, f);
        fclose(f);
        return text;
}

static void test_pick__real_pod_review_is_picked(void **state)
{
        size_t len;
        char *text = read_review(&len);
        /* The corpus file's first byte chooses the fuzz route; the review follows. */
        const char *body = text + 1;
        json_t *picked = NULL, *full, *model, *pod, *meta, *c;
        json_error_t err;

        (void)state;
        assert_int_equal(tsr_json_pick_load(body, len - 1, review_picks, &picked), 0);
        assert_non_null(picked);
        full = json_loadb(body, len - 1, JSON_REJECT_DUPLICATES, &err);
        assert_non_null(full);
        model = model_pick(full, review_picks);
        assert_true(model_same_text(picked, model));

        pod = json_object_get(json_object_get(picked, "request"), "object");
        meta = json_object_get(pod, "metadata");
        assert_int_equal(json_object_size(meta), 1); /* labels; no name, managedFields, ... */
        assert_non_null(json_object_get(meta, "labels"));
        assert_int_equal(json_object_size(json_object_get(pod, "spec")), 3);
        c = json_array_get(json_object_get(json_object_get(pod, "spec"), "initContainers"), 0);
        assert_int_equal(json_object_size(c), 3);
        assert_string_equal(json_string_value(json_object_get(c, "restartPolicy")), "Always");
        assert_null(json_object_get(c, "image"));
        assert_null(json_object_get(pod, "status"));
        assert_non_null(json_object_get(json_object_get(pod, "spec"), "affinity"));
        assert_int_equal(json_object_size(json_object_get(picked, "request")), 2);
        json_decref(model);
        json_decref(full);
        json_decref(picked);
        free(text);
}

static void test_pick__declines_what_jansson_refuses(void **state)
{
        static const char *bad[] = {
            "",
            "   ",
            "\"root string\"",
            "42",
            "{\"a\":1,\"a\":2}",
            "{\"a\":1,\"\\u0061\":2}",
            "{\"x\":{\"y\":[{\"k\":1,\"k\":1}]}}",
            "{\"a\":1,}",
            "[1,]",
            "{\"a\" 1}",
            "{\"a\":01}",
            "{\"a\":-}",
            "{\"a\":1.}",
            "{\"a\":1e}",
            "{\"a\":.5}",
            "{\"a\":+1}",
            "{\"a\":tru}",
            "{\"a\":nul}",
            "{\"a\":truex}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\\u12g4\"}",
            "{\"a\":\"\\ud800\"}",
            "{\"a\":\"\\udc00\"}",
            "{\"a\":\"\\ud800\\u0041\"}",
            "{\"a\":\"\\u0000\"}",
            "{\"a\":\"tab\there\"}",
            "{\"a\":\"\xc0\xaf\"}",
            "{\"a\":\"\xed\xa0\x80\"}",
            "{\"a\":\"\xf4\x90\x80\x80\"}",
            "{\"a\":\"\xe2\x82\"}",
            "{\"a\":\"cut",
            "{\"a\":1} {}",
            "{\"a\":1}x",
            "{'a':1}",
            "{\"a\":1 \"b\":2}",
            "[1 2]",
            "{\"a\":[}",
            "\xef\xbb\xbf{}",
        };
        json_error_t err;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *picked = (json_t *)1;

                assert_null(json_loadb(bad[i], strlen(bad[i]), JSON_REJECT_DUPLICATES, &err));
                assert_int_equal(tsr_json_pick_load(bad[i], strlen(bad[i]), review_picks, &picked),
                                 0);
                if (picked)
                        fail_msg("built a tree from %s", bad[i]);
        }
}

static void assert_declines_valid(const char *text)
{
        json_error_t err;
        json_t *full = json_loadb(text, strlen(text), JSON_REJECT_DUPLICATES, &err);
        json_t *picked = (json_t *)1;

        assert_non_null(full);
        json_decref(full);
        assert_int_equal(tsr_json_pick_load(text, strlen(text), review_picks, &picked), 0);
        assert_null(picked);
}

static void test_pick__declines_valid_text_it_cannot_vouch_for(void **state)
{
        char *deep = malloc(2 * (TSR_JSON_PICK_DEPTH_MAX + 1) + 1);
        size_t cap = TSR_JSON_PICK_KEYS_MAX * 16 + 16, n = 0;
        char *wide = malloc(cap);

        (void)state;
        assert_declines_valid("{\"a\":1234567890123456}");
        assert_declines_valid("{\"a\":1.5e100}");
        assert_declines_valid("{\"a\":-0.00000000000001}");
        /* ... while one character less is built */
        {
                json_t *picked = NULL;

                assert_int_equal(tsr_json_pick_load("{\"a\":123456789012345,\"b\":1e99}", 30,
                                                    review_picks, &picked),
                                 0);
                assert_non_null(picked);
                json_decref(picked);
        }
        assert_non_null(deep);
        for (int i = 0; i <= TSR_JSON_PICK_DEPTH_MAX; i++)
                deep[i] = '[';
        for (int i = 0; i <= TSR_JSON_PICK_DEPTH_MAX; i++)
                deep[TSR_JSON_PICK_DEPTH_MAX + 1 + i] = ']';
        deep[2 * (TSR_JSON_PICK_DEPTH_MAX + 1)] = '\0';
        assert_declines_valid(deep);
        assert_non_null(wide);
        n += (size_t)snprintf(wide + n, cap - n, "{");
        for (int i = 0; i <= TSR_JSON_PICK_KEYS_MAX; i++)
                n += (size_t)snprintf(wide + n, cap - n, "%s\"k%d\":0", i ? "," : "", i);
        snprintf(wide + n, cap - n, "}");
        assert_declines_valid(wide);
        free(deep);
        free(wide);
}

/* ---- random documents through the fuzz target's property ---------------------------------- */

static const char *const keys[] = {
    "a",       "b",       "c",      "d",           "e",
    "f",       "g",       "h",      "i",           "j",
    "k",       "l",       "m",      "n",           "o",
    "p",       "q",       "r",      "x",           "y",
    "z",       "\\u0061", "k\\\"q", "caf\xc3\xa9", "\\ud83d\\ude00",
    "request", "object",  "spec",
};
static const char *const scalars[] = {
    "0",
    "-1",
    "12.5",
    "-0.25e+3",
    "1E-2",
    "true",
    "false",
    "null",
    "\"\"",
    "\"s\"",
    "\"\\n\\t\"",
    "\"\\u00e9\"",
    "\"\xe2\x82\xac\"",
    "\"\\ud83d\\ude00\"",
    "123456789012345",
    "\"\\/\"",
};

static void emit(char *buf, size_t cap, size_t *n, const char *s)
{
        size_t len = strlen(s);

        if (*n + len < cap) {
                memcpy(buf + *n, s, len);
                *n += len;
        }
}

static void gen_value(char *buf, size_t cap, size_t *n, int depth)
{
        unsigned kind = depth > 5 ? 2 : rnd(5);

        if (kind == 0 || (kind == 3 && depth == 0)) {
                unsigned members = rnd(5);

                emit(buf, cap, n, "{");
                for (unsigned i = 0; i < members; i++) {
                        emit(buf, cap, n, i ? ",\"" : "\"");
                        /* mostly distinct keys; a repeat now and then */
                        emit(buf, cap, n,
                             keys[rnd(4) ? (i * 7 + rnd(3)) % (sizeof(keys) / sizeof(keys[0]))
                                         : rnd(sizeof(keys) / sizeof(keys[0]))]);
                        emit(buf, cap, n, rnd(8) ? "\":" : "\" : ");
                        gen_value(buf, cap, n, depth + 1);
                }
                emit(buf, cap, n, "}");
        } else if (kind == 1 || kind == 3 || depth == 0) {
                unsigned elements = rnd(4);

                emit(buf, cap, n, "[");
                for (unsigned i = 0; i < elements; i++) {
                        if (i)
                                emit(buf, cap, n, rnd(6) ? "," : " , ");
                        gen_value(buf, cap, n, depth + 1);
                }
                emit(buf, cap, n, "]");
        } else {
                emit(buf, cap, n, scalars[rnd(sizeof(scalars) / sizeof(scalars[0]))]);
        }
}

/* A key holding '.' or '[' is one key, never a path: "b.c" is not b's member c. */
static void test_pick__key_holding_a_path_names_nothing(void **state)
{
        static const struct tsr_json_pick picks[] = {{"b.c", NULL}, {"d[]", NULL}, {NULL, NULL}};
        const char *text = "{\"b.c\":1,\"d[]\":2,\"b\":{\"c\":3,\"c.x\":4},\"d\":[5]}";
        json_t *picked = NULL;
        char *dump;

        (void)state;
        assert_int_equal(tsr_json_pick_load(text, strlen(text), picks, &picked), 0);
        assert_non_null(picked);
        dump = json_dumps(picked, JSON_COMPACT);
        assert_string_equal(dump, "{\"b\":{\"c\":3},\"d\":[5]}");
        free(dump);
        json_decref(picked);
}

static void test_pick__random_documents_agree_with_jansson(void **state)
{
        enum { DOCS = 20000 };
        static const char mutants[] = "{}[],:\"\\0e.-x \x80\xff";
        char buf[8192];
        unsigned long built_before = fuzz_json_pick_built;

        (void)state;
        rng_seed(0x6a736f6e7069636bULL);
        for (unsigned d = 0; d < DOCS; d++) {
                size_t n = 1;

                buf[0] = (char)('0' + rnd(3)); /* which of the target's pick lists */
                gen_value(buf, sizeof(buf), &n, 0);
                LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
                if (n > 2) {
                        size_t at = 1 + rnd((unsigned)(n - 1));

                        switch (rnd(3)) {
                        case 0: /* change a byte */
                                buf[at] = mutants[rnd(sizeof(mutants) - 1)];
                                break;
                        case 1: /* cut the text short */
                                n = at;
                                break;
                        default: /* drop a byte */
                                memmove(buf + at, buf + at + 1, n - at - 1);
                                n--;
                        }
                        LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
                }
        }
        /* Most unmutated documents are valid; they must have been built and compared. */
        assert_true(fuzz_json_pick_built - built_before > DOCS / 2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pick__real_pod_review_is_picked),
            cmocka_unit_test(test_pick__declines_what_jansson_refuses),
            cmocka_unit_test(test_pick__declines_valid_text_it_cannot_vouch_for),
            cmocka_unit_test(test_pick__key_holding_a_path_names_nothing),
            cmocka_unit_test(test_pick__random_documents_agree_with_jansson),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
