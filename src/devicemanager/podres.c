/*
 * podres.c - pod-resources List into the identify view. The view's strings point into the
 * unpacked protobuf message, which the view keeps until it is freed.
 */
#include "devicemanager/podres.h"

#include "base/err.h"
#include "grpc/unix_client.h"
#include "podresources/v1/api.pb-c.h"

#include <stdlib.h>

#define PODRES_TIMEOUT_MS 2000

/* The view with the message its strings point into. */
struct owned_view {
        struct tsr_dp_kubelet_view kv; /* first: the view handed out */
        V1__ListPodResourcesResponse *msg;
        struct tsr_dp_held *held;
        const char **ns, **name;
};

void tsr_dm_podres_free(struct tsr_dp_kubelet_view *kv)
{
        struct owned_view *o = (struct owned_view *)kv;

        if (!o)
                return;
        v1__list_pod_resources_response__free_unpacked(o->msg, NULL);
        free(o->held);
        free(o->ns);
        free(o->name);
        free(o);
}

int tsr_dm_podres_list(const char *socket_path, struct tsr_dp_kubelet_view **out,
                       struct tsr_diag *diag)
{
        V1__ListPodResourcesRequest req;
        struct tsr_grpc_status st = {0};
        struct owned_view *o;
        struct tsr_buf resp;
        uint8_t bytes[16];
        size_t len, n_held = 0;
        int rc;

        v1__list_pod_resources_request__init(&req);
        len = v1__list_pod_resources_request__pack(&req, bytes);
        tsr_buf_init(&resp);
        rc = tsr_grpc_unix_call(socket_path, "/v1.PodResourcesLister/List", bytes, len,
                                PODRES_TIMEOUT_MS, &resp, &st);
        if (rc || st.code != 0) {
                tsr_buf_release(&resp);
                return tsr_diag_set(diag, rc ? rc : TSR_EIO, "pod-resources List on %s: %s: %s",
                                    socket_path, tsr_grpc_code_name(st.code), st.msg);
        }
        o = calloc(1, sizeof(*o));
        if (!o) {
                tsr_buf_release(&resp);
                return tsr_diag_set(diag, TSR_ENOMEM, "pod-resources: out of memory");
        }
        o->msg = v1__list_pod_resources_response__unpack(NULL, resp.len, (const uint8_t *)resp.ptr);
        tsr_buf_release(&resp);
        if (!o->msg) {
                free(o);
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "pod-resources List on %s: a malformed answer", socket_path);
        }
        for (size_t p = 0; p < o->msg->n_pod_resources; p++)
                for (size_t c = 0; c < o->msg->pod_resources[p]->n_containers; c++)
                        n_held += o->msg->pod_resources[p]->containers[c]->n_devices;
        o->held = calloc(n_held ? n_held : 1, sizeof(*o->held));
        o->ns = calloc(o->msg->n_pod_resources + 1, sizeof(*o->ns));
        o->name = calloc(o->msg->n_pod_resources + 1, sizeof(*o->name));
        if (!o->held || !o->ns || !o->name) {
                tsr_dm_podres_free(&o->kv);
                return tsr_diag_set(diag, TSR_ENOMEM, "pod-resources: out of memory");
        }
        for (size_t p = 0; p < o->msg->n_pod_resources; p++) {
                const V1__PodResources *pr = o->msg->pod_resources[p];

                o->ns[p] = pr->namespace_;
                o->name[p] = pr->name;
                for (size_t c = 0; c < pr->n_containers; c++)
                        for (size_t d = 0; d < pr->containers[c]->n_devices; d++) {
                                const V1__ContainerDevices *cd = pr->containers[c]->devices[d];

                                o->held[o->kv.n_held++] =
                                    (struct tsr_dp_held){pr->namespace_,
                                                         pr->name,
                                                         pr->containers[c]->name,
                                                         cd->resource_name,
                                                         (const char *const *)cd->device_ids,
                                                         cd->n_device_ids};
                        }
        }
        o->kv.held = o->held;
        o->kv.pod_ns = o->ns;
        o->kv.pod_name = o->name;
        o->kv.n_pods = o->msg->n_pod_resources;
        *out = &o->kv;
        return 0;
}
