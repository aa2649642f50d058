/*
 * server.c - gRPC server over an nghttp2 server session (see server.h).
 *
 * One struct call per HTTP/2 stream, attached as nghttp2 stream user data and linked in the
 * connection's list; it is freed in on_stream_close (or by tsr_grpc_server_conn_free). A
 * streaming call also owns one reference to its struct tsr_grpc_stream, the only object other
 * threads touch: its queue, ending flag, final status and wakeup are guarded by its mutex, and
 * `ended` is set under that mutex before the connection lets go of the wakeup's target.
 */
#include "grpc/server.h"

#include "base/diag.h"
#include "base/err.h"
#include "grpc/message.h"

#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN 256

struct tsr_grpc_stream {
        pthread_mutex_t mu;
        atomic_int refs;
        struct tsr_buf queue;         /* framed messages pushed, not yet taken (guarded) */
        bool ending;                  /* finish requested; no more pushes (guarded) */
        bool ended;                   /* the HTTP/2 stream is gone (guarded) */
        bool shutdown;                /* ending was asked by conn shutdown (guarded) */
        struct tsr_grpc_status final; /* the status to send once queue is empty (guarded) */
        tsr_grpc_wakeup_fn wake;      /* NULL once ended (guarded) */
        void *wake_ctx;
        const char *path; /* borrowed from the method table */
};

struct call {
        struct tsr_grpc_server_conn *conn;
        struct call *prev, *next;
        int32_t id;
        char path[PATH_MAX_LEN];
        bool path_too_long;
        bool content_type_grpc;
        bool content_type_seen;
        bool encoding_unsupported;
        bool remote_ended;
        bool responded;     /* response HEADERS submitted */
        bool trailers_sent; /* the last frame (trailers or Trailers-Only) submitted */
        bool deferred;      /* the data provider returned NGHTTP2_ERR_DEFERRED */
        bool stopped;       /* an error answered the request before its end: ignore its rest */
        bool dispatched;
        const struct tsr_grpc_method *method;
        struct tsr_grpc_reader reader;
        struct tsr_buf req;             /* the request message */
        size_t n_req;                   /* request messages seen */
        struct tsr_buf out;             /* framed response bytes taken for sending */
        size_t out_off;                 /* bytes of out already handed to nghttp2 */
        struct tsr_grpc_status st;      /* unary: the final status */
        struct tsr_grpc_stream *stream; /* streaming: one reference */
        enum tsr_grpc_stream_end why;   /* set when trailers are submitted */
};

struct tsr_grpc_server_conn {
        nghttp2_session *session;
        const struct tsr_grpc_service_table *table;
        void *user;
        tsr_grpc_wakeup_fn wake;
        void *wake_ctx;
        struct call *calls;
        int err; /* a TSR_E* met inside a callback */
};

/* ---- streams ------------------------------------------------------------------------------- */

static struct tsr_grpc_stream *stream_new(struct tsr_grpc_server_conn *c, const char *path)
{
        struct tsr_grpc_stream *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        if (pthread_mutex_init(&s->mu, NULL)) {
                free(s);
                return NULL;
        }
        atomic_init(&s->refs, 1);
        tsr_buf_init(&s->queue);
        s->final.code = TSR_GRPC_OK;
        s->wake = c->wake;
        s->wake_ctx = c->wake_ctx;
        s->path = path;
        return s;
}

void tsr_grpc_stream_ref(struct tsr_grpc_stream *s)
{
        atomic_fetch_add(&s->refs, 1);
}

void tsr_grpc_stream_unref(struct tsr_grpc_stream *s)
{
        if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
                return;
        tsr_buf_release(&s->queue);
        pthread_mutex_destroy(&s->mu);
        free(s);
}

const char *tsr_grpc_stream_path(const struct tsr_grpc_stream *s)
{
        return s->path;
}

int tsr_grpc_stream_push(struct tsr_grpc_stream *s, const uint8_t *msg, size_t len)
{
        int rc;

        pthread_mutex_lock(&s->mu);
        if (s->ending || s->ended)
                rc = TSR_ESTALE;
        else
                rc = tsr_grpc_message_frame(&s->queue, msg, len);
        if (!rc && s->wake)
                s->wake(s->wake_ctx);
        pthread_mutex_unlock(&s->mu);
        return rc;
}

static int stream_end_request(struct tsr_grpc_stream *s, const struct tsr_grpc_status *st,
                              bool shutdown)
{
        int rc = 0;

        pthread_mutex_lock(&s->mu);
        if (s->ending || s->ended) {
                rc = TSR_ESTALE;
        } else {
                s->ending = true;
                s->shutdown = shutdown;
                s->final = *st;
                if (s->wake)
                        s->wake(s->wake_ctx);
        }
        pthread_mutex_unlock(&s->mu);
        return rc;
}

int tsr_grpc_stream_finish(struct tsr_grpc_stream *s, const struct tsr_grpc_status *st)
{
        return stream_end_request(s, st, false);
}

bool tsr_grpc_stream_ended(struct tsr_grpc_stream *s)
{
        bool r;

        pthread_mutex_lock(&s->mu);
        r = s->ending || s->ended;
        pthread_mutex_unlock(&s->mu);
        return r;
}

/* The HTTP/2 stream is gone: no wakeup after this, tell the owner, drop the call's reference. */
static void stream_close(struct tsr_grpc_server_conn *c, struct call *call,
                         enum tsr_grpc_stream_end why)
{
        struct tsr_grpc_stream *s = call->stream;

        call->stream = NULL;
        pthread_mutex_lock(&s->mu);
        s->ended = true;
        s->wake = NULL;
        pthread_mutex_unlock(&s->mu);
        if (c->table->closed)
                c->table->closed(c->user, s, why);
        tsr_grpc_stream_unref(s);
}

/* ---- calls --------------------------------------------------------------------------------- */

static struct call *call_new(struct tsr_grpc_server_conn *c, int32_t id)
{
        struct call *call = calloc(1, sizeof(*call));

        if (!call)
                return NULL;
        call->conn = c;
        call->id = id;
        tsr_grpc_reader_init(&call->reader, c->table->max_message);
        tsr_buf_init(&call->req);
        tsr_buf_init(&call->out);
        call->st.code = TSR_GRPC_OK;
        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        return call;
}

static void call_free(struct tsr_grpc_server_conn *c, struct call *call,
                      enum tsr_grpc_stream_end why)
{
        if (call->prev)
                call->prev->next = call->next;
        else
                c->calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        if (call->stream)
                stream_close(c, call, why);
        tsr_grpc_reader_release(&call->reader);
        tsr_buf_release(&call->req);
        tsr_buf_release(&call->out);
        free(call);
}

#define NV(name, value, vlen)                                                                      \
        {                                                                                          \
                (uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, (vlen),                   \
                    NGHTTP2_NV_FLAG_NONE                                                           \
        }

/* Builds grpc-status / grpc-message header values: code text in code[4], message in msg. */
static int status_values(const struct tsr_grpc_status *st, char code[4], struct tsr_buf *msg)
{
        int v = st->code < 0 || st->code > 999 ? TSR_GRPC_UNKNOWN : st->code;

        snprintf(code, 4, "%d", v);
        return tsr_grpc_percent_encode(msg, st->msg, strlen(st->msg));
}

/* Submits the trailers (after DATA) or, before any response HEADERS, a Trailers-Only reply. */
static int send_status(struct call *call, const struct tsr_grpc_status *st,
                       enum tsr_grpc_stream_end why)
{
        struct tsr_buf msg = TSR_BUF_INIT;
        char code[4];
        int rc;

        rc = status_values(st, code, &msg);
        if (rc)
                return rc;
        if (call->responded) {
                /* nghttp2 copies names and values (no NO_COPY flag). */
                nghttp2_nv nv[] = {NV("grpc-status", code, strlen(code)),
                                   NV("grpc-message", msg.ptr, msg.len)};

                rc = nghttp2_submit_trailer(call->conn->session, call->id, nv, msg.len ? 2 : 1);
        } else {
                nghttp2_nv nv[] = {
                    NV(":status", "200", 3), NV("content-type", "application/grpc", 16),
                    NV("grpc-status", code, strlen(code)), NV("grpc-message", msg.ptr, msg.len)};

                rc = nghttp2_submit_response(call->conn->session, call->id, nv, msg.len ? 4 : 3,
                                             NULL);
                call->responded = true;
        }
        tsr_buf_release(&msg);
        if (rc)
                return rc == NGHTTP2_ERR_NOMEM ? TSR_ENOMEM : TSR_EIO;
        call->trailers_sent = true;
        call->why = why;
        return 0;
}

/* An early error: the request is not read further. */
static int refuse(struct call *call, int code, const char *fmt, const char *arg)
{
        struct tsr_grpc_status st;

        tsr_grpc_status_set(&st, code, fmt, arg);
        call->stopped = true;
        return send_status(call, &st, TSR_GRPC_END_FINISHED);
}

static ssize_t read_body(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
        struct call *call = source->ptr;
        bool done = true;
        struct tsr_grpc_status final = call->st;
        enum tsr_grpc_stream_end why = TSR_GRPC_END_FINISHED;
        size_t n;
        int rc;

        (void)session;
        (void)id;
        (void)user_data;
        if (call->stream) {
                struct tsr_grpc_stream *s = call->stream;

                pthread_mutex_lock(&s->mu);
                if (call->out_off == call->out.len && s->queue.len) {
                        struct tsr_buf t = call->out;

                        call->out = s->queue;
                        s->queue = t;
                        tsr_buf_reset(&s->queue);
                        call->out_off = 0;
                }
                done = s->ending && s->queue.len == 0;
                final = s->final;
                why = s->shutdown ? TSR_GRPC_END_SHUTDOWN : TSR_GRPC_END_FINISHED;
                pthread_mutex_unlock(&s->mu);
        }
        n = call->out.len - call->out_off;
        if (n > length)
                n = length;
        memcpy(buf, call->out.ptr + call->out_off, n);
        call->out_off += n;
        if (call->out_off < call->out.len)
                return (ssize_t)n;
        tsr_buf_reset(&call->out);
        call->out_off = 0;
        if (!done) {
                if (n)
                        return (ssize_t)n;
                call->deferred = true;
                return NGHTTP2_ERR_DEFERRED;
        }
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        rc = send_status(call, &final, why);
        if (rc) {
                call->conn->err = rc;
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        return (ssize_t)n;
}

static int respond_with_body(struct call *call)
{
        nghttp2_nv nv[] = {NV(":status", "200", 3), NV("content-type", "application/grpc", 16)};
        nghttp2_data_provider prd;
        int rc;

        prd.source.ptr = call;
        prd.read_callback = read_body;
        rc = nghttp2_submit_response(call->conn->session, call->id, nv, 2, &prd);
        if (rc)
                return rc == NGHTTP2_ERR_NOMEM ? TSR_ENOMEM : TSR_EIO;
        call->responded = true;
        return 0;
}

static int run_unary(struct call *call)
{
        struct tsr_grpc_server_conn *c = call->conn;
        struct tsr_buf resp = TSR_BUF_INIT;
        int rc;

        call->st.code = TSR_GRPC_OK;
        call->st.msg[0] = '\0';
        rc = call->method->unary(c->user, (const uint8_t *)call->req.ptr, call->req.len, &resp,
                                 &call->st);
        if (rc < 0)
                tsr_grpc_status_set(&call->st, TSR_GRPC_INTERNAL, "handler failed: %s",
                                    tsr_strerror(rc));
        if (call->st.code != TSR_GRPC_OK) {
                tsr_buf_release(&resp);
                return send_status(call, &call->st, TSR_GRPC_END_FINISHED);
        }
        rc = tsr_grpc_message_frame(&call->out, (const uint8_t *)resp.ptr, resp.len);
        tsr_buf_release(&resp);
        if (rc) {
                tsr_grpc_status_set(&call->st, TSR_GRPC_RESOURCE_EXHAUSTED,
                                    "response too large: %s", tsr_strerror(rc));
                return send_status(call, &call->st, TSR_GRPC_END_FINISHED);
        }
        return respond_with_body(call);
}

static int run_stream(struct call *call)
{
        struct tsr_grpc_server_conn *c = call->conn;
        struct tsr_grpc_status st = {TSR_GRPC_OK, ""};
        bool queued;
        int rc;

        call->stream = stream_new(c, call->method->path);
        if (!call->stream)
                return TSR_ENOMEM;
        rc = call->method->stream(c->user, call->stream, (const uint8_t *)call->req.ptr,
                                  call->req.len, &st);
        if (rc < 0)
                tsr_grpc_status_set(&st, TSR_GRPC_INTERNAL, "handler failed: %s", tsr_strerror(rc));
        if (st.code != TSR_GRPC_OK) {
                pthread_mutex_lock(&call->stream->mu);
                queued = call->stream->queue.len > 0;
                pthread_mutex_unlock(&call->stream->mu);
                /* A stream already finished by its owner keeps that status. */
                stream_end_request(call->stream, &st, false);
                if (!queued)
                        return send_status(call, &st, TSR_GRPC_END_FINISHED);
        }
        return respond_with_body(call);
}

static int collect(void *ctx, const uint8_t *msg, size_t len)
{
        struct call *call = ctx;

        if (++call->n_req > 1)
                return 1;
        return tsr_buf_add(&call->req, msg, len);
}

/* The whole request is in: run the method. */
static int dispatch(struct call *call)
{
        struct tsr_diag diag;
        int rc;

        if (call->stopped || call->dispatched)
                return 0;
        call->dispatched = true;
        tsr_diag_clear(&diag);
        rc = tsr_grpc_reader_finish(&call->reader, &diag);
        if (rc)
                return refuse(call, TSR_GRPC_INTERNAL, "%s", diag.msg);
        if (call->n_req != 1) {
                struct tsr_grpc_status st;

                tsr_grpc_status_set(&st, TSR_GRPC_INTERNAL, "expected one request message, got %zu",
                                    call->n_req);
                call->stopped = true;
                return send_status(call, &st, TSR_GRPC_END_FINISHED);
        }
        return call->method->unary ? run_unary(call) : run_stream(call);
}

/* The request HEADERS are complete: refuse what cannot be served before reading the body. */
static int check_headers(struct tsr_grpc_server_conn *c, struct call *call)
{
        if (!call->content_type_grpc) {
                nghttp2_nv nv[] = {NV(":status", "415", 3)};
                int rc;

                call->stopped = true;
                call->responded = true;
                rc = nghttp2_submit_response(c->session, call->id, nv, 1, NULL);
                if (rc)
                        return rc == NGHTTP2_ERR_NOMEM ? TSR_ENOMEM : TSR_EIO;
                call->trailers_sent = true;
                return 0;
        }
        for (size_t i = 0; !call->path_too_long && i < c->table->n_methods; i++) {
                if (!strcmp(c->table->methods[i].path, call->path)) {
                        call->method = &c->table->methods[i];
                        break;
                }
        }
        if (!call->method)
                return refuse(call, TSR_GRPC_UNIMPLEMENTED, "unknown method %s", call->path);
        if (call->encoding_unsupported)
                return refuse(call, TSR_GRPC_UNIMPLEMENTED, "%s",
                              "grpc-encoding is not supported (identity only)");
        return 0;
}

/* ---- nghttp2 callbacks --------------------------------------------------------------------- */

static int fail(struct tsr_grpc_server_conn *c, int rc)
{
        c->err = rc;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
        struct tsr_grpc_server_conn *c = user_data;
        struct call *call;

        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        call = call_new(c, frame->hd.stream_id);
        if (!call)
                return fail(c, TSR_ENOMEM);
        if (nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, call)) {
                call_free(c, call, TSR_GRPC_END_CONN_LOST);
                return fail(c, TSR_EIO);
        }
        return 0;
}

static bool prefix_is(const uint8_t *v, size_t len, const char *p)
{
        size_t n = strlen(p);

        return len >= n && !memcmp(v, p, n);
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
        struct call *call;

        (void)flags;
        (void)user_data;
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call)
                return 0;
        if (namelen == 5 && !memcmp(name, ":path", 5)) {
                if (valuelen >= sizeof(call->path)) {
                        call->path_too_long = true;
                        valuelen = sizeof(call->path) - 1;
                }
                memcpy(call->path, value, valuelen);
                call->path[valuelen] = '\0';
        } else if (namelen == 12 && !memcmp(name, "content-type", 12)) {
                call->content_type_seen = true;
                /* application/grpc, application/grpc+proto, application/grpc;... */
                call->content_type_grpc = prefix_is(value, valuelen, "application/grpc") &&
                                          (valuelen == 16 || value[16] == '+' || value[16] == ';');
        } else if (namelen == 13 && !memcmp(name, "grpc-encoding", 13)) {
                call->encoding_unsupported = !(valuelen == 8 && !memcmp(value, "identity", 8));
        }
        return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user_data)
{
        struct tsr_grpc_server_conn *c = user_data;
        struct call *call = nghttp2_session_get_stream_user_data(session, id);
        struct tsr_diag diag;
        int rc;

        (void)flags;
        if (!call || call->stopped)
                return 0;
        tsr_diag_clear(&diag);
        rc = tsr_grpc_reader_feed(&call->reader, data, len, collect, call, &diag);
        if (rc == 1) {
                rc = refuse(call, TSR_GRPC_INTERNAL, "%s",
                            "more than one request message for a unary-request method");
        } else if (rc == TSR_ETOOBIG) {
                rc = refuse(call, TSR_GRPC_RESOURCE_EXHAUSTED, "%s", diag.msg);
        } else if (rc == TSR_EPARSE) {
                rc = refuse(call, TSR_GRPC_INTERNAL, "%s", diag.msg);
        } else if (rc) {
                rc = refuse(call, TSR_GRPC_RESOURCE_EXHAUSTED, "%s", tsr_strerror(rc));
        }
        return rc ? fail(c, rc) : 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
        struct tsr_grpc_server_conn *c = user_data;
        struct call *call;
        int rc = 0;

        if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
                return 0;
        call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call)
                return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
                rc = check_headers(c, call);
        if (!rc && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
                call->remote_ended = true;
                rc = dispatch(call);
        }
        return rc ? fail(c, rc) : 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
        struct call *call;

        (void)user_data;
        if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
            !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
                return 0;
        call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        /* Our side is done while the client still sends: tell it to stop (§2.5). */
        if (call && !call->remote_ended)
                nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                          NGHTTP2_NO_ERROR);
        return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code,
                           void *user_data)
{
        struct tsr_grpc_server_conn *c = user_data;
        struct call *call = nghttp2_session_get_stream_user_data(session, id);

        (void)error_code;
        if (!call)
                return 0;
        nghttp2_session_set_stream_user_data(session, id, NULL);
        call_free(c, call, call->trailers_sent ? call->why : TSR_GRPC_END_CANCELLED);
        return 0;
}

/* ---- the connection ------------------------------------------------------------------------ */

int tsr_grpc_server_conn_new(const struct tsr_grpc_service_table *table, void *user,
                             struct tsr_grpc_server_conn **out)
{
        nghttp2_session_callbacks *cbs;
        struct tsr_grpc_server_conn *c = calloc(1, sizeof(*c));
        nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
        int rc;

        if (!c)
                return TSR_ENOMEM;
        c->table = table;
        c->user = user;
        if (nghttp2_session_callbacks_new(&cbs))
                goto fail_conn;
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        rc = nghttp2_session_server_new(&c->session, cbs, c);
        nghttp2_session_callbacks_del(cbs);
        if (rc)
                goto fail_conn;
        /* The server preface goes out before the client's is read (§2.5). */
        if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 1))
                goto fail_session;
        *out = c;
        return 0;

fail_session:
        nghttp2_session_del(c->session);
fail_conn:
        free(c);
        return TSR_ENOMEM;
}

void tsr_grpc_server_conn_set_wakeup(struct tsr_grpc_server_conn *c, tsr_grpc_wakeup_fn fn,
                                     void *ctx)
{
        c->wake = fn;
        c->wake_ctx = ctx;
}

int tsr_grpc_server_conn_feed(struct tsr_grpc_server_conn *c, const uint8_t *data, size_t len,
                              struct tsr_diag *diag)
{
        ssize_t n;

        c->err = 0;
        n = nghttp2_session_mem_recv(c->session, data, len);
        if (n >= 0)
                return 0;
        if (n == NGHTTP2_ERR_CALLBACK_FAILURE && c->err == TSR_ENOMEM)
                return tsr_diag_set(diag, TSR_ENOMEM, "grpc server: out of memory");
        return tsr_diag_set(diag, TSR_EPARSE, "grpc server: HTTP/2: %s",
                            n == NGHTTP2_ERR_CALLBACK_FAILURE ? tsr_strerror(c->err)
                                                              : nghttp2_strerror((int)n));
}

int tsr_grpc_server_conn_output(struct tsr_grpc_server_conn *c, struct tsr_buf *out)
{
        for (struct call *call = c->calls; call; call = call->next) {
                struct tsr_grpc_stream *s = call->stream;
                bool ready;

                if (!s || !call->deferred)
                        continue;
                pthread_mutex_lock(&s->mu);
                ready = s->queue.len > 0 || s->ending;
                pthread_mutex_unlock(&s->mu);
                if (ready) {
                        call->deferred = false;
                        nghttp2_session_resume_data(c->session, call->id);
                }
        }
        for (;;) {
                const uint8_t *p;
                ssize_t n;
                int rc;

                c->err = 0;
                n = nghttp2_session_mem_send(c->session, &p);
                if (n < 0)
                        return n == NGHTTP2_ERR_CALLBACK_FAILURE && c->err ? c->err : TSR_EIO;
                if (n == 0)
                        return 0;
                rc = tsr_buf_add(out, p, (size_t)n);
                if (rc)
                        return rc;
        }
}

bool tsr_grpc_server_conn_alive(const struct tsr_grpc_server_conn *c)
{
        return nghttp2_session_want_read(c->session) || nghttp2_session_want_write(c->session);
}

void tsr_grpc_server_conn_shutdown(struct tsr_grpc_server_conn *c)
{
        struct tsr_grpc_status ok = {TSR_GRPC_OK, ""};

        for (struct call *call = c->calls; call; call = call->next)
                if (call->stream)
                        stream_end_request(call->stream, &ok, true);
        nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->session), NGHTTP2_NO_ERROR,
                              NULL, 0);
}

void tsr_grpc_server_conn_free(struct tsr_grpc_server_conn *c)
{
        if (!c)
                return;
        while (c->calls) {
                nghttp2_session_set_stream_user_data(c->session, c->calls->id, NULL);
                call_free(c, c->calls, TSR_GRPC_END_CONN_LOST);
        }
        nghttp2_session_del(c->session);
        free(c);
}
