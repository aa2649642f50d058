/*
 * test_replay.c - src/replay: the trace CSVs (columns by header, every documented refusal with
 * its line), the fragment F_n(M) on hand-computed nodes, the score plugins' choices on small
 * clusters (BestFit packs, GpuPacking prefers shared GPUs, FGD keeps a whole GPU for whole-GPU
 * tasks), tessera's chain (the smallest flavor first, TAS's least free capacity, ties by name,
 * the fit pin, the allocator's most-occupied card), and the protocol's run: tuning stops before
 * the target, one seed gives one result, and every run keeps allocation within capacity and
 * never decreasing along the arrival axis.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "replay/policy.h"
#include "replay/report.h"
#include "replay/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char nodes_csv[] = "sn,cpu_milli,memory_mib,gpu,model\n"
                                "node-b,96000,393216,8,G2\n"
                                "node-a,64000,262144,2,T4\n"
                                "node-c,64000,262144,2,T4\n";

static const char pods_csv[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
                               "p0,4000,8192,1,500,,LS\n"
                               "p1,4000,8192,1,250,,LS\n"
                               "p2,8000,8192,1,1000,T4,LS\n"
                               "p3,2000,1024,0,0,,BE\n"
                               "p4,16000,8192,2,1000,,LS\n";

static void parse_fixture(struct tsr_trace_node **nodes, size_t *nn, struct tsr_trace_pod **pods,
                          size_t *np)
{
        assert_int_equal(tsr_trace_parse_nodes(nodes_csv, strlen(nodes_csv), nodes, nn, NULL), 0);
        assert_int_equal(tsr_trace_parse_pods(pods_csv, strlen(pods_csv), pods, np, NULL), 0);
}

static void test_parse(void **state)
{
        struct tsr_trace_node *nodes;
        struct tsr_trace_pod *pods;
        size_t nn, np;
        const char reordered[] = "model,gpu,sn,memory_mib,cpu_milli\r\n\r\nA10,1,x,2048,1000\r\n";

        (void)state;
        parse_fixture(&nodes, &nn, &pods, &np);
        assert_int_equal(nn, 3);
        assert_string_equal(nodes[0].name, "node-b");
        assert_int_equal(nodes[0].gpus, 8);
        assert_string_equal(nodes[1].model, "T4");
        assert_int_equal(np, 5);
        assert_int_equal(pods[1].gpu_milli, 250);
        assert_string_equal(pods[2].gpu_spec, "T4");
        assert_int_equal(pods[4].num_gpu, 2);
        assert_true(tsr_trace_pod_fractional(&pods[0]));
        assert_false(tsr_trace_pod_fractional(&pods[2]));
        free(nodes);
        free(pods);
        assert_int_equal(tsr_trace_parse_nodes(reordered, strlen(reordered), &nodes, &nn, NULL), 0);
        assert_int_equal(nn, 1);
        assert_string_equal(nodes[0].name, "x");
        assert_string_equal(nodes[0].model, "A10");
        assert_int_equal(nodes[0].cpu_milli, 1000);
        free(nodes);
}

#define assert_near(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

static void expect_pods_error(const char *csv, unsigned line, const char *words)
{
        struct tsr_trace_pod *pods = (struct tsr_trace_pod *)0x1;
        struct tsr_diag diag;
        size_t n = 99;

        tsr_diag_clear(&diag);
        assert_int_equal(tsr_trace_parse_pods(csv, strlen(csv), &pods, &n, &diag), TSR_EPARSE);
        assert_int_equal(diag.line, line);
        if (!strstr(diag.msg, words))
                fail_msg("\"%s\" does not say \"%s\"", diag.msg, words);
        assert_ptr_equal(pods, (struct tsr_trace_pod *)0x1); /* *out untouched */
        assert_int_equal(n, 99);
}

static void test_parse_errors(void **state)
{
        const char *h = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
        char buf[256];
        struct tsr_diag diag;
        struct tsr_trace_node *nodes;
        size_t nn;

        (void)state;
        expect_pods_error("name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n", 1,
                          "no column \"gpu_milli\"");
        snprintf(buf, sizeof(buf), "%sp0,1,1,1,10\np1,x,1,1,10\n", h);
        expect_pods_error(buf, 3, "cpu_milli \"x\" is not a non-negative whole number");
        snprintf(buf, sizeof(buf), "%sp0,1,1,2,500\n", h);
        expect_pods_error(buf, 2, "a multi-GPU task takes whole GPUs");
        snprintf(buf, sizeof(buf), "%sp0,1,1,0,10\n", h);
        expect_pods_error(buf, 2, "asks for no GPU but gpu_milli 10");
        snprintf(buf, sizeof(buf), "%sp0,1,1,1,0\n", h);
        expect_pods_error(buf, 2, "with gpu_milli 0");
        snprintf(buf, sizeof(buf), "%sp0,1,1,1,1001\n", h);
        expect_pods_error(buf, 2, "larger than 1000");
        snprintf(buf, sizeof(buf), "%sp0,1,1,1\n", h);
        expect_pods_error(buf, 2, "no \"gpu_milli\"");
        expect_pods_error("", 1, "no header line");
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_trace_parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n", 43,
                                               &nodes, &nn, &diag),
                         TSR_EPARSE);
        assert_non_null(strstr(diag.msg, "node n has 2 GPUs and no model"));
}

static void test_spec(void **state)
{
        (void)state;
        assert_true(tsr_trace_spec_accepts("", "T4"));
        assert_true(tsr_trace_spec_accepts("V100M16|T4", "T4"));
        assert_true(tsr_trace_spec_accepts("T4", "T4"));
        assert_false(tsr_trace_spec_accepts("T4x|V100", "T4"));
        assert_false(tsr_trace_spec_accepts("T", "T4"));
}

/* M of two equally likely shapes: a 600-milli task and a CPU-only task. */
static void test_frag_node(void **state)
{
        const char pods[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                            "a,1000,1,1,600\nb,1000,1,1,600\nc,1000,1,0,0\nd,1000,1,0,0\n";
        struct tsr_trace_node *nodes;
        struct tsr_trace_pod *p;
        size_t nn, np;
        struct tsr_rcluster c;
        struct tsr_frag_workload w;
        int16_t free2[2] = {1000, 300}, free_small[2] = {500, 300};

        (void)state;
        assert_int_equal(tsr_trace_parse_nodes(nodes_csv, strlen(nodes_csv), &nodes, &nn, NULL), 0);
        assert_int_equal(tsr_trace_parse_pods(pods, strlen(pods), &p, &np, NULL), 0);
        assert_int_equal(tsr_rcluster_init(&c, nodes, nn, NULL), 0);
        assert_int_equal(tsr_frag_workload_new(&c, p, np, &w, NULL), 0);
        assert_int_equal(w.n, 2);
        assert_near(w.shape[0].p, 0.5, 1e-12);
        /* 600 fits GPU 0, GPU 1's 300 is too small: 0.5 * 300; CPU-only: 0.5 * 1300 */
        assert_near(tsr_frag_node(&w, 0, 64000, free2, 2), 0.5 * 300 + 0.5 * 1300, 1e-9);
        /* 600 fits nowhere: all 800 free is fragment for both shapes */
        assert_near(tsr_frag_node(&w, 0, 64000, free_small, 2), 800, 1e-9);
        /* too little CPU for the GPU shape: its whole free capacity counts */
        assert_near(tsr_frag_node(&w, 0, 500, free2, 2), 1300, 1e-9);
        tsr_frag_workload_free(&w);
        tsr_rcluster_release(&c);
        free(nodes);
        free(p);
}

struct small {
        struct tsr_trace_node *nodes;
        struct tsr_trace_pod *pods;
        size_t nn, np;
        struct tsr_replay_setup s;
        struct tsr_rng rng;
        struct tsr_policy_env env;
};

static void small_init(struct small *m)
{
        parse_fixture(&m->nodes, &m->nn, &m->pods, &m->np);
        assert_int_equal(tsr_replay_setup_init(&m->s, m->nodes, m->nn, m->pods, m->np, 1.3, NULL),
                         0);
        tsr_rng_seed(&m->rng, 7);
        m->env = (struct tsr_policy_env){&m->s.cluster, &m->s.typical,   &m->rng,
                                         m->nodes,      TSR_TIES_RANDOM, 0};
}

static void small_release(struct small *m)
{
        tsr_replay_setup_release(&m->s);
        free(m->nodes);
        free(m->pods);
}

static struct tsr_rpod pod_of(const struct small *m, int64_t cpu, unsigned num, unsigned milli)
{
        struct tsr_trace_pod tp = {"t", cpu, 1, num, num ? milli : 0, ""};
        struct tsr_rpod p;

        tsr_rcluster_pod(&m->s.cluster, &tp, &p);
        return p;
}

/* Places and binds pod with policy p; returns the placement. */
static struct tsr_rplace put(struct small *m, struct tsr_policy *p, struct tsr_rpod pod)
{
        struct tsr_rplace pl;

        assert_true(tsr_policy_place(p, &pod, &pl));
        tsr_rcluster_bind(&m->s.cluster, &pod, &pl);
        tsr_policy_bound(p, &pod, &pl);
        return pl;
}

static void test_best_fit_and_packing(void **state)
{
        struct small m;
        struct tsr_policy *bf, *pk;
        struct tsr_rplace pl;

        (void)state;
        small_init(&m);
        assert_int_equal(tsr_policy_new(TSR_POLICY_BEST_FIT, &m.env, &bf, NULL), 0);
        /* the fullest node that fits: a T4 node (2000 milli) over the G2 (8000) */
        pl = put(&m, bf, pod_of(&m, 4000, 1, 500));
        assert_int_not_equal(pl.node, 0);
        /* then the same node again, on the same GPU (best fit) */
        {
                size_t first = pl.node;

                pl = put(&m, bf, pod_of(&m, 4000, 1, 400));
                assert_int_equal(pl.node, first);
                assert_int_equal(pl.gpu[0], 0);
        }
        tsr_policy_free(bf);
        tsr_rcluster_reset(&m.s.cluster, m.nodes);
        assert_int_equal(tsr_policy_new(TSR_POLICY_GPU_PACKING, &m.env, &pk, NULL), 0);
        m.s.cluster.nodes[0].free[3] = 600; /* the G2 has a shared GPU */
        pl = put(&m, pk, pod_of(&m, 1000, 1, 500));
        assert_int_equal(pl.node, 0);
        assert_int_equal(pl.gpu[0], 3);
        tsr_policy_free(pk);
        small_release(&m);
}

static void test_fgd(void **state)
{
        struct small m;
        struct tsr_policy *f;
        struct tsr_rplace pl;

        (void)state;
        small_init(&m);
        /* one T4 node half used on GPU 0: a 250 task goes there (no new fragment) rather than
         * breaking a whole GPU the typical whole-GPU tasks need */
        m.s.cluster.nodes[1].free[0] = 500;
        m.s.cluster.used_milli = 500;
        assert_int_equal(tsr_policy_new(TSR_POLICY_FGD, &m.env, &f, NULL), 0);
        pl = put(&m, f, pod_of(&m, 4000, 1, 250));
        assert_int_equal(pl.node, 1);
        assert_int_equal(pl.gpu[0], 0);
        tsr_policy_free(f);
        small_release(&m);
}

static void test_tessera(void **state)
{
        struct small m;
        struct tsr_policy *t;
        struct tsr_rplace pl;
        struct tsr_rpod big;

        (void)state;
        small_init(&m);
        assert_int_equal(tsr_policy_new(TSR_POLICY_TESSERA, &m.env, &t, NULL), 0);
        /* smallest per-node count first: a T4 node; equal ones tie by name: node-a (index 1) */
        pl = put(&m, t, pod_of(&m, 1000, 1, 500));
        assert_int_equal(pl.node, 1);
        assert_int_equal(pl.gpu[0], 0);
        /* TAS: node-a fits fewer 500s now (3 vs 4): it is filled first; the allocator packs
         * onto the occupied card */
        pl = put(&m, t, pod_of(&m, 1000, 1, 500));
        assert_int_equal(pl.node, 1);
        assert_int_equal(pl.gpu[0], 0);
        /* the fit pin: a 900 task cannot go to a card with 0 free; node-a's GPU 1 is free */
        big = pod_of(&m, 1000, 1, 900);
        pl = put(&m, t, big);
        assert_int_equal(pl.node, 1);
        assert_int_equal(pl.gpu[0], 1);
        /* node-a has no card for another 900 (100 left): node-c */
        pl = put(&m, t, big);
        assert_int_equal(pl.node, 2);
        /* a whole-GPU pair only fits the G2 now */
        pl = put(&m, t, pod_of(&m, 1000, 2, 1000));
        assert_int_equal(pl.node, 0);
        assert_int_equal(pl.n_gpus, 2);
        assert_int_equal(pl.gpu[0], 0);
        assert_int_equal(pl.gpu[1], 1);
        tsr_policy_free(t);
        small_release(&m);
}

/*
 * The fit labels' lag: two 700s leave node-a (2 x T4) with 300 free on each card. With exact
 * labels a 500 is pinned off node-a and goes to node-c. With a lag of 8 binds node-a still shows
 * its cards free: the pin lets the 500 through, TAS prefers node-a (its tokens fit one 500, node-c
 * four), and gate 5 finds no card that holds it, so the pod is refused. Once 8 binds have passed,
 * the labels follow and the 500 goes to node-c.
 */
static void test_tessera_label_lag(void **state)
{
        struct small exact, lagged;
        struct tsr_policy *te, *tl;
        struct tsr_rplace pl;
        struct tsr_rpod half;

        (void)state;
        small_init(&exact);
        small_init(&lagged);
        lagged.env.label_lag = 8;
        assert_int_equal(tsr_policy_new(TSR_POLICY_TESSERA, &exact.env, &te, NULL), 0);
        assert_int_equal(tsr_policy_new(TSR_POLICY_TESSERA, &lagged.env, &tl, NULL), 0);
        for (int k = 0; k < 2; k++) {
                pl = put(&exact, te, pod_of(&exact, 1000, 1, 700));
                assert_int_equal(pl.node, 1);
                assert_int_equal(pl.gpu[0], k);
                pl = put(&lagged, tl, pod_of(&lagged, 1000, 1, 700));
                assert_int_equal(pl.node, 1);
                assert_int_equal(pl.gpu[0], k);
        }
        half = pod_of(&exact, 1000, 1, 500);
        pl = put(&exact, te, half);
        assert_int_equal(pl.node, 2);
        assert_false(tsr_policy_place(tl, &half, &pl));
        /* CPU-only binds pass the time: the first change (bind 1) shows 8 binds later, at bind
         * 9; one bind before that node-a still takes the 500 in and refuses it */
        for (int k = 0; k < 6; k++)
                put(&lagged, tl, (struct tsr_rpod){.cpu = 1000, .mem = 1});
        assert_false(tsr_policy_place(tl, &half, &pl));
        put(&lagged, tl, (struct tsr_rpod){.cpu = 1000, .mem = 1});
        pl = put(&lagged, tl, half);
        assert_int_equal(pl.node, 2);
        tsr_policy_free(te);
        tsr_policy_free(tl);
        small_release(&exact);
        small_release(&lagged);
}

static void test_run(void **state)
{
        struct small m;
        struct tsr_replay_result a, b, c;
        int64_t target;

        (void)state;
        small_init(&m);
        target = (int64_t)llround(1.3 * (double)m.s.cluster.total_milli);
        for (int pol = 0; pol < TSR_POLICY_COUNT; pol++) {
                assert_int_equal(tsr_replay_run(&m.s, (enum tsr_policy_id)pol, 42, &a, NULL), 0);
                assert_int_equal(tsr_replay_run(&m.s, (enum tsr_policy_id)pol, 42, &b, NULL), 0);
                assert_memory_equal(&a, &b, sizeof(a));
                assert_true(a.arrived_milli <= target);
                assert_true(a.arrived_milli + 2000 > target); /* the largest pod is 2000 */
                assert_true(a.used_milli <= m.s.cluster.total_milli);
                assert_true(a.placed <= a.pods && a.pods == m.np + a.clones);
                for (int x = 1; x < TSR_REPLAY_POINTS; x++)
                        if (a.have[x] && a.have[x - 1])
                                assert_true(a.alloc_pct[x] >= a.alloc_pct[x - 1] - 1e-9);
                assert_true(a.have[0] && a.alloc_pct[0] == 0);
        }
        assert_int_equal(tsr_replay_run(&m.s, TSR_POLICY_RANDOM, 43, &c, NULL), 0);
        assert_int_equal(tsr_replay_run(&m.s, TSR_POLICY_RANDOM, 42, &a, NULL), 0);
        assert_true(memcmp(&a, &c, sizeof(a)) != 0);
        small_release(&m);
}

/* Where the unallocated GPUs are at arrival 100 %: one 1-GPU node, a CPU-only pod that takes all
 * of its CPU and a GPU pod asking the same CPU. When the CPU-only pod comes first the GPU is idle
 * on a CPU-starved node; when the GPU pod comes first nothing is idle. */
static void test_idle_by_shape(void **state)
{
        static const char one_node[] = "sn,cpu_milli,memory_mib,gpu,model\n"
                                       "node-x,4000,8192,1,T4\n";
        static const char two_pods[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
                                       "p0,4000,1024,0,0,,BE\n"
                                       "p1,4000,1024,1,1000,,LS\n";
        struct tsr_trace_node *nodes;
        struct tsr_trace_pod *pods;
        struct tsr_replay_setup s;
        size_t nn, np, starved = 0, none = 0;

        (void)state;
        assert_int_equal(tsr_trace_parse_nodes(one_node, strlen(one_node), &nodes, &nn, NULL), 0);
        assert_int_equal(tsr_trace_parse_pods(two_pods, strlen(two_pods), &pods, &np, NULL), 0);
        assert_int_equal(tsr_replay_setup_init(&s, nodes, nn, pods, np, 1.0, NULL), 0);
        for (uint64_t seed = 1; seed <= 16; seed++) {
                struct tsr_replay_result r;
                double idle = 0;

                assert_int_equal(tsr_replay_run(&s, TSR_POLICY_FGD, seed, &r, NULL), 0);
                assert_true(r.have_idle);
                for (int sh = 0; sh < TSR_REPLAY_SHAPES; sh++)
                        idle += r.idle_gpus[sh];
                assert_true(r.idle_gpus[TSR_SHAPE_GPU2] == 0 && r.idle_gpus[TSR_SHAPE_OTHER] == 0);
                if (r.placed == 1 && r.used_milli == 0) { /* p0 first: p1 found no CPU */
                        assert_true(r.idle_gpus[TSR_SHAPE_CPU_STARVED] == 1.0 && idle == 1.0);
                        starved++;
                } else {
                        assert_true(r.used_milli == 1000 && idle == 0);
                        none++;
                }
        }
        assert_true(starved && none); /* both orders were drawn */
        assert_string_equal(tsr_replay_shape_name(TSR_SHAPE_CPU_STARVED), "CPU-starved nodes");
        tsr_replay_setup_release(&s);
        free(nodes);
        free(pods);
}

static void test_policy_names(void **state)
{
        (void)state;
        assert_int_equal(tsr_policy_by_name("fgd"), TSR_POLICY_FGD);
        assert_int_equal(tsr_policy_by_name("tessera"), TSR_POLICY_TESSERA);
        assert_int_equal(tsr_policy_by_name("nope"), -1);
        assert_string_equal(tsr_policy_name(TSR_POLICY_GPU_CLUSTERING), "GpuClustering");
        assert_near(tsr_replay_published("default", "FGD"), 296, 0);
        assert_near(tsr_replay_published("default", "tessera"), -1, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse),
            cmocka_unit_test(test_parse_errors),
            cmocka_unit_test(test_spec),
            cmocka_unit_test(test_frag_node),
            cmocka_unit_test(test_best_fit_and_packing),
            cmocka_unit_test(test_fgd),
            cmocka_unit_test(test_tessera),
            cmocka_unit_test(test_tessera_label_lag),
            cmocka_unit_test(test_run),
            cmocka_unit_test(test_idle_by_shape),
            cmocka_unit_test(test_policy_names),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
