/*
 * json_patch.c - diff by recursive descent over sorted object keys, skipping members both sides
 * hold by the same pointer, into a jansson array or straight into text; apply on a deep copy
 * that replaces the document only when every operation succeeded.
 */
#include "codec/json_patch.h"

#include "codec/json_tree.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- pointers ----------------------------------------------------------------------------- */

static int pointer_push(struct tsr_buf *path, const char *token)
{
        int rc = tsr_buf_addch(path, '/');

        /* Runs without '~' or '/' go in whole; each of those two as its escape. */
        while (!rc && *token) {
                size_t run = strcspn(token, "~/");

                rc = tsr_buf_add(path, token, run);
                token += run;
                if (!rc && *token)
                        rc = tsr_buf_adds(path, *token++ == '~' ? "~0" : "~1");
        }
        return rc;
}

/* Decodes one reference token of len bytes into out (at least len + 1). 0 or TSR_EPARSE. */
static int token_decode(const char *s, size_t len, char *out)
{
        size_t o = 0;

        for (size_t i = 0; i < len; i++) {
                if (s[i] != '~') {
                        out[o++] = s[i];
                        continue;
                }
                if (i + 1 >= len || (s[i + 1] != '0' && s[i + 1] != '1'))
                        return TSR_EPARSE;
                out[o++] = s[i + 1] == '0' ? '~' : '/';
                i++;
        }
        out[o] = '\0';
        return 0;
}

/* ---- diff --------------------------------------------------------------------------------- */

/*
 * Where the diff's operations go: appended to a jansson array, or written as JSON text (what
 * tsr_json_write would write of that array, without building it).
 */
struct patch_out {
        json_t *ops;          /* the array, or NULL to write text */
        struct tsr_buf *text; /* where text goes when ops is NULL */
        size_t n;             /* operations so far */
};

static int add_op_value(json_t *ops, const char *op, const char *path, size_t path_len,
                        json_t *value)
{
        json_t *o = json_object();

        if (!o || json_object_set_new_nocheck(o, "op", json_string_nocheck(op)) ||
            json_object_set_new_nocheck(o, "path", json_stringn_nocheck(path, path_len))) {
                json_decref(o);
                return TSR_ENOMEM;
        }
        if (value && json_object_set_new_nocheck(o, "value", tsr_json_copy(value))) {
                json_decref(o);
                return TSR_ENOMEM;
        }
        return json_array_append_new(ops, o) ? TSR_ENOMEM : 0;
}

/* One operation on the pointer path holds (its bytes are UTF-8: keys of jansson values). */
static int add_op(struct patch_out *out, const char *op, const struct tsr_buf *path, json_t *value)
{
        struct tsr_buf *t = out->text;
        int rc;

        out->n++;
        if (out->ops)
                return add_op_value(out->ops, op, path->len ? path->ptr : "", path->len, value);
        rc = tsr_buf_adds(t, out->n > 1 ? ",{\"op\":\"" : "{\"op\":\"") || tsr_buf_adds(t, op) ||
             tsr_buf_adds(t, "\",\"path\":") ||
             tsr_json_write_text(t, path->len ? path->ptr : "", path->len);
        if (!rc && value)
                rc = tsr_buf_adds(t, ",\"value\":") || tsr_json_write(t, value);
        return rc ? rc : tsr_buf_addch(t, '}');
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Keys of one object, gathered to be visited in sorted order: most objects a fold diffs share
 * all but one or two members with their copy (json_tree.h), so only the members that differ are
 * gathered and sorted, in a small array on the stack unless there are many.
 */
struct key_list {
        const char **keys;
        size_t n, cap;
        const char *small[8];
};

static void key_list_init(struct key_list *l)
{
        l->keys = l->small;
        l->n = 0;
        l->cap = sizeof(l->small) / sizeof(l->small[0]);
}

static int key_list_add(struct key_list *l, const char *key)
{
        if (l->n == l->cap) {
                const char **grown = malloc(2 * l->cap * sizeof(*grown));

                if (!grown)
                        return TSR_ENOMEM;
                memcpy(grown, l->keys, l->n * sizeof(*grown));
                if (l->keys != l->small)
                        free(l->keys);
                l->keys = grown;
                l->cap *= 2;
        }
        l->keys[l->n++] = key;
        return 0;
}

static void key_list_sort(struct key_list *l)
{
        if (l->n > 1)
                qsort(l->keys, l->n, sizeof(*l->keys), cmp_str);
}

static void key_list_release(struct key_list *l)
{
        if (l->keys != l->small)
                free(l->keys);
}

static int diff(json_t *from, json_t *to, struct tsr_buf *path, struct patch_out *out);

/* Pops path back to mark. */
static void pointer_pop(struct tsr_buf *path, size_t mark)
{
        path->len = mark;
        path->ptr[mark] = '\0';
}

/*
 * Two arrays: the elements both have are diffed index by index; then the extra elements of `to`
 * are added in order, or the extra elements of `from` removed from the last one down, so every
 * index is valid when its operation is applied.
 */
static int diff_arrays(json_t *from, json_t *to, struct tsr_buf *path, struct patch_out *out)
{
        size_t n = json_array_size(from), m = json_array_size(to), mark = path->len;
        int rc = 0;

        for (size_t i = 0; i < m && !rc; i++) {
                rc = tsr_buf_addf(path, "/%zu", i);
                if (!rc)
                        rc = i < n ? diff(json_array_get(from, i), json_array_get(to, i), path, out)
                                   : add_op(out, "add", path, json_array_get(to, i));
                pointer_pop(path, mark);
        }
        for (size_t i = n; i > m && !rc; i--) {
                rc = tsr_buf_addf(path, "/%zu", i - 1);
                if (!rc)
                        rc = add_op(out, "remove", path, NULL);
                pointer_pop(path, mark);
        }
        return rc;
}

/*
 * Two objects: the keys only `from` has are removed, then, in sorted order, the keys only `to`
 * has are added and those whose values differ recursed into. A member both hold by the same
 * pointer (shared copy on write) is equal without a look inside.
 */
static int diff_objects(json_t *from, json_t *to, struct tsr_buf *path, struct patch_out *out)
{
        struct key_list gone, changed;
        const char *key;
        json_t *v;
        size_t mark = path->len;
        int rc = 0;

        key_list_init(&gone);
        key_list_init(&changed);
        json_object_foreach(from, key, v)
        {
                if (!rc && !json_object_get(to, key))
                        rc = key_list_add(&gone, key);
        }
        json_object_foreach(to, key, v)
        {
                if (!rc && json_object_get(from, key) != v)
                        rc = key_list_add(&changed, key);
        }
        key_list_sort(&gone);
        key_list_sort(&changed);
        for (size_t i = 0; i < gone.n && !rc; i++) {
                rc = pointer_push(path, gone.keys[i]);
                if (!rc)
                        rc = add_op(out, "remove", path, NULL);
                pointer_pop(path, mark);
        }
        for (size_t i = 0; i < changed.n && !rc; i++) {
                json_t *a = json_object_get(from, changed.keys[i]);
                json_t *b = json_object_get(to, changed.keys[i]);

                rc = pointer_push(path, changed.keys[i]);
                if (!rc)
                        rc = a ? diff(a, b, path, out) : add_op(out, "add", path, b);
                pointer_pop(path, mark);
        }
        key_list_release(&gone);
        key_list_release(&changed);
        return rc;
}

static int diff(json_t *from, json_t *to, struct tsr_buf *path, struct patch_out *out)
{
        /* Containers are compared member by member below, so only a scalar is compared here. */
        if (from == to)
                return 0;
        if (json_is_array(from) && json_is_array(to))
                return diff_arrays(from, to, path, out);
        if (json_is_object(from) && json_is_object(to))
                return diff_objects(from, to, path, out);
        return json_equal(from, to) ? 0 : add_op(out, "replace", path, to);
}

int tsr_json_patch_diff(json_t *from, json_t *to, json_t **ops)
{
        struct tsr_buf path = TSR_BUF_INIT;
        struct patch_out out = {json_array(), NULL, 0};
        int rc;

        if (!out.ops)
                return TSR_ENOMEM;
        rc = diff(from, to, &path, &out);
        tsr_buf_release(&path);
        if (rc) {
                json_decref(out.ops);
                return rc;
        }
        *ops = out.ops;
        return 0;
}

int tsr_json_patch_diff_text(json_t *from, json_t *to, struct tsr_buf *text, size_t *n_ops)
{
        struct tsr_buf path = TSR_BUF_INIT;
        struct patch_out out = {NULL, text, 0};
        size_t mark = text->len;
        int rc = tsr_buf_addch(text, '[');

        if (!rc)
                rc = diff(from, to, &path, &out);
        tsr_buf_release(&path);
        if (!rc)
                rc = tsr_buf_addch(text, ']');
        if (rc) {
                text->len = mark;
                if (text->ptr)
                        text->ptr[mark] = '\0';
                return rc;
        }
        *n_ops = out.n;
        return 0;
}

/* ---- apply -------------------------------------------------------------------------------- */

/* Where a pointer leads: the container holding the last token, and that token. */
struct target {
        json_t *parent; /* NULL: the pointer is "" (the whole document) */
        char *token;    /* decoded last token (malloc'd) */
};

static int array_index(const char *token, size_t size, bool allow_end, size_t *out)
{
        char *end;
        unsigned long long v;

        if (allow_end && !strcmp(token, "-")) {
                *out = size;
                return 0;
        }
        if (!*token || (token[0] == '0' && token[1]) || token[0] < '0' || token[0] > '9')
                return TSR_EPARSE;
        v = strtoull(token, &end, 10);
        if (*end)
                return TSR_EPARSE; /* "1x" is no index either */
        if (v > size || (!allow_end && v == size))
                return TSR_ENOTFOUND;
        *out = (size_t)v;
        return 0;
}

/* Resolves every token but the last of pointer p in doc. */
static int resolve(json_t *doc, const char *p, struct target *t)
{
        json_t *cur = doc;
        const char *s = p;

        t->parent = NULL;
        t->token = NULL;
        if (!*p)
                return 0;
        if (*p != '/')
                return TSR_EPARSE;
        for (;;) {
                const char *start = s + 1, *slash = strchr(start, '/');
                size_t len = slash ? (size_t)(slash - start) : strlen(start);
                char *tok = malloc(len + 1);
                size_t idx;

                if (!tok)
                        return TSR_ENOMEM;
                if (token_decode(start, len, tok)) {
                        free(tok);
                        return TSR_EPARSE;
                }
                if (!slash) {
                        t->parent = cur;
                        t->token = tok;
                        return 0;
                }
                if (json_is_object(cur)) {
                        cur = json_object_get(cur, tok);
                } else if (json_is_array(cur) &&
                           array_index(tok, json_array_size(cur), false, &idx) == 0) {
                        cur = json_array_get(cur, idx);
                } else {
                        cur = NULL;
                }
                free(tok);
                if (!cur)
                        return TSR_ENOTFOUND;
                s = slash;
        }
}

static json_t *get_at(const struct target *t, json_t *doc)
{
        size_t idx;

        if (!t->parent)
                return doc;
        if (json_is_object(t->parent))
                return json_object_get(t->parent, t->token);
        if (json_is_array(t->parent) &&
            array_index(t->token, json_array_size(t->parent), false, &idx) == 0)
                return json_array_get(t->parent, idx);
        return NULL;
}

/* An integer and a real are the same number when the real is exactly that integer. */
static bool int_equals_real(json_int_t i, double r)
{
        if (!(r >= -9223372036854775808.0 && r < 9223372036854775808.0) ||
            r != (double)(long long)r)
                return false;
        return (json_int_t)r == i;
}

/*
 * RFC 6902 §4.6 equality for test: as json_equal, except that numbers are equal when their values
 * are (1 and 1.0), at any depth.
 */
static bool values_equal(json_t *a, json_t *b)
{
        const char *key;
        json_t *v;
        size_t i;

        if (json_is_integer(a) && json_is_real(b))
                return int_equals_real(json_integer_value(a), json_real_value(b));
        if (json_is_real(a) && json_is_integer(b))
                return int_equals_real(json_integer_value(b), json_real_value(a));
        if (json_is_object(a) && json_is_object(b)) {
                if (json_object_size(a) != json_object_size(b))
                        return false;
                json_object_foreach(a, key, v)
                {
                        json_t *w = json_object_get(b, key);

                        if (!w || !values_equal(v, w))
                                return false;
                }
                return true;
        }
        if (json_is_array(a) && json_is_array(b)) {
                if (json_array_size(a) != json_array_size(b))
                        return false;
                json_array_foreach(a, i, v)
                {
                        if (!values_equal(v, json_array_get(b, i)))
                                return false;
                }
                return true;
        }
        return json_equal(a, b);
}

static int apply_one(json_t **doc, json_t *op, struct tsr_diag *diag, size_t i)
{
        const char *name = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        json_t *value = json_object_get(op, "value");
        struct target t;
        size_t idx;
        int rc;

        if (!json_is_object(op) || !name || !path)
                return tsr_diag_set(diag, TSR_EPARSE, "patch operation %zu needs op and path", i);
        if (strcmp(name, "add") && strcmp(name, "remove") && strcmp(name, "replace") &&
            strcmp(name, "test"))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "patch operation %zu: op \"%s\" is not "
                                    "supported (add, remove, replace, test)",
                                    i, name);
        if (strcmp(name, "remove") && !value)
                return tsr_diag_set(diag, TSR_EPARSE, "patch operation %zu (%s) needs a value", i,
                                    name);
        rc = resolve(*doc, path, &t);
        if (rc)
                return tsr_diag_set(diag, rc, "patch operation %zu: path \"%s\" %s", i, path,
                                    rc == TSR_EPARSE   ? "is not a JSON pointer"
                                    : rc == TSR_ENOMEM ? "could not be decoded (out of memory)"
                                                       : "does not exist");
        if (!strcmp(name, "test")) {
                json_t *cur = get_at(&t, *doc);

                rc = cur && values_equal(cur, value) ? 0 : TSR_ESTALE;
                if (rc)
                        tsr_diag_set(diag, rc, "patch operation %zu: test of \"%s\" failed", i,
                                     path);
        } else if (!t.parent) {
                if (!strcmp(name, "remove")) {
                        rc = tsr_diag_set(diag, TSR_EPARSE,
                                          "patch operation %zu: cannot remove the document", i);
                } else {
                        json_decref(*doc);
                        *doc = tsr_json_copy(value);
                        rc = *doc ? 0 : TSR_ENOMEM;
                }
        } else if (json_is_object(t.parent)) {
                bool exists = json_object_get(t.parent, t.token) != NULL;

                if (strcmp(name, "add") && !exists)
                        rc = tsr_diag_set(diag, TSR_ENOTFOUND,
                                          "patch operation %zu: path \"%s\" does not exist", i,
                                          path);
                else if (!strcmp(name, "remove"))
                        rc = json_object_del(t.parent, t.token) ? TSR_ENOMEM : 0;
                else
                        rc = json_object_set_new(t.parent, t.token, tsr_json_copy(value))
                                 ? TSR_ENOMEM
                                 : 0;
        } else if (json_is_array(t.parent)) {
                size_t size = json_array_size(t.parent);

                rc = array_index(t.token, size, !strcmp(name, "add"), &idx);
                if (rc)
                        tsr_diag_set(diag, rc, "patch operation %zu: bad array index in \"%s\"", i,
                                     path);
                else if (!strcmp(name, "remove"))
                        rc = json_array_remove(t.parent, idx) ? TSR_ENOMEM : 0;
                else if (!strcmp(name, "replace"))
                        rc = json_array_set_new(t.parent, idx, tsr_json_copy(value)) ? TSR_ENOMEM
                                                                                     : 0;
                else
                        rc = json_array_insert_new(t.parent, idx, tsr_json_copy(value)) ? TSR_ENOMEM
                                                                                        : 0;
        } else {
                rc = tsr_diag_set(diag, TSR_ENOTFOUND,
                                  "patch operation %zu: \"%s\" is inside a scalar", i, path);
        }
        free(t.token);
        if (rc == TSR_ENOMEM)
                tsr_diag_set(diag, rc, "patch operation %zu: out of memory", i);
        return rc;
}

int tsr_json_patch_apply(json_t **doc, json_t *ops, struct tsr_diag *diag)
{
        json_t *work, *op;
        size_t i;
        int rc = 0;

        if (!json_is_array(ops))
                return tsr_diag_set(diag, TSR_EPARSE, "a JSON Patch is an array of operations");
        work = tsr_json_copy(*doc);
        if (!work)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        json_array_foreach(ops, i, op)
        {
                rc = apply_one(&work, op, diag, i);
                if (rc)
                        break;
        }
        if (rc) {
                json_decref(work);
                return rc;
        }
        json_decref(*doc);
        *doc = work;
        return 0;
}
