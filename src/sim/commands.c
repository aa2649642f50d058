/*
 * commands.c - dispatch of one runbook command line. A pipeline's first stage runs against the
 * cluster into a buffer; a `jq` stage filters that buffer.
 */
#include "sim/commands.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "sim/argv.h"
#include "sim/jq_pipe.h"
#include "sim/nvidia_smi.h"
#include "sim/render.h"
#include "sim/yaml_json.h"

#include <stdlib.h>
#include <string.h>

#define DEVICE_MANAGER_DS "ds/gpustack-operator-device-manager-nvidia"

int sim_parse_duration(const char *s, int64_t *seconds)
{
        int64_t total_ms = 0;
        const char *p = s;

        if (!*p)
                return TSR_EPARSE;
        while (*p) {
                int64_t v = 0, unit;
                const char *start = p;

                while (*p >= '0' && *p <= '9') {
                        if (v > INT64_MAX / 10 / 3600000)
                                return TSR_EPARSE;
                        v = v * 10 + (*p++ - '0');
                }
                if (p == start)
                        return TSR_EPARSE;
                if (!strncmp(p, "ms", 2)) {
                        unit = 1;
                        p += 2;
                } else if (*p == 's') {
                        unit = 1000;
                        p++;
                } else if (*p == 'm') {
                        unit = 60000;
                        p++;
                } else if (*p == 'h') {
                        unit = 3600000;
                        p++;
                } else {
                        return TSR_EPARSE;
                }
                if (v * unit > SIM_SLEEP_MAX_SECONDS * 1000 - total_ms)
                        return TSR_ERANGE;
                total_ms += v * unit;
        }
        *seconds = (total_ms + 999) / 1000;
        return 0;
}

static const char *flag(const struct sim_argv *a, const char *name)
{
        size_t len = strlen(name);

        for (size_t i = 0; i < a->n; i++) {
                if (!strcmp(a->v[i], name) && i + 1 < a->n)
                        return a->v[i + 1];
                if (!strncmp(a->v[i], name, len) && a->v[i][len] == '=')
                        return a->v[i] + len + 1;
        }
        return NULL;
}

/* The positional words after the verb, skipping flags and their values. */
static size_t positionals(const struct sim_argv *a, size_t from, const char **out, size_t max)
{
        size_t n = 0;

        for (size_t i = from; i < a->n && n < max; i++) {
                const char *w = a->v[i];

                if (!strcmp(w, "--"))
                        break;
                if (!strcmp(w, "-o") || !strcmp(w, "-n") || !strcmp(w, "-f") ||
                    !strcmp(w, "--namespace")) {
                        i++;
                        continue;
                }
                if (w[0] == '-')
                        continue;
                out[n++] = w;
        }
        return n;
}

static int unknown(const char *line, struct tsr_diag *diag)
{
        return tsr_diag_set(diag, TSR_EPARSE, "unknown command: %s", line);
}

static int need_node(struct tsr_cluster *c, const char *name, size_t *out, struct tsr_buf *buf,
                     const char *kind)
{
        int i = tsr_cluster_node(c, name);

        if (i < 0) {
                tsr_buf_addf(buf, "Error from server (NotFound): %s \"%s\" not found\n", kind,
                             name);
                return 1;
        }
        *out = (size_t)i;
        return 0;
}

static int kubectl_get(struct tsr_cluster *c, const struct sim_argv *a, const char *ns,
                       struct tsr_buf *out, struct tsr_diag *diag)
{
        const char *pos[4], *o = flag(a, "-o");
        size_t np = positionals(a, 3, pos, 4);
        const char *what = a->n > 2 ? a->v[2] : "";
        size_t idx;

        if (!strcmp(what, "instancetypes") || !strcmp(what, "instancetype"))
                return sim_render_instancetypes(c, np > 0 ? pos[0] : NULL, o, out, diag);
        if ((!strcmp(what, "node") || !strcmp(what, "nodes")) && np == 1) {
                if (!o || strcmp(o, "json"))
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "kubectl get node: only -o json is "
                                            "simulated");
                return need_node(c, pos[0], &idx, out, "nodes")
                           ? 0
                           : sim_render_node(c, idx, out, diag);
        }
        if ((!strcmp(what, "devices") || !strcmp(what, "device")) && np == 1)
                return need_node(c, pos[0], &idx, out, "devices.worker.gpustack.ai")
                           ? 0
                           : sim_render_devices(c, idx, o && !strcmp(o, "json"), out, diag);
        if (!strcmp(what, "pods") || !strcmp(what, "pod")) {
                if (o && !strcmp(o, "json") && np == 1) {
                        int k = tsr_cluster_pod(c, ns, pos[0]);

                        if (k < 0)
                                return tsr_buf_addf(out,
                                                    "Error from server (NotFound): pods "
                                                    "\"%s\" not found\n",
                                                    pos[0]);
                        return sim_render_pod_json(c, (size_t)k, out);
                }
                return sim_render_pods(c, ns, np ? pos[0] : NULL, o && !strcmp(o, "wide"), out);
        }
        if (!strcmp(what, "workloads") || !strcmp(what, "workload") || !strcmp(what, "wl"))
                return sim_render_workloads(c, ns, np ? pos[0] : NULL, o && !strcmp(o, "json"),
                                            out);
        if (sim_render_chain_kind(what))
                return sim_render_chain(c, what, ns, np ? pos[0] : NULL, o && !strcmp(o, "json"),
                                        out, diag);
        return tsr_diag_set(diag, TSR_EPARSE, "kubectl get %s is not simulated", what);
}

static int kubectl_apply(struct tsr_cluster *c, const struct sim_argv *a, const char *stdin_text,
                         unsigned stdin_line, struct tsr_buf *out, struct tsr_diag *diag)
{
        const char *file = flag(a, "-f");
        json_t *docs = NULL, *doc;
        size_t i;
        int rc;

        if (!file || strcmp(file, "-"))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "kubectl apply: only -f - (standard input) "
                                    "is simulated");
        if (!stdin_text)
                return tsr_diag_set(diag, TSR_EPARSE, "kubectl apply -f - needs stdin");
        rc = tsr_yaml_load_all(stdin_text, strlen(stdin_text), stdin_line, &docs, NULL, diag);
        if (rc)
                return rc;
        json_array_foreach(docs, i, doc)
        {
                const char *kind = json_string_value(json_object_get(doc, "kind"));

                if (json_is_null(doc))
                        continue;
                if (!kind || strcmp(kind, "Pod")) {
                        rc = tsr_diag_set_at(diag, TSR_EPARSE, stdin_line + 1,
                                             "kubectl apply: kind %s is not simulated",
                                             kind ? kind : "(none)");
                        break;
                }
                rc = tsr_cluster_apply_pod(c, json_incref(doc), out, diag);
                if (rc) {
                        if (diag && !diag->line)
                                diag->line = stdin_line + 1;
                        break;
                }
        }
        json_decref(docs);
        return rc;
}

static int kubectl(struct tsr_cluster *c, const struct sim_argv *argv, const char *line,
                   const char *stdin_text, unsigned stdin_line, struct tsr_buf *out,
                   struct tsr_diag *diag)
{
        struct sim_argv shifted = *argv;
        const struct sim_argv *a = &shifted;
        const char *ns = flag(argv, "-n");
        const char *verb;
        const char *pos[4];

        if (!ns)
                ns = flag(argv, "--namespace");
        if (!ns)
                ns = "default";
        /* `kubectl -n NS verb ...`: move a leading namespace flag out of the verb's place. */
        if (argv->n > 3 && (!strcmp(argv->v[1], "-n") || !strcmp(argv->v[1], "--namespace"))) {
                memmove(&shifted.v[1], &shifted.v[3], (argv->n - 3) * sizeof(char *));
                shifted.n -= 2;
        }
        verb = a->n > 1 ? a->v[1] : "";
        if (!strcmp(verb, "get"))
                return kubectl_get(c, a, ns, out, diag);
        if (!strcmp(verb, "apply"))
                return kubectl_apply(c, a, stdin_text, stdin_line, out, diag);
        if (!strcmp(verb, "delete") && a->n >= 4 && !strcmp(a->v[2], "pod")) {
                for (size_t i = 3; i < a->n; i++) {
                        if (a->v[i][0] == '-')
                                continue;
                        if (tsr_cluster_delete_pod(c, ns, a->v[i]))
                                tsr_buf_addf(out,
                                             "Error from server (NotFound): pods \"%s\" not "
                                             "found\n",
                                             a->v[i]);
                        else
                                tsr_buf_addf(out, "pod \"%s\" deleted\n", a->v[i]);
                }
                return 0;
        }
        if (!strcmp(verb, "exec") && positionals(a, 2, pos, 1) == 1) {
                size_t dd = 0;
                int k = tsr_cluster_pod(c, ns, pos[0]);

                while (dd < a->n && strcmp(a->v[dd], "--"))
                        dd++;
                if (dd + 2 >= a->n + 1 || dd + 2 > a->n || strcmp(a->v[dd + 1], "nvidia-smi") ||
                    dd + 3 != a->n || strcmp(a->v[dd + 2], "-L"))
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "kubectl exec: only `-- nvidia-smi "
                                            "-L` is simulated");
                if (k < 0)
                        return tsr_buf_addf(out,
                                            "Error from server (NotFound): pods \"%s\" not "
                                            "found\n",
                                            pos[0]);
                return sim_render_container_smi(c, (size_t)k, out, diag);
        }
        if (!strcmp(verb, "rollout") && a->n >= 4 && !strcmp(a->v[3], DEVICE_MANAGER_DS) &&
            !strcmp(ns, "gpustack-system")) {
                if (!strcmp(a->v[2], "restart")) {
                        for (size_t i = 0; i < c->n_nodes; i++)
                                if (c->nodes[i].product &&
                                    c->nodes[i].product->manufacturer == TSR_MFR_NVIDIA)
                                        tsr_cluster_redetect(c, i);
                        return tsr_buf_adds(out, "daemonset.apps/gpustack-operator-device-"
                                                 "manager-nvidia restarted\n");
                }
                if (!strcmp(a->v[2], "status"))
                        return tsr_buf_adds(out, "daemon set \"gpustack-operator-device-manager-"
                                                 "nvidia\" successfully rolled out\n");
        }
        return unknown(line, diag);
}

static int run_stage(struct tsr_cluster *c, const char *on, const struct sim_argv *a,
                     const char *line, const char *stdin_text, unsigned stdin_line,
                     struct tsr_buf *out, struct tsr_diag *diag)
{
        const char *tool = a->v[0];

        if (!strcmp(tool, "sudo") && a->n > 1) {
                struct sim_argv shifted = *a;

                memmove(&shifted.v[0], &shifted.v[1], (a->n - 1) * sizeof(char *));
                shifted.n--;
                return run_stage(c, on, &shifted, line, stdin_text, stdin_line, out, diag);
        }
        if (!strcmp(tool, "sleep") && a->n == 2) {
                int64_t s;

                if (sim_parse_duration(a->v[1], &s))
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "sleep: invalid duration \"%s\" (a Go duration "
                                            "such as 90s, 3m or 1h30m, at most 720h)",
                                            a->v[1]);
                tsr_cluster_advance(c, s);
                return 0;
        }
        if (!strcmp(tool, "kubectl") && !on)
                return kubectl(c, a, line, stdin_text, stdin_line, out, diag);
        if (!strcmp(tool, "nvidia-smi") && on) {
                int i = tsr_cluster_node(c, on);

                if (i < 0)
                        return tsr_diag_set(diag, TSR_ENOTFOUND, "no node named \"%s\"", on);
                return sim_nvidia_smi(c, (size_t)i, a, out, diag);
        }
        return unknown(line, diag);
}

int sim_command_run(struct tsr_cluster *c, const char *on, const char *line, const char *stdin_text,
                    unsigned stdin_line, struct tsr_buf *out, struct tsr_diag *diag)
{
        struct sim_pipeline p;
        struct tsr_buf stage = TSR_BUF_INIT;
        int rc = sim_pipeline_parse(line, &p, diag);

        if (rc)
                return rc;
        rc = run_stage(c, on, &p.stage[0], line, stdin_text, stdin_line, &stage, diag);
        for (size_t s = 1; s < p.n && !rc; s++) {
                struct tsr_buf next = TSR_BUF_INIT;

                if (strcmp(p.stage[s].v[0], "jq")) {
                        rc = tsr_diag_set(diag, TSR_EPARSE, "only jq may follow a pipe: %s", line);
                } else {
                        rc = sim_jq_run(&p.stage[s], stage.ptr, &next, diag);
                }
                tsr_buf_release(&stage);
                stage = next;
        }
        if (!rc)
                rc = tsr_buf_add(out, stage.ptr, stage.len);
        tsr_buf_release(&stage);
        sim_pipeline_release(&p);
        return rc;
}
