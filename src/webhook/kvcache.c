/*
 * kvcache.c - the KV-cache injection webhook (kvcache.h).
 */
#include "webhook/kvcache.h"

#include "base/diag.h"
#include "base/err.h"
#include "codec/json_arena.h"
#include "webhook/field_error.h"
#include "webhook/json_read.h"
#include "webhook/kvcache_launch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PFX            "kvcache.gpustack.ai/"
#define L_INJECT       PFX "inject"
#define A_BINDING      PFX "binding"
#define A_ENGINE       PFX "engine"
#define A_MANUFACTURER PFX "manufacturer"
#define A_ROLE         PFX "role"
#define A_CONTAINER    PFX "container"
#define A_FORWARDED    PFX "launch-args-forwarded"
#define A_DOMAIN       PFX "domain"
#define A_CLIENT       PFX "client-config"
#define A_INJECTED     PFX "injected"

#define VOLUME_NAME  "gpustack-kvcache-config"
#define MOUNT_PATH   "/etc/gpustack/kvcache"
#define CONFIG_FILE  "mooncake.json"
#define CONFIG_PATH  MOUNT_PATH "/" CONFIG_FILE
#define METADATA_P2P "P2PHANDSHAKE"
#define LOCAL_BUFFER (128 * 1024 * 1024)
#define COND_LEDGER  "QuotaLedgerAvailable"
#define REASON_NO_MT "MultiTenancyDisabled"
#define QMAX         320

static const char *const accepted[] = {A_BINDING, A_ENGINE,    A_MANUFACTURER,
                                       A_ROLE,    A_CONTAINER, A_FORWARDED};

/* ---- small helpers ------------------------------------------------------------------------ */

static void deny(struct tsr_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void deny(struct tsr_verdict *v, const char *fmt, ...)
{
        char msg[TSR_VERDICT_MESSAGE_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        tsr_verdict_deny(v, 403, "Forbidden", "%s", msg);
}

/* Go's %q of s, in a caller buffer of QMAX bytes. */
#define Q(s, buf) tsr_go_quote((s), (buf), QMAX)

static bool has_prefix(const char *s, const char *p)
{
        return !strncmp(s, p, strlen(p));
}

static int oom(struct tsr_diag *diag)
{
        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
}

/* ---- the Pod's declaration ---------------------------------------------------------------- */

struct decl {
        enum tsr_kvcache_engine family;
        const char *engine_id; /* "vllm", "vllm-ascend", "sglang" */
        const char *role;      /* "", "Prefill", "Decode" */
        bool forwarded;
        const char *binding;
};

static const char *annotation(json_t *annotations, const char *key)
{
        return json_string_value(json_object_get(annotations, key));
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The vocabulary rule: the first offending key, in byte order, decides. Returns true if denied. */
static bool check_vocabulary(json_t *annotations, struct tsr_verdict *v)
{
        const char *key, *bad[64];
        char q[QMAX], list[1024];
        size_t n = 0, used = 0;
        json_t *val;

        json_object_foreach(annotations, key, val)
        {
                bool ok = !strcmp(key, A_DOMAIN);

                if (!has_prefix(key, PFX))
                        continue;
                for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++)
                        ok = ok || !strcmp(key, accepted[i]);
                if (!ok && n < sizeof(bad) / sizeof(bad[0]))
                        bad[n++] = key;
        }
        if (!n)
                return false;
        qsort(bad, n, sizeof(bad[0]), cmp_str);
        if (!strcmp(bad[0], A_CLIENT) || !strcmp(bad[0], A_INJECTED)) {
                deny(v,
                     "annotation %s is written by this webhook and may not be supplied: it records "
                     "what was decided, and a submitted value would be a record of a decision "
                     "nobody made",
                     Q(bad[0], q));
                return true;
        }
        list[0] = '\0';
        for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]) && used < sizeof(list); i++)
                used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
                                         accepted[i]);
        deny(v,
             "annotation %s is not one this webhook accepts; the accepted keys are %s. A key it "
             "ignored would leave the Pod configured differently from the manifest, with nothing "
             "reporting it",
             Q(bad[0], q), list);
        return true;
}

/* Reads and judges the Pod's annotations. Returns true if denied. */
static bool read_decl(json_t *annotations, struct decl *d, struct tsr_verdict *v)
{
        const char *engine = annotation(annotations, A_ENGINE);
        const char *mfr = annotation(annotations, A_MANUFACTURER);
        const char *role = annotation(annotations, A_ROLE);
        const char *fwd = annotation(annotations, A_FORWARDED);
        char q1[QMAX], q2[QMAX];

        memset(d, 0, sizeof(*d));
        if (check_vocabulary(annotations, v))
                return true;
        if (json_object_get(annotations, A_DOMAIN)) {
                deny(v,
                     "annotation %s is not accepted: the reuse domain comes from the "
                     "KVCachePoolBinding and only from there, so that every domain this operator "
                     "provisions has an object accounting for it. This is the shape of the "
                     "declarative contract, not an enforcement boundary. What a Binding decides is "
                     "which names EXIST: the multi-tenant master this webhook injects against "
                     "refuses a name absent from its ledger. Remove it; a namespace needing two "
                     "reuse boundaries gets two Bindings",
                     Q(A_DOMAIN, q1));
                return true;
        }
        if (engine && !strcmp(engine, "vLLM")) {
                d->family = TSR_KVCACHE_ENGINE_VLLM;
                d->engine_id = "vllm";
        } else if (engine && !strcmp(engine, "SGLang")) {
                d->family = TSR_KVCACHE_ENGINE_SGLANG;
                d->engine_id = "sglang";
        } else if (engine && !strcmp(engine, "vllm-ascend")) {
                deny(v,
                     "annotation %s: engine \"vllm-ascend\" is not one this annotation takes: it "
                     "names the Python package vllm_ascend, which the runner installs when the "
                     "accelerator backend is CANN, rather than an engine anybody picks. Set "
                     "\"vLLM\" and, for the Ascend runtime, annotation %s: \"ascend\"",
                     Q(A_ENGINE, q1), Q(A_MANUFACTURER, q2));
                return true;
        } else {
                deny(v,
                     "annotation %s: engine %s is not one this operator can configure; set one of "
                     "[vLLM SGLang]",
                     Q(A_ENGINE, q1), Q(engine ? engine : "", q2));
                return true;
        }
        if (json_object_get(annotations, A_MANUFACTURER)) {
                if (d->family != TSR_KVCACHE_ENGINE_VLLM) {
                        deny(v, "annotation %s is only accepted with engine \"vLLM\"",
                             Q(A_MANUFACTURER, q1));
                        return true;
                }
                if (!mfr || strcmp(mfr, "ascend")) {
                        deny(v,
                             "annotation %s must be \"ascend\" when declared with engine "
                             "\"vLLM\", got %s",
                             Q(A_MANUFACTURER, q1), Q(mfr ? mfr : "", q2));
                        return true;
                }
                d->engine_id = "vllm-ascend";
        }
        d->role = "";
        if (json_object_get(annotations, A_ROLE)) {
                if (!role || (strcmp(role, "Prefill") && strcmp(role, "Decode"))) {
                        deny(v,
                             "annotation %s: role %s is not recognised; set \"Prefill\", "
                             "\"Decode\", or leave the annotation off",
                             Q(A_ROLE, q1), Q(role ? role : "", q2));
                        return true;
                }
                d->role = role;
        }
        if (json_object_get(annotations, A_FORWARDED)) {
                if (!fwd || (strcmp(fwd, "true") && strcmp(fwd, "false"))) {
                        deny(v, "annotation %s must be \"true\" or \"false\", got %s",
                             Q(A_FORWARDED, q1), Q(fwd ? fwd : "", q2));
                        return true;
                }
                d->forwarded = !strcmp(fwd, "true");
        }
        d->binding = annotation(annotations, A_BINDING);
        if (!d->binding || !*d->binding) {
                deny(v,
                     "annotation %s is required: it names the KVCachePoolBinding in this namespace "
                     "that provisions this Pod's grant on a pool",
                     Q(A_BINDING, q1));
                return true;
        }
        if (strchr(d->binding, '/')) {
                deny(v,
                     "annotation %s must be a plain name, not %s: a Binding is resolved in the "
                     "Pod's own namespace and there is no cross-namespace form",
                     Q(A_BINDING, q1), Q(d->binding, q2));
                return true;
        }
        return false;
}

/* ---- the container ------------------------------------------------------------------------ */

/* "a, b, c": the names of the Pod's containers. */
static void container_names(json_t *containers, char *out, size_t len)
{
        size_t used = 0, i;
        json_t *c;

        out[0] = '\0';
        json_array_foreach(containers, i, c)
        {
                if (used >= len)
                        break;
                used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "",
                                         tsr_json_str_or_empty(c, "name"));
        }
}

/* The container to inject into, or NULL after denying v. */
static json_t *target_container(json_t *pod, json_t *annotations, struct tsr_verdict *v)
{
        json_t *containers = tsr_json_at(pod, "spec.containers");
        json_t *inits = tsr_json_at(pod, "spec.initContainers"), *c;
        const char *named = annotation(annotations, A_CONTAINER);
        char names[2048], q1[QMAX], q2[QMAX];
        size_t i;

        container_names(containers, names, sizeof(names));
        if (!named || !*named) {
                if (json_array_size(containers) == 1)
                        return json_array_get(containers, 0);
                if (json_array_size(containers) == 0)
                        deny(v, "the Pod has no containers to inject into");
                else
                        deny(v,
                             "the Pod has %zu containers (%s), so annotation %s must name the one "
                             "running the engine; this webhook never picks the first",
                             json_array_size(containers), names, Q(A_CONTAINER, q1));
                return NULL;
        }
        json_array_foreach(containers, i, c)
        {
                if (!strcmp(tsr_json_str_or_empty(c, "name"), named))
                        return c;
        }
        json_array_foreach(inits, i, c)
        {
                if (!strcmp(tsr_json_str_or_empty(c, "name"), named)) {
                        deny(v,
                             "annotation %s names %s, which is an init container: it finishes "
                             "before the workload starts, so configuring it would cache nothing. "
                             "Name one of: %s",
                             Q(A_CONTAINER, q1), Q(named, q2), names);
                        return NULL;
                }
        }
        deny(v, "annotation %s names %s, which is not a container of this Pod. Name one of: %s",
             Q(A_CONTAINER, q1), Q(named, q2), names);
        return NULL;
}

/* A container's string list (command or args) as a borrowed array; NULL items read as "". */
struct strv {
        const char **s;
        size_t n;
};

static int read_strv(json_t *ctr, const char *key, struct strv *out, struct tsr_diag *diag)
{
        json_t *a = json_object_get(ctr, key), *e;
        size_t i;

        out->s = NULL;
        out->n = 0;
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return tsr_diag_set(diag, TSR_EPARSE, "container %s is not an array", key);
        if (!json_array_size(a))
                return 0;
        out->s = calloc(json_array_size(a), sizeof(*out->s));
        if (!out->s)
                return oom(diag);
        json_array_foreach(a, i, e)
        {
                if (!json_is_string(e)) {
                        free(out->s);
                        out->s = NULL;
                        return tsr_diag_set(diag, TSR_EPARSE, "container %s[%zu] is not a string",
                                            key, i);
                }
                out->s[out->n++] = json_string_value(e);
        }
        return 0;
}

/* ---- owned keys --------------------------------------------------------------------------- */

/*
 * Whether token spells flag as the engine's parser reads it: "--flag" or "--flag=v", a prefix of at
 * least min_prefix bytes (0: exact only), and on the vLLM family underscores for dashes and a
 * dotted sub-key.
 */
static bool spells(const char *token, const char *flag, size_t min_prefix, bool vllm)
{
        char name[256];
        size_t len = 0;

        if (strncmp(token, "--", 2))
                return false;
        for (const char *c = token; *c && *c != '=' && len + 1 < sizeof(name); c++) {
                if (vllm && *c == '.')
                        break;
                name[len++] = (vllm && c > token + 1 && *c == '_') ? '-' : *c;
        }
        name[len] = '\0';
        if (!strcmp(name, flag))
                return true;
        return min_prefix && len >= min_prefix && len < strlen(flag) && !strncmp(flag, name, len);
}

/* The first token of command or args spelling flag, or NULL. */
static const char *find_flag(const struct strv *cmd, const struct strv *args, const char *flag,
                             size_t min_prefix, bool vllm)
{
        for (size_t i = 0; i < cmd->n; i++)
                if (spells(cmd->s[i], flag, min_prefix, vllm))
                        return cmd->s[i];
        for (size_t i = 0; i < args->n; i++)
                if (spells(args->s[i], flag, min_prefix, vllm))
                        return args->s[i];
        return NULL;
}

static bool env_declared(json_t *ctr, const char *name)
{
        json_t *e;
        size_t i;

        json_array_foreach(json_object_get(ctr, "env"), i, e)
        {
                if (!strcmp(tsr_json_str_or_empty(e, "name"), name))
                        return true;
        }
        return false;
}

/* The owned-key rules. Returns true if denied. */
static bool check_owned(json_t *pod, json_t *ctr, const struct decl *d, bool dtype_owned,
                        const struct strv *cmd, const struct strv *args, struct tsr_verdict *v)
{
        const char *name = tsr_json_str_or_empty(ctr, "name"), *hit;
        bool vllm = d->family == TSR_KVCACHE_ENGINE_VLLM;
        char q1[QMAX], q2[QMAX];
        json_t *e;
        size_t i;

        if (vllm && env_declared(ctr, "MOONCAKE_CONFIG_PATH")) {
                deny(v,
                     "container %s already sets MOONCAKE_CONFIG_PATH, so it already has a KV cache "
                     "configured; this webhook refuses to merge rather than leave two sources for "
                     "one setting",
                     Q(name, q1));
                return true;
        }
        if (vllm && (hit = find_flag(cmd, args, "--kv-transfer-config", 6, true))) {
                deny(v,
                     "container %s already passes --kv-transfer-config (as %s), so it already has "
                     "a KV cache configured; two of them on one command line is undiagnosable",
                     Q(name, q1), Q(hit, q2));
                return true;
        }
        if (!vllm && (hit = find_flag(cmd, args, "--hicache-storage-backend", 0, false))) {
                deny(v,
                     "container %s already passes --hicache-storage-backend (as %s), so it already "
                     "has a KV cache configured; two of them on one command line is undiagnosable",
                     Q(name, q1), Q(hit, q2));
                return true;
        }
        if (!vllm &&
            ((hit = find_flag(cmd, args, "--hicache-storage-backend-extra-config", 26, false)) ||
             (env_declared(ctr, "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH") &&
              (hit = "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH")))) {
                deny(v,
                     "container %s sets %s, which selects where SGLang reads its store "
                     "configuration from: every variable this webhook injects would stay on the "
                     "Pod and be read by nothing. Remove it, or drop the inject label",
                     Q(name, q1), Q(hit, q2));
                return true;
        }
        if (dtype_owned && (hit = find_flag(cmd, args, "--kv-cache-dtype", 12, vllm))) {
                deny(v,
                     "container %s already passes --kv-cache-dtype (as %s): the dtype comes from "
                     "the KVCachePoolBinding, and engines writing two dtypes into one domain read "
                     "each other's blocks wrong. Remove it and name a Binding declaring the dtype "
                     "you want",
                     Q(name, q1), Q(hit, q2));
                return true;
        }
        if (!vllm)
                return false;
        json_array_foreach(tsr_json_at(pod, "spec.volumes"), i, e)
        {
                if (!strcmp(tsr_json_str_or_empty(e, "name"), VOLUME_NAME)) {
                        deny(v, "the Pod already declares a volume named \"" VOLUME_NAME
                                "\", which this webhook owns");
                        return true;
                }
        }
        json_array_foreach(json_object_get(ctr, "volumeMounts"), i, e)
        {
                if (!strcmp(tsr_json_str_or_empty(e, "name"), VOLUME_NAME)) {
                        deny(v,
                             "container %s already mounts a volume named \"" VOLUME_NAME
                             "\", which this webhook owns",
                             Q(name, q1));
                        return true;
                }
                if (!strcmp(tsr_json_str_or_empty(e, "mountPath"), MOUNT_PATH)) {
                        deny(v,
                             "container %s already mounts something at \"" MOUNT_PATH
                             "\", which this webhook owns",
                             Q(name, q1));
                        return true;
                }
        }
        return false;
}

/* ---- resolution --------------------------------------------------------------------------- */

struct resolved {
        json_t *binding, *pool, *backend; /* new references */
        const char *domain;               /* the Binding's declared domain */
        bool tenant;                      /* the domain is forwarded as a tenant */
        const char *endpoint, *protocol, *dtype;
};

static void resolved_release(struct resolved *r)
{
        json_decref(r->binding);
        json_decref(r->pool);
        json_decref(r->backend);
}

/* The API spelling of a transport in the artifact's, or NULL for an unknown one. */
static const char *artifact_protocol(const char *api)
{
        static const char *const map[][2] = {
            {"Auto", "tcp"},    {"TCP", "tcp"},  {"RDMA", "rdma"}, {"EFA", "efa"},
            {"CANN", "ascend"}, {"ROCM", "hip"}, {"MUSA", "musa"}, {"MACA", "maca"},
        };

        if (!api || !*api)
                api = "Auto";
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
                if (!strcmp(api, map[i][0]))
                        return map[i][1];
        return NULL;
}

/* Resolves the transport the engine is configured with. Returns true if denied. */
static bool resolve_transport(const struct decl *d, const char *pool_name, json_t *backend,
                              struct resolved *r, struct tsr_verdict *v)
{
        json_t *members = tsr_json_at(backend, "spec.connection.managed.members"), *m;
        const char *wide = tsr_json_str(backend, "spec.transport.protocol");
        const char *offers[32], *bname = tsr_json_str_or_empty(backend, "metadata.name");
        char list[512], q1[QMAX], q2[QMAX];
        size_t n = 0, used, i;
        bool ascend = !strcmp(d->engine_id, "vllm-ascend");

        json_array_foreach(members, i, m)
        {
                const char *own = tsr_json_str(m, "transport.protocol");
                const char *api = own && *own ? own : wide;
                const char *p = artifact_protocol(api);
                bool seen = false;

                if (!p) {
                        deny(v,
                             "backend %s declares transport protocol %s, which this webhook "
                             "cannot render",
                             Q(bname, q1), Q(api, q2));
                        return true;
                }
                for (size_t k = 0; k < n; k++)
                        seen = seen || !strcmp(offers[k], p);
                if (!seen && n < sizeof(offers) / sizeof(offers[0]))
                        offers[n++] = p;
        }
        if (!n) {
                const char *p = artifact_protocol(wide);

                if (!p) {
                        deny(v,
                             "backend %s declares transport protocol %s, which this webhook "
                             "cannot render",
                             Q(bname, q1), Q(wide, q2));
                        return true;
                }
                offers[n++] = p;
        }
        used = (size_t)snprintf(list, sizeof(list), "[");
        for (size_t k = 0; k < n && used < sizeof(list); k++)
                used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", k ? " " : "",
                                         offers[k]);
        if (used < sizeof(list))
                snprintf(list + used, sizeof(list) - used, "]");
        if (ascend) {
                for (size_t k = 0; k < n; k++) {
                        if (!strcmp(offers[k], "ascend")) {
                                r->protocol = "ascend";
                                return false;
                        }
                }
                deny(v,
                     "pool %s offers the transports %s, and engine \"vllm-ascend\" accepts only "
                     "\"ascend\": it raises at startup on any other. Declare CANN on the backend's "
                     "spec.transport.protocol, or on a member group's transport.protocol, or "
                     "choose another pool",
                     Q(pool_name, q1), list);
                return true;
        }
        if (n > 1) {
                deny(v,
                     "pool %s offers the transports %s across its member groups, and engine %s is "
                     "configured with one transport while it reads a block from any group. Make "
                     "the groups use one protocol, or choose another pool",
                     Q(pool_name, q1), list, Q(d->engine_id, q2));
                return true;
        }
        r->protocol = offers[0];
        return false;
}

/* The pool's QuotaLedgerAvailable rule. Returns true if denied; clears r->tenant when disabled. */
static bool check_ledger(const char *pool_name, json_t *pool, struct resolved *r,
                         struct tsr_verdict *v)
{
        json_t *c, *found = NULL;
        const char *status, *reason, *message;
        char q[QMAX];
        size_t i;

        json_array_foreach(tsr_json_at(pool, "status.conditions"), i, c)
        {
                if (!strcmp(tsr_json_str_or_empty(c, "type"), COND_LEDGER))
                        found = c;
        }
        if (!found) {
                deny(v,
                     "pool %s does not report " COND_LEDGER " yet, so whether its master holds a "
                     "tenant ledger is unknown; retry once the pool reports it",
                     Q(pool_name, q));
                return true;
        }
        status = tsr_json_str_or_empty(found, "status");
        reason = tsr_json_str_or_empty(found, "reason");
        message = tsr_json_str_or_empty(found, "message");
        if (!strcmp(status, "True"))
                return false;
        if (!strcmp(status, "False") && !strcmp(reason, REASON_NO_MT)) {
                r->tenant = false;
                return false;
        }
        if (!strcmp(status, "False")) {
                deny(v, "pool %s reports " COND_LEDGER " as False (%s): %s", Q(pool_name, q),
                     reason, message);
                return true;
        }
        deny(v,
             "pool %s reports " COND_LEDGER " as Unknown, which is a wait rather than an answer; "
             "retry once it settles",
             Q(pool_name, q));
        return true;
}

/* Reads what the Pod's Binding resolves to. Returns 0 (denied or not) or an error. */
static int resolve(const struct tsr_webhook_lookup *x, const char *ns, const struct decl *d,
                   struct resolved *r, struct tsr_verdict *v, struct tsr_diag *diag)
{
        const char *pool_name, *backend_name;
        char q1[QMAX], q2[QMAX], q3[QMAX];
        json_t *dt;

        memset(r, 0, sizeof(*r));
        if (!x->kvcache_binding || !x->kvcache_pool || !x->kvcache_backend)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "this webhook's lookup cannot read KVCachePoolBindings, "
                                    "KVCachePools and KVCacheBackends, so a Pod labelled "
                                    "%s cannot be injected",
                                    L_INJECT);
        r->binding = x->kvcache_binding(x->ctx, ns, d->binding);
        if (!r->binding) {
                deny(v,
                     "annotation %s names KVCachePoolBinding %s, which does not exist in namespace "
                     "%s: a Pod draws on a pool through a Binding its own namespace holds, so "
                     "either the name is wrong or the Binding has not been created",
                     Q(A_BINDING, q1), Q(d->binding, q2), Q(ns, q3));
                return 0;
        }
        dt = tsr_json_at(r->binding, "metadata.deletionTimestamp");
        if (dt && !json_is_null(dt)) {
                deny(v,
                     "annotation %s names KVCachePoolBinding %s, which is being deleted: its reuse "
                     "domain is being withdrawn from the pool's ledger, so a Pod admitted against "
                     "it would be injected and then fail every cache write. Wait for the deletion "
                     "to finish and create a new Binding, or point this Pod at one that is not "
                     "terminating",
                     Q(A_BINDING, q1), Q(d->binding, q2));
                return 0;
        }
        r->domain = tsr_json_str_or_empty(r->binding, "spec.domain.name");
        r->dtype = tsr_json_str_or_empty(r->binding, "spec.domain.dtype");
        r->tenant = *r->domain != '\0';
        pool_name = tsr_json_str_or_empty(r->binding, "spec.poolRef.name");
        r->pool = x->kvcache_pool(x->ctx, pool_name);
        if (!r->pool) {
                deny(v,
                     "KVCachePoolBinding %s in namespace %s references pool %s, which does not "
                     "exist",
                     Q(d->binding, q1), Q(ns, q2), Q(pool_name, q3));
                return 0;
        }
        if (check_ledger(pool_name, r->pool, r, v))
                return 0;
        backend_name = json_string_value(json_array_get(tsr_json_at(r->pool, "spec.backends"), 0));
        if (!backend_name || !*backend_name) {
                deny(v, "pool %s names no backend, so its transport cannot be resolved",
                     Q(pool_name, q1));
                return 0;
        }
        r->backend = x->kvcache_backend(x->ctx, backend_name);
        if (!r->backend) {
                deny(v, "pool %s references backend %s, which does not exist", Q(pool_name, q1),
                     Q(backend_name, q2));
                return 0;
        }
        r->endpoint = tsr_json_str_or_empty(r->pool, "status.clientEndpoint");
        if (!*r->endpoint) {
                deny(v,
                     "pool %s has not published a client endpoint yet, so there is no address to "
                     "point %s at; retry once the pool reports one",
                     Q(pool_name, q1), Q(d->engine_id, q2));
                return 0;
        }
        if (resolve_transport(d, pool_name, r->backend, r, v))
                return 0;
        if (x->settings.value[TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED] && !*r->dtype) {
                deny(v,
                     "KVCachePoolBinding %s in namespace %s declares no spec.domain.dtype, so "
                     "there is no dtype to hand the engine",
                     Q(d->binding, q1), Q(ns, q2));
                return 0;
        }
        return 0;
}

/* ---- rendering ---------------------------------------------------------------------------- */

/* The array ctr[key], created when absent. NULL on ENOMEM or a non-array. */
static json_t *array_of(json_t *obj, const char *key)
{
        json_t *a = json_object_get(obj, key);

        if (!a || json_is_null(a)) {
                if (json_object_set_new(obj, key, json_array()))
                        return NULL;
                a = json_object_get(obj, key);
        }
        return json_is_array(a) ? a : NULL;
}

/* Writes env entry e (stolen) over the container's entry of the same name, or appends it. */
static int env_put(json_t *env, json_t *e)
{
        const char *name = tsr_json_str_or_empty(e, "name");
        json_t *cur;
        size_t i;

        if (!e)
                return TSR_ENOMEM;
        json_array_foreach(env, i, cur)
        {
                if (!strcmp(tsr_json_str_or_empty(cur, "name"), name))
                        return json_array_set_new(env, i, e) ? TSR_ENOMEM : 0;
        }
        return json_array_append_new(env, e) ? TSR_ENOMEM : 0;
}

static int env_value(json_t *env, const char *name, const char *value)
{
        return env_put(env, json_pack("{s:s, s:s}", "name", name, "value", value));
}

static int push(json_t *args, const char *s)
{
        return json_array_append_new(args, json_string(s)) ? TSR_ENOMEM : 0;
}

/* v's compact text, released with tsr_json_free (it may come from the request's arena). */
static char *dump(json_t *v)
{
        char *s = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

        json_decref(v);
        return s;
}

static int render_vllm(json_t *pod, json_t *ctr, json_t *annotations, const struct decl *d,
                       const struct resolved *r)
{
        const char *connector =
            strcmp(d->engine_id, "vllm-ascend") ? "MooncakeStoreConnector" : "AscendStoreConnector";
        const char *role = !strcmp(d->role, "Prefill")  ? "kv_producer"
                           : !strcmp(d->role, "Decode") ? "kv_consumer"
                                                        : "kv_both";
        json_t *env = array_of(ctr, "env"), *args = array_of(ctr, "args");
        json_t *spec = json_object_get(pod, "spec"), *volumes, *mounts, *config;
        char *transfer, *client;
        int rc;

        if (!env || !args || !spec || !(volumes = array_of(spec, "volumes")) ||
            !(mounts = array_of(ctr, "volumeMounts")))
                return TSR_ENOMEM;
        config = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i}", "metadata_server", METADATA_P2P,
                           "master_server_address", r->endpoint, "protocol", r->protocol,
                           "device_name", "", "mode", "standalone-store", "global_segment_size", 0,
                           "local_buffer_size", LOCAL_BUFFER);
        if (config && r->tenant &&
            json_object_set_new(config, "tenant_id", json_string(r->domain))) {
                json_decref(config);
                return TSR_ENOMEM;
        }
        client = dump(config);
        transfer = dump(json_pack("{s:s, s:s}", "kv_connector", connector, "kv_role", role));
        rc = (!client || !transfer) ? TSR_ENOMEM : 0;
        if (!rc)
                rc = env_value(env, "MOONCAKE_CONFIG_PATH", CONFIG_PATH);
        if (!rc && (push(args, "--kv-transfer-config") || push(args, transfer)))
                rc = TSR_ENOMEM;
        if (!rc && json_array_append_new(
                       volumes, json_pack("{s:s, s:{s:[{s:s, s:{s:s}}]}}", "name", VOLUME_NAME,
                                          "downwardAPI", "items", "path", CONFIG_FILE, "fieldRef",
                                          "fieldPath", "metadata.annotations['" A_CLIENT "']")))
                rc = TSR_ENOMEM;
        if (!rc && json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "name", VOLUME_NAME,
                                                           "mountPath", MOUNT_PATH, "readOnly", 1)))
                rc = TSR_ENOMEM;
        if (!rc && json_object_set_new(annotations, A_CLIENT, json_string(client)))
                rc = TSR_ENOMEM;
        tsr_json_free(client);
        tsr_json_free(transfer);
        return rc;
}

static int render_sglang(json_t *ctr, const struct resolved *r)
{
        json_t *env = array_of(ctr, "env"), *args = array_of(ctr, "args");
        int rc = 0;

        if (!env || !args)
                return TSR_ENOMEM;
        if (r->tenant)
                rc = env_value(env, "MOONCAKE_TENANT_ID", r->domain);
        if (!rc)
                rc = env_value(env, "MOONCAKE_MASTER", r->endpoint);
        if (!rc)
                rc = env_value(env, "MOONCAKE_TE_META_DATA_SERVER", METADATA_P2P);
        if (!rc)
                rc = env_value(env, "MOONCAKE_PROTOCOL", r->protocol);
        if (!rc)
                rc = env_value(env, "MOONCAKE_DEVICE", "");
        if (!rc)
                rc = env_value(env, "MOONCAKE_GLOBAL_SEGMENT_SIZE", "0");
        if (!rc)
                rc = env_put(env, json_pack("{s:s, s:{s:{s:s}}}", "name", "MOONCAKE_LOCAL_HOSTNAME",
                                            "valueFrom", "fieldRef", "fieldPath", "status.podIP"));
        if (!rc && (push(args, "--hicache-storage-backend") || push(args, "mooncake")))
                rc = TSR_ENOMEM;
        return rc;
}

/*
 * The lists inject() appends to, when present, are arrays: the container's env (args read_strv
 * has seen), and for the vLLM family its volumeMounts and spec.volumes. Returns 0 or TSR_EPARSE
 * (a malformed Pod, which inject() could not tell from running out of memory).
 */
static int check_lists(json_t *pod, json_t *ctr, const struct decl *d, struct tsr_diag *diag)
{
        static const char *const keys[] = {"env", "volumeMounts"};
        bool vllm = d->family == TSR_KVCACHE_ENGINE_VLLM;
        json_t *v;

        for (size_t i = 0; i < (vllm ? 2 : 1); i++) {
                v = json_object_get(ctr, keys[i]);
                if (v && !json_is_null(v) && !json_is_array(v))
                        return tsr_diag_set(diag, TSR_EPARSE, "container %s is not an array",
                                            keys[i]);
        }
        v = tsr_json_at(pod, "spec.volumes");
        if (vllm && v && !json_is_null(v) && !json_is_array(v))
                return tsr_diag_set(diag, TSR_EPARSE, "Pod spec.volumes is not an array");
        return 0;
}

/* Applies the whole injection to the copy. Returns 0 or TSR_ENOMEM. */
static int inject(json_t *pod, json_t *ctr, json_t *annotations, const struct decl *d,
                  const struct resolved *r, const struct tsr_kvcache_launch *launch,
                  bool dtype_owned, bool names_hicache)
{
        bool vllm = d->family == TSR_KVCACHE_ENGINE_VLLM;
        json_t *env, *args;
        char *record;
        int rc = vllm ? render_vllm(pod, ctr, annotations, d, r) : render_sglang(ctr, r);

        if (rc)
                return rc;
        env = json_object_get(ctr, "env");
        args = json_object_get(ctr, "args");
        if (dtype_owned && (push(args, "--kv-cache-dtype") || push(args, r->dtype)))
                return TSR_ENOMEM;
        if (!vllm && !names_hicache && push(args, "--enable-hierarchical-cache"))
                return TSR_ENOMEM;
        if ((!env_declared(ctr, "MC_TE_METRIC") && env_value(env, "MC_TE_METRIC", "1")) ||
            (!env_declared(ctr, "MC_STORE_CLIENT_METRIC_BANDWIDTH") &&
             env_value(env, "MC_STORE_CLIENT_METRIC_BANDWIDTH", "1")))
                return TSR_ENOMEM;
        record = dump(json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:b}", "binding", d->binding,
                                "engine", d->engine_id, "vehicle", vllm ? "file" : "environment",
                                "domain", r->domain, "tenantInjected", r->tenant, "launchProgram",
                                launch->program, "launchArgsForwarded", launch->forwarded));
        if (!record)
                return TSR_ENOMEM;
        rc = json_object_set_new(annotations, A_INJECTED, json_string(record)) ? TSR_ENOMEM : 0;
        tsr_json_free(record);
        return rc;
}

/* ---- the handlers ------------------------------------------------------------------------- */

int tsr_webhook_kvcache_mutate(const struct tsr_webhook_lookup *lookup,
                               const struct tsr_review *review, struct tsr_verdict *verdict,
                               struct tsr_diag *diag)
{
        struct strv cmd = {0}, args = {0};
        struct tsr_kvcache_launch launch;
        struct resolved r = {0};
        struct decl d;
        json_t *pod, *meta, *annotations, *ctr, *containers;
        const char *ns, *inject_label;
        char msg[TSR_VERDICT_MESSAGE_MAX];
        bool names_hicache;
        int rc;

        inject_label = json_string_value(
            json_object_get(tsr_json_at(review->object, "metadata.labels"), L_INJECT));
        if (!review->object || strcmp(review->operation, "CREATE") || !inject_label ||
            strcmp(inject_label, "true")) {
                tsr_verdict_allow(verdict);
                return 0;
        }
        containers = tsr_json_at(review->object, "spec.containers");
        if (containers && !json_is_array(containers))
                return tsr_diag_set(diag, TSR_EPARSE, "Pod spec.containers is not an array");
        meta = json_object_get(review->object, "metadata");
        annotations = json_object_get(meta, "annotations");
        if (annotations && !json_is_object(annotations) && !json_is_null(annotations))
                return tsr_diag_set(diag, TSR_EPARSE, "Pod metadata.annotations is not an object");
        if (read_decl(annotations, &d, verdict))
                return 0;
        pod = json_deep_copy(review->object);
        if (!pod)
                return oom(diag);
        meta = json_object_get(pod, "metadata");
        if (!json_is_object(meta)) {
                json_object_set_new(pod, "metadata", json_object());
                meta = json_object_get(pod, "metadata");
        }
        annotations = json_object_get(meta, "annotations");
        if (!json_is_object(annotations)) {
                json_object_set_new(meta, "annotations", json_object());
                annotations = json_object_get(meta, "annotations");
        }
        if (!json_is_object(annotations)) {
                json_decref(pod);
                return oom(diag);
        }
        rc = 0;
        ctr = target_container(pod, annotations, verdict);
        if (!ctr)
                goto out;
        if ((rc = read_strv(ctr, "command", &cmd, diag)) ||
            (rc = read_strv(ctr, "args", &args, diag)))
                goto out;
        if (check_owned(pod, ctr, &d,
                        lookup->settings.value[TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED],
                        &cmd, &args, verdict))
                goto out;
        tsr_kvcache_launch_resolve(cmd.s, cmd.n, args.s, args.n, d.family, d.forwarded, &launch);
        if (!tsr_kvcache_launch_admitted(&launch)) {
                deny(verdict, "%s",
                     tsr_kvcache_launch_message(&launch, tsr_json_str_or_empty(ctr, "name"),
                                                d.family, msg, sizeof(msg)));
                goto out;
        }
        names_hicache = find_flag(&cmd, &args, "--enable-hierarchical-cache", 0, false) != NULL;
        ns = tsr_json_str(review->object, "metadata.namespace");
        if (!ns || !*ns)
                ns = review->ns;
        rc = resolve(lookup, ns, &d, &r, verdict, diag);
        if (rc || verdict->code)
                goto out;
        rc = check_lists(pod, ctr, &d, diag);
        if (rc)
                goto out;
        /* launch.program points into the copy's strings, which inject() leaves in place. */
        rc = inject(pod, ctr, annotations, &d, &r, &launch,
                    lookup->settings.value[TSR_SETTING_MODEL_DEPLOYMENT_KV_CACHE_DTYPE_OWNED],
                    names_hicache);
        if (rc) {
                rc = oom(diag);
                goto out;
        }
        verdict->patched = pod;
        pod = NULL;
        tsr_verdict_allow(verdict);
out:
        free(cmd.s);
        free(args.s);
        resolved_release(&r);
        json_decref(pod);
        return rc;
}

int tsr_webhook_kvcache_validate(const struct tsr_webhook_lookup *lookup,
                                 const struct tsr_review *review, struct tsr_verdict *verdict,
                                 struct tsr_diag *diag)
{
        static const struct {
                const char *where, *key, *why;
        } frozen[] = {
            {"labels", L_INJECT,
             "injection runs at CREATE only, so the label would no longer say whether this Pod's "
             "containers were configured"},
            {"annotations", A_INJECTED,
             "it records what the webhook decided at creation, and an edited one would be a record "
             "of a decision nobody made"},
            {"annotations", A_CLIENT,
             "the file at " CONFIG_PATH " is a downwardAPI projection of it, so an edit would swap "
             "the master address, transport and segment sizes under a running container"},
        };
        char q[QMAX];

        (void)lookup;
        (void)diag;
        if (!review->object || !review->old_object || strcmp(review->operation, "UPDATE")) {
                tsr_verdict_allow(verdict);
                return 0;
        }
        for (size_t i = 0; i < sizeof(frozen) / sizeof(frozen[0]); i++) {
                json_t *a =
                    json_object_get(json_object_get(json_object_get(review->old_object, "metadata"),
                                                    frozen[i].where),
                                    frozen[i].key);
                json_t *b = json_object_get(
                    json_object_get(json_object_get(review->object, "metadata"), frozen[i].where),
                    frozen[i].key);

                if ((!a && !b) || (a && b && json_equal(a, b)))
                        continue;
                deny(verdict, "%s %s may not be added, changed or removed on an existing Pod: %s",
                     !strcmp(frozen[i].where, "labels") ? "label" : "annotation",
                     Q(frozen[i].key, q), frozen[i].why);
                return 0;
        }
        tsr_verdict_allow(verdict);
        return 0;
}
