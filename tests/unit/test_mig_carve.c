/*
 * test_mig_carve.c - mig/carve.h's reserve order on a fake H100 node: create at the pack-first
 * lowest free start with the marker written; reuse after a restart (new store and reclaimer
 * objects over the same directory and hardware); reuse failing closed when the instance is gone
 * or recreated; adoption of an out-of-band instance, refused while a corrupt marker names its card
 * or an annotation claims it; a failed compute instance undoing its GPU instance; an un-reclaimed
 * instance never double-booked (the replacement gap); tsr_mig_held reading back the instance a
 * container holds, live, and failing closed where test_dm_agent's sidecar cases do not reach (a
 * corrupt marker, a profile detection excluded, a subdivided instance, an unreadable GPU),
 * writing nothing; a flood of markers in one Pod's directory refusing that Pod only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "support/mig_node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

static int make_root(void **state)
{
        (void)state;
        snprintf(root, sizeof(root), "/tmp/tsr-mig-carve-XXXXXX");
        return mkdtemp(root) ? 0 : -1;
}

static int remove_root(void **state)
{
        char cmd[128];

        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        return system(cmd) == 0 ? 0 : -1;
}

static void test_create_packs_and_marks(void **state)
{
        static struct mx_node n;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.how, TSR_MIG_CREATED);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.gpu, 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.marker.start, 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.marker.length, 4);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.marker.compute_slices, 3);
        assert_string_equal(mx_pod(&n, "pod-a")->grant.marker.card, n.caps[0].uuid);
        /* pack: the second goes to the same GPU, at the next legal start */
        assert_int_equal(mx_allocate(&n, "pod-b", "1g.10gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-b")->grant.gpu, 0);
        assert_int_equal(mx_pod(&n, "pod-b")->grant.marker.start, 4);
        assert_int_equal(mx_instances(&n, 0, in), 2);
        assert_string_equal(in[1].mig_uuid, mx_pod(&n, "pod-b")->grant.marker.mig_uuid);
        assert_int_equal(mx_markers(&n), 2);
        mx_check(&n, true);
        mx_release(&n);
}

static void test_reuse_after_restart(void **state)
{
        static struct mx_node n;
        struct tsr_mig_grant first;
        char dir[128], path[160];

        (void)state;
        snprintf(dir, sizeof(dir), "%s/reuse", root);
        assert_int_equal(mkdir(dir, 0755), 0);
        snprintf(path, sizeof(path), "%s/gpus.json", root);
        mx_init(&n, dir);
        assert_int_equal(mx_allocate(&n, "pod-a", "2g.20gb", NULL), 0);
        first = mx_pod(&n, "pod-a")->grant;
        assert_int_equal(tsr_fake_gpus_save(n.fake, path), 0);
        /* restart: new objects, same directory and hardware */
        tsr_mig_reclaimer_free(n.reclaimer);
        tsr_mig_store_free(n.store);
        tsr_fake_gpus_free(n.fake);
        {
                struct tsr_fake_gpus *f;

                assert_int_equal(tsr_fake_gpus_load(path, &f, NULL), 0);
                mx_init_loaded(&n, f, dir);
        }
        assert_int_equal(mx_allocate(&n, "pod-a", "2g.20gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.how, TSR_MIG_REUSED);
        assert_memory_equal(&mx_pod(&n, "pod-a")->grant.marker, &first.marker,
                            sizeof(first.marker));
        /* another profile for the same container fails closed */
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), TSR_ESTALE);
        mx_check(&n, true);
        mx_release(&n);
}

static void test_reuse_fails_closed_when_gone(void **state)
{
        static struct mx_node n;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_diag diag;
        unsigned gi;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), 0);
        gi = mx_pod(&n, "pod-a")->grant.marker.gi_id;
        assert_int_equal(tsr_fake_gpus_vanish(n.fake, 0, gi), 0);
        tsr_diag_clear(&diag);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", &diag), TSR_ESTALE);
        assert_non_null(strstr(diag.msg, "gone or was recreated"));
        assert_int_equal(mx_instances(&n, 0, in) + mx_instances(&n, 1, in), 0);
        /* recreated under the same id: a new UUID, still not the Pod's */
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 0, 19, 0, true, &gi), 0);
        assert_int_equal(gi, mx_pod(&n, "pod-a")->grant.marker.gi_id);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", &diag), TSR_ESTALE);
        mx_release(&n);
}

static void test_adopt_out_of_band(void **state)
{
        static struct mx_node n;
        unsigned gi, gi2;

        (void)state;
        mx_init(&n, NULL);
        /* 3g.40gb is driver profile 9 on an H100; carved by hand at start 4 on GPU 1 */
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 1, 9, 4, true, &gi), 0);
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.how, TSR_MIG_ADOPTED);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.gpu, 1);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.marker.gi_id, gi);
        /* one without a compute instance gets one */
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 1, 9, 0, false, &gi2), 0);
        assert_int_equal(mx_allocate(&n, "pod-b", "3g.40gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-b")->grant.how, TSR_MIG_ADOPTED);
        assert_int_equal(mx_pod(&n, "pod-b")->grant.marker.gi_id, gi2);
        assert_true(strlen(mx_pod(&n, "pod-b")->grant.marker.mig_uuid) > 0);
        mx_check(&n, true);
        mx_release(&n);
}

static void test_no_adopt_under_corrupt_marker_or_claim(void **state)
{
        static struct mx_node n;
        struct mx_pod *ghost;
        unsigned gi;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 1, 9, 4, true, &gi), 0);
        assert_int_equal(
            tsr_mig_store_memory_put_raw(n.store, "pod-x", "main", n.caps[1].uuid, "{\"podUID\":"),
            0);
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.how, TSR_MIG_CREATED);
        assert_int_not_equal(mx_pod(&n, "pod-a")->grant.marker.gi_id == gi &&
                                 mx_pod(&n, "pod-a")->grant.gpu == 1,
                             1);
        mx_check(&n, false);
        mx_release(&n);

        /* an instance a live Pod's annotation claims is not adoptable */
        mx_init(&n, NULL);
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 0, 9, 0, true, &gi), 0);
        ghost = mx_pod(&n, "pod-ghost");
        ghost->granted = true;
        ghost->grant.gpu = 0;
        ghost->grant.profile = 3; /* filled below */
        {
                const struct tsr_product *p = tsr_fake_gpus_product(n.fake);

                for (size_t i = 0; i < p->n_profiles; i++)
                        if (!strcmp(p->profiles[i].name, "3g.40gb"))
                                ghost->grant.profile = (int)i;
        }
        ghost->grant.marker.start = 0;
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.how, TSR_MIG_CREATED);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.marker.start, 4);
        mx_release(&n);
}

/*
 * More markers than one list used to hold (256: every partition Allocate and reclaim pass then
 * failed), and one Pod whose directory holds more than TSR_MIG_POD_MARKERS_MAX: the flood refuses
 * its own Pod and holds every card from adoption, and nothing else; the reclaim pass still runs.
 */
static void test_marker_flood(void **state)
{
        static struct mx_node n;
        struct tsr_mig_pass_stats st;
        struct tsr_diag diag;
        char pod[32], card[32];
        unsigned gi;

        (void)state;
        mx_init(&n, NULL);
        for (int p = 0; p < 6; p++)
                for (int k = 0; k < 50; k++) {
                        snprintf(pod, sizeof(pod), "pod-s%d", p);
                        snprintf(card, sizeof(card), "GPU-s%d", k);
                        assert_int_equal(tsr_mig_store_memory_put_raw(n.store, pod, "main", card,
                                                                      "{\"podUID\":"),
                                         0);
                }
        for (int k = 0; k < 100; k++) {
                snprintf(card, sizeof(card), "GPU-f%d", k);
                assert_int_equal(tsr_mig_store_memory_put_raw(n.store, "pod-f",
                                                              k % 2 ? "main" : "side", card, "{}"),
                                 0);
        }
        assert_int_equal(mx_markers(&n), 301);
        assert_int_equal(tsr_fake_gpus_carve(n.fake, 1, 9, 4, true, &gi), 0);
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-a")->grant.how, TSR_MIG_CREATED); /* not adopted */
        tsr_diag_clear(&diag);
        assert_int_equal(mx_allocate(&n, "pod-f", "1g.10gb", &diag), TSR_ESTALE);
        assert_non_null(strstr(diag.msg, "pod pod-f holds more than 64"));
        assert_int_equal(mx_pass(&n, &st), 0);
        assert_true(st.held > 0);
        mx_check(&n, false);
        mx_release(&n);
}

static void test_ci_failure_undoes_gi(void **state)
{
        static struct mx_node n;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_diag diag;

        (void)state;
        mx_init(&n, NULL);
        tsr_fake_gpus_fail(n.fake, TSR_FAKE_CI_CREATE, TSR_EPERM, 1);
        tsr_diag_clear(&diag);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", &diag), TSR_EPERM);
        assert_string_equal(diag.msg, "failed to create compute instance on 1g.10gb: Insufficient "
                                      "Permissions");
        assert_int_equal(mx_instances(&n, 0, in), 0);
        assert_int_equal(mx_markers(&n), 0);
        tsr_fake_gpus_fail(n.fake, TSR_FAKE_GI_CREATE, TSR_ENOSPC, 1);
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", &diag), TSR_ENOSPC);
        assert_string_equal(diag.msg, "failed to create GPU instance 1g.10gb: Insufficient "
                                      "Resources");
        assert_int_equal(mx_allocate(&n, "pod-a", "1g.10gb", NULL), 0);
        mx_check(&n, true);
        mx_release(&n);
}

static void test_replacement_gap(void **state)
{
        static struct mx_node n;
        struct tsr_diag diag;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "7g.80gb", NULL), 0);
        assert_int_equal(mx_allocate(&n, "pod-b", "7g.80gb", NULL), 0);
        mx_pod(&n, "pod-a")->live = false; /* deleted: its slot frees in the ledger at once */
        tsr_diag_clear(&diag);
        assert_int_equal(mx_allocate(&n, "pod-c", "7g.80gb", &diag), TSR_ENOSPC);
        assert_non_null(strstr(diag.msg, "no partitioned GPU has a free 7g.80gb placement"));
        mx_check(&n, false);
        for (int i = 0; i < TSR_MIG_RECLAIM_MAX_MISSES; i++)
                assert_int_equal(mx_pass(&n, NULL), 0);
        assert_int_equal(mx_allocate(&n, "pod-c", "7g.80gb", NULL), 0);
        assert_int_equal(mx_pod(&n, "pod-c")->grant.how, TSR_MIG_CREATED);
        mx_check(&n, true);
        assert_int_equal(mx_allocate(&n, "pod-d", "9g.99gb", &diag), TSR_ENOTFOUND);
        mx_release(&n);
}

/* tsr_mig_held of pod-a's main on card into *m; its rc, diag into why. */
static int held(struct mx_node *n, const char *card, struct tsr_mig_marker *m, struct tsr_diag *why)
{
        unsigned gpu = 99;
        int rc;

        tsr_diag_clear(why);
        rc =
            tsr_mig_held(&n->gpus, n->store, n->caps, MX_GPUS, "pod-a", "main", card, m, &gpu, why);
        if (!rc)
                assert_int_equal(gpu, mx_pod(n, "pod-a")->grant.gpu);
        return rc;
}

static void test_held_reads_back_live(void **state)
{
        static struct mx_node n;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_mig_marker m;
        struct tsr_diag diag;
        const struct tsr_mig_marker *want;
        uint32_t offered;

        (void)state;
        mx_init(&n, NULL);
        assert_int_equal(mx_allocate(&n, "pod-a", "3g.40gb", NULL), 0);
        want = &mx_pod(&n, "pod-a")->grant.marker;
        assert_int_equal(held(&n, want->card, &m, &diag), 0);
        assert_memory_equal(&m, want, sizeof(m));

        /* a profile detection excluded (the capability), though the driver still lists it */
        offered = n.caps[0].offered;
        n.caps[0].offered &= ~(UINT32_C(1) << mx_pod(&n, "pod-a")->grant.profile);
        assert_int_equal(held(&n, want->card, &m, &diag), TSR_ESTALE);
        assert_non_null(strstr(diag.msg, "records profile 3g.40gb, which GPU"));
        n.caps[0].offered = offered;

        /* the GPUs cannot be read: the backend's error, no guess */
        tsr_fake_gpus_fail(n.fake, TSR_FAKE_GI_LIST, TSR_EPERM, 1);
        assert_int_equal(held(&n, want->card, &m, &diag), TSR_EPERM);
        assert_non_null(strstr(diag.msg, "listing GPU instances"));

        /* subdivided by hand: no single device */
        assert_int_equal(tsr_fake_gpus_subdivide(n.fake, 0, want->gi_id), 0);
        assert_int_equal(held(&n, want->card, &m, &diag), TSR_ESTALE);
        assert_non_null(strstr(diag.msg, "pod-a container main was subdivided by hand"));

        /* a corrupt marker of the container's */
        assert_int_equal(tsr_mig_store_memory_put_raw(n.store, "pod-a", "main", want->card, "{"),
                         0);
        assert_int_equal(held(&n, want->card, &m, &diag), TSR_ESTALE);
        assert_non_null(strstr(diag.msg, "is corrupt"));

        /* reads only: one instance, one marker */
        assert_int_equal(mx_instances(&n, 0, in) + mx_instances(&n, 1, in), 1);
        assert_int_equal(mx_markers(&n), 1);
        mx_release(&n);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_create_packs_and_marks),
            cmocka_unit_test(test_reuse_after_restart),
            cmocka_unit_test(test_reuse_fails_closed_when_gone),
            cmocka_unit_test(test_adopt_out_of_band),
            cmocka_unit_test(test_no_adopt_under_corrupt_marker_or_claim),
            cmocka_unit_test(test_marker_flood),
            cmocka_unit_test(test_ci_failure_undoes_gi),
            cmocka_unit_test(test_replacement_gap),
            cmocka_unit_test(test_held_reads_back_live),
        };

        return cmocka_run_group_tests(tests, make_root, remove_root);
}
