/*
 * fnv.c - FNV-1a-64 (http://www.isthe.com/chongo/tech/comp/fnv/): xor the byte, then multiply.
 */
#include "base/fnv.h"

#include <string.h>

uint64_t tsr_fnv1a64_update(uint64_t h, const void *data, size_t len)
{
        const unsigned char *p = data;

        for (size_t i = 0; i < len; i++) {
                h ^= p[i];
                h *= TSR_FNV64_PRIME;
        }
        return h;
}

uint64_t tsr_fnv1a64_str(const char *s)
{
        return tsr_fnv1a64_update(TSR_FNV64_OFFSET, s, strlen(s));
}
