/*
 * procaddr.c - how programs reach the driver without naming its symbols: dlsym on the driver's
 * handle (what the CUDA runtime does first) and cuGetProcAddress (how it gets everything else).
 *
 * dlsym: a hooked name found in the driver's own library (libcuda.so*, libnvidia-ml.so*) answers
 * the hook; everything else is libc's answer. RTLD_NEXT is caller-relative, and a call made from
 * here would be relative to this library, so it is resolved for the caller: the first object
 * after the caller's in the link map that defines the name itself (elf_lookup.h; an object a
 * program dlopen()ed with RTLD_LOCAL is searched like the rest, where libc would search only its
 * loader's scope). A sanitizer runtime's first dlsym calls come before it is up, so this path is
 * early.h's.
 * cuGetProcAddress (both versions): the driver answers; an address that is a hooked entry point
 * is replaced by its hook (hooks.h), so a version the interposer does not know passes through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include "vgpu/early.h"
#include "vgpu/elf_lookup.h"
#include "vgpu/hooks.h"
#include "vgpu/state.h"

#define EXPORT __attribute__((visibility("default")))

/* Whether addr lies in a library whose file name starts with prefix. */
static TSR_VGPU_EARLY bool in_library(const void *addr, const char *prefix)
{
        struct link_map *map = NULL;
        Dl_info info;

        return dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP) && info.dli_fname &&
               tsr_vgpu_starts_with(tsr_vgpu_base_name(info.dli_fname), prefix);
}

/* The link map entry of the object holding addr, or NULL. */
static TSR_VGPU_EARLY struct link_map *map_of(const void *addr)
{
        struct link_map *map = NULL;
        Dl_info info;

        return dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP) ? map : NULL;
}

/*
 * RTLD_NEXT for caller: the first object after the caller's in the link map that defines name
 * itself (this library's own exports included), read from each object's symbol table.
 */
static TSR_VGPU_EARLY void *next_after(const void *caller, const char *name)
{
        struct link_map *from = map_of(caller);
        void *sym;

        for (struct link_map *l = from ? from->l_next : NULL; l; l = l->l_next)
                if ((sym = tsr_vgpu_elf_lookup(l, name)))
                        return sym;
        return NULL;
}

EXPORT TSR_VGPU_EARLY void *dlsym(void *restrict handle, const char *restrict name)
{
        void *sym = handle == RTLD_NEXT ? next_after(__builtin_return_address(0), name)
                                        : tsr_vgpu_real_dlsym(handle, name);

        if (sym && tsr_vgpu_is_hooked_name(name) &&
            in_library(sym, tsr_vgpu_starts_with(name, "nvml") ? "libnvidia-ml.so" : "libcuda.so"))
                return tsr_vgpu_hook_named(name);
        return sym;
}

static void map_to_hook(void **pfn)
{
        void *hook;

        if (pfn && *pfn && (hook = tsr_vgpu_hook_for_real(*pfn)))
                *pfn = hook;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags)
{
        CUresult rc;

        tsr_vgpu_cuda();
        if (!tsr_vgpu_real.cuGetProcAddress)
                return CUDA_ERROR_NOT_SUPPORTED;
        rc = tsr_vgpu_real.cuGetProcAddress(symbol, pfn, cuda_version, flags);
        if (rc == CUDA_SUCCESS)
                map_to_hook(pfn);
        return rc;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
        CUresult rc;

        tsr_vgpu_cuda();
        if (!tsr_vgpu_real.cuGetProcAddress_v2)
                return CUDA_ERROR_NOT_SUPPORTED;
        rc = tsr_vgpu_real.cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, status);
        if (rc == CUDA_SUCCESS)
                map_to_hook(pfn);
        return rc;
}
