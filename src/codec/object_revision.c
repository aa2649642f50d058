/* object_revision.c - see object_revision.h. */
#include "codec/object_revision.h"

#include <stdio.h>

bool tsr_object_revision(json_t *obj, char *out, size_t len)
{
        json_t *meta = json_object_get(obj, "metadata");
        const char *uid = json_string_value(json_object_get(meta, "uid"));
        const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
        int n;

        if (!uid || !rv || !*uid || !*rv)
                return false;
        n = snprintf(out, len, "%s/%s", uid, rv);
        return n > 0 && (size_t)n < len;
}
