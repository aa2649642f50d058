/*
 * metrics.c - the device manager's counters behind one mutex; rendered on demand.
 */
#include "devicemanager/metrics.h"

#include "base/buf.h"
#include "base/version.h"
#include "deviceplugin/node.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DM_REFUSAL_SERIES_MAX 64
#define PREFIX                "tessera_device_manager_"

struct refusal {
        enum tsr_family family;
        const char *reason; /* static */
        uint64_t count;
};

struct tsr_dm_metrics {
        pthread_mutex_t lock;
        uint64_t allocations[TSR_DP_FAMILIES];
        struct refusal refusals[DM_REFUSAL_SERIES_MAX];
        size_t n_refusals;
        uint64_t carves, carve_failures, reclaims, stragglers, publish_failures;
};

struct tsr_dm_metrics *tsr_dm_metrics_new(void)
{
        struct tsr_dm_metrics *m = calloc(1, sizeof(*m));

        if (m)
                pthread_mutex_init(&m->lock, NULL);
        return m;
}

void tsr_dm_metrics_free(struct tsr_dm_metrics *m)
{
        if (!m)
                return;
        pthread_mutex_destroy(&m->lock);
        free(m);
}

static size_t family_index(enum tsr_family f)
{
        size_t i = 0;

        while (i < TSR_DP_FAMILIES && tsr_dp_families[i] != f)
                i++;
        return i;
}

void tsr_dm_metrics_allocation(struct tsr_dm_metrics *m, enum tsr_family f, const char *reason,
                               bool carved, bool carve_failed)
{
        size_t fi = family_index(f), i;

        if (fi >= TSR_DP_FAMILIES)
                return;
        pthread_mutex_lock(&m->lock);
        if (!reason) {
                m->allocations[fi]++;
        } else {
                for (i = 0; i < m->n_refusals; i++)
                        if (m->refusals[i].family == f && !strcmp(m->refusals[i].reason, reason))
                                break;
                if (i == m->n_refusals && i < DM_REFUSAL_SERIES_MAX)
                        m->refusals[m->n_refusals++] = (struct refusal){f, reason, 0};
                if (i < m->n_refusals)
                        m->refusals[i].count++;
        }
        m->carves += carved;
        m->carve_failures += carve_failed;
        pthread_mutex_unlock(&m->lock);
}

void tsr_dm_metrics_reclaim(struct tsr_dm_metrics *m, unsigned destroyed, unsigned stragglers)
{
        pthread_mutex_lock(&m->lock);
        m->reclaims += destroyed;
        m->stragglers = stragglers;
        pthread_mutex_unlock(&m->lock);
}

void tsr_dm_metrics_publish_failed(struct tsr_dm_metrics *m)
{
        pthread_mutex_lock(&m->lock);
        m->publish_failures++;
        pthread_mutex_unlock(&m->lock);
}

/* HELP and TYPE of PREFIX name. */
static int header(struct tsr_buf *out, const char *name, const char *type, const char *help)
{
        return tsr_buf_addf(out, "# HELP " PREFIX "%s %s\n# TYPE " PREFIX "%s %s\n", name, help,
                            name, type);
}

/* An unlabelled series with its HELP and TYPE. */
static int scalar(struct tsr_buf *out, const char *name, const char *type, const char *help,
                  uint64_t v)
{
        int rc = header(out, name, type, help);

        return rc ? rc : tsr_buf_addf(out, PREFIX "%s %llu\n", name, (unsigned long long)v);
}

static int render_locked(const struct tsr_dm_metrics *m, unsigned long registrations,
                         struct tsr_buf *out)
{
        int rc = header(out, "allocations_total", "counter", "Containers granted by Allocate.");

        for (size_t i = 0; !rc && i < TSR_DP_FAMILIES; i++)
                rc = tsr_buf_addf(out, PREFIX "allocations_total{family=\"%s\"} %llu\n",
                                  tsr_family_name(tsr_dp_families[i]),
                                  (unsigned long long)m->allocations[i]);
        if (!rc)
                rc = header(out, "allocation_refusals_total", "counter",
                            "Containers refused by Allocate, by the rule that refused them.");
        for (size_t i = 0; !rc && i < m->n_refusals; i++)
                rc = tsr_buf_addf(
                    out, PREFIX "allocation_refusals_total{family=\"%s\",reason=\"%s\"} %llu\n",
                    tsr_family_name(m->refusals[i].family), m->refusals[i].reason,
                    (unsigned long long)m->refusals[i].count);
        if (!rc)
                rc =
                    scalar(out, "mig_carves_total", "counter", "MIG instances created.", m->carves);
        if (!rc)
                rc = scalar(out, "mig_carve_failures_total", "counter",
                            "MIG instance creations that failed.", m->carve_failures);
        if (!rc)
                rc = scalar(out, "mig_reclaims_total", "counter",
                            "MIG instances destroyed by reclaim.", m->reclaims);
        if (!rc)
                rc = scalar(out, "mig_reclaim_stragglers", "gauge",
                            "MIG instances the last reclaim pass could not destroy (in use).",
                            m->stragglers);
        if (!rc)
                rc = scalar(out, "publish_failures_total", "counter",
                            "Failed writes of the node's Devices object, capacity keys or labels.",
                            m->publish_failures);
        if (!rc)
                rc = scalar(out, "kubelet_registrations_total", "counter",
                            "Successful device plugin Register calls to the kubelet.",
                            registrations);
        return rc;
}

int tsr_dm_metrics_render(struct tsr_dm_metrics *m, unsigned long registrations,
                          struct tsr_buf *out)
{
        int rc;

        pthread_mutex_lock(&m->lock);
        rc = render_locked(m, registrations, out);
        pthread_mutex_unlock(&m->lock);
        return rc ? rc : tsr_build_info_render("device-manager", out);
}
