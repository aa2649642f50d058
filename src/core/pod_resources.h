/*
 * pod_resources.h - a Pod's effective request of one resource, as the scheduler and Kueue count
 * it (Kubernetes PodRequests, with native sidecars).
 *
 * Each container's value is its request, falling back to its limit. App containers and native
 * sidecars (restartable init containers) run together, so they add up; each ordinary init
 * container runs alone beside the sidecars started before it. The effective request is the
 * larger of the two: max(sum(app) + sum(sidecars), max_i(init_i + sum(sidecars before i))).
 * Values round up (apimachinery Value(), or MilliValue() for milli); a sum that would overflow
 * saturates at INT64_MAX. Pure; borrows the request for the call.
 */
#ifndef TSR_CORE_POD_RESOURCES_H
#define TSR_CORE_POD_RESOURCES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/request.h"

/* The container's request of key (requests first, then limits), or 0 when it names none. */
int64_t tsr_container_request(const struct tsr_container_req *c, const char *key, bool milli);

/* The Pod's effective request of key; milli selects MilliValue (cpu), else Value. */
int64_t tsr_pod_request(const struct tsr_pod_req *pod, const char *key, bool milli);

#endif
