/*
 * routes.c - the route table. Paths and names follow upstream's generated registration
 * (pkg/worker/webhooks/worker/zz_generated.webhooks.go): /mutate-<prefix>-<group>-<version>-<kind>
 * with the core group spelled "core" and dots in a group turned into dashes.
 */
#include "webhook/routes.h"

#include "webhook/instance.h"
#include "webhook/instancetype.h"
#include "webhook/kvcache.h"
#include "webhook/pod.h"
#include "webhook/workload.h"

#include <string.h>

#define WORKER "worker.gpustack.ai", "v1alpha1"
#define CORE   "", "v1"

const struct tsr_webhook_route tsr_webhook_routes[] = {
    /* gpustack-worker-mutation, in upstream's order */
    {"/mutate-worker-gpustack-ai-v1alpha1-instancetype",
     "mutate.worker.gpustack.ai.v1alpha1.instancetype", WORKER, "InstanceType", true, false,
     tsr_webhook_instancetype_mutate, NULL},
    {"/mutate-worker-gpustack-ai-v1alpha1-instance", "mutate.worker.gpustack.ai.v1alpha1.instance",
     WORKER, "Instance", true, true, tsr_webhook_instance_mutate, NULL},
    {"/mutate-gpustack-worker-kvcache-core-v1-pod", "mutate.gpustack-worker-kvcache.core.v1.pod",
     CORE, "Pod", true, false, tsr_webhook_kvcache_mutate, NULL},
    {"/mutate-gpustack-worker-core-v1-pod", "mutate.gpustack-worker.core.v1.pod", CORE, "Pod", true,
     false, tsr_webhook_pod_mutate, tsr_webhook_pod_reads},
    {"/mutate-gpustack-worker-kueue-x-k8s-io-v1beta2-workload",
     "mutate.gpustack-worker.kueue.x-k8s.io.v1beta2.workload", "kueue.x-k8s.io", "v1beta2",
     "Workload", true, false, tsr_webhook_workload_mutate, NULL},
    /* gpustack-worker-validation */
    {"/validate-worker-gpustack-ai-v1alpha1-instancetype",
     "validate.worker.gpustack.ai.v1alpha1.instancetype", WORKER, "InstanceType", false, false,
     tsr_webhook_instancetype_validate, NULL},
    {"/validate-worker-gpustack-ai-v1alpha1-instance",
     "validate.worker.gpustack.ai.v1alpha1.instance", WORKER, "Instance", false, true,
     tsr_webhook_instance_validate, NULL},
    {"/validate-gpustack-worker-kvcache-core-v1-pod",
     "validate.gpustack-worker-kvcache.core.v1.pod", CORE, "Pod", false, false,
     tsr_webhook_kvcache_validate, NULL},
    {"/validate-gpustack-worker-core-v1-pod", "validate.gpustack-worker.core.v1.pod", CORE, "Pod",
     false, false, tsr_webhook_pod_validate, tsr_webhook_pod_reads},
};

const size_t tsr_webhook_n_routes = sizeof(tsr_webhook_routes) / sizeof(tsr_webhook_routes[0]);

const struct tsr_webhook_route *tsr_webhook_route_find(const char *path)
{
        for (size_t i = 0; i < tsr_webhook_n_routes; i++)
                if (!strcmp(tsr_webhook_routes[i].path, path))
                        return &tsr_webhook_routes[i];
        return NULL;
}
