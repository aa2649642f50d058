/*
 * test_grpc_message.c - grpc/message and grpc/status: length-prefixed reassembly at every split
 * point and byte by byte, several messages in one feed, empty messages, the size ceiling, the
 * compressed flag refused, a stream ending inside a message; status names, grpc-message
 * percent-encoding round trips, and grpc-timeout parsing and formatting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "grpc/message.h"
#include "grpc/status.h"

#include <string.h>

struct got {
        size_t n;
        size_t lens[16];
        uint8_t first[16];
};

static int keep(void *ctx, const uint8_t *msg, size_t len)
{
        struct got *g = ctx;

        g->lens[g->n] = len;
        g->first[g->n] = len ? msg[0] : 0;
        g->n++;
        return 0;
}

static void frame3(struct tsr_buf *b)
{
        uint8_t big[300];

        memset(big, 'b', sizeof(big));
        assert_int_equal(tsr_grpc_message_frame(b, (const uint8_t *)"a", 1), 0);
        assert_int_equal(tsr_grpc_message_frame(b, NULL, 0), 0);
        assert_int_equal(tsr_grpc_message_frame(b, big, sizeof(big)), 0);
}

static void test_every_split(void **state)
{
        struct tsr_buf b = TSR_BUF_INIT;

        (void)state;
        frame3(&b);
        assert_int_equal(b.len, 5 + 1 + 5 + 5 + 300);
        for (size_t cut = 0; cut <= b.len; cut++) {
                struct tsr_grpc_reader r;
                struct got g = {0};

                tsr_grpc_reader_init(&r, 0);
                assert_int_equal(tsr_grpc_reader_feed(&r, (uint8_t *)b.ptr, cut, keep, &g, NULL),
                                 0);
                assert_int_equal(
                    tsr_grpc_reader_feed(&r, (uint8_t *)b.ptr + cut, b.len - cut, keep, &g, NULL),
                    0);
                assert_int_equal(tsr_grpc_reader_finish(&r, NULL), 0);
                assert_int_equal(g.n, 3);
                assert_int_equal(g.lens[0], 1);
                assert_int_equal(g.first[0], 'a');
                assert_int_equal(g.lens[1], 0);
                assert_int_equal(g.lens[2], 300);
                assert_int_equal(g.first[2], 'b');
                tsr_grpc_reader_release(&r);
        }
        tsr_buf_release(&b);
}

static void test_byte_by_byte(void **state)
{
        struct tsr_buf b = TSR_BUF_INIT;
        struct tsr_grpc_reader r;
        struct got g = {0};

        (void)state;
        frame3(&b);
        tsr_grpc_reader_init(&r, 0);
        for (size_t i = 0; i < b.len; i++) {
                assert_int_equal(tsr_grpc_reader_feed(&r, (uint8_t *)b.ptr + i, 1, keep, &g, NULL),
                                 0);
                if (i + 1 < b.len)
                        assert_int_equal(g.n < 3, 1);
        }
        assert_int_equal(g.n, 3);
        assert_int_equal(r.messages, 3);
        tsr_grpc_reader_release(&r);
        tsr_buf_release(&b);
}

static void test_limits_and_flags(void **state)
{
        static const uint8_t too_big[] = {0, 0, 0, 0x10, 0x01};
        static const uint8_t compressed[] = {1, 0, 0, 0, 1, 'x'};
        static const uint8_t bad_flag[] = {7, 0, 0, 0, 0};
        static const uint8_t partial[] = {0, 0, 0, 0, 3, 'x'};
        struct tsr_grpc_reader r;
        struct tsr_diag d;
        struct got g = {0};

        (void)state;
        tsr_grpc_reader_init(&r, 4096);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_grpc_reader_feed(&r, too_big, 5, keep, &g, &d), TSR_ETOOBIG);
        assert_non_null(strstr(d.msg, "exceeds the maximum of 4096"));
        tsr_grpc_reader_release(&r);

        tsr_grpc_reader_init(&r, 4096);
        assert_int_equal(tsr_grpc_reader_feed(&r, compressed, 6, keep, &g, &d), TSR_EPARSE);
        assert_non_null(strstr(d.msg, "grpc-encoding"));
        tsr_grpc_reader_release(&r);

        tsr_grpc_reader_init(&r, 4096);
        assert_int_equal(tsr_grpc_reader_feed(&r, bad_flag, 5, keep, &g, &d), TSR_EPARSE);
        tsr_grpc_reader_release(&r);

        tsr_grpc_reader_init(&r, 0);
        assert_int_equal(tsr_grpc_reader_feed(&r, partial, 6, keep, &g, &d), 0);
        assert_int_equal(tsr_grpc_reader_finish(&r, &d), TSR_EPARSE);
        assert_non_null(strstr(d.msg, "1 of 3 bytes"));
        tsr_grpc_reader_release(&r);
        assert_int_equal(g.n, 0);

        /* Exactly at the ceiling is fine; default ceiling is 4 MiB. */
        tsr_grpc_reader_init(&r, 0);
        assert_int_equal(r.max, (size_t)4 << 20);
        tsr_grpc_reader_release(&r);
}

static void test_status_names(void **state)
{
        (void)state;
        assert_string_equal(tsr_grpc_code_name(0), "OK");
        assert_string_equal(tsr_grpc_code_name(12), "UNIMPLEMENTED");
        assert_string_equal(tsr_grpc_code_name(16), "UNAUTHENTICATED");
        assert_string_equal(tsr_grpc_code_name(17), "?");
        assert_string_equal(tsr_grpc_code_name(-1), "?");
}

static void test_percent_round_trip(void **state)
{
        static const char *const cases[] = {
            "",    "plain ascii", "100% sure", "caf\xc3\xa9 \xe2\x9c\x93", "tab\there\nnewline",
            "%%%", "~\x7f\x01"};
        struct tsr_buf enc = TSR_BUF_INIT, dec = TSR_BUF_INIT;

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                tsr_buf_reset(&enc);
                tsr_buf_reset(&dec);
                assert_int_equal(tsr_grpc_percent_encode(&enc, cases[i], strlen(cases[i])), 0);
                for (size_t j = 0; j < enc.len; j++)
                        assert_true(enc.ptr[j] >= 0x20 && enc.ptr[j] <= 0x7e);
                assert_int_equal(tsr_grpc_percent_decode(&dec, enc.ptr, enc.len), 0);
                assert_string_equal(dec.ptr, cases[i]);
        }
        tsr_buf_reset(&enc);
        assert_int_equal(tsr_grpc_percent_encode(&enc, "100% \xc3\xa9", 7), 0);
        assert_string_equal(enc.ptr, "100%25 %C3%A9");
        /* A malformed escape is kept literally. */
        tsr_buf_reset(&dec);
        assert_int_equal(tsr_grpc_percent_decode(&dec, "50%zz%4", 7), 0);
        assert_string_equal(dec.ptr, "50%zz%4");
        tsr_buf_release(&enc);
        tsr_buf_release(&dec);
}

static void test_timeout(void **state)
{
        uint64_t ms = 0;
        char out[16];
        int code = -1;

        (void)state;
        assert_int_equal(tsr_grpc_timeout_parse("10S", 3, &ms), 0);
        assert_int_equal(ms, 10000);
        assert_int_equal(tsr_grpc_timeout_parse("2H", 2, &ms), 0);
        assert_int_equal(ms, 7200000);
        assert_int_equal(tsr_grpc_timeout_parse("3M", 2, &ms), 0);
        assert_int_equal(ms, 180000);
        assert_int_equal(tsr_grpc_timeout_parse("1500u", 5, &ms), 0);
        assert_int_equal(ms, 2);
        assert_int_equal(tsr_grpc_timeout_parse("1n", 2, &ms), 0);
        assert_int_equal(ms, 1);
        assert_int_equal(tsr_grpc_timeout_parse("99999999m", 9, &ms), 0);
        assert_int_equal(tsr_grpc_timeout_parse("123456789m", 10, &ms), TSR_EPARSE);
        assert_int_equal(tsr_grpc_timeout_parse("10", 2, &ms), TSR_EPARSE);
        assert_int_equal(tsr_grpc_timeout_parse("S", 1, &ms), TSR_EPARSE);
        assert_int_equal(tsr_grpc_timeout_parse("1x", 2, &ms), TSR_EPARSE);
        assert_int_equal(tsr_grpc_timeout_parse("-1S", 3, &ms), TSR_EPARSE);
        assert_int_equal(tsr_grpc_timeout_format(250, out), 0);
        assert_string_equal(out, "250m");
        assert_int_equal(tsr_grpc_timeout_format(100000000, out), 0);
        assert_string_equal(out, "100000S");
        assert_int_equal(tsr_grpc_timeout_format(0, out), TSR_ERANGE);
        assert_int_equal(tsr_grpc_status_code_parse("12", 2, &code), 0);
        assert_int_equal(code, 12);
        assert_int_equal(tsr_grpc_status_code_parse("", 0, &code), TSR_EPARSE);
        assert_int_equal(tsr_grpc_status_code_parse("1a", 2, &code), TSR_EPARSE);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_split),        cmocka_unit_test(test_byte_by_byte),
            cmocka_unit_test(test_limits_and_flags),   cmocka_unit_test(test_status_names),
            cmocka_unit_test(test_percent_round_trip), cmocka_unit_test(test_timeout),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
