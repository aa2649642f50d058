/*
 * review_run.c - one handler over a review built from JSON text; see review_run.h.
 */
#include "review_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "failing_alloc.h"
#include "json_text.h"

#include <stdio.h>
#include <stdlib.h>
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

void review_fx_alloc_loop(tsr_webhook_handler h, const struct tsr_webhook_lookup *lookup,
                          const char *op, const char *ns, const char *obj, json_t *want,
                          long budgets, const char *what)
{
        for (long k = 0; k < budgets; k++) {
                struct tsr_verdict v;
                struct tsr_diag diag;
                struct tsr_review r;
                int rc;

                memset(&r, 0, sizeof(r));
                memset(&v, 0, sizeof(v));
                tsr_diag_clear(&diag);
                snprintf(r.operation, sizeof(r.operation), "%s", op);
                snprintf(r.ns, sizeof(r.ns), "%s", ns ? ns : "");
                r.object = json_fx_load(obj);
                json_set_alloc_funcs(failing_malloc, free);
                failing_alloc_budget(k);
                rc = h(lookup, &r, &v, &diag);
                failing_alloc_budget(-1);
                json_set_alloc_funcs(malloc, free);
                if (rc == 0 && (!v.allowed || !json_equal(v.patched, want)))
                        fail_msg("%s, budget %ld: a different answer (%s)", what, k, v.message);
                if (rc != 0 && (rc != TSR_ENOMEM || v.patched))
                        fail_msg("%s, budget %ld: %s, patch %s", what, k, tsr_err_name(rc),
                                 v.patched ? "left" : "none");
                json_decref(v.patched);
                json_decref(r.object);
        }
}
