/*
 * rng.h - the replay's deterministic random numbers: xoshiro256** seeded through splitmix64, so
 * one seed gives one stream on every machine. Not Go's math/rand: a run reproduces the FGD
 * protocol's statistics, not the artifact's exact draws.
 *
 * Pure; the state is the caller's.
 */
#ifndef TSR_REPLAY_RNG_H
#define TSR_REPLAY_RNG_H

#include <stddef.h>
#include <stdint.h>

struct tsr_rng {
        uint64_t s[4];
};

void tsr_rng_seed(struct tsr_rng *r, uint64_t seed);

uint64_t tsr_rng_next(struct tsr_rng *r);

/* Uniform in [0, n); n > 0. Unbiased (rejection). */
uint64_t tsr_rng_below(struct tsr_rng *r, uint64_t n);

/* Shuffles n elements of size bytes at base (Fisher-Yates from the last position down, one
 * tsr_rng_below per position). */
void tsr_rng_shuffle(struct tsr_rng *r, void *base, size_t n, size_t size);

#endif
