/*
 * kubelet_link.h - the device plugins' link to the kubelet (spec/kubernetes-contracts.md §2.2):
 * each plugin serves its own unix socket in the kubelet's device-plugin directory and registers
 * through kubelet.sock; a kubelet restart is followed by serving and registering again.
 *
 * Per plugin: the server is started (a stale socket of ours is replaced) BEFORE Register is
 * called, since the kubelet dials back and calls GetDevicePluginOptions inside Register. Register
 * carries version v1beta1, the socket's name relative to the directory, the resource name and the
 * options (preferred allocation available). A Register that fails is retried with capped
 * backoff (0.5 s doubling to 10 s).
 * A kubelet restart deletes every socket in the directory, one after the other, and only then
 * listens on a new kubelet.sock (the kubelet's CleanupPluginDirectory runs before its Listen): the
 * link watches the directory (inotify wakes it; every second it looks anyway) and judges by the
 * files alone: one of our sockets gone (or another file than the one its server made), or
 * kubelet.sock another inode than the one the last successful Register went through. Then it
 * waits for the new kubelet: a kubelet.sock created since (inotify), or another file than the
 * old kubelet's; at most RESTART_WAIT_MS (3 s), after which it goes on anyway (a socket deleted
 * by someone else, a second device manager). Serving earlier would hand the still running cleanup
 * fresh sockets to delete. Then it stops every plugin server (open ListAndWatch streams end),
 * starts them again and registers every plugin anew; right before each Register the plugin's
 * socket is checked again (same inode) and served anew if it is not the one served, since the
 * kubelet dials it back inside Register and a missing socket costs the kubelet's whole 10 s dial
 * timeout (kubelet.sock's creation cuts a pending backoff short). The link's own unlinks never
 * count, so one kubelet restart is one restart of the servers however its deletions and
 * creations interleave (tests/unit/test_dm_kubelet_link.c steps those interleavings).
 *
 * Threads: one link thread does all of this; Register calls run on it while the servers'
 * own threads answer the kubelet. Ownership: the plugins are borrowed until stop returns.
 */
#ifndef TSR_DEVICEMANAGER_KUBELET_LINK_H
#define TSR_DEVICEMANAGER_KUBELET_LINK_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"
#include "devicemanager/plugin.h"

struct tsr_dm_link;

struct tsr_dm_link_opts {
        const char *plugin_dir; /* /var/lib/kubelet/device-plugins */
        const char *prefix;     /* socket names: <prefix>-<resource with '/' as '_'>.sock */
        void (*log)(void *ctx, const char *level, const char *msg);
        void *log_ctx;
};

/* What the link has done, for tests and metrics. */
struct tsr_dm_link_stats {
        unsigned long registrations; /* successful Register calls */
        unsigned long failures;      /* failed Register calls */
        unsigned long restarts;      /* kubelet restarts handled (servers restarted) */
        bool registered;             /* every plugin is registered with the current kubelet */
        char unregistered[512]; /* the resources not registered with it, ", "-separated ("": none;
                                   cut short with "..." when too long) */
};

/*
 * Starts serving plugins[0..n) and the link thread. Returns 0 and *out, or an error with diag
 * (a socket could not be served: TSR_EIO / TSR_EEXIST; TSR_ENOMEM).
 */
int tsr_dm_link_start(struct tsr_dm_plugin *const *plugins, size_t n,
                      const struct tsr_dm_link_opts *opts, struct tsr_dm_link **out,
                      struct tsr_diag *diag);

/* Stops the link thread and the servers (their sockets are removed). NULL is a no-op. */
void tsr_dm_link_stop(struct tsr_dm_link *l);

void tsr_dm_link_stats(struct tsr_dm_link *l, struct tsr_dm_link_stats *out);

#endif
