/*
 * test_kube_client.c - kube/client against the fake API server over TLS on loopback.
 *
 *   requests        GET of an object; POST create (201), a duplicate is TSR_EEXIST (409
 *                   AlreadyExists), a missing object TSR_ENOTFOUND (404) with the Status message
 *   list            one page with limit + continue; list_all walks the pages of one snapshot and
 *                   keeps the first page's resourceVersion; labelSelector escaping
 *   patch           merge (null deletes), JSON patch (a failed test is TSR_EINVAL / 422), apply
 *                   (no field manager: refused before any request; with one: creates), a
 *                   strategic merge patch on a CRD is 415; a stale resourceVersion is TSR_ESTALE
 *   watch           events from a resourceVersion in order with their types and versions; a
 *                   callback's stop value comes back; timeoutSeconds ends cleanly (0);
 *                   bookmarks; an ERROR 410 event reaches the callback with code 410; an HTTP
 *                   410 is TSR_ESTALE with res.http 410; a dropped watch is TSR_EIO with 200
 *   cancel          a cancel token fired from another thread ends a quiet watch at once
 *   auth            a wrong token is 401 (TSR_EIO, res.http 401); the token file is re-read on
 *                   every request; a client certificate from PEM bytes authenticates alone
 *   tls             an unrelated CA fails verification (no HTTP status); insecure-skip works;
 *                   tls-server-name verifies "localhost" while connecting to 127.0.0.1
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

#include "fake_apiserver.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IT_PATH "/apis/worker.gpustack.ai/v1alpha1/instancetypes"

static char dir[256];
static struct fake_apiserver fake;
static char ca_path[300];

static long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static struct tsr_kube_client *client_with(const char *token, const char *token_file,
                                           const char *ca)
{
        struct tsr_kube_config cfg;
        struct tsr_kube_client *c;
        struct tsr_diag diag;

        tsr_kube_config_init(&cfg);
        cfg.server = strdup(fake.url);
        cfg.ca_file = ca ? strdup(ca) : NULL;
        cfg.token = token ? strdup(token) : NULL;
        cfg.token_file = token_file ? strdup(token_file) : NULL;
        tsr_diag_clear(&diag);
        if (tsr_kube_client_new(&cfg, NULL, &c, &diag))
                fail_msg("client: %s", diag.msg);
        tsr_kube_config_release(&cfg);
        return c;
}

static char *it_json(const char *name, int n)
{
        static char buf[512];

        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"worker.gpustack.ai/v1alpha1\",\"kind\":\"InstanceType\","
                 "\"metadata\":{\"name\":\"%s\",\"labels\":{\"tier\":\"%s\"}},"
                 "\"spec\":{\"n\":%d}}",
                 name, n % 2 ? "odd" : "even", n);
        return buf;
}

static int group_setup(void **state)
{
        (void)state;
        fake_certs(dir, sizeof(dir));
        fake_start(&fake, dir, "t1", 0.2, NULL);
        snprintf(ca_path, sizeof(ca_path), "%s/ca.crt", dir);
        for (int i = 1; i <= 5; i++) {
                char name[16];

                snprintf(name, sizeof(name), "it%d", i);
                json_decref(fake_create(&fake, IT_PATH, it_json(name, i)));
        }
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        fake_stop(&fake);
        fake_remove_dir(dir);
        return 0;
}

/* ---- requests ----------------------------------------------------------------------------- */

static void test_requests(void **state)
{
        struct tsr_kube_client *c = client_with("t1", NULL, ca_path);
        struct tsr_kube_result res;
        struct tsr_diag diag;
        json_t *o = NULL;
        const char *body = it_json("new", 7);

        (void)state;
        assert_int_equal(tsr_kube_client_get(c, IT_PATH "/it1", &o, &res, NULL), 0);
        assert_int_equal(res.http, 200);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(o, "metadata"), "name")), "it1");
        json_decref(o);

        assert_int_equal(tsr_kube_client_request(c, "POST", IT_PATH, "application/json", body,
                                                 strlen(body), NULL, &o, &res, NULL),
                         0);
        assert_int_equal(res.http, 201);
        json_decref(o);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_request(c, "POST", IT_PATH, "application/json", body,
                                                 strlen(body), NULL, &o, &res, &diag),
                         TSR_EEXIST);
        assert_int_equal(res.http, 409);
        assert_non_null(strstr(diag.msg, "AlreadyExists"));

        tsr_diag_clear(&diag);
        o = (json_t *)1;
        assert_int_equal(tsr_kube_client_get(c, IT_PATH "/nope", &o, &res, &diag), TSR_ENOTFOUND);
        assert_ptr_equal(o, (json_t *)1); /* *out untouched on failure */
        assert_int_equal(res.http, 404);
        assert_non_null(strstr(diag.msg, "GET " IT_PATH "/nope: HTTP 404 NotFound"));
        assert_non_null(strstr(diag.msg, "\"nope\" not found"));

        assert_int_equal(tsr_kube_client_request(c, "DELETE", IT_PATH "/new", NULL, NULL, 0, NULL,
                                                 NULL, &res, NULL),
                         0);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH "/new", &o, &res, NULL), TSR_ENOTFOUND);
        tsr_kube_client_free(c);
}

/* ---- list --------------------------------------------------------------------------------- */

static void test_list(void **state)
{
        struct tsr_kube_client *c = client_with("t1", NULL, ca_path);
        struct tsr_kube_list_opts lo = {.limit = 2};
        struct tsr_kube_result res;
        json_t *page, *all, *item;
        const char *cont, *rv;
        size_t i;

        (void)state;
        assert_int_equal(tsr_kube_client_list(c, IT_PATH, &lo, &page, &res, NULL), 0);
        assert_int_equal(json_array_size(json_object_get(page, "items")), 2);
        cont = json_string_value(json_object_get(json_object_get(page, "metadata"), "continue"));
        assert_non_null(cont);
        lo.continue_token = cont;
        json_t *page2;
        assert_int_equal(tsr_kube_client_list(c, IT_PATH, &lo, &page2, &res, NULL), 0);
        assert_string_equal(
            json_string_value(json_object_get(
                json_object_get(json_array_get(json_object_get(page2, "items"), 0), "metadata"),
                "name")),
            "it3");
        json_decref(page2);
        rv = json_string_value(
            json_object_get(json_object_get(page, "metadata"), "resourceVersion"));

        /* Pages of one snapshot: a change after the first page does not show. */
        lo.continue_token = NULL;
        json_decref(fake_create(&fake, IT_PATH, it_json("it0", 0)));
        assert_int_equal(tsr_kube_client_list_all(c, IT_PATH, &lo, &all, &res, NULL), 0);
        assert_int_equal(json_array_size(json_object_get(all, "items")), 6);
        assert_null(json_object_get(json_object_get(all, "metadata"), "continue"));
        assert_true(atol(json_string_value(json_object_get(json_object_get(all, "metadata"),
                                                           "resourceVersion"))) > atol(rv));
        json_array_foreach(json_object_get(all, "items"), i, item)
        {
                assert_string_equal(json_string_value(json_object_get(item, "kind")),
                                    "InstanceType");
        }
        json_decref(all);
        json_decref(page);

        lo.label_selector = "tier=odd,tier!=even";
        lo.limit = 0;
        assert_int_equal(tsr_kube_client_list_all(c, IT_PATH, &lo, &all, &res, NULL), 0);
        assert_int_equal(json_array_size(json_object_get(all, "items")), 3);
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
        struct tsr_kube_client *c = client_with("t1", NULL, ca_path);
        struct tsr_kube_patch_opts po = {0};
        struct tsr_kube_result res = {0};
        struct tsr_diag diag;
        json_t *body, *o;
        long before;

        (void)state;
        body = json_pack("{s:{s:i}, s:{s:{s:n}}}", "spec", "n", 9, "metadata", "labels", "tier");
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/it2", TSR_KUBE_PATCH_MERGE, body, NULL,
                                               &o, &res, NULL),
                         0);
        json_decref(body);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "spec"), "n")), 9);
        assert_null(
            json_object_get(json_object_get(json_object_get(o, "metadata"), "labels"), "tier"));
        json_decref(o);

        body = json_loads("[{\"op\":\"test\",\"path\":\"/spec/n\",\"value\":9},"
                          "{\"op\":\"replace\",\"path\":\"/spec/n\",\"value\":10}]",
                          0, NULL);
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/it2", TSR_KUBE_PATCH_JSON, body, NULL,
                                               NULL, &res, NULL),
                         0);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/it2", TSR_KUBE_PATCH_JSON, body, NULL,
                                               NULL, &res, &diag),
                         TSR_EINVAL);
        assert_int_equal(res.http, 422);
        json_decref(body);

        body = json_loads(it_json("applied", 3), 0, NULL);
        before = fake_stat(&fake, "requests");
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/applied", TSR_KUBE_PATCH_APPLY, body,
                                               &po, NULL, &res, &diag),
                         TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "fieldManager is required"));
        assert_int_equal(fake_stat(&fake, "requests"), before);
        po.field_manager = "tessera";
        po.force = true;
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/applied", TSR_KUBE_PATCH_APPLY, body,
                                               &po, &o, &res, NULL),
                         0);
        assert_int_equal(res.http, 201);
        json_decref(o);
        json_decref(body);

        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_request(c, "PATCH", IT_PATH "/it2",
                                                 "application/strategic-merge-patch+json", "{}", 2,
                                                 NULL, NULL, &res, &diag),
                         TSR_EINVAL);
        assert_int_equal(res.http, 415);
        assert_non_null(strstr(diag.msg, "UnsupportedMediaType"));

        body = json_pack("{s:{s:s}, s:{s:i}}", "metadata", "resourceVersion", "1", "spec", "n", 1);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_patch(c, IT_PATH "/it2", TSR_KUBE_PATCH_MERGE, body, NULL,
                                               NULL, &res, &diag),
                         TSR_ESTALE);
        assert_int_equal(res.http, 409);
        assert_non_null(strstr(diag.msg, "the object has been modified"));
        json_decref(body);
        tsr_kube_client_free(c);
}

/* ---- watch -------------------------------------------------------------------------------- */

struct seen {
        int n;
        char types[16][12];
        long rv[16];
        int code[16];
        int stop_at; /* return 42 at this event (1-based), 0: never */
        int bookmarks;
};

static int collect(void *ctx, const struct tsr_kube_event *ev)
{
        struct seen *s = ctx;

        if (ev->type == TSR_KUBE_BOOKMARK) {
                s->bookmarks++;
                return 0;
        }
        if (s->n < 16) {
                snprintf(s->types[s->n], sizeof(s->types[s->n]), "%s",
                         tsr_kube_event_type_name(ev->type));
                s->rv[s->n] = atol(ev->resource_version);
                s->code[s->n] = ev->code;
        }
        s->n++;
        return s->stop_at && s->n == s->stop_at ? 42 : 0;
}

static void test_watch(void **state)
{
        struct tsr_kube_client *c = client_with("t1", NULL, ca_path);
        struct tsr_kube_watch_opts wo = {.timeout_s = 1};
        struct tsr_kube_result res;
        struct seen s;
        char rv[32];
        long t0;

        (void)state;
        snprintf(rv, sizeof(rv), "%ld", fake_stat(&fake, "rv"));
        json_decref(fake_create(&fake, IT_PATH, it_json("w1", 1)));
        json_decref(fake_patch(&fake, IT_PATH "/w1", "{\"spec\":{\"n\":2}}"));
        fake_delete(&fake, IT_PATH "/w1");

        memset(&s, 0, sizeof(s));
        wo.resource_version = rv;
        t0 = now_ms();
        assert_int_equal(tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, NULL), 0);
        assert_true(now_ms() - t0 >= 900);
        assert_int_equal(res.http, 200);
        assert_int_equal(s.n, 3);
        assert_int_equal(res.events, 3);
        assert_string_equal(s.types[0], "ADDED");
        assert_string_equal(s.types[1], "MODIFIED");
        assert_string_equal(s.types[2], "DELETED");
        assert_true(s.rv[0] > atol(rv) && s.rv[1] > s.rv[0] && s.rv[2] > s.rv[1]);
        assert_int_equal(s.bookmarks, 0); /* not asked for */

        memset(&s, 0, sizeof(s));
        s.stop_at = 2;
        assert_int_equal(tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, NULL), 42);
        assert_int_equal(s.n, 2);

        memset(&s, 0, sizeof(s));
        wo.bookmarks = true;
        assert_int_equal(tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, NULL), 0);
        assert_true(s.bookmarks >= 2);

        /* 410: an ERROR event, then the HTTP form. */
        json_decref(fake_control(&fake, "compact", NULL));
        memset(&s, 0, sizeof(s));
        wo.timeout_s = 5;
        assert_int_equal(tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, NULL), 0);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.types[0], "ERROR");
        assert_int_equal(s.code[0], 410);
        json_decref(fake_control(&fake, "watch410", "{\"mode\":\"http\"}"));
        memset(&s, 0, sizeof(s));
        assert_int_equal(tsr_kube_client_watch(c, IT_PATH, &wo, collect, &s, &res, NULL),
                         TSR_ESTALE);
        assert_int_equal(res.http, 410);
        assert_int_equal(s.n, 0);
        json_decref(fake_control(&fake, "watch410", "{\"mode\":\"event\"}"));
        tsr_kube_client_free(c);
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

static void wait_active(long n)
{
        long deadline = now_ms() + 10000;

        while (fake_stat(&fake, "active_watches") != n) {
                if (now_ms() > deadline)
                        fail_msg("active watches never reached %ld", n);
                nanosleep(&(struct timespec){0, 10000000L}, NULL);
        }
}

static void test_watch_dropped_and_cancel(void **state)
{
        struct bg_watch b;
        struct tsr_kube_cancel k;
        pthread_t th;
        long fired;

        (void)state;
        memset(&b, 0, sizeof(b));
        b.c = client_with("t1", NULL, ca_path);
        b.wo.timeout_s = 30;
        assert_int_equal(pthread_create(&th, NULL, bg_main, &b), 0);
        wait_active(1);
        json_decref(fake_control(&fake, "drop", NULL));
        pthread_join(th, NULL);
        assert_int_equal(b.rc, TSR_EIO);
        assert_int_equal(b.res.http, 200);
        print_message("# dropped watch: %s\n", b.diag.msg);

        assert_int_equal(tsr_kube_cancel_init(&k), 0);
        b.wo.cancel = &k;
        assert_int_equal(pthread_create(&th, NULL, bg_main, &b), 0);
        wait_active(1);
        fired = now_ms();
        tsr_kube_cancel_fire(&k);
        pthread_join(th, NULL);
        assert_int_equal(b.rc, TSR_EIO);
        assert_non_null(strstr(b.diag.msg, "cancelled"));
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
        struct tsr_kube_client *c = client_with("wrong", NULL, ca_path);
        struct tsr_kube_result res;
        struct tsr_diag diag;
        const char *tf;
        json_t *s;

        (void)state;
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag), TSR_EIO);
        assert_int_equal(res.http, 401);
        assert_non_null(strstr(diag.msg, "401 Unauthorized"));
        tsr_kube_client_free(c);

        /* The token file wins over the fixed token and is read on every request. */
        tf = fake_write_file(dir, "client-token", "t1\n");
        c = client_with("wrong", tf, ca_path);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, NULL), 0);
        fake_write_file(dir, "client-token", "rotated\n");
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, NULL), TSR_EIO);
        s = fake_stats(&fake);
        assert_string_equal(json_string_value(json_object_get(s, "last_token")), "rotated");
        json_decref(s);
        json_decref(fake_control(&fake, "token",
                                 "{\"tokens\":[\"t1\",\"rotated\",\"" FAKE_CTL_TOKEN "\"]}"));
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, NULL), 0);
        /* An unreadable file keeps the last good token. */
        unlink(tf);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, NULL), 0);
        s = fake_stats(&fake);
        assert_string_equal(json_string_value(json_object_get(s, "last_token")), "rotated");
        json_decref(s);
        tsr_kube_client_free(c);
}

static void test_client_certificate(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_kube_client *c;
        struct tsr_diag diag;
        char path[300];
        size_t n;

        (void)state;
        tsr_kube_config_init(&cfg);
        cfg.server = strdup(fake.url);
        cfg.ca_file = strdup(ca_path);
        snprintf(path, sizeof(path), "%s/client.crt", dir);
        assert_int_equal(tsr__kube_read_file(path, 1 << 20, &cfg.cert_pem, &n, NULL), 0);
        cfg.cert_pem_len = n;
        snprintf(path, sizeof(path), "%s/client.key", dir);
        assert_int_equal(tsr__kube_read_file(path, 1 << 20, &cfg.key_pem, &n, NULL), 0);
        cfg.key_pem_len = n;
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, &diag), 0);
        tsr_kube_config_release(&cfg);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH "/it1", NULL, NULL, &diag), 0);
        tsr_kube_client_free(c);
}

static void test_tls(void **state)
{
        char other[300];
        struct tsr_kube_client *c;
        struct tsr_kube_config cfg;
        struct tsr_kube_result res;
        struct tsr_diag diag;

        (void)state;
        snprintf(other, sizeof(other), "%s/other-ca.crt", dir);
        c = client_with("t1", NULL, other);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag), TSR_EIO);
        assert_int_equal(res.http, 0);
        print_message("# wrong CA: %s\n", diag.msg);
        tsr_kube_client_free(c);

        tsr_kube_config_init(&cfg);
        cfg.server = fake.url;
        cfg.token = "t1";
        cfg.insecure_skip_tls_verify = true;
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, NULL), 0);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, NULL), 0);
        tsr_kube_client_free(c);

        /* tls-server-name: verify the certificate against that name, whatever the URL says. */
        tsr_kube_config_init(&cfg);
        cfg.server = fake.url;
        cfg.ca_file = ca_path;
        cfg.token = "t1";
        cfg.tls_server_name = "wrong.example";
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, NULL), 0);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag), TSR_EIO);
        assert_int_equal(res.http, 0);
        print_message("# tls-server-name wrong.example: %s\n", diag.msg);
        tsr_kube_client_free(c);
        cfg.tls_server_name = "localhost";
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, NULL), 0);
        tsr_diag_clear(&diag);
        if (tsr_kube_client_get(c, IT_PATH, NULL, &res, &diag))
                fail_msg("tls-server-name localhost: %s", diag.msg);
        tsr_kube_client_free(c);
}

static void test_retry_after(void **state)
{
        struct tsr_kube_client *c = client_with("t1", NULL, ca_path);
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

static void test_kubeconfig_end_to_end(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_kube_client *c;
        struct tsr_diag diag;
        const char *tf = fake_write_file(dir, "kc-token", "t1");
        char tfp[512];

        (void)state;
        snprintf(tfp, sizeof(tfp), "%s", tf);
        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        if (tsr_kube_kubeconfig_load(&cfg, fake_kubeconfig(&fake, "kc", tfp, NULL), NULL, &diag))
                fail_msg("%s", diag.msg);
        assert_string_equal(cfg.ns, "team-a");
        assert_int_equal(tsr_kube_client_new(&cfg, NULL, &c, &diag), 0);
        assert_string_equal(tsr_kube_client_namespace(c), "team-a");
        assert_string_equal(tsr_kube_client_server(c), fake.url);
        tsr_kube_config_release(&cfg);
        assert_int_equal(tsr_kube_client_get(c, IT_PATH "/it1", NULL, NULL, &diag), 0);
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
            cmocka_unit_test(test_watch_dropped_and_cancel),
            cmocka_unit_test(test_auth),
            cmocka_unit_test(test_client_certificate),
            cmocka_unit_test(test_tls),
            cmocka_unit_test(test_retry_after),
            cmocka_unit_test(test_kubeconfig_end_to_end),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
