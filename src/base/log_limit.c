/*
 * log_limit.c - the interval gate of log_limit.h: a compare-and-swap on the next time a line may
 * pass, so that of threads racing at the same instant exactly one writes.
 */
#include "base/log_limit.h"
#include "base/timespec.h"

#include <time.h>

bool tsr_log_limit_pass(struct tsr_log_limit *l, unsigned long *held)
{
        int64_t now = tsr_monotonic_ms(), next = atomic_load(&l->next_ms);

        if (now < next ||
            !atomic_compare_exchange_strong(&l->next_ms, &next, now + (int64_t)l->every_ms)) {
                atomic_fetch_add(&l->held, 1);
                return false;
        }
        *held = atomic_exchange(&l->held, 0);
        return true;
}
