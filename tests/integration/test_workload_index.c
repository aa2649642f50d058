/*
 * test_workload_index.c - the controller's parsed Workload view (controller/workload_index.h)
 * over a kube cache of a real kube-apiserver with Kueue's CRDs (tests/integration/
 * cluster_apiserver.h): a refresh parses every Workload once, then only those whose
 * resourceVersion moved; nothing at all while the cache's generation stands; a deleted Workload
 * leaves the view; the entries stay sorted by key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/kueue_workload.h"
#include "controller/workload_index.h"
#include "kube/cache.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/kubeconfig.h"

#include "cluster_apiserver.h"
#include "support/clock.h"

#include <stdio.h>
#include <string.h>

#define NS      "team-a"
#define WL_PATH "/apis/kueue.x-k8s.io/v1beta2/namespaces/" NS "/workloads"
#define WAIT_MS 10000

static struct cluster_apiserver C;
static struct tsr_kube_client *client;
static struct tsr_kube_cache *cache;

#define EVENTUALLY(expr, what) EVENTUALLY_WITHIN(expr, WAIT_MS, what)

/* A Workload of one PodSet "main" of count Pods asking for one GPU. */
static void create_workload(const char *name, int count)
{
        char buf[1024];

        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":\"Workload\","
                 "\"metadata\":{\"name\":\"%s\",\"namespace\":\"" NS "\"},"
                 "\"spec\":{\"queueName\":\"lq\",\"podSets\":[{\"name\":\"main\",\"count\":%d,"
                 "\"template\":{\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"x\","
                 "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}}]}}",
                 name, count);
        json_decref(cluster_create(&C, WL_PATH, buf));
}

static size_t cached_workloads(void)
{
        json_t *l = tsr_kube_cache_list(cache, TSR_KUBE_CACHE_WORKLOADS);
        size_t n = json_array_size(l);

        json_decref(l);
        return n;
}

static bool cached(const char *name)
{
        json_t *o = tsr_kube_cache_get(cache, TSR_KUBE_CACHE_WORKLOADS, NS, name);

        json_decref(o);
        return o != NULL;
}

static const struct ctl_workload_entry *find(const struct ctl_workload_index *x, const char *key)
{
        for (size_t i = 0; i < x->n; i++)
                if (!strcmp(x->v[i].key, key))
                        return &x->v[i];
        return NULL;
}

/* The parse of key's entry; fails the test when there is none. */
static const struct tsr_kueue_workload *parsed_of(const struct ctl_workload_index *x,
                                                  const char *key)
{
        static const struct tsr_kueue_workload none;
        const struct ctl_workload_entry *e = find(x, key);

        if (!e || !e->parsed) {
                fail_msg("%s has no parse", key);
                return &none;
        }
        return e->parsed;
}

static void assert_sorted(const struct ctl_workload_index *x)
{
        for (size_t i = 1; i < x->n; i++)
                assert_true(strcmp(x->v[i - 1].key, x->v[i].key) < 0);
}

static void test_index(void **state)
{
        struct ctl_workload_index x = {0};
        const struct tsr_kueue_workload *b_parsed, *c_parsed;
        char path[256];

        (void)state;
        create_workload("wl-c", 1);
        create_workload("wl-a", 2);
        create_workload("wl-b", 3);
        EVENTUALLY(cached_workloads() == 3, "three Workloads reach the cache");
        assert_int_equal(ctl_workload_index_refresh(&x, cache), 0);
        assert_int_equal(x.n, 3);
        assert_int_equal(x.parses, 3);
        assert_sorted(&x);
        b_parsed = parsed_of(&x, NS "/wl-b");
        assert_int_equal(b_parsed->w.n_podsets, 1);
        assert_int_equal(b_parsed->podsets[0].count, 3);
        c_parsed = parsed_of(&x, NS "/wl-c");

        /* Nothing moved: nothing copied or parsed, the same parses kept. */
        assert_int_equal(ctl_workload_index_refresh(&x, cache), 0);
        assert_int_equal(x.parses, 3);
        assert_ptr_equal(parsed_of(&x, NS "/wl-b"), b_parsed);

        /* One changed: that one parsed again, the others kept as they were. */
        unsigned long g = tsr_kube_cache_generation(cache, TSR_KUBE_CACHE_WORKLOADS);
        snprintf(path, sizeof(path), WL_PATH "/wl-b");
        json_decref(cluster_patch(&C, path, "{\"spec\":{\"active\":false}}"));
        EVENTUALLY(tsr_kube_cache_generation(cache, TSR_KUBE_CACHE_WORKLOADS) != g,
                   "the change reaches the cache");
        assert_int_equal(ctl_workload_index_refresh(&x, cache), 0);
        assert_int_equal(x.parses, 4);
        assert_int_equal(x.n, 3);
        assert_false(parsed_of(&x, NS "/wl-b")->w.active);
        assert_ptr_equal(parsed_of(&x, NS "/wl-c"), c_parsed);
        assert_sorted(&x);

        /* A deletion leaves the view; a new one joins it, sorted. */
        snprintf(path, sizeof(path), WL_PATH "/wl-c");
        cluster_delete(&C, path);
        create_workload("wl-0", 1);
        EVENTUALLY(cached("wl-0") && !cached("wl-c"),
                   "the deletion and the creation reach the cache");
        assert_int_equal(ctl_workload_index_refresh(&x, cache), 0);
        assert_int_equal(x.n, 3);
        assert_int_equal(x.parses, 5);
        assert_null(find(&x, NS "/wl-c"));
        assert_non_null(find(&x, NS "/wl-0"));
        assert_sorted(&x);

        ctl_workload_index_release(&x);
        assert_int_equal(x.n, 0);
        /* Released, it builds again from nothing. */
        assert_int_equal(ctl_workload_index_refresh(&x, cache), 0);
        assert_int_equal(x.n, 3);
        ctl_workload_index_release(&x);
}

static int group_setup(void **state)
{
        struct cluster_opts o = {.suite = "workload-index", .crds = true, .kueue_crds = true};
        struct tsr_kube_cache_opts co = {
            .backoff_initial_ms = 20,
            .backoff_max_ms = 200,
            .resources = TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_WORKLOADS),
        };
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        const char *kc;

        (void)state;
        cluster_start(&C, &o);
        cluster_namespace(&C, NS);
        kc = cluster_kubeconfig(&C, "kubeconfig", NULL, C.token, NULL);
        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        if (tsr_kube_kubeconfig_load(&cfg, kc, NULL, &diag) ||
            tsr_kube_client_new(&cfg, NULL, &client, &diag))
                fail_msg("client: %s", diag.msg);
        tsr_kube_config_release(&cfg);
        if (tsr_kube_cache_new_opts(client, &co, &cache, &diag))
                fail_msg("cache: %s", diag.msg);
        if (!tsr_kube_cache_wait_synced(cache, WAIT_MS))
                fail_msg("the cache did not sync");
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        tsr_kube_cache_free(cache);
        tsr_kube_client_free(client);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_index),
        };
        int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);

        cluster_stop(&C, failed != 0);
        return failed;
}
