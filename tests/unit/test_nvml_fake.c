/*
 * test_nvml_fake.c - src/nvml/fake: the fake backend's model, faults, hooks and persistence.
 *
 * Covers: the spec parser (modes, pending, bad specs); MIG mode switches (IN_USE with instances,
 * NOT_SUPPORTED without MIG, a pending change leaves current); injected faults fail exactly
 * `times` calls with the given error and change nothing; vanish, subdivide and carve; hooks run at
 * the named points in order; save/load round-trips the whole state byte for byte; auto-save writes
 * before the call returns; a child process that _exit()s at "gi_create:after" leaves the instance
 * on disk, one that dies at "ci_create:before" leaves the GPU instance without its compute
 * instance.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "nvml/fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct tsr_gpu_ops *const o = &tsr_fake_gpu_ops;

static struct tsr_fake_gpus *make(const char *spec)
{
        struct tsr_fake_gpus *f = NULL;
        struct tsr_diag d;

        if (tsr_fake_gpus_from_spec("node-a", spec, &f, &d))
                fail_msg("%s: %s", spec, d.msg);
        return f;
}

static size_t list(struct tsr_fake_gpus *f, unsigned gpu, struct tsr_gpu_instance *in)
{
        size_t n = 0;

        assert_int_equal(o->gi_list(f, gpu, in, TSR_GPU_INSTANCES_MAX, &n), 0);
        return n;
}

static void test_spec(void **state)
{
        struct tsr_fake_gpus *f;
        struct tsr_gpu_info info;
        struct tsr_diag d;

        (void)state;
        f = make("NVIDIA A100-SXM4-40GB:3:101:001");
        assert_int_equal(o->device_info(f, 0, &info), 0);
        assert_true(info.mig_current && !info.mig_pending);
        assert_int_equal(o->device_info(f, 1, &info), 0);
        assert_true(!info.mig_current && !info.mig_pending);
        assert_int_equal(o->device_info(f, 2, &info), 0);
        assert_true(info.mig_current && info.mig_pending);
        tsr_fake_gpus_free(f);
        f = make("NVIDIA L4:2:mig"); /* no MIG: the mode stays off */
        assert_int_equal(o->device_info(f, 1, &info), 0);
        assert_false(info.mig_capable || info.mig_current);
        tsr_fake_gpus_free(f);
        assert_int_equal(tsr_fake_gpus_from_spec("n", "NVIDIA Nope:1", &f, &d), TSR_EINVAL);
        assert_string_equal(d.msg, "unknown product \"NVIDIA Nope\"");
        assert_int_equal(tsr_fake_gpus_from_spec("n", "NVIDIA A30:65", &f, &d), TSR_EINVAL);
        assert_int_equal(tsr_fake_gpus_from_spec("n", "NVIDIA A30:2:1", &f, &d), TSR_EINVAL);
        assert_int_equal(tsr_fake_gpus_from_spec("n", "NVIDIA A30", &f, &d), TSR_EINVAL);
}

static void test_mig_modes(void **state)
{
        struct tsr_fake_gpus *f = make("NVIDIA A30:1");
        struct tsr_gpu_info info;
        unsigned gi;

        (void)state;
        assert_int_equal(o->gi_create(f, 0, 14, 0, &gi), TSR_ENOTSUP);
        assert_int_equal(tsr_fake_gpus_set_mig_pending(f, 0, true), 0);
        assert_int_equal(o->device_info(f, 0, &info), 0);
        assert_true(!info.mig_current && info.mig_pending);
        assert_int_equal(tsr_fake_gpus_set_mig_mode(f, 0, true), 0);
        assert_int_equal(o->gi_create(f, 0, 14, 0, &gi), 0);
        assert_int_equal(tsr_fake_gpus_set_mig_mode(f, 0, false), TSR_EINUSE);
        assert_int_equal(tsr_fake_gpus_set_mig_mode(f, 1, false), TSR_ENOTFOUND);
        tsr_fake_gpus_free(f);
        f = make("NVIDIA L4:1");
        assert_int_equal(tsr_fake_gpus_set_mig_mode(f, 0, true), TSR_ENOTSUP);
        tsr_fake_gpus_free(f);
}

static void test_faults(void **state)
{
        struct tsr_fake_gpus *f = make("NVIDIA H100 80GB HBM3:1:mig");
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        char uuid[TSR_GPU_UUID_MAX];
        unsigned gi, ci;
        size_t n;

        (void)state;
        tsr_fake_gpus_fail(f, TSR_FAKE_GI_CREATE, TSR_ENOSPC, 2);
        assert_int_equal(o->gi_create(f, 0, 19, 0, &gi), TSR_ENOSPC);
        assert_string_equal(o->error_detail(f), "fake gi_create: no free accelerator capacity");
        assert_int_equal(o->gi_create(f, 0, 19, 0, &gi), TSR_ENOSPC);
        assert_int_equal(list(f, 0, in), 0);
        assert_int_equal(o->gi_create(f, 0, 19, 0, &gi), 0);
        tsr_fake_gpus_fail(f, TSR_FAKE_CI_CREATE, TSR_EPERM, 1);
        assert_int_equal(o->ci_create(f, 0, gi, &ci, uuid), TSR_EPERM);
        assert_int_equal(o->ci_create(f, 0, gi, &ci, uuid), 0);
        tsr_fake_gpus_fail(f, TSR_FAKE_CI_DESTROY, TSR_EINUSE, 1);
        assert_int_equal(o->ci_destroy(f, 0, gi, ci), TSR_EINUSE);
        tsr_fake_gpus_fail(f, TSR_FAKE_GI_LIST, TSR_EBACKEND, 1);
        assert_int_equal(o->gi_list(f, 0, in, TSR_GPU_INSTANCES_MAX, &n), TSR_EBACKEND);
        assert_int_equal(list(f, 0, in), 1);
        assert_int_equal(in[0].n_ci, 1);
        tsr_fake_gpus_fail(f, TSR_FAKE_GI_DESTROY, TSR_EPERM, 5);
        tsr_fake_gpus_fail(f, TSR_FAKE_GI_DESTROY, 0, 0); /* cleared */
        assert_int_equal(o->ci_destroy(f, 0, gi, ci), 0);
        assert_int_equal(o->gi_destroy(f, 0, gi), 0);
        tsr_fake_gpus_free(f);
}

static void test_behind_our_back(void **state)
{
        struct tsr_fake_gpus *f = make("NVIDIA H100 80GB HBM3:1:mig");
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        unsigned a, b;

        (void)state;
        assert_int_equal(tsr_fake_gpus_carve(f, 0, 9, 4, true, &a), 0);
        assert_int_equal(tsr_fake_gpus_carve(f, 0, 19, 0, false, &b), 0);
        assert_int_equal(tsr_fake_gpus_carve(f, 0, 5, 0, false, &b), TSR_ENOSPC);
        assert_int_equal(list(f, 0, in), 2);
        assert_int_equal(in[1].gi_id, a);
        assert_int_equal(in[1].n_ci, 1);
        assert_false(tsr_gpu_instance_subdivided(&in[1]));
        assert_int_equal(tsr_fake_gpus_subdivide(f, 0, a), 0);
        assert_int_equal(list(f, 0, in), 2);
        assert_int_equal(in[1].n_ci, 2);
        assert_true(tsr_gpu_instance_subdivided(&in[1]));
        assert_int_equal(tsr_fake_gpus_subdivide(f, 0, in[0].gi_id), TSR_EINVAL); /* a 1g */
        assert_int_equal(tsr_fake_gpus_vanish(f, 0, a), 0);
        assert_int_equal(tsr_fake_gpus_vanish(f, 0, a), TSR_ENOTFOUND);
        assert_int_equal(list(f, 0, in), 1);
        tsr_fake_gpus_free(f);
}

struct trace {
        size_t n;
        char points[16][32];
        const char *path; /* when set, "after" points check the state is already saved */
        size_t saved_n;
};

static void record(void *arg, const char *point)
{
        struct trace *t = arg;

        if (t->path && strstr(point, ":after")) {
                struct tsr_fake_gpus *g;
                struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];

                assert_int_equal(tsr_fake_gpus_load(t->path, &g, NULL), 0);
                t->saved_n = list(g, 0, in);
                tsr_fake_gpus_free(g);
        }
        snprintf(t->points[t->n++], sizeof(t->points[0]), "%s", point);
}

static void test_hooks_and_autosave(void **state)
{
        char path[] = "/tmp/tsr-fake-XXXXXX";
        struct tsr_fake_gpus *f = make("NVIDIA H100 80GB HBM3:1:mig");
        struct trace t = {0};
        char uuid[TSR_GPU_UUID_MAX];
        unsigned gi, ci;
        int fd = mkstemp(path);

        (void)state;
        assert_true(fd >= 0);
        close(fd);
        t.path = path;
        assert_int_equal(tsr_fake_gpus_persist(f, path), 0);
        tsr_fake_gpus_set_hook(f, record, &t);
        assert_int_equal(o->gi_create(f, 0, 15, 2, &gi), 0);
        assert_int_equal(t.saved_n, 1); /* saved before "gi_create:after" */
        assert_int_equal(o->ci_create(f, 0, gi, &ci, uuid), 0);
        assert_int_equal(o->gi_destroy(f, 0, gi), TSR_EINUSE);
        assert_int_equal(o->ci_destroy(f, 0, gi, ci), 0);
        assert_int_equal(o->gi_destroy(f, 0, gi), 0);
        assert_int_equal(t.saved_n, 0);
        assert_int_equal(t.n, 9);
        assert_string_equal(t.points[0], "gi_create:before");
        assert_string_equal(t.points[1], "gi_create:after");
        assert_string_equal(t.points[2], "ci_create:before");
        assert_string_equal(t.points[3], "ci_create:after");
        assert_string_equal(t.points[4], "gi_destroy:before"); /* IN_USE: no "after" */
        assert_string_equal(t.points[5], "ci_destroy:before");
        assert_string_equal(t.points[6], "ci_destroy:after");
        assert_string_equal(t.points[7], "gi_destroy:before");
        assert_string_equal(t.points[8], "gi_destroy:after");
        tsr_fake_gpus_set_hook(f, NULL, NULL);
        assert_int_equal(tsr_fake_gpus_persist(f, NULL), 0);
        tsr_fake_gpus_free(f);
        unlink(path);
}

static char *slurp(const char *path)
{
        FILE *fp = fopen(path, "rb");
        char *s = calloc(1, 1 << 16);

        assert_non_null(fp);
        assert_non_null(s);
        assert_true(fread(s, 1, (1 << 16) - 1, fp) > 0);
        fclose(fp);
        return s;
}

static void test_save_load_roundtrip(void **state)
{
        char a[] = "/tmp/tsr-fake-a-XXXXXX", b[] = "/tmp/tsr-fake-b-XXXXXX";
        struct tsr_fake_gpus *f = make("NVIDIA RTX PRO 6000 Blackwell Server Edition:2:10:11"), *g;
        struct tsr_gpu_instance x[TSR_GPU_INSTANCES_MAX], y[TSR_GPU_INSTANCES_MAX];
        struct tsr_gpu_info fi, gi_;
        char uuid[TSR_GPU_UUID_MAX], *sa, *sb;
        unsigned id, ci;

        (void)state;
        close(mkstemp(a));
        close(mkstemp(b));
        assert_int_equal(o->gi_create(f, 0, 5, 0, &id), 0);
        assert_int_equal(o->ci_create(f, 0, id, &ci, uuid), 0);
        assert_int_equal(tsr_fake_gpus_carve(f, 0, 14, 9, true, &id), 0);
        assert_int_equal(tsr_fake_gpus_set_driver_starts(f, 67, 0), 0);
        assert_int_equal(tsr_fake_gpus_save(f, a), 0);
        assert_int_equal(tsr_fake_gpus_load(a, &g, NULL), 0);
        assert_int_equal(tsr_fake_gpus_save(g, b), 0);
        sa = slurp(a);
        sb = slurp(b);
        assert_string_equal(sa, sb);
        assert_int_equal(list(f, 0, x), list(g, 0, y));
        assert_memory_equal(x, y, 2 * sizeof(x[0]));
        assert_int_equal(o->device_info(f, 1, &fi), 0);
        assert_int_equal(o->device_info(g, 1, &gi_), 0);
        assert_memory_equal(&fi, &gi_, sizeof(fi));
        /* The next MIG UUID continues the sequence. */
        assert_int_equal(o->gi_create(f, 0, 14, 6, &id), 0);
        assert_int_equal(o->ci_create(f, 0, id, &ci, uuid), 0);
        assert_int_equal(o->gi_create(g, 0, 14, 6, &id), 0);
        assert_int_equal(o->ci_create(g, 0, id, &ci, sa), 0);
        assert_string_equal(uuid, sa);
        free(sa);
        free(sb);
        tsr_fake_gpus_free(f);
        tsr_fake_gpus_free(g);
        assert_int_equal(tsr_fake_gpus_load("/nonexistent/state.json", &g, NULL), TSR_EIO);
        assert_int_equal(unlink(b), 0);
        {
                /* A broken state names what is wrong (it said only "malformed input"). */
                static const struct {
                        const char *text, *msg;
                } bad[] = {
                    {"{\"node\": 1}", "Expected string, got integer"},
                    {"{\"node\"", "line 1 column 7: ':' expected near end of file"},
                    {"{\"node\":\"n\",\"product\":\"NVIDIA Z9\",\"seq\":0,\"gpus\":[],"
                     "\"driver_starts\":[]}",
                     "product \"NVIDIA Z9\" is not in the catalog"},
                };
                struct tsr_diag d;

                for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                        FILE *fp = fopen(a, "w");

                        fputs(bad[i].text, fp);
                        fclose(fp);
                        tsr_diag_clear(&d);
                        assert_int_equal(tsr_fake_gpus_load(a, &g, &d), TSR_EPARSE);
                        assert_string_equal(d.msg, bad[i].msg);
                }
        }
        unlink(a);
}

static char crash_point[32];

static void crash_at(void *arg, const char *point)
{
        if (!strcmp(point, arg))
                _exit(0);
}

/* Runs gi_create then ci_create in a child that dies at point; returns the state on disk. */
static struct tsr_fake_gpus *crash(const char *point, const char *path)
{
        struct tsr_fake_gpus *g;
        pid_t pid = fork();
        int status;

        assert_true(pid >= 0);
        if (pid == 0) {
                struct tsr_fake_gpus *f = make("NVIDIA H100 80GB HBM3:1:mig");
                char uuid[TSR_GPU_UUID_MAX];
                unsigned gi, ci;

                if (tsr_fake_gpus_persist(f, path))
                        _exit(2);
                snprintf(crash_point, sizeof(crash_point), "%s", point);
                tsr_fake_gpus_set_hook(f, crash_at, crash_point);
                if (o->gi_create(f, 0, 9, 0, &gi) || o->ci_create(f, 0, gi, &ci, uuid))
                        _exit(3);
                _exit(4); /* never reached the crash point */
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(tsr_fake_gpus_load(path, &g, NULL), 0);
        return g;
}

static void test_crash_points(void **state)
{
        char path[] = "/tmp/tsr-fake-crash-XXXXXX";
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_fake_gpus *g;

        (void)state;
        close(mkstemp(path));
        g = crash("gi_create:after", path);
        assert_int_equal(list(g, 0, in), 1);
        assert_int_equal(in[0].n_ci, 0);
        tsr_fake_gpus_free(g);
        g = crash("ci_create:before", path);
        assert_int_equal(list(g, 0, in), 1);
        assert_int_equal(in[0].n_ci, 0);
        tsr_fake_gpus_free(g);
        g = crash("ci_create:after", path);
        assert_int_equal(list(g, 0, in), 1);
        assert_int_equal(in[0].n_ci, 1);
        tsr_fake_gpus_free(g);
        g = crash("gi_create:before", path);
        assert_int_equal(list(g, 0, in), 0);
        tsr_fake_gpus_free(g);
        unlink(path);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_spec),
            cmocka_unit_test(test_mig_modes),
            cmocka_unit_test(test_faults),
            cmocka_unit_test(test_behind_our_back),
            cmocka_unit_test(test_hooks_and_autosave),
            cmocka_unit_test(test_save_load_roundtrip),
            cmocka_unit_test(test_crash_points),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
