/*
 * fuzz_json_pick.c - bytes as a JSON text for codec/json_pick, the first byte choosing one of the
 * pick lists below. Properties: never a crash; when the picker builds a tree, jansson
 * (JSON_REJECT_DUPLICATES) accepts the same text and the tree serializes exactly as jansson's
 * full tree pruned by the reference model (json_pick_model.h); when jansson refuses the text,
 * the picker declines. fuzz_json_pick_built counts the trees built, so a test driving this
 * target can tell it checked something.
 */
#include "codec/json_pick.h"
#include "json_pick_model.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

unsigned long fuzz_json_pick_built;

static const struct tsr_json_pick below_i[] = {{"j", NULL}, {"k[].l", NULL}, {NULL, NULL}};
static const struct tsr_json_pick below_elem[] = {{"m", NULL}, {"n.o", NULL}, {NULL, NULL}};

static const struct tsr_json_pick lists[][10] = {
    {{"a", NULL},
     {"b.c", NULL},
     {"b.d[]", NULL},
     {"e[].f", NULL},
     {"e[].g.h", NULL},
     {"i", below_i},
     {"p[]", below_elem},
     {"q[][].r", NULL},
     {"b", NULL},
     {NULL, NULL}},
    {{"[].a", NULL}, {"[][]", NULL}, {"x.y.z", NULL}, {"x.y", below_i}, {NULL, NULL}},
    {{"apiVersion", NULL},
     {"request.uid", NULL},
     {"request.object.metadata.labels", NULL},
     {"request.object.spec.containers[].resources", NULL},
     {"request.object.spec.affinity", NULL},
     {NULL, NULL}},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const struct tsr_json_pick *picks;
        json_t *picked = NULL, *full, *model;
        json_error_t err;

        if (size < 1)
                return 0;
        picks = lists[data[0] % (sizeof(lists) / sizeof(lists[0]))];
        data++;
        size--;
        if (tsr_json_pick_load((const char *)data, size, picks, &picked))
                return 0; /* out of memory */
        full = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
        if (!full) {
                if (picked)
                        abort(); /* built from a text jansson refuses */
                return 0;
        }
        if (picked) {
                model = model_pick(full, picks);
                if (!model_same_text(picked, model))
                        abort();
                json_decref(model);
                json_decref(picked);
                fuzz_json_pick_built++;
        }
        json_decref(full);
        return 0;
}
