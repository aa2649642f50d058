/*
 * fuzz_grpc_server.c - arbitrary bytes from a client into a gRPC server connection. The first
 * byte seeds the chunk sizes; the rest is fed in chunks, with the output drained after each, to
 * a table with a unary echo and a streaming method that pushes, finishes or keeps the stream
 * (decided by the request's first byte). The connection must never crash or leak, whatever the
 * bytes, and a stream's closed callback must run exactly once per stream. Seeds: byte streams of
 * python3-grpcio clients captured on a unix socket (fuzz/corpus/grpc_server/grpcio_*).
 */
#include "base/err.h"
#include "grpc/server.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct counts {
        size_t streams;
        size_t closed;
};

static int echo(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                struct tsr_grpc_status *st)
{
        (void)user;
        if (len && req[0] == 'E')
                tsr_grpc_status_set(st, TSR_GRPC_NOT_FOUND, "%.*s", (int)len, (const char *)req);
        return tsr_buf_add(resp, req, len);
}

static int watch(void *user, struct tsr_grpc_stream *stream, const uint8_t *req, size_t len,
                 struct tsr_grpc_status *st)
{
        struct counts *c = user;
        struct tsr_grpc_status ok = {TSR_GRPC_OK, ""};

        c->streams++;
        if (tsr_grpc_stream_push(stream, req, len))
                abort();
        if (len && req[0] == 'F')
                tsr_grpc_stream_finish(stream, &ok);
        else if (len && req[0] == 'X')
                tsr_grpc_status_set(st, TSR_GRPC_ABORTED, "x");
        return 0;
}

static void closed(void *user, struct tsr_grpc_stream *stream, enum tsr_grpc_stream_end why)
{
        struct counts *c = user;

        (void)stream;
        if (why > TSR_GRPC_END_CONN_LOST)
                abort();
        c->closed++;
}

static const struct tsr_grpc_method methods[] = {
    {"/v1beta1.DevicePlugin/GetDevicePluginOptions", echo, NULL},
    {"/v1beta1.DevicePlugin/Allocate", echo, NULL},
    {"/v1beta1.DevicePlugin/ListAndWatch", NULL, watch},
};
static const struct tsr_grpc_service_table table = {methods, 3, closed, 65536};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct counts c = {0, 0};
        struct tsr_grpc_server_conn *conn;
        struct tsr_buf out = TSR_BUF_INIT;
        unsigned seed;
        size_t off = 0;

        if (size < 1 || size > 262144)
                return 0;
        seed = data[0];
        data++;
        size--;
        if (tsr_grpc_server_conn_new(&table, &c, &conn))
                abort();
        while (off < size) {
                size_t n = seed ? 1 + (seed * 31 + off) % 97 : size;

                if (n > size - off)
                        n = size - off;
                if (tsr_grpc_server_conn_feed(conn, data + off, n, NULL))
                        break;
                off += n;
                tsr_buf_reset(&out);
                if (tsr_grpc_server_conn_output(conn, &out))
                        break;
        }
        tsr_grpc_server_conn_shutdown(conn);
        tsr_buf_reset(&out);
        tsr_grpc_server_conn_output(conn, &out);
        tsr_grpc_server_conn_free(conn);
        tsr_buf_release(&out);
        if (c.closed != c.streams)
                abort();
        return 0;
}
