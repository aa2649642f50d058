/*
 * cluster_apiserver.h - starts a real kube-apiserver (with its etcd) on loopback for a C test,
 * through `tests/cluster/controlplane.py serve --no-kueue --no-scheduler
 * --no-controller-manager`, and drives it: the URL, CA, kubeconfig and tokens of its ready line, a
 * control client (tsr_kube_client, the admin token: system:masters) for creating, patching and
 * deleting objects through REST, tessera's CRDs (deploy/crds) and Kueue's installed before the
 * ready line, and the API server's own request counters (apiserver_request_total on /metrics).
 *
 * The interpreter, the script and the CRD directory come from the environment the meson test sets
 * (TSR_PYTHON, TSR_CONTROLPLANE, TSR_CRDS); controlplane.py finds the binaries through
 * TSR_PEERS_BIN or `tools/peers.sh bin`. Every helper fails the running cmocka test with a message
 * when something does not work. One control plane serves a whole test executable: cases share it
 * by using their own namespaces and object names.
 *
 * Ownership: a struct cluster_apiserver owns its serve process (ended by closing its stdin, or by
 * a "fail" line first, which keeps the control plane's logs), the ready line (every string field
 * points into it: valid until cluster_stop) and its control client; cluster_stop releases all
 * three. The control plane's work directory (dir) belongs to controlplane.py: files a test writes
 * there go with it. JSON results are new references (json_decref).
 */
#ifndef TSR_TESTS_CLUSTER_APISERVER_H
#define TSR_TESTS_CLUSTER_APISERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

struct tsr_kube_client;

/* What to start besides the API server; a zero struct (or NULL) is the bare API server. */
struct cluster_opts {
        const char *suite;        /* names the work directory (tsr-<suite>-*); NULL: "c-test" */
        bool crds;                /* install deploy/crds (TSR_CRDS) */
        bool kueue_crds;          /* install Kueue's CRDs (Kueue itself does not run) */
        const char *const *users; /* NULL-terminated: users with a token each ("tok-<user>") */
};

struct cluster_apiserver {
        pid_t pid;
        int stdin_fd;    /* write end of serve's stdin; closing it tears the control plane down */
        int stdout_fd;   /* read end of serve's stdout, held so that it never meets EPIPE */
        json_t *ready;   /* the ready line */
        const char *url; /* https://127.0.0.1:PORT */
        const char *ca;  /* the serving CA's certificate file */
        const char *kubeconfig;  /* the admin's kubeconfig (client certificate), JSON */
        const char *token;       /* the admin's bearer token */
        const char *dir;         /* the work directory */
        const char *client_cert; /* the admin's client certificate file (O=system:masters) */
        const char *client_key;
        struct tsr_kube_client *ctl; /* the control client (admin token) */
};

/* Starts a control plane (waiting up to 100 s for its ready line) and the control client. */
void cluster_start(struct cluster_apiserver *c, const struct cluster_opts *opts);

/*
 * Tears the control plane down and waits for it (up to 60 s, then SIGTERM, then SIGKILL). With
 * failed, writes "fail" first: controlplane.py keeps the work directory and prints where each
 * component's log is. Idempotent.
 */
void cluster_stop(struct cluster_apiserver *c, bool failed);

/* The bearer token of user (one of opts.users, or "admin"); valid until cluster_stop. */
const char *cluster_token(struct cluster_apiserver *c, const char *user);

/* Any request as the admin; body is JSON text (may be NULL). Returns the reply (NULL if empty). */
json_t *cluster_request(struct cluster_apiserver *c, const char *method, const char *path,
                        const char *body);

/* Creates an object (JSON text) at the collection path; returns it as the server stored it. */
json_t *cluster_create(struct cluster_apiserver *c, const char *collection, const char *object);

/* Merge-patches the object at path with patch (JSON text); returns it after the patch. */
json_t *cluster_patch(struct cluster_apiserver *c, const char *path, const char *patch);

/* Deletes the object at path at once (gracePeriodSeconds=0: a bound Pod has no kubelet here). */
void cluster_delete(struct cluster_apiserver *c, const char *path);

/* Creates the namespace ns unless it exists. */
void cluster_namespace(struct cluster_apiserver *c, const char *ns);

/* Writes text to dir/name atomically (a temporary file renamed over it); returns the path. */
const char *cluster_write_file(struct cluster_apiserver *c, const char *name, const char *text);

/*
 * Writes dir/name: a kubeconfig (YAML) for the API server with its CA file, the namespace ns (may
 * be NULL) and tokenFile (token_file, absolute, may be NULL) or token (may be NULL). Returns the
 * path (static storage).
 */
const char *cluster_kubeconfig(struct cluster_apiserver *c, const char *name,
                               const char *token_file, const char *token, const char *ns);

/*
 * The API server's apiserver_request_total counters of resource requests, from its /metrics:
 * {"VERB resource[/subresource] code": count}, e.g. "PATCH nodes/status 200", "GET devices 404"
 * or "LIST instancetypes 200" (server-side apply counts as verb APPLY). Watches are left out: one
 * is counted when it ends, whenever that is. A request is counted before its response ends, so a
 * reply the test has seen is always in the counters it reads next.
 */
json_t *cluster_request_counts(struct cluster_apiserver *c);

/* The counters of cluster_request_counts that grew since before, by how much, for resources only
 * (NULL-terminated plurals, NULL: every one). */
json_t *cluster_request_delta(struct cluster_apiserver *c, json_t *before,
                              const char *const *resources);

/* The sum of a delta's counts. */
long cluster_delta_total(json_t *delta);

#endif
