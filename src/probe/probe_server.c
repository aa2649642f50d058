/*
 * probe_server.c - the endpoints of probe_server.h on libmicrohttpd's internal polling thread.
 * Each answer is built whole into a buffer and handed to libmicrohttpd, which frees it.
 */
#include "probe/probe_server.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#define WHY_MAX 768

struct tsr_probe_server {
        struct tsr_probe_server_config cfg;
        struct MHD_Daemon *daemon;
        unsigned port;
};

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *type,
                              struct tsr_buf *body)
{
        size_t len = body->len;
        char *text = tsr_buf_detach(body);
        struct MHD_Response *r;
        enum MHD_Result ok;

        if (!text)
                return MHD_NO;
        r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        ok = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_len, void **con_cls)
{
        struct tsr_probe_server *s = cls;
        struct tsr_buf body;
        char why[WHY_MAX] = "";
        unsigned status = MHD_HTTP_OK;
        const char *type = "text/plain; charset=utf-8";

        (void)version;
        (void)data;
        if (!*con_cls) { /* the headers: answer once the (empty) body is in */
                *con_cls = s;
                return MHD_YES;
        }
        if (*data_len) {
                *data_len = 0;
                return MHD_YES;
        }
        tsr_buf_init(&body);
        if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
                status = MHD_HTTP_METHOD_NOT_ALLOWED;
                tsr_buf_adds(&body, "method not allowed\n");
        } else if (!strcmp(url, "/healthz")) {
                tsr_buf_adds(&body, "ok\n");
        } else if (!strcmp(url, "/readyz")) {
                if (s->cfg.ready && !s->cfg.ready(s->cfg.ctx, why, sizeof(why))) {
                        status = MHD_HTTP_SERVICE_UNAVAILABLE;
                        tsr_buf_addf(&body, "not ready: %s\n", why);
                } else {
                        tsr_buf_adds(&body, "ok\n");
                }
        } else if (!strcmp(url, "/metrics") && s->cfg.metrics) {
                type = "text/plain; version=0.0.4; charset=utf-8";
                if (s->cfg.metrics(s->cfg.ctx, &body)) {
                        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
                        tsr_buf_reset(&body);
                        tsr_buf_adds(&body, "metrics unavailable\n");
                }
        } else {
                status = MHD_HTTP_NOT_FOUND;
                tsr_buf_adds(&body, "not found\n");
        }
        return answer(c, status, type, &body);
}

int tsr_probe_server_start(const struct tsr_probe_server_config *cfg, struct tsr_probe_server **out,
                           struct tsr_diag *diag)
{
        struct tsr_probe_server *s;
        struct sockaddr_in addr = {.sin_family = AF_INET};
        const union MHD_DaemonInfo *info;

        if (cfg->port > 65535)
                return tsr_diag_set(diag, TSR_EINVAL, "probe port %u is out of range", cfg->port);
        if (cfg->bind && inet_pton(AF_INET, cfg->bind, &addr.sin_addr) != 1)
                return tsr_diag_set(diag, TSR_EINVAL, "probe bind address \"%s\" is not IPv4",
                                    cfg->bind);
        if (!cfg->bind)
                addr.sin_addr.s_addr = htonl(INADDR_ANY);
        addr.sin_port = htons((uint16_t)cfg->port);
        s = calloc(1, sizeof(*s));
        if (!s)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        s->cfg = *cfg;
        s->cfg.bind = NULL;
        s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL,
                                     (uint16_t)cfg->port, NULL, NULL, on_request, s,
                                     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                     MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
        if (!s->daemon) {
                free(s);
                return tsr_diag_set(diag, TSR_EIO, "cannot listen on the probe port %u", cfg->port);
        }
        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
        s->port = info ? info->port : cfg->port;
        *out = s;
        return 0;
}

unsigned tsr_probe_server_port(const struct tsr_probe_server *s)
{
        return s->port;
}

void tsr_probe_server_stop(struct tsr_probe_server *s)
{
        if (!s)
                return;
        MHD_stop_daemon(s->daemon);
        free(s);
}
