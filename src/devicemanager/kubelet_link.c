/*
 * kubelet_link.c - serving and registering the plugins; re-registering after a kubelet restart.
 */
#include "devicemanager/kubelet_link.h"

#include "base/err.h"
#include "base/timespec.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc/unix_client.h"
#include "grpc/unix_server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KUBELET_SOCKET     "kubelet.sock"
#define REGISTER_TIMEOUT   10000 /* ms: the kubelet's own dial-back waits 10 s */
#define BACKOFF_INITIAL_MS 500
#define BACKOFF_MAX_MS     10000
#define CHECK_MS           1000
#define RESTART_WAIT_MS    3000 /* ms: at most this long for the new kubelet.sock */

/* A file's identity (a deleted file's inode number can come back: see the restart below). */
struct file_id {
        bool known;
        dev_t dev;
        ino_t ino;
};

struct endpoint {
        struct tsr_dm_plugin *plugin;
        char name[256];  /* socket file name, relative */
        char path[4400]; /* absolute */
        struct tsr_grpc_unix_server *server;
        bool registered;
        /* The socket file as the server made it: a file at path that is another is not ours. */
        struct file_id served;
};

struct tsr_dm_link {
        struct tsr_dm_link_opts opts;
        char dir[4096];
        struct endpoint *ep;
        size_t n;
        int inotify_fd, stop_pipe[2];
        pthread_t thread;
        pthread_mutex_t mu; /* guards stats */
        struct tsr_dm_link_stats stats;
        /* Link thread only. kubelet.sock as it was when a Register last succeeded, and as it
         * was at the last Register tried. */
        struct file_id registered_through, tried;
        /* A kubelet restart seen and not handled yet: since when, the kubelet.sock that is the
         * old kubelet's, and whether a kubelet.sock was created since. */
        bool pending;
        struct timespec pending_since;
        struct file_id old_kubelet;
        bool kubelet_created;
};

static void logf_(struct tsr_dm_link *l, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logf_(struct tsr_dm_link *l, const char *level, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        if (!l->opts.log)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        l->opts.log(l->opts.log_ctx, level, msg);
}

static void file_id_of(struct file_id *id, const struct stat *sb)
{
        id->known = true;
        id->dev = sb->st_dev;
        id->ino = sb->st_ino;
}

static bool same_file(const struct file_id *id, const struct stat *sb)
{
        return id->known && id->dev == sb->st_dev && id->ino == sb->st_ino;
}

static void kubelet_path(const struct tsr_dm_link *l, char *out, size_t size)
{
        snprintf(out, size, "%s/%s", l->dir, KUBELET_SOCKET);
}

static int serve(struct endpoint *e, struct tsr_diag *diag)
{
        struct stat sb;
        int rc = tsr_grpc_unix_server_start(e->path, tsr_dm_plugin_table(e->plugin), e->plugin,
                                            &e->server, diag);

        e->served.known = false;
        if (!rc && !stat(e->path, &sb))
                file_id_of(&e->served, &sb);
        return rc;
}

static void unserve(struct endpoint *e)
{
        tsr_dm_plugin_end_streams(e->plugin);
        tsr_grpc_unix_server_stop(e->server);
        e->server = NULL;
        e->registered = false;
}

/* True when e is served and the file at its path is still the socket its server made. */
static bool socket_intact(const struct endpoint *e)
{
        struct stat sb;

        return e->server && !stat(e->path, &sb) && same_file(&e->served, &sb);
}

/* Serves e anew (a server it has is stopped first); false when that failed (logged). */
static bool reserve(struct tsr_dm_link *l, struct endpoint *e)
{
        struct tsr_diag d;

        if (e->server)
                unserve(e);
        tsr_diag_clear(&d);
        if (serve(e, &d)) {
                logf_(l, "error", "serving %s again failed: %s", e->path, d.msg);
                return false;
        }
        return true;
}

/* One Register call for e; true on success. */
static bool register_one(struct tsr_dm_link *l, struct endpoint *e)
{
        char kubelet[4200], version[] = "v1beta1";
        char resource[TSR_KEY_MAX];
        V1beta1__RegisterRequest req;
        V1beta1__DevicePluginOptions o;
        struct tsr_grpc_status st = {0};
        struct tsr_buf out;
        struct stat id;
        size_t len;
        uint8_t *bytes;

        kubelet_path(l, kubelet, sizeof(kubelet));
        if (stat(kubelet, &id))
                return false; /* no kubelet yet: its kubelet.sock wakes the link */
        file_id_of(&l->tried, &id);
        snprintf(resource, sizeof(resource), "%s", tsr_dm_plugin_resource(e->plugin));
        v1beta1__device_plugin_options__init(&o);
        o.get_preferred_allocation_available = 1;
        v1beta1__register_request__init(&req);
        req.version = version;
        req.endpoint = e->name;
        req.resource_name = resource;
        req.options = &o;
        len = v1beta1__register_request__get_packed_size(&req);
        bytes = malloc(len ? len : 1);
        if (!bytes)
                return false;
        v1beta1__register_request__pack(&req, bytes);
        tsr_buf_init(&out);
        if (tsr_grpc_unix_call(kubelet, "/v1beta1.Registration/Register", bytes, len,
                               REGISTER_TIMEOUT, &out, &st) ||
            st.code != 0) {
                pthread_mutex_lock(&l->mu);
                l->stats.failures++;
                pthread_mutex_unlock(&l->mu);
                logf_(l, "warn", "Register %s at %s failed: %s: %s", resource, kubelet,
                      tsr_grpc_code_name(st.code), st.msg);
                free(bytes);
                tsr_buf_release(&out);
                return false;
        }
        free(bytes);
        tsr_buf_release(&out);
        file_id_of(&l->registered_through, &id);
        pthread_mutex_lock(&l->mu);
        l->stats.registrations++;
        pthread_mutex_unlock(&l->mu);
        logf_(l, "info", "registered %s on %s", resource, e->name);
        return true;
}

/*
 * Registers every served plugin not registered yet; true when all are. Right before its Register
 * each plugin's socket is checked (the kubelet dials it back inside Register, so a socket deleted
 * since it was served would cost the kubelet's whole dial timeout): one that is gone or another
 * file is served again first.
 */
static bool register_pass(struct tsr_dm_link *l)
{
        bool all = true;

        for (size_t i = 0; i < l->n; i++) {
                struct endpoint *e = &l->ep[i];

                if (e->registered)
                        continue;
                if (!socket_intact(e)) {
                        if (e->server)
                                logf_(l, "info", "%s is gone: serving it again", e->path);
                        if (!reserve(l, e)) {
                                all = false;
                                continue;
                        }
                }
                e->registered = register_one(l, e);
                all &= e->registered;
        }
        return all;
}

/*
 * True when the kubelet restarted: one of our sockets is gone (or another file), or kubelet.sock
 * is another file than the one we registered through. Judged by the files themselves, never by
 * inotify's names: the link's own unlink of a socket it serves again must not count as a restart.
 */
static bool kubelet_restarted(const struct tsr_dm_link *l)
{
        char kubelet[4200];
        struct stat sb;

        for (size_t i = 0; i < l->n; i++)
                if (l->ep[i].server && !socket_intact(&l->ep[i]))
                        return true;
        kubelet_path(l, kubelet, sizeof(kubelet));
        return l->registered_through.known && !stat(kubelet, &sb) &&
               !same_file(&l->registered_through, &sb);
}

/*
 * True when the restarted kubelet is up: a kubelet.sock exists that was created since the
 * restart was seen, or that is another file than the old kubelet's. The kubelet cleans its
 * directory (one socket after the other) BEFORE it listens on its new kubelet.sock, so until then
 * serving again would only hand the cleanup fresh sockets to delete.
 */
static bool new_kubelet_up(const struct tsr_dm_link *l)
{
        char kubelet[4200];
        struct stat sb;

        kubelet_path(l, kubelet, sizeof(kubelet));
        if (stat(kubelet, &sb))
                return false;
        return l->kubelet_created || !same_file(&l->old_kubelet, &sb);
}

/* Copies the endpoints' registration state into the stats (link thread); restarted counts a
 * restart of the servers. */
static void publish_registered(struct tsr_dm_link *l, bool restarted)
{
        char names[sizeof(l->stats.unregistered)] = "";
        size_t len = 0;
        bool all = true;

        for (size_t i = 0; i < l->n; i++) {
                if (l->ep[i].registered)
                        continue;
                all = false;
                if (len < sizeof(names))
                        len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
                                                len ? ", " : "",
                                                tsr_dm_plugin_resource(l->ep[i].plugin));
        }
        if (len >= sizeof(names))
                memcpy(names + sizeof(names) - 4, "...", 4);
        pthread_mutex_lock(&l->mu);
        l->stats.restarts += restarted;
        l->stats.registered = all;
        memcpy(l->stats.unregistered, names, sizeof(names));
        pthread_mutex_unlock(&l->mu);
}

static void restart_servers(struct tsr_dm_link *l)
{
        for (size_t i = 0; i < l->n; i++)
                reserve(l, &l->ep[i]);
        l->registered_through.known = false;
        publish_registered(l, true);
}

/* Drains inotify; true when kubelet.sock appeared (a pending Register should not wait out its
 * backoff). Deletions only wake the loop, which then looks at the files. */
static bool kubelet_appeared(struct tsr_dm_link *l)
{
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool hit = false;
        ssize_t got;

        while ((got = read(l->inotify_fd, buf, sizeof(buf))) > 0) {
                for (char *p = buf; p < buf + got;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;

                        if (ev->len && (ev->mask & IN_CREATE) && !strcmp(ev->name, KUBELET_SOCKET))
                                hit = true;
                        p += sizeof(*ev) + ev->len;
                }
        }
        return hit;
}

static void *link_main(void *arg)
{
        struct tsr_dm_link *l = arg;
        unsigned backoff = 0;
        struct timespec next = {0};

        for (;;) {
                struct pollfd p[2] = {{l->stop_pipe[0], POLLIN, 0}, {l->inotify_fd, POLLIN, 0}};
                struct timespec now;
                bool appeared;
                int wait_ms = CHECK_MS;

                clock_gettime(CLOCK_MONOTONIC, &now);
                if (l->pending) {
                        int64_t waited = tsr_timespec_ms_between(&l->pending_since, &now);
                        bool up = new_kubelet_up(l);

                        if (up || waited >= RESTART_WAIT_MS) {
                                if (up)
                                        logf_(l, "info",
                                              "the kubelet restarted: serving and "
                                              "registering again");
                                else
                                        logf_(l, "info",
                                              "the kubelet restarted: no new %s within %d ms; "
                                              "serving and registering again",
                                              KUBELET_SOCKET, RESTART_WAIT_MS);
                                restart_servers(l);
                                l->pending = false;
                                next = (struct timespec){0};
                                backoff = 0;
                        } else if (RESTART_WAIT_MS - waited < wait_ms) {
                                wait_ms = (int)(RESTART_WAIT_MS - waited);
                        }
                }
                if (!l->pending && tsr_timespec_reached(&now, &next)) {
                        bool all = register_pass(l);

                        backoff = all       ? 0
                                  : backoff ? (backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                                            : backoff * 2)
                                            : BACKOFF_INITIAL_MS;
                        clock_gettime(CLOCK_MONOTONIC, &next);
                        next = tsr_timespec_add_ms(next, backoff);
                        publish_registered(l, false);
                        if (backoff && backoff < (unsigned)wait_ms)
                                wait_ms = (int)backoff;
                }
                if (poll(p, 2, wait_ms) < 0 && errno != EINTR)
                        break;
                if (p[0].revents)
                        break;
                appeared = p[1].revents && kubelet_appeared(l);
                if (l->pending) {
                        l->kubelet_created |= appeared;
                        continue;
                }
                if (!kubelet_restarted(l)) {
                        if (appeared)
                                next = (struct timespec){0};
                        continue;
                }
                /* Serving again now would race the kubelet's cleanup: wait for its new
                 * kubelet.sock (a creation drained together with the deletions counts). */
                logf_(l, "debug", "the kubelet is restarting: waiting for its new %s",
                      KUBELET_SOCKET);
                l->pending = true;
                clock_gettime(CLOCK_MONOTONIC, &l->pending_since);
                l->old_kubelet = l->registered_through.known ? l->registered_through : l->tried;
                l->kubelet_created = appeared;
                for (size_t i = 0; i < l->n; i++)
                        l->ep[i].registered = false;
                publish_registered(l, false);
        }
        return NULL;
}

int tsr_dm_link_start(struct tsr_dm_plugin *const *plugins, size_t n,
                      const struct tsr_dm_link_opts *opts, struct tsr_dm_link **out,
                      struct tsr_diag *diag)
{
        struct tsr_dm_link *l = calloc(1, sizeof(*l));
        int rc = 0;

        if (!l || !(l->ep = calloc(n ? n : 1, sizeof(*l->ep)))) {
                free(l);
                return tsr_diag_set(diag, TSR_ENOMEM, "kubelet link: out of memory");
        }
        l->opts = *opts;
        l->n = n;
        l->inotify_fd = -1;
        l->stop_pipe[0] = l->stop_pipe[1] = -1;
        snprintf(l->dir, sizeof(l->dir), "%s", opts->plugin_dir);
        pthread_mutex_init(&l->mu, NULL);
        for (size_t i = 0; i < n && !rc; i++) {
                struct endpoint *e = &l->ep[i];
                char *c;

                e->plugin = plugins[i];
                snprintf(e->name, sizeof(e->name), "%s-%s.sock", opts->prefix,
                         tsr_dm_plugin_resource(plugins[i]));
                for (c = e->name; *c; c++)
                        if (*c == '/')
                                *c = '_';
                if ((size_t)snprintf(e->path, sizeof(e->path), "%s/%s", l->dir, e->name) >=
                    sizeof(e->path))
                        rc = tsr_diag_set(diag, TSR_EINVAL, "kubelet link: %s is too long", l->dir);
                else
                        rc = serve(e, diag);
        }
        if (!rc) {
                l->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
                if (l->inotify_fd < 0 ||
                    inotify_add_watch(l->inotify_fd, l->dir, IN_CREATE | IN_DELETE) < 0 ||
                    pipe(l->stop_pipe))
                        rc = tsr_diag_set(diag, TSR_EIO, "kubelet link: cannot watch %s: %s",
                                          l->dir, strerror(errno));
        }
        if (!rc)
                publish_registered(l, false); /* none yet: readiness names them all */
        if (!rc && pthread_create(&l->thread, NULL, link_main, l))
                rc = tsr_diag_set(diag, TSR_EIO, "kubelet link: cannot start its thread");
        if (rc) {
                for (size_t i = 0; i < n; i++)
                        if (l->ep[i].server)
                                unserve(&l->ep[i]);
                if (l->inotify_fd >= 0)
                        close(l->inotify_fd);
                if (l->stop_pipe[0] >= 0) {
                        close(l->stop_pipe[0]);
                        close(l->stop_pipe[1]);
                }
                pthread_mutex_destroy(&l->mu);
                free(l->ep);
                free(l);
                return rc;
        }
        *out = l;
        return 0;
}

void tsr_dm_link_stop(struct tsr_dm_link *l)
{
        if (!l)
                return;
        if (write(l->stop_pipe[1], "x", 1) < 0)
                logf_(l, "warn", "kubelet link: cannot wake its thread: %s", strerror(errno));
        pthread_join(l->thread, NULL);
        for (size_t i = 0; i < l->n; i++)
                if (l->ep[i].server)
                        unserve(&l->ep[i]);
        close(l->inotify_fd);
        close(l->stop_pipe[0]);
        close(l->stop_pipe[1]);
        pthread_mutex_destroy(&l->mu);
        free(l->ep);
        free(l);
}

void tsr_dm_link_stats(struct tsr_dm_link *l, struct tsr_dm_link_stats *out)
{
        pthread_mutex_lock(&l->mu);
        *out = l->stats;
        pthread_mutex_unlock(&l->mu);
}
