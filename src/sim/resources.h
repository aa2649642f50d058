/*
 * resources.h - resource lists of the simulator's scheduler and TAS: names with integer values
 * (cpu in milli-cores, everything else in units), a Pod's effective requests, a node's
 * allocatable. Value types; no allocation.
 */
#ifndef TSR_SIM_RESOURCES_H
#define TSR_SIM_RESOURCES_H

#include <stdint.h>

#include "codec/pod_spec.h"
#include "core/keys.h"

/* A resource list: names with integer values (cpu in milli-cores, everything else in units). */
#define POD_RESOURCES_MAX 80

struct pod_resources {
        size_t n;
        struct {
                char name[TSR_KEY_MAX];
                int64_t value;
        } r[POD_RESOURCES_MAX];
};

/* The Pod's effective request of every resource any container names, plus "pods": 1. */
void pod_spec_resources(const struct tsr_pod_req *req, struct pod_resources *out);

/* The value of name in l, or -1 when l does not list it. */
int64_t pod_resources_get(const struct pod_resources *l, const char *name);

/* Copies src into dst, only the entries in use (a list is tens of kilobytes of name slots). */
void pod_resources_copy(struct pod_resources *dst, const struct pod_resources *src);

/* Adds value to name in l (appending it when absent; a full list drops new names). */
void pod_resources_add(struct pod_resources *l, const char *name, int64_t value);

#endif
