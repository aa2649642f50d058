/*
 * core_share.cu - the compute-share probe of the vgpu check (tools/gpu/vgpu_check.sh): runs one
 * compute-bound kernel (independent FMA chains, 4 blocks of 256 threads per multiprocessor, so
 * one launch fills the whole GPU) back to back for a fixed time and reports how many launches
 * completed per second. Two copies run at once, one under CUDA_DEVICE_SM_LIMIT=30 and one under
 * 70, should complete kernels in about a 30:70 ratio if the interposer throttles launches.
 *
 * Usage: core_share --label NAME --seconds S (--iters N | --calibrate-ms MS) [--start-at T]
 *   --iters N         FMA iterations per thread per launch (the same N in every process, so
 *                     that kernels/s compare)
 *   --calibrate-ms MS pick N so that one launch takes about MS ms on this (idle) GPU and print
 *                     "CALIBRATED iters=N ..."; use it in the unthrottled baseline only
 *   --start-at T      start timing at wall-clock time T (seconds since the epoch), after CUDA
 *                     is up, so that concurrent processes measure the same window
 * At most two launches are in flight; a launch the interposer holds back shows as time spent in
 * cudaLaunchKernel (launch_wait_s). Prints
 *   RESULT core_share label=.. sm_limit=.. iters=.. seconds=.. kernels=.. rate=.. rate_2nd_half=..
 *          launch_wait_s=.. late_start_s=..
 * (rate: kernels completed per second over the window; rate_2nd_half: over its second half,
 * after the throttle has settled) and a per-second TIMELINE on stderr. Exit 0, or 1 on a CUDA
 * error, 2 on bad usage.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEPTH 2
#define SECONDS_MAX 600

__global__ void fma_burn(float *out, unsigned iters)
{
        unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
        float a = 1.0f + (float)tid * 1e-7f, b = a + 0.5f, c = a + 0.25f, d = a + 0.125f;

        for (unsigned i = 0; i < iters; i++) {
                a = fmaf(a, 0.9999999f, 1e-7f);
                b = fmaf(b, 0.9999999f, 1e-7f);
                c = fmaf(c, 0.9999999f, 1e-7f);
                d = fmaf(d, 0.9999999f, 1e-7f);
        }
        out[tid] = a + b + c + d;
}

static double now(clockid_t clock)
{
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, cudaError_t rc)
{
        fprintf(stderr, "core_share: %s: %s (%d)\n", what, cudaGetErrorString(rc), (int)rc);
        printf("RESULT core_share error=%s rc=%d\n", what, (int)rc);
        return 1;
}

int main(int argc, char **argv)
{
        static unsigned per_second[SECONDS_MAX + 1];
        const char *label = "run", *sm = getenv("CUDA_DEVICE_SM_LIMIT");
        double seconds = 20, start_at = 0, calibrate_ms = 0, t0, t_end, late = 0, wait_s = 0;
        unsigned iters = 0, blocks, threads = 256;
        unsigned long long kernels = 0, second_half = 0;
        cudaEvent_t ev[DEPTH];
        int sms = 0, inflight = 0, head = 0;
        float *out = NULL;
        cudaError_t rc;

        for (int i = 1; i + 1 < argc; i += 2) {
                if (strcmp(argv[i], "--label") == 0)
                        label = argv[i + 1];
                else if (strcmp(argv[i], "--seconds") == 0)
                        seconds = atof(argv[i + 1]);
                else if (strcmp(argv[i], "--iters") == 0)
                        iters = (unsigned)strtoul(argv[i + 1], NULL, 10);
                else if (strcmp(argv[i], "--calibrate-ms") == 0)
                        calibrate_ms = atof(argv[i + 1]);
                else if (strcmp(argv[i], "--start-at") == 0)
                        start_at = atof(argv[i + 1]);
        }
        if (seconds < 1 || seconds > SECONDS_MAX || (iters == 0 && calibrate_ms <= 0)) {
                fprintf(stderr, "usage: core_share --label L --seconds S (--iters N | "
                                "--calibrate-ms MS) [--start-at T]\n");
                return 2;
        }
        rc = cudaSetDevice(0);
        if (rc == cudaSuccess)
                rc = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
        if (rc != cudaSuccess)
                return fail("init", rc);
        blocks = (unsigned)sms * 4;
        rc = cudaMalloc((void **)&out, (size_t)blocks * threads * sizeof *out);
        if (rc != cudaSuccess)
                return fail("cudaMalloc", rc);
        for (int i = 0; i < DEPTH; i++) {
                rc = cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming);
                if (rc != cudaSuccess)
                        return fail("cudaEventCreate", rc);
        }

        if (calibrate_ms > 0) {
                const unsigned probe = 1u << 16;
                cudaEvent_t a, b;
                float best = 1e30f;

                if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)
                        return fail("cudaEventCreate", cudaGetLastError());
                for (int i = 0; i < 5; i++) {
                        float ms = 0;

                        cudaEventRecord(a, 0);
                        fma_burn<<<blocks, threads>>>(out, probe);
                        cudaEventRecord(b, 0);
                        rc = cudaEventSynchronize(b);
                        if (rc != cudaSuccess)
                                return fail("calibration", rc);
                        cudaEventElapsedTime(&ms, a, b);
                        if (i > 0 && ms < best) /* the first launch loads the module */
                                best = ms;
                }
                iters = (unsigned)((double)probe * calibrate_ms / (best > 1e-3f ? best : 1e-3f));
                if (iters < 256)
                        iters = 256;
                printf("CALIBRATED iters=%u sms=%d blocks=%u threads=%u probe_iters=%u probe_ms=%.3f "
                       "target_ms=%.2f\n", iters, sms, blocks, threads, probe, best, calibrate_ms);
                fflush(stdout);
        }

        /* Warm up: the module is loaded and the clocks are up before the window opens. */
        for (int i = 0; i < 3; i++)
                fma_burn<<<blocks, threads>>>(out, iters);
        rc = cudaDeviceSynchronize();
        if (rc != cudaSuccess)
                return fail("warm-up", rc);

        if (start_at > 0) {
                double t = now(CLOCK_REALTIME);

                if (t > start_at) {
                        late = t - start_at;
                } else {
                        struct timespec d;
                        double w = start_at - t;

                        d.tv_sec = (time_t)w;
                        d.tv_nsec = (long)((w - (double)d.tv_sec) * 1e9);
                        nanosleep(&d, NULL);
                }
        }

        t0 = now(CLOCK_MONOTONIC);
        t_end = t0 + seconds;
        for (;;) {
                double t = now(CLOCK_MONOTONIC), l0;
                int tail;

                if (inflight == DEPTH) {
                        rc = cudaEventSynchronize(ev[head]);
                        if (rc != cudaSuccess)
                                return fail("cudaEventSynchronize", rc);
                        t = now(CLOCK_MONOTONIC);
                        if (t >= t_end)
                                break;
                        kernels++;
                        per_second[(int)(t - t0)]++;
                        if (t - t0 >= seconds / 2)
                                second_half++;
                        head = (head + 1) % DEPTH;
                        inflight--;
                }
                if (t >= t_end)
                        break;
                l0 = now(CLOCK_MONOTONIC);
                fma_burn<<<blocks, threads>>>(out, iters);
                rc = cudaGetLastError();
                wait_s += now(CLOCK_MONOTONIC) - l0;
                if (rc != cudaSuccess)
                        return fail("launch", rc);
                tail = (head + inflight) % DEPTH;
                rc = cudaEventRecord(ev[tail], 0);
                if (rc != cudaSuccess)
                        return fail("cudaEventRecord", rc);
                inflight++;
        }
        (void)cudaDeviceSynchronize();

        for (int s = 0; s < (int)seconds && s <= SECONDS_MAX; s++)
                fprintf(stderr, "TIMELINE label=%s second=%d kernels=%u\n", label, s, per_second[s]);
        printf("RESULT core_share label=%s sm_limit=%s iters=%u seconds=%.1f kernels=%llu rate=%.2f "
               "rate_2nd_half=%.2f launch_wait_s=%.2f late_start_s=%.2f\n",
               label, sm != NULL ? sm : "-", iters, seconds, kernels, (double)kernels / seconds,
               (double)second_half / (seconds / 2), wait_s, late);
        fflush(stdout);
        (void)cudaFree(out);
        return 0;
}
