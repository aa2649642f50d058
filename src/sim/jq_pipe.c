/*
 * jq_pipe.c - libjq glue. The whole program (compile, parse the input, run) runs in a forked child
 * that writes its results to a pipe and exits without teardown; this process reads them under a
 * budget of wall time, resident memory and output size, and kills the child past any of them.
 *
 * Why a child: libjq 1.6 has no step or depth limit of its own. `def f: f; f` loops forever,
 * `def f: [f]; f` grows its heap-allocated stack until malloc fails and libjq aborts (SIGABRT),
 * and Debian's libjq 1.6 leaks allocations of its own on some filters (a syntax error inside a
 * string literal: 21 bytes each). In the child a hang, an abort or a leak costs that child only;
 * the simulator answers with an error naming the budget or the signal. The child exits with
 * _exit, so no leak checker runs there.
 *
 * Invariants: the caller's out buffer only grows when the program succeeded, by exactly what it
 * printed; the child is always reaped before sim_jq_run returns.
 */
#include "sim/jq_pipe.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"

#include <errno.h>
#include <jq.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The child's exit statuses. */
enum { CHILD_OK = 0, CHILD_PARSE = 1, CHILD_NOMEM = 2, CHILD_RUNTIME = 3, CHILD_IO = 4 };

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

static int write_all(int fd, const char *p, size_t n)
{
        while (n) {
                ssize_t w = write(fd, p, n);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -1;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* The child's message for the parent: at most what the parent reads, so that it never blocks. */
static void tell(int err_fd, const char *msg)
{
        size_t n = strlen(msg);

        (void)write_all(
            err_fd, msg,
            n < sizeof(((struct jq_err *)0)->msg) - 1 ? n : sizeof(((struct jq_err *)0)->msg) - 1);
}

/* The child: runs filter over input, results to out_fd, a message to err_fd; never returns. */
static _Noreturn void run_child(const char *filter, const char *input, int flags, bool raw,
                                int out_fd, int err_fd)
{
        struct jq_err err = {{0}};
        int status = CHILD_OK;
        jq_state *jq = jq_init();
        jv in, res;

        if (!jq)
                _exit(CHILD_NOMEM);
        jq_set_error_cb(jq, on_error, &err);
        if (!jq_compile(jq, filter)) {
                tell(err_fd, err.msg);
                _exit(CHILD_PARSE);
        }
        in = jv_parse(input);
        if (!jv_is_valid(in)) {
                tell(err_fd, "the command did not print JSON");
                _exit(CHILD_PARSE);
        }
        jq_start(jq, in, 0);
        for (res = jq_next(jq); jv_is_valid(res); res = jq_next(jq)) {
                jv s = raw && jv_get_kind(res) == JV_KIND_STRING
                           ? jv_copy(res)
                           : jv_dump_string(jv_copy(res), flags);

                if (write_all(out_fd, jv_string_value(s),
                              (size_t)jv_string_length_bytes(jv_copy(s))) ||
                    write_all(out_fd, "\n", 1))
                        _exit(CHILD_IO);
                jv_free(s);
                jv_free(res);
        }
        if (jv_invalid_has_msg(jv_copy(res))) {
                jv m = jv_invalid_get_msg(res);
                tell(err_fd, jv_get_kind(m) == JV_KIND_STRING ? jv_string_value(m) : "error");
                status = CHILD_RUNTIME;
        }
        _exit(status); /* no teardown, no exit handlers: libjq's own leaks die with the child */
}

static double seconds_since(const struct timespec *t0)
{
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The child's resident set in bytes (0 when /proc cannot tell). */
static size_t resident_bytes(pid_t pid)
{
        char path[64];
        unsigned long size = 0, resident = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
        f = fopen(path, "r");
        if (!f)
                return 0;
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
                resident = 0;
        fclose(f);
        return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Why the parent stopped the child. */
enum stop { RAN, PAST_TIME, PAST_MEMORY, PAST_OUTPUT, READ_FAILED };

/* Reads the child's results into got until it closes its end, stopping (SIGKILL) it past the
 * budget. */
static enum stop collect(pid_t pid, int fd, const struct sim_jq_budget *b, struct tsr_buf *got)
{
        struct timespec t0;
        char chunk[65536];

        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                enum stop why = RAN;
                int n = poll(&p, 1, 50);

                if (n < 0 && errno != EINTR)
                        why = READ_FAILED;
                else if (n > 0) {
                        ssize_t r = read(fd, chunk, sizeof(chunk));

                        if (r == 0)
                                return RAN;
                        if (r < 0 && errno != EINTR && errno != EAGAIN)
                                why = READ_FAILED;
                        else if (r > 0 && (got->len + (size_t)r > b->output_bytes ||
                                           tsr_buf_add(got, chunk, (size_t)r)))
                                why = PAST_OUTPUT;
                }
                if (why == RAN && seconds_since(&t0) > b->seconds)
                        why = PAST_TIME;
                if (why == RAN && resident_bytes(pid) > b->resident_bytes)
                        why = PAST_MEMORY;
                if (why != RAN) {
                        kill(pid, SIGKILL);
                        return why;
                }
        }
}

const struct sim_jq_budget sim_jq_default_budget = {
    .seconds = 5,
    .resident_bytes = (size_t)512 << 20,
    .output_bytes = (size_t)64 << 20,
};

int sim_jq_run_within(const struct sim_argv *args, const char *input,
                      const struct sim_jq_budget *budget, struct tsr_buf *out,
                      struct tsr_diag *diag)
{
        int flags = JV_PRINT_INDENT_FLAGS(2), status = 0, rc = 0, out_pipe[2], err_pipe[2];
        bool raw = false;
        const char *filter = NULL;
        struct tsr_buf got;
        struct jq_err err = {{0}};
        enum stop why;
        ssize_t n;
        pid_t pid;

        for (size_t i = 1; i < args->n; i++) {
                const char *a = args->v[i];

                if (!strcmp(a, "-c"))
                        flags = 0;
                else if (!strcmp(a, "-r"))
                        raw = true;
                else if (a[0] == '-' && a[1])
                        return tsr_diag_set(diag, TSR_EPARSE, "jq: unsupported option %s", a);
                else if (!filter)
                        filter = a;
                else
                        return tsr_diag_set(diag, TSR_EPARSE, "jq: reads standard input only");
        }
        if (!filter)
                filter = ".";
        if (pipe(out_pipe))
                return tsr_diag_set(diag, TSR_EIO, "jq: cannot make a pipe: %s", strerror(errno));
        if (pipe(err_pipe)) {
                close(out_pipe[0]);
                close(out_pipe[1]);
                return tsr_diag_set(diag, TSR_EIO, "jq: cannot make a pipe: %s", strerror(errno));
        }
        fflush(NULL); /* the child exits with _exit: nothing of ours is flushed twice */
        pid = fork();
        if (pid == 0) {
                close(out_pipe[0]);
                close(err_pipe[0]);
                run_child(filter, input, flags, raw, out_pipe[1], err_pipe[1]);
        }
        close(out_pipe[1]);
        close(err_pipe[1]);
        if (pid < 0) {
                close(out_pipe[0]);
                close(err_pipe[0]);
                return tsr_diag_set(diag, TSR_EIO, "jq: cannot start: %s", strerror(errno));
        }
        tsr_buf_init(&got);
        why = collect(pid, out_pipe[0], budget, &got);
        close(out_pipe[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        n = read(err_pipe[0], err.msg, sizeof(err.msg) - 1); /* written before exit: no wait */
        err.msg[n > 0 ? n : 0] = '\0';
        close(err_pipe[0]);

        if (why == PAST_TIME)
                rc = tsr_diag_set(diag, TSR_EINVAL,
                                  "jq: the filter was stopped after %u s (its time budget): "
                                  "does it recurse or loop without end?",
                                  budget->seconds);
        else if (why == PAST_MEMORY)
                rc = tsr_diag_set(diag, TSR_EINVAL,
                                  "jq: the filter was stopped at %zu MiB (its memory budget): "
                                  "does it recurse without end?",
                                  budget->resident_bytes >> 20);
        else if (why == PAST_OUTPUT)
                rc = tsr_diag_set(diag, TSR_EINVAL,
                                  "jq: the filter printed more than %zu MiB (its output budget)",
                                  budget->output_bytes >> 20);
        else if (why == READ_FAILED)
                rc = tsr_diag_set(diag, TSR_EIO, "jq: reading its output failed");
        else if (WIFSIGNALED(status))
                rc = tsr_diag_set(diag, TSR_EINVAL, "jq: libjq stopped on signal %d (%s)",
                                  WTERMSIG(status), strsignal(WTERMSIG(status)));
        else if (WEXITSTATUS(status) == CHILD_PARSE)
                rc = tsr_diag_set(diag, TSR_EPARSE, "jq: %s",
                                  err.msg[0] ? err.msg : "cannot compile the filter");
        else if (WEXITSTATUS(status) == CHILD_RUNTIME)
                rc = tsr_diag_set(diag, TSR_EINVAL, "jq: %s", err.msg);
        else if (WEXITSTATUS(status) == CHILD_NOMEM)
                rc = tsr_diag_set(diag, TSR_ENOMEM, "jq: cannot initialise");
        else if (WEXITSTATUS(status) != CHILD_OK)
                rc = tsr_diag_set(diag, TSR_EIO, "jq: writing its output failed");
        else
                rc = tsr_buf_add(out, got.ptr ? got.ptr : "", got.len);
        tsr_buf_release(&got);
        return rc;
}

int sim_jq_run(const struct sim_argv *args, const char *input, struct tsr_buf *out,
               struct tsr_diag *diag)
{
        return sim_jq_run_within(args, input, &sim_jq_default_budget, out, diag);
}
