/*
 * test_nvml_backend.c - src/nvml/nvml.c run for real against the fake NVML library
 * (tests/support/fake_libnvml.c, path in $TSR_FAKE_LIBNVML).
 *
 * Covers: a missing library ("not found: is the NVIDIA driver installed?"), a library whose
 * nvmlInit_v2 fails (the driver's message kept); device count and info identical to the fake
 * backend's (name, UUID, bus id, memory), MIG current vs pending per GPU; profile info by NVML
 * index (ids 19/9/5 on an H100, TSR_ENOTSUP for a profile the product lacks, TSR_EINVAL past the
 * last index); possible placements; create GI at a placement, whole CI with its MIG UUID, list in
 * placement order; INSUFFICIENT_RESOURCES on overlap and on an illegal start; IN_USE on GI destroy
 * with a CI alive, then destroy CI then GI; injected NO_PERMISSION through the library's model; a
 * vanished instance (NOT_FOUND); a hand-subdivided one (two CIs, reported as subdivided); a MIG-off
 * GPU lists nothing; a saved state is what a second open sees.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "fake_libnvml.h"
#include "nvml/fake.h"
#include "nvml/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define H100_SPEC "NVIDIA H100 80GB HBM3:2:10:11"

struct fx {
        struct tsr_nvml *n;
        struct tsr_fake_gpus *model; /* the library's own model */
};

static const char *lib_path(void)
{
        const char *p = getenv("TSR_FAKE_LIBNVML");

        if (!p)
                fail_msg("TSR_FAKE_LIBNVML is not set");
        return p;
}

static struct tsr_fake_gpus *library_model(void)
{
        void *dl = dlopen(lib_path(), RTLD_NOW | RTLD_NOLOAD);
        struct tsr_fake_gpus *(*model)(void);
        void *sym;

        assert_non_null(dl);
        sym = dlsym(dl, "tsr_fake_nvml_model");
        assert_non_null(sym);
        memcpy(&model, &sym, sizeof(sym));
        dlclose(dl);
        return model();
}

static int setup(void **state)
{
        static struct fx fx;
        struct tsr_diag d;

        setenv("TSR_FAKE_NVML", H100_SPEC, 1);
        unsetenv("TSR_FAKE_NVML_STATE");
        if (tsr_nvml_open(lib_path(), &fx.n, &d))
                fail_msg("%s", d.msg);
        fx.model = library_model();
        assert_non_null(fx.model);
        *state = &fx;
        return 0;
}

static int teardown(void **state)
{
        struct fx *fx = *state;

        tsr_nvml_close(fx->n);
        return 0;
}

static void test_open_missing_library(void **state)
{
        struct tsr_nvml *n = NULL;
        struct tsr_diag d;

        (void)state;
        assert_int_equal(tsr_nvml_open("/nonexistent/libnvidia-ml.so.1", &n, &d), TSR_ENOTFOUND);
        assert_null(n);
        assert_non_null(strstr(d.msg, "NVML library /nonexistent/libnvidia-ml.so.1 not found: "
                                      "is the NVIDIA driver installed?"));
}

static void test_open_init_fails(void **state)
{
        struct tsr_nvml *n = NULL;
        struct tsr_diag d;

        (void)state;
        unsetenv("TSR_FAKE_NVML");
        unsetenv("TSR_FAKE_NVML_STATE");
        assert_int_equal(tsr_nvml_open(lib_path(), &n, &d), TSR_EBACKEND);
        assert_string_equal(d.msg, "nvmlInit_v2: Driver Not Loaded");
}

static void test_devices_match_fake(void **state)
{
        struct fx *fx = *state;
        struct tsr_fake_gpus *ref;
        char version[64];
        unsigned count = 0;

        assert_int_equal(tsr_fake_gpus_from_spec("fake-node", H100_SPEC, &ref, NULL), 0);
        assert_int_equal(tsr_nvml_gpu_ops.driver_version(fx->n, version, sizeof(version)), 0);
        assert_string_equal(version, "570.133.20-fake");
        assert_int_equal(tsr_nvml_gpu_ops.device_count(fx->n, &count), 0);
        assert_int_equal(count, 2);
        for (unsigned g = 0; g < count; g++) {
                struct tsr_gpu_info got, want;

                assert_int_equal(tsr_nvml_gpu_ops.device_info(fx->n, g, &got), 0);
                assert_int_equal(tsr_fake_gpu_ops.device_info(ref, g, &want), 0);
                assert_string_equal(got.name, "NVIDIA H100 80GB HBM3");
                assert_string_equal(got.uuid, want.uuid);
                assert_string_equal(got.bus_id, want.bus_id);
                assert_int_equal(got.memory_mib, 81920);
                assert_true(got.mig_capable);
                assert_int_equal(got.mig_current, g == 0);
                assert_true(got.mig_pending);
        }
        assert_int_equal(tsr_nvml_gpu_ops.device_info(fx->n, 2, &(struct tsr_gpu_info){0}),
                         TSR_EINVAL);
        tsr_fake_gpus_free(ref);
}

static void test_profiles_and_placements(void **state)
{
        struct fx *fx = *state;
        struct tsr_gpu_profile_info p;
        struct tsr_gpu_placement pl[TSR_GPU_PLACEMENTS_MAX];
        size_t n = 0;

        assert_int_equal(tsr_nvml_gpu_ops.profile_info(fx->n, 0, 0x0, &p), 0);
        assert_int_equal(p.id, 19);
        assert_int_equal(p.slices, 1);
        assert_int_equal(p.instance_count, 7);
        assert_int_equal(tsr_nvml_gpu_ops.profile_info(fx->n, 0, 0x2, &p), 0);
        assert_int_equal(p.id, 9);
        assert_int_equal(p.slices, 3);
        assert_int_equal(tsr_nvml_gpu_ops.profile_info(fx->n, 0, 0x11, &p), TSR_ENOTSUP);
        assert_string_equal(tsr_nvml_gpu_ops.error_detail(fx->n),
                            "nvmlDeviceGetGpuInstanceProfileInfo: Not Supported");
        assert_int_equal(tsr_nvml_gpu_ops.profile_info(fx->n, 0, 0x12, &p), TSR_EINVAL);

        assert_int_equal(tsr_nvml_gpu_ops.placements(fx->n, 0, 19, pl, TSR_GPU_PLACEMENTS_MAX, &n),
                         0);
        assert_int_equal(n, 7);
        for (unsigned i = 0; i < 7; i++) {
                assert_int_equal(pl[i].start, i);
                assert_int_equal(pl[i].size, 1);
        }
        assert_int_equal(tsr_nvml_gpu_ops.placements(fx->n, 0, 9, pl, TSR_GPU_PLACEMENTS_MAX, &n),
                         0);
        assert_int_equal(n, 2);
        assert_int_equal(pl[1].start, 4);
        assert_int_equal(pl[1].size, 4);
        assert_int_equal(tsr_nvml_gpu_ops.placements(fx->n, 0, 19, pl, 3, &n), TSR_ETOOBIG);
}

static void test_carve_list_teardown(void **state)
{
        struct fx *fx = *state;
        const struct tsr_gpu_ops *o = &tsr_nvml_gpu_ops;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        char uuid[TSR_GPU_UUID_MAX];
        unsigned gi3, gi1, ci, other;
        size_t n = 0;

        assert_int_equal(o->gi_create(fx->n, 0, 9, 4, &gi3), 0);
        assert_int_equal(o->gi_create(fx->n, 0, 19, 0, &gi1), 0);
        assert_int_not_equal(gi1, gi3);
        /* 4g at 0 overlaps the 1g at 0; a 1g cannot start at 7. */
        assert_int_equal(o->gi_create(fx->n, 0, 5, 0, &other), TSR_ENOSPC);
        assert_string_equal(o->error_detail(fx->n),
                            "nvmlDeviceCreateGpuInstanceWithPlacement: Insufficient Resources");
        assert_int_equal(o->gi_create(fx->n, 0, 19, 7, &other), TSR_ENOSPC);
        /* MIG off on GPU 1. */
        assert_int_equal(o->gi_create(fx->n, 1, 19, 0, &other), TSR_ENOTSUP);

        assert_int_equal(o->ci_create(fx->n, 0, gi3, &ci, uuid), 0);
        assert_int_equal(strncmp(uuid, "MIG-", 4), 0);
        assert_int_equal(o->gi_list(fx->n, 0, in, TSR_GPU_INSTANCES_MAX, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(in[0].gi_id, gi1);
        assert_int_equal(in[0].n_ci, 0);
        assert_int_equal(in[1].gi_id, gi3);
        assert_int_equal(in[1].gi_profile_id, 9);
        assert_int_equal(in[1].start, 4);
        assert_int_equal(in[1].size, 4);
        assert_int_equal(in[1].slices, 3);
        assert_int_equal(in[1].n_ci, 1);
        assert_int_equal(in[1].ci_id, ci);
        assert_int_equal(in[1].ci_slices, 3);
        assert_string_equal(in[1].mig_uuid, uuid);
        assert_false(tsr_gpu_instance_subdivided(&in[1]));
        assert_int_equal(o->gi_list(fx->n, 0, in, 1, &n), TSR_ETOOBIG);

        assert_int_equal(o->gi_destroy(fx->n, 0, gi3), TSR_EINUSE);
        assert_string_equal(o->error_detail(fx->n),
                            "nvmlGpuInstanceDestroy: In use by another client");
        assert_int_equal(o->ci_destroy(fx->n, 0, gi3, ci), 0);
        assert_int_equal(o->ci_destroy(fx->n, 0, gi3, ci), TSR_ENOTFOUND);
        assert_int_equal(o->gi_destroy(fx->n, 0, gi3), 0);
        assert_int_equal(o->gi_destroy(fx->n, 0, gi1), 0);
        assert_int_equal(o->gi_destroy(fx->n, 0, gi1), TSR_ENOTFOUND);
        assert_int_equal(o->gi_list(fx->n, 0, in, TSR_GPU_INSTANCES_MAX, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(o->gi_list(fx->n, 1, in, TSR_GPU_INSTANCES_MAX, &n), 0);
        assert_int_equal(n, 0);
}

static void test_faults_through_library(void **state)
{
        struct fx *fx = *state;
        const struct tsr_gpu_ops *o = &tsr_nvml_gpu_ops;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        char uuid[TSR_GPU_UUID_MAX];
        unsigned gi, gi2, ci;
        size_t n = 0;

        tsr_fake_gpus_fail(fx->model, TSR_FAKE_GI_CREATE, TSR_EPERM, 1);
        assert_int_equal(o->gi_create(fx->n, 0, 14, 0, &gi), TSR_EPERM);
        assert_string_equal(o->error_detail(fx->n),
                            "nvmlDeviceCreateGpuInstanceWithPlacement: Insufficient Permissions");
        assert_int_equal(o->gi_create(fx->n, 0, 14, 0, &gi), 0);

        /* Someone destroys it behind our back. */
        assert_int_equal(tsr_fake_gpus_vanish(fx->model, 0, gi), 0);
        assert_int_equal(o->gi_destroy(fx->n, 0, gi), TSR_ENOTFOUND);

        /* Someone subdivides a 3g into 1c + 2c compute instances. */
        assert_int_equal(o->gi_create(fx->n, 0, 9, 0, &gi2), 0);
        assert_int_equal(o->ci_create(fx->n, 0, gi2, &ci, uuid), 0);
        assert_int_equal(tsr_fake_gpus_subdivide(fx->model, 0, gi2), 0);
        assert_int_equal(o->gi_list(fx->n, 0, in, TSR_GPU_INSTANCES_MAX, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(in[0].n_ci, 2);
        assert_true(tsr_gpu_instance_subdivided(&in[0]));
        assert_int_equal(o->ci_destroy(fx->n, 0, gi2, 0), 0);
        assert_int_equal(o->ci_destroy(fx->n, 0, gi2, 1), 0);
        assert_int_equal(o->gi_destroy(fx->n, 0, gi2), 0);
}

static void test_state_file(void **state)
{
        char path[] = "/tmp/tsr-nvml-state-XXXXXX";
        struct tsr_fake_gpus *f;
        struct tsr_nvml *n;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_diag d;
        unsigned gi;
        size_t ni = 0;
        int fd = mkstemp(path);

        (void)state;
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(tsr_fake_gpus_from_spec("fake-node", "NVIDIA A30:1:mig", &f, NULL), 0);
        assert_int_equal(tsr_fake_gpus_carve(f, 0, 5, 2, true, &gi), 0);
        assert_int_equal(tsr_fake_gpus_save(f, path), 0);
        tsr_fake_gpus_free(f);

        setenv("TSR_FAKE_NVML_STATE", path, 1);
        if (tsr_nvml_open(lib_path(), &n, &d))
                fail_msg("%s", d.msg);
        assert_int_equal(tsr_nvml_gpu_ops.gi_list(n, 0, in, TSR_GPU_INSTANCES_MAX, &ni), 0);
        assert_int_equal(ni, 1);
        assert_int_equal(in[0].gi_profile_id, 5);
        assert_int_equal(in[0].start, 2);
        assert_int_equal(in[0].n_ci, 1);
        /* The library saves every change back: a destroy is on disk once the call returns. */
        assert_int_equal(tsr_nvml_gpu_ops.ci_destroy(n, 0, in[0].gi_id, in[0].ci_id), 0);
        assert_int_equal(tsr_fake_gpus_load(path, &f, NULL), 0);
        assert_int_equal(tsr_fake_gpu_ops.gi_list(f, 0, in, TSR_GPU_INSTANCES_MAX, &ni), 0);
        assert_int_equal(in[0].n_ci, 0);
        tsr_fake_gpus_free(f);
        tsr_nvml_close(n);
        unsetenv("TSR_FAKE_NVML_STATE");
        unlink(path);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_open_missing_library),
            cmocka_unit_test(test_open_init_fails),
            cmocka_unit_test_setup_teardown(test_devices_match_fake, setup, teardown),
            cmocka_unit_test_setup_teardown(test_profiles_and_placements, setup, teardown),
            cmocka_unit_test_setup_teardown(test_carve_list_teardown, setup, teardown),
            cmocka_unit_test_setup_teardown(test_faults_through_library, setup, teardown),
            cmocka_unit_test(test_state_file),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
