/*
 * region.c - the shared budget file (invariants in region.h).
 */
#define _GNU_SOURCE
#include "vgpu/region.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/pid.h"

#define MAGIC   "TSRVGPU"
#define VERSION 1u

struct proc_slot {
        int32_t pid; /* 0: free */
        uint32_t host_pid;
        uint64_t start_time; /* /proc/<pid>/stat field 22 */
        uint64_t used[TSR_VGPU_DEVICES_MAX];
};

struct tsr_vgpu_region {
        char magic[8];
        uint32_t version;
        uint32_t size;
        pthread_mutex_t lock;
        uint64_t used[TSR_VGPU_DEVICES_MAX];
        struct tsr_vgpu_throttle_state throttle[TSR_VGPU_DEVICES_MAX];
        struct proc_slot procs[TSR_VGPU_PROCS_MAX];
};

/* This process's slot (-1: not joined), and the pid it joined under (a fork child re-joins). */
static int my_slot = -1;
static pid_t my_pid;

static uint64_t start_time_of(pid_t pid)
{
        char path[64], buf[1024];
        unsigned long long t = 0;
        ssize_t n;
        char *p;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        /* after "pid (comm) ": the comm may hold spaces and parentheses, the last ')' ends it */
        p = strrchr(buf, ')');
        if (!p)
                return 0;
        /* fields 3.. follow; starttime is field 22, the 20th after the ')' */
        for (int field = 3; field < 22 && p; field++)
                p = strchr(p + 1, ' ');
        if (!p || sscanf(p + 1, "%llu", &t) != 1)
                return 0;
        return t;
}

static bool alive(const struct proc_slot *s)
{
        uint64_t t;

        if (kill(s->pid, 0) && errno == ESRCH)
                return false;
        /* a pid we cannot inspect (another user's /proc hidden) counts as alive */
        t = start_time_of(s->pid);
        return !t || !s->start_time || t == s->start_time;
}

static void recompute(struct tsr_vgpu_region *r)
{
        memset(r->used, 0, sizeof(r->used));
        for (int i = 0; i < TSR_VGPU_PROCS_MAX; i++)
                if (r->procs[i].pid)
                        for (int d = 0; d < TSR_VGPU_DEVICES_MAX; d++)
                                r->used[d] += r->procs[i].used[d];
}

static void lock(struct tsr_vgpu_region *r)
{
        int rc = pthread_mutex_lock(&r->lock);

        if (rc == EOWNERDEAD) {
                /* the owner died mid-update: the slots are the truth */
                recompute(r);
                pthread_mutex_consistent(&r->lock);
        }
}

static void unlock(struct tsr_vgpu_region *r)
{
        pthread_mutex_unlock(&r->lock);
}

/* Under lock: frees the slots of processes that are gone. */
static void reap(struct tsr_vgpu_region *r)
{
        bool changed = false;

        for (int i = 0; i < TSR_VGPU_PROCS_MAX; i++) {
                struct proc_slot *s = &r->procs[i];

                if (s->pid && i != my_slot && !alive(s)) {
                        memset(s, 0, sizeof(*s));
                        changed = true;
                }
        }
        if (changed)
                recompute(r);
}

/* Under lock: this process's slot, joining (after reaping, when full) on first use. */
static struct proc_slot *self(struct tsr_vgpu_region *r)
{
        pid_t pid = tsr_vgpu_pid();

        if (my_slot >= 0 && my_pid == pid && r->procs[my_slot].pid == pid)
                return &r->procs[my_slot];
        my_slot = -1;
        for (int pass = 0; pass < 2; pass++) {
                for (int i = 0; i < TSR_VGPU_PROCS_MAX; i++) {
                        struct proc_slot *s = &r->procs[i];

                        if (!s->pid) {
                                memset(s, 0, sizeof(*s));
                                s->pid = pid;
                                s->start_time = start_time_of(pid);
                                my_slot = i;
                                my_pid = pid;
                                return s;
                        }
                }
                reap(r);
        }
        return NULL;
}

static int init_new(struct tsr_vgpu_region *r, char *err, size_t len)
{
        pthread_mutexattr_t a;
        int rc;

        memset(r, 0, sizeof(*r));
        if ((rc = pthread_mutexattr_init(&a)) ||
            (rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED)) ||
            (rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST)) ||
            (rc = pthread_mutex_init(&r->lock, &a))) {
                snprintf(err, len, "cannot make the region's lock: %s", strerror(rc));
                return -1;
        }
        pthread_mutexattr_destroy(&a);
        r->version = VERSION;
        r->size = (uint32_t)sizeof(*r);
        /* the magic last: a creator that died before it leaves the file to be made again */
        memcpy(r->magic, MAGIC, sizeof(MAGIC));
        __atomic_thread_fence(__ATOMIC_RELEASE);
        return 0;
}

/* Creates the missing parent directories of path (world-writable, sticky, like /tmp). */
static void make_parents(const char *path)
{
        char dir[TSR_VGPU_PATH_MAX];

        snprintf(dir, sizeof(dir), "%s", path);
        for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
                *p = '\0';
                if (!mkdir(dir, 01777))
                        chmod(dir, 01777);
                *p = '/';
        }
}

int tsr_vgpu_region_open(const char *path, struct tsr_vgpu_region **out, char *err, size_t len)
{
        struct tsr_vgpu_region *r = MAP_FAILED;
        struct stat st;
        int fd, rc = -1;

        make_parents(path);
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
                snprintf(err, len, "%s: %s", path, strerror(errno));
                return -1;
        }
        fchmod(fd, 0666); /* umask aside; fails harmlessly when another user made it */
        if (flock(fd, LOCK_EX)) {
                snprintf(err, len, "%s: lock: %s", path, strerror(errno));
                goto out;
        }
        if (fstat(fd, &st)) {
                snprintf(err, len, "%s: %s", path, strerror(errno));
                goto out;
        }
        if (st.st_size == 0 && ftruncate(fd, (off_t)sizeof(*r))) {
                snprintf(err, len, "%s: cannot size it: %s", path, strerror(errno));
                goto out;
        }
        if (st.st_size != 0 && st.st_size != (off_t)sizeof(*r)) {
                snprintf(err, len,
                         "%s: %lld bytes, not a tessera budget of this version (%zu bytes); "
                         "another library's file?",
                         path, (long long)st.st_size, sizeof(*r));
                goto out;
        }
        r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (r == MAP_FAILED) {
                snprintf(err, len, "%s: mmap: %s", path, strerror(errno));
                goto out;
        }
        if (st.st_size == 0 || r->magic[0] == '\0') {
                if (init_new(r, err, len))
                        goto out;
        } else if (memcmp(r->magic, MAGIC, sizeof(MAGIC)) || r->version != VERSION ||
                   r->size != sizeof(*r)) {
                snprintf(err, len, "%s: not a tessera budget of this version", path);
                goto out;
        }
        *out = r;
        r = MAP_FAILED;
        rc = 0;
out:
        if (r != MAP_FAILED)
                munmap(r, sizeof(*r));
        /* the mapping holds the open file: the lock must be dropped, not left to close */
        flock(fd, LOCK_UN);
        close(fd);
        return rc;
}

bool tsr_vgpu_region_reserve(struct tsr_vgpu_region *r, int dev, uint64_t bytes, uint64_t limit)
{
        struct proc_slot *s;
        bool ok = false;

        lock(r);
        s = self(r);
        if (s && limit && r->used[dev] + bytes > limit)
                reap(r);
        if (s && (!limit || (bytes <= limit && r->used[dev] <= limit - bytes))) {
                s->used[dev] += bytes;
                r->used[dev] += bytes;
                ok = true;
        }
        unlock(r);
        return ok;
}

void tsr_vgpu_region_release(struct tsr_vgpu_region *r, int dev, uint64_t bytes)
{
        struct proc_slot *s;

        lock(r);
        s = self(r);
        if (s) {
                if (bytes > s->used[dev])
                        bytes = s->used[dev];
                s->used[dev] -= bytes;
                r->used[dev] -= bytes;
        }
        unlock(r);
}

uint64_t tsr_vgpu_region_used(struct tsr_vgpu_region *r, int dev)
{
        uint64_t used;

        lock(r);
        reap(r);
        used = r->used[dev];
        unlock(r);
        return used;
}

void tsr_vgpu_region_set_host_pid(struct tsr_vgpu_region *r, unsigned host_pid)
{
        struct proc_slot *s;

        lock(r);
        s = self(r);
        if (s)
                s->host_pid = host_pid;
        unlock(r);
}

size_t tsr_vgpu_region_host_pids(struct tsr_vgpu_region *r, unsigned *pids, size_t max)
{
        size_t n = 0;

        lock(r);
        for (int i = 0; i < TSR_VGPU_PROCS_MAX && n < max; i++)
                if (r->procs[i].pid && r->procs[i].host_pid)
                        pids[n++] = r->procs[i].host_pid;
        unlock(r);
        return n;
}

int tsr_vgpu_region_with_throttle(struct tsr_vgpu_region *r, int dev,
                                  int (*fn)(struct tsr_vgpu_throttle_state *s, void *arg),
                                  void *arg)
{
        int rc;

        lock(r);
        rc = fn(&r->throttle[dev], arg);
        unlock(r);
        return rc;
}
