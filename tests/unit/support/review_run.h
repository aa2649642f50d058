/*
 * review_run.h - runs one admission handler over a review built from JSON text, for the webhook
 * handler tests.
 *
 * The review carries the operation, the namespace (NULL: none) and the object and old object
 * parsed from text (NULL: absent); the verdict and diag are cleared first. A literal that does not
 * parse fails the running cmocka test (json_text.h).
 *
 * Ownership: the objects are released before returning; a patched object the handler left in
 * v->patched is the caller's (json_decref).
 */
#ifndef TSR_TEST_SUPPORT_REVIEW_RUN_H
#define TSR_TEST_SUPPORT_REVIEW_RUN_H

#include "webhook/handler.h"

/* Returns what the handler returned. */
int review_fx_run(tsr_webhook_handler h, const struct tsr_webhook_lookup *lookup, const char *op,
                  const char *ns, const char *obj, const char *old, struct tsr_verdict *v,
                  struct tsr_diag *diag);

/*
 * The allocation-failure loop of a mutating handler: for budgets 0..budgets-1, runs h over a review
 * of op in ns with the object obj (parsed before each budget starts) while jansson's allocator
 * fails after that many allocations, and requires the unfailed answer (allowed, v->patched equal
 * to want) or TSR_ENOMEM with no patch; else fails the test naming what (a row's name) and the
 * budget. Installs failing_malloc for the loop and restores malloc after.
 */
void review_fx_alloc_loop(tsr_webhook_handler h, const struct tsr_webhook_lookup *lookup,
                          const char *op, const char *ns, const char *obj, json_t *want,
                          long budgets, const char *what);

#endif
