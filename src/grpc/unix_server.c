/*
 * unix_server.c - the gRPC unix-socket listener (see unix_server.h): an accept thread and one
 * thread per connection, each polling its socket, its eventfd wakeup and the server's stop pipe.
 *
 * Invariants: the stop pipe is written once and never drained, so every thread sees it; a
 * connection's eventfd is closed only after its tsr_grpc_server_conn is freed, which marks every
 * stream ended under the stream's mutex, so no push can ring a closed eventfd. Connection records
 * are linked under the server mutex and joined by the accept thread (finished ones) or by stop.
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "grpc/unix_server.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/timespec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SHUTDOWN_GRACE_MS 1000

struct conn {
        struct tsr_grpc_unix_server *server;
        struct conn *next;
        pthread_t thread;
        int fd;
        int wake_fd;
        atomic_bool finished;
};

struct tsr_grpc_unix_server {
        char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
        const struct tsr_grpc_service_table *table;
        void *user;
        int listen_fd;
        int stop_pipe[2];
        pthread_t accept_thread;
        pthread_mutex_t mu;
        struct conn *conns; /* guarded by mu */
};

static void ring(void *ctx)
{
        struct conn *c = ctx;
        uint64_t one = 1;

        /* EAGAIN means the counter is already non-zero: the thread will wake anyway. */
        if (write(c->wake_fd, &one, sizeof(one)) < 0)
                return;
}

/* Writes what it can of out without blocking; drops what was written. Returns -1 on error. */
static int flush_some(int fd, struct tsr_buf *out)
{
        while (out->len) {
                ssize_t n = send(fd, out->ptr, out->len, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
                memmove(out->ptr, out->ptr + n, out->len - (size_t)n);
                out->len -= (size_t)n;
                out->ptr[out->len] = '\0';
        }
        return 0;
}

/*
 * The server is stopping and has written everything, the GOAWAY and every stream's trailers
 * included. Closing now could drop the peer's last frames (a WINDOW_UPDATE, a PING ack) unread,
 * and its next write would fail with EPIPE, which a client may see before it reads the trailers
 * already sent. So the write side is shut first and the peer's bytes are read and dropped until
 * it closes its end, or until the stop's grace deadline.
 */
static void linger_close(int fd, long long deadline)
{
        uint8_t sink[4096];

        if (shutdown(fd, SHUT_WR) != 0)
                return;
        for (;;) {
                struct pollfd p = {fd, POLLIN, 0};
                int timeout = (int)(deadline - tsr_monotonic_ms());
                ssize_t n;

                if (timeout <= 0)
                        return;
                if (poll(&p, 1, timeout) < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                        return;
        }
}

static void serve(struct conn *c, struct tsr_grpc_server_conn *h)
{
        struct tsr_buf out = TSR_BUF_INIT;
        uint8_t in[16384];
        bool stopping = false;
        long long deadline = 0;

        for (;;) {
                struct pollfd p[3] = {{c->fd, POLLIN, 0},
                                      {c->wake_fd, POLLIN, 0},
                                      {c->server->stop_pipe[0], POLLIN, 0}};
                int timeout = -1;

                if (tsr_grpc_server_conn_output(h, &out) || flush_some(c->fd, &out))
                        break;
                if (!tsr_grpc_server_conn_alive(h) && out.len == 0) {
                        if (!stopping)
                                break;
                        linger_close(c->fd, deadline);
                        break;
                }
                if (out.len)
                        p[0].events |= POLLOUT;
                if (stopping) {
                        timeout = (int)(deadline - tsr_monotonic_ms());
                        if (timeout <= 0)
                                break;
                }
                if (poll(p, stopping ? 2 : 3, timeout) < 0 && errno != EINTR)
                        break;
                if (p[1].revents & POLLIN) {
                        uint64_t v;

                        if (read(c->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                                break;
                }
                if (!stopping && (p[2].revents & POLLIN)) {
                        stopping = true;
                        deadline = tsr_monotonic_ms() + SHUTDOWN_GRACE_MS;
                        tsr_grpc_server_conn_shutdown(h);
                }
                if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t n = recv(c->fd, in, sizeof(in), MSG_DONTWAIT);

                        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                                break;
                        if (n > 0 && tsr_grpc_server_conn_feed(h, in, (size_t)n, NULL)) {
                                /* Say GOAWAY if nghttp2 queued one, then close. */
                                if (!tsr_grpc_server_conn_output(h, &out))
                                        flush_some(c->fd, &out);
                                break;
                        }
                }
        }
        tsr_buf_release(&out);
}

static void *conn_main(void *arg)
{
        struct conn *c = arg;
        struct tsr_grpc_server_conn *h;

        if (tsr_grpc_server_conn_new(c->server->table, c->server->user, &h) == 0) {
                tsr_grpc_server_conn_set_wakeup(h, ring, c);
                serve(c, h);
                tsr_grpc_server_conn_free(h);
        }
        close(c->wake_fd);
        close(c->fd);
        atomic_store(&c->finished, true);
        return NULL;
}

/* Joins and frees finished connections (all of them when all is set). */
static void reap(struct tsr_grpc_unix_server *s, bool all)
{
        struct conn **pp, *done = NULL;

        pthread_mutex_lock(&s->mu);
        pp = &s->conns;
        while (*pp) {
                struct conn *c = *pp;

                if (all || atomic_load(&c->finished)) {
                        *pp = c->next;
                        c->next = done;
                        done = c;
                } else {
                        pp = &c->next;
                }
        }
        pthread_mutex_unlock(&s->mu);
        while (done) {
                struct conn *c = done;

                done = c->next;
                pthread_join(c->thread, NULL);
                free(c);
        }
}

static void accept_one(struct tsr_grpc_unix_server *s)
{
        struct conn *c;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0)
                return;
        c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return;
        }
        c->server = s;
        c->fd = fd;
        atomic_init(&c->finished, false);
        c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->wake_fd < 0) {
                close(fd);
                free(c);
                return;
        }
        pthread_mutex_lock(&s->mu);
        if (pthread_create(&c->thread, NULL, conn_main, c)) {
                pthread_mutex_unlock(&s->mu);
                close(c->wake_fd);
                close(fd);
                free(c);
                return;
        }
        c->next = s->conns;
        s->conns = c;
        pthread_mutex_unlock(&s->mu);
}

static void *accept_main(void *arg)
{
        struct tsr_grpc_unix_server *s = arg;

        for (;;) {
                struct pollfd p[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};

                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
                if (p[0].revents & POLLIN)
                        accept_one(s);
                reap(s, false);
        }
        return NULL;
}

int tsr_grpc_unix_server_start(const char *path, const struct tsr_grpc_service_table *table,
                               void *user, struct tsr_grpc_unix_server **out, struct tsr_diag *diag)
{
        struct tsr_grpc_unix_server *s;
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        struct stat st;
        int rc;

        if (strlen(path) >= sizeof(addr.sun_path))
                return tsr_diag_set(diag, TSR_EINVAL, "socket path too long: %s", path);
        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode))
                        return tsr_diag_set(diag, TSR_EEXIST, "%s exists and is not a socket",
                                            path);
                unlink(path);
        }
        s = calloc(1, sizeof(*s));
        if (!s)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        strcpy(s->path, path);
        strcpy(addr.sun_path, path);
        s->table = table;
        s->user = user;
        s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s->listen_fd < 0) {
                rc = tsr_diag_set(diag, TSR_EIO, "socket: %s", strerror(errno));
                goto fail_server;
        }
        if (bind(s->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) ||
            listen(s->listen_fd, 64)) {
                rc = tsr_diag_set(diag, TSR_EIO, "listen on %s: %s", path, strerror(errno));
                goto fail_socket;
        }
        if (pipe2(s->stop_pipe, O_CLOEXEC | O_NONBLOCK)) {
                rc = tsr_diag_set(diag, TSR_EIO, "pipe: %s", strerror(errno));
                goto fail_bound;
        }
        pthread_mutex_init(&s->mu, NULL);
        if (pthread_create(&s->accept_thread, NULL, accept_main, s)) {
                rc = tsr_diag_set(diag, TSR_EIO, "cannot start the accept thread");
                goto fail_pipe;
        }
        *out = s;
        return 0;

fail_pipe:
        pthread_mutex_destroy(&s->mu);
        close(s->stop_pipe[0]);
        close(s->stop_pipe[1]);
fail_bound:
        unlink(path);
fail_socket:
        close(s->listen_fd);
fail_server:
        free(s);
        return rc;
}

void tsr_grpc_unix_server_stop(struct tsr_grpc_unix_server *s)
{
        if (!s)
                return;
        if (write(s->stop_pipe[1], "x", 1) < 0)
                abort(); /* a fresh non-blocking pipe always takes one byte */
        pthread_join(s->accept_thread, NULL);
        close(s->listen_fd);
        unlink(s->path);
        reap(s, true);
        pthread_mutex_destroy(&s->mu);
        close(s->stop_pipe[0]);
        close(s->stop_pipe[1]);
        free(s);
}
