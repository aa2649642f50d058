/*
 * test_http_request.c - webhook/http_request.h: request heads (what is read, each refusal with
 * its status, a head cut at every byte reading as incomplete) and the chunked decoder (the same
 * body from every way of cutting its text into two or three pieces, and its refusals).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "webhook/http_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char API_SERVER[] = "POST /mutate-gpustack-worker-core-v1-pod?timeout=10s HTTP/1.1\r\n"
                                 "Host: gpustack-worker-webhook.gpustack-system.svc:443\r\n"
                                 "User-Agent: kube-apiserver-admission\r\n"
                                 "Content-Length: 3648\r\n"
                                 "Accept: application/json, */*\r\n"
                                 "Content-Type: application/json\r\n"
                                 "Accept-Encoding: gzip\r\n"
                                 "\r\n"
                                 "{\"kind\":";

static void test_http_request__api_server_head(void **state)
{
        struct tsr_http_request r;

        (void)state;
        assert_int_equal(tsr_http_request_parse(API_SERVER, strlen(API_SERVER), &r), TSR_HTTP_DONE);
        assert_string_equal(r.method, "POST");
        assert_string_equal(r.path, "/mutate-gpustack-worker-core-v1-pod");
        assert_int_equal(r.minor, 1);
        assert_true(r.has_length);
        assert_int_equal(r.content_length, 3648);
        assert_false(r.chunked);
        assert_true(r.keep_alive);
        assert_false(r.expect_continue);
        assert_true(r.has_content_type);
        assert_string_equal(r.content_type, "application/json");
        assert_int_equal(r.head_len, strlen(API_SERVER) - strlen("{\"kind\":"));
}

/* Every proper prefix of a head is incomplete, never refused and never done. */
static void test_http_request__every_prefix_incomplete(void **state)
{
        size_t head = strlen(API_SERVER) - strlen("{\"kind\":");

        (void)state;
        for (size_t n = 0; n < head; n++) {
                struct tsr_http_request r;

                if (tsr_http_request_parse(API_SERVER, n, &r) != TSR_HTTP_INCOMPLETE)
                        fail_msg("a head cut after %zu bytes was not incomplete", n);
        }
}

static void test_http_request__options(void **state)
{
        struct tsr_http_request r;
        const char *h;

        (void)state;
        /* Empty lines first, bare LF, HTTP/1.0 asking to keep the connection, HEAD. */
        h = "\r\n\nHEAD /healthz HTTP/1.0\nConnection: Keep-Alive\n\n";
        assert_int_equal(tsr_http_request_parse(h, strlen(h), &r), TSR_HTTP_DONE);
        assert_string_equal(r.method, "HEAD");
        assert_int_equal(r.minor, 0);
        assert_true(r.keep_alive);
        assert_false(r.has_length);
        /* HTTP/1.0 without it closes; HTTP/1.1 with close closes. */
        h = "GET /readyz HTTP/1.0\r\n\r\n";
        assert_int_equal(tsr_http_request_parse(h, strlen(h), &r), TSR_HTTP_DONE);
        assert_false(r.keep_alive);
        h = "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: TE, close\r\n\r\n";
        assert_int_equal(tsr_http_request_parse(h, strlen(h), &r), TSR_HTTP_DONE);
        assert_false(r.keep_alive);
        /* Chunked, Expect, header names in any case, whitespace around values. */
        h = "POST /v HTTP/1.1\r\nhost: x\r\ntransfer-encoding:  Chunked \r\n"
            "EXPECT: 100-Continue\r\ncontent-type:application/json; charset=utf-8\r\n\r\n";
        assert_int_equal(tsr_http_request_parse(h, strlen(h), &r), TSR_HTTP_DONE);
        assert_true(r.chunked);
        assert_true(r.expect_continue);
        assert_string_equal(r.content_type, "application/json; charset=utf-8");
        /* The same Content-Length twice is one. */
        h = "POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n";
        assert_int_equal(tsr_http_request_parse(h, strlen(h), &r), TSR_HTTP_DONE);
        assert_int_equal(r.content_length, 7);
}

static void expect_refused(const char *head, unsigned status)
{
        struct tsr_http_request r;
        enum tsr_http_parse rc = tsr_http_request_parse(head, strlen(head), &r);

        if (rc != TSR_HTTP_REFUSED || r.status != status || !r.why)
                fail_msg("%s: rc %d status %u, want refused %u", head, rc, r.status, status);
}

static void test_http_request__refusals(void **state)
{
        char *big, *long_target;
        size_t n;

        (void)state;
        expect_refused("POST /v\r\n\r\n", 400);
        expect_refused("POST  /v HTTP/1.1\r\nHost: x\r\n\r\n", 400);
        expect_refused("PO(ST /v HTTP/1.1\r\nHost: x\r\n\r\n", 400);
        expect_refused("POST /v HTTP/1.1 x\r\nHost: x\r\n\r\n", 400);
        expect_refused("POST /v HTTX/1.1\r\nHost: x\r\n\r\n", 400);
        expect_refused("POST /v HTTP/2.0\r\nHost: x\r\n\r\n", 505);
        expect_refused("POST /v HTTP/1.2\r\nHost: x\r\n\r\n", 505);
        expect_refused("POST /v HTTP/1.1\r\n\r\n", 400); /* no Host */
        expect_refused("POST /v HTTP/1.1\r\nHost : x\r\n\r\n", 400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\nX: a\x01"
                       "b\r\n\r\n",
                       400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\rY\r\n\r\n", 400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n", 400);
        expect_refused(
            "POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", 400);
        expect_refused(
            "POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n",
                       400);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                       501);
        expect_refused("POST /v HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n", 417);
        /* A target past the limit; a head past its limit without an end. */
        long_target = malloc(TSR_HTTP_TARGET_MAX + 64);
        assert_non_null(long_target);
        n = (size_t)sprintf(long_target, "GET /");
        memset(long_target + n, 'a', TSR_HTTP_TARGET_MAX);
        strcpy(long_target + n + TSR_HTTP_TARGET_MAX, " HTTP/1.1\r\nHost: x\r\n\r\n");
        expect_refused(long_target, 414);
        free(long_target);
        big = malloc(TSR_HTTP_HEAD_MAX + 1);
        assert_non_null(big);
        n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: x\r\nX: ");
        memset(big + n, 'a', TSR_HTTP_HEAD_MAX - n);
        big[TSR_HTTP_HEAD_MAX] = '\0';
        expect_refused(big, 431);
        free(big);
}

/* Decodes text (chunked) given in pieces cut at a and b; the body in out. */
static enum tsr_http_parse decode_cut(const char *text, size_t len, size_t a, size_t b, char *out,
                                      size_t *out_len, size_t *end)
{
        struct tsr_http_chunked c;
        size_t cuts[3] = {a, b, len}, at = 0;
        enum tsr_http_parse rc = TSR_HTTP_INCOMPLETE;

        memset(&c, 0, sizeof(c));
        *out_len = 0;
        for (int piece = 0; piece < 3 && rc == TSR_HTTP_INCOMPLETE; piece++) {
                while (at < cuts[piece] && rc == TSR_HTTP_INCOMPLETE) {
                        size_t used, off, n;

                        rc =
                            tsr_http_chunked_step(&c, text + at, cuts[piece] - at, &used, &off, &n);
                        assert_true(used <= cuts[piece] - at);
                        if (n) {
                                assert_true(off + n <= used);
                                memcpy(out + *out_len, text + at + off, n);
                                *out_len += n;
                        }
                        at += used;
                        if (!used && rc == TSR_HTTP_INCOMPLETE)
                                fail_msg("no progress at %zu", at);
                }
        }
        *end = at;
        return rc;
}

static void test_http_request__chunked_every_cut(void **state)
{
        static const char text[] = "5;name=value\r\nhello\r\n"
                                   "1A\r\nabcdefghijklmnopqrstuvwxyz\n"
                                   "0\r\nTrailer: x\r\nOther: y\r\n\r\n"
                                   "NEXT";
        size_t len = sizeof(text) - 1, body_end = len - 4;

        (void)state;
        for (size_t a = 0; a <= body_end; a++) {
                for (size_t b = a; b <= body_end; b++) {
                        char out[64];
                        size_t n, end;

                        if (decode_cut(text, len, a, b, out, &n, &end) != TSR_HTTP_DONE)
                                fail_msg("cut at %zu and %zu: not done", a, b);
                        if (n != 31 || memcmp(out, "helloabcdefghijklmnopqrstuvwxyz", 31))
                                fail_msg("cut at %zu and %zu: body %.*s", a, b, (int)n, out);
                        if (end != body_end)
                                fail_msg("cut at %zu and %zu: stopped at %zu", a, b, end);
                }
        }
}

static void expect_chunked_refused(const char *text)
{
        char out[256];
        size_t n, end;

        if (decode_cut(text, strlen(text), 0, 0, out, &n, &end) != TSR_HTTP_REFUSED)
                fail_msg("%s: not refused", text);
}

static void test_http_request__chunked_refusals(void **state)
{
        char *trailer;
        size_t n;

        (void)state;
        expect_chunked_refused("x\r\n");
        expect_chunked_refused(";\r\n");
        expect_chunked_refused("1000000000000000\r\n");        /* 16 hex digits */
        expect_chunked_refused("3\r\nabcX\r\n0\r\n\r\n");      /* no CRLF after the data */
        expect_chunked_refused("3\r\nabc\rX0\r\n\r\n");        /* CR not followed by LF */
        expect_chunked_refused("3;a\x01\r\nabc\r\n0\r\n\r\n"); /* a control byte */
        trailer = malloc(TSR_HTTP_TRAILER_MAX + 64);
        assert_non_null(trailer);
        n = (size_t)sprintf(trailer, "0\r\nX: ");
        memset(trailer + n, 'a', TSR_HTTP_TRAILER_MAX);
        strcpy(trailer + n + TSR_HTTP_TRAILER_MAX, "\r\n\r\n");
        expect_chunked_refused(trailer);
        free(trailer);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_http_request__api_server_head),
            cmocka_unit_test(test_http_request__every_prefix_incomplete),
            cmocka_unit_test(test_http_request__options),
            cmocka_unit_test(test_http_request__refusals),
            cmocka_unit_test(test_http_request__chunked_every_cut),
            cmocka_unit_test(test_http_request__chunked_refusals),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
