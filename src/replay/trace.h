/*
 * trace.h - the node and pod lists of a GPU-sharing cluster trace (the Alibaba
 * cluster-trace-gpu-v2023 CSV format the FGD simulator reads; spec/fgd-benchmark-protocol.md §0).
 *
 * Nodes: `sn,cpu_milli,memory_mib,gpu,model`. Pods: `name,cpu_milli,memory_mib,num_gpu,gpu_milli`
 * with an optional `gpu_spec` (acceptable GPU models, `A|B`; empty: any); further columns
 * (qos, phases, times) are read past, since the protocol ignores them. Columns are found by their
 * header names, in any order. Fields are plain (no quoting); a CRLF line end is accepted, blank
 * lines are skipped.
 *
 * Validity, checked while parsing (the error names FILE-relative line and column): numbers are
 * decimal and non-negative; a node has at most TSR_TRACE_GPUS_MAX GPUs and a model when it has
 * any; a pod's gpu_milli is within 0..1000; a GPU pod (num_gpu >= 1) asks for gpu_milli > 0, and
 * a multi-GPU pod takes whole GPUs (gpu_milli 1000); a CPU-only pod's gpu_milli is 0.
 *
 * Pure: parses a buffer the caller read. Ownership: the arrays are new (free with free()); *out
 * is written only on success.
 */
#ifndef TSR_REPLAY_TRACE_H
#define TSR_REPLAY_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"

#define TSR_TRACE_NAME_MAX  64
#define TSR_TRACE_MODEL_MAX 32
#define TSR_TRACE_SPEC_MAX  256
#define TSR_TRACE_GPUS_MAX  16
#define TSR_TRACE_MILLI     1000 /* one whole GPU in gpu_milli */

struct tsr_trace_node {
        char name[TSR_TRACE_NAME_MAX];
        int64_t cpu_milli;
        int64_t memory_mib;
        unsigned gpus;
        char model[TSR_TRACE_MODEL_MAX];
};

struct tsr_trace_pod {
        char name[TSR_TRACE_NAME_MAX];
        int64_t cpu_milli;
        int64_t memory_mib;
        unsigned num_gpu;
        unsigned gpu_milli;                /* per GPU; 1000 for whole GPUs */
        char gpu_spec[TSR_TRACE_SPEC_MAX]; /* "" or "A|B" */
};

/* Parses a node list. Returns 0 with a new array in *out and its length in *n, or TSR_EPARSE
 * (diag names the line) / TSR_ENOMEM. */
int tsr_trace_parse_nodes(const char *text, size_t len, struct tsr_trace_node **out, size_t *n,
                          struct tsr_diag *diag);

/* Parses a pod list, as tsr_trace_parse_nodes. */
int tsr_trace_parse_pods(const char *text, size_t len, struct tsr_trace_pod **out, size_t *n,
                         struct tsr_diag *diag);

/* True when a pod with gpu_spec spec may run on a GPU of model (an empty spec accepts all). */
bool tsr_trace_spec_accepts(const char *spec, const char *model);

/* order[0..n): the indices of nodes[0..n) sorted by name. 0, or TSR_ENOMEM (order untouched). */
int tsr_trace_nodes_by_name(const struct tsr_trace_node *nodes, size_t n, size_t *order);

/* True for a fractional pod: one GPU, less than all of it. */
bool tsr_trace_pod_fractional(const struct tsr_trace_pod *p);

#endif
