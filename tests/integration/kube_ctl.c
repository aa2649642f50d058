/*
 * kube_ctl.c - a test's control-client calls (kube_ctl.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kube_ctl.h"

#include "base/diag.h"
#include "base/err.h"
#include "kube/client.h"

#include <string.h>

json_t *kube_ctl_request(struct tsr_kube_client *ctl, const char *method, const char *path,
                         const char *body)
{
        struct tsr_diag diag;
        json_t *out = NULL;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_kube_client_request(ctl, method, path, body ? "application/json" : NULL, body,
                                     body ? strlen(body) : 0, NULL, &out, NULL, &diag);
        if (rc)
                fail_msg("%s %s: %s: %s", method, path, tsr_err_name(rc), diag.msg);
        return out;
}

json_t *kube_ctl_merge_patch(struct tsr_kube_client *ctl, const char *path, const char *patch)
{
        struct tsr_diag diag;
        json_t *body = json_loads(patch, 0, NULL), *out = NULL;
        int rc;

        if (!body)
                fail_msg("bad patch text %s", patch);
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_patch(ctl, path, TSR_KUBE_PATCH_MERGE, body, NULL, &out, NULL, &diag);
        json_decref(body);
        if (rc)
                fail_msg("PATCH %s: %s: %s", path, tsr_err_name(rc), diag.msg);
        return out;
}
