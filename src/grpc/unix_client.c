/*
 * unix_client.c - blocking gRPC calls over a unix socket (see unix_client.h): one connection per
 * call, driven by poll on the caller's thread until the call is done or the time is up.
 *
 * A streaming call's messages are kept framed, in arrival order, in one buffer (queue) from which
 * next() takes them; the framing is the gRPC one, so the queue needs no other structure.
 */
#include "grpc/unix_client.h"

#include "base/err.h"
#include "base/timespec.h"
#include "grpc/client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct tsr_grpc_unix_stream {
        int fd;
        struct tsr_grpc_client_conn *conn;
        struct tsr_grpc_call *call;
        struct tsr_buf out;   /* bytes not yet written */
        struct tsr_buf queue; /* framed messages not yet taken */
        size_t queue_off;
        int err; /* TSR_ENOMEM met while queueing */
};

static int dial(const char *path)
{
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        int fd;

        if (strlen(path) >= sizeof(addr.sun_path))
                return -1;
        strcpy(addr.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -1;
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
                close(fd);
                return -1;
        }
        return fd;
}

/*
 * Drives the connection until the call is done, or stop_on_message and a message is queued, or
 * the deadline (< 0: none) passes. Socket errors end the call with UNAVAILABLE.
 */
static void drive(struct tsr_grpc_unix_stream *s, long long deadline, bool stop_on_message)
{
        uint8_t in[16384];

        while (!tsr_grpc_call_done(s->call) && !(stop_on_message && s->queue_off < s->queue.len)) {
                struct pollfd p = {s->fd, POLLIN, 0};
                int timeout = -1;
                ssize_t n;

                if (tsr_grpc_client_conn_output(s->conn, &s->out)) {
                        tsr_grpc_client_conn_fail(s->conn, TSR_GRPC_INTERNAL, "HTTP/2 failure");
                        return;
                }
                while (s->out.len) {
                        n = send(s->fd, s->out.ptr, s->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (n < 0) {
                                if (errno == EAGAIN || errno == EINTR)
                                        break;
                                tsr_grpc_client_conn_fail(s->conn, TSR_GRPC_UNAVAILABLE,
                                                          "connection lost while sending");
                                return;
                        }
                        memmove(s->out.ptr, s->out.ptr + n, s->out.len - (size_t)n);
                        s->out.len -= (size_t)n;
                }
                if (s->out.len)
                        p.events |= POLLOUT;
                if (deadline >= 0) {
                        timeout = (int)(deadline - tsr_monotonic_ms());
                        if (timeout <= 0)
                                return;
                }
                if (poll(&p, 1, timeout) < 0 && errno != EINTR)
                        return;
                if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                n = recv(s->fd, in, sizeof(in), MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                        tsr_grpc_client_conn_fail(s->conn, TSR_GRPC_UNAVAILABLE,
                                                  "connection closed by the server");
                        return;
                }
                if (n > 0)
                        tsr_grpc_client_conn_feed(s->conn, in, (size_t)n, NULL);
        }
}

static int enqueue(void *ctx, const uint8_t *msg, size_t len)
{
        struct tsr_grpc_unix_stream *s = ctx;

        s->err = tsr_grpc_message_frame(&s->queue, msg, len);
        return s->err ? 1 : 0;
}

static void stream_free(struct tsr_grpc_unix_stream *s)
{
        tsr_grpc_call_free(s->call);
        if (s->conn) {
                /* Best effort: let the server see the RST_STREAM. */
                if (!tsr_grpc_client_conn_output(s->conn, &s->out) && s->out.len &&
                    send(s->fd, s->out.ptr, s->out.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                        s->out.len = 0;
                tsr_grpc_client_conn_free(s->conn);
        }
        if (s->fd >= 0)
                close(s->fd);
        tsr_buf_release(&s->out);
        tsr_buf_release(&s->queue);
        free(s);
}

static int open_call(const char *socket_path, const char *method, const uint8_t *req, size_t len,
                     int timeout_ms, bool streaming, struct tsr_grpc_unix_stream **out,
                     struct tsr_grpc_status *st)
{
        struct tsr_grpc_unix_stream *s = calloc(1, sizeof(*s));
        int rc;

        if (!s)
                return TSR_ENOMEM;
        tsr_buf_init(&s->out);
        tsr_buf_init(&s->queue);
        s->fd = dial(socket_path);
        if (s->fd < 0) {
                tsr_grpc_status_set(st, TSR_GRPC_UNAVAILABLE, "cannot connect to %s: %s",
                                    socket_path, strerror(errno));
                stream_free(s);
                return TSR_EIO;
        }
        rc = tsr_grpc_client_conn_new(0, &s->conn);
        if (!rc)
                rc = tsr_grpc_client_call_start(s->conn, method, req, len,
                                                timeout_ms > 0 ? (uint64_t)timeout_ms : 0,
                                                streaming ? enqueue : NULL, s, &s->call);
        if (rc) {
                stream_free(s);
                return rc;
        }
        *out = s;
        return 0;
}

int tsr_grpc_unix_call(const char *socket_path, const char *method, const uint8_t *req, size_t len,
                       int timeout_ms, struct tsr_buf *resp, struct tsr_grpc_status *st)
{
        struct tsr_grpc_unix_stream *s;
        int rc = open_call(socket_path, method, req, len, timeout_ms, false, &s, st);

        if (rc == TSR_EIO)
                return 0;
        if (rc)
                return rc;
        drive(s, timeout_ms > 0 ? tsr_monotonic_ms() + timeout_ms : -1, false);
        if (!tsr_grpc_call_done(s->call))
                tsr_grpc_call_cancel(s->call, TSR_GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
        *st = *tsr_grpc_call_status(s->call);
        if (st->code == TSR_GRPC_OK) {
                const struct tsr_buf *r = tsr_grpc_call_response(s->call);

                rc = tsr_buf_add(resp, r->ptr, r->len);
        }
        stream_free(s);
        return rc;
}

int tsr_grpc_unix_stream_open(const char *socket_path, const char *method, const uint8_t *req,
                              size_t len, struct tsr_grpc_unix_stream **out,
                              struct tsr_grpc_status *st)
{
        return open_call(socket_path, method, req, len, 0, true, out, st);
}

int tsr_grpc_unix_stream_next(struct tsr_grpc_unix_stream *s, int timeout_ms, struct tsr_buf *msg,
                              struct tsr_grpc_status *st)
{
        if (s->queue_off == s->queue.len)
                drive(s, timeout_ms >= 0 ? tsr_monotonic_ms() + timeout_ms : -1, true);
        if (s->err)
                return s->err;
        if (s->queue_off < s->queue.len) {
                const uint8_t *p = (const uint8_t *)s->queue.ptr + s->queue_off;
                size_t len = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
                int rc;

                tsr_buf_reset(msg);
                rc = tsr_buf_add(msg, p + TSR_GRPC_PREFIX_LEN, len);
                if (rc)
                        return rc;
                s->queue_off += TSR_GRPC_PREFIX_LEN + len;
                if (s->queue_off == s->queue.len) {
                        tsr_buf_reset(&s->queue);
                        s->queue_off = 0;
                }
                return TSR_GRPC_UNIX_MESSAGE;
        }
        if (!tsr_grpc_call_done(s->call))
                return TSR_GRPC_UNIX_TIMEOUT;
        *st = *tsr_grpc_call_status(s->call);
        return TSR_GRPC_UNIX_END;
}

void tsr_grpc_unix_stream_close(struct tsr_grpc_unix_stream *s)
{
        if (s)
                stream_free(s);
}
