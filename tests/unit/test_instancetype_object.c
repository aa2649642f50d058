/*
 * test_instancetype_object.c - codec/instancetype_object: the InstanceType the controller
 * authors and reports and the simulator prints.
 *
 * The authored object carries the upstream name, entrance label and unit preset and no status;
 * the status of eight H100 80GB with one 3g.40gb live (seeds/nvidia-mig.md step 2.4) carries
 * the four views, every offered profile in both lists, the capability-only slicedDetail, the
 * product detail and the printable cells "0/0 0/0 0/0 1/52"; a draining pool reads every count
 * at 0 with its profiles still listed and its slicedDetail unchanged; a phase message is written
 * only when given; the generic pool gets generalGroup and no product detail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/instancetype_object.h"
#include "core/chain.h"

#include "support/catalog_fixtures.h"

#include <stdio.h>
#include <string.h>

#define H100_NAME "NVIDIA H100 80GB HBM3"
#define H100_POOL "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"

static struct tsr_chain_pool pool_of(const struct tsr_product *p)
{
        struct tsr_chain_pool pool;

        memset(&pool, 0, sizeof(pool));
        pool.product = p;
        snprintf(pool.os, sizeof(pool.os), "linux");
        snprintf(pool.arch, sizeof(pool.arch), "amd64");
        assert_int_equal(tsr_instancetype_name(p, "linux", "amd64", pool.name, sizeof(pool.name)),
                         0);
        tsr_instancetype_entrance(pool.name, pool.entrance);
        return pool;
}

/* Eight H100s, MIG on, one 3g.40gb at slice 0 of GPU 0 (step 2.4). */
static void step_2_4(struct tsr_pool_views *v)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_alloc_record r = {0, TSR_MODE_PARTITIONED, 790000, 0, 0, 0, false};
        static struct fx_node nd;
        struct tsr_pool_node pn;

        r.profile = fx_pidx(h100, "3g.40gb");
        fx_node_build(&nd, h100, 8, 0xff, &r, 1);
        pn = (struct tsr_pool_node){nd.caps, nd.ledger, nd.n};
        tsr_views_compute(&pn, 1, v);
}

static const char *str_at(json_t *o, const char *path)
{
        char buf[256], *save = NULL, *tok;

        snprintf(buf, sizeof(buf), "%s", path);
        for (tok = strtok_r(buf, ".", &save); tok && o; tok = strtok_r(NULL, ".", &save))
                o = json_object_get(o, tok);
        return json_string_value(o);
}

static json_int_t int_at(json_t *o, const char *a, const char *b)
{
        return json_integer_value(json_object_get(json_object_get(o, a), b));
}

static json_int_t profile_count(json_t *list, const char *name)
{
        json_t *e;
        size_t i;

        json_array_foreach(list, i, e)
        {
                if (!strcmp(json_string_value(json_object_get(e, "name")), name))
                        return json_integer_value(json_object_get(e, "count"));
        }
        return -1;
}

static void test_authored(void **state)
{
        struct tsr_chain_pool p = pool_of(fx_product(H100_NAME));
        json_t *o = tsr_instancetype_object_authored(&p);

        (void)state;
        assert_non_null(o);
        assert_string_equal(str_at(o, "apiVersion"), "worker.gpustack.ai/v1alpha1");
        assert_string_equal(str_at(o, "kind"), "InstanceType");
        assert_string_equal(str_at(o, "metadata.name"), H100_POOL);
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_object_get(o, "metadata"), "labels"),
                                "schedule.gpustack.ai/queue-entrance")),
                            "gpustack-fnv64-e4768a65ca0ce96b");
        assert_string_equal(str_at(o, "spec.acceleratorGroup"), "nvidia-h100-80gb-hbm3");
        assert_string_equal(str_at(o, "spec.generalGroup"), "generic");
        assert_string_equal(str_at(o, "spec.unitResources.cpu"), "12");
        assert_string_equal(str_at(o, "spec.unitResources.ram"), "192Gi");
        assert_string_equal(str_at(o, "spec.localStorage"), "100Gi");
        assert_true(json_is_true(json_object_get(json_object_get(o, "spec"), "acceleratable")));
        assert_null(json_object_get(o, "status"));
        json_decref(o);
}

static void test_status_step_2_4(void **state)
{
        struct tsr_chain_pool p = pool_of(fx_product(H100_NAME));
        struct tsr_view cpu = {0, 0, 0};
        struct tsr_pool_views v;
        json_t *s, *pt;

        (void)state;
        step_2_4(&v);
        s = tsr_instancetype_object_status(&p, &v, &cpu, NULL);
        assert_non_null(s);
        assert_string_equal(str_at(s, "phase"), "Active");
        assert_null(json_object_get(s, "phaseMessage"));
        assert_string_equal(str_at(s, "entrance"), "gpustack-fnv64-e4768a65ca0ce96b");
        assert_int_equal(int_at(s, "accelerator", "capacity"), 0);
        pt = json_object_get(s, "acceleratorPartitioned");
        assert_int_equal(int_at(s, "acceleratorPartitioned", "remaining"), 52);
        assert_int_equal(int_at(s, "acceleratorPartitioned", "onceMaxRequest"), 1);
        assert_int_equal(json_array_size(json_object_get(pt, "remainingProfiles")), 6);
        assert_int_equal(profile_count(json_object_get(pt, "remainingProfiles"), "3g.40gb"), 15);
        assert_int_equal(profile_count(json_object_get(pt, "allocatedProfiles"), "3g.40gb"), 1);
        assert_int_equal(profile_count(json_object_get(pt, "allocatedProfiles"), "7g.80gb"), 0);
        assert_string_equal(str_at(s, "printable.accelerator"), "0/0 0/0 0/0 1/52");
        assert_string_equal(str_at(s, "printable.unit"), "12/192Gi/100Gi");
        assert_non_null(strstr(str_at(s, "printable.partitions"), "3g.40gb:15"));
        assert_string_equal(str_at(s, "detail.memory"), "81920Mi");
        assert_string_equal(str_at(s, "detail.manufacturer"), "nvidia");
        assert_int_equal(int_at(json_object_get(json_object_get(s, "detail"), "slicedDetail"),
                                "physical", "count"),
                         56);
        json_decref(s);
}

static void test_status_draining(void **state)
{
        struct tsr_chain_pool p = pool_of(fx_product(H100_NAME));
        struct tsr_instancetype_state st = {"Draining", "its ClusterQueue is HoldAndDrain", true};
        struct tsr_view cpu = {9, 9, 9};
        struct tsr_pool_views v;
        json_t *s, *rem;
        size_t i;
        json_t *e;

        (void)state;
        step_2_4(&v);
        s = tsr_instancetype_object_status(&p, &v, &cpu, &st);
        assert_non_null(s);
        assert_string_equal(str_at(s, "phase"), "Draining");
        assert_string_equal(str_at(s, "phaseMessage"), "its ClusterQueue is HoldAndDrain");
        assert_string_equal(str_at(s, "printable.accelerator"), "0/0 0/0 0/0 0/0");
        assert_string_equal(str_at(s, "printable.cpu"), "0/0");
        assert_int_equal(int_at(s, "acceleratorPartitioned", "capacity"), 0);
        rem = json_object_get(json_object_get(s, "acceleratorPartitioned"), "remainingProfiles");
        assert_int_equal(json_array_size(rem), 6);
        json_array_foreach(rem, i, e)
            assert_int_equal(json_integer_value(json_object_get(e, "count")), 0);
        /* capability, not availability: unchanged */
        assert_int_equal(int_at(json_object_get(json_object_get(s, "detail"), "slicedDetail"),
                                "physical", "count"),
                         56);
        /* the caller's views are not touched */
        assert_int_equal(v.pt.remaining, 52);
        json_decref(s);
}

static void test_generic_pool(void **state)
{
        struct tsr_chain_pool p = pool_of(NULL);
        struct tsr_view cpu = {132, 128, 132};
        struct tsr_pool_views v;
        json_t *o;

        (void)state;
        memset(&v, 0, sizeof(v));
        o = tsr_instancetype_object_build(&p, &v, &cpu, NULL);
        assert_non_null(o);
        assert_string_equal(str_at(o, "metadata.name"), "gpustack--generic-linux-amd64");
        assert_string_equal(str_at(o, "spec.generalGroup"), "generic");
        assert_null(json_object_get(json_object_get(o, "spec"), "acceleratorGroup"));
        assert_string_equal(str_at(o, "status.printable.cpu"), "128/132");
        assert_string_equal(str_at(o, "status.printable.unit"), "1/2Gi/100Gi");
        assert_null(json_object_get(json_object_get(json_object_get(o, "status"), "printable"),
                                    "partitions"));
        assert_null(
            json_object_get(json_object_get(json_object_get(o, "status"), "detail"), "product"));
        json_decref(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_authored),
            cmocka_unit_test(test_status_step_2_4),
            cmocka_unit_test(test_status_draining),
            cmocka_unit_test(test_generic_pool),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
