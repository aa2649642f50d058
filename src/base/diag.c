/*
 * diag.c - filling a struct tsr_diag. Never allocates; truncates long messages.
 */
#include "base/diag.h"

#include <stdarg.h>
#include <stdio.h>

void tsr_diag_clear(struct tsr_diag *d)
{
        if (!d)
                return;
        d->code = 0;
        d->line = 0;
        d->msg[0] = '\0';
}

static void diag_vset(struct tsr_diag *d, int code, unsigned line, const char *fmt, va_list ap)
{
        d->code = code;
        d->line = line;
        vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
}

int tsr_diag_set(struct tsr_diag *d, int code, const char *fmt, ...)
{
        va_list ap;

        if (!d)
                return code;
        va_start(ap, fmt);
        diag_vset(d, code, 0, fmt, ap);
        va_end(ap);
        return code;
}

int tsr_diag_set_at(struct tsr_diag *d, int code, unsigned line, const char *fmt, ...)
{
        va_list ap;

        if (!d)
                return code;
        va_start(ap, fmt);
        diag_vset(d, code, line, fmt, ap);
        va_end(ap);
        return code;
}
