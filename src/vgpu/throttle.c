/*
 * throttle.c - the token bucket and the watcher that calibrates it (throttle.h).
 */
#define _GNU_SOURCE
#include "vgpu/throttle.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/pid.h"
#include "vgpu/utilization.h"

#define NS_PER_S      1000000000ull
#define SAMPLE_NS     (100ull * 1000 * 1000)
#define BURST_DIVISOR 10      /* the bucket holds 1/10 s of the rate */
#define INITIAL_RATE  1000000 /* blocks per second before the first sample */
#define MIN_RATE      10
#define WAIT_MIN_NS   (20ull * 1000)
#define WAIT_MAX_NS   (10ull * 1000 * 1000)
#define STEP_FACTOR   4

static pthread_mutex_t watcher_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t watcher_pid;         /* the process whose watcher runs (a fork child starts its own) */
static uint32_t used_devices;     /* devices this process launched on, a bit each */
static uint64_t average_x16 = 16; /* the average kernel's blocks, times 16 */

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t tsr_vgpu_grid_blocks(unsigned gx, unsigned gy, unsigned gz)
{
        uint64_t b = (uint64_t)(gx ? gx : 1) * (gy ? gy : 1) * (gz ? gz : 1);
        uint64_t avg = __atomic_load_n(&average_x16, __ATOMIC_RELAXED);

        /* an average over about the last 16 kernels; racing launches only blur it */
        __atomic_store_n(&average_x16, avg - avg / 16 + b, __ATOMIC_RELAXED);
        return b;
}

uint64_t tsr_vgpu_average_blocks(void)
{
        uint64_t avg = __atomic_load_n(&average_x16, __ATOMIC_RELAXED) / 16;

        return avg ? avg : 1;
}

/* ---- the bucket, under the region's lock --------------------------------------------------- */

struct admit_call {
        uint64_t now;
        uint64_t blocks;
        uint64_t wait_ns; /* out: how long to sleep before trying again; 0: admitted */
};

static int try_admit(struct tsr_vgpu_throttle_state *t, void *arg)
{
        struct admit_call *c = arg;
        int64_t burst;
        uint64_t elapsed;

        if (t->rate <= 0) {
                t->rate = INITIAL_RATE;
                t->tokens = INITIAL_RATE / BURST_DIVISOR;
                t->refill_ns = c->now;
                t->sample_ns = c->now;
        }
        elapsed = c->now > t->refill_ns ? c->now - t->refill_ns : 0;
        if (elapsed > NS_PER_S)
                elapsed = NS_PER_S;
        burst = t->rate / BURST_DIVISOR > 1 ? t->rate / BURST_DIVISOR : 1;
        t->tokens += (int64_t)((double)t->rate * (double)elapsed / (double)NS_PER_S);
        if (t->tokens > burst)
                t->tokens = burst;
        t->refill_ns = c->now;
        if (t->tokens > 0) {
                t->tokens -= (int64_t)c->blocks;
                t->admitted += c->blocks;
                c->wait_ns = 0;
                return 0;
        }
        t->waited = 1;
        c->wait_ns = (uint64_t)((double)(1 - t->tokens) * (double)NS_PER_S / (double)t->rate);
        if (c->wait_ns < WAIT_MIN_NS)
                c->wait_ns = WAIT_MIN_NS;
        if (c->wait_ns > WAIT_MAX_NS)
                c->wait_ns = WAIT_MAX_NS;
        return 0;
}

struct sample_call {
        uint64_t now;
        uint64_t admitted; /* out */
        uint64_t window;   /* out: ns since the last sample */
        uint32_t waited;   /* out */
};

/* Claims the device's sample when it is due: 1 with the window's counts, else 0. */
static int claim_sample(struct tsr_vgpu_throttle_state *t, void *arg)
{
        struct sample_call *c = arg;

        if (t->rate <= 0 || c->now < t->sample_ns + SAMPLE_NS * 8 / 10)
                return 0;
        c->window = c->now - t->sample_ns;
        c->admitted = t->admitted;
        c->waited = t->waited;
        t->sample_ns = c->now;
        t->admitted = 0;
        t->waited = 0;
        return 1;
}

struct adjust_call {
        const struct sample_call *sample;
        int util;
        unsigned limit;
};

static int adjust(struct tsr_vgpu_throttle_state *t, void *arg)
{
        const struct adjust_call *c = arg;
        double admitted_rate, wanted;

        t->last_util = (uint32_t)c->util;
        if (c->util > 0 && c->sample->admitted && c->sample->window) {
                admitted_rate =
                    (double)c->sample->admitted * (double)NS_PER_S / (double)c->sample->window;
                wanted = admitted_rate * c->limit / c->util;
                if (!t->calibrated) {
                        /* the first measurement replaces the guess outright */
                        t->rate = (int64_t)wanted;
                        t->calibrated = 1;
                } else if (wanted <= (double)t->rate || c->sample->waited) {
                        /* a rate that went unused is not raised: it was not what held back */
                        if (wanted > (double)t->rate * STEP_FACTOR)
                                wanted = (double)t->rate * STEP_FACTOR;
                        if (wanted < (double)t->rate / STEP_FACTOR)
                                wanted = (double)t->rate / STEP_FACTOR;
                        t->rate = (int64_t)(((double)t->rate + wanted) / 2);
                }
        } else if (c->util == 0 && c->sample->waited) {
                t->rate *= 2; /* launches waited on an idle device: far too slow */
        }
        if (t->rate < MIN_RATE)
                t->rate = MIN_RATE;
        if (t->tokens > t->rate / BURST_DIVISOR)
                t->tokens = t->rate / BURST_DIVISOR;
        return 0;
}

/* ---- the watcher --------------------------------------------------------------------------- */

static void *watch(void *arg)
{
        const struct tsr_vgpu_state *s = tsr_vgpu_state();
        struct timespec tick = {0, (long)SAMPLE_NS};

        (void)arg;
        for (;;) {
                uint32_t devices = __atomic_load_n(&used_devices, __ATOMIC_RELAXED);

                nanosleep(&tick, NULL);
                for (int dev = 0; dev < TSR_VGPU_DEVICES_MAX; dev++) {
                        struct sample_call sample = {now_ns(), 0, 0, 0};
                        struct adjust_call a = {&sample, 0, s->cfg.sm_limit[dev]};

                        if (!(devices & (1u << dev)) || !a.limit ||
                            !tsr_vgpu_region_with_throttle(s->region, dev, claim_sample, &sample))
                                continue;
                        a.util = tsr_vgpu_utilization(s, dev);
                        if (a.util < 0)
                                continue;
                        tsr_vgpu_region_with_throttle(s->region, dev, adjust, &a);
                        tsr_vgpu_log(4, "device %d: utilization %d%% of %u%%", dev, a.util,
                                     a.limit);
                }
        }
        return NULL;
}

/* Starts this process's watcher once (again in a fork child, whose threads did not survive). */
static void ensure_watcher(void)
{
        pid_t pid = tsr_vgpu_pid();
        pthread_attr_t attr;
        pthread_t t;

        if (__atomic_load_n(&watcher_pid, __ATOMIC_ACQUIRE) == pid)
                return;
        pthread_mutex_lock(&watcher_mu);
        if (watcher_pid != pid) {
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                if (pthread_create(&t, &attr, watch, NULL))
                        tsr_vgpu_log(1, "cannot start the utilization watcher: launches are "
                                        "throttled at the first rate only");
                pthread_attr_destroy(&attr);
                __atomic_store_n(&watcher_pid, pid, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&watcher_mu);
}

void tsr_vgpu_throttle_admit(const struct tsr_vgpu_state *s, int dev, uint64_t blocks)
{
        struct admit_call c = {0, blocks, 0};

        if (!s->throttled || dev < 0 || dev >= TSR_VGPU_DEVICES_MAX || !s->cfg.sm_limit[dev])
                return;
        __atomic_or_fetch(&used_devices, 1u << dev, __ATOMIC_RELAXED);
        ensure_watcher();
        for (;;) {
                struct timespec ts;

                c.now = now_ns();
                tsr_vgpu_region_with_throttle(s->region, dev, try_admit, &c);
                if (!c.wait_ns)
                        return;
                ts.tv_sec = (time_t)(c.wait_ns / NS_PER_S);
                ts.tv_nsec = (long)(c.wait_ns % NS_PER_S);
                nanosleep(&ts, NULL);
        }
}
