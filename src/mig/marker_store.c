/*
 * marker_store.c - the marker store's two backends. Both turn (relative path, body) into a listed
 * entry the same way (entry_of), so the memory backend fails closed exactly as files do.
 */
#include "mig/marker_store.h"

#include "base/atomic_file.h"
#include "base/err.h"
#include "base/regular_file.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARKER_BODY_MAX 4096

/* ---- what both backends share ----------------------------------------------------------- */

static bool name_ok(const char *s)
{
        return s[0] != '\0' && s[0] != '.' && !strchr(s, '/');
}

static bool pathf(char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* snprintf that reports truncation: false when the path did not fit. */
static bool pathf(char *out, size_t len, const char *fmt, ...)
{
        va_list ap;
        int w;

        va_start(ap, fmt);
        w = vsnprintf(out, len, fmt, ap);
        va_end(ap);
        return w >= 0 && (size_t)w < len;
}

/* The relative path of (pod_uid, container, card). */
static int rel_path(const char *pod_uid, const char *container, const char *card, char *out,
                    size_t len, struct tsr_diag *diag)
{
        if (!name_ok(pod_uid) || !name_ok(container) || !name_ok(card))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "MIG marker: pod %s container %s card %s cannot name a path",
                                    pod_uid, container, card);
        if (!pathf(out, len, "%s/c-%s/" TSR_MIG_MARKER_PREFIX "%s" TSR_MIG_MARKER_SUFFIX, pod_uid,
                   container, card))
                return tsr_diag_set(diag, TSR_ETOOBIG, "MIG marker: path too long");
        return 0;
}

/*
 * Fills e from a marker found at rel ("<pod>/c-<container>/nvidia-mig-<card>.json") with body
 * text[0..len): decoded, or corrupt with the decoder's message. The path's pod, container and card
 * were validated by the caller's scan.
 */
static void entry_of(struct tsr_mig_marker_entry *e, const char *display, const char *pod,
                     const char *container, const char *card, const char *text, size_t len)
{
        struct tsr_diag why;

        memset(e, 0, sizeof(*e));
        snprintf(e->path, sizeof(e->path), "%s", display);
        snprintf(e->pod_uid, sizeof(e->pod_uid), "%s", pod);
        snprintf(e->container, sizeof(e->container), "%s", container);
        snprintf(e->card, sizeof(e->card), "%s", card);
        tsr_diag_clear(&why);
        if (tsr_mig_marker_decode(text, len, card, &e->m, &why)) {
                e->corrupt = true;
                snprintf(e->why, sizeof(e->why), "%s", why.msg);
                return;
        }
        if (strcmp(e->m.pod_uid, pod) || strcmp(e->m.container, container)) {
                e->corrupt = true;
                snprintf(e->why, sizeof(e->why),
                         "MIG marker: \"podUID\" %s / \"container\" %s differ from its path",
                         e->m.pod_uid, e->m.container);
        }
}

/*
 * A new zeroed entry at the end of es, or NULL with *rc TSR_ETOOBIG (past TSR_MIG_MARKERS_MAX) or
 * TSR_ENOMEM and diag.
 */
static struct tsr_mig_marker_entry *entries_push(struct tsr_mig_entries *es, int *rc,
                                                 struct tsr_diag *diag)
{
        struct tsr_mig_marker_entry *e;

        if (es->n == TSR_MIG_MARKERS_MAX) {
                *rc = tsr_diag_set(diag, TSR_ETOOBIG, "MIG markers: more than %d",
                                   TSR_MIG_MARKERS_MAX);
                return NULL;
        }
        if (es->n == es->cap) {
                size_t cap = es->cap ? es->cap * 2 : 16;
                struct tsr_mig_marker_entry *v;

                if (cap > TSR_MIG_MARKERS_MAX)
                        cap = TSR_MIG_MARKERS_MAX;
                v = realloc(es->v, cap * sizeof(*v));
                if (!v) {
                        *rc = tsr_diag_set(diag, TSR_ENOMEM, "MIG markers: out of memory");
                        return NULL;
                }
                es->v = v;
                es->cap = cap;
        }
        e = &es->v[es->n++];
        memset(e, 0, sizeof(*e));
        return e;
}

/*
 * Replaces the entries es->v[from..] of pod, whose directory dir holds more markers than any Pod
 * can own, with one flooded entry (room for it is there: from < es->n).
 */
static void collapse_flood(struct tsr_mig_entries *es, size_t from, const char *pod,
                           const char *dir)
{
        struct tsr_mig_marker_entry *e = &es->v[from];

        es->n = from + 1;
        memset(e, 0, sizeof(*e));
        e->corrupt = e->flooded = true;
        snprintf(e->path, sizeof(e->path), "%s", dir);
        snprintf(e->pod_uid, sizeof(e->pod_uid), "%s", pod);
        snprintf(e->why, sizeof(e->why),
                 "MIG markers: the directory of pod %s holds more than %d (no Pod owns that "
                 "many instances)",
                 pod, TSR_MIG_POD_MARKERS_MAX);
}

static int by_path(const void *a, const void *b)
{
        return strcmp(((const struct tsr_mig_marker_entry *)a)->path,
                      ((const struct tsr_mig_marker_entry *)b)->path);
}

static void hook(struct tsr_mig_store *s, const char *point)
{
        if (s->hook)
                s->hook(s->hook_arg, point);
}

/* ---- files ------------------------------------------------------------------------------- */

struct files_store {
        struct tsr_mig_store base;
        char root[TSR_MIG_PATH_MAX];
};

/* Opens dir for scanning: the DIR, or NULL with *gone set when it vanished (not an error). */
static DIR *open_scan(const char *dir, bool *gone)
{
        DIR *d = opendir(dir);

        *gone = !d && (errno == ENOENT || errno == ENOTDIR);
        return d;
}

struct scan {
        struct tsr_mig_entries *es;
        struct tsr_diag *diag;
        size_t pod_from; /* the Pod being scanned: its first entry */
        bool flooded;    /* it holds more than TSR_MIG_POD_MARKERS_MAX */
};

static int scan_container(const char *root, const char *pod, const char *cdir, struct scan *sc)
{
        char dir[TSR_MIG_PATH_MAX], file[TSR_MIG_PATH_MAX], body[MARKER_BODY_MAX];
        struct dirent *de;
        bool gone;
        DIR *d;
        int rc = 0;

        if (!pathf(dir, sizeof(dir), "%s/%s/%s", root, pod, cdir))
                return tsr_diag_set(sc->diag, TSR_ETOOBIG, "MIG markers: path too long");
        d = open_scan(dir, &gone);
        if (!d)
                return gone ? 0
                            : tsr_diag_set(sc->diag, TSR_EIO, "MIG markers: %s: %s", dir,
                                           strerror(errno));
        while (!rc && (de = readdir(d))) {
                char card[TSR_MIG_MARKER_UUID_MAX];
                struct tsr_mig_marker_entry *e;
                const char *kind = "";
                size_t len = 0;
                enum tsr_read_result r;

                if (de->d_name[0] == '.' ||
                    tsr_mig_marker_card_of_name(de->d_name, card, sizeof(card)))
                        continue; /* temporary files of an interrupted put start with '.' */
                if (sc->es->n - sc->pod_from == TSR_MIG_POD_MARKERS_MAX) {
                        sc->flooded = true; /* read no more of it */
                        break;
                }
                if (!pathf(file, sizeof(file), "%s/%s", dir, de->d_name)) {
                        rc = tsr_diag_set(sc->diag, TSR_ETOOBIG, "MIG markers: path too long");
                        break;
                }
                r = tsr_read_regular(file, body, sizeof(body), &len, &kind);
                if (r == TSR_READ_GONE)
                        continue;
                if (r == TSR_READ_ERROR) {
                        rc = tsr_diag_set(sc->diag, TSR_EIO, "MIG markers: %s: %s", file,
                                          strerror(errno));
                        break;
                }
                e = entries_push(sc->es, &rc, sc->diag);
                if (!e)
                        break;
                entry_of(e, file, pod, cdir + 2, card, body, len);
                if (r == TSR_READ_NOT_FILE) {
                        e->corrupt = true;
                        snprintf(e->why, sizeof(e->why), "MIG marker: %s, not a regular file",
                                 kind);
                }
        }
        closedir(d);
        return rc;
}

static int scan_pod(const char *root, const char *pod, struct scan *sc)
{
        char dir[TSR_MIG_PATH_MAX];
        struct dirent *de;
        bool gone;
        DIR *d;
        int rc = 0;

        if (!pathf(dir, sizeof(dir), "%s/%s", root, pod))
                return tsr_diag_set(sc->diag, TSR_ETOOBIG, "MIG markers: path too long");
        d = open_scan(dir, &gone);
        if (!d)
                return gone ? 0
                            : tsr_diag_set(sc->diag, TSR_EIO, "MIG markers: %s: %s", dir,
                                           strerror(errno));
        sc->pod_from = sc->es->n;
        sc->flooded = false;
        while (!rc && !sc->flooded && (de = readdir(d)))
                if (!strncmp(de->d_name, "c-", 2) && name_ok(de->d_name + 2))
                        rc = scan_container(root, pod, de->d_name, sc);
        closedir(d);
        if (!rc && sc->flooded)
                collapse_flood(sc->es, sc->pod_from, pod, dir);
        return rc;
}

static int files_list(struct tsr_mig_store *s, struct tsr_mig_entries *es, struct tsr_diag *diag)
{
        struct files_store *fs = (struct files_store *)s;
        struct scan sc = {es, diag, 0, false};
        struct dirent *de;
        DIR *d = opendir(fs->root);
        int rc = 0;

        if (!d) /* fail closed: a pods directory we cannot read hides every marker */
                return tsr_diag_set(diag, TSR_EIO, "MIG markers: pods directory %s: %s", fs->root,
                                    strerror(errno));
        while (!rc && (de = readdir(d)))
                if (name_ok(de->d_name))
                        rc = scan_pod(fs->root, de->d_name, &sc);
        closedir(d);
        if (rc)
                return rc;
        if (es->n)
                qsort(es->v, es->n, sizeof(*es->v), by_path);
        return 0;
}

static int mkdir_one(const char *dir)
{
        return mkdir(dir, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static int files_put(struct tsr_mig_store *s, const struct tsr_mig_marker *m, struct tsr_diag *diag)
{
        struct files_store *fs = (struct files_store *)s;
        char rel[TSR_MIG_PATH_MAX], path[TSR_MIG_PATH_MAX], dir[TSR_MIG_PATH_MAX];
        char *body = NULL;
        int rc = rel_path(m->pod_uid, m->container, m->card, rel, sizeof(rel), diag);

        if (rc)
                return rc;
        if (!pathf(path, sizeof(path), "%s/%s", fs->root, rel))
                return tsr_diag_set(diag, TSR_ETOOBIG, "MIG marker: path too long");
        pathf(dir, sizeof(dir), "%s/%s", fs->root, m->pod_uid);
        if (mkdir_one(dir))
                return tsr_diag_set(diag, TSR_EIO, "MIG marker: %s: %s", dir, strerror(errno));
        pathf(dir, sizeof(dir), "%s/%s/c-%s", fs->root, m->pod_uid, m->container);
        if (mkdir_one(dir))
                return tsr_diag_set(diag, TSR_EIO, "MIG marker: %s: %s", dir, strerror(errno));
        if (tsr_mig_marker_encode(m, &body))
                return tsr_diag_set(diag, TSR_ENOMEM, "MIG marker: out of memory");
        rc = tsr_atomic_write(path, body, strlen(body), 0600, "MIG marker", diag);
        free(body);
        if (rc)
                return rc;
        hook(s, "marker_put:after");
        return 0;
}

static int files_remove(struct tsr_mig_store *s, const char *path, struct tsr_diag *diag)
{
        char dir[TSR_MIG_PATH_MAX];
        char *slash;

        if (unlink(path) && errno != ENOENT)
                return tsr_diag_set(diag, TSR_EIO, "MIG marker: removing %s: %s", path,
                                    strerror(errno));
        pathf(dir, sizeof(dir), "%s", path);
        slash = strrchr(dir, '/');
        if (slash) {
                *slash = '\0';
                if (tsr_fsync_dir(dir) && errno != ENOENT)
                        return tsr_diag_set(diag, TSR_EIO, "MIG marker: fsync %s: %s", dir,
                                            strerror(errno));
        }
        hook(s, "marker_remove:after");
        return 0;
}

static void files_free(struct tsr_mig_store *s)
{
        free(s);
}

static const struct tsr_mig_store_ops files_ops = {files_list, files_put, files_remove, files_free};

int tsr_mig_store_files_new(const char *pods_dir, struct tsr_mig_store **out)
{
        struct files_store *fs;

        if (strlen(pods_dir) >= sizeof(fs->root) / 2)
                return TSR_ETOOBIG;
        fs = calloc(1, sizeof(*fs));
        if (!fs)
                return TSR_ENOMEM;
        fs->base.ops = &files_ops;
        snprintf(fs->root, sizeof(fs->root), "%s", pods_dir);
        *out = &fs->base;
        return 0;
}

/* ---- memory ------------------------------------------------------------------------------ */

struct memory_marker {
        char rel[TSR_MIG_PATH_MAX];
        char pod[TSR_MIG_MARKER_UID_MAX], container[TSR_MIG_MARKER_NAME_MAX],
            card[TSR_MIG_MARKER_UUID_MAX];
        char *text;
};

/* Invariant: items[0..n) ascending by rel, rels distinct (so a Pod's items are adjacent). */
struct memory_store {
        struct tsr_mig_store base;
        size_t n, cap;
        struct memory_marker *items;
};

static int memory_list(struct tsr_mig_store *s, struct tsr_mig_entries *es, struct tsr_diag *diag)
{
        struct memory_store *ms = (struct memory_store *)s;
        size_t pod_from = 0;

        for (size_t i = 0; i < ms->n; i++) {
                const struct memory_marker *it = &ms->items[i];
                struct tsr_mig_marker_entry *e;
                int rc = 0;

                if (i && !strcmp(it->pod, ms->items[i - 1].pod) && es->n > pod_from &&
                    es->v[pod_from].flooded)
                        continue; /* the rest of a flooded Pod */
                if (!i || strcmp(it->pod, ms->items[i - 1].pod))
                        pod_from = es->n;
                if (es->n - pod_from == TSR_MIG_POD_MARKERS_MAX) {
                        collapse_flood(es, pod_from, it->pod, it->pod);
                        continue;
                }
                e = entries_push(es, &rc, diag);
                if (!e)
                        return rc;
                entry_of(e, it->rel, it->pod, it->container, it->card, it->text, strlen(it->text));
        }
        return 0;
}

/* Stores text (taking ownership) at the path of (pod, container, card), keeping items sorted. */
static int memory_store_text(struct memory_store *ms, const char *pod, const char *container,
                             const char *card, char *text, struct tsr_diag *diag)
{
        char rel[TSR_MIG_PATH_MAX];
        size_t at = 0;
        int rc = rel_path(pod, container, card, rel, sizeof(rel), diag);
        struct memory_marker *it;

        if (rc)
                goto fail;
        while (at < ms->n && strcmp(ms->items[at].rel, rel) < 0)
                at++;
        if (at < ms->n && !strcmp(ms->items[at].rel, rel)) {
                free(ms->items[at].text);
                ms->items[at].text = text;
                goto done;
        }
        if (ms->n == TSR_MIG_MARKERS_MAX) {
                rc = tsr_diag_set(diag, TSR_ETOOBIG, "MIG markers: more than %d",
                                  TSR_MIG_MARKERS_MAX);
                goto fail;
        }
        if (ms->n == ms->cap) {
                size_t cap = ms->cap ? ms->cap * 2 : 16;
                struct memory_marker *items = realloc(ms->items, cap * sizeof(*items));

                if (!items) {
                        rc = tsr_diag_set(diag, TSR_ENOMEM, "MIG marker: out of memory");
                        goto fail;
                }
                ms->items = items;
                ms->cap = cap;
        }
        memmove(&ms->items[at + 1], &ms->items[at], (ms->n - at) * sizeof(ms->items[0]));
        ms->n++;
        it = &ms->items[at];
        snprintf(it->rel, sizeof(it->rel), "%s", rel);
        snprintf(it->pod, sizeof(it->pod), "%s", pod);
        snprintf(it->container, sizeof(it->container), "%s", container);
        snprintf(it->card, sizeof(it->card), "%s", card);
        it->text = text;
done:
        hook(&ms->base, "marker_put:after");
        return 0;
fail:
        free(text);
        return rc;
}

static int memory_put(struct tsr_mig_store *s, const struct tsr_mig_marker *m,
                      struct tsr_diag *diag)
{
        char *text;

        if (tsr_mig_marker_encode(m, &text))
                return tsr_diag_set(diag, TSR_ENOMEM, "MIG marker: out of memory");
        return memory_store_text((struct memory_store *)s, m->pod_uid, m->container, m->card, text,
                                 diag);
}

static int memory_remove(struct tsr_mig_store *s, const char *path, struct tsr_diag *diag)
{
        struct memory_store *ms = (struct memory_store *)s;

        (void)diag;
        for (size_t i = 0; i < ms->n; i++) {
                if (strcmp(ms->items[i].rel, path))
                        continue;
                free(ms->items[i].text);
                memmove(&ms->items[i], &ms->items[i + 1], (ms->n - i - 1) * sizeof(ms->items[0]));
                ms->n--;
                break;
        }
        hook(s, "marker_remove:after");
        return 0;
}

static void memory_free(struct tsr_mig_store *s)
{
        struct memory_store *ms = (struct memory_store *)s;

        for (size_t i = 0; i < ms->n; i++)
                free(ms->items[i].text);
        free(ms->items);
        free(ms);
}

static const struct tsr_mig_store_ops memory_ops = {memory_list, memory_put, memory_remove,
                                                    memory_free};

int tsr_mig_store_memory_new(struct tsr_mig_store **out)
{
        struct memory_store *ms = calloc(1, sizeof(*ms));

        if (!ms)
                return TSR_ENOMEM;
        ms->base.ops = &memory_ops;
        *out = &ms->base;
        return 0;
}

int tsr_mig_store_memory_put_raw(struct tsr_mig_store *s, const char *pod_uid,
                                 const char *container, const char *card, const char *text)
{
        char *copy;

        if (s->ops != &memory_ops)
                return TSR_EINVAL;
        copy = strdup(text);
        if (!copy)
                return TSR_ENOMEM;
        return memory_store_text((struct memory_store *)s, pod_uid, container, card, copy, NULL);
}

/* ---- the vtable's front ------------------------------------------------------------------ */

void tsr_mig_store_free(struct tsr_mig_store *s)
{
        if (s)
                s->ops->free(s);
}

void tsr_mig_store_set_hook(struct tsr_mig_store *s, void (*fn)(void *arg, const char *point),
                            void *arg)
{
        s->hook = fn;
        s->hook_arg = arg;
}

/* Whether a and b (both decoded) name the same MIG instance. */
static bool same_instance(const struct tsr_mig_marker *a, const struct tsr_mig_marker *b)
{
        return !strcmp(a->card, b->card) && (!strcmp(a->mig_uuid, b->mig_uuid) ||
                                             (a->gi_id == b->gi_id && a->ci_id == b->ci_id));
}

/*
 * Two markers of different owners claiming one instance: one is a copy (a marker moved into
 * another Pod's directory with its podUID rewritten to match). Which is genuine cannot be told
 * from the files, so both become corrupt: their card is held and neither owner is granted the
 * instance, rather than granting it twice.
 */
/* Marks e corrupt for sharing its instance with other (its why names the first it met). */
static void name_claimant(struct tsr_mig_marker_entry *e, const struct tsr_mig_marker_entry *other)
{
        if (!e->why[0])
                snprintf(e->why, sizeof(e->why),
                         "MIG marker: its instance %s (GPU instance %u) is also claimed by pod %s "
                         "container %s (a copied marker?)",
                         e->m.mig_uuid, e->m.gi_id, other->m.pod_uid, other->m.container);
        e->corrupt = true;
}

static int mark_double_claims(struct tsr_mig_marker_entry *e, size_t n, struct tsr_diag *diag)
{
        bool *decoded = calloc(n ? n : 1, sizeof(*decoded));

        if (!decoded)
                return tsr_diag_set(diag, TSR_ENOMEM, "MIG markers: out of memory");
        for (size_t i = 0; i < n; i++)
                decoded[i] = !e[i].corrupt;
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                        struct tsr_mig_marker_entry *a = &e[i], *b = &e[j];

                        if (!decoded[i] || !decoded[j] || !same_instance(&a->m, &b->m) ||
                            (!strcmp(a->m.pod_uid, b->m.pod_uid) &&
                             !strcmp(a->m.container, b->m.container)))
                                continue;
                        name_claimant(a, b);
                        name_claimant(b, a);
                }
        free(decoded);
        return 0;
}

int tsr_mig_store_list(struct tsr_mig_store *s, struct tsr_mig_marker_entry **out, size_t *n,
                       struct tsr_diag *diag)
{
        struct tsr_mig_entries es = {NULL, 0, 0};
        int rc = s->ops->list(s, &es, diag);

        if (!rc)
                rc = mark_double_claims(es.v, es.n, diag);
        if (rc) {
                free(es.v);
                *out = NULL;
                return rc;
        }
        *out = es.v;
        *n = es.n;
        return 0;
}

bool tsr_mig_markers_hold_card(const struct tsr_mig_marker_entry *e, size_t n, const char *uuid)
{
        for (size_t i = 0; i < n; i++)
                if (e[i].corrupt && (e[i].flooded || !strcmp(e[i].card, uuid)))
                        return true;
        return false;
}

int tsr_mig_store_put(struct tsr_mig_store *s, const struct tsr_mig_marker *m,
                      struct tsr_diag *diag)
{
        return s->ops->put(s, m, diag);
}

int tsr_mig_store_remove(struct tsr_mig_store *s, const char *path, struct tsr_diag *diag)
{
        return s->ops->remove(s, path, diag);
}
