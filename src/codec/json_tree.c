/*
 * json_tree.c - see json_tree.h. Recursion depth is the tree's: decoded documents come from
 * jansson or json_pick, both of which refuse nesting past their limits.
 */
#include "codec/json_tree.h"

#include "base/buf.h"
#include "base/err.h"
#include "base/utf8.h"
#include "codec/json_arena.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/*
 * A new object or array with v's keys or elements, each child given as each(child) (a new
 * reference); NULL on ENOMEM. v must be an object or an array.
 */
static json_t *rebuild(json_t *v, json_t *(*each)(json_t *))
{
        json_t *out = json_is_object(v) ? json_object() : json_array(), *child;
        const char *key;
        size_t key_len, i;

        if (json_is_object(v)) {
                json_object_keylen_foreach(v, key, key_len, child)
                {
                        if (!out || json_object_setn_new_nocheck(out, key, key_len, each(child))) {
                                json_decref(out);
                                return NULL;
                        }
                }
                return out;
        }
        json_array_foreach(v, i, child)
        {
                if (!out || json_array_append_new(out, each(child))) {
                        json_decref(out);
                        return NULL;
                }
        }
        return out;
}

json_t *tsr_json_copy(json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT:
        case JSON_ARRAY:
                return rebuild(v, tsr_json_copy);
        case JSON_STRING:
                return json_stringn_nocheck(json_string_value(v), json_string_length(v));
        case JSON_INTEGER:
                return json_integer(json_integer_value(v));
        case JSON_REAL:
                return json_real(json_real_value(v));
        case JSON_TRUE:
        case JSON_FALSE:
        case JSON_NULL:
                return v; /* jansson's singletons: no count to take */
        }
        return NULL;
}

int tsr_json_write_text(struct tsr_buf *b, const char *s, size_t n)
{
        static const char named[] = "btn fr"; /* \b \t \n, (\v has none), \f \r */
        int rc = tsr_buf_addch(b, '"');
        size_t plain = 0; /* bytes written as they are, not yet appended */

        for (size_t i = 0; !rc && i < n;) {
                unsigned char c = (unsigned char)s[i];
                size_t len = 1;

                if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
                        plain++;
                        i++;
                        continue;
                }
                if (c >= 0x80 && (len = tsr_utf8_len((const unsigned char *)s + i, n - i))) {
                        plain += len;
                        i += len;
                        continue;
                }
                rc = tsr_buf_add(b, s + i - plain, plain);
                plain = 0;
                if (rc)
                        break;
                if (c == '"' || c == '\\')
                        rc = tsr_buf_addch(b, '\\') || tsr_buf_addch(b, (char)c);
                else if (c >= '\b' && c <= '\r' && c != '\v')
                        rc = tsr_buf_addch(b, '\\') || tsr_buf_addch(b, named[c - '\b']);
                else if (c < 0x20)
                        rc = tsr_buf_addf(b, "\\u%04X", c);
                else
                        rc = tsr_buf_adds(b, "\xef\xbf\xbd"); /* starts no UTF-8 sequence */
                i++;
        }
        if (!rc)
                rc = tsr_buf_add(b, s + n - plain, plain);
        return rc ? rc : tsr_buf_addch(b, '"');
}

int tsr_json_write(struct tsr_buf *b, json_t *v)
{
        int rc = 0;

        switch (json_typeof(v)) {
        case JSON_OBJECT: {
                const char *key;
                size_t key_len;
                json_t *child;
                bool first = true;

                rc = tsr_buf_addch(b, '{');
                json_object_keylen_foreach(v, key, key_len, child)
                {
                        if (!rc && !first)
                                rc = tsr_buf_addch(b, ',');
                        first = false;
                        if (!rc)
                                rc = tsr_json_write_text(b, key, key_len);
                        if (!rc)
                                rc = tsr_buf_addch(b, ':');
                        if (!rc)
                                rc = tsr_json_write(b, child);
                }
                return rc ? rc : tsr_buf_addch(b, '}');
        }
        case JSON_ARRAY: {
                size_t i;
                json_t *child;

                rc = tsr_buf_addch(b, '[');
                json_array_foreach(v, i, child)
                {
                        if (!rc && i)
                                rc = tsr_buf_addch(b, ',');
                        if (!rc)
                                rc = tsr_json_write(b, child);
                }
                return rc ? rc : tsr_buf_addch(b, ']');
        }
        case JSON_STRING:
                return tsr_json_write_text(b, json_string_value(v), json_string_length(v));
        case JSON_INTEGER:
                return tsr_buf_addf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        case JSON_REAL: {
                /* jansson's own formatting (precision 17, ".0" kept, exponent trimmed). */
                char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

                rc = text ? tsr_buf_adds(b, text) : TSR_ENOMEM;
                tsr_json_free(text);
                return rc;
        }
        case JSON_TRUE:
                return tsr_buf_adds(b, "true");
        case JSON_FALSE:
                return tsr_buf_adds(b, "false");
        case JSON_NULL:
                return tsr_buf_adds(b, "null");
        }
        return TSR_EINVAL;
}

/* json_incref as a function rebuild can call. */
static json_t *reference(json_t *v)
{
        return json_incref(v);
}

json_t *tsr_json_share(json_t *v)
{
        return json_is_object(v) || json_is_array(v) ? rebuild(v, reference) : json_incref(v);
}

/* True when v is an object or array someone else also holds. */
static bool shared_container(const json_t *v)
{
        return (json_is_object(v) || json_is_array(v)) && v->refcount > 1;
}

json_t *tsr_json_own_member(json_t *parent, const char *key)
{
        json_t *child = json_object_get(parent, key), *own;

        if (!shared_container(child))
                return child;
        own = tsr_json_share(child);
        return own && !json_object_set_new(parent, key, own) ? own : NULL;
}

json_t *tsr_json_own_element(json_t *parent, size_t index)
{
        json_t *child = json_array_get(parent, index), *own;

        if (!shared_container(child))
                return child;
        own = tsr_json_share(child);
        return own && !json_array_set_new(parent, index, own) ? own : NULL;
}
