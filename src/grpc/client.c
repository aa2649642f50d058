/*
 * client.c - gRPC client over an nghttp2 client session (see client.h).
 *
 * A call is linked in its connection's list and attached to its HTTP/2 stream as nghttp2 stream
 * user data until it ends; ending detaches it from both sides exactly once (call_end), so that
 * neither a late frame nor a freed connection can reach a freed call.
 */
#include "grpc/client.h"

#include "base/diag.h"
#include "base/err.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tsr_grpc_call {
        struct tsr_grpc_client_conn *conn; /* NULL once ended */
        struct tsr_grpc_call *prev, *next;
        int32_t id;
        bool done;
        tsr_grpc_message_fn on_message;
        void *ctx;
        struct tsr_buf out; /* framed request */
        size_t out_off;
        struct tsr_grpc_reader reader;
        struct tsr_buf resp; /* unary: the response message */
        size_t n_resp;
        int http_status; /* 0 until :status is seen */
        bool content_type_ok;
        bool have_grpc_status;
        int grpc_status;
        struct tsr_buf grpc_message; /* raw (percent-encoded) */
        struct tsr_grpc_status st;
};

struct tsr_grpc_client_conn {
        nghttp2_session *session;
        size_t max_message;
        struct tsr_grpc_call *calls;
        int err; /* a TSR_E* met inside a callback */
};

/* Ends call with st (once): detach from the stream and the connection. */
static void call_end(struct tsr_grpc_call *call, int code, const char *msg)
{
        struct tsr_grpc_client_conn *c = call->conn;

        if (call->done)
                return;
        call->done = true;
        tsr_grpc_status_set(&call->st, code, "%s", msg);
        if (!c)
                return;
        if (call->id > 0)
                nghttp2_session_set_stream_user_data(c->session, call->id, NULL);
        if (call->prev)
                call->prev->next = call->next;
        else
                c->calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        call->prev = call->next = NULL;
        call->conn = NULL;
}

static int http_to_grpc(int http)
{
        switch (http) {
        case 400:
                return TSR_GRPC_INTERNAL;
        case 401:
                return TSR_GRPC_UNAUTHENTICATED;
        case 403:
                return TSR_GRPC_PERMISSION_DENIED;
        case 404:
                return TSR_GRPC_UNIMPLEMENTED;
        case 429:
        case 502:
        case 503:
        case 504:
                return TSR_GRPC_UNAVAILABLE;
        default:
                return TSR_GRPC_UNKNOWN;
        }
}

/* The stream closed: decide the status from what arrived (client.h). */
static void call_settle(struct tsr_grpc_call *call, uint32_t error_code)
{
        struct tsr_buf msg = TSR_BUF_INIT;
        char text[64];

        if (call->http_status && call->http_status != 200) {
                snprintf(text, sizeof(text), "HTTP status %d", call->http_status);
                call_end(call, http_to_grpc(call->http_status), text);
        } else if (call->http_status && !call->content_type_ok) {
                call_end(call, TSR_GRPC_INTERNAL, "response content-type is not application/grpc");
        } else if (call->have_grpc_status) {
                int code = call->grpc_status > 16 ? TSR_GRPC_UNKNOWN : call->grpc_status;

                if (tsr_grpc_percent_decode(&msg, call->grpc_message.ptr, call->grpc_message.len))
                        tsr_buf_reset(&msg);
                if (code == TSR_GRPC_OK && !call->on_message && call->n_resp != 1) {
                        snprintf(text, sizeof(text), "unary response had %zu messages",
                                 call->n_resp);
                        call_end(call, TSR_GRPC_INTERNAL, text);
                } else {
                        call_end(call, code, msg.ptr);
                }
        } else if (error_code == NGHTTP2_REFUSED_STREAM) {
                call_end(call, TSR_GRPC_UNAVAILABLE, "stream refused by the server");
        } else if (error_code == NGHTTP2_CANCEL) {
                call_end(call, TSR_GRPC_CANCELLED, "stream cancelled by the server");
        } else if (error_code != NGHTTP2_NO_ERROR) {
                snprintf(text, sizeof(text), "stream reset by the server (HTTP/2 error %u)",
                         (unsigned)error_code);
                call_end(call, TSR_GRPC_INTERNAL, text);
        } else {
                call_end(call, TSR_GRPC_INTERNAL, "stream ended without grpc-status trailers");
        }
        tsr_buf_release(&msg);
}

void tsr_grpc_call_cancel(struct tsr_grpc_call *call, int code, const char *msg)
{
        struct tsr_grpc_client_conn *c = call->conn;

        if (call->done)
                return;
        if (c && call->id > 0)
                nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_CANCEL);
        call_end(call, code, msg);
}

/* ---- nghttp2 callbacks --------------------------------------------------------------------- */

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
        struct tsr_grpc_call *call;

        (void)flags;
        (void)user_data;
        if (frame->hd.type != NGHTTP2_HEADERS)
                return 0;
        call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call)
                return 0;
        if (namelen == 7 && !memcmp(name, ":status", 7)) {
                int v = 0;

                for (size_t i = 0; i < valuelen && i < 3; i++)
                        v = v * 10 + (value[i] >= '0' && value[i] <= '9' ? value[i] - '0' : 0);
                call->http_status = v ? v : 999;
        } else if (namelen == 12 && !memcmp(name, "content-type", 12)) {
                call->content_type_ok = valuelen >= 16 && !memcmp(value, "application/grpc", 16) &&
                                        (valuelen == 16 || value[16] == '+' || value[16] == ';');
        } else if (namelen == 11 && !memcmp(name, "grpc-status", 11)) {
                call->have_grpc_status = tsr_grpc_status_code_parse((const char *)value, valuelen,
                                                                    &call->grpc_status) == 0;
                if (!call->have_grpc_status) {
                        call->have_grpc_status = true;
                        call->grpc_status = TSR_GRPC_UNKNOWN;
                }
        } else if (namelen == 12 && !memcmp(name, "grpc-message", 12)) {
                tsr_buf_reset(&call->grpc_message);
                if (tsr_buf_add(&call->grpc_message, value, valuelen))
                        tsr_buf_reset(&call->grpc_message);
        }
        return 0;
}

static int deliver(void *ctx, const uint8_t *msg, size_t len)
{
        struct tsr_grpc_call *call = ctx;

        call->n_resp++;
        if (call->on_message)
                return call->on_message(call->ctx, msg, len) ? 1 : 0;
        if (call->n_resp > 1)
                return 0; /* counted; settled as INTERNAL */
        return tsr_buf_add(&call->resp, msg, len);
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user_data)
{
        struct tsr_grpc_call *call = nghttp2_session_get_stream_user_data(session, id);
        struct tsr_diag diag;
        int rc;

        (void)flags;
        (void)user_data;
        if (!call)
                return 0;
        tsr_diag_clear(&diag);
        rc = tsr_grpc_reader_feed(&call->reader, data, len, deliver, call, &diag);
        if (rc == 1)
                tsr_grpc_call_cancel(call, TSR_GRPC_CANCELLED, "cancelled by the message callback");
        else if (rc == TSR_ETOOBIG)
                tsr_grpc_call_cancel(call, TSR_GRPC_RESOURCE_EXHAUSTED, diag.msg);
        else if (rc == TSR_EPARSE)
                tsr_grpc_call_cancel(call, TSR_GRPC_INTERNAL, diag.msg);
        else if (rc)
                tsr_grpc_call_cancel(call, TSR_GRPC_RESOURCE_EXHAUSTED, tsr_strerror(rc));
        return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
        struct tsr_grpc_call *call;
        struct tsr_diag diag;

        (void)user_data;
        if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
            !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
                return 0;
        call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (call && tsr_grpc_reader_finish(&call->reader, &diag))
                call_end(call, TSR_GRPC_INTERNAL, diag.msg);
        return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code,
                           void *user_data)
{
        struct tsr_grpc_call *call = nghttp2_session_get_stream_user_data(session, id);

        (void)user_data;
        if (call)
                call_settle(call, error_code);
        return 0;
}

static ssize_t read_request(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
        struct tsr_grpc_call *call = source->ptr;
        size_t n = call->out.len - call->out_off;

        (void)session;
        (void)id;
        (void)user_data;
        if (n > length)
                n = length;
        memcpy(buf, call->out.ptr + call->out_off, n);
        call->out_off += n;
        if (call->out_off == call->out.len)
                *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
}

/* ---- the connection ------------------------------------------------------------------------ */

int tsr_grpc_client_conn_new(size_t max_message, struct tsr_grpc_client_conn **out)
{
        nghttp2_session_callbacks *cbs;
        struct tsr_grpc_client_conn *c = calloc(1, sizeof(*c));
        nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
        int rc;

        if (!c)
                return TSR_ENOMEM;
        c->max_message = max_message;
        if (nghttp2_session_callbacks_new(&cbs))
                goto fail_conn;
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        rc = nghttp2_session_client_new(&c->session, cbs, c);
        nghttp2_session_callbacks_del(cbs);
        if (rc)
                goto fail_conn;
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

void tsr_grpc_client_conn_fail(struct tsr_grpc_client_conn *c, int code, const char *msg)
{
        while (c->calls)
                call_end(c->calls, code, msg);
}

void tsr_grpc_client_conn_free(struct tsr_grpc_client_conn *c)
{
        if (!c)
                return;
        tsr_grpc_client_conn_fail(c, TSR_GRPC_UNAVAILABLE, "connection closed");
        nghttp2_session_del(c->session);
        free(c);
}

int tsr_grpc_client_conn_feed(struct tsr_grpc_client_conn *c, const uint8_t *data, size_t len,
                              struct tsr_diag *diag)
{
        ssize_t n = nghttp2_session_mem_recv(c->session, data, len);
        char text[128];

        if (n >= 0)
                return 0;
        snprintf(text, sizeof(text), "connection error: HTTP/2: %s", nghttp2_strerror((int)n));
        tsr_grpc_client_conn_fail(c, TSR_GRPC_UNAVAILABLE, text);
        return tsr_diag_set(diag, TSR_EPARSE, "grpc client: %s", text);
}

int tsr_grpc_client_conn_output(struct tsr_grpc_client_conn *c, struct tsr_buf *out)
{
        for (;;) {
                const uint8_t *p;
                ssize_t n = nghttp2_session_mem_send(c->session, &p);
                int rc;

                if (n < 0)
                        return TSR_EIO;
                if (n == 0)
                        return 0;
                rc = tsr_buf_add(out, p, (size_t)n);
                if (rc)
                        return rc;
        }
}

#define NV(name, value, vlen)                                                                      \
        {                                                                                          \
                (uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, (vlen),                   \
                    NGHTTP2_NV_FLAG_NONE                                                           \
        }

int tsr_grpc_client_call_start(struct tsr_grpc_client_conn *c, const char *path, const uint8_t *req,
                               size_t len, uint64_t timeout_ms, tsr_grpc_message_fn on_message,
                               void *ctx, struct tsr_grpc_call **out)
{
        struct tsr_grpc_call *call;
        char timeout[16];
        nghttp2_data_provider prd;
        int32_t id;
        int rc;

        if (!path || path[0] != '/')
                return TSR_EINVAL;
        call = calloc(1, sizeof(*call));
        if (!call)
                return TSR_ENOMEM;
        tsr_buf_init(&call->out);
        tsr_buf_init(&call->resp);
        tsr_buf_init(&call->grpc_message);
        tsr_grpc_reader_init(&call->reader, c->max_message);
        call->on_message = on_message;
        call->ctx = ctx;
        rc = tsr_grpc_message_frame(&call->out, req, len);
        if (rc)
                goto fail_call;
        {
                /* Strings are copied by nghttp2_submit_request. */
                char *p = (char *)(uintptr_t)path;
                nghttp2_nv nv[] = {NV(":method", "POST", 4),
                                   NV(":scheme", "http", 4),
                                   NV(":path", p, strlen(path)),
                                   NV(":authority", "localhost", 9),
                                   NV("te", "trailers", 8),
                                   NV("content-type", "application/grpc", 16),
                                   NV("user-agent", "tessera-grpc", 12),
                                   NV("grpc-timeout", timeout, 0)};
                size_t n_nv = 7;

                if (timeout_ms && !tsr_grpc_timeout_format(timeout_ms, timeout)) {
                        nv[7].valuelen = strlen(timeout);
                        n_nv = 8;
                }
                prd.source.ptr = call;
                prd.read_callback = read_request;
                id = nghttp2_submit_request(c->session, NULL, nv, n_nv, &prd, call);
        }
        if (id < 0) {
                rc = id == NGHTTP2_ERR_NOMEM ? TSR_ENOMEM : TSR_EIO;
                goto fail_call;
        }
        call->id = id;
        call->conn = c;
        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        *out = call;
        return 0;

fail_call:
        tsr_grpc_reader_release(&call->reader);
        tsr_buf_release(&call->out);
        tsr_buf_release(&call->resp);
        tsr_buf_release(&call->grpc_message);
        free(call);
        return rc;
}

bool tsr_grpc_call_done(const struct tsr_grpc_call *call)
{
        return call->done;
}

const struct tsr_grpc_status *tsr_grpc_call_status(const struct tsr_grpc_call *call)
{
        return &call->st;
}

const struct tsr_buf *tsr_grpc_call_response(const struct tsr_grpc_call *call)
{
        return &call->resp;
}

void tsr_grpc_call_free(struct tsr_grpc_call *call)
{
        if (!call)
                return;
        tsr_grpc_call_cancel(call, TSR_GRPC_CANCELLED, "call freed");
        tsr_grpc_reader_release(&call->reader);
        tsr_buf_release(&call->out);
        tsr_buf_release(&call->resp);
        tsr_buf_release(&call->grpc_message);
        free(call);
}
