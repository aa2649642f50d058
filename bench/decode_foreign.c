/*
 * decode_foreign.c - see decode_foreign.h.
 */
#include "decode_foreign.h"

#include <cjson/cJSON.h>
#include <json-c/json.h>
#include <stdio.h>

#define QUEUE_LABEL "kueue.x-k8s.io/queue-name"

static const char *const path[] = {"request", "object", "metadata", "labels", QUEUE_LABEL};
static struct json_tokener *tokener;

int bench_foreign_init(void)
{
        tokener = json_tokener_new();
        return tokener ? 0 : -1;
}

void bench_foreign_release(void)
{
        json_tokener_free(tokener);
        tokener = NULL;
}

const char *bench_foreign_versions(void)
{
        static char text[96];

        snprintf(text, sizeof(text), "json-c %s, cJSON %s", json_c_version(), cJSON_Version());
        return text;
}

bool bench_jsonc_decode(const char *text, size_t n, char *queue, size_t len)
{
        struct json_object *doc, *at;
        const char *q = NULL;
        bool ok;

        json_tokener_reset(tokener);
        doc = json_tokener_parse_ex(tokener, text, (int)n);
        ok = doc && json_tokener_get_error(tokener) == json_tokener_success;
        if (ok && queue) {
                at = doc;
                for (size_t i = 0; at && i < sizeof(path) / sizeof(path[0]); i++)
                        if (!json_object_object_get_ex(at, path[i], &at))
                                at = NULL;
                q = at ? json_object_get_string(at) : NULL;
        }
        if (queue)
                snprintf(queue, len, "%s", q ? q : "");
        json_object_put(doc);
        return ok;
}

bool bench_cjson_decode(const char *text, size_t n, char *queue, size_t len)
{
        cJSON *doc = cJSON_ParseWithLength(text, n);
        const cJSON *at = doc;

        if (queue) {
                for (size_t i = 0; at && i < sizeof(path) / sizeof(path[0]); i++)
                        at = cJSON_GetObjectItemCaseSensitive(at, path[i]);
                snprintf(queue, len, "%s", cJSON_IsString(at) ? at->valuestring : "");
        }
        cJSON_Delete(doc);
        return doc != NULL;
}
