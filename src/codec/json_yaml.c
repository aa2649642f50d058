/*
 * json_yaml.c - JSON to block YAML through libyaml's event emitter.
 */
#include "codec/json_yaml.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

struct sink {
        struct tsr_buf *out;
        int rc; /* the buffer's refusal */
};

static int write_handler(void *data, unsigned char *text, size_t len)
{
        struct sink *s = data;

        s->rc = tsr_buf_add(s->out, text, len);
        return s->rc == 0;
}

/* Whether a YAML 1.1 or 1.2 parser would read the plain scalar s as other than a string. */
static bool ambiguous(const char *s)
{
        static const char *const words[] = {"y",   "n",    "yes",   "no",   "on",
                                            "off", "true", "false", "null", "~"};

        if (!*s || strchr("0123456789+-.", *s))
                return true;
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (!strcasecmp(s, words[i]))
                        return true;
        return false;
}

static int scalar(yaml_emitter_t *e, const char *text, yaml_scalar_style_t style)
{
        yaml_event_t ev;

        yaml_scalar_event_initialize(&ev, NULL, NULL, (const yaml_char_t *)text, (int)strlen(text),
                                     1, 1, style);
        return yaml_emitter_emit(e, &ev) ? 0 : -1;
}

static int value(yaml_emitter_t *e, const json_t *v)
{
        yaml_event_t ev;
        const char *key;
        json_t *item;
        size_t i;
        char num[32];

        switch (json_typeof(v)) {
        case JSON_OBJECT:
                yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
                if (!yaml_emitter_emit(e, &ev))
                        return -1;
                json_object_foreach((json_t *)(uintptr_t)v, key, item)
                {
                        if (scalar(e, key,
                                   ambiguous(key) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE
                                                  : YAML_ANY_SCALAR_STYLE) ||
                            value(e, item))
                                return -1;
                }
                yaml_mapping_end_event_initialize(&ev);
                break;
        case JSON_ARRAY:
                yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
                if (!yaml_emitter_emit(e, &ev))
                        return -1;
                json_array_foreach(v, i, item)
                {
                        if (value(e, item))
                                return -1;
                }
                yaml_sequence_end_event_initialize(&ev);
                break;
        case JSON_STRING:
                return scalar(e, json_string_value(v),
                              ambiguous(json_string_value(v)) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE
                                                              : YAML_ANY_SCALAR_STYLE);
        case JSON_INTEGER:
                snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return scalar(e, num, YAML_PLAIN_SCALAR_STYLE);
        case JSON_REAL:
                snprintf(num, sizeof(num), "%.17g", json_real_value(v));
                return scalar(e, num, YAML_PLAIN_SCALAR_STYLE);
        case JSON_TRUE:
                return scalar(e, "true", YAML_PLAIN_SCALAR_STYLE);
        case JSON_FALSE:
                return scalar(e, "false", YAML_PLAIN_SCALAR_STYLE);
        case JSON_NULL:
                return scalar(e, "null", YAML_PLAIN_SCALAR_STYLE);
        }
        return yaml_emitter_emit(e, &ev) ? 0 : -1;
}

static int document(yaml_emitter_t *e, const json_t *v)
{
        yaml_event_t ev;

        yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
        if (!yaml_emitter_emit(e, &ev))
                return -1;
        yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
        if (!yaml_emitter_emit(e, &ev) || value(e, v))
                return -1;
        yaml_document_end_event_initialize(&ev, 1);
        if (!yaml_emitter_emit(e, &ev))
                return -1;
        yaml_stream_end_event_initialize(&ev);
        return yaml_emitter_emit(e, &ev) && yaml_emitter_flush(e) ? 0 : -1;
}

int tsr_json_yaml_emit(const json_t *v, struct tsr_buf *out, struct tsr_diag *diag)
{
        struct sink s = {out, 0};
        size_t len = out->len;
        yaml_emitter_t e;
        int rc = 0;

        if (!yaml_emitter_initialize(&e))
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        yaml_emitter_set_output(&e, write_handler, &s);
        yaml_emitter_set_unicode(&e, 1);
        yaml_emitter_set_indent(&e, 2);
        yaml_emitter_set_width(&e, -1);
        if (document(&e, v)) {
                rc = s.rc ? s.rc : TSR_ENOMEM;
                if (out->len > len) { /* it grew, so it is allocated */
                        out->len = len;
                        out->ptr[len] = '\0';
                }
                tsr_diag_set(diag, rc, "cannot write YAML: %s",
                             s.rc        ? "the output is full"
                             : e.problem ? e.problem
                                         : "out of memory");
        }
        yaml_emitter_delete(&e);
        return rc;
}
