/*
 * test_chain.c - core/chain: the Kueue chain derived from nodes (spec/upstream-behavior.md §9,
 * §15).
 *
 * Covers: the pools of a mixed cluster (a generic CPU pool per os/arch over every node of it, an
 * accelerated pool per product/os/arch), sorted by name, with the entrance LocalQueues the seed
 * prints (gpustack-fnv64-e4768a65ca0ce96b for the H100 pool, gpustack-fnv64-3b93966fd73eb9ec for
 * gpustack--generic-linux-amd64); a product with no accelerator counted is CPU-only; the flavors
 * of a pool smallest per-node count first, named gpustack--generic--<aKey>-<os>-<arch>-<N>d /
 * gpustack--generic-<os>-<arch>-<N>c, with their node counts, the nominal quota (N x 1,600,000
 * per node, or the nodes' CPU milli-cores, saturating at INT64_MAX) and node membership; the
 * Topology (profile fnv64-<FNV-1a-64 of "kubernetes.io/hostname">); a node's feature labels and a
 * flavor's nodeLabels, and, over random clusters, that an accelerated flavor's nodeLabels select
 * exactly its member nodes (the generic pool's select every node of its os/arch, a superset: the
 * known gap of docs/internals/chain.md); TSR_ETOOBIG past the caller's room for pools or flavors
 * and TSR_EINVAL for an os, arch or product that cannot stand in a label, each leaving *n,
 * node_flavor and the labels untouched.
 *
 * Expected names and quotas are hand arithmetic from the rules, never the code's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "base/fnv.h"
#include "core/chain.h"

#include "support/catalog_fixtures.h"
#include "support/rng.h"

#include <stdio.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define M          INT64_C(1600000)

#define H100           "NVIDIA H100 80GB HBM3"
#define A30            "NVIDIA A30"
#define H100_POOL      "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
#define H100_FLAVOR(n) "gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-" n "d"

static const char *label_of(const struct tsr_chain_labels *l, const char *key)
{
        for (size_t i = 0; i < l->n; i++)
                if (!strcmp(l->l[i].key, key))
                        return l->l[i].value;
        return NULL;
}

/* node-8 (H100 x8, 64 cores), node-4a/4b (H100 x4), node-cpu (16 cores), node-a30 (arm64). */
static size_t mixed(struct tsr_chain_node *n)
{
        const struct tsr_product *h100 = fx_product(H100), *a30 = fx_product(A30);

        n[0] = (struct tsr_chain_node){"node-8", "linux", "amd64", h100, 8, 64000};
        n[1] = (struct tsr_chain_node){"node-4a", "linux", "amd64", h100, 4, 32000};
        n[2] = (struct tsr_chain_node){"node-cpu", "linux", "amd64", NULL, 0, 16000};
        n[3] = (struct tsr_chain_node){"node-4b", "linux", "amd64", h100, 4, 32500};
        n[4] = (struct tsr_chain_node){"node-a30", "linux", "arm64", a30, 2, 8000};
        return 5;
}

static void test_chain__pools(void **state)
{
        struct tsr_chain_node nodes[8];
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        size_t n = mixed(nodes), np = 99;
        const char *want[] = {"gpustack--generic-linux-amd64", "gpustack--generic-linux-arm64",
                              "gpustack--nvidia-a30-linux-arm64", H100_POOL};

        (void)state;
        assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, NULL), 0);
        assert_int_equal(np, N_ELEMS(want));
        for (size_t i = 0; i < np; i++)
                assert_string_equal(pools[i].name, want[i]);
        assert_null(pools[0].product);
        assert_string_equal(pools[0].entrance, "gpustack-fnv64-3b93966fd73eb9ec");
        assert_ptr_equal(pools[3].product, fx_product(H100));
        assert_string_equal(pools[3].entrance, "gpustack-fnv64-e4768a65ca0ce96b");
        assert_string_equal(pools[2].arch, "arm64");

        /* membership: the generic pool holds every amd64 node, the H100 pool the three */
        assert_true(tsr_chain_node_in_pool(&nodes[2], &pools[0]));
        assert_true(tsr_chain_node_in_pool(&nodes[0], &pools[0]));
        assert_false(tsr_chain_node_in_pool(&nodes[4], &pools[0]));
        assert_true(tsr_chain_node_in_pool(&nodes[1], &pools[3]));
        assert_false(tsr_chain_node_in_pool(&nodes[2], &pools[3]));
        assert_false(tsr_chain_node_in_pool(&nodes[4], &pools[3]));

        /* an H100 node whose accelerators are not counted serves only the generic pool */
        nodes[0].accel_count = 0;
        nodes[1].accel_count = 0;
        nodes[3].accel_count = 0;
        assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, NULL), 0);
        assert_int_equal(np, 3);
        assert_string_equal(pools[2].name, "gpustack--nvidia-a30-linux-arm64");
}

static void test_chain__flavors(void **state)
{
        struct tsr_chain_node nodes[8];
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        struct tsr_chain_flavor f[TSR_CHAIN_FLAVORS_MAX];
        int member[8];
        size_t n = mixed(nodes), np, nf;

        (void)state;
        assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, NULL), 0);

        /* the H100 pool: 4d (two nodes, 8 GPUs = 12.8M credits) before 8d (one node, 12.8M) */
        assert_int_equal(tsr_chain_flavors(nodes, n, &pools[3], f, N_ELEMS(f), &nf, member, NULL),
                         0);
        assert_int_equal(nf, 2);
        assert_string_equal(f[0].name, H100_FLAVOR("4"));
        assert_int_equal(f[0].per_node, 4);
        assert_int_equal(f[0].nodes, 2);
        assert_int_equal(f[0].nominal, 2 * 4 * M);
        assert_string_equal(f[1].name, H100_FLAVOR("8"));
        assert_int_equal(f[1].nodes, 1);
        assert_int_equal(f[1].nominal, 8 * M);
        assert_int_equal(member[0], 1);
        assert_int_equal(member[1], 0);
        assert_int_equal(member[2], -1);
        assert_int_equal(member[3], 0);
        assert_int_equal(member[4], -1);

        /* the generic amd64 pool by whole cores: 16c, 32c (32000 + 32500 milli), 64c */
        assert_int_equal(tsr_chain_flavors(nodes, n, &pools[0], f, N_ELEMS(f), &nf, member, NULL),
                         0);
        assert_int_equal(nf, 3);
        assert_string_equal(f[0].name, "gpustack--generic-linux-amd64-16c");
        assert_int_equal(f[0].nominal, 16000);
        assert_string_equal(f[1].name, "gpustack--generic-linux-amd64-32c");
        assert_int_equal(f[1].nodes, 2);
        assert_int_equal(f[1].nominal, 64500);
        assert_string_equal(f[2].name, "gpustack--generic-linux-amd64-64c");
        assert_int_equal(member[0], 2);
        assert_int_equal(member[2], 0);
        assert_int_equal(member[3], 1);
        assert_int_equal(member[4], -1);

        /* node_flavor may be NULL; the A30 pool is its one node */
        assert_int_equal(tsr_chain_flavors(nodes, n, &pools[2], f, N_ELEMS(f), &nf, NULL, NULL), 0);
        assert_int_equal(nf, 1);
        assert_string_equal(f[0].name, "gpustack--generic--nvidia-a30-linux-arm64-2d");
        assert_int_equal(f[0].nominal, 2 * M);
}

static void test_chain__nominal_saturates(void **state)
{
        struct tsr_chain_node nodes[2] = {
            {"big-a", "linux", "amd64", NULL, 0, INT64_MAX - 1000},
            {"big-b", "linux", "amd64", NULL, 0, INT64_MAX - 1000},
        };
        struct tsr_chain_pool pool;
        struct tsr_chain_flavor f[2];
        size_t np, nf;

        (void)state;
        assert_int_equal(tsr_chain_pools(nodes, 2, &pool, 1, &np, NULL), 0);
        assert_int_equal(tsr_chain_flavors(nodes, 2, &pool, f, 2, &nf, NULL, NULL), 0);
        assert_int_equal(nf, 1);
        assert_int_equal(f[0].nominal, INT64_MAX);
}

static void test_chain__topology(void **state)
{
        struct tsr_chain_topology t;
        char want[32];

        (void)state;
        snprintf(want, sizeof(want), "fnv64-%016llx",
                 (unsigned long long)tsr_fnv1a64_str("kubernetes.io/hostname"));
        tsr_chain_topology(&t);
        assert_int_equal(t.n_levels, 1);
        assert_string_equal(t.levels[0], "kubernetes.io/hostname");
        assert_string_equal(t.profile, want);
        assert_int_equal(strncmp(t.name, "gpustack-", 9), 0);
        assert_string_equal(t.name + 9, want);
}

static void test_chain__labels(void **state)
{
        struct tsr_chain_node nodes[8];
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        struct tsr_chain_flavor f[TSR_CHAIN_FLAVORS_MAX];
        struct tsr_chain_labels l;
        struct tsr_chain_topology t;
        char key[TSR_KEY_MAX];
        size_t n = mixed(nodes), np, nf;

        (void)state;
        tsr_chain_topology(&t);
        assert_int_equal(tsr_chain_node_labels(&nodes[0], &l, NULL), 0);
        assert_int_equal(l.n, 5);
        assert_string_equal(label_of(&l, "gpustack.ai/managed"), "true");
        assert_string_equal(label_of(&l, "topology.gpustack.ai/profile"), t.profile);
        assert_string_equal(label_of(&l, "general.feature.gpustack.ai/generic"), "true");
        assert_string_equal(label_of(&l, "acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3"),
                            "true");
        assert_string_equal(
            label_of(&l, "acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3.count"), "8");
        assert_null(label_of(&l, "kubernetes.io/hostname")); /* the kubelet's, not the chain's */

        assert_int_equal(tsr_chain_node_labels(&nodes[2], &l, NULL), 0);
        assert_int_equal(l.n, 3);

        assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, NULL), 0);
        assert_int_equal(tsr_chain_feature_key(&pools[3], key), 0);
        assert_string_equal(key, "acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3");
        assert_int_equal(tsr_chain_feature_key(&pools[0], key), 0);
        assert_string_equal(key, "general.feature.gpustack.ai/generic");

        assert_int_equal(tsr_chain_flavors(nodes, n, &pools[3], f, N_ELEMS(f), &nf, NULL, NULL), 0);
        assert_int_equal(tsr_chain_flavor_node_labels(&pools[3], &f[0], &l, NULL), 0);
        assert_int_equal(l.n, 7);
        assert_string_equal(label_of(&l, "kubernetes.io/os"), "linux");
        assert_string_equal(label_of(&l, "kubernetes.io/arch"), "amd64");
        assert_string_equal(label_of(&l, "gpustack.ai/managed"), "true");
        assert_string_equal(label_of(&l, "general.feature.gpustack.ai/generic"), "true");
        assert_string_equal(label_of(&l, "topology.gpustack.ai/profile"), t.profile);
        assert_string_equal(
            label_of(&l, "acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3.count"), "4");

        assert_int_equal(tsr_chain_flavors(nodes, n, &pools[0], f, N_ELEMS(f), &nf, NULL, NULL), 0);
        assert_int_equal(tsr_chain_flavor_node_labels(&pools[0], &f[0], &l, NULL), 0);
        assert_int_equal(l.n, 5);
}

/* Whether node (its kubelet labels, then the chain's) carries every label of sel. */
static bool selects(const struct tsr_chain_labels *sel, const struct tsr_chain_node *node)
{
        struct tsr_chain_labels has;

        assert_int_equal(tsr_chain_node_labels(node, &has, NULL), 0);
        for (size_t i = 0; i < sel->n; i++) {
                const char *v = !strcmp(sel->l[i].key, "kubernetes.io/os") ? node->os
                                : !strcmp(sel->l[i].key, "kubernetes.io/arch")
                                    ? node->arch
                                    : label_of(&has, sel->l[i].key);

                if (!v || strcmp(v, sel->l[i].value))
                        return false;
        }
        return true;
}

static void test_chain__node_labels_select_flavors(void **state)
{
        const struct tsr_product *products[] = {fx_product(H100), fx_product(A30), NULL};
        const char *arches[] = {"amd64", "arm64"};
        char names[24][16];

        (void)state;
        for (uint64_t seed = 1; seed <= 50; seed++) {
                struct tsr_chain_node nodes[24];
                struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
                size_t n, np;

                rng_seed(seed);
                n = 1 + rnd(24);
                for (size_t i = 0; i < n; i++) {
                        const struct tsr_product *p = products[rnd(3)];

                        snprintf(names[i], sizeof(names[i]), "node-%zu", i);
                        nodes[i] = (struct tsr_chain_node){
                            names[i],           "linux",
                            arches[rnd(2)],     p,
                            p ? 1 + rnd(8) : 0, 1000 * (int64_t)(1 + rnd(4)) * 16};
                }
                assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, NULL), 0);
                for (size_t p = 0; p < np; p++) {
                        struct tsr_chain_flavor f[TSR_CHAIN_FLAVORS_MAX];
                        int member[24];
                        size_t nf;
                        int64_t total = 0;

                        assert_int_equal(tsr_chain_flavors(nodes, n, &pools[p], f, N_ELEMS(f), &nf,
                                                           member, NULL),
                                         0);
                        for (size_t k = 0; k + 1 < nf; k++)
                                assert_true(f[k].per_node < f[k + 1].per_node);
                        for (size_t k = 0; k < nf; k++) {
                                struct tsr_chain_labels sel;

                                assert_int_equal(
                                    tsr_chain_flavor_node_labels(&pools[p], &f[k], &sel, NULL), 0);
                                total += f[k].nominal;
                                for (size_t i = 0; i < n; i++) {
                                        bool in = member[i] == (int)k;

                                        /* members always match; others only in the generic
                                         * pool, whose flavors no count label pins */
                                        if (in || pools[p].product)
                                                assert_int_equal(selects(&sel, &nodes[i]), in);
                                }
                        }
                        for (size_t i = 0; i < n; i++) {
                                if (member[i] < 0)
                                        continue;
                                total -= pools[p].product ? (int64_t)nodes[i].accel_count * M
                                                          : nodes[i].cpu_milli;
                                assert_true(tsr_chain_node_in_pool(&nodes[i], &pools[p]));
                        }
                        assert_int_equal(total, 0);
                }
        }
}

static void test_chain__bounds(void **state)
{
        struct tsr_chain_node nodes[8];
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        struct tsr_chain_flavor f[TSR_CHAIN_FLAVORS_MAX];
        struct tsr_chain_labels l = {.n = 42};
        struct tsr_diag diag;
        int member[8] = {7, 7, 7, 7, 7, 7, 7, 7};
        size_t n = mixed(nodes), np = 99, nf = 99;
        char long_os[80];

        (void)state;
        /* four pools in room for three */
        assert_int_equal(tsr_chain_pools(nodes, n, pools, 3, &np, &diag), TSR_ETOOBIG);
        assert_int_equal(np, 99);
        assert_non_null(strstr(diag.msg, "more than 3 InstanceTypes"));

        /* three generic flavors in room for two */
        assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, NULL), 0);
        nf = 99;
        assert_int_equal(tsr_chain_flavors(nodes, n, &pools[0], f, 2, &nf, member, &diag),
                         TSR_ETOOBIG);
        assert_int_equal(nf, 99);
        assert_int_equal(member[0], 7);
        assert_non_null(strstr(diag.msg, "more than 2 ResourceFlavors"));

        /* an os that is not a label value */
        np = 99;
        nodes[2].os = "Linux OS";
        assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, &diag), TSR_EINVAL);
        assert_int_equal(np, 99);
        assert_non_null(strstr(diag.msg, "node-cpu"));
        assert_int_equal(tsr_chain_node_labels(&nodes[2], &l, NULL), TSR_EINVAL);
        assert_int_equal(l.n, 42);

        /* 64 characters: one past a label value */
        memset(long_os, 'x', 64);
        long_os[64] = '\0';
        nodes[2].os = long_os;
        assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, NULL), TSR_EINVAL);
        long_os[63] = '\0';
        assert_int_equal(tsr_chain_pools(nodes, n, pools, N_ELEMS(pools), &np, NULL), 0);
}

static void test_chain__long_product(void **state)
{
        /* aKey nvidia-<53 characters> makes "<aKey>.capacity" 69 characters: not a label name */
        static const struct tsr_product longer = {
            "NVIDIA Quite Exceptionally Long Accelerator Product Name X1",
            TSR_MFR_NVIDIA,
            1024,
            4,
            16,
            NULL,
            0};
        struct tsr_chain_node node = {"node-long", "linux", "amd64", &longer, 1, 4000};
        struct tsr_chain_pool pool;
        struct tsr_chain_labels l;
        struct tsr_diag diag;
        size_t np;

        (void)state;
        assert_int_equal(tsr_chain_pools(&node, 1, &pool, 4, &np, &diag), TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "is not a label name"));
        assert_int_equal(tsr_chain_node_labels(&node, &l, NULL), TSR_EINVAL);
}

static void test_chain__catalog_fits(void **state)
{
        const struct tsr_product *products;
        size_t n = tsr_catalog_products(&products);

        (void)state;
        for (size_t i = 0; i < n; i++) {
                struct tsr_chain_node node = {"node", "linux", "amd64", &products[i], 8, 4000};
                struct tsr_chain_labels l;

                if (tsr_chain_node_labels(&node, &l, NULL))
                        fail_msg("%s cannot stand in the chain's labels", products[i].name);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_chain__pools),
            cmocka_unit_test(test_chain__flavors),
            cmocka_unit_test(test_chain__nominal_saturates),
            cmocka_unit_test(test_chain__topology),
            cmocka_unit_test(test_chain__labels),
            cmocka_unit_test(test_chain__node_labels_select_flavors),
            cmocka_unit_test(test_chain__bounds),
            cmocka_unit_test(test_chain__long_product),
            cmocka_unit_test(test_chain__catalog_fits),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
