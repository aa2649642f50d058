/*
 * instance_pod.c - an Instance's Pod, Service and status (instance_pod.h).
 */
#include "codec/instance_pod.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "codec/alloc_annotation.h"
#include "core/catalog.h"
#include "core/keys.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE_LABEL    "kueue.x-k8s.io/queue-name"
#define HOSTNAME_LABEL "kubernetes.io/hostname"
#define GI             (INT64_C(1) << 30)
#define MI             (INT64_C(1) << 20)

#define P_ACCEL    "spec.resources.accelerator"
#define P_MEM_PCT  "spec.resources.acceleratorSlicedMemoryPercentage"
#define P_CORE_PCT "spec.resources.acceleratorSlicedCoresPercentage"
#define P_PROFILE  "spec.resources.acceleratorPartitionedProfile"

/* ---- reading ------------------------------------------------------------------------------ */

/* obj at the dotted path, or NULL. */
static json_t *at(json_t *obj, const char *path)
{
        char key[64];

        while (obj && *path) {
                size_t n = strcspn(path, ".");

                if (n >= sizeof(key))
                        return NULL;
                memcpy(key, path, n);
                key[n] = '\0';
                obj = json_object_get(obj, key);
                path += n + (path[n] == '.');
        }
        return obj;
}

static const char *str_at(json_t *obj, const char *path)
{
        const char *s = json_string_value(at(obj, path));

        return s ? s : "";
}

/*
 * The quantity at path (an int-or-string), *present telling whether it is there (null reads as
 * absent). Returns 0 or TSR_EINVAL naming what (the object's kind) and path.
 */
static int quantity_at(json_t *obj, const char *what, const char *path, struct tsr_quantity *q,
                       bool *present, struct tsr_diag *diag)
{
        json_t *v = at(obj, path);

        *present = false;
        if (!v || json_is_null(v))
                return 0;
        if (json_is_integer(v)) {
                *q = tsr_quantity_from_int(json_integer_value(v), TSR_QF_DECIMAL_SI);
        } else if (!json_is_string(v) || tsr_quantity_parse(json_string_value(v), q, NULL)) {
                return tsr_diag_set(diag, TSR_EINVAL, "%s %s is not a quantity", what, path);
        }
        *present = true;
        return 0;
}

/* The integer at path (0 when absent). Returns 0 or TSR_EINVAL naming path. */
static int int_at(json_t *obj, const char *path, int64_t *out, struct tsr_diag *diag)
{
        json_t *v = at(obj, path);

        *out = 0;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v))
                return tsr_diag_set(diag, TSR_EINVAL, "Instance %s is not an integer", path);
        *out = json_integer_value(v);
        return 0;
}

/* What the Instance asks for and what its InstanceType offers, read once. */
struct req {
        const char *name, *ns, *uid, *type;
        /* spec.resources */
        struct tsr_quantity cpu, ram, storage, accel;
        bool has_cpu, has_ram, has_storage, has_accel;
        int64_t count; /* whole accelerators (1 for a slice or a partition), 0 for none */
        int64_t mem_pct, cores_pct;
        const char *profile;
        bool ssh;
        /* the InstanceType */
        bool accelerated;
        const char *entrance;
        const struct tsr_manufacturer *m;
        const char *unit_cpu, *unit_ram;
        char unit_cpu_text[24];
        int64_t profile_pct; /* a partition: its share of the GPU's VRAM, 1..100 */
};

/* "[a b c]": the names of the InstanceType's offered profiles. */
static void offered(json_t *profiles, char *out, size_t len)
{
        size_t used = (size_t)snprintf(out, len, "["), i;
        json_t *p;

        json_array_foreach(profiles, i, p)
        {
                if (used < len)
                        used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "",
                                                 str_at(p, "name"));
        }
        if (used < len)
                snprintf(out + used, len - used, "]");
}

/* The partition's share of the GPU's VRAM (percent, 1..100), as the Instance webhook sizes it. */
static int profile_share(json_t *it, const char *type, const char *profile, int64_t *pct,
                         struct tsr_diag *diag)
{
        json_t *profiles = at(it, "status.detail.slicedDetail.physical.profiles"), *p, *hit = NULL;
        struct tsr_quantity mem;
        char list[256];
        int64_t mib = 0, card;
        bool present;
        size_t i;
        int rc;

        json_array_foreach(profiles, i, p)
        {
                if (!strcmp(str_at(p, "name"), profile))
                        hit = p;
        }
        if (!hit) {
                offered(profiles, list, sizeof(list));
                return tsr_diag_set(diag, TSR_EINVAL,
                                    P_PROFILE ": \"%s\" is not offered by InstanceType %s "
                                              "(status.detail.slicedDetail.physical.profiles "
                                              "offers %s)",
                                    profile, type, list);
        }
        if (json_is_integer(json_object_get(hit, "memoryMib")))
                mib = json_integer_value(json_object_get(hit, "memoryMib"));
        if ((rc = quantity_at(it, "InstanceType", "status.detail.memory", &mem, &present, diag)))
                return rc;
        if (!present || tsr_quantity_value(&mem, &card) || card < MI || mib <= 0)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "InstanceType %s: the memory of profile %s or of its GPU "
                                    "(status.detail.memory) is not computed yet",
                                    type, profile);
        card /= MI;
        *pct = mib >= card ? 100 : mib * 100 / card;
        if (*pct < 1)
                *pct = 1;
        return 0;
}

/* The accelerator half: the manufacturer and the shape of the request. */
static int read_accelerator(json_t *inst, json_t *it, struct req *r, struct tsr_diag *diag)
{
        const char *mfr = str_at(it, "status.detail.manufacturer");
        char key[TSR_KEY_MAX];
        int rc;

        if (!*mfr) {
                const char *group = str_at(it, "spec.acceleratorGroup");
                size_t n = strcspn(group, "-");

                if (at(it, "status.detail.slicedDetail") && n && n < sizeof(key)) {
                        memcpy(key, group, n);
                        key[n] = '\0';
                        mfr = key;
                }
        }
        r->m = tsr_catalog_manufacturer_by_key(mfr);
        if (!r->m)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "InstanceType %s: status.detail.manufacturer is not set yet "
                                    "(or names no known manufacturer: \"%s\")",
                                    r->type, mfr);
        if ((rc = int_at(inst, P_MEM_PCT, &r->mem_pct, diag)) ||
            (rc = int_at(inst, P_CORE_PCT, &r->cores_pct, diag)))
                return rc;
        r->profile = str_at(inst, P_PROFILE);
        if (r->has_accel) {
                int64_t v;

                if (tsr_quantity_value(&r->accel, &v) || !tsr_quantity_is_int(&r->accel, v) ||
                    v < 0)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            P_ACCEL ": must be a whole, non-negative number of "
                                                    "accelerators");
                r->count = v;
        }
        if (*r->profile && (r->mem_pct || r->cores_pct))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    P_PROFILE ": a hardware partition and a logical slice "
                                              "percentage are mutually exclusive");
        if (*r->profile || r->mem_pct || r->cores_pct) {
                if (r->count != 1)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            P_ACCEL ": must be exactly 1 for a %s request, not "
                                                    "%lld",
                                            *r->profile ? "partitioned" : "sliced",
                                            (long long)r->count);
        }
        if (*r->profile) {
                if (!r->m->partition_kind)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            P_PROFILE ": manufacturer %s does not support "
                                                      "hardware partitioning",
                                            r->m->key);
                if (strlen(r->profile) >= 64 ||
                    tsr_key_format(key, r->m, TSR_KEY_PARTITIONED_PROFILE, r->profile))
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            P_PROFILE ": \"%s\" does not yield a valid resource "
                                                      "name",
                                            r->profile);
                return profile_share(it, r->type, r->profile, &r->profile_pct, diag);
        }
        if ((r->mem_pct || r->cores_pct) &&
            (r->mem_pct < 0 || r->mem_pct > 100 || r->cores_pct < 0 || r->cores_pct > 100))
                return tsr_diag_set(diag, TSR_EINVAL, "%s: must be within [0, 100]",
                                    r->mem_pct < 0 || r->mem_pct > 100 ? P_MEM_PCT : P_CORE_PCT);
        if (r->cores_pct && !r->mem_pct)
                r->mem_pct = r->cores_pct; /* as the Instance webhook defaults it */
        return 0;
}

static int read_req(json_t *inst, json_t *it, struct req *r, struct tsr_diag *diag)
{
        json_t *v;
        int rc;

        memset(r, 0, sizeof(*r));
        r->profile = "";
        r->name = str_at(inst, "metadata.name");
        r->ns = str_at(inst, "metadata.namespace");
        r->uid = str_at(inst, "metadata.uid");
        r->type = str_at(inst, "spec.type");
        if (!*r->name || !*r->ns || !*r->uid)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "Instance: metadata.name, namespace and uid are required");
        if (!*r->type)
                return tsr_diag_set(diag, TSR_EINVAL, "Instance %s/%s: spec.type is required",
                                    r->ns, r->name);
        if (!*str_at(inst, "spec.image"))
                return tsr_diag_set(diag, TSR_EINVAL, "Instance %s/%s: spec.image is required",
                                    r->ns, r->name);
        if (!json_is_object(it))
                return tsr_diag_set(diag, TSR_EINVAL, "InstanceType %s is not an object", r->type);
        r->entrance = str_at(it, "status.entrance");
        if (!*r->entrance)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "InstanceType %s: status.entrance is not set yet (its status "
                                    "has not been written)",
                                    r->type);
        r->accelerated = json_is_true(at(it, "spec.acceleratable"));
        v = at(it, "spec.unitResources.cpu");
        if (json_is_integer(v)) {
                snprintf(r->unit_cpu_text, sizeof(r->unit_cpu_text), "%" JSON_INTEGER_FORMAT,
                         json_integer_value(v));
                r->unit_cpu = r->unit_cpu_text;
        } else {
                r->unit_cpu = str_at(it, "spec.unitResources.cpu");
        }
        r->unit_ram = str_at(it, "spec.unitResources.ram");
        r->ssh = *str_at(inst, "spec.sshPublicKey.name") != '\0';
        if ((rc =
                 quantity_at(inst, "Instance", "spec.resources.cpu", &r->cpu, &r->has_cpu, diag)) ||
            (rc =
                 quantity_at(inst, "Instance", "spec.resources.ram", &r->ram, &r->has_ram, diag)) ||
            (rc = quantity_at(inst, "Instance", "spec.resources.localStorage", &r->storage,
                              &r->has_storage, diag)) ||
            (rc = quantity_at(inst, "Instance", P_ACCEL, &r->accel, &r->has_accel, diag)))
                return rc;
        if (r->accelerated)
                return read_accelerator(inst, it, r, diag);
        if (r->has_accel && r->accel.value)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    P_ACCEL ": InstanceType %s is not acceleratable (CPU only)",
                                    r->type);
        if (*str_at(inst, P_PROFILE) || at(inst, P_MEM_PCT) || at(inst, P_CORE_PCT))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "spec.resources: InstanceType %s is not acceleratable: no "
                                    "slice or partition",
                                    r->type);
        return 0;
}

/* ---- sizing ------------------------------------------------------------------------------- */

static bool positive(const struct tsr_quantity *q, bool present)
{
        return present && q->value > 0;
}

/* unit (a quantity string) times count, or pct percent of it rounded up to a milli (the Instance
 * webhook's unit_times / unit_percent). */
static int unit_scaled(const char *unit, const char *what, const char *type, int64_t count,
                       int64_t pct, struct tsr_quantity *out, struct tsr_diag *diag)
{
        struct tsr_quantity q;
        int64_t milli, num;

        if (!*unit || tsr_quantity_parse(unit, &q, NULL))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "InstanceType %s: spec.unitResources.%s \"%s\" is not a "
                                    "quantity",
                                    type, what, unit);
        if (!pct) {
                if (__builtin_mul_overflow(q.value, count, &q.value))
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "InstanceType %s: %s x %lld overflows", type, what,
                                            (long long)count);
                *out = q;
                return 0;
        }
        if (tsr_quantity_milli(&q, &milli) || __builtin_mul_overflow(milli, pct, &num))
                return tsr_diag_set(diag, TSR_EINVAL, "InstanceType %s: %s overflows", type, what);
        out->value = num / 100 + (num % 100 > 0);
        out->scale = -3;
        out->format = q.format;
        return 0;
}

/*
 * The host limits: spec.resources, or (cpu or ram absent or 0) sized from the unit spec by the
 * Instance webhook's rule.
 */
static int host_limits(struct req *r, struct tsr_quantity *cpu, struct tsr_quantity *ram,
                       struct tsr_diag *diag)
{
        int64_t pct = 0, count = 1;
        int rc;

        *cpu = r->cpu;
        *ram = r->ram;
        if (positive(&r->cpu, r->has_cpu) && positive(&r->ram, r->has_ram))
                return 0;
        if (r->accelerated) {
                if (*r->profile)
                        pct = r->profile_pct;
                else if (r->mem_pct || r->cores_pct)
                        pct = r->mem_pct ? r->mem_pct : r->cores_pct;
                else if (r->count > 1)
                        count = r->count;
                if (!positive(&r->cpu, r->has_cpu) &&
                    (rc = unit_scaled(r->unit_cpu, "cpu", r->type, count, pct, cpu, diag)))
                        return rc;
        } else if (!positive(&r->cpu, r->has_cpu)) {
                *cpu = tsr_quantity_from_int(1, TSR_QF_DECIMAL_SI);
        } else if (tsr_quantity_value(&r->cpu, &count) || count < 1) {
                count = 1;
        }
        if (!positive(&r->ram, r->has_ram) &&
            (rc = unit_scaled(r->unit_ram, "ram", r->type, count, pct, ram, diag)))
                return rc;
        return 0;
}

/* Upstream's ScaleToOvercommit: per rounded-up core base_milli, per whole Gi 128Mi. */
static struct tsr_quantity overcommit(const struct tsr_quantity *q, bool cpu, int64_t base_milli)
{
        int64_t v = 0;

        if (tsr_quantity_value(q, &v) || v < 0)
                v = 0;
        if (cpu)
                return (struct tsr_quantity){v * base_milli, -3, TSR_QF_DECIMAL_SI};
        return tsr_quantity_from_int(v / GI * 128 * MI, TSR_QF_BINARY_SI);
}

static int set_q(json_t *list, const char *key, const struct tsr_quantity *q)
{
        char b[TSR_QUANTITY_STR_MAX];

        return json_object_set_new(list, key, json_string(tsr_quantity_format(q, b)));
}

static int set_n(json_t *list, const char *key, int64_t n)
{
        struct tsr_quantity q = tsr_quantity_from_int(n, TSR_QF_DECIMAL_SI);

        return set_q(list, key, &q);
}

/* The host limits and requests of main into limits / requests. */
static int host_resources(struct req *r, const struct tsr_instance_pod_opts *o, json_t *limits,
                          json_t *requests, struct tsr_diag *diag)
{
        static const struct tsr_quantity zero = {0, 0, TSR_QF_DECIMAL_SI};
        bool oc = o->settings.value[TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT];
        struct tsr_quantity cpu, ram, rq;
        int rc, err = 0;

        if ((rc = host_limits(r, &cpu, &ram, diag)))
                return rc;
        err |= set_q(limits, "cpu", &cpu) | set_q(limits, "memory", &ram);
        if (r->has_storage && r->storage.value > 0)
                err |= set_q(limits, "ephemeral-storage", &r->storage);
        /* cpu: the only host resource a queue covers (the CPU-only pool's) */
        rq = oc ? overcommit(&cpu, true, r->accelerated ? 100 : 800) : cpu;
        err |= set_q(requests, "cpu", o->strict_quota && r->accelerated ? &zero : &rq);
        rq = oc ? overcommit(&ram, false, 0) : ram;
        err |= set_q(requests, "memory", o->strict_quota ? &zero : &rq);
        if (r->has_storage && r->storage.value > 0) {
                rq = oc ? overcommit(&r->storage, false, 0) : r->storage;
                err |= set_q(requests, "ephemeral-storage", o->strict_quota ? &zero : &rq);
        }
        return err ? TSR_ENOMEM : 0;
}

/* The accelerator keys of main (requests = limits). */
static int accel_resources(const struct req *r, json_t *limits, json_t *requests)
{
        char key[TSR_KEY_MAX];
        int err = 0;

        if (!r->accelerated || !r->count)
                return 0;
        if (*r->profile) {
                err |= tsr_key_format(key, r->m, TSR_KEY_PARTITIONED, NULL) ||
                       set_n(limits, key, 1) || set_n(requests, key, 1);
                err |= tsr_key_format(key, r->m, TSR_KEY_PARTITIONED_PROFILE, r->profile) ||
                       set_n(limits, key, 1) || set_n(requests, key, 1);
        } else if (r->mem_pct) {
                err |= tsr_key_format(key, r->m, TSR_KEY_SLICED, NULL) || set_n(limits, key, 1) ||
                       set_n(requests, key, 1);
                err |= tsr_key_format(key, r->m, TSR_KEY_SLICED_MEMORY_PERCENT, NULL) ||
                       set_n(limits, key, r->mem_pct) || set_n(requests, key, r->mem_pct);
                if (r->cores_pct)
                        err |= tsr_key_format(key, r->m, TSR_KEY_SLICED_CORES, NULL) ||
                               set_n(limits, key, r->cores_pct) ||
                               set_n(requests, key, r->cores_pct);
        } else {
                err |= tsr_key_format(key, r->m, TSR_KEY_EXCLUSIVE, NULL) ||
                       set_n(limits, key, r->count) || set_n(requests, key, r->count);
        }
        return err ? TSR_ENOMEM : 0;
}

/* ---- the objects -------------------------------------------------------------------------- */

/* "tcp-8080": upstream's port name. */
static void port_name(json_t *port, char *out, size_t len)
{
        const char *proto = str_at(port, "protocol");
        size_t i;

        snprintf(out, len, "%s-%" JSON_INTEGER_FORMAT, *proto ? proto : "TCP",
                 json_integer_value(json_object_get(port, "port")));
        for (i = 0; out[i]; i++)
                if (out[i] >= 'A' && out[i] <= 'Z')
                        out[i] = (char)(out[i] - 'A' + 'a');
}

static int check_ports(json_t *ports, struct tsr_diag *diag)
{
        json_t *p;
        size_t i;

        json_array_foreach(ports, i, p)
        {
                json_int_t port = json_integer_value(json_object_get(p, "port"));
                const char *proto = str_at(p, "protocol");

                if (!json_is_integer(json_object_get(p, "port")) || port < 1 || port > 65535)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "spec.ports[%zu].port: must be within [1, 65535]", i);
                if (*proto && strcmp(proto, "TCP") && strcmp(proto, "UDP") && strcmp(proto, "SCTP"))
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "spec.ports[%zu].protocol: \"%s\" is not TCP, UDP or "
                                            "SCTP",
                                            i, proto);
        }
        return 0;
}

static json_t *owner_refs(const struct req *r)
{
        return json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion",
                         TSR_INSTANCE_OBJECT_API_VERSION, "kind", TSR_INSTANCE_OBJECT_KIND, "name",
                         r->name, "uid", r->uid, "controller", true);
}

static json_t *meta(const struct req *r, bool queue)
{
        json_t *m =
            json_pack("{s:s, s:s, s:{s:s}, s:o}", "name", r->name, "namespace", r->ns, "labels",
                      TSR_INSTANCE_LABEL, r->uid, "ownerReferences", owner_refs(r));

        if (m && queue &&
            json_object_set_new(json_object_get(m, "labels"), QUEUE_LABEL,
                                json_string(r->entrance)))
                return json_decref(m), NULL;
        return m;
}

/* One additional volume (spec.additionalVolumes[i]) into volumes and mounts. */
static int additional_volume(json_t *av, size_t i, json_t *volumes, json_t *mounts,
                             struct tsr_diag *diag)
{
        static const char *const kinds[] = {"persistent", "configMap", "secret", "hostPath",
                                            "model"};
        const char *kind = NULL;
        char name[32];
        json_t *vol = NULL, *mount, *v;
        size_t k, n = 0;

        for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                v = json_object_get(av, kinds[k]);
                if (v && !json_is_null(v)) {
                        kind = kinds[k];
                        n++;
                }
        }
        if (n != 1)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "spec.additionalVolumes[%zu]: exactly one of persistent, "
                                    "configMap, secret, hostPath or model must be set",
                                    i);
        if (!*str_at(av, "mountPath"))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "spec.additionalVolumes[%zu].mountPath is required", i);
        v = json_object_get(av, kind);
        snprintf(name, sizeof(name), "additional-%zu", i);
        if (!strcmp(kind, "model"))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "spec.additionalVolumes[%zu].model: ModelArtifact mounts are "
                                    "not supported yet",
                                    i);
        if (strcmp(kind, "hostPath") && !*str_at(v, "name"))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "spec.additionalVolumes[%zu].%s.name is required", i, kind);
        if (!strcmp(kind, "persistent"))
                vol = json_pack("{s:s, s:{s:s}}", "name", name, "persistentVolumeClaim",
                                "claimName", str_at(v, "name"));
        else if (!strcmp(kind, "configMap"))
                vol = json_pack("{s:s, s:{s:s}}", "name", name, "configMap", "name",
                                str_at(v, "name"));
        else if (!strcmp(kind, "secret"))
                vol = json_pack("{s:s, s:{s:s}}", "name", name, "secret", "secretName",
                                str_at(v, "name"));
        else if (!*str_at(v, "path"))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "spec.additionalVolumes[%zu].hostPath.path is required", i);
        else
                vol = json_pack("{s:s, s:{s:s}}", "name", name, "hostPath", "path",
                                str_at(v, "path"));
        if (vol && !strcmp(kind, "hostPath") && json_is_string(json_object_get(v, "type")))
                json_object_set(json_object_get(vol, "hostPath"), "type",
                                json_object_get(v, "type"));
        mount = json_pack("{s:s, s:s}", "name", name, "mountPath", str_at(av, "mountPath"));
        if (mount && json_is_true(json_object_get(av, "readOnly")))
                json_object_set_new(mount, "readOnly", json_true());
        if (mount && *str_at(av, "subPath"))
                json_object_set_new(mount, "subPath", json_string(str_at(av, "subPath")));
        if (!vol || !mount || json_array_append_new(volumes, vol) ||
            json_array_append_new(mounts, mount)) {
                return TSR_ENOMEM;
        }
        return 0;
}

/* The workspace volume and every additional one. */
static int volumes_of(json_t *inst, json_t *volumes, json_t *mounts, struct tsr_diag *diag)
{
        json_t *eph = at(inst, "spec.volume.ephemeral"), *per = at(inst, "spec.volume.persistent");
        bool has_eph = eph && !json_is_null(eph), has_per = per && !json_is_null(per);
        const char *mount = str_at(inst, "spec.volumeMount");
        json_t *vol, *av;
        size_t i;
        int rc;

        if (has_eph == has_per)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "spec.volume: exactly one of ephemeral and persistent must be "
                                    "set");
        if (has_eph) {
                struct tsr_quantity cap;
                char b[TSR_QUANTITY_STR_MAX];
                bool present;

                if ((rc = quantity_at(inst, "Instance", "spec.volume.ephemeral.capacity", &cap,
                                      &present, diag)))
                        return rc;
                if (!present || cap.value <= 0)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "spec.volume.ephemeral.capacity must be positive");
                vol = json_pack("{s:s, s:{s:s}}", "name", "workspace", "emptyDir", "sizeLimit",
                                tsr_quantity_format(&cap, b));
        } else if (!*str_at(per, "name")) {
                return tsr_diag_set(diag, TSR_EINVAL, "spec.volume.persistent.name is required");
        } else {
                vol = json_pack("{s:s, s:{s:s}}", "name", "workspace", "persistentVolumeClaim",
                                "claimName", str_at(per, "name"));
        }
        if (!vol || json_array_append_new(volumes, vol) ||
            json_array_append_new(mounts, json_pack("{s:s, s:s}", "name", "workspace", "mountPath",
                                                    *mount ? mount : "/workspace")))
                return TSR_ENOMEM;
        json_array_foreach(at(inst, "spec.additionalVolumes"), i, av)
        {
                if ((rc = additional_volume(av, i, volumes, mounts, diag)))
                        return rc;
        }
        return 0;
}

/* container main. */
static int main_container(json_t *inst, struct req *r, const struct tsr_instance_pod_opts *o,
                          json_t *mounts, json_t **out, struct tsr_diag *diag)
{
        const char *policy = str_at(inst, "spec.imagePullPolicy");
        json_t *c, *limits = json_object(), *requests = json_object(), *ports = json_array();
        json_t *env = json_array(), *p, *privileged, *command;
        char name[32];
        size_t i;
        int rc = TSR_ENOMEM;

        if (!limits || !requests || !ports || !env)
                goto fail;
        if ((rc = host_resources(r, o, limits, requests, diag)) ||
            (rc = accel_resources(r, limits, requests)))
                goto fail;
        rc = TSR_ENOMEM;
        json_array_foreach(at(inst, "spec.ports"), i, p)
        {
                const char *proto = str_at(p, "protocol");

                port_name(p, name, sizeof(name));
                if (json_array_append_new(
                        ports, json_pack("{s:s, s:I, s:s}", "name", name, "containerPort",
                                         json_integer_value(json_object_get(p, "port")), "protocol",
                                         *proto ? proto : "TCP")))
                        goto fail;
        }
        json_array_foreach(at(inst, "spec.env"), i, p)
        {
                if (json_array_append_new(env, json_pack("{s:s, s:s}", "name", str_at(p, "name"),
                                                         "value", str_at(p, "value"))))
                        goto fail;
        }
        c = json_pack("{s:s, s:s, s:s, s:{s:i}, s:{s:o, s:o}, s:O}", "name", "main", "image",
                      str_at(inst, "spec.image"), "imagePullPolicy",
                      *policy ? policy : "IfNotPresent", "securityContext", "runAsUser", 0,
                      "resources", "limits", limits, "requests", requests, "volumeMounts", mounts);
        limits = requests = NULL;
        if (!c)
                goto fail;
        privileged = at(inst, "spec.privileged"); /* json_is_true reads its argument twice */
        command = at(inst, "spec.command");
        if ((json_is_true(privileged) && json_object_set_new(json_object_get(c, "securityContext"),
                                                             "privileged", json_true())) ||
            (json_array_size(command) && json_object_set(c, "command", command)) ||
            (json_array_size(env) && json_object_set(c, "env", env)) ||
            (json_array_size(ports) && json_object_set(c, "ports", ports))) {
                json_decref(c);
                goto fail;
        }
        json_decref(ports);
        json_decref(env);
        *out = c;
        return 0;
fail:
        json_decref(limits);
        json_decref(requests);
        json_decref(ports);
        json_decref(env);
        return rc;
}

/* container sshd. */
static json_t *sshd_container(json_t *inst, const struct req *r,
                              const struct tsr_instance_pod_opts *o)
{
        const char *policy = str_at(inst, "spec.imagePullPolicy");
        const char *mount = str_at(inst, "spec.volumeMount");
        json_t *c, *res;
        char key[TSR_KEY_MAX];

        c = json_pack("{s:s, s:s, s:s, s:b, s:b, s:{s:{s:[s, s]}}, s:[{s:s, s:s}], "
                      "s:[{s:s, s:s, s:b}]}",
                      "name", "sshd", "image",
                      o->sshd_image && *o->sshd_image ? o->sshd_image : TSR_INSTANCE_SSHD_IMAGE,
                      "imagePullPolicy", *policy ? policy : "IfNotPresent", "stdin", true, "tty",
                      true, "securityContext", "capabilities", "add", "SYS_ADMIN", "SYS_PTRACE",
                      "env", "name", "VOLUME_MOUNT_PATH", "value", *mount ? mount : "/workspace",
                      "volumeMounts", "name", "sshd-authorized-keys", "mountPath",
                      TSR_INSTANCE_SSHD_KEYS, "readOnly", true);
        if (!c || !r->accelerated || !r->count)
                return c;
        res = json_pack("{s:{}, s:{}}", "limits", "requests");
        if (!res || tsr_key_format(key, r->m, TSR_KEY_VISIBILITY, NULL) ||
            set_n(json_object_get(res, "limits"), key, r->count) ||
            set_n(json_object_get(res, "requests"), key, r->count)) {
                json_decref(res);
                json_decref(c);
                return NULL;
        }
        if (json_object_set_new(c, "resources", res)) { /* res released */
                json_decref(c);
                return NULL;
        }
        return c;
}

static json_t *service_of(json_t *inst, const struct req *r)
{
        json_t *ports = at(inst, "spec.ports"), *list = json_array(), *p, *svc;
        char name[32];
        size_t i;

        if (!list)
                return NULL;
        json_array_foreach(ports, i, p)
        {
                json_int_t port = json_integer_value(json_object_get(p, "port"));
                const char *proto = str_at(p, "protocol");

                port_name(p, name, sizeof(name));
                if (json_array_append_new(
                        list, json_pack("{s:s, s:I, s:s, s:I}", "name", name, "port", port,
                                        "protocol", *proto ? proto : "TCP", "targetPort", port))) {
                        json_decref(list);
                        return NULL;
                }
        }
        svc = json_pack("{s:s, s:s, s:o, s:{s:s, s:{s:s}, s:o}}", "apiVersion", "v1", "kind",
                        "Service", "metadata", meta(r, false), "spec", "type", "NodePort",
                        "selector", TSR_INSTANCE_LABEL, r->uid, "ports", list);
        return svc;
}

int tsr_instance_pod_build(json_t *inst, json_t *itype, const struct tsr_instance_pod_opts *opts,
                           json_t **pod, json_t **service, struct tsr_diag *diag)
{
        json_t *volumes = json_array(), *mounts = json_array(), *containers = json_array();
        json_t *spec = NULL, *p = NULL, *svc = NULL, *main_c = NULL, *v;
        const char *node = str_at(inst, "spec.nodeName");
        struct req r;
        int rc;

        if (!volumes || !mounts || !containers) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        if ((rc = read_req(inst, itype, &r, diag)) ||
            (rc = check_ports(at(inst, "spec.ports"), diag)) ||
            (rc = volumes_of(inst, volumes, mounts, diag)) ||
            (rc = main_container(inst, &r, opts, mounts, &main_c, diag)))
                goto out;
        rc = TSR_ENOMEM;
        if (json_array_append_new(containers, main_c))
                goto nomem;
        if (r.ssh &&
            (json_array_append_new(containers, sshd_container(inst, &r, opts)) ||
             json_array_append_new(
                 volumes, json_pack("{s:s, s:{s:s, s:i}}", "name", "sshd-authorized-keys", "secret",
                                    "secretName", str_at(inst, "spec.sshPublicKey.name"),
                                    "defaultMode", 0600))))
                goto nomem;
        spec = json_pack("{s:b, s:b, s:b, s:O, s:O}", "hostIPC", true,
                         "automountServiceAccountToken", false, "enableServiceLinks", false,
                         "containers", containers, "volumes", volumes);
        if (!spec)
                goto nomem;
        if ((r.ssh && json_object_set_new(spec, "shareProcessNamespace", json_true())) ||
            (r.accelerated && opts->runtime_class && *opts->runtime_class &&
             json_object_set_new(spec, "runtimeClassName", json_string(opts->runtime_class))) ||
            (*node &&
             json_object_set_new(spec, "nodeSelector", json_pack("{s:s}", HOSTNAME_LABEL, node))))
                goto nomem;
        v = at(inst, "spec.imagePullSecret.name");
        if (json_is_string(v) && *json_string_value(v) &&
            json_object_set_new(spec, "imagePullSecrets", json_pack("[{s:O}]", "name", v)))
                goto nomem;
        p = json_pack("{s:s, s:s, s:o, s:O}", "apiVersion", "v1", "kind", "Pod", "metadata",
                      meta(&r, true), "spec", spec);
        if (!p)
                goto nomem;
        if (json_array_size(at(inst, "spec.ports")) && !(svc = service_of(inst, &r)))
                goto nomem;
        *pod = p;
        *service = svc;
        p = NULL;
        rc = 0;
        goto out;
nomem:
        rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
out:
        json_decref(p);
        json_decref(spec);
        json_decref(volumes);
        json_decref(mounts);
        json_decref(containers);
        return rc;
}

/* ---- reading the Pod back ----------------------------------------------------------------- */

/* The accelerator fields of the Instance CRD's status.allocations[].accelerators[]. */
static const char *const accel_fields[] = {
    "id",
    "index",
    "mode",
    "allocated",
    "remaining",
    "allocatedSlices",
    "allocatedProfiles",
    "remainingProfiles",
    "allocatedPhysicalProfile",
    "allocatedPhysicalPlacements",
    "allocatedPhysicalID",
    "allocatedLogicalPlacements",
};

static json_t *group_by_id(json_t *groups, const char *id)
{
        json_t *g;
        size_t i;

        json_array_foreach(groups, i, g)
        {
                if (!strcmp(str_at(g, "id"), id))
                        return g;
        }
        return NULL;
}

static bool has_accel(json_t *accels, const char *id)
{
        json_t *a;
        size_t i;

        json_array_foreach(accels, i, a)
        {
                if (!strcmp(str_at(a, "id"), id))
                        return true;
        }
        return false;
}

/* Appends group src's accelerators (CRD fields only) to the group of its id in groups. */
static int merge_group(json_t *groups, json_t *src)
{
        const char *id = str_at(src, "id");
        json_t *g = group_by_id(groups, id), *a;
        size_t i;

        if (!g) {
                g = json_pack("{s:s, s:s, s:[]}", "id", id, "manufacturer",
                              str_at(src, "manufacturer"), "accelerators");
                if (!g || json_array_append_new(groups, g))
                        return TSR_ENOMEM;
        }
        json_array_foreach(json_object_get(src, "accelerators"), i, a)
        {
                json_t *out, *accels = json_object_get(g, "accelerators");

                if (has_accel(accels, str_at(a, "id")))
                        continue;
                if (!(out = json_object()) || json_array_append_new(accels, out))
                        return TSR_ENOMEM;
                for (size_t f = 0; f < sizeof(accel_fields) / sizeof(accel_fields[0]); f++) {
                        json_t *v = json_object_get(a, accel_fields[f]);

                        if (v && json_object_set(out, accel_fields[f], v))
                                return TSR_ENOMEM;
                }
        }
        return 0;
}

int tsr_instance_allocations(json_t *pod, json_t **out, struct tsr_diag *diag)
{
        struct tsr_container_allocation *alloc;
        const char *text, *key;
        json_t *root, *groups, *c;
        size_t n = 0, i;
        int rc;

        /* The annotation key has dots: read it by hand, not through the dotted path. */
        text = json_string_value(
            json_object_get(at(pod, "metadata.annotations"), TSR_ALLOC_ANNOTATION));
        if (!text) {
                *out = NULL;
                return 0;
        }
        alloc = calloc(TSR_ALLOC_CONTAINERS_MAX, sizeof(*alloc));
        if (!alloc)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        rc = tsr_alloc_annotation_decode(text, alloc, TSR_ALLOC_CONTAINERS_MAX, &n, diag);
        free(alloc);
        if (rc)
                return rc;
        root = json_loads(text, 0, NULL);
        groups = json_array();
        rc = root && groups ? 0 : TSR_ENOMEM;
        json_object_foreach(root, key, c)
        {
                json_t *g;

                json_array_foreach(at(c, "devices.groups"), i, g)
                {
                        if (!rc)
                                rc = merge_group(groups, g);
                }
        }
        json_decref(root);
        if (rc) {
                json_decref(groups);
                return tsr_diag_set(diag, rc, "out of memory");
        }
        *out = groups;
        return 0;
}

/* The condition of type type of the Pod, or NULL. */
static json_t *condition(json_t *pod, const char *type)
{
        json_t *c;
        size_t i;

        json_array_foreach(at(pod, "status.conditions"), i, c)
        {
                if (!strcmp(str_at(c, "type"), type))
                        return c;
        }
        return NULL;
}

/* [{ip}] from list (of {ip} objects), else from the single address one. */
static json_t *ips(json_t *list, const char *one)
{
        json_t *out = json_array(), *e;
        size_t i;

        json_array_foreach(list, i, e)
        {
                if (*str_at(e, "ip"))
                        json_array_append_new(out, json_pack("{s:s}", "ip", str_at(e, "ip")));
        }
        if (out && !json_array_size(out) && one && *one)
                json_array_append_new(out, json_pack("{s:s}", "ip", one));
        return out;
}

/* The Node's ExternalIP then InternalIP addresses as [{ip}]. */
static json_t *node_ips(json_t *node)
{
        static const char *const types[] = {"ExternalIP", "InternalIP"};
        json_t *out = json_array(), *a;
        size_t i;

        for (size_t t = 0; out && t < 2; t++)
                json_array_foreach(at(node, "status.addresses"), i, a)
                {
                        if (!strcmp(str_at(a, "type"), types[t]) && *str_at(a, "address"))
                                json_array_append_new(
                                    out, json_pack("{s:s}", "ip", str_at(a, "address")));
                }
        return out;
}

/* spec.ports with each Service port's nodePort, or NULL until every one has one. */
static json_t *status_ports(json_t *inst, json_t *svc)
{
        json_t *out = json_array(), *p, *sp;
        size_t i, k;

        json_array_foreach(at(inst, "spec.ports"), i, p)
        {
                json_t *node_port = NULL, *e;
                char name[32];

                port_name(p, name, sizeof(name));
                json_array_foreach(at(svc, "spec.ports"), k, sp)
                {
                        if (!strcmp(str_at(sp, "name"), name) &&
                            json_integer_value(json_object_get(sp, "nodePort")) > 0)
                                node_port = json_object_get(sp, "nodePort");
                }
                e = node_port ? json_deep_copy(p) : NULL;
                if (!e || json_object_set(e, "nodePort", node_port) ||
                    (!json_object_get(e, "protocol") &&
                     json_object_set_new(e, "protocol", json_string("TCP"))) ||
                    json_array_append_new(out, e)) {
                        json_decref(out);
                        return NULL;
                }
        }
        return out;
}

/* Phase and message of a live Pod. */
static void pod_phase(json_t *pod, const char **phase, char *msg, size_t len)
{
        const char *p = str_at(pod, "status.phase");
        json_t *ready = condition(pod, "Ready"), *sched = condition(pod, "PodScheduled");

        msg[0] = '\0';
        if (!strcmp(p, "Running") && !strcmp(str_at(ready, "status"), "True")) {
                *phase = TSR_INSTANCE_READY;
        } else if (!strcmp(p, "Succeeded") || !strcmp(p, "Failed")) {
                *phase = TSR_INSTANCE_FAILED;
                const char *reason = str_at(pod, "status.reason");
                const char *why = str_at(pod, "status.message");

                snprintf(msg, len,
                         "its Pod %s%s%s%s%s%s; stop and start the Instance to run it "
                         "again",
                         !strcmp(p, "Failed") ? "failed" : "ended", *reason ? " (" : "", reason,
                         *reason ? ")" : "", *why ? ": " : "", why);
        } else {
                *phase = TSR_INSTANCE_STARTING;
                if (json_array_size(at(pod, "spec.schedulingGates")))
                        snprintf(msg, len, "waiting for admission by Kueue (queue %s)",
                                 json_string_value(
                                     json_object_get(at(pod, "metadata.labels"), QUEUE_LABEL)));
                else if (sched && strcmp(str_at(sched, "status"), "True") &&
                         *str_at(sched, "message"))
                        snprintf(msg, len, "not scheduled: %s", str_at(sched, "message"));
                else if (!*str_at(pod, "spec.nodeName"))
                        snprintf(msg, len, "waiting to be scheduled");
                else
                        snprintf(msg, len, "waiting for the Pod to be ready on %s",
                                 str_at(pod, "spec.nodeName"));
        }
}

int tsr_instance_pod_status(json_t *inst, json_t *pod, json_t *svc, json_t *node, json_t **out,
                            struct tsr_diag *diag)
{
        const char *phase, *node_name = str_at(pod, "spec.nodeName");
        json_t *st, *alloc = NULL, *v;
        char msg[512];
        int rc;

        if ((rc = tsr_instance_allocations(pod, &alloc, diag)))
                return rc;
        pod_phase(pod, &phase, msg, sizeof(msg));
        st = json_pack("{s:s}", "phase", phase);
        rc = st ? 0 : TSR_ENOMEM;
        if (!rc && *msg)
                rc = json_object_set_new(st, "phaseMessage", json_string(msg));
        if (!rc && *node_name)
                rc = json_object_set_new(st, "nodeName", json_string(node_name));
        if (!rc && *node_name) {
                v = node_ips(node);
                if (v && !json_array_size(v)) {
                        json_decref(v);
                        v = ips(at(pod, "status.hostIPs"), str_at(pod, "status.hostIP"));
                }
                if (v && json_array_size(v))
                        rc = json_object_set_new(st, "hostIPs", v);
                else
                        json_decref(v);
        }
        if (!rc) {
                v = ips(at(pod, "status.podIPs"), str_at(pod, "status.podIP"));
                if (v && json_array_size(v))
                        rc = json_object_set_new(st, "podIPs", v);
                else
                        json_decref(v);
        }
        if (!rc && json_array_size(at(inst, "spec.ports")) && (v = status_ports(inst, svc)))
                rc = json_object_set_new(st, "ports", v);
        if (!rc && alloc) {
                rc = json_object_set_new(st, "allocations", alloc);
                alloc = NULL;
        }
        json_decref(alloc);
        if (rc || !st) {
                json_decref(st);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        *out = st;
        return 0;
}
