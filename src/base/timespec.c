/*
 * timespec.c - millisecond arithmetic on struct timespec (timespec.h).
 */
#include "base/timespec.h"

#define NS_PER_S  1000000000L
#define NS_PER_MS 1000000L

struct timespec tsr_timespec_add_ms(struct timespec t, int64_t ms)
{
        t.tv_sec += (time_t)(ms / 1000);
        t.tv_nsec += (long)(ms % 1000) * NS_PER_MS;
        if (t.tv_nsec >= NS_PER_S) {
                t.tv_sec++;
                t.tv_nsec -= NS_PER_S;
        }
        return t;
}

int64_t tsr_timespec_ms_between(const struct timespec *from, const struct timespec *to)
{
        return ((int64_t)to->tv_sec - (int64_t)from->tv_sec) * 1000 +
               (to->tv_nsec - from->tv_nsec) / NS_PER_MS;
}

bool tsr_timespec_reached(const struct timespec *now, const struct timespec *deadline)
{
        return now->tv_sec > deadline->tv_sec ||
               (now->tv_sec == deadline->tv_sec && now->tv_nsec >= deadline->tv_nsec);
}

int64_t tsr_monotonic_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
