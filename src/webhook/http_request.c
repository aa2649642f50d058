/*
 * http_request.c - see http_request.h. The head is read line by line in one pass; every header the
 * server acts on is matched case-insensitively by name, the others are checked for their syntax
 * and skipped. The chunked decoder is a byte-at-a-time state machine except inside chunk data,
 * which it hands back as spans.
 */
#include "webhook/http_request.h"

#include "base/hex.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 §5.6.2 tchar. */
static bool is_tchar(unsigned char c)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static enum tsr_http_parse refuse(struct tsr_http_request *r, unsigned status, const char *why)
{
        r->status = status;
        r->why = why;
        return TSR_HTTP_REFUSED;
}

/* The end of the line starting at p (its LF), or NULL when the buffer has none yet. */
static const char *line_end(const char *p, const char *end)
{
        return memchr(p, '\n', (size_t)(end - p));
}

/* The length of the line [p, lf) without a CR before its LF. */
static size_t line_len(const char *p, const char *lf)
{
        size_t n = (size_t)(lf - p);

        return n && p[n - 1] == '\r' ? n - 1 : n;
}

static bool is_ows(char c)
{
        return c == ' ' || c == '\t';
}

/* True when the comma-separated list value[0, n) holds token (case-insensitive). */
static bool list_has(const char *value, size_t n, const char *token)
{
        size_t t = strlen(token), i = 0;

        while (i < n) {
                size_t start, stop;

                while (i < n && (is_ows(value[i]) || value[i] == ','))
                        i++;
                start = i;
                while (i < n && value[i] != ',')
                        i++;
                stop = i;
                while (stop > start && is_ows(value[stop - 1]))
                        stop--;
                if (stop - start == t && !strncasecmp(value + start, token, t))
                        return true;
        }
        return false;
}

static bool name_is(const char *name, size_t n, const char *want)
{
        return strlen(want) == n && !strncasecmp(name, want, n);
}

/* The request line [p, p + n). */
static enum tsr_http_parse request_line(const char *p, size_t n, struct tsr_http_request *r)
{
        const char *end = p + n, *sp1, *sp2, *q;
        size_t mlen, tlen;

        sp1 = memchr(p, ' ', n);
        if (!sp1)
                return refuse(r, 400, "a malformed request line");
        sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
        if (!sp2 || memchr(sp2 + 1, ' ', (size_t)(end - sp2 - 1)))
                return refuse(r, 400, "a malformed request line");
        mlen = (size_t)(sp1 - p);
        if (!mlen || mlen >= sizeof(r->method))
                return refuse(r, 400, "a malformed method");
        for (size_t i = 0; i < mlen; i++)
                if (!is_tchar((unsigned char)p[i]))
                        return refuse(r, 400, "a malformed method");
        memcpy(r->method, p, mlen);
        r->method[mlen] = '\0';
        tlen = (size_t)(sp2 - sp1 - 1);
        if (!tlen)
                return refuse(r, 400, "an empty request target");
        for (q = sp1 + 1; q < sp2; q++)
                if ((unsigned char)*q <= 0x20 || *q == 0x7f)
                        return refuse(r, 400, "a control character in the request target");
        q = memchr(sp1 + 1, '?', tlen);
        if (q)
                tlen = (size_t)(q - sp1 - 1);
        if (tlen >= sizeof(r->path))
                return refuse(r, 414, "the request target is too long");
        memcpy(r->path, sp1 + 1, tlen);
        r->path[tlen] = '\0';
        if (end - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/", 5) || sp2[7] != '.' || sp2[6] < '0' ||
            sp2[6] > '9' || sp2[8] < '0' || sp2[8] > '9')
                return refuse(r, 400, "a malformed HTTP version");
        if (sp2[6] != '1' || sp2[8] > '1')
                return refuse(r, 505, "only HTTP/1.0 and HTTP/1.1 are served");
        r->minor = (unsigned)(sp2[8] - '0');
        r->keep_alive = r->minor == 1;
        return TSR_HTTP_DONE;
}

static enum tsr_http_parse content_length(const char *v, size_t n, struct tsr_http_request *r)
{
        unsigned long long x = 0;

        if (!n)
                return refuse(r, 400, "an empty Content-Length");
        for (size_t i = 0; i < n; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return refuse(r, 400, "a Content-Length that is not a number");
                if (x > (UINT64_MAX - 9) / 10)
                        return refuse(r, 400, "a Content-Length too large");
                x = x * 10 + (unsigned)(v[i] - '0');
        }
        if (r->has_length && r->content_length != x)
                return refuse(r, 400, "two different Content-Lengths");
        r->has_length = true;
        r->content_length = x;
        return TSR_HTTP_DONE;
}

/* One header line [p, p + n): checked, and acted on when the server reads it. */
static enum tsr_http_parse header_line(const char *p, size_t n, struct tsr_http_request *r,
                                       bool *has_host, bool *connection_close)
{
        const char *colon = memchr(p, ':', n), *v;
        size_t name_len, vn;

        if (is_ows(*p))
                return refuse(r, 400, "a header line folded onto the previous one");
        if (!colon || colon == p)
                return refuse(r, 400, "a malformed header line");
        name_len = (size_t)(colon - p);
        for (size_t i = 0; i < name_len; i++)
                if (!is_tchar((unsigned char)p[i]))
                        return refuse(r, 400, "a malformed header name");
        v = colon + 1;
        vn = (size_t)(p + n - v);
        while (vn && is_ows(*v)) {
                v++;
                vn--;
        }
        while (vn && is_ows(v[vn - 1]))
                vn--;
        for (size_t i = 0; i < vn; i++)
                if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
                        return refuse(r, 400, "a control character in a header value");
        if (name_is(p, name_len, "Content-Length"))
                return content_length(v, vn, r);
        if (name_is(p, name_len, "Transfer-Encoding")) {
                if (vn != 7 || strncasecmp(v, "chunked", 7) || r->chunked)
                        return refuse(r, 501, "only the chunked transfer coding is served");
                r->chunked = true;
        } else if (name_is(p, name_len, "Host")) {
                *has_host = true;
        } else if (name_is(p, name_len, "Connection")) {
                *connection_close |= list_has(v, vn, "close");
                if (list_has(v, vn, "keep-alive"))
                        r->keep_alive = true;
        } else if (name_is(p, name_len, "Expect")) {
                if (vn != 12 || strncasecmp(v, "100-continue", 12))
                        return refuse(r, 417, "only Expect: 100-continue is served");
                r->expect_continue = true;
        } else if (name_is(p, name_len, "Content-Type")) {
                size_t keep = vn < sizeof(r->content_type) ? vn : sizeof(r->content_type) - 1;

                memcpy(r->content_type, v, keep);
                r->content_type[keep] = '\0';
                r->has_content_type = true;
        }
        return TSR_HTTP_DONE;
}

enum tsr_http_parse tsr_http_request_parse(const char *buf, size_t len,
                                           struct tsr_http_request *out)
{
        const char *p = buf, *end = buf + (len < TSR_HTTP_HEAD_MAX ? len : TSR_HTTP_HEAD_MAX);
        const char *lf;
        bool first = true, has_host = false, connection_close = false;
        enum tsr_http_parse rc;

        memset(out, 0, sizeof(*out));
        /* RFC 9112 §2.2: empty lines before the request line are ignored. */
        while (p < end && (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')))
                p += *p == '\n' ? 1 : 2;
        for (;;) {
                size_t n;

                lf = line_end(p, end);
                if (!lf)
                        return len >= TSR_HTTP_HEAD_MAX
                                   ? refuse(out, 431, "the request head is too large")
                                   : TSR_HTTP_INCOMPLETE;
                n = line_len(p, lf);
                if (memchr(p, '\r', n) || memchr(p, '\0', n))
                        return refuse(out, 400, "a stray CR or NUL in the request head");
                if (first) {
                        rc = request_line(p, n, out);
                        first = false;
                } else if (!n) {
                        break;
                } else {
                        rc = header_line(p, n, out, &has_host, &connection_close);
                }
                if (rc != TSR_HTTP_DONE)
                        return rc;
                p = lf + 1;
        }
        out->head_len = (size_t)(lf + 1 - buf);
        if (out->chunked && out->has_length)
                return refuse(out, 400, "both Content-Length and Transfer-Encoding");
        if (out->minor == 1 && !has_host)
                return refuse(out, 400, "an HTTP/1.1 request without Host");
        if (connection_close)
                out->keep_alive = false;
        return TSR_HTTP_DONE;
}

/* ---- chunked ------------------------------------------------------------------------------ */

enum {
        CH_SIZE,       /* hex digits of a chunk size */
        CH_EXT,        /* a chunk extension, up to its LF */
        CH_DATA,       /* chunk data */
        CH_DATA_CR,    /* the CR (or LF) after chunk data */
        CH_DATA_LF,    /* the LF after that CR */
        CH_TRAILER,    /* the start of a trailer line, or the final empty line */
        CH_TRAILER_IN, /* inside a trailer line */
        CH_FINAL_LF,   /* the LF of the final empty line, after its CR */
        CH_DONE,
};

/* One byte of a chunk-size line: a hex digit, or what ends the size (CR, LF, ';', a space). */
static enum tsr_http_parse size_char(struct tsr_http_chunked *c, char ch)
{
        int d = tsr_hex_value((unsigned char)ch);

        if (d >= 0) {
                if (c->digits == 15) /* past 2^60: no body is that long */
                        return TSR_HTTP_REFUSED;
                c->left = c->left * 16 + (unsigned)d;
                c->digits++;
                return TSR_HTTP_INCOMPLETE;
        }
        if (!c->digits || (ch != ';' && ch != '\r' && ch != '\n' && ch != ' ' && ch != '\t'))
                return TSR_HTTP_REFUSED;
        c->state = CH_EXT;
        return TSR_HTTP_INCOMPLETE;
}

enum tsr_http_parse tsr_http_chunked_step(struct tsr_http_chunked *c, const char *in, size_t len,
                                          size_t *used, size_t *data_off, size_t *data_len)
{
        size_t i = 0;

        *data_off = 0;
        *data_len = 0;
        while (i < len) {
                char ch = in[i];

                switch (c->state) {
                case CH_SIZE:
                        if (size_char(c, ch) == TSR_HTTP_REFUSED)
                                goto bad;
                        if (c->state == CH_EXT && ch == '\n')
                                continue; /* the extension state ends the line */
                        i++;
                        break;
                case CH_EXT:
                        i++;
                        if (ch == '\n') {
                                c->digits = 0;
                                c->state = c->left ? CH_DATA : CH_TRAILER;
                        } else if ((unsigned char)ch < 0x20 && ch != '\t' && ch != '\r') {
                                goto bad;
                        }
                        break;
                case CH_DATA: {
                        size_t n = len - i < c->left ? len - i : (size_t)c->left;

                        c->left -= n;
                        if (!c->left)
                                c->state = CH_DATA_CR;
                        *data_off = i;
                        *data_len = n;
                        *used = i + n;
                        return TSR_HTTP_INCOMPLETE;
                }
                case CH_DATA_CR:
                        i++;
                        if (ch == '\n')
                                c->state = CH_SIZE;
                        else if (ch == '\r')
                                c->state = CH_DATA_LF;
                        else
                                goto bad;
                        break;
                case CH_DATA_LF:
                        i++;
                        if (ch != '\n')
                                goto bad;
                        c->state = CH_SIZE;
                        break;
                case CH_TRAILER:
                        i++;
                        if (ch == '\n') {
                                c->state = CH_DONE;
                                *used = i;
                                return TSR_HTTP_DONE;
                        }
                        c->state = ch == '\r' ? CH_FINAL_LF : CH_TRAILER_IN;
                        if (++c->trailer > TSR_HTTP_TRAILER_MAX)
                                goto bad;
                        break;
                case CH_TRAILER_IN:
                        i++;
                        if (++c->trailer > TSR_HTTP_TRAILER_MAX)
                                goto bad;
                        if (ch == '\n')
                                c->state = CH_TRAILER;
                        break;
                case CH_FINAL_LF:
                        i++;
                        if (ch != '\n')
                                goto bad;
                        c->state = CH_DONE;
                        *used = i;
                        return TSR_HTTP_DONE;
                default: /* CH_DONE */
                        *used = 0;
                        return TSR_HTTP_DONE;
                }
        }
        *used = i;
        return TSR_HTTP_INCOMPLETE;
bad:
        *used = i;
        return TSR_HTTP_REFUSED;
}

const char *tsr_http_reason(unsigned status)
{
        switch (status) {
        case 100:
                return "Continue";
        case 200:
                return "OK";
        case 400:
                return "Bad Request";
        case 404:
                return "Not Found";
        case 405:
                return "Method Not Allowed";
        case 413:
                return "Content Too Large";
        case 414:
                return "URI Too Long";
        case 415:
                return "Unsupported Media Type";
        case 417:
                return "Expectation Failed";
        case 431:
                return "Request Header Fields Too Large";
        case 500:
                return "Internal Server Error";
        case 501:
                return "Not Implemented";
        case 503:
                return "Service Unavailable";
        case 505:
                return "HTTP Version Not Supported";
        default:
                return "Unknown";
        }
}
