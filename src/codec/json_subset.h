/*
 * json_subset.h - a pull scanner for the subset of JSON that programs write for programs: ASCII
 * strings without escapes, integers without fraction or exponent that fit in int64, true, false,
 * null, objects whose keys are distinct, arrays, whitespace. It reads in place, builds no tree
 * and allocates nothing, for decoders on a hot path (codec/alloc_annotation.c).
 *
 * It never guesses: anything outside the subset -- an escape, a byte above 0x7f, a control
 * character, a fraction or exponent, a number past int64, a duplicate key, nesting past
 * TSR_JSUB_DEPTH_MAX or more than TSR_JSUB_KEYS_MAX keys in one object, trailing bytes, or plain
 * bad JSON -- sets s->outside and makes every later call fail. A caller then decodes the same
 * text with jansson, which gives the answer and the message for everything the subset declined,
 * so whatever the subset accepts must mean exactly what jansson would read (keys distinct as
 * with JSON_REJECT_DUPLICATES).
 *
 * Ownership: the scanner points into the caller's text, which must outlive it and every string
 * it hands out (struct tsr_jsub_str is a pointer and a length, not NUL-terminated). No I/O, no
 * globals; one scanner per thread.
 */
#ifndef TSR_CODEC_JSON_SUBSET_H
#define TSR_CODEC_JSON_SUBSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSR_JSUB_DEPTH_MAX 16
#define TSR_JSUB_KEYS_MAX  24

struct tsr_jsub_str {
        const char *p;
        size_t len;
};

struct tsr_jsub {
        const char *p, *end;
        bool outside;
        unsigned depth; /* open objects and arrays */
        /* the keys of each open object, to refuse a duplicate */
        unsigned n_keys[TSR_JSUB_DEPTH_MAX];
        struct tsr_jsub_str keys[TSR_JSUB_DEPTH_MAX][TSR_JSUB_KEYS_MAX];
        bool first[TSR_JSUB_DEPTH_MAX]; /* no member or element read yet at this depth */
};

void tsr_jsub_init(struct tsr_jsub *s, const char *text, size_t len);

/* The next value is an object: opens it. */
bool tsr_jsub_object(struct tsr_jsub *s);

/*
 * The next member of the open object: true with *key set (the value is next), or false at its
 * end (it is closed) or outside the subset (s->outside).
 */
bool tsr_jsub_key(struct tsr_jsub *s, struct tsr_jsub_str *key);

/* The next value is an array: opens it. */
bool tsr_jsub_array(struct tsr_jsub *s);

/* Whether the open array has another element (next to read); false at its end (closed). */
bool tsr_jsub_element(struct tsr_jsub *s);

/* The next value is a string / an integer. */
bool tsr_jsub_string(struct tsr_jsub *s, struct tsr_jsub_str *out);
bool tsr_jsub_int(struct tsr_jsub *s, int64_t *out);

/* The first byte of the next value (after whitespace), or 0 at the end or outside the subset. */
char tsr_jsub_peek(struct tsr_jsub *s);

/* Reads over the next value, whatever it is. */
bool tsr_jsub_skip(struct tsr_jsub *s);

/* Whether only whitespace is left (and the scan never left the subset). */
bool tsr_jsub_end(struct tsr_jsub *s);

/* Whether str equals the NUL-terminated lit. */
bool tsr_jsub_is(const struct tsr_jsub_str *str, const char *lit);

#endif
