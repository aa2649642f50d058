/*
 * test_json_subset.c - codec/json_subset, the in-place scanner of the JSON programs write, and the
 * allocation annotation's fast path built on it.
 *
 * The scanner: objects, arrays, strings, integers and literals inside the subset are read with
 * their values; each thing outside it (an escape, a byte above 0x7f, a control character, a
 * fraction, an exponent, a negative number, a number past 18 digits, a leading zero, a duplicate
 * key at any depth, nesting past the limit, too many keys, a trailing comma, a missing colon,
 * trailing bytes, a bad literal) leaves the subset, and every call after that fails.
 *
 * The annotation: tsr_alloc_annotation_decode reads a text in the subset in place and hands
 * anything else to jansson. Both must read the same: every text is decoded as written and again
 * with one character of its first string written as a \u escape -- the same JSON to jansson, but
 * outside the subset, so the second decode always takes the jansson path. Results (code, every
 * field, and the message unless it is jansson's syntax message, which counts bytes) must match,
 * over thousands of random records (all modes, partition fields present or not, values at and
 * past every range edge, missing required fields, unknown members of every JSON type, deviceIDs
 * with a non-string inside, names at their length limits, 16 and 17 accelerators or containers,
 * key order and whitespace varied) and over the fuzz corpus.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "codec/alloc_annotation.h"
#include "codec/json_subset.h"

#include "support/rng.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CORPUS_DIR
#error "CORPUS_DIR names fuzz/corpus/alloc_annotation"
#endif

/* ---- the scanner ------------------------------------------------------------------------------
 */

static void scan_init(struct tsr_jsub *s, const char *text)
{
        tsr_jsub_init(s, text, strlen(text));
}

static void test_subset__reads_values(void **state)
{
        const char *text = " { \"a\" : [1, 22, 0, true, false, null, {\"x\": \"y\"}, []],\n"
                           "\t\"b\": \"str\", \"c\": {}, \"d\": 922337203685477580 } ";
        struct tsr_jsub s;
        struct tsr_jsub_str key, str;
        int64_t v;

        (void)state;
        scan_init(&s, text);
        assert_true(tsr_jsub_object(&s));
        assert_true(tsr_jsub_key(&s, &key));
        assert_true(tsr_jsub_is(&key, "a"));
        assert_true(tsr_jsub_array(&s));
        assert_true(tsr_jsub_element(&s));
        assert_true(tsr_jsub_int(&s, &v));
        assert_int_equal(v, 1);
        assert_true(tsr_jsub_element(&s));
        assert_true(tsr_jsub_int(&s, &v));
        assert_int_equal(v, 22);
        for (int i = 0; i < 6; i++) {
                assert_true(tsr_jsub_element(&s));
                assert_true(tsr_jsub_skip(&s));
        }
        assert_false(tsr_jsub_element(&s));
        assert_false(s.outside);
        assert_true(tsr_jsub_key(&s, &key));
        assert_true(tsr_jsub_is(&key, "b"));
        assert_int_equal(tsr_jsub_peek(&s), '"');
        assert_true(tsr_jsub_string(&s, &str));
        assert_true(tsr_jsub_is(&str, "str"));
        assert_false(tsr_jsub_is(&str, "st"));
        assert_true(tsr_jsub_key(&s, &key));
        assert_true(tsr_jsub_skip(&s));
        assert_true(tsr_jsub_key(&s, &key));
        assert_true(tsr_jsub_int(&s, &v));
        assert_int_equal(v, INT64_C(922337203685477580));
        assert_false(tsr_jsub_key(&s, &key));
        assert_false(s.outside);
        assert_true(tsr_jsub_end(&s));
}

/* Whether skipping text's one value stays in the subset and ends the text. */
static bool in_subset(const char *text)
{
        struct tsr_jsub s;

        scan_init(&s, text);
        return tsr_jsub_skip(&s) && tsr_jsub_end(&s);
}

static void test_subset__leaves_on_everything_else(void **state)
{
        static const char *const outside[] = {
            "\"a\\nb\"",           /* escape */
            "\"caf\xc3\xa9\"",     /* a byte above 0x7f */
            "\"a\tb\"",            /* control character */
            "1.5",                 /* fraction */
            "1e3",                 /* exponent */
            "-1",                  /* negative */
            "1234567890123456789", /* past 18 digits */
            "01",                  /* leading zero */
            "{\"a\":1,\"a\":2}",   /* duplicate key */
            "{\"o\":{\"k\":1,\"k\":1}}",
            "[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]", /* 17 levels */
            "{\"a\":1,}",                          /* trailing comma */
            "[1,]",
            "{\"a\" 1}",   /* missing colon */
            "{\"a\":1} x", /* trailing bytes */
            "{\"a\":1",    /* unclosed */
            "tru",         /* bad literal */
            "[1 2]",
            "{1:2}",
            "\"unterminated",
            "",
        };
        char many[1024];
        size_t o = 0;

        (void)state;
        for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
                if (in_subset(outside[i]))
                        fail_msg("in the subset: %s", outside[i]);
        assert_true(in_subset("[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]")); /* 16 levels */
        assert_true(in_subset("{\"a\":{\"a\":1},\"b\":[{\"a\":1},{\"a\":1}]}"));
        /* one key past the limit */
        o += (size_t)snprintf(many + o, sizeof(many) - o, "{");
        for (int k = 0; k <= TSR_JSUB_KEYS_MAX; k++)
                o += (size_t)snprintf(many + o, sizeof(many) - o, "%s\"k%d\":%d", k ? "," : "", k,
                                      k);
        snprintf(many + o, sizeof(many) - o, "}");
        assert_false(in_subset(many));
}

static void test_subset__stays_outside(void **state)
{
        struct tsr_jsub s;
        struct tsr_jsub_str key;
        int64_t v;

        (void)state;
        scan_init(&s, "{\"a\":1.5,\"b\":2}");
        assert_true(tsr_jsub_object(&s));
        assert_true(tsr_jsub_key(&s, &key));
        assert_false(tsr_jsub_int(&s, &v));
        assert_true(s.outside);
        assert_false(tsr_jsub_key(&s, &key));
        assert_false(tsr_jsub_skip(&s));
        assert_int_equal(tsr_jsub_peek(&s), 0);
        assert_false(tsr_jsub_end(&s));
}

/* ---- the annotation: the fast path reads what jansson reads --------------------------------- */

static struct tsr_container_allocation got_a[TSR_ALLOC_CONTAINERS_MAX + 1];
static struct tsr_container_allocation got_b[TSR_ALLOC_CONTAINERS_MAX + 1];

/* text with the first character of its first string written as a \u escape, or NULL. */
static char *escaped(const char *text)
{
        const char *q = strchr(text, '"');
        char *out;
        size_t at;

        if (!q || !q[1] || q[1] == '"' || q[1] == '\\' || (unsigned char)q[1] < 0x20 ||
            (unsigned char)q[1] >= 0x80)
                return NULL;
        at = (size_t)(q - text) + 1;
        out = malloc(strlen(text) + 8);
        assert_non_null(out);
        memcpy(out, text, at);
        sprintf(out + at, "\\u%04x%s", (unsigned)(unsigned char)q[1], q + 2);
        return out;
}

static void same_allocation(const struct tsr_container_allocation *a,
                            const struct tsr_container_allocation *b, const char *text)
{
        if (strcmp(a->container, b->container) || strcmp(a->group_id, b->group_id) ||
            strcmp(a->manufacturer, b->manufacturer) || a->n != b->n ||
            a->n_device_ids != b->n_device_ids)
                fail_msg("container fields differ on %s", text);
        for (size_t i = 0; i < a->n; i++) {
                const struct tsr_accel_allocation *x = &a->accels[i], *y = &b->accels[i];

                if (strcmp(x->id, y->id) || x->index != y->index || x->mode != y->mode ||
                    x->allocated != y->allocated || x->slices != y->slices ||
                    strcmp(x->profile, y->profile) || x->start != y->start ||
                    x->length != y->length || strcmp(x->physical_id, y->physical_id))
                        fail_msg("accelerator %zu differs on %s", i, text);
        }
        for (size_t i = 0; i < a->n_device_ids; i++)
                if (strcmp(a->device_ids[i], b->device_ids[i]))
                        fail_msg("device ID %zu differs on %s", i, text);
}

/*
 * Decodes text as written and escaped; both must agree. Returns the first decode's code, or 1
 * when text has no string to escape.
 */
static int both_ways(const char *text, size_t max)
{
        char *other = escaped(text);
        struct tsr_diag da, db;
        size_t na = 0, nb = 0;
        int ra, rb;

        if (!other)
                return 1;
        tsr_diag_clear(&da);
        tsr_diag_clear(&db);
        ra = tsr_alloc_annotation_decode(text, got_a, max, &na, &da);
        rb = tsr_alloc_annotation_decode(other, got_b, max, &nb, &db);
        if (ra != rb)
                fail_msg("decode %d as written, %d escaped: %s (%s | %s)", ra, rb, text, da.msg,
                         db.msg);
        if (ra && !strstr(da.msg, "not a JSON object") && strcmp(da.msg, db.msg))
                fail_msg("messages differ: \"%s\" and \"%s\" on %s", da.msg, db.msg, text);
        if (!ra) {
                if (na != nb)
                        fail_msg("%zu containers as written, %zu escaped: %s", na, nb, text);
                for (size_t i = 0; i < na; i++)
                        same_allocation(&got_a[i], &got_b[i], text);
        }
        free(other);
        return ra;
}

/* How many draws may still break this record: 1 for half the records (so a record is wrong
 * in exactly one place, or not at all), 0 for the others. */
static unsigned break_budget;

/* Whether this draw breaks the record (one in one_in, while the budget lasts). */
static bool breaks(unsigned one_in)
{
        if (!break_budget || rnd(one_in))
                return false;
        break_budget--;
        return true;
}

static const int64_t int_edges[] = {0,  1,  2,    3,    4,    5,         31,
                                    32, 33, 1023, 1024, 1025, INT32_MAX, (int64_t)INT32_MAX + 1};

static json_t *random_int(int64_t lo, int64_t hi)
{
        int64_t v = int_edges[rnd(sizeof(int_edges) / sizeof(int_edges[0]))];

        if (!breaks(3))
                return json_integer(v < lo ? lo : v > hi ? hi : v);
        switch (rnd(4)) {
        case 0:
                return json_string("7");
        case 1:
                return json_real(1.0);
        case 2:
                return json_integer(lo - 1);
        default:
                return json_integer(hi + 1);
        }
}

static json_t *random_str(size_t limit)
{
        char buf[300];
        size_t len = rnd(4) == 0 ? limit - 1 + (size_t)breaks(4) : 1 + rnd(12);

        if (len >= sizeof(buf))
                len = sizeof(buf) - 1;
        for (size_t i = 0; i < len; i++)
                buf[i] = (char)('a' + rnd(26));
        buf[len] = '\0';
        return breaks(20) ? json_integer(3) : json_string(buf);
}

static json_t *random_junk(unsigned depth)
{
        switch (depth > 2 ? rnd(4) : rnd(6)) {
        case 0:
                return json_true();
        case 1:
                return json_null();
        case 2:
                return json_integer(rnd(1000));
        case 3:
                return json_string("junk");
        case 4:
                return json_pack("{s:o, s:o}", "x", random_junk(depth + 1), "y",
                                 random_junk(depth + 1));
        default:
                return json_pack("[o, o]", random_junk(depth + 1), random_junk(depth + 1));
        }
}

/* Sets key on o unless the draw leaves it out (required fields are left out now and then). */
static void maybe_set(json_t *o, const char *key, json_t *v, unsigned leave_out_one_in)
{
        if (leave_out_one_in && breaks(leave_out_one_in)) {
                json_decref(v);
                return;
        }
        json_object_set_new(o, key, v);
}

static json_t *random_accel(void)
{
        json_t *a = json_object();
        unsigned mode = breaks(8) ? 5 : rnd(5);

        maybe_set(a, "id", random_str(TSR_UUID_MAX), 30);
        maybe_set(a, "index", rnd(6) ? json_integer(rnd(8)) : random_int(0, 1023), 30);
        maybe_set(a, "mode", rnd(8) ? json_integer(mode) : random_int(0, 4), 30);
        maybe_set(a, "allocated", rnd(4) ? json_integer(rnd(1600001)) : random_int(0, INT32_MAX),
                  3);
        maybe_set(a, "allocatedSlices", rnd(4) ? json_integer(1) : random_int(0, 1024), 3);
        if (mode == 4 || rnd(6) == 0) {
                json_t *pl = json_object();

                maybe_set(pl, "start", rnd(4) ? json_integer(rnd(8)) : random_int(0, 31), 15);
                maybe_set(pl, "length", rnd(4) ? json_integer(1 + rnd(7)) : random_int(1, 32), 15);
                if (rnd(5) == 0)
                        json_object_set_new(pl, "extra", random_junk(0));
                maybe_set(a, "allocatedPhysicalProfile", random_str(64), 15);
                maybe_set(a, "allocatedPhysicalID", random_str(96), 4);
                if (breaks(10)) {
                        json_decref(pl);
                        pl = json_array();
                } else {
                        pl = json_pack("[o, o]", pl, json_object());
                }
                maybe_set(a, "allocatedPhysicalPlacements", pl, 15);
        }
        if (rnd(4) == 0)
                json_object_set_new(a, "unknown", random_junk(0));
        return a;
}

static json_t *random_entry(void)
{
        json_t *accels = json_array(), *ids = json_array(), *group = json_object(), *groups;
        unsigned n = rnd(10) == 0 ? 16u + breaks(2) : 1 + rnd(3);

        for (unsigned i = 0; i < n; i++)
                json_array_append_new(accels, breaks(40) ? json_integer(1) : random_accel());
        for (unsigned i = 0, m = rnd(4); i < m; i++)
                json_array_append_new(ids, rnd(8) == 0 ? json_integer(1) : random_str(256));
        maybe_set(group, "id", random_str(128), 6);
        maybe_set(group, "manufacturer", random_str(32), 6);
        if (breaks(30)) {
                json_decref(accels);
                accels = json_object();
        }
        maybe_set(group, "accelerators", accels, 30);
        if (breaks(20)) {
                json_decref(group);
                groups = json_array();
        } else {
                groups = json_pack("[o]", group);
        }
        if (rnd(5) == 0)
                json_array_append_new(groups, random_junk(0));
        return json_pack("{s:{s:o}, s:o}", "devices", "groups", groups, "deviceIDs", ids);
}

static void test_annotation__fast_path_reads_what_jansson_reads(void **state)
{
        unsigned ok = 0, refused = 0;

        (void)state;
        rng_seed(77);
        for (int round = 0; round < 4000; round++) {
                json_t *root = json_object();
                unsigned n;

                break_budget = round % 2;
                n = rnd(15) == 0 ? 16u + breaks(2) : 1 + rnd(2);
                size_t flags = rnd(2) ? JSON_COMPACT : JSON_INDENT(rnd(3));
                char *text;
                int rc;

                for (unsigned i = 0; i < n; i++) {
                        char name[80];
                        size_t len = rnd(6) == 0 ? 63 + (size_t)breaks(2) : 4;

                        memset(name, 'c', len);
                        name[len - 2] = (char)('a' + i / 10);
                        name[len - 1] = (char)('0' + i % 10);
                        name[len] = '\0';
                        json_object_set_new(root, name, random_entry());
                }
                if (rnd(2))
                        flags |= JSON_SORT_KEYS;
                text = json_dumps(root, flags);
                assert_non_null(text);
                rc = both_ways(text, TSR_ALLOC_CONTAINERS_MAX);
                assert_int_not_equal(rc, 1);
                ok += rc == 0;
                refused += rc < 0;
                free(text);
                json_decref(root);
        }
        print_message("# %u records read alike, %u refused alike\n", ok, refused);
        assert_true(ok >= 2000 && refused > 1500);
}

static void test_annotation__corpus_reads_alike(void **state)
{
        DIR *d = opendir(CORPUS_DIR);
        struct dirent *e;
        unsigned files = 0;

        (void)state;
        assert_non_null(d);
        while ((e = readdir(d))) {
                char path[1024], *text;
                FILE *f;
                long len;

                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", CORPUS_DIR, e->d_name);
                f = fopen(path, "rb");
                assert_non_null(f);
                fseek(f, 0, SEEK_END);
                len = ftell(f);
                rewind(f);
                text = calloc((size_t)len + 1, 1);
                assert_non_null(text);
                assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
                fclose(f);
                if (strlen(text) == (size_t)len) /* a NUL inside is not an annotation value */
                        both_ways(text, TSR_ALLOC_CONTAINERS_MAX);
                free(text);
                files++;
        }
        closedir(d);
        assert_true(files > 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_subset__reads_values),
            cmocka_unit_test(test_subset__leaves_on_everything_else),
            cmocka_unit_test(test_subset__stays_outside),
            cmocka_unit_test(test_annotation__fast_path_reads_what_jansson_reads),
            cmocka_unit_test(test_annotation__corpus_reads_alike),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
