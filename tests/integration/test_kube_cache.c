/*
 * test_kube_cache.c - kube/cache over TLS on loopback, through a kubeconfig with a CA file and a
 * tokenFile, as a deployment would run it outside a cluster: against a real kube-apiserver
 * (tests/cluster/controlplane.py through cluster_apiserver.h, with tessera's CRDs and Kueue's
 * installed) for everything a real server does, and against the fake API server
 * (tests/peers/fake_apiserver.py) for the faults only it makes on demand. Each world has its own
 * server, client and cache (small backoff, page size 2 so the lists page).
 *
 * On the real server, in order:
 *   initial sync       wait_synced; every pre-created object is found (cluster-scoped by name,
 *                      LocalQueues by namespace and name); unknown names and namespaces are NULL;
 *                      the first list of three InstanceTypes took two LIST requests (the server's
 *                      own counters); every watcher of the webhook's mask watches, none of Pods
 *   events             ADDED, MODIFIED, DELETED of each kind show up; a reference taken before a
 *                      MODIFIED still reads the old object (objects are replaced, never edited);
 *                      four reader threads look objects up the whole time (for TSan); no re-list
 *   entrance           instancetype_by_entrance with 0, 1 and 2 matches, and back to 1
 *   node pods          a second cache, Pods only, for one node: the server's field selector keeps
 *                      the Pods of other nodes and unscheduled ones out of both the list and the
 *                      watch; lookups by name and uid, the snapshot; the change callback fires
 *                      (outside the lock: it reads the cache) on the first list and on each
 *                      ADDED, MODIFIED and DELETED, for the Pods only; the webhook's resources
 *                      are not watched; bad masks and a missing node name are refused
 *   shutdown (idle)    tsr_kube_cache_free returns promptly with watches open
 * On the fake, in order (faults):
 *   bookmarks          a change to another resource moves the InstanceType watcher's
 *                      resourceVersion through BOOKMARK events alone (the fake's 0.2 s
 *                      bookmarks; a real server's come once a minute); after a compaction and
 *                      cut watches, resuming from the bookmark needs no list
 *   compaction (event) watches held while objects change and history is compacted get an ERROR
 *                      event with a 410 Status: every watcher re-lists and the cache converges
 *   compaction (http)  the same with the fake answering the watch with HTTP 410
 *   expire mid-stream  an ERROR 410 on live watches re-lists too
 *   stale              while that re-list fails (500s), the cache stays synced and serves what
 *                      it held, but is stale (not current) until the re-list completes
 *   dropped watch      cut connections reconnect from the last resourceVersion without a list
 *   failures           injected 500s on re-watch are retried with backoff until they pass
 *   410 every watch    relisted at once, then with backoff (a bounded rate), stale meanwhile,
 *                      the watch metrics rendered; recovers when the watches answer
 *   stalled watch      a watch silent past the stall limit (muted: no event, no bookmark) and a
 *                      watch request held unanswered are cut, counted and logged; the resource
 *                      is stale until the watch delivers again, resumed without a list
 *   404 later          injected 404s after the first list keep what the cache holds
 *   token rotation     the fake stops accepting the old token and the watches are cut: the 401s
 *                      are retried (the cache stale, not current, until it lists again), and
 *                      once the token file holds the new token the cache recovers and sees
 *                      changes made meanwhile
 *   shutdown           tsr_kube_cache_free returns promptly with watches held by the server
 *                      (paused) and while retrying against a dead server
 *
 * The main caches run with the default mask, the webhook's: they never list or watch Pods.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "kube/cache.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/kubeconfig.h"

#include "cluster_apiserver.h"
#include "fake_apiserver.h"
#include "support/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IT_PATH      "/apis/worker.gpustack.ai/v1alpha1/instancetypes"
#define CQ_PATH      "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
#define LQ_NS        "/apis/kueue.x-k8s.io/v1beta2/namespaces/"
#define POD_NS       "/api/v1/namespaces/"
#define WAIT_MS      10000
#define STALL_S      2 /* test_stalled_watch's stall limit, and as text: */
#define STALL_S_TEXT "2 s"

/* How many watchers the main cache (the default, webhook mask) runs. */
#define WEBHOOK_WATCHERS __builtin_popcount(TSR_KUBE_CACHE_WEBHOOK_RESOURCES)

static bool webhook_watched(int r)
{
        return (TSR_KUBE_CACHE_WEBHOOK_RESOURCES & TSR_KUBE_CACHE_BIT(r)) != 0;
}

/* A server (real or fake), a client through a kubeconfig with a tokenFile, and a cache. */
struct world {
        struct cluster_apiserver *real; /* exactly one of real and fake */
        struct fake_apiserver *fake;
        char dir[256]; /* the fake's certificates and files */
        struct tsr_kube_client *client;
        struct tsr_kube_cache *cache;
        char token_file[512];
};

static struct cluster_apiserver C;
static struct fake_apiserver F;
static struct world R = {.real = &C}, FW = {.fake = &F};

/* Polls expr every 10 ms for up to WAIT_MS; fails the test with what when it stays false. */
#define EVENTUALLY(expr, what) EVENTUALLY_WITHIN(expr, WAIT_MS, what)

/* ---- writes, through the world's server ------------------------------------------------------ */

static json_t *w_create(struct world *w, const char *collection, const char *object)
{
        return w->real ? cluster_create(w->real, collection, object)
                       : fake_create(w->fake, collection, object);
}

static json_t *w_patch(struct world *w, const char *path, const char *patch)
{
        return w->real ? cluster_patch(w->real, path, patch) : fake_patch(w->fake, path, patch);
}

static void w_delete(struct world *w, const char *path)
{
        if (w->real)
                cluster_delete(w->real, path);
        else
                fake_delete(w->fake, path);
}

/* An InstanceType the real CRD's schema keeps whole: spec.memory carries n. */
static char *it_json(const char *name, const char *entrance, int n)
{
        static char buf[640];

        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"worker.gpustack.ai/v1alpha1\",\"kind\":\"InstanceType\","
                 "\"metadata\":{\"name\":\"%s\",\"labels\":{%s%s%s}},"
                 "\"spec\":{\"acceleratable\":false,\"os\":\"linux\",\"arch\":\"amd64\","
                 "\"unitResources\":{\"cpu\":\"1\",\"ram\":\"1Gi\"},\"localStorage\":\"10Gi\","
                 "\"memory\":%d}}",
                 name, entrance ? "\"schedule.gpustack.ai/queue-entrance\":\"" : "",
                 entrance ? entrance : "", entrance ? "\"" : "", n);
        return buf;
}

static void create_it(struct world *w, const char *name, const char *entrance, int n)
{
        json_decref(w_create(w, IT_PATH, it_json(name, entrance, n)));
}

/* A ClusterQueue of kueue.x-k8s.io/v1beta2 (spec.cohortName: v1beta1's spec.cohort is pruned). */
static void create_cq(struct world *w, const char *name)
{
        char buf[256];

        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":\"ClusterQueue\","
                 "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"cohortName\":\"c\"}}",
                 name);
        json_decref(w_create(w, CQ_PATH, buf));
}

static void create_lq(struct world *w, const char *ns, const char *name)
{
        char path[256], buf[256];

        snprintf(path, sizeof(path), LQ_NS "%s/localqueues", ns);
        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":\"LocalQueue\","
                 "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"clusterQueue\":\"cq\"}}",
                 name);
        json_decref(w_create(w, path, buf));
}

static void patch_it(struct world *w, const char *name, const char *patch)
{
        char path[256];

        snprintf(path, sizeof(path), IT_PATH "/%s", name);
        json_decref(w_patch(w, path, patch));
}

static void delete_it(struct world *w, const char *name)
{
        char path[256];

        snprintf(path, sizeof(path), IT_PATH "/%s", name);
        w_delete(w, path);
}

/* ---- reads, from the world's cache ----------------------------------------------------------- */

static bool has_it(struct world *w, const char *name)
{
        json_t *o = tsr_kube_cache_instancetype(w->cache, name);

        json_decref(o);
        return o != NULL;
}

static bool has_cq(struct world *w, const char *name)
{
        json_t *o = tsr_kube_cache_clusterqueue(w->cache, name);

        json_decref(o);
        return o != NULL;
}

static bool has_lq(struct world *w, const char *ns, const char *name)
{
        json_t *o = tsr_kube_cache_localqueue(w->cache, ns, name);

        json_decref(o);
        return o != NULL;
}

static long it_n(struct world *w, const char *name)
{
        json_t *o = tsr_kube_cache_instancetype(w->cache, name);
        long n = o ? (long)json_integer_value(json_object_get(json_object_get(o, "spec"), "memory"))
                   : -1;

        json_decref(o);
        return n;
}

static struct tsr_kube_cache_stats stats(struct world *w, enum tsr_kube_cache_resource r)
{
        struct tsr_kube_cache_stats s;

        tsr_kube_cache_stats(w->cache, r, &s);
        return s;
}

static bool rv_is(struct world *w, enum tsr_kube_cache_resource r, long rv)
{
        return atol(stats(w, r).resource_version) == rv;
}

static void start_cache(struct world *w, struct tsr_kube_cache **out)
{
        struct tsr_kube_cache_opts o = {.backoff_initial_ms = 20,
                                        .backoff_max_ms = 200,
                                        .watch_timeout_s = 30,
                                        .page_limit = 2};
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_kube_cache_new_opts(w->client, &o, out, &diag);
        if (rc)
                fail_msg("cache: %s: %s", tsr_err_name(rc), diag.msg);
}

/* ---- setup -------------------------------------------------------------------------------- */

static void world_client(struct world *w, const char *kubeconfig)
{
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        int rc;

        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        rc = tsr_kube_kubeconfig_load(&cfg, kubeconfig, NULL, &diag);
        if (rc)
                fail_msg("kubeconfig: %s", diag.msg);
        rc = tsr_kube_client_new(&cfg, NULL, &w->client, &diag);
        tsr_kube_config_release(&cfg);
        if (rc)
                fail_msg("client: %s", diag.msg);
}

/* What both worlds start with. */
static void world_objects(struct world *w)
{
        create_it(w, "alpha", "team-a-lq", 1);
        create_it(w, "beta", NULL, 1);
        create_it(w, "delta", NULL, 1);
        create_cq(w, "cq");
        create_lq(w, "team-a", "lq1");
        create_lq(w, "team-b", "lq1");
}

static json_t *lists_before; /* the real server's counters before the real cache started */

static int group_setup(void **state)
{
        struct cluster_opts o = {.suite = "kube-cache", .crds = true, .kueue_crds = true};
        const char *kc;

        (void)state;
        /* The real world. */
        cluster_start(&C, &o);
        for (const char *const *ns = (const char *const[]){"team-a", "team-b", "ml", "other", NULL};
             *ns; ns++)
                cluster_namespace(&C, *ns);
        snprintf(R.token_file, sizeof(R.token_file), "%s",
                 cluster_write_file(&C, "token", C.token));
        kc = cluster_kubeconfig(&C, "kubeconfig", R.token_file, NULL, NULL);
        world_client(&R, kc);
        world_objects(&R);
        lists_before = cluster_request_counts(&C);
        start_cache(&R, &R.cache);

        /* The fake world, for the faults. */
        fake_certs(FW.dir, sizeof(FW.dir));
        fake_start(&F, FW.dir, "t1", 0.2, NULL);
        snprintf(FW.token_file, sizeof(FW.token_file), "%s",
                 fake_write_file(FW.dir, "token", "t1\n"));
        kc = fake_kubeconfig(&F, "kubeconfig", FW.token_file, NULL);
        world_client(&FW, kc);
        world_objects(&FW);
        start_cache(&FW, &FW.cache);
        if (!tsr_kube_cache_wait_synced(FW.cache, WAIT_MS))
                fail_msg("the fake world's cache did not sync");
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        tsr_kube_cache_free(R.cache);
        tsr_kube_client_free(R.client);
        tsr_kube_cache_free(FW.cache);
        tsr_kube_client_free(FW.client);
        fake_stop(&F);
        fake_remove_dir(FW.dir);
        json_decref(lists_before);
        return 0; /* main stops the control plane, knowing whether a case failed */
}

/* ---- the real server ------------------------------------------------------------------------ */

static void test_initial_sync(void **state)
{
        static const char *const its[] = {"instancetypes", NULL};
        struct tsr_kube_cache_stats s;
        json_t *o;

        (void)state;
        assert_true(tsr_kube_cache_wait_synced(R.cache, WAIT_MS));
        assert_true(tsr_kube_cache_synced(R.cache));
        assert_true(has_it(&R, "alpha") && has_it(&R, "beta") && has_it(&R, "delta"));
        assert_false(has_it(&R, "gamma"));
        assert_null(tsr_kube_cache_instancetype(R.cache, NULL));

        o = tsr_kube_cache_clusterqueue(R.cache, "cq");
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "kind")), "ClusterQueue");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(o, "spec"), "cohortName")), "c");
        json_decref(o);
        assert_null(tsr_kube_cache_clusterqueue(R.cache, "alpha"));

        o = tsr_kube_cache_localqueue(R.cache, "team-b", "lq1");
        assert_non_null(o);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(o, "metadata"), "namespace")),
            "team-b");
        json_decref(o);
        assert_null(tsr_kube_cache_localqueue(R.cache, "team-c", "lq1"));
        assert_null(tsr_kube_cache_localqueue(R.cache, NULL, "lq1"));

        s = stats(&R, TSR_KUBE_CACHE_INSTANCETYPES);
        assert_true(s.synced);
        assert_int_equal(s.objects, 3);
        assert_int_equal(s.lists, 1);
        assert_int_equal(s.relists_gone, 0);
        assert_int_equal(stats(&R, TSR_KUBE_CACHE_LOCALQUEUES).objects, 2);
        /* Three InstanceTypes at two a page: the list took two requests. */
        o = cluster_request_delta(&C, lists_before, its);
        assert_int_equal(json_integer_value(json_object_get(o, "LIST instancetypes 200")), 2);
        json_decref(o);

        /* The default mask is the webhook's: no Pods. */
        s = stats(&R, TSR_KUBE_CACHE_PODS);
        assert_false(s.synced);
        assert_int_equal(s.lists + s.watches, 0);
        o = tsr_kube_cache_pods(R.cache);
        assert_int_equal(json_array_size(o), 0);
        json_decref(o);
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++)
                if (webhook_watched(r))
                        EVENTUALLY(stats(&R, (enum tsr_kube_cache_resource)r).watches >= 1,
                                   "one watch per webhook resource");
        o = cluster_request_delta(&C, lists_before, (const char *const[]){"pods", NULL});
        assert_int_equal(cluster_delta_total(o), 0);
        json_decref(o);
}

struct reader {
        pthread_t th;
        atomic_bool *stop;
        unsigned long reads;
        bool bad;
};

static void *reader_main(void *arg)
{
        struct reader *r = arg;

        while (!atomic_load(r->stop)) {
                static const char *const names[] = {"alpha", "beta", "gamma", "delta"};
                size_t m;

                for (size_t i = 0; i < 4; i++) {
                        json_t *o = tsr_kube_cache_instancetype(R.cache, names[i]);
                        const char *name = json_string_value(
                            json_object_get(json_object_get(o, "metadata"), "name"));

                        if (o && (!name || strcmp(name, names[i])))
                                r->bad = true;
                        json_decref(o);
                }
                json_decref(tsr_kube_cache_instancetype_by_entrance(R.cache, "team-a-lq", &m));
                json_decref(tsr_kube_cache_localqueue(R.cache, "team-a", "lq1"));
                r->reads++;
                sleep_ms(1); /* leave the CPUs to the servers */
        }
        return NULL;
}

static void test_events(void **state)
{
        struct reader readers[4];
        atomic_bool stop;
        json_t *before;

        (void)state;
        atomic_init(&stop, false);
        for (int i = 0; i < 4; i++) {
                memset(&readers[i], 0, sizeof(readers[i]));
                readers[i].stop = &stop;
                assert_int_equal(pthread_create(&readers[i].th, NULL, reader_main, &readers[i]), 0);
        }

        create_it(&R, "gamma", NULL, 1);
        EVENTUALLY(has_it(&R, "gamma"), "ADDED gamma reaches the cache");

        before = tsr_kube_cache_instancetype(R.cache, "gamma");
        for (int n = 2; n <= 8; n++) {
                char patch[64];

                snprintf(patch, sizeof(patch), "{\"spec\":{\"memory\":%d}}", n);
                patch_it(&R, "gamma", patch);
        }
        EVENTUALLY(it_n(&R, "gamma") == 8, "MODIFIED gamma (memory 8) reaches the cache");
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(before, "spec"), "memory")), 1);
        json_decref(before);

        delete_it(&R, "gamma");
        EVENTUALLY(!has_it(&R, "gamma"), "DELETED gamma leaves the cache");

        create_cq(&R, "cq2");
        create_lq(&R, "team-a", "lq2");
        EVENTUALLY(has_cq(&R, "cq2"), "a new ClusterQueue reaches the cache");
        EVENTUALLY(has_lq(&R, "team-a", "lq2"), "a new LocalQueue reaches the cache");
        assert_int_equal(stats(&R, TSR_KUBE_CACHE_LOCALQUEUES).objects, 3);
        assert_false(has_lq(&R, "team-b", "lq2"));

        atomic_store(&stop, true);
        for (int i = 0; i < 4; i++) {
                pthread_join(readers[i].th, NULL);
                assert_false(readers[i].bad);
                assert_true(readers[i].reads > 0);
        }
        assert_int_equal(stats(&R, TSR_KUBE_CACHE_INSTANCETYPES).lists, 1);
        assert_true(stats(&R, TSR_KUBE_CACHE_INSTANCETYPES).events >= 9);
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                struct tsr_kube_cache_stats st = stats(&R, (enum tsr_kube_cache_resource)r);

                if (webhook_watched(r))
                        print_message("# %s: lists %lu watches %lu failures %lu events %lu "
                                      "rv %s%s%s\n",
                                      tsr_kube_cache_resource_name((enum tsr_kube_cache_resource)r),
                                      st.lists, st.watches, st.watch_failures, st.events,
                                      st.resource_version, st.last_error[0] ? " last error: " : "",
                                      st.last_error);
        }
}

/* Mirrors the InstanceTypes into mirror; returns the keys changed, as "a,b" in their order. */
static void mirror_changes(json_t *mirror, char *out, size_t len)
{
        json_t *changed = json_array(), *k;
        size_t i, o = 0;

        assert_int_equal(
            tsr_kube_cache_mirror(R.cache, TSR_KUBE_CACHE_INSTANCETYPES, mirror, changed), 0);
        out[0] = '\0';
        json_array_foreach(changed, i, k) o +=
            (size_t)snprintf(out + o, len - o, "%s%s", i ? "," : "", json_string_value(k));
        json_decref(changed);
}

/* The mirror equals what the cache lists: the same keys, each with an equal object. */
static void assert_mirror_is_cache(json_t *mirror)
{
        json_t *list = tsr_kube_cache_list(R.cache, TSR_KUBE_CACHE_INSTANCETYPES), *o;
        size_t i;

        assert_int_equal(json_object_size(mirror), json_array_size(list));
        json_array_foreach(list, i, o)
        {
                const char *name =
                    json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));

                assert_true(json_equal(json_object_get(mirror, name), o));
        }
        json_decref(list);
}

/*
 * A mirror copies only what changed: the first call takes every object, a call with nothing new
 * changes nothing, an update or a deletion changes that one key; the generation moves with every
 * change and stays while nothing changes.
 */
static void test_mirror(void **state)
{
        json_t *mirror = json_object();
        unsigned long g0, g1;
        char keys[512];

        (void)state;
        mirror_changes(mirror, keys, sizeof(keys));
        assert_true(json_object_size(mirror) > 0);
        assert_mirror_is_cache(mirror);
        g0 = tsr_kube_cache_generation(R.cache, TSR_KUBE_CACHE_INSTANCETYPES);
        mirror_changes(mirror, keys, sizeof(keys));
        assert_string_equal(keys, "");
        assert_int_equal(tsr_kube_cache_generation(R.cache, TSR_KUBE_CACHE_INSTANCETYPES), g0);

        create_it(&R, "mu", NULL, 1);
        EVENTUALLY(has_it(&R, "mu"), "ADDED mu reaches the cache");
        g1 = tsr_kube_cache_generation(R.cache, TSR_KUBE_CACHE_INSTANCETYPES);
        assert_true(g1 > g0);
        mirror_changes(mirror, keys, sizeof(keys));
        assert_string_equal(keys, "mu");
        patch_it(&R, "mu", "{\"spec\":{\"memory\":2}}");
        EVENTUALLY(it_n(&R, "mu") == 2, "MODIFIED mu reaches the cache");
        assert_true(tsr_kube_cache_generation(R.cache, TSR_KUBE_CACHE_INSTANCETYPES) > g1);
        mirror_changes(mirror, keys, sizeof(keys));
        assert_string_equal(keys, "mu");
        assert_mirror_is_cache(mirror);
        delete_it(&R, "mu");
        EVENTUALLY(!has_it(&R, "mu"), "DELETED mu leaves the cache");
        mirror_changes(mirror, keys, sizeof(keys));
        assert_string_equal(keys, "mu");
        assert_null(json_object_get(mirror, "mu"));
        assert_mirror_is_cache(mirror);
        assert_int_equal(tsr_kube_cache_mirror(R.cache, TSR_KUBE_CACHE_INSTANCETYPES, mirror, NULL),
                         TSR_EINVAL);
        json_decref(mirror);
}

static size_t entrance(const char *lq, const char *want)
{
        size_t m = 99;
        json_t *o = tsr_kube_cache_instancetype_by_entrance(R.cache, lq, &m);

        if (want) {
                assert_non_null(o);
                assert_string_equal(
                    json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                    want);
        } else {
                assert_null(o);
        }
        json_decref(o);
        return m;
}

static void test_entrance(void **state)
{
        size_t before;

        (void)state;
        assert_int_equal(entrance("nobody", NULL), 0);
        assert_int_equal(entrance("team-a-lq", "alpha"), 1);
        json_decref(tsr_kube_cache_instancetype_by_entrance(R.cache, "team-a-lq", NULL));

        patch_it(&R, "beta",
                 "{\"metadata\":{\"labels\":{\"schedule.gpustack.ai/queue-entrance\":"
                 "\"team-a-lq\"}}}");
        EVENTUALLY(
            (json_decref(tsr_kube_cache_instancetype_by_entrance(R.cache, "team-a-lq", &before)),
             before == 2),
            "a second InstanceType with the same entrance label");
        assert_int_equal(entrance("team-a-lq", NULL), 2);

        patch_it(&R, "alpha",
                 "{\"metadata\":{\"labels\":{\"schedule.gpustack.ai/queue-entrance\":"
                 "null}}}");
        EVENTUALLY(
            (json_decref(tsr_kube_cache_instancetype_by_entrance(R.cache, "team-a-lq", &before)),
             before == 1),
            "alpha loses the label");
        assert_int_equal(entrance("team-a-lq", "beta"), 1);
        assert_null(tsr_kube_cache_instancetype_by_entrance(R.cache, NULL, &before));
        assert_int_equal(before, 0);
}

/* ---- a node agent's cache: the Pods of one node -----------------------------------------------
 */

struct changes {
        struct tsr_kube_cache *cache; /* new's *out: set before the first callback can run */
        atomic_ulong n[TSR_KUBE_CACHE_N_RESOURCES];
        atomic_ulong reads;   /* snapshots the callback took */
        atomic_ulong unbound; /* callbacks that found the stored pointer still NULL */
};

static void on_change(void *ctx, enum tsr_kube_cache_resource r)
{
        struct changes *ch = ctx;

        atomic_fetch_add(&ch->n[r], 1);
        if (!ch->cache) {
                atomic_fetch_add(&ch->unbound, 1);
                return;
        }
        json_decref(tsr_kube_cache_pods(ch->cache)); /* would deadlock under the cache's lock */
        atomic_fetch_add(&ch->reads, 1);
}

/* Creates Pod ns/name on node (NULL: unscheduled); returns its uid (static storage). */
static const char *create_pod(const char *ns, const char *name, const char *node)
{
        static char uid[64];
        char path[128], buf[512];
        json_t *o;

        snprintf(path, sizeof(path), POD_NS "%s/pods", ns);
        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},"
                 "\"spec\":{%s%s%s\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}",
                 name, node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "");
        o = cluster_create(&C, path, buf);
        snprintf(uid, sizeof(uid), "%s",
                 json_string_value(json_object_get(json_object_get(o, "metadata"), "uid")));
        json_decref(o);
        return uid;
}

static bool has_pod(struct tsr_kube_cache *c, const char *ns, const char *name)
{
        json_t *o = tsr_kube_cache_pod(c, ns, name);

        json_decref(o);
        return o != NULL;
}

static const char *pod_label(struct tsr_kube_cache *c, const char *ns, const char *name)
{
        static char v[64];
        json_t *o = tsr_kube_cache_pod(c, ns, name);
        const char *s = json_string_value(
            json_object_get(json_object_get(json_object_get(o, "metadata"), "labels"), "k"));

        snprintf(v, sizeof(v), "%s", s ? s : "");
        json_decref(o);
        return v;
}

static unsigned long changes_of(struct changes *ch, enum tsr_kube_cache_resource r)
{
        return atomic_load(&ch->n[r]);
}

static void test_node_pods(void **state)
{
        struct tsr_kube_cache_opts o = {.backoff_initial_ms = 20,
                                        .backoff_max_ms = 200,
                                        .watch_timeout_s = 30,
                                        .page_limit = 2,
                                        .resources = TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_PODS),
                                        .pods_node = "node-a",
                                        .on_change = on_change};
        static struct changes ch;
        struct tsr_kube_cache *c;
        struct tsr_diag diag;
        char uid1[64], uid2[64];
        unsigned long n0;
        json_t *pods, *p;
        size_t i;

        (void)state;
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++)
                atomic_init(&ch.n[r], 0);
        atomic_init(&ch.reads, 0);
        atomic_init(&ch.unbound, 0);
        ch.cache = NULL;
        o.ctx = &ch;
        snprintf(uid1, sizeof(uid1), "%s", create_pod("ml", "p1", "node-a"));
        snprintf(uid2, sizeof(uid2), "%s", create_pod("ml", "p2", "node-b"));
        create_pod("ml", "p3", NULL);
        create_pod("other", "p4", "node-a");
        create_pod("other", "p5", "node-a-2");

        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_cache_new_opts(R.client, &o, &ch.cache, &diag), 0);
        c = ch.cache;
        assert_true(tsr_kube_cache_wait_synced(c, WAIT_MS));

        /* The list: this node's Pods of every namespace, nobody else's. */
        pods = tsr_kube_cache_pods(c);
        assert_int_equal(json_array_size(pods), 2);
        json_array_foreach(pods, i, p)
        {
                json_t *spec = json_object_get(p, "spec");

                assert_string_equal(json_string_value(json_object_get(spec, "nodeName")), "node-a");
        }
        json_decref(pods);
        assert_true(has_pod(c, "ml", "p1") && has_pod(c, "other", "p4"));
        assert_false(has_pod(c, "ml", "p2") || has_pod(c, "ml", "p3") || has_pod(c, "other", "p5"));
        assert_false(has_pod(c, NULL, "p1"));
        p = tsr_kube_cache_pod_by_uid(c, uid1);
        assert_non_null(p);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(p, "metadata"), "name")), "p1");
        json_decref(p);
        assert_null(tsr_kube_cache_pod_by_uid(c, uid2));
        assert_null(tsr_kube_cache_pod_by_uid(c, NULL));
        EVENTUALLY(changes_of(&ch, TSR_KUBE_CACHE_PODS) >= 1, "the first list calls back");

        /* Only the Pods are watched. */
        assert_null(tsr_kube_cache_instancetype(c, "alpha"));
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++) {
                struct tsr_kube_cache_stats st;

                tsr_kube_cache_stats(c, (enum tsr_kube_cache_resource)r, &st);
                if (r == TSR_KUBE_CACHE_PODS)
                        continue;
                assert_int_equal(st.lists + st.watches, 0);
                assert_int_equal(changes_of(&ch, (enum tsr_kube_cache_resource)r), 0);
        }

        /* ADDED: another node's Pod never shows; a later one of ours does, so the first passed. */
        n0 = changes_of(&ch, TSR_KUBE_CACHE_PODS);
        create_pod("ml", "p6", "node-b");
        create_pod("ml", "p7", "node-a");
        EVENTUALLY(has_pod(c, "ml", "p7"), "ADDED p7 reaches the cache");
        assert_false(has_pod(c, "ml", "p6"));
        EVENTUALLY(changes_of(&ch, TSR_KUBE_CACHE_PODS) > n0, "ADDED calls back");

        /* MODIFIED. */
        n0 = changes_of(&ch, TSR_KUBE_CACHE_PODS);
        json_decref(
            cluster_patch(&C, POD_NS "ml/pods/p7", "{\"metadata\":{\"labels\":{\"k\":\"v\"}}}"));
        EVENTUALLY(!strcmp(pod_label(c, "ml", "p7"), "v"), "MODIFIED p7 reaches the cache");
        EVENTUALLY(changes_of(&ch, TSR_KUBE_CACHE_PODS) > n0, "MODIFIED calls back");

        /* Another node's Pod changing calls nothing back. */
        n0 = changes_of(&ch, TSR_KUBE_CACHE_PODS);
        json_decref(
            cluster_patch(&C, POD_NS "ml/pods/p6", "{\"metadata\":{\"labels\":{\"k\":\"v\"}}}"));
        cluster_delete(&C, POD_NS "ml/pods/p6");
        json_decref(
            cluster_patch(&C, POD_NS "ml/pods/p7", "{\"metadata\":{\"labels\":{\"k\":\"w\"}}}"));
        EVENTUALLY(!strcmp(pod_label(c, "ml", "p7"), "w"), "the second MODIFIED of p7");
        EVENTUALLY(changes_of(&ch, TSR_KUBE_CACHE_PODS) >= n0 + 1, "MODIFIED calls back");
        assert_int_equal(changes_of(&ch, TSR_KUBE_CACHE_PODS), n0 + 1);

        /* DELETED (at once: no kubelet here to finish a graceful deletion). */
        n0 = changes_of(&ch, TSR_KUBE_CACHE_PODS);
        cluster_delete(&C, POD_NS "ml/pods/p7");
        EVENTUALLY(!has_pod(c, "ml", "p7"), "DELETED p7 leaves the cache");
        EVENTUALLY(changes_of(&ch, TSR_KUBE_CACHE_PODS) > n0, "DELETED calls back");
        assert_true(atomic_load(&ch.reads) > 0);
        assert_int_equal(atomic_load(&ch.unbound), 0); /* every callback reached the cache */

        tsr_kube_cache_free(c);
        for (const char *const *q =
                 (const char *const[]){POD_NS "ml/pods/p1", POD_NS "ml/pods/p2",
                                       POD_NS "ml/pods/p3", POD_NS "other/pods/p4",
                                       POD_NS "other/pods/p5", NULL};
             *q; q++)
                cluster_delete(&C, *q);
}

static void test_bad_opts(void **state)
{
        struct tsr_kube_cache_opts o = {.resources = TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_PODS)};
        struct tsr_kube_cache *c = NULL;
        struct tsr_diag diag;

        (void)state;
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_cache_new_opts(R.client, &o, &c, &diag), TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "node name"));
        o.pods_node = "a,b";
        assert_int_equal(tsr_kube_cache_new_opts(R.client, &o, &c, &diag), TSR_EINVAL);
        o.pods_node = "node-a";
        o.resources = 1u << TSR_KUBE_CACHE_N_RESOURCES;
        assert_int_equal(tsr_kube_cache_new_opts(R.client, &o, &c, &diag), TSR_EINVAL);
        assert_null(c);
}

static long time_free(struct tsr_kube_cache *c)
{
        long t0 = now_ms();

        tsr_kube_cache_free(c);
        return now_ms() - t0;
}

static void test_shutdown_idle(void **state)
{
        struct tsr_kube_cache *c;
        long ms;

        (void)state;
        start_cache(&R, &c);
        assert_true(tsr_kube_cache_wait_synced(c, WAIT_MS));
        sleep_ms(100);
        ms = time_free(c);
        print_message("# free with open watches: %ld ms\n", ms);
        assert_true(ms < 500);
}

/* ---- the fake: faults ------------------------------------------------------------------------ */

static void test_bookmarks(void **state)
{
        struct tsr_kube_cache_stats s0 = stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES);
        long rv;

        (void)state;
        create_cq(&FW, "cq3"); /* moves the global resourceVersion; no InstanceType event */
        rv = fake_stat(&F, "rv");
        EVENTUALLY(rv_is(&FW, TSR_KUBE_CACHE_INSTANCETYPES, rv),
                   "a BOOKMARK moves the InstanceType watcher to the ClusterQueue's version");
        assert_true(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).bookmarks > s0.bookmarks);
        assert_int_equal(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).events, s0.events);

        /* Resuming from a bookmark needs no list even after a compaction at that version. */
        json_decref(fake_control(&F, "compact", NULL));
        json_decref(fake_control(&F, "drop", NULL));
        EVENTUALLY(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).watches > s0.watches + 0 &&
                       fake_stat(&F, "active_watches") == WEBHOOK_WATCHERS,
                   "the watches reconnect");
        create_it(&FW, "epsilon", NULL, 1);
        EVENTUALLY(has_it(&FW, "epsilon"), "a change after the reconnect");
        assert_int_equal(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).relists_gone, 0);
}

/* Holds watches, cuts them, changes objects, compacts, releases: every watcher gets a 410. */
static void compaction_round(const char *mode, const char *add, const char *del)
{
        struct tsr_kube_cache_stats s0[TSR_KUBE_CACHE_N_RESOURCES];
        char body[64];

        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++)
                s0[r] = stats(&FW, (enum tsr_kube_cache_resource)r);
        snprintf(body, sizeof(body), "{\"mode\":\"%s\"}", mode);
        json_decref(fake_control(&F, "watch410", body));
        json_decref(fake_control(&F, "pause", "{\"paused\":true}"));
        json_decref(fake_control(&F, "drop", NULL));
        EVENTUALLY(fake_stat(&F, "active_watches") == 0, "the watches are cut");
        create_it(&FW, add, NULL, 1);
        delete_it(&FW, del);
        patch_it(&FW, "delta", "{\"spec\":{\"memory\":42}}");
        create_cq(&FW, "cq-during");
        json_decref(fake_control(&F, "compact", NULL));
        json_decref(fake_control(&F, "pause", "{\"paused\":false}"));

        EVENTUALLY(has_it(&FW, add) && !has_it(&FW, del) && it_n(&FW, "delta") == 42,
                   "the cache converges after the 410 re-list");
        for (int r = 0; r < TSR_KUBE_CACHE_N_RESOURCES; r++)
                if (webhook_watched(r))
                        EVENTUALLY(stats(&FW, (enum tsr_kube_cache_resource)r).relists_gone ==
                                       s0[r].relists_gone + 1,
                                   "each watcher re-lists once after its 410");
        EVENTUALLY(has_cq(&FW, "cq-during"), "ClusterQueues converge");
        delete_it(&FW, add);
        patch_it(&FW, "delta", "{\"spec\":{\"memory\":1}}");
        fake_delete(&F, CQ_PATH "/cq-during");
        json_decref(fake_control(&F, "watch410", "{\"mode\":\"event\"}"));
        EVENTUALLY(!has_it(&FW, add) && it_n(&FW, "delta") == 1,
                   "the cache follows after the re-list");
}

static void test_compaction_event(void **state)
{
        (void)state;
        compaction_round("event", "zeta", "epsilon");
}

static void test_compaction_http(void **state)
{
        (void)state;
        create_it(&FW, "eta", NULL, 1);
        compaction_round("http", "theta", "eta");
}

static void test_expire_mid_stream(void **state)
{
        struct tsr_kube_cache_stats s0 = stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES);

        (void)state;
        json_decref(fake_control(&F, "expire", NULL));
        EVENTUALLY(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).relists_gone == s0.relists_gone + 1,
                   "an ERROR 410 on a live watch re-lists");
        create_it(&FW, "iota", NULL, 1);
        EVENTUALLY(has_it(&FW, "iota"), "the cache follows after the re-list");
}

/*
 * A relist after a 410 that fails keeps the cache synced and serving what it held, but the
 * resource is stale and the cache not current until that relist completes.
 */
static void test_stale_until_relisted(void **state)
{
        (void)state;
        json_decref(fake_control(&F, "fail",
                                 "{\"status\":500,\"count\":-1,\"method\":\"GET\","
                                 "\"watch\":false,\"match\":\"instancetypes\"}"));
        json_decref(fake_control(&F, "expire", "{\"match\":\"instancetypes\"}"));
        EVENTUALLY(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).stale, "a 410 makes it stale");
        sleep_ms(300);
        assert_true(tsr_kube_cache_synced(FW.cache));
        assert_false(tsr_kube_cache_current(FW.cache));
        assert_true(has_it(&FW, "iota"));
        assert_non_null(strstr(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).last_error, "500"));
        json_decref(fake_control(&F, "unfail", NULL));
        EVENTUALLY(tsr_kube_cache_current(FW.cache), "current once the relist completes");
        assert_false(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).stale);
}

static void test_dropped_watch(void **state)
{
        struct tsr_kube_cache_stats s0 = stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES);
        long dropped = fake_stat(&F, "dropped");

        (void)state;
        json_decref(fake_control(&F, "drop", NULL));
        EVENTUALLY(fake_stat(&F, "dropped") >= dropped + 3, "three watches dropped");
        create_it(&FW, "kappa", NULL, 1);
        EVENTUALLY(has_it(&FW, "kappa"), "a change after the reconnect");
        assert_true(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).watches > s0.watches);
        assert_true(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).watch_failures > s0.watch_failures);
        assert_int_equal(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).lists, s0.lists);
}

static void test_failures_backoff(void **state)
{
        struct tsr_kube_cache_stats s0 = stats(&FW, TSR_KUBE_CACHE_CLUSTERQUEUES);

        (void)state;
        json_decref(
            fake_control(&F, "fail", "{\"status\":500,\"count\":3,\"match\":\"clusterqueues\"}"));
        json_decref(fake_control(&F, "drop", NULL));
        EVENTUALLY(stats(&FW, TSR_KUBE_CACHE_CLUSTERQUEUES).watch_failures >= s0.watch_failures + 4,
                   "the cut and three 500s count as failures");
        create_cq(&FW, "cq-after-500");
        EVENTUALLY(has_cq(&FW, "cq-after-500"), "the ClusterQueue watcher recovers");
        assert_non_null(strstr(stats(&FW, TSR_KUBE_CACHE_CLUSTERQUEUES).last_error, "500"));
}

/*
 * A server answering every watch 410 (the relist works, the watch after it is gone again): the
 * watcher relists at once the first time, then backs off (this world's 20 ms doubling to 200 ms),
 * instead of listing in a tight loop (hundreds a second before); the resource is stale meanwhile
 * and the metrics say so; it recovers once the watches answer.
 */
static bool cache_has_cq(struct tsr_kube_cache *c, const char *name)
{
        json_t *cq = tsr_kube_cache_clusterqueue(c, name);

        json_decref(cq);
        return cq != NULL;
}

static struct tsr_kube_cache_stats stats_of(struct tsr_kube_cache *c,
                                            enum tsr_kube_cache_resource r)
{
        struct tsr_kube_cache_stats st;

        tsr_kube_cache_stats(c, r, &st);
        return st;
}

/* Whether the metrics show the clusterqueues watch stale for some time already (not 0.000 s). */
static bool cq_stale_for_a_while(struct tsr_kube_cache *c)
{
        struct tsr_buf m = TSR_BUF_INIT;
        const char *at;
        bool yes;

        assert_int_equal(tsr_kube_cache_render_metrics(c, &m), 0);
        at = strstr(m.ptr, "tessera_kube_watch_stale_seconds{resource=\"clusterqueues\"} ");
        yes = at && strncmp(at + strlen("tessera_kube_watch_stale_seconds{resource="
                                        "\"clusterqueues\"} "),
                            "0.000", 5);
        tsr_buf_release(&m);
        return yes;
}

static bool cache_healthy(struct tsr_kube_cache *c, enum tsr_kube_cache_resource r)
{
        struct tsr_kube_cache_stats st = stats_of(c, r);

        return !st.stale && st.seconds_failing == 0;
}

/* A cache of the fake world's client with options o, synced. */
static struct tsr_kube_cache *own_cache(const struct tsr_kube_cache_opts *o)
{
        struct tsr_kube_cache *c;
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_cache_new_opts(FW.client, o, &c, &diag), 0);
        assert_true(tsr_kube_cache_wait_synced(c, WAIT_MS));
        return c;
}

static void test_gone_every_watch_backs_off(void **state)
{
        /* Its own cache, ClusterQueues only, with a backoff that shows against the fake's pace. */
        struct tsr_kube_cache_opts o = {.backoff_initial_ms = 250,
                                        .backoff_max_ms = 2000,
                                        .watch_timeout_s = 30,
                                        .page_limit = 2,
                                        .resources =
                                            TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_CLUSTERQUEUES)};
        enum tsr_kube_cache_resource cq = TSR_KUBE_CACHE_CLUSTERQUEUES;
        struct tsr_kube_cache_stats s0, st;
        struct tsr_buf m = TSR_BUF_INIT;
        struct tsr_kube_cache *c;
        unsigned long lists;

        (void)state;
        c = own_cache(&o);
        tsr_kube_cache_stats(c, cq, &s0);
        json_decref(fake_control(&F, "fail",
                                 "{\"status\":410,\"count\":-1,\"watch\":true,"
                                 "\"match\":\"clusterqueues\"}"));
        json_decref(fake_control(&F, "drop", "{\"match\":\"clusterqueues\"}"));
        sleep_ms(3000);
        tsr_kube_cache_stats(c, cq, &st);
        lists = st.lists - s0.lists;
        printf("# 410 on every watch: %lu lists in 3 s (backoff 250 ms doubling)\n", lists);
        if (lists < 2 || lists > 6)
                fail_msg("%lu lists in 3 s while every watch is 410: want 2..6 (backoff)", lists);
        assert_true(st.seconds_failing > 1.0); /* failing the whole time, though it lists */
        assert_int_equal(tsr_kube_cache_render_metrics(c, &m), 0);
        assert_non_null(
            strstr(m.ptr, "tessera_kube_watch_relists_gone_total{resource=\"clusterqueues\"}"));
        assert_non_null(strstr(m.ptr, "# TYPE tessera_kube_watch_progress_age_seconds gauge"));
        assert_null(strstr(m.ptr, "resource=\"instancetypes\"")); /* not watched here */
        tsr_buf_release(&m);
        json_decref(fake_control(&F, "unfail", NULL));
        create_cq(&FW, "cq-after-410s");
        EVENTUALLY(cache_has_cq(c, "cq-after-410s"), "the watcher recovers once watches answer");
        EVENTUALLY(cache_healthy(c, cq), "current, and healthy once its watch lasts");
        tsr_kube_cache_free(c);
}

/*
 * A watch that brings nothing, not even the bookmarks a real watch cache sends a minute (here
 * every 0.2 s), is cut after the stall limit (2 s here; 150 s by default) instead of the watch's
 * timeout plus a margin: counted, logged as the last error, the resource stale (not current)
 * until the watch delivers again, which it does from the resume point without a list; held back
 * events arrive. A watch request the server holds unanswered stalls the same way.
 */
static int stalled_setup(void **state)
{
        struct tsr_kube_cache_opts o = {.backoff_initial_ms = 20,
                                        .backoff_max_ms = 200,
                                        .watch_timeout_s = 30,
                                        .watch_stall_s = STALL_S,
                                        .resources =
                                            TSR_KUBE_CACHE_BIT(TSR_KUBE_CACHE_CLUSTERQUEUES)};

        *state = own_cache(&o);
        return 0;
}

static int stalled_teardown(void **state)
{
        tsr_kube_cache_free(*state); /* also when the test failed: no watcher outlives it */
        json_decref(fake_control(&F, "mute", "{\"muted\":false}"));
        json_decref(fake_control(&F, "pause", "{\"paused\":false}"));
        return 0;
}

static void test_stalled_watch(void **state)
{
        struct tsr_kube_cache *c = *state;
        enum tsr_kube_cache_resource cq = TSR_KUBE_CACHE_CLUSTERQUEUES;
        struct tsr_kube_cache_stats s0, st;
        struct tsr_buf m = TSR_BUF_INIT;

        /* The fake's bookmarks (every 0.2 s) keep the quiet watch alive. */
        EVENTUALLY(tsr_kube_cache_current(c), "current before the silence");
        tsr_kube_cache_stats(c, cq, &s0);

        /* Connected, its headers sent, then silence. */
        json_decref(fake_control(&F, "mute", "{\"muted\":true,\"match\":\"clusterqueues\"}"));
        create_cq(&FW, "cq-muted");
        EVENTUALLY(stats_of(c, cq).stalls > s0.stalls, "the silent watch is cut as stalled");
        tsr_kube_cache_stats(c, cq, &st);
        assert_true(st.stale);
        assert_false(tsr_kube_cache_current(c));
        assert_true(tsr_kube_cache_synced(c)); /* it serves what it held */
        assert_non_null(strstr(st.last_error, "stalled: nothing received for " STALL_S_TEXT));
        assert_false(cache_has_cq(c, "cq-muted"));
        assert_int_equal(tsr_kube_cache_render_metrics(c, &m), 0);
        assert_non_null(
            strstr(m.ptr, "tessera_kube_watch_stalls_total{resource=\"clusterqueues\"} "));
        tsr_buf_release(&m);
        /* the stale time counts from the stall (sampled at once it may still read 0.000) */
        EVENTUALLY(cq_stale_for_a_while(c), "the stale seconds grow while the watch is stale");
        json_decref(fake_control(&F, "mute", "{\"muted\":false}"));
        EVENTUALLY(cache_has_cq(c, "cq-muted"), "the held-back event arrives after the stall");
        EVENTUALLY(tsr_kube_cache_current(c), "current again once the watch delivers");
        assert_int_equal(stats_of(c, cq).lists, s0.lists); /* resumed, not listed */

        /* A watch request the server holds, no headers at all. */
        tsr_kube_cache_stats(c, cq, &s0);
        json_decref(fake_control(&F, "pause", "{\"paused\":true,\"match\":\"clusterqueues\"}"));
        json_decref(fake_control(&F, "drop", "{\"match\":\"clusterqueues\"}"));
        EVENTUALLY(stats_of(c, cq).stalls >= s0.stalls + 1, "a held watch request stalls too");
        assert_false(tsr_kube_cache_current(c));
        json_decref(fake_control(&F, "pause", "{\"paused\":false}"));
        create_cq(&FW, "cq-unheld");
        EVENTUALLY(cache_has_cq(c, "cq-unheld"), "the watcher recovers once answered");
        EVENTUALLY(tsr_kube_cache_current(c), "and is current again");
        fake_delete(&F, CQ_PATH "/cq-muted");
        fake_delete(&F, CQ_PATH "/cq-unheld");
}

/*
 * A 404 after the first list (an API server restarting before its CRD handlers are up) keeps what
 * the cache holds and sends the watcher back to list; the cache stays synced and recovers.
 */
static void test_not_found_later_keeps_objects(void **state)
{
        struct tsr_kube_cache_stats s0 = stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES);

        (void)state;
        create_it(&FW, "nu", NULL, 1);
        EVENTUALLY(has_it(&FW, "nu"), "nu reaches the cache");
        json_decref(
            fake_control(&F, "fail", "{\"status\":404,\"count\":3,\"match\":\"instancetypes\"}"));
        json_decref(fake_control(&F, "drop", NULL));
        EVENTUALLY(strstr(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).last_error, "404") != NULL,
                   "the watcher meets the 404s");
        assert_true(has_it(&FW, "nu"));
        assert_true(tsr_kube_cache_synced(FW.cache));
        EVENTUALLY(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).lists > s0.lists,
                   "a 404 on the watch sends the watcher back to list");
        create_it(&FW, "xi", NULL, 1);
        EVENTUALLY(has_it(&FW, "xi") && has_it(&FW, "nu"), "the watcher recovers, nothing lost");
        delete_it(&FW, "xi");
        delete_it(&FW, "nu");
}

static void test_token_rotation(void **state)
{
        struct tsr_kube_cache_stats s0 = stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES);
        long failures0 = fake_stat(&F, "auth_failures");

        (void)state;
        json_decref(fake_control(&F, "token", "{\"tokens\":[\"t2\",\"" FAKE_CTL_TOKEN "\"]}"));
        json_decref(fake_control(&F, "drop", NULL));
        EVENTUALLY(fake_stat(&F, "auth_failures") >= failures0 + 3,
                   "reconnects with the old token are refused");
        create_it(&FW, "lambda", NULL, 1);
        sleep_ms(100);
        assert_false(has_it(&FW, "lambda"));
        assert_non_null(strstr(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).last_error, "401"));
        assert_true(tsr_kube_cache_synced(FW.cache)); /* it serves what it held */
        EVENTUALLY(!tsr_kube_cache_current(FW.cache), "refused credentials make it stale");

        fake_write_file(FW.dir, "token", "t2\n");
        EVENTUALLY(has_it(&FW, "lambda"), "the cache recovers with the rotated token");
        EVENTUALLY(tsr_kube_cache_current(FW.cache), "current again once it has listed");
        EVENTUALLY(fake_stat(&F, "active_watches") == WEBHOOK_WATCHERS,
                   "every watcher watches again");
        assert_true(stats(&FW, TSR_KUBE_CACHE_INSTANCETYPES).watch_failures > s0.watch_failures);
}

static void test_shutdown_held_and_gone(void **state)
{
        struct tsr_kube_cache *c;
        long ms;

        (void)state;
        /* Watch requests held by the server (no response yet). */
        start_cache(&FW, &c);
        assert_true(tsr_kube_cache_wait_synced(c, WAIT_MS));
        json_decref(fake_control(&F, "pause", "{\"paused\":true}"));
        json_decref(fake_control(&F, "expire", NULL));
        sleep_ms(200);
        ms = time_free(c);
        json_decref(fake_control(&F, "pause", "{\"paused\":false}"));
        print_message("# free with held watch requests: %ld ms\n", ms);
        assert_true(ms < 500);

        /* The main cache, then the server gone: free during connect failures and backoff. */
        tsr_kube_cache_free(FW.cache);
        FW.cache = NULL;
        start_cache(&FW, &FW.cache);
        assert_true(tsr_kube_cache_wait_synced(FW.cache, WAIT_MS));
        fake_stop(&F);
        sleep_ms(300);
        assert_true(tsr_kube_cache_synced(FW.cache)); /* stays synced, serves the last state */
        assert_true(has_it(&FW, "lambda"));
        ms = time_free(FW.cache);
        FW.cache = NULL;
        print_message("# free while the server is gone: %ld ms\n", ms);
        assert_true(ms < 500);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_initial_sync),
            cmocka_unit_test(test_events),
            cmocka_unit_test(test_mirror),
            cmocka_unit_test(test_entrance),
            cmocka_unit_test(test_node_pods),
            cmocka_unit_test(test_bad_opts),
            cmocka_unit_test(test_shutdown_idle),
            cmocka_unit_test(test_bookmarks),
            cmocka_unit_test(test_compaction_event),
            cmocka_unit_test(test_compaction_http),
            cmocka_unit_test(test_expire_mid_stream),
            cmocka_unit_test(test_stale_until_relisted),
            cmocka_unit_test(test_dropped_watch),
            cmocka_unit_test(test_failures_backoff),
            cmocka_unit_test(test_gone_every_watch_backs_off),
            cmocka_unit_test_setup_teardown(test_stalled_watch, stalled_setup, stalled_teardown),
            cmocka_unit_test(test_not_found_later_keeps_objects),
            cmocka_unit_test(test_token_rotation),
            cmocka_unit_test(test_shutdown_held_and_gone),
        };
        int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);

        cluster_stop(&C, failed != 0);
        return failed;
}
