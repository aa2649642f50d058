/*
 * device_manager_cmd.c - `tessera device-manager`: flags and environment into the daemon's
 * configuration, the GPU backend (NVML, or the fake for tests and demos), the API server client,
 * then the daemon until SIGTERM or SIGINT.
 *
 * A bad flag or an unusable backend is reported on stderr with exit status 2 before anything is
 * served. The device-plugin switches are read from their upstream environment variables
 * (GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET, GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE,
 * GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS; Go ParseBool, default true), then their flags. Slice
 * isolation is tessera's own and has flags only (--slice-isolation, --vgpu-*): its install
 * failing (the library missing) fails the start, exit status 2.
 */
#include "cli/device_manager_cmd.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "base/version.h"
#include "cli/options.h"
#include "devicemanager/daemon.h"
#include "kube/client.h"
#include "nvml/fake.h"
#include "nvml/nvml.h"
#include "probe/probe_server.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "tessera device-manager"

struct options {
        struct tsr_dm_daemon_config dm;
        const char *kubeconfig, *context;
        const char *nvml_library, *fake, *fake_state;
        const char *probe_bind;
        long long probe_port;
        char hostname[256];
};

static void usage(FILE *f)
{
        fputs(
            "usage: tessera device-manager [options]\n\n"
            "Serves this node's accelerators to the kubelet as device plugins, carves and\n"
            "reclaims MIG instances, and records allocations (docs/device-manager.md).\n\n"
            "  --node-name NAME           this node (default $NODE_NAME, else the hostname)\n"
            "  --plugin-dir DIR           the kubelet's device-plugin directory\n"
            "                             (default /var/lib/kubelet/device-plugins)\n"
            "  --pod-resources-socket P   the kubelet's pod-resources socket, \"\" for none\n"
            "                             (default /var/lib/kubelet/pod-resources/kubelet.sock)\n"
            "  --pods-dir DIR             the kubelet's pods directory, where MIG ownership\n"
            "                             markers live (default /var/lib/kubelet/pods)\n"
            "  --grants-file PATH         the grant journal: grants kept across a crash until\n"
            "                             their Pods show them (default\n"
            "                             <pods-dir>/.tessera-grants.json)\n"
            "  --nvml-library PATH        the NVML library (default libnvidia-ml.so.1)\n"
            "  --fake SPEC                fake GPUs instead of NVML: PRODUCT:COUNT[:MODES]\n"
            "                             (\"NVIDIA H100 80GB HBM3:8:mig\"), for tests and demos\n"
            "  --fake-state FILE          keep the fake GPUs' state in FILE across restarts\n"
            "  --kubeconfig PATH          API server config (default: in-cluster, then\n"
            "                             $KUBECONFIG, then ~/.kube/config)\n"
            "  --context NAME             kubeconfig context\n"
            "  --identify-by-kubelet BOOL ask pod-resources first (default true)\n"
            "  --sliced-allocate-gate BOOL refuse a slice without a slot or units (default "
            "true)\n"
            "  --release-terminated BOOL  finished Pods stop charging (default true)\n"
            "  --slice-isolation MODE     what a logical slice's container gets: preload, the\n"
            "                             interposer through /etc/ld.so.preload; env, through\n"
            "                             LD_PRELOAD; off, nothing (default preload)\n"
            "  --vgpu-library PATH        the interposer to install\n"
            "                             (default " TSR_DM_VGPU_LIBRARY ")\n"
            "  --vgpu-dir DIR             the host directory it is installed into, as mounted\n"
            "                             here (default " TSR_DM_VGPU_DIR ")\n"
            "  --vgpu-host-dir DIR        that directory as the host sees it (default: "
            "--vgpu-dir)\n"
            "  --poll-interval DURATION   how often the node's Pods are listed (default 2s)\n"
            "  --reclaim-interval DURATION  the reclaim resync (default 60s)\n"
            "  --probe-port PORT          /healthz, /readyz and /metrics over HTTP (default\n"
            "                             8083; -1: none; 0: an ephemeral port, logged)\n"
            "  --probe-bind ADDR          the probe address (default every IPv4 address)\n"
            "  --log-level LEVEL          debug, info, warn or error (default info)\n"
            "  --log-format FORMAT        logfmt or json (default logfmt)\n",
            f);
}

enum {
        OPT_NODE = 256,
        OPT_PLUGIN_DIR,
        OPT_PODRES,
        OPT_PODS_DIR,
        OPT_GRANTS_FILE,
        OPT_NVML,
        OPT_FAKE,
        OPT_FAKE_STATE,
        OPT_KUBECONFIG,
        OPT_CONTEXT,
        OPT_IDENTIFY,
        OPT_GATE,
        OPT_RELEASE,
        OPT_ISOLATION,
        OPT_VGPU_LIBRARY,
        OPT_VGPU_DIR,
        OPT_VGPU_HOST_DIR,
        OPT_POLL,
        OPT_RECLAIM,
        OPT_PROBE_PORT,
        OPT_PROBE_BIND,
        OPT_LOG_LEVEL,
        OPT_LOG_FORMAT,
        OPT_HELP,
};

static const struct option long_options[] = {
    {"node-name", required_argument, NULL, OPT_NODE},
    {"plugin-dir", required_argument, NULL, OPT_PLUGIN_DIR},
    {"pod-resources-socket", required_argument, NULL, OPT_PODRES},
    {"pods-dir", required_argument, NULL, OPT_PODS_DIR},
    {"grants-file", required_argument, NULL, OPT_GRANTS_FILE},
    {"nvml-library", required_argument, NULL, OPT_NVML},
    {"fake", required_argument, NULL, OPT_FAKE},
    {"fake-state", required_argument, NULL, OPT_FAKE_STATE},
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"identify-by-kubelet", required_argument, NULL, OPT_IDENTIFY},
    {"sliced-allocate-gate", required_argument, NULL, OPT_GATE},
    {"release-terminated", required_argument, NULL, OPT_RELEASE},
    {"slice-isolation", required_argument, NULL, OPT_ISOLATION},
    {"vgpu-library", required_argument, NULL, OPT_VGPU_LIBRARY},
    {"vgpu-dir", required_argument, NULL, OPT_VGPU_DIR},
    {"vgpu-host-dir", required_argument, NULL, OPT_VGPU_HOST_DIR},
    {"poll-interval", required_argument, NULL, OPT_POLL},
    {"reclaim-interval", required_argument, NULL, OPT_RECLAIM},
    {"probe-port", required_argument, NULL, OPT_PROBE_PORT},
    {"probe-bind", required_argument, NULL, OPT_PROBE_BIND},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* A switch from its environment variable (default true). 0 or -1 with the fault on stderr. */
static int switch_from_env(const char *var, bool *out)
{
        const char *v = getenv(var);

        *out = true;
        if (!v || !*v || tsr_parse_bool(v, out))
                return 0;
        fprintf(stderr, PROG ": %s takes true or false, not \"%s\"\n", var, v);
        return -1;
}

static int apply_option(void *ctx, int opt, const char *arg)
{
        struct options *o = ctx;
        unsigned ms;

        switch (opt) {
        case OPT_NODE:
                o->dm.node_name = arg;
                return 0;
        case OPT_PLUGIN_DIR:
                o->dm.plugin_dir = arg;
                return 0;
        case OPT_PODRES:
                o->dm.podres_socket = *arg ? arg : NULL;
                return 0;
        case OPT_PODS_DIR:
                o->dm.pods_dir = arg;
                return 0;
        case OPT_GRANTS_FILE:
                o->dm.grants_file = arg;
                return 0;
        case OPT_NVML:
                o->nvml_library = arg;
                return 0;
        case OPT_FAKE:
                o->fake = arg;
                return 0;
        case OPT_FAKE_STATE:
                o->fake_state = arg;
                return 0;
        case OPT_KUBECONFIG:
                o->kubeconfig = arg;
                return 0;
        case OPT_CONTEXT:
                o->context = arg;
                return 0;
        case OPT_IDENTIFY:
                if (!tsr_parse_bool(arg, &o->dm.identify_by_kubelet))
                        break;
                return 0;
        case OPT_GATE:
                if (!tsr_parse_bool(arg, &o->dm.sliced_gate))
                        break;
                return 0;
        case OPT_RELEASE:
                if (!tsr_parse_bool(arg, &o->dm.release_terminated))
                        break;
                return 0;
        case OPT_ISOLATION:
                if (tsr_dm_isolation_parse_mode(arg, &o->dm.isolation))
                        break;
                return 0;
        case OPT_VGPU_LIBRARY:
                if (!*arg)
                        break;
                o->dm.vgpu_library = arg;
                return 0;
        case OPT_VGPU_DIR:
                if (!*arg)
                        break;
                o->dm.vgpu_dir = arg;
                return 0;
        case OPT_VGPU_HOST_DIR:
                if (*arg != '/')
                        break;
                o->dm.vgpu_host_dir = arg;
                return 0;
        case OPT_POLL:
                if (cli_parse_duration(arg, &ms) || ms < 100)
                        break;
                o->dm.poll_ms = ms;
                return 0;
        case OPT_RECLAIM:
                if (cli_parse_duration(arg, &ms) || ms < 100)
                        break;
                o->dm.reclaim_ms = ms;
                return 0;
        case OPT_PROBE_PORT:
                if (cli_parse_number(arg, -1, 65535, &o->probe_port))
                        break;
                return 0;
        case OPT_PROBE_BIND:
                o->probe_bind = arg;
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
        const char *node = getenv("NODE_NAME");
        int rc;

        memset(o, 0, sizeof(*o));
        if (gethostname(o->hostname, sizeof(o->hostname) - 1))
                o->hostname[0] = '\0';
        o->dm.node_name = node && *node ? node : o->hostname;
        o->dm.plugin_dir = "/var/lib/kubelet/device-plugins";
        o->dm.podres_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
        o->dm.pods_dir = "/var/lib/kubelet/pods";
        o->probe_port = 8083;
        o->dm.isolation = TSR_DM_ISOLATION_PRELOAD;
        o->dm.vgpu_library = TSR_DM_VGPU_LIBRARY;
        o->dm.vgpu_dir = TSR_DM_VGPU_DIR;
        if (switch_from_env("GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET",
                            &o->dm.identify_by_kubelet) ||
            switch_from_env("GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE", &o->dm.sliced_gate) ||
            switch_from_env("GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS", &o->dm.release_terminated))
                return -1;
        rc = cli_getopt(PROG, argc, argv, long_options, OPT_HELP, apply_option, o);
        if (rc)
                return rc;
        if (!o->dm.node_name[0]) {
                fprintf(stderr, PROG ": no node name: set --node-name or $NODE_NAME\n");
                return -1;
        }
        if (o->fake_state && !o->fake) {
                fprintf(stderr, PROG ": --fake-state needs --fake\n");
                return -1;
        }
        return 0;
}

/* The fake backend: loaded from --fake-state when that file exists, else made from --fake. */
static int open_fake(const struct options *o, struct tsr_fake_gpus **out, struct tsr_diag *diag)
{
        int rc;

        if (o->fake_state && access(o->fake_state, F_OK) == 0) {
                struct tsr_diag why;

                tsr_diag_clear(&why);
                rc = tsr_fake_gpus_load(o->fake_state, out, &why);
                if (rc)
                        return tsr_diag_set(diag, rc, "--fake-state %s: %s", o->fake_state,
                                            why.msg);
        } else {
                rc = tsr_fake_gpus_from_spec(o->dm.node_name, o->fake, out, diag);
                if (rc)
                        return rc;
        }
        if (o->fake_state && (rc = tsr_fake_gpus_persist(*out, o->fake_state))) {
                tsr_fake_gpus_free(*out);
                return tsr_diag_set(diag, rc, "--fake-state %s: %s", o->fake_state,
                                    tsr_strerror(rc));
        }
        return 0;
}

static int run(struct options *o)
{
        struct tsr_kube_config cfg;
        struct tsr_fake_gpus *fake = NULL;
        struct tsr_nvml *nvml = NULL;
        struct tsr_dm_daemon *d = NULL;
        struct tsr_probe_server *probes = NULL;
        struct tsr_diag diag;
        char port[16];
        sigset_t set;
        int rc, sig = 0;

        cli_block_signals(&set);
        tsr_diag_clear(&diag);
        if (o->fake) {
                rc = open_fake(o, &fake, &diag);
                o->dm.gpus = (struct tsr_mig_gpus){&tsr_fake_gpu_ops, fake};
        } else {
                rc = tsr_nvml_open(o->nvml_library, &nvml, &diag);
                o->dm.gpus = (struct tsr_mig_gpus){&tsr_nvml_gpu_ops, nvml};
        }
        if (rc) {
                fprintf(stderr, PROG ": %s\n", diag.msg);
                return 2;
        }
        tsr_kube_config_init(&cfg);
        rc = cli_load_kube_config(o->kubeconfig, o->context, &cfg, &diag);
        if (!rc)
                rc = tsr_kube_client_new(&cfg, NULL, &o->dm.client, &diag);
        tsr_kube_config_release(&cfg);
        if (!rc)
                rc = tsr_dm_daemon_start(&o->dm, &d, &diag);
        if (!rc && o->probe_port >= 0) {
                struct tsr_probe_server_config pc = {
                    .bind = o->probe_bind,
                    .port = (unsigned)o->probe_port,
                    .ready = tsr_dm_daemon_ready,
                    .metrics = tsr_dm_daemon_metrics,
                    .ctx = d,
                };

                rc = tsr_probe_server_start(&pc, &probes, &diag);
        }
        if (rc) {
                fprintf(stderr, PROG ": %s\n", diag.msg);
                rc = 2;
                goto out;
        }
        snprintf(port, sizeof(port), "%u", probes ? tsr_probe_server_port(probes) : 0);
        tsr_log(TSR_LOG_INFO, "serving", "node", o->dm.node_name, "plugin_dir", o->dm.plugin_dir,
                "probe_port", port, "version", tsr_version(), "revision", tsr_revision(), NULL);
        sigwait(&set, &sig);
        tsr_log(TSR_LOG_INFO, "shutting down", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                NULL);
out:
        tsr_probe_server_stop(probes);
        tsr_dm_daemon_stop(d);
        if (!rc)
                tsr_log(TSR_LOG_INFO, "stopped", NULL);
        tsr_kube_client_free(o->dm.client);
        tsr_fake_gpus_free(fake);
        tsr_nvml_close(nvml);
        return rc;
}

int cli_device_manager(int argc, char **argv)
{
        struct options o;
        int rc = parse_options(argc, argv, &o);

        if (rc)
                return rc > 0 ? 0 : 2;
        return run(&o);
}
