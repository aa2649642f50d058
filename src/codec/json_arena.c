/*
 * json_arena.c - see json_arena.h. Each thread owns its arena (thread-local storage), so nothing
 * here is shared between threads but jansson's allocator pointers, written once by the install.
 */
#include "codec/json_arena.h"

#include <jansson.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif

#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Every allocation is aligned as malloc aligns (16 on x86-64 and aarch64) and preceded by a
 * header of that size holding its length, which the poisoning needs. */
#define ALIGN  ((size_t)16)
#define HEADER ALIGN

struct block {
        struct block *next;
        size_t size, used; /* bytes of data */
        alignas(16) unsigned char data[];
};

struct arena {
        struct block *blocks; /* newest first */
        size_t live;          /* allocations made under this arena and not freed */
        bool active;
};

static _Thread_local struct arena tl_arena;
static pthread_key_t exit_key;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static bool exit_key_made;

/* The block p lies in (any of its bytes, so that one handed out before the last end counts). */
static struct block *owner(const struct arena *a, const void *p)
{
        for (struct block *b = a->blocks; b; b = b->next)
                if ((uintptr_t)p - (uintptr_t)b->data < b->size)
                        return b;
        return NULL;
}

static void block_free(struct block *b)
{
        UNPOISON(b->data, b->size);
        free(b);
}

static struct block *block_new(struct arena *a, size_t need)
{
        size_t size = TSR_JSON_ARENA_BLOCK;
        struct block *b;

        if (a->blocks && a->blocks->size <= SIZE_MAX / 4)
                size = a->blocks->size * 2;
        if (size < need)
                size = need;
        if (size > SIZE_MAX - sizeof(*b))
                return NULL;
        b = malloc(sizeof(*b) + size);
        if (!b)
                return NULL;
        b->size = size;
        b->used = 0;
        b->next = a->blocks;
        POISON(b->data, size);
        /* The thread's blocks go when it exits (a key's destructor needs a non-NULL value). */
        if (!a->blocks && exit_key_made)
                pthread_setspecific(exit_key, a);
        a->blocks = b;
        return b;
}

static void *arena_malloc(size_t n)
{
        struct arena *a = &tl_arena;
        struct block *b;
        unsigned char *h;
        size_t need;

        if (!a->active)
                return malloc(n);
        if (n > SIZE_MAX - 2 * ALIGN)
                return NULL;
        /* At least one byte past the header, so that the pointer lies inside its block even at
         * the block's end (owner() would not know a pointer one past it). */
        need = HEADER + ((n + (n == 0) + ALIGN - 1) & ~(ALIGN - 1));
        b = a->blocks;
        if (!b || b->size - b->used < need) {
                b = block_new(a, need);
                if (!b)
                        return NULL;
        }
        h = b->data + b->used;
        b->used += need;
        UNPOISON(h, HEADER + n);
        memcpy(h, &n, sizeof(n));
        POISON(h, HEADER);
        a->live++;
        return h + HEADER;
}

static void arena_free(void *p)
{
        struct arena *a = &tl_arena;
        unsigned char *h;
        size_t n;

        if (!p)
                return;
        if (!a->blocks || !owner(a, p)) {
                free(p);
                return;
        }
        if (!a->active) {
                /* Made under an arena that has ended: it escaped the request (json_arena.h). */
                fprintf(stderr, "json_arena: a jansson allocation was freed after its arena "
                                "ended\n");
                abort();
        }
        h = (unsigned char *)p - HEADER;
        UNPOISON(h, sizeof(n));
        memcpy(&n, h, sizeof(n));
        POISON(h, HEADER + n);
        a->live--;
}

static void thread_gone(void *arena)
{
        struct arena *a = arena;

        while (a->blocks) {
                struct block *b = a->blocks;

                a->blocks = b->next;
                block_free(b);
        }
}

static void install(void)
{
        exit_key_made = pthread_key_create(&exit_key, thread_gone) == 0;
        json_set_alloc_funcs(arena_malloc, arena_free);
}

void tsr_json_arena_install(void)
{
        pthread_once(&install_once, install);
}

void tsr_json_arena_begin(void)
{
        json_malloc_t m;
        json_free_t f;

        json_get_alloc_funcs(&m, &f);
        if (m != arena_malloc || tl_arena.active)
                return;
        tl_arena.live = 0;
        tl_arena.active = true;
}

size_t tsr_json_arena_live(void)
{
        return tl_arena.active ? tl_arena.live : 0;
}

size_t tsr_json_arena_end(void)
{
        struct arena *a = &tl_arena;
        struct block *keep = NULL, **at = &a->blocks;
        size_t left = a->live;

        if (!a->active)
                return 0;
        a->active = false;
        a->live = 0;
        /* Keep the largest block the limit allows; free the others. */
        for (struct block *b = a->blocks; b; b = b->next)
                if (b->size <= TSR_JSON_ARENA_KEEP && (!keep || b->size > keep->size))
                        keep = b;
        while (*at) {
                struct block *b = *at;

                if (b == keep) {
                        at = &b->next;
                        continue;
                }
                *at = b->next;
                block_free(b);
        }
        if (keep) {
                keep->used = 0;
                POISON(keep->data, keep->size);
        }
#ifdef ARENA_ASAN
        if (left) {
                /* What LeakSanitizer would have reported without the arena. */
                fprintf(stderr,
                        "json_arena: %zu jansson allocations made under the arena were "
                        "never freed\n",
                        left);
                abort();
        }
#endif
        return left;
}

void tsr_json_free(void *p)
{
        arena_free(p);
}
