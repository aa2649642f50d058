/*
 * fuzz_kueue_workload.c - bytes as a Kueue v1beta2 Workload object (inputs that are not JSON are
 * skipped). The reader may refuse, always with a message; whatever it accepts must hold the
 * shape its header promises (1 to TSR_KUEUE_PODSETS_MAX distinct PodSets, hostnames of 1 to 253
 * characters, distinct within a PodSet, Pod counts of at least 1), and must then go through
 * gate 3's snapshot over a two-node H100 pool (one node of the Workload's first flavor, one not
 * named) to a Ready or Retry verdict, or an error with a message.
 */
#include "base/diag.h"
#include "codec/kueue_workload.h"
#include "core/capability.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_shape(const struct tsr_kueue_workload *k)
{
        if (k->w.n_podsets < 1 || k->w.n_podsets > TSR_KUEUE_PODSETS_MAX || !k->w.ns[0] ||
            !k->w.name[0] || !k->w.cluster_queue || !k->w.check_message)
                abort();
        for (size_t p = 0; p < k->w.n_podsets; p++) {
                const struct tsr_snapshot_podset *ps = &k->w.podsets[p];

                if (!json_is_object(ps->tmpl))
                        abort();
                for (size_t q = 0; q < p; q++)
                        if (!strcmp(k->w.podsets[q].name, ps->name))
                                abort();
                for (size_t d = 0; d < ps->n_domains; d++) {
                        size_t len = strlen(ps->domains[d].node);

                        if (len < 1 || len > 253 || ps->domains[d].pods < 1)
                                abort();
                        for (size_t e = 0; e < d && ps->n_domains <= 256; e++)
                                if (!strcmp(ps->domains[e].node, ps->domains[d].node))
                                        abort();
                }
        }
}

static void judge(const struct tsr_kueue_workload *k)
{
        const struct tsr_product *h100 = tsr_catalog_product_by_name("NVIDIA H100 80GB HBM3");
        struct tsr_accel_cap caps[2];
        struct tsr_snapshot_node nodes[2];
        struct tsr_admit_verdict v;
        struct tsr_diag diag;
        const char *flavor = k->w.podsets[0].flavor;
        const char *name = k->w.podsets[0].n_domains ? k->w.podsets[0].domains[0].node : "node-a";

        for (unsigned i = 0; i < 2; i++)
                tsr_capability_detect(h100, i, "GPU", false, &caps[i]);
        nodes[0] = (struct tsr_snapshot_node){
            .name = name, .present = true, .flavor = flavor, .product = h100, .caps = caps, .n = 2};
        nodes[1] = (struct tsr_snapshot_node){.name = strcmp(name, "node-b") ? "node-b" : "node-c",
                                              .present = true,
                                              .flavor = "other",
                                              .product = h100,
                                              .caps = caps,
                                              .n = 2};
        tsr_diag_clear(&diag);
        if (tsr_admit_snapshot_judge(h100, nodes, 2, &k->w, 1, &k->w, &v, &diag)) {
                if (diag.msg[0] == '\0')
                        abort();
                return;
        }
        if (v.state != TSR_CHECK_READY && v.state != TSR_CHECK_RETRY)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_kueue_workload *k = NULL;
        struct tsr_diag diag;
        json_error_t err;
        json_t *obj;

        if (size > 1 << 20)
                return 0;
        obj = json_loadb((const char *)data, size, JSON_DECODE_ANY, &err);
        if (!obj)
                return 0;
        tsr_diag_clear(&diag);
        if (tsr_kueue_workload_parse(obj, &k, &diag)) {
                if (diag.msg[0] == '\0' || k)
                        abort();
                json_decref(obj);
                return 0;
        }
        check_shape(k);
        judge(k);
        tsr_kueue_workload_free(k);
        json_decref(obj);
        return 0;
}
