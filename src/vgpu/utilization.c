/*
 * utilization.c - the slice's utilization of a device, from NVML (utilization.h).
 */
#define _GNU_SOURCE
#include "vgpu/utilization.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/hooks.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long last_seen_us[TSR_VGPU_DEVICES_MAX]; /* under mu */

static bool device_handle(int dev, nvmlDevice_t *h)
{
        tsr_vgpu_nvml();
        return dev >= 0 && dev < TSR_VGPU_DEVICES_MAX &&
               tsr_vgpu_real.nvmlDeviceGetHandleByIndex_v2 &&
               tsr_vgpu_real.nvmlDeviceGetHandleByIndex_v2((unsigned)dev, h) == NVML_SUCCESS;
}

static void list_pids(int dev, struct tsr_vgpu_pid_probe *p)
{
        nvmlProcessInfo_t infos[TSR_VGPU_PROBE_PIDS];
        unsigned count = TSR_VGPU_PROBE_PIDS;
        nvmlDevice_t h;

        p->n = 0;
        p->ok =
            device_handle(dev, &h) && tsr_vgpu_real.nvmlDeviceGetComputeRunningProcesses_v3 &&
            tsr_vgpu_real.nvmlDeviceGetComputeRunningProcesses_v3(h, &count, infos) == NVML_SUCCESS;
        if (!p->ok)
                return;
        for (unsigned i = 0; i < count && i < TSR_VGPU_PROBE_PIDS; i++)
                p->pids[p->n++] = infos[i].pid;
}

static bool listed(const struct tsr_vgpu_pid_probe *p, unsigned pid)
{
        for (unsigned i = 0; i < p->n; i++)
                if (p->pids[i] == pid)
                        return true;
        return false;
}

void tsr_vgpu_pid_probe_before(int dev, struct tsr_vgpu_pid_probe *before)
{
        list_pids(dev, before);
}

void tsr_vgpu_pid_probe_after(const struct tsr_vgpu_state *s, int dev,
                              const struct tsr_vgpu_pid_probe *before)
{
        struct tsr_vgpu_pid_probe after;
        unsigned found = 0, fresh = 0;

        if (!s->control)
                return;
        list_pids(dev, &after);
        if (!after.ok)
                return;
        if (listed(&after, (unsigned)getpid())) {
                found = (unsigned)getpid();
        } else if (before->ok) {
                for (unsigned i = 0; i < after.n; i++)
                        if (!listed(before, after.pids[i])) {
                                found = after.pids[i];
                                fresh++;
                        }
                if (fresh != 1)
                        found = 0;
        }
        if (found) {
                tsr_vgpu_region_set_host_pid(s->region, found);
                tsr_vgpu_log(4, "device %d: NVML knows this process as pid %u", dev, found);
        } else {
                tsr_vgpu_log(3, "device %d: cannot tell this process's NVML pid", dev);
        }
}

static unsigned long long now_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
}

/* The slice's processes' SM utilization from samples newer than since; -1: none of ours. */
static int per_process(const struct tsr_vgpu_state *s, nvmlDevice_t h, unsigned long long since)
{
        unsigned pids[TSR_VGPU_PROCS_MAX], count = 0, total = 0;
        size_t n_pids = tsr_vgpu_region_host_pids(s->region, pids, TSR_VGPU_PROCS_MAX);
        nvmlProcessUtilizationSample_t *samples;
        nvmlReturn_t rc;

        if (!n_pids || !tsr_vgpu_real.nvmlDeviceGetProcessUtilization)
                return -1;
        rc = tsr_vgpu_real.nvmlDeviceGetProcessUtilization(h, NULL, &count, since);
        if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
                return -1;
        if (!count)
                return 0; /* no process ran a kernel since the last sample */
        samples = calloc(count, sizeof(*samples));
        if (!samples)
                return -1;
        rc = tsr_vgpu_real.nvmlDeviceGetProcessUtilization(h, samples, &count, since);
        if (rc == NVML_SUCCESS) {
                /* the newest sample of each of the slice's processes */
                for (size_t p = 0; p < n_pids; p++) {
                        unsigned long long newest = 0;
                        unsigned util = 0;

                        for (unsigned i = 0; i < count; i++)
                                if (samples[i].pid == pids[p] && samples[i].timeStamp >= newest) {
                                        newest = samples[i].timeStamp;
                                        util = samples[i].smUtil;
                                }
                        total += util;
                }
        }
        free(samples);
        if (rc != NVML_SUCCESS)
                return -1;
        return total > 100 ? 100 : (int)total;
}

int tsr_vgpu_utilization(const struct tsr_vgpu_state *s, int dev)
{
        unsigned long long since, now = now_us();
        nvmlUtilization_t u;
        nvmlDevice_t h;
        int util;

        if (!s->control || !device_handle(dev, &h))
                return -1;
        pthread_mutex_lock(&mu);
        since = last_seen_us[dev] ? last_seen_us[dev] : now - 1000000ull;
        last_seen_us[dev] = now;
        pthread_mutex_unlock(&mu);
        util = per_process(s, h, since);
        if (util >= 0)
                return util;
        if (tsr_vgpu_real.nvmlDeviceGetUtilizationRates &&
            tsr_vgpu_real.nvmlDeviceGetUtilizationRates(h, &u) == NVML_SUCCESS)
                return u.gpu > 100 ? 100 : (int)u.gpu;
        return -1;
}
