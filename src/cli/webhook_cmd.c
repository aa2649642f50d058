/*
 * webhook_cmd.c - `tessera webhook`: flags and environment into a server config, the API server
 * client and its watch cache, then the HTTPS server until SIGTERM or SIGINT.
 *
 * Settings are seeded from GPUSTACK_<UPPER_SNAKE> environment variables (core/settings.h), then
 * overridden by --setting NAME=VALUE. A bad flag, setting or certificate is reported on stderr
 * with exit status 2 before anything listens.
 */
#include "cli/webhook_cmd.h"

#include "cli/options.h"

#include "base/diag.h"
#include "base/err.h"
#include "codec/json_arena.h"
#include "core/settings.h"
#include "kube/cache.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/kubeconfig.h"
#include "webhook/cache_lookup.h"
#include "base/log.h"
#include "base/version.h"
#include "webhook/routes.h"
#include "webhook/server.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* controller-runtime's defaults, so manifests written for it work unchanged. */
#define DEFAULT_CERT_DIR "/tmp/k8s-webhook-server/serving-certs"

struct options {
        struct tsr_webhook_server_config server;
        const char *kubeconfig, *context;
        unsigned shutdown_delay_ms, shutdown_grace_ms;
        struct tsr_settings settings;
        const char *system_namespace;
        bool list_routes;
};

static void usage(FILE *f)
{
        fputs(
            "usage: tessera webhook [options]\n\n"
            "Serves the admission webhooks over HTTPS (docs/webhook.md).\n\n"
            "  --cert-file PATH        serving certificate chain, PEM (default " DEFAULT_CERT_DIR
            "/tls.crt)\n"
            "  --key-file PATH         its private key, PEM (default " DEFAULT_CERT_DIR
            "/tls.key)\n"
            "  --port N                webhook port (default 9443; 0 picks a free one)\n"
            "  --bind ADDR             listen on this IPv4/IPv6 address only (default: all)\n"
            "  --probe-port N          plain-HTTP /healthz /readyz /metrics (default 8081;\n"
            "                          -1 turns it off, 0 picks a free one)\n"
            "  --threads N             worker threads, 1..256 (default: CPUs, at most 16)\n"
            "  --max-body BYTES        largest review accepted (default 7340032)\n"
            "  --idle-timeout DURATION close idle keep-alive connections, whole seconds, 0 never\n"
            "                          (default 120s: longer than the API server's 90s)\n"
            "  --max-connections N     open webhook connections, all clients (default 1024)\n"
            "  --max-connections-per-client N  of those, from one address (default 256)\n"
            "  --header-timeout DURATION  a new connection's TLS handshake and first headers\n"
            "                          (default 10s)\n"
            "  --request-timeout DURATION  a request from its headers to its answer (default\n"
            "                          30s: the API server's longest webhook timeout)\n"
            "  --max-body-memory BYTES review bodies held at once (default 134217728)\n"
            "  --kubeconfig PATH       API server config (default: in-cluster, then $KUBECONFIG,\n"
            "                          then ~/.kube/config)\n"
            "  --context NAME          kubeconfig context (default: current-context)\n"
            "  --system-namespace NS   the operator's namespace (default\n"
            "                          $KUBERNETES_POD_NAMESPACE, else gpustack-system)\n"
            "  --setting NAME=VALUE    a Setting (overrides its GPUSTACK_* variable); repeatable\n"
            "  --shutdown-delay DURATION  report not-ready this long before draining (default "
            "2s)\n"
            "  --shutdown-grace DURATION  wait this long for reviews in flight (default 10s)\n"
            "  --log-level LEVEL       debug, info, warn or error (default info)\n"
            "  --log-format FORMAT     logfmt or json (default logfmt)\n"
            "  --list-routes           print the webhook paths and names, then exit\n",
            f);
}

enum {
        OPT_CERT = 256,
        OPT_KEY,
        OPT_PORT,
        OPT_BIND,
        OPT_PROBE,
        OPT_THREADS,
        OPT_MAX_BODY,
        OPT_IDLE,
        OPT_MAX_CONN,
        OPT_MAX_CONN_CLIENT,
        OPT_HEADER_TIMEOUT,
        OPT_REQUEST_TIMEOUT,
        OPT_BODY_MEMORY,
        OPT_KUBECONFIG,
        OPT_CONTEXT,
        OPT_NAMESPACE,
        OPT_SETTING,
        OPT_DELAY,
        OPT_GRACE,
        OPT_LOG_LEVEL,
        OPT_LOG_FORMAT,
        OPT_LIST,
        OPT_HELP,
};

static const struct option long_options[] = {
    {"cert-file", required_argument, NULL, OPT_CERT},
    {"key-file", required_argument, NULL, OPT_KEY},
    {"port", required_argument, NULL, OPT_PORT},
    {"bind", required_argument, NULL, OPT_BIND},
    {"probe-port", required_argument, NULL, OPT_PROBE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"max-body", required_argument, NULL, OPT_MAX_BODY},
    {"idle-timeout", required_argument, NULL, OPT_IDLE},
    {"max-connections", required_argument, NULL, OPT_MAX_CONN},
    {"max-connections-per-client", required_argument, NULL, OPT_MAX_CONN_CLIENT},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
    {"request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT},
    {"max-body-memory", required_argument, NULL, OPT_BODY_MEMORY},
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"system-namespace", required_argument, NULL, OPT_NAMESPACE},
    {"setting", required_argument, NULL, OPT_SETTING},
    {"shutdown-delay", required_argument, NULL, OPT_DELAY},
    {"shutdown-grace", required_argument, NULL, OPT_GRACE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"list-routes", no_argument, NULL, OPT_LIST},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Applies one option; returns 0, 1 (help printed) or -1 with the fault on stderr. */
static int apply_option(void *ctx, int opt, const char *arg)
{
        struct options *o = ctx;
        long long v;
        unsigned ms;

        switch (opt) {
        case OPT_CERT:
                o->server.cert_file = arg;
                return 0;
        case OPT_KEY:
                o->server.key_file = arg;
                return 0;
        case OPT_PORT:
                if (cli_parse_number(arg, 0, 65535, &v))
                        break;
                o->server.port = (unsigned)v;
                return 0;
        case OPT_BIND:
                o->server.bind = arg;
                return 0;
        case OPT_PROBE:
                if (cli_parse_number(arg, -1, 65535, &v))
                        break;
                o->server.probe_port = (int)v;
                return 0;
        case OPT_THREADS:
                if (cli_parse_number(arg, 1, 256, &v))
                        break;
                o->server.threads = (unsigned)v;
                return 0;
        case OPT_MAX_BODY:
                if (cli_parse_number(arg, 1, (long long)1 << 30, &v))
                        break;
                o->server.max_body = (size_t)v;
                return 0;
        case OPT_IDLE:
                if (cli_parse_duration(arg, &ms) || ms % 1000)
                        break;
                o->server.idle_timeout_s = ms / 1000;
                return 0;
        case OPT_MAX_CONN:
                if (cli_parse_number(arg, 1, 65536, &v))
                        break;
                o->server.guard.max_connections = (unsigned)v;
                return 0;
        case OPT_MAX_CONN_CLIENT:
                if (cli_parse_number(arg, 1, 65536, &v))
                        break;
                o->server.guard.max_per_client = (unsigned)v;
                return 0;
        case OPT_HEADER_TIMEOUT:
                if (cli_parse_duration(arg, &ms) || ms % 1000 || !ms)
                        break;
                o->server.guard.header_deadline_s = ms / 1000;
                return 0;
        case OPT_REQUEST_TIMEOUT:
                if (cli_parse_duration(arg, &ms) || ms % 1000 || !ms)
                        break;
                o->server.guard.request_deadline_s = ms / 1000;
                return 0;
        case OPT_BODY_MEMORY:
                if (cli_parse_number(arg, 1, (long long)1 << 40, &v))
                        break;
                o->server.guard.body_memory = (size_t)v;
                return 0;
        case OPT_KUBECONFIG:
                o->kubeconfig = arg;
                return 0;
        case OPT_CONTEXT:
                o->context = arg;
                return 0;
        case OPT_NAMESPACE:
                o->system_namespace = arg;
                return 0;
        case OPT_SETTING:
                return cli_parse_setting("tessera webhook", &o->settings, arg);
        case OPT_DELAY:
                if (cli_parse_duration(arg, &o->shutdown_delay_ms))
                        break;
                return 0;
        case OPT_GRACE:
                if (cli_parse_duration(arg, &o->shutdown_grace_ms))
                        break;
                return 0;
        case OPT_LOG_LEVEL:
                if (cli_parse_log_level(arg))
                        break;
                return 0;
        case OPT_LOG_FORMAT:
                if (cli_parse_log_format(arg))
                        break;
                return 0;
        case OPT_LIST:
                o->list_routes = true;
                return 0;
        case OPT_HELP:
                usage(stdout);
                return 1;
        default:
                usage(stderr);
                return -1;
        }
        return CLI_INVALID;
}

static int parse_options(int argc, char **argv, struct options *o)
{
        const char *ns = getenv("KUBERNETES_POD_NAMESPACE");
        int rc;

        memset(o, 0, sizeof(*o));
        o->server.cert_file = DEFAULT_CERT_DIR "/tls.crt";
        o->server.key_file = DEFAULT_CERT_DIR "/tls.key";
        o->server.port = 9443;
        o->server.probe_port = 8081;
        o->server.threads = tsr_webhook_default_threads();
        o->server.max_body = TSR_WEBHOOK_MAX_BODY_DEFAULT;
        /* Longer than the API server client's 90 s IdleConnTimeout: the client closes first. */
        o->server.idle_timeout_s = 120;
        o->server.guard = TSR_CONN_GUARD_DEFAULTS;
        o->shutdown_delay_ms = 2000;
        o->shutdown_grace_ms = 10000;
        o->system_namespace = ns && *ns ? ns : "gpustack-system";
        if (cli_settings_from_env("tessera webhook", &o->settings))
                return -1;
        rc = cli_getopt("tessera webhook", argc, argv, long_options, OPT_HELP, apply_option, o);
        if (rc)
                return rc;
        return 0;
}

static void list_routes(void)
{
        for (size_t i = 0; i < tsr_webhook_n_routes; i++) {
                const struct tsr_webhook_route *r = &tsr_webhook_routes[i];

                printf("%s\t%s\t%s\t%s/%s\t%s\n", r->mutating ? "mutating" : "validating", r->path,
                       r->name, r->group[0] ? r->group : "core", r->version, r->kind);
        }
}

static int serve(struct options *o, struct tsr_kube_client *client)
{
        struct tsr_cache_lookup source = {NULL, o->settings, o->system_namespace};
        struct tsr_kube_cache_opts cache_opts = {.settings_namespace = o->system_namespace};
        struct tsr_webhook_server *server = NULL;
        struct tsr_diag diag;
        char port[16], probe[16];
        sigset_t set;
        int rc, sig = 0;

        cli_block_signals(&set);
        tsr_diag_clear(&diag);
        rc = tsr_kube_cache_new_opts(client, &cache_opts, &source.cache, &diag);
        if (rc) {
                fprintf(stderr, "tessera webhook: %s\n", diag.msg);
                return 1;
        }
        o->server.routes = tsr_webhook_routes;
        o->server.n_routes = tsr_webhook_n_routes;
        o->server.lookup = tsr_cache_lookup_fill;
        o->server.ready = tsr_cache_lookup_ready;
        o->server.metrics = tsr_cache_lookup_metrics;
        o->server.ctx = &source;
        rc = tsr_webhook_server_start(&o->server, &server, &diag);
        if (rc) {
                fprintf(stderr, "tessera webhook: %s\n", diag.msg);
                tsr_kube_cache_free(source.cache);
                return rc == TSR_ENOMEM ? 1 : 2;
        }
        snprintf(port, sizeof(port), "%u", tsr_webhook_server_port(server));
        snprintf(probe, sizeof(probe), "%u", tsr_webhook_server_probe_port(server));
        tsr_log(TSR_LOG_INFO, "listening", "port", port, "probe_port", probe, "version",
                tsr_version(), "revision", tsr_revision(), NULL);
        sigwait(&set, &sig);
        tsr_log(TSR_LOG_INFO, "shutting down", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                NULL);
        tsr_webhook_server_stop(server, o->shutdown_delay_ms, o->shutdown_grace_ms);
        tsr_kube_cache_free(source.cache);
        tsr_log(TSR_LOG_INFO, "stopped", NULL);
        return 0;
}

int cli_webhook(int argc, char **argv)
{
        struct options o;
        struct tsr_kube_config cfg;
        struct tsr_kube_client *client = NULL;
        struct tsr_diag diag;
        int rc = parse_options(argc, argv, &o);

        if (rc)
                return rc > 0 ? 0 : 2;
        if (o.list_routes) {
                list_routes();
                return 0;
        }
        /* Before the kube client or the cache's watchers use jansson: reviews run under arenas. */
        tsr_json_arena_install();
        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        rc = cli_load_kube_config(o.kubeconfig, o.context, &cfg, &diag);
        if (!rc)
                rc = tsr_kube_client_new(&cfg, NULL, &client, &diag);
        tsr_kube_config_release(&cfg);
        if (rc) {
                fprintf(stderr, "tessera webhook: %s\n", diag.msg);
                return 2;
        }
        rc = serve(&o, client);
        tsr_kube_client_free(client);
        return rc;
}
