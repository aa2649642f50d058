/*
 * marker_store.h - where MIG ownership markers live: a small vtable with two backends.
 *
 * A marker's path is <podUID>/c-<container>/nvidia-mig-<cardUUID>.json, relative to the store's
 * root: the kubelet's pods directory for the files backend, nothing for the memory backend (the
 * simulator's). One marker per (Pod, container, card); put replaces it.
 *
 * list returns every marker file in deterministic order (ascending path), in an array it
 * allocates, each decoded by
 * codec/mig_marker.h's fail-closed decoder. A marker that does not decode is returned with corrupt
 * set, its Pod UID and card taken from its path and the decoder's message in why: it is reported,
 * never silently dropped, and its path stays attributable to a Pod; so is anything named like a
 * marker that is not a regular file (a FIFO, a directory, a socket, a symbolic link), which the
 * files backend never opens blocking and never follows. Two markers of different owners that claim
 * one MIG instance (the same card and MIG UUID, or GPU and compute instance ids) are both
 * returned corrupt, naming each other: one is a copy, and which cannot be told, so the card is
 * held and neither is granted the instance rather than both. A Pod directory holding more marker
 * entries than TSR_MIG_POD_MARKERS_MAX (every marker owns a distinct instance, and no node has
 * that many) is not a Pod's honest markers: it is listed as ONE corrupt entry, flooded, whose path
 * is the Pod's directory and whose container and card are empty; it holds every card (no
 * adoption, no reclaim of unmarked instances) and refuses its own Pod, and nobody else. So a
 * flood costs its own Pod, not the node's other Allocates; only more than TSR_MIG_MARKERS_MAX
 * entries in all (thousands of Pod directories) fail the list. The files backend tolerates
 * directories and files that vanish while it scans (a Pod's directory the kubelet removes), and
 * fails the whole list with TSR_EIO when the pods directory itself, or any marker it found, cannot
 * be read: a caller that cannot see every marker must not decide anything (reclaim destroys
 * nothing then).
 *
 * put is DURABLE in the files backend: the marker is written to a temporary file in its own
 * directory (created as needed), fsynced, renamed over the final name, and the directory fsynced,
 * so after a crash the marker is either absent or whole. Pod UIDs, container names and cards that
 * are empty, contain '/' or start with '.' are refused (TSR_EINVAL): a marker never escapes its
 * Pod's directory. remove unlinks one listed path (and fsyncs its directory); a path already gone
 * is not an error.
 *
 * Crash points: a hook (tsr_mig_store_set_hook) runs at "marker_put:after" once a put is durable
 * and at "marker_remove:after" once a remove is; the crash tests _exit() there.
 *
 * Ownership: the _new functions return a new store (free with tsr_mig_store_free); they copy
 * pods_dir. list fills caller storage. A store is used by one thread at a time (callers hold the
 * node's MIG lock, see carve.h).
 */
#ifndef TSR_MIG_MARKER_STORE_H
#define TSR_MIG_MARKER_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"
#include "codec/mig_marker.h"

#define TSR_MIG_PATH_MAX        512
#define TSR_MIG_MARKERS_MAX     4096 /* entries in one list, floods collapsed; past it: ETOOBIG */
#define TSR_MIG_POD_MARKERS_MAX 64   /* marker entries one Pod directory may hold */

struct tsr_mig_marker_entry {
        char path[TSR_MIG_PATH_MAX]; /* what remove takes */
        bool corrupt;
        bool flooded; /* corrupt: over TSR_MIG_POD_MARKERS_MAX in the Pod's directory (path) */
        /* From the path, valid for a corrupt marker too ("" for a flood's container and card). */
        char pod_uid[TSR_MIG_MARKER_UID_MAX];
        char container[TSR_MIG_MARKER_NAME_MAX];
        char card[TSR_MIG_MARKER_UUID_MAX];
        struct tsr_mig_marker m;    /* valid when !corrupt */
        char why[TSR_DIAG_MSG_MAX]; /* corrupt: the decoder's message */
};

struct tsr_mig_store;

/* A growing array of entries, at most TSR_MIG_MARKERS_MAX (what a backend's list fills). */
struct tsr_mig_entries {
        struct tsr_mig_marker_entry *v;
        size_t n, cap;
};

struct tsr_mig_store_ops {
        int (*list)(struct tsr_mig_store *s, struct tsr_mig_entries *out, struct tsr_diag *diag);
        int (*put)(struct tsr_mig_store *s, const struct tsr_mig_marker *m, struct tsr_diag *diag);
        int (*remove)(struct tsr_mig_store *s, const char *path, struct tsr_diag *diag);
        void (*free)(struct tsr_mig_store *s);
};

/* The common head of every backend. */
struct tsr_mig_store {
        const struct tsr_mig_store_ops *ops;
        void (*hook)(void *arg, const char *point);
        void *hook_arg;
};

/* A store over the kubelet's pods directory pods_dir (need not exist yet for put). */
int tsr_mig_store_files_new(const char *pods_dir, struct tsr_mig_store **out);

/* An in-memory store: the simulator's, and the unit tests'. */
int tsr_mig_store_memory_new(struct tsr_mig_store **out);

/*
 * Memory backend only: stores text verbatim as the body of the marker at the path of (pod_uid,
 * container, card), as a torn or hand-edited file would read. TSR_EINVAL for a bad name.
 */
int tsr_mig_store_memory_put_raw(struct tsr_mig_store *s, const char *pod_uid,
                                 const char *container, const char *card, const char *text);

void tsr_mig_store_free(struct tsr_mig_store *s);

/* Sets (hook NULL: clears) the crash-point hook. */
void tsr_mig_store_set_hook(struct tsr_mig_store *s, void (*hook)(void *arg, const char *point),
                            void *arg);

/*
 * Lists every marker, ascending by path, into *out (a new array of *n entries; free() it, also
 * when *n is 0). Returns 0, TSR_ETOOBIG past TSR_MIG_MARKERS_MAX, TSR_EIO (files: the pods
 * directory or a marker unreadable), TSR_ENOMEM; *out is NULL on failure.
 */
int tsr_mig_store_list(struct tsr_mig_store *s, struct tsr_mig_marker_entry **out, size_t *n,
                       struct tsr_diag *diag);

/* Whether the listed markers hold card uuid: a corrupt one names it, or a flood holds them all. */
bool tsr_mig_markers_hold_card(const struct tsr_mig_marker_entry *e, size_t n, const char *uuid);

/* Writes m durably at its path. 0, TSR_EINVAL (bad name), TSR_EIO, TSR_ENOMEM, TSR_ETOOBIG. */
int tsr_mig_store_put(struct tsr_mig_store *s, const struct tsr_mig_marker *m,
                      struct tsr_diag *diag);

/* Removes the marker at path (as list returned it). 0 also when already gone; TSR_EIO. */
int tsr_mig_store_remove(struct tsr_mig_store *s, const char *path, struct tsr_diag *diag);

#endif
