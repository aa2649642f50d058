/*
 * http_request.h - the HTTP/1.1 request head and chunked body framing of RFC 9112, read from the
 * bytes a connection has received so far. No I/O, no allocation: the server (http_loop.h) feeds
 * it its buffer and acts on what it returns.
 *
 * What a head may be: optional empty lines, then `METHOD SP target SP HTTP/1.x CRLF`, then header
 * lines `name: value`, then an empty line. A bare LF ends a line as CRLF does (RFC 9112 §2.2).
 * Refused, with the status a server answers and a reason (the server then closes the connection,
 * since the framing of what follows cannot be trusted):
 *   400  a malformed request line or header line (a space before the colon, a line folded onto the
 *        previous one, a control character, a method that is not a token), a Content-Length that
 *        is not a decimal number or that two headers give differently, both Content-Length and
 *        Transfer-Encoding (a request smuggling vector), an HTTP/1.1 request without Host;
 *   414  a target longer than TSR_HTTP_TARGET_MAX;
 *   417  an Expect other than 100-continue;
 *   431  a head longer than TSR_HTTP_HEAD_MAX;
 *   501  a transfer coding other than chunked;
 *   505  an HTTP version other than 1.0 and 1.1.
 * The target keeps only its path: the query (the API server's ?timeout=10s) is dropped.
 *
 * The chunked decoder takes the body's bytes in any pieces and gives back the data spans in them;
 * chunk extensions and trailer fields are read and dropped.
 *
 * Ownership: the request struct holds copies of what it names; nothing points into the buffer.
 * Thread-safety: pure functions of their arguments.
 */
#ifndef TSR_WEBHOOK_HTTP_REQUEST_H
#define TSR_WEBHOOK_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#define TSR_HTTP_HEAD_MAX         ((size_t)16 << 10) /* request line and headers */
#define TSR_HTTP_TARGET_MAX       2048
#define TSR_HTTP_METHOD_MAX       32
#define TSR_HTTP_CONTENT_TYPE_MAX 256
#define TSR_HTTP_TRAILER_MAX      ((size_t)16 << 10)

enum tsr_http_parse {
        TSR_HTTP_INCOMPLETE, /* no end of head yet: read more */
        TSR_HTTP_DONE,       /* a head (or a chunked body) is complete */
        TSR_HTTP_REFUSED,    /* status and why say what is wrong */
};

struct tsr_http_request {
        size_t head_len; /* bytes of the head, its empty line included */
        char method[TSR_HTTP_METHOD_MAX];
        char path[TSR_HTTP_TARGET_MAX]; /* the target up to its '?' */
        unsigned minor;                 /* HTTP/1.minor */
        bool has_length;
        unsigned long long content_length;
        bool chunked;
        bool keep_alive; /* the connection may carry another request after this one */
        bool expect_continue;
        bool has_content_type;
        char content_type[TSR_HTTP_CONTENT_TYPE_MAX]; /* truncated past its size */
        unsigned status;                              /* a refusal's status */
        const char *why;                              /* a refusal's reason (static text) */
};

/* Reads the head at the start of buf (len bytes) into *out. */
enum tsr_http_parse tsr_http_request_parse(const char *buf, size_t len,
                                           struct tsr_http_request *out);

/* A chunked body's framing, from its first byte; zero it to start. */
struct tsr_http_chunked {
        int state;
        unsigned long long left; /* bytes left in the current chunk, or digits of its size */
        unsigned digits;
        size_t trailer; /* trailer bytes read */
};

/*
 * Steps over in (len bytes): sets *used to the bytes consumed and, when some of them are body
 * data, *data_off and *data_len to that span of in (*data_len 0 when none). Returns
 * TSR_HTTP_INCOMPLETE (call again with the rest of in, or with more bytes once in is used up),
 * TSR_HTTP_DONE once the last chunk and the trailer are read (*used stops there), or
 * TSR_HTTP_REFUSED (400) for a malformed size or line or a trailer past TSR_HTTP_TRAILER_MAX.
 */
enum tsr_http_parse tsr_http_chunked_step(struct tsr_http_chunked *c, const char *in, size_t len,
                                          size_t *used, size_t *data_off, size_t *data_len);

/* The reason phrase of an HTTP status the server answers with ("OK", "Not Found", ...). */
const char *tsr_http_reason(unsigned status);

#endif
