/*
 * buf.h - a growable, always NUL-terminated byte buffer (git's strbuf, with a ceiling).
 *
 * Invariants: buf->ptr is never NULL once initialised (it points at a static "" until the first
 * growth); buf->ptr[buf->len] == '\0'; buf->len < buf->cap whenever cap > 0. A buffer never grows
 * past buf->max bytes (TSR_BUF_DEFAULT_MAX unless set): an append that would is refused with
 * TSR_ETOOBIG and leaves the buffer unchanged. The buffer owns ptr; release with tsr_buf_release.
 * Not thread-safe: one owner at a time.
 */
#ifndef TSR_BASE_BUF_H
#define TSR_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

#define TSR_BUF_DEFAULT_MAX ((size_t)64 << 20)

struct tsr_buf {
        char *ptr;  /* contents, NUL-terminated */
        size_t len; /* bytes used, excluding the NUL */
        size_t cap; /* bytes allocated, 0 while ptr is the static "" */
        size_t max; /* ceiling on len + 1 */
};

#define TSR_BUF_INIT                                                                               \
        {                                                                                          \
                tsr__buf_empty, 0, 0, TSR_BUF_DEFAULT_MAX                                          \
        }
extern char tsr__buf_empty[1];

/* Initialises b as empty with the default ceiling. Cannot fail. */
void tsr_buf_init(struct tsr_buf *b);

/* Frees b's contents and re-initialises it as empty. */
void tsr_buf_release(struct tsr_buf *b);

/* Empties b, keeping its allocation; never writes to an unallocated buffer (safe across threads).
 */
void tsr_buf_reset(struct tsr_buf *b);

/* Appends len bytes. Returns 0, TSR_ENOMEM or TSR_ETOOBIG (b unchanged on failure). */
int tsr_buf_add(struct tsr_buf *b, const void *data, size_t len);

/* Appends a NUL-terminated string. Same returns as tsr_buf_add. */
int tsr_buf_adds(struct tsr_buf *b, const char *s);

/* Appends one byte. Same returns as tsr_buf_add. */
int tsr_buf_addch(struct tsr_buf *b, char c);

/* Appends printf-style text. Same returns as tsr_buf_add. */
int tsr_buf_addf(struct tsr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* va_list form of tsr_buf_addf. */
int tsr_buf_vaddf(struct tsr_buf *b, const char *fmt, va_list ap);

/* Appends n copies of c (padding). Same returns as tsr_buf_add. */
int tsr_buf_pad(struct tsr_buf *b, char c, size_t n);

/*
 * Hands b's contents to the caller as a malloc'd NUL-terminated string (free with free()) and
 * re-initialises b. Returns NULL only when allocation fails, leaving b unchanged.
 */
char *tsr_buf_detach(struct tsr_buf *b);

#endif
