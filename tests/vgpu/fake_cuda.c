/*
 * fake_cuda.c - the fake CUDA driver, libcuda.so.1 of the slice interposer's tests; the contract
 * is in fake_cuda.h.
 *
 * State: one process-wide struct (st) behind one mutex: the devices (memory counters, address
 * arenas, the kernel timeline and its history ring) and one open-addressing table of every
 * object handed out (allocations, arrays, pool, VMM handles, contexts, streams, modules,
 * functions, graphs), keyed by the number the caller holds. Nothing the caller holds points into
 * host memory: handles and device addresses are counters, checked against the table before use.
 * The context stack is per thread (tls). The only memory owned is the table and the history
 * rings, reachable from st until exit.
 */
#include "fake_cuda.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CTX_STACK_MAX 32
#define PITCH_ALIGN   512u
#define ADDR_ALIGN    512u
#define ARENA32_START 0x10000000ull
#define ARENA32_END   0xfffff000ull
#define HANDLE_START  0x600000000000ull
#define TABLE_MIN     64u
#define MIB           (1ull << 20)

enum kind {
        K_LINEAR = 1, /* cuMemAlloc_v2, pitch, managed, async, pool: freed by cuMemFree* */
        K_ARRAY,      /* cuArrayCreate, cuArray3DCreate */
        K_MIPMAP,     /* cuMipmappedArrayCreate */
        K_VMM,        /* cuMemCreate */
        K_CTX,
        K_STREAM,
        K_POOL,
        K_MODULE,
        K_FUNC,
        K_GRAPH,
        K_EXEC,
};

/* A table slot: key 0 is empty, TOMB a deleted entry. */
#define TOMB UINT64_MAX
struct obj {
        uint64_t key;
        uint64_t bytes; /* memory charged to dev (memory kinds) */
        uint64_t ctx;   /* the context it was made in (memory kinds, streams) */
        int kind;
        int dev;
        bool primary; /* K_CTX: the device's primary context */
};

struct interval {
        uint64_t start, end;
};

struct device {
        uint64_t total, used;
        uint64_t next_addr;    /* bump arena of 64-bit addresses, never reused */
        uint64_t busy_until;   /* end of the queued work on the timeline */
        struct interval *hist; /* ring of FAKE_CUDA_HISTORY busy intervals */
        size_t hist_next, hist_n;
        uint64_t primary, pool; /* handles, 0 until first asked for */
        unsigned primary_refs, contexts;
};

static struct {
        pthread_mutex_t lock;
        pthread_once_t env_once;
        int n_dev, sm_count;
        uint64_t total, block_ns;
        bool inited;
        struct device dev[FAKE_CUDA_DEVICES_MAX];
        struct obj *tab;
        size_t cap, live, tombs;
        uint64_t next_handle, next_addr32;
} st = {.lock = PTHREAD_MUTEX_INITIALIZER, .env_once = PTHREAD_ONCE_INIT};

static _Thread_local struct {
        uint64_t stack[CTX_STACK_MAX];
        int depth;
} tls;

/* ---- environment ------------------------------------------------------------------------- */

static uint64_t env_number(const char *name, uint64_t dflt, uint64_t max)
{
        const char *s = getenv(name);
        char *end;
        unsigned long long v;

        if (!s || !*s)
                return dflt;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end || *s == '-' || v > max) {
                fprintf(stderr, "fake libcuda: %s=%s: not a number in [0, %" PRIu64 "]\n", name, s,
                        max);
                abort();
        }
        return v;
}

static void read_env(void)
{
        st.n_dev = (int)env_number("FAKE_CUDA_DEVICES", 1, FAKE_CUDA_DEVICES_MAX);
        st.total = env_number("FAKE_CUDA_TOTAL_MIB", 81920, 1u << 24) * MIB;
        st.sm_count = (int)env_number("FAKE_CUDA_SM_COUNT", 132, 100000);
        st.block_ns = env_number("FAKE_CUDA_BLOCK_NS", 10000, 1000000000);
}

static void config(void)
{
        pthread_once(&st.env_once, read_env);
}

/* ---- time -------------------------------------------------------------------------------- */

uint64_t tsr_fake_cuda_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t ns)
{
        struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                              .tv_nsec = (long)(ns % 1000000000ull)};

        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

/* ---- the object table (callers hold st.lock) --------------------------------------------- */

static size_t slot_of(uint64_t key, size_t cap)
{
        key ^= key >> 33;
        key *= 0xff51afd7ed558ccdull;
        key ^= key >> 33;
        return (size_t)key & (cap - 1);
}

static struct obj *find(uint64_t key, int kind)
{
        size_t i;

        if (!st.tab || key == 0 || key == TOMB)
                return NULL;
        for (i = slot_of(key, st.cap); st.tab[i].key; i = (i + 1) & (st.cap - 1))
                if (st.tab[i].key == key)
                        return st.tab[i].kind == kind ? &st.tab[i] : NULL;
        return NULL;
}

static int rehash(void)
{
        size_t cap = TABLE_MIN, i, j;
        struct obj *tab;

        while (cap < (st.live + 1) * 4)
                cap *= 2;
        tab = calloc(cap, sizeof(*tab));
        if (!tab)
                return -1;
        for (i = 0; i < st.cap; i++) {
                if (!st.tab[i].key || st.tab[i].key == TOMB)
                        continue;
                for (j = slot_of(st.tab[i].key, cap); tab[j].key; j = (j + 1) & (cap - 1))
                        ;
                tab[j] = st.tab[i];
        }
        free(st.tab);
        st.tab = tab;
        st.cap = cap;
        st.tombs = 0;
        return 0;
}

/* Adds a new key (never in the table). Returns the entry, or NULL when out of host memory. */
static struct obj *insert(uint64_t key, int kind, int dev)
{
        size_t i;

        if ((st.live + st.tombs + 1) * 4 > st.cap * 3 && rehash() < 0)
                return NULL;
        for (i = slot_of(key, st.cap); st.tab[i].key && st.tab[i].key != TOMB;
             i = (i + 1) & (st.cap - 1))
                ;
        if (st.tab[i].key == TOMB)
                st.tombs--;
        st.tab[i] = (struct obj){.key = key, .kind = kind, .dev = dev};
        st.live++;
        return &st.tab[i];
}

static void erase(struct obj *o)
{
        o->key = TOMB;
        st.live--;
        st.tombs++;
}

static uint64_t new_handle(void)
{
        st.next_handle += 16;
        return st.next_handle;
}

/* ---- entry checks (callers hold st.lock) ------------------------------------------------- */

static CUresult check_init(void)
{
        return st.inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult check_dev(CUdevice dev)
{
        if (!st.inited)
                return CUDA_ERROR_NOT_INITIALIZED;
        return dev >= 0 && dev < st.n_dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* This thread's current context, or NULL with *rc set. */
static struct obj *current(CUresult *rc)
{
        struct obj *ctx;

        *rc = check_init();
        if (*rc)
                return NULL;
        ctx = tls.depth ? find(tls.stack[tls.depth - 1], K_CTX) : NULL;
        if (!ctx)
                *rc = CUDA_ERROR_INVALID_CONTEXT;
        return ctx;
}

/* The device a stream runs on: the context's for the default streams, else the stream's own. */
static CUresult stream_dev(CUstream s, const struct obj *ctx, int *dev)
{
        const struct obj *o;

        if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
                *dev = ctx->dev;
                return CUDA_SUCCESS;
        }
        o = find((uint64_t)(uintptr_t)s, K_STREAM);
        if (!o)
                return CUDA_ERROR_INVALID_HANDLE;
        *dev = o->dev;
        return CUDA_SUCCESS;
}

/* ---- memory (callers hold st.lock) ------------------------------------------------------- */

/*
 * Charges bytes to device dev for a new object of kind made in context ctx; addr32: a linear
 * allocation of the 32-bit entry points. *key: the address or handle.
 */
static CUresult charge(int kind, uint64_t bytes, int dev, uint64_t ctx, bool addr32, uint64_t *key)
{
        struct device *d = &st.dev[dev];
        struct obj *o;
        uint64_t k, span = (bytes + ADDR_ALIGN - 1) / ADDR_ALIGN * ADDR_ALIGN;

        if (bytes == 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (bytes > d->total - d->used)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (kind != K_LINEAR)
                k = new_handle();
        else if (addr32)
                k = st.next_addr32;
        else
                k = d->next_addr;
        if (addr32 && (span > ARENA32_END || k > ARENA32_END - span))
                return CUDA_ERROR_OUT_OF_MEMORY;
        o = insert(k, kind, dev);
        if (!o)
                return CUDA_ERROR_OUT_OF_MEMORY;
        o->bytes = bytes;
        o->ctx = ctx;
        if (kind == K_LINEAR && addr32)
                st.next_addr32 += span;
        else if (kind == K_LINEAR)
                d->next_addr += span;
        d->used += bytes;
        *key = k;
        return CUDA_SUCCESS;
}

static CUresult discharge(uint64_t key, int kind, CUresult unknown)
{
        struct obj *o;

        if (!st.inited)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!tls.depth || !find(tls.stack[tls.depth - 1], K_CTX))
                return CUDA_ERROR_INVALID_CONTEXT;
        o = find(key, kind);
        if (!o)
                return unknown;
        st.dev[o->dev].used -= o->bytes;
        erase(o);
        return CUDA_SUCCESS;
}

/* A linear allocation in the current context. */
static CUresult alloc_linear(uint64_t *key, uint64_t bytes, bool addr32)
{
        CUresult rc;
        struct obj *ctx;

        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx)
                rc = charge(K_LINEAR, bytes, ctx->dev, ctx->key, addr32, key);
        pthread_mutex_unlock(&st.lock);
        return rc;
}

static CUresult free_key(uint64_t key, int kind, CUresult unknown)
{
        CUresult rc;

        pthread_mutex_lock(&st.lock);
        rc = discharge(key, kind, unknown);
        pthread_mutex_unlock(&st.lock);
        return rc;
}

/* ---- kernels ----------------------------------------------------------------------------- */

/* Queues blocks of work on device dev's timeline (st.lock held). */
static void enqueue(int dev, uint64_t blocks)
{
        struct device *d = &st.dev[dev];
        uint64_t now = tsr_fake_cuda_now_ns(), start, end;
        struct interval *last;

        start = d->busy_until > now ? d->busy_until : now;
        end = start + blocks * st.block_ns;
        if (end == start)
                return;
        last =
            d->hist_n ? &d->hist[(d->hist_next + FAKE_CUDA_HISTORY - 1) % FAKE_CUDA_HISTORY] : NULL;
        if (last && last->end == start) {
                last->end = end;
        } else {
                d->hist[d->hist_next] = (struct interval){start, end};
                d->hist_next = (d->hist_next + 1) % FAKE_CUDA_HISTORY;
                if (d->hist_n < FAKE_CUDA_HISTORY)
                        d->hist_n++;
        }
        d->busy_until = end;
}

/* Sleeps until at most keep_ns of work is queued on device dev. */
static void drain(int dev, uint64_t keep_ns)
{
        uint64_t until;

        for (;;) {
                pthread_mutex_lock(&st.lock);
                until = st.dev[dev].busy_until;
                pthread_mutex_unlock(&st.lock);
                if (until <= tsr_fake_cuda_now_ns() + keep_ns)
                        return;
                sleep_until(until - keep_ns);
        }
}

/* A launch of blocks on stream s of what `fn` (a K_FUNC or K_EXEC handle) names. */
static CUresult launch(uint64_t fn, int kind, uint64_t blocks, CUstream s)
{
        CUresult rc;
        struct obj *ctx;
        int dev = 0;

        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx && !find(fn, kind))
                rc = CUDA_ERROR_INVALID_HANDLE;
        if (!rc)
                rc = stream_dev(s, ctx, &dev);
        if (!rc && blocks == 0)
                rc = CUDA_ERROR_INVALID_VALUE;
        if (!rc)
                enqueue(dev, blocks);
        pthread_mutex_unlock(&st.lock);
        if (!rc)
                drain(dev, FAKE_CUDA_QUEUE_NS);
        return rc;
}

static uint64_t grid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz)
{
        if (!bx || !by || !bz)
                return 0;
        return (uint64_t)gx * gy * gz;
}

/* ---- init, version, devices -------------------------------------------------------------- */

CUresult cuInit(unsigned int flags)
{
        CUresult rc = CUDA_SUCCESS;
        int i;

        if (flags)
                return CUDA_ERROR_INVALID_VALUE;
        config();
        if (st.n_dev == 0)
                return CUDA_ERROR_NO_DEVICE;
        pthread_mutex_lock(&st.lock);
        for (i = 0; !st.inited && i < st.n_dev; i++) {
                struct device *d = &st.dev[i];

                if (!d->hist)
                        d->hist = calloc(FAKE_CUDA_HISTORY, sizeof(*d->hist));
                if (!d->hist) {
                        rc = CUDA_ERROR_OUT_OF_MEMORY;
                        break;
                }
                d->total = st.total;
                d->next_addr = (uint64_t)(i + 1) << 40;
        }
        if (!rc && !st.inited) {
                st.next_handle = HANDLE_START;
                st.next_addr32 = ARENA32_START;
                st.inited = true;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuDriverGetVersion(int *version)
{
        if (!version)
                return CUDA_ERROR_INVALID_VALUE;
        *version = FAKE_CUDA_VERSION;
        return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
        CUresult rc;

        if (!count)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_init();
        if (!rc)
                *count = st.n_dev;
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
        CUresult rc;

        if (!dev)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_dev(ordinal);
        if (!rc)
                *dev = ordinal;
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
        CUresult rc;

        if (!name || len <= 0)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_dev(dev);
        if (!rc)
                snprintf(name, (size_t)len, "Fake CUDA Device %d", dev);
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
        CUresult rc;

        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_dev(dev);
        if (!rc && attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                *value = st.sm_count;
        else if (!rc)
                rc = CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
        CUresult rc;

        if (!uuid)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_dev(dev);
        if (!rc) {
                memcpy(uuid->bytes, "fake-cuda-dev-", 14);
                uuid->bytes[14] = 0;
                uuid->bytes[15] = (char)dev;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
        return cuDeviceGetUuid(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
        CUresult rc;

        if (!bytes)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_dev(dev);
        if (!rc)
                *bytes = st.dev[dev].total;
        pthread_mutex_unlock(&st.lock);
        return rc;
}

static unsigned clamp32(uint64_t v)
{
        return v > UINT_MAX ? UINT_MAX : (unsigned)v;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
        size_t b = 0;
        CUresult rc;

        if (!bytes)
                return CUDA_ERROR_INVALID_VALUE;
        rc = cuDeviceTotalMem_v2(&b, dev);
        if (!rc)
                *bytes = clamp32(b);
        return rc;
}

/* ---- contexts ---------------------------------------------------------------------------- */

static CUresult push(uint64_t ctx)
{
        if (tls.depth == CTX_STACK_MAX)
                return CUDA_ERROR_OUT_OF_MEMORY;
        tls.stack[tls.depth++] = ctx;
        return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
        CUresult rc;
        struct obj *o = NULL;

        (void)flags;
        if (!ctx)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_dev(dev);
        if (!rc && tls.depth == CTX_STACK_MAX)
                rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (!rc) {
                o = insert(new_handle(), K_CTX, dev);
                rc = o ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!rc) {
                st.dev[dev].contexts++;
                push(o->key);
                *ctx = (CUcontext)(uintptr_t)o->key;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuCtxCreate(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
        return cuCtxCreate_v2(ctx, flags, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
        uint64_t key = (uint64_t)(uintptr_t)ctx;
        struct obj *o;
        CUresult rc;
        size_t i;

        pthread_mutex_lock(&st.lock);
        rc = check_init();
        o = rc ? NULL : find(key, K_CTX);
        if (!rc && (!o || o->primary))
                rc = CUDA_ERROR_INVALID_CONTEXT;
        if (!rc) {
                /* What the context allocated goes with it, as on the driver. */
                for (i = 0; i < st.cap; i++) {
                        struct obj *a = &st.tab[i];

                        if (a->key && a->key != TOMB && a->ctx == key) {
                                st.dev[a->dev].used -= a->bytes;
                                erase(a);
                        }
                }
                st.dev[o->dev].contexts--;
                erase(o);
                if (tls.depth && tls.stack[tls.depth - 1] == key)
                        tls.depth--;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuCtxDestroy(CUcontext ctx)
{
        return cuCtxDestroy_v2(ctx);
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
        uint64_t key = (uint64_t)(uintptr_t)ctx;
        CUresult rc;

        pthread_mutex_lock(&st.lock);
        rc = check_init();
        if (!rc && !ctx) {
                if (tls.depth)
                        tls.depth--;
        } else if (!rc && !find(key, K_CTX)) {
                rc = CUDA_ERROR_INVALID_CONTEXT;
        } else if (!rc && tls.depth) {
                tls.stack[tls.depth - 1] = key;
        } else if (!rc) {
                rc = push(key);
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuCtxGetCurrent(CUcontext *ctx)
{
        CUresult rc;

        if (!ctx)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_init();
        if (!rc)
                *ctx = tls.depth ? (CUcontext)(uintptr_t)tls.stack[tls.depth - 1] : NULL;
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
        CUresult rc;

        pthread_mutex_lock(&st.lock);
        rc = check_init();
        if (!rc && !find((uint64_t)(uintptr_t)ctx, K_CTX))
                rc = CUDA_ERROR_INVALID_CONTEXT;
        if (!rc)
                rc = push((uint64_t)(uintptr_t)ctx);
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
        return cuCtxPushCurrent_v2(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
        CUresult rc;

        pthread_mutex_lock(&st.lock);
        rc = check_init();
        if (!rc && !tls.depth)
                rc = CUDA_ERROR_INVALID_CONTEXT;
        if (!rc) {
                tls.depth--;
                if (ctx)
                        *ctx = (CUcontext)(uintptr_t)tls.stack[tls.depth];
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuCtxPopCurrent(CUcontext *ctx)
{
        return cuCtxPopCurrent_v2(ctx);
}

CUresult cuCtxGetDevice(CUdevice *dev)
{
        CUresult rc;
        struct obj *ctx;

        if (!dev)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx)
                *dev = ctx->dev;
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuCtxSynchronize(void)
{
        CUresult rc;
        struct obj *ctx;
        int dev = 0;

        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx)
                dev = ctx->dev;
        pthread_mutex_unlock(&st.lock);
        if (!rc)
                drain(dev, 0);
        return rc;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
        CUresult rc;
        struct obj *o;

        if (!ctx)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_dev(dev);
        if (!rc && !st.dev[dev].primary) {
                o = insert(new_handle(), K_CTX, dev);
                if (o) {
                        o->primary = true;
                        st.dev[dev].primary = o->key;
                } else {
                        rc = CUDA_ERROR_OUT_OF_MEMORY;
                }
        }
        if (!rc) {
                st.dev[dev].primary_refs++;
                *ctx = (CUcontext)(uintptr_t)st.dev[dev].primary;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
        CUresult rc;

        pthread_mutex_lock(&st.lock);
        rc = check_dev(dev);
        if (!rc && !st.dev[dev].primary_refs)
                rc = CUDA_ERROR_INVALID_CONTEXT;
        if (!rc)
                st.dev[dev].primary_refs--;
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
        return cuDevicePrimaryCtxRelease_v2(dev);
}

/* ---- linear memory ----------------------------------------------------------------------- */

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
        CUresult rc;
        struct obj *ctx;

        if (!free_bytes || !total)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx) {
                *total = st.dev[ctx->dev].total;
                *free_bytes = st.dev[ctx->dev].total - st.dev[ctx->dev].used;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
        size_t f = 0, t = 0;
        CUresult rc;

        if (!free_bytes || !total)
                return CUDA_ERROR_INVALID_VALUE;
        rc = cuMemGetInfo_v2(&f, &t);
        if (!rc) {
                *free_bytes = clamp32(f);
                *total = clamp32(t);
        }
        return rc;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
        if (!dptr)
                return CUDA_ERROR_INVALID_VALUE;
        return alloc_linear(dptr, bytes, false);
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes)
{
        uint64_t key = 0;
        CUresult rc;

        if (!dptr)
                return CUDA_ERROR_INVALID_VALUE;
        rc = alloc_linear(&key, bytes, true);
        if (!rc)
                *dptr = (CUdeviceptr_v1)key;
        return rc;
}

/* pitch x height for a pitched allocation, 0 when the arguments are invalid. */
static uint64_t pitched(size_t width, size_t height, unsigned elem, uint64_t *pitch)
{
        if (!width || !height || (elem != 4 && elem != 8 && elem != 16))
                return 0;
        if (width > UINT64_MAX - PITCH_ALIGN)
                return 0;
        *pitch = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
        if (height > UINT64_MAX / *pitch)
                return 0;
        return *pitch * height;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem)
{
        uint64_t p = 0, bytes;
        CUresult rc;

        if (!dptr || !pitch)
                return CUDA_ERROR_INVALID_VALUE;
        bytes = pitched(width, height, elem, &p);
        rc = alloc_linear(dptr, bytes, false);
        if (!rc)
                *pitch = p;
        return rc;
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
                         unsigned int height, unsigned int elem)
{
        uint64_t p = 0, bytes, key = 0;
        CUresult rc;

        if (!dptr || !pitch)
                return CUDA_ERROR_INVALID_VALUE;
        bytes = pitched(width, height, elem, &p);
        rc = alloc_linear(&key, bytes, true);
        if (!rc) {
                *dptr = (CUdeviceptr_v1)key;
                *pitch = (unsigned)p;
        }
        return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
        if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
                return CUDA_ERROR_INVALID_VALUE;
        return alloc_linear(dptr, bytes, false);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
        return free_key(dptr, K_LINEAR, CUDA_ERROR_INVALID_VALUE);
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
        return free_key(dptr, K_LINEAR, CUDA_ERROR_INVALID_VALUE);
}

/* ---- stream-ordered memory --------------------------------------------------------------- */

/* An allocation on stream s, from pool (K_POOL handle) or, when 0, the stream device's pool. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, uint64_t pool, CUstream s)
{
        CUresult rc;
        struct obj *ctx, *p = NULL;
        int dev = 0;

        if (!dptr)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx)
                rc = stream_dev(s, ctx, &dev);
        if (!rc && pool) {
                p = find(pool, K_POOL);
                if (p)
                        dev = p->dev;
                else
                        rc = CUDA_ERROR_INVALID_VALUE;
        }
        if (!rc)
                rc = charge(K_LINEAR, bytes, dev, ctx->key, false, dptr);
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
        return alloc_async(dptr, bytes, 0, stream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
        return alloc_async(dptr, bytes, 0, stream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                 CUstream stream)
{
        if (!pool)
                return CUDA_ERROR_INVALID_VALUE;
        return alloc_async(dptr, bytes, (uint64_t)(uintptr_t)pool, stream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream)
{
        if (!pool)
                return CUDA_ERROR_INVALID_VALUE;
        return alloc_async(dptr, bytes, (uint64_t)(uintptr_t)pool, stream);
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
        CUresult rc;
        struct obj *ctx, *o;
        int dev;

        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx)
                rc = stream_dev(s, ctx, &dev);
        if (!rc) {
                o = find(dptr, K_LINEAR);
                if (o) {
                        st.dev[o->dev].used -= o->bytes;
                        erase(o);
                } else {
                        rc = CUDA_ERROR_INVALID_VALUE;
                }
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
        return free_async(dptr, stream);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
        return free_async(dptr, stream);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
        CUresult rc;
        struct obj *o;

        if (!pool)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_dev(dev);
        if (!rc && !st.dev[dev].pool) {
                o = insert(new_handle(), K_POOL, dev);
                if (o)
                        st.dev[dev].pool = o->key;
                else
                        rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!rc)
                *pool = (CUmemoryPool)(uintptr_t)st.dev[dev].pool;
        pthread_mutex_unlock(&st.lock);
        return rc;
}

/* ---- arrays ------------------------------------------------------------------------------ */

static uint64_t element_size(CUarray_format f)
{
        switch (f) {
        case CU_AD_FORMAT_UNSIGNED_INT8:
        case CU_AD_FORMAT_SIGNED_INT8:
                return 1;
        case CU_AD_FORMAT_UNSIGNED_INT16:
        case CU_AD_FORMAT_SIGNED_INT16:
        case CU_AD_FORMAT_HALF:
                return 2;
        case CU_AD_FORMAT_UNSIGNED_INT32:
        case CU_AD_FORMAT_SIGNED_INT32:
        case CU_AD_FORMAT_FLOAT:
                return 4;
        }
        return 0;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
        return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/*
 * Bytes of an array of levels mipmap levels (1 for a plain array), 0 when the descriptor is
 * invalid: a zero width, a depth without a height, an unknown format or channel count, or more
 * levels than the largest extent halves to.
 */
static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned ch,
                            unsigned levels)
{
        uint64_t es = element_size(f), sum = 0, largest = w, l;

        if (!w || (d && !h) || !es || (ch != 1 && ch != 2 && ch != 4) || !levels)
                return 0;
        largest = h > largest ? h : largest;
        largest = d > largest ? d : largest;
        for (l = 0; l < levels; l++) {
                uint64_t lw, lh, ld, b;

                if (l && (largest >> l) == 0)
                        return 0;
                lw = w >> l ? w >> l : 1;
                lh = h >> l ? h >> l : 1;
                ld = d >> l ? d >> l : 1;
                b = mul_sat(mul_sat(mul_sat(mul_sat(lw, lh), ld), ch), es);
                if (b == UINT64_MAX || sum > UINT64_MAX - b)
                        return 0;
                sum += b;
        }
        return sum;
}

static CUresult new_array(uint64_t *key, int kind, uint64_t bytes)
{
        CUresult rc;
        struct obj *ctx;

        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx)
                rc = charge(kind, bytes, ctx->dev, ctx->key, false, key);
        pthread_mutex_unlock(&st.lock);
        return rc;
}

static CUresult array_out(CUarray *arr, uint64_t bytes)
{
        uint64_t key = 0;
        CUresult rc = new_array(&key, K_ARRAY, bytes);

        if (!rc)
                *arr = (CUarray)(uintptr_t)key;
        return rc;
}

CUresult cuArrayCreate_v2(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR *d)
{
        if (!arr || !d)
                return CUDA_ERROR_INVALID_VALUE;
        return array_out(arr, array_bytes(d->Width, d->Height, 0, d->Format, d->NumChannels, 1));
}

CUresult cuArrayCreate(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
        if (!arr || !d)
                return CUDA_ERROR_INVALID_VALUE;
        return array_out(arr, array_bytes(d->Width, d->Height, 0, d->Format, d->NumChannels, 1));
}

CUresult cuArray3DCreate_v2(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
        if (!arr || !d)
                return CUDA_ERROR_INVALID_VALUE;
        return array_out(arr,
                         array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1));
}

CUresult cuArray3DCreate(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
        if (!arr || !d)
                return CUDA_ERROR_INVALID_VALUE;
        return array_out(arr,
                         array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1));
}

CUresult cuArrayDestroy(CUarray arr)
{
        return free_key((uint64_t)(uintptr_t)arr, K_ARRAY, CUDA_ERROR_INVALID_HANDLE);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *arr, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                unsigned int levels)
{
        uint64_t key = 0;
        CUresult rc;

        if (!arr || !d)
                return CUDA_ERROR_INVALID_VALUE;
        rc = new_array(
            &key, K_MIPMAP,
            array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels));
        if (!rc)
                *arr = (CUmipmappedArray)(uintptr_t)key;
        return rc;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray arr)
{
        return free_key((uint64_t)(uintptr_t)arr, K_MIPMAP, CUDA_ERROR_INVALID_HANDLE);
}

/* ---- virtual memory management ----------------------------------------------------------- */

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
        CUresult rc;
        struct obj *ctx;

        if (!handle || !prop || flags || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
            prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || bytes % FAKE_CUDA_GRANULARITY)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx)
                rc = check_dev(prop->location.id);
        if (!rc)
                rc = charge(K_VMM, bytes, prop->location.id, ctx->key, false, handle);
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
        return free_key(handle, K_VMM, CUDA_ERROR_INVALID_VALUE);
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       int option)
{
        (void)option;
        if (!granularity || !prop)
                return CUDA_ERROR_INVALID_VALUE;
        *granularity = FAKE_CUDA_GRANULARITY;
        return CUDA_SUCCESS;
}

/* ---- modules, streams -------------------------------------------------------------------- */

/* A new handle of kind in the current context. */
static CUresult new_object(uint64_t *key, int kind)
{
        CUresult rc;
        struct obj *ctx, *o = NULL;

        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx) {
                o = insert(new_handle(), kind, ctx->dev);
                rc = o ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (o) {
                o->ctx = ctx->key;
                *key = o->key;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

static CUresult drop_object(uint64_t key, int kind)
{
        CUresult rc;
        struct obj *o;

        pthread_mutex_lock(&st.lock);
        rc = check_init();
        o = rc ? NULL : find(key, kind);
        if (!rc && !o)
                rc = CUDA_ERROR_INVALID_HANDLE;
        if (o)
                erase(o);
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
        uint64_t key = 0;
        CUresult rc;

        if (!module || !image)
                return CUDA_ERROR_INVALID_VALUE;
        rc = new_object(&key, K_MODULE);
        if (!rc)
                *module = (CUmodule)(uintptr_t)key;
        return rc;
}

CUresult cuModuleUnload(CUmodule module)
{
        return drop_object((uint64_t)(uintptr_t)module, K_MODULE);
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name)
{
        CUresult rc;
        struct obj *o;

        if (!f || !name)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_init();
        if (!rc && !find((uint64_t)(uintptr_t)module, K_MODULE))
                rc = CUDA_ERROR_INVALID_HANDLE;
        if (!rc) {
                o = insert(new_handle(), K_FUNC, 0);
                if (o)
                        *f = (CUfunction)(uintptr_t)o->key;
                else
                        rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
        uint64_t key = 0;
        CUresult rc;

        (void)flags;
        if (!stream)
                return CUDA_ERROR_INVALID_VALUE;
        rc = new_object(&key, K_STREAM);
        if (!rc)
                *stream = (CUstream)(uintptr_t)key;
        return rc;
}

CUresult cuStreamDestroy_v2(CUstream stream)
{
        return drop_object((uint64_t)(uintptr_t)stream, K_STREAM);
}

static CUresult stream_sync(CUstream s)
{
        CUresult rc;
        struct obj *ctx;
        int dev = 0;

        pthread_mutex_lock(&st.lock);
        ctx = current(&rc);
        if (ctx)
                rc = stream_dev(s, ctx, &dev);
        pthread_mutex_unlock(&st.lock);
        if (!rc)
                drain(dev, 0);
        return rc;
}

CUresult cuStreamSynchronize(CUstream stream)
{
        return stream_sync(stream);
}

CUresult cuStreamSynchronize_ptsz(CUstream stream)
{
        return stream_sync(stream);
}

/* ---- launches ---------------------------------------------------------------------------- */

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream stream, void **params, void **extra)
{
        (void)shared;
        (void)params;
        (void)extra;
        return launch((uint64_t)(uintptr_t)f, K_FUNC, grid(gx, gy, gz, bx, by, bz), stream);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                             CUstream stream, void **params, void **extra)
{
        (void)shared;
        (void)params;
        (void)extra;
        return launch((uint64_t)(uintptr_t)f, K_FUNC, grid(gx, gy, gz, bx, by, bz), stream);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f)
{
        if (!c)
                return CUDA_ERROR_INVALID_VALUE;
        return launch(
            (uint64_t)(uintptr_t)f, K_FUNC,
            grid(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ),
            c->hStream);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
        (void)params;
        (void)extra;
        return launch_ex(config, f);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                               void **extra)
{
        (void)params;
        (void)extra;
        return launch_ex(config, f);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared, CUstream stream, void **params)
{
        (void)shared;
        (void)params;
        return launch((uint64_t)(uintptr_t)f, K_FUNC, grid(gx, gy, gz, bx, by, bz), stream);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared, CUstream stream,
                                        void **params)
{
        (void)shared;
        (void)params;
        return launch((uint64_t)(uintptr_t)f, K_FUNC, grid(gx, gy, gz, bx, by, bz), stream);
}

CUresult cuGraphCreate(CUgraph *graph, unsigned int flags)
{
        CUresult rc;
        struct obj *o;

        if (!graph || flags)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        rc = check_init();
        if (!rc) {
                o = insert(new_handle(), K_GRAPH, 0);
                if (o)
                        *graph = (CUgraph)(uintptr_t)o->key;
                else
                        rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
        pthread_mutex_unlock(&st.lock);
        return rc;
}

CUresult cuGraphDestroy(CUgraph graph)
{
        return drop_object((uint64_t)(uintptr_t)graph, K_GRAPH);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags)
{
        uint64_t key = 0;
        CUresult rc;
        bool known;

        (void)flags;
        if (!exec)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&st.lock);
        known = find((uint64_t)(uintptr_t)graph, K_GRAPH) != NULL;
        pthread_mutex_unlock(&st.lock);
        if (!known)
                return CUDA_ERROR_INVALID_VALUE;
        rc = new_object(&key, K_EXEC);
        if (!rc)
                *exec = (CUgraphExec)(uintptr_t)key;
        return rc;
}

CUresult cuGraphExecDestroy(CUgraphExec exec)
{
        return drop_object((uint64_t)(uintptr_t)exec, K_EXEC);
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
        return launch((uint64_t)(uintptr_t)exec, K_EXEC, FAKE_CUDA_GRAPH_BLOCKS, stream);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream)
{
        return launch((uint64_t)(uintptr_t)exec, K_EXEC, FAKE_CUDA_GRAPH_BLOCKS, stream);
}

/* ---- cuGetProcAddress -------------------------------------------------------------------- */

typedef void (*entry_fn)(void);
#define E(f) ((entry_fn)(f))

/*
 * A base name: the CUDA version that introduced it; the entry point below v2_from (or always
 * when v2 is NULL); the one from v2_from; the per-thread-default-stream one, if any.
 */
static const struct proc {
        const char *name;
        int since;
        entry_fn plain;
        int v2_from;
        entry_fn v2;
        entry_fn ptsz;
} procs[] = {
    {"cuInit", 2000, E(cuInit), 0, NULL, NULL},
    {"cuDriverGetVersion", 2020, E(cuDriverGetVersion), 0, NULL, NULL},
    {"cuDeviceGetCount", 2000, E(cuDeviceGetCount), 0, NULL, NULL},
    {"cuDeviceGet", 2000, E(cuDeviceGet), 0, NULL, NULL},
    {"cuDeviceGetName", 2000, E(cuDeviceGetName), 0, NULL, NULL},
    {"cuDeviceGetAttribute", 2000, E(cuDeviceGetAttribute), 0, NULL, NULL},
    {"cuDeviceGetUuid", 9020, E(cuDeviceGetUuid), 11040, E(cuDeviceGetUuid_v2), NULL},
    {"cuDeviceTotalMem", 2000, E(cuDeviceTotalMem), 3020, E(cuDeviceTotalMem_v2), NULL},
    {"cuCtxCreate", 2000, E(cuCtxCreate), 3020, E(cuCtxCreate_v2), NULL},
    {"cuCtxDestroy", 2000, E(cuCtxDestroy), 4000, E(cuCtxDestroy_v2), NULL},
    {"cuCtxSetCurrent", 4000, E(cuCtxSetCurrent), 0, NULL, NULL},
    {"cuCtxGetCurrent", 4000, E(cuCtxGetCurrent), 0, NULL, NULL},
    {"cuCtxPushCurrent", 2000, E(cuCtxPushCurrent), 4000, E(cuCtxPushCurrent_v2), NULL},
    {"cuCtxPopCurrent", 2000, E(cuCtxPopCurrent), 4000, E(cuCtxPopCurrent_v2), NULL},
    {"cuCtxGetDevice", 2000, E(cuCtxGetDevice), 0, NULL, NULL},
    {"cuCtxSynchronize", 2000, E(cuCtxSynchronize), 0, NULL, NULL},
    {"cuDevicePrimaryCtxRetain", 7000, E(cuDevicePrimaryCtxRetain), 0, NULL, NULL},
    {"cuDevicePrimaryCtxRelease", 7000, E(cuDevicePrimaryCtxRelease), 11000,
     E(cuDevicePrimaryCtxRelease_v2), NULL},
    {"cuMemGetInfo", 2000, E(cuMemGetInfo), 3020, E(cuMemGetInfo_v2), NULL},
    {"cuMemAlloc", 2000, E(cuMemAlloc), 3020, E(cuMemAlloc_v2), NULL},
    {"cuMemAllocPitch", 2000, E(cuMemAllocPitch), 3020, E(cuMemAllocPitch_v2), NULL},
    {"cuMemAllocManaged", 6000, E(cuMemAllocManaged), 0, NULL, NULL},
    {"cuMemFree", 2000, E(cuMemFree), 3020, E(cuMemFree_v2), NULL},
    {"cuMemAllocAsync", 11020, E(cuMemAllocAsync), 0, NULL, E(cuMemAllocAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, E(cuMemAllocFromPoolAsync), 0, NULL,
     E(cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemFreeAsync", 11020, E(cuMemFreeAsync), 0, NULL, E(cuMemFreeAsync_ptsz)},
    {"cuDeviceGetDefaultMemPool", 11020, E(cuDeviceGetDefaultMemPool), 0, NULL, NULL},
    {"cuArrayCreate", 2000, E(cuArrayCreate), 3020, E(cuArrayCreate_v2), NULL},
    {"cuArray3DCreate", 2000, E(cuArray3DCreate), 3020, E(cuArray3DCreate_v2), NULL},
    {"cuArrayDestroy", 2000, E(cuArrayDestroy), 0, NULL, NULL},
    {"cuMipmappedArrayCreate", 5000, E(cuMipmappedArrayCreate), 0, NULL, NULL},
    {"cuMipmappedArrayDestroy", 5000, E(cuMipmappedArrayDestroy), 0, NULL, NULL},
    {"cuMemCreate", 10020, E(cuMemCreate), 0, NULL, NULL},
    {"cuMemRelease", 10020, E(cuMemRelease), 0, NULL, NULL},
    {"cuMemGetAllocationGranularity", 10020, E(cuMemGetAllocationGranularity), 0, NULL, NULL},
    {"cuModuleLoadData", 2000, E(cuModuleLoadData), 0, NULL, NULL},
    {"cuModuleUnload", 2000, E(cuModuleUnload), 0, NULL, NULL},
    {"cuModuleGetFunction", 2000, E(cuModuleGetFunction), 0, NULL, NULL},
    {"cuStreamCreate", 2000, E(cuStreamCreate), 0, NULL, NULL},
    {"cuStreamDestroy", 4000, E(cuStreamDestroy_v2), 0, NULL, NULL},
    {"cuStreamSynchronize", 2000, E(cuStreamSynchronize), 0, NULL, E(cuStreamSynchronize_ptsz)},
    {"cuLaunchKernel", 4000, E(cuLaunchKernel), 0, NULL, E(cuLaunchKernel_ptsz)},
    {"cuLaunchKernelEx", 11060, E(cuLaunchKernelEx), 0, NULL, E(cuLaunchKernelEx_ptsz)},
    {"cuLaunchCooperativeKernel", 9000, E(cuLaunchCooperativeKernel), 0, NULL,
     E(cuLaunchCooperativeKernel_ptsz)},
    {"cuGraphCreate", 10000, E(cuGraphCreate), 0, NULL, NULL},
    {"cuGraphDestroy", 10000, E(cuGraphDestroy), 0, NULL, NULL},
    {"cuGraphInstantiateWithFlags", 11040, E(cuGraphInstantiateWithFlags), 0, NULL, NULL},
    {"cuGraphExecDestroy", 10000, E(cuGraphExecDestroy), 0, NULL, NULL},
    {"cuGraphLaunch", 10000, E(cuGraphLaunch), 0, NULL, E(cuGraphLaunch_ptsz)},
    {"cuGetProcAddress", 11030, E(cuGetProcAddress), 12000, E(cuGetProcAddress_v2), NULL},
};

_Static_assert(sizeof(entry_fn) == sizeof(void *), "entry points fit a void *");

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
        const struct proc *p = NULL;
        entry_fn fn;
        size_t i;

        if (!symbol || !pfn ||
            flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
                return CUDA_ERROR_INVALID_VALUE;
        *pfn = NULL;
        for (i = 0; i < sizeof(procs) / sizeof(procs[0]) && !p; i++)
                if (!strcmp(procs[i].name, symbol))
                        p = &procs[i];
        if (!p || version < p->since) {
                if (status)
                        *status = p ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                    : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
                return CUDA_ERROR_NOT_FOUND;
        }
        fn = p->v2 && version >= p->v2_from ? p->v2 : p->plain;
        if (p->ptsz && flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
                fn = p->ptsz;
        memcpy(pfn, &fn, sizeof(fn));
        if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags)
{
        return lookup(symbol, pfn, cuda_version, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
        return lookup(symbol, pfn, cuda_version, flags, status);
}

/* ---- the fake's own exports -------------------------------------------------------------- */

int tsr_fake_cuda_device_count(void)
{
        config();
        return st.n_dev;
}

uint64_t tsr_fake_cuda_busy_ns(int dev, uint64_t since_ns, uint64_t until_ns)
{
        uint64_t busy = 0;
        size_t i;

        config();
        if (dev < 0 || dev >= st.n_dev)
                return 0;
        pthread_mutex_lock(&st.lock);
        for (i = 0; i < st.dev[dev].hist_n; i++) {
                const struct interval *v =
                    &st.dev[dev].hist[(st.dev[dev].hist_next + FAKE_CUDA_HISTORY - 1 - i) %
                                      FAKE_CUDA_HISTORY];
                uint64_t s = v->start > since_ns ? v->start : since_ns;
                uint64_t e = v->end < until_ns ? v->end : until_ns;

                if (v->end <= since_ns)
                        break;
                if (e > s)
                        busy += e - s;
        }
        pthread_mutex_unlock(&st.lock);
        return busy;
}

bool tsr_fake_cuda_has_context(int dev)
{
        bool has;

        config();
        if (dev < 0 || dev >= st.n_dev)
                return false;
        pthread_mutex_lock(&st.lock);
        has = st.dev[dev].contexts > 0 || st.dev[dev].primary_refs > 0;
        pthread_mutex_unlock(&st.lock);
        return has;
}

int tsr_fake_cuda_memory(int dev, uint64_t *total, uint64_t *used)
{
        config();
        if (dev < 0 || dev >= st.n_dev)
                return -1;
        pthread_mutex_lock(&st.lock);
        *total = st.total;
        *used = st.dev[dev].used;
        pthread_mutex_unlock(&st.lock);
        return 0;
}
