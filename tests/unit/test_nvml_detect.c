/*
 * test_nvml_detect.c - src/nvml/detect: the Devices capability from a backend.
 *
 * Covers: per-GPU MIG mode (current decides, a pending change is only a note); an H100 with MIG on
 * offers what core/capability offers (1g.10gb+me excluded, as the seed says) when the driver
 * agrees; a profile the driver lacks, or whose placements differ, is excluded with a note naming
 * it; a driver that does not answer placements leaves the catalog's set, with a note; an A30 and
 * an RTX PRO 6000 detected through the real NVML backend over the fake library give exactly the
 * fake backend's capabilities; too small an output array is TSR_ETOOBIG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "nvml/detect.h"
#include "nvml/fake.h"
#include "nvml/nvml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct notes {
        size_t n;
        char text[16][256];
};

static void collect(void *arg, unsigned gpu, const char *msg)
{
        struct notes *nt = arg;

        if (nt->n < 16)
                snprintf(nt->text[nt->n++], sizeof(nt->text[0]), "gpu %u: %s", gpu, msg);
}

static bool noted(const struct notes *nt, const char *needle)
{
        for (size_t i = 0; i < nt->n; i++)
                if (strstr(nt->text[i], needle))
                        return true;
        return false;
}

static int profile_index(const struct tsr_product *p, const char *name)
{
        const struct tsr_mig_profile *mp = tsr_product_profile(p, name);

        assert_non_null(mp);
        return (int)(mp - p->profiles);
}

static void test_modes_and_offer(void **state)
{
        struct tsr_fake_gpus *f;
        struct tsr_accel_cap caps[4], want;
        struct notes nt = {0};
        size_t n = 0;

        (void)state;
        /* GPU 0 on, GPU 1 on with off pending, GPU 2 off with on pending. */
        assert_int_equal(tsr_fake_gpus_from_spec("n", "NVIDIA H100 80GB HBM3:3:110:101", &f, NULL),
                         0);
        assert_int_equal(tsr_nvml_detect(&tsr_fake_gpu_ops, f, caps, 4, &n, collect, &nt, NULL), 0);
        assert_int_equal(n, 3);
        assert_true(caps[0].partitioned);
        assert_true(caps[1].partitioned);
        assert_false(caps[2].partitioned);
        assert_int_equal(caps[2].slice_slots, 128);
        assert_int_equal(caps[1].index, 1);
        assert_int_equal(strncmp(caps[0].uuid, "GPU-", 4), 0);
        assert_string_equal(caps[0].pci_bus_id, "00000000:8D:00.0"); /* the driver's bus id */
        assert_string_equal(caps[2].pci_bus_id, "00000000:95:00.0");
        tsr_capability_detect(caps[0].product, 0, caps[0].uuid, true, &want);
        assert_int_equal(caps[0].offered, want.offered);
        assert_false((caps[0].offered >> profile_index(caps[0].product, "1g.10gb+me")) & 1u);
        assert_int_equal(nt.n, 2);
        assert_true(noted(&nt, "gpu 1: MIG mode off is pending (current: on)"));
        assert_true(noted(&nt, "gpu 2: MIG mode on is pending (current: off)"));
        assert_int_equal(tsr_nvml_detect(&tsr_fake_gpu_ops, f, caps, 2, &n, NULL, NULL, NULL),
                         TSR_ETOOBIG);
        tsr_fake_gpus_free(f);
}

static void test_driver_disagrees(void **state)
{
        struct tsr_fake_gpus *f;
        struct tsr_accel_cap cap, want;
        struct notes nt = {0};
        const struct tsr_product *p;
        size_t n = 0;

        (void)state;
        assert_int_equal(tsr_fake_gpus_from_spec("n", "NVIDIA H100 80GB HBM3:1:mig", &f, NULL), 0);
        p = tsr_fake_gpus_product(f);
        /* The driver lacks 1g.20gb (id 15) and places 2g.20gb (id 14) only at 0 and 2. */
        assert_int_equal(tsr_fake_gpus_set_driver_starts(f, 15, 0), 0);
        assert_int_equal(tsr_fake_gpus_set_driver_starts(f, 14, UINT32_C(0x5)), 0);
        assert_int_equal(tsr_nvml_detect(&tsr_fake_gpu_ops, f, &cap, 1, &n, collect, &nt, NULL), 0);
        tsr_capability_detect(p, 0, cap.uuid, true, &want);
        assert_int_equal(cap.offered, want.offered & ~(UINT32_C(1) << profile_index(p, "1g.20gb")) &
                                          ~(UINT32_C(1) << profile_index(p, "2g.20gb")));
        assert_int_equal(nt.n, 2);
        assert_true(noted(&nt, "gpu 0: profile 1g.20gb excluded: the driver does not offer it"));
        assert_true(noted(&nt, "gpu 0: profile 2g.20gb excluded: the driver's placements (starts "
                               "0,2) differ from the catalog's (starts 0,2,4, size 2)"));
        tsr_fake_gpus_free(f);
}

static void test_driver_silent(void **state)
{
        struct tsr_fake_gpus *f;
        struct tsr_accel_cap cap, want;
        struct notes nt = {0};
        size_t n = 0;

        (void)state;
        assert_int_equal(tsr_fake_gpus_from_spec("n", "NVIDIA A30:1:mig", &f, NULL), 0);
        /* Placements are privileged: without mig/config the driver answers NO_PERMISSION. */
        tsr_fake_gpus_fail(f, TSR_FAKE_PLACEMENTS, TSR_EPERM, 100);
        assert_int_equal(tsr_nvml_detect(&tsr_fake_gpu_ops, f, &cap, 1, &n, collect, &nt, NULL), 0);
        tsr_capability_detect(tsr_fake_gpus_product(f), 0, cap.uuid, true, &want);
        assert_int_equal(cap.offered, want.offered);
        assert_int_equal(nt.n, 3); /* 1g.6gb, 2g.12gb, 4g.24gb */
        assert_true(noted(&nt, "gpu 0: profile 2g.12gb: the driver did not answer (fake "
                               "placements: operation not permitted); the catalog's placements "
                               "stand"));
        tsr_fake_gpus_free(f);
}

/* The same node through the NVML backend over the fake library and through the fake backend. */
static void same_through_nvml(const char *spec)
{
        const char *lib = getenv("TSR_FAKE_LIBNVML");
        struct tsr_fake_gpus *f;
        struct tsr_nvml *nv;
        struct tsr_accel_cap a[4], b[4];
        struct tsr_diag d;
        size_t na = 0, nb = 0;

        assert_non_null(lib);
        setenv("TSR_FAKE_NVML", spec, 1);
        if (tsr_nvml_open(lib, &nv, &d))
                fail_msg("%s", d.msg);
        assert_int_equal(tsr_fake_gpus_from_spec("fake-node", spec, &f, NULL), 0);
        assert_int_equal(tsr_nvml_detect(&tsr_nvml_gpu_ops, nv, a, 4, &na, NULL, NULL, NULL), 0);
        assert_int_equal(tsr_nvml_detect(&tsr_fake_gpu_ops, f, b, 4, &nb, NULL, NULL, NULL), 0);
        assert_int_equal(na, nb);
        for (size_t i = 0; i < na; i++) {
                assert_string_equal(a[i].uuid, b[i].uuid);
                assert_string_equal(a[i].pci_bus_id, b[i].pci_bus_id);
                assert_ptr_equal(a[i].product, b[i].product);
                assert_int_equal(a[i].partitioned, b[i].partitioned);
                assert_int_equal(a[i].offered, b[i].offered);
                assert_int_equal(a[i].slice_slots, b[i].slice_slots);
        }
        tsr_fake_gpus_free(f);
        tsr_nvml_close(nv);
}

static void test_through_nvml_backend(void **state)
{
        (void)state;
        same_through_nvml("NVIDIA A30:2:10");
        same_through_nvml("NVIDIA RTX PRO 6000 Blackwell Server Edition:1:mig");
        same_through_nvml("NVIDIA L4:1");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_modes_and_offer),
            cmocka_unit_test(test_driver_disagrees),
            cmocka_unit_test(test_driver_silent),
            cmocka_unit_test(test_through_nvml_backend),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
