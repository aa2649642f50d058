/*
 * mig_node.c - the node fixture of the src/mig tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mig_node.h"

#include "base/err.h"
#include "core/catalog.h"
#include "core/geometry.h"
#include "core/ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_log(void *arg, enum tsr_mig_log_level level, const char *msg)
{
        struct mx_node *n = arg;

        n->logs[level]++;
        snprintf(n->last_log, sizeof(n->last_log), "%s", msg);
}

void mx_init_loaded(struct mx_node *n, struct tsr_fake_gpus *fake, const char *pods_dir)
{
        const struct tsr_product *p = tsr_fake_gpus_product(fake);

        n->fake = fake;
        n->gpus = (struct tsr_mig_gpus){&tsr_fake_gpu_ops, fake};
        memset(n->logs, 0, sizeof(n->logs));
        for (unsigned g = 0; g < MX_GPUS; g++) {
                struct tsr_gpu_info info;

                assert_int_equal(tsr_fake_gpu_ops.device_info(fake, g, &info), 0);
                tsr_capability_detect(p, g, info.uuid, info.mig_current, &n->caps[g]);
        }
        assert_int_equal(pods_dir ? tsr_mig_store_files_new(pods_dir, &n->store)
                                  : tsr_mig_store_memory_new(&n->store),
                         0);
        assert_int_equal(tsr_mig_reclaimer_new(&n->gpus, n->store, on_log, n, &n->reclaimer), 0);
}

void mx_init(struct mx_node *n, const char *pods_dir)
{
        const bool on[MX_GPUS] = {true, true};
        struct tsr_fake_gpus *fake;

        memset(n, 0, sizeof(*n));
        assert_int_equal(tsr_fake_gpus_new("node-a",
                                           tsr_catalog_product_by_name("NVIDIA H100 80GB HBM3"),
                                           MX_GPUS, on, &fake),
                         0);
        mx_init_loaded(n, fake, pods_dir);
}

void mx_release(struct mx_node *n)
{
        tsr_mig_reclaimer_free(n->reclaimer);
        tsr_mig_store_free(n->store);
        tsr_fake_gpus_free(n->fake);
        n->reclaimer = NULL;
        n->store = NULL;
        n->fake = NULL;
}

struct mx_pod *mx_pod(struct mx_node *n, const char *uid)
{
        struct mx_pod *p;

        for (size_t i = 0; i < n->n_pods; i++)
                if (!strcmp(n->pods[i].uid, uid))
                        return &n->pods[i];
        assert_true(n->n_pods < MX_PODS);
        p = &n->pods[n->n_pods++];
        memset(p, 0, sizeof(*p));
        snprintf(p->uid, sizeof(p->uid), "%s", uid);
        p->live = true;
        return p;
}

int mx_allocate(struct mx_node *n, const char *uid, const char *profile, struct tsr_diag *diag)
{
        struct tsr_alloc_record recs[MX_PODS];
        struct tsr_accel_ledger ledger[MX_GPUS];
        struct mx_pod *p = mx_pod(n, uid);
        struct tsr_mig_request req = {p->uid, "main", profile};
        size_t nrec = 0;
        int rc;

        for (size_t i = 0; i < n->n_pods; i++)
                if (n->pods[i].live && n->pods[i].granted)
                        recs[nrec++] = (struct tsr_alloc_record){
                            n->pods[i].grant.gpu,     TSR_MODE_PARTITIONED,          1,    1,
                            n->pods[i].grant.profile, n->pods[i].grant.marker.start, false};
        assert_int_equal(tsr_ledger_build(n->caps, MX_GPUS, recs, nrec, ledger, NULL), 0);
        rc = tsr_mig_reserve(&n->gpus, n->store, n->caps, ledger, MX_GPUS, &req, &p->grant, diag);
        if (rc == 0)
                p->granted = true;
        return rc;
}

int mx_pass(struct mx_node *n, struct tsr_mig_pass_stats *stats)
{
        const char *live[MX_PODS];
        struct tsr_mig_claim claims[MX_PODS];
        struct tsr_mig_view v = {live, 0, claims, 0};

        for (size_t i = 0; i < n->n_pods; i++) {
                const struct mx_pod *p = &n->pods[i];

                if (!p->live)
                        continue;
                live[v.n_live++] = p->uid;
                if (p->granted)
                        claims[v.n_claims++] =
                            (struct tsr_mig_claim){p->uid, p->grant.marker.card, true,
                                                   p->grant.marker.start, p->grant.marker.length};
        }
        return tsr_mig_reclaim_pass(n->reclaimer, &v, stats, NULL);
}

void mx_settle(struct mx_node *n)
{
        for (int i = 0; i < 12; i++)
                mx_pass(n, NULL);
}

size_t mx_instances(struct mx_node *n, unsigned gpu, struct tsr_gpu_instance *out)
{
        size_t k = 0;

        assert_int_equal(tsr_fake_gpu_ops.gi_list(n->fake, gpu, out, TSR_GPU_INSTANCES_MAX, &k), 0);
        return k;
}

size_t mx_markers(struct mx_node *n)
{
        struct tsr_mig_marker_entry *e = NULL;
        size_t k = 0;

        assert_int_equal(tsr_mig_store_list(n->store, &e, &k, NULL), 0);
        free(e);
        return k;
}

static bool pod_live(const struct mx_node *n, const char *uid)
{
        for (size_t i = 0; i < n->n_pods; i++)
                if (!strcmp(n->pods[i].uid, uid))
                        return n->pods[i].live;
        return false;
}

void mx_check(struct mx_node *n, bool settled)
{
        struct tsr_mig_marker_entry *e = NULL;
        size_t ne = 0;

        assert_int_equal(tsr_mig_store_list(n->store, &e, &ne, NULL), 0);
        /* No two markers, and no two live claims, on one placement. */
        for (size_t i = 0; i < ne; i++)
                for (size_t j = i + 1; j < ne; j++)
                        assert_false(!e[i].corrupt && !e[j].corrupt &&
                                     !strcmp(e[i].m.card, e[j].m.card) &&
                                     e[i].m.gi_id == e[j].m.gi_id &&
                                     !strcmp(e[i].m.mig_uuid, e[j].m.mig_uuid));
        for (size_t i = 0; i < n->n_pods; i++)
                for (size_t j = i + 1; j < n->n_pods; j++) {
                        const struct mx_pod *a = &n->pods[i], *b = &n->pods[j];

                        assert_false(a->live && b->live && a->granted && b->granted &&
                                     a->grant.gpu == b->grant.gpu &&
                                     a->grant.marker.start == b->grant.marker.start);
                }
        for (unsigned g = 0; g < MX_GPUS; g++) {
                struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
                size_t k = mx_instances(n, g, in);
                uint32_t seen = 0;

                for (size_t x = 0; x < k; x++) {
                        uint32_t span = tsr_geometry_span(in[x].start, in[x].size);
                        bool owned = false;

                        assert_int_equal(seen & span, 0);
                        seen |= span;
                        for (size_t i = 0; i < ne; i++)
                                owned |= !e[i].corrupt && !strcmp(e[i].m.card, n->caps[g].uuid) &&
                                         e[i].m.gi_id == in[x].gi_id &&
                                         !strcmp(e[i].m.mig_uuid, in[x].mig_uuid) &&
                                         pod_live(n, e[i].m.pod_uid);
                        if (settled && !owned)
                                fail_msg("GPU %u: GPU instance %u at %u is leaked", g, in[x].gi_id,
                                         in[x].start);
                }
        }
        free(e);
}
