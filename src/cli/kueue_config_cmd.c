/*
 * kueue_config_cmd.c - `tessera kueue-config`: options, then the Configuration on stdout.
 */
#include "cli/kueue_config_cmd.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "codec/json_yaml.h"
#include "codec/kueue_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "tessera kueue-config"

static void usage(FILE *f)
{
        fputs("usage: tessera kueue-config [-o yaml|json] [--namespace NS]\n\n"
              "Prints the Kueue Configuration (config.kueue.x-k8s.io/v1beta2, for Kueue v0.17.0)\n"
              "that tessera's queues need: the credits transformations of every manufacturer,\n"
              "the feature gates, the pod integration and the namespaces Kueue leaves alone.\n"
              "Add the deployment's own fields (webhook, certificates, leader election,\n"
              "metrics, health) before handing it to Kueue; docs/kueue-config.md explains each\n"
              "field.\n\n"
              "  -o, --output FORMAT  yaml (default) or json\n"
              "  -n, --namespace NS   the release namespace: Kueue's own, and excluded from\n"
              "                       managedJobsNamespaceSelector with kube-system "
              "(default " TSR_KUEUE_CONFIG_NAMESPACE ")\n",
              f);
}

int cli_kueue_config(int argc, char **argv)
{
        const char *format = "yaml", *ns = TSR_KUEUE_CONFIG_NAMESPACE;
        struct tsr_buf out = TSR_BUF_INIT;
        struct tsr_diag diag;
        json_t *cfg;
        char *text = NULL;
        int rc;

        for (int i = 1; i < argc; i++) {
                const char **slot = !strcmp(argv[i], "-o") || !strcmp(argv[i], "--output") ? &format
                                    : !strcmp(argv[i], "-n") || !strcmp(argv[i], "--namespace")
                                        ? &ns
                                        : NULL;

                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        usage(stdout);
                        return 0;
                }
                if (!slot || i + 1 == argc) {
                        usage(stderr);
                        return 2;
                }
                *slot = argv[++i];
        }
        if (strcmp(format, "yaml") && strcmp(format, "json")) {
                fprintf(stderr, PROG ": -o takes yaml or json, not \"%s\"\n", format);
                return 2;
        }
        rc = tsr_kueue_config(ns, &cfg, &diag);
        if (rc) {
                fprintf(stderr, PROG ": %s\n", diag.msg);
                return 2;
        }
        if (!strcmp(format, "json")) {
                text = json_dumps(cfg, JSON_INDENT(2));
                rc = text ? tsr_buf_addf(&out, "%s\n", text) : TSR_ENOMEM;
                if (rc)
                        tsr_diag_set(&diag, rc, "out of memory");
        } else {
                rc = tsr_json_yaml_emit(cfg, &out, &diag);
        }
        json_decref(cfg);
        free(text);
        if (rc) {
                fprintf(stderr, PROG ": %s\n", diag.msg);
                tsr_buf_release(&out);
                return 1;
        }
        fwrite(out.ptr, 1, out.len, stdout);
        tsr_buf_release(&out);
        return fflush(stdout) ? 1 : 0;
}
