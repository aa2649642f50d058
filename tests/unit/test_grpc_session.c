/*
 * test_grpc_session.c - grpc/server and grpc/client against each other in memory: the bytes each
 * session outputs are fed to the other (in small chunks where frame splitting matters), with no
 * socket. Unary calls, an error status whose message needs percent-encoding (Trailers-Only), a
 * failing handler, an unknown method, messages of 1 MiB both ways split across many DATA frames,
 * the request ceiling, server streaming with pushes from the test (and the wakeup they ring),
 * the owner finishing a stream, client cancellation reaching the server's closed callback,
 * graceful shutdown, a freed connection; and, with a bare nghttp2 client, HTTP 415 for a wrong
 * content-type and RST_STREAM(NO_ERROR) after trailers sent before the client's END_STREAM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "grpc/client.h"
#include "grpc/server.h"

#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#define BIG ((size_t)1 << 20)

/* ---- the service ----------------------------------------------------------------------------- */

struct svc {
        struct tsr_grpc_stream *stream; /* the last Watch stream, one reference */
        int closed;
        enum tsr_grpc_stream_end why;
        int wakeups;
};

static int echo(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                struct tsr_grpc_status *st)
{
        (void)user;
        if (len == 4 && !memcmp(req, "fail", 4)) {
                tsr_grpc_status_set(st, TSR_GRPC_NOT_FOUND, "no such thing: 100%% caf\xc3\xa9\n");
                return 0;
        }
        if (len == 3 && !memcmp(req, "neg", 3))
                return TSR_EIO;
        return tsr_buf_add(resp, req, len);
}

static int big(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
               struct tsr_grpc_status *st)
{
        (void)user;
        (void)st;
        if (len != BIG)
                return TSR_EINVAL;
        for (size_t i = 0; i < BIG; i++) {
                if (req[i] != (uint8_t)(i * 7))
                        return TSR_EINVAL;
                if (tsr_buf_addch(resp, (char)(i * 13)))
                        return TSR_ENOMEM;
        }
        return 0;
}

static int watch(void *user, struct tsr_grpc_stream *stream, const uint8_t *req, size_t len,
                 struct tsr_grpc_status *st)
{
        struct svc *s = user;

        (void)st;
        if (len == 6 && !memcmp(req, "refuse", 6)) {
                tsr_grpc_status_set(st, TSR_GRPC_FAILED_PRECONDITION, "refused");
                return 0;
        }
        tsr_grpc_stream_unref(s->stream);
        tsr_grpc_stream_ref(stream);
        s->stream = stream;
        return tsr_grpc_stream_push(stream, req, len);
}

static void closed(void *user, struct tsr_grpc_stream *stream, enum tsr_grpc_stream_end why)
{
        struct svc *s = user;

        (void)stream;
        s->closed++;
        s->why = why;
}

static void wake(void *ctx)
{
        ((struct svc *)ctx)->wakeups++;
}

static const struct tsr_grpc_method methods[] = {
    {"/t.S/Echo", echo, NULL},
    {"/t.S/Big", big, NULL},
    {"/t.S/Watch", NULL, watch},
};
static const struct tsr_grpc_service_table table = {methods, 3, closed, 2 * BIG};
static const struct tsr_grpc_service_table small_table = {methods, 3, closed, 1024};

/* ---- the pump -------------------------------------------------------------------------------- */

struct pair {
        struct svc svc;
        struct tsr_grpc_server_conn *s;
        struct tsr_grpc_client_conn *c;
        size_t chunk; /* feed size, 0: all at once */
};

static void feed_chunks(struct pair *p, bool to_server, const struct tsr_buf *b)
{
        size_t step = p->chunk ? p->chunk : b->len;

        for (size_t off = 0; off < b->len; off += step) {
                size_t n = b->len - off < step ? b->len - off : step;
                const uint8_t *d = (const uint8_t *)b->ptr + off;

                if (to_server)
                        assert_int_equal(tsr_grpc_server_conn_feed(p->s, d, n, NULL), 0);
                else
                        assert_int_equal(tsr_grpc_client_conn_feed(p->c, d, n, NULL), 0);
        }
}

static void pump(struct pair *p)
{
        struct tsr_buf b = TSR_BUF_INIT;

        for (int round = 0; round < 10000; round++) {
                size_t moved;

                tsr_buf_reset(&b);
                assert_int_equal(tsr_grpc_client_conn_output(p->c, &b), 0);
                moved = b.len;
                feed_chunks(p, true, &b);
                tsr_buf_reset(&b);
                assert_int_equal(tsr_grpc_server_conn_output(p->s, &b), 0);
                moved += b.len;
                feed_chunks(p, false, &b);
                if (!moved)
                        break;
        }
        tsr_buf_release(&b);
}

static void pair_open(struct pair *p, const struct tsr_grpc_service_table *t, size_t chunk)
{
        memset(p, 0, sizeof(*p));
        p->chunk = chunk;
        assert_int_equal(tsr_grpc_server_conn_new(t, &p->svc, &p->s), 0);
        tsr_grpc_server_conn_set_wakeup(p->s, wake, &p->svc);
        assert_int_equal(tsr_grpc_client_conn_new(4 * BIG, &p->c), 0);
}

static void pair_close(struct pair *p)
{
        tsr_grpc_client_conn_free(p->c);
        tsr_grpc_server_conn_free(p->s);
        tsr_grpc_stream_unref(p->svc.stream);
}

static struct tsr_grpc_call *unary(struct pair *p, const char *path, const void *req, size_t len)
{
        struct tsr_grpc_call *call;

        assert_int_equal(tsr_grpc_client_call_start(p->c, path, req, len, 5000, NULL, NULL, &call),
                         0);
        pump(p);
        assert_true(tsr_grpc_call_done(call));
        return call;
}

/* ---- unary ----------------------------------------------------------------------------------- */

static void test_unary(void **state)
{
        struct pair p;
        struct tsr_grpc_call *call;

        (void)state;
        pair_open(&p, &table, 0);
        call = unary(&p, "/t.S/Echo", "hello", 5);
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_OK);
        assert_int_equal(tsr_grpc_call_response(call)->len, 5);
        assert_memory_equal(tsr_grpc_call_response(call)->ptr, "hello", 5);
        tsr_grpc_call_free(call);

        /* An empty request and response. */
        call = unary(&p, "/t.S/Echo", NULL, 0);
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_OK);
        assert_int_equal(tsr_grpc_call_response(call)->len, 0);
        tsr_grpc_call_free(call);
        assert_true(tsr_grpc_server_conn_alive(p.s));
        pair_close(&p);
}

static void test_error_status(void **state)
{
        struct pair p;
        struct tsr_grpc_call *call;

        (void)state;
        pair_open(&p, &table, 0);
        call = unary(&p, "/t.S/Echo", "fail", 4);
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_NOT_FOUND);
        assert_string_equal(tsr_grpc_call_status(call)->msg, "no such thing: 100% caf\xc3\xa9\n");
        tsr_grpc_call_free(call);

        call = unary(&p, "/t.S/Echo", "neg", 3);
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_INTERNAL);
        assert_non_null(strstr(tsr_grpc_call_status(call)->msg, "input/output error"));
        tsr_grpc_call_free(call);

        call = unary(&p, "/t.S/Nope", "x", 1);
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_UNIMPLEMENTED);
        assert_string_equal(tsr_grpc_call_status(call)->msg, "unknown method /t.S/Nope");
        tsr_grpc_call_free(call);
        pair_close(&p);
}

static void test_big_split(void **state)
{
        struct pair p;
        struct tsr_grpc_call *call;
        uint8_t *req = malloc(BIG);
        const struct tsr_buf *resp;

        (void)state;
        assert_non_null(req);
        for (size_t i = 0; i < BIG; i++)
                req[i] = (uint8_t)(i * 7);
        pair_open(&p, &table, 997);
        call = unary(&p, "/t.S/Big", req, BIG);
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_OK);
        resp = tsr_grpc_call_response(call);
        assert_int_equal(resp->len, BIG);
        for (size_t i = 0; i < BIG; i++)
                if ((uint8_t)resp->ptr[i] != (uint8_t)(i * 13))
                        fail_msg("response byte %zu", i);
        tsr_grpc_call_free(call);
        pair_close(&p);

        /* Over the server's ceiling. */
        pair_open(&p, &small_table, 0);
        call = unary(&p, "/t.S/Big", req, BIG);
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_RESOURCE_EXHAUSTED);
        assert_non_null(strstr(tsr_grpc_call_status(call)->msg, "exceeds the maximum of 1024"));
        tsr_grpc_call_free(call);
        pair_close(&p);
        free(req);
}

/* ---- streaming ------------------------------------------------------------------------------- */

struct inbox {
        size_t n;
        char msgs[8][16];
};

static int take(void *ctx, const uint8_t *msg, size_t len)
{
        struct inbox *in = ctx;

        assert_true(len < 16 && in->n < 8);
        memcpy(in->msgs[in->n], msg, len);
        in->msgs[in->n][len] = '\0';
        in->n++;
        return 0;
}

static struct tsr_grpc_call *watch_start(struct pair *p, struct inbox *in)
{
        struct tsr_grpc_call *call;

        memset(in, 0, sizeof(*in));
        assert_int_equal(tsr_grpc_client_call_start(p->c, "/t.S/Watch", (const uint8_t *)"first", 5,
                                                    0, take, in, &call),
                         0);
        pump(p);
        assert_false(tsr_grpc_call_done(call));
        assert_int_equal(in->n, 1);
        assert_string_equal(in->msgs[0], "first");
        assert_non_null(p->svc.stream);
        return call;
}

static void test_stream_push_finish(void **state)
{
        struct tsr_grpc_status ok = {TSR_GRPC_OK, ""};
        struct pair p;
        struct inbox in;
        struct tsr_grpc_call *call;
        int woken;

        (void)state;
        pair_open(&p, &table, 7);
        call = watch_start(&p, &in);
        assert_string_equal(tsr_grpc_stream_path(p.svc.stream), "/t.S/Watch");
        woken = p.svc.wakeups;
        assert_int_equal(tsr_grpc_stream_push(p.svc.stream, (const uint8_t *)"second", 6), 0);
        assert_int_equal(tsr_grpc_stream_push(p.svc.stream, (const uint8_t *)"third", 5), 0);
        assert_int_equal(p.svc.wakeups, woken + 2);
        pump(&p);
        assert_int_equal(in.n, 3);
        assert_string_equal(in.msgs[2], "third");
        assert_false(tsr_grpc_call_done(call));
        assert_int_equal(p.svc.closed, 0);

        assert_int_equal(tsr_grpc_stream_push(p.svc.stream, (const uint8_t *)"last", 4), 0);
        assert_int_equal(tsr_grpc_stream_finish(p.svc.stream, &ok), 0);
        assert_int_equal(tsr_grpc_stream_finish(p.svc.stream, &ok), TSR_ESTALE);
        assert_int_equal(tsr_grpc_stream_push(p.svc.stream, (const uint8_t *)"x", 1), TSR_ESTALE);
        assert_true(tsr_grpc_stream_ended(p.svc.stream));
        pump(&p);
        assert_true(tsr_grpc_call_done(call));
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_OK);
        assert_int_equal(in.n, 4);
        assert_string_equal(in.msgs[3], "last");
        assert_int_equal(p.svc.closed, 1);
        assert_int_equal(p.svc.why, TSR_GRPC_END_FINISHED);
        tsr_grpc_call_free(call);
        pair_close(&p);
}

static void test_stream_refused(void **state)
{
        struct pair p;
        struct inbox in = {0};
        struct tsr_grpc_call *call;

        (void)state;
        pair_open(&p, &table, 0);
        assert_int_equal(tsr_grpc_client_call_start(p.c, "/t.S/Watch", (const uint8_t *)"refuse", 6,
                                                    0, take, &in, &call),
                         0);
        pump(&p);
        assert_true(tsr_grpc_call_done(call));
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_FAILED_PRECONDITION);
        assert_string_equal(tsr_grpc_call_status(call)->msg, "refused");
        assert_int_equal(p.svc.closed, 1);
        tsr_grpc_call_free(call);
        pair_close(&p);
}

static void test_stream_cancel(void **state)
{
        struct pair p;
        struct inbox in;
        struct tsr_grpc_call *call;

        (void)state;
        pair_open(&p, &table, 0);
        call = watch_start(&p, &in);
        tsr_grpc_call_cancel(call, TSR_GRPC_CANCELLED, "bye");
        assert_true(tsr_grpc_call_done(call));
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_CANCELLED);
        pump(&p);
        assert_int_equal(p.svc.closed, 1);
        assert_int_equal(p.svc.why, TSR_GRPC_END_CANCELLED);
        assert_true(tsr_grpc_stream_ended(p.svc.stream));
        assert_int_equal(tsr_grpc_stream_push(p.svc.stream, (const uint8_t *)"x", 1), TSR_ESTALE);
        tsr_grpc_call_free(call);

        /* The connection still serves. */
        call = unary(&p, "/t.S/Echo", "again", 5);
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_OK);
        tsr_grpc_call_free(call);
        pair_close(&p);
}

static void test_shutdown_and_free(void **state)
{
        struct pair p;
        struct inbox in;
        struct tsr_grpc_call *call;

        (void)state;
        pair_open(&p, &table, 0);
        call = watch_start(&p, &in);
        assert_int_equal(tsr_grpc_stream_push(p.svc.stream, (const uint8_t *)"pending", 7), 0);
        tsr_grpc_server_conn_shutdown(p.s);
        pump(&p);
        assert_true(tsr_grpc_call_done(call));
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_OK);
        assert_int_equal(in.n, 2);
        assert_int_equal(p.svc.why, TSR_GRPC_END_SHUTDOWN);
        assert_false(tsr_grpc_server_conn_alive(p.s));
        tsr_grpc_call_free(call);
        pair_close(&p);

        /* Freeing the server connection under an open stream. */
        pair_open(&p, &table, 0);
        call = watch_start(&p, &in);
        tsr_grpc_server_conn_free(p.s);
        p.s = NULL;
        assert_int_equal(p.svc.closed, 1);
        assert_int_equal(p.svc.why, TSR_GRPC_END_CONN_LOST);
        assert_int_equal(tsr_grpc_stream_push(p.svc.stream, (const uint8_t *)"x", 1), TSR_ESTALE);
        tsr_grpc_client_conn_free(p.c);
        assert_true(tsr_grpc_call_done(call));
        assert_int_equal(tsr_grpc_call_status(call)->code, TSR_GRPC_UNAVAILABLE);
        p.c = NULL;
        tsr_grpc_call_free(call);
        pair_close(&p);
}

/* ---- a bare nghttp2 client ------------------------------------------------------------------- */

struct raw {
        int status;
        uint32_t rst_code;
        bool rst;
};

static int raw_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                      size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                      void *user_data)
{
        struct raw *r = user_data;

        (void)session;
        (void)frame;
        (void)flags;
        if (namelen == 7 && !memcmp(name, ":status", 7) && valuelen == 3)
                r->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
        return 0;
}

static int raw_frame(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
        struct raw *r = user_data;

        (void)session;
        if (frame->hd.type == NGHTTP2_RST_STREAM) {
                r->rst = true;
                r->rst_code = frame->rst_stream.error_code;
        }
        return 0;
}

static ssize_t never(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                     uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
        (void)session, (void)id, (void)buf, (void)length, (void)flags, (void)source;
        (void)user_data;
        return NGHTTP2_ERR_DEFERRED;
}

static void raw_request(const char *path, const char *content_type, struct raw *r)
{
        struct svc svc = {0};
        struct tsr_grpc_server_conn *s;
        nghttp2_session_callbacks *cbs;
        nghttp2_session *cl;
        nghttp2_data_provider prd = {{0}, never};
        nghttp2_nv nv[] = {
            {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
            {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
            {(uint8_t *)":path", (uint8_t *)(uintptr_t)path, 5, strlen(path), 0},
            {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0},
            {(uint8_t *)"content-type", (uint8_t *)(uintptr_t)content_type, 12,
             strlen(content_type), 0},
        };

        memset(r, 0, sizeof(*r));
        assert_int_equal(tsr_grpc_server_conn_new(&table, &svc, &s), 0);
        assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
        nghttp2_session_callbacks_set_on_header_callback(cbs, raw_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, raw_frame);
        assert_int_equal(nghttp2_session_client_new(&cl, cbs, r), 0);
        nghttp2_session_callbacks_del(cbs);
        assert_int_equal(nghttp2_submit_settings(cl, NGHTTP2_FLAG_NONE, NULL, 0), 0);
        /* No te: trailers, and the body never ends: the client has not sent END_STREAM. */
        assert_true(nghttp2_submit_request(cl, NULL, nv, 5, &prd, NULL) > 0);
        for (int round = 0; round < 20; round++) {
                struct tsr_buf b = TSR_BUF_INIT;
                const uint8_t *d;
                ssize_t n;

                while ((n = nghttp2_session_mem_send(cl, &d)) > 0)
                        assert_int_equal(tsr_grpc_server_conn_feed(s, d, (size_t)n, NULL), 0);
                assert_int_equal(tsr_grpc_server_conn_output(s, &b), 0);
                assert_int_equal(nghttp2_session_mem_recv(cl, (const uint8_t *)b.ptr, b.len),
                                 (ssize_t)b.len);
                tsr_buf_release(&b);
        }
        nghttp2_session_del(cl);
        tsr_grpc_server_conn_free(s);
}

static void test_raw_415_and_rst(void **state)
{
        struct raw r;

        (void)state;
        raw_request("/t.S/Echo", "text/plain", &r);
        assert_int_equal(r.status, 415);
        raw_request("/t.S/Echo", "application/grpcx", &r);
        assert_int_equal(r.status, 415);
        raw_request("/t.S/Nope", "application/grpc+proto", &r);
        assert_int_equal(r.status, 200);
        assert_true(r.rst);
        assert_int_equal(r.rst_code, NGHTTP2_NO_ERROR);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_unary),
            cmocka_unit_test(test_error_status),
            cmocka_unit_test(test_big_split),
            cmocka_unit_test(test_stream_push_finish),
            cmocka_unit_test(test_stream_refused),
            cmocka_unit_test(test_stream_cancel),
            cmocka_unit_test(test_shutdown_and_free),
            cmocka_unit_test(test_raw_415_and_rst),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
