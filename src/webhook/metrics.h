/*
 * metrics.h - the webhook's Prometheus metrics, exposed in the text format (version 0.0.4) on
 * /metrics:
 *   tessera_webhook_requests_total{webhook,code}          reviews answered, by HTTP status
 *   tessera_webhook_request_duration_seconds{webhook}     a histogram of handling time
 *   tessera_webhook_denials_total{webhook,rule}           denials, by the rule they broke
 *   tessera_webhook_patches_total{webhook}                mutations answered with a patch
 * The webhooks are the fixed routes of routes.h, indexed 0..n; label values with other codes or
 * rules are added on first use (at most METRICS_SERIES_MAX series each). Thread-safe; one mutex.
 * Ownership: tsr_metrics_new returns a new object (free with tsr_metrics_free).
 */
#ifndef TSR_WEBHOOK_METRICS_H
#define TSR_WEBHOOK_METRICS_H

#include <stdbool.h>
#include <stddef.h>

struct tsr_buf;
struct tsr_metrics;

/* Creates the metrics for n webhooks named names[0..n) (borrowed; must outlive the object). */
struct tsr_metrics *tsr_metrics_new(const char *const *names, size_t n);

void tsr_metrics_free(struct tsr_metrics *m);

/*
 * Records one review of webhook w answered with HTTP status code after seconds; denied with rule
 * (may be NULL or "") counts a denial, patched a patch.
 */
void tsr_metrics_observe(struct tsr_metrics *m, size_t w, int code, double seconds, bool denied,
                         const char *rule, bool patched);

/* Appends the text exposition to out. Returns 0 or a buffer error. */
int tsr_metrics_render(struct tsr_metrics *m, struct tsr_buf *out);

#endif
