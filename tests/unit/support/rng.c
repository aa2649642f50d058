/*
 * rng.c - the unit tests' fixed-seed LCG; see rng.h.
 */
#include "rng.h"

#include "core/catalog.h"

static uint64_t rng_state;

void rng_seed(uint64_t seed)
{
        rng_state = seed;
}

unsigned rnd(unsigned n)
{
        rng_state = rng_state * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        return (unsigned)((rng_state >> 33) % n);
}

unsigned rnd_start(uint32_t starts)
{
        unsigned n = (unsigned)__builtin_popcount(starts), k = rnd(n);

        for (unsigned s = 0; s < TSR_MIG_AXIS_MAX; s++)
                if ((starts & (UINT32_C(1) << s)) && k-- == 0)
                        return s;
        return 0;
}
