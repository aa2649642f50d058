/*
 * rng.c - xoshiro256** (Blackman and Vigna) with splitmix64 seeding.
 */
#include "replay/rng.h"

static uint64_t splitmix64(uint64_t *x)
{
        uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

void tsr_rng_seed(struct tsr_rng *r, uint64_t seed)
{
        for (int i = 0; i < 4; i++)
                r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
        return (x << k) | (x >> (64 - k));
}

uint64_t tsr_rng_next(struct tsr_rng *r)
{
        uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        return result;
}

uint64_t tsr_rng_below(struct tsr_rng *r, uint64_t n)
{
        uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;

        do
                x = tsr_rng_next(r);
        while (x >= limit);
        return x % n;
}

void tsr_rng_shuffle(struct tsr_rng *r, void *base, size_t n, size_t size)
{
        unsigned char *v = base;

        for (size_t i = n; i > 1; i--) {
                unsigned char *a = v + (i - 1) * size, *b = v + (size_t)tsr_rng_below(r, i) * size;

                for (size_t k = 0; k < size; k++) {
                        unsigned char t = a[k];

                        a[k] = b[k];
                        b[k] = t;
                }
        }
}
