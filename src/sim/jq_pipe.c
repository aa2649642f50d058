/*
 * jq_pipe.c - libjq glue. Errors from the compiler arrive through jq's callback and are kept for
 * the diagnostic. A filter is first compiled in a forked child, which reports jq's message and
 * exits: Debian's libjq 1.6 leaks an allocation when a syntax error is found inside a string
 * literal (unterminated, a bad escape, an error inside an interpolation: jq_compile then
 * jq_teardown and nothing else leaks 21 bytes), so this process compiles only a filter the
 * child compiled, and the sanitizer builds see no leak that is libjq's own.
 */
#include "sim/jq_pipe.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"

#include <errno.h>
#include <jq.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
 * Compiles filter in a forked child. Returns 1 when it compiles, 0 with jq's message in err when
 * it does not, -1 when no child could be made (the caller then compiles it here).
 */
static int compiles_in_child(const char *filter, struct jq_err *err)
{
        int fds[2], status = 0;
        ssize_t got = 0, r;
        pid_t pid;

        if (pipe(fds))
                return -1;
        pid = fork();
        if (pid < 0) {
                close(fds[0]);
                close(fds[1]);
                return -1;
        }
        if (pid == 0) {
                struct jq_err e = {{0}};
                jq_state *jq = jq_init();
                int ok;

                close(fds[0]);
                if (!jq)
                        _exit(2);
                jq_set_error_cb(jq, on_error, &e);
                ok = jq_compile(jq, filter);
                if (write(fds[1], e.msg, strlen(e.msg)) < 0)
                        _exit(2);
                _exit(ok ? 0 : 1); /* no teardown, no exit handlers: nothing to leak-check */
        }
        close(fds[1]);
        while ((size_t)got < sizeof(err->msg) - 1 &&
               (r = read(fds[0], err->msg + got, sizeof(err->msg) - 1 - (size_t)got)) > 0)
                got += r;
        err->msg[got] = '\0';
        close(fds[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) == 2)
                return -1;
        return WEXITSTATUS(status) == 0;
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
        if (compiles_in_child(filter, &err) == 0)
                return tsr_diag_set(diag, TSR_EPARSE, "jq: %s",
                                    err.msg[0] ? err.msg : "cannot compile the filter");
        err.msg[0] = '\0';
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
