/*
 * json_pick.c - see json_pick.h. One recursive pass over the text: values no path names are
 * checked and stepped over; values a path names whole are checked, then parsed by jansson from
 * their span; objects and arrays on the way to a named path are built here.
 *
 * Invariants: the keys of every open object sit on one stack (scan.keys), decoded when they carry
 * an escape, so a duplicate is found after unescaping as jansson finds it; a frame pops its keys
 * when its object closes. Any doubt sets scan.declined and unwinds; nothing half-built escapes.
 */
#include "codec/json_pick.h"

#include "base/err.h"
#include "base/hex.h"
#include "base/utf8.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NUMBER_LEN_MAX   15 /* so that no integer overflows and no real does with exponent */
#define EXPONENT_LEN_MAX 2  /* ... of at most two digits: |x| < 1e15 * 1e99 */

struct key {
        const char *p;
        size_t len;
};

struct scan {
        const unsigned char *p, *end;
        unsigned depth;
        bool declined;
        bool nomem;
        size_t n_keys;
        struct key keys[TSR_JSON_PICK_KEYS_MAX];
        char *decoded; /* unescaped keys, allocated on the first key with an escape */
        size_t decoded_len, decoded_cap;
};

/* A path still to match at a value: the rest of entry->path, or of a `below` entry's path. */
struct active {
        const struct tsr_json_pick *entry;
        const char *rest;
};

/* Byte classes inside a string. */
enum { PLAIN, QUOTE, BACKSLASH, CONTROL, HIGH };

static int string_class(unsigned char c)
{
        if (c >= 0x80)
                return HIGH;
        if (c < 0x20)
                return CONTROL;
        return c == '"' ? QUOTE : c == '\\' ? BACKSLASH : PLAIN;
}

static bool decline(struct scan *s)
{
        s->declined = true;
        return false;
}

static bool nomem(struct scan *s)
{
        s->nomem = true;
        return decline(s);
}

static void skip_ws(struct scan *s)
{
        /* Compact JSON has none: one comparison decides for any byte past the space. */
        while (s->p < s->end && *s->p <= ' ' &&
               (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
                s->p++;
}

/* Reads the 4 hex digits after "\u" at s->p; -1 when they are not there. */
static long hex4(struct scan *s)
{
        long v = 0;

        if (s->end - s->p < 4)
                return -1;
        for (int i = 0; i < 4; i++) {
                int d = tsr_hex_value(s->p[i]);

                if (d < 0)
                        return -1;
                v = v << 4 | d;
        }
        s->p += 4;
        return v;
}

static size_t utf8_put(char *out, uint32_t cp)
{
        if (cp < 0x80) {
                out[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char)(0xc0 | cp >> 6);
                out[1] = (char)(0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char)(0xe0 | cp >> 12);
                out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
                out[2] = (char)(0x80 | (cp & 0x3f));
                return 3;
        }
        out[0] = (char)(0xf0 | cp >> 18);
        out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
}

/*
 * How many of the 8 bytes at p come before the first quote, backslash, control byte or byte
 * above 0x7f: 8 when none is. (v - ones) & ~v & highs flags a zero byte of v, and maybe bytes
 * of higher significance (a borrow runs upwards), so on a little-endian machine the lowest flag
 * is exactly the first such byte in memory.
 */
static unsigned plain_prefix8(const unsigned char *p)
{
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t x, quote, backslash, special;

        memcpy(&x, p, 8);
        quote = x ^ (ones * '"');
        backslash = x ^ (ones * '\\');
        special = (((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) |
                   ((x - ones * 0x20) & ~x) | x) &
                  highs;
        if (!special)
                return 8;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        return (unsigned)__builtin_ctzll(special) / 8;
#else
        return 0; /* the lowest flag is the last byte in memory: let the byte loop look */
#endif
}

/*
 * Reads the escape after a backslash at s->p; appends what it means to out (when not NULL).
 * False (declined) on anything jansson refuses: an unknown escape, bad hex, a lone or unpaired
 * surrogate, U+0000.
 */
static bool scan_escape(struct scan *s, char *out, size_t *n)
{
        static const char simple_in[] = "\"\\/bfnrt", simple_out[] = "\"\\/\b\f\n\r\t";
        const char *hit;
        long cp;

        if (s->p >= s->end)
                return decline(s);
        if (*s->p != 'u') {
                hit = *s->p ? strchr(simple_in, *s->p) : NULL;
                if (!hit)
                        return decline(s);
                if (out)
                        out[(*n)++] = simple_out[hit - simple_in];
                s->p++;
                return true;
        }
        s->p++;
        cp = hex4(s);
        if (cp <= 0 || (cp >= 0xdc00 && cp <= 0xdfff))
                return decline(s);
        if (cp >= 0xd800 && cp <= 0xdbff) {
                long low;

                if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
                        return decline(s);
                s->p += 2;
                low = hex4(s);
                if (low < 0xdc00 || low > 0xdfff)
                        return decline(s);
                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        }
        if (out)
                *n += utf8_put(out + *n, (uint32_t)cp);
        return true;
}

/*
 * Checks the string at s->p (on its opening quote) and steps past it. With key set, *key is the
 * string's bytes: in the text when it has no escape, else unescaped into s->decoded (a value's
 * caller gives those bytes back with release_decoded once it has copied them).
 */
static bool scan_string(struct scan *s, struct key *key)
{
        const unsigned char *start = ++s->p;
        char *out = NULL;
        size_t n = 0;

        for (;;) {
                while (s->end - s->p >= 8) {
                        unsigned plain = plain_prefix8(s->p);

                        s->p += plain;
                        if (plain < 8)
                                break;
                }
                while (s->p < s->end && string_class(*s->p) == PLAIN)
                        s->p++;
                if (s->p >= s->end)
                        return decline(s);
                switch (string_class(*s->p)) {
                case QUOTE:
                        if (key && !out) {
                                key->p = (const char *)start;
                                key->len = (size_t)(s->p - start);
                        } else if (key) {
                                size_t tail = (size_t)(s->p - start);

                                memcpy(out + n, start, tail);
                                n += tail;
                                key->p = out;
                                key->len = n;
                                s->decoded_len += n;
                        }
                        s->p++;
                        return true;
                case BACKSLASH:
                        if (key && !out) {
                                if (!s->decoded) {
                                        /* No key unescapes longer than it is written. */
                                        s->decoded_cap = (size_t)(s->end - start) + 1;
                                        s->decoded = malloc(s->decoded_cap);
                                        if (!s->decoded)
                                                return nomem(s);
                                }
                                out = s->decoded + s->decoded_len;
                        }
                        if (out) {
                                memcpy(out + n, start, (size_t)(s->p - start));
                                n += (size_t)(s->p - start);
                        }
                        s->p++;
                        if (!scan_escape(s, out, &n))
                                return false;
                        start = s->p;
                        break;
                case HIGH: {
                        size_t len = tsr_utf8_len(s->p, (size_t)(s->end - s->p));

                        if (!len)
                                return decline(s);
                        s->p += len;
                        break;
                }
                default:
                        return decline(s);
                }
        }
}

static bool digits(struct scan *s, size_t *count)
{
        const unsigned char *start = s->p;

        while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
                s->p++;
        *count = (size_t)(s->p - start);
        return *count > 0;
}

/* Checks a number as jansson reads it, short enough that jansson cannot refuse its value. */
static bool scan_number(struct scan *s)
{
        const unsigned char *start = s->p;
        size_t n;

        if (*s->p == '-')
                s->p++;
        if (s->p < s->end && *s->p == '0') {
                s->p++;
        } else if (!digits(s, &n)) {
                return decline(s);
        }
        if (s->p < s->end && *s->p == '.') {
                s->p++;
                if (!digits(s, &n))
                        return decline(s);
        }
        if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
                s->p++;
                if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
                        s->p++;
                if (!digits(s, &n) || n > EXPONENT_LEN_MAX)
                        return decline(s);
        }
        return s->p - start <= NUMBER_LEN_MAX ? true : decline(s);
}

static bool scan_literal(struct scan *s, const char *word)
{
        size_t len = strlen(word);

        if ((size_t)(s->end - s->p) < len || memcmp(s->p, word, len))
                return decline(s);
        s->p += len;
        return true;
}

/* Pushes key onto the open objects' stack unless the object (keys from base up) has it. */
static bool push_key(struct scan *s, size_t base, const struct key *key)
{
        for (size_t i = base; i < s->n_keys; i++)
                if (s->keys[i].len == key->len && !memcmp(s->keys[i].p, key->p, key->len))
                        return decline(s);
        if (s->n_keys == TSR_JSON_PICK_KEYS_MAX)
                return decline(s);
        s->keys[s->n_keys++] = *key;
        return true;
}

/* Pops an object's keys (base up), giving back the unescaped bytes they used. */
static void pop_keys(struct scan *s, size_t base)
{
        for (size_t i = s->n_keys; i-- > base;)
                if (s->decoded && s->keys[i].p >= s->decoded &&
                    s->keys[i].p < s->decoded + s->decoded_cap)
                        s->decoded_len = (size_t)(s->keys[i].p - s->decoded);
        s->n_keys = base;
}

static bool build_value(struct scan *s, json_t **out);

/*
 * Steps through an object or array at s->p, calling member() for each member's value (after its
 * key, in *key) or each element; the callback steps over the value. Checks the separators, the
 * keys and the depth.
 */
typedef bool (*member_fn)(struct scan *s, const struct key *key, void *ctx);

static bool walk(struct scan *s, member_fn member, void *ctx)
{
        bool object = *s->p == '{';
        char close = object ? '}' : ']';
        size_t base = s->n_keys;
        bool first = true;

        if (++s->depth > TSR_JSON_PICK_DEPTH_MAX)
                return decline(s);
        s->p++;
        for (;;) {
                struct key key = {NULL, 0};

                skip_ws(s);
                if (s->p >= s->end)
                        return decline(s);
                if (*s->p == close && first)
                        break;
                if (!first) {
                        if (*s->p == close)
                                break;
                        if (*s->p != ',')
                                return decline(s);
                        s->p++;
                        skip_ws(s);
                        if (s->p >= s->end)
                                return decline(s);
                }
                first = false;
                if (object) {
                        if (*s->p != '"' || !scan_string(s, &key) || !push_key(s, base, &key))
                                return decline(s);
                        skip_ws(s);
                        if (s->p >= s->end || *s->p != ':')
                                return decline(s);
                        s->p++;
                }
                skip_ws(s);
                if (s->p >= s->end || !member(s, object ? &key : NULL, ctx))
                        return decline(s);
        }
        s->p++;
        pop_keys(s, base);
        s->depth--;
        return true;
}

/* Gives back the unescaped bytes of a value string read last. */
static void release_decoded(struct scan *s, const struct key *text)
{
        if (s->decoded && text->p >= s->decoded && text->p < s->decoded + s->decoded_cap)
                s->decoded_len = (size_t)(text->p - s->decoded);
}

/* The number just checked (start to s->p) as jansson reads it: json_int_t, else a double. */
static json_t *number_value(const unsigned char *start, size_t len)
{
        char text[NUMBER_LEN_MAX + 1];

        memcpy(text, start, len);
        text[len] = '\0';
        if (strpbrk(text, ".eE"))
                return json_real(strtod(text, NULL));
        return json_integer(strtoll(text, NULL, 10));
}

/* walk's member callback: builds the value into the object or array ctx, or only checks it. */
static bool build_member(struct scan *s, const struct key *key, void *ctx)
{
        json_t *v = NULL;

        if (!build_value(s, ctx ? &v : NULL))
                return false;
        if (ctx && (key ? json_object_setn_new_nocheck(ctx, key->p, key->len, v)
                        : json_array_append_new(ctx, v)))
                return nomem(s);
        return true;
}

/*
 * Checks the value at s->p (whitespace before it already skipped) and steps past it; with out
 * set, builds all of it into *out as jansson would.
 */
static bool build_value(struct scan *s, json_t **out)
{
        const unsigned char *start = s->p;
        json_t *v = NULL;
        struct key text;

        switch (*s->p) {
        case '{':
        case '[':
                if (out && !(v = *s->p == '{' ? json_object() : json_array()))
                        return nomem(s);
                if (!walk(s, build_member, v)) {
                        json_decref(v);
                        return false;
                }
                break;
        case '"':
                if (!scan_string(s, out ? &text : NULL))
                        return false;
                if (out) {
                        v = json_stringn_nocheck(text.p, text.len);
                        release_decoded(s, &text);
                }
                break;
        case 't':
        case 'f':
        case 'n':
                if (!scan_literal(s, *s->p == 't' ? "true" : *s->p == 'f' ? "false" : "null"))
                        return false;
                v = !out            ? NULL
                    : *start == 't' ? json_true()
                    : *start == 'f' ? json_false()
                                    : json_null();
                break;
        default:
                if (!(*s->p == '-' || (*s->p >= '0' && *s->p <= '9')) || !scan_number(s))
                        return decline(s);
                if (out)
                        v = number_value(start, (size_t)(s->p - start));
        }
        if (!out)
                return true;
        *out = v;
        return v ? true : nomem(s);
}

struct picking {
        const struct active *set;
        size_t n;
        json_t *built;
};

static bool pick_value(struct scan *s, const struct active *set, size_t n, json_t **out);

/* Adds the entries of a list (a `below`) to set, each from the start of its path. */
static bool add_list(struct scan *s, const struct tsr_json_pick *list, struct active *set,
                     size_t *n)
{
        for (; list->path; list++) {
                if (*n == TSR_JSON_PICK_ACTIVE)
                        return decline(s);
                set[(*n)++] = (struct active){list, list->path};
        }
        return true;
}

/*
 * What a path continues with after a step that ended at next: nothing (the value whole, or its
 * `below`), ".name" (a member of an object), "[]" (every element). Adds to set; sets *whole when
 * the path takes the value whole.
 */
static bool follow(struct scan *s, const struct active *a, const char *next, struct active *set,
                   size_t *n, bool *whole)
{
        if (*next == '\0') {
                if (!a->entry->below) {
                        *whole = true;
                        return true;
                }
                return add_list(s, a->entry->below, set, n);
        }
        if (*n == TSR_JSON_PICK_ACTIVE)
                return decline(s);
        set[(*n)++] = (struct active){a->entry, *next == '.' ? next + 1 : next};
        return true;
}

static bool pick_member(struct scan *s, const struct key *key, void *ctx)
{
        struct picking *pk = ctx;
        struct active set[TSR_JSON_PICK_ACTIVE];
        size_t n = 0;
        bool whole = false, named = false;
        json_t *v = NULL;

        for (size_t i = 0; i < pk->n; i++) {
                const char *rest = pk->set[i].rest, *next;

                /*
                 * The path's next segment (up to '.', '[' or the end) is the key, byte for byte:
                 * a key holding '.' or '[' names no path ("b.d" is not b's member d). A key holds
                 * no NUL (json_pick declines one), so strncmp stops at the path's end.
                 */
                if (!key->len || rest[0] != key->p[0] || strncmp(rest, key->p, key->len))
                        continue;
                next = rest + key->len;
                if ((*next && *next != '.' && *next != '[') || memchr(key->p, '.', key->len) ||
                    memchr(key->p, '[', key->len))
                        continue;
                named = true;
                if (!follow(s, &pk->set[i], next, set, &n, &whole))
                        return false;
        }
        if (!named)
                return build_value(s, NULL);
        if (!(whole ? build_value(s, &v) : pick_value(s, set, n, &v)))
                return false;
        return json_object_setn_new_nocheck(pk->built, key->p, key->len, v) ? nomem(s) : true;
}

static bool pick_element(struct scan *s, const struct key *key, void *ctx)
{
        struct picking *pk = ctx;
        json_t *v = NULL;

        (void)key;
        if (!(pk->n ? pick_value(s, pk->set, pk->n, &v) : build_value(s, &v)))
                return false;
        return json_array_append_new(pk->built, v) ? nomem(s) : true;
}

/*
 * Picks the value at s->p for the paths in set: an object when some path names a member, an
 * array when some path steps into elements, else (or when the value is not of that kind) whole.
 */
static bool pick_value(struct scan *s, const struct active *set, size_t n, json_t **out)
{
        struct active members[TSR_JSON_PICK_ACTIVE], elements[TSR_JSON_PICK_ACTIVE];
        size_t n_members = 0, n_elements = 0;
        bool whole = false;
        struct picking pk;

        for (size_t i = 0; i < n; i++) {
                if (strncmp(set[i].rest, "[]", 2))
                        members[n_members++] = set[i];
                else if (!follow(s, &set[i], set[i].rest + 2, elements, &n_elements, &whole))
                        return false;
        }
        if (*s->p == '{' && n_members) {
                pk = (struct picking){members, n_members, json_object()};
        } else if (*s->p == '[' && (n_elements || whole)) {
                /* An element path that ends ("x[]") takes each element whole. */
                pk = (struct picking){elements, whole ? 0 : n_elements, json_array()};
        } else {
                return build_value(s, out);
        }
        if (!pk.built)
                return nomem(s);
        if (!walk(s, *s->p == '{' ? pick_member : pick_element, &pk)) {
                json_decref(pk.built);
                return false;
        }
        *out = pk.built;
        return true;
}

int tsr_json_pick_load(const char *text, size_t len, const struct tsr_json_pick *picks,
                       json_t **out)
{
        struct scan scan, *s = &scan; /* 4 KiB of keys: on the stack, no allocation */
        struct active set[TSR_JSON_PICK_ACTIVE];
        size_t n = 0;
        json_t *tree = NULL;
        int rc = 0;

        *out = NULL;
        memset(s, 0, offsetof(struct scan, keys));
        s->decoded = NULL;
        s->decoded_len = s->decoded_cap = 0;
        s->p = (const unsigned char *)text;
        s->end = s->p + len;
        skip_ws(s);
        /* jansson's root is an object or an array. */
        if (s->p < s->end && (*s->p == '{' || *s->p == '[') && add_list(s, picks, set, &n) &&
            pick_value(s, set, n, &tree)) {
                skip_ws(s);
                if (s->p == s->end)
                        *out = tree;
                else
                        json_decref(tree);
        }
        if (s->nomem)
                rc = TSR_ENOMEM;
        free(s->decoded);
        return rc;
}
