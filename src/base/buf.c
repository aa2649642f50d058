/*
 * buf.c - growable buffer. Growth doubles up to the ceiling; every failure leaves the buffer as it
 * was (validate, then allocate, then apply).
 */
#include "base/buf.h"

#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char tsr__buf_empty[1];

void tsr_buf_init(struct tsr_buf *b)
{
        b->ptr = tsr__buf_empty;
        b->len = 0;
        b->cap = 0;
        b->max = TSR_BUF_DEFAULT_MAX;
}

void tsr_buf_release(struct tsr_buf *b)
{
        size_t max = b->max;

        if (b->cap)
                free(b->ptr);
        tsr_buf_init(b);
        b->max = max;
}

void tsr_buf_reset(struct tsr_buf *b)
{
        b->len = 0;
        if (b->cap) /* the shared static "" of an unallocated buffer is never written */
                b->ptr[0] = '\0';
}

static int grow(struct tsr_buf *b, size_t extra)
{
        size_t need, cap;
        char *p;

        if (extra > b->max || b->len + 1 > b->max - extra)
                return TSR_ETOOBIG;
        need = b->len + extra + 1;
        if (need <= b->cap)
                return 0;
        cap = b->cap ? b->cap : 64;
        while (cap < need)
                cap = cap > b->max / 2 ? b->max : cap * 2;
        p = realloc(b->cap ? b->ptr : NULL, cap);
        if (!p)
                return TSR_ENOMEM;
        if (!b->cap)
                p[0] = '\0';
        b->ptr = p;
        b->cap = cap;
        return 0;
}

int tsr_buf_add(struct tsr_buf *b, const void *data, size_t len)
{
        int rc = grow(b, len);

        if (rc)
                return rc;
        if (len)
                memcpy(b->ptr + b->len, data, len);
        b->len += len;
        b->ptr[b->len] = '\0';
        return 0;
}

int tsr_buf_adds(struct tsr_buf *b, const char *s)
{
        return tsr_buf_add(b, s, strlen(s));
}

int tsr_buf_addch(struct tsr_buf *b, char c)
{
        return tsr_buf_add(b, &c, 1);
}

int tsr_buf_pad(struct tsr_buf *b, char c, size_t n)
{
        int rc = grow(b, n);

        if (rc)
                return rc;
        memset(b->ptr + b->len, c, n);
        b->len += n;
        b->ptr[b->len] = '\0';
        return 0;
}

int tsr_buf_vaddf(struct tsr_buf *b, const char *fmt, va_list ap)
{
        va_list cp;
        int n, rc;

        va_copy(cp, ap);
        n = vsnprintf(NULL, 0, fmt, cp);
        va_end(cp);
        if (n < 0)
                return TSR_EINVAL;
        rc = grow(b, (size_t)n);
        if (rc)
                return rc;
        vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
        b->len += (size_t)n;
        return 0;
}

int tsr_buf_addf(struct tsr_buf *b, const char *fmt, ...)
{
        va_list ap;
        int rc;

        va_start(ap, fmt);
        rc = tsr_buf_vaddf(b, fmt, ap);
        va_end(ap);
        return rc;
}

char *tsr_buf_detach(struct tsr_buf *b)
{
        char *p;

        if (b->cap) {
                p = b->ptr;
        } else {
                p = malloc(1);
                if (!p)
                        return NULL;
                p[0] = '\0';
        }
        size_t max = b->max;
        tsr_buf_init(b);
        b->max = max;
        return p;
}
