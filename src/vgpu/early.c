/*
 * early.c - string helpers safe before a sanitizer runtime is up (early.h).
 */
#include "vgpu/early.h"

bool tsr_vgpu_starts_with(const char *s, const char *prefix)
{
        for (; *prefix; s++, prefix++)
                if (*s != *prefix)
                        return false;
        return true;
}

bool tsr_vgpu_same(const char *a, const char *b)
{
        for (; *a && *a == *b; a++, b++)
                ;
        return *a == *b;
}

const char *tsr_vgpu_base_name(const char *path)
{
        const char *base = path;

        for (; *path; path++)
                if (*path == '/')
                        base = path + 1;
        return base;
}
