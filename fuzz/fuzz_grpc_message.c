/*
 * fuzz_grpc_message.c - bytes as a gRPC DATA payload for the message reader. The first byte
 * seeds the chunk sizes; the rest is fed twice, whole and in chunks: both must end with the same
 * code and deliver the same messages, because reassembly may not depend on frame boundaries.
 * No message may exceed the ceiling (64 KiB here), and every refusal must say why.
 */
#include "base/diag.h"
#include "base/err.h"
#include "base/fnv.h"
#include "grpc/message.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSG 65536

struct record {
        size_t n;
        size_t lens[256];
        uint64_t sums[256];
};

static int keep(void *ctx, const uint8_t *msg, size_t len)
{
        struct record *r = ctx;

        if (len > MAX_MSG)
                abort();
        if (r->n == 256)
                return 1;
        r->lens[r->n] = len;
        r->sums[r->n] = tsr_fnv1a64_update(TSR_FNV64_OFFSET, msg, len);
        r->n++;
        return 0;
}

static int run(const uint8_t *data, size_t size, unsigned seed, struct record *r)
{
        struct tsr_grpc_reader rd;
        struct tsr_diag diag;
        size_t off = 0;
        int rc = 0;

        tsr_grpc_reader_init(&rd, MAX_MSG);
        tsr_diag_clear(&diag);
        while (!rc && off < size) {
                size_t n = seed ? 1 + (seed + off * 7) % 13 : size;

                if (n > size - off)
                        n = size - off;
                rc = tsr_grpc_reader_feed(&rd, data + off, n, keep, r, &diag);
                off += n;
        }
        if (!rc)
                rc = tsr_grpc_reader_finish(&rd, &diag);
        if (rc < 0 && diag.msg[0] == '\0')
                abort();
        tsr_grpc_reader_release(&rd);
        return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct record whole, chunked;
        unsigned seed;
        int a, b;

        if (size < 1 || size > 262144)
                return 0;
        seed = data[0] | 1u;
        whole.n = chunked.n = 0;
        a = run(data + 1, size - 1, 0, &whole);
        b = run(data + 1, size - 1, seed, &chunked);
        if (a != b || whole.n != chunked.n)
                abort();
        for (size_t i = 0; i < whole.n; i++)
                if (whole.lens[i] != chunked.lens[i] || whole.sums[i] != chunked.sums[i])
                        abort();
        return 0;
}
