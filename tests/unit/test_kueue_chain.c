/*
 * test_kueue_chain.c - codec/kueue_chain: the chain's Kueue v1beta2 objects, field for field
 * against hand-written objects that follow spec/upstream-behavior.md §9 and §15 and the Kueue
 * v0.17.0 CRDs (the cluster suite kueue_chain applies the same builders' output to a real Kueue).
 *
 * Covers, for a cluster of two H100 x4 nodes, one H100 x8 node and a 16-core CPU node:
 *   the ResourceFlavor of the H100 4d flavor (labels with .count 4 and .capacity 8, the eight
 *   notes, nodeLabels, the Exists toleration, the hostname Topology) and of a generic flavor;
 *   the H100 ClusterQueue (credits only, 4d then 8d, 12800k each, no lendingLimit,
 *   the preemption and fungibility policies, the gpustack-node-devices check only when Active)
 *   and the generic one (cpu in cores, never the check), each stop policy, a pool without flavors
 *   (no resource group) and one with 65 (TSR_ETOOBIG);
 *   the LocalQueue (gpustack-fnv64-e4768a65ca0ce96b, its annotation, TSR_EINVAL without a
 *   namespace), the Topology and the AdmissionCheck;
 *   an allocation-failure loop over every builder: TSR_ENOMEM and no object, or the same object.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/kueue_chain.h"

#include "support/catalog_fixtures.h"
#include "support/failing_alloc.h"
#include "support/json_text.h"

#include <stdlib.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define AKEY    "acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3"
#define GKEY    "general.feature.gpustack.ai/generic"
#define PROFILE "fnv64-87bf574bea2a4f23" /* FNV-1a-64("kubernetes.io/hostname") */
#define H100_NOTES                                                                                 \
        "\"note.gpustack.ai/acceleratable\": \"true\", \"note.gpustack.ai/manufacturer\": "        \
        "\"nvidia\", \"note.gpustack.ai/product\": \"NVIDIA H100 80GB HBM3\", "                    \
        "\"note.gpustack.ai/family\": \"\", \"note.gpustack.ai/memory\": \"81920Mi\", "            \
        "\"note.gpustack.ai/unitCPU\": \"12\", \"note.gpustack.ai/unitRAM\": \"192Gi\", "          \
        "\"note.gpustack.ai/localStorage\": \"100Gi\""
#define GENERIC_NOTES                                                                              \
        "\"note.gpustack.ai/acceleratable\": \"false\", \"note.gpustack.ai/manufacturer\": "       \
        "\"generic\", \"note.gpustack.ai/product\": \"\", \"note.gpustack.ai/family\": \"\", "     \
        "\"note.gpustack.ai/memory\": \"\", \"note.gpustack.ai/unitCPU\": \"1\", "                 \
        "\"note.gpustack.ai/unitRAM\": \"2Gi\", \"note.gpustack.ai/localStorage\": \"100Gi\""
#define POLICIES                                                                                   \
        "\"namespaceSelector\": {}, \"flavorFungibility\": {\"whenCanBorrow\": "                   \
        "\"TryNextFlavor\", \"whenCanPreempt\": \"MayStopSearch\"}, \"preemption\": "              \
        "{\"reclaimWithinCohort\": \"Never\", \"borrowWithinCohort\": {\"policy\": \"Never\"}, "   \
        "\"withinClusterQueue\": \"LowerPriority\"}"

struct chain {
        struct tsr_chain_node nodes[4];
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        size_t np;
        struct tsr_chain_flavor h100[TSR_CHAIN_FLAVORS_MAX], cpu[TSR_CHAIN_FLAVORS_MAX];
        size_t nh, nc;
};

/* pools[0] gpustack--generic-linux-amd64, pools[1] the H100 pool. */
static void build(struct chain *c)
{
        const struct tsr_product *h100 = fx_product("NVIDIA H100 80GB HBM3");

        c->nodes[0] = (struct tsr_chain_node){"node-a", "linux", "amd64", h100, 4, 32000};
        c->nodes[1] = (struct tsr_chain_node){"node-b", "linux", "amd64", h100, 8, 64000};
        c->nodes[2] = (struct tsr_chain_node){"node-c", "linux", "amd64", h100, 4, 32000};
        c->nodes[3] = (struct tsr_chain_node){"node-cpu", "linux", "amd64", NULL, 0, 16000};
        assert_int_equal(tsr_chain_pools(c->nodes, 4, c->pools, TSR_CHAIN_POOLS_MAX, &c->np, NULL),
                         0);
        assert_int_equal(c->np, 2);
        assert_int_equal(tsr_chain_flavors(c->nodes, 4, &c->pools[1], c->h100,
                                           TSR_CHAIN_FLAVORS_MAX, &c->nh, NULL, NULL),
                         0);
        assert_int_equal(tsr_chain_flavors(c->nodes, 4, &c->pools[0], c->cpu, TSR_CHAIN_FLAVORS_MAX,
                                           &c->nc, NULL, NULL),
                         0);
}

static void expect(json_t *got, const char *want_text)
{
        json_t *want = json_fx_load(want_text);

        if (!json_equal(got, want)) {
                char *g = json_fx_dump(got), *w = json_fx_dump(want);

                fail_msg("got  %s\nwant %s", g, w);
        }
        json_decref(want);
        json_decref(got);
}

static void test_kueue_chain__resource_flavor(void **state)
{
        struct chain c;
        json_t *o;

        (void)state;
        build(&c);
        assert_int_equal(tsr_kueue_resource_flavor(&c.pools[1], &c.h100[0], &o, NULL), 0);
        expect(o, "{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\", \"kind\": \"ResourceFlavor\", "
                  "\"metadata\": {\"name\": "
                  "\"gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-4d\", \"labels\": "
                  "{\"resource.gpustack.ai/type\": \"nodes\", \"" AKEY "\": \"true\", "
                  "\"kubernetes.io/os\": \"linux\", \"kubernetes.io/arch\": \"amd64\", "
                  "\"" AKEY ".count\": \"4\", \"" AKEY ".capacity\": \"8\"}, \"annotations\": "
                  "{" H100_NOTES "}}, "
                  "\"spec\": {\"nodeLabels\": {\"gpustack.ai/managed\": \"true\", "
                  "\"topology.gpustack.ai/profile\": \"" PROFILE "\", \"" GKEY "\": \"true\", "
                  "\"kubernetes.io/os\": \"linux\", \"kubernetes.io/arch\": \"amd64\", "
                  "\"" AKEY "\": \"true\", \"" AKEY ".count\": \"4\"}, "
                  "\"tolerations\": [{\"operator\": \"Exists\"}], "
                  "\"topologyName\": \"gpustack-" PROFILE "\"}}");

        /* the 16-core flavor of the generic pool (the CPU node alone) */
        assert_int_equal(tsr_kueue_resource_flavor(&c.pools[0], &c.cpu[0], &o, NULL), 0);
        expect(o, "{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\", \"kind\": \"ResourceFlavor\", "
                  "\"metadata\": {\"name\": \"gpustack--generic-linux-amd64-16c\", \"labels\": "
                  "{\"resource.gpustack.ai/type\": \"nodes\", \"" GKEY "\": \"true\", "
                  "\"kubernetes.io/os\": \"linux\", \"kubernetes.io/arch\": \"amd64\", "
                  "\"" GKEY ".count\": \"16\", \"" GKEY ".capacity\": \"16\"}, \"annotations\": "
                  "{" GENERIC_NOTES "}}, "
                  "\"spec\": {\"nodeLabels\": {\"gpustack.ai/managed\": \"true\", "
                  "\"topology.gpustack.ai/profile\": \"" PROFILE "\", \"" GKEY "\": \"true\", "
                  "\"kubernetes.io/os\": \"linux\", \"kubernetes.io/arch\": \"amd64\"}, "
                  "\"tolerations\": [{\"operator\": \"Exists\"}], "
                  "\"topologyName\": \"gpustack-" PROFILE "\"}}");
}

#define H100_CQ_HEAD                                                                               \
        "{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\", \"kind\": \"ClusterQueue\", \"metadata\": "  \
        "{\"name\": \"gpustack--nvidia-h100-80gb-hbm3-linux-amd64\", \"labels\": "                 \
        "{\"resource.gpustack.ai/type\": \"instancetypes\", \"" AKEY "\": \"true\", "              \
        "\"kubernetes.io/os\": \"linux\", \"kubernetes.io/arch\": \"amd64\"}, \"annotations\": "   \
        "{" H100_NOTES "}}, \"spec\": {" POLICIES ", "
#define H100_GROUPS                                                                                \
        "\"resourceGroups\": [{\"coveredResources\": [\"credits.gpustack.ai/nvidia\"], "           \
        "\"flavors\": [{\"name\": \"gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-4d\", "   \
        "\"resources\": [{\"name\": \"credits.gpustack.ai/nvidia\", \"nominalQuota\": "            \
        "\"12800k\"}]}, {\"name\": \"gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-8d\", "  \
        "\"resources\": [{\"name\": \"credits.gpustack.ai/nvidia\", \"nominalQuota\": "            \
        "\"12800k\"}]}]}]"

static void test_kueue_chain__cluster_queue(void **state)
{
        struct chain c;
        json_t *o;

        (void)state;
        build(&c);
        assert_int_equal(
            tsr_kueue_cluster_queue(&c.pools[1], c.h100, c.nh, TSR_KUEUE_STOP_NONE, true, &o, NULL),
            0);
        expect(o, H100_CQ_HEAD "\"stopPolicy\": \"None\", " H100_GROUPS ", "
                               "\"admissionChecksStrategy\": {\"admissionChecks\": [{\"name\": "
                               "\"gpustack-node-devices\"}]}}}");

        /* the check not Active yet: no reference; Hold */
        assert_int_equal(tsr_kueue_cluster_queue(&c.pools[1], c.h100, c.nh, TSR_KUEUE_STOP_HOLD,
                                                 false, &o, NULL),
                         0);
        expect(o, H100_CQ_HEAD "\"stopPolicy\": \"Hold\", " H100_GROUPS "}}");

        /* the generic queue: cpu in cores (16c then 32c, 64c), never the check */
        assert_int_equal(tsr_kueue_cluster_queue(&c.pools[0], c.cpu, c.nc,
                                                 TSR_KUEUE_STOP_HOLD_AND_DRAIN, true, &o, NULL),
                         0);
        expect(o, "{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\", \"kind\": \"ClusterQueue\", "
                  "\"metadata\": {\"name\": \"gpustack--generic-linux-amd64\", \"labels\": "
                  "{\"resource.gpustack.ai/type\": \"instancetypes\", \"" GKEY "\": \"true\", "
                  "\"kubernetes.io/os\": \"linux\", \"kubernetes.io/arch\": \"amd64\"}, "
                  "\"annotations\": {" GENERIC_NOTES "}}, \"spec\": {" POLICIES ", "
                  "\"stopPolicy\": \"HoldAndDrain\", \"resourceGroups\": [{\"coveredResources\": "
                  "[\"cpu\"], \"flavors\": ["
                  "{\"name\": \"gpustack--generic-linux-amd64-16c\", \"resources\": [{\"name\": "
                  "\"cpu\", \"nominalQuota\": \"16\"}]}, "
                  "{\"name\": \"gpustack--generic-linux-amd64-32c\", \"resources\": [{\"name\": "
                  "\"cpu\", \"nominalQuota\": \"64\"}]}, "
                  "{\"name\": \"gpustack--generic-linux-amd64-64c\", \"resources\": [{\"name\": "
                  "\"cpu\", \"nominalQuota\": \"64\"}]}]}]}}");
}

static void test_kueue_chain__cluster_queue_bounds(void **state)
{
        static struct tsr_chain_flavor many[TSR_KUEUE_GROUP_FLAVORS_MAX + 1];
        struct chain c;
        struct tsr_diag diag;
        json_t *o = NULL;

        (void)state;
        build(&c);
        /* no flavor: no resource group (a group lists one flavor at least) */
        assert_int_equal(
            tsr_kueue_cluster_queue(&c.pools[1], c.h100, 0, TSR_KUEUE_STOP_HOLD, true, &o, NULL),
            0);
        assert_int_equal(
            json_array_size(json_object_get(json_object_get(o, "spec"), "resourceGroups")), 0);
        assert_true(json_is_array(json_object_get(json_object_get(o, "spec"), "resourceGroups")));
        json_decref(o);
        o = NULL;

        for (size_t i = 0; i < N_ELEMS(many); i++)
                many[i] = c.h100[0];
        assert_int_equal(tsr_kueue_cluster_queue(&c.pools[1], many, TSR_KUEUE_GROUP_FLAVORS_MAX,
                                                 TSR_KUEUE_STOP_NONE, true, &o, NULL),
                         0);
        json_decref(o);
        o = NULL;
        assert_int_equal(tsr_kueue_cluster_queue(&c.pools[1], many, N_ELEMS(many),
                                                 TSR_KUEUE_STOP_NONE, true, &o, &diag),
                         TSR_ETOOBIG);
        assert_null(o);
        assert_non_null(strstr(diag.msg, "65 flavors"));
}

static void test_kueue_chain__local_queue_topology_check(void **state)
{
        struct chain c;
        struct tsr_diag diag;
        json_t *o = NULL;

        (void)state;
        build(&c);
        assert_int_equal(tsr_kueue_local_queue(&c.pools[1], "team-a", &o, NULL), 0);
        expect(o, "{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\", \"kind\": \"LocalQueue\", "
                  "\"metadata\": {\"name\": \"gpustack-fnv64-e4768a65ca0ce96b\", \"namespace\": "
                  "\"team-a\", \"annotations\": {\"schedule.gpustack.ai/queue\": "
                  "\"gpustack--nvidia-h100-80gb-hbm3-linux-amd64\"}}, \"spec\": "
                  "{\"clusterQueue\": \"gpustack--nvidia-h100-80gb-hbm3-linux-amd64\"}}");
        o = NULL;
        assert_int_equal(tsr_kueue_local_queue(&c.pools[1], "", &o, &diag), TSR_EINVAL);
        assert_null(o);

        assert_int_equal(tsr_kueue_topology(&o, NULL), 0);
        expect(o, "{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\", \"kind\": \"Topology\", "
                  "\"metadata\": {\"name\": \"gpustack-" PROFILE "\"}, \"spec\": {\"levels\": "
                  "[{\"nodeLabel\": \"kubernetes.io/hostname\"}]}}");
        assert_int_equal(tsr_kueue_admission_check(&o, NULL), 0);
        expect(o, "{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\", \"kind\": \"AdmissionCheck\", "
                  "\"metadata\": {\"name\": \"gpustack-node-devices\"}, \"spec\": "
                  "{\"controllerName\": \"worker.gpustack.ai/node-devices\"}}");
}

static void test_kueue_chain__labels_set(void **state)
{
        struct chain c;
        struct tsr_chain_labels l;
        json_t *o = json_object();

        (void)state;
        build(&c);
        assert_int_equal(tsr_chain_node_labels(&c.nodes[1], &l, NULL), 0);
        assert_int_equal(tsr_kueue_labels_set(o, &l), 0);
        expect(o, "{\"gpustack.ai/managed\": \"true\", \"topology.gpustack.ai/profile\": "
                  "\"" PROFILE "\", \"" GKEY "\": \"true\", \"" AKEY "\": \"true\", "
                  "\"" AKEY ".count\": \"8\"}");
}

/* Builder k of the five, over chain c. */
static int run_builder(int k, const struct chain *c, json_t **o, struct tsr_diag *diag)
{
        switch (k) {
        case 0:
                return tsr_kueue_resource_flavor(&c->pools[1], &c->h100[0], o, diag);
        case 1:
                return tsr_kueue_cluster_queue(&c->pools[1], c->h100, c->nh, TSR_KUEUE_STOP_NONE,
                                               true, o, diag);
        case 2:
                return tsr_kueue_local_queue(&c->pools[0], "team-a", o, diag);
        case 3:
                return tsr_kueue_topology(o, diag);
        default:
                return tsr_kueue_admission_check(o, diag);
        }
}

static void test_kueue_chain__out_of_memory(void **state)
{
        struct chain c;

        (void)state;
        build(&c);
        for (int b = 0; b < 5; b++) {
                json_t *want = NULL;
                bool built = false;

                assert_int_equal(run_builder(b, &c, &want, NULL), 0);
                json_set_alloc_funcs(failing_malloc, free);
                for (long k = 0; k < 100000 && !built; k++) {
                        struct tsr_diag diag;
                        json_t *o = NULL;
                        int rc;

                        tsr_diag_clear(&diag);
                        failing_alloc_budget(k);
                        rc = run_builder(b, &c, &o, &diag);
                        failing_alloc_budget(-1);
                        if (rc == 0) {
                                built = true;
                                assert_true(json_equal(o, want));
                                json_decref(o);
                        } else {
                                assert_int_equal(rc, TSR_ENOMEM);
                                assert_null(o);
                                assert_non_null(strstr(diag.msg, "out of memory"));
                        }
                }
                json_set_alloc_funcs(malloc, free);
                assert_true(built);
                json_decref(want);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_kueue_chain__resource_flavor),
            cmocka_unit_test(test_kueue_chain__cluster_queue),
            cmocka_unit_test(test_kueue_chain__cluster_queue_bounds),
            cmocka_unit_test(test_kueue_chain__local_queue_topology_check),
            cmocka_unit_test(test_kueue_chain__labels_set),
            cmocka_unit_test(test_kueue_chain__out_of_memory),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
