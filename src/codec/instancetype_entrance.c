/* instancetype_entrance.c - see instancetype_entrance.h. */
#include "codec/instancetype_entrance.h"

#include "codec/instancetype_object.h"

#include <string.h>

json_t *tsr_instancetype_entrance_scan(json_t *by_name, const char *lq, size_t *n)
{
        json_t *found = NULL, *obj;
        const char *key;

        *n = 0;
        if (!lq)
                return NULL;
        json_object_foreach(by_name, key, obj)
        {
                json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
                const char *v =
                    json_string_value(json_object_get(labels, TSR_INSTANCETYPE_ENTRANCE));

                if (v && !strcmp(v, lq) && (*n)++ == 0)
                        found = obj;
        }
        return found;
}
