/*
 * yaml_json.c - event-driven libyaml to jansson conversion with a bounded nesting depth.
 */
#include "sim/yaml_json.h"

#include "base/diag.h"
#include "base/err.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 64

void tsr_yaml_lines_release(struct tsr_yaml_lines *lines)
{
        if (!lines)
                return;
        free(lines->e);
        lines->e = NULL;
        lines->n = lines->cap = 0;
}

unsigned tsr_yaml_line(const struct tsr_yaml_lines *lines, const json_t *value, unsigned fallback)
{
        for (size_t i = 0; lines && i < lines->n; i++)
                if (lines->e[i].value == value)
                        return lines->e[i].line;
        return fallback;
}

static int remember(struct tsr_yaml_lines *lines, const json_t *v, unsigned line)
{
        if (!lines)
                return 0;
        if (lines->n == lines->cap) {
                size_t cap = lines->cap ? lines->cap * 2 : 64;
                void *p = realloc(lines->e, cap * sizeof(lines->e[0]));

                if (!p)
                        return TSR_ENOMEM;
                lines->e = p;
                lines->cap = cap;
        }
        lines->e[lines->n].value = v;
        lines->e[lines->n].line = line;
        lines->n++;
        return 0;
}

static bool all_digits(const char *s, bool allow_sign)
{
        if (allow_sign && (*s == '-' || *s == '+'))
                s++;
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

static json_t *plain_scalar(const char *s)
{
        if (!strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL") || !strcmp(s, "~") ||
            !*s)
                return json_null();
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
                return json_true();
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
                return json_false();
        if (all_digits(s, true)) {
                char *end;
                long long v;

                errno = 0;
                v = strtoll(s, &end, 10);
                if (errno == 0 && *end == '\0')
                        return json_integer(v);
        }
        return json_string(s);
}

struct frame {
        json_t *v;
        char *key; /* pending mapping key, owned */
};

struct conv {
        struct frame stack[MAX_DEPTH];
        int depth;
        json_t *docs;
        struct tsr_yaml_lines *lines;
};

static int attach(struct conv *c, json_t *v, unsigned line, struct tsr_diag *diag)
{
        struct frame *top;

        if (!v)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        if (remember(c->lines, v, line)) {
                json_decref(v);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        if (c->depth == 0) {
                json_array_append_new(c->docs, v);
                return 0;
        }
        top = &c->stack[c->depth - 1];
        if (json_is_array(top->v)) {
                json_array_append_new(top->v, v);
                return 0;
        }
        if (!top->key) {
                if (!json_is_string(v)) {
                        json_decref(v);
                        return tsr_diag_set_at(diag, TSR_EPARSE, line,
                                               "mapping keys must be strings");
                }
                top->key = strdup(json_string_value(v));
                json_decref(v);
                return top->key ? 0 : tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        if (json_object_get(top->v, top->key)) {
                int rc = tsr_diag_set_at(diag, TSR_EPARSE, line, "duplicate key \"%s\"", top->key);

                json_decref(v);
                return rc;
        }
        json_object_set_new(top->v, top->key, v);
        free(top->key);
        top->key = NULL;
        return 0;
}

static int push(struct conv *c, json_t *v, unsigned line, struct tsr_diag *diag)
{
        int rc;

        if (c->depth >= MAX_DEPTH) {
                json_decref(v);
                return tsr_diag_set_at(diag, TSR_ETOOBIG, line, "nesting deeper than %d",
                                       MAX_DEPTH);
        }
        json_incref(v);
        rc = attach(c, v, line, diag);
        if (rc) {
                json_decref(v);
                return rc;
        }
        c->stack[c->depth].v = v;
        c->stack[c->depth].key = NULL;
        c->depth++;
        return 0;
}

static void pop(struct conv *c)
{
        c->depth--;
        free(c->stack[c->depth].key);
        json_decref(c->stack[c->depth].v);
}

int tsr_yaml_load_all(const char *text, size_t len, unsigned first_line, json_t **out,
                      struct tsr_yaml_lines *lines, struct tsr_diag *diag)
{
        yaml_parser_t parser;
        yaml_event_t ev;
        struct conv c = {.depth = 0, .lines = lines};
        int rc = 0;
        bool done = false;

        c.docs = json_array();
        if (!c.docs)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        if (!yaml_parser_initialize(&parser)) {
                json_decref(c.docs);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
        while (!done && !rc) {
                unsigned line;

                if (!yaml_parser_parse(&parser, &ev)) {
                        rc = tsr_diag_set_at(diag, TSR_EPARSE,
                                             (unsigned)parser.problem_mark.line + 1 + first_line,
                                             "YAML: %s", parser.problem ? parser.problem : "error");
                        break;
                }
                line = (unsigned)ev.start_mark.line + 1 + first_line;
                switch (ev.type) {
                case YAML_STREAM_END_EVENT:
                        done = true;
                        break;
                case YAML_ALIAS_EVENT:
                        rc = tsr_diag_set_at(diag, TSR_EPARSE, line,
                                             "YAML aliases are not supported");
                        break;
                case YAML_SCALAR_EVENT: {
                        const char *s = (const char *)ev.data.scalar.value;
                        bool plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                        bool is_key = c.depth > 0 && json_is_object(c.stack[c.depth - 1].v) &&
                                      !c.stack[c.depth - 1].key;

                        if (ev.data.scalar.anchor) {
                                rc = tsr_diag_set_at(diag, TSR_EPARSE, line,
                                                     "YAML anchors are not supported");
                                break;
                        }
                        rc = attach(&c, (plain && !is_key) ? plain_scalar(s) : json_string(s), line,
                                    diag);
                        break;
                }
                case YAML_SEQUENCE_START_EVENT:
                        rc = push(&c, json_array(), line, diag);
                        break;
                case YAML_MAPPING_START_EVENT:
                        rc = push(&c, json_object(), line, diag);
                        break;
                case YAML_SEQUENCE_END_EVENT:
                case YAML_MAPPING_END_EVENT:
                        pop(&c);
                        break;
                default:
                        break;
                }
                yaml_event_delete(&ev);
        }
        while (c.depth > 0)
                pop(&c);
        yaml_parser_delete(&parser);
        if (rc) {
                json_decref(c.docs);
                return rc;
        }
        *out = c.docs;
        return 0;
}
