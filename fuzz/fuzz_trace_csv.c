/*
 * fuzz_trace_csv.c - libFuzzer target for replay/trace. The first byte picks the list (even:
 * nodes, odd: pods), the rest is the CSV. Any bytes either fail with TSR_EPARSE (a message and a
 * line number set) or TSR_ENOMEM, or parse into rows that hold the documented invariants: names
 * non-empty and NUL-terminated, a node with GPUs has a model and at most TSR_TRACE_GPUS_MAX GPUs,
 * a pod's gpu_milli is within 0..1000, zero exactly when it asks for no GPU, and 1000 when it asks
 * for more than one. A violation abort()s.
 */
#include "base/diag.h"
#include "base/err.h"
#include "replay/trace.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_failure(int rc, const struct tsr_diag *diag)
{
        if (rc != TSR_EPARSE && rc != TSR_ENOMEM)
                abort();
        if (rc == TSR_EPARSE && (!diag->msg[0] || !diag->line))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_diag diag;
        int rc;

        if (!size)
                return 0;
        tsr_diag_clear(&diag);
        if (data[0] % 2 == 0) {
                struct tsr_trace_node *nodes = NULL;
                size_t n = 0;

                rc = tsr_trace_parse_nodes((const char *)data + 1, size - 1, &nodes, &n, &diag);
                if (rc) {
                        check_failure(rc, &diag);
                        return 0;
                }
                for (size_t i = 0; i < n; i++) {
                        const struct tsr_trace_node *nd = &nodes[i];

                        if (!nd->name[0] || memchr(nd->name, 0, sizeof(nd->name)) == NULL ||
                            nd->gpus > TSR_TRACE_GPUS_MAX || (nd->gpus && !nd->model[0]) ||
                            nd->cpu_milli < 0 || nd->memory_mib < 0)
                                abort();
                }
                free(nodes);
                return 0;
        }
        {
                struct tsr_trace_pod *pods = NULL;
                size_t n = 0;

                rc = tsr_trace_parse_pods((const char *)data + 1, size - 1, &pods, &n, &diag);
                if (rc) {
                        check_failure(rc, &diag);
                        return 0;
                }
                for (size_t i = 0; i < n; i++) {
                        const struct tsr_trace_pod *p = &pods[i];

                        if (p->gpu_milli > TSR_TRACE_MILLI ||
                            (p->num_gpu == 0) != (p->gpu_milli == 0) ||
                            (p->num_gpu > 1 && p->gpu_milli != TSR_TRACE_MILLI) ||
                            memchr(p->gpu_spec, 0, sizeof(p->gpu_spec)) == NULL)
                                abort();
                        (void)tsr_trace_spec_accepts(p->gpu_spec, "V100M16");
                }
                free(pods);
        }
        return 0;
}
