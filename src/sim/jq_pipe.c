/*
 * jq_pipe.c - libjq glue. Errors from the compiler arrive through jq's callback and are kept for
 * the diagnostic. A filter whose string literal never ends is refused here, before libjq sees
 * it: Debian's libjq 1.6 leaks an allocation on exactly that syntax error (jq_compile then
 * jq_teardown, nothing else, leaks 21 bytes), which the sanitizer builds report.
 */
#include "sim/jq_pipe.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"

#include <jq.h>
#include <stdbool.h>
#include <string.h>

struct jq_err {
        char msg[256];
};

static void on_error(void *data, jv msg)
{
        struct jq_err *e = data;

        if (jv_get_kind(msg) == JV_KIND_STRING && !e->msg[0])
                snprintf(e->msg, sizeof(e->msg), "%s", jv_string_value(msg));
        jv_free(msg);
}

/*
 * True when filter ends inside a string literal, jq's lexer followed: "..." with backslash
 * escapes, \( ... ) interpolations holding expressions (and strings of their own) to their
 * matching parenthesis, # comments to the end of the line outside strings.
 */
static bool unterminated_string(const char *filter)
{
        /* depth[i]: parentheses open inside interpolation i; in_string: inside a literal. */
        int depth[64], level = 0;
        bool in_string = false;

        for (const char *c = filter; *c; c++) {
                if (in_string) {
                        if (*c == '\\' && c[1] == '(') {
                                if (level == (int)(sizeof(depth) / sizeof(depth[0])))
                                        return false; /* deeper than anyone writes: let jq judge */
                                depth[level++] = 0;
                                in_string = false;
                                c++;
                        } else if (*c == '\\' && c[1]) {
                                c++;
                        } else if (*c == '"') {
                                in_string = false;
                        }
                } else if (*c == '"') {
                        in_string = true;
                } else if (*c == '#') {
                        while (c[1] && c[1] != '\n')
                                c++;
                } else if (level && *c == '(') {
                        depth[level - 1]++;
                } else if (level && *c == ')') {
                        if (depth[level - 1]-- == 0) {
                                level--;
                                in_string = true;
                        }
                }
        }
        return in_string;
}

int sim_jq_run(const struct sim_argv *args, const char *input, struct tsr_buf *out,
               struct tsr_diag *diag)
{
        int flags = JV_PRINT_INDENT_FLAGS(2);
        int raw = 0, rc = 0;
        const char *filter = NULL;
        struct jq_err err = {{0}};
        jq_state *jq;
        jv in, res;

        for (size_t i = 1; i < args->n; i++) {
                const char *a = args->v[i];

                if (!strcmp(a, "-c"))
                        flags = 0;
                else if (!strcmp(a, "-r"))
                        raw = 1;
                else if (a[0] == '-' && a[1])
                        return tsr_diag_set(diag, TSR_EPARSE, "jq: unsupported option %s", a);
                else if (!filter)
                        filter = a;
                else
                        return tsr_diag_set(diag, TSR_EPARSE, "jq: reads standard input only");
        }
        if (!filter)
                filter = ".";
        if (unterminated_string(filter))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "jq: error: syntax error, unexpected $end, an unterminated "
                                    "string literal (Unix shell quoting issues?) in: %s",
                                    filter);
        jq = jq_init();
        if (!jq)
                return tsr_diag_set(diag, TSR_ENOMEM, "jq: cannot initialise");
        jq_set_error_cb(jq, on_error, &err);
        if (!jq_compile(jq, filter)) {
                jq_teardown(&jq);
                return tsr_diag_set(diag, TSR_EPARSE, "jq: %s",
                                    err.msg[0] ? err.msg : "cannot compile the filter");
        }
        in = jv_parse(input);
        if (!jv_is_valid(in)) {
                jv_free(in);
                jq_teardown(&jq);
                return tsr_diag_set(diag, TSR_EPARSE, "jq: the command did not print JSON");
        }
        jq_start(jq, in, 0);
        for (res = jq_next(jq); jv_is_valid(res) && !rc; res = jq_next(jq)) {
                if (raw && jv_get_kind(res) == JV_KIND_STRING) {
                        rc = tsr_buf_addf(out, "%s\n", jv_string_value(res));
                        jv_free(res);
                } else {
                        jv s = jv_dump_string(res, flags);

                        rc = tsr_buf_addf(out, "%s\n", jv_string_value(s));
                        jv_free(s);
                }
        }
        if (!rc && jv_invalid_has_msg(jv_copy(res))) {
                jv m = jv_invalid_get_msg(res);

                rc = tsr_diag_set(diag, TSR_EINVAL, "jq: %s",
                                  jv_get_kind(m) == JV_KIND_STRING ? jv_string_value(m) : "error");
                jv_free(m);
        } else {
                jv_free(res);
        }
        jq_teardown(&jq);
        return rc;
}
