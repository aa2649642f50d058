/*
 * fake_apiserver.h - starts tests/peers/fake_apiserver.py on loopback for a C test and drives it:
 * certificates from tests/peers/gen_certs.sh in a fresh temporary directory, a token file, a
 * kubeconfig pointing at the fake, and a control client (tsr_kube_client) for the /_test/
 * commands and for creating, patching and deleting objects through the real REST API.
 *
 * Only for faults a real server does not make on demand: the tests' normal behaviour runs on the
 * real kube-apiserver (cluster_apiserver.h). The cases that still use this fake, one a line:
 *   test_kube_client.c test_watch_gone_http: HTTP 410 on a watch (watch410 "http")
 *   test_kube_client.c test_watch_dropped: a watch cut without its end (drop)
 *   test_kube_client.c test_retry_after: 429 with Retry-After (fail)
 *   test_kube_cache.c test_bookmarks: BOOKMARKs every 0.2 s that other kinds move; compact
 *   test_kube_cache.c test_compaction_event: compaction under held watches: ERROR 410
 *   test_kube_cache.c test_compaction_http: the same as HTTP 410
 *   test_kube_cache.c test_expire_mid_stream: ERROR 410 on live watches (expire)
 *   test_kube_cache.c test_dropped_watch: every watch cut (drop)
 *   test_kube_cache.c test_failures_backoff: injected 500s (fail)
 *   test_kube_cache.c test_not_found_later_keeps_objects: injected 404s after the first list
 *   test_kube_cache.c test_token_rotation: a token revoked mid-run (token)
 *   test_kube_cache.c test_shutdown_held_and_gone: watch requests held (pause); server gone
 *   test_dm_publish.c test_api_errors: injected 500s (fail); the patch Content-Types
 * tests/peers/fake_apiserver.py's header says why at more length.
 *
 * The interpreter, the fake and the certificate script come from the environment the meson test
 * sets (TSR_PYTHON, TSR_FAKE_APISERVER, TSR_GEN_CERTS). Every helper fails the running cmocka
 * test with a message when something does not work.
 *
 * Ownership: a struct fake_apiserver owns its process (ended by closing its stdin), its
 * directory (removed on stop) and its control client; stop releases all three. JSON results are
 * new references (json_decref).
 */
#ifndef TSR_TESTS_FAKE_APISERVER_H
#define TSR_TESTS_FAKE_APISERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

struct tsr_kube_client;

/* The token the control client sends; every fake accepts it besides the test's tokens. */
#define FAKE_CTL_TOKEN "ctl-token"

struct fake_apiserver {
        pid_t pid;
        int stdin_fd; /* write end of the fake's stdin; closing it ends the fake */
        int port;
        char dir[256]; /* certificates, token file, kubeconfig */
        char url[64];  /* https://127.0.0.1:PORT */
        struct tsr_kube_client *ctl;
};

/* Makes a directory and the certificates in it (once per test group; fake_start reuses them). */
void fake_certs(char *dir, size_t size);

/*
 * Starts the fake over the certificates in dir (not removed by stop when keep_dir), accepting
 * token (and FAKE_CTL_TOKEN), with bookmarks every bookmark_s seconds (0: none) and extra flags
 * (NULL-terminated list, may be NULL).
 */
void fake_start(struct fake_apiserver *f, const char *dir, const char *token, double bookmark_s,
                const char *const *extra);

/* Ends the fake (closes its stdin, waits, kills it after 5 s). Idempotent. */
void fake_stop(struct fake_apiserver *f);

/* Removes dir and everything in it (flat). */
void fake_remove_dir(const char *dir);

/* POSTs body (JSON text, NULL: "{}") to /_test/what and returns the reply. */
json_t *fake_control(struct fake_apiserver *f, const char *what, const char *body);

/* GET /_test/stats. */
json_t *fake_stats(struct fake_apiserver *f);

/* An integer field of the stats ("rv", "compacted", "dropped", ...). */
long fake_stat(struct fake_apiserver *f, const char *field);

/* Writes text to dir/name atomically (a temporary file renamed over it); returns the path. */
const char *fake_write_file(const char *dir, const char *name, const char *text);

/*
 * Writes dir/name: a kubeconfig for the fake with certificate-authority (file) and tokenFile
 * (token_file, absolute, may be NULL) or token (may be NULL). Returns the path (static storage).
 */
const char *fake_kubeconfig(struct fake_apiserver *f, const char *name, const char *token_file,
                            const char *token);

/* Creates an object (JSON text) at the collection path; returns it as the server stored it. */
json_t *fake_create(struct fake_apiserver *f, const char *collection, const char *object);

/* Merge-patches the object at path with patch (JSON text); returns it after the patch. */
json_t *fake_patch(struct fake_apiserver *f, const char *path, const char *patch);

/* Deletes the object at path. */
void fake_delete(struct fake_apiserver *f, const char *path);

#endif
