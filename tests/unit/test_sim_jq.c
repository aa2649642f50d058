/*
 * test_sim_jq.c - the simulator's `| jq FILTER` stage (sim/jq_pipe.h): output as the jq CLI
 * prints it, errors named, and programs that never end or crash libjq stopped by the budget with
 * an error, the simulator still running.
 */
#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "sim/jq_pipe.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

/* A short budget so that the runaway programs cost about a second each. */
static const struct sim_jq_budget short_budget = {
    .seconds = 1,
    .resident_bytes = (size_t)256 << 20,
    .output_bytes = (size_t)1 << 20,
};

/* Runs `jq ARGS...` (NULL-terminated) over input; *out holds what it printed. */
static int jq(struct tsr_buf *out, struct tsr_diag *d, const char *input, ...)
{
        struct sim_argv args = {.n = 1, .v = {"jq"}};
        va_list ap;
        char *a;

        va_start(ap, input);
        while ((a = va_arg(ap, char *)))
                args.v[args.n++] = a;
        va_end(ap);
        tsr_buf_reset(out);
        tsr_diag_clear(d);
        return sim_jq_run_within(&args, input, &short_budget, out, d);
}

static double now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void test_prints_as_the_cli(void **state)
{
        struct tsr_buf out;
        struct tsr_diag d;

        (void)state;
        tsr_buf_init(&out);
        assert_int_equal(jq(&out, &d, "{\"a\":[1,2]}", ".a", NULL), 0);
        assert_string_equal(out.ptr, "[\n  1,\n  2\n]\n");
        assert_int_equal(jq(&out, &d, "{\"a\":[1,2]}", "-c", ".a[]", NULL), 0);
        assert_string_equal(out.ptr, "1\n2\n");
        assert_int_equal(jq(&out, &d, "{\"s\":\"x y\"}", "-r", ".s", NULL), 0);
        assert_string_equal(out.ptr, "x y\n");
        assert_int_equal(jq(&out, &d, "[]", ".[]", NULL), 0);
        assert_int_equal(out.len, 0);
        tsr_buf_release(&out);
}

static void test_errors_named(void **state)
{
        struct tsr_buf out;
        struct tsr_diag d;

        (void)state;
        tsr_buf_init(&out);
        assert_int_equal(jq(&out, &d, "{}", ".a |", NULL), TSR_EPARSE);
        assert_non_null(strstr(d.msg, "jq: "));
        /* a syntax error inside a string literal: libjq 1.6 leaks here, in the child only */
        assert_int_equal(jq(&out, &d, "{}", "\"abc", NULL), TSR_EPARSE);
        assert_int_equal(jq(&out, &d, "not json", ".", NULL), TSR_EPARSE);
        assert_string_equal(d.msg, "jq: the command did not print JSON");
        assert_int_equal(jq(&out, &d, "{}", "1, error(\"boom\")", NULL), TSR_EINVAL);
        assert_string_equal(d.msg, "jq: boom");
        assert_int_equal(out.len, 0); /* what it printed before the error is not kept */
        assert_int_equal(jq(&out, &d, "{}", "--arg", NULL), TSR_EPARSE);
        assert_string_equal(d.msg, "jq: unsupported option --arg");
        tsr_buf_release(&out);
}

/* Recursion without end, a loop without end and output without end: each stopped inside its
 * budget with an error, and the next program runs. */
static void test_runaway_programs_stopped(void **state)
{
        const char *runaway[] = {"def f: f; f", "def f: [f]; f", "def f: 1 + f; f",
                                 "repeat(\"xxxxxxxxxxxxxxxx\")"};
        struct tsr_buf out;
        struct tsr_diag d;

        (void)state;
        tsr_buf_init(&out);
        for (size_t i = 0; i < sizeof(runaway) / sizeof(runaway[0]); i++) {
                double t0 = now();
                int rc = jq(&out, &d, "null", runaway[i], NULL);

                if (rc != TSR_EINVAL || now() - t0 > 10.0)
                        fail_msg("%s: rc %d after %.1f s: %s", runaway[i], rc, now() - t0, d.msg);
                if (!strstr(d.msg, "budget") && !strstr(d.msg, "signal"))
                        fail_msg("%s: the error does not say why it stopped: %s", runaway[i],
                                 d.msg);
                assert_int_equal(out.len, 0);
        }
        assert_int_equal(jq(&out, &d, "{\"a\":1}", "-c", ".", NULL), 0);
        assert_string_equal(out.ptr, "{\"a\":1}\n");
        tsr_buf_release(&out);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_prints_as_the_cli),
            cmocka_unit_test(test_errors_named),
            cmocka_unit_test(test_runaway_programs_stopped),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
