/*
 * pod_review.c - see pod_review.h.
 */
#include "pod_review.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A Pod as a ReplicaSet controller creates it: two containers, env, volumes (a PVC, a
 * shared-memory emptyDir, the projected service-account token the ServiceAccount plugin adds),
 * the default tolerations, the queue label Kueue reads, and half the memory of one sliced H100 in
 * the first container's limits. Split in lines only to stay within ISO C's string-literal length;
 * sent compact, as the API server does.
 */
static const char *const review_lines[] = {
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",",
    "\"request\":{\"uid\":\"3c6f1a52-8d0e-4b7c-9a51-6f2d8e4b1c07\",",
    "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},",
    "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},",
    "\"requestKind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},",
    "\"requestResource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},",
    "\"namespace\":\"team-inference\",\"operation\":\"CREATE\",",
    "\"userInfo\":{\"username\":\"system:serviceaccount:kube-system:replicaset-controller\",",
    "\"uid\":\"b0a4c2d6-58e1-4f3a-8c7d-2e9f6a1b3c54\",",
    "\"groups\":[\"system:serviceaccounts\",\"system:serviceaccounts:kube-system\",",
    "\"system:authenticated\"]},\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",",
    "\"metadata\":{\"generateName\":\"qwen2-7b-instruct-5d8f7c9b6-\",",
    "\"namespace\":\"team-inference\",\"creationTimestamp\":null,",
    "\"labels\":{\"app.kubernetes.io/name\":\"qwen2-7b-instruct\",",
    "\"pod-template-hash\":\"5d8f7c9b6\",\"kueue.x-k8s.io/queue-name\":\"" BENCH_POD_QUEUE "\"},",
    "\"annotations\":{\"kubectl.kubernetes.io/default-container\":\"server\"},",
    "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",",
    "\"name\":\"qwen2-7b-instruct-5d8f7c9b6\",",
    "\"uid\":\"e7d3b1a9-0c4f-4d2e-b6a8-91f5c3e7d2b0\",\"controller\":true,",
    "\"blockOwnerDeletion\":true}]},\"spec\":{\"volumes\":[{\"name\":\"model-cache\",",
    "\"persistentVolumeClaim\":{\"claimName\":\"model-cache\",\"readOnly\":true}},",
    "{\"name\":\"dshm\",\"emptyDir\":{\"medium\":\"Memory\",\"sizeLimit\":\"8Gi\"}},",
    "{\"name\":\"kube-api-access-x7k2p\",",
    "\"projected\":{\"sources\":[{\"serviceAccountToken\":{\"expirationSeconds\":3607,",
    "\"path\":\"token\"}},{\"configMap\":{\"name\":\"kube-root-ca.crt\",",
    "\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}]}},",
    "{\"downwardAPI\":{\"items\":[{\"path\":\"namespace\",",
    "\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.namespace\"}}]}}],",
    "\"defaultMode\":420}}],\"containers\":[{\"name\":\"server\",",
    "\"image\":\"vllm/vllm-openai:v0.6.3\",\"args\":[\"--model\",",
    "\"/models/Qwen2-7B-Instruct\",\"--port\",\"8080\"],\"ports\":[{\"name\":\"http\",",
    "\"containerPort\":8080,\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"HF_HUB_OFFLINE\",",
    "\"value\":\"1\"},{\"name\":\"POD_NAME\",",
    "\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\",",
    "\"fieldPath\":\"metadata.name\"}}}],\"resources\":{\"limits\":{\"cpu\":\"8\",",
    "\"memory\":\"32Gi\",\"nvidia.com/gpu.sliced\":\"1\",",
    "\"nvidia.com/gpu.sliced.memory-percentage\":\"50\"},\"requests\":{\"cpu\":\"4\",",
    "\"memory\":\"24Gi\"}},\"volumeMounts\":[{\"name\":\"model-cache\",\"readOnly\":true,",
    "\"mountPath\":\"/models\"},{\"name\":\"dshm\",\"mountPath\":\"/dev/shm\"},",
    "{\"name\":\"kube-api-access-x7k2p\",\"readOnly\":true,",
    "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\"}],",
    "\"terminationMessagePath\":\"/dev/termination-log\",",
    "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"},",
    "{\"name\":\"metrics-exporter\",\"image\":\"prom/statsd-exporter:v0.26.1\",",
    "\"env\":[{\"name\":\"LOG_LEVEL\",\"value\":\"warn\"}],",
    "\"resources\":{\"limits\":{\"cpu\":\"200m\",\"memory\":\"128Mi\"},",
    "\"requests\":{\"cpu\":\"50m\",\"memory\":\"64Mi\"}},",
    "\"volumeMounts\":[{\"name\":\"kube-api-access-x7k2p\",\"readOnly\":true,",
    "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\"}],",
    "\"terminationMessagePath\":\"/dev/termination-log\",",
    "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"}],",
    "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,",
    "\"dnsPolicy\":\"ClusterFirst\",\"serviceAccountName\":\"default\",",
    "\"serviceAccount\":\"default\",\"securityContext\":{},",
    "\"schedulerName\":\"default-scheduler\",",
    "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",",
    "\"effect\":\"NoExecute\",\"tolerationSeconds\":300},",
    "{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",",
    "\"effect\":\"NoExecute\",\"tolerationSeconds\":300},{\"key\":\"nvidia.com/gpu\",",
    "\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],\"priority\":0,",
    "\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\"},",
    "\"status\":{}},\"oldObject\":null,\"dryRun\":false,",
    "\"options\":{\"kind\":\"CreateOptions\",\"apiVersion\":\"meta.k8s.io/v1\"}}}",
};

char *bench_pod_review(size_t *len)
{
        size_t n = 0, cap = 1;
        char *text, *body;
        json_t *doc;
        json_error_t err;

        for (size_t i = 0; i < sizeof(review_lines) / sizeof(review_lines[0]); i++)
                cap += strlen(review_lines[i]);
        text = malloc(cap);
        if (!text)
                return NULL;
        for (size_t i = 0; i < sizeof(review_lines) / sizeof(review_lines[0]); i++) {
                size_t k = strlen(review_lines[i]);

                memcpy(text + n, review_lines[i], k);
                n += k;
        }
        text[n] = '\0';
        doc = json_loads(text, 0, &err);
        free(text);
        if (!doc) {
                fprintf(stderr, "bench: the built-in review is not JSON: %s (column %d)\n",
                        err.text, err.column);
                return NULL;
        }
        body = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(doc);
        if (body)
                *len = strlen(body);
        return body;
}
