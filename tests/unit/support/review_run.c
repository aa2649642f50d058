/*
 * review_run.c - one handler over a review built from JSON text; see review_run.h.
 */
#include "review_run.h"

#include "base/diag.h"
#include "json_text.h"

#include <stdio.h>
#include <string.h>

int review_fx_run(tsr_webhook_handler h, const struct tsr_webhook_lookup *lookup, const char *op,
                  const char *ns, const char *obj, const char *old, struct tsr_verdict *v,
                  struct tsr_diag *diag)
{
        struct tsr_review r;
        int rc;

        memset(&r, 0, sizeof(r));
        memset(v, 0, sizeof(*v));
        tsr_diag_clear(diag);
        snprintf(r.operation, sizeof(r.operation), "%s", op);
        snprintf(r.ns, sizeof(r.ns), "%s", ns ? ns : "");
        r.object = obj ? json_fx_load(obj) : NULL;
        r.old_object = old ? json_fx_load(old) : NULL;
        rc = h(lookup, &r, v, diag);
        json_decref(r.object);
        json_decref(r.old_object);
        return rc;
}
