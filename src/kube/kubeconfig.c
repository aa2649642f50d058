/*
 * kubeconfig.c - libyaml's event stream built into a small node tree (scalars, mappings,
 * sequences, each with its source line), then walked for the chosen context, its cluster and its
 * user. The tree is a flat array of nodes linked by index (first child, next sibling); mapping
 * children alternate key and value. The tree has a node ceiling, so hostile input costs bounded
 * memory; duplicate keys are refused when a key is looked up.
 */
#include "kube/kubeconfig.h"

#include "base/diag.h"
#include "base/err.h"
#include "kube/config.h"
#include "kube/kube_int.h"

#include <nettle/base64.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define NODES_MAX 20000
#define NONE      ((size_t)-1)

enum kind { SCALAR, MAPPING, SEQUENCE };

struct node {
        enum kind kind;
        bool null; /* a plain null scalar: "", "~", "null" */
        unsigned line;
        char *text;  /* SCALAR: the value, NUL-terminated */
        size_t len;  /* SCALAR: bytes in text */
        size_t head; /* first child, or NONE */
        size_t tail; /* last child, or NONE */
        size_t next; /* next sibling, or NONE */
        size_t n;    /* children */
};

struct tree {
        struct node *v;
        size_t n, cap;
};

static void tree_release(struct tree *t)
{
        for (size_t i = 0; i < t->n; i++)
                free(t->v[i].text);
        free(t->v);
        t->v = NULL;
        t->n = t->cap = 0;
}

/* ---- YAML to tree ------------------------------------------------------------------------- */

static unsigned line_of(const yaml_event_t *ev)
{
        return (unsigned)ev->start_mark.line + 1;
}

static int node_new(struct tree *t, enum kind kind, unsigned line, size_t *out,
                    struct tsr_diag *diag)
{
        if (t->n == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 64;
                struct node *v;

                if (t->n >= NODES_MAX)
                        return tsr_diag_set_at(diag, TSR_ETOOBIG, line,
                                               "kubeconfig: more than %d YAML nodes", NODES_MAX);
                v = realloc(t->v, cap * sizeof(*v));
                if (!v)
                        return tsr_diag_set(diag, TSR_ENOMEM, "kubeconfig: out of memory");
                t->v = v;
                t->cap = cap;
        }
        memset(&t->v[t->n], 0, sizeof(t->v[t->n]));
        t->v[t->n].kind = kind;
        t->v[t->n].line = line;
        t->v[t->n].head = t->v[t->n].tail = t->v[t->n].next = NONE;
        *out = t->n++;
        return 0;
}

static int attach(struct tree *t, size_t parent, size_t child, struct tsr_diag *diag)
{
        struct node *p = &t->v[parent];

        if (p->kind == MAPPING && p->n % 2 == 0 && t->v[child].kind != SCALAR)
                return tsr_diag_set_at(diag, TSR_EPARSE, t->v[child].line,
                                       "kubeconfig: a mapping key must be a scalar");
        if (p->tail == NONE)
                p->head = child;
        else
                t->v[p->tail].next = child;
        p->tail = child;
        p->n++;
        return 0;
}

static bool is_null_scalar(const yaml_event_t *ev)
{
        const char *s = (const char *)ev->data.scalar.value;

        if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        return !strcmp(s, "") || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
               !strcmp(s, "NULL");
}

/* Builds the first document of text into t; *root is NONE for an empty stream. */
static int build(struct tree *t, const char *text, size_t len, size_t *root, struct tsr_diag *diag)
{
        size_t stack[TSR_KUBE_KUBECONFIG_DEPTH_MAX];
        size_t depth = 0;
        yaml_parser_t parser;
        yaml_event_t ev;
        bool done = false;
        int rc = 0;

        *root = NONE;
        if (!yaml_parser_initialize(&parser))
                return tsr_diag_set(diag, TSR_ENOMEM, "kubeconfig: out of memory");
        yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
        while (!done && !rc) {
                size_t id = NONE;

                if (!yaml_parser_parse(&parser, &ev)) {
                        rc = tsr_diag_set_at(diag, TSR_EPARSE,
                                             (unsigned)parser.problem_mark.line + 1,
                                             "kubeconfig: YAML: %s",
                                             parser.problem ? parser.problem : "syntax error");
                        break;
                }
                switch (ev.type) {
                case YAML_STREAM_END_EVENT:
                case YAML_DOCUMENT_END_EVENT:
                        done = true;
                        break;
                case YAML_ALIAS_EVENT:
                        rc = tsr_diag_set_at(diag, TSR_EPARSE, line_of(&ev),
                                             "kubeconfig: YAML aliases are not supported");
                        break;
                case YAML_SCALAR_EVENT:
                        if (ev.data.scalar.anchor) {
                                rc = tsr_diag_set_at(diag, TSR_EPARSE, line_of(&ev),
                                                     "kubeconfig: YAML anchors are not supported");
                                break;
                        }
                        rc = node_new(t, SCALAR, line_of(&ev), &id, diag);
                        if (rc)
                                break;
                        t->v[id].text = tsr__kube_strndup((const char *)ev.data.scalar.value,
                                                          ev.data.scalar.length);
                        if (!t->v[id].text) {
                                rc = tsr_diag_set(diag, TSR_ENOMEM, "kubeconfig: out of memory");
                                break;
                        }
                        t->v[id].len = ev.data.scalar.length;
                        t->v[id].null = is_null_scalar(&ev);
                        break;
                case YAML_MAPPING_START_EVENT:
                case YAML_SEQUENCE_START_EVENT: {
                        bool map = ev.type == YAML_MAPPING_START_EVENT;
                        const yaml_char_t *anchor =
                            map ? ev.data.mapping_start.anchor : ev.data.sequence_start.anchor;

                        if (anchor) {
                                rc = tsr_diag_set_at(diag, TSR_EPARSE, line_of(&ev),
                                                     "kubeconfig: YAML anchors are not supported");
                                break;
                        }
                        if (depth == TSR_KUBE_KUBECONFIG_DEPTH_MAX) {
                                rc = tsr_diag_set_at(diag, TSR_EPARSE, line_of(&ev),
                                                     "kubeconfig: nested deeper than %d",
                                                     TSR_KUBE_KUBECONFIG_DEPTH_MAX);
                                break;
                        }
                        rc = node_new(t, map ? MAPPING : SEQUENCE, line_of(&ev), &id, diag);
                        break;
                }
                case YAML_MAPPING_END_EVENT:
                case YAML_SEQUENCE_END_EVENT:
                        depth--;
                        break;
                default:
                        break;
                }
                if (!rc && id != NONE) {
                        if (depth > 0)
                                rc = attach(t, stack[depth - 1], id, diag);
                        else
                                *root = id;
                        if (!rc && t->v[id].kind != SCALAR)
                                stack[depth++] = id;
                }
                yaml_event_delete(&ev);
        }
        yaml_parser_delete(&parser);
        return rc;
}

/* ---- lookups ------------------------------------------------------------------------------ */

struct walk {
        struct tree *t;
        struct tsr_diag *diag;
};

/* The value of key in mapping m, or NONE; a duplicate key fails. */
static int map_get(struct walk *w, size_t m, const char *key, size_t *out)
{
        size_t found = NONE;

        *out = NONE;
        if (m == NONE || w->t->v[m].kind != MAPPING)
                return 0;
        for (size_t k = w->t->v[m].head; k != NONE; k = w->t->v[w->t->v[k].next].next) {
                size_t v = w->t->v[k].next;

                if (v == NONE)
                        break;
                if (strcmp(w->t->v[k].text, key))
                        continue;
                if (found != NONE)
                        return tsr_diag_set_at(w->diag, TSR_EPARSE, w->t->v[k].line,
                                               "kubeconfig: duplicate key \"%s\"", key);
                found = v;
        }
        if (found != NONE && w->t->v[found].kind == SCALAR && w->t->v[found].null)
                found = NONE;
        *out = found;
        return 0;
}

/* The string value of key in m, or NULL when absent or null; a non-scalar fails. */
static int map_str(struct walk *w, size_t m, const char *key, const char *where, const char **out)
{
        size_t v;
        int rc = map_get(w, m, key, &v);

        *out = NULL;
        if (rc)
                return rc;
        if (v == NONE)
                return 0;
        if (w->t->v[v].kind != SCALAR)
                return tsr_diag_set_at(w->diag, TSR_EPARSE, w->t->v[v].line,
                                       "kubeconfig: %s.%s must be a string", where, key);
        *out = w->t->v[v].text;
        return 0;
}

/*
 * The entry of sequence `list` (a key of the root) whose name is name: *found, and its `field`
 * mapping in *body (NONE when the entry has none: `- name: x` is an empty entry, not a missing
 * one). The first entry of a name wins.
 */
static int find_named(struct walk *w, size_t root, const char *list, const char *field,
                      const char *name, bool *found, size_t *body)
{
        size_t seq, v;
        int rc = map_get(w, root, list, &seq);

        *found = false;
        *body = NONE;
        if (rc)
                return rc;
        if (seq == NONE)
                return 0;
        if (w->t->v[seq].kind != SEQUENCE)
                return tsr_diag_set_at(w->diag, TSR_EPARSE, w->t->v[seq].line,
                                       "kubeconfig: %s must be a list", list);
        for (size_t e = w->t->v[seq].head; e != NONE; e = w->t->v[e].next) {
                const char *n;

                if (w->t->v[e].kind != MAPPING)
                        return tsr_diag_set_at(w->diag, TSR_EPARSE, w->t->v[e].line,
                                               "kubeconfig: every entry of %s must be a mapping",
                                               list);
                rc = map_str(w, e, "name", list, &n);
                if (rc)
                        return rc;
                if (!n || strcmp(n, name))
                        continue;
                rc = map_get(w, e, field, &v);
                if (rc)
                        return rc;
                if (v != NONE && w->t->v[v].kind != MAPPING)
                        return tsr_diag_set_at(w->diag, TSR_EPARSE, w->t->v[v].line,
                                               "kubeconfig: %s \"%s\": %s must be a mapping", list,
                                               name, field);
                *found = true;
                *body = v;
                return 0;
        }
        return 0;
}

/* ---- values ------------------------------------------------------------------------------- */

static int decode_b64(const char *src, const char *what, char **out, size_t *len,
                      struct tsr_diag *diag)
{
        struct base64_decode_ctx ctx;
        size_t n = strlen(src), dst_len = BASE64_DECODE_LENGTH(n);
        uint8_t *dst = malloc(dst_len + 1);

        if (!dst)
                return tsr_diag_set(diag, TSR_ENOMEM, "kubeconfig: out of memory");
        base64_decode_init(&ctx);
        if (!base64_decode_update(&ctx, &dst_len, dst, n, src) || !base64_decode_final(&ctx)) {
                free(dst);
                return tsr_diag_set(diag, TSR_EINVAL, "kubeconfig: %s is not valid base64", what);
        }
        dst[dst_len] = '\0';
        *out = (char *)dst;
        *len = dst_len;
        return 0;
}

static int resolve_path(const char *base_dir, const char *path, char **out, struct tsr_diag *diag)
{
        size_t n;

        if (path[0] == '/' || !base_dir || !*base_dir) {
                *out = strdup(path);
        } else {
                n = strlen(base_dir) + strlen(path) + 2;
                *out = malloc(n);
                if (*out)
                        snprintf(*out, n, "%s/%s", base_dir, path);
        }
        return *out ? 0 : tsr_diag_set(diag, TSR_ENOMEM, "kubeconfig: out of memory");
}

static int parse_bool(const char *s, bool *out)
{
        static const char *const yes[] = {"true", "True", "TRUE"};
        static const char *const no[] = {"false", "False", "FALSE"};

        for (size_t i = 0; i < 3; i++) {
                if (!strcmp(s, yes[i])) {
                        *out = true;
                        return 0;
                }
                if (!strcmp(s, no[i])) {
                        *out = false;
                        return 0;
                }
        }
        return TSR_EINVAL;
}

static int set_server(struct tsr_kube_config *c, const char *server, struct tsr_diag *diag)
{
        const char *sep = strstr(server, "://");
        size_t n = strlen(server), host;

        if (sep && strncmp(server, "https://", 8) && strncmp(server, "http://", 7))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "kubeconfig: server \"%.200s\" is neither http:// nor https://",
                                    server);
        host = sep ? (size_t)(sep - server) + 3 : 0;
        while (n > host && server[n - 1] == '/')
                n--;
        if (n == host || server[host] == '/')
                return tsr_diag_set(diag, TSR_EINVAL, "kubeconfig: server \"%.200s\" has no host",
                                    server);
        if (sep) {
                c->server = tsr__kube_strndup(server, n);
        } else {
                c->server = malloc(n + 9);
                if (c->server) {
                        memcpy(c->server, "https://", 8);
                        memcpy(c->server + 8, server, n);
                        c->server[n + 8] = '\0';
                }
        }
        return c->server ? 0 : tsr_diag_set(diag, TSR_ENOMEM, "kubeconfig: out of memory");
}

/* ---- the walk ----------------------------------------------------------------------------- */

#define STR(m, key, where, dst)                                                                    \
        do {                                                                                       \
                rc = map_str(&w, (m), (key), (where), (dst));                                      \
                if (rc)                                                                            \
                        goto out;                                                                  \
        } while (0)

static bool present(const char *s)
{
        return s && *s;
}

int tsr_kube_kubeconfig_parse(struct tsr_kube_config *cfg, const char *text, size_t len,
                              const char *base_dir, const char *context, struct tsr_diag *diag)
{
        struct tree t = {0};
        struct walk w = {&t, diag};
        struct tsr_kube_config c;
        size_t root, ctx, cluster, user, v;
        const char *cluster_name, *user_name, *s, *ns;
        const char *ca, *ca_data, *cert, *cert_data, *key, *key_data, *token, *token_file;
        char where[320];
        bool found;
        int rc;

        tsr_kube_config_init(&c);
        rc = build(&t, text, len, &root, diag);
        if (rc)
                goto out;
        if (root == NONE || (t.v[root].kind == SCALAR && t.v[root].null)) {
                rc = tsr_diag_set(diag, TSR_EPARSE, "kubeconfig: the file is empty");
                goto out;
        }
        if (t.v[root].kind != MAPPING) {
                rc = tsr_diag_set_at(diag, TSR_EPARSE, t.v[root].line,
                                     "kubeconfig: the document must be a mapping");
                goto out;
        }
        if (!context) {
                STR(root, "current-context", "kubeconfig", &context);
                if (!present(context)) {
                        rc = tsr_diag_set(diag, TSR_ENOTFOUND,
                                          "kubeconfig: current-context is not set and no context "
                                          "was named");
                        goto out;
                }
        }

        rc = find_named(&w, root, "contexts", "context", context, &found, &ctx);
        if (rc)
                goto out;
        if (!found) {
                rc = tsr_diag_set(diag, TSR_ENOTFOUND,
                                  "kubeconfig: context \"%.200s\" does not exist", context);
                goto out;
        }
        snprintf(where, sizeof(where), "context \"%.200s\"", context);
        STR(ctx, "cluster", where, &cluster_name);
        STR(ctx, "user", where, &user_name);
        STR(ctx, "namespace", where, &ns);
        if (!present(cluster_name)) {
                rc = tsr_diag_set(diag, TSR_ENOTFOUND, "kubeconfig: %s names no cluster", where);
                goto out;
        }

        rc = find_named(&w, root, "clusters", "cluster", cluster_name, &found, &cluster);
        if (rc)
                goto out;
        if (!found) {
                rc = tsr_diag_set(diag, TSR_ENOTFOUND,
                                  "kubeconfig: cluster \"%.200s\" (of %s) does not exist",
                                  cluster_name, where);
                goto out;
        }
        snprintf(where, sizeof(where), "cluster \"%.200s\"", cluster_name);
        STR(cluster, "server", where, &s);
        if (!present(s)) {
                rc = tsr_diag_set(diag, TSR_EINVAL, "kubeconfig: %s has no server", where);
                goto out;
        }
        rc = set_server(&c, s, diag);
        if (rc)
                goto out;
        STR(cluster, "certificate-authority", where, &ca);
        STR(cluster, "certificate-authority-data", where, &ca_data);
        STR(cluster, "tls-server-name", where, &s);
        if (present(s) && !(c.tls_server_name = strdup(s))) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "kubeconfig: out of memory");
                goto out;
        }
        rc = map_get(&w, cluster, "insecure-skip-tls-verify", &v);
        if (rc)
                goto out;
        if (v != NONE &&
            (t.v[v].kind != SCALAR || parse_bool(t.v[v].text, &c.insecure_skip_tls_verify))) {
                rc = tsr_diag_set_at(diag, TSR_EPARSE, t.v[v].line,
                                     "kubeconfig: %s: insecure-skip-tls-verify must be true or "
                                     "false",
                                     where);
                goto out;
        }
        if (c.insecure_skip_tls_verify && (present(ca) || present(ca_data))) {
                rc = tsr_diag_set(diag, TSR_EINVAL,
                                  "kubeconfig: %s: specifying a root certificates file with the "
                                  "insecure flag is not allowed",
                                  where);
                goto out;
        }
        if (present(ca_data)) {
                snprintf(where, sizeof(where), "cluster \"%.200s\" certificate-authority-data",
                         cluster_name);
                rc = decode_b64(ca_data, where, &c.ca_pem, &c.ca_pem_len, diag);
        } else if (present(ca)) {
                rc = resolve_path(base_dir, ca, &c.ca_file, diag);
        }
        if (rc)
                goto out;

        if (present(user_name)) {
                rc = find_named(&w, root, "users", "user", user_name, &found, &user);
                if (rc)
                        goto out;
                if (!found) {
                        rc = tsr_diag_set(diag, TSR_ENOTFOUND,
                                          "kubeconfig: user \"%.200s\" (of context \"%.200s\") "
                                          "does not exist",
                                          user_name, context);
                        goto out;
                }
                snprintf(where, sizeof(where), "user \"%.200s\"", user_name);
                STR(user, "token", where, &token);
                STR(user, "tokenFile", where, &token_file);
                STR(user, "client-certificate", where, &cert);
                STR(user, "client-certificate-data", where, &cert_data);
                STR(user, "client-key", where, &key);
                STR(user, "client-key-data", where, &key_data);
                if ((present(cert) || present(cert_data)) != (present(key) || present(key_data))) {
                        rc = tsr_diag_set(diag, TSR_EINVAL,
                                          "kubeconfig: %s: client-certificate and client-key "
                                          "must both be specified",
                                          where);
                        goto out;
                }
                if (!present(token) && !present(token_file) && !present(cert) &&
                    !present(cert_data)) {
                        static const char *const unsupported[][2] = {
                            {"exec", "exec credential plugins"},
                            {"auth-provider", "auth providers"},
                            {"username", "basic authentication"},
                        };

                        for (size_t i = 0; i < 3; i++) {
                                rc = map_get(&w, user, unsupported[i][0], &v);
                                if (rc)
                                        goto out;
                                if (v != NONE) {
                                        rc = tsr_diag_set_at(
                                            diag, TSR_EINVAL, t.v[v].line,
                                            "kubeconfig: %s authenticates with %s (%s), which "
                                            "tessera does not support; use token, tokenFile or "
                                            "client-certificate/client-key",
                                            where, unsupported[i][1], unsupported[i][0]);
                                        goto out;
                                }
                        }
                }
                if (present(token) && !(c.token = strdup(token)))
                        rc = TSR_ENOMEM;
                if (!rc && present(token_file))
                        rc = resolve_path(base_dir, token_file, &c.token_file, diag);
                if (!rc && present(cert_data)) {
                        snprintf(where, sizeof(where), "user \"%.200s\" client-certificate-data",
                                 user_name);
                        rc = decode_b64(cert_data, where, &c.cert_pem, &c.cert_pem_len, diag);
                } else if (!rc && present(cert)) {
                        rc = resolve_path(base_dir, cert, &c.cert_file, diag);
                }
                if (!rc && present(key_data)) {
                        snprintf(where, sizeof(where), "user \"%.200s\" client-key-data",
                                 user_name);
                        rc = decode_b64(key_data, where, &c.key_pem, &c.key_pem_len, diag);
                } else if (!rc && present(key)) {
                        rc = resolve_path(base_dir, key, &c.key_file, diag);
                }
                if (rc == TSR_ENOMEM)
                        tsr_diag_set(diag, rc, "kubeconfig: out of memory");
                if (rc)
                        goto out;
        }
        c.ns = strdup(present(ns) ? ns : "default");
        if (!c.ns) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "kubeconfig: out of memory");
                goto out;
        }
        tsr_kube_config_release(cfg);
        *cfg = c;
        tsr_kube_config_init(&c);
out:
        tsr_kube_config_release(&c);
        tree_release(&t);
        return rc;
}

int tsr_kube_kubeconfig_load(struct tsr_kube_config *cfg, const char *path, const char *context,
                             struct tsr_diag *diag)
{
        char *text, *dir, *slash;
        size_t len;
        int rc;

        rc = tsr__kube_read_file(path, TSR__KUBE_FILE_MAX, &text, &len, diag);
        if (rc)
                return rc;
        dir = strdup(path);
        if (!dir) {
                free(text);
                return tsr_diag_set(diag, TSR_ENOMEM, "%s: out of memory", path);
        }
        slash = strrchr(dir, '/');
        if (slash == dir)
                dir[1] = '\0';
        else if (slash)
                *slash = '\0';
        else
                dir[0] = '\0';
        rc = tsr_kube_kubeconfig_parse(cfg, text, len, dir, context, diag);
        if (rc && diag) {
                char msg[TSR_DIAG_MSG_MAX + 64];

                if (diag->line)
                        snprintf(msg, sizeof(msg), "%s:%u: %s", path, diag->line, diag->msg);
                else
                        snprintf(msg, sizeof(msg), "%s: %s", path, diag->msg);
                memcpy(diag->msg, msg, sizeof(diag->msg) - 1);
                diag->msg[sizeof(diag->msg) - 1] = '\0';
        }
        free(dir);
        free(text);
        return rc;
}
