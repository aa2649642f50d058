/*
 * json_subset.c - the in-place scanner of json_subset.h. Every entry point returns false once
 * s->outside is set; nothing here reads past s->end.
 */
#include "codec/json_subset.h"

#include <string.h>

static bool leave(struct tsr_jsub *s)
{
        s->outside = true;
        return false;
}

static void ws(struct tsr_jsub *s)
{
        while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
                s->p++;
}

/* Consumes c after whitespace, or leaves the subset. */
static bool expect(struct tsr_jsub *s, char c)
{
        ws(s);
        if (s->p >= s->end || *s->p != c)
                return leave(s);
        s->p++;
        return true;
}

static bool open_level(struct tsr_jsub *s, char c)
{
        if (s->outside || !expect(s, c))
                return false;
        if (s->depth >= TSR_JSUB_DEPTH_MAX)
                return leave(s);
        s->n_keys[s->depth] = 0;
        s->first[s->depth] = true;
        s->depth++;
        return true;
}

void tsr_jsub_init(struct tsr_jsub *s, const char *text, size_t len)
{
        s->p = text;
        s->end = text + len;
        s->outside = false;
        s->depth = 0;
}

bool tsr_jsub_object(struct tsr_jsub *s)
{
        return open_level(s, '{');
}

bool tsr_jsub_array(struct tsr_jsub *s)
{
        return open_level(s, '[');
}

bool tsr_jsub_string(struct tsr_jsub *s, struct tsr_jsub_str *out)
{
        const char *start;

        if (s->outside || !expect(s, '"'))
                return false;
        start = s->p;
        for (; s->p < s->end; s->p++) {
                unsigned char c = (unsigned char)*s->p;

                if (c == '"') {
                        out->p = start;
                        out->len = (size_t)(s->p - start);
                        s->p++;
                        return true;
                }
                if (c == '\\' || c < 0x20 || c >= 0x80)
                        break;
        }
        return leave(s);
}

bool tsr_jsub_int(struct tsr_jsub *s, int64_t *out)
{
        int64_t v = 0;
        unsigned digits = 0;

        if (s->outside)
                return false;
        ws(s);
        if (s->p < s->end && *s->p == '0' && s->p + 1 < s->end && s->p[1] >= '0' && s->p[1] <= '9')
                return leave(s); /* a leading zero is not JSON */
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
                if (++digits > 18)
                        return leave(s);
                v = v * 10 + (*s->p++ - '0');
        }
        if (!digits ||
            (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E' || *s->p == '-')))
                return leave(s);
        *out = v;
        return true;
}

/*
 * Steps into the next member or element of the innermost open level, or closes it at close:
 * true when one follows (to read), false at the end or outside the subset.
 */
static bool next_item(struct tsr_jsub *s, char close)
{
        if (s->outside || s->depth == 0)
                return leave(s);
        ws(s);
        if (s->p < s->end && *s->p == close) {
                s->p++;
                s->depth--;
                return false;
        }
        return s->first[s->depth - 1] || expect(s, ',');
}

bool tsr_jsub_key(struct tsr_jsub *s, struct tsr_jsub_str *key)
{
        unsigned d;

        if (!next_item(s, '}') || !tsr_jsub_string(s, key) || !expect(s, ':'))
                return false;
        d = s->depth - 1;
        for (unsigned k = 0; k < s->n_keys[d]; k++)
                if (s->keys[d][k].len == key->len && !memcmp(s->keys[d][k].p, key->p, key->len))
                        return leave(s); /* jansson's JSON_REJECT_DUPLICATES refuses it */
        if (s->n_keys[d] >= TSR_JSUB_KEYS_MAX)
                return leave(s);
        s->keys[d][s->n_keys[d]++] = *key;
        s->first[d] = false;
        return true;
}

bool tsr_jsub_element(struct tsr_jsub *s)
{
        if (!next_item(s, ']'))
                return false;
        s->first[s->depth - 1] = false;
        return true;
}

static bool literal(struct tsr_jsub *s, const char *word)
{
        size_t n = strlen(word);

        if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n))
                return leave(s);
        s->p += n;
        return true;
}

bool tsr_jsub_skip(struct tsr_jsub *s)
{
        struct tsr_jsub_str str;
        int64_t v;

        if (s->outside)
                return false;
        ws(s);
        if (s->p >= s->end)
                return leave(s);
        switch (*s->p) {
        case '{':
                tsr_jsub_object(s);
                while (tsr_jsub_key(s, &str))
                        tsr_jsub_skip(s);
                return !s->outside;
        case '[':
                tsr_jsub_array(s);
                while (tsr_jsub_element(s))
                        tsr_jsub_skip(s);
                return !s->outside;
        case '"':
                return tsr_jsub_string(s, &str);
        case 't':
                return literal(s, "true");
        case 'f':
                return literal(s, "false");
        case 'n':
                return literal(s, "null");
        default:
                return tsr_jsub_int(s, &v);
        }
}

char tsr_jsub_peek(struct tsr_jsub *s)
{
        if (s->outside)
                return 0;
        ws(s);
        return s->p < s->end ? *s->p : 0;
}

bool tsr_jsub_end(struct tsr_jsub *s)
{
        if (s->outside)
                return false;
        ws(s);
        return s->p == s->end && s->depth == 0;
}

bool tsr_jsub_is(const struct tsr_jsub_str *str, const char *lit)
{
        size_t n = strlen(lit);

        return str->len == n && !memcmp(str->p, lit, n);
}
