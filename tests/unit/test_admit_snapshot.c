/*
 * test_admit_snapshot.c - codec/admit_snapshot and codec/kueue_workload: gate 3's one snapshot,
 * shared by the simulator and `tessera controller`, and the v1beta2 Workload reader that feeds
 * it (seeds/admission.md "Gate 3"; spec/upstream-behavior.md §7; spec/kubernetes-contracts.md
 * §3.1-3.2).
 *
 * The snapshot cases build nodes of H100s with Pod objects bound to them and Workloads in the
 * neutral form, then read the verdict:
 *   - the inflight window: a Workload answered Ready holds its accelerator before its Pods
 *     exist, so a second one judged in that window finds it taken;
 *   - held and not-held Pods: the ledger charges an annotated Pod and the inflight count skips
 *     it, a bound Pod without its record is charged once by the inflight count, and a Pod of
 *     another Workload, PodSet or namespace is not the Workload's;
 *   - finished Pods: held, and their slice released by the ledger;
 *   - a Workload pinned to a fragmented node is held with the node's numbers, while the same
 *     Workload without a hostname-level assignment fits elsewhere in the pool;
 *   - no single accelerator flavor: Retry; a node gone (unlisted or not present): Retry;
 *   - an annotation that does not decode stops the judgement, naming the node and the Pod;
 *   - every verdict above is checked again through a kept snapshot (tsr_admit_snapshot_new, the
 *     other Workloads judged first, the target twice), and a kept snapshot charges a Workload
 *     that turned Ready once and judges it again without its own charge.
 * The reader cases parse Workloads that encoding/json wrote for Kueue v0.17.0's v1beta2 Go types
 * (the topology assignment encoded by its own tas.V1Beta2From: a common prefix, individual or
 * universal values and counts, "podSetAssignments": null on a Workload without assignments),
 * then hand-written edge cases: prefix and suffix, a level above the hostname, an assignment
 * without the hostname level, and one bad field per error path with its message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/admit_snapshot.h"
#include "codec/alloc_annotation.h"
#include "codec/kueue_workload.h"

#include "support/catalog_fixtures.h"
#include "support/json_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H100      "NVIDIA H100 80GB HBM3"
#define PCT(n)    ((int64_t)(n)*INT64_C(16000))
#define FLAVOR    "gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-2d"
#define CQ        "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
#define NODES_MAX 3
#define PODS_MAX  8
#define RETRY_END "; will retry as capacity frees"

/* ---- the snapshot's fixtures ---------------------------------------------------------------- */

struct pool {
        size_t n;
        struct tsr_snapshot_node nodes[NODES_MAX];
        struct tsr_accel_cap caps[NODES_MAX][4];
        json_t *pods[NODES_MAX][PODS_MAX];
};

static struct pool pool;

static void pool_reset(void)
{
        for (size_t k = 0; k < pool.n; k++)
                for (size_t x = 0; x < pool.nodes[k].n_pods; x++)
                        json_decref(pool.pods[k][x]);
        memset(&pool, 0, sizeof(pool));
}

/* Adds node name with gpus idle H100s in flavor FLAVOR; returns its index. */
static size_t add_node(const char *name, size_t gpus)
{
        size_t k = pool.n++;

        fx_detect(pool.caps[k], gpus, fx_product(H100), 0);
        pool.nodes[k] = (struct tsr_snapshot_node){
            .name = name,
            .present = true,
            .flavor = FLAVOR,
            .product = fx_product(H100),
            .caps = pool.caps[k],
            .n = gpus,
            .pods = pool.pods[k],
        };
        return k;
}

/* The limits of one slice of units. */
static json_t *slice_limits(int64_t units)
{
        char v[24];

        snprintf(v, sizeof(v), "%lld", (long long)units);
        return json_pack("{s:s, s:s}", "nvidia.com/gpu.sliced", "1", "nvidia.com/gpu.sliced.units",
                         v);
}

/* A Pod template with one container asking for a slice of units. */
static json_t *slice_template(int64_t units)
{
        return json_pack("{s:{}, s:{s:[{s:s, s:{s:o}}]}}", "metadata", "spec", "containers", "name",
                         "main", "resources", "limits", slice_limits(units));
}

/*
 * Binds to node k a Pod of Workload ns/workload, PodSet podset, asking for a slice of units, in
 * phase (NULL: none yet), with an allocation record of that slice on accelerator gpu (-1: none).
 */
static json_t *bind(size_t k, const char *ns, const char *name, const char *workload,
                    const char *podset, const char *phase, int64_t units, int gpu)
{
        json_t *pod = json_pack(
            "{s:{s:s, s:s, s:{s:s}, s:{s:s}}, s:{s:s, s:[{s:s, s:{s:o}}]}}", "metadata", "name",
            name, "namespace", ns, "labels", TSR_KUEUE_PODSET_LABEL, podset, "annotations",
            TSR_KUEUE_WORKLOAD_ANNOTATION, workload, "spec", "nodeName", pool.nodes[k].name,
            "containers", "name", "main", "resources", "limits", slice_limits(units));

        if (phase)
                json_object_set_new(pod, "status", json_pack("{s:s}", "phase", phase));
        if (gpu >= 0) {
                struct tsr_container_allocation a = {
                    .container = "main", .manufacturer = "nvidia", .n = 1};
                char *text;

                snprintf(a.accels[0].id, sizeof(a.accels[0].id), "GPU-%d", gpu);
                a.accels[0].index = (unsigned)gpu;
                a.accels[0].mode = TSR_MODE_SLICED;
                a.accels[0].allocated = units;
                a.accels[0].slices = 1;
                assert_int_equal(tsr_alloc_annotation_encode(&a, 1, &text), 0);
                json_object_set_new(
                    json_object_get(json_object_get(pod, "metadata"), "annotations"),
                    TSR_ALLOC_ANNOTATION, json_string(text));
                free(text);
        }
        pool.pods[k][pool.nodes[k].n_pods++] = pod;
        return pod;
}

/* A Workload of one PodSet "main" of count slices of units, reserved in CQ, check Pending. */
struct wl {
        struct tsr_snapshot_workload w;
        struct tsr_snapshot_podset ps;
        struct tsr_snapshot_domain d[NODES_MAX];
};

static void wl_init(struct wl *x, const char *name, unsigned count, json_t *tmpl)
{
        memset(x, 0, sizeof(*x));
        x->ps = (struct tsr_snapshot_podset){
            .name = "main", .count = count, .tmpl = tmpl, .flavor = FLAVOR, .domains = x->d};
        x->w = (struct tsr_snapshot_workload){
            .ns = "default",
            .name = name,
            .cluster_queue = CQ,
            .n_podsets = 1,
            .podsets = &x->ps,
            .active = true,
            .reserved = true,
            .has_check = true,
            .check = TSR_CHECK_PENDING,
            .check_message = "",
        };
}

/* Assigns pods of x's PodSet to node (a hostname). */
static void place(struct wl *x, const char *node, unsigned pods)
{
        x->d[x->ps.n_domains++] = (struct tsr_snapshot_domain){node, pods};
}

/*
 * A snapshot kept for many verdicts answers what the one-shot judgement answered, judging target
 * twice (the first verdict leaves the snapshot as it was) and after an unrelated Workload's
 * verdict.
 */
static void assert_same_as_kept(const struct tsr_snapshot_workload *workloads, size_t n,
                                const struct tsr_snapshot_workload *target,
                                const struct tsr_admit_verdict *once)
{
        struct tsr_admit_snapshot *s = NULL;
        struct tsr_admit_verdict v;
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        assert_int_equal(tsr_admit_snapshot_new(fx_product(H100), pool.nodes, pool.n, workloads, n,
                                                target->cluster_queue, &s, &diag),
                         0);
        for (size_t round = 0; round < 2; round++) {
                for (size_t i = 0; i < n; i++)
                        if (&workloads[i] != target)
                                assert_int_equal(
                                    tsr_admit_snapshot_verdict(s, &workloads[i], &v, &diag), 0);
                assert_int_equal(tsr_admit_snapshot_verdict(s, target, &v, &diag), 0);
                assert_int_equal(v.state, once->state);
                assert_string_equal(v.message, once->message);
        }
        tsr_admit_snapshot_free(s);
}

/* Judges target against pool with workloads[0..n); fails the test on an error. */
static struct tsr_admit_verdict judge(const struct tsr_snapshot_workload *workloads, size_t n,
                                      const struct tsr_snapshot_workload *target)
{
        struct tsr_admit_verdict v;
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_admit_snapshot_judge(fx_product(H100), pool.nodes, pool.n, workloads, n, target,
                                      &v, &diag);
        if (rc)
                fail_msg("judge = %s (%s)", tsr_err_name(rc), diag.msg);
        assert_same_as_kept(workloads, n, target, &v);
        return v;
}

static void assert_ready(struct tsr_admit_verdict v)
{
        assert_int_equal(v.state, TSR_CHECK_READY);
        assert_string_equal(v.message, TSR_ADMIT_READY_MESSAGE);
}

/* ---- the snapshot --------------------------------------------------------------------------- */

/* A pool of node-a with one H100, and Workloads "first" and "second" of tmpl's one Pod there. */
static void two_on_one_gpu(struct wl w[2], struct tsr_snapshot_workload list[2], json_t *tmpl)
{
        pool_reset();
        add_node("node-a", 1);
        wl_init(&w[0], "first", 1, tmpl);
        wl_init(&w[1], "second", 1, tmpl);
        place(&w[0], "node-a", 1);
        place(&w[1], "node-a", 1);
        list[0] = w[0].w;
        list[1] = w[1].w;
}

/*
 * Two 60 % slices, one H100: the first is judged Ready before any Pod of it exists; the second,
 * judged in that window, finds the accelerator taken by the first's verdict alone.
 */
static void test_snapshot__inflight_window(void **state)
{
        json_t *tmpl = slice_template(PCT(60));
        struct wl w[2];
        struct tsr_snapshot_workload list[2];

        (void)state;
        two_on_one_gpu(w, list, tmpl);
        assert_true(tsr_admit_snapshot_judges(&list[0]));
        assert_ready(judge(list, 2, &list[0]));
        /* The controller writes Ready; the next judgement reads it back. */
        list[0].check = TSR_CHECK_READY;
        struct tsr_admit_verdict v = judge(list, 2, &list[1]);
        assert_int_equal(v.state, TSR_CHECK_RETRY);
        assert_string_equal(v.message,
                            "node \"node-a\" fits 0 of 1 Pod: each needs 960000 free units and a "
                            "free slice slot on one accelerator, the freest accelerator has 640000 "
                            "units" RETRY_END);
        /* Admitted counts the same; a Workload of another ClusterQueue, or finished, does not. */
        list[0].check = TSR_CHECK_PENDING;
        list[0].admitted = true;
        assert_int_equal(judge(list, 2, &list[1]).state, TSR_CHECK_RETRY);
        list[0].cluster_queue = "another-queue";
        assert_ready(judge(list, 2, &list[1]));
        list[0].cluster_queue = CQ;
        list[0].finished = true;
        assert_ready(judge(list, 2, &list[1]));
        /* Without a hostname-level assignment a Workload is not inflight. */
        list[0].finished = false;
        list[0].podsets = &(struct tsr_snapshot_podset){"main", 1, tmpl, FLAVOR, 0, NULL};
        assert_ready(judge(list, 2, &list[1]));
        json_decref(tmpl);
        pool_reset();
}

/*
 * The inflight window through one kept snapshot, as the simulator's check pass uses it: the first
 * Workload answered Ready is charged once, the second then finds its accelerator taken, and the
 * first judged again is judged without its own charge.
 */
static void test_snapshot__kept_snapshot_charges_ready(void **state)
{
        json_t *tmpl = slice_template(PCT(60));
        struct wl w[2];
        struct tsr_snapshot_workload list[2];
        struct tsr_admit_snapshot *s = NULL;
        struct tsr_admit_verdict v;
        struct tsr_diag diag;

        (void)state;
        two_on_one_gpu(w, list, tmpl);
        tsr_diag_clear(&diag);
        assert_int_equal(
            tsr_admit_snapshot_new(fx_product(H100), pool.nodes, pool.n, list, 2, CQ, &s, &diag),
            0);
        assert_int_equal(tsr_admit_snapshot_verdict(s, &list[1], &v, &diag), 0);
        assert_ready(v);
        assert_int_equal(tsr_admit_snapshot_verdict(s, &list[0], &v, &diag), 0);
        assert_ready(v);
        list[0].check = TSR_CHECK_READY;
        assert_int_equal(tsr_admit_snapshot_charge(s, &list[0], &diag), 0);
        assert_int_equal(tsr_admit_snapshot_charge(s, &list[0], &diag), 0); /* once only */
        assert_int_equal(tsr_admit_snapshot_verdict(s, &list[1], &v, &diag), 0);
        assert_int_equal(v.state, TSR_CHECK_RETRY);
        assert_string_equal(v.message,
                            "node \"node-a\" fits 0 of 1 Pod: each needs 960000 free units and a "
                            "free slice slot on one accelerator, the freest accelerator has 640000 "
                            "units" RETRY_END);
        assert_int_equal(tsr_admit_snapshot_verdict(s, &list[0], &v, &diag), 0);
        assert_ready(v);
        tsr_admit_snapshot_free(s);
        json_decref(tmpl);
        pool_reset();
}

/*
 * An admitted Workload of two 60 % slices on node-a: Pod x holds GPU 0 (its record names its
 * container), Pod y is bound without a record yet. With three GPUs a third slice fits on GPU 2
 * (x is charged by the ledger only); with two it does not (y is charged by the inflight count).
 */
static void test_snapshot__held_and_not_held(void **state)
{
        json_t *tmpl = slice_template(PCT(60));
        struct wl a, b;
        struct tsr_snapshot_workload list[2];

        (void)state;
        for (size_t gpus = 2; gpus <= 3; gpus++) {
                pool_reset();
                add_node("node-a", gpus);
                bind(0, "default", "x", "a", "main", "Running", PCT(60), 0);
                bind(0, "default", "y", "a", "main", "Pending", PCT(60), -1);
                wl_init(&a, "a", 2, tmpl);
                wl_init(&b, "b", 1, tmpl);
                place(&a, "node-a", 2);
                place(&b, "node-a", 1);
                a.w.admitted = true;
                list[0] = a.w;
                list[1] = b.w;
                assert_int_equal(judge(list, 2, &list[1]).state,
                                 gpus == 3 ? TSR_CHECK_READY : TSR_CHECK_RETRY);
        }
        /*
         * On three GPUs, Pods with a record that are not a's do not relieve a's count: another
         * Workload's, another PodSet's, another namespace's. a then charges two more slices.
         */
        pool_reset();
        add_node("node-a", 3);
        bind(0, "default", "x", "other", "main", "Running", PCT(20), 0);
        bind(0, "default", "y", "a", "worker", "Running", PCT(20), 0);
        bind(0, "elsewhere", "z", "a", "main", "Running", PCT(20), 0);
        wl_init(&a, "a", 2, tmpl);
        wl_init(&b, "b", 1, tmpl);
        place(&a, "node-a", 2);
        place(&b, "node-a", 1);
        a.w.admitted = true;
        list[0] = a.w;
        list[1] = b.w;
        /* GPU 0 holds 60 % of others' slices; a takes GPU 1 and GPU 2; b finds none. */
        assert_int_equal(judge(list, 2, &list[1]).state, TSR_CHECK_RETRY);
        json_decref(tmpl);
        pool_reset();
}

/*
 * A finished Pod is held, and the ledger stops charging its slice: an admitted Workload whose one
 * Pod Succeeded charges nothing, so a 60 % slice fits the node's one GPU.
 */
static void test_snapshot__finished_pods(void **state)
{
        json_t *tmpl = slice_template(PCT(60));
        struct wl a, b;
        struct tsr_snapshot_workload list[2];
        struct tsr_accel_ledger ledger[1];

        (void)state;
        for (int failed = 0; failed < 2; failed++) {
                pool_reset();
                add_node("node-a", 1);
                bind(0, "default", "x", "a", "main", failed ? "Failed" : "Succeeded", PCT(60), 0);
                assert_int_equal(tsr_admit_snapshot_ledger(&pool.nodes[0], ledger, NULL), 0);
                assert_int_equal(ledger[0].remaining, INT64_C(1600000));
                wl_init(&a, "a", 1, tmpl);
                wl_init(&b, "b", 1, tmpl);
                place(&a, "node-a", 1);
                place(&b, "node-a", 1);
                a.w.admitted = true;
                list[0] = a.w;
                list[1] = b.w;
                assert_ready(judge(list, 2, &list[1]));
        }
        /* The same Pod still running holds GPU 0 in the ledger. */
        json_object_set_new(json_object_get(pool.pods[0][0], "status"), "phase",
                            json_string("Running"));
        assert_int_equal(tsr_admit_snapshot_ledger(&pool.nodes[0], ledger, NULL), 0);
        assert_int_equal(ledger[0].remaining, PCT(40));
        assert_int_equal(judge(list, 2, &list[1]).state, TSR_CHECK_RETRY);
        json_decref(tmpl);
        pool_reset();
}

/*
 * node-a's two GPUs each hold a 60 % slice (640,000 units free each, 1,280,000 on the node);
 * node-b is idle. A 60 % slice pinned to node-a is held with node-a's numbers; the same
 * Workload without a hostname-level assignment fits on node-b.
 */
static void test_snapshot__pinned_on_fragmented_node(void **state)
{
        json_t *tmpl = slice_template(PCT(60));
        struct wl b;
        struct tsr_admit_verdict v;

        (void)state;
        pool_reset();
        add_node("node-b", 2);
        add_node("node-a", 2);
        bind(1, "default", "x", "other", "main", "Running", PCT(60), 0);
        bind(1, "default", "y", "other", "main", "Running", PCT(60), 1);
        wl_init(&b, "b", 1, tmpl);
        place(&b, "node-a", 1);
        v = judge(&b.w, 1, &b.w);
        assert_int_equal(v.state, TSR_CHECK_RETRY);
        assert_string_equal(v.message,
                            "node \"node-a\" fits 0 of 1 Pod: each needs 960000 free units and a "
                            "free slice slot on one accelerator, the freest accelerator has 640000 "
                            "units" RETRY_END);
        b.ps.n_domains = 0;
        assert_ready(judge(&b.w, 1, &b.w));
        /* A node of another flavor serves nothing. */
        pool.nodes[0].flavor = "another-flavor";
        v = judge(&b.w, 1, &b.w);
        assert_string_equal(
            v.message, "the flavor's node pool fits 0 of 1 Pod: each needs 960000 free units "
                       "and a free slice slot on one accelerator, 1 more do not fit" RETRY_END);
        json_decref(tmpl);
        pool_reset();
}

/* A PodSet whose admission names no single accelerator flavor is held. */
static void test_snapshot__no_flavor_retry(void **state)
{
        json_t *tmpl = slice_template(PCT(30));
        struct wl b;
        struct tsr_admit_verdict v;

        (void)state;
        pool_reset();
        add_node("node-a", 1);
        wl_init(&b, "b", 1, tmpl);
        b.ps.flavor = NULL;
        place(&b, "node-a", 1);
        v = judge(&b.w, 1, &b.w);
        assert_int_equal(v.state, TSR_CHECK_RETRY);
        assert_string_equal(v.message, "the Workload's admission does not resolve to a single "
                                       "accelerator flavor; will retry once it does");
        /* A flavor no node of the pool carries offers nothing either. */
        b.ps.flavor = "gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-8d";
        v = judge(&b.w, 1, &b.w);
        assert_string_equal(
            v.message, "node \"node-a\" fits 0 of 1 Pod: each needs 480000 free units and a "
                       "free slice slot on one accelerator, none in the PodSet's flavor" RETRY_END);
        json_decref(tmpl);
        pool_reset();
}

/* A node named by the assignment that no listed node is, or one listed as gone, holds. */
static void test_snapshot__node_gone(void **state)
{
        json_t *tmpl = slice_template(PCT(30));
        struct wl a, b;
        struct tsr_snapshot_workload list[2];
        struct tsr_admit_verdict v;

        (void)state;
        pool_reset();
        add_node("node-a", 1);
        wl_init(&b, "b", 1, tmpl);
        place(&b, "node-z", 1);
        v = judge(&b.w, 1, &b.w);
        assert_int_equal(v.state, TSR_CHECK_RETRY);
        assert_string_equal(v.message, "node \"node-z\" assigned no longer exists" RETRY_END);
        b.d[0].node = "node-a";
        pool.nodes[0].present = false;
        v = judge(&b.w, 1, &b.w);
        assert_string_equal(v.message, "node \"node-a\" assigned no longer exists" RETRY_END);
        /* An inflight Workload on a gone node charges nothing. */
        pool.nodes[0].present = true;
        wl_init(&a, "a", 1, tmpl);
        place(&a, "node-gone", 1);
        a.w.admitted = true;
        list[0] = a.w;
        list[1] = b.w;
        assert_ready(judge(list, 2, &list[1]));
        json_decref(tmpl);
        pool_reset();
}

/* What cannot be read is an error that names where, never a verdict. */
static void test_snapshot__unreadable(void **state)
{
        json_t *tmpl = slice_template(PCT(30)), *pod;
        struct tsr_admit_verdict v;
        struct tsr_diag diag;
        struct wl b;

        (void)state;
        pool_reset();
        add_node("node-a", 1);
        pod = bind(0, "default", "broken", "a", "main", "Running", PCT(30), -1);
        json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "annotations"),
                            TSR_ALLOC_ANNOTATION, json_string("{\"main\": 3"));
        wl_init(&b, "b", 1, tmpl);
        place(&b, "node-a", 1);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_admit_snapshot_judge(fx_product(H100), pool.nodes, pool.n, &b.w, 1,
                                                  &b.w, &v, &diag),
                         TSR_EPARSE);
        assert_non_null(strstr(diag.msg, "node node-a: Pod default/broken: allocation record"));
        /* A template that is not a Pod. */
        json_object_del(json_object_get(pod, "metadata"), "annotations");
        json_object_set_new(
            json_object_get(
                json_array_get(json_object_get(json_object_get(tmpl, "spec"), "containers"), 0),
                "resources"),
            "limits", json_string("many"));
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_admit_snapshot_judge(fx_product(H100), pool.nodes, pool.n, &b.w, 1,
                                                  &b.w, &v, &diag),
                         TSR_EPARSE);
        assert_non_null(strstr(diag.msg, "Workload default/b PodSet main: "));
        assert_int_equal(
            tsr_admit_snapshot_judge(NULL, pool.nodes, pool.n, &b.w, 1, &b.w, &v, NULL),
            TSR_EINVAL);
        json_decref(tmpl);
        pool_reset();
}

/*
 * A snapshot that lists only the target's node (as the controller's pinned verdict does) leaves
 * out the charges on nodes it does not list: an inflight Workload placed only elsewhere is not
 * read at all (its template, not a Pod, does not fail the verdict), while one with a domain on
 * the listed node still charges it there. Listing every node gives the same verdict.
 */
static void test_snapshot__charges_on_unlisted_nodes(void **state)
{
        json_t *tmpl = slice_template(PCT(60)),
               *bad = json_pack("{s:{}, s:{s:s}}", "metadata", "spec", "containers", "many");
        struct tsr_snapshot_workload list[3];
        struct tsr_admit_verdict v;
        struct tsr_diag diag;
        struct wl w[3];

        (void)state;
        pool_reset();
        add_node("node-a", 1);
        add_node("node-b", 1);
        wl_init(&w[0], "elsewhere", 1, bad);
        place(&w[0], "node-b", 1);
        place(&w[0], "node-c", 1); /* no Node at all */
        wl_init(&w[1], "both", 2, tmpl);
        place(&w[1], "node-b", 1);
        place(&w[1], "node-a", 1);
        wl_init(&w[2], "target", 1, tmpl);
        place(&w[2], "node-a", 1);
        for (size_t i = 0; i < 3; i++) {
                w[i].w.check = i < 2 ? TSR_CHECK_READY : TSR_CHECK_PENDING;
                list[i] = w[i].w;
        }
        /* Every node listed: the malformed template on node-b cannot be read. */
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_admit_snapshot_judge(fx_product(H100), pool.nodes, pool.n, list, 3,
                                                  &list[2], &v, &diag),
                         TSR_EPARSE);
        assert_non_null(strstr(diag.msg, "Workload default/elsewhere PodSet main: "));
        /* Only node-a listed: "elsewhere" is not read, "both" takes node-a's accelerator. */
        pool.n = 1;
        assert_int_equal(tsr_admit_snapshot_judge(fx_product(H100), pool.nodes, pool.n, list, 3,
                                                  &list[2], &v, &diag),
                         0);
        assert_int_equal(v.state, TSR_CHECK_RETRY);
        assert_non_null(strstr(v.message, "node \"node-a\" fits 0 of 1 Pod"));
        /* Without "both", the target fits; with every node and a readable "elsewhere", the same. */
        list[1].cluster_queue = "another-queue";
        assert_int_equal(tsr_admit_snapshot_judge(fx_product(H100), pool.nodes, pool.n, list, 3,
                                                  &list[2], &v, &diag),
                         0);
        assert_ready(v);
        pool.n = 2;
        list[0].podsets = &(struct tsr_snapshot_podset){
            "main", 1, tmpl, FLAVOR, 1, &(struct tsr_snapshot_domain){"node-b", 1}};
        assert_ready(judge(list, 3, &list[2]));
        json_decref(tmpl);
        json_decref(bad);
        pool_reset();
}

/* ---- the Workload reader -------------------------------------------------------------------- */

/* What encoding/json writes for Kueue v0.17.0's v1beta2 Workload: 3 Pods over 2 nodes, Pending. */
static const char wl_tas[] =
    "{\"kind\":\"Workload\",\"apiVersion\":\"kueue.x-k8s.io/"
    "v1beta2\",\"metadata\":{\"name\":\"pod-group-t"
    "rain-5f3a1\",\"namespace\":\"team-a\",\"uid\":\"5d1c7a4e-2b3f-4f60-9a1d-0c4b7e2d9f10\","
    "\"resourceV"
    "ersion\":\"4711\",\"generation\":1},\"spec\":{\"podSets\":[{\"name\":\"b8c778a5\","
    "\"template\":{\"metada"
    "ta\":{\"labels\":{\"kueue.x-k8s.io/"
    "queue-name\":\"gpustack-fnv64-e4768a65ca0ce96b\"}},\"spec\":{\""
    "containers\":[{\"name\":\"main\",\"image\":\"ubuntu:24.04\",\"resources\":{\"limits\":{"
    "\"nvidia.com/gp"
    "u.sliced\":\"1\",\"nvidia.com/"
    "gpu.sliced.units\":\"480k\"}}}],\"restartPolicy\":\"Never\"}},\"count\""
    ":3}],\"queueName\":\"gpustack-fnv64-e4768a65ca0ce96b\",\"active\":true},\"status\":{"
    "\"conditions\""
    ":[{\"type\":\"QuotaReserved\",\"status\":\"True\",\"observedGeneration\":1,"
    "\"lastTransitionTime\":\"2"
    "026-01-01T00:00:05Z\",\"reason\":\"QuotaReserved\",\"message\":\"Quota reserved in "
    "ClusterQueue "
    "gpustack--nvidia-h100-80gb-hbm3-linux-amd64\"}],\"admission\":{\"clusterQueue\":\"gpustack--nv"
    "idia-h100-80gb-hbm3-linux-amd64\",\"podSetAssignments\":[{\"name\":\"b8c778a5\",\"flavors\":{"
    "\"cpu"
    "\":\"gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-2d\",\"credits.gpustack.ai/nvidia\""
    ":\"gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-2d\"},\"resourceUsage\":{\"credits.gp"
    "ustack.ai/nvidia\":\"1440k\"},\"count\":3,\"topologyAssignment\":{\"levels\":[\"kubernetes.io/"
    "host"
    "name\"],\"slices\":[{\"domainCount\":2,\"valuesPerLevel\":[{\"individual\":{\"prefix\":\"gpu-"
    "node-\","
    "\"roots\":[\"a\",\"b\"]}}],\"podCounts\":{\"individual\":[2,1]}}]}}]},\"admissionChecks\":[{"
    "\"name\":\""
    "gpustack-node-devices\",\"state\":\"Pending\",\"lastTransitionTime\":\"2026-01-01T00:00:05Z\","
    "\"me"
    "ssage\":\"\"}]}}";

/* Two PodSets, admitted, the check Ready: a CPU leader and two workers on one node (universal). */
static const char wl_admitted[] =
    "{\"kind\":\"Workload\",\"apiVersion\":\"kueue.x-k8s.io/"
    "v1beta2\",\"metadata\":{\"name\":\"pod-group-s"
    "erve-77c2d\",\"namespace\":\"team-a\",\"uid\":\"5d1c7a4e-2b3f-4f60-9a1d-0c4b7e2d9f10\","
    "\"resourceV"
    "ersion\":\"4711\",\"generation\":1},\"spec\":{\"podSets\":[{\"name\":\"leader\",\"template\":{"
    "\"metadata"
    "\":{\"labels\":{\"kueue.x-k8s.io/"
    "queue-name\":\"gpustack-fnv64-e4768a65ca0ce96b\"}},\"spec\":{\"co"
    "ntainers\":[{\"name\":\"main\",\"image\":\"ubuntu:24.04\",\"resources\":{\"limits\":{\"cpu\":"
    "\"2\"}}}],\"r"
    "estartPolicy\":\"Never\"}},\"count\":1},{\"name\":\"worker\",\"template\":{\"metadata\":{"
    "\"labels\":{\"k"
    "ueue.x-k8s.io/"
    "queue-name\":\"gpustack-fnv64-e4768a65ca0ce96b\"}},\"spec\":{\"containers\":[{\"na"
    "me\":\"main\",\"image\":\"ubuntu:24.04\",\"resources\":{\"limits\":{\"nvidia.com/"
    "gpu.sliced\":\"1\",\"nv"
    "idia.com/"
    "gpu.sliced.units\":\"480k\"}}}],\"restartPolicy\":\"Never\"}},\"count\":2}],\"queueName\":"
    "\"gpustack-fnv64-e4768a65ca0ce96b\",\"active\":true},\"status\":{\"conditions\":[{\"type\":"
    "\"QuotaR"
    "eserved\",\"status\":\"True\",\"observedGeneration\":1,\"lastTransitionTime\":\"2026-01-01T00:"
    "00:0"
    "5Z\",\"reason\":\"QuotaReserved\",\"message\":\"Quota reserved in ClusterQueue "
    "gpustack--nvidia-"
    "h100-80gb-hbm3-linux-amd64\"},{\"type\":\"Admitted\",\"status\":\"True\","
    "\"observedGeneration\":1,\""
    "lastTransitionTime\":\"2026-01-01T00:00:05Z\",\"reason\":\"Admitted\",\"message\":\"The "
    "workload i"
    "s "
    "admitted\"}],\"admission\":{\"clusterQueue\":\"gpustack--nvidia-h100-80gb-hbm3-linux-amd64\","
    "\"podSetAssignments\":[{\"name\":\"leader\",\"flavors\":{\"cpu\":\"gpustack--generic--nvidia-"
    "h100-8"
    "0gb-hbm3-linux-amd64-2d\"},\"count\":1,\"topologyAssignment\":{\"levels\":[\"kubernetes.io/"
    "hostn"
    "ame\"],\"slices\":[{\"domainCount\":1,\"valuesPerLevel\":[{\"universal\":\"gpu-node-b\"}],"
    "\"podCount"
    "s\":{\"universal\":1}}]}},{\"name\":\"worker\",\"flavors\":{\"credits.gpustack.ai/"
    "nvidia\":\"gpustac"
    "k--generic--nvidia-h100-80gb-hbm3-linux-amd64-2d\"},\"count\":2,\"topologyAssignment\":{\"leve"
    "ls\":[\"kubernetes.io/"
    "hostname\"],\"slices\":[{\"domainCount\":1,\"valuesPerLevel\":[{\"universal\""
    ":\"gpu-node-b\"}],\"podCounts\":{\"universal\":2}}]}}]},\"admissionChecks\":[{\"name\":"
    "\"gpustack-n"
    "ode-devices\",\"state\":\"Ready\",\"lastTransitionTime\":\"2026-01-01T00:00:05Z\",\"message\":"
    "\"the "
    "assigned flavor pool has enough free cards to place the request\"}]}}";

/* Quota not reserved, "podSetAssignments": null, the check back from Retry with retryCount. */
static const char wl_pending[] =
    "{\"kind\":\"Workload\",\"apiVersion\":\"kueue.x-k8s.io/"
    "v1beta2\",\"metadata\":{\"name\":\"pod-big-3-0"
    "a1b2\",\"namespace\":\"team-a\",\"uid\":\"5d1c7a4e-2b3f-4f60-9a1d-0c4b7e2d9f10\","
    "\"resourceVersion"
    "\":\"4711\",\"generation\":1},\"spec\":{\"podSets\":[{\"name\":\"main\",\"template\":{"
    "\"metadata\":{\"labe"
    "ls\":{\"kueue.x-k8s.io/"
    "queue-name\":\"gpustack-fnv64-e4768a65ca0ce96b\"}},\"spec\":{\"containers"
    "\":[{\"name\":\"main\",\"image\":\"ubuntu:24.04\",\"resources\":{\"limits\":{\"nvidia.com/"
    "gpu.sliced\":"
    "\"1\",\"nvidia.com/"
    "gpu.sliced.units\":\"480k\"}}}],\"restartPolicy\":\"Never\"}},\"count\":1}],\"queu"
    "eName\":\"gpustack-fnv64-e4768a65ca0ce96b\",\"active\":true},\"status\":{\"conditions\":[{"
    "\"type\":"
    "\"QuotaReserved\",\"status\":\"False\",\"lastTransitionTime\":\"2026-01-01T00:00:05Z\","
    "\"reason\":\"P"
    "ending\",\"message\":\"couldn't assign flavors to pod set "
    "main\"}],\"admission\":{\"clusterQueue"
    "\":\"gpustack--nvidia-h100-80gb-hbm3-linux-amd64\",\"podSetAssignments\":null},\"admissionChec"
    "ks\":[{\"name\":\"gpustack-node-devices\",\"state\":\"Retry\",\"lastTransitionTime\":\"2026-"
    "01-01T00"
    ":00:05Z\",\"message\":\"node \\\"gpu-node-a\\\" fits 0 of 1 "
    "Pod\",\"requeueAfterSeconds\":30,\"retry"
    "Count\":2}]}}";

/* The Workload text reads as, borrowing *obj (json_decref after tsr_kueue_workload_free). */
static struct tsr_kueue_workload *parse(const char *text, json_t **obj)
{
        struct tsr_kueue_workload *k = NULL;
        struct tsr_diag diag;
        int rc;

        *obj = json_fx_load(text);
        tsr_diag_clear(&diag);
        rc = tsr_kueue_workload_parse(*obj, &k, &diag);
        if (rc)
                fail_msg("parse = %s (%s)", tsr_err_name(rc), diag.msg);
        return k;
}

static void done(struct tsr_kueue_workload *k, json_t *obj)
{
        tsr_kueue_workload_free(k);
        json_decref(obj);
}

static void test_workload__v017_topology_assignment(void **state)
{
        json_t *obj = json_fx_load(wl_tas);
        struct tsr_kueue_workload *k = NULL;
        const struct tsr_snapshot_podset *ps;

        (void)state;
        assert_int_equal(tsr_kueue_workload_parse(obj, &k, NULL), 0);
        assert_string_equal(k->w.ns, "team-a");
        assert_string_equal(k->w.name, "pod-group-train-5f3a1");
        assert_string_equal(k->w.cluster_queue, CQ);
        assert_true(k->w.active && k->w.reserved);
        assert_false(k->w.admitted || k->w.evicted || k->w.finished);
        assert_true(k->w.has_check);
        assert_int_equal(k->w.check, TSR_CHECK_PENDING);
        assert_string_equal(k->w.check_message, "");
        assert_true(tsr_admit_snapshot_judges(&k->w));
        assert_int_equal(k->w.n_podsets, 1);
        ps = &k->w.podsets[0];
        assert_string_equal(ps->name, "b8c778a5");
        assert_int_equal(ps->count, 3);
        assert_string_equal(ps->flavor, FLAVOR); /* its credits resource's, not cpu's */
        assert_int_equal(ps->n_domains, 2);
        assert_string_equal(ps->domains[0].node, "gpu-node-a");
        assert_int_equal(ps->domains[0].pods, 2);
        assert_string_equal(ps->domains[1].node, "gpu-node-b");
        assert_int_equal(ps->domains[1].pods, 1);

        /* Judged as read: node-a takes two 30 % slices on one GPU, node-b one. */
        pool_reset();
        add_node("gpu-node-a", 1);
        add_node("gpu-node-b", 1);
        assert_ready(judge(&k->w, 1, &k->w));
        /* An 80 % slice already on node-a's GPU leaves room for neither. */
        bind(0, "team-a", "other-0", "other", "main", "Running", PCT(80), 0);
        assert_string_equal(judge(&k->w, 1, &k->w).message,
                            "node \"gpu-node-a\" fits 0 of 2 Pods: each needs 480000 free units "
                            "and a free slice slot on one accelerator, the freest accelerator has "
                            "320000 units" RETRY_END);
        tsr_kueue_workload_free(k);
        json_decref(obj);
        pool_reset();
}

static void test_workload__v017_admitted_and_pending(void **state)
{
        json_t *obj;
        struct tsr_kueue_workload *k = parse(wl_admitted, &obj);

        (void)state;
        assert_true(k->w.reserved && k->w.admitted);
        assert_int_equal(k->w.check, TSR_CHECK_READY);
        assert_string_equal(k->w.check_message, TSR_ADMIT_READY_MESSAGE);
        assert_false(tsr_admit_snapshot_judges(&k->w));
        assert_int_equal(k->w.n_podsets, 2);
        assert_string_equal(k->w.podsets[0].name, "leader");
        assert_null(k->w.podsets[0].flavor); /* no credits: no accelerator flavor */
        assert_int_equal(k->w.podsets[0].n_domains, 1);
        assert_string_equal(k->w.podsets[1].name, "worker");
        assert_string_equal(k->w.podsets[1].flavor, FLAVOR);
        assert_int_equal(k->w.podsets[1].n_domains, 1);
        assert_string_equal(k->w.podsets[1].domains[0].node, "gpu-node-b");
        assert_int_equal(k->w.podsets[1].domains[0].pods, 2);
        done(k, obj);

        k = parse(wl_pending, &obj);
        assert_false(k->w.reserved || k->w.admitted);
        assert_string_equal(k->w.cluster_queue, CQ);
        assert_int_equal(k->w.check, TSR_CHECK_RETRY);
        assert_string_equal(k->w.check_message, "node \"gpu-node-a\" fits 0 of 1 Pod");
        assert_int_equal(k->w.podsets[0].count, 1);
        assert_null(k->w.podsets[0].flavor);
        assert_int_equal(k->w.podsets[0].n_domains, 0);
        assert_false(tsr_admit_snapshot_judges(&k->w));
        done(k, obj);

        /* The least a Workload can be: defaults for name, count and active; no status. */
        k = parse("{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},"
                  "\"spec\":{\"podSets\":[{\"template\":{\"spec\":{\"containers\":[]}}}]}}",
                  &obj);
        assert_string_equal(k->w.podsets[0].name, "main");
        assert_int_equal(k->w.podsets[0].count, 1);
        assert_true(k->w.active);
        assert_false(k->w.reserved || k->w.has_check);
        assert_string_equal(k->w.cluster_queue, "");
        done(k, obj);
        obj = json_fx_load("[]");
        assert_int_equal(tsr_kueue_workload_parse(obj, &k, NULL), TSR_EINVAL);
        json_decref(obj);
}

#define WL_HEAD                                                                                    \
        "{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{\"name\":"     \
        "\"p\",\"count\":4,\"template\":{}}]},\"status\":{\"admission\":{\"clusterQueue\":\"q\","  \
        "\"podSetAssignments\":[{\"name\":\"p\",\"flavors\":{\"credits.gpustack.ai/nvidia\":"      \
        "\"f\"},\"topologyAssignment\":"
#define WL_TAIL "}]}}}"

/* Hand-written assignments: prefix and suffix, a level above the hostname, no hostname level. */
static void test_workload__topology_shapes(void **state)
{
        struct tsr_kueue_workload *k;
        json_t *obj;

        (void)state;
        k = parse(WL_HEAD "{\"levels\":[\"cloud/rack\",\"kubernetes.io/hostname\"],\"slices\":["
                          "{\"domainCount\":2,\"valuesPerLevel\":[{\"universal\":\"r1\"},"
                          "{\"individual\":{\"prefix\":\"gpu-\",\"suffix\":\".lan\",\"roots\":"
                          "[\"a\",\"b\"]}}],\"podCounts\":{\"universal\":1}},"
                          "{\"domainCount\":1,\"valuesPerLevel\":[{\"universal\":\"r2\"},"
                          "{\"individual\":{\"roots\":[\"gpu-c\"]}}],\"podCounts\":"
                          "{\"individual\":[2]}}]}" WL_TAIL,
                  &obj);
        assert_int_equal(k->w.podsets[0].n_domains, 3);
        assert_string_equal(k->w.podsets[0].domains[0].node, "gpu-a.lan");
        assert_string_equal(k->w.podsets[0].domains[1].node, "gpu-b.lan");
        assert_string_equal(k->w.podsets[0].domains[2].node, "gpu-c");
        assert_int_equal(k->w.podsets[0].domains[2].pods, 2);
        assert_int_equal(k->w.podsets[0].count, 4);
        done(k, obj);
        /* Rack level only: judged over the whole pool. An empty list of slices is no domain. */
        k = parse(WL_HEAD "{\"levels\":[\"cloud/rack\"],\"slices\":[{\"domainCount\":1,"
                          "\"valuesPerLevel\":[{\"universal\":\"r1\"}],\"podCounts\":"
                          "{\"universal\":4}}]}" WL_TAIL,
                  &obj);
        assert_int_equal(k->w.podsets[0].n_domains, 0);
        assert_string_equal(k->w.podsets[0].flavor, "f");
        done(k, obj);
        k = parse(WL_HEAD "{\"levels\":[\"kubernetes.io/hostname\"],\"slices\":[]}" WL_TAIL, &obj);
        assert_int_equal(k->w.podsets[0].n_domains, 0);
        done(k, obj);
        /* Two accelerator credits resources: no single flavor. */
        k = parse("{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{"
                  "\"name\":\"p\",\"template\":{}}]},\"status\":{\"admission\":{\"clusterQueue\":"
                  "\"q\",\"podSetAssignments\":[{\"name\":\"p\",\"count\":0,\"flavors\":{"
                  "\"credits.gpustack.ai/nvidia\":\"f\",\"credits.gpustack.ai/hygon\":\"g\"}}]}}}",
                  &obj);
        assert_null(k->w.podsets[0].flavor);
        assert_int_equal(k->w.podsets[0].count, 0);
        done(k, obj);
}

/* One bad field per error path, and the message that names it. */
static void test_workload__bad_fields(void **state)
{
        static const struct {
                const char *text, *message;
        } bad[] = {
            {"{\"metadata\":{\"namespace\":\"n\"},\"spec\":{}}",
             "Workload /: metadata.name: required"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"\"},\"spec\":{}}",
             "Workload /: metadata.name: must not be empty"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[]}}",
             "Workload n/w: spec.podSets: must list 1 to 8 PodSets"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{"
             "\"count\":-1,\"template\":{}}]}}",
             "Workload n/w: spec.podSets[0].count: must be an integer in 0..2147483647"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{"
             "\"template\":{}},{\"template\":{}}]}}",
             "Workload n/w: spec.podSets[1].name: \"main\" names two PodSets"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{}]}}",
             "Workload n/w: spec.podSets[0].template: required"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"active\":1,"
             "\"podSets\":[{\"template\":{}}]}}",
             "Workload n/w: spec.active: must be a boolean"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{"
             "\"template\":{}}]},\"status\":{\"conditions\":[{\"type\":\"Admitted\"}]}}",
             "Workload n/w: status.conditions[0].status: required"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{"
             "\"template\":{}}]},\"status\":{\"admissionChecks\":[{\"name\":"
             "\"gpustack-node-devices\",\"state\":\"Done\"}]}}",
             "Workload n/w: status.admissionChecks[0].state: \"Done\" is not Pending, Ready, "
             "Retry or Rejected"},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{"
             "\"template\":{}}]},\"status\":{\"admission\":{\"clusterQueue\":\"q\","
             "\"podSetAssignments\":[{\"name\":\"x\"}]}}}",
             "Workload n/w: status.admission.podSetAssignments[0].name: no PodSet \"x\""},
            {"{\"metadata\":{\"namespace\":\"n\",\"name\":\"w\"},\"spec\":{\"podSets\":[{"
             "\"template\":{}}]},\"status\":{\"admission\":{\"podSetAssignments\":[]}}}",
             "Workload n/w: status.admission.clusterQueue: required"},
            {WL_HEAD "{\"slices\":[]}" WL_TAIL,
             "Workload n/w: status.admission.podSetAssignments[0].topologyAssignment.levels: "
             "must list 1 to 16 node label keys"},
            {WL_HEAD "{\"levels\":[\"kubernetes.io/hostname\"],\"slices\":[{\"domainCount\":2,"
                     "\"valuesPerLevel\":[{\"individual\":{\"roots\":[\"a\"]}}],\"podCounts\":"
                     "{\"universal\":1}}]}" WL_TAIL,
             "Workload n/w: status.admission.podSetAssignments[0].topologyAssignment.slices[0]."
             "valuesPerLevel[0].individual.roots: must list domainCount (2) values"},
            {WL_HEAD "{\"levels\":[\"kubernetes.io/hostname\"],\"slices\":[{\"domainCount\":1,"
                     "\"valuesPerLevel\":[{\"universal\":\"a\"}],\"podCounts\":{\"universal\":1,"
                     "\"individual\":[1]}}]}" WL_TAIL,
             "Workload n/w: status.admission.podSetAssignments[0].topologyAssignment.slices[0]."
             "podCounts: must set exactly one of universal and individual"},
            {WL_HEAD "{\"levels\":[\"kubernetes.io/hostname\"],\"slices\":[{\"domainCount\":1,"
                     "\"valuesPerLevel\":[],\"podCounts\":{\"universal\":1}}]}" WL_TAIL,
             "Workload n/w: status.admission.podSetAssignments[0].topologyAssignment.slices[0]."
             "valuesPerLevel: must have 1 entries, one per level"},
            {WL_HEAD "{\"levels\":[\"kubernetes.io/hostname\"],\"slices\":[{\"domainCount\":2,"
                     "\"valuesPerLevel\":[{\"universal\":\"a\"}],\"podCounts\":{\"universal\":1}"
                     "}]}" WL_TAIL,
             "Workload n/w: status.admission.podSetAssignments[0].topologyAssignment: names "
             "node \"a\" twice"},
            {WL_HEAD "{\"levels\":[\"kubernetes.io/hostname\"],\"slices\":[{\"domainCount\":1,"
                     "\"valuesPerLevel\":[{\"individual\":{\"roots\":[\"\"]}}],\"podCounts\":"
                     "{\"individual\":[1]}}]}" WL_TAIL,
             "Workload n/w: status.admission.podSetAssignments[0].topologyAssignment.slices[0]."
             "valuesPerLevel[0]: domain 0: \"\" is not a node name (1 to 253 characters)"},
            {WL_HEAD "{\"levels\":[\"kubernetes.io/hostname\"],\"slices\":[{\"domainCount\":1,"
                     "\"valuesPerLevel\":[{\"universal\":\"a\"}],\"podCounts\":{\"individual\":"
                     "[0]}}]}" WL_TAIL,
             "Workload n/w: status.admission.podSetAssignments[0].topologyAssignment.slices[0]."
             "podCounts.individual: entry 0 must be an integer in 1..2147483647"},
        };

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *obj = json_fx_load(bad[i].text);
                struct tsr_kueue_workload *k = NULL;
                struct tsr_diag diag;

                tsr_diag_clear(&diag);
                if (tsr_kueue_workload_parse(obj, &k, &diag) != TSR_EINVAL)
                        fail_msg("case %zu parsed (or failed otherwise): %s", i, bad[i].text);
                assert_null(k);
                assert_string_equal(diag.msg, bad[i].message);
                json_decref(obj);
        }
}

/* Past TSR_KUEUE_DOMAINS_MAX hostname-level domains: TSR_ETOOBIG. */
static void test_workload__domain_ceiling(void **state)
{
        json_t *obj = json_fx_load(WL_HEAD "{\"levels\":[\"kubernetes.io/hostname\"],\"slices\":"
                                           "[{\"domainCount\":1,\"valuesPerLevel\":[{"
                                           "\"individual\":{\"roots\":[]}}],\"podCounts\":{"
                                           "\"universal\":1}}]}" WL_TAIL);
        json_t *slice = json_array_get(
            json_object_get(
                json_object_get(
                    json_array_get(json_object_get(
                                       json_object_get(json_object_get(obj, "status"), "admission"),
                                       "podSetAssignments"),
                                   0),
                    "topologyAssignment"),
                "slices"),
            0);
        json_t *roots = json_object_get(
            json_object_get(json_array_get(json_object_get(slice, "valuesPerLevel"), 0),
                            "individual"),
            "roots");
        struct tsr_kueue_workload *k = NULL;
        struct tsr_diag diag;

        (void)state;
        for (unsigned i = 0; i <= TSR_KUEUE_DOMAINS_MAX; i++) {
                char name[16];

                snprintf(name, sizeof(name), "n%u", i);
                json_array_append_new(roots, json_string(name));
        }
        json_object_set_new(slice, "domainCount", json_integer(TSR_KUEUE_DOMAINS_MAX + 1));
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kueue_workload_parse(obj, &k, &diag), TSR_ETOOBIG);
        assert_null(k);
        json_decref(obj);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_snapshot__inflight_window),
            cmocka_unit_test(test_snapshot__kept_snapshot_charges_ready),
            cmocka_unit_test(test_snapshot__held_and_not_held),
            cmocka_unit_test(test_snapshot__finished_pods),
            cmocka_unit_test(test_snapshot__pinned_on_fragmented_node),
            cmocka_unit_test(test_snapshot__no_flavor_retry),
            cmocka_unit_test(test_snapshot__node_gone),
            cmocka_unit_test(test_snapshot__unreadable),
            cmocka_unit_test(test_snapshot__charges_on_unlisted_nodes),
            cmocka_unit_test(test_workload__v017_topology_assignment),
            cmocka_unit_test(test_workload__v017_admitted_and_pending),
            cmocka_unit_test(test_workload__topology_shapes),
            cmocka_unit_test(test_workload__bad_fields),
            cmocka_unit_test(test_workload__domain_ceiling),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
