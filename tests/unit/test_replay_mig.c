/*
 * test_replay_mig.c - the MIG variant of the replay (src/replay/mig.[ch], mig_optimum.[ch],
 * arrival.[ch]): profile rounding on H100 and A100 boundaries, tessera's placement on a hand-built
 * partitioned cluster (flavor order, TAS's fewest fits on the partition keys, ties by name, the
 * most-occupied card and lowest free legal start, CPU filters), the exact optimum on
 * hand-computed instances, the memoised search against a brute-force enumeration through
 * core/geometry on random tiny instances, and a run that keeps run.c's order and stays within
 * capacity.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "core/geometry.h"
#include "replay/arrival.h"
#include "replay/mig.h"
#include "replay/mig_optimum.h"
#include "replay/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H100 "NVIDIA H100 80GB HBM3"
#define A100 "NVIDIA A100-SXM4-40GB"

static const struct tsr_product *product(const char *name)
{
        const struct tsr_product *p = tsr_catalog_product_by_name(name);

        assert_non_null(p);
        return p;
}

static int profile(const struct tsr_product *p, const char *name)
{
        const struct tsr_mig_profile *mp = tsr_product_profile(p, name);

        assert_non_null(mp);
        return (int)(mp - p->profiles);
}

static void expect_round(const struct tsr_product *p, unsigned milli, const char *name)
{
        int q = tsr_mig_round(p, milli);

        assert_true(q >= 0);
        if (strcmp(p->profiles[q].name, name))
                fail_msg("%s, %u milli: %s, want %s", p->name, milli, p->profiles[q].name, name);
}

static void test_round(void **state)
{
        const struct tsr_product *h = product(H100), *a = product(A100);

        (void)state;
        /* H100: 81920 MiB; 1g.10gb covers 10240 = 125 milli, 1g.20gb 250, 3g.40gb 500. */
        expect_round(h, 1, "1g.10gb"); /* not 1g.10gb+me: not offered */
        expect_round(h, 125, "1g.10gb");
        expect_round(h, 126, "1g.20gb"); /* not 2g.20gb: fewer compute slices */
        expect_round(h, 250, "1g.20gb");
        expect_round(h, 251, "3g.40gb"); /* not 4g.40gb */
        expect_round(h, 500, "3g.40gb");
        expect_round(h, 501, "7g.80gb");
        expect_round(h, 999, "7g.80gb");
        expect_round(a, 125, "1g.5gb");
        expect_round(a, 126, "1g.10gb");
        expect_round(a, 470, "3g.20gb");
        expect_round(a, 810, "7g.40gb");
        expect_round(product("NVIDIA A100-SXM4-80GB"), 230, "1g.20gb");
        assert_int_equal(tsr_mig_full_profile(h), profile(h, "7g.80gb"));
        assert_int_equal(tsr_mig_full_profile(a), profile(a, "7g.40gb"));
        assert_int_equal(tsr_mig_units(h, (unsigned)profile(h, "3g.40gb")), 800000);
        assert_int_equal(tsr_mig_units(h, (unsigned)profile(h, "1g.10gb")), 200000);
        assert_int_equal(tsr_mig_round(product("Tesla T4"), 100), -1);
        assert_int_equal(tsr_mig_full_profile(product("Tesla T4")), -1);
}

/* A partitioned cluster of H100 nodes over nodes[0..n). */
struct fixture {
        struct tsr_rcluster rc;
        struct tsr_mig_cluster c;
};

static void fixture_init(struct fixture *f, const struct tsr_trace_node *nodes, size_t n)
{
        assert_int_equal(tsr_rcluster_init(&f->rc, nodes, n, NULL), 0);
        assert_int_equal(tsr_mig_cluster_init(&f->c, product(H100), &f->rc, nodes, NULL), 0);
}

static void fixture_release(struct fixture *f)
{
        tsr_mig_cluster_release(&f->c);
        tsr_rcluster_release(&f->rc);
}

/* Places and binds pod; checks node name, GPU and start of its first instance (and the next
 * instances' GPUs gpu + 1, ...). */
static void expect_place(struct fixture *f, const struct tsr_trace_node *nodes,
                         const struct tsr_trace_pod *pod, const char *node, unsigned gpu,
                         unsigned start)
{
        struct tsr_mig_task t;
        struct tsr_mig_place pl;

        assert_true(tsr_mig_task_of(&f->c, pod, &t));
        if (!tsr_mig_place(&f->c, &t, &pl))
                fail_msg("%s: nothing fits, want %s", pod->name, node);
        if (strcmp(nodes[pl.node].name, node))
                fail_msg("%s: on %s, want %s", pod->name, nodes[pl.node].name, node);
        assert_int_equal(pl.n, t.cards);
        for (unsigned k = 0; k < pl.n; k++) {
                if (pl.pick[k].accel != gpu + k || pl.pick[k].start != start)
                        fail_msg("%s: instance %u on GPU %u at %u, want GPU %u at %u", pod->name, k,
                                 pl.pick[k].accel, pl.pick[k].start, gpu + k, start);
                assert_int_equal(pl.pick[k].profile, t.profile);
        }
        tsr_mig_bind(&f->c, &t, &pl);
}

static struct tsr_trace_pod pod(const char *name, int64_t cpu, unsigned num_gpu, unsigned milli)
{
        struct tsr_trace_pod p = {.cpu_milli = cpu, .memory_mib = 1024};

        snprintf(p.name, sizeof(p.name), "%s", name);
        p.num_gpu = num_gpu;
        p.gpu_milli = milli;
        return p;
}

static void test_task_of(void **state)
{
        static const struct tsr_trace_node nodes[] = {{"n", 8000, 65536, 2, "V100M16"}};
        struct tsr_trace_pod cpu = pod("cpu", 1000, 0, 0), frac = pod("frac", 1000, 1, 470),
                             whole = pod("whole", 1000, 2, 1000);
        struct fixture f;
        struct tsr_mig_task t;

        (void)state;
        fixture_init(&f, nodes, 1);
        assert_true(tsr_mig_task_of(&f.c, &cpu, &t));
        assert_int_equal(t.profile, -1);
        assert_int_equal(t.cards, 0);
        assert_true(tsr_mig_task_of(&f.c, &frac, &t));
        assert_int_equal(t.profile, profile(f.c.product, "3g.40gb"));
        assert_int_equal(t.cards, 1);
        assert_int_equal(t.milli, 470);
        assert_true(tsr_mig_task_of(&f.c, &whole, &t));
        assert_int_equal(t.profile, profile(f.c.product, "7g.80gb"));
        assert_int_equal(t.cards, 2);
        assert_int_equal(f.c.width, 8);
        assert_int_equal(f.c.total_slices, 16);
        fixture_release(&f);
}

static void test_place(void **state)
{
        /* Out of name order on purpose; node-c is the only 1-GPU node (the first flavor). */
        static const struct tsr_trace_node nodes[] = {
            {"node-b", 32000, 262144, 2, "G2"},
            {"node-c", 96000, 262144, 1, "T4"},
            {"node-a", 64000, 262144, 2, "G2"},
        };
        struct tsr_trace_pod p1 = pod("1g.10gb", 0, 1, 100), p2 = pod("3g", 0, 1, 400),
                             p4 = pod("1g.20gb", 0, 1, 200), p5 = pod("2x7g", 0, 2, 1000),
                             p8 = pod("cpu-only", 8000, 0, 0),
                             p9 = pod("too-much-cpu", 100000, 1, 100);
        struct tsr_mig_task t;
        struct tsr_mig_place pl;
        struct fixture f;

        (void)state;
        fixture_init(&f, nodes, 3);
        expect_place(&f, nodes, &p1, "node-c", 0, 0);
        expect_place(&f, nodes, &p2, "node-c", 0, 4);
        /* node-c: slices 0 and 4-7 held: largest free count 3 (1g.10gb at 1, 2, 3), no 3g. */
        assert_int_equal(f.c.free[1].pool, 3);
        assert_int_equal(f.c.free[1].profile[profile(f.c.product, "1g.10gb")], 3);
        assert_int_equal(f.c.free[1].profile[profile(f.c.product, "1g.20gb")], 1);
        assert_int_equal(f.c.free[1].profile[profile(f.c.product, "3g.40gb")], 0);
        assert_int_equal(f.c.free[1].units, 1600000 - 200000 - 800000);
        /* No 3g left on node-c: the 2-GPU flavor, node-a and node-b fit 4 each, node-a by name. */
        expect_place(&f, nodes, &p2, "node-a", 0, 0);
        /* 1g.20gb on node-c at its lowest free legal start, 2 (1 is not a legal start). */
        expect_place(&f, nodes, &p4, "node-c", 0, 2);
        /* Two whole GPUs: node-a fits none (one free card), node-b one. */
        expect_place(&f, nodes, &p5, "node-b", 0, 0);
        /* A 3g: node-a, on its most-occupied card, at 4. */
        expect_place(&f, nodes, &p2, "node-a", 0, 4);
        expect_place(&f, nodes, &p1, "node-c", 0, 1);
        assert_int_equal(f.c.used_slices, 1 + 4 + 4 + 2 + 16 + 4 + 1);
        assert_int_equal(f.c.total_slices, 40);
        /* CPU only, 8 cores: node-a fits 8, node-b 4, node-c 12: node-b. */
        expect_place(&f, nodes, &p8, "node-b", 0, 0);
        assert_int_equal(f.rc.nodes[0].cpu_free, 24000);
        /* A 1g.10gb asking 100 cores fits nowhere, though node-c has a free slice. */
        assert_true(tsr_mig_task_of(&f.c, &p9, &t));
        assert_false(tsr_mig_place(&f.c, &t, &pl));
        /* With one core: node-c is full (0, 1, 2-3, 4-7), so node-a's free card. */
        p9.cpu_milli = 1000;
        expect_place(&f, nodes, &p9, "node-a", 1, 0);
        /* No two free whole cards anywhere now. */
        assert_true(tsr_mig_task_of(&f.c, &p5, &t));
        assert_false(tsr_mig_place(&f.c, &t, &pl));
        fixture_release(&f);
}

static struct tsr_mig_small small(const char *product_name, unsigned n_nodes, const unsigned *gpus,
                                  const char *const *tasks, size_t n_tasks)
{
        struct tsr_mig_small in = {.product = product(product_name), .n_nodes = n_nodes};

        for (unsigned i = 0; i < n_nodes; i++)
                in.gpus[i] = gpus[i];
        for (size_t k = 0; k < n_tasks; k++)
                in.profile[k] = (uint8_t)profile(in.product, tasks[k]);
        in.n_tasks = n_tasks;
        return in;
}

struct solved {
        struct tsr_mig_solution drops, wc, tessera;
};

static struct solved solve_all(const struct tsr_mig_small *in)
{
        struct solved s;

        assert_int_equal(tsr_mig_optimum_solve(in, TSR_MIG_OPT_DROPS, &s.drops, NULL), 0);
        assert_int_equal(tsr_mig_optimum_solve(in, TSR_MIG_OPT_WORK_CONSERVING, &s.wc, NULL), 0);
        assert_int_equal(tsr_mig_online(in, &s.tessera, NULL), 0);
        return s;
}

static void test_optimum_hand(void **state)
{
        static const unsigned one[] = {1}, two[] = {2}, ones[] = {1, 1};
        static const char *const a[] = {"1g.20gb", "3g.40gb", "3g.40gb"};
        static const char *const b[] = {"3g.40gb", "1g.10gb", "7g.80gb"};
        static const char *const c[] = {"1g.10gb", "7g.80gb", "7g.80gb"};
        static const char *const d[] = {"7g.80gb", "7g.80gb", "7g.80gb"};
        struct tsr_mig_small in = small(H100, 1, one, a, 3);
        struct solved s = solve_all(&in);
        struct tsr_diag diag;

        (void)state;
        /* One GPU, 1g.20gb then two 3g: dropping the 1g.20gb keeps both halves for the 3g (8);
         * a scheduler that places what fits holds 2 + 4. */
        assert_int_equal(s.drops.slices, 8);
        assert_int_equal(s.drops.choice[0].node, -1);
        assert_int_equal(s.drops.choice[1].start + s.drops.choice[2].start, 4);
        assert_int_equal(s.wc.slices, 6);
        assert_int_equal(s.wc.choice[2].node, -1);
        assert_int_equal(s.tessera.slices, 6);
        assert_int_equal(s.tessera.choice[0].start, 0);
        assert_int_equal(s.tessera.choice[1].start, 4);
        assert_int_equal(s.tessera.choice[2].node, -1);

        /* Two GPUs, 3g, 1g.10gb, 7g: the 1g.10gb must join the 3g's card to leave one whole. */
        in = small(H100, 1, two, b, 3);
        s = solve_all(&in);
        assert_int_equal(s.drops.slices, 13);
        assert_int_equal(s.wc.slices, 13);
        assert_int_equal(s.drops.choice[1].gpu, s.drops.choice[0].gpu);
        assert_int_not_equal(s.drops.choice[2].gpu, s.drops.choice[0].gpu);
        assert_int_equal(s.tessera.slices, 13);

        /* One GPU, 1g.10gb then two 7g: the optimum drops the 1g (8), tessera cannot (1). */
        in = small(H100, 1, one, c, 3);
        s = solve_all(&in);
        assert_int_equal(s.drops.slices, 8);
        assert_int_equal(s.wc.slices, 1);
        assert_int_equal(s.tessera.slices, 1);

        /* Two nodes of one GPU, three 7g: two fit. */
        in = small(A100, 2, ones, (const char *const[]){"7g.40gb", "7g.40gb", "7g.40gb"}, 3);
        s = solve_all(&in);
        assert_int_equal(s.drops.slices, 16);
        assert_int_equal(s.tessera.slices, 16);
        assert_int_equal(s.tessera.choice[0].node + s.tessera.choice[1].node, 1);
        in = small(H100, 2, ones, d, 3);
        assert_int_equal(solve_all(&in).drops.slices, 16);

        /* Refusals: a "+me" profile (its cap of 1 binds before its 7 placements), no GPU. */
        in = small(H100, 1, one, a, 1);
        in.profile[0] = (uint8_t)profile(in.product, "1g.10gb+me");
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_mig_optimum_solve(&in, TSR_MIG_OPT_DROPS, &s.drops, &diag),
                         TSR_EINVAL); /* not offered, before its cap is looked at */
        in = small(H100, 1, one, a, 3);
        in.gpus[0] = 0;
        assert_int_equal(tsr_mig_optimum_solve(&in, TSR_MIG_OPT_DROPS, &s.drops, NULL), TSR_EINVAL);
}

/* The reference model: every assignment of drop / (node, GPU, legal start) per task, each
 * placement through tsr_geometry_add with the instance cap; no memo, no symmetry, no bound. */
struct brute {
        const struct tsr_mig_small *in;
        bool work_conserving;
        struct tsr_mig_live live[TSR_MIG_OPT_GPUS_MAX];
        unsigned n_gpus;
};

static bool try_add(struct brute *b, unsigned g, unsigned q, unsigned start)
{
        const struct tsr_product *p = b->in->product;

        if (tsr_geometry_live_count(&b->live[g], q) >= p->profiles[q].max_instances)
                return false;
        return tsr_geometry_add(p, &b->live[g], q, start) == 0;
}

static unsigned brute_from(struct brute *b, size_t k)
{
        const struct tsr_product *p = b->in->product;
        unsigned q, best = 0;
        bool placed = false;

        if (k == b->in->n_tasks)
                return 0;
        q = b->in->profile[k];
        for (unsigned g = 0; g < b->n_gpus; g++)
                for (unsigned st = 0; st < TSR_MIG_AXIS_MAX; st++) {
                        unsigned v;

                        if (!try_add(b, g, q, st))
                                continue;
                        placed = true;
                        v = p->profiles[q].size + brute_from(b, k + 1);
                        b->live[g].n--;
                        if (v > best)
                                best = v;
                }
        if (!b->work_conserving || !placed) {
                unsigned v = brute_from(b, k + 1);

                if (v > best)
                        best = v;
        }
        return best;
}

static unsigned brute(const struct tsr_mig_small *in, bool work_conserving)
{
        struct brute b = {.in = in, .work_conserving = work_conserving};

        for (unsigned i = 0; i < in->n_nodes; i++)
                b.n_gpus += in->gpus[i];
        return brute_from(&b, 0);
}

/* A solution is legal (each placement through tsr_geometry_add, under the caps), its slices are
 * what it says, and in work-conserving mode (wc) it drops only what fit nowhere. */
static void expect_legal(const struct tsr_mig_small *in, const struct tsr_mig_solution *s, bool wc)
{
        struct brute b = {.in = in};
        unsigned first[TSR_MIG_OPT_NODES_MAX], slices = 0;

        for (unsigned i = 0; i < in->n_nodes; i++) {
                first[i] = b.n_gpus;
                b.n_gpus += in->gpus[i];
        }
        for (size_t k = 0; k < in->n_tasks; k++) {
                const struct tsr_mig_choice *c = &s->choice[k];
                unsigned q = in->profile[k];

                if (c->node < 0) {
                        for (unsigned g = 0; wc && g < b.n_gpus; g++)
                                for (unsigned st = 0; st < TSR_MIG_AXIS_MAX; st++)
                                        if (try_add(&b, g, q, st))
                                                fail_msg("task %zu dropped, fits GPU %u at %u", k,
                                                         g, st);
                        continue;
                }
                assert_true((unsigned)c->node < in->n_nodes && c->gpu < in->gpus[c->node]);
                assert_true(try_add(&b, first[c->node] + c->gpu, q, c->start));
                slices += in->product->profiles[q].size;
        }
        assert_int_equal(slices, s->slices);
}

static void test_optimum_brute(void **state)
{
        static const char *const names[][2] = {{H100, "7g.80gb"}, {A100, "7g.40gb"}};
        struct tsr_rng rng;
        size_t differ = 0;

        (void)state;
        tsr_rng_seed(&rng, 7);
        for (unsigned round = 0; round < 300; round++) {
                const struct tsr_product *p = product(names[round % 2][0]);
                uint32_t offered = tsr_mig_offered(p);
                struct tsr_mig_small in = {.product = p};
                unsigned gpus = 0;
                struct solved s;

                in.n_nodes = 1 + (unsigned)tsr_rng_below(&rng, 2);
                for (unsigned i = 0; i < in.n_nodes; i++) {
                        in.gpus[i] = 1 + (unsigned)tsr_rng_below(&rng, gpus ? 1 : 2);
                        gpus += in.gpus[i];
                }
                in.n_tasks = 1 + tsr_rng_below(&rng, 5);
                for (size_t k = 0; k < in.n_tasks; k++) {
                        unsigned q;

                        do
                                q = (unsigned)tsr_rng_below(&rng, p->n_profiles);
                        while (!((offered >> q) & 1u));
                        in.profile[k] = (uint8_t)q;
                }
                s = solve_all(&in);
                if (s.drops.slices != brute(&in, false) || s.wc.slices != brute(&in, true))
                        fail_msg("round %u: search %u / %u, brute force %u / %u", round,
                                 s.drops.slices, s.wc.slices, brute(&in, false), brute(&in, true));
                expect_legal(&in, &s.drops, false);
                expect_legal(&in, &s.wc, true);
                expect_legal(&in, &s.tessera, true); /* tessera places whatever fits */
                assert_true(s.tessera.slices <= s.wc.slices && s.wc.slices <= s.drops.slices);
                differ += s.wc.slices < s.drops.slices;
        }
        assert_true(differ > 0); /* the instances do tell the two optima apart */
}

static void test_draw_and_gap(void **state)
{
        static const unsigned milli[] = {810, 470, 320, 650, 230, 100};
        const struct tsr_product *p = product(H100);
        struct tsr_mig_gap g = {0}, all = {0};
        struct tsr_rng rng;

        (void)state;
        tsr_rng_seed(&rng, 42);
        for (int k = 0; k < 200; k++) {
                struct tsr_mig_small in;
                unsigned asked = 0;

                assert_int_equal(tsr_mig_small_draw(p, milli, 6, 12, &rng, &in), 0);
                assert_true(in.n_nodes >= 1 && in.n_nodes <= 2 && in.n_tasks <= 12);
                for (size_t t = 0; t < in.n_tasks; t++)
                        asked += p->profiles[in.profile[t]].size;
                assert_true(in.n_tasks == 12 || asked * 100 >= tsr_mig_small_slices(&in) * 130);
                assert_int_equal(tsr_mig_gap_add(&g, &in, NULL), 0);
        }
        assert_int_equal(g.n, 200);
        assert_true(g.ratio_worst > 0 && g.ratio_worst <= 1);
        assert_true(g.ratio_sum / 200 >= g.ratio_worst && g.ratio_sum <= 200);
        assert_true(g.tessera_pct <= g.wc_pct && g.wc_pct <= g.opt_pct);
        tsr_mig_gap_merge(&all, &g);
        tsr_mig_gap_merge(&all, &g);
        assert_int_equal(all.n, 400);
        assert_true(all.ratio_worst == g.ratio_worst);
        assert_int_equal(tsr_mig_small_draw(p, milli, 0, 12, &rng, &(struct tsr_mig_small){0}),
                         TSR_EINVAL);
}

static const char nodes_csv[] = "sn,cpu_milli,memory_mib,gpu,model\n"
                                "node-b,96000,393216,8,G2\n"
                                "node-a,64000,262144,2,T4\n"
                                "node-c,64000,262144,1,T4\n";

static const char pods_csv[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                               "p0,4000,8192,1,500,\n"
                               "p1,4000,8192,1,250,T4\n"
                               "p2,8000,8192,1,1000,\n"
                               "p3,2000,1024,0,0,\n"
                               "p4,16000,8192,2,1000,\n"
                               "p5,1000,1024,1,100,\n"
                               "p6,1000,1024,1,810,\n";

static void test_run(void **state)
{
        struct tsr_trace_node *nodes;
        struct tsr_trace_pod *pods;
        struct tsr_replay_setup s;
        struct tsr_replay_result fgd;
        struct tsr_mig_result r, again;
        size_t nn, np;

        (void)state;
        assert_int_equal(tsr_trace_parse_nodes(nodes_csv, strlen(nodes_csv), &nodes, &nn, NULL), 0);
        assert_int_equal(tsr_trace_parse_pods(pods_csv, strlen(pods_csv), &pods, &np, NULL), 0);
        assert_int_equal(tsr_replay_setup_init(&s, nodes, nn, pods, np, 1.3, NULL), 0);
        for (uint64_t seed = 1; seed <= 20; seed++) {
                double last = 0;

                assert_int_equal(tsr_replay_run(&s, TSR_POLICY_TESSERA, seed, &fgd, NULL), 0);
                assert_int_equal(tsr_mig_run(&s, product(H100), seed, &r, NULL), 0);
                /* The same order as run.c's: the same pods, clones and arrived milli. */
                assert_int_equal(r.pods, fgd.pods);
                assert_int_equal(r.clones, fgd.clones);
                assert_int_equal(r.arrived_milli, fgd.arrived_milli);
                assert_int_equal(r.total_slices, 11 * 8);
                assert_true(r.used_slices <= r.total_slices);
                assert_int_equal(r.placed + r.dropped_cpu + r.dropped_fractional + r.dropped_whole,
                                 r.pods);
                for (unsigned x = 0; x < TSR_REPLAY_POINTS; x++) {
                        if (!r.have[x])
                                continue;
                        assert_true(r.held_pct[x] + 1e-9 >= last && r.held_pct[x] <= 100);
                        assert_true(r.used_pct[x] <= r.held_pct[x] + 1e-9);
                        last = r.held_pct[x];
                }
                assert_int_equal(tsr_mig_run(&s, product(H100), seed, &again, NULL), 0);
                assert_memory_equal(&r, &again, sizeof(r));
        }
        assert_int_equal(tsr_mig_run(&s, product("Tesla T4"), 1, &r, NULL), TSR_EINVAL);
        tsr_replay_setup_release(&s);
        free(nodes);
        free(pods);
}

static void test_bins(void **state)
{
        struct tsr_replay_bins *b = calloc(1, sizeof(*b));
        double v[2], one[2] = {10, 1}, two[2] = {30, 3};

        (void)state;
        assert_non_null(b);
        tsr_replay_bins_add(b, 50, 1000, one, 2);   /* 5 % */
        tsr_replay_bins_add(b, 54, 1000, two, 2);   /* 5 % */
        tsr_replay_bins_add(b, 200, 1000, two, 2);  /* 20 % */
        tsr_replay_bins_add(b, 5000, 1000, two, 2); /* past the last point: not kept */
        assert_true(tsr_replay_bins_point(b, 5, v, 2));
        assert_true(v[0] == 20 && v[1] == 2);
        assert_true(tsr_replay_bins_point(b, 4, v, 2)); /* the next bin's */
        assert_true(v[0] == 20);
        assert_true(tsr_replay_bins_point(b, 6, v, 2)); /* the previous one's */
        assert_true(v[0] == 20);
        assert_false(tsr_replay_bins_point(b, 10, v, 2));
        assert_false(tsr_replay_bins_point(b, 130, v, 2));
        free(b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round),         cmocka_unit_test(test_task_of),
            cmocka_unit_test(test_place),         cmocka_unit_test(test_optimum_hand),
            cmocka_unit_test(test_optimum_brute), cmocka_unit_test(test_draw_and_gap),
            cmocka_unit_test(test_run),           cmocka_unit_test(test_bins),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
