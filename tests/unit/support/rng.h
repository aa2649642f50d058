/*
 * rng.h - the unit tests' fixed-seed pseudo-random sequence: a 64-bit LCG (Knuth's MMIX
 * multiplier and increment) whose high bits are drawn, so that a seed written in a test names
 * one reproducible sequence on every platform.
 *
 * Ownership: the state is one process-wide variable inside this module (each test executable
 * has its own); rng_seed sets it and every draw advances it. Nothing is allocated.
 */
#ifndef TSR_TEST_SUPPORT_RNG_H
#define TSR_TEST_SUPPORT_RNG_H

#include <stdint.h>

/* Restarts the sequence at seed. */
void rng_seed(uint64_t seed);

/* The next draw, in [0, n); n must not be 0. */
unsigned rnd(unsigned n);

/*
 * A legal start slot drawn from starts (a MIG profile's start mask): its k-th set bit, k being
 * one draw of rnd(popcount(starts)). starts must not be 0.
 */
unsigned rnd_start(uint32_t starts);

#endif
