/*
 * scenario.c - the scenario file: cluster declaration, then the steps in order.
 */
#include "sim/scenario.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "sim/cluster.h"
#include "sim/commands.h"
#include "sim/yaml_json.h"

#include <stdio.h>
#include <string.h>

struct loader {
        struct tsr_yaml_lines lines;
        struct tsr_diag *diag;
};

static int fail(struct loader *l, const json_t *at, unsigned fallback, const char *fmt,
                const char *what)
{
        return tsr_diag_set_at(l->diag, TSR_EPARSE, tsr_yaml_line(&l->lines, at, fallback), fmt,
                               what);
}

/* Reads a quantity field (string or integer) into milli (cpu) or whole units. */
static int quantity_field(struct loader *l, json_t *node, const char *key, bool milli, int64_t *out)
{
        json_t *v = json_object_get(node, key);
        struct tsr_quantity q;
        char text[32];
        const char *s = text;

        if (json_is_integer(v))
                snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(v));
        else if (json_is_string(v))
                s = json_string_value(v);
        else
                return fail(l, v ? v : node, 0, "node field \"%s\" must be a quantity", key);
        if (tsr_quantity_parse(s, &q, NULL) ||
            (milli ? tsr_quantity_milli(&q, out) : tsr_quantity_value(&q, out)) || *out < 0)
                return fail(l, v, 0, "\"%s\" is not a valid quantity", s);
        return 0;
}

static int load_node(struct loader *l, struct tsr_cluster *c, json_t *node)
{
        json_t *acc = json_object_get(node, "accelerators");
        const char *name = json_string_value(json_object_get(node, "name"));
        const char *os = json_string_value(json_object_get(node, "os"));
        const char *arch = json_string_value(json_object_get(node, "arch"));
        const struct tsr_product *product = NULL;
        bool mig[SIM_GPUS_MAX] = {false};
        int64_t cpu, mem;
        unsigned count = 0;
        int rc;

        if (!json_is_object(node))
                return fail(l, node, 0, "a node must be a mapping%s", "");
        if (!name)
                return fail(l, node, 0, "a node needs a name%s", "");
        rc = quantity_field(l, node, "cpu", true, &cpu);
        if (!rc)
                rc = quantity_field(l, node, "memory", false, &mem);
        if (rc)
                return rc;
        if (acc) {
                const char *model = json_string_value(json_object_get(acc, "model"));
                json_t *n = json_object_get(acc, "count"), *list = json_object_get(acc, "mig"), *v;
                size_t i;

                if (!model)
                        return fail(l, acc, 0, "accelerators need a model%s", "");
                product = tsr_catalog_product_by_name(model);
                if (!product)
                        return fail(l, json_object_get(acc, "model"), 0,
                                    "unknown accelerator model \"%s\" (not in the product "
                                    "catalog)",
                                    model);
                if (!json_is_integer(n) || json_integer_value(n) < 1 ||
                    json_integer_value(n) > SIM_GPUS_MAX)
                        return fail(l, n ? n : acc, 0,
                                    "accelerators.count must be an integer in "
                                    "[1, 64]%s",
                                    "");
                count = (unsigned)json_integer_value(n);
                if (list && !json_is_array(list))
                        return fail(l, list, 0, "accelerators.mig must be a list of indices%s", "");
                json_array_foreach(list, i, v)
                {
                        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                            json_integer_value(v) >= count)
                                return fail(l, v, 0, "accelerators.mig: no such GPU index%s", "");
                        if (!tsr_product_has_mig(product))
                                return fail(l, v, 0, "%s does not support MIG", product->name);
                        mig[json_integer_value(v)] = true;
                }
        }
        rc = tsr_cluster_add_node(c, name, cpu, mem, os ? os : "linux", arch ? arch : "amd64",
                                  product, count, mig, l->diag);
        if (rc)
                l->diag->line = tsr_yaml_line(&l->lines, node, 0);
        return rc;
}

static int load_cluster(struct loader *l, struct tsr_cluster *c, json_t *root)
{
        json_t *cluster = json_object_get(root, "cluster");
        json_t *nodes = json_object_get(cluster, "nodes"), *node;
        json_t *settings = json_object_get(cluster, "settings"), *value;
        const char *key;
        size_t i;

        if (!json_is_object(cluster))
                return fail(l, root, 1, "the scenario needs a \"cluster\" mapping%s", "");
        if (!json_is_array(nodes) || json_array_size(nodes) == 0)
                return fail(l, cluster, 1, "cluster.nodes must be a non-empty list%s", "");
        if (settings && !json_is_object(settings))
                return fail(l, settings, 1, "cluster.settings must be a mapping%s", "");
        json_array_foreach(nodes, i, node)
        {
                int rc = load_node(l, c, node);

                if (rc)
                        return rc;
        }
        json_object_foreach(settings, key, value)
        {
                int rc = tsr_cluster_setting(c, key, value, l->diag);

                if (rc) {
                        l->diag->line = tsr_yaml_line(&l->lines, settings, 1);
                        return rc;
                }
        }
        return 0;
}

static int run_steps(struct loader *l, struct tsr_cluster *c, json_t *root, struct tsr_buf *out)
{
        json_t *steps = json_object_get(root, "steps"), *step;
        size_t i;

        if (!json_is_array(steps))
                return fail(l, steps ? steps : root, 1, "the scenario needs a \"steps\" list%s",
                            "");
        json_array_foreach(steps, i, step)
        {
                unsigned line = tsr_yaml_line(&l->lines, step, 1);
                const char *cmd = json_string_value(step), *on = NULL, *in = NULL;
                json_t *stdin_v = NULL;
                int rc;

                if (json_is_object(step)) {
                        cmd = json_string_value(json_object_get(step, "run"));
                        on = json_string_value(json_object_get(step, "on"));
                        stdin_v = json_object_get(step, "stdin");
                        in = json_string_value(stdin_v);
                        if (json_object_get(step, "on") && !on)
                                return fail(l, step, line, "\"on\" must name a node%s", "");
                        if (stdin_v && !in)
                                return fail(l, stdin_v, line, "\"stdin\" must be text%s", "");
                }
                if (!cmd || !*cmd)
                        return fail(l, step, line,
                                    "a step is a command string or a mapping "
                                    "with \"run\"%s",
                                    "");
                if (on && tsr_cluster_node(c, on) < 0)
                        return fail(l, step, line, "no node named \"%s\"", on);
                rc = tsr_buf_addf(out, "$ %s\n", cmd);
                if (!rc)
                        rc = sim_command_run(
                            c, on, cmd, in,
                            stdin_v ? tsr_yaml_line(&l->lines, stdin_v, line) : line, out, l->diag);
                if (rc) {
                        if (!l->diag->line)
                                l->diag->line = line;
                        return rc;
                }
                rc = tsr_buf_addch(out, '\n');
                if (rc)
                        return rc;
        }
        return 0;
}

int sim_scenario_run(const char *file, const char *text, size_t len, struct tsr_buf *out,
                     struct tsr_diag *diag)
{
        struct loader l = {.diag = diag};
        struct tsr_cluster c;
        json_t *docs = NULL, *root;
        int rc;

        (void)file;
        tsr_diag_clear(diag);
        tsr_cluster_init(&c);
        rc = tsr_yaml_load_all(text, len, 0, &docs, &l.lines, diag);
        if (rc)
                goto out;
        root = json_array_get(docs, 0);
        if (!json_is_object(root)) {
                rc = tsr_diag_set_at(diag, TSR_EPARSE, 1,
                                     "a scenario is a YAML mapping with "
                                     "\"cluster\" and \"steps\"");
                goto out;
        }
        rc = load_cluster(&l, &c, root);
        if (!rc)
                rc = run_steps(&l, &c, root, out);
out:
        json_decref(docs);
        tsr_yaml_lines_release(&l.lines);
        tsr_cluster_release(&c);
        return rc;
}
