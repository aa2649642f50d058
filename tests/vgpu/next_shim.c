/*
 * next_shim.c - another preloaded shim beside the interposer: it wraps puts and reaches the real
 * one with dlsym(RTLD_NEXT), as allocator and tracing shims do. check_rtld_next.sh preloads it
 * before and after libtessera-vgpu.so: the interposer's dlsym must find the shim's next, not its
 * own, or the shim would call itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int puts(const char *s)
{
        union {
                void *object;
                int (*function)(const char *);
        } next = {dlsym(RTLD_NEXT, "puts")};

        if (!next.object || next.function == puts)
                return -1;
        fputs("[shim] ", stdout);
        return next.function(s);
}
