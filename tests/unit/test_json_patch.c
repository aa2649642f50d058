/*
 * test_json_patch.c - codec/json_patch: RFC 6902 apply and the admission-response diff.
 *
 * Apply first, on the examples of RFC 6902 appendix A (A.6 and A.7 are move, which tessera
 * refuses) and the pointers of RFC 6901 §5 ("" for the whole document, "~0" and "~1" escapes, the
 * empty key), array indices ("-" appends, index == size appends, past it or with a leading zero
 * fails), test's RFC equality (1 equals 1.0, "10" does not equal 10), and the failures: every
 * failing patch leaves the document byte-identical (same pointer, same serialization, json_equal
 * to a saved copy) and diag names the operation and what is wrong with it.
 *
 * Then the diff, by hand (removals, additions, recursion into objects and into arrays index by
 * index, arrays grown and shrunk, scalars and changes of type replaced, escaped paths, the
 * whole-document replace) and over thousands of random pairs of documents from a fixed-seed LCG,
 * arrays edited in place too: diff(a, b) applied to a gives exactly b (also after a trip through
 * text), diff(a, a) is empty, the same pair gives the same ops twice, and the patch is minimal:
 * every operation's proper prefixes lead to two different objects, or two different arrays, in a
 * and b (so an equal sub-document is never touched), a remove names a member only a has, an add
 * one only b has, and a replace two different values that are not two objects or two arrays.
 * Last, an allocation-failure loop: a failed allocation anywhere gives TSR_ENOMEM with the
 * document (or *ops) untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "base/buf.h"
#include "codec/json_patch.h"
#include "codec/json_tree.h"

#include "support/failing_alloc.h"
#include "support/json_text.h"
#include "support/rng.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static void expect_apply(const char *doc_text, const char *patch_text, const char *want_text)
{
        json_t *doc = json_fx_load(doc_text), *ops = json_fx_load(patch_text),
               *want = json_fx_load(want_text);
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_json_patch_apply(&doc, ops, &diag);
        if (rc != 0)
                fail_msg("%s on %s: %s (%s)", patch_text, doc_text, tsr_err_name(rc), diag.msg);
        if (!json_equal(doc, want)) {
                char *got = json_fx_dump(doc);

                fail_msg("%s on %s gave %s, want %s", patch_text, doc_text, got, want_text);
        }
        json_decref(doc);
        json_decref(ops);
        json_decref(want);
}

/*
 * Applies a patch that must fail with want_rc, the document unchanged to the byte, and diag
 * holding want_rc and every one of the NULL-terminated message fragments.
 */
static void expect_fail(const char *doc_text, const char *patch_text, int want_rc, ...)
{
        json_t *doc = json_fx_load(doc_text), *ops = json_fx_load(patch_text);
        json_t *saved = json_deep_copy(doc), *before = doc;
        char *text = json_fx_dump(doc), *after;
        struct tsr_diag diag;
        const char *frag;
        va_list ap;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_json_patch_apply(&doc, ops, &diag);
        if (rc != want_rc)
                fail_msg("%s on %s: %s (%s), want %s", patch_text, doc_text, tsr_err_name(rc),
                         diag.msg, tsr_err_name(want_rc));
        assert_ptr_equal(doc, before);
        assert_true(json_equal(doc, saved));
        after = json_fx_dump(doc);
        assert_string_equal(after, text);
        assert_int_equal(diag.code, want_rc);
        va_start(ap, want_rc);
        while ((frag = va_arg(ap, const char *)))
                if (!strstr(diag.msg, frag))
                        fail_msg("%s: message \"%s\" lacks \"%s\"", patch_text, diag.msg, frag);
        va_end(ap);
        free(text);
        free(after);
        json_decref(saved);
        json_decref(doc);
        json_decref(ops);
}

/* ---- RFC 6902 appendix A ------------------------------------------------------------------ */

static void test_json_patch__rfc6902_examples(void **state)
{
        (void)state;
        /* A.1 Adding an Object Member */
        expect_apply("{\"foo\":\"bar\"}", "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]",
                     "{\"baz\":\"qux\",\"foo\":\"bar\"}");
        /* A.2 Adding an Array Element */
        expect_apply("{\"foo\":[\"bar\",\"baz\"]}",
                     "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
                     "{\"foo\":[\"bar\",\"qux\",\"baz\"]}");
        /* A.3 Removing an Object Member */
        expect_apply("{\"baz\":\"qux\",\"foo\":\"bar\"}", "[{\"op\":\"remove\",\"path\":\"/baz\"}]",
                     "{\"foo\":\"bar\"}");
        /* A.4 Removing an Array Element */
        expect_apply("{\"foo\":[\"bar\",\"qux\",\"baz\"]}",
                     "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]", "{\"foo\":[\"bar\",\"baz\"]}");
        /* A.5 Replacing a Value */
        expect_apply("{\"baz\":\"qux\",\"foo\":\"bar\"}",
                     "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]",
                     "{\"baz\":\"boo\",\"foo\":\"bar\"}");
        /* A.8 Testing a Value: Success */
        expect_apply("{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
                     "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},"
                     "{\"op\":\"test\",\"path\":\"/foo/1\",\"value\":2}]",
                     "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}");
        /* A.9 Testing a Value: Error */
        expect_fail("{\"baz\":\"qux\"}", "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]",
                    TSR_ESTALE, "operation 0", "test of \"/baz\" failed", NULL);
        /* A.10 Adding a Nested Member Object */
        expect_apply("{\"foo\":\"bar\"}",
                     "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
                     "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}");
        /* A.11 Ignoring Unrecognized Elements */
        expect_apply("{\"foo\":\"bar\"}",
                     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]",
                     "{\"foo\":\"bar\",\"baz\":\"qux\"}");
        /* A.12 Adding to a Nonexistent Target */
        expect_fail("{\"foo\":\"bar\"}",
                    "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]", TSR_ENOTFOUND,
                    "operation 0", "\"/baz/bat\" does not exist", NULL);
        /* A.14 ~ Escape Ordering */
        expect_apply("{\"/\":9,\"~1\":10}", "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]",
                     "{\"/\":9,\"~1\":10}");
        /* A.15 Comparing Strings and Numbers */
        expect_fail("{\"/\":9,\"~1\":10}", "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]",
                    TSR_ESTALE, "test of \"/~01\" failed", NULL);
        /* A.16 Adding an Array Value */
        expect_apply("{\"foo\":[\"bar\"]}",
                     "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
                     "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}");
}

/* A.6 and A.7 (move) and copy: refused by name, the document untouched. */
static void test_json_patch__move_and_copy_refused(void **state)
{
        (void)state;
        expect_fail("{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
                    "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
                    TSR_EPARSE, "operation 0", "op \"move\" is not supported",
                    "add, remove, replace, test", NULL);
        expect_fail("{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
                    "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]", TSR_EPARSE,
                    "op \"move\" is not supported", NULL);
        expect_fail("{\"a\":1}",
                    "[{\"op\":\"add\",\"path\":\"/b\",\"value\":2},"
                    "{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/c\"}]",
                    TSR_EPARSE, "operation 1", "op \"copy\" is not supported", NULL);
        expect_fail("{}", "[{\"op\":\"frobnicate\",\"path\":\"/a\"}]", TSR_EPARSE,
                    "op \"frobnicate\" is not supported", NULL);
        expect_fail("{}", "[{\"op\":\"ADD\",\"path\":\"/a\",\"value\":1}]", TSR_EPARSE,
                    "op \"ADD\" is not supported", NULL);
}

/* ---- RFC 6901 pointers -------------------------------------------------------------------- */

#define RFC6901_DOC                                                                                \
        "{\"foo\":[\"bar\",\"baz\"],\"\":0,\"a/b\":1,\"c%d\":2,\"e^f\":3,\"g|h\":4,\"i\\\\j\":5,"  \
        "\"k\\\"l\":6,\" \":7,\"m~n\":8}"

static void expect_test_ok(const char *doc, const char *path, const char *value)
{
        char patch[512];

        snprintf(patch, sizeof(patch), "[{\"op\":\"test\",\"path\":\"%s\",\"value\":%s}]", path,
                 value);
        expect_apply(doc, patch, doc);
}

static void test_json_patch__rfc6901_pointers(void **state)
{
        (void)state;
        expect_test_ok(RFC6901_DOC, "", RFC6901_DOC);
        expect_test_ok(RFC6901_DOC, "/foo", "[\"bar\",\"baz\"]");
        expect_test_ok(RFC6901_DOC, "/foo/0", "\"bar\"");
        expect_test_ok(RFC6901_DOC, "/", "0");
        expect_test_ok(RFC6901_DOC, "/a~1b", "1");
        expect_test_ok(RFC6901_DOC, "/c%d", "2");
        expect_test_ok(RFC6901_DOC, "/e^f", "3");
        expect_test_ok(RFC6901_DOC, "/g|h", "4");
        expect_test_ok(RFC6901_DOC, "/i\\\\j", "5");
        expect_test_ok(RFC6901_DOC, "/k\\\"l", "6");
        expect_test_ok(RFC6901_DOC, "/ ", "7");
        expect_test_ok(RFC6901_DOC, "/m~0n", "8");
        /* "~01" is "~1", not "/": decoding is not repeated. */
        expect_apply("{\"~1\":{\"x\":1}}", "[{\"op\":\"add\",\"path\":\"/~01/y\",\"value\":2}]",
                     "{\"~1\":{\"x\":1,\"y\":2}}");
        expect_apply("{}", "[{\"op\":\"add\",\"path\":\"/~0~1~0\",\"value\":true}]",
                     "{\"~/~\":true}");
        expect_apply("{\"a\":{\"\":{\"\":1}}}",
                     "[{\"op\":\"replace\",\"path\":\"/a//\",\"value\":2}]",
                     "{\"a\":{\"\":{\"\":2}}}");
        /* "-" and digits are plain keys in an object. */
        expect_apply("{\"o\":{}}",
                     "[{\"op\":\"add\",\"path\":\"/o/-\",\"value\":1},"
                     "{\"op\":\"add\",\"path\":\"/o/01\",\"value\":2}]",
                     "{\"o\":{\"-\":1,\"01\":2}}");
}

static void test_json_patch__bad_pointers(void **state)
{
        (void)state;
        expect_fail("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"a\",\"value\":2}]", TSR_EPARSE,
                    "path \"a\" is not a JSON pointer", NULL);
        expect_fail("{\"a~2\":1}", "[{\"op\":\"remove\",\"path\":\"/a~2\"}]", TSR_EPARSE,
                    "\"/a~2\" is not a JSON pointer", NULL);
        expect_fail("{\"a~\":1}", "[{\"op\":\"remove\",\"path\":\"/a~\"}]", TSR_EPARSE,
                    "is not a JSON pointer", NULL);
        expect_fail("{\"a\":{\"b~\":1}}", "[{\"op\":\"remove\",\"path\":\"/a~/b\"}]", TSR_EPARSE,
                    "is not a JSON pointer", NULL);
        /* Through a scalar, or past a missing member. */
        expect_fail("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":2}]", TSR_ENOTFOUND,
                    "\"/a/b\" is inside a scalar", NULL);
        expect_fail("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a/b/c\",\"value\":2}]",
                    TSR_ENOTFOUND, "\"/a/b/c\" does not exist", NULL);
        expect_fail("{\"a\":{}}", "[{\"op\":\"replace\",\"path\":\"/a/b\",\"value\":2}]",
                    TSR_ENOTFOUND, "\"/a/b\" does not exist", NULL);
        expect_fail("{\"a\":{}}", "[{\"op\":\"remove\",\"path\":\"/a/b\"}]", TSR_ENOTFOUND,
                    "\"/a/b\" does not exist", NULL);
        expect_fail("{\"a\":{}}", "[{\"op\":\"test\",\"path\":\"/a/b\",\"value\":null}]",
                    TSR_ESTALE, "test of \"/a/b\" failed", NULL);
        /* Array indices in the middle of a pointer. */
        expect_fail("{\"a\":[{\"b\":1}]}", "[{\"op\":\"add\",\"path\":\"/a/1/b\",\"value\":2}]",
                    TSR_ENOTFOUND, "does not exist", NULL);
        expect_fail("{\"a\":[{\"b\":1}]}", "[{\"op\":\"add\",\"path\":\"/a/-/b\",\"value\":2}]",
                    TSR_ENOTFOUND, "does not exist", NULL);
        expect_fail("{\"a\":[{\"b\":1}]}", "[{\"op\":\"add\",\"path\":\"/a/00/b\",\"value\":2}]",
                    TSR_ENOTFOUND, "does not exist", NULL);
        expect_apply("{\"a\":[{\"b\":1}]}", "[{\"op\":\"add\",\"path\":\"/a/0/c\",\"value\":2}]",
                     "{\"a\":[{\"b\":1,\"c\":2}]}");
}

/* ---- arrays ------------------------------------------------------------------------------- */

static void test_json_patch__array_indices(void **state)
{
        (void)state;
        expect_apply("[1,2]", "[{\"op\":\"add\",\"path\":\"/-\",\"value\":3}]", "[1,2,3]");
        expect_apply("[1,2]", "[{\"op\":\"add\",\"path\":\"/2\",\"value\":3}]", "[1,2,3]");
        expect_apply("[1,2]", "[{\"op\":\"add\",\"path\":\"/0\",\"value\":0}]", "[0,1,2]");
        expect_apply("[]", "[{\"op\":\"add\",\"path\":\"/0\",\"value\":0}]", "[0]");
        expect_apply("[]", "[{\"op\":\"add\",\"path\":\"/-\",\"value\":0}]", "[0]");
        expect_apply("[1,2]", "[{\"op\":\"remove\",\"path\":\"/1\"}]", "[1]");
        expect_apply("[1,2]", "[{\"op\":\"replace\",\"path\":\"/0\",\"value\":9}]", "[9,2]");
        expect_apply("[0,1,2,3,4,5,6,7,8,9,10,11]", "[{\"op\":\"remove\",\"path\":\"/10\"}]",
                     "[0,1,2,3,4,5,6,7,8,9,11]");
        /* Past the end. */
        expect_fail("[1,2]", "[{\"op\":\"add\",\"path\":\"/3\",\"value\":3}]", TSR_ENOTFOUND,
                    "bad array index in \"/3\"", NULL);
        expect_fail("[1,2]", "[{\"op\":\"remove\",\"path\":\"/2\"}]", TSR_ENOTFOUND,
                    "bad array index in \"/2\"", NULL);
        expect_fail("[1,2]", "[{\"op\":\"replace\",\"path\":\"/2\",\"value\":0}]", TSR_ENOTFOUND,
                    "bad array index", NULL);
        expect_fail("[]", "[{\"op\":\"remove\",\"path\":\"/0\"}]", TSR_ENOTFOUND, "bad array index",
                    NULL);
        expect_fail("[1]", "[{\"op\":\"remove\",\"path\":\"/18446744073709551616\"}]",
                    TSR_ENOTFOUND, "bad array index", NULL);
        expect_fail("[1]", "[{\"op\":\"remove\",\"path\":\"/99999999999999999999999\"}]",
                    TSR_ENOTFOUND, "bad array index", NULL);
        /* Not an index: leading zero, sign, blanks, empty, letters; "-" only for add. */
        expect_fail("[1,2]", "[{\"op\":\"remove\",\"path\":\"/01\"}]", TSR_EPARSE,
                    "bad array index in \"/01\"", NULL);
        expect_fail("[1,2]", "[{\"op\":\"remove\",\"path\":\"/-1\"}]", TSR_EPARSE,
                    "bad array index", NULL);
        expect_fail("[1,2]", "[{\"op\":\"remove\",\"path\":\"/+1\"}]", TSR_EPARSE,
                    "bad array index", NULL);
        expect_fail("[1,2]", "[{\"op\":\"remove\",\"path\":\"/ 1\"}]", TSR_EPARSE,
                    "bad array index", NULL);
        expect_fail("[1,2]", "[{\"op\":\"remove\",\"path\":\"/\"}]", TSR_EPARSE, "bad array index",
                    NULL);
        expect_fail("[1,2]", "[{\"op\":\"remove\",\"path\":\"/1x\"}]", TSR_EPARSE,
                    "bad array index", NULL);
        expect_fail("[1,2]", "[{\"op\":\"remove\",\"path\":\"/-\"}]", TSR_EPARSE,
                    "bad array index in \"/-\"", NULL);
        expect_fail("[1,2]", "[{\"op\":\"replace\",\"path\":\"/-\",\"value\":0}]", TSR_EPARSE,
                    "bad array index", NULL);
        expect_fail("[1,2]", "[{\"op\":\"test\",\"path\":\"/-\",\"value\":2}]", TSR_ESTALE,
                    "test of \"/-\" failed", NULL);
        expect_fail("[1,2]", "[{\"op\":\"test\",\"path\":\"/2\",\"value\":2}]", TSR_ESTALE,
                    "failed", NULL);
}

/* ---- the whole document, sequencing, values ----------------------------------------------- */

static void test_json_patch__whole_document(void **state)
{
        (void)state;
        expect_apply("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":[1,2]}]", "[1,2]");
        expect_apply("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"\",\"value\":{\"b\":2}}]",
                     "{\"b\":2}");
        expect_apply("3", "[{\"op\":\"replace\",\"path\":\"\",\"value\":\"x\"}]", "\"x\"");
        expect_apply("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"\",\"value\":{\"a\":1.0}}]",
                     "{\"a\":1}");
        expect_apply("{\"a\":1}",
                     "[{\"op\":\"replace\",\"path\":\"\",\"value\":{}},"
                     "{\"op\":\"add\",\"path\":\"/z\",\"value\":null}]",
                     "{\"z\":null}");
        expect_fail("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"\"}]", TSR_EPARSE,
                    "cannot remove the document", NULL);
        expect_fail("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"\",\"value\":{\"a\":2}}]",
                    TSR_ESTALE, "test of \"\" failed", NULL);
        /* A failing op after a whole-document replace still leaves the original. */
        expect_fail("{\"a\":1}",
                    "[{\"op\":\"replace\",\"path\":\"\",\"value\":[]},"
                    "{\"op\":\"remove\",\"path\":\"/a\"}]",
                    TSR_EPARSE, "operation 1", NULL);
}

static void test_json_patch__sequence_and_values(void **state)
{
        (void)state;
        expect_apply("{}", "[]", "{}");
        /* Each operation sees the ones before it. */
        expect_apply("{}",
                     "[{\"op\":\"add\",\"path\":\"/a\",\"value\":{}},"
                     "{\"op\":\"add\",\"path\":\"/a/b\",\"value\":[]},"
                     "{\"op\":\"add\",\"path\":\"/a/b/-\",\"value\":1},"
                     "{\"op\":\"test\",\"path\":\"/a\",\"value\":{\"b\":[1]}},"
                     "{\"op\":\"replace\",\"path\":\"/a/b/0\",\"value\":2},"
                     "{\"op\":\"remove\",\"path\":\"/a/b\"}]",
                     "{\"a\":{}}");
        /* add over an existing member replaces it; null is a value. */
        expect_apply("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":null}]",
                     "{\"a\":null}");
        expect_apply("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":null}]",
                     "{\"a\":null}");
        expect_apply("{\"a\":null}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":null}]",
                     "{\"a\":null}");
        /* remove ignores a value it does not need. */
        expect_apply("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a\",\"value\":7}]", "{}");
        /* Unicode keys and values pass through. */
        expect_apply("{\"\xc3\xbc\":1}",
                     "[{\"op\":\"replace\",\"path\":\"/\xc3\xbc\",\"value\":\"\xe2\x82\xac\"}]",
                     "{\"\xc3\xbc\":\"\xe2\x82\xac\"}");
}

/* RFC 6902 §4.6: numbers equal by value, objects regardless of order, arrays in order. */
static void test_json_patch__test_equality(void **state)
{
        (void)state;
        expect_test_ok("{\"a\":1}", "/a", "1.0");
        expect_test_ok("{\"a\":1.0}", "/a", "1");
        expect_test_ok("{\"a\":-0.0}", "/a", "0");
        expect_test_ok("{\"a\":[1,{\"x\":2.0,\"y\":[3]}]}", "/a", "[1.0,{\"y\":[3.0],\"x\":2}]");
        expect_test_ok("{\"a\":{\"x\":1,\"y\":2}}", "/a", "{\"y\":2,\"x\":1}");
        expect_test_ok("{\"a\":9007199254740992}", "/a", "9007199254740992.0");
        expect_test_ok("{\"a\":\"\"}", "/a", "\"\"");
        expect_test_ok("{\"a\":false}", "/a", "false");
        expect_fail("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":1.5}]", TSR_ESTALE,
                    "failed", NULL);
        /* 2^53 + 1 is not the double 2^53, however close. */
        expect_fail("{\"a\":9007199254740993}",
                    "[{\"op\":\"test\",\"path\":\"/a\",\"value\":9007199254740992.0}]", TSR_ESTALE,
                    "failed", NULL);
        expect_fail("{\"a\":9223372036854775807}",
                    "[{\"op\":\"test\",\"path\":\"/a\",\"value\":9223372036854775808.0}]",
                    TSR_ESTALE, "failed", NULL);
        expect_fail("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":true}]", TSR_ESTALE,
                    "failed", NULL);
        expect_fail("{\"a\":0}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":null}]", TSR_ESTALE,
                    "failed", NULL);
        expect_fail("{\"a\":[1,2]}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":[2,1]}]",
                    TSR_ESTALE, "failed", NULL);
        expect_fail("{\"a\":[1,2]}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":[1,2,3]}]",
                    TSR_ESTALE, "failed", NULL);
        expect_fail("{\"a\":{\"x\":1}}",
                    "[{\"op\":\"test\",\"path\":\"/a\",\"value\":{\"x\":1,\"y\":1}}]", TSR_ESTALE,
                    "failed", NULL);
        expect_fail("{\"a\":{\"x\":1,\"y\":1}}",
                    "[{\"op\":\"test\",\"path\":\"/a\",\"value\":{\"x\":1,\"z\":1}}]", TSR_ESTALE,
                    "failed", NULL);
        expect_fail("{\"a\":\"x\"}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":\"X\"}]",
                    TSR_ESTALE, "failed", NULL);
}

/* ---- malformed operations and atomicity --------------------------------------------------- */

static void test_json_patch__malformed_operations(void **state)
{
        (void)state;
        expect_fail("{}", "{\"op\":\"add\",\"path\":\"/a\",\"value\":1}", TSR_EPARSE,
                    "a JSON Patch is an array of operations", NULL);
        expect_fail("{}", "\"add\"", TSR_EPARSE, "array of operations", NULL);
        expect_fail("{}", "null", TSR_EPARSE, "array of operations", NULL);
        expect_fail("{}", "[1]", TSR_EPARSE, "patch operation 0 needs op and path", NULL);
        expect_fail("{}", "[[\"add\",\"/a\",1]]", TSR_EPARSE, "operation 0 needs op and path",
                    NULL);
        expect_fail("{}", "[{\"path\":\"/a\",\"value\":1}]", TSR_EPARSE, "needs op and path", NULL);
        expect_fail("{}", "[{\"op\":\"add\",\"value\":1}]", TSR_EPARSE, "needs op and path", NULL);
        expect_fail("{}", "[{\"op\":1,\"path\":\"/a\",\"value\":1}]", TSR_EPARSE,
                    "needs op and path", NULL);
        expect_fail("{}", "[{\"op\":\"add\",\"path\":[\"a\"],\"value\":1}]", TSR_EPARSE,
                    "needs op and path", NULL);
        expect_fail("{}", "[{\"op\":\"add\",\"path\":null,\"value\":1}]", TSR_EPARSE,
                    "needs op and path", NULL);
        expect_fail("{}", "[{\"op\":\"add\",\"path\":\"/a\"}]", TSR_EPARSE,
                    "patch operation 0 (add) needs a value", NULL);
        expect_fail("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/a\"}]", TSR_EPARSE,
                    "(replace) needs a value", NULL);
        expect_fail("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\"}]", TSR_EPARSE,
                    "(test) needs a value", NULL);
        /* The index counts from 0 and names the operation that failed. */
        expect_fail(
            "{}",
            "[{\"op\":\"add\",\"path\":\"/a\",\"value\":1},"
            "{\"op\":\"add\",\"path\":\"/b\",\"value\":2},{\"op\":\"add\",\"path\":\"/c\"}]",
            TSR_EPARSE, "patch operation 2 (add) needs a value", NULL);
}

/* However far a patch got, a failure leaves the document as it was. */
static void test_json_patch__failure_is_atomic(void **state)
{
        static const char *doc = "{\"metadata\":{\"labels\":{\"a\":\"1\"},\"annotations\":{}},"
                                 "\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[]}]}}";
        static const char *patches[] = {
            "[{\"op\":\"add\",\"path\":\"/metadata/labels/b\",\"value\":\"2\"},"
            "{\"op\":\"remove\",\"path\":\"/metadata/labels/a\"},"
            "{\"op\":\"test\",\"path\":\"/metadata/labels/a\",\"value\":\"1\"}]",
            "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/name\",\"value\":\"d\"},"
            "{\"op\":\"add\",\"path\":\"/spec/containers/0/env/-\",\"value\":{\"name\":\"X\"}},"
            "{\"op\":\"add\",\"path\":\"/spec/containers/1/env/-\",\"value\":{}}]",
            "[{\"op\":\"remove\",\"path\":\"/metadata\"},"
            "{\"op\":\"remove\",\"path\":\"/spec\"},"
            "{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/b\"}]",
            "[{\"op\":\"replace\",\"path\":\"\",\"value\":null},"
            "{\"op\":\"test\",\"path\":\"\",\"value\":0}]",
            "[{\"op\":\"add\",\"path\":\"/metadata/annotations/k\",\"value\":\"v\"},"
            "{\"op\":\"add\",\"path\":\"/metadata/annotations/k2\"}]",
            "[{\"op\":\"remove\",\"path\":\"/spec/containers/0\"},"
            "{\"op\":\"remove\",\"path\":\"/spec/containers/0\"}]",
        };
        static const int want[] = {TSR_ESTALE, TSR_ENOTFOUND, TSR_EPARSE,
                                   TSR_ESTALE, TSR_EPARSE,    TSR_ENOTFOUND};

        (void)state;
        for (size_t i = 0; i < N_ELEMS(patches); i++)
                expect_fail(doc, patches[i], want[i], "patch operation", NULL);
        /* A NULL diag is allowed; the document is still untouched. */
        {
                json_t *d = json_fx_load(doc), *saved = json_deep_copy(d),
                       *ops = json_fx_load(patches[0]);

                assert_int_equal(tsr_json_patch_apply(&d, ops, NULL), TSR_ESTALE);
                assert_true(json_equal(d, saved));
                json_decref(d);
                json_decref(saved);
                json_decref(ops);
        }
}

/* ---- diff by hand ------------------------------------------------------------------------- */

static void expect_diff(const char *from_text, const char *to_text, const char *want_text)
{
        json_t *from = json_fx_load(from_text), *to = json_fx_load(to_text),
               *want = json_fx_load(want_text), *ops = NULL;
        int rc = tsr_json_patch_diff(from, to, &ops);

        if (rc != 0)
                fail_msg("diff %s -> %s: %s", from_text, to_text, tsr_err_name(rc));
        if (!json_equal(ops, want)) {
                char *got = json_fx_dump(ops);

                fail_msg("diff %s -> %s gave %s, want %s", from_text, to_text, got, want_text);
        }
        expect_apply(from_text, want_text, to_text);
        json_decref(from);
        json_decref(to);
        json_decref(want);
        json_decref(ops);
}

static void test_json_patch__diff_by_hand(void **state)
{
        (void)state;
        expect_diff("{}", "{}", "[]");
        expect_diff("{\"a\":{\"b\":[1,{\"c\":2}]}}", "{\"a\":{\"b\":[1,{\"c\":2}]}}", "[]");
        expect_diff("{\"a\":1,\"b\":2}", "{\"a\":1,\"c\":3}",
                    "[{\"op\":\"remove\",\"path\":\"/b\"},"
                    "{\"op\":\"add\",\"path\":\"/c\",\"value\":3}]");
        /* Removals first, then additions and replacements, each in sorted key order. */
        expect_diff("{\"z\":1,\"y\":1,\"m\":1,\"b\":1}", "{\"m\":2,\"c\":1,\"a\":1}",
                    "[{\"op\":\"remove\",\"path\":\"/b\"},{\"op\":\"remove\",\"path\":\"/y\"},"
                    "{\"op\":\"remove\",\"path\":\"/z\"},"
                    "{\"op\":\"add\",\"path\":\"/a\",\"value\":1},"
                    "{\"op\":\"add\",\"path\":\"/c\",\"value\":1},"
                    "{\"op\":\"replace\",\"path\":\"/m\",\"value\":2}]");
        /* Objects are recursed into; equal siblings are not touched. */
        expect_diff("{\"metadata\":{\"labels\":{\"a\":\"1\"},\"name\":\"p\"},\"spec\":{\"x\":1}}",
                    "{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"},\"name\":\"p\"},"
                    "\"spec\":{\"x\":1}}",
                    "[{\"op\":\"add\",\"path\":\"/metadata/labels/b\",\"value\":\"2\"}]");
        /* Arrays index by index: a changed element is patched where it changed. */
        expect_diff("{\"a\":[1,2,3]}", "{\"a\":[1,2,4]}",
                    "[{\"op\":\"replace\",\"path\":\"/a/2\",\"value\":4}]");
        expect_diff("{\"a\":[{\"x\":1}]}", "{\"a\":[{\"x\":2}]}",
                    "[{\"op\":\"replace\",\"path\":\"/a/0/x\",\"value\":2}]");
        /* A fold's shape: one key added to the second container's limits. */
        expect_diff("{\"c\":[{\"n\":\"a\"},{\"n\":\"b\",\"l\":{\"g\":\"1\"}}]}",
                    "{\"c\":[{\"n\":\"a\"},{\"n\":\"b\",\"l\":{\"g\":\"1\",\"u\":\"8\"}}]}",
                    "[{\"op\":\"add\",\"path\":\"/c/1/l/u\",\"value\":\"8\"}]");
        /* Longer: the common indices, then the new ones appended in order. */
        expect_diff("{\"a\":[1,2]}", "{\"a\":[1,3,4,5]}",
                    "[{\"op\":\"replace\",\"path\":\"/a/1\",\"value\":3},"
                    "{\"op\":\"add\",\"path\":\"/a/2\",\"value\":4},"
                    "{\"op\":\"add\",\"path\":\"/a/3\",\"value\":5}]");
        /* Shorter: the extra elements removed from the last one down. */
        expect_diff("{\"a\":[1,2,3,4]}", "{\"a\":[0,2]}",
                    "[{\"op\":\"replace\",\"path\":\"/a/0\",\"value\":0},"
                    "{\"op\":\"remove\",\"path\":\"/a/3\"},"
                    "{\"op\":\"remove\",\"path\":\"/a/2\"}]");
        expect_diff("[]", "[[]]", "[{\"op\":\"add\",\"path\":\"/0\",\"value\":[]}]");
        /* A change of type is a replace; an integer is not its real. */
        expect_diff("{\"a\":{\"x\":1}}", "{\"a\":[1]}",
                    "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":[1]}]");
        expect_diff("{\"a\":1}", "{\"a\":1.0}",
                    "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":1.0}]");
        expect_diff("{\"a\":null}", "{\"a\":false}",
                    "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":false}]");
        /* The whole document. */
        expect_diff("1", "2", "[{\"op\":\"replace\",\"path\":\"\",\"value\":2}]");
        expect_diff("{\"a\":1}", "[1]", "[{\"op\":\"replace\",\"path\":\"\",\"value\":[1]}]");
        expect_diff("[]", "{}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{}}]");
        /* Keys needing escapes. */
        expect_diff("{\"a/b\":{\"~\":1}}", "{\"a/b\":{\"~\":2},\"~1\":0,\"\":{}}",
                    "[{\"op\":\"add\",\"path\":\"/\",\"value\":{}},"
                    "{\"op\":\"replace\",\"path\":\"/a~1b/~0\",\"value\":2},"
                    "{\"op\":\"add\",\"path\":\"/~01\",\"value\":0}]");
        expect_diff("{\"~/~\":{\"/\":1}}", "{\"~/~\":{}}",
                    "[{\"op\":\"remove\",\"path\":\"/~0~1~0/~1\"}]");
        /* Insertion order does not matter. */
        expect_diff("{\"b\":1,\"a\":2}", "{\"a\":2,\"b\":1}", "[]");
}

/* diff neither changes its arguments nor keeps references into them. */
static void test_json_patch__diff_copies_values(void **state)
{
        json_t *from = json_fx_load("{\"a\":{\"x\":1}}"),
               *to = json_fx_load("{\"a\":{\"x\":2},\"b\":{\"y\":[1]}}");
        json_t *from0 = json_deep_copy(from), *to0 = json_deep_copy(to), *ops;

        (void)state;
        assert_int_equal(tsr_json_patch_diff(from, to, &ops), 0);
        assert_true(json_equal(from, from0));
        assert_true(json_equal(to, to0));
        /* Changing to afterwards does not change the patch. */
        json_array_append_new(json_object_get(json_object_get(to, "b"), "y"), json_integer(2));
        assert_true(json_equal(json_object_get(json_array_get(ops, 1), "value"),
                               json_object_get(to0, "b")));
        json_decref(from);
        json_decref(to);
        json_decref(from0);
        json_decref(to0);
        json_decref(ops);
}

/* ---- randomized round trip ---------------------------------------------------------------- */

/* Keys that need escaping, look like indices or "-", are empty, or are not ASCII. */
static const char *const keys[] = {
    "a",   "b",   "c", "metadata", "spec", "~",  "/",        "~0",   "~1",
    "a/b", "~/~", "",  "-",        "0",    "01", "\xc3\xbc", "k\"q", "x y",
};

static json_t *random_value(int depth);

static json_t *random_scalar(void)
{
        static const char *const strings[] = {"", "x", "1", "~1", "/", "\xe2\x82\xac"};

        switch (rnd(7)) {
        case 0:
                return json_null();
        case 1:
                return json_boolean(rnd(2));
        case 2:
                return json_integer((json_int_t)rnd(5) - 2);
        case 3:
                return json_real((double)rnd(9) / 4.0 - 1.0);
        case 4:
                return json_integer(INT64_C(1) << 62);
        default:
                return json_string(strings[rnd(N_ELEMS(strings))]);
        }
}

static json_t *random_object(int depth)
{
        json_t *o = json_object();
        unsigned n = rnd(5);

        for (unsigned i = 0; i < n; i++)
                json_object_set_new(o, keys[rnd(N_ELEMS(keys))], random_value(depth - 1));
        return o;
}

static json_t *random_value(int depth)
{
        unsigned kind = depth > 0 ? rnd(8) : 0;

        if (kind < 3)
                return random_scalar();
        if (kind < 6)
                return random_object(depth);
        {
                json_t *a = json_array();
                unsigned n = rnd(4);

                for (unsigned i = 0; i < n; i++)
                        json_array_append_new(a, random_value(depth - 1));
                return a;
        }
}

static json_t *mutate(json_t *v, int depth);

/*
 * Whether mutate keeps an unchanged member by reference, as a copy-on-write edit does
 * (codec/json_tree.h), instead of as a deep copy: the diff then finds it by pointer.
 */
static bool share_unchanged;

static json_t *unchanged(json_t *v)
{
        return share_unchanged ? json_incref(v) : json_deep_copy(v);
}

/* A copy of array v with random edits: elements changed in place, the tail cut or extended. */
static json_t *mutate_array(json_t *v, int depth)
{
        size_t n = json_array_size(v), keep = rnd(2) ? n : rnd((unsigned)n + 1);
        json_t *a = json_array();

        for (size_t i = 0; i < keep; i++)
                json_array_append_new(a, rnd(3) ? unchanged(json_array_get(v, i))
                                                : mutate(json_array_get(v, i), depth - 1));
        for (unsigned extra = keep == n ? rnd(3) : 0; extra > 0; extra--)
                json_array_append_new(a, random_value(depth - 1));
        return a;
}

/* A copy of v with random edits: keys removed, added and changed, deep inside objects and arrays.
 */
static json_t *mutate(json_t *v, int depth)
{
        const char *key;
        json_t *o, *child;

        if (json_is_array(v) && rnd(8))
                return mutate_array(v, depth);
        if (!json_is_object(v) || rnd(8) == 0)
                return rnd(3) ? unchanged(v) : random_value(depth);
        o = json_object();
        json_object_foreach(v, key, child)
        {
                unsigned what = rnd(6);

                if (what == 0)
                        continue; /* removed */
                json_object_set_new(o, key,
                                    what == 1   ? random_value(depth - 1)
                                    : what == 2 ? mutate(child, depth - 1)
                                                : unchanged(child));
        }
        if (rnd(3) == 0)
                json_object_set_new(o, keys[rnd(N_ELEMS(keys))], random_value(depth - 1));
        return o;
}

/* The value at pointer p in doc (a decimal token indexes an array), or NULL. */
static json_t *at_pointer(json_t *doc, const char *p, size_t len)
{
        char tok[256];
        size_t i = 0;

        while (i < len) {
                size_t n = 0;

                assert_true(p[i] == '/');
                for (i++; i < len && p[i] != '/'; i++) {
                        assert_true(n + 1 < sizeof(tok));
                        if (p[i] == '~') {
                                assert_true(i + 1 < len && (p[i + 1] == '0' || p[i + 1] == '1'));
                                tok[n++] = p[++i] == '0' ? '~' : '/';
                        } else {
                                tok[n++] = p[i];
                        }
                }
                tok[n] = '\0';
                if (json_is_array(doc)) {
                        char *end;
                        unsigned long idx = strtoul(tok, &end, 10);

                        doc = *tok && !*end ? json_array_get(doc, idx) : NULL;
                } else {
                        doc = json_is_object(doc) ? json_object_get(doc, tok) : NULL;
                }
                if (!doc)
                        return NULL;
        }
        return doc;
}

/* Two objects or two arrays: what the diff recurses into rather than replaces. */
static bool both_containers(json_t *x, json_t *y)
{
        return (json_is_object(x) && json_is_object(y)) || (json_is_array(x) && json_is_array(y));
}

/* Every operation is needed: see the header comment. */
static void check_minimal(json_t *a, json_t *b, json_t *ops)
{
        size_t i;
        json_t *op;

        json_array_foreach(ops, i, op)
        {
                const char *name = json_string_value(json_object_get(op, "op"));
                const char *path = json_string_value(json_object_get(op, "path"));
                size_t len = strlen(path);
                json_t *x = at_pointer(a, path, len), *y = at_pointer(b, path, len);

                for (size_t k = 0; k < len; k++) {
                        json_t *px, *py;

                        if (path[k] != '/')
                                continue;
                        px = at_pointer(a, path, k);
                        py = at_pointer(b, path, k);
                        if (!both_containers(px, py) || json_equal(px, py))
                                fail_msg("op %zu (%s %s) descends through an equal value, or "
                                         "not two objects or two arrays, at %.*s",
                                         i, name, path, (int)k, path);
                }
                if (!strcmp(name, "remove"))
                        assert_true(x && !y && !json_object_get(op, "value"));
                else if (!strcmp(name, "add"))
                        assert_true(!x && y && json_equal(json_object_get(op, "value"), y));
                else if (!strcmp(name, "replace"))
                        assert_true(x && y && !json_equal(x, y) && !both_containers(x, y) &&
                                    json_equal(json_object_get(op, "value"), y));
                else
                        fail_msg("diff wrote op %s", name);
        }
}

static void test_json_patch__diff_round_trip(void **state)
{
        unsigned nonempty = 0, total_ops = 0, kinds[5] = {0}, shared_rounds = 0;

        (void)state;
        rng_seed(20260607);
        for (int round = 0; round < 6000; round++) {
                int depth = 1 + (int)rnd(4);
                json_t *a = rnd(8) ? random_object(depth) : random_value(depth);
                json_t *b;
                json_t *a0 = json_deep_copy(a), *b0;
                json_t *ops, *again, *same, *doc, *reloaded;
                struct tsr_diag diag;
                char *text;
                int rc;

                share_unchanged = round % 2;
                b = rnd(4) ? mutate(a, depth) : random_value(depth);
                b0 = json_deep_copy(b);
                assert_int_equal(tsr_json_patch_diff(a, b, &ops), 0);
                assert_true(json_is_array(ops));
                assert_true(json_equal(a, a0) && json_equal(b, b0));
                assert_true(json_array_size(ops) == 0 || !json_equal(a, b));
                assert_true(json_array_size(ops) > 0 || json_equal(a, b));
                nonempty += json_array_size(ops) > 0;
                total_ops += (unsigned)json_array_size(ops);
                {
                        size_t i;
                        json_t *op;

                        json_array_foreach(ops, i, op)
                        {
                                const char *name = json_string_value(json_object_get(op, "op"));
                                const char *path = json_string_value(json_object_get(op, "path"));

                                kinds[name[0] == 'r' ? (name[2] == 'm' ? 0 : 2) : 1]++;
                                kinds[3] += *path && strchr(path + 1, '/') != NULL;
                                kinds[4] += strchr(path, '~') != NULL;
                        }
                }

                /* Deterministic. */
                assert_int_equal(tsr_json_patch_diff(a, b, &again), 0);
                assert_true(json_equal(ops, again));
                {
                        char *t1 = json_fx_dump(ops), *t2 = json_fx_dump(again);

                        assert_string_equal(t1, t2);
                        free(t1);
                        free(t2);
                }
                /*
                 * The text form is the array as tsr_json_write writes it, and members shared by
                 * pointer change nothing: b and its deep copy give the same bytes.
                 */
                {
                        struct tsr_buf t1 = TSR_BUF_INIT, t2 = TSR_BUF_INIT, t3 = TSR_BUF_INIT;
                        size_t n1 = 0, n3 = 0;

                        assert_int_equal(tsr_json_patch_diff_text(a, b, &t1, &n1), 0);
                        assert_int_equal(n1, json_array_size(ops));
                        assert_int_equal(tsr_json_write(&t2, ops), 0);
                        assert_string_equal(t1.ptr, t2.ptr);
                        assert_int_equal(tsr_json_patch_diff_text(a, b0, &t3, &n3), 0);
                        assert_string_equal(t1.ptr, t3.ptr);
                        shared_rounds += share_unchanged && n1;
                        tsr_buf_release(&t1);
                        tsr_buf_release(&t2);
                        tsr_buf_release(&t3);
                }
                /* Empty on itself and on an equal copy. */
                assert_int_equal(tsr_json_patch_diff(a, a, &same), 0);
                assert_int_equal(json_array_size(same), 0);
                json_decref(same);
                assert_int_equal(tsr_json_patch_diff(a, a0, &same), 0);
                assert_int_equal(json_array_size(same), 0);
                json_decref(same);

                check_minimal(a, b, ops);

                /* Applied to a, it gives b; also after a trip through text. */
                doc = json_deep_copy(a);
                tsr_diag_clear(&diag);
                rc = tsr_json_patch_apply(&doc, ops, &diag);
                if (rc != 0 || !json_equal(doc, b)) {
                        char *ta = json_fx_dump(a), *tb = json_fx_dump(b), *to = json_fx_dump(ops);

                        fail_msg("round %d: %s (%s)\n a   = %s\n b   = %s\n ops = %s", round,
                                 tsr_err_name(rc), diag.msg, ta, tb, to);
                }
                json_decref(doc);
                text = json_fx_dump(ops);
                reloaded = json_fx_load(text);
                doc = json_deep_copy(a);
                assert_int_equal(tsr_json_patch_apply(&doc, reloaded, &diag), 0);
                assert_true(json_equal(doc, b));
                free(text);
                json_decref(reloaded);
                json_decref(doc);

                json_decref(ops);
                json_decref(again);
                json_decref(a);
                json_decref(b);
                json_decref(a0);
                json_decref(b0);
        }
        /* Both kinds of pair, and real patches, were exercised. */
        assert_true(nonempty > 3000 && nonempty < 6000);
        assert_true(shared_rounds > 1000);
        assert_true(total_ops > 6000);
        for (int k = 0; k < 5; k++)
                if (kinds[k] < 300)
                        fail_msg("only %u ops of kind %d (remove, add, replace, nested, escaped)",
                                 kinds[k], k);
}

/* ---- allocation failure ------------------------------------------------------------------- */

static void test_json_patch__allocation_failure(void **state)
{
        static const char *from_text = "{\"metadata\":{\"labels\":{\"a\":\"1\"},\"name\":\"p\"},"
                                       "\"spec\":{\"containers\":[{\"name\":\"c\"}],\"x\":1}}";
        static const char *to_text = "{\"metadata\":{\"labels\":{\"b\":\"2\"},\"name\":\"p\"},"
                                     "\"spec\":{\"containers\":[],\"y\":{\"z\":[1,2]}}}";
        json_t *from = json_fx_load(from_text), *to = json_fx_load(to_text);
        json_t *ops = NULL;
        bool diff_done = false, apply_done = false;

        (void)state;
        json_set_alloc_funcs(failing_malloc, free);
        for (long k = 0; k < 10000 && !(diff_done && apply_done); k++) {
                json_t *got = NULL, *doc = json_deep_copy(from), *saved = json_deep_copy(from);
                struct tsr_diag diag;
                int rc;

                if (!diff_done) {
                        failing_alloc_budget(k);
                        rc = tsr_json_patch_diff(from, to, &got);
                        failing_alloc_budget(-1);
                        if (rc == 0) {
                                diff_done = true;
                                ops = got;
                        } else {
                                assert_int_equal(rc, TSR_ENOMEM);
                                assert_null(got);
                        }
                }
                if (ops && !apply_done) {
                        json_t *before = doc;

                        tsr_diag_clear(&diag);
                        failing_alloc_budget(k);
                        rc = tsr_json_patch_apply(&doc, ops, &diag);
                        failing_alloc_budget(-1);
                        if (rc == 0) {
                                apply_done = true;
                                assert_true(json_equal(doc, to));
                        } else {
                                assert_int_equal(rc, TSR_ENOMEM);
                                assert_ptr_equal(doc, before);
                                assert_true(json_equal(doc, saved));
                                assert_int_equal(diag.code, TSR_ENOMEM);
                                assert_non_null(strstr(diag.msg, "out of memory"));
                        }
                }
                json_decref(doc);
                json_decref(saved);
        }
        json_set_alloc_funcs(malloc, free);
        assert_true(diff_done && apply_done);
        json_decref(ops);
        json_decref(from);
        json_decref(to);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_json_patch__rfc6902_examples),
            cmocka_unit_test(test_json_patch__move_and_copy_refused),
            cmocka_unit_test(test_json_patch__rfc6901_pointers),
            cmocka_unit_test(test_json_patch__bad_pointers),
            cmocka_unit_test(test_json_patch__array_indices),
            cmocka_unit_test(test_json_patch__whole_document),
            cmocka_unit_test(test_json_patch__sequence_and_values),
            cmocka_unit_test(test_json_patch__test_equality),
            cmocka_unit_test(test_json_patch__malformed_operations),
            cmocka_unit_test(test_json_patch__failure_is_atomic),
            cmocka_unit_test(test_json_patch__diff_by_hand),
            cmocka_unit_test(test_json_patch__diff_copies_values),
            cmocka_unit_test(test_json_patch__diff_round_trip),
            cmocka_unit_test(test_json_patch__allocation_failure),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
