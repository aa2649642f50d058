/*
 * request.h - gate 1: a Pod's accelerator request, judged and folded (the Pod webhook's logic).
 *
 * Input is the Pod's containers with their resource lists (requests are read first, falling back
 * to limits) and the pool the Pod's queue fronts. Output is data: the family, field errors in the
 * upstream wording (spec/upstream-behavior.md §2), and the edits the mutating half makes: the
 * recomputed .sliced.units / .partitioned.units and the defaulted .sliced.cores-percentage,
 * written to both requests and limits. "Exactly 1" is an exact quantity comparison ("1m" is not
 * 1). The memory divisor is the pool InstanceType's per-accelerator memory, never the LocalQueue.
 * Pure; every string in the input is borrowed for the duration of the call.
 */
#ifndef TSR_CORE_REQUEST_H
#define TSR_CORE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/quantity.h"
#include "core/keys.h"
#include "core/views.h"

struct tsr_diag;

#define TSR_RES_MAX          32
#define TSR_CONTAINERS_MAX   32
#define TSR_FIELD_ERRORS_MAX 16
#define TSR_EDITS_MAX        8
#define TSR_FIELD_ERROR_LEN  512

enum tsr_container_group {
        TSR_CG_APP,     /* spec.containers */
        TSR_CG_INIT,    /* spec.initContainers without restartPolicy: Always */
        TSR_CG_SIDECAR, /* spec.initContainers with restartPolicy: Always */
};

struct tsr_res_item {
        const char *key;  /* borrowed */
        const char *text; /* borrowed: the quantity as written */
        struct tsr_quantity q;
};

struct tsr_container_req {
        const char *name; /* borrowed */
        enum tsr_container_group group;
        unsigned index; /* position in its spec list */
        size_t n_limits, n_requests;
        struct tsr_res_item limits[TSR_RES_MAX];
        struct tsr_res_item requests[TSR_RES_MAX];
};

struct tsr_pod_req {
        size_t n;
        struct tsr_container_req c[TSR_CONTAINERS_MAX];
};

/* What the InstanceType fronting the Pod's queue provides. */
struct tsr_fold_pool {
        const struct tsr_manufacturer *manufacturer;
        uint64_t memory_mib; /* per-accelerator memory; 0: not known yet (see awaits_memory) */
        size_t n_profiles;   /* offered partition profiles */
        const struct tsr_profile_figure *profiles; /* name + memoryMib */
};

struct tsr_res_edit {
        unsigned container; /* index into tsr_pod_req.c */
        char key[TSR_KEY_MAX];
        int64_t value;
};

/* Which rule a field error breaks (spec/upstream-behavior.md §2), for metrics and logs. */
#define TSR_REQUEST_RULE_MAP(XX)                                                                   \
        XX(FAMILY, "one-family")                                                                   \
        XX(GROUP, "one-container-group")                                                           \
        XX(SLICED, "sliced-shape")                                                                 \
        XX(PARTITIONED, "partition-shape")                                                         \
        XX(PROFILES, "one-profile")                                                                \
        XX(PROFILE_ONE, "profile-exactly-one")                                                     \
        XX(SLICERS, "one-slicing-container")                                                       \
        XX(SIDECAR, "no-sidecar-claim")                                                            \
        XX(UNOFFERED, "profile-offered")                                                           \
        XX(FOLD, "fold")

enum tsr_request_rule {
#define XX(E, name) TSR_RULE_##E,
        TSR_REQUEST_RULE_MAP(XX)
#undef XX
};

/* The rule's metric label ("one-family", "sliced-shape", ...). */
const char *tsr_request_rule_name(enum tsr_request_rule r);

struct tsr_request_verdict {
        enum tsr_family family; /* the Pod's accelerator family, NONE without one */
        int container;          /* index of the slicing container, -1 if none */
        const char *profile;    /* partition: the profile requested (into the input) */
        int64_t units;          /* the folded units, 0 when none */
        /*
         * The Pod passed the Pod-wide rules and holds a slicing family, but the pool's memory is
         * not known yet (memory_mib 0): its container's shape rules and fold were not run, so it
         * has no units and no edits. The caller answers it with a retry.
         */
        bool awaits_memory;
        size_t n_errors;
        char errors[TSR_FIELD_ERRORS_MAX][TSR_FIELD_ERROR_LEN];
        enum tsr_request_rule rules[TSR_FIELD_ERRORS_MAX]; /* the rule each error breaks */
        size_t n_edits;
        struct tsr_res_edit edits[TSR_EDITS_MAX];
};

/*
 * Judges and folds pod against pool into *out. Returns 0 when it decided (out->n_errors == 0 is
 * an admit, unless out->awaits_memory asks for a retry), or TSR_EINVAL when the input is unusable
 * (a pool without a manufacturer; diag says why). A pool whose memory_mib is 0 still judges every
 * Pod that needs no fold (exclusive, shared, no accelerator) exactly as one with memory would.
 */
int tsr_request_evaluate(const struct tsr_pod_req *pod, const struct tsr_fold_pool *pool,
                         struct tsr_request_verdict *out, struct tsr_diag *diag);

/*
 * Joins the verdict's field errors the way apimachinery's aggregate prints them: one error alone,
 * several as "[e1, e2]". Writes at most len bytes (NUL included) into buf and returns buf.
 */
char *tsr_request_message(const struct tsr_request_verdict *v, char *buf, size_t len);

#endif
