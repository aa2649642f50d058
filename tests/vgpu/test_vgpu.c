/*
 * test_vgpu.c - the slice interposer (libtessera-vgpu.so) end to end over the fake CUDA driver
 * and NVML, in TAP. Each case starts vgpu_worker processes with the environment a container
 * would have (LD_PRELOAD of the interposer, LD_LIBRARY_PATH of the fakes, the CUDA_* slice
 * variables, a budget file of its own in a temporary directory) and drives them command by
 * command over pipes (vgpu_worker.c lists the commands), so the test decides the order of every
 * step across processes. This process never loads the interposer itself.
 *
 *   test_vgpu GROUP      fake | memory | runtime | processes | env | compute | compute_paths
 *
 * Paths come from the environment: TSR_VGPU_WORKER (the worker), TSR_VGPU_FAKE_DIR (libcuda.so.1
 * and libnvidia-ml.so.1), TSR_VGPU_LIB (the interposer; not needed by `fake`, which checks the
 * fakes bare, with the same suites). Owns the workers it starts (each waited for) and the
 * temporary directory (removed at exit).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB               ((uint64_t)1 << 20)
#define GIB               ((uint64_t)1 << 30)
#define LIMIT             (64 * MIB)
#define GRANULE           (2 * MIB)
#define OOM               2 /* CUDA_ERROR_OUT_OF_MEMORY */
#define VARS_MAX          16
#define CHUNKS_MAX        8
#define REPLY_MAX         8
#define SM_TARGET         0.30
#define SM_TOLERANCE      0.06
#define PATH_TOLERANCE    0.10
#define ANSWER_TIMEOUT_MS 10000

extern char **environ;

static const char *worker_path, *fake_dir, *lib_path;
static char tmp_dir[PATH_MAX];
static int n_tests, n_failed, n_cache;

/* ---- TAP ---------------------------------------------------------------------------------- */

static void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void diag(const char *fmt, ...)
{
        va_list ap;

        fputs("# ", stdout);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

static bool check(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool check(bool cond, const char *fmt, ...)
{
        va_list ap;

        n_tests++;
        if (!cond)
                n_failed++;
        printf("%sok %d - ", cond ? "" : "not ", n_tests);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
        return cond;
}

/* ---- workers ------------------------------------------------------------------------------ */

struct worker {
        pid_t pid;
        FILE *to;
        int from;       /* the worker's stdout */
        int timeout_ms; /* how long an answer may take */
        char err_path[PATH_MAX + 32];
        int failed_at_start;
        bool dead;
};

struct reply {
        int n;               /* numbers read; 0 when the worker did not answer */
        double v[REPLY_MAX]; /* v[0]: the call's return code */
};

/* A malloc'ed formatted string; aborts without memory. */
static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *format(const char *fmt, ...)
{
        va_list ap;
        char *s;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        s = n < 0 ? NULL : malloc((size_t)n + 1);
        if (!s)
                abort();
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
        return s;
}

static bool has_prefix(const char *s, const char *prefix)
{
        return !strncmp(s, prefix, strlen(prefix));
}

static bool var_set(const char *const *vars, const char *name)
{
        for (; *vars; vars++)
                if (has_prefix(*vars, name) && (*vars)[strlen(name)] == '=')
                        return true;
        return false;
}

/*
 * The worker's environment: this one's without the slice and fake variables and the loader's,
 * then vars, the fakes' directory, the interposer (preload), ASAN_OPTIONS that let an
 * instrumented interposer load into an instrumented worker, and a budget file of the case's own
 * unless vars name one. Returns a malloc'ed array of malloc'ed strings.
 */
static char **child_env(const char *const *vars, bool preload)
{
        static const char *const dropped[] = {"CUDA_",
                                              "FAKE_CUDA_",
                                              "LD_PRELOAD=",
                                              "LD_LIBRARY_PATH=",
                                              "ASAN_OPTIONS=",
                                              "GPU_CORE_UTILIZATION_POLICY=",
                                              "LIBCUDA_LOG_LEVEL="};
        const char *asan = getenv("ASAN_OPTIONS");
        size_t n = 0, i, k;
        char **env;

        for (char **e = environ; *e; e++)
                n++;
        env = calloc(n + VARS_MAX + 8, sizeof(*env));
        if (!env)
                abort();
        n = 0;
        for (char **e = environ; *e; e++) {
                bool keep = true;

                for (k = 0; k < sizeof(dropped) / sizeof(dropped[0]); k++)
                        keep = keep && !has_prefix(*e, dropped[k]);
                if (keep)
                        env[n++] = strdup(*e);
        }
        for (i = 0; vars[i]; i++)
                env[n++] = strdup(vars[i]);
        env[n++] = format("LD_LIBRARY_PATH=%s", fake_dir);
        env[n++] = format("ASAN_OPTIONS=%s%sverify_asan_link_order=0", asan ? asan : "",
                          asan && *asan ? ":" : "");
        if (preload)
                env[n++] = format("LD_PRELOAD=%s", lib_path);
        if (!var_set(vars, "CUDA_DEVICE_MEMORY_SHARED_CACHE"))
                env[n++] =
                    format("CUDA_DEVICE_MEMORY_SHARED_CACHE=%s/cache-%d", tmp_dir, ++n_cache);
        for (i = 0; i < n; i++)
                if (!env[i])
                        abort();
        return env;
}

static void free_env(char **env)
{
        for (char **e = env; *e; e++)
                free(*e);
        free(env);
}

/* Starts a worker with vars (NULL-terminated) in its environment, preloaded unless bare. */
static void worker_start(struct worker *w, const char *const *vars, bool preload)
{
        static int serial;
        int in[2], out[2], err;
        char **env = child_env(vars, preload);

        memset(w, 0, sizeof(*w));
        snprintf(w->err_path, sizeof(w->err_path), "%s/stderr-%d", tmp_dir, ++serial);
        w->failed_at_start = n_failed;
        w->timeout_ms = ANSWER_TIMEOUT_MS;
        err = open(w->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (err < 0 || pipe(in) || pipe(out)) {
                perror("test_vgpu: worker pipes");
                exit(1);
        }
        fflush(stdout);
        w->pid = fork();
        if (w->pid < 0) {
                perror("test_vgpu: fork");
                exit(1);
        }
        if (w->pid == 0) {
                char *argv[] = {(char *)(uintptr_t)worker_path, NULL};

                dup2(in[0], 0);
                dup2(out[1], 1);
                dup2(err, 2);
                close(in[0]);
                close(in[1]);
                close(out[0]);
                close(out[1]);
                execve(worker_path, argv, env);
                perror("test_vgpu: exec worker");
                _exit(127);
        }
        free_env(env);
        close(in[0]);
        close(out[1]);
        close(err);
        w->to = fdopen(in[1], "w");
        w->from = out[0];
        if (!w->to) {
                perror("test_vgpu: fdopen");
                exit(1);
        }
}

/* The worker's stderr, as diagnostics. */
static void dump_stderr(const struct worker *w)
{
        char line[512];
        FILE *f = fopen(w->err_path, "r");

        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = 0;
                diag("worker %ld stderr: %s", (long)w->pid, line);
        }
        fclose(f);
}

/* Whether the worker's stderr contains s. */
static bool stderr_has(const struct worker *w, const char *s)
{
        char line[1024];
        bool found = false;
        FILE *f = fopen(w->err_path, "r");

        while (f && !found && fgets(line, sizeof(line), f))
                found = strstr(line, s) != NULL;
        if (f)
                fclose(f);
        return found;
}

/* Ends the worker (exit command, or SIGKILL when kill) and waits for it. Returns its status. */
static int worker_stop(struct worker *w, bool kill_it)
{
        int status = 0;

        if (kill_it || w->dead) {
                kill(w->pid, SIGKILL);
        } else if (!w->dead) {
                fputs("exit\n", w->to);
                fflush(w->to);
        }
        fclose(w->to);
        close(w->from);
        while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (!kill_it && !w->dead && (!WIFEXITED(status) || WEXITSTATUS(status)))
                check(false, "worker %ld exits cleanly (status 0x%x)", (long)w->pid, status);
        if (n_failed > w->failed_at_start)
                dump_stderr(w);
        unlink(w->err_path);
        return status;
}

/* Reads one line of the worker's answer into line; false on EOF or after w->timeout_ms. */
static bool read_line(struct worker *w, char *line, size_t len)
{
        struct pollfd pfd = {.fd = w->from, .events = POLLIN};
        size_t n = 0;
        char c;

        while (n + 1 < len) {
                int ready = poll(&pfd, 1, w->timeout_ms);

                if (ready < 0 && errno == EINTR)
                        continue;
                if (ready <= 0 || read(w->from, &c, 1) != 1)
                        return false;
                if (c == '\n')
                        break;
                line[n++] = c;
        }
        line[n] = '\0';
        return true;
}

/* Sends one command, reads the numbers of its answer (a worker that does not answer is dead). */
static struct reply ask(struct worker *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static struct reply ask(struct worker *w, const char *fmt, ...)
{
        struct reply r = {.n = 0, .v = {-1}};
        char cmd[256], line[512], *p = line, *end;
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        if (w->dead)
                return r;
        if (fprintf(w->to, "%s\n", cmd) < 0 || fflush(w->to) || !read_line(w, line, sizeof(line))) {
                check(false, "worker %ld answers \"%s\" within %d s", (long)w->pid, cmd,
                      w->timeout_ms / 1000);
                w->dead = true;
                return r;
        }
        while (r.n < REPLY_MAX) {
                double v = strtod(p, &end);

                if (end == p)
                        break;
                r.v[r.n++] = v;
                p = end;
        }
        return r;
}

static int rc_of(struct reply r)
{
        return r.n ? (int)r.v[0] : -1;
}

static uint64_t u(struct reply r, int i)
{
        return i < r.n ? (uint64_t)r.v[i] : UINT64_MAX;
}

/* A worker with init and a context on device 0 done; false (reported) when either failed. */
static bool worker_ready(struct worker *w, const char *const *vars, bool preload, const char *mode)
{
        int rc_mode = 0, rc_init, rc_ctx;

        worker_start(w, vars, preload);
        if (mode)
                rc_mode = rc_of(ask(w, "mode %s", mode));
        rc_init = rc_of(ask(w, "init"));
        rc_ctx = rc_of(ask(w, "ctx 0"));
        if (rc_mode || rc_init || rc_ctx) {
                check(false, "worker set up (mode %d, cuInit %d, cuCtxCreate %d)", rc_mode, rc_init,
                      rc_ctx);
                return false;
        }
        return true;
}

/* ---- memory: every allocation path fills a slice exactly ---------------------------------- */

struct chunk {
        char cmd[96];
        uint64_t bytes;
};

struct path_fill {
        const char *name;
        struct chunk chunks[CHUNKS_MAX];
        int n;
        struct chunk extra; /* the smallest allocation the path can make */
};

static void add(struct path_fill *p, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add(struct path_fill *p, uint64_t bytes, const char *fmt, ...)
{
        va_list ap;
        struct chunk *c;

        if (p->n == CHUNKS_MAX)
                abort();
        c = &p->chunks[p->n++];
        va_start(ap, fmt);
        vsnprintf(c->cmd, sizeof(c->cmd), fmt, ap);
        va_end(ap);
        c->bytes = bytes;
}

static void set_extra(struct path_fill *p, uint64_t bytes, const char *cmd)
{
        snprintf(p->extra.cmd, sizeof(p->extra.cmd), "%s", cmd);
        p->extra.bytes = bytes;
}

/*
 * The chunks that fill exactly limit (a multiple of 4 MiB) by path on device dev. Array formats:
 * 0x01 uint8 (1 byte), 0x02 uint16, 0x03 uint32, 0x10 half, 0x20 float.
 */
static struct path_fill fill_for(const char *path, int dev, uint64_t limit)
{
        struct path_fill p = {.name = path};
        uint64_t q = limit / 4, sum, rest;
        int i;

        if (!strcmp(path, "pitch")) {
                /* width 1000 pitches to 1024: the budget counts pitch x height */
                for (i = 0; i < 4; i++)
                        add(&p, q, "alloc pitch 1000 %" PRIu64 " 4", q / 1024);
                set_extra(&p, 512, "alloc pitch 1 1 4");
        } else if (!strcmp(path, "array")) {
                add(&p, q, "alloc array 1024 %" PRIu64 " 0x20 4", q / 16384);
                add(&p, q, "alloc array 1024 %" PRIu64 " 0x20 4", q / 16384);
                add(&p, q, "alloc array %" PRIu64 " 0 0x01 1", q);
                add(&p, q, "alloc array 1024 %" PRIu64 " 0x02 1", q / 2048);
                set_extra(&p, 1, "alloc array 1 0 0x01 1");
        } else if (!strcmp(path, "array3d")) {
                add(&p, q, "alloc array3d 256 256 %" PRIu64 " 0x10 2", q / (256 * 256 * 4));
                add(&p, q, "alloc array3d 256 256 %" PRIu64 " 0x10 2", q / (256 * 256 * 4));
                add(&p, q, "alloc array3d %" PRIu64 " 1024 0 0x01 1", q / 1024);
                add(&p, q, "alloc array3d %" PRIu64 " 0 0 0x03 1", q / 4);
                set_extra(&p, 1, "alloc array3d 1 0 0 0x01 1");
        } else if (!strcmp(path, "mipmap")) {
                /* 2D: 1024^2 + 512^2; 3D: 64^3 + 32^3 + 16^3; 8x2 down to 1x1: 16 + 4 + 2 + 1 */
                add(&p, 1310720, "alloc mipmap 1024 1024 0 0x01 1 2");
                add(&p, 299008, "alloc mipmap 64 64 64 0x01 1 3");
                add(&p, 23, "alloc mipmap 8 2 0 0x01 1 4");
                for (sum = 0, i = 0; i < p.n; i++)
                        sum += p.chunks[i].bytes;
                rest = limit - sum;
                add(&p, rest / 1024 * 1024, "alloc mipmap 1024 %" PRIu64 " 0 0x01 1 1",
                    rest / 1024);
                if (rest % 1024)
                        add(&p, rest % 1024, "alloc mipmap %" PRIu64 " 0 0 0x01 1 1", rest % 1024);
                set_extra(&p, 1, "alloc mipmap 1 0 0 0x01 1 1");
        } else if (!strcmp(path, "vmm")) {
                for (i = 0; i < 4; i++)
                        add(&p, q, "alloc vmm %" PRIu64 " %d", q, dev);
                snprintf(p.extra.cmd, sizeof(p.extra.cmd), "alloc vmm %" PRIu64 " %d", GRANULE,
                         dev);
                p.extra.bytes = GRANULE;
        } else {
                for (i = 0; i < 4; i++)
                        add(&p, q, "alloc %s %" PRIu64, path, q);
                snprintf(p.extra.cmd, sizeof(p.extra.cmd), "alloc %s 1", path);
                p.extra.bytes = 1;
        }
        return p;
}

static const char *const all_paths[] = {"v2",   "v1",    "pitch",   "managed", "async",
                                        "pool", "array", "array3d", "mipmap",  "vmm"};

/*
 * One path on a worker whose device-0 slice is limit bytes and empty: fill it exactly chunk by
 * chunk (cuMemGetInfo's free falling by each), one more allocation fails with
 * CUDA_ERROR_OUT_OF_MEMORY, NVML reports the slice full, a freed chunk can be allocated again,
 * and freeing everything gives the whole slice back. dev: the device of the worker's current
 * context (the NVML index checked); tag names the case in the TAP lines.
 */
static void fill_path(struct worker *w, const char *tag, const char *path, int dev, uint64_t limit)
{
        struct path_fill p = fill_for(path, dev, limit);
        long ids[CHUNKS_MAX];
        uint64_t used = 0;
        struct reply r;
        int i, bad = -1, rc = 0;

        for (i = 0; i < p.n && bad < 0; i++) {
                r = ask(w, "%s", p.chunks[i].cmd);
                ids[i] = (long)r.v[1];
                used += p.chunks[i].bytes;
                if (rc_of(r)) {
                        rc = rc_of(r);
                        bad = i;
                        break;
                }
                if (!strcmp(path, "pitch") && u(r, 2) != 1024) {
                        diag("pitch of width 1000: %" PRIu64 ", want 1024", u(r, 2));
                        bad = i;
                }
                r = ask(w, "meminfo");
                if (rc_of(r) || u(r, 1) != limit - used || u(r, 2) != limit) {
                        diag("after %s: cuMemGetInfo_v2 rc %d free %" PRIu64 " total %" PRIu64
                             ", want free %" PRIu64 " total %" PRIu64,
                             p.chunks[i].cmd, rc_of(r), u(r, 1), u(r, 2), limit - used, limit);
                        bad = i;
                }
        }
        if (!check(bad < 0,
                   "%s %s: %d allocations fill exactly %" PRIu64
                   " MiB, cuMemGetInfo_v2 free falling by each",
                   tag, path, p.n, limit / MIB)) {
                diag("failed at \"%s\" (rc %d)", bad >= 0 ? p.chunks[bad].cmd : "?", rc);
                return;
        }
        r = ask(w, "%s", p.extra.cmd);
        check(rc_of(r) == OOM, "%s %s: one more %" PRIu64 "-byte allocation fails with 2 (got %d)",
              tag, path, p.extra.bytes, rc_of(r));
        if (rc_of(r) == 0)
                ask(w, "free %ld", (long)r.v[1]);
        r = ask(w, "nvml %d", dev);
        check(rc_of(r) == 0 && u(r, 1) == limit && u(r, 2) == limit && u(r, 3) == 0,
              "%s %s: nvmlDeviceGetMemoryInfo total %" PRIu64 " used %" PRIu64 " free %" PRIu64
              " (want %" PRIu64 " %" PRIu64 " 0)",
              tag, path, u(r, 1), u(r, 2), u(r, 3), limit, limit);
        r = ask(w, "nvml2 %d", dev);
        check(rc_of(r) == 0 && u(r, 1) == limit && u(r, 2) == limit && u(r, 3) == 0,
              "%s %s: nvmlDeviceGetMemoryInfo_v2 total %" PRIu64 " used %" PRIu64 " free %" PRIu64,
              tag, path, u(r, 1), u(r, 2), u(r, 3));
        rc = rc_of(ask(w, "free %ld", ids[0]));
        r = ask(w, "%s", p.chunks[0].cmd);
        ids[0] = (long)r.v[1];
        check(rc == 0 && rc_of(r) == 0,
              "%s %s: a freed chunk of %" PRIu64
              " bytes can be allocated again (free %d, alloc %d)",
              tag, path, p.chunks[0].bytes, rc, rc_of(r));
        for (rc = 0, i = 0; i < p.n; i++)
                rc = rc ? rc : rc_of(ask(w, "free %ld", ids[i]));
        r = ask(w, "meminfo");
        check(rc == 0 && u(r, 1) == limit,
              "%s %s: everything freed (rc %d), cuMemGetInfo_v2 free %" PRIu64 " again", tag, path,
              rc, u(r, 1));
}

/*
 * Every path, each on a fresh worker (vars, preloaded unless bare, entry points of mode, current
 * context on device dev) so that one path's failure does not carry into the next.
 */
static void memory_suite(const char *const *vars, bool preload, const char *mode, int dev,
                         const char *tag, uint64_t limit)
{
        struct worker w;

        for (size_t i = 0; i < sizeof(all_paths) / sizeof(all_paths[0]); i++) {
                if (worker_ready(&w, vars, preload, mode) &&
                    (!dev || check(rc_of(ask(&w, "ctx %d", dev)) == 0, "%s: context on device %d",
                                   tag, dev)))
                        fill_path(&w, tag, all_paths[i], dev, limit);
                worker_stop(&w, false);
        }
}

/* ---- groups ------------------------------------------------------------------------------- */

/* The fakes alone: the suite's arithmetic against a 64 MiB device, and the driver contract. */
static void group_fake(void)
{
        const char *small[] = {"FAKE_CUDA_TOTAL_MIB=64", NULL};
        const char *none[] = {NULL};
        struct worker w;
        struct reply r;
        int i, rc;

        worker_start(&w, none, false);
        r = ask(&w, "meminfo");
        check(rc_of(r) == 3, "fake: cuMemGetInfo_v2 before cuInit is NOT_INITIALIZED (%d)",
              rc_of(r));
        check(rc_of(ask(&w, "ctx 0")) == 3, "fake: cuCtxCreate before cuInit is NOT_INITIALIZED");
        check(rc_of(ask(&w, "init")) == 0, "fake: cuInit");
        check(rc_of(ask(&w, "alloc v2 1")) == 201, "fake: cuMemAlloc_v2 without a context is "
                                                   "INVALID_CONTEXT");
        check(rc_of(ask(&w, "ctx 1")) == 101, "fake: cuCtxCreate on a missing device is "
                                              "INVALID_DEVICE");
        check(rc_of(ask(&w, "ctx 0")) == 0, "fake: cuCtxCreate_v2");
        r = ask(&w, "procs 0");
        check(rc_of(r) == 0 && u(r, 1) == 1 && u(r, 2) == (uint64_t)w.pid,
              "fake: NVML lists the worker's pid once it has a context (%" PRIu64 " %" PRIu64 ")",
              u(r, 1), u(r, 2));
        for (rc = 0, i = 0; i < 8 && !rc; i++)
                rc = rc_of(ask(&w, "alloc v2 %" PRIu64, 10 * GIB));
        check(rc == 0, "fake: the whole 80 GiB device allocates in 8 x 10 GiB (%d)", rc);
        check(rc_of(ask(&w, "alloc v2 1")) == OOM, "fake: one byte more is OUT_OF_MEMORY");
        r = ask(&w, "meminfo");
        check(u(r, 1) == 0 && u(r, 2) == 80 * GIB, "fake: cuMemGetInfo_v2 free 0 total 80 GiB");
        r = ask(&w, "procs 0");
        check(u(r, 3) == 80 * GIB, "fake: NVML process used memory 80 GiB (%" PRIu64 ")", u(r, 3));
        for (rc = 0, i = 0; i < 8 && !rc; i++)
                rc = rc_of(ask(&w, "free %d", i));
        check(rc == 0, "fake: freed");
        check(rc_of(ask(&w, "free 0")) == 1, "fake: a second free is INVALID_VALUE");
        check(rc_of(ask(&w, "freeraw 0x1234")) == 1, "fake: a free of an unknown pointer is "
                                                     "INVALID_VALUE");
        check(rc_of(ask(&w, "alloc v2 0")) == 1, "fake: a zero-byte allocation is INVALID_VALUE");
        check(rc_of(ask(&w, "alloc pitch 16 16 3")) == 1,
              "fake: cuMemAllocPitch with element size 3 is INVALID_VALUE");
        r = ask(&w, "gpa cuMemAlloc 12000 0 cuMemAlloc_v2");
        check(rc_of(r) == 0 && u(r, 2) == 1, "fake: cuGetProcAddress_v2 cuMemAlloc 12000 is "
                                             "cuMemAlloc_v2");
        r = ask(&w, "gpa cuMemAlloc 3000 0 cuMemAlloc");
        check(rc_of(r) == 0 && u(r, 2) == 1, "fake: cuGetProcAddress_v2 cuMemAlloc 3000 is "
                                             "cuMemAlloc");
        r = ask(&w, "gpa cuLaunchKernel 12000 2 cuLaunchKernel_ptsz");
        check(rc_of(r) == 0 && u(r, 2) == 1, "fake: the per-thread flag gives cuLaunchKernel_ptsz");
        r = ask(&w, "gpa cuLaunchKernel 12000 0 cuLaunchKernel");
        check(rc_of(r) == 0 && u(r, 2) == 1, "fake: no flag gives cuLaunchKernel");
        r = ask(&w, "gpa cuNoSuchCall 12000 0 cuInit");
        check(rc_of(r) == 500 && u(r, 1) == 1, "fake: an unknown name is NOT_FOUND, "
                                               "SYMBOL_NOT_FOUND");
        r = ask(&w, "gpa cuMemAllocAsync 11000 0 cuMemAllocAsync");
        check(rc_of(r) == 500 && u(r, 1) == 2, "fake: a name newer than cudaVersion is "
                                               "VERSION_NOT_SUFFICIENT");
        r = ask(&w, "compute 300 100 kernel");
        check(rc_of(r) == 0 && r.v[1] > 0.95,
              "fake: back-to-back launches keep the device busy "
              "(%.3f)",
              r.v[1]);
        r = ask(&w, "util 0");
        check(rc_of(r) == 0 && u(r, 1) >= 90,
              "fake: NVML utilization right after is %" PRIu64 " %%", u(r, 1));
        check(rc_of(ask(&w, "pop")) == 0 && rc_of(ask(&w, "meminfo")) == 201,
              "fake: after cuCtxPopCurrent there is no current context");
        check(rc_of(ask(&w, "primary 0")) == 0 && rc_of(ask(&w, "meminfo")) == 0,
              "fake: the retained primary context, made current, serves cuMemGetInfo");
        worker_stop(&w, false);

        memory_suite(small, false, NULL, 0, "fake 64 MiB device", 64 * MIB);
}

static void group_memory(void)
{
        const char *vars[] = {"CUDA_DEVICE_MEMORY_LIMIT=64m", NULL};
        const char *two[] = {"FAKE_CUDA_DEVICES=2", "CUDA_DEVICE_MEMORY_LIMIT=64m",
                             "CUDA_DEVICE_MEMORY_LIMIT_1=32m", NULL};
        const char *small_dev[] = {"FAKE_CUDA_TOTAL_MIB=48", "CUDA_DEVICE_MEMORY_LIMIT=64m", NULL};
        struct worker w;
        struct reply r;

        if (worker_ready(&w, vars, true, NULL)) {
                r = ask(&w, "totalmem 0");
                check(u(r, 1) == LIMIT, "cuDeviceTotalMem_v2 is the 64 MiB limit (%" PRIu64 ")",
                      u(r, 1));
                r = ask(&w, "meminfo1");
                check(rc_of(r) == 0 && u(r, 1) == LIMIT && u(r, 2) == LIMIT,
                      "cuMemGetInfo (v1) free %" PRIu64 " total %" PRIu64, u(r, 1), u(r, 2));
        }
        worker_stop(&w, false);
        memory_suite(vars, true, NULL, 0, "64 MiB", LIMIT);

        /* CUDA_DEVICE_MEMORY_LIMIT_1 overrides the limit for device 1. */
        if (worker_ready(&w, two, true, NULL)) {
                r = ask(&w, "totalmem 1");
                check(u(r, 1) == 32 * MIB, "device 1: cuDeviceTotalMem_v2 32 MiB (%" PRIu64 ")",
                      u(r, 1));
                r = ask(&w, "totalmem 0");
                check(u(r, 1) == LIMIT, "device 0: cuDeviceTotalMem_v2 64 MiB (%" PRIu64 ")",
                      u(r, 1));
                check(rc_of(ask(&w, "ctx 1")) == 0, "device 1: context");
                r = ask(&w, "meminfo");
                check(u(r, 1) == 32 * MIB && u(r, 2) == 32 * MIB,
                      "device 1: cuMemGetInfo_v2 free %" PRIu64 " total %" PRIu64, u(r, 1),
                      u(r, 2));
                check(rc_of(ask(&w, "alloc v2 %" PRIu64, 32 * MIB)) == 0, "device 1 filled");
                r = ask(&w, "nvml 1");
                check(u(r, 1) == 32 * MIB && u(r, 2) == 32 * MIB,
                      "device 1: NVML index 1 total %" PRIu64 " used %" PRIu64, u(r, 1), u(r, 2));
                r = ask(&w, "nvml 0");
                check(u(r, 1) == LIMIT && u(r, 2) == 0,
                      "device 0: NVML index 0 total %" PRIu64 " used %" PRIu64, u(r, 1), u(r, 2));
                check(rc_of(ask(&w, "pop")) == 0, "back to the device 0 context");
                r = ask(&w, "alloc vmm 2097152 1");
                check(rc_of(r) == OOM,
                      "cuMemCreate for device 1 from a device 0 context is charged to full "
                      "device 1 (%d)",
                      rc_of(r));
                r = ask(&w, "alloc vmm %" PRIu64 " 0", 64 * MIB);
                check(rc_of(r) == 0, "device 0 still has its 64 MiB (cuMemCreate %d)", rc_of(r));
        }
        worker_stop(&w, false);

        memory_suite(two, true, NULL, 1, "device 1 (32 MiB)", 32 * MIB);

        /* A limit above the device's memory: the device is the limit. */
        if (worker_ready(&w, small_dev, true, NULL)) {
                r = ask(&w, "totalmem 0");
                check(u(r, 1) == 48 * MIB,
                      "48 MiB device, 64 MiB limit: cuDeviceTotalMem_v2 48 MiB (%" PRIu64 ")",
                      u(r, 1));
                r = ask(&w, "meminfo");
                check(u(r, 1) == 48 * MIB && u(r, 2) == 48 * MIB,
                      "48 MiB device, 64 MiB limit: cuMemGetInfo_v2 free %" PRIu64 " total %" PRIu64
                      " (the device's, the smaller)",
                      u(r, 1), u(r, 2));
                check(rc_of(ask(&w, "alloc v2 %" PRIu64, 48 * MIB)) == 0 &&
                          rc_of(ask(&w, "alloc v2 1")) == OOM,
                      "48 MiB device, 64 MiB limit: 48 MiB allocate, one byte more fails");
        }
        worker_stop(&w, false);
}

static void group_runtime(void)
{
        const char *vars[] = {"CUDA_DEVICE_MEMORY_LIMIT=64m", NULL};
        static const char *const modes[] = {"gpa2", "gpa1", "ptsz", "dlsym"};
        struct worker w;
        struct reply r;
        char tag[64];

        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
                snprintf(tag, sizeof(tag), "runtime-style (%s)", modes[i]);
                if (worker_ready(&w, vars, true, modes[i])) {
                        r = ask(&w, "totalmem 0");
                        check(u(r, 1) == LIMIT, "%s: cuDeviceTotalMem_v2 64 MiB (%" PRIu64 ")", tag,
                              u(r, 1));
                }
                worker_stop(&w, false);
                memory_suite(vars, true, modes[i], 0, tag, LIMIT);
        }
        /* What cuGetProcAddress_v2 gives for a base name is what dlsym gives for the versioned
         * name, through the interposer's dlsym too. */
        if (worker_ready(&w, vars, true, NULL)) {
                r = ask(&w, "gpa cuMemAlloc 12000 0 cuMemAlloc_v2");
                check(rc_of(r) == 0 && u(r, 2) == 1,
                      "cuGetProcAddress_v2(cuMemAlloc, 12000) == dlsym(cuMemAlloc_v2)");
                r = ask(&w, "gpa cuMemGetInfo 12000 0 cuMemGetInfo_v2");
                check(rc_of(r) == 0 && u(r, 2) == 1,
                      "cuGetProcAddress_v2(cuMemGetInfo, 12000) == dlsym(cuMemGetInfo_v2)");
                r = ask(&w, "gpa cuLaunchKernel 12000 2 cuLaunchKernel_ptsz");
                check(rc_of(r) == 0 && u(r, 2) == 1,
                      "cuGetProcAddress_v2(cuLaunchKernel, per-thread) == "
                      "dlsym(cuLaunchKernel_ptsz)");
                r = ask(&w, "gpa cuNoSuchCall 12000 0 cuInit");
                check(rc_of(r) == 500 && u(r, 1) == 1,
                      "an unknown name is still NOT_FOUND, SYMBOL_NOT_FOUND (%d %" PRIu64 ")",
                      rc_of(r), u(r, 1));
        }
        worker_stop(&w, false);
}

static void group_processes(void)
{
        char cache[PATH_MAX + 32], cache_var[PATH_MAX + 64];
        const char *vars[] = {"CUDA_DEVICE_MEMORY_LIMIT=96m", cache_var, NULL};
        const char *vars64[] = {"CUDA_DEVICE_MEMORY_LIMIT=64m", cache_var, NULL};
        struct worker w[4];
        struct reply r;
        int i;

        snprintf(cache, sizeof(cache), "%s/shared-3", tmp_dir);
        snprintf(cache_var, sizeof(cache_var), "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s", cache);
        for (i = 0; i < 4; i++)
                worker_ready(&w[i], vars, true, NULL);
        for (i = 0; i < 3; i++) {
                r = ask(&w[i], "alloc v2 %" PRIu64, 32 * MIB);
                check(rc_of(r) == 0,
                      "3 processes, one 96 MiB budget: process %d allocates a "
                      "third (%d)",
                      i + 1, rc_of(r));
        }
        r = ask(&w[3], "alloc v2 1");
        check(rc_of(r) == OOM, "the fourth process's allocation of 1 byte fails with 2 (%d)",
              rc_of(r));
        r = ask(&w[0], "alloc managed 1");
        check(rc_of(r) == OOM, "process 1's next allocation fails too (%d)", rc_of(r));
        r = ask(&w[2], "meminfo");
        check(u(r, 1) == 0 && u(r, 2) == 96 * MIB,
              "process 3 sees cuMemGetInfo_v2 free %" PRIu64 " total %" PRIu64, u(r, 1), u(r, 2));
        r = ask(&w[3], "nvml 0");
        check(u(r, 2) == 96 * MIB && u(r, 3) == 0,
              "process 4 sees NVML used %" PRIu64 " free %" PRIu64 " (the container's)", u(r, 2),
              u(r, 3));
        check(rc_of(ask(&w[1], "free 0")) == 0, "process 2 frees its third");
        r = ask(&w[3], "alloc v2 %" PRIu64, 32 * MIB);
        check(rc_of(r) == 0, "process 4 now allocates that third (%d)", rc_of(r));
        for (i = 0; i < 4; i++)
                worker_stop(&w[i], false);
        unlink(cache);

        /* A SIGKILLed process's bytes go back to the budget. */
        snprintf(cache, sizeof(cache), "%s/shared-kill", tmp_dir);
        snprintf(cache_var, sizeof(cache_var), "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s", cache);
        worker_ready(&w[0], vars64, true, NULL);
        worker_ready(&w[1], vars64, true, NULL);
        check(rc_of(ask(&w[0], "alloc v2 %" PRIu64, 48 * MIB)) == 0 &&
                  rc_of(ask(&w[0], "alloc array 1024 16384 0x01 1")) == 0,
              "a child takes the whole 64 MiB budget (48 MiB linear, a 16 MiB array)");
        r = ask(&w[1], "alloc v2 1");
        check(rc_of(r) == OOM, "the parent cannot allocate a byte (%d)", rc_of(r));
        worker_stop(&w[0], true);
        r = ask(&w[1], "meminfo");
        check(u(r, 1) == LIMIT,
              "after SIGKILL of the child, cuMemGetInfo_v2 free %" PRIu64 " (64 MiB)", u(r, 1));
        r = ask(&w[1], "alloc v2 %" PRIu64, LIMIT);
        check(rc_of(r) == 0, "the parent allocates the 64 MiB (%d)", rc_of(r));
        check(rc_of(ask(&w[1], "free 0")) == 0, "and frees them");

        /* The same, without cuMemGetInfo first: the allocation itself reclaims. */
        worker_ready(&w[0], vars64, true, NULL);
        check(rc_of(ask(&w[0], "alloc vmm %" PRIu64 " 0", LIMIT)) == 0,
              "a second child takes 64 MiB "
              "(cuMemCreate)");
        worker_stop(&w[0], true);
        r = ask(&w[1], "alloc v2 %" PRIu64, LIMIT);
        check(rc_of(r) == 0, "after its SIGKILL the parent's cuMemAlloc_v2 of 64 MiB succeeds (%d)",
              rc_of(r));
        check(rc_of(ask(&w[1], "free 1")) == 0, "and frees them");

        /* A process that exits without freeing. */
        worker_ready(&w[0], vars64, true, NULL);
        check(rc_of(ask(&w[0], "alloc v2 %" PRIu64, LIMIT)) == 0, "a third child takes 64 MiB");
        worker_stop(&w[0], false);
        r = ask(&w[1], "alloc v2 %" PRIu64, LIMIT);
        check(rc_of(r) == 0, "after it exits without freeing, the parent allocates 64 MiB (%d)",
              rc_of(r));
        worker_stop(&w[1], false);
        unlink(cache);
}

static void group_env(void)
{
        const char *bad[] = {"CUDA_DEVICE_MEMORY_LIMIT=12x", NULL};
        const char *bad_sm[] = {"CUDA_DEVICE_SM_LIMIT=lots", NULL};
        const char *bad_1[] = {"CUDA_DEVICE_MEMORY_LIMIT_1=1q", NULL};
        const char *off[] = {"CUDA_DISABLE_CONTROL=true", "CUDA_DEVICE_MEMORY_LIMIT=64m", NULL};
        const char *unlimited[] = {NULL};
        static const char *const spellings[] = {"67108864", "64m", "64M", "64MiB", "65536k"};
        const char *const *malformed[] = {bad, bad_sm, bad_1};
        const char *const names[] = {"CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT",
                                     "CUDA_DEVICE_MEMORY_LIMIT_1"};
        char var[64];
        const char *spelled[] = {var, NULL};
        struct worker w;
        struct reply r;
        int i, rc;

        for (i = 0; i < 3; i++) {
                worker_start(&w, malformed[i], true);
                rc = rc_of(ask(&w, "init"));
                check(rc != 0 && rc != -1, "%s: cuInit fails (%d)", malformed[i][0], rc);
                check(stderr_has(&w, names[i]), "%s: stderr names %s", malformed[i][0], names[i]);
                worker_stop(&w, false);
        }

        for (i = 0; i < (int)(sizeof(spellings) / sizeof(spellings[0])); i++) {
                snprintf(var, sizeof(var), "CUDA_DEVICE_MEMORY_LIMIT=%s", spellings[i]);
                if (worker_ready(&w, spelled, true, NULL)) {
                        r = ask(&w, "meminfo");
                        check(u(r, 2) == LIMIT, "%s: cuMemGetInfo_v2 total %" PRIu64, var, u(r, 2));
                }
                worker_stop(&w, false);
        }

        if (worker_ready(&w, off, true, NULL)) {
                r = ask(&w, "alloc v2 %" PRIu64, GIB);
                check(rc_of(r) == 0,
                      "CUDA_DISABLE_CONTROL=true: 1 GiB allocates past a 64 MiB "
                      "limit (%d)",
                      rc_of(r));
                r = ask(&w, "meminfo");
                check(u(r, 2) == 80 * GIB && u(r, 1) == 79 * GIB,
                      "CUDA_DISABLE_CONTROL=true: cuMemGetInfo_v2 is the driver's (free %" PRIu64
                      " total %" PRIu64 ")",
                      u(r, 1), u(r, 2));
                r = ask(&w, "totalmem 0");
                check(u(r, 1) == 80 * GIB,
                      "CUDA_DISABLE_CONTROL=true: cuDeviceTotalMem_v2 80 GiB (%" PRIu64 ")",
                      u(r, 1));
                r = ask(&w, "nvml 0");
                check(u(r, 1) == 80 * GIB && u(r, 2) == GIB,
                      "CUDA_DISABLE_CONTROL=true: NVML total %" PRIu64 " used %" PRIu64, u(r, 1),
                      u(r, 2));
        }
        worker_stop(&w, false);

        /* No limit: the interposer is loaded, the whole device allocates. */
        if (worker_ready(&w, unlimited, true, NULL)) {
                for (rc = 0, i = 0; i < 8 && !rc; i++)
                        rc = rc_of(ask(&w, "alloc v2 %" PRIu64, 10 * GIB));
                check(rc == 0, "no limit: 80 GiB allocate through the interposer (%d)", rc);
                r = ask(&w, "alloc v2 1");
                check(rc_of(r) == OOM, "no limit: the device's own OUT_OF_MEMORY after (%d)",
                      rc_of(r));
                r = ask(&w, "meminfo");
                check(u(r, 1) == 0 && u(r, 2) == 80 * GIB,
                      "no limit: cuMemGetInfo_v2 free %" PRIu64 " total %" PRIu64, u(r, 1),
                      u(r, 2));
        }
        worker_stop(&w, false);
}

/* compute MS on a fresh worker with vars; returns the reply (rc, busy all, busy tail, count). */
static struct reply compute(const char *const *vars, const char *mode, unsigned ms, const char *how)
{
        struct reply r = {.n = 0, .v = {-1}};
        struct worker w;

        if (worker_ready(&w, vars, true, mode)) {
                w.timeout_ms = ANSWER_TIMEOUT_MS + 2 * (int)ms;
                r = ask(&w, "compute %u 100 %s", ms, how);
        }
        worker_stop(&w, false);
        return r;
}

static void group_compute(void)
{
        const char *sm30[] = {"CUDA_DEVICE_SM_LIMIT=30", NULL};
        const char *sm100[] = {"CUDA_DEVICE_SM_LIMIT=100", NULL};
        const char *off[] = {"CUDA_DEVICE_SM_LIMIT=30", "GPU_CORE_UTILIZATION_POLICY=disable",
                             NULL};
        const char *none[] = {NULL};
        struct reply r;

        r = compute(sm30, NULL, 3000, "kernel");
        diag("CUDA_DEVICE_SM_LIMIT=30, cuLaunchKernel of 1 ms kernels for 3 s: busy %.3f over "
             "the run, %.3f over its last 2 s, %.0f launches",
             r.v[1], r.v[2], r.v[3]);
        check(rc_of(r) == 0 && fabs(r.v[2] - SM_TARGET) <= SM_TOLERANCE,
              "CUDA_DEVICE_SM_LIMIT=30: busy %.3f over the last 2 s, within %.2f +- %.2f "
              "(error %+.3f)",
              r.v[2], SM_TARGET, SM_TOLERANCE, r.v[2] - SM_TARGET);

        r = compute(none, NULL, 500, "kernel");
        check(rc_of(r) == 0 && r.v[1] >= 0.9, "no SM limit: busy %.3f (>= 0.9)", r.v[1]);
        r = compute(sm100, NULL, 500, "kernel");
        check(rc_of(r) == 0 && r.v[1] >= 0.9, "CUDA_DEVICE_SM_LIMIT=100: busy %.3f (>= 0.9)",
              r.v[1]);
        r = compute(off, NULL, 500, "kernel");
        check(rc_of(r) == 0 && r.v[1] >= 0.9,
              "GPU_CORE_UTILIZATION_POLICY=disable: busy %.3f (>= 0.9)", r.v[1]);
}

/*
 * Every other launch path is throttled the same way: 2 s each, the busy fraction of the last
 * 1.33 s (the throttle settles within about a second) within PATH_TOLERANCE of the limit.
 */
static void group_compute_paths(void)
{
        const char *sm30[] = {"CUDA_DEVICE_SM_LIMIT=30", NULL};
        static const struct {
                const char *mode, *how, *what;
        } paths[] = {
            {NULL, "ex", "cuLaunchKernelEx"},
            {NULL, "coop", "cuLaunchCooperativeKernel"},
            {NULL, "graph", "cuGraphLaunch (100 blocks a launch)"},
            {"ptsz", "kernel", "cuLaunchKernel_ptsz from cuGetProcAddress_v2"},
        };
        struct reply r;

        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                r = compute(sm30, paths[i].mode, 2000, paths[i].how);
                check(rc_of(r) == 0 && fabs(r.v[2] - SM_TARGET) <= PATH_TOLERANCE,
                      "CUDA_DEVICE_SM_LIMIT=30, %s for 2 s: busy %.3f over the last 1.33 s, "
                      "within %.2f +- %.2f (%.3f over the run)",
                      paths[i].what, r.v[2], SM_TARGET, PATH_TOLERANCE, r.v[1]);
        }
}

/* ---- main --------------------------------------------------------------------------------- */

static void remove_tmp(void)
{
        char path[PATH_MAX * 2];
        struct dirent *e;
        DIR *d = opendir(tmp_dir);

        while (d && (e = readdir(d))) {
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                        snprintf(path, sizeof(path), "%s/%s", tmp_dir, e->d_name);
                        unlink(path);
                }
        }
        if (d)
                closedir(d);
        rmdir(tmp_dir);
}

int main(int argc, char **argv)
{
        static const struct {
                const char *name;
                void (*run)(void);
                bool needs_lib;
        } groups[] = {
            {"fake", group_fake, false},
            {"memory", group_memory, true},
            {"runtime", group_runtime, true},
            {"processes", group_processes, true},
            {"env", group_env, true},
            {"compute", group_compute, true},
            {"compute_paths", group_compute_paths, true},
        };
        const char *tmp = getenv("TMPDIR");
        size_t i;

        worker_path = getenv("TSR_VGPU_WORKER");
        fake_dir = getenv("TSR_VGPU_FAKE_DIR");
        lib_path = getenv("TSR_VGPU_LIB");
        if (argc != 2 || !worker_path || !fake_dir) {
                fprintf(stderr, "usage: TSR_VGPU_WORKER=... TSR_VGPU_FAKE_DIR=... "
                                "[TSR_VGPU_LIB=...] test_vgpu GROUP\n");
                return 2;
        }
        for (i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
                if (!strcmp(argv[1], groups[i].name))
                        break;
        if (i == sizeof(groups) / sizeof(groups[0]) || (groups[i].needs_lib && !lib_path)) {
                fprintf(stderr, "test_vgpu: unknown group %s, or TSR_VGPU_LIB unset\n", argv[1]);
                return 2;
        }
        snprintf(tmp_dir, sizeof(tmp_dir), "%s/tsr-vgpu-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(tmp_dir)) {
                perror("test_vgpu: mkdtemp");
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        groups[i].run();
        remove_tmp();
        printf("1..%d\n", n_tests);
        return n_failed ? 1 : 0;
}
