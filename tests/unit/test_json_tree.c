/*
 * test_json_tree.c - codec/json_tree: the copy and the writer that skip jansson's loop checks.
 *
 * Over thousands of random trees (every type, reals of every magnitude, keys and strings with
 * quotes, backslashes, every control byte, '/', UTF-8 of every length, empty containers, nesting),
 * tsr_json_write gives exactly json_dumps(JSON_COMPACT | JSON_ENCODE_ANY), and tsr_json_copy gives
 * a tree that is json_equal and dumps alike while sharing no container with the original. Text
 * with bytes that start no UTF-8 sequence has each such byte written as U+FFFD. A shared copy
 * written along one path leaves the original byte for byte as it was and still shares every
 * subtree off that path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/buf.h"
#include "codec/json_tree.h"

#include "support/rng.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *const strings[] = {
    "",
    "a",
    "k\"q",
    "back\\slash",
    "a/b",
    "caf\xc3\xa9",
    "\xe2\x82\xac",
    "\xf0\x9f\x98\x80",
    "\x01",
    "\x1f",
    "\b\f\n\r\t",
    "\x0b",
    "\x7f",
    "nvidia.com/gpu.sliced",
    "~0~1",
};

static json_t *random_tree(int depth)
{
        switch (depth > 4 ? 2 + rnd(6) : rnd(8)) {
        case 0: {
                json_t *o = json_object();
                unsigned n = rnd(5);

                for (unsigned i = 0; i < n; i++) {
                        char key[64];

                        snprintf(key, sizeof(key), "%s%u", strings[rnd(15)], rnd(4));
                        json_object_set_new(o, key, random_tree(depth + 1));
                }
                return o;
        }
        case 1: {
                json_t *a = json_array();
                unsigned n = rnd(4);

                for (unsigned i = 0; i < n; i++)
                        json_array_append_new(a, random_tree(depth + 1));
                return a;
        }
        case 2:
                return json_string(strings[rnd(15)]);
        case 3: /* small, or near the ends of the range */
                return json_integer(rnd(4) ? (json_int_t)rnd(2000000) - 1000000
                                           : (rnd(2) ? INT64_MAX : INT64_MIN) / (1 + rnd(9)));
        case 4: {
                static const double reals[] = {0.0,     -0.0,   0.1,   1.5,    -2.25e-7,
                                               1e22,    1e300,  3.0,   1e-320, 123456.789,
                                               1.0 / 3, 2.5e15, 1e100, -1e-5};

                return json_real(reals[rnd(sizeof(reals) / sizeof(reals[0]))]);
        }
        case 5:
                return json_true();
        case 6:
                return json_false();
        default:
                return json_null();
        }
}

static void test_tree__write_and_copy_match_jansson(void **state)
{
        (void)state;
        rng_seed(0x74726565ULL);
        for (int i = 0; i < 5000; i++) {
                json_t *v = random_tree(0), *copy = tsr_json_copy(v);
                char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                char *copied = json_dumps(copy, JSON_COMPACT | JSON_ENCODE_ANY);
                struct tsr_buf b = TSR_BUF_INIT;

                assert_non_null(want);
                assert_int_equal(tsr_json_write(&b, v), 0);
                assert_string_equal(b.ptr, want);
                assert_true(json_equal(v, copy));
                assert_string_equal(copied, want);
                if (json_is_object(v) || json_is_array(v))
                        assert_ptr_not_equal(v, copy);
                tsr_buf_release(&b);
                free(want);
                free(copied);
                json_decref(copy);
                json_decref(v);
        }
}

static void test_tree__text_with_broken_utf8_as_u_fffd(void **state)
{
        static const char *const cases[][2] = {
            {"cut \xc3", "\"cut \xef\xbf\xbd\""},
            {"\xff warned", "\"\xef\xbf\xbd warned\""},
            {"gr\xc3\xbc\xc3", "\"gr\xc3\xbc\xef\xbf\xbd\""},
            {"\xed\xa0\x80 s", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd s\""},
            {"\xc0\xaf over", "\"\xef\xbf\xbd\xef\xbf\xbd over\""},
            {"ok \xe2\x82\xac", "\"ok \xe2\x82\xac\""},
            {"tab\tquote\"\x01", "\"tab\\tquote\\\"\\u0001\""},
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct tsr_buf b = TSR_BUF_INIT;

                assert_int_equal(tsr_json_write_text(&b, cases[i][0], strlen(cases[i][0])), 0);
                assert_string_equal(b.ptr, cases[i][1]);
                tsr_buf_release(&b);
        }
}

static void test_tree__copy_on_write_leaves_the_original(void **state)
{
        json_t *orig =
            json_loads("{\"metadata\":{\"labels\":{\"a\":\"1\"}},\"spec\":{\"containers\":"
                       "[{\"name\":\"x\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}},"
                       "{\"name\":\"y\"}]}}",
                       0, NULL);
        char *before = json_dumps(orig, JSON_COMPACT);
        json_t *patched = tsr_json_share(orig), *spec, *list, *c, *res, *limits;
        char *after;

        (void)state;
        assert_non_null(patched);
        assert_ptr_not_equal(patched, orig);
        /* a shallow copy: every child the same value */
        assert_ptr_equal(json_object_get(patched, "spec"), json_object_get(orig, "spec"));
        spec = tsr_json_own_member(patched, "spec");
        list = tsr_json_own_member(spec, "containers");
        c = tsr_json_own_element(list, 0);
        res = tsr_json_own_member(c, "resources");
        limits = tsr_json_own_member(res, "limits");
        assert_non_null(limits);
        assert_int_equal(json_object_set_new(limits, "gpu", json_string("2")), 0);
        /* owning an owned child copies nothing more */
        assert_ptr_equal(tsr_json_own_member(patched, "spec"), spec);
        assert_ptr_equal(tsr_json_own_member(res, "limits"), limits);
        /* a scalar or an absent member comes back as it is */
        assert_ptr_equal(tsr_json_own_member(c, "name"), json_object_get(c, "name"));
        assert_null(tsr_json_own_member(c, "absent"));

        after = json_dumps(orig, JSON_COMPACT);
        assert_string_equal(after, before);
        assert_string_equal(
            json_string_value(json_object_get(
                json_object_get(
                    json_object_get(
                        json_array_get(
                            json_object_get(json_object_get(patched, "spec"), "containers"), 0),
                        "resources"),
                    "limits"),
                "gpu")),
            "2");
        /* untouched subtrees stay shared */
        assert_ptr_equal(json_object_get(patched, "metadata"), json_object_get(orig, "metadata"));
        assert_ptr_equal(
            json_array_get(list, 1),
            json_array_get(json_object_get(json_object_get(orig, "spec"), "containers"), 1));
        json_decref(patched);
        free(after);
        after = json_dumps(orig, JSON_COMPACT);
        assert_string_equal(after, before);
        free(after);
        free(before);
        json_decref(orig);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_tree__write_and_copy_match_jansson),
            cmocka_unit_test(test_tree__text_with_broken_utf8_as_u_fffd),
            cmocka_unit_test(test_tree__copy_on_write_leaves_the_original),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
