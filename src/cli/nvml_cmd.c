/*
 * nvml_cmd.c - `tessera nvml probe`: what a backend sees, read-only.
 *
 * The probe collects one JSON document (driver version, per GPU its identity, MIG mode current and
 * pending, every GPU-instance profile the driver answers for with its placements, the live GPU and
 * compute instances, and the capability detection would advertise, plus detection's notes) and
 * prints it as JSON (-o json) or as text. It calls only the backend's read operations: it never
 * creates or destroys an instance, changes a MIG mode or resets a GPU.
 *
 * Exit status: 0 success, 1 when the backend cannot be opened or read, 2 for a usage error.
 */
#include "cli/nvml_cmd.h"

#include "base/diag.h"
#include "base/err.h"
#include "nvml/detect.h"
#include "nvml/fake.h"
#include "nvml/nvml.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Detection covers at most this many GPUs per node. */
#define PROBE_GPUS_MAX 64
/* NVML GPU-instance profile indices are walked until TSR_EINVAL, at most this far. */
#define PROBE_PROFILE_INDICES 64

struct backend {
        const struct tsr_gpu_ops *ops;
        void *be;
};

static void usage(FILE *f)
{
        fputs("usage: tessera nvml probe [--library PATH | --fake PRODUCT:COUNT[:MODES]] [-o "
              "text|json]\n\n"
              "Prints, read-only, what the GPU backend sees and what tessera would advertise.\n\n"
              "  --library PATH  the NVML library to load (default: $TSR_NVML_LIBRARY, else "
              "libnvidia-ml.so.1)\n"
              "  --fake SPEC     probe the fake backend instead: PRODUCT:COUNT[:MODES[:PENDING]],\n"
              "                  e.g. \"NVIDIA H100 80GB HBM3:2:mig\" (MODES: mig, off, or one 0/1 "
              "per GPU)\n"
              "  -o FORMAT       text (default) or json\n",
              f);
}

static const char *profile_name(const struct tsr_product *p, unsigned gi_profile_id)
{
        for (size_t i = 0; p && i < p->n_profiles; i++)
                if (p->profiles[i].gi_profile_id == gi_profile_id)
                        return p->profiles[i].name;
        return NULL;
}

/* Sets key to the backend's error detail: what could not be read, the probe goes on. */
static void set_error(json_t *obj, const char *key, const struct backend *b, int rc)
{
        const char *d = b->ops->error_detail(b->be);

        json_object_set_new(obj, key, json_string(d[0] ? d : tsr_strerror(rc)));
}

static json_t *probe_profiles(const struct backend *b, unsigned gpu, const struct tsr_product *p,
                              json_t *g)
{
        json_t *arr = json_array();

        for (unsigned idx = 0; idx < PROBE_PROFILE_INDICES; idx++) {
                struct tsr_gpu_profile_info pi;
                struct tsr_gpu_placement pl[TSR_GPU_PLACEMENTS_MAX];
                const char *name;
                json_t *row, *pls;
                size_t n = 0;
                int rc = b->ops->profile_info(b->be, gpu, idx, &pi);

                if (rc == TSR_EINVAL)
                        break;
                if (rc == TSR_ENOTSUP)
                        continue;
                if (rc) {
                        set_error(g, "profiles_error", b, rc);
                        break;
                }
                name = profile_name(p, pi.id);
                row = json_pack("{s:i, s:i, s:s?, s:i, s:I, s:i}", "nvml_index", idx, "id", pi.id,
                                "name", name, "slices", pi.slices, "memory_mib",
                                (json_int_t)pi.memory_mib, "instances", pi.instance_count);
                rc = b->ops->placements(b->be, gpu, pi.id, pl, TSR_GPU_PLACEMENTS_MAX, &n);
                if (rc) {
                        set_error(row, "placements_error", b, rc);
                } else {
                        pls = json_array();
                        for (size_t k = 0; k < n; k++)
                                json_array_append_new(pls,
                                                      json_pack("[i, i]", pl[k].start, pl[k].size));
                        json_object_set_new(row, "placements", pls);
                }
                json_array_append_new(arr, row);
        }
        return arr;
}

static json_t *probe_instances(const struct backend *b, unsigned gpu, json_t *g)
{
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        json_t *arr = json_array();
        size_t n = 0;
        int rc = b->ops->gi_list(b->be, gpu, in, TSR_GPU_INSTANCES_MAX, &n);

        if (rc) {
                set_error(g, "instances_error", b, rc);
                return arr;
        }
        for (size_t k = 0; k < n; k++)
                json_array_append_new(
                    arr, json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:b}", "gi_id",
                                   in[k].gi_id, "profile_id", in[k].gi_profile_id, "start",
                                   in[k].start, "size", in[k].size, "slices", in[k].slices,
                                   "compute_instances", in[k].n_ci, "ci_id", in[k].ci_id,
                                   "ci_slices", in[k].ci_slices, "mig_uuid", in[k].mig_uuid,
                                   "subdivided", tsr_gpu_instance_subdivided(&in[k])));
        return arr;
}

static json_t *capability_json(const struct tsr_accel_cap *c)
{
        json_t *offered;

        if (!c->partitioned)
                return json_pack("{s:b, s:i, s:b}", "partitioned", 0, "slice_slots", c->slice_slots,
                                 "cores_overcommit", c->cores_overcommit);
        offered = json_array();
        for (unsigned i = 0; i < c->product->n_profiles; i++)
                if ((c->offered >> i) & 1u)
                        json_array_append_new(
                            offered, json_pack("{s:s, s:i}", "name", c->product->profiles[i].name,
                                               "ceiling", tsr_capability_profile_ceiling(c, i)));
        return json_pack("{s:b, s:o}", "partitioned", 1, "profiles", offered);
}

static void note_json(void *arg, unsigned gpu, const char *msg)
{
        char line[320];

        snprintf(line, sizeof(line), "GPU %u: %s", gpu, msg);
        json_array_append_new(arg, json_string(line));
}

static int probe(const struct backend *b, json_t *doc, struct tsr_diag *diag)
{
        struct tsr_accel_cap caps[PROBE_GPUS_MAX];
        json_t *gpus = json_array(), *notes = json_array();
        char version[96];
        unsigned count = 0;
        size_t ncap = 0;
        int rc = b->ops->driver_version(b->be, version, sizeof(version));

        json_object_set_new(doc, "driver_version", json_string(rc ? "unknown" : version));
        json_object_set_new(doc, "gpus", gpus);
        json_object_set_new(doc, "notes", notes);
        rc = b->ops->device_count(b->be, &count);
        if (rc)
                return tsr_diag_set(diag, rc, "%s", b->ops->error_detail(b->be));
        for (unsigned gpu = 0; gpu < count; gpu++) {
                struct tsr_gpu_info info;
                const struct tsr_product *p;
                json_t *g;

                rc = b->ops->device_info(b->be, gpu, &info);
                if (rc)
                        return tsr_diag_set(diag, rc, "GPU %u: %s", gpu,
                                            b->ops->error_detail(b->be));
                p = tsr_catalog_product_by_name(info.name);
                g = json_pack("{s:i, s:s, s:s, s:s, s:i, s:I, s:{s:b, s:b, s:b}}", "index", gpu,
                              "name", info.name, "uuid", info.uuid, "bus_id", info.bus_id,
                              "pci_device_id", info.pci_device_id, "memory_mib",
                              (json_int_t)info.memory_mib, "mig", "capable", info.mig_capable,
                              "current", info.mig_current, "pending", info.mig_pending);
                json_array_append_new(gpus, g);
                json_object_set_new(g, "profiles", probe_profiles(b, gpu, p, g));
                json_object_set_new(g, "instances", probe_instances(b, gpu, g));
                json_object_set_new(g, "capability", json_null());
        }
        rc = tsr_nvml_detect(b->ops, b->be, caps, PROBE_GPUS_MAX, &ncap, note_json, notes, diag);
        for (size_t k = 0; !rc && k < ncap; k++)
                json_object_set_new(json_array_get(gpus, caps[k].index), "capability",
                                    capability_json(&caps[k]));
        return rc;
}

static void print_gpu_text(FILE *out, json_t *g)
{
        json_t *mig = json_object_get(g, "mig"), *cap = json_object_get(g, "capability"), *v;
        const char *err;
        size_t i;

        fprintf(out,
                "GPU %d: %s\n  uuid:   %s\n  bus id: %s\n  pci id: 0x%08llx\n  memory: %lld MiB\n",
                (int)json_integer_value(json_object_get(g, "index")),
                json_string_value(json_object_get(g, "name")),
                json_string_value(json_object_get(g, "uuid")),
                json_string_value(json_object_get(g, "bus_id")),
                (unsigned long long)json_integer_value(json_object_get(g, "pci_device_id")),
                (long long)json_integer_value(json_object_get(g, "memory_mib")));
        if (!json_is_true(json_object_get(mig, "capable")))
                fputs("  MIG:    not supported\n", out);
        else
                fprintf(out, "  MIG:    current %s, pending %s\n",
                        json_is_true(json_object_get(mig, "current")) ? "on" : "off",
                        json_is_true(json_object_get(mig, "pending")) ? "on" : "off");
        if (json_array_size(json_object_get(g, "profiles")))
                fputs("  GPU-instance profiles (idx id name slices memory instances "
                      "placements):\n",
                      out);
        json_array_foreach(json_object_get(g, "profiles"), i, v)
        {
                json_t *pl;
                size_t k;

                fprintf(out, "    0x%02llx %3lld %-16s %2lld %7lld MiB %2lld ",
                        (long long)json_integer_value(json_object_get(v, "nvml_index")),
                        (long long)json_integer_value(json_object_get(v, "id")),
                        json_is_string(json_object_get(v, "name"))
                            ? json_string_value(json_object_get(v, "name"))
                            : "?",
                        (long long)json_integer_value(json_object_get(v, "slices")),
                        (long long)json_integer_value(json_object_get(v, "memory_mib")),
                        (long long)json_integer_value(json_object_get(v, "instances")));
                if ((err = json_string_value(json_object_get(v, "placements_error"))) != NULL)
                        fprintf(out, " (placements: %s)", err);
                json_array_foreach(json_object_get(v, "placements"), k, pl)
                    fprintf(out, " %lld:%lld", (long long)json_integer_value(json_array_get(pl, 0)),
                            (long long)json_integer_value(json_array_get(pl, 1)));
                fputc('\n', out);
        }
        if ((err = json_string_value(json_object_get(g, "profiles_error"))) != NULL)
                fprintf(out, "  profiles: %s\n", err);
        if (json_array_size(json_object_get(g, "instances")))
                fputs("  GPU instances (gi profile placement slices cis ci MIG-UUID):\n", out);
        json_array_foreach(json_object_get(g, "instances"), i, v) fprintf(
            out, "    %3lld %3lld %lld:%lld %lld %lld %lld %s%s\n",
            (long long)json_integer_value(json_object_get(v, "gi_id")),
            (long long)json_integer_value(json_object_get(v, "profile_id")),
            (long long)json_integer_value(json_object_get(v, "start")),
            (long long)json_integer_value(json_object_get(v, "size")),
            (long long)json_integer_value(json_object_get(v, "slices")),
            (long long)json_integer_value(json_object_get(v, "compute_instances")),
            (long long)json_integer_value(json_object_get(v, "ci_id")),
            json_string_value(json_object_get(v, "mig_uuid")),
            json_is_true(json_object_get(v, "subdivided")) ? " (subdivided by hand: refused)" : "");
        if ((err = json_string_value(json_object_get(g, "instances_error"))) != NULL)
                fprintf(out, "  instances: %s\n", err);
        if (json_is_null(cap)) {
                fputs("  advertises: nothing (unknown product)\n", out);
        } else if (!json_is_true(json_object_get(cap, "partitioned"))) {
                fprintf(out, "  advertises: unpartitioned, %lld slice slots\n",
                        (long long)json_integer_value(json_object_get(cap, "slice_slots")));
        } else {
                fputs("  advertises: partitioned,", out);
                json_array_foreach(json_object_get(cap, "profiles"), i, v)
                    fprintf(out, " %s x%lld", json_string_value(json_object_get(v, "name")),
                            (long long)json_integer_value(json_object_get(v, "ceiling")));
                fputc('\n', out);
        }
}

static void print_text(FILE *out, json_t *doc)
{
        const char *lib = json_string_value(json_object_get(doc, "library"));
        json_t *v;
        size_t i;

        fprintf(out, "backend: %s%s%s\ndriver:  %s\n",
                json_string_value(json_object_get(doc, "backend")), lib ? " " : "", lib ? lib : "",
                json_string_value(json_object_get(doc, "driver_version")));
        json_array_foreach(json_object_get(doc, "gpus"), i, v) print_gpu_text(out, v);
        json_array_foreach(json_object_get(doc, "notes"), i, v)
            fprintf(out, "note: %s\n", json_string_value(v));
}

static int cmd_probe(int argc, char **argv)
{
        const char *library = NULL, *fake = NULL, *format = "text";
        struct tsr_fake_gpus *f = NULL;
        struct tsr_nvml *nv = NULL;
        struct backend b;
        struct tsr_diag diag;
        json_t *doc;
        int rc;

        for (int i = 1; i < argc; i++) {
                const char **slot = !strcmp(argv[i], "--library") ? &library
                                    : !strcmp(argv[i], "--fake")  ? &fake
                                    : !strcmp(argv[i], "-o")      ? &format
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
        if ((library && fake) || (strcmp(format, "text") && strcmp(format, "json"))) {
                usage(stderr);
                return 2;
        }
        doc = json_object();
        if (fake) {
                rc = tsr_fake_gpus_from_spec("fake-node", fake, &f, &diag);
                if (rc) {
                        fprintf(stderr, "tessera nvml probe: --fake: %s\n", diag.msg);
                        json_decref(doc);
                        return 2;
                }
                b = (struct backend){&tsr_fake_gpu_ops, f};
                json_object_set_new(doc, "backend", json_string("fake"));
        } else {
                rc = tsr_nvml_open(library, &nv, &diag);
                if (rc) {
                        fprintf(stderr, "tessera nvml probe: %s\n", diag.msg);
                        json_decref(doc);
                        return 1;
                }
                b = (struct backend){&tsr_nvml_gpu_ops, nv};
                json_object_set_new(doc, "backend", json_string("nvml"));
                json_object_set_new(doc, "library", json_string(tsr_nvml_library(nv)));
        }
        rc = probe(&b, doc, &diag);
        if (!strcmp(format, "json")) {
                json_dumpf(doc, stdout, JSON_INDENT(2));
                fputc('\n', stdout);
        } else {
                print_text(stdout, doc);
        }
        fflush(stdout);
        if (rc)
                fprintf(stderr, "tessera nvml probe: %s\n", diag.msg);
        json_decref(doc);
        tsr_nvml_close(nv);
        tsr_fake_gpus_free(f);
        return rc ? 1 : 0;
}

int cli_nvml(int argc, char **argv)
{
        if (argc >= 2 && !strcmp(argv[1], "probe"))
                return cmd_probe(argc - 1, argv + 1);
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                usage(stdout);
                return 0;
        }
        usage(stderr);
        return 2;
}
