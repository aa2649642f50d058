/*
 * test_mig_marker.c - codec/mig_marker.h (encode, every fail-closed decode case, the file name's
 * card) and mig/marker_store.h (files: durable put, list with corrupt and vanished entries, an
 * unreadable pods directory, remove; memory: the same decoding, deterministic order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/mig_marker.h"
#include "mig/marker_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct tsr_mig_marker sample = {"00000000-0000-4000-8000-000000000001",
                                             "main",
                                             "GPU-aaaa",
                                             "3g.40gb",
                                             2,
                                             0,
                                             "MIG-bbbb",
                                             3,
                                             4,
                                             4};

static const char *const valid =
    "{\"card\":\"GPU-aaaa\",\"ciID\":0,\"computeSlices\":3,\"container\":\"main\",\"giID\":2,"
    "\"length\":4,\"migUUID\":\"MIG-bbbb\",\"podUID\":\"00000000-0000-4000-8000-000000000001\","
    "\"profile\":\"3g.40gb\",\"start\":4}";

static void test_encode_round_trip(void **state)
{
        struct tsr_mig_marker back;
        char *s = NULL;

        (void)state;
        assert_int_equal(tsr_mig_marker_encode(&sample, &s), 0);
        assert_string_equal(s, valid);
        assert_int_equal(tsr_mig_marker_decode(s, strlen(s), "GPU-aaaa", &back, NULL), 0);
        assert_memory_equal(&back, &sample, sizeof(back));
        free(s);
}

/* valid with the member key replaced by value (NULL: removed). */
static char *edited(const char *key, const char *value)
{
        static char out[1024];
        char pat[64];
        const char *at, *end;

        snprintf(pat, sizeof(pat), "\"%s\":", key);
        at = strstr(valid, pat);
        assert_non_null(at);
        end = at + strlen(pat);
        if (*end == '"')
                end = strchr(end + 1, '"') + 1;
        else
                while (*end && *end != ',' && *end != '}')
                        end++;
        if (value) {
                snprintf(out, sizeof(out), "%.*s%s%s%s", (int)(at - valid), valid, pat, value, end);
        } else {
                if (*end == ',')
                        end++;
                else if (at[-1] == ',')
                        at--;
                snprintf(out, sizeof(out), "%.*s%s", (int)(at - valid), valid, end);
        }
        return out;
}

static void expect_corrupt(const char *text, const char *card, const char *field)
{
        struct tsr_mig_marker m;
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        memset(&m, 0x5a, sizeof(m));
        assert_int_equal(tsr_mig_marker_decode(text, strlen(text), card, &m, &diag), TSR_EPARSE);
        if (!strstr(diag.msg, field))
                fail_msg("%s: diag \"%s\" does not name %s", text, diag.msg, field);
        assert_int_equal((unsigned char)m.pod_uid[0], 0x5a); /* out untouched */
}

static void test_fail_closed(void **state)
{
        static const char *const required[] = {"podUID",    "card",  "profile", "migUUID",
                                               "container", "giID",  "ciID",    "computeSlices",
                                               "start",     "length"};
        static const char *const strings[] = {"podUID", "card", "profile", "migUUID"};
        static const char *const ints[] = {"giID", "ciID", "computeSlices", "start", "length"};

        (void)state;
        for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
                expect_corrupt(edited(required[i], NULL), "GPU-aaaa", required[i]);
        for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
                expect_corrupt(edited(strings[i], "\"\""), "GPU-aaaa", strings[i]);
                expect_corrupt(edited(strings[i], "7"), "GPU-aaaa", strings[i]);
                expect_corrupt(edited(strings[i], "null"), "GPU-aaaa", strings[i]);
        }
        expect_corrupt(edited("container", "[]"), "GPU-aaaa", "container");
        for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
                expect_corrupt(edited(ints[i], "\"2\""), "GPU-aaaa", ints[i]);
                expect_corrupt(edited(ints[i], "-1"), "GPU-aaaa", ints[i]);
                expect_corrupt(edited(ints[i], "2.5"), "GPU-aaaa", ints[i]);
                expect_corrupt(edited(ints[i], "4294967296"), "GPU-aaaa", ints[i]);
        }
        expect_corrupt(edited("profile", "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                         "xxxxxxxxxxxxxxxxxx\""),
                       "GPU-aaaa", "profile");
        expect_corrupt(edited("podUID", "\"a\\u0000b\""), "GPU-aaaa", "JSON");
        /* The card must be the one the file name encodes. */
        expect_corrupt(valid, "GPU-other", "card");
        expect_corrupt(valid, NULL, "card");
        /* Not an object, not JSON, torn, duplicated keys. */
        expect_corrupt("[]", "GPU-aaaa", "object");
        expect_corrupt("", "GPU-aaaa", "JSON");
        expect_corrupt("{\"card\":\"GPU-aaaa\",\"ciID\":0,", "GPU-aaaa", "JSON");
        expect_corrupt("{\"podUID\":\"a\",\"podUID\":\"b\"}", "GPU-aaaa", "JSON");
}

static void test_unknown_keys_ignored(void **state)
{
        struct tsr_mig_marker m;
        char text[1024];

        (void)state;
        snprintf(text, sizeof(text), "{\"future\":[1],%s", valid + 1);
        assert_int_equal(tsr_mig_marker_decode(text, strlen(text), "GPU-aaaa", &m, NULL), 0);
        assert_int_equal(m.gi_id, 2);
}

static void test_card_of_name(void **state)
{
        char card[96];

        (void)state;
        assert_int_equal(tsr_mig_marker_card_of_name("nvidia-mig-GPU-x.json", card, sizeof(card)),
                         0);
        assert_string_equal(card, "GPU-x");
        assert_int_equal(tsr_mig_marker_card_of_name("nvidia-mig-.json", card, sizeof(card)),
                         TSR_EPARSE);
        assert_int_equal(tsr_mig_marker_card_of_name("nvidia-mig-GPU-x.tmp", card, sizeof(card)),
                         TSR_EPARSE);
        assert_int_equal(tsr_mig_marker_card_of_name("other.json", card, sizeof(card)), TSR_EPARSE);
        assert_int_equal(tsr_mig_marker_card_of_name("nvidia-mig-GPU-xyz.json", card, 4),
                         TSR_EPARSE);
}

static char root[64];

/* tsr_mig_store_list into the caller's array e[0..max). */
static int list_into(struct tsr_mig_store *s, struct tsr_mig_marker_entry *e, size_t max, size_t *n,
                     struct tsr_diag *diag)
{
        struct tsr_mig_marker_entry *all = NULL;
        size_t k = 0;
        int rc = tsr_mig_store_list(s, &all, &k, diag);

        if (rc) {
                assert_null(all);
                return rc;
        }
        assert_true(k <= max);
        if (k)
                memcpy(e, all, k * sizeof(*e));
        free(all);
        *n = k;
        return 0;
}

static int make_root(void **state)
{
        (void)state;
        snprintf(root, sizeof(root), "/tmp/tsr-mig-marker-XXXXXX");
        return mkdtemp(root) ? 0 : -1;
}

static int remove_root(void **state)
{
        char cmd[128];

        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void test_files_store(void **state)
{
        struct tsr_mig_marker_entry e[8];
        struct tsr_mig_marker other = sample;
        struct tsr_mig_store *s;
        char path[512];
        size_t n = 0;

        (void)state;
        assert_int_equal(tsr_mig_store_files_new(root, &s), 0);
        assert_int_equal(list_into(s, e, 8, &n, NULL), 0);
        assert_int_equal(n, 0);
        assert_int_equal(tsr_mig_store_put(s, &sample, NULL), 0);
        snprintf(other.pod_uid, sizeof(other.pod_uid), "00000000-0000-4000-8000-000000000000");
        other.gi_id = 1; /* another instance of the card */
        snprintf(other.mig_uuid, sizeof(other.mig_uuid), "MIG-dddd");
        assert_int_equal(tsr_mig_store_put(s, &other, NULL), 0);
        /* The file is where the spec says, with the codec's bytes. */
        snprintf(path, sizeof(path), "%s/%s/c-main/nvidia-mig-GPU-aaaa.json", root, sample.pod_uid);
        assert_int_equal(access(path, R_OK), 0);
        /* Noise the scan must skip: a temp file, a foreign file, a Pod dir without markers. */
        snprintf(path, sizeof(path), "%s/%s/c-main/.marker-abc", root, sample.pod_uid);
        write_file(path, "{");
        snprintf(path, sizeof(path), "%s/%s/etc-hosts", root, sample.pod_uid);
        write_file(path, "x");
        snprintf(path, sizeof(path), "%s/empty-pod", root);
        mkdir(path, 0755);
        /* A corrupt marker: reported with its path's Pod and card. */
        snprintf(path, sizeof(path), "%s/pod-z", root);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/pod-z/c-side", root);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/pod-z/c-side/nvidia-mig-GPU-cccc.json", root);
        write_file(path, "{\"podUID\":");
        assert_int_equal(list_into(s, e, 8, &n, NULL), 0);
        assert_int_equal(n, 3);
        assert_false(e[0].corrupt);
        assert_string_equal(e[0].m.pod_uid, other.pod_uid);
        assert_false(e[1].corrupt);
        assert_memory_equal(&e[1].m, &sample, sizeof(sample));
        assert_true(e[2].corrupt);
        assert_string_equal(e[2].pod_uid, "pod-z");
        assert_string_equal(e[2].container, "side");
        assert_string_equal(e[2].card, "GPU-cccc");
        assert_non_null(strstr(e[2].why, "JSON"));
        /* A marker under another Pod's directory is corrupt too. */
        snprintf(path, sizeof(path), "%s/pod-z/c-main", root);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/pod-z/c-main/nvidia-mig-GPU-aaaa.json", root);
        write_file(path, valid);
        assert_int_equal(list_into(s, e, 8, &n, NULL), 0);
        assert_int_equal(n, 4);
        assert_true(e[2].corrupt);
        assert_non_null(strstr(e[2].why, "path"));
        /* Remove, twice. */
        assert_int_equal(tsr_mig_store_remove(s, e[2].path, NULL), 0);
        assert_int_equal(tsr_mig_store_remove(s, e[2].path, NULL), 0);
        assert_int_equal(list_into(s, e, 8, &n, NULL), 0);
        assert_int_equal(n, 3);
        /* Names that would leave the Pod's directory. */
        other = sample;
        snprintf(other.container, sizeof(other.container), "../x");
        assert_int_equal(tsr_mig_store_put(s, &other, NULL), TSR_EINVAL);
        other = sample;
        snprintf(other.pod_uid, sizeof(other.pod_uid), "..");
        assert_int_equal(tsr_mig_store_put(s, &other, NULL), TSR_EINVAL);
        tsr_mig_store_free(s);
}

/* Anything named like a marker that is not a regular file: listed corrupt, never a hang. */
static void test_files_not_regular(void **state)
{
        static const struct {
                const char *card, *kind;
        } rows[] = {{"GPU-d1", "a directory"}, {"GPU-f1", "a FIFO"}, {"GPU-l1", "a symbolic link"}};
        struct tsr_mig_marker_entry e[8];
        struct tsr_mig_store *s;
        char top[128], path[512], target[512];
        size_t n = 0;

        (void)state;
        snprintf(top, sizeof(top), "%s/hostile", root);
        assert_int_equal(mkdir(top, 0755), 0);
        snprintf(path, sizeof(path), "%s/pod-h", top);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/pod-h/c-main", top);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/pod-h/c-main/nvidia-mig-GPU-d1.json", top);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/pod-h/c-main/nvidia-mig-GPU-f1.json", top);
        assert_int_equal(mkfifo(path, 0644), 0);
        snprintf(target, sizeof(target), "%s/valid.json", top);
        write_file(target, valid);
        snprintf(path, sizeof(path), "%s/pod-h/c-main/nvidia-mig-GPU-l1.json", top);
        assert_int_equal(symlink(target, path), 0);
        assert_int_equal(tsr_mig_store_files_new(top, &s), 0);
        alarm(10); /* a blocking open of the FIFO would hang here: fail instead */
        assert_int_equal(list_into(s, e, 8, &n, NULL), 0);
        alarm(0);
        assert_int_equal(n, 3);
        for (size_t i = 0; i < 3; i++) {
                assert_true(e[i].corrupt);
                assert_string_equal(e[i].pod_uid, "pod-h");
                assert_string_equal(e[i].card, rows[i].card);
                assert_non_null(strstr(e[i].why, rows[i].kind));
        }
        tsr_mig_store_free(s);
}

/*
 * A Pod directory with more marker entries than TSR_MIG_POD_MARKERS_MAX (here 80, in two
 * containers) is one flooded entry; one with exactly that many is listed whole, and so are more
 * than the 256 entries a list used to hold in all.
 */
static void test_files_flood(void **state)
{
        struct tsr_mig_marker_entry *e = NULL;
        struct tsr_mig_store *s;
        char top[128], path[512];
        size_t n = 0, flooded = 0, whole = 0;

        (void)state;
        snprintf(top, sizeof(top), "%s/flood", root);
        assert_int_equal(mkdir(top, 0755), 0);
        for (int p = 0; p < 5; p++) {
                int count = p == 0 ? 80 : TSR_MIG_POD_MARKERS_MAX;

                snprintf(path, sizeof(path), "%s/pod-%d", top, p);
                assert_int_equal(mkdir(path, 0755), 0);
                for (int c = 0; c < 2; c++) {
                        snprintf(path, sizeof(path), "%s/pod-%d/c-c%d", top, p, c);
                        assert_int_equal(mkdir(path, 0755), 0);
                }
                for (int k = 0; k < count; k++) {
                        snprintf(path, sizeof(path), "%s/pod-%d/c-c%d/nvidia-mig-GPU-%d.json", top,
                                 p, k % 2, k);
                        write_file(path, "{}");
                }
        }
        assert_int_equal(tsr_mig_store_files_new(top, &s), 0);
        assert_int_equal(tsr_mig_store_list(s, &e, &n, NULL), 0);
        assert_int_equal(n, 1 + 4 * TSR_MIG_POD_MARKERS_MAX);
        for (size_t i = 0; i < n; i++) {
                assert_true(e[i].corrupt);
                if (!e[i].flooded) {
                        assert_string_not_equal(e[i].pod_uid, "pod-0");
                        whole++;
                        continue;
                }
                flooded++;
                assert_string_equal(e[i].pod_uid, "pod-0");
                assert_string_equal(e[i].container, "");
                assert_string_equal(e[i].card, "");
                snprintf(path, sizeof(path), "%s/pod-0", top);
                assert_string_equal(e[i].path, path);
                assert_non_null(strstr(e[i].why, "more than 64"));
        }
        assert_int_equal(flooded, 1);
        assert_int_equal(whole, 4 * TSR_MIG_POD_MARKERS_MAX);
        assert_true(tsr_mig_markers_hold_card(e, n, "GPU-any"));
        free(e);
        tsr_mig_store_free(s);
}

static void test_files_unreadable_root(void **state)
{
        struct tsr_mig_marker_entry e[2];
        struct tsr_mig_store *s;
        struct tsr_diag diag;
        char missing[128];
        size_t n = 7;

        (void)state;
        snprintf(missing, sizeof(missing), "%s/not-there", root);
        assert_int_equal(tsr_mig_store_files_new(missing, &s), 0);
        tsr_diag_clear(&diag);
        assert_int_equal(list_into(s, e, 2, &n, &diag), TSR_EIO);
        assert_non_null(strstr(diag.msg, "pods directory"));
        assert_int_equal(n, 7);
        tsr_mig_store_free(s);
}

static void test_memory_store(void **state)
{
        struct tsr_mig_marker_entry e[4];
        struct tsr_mig_marker b = sample;
        struct tsr_mig_store *s;
        size_t n = 0;

        (void)state;
        assert_int_equal(tsr_mig_store_memory_new(&s), 0);
        snprintf(b.pod_uid, sizeof(b.pod_uid), "a-first");
        b.gi_id = 1;
        snprintf(b.mig_uuid, sizeof(b.mig_uuid), "MIG-dddd");
        assert_int_equal(tsr_mig_store_put(s, &sample, NULL), 0);
        assert_int_equal(tsr_mig_store_put(s, &b, NULL), 0);
        assert_int_equal(tsr_mig_store_put(s, &b, NULL), 0); /* replaces */
        assert_int_equal(tsr_mig_store_memory_put_raw(s, "z-pod", "main", "GPU-aaaa", "{"), 0);
        assert_int_equal(list_into(s, e, 4, &n, NULL), 0);
        assert_int_equal(n, 3);
        assert_string_equal(e[1].path, "a-first/c-main/nvidia-mig-GPU-aaaa.json");
        assert_false(e[0].corrupt);
        assert_true(e[2].corrupt);
        assert_string_equal(e[2].pod_uid, "z-pod");
        assert_int_equal(tsr_mig_store_remove(s, e[0].path, NULL), 0);
        assert_int_equal(list_into(s, e, 4, &n, NULL), 0);
        assert_int_equal(n, 2);
        tsr_mig_store_free(s);
}

/*
 * A marker copied into another Pod's directory with its podUID rewritten (so its path matches):
 * both it and the genuine one are corrupt, naming each other, and so is a third claimant; the
 * same container's own marker on another card, and a different instance, are untouched.
 */
static void test_double_claims(void **state)
{
        struct tsr_mig_marker_entry e[8];
        struct tsr_mig_marker copy = sample, third = sample, other = sample;
        struct tsr_mig_store *s;
        size_t n = 0;

        (void)state;
        assert_int_equal(tsr_mig_store_memory_new(&s), 0);
        assert_int_equal(tsr_mig_store_put(s, &sample, NULL), 0);
        assert_int_equal(list_into(s, e, 8, &n, NULL), 0);
        assert_false(e[0].corrupt);
        snprintf(copy.pod_uid, sizeof(copy.pod_uid), "pod-b");
        assert_int_equal(tsr_mig_store_put(s, &copy, NULL), 0);
        snprintf(third.pod_uid, sizeof(third.pod_uid), "pod-c");
        snprintf(third.mig_uuid, sizeof(third.mig_uuid), "MIG-other-name"); /* ids still match */
        assert_int_equal(tsr_mig_store_put(s, &third, NULL), 0);
        snprintf(other.pod_uid, sizeof(other.pod_uid), "pod-d");
        other.gi_id = 5;
        other.ci_id = 1;
        snprintf(other.mig_uuid, sizeof(other.mig_uuid), "MIG-eeee");
        assert_int_equal(tsr_mig_store_put(s, &other, NULL), 0);
        assert_int_equal(list_into(s, e, 8, &n, NULL), 0);
        assert_int_equal(n, 4);
        /* Sorted by path: sample's UID (0000...) first, then pod-b, pod-c, pod-d. */
        assert_true(e[0].corrupt);
        assert_non_null(strstr(e[0].why, "also claimed by pod"));
        assert_true(e[1].corrupt);
        assert_non_null(strstr(e[1].why, sample.pod_uid));
        assert_true(e[2].corrupt);
        assert_false(e[3].corrupt);
        assert_string_equal(e[3].pod_uid, "pod-d");
        tsr_mig_store_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_encode_round_trip),
            cmocka_unit_test(test_fail_closed),
            cmocka_unit_test(test_unknown_keys_ignored),
            cmocka_unit_test(test_card_of_name),
            cmocka_unit_test(test_files_store),
            cmocka_unit_test(test_files_not_regular),
            cmocka_unit_test(test_files_flood),
            cmocka_unit_test(test_files_unreadable_root),
            cmocka_unit_test(test_memory_store),
            cmocka_unit_test(test_double_claims),
        };

        return cmocka_run_group_tests(tests, make_root, remove_root);
}
