/*
 * test_deviceplugin.c - src/deviceplugin: the device lists, the preferred allocation and
 * Allocate of accelerator-bound claims, on the H100 walkthrough node (GPUs 0-2 MIG on, 3-7 off)
 * with GPU 3 holding an 800,000-unit slice and GPU 4 one share.
 *   devices    token counts, ID shape, health per family, list equality;
 *   preferred  packing order among available tokens (a shared card before a free one, the fullest
 *              card that fits a slice), must-include tokens kept, distinct cards for shares, the
 *              fallback when packing cannot fill, fungible families in offered order;
 *   identify   the kubelet's listing first (a repeated Allocate, then the Pods it lists), the
 *              pending-Pod fallback, oldest first, reserved / annotated / deleting / other-count
 *              containers skipped; without IDs (GetPreferredAllocation) no repeated-Allocate
 *              match; the smallest pending, unreserved slice; a visibility container only in a
 *              Pod whose accelerator containers are served (reserved, annotated, held);
 *   allocate   each refusal (another mode, two shares on one card, no units, no slot), the gate
 *              off, a foreign token, and a grant's ledger charge and annotation entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "core/geometry.h"
#include "core/tokens.h"
#include "deviceplugin/allocate.h"
#include "deviceplugin/devices.h"
#include "deviceplugin/identify.h"
#include "deviceplugin/preferred.h"

#include "support/catalog_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H100_NAME "NVIDIA H100 80GB HBM3"

struct fixture {
        struct fx_node nd;
        struct tsr_dp_node node;
};

static struct fixture fx;

static int setup(void **state)
{
        const struct tsr_product *p = fx_product(H100_NAME);
        struct tsr_alloc_record recs[] = {
            {3, TSR_MODE_SLICED, 800000, 1, -1, 0, false},
            {4, TSR_MODE_SHARED, TSR_UNITS_PER_SHARE, 1, -1, 0, false},
        };

        (void)state;
        memset(&fx, 0, sizeof(fx));
        fx_node_build(&fx.nd, p, 8, 0x7, recs, 2);
        for (unsigned g = 0; g < 8; g++)
                snprintf(fx.nd.caps[g].uuid, sizeof(fx.nd.caps[g].uuid), "GPU-%u", g);
        assert_int_equal(tsr_dp_node_init(&fx.node, fx.nd.caps, 8), 0);
        return 0;
}

/* "group:GPU-g:index" */
static const char *tok(unsigned g, unsigned index)
{
        static char ids[64][TSR_TOKEN_ID_MAX];
        static unsigned next;
        char *id = ids[next++ % 64];

        assert_int_equal(tsr_token_format(id, fx.node.group, fx.nd.caps[g].uuid, index), 0);
        return id;
}

static void devices_per_family(void **state)
{
        struct tsr_dp_device *list, *again;
        size_t n, m;
        char name[TSR_KEY_MAX];

        (void)state;
        assert_int_equal(tsr_dp_resource_name(&fx.node, TSR_FAMILY_SHARED, name), 0);
        assert_string_equal(name, "nvidia.com/gpu.shared");
        assert_int_equal(tsr_dp_resource_name(&fx.node, TSR_FAMILY_VISIBILITY, name), 0);
        assert_string_equal(name, "device.gpustack.ai/nvidia.visibility");
        assert_int_equal(tsr_dp_devices(&fx.node, fx.nd.ledger, TSR_FAMILY_EXCLUSIVE, &list, &n),
                         0);
        assert_int_equal(n, 5);
        assert_string_equal(list[0].id, tok(3, 0));
        assert_false(list[0].healthy); /* GPU 3 holds a slice */
        assert_false(list[1].healthy); /* GPU 4 holds a share */
        assert_true(list[2].healthy);
        assert_int_equal(list[4].accel, 7);
        free(list);
        assert_int_equal(tsr_dp_devices(&fx.node, fx.nd.ledger, TSR_FAMILY_SHARED, &list, &n), 0);
        assert_int_equal(n, 50);
        assert_string_equal(list[11].id, tok(4, 160000));
        assert_true(list[11].healthy);
        assert_false(list[9].healthy);
        free(list);
        assert_int_equal(tsr_dp_devices(&fx.node, fx.nd.ledger, TSR_FAMILY_PARTITIONED, &list, &n),
                         0);
        assert_int_equal(n, 21);
        assert_true(list[20].healthy);
        free(list);
        assert_int_equal(tsr_dp_devices(&fx.node, fx.nd.ledger, TSR_FAMILY_VISIBILITY, &list, &n),
                         0);
        assert_int_equal(n, 8 * 512);
        assert_int_equal(tsr_dp_devices(&fx.node, fx.nd.ledger, TSR_FAMILY_VISIBILITY, &again, &m),
                         0);
        assert_true(tsr_dp_devices_equal(list, n, again, m));
        again[7].healthy = false;
        assert_false(tsr_dp_devices_equal(list, n, again, m));
        assert_false(tsr_dp_devices_equal(list, n, again, m - 1));
        free(list);
        free(again);
}

static uint64_t rng_next(uint64_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* A random ledger entry for accelerator cap: a mode (or live MIG instances), some units. */
static void random_entry(const struct tsr_accel_cap *cap, struct tsr_accel_ledger *l, uint64_t *r)
{
        static const enum tsr_mode modes[] = {TSR_MODE_NONE, TSR_MODE_EXCLUSIVE, TSR_MODE_SHARED,
                                              TSR_MODE_SLICED};

        tsr_ledger_reset(l);
        if (!cap->partitioned) {
                l->mode = modes[rng_next(r) % 4];
                return;
        }
        l->mode = TSR_MODE_PARTITIONED;
        for (unsigned k = rng_next(r) % 6; k > 0; k--) {
                unsigned prof = (unsigned)(rng_next(r) % cap->product->n_profiles);

                (void)tsr_geometry_add(cap->product, &l->live, prof,
                                       (unsigned)(rng_next(r) % TSR_MIG_AXIS_MAX));
        }
}

/*
 * The formatted-once path (tokens, shapes, a list reused and rewritten) against tsr_dp_devices,
 * the reference, over random ledgers and held-back sets, in a sequence that repeats shapes,
 * moves only health, and moves counts: the lists are equal element for element, and two shapes
 * are equal exactly when their lists are.
 */
static void devices_from_tokens(void **state)
{
        uint64_t r = UINT64_C(0x5eed);

        (void)state;
        for (size_t fi = 0; fi < TSR_DP_FAMILIES; fi++) {
                enum tsr_family f = tsr_dp_families[fi];
                struct tsr_dp_tokens t;
                struct tsr_dp_shape was[8], shape[8];
                struct tsr_dp_device *list = NULL, *prev = NULL;
                size_t n = 0, cap = 0, n_prev = 0;
                bool have = false;

                assert_int_equal(tsr_dp_tokens_init(&t, &fx.node, f), 0);
                for (int round = 0; round < 300; round++) {
                        struct tsr_accel_ledger ledger[8];
                        struct tsr_dp_device *want;
                        bool held[8];
                        size_t m;

                        memcpy(ledger, fx.nd.ledger, sizeof(ledger));
                        for (unsigned g = 0; g < 8; g++) {
                                if (rng_next(&r) % 3 == 0)
                                        random_entry(&fx.nd.caps[g], &ledger[g], &r);
                                held[g] = rng_next(&r) % 5 == 0;
                        }
                        if (round % 7 == 0) /* only health moves, or nothing */
                                memcpy(ledger, fx.nd.ledger, sizeof(ledger));
                        tsr_dp_shape(&fx.node, ledger, f, held, shape);
                        for (unsigned g = 0; g < 8; g++)
                                assert_true(shape[g].count <= tsr_tokens_max(f, &fx.nd.caps[g]));
                        assert_int_equal(tsr_dp_devices(&fx.node, ledger, f, &want, &m), 0);
                        for (size_t k = 0; k < m; k++)
                                if (held[want[k].accel])
                                        want[k].healthy = false;
                        assert_int_equal(
                            tsr_dp_devices_update(&t, have ? was : NULL, shape, &list, &n, &cap),
                            0);
                        assert_int_equal(n, m);
                        assert_true(tsr_dp_devices_equal(list, n, want, m));
                        for (size_t k = 0; k < m; k++)
                                assert_int_equal(list[k].accel, want[k].accel);
                        if (have)
                                assert_int_equal(tsr_dp_shape_equal(was, shape, 8),
                                                 tsr_dp_devices_equal(prev, n_prev, want, m));
                        memcpy(was, shape, sizeof(was));
                        have = true;
                        free(prev);
                        prev = want;
                        n_prev = m;
                }
                free(prev);
                free(list);
                tsr_dp_tokens_release(&t);
        }
}

/* A UUID that cannot form an ID: the list fails as tsr_dp_devices does, only when it holds one. */
static void devices_unformable(void **state)
{
        struct tsr_dp_tokens t;
        struct tsr_dp_shape shape[8];
        struct tsr_dp_device *list = NULL, *want = NULL;
        size_t n = 0, cap = 0, m = 0;

        (void)state;
        snprintf(fx.nd.caps[5].uuid, sizeof(fx.nd.caps[5].uuid), "GPU:5");
        for (size_t fi = 0; fi < TSR_DP_FAMILIES; fi++) {
                enum tsr_family f = tsr_dp_families[fi];
                int rc = tsr_dp_devices(&fx.node, fx.nd.ledger, f, &want, &m);

                assert_int_equal(tsr_dp_tokens_init(&t, &fx.node, f), 0);
                tsr_dp_shape(&fx.node, fx.nd.ledger, f, NULL, shape);
                assert_int_equal(tsr_dp_devices_update(&t, NULL, shape, &list, &n, &cap), rc);
                assert_int_equal(rc, f == TSR_FAMILY_PARTITIONED ? 0 : TSR_EINVAL);
                if (!rc)
                        assert_true(tsr_dp_devices_equal(list, n, want, m));
                free(want);
                want = NULL;
                tsr_dp_tokens_release(&t);
        }
        free(list);
}

static void expect_ids(const char **got, size_t n, const char *const *want, size_t nw)
{
        if (n != nw)
                fail_msg("%zu preferred tokens, want %zu", n, nw);
        for (size_t i = 0; i < n; i++)
                if (strcmp(got[i], want[i]))
                        fail_msg("preferred[%zu] = %s, want %s", i, got[i], want[i]);
}

static void preferred_packs(void **state)
{
        const char *avail[64], *out[8];
        size_t na = 0, n;

        (void)state;
        /* exclusive: healthy whole cards, by position */
        for (unsigned g = 5; g < 8; g++)
                avail[na++] = tok(g, 0);
        assert_int_equal(tsr_dp_preferred(&fx.node, fx.nd.ledger, TSR_FAMILY_EXCLUSIVE, avail, na,
                                          NULL, 0, 2, 0, out, &n),
                         0);
        expect_ids(out, n, (const char *const[]){avail[0], avail[1]}, 2);
        /* shared: GPU 4 (already shared) before the free GPU 5, one token each */
        na = 0;
        for (unsigned g = 4; g < 8; g++)
                for (unsigned k = (g == 4); k < 10; k++)
                        avail[na++] = tok(g, tsr_token_index(TSR_FAMILY_SHARED, k));
        assert_int_equal(tsr_dp_preferred(&fx.node, fx.nd.ledger, TSR_FAMILY_SHARED, avail, na,
                                          NULL, 0, 2, 0, out, &n),
                         0);
        expect_ids(out, n, (const char *const[]){tok(4, 160000), tok(5, 0)}, 2);
        /* a must-include token on GPU 6 keeps its card out of the picks */
        const char *must[] = {tok(6, 0)};
        assert_int_equal(tsr_dp_preferred(&fx.node, fx.nd.ledger, TSR_FAMILY_SHARED, avail, na,
                                          must, 1, 2, 0, out, &n),
                         0);
        expect_ids(out, n, (const char *const[]){must[0], tok(4, 160000)}, 2);
        /* sliced: the fullest card that fits (GPU 3), else a pristine one */
        na = 0;
        for (unsigned g = 3; g < 8; g++)
                if (g != 4)
                        avail[na++] = tok(g, g == 3 ? 1 : 0);
        assert_int_equal(tsr_dp_preferred(&fx.node, fx.nd.ledger, TSR_FAMILY_SLICED, avail, na,
                                          NULL, 0, 1, 800000, out, &n),
                         0);
        expect_ids(out, n, (const char *const[]){tok(3, 1)}, 1);
        assert_int_equal(tsr_dp_preferred(&fx.node, fx.nd.ledger, TSR_FAMILY_SLICED, avail, na,
                                          NULL, 0, 1, 900000, out, &n),
                         0);
        expect_ids(out, n, (const char *const[]){tok(5, 0)}, 1);
        /* packing cannot fill 4 exclusive cards out of 3 offered: offered order */
        na = 0;
        for (unsigned g = 5; g < 8; g++)
                avail[na++] = tok(g, 0);
        assert_int_equal(tsr_dp_preferred(&fx.node, fx.nd.ledger, TSR_FAMILY_EXCLUSIVE, avail, na,
                                          NULL, 0, 4, 0, out, &n),
                         0);
        expect_ids(out, n, avail, 3);
        /* fungible: must first, then offered order */
        const char *pavail[] = {tok(1, 0), tok(1, 1), tok(2, 0)};
        const char *pmust[] = {tok(2, 0)};
        assert_int_equal(tsr_dp_preferred(&fx.node, fx.nd.ledger, TSR_FAMILY_PARTITIONED, pavail, 3,
                                          pmust, 1, 2, 0, out, &n),
                         0);
        expect_ids(out, n, (const char *const[]){pmust[0], pavail[0]}, 2);
}

static void expect_refusal(enum tsr_family f, const char *const *ids, size_t n, int64_t units,
                           bool gate, int want, const char *fragment)
{
        struct tsr_accel_ledger before[8];
        struct tsr_dp_grant g;
        char msg[512] = "";
        int rc;

        memcpy(before, fx.nd.ledger, sizeof(before));
        rc = tsr_dp_allocate_bound(&fx.node, fx.nd.ledger, f, ids, n, units, gate, "main", &g, msg,
                                   sizeof(msg));
        if (rc != want || !strstr(msg, fragment))
                fail_msg("allocate = %s \"%s\", want %s with \"%s\"", tsr_err_name(rc), msg,
                         tsr_err_name(want), fragment);
        if (memcmp(before, fx.nd.ledger, sizeof(before)))
                fail_msg("a refused claim changed the ledger");
}

static void allocate_refusals(void **state)
{
        (void)state;
        expect_refusal(TSR_FAMILY_EXCLUSIVE, (const char *const[]){tok(4, 0)}, 1, 0, true,
                       TSR_ENOSPC, "held in Shared mode");
        expect_refusal(TSR_FAMILY_SHARED, (const char *const[]){tok(5, 0), tok(5, 160000)}, 2, 0,
                       true, TSR_ENOSPC, "two tokens name accelerator GPU-5");
        expect_refusal(TSR_FAMILY_SLICED, (const char *const[]){tok(3, 1)}, 1, 900000, true,
                       TSR_ENOSPC, "has 800000 free units; the slice needs 900000");
        expect_refusal(TSR_FAMILY_SLICED, (const char *const[]){tok(4, 0)}, 1, 1000, false,
                       TSR_ENOSPC, "held in Shared mode");
        expect_refusal(TSR_FAMILY_SHARED, (const char *const[]){tok(0, 0)}, 1, 0, true, TSR_ENOSPC,
                       "partitioned");
        expect_refusal(TSR_FAMILY_EXCLUSIVE, (const char *const[]){"other:GPU-5:0000"}, 1, 0, true,
                       TSR_EPARSE, "not a");
        expect_refusal(TSR_FAMILY_EXCLUSIVE, (const char *const[]){"x"}, 0, 0, true, TSR_EINVAL,
                       "outside");
        expect_refusal(TSR_FAMILY_PARTITIONED, (const char *const[]){tok(0, 0)}, 1, 0, true,
                       TSR_EINVAL, "not an accelerator-bound");
}

static void allocate_grants(void **state)
{
        struct tsr_dp_grant g;
        char msg[512];

        (void)state;
        /* the gate off: a slice beyond the units is granted and the ledger clamps at 0 */
        assert_int_equal(tsr_dp_allocate_bound(&fx.node, fx.nd.ledger, TSR_FAMILY_SLICED,
                                               (const char *const[]){tok(3, 1)}, 1, 900000, false,
                                               "main", &g, msg, sizeof(msg)),
                         0);
        assert_int_equal(fx.nd.ledger[3].remaining, 0);
        assert_int_equal(fx.nd.ledger[3].allocated_slices, 2);
        assert_int_equal(tsr_dp_allocate_bound(&fx.node, fx.nd.ledger, TSR_FAMILY_SHARED,
                                               (const char *const[]){tok(5, 0), tok(6, 0)}, 2, 0,
                                               true, "main", &g, msg, sizeof(msg)),
                         0);
        assert_string_equal(g.visible, "GPU-5,GPU-6");
        assert_string_equal(g.alloc.container, "main");
        assert_string_equal(g.alloc.manufacturer, "nvidia");
        assert_string_equal(g.alloc.group_id, fx.node.group);
        assert_int_equal(g.alloc.n, 2);
        assert_int_equal(g.alloc.accels[1].index, 6);
        assert_int_equal(g.alloc.accels[1].mode, TSR_MODE_SHARED);
        assert_int_equal(g.alloc.accels[1].allocated, TSR_UNITS_PER_SHARE);
        assert_int_equal(g.alloc.n_device_ids, 2);
        assert_string_equal(g.alloc.device_ids[0], tok(5, 0));
        assert_int_equal(fx.nd.ledger[5].mode, TSR_MODE_SHARED);
        assert_int_equal(fx.nd.ledger[6].remaining, TSR_UNITS_PER_ACCEL - TSR_UNITS_PER_SHARE);
        assert_int_equal(tsr_dp_allocate_bound(&fx.node, fx.nd.ledger, TSR_FAMILY_EXCLUSIVE,
                                               (const char *const[]){tok(7, 0)}, 1, 0, true, "c2",
                                               &g, msg, sizeof(msg)),
                         0);
        assert_int_equal(fx.nd.ledger[7].mode, TSR_MODE_EXCLUSIVE);
        assert_int_equal(fx.nd.ledger[7].remaining, 0);
        /* the same card again: held */
        expect_refusal(TSR_FAMILY_EXCLUSIVE, (const char *const[]){tok(7, 0)}, 1, 0, true,
                       TSR_ENOSPC, "held in Exclusive mode");
}

static json_t *pod(const char *name, const char *created, const char *phase, const char *container,
                   const char *resource, const char *count)
{
        json_t *p =
            json_pack("{s:{s:s, s:s, s:s, s:s}, s:{s:s, s:[{s:s, s:{s:{s:s}}}]}, s:{s:s}}",
                      "metadata", "name", name, "namespace", "ns", "uid", name, "creationTimestamp",
                      created, "spec", "nodeName", "node-h100", "containers", "name", container,
                      "resources", "limits", resource, count, "status", "phase", phase);

        assert_non_null(p);
        return p;
}

static const char *reserved_uid, *reserved_container; /* container NULL: any */

static bool is_reserved(void *ctx, const char *uid, const char *container)
{
        (void)ctx;
        return reserved_uid && !strcmp(uid, reserved_uid) &&
               (!reserved_container || !strcmp(container, reserved_container));
}

static void expect_identity(json_t *pods, const struct tsr_dp_kubelet_view *kv, size_t n_ids,
                            const char *want_pod, bool by_kubelet)
{
        const char *ids[] = {tok(5, 0), tok(6, 0)};
        struct tsr_dp_identity id;
        char msg[256] = "";
        int rc = tsr_dp_identify(&fx.node, pods, kv, "nvidia.com/gpu", ids, n_ids, is_reserved,
                                 NULL, &id, msg, sizeof(msg));

        if (!want_pod) {
                if (rc != TSR_ENOTFOUND || !strstr(msg, "nvidia.com/gpu"))
                        fail_msg("identified %s, want none (%s)", rc ? "?" : "a pod", msg);
                return;
        }
        if (rc)
                fail_msg("identify = %s: %s", tsr_err_name(rc), msg);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(id.pod, "metadata"), "name")),
            want_pod);
        assert_string_equal(id.container, "main");
        assert_int_equal(id.by_kubelet, by_kubelet);
        assert_int_equal(id.demand.family, TSR_FAMILY_EXCLUSIVE);
        assert_int_equal(id.demand.cards, n_ids);
}

static void identify_containers(void **state)
{
        json_t *pods = json_array();
        const char *held_ids[] = {tok(5, 0)};

        (void)state;
        json_array_append_new(
            pods, pod("newer", "2026-12-02T10:00:05Z", "Pending", "main", "nvidia.com/gpu", "1"));
        json_array_append_new(
            pods, pod("older", "2026-12-02T10:00:01Z", "Pending", "main", "nvidia.com/gpu", "1"));
        json_array_append_new(
            pods, pod("two", "2026-12-02T09:00:00Z", "Pending", "main", "nvidia.com/gpu", "2"));
        json_array_append_new(
            pods, pod("running", "2026-12-02T08:00:00Z", "Running", "main", "nvidia.com/gpu", "1"));
        /* fallback: pending Pods, oldest that asks for this many */
        expect_identity(pods, NULL, 1, "older", false);
        expect_identity(pods, NULL, 2, "two", false);
        reserved_uid = "older";
        expect_identity(pods, NULL, 1, "newer", false);
        reserved_uid = NULL;
        json_object_set_new(json_object_get(json_array_get(pods, 1), "metadata"),
                            "deletionTimestamp", json_string("2026-12-02T10:01:00Z"));
        expect_identity(pods, NULL, 1, "newer", false);
        json_object_del(json_object_get(json_array_get(pods, 1), "metadata"), "deletionTimestamp");
        json_object_set_new(json_object_get(json_array_get(pods, 1), "metadata"), "annotations",
                            json_pack("{s:s}", TSR_ALLOC_ANNOTATION, "{\"main\": {}}"));
        expect_identity(pods, NULL, 1, "newer", false);
        /* the kubelet lists only "running" and "newer": running is not Pending but listed */
        const char *ns[] = {"ns", "ns"}, *names[] = {"running", "newer"};
        struct tsr_dp_held held = {"ns", "running", "main", "nvidia.com/gpu", held_ids, 1};
        struct tsr_dp_kubelet_view kv = {NULL, 0, ns, names, 2};
        expect_identity(pods, &kv, 1, "running", true);
        /* running already holds a GPU per the kubelet: newer; a repeated Allocate: running */
        kv.held = &held;
        kv.n_held = 1;
        expect_identity(pods, &kv, 1, "running", true);
        held.ids = (const char *const[]){tok(7, 0)};
        expect_identity(pods, &kv, 1, "newer", true);
        expect_identity(pods, &kv, 2, NULL, true);
        json_decref(pods);
}

/* GetPreferredAllocation names the container before the IDs exist, and the smallest slice. */
static void identify_before_ids(void **state)
{
        json_t *pods = json_array();
        const char *held_ids[] = {tok(5, 0)};
        const char *ns[] = {"ns", "ns"}, *names[] = {"running", "newer"};
        struct tsr_dp_held held = {"ns", "running", "main", "nvidia.com/gpu", held_ids, 1};
        struct tsr_dp_kubelet_view kv = {&held, 1, ns, names, 2};
        struct tsr_dp_identity id;
        char msg[256];
        int64_t units = -1;

        (void)state;
        json_array_append_new(
            pods, pod("newer", "2026-12-02T10:00:05Z", "Pending", "main", "nvidia.com/gpu", "1"));
        json_array_append_new(
            pods, pod("running", "2026-12-02T08:00:00Z", "Running", "main", "nvidia.com/gpu", "1"));
        /* no IDs: no repeated-Allocate match; running holds its card, so newer */
        assert_int_equal(tsr_dp_identify(&fx.node, pods, &kv, "nvidia.com/gpu", NULL, 1,
                                         is_reserved, NULL, &id, msg, sizeof(msg)),
                         0);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(id.pod, "metadata"), "name")),
            "newer");
        /* no slice waiting */
        assert_int_equal(tsr_dp_smallest_pending(&fx.node, pods, "nvidia.com/gpu.sliced",
                                                 is_reserved, NULL, &units),
                         TSR_ENOTFOUND);
        assert_int_equal(units, -1);
        json_array_clear(pods);
        const char *sliced[][3] = {{"big", "Pending", "900000"},
                                   {"small", "Pending", "300000"},
                                   {"ran", "Running", "100000"},
                                   {"held", "Pending", "200000"}};
        for (size_t k = 0; k < 4; k++) {
                json_t *p = pod(sliced[k][0], "2026-12-02T10:00:00Z", sliced[k][1], "main",
                                "nvidia.com/gpu.sliced", "1");
                json_t *c =
                    json_array_get(json_object_get(json_object_get(p, "spec"), "containers"), 0);

                json_object_set_new(json_object_get(json_object_get(c, "resources"), "limits"),
                                    "nvidia.com/gpu.sliced.units", json_string(sliced[k][2]));
                json_array_append_new(pods, p);
        }
        /* the smallest pending, unreserved slice: not the Running one, not the reserved one */
        reserved_uid = "held";
        assert_int_equal(tsr_dp_smallest_pending(&fx.node, pods, "nvidia.com/gpu.sliced",
                                                 is_reserved, NULL, &units),
                         0);
        assert_int_equal(units, 300000);
        reserved_uid = "small";
        assert_int_equal(tsr_dp_smallest_pending(&fx.node, pods, "nvidia.com/gpu.sliced",
                                                 is_reserved, NULL, &units),
                         0);
        assert_int_equal(units, 200000);
        reserved_uid = NULL;
        json_decref(pods);
}

/* A Pod "main" asking for one whole card, "sshd" for one visibility token. */
static json_t *sidecar_pod(const char *name, const char *created)
{
        json_t *p = pod(name, created, "Pending", "main", "nvidia.com/gpu", "1");

        json_array_append_new(json_object_get(json_object_get(p, "spec"), "containers"),
                              json_pack("{s:s, s:{s:{s:s}}}", "name", "sshd", "resources", "limits",
                                        "device.gpustack.ai/nvidia.visibility", "1"));
        return p;
}

/* The Pod a visibility Allocate of one token names, or NULL. */
static const char *visibility_pod(json_t *pods, const struct tsr_dp_kubelet_view *kv)
{
        const char *ids[] = {tok(7, 3)};
        struct tsr_dp_identity id;
        char msg[256];

        if (tsr_dp_identify(&fx.node, pods, kv, "device.gpustack.ai/nvidia.visibility", ids, 1,
                            is_reserved, NULL, &id, msg, sizeof(msg)))
                return NULL;
        assert_string_equal(id.container, "sshd");
        return json_string_value(json_object_get(json_object_get(id.pod, "metadata"), "name"));
}

/* A visibility container is named only in a Pod whose accelerator containers are served. */
static void identify_visibility(void **state)
{
        json_t *pods = json_array();
        const char *held_ids[] = {tok(5, 0)};
        const char *ns[] = {"ns", "ns"}, *names[] = {"first", "second"};
        struct tsr_dp_held held = {"ns", "first", "main", "nvidia.com/gpu", held_ids, 1};
        struct tsr_dp_kubelet_view kv = {NULL, 0, ns, names, 2};

        (void)state;
        json_array_append_new(pods, sidecar_pod("first", "2026-12-02T10:00:01Z"));
        json_array_append_new(pods, sidecar_pod("second", "2026-12-02T10:00:02Z"));
        /* both mains wait: nobody, not the oldest */
        assert_null(visibility_pod(pods, NULL));
        assert_null(visibility_pod(pods, &kv));
        /* second's main reserved: second, though first is older */
        reserved_uid = "second";
        reserved_container = "main";
        assert_string_equal(visibility_pod(pods, NULL), "second");
        /* second's sidecar reserved as well: nobody again */
        reserved_container = NULL;
        assert_null(visibility_pod(pods, NULL));
        reserved_uid = NULL;
        /* the kubelet shows first's main holding a card */
        kv.held = &held;
        kv.n_held = 1;
        assert_string_equal(visibility_pod(pods, &kv), "first");
        assert_null(visibility_pod(pods, NULL));
        /* first's main annotated */
        json_object_set_new(json_object_get(json_array_get(pods, 0), "metadata"), "annotations",
                            json_pack("{s:s}", TSR_ALLOC_ANNOTATION, "{\"main\": {}}"));
        assert_string_equal(visibility_pod(pods, NULL), "first");
        json_decref(pods);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(devices_per_family, setup),
            cmocka_unit_test_setup(devices_from_tokens, setup),
            cmocka_unit_test_setup(devices_unformable, setup),
            cmocka_unit_test_setup(preferred_packs, setup),
            cmocka_unit_test_setup(identify_containers, setup),
            cmocka_unit_test_setup(identify_before_ids, setup),
            cmocka_unit_test_setup(identify_visibility, setup),
            cmocka_unit_test_setup(allocate_refusals, setup),
            cmocka_unit_test_setup(allocate_grants, setup),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
