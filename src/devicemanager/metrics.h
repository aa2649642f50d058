/*
 * metrics.h - the device manager's Prometheus metrics, exposed in the text format (version 0.0.4)
 * on the probe server's /metrics:
 *   tessera_device_manager_allocations_total{family}                 containers granted
 *   tessera_device_manager_allocation_refusals_total{family,reason}  containers refused, by the
 *                                                                     rule (tsr_dm_answer.reason)
 *   tessera_device_manager_mig_carves_total                          MIG instances created
 *   tessera_device_manager_mig_carve_failures_total                  MIG creations that failed
 *   tessera_device_manager_mig_reclaims_total                        MIG instances destroyed
 *   tessera_device_manager_mig_reclaim_stragglers                    (gauge) destroys the last
 *                                                                     reclaim pass found IN_USE
 *   tessera_device_manager_publish_failures_total                    failed publishes of the
 *                                                                     Devices object and labels
 *   tessera_device_manager_kubelet_registrations_total               successful Register calls
 * Families are the device plugin families (deviceplugin/node.h); refusal reasons are added on
 * first use (at most 64 series; later ones are dropped); allocations_total is rendered for every
 * family from zero. Thread-safe: one mutex; the observers never block on anything else.
 * Ownership: tsr_dm_metrics_new returns a new object (free with tsr_dm_metrics_free).
 */
#ifndef TSR_DEVICEMANAGER_METRICS_H
#define TSR_DEVICEMANAGER_METRICS_H

#include <stdbool.h>

#include "core/keys.h"

struct tsr_buf;
struct tsr_dm_metrics;

/* Returns a new object, or NULL (out of memory). */
struct tsr_dm_metrics *tsr_dm_metrics_new(void);

void tsr_dm_metrics_free(struct tsr_dm_metrics *m);

/* One Allocate answer of family f: granted (reason NULL) or refused by reason (a static string);
 * carved / carve_failed count a MIG creation or its failure. */
void tsr_dm_metrics_allocation(struct tsr_dm_metrics *m, enum tsr_family f, const char *reason,
                               bool carved, bool carve_failed);

/* One reclaim pass: destroyed instances, and the destroys refused IN_USE (the gauge's value). */
void tsr_dm_metrics_reclaim(struct tsr_dm_metrics *m, unsigned destroyed, unsigned stragglers);

/* One failed publish of the Devices object, capacity keys or labels. */
void tsr_dm_metrics_publish_failed(struct tsr_dm_metrics *m);

/* Appends the text exposition (registrations as given: the kubelet link counts them), then
 * tessera_build_info for "device-manager". Returns 0 or a buffer error. */
int tsr_dm_metrics_render(struct tsr_dm_metrics *m, unsigned long registrations,
                          struct tsr_buf *out);

#endif
