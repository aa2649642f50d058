/*
 * json_pick.h - read a JSON text, check all of it as jansson would, and build only the members a
 * reader names: the AdmissionReview of a 3.6 KB Pod becomes a tree of the dozen values gate 1
 * reads instead of ~400 allocated values.
 *
 * A pick list names paths from the value it applies to: member names joined by '.', and "[]" for
 * every element of an array ("spec.containers[].resources"). A path that ends takes the value
 * whole, parsed by jansson; an entry with `below` takes the value's members that `below` names
 * instead. An object on the way to a named path keeps only the members some path names, in the
 * order of the text; an array on the way keeps every element, each picked the same way, so
 * indices and sizes are those of the text. A value on the way that is not the object or array the
 * path steps into is taken whole, so a reader sees its type exactly as in the full tree. A path
 * that two entries name whole and deeper is taken whole.
 *
 * Contract: when tsr_json_pick_load returns 0, json_loadb(text, len, JSON_REJECT_DUPLICATES)
 * accepts the text, and *out equals that full tree with every member no path names removed. It
 * declines (0 with *out NULL, nothing built) whenever it cannot be sure of both: bad JSON of any
 * kind, a key that escapes to U+0000, a number longer than 15 characters or with an exponent past
 * two digits, nesting past TSR_JSON_PICK_DEPTH_MAX, more than TSR_JSON_PICK_KEYS_MAX keys open at
 * once or a duplicate key (checked after unescaping, at every depth, picked or not). The caller
 * then reads the text with jansson, which answers and words the error. Strings are checked for
 * jansson's UTF-8 (base/utf8.h), control characters and escapes, \u surrogates paired.
 *
 * Ownership: *out is a new tree (json_decref); the pick lists are borrowed for the call. No I/O,
 * no globals; thread-safe.
 */
#ifndef TSR_CODEC_JSON_PICK_H
#define TSR_CODEC_JSON_PICK_H

#include <jansson.h>
#include <stddef.h>

#define TSR_JSON_PICK_DEPTH_MAX 64
#define TSR_JSON_PICK_KEYS_MAX  256
#define TSR_JSON_PICK_ACTIVE    32 /* paths one object can be matched against at once */

struct tsr_json_pick {
        const char *path;                  /* NULL ends a list */
        const struct tsr_json_pick *below; /* NULL: the value whole */
};

/*
 * Picks from text (len bytes) what picks names into *out. Returns 0 with the tree in *out, or
 * with *out NULL when it declines (read the text with jansson instead), or TSR_ENOMEM.
 */
int tsr_json_pick_load(const char *text, size_t len, const struct tsr_json_pick *picks,
                       json_t **out);

#endif
