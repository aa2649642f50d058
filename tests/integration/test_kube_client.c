/*
 * test_kube_client.c - kube/client against a real kube-apiserver (tests/cluster/controlplane.py,
 * through cluster_apiserver.h: tessera's CRDs installed, users alice and bob with tokens of their
 * own) over TLS on loopback, and against the fake API server (tests/peers/fake_apiserver.py) only
 * for the faults a real server does not make on demand. One of each serves the whole file; the
 * cases use their own objects (label case=<case>).
 *
 * On the real server:
 *   requests        GET of an object; POST create (201), a duplicate is TSR_EEXIST (409
 *                   AlreadyExists), a missing object TSR_ENOTFOUND (404) with the Status message
 *   list            pages with limit + continue are one snapshot (an object made after the first
 *                   page is not on the later ones); list_all joins the pages; a custom
 *                   resource's items carry their kind, a core list's do not and list_all gives
 *                   them the list's; label selectors (escaped), the metadata.name field selector
 *   patch           merge (null deletes), JSON patch (a failed test is TSR_EINVAL / 422 Invalid),
 *                   apply (no field manager: refused before any request, by the server's own
 *                   counters; with one: creates), a strategic merge patch on a CRD is 415; a stale
 *                   resourceVersion is TSR_ESTALE (409 Conflict)
 *   watch           events from a list's resourceVersion in order with their types and versions;
 *                   a callback's stop value comes back; timeoutSeconds ends cleanly (0); no
 *                   bookmarks unless asked; a resourceVersion older than the watch cache ("1")
 *                   is an ERROR event with code 410 (Expired)
 *   bookmark        asked for, a live watch whose label selector filtered a change out gets the
 *                   watch cache's pre-timeout BOOKMARK at a newer version
 *   cancel          a watch without a resourceVersion starts with ADDED for what exists; a cancel
 *                   token fired from another thread then ends the quiet watch at once
 *   auth            a wrong token is 401 (TSR_EIO, res.http 401); RBAC's 403 for alice; the token
 *                   file is re-read on every request (SelfSubjectReview says who the server saw:
 *                   alice, then bob), an unreadable file keeps the last token; the admin client
 *                   certificate from PEM bytes authenticates alone (system:masters)
 *   tls             an unrelated CA fails verification (no HTTP status); insecure-skip works;
 *                   tls-server-name verifies "localhost" while connecting to 127.0.0.1
 *   kubeconfig      ours (tokenFile, namespace) and the control plane's own (client certificate
 *                   files, written by Python as JSON) load and authenticate
 * On the fake, for faults only:
 *   watch 410 http  a watch answered with HTTP 410 is TSR_ESTALE with res.http 410
 *   dropped watch   a watch cut without its end is TSR_EIO with res.http 200
 *   429             Retry-After reaches res.retry_after_s
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/kube_int.h"
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

#define IT_PATH  "/apis/worker.gpustack.ai/v1alpha1/instancetypes"
#define SSR_PATH "/apis/authentication.k8s.io/v1/selfsubjectreviews"

static struct cluster_apiserver C; /* the real API server */
static char fake_dir[256];
static struct fake_apiserver fake; /* the fake, for faults */

static struct tsr_kube_client *client_for(const char *url, const char *token,
                                          const char *token_file, const char *ca)
{
        struct tsr_kube_config cfg;
        struct tsr_kube_client *c;
        struct tsr_diag diag;

        tsr_kube_config_init(&cfg);
        cfg.server = strdup(url);
        cfg.ca_file = ca ? strdup(ca) : NULL;
        cfg.token = token ? strdup(token) : NULL;
        cfg.token_file = token_file ? strdup(token_file) : NULL;
        tsr_diag_clear(&diag);
        if (tsr_kube_client_new(&cfg, NULL, &c, &diag))
                fail_msg("client: %s", diag.msg);
        tsr_kube_config_release(&cfg);
        return c;
}

/* A client of the real server with the admin token (or token, when not NULL). */
static struct tsr_kube_client *real_client(const char *token)
{
        return client_for(C.url, token ? token : C.token, NULL, C.ca);
}

static struct tsr_kube_client *fake_client(void)
{
        char ca[300];

        snprintf(ca, sizeof(ca), "%s/ca.crt", fake_dir);
        return client_for(fake.url, "t1", NULL, ca);
}

/* An InstanceType the real CRD's schema keeps whole: spec.memory carries n. */
static char *it_json(const char *name, const char *kase, int n)
{
        static char buf[640];

        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"worker.gpustack.ai/v1alpha1\",\"kind\":\"InstanceType\","
                 "\"metadata\":{\"name\":\"%s\",\"labels\":{\"tier\":\"%s\",\"case\":\"%s\"}},"
                 "\"spec\":{\"acceleratable\":false,\"os\":\"linux\",\"arch\":\"amd64\","
                 "\"unitResources\":{\"cpu\":\"1\",\"ram\":\"1Gi\"},\"localStorage\":\"10Gi\","
                 "\"memory\":%d}}",
                 name, n % 2 ? "odd" : "even", kase, n);
        return buf;
}

static void create_it(const char *name, const char *kase, int n)
{
        json_decref(cluster_create(&C, IT_PATH, it_json(name, kase, n)));
}

static const char *meta(json_t *o, const char *field)
{
        return json_string_value(json_object_get(json_object_get(o, "metadata"), field));
}

/* The resourceVersion of a list of the collection with selector (static storage). */
static const char *list_rv(const char *selector)
{
        static char rv[64];
        struct tsr_kube_list_opts lo = {.label_selector = selector};
        struct tsr_diag diag;
        json_t *l;

        tsr_diag_clear(&diag);
        if (tsr_kube_client_list(C.ctl, IT_PATH, &lo, &l, NULL, &diag))
                fail_msg("list: %s", diag.msg);
        snprintf(rv, sizeof(rv), "%s", meta(l, "resourceVersion"));
        json_decref(l);
        return rv;
}

/* Who the server says c is (a SelfSubjectReview), or "" when the request fails; static. */
static const char *whoami(struct tsr_kube_client *c, const char **group_out)
{
        static char user[64], group[64];
        static const char body[] =
            "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"SelfSubjectReview\"}";
        json_t *o = NULL, *info;

        user[0] = group[0] = '\0';
        if (!tsr_kube_client_request(c, "POST", SSR_PATH, "application/json", body, strlen(body),
                                     NULL, &o, NULL, NULL)) {
                info = json_object_get(json_object_get(o, "status"), "userInfo");
                snprintf(user, sizeof(user), "%s",
                         json_string_value(json_object_get(info, "username")));
                snprintf(group, sizeof(group), "%s",
                         json_string_value(json_array_get(json_object_get(info, "groups"), 0)));
                json_decref(o);
        }
        if (group_out)
                *group_out = group;
        return user;
}

static int group_setup(void **state)
{
        static const char *const users[] = {"alice", "bob", NULL};
        struct cluster_opts o = {.suite = "kube-client", .crds = true, .users = users};

        (void)state;
        cluster_start(&C, &o);
        for (int i = 1; i <= 5; i++) {
                char name[16];

                snprintf(name, sizeof(name), "list-%d", i);
                create_it(name, "list", i);
        }
        fake_certs(fake_dir, sizeof(fake_dir));
        fake_start(&fake, fake_dir, "t1", 0, NULL);
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        fake_stop(&fake);
        fake_remove_dir(fake_dir);
        return 0; /* main stops the control plane, knowing whether a case failed */
}

/* ---- requests ----------------------------------------------------------------------------- */

static void test_requests(void **state)
{
        struct tsr_kube_client *c = real_client(NULL);
        struct tsr_kube_result res;
        struct tsr_diag diag;
        json_t *o = NULL;
        const char *body = it_json("req-new", "requests", 7);

        (void)state;
        assert_int_equal(tsr_kube_client_get(c, IT_PATH "/list-1", &o, &res, NULL), 0);
        assert_int_equal(res.http, 200);
        assert_string_equal(meta(o, "name"), "list-1");
        json_decref(o);

        assert_int_equal(tsr_kube_client_request(c, "POST", IT_PATH, "application/json", body,
                                                 strlen(body), NULL, &o, &res, NULL),
                         0);
        assert_int_equal(res.http, 201);
        assert_non_null(meta(o, "uid"));
        json_decref(o);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_request(c, "POST", IT_PATH, "application/json", body,
                                                 strlen(body), NULL, &o, &res, &diag),
                         TSR_EEXIST);
        assert_int_equal(res.http, 409);
        assert_non_null(strstr(diag.msg, "AlreadyExists"));
        print_message("# duplicate: %s\n", diag.msg);

        tsr_diag_clear(&diag);
        o = (json_t *)1;
        assert_int_equal(tsr_kube_client_get(c, IT_PATH "/nope", &o, &res, &diag), TSR_ENOTFOUND);
        assert_ptr_equal(o, (json_t *)1); /* *out untouched on failure */
        assert_int_equal(res.http, 404);
        assert_non_null(strstr(diag.msg, "GET " IT_PATH "/nope: HTTP 404 NotFound"));
        assert_non_null(strstr(diag.msg, "instancetypes.worker.gpustack.ai \"nope\" not found"));

        /* The real server answers a DELETE with the object (or a Status): 200 either way. */
        assert_int_equal(tsr_kube_client_request(c, "DELETE", IT_PATH "/req-new", NULL, NULL, 0,
                                                 NULL, NULL, &res, NULL),
                         0);
        assert_int_equal(res.http, 200);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH "/req-new", &o, &res, NULL), TSR_ENOTFOUND);
        tsr_kube_client_free(c);
}

/* ---- list --------------------------------------------------------------------------------- */

static const char *item_name(json_t *list, size_t i)
{
        return meta(json_array_get(json_object_get(list, "items"), i), "name");
}

static void test_list(void **state)
{
        struct tsr_kube_client *c = real_client(NULL);
        struct tsr_kube_list_opts lo = {.limit = 2, .label_selector = "case=list"};
        struct tsr_kube_result res;
        json_t *page, *next, *all, *item;
        char names[256] = "", rv[64];
        size_t i;
        int pages = 1;

        (void)state;
        assert_int_equal(tsr_kube_client_list(c, IT_PATH, &lo, &page, &res, NULL), 0);
        assert_int_equal(json_array_size(json_object_get(page, "items")), 2);
        assert_string_equal(item_name(page, 0), "list-1");
        assert_string_equal(item_name(page, 1), "list-2");
        snprintf(rv, sizeof(rv), "%s", meta(page, "resourceVersion"));
        assert_true(rv[0] != '\0');

        /* The later pages come from the first page's snapshot: list-9, made now, is not there. */
        create_it("list-9", "list", 9);
        while (meta(page, "continue") && *meta(page, "continue")) {
                lo.continue_token = meta(page, "continue");
                assert_int_equal(tsr_kube_client_list(c, IT_PATH, &lo, &next, &res, NULL), 0);
                json_array_foreach(json_object_get(next, "items"), i, item)
                {
                        strcat(names, meta(item, "name"));
                        strcat(names, " ");
                }
                json_decref(page);
                page = next;
                pages++;
        }
        json_decref(page);
        assert_string_equal(names, "list-3 list-4 list-5 ");
        assert_int_equal(pages, 3);

        /* list_all: every page joined; the items carry their kind; a newer snapshot. */
        lo.continue_token = NULL;
        assert_int_equal(tsr_kube_client_list_all(c, IT_PATH, &lo, &all, &res, NULL), 0);
        assert_int_equal(json_array_size(json_object_get(all, "items")), 6);
        assert_string_equal(item_name(all, 5), "list-9");
        assert_null(json_object_get(json_object_get(all, "metadata"), "continue"));
        assert_string_equal(json_string_value(json_object_get(all, "kind")), "InstanceTypeList");
        assert_string_not_equal(meta(all, "resourceVersion"), rv); /* opaque: only compared */
        json_array_foreach(json_object_get(all, "items"), i, item)
        {
                assert_string_equal(json_string_value(json_object_get(item, "kind")),
                                    "InstanceType");
                assert_string_equal(json_string_value(json_object_get(item, "apiVersion")),
                                    "worker.gpustack.ai/v1alpha1");
        }
        json_decref(all);

        lo.label_selector = "case=list,tier=odd,tier!=even";
        lo.limit = 0;
        assert_int_equal(tsr_kube_client_list_all(c, IT_PATH, &lo, &all, &res, NULL), 0);
        assert_int_equal(json_array_size(json_object_get(all, "items")), 4); /* 1 3 5 9 */
        json_decref(all);

        /* Core kinds: the real server leaves kind and apiVersion off the items; list_all adds
         * the list's. */
        lo.label_selector = NULL;
        assert_int_equal(tsr_kube_client_list(c, "/api/v1/namespaces", &lo, &page, &res, NULL), 0);
        assert_true(json_array_size(json_object_get(page, "items")) >= 1);
        assert_null(json_object_get(json_array_get(json_object_get(page, "items"), 0), "kind"));
        json_decref(page);
        assert_int_equal(tsr_kube_client_list_all(c, "/api/v1/namespaces", &lo, &all, &res, NULL),
                         0);
        json_array_foreach(json_object_get(all, "items"), i, item)
        {
                assert_string_equal(json_string_value(json_object_get(item, "kind")), "Namespace");
                assert_string_equal(json_string_value(json_object_get(item, "apiVersion")), "v1");
        }
        json_decref(all);

        lo.field_selector = "metadata.name=list-2";
        assert_int_equal(tsr_kube_client_list_all(c, IT_PATH, &lo, &all, &res, NULL), 0);
        assert_int_equal(json_array_size(json_object_get(all, "items")), 1);
        assert_string_equal(item_name(all, 0), "list-2");
        json_decref(all);
        tsr_kube_client_free(c);
}

static void test_query_escape(void **state)
{
        struct tsr_buf b = TSR_BUF_INIT;

        (void)state;
        assert_int_equal(tsr_buf_adds(&b, "/x"), 0);
        assert_int_equal(tsr_kube_query_add(&b, "labelSelector", "a=b,c!=d e/f"), 0);
        assert_int_equal(tsr_kube_query_add(&b, "limit", "5"), 0);
        assert_string_equal(b.ptr, "/x?labelSelector=a%3Db%2Cc%21%3Dd%20e%2Ff&limit=5");
        tsr_buf_release(&b);
}

/* ---- patch -------------------------------------------------------------------------------- */

static void test_patch(void **state)
{
        static const char *const its[] = {"instancetypes", NULL};
        struct tsr_kube_client *c = real_client(NULL);
        struct tsr_kube_patch_opts po = {0};
        struct tsr_kube_result res = {0};
        struct tsr_diag diag;
        json_t *body, *o, *before, *delta;

        (void)state;
        create_it("patch-1", "patch", 1);
        body =
            json_pack("{s:{s:i}, s:{s:{s:n}}}", "spec", "memory", 9, "metadata", "labels", "tier");
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/patch-1", TSR_KUBE_PATCH_MERGE, body,
                                               NULL, &o, &res, NULL),
                         0);
        json_decref(body);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "spec"), "memory")),
                         9);
        assert_null(
            json_object_get(json_object_get(json_object_get(o, "metadata"), "labels"), "tier"));
        json_decref(o);

        body = json_loads("[{\"op\":\"test\",\"path\":\"/spec/memory\",\"value\":9},"
                          "{\"op\":\"replace\",\"path\":\"/spec/memory\",\"value\":10}]",
                          0, NULL);
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/patch-1", TSR_KUBE_PATCH_JSON, body,
                                               NULL, NULL, &res, NULL),
                         0);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/patch-1", TSR_KUBE_PATCH_JSON, body,
                                               NULL, NULL, &res, &diag),
                         TSR_EINVAL);
        assert_int_equal(res.http, 422);
        assert_non_null(strstr(diag.msg, "Invalid"));
        json_decref(body);

        /* Apply without a field manager: refused here; the server counted no request for it. */
        body = json_loads(it_json("patch-applied", "patch", 3), 0, NULL);
        before = cluster_request_counts(&C);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/patch-applied", TSR_KUBE_PATCH_APPLY,
                                               body, &po, NULL, &res, &diag),
                         TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "fieldManager is required"));
        delta = cluster_request_delta(&C, before, its);
        assert_int_equal(cluster_delta_total(delta), 0);
        json_decref(delta);
        po.field_manager = "tessera";
        po.force = true;
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/patch-applied", TSR_KUBE_PATCH_APPLY,
                                               body, &po, &o, &res, NULL),
                         0);
        assert_int_equal(res.http, 201);
        json_decref(o);
        json_decref(body);
        delta = cluster_request_delta(&C, before, its);
        assert_int_equal(json_integer_value(json_object_get(delta, "APPLY instancetypes 201")), 1);
        assert_int_equal(cluster_delta_total(delta), 1);
        json_decref(delta);
        json_decref(before);

        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_request(c, "PATCH", IT_PATH "/patch-1",
                                                 "application/strategic-merge-patch+json", "{}", 2,
                                                 NULL, NULL, &res, &diag),
                         TSR_EINVAL);
        assert_int_equal(res.http, 415);
        assert_non_null(strstr(diag.msg, "UnsupportedMediaType"));

        body = json_pack("{s:{s:s}, s:{s:i}}", "metadata", "resourceVersion", "1", "spec", "memory",
                         1);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/patch-1", TSR_KUBE_PATCH_MERGE, body,
                                               NULL, NULL, &res, &diag),
                         TSR_ESTALE);
        assert_int_equal(res.http, 409);
        assert_non_null(strstr(diag.msg, "Conflict"));
        assert_non_null(strstr(diag.msg, "the object has been modified"));
        json_decref(body);
        tsr_kube_client_free(c);
}

/* ---- watch -------------------------------------------------------------------------------- */

struct seen {
        int n;
        char types[16][12];
        char rv[16][32];
        char name[16][32];
        int code[16];
        int stop_at; /* return 42 at this event (1-based), 0: never */
        int bookmarks;
        char bookmark_rv[32];
        atomic_int started; /* events so far, for another thread */
};

static int collect(void *ctx, const struct tsr_kube_event *ev)
{
        struct seen *s = ctx;

        atomic_fetch_add(&s->started, 1);
        if (ev->type == TSR_KUBE_BOOKMARK) {
                s->bookmarks++;
                snprintf(s->bookmark_rv, sizeof(s->bookmark_rv), "%s", ev->resource_version);
                return 0;
        }
        if (s->n < 16) {
                snprintf(s->types[s->n], sizeof(s->types[s->n]), "%s",
                         tsr_kube_event_type_name(ev->type));
                snprintf(s->rv[s->n], sizeof(s->rv[s->n]), "%s", ev->resource_version);
                snprintf(s->name[s->n], sizeof(s->name[s->n]), "%s", ev->name);
                s->code[s->n] = ev->code;
        }
        s->n++;
        return s->stop_at && s->n == s->stop_at ? 42 : 0;
}

static void seen_reset(struct seen *s)
{
        memset(s, 0, sizeof(*s));
        atomic_init(&s->started, 0);
}

struct bg_watch {
        struct tsr_kube_client *c;
        struct tsr_kube_watch_opts wo;
        struct tsr_kube_result res;
        struct seen s;
        struct tsr_diag diag;
        int rc;
        long ended;
};

static void *bg_main(void *arg)
{
        struct bg_watch *b = arg;

        tsr_diag_clear(&b->diag);
        b->rc = tsr_kube_client_watch(b->c, IT_PATH, &b->wo, collect, &b->s, &b->res, &b->diag);
        b->ended = now_ms();
        return NULL;
}

static void test_watch(void **state)
{
        struct tsr_kube_client *c = real_client(NULL);
        struct tsr_kube_watch_opts wo = {.timeout_s = 1, .label_selector = "case=watch"};
        struct tsr_kube_result res;
        struct tsr_diag diag;
        struct seen s;
        char rv[64];
        long t0;

        (void)state;
        snprintf(rv, sizeof(rv), "%s", list_rv("case=watch"));
        create_it("watch-1", "watch", 1);
        json_decref(cluster_patch(&C, IT_PATH "/watch-1", "{\"spec\":{\"memory\":2}}"));
        cluster_delete(&C, IT_PATH "/watch-1");

        seen_reset(&s);
        wo.resource_version = rv;
        t0 = now_ms();
        tsr_diag_clear(&diag);
        if (tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, &diag))
                fail_msg("watch: %s", diag.msg);
        assert_true(now_ms() - t0 >= 900);
        assert_int_equal(res.http, 200);
        assert_int_equal(s.n, 3);
        assert_int_equal(res.events, 3);
        assert_string_equal(s.types[0], "ADDED");
        assert_string_equal(s.types[1], "MODIFIED");
        assert_string_equal(s.types[2], "DELETED");
        for (int i = 0; i < 3; i++) {
                assert_string_equal(s.name[i], "watch-1");
                assert_true(s.rv[i][0] != '\0');
                assert_string_not_equal(s.rv[i], rv);
        }
        assert_string_not_equal(s.rv[0], s.rv[1]);
        assert_string_not_equal(s.rv[1], s.rv[2]);
        assert_int_equal(s.bookmarks, 0); /* not asked for */

        seen_reset(&s);
        s.stop_at = 2;
        assert_int_equal(tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, NULL), 42);
        assert_int_equal(s.n, 2);

        /* A resourceVersion older than the watch cache holds: 200, then an ERROR 410 event. */
        seen_reset(&s);
        wo.resource_version = "1";
        wo.bookmarks = false;
        assert_int_equal(tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, NULL), 0);
        assert_int_equal(res.http, 200);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.types[0], "ERROR");
        assert_int_equal(s.code[0], 410);
        tsr_kube_client_free(c);
}

/*
 * Bookmarks: the watch cache sends one two seconds before a watch's deadline when the resource
 * moved past what the watcher was sent, as it does after a change the watch's label selector
 * filtered out. The change must come while the watch is live (a change replayed from the watch
 * cache's history moves the watcher too), so it follows the watch's first event.
 */
static void test_watch_bookmark(void **state)
{
        struct bg_watch b;
        pthread_t th;
        char rv[64], other_rv[64];
        json_t *o;
        long deadline;

        (void)state;
        memset(&b, 0, sizeof(b));
        seen_reset(&b.s);
        b.c = real_client(NULL);
        snprintf(rv, sizeof(rv), "%s", list_rv("case=bookmark"));
        b.wo.resource_version = rv;
        b.wo.label_selector = "case=bookmark";
        b.wo.bookmarks = true;
        b.wo.timeout_s = 5;
        assert_int_equal(pthread_create(&th, NULL, bg_main, &b), 0);
        create_it("bookmark-1", "bookmark", 1);
        deadline = now_ms() + 4000;
        while (atomic_load(&b.s.started) < 1) {
                if (now_ms() > deadline)
                        fail_msg("the watch did not see bookmark-1");
                nanosleep(&(struct timespec){0, 5000000L}, NULL);
        }
        o = cluster_create(&C, IT_PATH, it_json("bookmark-other", "bookmark-other", 1));
        snprintf(other_rv, sizeof(other_rv), "%s", meta(o, "resourceVersion"));
        json_decref(o);
        pthread_join(th, NULL);
        if (b.rc)
                fail_msg("watch: %s", b.diag.msg);
        assert_int_equal(b.s.n, 1);
        assert_string_equal(b.s.types[0], "ADDED");
        print_message("# bookmark at %s (ADDED at %s, filtered change at %s)\n", b.s.bookmark_rv,
                      b.s.rv[0], other_rv);
        assert_true(b.s.bookmarks >= 1);
        assert_string_not_equal(b.s.bookmark_rv, b.s.rv[0]);
        tsr_kube_client_free(b.c);
}

/* The HTTP form of 410 (a watch refused before it starts): the fake's "http" mode. */
static void test_watch_gone_http(void **state)
{
        struct tsr_kube_client *c = fake_client();
        struct tsr_kube_watch_opts wo = {.timeout_s = 5};
        struct tsr_kube_result res;
        struct seen s;
        char rv[32];

        (void)state;
        snprintf(rv, sizeof(rv), "%ld", fake_stat(&fake, "rv"));
        json_decref(fake_create(&fake, IT_PATH, it_json("gone-1", "gone", 1)));
        json_decref(fake_control(&fake, "compact", NULL));
        json_decref(fake_control(&fake, "watch410", "{\"mode\":\"http\"}"));
        seen_reset(&s);
        wo.resource_version = rv;
        assert_int_equal(tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, NULL),
                         TSR_ESTALE);
        assert_int_equal(res.http, 410);
        assert_int_equal(s.n, 0);
        json_decref(fake_control(&fake, "watch410", "{\"mode\":\"event\"}"));
        tsr_kube_client_free(c);
}

/*
 * A server that pages in a loop (the same continue token on every page): list_all stops at the
 * second page with a message naming the loop, instead of growing without end.
 */
static void test_list_continue_loop(void **state)
{
        struct tsr_kube_client *c = fake_client();
        struct tsr_kube_list_opts lo = {.limit = 1};
        struct tsr_kube_result res;
        struct tsr_diag diag;
        json_t *all = NULL;

        (void)state;
        json_decref(fake_create(&fake, IT_PATH, it_json("loop-1", "loop", 1)));
        json_decref(fake_create(&fake, IT_PATH, it_json("loop-2", "loop", 2)));
        json_decref(fake_control(&fake, "loop_continue", "{\"match\":\"instancetypes\"}"));
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_list_all(c, IT_PATH, &lo, &all, &res, &diag), TSR_EPARSE);
        assert_null(all);
        assert_non_null(strstr(diag.msg, "page 2 repeats the continue token"));
        json_decref(fake_control(&fake, "loop_continue", "{\"match\":null}"));
        assert_int_equal(tsr_kube_client_list_all(c, IT_PATH, &lo, &all, &res, NULL), 0);
        json_decref(all);
        tsr_kube_client_free(c);
}

static void wait_fake_active(long n)
{
        long deadline = now_ms() + 10000;

        while (fake_stat(&fake, "active_watches") != n) {
                if (now_ms() > deadline)
                        fail_msg("active watches never reached %ld", n);
                nanosleep(&(struct timespec){0, 10000000L}, NULL);
        }
}

/* A watch cut without the end of its chunked body: the fake's "drop". */
static void test_watch_dropped(void **state)
{
        struct bg_watch b;
        pthread_t th;

        (void)state;
        memset(&b, 0, sizeof(b));
        seen_reset(&b.s);
        b.c = fake_client();
        b.wo.timeout_s = 30;
        assert_int_equal(pthread_create(&th, NULL, bg_main, &b), 0);
        wait_fake_active(1);
        json_decref(fake_control(&fake, "drop", NULL));
        pthread_join(th, NULL);
        assert_int_equal(b.rc, TSR_EIO);
        assert_int_equal(b.res.http, 200);
        print_message("# dropped watch: %s\n", b.diag.msg);
        tsr_kube_client_free(b.c);
}

static void test_watch_cancel(void **state)
{
        struct bg_watch b;
        struct tsr_kube_cancel k;
        pthread_t th;
        long fired, deadline;

        (void)state;
        memset(&b, 0, sizeof(b));
        seen_reset(&b.s);
        b.c = real_client(NULL);
        b.wo.timeout_s = 30;
        b.wo.field_selector = "metadata.name=list-1";
        assert_int_equal(tsr_kube_cancel_init(&k), 0);
        b.wo.cancel = &k;
        assert_int_equal(pthread_create(&th, NULL, bg_main, &b), 0);
        /* No resourceVersion: the real server starts with ADDED for what exists. */
        deadline = now_ms() + 10000;
        while (atomic_load(&b.s.started) < 1) {
                if (now_ms() > deadline)
                        fail_msg("the watch sent no initial event");
                nanosleep(&(struct timespec){0, 5000000L}, NULL);
        }
        nanosleep(&(struct timespec){0, 100000000L}, NULL); /* quiet now */
        fired = now_ms();
        tsr_kube_cancel_fire(&k);
        pthread_join(th, NULL);
        assert_int_equal(b.rc, TSR_EIO);
        assert_int_equal(b.res.http, 200);
        assert_non_null(strstr(b.diag.msg, "cancelled"));
        assert_int_equal(b.s.n, 1);
        assert_string_equal(b.s.types[0], "ADDED");
        assert_string_equal(b.s.name[0], "list-1");
        print_message("# cancel took %ld ms\n", b.ended - fired);
        assert_true(b.ended - fired < 300);
        assert_true(tsr_kube_cancel_fired(&k));
        /* A fired token ends later requests at once. */
        assert_int_equal(tsr_kube_client_watch(b.c, IT_PATH, &b.wo, collect, &b.s, NULL, NULL),
                         TSR_EIO);
        tsr_kube_cancel_release(&k);
        tsr_kube_client_free(b.c);
}

/* ---- auth and TLS ------------------------------------------------------------------------- */

static void test_auth(void **state)
{
        struct tsr_kube_client *c = real_client("wrong");
        struct tsr_kube_result res;
        struct tsr_diag diag;
        char tf[512];

        (void)state;
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag), TSR_EIO);
        assert_int_equal(res.http, 401);
        assert_non_null(strstr(diag.msg, "401 Unauthorized"));
        tsr_kube_client_free(c);

        /* Authenticated but not authorized: RBAC's 403, with the server's message. */
        c = real_client(cluster_token(&C, "alice"));
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag), TSR_EIO);
        assert_int_equal(res.http, 403);
        assert_non_null(strstr(diag.msg, "Forbidden"));
        assert_non_null(strstr(diag.msg, "User \"alice\" cannot list resource \"instancetypes\""));
        tsr_kube_client_free(c);

        /* The token file wins over the fixed token and is read on every request. */
        snprintf(tf, sizeof(tf), "%s", cluster_write_file(&C, "client-token", "tok-alice\n"));
        c = client_for(C.url, "wrong", tf, C.ca);
        assert_string_equal(whoami(c, NULL), "alice");
        cluster_write_file(&C, "client-token", cluster_token(&C, "bob"));
        assert_string_equal(whoami(c, NULL), "bob");
        cluster_write_file(&C, "client-token", "revoked\n");
        assert_int_equal(tsr_kube_client_get(c, "/version", NULL, &res, NULL), TSR_EIO);
        assert_int_equal(res.http, 401);
        cluster_write_file(&C, "client-token", "tok-bob");
        assert_string_equal(whoami(c, NULL), "bob");
        /* An unreadable file keeps the last token. */
        unlink(tf);
        assert_string_equal(whoami(c, NULL), "bob");
        tsr_kube_client_free(c);
}

static void test_client_certificate(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_kube_client *c;
        struct tsr_diag diag;
        const char *group;
        size_t n;

        (void)state;
        tsr_kube_config_init(&cfg);
        cfg.server = strdup(C.url);
        cfg.ca_file = strdup(C.ca);
        assert_int_equal(tsr__kube_read_file(C.client_cert, 1 << 20, &cfg.cert_pem, &n, NULL), 0);
        cfg.cert_pem_len = n;
        assert_int_equal(tsr__kube_read_file(C.client_key, 1 << 20, &cfg.key_pem, &n, NULL), 0);
        cfg.key_pem_len = n;
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, &diag), 0);
        tsr_kube_config_release(&cfg);
        if (tsr_kube_client_get(c, IT_PATH "/list-1", NULL, NULL, &diag))
                fail_msg("GET with the client certificate: %s", diag.msg);
        assert_string_equal(whoami(c, &group), "admin");
        assert_string_equal(group, "system:masters");
        tsr_kube_client_free(c);
}

static void test_tls(void **state)
{
        char other[512];
        struct tsr_kube_client *c;
        struct tsr_kube_config cfg;
        struct tsr_kube_result res;
        struct tsr_diag diag;

        (void)state;
        /* The client CA signed the admin's certificate, not the server's. */
        snprintf(other, sizeof(other), "%s/pki/client-ca.crt", C.dir);
        c = client_for(C.url, C.token, NULL, other);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag), TSR_EIO);
        assert_int_equal(res.http, 0);
        print_message("# wrong CA: %s\n", diag.msg);
        tsr_kube_client_free(c);

        tsr_kube_config_init(&cfg);
        cfg.server = strdup(C.url);
        cfg.token = strdup(C.token);
        cfg.insecure_skip_tls_verify = true;
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, NULL), 0);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, NULL), 0);
        tsr_kube_client_free(c);

        /* tls-server-name: verify the certificate against that name, whatever the URL says. */
        cfg.insecure_skip_tls_verify = false;
        cfg.ca_file = strdup(C.ca);
        cfg.tls_server_name = strdup("wrong.example");
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, NULL), 0);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag), TSR_EIO);
        assert_int_equal(res.http, 0);
        print_message("# tls-server-name wrong.example: %s\n", diag.msg);
        tsr_kube_client_free(c);
        free(cfg.tls_server_name);
        cfg.tls_server_name = strdup("localhost");
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, NULL), 0);
        tsr_diag_clear(&diag);
        if (tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag))
                fail_msg("tls-server-name localhost: %s", diag.msg);
        tsr_kube_client_free(c);
        tsr_kube_config_release(&cfg);
}

/* 429 with Retry-After on demand: the fake's "fail". */
static void test_retry_after(void **state)
{
        struct tsr_kube_client *c = fake_client();
        struct tsr_kube_result res;

        (void)state;
        json_decref(fake_control(&fake, "fail",
                                 "{\"status\":429,\"count\":1,\"retry_after\":3,"
                                 "\"match\":\"instancetypes\"}"));
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, NULL), TSR_EIO);
        assert_int_equal(res.http, 429);
        assert_int_equal(res.retry_after_s, 3);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, NULL), 0);
        assert_int_equal(res.retry_after_s, 0);
        tsr_kube_client_free(c);
}

/* TLS connections the fake API server has accepted so far. */
static long fake_connections(void)
{
        json_t *st = fake_control(&fake, "stats", NULL);
        long n = (long)json_integer_value(json_object_get(st, "connections"));

        json_decref(st);
        return n;
}

struct reuse_thread {
        struct tsr_kube_client *c;
        int failures;
};

static void *five_gets(void *arg)
{
        struct reuse_thread *t = arg;

        for (int i = 0; i < 5; i++)
                t->failures += tsr_kube_client_get(t->c, IT_PATH, NULL, NULL, NULL) != 0;
        return NULL;
}

/*
 * A thread's requests through one client share one connection: 20 requests, an answered failure
 * and the controls' own requests between them (another client on the same thread), no new
 * handshake. A second thread opens its own; a second client on the first thread opens one and
 * keeps it, and the first client's stays; freeing a client ends its connection on this thread,
 * so a new client starts afresh.
 */
static void test_connection_reuse(void **state)
{
        struct tsr_kube_client *c = fake_client(), *other = fake_client();
        struct reuse_thread t = {c, 0};
        pthread_t th;
        long n0;

        (void)state;
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, NULL, NULL), 0);
        n0 = fake_connections();
        for (int i = 0; i < 20; i++)
                assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, NULL, NULL), 0);
        json_decref(fake_control(&fake, "fail",
                                 "{\"status\":500,\"count\":1,\"match\":\"instancetypes\"}"));
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, NULL, NULL), TSR_EIO);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, NULL, NULL), 0);
        assert_int_equal(fake_connections(), n0);

        assert_int_equal(pthread_create(&th, NULL, five_gets, &t), 0);
        pthread_join(th, NULL);
        assert_int_equal(t.failures, 0);
        assert_int_equal(fake_connections(), n0 + 1);

        assert_int_equal(tsr_kube_client_get(other, IT_PATH, NULL, NULL, NULL), 0);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, NULL, NULL), 0);
        assert_int_equal(tsr_kube_client_get(other, IT_PATH, NULL, NULL, NULL), 0);
        assert_int_equal(fake_connections(), n0 + 2);
        tsr_kube_client_free(other);
        tsr_kube_client_free(c);
        c = fake_client();
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, NULL, NULL), 0);
        assert_int_equal(fake_connections(), n0 + 3);
        tsr_kube_client_free(c);
}

static void test_kubeconfig_end_to_end(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_kube_client *c;
        struct tsr_diag diag;
        char tfp[512], kc[512];

        (void)state;
        snprintf(tfp, sizeof(tfp), "%s", cluster_write_file(&C, "kc-token", C.token));
        snprintf(kc, sizeof(kc), "%s", cluster_kubeconfig(&C, "kc", tfp, NULL, "team-a"));
        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        if (tsr_kube_kubeconfig_load(&cfg, kc, NULL, &diag))
                fail_msg("%s", diag.msg);
        assert_string_equal(cfg.ns, "team-a");
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, &diag), 0);
        assert_string_equal(tsr_kube_client_namespace(c), "team-a");
        assert_string_equal(tsr_kube_client_server(c), C.url);
        tsr_kube_config_release(&cfg);
        if (tsr_kube_client_get(c, IT_PATH "/list-1", NULL, NULL, &diag))
                fail_msg("GET through our kubeconfig: %s", diag.msg);
        tsr_kube_client_free(c);

        /* The control plane's own kubeconfig: JSON, client-certificate and client-key files. */
        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        if (tsr_kube_kubeconfig_load(&cfg, C.kubeconfig, NULL, &diag))
                fail_msg("%s: %s", C.kubeconfig, diag.msg);
        assert_string_equal(cfg.ns, "default");
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, &diag), 0);
        tsr_kube_config_release(&cfg);
        if (tsr_kube_client_get(c, IT_PATH "/list-1", NULL, NULL, &diag))
                fail_msg("GET through the control plane's kubeconfig: %s", diag.msg);
        assert_string_equal(whoami(c, NULL), "admin");
        tsr_kube_client_free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_requests),
            cmocka_unit_test(test_list),
            cmocka_unit_test(test_query_escape),
            cmocka_unit_test(test_patch),
            cmocka_unit_test(test_watch),
            cmocka_unit_test(test_watch_bookmark),
            cmocka_unit_test(test_watch_gone_http),
            cmocka_unit_test(test_list_continue_loop),
            cmocka_unit_test(test_watch_dropped),
            cmocka_unit_test(test_watch_cancel),
            cmocka_unit_test(test_auth),
            cmocka_unit_test(test_client_certificate),
            cmocka_unit_test(test_tls),
            cmocka_unit_test(test_retry_after),
            cmocka_unit_test(test_connection_reuse),
            cmocka_unit_test(test_kubeconfig_end_to_end),
        };
        int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);

        cluster_stop(&C, failed != 0);
        return failed;
}
