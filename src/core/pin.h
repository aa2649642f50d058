/*
 * pin.h - the node requirements tessera pins a request to (spec/upstream-behavior.md §2, §6).
 *
 * Two pins, both `Gt` requirements on node labels, read by the scheduler and by Kueue TAS:
 *   the Workload fit pin (gate 4), per PodSet template:
 *     sliced-max-free-units.fit.gpustack.ai/<aKey> Gt U-1  when the template asks for a logical
 *         slice of U units per accelerator (U > 0, the largest .sliced.units of any container);
 *     shared-free-cards.fit.gpustack.ai/<aKey> Gt N-1      when it asks for shares on N >= 2
 *         accelerators (N, the largest .shared of any one container, not the sum);
 *   the Pod card-count pin (gate 1), for a shared request of N >= 2 accelerators:
 *     acceleratable.feature.gpustack.ai/<aKey>.count Gt N-1.
 * Only the requirements are computed here; codec/affinity.h ANDs them into a PodSpec. Pure.
 */
#ifndef TSR_CORE_PIN_H
#define TSR_CORE_PIN_H

#include <stddef.h>

#include "core/keys.h"
#include "core/request.h"

#define TSR_PIN_MAX            2
#define TSR_ACCEL_COUNT_PREFIX "acceleratable.feature.gpustack.ai/"

struct tsr_node_requirement {
        char key[TSR_KEY_MAX];
        char op[8];     /* "Gt" */
        char value[24]; /* decimal integer */
};

/*
 * Writes the Workload fit pin of one PodSet template (its containers in tmpl) for manufacturer m
 * and model aKey accel_key into out[0..TSR_PIN_MAX) and returns how many were written (0 when
 * the template asks for neither a slice nor shares on two accelerators).
 */
size_t tsr_pin_workload(const struct tsr_pod_req *tmpl, const struct tsr_manufacturer *m,
                        const char *accel_key, struct tsr_node_requirement *out);

/* Writes the Pod card-count pin into *out and returns 1, or returns 0 when none applies. */
size_t tsr_pin_card_count(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m,
                          const char *accel_key, struct tsr_node_requirement *out);

#endif
