/*
 * main.c - the `tessera` command: git-style subcommands, each a thin shell over the libraries.
 * Exit status: 0 success, 2 for a malformed input or usage error, 1 for any other failure.
 */
#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "base/version.h"
#include "cli/controller_cmd.h"
#include "cli/device_manager_cmd.h"
#include "cli/kueue_config_cmd.h"
#include "cli/nvml_cmd.h"
#include "cli/read_file.h"
#include "cli/replay_cmd.h"
#include "cli/webhook_cmd.h"
#include "sim/scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCENARIO_MAX ((size_t)16 << 20)

static void usage(FILE *f)
{
        fputs("usage: tessera <command> [args]\n\n"
              "commands:\n"
              "  sim FILE.yaml   run a scenario against a virtual cluster (SCENARIOS.md)\n"
              "  webhook [opts]  serve the admission webhooks over HTTPS (tessera webhook --help)\n"
              "  controller [opts]  the node feature labels, the Kueue chain and the\n"
              "                  gpustack-node-devices AdmissionCheck (tessera controller --help)\n"
              "  device-manager [opts]  serve a node's accelerators to the kubelet\n"
              "                  (tessera device-manager --help)\n"
              "  replay [opts]   replay a GPU trace under the FGD protocol, every policy\n"
              "                  side by side (tessera replay --help)\n"
              "  kueue-config [opts]  print the Kueue Configuration the chain needs\n"
              "                  (tessera kueue-config --help)\n"
              "  nvml probe      show, read-only, what the GPU driver sees (tessera nvml --help)\n"
              "  version         show the release and source revision (also --version)\n"
              "  help            show this text\n",
              f);
}

static int cmd_sim(int argc, char **argv)
{
        struct tsr_buf text = TSR_BUF_INIT, out = TSR_BUF_INIT;
        struct tsr_diag diag;
        int rc;

        if (argc != 2) {
                fputs("usage: tessera sim FILE.yaml\n", stderr);
                return 2;
        }
        rc = cli_read_file(argv[1], SCENARIO_MAX, &text);
        if (rc) {
                fprintf(stderr, "%s: %s\n", argv[1],
                        rc == TSR_ETOOBIG ? "larger than 16 MiB" : "cannot read the file");
                tsr_buf_release(&text);
                return 2;
        }
        rc = sim_scenario_run(argv[1], text.ptr, text.len, &out, &diag);
        fwrite(out.ptr, 1, out.len, stdout);
        fflush(stdout);
        if (rc)
                fprintf(stderr, "%s:%u: %s\n", argv[1], diag.line ? diag.line : 1,
                        diag.msg[0] ? diag.msg : tsr_strerror(rc));
        tsr_buf_release(&text);
        tsr_buf_release(&out);
        return rc ? 2 : 0;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        if (!strcmp(argv[1], "sim"))
                return cmd_sim(argc - 1, argv + 1);
        if (!strcmp(argv[1], "webhook"))
                return cli_webhook(argc - 1, argv + 1);
        if (!strcmp(argv[1], "controller"))
                return cli_controller(argc - 1, argv + 1);
        if (!strcmp(argv[1], "device-manager"))
                return cli_device_manager(argc - 1, argv + 1);
        if (!strcmp(argv[1], "replay"))
                return cli_replay(argc - 1, argv + 1);
        if (!strcmp(argv[1], "kueue-config"))
                return cli_kueue_config(argc - 1, argv + 1);
        if (!strcmp(argv[1], "nvml"))
                return cli_nvml(argc - 1, argv + 1);
        if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
                printf("tessera %s (revision %s)\n", tsr_version(), tsr_revision());
                return 0;
        }
        if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
                usage(stdout);
                return 0;
        }
        fprintf(stderr, "tessera: unknown command \"%s\"\n", argv[1]);
        usage(stderr);
        return 2;
}
