/*
 * json_text.c - JSON text in and out for the unit tests; see json_text.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "json_text.h"

json_t *json_fx_load(const char *text)
{
        json_error_t err;
        json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);

        if (!v)
                fail_msg("bad JSON in test: %s: %s", text, err.text);
        return v;
}

char *json_fx_dump(json_t *v)
{
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

        if (!s)
                fail_msg("cannot serialize");
        return s;
}
