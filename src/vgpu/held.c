/*
 * held.c - the process's held handles: a chained hash table under one mutex (held.h).
 */
#include "vgpu/held.h"

#include <pthread.h>
#include <stdlib.h>

#include "vgpu/pid.h"

struct entry {
        struct entry *next;
        uint64_t handle;
        uint64_t bytes;
        int dev;
        enum tsr_vgpu_kind kind;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry **buckets;
static size_t n_buckets, n_entries;
static pid_t owner; /* the pid the table belongs to: a fork child drops the parent's */

static size_t bucket_of(enum tsr_vgpu_kind kind, uint64_t handle, size_t n)
{
        uint64_t h = (handle ^ ((uint64_t)kind << 56)) * UINT64_C(0x9e3779b97f4a7c15);

        return (size_t)(h >> 20) & (n - 1);
}

/* Under mu: forgets what a parent process held (its memory is not this process's). */
static void adopt(void)
{
        pid_t pid = tsr_vgpu_pid();

        if (owner == pid)
                return;
        for (size_t i = 0; i < n_buckets; i++)
                while (buckets[i]) {
                        struct entry *e = buckets[i];

                        buckets[i] = e->next;
                        free(e);
                }
        n_entries = 0;
        owner = pid;
}

/* Under mu: doubles the table when it is more than full (or makes the first one). */
static bool grow(void)
{
        size_t n = n_buckets ? n_buckets * 2 : 1024;
        struct entry **b = calloc(n, sizeof(*b));

        if (!b)
                return false;
        for (size_t i = 0; i < n_buckets; i++)
                while (buckets[i]) {
                        struct entry *e = buckets[i];
                        size_t j = bucket_of(e->kind, e->handle, n);

                        buckets[i] = e->next;
                        e->next = b[j];
                        b[j] = e;
                }
        free(buckets);
        buckets = b;
        n_buckets = n;
        return true;
}

bool tsr_vgpu_held_add(enum tsr_vgpu_kind kind, uint64_t handle, int dev, uint64_t bytes)
{
        struct entry *e = malloc(sizeof(*e));
        size_t j;

        if (!e)
                return false;
        pthread_mutex_lock(&mu);
        adopt();
        if (n_entries >= n_buckets && !grow() && !n_buckets) {
                pthread_mutex_unlock(&mu);
                free(e);
                return false;
        }
        j = bucket_of(kind, handle, n_buckets);
        *e = (struct entry){buckets[j], handle, bytes, dev, kind};
        buckets[j] = e;
        n_entries++;
        pthread_mutex_unlock(&mu);
        return true;
}

bool tsr_vgpu_held_take(enum tsr_vgpu_kind kind, uint64_t handle, int *dev, uint64_t *bytes)
{
        bool found = false;

        pthread_mutex_lock(&mu);
        adopt();
        if (n_buckets) {
                for (struct entry **p = &buckets[bucket_of(kind, handle, n_buckets)]; *p;
                     p = &(*p)->next) {
                        struct entry *e = *p;

                        if (e->kind == kind && e->handle == handle) {
                                *dev = e->dev;
                                *bytes = e->bytes;
                                *p = e->next;
                                free(e);
                                n_entries--;
                                found = true;
                                break;
                        }
                }
        }
        pthread_mutex_unlock(&mu);
        return found;
}
