/*
 * state.c - the interposer's process-wide state and the driver's entry points (state.h, hooks.h).
 */
#define _GNU_SOURCE
#include "vgpu/state.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vgpu/early.h"
#include "vgpu/hooks.h"

extern char **environ;

typedef void tsr_any_fn(void);
typedef void *dlsym_fn(void *handle, const char *name);

struct tsr_vgpu_real tsr_vgpu_real;

static struct tsr_vgpu_state state;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static dlsym_fn *libc_dlsym;

static TSR_VGPU_EARLY void *addr_of(tsr_any_fn *f)
{
        union {
                tsr_any_fn *function;
                void *object;
        } p = {f};

        return p.object;
}

void tsr_vgpu_log(int level, const char *fmt, ...)
{
        char msg[768];
        va_list ap;

        if (level > state.cfg.log_level)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "tessera-vgpu: %s\n", msg);
}

TSR_VGPU_EARLY void *tsr_vgpu_real_dlsym(void *handle, const char *name)
{
        dlsym_fn *f = __atomic_load_n(&libc_dlsym, __ATOMIC_ACQUIRE);

        if (!f) {
                union {
                        void *object;
                        dlsym_fn *function;
                } p = {dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34")};

                if (!p.object)
                        p.object = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
                f = p.function;
                __atomic_store_n(&libc_dlsym, f, __ATOMIC_RELEASE);
        }
        return f ? f(handle, name) : NULL;
}

static void make_state(void)
{
        char err[512];
        bool limited = false;

        if (tsr_vgpu_config_parse((const char *const *)environ, &state.cfg, err, sizeof(err))) {
                state.failed = true;
                state.cfg.log_level = 2;
                tsr_vgpu_log(0, "%s; no device is usable until it is fixed", err);
                return;
        }
        if (state.cfg.disabled)
                return;
        for (int d = 0; d < TSR_VGPU_DEVICES_MAX; d++) {
                limited = limited || state.cfg.memory_limit[d] || state.cfg.sm_limit[d];
                state.throttled =
                    state.throttled || (state.cfg.sm_limit[d] && !state.cfg.throttle_disabled);
        }
        if (!limited)
                return; /* nothing to enforce: every call passes through */
        if (tsr_vgpu_region_open(state.cfg.cache_path, &state.region, err, sizeof(err))) {
                state.failed = true;
                state.throttled = false;
                tsr_vgpu_log(0, "the shared budget: %s; no device is usable until it is fixed",
                             err);
                return;
        }
        state.control = true;
}

const struct tsr_vgpu_state *tsr_vgpu_state(void)
{
        pthread_once(&state_once, make_state);
        return &state;
}

#define RESOLVE(name, type)                                                                        \
        do {                                                                                       \
                void *p_ = tsr_vgpu_real_dlsym(handle, #name);                                     \
                memcpy(&tsr_vgpu_real.name, &p_, sizeof(p_));                                      \
        } while (0);

static void open_cuda(void)
{
        void *handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);

        if (!handle) {
                tsr_vgpu_log(1, "cannot open the CUDA driver: %s", dlerror());
                return;
        }
        TSR_VGPU_CUDA_HOOKS(RESOLVE)
        TSR_VGPU_CUDA_CALLS(RESOLVE)
}

static void open_nvml(void)
{
        void *handle = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);

        if (!handle) {
                tsr_vgpu_log(3, "cannot open NVML: %s", dlerror());
                return;
        }
        TSR_VGPU_NVML_HOOKS(RESOLVE)
        TSR_VGPU_NVML_CALLS(RESOLVE)
        if (tsr_vgpu_real.nvmlInit_v2 && tsr_vgpu_real.nvmlInit_v2() != NVML_SUCCESS)
                tsr_vgpu_log(2, "NVML does not initialise: compute shares are not measured");
}

const struct tsr_vgpu_state *tsr_vgpu_cuda(void)
{
        pthread_once(&state_once, make_state);
        pthread_once(&cuda_once, open_cuda);
        return &state;
}

const struct tsr_vgpu_state *tsr_vgpu_nvml(void)
{
        pthread_once(&state_once, make_state);
        pthread_once(&nvml_once, open_nvml);
        return &state;
}

uint64_t tsr_vgpu_limit(const struct tsr_vgpu_state *s, int dev)
{
        return dev >= 0 && dev < TSR_VGPU_DEVICES_MAX ? s->cfg.memory_limit[dev] : 0;
}

/* ---- the hook table ------------------------------------------------------------------------ */

#define NAME_ROW(name, type) #name,
static const char *const hooked_names[] = {TSR_VGPU_CUDA_HOOKS(NAME_ROW)
                                               TSR_VGPU_NVML_HOOKS(NAME_ROW)};

TSR_VGPU_EARLY bool tsr_vgpu_is_hooked_name(const char *name)
{
        if (!tsr_vgpu_starts_with(name, "cu") && !tsr_vgpu_starts_with(name, "nvml"))
                return false;
        for (size_t i = 0; i < sizeof(hooked_names) / sizeof(hooked_names[0]); i++)
                if (tsr_vgpu_same(name, hooked_names[i]))
                        return true;
        return false;
}

TSR_VGPU_EARLY void *tsr_vgpu_hook_named(const char *name)
{
#define BY_NAME(fn, type)                                                                          \
        if (tsr_vgpu_same(name, #fn))                                                              \
                return addr_of((tsr_any_fn *)fn);
        TSR_VGPU_CUDA_HOOKS(BY_NAME)
        TSR_VGPU_NVML_HOOKS(BY_NAME)
        if (tsr_vgpu_same(name, "dlsym"))
                return addr_of((tsr_any_fn *)dlsym);
        return NULL;
}

void *tsr_vgpu_hook_for_real(const void *addr)
{
        tsr_vgpu_cuda();
#define BY_REAL(fn, type)                                                                          \
        if (tsr_vgpu_real.fn && addr_of((tsr_any_fn *)tsr_vgpu_real.fn) == addr)                   \
                return addr_of((tsr_any_fn *)fn);
        TSR_VGPU_CUDA_HOOKS(BY_REAL)
        return NULL;
}
