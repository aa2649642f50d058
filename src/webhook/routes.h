/*
 * routes.h - the admission webhooks `tessera webhook` serves: one path per webhook, named and
 * ordered as upstream registers them (the Helm chart's webhook configurations list the same
 * paths; a test keeps the two in step). Mutating webhooks of one configuration run in list
 * order, so the KV-cache injection precedes the Pod fold, as upstream's gpustack-worker-mutation
 * has it.
 *
 * Ownership: static, immutable data.
 */
#ifndef TSR_WEBHOOK_ROUTES_H
#define TSR_WEBHOOK_ROUTES_H

#include <stddef.h>

#include "webhook/dispatch.h"

extern const struct tsr_webhook_route tsr_webhook_routes[];
extern const size_t tsr_webhook_n_routes;

/* The route serving path (the query string already removed), or NULL. */
const struct tsr_webhook_route *tsr_webhook_route_find(const char *path);

#endif
