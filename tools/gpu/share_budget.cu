/*
 * share_budget.cu - one process of the shared-budget check of the vgpu check
 * (tools/gpu/vgpu_check.sh): processes that name the same CUDA_DEVICE_MEMORY_SHARED_CACHE share
 * one CUDA_DEVICE_MEMORY_LIMIT.
 *
 * Usage:
 *   share_budget hold --mib N --ready FILE --release FILE [--max-wait S]
 *       cudaMalloc N MiB, create FILE ready (holding "ok" or "refused"), keep the memory until
 *       FILE release exists (at most S seconds, default 60), free it, exit.
 *   share_budget try --mib N
 *       cudaMalloc N MiB, free it, exit.
 * Both print "RESULT role=<hold|try> mib=<n> rc=<code> err=<name> got=ok|oom|error pid=<pid>"
 * and exit 0 when the allocation was granted, 3 when refused with cudaErrorMemoryAllocation,
 * 1 on any other error, 2 on bad usage. The script decides what was expected.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool exists(const char *path)
{
        return access(path, F_OK) == 0;
}

static void touch(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");

        if (f != NULL) {
                fputs(text, f);
                fclose(f);
        }
}

int main(int argc, char **argv)
{
        const char *role = argc > 1 ? argv[1] : "", *ready = NULL, *release = NULL;
        unsigned long long mib = 0;
        int max_wait = 60;
        void *p = NULL;
        cudaError_t rc;
        const char *got;

        for (int i = 2; i + 1 < argc; i += 2) {
                if (strcmp(argv[i], "--mib") == 0)
                        mib = strtoull(argv[i + 1], NULL, 10);
                else if (strcmp(argv[i], "--ready") == 0)
                        ready = argv[i + 1];
                else if (strcmp(argv[i], "--release") == 0)
                        release = argv[i + 1];
                else if (strcmp(argv[i], "--max-wait") == 0)
                        max_wait = atoi(argv[i + 1]);
        }
        if (mib == 0 || (strcmp(role, "try") != 0 &&
                         (strcmp(role, "hold") != 0 || ready == NULL || release == NULL))) {
                fprintf(stderr, "usage: share_budget hold|try --mib N [--ready F --release F]\n");
                return 2;
        }
        rc = cudaSetDevice(0);
        if (rc == cudaSuccess)
                rc = cudaFree(NULL);
        if (rc == cudaSuccess)
                rc = cudaMalloc(&p, mib << 20);
        got = rc == cudaSuccess ? "ok" : rc == cudaErrorMemoryAllocation ? "oom" : "error";
        printf("RESULT role=%s mib=%llu rc=%d err=%s got=%s pid=%d\n", role, mib, (int)rc,
               cudaGetErrorName(rc), got, (int)getpid());
        fflush(stdout);
        if (strcmp(role, "hold") == 0) {
                struct timespec tick = {0, 100 * 1000 * 1000};

                touch(ready, rc == cudaSuccess ? "ok\n" : "refused\n");
                for (int i = 0; i < max_wait * 10 && !exists(release); i++)
                        nanosleep(&tick, NULL);
        }
        if (rc == cudaSuccess)
                (void)cudaFree(p);
        return rc == cudaSuccess ? 0 : rc == cudaErrorMemoryAllocation ? 3 : 1;
}
