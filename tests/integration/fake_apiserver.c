/*
 * fake_apiserver.c - posix_spawn of the fake with pipes on stdin (its lifeline) and stdout (the
 * "READY <port>" line), and a tsr_kube_client for everything else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_apiserver.h"

#include "base/diag.h"
#include "base/err.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube_ctl.h"
#include "peer_process.h"
#include "support/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *env_or_fail(const char *name)
{
        const char *v = getenv(name);

        if (!v || !*v)
                fail_msg("%s is not set (run this test through meson test)", name);
        return v;
}

void fake_certs(char *dir, size_t size)
{
        char script[512], sh[] = "sh";
        char *argv[] = {sh, script, dir, NULL};
        pid_t pid;
        int st;

        snprintf(script, sizeof(script), "%s", env_or_fail("TSR_GEN_CERTS"));
        snprintf(dir, size, "/tmp/tsr-kube-XXXXXX");
        if (!mkdtemp(dir))
                fail_msg("mkdtemp: %s", strerror(errno));
        if (posix_spawnp(&pid, "sh", NULL, NULL, argv, environ))
                fail_msg("cannot run %s", script);
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                fail_msg("%s %s failed (see %s/gen_certs.log)", script, dir, dir);
}

void fake_remove_dir(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        char path[512];

        if (!d)
                return;
        while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                unlink(path);
        }
        closedir(d);
        rmdir(dir);
}

const char *fake_write_file(const char *dir, const char *name, const char *text)
{
        static char path[512];
        char tmp[520];
        FILE *fp;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        fp = fopen(tmp, "w");
        if (!fp || fputs(text, fp) < 0 || fclose(fp))
                fail_msg("cannot write %s", tmp);
        if (rename(tmp, path))
                fail_msg("cannot rename %s: %s", tmp, strerror(errno));
        return path;
}

void fake_start(struct fake_apiserver *f, const char *dir, const char *token, double bookmark_s,
                const char *const *extra)
{
        const char *python = env_or_fail("TSR_PYTHON");
        const char *script = env_or_fail("TSR_FAKE_APISERVER");
        char cert[300], key[300], ca[300], bm[32], line[128];
        const char *args[32];
        int stdout_fd, n = 0;
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        size_t got = 0;
        int rc;

        memset(f, 0, sizeof(*f));
        f->stdin_fd = -1;
        snprintf(f->dir, sizeof(f->dir), "%s", dir);
        snprintf(cert, sizeof(cert), "%s/server.crt", dir);
        snprintf(key, sizeof(key), "%s/server.key", dir);
        snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
        snprintf(bm, sizeof(bm), "%g", bookmark_s);
        args[n++] = python;
        args[n++] = script;
        args[n++] = "--cert";
        args[n++] = cert;
        args[n++] = "--key";
        args[n++] = key;
        args[n++] = "--client-ca";
        args[n++] = ca;
        args[n++] = "--token";
        args[n++] = FAKE_CTL_TOKEN;
        if (token) {
                args[n++] = "--token";
                args[n++] = token;
        }
        args[n++] = "--bookmark-interval";
        args[n++] = bm;
        for (; extra && *extra && n < 30; extra++)
                args[n++] = *extra;
        args[n] = NULL;
        peer_spawn(args, &f->pid, &f->stdin_fd, &stdout_fd);

        /* Wait for "READY <port>\n" (10 s). */
        while (got < sizeof(line) - 1 && !memchr(line, '\n', got)) {
                struct pollfd p = {stdout_fd, POLLIN, 0};
                ssize_t r;

                if (poll(&p, 1, 10000) <= 0)
                        fail_msg("the fake API server did not start within 10 s");
                r = read(stdout_fd, line + got, sizeof(line) - 1 - got);
                if (r <= 0)
                        fail_msg("the fake API server exited before it was ready");
                got += (size_t)r;
                line[got] = '\0';
        }
        close(stdout_fd);
        if (sscanf(line, "READY %d", &f->port) != 1)
                fail_msg("unexpected first line from the fake: %s", line);
        snprintf(f->url, sizeof(f->url), "https://127.0.0.1:%d", f->port);

        tsr_kube_config_init(&cfg);
        cfg.server = f->url;
        cfg.ca_file = ca;
        cfg.token = FAKE_CTL_TOKEN;
        tsr_diag_clear(&diag);
        rc = tsr_kube_client_new(&cfg, NULL, &f->ctl, &diag);
        if (rc)
                fail_msg("control client: %s", diag.msg);
}

void fake_stop(struct fake_apiserver *f)
{
        int st;

        tsr_kube_client_free(f->ctl);
        f->ctl = NULL;
        if (f->stdin_fd >= 0) {
                close(f->stdin_fd);
                f->stdin_fd = -1;
        }
        if (f->pid > 0) {
                for (int i = 0; i < 500; i++) {
                        if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
                                f->pid = 0;
                                return;
                        }
                        sleep_ms(10);
                }
                kill(f->pid, SIGKILL);
                waitpid(f->pid, &st, 0);
                f->pid = 0;
        }
}

static json_t *request(struct fake_apiserver *f, const char *method, const char *path,
                       const char *body)
{
        return kube_ctl_request(f->ctl, method, path, body);
}

json_t *fake_control(struct fake_apiserver *f, const char *what, const char *body)
{
        char path[128];

        snprintf(path, sizeof(path), "/_test/%s", what);
        return request(f, "POST", path, body ? body : "{}");
}

json_t *fake_stats(struct fake_apiserver *f)
{
        return request(f, "GET", "/_test/stats", NULL);
}

long fake_stat(struct fake_apiserver *f, const char *field)
{
        json_t *s = fake_stats(f);
        long v = (long)json_integer_value(json_object_get(s, field));

        json_decref(s);
        return v;
}

const char *fake_kubeconfig(struct fake_apiserver *f, const char *name, const char *token_file,
                            const char *token)
{
        static char path[512];
        char text[2048];
        int n;

        n = snprintf(text, sizeof(text),
                     "apiVersion: v1\n"
                     "kind: Config\n"
                     "current-context: fake\n"
                     "clusters:\n"
                     "- name: fake-cluster\n"
                     "  cluster:\n"
                     "    server: %s\n"
                     "    certificate-authority: ca.crt\n"
                     "contexts:\n"
                     "- name: fake\n"
                     "  context:\n"
                     "    cluster: fake-cluster\n"
                     "    user: tester\n"
                     "    namespace: team-a\n"
                     "users:\n"
                     "- name: tester\n"
                     "  user:\n",
                     f->url);
        if (token_file)
                n +=
                    snprintf(text + n, sizeof(text) - (size_t)n, "    tokenFile: %s\n", token_file);
        if (token)
                snprintf(text + n, sizeof(text) - (size_t)n, "    token: %s\n", token);
        snprintf(path, sizeof(path), "%s", fake_write_file(f->dir, name, text));
        return path;
}

json_t *fake_create(struct fake_apiserver *f, const char *collection, const char *object)
{
        return request(f, "POST", collection, object);
}

json_t *fake_patch(struct fake_apiserver *f, const char *path, const char *patch)
{
        return kube_ctl_merge_patch(f->ctl, path, patch);
}

void fake_delete(struct fake_apiserver *f, const char *path)
{
        json_decref(request(f, "DELETE", path, NULL));
}
