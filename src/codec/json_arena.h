/*
 * json_arena.h - a per-thread arena for jansson's allocations during one request: the webhook
 * decodes a review into about 150 small jansson values, copies and edits some, diffs them and
 * frees them all before it answers. Under an arena each of those allocations is a pointer bump
 * in a block the thread keeps, each free does nothing, and the end of the request takes them all
 * back at once, instead of a malloc and a free apiece.
 *
 * tsr_json_arena_install puts this module's allocator into jansson (json_set_alloc_funcs), once
 * per process. jansson's allocator is process-wide, so the install must come before any other
 * thread uses jansson (the webhook command installs it first thing). Outside an arena the
 * allocator is malloc and free, as jansson's own default.
 *
 * tsr_json_arena_begin starts the calling thread's arena, tsr_json_arena_end ends it. In
 * between, every jansson value and buffer the thread makes comes from the arena; a free of one of
 * them does nothing; a free of memory made outside it (a value made before begin, or another
 * thread's) goes to free as before. begin does nothing when the allocator is not installed, and
 * ends report 0 then.
 *
 * Invariants, which the caller keeps: nothing made under an arena outlives its end (no value is
 * stored where another request or thread reads it; the kube cache hands readers copies and keeps
 * its own objects to its watcher threads), and memory jansson returns to the caller (json_dumps)
 * is released with tsr_json_free, never with free. Arenas do not nest.
 *
 * Under AddressSanitizer every arena byte not handed out, freed or taken back at the end is
 * poisoned, so a use after free or after the end is reported as before; and an end that finds
 * values never freed aborts with their count, which is what LeakSanitizer reported before.
 *
 * Memory: a thread keeps its largest block up to TSR_JSON_ARENA_KEEP between requests (freed when
 * the thread exits); larger or further blocks are freed at the end.
 */
#ifndef TSR_CODEC_JSON_ARENA_H
#define TSR_CODEC_JSON_ARENA_H

#include <stddef.h>

#define TSR_JSON_ARENA_BLOCK ((size_t)64 * 1024)
#define TSR_JSON_ARENA_KEEP  ((size_t)1024 * 1024)

void tsr_json_arena_install(void);

void tsr_json_arena_begin(void);

/* How many allocations the thread's arena has handed out and not seen freed (0 outside one). */
size_t tsr_json_arena_live(void);

/* Ends the thread's arena; returns how many of its allocations were never freed. */
size_t tsr_json_arena_end(void);

/* Releases memory jansson returned (json_dumps and the like), made under an arena or not. */
void tsr_json_free(void *p);

#endif
