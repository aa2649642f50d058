/*
 * json_tree.h - copying and writing jansson trees that are known to be trees (no value reachable
 * twice from itself), without the loop check jansson's json_deep_copy and json_dumps pay on
 * every object and array (a hash table of "%p"-formatted parents): what a decoded document, an
 * object copied from one, and a JSON Patch built from them always are.
 *
 * tsr_json_copy gives a tree equal to v (json_equal, same key order); tsr_json_write appends
 * exactly what json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) would write: members in insertion
 * order, strings escaped as jansson escapes them (quote and backslash; \b \t \n \f \r; other
 * control bytes as \u00XX in upper case; '/' and UTF-8 as they are), integers in decimal, reals
 * through jansson's own formatting. tsr_json_write_text appends a C string the same way, each byte
 * that starts no valid UTF-8 sequence written as U+FFFD (a message cut inside a character).
 *
 * Ownership: tsr_json_copy returns a new reference (NULL on ENOMEM); the writers append to the
 * caller's buffer and return 0 or its error. Pure; thread-safe on trees no one writes meanwhile.
 */
#ifndef TSR_CODEC_JSON_TREE_H
#define TSR_CODEC_JSON_TREE_H

#include <jansson.h>
#include <stddef.h>

struct tsr_buf;

json_t *tsr_json_copy(json_t *v);

int tsr_json_write(struct tsr_buf *b, json_t *v);

int tsr_json_write_text(struct tsr_buf *b, const char *s, size_t len);

/*
 * Copy on write, for a tree that starts as a shallow copy of another and is then edited in a few
 * places (the Pod fold's patched object, diffed against the request's): tsr_json_share gives a
 * new object or array holding the same children (each referenced once more), any other value
 * referenced once more. tsr_json_own_member and tsr_json_own_element give parent's object or
 * array child ready to be written: when it is referenced from elsewhere too (shared with the
 * tree it came from), parent gets a shallow copy in its place, which is returned. They return
 * the child as it is when it is no object or array, NULL when it is absent or memory ran out.
 * Single-threaded: a reference count above one is read as "shared".
 */
json_t *tsr_json_share(json_t *v);

json_t *tsr_json_own_member(json_t *parent, const char *key);

json_t *tsr_json_own_element(json_t *parent, size_t index);

#endif
