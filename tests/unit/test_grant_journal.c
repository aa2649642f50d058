/*
 * test_grant_journal.c - codec/grant_journal.h: grants of every mode encode and decode back the
 * same; each refusal the header names fails the whole journal with a message naming the grant and
 * field; and devicemanager/grant_file.h: a missing file is empty, a save replaces the file whole,
 * anything but a regular file or a file past the size cap is refused, naming the path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/grant_journal.h"
#include "devicemanager/grant_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct tsr_grant grant(const char *uid, const char *container, enum tsr_mode mode)
{
        struct tsr_grant g;
        struct tsr_accel_allocation *aa = &g.alloc.accels[0];

        memset(&g, 0, sizeof(g));
        snprintf(g.uid, sizeof(g.uid), "%s", uid);
        snprintf(g.ns, sizeof(g.ns), "team-a");
        snprintf(g.name, sizeof(g.name), "pod-%s", uid);
        snprintf(g.alloc.container, sizeof(g.alloc.container), "%s", container);
        snprintf(g.alloc.group_id, sizeof(g.alloc.group_id), "h100");
        snprintf(g.alloc.manufacturer, sizeof(g.alloc.manufacturer), "nvidia");
        g.alloc.n = 1;
        snprintf(aa->id, sizeof(aa->id), "GPU-1");
        aa->mode = mode;
        aa->allocated = mode == TSR_MODE_PARTITIONED ? 200000 : 1000000;
        if (mode == TSR_MODE_PARTITIONED) {
                snprintf(aa->profile, sizeof(aa->profile), "1g.10gb");
                aa->start = 2;
                aa->length = 1;
                snprintf(aa->physical_id, sizeof(aa->physical_id), "MIG-abc");
        }
        g.alloc.n_device_ids = 1;
        snprintf(g.alloc.device_ids[0], sizeof(g.alloc.device_ids[0]), "h100:GPU-1:0000");
        return g;
}

static void test_round_trip(void **state)
{
        struct tsr_grant in[3] = {grant("u1", "main", TSR_MODE_EXCLUSIVE),
                                  grant("u2", "main", TSR_MODE_PARTITIONED),
                                  grant("u1", "second", TSR_MODE_SHARED)};
        struct tsr_grant *out = NULL;
        struct tsr_diag d;
        char *text = NULL;
        size_t n = 0;

        (void)state;
        assert_int_equal(tsr_grant_journal_encode(in, 3, &text), 0);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_grant_journal_decode(text, strlen(text), &out, &n, &d), 0);
        assert_int_equal(n, 3);
        for (size_t i = 0; i < 3; i++) {
                assert_string_equal(out[i].uid, in[i].uid);
                assert_string_equal(out[i].ns, in[i].ns);
                assert_string_equal(out[i].name, in[i].name);
                assert_string_equal(out[i].alloc.container, in[i].alloc.container);
                assert_int_equal(out[i].alloc.accels[0].mode, in[i].alloc.accels[0].mode);
                assert_int_equal(out[i].alloc.accels[0].allocated, in[i].alloc.accels[0].allocated);
                assert_string_equal(out[i].alloc.device_ids[0], in[i].alloc.device_ids[0]);
        }
        assert_string_equal(out[1].alloc.accels[0].physical_id, "MIG-abc");
        assert_int_equal(out[1].alloc.accels[0].start, 2);
        free(out);
        free(text);
        assert_int_equal(tsr_grant_journal_encode(NULL, 0, &text), 0);
        assert_string_equal(
            text, "{\"grants\":[],\"kind\":\"tessera.device-manager.grants\",\"version\":1}");
        free(text);
}

static void refused(const char *text, const char *want)
{
        struct tsr_grant *out = NULL;
        struct tsr_diag d;
        size_t n = 0;

        tsr_diag_clear(&d);
        assert_int_equal(tsr_grant_journal_decode(text, strlen(text), &out, &n, &d), TSR_EPARSE);
        assert_null(out);
        if (!strstr(d.msg, want))
                fail_msg("\"%s\" refused as \"%s\", want \"%s\"", text, d.msg, want);
}

#define HEAD "{\"kind\":\"tessera.device-manager.grants\",\"version\":1,\"grants\":"

static void test_refusals(void **state)
{
        struct tsr_grant g = grant("u1", "main", TSR_MODE_EXCLUSIVE);
        char *text = NULL, *two, *cut;

        (void)state;
        refused("[]", "not a JSON object");
        refused("{", "line 1");
        refused("{\"kind\":\"other\",\"version\":1,\"grants\":[]}", "\"kind\"");
        refused("{\"kind\":\"tessera.device-manager.grants\",\"version\":2,\"grants\":[]}",
                "\"version\" is not 1");
        refused(HEAD "{}}", "\"grants\" is not an array");
        refused(HEAD "[7]}", "grant 0 is not an object");
        refused(HEAD "[{\"namespace\":\"a\",\"name\":\"b\",\"allocation\":{}}]}",
                "grant 0: \"podUID\" is missing");
        refused(HEAD "[{\"podUID\":\"u\",\"namespace\":\"a\",\"name\":\"\",\"allocation\":{}}]}",
                "grant 0: \"name\" is missing, empty");
        refused(HEAD "[{\"podUID\":\"u\",\"namespace\":\"a\",\"name\":\"b\"}]}",
                "grant 0: \"allocation\" is missing");
        refused(HEAD "[{\"podUID\":\"u\",\"namespace\":\"a\",\"name\":\"b\",\"allocation\":{}}]}",
                "holds 0 containers, not one");
        refused(HEAD "[{\"podUID\":\"u\",\"namespace\":\"a\",\"name\":\"b\",\"allocation\":"
                     "{\"main\":{\"devices\":7}}}]}",
                "grant 0: ");
        /* a repeated (Pod, container) and a torn file */
        assert_int_equal(tsr_grant_journal_encode((struct tsr_grant[]){g, g}, 2, &text), 0);
        refused(text, "grant 1 repeats grant 0 (Pod u1, container main)");
        two = text;
        cut = strdup(two);
        cut[strlen(cut) / 2] = '\0';
        refused(cut, "grant journal: line 1");
        free(cut);
        free(two);
}

static void test_file(void **state)
{
        char dir[] = "/tmp/tsr-grant-file-XXXXXX", path[96], cmd[160];
        struct tsr_grant g = grant("u1", "main", TSR_MODE_SLICED), *out = NULL;
        struct tsr_diag d;
        size_t n = 7;
        FILE *f;

        (void)state;
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/grants.json", dir);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_grant_file_load(path, &out, &n, &d), 0);
        assert_int_equal(n, 0);
        assert_null(out);
        assert_int_equal(tsr_dm_grant_file_save(path, &g, 1, &d), 0);
        assert_int_equal(tsr_dm_grant_file_load(path, &out, &n, &d), 0);
        assert_int_equal(n, 1);
        assert_string_equal(out[0].uid, "u1");
        free(out);
        assert_int_equal(tsr_dm_grant_file_save(path, NULL, 0, &d), 0);
        assert_int_equal(tsr_dm_grant_file_load(path, &out, &n, &d), 0);
        assert_int_equal(n, 0);
        /* refused whole, naming the path */
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(HEAD "[{}]}", f);
        fclose(f);
        assert_int_equal(tsr_dm_grant_file_load(path, &out, &n, &d), TSR_EPARSE);
        assert_non_null(strstr(d.msg, path));
        assert_int_equal(unlink(path), 0);
        assert_int_equal(mkdir(path, 0700), 0);
        assert_int_equal(tsr_dm_grant_file_load(path, &out, &n, &d), TSR_EPARSE);
        assert_non_null(strstr(d.msg, "a directory, not a regular file"));
        assert_int_equal(rmdir(path), 0);
        assert_int_equal(symlink("/etc/hostname", path), 0);
        assert_int_equal(tsr_dm_grant_file_load(path, &out, &n, &d), TSR_EPARSE);
        assert_non_null(strstr(d.msg, "a symbolic link"));
        assert_int_equal(unlink(path), 0);
        f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(fseek(f, TSR_GRANT_FILE_MAX, SEEK_SET), 0);
        fputc(' ', f);
        fclose(f);
        assert_int_equal(tsr_dm_grant_file_load(path, &out, &n, &d), TSR_EPARSE);
        assert_non_null(strstr(d.msg, "is over"));
        /* a save that cannot write fails, naming the journal */
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(tsr_dm_grant_file_save(path, &g, 1, &d), TSR_EIO);
        assert_non_null(strstr(d.msg, "grant journal"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_trip),
            cmocka_unit_test(test_refusals),
            cmocka_unit_test(test_file),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
