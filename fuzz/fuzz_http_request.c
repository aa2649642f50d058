/*
 * fuzz_http_request.c - libFuzzer target for webhook/http_request. Any bytes, read as a request
 * head: (a) the parse is incomplete, done or refused, never past the bytes given; done means a
 * head_len within them ending in LF, a method of tchars and a path without '?', space or control
 * bytes; refused means one of the statuses the header names, with a reason; (b) every proper
 * prefix of a done head is incomplete, and the head parses the same with more bytes after it.
 * The same bytes, read as a chunked body: (c) fed whole and fed one byte at a time, the decoder
 * reaches the same outcome at the same offset with the same data. Any violation abort()s, so the
 * fuzzer and the corpus replay both flag it.
 */
#include "webhook/http_request.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_head(const char *text, size_t size)
{
        struct tsr_http_request r, again;
        enum tsr_http_parse rc = tsr_http_request_parse(text, size, &r);

        if (rc == TSR_HTTP_REFUSED) {
                static const unsigned ok[] = {400, 414, 417, 431, 501, 505};
                bool known = false;

                for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
                        known |= r.status == ok[i];
                if (!known || !r.why)
                        abort();
                return;
        }
        if (rc != TSR_HTTP_DONE)
                return;
        if (!r.head_len || r.head_len > size || text[r.head_len - 1] != '\n' || !r.method[0] ||
            r.minor > 1 || strpbrk(r.path, "? \t\r\n"))
                abort();
        for (size_t n = 0; n < r.head_len; n++)
                if (tsr_http_request_parse(text, n, &again) == TSR_HTTP_DONE)
                        abort();
        if (tsr_http_request_parse(text, r.head_len, &again) != TSR_HTTP_DONE ||
            again.head_len != r.head_len || strcmp(again.path, r.path) ||
            again.content_length != r.content_length || again.chunked != r.chunked ||
            again.keep_alive != r.keep_alive)
                abort();
}

/* Decodes text in pieces of at most step bytes; the data into out. Returns the outcome. */
static enum tsr_http_parse decode(const char *text, size_t size, size_t step, char *out,
                                  size_t *out_len, size_t *end)
{
        struct tsr_http_chunked c;
        enum tsr_http_parse rc = TSR_HTTP_INCOMPLETE;
        size_t at = 0;

        memset(&c, 0, sizeof(c));
        *out_len = 0;
        while (at < size && rc == TSR_HTTP_INCOMPLETE) {
                size_t piece = size - at < step ? size - at : step, used = 0;

                while (used < piece && rc == TSR_HTTP_INCOMPLETE) {
                        size_t u, off, n;

                        rc =
                            tsr_http_chunked_step(&c, text + at + used, piece - used, &u, &off, &n);
                        if (u > piece - used || (n && off + n > u) ||
                            (!u && rc == TSR_HTTP_INCOMPLETE))
                                abort();
                        memcpy(out + *out_len, text + at + used + off, n);
                        *out_len += n;
                        used += u;
                }
                at += used;
        }
        *end = at;
        return rc;
}

static void check_chunked(const char *text, size_t size)
{
        char *whole = malloc(size + 1), *bytes = malloc(size + 1);
        size_t wn, bn, wend, bend;
        enum tsr_http_parse w, b;

        if (!whole || !bytes)
                abort();
        w = decode(text, size, size ? size : 1, whole, &wn, &wend);
        b = decode(text, size, 1, bytes, &bn, &bend);
        if (w != b ||
            (w != TSR_HTTP_REFUSED && (wn != bn || wend != bend || memcmp(whole, bytes, wn))))
                abort();
        free(whole);
        free(bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        check_head((const char *)data, size);
        check_chunked((const char *)data, size);
        return 0;
}
