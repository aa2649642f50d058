/*
 * diag.h - a human-readable cause that travels beside an error code.
 *
 * A struct tsr_diag is owned by the caller (usually on the stack) and passed as the last argument
 * of fallible functions; NULL means "do not describe". A function fills it only when it fails, so
 * calls can be chained and the first failure's message survives. Messages are truncated to fit the
 * fixed buffer; no allocation ever happens on the error path.
 */
#ifndef TSR_BASE_DIAG_H
#define TSR_BASE_DIAG_H

#include <stddef.h>

#define TSR_DIAG_MSG_MAX 512

struct tsr_diag {
        int code;                   /* a TSR_E* code, 0 when unset */
        unsigned line;              /* 1-based source line the message refers to, 0 if none */
        char msg[TSR_DIAG_MSG_MAX]; /* NUL-terminated message */
};

/* Resets d to "no error". d may be NULL. */
void tsr_diag_clear(struct tsr_diag *d);

/*
 * Records code and a printf-style message in d (d may be NULL) and returns code, so that a
 * failure can be written `return tsr_diag_set(diag, TSR_EINVAL, "bad %s", what);`.
 */
int tsr_diag_set(struct tsr_diag *d, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As tsr_diag_set, also recording the 1-based source line the message is about. */
int tsr_diag_set_at(struct tsr_diag *d, int code, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
