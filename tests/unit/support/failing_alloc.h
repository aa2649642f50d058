/*
 * failing_alloc.h - a malloc that fails on demand, for allocation-failure loops: install it with
 * json_set_alloc_funcs(failing_malloc, free), set a budget of k, run the code under test, set the
 * budget back to -1. It returns NULL once k allocations have succeeded since the budget was set.
 *
 * Ownership: failing_malloc's memory comes from malloc and is released with free. The budget is
 * one process-wide variable inside this module (each test executable has its own); restoring -1
 * and the caller's allocator afterwards is the caller's job. Nothing else is allocated.
 */
#ifndef TSR_TEST_SUPPORT_FAILING_ALLOC_H
#define TSR_TEST_SUPPORT_FAILING_ALLOC_H

#include <stddef.h>

/* Allocations left before failing_malloc fails; -1 (the initial value): never fail. */
void failing_alloc_budget(long budget);

/* malloc(n), or NULL when the budget is spent (a budget of 0). */
void *failing_malloc(size_t n);

#endif
