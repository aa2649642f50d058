/*
 * json_pick_model.h - the slow reference for codec/json_pick: the same pick lists applied to a
 * tree jansson already parsed (a deep copy pruned by the rules in json_pick.h), and the check
 * that a picked tree is exactly that. Shared by the json_pick and admission_review fuzz targets
 * and the unit test; header-only (static functions) so each links it without a library.
 */
#ifndef TSR_FUZZ_JSON_PICK_MODEL_H
#define TSR_FUZZ_JSON_PICK_MODEL_H

#include "codec/json_pick.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_SET_MAX 256

struct model_path {
        const struct tsr_json_pick *entry;
        const char *rest;
};

/* Puts a list's paths (a `below`) into set. */
static size_t model_add_list(const struct tsr_json_pick *list, struct model_path *set, size_t n)
{
        for (; list && list->path && n < MODEL_SET_MAX; list++)
                set[n++] = (struct model_path){list, list->path};
        return n;
}

/* v pruned for the paths in set, as a new tree. */
static json_t *model_project(json_t *v, const struct model_path *set, size_t n)
{
        struct model_path members[MODEL_SET_MAX], elements[MODEL_SET_MAX];
        size_t n_members = 0, n_elements = 0;
        bool whole_elements = false;

        for (size_t i = 0; i < n; i++) {
                const char *after;

                if (strncmp(set[i].rest, "[]", 2)) {
                        if (n_members < MODEL_SET_MAX)
                                members[n_members++] = set[i];
                        continue;
                }
                after = set[i].rest + 2;
                if (*after == '\0' && !set[i].entry->below)
                        whole_elements = true;
                else if (*after == '\0')
                        n_elements = model_add_list(set[i].entry->below, elements, n_elements);
                else if (n_elements < MODEL_SET_MAX)
                        elements[n_elements++] =
                            (struct model_path){set[i].entry, *after == '.' ? after + 1 : after};
        }
        if (json_is_object(v) && n_members) {
                json_t *out = json_object();
                const char *key;
                json_t *child;

                json_object_foreach(v, key, child)
                {
                        struct model_path sub[MODEL_SET_MAX];
                        size_t n_sub = 0, klen = strlen(key);
                        bool whole = false, named = false;

                        for (size_t i = 0; i < n_members; i++) {
                                const char *rest = members[i].rest;
                                size_t seg = strcspn(rest, ".[");

                                if (seg != klen || memcmp(rest, key, seg))
                                        continue;
                                named = true;
                                rest += seg;
                                if (*rest == '\0' && !members[i].entry->below)
                                        whole = true;
                                else if (*rest == '\0')
                                        n_sub = model_add_list(members[i].entry->below, sub, n_sub);
                                else if (n_sub < MODEL_SET_MAX)
                                        sub[n_sub++] = (struct model_path){
                                            members[i].entry, *rest == '.' ? rest + 1 : rest};
                        }
                        if (named)
                                json_object_set_new(out, key,
                                                    whole ? json_deep_copy(child)
                                                          : model_project(child, sub, n_sub));
                }
                return out;
        }
        if (json_is_array(v) && (n_elements || whole_elements)) {
                json_t *out = json_array();
                size_t i;
                json_t *e;

                json_array_foreach(v, i, e) json_array_append_new(
                    out,
                    whole_elements ? json_deep_copy(e) : model_project(e, elements, n_elements));
                return out;
        }
        return json_deep_copy(v);
}

/* full pruned for picks. */
static json_t *model_pick(json_t *full, const struct tsr_json_pick *picks)
{
        struct model_path set[MODEL_SET_MAX];

        return model_project(full, set, model_add_list(picks, set, 0));
}

/* True when a and b serialize alike, key order and number spelling included. */
static bool model_same_text(json_t *a, json_t *b)
{
        char *x = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
        char *y = json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY);
        bool same = x && y && !strcmp(x, y);

        free(x);
        free(y);
        return same;
}

#endif
