/*
 * test_dm_isolation.c - devicemanager/isolation.h on its own, in a temporary directory:
 *   modes    "preload", "env" and "off" parse and print back; anything else is refused;
 *   install  into a directory it creates: the library copied byte for byte (mode 0644) and
 *            ld.so.preload holding the library's container path, two files written; a second
 *            install with the same library writes nothing (same inodes, same mtimes); a new
 *            library rewrites it alone, under a new inode (a rename, the old inode untouched for
 *            containers that mounted it), the preload file left as it was; no temporary file
 *            stays behind; a missing library fails naming its path and the off switch, as does
 *            an empty one or a directory, and nothing is written; an install directory whose
 *            parent is missing fails naming it;
 *   inject   a slice under preload: the two read-only mounts from the host directory, the
 *            memory, cores and budget file (unsafe bytes of the UID and container made '_');
 *            under env: LD_PRELOAD and the library only; off, no isolation (NULL), a refusal or
 *            an answer that is not a slice: nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "devicemanager/isolation.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[64];

static int setup(void **state)
{
        (void)state;
        snprintf(tmp, sizeof(tmp), "/tmp/tsr-dm-isolation.XXXXXX");
        return mkdtemp(tmp) ? 0 : -1;
}

/* Removes tmp and everything in it (two levels: the files, the install directory's files). */
static void remove_tree(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        char p[512];
        struct stat st;

        while (d && (e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                        continue;
                snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
                if (!lstat(p, &st) && S_ISDIR(st.st_mode))
                        remove_tree(p);
                else
                        unlink(p);
        }
        if (d)
                closedir(d);
        rmdir(dir);
}

static int teardown(void **state)
{
        (void)state;
        remove_tree(tmp);
        return 0;
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
}

/* The whole text of path (static buffer). */
static const char *slurp(const char *path)
{
        static char buf[4096];
        FILE *f = fopen(path, "r");
        size_t n;

        assert_non_null(f);
        n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

static size_t entries(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        size_t n = 0;

        assert_non_null(d);
        while ((e = readdir(d)))
                n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        closedir(d);
        return n;
}

static void test_modes(void **state)
{
        enum tsr_dm_isolation_mode m;

        (void)state;
        assert_int_equal(tsr_dm_isolation_parse_mode("preload", &m), 0);
        assert_int_equal(m, TSR_DM_ISOLATION_PRELOAD);
        assert_int_equal(tsr_dm_isolation_parse_mode("env", &m), 0);
        assert_int_equal(m, TSR_DM_ISOLATION_ENV);
        assert_int_equal(tsr_dm_isolation_parse_mode("off", &m), 0);
        assert_int_equal(m, TSR_DM_ISOLATION_OFF);
        assert_string_equal(tsr_dm_isolation_mode_name(TSR_DM_ISOLATION_PRELOAD), "preload");
        assert_string_equal(tsr_dm_isolation_mode_name(TSR_DM_ISOLATION_ENV), "env");
        assert_string_equal(tsr_dm_isolation_mode_name(TSR_DM_ISOLATION_OFF), "off");
        assert_int_equal(tsr_dm_isolation_parse_mode("Preload", &m), TSR_EINVAL);
        assert_int_equal(tsr_dm_isolation_parse_mode("", &m), TSR_EINVAL);
}

static void test_install(void **state)
{
        char lib[128], dir[128], so[192], pre[192];
        struct stat a, b, a2, b2;
        struct tsr_diag d;
        unsigned written;

        (void)state;
        snprintf(lib, sizeof(lib), "%s/lib.so", tmp);
        snprintf(dir, sizeof(dir), "%s/vgpu", tmp);
        snprintf(so, sizeof(so), "%s/libtessera-vgpu.so", dir);
        snprintf(pre, sizeof(pre), "%s/ld.so.preload", dir);
        write_file(lib, "\177ELF version one");

        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_isolation_install(lib, dir, &written, &d), 0);
        assert_int_equal(written, 2);
        assert_string_equal(slurp(so), "\177ELF version one");
        assert_string_equal(slurp(pre), "/usr/local/tessera/vgpu/libtessera-vgpu.so\n");
        assert_int_equal(stat(so, &a), 0);
        assert_int_equal(stat(pre, &b), 0);
        assert_int_equal(a.st_mode & 07777, 0644);
        assert_int_equal(b.st_mode & 07777, 0644);
        assert_int_equal(entries(dir), 2);

        /* the same library: nothing written, the files untouched */
        assert_int_equal(tsr_dm_isolation_install(lib, dir, &written, &d), 0);
        assert_int_equal(written, 0);
        assert_int_equal(stat(so, &a2), 0);
        assert_int_equal(stat(pre, &b2), 0);
        assert_true(a2.st_ino == a.st_ino && a2.st_mtim.tv_sec == a.st_mtim.tv_sec &&
                    a2.st_mtim.tv_nsec == a.st_mtim.tv_nsec);
        assert_true(b2.st_ino == b.st_ino && b2.st_mtim.tv_nsec == b.st_mtim.tv_nsec);

        /* a new library: it alone is replaced, by a rename */
        write_file(lib, "\177ELF version two, longer");
        assert_int_equal(tsr_dm_isolation_install(lib, dir, &written, &d), 0);
        assert_int_equal(written, 1);
        assert_string_equal(slurp(so), "\177ELF version two, longer");
        assert_int_equal(stat(so, &a2), 0);
        assert_int_equal(stat(pre, &b2), 0);
        assert_true(a2.st_ino != a.st_ino);
        assert_true(b2.st_ino == b.st_ino);
        assert_int_equal(entries(dir), 2);
}

static void test_install_refused(void **state)
{
        char lib[128], dir[128], sub[160];
        struct tsr_diag d;
        unsigned written = 9;

        (void)state;
        snprintf(lib, sizeof(lib), "%s/missing.so", tmp);
        snprintf(dir, sizeof(dir), "%s/vgpu", tmp);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_isolation_install(lib, dir, &written, &d), TSR_ENOTFOUND);
        assert_int_equal(written, 0);
        assert_non_null(strstr(d.msg, lib));
        assert_non_null(strstr(d.msg, "does not exist"));
        assert_non_null(strstr(d.msg, "--slice-isolation=off"));
        assert_int_equal(access(dir, F_OK), -1); /* nothing made */

        write_file(lib, "");
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_isolation_install(lib, dir, &written, &d), TSR_EINVAL);
        assert_non_null(strstr(d.msg, "is empty"));
        assert_int_equal(access(dir, F_OK), -1);

        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_isolation_install(tmp, dir, &written, &d), TSR_EINVAL);
        assert_non_null(strstr(d.msg, "is not a regular file"));

        write_file(lib, "\177ELF");
        snprintf(sub, sizeof(sub), "%s/no/such", tmp);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_isolation_install(lib, sub, &written, &d), TSR_EIO);
        assert_non_null(strstr(d.msg, sub));
        assert_int_equal(written, 0);
}

static const char *env(const struct tsr_dm_injection *in, const char *key)
{
        for (size_t i = 0; i < in->n_envs; i++)
                if (!strcmp(in->envs[i].key, key))
                        return in->envs[i].value;
        return NULL;
}

static void slice_answer(struct tsr_dm_answer *a, uint64_t mib, unsigned cores, const char *uid,
                         const char *container)
{
        memset(a, 0, sizeof(*a));
        a->code = TSR_DM_OK;
        snprintf(a->visible, sizeof(a->visible), "GPU-1");
        snprintf(a->container, sizeof(a->container), "%s", container);
        a->slice.granted = true;
        a->slice.memory_mib = mib;
        a->slice.cores = cores;
        snprintf(a->slice.uid, sizeof(a->slice.uid), "%s", uid);
}

static void test_inject(void **state)
{
        struct tsr_dm_isolation iso = {.mode = TSR_DM_ISOLATION_PRELOAD, .host_dir = "/host/v"};
        struct tsr_dm_answer a;
        struct tsr_dm_injection in;

        (void)state;
        slice_answer(&a, 24576, 30, "0b1e-77", "main");
        tsr_dm_isolation_inject(&iso, &a, &in);
        assert_int_equal(in.n_mounts, 2);
        assert_string_equal(in.mounts[0].host_path, "/host/v/libtessera-vgpu.so");
        assert_string_equal(in.mounts[0].container_path, TSR_DM_VGPU_CONTAINER_LIBRARY);
        assert_string_equal(in.mounts[1].host_path, "/host/v/ld.so.preload");
        assert_string_equal(in.mounts[1].container_path, "/etc/ld.so.preload");
        assert_int_equal(in.n_envs, 3);
        assert_string_equal(env(&in, "CUDA_DEVICE_MEMORY_LIMIT"), "24576m");
        assert_string_equal(env(&in, "CUDA_DEVICE_SM_LIMIT"), "30");
        assert_string_equal(env(&in, "CUDA_DEVICE_MEMORY_SHARED_CACHE"),
                            "/tmp/tessera-vgpu-0b1e-77-main.cache");

        slice_answer(&a, 1, 100, "u/../x y", "c");
        iso.mode = TSR_DM_ISOLATION_ENV;
        tsr_dm_isolation_inject(&iso, &a, &in);
        assert_int_equal(in.n_mounts, 1);
        assert_string_equal(in.mounts[0].host_path, "/host/v/libtessera-vgpu.so");
        assert_int_equal(in.n_envs, 4);
        assert_string_equal(env(&in, "LD_PRELOAD"), TSR_DM_VGPU_CONTAINER_LIBRARY);
        assert_string_equal(env(&in, "CUDA_DEVICE_MEMORY_LIMIT"), "1m");
        assert_string_equal(env(&in, "CUDA_DEVICE_SM_LIMIT"), "100");
        assert_string_equal(env(&in, "CUDA_DEVICE_MEMORY_SHARED_CACHE"),
                            "/tmp/tessera-vgpu-u_.._x_y-c.cache");

        iso.mode = TSR_DM_ISOLATION_OFF;
        tsr_dm_isolation_inject(&iso, &a, &in);
        assert_int_equal(in.n_mounts + in.n_envs, 0);
        tsr_dm_isolation_inject(NULL, &a, &in);
        assert_int_equal(in.n_mounts + in.n_envs, 0);
        iso.mode = TSR_DM_ISOLATION_PRELOAD;
        a.code = TSR_DM_FAILED_PRECONDITION;
        tsr_dm_isolation_inject(&iso, &a, &in);
        assert_int_equal(in.n_mounts + in.n_envs, 0);
        a.code = TSR_DM_OK;
        a.slice.granted = false; /* a whole card, a share, a partition */
        tsr_dm_isolation_inject(&iso, &a, &in);
        assert_int_equal(in.n_mounts + in.n_envs, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_modes),
            cmocka_unit_test_setup_teardown(test_install, setup, teardown),
            cmocka_unit_test_setup_teardown(test_install_refused, setup, teardown),
            cmocka_unit_test(test_inject),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
