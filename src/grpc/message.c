/*
 * message.c - length-prefixed message reassembly (see message.h). A message wholly inside one
 * feed is delivered straight from the caller's bytes; only a message that spans feeds is copied.
 */
#include "grpc/message.h"

#include "base/diag.h"
#include "base/err.h"

void tsr_grpc_reader_init(struct tsr_grpc_reader *r, size_t max)
{
        r->prefix_len = 0;
        r->want = 0;
        tsr_buf_init(&r->body);
        r->max = max ? max : TSR_GRPC_MESSAGE_MAX_DEFAULT;
        r->body.max = r->max + 1;
        r->messages = 0;
}

void tsr_grpc_reader_release(struct tsr_grpc_reader *r)
{
        tsr_buf_release(&r->body);
        r->prefix_len = 0;
        r->want = 0;
}

/* The prefix is complete: check it and note the length. */
static int take_prefix(struct tsr_grpc_reader *r, struct tsr_diag *diag)
{
        uint32_t len = (uint32_t)r->prefix[1] << 24 | (uint32_t)r->prefix[2] << 16 |
                       (uint32_t)r->prefix[3] << 8 | r->prefix[4];

        if (r->prefix[0] == 1)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "message %zu: compressed flag set, but no grpc-encoding was "
                                    "negotiated",
                                    r->messages + 1);
        if (r->prefix[0] != 0)
                return tsr_diag_set(diag, TSR_EPARSE, "message %zu: compressed flag is %u",
                                    r->messages + 1, r->prefix[0]);
        if (len > r->max)
                return tsr_diag_set(diag, TSR_ETOOBIG,
                                    "message %zu: %lu bytes exceeds the maximum of %zu",
                                    r->messages + 1, (unsigned long)len, r->max);
        r->want = len;
        return 0;
}

static int deliver(struct tsr_grpc_reader *r, const uint8_t *msg, size_t len,
                   tsr_grpc_message_fn fn, void *ctx)
{
        r->prefix_len = 0;
        r->want = 0;
        r->messages++;
        return fn(ctx, msg, len);
}

int tsr_grpc_reader_feed(struct tsr_grpc_reader *r, const uint8_t *data, size_t len,
                         tsr_grpc_message_fn fn, void *ctx, struct tsr_diag *diag)
{
        size_t off = 0;
        int rc;

        while (off < len) {
                size_t n;

                if (r->prefix_len < TSR_GRPC_PREFIX_LEN) {
                        n = TSR_GRPC_PREFIX_LEN - r->prefix_len;
                        if (n > len - off)
                                n = len - off;
                        for (size_t i = 0; i < n; i++)
                                r->prefix[r->prefix_len++] = data[off + i];
                        off += n;
                        if (r->prefix_len < TSR_GRPC_PREFIX_LEN)
                                return 0;
                        rc = take_prefix(r, diag);
                        if (rc)
                                return rc;
                }
                n = r->want - r->body.len;
                if (r->body.len == 0 && n <= len - off) {
                        /* The whole body is here: no copy. */
                        rc = deliver(r, data + off, n, fn, ctx);
                        off += n;
                        if (rc)
                                return rc;
                        continue;
                }
                if (n > len - off)
                        n = len - off;
                rc = tsr_buf_add(&r->body, data + off, n);
                if (rc)
                        return tsr_diag_set(diag, rc, "message %zu: cannot buffer %zu bytes",
                                            r->messages + 1, r->want);
                off += n;
                if (r->body.len == r->want) {
                        rc = deliver(r, (const uint8_t *)r->body.ptr, r->body.len, fn, ctx);
                        tsr_buf_reset(&r->body);
                        if (rc)
                                return rc;
                }
        }
        return 0;
}

int tsr_grpc_reader_finish(const struct tsr_grpc_reader *r, struct tsr_diag *diag)
{
        if (r->prefix_len == 0)
                return 0;
        if (r->prefix_len < TSR_GRPC_PREFIX_LEN)
                return tsr_diag_set(
                    diag, TSR_EPARSE,
                    "stream ended inside the prefix of message %zu (%zu of 5 bytes)",
                    r->messages + 1, r->prefix_len);
        return tsr_diag_set(diag, TSR_EPARSE, "stream ended inside message %zu (%zu of %zu bytes)",
                            r->messages + 1, r->body.len, r->want);
}

int tsr_grpc_message_frame(struct tsr_buf *out, const uint8_t *msg, size_t len)
{
        uint8_t prefix[TSR_GRPC_PREFIX_LEN];
        size_t start = out->len;
        int rc;

        if (len > UINT32_MAX)
                return TSR_ETOOBIG;
        prefix[0] = 0;
        prefix[1] = (uint8_t)(len >> 24);
        prefix[2] = (uint8_t)(len >> 16);
        prefix[3] = (uint8_t)(len >> 8);
        prefix[4] = (uint8_t)len;
        rc = tsr_buf_add(out, prefix, sizeof(prefix));
        if (!rc && len)
                rc = tsr_buf_add(out, msg, len);
        if (rc) {
                out->len = start;
                if (out->cap)
                        out->ptr[start] = '\0';
        }
        return rc;
}
