/*
 * test_atomic_file.c - base/atomic_file: a new file, a replaced one with its mode, no temporary
 * file left beside it, and a failure that names the file and changes nothing.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/atomic_file.h"
#include "base/err.h"

static char dir[64];

static int make_dir(void **state)
{
        (void)state;
        snprintf(dir, sizeof(dir), "/tmp/tsr-atomic-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
        char cmd[128];

        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd);
}

static void read_back(const char *path, char *buf, size_t len)
{
        FILE *f = fopen(path, "r");
        size_t n;

        assert_non_null(f);
        n = fread(buf, 1, len - 1, f);
        buf[n] = '\0';
        fclose(f);
}

static size_t entries(void)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        size_t n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static void writes_and_replaces(void **state)
{
        char path[128], got[64];
        struct tsr_diag d;
        struct stat st;

        (void)state;
        snprintf(path, sizeof(path), "%s/state.json", dir);
        assert_int_equal(tsr_atomic_write(path, "one\n", 4, 0600, "test", &d), 0);
        read_back(path, got, sizeof(got));
        assert_string_equal(got, "one\n");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(tsr_atomic_write(path, "two, longer\n", 12, 0644, "test", &d), 0);
        read_back(path, got, sizeof(got));
        assert_string_equal(got, "two, longer\n");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0644);
        assert_int_equal(entries(), 1); /* no temporary file left */
}

static void failure_names_the_file(void **state)
{
        char path[128];
        struct tsr_diag d;

        (void)state;
        tsr_diag_clear(&d);
        snprintf(path, sizeof(path), "%s/missing/state.json", dir);
        assert_int_equal(tsr_atomic_write(path, "x", 1, 0644, "test", &d), TSR_EIO);
        assert_non_null(strstr(d.msg, "test: cannot write"));
        assert_non_null(strstr(d.msg, "missing"));
        assert_int_equal(access(path, F_OK), -1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(writes_and_replaces, make_dir, remove_dir),
            cmocka_unit_test_setup_teardown(failure_names_the_file, make_dir, remove_dir),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
