/*
 * vgpu_bench.c - what the slice interposer (libtessera-vgpu.so) adds to a CUDA call: the same
 * loops over the fake CUDA driver (tests/vgpu/libcuda.so.1), bare and through the interposer,
 * in one run.
 *
 * The bench re-executes itself (/proc/self/exe --child) once per configuration, each child with
 * its own environment, and prints the children's numbers side by side:
 *   bare          no LD_PRELOAD: the fake driver alone
 *   interposed    LD_PRELOAD of the interposer, CUDA_DEVICE_MEMORY_LIMIT=64g (the accounting
 *                 path: every allocation reserves in the shared budget file, every free returns)
 *   sm limit 100  the same with CUDA_DEVICE_SM_LIMIT=100, which must throttle nothing (the
 *                 launch path of an unlimited slice)
 * A child dlopen()s libcuda.so.1 (found through LD_LIBRARY_PATH) and takes its entry points with
 * dlsym on the handle, as the CUDA runtime does; under the interposer that answers the hooks,
 * which the child checks (cuMemGetInfo_v2's total is the 64 GiB limit) before timing. The fake
 * runs with FAKE_CUDA_BLOCK_NS=0, so a launch costs no device time and the numbers are the call
 * overhead alone.
 *
 *   cuMemAlloc_v2 + cuMemFree_v2   ns per pair (4 KiB), median of ROUNDS rounds of --iterations
 *   cuLaunchKernel                 ns per launch (grid 1), median of ROUNDS rounds of --launches
 *
 * Output: plain text, every number measured in this run. Exit status 1 when a child failed, or
 * the interposer was not in effect where it should be. Speed targets belong here, never in tests.
 */
#include "bench_common.h"

#include "vgpu/cuda_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS      7
#define ALLOC_BYTES 4096
#define SLICE_LIMIT "64g"
#define SLICE_BYTES (64ull << 30)
#define CONFIGS     3
#define LINE_MAX_   256

extern char **environ;

typedef CUresult module_load_fn(void **module, const void *image);
typedef CUresult get_function_fn(CUfunction *f, void *module, const char *name);

static struct {
        tsr_cu_init_fn *init;
        tsr_cu_ctx_create_fn *ctx_create;
        tsr_cu_mem_get_info_fn *mem_get_info;
        tsr_cu_mem_alloc_fn *alloc;
        tsr_cu_mem_free_fn *free;
        module_load_fn *module_load;
        get_function_fn *get_function;
        tsr_cu_launch_kernel_fn *launch;
} cu;

static const struct config {
        const char *name;
        bool preload;
        const char *sm_limit; /* CUDA_DEVICE_SM_LIMIT, or NULL */
} configs[CONFIGS] = {
    {"bare", false, NULL},
    {"interposed", true, NULL},
    {"sm limit 100", true, "100"},
};

static int compare(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

        return (x > y) - (x < y);
}

static int64_t median(int64_t *v, size_t n)
{
        qsort(v, n, sizeof(*v), compare);
        return v[n / 2];
}

static int resolve(void *h)
{
        static const char *const names[] = {
            "cuInit",       "cuCtxCreate_v2",   "cuMemGetInfo_v2",     "cuMemAlloc_v2",
            "cuMemFree_v2", "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel"};
        void *p[sizeof(names) / sizeof(names[0])];

        _Static_assert(sizeof(p) == sizeof(cu), "one name per entry point");
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                p[i] = dlsym(h, names[i]);
                if (!p[i]) {
                        fprintf(stderr, "bench_vgpu: dlsym %s: %s\n", names[i], dlerror());
                        return -1;
                }
        }
        memcpy(&cu, p, sizeof(cu));
        return 0;
}

/* A child: times the loops and prints "ALLOC_NS LAUNCH_NS" (per operation, median round). */
static int child(bool preload, long iterations, long launches)
{
        static const char image[] = "bench module";
        int64_t alloc_ns[ROUNDS], launch_ns[ROUNDS], t;
        CUcontext ctx = NULL;
        CUfunction fn = NULL;
        CUdeviceptr p = 0;
        void *module = NULL;
        size_t free_b = 0, total = 0;
        CUresult rc;
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

        if (!h) {
                fprintf(stderr, "bench_vgpu: dlopen libcuda.so.1: %s\n", dlerror());
                return 1;
        }
        if (resolve(h))
                return 1;
        rc = cu.init(0);
        if (!rc)
                rc = cu.ctx_create(&ctx, 0, 0);
        if (!rc)
                rc = cu.mem_get_info(&free_b, &total);
        if (!rc)
                rc = cu.module_load(&module, image);
        if (!rc)
                rc = cu.get_function(&fn, module, "empty");
        if (rc) {
                fprintf(stderr, "bench_vgpu: setting up the fake driver: CUresult %d\n", rc);
                return 1;
        }
        if (preload != (total == SLICE_BYTES)) {
                fprintf(stderr,
                        "bench_vgpu: cuMemGetInfo_v2 total %zu: the interposer is %s in effect\n",
                        total, preload ? "not" : "unexpectedly");
                return 1;
        }
        for (long i = 0; i < iterations / 10 && !rc; i++)
                rc = cu.alloc(&p, ALLOC_BYTES) ? 1 : cu.free(p);
        for (int r = 0; r < ROUNDS && !rc; r++) {
                t = bench_now_ns();
                for (long i = 0; i < iterations && !rc; i++) {
                        rc = cu.alloc(&p, ALLOC_BYTES);
                        if (!rc)
                                rc = cu.free(p);
                }
                alloc_ns[r] = (bench_now_ns() - t) / iterations;
        }
        for (int r = 0; r < ROUNDS && !rc; r++) {
                t = bench_now_ns();
                for (long i = 0; i < launches && !rc; i++)
                        rc = cu.launch(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
                launch_ns[r] = (bench_now_ns() - t) / launches;
        }
        if (rc) {
                fprintf(stderr, "bench_vgpu: a timed call failed: CUresult %d\n", rc);
                return 1;
        }
        printf("%lld %lld\n", (long long)median(alloc_ns, ROUNDS),
               (long long)median(launch_ns, ROUNDS));
        return 0;
}

/* The child's environment: this one's without the slice's variables and LD_PRELOAD, plus c's. */
static char **child_env(const struct config *c, const char *lib)
{
        size_t n = 0, k = 0;
        char **env;

        while (environ[n])
                n++;
        env = calloc(n + 8, sizeof(*env));
        if (!env)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (strncmp(environ[i], "CUDA_", 5) && strncmp(environ[i], "FAKE_CUDA_", 10) &&
                    strncmp(environ[i], "LD_PRELOAD=", 11) &&
                    strncmp(environ[i], "GPU_CORE_UTILIZATION_POLICY=", 28))
                        env[k++] = environ[i];
        env[k++] = "FAKE_CUDA_BLOCK_NS=0";
        env[k++] = "CUDA_DEVICE_MEMORY_LIMIT=" SLICE_LIMIT;
        if (c->preload) {
                static char preload[PATH_MAX + 16];

                snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", lib);
                env[k++] = preload;
        }
        if (c->sm_limit) {
                static char sm[64];

                snprintf(sm, sizeof(sm), "CUDA_DEVICE_SM_LIMIT=%s", c->sm_limit);
                env[k++] = sm;
        }
        return env;
}

/* Runs configuration c as a child; fills ns[0..1] from its line. Returns 0, or -1. */
static int run_child(const struct config *c, const char *lib, const char *cache, long iterations,
                     long launches, long long ns[2])
{
        char its[32], lch[32], cache_var[PATH_MAX + 48], line[LINE_MAX_];
        char *argv[] = {"bench_vgpu", "--child", its, lch, NULL};
        char **env = child_env(c, lib);
        int fds[2], status = 0, got;
        FILE *out;
        pid_t pid;

        if (!env || pipe(fds))
                return -1;
        snprintf(its, sizeof(its), "%ld", iterations);
        snprintf(lch, sizeof(lch), "%ld", launches);
        snprintf(cache_var, sizeof(cache_var), "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s", cache);
        for (size_t k = 0;; k++)
                if (!env[k]) {
                        env[k] = cache_var;
                        break;
                }
        fflush(stdout);
        pid = fork();
        if (pid == 0) {
                dup2(fds[1], 1);
                close(fds[0]);
                close(fds[1]);
                execve("/proc/self/exe", argv, env);
                perror("bench_vgpu: exec /proc/self/exe");
                _exit(127);
        }
        free(env);
        close(fds[1]);
        if (pid < 0) {
                close(fds[0]);
                return -1;
        }
        out = fdopen(fds[0], "r");
        got =
            out && fgets(line, sizeof(line), out) && sscanf(line, "%lld %lld", &ns[0], &ns[1]) == 2;
        if (out)
                fclose(out);
        else
                close(fds[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        unlink(cache);
        return got && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void usage(void)
{
        fprintf(stderr,
                "usage: bench_vgpu --lib PATH [--iterations N] [--launches N]\n"
                "  (LD_LIBRARY_PATH must name the fake driver's directory; bench/run_vgpu.sh "
                "sets it)\n");
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"lib", required_argument, NULL, 'l'},
                                             {"iterations", required_argument, NULL, 'i'},
                                             {"launches", required_argument, NULL, 'n'},
                                             {NULL, 0, NULL, 0}};
        long iterations = 200000, launches = 200000;
        long long ns[CONFIGS][2];
        const char *lib = NULL;
        char cache[] = "/tmp/tsr-vgpu-bench-XXXXXX", cpu[128];
        int o, fd, failed = 0;

        if (argc == 4 && !strcmp(argv[1], "--child"))
                return child(getenv("LD_PRELOAD") != NULL, atol(argv[2]), atol(argv[3]));
        while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (o == 'l')
                        lib = optarg;
                else if (o == 'i')
                        iterations = atol(optarg);
                else if (o == 'n')
                        launches = atol(optarg);
                else
                        return usage(), 2;
        }
        if (!lib || iterations <= 0 || launches <= 0 || optind != argc)
                return usage(), 2;
        fd = mkstemp(cache);
        if (fd < 0) {
                perror("bench_vgpu: mkstemp");
                return 1;
        }
        close(fd);
        for (int c = 0; c < CONFIGS; c++) {
                if (run_child(&configs[c], lib, cache, iterations, launches, ns[c])) {
                        fprintf(stderr, "bench_vgpu: the %s child failed\n", configs[c].name);
                        failed = 1;
                        ns[c][0] = ns[c][1] = 0;
                }
        }
        bench_cpu_model(cpu, sizeof(cpu));
        printf("bench_vgpu: the fake CUDA driver bare and through %s\n", lib);
        printf("machine: %s, load average %.2f; FAKE_CUDA_BLOCK_NS=0, median of %d rounds\n", cpu,
               bench_load_average(), ROUNDS);
        printf("%-36s %10s %12s %14s %12s %14s\n", "", "bare ns", "interposed", "ratio",
               "sm limit 100", "ratio");
        printf("%-36s %10lld %12lld %13.2fx %12lld %13.2fx\n", "cuMemAlloc_v2+cuMemFree_v2 (4 KiB)",
               ns[0][0], ns[1][0], ns[0][0] ? (double)ns[1][0] / (double)ns[0][0] : 0.0, ns[2][0],
               ns[0][0] ? (double)ns[2][0] / (double)ns[0][0] : 0.0);
        printf("%-36s %10lld %12lld %13.2fx %12lld %13.2fx\n", "cuLaunchKernel (grid 1)", ns[0][1],
               ns[1][1], ns[0][1] ? (double)ns[1][1] / (double)ns[0][1] : 0.0, ns[2][1],
               ns[0][1] ? (double)ns[2][1] / (double)ns[0][1] : 0.0);
        printf("(%ld alloc/free pairs and %ld launches per round)\n", iterations, launches);
        return failed;
}
