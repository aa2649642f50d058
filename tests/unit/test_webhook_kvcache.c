/*
 * test_webhook_kvcache.c - webhook/kvcache and webhook/kvcache_launch: the KV-cache injection
 * webhook and its launch-command parser.
 *
 * The parser, table-driven: the engines' entry points, each transparent launcher's grammar
 * (env assignments, operands, bundles, long options and their unique prefixes, -S / --split-string
 * in every spelling; tini, dumb-init, timeout's DURATION, busybox's applet), a launcher with
 * nothing after it, a shell's -c wherever it sits (command or args, bundled, behind launchers,
 * never exempted by the declaration), scripts (.sh directly or through a shell), the entrypoint
 * and run wrappers, the other engine's entry point, unknown programs, and what the forwarding
 * declaration admits (launchProgram, launchArgsForwarded).
 *
 * The handler, against a fixture of Bindings, pools and backends read through the ext lookup:
 * whole injected Pods compared for vLLM (file vehicle), vLLM-Ascend (connector, ascend transport),
 * SGLang (environment vehicle, in-place overwrite, metric toggles kept, the hierarchical cache
 * flag), a multi-tenancy-disabled pool (no tenant) and the dtype Setting off; every refusal row
 * with its exact 403 message; Pods the webhook leaves alone; the plain handler failing closed
 * without KV-cache readers; the UPDATE freeze; an allocation-failure loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "webhook/kvcache.h"
#include "webhook/kvcache_launch.h"

#include "support/failing_alloc.h"
#include "support/json_text.h"
#include "support/review_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the launch parser -------------------------------------------------------------------- */

#define V  TSR_KVCACHE_ENGINE_VLLM
#define SG TSR_KVCACHE_ENGINE_SGLANG

struct lrow {
        const char *cmd[8], *args[8]; /* NULL-terminated */
        enum tsr_kvcache_engine engine;
        bool declared;
        enum tsr_kvcache_launch_verdict want;
        const char *program; /* launchProgram */
        const char *token;   /* NULL: not checked */
};

static const struct lrow lrows[] = {
    /* the entry points */
    {{"vllm"}, {"serve", "Qwen/Qwen3-8B"}, V, false, TSR_LAUNCH_ENGINE, "vllm", NULL},
    {{"/usr/local/bin/vllm", "serve"},
     {0},
     V,
     false,
     TSR_LAUNCH_ENGINE,
     "/usr/local/bin/vllm",
     NULL},
    {{"vllm"}, {0}, V, true, TSR_LAUNCH_ENGINE, "vllm", NULL},
    {{"python3", "-m", "sglang.launch_server"},
     {"--model-path", "m"},
     SG,
     false,
     TSR_LAUNCH_ENGINE,
     "python3",
     NULL},
    {{"python3"}, {"-u", "-msglang.launch_server"}, SG, false, TSR_LAUNCH_ENGINE, "python3", NULL},
    {{"/usr/bin/python3.11", "-X", "dev", "-W", "ignore", "-m", "sglang.launch_server"},
     {0},
     SG,
     false,
     TSR_LAUNCH_ENGINE,
     "/usr/bin/python3.11",
     NULL},
    {{"python", "-um", "sglang.launch_server"}, {0}, SG, false, TSR_LAUNCH_ENGINE, "python", NULL},
    /* transparent launchers */
    {{"tini", "--", "vllm", "serve"}, {0}, V, false, TSR_LAUNCH_ENGINE, "vllm", NULL},
    {{"tini", "--"}, {"vllm", "serve"}, V, false, TSR_LAUNCH_ENGINE, "vllm", NULL},
    {{"/sbin/tini", "-s", "-p", "SIGTERM", "-e", "143", "--", "vllm"},
     {0},
     V,
     false,
     TSR_LAUNCH_ENGINE,
     "vllm",
     NULL},
    {{"dumb-init", "--rewrite", "15:2", "vllm"}, {0}, V, false, TSR_LAUNCH_ENGINE, "vllm", NULL},
    {{"dumb-init", "-r15:2", "--single-child", "vllm"},
     {0},
     V,
     false,
     TSR_LAUNCH_ENGINE,
     "vllm",
     NULL},
    {{"env", "-i", "FOO=1", "-u", "BAR", "PATH=/opt/bin:/usr/bin", "vllm"},
     {0},
     V,
     false,
     TSR_LAUNCH_ENGINE,
     "vllm",
     NULL},
    {{"/usr/bin/env", "-iuBAR", "--chdir", "/srv", "--unset=X", "-", "vllm"},
     {0},
     V,
     false,
     TSR_LAUNCH_ENGINE,
     "vllm",
     NULL},
    {{"env", "--uns", "BAR", "vllm"}, {0}, V, false, TSR_LAUNCH_ENGINE, "vllm", NULL},
    {{"timeout", "-s", "KILL", "--kill-after=5", "30", "vllm"},
     {0},
     V,
     false,
     TSR_LAUNCH_ENGINE,
     "vllm",
     NULL},
    {{"tini", "--", "env", "A=1", "timeout", "10", "vllm"},
     {0},
     V,
     false,
     TSR_LAUNCH_ENGINE,
     "vllm",
     NULL},
    {{"busybox", "env", "vllm"}, {0}, V, false, TSR_LAUNCH_ENGINE, "vllm", NULL},
    /* a launcher with nothing after it */
    {{"tini", "--"}, {0}, V, false, TSR_LAUNCH_EMPTY_LAUNCHER, "", "tini"},
    {{"tini", "--"}, {0}, V, true, TSR_LAUNCH_EMPTY_LAUNCHER, "", "tini"},
    {{"env", "A=1"}, {0}, V, false, TSR_LAUNCH_EMPTY_LAUNCHER, "", "env"},
    {{"timeout", "30"}, {0}, V, false, TSR_LAUNCH_EMPTY_LAUNCHER, "", "timeout"},
    {{"busybox"}, {0}, V, false, TSR_LAUNCH_EMPTY_LAUNCHER, "", "busybox"},
    {{"tini", "-p"}, {0}, V, false, TSR_LAUNCH_EMPTY_LAUNCHER, "", "tini"},
    /* a command line hidden in one argument */
    {{"env", "-S", "vllm serve"}, {0}, V, false, TSR_LAUNCH_SPLIT_STRING, "", "env"},
    {{"env", "-S", "vllm serve"}, {0}, V, true, TSR_LAUNCH_FORWARDED, "", "env"},
    {{"env", "-Svllm serve"}, {0}, V, false, TSR_LAUNCH_SPLIT_STRING, "", "env"},
    {{"env", "-iS", "sh -c x"}, {0}, V, false, TSR_LAUNCH_SPLIT_STRING, "", "env"},
    {{"env", "--split-string=sh -c x", "trailing"},
     {0},
     V,
     false,
     TSR_LAUNCH_SPLIT_STRING,
     "",
     "env"},
    {{"env", "--split-string", "x"}, {0}, V, false, TSR_LAUNCH_SPLIT_STRING, "", "env"},
    {{"env", "--sp", "x"}, {0}, V, false, TSR_LAUNCH_SPLIT_STRING, "", "env"},
    {{"tini", "--", "env", "-S", "x"}, {0}, V, false, TSR_LAUNCH_SPLIT_STRING, "", "env"},
    /* a shell's -c, never exempted */
    {{"/bin/sh", "-c", "vllm serve"}, {0}, V, false, TSR_LAUNCH_SHELL_COMMAND, "/bin/sh", "-c"},
    {{"/bin/sh", "-c"}, {"vllm serve"}, V, true, TSR_LAUNCH_SHELL_COMMAND, "/bin/sh", "-c"},
    {{"/bin/sh"}, {"-c", "vllm serve"}, V, false, TSR_LAUNCH_SHELL_COMMAND, "/bin/sh", "-c"},
    {{"bash", "-euo", "pipefail", "-c", "x"},
     {0},
     V,
     false,
     TSR_LAUNCH_SHELL_COMMAND,
     "bash",
     "-c"},
    {{"bash", "--rcfile", "/x", "-lc", "x"},
     {0},
     V,
     false,
     TSR_LAUNCH_SHELL_COMMAND,
     "bash",
     "-lc"},
    {{"env", "-C", "/tmp", "sh", "-c", "x"}, {0}, V, false, TSR_LAUNCH_SHELL_COMMAND, "sh", "-c"},
    {{"timeout", "30", "sh", "-ec", "x"}, {0}, V, false, TSR_LAUNCH_SHELL_COMMAND, "sh", "-ec"},
    {{"busybox", "sh", "-c", "x"}, {0}, V, true, TSR_LAUNCH_SHELL_COMMAND, "sh", "-c"},
    /* scripts and wrappers */
    {{"bash", "-o", "errexit", "/app/start.sh"},
     {0},
     V,
     false,
     TSR_LAUNCH_SCRIPT,
     "bash",
     "/app/start.sh"},
    {{"sh", "/app/run.sh", "-c", "cfg"}, {0}, V, false, TSR_LAUNCH_SCRIPT, "sh", "/app/run.sh"},
    {{"sh", "--", "serve.sh"}, {0}, V, false, TSR_LAUNCH_SCRIPT, "sh", "serve.sh"},
    {{"./run.sh"}, {0}, V, false, TSR_LAUNCH_SCRIPT, "./run.sh", "./run.sh"},
    {{"./run.sh"}, {0}, V, true, TSR_LAUNCH_FORWARDED, "./run.sh", "./run.sh"},
    {{"sh", "/app/run.sh"}, {0}, V, true, TSR_LAUNCH_FORWARDED, "sh", "/app/run.sh"},
    {{"/entrypoint"}, {"vllm"}, V, false, TSR_LAUNCH_WRAPPER, "/entrypoint", "/entrypoint"},
    {{"run"}, {0}, SG, true, TSR_LAUNCH_FORWARDED, "run", "run"},
    /* the other engine */
    {{"python3", "-m", "sglang.launch_server"},
     {0},
     V,
     false,
     TSR_LAUNCH_OTHER_ENGINE,
     "python3",
     "sglang.launch_server"},
    {{"python3", "-m", "sglang.launch_server"},
     {0},
     V,
     true,
     TSR_LAUNCH_OTHER_ENGINE,
     "python3",
     NULL},
    {{"vllm", "serve"}, {0}, SG, true, TSR_LAUNCH_OTHER_ENGINE, "vllm", "vllm"},
    {{"python3", "-m", "vllm.entrypoints.openai.api_server"},
     {0},
     SG,
     false,
     TSR_LAUNCH_OTHER_ENGINE,
     "python3",
     NULL},
    {{"sglang"}, {"serve"}, V, false, TSR_LAUNCH_OTHER_ENGINE, "sglang", NULL},
    /* unrecognised: admitted only by the declaration */
    {{"python3", "-m", "vllm.entrypoints.openai.api_server"},
     {0},
     V,
     false,
     TSR_LAUNCH_UNRECOGNISED,
     "python3",
     NULL},
    {{"python3", "-m", "vllm.entrypoints.openai.api_server"},
     {0},
     V,
     true,
     TSR_LAUNCH_FORWARDED,
     "python3",
     NULL},
    {{"python3", "-c", "import sglang"}, {0}, SG, false, TSR_LAUNCH_UNRECOGNISED, "python3", "-c"},
    {{"python3", "serve.py"}, {0}, SG, false, TSR_LAUNCH_UNRECOGNISED, "python3", "python3"},
    {{"python3", "-m"}, {0}, SG, false, TSR_LAUNCH_UNRECOGNISED, "python3", NULL},
    {{"gosu", "app", "vllm"}, {0}, V, false, TSR_LAUNCH_UNRECOGNISED, "gosu", "gosu"},
    {{"sh", "-e"}, {0}, V, false, TSR_LAUNCH_UNRECOGNISED, "sh", NULL},
    {{""}, {0}, V, false, TSR_LAUNCH_UNRECOGNISED, "", NULL},
    {{"my-server"}, {0}, V, true, TSR_LAUNCH_FORWARDED, "my-server", NULL},
    /* no command */
    {{0}, {0}, V, false, TSR_LAUNCH_NO_COMMAND, "", NULL},
    {{0}, {0}, V, true, TSR_LAUNCH_NO_COMMAND, "", NULL},
    {{0}, {"serve"}, V, false, TSR_LAUNCH_ARGS_ONLY, "", NULL},
    {{0}, {"serve"}, V, true, TSR_LAUNCH_FORWARDED, "", NULL},
};

static size_t count(const char *const *v)
{
        size_t n = 0;

        while (n < 8 && v[n])
                n++;
        return n;
}

static void test_launch__table(void **state)
{
        char msg[2048];

        (void)state;
        for (size_t i = 0; i < N_ELEMS(lrows); i++) {
                const struct lrow *r = &lrows[i];
                struct tsr_kvcache_launch l;
                bool admitted;

                tsr_kvcache_launch_resolve(r->cmd, count(r->cmd), r->args, count(r->args),
                                           r->engine, r->declared, &l);
                if (l.verdict != r->want || strcmp(l.program, r->program) ||
                    (r->token && strcmp(l.token, r->token)))
                        fail_msg("row %zu (%s ...): verdict %d program \"%s\" token \"%s\", want "
                                 "%d \"%s\" \"%s\"",
                                 i, r->cmd[0] ? r->cmd[0] : "-", l.verdict, l.program, l.token,
                                 r->want, r->program, r->token ? r->token : "*");
                admitted = r->want == TSR_LAUNCH_ENGINE || r->want == TSR_LAUNCH_FORWARDED;
                assert_int_equal(tsr_kvcache_launch_admitted(&l), admitted);
                assert_int_equal(l.forwarded, r->want == TSR_LAUNCH_FORWARDED);
                tsr_kvcache_launch_message(&l, "server", r->engine, msg, sizeof(msg));
                assert_int_equal(msg[0] == '\0', admitted);
        }
}

/* ---- the handler fixture ------------------------------------------------------------------ */

#define LEDGER_TRUE "\"conditions\":[{\"type\":\"QuotaLedgerAvailable\",\"status\":\"True\"}]"
#define BINDING(pool, extra)                                                                       \
        "{\"metadata\":{\"namespace\":\"team-a\"},\"spec\":{\"poolRef\":{\"name\":\"" pool "\"},"  \
        "\"domain\":{\"name\":\"team-a-chat\",\"blockSize\":16,\"dtype\":\"fp8\"}}" extra "}"
#define POOL(backend, status) "{\"spec\":{\"backends\":[\"" backend "\"]},\"status\":{" status "}}"
#define EP                    "\"clientEndpoint\":\"pool-a.gpustack-system:50051\","

/* The fixture objects, by kind: {key, JSON} rows (a Binding's key is namespace/name). */
struct fixture_row {
        const char *key, *json;
};

static const struct fixture_row bindings[] = {
    {"team-a/chat", BINDING("pool-a", "")},
    {"team-a/gone", "{\"metadata\":{\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},"
                    "\"spec\":{\"poolRef\":{\"name\":\"pool-a\"}}}"},
    {"team-a/nopool", BINDING("missing", "")},
    {"team-a/single", BINDING("pool-single", "")},
    {"team-a/unknown", BINDING("pool-unknown", "")},
    {"team-a/down", BINDING("pool-down", "")},
    {"team-a/nocond", BINDING("pool-nocond", "")},
    {"team-a/noep", BINDING("pool-noep", "")},
    {"team-a/nobackend", BINDING("pool-nobackend", "")},
    {"team-a/lostbackend", BINDING("pool-lostbackend", "")},
    {"team-a/mixed", BINDING("pool-mixed", "")},
    {"team-a/cann", BINDING("pool-cann", "")},
    {"team-a/weird", BINDING("pool-weird", "")},
    {"team-a/nodtype",
     "{\"spec\":{\"poolRef\":{\"name\":\"pool-a\"},\"domain\":{\"name\":\"d\"}}}"},
};

static const struct fixture_row pools[] = {
    {"pool-a", POOL("be-tcp", EP LEDGER_TRUE)},
    {"pool-single", POOL("be-tcp", EP "\"conditions\":[{\"type\":\"QuotaLedgerAvailable\","
                                      "\"status\":\"False\",\"reason\":\"MultiTenancyDisabled\","
                                      "\"message\":\"off\"}]")},
    {"pool-unknown", POOL("be-tcp", EP "\"conditions\":[{\"type\":\"QuotaLedgerAvailable\","
                                       "\"status\":\"Unknown\"}]")},
    {"pool-down", POOL("be-tcp", EP "\"conditions\":[{\"type\":\"QuotaLedgerAvailable\","
                                    "\"status\":\"False\",\"reason\":\"LedgerUnreachable\","
                                    "\"message\":\"GET /tenants: connection refused\"}]")},
    {"pool-nocond", POOL("be-tcp", EP "\"conditions\":[]")},
    {"pool-noep", POOL("be-tcp", LEDGER_TRUE)},
    {"pool-nobackend", "{\"spec\":{},\"status\":{" EP LEDGER_TRUE "}}"},
    {"pool-lostbackend", POOL("be-lost", EP LEDGER_TRUE)},
    {"pool-mixed", POOL("be-mixed", EP LEDGER_TRUE)},
    {"pool-cann", POOL("be-cann", EP LEDGER_TRUE)},
    {"pool-weird", POOL("be-weird", EP LEDGER_TRUE)},
};

static const struct fixture_row backends[] = {
    {"be-tcp", "{\"metadata\":{\"name\":\"be-tcp\"},"
               "\"spec\":{\"transport\":{\"protocol\":\"TCP\"}}}"},
    {"be-mixed", "{\"metadata\":{\"name\":\"be-mixed\"},\"spec\":{\"connection\":{\"managed\":"
                 "{\"members\":[{\"transport\":{\"protocol\":\"RDMA\"}},{},"
                 "{\"transport\":{\"protocol\":\"RDMA\"}}]}}}}"},
    {"be-cann", "{\"metadata\":{\"name\":\"be-cann\"},\"spec\":{\"transport\":{\"protocol\":"
                "\"TCP\"},\"connection\":{\"managed\":{\"members\":[{},"
                "{\"transport\":{\"protocol\":\"CANN\"}}]}}}}"},
    {"be-weird", "{\"metadata\":{\"name\":\"be-weird\"},"
                 "\"spec\":{\"transport\":{\"protocol\":\"Carrier-Pigeon\"}}}"},
};

static json_t *fixture_object(const struct fixture_row *rows, size_t n)
{
        json_t *o = json_object();

        for (size_t i = 0; i < n; i++)
                json_object_set_new(o, rows[i].key, json_fx_load(rows[i].json));
        return o;
}

static json_t *fixture;

static json_t *get(const char *kind, const char *key)
{
        json_t *o = json_object_get(json_object_get(fixture, kind), key);

        return o ? json_incref(o) : NULL;
}

static json_t *lookup_binding(void *ctx, const char *ns, const char *name)
{
        char key[512];

        (void)ctx;
        snprintf(key, sizeof(key), "%s/%s", ns, name);
        return get("bindings", key);
}

static json_t *lookup_pool(void *ctx, const char *name)
{
        (void)ctx;
        return get("pools", name);
}

static json_t *lookup_backend(void *ctx, const char *name)
{
        (void)ctx;
        return get("backends", name);
}

static void lookup_init(struct tsr_webhook_lookup *x)
{
        tsr_webhook_lookup_init(x);
        x->kvcache_binding = lookup_binding;
        x->kvcache_pool = lookup_pool;
        x->kvcache_backend = lookup_backend;
}

static int setup(void **state)
{
        (void)state;
        fixture = json_object();
        json_object_set_new(fixture, "bindings", fixture_object(bindings, N_ELEMS(bindings)));
        json_object_set_new(fixture, "pools", fixture_object(pools, N_ELEMS(pools)));
        json_object_set_new(fixture, "backends", fixture_object(backends, N_ELEMS(backends)));
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        json_decref(fixture);
        return 0;
}

/* A labelled Pod in team-a with the given annotation members and containers. */
#define POD(annotations, containers)                                                               \
        "{\"metadata\":{\"name\":\"chat-0\",\"namespace\":\"team-a\",\"labels\":"                  \
        "{\"kvcache.gpustack.ai/inject\":\"true\"},\"annotations\":{" annotations "}},"            \
        "\"spec\":{\"containers\":[" containers "]}}"
#define A_VLLM "\"kvcache.gpustack.ai/binding\":\"chat\",\"kvcache.gpustack.ai/engine\":\"vLLM\""
#define A_SGLANG                                                                                   \
        "\"kvcache.gpustack.ai/binding\":\"chat\",\"kvcache.gpustack.ai/engine\":\"SGLang\""
#define A_BIND(b, e)                                                                               \
        "\"kvcache.gpustack.ai/binding\":\"" b "\",\"kvcache.gpustack.ai/engine\":\"" e "\""
#define C_VLLM "{\"name\":\"server\",\"command\":[\"vllm\"],\"args\":[\"serve\",\"m\"]}"
#define C_SGLANG                                                                                   \
        "{\"name\":\"server\",\"command\":[\"python3\",\"-m\",\"sglang.launch_server\"],"          \
        "\"args\":[\"--model-path\",\"m\"]}"

static int mutate(const struct tsr_webhook_lookup *x, const char *op, const char *pod,
                  struct tsr_verdict *v, struct tsr_diag *diag)
{
        return review_fx_run(tsr_webhook_kvcache_mutate, x, op, "team-a", pod, NULL, v, diag);
}

/* ---- injected Pods ------------------------------------------------------------------------ */

#define CLIENT(protocol, tenant)                                                                   \
        "{\\\"metadata_server\\\":\\\"P2PHANDSHAKE\\\",\\\"master_server_address\\\":"             \
        "\\\"pool-a.gpustack-system:50051\\\",\\\"protocol\\\":\\\"" protocol "\\\","              \
        "\\\"device_name\\\":\\\"\\\",\\\"mode\\\":\\\"standalone-store\\\","                      \
        "\\\"global_segment_size\\\":0,\\\"local_buffer_size\\\":134217728" tenant "}"
#define TENANT ",\\\"tenant_id\\\":\\\"team-a-chat\\\""
#define VOLUME                                                                                     \
        "\"volumes\":[{\"name\":\"gpustack-kvcache-config\",\"downwardAPI\":{\"items\":[{"         \
        "\"path\":\"mooncake.json\",\"fieldRef\":{\"fieldPath\":"                                  \
        "\"metadata.annotations['kvcache.gpustack.ai/client-config']\"}}]}}]"
#define MOUNT                                                                                      \
        "\"volumeMounts\":[{\"name\":\"gpustack-kvcache-config\",\"mountPath\":"                   \
        "\"/etc/gpustack/kvcache\",\"readOnly\":true}]"
#define METRICS                                                                                    \
        "{\"name\":\"MC_TE_METRIC\",\"value\":\"1\"},{\"name\":"                                   \
        "\"MC_STORE_CLIENT_METRIC_BANDWIDTH\",\"value\":\"1\"}"
#define RECORD(binding, engine, vehicle, tenant, program, fwd)                                     \
        "{\\\"binding\\\":\\\"" binding "\\\",\\\"engine\\\":\\\"" engine "\\\","                  \
        "\\\"vehicle\\\":\\\"" vehicle "\\\",\\\"domain\\\":\\\"team-a-chat\\\","                  \
        "\\\"tenantInjected\\\":" tenant ",\\\"launchProgram\\\":\\\"" program "\\\","             \
        "\\\"launchArgsForwarded\\\":" fwd "}"

struct irow {
        const char *name;
        bool dtype_owned;
        const char *pod;
        const char *want;
};

static const struct irow irows[] = {
    {"vLLM: the file vehicle", true, POD(A_VLLM, C_VLLM),
     "{\"metadata\":{\"name\":\"chat-0\",\"namespace\":\"team-a\",\"labels\":"
     "{\"kvcache.gpustack.ai/inject\":\"true\"},\"annotations\":{" A_VLLM ","
     "\"kvcache.gpustack.ai/client-config\":\"" CLIENT(
         "tcp", TENANT) "\","
                        "\"kvcache.gpustack.ai/injected\":\"" RECORD(
                            "chat", "vllm", "file", "true", "vllm",
                            "false") "\"}},"
                                     "\"spec\":{\"containers\":[{\"name\":\"server\",\"command\":["
                                     "\"vllm\"],\"args\":[\"serve\","
                                     "\"m\",\"--kv-transfer-config\",\"{\\\"kv_connector\\\":"
                                     "\\\"MooncakeStoreConnector\\\","
                                     "\\\"kv_role\\\":\\\"kv_both\\\"}\",\"--kv-cache-dtype\","
                                     "\"fp8\"],\"env\":[{\"name\":"
                                     "\"MOONCAKE_CONFIG_PATH\",\"value\":\"/etc/gpustack/kvcache/"
                                     "mooncake.json\"}," METRICS "]," MOUNT "}]," VOLUME "}}"},
    {"vLLM-Ascend, Decode, two containers, the CANN group chosen", true,
     POD(A_BIND("cann", "vLLM") ",\"kvcache.gpustack.ai/manufacturer\":\"ascend\","
                                "\"kvcache.gpustack.ai/role\":\"Decode\","
                                "\"kvcache.gpustack.ai/container\":\"server\"",
         "{\"name\":\"sidecar\"}," C_VLLM),
     "{\"metadata\":{\"name\":\"chat-0\",\"namespace\":\"team-a\",\"labels\":"
     "{\"kvcache.gpustack.ai/inject\":\"true\"},\"annotations\":{" A_BIND(
         "cann",
         "vLLM") ",\"kvcache.gpustack.ai/manufacturer\":\"ascend\",\"kvcache.gpustack.ai/"
                 "role\":\"Decode\","
                 "\"kvcache.gpustack.ai/container\":\"server\","
                 "\"kvcache.gpustack.ai/client-config\":\"" CLIENT(
                     "ascend",
                     TENANT) "\","
                             "\"kvcache.gpustack.ai/injected\":\"" RECORD(
                                 "cann", "vllm-ascend", "file", "true", "vllm",
                                 "false") "\"}},"
                                          "\"spec\":{\"containers\":[{\"name\":\"sidecar\"},{"
                                          "\"name\":\"server\",\"command\":"
                                          "[\"vllm\"],\"args\":[\"serve\",\"m\",\"--kv-transfer-"
                                          "config\",\"{\\\"kv_connector\\\":"
                                          "\\\"AscendStoreConnector\\\",\\\"kv_role\\\":\\\"kv_"
                                          "consumer\\\"}\",\"--kv-cache-dtype\","
                                          "\"fp8\"],\"env\":[{\"name\":\"MOONCAKE_CONFIG_PATH\","
                                          "\"value\":"
                                          "\"/etc/gpustack/kvcache/mooncake.json\"}," METRICS
                                          "]," MOUNT "}]," VOLUME "}}"},
    {"vLLM on a multi-tenancy-disabled pool, forwarded launcher, dtype not owned", false,
     POD(A_BIND("single", "vLLM") ",\"kvcache.gpustack.ai/launch-args-forwarded\":\"true\"",
         "{\"name\":\"server\",\"command\":[\"/opt/launch\"],\"args\":[\"--kv-cache-dtype\","
         "\"auto\"]}"),
     "{\"metadata\":{\"name\":\"chat-0\",\"namespace\":\"team-a\",\"labels\":"
     "{\"kvcache.gpustack.ai/inject\":\"true\"},\"annotations\":{" A_BIND(
         "single", "vLLM") ",\"kvcache.gpustack.ai/launch-args-forwarded\":\"true\","
                           "\"kvcache.gpustack.ai/client-config\":\"" CLIENT(
                               "tcp",
                               "") "\","
                                   "\"kvcache.gpustack.ai/injected\":\"" RECORD(
                                       "single", "vllm", "file", "false", "/opt/launch",
                                       "true") "\"}},"
                                               "\"spec\":{\"containers\":[{\"name\":\"server\","
                                               "\"command\":[\"/opt/launch\"],\"args\":"
                                               "[\"--kv-cache-dtype\",\"auto\",\"--kv-transfer-"
                                               "config\",\"{\\\"kv_connector\\\":"
                                               "\\\"MooncakeStoreConnector\\\",\\\"kv_role\\\":"
                                               "\\\"kv_both\\\"}\"],\"env\":[{\"name\":"
                                               "\"MOONCAKE_CONFIG_PATH\",\"value\":\"/etc/gpustack/"
                                               "kvcache/mooncake.json\"}," METRICS "]," MOUNT
                                               "}]," VOLUME "}}"},
    {"SGLang: the environment vehicle, overwrite in place, toggles kept, role ignored", true,
     POD(A_SGLANG ",\"kvcache.gpustack.ai/role\":\"Prefill\",\"app\":\"x\"",
         "{\"name\":\"server\",\"command\":[\"tini\",\"--\",\"python3\",\"-m\","
         "\"sglang.launch_server\"],\"env\":[{\"name\":\"MOONCAKE_MASTER\",\"value\":\"old\"},"
         "{\"name\":\"MC_TE_METRIC\",\"value\":\"0\"},{\"name\":\"MOONCAKE_TENANT_ID\","
         "\"value\":\"mine\"}]}"),
     "{\"metadata\":{\"name\":\"chat-0\",\"namespace\":\"team-a\",\"labels\":"
     "{\"kvcache.gpustack.ai/inject\":\"true\"},\"annotations\":{" A_SGLANG
     ",\"kvcache.gpustack.ai/role\":\"Prefill\",\"app\":\"x\","
     "\"kvcache.gpustack.ai/injected\":\"" RECORD(
         "chat", "sglang", "environment", "true", "python3",
         "false") "\"}},"
                  "\"spec\":{\"containers\":[{\"name\":\"server\",\"command\":[\"tini\",\"--\","
                  "\"python3\","
                  "\"-m\",\"sglang.launch_server\"],\"env\":[{\"name\":\"MOONCAKE_MASTER\","
                  "\"value\":"
                  "\"pool-a.gpustack-system:50051\"},{\"name\":\"MC_TE_METRIC\",\"value\":\"0\"},{"
                  "\"name\":"
                  "\"MOONCAKE_TENANT_ID\",\"value\":\"team-a-chat\"},{\"name\":"
                  "\"MOONCAKE_TE_META_DATA_SERVER\",\"value\":\"P2PHANDSHAKE\"},{\"name\":"
                  "\"MOONCAKE_PROTOCOL\",\"value\":\"tcp\"},{\"name\":\"MOONCAKE_DEVICE\","
                  "\"value\":\"\"},"
                  "{\"name\":\"MOONCAKE_GLOBAL_SEGMENT_SIZE\",\"value\":\"0\"},{\"name\":"
                  "\"MOONCAKE_LOCAL_HOSTNAME\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"status."
                  "podIP\"}}},"
                  "{\"name\":\"MC_STORE_CLIENT_METRIC_BANDWIDTH\",\"value\":\"1\"}],\"args\":["
                  "\"--hicache-storage-backend\",\"mooncake\",\"--kv-cache-dtype\",\"fp8\","
                  "\"--enable-hierarchical-cache\"]}]}}"},
    {"SGLang naming the hierarchical cache itself", true,
     POD(A_SGLANG, "{\"name\":\"server\",\"command\":[\"python3\",\"-m\","
                   "\"sglang.launch_server\"],\"args\":[\"--enable-hierarchical-cache\"]}"),
     "{\"metadata\":{\"name\":\"chat-0\",\"namespace\":\"team-a\",\"labels\":"
     "{\"kvcache.gpustack.ai/inject\":\"true\"},\"annotations\":{" A_SGLANG ","
     "\"kvcache.gpustack.ai/injected\":\"" RECORD(
         "chat", "sglang", "environment", "true", "python3",
         "false") "\"}},"
                  "\"spec\":{\"containers\":[{\"name\":\"server\",\"command\":[\"python3\",\"-m\","
                  "\"sglang.launch_server\"],\"args\":[\"--enable-hierarchical-cache\","
                  "\"--hicache-storage-backend\",\"mooncake\",\"--kv-cache-dtype\",\"fp8\"],"
                  "\"env\":["
                  "{\"name\":\"MOONCAKE_TENANT_ID\",\"value\":\"team-a-chat\"},{\"name\":"
                  "\"MOONCAKE_MASTER\","
                  "\"value\":\"pool-a.gpustack-system:50051\"},{\"name\":\"MOONCAKE_TE_META_DATA_"
                  "SERVER\","
                  "\"value\":\"P2PHANDSHAKE\"},{\"name\":\"MOONCAKE_PROTOCOL\",\"value\":\"tcp\"},{"
                  "\"name\":"
                  "\"MOONCAKE_DEVICE\",\"value\":\"\"},{\"name\":\"MOONCAKE_GLOBAL_SEGMENT_SIZE\","
                  "\"value\":"
                  "\"0\"},{\"name\":\"MOONCAKE_LOCAL_HOSTNAME\",\"valueFrom\":{\"fieldRef\":{"
                  "\"fieldPath\":"
                  "\"status.podIP\"}}}," METRICS "]}]}}"},
};

static void test_kvcache__inject(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(irows); i++) {
                struct tsr_webhook_lookup x;
                struct tsr_verdict v;
                struct tsr_diag diag;
                json_t *want = json_fx_load(irows[i].want);
                char *got;
                int rc;

                lookup_init(&x);
                x.settings.value[TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED] =
                    irows[i].dtype_owned;
                rc = mutate(&x, "CREATE", irows[i].pod, &v, &diag);
                if (rc)
                        fail_msg("%s: rc %s (%s)", irows[i].name, tsr_err_name(rc), diag.msg);
                if (!v.allowed || !v.patched)
                        fail_msg("%s: denied: %s", irows[i].name, v.message);
                got = json_fx_dump(v.patched);
                if (!json_equal(v.patched, want))
                        fail_msg("%s:\n got  %s\n want %s", irows[i].name, got, irows[i].want);
                free(got);
                json_decref(v.patched);
                json_decref(want);
        }
}

/* ---- refusals ----------------------------------------------------------------------------- */

struct rrow {
        const char *name;
        const char *pod;
        const char *want;
};

#define HINT "kvcache.gpustack.ai/launch-args-forwarded: \"true\""

static const struct rrow rrows[] = {
    {"a typo in a key", POD(A_VLLM ",\"kvcache.gpustack.ai/bindng\":\"chat\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/bindng\" is not one this webhook accepts; the accepted "
     "keys are kvcache.gpustack.ai/binding, kvcache.gpustack.ai/engine, "
     "kvcache.gpustack.ai/manufacturer, kvcache.gpustack.ai/role, kvcache.gpustack.ai/container, "
     "kvcache.gpustack.ai/launch-args-forwarded. A key it ignored would leave the Pod configured "
     "differently from the manifest, with nothing reporting it"},
    {"a submitted record", POD(A_VLLM ",\"kvcache.gpustack.ai/injected\":\"{}\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/injected\" is written by this webhook and may not be "
     "supplied: it records what was decided, and a submitted value would be a record of a "
     "decision nobody made"},
    {"a submitted client config",
     POD(A_VLLM ",\"kvcache.gpustack.ai/client-config\":\"{}\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/client-config\" is written by this webhook and may not be "
     "supplied: it records what was decided, and a submitted value would be a record of a "
     "decision nobody made"},
    {"a domain", POD(A_VLLM ",\"kvcache.gpustack.ai/domain\":\"d\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/domain\" is not accepted: the reuse domain comes from the "
     "KVCachePoolBinding and only from there, so that every domain this operator provisions has "
     "an object accounting for it. This is the shape of the declarative contract, not an "
     "enforcement boundary. What a Binding decides is which names EXIST: the multi-tenant master "
     "this webhook injects against refuses a name absent from its ledger. Remove it; a namespace "
     "needing two reuse boundaries gets two Bindings"},
    {"no engine", POD("\"kvcache.gpustack.ai/binding\":\"chat\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/engine\": engine \"\" is not one this operator can "
     "configure; set one of [vLLM SGLang]"},
    {"an engine in the wrong case", POD(A_BIND("chat", "vllm"), C_VLLM),
     "annotation \"kvcache.gpustack.ai/engine\": engine \"vllm\" is not one this operator can "
     "configure; set one of [vLLM SGLang]"},
    {"vllm-ascend named", POD(A_BIND("chat", "vllm-ascend"), C_VLLM),
     "annotation \"kvcache.gpustack.ai/engine\": engine \"vllm-ascend\" is not one this annotation "
     "takes: it names the Python package vllm_ascend, which the runner installs when the "
     "accelerator backend is CANN, rather than an engine anybody picks. Set \"vLLM\" and, for the "
     "Ascend runtime, annotation \"kvcache.gpustack.ai/manufacturer\": \"ascend\""},
    {"a manufacturer on SGLang",
     POD(A_SGLANG ",\"kvcache.gpustack.ai/manufacturer\":\"ascend\"", C_SGLANG),
     "annotation \"kvcache.gpustack.ai/manufacturer\" is only accepted with engine \"vLLM\""},
    {"another manufacturer", POD(A_VLLM ",\"kvcache.gpustack.ai/manufacturer\":\"nvidia\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/manufacturer\" must be \"ascend\" when declared with "
     "engine \"vLLM\", got \"nvidia\""},
    {"role Server", POD(A_VLLM ",\"kvcache.gpustack.ai/role\":\"Server\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/role\": role \"Server\" is not recognised; set "
     "\"Prefill\", \"Decode\", or leave the annotation off"},
    {"a forwarding value other than true/false",
     POD(A_VLLM ",\"kvcache.gpustack.ai/launch-args-forwarded\":\"yes\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/launch-args-forwarded\" must be \"true\" or \"false\", got "
     "\"yes\""},
    {"no binding", POD("\"kvcache.gpustack.ai/engine\":\"vLLM\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/binding\" is required: it names the KVCachePoolBinding in "
     "this namespace that provisions this Pod's grant on a pool"},
    {"a namespaced binding", POD(A_BIND("team-b/chat", "vLLM"), C_VLLM),
     "annotation \"kvcache.gpustack.ai/binding\" must be a plain name, not \"team-b/chat\": a "
     "Binding is resolved in the Pod's own namespace and there is no cross-namespace form"},
    {"two containers, none named", POD(A_VLLM, "{\"name\":\"sidecar\"}," C_VLLM),
     "the Pod has 2 containers (sidecar, server), so annotation \"kvcache.gpustack.ai/container\" "
     "must name the one running the engine; this webhook never picks the first"},
    {"an init container named",
     "{\"metadata\":{\"namespace\":\"team-a\",\"labels\":{\"kvcache.gpustack.ai/inject\":"
     "\"true\"},\"annotations\":{" A_VLLM ",\"kvcache.gpustack.ai/container\":\"init\"}},"
     "\"spec\":{\"initContainers\":[{\"name\":\"init\"}],\"containers\":[" C_VLLM "]}}",
     "annotation \"kvcache.gpustack.ai/container\" names \"init\", which is an init container: it "
     "finishes before the workload starts, so configuring it would cache nothing. Name one of: "
     "server"},
    {"an unknown container", POD(A_VLLM ",\"kvcache.gpustack.ai/container\":\"web\"", C_VLLM),
     "annotation \"kvcache.gpustack.ai/container\" names \"web\", which is not a container of "
     "this Pod. Name one of: server"},
    {"no containers", POD(A_VLLM, ""), "the Pod has no containers to inject into"},
    {"vLLM: MOONCAKE_CONFIG_PATH",
     POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"vllm\"],\"env\":[{\"name\":"
                 "\"MOONCAKE_CONFIG_PATH\",\"value\":\"/x\"}]}"),
     "container \"server\" already sets MOONCAKE_CONFIG_PATH, so it already has a KV cache "
     "configured; this webhook refuses to merge rather than leave two sources for one setting"},
    {"vLLM: a transfer config, underscored and dotted",
     POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"vllm\"],\"args\":[\"serve\","
                 "\"--kv_transfer_config.kv_role=kv_both\"]}"),
     "container \"server\" already passes --kv-transfer-config (as "
     "\"--kv_transfer_config.kv_role=kv_both\"), so it already has a KV cache configured; two of "
     "them on one command line is undiagnosable"},
    {"vLLM: a transfer config by a unique prefix, in command",
     POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"vllm\",\"serve\",\"--kv-trans\",\"{}\"]}"),
     "container \"server\" already passes --kv-transfer-config (as \"--kv-trans\"), so it already "
     "has a KV cache configured; two of them on one command line is undiagnosable"},
    {"SGLang: the storage backend",
     POD(A_SGLANG, "{\"name\":\"server\",\"command\":[\"python3\",\"-m\","
                   "\"sglang.launch_server\"],\"args\":[\"--hicache-storage-backend=file\"]}"),
     "container \"server\" already passes --hicache-storage-backend (as "
     "\"--hicache-storage-backend=file\"), so it already has a KV cache configured; two of them "
     "on one command line is undiagnosable"},
    {"SGLang: the extra config by prefix",
     POD(A_SGLANG, "{\"name\":\"server\",\"command\":[\"python3\",\"-m\","
                   "\"sglang.launch_server\"],\"args\":[\"--hicache-storage-backend-extra\","
                   "\"{}\"]}"),
     "container \"server\" sets \"--hicache-storage-backend-extra\", which selects where SGLang "
     "reads its store configuration from: every variable this webhook injects would stay on the "
     "Pod and be read by nothing. Remove it, or drop the inject label"},
    {"SGLang: its own config path",
     POD(A_SGLANG, "{\"name\":\"server\",\"command\":[\"python3\",\"-m\","
                   "\"sglang.launch_server\"],\"env\":[{\"name\":"
                   "\"SGLANG_HICACHE_MOONCAKE_CONFIG_PATH\",\"value\":\"/x\"}]}"),
     "container \"server\" sets \"SGLANG_HICACHE_MOONCAKE_CONFIG_PATH\", which selects where "
     "SGLang reads its store configuration from: every variable this webhook injects would stay "
     "on the Pod and be read by nothing. Remove it, or drop the inject label"},
    {"a dtype of its own, by prefix",
     POD(A_SGLANG, "{\"name\":\"server\",\"command\":[\"python3\",\"-m\","
                   "\"sglang.launch_server\"],\"args\":[\"--kv-cache-d=fp8_e5m2\"]}"),
     "container \"server\" already passes --kv-cache-dtype (as \"--kv-cache-d=fp8_e5m2\"): the "
     "dtype comes from the KVCachePoolBinding, and engines writing two dtypes into one domain read "
     "each other's blocks wrong. Remove it and name a Binding declaring the dtype you want"},
    {"vLLM: the owned volume",
     "{\"metadata\":{\"namespace\":\"team-a\",\"labels\":{\"kvcache.gpustack.ai/inject\":"
     "\"true\"},\"annotations\":{" A_VLLM "}},\"spec\":{\"volumes\":[{\"name\":"
     "\"gpustack-kvcache-config\"}],\"containers\":[" C_VLLM "]}}",
     "the Pod already declares a volume named \"gpustack-kvcache-config\", which this webhook "
     "owns"},
    {"vLLM: the owned mount path",
     POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"vllm\"],\"volumeMounts\":[{\"name\":"
                 "\"cfg\",\"mountPath\":\"/etc/gpustack/kvcache\"}]}"),
     "container \"server\" already mounts something at \"/etc/gpustack/kvcache\", which this "
     "webhook owns"},
    {"no command, no args", POD(A_VLLM, "{\"name\":\"server\"}"),
     "container \"server\" declares neither command nor args, so it runs the image's own "
     "ENTRYPOINT and CMD, and appending to args would make Kubernetes read args as the whole "
     "command line and discard the image's CMD. Put the engine executable in command and the "
     "image's launch arguments in args"},
    {"args without command", POD(A_VLLM, "{\"name\":\"server\",\"args\":[\"serve\"]}"),
     "container \"server\" declares args but no command, so it runs the image ENTRYPOINT, which "
     "admission cannot inspect: nothing shows that appended arguments reach the engine. Put the "
     "engine executable in command, or declare " HINT
     " only when the image ENTRYPOINT forwards them"},
    {"tini with nothing after it",
     POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"tini\",\"--\"],\"args\":[]}"),
     "container \"server\" runs the launcher \"tini\" with nothing after it, so it names no "
     "program at all and the appended connector flag would become the command that launcher "
     "executes. Put the engine executable and its arguments after the launcher, or in command and "
     "args directly"},
    {"sh -c, forwarding declared",
     POD(A_VLLM ",\"kvcache.gpustack.ai/launch-args-forwarded\":\"true\"",
         "{\"name\":\"server\",\"command\":[\"/bin/sh\",\"-c\"],\"args\":[\"vllm serve\"]}"),
     "container \"server\" runs \"sh\" through a shell's \"-c\", and anything this webhook appends "
     "to args would become the shell's positional parameters ($0, $1) rather than reaching the "
     "engine. The Pod would start, record itself as injected, and never enable the connector. "
     "Launch the engine directly - put its executable in command and its arguments in args - or "
     "add the connector flag to the script yourself"},
    {"env -S", POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"env\",\"-S\",\"vllm serve\"]}"),
     "container \"server\" hides its command line inside a single argument of \"env\", so this "
     "webhook cannot tell what would run or whether appending to args would reach it. Launch the "
     "engine directly - put its executable in command and its arguments in args - add the "
     "connector flag inside that argument yourself, or declare " HINT
     " if that command line forwards appended arguments"},
    {"a .sh script", POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"./run.sh\"]}"),
     "container \"server\" runs the script \"./run.sh\", and whether anything this webhook appends "
     "to args reaches the engine depends on whether that script forwards its arguments - which "
     "admission cannot read, because it is inside the image. Launch the engine directly - put its "
     "executable in command and its arguments in args - add the connector flag inside the script "
     "yourself, or declare " HINT " if the script forwards them"},
    {"an entrypoint wrapper", POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"/entrypoint\"]}"),
     "container \"server\" runs the wrapper \"/entrypoint\", and whether it forwards appended "
     "arguments to the engine is inside the image, which admission cannot read. Launch the engine "
     "directly, or declare " HINT " if the wrapper forwards them"},
    {"the other engine", POD(A_SGLANG, C_VLLM),
     "container \"server\" launches \"vllm\", the entry point of vLLM, but annotation "
     "\"kvcache.gpustack.ai/engine\" declares SGLang: this webhook would inject one engine's "
     "configuration into another program. Launch the engine the annotation names (python3 -m "
     "sglang.launch_server), or correct the annotation"},
    {"an unknown program",
     POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"gosu\",\"app\","
                 "\"vllm\"]}"),
     "container \"server\" launches \"gosu\", which is neither the vLLM entry point (vllm) nor a "
     "launcher this webhook can see through, so it cannot show that appended arguments reach the "
     "engine. Launch the engine directly, or declare " HINT
     " only if it forwards appended arguments to the engine"},
    {"a missing binding", POD(A_BIND("nope", "vLLM"), C_VLLM),
     "annotation \"kvcache.gpustack.ai/binding\" names KVCachePoolBinding \"nope\", which does "
     "not exist in namespace \"team-a\": a Pod draws on a pool through a Binding its own namespace "
     "holds, so either the name is wrong or the Binding has not been created"},
    {"a binding being deleted", POD(A_BIND("gone", "vLLM"), C_VLLM),
     "annotation \"kvcache.gpustack.ai/binding\" names KVCachePoolBinding \"gone\", which is being "
     "deleted: its reuse domain is being withdrawn from the pool's ledger, so a Pod admitted "
     "against it would be injected and then fail every cache write. Wait for the deletion to "
     "finish and create a new Binding, or point this Pod at one that is not terminating"},
    {"a missing pool", POD(A_BIND("nopool", "vLLM"), C_VLLM),
     "KVCachePoolBinding \"nopool\" in namespace \"team-a\" references pool \"missing\", which "
     "does not exist"},
    {"a ledger not reported", POD(A_BIND("nocond", "vLLM"), C_VLLM),
     "pool \"pool-nocond\" does not report QuotaLedgerAvailable yet, so whether its master holds a "
     "tenant ledger is unknown; retry once the pool reports it"},
    {"a ledger Unknown", POD(A_BIND("unknown", "vLLM"), C_VLLM),
     "pool \"pool-unknown\" reports QuotaLedgerAvailable as Unknown, which is a wait rather than "
     "an answer; retry once it settles"},
    {"a ledger unreachable", POD(A_BIND("down", "vLLM"), C_VLLM),
     "pool \"pool-down\" reports QuotaLedgerAvailable as False (LedgerUnreachable): GET /tenants: "
     "connection refused"},
    {"no backend", POD(A_BIND("nobackend", "vLLM"), C_VLLM),
     "pool \"pool-nobackend\" names no backend, so its transport cannot be resolved"},
    {"a missing backend", POD(A_BIND("lostbackend", "vLLM"), C_VLLM),
     "pool \"pool-lostbackend\" references backend \"be-lost\", which does not exist"},
    {"no client endpoint", POD(A_BIND("noep", "vLLM"), C_VLLM),
     "pool \"pool-noep\" has not published a client endpoint yet, so there is no address to point "
     "\"vllm\" at; retry once the pool reports one"},
    {"a mixed pool for an engine with no required transport",
     POD(A_BIND("mixed", "SGLang"), C_SGLANG),
     "pool \"pool-mixed\" offers the transports [rdma tcp] across its member groups, and engine "
     "\"sglang\" is configured with one transport while it reads a block from any group. Make the "
     "groups use one protocol, or choose another pool"},
    {"vllm-ascend on a pool without ascend",
     POD(A_VLLM ",\"kvcache.gpustack.ai/manufacturer\":\"ascend\"", C_VLLM),
     "pool \"pool-a\" offers the transports [tcp], and engine \"vllm-ascend\" accepts only "
     "\"ascend\": it raises at startup on any other. Declare CANN on the backend's "
     "spec.transport.protocol, or on a member group's transport.protocol, or choose another pool"},
    {"an unrenderable transport", POD(A_BIND("weird", "vLLM"), C_VLLM),
     "backend \"be-weird\" declares transport protocol \"Carrier-Pigeon\", which this webhook "
     "cannot render"},
    {"a binding without a dtype", POD(A_BIND("nodtype", "vLLM"), C_VLLM),
     "KVCachePoolBinding \"nodtype\" in namespace \"team-a\" declares no spec.domain.dtype, so "
     "there is no dtype to hand the engine"},
};

static void test_kvcache__refusals(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(rrows); i++) {
                struct tsr_webhook_lookup x;
                struct tsr_verdict v;
                struct tsr_diag diag;
                int rc;

                lookup_init(&x);
                rc = mutate(&x, "CREATE", rrows[i].pod, &v, &diag);
                if (rc)
                        fail_msg("%s: rc %s (%s)", rrows[i].name, tsr_err_name(rc), diag.msg);
                if (v.allowed || v.patched)
                        fail_msg("%s: allowed", rrows[i].name);
                if (v.code != 403 || strcmp(v.reason, "Forbidden"))
                        fail_msg("%s: code %d reason %s", rrows[i].name, v.code, v.reason);
                if (strcmp(v.message, rrows[i].want))
                        fail_msg("%s:\n got  %s\n want %s", rrows[i].name, v.message,
                                 rrows[i].want);
        }
}

/* The dtype Setting off: the container's own --kv-cache-dtype stands (no refusal). */
static void test_kvcache__dtype_not_owned(void **state)
{
        struct tsr_webhook_lookup x;
        struct tsr_verdict v;
        struct tsr_diag diag;

        (void)state;
        lookup_init(&x);
        x.settings.value[TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED] = false;
        assert_int_equal(
            mutate(&x, "CREATE",
                   POD(A_BIND("nodtype", "vLLM"),
                       "{\"name\":\"server\",\"command\":[\"vllm\",\"--kv-cache-dtype\","
                       "\"auto\"]}"),
                   &v, &diag),
            0);
        assert_true(v.allowed);
        assert_non_null(v.patched);
        json_decref(v.patched);
}

static void test_kvcache__left_alone(void **state)
{
        static const char *const pods[] = {
            "{\"metadata\":{\"namespace\":\"team-a\",\"annotations\":{" A_VLLM "}},\"spec\":{}}",
            ("{\"metadata\":{\"labels\":{\"kvcache.gpustack.ai/inject\":\"false\"},"
             "\"annotations\":{\"kvcache.gpustack.ai/domain\":\"x\"}}}"),
            "{\"metadata\":{\"labels\":{\"kvcache.gpustack.ai/inject\":true}}}",
        };
        struct tsr_webhook_lookup x;
        struct tsr_verdict v;
        struct tsr_diag diag;

        (void)state;
        lookup_init(&x);
        for (size_t i = 0; i < N_ELEMS(pods); i++) {
                assert_int_equal(mutate(&x, "CREATE", pods[i], &v, &diag), 0);
                assert_true(v.allowed);
                assert_null(v.patched);
        }
        /* Injection runs at CREATE only. */
        assert_int_equal(mutate(&x, "UPDATE", POD(A_VLLM, C_VLLM), &v, &diag), 0);
        assert_true(v.allowed);
        assert_null(v.patched);
        assert_int_equal(mutate(&x, "DELETE", NULL, &v, &diag), 0);
        assert_true(v.allowed);
}

/* A lookup without the KV-cache readers fails a Pod that needs them closed. */
static void test_kvcache__no_readers_fails_closed(void **state)
{
        struct tsr_webhook_lookup base;
        struct tsr_verdict v;
        struct tsr_diag diag;
        struct tsr_review r;

        (void)state;
        tsr_webhook_lookup_init(&base);
        memset(&r, 0, sizeof(r));
        memset(&v, 0, sizeof(v));
        snprintf(r.operation, sizeof(r.operation), "CREATE");
        r.object = json_fx_load(POD(A_VLLM, C_VLLM));
        assert_int_equal(tsr_webhook_kvcache_mutate(&base, &r, &v, &diag), TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "cannot read KVCachePoolBindings"));
        assert_null(v.patched);
        json_decref(r.object);
        /* Pod-local refusals still answer without the readers. */
        memset(&v, 0, sizeof(v));
        r.object = json_fx_load(POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"./run.sh\"]}"));
        assert_int_equal(tsr_webhook_kvcache_mutate(&base, &r, &v, &diag), 0);
        assert_false(v.allowed);
        assert_int_equal(v.code, 403);
        json_decref(r.object);
}

static void test_kvcache__wrong_shape(void **state)
{
        static const char *const pods[] = {
            ("{\"metadata\":{\"labels\":{\"kvcache.gpustack.ai/inject\":\"true\"},"
             "\"annotations\":{" A_VLLM "}},\"spec\":{\"containers\":{}}}"),
            ("{\"metadata\":{\"labels\":{\"kvcache.gpustack.ai/inject\":\"true\"},"
             "\"annotations\":[]}}"),
            POD(A_VLLM, "{\"name\":\"server\",\"command\":\"vllm\"}"),
            POD(A_VLLM, "{\"name\":\"server\",\"command\":[\"vllm\",1]}"),
        };
        struct tsr_webhook_lookup x;
        struct tsr_verdict v;
        struct tsr_diag diag;

        (void)state;
        lookup_init(&x);
        for (size_t i = 0; i < N_ELEMS(pods); i++) {
                assert_int_equal(mutate(&x, "CREATE", pods[i], &v, &diag), TSR_EPARSE);
                assert_true(diag.msg[0] != '\0');
                assert_null(v.patched);
        }
}

/* ---- the UPDATE freeze -------------------------------------------------------------------- */

static void test_kvcache__freeze(void **state)
{
        static const struct {
                const char *name, *old, *obj, *want;
        } rows[] = {
            {"a finalizer cleared on a terminating injected Pod",
             "{\"metadata\":{\"deletionTimestamp\":\"t\",\"finalizers\":[\"f\"],\"labels\":"
             "{\"kvcache.gpustack.ai/inject\":\"true\"},\"annotations\":"
             "{\"kvcache.gpustack.ai/injected\":\"{}\",\"kvcache.gpustack.ai/client-config\":"
             "\"{}\"}}}",
             "{\"metadata\":{\"deletionTimestamp\":\"t\",\"labels\":"
             "{\"kvcache.gpustack.ai/inject\":\"true\"},\"annotations\":"
             "{\"kvcache.gpustack.ai/injected\":\"{}\",\"kvcache.gpustack.ai/client-config\":"
             "\"{}\",\"other\":\"x\"}}}",
             NULL},
            {"an unlabelled Pod edited", "{\"metadata\":{}}",
             "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", NULL},
            {"the label added afterwards", "{\"metadata\":{}}",
             "{\"metadata\":{\"labels\":{\"kvcache.gpustack.ai/inject\":\"true\"}}}",
             "label \"kvcache.gpustack.ai/inject\" may not be added, changed or removed on an "
             "existing Pod: injection runs at CREATE only, so the label would no longer say "
             "whether this Pod's containers were configured"},
            {"the record edited",
             "{\"metadata\":{\"annotations\":{\"kvcache.gpustack.ai/injected\":\"{}\"}}}",
             "{\"metadata\":{\"annotations\":{\"kvcache.gpustack.ai/"
             "injected\":\"{\\\"x\\\":1}\"}}}",
             "annotation \"kvcache.gpustack.ai/injected\" may not be added, changed or removed on "
             "an existing Pod: it records what the webhook decided at creation, and an edited one "
             "would be a record of a decision nobody made"},
            {"the client config removed while terminating",
             "{\"metadata\":{\"deletionTimestamp\":\"t\",\"annotations\":"
             "{\"kvcache.gpustack.ai/client-config\":\"{}\"}}}",
             "{\"metadata\":{\"deletionTimestamp\":\"t\"}}",
             "annotation \"kvcache.gpustack.ai/client-config\" may not be added, changed or "
             "removed "
             "on an existing Pod: the file at /etc/gpustack/kvcache/mooncake.json is a downwardAPI "
             "projection of it, so an edit would swap the master address, transport and segment "
             "sizes under a running container"},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                struct tsr_webhook_lookup none;
                struct tsr_verdict v;
                struct tsr_diag diag;
                struct tsr_review r;

                tsr_webhook_lookup_init(&none);
                memset(&r, 0, sizeof(r));
                memset(&v, 0, sizeof(v));
                snprintf(r.operation, sizeof(r.operation), "UPDATE");
                r.object = json_fx_load(rows[i].obj);
                r.old_object = json_fx_load(rows[i].old);
                assert_int_equal(tsr_webhook_kvcache_validate(&none, &r, &v, &diag), 0);
                if (!rows[i].want && !v.allowed)
                        fail_msg("%s: denied: %s", rows[i].name, v.message);
                if (rows[i].want && (v.allowed || v.code != 403 || strcmp(v.message, rows[i].want)))
                        fail_msg("%s:\n got  %s\n want %s", rows[i].name, v.message, rows[i].want);
                assert_null(v.patched);
                json_decref(r.object);
                json_decref(r.old_object);
        }
}

static void test_kvcache__alloc_failures(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(irows); i++) {
                struct tsr_webhook_lookup x;
                json_t *want = json_fx_load(irows[i].want);

                lookup_init(&x);
                x.settings.value[TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED] =
                    irows[i].dtype_owned;
                review_fx_alloc_loop(tsr_webhook_kvcache_mutate, &x, "CREATE", "team-a",
                                     irows[i].pod, want, 400, irows[i].name);
                json_decref(want);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_launch__table),
            cmocka_unit_test(test_kvcache__inject),
            cmocka_unit_test(test_kvcache__refusals),
            cmocka_unit_test(test_kvcache__dtype_not_owned),
            cmocka_unit_test(test_kvcache__left_alone),
            cmocka_unit_test(test_kvcache__no_readers_fails_closed),
            cmocka_unit_test(test_kvcache__wrong_shape),
            cmocka_unit_test(test_kvcache__freeze),
            cmocka_unit_test(test_kvcache__alloc_failures),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
