/*
 * nvidia_smi.c - the nvidia-smi subset the MIG runbooks use, printed as the real tool prints it.
 */
#include "sim/nvidia_smi.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_index(const char *s, unsigned count, unsigned *out)
{
        char *end;
        long v = strtol(s, &end, 10);

        if (*s == '\0' || *end != '\0' || v < 0 || (unsigned long)v >= count)
                return TSR_EINVAL;
        *out = (unsigned)v;
        return 0;
}

static int set_mode(struct sim_node *n, int only, bool on, struct tsr_buf *out)
{
        int rc = 0;

        for (unsigned g = 0; g < n->gpu_count && !rc; g++) {
                struct tsr_gpu_info info;
                int r;

                if (only >= 0 && (unsigned)only != g)
                        continue;
                tsr_fake_gpu_ops.device_info(n->gpus, g, &info);
                r = tsr_fake_gpus_set_mig_mode(n->gpus, g, on);
                if (r == TSR_EINUSE)
                        rc = tsr_buf_addf(out,
                                          "Unable to %s MIG Mode for GPU %s: In use by "
                                          "another client\n",
                                          on ? "enable" : "disable", info.bus_id);
                else if (r)
                        rc = tsr_buf_addf(out, "Unable to %s MIG Mode for GPU %s: Not Supported\n",
                                          on ? "enable" : "disable", info.bus_id);
                else
                        rc = tsr_buf_addf(out, "%s MIG Mode for GPU %s\n",
                                          on ? "Enabled" : "Disabled", info.bus_id);
        }
        return rc ? rc : tsr_buf_adds(out, "All done.\n");
}

static int query(struct sim_node *n, struct tsr_buf *out)
{
        int rc = tsr_buf_adds(out, "index, mig.mode.current\n");

        for (unsigned g = 0; g < n->gpu_count && !rc; g++) {
                struct tsr_gpu_info info;

                tsr_fake_gpu_ops.device_info(n->gpus, g, &info);
                rc = tsr_buf_addf(out, "%u, %s\n", g, info.mig_current ? "Enabled" : "Disabled");
        }
        return rc;
}

static const struct tsr_mig_profile *profile_of(const struct tsr_product *p, unsigned id)
{
        for (size_t i = 0; i < p->n_profiles; i++)
                if (p->profiles[i].gi_profile_id == id)
                        return &p->profiles[i];
        return NULL;
}

static int list_gi(struct sim_node *n, int only, struct tsr_buf *out)
{
        const char *rule = "+---------------------------------------------------------+\n";
        int rc = 0;
        size_t rows = 0;

        for (unsigned g = 0; g < n->gpu_count; g++) {
                struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
                size_t ni = 0;

                if (only < 0 || (unsigned)only == g)
                        tsr_fake_gpu_ops.gi_list(n->gpus, g, inst, TSR_GPU_INSTANCES_MAX, &ni);
                rows += ni;
        }
        if (rows == 0)
                return tsr_buf_adds(out, "No GPU instances found: Not Found\n");
        rc = tsr_buf_addf(out,
                          "%s| GPU instances:                                          |\n"
                          "| GPU   Name               Profile  Instance   Placement  |\n"
                          "|                            ID       ID       Start:Size |\n"
                          "|=========================================================|\n",
                          rule);
        for (unsigned g = 0; g < n->gpu_count && !rc; g++) {
                struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
                size_t ni = 0;

                if (only >= 0 && (unsigned)only != g)
                        continue;
                tsr_fake_gpu_ops.gi_list(n->gpus, g, inst, TSR_GPU_INSTANCES_MAX, &ni);
                for (size_t k = 0; k < ni && !rc; k++) {
                        const struct tsr_mig_profile *mp =
                            profile_of(n->product, inst[k].gi_profile_id);
                        char name[32], place[16];

                        snprintf(name, sizeof(name), "MIG %s", mp ? mp->name : "?");
                        snprintf(place, sizeof(place), "%u:%u", inst[k].start, inst[k].size);
                        rc = tsr_buf_addf(out, "|  %2u  %-18s %4u %9u %11s    |\n", g, name,
                                          inst[k].gi_profile_id, inst[k].gi_id, place);
                }
        }
        return rc ? rc : tsr_buf_adds(out, rule);
}

static const struct tsr_mig_profile *profile_named(const struct tsr_product *p, const char *s)
{
        char *end;
        long id = strtol(s, &end, 10);

        for (size_t i = 0; i < p->n_profiles; i++) {
                const struct tsr_mig_profile *mp = &p->profiles[i];

                if (!strcmp(mp->name, s) || (*end == '\0' && *s && id == (long)mp->gi_profile_id))
                        return mp;
        }
        return NULL;
}

static int create_gi(struct sim_node *n, int only, const char *list, bool with_ci,
                     struct tsr_buf *out)
{
        unsigned g = only >= 0 ? (unsigned)only : 0;
        char copy[256];
        char *save = NULL, *tok;
        int rc = 0;

        snprintf(copy, sizeof(copy), "%s", list);
        for (tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
                const struct tsr_mig_profile *mp = profile_named(n->product, tok);
                struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
                uint32_t occupied = 0;
                size_t ni = 0;
                unsigned gi, ci;
                char uuid[TSR_GPU_UUID_MAX];
                int start;

                if (!mp)
                        return tsr_buf_addf(out,
                                            "Unable to create a GPU instance on GPU %u "
                                            "using profile %s: Invalid Argument\n",
                                            g, tok);
                tsr_fake_gpu_ops.gi_list(n->gpus, g, inst, TSR_GPU_INSTANCES_MAX, &ni);
                for (size_t k = 0; k < ni; k++)
                        occupied |= tsr_geometry_span(inst[k].start, inst[k].size);
                start = tsr_geometry_lowest_start(mp, occupied);
                if (start < 0 || tsr_fake_gpu_ops.gi_create(n->gpus, g, mp->gi_profile_id,
                                                            (unsigned)start, &gi)) {
                        rc = tsr_buf_addf(out,
                                          "Unable to create a GPU instance on GPU %2u using "
                                          "profile %u: Insufficient Resources\n",
                                          g, mp->gi_profile_id);
                        continue;
                }
                rc = tsr_buf_addf(out,
                                  "Successfully created GPU instance ID %2u on GPU %2u "
                                  "using profile MIG %s (ID %2u)\n",
                                  gi, g, mp->name, mp->gi_profile_id);
                if (!rc && with_ci && !tsr_fake_gpu_ops.ci_create(n->gpus, g, gi, &ci, uuid))
                        rc = tsr_buf_addf(out,
                                          "Successfully created compute instance ID %2u on "
                                          "GPU %2u GPU instance ID %2u using profile MIG %s "
                                          "(ID %2u)\n",
                                          ci, g, gi, mp->name, mp->compute_slices - 1);
        }
        return rc;
}

int sim_nvidia_smi(struct tsr_cluster *c, size_t node, const struct sim_argv *args,
                   struct tsr_buf *out, struct tsr_diag *diag)
{
        struct sim_node *n = &c->nodes[node];
        int only = -1, mode = -1;
        bool mig = false, lgi = false, with_ci = false, query_mode = false;
        const char *cgi = NULL;

        if (!n->product)
                return tsr_buf_adds(out, "NVIDIA-SMI has failed because it couldn't communicate "
                                         "with the NVIDIA driver.\n");
        for (size_t i = 1; i < args->n; i++) {
                const char *a = args->v[i];
                unsigned idx;

                if (!strcmp(a, "-i") && i + 1 < args->n) {
                        if (parse_index(args->v[++i], n->gpu_count, &idx))
                                return tsr_buf_addf(out, "No devices were found\n");
                        only = (int)idx;
                } else if (!strcmp(a, "-mig") && i + 1 < args->n) {
                        const char *v = args->v[++i];

                        if (strcmp(v, "0") && strcmp(v, "1"))
                                return tsr_diag_set(diag, TSR_EPARSE,
                                                    "nvidia-smi: -mig takes 0 "
                                                    "or 1");
                        mode = v[0] == '1';
                } else if (!strcmp(a, "mig")) {
                        mig = true;
                } else if (mig && !strcmp(a, "-lgi")) {
                        lgi = true;
                } else if (mig && !strcmp(a, "-cgi") && i + 1 < args->n) {
                        cgi = args->v[++i];
                } else if (mig && !strcmp(a, "-C")) {
                        with_ci = true;
                } else if (!strcmp(a, "--query-gpu=index,mig.mode.current")) {
                        query_mode = true;
                } else if (!strcmp(a, "--format=csv")) {
                        continue;
                } else {
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "nvidia-smi: unsupported argument "
                                            "%s",
                                            a);
                }
        }
        if (mode >= 0)
                return set_mode(n, only, mode == 1, out);
        if (query_mode)
                return query(n, out);
        if (lgi)
                return list_gi(n, only, out);
        if (cgi)
                return create_gi(n, only, cgi, with_ci, out);
        return tsr_diag_set(diag, TSR_EPARSE, "nvidia-smi: unsupported invocation");
}
