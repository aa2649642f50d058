/*
 * test_http_loop.c - webhook/http_loop.h over plain HTTP on loopback, driven by raw sockets: the
 * framing a real client may use that tests/integration/webhook_server.py's http.client never does.
 *
 * Checked: a head and body sent one byte at a time; two requests pipelined in one write, answered
 * in order; a chunked body; Expect: 100-continue answered with 100 Continue before the answer;
 * HEAD without a body; HTTP/1.0 and Connection: close closing after the answer; heads the parser
 * refuses answered with their status and closed; an answer given at the head closing without
 * reading the body; a body the owner refuses closing unanswered; and, after the loop stops, one
 * on_done for every on_head and one on_close for every on_open; four connections dialled in turn
 * spread two to each worker. Two workers, so that the suite's ThreadSanitizer pass sees them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "webhook/http_loop.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct counts {
        atomic_int opened, closed, heads, done;
};

static struct counts counts;

struct req {
        char path[TSR_HTTP_TARGET_MAX];
        size_t body;
        unsigned long sum;
};

static void *on_open(void *ctx, int fd, const struct sockaddr *addr)
{
        (void)ctx;
        (void)fd;
        (void)addr;
        atomic_fetch_add(&counts.opened, 1);
        return &counts; /* any non-NULL state */
}

static void on_close(void *ctx, void *state)
{
        (void)ctx;
        assert_ptr_equal(state, &counts);
        atomic_fetch_add(&counts.closed, 1);
}

static bool on_head(void *ctx, struct tsr_http_conn *c, const struct tsr_http_request *r,
                    void **req_state)
{
        struct req *q = calloc(1, sizeof(*q));

        (void)ctx;
        assert_ptr_equal(tsr_http_conn_state(c), &counts);
        atomic_fetch_add(&counts.heads, 1);
        if (!q)
                return false;
        snprintf(q->path, sizeof(q->path), "%s", r->path);
        *req_state = q;
        /* /early answers at its head; /refuse takes no body. */
        if (!strcmp(r->path, "/early"))
                tsr_http_respond(c, 413, strdup("too big\n"), "text/plain", NULL, false);
        return true;
}

static bool on_body(void *ctx, struct tsr_http_conn *c, const char *data, size_t len,
                    void *req_state)
{
        struct req *q = req_state;

        (void)ctx;
        (void)c;
        if (!strcmp(q->path, "/refuse"))
                return false;
        for (size_t i = 0; i < len; i++)
                q->sum += (unsigned char)data[i];
        q->body += len;
        return true;
}

/* A number per worker thread, given on its first answer: which worker answered /worker. */
static atomic_int workers_seen;
static _Thread_local int worker_number;

static void on_complete(void *ctx, struct tsr_http_conn *c, const struct tsr_http_request *r,
                        void *req_state)
{
        struct req *q = req_state;
        size_t cap = TSR_HTTP_TARGET_MAX + 96;
        char *text = malloc(cap);

        (void)ctx;
        assert_non_null(text);
        if (!worker_number)
                worker_number = atomic_fetch_add(&workers_seen, 1) + 1;
        if (!strcmp(q->path, "/worker"))
                snprintf(text, cap, "worker %d\n", worker_number);
        else
                snprintf(text, cap, "%s %s %zu %lu\n", r->method, q->path, q->body, q->sum);
        tsr_http_respond(c, 200, text, "text/plain", !strcmp(q->path, "/allow") ? "GET" : NULL,
                         false);
}

static void on_done(void *ctx, struct tsr_http_conn *c, void *req_state)
{
        (void)ctx;
        (void)c;
        free(req_state);
        atomic_fetch_add(&counts.done, 1);
}

static void pause_us(long us)
{
        struct timespec ts = {0, us * 1000};

        nanosleep(&ts, NULL);
}

static struct tsr_http_loop *loop;
static unsigned port;

static int setup(void **state)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        struct tsr_http_loop_config cfg = {
            .n_listen = 1,
            .threads = 2,
            .cb = {NULL, NULL, on_open, on_close, on_head, on_body, on_complete, on_done, NULL},
        };
        struct tsr_diag diag;

        (void)state;
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(fd, 64), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        port = ntohs(a.sin_port);
        cfg.listen[0] = (struct tsr_http_listen){fd, NULL, NULL, NULL};
        assert_int_equal(tsr_http_loop_start(&cfg, &loop, &diag), 0);
        return 0;
}

static int dial(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
        while (n) {
                ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

                assert_true(k > 0);
                p += k;
                n -= (size_t)k;
        }
}

static void send_str(int fd, const char *s)
{
        send_all(fd, s, strlen(s));
}

/*
 * Reads until want bytes are in or the peer closes or 2 s pass; returns what came (NUL-ended,
 * static) and sets *closed when the peer closed.
 */
static const char *read_some(int fd, size_t want, bool *closed)
{
        static char buf[8192];
        size_t n = 0;

        *closed = false;
        while (n < want && n < sizeof(buf) - 1) {
                struct pollfd p = {fd, POLLIN, 0};
                ssize_t k;

                if (poll(&p, 1, 2000) != 1)
                        break;
                k = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);
                if (k <= 0) {
                        *closed = true;
                        break;
                }
                n += (size_t)k;
        }
        buf[n] = '\0';
        return buf;
}

/* One whole answer (after a 100 Continue, if one came first): its head and its body. */
static const char *read_answer(int fd, bool *closed)
{
        static char out[8192];
        size_t n = 0;

        *closed = false;
        out[0] = '\0';
        for (;;) {
                const char *fin = out, *end, *cl;
                struct pollfd p = {fd, POLLIN, 0};
                ssize_t k;

                if (!strncmp(fin, "HTTP/1.1 100 Continue\r\n\r\n", 25))
                        fin += 25;
                end = strstr(fin, "\r\n\r\n");
                cl = strstr(fin, "Content-Length: ");
                if (end && cl && cl < end &&
                    n - (size_t)(fin - out) >= (size_t)(end + 4 - fin) + strtoul(cl + 16, NULL, 10))
                        return out;
                if (poll(&p, 1, 2000) != 1)
                        return out;
                k = recv(fd, out + n, sizeof(out) - 1 - n, 0);
                if (k <= 0) {
                        *closed = true;
                        return out;
                }
                n += (size_t)k;
                out[n] = '\0';
        }
}

static bool peer_closes(int fd)
{
        bool closed;

        read_some(fd, 1, &closed);
        return closed;
}

static void test_http_loop__byte_by_byte_keep_alive(void **state)
{
        static const char req[] = "POST /a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
        int fd = dial();
        bool closed;

        (void)state;
        for (int round = 0; round < 2; round++) {
                for (size_t i = 0; i < sizeof(req) - 1; i++) {
                        send_all(fd, req + i, 1);
                        pause_us(200);
                }
                assert_non_null(strstr(read_answer(fd, &closed), "\r\n\r\nPOST /a 3 294\n"));
                assert_false(closed);
        }
        close(fd);
}

static void test_http_loop__pipelined_and_chunked(void **state)
{
        static const char two[] = "GET /one HTTP/1.1\r\nHost: h\r\n\r\n"
                                  "POST /two HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                                  "\r\n2\r\nab\r\n1;x=y\r\nc\r\n0\r\n\r\n";
        const char *got;
        int fd = dial();
        bool closed;

        (void)state;
        send_all(fd, two, sizeof(two) - 1);
        got = read_some(fd, 2 * 70, &closed);
        assert_non_null(strstr(got, "GET /one 0 0\n"));
        assert_non_null(strstr(got, "POST /two 3 294\n"));
        assert_true(strstr(got, "GET /one") < strstr(got, "POST /two"));
        close(fd);
}

static void test_http_loop__continue_head_and_allow(void **state)
{
        static const char ask[] = "POST /c HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                                  "Content-Length: 2\r\n\r\n";
        const char *got;
        int fd = dial();
        bool closed;

        (void)state;
        send_all(fd, ask, sizeof(ask) - 1);
        got = read_some(fd, 25, &closed);
        assert_string_equal(got, "HTTP/1.1 100 Continue\r\n\r\n");
        send_str(fd, "hi");
        assert_non_null(strstr(read_answer(fd, &closed), "POST /c 2 209\n"));
        send_str(fd, "HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n");
        got = read_some(fd, 4096, &closed); /* times out: no body follows the head */
        assert_non_null(strstr(got, "Content-Length: 12\r\n"));
        assert_true(strlen(strstr(got, "\r\n\r\n")) == 4);
        send_str(fd, "GET /allow HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_non_null(strstr(read_answer(fd, &closed), "\r\nAllow: GET\r\n"));
        assert_false(closed);
        close(fd);
}

static void test_http_loop__closing(void **state)
{
        const char *got;
        int fd;
        bool closed;

        (void)state;
        /* HTTP/1.0 without keep-alive, and Connection: close. */
        fd = dial();
        send_str(fd, "GET /z HTTP/1.0\r\n\r\n");
        got = read_answer(fd, &closed);
        assert_non_null(strstr(got, "Connection: close\r\n"));
        assert_true(closed || peer_closes(fd));
        close(fd);
        fd = dial();
        send_str(fd, "GET /z HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
        assert_non_null(strstr(read_answer(fd, &closed), "Connection: close\r\n"));
        assert_true(closed || peer_closes(fd));
        close(fd);
        /* Refused heads: the status, then the connection closes. */
        {
                static const struct {
                        const char *req, *status;
                } bad[] = {
                    {"GET /z HTTP/2.0\r\nHost: h\r\n\r\n", "HTTP/1.1 505 "},
                    {"GET /z HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
                    {"GET /z HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
                     "HTTP/1.1 501 "},
                    {"POST /z HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                     "HTTP/1.1 400 "},
                };

                for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                        fd = dial();
                        send_all(fd, bad[i].req, strlen(bad[i].req));
                        got = read_some(fd, 4096, &closed);
                        if (strncmp(got, bad[i].status, strlen(bad[i].status)) || !closed)
                                fail_msg("%s: got %s (closed %d)", bad[i].req, got, closed);
                        close(fd);
                }
        }
        /* A refused head after an answered request on the same connection. */
        fd = dial();
        send_str(fd, "GET /first HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_non_null(strstr(read_answer(fd, &closed), "GET /first 0 0\n"));
        send_str(fd, "GET /z HTTP/2.0\r\nHost: h\r\n\r\n");
        got = read_some(fd, 4096, &closed);
        assert_memory_equal(got, "HTTP/1.1 505 ", 13);
        assert_true(closed);
        close(fd);
        /* A head past the limit. */
        {
                char *big = malloc(TSR_HTTP_HEAD_MAX + 64);
                size_t n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: h\r\nX: ");

                memset(big + n, 'a', TSR_HTTP_HEAD_MAX);
                fd = dial();
                send_all(fd, big, n + TSR_HTTP_HEAD_MAX);
                got = read_some(fd, 4096, &closed);
                assert_memory_equal(got, "HTTP/1.1 431 ", 13);
                close(fd);
                free(big);
        }
        /* Answered at its head: the body is never read, the connection closes. */
        fd = dial();
        send_str(fd, "POST /early HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\nxx");
        got = read_some(fd, 4096, &closed);
        assert_memory_equal(got, "HTTP/1.1 413 ", 13);
        assert_non_null(strstr(got, "Connection: close\r\n"));
        assert_true(closed);
        close(fd);
        /* A body the owner refuses: closed, unanswered. */
        fd = dial();
        send_str(fd, "POST /refuse HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nabcde");
        got = read_some(fd, 4096, &closed);
        assert_string_equal(got, "");
        assert_true(closed);
        close(fd);
}

/*
 * Four connections dialled one after another while the workers are idle are spread two and two:
 * EPOLLEXCLUSIVE alone wakes the same idle worker for each of them.
 */
static void test_http_loop__connections_spread(void **state)
{
        int fd[4], per_worker[8] = {0};
        bool closed;

        (void)state;
        for (int i = 0; i < 200 && atomic_load(&counts.opened) != atomic_load(&counts.closed); i++)
                pause_us(10 * 1000); /* the earlier tests' connections close first */
        assert_int_equal(atomic_load(&counts.opened), atomic_load(&counts.closed));
        for (int i = 0; i < 4; i++) {
                const char *answer, *tag;
                int n;

                fd[i] = dial();
                send_str(fd[i], "GET /worker HTTP/1.1\r\nHost: h\r\n\r\n");
                answer = read_answer(fd[i], &closed);
                tag = strstr(answer, "\r\n\r\nworker ");
                assert_non_null(tag);
                n = atoi(tag + 11);
                assert_true(n >= 1 && n < 8);
                per_worker[n]++;
        }
        for (int n = 1; n < 8; n++)
                assert_true(per_worker[n] == 0 || per_worker[n] == 2);
        for (int i = 0; i < 4; i++)
                close(fd[i]);
}

static int teardown(void **state)
{
        int fd = dial(); /* left open: the stop closes it */

        (void)state;
        send_str(fd, "GET /half");
        pause_us(50 * 1000);
        tsr_http_loop_stop(loop);
        close(fd);
        assert_int_equal(atomic_load(&counts.heads), atomic_load(&counts.done));
        assert_int_equal(atomic_load(&counts.opened), atomic_load(&counts.closed));
        assert_true(atomic_load(&counts.opened) >= 12);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_http_loop__byte_by_byte_keep_alive),
            cmocka_unit_test(test_http_loop__pipelined_and_chunked),
            cmocka_unit_test(test_http_loop__continue_head_and_allow),
            cmocka_unit_test(test_http_loop__closing),
            cmocka_unit_test(test_http_loop__connections_spread),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
