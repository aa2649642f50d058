/*
 * fuzz_json_patch.c - bytes as a JSON document and an RFC 6902 patch for it: either the document,
 * a NUL byte and the patch, or (with no NUL) one JSON array [document, patch]. Inputs that are not
 * JSON are skipped. Applying must never crash; a refused patch must leave the document exactly
 * as it was (same pointer, same serialization) and say why in diag; an accepted one must leave
 * the patch itself untouched, and the diff from the original to the result, applied to the
 * original (also after a trip through text), must give the result, while the diff of the result
 * with itself is empty.
 */
#include "base/diag.h"
#include "codec/json_patch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *load(const uint8_t *data, size_t size)
{
        json_error_t err;

        return json_loadb((const char *)data, size, JSON_DECODE_ANY, &err);
}

static char *dump(json_t *v)
{
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

        if (!s)
                abort();
        return s;
}

/* diff(orig, result) applied to orig gives result. */
static void check_round_trip(json_t *orig, json_t *result)
{
        struct tsr_diag diag;
        json_t *ops, *copy, *same, *reloaded;
        json_error_t err;
        char *text;

        if (tsr_json_patch_diff(orig, result, &ops) || !json_is_array(ops))
                abort();
        copy = json_deep_copy(orig);
        tsr_diag_clear(&diag);
        if (!copy || tsr_json_patch_apply(&copy, ops, &diag) || !json_equal(copy, result))
                abort();
        json_decref(copy);
        text = dump(ops);
        reloaded = json_loads(text, 0, &err);
        copy = json_deep_copy(orig);
        if (!reloaded || !copy || tsr_json_patch_apply(&copy, reloaded, &diag) ||
            !json_equal(copy, result))
                abort();
        if (tsr_json_patch_diff(result, result, &same) || json_array_size(same) != 0)
                abort();
        free(text);
        json_decref(reloaded);
        json_decref(copy);
        json_decref(same);
        json_decref(ops);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const uint8_t *nul;
        json_t *doc = NULL, *patch = NULL, *orig, *patch0, *before;
        struct tsr_diag diag;
        char *text, *after;
        int rc;

        if (size > 65536)
                return 0;
        nul = memchr(data, '\0', size);
        if (nul) {
                doc = load(data, (size_t)(nul - data));
                patch = load(nul + 1, size - (size_t)(nul - data) - 1);
        } else {
                json_t *pair = load(data, size);

                if (json_is_array(pair) && json_array_size(pair) == 2) {
                        doc = json_incref(json_array_get(pair, 0));
                        patch = json_incref(json_array_get(pair, 1));
                }
                json_decref(pair);
        }
        if (!doc || !patch) {
                json_decref(doc);
                json_decref(patch);
                return 0;
        }
        orig = json_deep_copy(doc);
        patch0 = json_deep_copy(patch);
        if (!orig || !patch0)
                abort();
        text = dump(doc);
        before = doc;
        tsr_diag_clear(&diag);
        rc = tsr_json_patch_apply(&doc, patch, &diag);
        if (!json_equal(patch, patch0))
                abort();
        if (rc) {
                if (doc != before || !json_equal(doc, orig) || diag.code != rc ||
                    diag.msg[0] == '\0')
                        abort();
                after = dump(doc);
                if (strcmp(text, after))
                        abort();
                free(after);
        } else {
                check_round_trip(orig, doc);
        }
        free(text);
        json_decref(doc);
        json_decref(patch);
        json_decref(orig);
        json_decref(patch0);
        return 0;
}
