/*
 * test_kube_config.c - kube/config and kube/kubeconfig: where the API server is and how to
 * authenticate (spec/kubernetes-contracts.md §4.1).
 *
 * kubeconfig: the current context or a named one; its cluster's server (a missing scheme means
 * https, trailing slashes go), CA file or data, insecure-skip-tls-verify, tls-server-name; its
 * user's token, tokenFile, client certificate and key as files or data; the context's namespace
 * (else "default"); relative paths resolved against the kubeconfig's directory; *-data winning
 * over files; JSON kubeconfigs; unknown fields ignored. Every refusal, each with its code and a
 * message naming what is missing or wrong (and the line, for YAML errors): an empty file, YAML
 * syntax, no current-context, a missing context / cluster / user, no server, bad base64, a CA
 * with insecure-skip-tls-verify, a certificate without its key, exec / auth-provider / basic-auth
 * users, anchors and aliases, duplicate keys, wrong shapes. A failed load leaves *cfg as it was;
 * loading from a file prefixes messages with the path (and line).
 *
 * in-cluster: the server from KUBERNETES_SERVICE_HOST/PORT (IPv6 bracketed), token file, CA and
 * namespace from a service-account directory the test makes; the upstream "must be defined"
 * message without the variables; a missing token or CA named by path; an empty token refused; no
 * namespace file means "default". tsr_kube_config_load's order: in-cluster first, then the first
 * existing file of $KUBECONFIG, then ~/.kube/config. tsr_kube_config_copy is deep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "kube/config.h"
#include "kube/kubeconfig.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "-----BEGIN CERTIFICATE-----\nCA\n" and friends, base64. */
#define CA_B64   "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg=="
#define CA_PEM   "-----BEGIN CERTIFICATE-----\nCA\n"
#define CERT_B64 "Y2VydC1ieXRlcw=="
#define KEY_B64  "a2V5LWJ5dGVz"

static const char full[] = "apiVersion: v1\n"
                           "kind: Config\n"
                           "preferences: {}\n"
                           "current-context: dev\n"
                           "clusters:\n"
                           "- name: prod-cluster\n"
                           "  cluster:\n"
                           "    server: https://prod.example:6443/\n"
                           "    certificate-authority-data: " CA_B64 "\n"
                           "    certificate-authority: ignored-when-data.crt\n"
                           "- name: dev-cluster\n"
                           "  cluster:\n"
                           "    server: 10.0.0.1:6443\n"
                           "    certificate-authority: certs/ca.crt\n"
                           "    tls-server-name: kubernetes.default\n"
                           "    extensions: [{name: x, extension: {a: 1}}]\n"
                           "contexts:\n"
                           "- name: dev\n"
                           "  context: {cluster: dev-cluster, user: dev-user, namespace: team-a}\n"
                           "- name: prod\n"
                           "  context:\n"
                           "    cluster: prod-cluster\n"
                           "    user: prod-user\n"
                           "users:\n"
                           "- name: dev-user\n"
                           "  user:\n"
                           "    token: abc.def\n"
                           "    tokenFile: tokens/dev\n"
                           "- name: prod-user\n"
                           "  user:\n"
                           "    client-certificate-data: " CERT_B64 "\n"
                           "    client-key-data: " KEY_B64 "\n"
                           "    client-certificate: /abs/ignored.crt\n";

static int parse(struct tsr_kube_config *cfg, const char *text, const char *context,
                 struct tsr_diag *diag)
{
        tsr_diag_clear(diag);
        return tsr_kube_kubeconfig_parse(cfg, text, strlen(text), "/home/me/.kube", context, diag);
}

static void test_current_context(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_diag diag;

        (void)state;
        tsr_kube_config_init(&cfg);
        if (parse(&cfg, full, NULL, &diag))
                fail_msg("%s", diag.msg);
        assert_string_equal(cfg.server, "https://10.0.0.1:6443");
        assert_string_equal(cfg.ca_file, "/home/me/.kube/certs/ca.crt");
        assert_null(cfg.ca_pem);
        assert_string_equal(cfg.tls_server_name, "kubernetes.default");
        assert_string_equal(cfg.token, "abc.def");
        assert_string_equal(cfg.token_file, "/home/me/.kube/tokens/dev");
        assert_string_equal(cfg.ns, "team-a");
        assert_false(cfg.insecure_skip_tls_verify);
        assert_null(cfg.cert_file);
        assert_null(cfg.cert_pem);
        tsr_kube_config_release(&cfg);
        assert_null(cfg.server);
}

static void test_named_context_data(void **state)
{
        struct tsr_kube_config cfg, copy;
        struct tsr_diag diag;

        (void)state;
        tsr_kube_config_init(&cfg);
        if (parse(&cfg, full, "prod", &diag))
                fail_msg("%s", diag.msg);
        assert_string_equal(cfg.server, "https://prod.example:6443");
        assert_null(cfg.ca_file);
        assert_int_equal(cfg.ca_pem_len, strlen(CA_PEM));
        assert_memory_equal(cfg.ca_pem, CA_PEM, strlen(CA_PEM));
        assert_int_equal(cfg.cert_pem_len, 10);
        assert_memory_equal(cfg.cert_pem, "cert-bytes", 10);
        assert_null(cfg.cert_file);
        assert_int_equal(cfg.key_pem_len, 9);
        assert_memory_equal(cfg.key_pem, "key-bytes", 9);
        assert_null(cfg.token);
        assert_null(cfg.token_file);
        assert_string_equal(cfg.ns, "default");

        tsr_kube_config_init(&copy);
        assert_int_equal(tsr_kube_config_copy(&copy, &cfg), 0);
        tsr_kube_config_release(&cfg);
        assert_string_equal(copy.server, "https://prod.example:6443");
        assert_memory_equal(copy.key_pem, "key-bytes", 9);
        assert_int_equal(copy.key_pem_len, 9);
        tsr_kube_config_release(&copy);
}

static void test_json_and_insecure(void **state)
{
        static const char json[] =
            "{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"current-context\":\"c\","
            "\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":\"http://127.0.0.1:8001\","
            "\"insecure-skip-tls-verify\":true}}],"
            "\"contexts\":[{\"name\":\"c\",\"context\":{\"cluster\":\"k\"}}],\"users\":[]}";
        struct tsr_kube_config cfg;
        struct tsr_diag diag;

        (void)state;
        tsr_kube_config_init(&cfg);
        if (parse(&cfg, json, NULL, &diag))
                fail_msg("%s", diag.msg);
        assert_string_equal(cfg.server, "http://127.0.0.1:8001");
        assert_true(cfg.insecure_skip_tls_verify);
        assert_null(cfg.token);
        assert_null(cfg.token_file);
        tsr_kube_config_release(&cfg);
}

static void expect_refusal(const char *text, const char *context, int code, const char *msg,
                           unsigned line)
{
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        int rc;

        tsr_kube_config_init(&cfg);
        cfg.server = strdup("https://kept");
        rc = parse(&cfg, text, context, &diag);
        if (rc != code || !strstr(diag.msg, msg))
                fail_msg("got %s \"%s\", want %s \"%s\" for:\n%s", tsr_err_name(rc), diag.msg,
                         tsr_err_name(code), msg, text);
        if (line && diag.line != line)
                fail_msg("\"%s\" at line %u, want %u", diag.msg, diag.line, line);
        assert_string_equal(cfg.server, "https://kept");
        tsr_kube_config_release(&cfg);
}

#define HEAD                                                                                       \
        "current-context: c\n"                                                                     \
        "contexts:\n"                                                                              \
        "- name: c\n"                                                                              \
        "  context: {cluster: k, user: u}\n"

static void test_refusals(void **state)
{
        (void)state;
        expect_refusal("", NULL, TSR_EPARSE, "the file is empty", 0);
        expect_refusal("---\n", NULL, TSR_EPARSE, "the file is empty", 0);
        expect_refusal("- a\n- b\n", NULL, TSR_EPARSE, "the document must be a mapping", 1);
        expect_refusal("a: b\nc: [d\n", NULL, TSR_EPARSE, "kubeconfig: YAML:", 3);
        expect_refusal("kind: Config\n", NULL, TSR_ENOTFOUND, "current-context is not set", 0);
        expect_refusal(full, "staging", TSR_ENOTFOUND, "context \"staging\" does not exist", 0);
        expect_refusal(HEAD "clusters: []\n", NULL, TSR_ENOTFOUND,
                       "cluster \"k\" (of context \"c\") does not exist", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x}\n", NULL,
                       TSR_ENOTFOUND, "user \"u\" (of context \"c\") does not exist", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {}\n", NULL, TSR_EINVAL,
                       "cluster \"k\" has no server", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n", NULL, TSR_EINVAL,
                       "cluster \"k\" has no server", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: ftp://x}\n", NULL,
                       TSR_EINVAL, "is neither http:// nor https://", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://}\n", NULL,
                       TSR_EINVAL, "server \"https://\" has no host", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: '///'}\n", NULL, TSR_EINVAL,
                       "has no host", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x, "
                            "certificate-authority-data: '@@@'}\n",
                       NULL, TSR_EINVAL,
                       "cluster \"k\" certificate-authority-data is not valid base64", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x, "
                            "certificate-authority: ca.crt, insecure-skip-tls-verify: true}\n",
                       NULL, TSR_EINVAL,
                       "specifying a root certificates file with the insecure flag is not "
                       "allowed",
                       0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x, "
                            "insecure-skip-tls-verify: maybe}\n",
                       NULL, TSR_EPARSE, "insecure-skip-tls-verify must be true or false", 7);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x}\n"
                            "users:\n- name: u\n  user:\n    exec:\n      command: gke-auth\n",
                       NULL, TSR_EINVAL,
                       "user \"u\" authenticates with exec credential plugins (exec), which "
                       "tessera does not support",
                       12);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x}\n"
                            "users:\n- name: u\n  user:\n    auth-provider: {name: gcp}\n",
                       NULL, TSR_EINVAL, "auth providers (auth-provider)", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x}\n"
                            "users:\n- name: u\n  user: {username: a, password: b}\n",
                       NULL, TSR_EINVAL, "basic authentication (username)", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x}\n"
                            "users:\n- name: u\n  user: {client-certificate: c.crt}\n",
                       NULL, TSR_EINVAL,
                       "user \"u\": client-certificate and client-key must both be specified", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x}\n"
                            "users:\n- name: u\n  user: {client-key-data: " KEY_B64 "}\n",
                       NULL, TSR_EINVAL, "must both be specified", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x}\n"
                            "users:\n- name: u\n  user: {client-certificate-data: '" CERT_B64
                            "x', client-key-data: " KEY_B64 "}\n",
                       NULL, TSR_EINVAL, "client-certificate-data is not valid base64", 0);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: &c {server: https://x}\n", NULL,
                       TSR_EPARSE, "YAML anchors are not supported", 7);
        expect_refusal("base: &b {server: https://x}\n", NULL, TSR_EPARSE,
                       "YAML anchors are not supported", 1);
        expect_refusal("current-context: c\ncurrent-context: d\n", NULL, TSR_EPARSE,
                       "duplicate key \"current-context\"", 2);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: https://x, server: "
                            "https://y}\n",
                       NULL, TSR_EPARSE, "duplicate key \"server\"", 7);
        expect_refusal(HEAD "clusters: {k: 1}\n", NULL, TSR_EPARSE, "clusters must be a list", 5);
        expect_refusal(HEAD "clusters:\n- just-a-string\n", NULL, TSR_EPARSE,
                       "every entry of clusters must be a mapping", 6);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: [a]\n", NULL, TSR_EPARSE,
                       "clusters \"k\": cluster must be a mapping", 7);
        expect_refusal(HEAD "clusters:\n- name: k\n  cluster: {server: [https://x]}\n", NULL,
                       TSR_EPARSE, "cluster \"k\".server must be a string", 7);
        expect_refusal("? [a]\n: b\n", NULL, TSR_EPARSE, "a mapping key must be a scalar", 1);
        expect_refusal("current-context: c\ncontexts:\n- name: c\n", NULL, TSR_ENOTFOUND,
                       "context \"c\" names no cluster", 0);
}

static void test_depth_and_size(void **state)
{
        char deep[512];
        size_t n = 0;

        (void)state;
        for (int i = 0; i < TSR_KUBE_KUBECONFIG_DEPTH_MAX + 1; i++)
                deep[n++] = '[';
        deep[n] = '\0';
        expect_refusal(deep, NULL, TSR_EPARSE, "nested deeper than", 1);
}

/* ---- files -------------------------------------------------------------------------------- */

static char tmpdir[64];

static const char *write_file(const char *name, const char *text)
{
        static char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        return path;
}

static int setup_dir(void **state)
{
        (void)state;
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/tsr-kubecfg-XXXXXX");
        assert_non_null(mkdtemp(tmpdir));
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
        unsetenv("KUBECONFIG");
        return 0;
}

static int teardown_dir(void **state)
{
        static const char *const names[] = {"token", "ca.crt", "namespace", "kc", "bad"};
        char path[256];

        (void)state;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
                unlink(path);
        }
        snprintf(path, sizeof(path), "%s/.kube/config", tmpdir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/.kube", tmpdir);
        rmdir(path);
        rmdir(tmpdir);
        return 0;
}

static void test_load_file(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        char want[320], path[256];

        (void)state;
        tsr_kube_config_init(&cfg);
        snprintf(path, sizeof(path), "%s", write_file("kc", full));
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_kubeconfig_load(&cfg, path, NULL, &diag), 0);
        snprintf(want, sizeof(want), "%s/certs/ca.crt", tmpdir);
        assert_string_equal(cfg.ca_file, want);
        tsr_kube_config_release(&cfg);

        snprintf(path, sizeof(path), "%s", write_file("bad", "a: b\nc: [d\n"));
        assert_int_equal(tsr_kube_kubeconfig_load(&cfg, path, NULL, &diag), TSR_EPARSE);
        snprintf(want, sizeof(want), "%s:3: kubeconfig: YAML:", path);
        assert_non_null(strstr(diag.msg, want));

        snprintf(path, sizeof(path), "%s/missing", tmpdir);
        assert_int_equal(tsr_kube_kubeconfig_load(&cfg, path, NULL, &diag), TSR_ENOTFOUND);
        assert_non_null(strstr(diag.msg, "missing: No such file or directory"));
        assert_null(cfg.server);
}

static void test_in_cluster(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        char want[320];

        (void)state;
        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        assert_int_equal(tsr_kube_config_in_cluster(&cfg, tmpdir, &diag), TSR_ENOTFOUND);
        assert_string_equal(diag.msg, "unable to load in-cluster configuration, "
                                      "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
                                      "defined");
        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "", 1);
        assert_int_equal(tsr_kube_config_in_cluster(&cfg, tmpdir, &diag), TSR_ENOTFOUND);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);

        assert_int_equal(tsr_kube_config_in_cluster(&cfg, tmpdir, &diag), TSR_ENOTFOUND);
        snprintf(want, sizeof(want), "%s/token: No such file or directory", tmpdir);
        assert_string_equal(diag.msg, want);

        write_file("token", "\n");
        assert_int_equal(tsr_kube_config_in_cluster(&cfg, tmpdir, &diag), TSR_EINVAL);
        assert_non_null(strstr(diag.msg, "is empty"));

        write_file("token", "eyJhbGciOi.token\n");
        assert_int_equal(tsr_kube_config_in_cluster(&cfg, tmpdir, &diag), TSR_ENOTFOUND);
        snprintf(want, sizeof(want), "in-cluster CA %s/ca.crt: No such file", tmpdir);
        assert_non_null(strstr(diag.msg, want));
        assert_null(cfg.server);

        write_file("ca.crt", CA_PEM);
        assert_int_equal(tsr_kube_config_in_cluster(&cfg, tmpdir, &diag), 0);
        assert_string_equal(cfg.server, "https://10.96.0.1:443");
        snprintf(want, sizeof(want), "%s/token", tmpdir);
        assert_string_equal(cfg.token_file, want);
        assert_null(cfg.token);
        snprintf(want, sizeof(want), "%s/ca.crt", tmpdir);
        assert_string_equal(cfg.ca_file, want);
        assert_string_equal(cfg.ns, "default");

        write_file("namespace", "gpustack-system\n");
        setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
        assert_int_equal(tsr_kube_config_in_cluster(&cfg, tmpdir, &diag), 0);
        assert_string_equal(cfg.server, "https://[fd00::1]:443");
        assert_string_equal(cfg.ns, "gpustack-system");
        tsr_kube_config_release(&cfg);
}

static void test_load_order(void **state)
{
        struct tsr_kube_config cfg;
        struct tsr_diag diag;
        char list[512], home_kube[256];
        const char *kc;

        (void)state;
        tsr_kube_config_init(&cfg);
        tsr_diag_clear(&diag);
        /* In a cluster (test_in_cluster left the variables set), in-cluster wins. */
        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        setenv("KUBECONFIG", "/nonexistent", 1);
        /* The default service-account directory does not exist here (unless in a Pod). */
        if (access(TSR_KUBE_SA_DIR "/token", F_OK) != 0) {
                assert_int_not_equal(tsr_kube_config_load(&cfg, NULL, &diag), 0);
                assert_non_null(strstr(diag.msg, TSR_KUBE_SA_DIR));
        }
        unsetenv("KUBERNETES_SERVICE_HOST");

        kc = write_file("kc", full);
        snprintf(list, sizeof(list), "/nonexistent/a::%s", kc);
        setenv("KUBECONFIG", list, 1);
        assert_int_equal(tsr_kube_config_load(&cfg, "prod", &diag), 0);
        assert_string_equal(cfg.server, "https://prod.example:6443");

        setenv("KUBECONFIG", "/nonexistent/a:/nonexistent/b", 1);
        assert_int_equal(tsr_kube_config_load(&cfg, NULL, &diag), TSR_ENOTFOUND);
        assert_non_null(strstr(diag.msg, "no file named by KUBECONFIG"));
        assert_string_equal(cfg.server, "https://prod.example:6443");

        unsetenv("KUBECONFIG");
        setenv("HOME", tmpdir, 1);
        assert_int_equal(tsr_kube_config_load(&cfg, NULL, &diag), TSR_ENOTFOUND);
        assert_non_null(strstr(diag.msg, "/.kube/config does not exist"));
        snprintf(home_kube, sizeof(home_kube), "%s/.kube", tmpdir);
        assert_int_equal(mkdir(home_kube, 0700), 0);
        write_file(".kube/config", full);
        assert_int_equal(tsr_kube_config_load(&cfg, NULL, &diag), 0);
        assert_string_equal(cfg.server, "https://10.0.0.1:6443");
        tsr_kube_config_release(&cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_current_context),   cmocka_unit_test(test_named_context_data),
            cmocka_unit_test(test_json_and_insecure), cmocka_unit_test(test_refusals),
            cmocka_unit_test(test_depth_and_size),    cmocka_unit_test(test_load_file),
            cmocka_unit_test(test_in_cluster),        cmocka_unit_test(test_load_order),
        };

        return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
