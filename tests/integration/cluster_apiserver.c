/*
 * cluster_apiserver.c - `controlplane.py serve` (peer_process.c) with pipes on stdin (its lifeline,
 * and the "fail" line) and stdout (the JSON ready line, parsed with jansson), a tsr_kube_client
 * for the REST calls, and libcurl for /metrics (Prometheus text, not JSON).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cluster_apiserver.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube_ctl.h"
#include "peer_process.h"
#include "support/clock.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 100000L /* under the tests' 120 s, to fail with a message */
#define READY_LINE_MAX   (64 * 1024)
#define STOP_WAIT_MS     60000L

static const char *env_or_fail(const char *name)
{
        const char *v = getenv(name);

        if (!v || !*v)
                fail_msg("%s is not set (run this test through meson test)", name);
        return v;
}

static const char *ready_str(struct cluster_apiserver *c, const char *field)
{
        const char *v = json_string_value(json_object_get(c->ready, field));

        if (!v)
                fail_msg("controlplane.py serve: the ready line has no \"%s\"", field);
        return v;
}

/* Reads serve's stdout up to the first newline; returns the line (malloc'd). */
static char *read_line(struct cluster_apiserver *c)
{
        long deadline = now_ms() + READY_TIMEOUT_MS;
        size_t got = 0;
        char *line = malloc(READY_LINE_MAX);

        if (!line)
                fail_msg("out of memory");
        line[0] = '\0';
        while (!memchr(line, '\n', got)) {
                struct pollfd p = {c->stdout_fd, POLLIN, 0};
                long left = deadline - now_ms();
                ssize_t r;

                if (got >= READY_LINE_MAX - 1)
                        fail_msg("controlplane.py serve: the ready line is over %d bytes",
                                 READY_LINE_MAX);
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        fail_msg("the control plane was not ready within %ld s",
                                 READY_TIMEOUT_MS / 1000);
                r = read(c->stdout_fd, line + got, READY_LINE_MAX - 1 - got);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        fail_msg("controlplane.py serve exited before it was ready (its stderr "
                                 "is above; are the peers built? tools/peers.sh build)");
                got += (size_t)r;
                line[got] = '\0';
        }
        *strchr(line, '\n') = '\0';
        return line;
}

void cluster_start(struct cluster_apiserver *c, const struct cluster_opts *opts)
{
        static const struct cluster_opts none;
        const char *python, *script;
        const char *args[48];
        int n = 0, rc;
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        json_error_t jerr;
        const char *event;
        char *line;

        memset(c, 0, sizeof(*c));
        c->stdin_fd = c->stdout_fd = -1;
        python = env_or_fail("TSR_PYTHON");
        script = env_or_fail("TSR_CONTROLPLANE");
        if (!opts)
                opts = &none;
        args[n++] = python;
        args[n++] = script;
        args[n++] = "serve";
        args[n++] = "--no-kueue";
        args[n++] = "--no-scheduler";
        args[n++] = "--no-controller-manager";
        args[n++] = "--suite";
        args[n++] = opts->suite ? opts->suite : "c-test";
        if (opts->crds) {
                args[n++] = "--crds";
                args[n++] = env_or_fail("TSR_CRDS");
        }
        if (opts->kueue_crds)
                args[n++] = "--kueue-crds";
        for (const char *const *u = opts->users; u && *u && n < 44; u++) {
                args[n++] = "--user";
                args[n++] = *u;
        }
        args[n] = NULL;
        peer_spawn(args, &c->pid, &c->stdin_fd, &c->stdout_fd);

        line = read_line(c);
        c->ready = json_loads(line, 0, &jerr);
        if (!c->ready)
                fail_msg("controlplane.py serve: not JSON (%s): %.300s", jerr.text, line);
        event = json_string_value(json_object_get(c->ready, "event"));
        if (!event || strcmp(event, "ready"))
                fail_msg("the control plane did not start: %s", line);
        free(line);
        c->url = ready_str(c, "url");
        c->ca = ready_str(c, "ca");
        c->kubeconfig = ready_str(c, "kubeconfig");
        c->token = ready_str(c, "token");
        c->dir = ready_str(c, "dir");
        c->client_cert = ready_str(c, "client_cert");
        c->client_key = ready_str(c, "client_key");

        tsr_kube_config_init(&cfg);
        cfg.server = strdup(c->url);
        cfg.ca_file = strdup(c->ca);
        cfg.token = strdup(c->token);
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_new(&cfg, NULL, &c->ctl, &diag);
        tsr_kube_config_release(&cfg);
        if (rc)
                fail_msg("control client: %s", diag.msg);
}

void cluster_stop(struct cluster_apiserver *c, bool failed)
{
        int st;

        tsr_kube_client_free(c->ctl);
        c->ctl = NULL;
        if (c->stdin_fd >= 0) {
                signal(SIGPIPE, SIG_IGN); /* serve may be gone already */
                if (failed && write(c->stdin_fd, "fail\n", 5) != 5)
                        fprintf(stderr, "# cannot tell the control plane to keep its logs\n");
                close(c->stdin_fd);
                c->stdin_fd = -1;
        }
        if (c->pid > 0) {
                long deadline = now_ms() + STOP_WAIT_MS;
                bool exited = false;

                while (!exited && now_ms() < deadline) {
                        if (waitpid(c->pid, &st, WNOHANG) == c->pid)
                                exited = true;
                        else
                                sleep_ms(50);
                }
                if (!exited) { /* SIGTERM: serve still stops its components, keeping logs */
                        kill(c->pid, SIGTERM);
                        for (int i = 0; i < 300 && !exited; i++) {
                                if (waitpid(c->pid, &st, WNOHANG) == c->pid)
                                        exited = true;
                                else
                                        sleep_ms(50);
                        }
                }
                if (!exited) {
                        kill(c->pid, SIGKILL);
                        waitpid(c->pid, &st, 0);
                }
                c->pid = 0;
        }
        if (c->stdout_fd >= 0) {
                close(c->stdout_fd);
                c->stdout_fd = -1;
        }
        json_decref(c->ready);
        c->ready = NULL;
        c->url = c->ca = c->kubeconfig = c->token = c->dir = NULL;
        c->client_cert = c->client_key = NULL;
}

const char *cluster_token(struct cluster_apiserver *c, const char *user)
{
        const char *t =
            json_string_value(json_object_get(json_object_get(c->ready, "tokens"), user));

        if (!t)
                fail_msg("the control plane has no token for user %s", user);
        return t;
}

/* ---- REST ------------------------------------------------------------------------------- */

json_t *cluster_request(struct cluster_apiserver *c, const char *method, const char *path,
                        const char *body)
{
        return kube_ctl_request(c->ctl, method, path, body);
}

json_t *cluster_create(struct cluster_apiserver *c, const char *collection, const char *object)
{
        return cluster_request(c, "POST", collection, object);
}

json_t *cluster_patch(struct cluster_apiserver *c, const char *path, const char *patch)
{
        return kube_ctl_merge_patch(c->ctl, path, patch);
}

void cluster_delete(struct cluster_apiserver *c, const char *path)
{
        char p[512];

        snprintf(p, sizeof(p), "%s%cgracePeriodSeconds=0", path, strchr(path, '?') ? '&' : '?');
        json_decref(cluster_request(c, "DELETE", p, NULL));
}

void cluster_namespace(struct cluster_apiserver *c, const char *ns)
{
        char body[256];
        struct tsr_diag diag;
        int rc;

        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}",
                 ns);
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_request(c->ctl, "POST", "/api/v1/namespaces", "application/json", body,
                                     strlen(body), NULL, NULL, NULL, &diag);
        if (rc && rc != TSR_EEXIST)
                fail_msg("namespace %s: %s: %s", ns, tsr_err_name(rc), diag.msg);
}

/* ---- files ------------------------------------------------------------------------------ */

const char *cluster_write_file(struct cluster_apiserver *c, const char *name, const char *text)
{
        static char path[512];
        char tmp[520];
        FILE *fp;

        snprintf(path, sizeof(path), "%s/%s", c->dir, name);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        fp = fopen(tmp, "w");
        if (!fp || fputs(text, fp) < 0 || fclose(fp))
                fail_msg("cannot write %s", tmp);
        if (rename(tmp, path))
                fail_msg("cannot rename %s: %s", tmp, strerror(errno));
        return path;
}

const char *cluster_kubeconfig(struct cluster_apiserver *c, const char *name,
                               const char *token_file, const char *token, const char *ns)
{
        static char path[512];
        char text[4096];
        int n;

        n = snprintf(text, sizeof(text),
                     "apiVersion: v1\n"
                     "kind: Config\n"
                     "current-context: real\n"
                     "clusters:\n"
                     "- name: real-cluster\n"
                     "  cluster:\n"
                     "    server: %s\n"
                     "    certificate-authority: %s\n"
                     "contexts:\n"
                     "- name: real\n"
                     "  context:\n"
                     "    cluster: real-cluster\n"
                     "    user: tester\n"
                     "%s%s%s"
                     "users:\n"
                     "- name: tester\n"
                     "  user:\n",
                     c->url, c->ca, ns ? "    namespace: " : "", ns ? ns : "", ns ? "\n" : "");
        if (token_file)
                n +=
                    snprintf(text + n, sizeof(text) - (size_t)n, "    tokenFile: %s\n", token_file);
        if (token)
                snprintf(text + n, sizeof(text) - (size_t)n, "    token: %s\n", token);
        snprintf(path, sizeof(path), "%s", cluster_write_file(c, name, text));
        return path;
}

/* ---- the API server's request counters -------------------------------------------------- */

static size_t on_metrics(char *data, size_t size, size_t nmemb, void *arg)
{
        struct tsr_buf *b = arg;

        return tsr_buf_add(b, data, size * nmemb) ? 0 : size * nmemb;
}

/* The value of label name in a Prometheus label set {a="x",b="y"}, into out. */
static bool label(const char *labels, const char *end, const char *name, char *out, size_t size)
{
        char pat[64];
        const char *p, *q;

        snprintf(pat, sizeof(pat), "%s=\"", name);
        for (p = labels; (p = strstr(p, pat)) && p < end; p++) {
                if (p != labels + 1 && p[-1] != ',')
                        continue;
                p += strlen(pat);
                q = strchr(p, '"');
                if (!q || q > end || (size_t)(q - p) >= size)
                        return false;
                memcpy(out, p, (size_t)(q - p));
                out[q - p] = '\0';
                return true;
        }
        return false;
}

json_t *cluster_request_counts(struct cluster_apiserver *c)
{
        static const char metric[] = "apiserver_request_total{";
        struct tsr_buf b = TSR_BUF_INIT, url = TSR_BUF_INIT, auth = TSR_BUF_INIT;
        struct curl_slist *hdrs = NULL;
        char errbuf[CURL_ERROR_SIZE] = "";
        json_t *out = json_object();
        long http = 0;
        CURLcode cc;
        CURL *h;

        b.max = (size_t)256 << 20;
        if (tsr_buf_addf(&url, "%s/metrics", c->url) ||
            tsr_buf_addf(&auth, "Authorization: Bearer %s", c->token))
                fail_msg("out of memory");
        h = curl_easy_init();
        hdrs = curl_slist_append(hdrs, auth.ptr);
        if (!h || !hdrs || !out)
                fail_msg("out of memory");
        curl_easy_setopt(h, CURLOPT_URL, url.ptr);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_metrics);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        cc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);
        tsr_buf_release(&url);
        tsr_buf_release(&auth);
        if (cc != CURLE_OK || http != 200)
                fail_msg("GET /metrics: HTTP %ld: %s", http,
                         errbuf[0] ? errbuf : curl_easy_strerror(cc));

        for (const char *line = b.ptr; line && *line;) {
                const char *eol = strchr(line, '\n'), *end;
                char verb[32], res[128], sub[64], code[8], key[256];
                long long n;

                if (!eol)
                        eol = line + strlen(line);
                if (!strncmp(line, metric, sizeof(metric) - 1) &&
                    (end = memchr(line, '}', (size_t)(eol - line))) &&
                    label(line + sizeof(metric) - 2, end, "verb", verb, sizeof(verb)) &&
                    label(line + sizeof(metric) - 2, end, "resource", res, sizeof(res)) &&
                    label(line + sizeof(metric) - 2, end, "subresource", sub, sizeof(sub)) &&
                    label(line + sizeof(metric) - 2, end, "code", code, sizeof(code)) && res[0] &&
                    strcmp(verb, "WATCH") && strcmp(verb, "WATCHLIST") &&
                    sscanf(end + 1, " %lld", &n) == 1) {
                        json_t *prev;

                        snprintf(key, sizeof(key), "%s %s%s%s %s", verb, res, sub[0] ? "/" : "",
                                 sub, code);
                        prev = json_object_get(out, key);
                        json_object_set_new(out, key,
                                            json_integer(json_integer_value(prev) + (json_int_t)n));
                }
                line = *eol ? eol + 1 : eol;
        }
        tsr_buf_release(&b);
        return out;
}

/* The resource of a counter key "VERB resource[/sub] code". */
static bool key_resource_in(const char *key, const char *const *resources)
{
        const char *r = strchr(key, ' ');
        size_t n;

        if (!resources)
                return true;
        if (!r)
                return false;
        r++;
        n = strcspn(r, "/ ");
        for (; *resources; resources++)
                if (strlen(*resources) == n && !strncmp(r, *resources, n))
                        return true;
        return false;
}

json_t *cluster_request_delta(struct cluster_apiserver *c, json_t *before,
                              const char *const *resources)
{
        json_t *now = cluster_request_counts(c), *out = json_object(), *v;
        const char *key;

        json_object_foreach(now, key, v)
        {
                json_int_t d =
                    json_integer_value(v) - json_integer_value(json_object_get(before, key));

                if (d > 0 && key_resource_in(key, resources))
                        json_object_set_new(out, key, json_integer(d));
        }
        json_decref(now);
        return out;
}

long cluster_delta_total(json_t *delta)
{
        const char *key;
        json_t *v;
        long n = 0;

        json_object_foreach(delta, key, v)
        {
                n += (long)json_integer_value(v);
        }
        return n;
}
