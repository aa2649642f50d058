/*
 * podres.h - the kubelet's pod-resources API (v1 List) as the Allocate path reads it: which
 * Pods the kubelet runs and which devices each container holds (spec/kubernetes-contracts.md
 * §2.3), flattened into deviceplugin/identify.h's view.
 *
 * The socket is re-dialled on every call (its inode changes when the kubelet restarts), with a
 * 2 s deadline; a call that fails or is rate limited (RESOURCE_EXHAUSTED) makes the caller fall
 * back. Ownership: a view from tsr_dm_podres_list owns every string it points to; free it with
 * tsr_dm_podres_free.
 */
#ifndef TSR_DEVICEMANAGER_PODRES_H
#define TSR_DEVICEMANAGER_PODRES_H

#include "base/diag.h"
#include "deviceplugin/identify.h"

/*
 * Lists the kubelet's Pods and their devices over socket_path into a new view *out. Returns 0, or
 * TSR_EIO (the call failed: diag has the gRPC status), TSR_EPARSE (a malformed answer) or
 * TSR_ENOMEM.
 */
int tsr_dm_podres_list(const char *socket_path, struct tsr_dp_kubelet_view **out,
                       struct tsr_diag *diag);

void tsr_dm_podres_free(struct tsr_dp_kubelet_view *kv);

#endif
