/*
 * alloc_limit.cu - the memory-limit probe of the vgpu check (tools/gpu/vgpu_check.sh), through
 * the CUDA runtime API (the path real frameworks take: cudart finds the driver's entry points
 * with cuGetProcAddress).
 *
 * Usage: alloc_limit --mode limited|bare --limit-mib L [--nvml-query PATH]
 *   limited: run with LD_PRELOAD=libtessera-vgpu.so and CUDA_DEVICE_MEMORY_LIMIT=<L>m; an
 *            allocation that would take the process past L must fail with
 *            cudaErrorMemoryAllocation.
 *   bare:    the same sequence without the interposer: everything must succeed (the card
 *            has far more than L), which shows the refusals above are the library's doing.
 * Steps: cudaMemGetInfo (limited: total must be L) and NVML's view after context creation;
 * cudaMalloc in 64 MiB chunks up to L, then one more byte (limited: held <= L, >= 3L/4, and
 * something refused; free <= L - held); cudaMemGetInfo, nvidia-smi (with and without the preload) and NVML
 * with the memory held; then, for cudaMalloc, cudaMallocManaged, cudaMallocPitch,
 * cudaMallocAsync and cudaMalloc3DArray: with L/2 held by cudaMalloc, the path asks for 3L/4
 * (past the limit) and L/8 (within it); last, L/2 once everything is freed (frees are credited).
 * Every attempt prints one line
 *   RESULT path=<api> step=<what> bytes=<n> rc=<code> err=<name> got=ok|oom|error
 *          expect=ok|oom|any verdict=pass|FAIL|info
 * and a "SUMMARY failures=<n> ..." line closes the run. Exit 0 when no verdict is FAIL, 1
 * otherwise, 2 when CUDA could not start.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_view.h"

#define MIB (1024ull * 1024ull)
#define CHUNK (64ull * MIB)
#define CHUNKS_MAX 4096

static bool limited;
static unsigned long long limit_bytes;
static int failures;
static const char *nvml_query_path;

/* Prints the attempt's RESULT line and counts a FAIL. expect: "ok", "oom" or "any". */
static void result(const char *path, const char *step, unsigned long long bytes, cudaError_t rc,
                   const char *expect)
{
        const char *got = rc == cudaSuccess ? "ok" : rc == cudaErrorMemoryAllocation ? "oom" : "error";
        const char *verdict = strcmp(expect, "any") == 0 ? "info" : strcmp(expect, got) == 0 ? "pass" : "FAIL";

        if (rc != cudaSuccess)
                (void)cudaGetLastError(); /* an allocation failure is not sticky; clear it */
        if (verdict[0] == 'F')
                failures++;
        printf("RESULT path=%s step=%s bytes=%llu rc=%d err=%s got=%s expect=%s verdict=%s\n", path,
               step, bytes, (int)rc, cudaGetErrorName(rc), got, expect, verdict);
        fflush(stdout);
}

/* A check that is no single call: name, a measured number, and whether it holds. */
static void check(const char *name, unsigned long long value, bool ok, const char *what)
{
        if (!ok)
                failures++;
        printf("RESULT path=check step=%s bytes=%llu rc=0 err=- got=%s expect=%s verdict=%s\n", name,
               value, ok ? "yes" : "no", what, ok ? "pass" : "FAIL");
        fflush(stdout);
}

/* What an allocation that takes the process past the limit must return. */
static const char *over(void)
{
        return limited ? "oom" : "ok";
}

/* cudaMemGetInfo's view; under the limit (docs/vgpu.md, "What is counted") total is the limit
 * and free what is left of it: checked after context creation and with the memory held. */
static void meminfo(const char *tag, unsigned long long held)
{
        size_t free_bytes = 0, total = 0;
        cudaError_t rc = cudaMemGetInfo(&free_bytes, &total);

        printf("MEMINFO tag=%s rc=%d free_mib=%llu total_mib=%llu\n", tag, (int)rc,
               (unsigned long long)free_bytes / MIB, (unsigned long long)total / MIB);
        fflush(stdout);
        if (!limited || (strcmp(tag, "before") != 0 && strcmp(tag, "filled") != 0))
                return;
        if (strcmp(tag, "before") == 0)
                check("memgetinfo_total_is_limit", total, rc == cudaSuccess && total == limit_bytes,
                      "total==limit");
        else
                check("memgetinfo_free_within_rest", free_bytes,
                      rc == cudaSuccess && free_bytes <= limit_bytes - (held < limit_bytes ? held : limit_bytes),
                      "free<=limit-held");
}

/* nvidia-smi and NVML while this process holds its memory: the container's view (the preload
 * is inherited) and the physical one (LD_PRELOAD removed). */
static void outside_views(const char *tag)
{
        char cmd[1024];

        printf("VIEW tag=%s begin\n", tag);
        fflush(stdout);
        snprintf(cmd, sizeof cmd,
                 "echo 'nvidia-smi (preloaded env):'; "
                 "timeout 20 nvidia-smi --query-gpu=index,memory.total,memory.used,memory.free "
                 "--format=csv,noheader 2>&1; "
                 "echo 'nvidia-smi (LD_PRELOAD unset, physical):'; "
                 "env -u LD_PRELOAD timeout 20 nvidia-smi --query-gpu=index,memory.total,memory.used "
                 "--format=csv,noheader 2>&1; "
                 "env -u LD_PRELOAD timeout 20 nvidia-smi --query-compute-apps=pid,used_memory "
                 "--format=csv,noheader 2>&1");
        if (system(cmd) != 0)
                printf("VIEW tag=%s nvidia-smi-failed\n", tag);
        if (nvml_query_path != NULL) {
                snprintf(cmd, sizeof cmd, "timeout 20 '%s' %s-child-preloaded", nvml_query_path, tag);
                fflush(stdout);
                if (system(cmd) != 0)
                        printf("VIEW tag=%s nvml_query-failed\n", tag);
        }
        nvml_view(tag); /* in this process, through whatever the interposer does to NVML */
        printf("VIEW tag=%s end\n", tag);
        fflush(stdout);
}

/* ---- the allocation paths: allocate bytes into *h, free *h ------------------------------- */

struct handle {
        void *ptr;
        cudaArray_t array;
};

static cudaStream_t stream;

static cudaError_t alloc_malloc(struct handle *h, unsigned long long bytes)
{
        return cudaMalloc(&h->ptr, bytes);
}

static cudaError_t alloc_managed(struct handle *h, unsigned long long bytes)
{
        return cudaMallocManaged(&h->ptr, bytes, cudaMemAttachGlobal);
}

static cudaError_t alloc_pitch(struct handle *h, unsigned long long bytes)
{
        size_t pitch = 0;

        return cudaMallocPitch(&h->ptr, &pitch, MIB, bytes / MIB); /* rows of 1 MiB */
}

static cudaError_t alloc_async(struct handle *h, unsigned long long bytes)
{
        cudaError_t rc = cudaMallocAsync(&h->ptr, bytes, stream);

        if (rc == cudaSuccess)
                rc = cudaStreamSynchronize(stream);
        return rc;
}

static cudaError_t alloc_array3d(struct handle *h, unsigned long long bytes)
{
        cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
        /* 1024 x 1024 floats (4 MiB) a slice */
        cudaExtent extent = make_cudaExtent(1024, 1024, bytes / (4 * MIB));

        return cudaMalloc3DArray(&h->array, &desc, extent, 0);
}

static cudaError_t free_ptr(struct handle *h)
{
        return cudaFree(h->ptr);
}

static cudaError_t free_async(struct handle *h)
{
        cudaError_t rc = cudaFreeAsync(h->ptr, stream);

        if (rc == cudaSuccess)
                rc = cudaStreamSynchronize(stream);
        return rc;
}

static cudaError_t free_array(struct handle *h)
{
        return cudaFreeArray(h->array);
}

struct path {
        const char *name;
        cudaError_t (*alloc)(struct handle *h, unsigned long long bytes);
        cudaError_t (*release)(struct handle *h);
};

static const struct path paths[] = {
        {"cudaMalloc", alloc_malloc, free_ptr},
        {"cudaMallocManaged", alloc_managed, free_ptr},
        {"cudaMallocPitch", alloc_pitch, free_ptr},
        {"cudaMallocAsync", alloc_async, free_async},
        {"cudaMalloc3DArray", alloc_array3d, free_array},
};

/* With L/2 held by cudaMalloc: p asks for 3L/4 (past the limit), then L/8 (within it). */
static void probe_path(const struct path *p)
{
        unsigned long long half = limit_bytes / 2, big = limit_bytes / 4 * 3, small = limit_bytes / 8;
        struct handle hold = {NULL, NULL}, h = {NULL, NULL};
        cudaError_t rc;

        rc = cudaMalloc(&hold.ptr, half);
        result(p->name, "hold_half_by_cudaMalloc", half, rc, "ok");
        if (rc != cudaSuccess)
                return;
        rc = p->alloc(&h, big);
        result(p->name, "three_quarters_past_limit", big, rc, over());
        if (rc == cudaSuccess)
                result(p->name, "free_three_quarters", big, p->release(&h), "ok");
        h.ptr = NULL;
        h.array = NULL;
        rc = p->alloc(&h, small);
        result(p->name, "eighth_within_limit", small, rc, "ok");
        if (rc == cudaSuccess)
                result(p->name, "free_eighth", small, p->release(&h), "ok");
        result(p->name, "free_hold", half, cudaFree(hold.ptr), "ok");
}

static void usage(void)
{
        fprintf(stderr, "usage: alloc_limit --mode limited|bare --limit-mib L [--nvml-query PATH]\n");
        exit(2);
}

int main(int argc, char **argv)
{
        static void *chunks[CHUNKS_MAX];
        unsigned long long limit_mib = 0, held = 0;
        const char *mode = NULL;
        void *one = NULL;
        cudaError_t rc;
        unsigned n;
        bool all_chunks = true, any_oom = false;

        for (int i = 1; i + 1 < argc; i += 2) {
                if (strcmp(argv[i], "--mode") == 0)
                        mode = argv[i + 1];
                else if (strcmp(argv[i], "--limit-mib") == 0)
                        limit_mib = strtoull(argv[i + 1], NULL, 10);
                else if (strcmp(argv[i], "--nvml-query") == 0)
                        nvml_query_path = argv[i + 1];
                else
                        usage();
        }
        if (mode == NULL || limit_mib < 256 || limit_mib % 64 != 0 || limit_mib / 64 > CHUNKS_MAX)
                usage();
        limited = strcmp(mode, "limited") == 0;
        limit_bytes = limit_mib * MIB;
        printf("START alloc_limit mode=%s limit_mib=%llu LD_PRELOAD=%s CUDA_DEVICE_MEMORY_LIMIT=%s\n",
               mode, limit_mib, getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "-",
               getenv("CUDA_DEVICE_MEMORY_LIMIT") ? getenv("CUDA_DEVICE_MEMORY_LIMIT") : "-");
        fflush(stdout);

        rc = cudaSetDevice(0);
        if (rc == cudaSuccess)
                rc = cudaFree(NULL); /* creates the primary context */
        result("init", "context", 0, rc, "ok");
        if (rc != cudaSuccess) {
                printf("SUMMARY failures=%d init_failed=1\n", failures);
                return 2;
        }
        meminfo("before", 0);
        nvml_view("before");

        /* 1. cudaMalloc in 64 MiB chunks up to the limit, then one more byte. */
        n = (unsigned)(limit_bytes / CHUNK);
        for (unsigned i = 0; i < n; i++) {
                char step[32];

                snprintf(step, sizeof step, "chunk%03u", i + 1);
                rc = cudaMalloc(&chunks[i], CHUNK);
                /* Near the limit a refusal is allowed: the library may count the context too. */
                result("cudaMalloc", step, CHUNK, rc,
                       limited && (i + 1) * CHUNK > limit_bytes - limit_bytes / 4 ? "any" : "ok");
                if (rc == cudaSuccess) {
                        held += CHUNK;
                } else {
                        chunks[i] = NULL;
                        all_chunks = false;
                        any_oom = any_oom || rc == cudaErrorMemoryAllocation;
                }
        }
        rc = cudaMalloc(&one, 1);
        /* Past a full limit one byte must be refused; after a refused chunk it may still fit. */
        result("cudaMalloc", "one_more_byte", 1, rc, !limited ? "ok" : all_chunks ? "oom" : "any");
        if (rc == cudaSuccess)
                held += 1;
        else
                any_oom = any_oom || rc == cudaErrorMemoryAllocation;
        printf("FILL held_bytes=%llu held_mib=%llu limit_mib=%llu first_refusal=%s\n", held,
               held / MIB, limit_mib, any_oom ? "yes" : "none");
        if (limited) {
                check("held_within_limit", held, held <= limit_bytes, "held<=limit");
                check("held_at_least_three_quarters", held, held >= limit_bytes / 4 * 3,
                      "held>=3L/4");
                check("refused_past_limit", held, any_oom, "an_allocation_refused");
        } else {
                check("bare_all_granted", held, held == limit_bytes + 1, "held==L+1");
        }
        meminfo("filled", held);
        outside_views("filled");
        for (unsigned i = 0; i < n; i++)
                if (chunks[i] != NULL)
                        (void)cudaFree(chunks[i]);
        if (one != NULL)
                (void)cudaFree(one);
        meminfo("freed", 0);

        /* 2. each allocation path, against the same budget. */
        rc = cudaStreamCreate(&stream);
        result("init", "stream", 0, rc, "ok");
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
                probe_path(&paths[i]);

        /* 3. everything freed: half the limit fits again. */
        rc = cudaMalloc(&one, limit_bytes / 2);
        result("cudaMalloc", "half_after_all_freed", limit_bytes / 2, rc, "ok");
        if (rc == cudaSuccess)
                (void)cudaFree(one);
        meminfo("end", 0);
        printf("SUMMARY failures=%d mode=%s limit_mib=%llu held_mib=%llu\n", failures, mode, limit_mib,
               held / MIB);
        return failures == 0 ? 0 : 1;
}
