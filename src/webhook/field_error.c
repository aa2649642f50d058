/*
 * field_error.c - apimachinery field errors as text (field_error.h).
 */
#include "webhook/field_error.h"

#include "webhook/handler.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tsr_field_list_clear(struct tsr_field_list *l)
{
        l->n = 0;
        l->n_dropped = 0;
}

/* The next free slot of l, or NULL (counted as dropped) when l is full. */
static char *slot(struct tsr_field_list *l)
{
        if (l->n >= TSR_FIELD_LIST_MAX) {
                l->n_dropped++;
                return NULL;
        }
        return l->item[l->n++];
}

static void append(struct tsr_field_list *l, const char *head, const char *fmt, va_list ap)
{
        char *s = slot(l);
        size_t used;

        if (!s)
                return;
        used = (size_t)snprintf(s, TSR_FIELD_LIST_LEN, "%s", head);
        if (used < TSR_FIELD_LIST_LEN)
                vsnprintf(s + used, TSR_FIELD_LIST_LEN - used, fmt, ap);
}

void tsr_field_required(struct tsr_field_list *l, const char *path, const char *fmt, ...)
{
        char head[TSR_FIELD_LIST_LEN];
        va_list ap;

        if (!fmt[0]) {
                char *s = slot(l);

                if (s)
                        snprintf(s, TSR_FIELD_LIST_LEN, "%s: Required value", path);
                return;
        }
        snprintf(head, sizeof(head), "%s: Required value: ", path);
        va_start(ap, fmt);
        append(l, head, fmt, ap);
        va_end(ap);
}

void tsr_field_forbidden(struct tsr_field_list *l, const char *path, const char *fmt, ...)
{
        char head[TSR_FIELD_LIST_LEN];
        va_list ap;

        snprintf(head, sizeof(head), "%s: Forbidden: ", path);
        va_start(ap, fmt);
        append(l, head, fmt, ap);
        va_end(ap);
}

void tsr_field_invalid_str(struct tsr_field_list *l, const char *path, const char *value,
                           const char *fmt, ...)
{
        char head[TSR_FIELD_LIST_LEN], q[TSR_FIELD_LIST_LEN / 2];
        va_list ap;

        snprintf(head, sizeof(head), "%s: Invalid value: %s: ", path,
                 tsr_go_quote(value, q, sizeof(q)));
        va_start(ap, fmt);
        append(l, head, fmt, ap);
        va_end(ap);
}

void tsr_field_invalid_int(struct tsr_field_list *l, const char *path, int64_t value,
                           const char *fmt, ...)
{
        char head[TSR_FIELD_LIST_LEN];
        va_list ap;

        snprintf(head, sizeof(head), "%s: Invalid value: %" PRId64 ": ", path, value);
        va_start(ap, fmt);
        append(l, head, fmt, ap);
        va_end(ap);
}

void tsr_field_not_found(struct tsr_field_list *l, const char *path, const char *value)
{
        char q[TSR_FIELD_LIST_LEN / 2];
        char *s = slot(l);

        if (s)
                snprintf(s, TSR_FIELD_LIST_LEN, "%s: Not found: %s", path,
                         tsr_go_quote(value, q, sizeof(q)));
}

void tsr_field_list_deny_invalid(struct tsr_verdict *v, const char *kind, const char *name,
                                 const struct tsr_field_list *l)
{
        char list[TSR_VERDICT_MESSAGE_MAX], q[TSR_REVIEW_FIELD_MAX + 8];
        size_t used = 0;

        list[0] = '\0';
        if (l->n == 1) {
                snprintf(list, sizeof(list), "%s", l->item[0]);
        } else {
                used = (size_t)snprintf(list, sizeof(list), "[");
                for (size_t i = 0; i < l->n && used < sizeof(list); i++)
                        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                                 i ? ", " : "", l->item[i]);
                if (used < sizeof(list))
                        snprintf(list + used, sizeof(list) - used, "]");
        }
        tsr_verdict_deny(v, 422, "Invalid", "%s %s is invalid: %s", kind,
                         tsr_go_quote(name, q, sizeof(q)), list);
}

char *tsr_go_quote(const char *s, char *out, size_t len)
{
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;

        if (len == 0)
                return out;
#define PUT(c)                                                                                     \
        do {                                                                                       \
                if (o + 1 < len)                                                                   \
                        out[o++] = (c);                                                            \
        } while (0)
        PUT('"');
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
                const char *esc = NULL;

                switch (*p) {
                case '"':
                        esc = "\\\"";
                        break;
                case '\\':
                        esc = "\\\\";
                        break;
                case '\a':
                        esc = "\\a";
                        break;
                case '\b':
                        esc = "\\b";
                        break;
                case '\f':
                        esc = "\\f";
                        break;
                case '\n':
                        esc = "\\n";
                        break;
                case '\r':
                        esc = "\\r";
                        break;
                case '\t':
                        esc = "\\t";
                        break;
                case '\v':
                        esc = "\\v";
                        break;
                default:
                        break;
                }
                if (esc) {
                        PUT(esc[0]);
                        PUT(esc[1]);
                } else if (*p < 0x20 || *p == 0x7f) {
                        PUT('\\');
                        PUT('x');
                        PUT(hex[*p >> 4]);
                        PUT(hex[*p & 15]);
                } else {
                        PUT((char)*p);
                }
        }
        PUT('"');
#undef PUT
        out[o] = '\0';
        return out;
}
