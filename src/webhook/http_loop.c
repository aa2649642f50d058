/*
 * http_loop.c - see http_loop.h. Each worker owns an epoll set holding every listening socket
 * (EPOLLEXCLUSIVE), its eventfd (stop, or connections handed to it) and its connections; a
 * connection runs as a small state machine (handshake, read, write) driven until it would block,
 * and waits level-triggered for the one direction it needs.
 *
 * Invariants: a connection's receive buffer holds bytes not yet framed (a head, the start of a
 * body, a pipelined request); body bytes are handed to the owner and dropped from it as they are
 * framed. GnuTLS may hold decrypted bytes epoll cannot see, so a connection reads until GnuTLS
 * says EAGAIN before it waits. An answer is one malloc'd buffer written from out_off.
 */
#define _GNU_SOURCE /* accept4 */
#include "webhook/http_loop.h"

#include "base/diag.h"
#include "base/err.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define EVENTS_MAX 64
/*
 * Connections accepted per listener event: few, so that a flood of new connections, each of
 * which may evict an older one (conn_guard.h), cannot outrun the closing of those it evicted.
 */
#define ACCEPT_BATCH 8

enum source_kind { SRC_WAKE, SRC_LISTEN, SRC_CONN };

/* What an epoll event points at: the first member of each kind of source. */
struct source {
        enum source_kind kind;
        size_t index; /* a listener's index */
};

enum phase { PH_HANDSHAKE, PH_READ, PH_WRITE };

/* A connection accepted by one worker for another to open (accept_some balances the workers). */
struct handoff {
        struct handoff *next;
        int fd;
        size_t li;
        void *state; /* on_open's, given on the accepting worker */
};

struct worker {
        struct tsr_http_loop *loop;
        pthread_t thread;
        bool started;
        int epfd;
        int wake_fd; /* written by the stop, and by a worker that hands a connection over */
        struct source wake;
        struct tsr_http_conn *conns; /* every connection this worker owns */
        /* Connections it owns or was handed and has not opened yet: what balancing compares. */
        atomic_uint load;
        pthread_mutex_t handoff_mu;
        struct handoff *handoff_head, *handoff_tail; /* under handoff_mu */
};

struct listener {
        struct tsr_http_listen cfg;
        struct source src;
        gnutls_priority_t prio;
        atomic_uint open;
};

struct tsr_http_loop {
        struct tsr_http_callbacks cb;
        struct listener listen[TSR_HTTP_LISTEN_MAX];
        size_t n_listen;
        struct worker *workers;
        unsigned n_workers;
        atomic_bool stopping;
};

struct tsr_http_conn {
        struct source src;
        struct worker *w;
        struct listener *l;
        struct tsr_http_conn *prev, *next;
        int fd;
        gnutls_session_t tls; /* NULL: plain HTTP */
        void *state;          /* the owner's, from on_open */
        enum phase phase;
        uint32_t events; /* the epoll interest set now */
        /* The request in progress. */
        bool in_request; /* on_head was called and on_done is owed */
        bool answered;
        bool body_done;
        bool close_after;
        bool interim; /* out holds a 100 Continue, not the answer */
        bool at_head; /* inside on_head: an answer now closes the connection */
        void *req_state;
        unsigned long long body_left;
        struct tsr_http_chunked chunked;
        struct tsr_http_request req;
        /* What is being written: the answer (owned) or the 100 Continue line. */
        char *answer;
        const char *out;
        size_t out_len, out_off;
        /* Received bytes not framed yet. */
        size_t in_len;
        char in[TSR_HTTP_HEAD_MAX];
};

static const char CONTINUE[] = "HTTP/1.1 100 Continue\r\n\r\n";

static void want(struct tsr_http_conn *c, uint32_t events)
{
        struct epoll_event ev = {.events = events, .data.ptr = &c->src};

        if (c->events == events)
                return;
        if (epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
                c->events = events;
}

static void conn_close(struct tsr_http_conn *c)
{
        const struct tsr_http_callbacks *cb = &c->w->loop->cb;

        if (c->in_request && cb->on_done)
                cb->on_done(c->l->cfg.ctx, c, c->req_state);
        if (c->state && cb->on_close)
                cb->on_close(c->l->cfg.ctx, c->state);
        if (c->tls)
                gnutls_deinit(c->tls);
        close(c->fd);
        if (c->prev)
                c->prev->next = c->next;
        else
                c->w->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        free(c->answer);
        atomic_fetch_sub(&c->l->open, 1);
        atomic_fetch_sub(&c->w->load, 1);
        free(c);
}

/* ---- answers ----------------------------------------------------------------------------- */

void tsr_http_respond(struct tsr_http_conn *c, unsigned status, char *body,
                      const char *content_type, const char *allow, bool close)
{
        size_t body_len = body ? strlen(body) : 0, cap, n;
        bool head = !strcmp(c->req.method, "HEAD");
        char *out;
        int k;

        if (c->answered) {
                free(body);
                return;
        }
        c->close_after = close || !c->req.keep_alive || c->at_head;
        cap = 256 + strlen(content_type) + (allow ? strlen(allow) : 0) + body_len;
        out = malloc(cap);
        if (!out) {
                free(body);
                c->answered = true;
                c->close_after = true;
                c->out = NULL;
                c->out_len = c->out_off = 0;
                return;
        }
        k = snprintf(
            out, cap, "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s%s\r\n",
            status, tsr_http_reason(status), content_type, body_len, allow ? "Allow: " : "",
            allow ? allow : "", allow ? "\r\n" : "", c->close_after ? "Connection: close\r\n" : "");
        n = k < 0 ? 0 : (size_t)k;
        if (!head && body_len && n + body_len < cap) {
                memcpy(out + n, body, body_len);
                n += body_len;
        }
        free(body);
        c->answered = true;
        c->answer = out;
        c->out = out;
        c->out_len = n;
        c->out_off = 0;
}

void *tsr_http_conn_state(const struct tsr_http_conn *c)
{
        return c->state;
}

/* The loop's own answer to a head it refused: the reason as text, then the connection closes. */
static void refuse_head(struct tsr_http_conn *c)
{
        char *text = malloc(strlen(c->req.why) + 2);

        if (text)
                sprintf(text, "%s\n", c->req.why);
        tsr_http_respond(c, c->req.status, text, "text/plain; charset=utf-8", NULL, true);
}

/* ---- transport --------------------------------------------------------------------------- */

enum io { IO_OK, IO_AGAIN, IO_GONE };

/* Reads what is there into the receive buffer. */
static enum io receive(struct tsr_http_conn *c)
{
        size_t room = sizeof(c->in) - c->in_len;
        ssize_t n;

        if (!room)
                return IO_OK;
        if (c->tls) {
                do
                        n = gnutls_record_recv(c->tls, c->in + c->in_len, room);
                while (n == GNUTLS_E_INTERRUPTED);
                if (n == GNUTLS_E_AGAIN)
                        return IO_AGAIN;
        } else {
                do
                        n = recv(c->fd, c->in + c->in_len, room, 0);
                while (n < 0 && errno == EINTR);
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return IO_AGAIN;
        }
        if (n <= 0)
                return IO_GONE;
        c->in_len += (size_t)n;
        return IO_OK;
}

/* Writes out from out_off on. */
static enum io flush(struct tsr_http_conn *c)
{
        while (c->out_off < c->out_len) {
                const char *p = c->out + c->out_off;
                size_t left = c->out_len - c->out_off;
                ssize_t n;

                if (c->tls) {
                        do
                                n = gnutls_record_send(c->tls, p, left);
                        while (n == GNUTLS_E_INTERRUPTED);
                        if (n == GNUTLS_E_AGAIN)
                                return IO_AGAIN;
                } else {
                        do
                                n = send(c->fd, p, left, MSG_NOSIGNAL);
                        while (n < 0 && errno == EINTR);
                        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                                return IO_AGAIN;
                }
                if (n <= 0)
                        return IO_GONE;
                c->out_off += (size_t)n;
        }
        return IO_OK;
}

static void consume(struct tsr_http_conn *c, size_t n)
{
        memmove(c->in, c->in + n, c->in_len - n);
        c->in_len -= n;
}

/* ---- framing ----------------------------------------------------------------------------- */

enum step { ST_MORE, ST_ANSWER, ST_CLOSE };

/* A head is read: the owner's first look, and the body's framing. */
static enum step begin_request(struct tsr_http_conn *c)
{
        const struct tsr_http_callbacks *cb = &c->w->loop->cb;
        enum tsr_http_parse rc = tsr_http_request_parse(c->in, c->in_len, &c->req);

        if (rc == TSR_HTTP_INCOMPLETE)
                return ST_MORE;
        if (rc == TSR_HTTP_REFUSED) {
                refuse_head(c);
                return ST_ANSWER;
        }
        consume(c, c->req.head_len);
        c->in_request = true;
        c->answered = false;
        c->req_state = NULL;
        c->body_left = c->req.has_length ? c->req.content_length : 0;
        c->body_done = !c->req.chunked && !c->body_left;
        memset(&c->chunked, 0, sizeof(c->chunked));
        c->at_head = true;
        if (!cb->on_head(c->l->cfg.ctx, c, &c->req, &c->req_state)) {
                c->at_head = false;
                return ST_CLOSE;
        }
        c->at_head = false;
        if (c->answered)
                return ST_ANSWER; /* and closes: its body is never read */
        if (c->req.expect_continue && !c->body_done) {
                c->interim = true;
                c->out = CONTINUE;
                c->out_len = sizeof(CONTINUE) - 1;
                c->out_off = 0;
                return ST_ANSWER;
        }
        return ST_MORE;
}

/* Hands the framed body bytes in the buffer to the owner. */
static enum step read_body(struct tsr_http_conn *c)
{
        const struct tsr_http_callbacks *cb = &c->w->loop->cb;

        while (!c->body_done && c->in_len) {
                size_t used, off = 0, len;

                if (!c->req.chunked) {
                        len = c->in_len < c->body_left ? c->in_len : (size_t)c->body_left;
                        used = len;
                        c->body_left -= len;
                        c->body_done = !c->body_left;
                } else {
                        enum tsr_http_parse rc =
                            tsr_http_chunked_step(&c->chunked, c->in, c->in_len, &used, &off, &len);

                        if (rc == TSR_HTTP_REFUSED) {
                                c->req.status = 400;
                                c->req.why = "a malformed chunked body";
                                refuse_head(c);
                                return ST_ANSWER;
                        }
                        c->body_done = rc == TSR_HTTP_DONE;
                }
                if (len && !cb->on_body(c->l->cfg.ctx, c, c->in + off, len, c->req_state))
                        return ST_CLOSE;
                consume(c, used);
        }
        if (!c->body_done)
                return ST_MORE;
        cb->on_complete(c->l->cfg.ctx, c, &c->req, c->req_state);
        if (!c->answered)
                tsr_http_respond(c, 500, NULL, "text/plain; charset=utf-8", NULL, true);
        return ST_ANSWER;
}

/* What the buffer holds now: a request to begin, body to hand on, or nothing yet. */
static enum step frame(struct tsr_http_conn *c)
{
        if (!c->in_request) {
                enum step s;

                if (!c->in_len)
                        return ST_MORE;
                s = begin_request(c);
                if (s != ST_MORE || !c->in_request) /* answered, or the head is incomplete */
                        return s;
        }
        return read_body(c);
}

/* ---- the state machine ------------------------------------------------------------------- */

static bool handshake(struct tsr_http_conn *c)
{
        int rc;

        do
                rc = gnutls_handshake(c->tls);
        while (rc < 0 && !gnutls_error_is_fatal(rc) && rc != GNUTLS_E_AGAIN);
        if (rc == GNUTLS_E_AGAIN) {
                want(c, gnutls_record_get_direction(c->tls) ? EPOLLOUT : EPOLLIN);
                return false;
        }
        if (rc < 0) {
                if (c->w->loop->cb.on_error)
                        c->w->loop->cb.on_error(c->l->cfg.ctx, "TLS handshake failed",
                                                gnutls_strerror(rc));
                conn_close(c);
                return false;
        }
        c->phase = PH_READ;
        return true;
}

/* The answer is out: the request is done, and the connection closes or reads the next. */
static bool answer_sent(struct tsr_http_conn *c)
{
        const struct tsr_http_callbacks *cb = &c->w->loop->cb;

        if (c->interim) {
                c->interim = false;
                c->out = NULL;
                c->phase = PH_READ;
                return true;
        }
        free(c->answer);
        c->answer = NULL;
        c->out = NULL;
        c->answered = false; /* the next head, refused or not, is answered afresh */
        if (c->in_request) {
                c->in_request = false;
                if (cb->on_done)
                        cb->on_done(c->l->cfg.ctx, c, c->req_state);
        }
        if (c->close_after || !c->out_len) {
                conn_close(c);
                return false;
        }
        c->phase = PH_READ;
        return true;
}

/* Drives c until it would block (it waits for that) or closes. */
static void conn_run(struct tsr_http_conn *c)
{
        for (;;) {
                switch (c->phase) {
                case PH_HANDSHAKE:
                        if (!handshake(c))
                                return;
                        break;
                case PH_WRITE: {
                        enum io io = flush(c);

                        if (io == IO_AGAIN) {
                                want(c, EPOLLOUT);
                                return;
                        }
                        if (io == IO_GONE) {
                                conn_close(c);
                                return;
                        }
                        if (!answer_sent(c))
                                return;
                        /*
                         * One request per turn: the next waits for epoll unless it is already
                         * read (bytes epoll cannot see), so a client that answers back at once
                         * cannot keep the worker from its other connections.
                         */
                        if (!c->in_len && !(c->tls && gnutls_record_check_pending(c->tls))) {
                                want(c, EPOLLIN);
                                return;
                        }
                        break;
                }
                case PH_READ: {
                        enum step s = frame(c);
                        enum io io;

                        if (s == ST_CLOSE) {
                                conn_close(c);
                                return;
                        }
                        if (s == ST_ANSWER) {
                                c->phase = PH_WRITE;
                                break;
                        }
                        io = receive(c);
                        if (io == IO_AGAIN) {
                                want(c, EPOLLIN);
                                return;
                        }
                        if (io == IO_GONE) {
                                conn_close(c);
                                return;
                        }
                        break;
                }
                }
        }
}

/* ---- accepting --------------------------------------------------------------------------- */

/*
 * Opens a connection on w with the state on_open gave it; w's load already counts it (place()
 * counted it).
 */
static void conn_open(struct worker *w, size_t li, int fd, void *state)
{
        struct tsr_http_loop *loop = w->loop;
        struct listener *l = &loop->listen[li];
        struct tsr_http_conn *c;
        struct epoll_event ev;
        int one = 1;

        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = malloc(sizeof(*c));
        if (!c)
                goto fail;
        memset(c, 0, offsetof(struct tsr_http_conn, in));
        c->src.kind = SRC_CONN;
        c->w = w;
        c->l = l;
        c->fd = fd;
        c->state = state;
        c->phase = l->cfg.cred ? PH_HANDSHAKE : PH_READ;
        if (l->cfg.cred) {
                static const gnutls_datum_t http11 = {(unsigned char *)"http/1.1", 8};

                if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL) < 0) {
                        c->tls = NULL;
                        goto fail;
                }
                if (gnutls_priority_set(c->tls, l->prio) < 0 ||
                    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, l->cfg.cred) < 0 ||
                    gnutls_alpn_set_protocols(c->tls, &http11, 1, 0) < 0)
                        goto fail;
                gnutls_transport_set_int(c->tls, fd);
        }
        c->events = EPOLLIN;
        ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &c->src};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev))
                goto fail;
        c->next = w->conns;
        if (w->conns)
                w->conns->prev = c;
        w->conns = c;
        atomic_fetch_add(&l->open, 1);
        conn_run(c);
        return;
fail:
        if (c && c->tls)
                gnutls_deinit(c->tls);
        free(c);
        if (state && loop->cb.on_close)
                loop->cb.on_close(l->cfg.ctx, state);
        close(fd);
        atomic_fetch_sub(&w->load, 1);
}

/*
 * Gives a new connection its owner state (on_open, here on the accepting worker, so that the
 * owner counts it before the next accept), then to the worker with the least load, w on a tie:
 * EPOLLEXCLUSIVE wakes whichever worker is idle, and it would otherwise keep every connection of
 * a burst (four clients dialling at once all land on one worker while the other has none).
 * Another worker is handed the connection through its queue and woken by its eventfd; when that
 * cannot be done (out of memory), w opens it itself.
 */
static void place(struct worker *w, size_t li, int fd, const struct sockaddr_storage *addr)
{
        struct tsr_http_loop *loop = w->loop;
        struct listener *l = &loop->listen[li];
        struct worker *t = w;
        unsigned least = atomic_load(&w->load);
        struct handoff *h;
        uint64_t one = 1;
        void *state = loop->cb.on_open
                          ? loop->cb.on_open(l->cfg.ctx, fd, (const struct sockaddr *)addr)
                          : NULL;

        if (loop->cb.on_open && !state) {
                close(fd);
                return;
        }

        for (unsigned i = 0; i < loop->n_workers; i++) {
                unsigned n = atomic_load(&loop->workers[i].load);

                if (n < least) {
                        least = n;
                        t = &loop->workers[i];
                }
        }
        h = t == w ? NULL : malloc(sizeof(*h));
        if (!h) {
                atomic_fetch_add(&w->load, 1);
                conn_open(w, li, fd, state);
                return;
        }
        *h = (struct handoff){.fd = fd, .li = li, .state = state};
        atomic_fetch_add(&t->load, 1);
        pthread_mutex_lock(&t->handoff_mu);
        if (t->handoff_tail)
                t->handoff_tail->next = h;
        else
                t->handoff_head = h;
        t->handoff_tail = h;
        pthread_mutex_unlock(&t->handoff_mu);
        if (write(t->wake_fd, &one, sizeof(one)) != sizeof(one))
                return; /* the counter is full: a wake is already pending */
}

/* Takes the queue of connections handed to w; NULL when it is empty. */
static struct handoff *handoff_take(struct worker *w)
{
        struct handoff *h;

        pthread_mutex_lock(&w->handoff_mu);
        h = w->handoff_head;
        w->handoff_head = w->handoff_tail = NULL;
        pthread_mutex_unlock(&w->handoff_mu);
        return h;
}

/* Closes a handed connection that will not be opened: its owner state first (on_close). */
static void handoff_drop(struct tsr_http_loop *loop, struct handoff *h)
{
        if (h->state && loop->cb.on_close)
                loop->cb.on_close(loop->listen[h->li].cfg.ctx, h->state);
        close(h->fd);
}

/* Opens the connections handed to w (or, stopping, closes them unopened). */
static void handoff_open(struct worker *w, bool stopping)
{
        uint64_t n;

        if (read(w->wake_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
                return;
        for (struct handoff *h = handoff_take(w), *next; h; h = next) {
                next = h->next;
                if (stopping) {
                        handoff_drop(w->loop, h);
                        atomic_fetch_sub(&w->load, 1);
                } else {
                        conn_open(w, h->li, h->fd, h->state);
                }
                free(h);
        }
}

static void accept_some(struct worker *w, size_t li)
{
        struct tsr_http_loop *loop = w->loop;
        struct listener *l = &loop->listen[li];

        for (int i = 0; i < ACCEPT_BATCH; i++) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                int fd;

                if (loop->cb.accept_wait && loop->cb.accept_wait(l->cfg.ctx))
                        return;
                fd = accept4(l->cfg.fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (fd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM) {
                                struct timespec pause = {0, 10 * 1000 * 1000};

                                if (loop->cb.on_error)
                                        loop->cb.on_error(l->cfg.ctx, "accept failed",
                                                          strerror(errno));
                                nanosleep(&pause, NULL); /* the socket stays readable */
                        }
                        return;
                }
                if (loop->cb.on_accept &&
                    !loop->cb.on_accept(l->cfg.ctx, (struct sockaddr *)&ss, len)) {
                        close(fd);
                        continue;
                }
                place(w, li, fd, &ss);
        }
}

static void *worker_run(void *arg)
{
        struct worker *w = arg;
        struct epoll_event events[EVENTS_MAX];

        while (!atomic_load(&w->loop->stopping)) {
                int n = epoll_wait(w->epfd, events, EVENTS_MAX, -1);

                /*
                 * Connections first (a cut one closes, freeing its slot), then new ones. A
                 * connection's event is cleared as it runs: it may have been freed.
                 */
                for (int i = 0; i < n; i++) {
                        struct source *src = events[i].data.ptr;

                        if (src->kind == SRC_CONN) {
                                events[i].data.ptr = NULL;
                                conn_run((struct tsr_http_conn *)src);
                        }
                }
                for (int i = 0; i < n; i++) {
                        struct source *src = events[i].data.ptr;

                        if (src && src->kind == SRC_WAKE)
                                handoff_open(w, atomic_load(&w->loop->stopping));
                        else if (src && src->kind == SRC_LISTEN)
                                accept_some(w, src->index);
                }
        }
        while (w->conns)
                conn_close(w->conns);
        return NULL;
}

/* ---- start and stop ---------------------------------------------------------------------- */

unsigned tsr_http_loop_open_connections(struct tsr_http_loop *l, size_t i)
{
        return i < l->n_listen ? atomic_load(&l->listen[i].open) : 0;
}

void tsr_http_loop_stop(struct tsr_http_loop *l)
{
        if (!l)
                return;
        atomic_store(&l->stopping, true);
        for (unsigned i = 0; i < l->n_workers; i++) {
                uint64_t one = 1;

                if (l->workers[i].wake_fd >= 0 && write(l->workers[i].wake_fd, &one, 8) != 8)
                        continue;
        }
        /* Every worker is joined before any eventfd closes: a running one may still hand over. */
        for (unsigned i = 0; i < l->n_workers; i++)
                if (l->workers[i].started)
                        pthread_join(l->workers[i].thread, NULL);
        for (unsigned i = 0; i < l->n_workers; i++) {
                struct worker *w = &l->workers[i];

                for (struct handoff *h = handoff_take(w), *next; h; h = next) {
                        next = h->next;
                        handoff_drop(l, h);
                        free(h);
                }
                pthread_mutex_destroy(&w->handoff_mu);
                if (w->epfd >= 0)
                        close(w->epfd);
                if (w->wake_fd >= 0)
                        close(w->wake_fd);
        }
        for (size_t i = 0; i < l->n_listen; i++) {
                close(l->listen[i].cfg.fd);
                if (l->listen[i].prio)
                        gnutls_priority_deinit(l->listen[i].prio);
        }
        free(l->workers);
        free(l);
}

static int worker_init(struct tsr_http_loop *loop, struct worker *w)
{
        struct epoll_event ev;

        w->loop = loop;
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->epfd < 0 || w->wake_fd < 0)
                return -1;
        w->wake.kind = SRC_WAKE;
        ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &w->wake};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev))
                return -1;
        for (size_t i = 0; i < loop->n_listen; i++) {
                ev = (struct epoll_event){.events = EPOLLIN | EPOLLEXCLUSIVE,
                                          .data.ptr = &loop->listen[i].src};
                if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, loop->listen[i].cfg.fd, &ev))
                        return -1;
        }
        return 0;
}

int tsr_http_loop_start(const struct tsr_http_loop_config *cfg, struct tsr_http_loop **out,
                        struct tsr_diag *diag)
{
        struct tsr_http_loop *l = calloc(1, sizeof(*l));
        unsigned threads = cfg->threads ? cfg->threads : 1;

        if (!l || cfg->n_listen > TSR_HTTP_LISTEN_MAX) {
                free(l);
                for (size_t i = 0; i < cfg->n_listen; i++)
                        close(cfg->listen[i].fd);
                return tsr_diag_set(diag, l ? TSR_EINVAL : TSR_ENOMEM,
                                    l ? "too many listeners" : "out of memory");
        }
        l->cb = cfg->cb;
        l->n_listen = cfg->n_listen;
        for (size_t i = 0; i < cfg->n_listen; i++) {
                struct listener *li = &l->listen[i];

                li->cfg = cfg->listen[i];
                li->src = (struct source){SRC_LISTEN, i};
                atomic_init(&li->open, 0);
        }
        for (size_t i = 0; i < l->n_listen; i++) {
                struct listener *li = &l->listen[i];

                if (li->cfg.cred && gnutls_priority_init(&li->prio, li->cfg.priorities, NULL) < 0) {
                        li->prio = NULL;
                        tsr_http_loop_stop(l);
                        return tsr_diag_set(diag, TSR_EINVAL, "bad TLS priorities %s",
                                            cfg->listen[i].priorities);
                }
        }
        l->workers = calloc(threads, sizeof(*l->workers));
        if (!l->workers) {
                tsr_http_loop_stop(l);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        for (unsigned i = 0; i < threads; i++) {
                l->workers[i].epfd = l->workers[i].wake_fd = -1;
                atomic_init(&l->workers[i].load, 0);
                pthread_mutex_init(&l->workers[i].handoff_mu, NULL);
                l->n_workers++;
                if (worker_init(l, &l->workers[i])) {
                        tsr_http_loop_stop(l);
                        return tsr_diag_set(diag, TSR_EIO, "cannot set up a worker: %s",
                                            strerror(errno));
                }
        }
        for (unsigned i = 0; i < threads; i++) {
                struct worker *w = &l->workers[i];

                if (pthread_create(&w->thread, NULL, worker_run, w)) {
                        tsr_http_loop_stop(l);
                        return tsr_diag_set(diag, TSR_EIO, "cannot start a worker thread");
                }
                w->started = true;
        }
        *out = l;
        return 0;
}
