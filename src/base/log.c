/*
 * log.c - logfmt or JSON lines built in a buffer and written at once.
 */
#include "base/log.h"

#include "base/buf.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum tsr_log_level threshold = TSR_LOG_INFO;
static enum tsr_log_format format = TSR_LOG_LOGFMT;

void tsr_log_set_level(enum tsr_log_level level)
{
        threshold = level;
}

void tsr_log_set_format(enum tsr_log_format f)
{
        format = f;
}

static const char *level_name(enum tsr_log_level l)
{
        switch (l) {
        case TSR_LOG_DEBUG:
                return "debug";
        case TSR_LOG_INFO:
                return "info";
        case TSR_LOG_WARN:
                return "warn";
        case TSR_LOG_ERROR:
                break;
        }
        return "error";
}

/* v in double quotes, quotes, backslashes and control characters escaped: JSON's \u escapes
 * (RFC 8259) when json, else logfmt's \x. */
static void quoted(struct tsr_buf *b, const char *v, bool json)
{
        tsr_buf_addch(b, '"');
        for (const char *c = v; *c; c++) {
                if (*c == '"' || *c == '\\')
                        tsr_buf_addf(b, "\\%c", *c);
                else if (*c == '\n')
                        tsr_buf_adds(b, "\\n");
                else if ((unsigned char)*c < 0x20)
                        tsr_buf_addf(b, json ? "\\u%04x" : "\\x%02x", (unsigned char)*c);
                else
                        tsr_buf_addch(b, *c);
        }
        tsr_buf_addch(b, '"');
}

/* A logfmt value: bare unless it is empty or holds a space, a quote, '=' or a control byte. */
static void value(struct tsr_buf *b, const char *v)
{
        bool quote = !*v;

        for (const char *c = v; *c && !quote; c++)
                quote = *c == ' ' || *c == '"' || *c == '=' || (unsigned char)*c < 0x20;
        if (quote)
                quoted(b, v, false);
        else
                tsr_buf_adds(b, v);
}

void tsr_log(enum tsr_log_level level, const char *msg, ...)
{
        struct tsr_buf b = TSR_BUF_INIT;
        struct timespec now;
        struct tm tm;
        char when[40];
        const char *key;
        va_list ap;

        if (level < threshold)
                return;
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        if (format == TSR_LOG_JSON) {
                tsr_buf_addf(&b, "{\"time\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":", when,
                             now.tv_nsec / 1000000, level_name(level));
                quoted(&b, msg, true);
        } else {
                tsr_buf_addf(&b, "time=%s.%03ldZ level=%s msg=", when, now.tv_nsec / 1000000,
                             level_name(level));
                value(&b, msg);
        }
        va_start(ap, msg);
        while ((key = va_arg(ap, const char *))) {
                const char *v = va_arg(ap, const char *);

                if (format == TSR_LOG_JSON) {
                        tsr_buf_addch(&b, ',');
                        quoted(&b, key, true);
                        tsr_buf_addch(&b, ':');
                        quoted(&b, v ? v : "", true);
                } else {
                        tsr_buf_addf(&b, " %s=", key);
                        value(&b, v ? v : "");
                }
        }
        va_end(ap);
        tsr_buf_adds(&b, format == TSR_LOG_JSON ? "}\n" : "\n");
        /* A failed write has nowhere left to be reported. */
        (void)!write(STDERR_FILENO, b.ptr, b.len);
        tsr_buf_release(&b);
}
