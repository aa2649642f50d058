/*
 * failing_alloc.c - a malloc that fails on demand; see failing_alloc.h.
 */
#include "failing_alloc.h"

#include <stdlib.h>

static long alloc_budget = -1; /* allocations left before failing; -1: never fail */

void failing_alloc_budget(long budget)
{
        alloc_budget = budget;
}

void *failing_malloc(size_t n)
{
        if (alloc_budget == 0)
                return NULL;
        if (alloc_budget > 0)
                alloc_budget--;
        return malloc(n);
}
