/*
 * pid.c - the cached pid (pid.h).
 */
#include "vgpu/pid.h"

#include <pthread.h>
#include <unistd.h>

static pid_t cached;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void forget(void)
{
        __atomic_store_n(&cached, 0, __ATOMIC_RELAXED);
}

static void watch_forks(void)
{
        pthread_atfork(NULL, NULL, forget);
}

pid_t tsr_vgpu_pid(void)
{
        pid_t pid = __atomic_load_n(&cached, __ATOMIC_RELAXED);

        if (pid)
                return pid;
        pthread_once(&once, watch_forks);
        pid = getpid();
        __atomic_store_n(&cached, pid, __ATOMIC_RELAXED);
        return pid;
}
