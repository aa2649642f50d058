/*
 * grant_journal.c - see grant_journal.h. The allocation travels as the annotation codec writes it,
 * so the journal and the annotation cannot disagree on what a grant is.
 */
#include "codec/grant_journal.h"

#include "base/diag.h"
#include "base/err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The allocation of g as a JSON object, or NULL (out of memory). */
static json_t *allocation_object(const struct tsr_grant *g)
{
        char *text = NULL;
        json_t *o;

        if (tsr_alloc_annotation_encode(&g->alloc, 1, &text))
                return NULL;
        o = json_loads(text, 0, NULL);
        free(text);
        return o;
}

int tsr_grant_journal_encode(const struct tsr_grant *g, size_t n, char **out)
{
        json_t *doc, *arr = json_array();
        int rc = 0;

        if (n > TSR_GRANT_JOURNAL_MAX) {
                json_decref(arr);
                return TSR_ETOOBIG;
        }
        for (size_t i = 0; arr && i < n && !rc; i++) {
                json_t *alloc = allocation_object(&g[i]);

                if (!alloc ||
                    json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o}", "podUID", g[i].uid,
                                                         "namespace", g[i].ns, "name", g[i].name,
                                                         "allocation", alloc)))
                        rc = TSR_ENOMEM;
        }
        doc = rc || !arr ? NULL
                         : json_pack("{s:s, s:i, s:O}", "kind", TSR_GRANT_JOURNAL_KIND, "version",
                                     1, "grants", arr);
        json_decref(arr);
        *out = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(doc);
        return *out ? 0 : TSR_ENOMEM;
}

/* Copies grant i's string field key into dst[0..len), or fails naming it. */
static int string_field(json_t *grant, size_t i, const char *key, char *dst, size_t len,
                        struct tsr_diag *diag)
{
        const char *s = json_string_value(json_object_get(grant, key));

        if (!s || !s[0])
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "grant journal: grant %zu: \"%s\" is missing, empty or not a "
                                    "string",
                                    i, key);
        if (strlen(s) >= len)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "grant journal: grant %zu: \"%s\" is longer than %zu bytes", i,
                                    key, len - 1);
        snprintf(dst, len, "%s", s);
        return 0;
}

/* Decodes grant i of the journal into g. */
static int decode_grant(json_t *grant, size_t i, struct tsr_grant *g, struct tsr_diag *diag)
{
        json_t *alloc = json_object_get(grant, "allocation");
        struct tsr_diag why;
        size_t na = 0;
        char *text;
        int rc;

        memset(g, 0, sizeof(*g));
        if (!json_is_object(grant))
                return tsr_diag_set(diag, TSR_EPARSE, "grant journal: grant %zu is not an object",
                                    i);
        if ((rc = string_field(grant, i, "podUID", g->uid, sizeof(g->uid), diag)) ||
            (rc = string_field(grant, i, "namespace", g->ns, sizeof(g->ns), diag)) ||
            (rc = string_field(grant, i, "name", g->name, sizeof(g->name), diag)))
                return rc;
        if (!json_is_object(alloc))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "grant journal: grant %zu: \"allocation\" is missing or not an "
                                    "object",
                                    i);
        if (json_object_size(alloc) != 1)
                return tsr_diag_set(
                    diag, TSR_EPARSE,
                    "grant journal: grant %zu: \"allocation\" holds %zu containers, "
                    "not one",
                    i, json_object_size(alloc));
        text = json_dumps(alloc, JSON_COMPACT);
        if (!text)
                return tsr_diag_set(diag, TSR_ENOMEM, "grant journal: out of memory");
        tsr_diag_clear(&why);
        rc = tsr_alloc_annotation_decode(text, &g->alloc, 1, &na, &why);
        free(text);
        if (rc == TSR_ENOMEM)
                return tsr_diag_set(diag, rc, "grant journal: out of memory");
        if (rc || na != 1)
                return tsr_diag_set(diag, TSR_EPARSE, "grant journal: grant %zu: %s", i,
                                    rc ? why.msg : "\"allocation\" names no container");
        return 0;
}

int tsr_grant_journal_decode(const char *text, size_t len, struct tsr_grant **out, size_t *n,
                             struct tsr_diag *diag)
{
        json_error_t jerr;
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr), *grants, *grant;
        const char *kind;
        struct tsr_grant *g = NULL;
        size_t i, count;
        int rc = 0;

        if (!doc || !json_is_object(doc)) {
                rc = doc ? tsr_diag_set(diag, TSR_EPARSE, "grant journal: not a JSON object")
                         : tsr_diag_set(diag, TSR_EPARSE, "grant journal: line %d column %d: %s",
                                        jerr.line, jerr.column, jerr.text);
                goto out;
        }
        kind = json_string_value(json_object_get(doc, "kind"));
        grants = json_object_get(doc, "grants");
        if (!kind || strcmp(kind, TSR_GRANT_JOURNAL_KIND)) {
                rc = tsr_diag_set(diag, TSR_EPARSE, "grant journal: \"kind\" is not \"%s\"",
                                  TSR_GRANT_JOURNAL_KIND);
                goto out;
        }
        if (!json_is_integer(json_object_get(doc, "version")) ||
            json_integer_value(json_object_get(doc, "version")) != 1) {
                rc = tsr_diag_set(diag, TSR_EPARSE,
                                  "grant journal: \"version\" is not 1 (a newer device manager's "
                                  "journal?)");
                goto out;
        }
        if (!json_is_array(grants) || json_array_size(grants) > TSR_GRANT_JOURNAL_MAX) {
                rc = tsr_diag_set(diag, TSR_EPARSE,
                                  "grant journal: \"grants\" is not an array of at most %d",
                                  TSR_GRANT_JOURNAL_MAX);
                goto out;
        }
        count = json_array_size(grants);
        if (count && !(g = malloc(count * sizeof(*g)))) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "grant journal: out of memory");
                goto out;
        }
        json_array_foreach(grants, i, grant)
        {
                if ((rc = decode_grant(grant, i, &g[i], diag)))
                        goto out;
                for (size_t j = 0; j < i; j++)
                        if (!strcmp(g[j].uid, g[i].uid) &&
                            !strcmp(g[j].alloc.container, g[i].alloc.container)) {
                                rc = tsr_diag_set(diag, TSR_EPARSE,
                                                  "grant journal: grant %zu repeats grant %zu "
                                                  "(Pod %s, container %s)",
                                                  i, j, g[i].uid, g[i].alloc.container);
                                goto out;
                        }
        }
        *out = g;
        *n = count;
        g = NULL;
out:
        free(g);
        json_decref(doc);
        return rc;
}
