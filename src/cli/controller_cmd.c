/*
 * controller_cmd.c - `tessera controller`: flags and environment into the controller's
 * configuration, the API server client, the probe server, then the controller until SIGTERM or
 * SIGINT, or until the Lease is lost (exit 1: the Deployment restarts it as a standby).
 *
 * A bad flag is reported on stderr with exit status 2 before anything starts. The identity
 * defaults to $POD_NAME (the Deployment's downward API), else the hostname and the pid; the
 * namespace to $POD_NAMESPACE, else gpustack-system.
 */
#include "cli/controller_cmd.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/log.h"
#include "base/version.h"
#include "cli/options.h"
#include "controller/controller.h"
#include "kube/client.h"
#include "probe/probe_server.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "tessera controller"

struct options {
        struct tsr_controller_config ctl;
        const char *kubeconfig, *context, *probe_bind;
        long long probe_port;
        char identity[254];
};

static void usage(FILE *f)
{
        fputs("usage: tessera controller [options]\n\n"
              "Publishes the node feature labels, derives the Kueue chain (ResourceFlavors,\n"
              "ClusterQueues, LocalQueues, Topologies) from the managed nodes, and answers the\n"
              "gpustack-node-devices AdmissionCheck (docs/controller.md).\n\n"
              "  --namespace NS             the release namespace: the Lease, and no LocalQueue\n"
              "                             (default $POD_NAMESPACE, else gpustack-system)\n"
              "  --identity NAME            this replica in the Lease (default $POD_NAME, else\n"
              "                             hostname_pid)\n"
              "  --leader-elect BOOL        campaign for the Lease (default true); false leads at\n"
              "                             once: one replica only\n"
              "  --lease-name NAME          the Lease (default tessera-controller)\n"
              "  --lease-duration DURATION  (default 15s)\n"
              "  --renew-deadline DURATION  (default 10s)\n"
              "  --retry-period DURATION    (default 2s)\n"
              "  --requeue-after DURATION   a Retry verdict's requeueAfterSeconds (default 30s)\n"
              "  --probe-port PORT          /healthz, /readyz and /metrics over HTTP (default\n"
              "                             8081; -1: none; 0: an ephemeral port, logged)\n"
              "  --probe-bind ADDR          the probe address (default every IPv4 address)\n"
              "  --webhook-cert-secret NS/NAME  issue and renew the webhook's certificate in\n"
              "                             this kubernetes.io/tls Secret (default \"\": off,\n"
              "                             cert-manager or the operator provides it)\n"
              "  --webhook-service NS/NAME  the webhook Service the certificate names (required\n"
              "                             with --webhook-cert-secret)\n"
              "  --webhook-configurations NAME[,NAME]\n"
              "                             the Mutating/ValidatingWebhookConfigurations whose\n"
              "                             caBundles are kept equal to the CA\n"
              "  --webhook-cert-validity DURATION  the serving certificate's lifetime (default\n"
              "                             8760h; renewed when a third is left)\n"
              "  --webhook-ca-validity DURATION    the CA's lifetime (default 87600h)\n"
              "  --setting NAME=VALUE       a Setting's started-with value (after its\n"
              "                             GPUSTACK_* variable)\n"
              "  --kubeconfig PATH          API server config (default: in-cluster, then\n"
              "                             $KUBECONFIG, then ~/.kube/config)\n"
              "  --context NAME             kubeconfig context\n"
              "  --log-level LEVEL          debug, info, warn or error (default info)\n"
              "  --log-format FORMAT        logfmt or json (default logfmt)\n",
              f);
}

enum {
        OPT_NAMESPACE = 256,
        OPT_IDENTITY,
        OPT_LEADER_ELECT,
        OPT_LEASE_NAME,
        OPT_LEASE_DURATION,
        OPT_RENEW_DEADLINE,
        OPT_RETRY_PERIOD,
        OPT_REQUEUE_AFTER,
        OPT_PROBE_PORT,
        OPT_PROBE_BIND,
        OPT_SETTING,
        OPT_CERT_SECRET,
        OPT_CERT_SERVICE,
        OPT_CERT_CONFIGURATIONS,
        OPT_CERT_VALIDITY,
        OPT_CA_VALIDITY,
        OPT_KUBECONFIG,
        OPT_CONTEXT,
        OPT_LOG_LEVEL,
        OPT_LOG_FORMAT,
        OPT_HELP,
};

static const struct option long_options[] = {
    {"namespace", required_argument, NULL, OPT_NAMESPACE},
    {"identity", required_argument, NULL, OPT_IDENTITY},
    {"leader-elect", required_argument, NULL, OPT_LEADER_ELECT},
    {"lease-name", required_argument, NULL, OPT_LEASE_NAME},
    {"lease-duration", required_argument, NULL, OPT_LEASE_DURATION},
    {"renew-deadline", required_argument, NULL, OPT_RENEW_DEADLINE},
    {"retry-period", required_argument, NULL, OPT_RETRY_PERIOD},
    {"requeue-after", required_argument, NULL, OPT_REQUEUE_AFTER},
    {"probe-port", required_argument, NULL, OPT_PROBE_PORT},
    {"probe-bind", required_argument, NULL, OPT_PROBE_BIND},
    {"setting", required_argument, NULL, OPT_SETTING},
    {"webhook-cert-secret", required_argument, NULL, OPT_CERT_SECRET},
    {"webhook-service", required_argument, NULL, OPT_CERT_SERVICE},
    {"webhook-configurations", required_argument, NULL, OPT_CERT_CONFIGURATIONS},
    {"webhook-cert-validity", required_argument, NULL, OPT_CERT_VALIDITY},
    {"webhook-ca-validity", required_argument, NULL, OPT_CA_VALIDITY},
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Whether text is NAMESPACE/NAME, both non-empty. */
static bool is_ref(const char *text)
{
        const char *slash = strchr(text, '/');

        return slash && slash != text && slash[1] && !strchr(slash + 1, '/');
}

static int apply_option(void *ctx, int opt, const char *arg)
{
        struct options *o = ctx;
        unsigned ms;

        switch (opt) {
        case OPT_NAMESPACE:
                if (!*arg)
                        break;
                o->ctl.namespace_ = arg;
                return 0;
        case OPT_IDENTITY:
                if (!*arg || strlen(arg) >= sizeof(o->identity))
                        break;
                snprintf(o->identity, sizeof(o->identity), "%s", arg);
                return 0;
        case OPT_LEADER_ELECT:
                if (!tsr_parse_bool(arg, &o->ctl.leader_elect))
                        break;
                return 0;
        case OPT_LEASE_NAME:
                if (!*arg)
                        break;
                o->ctl.lease_name = arg;
                return 0;
        case OPT_LEASE_DURATION:
        case OPT_RENEW_DEADLINE:
        case OPT_RETRY_PERIOD:
                if (cli_parse_duration(arg, &ms) || ms < 100)
                        break;
                *(opt == OPT_LEASE_DURATION   ? &o->ctl.lease_ms
                  : opt == OPT_RENEW_DEADLINE ? &o->ctl.renew_ms
                                              : &o->ctl.retry_ms) = ms;
                return 0;
        case OPT_REQUEUE_AFTER:
                if (cli_parse_duration(arg, &ms) || ms < 1000)
                        break;
                o->ctl.requeue_after_s = ms / 1000;
                return 0;
        case OPT_PROBE_PORT:
                if (cli_parse_number(arg, -1, 65535, &o->probe_port))
                        break;
                return 0;
        case OPT_PROBE_BIND:
                o->probe_bind = arg;
                return 0;
        case OPT_SETTING:
                return cli_parse_setting(PROG, &o->ctl.settings, arg);
        case OPT_CERT_SECRET:
        case OPT_CERT_SERVICE:
                if (*arg && !is_ref(arg))
                        break;
                *(opt == OPT_CERT_SECRET ? &o->ctl.cert_secret : &o->ctl.cert_service) = arg;
                return 0;
        case OPT_CERT_CONFIGURATIONS:
                o->ctl.cert_configurations = arg;
                return 0;
        case OPT_CERT_VALIDITY:
        case OPT_CA_VALIDITY:
                if (cli_parse_lifetime(arg, opt == OPT_CERT_VALIDITY ? &o->ctl.cert_validity_s
                                                                     : &o->ctl.cert_ca_validity_s))
                        break;
                return 0;
        case OPT_KUBECONFIG:
                o->kubeconfig = arg;
                return 0;
        case OPT_CONTEXT:
                o->context = arg;
                return 0;
        case OPT_LOG_LEVEL:
                if (cli_parse_log_level(arg))
                        break;
                return 0;
        case OPT_LOG_FORMAT:
                if (cli_parse_log_format(arg))
                        break;
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
        const char *pod = getenv("POD_NAME"), *ns = getenv("POD_NAMESPACE");
        int rc;

        memset(o, 0, sizeof(*o));
        o->ctl.leader_elect = true;
        o->ctl.namespace_ = ns && *ns ? ns : "gpustack-system";
        o->probe_port = 8081;
        if (pod && *pod) {
                snprintf(o->identity, sizeof(o->identity), "%s", pod);
        } else {
                char host[200] = "";

                if (gethostname(host, sizeof(host) - 1))
                        snprintf(host, sizeof(host), "tessera");
                snprintf(o->identity, sizeof(o->identity), "%s_%ld", host, (long)getpid());
        }
        if (cli_settings_from_env(PROG, &o->ctl.settings))
                return -1;
        rc = cli_getopt(PROG, argc, argv, long_options, OPT_HELP, apply_option, o);
        if (rc)
                return rc;
        if (o->ctl.cert_secret && *o->ctl.cert_secret &&
            (!o->ctl.cert_service || !*o->ctl.cert_service)) {
                fprintf(stderr, "%s: --webhook-cert-secret needs --webhook-service\n", PROG);
                return -1;
        }
        o->ctl.identity = o->identity;
        return 0;
}

/* The Lease was lost: end the wait in run() as a signal would, but with exit status 1. */
static pthread_t main_thread;
static volatile sig_atomic_t lease_lost;

static void on_lost(void *ctx)
{
        (void)ctx;
        lease_lost = 1;
        pthread_kill(main_thread, SIGTERM);
}

static bool probe_ready(void *ctx, char *why, size_t why_len)
{
        return tsr_controller_ready(ctx, why, why_len);
}

static int probe_metrics(void *ctx, struct tsr_buf *out)
{
        int rc = tsr_controller_metrics(ctx, out);

        return rc ? rc : tsr_build_info_render("controller", out);
}

static int run(struct options *o)
{
        struct tsr_kube_config cfg;
        struct tsr_controller *c = NULL;
        struct tsr_probe_server *probes = NULL;
        struct tsr_diag diag;
        char port[16];
        sigset_t set;
        int rc, sig = 0;

        cli_block_signals(&set);
        main_thread = pthread_self();
        tsr_diag_clear(&diag);
        tsr_kube_config_init(&cfg);
        rc = cli_load_kube_config(o->kubeconfig, o->context, &cfg, &diag);
        if (!rc)
                rc = tsr_kube_client_new(&cfg, NULL, &o->ctl.client, &diag);
        tsr_kube_config_release(&cfg);
        o->ctl.on_lost = on_lost;
        if (!rc)
                rc = tsr_controller_start(&o->ctl, &c, &diag);
        if (!rc && o->probe_port >= 0) {
                struct tsr_probe_server_config pc = {
                    .bind = o->probe_bind,
                    .port = (unsigned)o->probe_port,
                    .ready = probe_ready,
                    .metrics = probe_metrics,
                    .ctx = c,
                };

                rc = tsr_probe_server_start(&pc, &probes, &diag);
        }
        if (rc) {
                fprintf(stderr, PROG ": %s\n", diag.msg);
                rc = 2;
                goto out;
        }
        snprintf(port, sizeof(port), "%u", probes ? tsr_probe_server_port(probes) : 0);
        tsr_log(TSR_LOG_INFO, "serving", "identity", o->identity, "namespace", o->ctl.namespace_,
                "probe_port", port, "leader_elect", o->ctl.leader_elect ? "true" : "false",
                "version", tsr_version(), "revision", tsr_revision(), NULL);
        sigwait(&set, &sig);
        if (lease_lost) {
                rc = 1;
        } else {
                tsr_log(TSR_LOG_INFO, "shutting down", "signal",
                        sig == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
        }
out:
        tsr_probe_server_stop(probes);
        tsr_controller_stop(c);
        if (!rc)
                tsr_log(TSR_LOG_INFO, "stopped", NULL);
        tsr_kube_client_free(o->ctl.client);
        return rc;
}

int cli_controller(int argc, char **argv)
{
        struct options o;
        int rc = parse_options(argc, argv, &o);

        if (rc)
                return rc > 0 ? 0 : 2;
        return run(&o);
}
