/*
 * daemon.c - wiring the device manager: detection, agent, plugins, kubelet link, reconcile.
 */
#include "devicemanager/daemon.h"

#include "base/err.h"
#include "base/fnv.h"
#include "base/log.h"
#include "base/timespec.h"
#include "codec/alloc_annotation.h"
#include "devicemanager/agent.h"
#include "devicemanager/events.h"
#include "devicemanager/kubelet_link.h"
#include "devicemanager/metrics.h"
#include "devicemanager/plugin.h"
#include "devicemanager/podres.h"
#include "devicemanager/publish.h"
#include "mig/reclaim.h"
#include "nvml/detect.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAPS_MAX        64
#define WITHHELD_MAX_MS 300000

struct tsr_dm_daemon {
        struct tsr_dm_daemon_config cfg;
        char node[254], plugin_dir[4096], podres[4096], pods_dir[4096], grants[4096];
        struct tsr_accel_cap caps[CAPS_MAX];
        size_t n_caps;
        struct tsr_mig_store *store;
        struct tsr_mig_reclaimer *reclaimer;
        struct tsr_dm_agent *agent;
        struct tsr_dm_plugin *plugins[TSR_DP_FAMILIES];
        size_t n_plugins;
        struct tsr_dm_link *link;
        struct tsr_dm_metrics *metrics;
        struct tsr_dm_events *events;
        struct tsr_dm_isolation isolation; /* what the plugins inject into a slice */
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t mu;
        pthread_cond_t cond;
        bool stopping;
        char pods_digest[64]; /* what the last poll saw: a digest of UIDs and resourceVersions */
        struct tsr_dm_published published; /* what the last publish wrote (reconcile thread) */
        bool publish_due; /* under mu: the agent reported a change since the last publish */
        char publish_error[TSR_DIAG_MSG_MAX]; /* the last publish failure logged ("": none) */
        /* Keys withheld by presence gating (their pool not yet in the Node's capacity: the
         * kubelet writes it on its next node status sync): publish again at withheld_next,
         * backing off from the poll interval to WITHHELD_MAX_MS (reconcile thread). */
        unsigned withheld_ms;
        struct timespec withheld_next;
};

static void log_line(void *ctx, const char *level, const char *msg)
{
        (void)ctx;
        tsr_log(!strcmp(level, "error")   ? TSR_LOG_ERROR
                : !strcmp(level, "warn")  ? TSR_LOG_WARN
                : !strcmp(level, "debug") ? TSR_LOG_DEBUG
                                          : TSR_LOG_INFO,
                msg, NULL);
}

static void mig_log(void *arg, enum tsr_mig_log_level level, const char *msg)
{
        log_line(arg,
                 level == TSR_MIG_LOG_ERROR  ? "error"
                 : level == TSR_MIG_LOG_WARN ? "warn"
                                             : "info",
                 msg);
}

static void detect_note(void *arg, unsigned gpu, const char *msg)
{
        char g[16];

        (void)arg;
        snprintf(g, sizeof(g), "%u", gpu);
        tsr_log(TSR_LOG_WARN, msg, "gpu", g, NULL);
}

/* ---- the API server ------------------------------------------------------------------------- */

/*
 * The Pods bound to the node, fresh from the API server (a new array), or NULL when POD_LIST_TRIES
 * lists in a row failed. The agent calls it under its lock for every Allocate and preference, and
 * a Pod list unknown refuses the Allocate (the kubelet then fails the Pod): one API server error
 * is retried after a short pause rather than costing a user's Pod.
 */
#define POD_LIST_TRIES 3
static json_t *pods_now(void *ctx)
{
        static const long pause_ms[POD_LIST_TRIES - 1] = {20, 80};
        struct tsr_dm_daemon *d = ctx;
        char selector[300];
        struct tsr_kube_list_opts lo = {0};
        json_t *list = NULL, *items;
        struct tsr_diag diag;

        snprintf(selector, sizeof(selector), "spec.nodeName=%s", d->node);
        lo.field_selector = selector;
        lo.limit = 500;
        for (int attempt = 0;; attempt++) {
                tsr_diag_clear(&diag);
                if (!tsr_kube_client_list_all(d->cfg.client, "/api/v1/pods", &lo, &list, NULL,
                                              &diag))
                        break;
                if (attempt == POD_LIST_TRIES - 1) {
                        tsr_log(TSR_LOG_WARN, "listing the node's Pods failed", "error", diag.msg,
                                NULL);
                        return NULL;
                }
                nanosleep(&(struct timespec){0, pause_ms[attempt] * 1000000L}, NULL);
        }
        items = json_incref(json_object_get(list, "items"));
        json_decref(list);
        return json_is_array(items) ? items : (json_decref(items), NULL);
}

static int record(void *ctx, const char *ns, const char *name, const char *uid, const char *json,
                  struct tsr_diag *diag)
{
        struct tsr_dm_daemon *d = ctx;
        char path[700];
        json_t *body = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "uid", uid, "annotations",
                                 TSR_ALLOC_ANNOTATION, json);
        int rc;

        if (!body)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, name);
        rc = tsr_kube_client_patch(d->cfg.client, path, TSR_KUBE_PATCH_MERGE, body, NULL, NULL,
                                   NULL, diag);
        json_decref(body);
        return rc;
}

static int kubelet_view(void *ctx, struct tsr_dp_kubelet_view **kv)
{
        struct tsr_dm_daemon *d = ctx;
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_dm_podres_list(d->podres, kv, &diag);
        if (rc)
                tsr_log(TSR_LOG_WARN, "pod-resources unavailable; identifying by pending Pods",
                        "error", diag.msg, NULL);
        return rc;
}

static void kubelet_view_free(void *ctx, struct tsr_dp_kubelet_view *kv)
{
        (void)ctx;
        tsr_dm_podres_free(kv);
}

/* ---- reconcile ------------------------------------------------------------------------------ */

/* A digest of the Pods' UIDs and resourceVersions: FNV-1a over them (each with its NUL), in list
 * order. */
static void digest(json_t *pods, char *out, size_t len)
{
        uint64_t h = TSR_FNV64_OFFSET;
        size_t i;
        json_t *p;

        json_array_foreach(pods, i, p)
        {
                json_t *md = json_object_get(p, "metadata");
                const char *parts[2] = {json_string_value(json_object_get(md, "uid")),
                                        json_string_value(json_object_get(md, "resourceVersion"))};

                for (int k = 0; k < 2; k++) {
                        const char *v = parts[k] ? parts[k] : "";

                        h = tsr_fnv1a64_update(h, v, strlen(v) + 1);
                }
        }
        snprintf(out, len, "%zu-%016llx", json_array_size(pods), (unsigned long long)h);
}

static void reclaim(struct tsr_dm_daemon *d)
{
        struct tsr_mig_pass_stats st = {0};
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        if (tsr_dm_agent_reclaim(d->agent, d->reclaimer, &st, &diag) && diag.msg[0])
                tsr_log(TSR_LOG_WARN, "reclaim pass held", "error", diag.msg, NULL);
        tsr_dm_metrics_reclaim(d->metrics, st.destroyed, st.in_use);
}

/* Every Allocate answer (a gRPC handler thread, the node lock released): counted, and a refusal
 * queued as an Event on its Pod (the node when none was named). */
static void allocated(void *ctx, enum tsr_family f, const struct tsr_dm_answer *ans)
{
        struct tsr_dm_daemon *d = ctx;
        char msg[768];

        tsr_dm_metrics_allocation(d->metrics, f, ans->code == TSR_DM_OK ? NULL : ans->reason,
                                  ans->carved, ans->carve_failed);
        if (ans->code == TSR_DM_OK)
                return;
        snprintf(msg, sizeof(msg), "%s Allocate%s%s refused (%s): %s", tsr_family_name(f),
                 ans->container[0] ? " of container " : "", ans->container, ans->reason,
                 ans->message);
        tsr_dm_events_emit(d->events, ans->pod, "Warning",
                           ans->carve_failed ? "MIGCarveFailed" : "AllocationRefused", msg,
                           tsr_monotonic_ms());
}

/* Events' post (their worker thread). */
static int post_event(void *ctx, const struct tsr_kube_event_record *ev, struct tsr_diag *diag)
{
        struct tsr_dm_daemon *d = ctx;

        return tsr_kube_event_post(d->cfg.client, ev, diag);
}

/* The agent's change notice (any thread): the ledger may have moved, publish on the next poll. */
static void ledger_moved(void *ctx)
{
        struct tsr_dm_daemon *d = ctx;

        pthread_mutex_lock(&d->mu);
        d->publish_due = true;
        pthread_mutex_unlock(&d->mu);
}

/* Writes the node's capacity keys, fit labels and Devices object when the agent reported a
 * change, the last attempt failed, or keys were withheld because their pool was not yet in the
 * Node's capacity (devicemanager/publish.h sends only what differs; withheld keys are tried
 * again with backoff: without that, a pool the kubelet reports after the first publish would
 * keep the node's counting keys off it until the next grant); a failure is logged once until it
 * changes or heals. Reads the Pods only when it publishes. */
static void publish(struct tsr_dm_daemon *d)
{
        struct tsr_accel_ledger ledger[CAPS_MAX];
        struct tsr_diag diag;
        struct timespec now;
        bool due;
        int rc;

        clock_gettime(CLOCK_MONOTONIC, &now);
        pthread_mutex_lock(&d->mu);
        due = d->publish_due || d->publish_error[0];
        d->publish_due = false;
        pthread_mutex_unlock(&d->mu);
        if (!due && d->withheld_ms && tsr_timespec_reached(&now, &d->withheld_next))
                due = true; /* the Node may show the pool by now */
        if (!due)
                return;
        tsr_diag_clear(&diag);
        rc = tsr_dm_agent_ledger(d->agent, ledger, &diag);
        if (!rc)
                rc = tsr_dm_publish(d->cfg.client, d->node, d->caps, ledger, d->n_caps,
                                    &d->published, &diag);
        if (rc && !diag.msg[0])
                snprintf(diag.msg, sizeof(diag.msg), "%s", tsr_strerror(rc));
        if (rc)
                tsr_dm_metrics_publish_failed(d->metrics);
        if (rc && strcmp(diag.msg, d->publish_error))
                tsr_log(TSR_LOG_WARN, "publishing the node's keys, labels and Devices failed",
                        "error", diag.msg, NULL);
        else if (!rc && d->publish_error[0])
                tsr_log(TSR_LOG_INFO, "publishing the node's keys, labels and Devices works again",
                        NULL);
        snprintf(d->publish_error, sizeof(d->publish_error), "%s", rc ? diag.msg : "");
        if (!rc && !d->published.node_known) {
                d->withheld_ms = !d->withheld_ms                        ? d->cfg.poll_ms
                                 : d->withheld_ms * 2 > WITHHELD_MAX_MS ? WITHHELD_MAX_MS
                                                                        : d->withheld_ms * 2;
                d->withheld_next = tsr_timespec_add_ms(now, d->withheld_ms);
        } else if (!rc) {
                d->withheld_ms = 0;
        }
}

static void *reconcile_main(void *arg)
{
        struct tsr_dm_daemon *d = arg;
        struct timespec last_reclaim;

        clock_gettime(CLOCK_MONOTONIC, &last_reclaim);
        pthread_mutex_lock(&d->mu);
        while (!d->stopping) {
                struct timespec now, until;
                json_t *pods;
                char dg[64];
                bool changed;

                pthread_mutex_unlock(&d->mu);
                pods = pods_now(d);
                if (pods) {
                        digest(pods, dg, sizeof(dg));
                        changed = strcmp(dg, d->pods_digest) != 0;
                        snprintf(d->pods_digest, sizeof(d->pods_digest), "%s", dg);
                        json_decref(pods);
                        if (changed)
                                tsr_dm_agent_changed(d->agent);
                        tsr_dm_agent_sync(d->agent);
                        publish(d);
                        clock_gettime(CLOCK_MONOTONIC, &now);
                        if (changed || tsr_timespec_ms_between(&last_reclaim, &now) >=
                                           (int64_t)d->cfg.reclaim_ms) {
                                reclaim(d);
                                last_reclaim = now;
                        }
                }
                clock_gettime(CLOCK_REALTIME, &until);
                until = tsr_timespec_add_ms(until, d->cfg.poll_ms);
                pthread_mutex_lock(&d->mu);
                while (!d->stopping &&
                       pthread_cond_timedwait(&d->cond, &d->mu, &until) != ETIMEDOUT)
                        ;
        }
        pthread_mutex_unlock(&d->mu);
        return NULL;
}

/* MIG recovery found instances gone (a reboot), corrupt markers or unmarked instances: a Normal
 * Event on the node. */
static void recovered(struct tsr_dm_daemon *d, const struct tsr_mig_recovery *rec)
{
        char msg[256];

        snprintf(msg, sizeof(msg),
                 "MIG recovery: %u ownership markers, %u naming an instance that is gone, %u "
                 "corrupt; %u instances no marker names",
                 rec->markers, rec->stale, rec->corrupt, rec->orphans);
        tsr_dm_events_emit(d->events, NULL, "Normal", "RebootRecovered", msg, tsr_monotonic_ms());
}

/* ---- start and stop ------------------------------------------------------------------------- */

/* Slice isolation: the interposer installed (unless off) and what the plugins inject. */
static int install_isolation(struct tsr_dm_daemon *d, struct tsr_diag *diag)
{
        const char *lib = d->cfg.vgpu_library ? d->cfg.vgpu_library : TSR_DM_VGPU_LIBRARY;
        const char *dir = d->cfg.vgpu_dir ? d->cfg.vgpu_dir : TSR_DM_VGPU_DIR;
        const char *host = d->cfg.vgpu_host_dir ? d->cfg.vgpu_host_dir : dir;
        char n[16];
        unsigned written = 0;
        int rc;

        d->isolation.mode = d->cfg.isolation;
        snprintf(d->isolation.host_dir, sizeof(d->isolation.host_dir), "%s", host);
        if (d->cfg.isolation == TSR_DM_ISOLATION_OFF) {
                tsr_log(TSR_LOG_INFO, "slice isolation off: logical slices are accounting only",
                        NULL);
                return 0;
        }
        rc = tsr_dm_isolation_install(lib, dir, &written, diag);
        if (rc)
                return rc;
        snprintf(n, sizeof(n), "%u", written);
        tsr_log(TSR_LOG_INFO, "slice isolation ready", "mode",
                tsr_dm_isolation_mode_name(d->cfg.isolation), "library", lib, "dir", dir,
                "host_dir", host, "files_written", n, NULL);
        return 0;
}

static int start_parts(struct tsr_dm_daemon *d, struct tsr_diag *diag)
{
        struct tsr_dm_agent_opts ao = {0};
        struct tsr_dm_link_opts lo = {d->plugin_dir, "tessera", log_line, d};
        struct tsr_mig_recovery rec;
        int rc;

        struct tsr_dm_events_opts eo = {d->node, 0, post_event, d};

        d->metrics = tsr_dm_metrics_new();
        if (!d->metrics || tsr_dm_events_new(&eo, &d->events))
                return tsr_diag_set(diag, TSR_ENOMEM, "device manager: out of memory");
        rc = install_isolation(d, diag);
        if (rc)
                return rc;
        rc = tsr_nvml_detect(d->cfg.gpus.ops, d->cfg.gpus.be, d->caps, CAPS_MAX, &d->n_caps,
                             detect_note, d, diag);
        if (rc)
                return rc;
        if (d->n_caps == 0)
                return tsr_diag_set(diag, TSR_ENOTFOUND, "no GPU the catalog knows was detected");
        rc = tsr_mig_store_files_new(d->pods_dir, &d->store);
        if (!rc)
                rc = tsr_mig_reclaimer_new(&d->cfg.gpus, d->store, mig_log, d, &d->reclaimer);
        if (rc)
                return tsr_diag_set(diag, rc, "device manager: out of memory");
        if (tsr_mig_reclaim_recover(d->reclaimer, &rec, diag))
                tsr_log(TSR_LOG_WARN, "MIG recovery could not read the markers", "error", diag->msg,
                        NULL);
        else if (rec.stale || rec.corrupt || rec.orphans)
                recovered(d, &rec);
        tsr_diag_clear(diag);
        tsr_dm_published_init(&d->published,
                              tsr_catalog_manufacturer(d->caps[0].product->manufacturer));
        d->publish_due = true; /* the first poll publishes */
        ao.gpus = d->cfg.gpus;
        ao.store = d->store;
        ao.sliced_gate = d->cfg.sliced_gate;
        ao.identify_by_kubelet = d->cfg.identify_by_kubelet && d->podres[0];
        ao.release_terminated = d->cfg.release_terminated;
        ao.pods = pods_now;
        ao.kubelet_view = kubelet_view;
        ao.kubelet_view_free = kubelet_view_free;
        ao.record = record;
        ao.log = log_line;
        ao.allocated = allocated;
        ao.ctx = d;
        ao.grants_path = d->grants;
        if (!d->grants[0])
                return tsr_diag_set(diag, TSR_ETOOBIG,
                                    "--pods-dir is too long for the grant journal's path");
        rc = tsr_dm_agent_new(d->caps, d->n_caps, &ao, &d->agent, diag);
        if (!rc && tsr_dm_agent_subscribe(d->agent, ledger_moved, d))
                rc = tsr_diag_set(diag, TSR_ENOMEM, "device manager: out of memory");
        for (size_t i = 0; !rc && i < TSR_DP_FAMILIES; i++) {
                rc = tsr_dm_plugin_new(d->agent, tsr_dp_families[i], &d->isolation,
                                       &d->plugins[d->n_plugins]);
                if (rc == TSR_EINVAL) /* a family the manufacturer does not serve */
                        rc = 0;
                else if (!rc)
                        d->n_plugins++;
        }
        if (rc)
                return tsr_diag_set(diag, rc, "device manager: cannot create the plugins");
        rc = tsr_dm_link_start(d->plugins, d->n_plugins, &lo, &d->link, diag);
        if (rc)
                return rc;
        if (pthread_create(&d->thread, NULL, reconcile_main, d))
                return tsr_diag_set(diag, TSR_EIO, "device manager: cannot start a thread");
        d->thread_started = true;
        return 0;
}

int tsr_dm_daemon_start(const struct tsr_dm_daemon_config *cfg, struct tsr_dm_daemon **out,
                        struct tsr_diag *diag)
{
        struct tsr_dm_daemon *d = calloc(1, sizeof(*d));
        int rc;

        if (!d)
                return tsr_diag_set(diag, TSR_ENOMEM, "device manager: out of memory");
        d->cfg = *cfg;
        if (!d->cfg.poll_ms)
                d->cfg.poll_ms = 2000;
        if (!d->cfg.reclaim_ms)
                d->cfg.reclaim_ms = 60000;
        snprintf(d->node, sizeof(d->node), "%s", cfg->node_name);
        snprintf(d->plugin_dir, sizeof(d->plugin_dir), "%s", cfg->plugin_dir);
        snprintf(d->podres, sizeof(d->podres), "%s", cfg->podres_socket ? cfg->podres_socket : "");
        snprintf(d->pods_dir, sizeof(d->pods_dir), "%s", cfg->pods_dir);
        if (cfg->grants_file)
                snprintf(d->grants, sizeof(d->grants), "%s", cfg->grants_file);
        else if ((size_t)snprintf(d->grants, sizeof(d->grants), "%s/.tessera-grants.json",
                                  cfg->pods_dir) >= sizeof(d->grants))
                d->grants[0] = '\0'; /* refused below */
        pthread_mutex_init(&d->mu, NULL);
        pthread_cond_init(&d->cond, NULL);
        rc = start_parts(d, diag);
        if (rc) {
                tsr_dm_daemon_stop(d);
                return rc;
        }
        *out = d;
        return 0;
}

bool tsr_dm_daemon_ready(void *daemon, char *why, size_t why_len)
{
        struct tsr_dm_daemon *d = daemon;
        struct tsr_dm_link_stats st;

        tsr_dm_link_stats(d->link, &st);
        if (!st.registered)
                snprintf(why, why_len, "not registered with the kubelet: %s", st.unregistered);
        return st.registered;
}

int tsr_dm_daemon_metrics(void *daemon, struct tsr_buf *out)
{
        struct tsr_dm_daemon *d = daemon;
        struct tsr_dm_link_stats st;

        tsr_dm_link_stats(d->link, &st);
        return tsr_dm_metrics_render(d->metrics, st.registrations, out);
}

void tsr_dm_daemon_stop(struct tsr_dm_daemon *d)
{
        if (!d)
                return;
        pthread_mutex_lock(&d->mu);
        d->stopping = true;
        pthread_cond_broadcast(&d->cond);
        pthread_mutex_unlock(&d->mu);
        if (d->thread_started)
                pthread_join(d->thread, NULL);
        tsr_dm_link_stop(d->link);
        for (size_t i = 0; i < d->n_plugins; i++)
                tsr_dm_plugin_free(d->plugins[i]);
        tsr_dm_agent_free(d->agent);
        tsr_dm_published_release(&d->published); /* a zeroed record holds nothing */
        tsr_mig_reclaimer_free(d->reclaimer);
        tsr_mig_store_free(d->store);
        tsr_dm_events_free(d->events);
        tsr_dm_metrics_free(d->metrics);
        pthread_cond_destroy(&d->cond);
        pthread_mutex_destroy(&d->mu);
        free(d);
}
