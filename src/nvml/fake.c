/*
 * fake.c - in-memory GPUs for the simulator and tests. Placement legality and overlap use the
 * catalog's placement tables through core/geometry, the same rules the ledger counts with.
 *
 * Every GPU keeps its GPU instances sorted by start; each holds up to TSR_FAKE_CI_MAX compute
 * instances. A mutation runs as: hook "<op>:before", injected fault, the change, auto-save, hook
 * "<op>:after".
 */
#include "nvml/fake.h"

#include "base/atomic_file.h"
#include "base/err.h"
#include "base/fnv.h"
#include "core/geometry.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_GPUS_MAX 64
/* NVML_GPU_INSTANCE_PROFILE_COUNT: indices at or past it are invalid arguments. */
#define FAKE_PROFILE_INDICES 0x12

struct fake_gi {
        unsigned id, profile_id, start, size, slices;
        unsigned n_ci;
        struct tsr_fake_ci ci[TSR_FAKE_CI_MAX];
};

struct fake_gpu {
        bool mig, pending;
        size_t n;
        struct fake_gi gi[TSR_GPU_INSTANCES_MAX];
};

struct fake_fault {
        int err;
        unsigned times;
};

struct tsr_fake_gpus {
        char node[128];
        const struct tsr_product *product;
        unsigned count;
        unsigned seq; /* compute instances ever created: feeds MIG UUIDs */
        struct fake_gpu *gpus;
        uint32_t starts[TSR_MIG_PROFILES_MAX]; /* the driver's legal starts, per product profile */
        struct fake_fault fault[TSR_FAKE_OP__COUNT];
        void (*hook)(void *arg, const char *point);
        void *hook_arg;
        char *persist;
        char detail[160];
};

static const char *const op_names[TSR_FAKE_OP__COUNT] = {
    [TSR_FAKE_GI_CREATE] = "gi_create",   [TSR_FAKE_CI_CREATE] = "ci_create",
    [TSR_FAKE_CI_DESTROY] = "ci_destroy", [TSR_FAKE_GI_DESTROY] = "gi_destroy",
    [TSR_FAKE_GI_LIST] = "gi_list",       [TSR_FAKE_PLACEMENTS] = "placements",
};

static void uuid_from(uint64_t a, uint64_t b, const char *prefix, char *out)
{
        snprintf(out, TSR_GPU_UUID_MAX, "%s%08x-%04x-%04x-%04x-%012llx", prefix,
                 (unsigned)(a >> 32), (unsigned)((a >> 16) & 0xffff), (unsigned)(a & 0xffff),
                 (unsigned)(b >> 48), (unsigned long long)(b & UINT64_C(0xffffffffffff)));
}

static uint64_t hash2(const char *s, unsigned i, unsigned salt)
{
        uint64_t h = tsr_fnv1a64_str(s);

        h = tsr_fnv1a64_update(h, &i, sizeof(i));
        return tsr_fnv1a64_update(h, &salt, sizeof(salt));
}

static int alloc_gpus(const char *node_name, const struct tsr_product *product, unsigned count,
                      struct tsr_fake_gpus **out)
{
        struct tsr_fake_gpus *f;

        if (!product || count == 0 || count > FAKE_GPUS_MAX)
                return TSR_EINVAL;
        f = calloc(1, sizeof(*f));
        if (!f)
                return TSR_ENOMEM;
        f->gpus = calloc(count, sizeof(*f->gpus));
        if (!f->gpus) {
                free(f);
                return TSR_ENOMEM;
        }
        snprintf(f->node, sizeof(f->node), "%s", node_name);
        f->product = product;
        f->count = count;
        for (size_t i = 0; i < product->n_profiles && i < TSR_MIG_PROFILES_MAX; i++)
                f->starts[i] = product->profiles[i].starts;
        *out = f;
        return 0;
}

int tsr_fake_gpus_new(const char *node_name, const struct tsr_product *product, unsigned count,
                      const bool *mig_on, struct tsr_fake_gpus **out)
{
        int rc = alloc_gpus(node_name, product, count, out);

        for (unsigned i = 0; !rc && i < count; i++)
                (*out)->gpus[i].mig = (*out)->gpus[i].pending =
                    mig_on && mig_on[i] && tsr_product_has_mig(product);
        return rc;
}

/* Parses MODES of a spec into mode[0..count); "" keeps mode as it is. */
static int parse_modes(const char *s, size_t len, unsigned count, bool *mode)
{
        if (len == 0 || (len == 3 && !strncmp(s, "off", 3)) ||
            (len == 3 && !strncmp(s, "mig", 3))) {
                for (unsigned i = 0; len && i < count; i++)
                        mode[i] = s[0] == 'm';
                return 0;
        }
        if (len != count)
                return TSR_EINVAL;
        for (unsigned i = 0; i < count; i++) {
                if (s[i] != '0' && s[i] != '1')
                        return TSR_EINVAL;
                mode[i] = s[i] == '1';
        }
        return 0;
}

int tsr_fake_gpus_from_spec(const char *node_name, const char *spec, struct tsr_fake_gpus **out,
                            struct tsr_diag *diag)
{
        const char *c1 = strchr(spec, ':'), *c2, *c3, *end;
        char name[TSR_GPU_NAME_MAX], *num_end;
        const struct tsr_product *p;
        bool mig[FAKE_GPUS_MAX] = {0}, pending[FAKE_GPUS_MAX];
        unsigned long count;
        int rc;

        if (!c1 || (size_t)(c1 - spec) >= sizeof(name))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "\"%s\": want PRODUCT:COUNT[:MODES[:PENDING]]", spec);
        memcpy(name, spec, (size_t)(c1 - spec));
        name[c1 - spec] = '\0';
        p = tsr_catalog_product_by_name(name);
        if (!p)
                return tsr_diag_set(diag, TSR_EINVAL, "unknown product \"%s\"", name);
        errno = 0;
        count = strtoul(c1 + 1, &num_end, 10);
        if (num_end == c1 + 1 || errno || count == 0 || count > FAKE_GPUS_MAX ||
            (*num_end && *num_end != ':'))
                return tsr_diag_set(diag, TSR_EINVAL, "GPU count must be within [1, %d]",
                                    FAKE_GPUS_MAX);
        c2 = *num_end ? num_end + 1 : num_end;
        c3 = strchr(c2, ':');
        end = c3 ? c3 : c2 + strlen(c2);
        rc = parse_modes(c2, (size_t)(end - c2), (unsigned)count, mig);
        memcpy(pending, mig, sizeof(pending));
        if (!rc && c3)
                rc = parse_modes(c3 + 1, strlen(c3 + 1), (unsigned)count, pending);
        if (rc)
                return tsr_diag_set(diag, rc,
                                    "MIG modes must be \"mig\", \"off\" or one 0/1 per GPU");
        rc = alloc_gpus(node_name, p, (unsigned)count, out);
        if (rc)
                return tsr_diag_set(diag, rc, "cannot create the GPUs");
        for (unsigned i = 0; i < count; i++) {
                (*out)->gpus[i].mig = mig[i] && tsr_product_has_mig(p);
                (*out)->gpus[i].pending = pending[i] && tsr_product_has_mig(p);
        }
        return 0;
}

void tsr_fake_gpus_free(struct tsr_fake_gpus *f)
{
        if (!f)
                return;
        free(f->persist);
        free(f->gpus);
        free(f);
}

const struct tsr_product *tsr_fake_gpus_product(const struct tsr_fake_gpus *f)
{
        return f->product;
}

/* ---- the model ---- */

static struct fake_gpu *gpu_of(const struct tsr_fake_gpus *f, unsigned gpu)
{
        return gpu < f->count ? &f->gpus[gpu] : NULL;
}

static int profile_by_id(const struct tsr_product *p, unsigned id)
{
        for (size_t i = 0; i < p->n_profiles && i < TSR_MIG_PROFILES_MAX; i++)
                if (p->profiles[i].gi_profile_id == id)
                        return (int)i;
        return -1;
}

static struct fake_gi *find_gi(struct fake_gpu *g, unsigned gi_id)
{
        for (size_t i = 0; i < g->n; i++)
                if (g->gi[i].id == gi_id)
                        return &g->gi[i];
        return NULL;
}

static uint32_t occupied(const struct fake_gpu *g)
{
        uint32_t m = 0;

        for (size_t i = 0; i < g->n; i++)
                m |= tsr_geometry_span(g->gi[i].start, g->gi[i].size);
        return m;
}

static int save_if_persistent(struct tsr_fake_gpus *f)
{
        return f->persist ? tsr_fake_gpus_save(f, f->persist) : 0;
}

static int gi_add(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_profile_id, unsigned start,
                  unsigned *gi_id)
{
        struct fake_gpu *g = gpu_of(f, gpu);
        const struct tsr_mig_profile *mp;
        struct fake_gi *in;
        unsigned id = 1, live = 0;
        size_t at = 0;
        int p;

        if (!g)
                return TSR_ENOTFOUND;
        if (!g->mig)
                return TSR_ENOTSUP;
        p = profile_by_id(f->product, gi_profile_id);
        if (p < 0 || !f->starts[p])
                return TSR_EINVAL;
        mp = &f->product->profiles[p];
        for (size_t i = 0; i < g->n; i++)
                live += g->gi[i].profile_id == gi_profile_id;
        if (start >= TSR_MIG_AXIS_MAX || !((f->starts[p] >> start) & 1u) ||
            (occupied(g) & tsr_geometry_span(start, mp->size)) || live >= mp->max_instances ||
            g->n >= TSR_GPU_INSTANCES_MAX)
                return TSR_ENOSPC;
        while (find_gi(g, id))
                id++; /* the lowest unused instance id */
        while (at < g->n && g->gi[at].start < start)
                at++;
        memmove(&g->gi[at + 1], &g->gi[at], (g->n - at) * sizeof(g->gi[0]));
        in = &g->gi[at];
        memset(in, 0, sizeof(*in));
        in->id = id;
        in->profile_id = gi_profile_id;
        in->start = start;
        in->size = mp->size;
        in->slices = mp->compute_slices;
        g->n++;
        *gi_id = id;
        return 0;
}

static struct tsr_fake_ci *ci_find(struct fake_gi *in, unsigned ci_id)
{
        for (unsigned k = 0; k < in->n_ci; k++)
                if (in->ci[k].id == ci_id)
                        return &in->ci[k];
        return NULL;
}

/* Adds a compute instance of slices to in, with the lowest unused id and a fresh MIG UUID. */
static struct tsr_fake_ci *ci_add(struct tsr_fake_gpus *f, unsigned gpu, struct fake_gi *in,
                                  unsigned slices)
{
        struct tsr_fake_ci *ci = &in->ci[in->n_ci];
        unsigned id = 0;

        while (ci_find(in, id))
                id++;
        f->seq++;
        ci->id = id;
        ci->slices = slices;
        uuid_from(hash2(f->node, gpu, 1000 + f->seq), hash2(f->node, in->id, 2000 + f->seq), "MIG-",
                  ci->uuid);
        in->n_ci++;
        return ci;
}

static int ci_add_whole(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id, unsigned *ci_id,
                        char uuid[TSR_GPU_UUID_MAX])
{
        struct fake_gpu *g = gpu_of(f, gpu);
        struct fake_gi *in = g ? find_gi(g, gi_id) : NULL;
        struct tsr_fake_ci *ci;

        if (!in)
                return TSR_ENOTFOUND;
        if (in->n_ci)
                return TSR_ENOSPC; /* one compute instance covers the whole GPU instance */
        ci = ci_add(f, gpu, in, in->slices);
        *ci_id = ci->id;
        if (uuid)
                snprintf(uuid, TSR_GPU_UUID_MAX, "%s", ci->uuid);
        return 0;
}

static void gi_remove(struct fake_gpu *g, struct fake_gi *in)
{
        size_t at = (size_t)(in - g->gi);

        memmove(&g->gi[at], &g->gi[at + 1], (g->n - at - 1) * sizeof(g->gi[0]));
        g->n--;
}

/* ---- the vtable ---- */

static int failed(struct tsr_fake_gpus *f, const char *what, int rc)
{
        if (rc)
                snprintf(f->detail, sizeof(f->detail), "fake %s: %s", what, tsr_strerror(rc));
        return rc;
}

static void hook(struct tsr_fake_gpus *f, enum tsr_fake_op op, const char *when)
{
        char point[32];

        if (!f->hook)
                return;
        snprintf(point, sizeof(point), "%s:%s", op_names[op], when);
        f->hook(f->hook_arg, point);
}

/* Consumes an injected fault of op: its error, or 0 to proceed. */
static int take_fault(struct tsr_fake_gpus *f, enum tsr_fake_op op)
{
        struct fake_fault *ft = &f->fault[op];

        if (!ft->times)
                return 0;
        ft->times--;
        return failed(f, op_names[op], ft->err);
}

/* Runs the "before" hook, then take_fault. */
static int enter(struct tsr_fake_gpus *f, enum tsr_fake_op op)
{
        hook(f, op, "before");
        return take_fault(f, op);
}

/* Saves a successful mutation and runs the "after" hook. */
static int leave(struct tsr_fake_gpus *f, enum tsr_fake_op op, int rc)
{
        if (rc)
                return failed(f, op_names[op], rc);
        rc = save_if_persistent(f);
        if (rc)
                return failed(f, "save", rc);
        hook(f, op, "after");
        return 0;
}

static int fake_driver_version(void *be, char *out, size_t len)
{
        (void)be;
        if (len < sizeof("fake"))
                return TSR_ETOOBIG;
        memcpy(out, "fake", sizeof("fake"));
        return 0;
}

static int fake_count(void *be, unsigned *out)
{
        *out = ((struct tsr_fake_gpus *)be)->count;
        return 0;
}

static int fake_info(void *be, unsigned gpu, struct tsr_gpu_info *out)
{
        struct tsr_fake_gpus *f = be;
        struct fake_gpu *g = gpu_of(f, gpu);

        if (!g)
                return failed(f, "device_info", TSR_ENOTFOUND);
        memset(out, 0, sizeof(*out));
        snprintf(out->name, sizeof(out->name), "%s", f->product->name);
        uuid_from(hash2(f->node, gpu, 0), hash2(f->node, gpu, 1), "GPU-", out->uuid);
        /* HGX-style bus numbers, deterministic per index. */
        snprintf(out->bus_id, sizeof(out->bus_id), "00000000:%02X:00.0", 0x8D + 4 * gpu);
        out->memory_mib = f->product->vram_mib;
        out->mig_capable = tsr_product_has_mig(f->product);
        out->mig_current = g->mig;
        out->mig_pending = g->pending;
        return 0;
}

static int fake_profile_info(void *be, unsigned gpu, unsigned nvml_index,
                             struct tsr_gpu_profile_info *out)
{
        struct tsr_fake_gpus *f = be;
        const struct tsr_product *p = f->product;

        if (!gpu_of(f, gpu))
                return failed(f, "profile_info", TSR_ENOTFOUND);
        if (nvml_index >= FAKE_PROFILE_INDICES)
                return failed(f, "profile_info", TSR_EINVAL);
        for (size_t i = 0; i < p->n_profiles && i < TSR_MIG_PROFILES_MAX; i++) {
                const struct tsr_mig_profile *mp = &p->profiles[i];

                if (mp->nvml_index != nvml_index || !f->starts[i])
                        continue;
                out->id = mp->gi_profile_id;
                out->slices = mp->compute_slices;
                out->instance_count = mp->max_instances;
                out->memory_mib = mp->memory_mib;
                return 0;
        }
        return failed(f, "profile_info", TSR_ENOTSUP);
}

static int fake_placements(void *be, unsigned gpu, unsigned gi_profile_id,
                           struct tsr_gpu_placement *out, size_t max, size_t *n)
{
        struct tsr_fake_gpus *f = be;
        int p = profile_by_id(f->product, gi_profile_id);
        size_t k = 0;
        int rc = take_fault(f, TSR_FAKE_PLACEMENTS);

        if (rc)
                return rc;
        if (!gpu_of(f, gpu))
                return failed(f, "placements", TSR_ENOTFOUND);
        if (p < 0 || !f->starts[p])
                return failed(f, "placements", TSR_EINVAL);
        if (__builtin_popcount(f->starts[p]) > (int)max)
                return failed(f, "placements", TSR_ETOOBIG);
        for (unsigned s = 0; s < TSR_MIG_AXIS_MAX; s++)
                if ((f->starts[p] >> s) & 1u)
                        out[k++] = (struct tsr_gpu_placement){s, f->product->profiles[p].size};
        *n = k;
        return 0;
}

static int fake_gi_create(void *be, unsigned gpu, unsigned gi_profile_id, unsigned start,
                          unsigned *gi_id)
{
        struct tsr_fake_gpus *f = be;
        int rc = enter(f, TSR_FAKE_GI_CREATE);

        return rc ? rc : leave(f, TSR_FAKE_GI_CREATE, gi_add(f, gpu, gi_profile_id, start, gi_id));
}

static int fake_ci_create(void *be, unsigned gpu, unsigned gi_id, unsigned *ci_id,
                          char uuid[TSR_GPU_UUID_MAX])
{
        struct tsr_fake_gpus *f = be;
        int rc = enter(f, TSR_FAKE_CI_CREATE);

        return rc ? rc : leave(f, TSR_FAKE_CI_CREATE, ci_add_whole(f, gpu, gi_id, ci_id, uuid));
}

static int ci_remove(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id, unsigned ci_id)
{
        struct fake_gpu *g = gpu_of(f, gpu);
        struct fake_gi *in = g ? find_gi(g, gi_id) : NULL;
        struct tsr_fake_ci *ci = in ? ci_find(in, ci_id) : NULL;
        size_t k;

        if (!ci)
                return TSR_ENOTFOUND;
        k = (size_t)(ci - in->ci);
        memmove(&in->ci[k], &in->ci[k + 1], (in->n_ci - k - 1) * sizeof(in->ci[0]));
        in->n_ci--;
        return 0;
}

static int fake_ci_destroy(void *be, unsigned gpu, unsigned gi_id, unsigned ci_id)
{
        struct tsr_fake_gpus *f = be;
        int rc = enter(f, TSR_FAKE_CI_DESTROY);

        return rc ? rc : leave(f, TSR_FAKE_CI_DESTROY, ci_remove(f, gpu, gi_id, ci_id));
}

static int gi_remove_idle(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id)
{
        struct fake_gpu *g = gpu_of(f, gpu);
        struct fake_gi *in = g ? find_gi(g, gi_id) : NULL;

        if (!in)
                return TSR_ENOTFOUND;
        if (in->n_ci)
                return TSR_EINUSE;
        gi_remove(g, in);
        return 0;
}

static int fake_gi_destroy(void *be, unsigned gpu, unsigned gi_id)
{
        struct tsr_fake_gpus *f = be;
        int rc = enter(f, TSR_FAKE_GI_DESTROY);

        return rc ? rc : leave(f, TSR_FAKE_GI_DESTROY, gi_remove_idle(f, gpu, gi_id));
}

int tsr_fake_gpus_ci_list(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id,
                          struct tsr_fake_ci *out, size_t max, size_t *n)
{
        struct fake_gpu *g = gpu_of(f, gpu);
        struct fake_gi *in = g ? find_gi(g, gi_id) : NULL;

        if (!in)
                return TSR_ENOTFOUND;
        if (in->n_ci > max)
                return TSR_ETOOBIG;
        memcpy(out, in->ci, in->n_ci * sizeof(in->ci[0]));
        *n = in->n_ci;
        return 0;
}

static int fake_gi_list(void *be, unsigned gpu, struct tsr_gpu_instance *out, size_t max, size_t *n)
{
        struct tsr_fake_gpus *f = be;
        struct fake_gpu *g = gpu_of(f, gpu);
        int rc = take_fault(f, TSR_FAKE_GI_LIST);

        if (rc)
                return rc;
        if (!g)
                return failed(f, "gi_list", TSR_ENOTFOUND);
        if (g->n > max)
                return failed(f, "gi_list", TSR_ETOOBIG);
        for (size_t i = 0; i < g->n; i++) {
                const struct fake_gi *in = &g->gi[i];

                out[i] = (struct tsr_gpu_instance){
                    .gi_id = in->id,
                    .gi_profile_id = in->profile_id,
                    .start = in->start,
                    .size = in->size,
                    .slices = in->slices,
                    .n_ci = in->n_ci,
                    .ci_id = in->n_ci ? in->ci[0].id : 0,
                    .ci_slices = in->n_ci ? in->ci[0].slices : 0,
                };
                if (in->n_ci)
                        memcpy(out[i].mig_uuid, in->ci[0].uuid, sizeof(out[i].mig_uuid));
        }
        *n = g->n;
        return 0;
}

static const char *fake_error_detail(void *be)
{
        return ((struct tsr_fake_gpus *)be)->detail;
}

const struct tsr_gpu_ops tsr_fake_gpu_ops = {
    .driver_version = fake_driver_version,
    .device_count = fake_count,
    .device_info = fake_info,
    .profile_info = fake_profile_info,
    .placements = fake_placements,
    .gi_create = fake_gi_create,
    .ci_create = fake_ci_create,
    .ci_destroy = fake_ci_destroy,
    .gi_destroy = fake_gi_destroy,
    .gi_list = fake_gi_list,
    .error_detail = fake_error_detail,
};

/* ---- what others do behind tessera's back ---- */

int tsr_fake_gpus_set_mig_mode(struct tsr_fake_gpus *f, unsigned gpu, bool on)
{
        struct fake_gpu *g = gpu_of(f, gpu);

        if (!g)
                return TSR_ENOTFOUND;
        if (on && !tsr_product_has_mig(f->product))
                return TSR_ENOTSUP;
        if (g->n)
                return TSR_EINUSE;
        g->mig = g->pending = on;
        return save_if_persistent(f);
}

int tsr_fake_gpus_set_mig_pending(struct tsr_fake_gpus *f, unsigned gpu, bool on)
{
        struct fake_gpu *g = gpu_of(f, gpu);

        if (!g)
                return TSR_ENOTFOUND;
        if (on && !tsr_product_has_mig(f->product))
                return TSR_ENOTSUP;
        g->pending = on;
        return save_if_persistent(f);
}

int tsr_fake_gpus_set_driver_starts(struct tsr_fake_gpus *f, unsigned gi_profile_id,
                                    uint32_t starts)
{
        int p = profile_by_id(f->product, gi_profile_id);

        if (p < 0)
                return TSR_ENOTFOUND;
        f->starts[p] = starts;
        return save_if_persistent(f);
}

void tsr_fake_gpus_fail(struct tsr_fake_gpus *f, enum tsr_fake_op op, int err, unsigned times)
{
        f->fault[op] = (struct fake_fault){err, times};
}

int tsr_fake_gpus_vanish(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id)
{
        struct fake_gpu *g = gpu_of(f, gpu);
        struct fake_gi *in = g ? find_gi(g, gi_id) : NULL;

        if (!in)
                return TSR_ENOTFOUND;
        gi_remove(g, in);
        return save_if_persistent(f);
}

int tsr_fake_gpus_subdivide(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_id)
{
        struct fake_gpu *g = gpu_of(f, gpu);
        struct fake_gi *in = g ? find_gi(g, gi_id) : NULL;

        if (!in)
                return TSR_ENOTFOUND;
        if (in->slices < 2)
                return TSR_EINVAL;
        in->n_ci = 0;
        ci_add(f, gpu, in, 1);
        ci_add(f, gpu, in, in->slices - 1);
        return save_if_persistent(f);
}

int tsr_fake_gpus_carve(struct tsr_fake_gpus *f, unsigned gpu, unsigned gi_profile_id,
                        unsigned start, bool with_ci, unsigned *gi_id)
{
        unsigned id, ci_id;
        int rc = gi_add(f, gpu, gi_profile_id, start, &id);

        if (!rc && with_ci)
                rc = ci_add_whole(f, gpu, id, &ci_id, NULL);
        if (!rc)
                *gi_id = id;
        return rc ? rc : save_if_persistent(f);
}

void tsr_fake_gpus_set_hook(struct tsr_fake_gpus *f, void (*fn)(void *arg, const char *point),
                            void *arg)
{
        f->hook = fn;
        f->hook_arg = arg;
}

int tsr_fake_gpus_persist(struct tsr_fake_gpus *f, const char *path)
{
        char *copy = NULL;

        if (path && !(copy = strdup(path)))
                return TSR_ENOMEM;
        free(f->persist);
        f->persist = copy;
        return save_if_persistent(f);
}

/* ---- persistence ---- */

static json_t *state_json(const struct tsr_fake_gpus *f)
{
        json_t *gpus = json_array(), *starts = json_array();
        json_t *root =
            json_pack("{s:s, s:s, s:I, s:o, s:o}", "node", f->node, "product", f->product->name,
                      "seq", (json_int_t)f->seq, "gpus", gpus, "driver_starts", starts);

        if (!root)
                return NULL;
        for (size_t i = 0; i < f->product->n_profiles && i < TSR_MIG_PROFILES_MAX; i++)
                if (json_array_append_new(starts, json_integer(f->starts[i])))
                        goto fail;
        for (unsigned g = 0; g < f->count; g++) {
                const struct fake_gpu *gp = &f->gpus[g];
                json_t *insts = json_array();

                if (json_array_append_new(gpus,
                                          json_pack("{s:b, s:b, s:o}", "mig", gp->mig, "pending",
                                                    gp->pending, "instances", insts)))
                        goto fail;
                for (size_t i = 0; i < gp->n; i++) {
                        const struct fake_gi *in = &gp->gi[i];
                        json_t *cis = json_array();

                        if (json_array_append_new(insts,
                                                  json_pack("{s:i, s:i, s:i, s:i, s:i, s:o}", "id",
                                                            in->id, "profile", in->profile_id,
                                                            "start", in->start, "size", in->size,
                                                            "slices", in->slices, "cis", cis)))
                                goto fail;
                        for (unsigned k = 0; k < in->n_ci; k++)
                                if (json_array_append_new(cis, json_pack("{s:i, s:i, s:s}", "id",
                                                                         in->ci[k].id, "slices",
                                                                         in->ci[k].slices, "uuid",
                                                                         in->ci[k].uuid)))
                                        goto fail;
                }
        }
        return root;
fail:
        json_decref(root);
        return NULL;
}

int tsr_fake_gpus_save(const struct tsr_fake_gpus *f, const char *path)
{
        json_t *root = state_json(f);
        char *text;
        size_t len;
        int rc;

        if (!root)
                return TSR_ENOMEM;
        text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
        json_decref(root);
        if (!text)
                return TSR_ENOMEM;
        len = strlen(text);
        text[len] = '\n'; /* over the terminator: the buffer is bytes from here on */
        rc = tsr_atomic_write(path, text, len + 1, 0644, "fake GPUs", NULL);
        free(text);
        return rc;
}

/* where: the instance's path in the file ("gpus[0].instances[1]"), for the message. */
static int load_gi(const struct tsr_fake_gpus *f, json_t *j, struct fake_gi *in, const char *where,
                   struct tsr_diag *diag)
{
        json_error_t jerr;
        json_t *cis;
        size_t k;
        json_t *c;
        int id, profile, start, size, slices;

        if (json_unpack_ex(j, &jerr, 0, "{s:i, s:i, s:i, s:i, s:i, s:o}", "id", &id, "profile",
                           &profile, "start", &start, "size", &size, "slices", &slices, "cis",
                           &cis))
                return tsr_diag_set(diag, TSR_EPARSE, "%s: %s", where, jerr.text);
        if (!json_is_array(cis) || json_array_size(cis) > TSR_FAKE_CI_MAX)
                return tsr_diag_set(diag, TSR_EPARSE, "%s.cis: not a list of at most %d", where,
                                    TSR_FAKE_CI_MAX);
        if (id < 0 || start < 0 || size <= 0 || start + size > TSR_MIG_AXIS_MAX || slices <= 0)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "%s: id %d, start %d, size %d, slices %d out of range", where,
                                    id, start, size, slices);
        if (profile_by_id(f->product, (unsigned)profile) < 0)
                return tsr_diag_set(diag, TSR_EPARSE, "%s: profile %d is not one of %s's", where,
                                    profile, f->product->name);
        *in = (struct fake_gi){.id = (unsigned)id,
                               .profile_id = (unsigned)profile,
                               .start = (unsigned)start,
                               .size = (unsigned)size,
                               .slices = (unsigned)slices};
        json_array_foreach(cis, k, c)
        {
                const char *uuid;
                int cid, cs;

                if (json_unpack_ex(c, &jerr, 0, "{s:i, s:i, s:s}", "id", &cid, "slices", &cs,
                                   "uuid", &uuid))
                        return tsr_diag_set(diag, TSR_EPARSE, "%s.cis[%zu]: %s", where, k,
                                            jerr.text);
                if (cid < 0 || cs <= 0 || strlen(uuid) >= TSR_GPU_UUID_MAX)
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "%s.cis[%zu]: id %d, slices %d or a uuid of %zu bytes "
                                            "out of range",
                                            where, k, cid, cs, strlen(uuid));
                in->ci[k].id = (unsigned)cid;
                in->ci[k].slices = (unsigned)cs;
                memcpy(in->ci[k].uuid, uuid, strlen(uuid) + 1);
        }
        in->n_ci = (unsigned)json_array_size(cis);
        return 0;
}

static int load_state(json_t *root, struct tsr_fake_gpus **out, struct tsr_diag *diag)
{
        const char *node, *product;
        json_error_t jerr;
        json_int_t seq;
        json_t *gpus, *starts, *g, *s;
        const struct tsr_product *p;
        size_t i, n_starts;
        int rc;

        if (json_unpack_ex(root, &jerr, 0, "{s:s, s:s, s:I, s:o, s:o}", "node", &node, "product",
                           &product, "seq", &seq, "gpus", &gpus, "driver_starts", &starts))
                return tsr_diag_set(diag, TSR_EPARSE, "%s", jerr.text);
        if (!json_is_array(gpus) || !json_is_array(starts))
                return tsr_diag_set(diag, TSR_EPARSE, "gpus and driver_starts must be lists");
        if (seq < 0 || seq > UINT32_MAX)
                return tsr_diag_set(diag, TSR_EPARSE, "seq %lld out of range", (long long)seq);
        p = tsr_catalog_product_by_name(product);
        if (!p)
                return tsr_diag_set(diag, TSR_EPARSE, "product \"%s\" is not in the catalog",
                                    product);
        n_starts = p->n_profiles < TSR_MIG_PROFILES_MAX ? p->n_profiles : TSR_MIG_PROFILES_MAX;
        if (json_array_size(starts) != n_starts)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "driver_starts has %zu entries, %s has %zu profiles",
                                    json_array_size(starts), p->name, n_starts);
        rc = alloc_gpus(node, p, (unsigned)json_array_size(gpus), out);
        if (rc)
                return tsr_diag_set(diag, rc == TSR_EINVAL ? TSR_EPARSE : rc,
                                    "%zu GPUs named for node \"%s\": %s", json_array_size(gpus),
                                    node, rc == TSR_EINVAL ? "out of range" : tsr_strerror(rc));
        (*out)->seq = (unsigned)seq;
        json_array_foreach(starts, i, s)
        {
                if (!json_is_integer(s) || json_integer_value(s) < 0 ||
                    json_integer_value(s) > UINT32_MAX)
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "driver_starts[%zu]: not a count of starts", i);
                (*out)->starts[i] = (uint32_t)json_integer_value(s);
        }
        json_array_foreach(gpus, i, g)
        {
                struct fake_gpu *gp = &(*out)->gpus[i];
                json_t *insts, *in;
                int mig, pending;
                size_t k;

                if (json_unpack_ex(g, &jerr, 0, "{s:b, s:b, s:o}", "mig", &mig, "pending", &pending,
                                   "instances", &insts))
                        return tsr_diag_set(diag, TSR_EPARSE, "gpus[%zu]: %s", i, jerr.text);
                if (!json_is_array(insts) || json_array_size(insts) > TSR_GPU_INSTANCES_MAX)
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "gpus[%zu].instances: not a list of at most %d", i,
                                            TSR_GPU_INSTANCES_MAX);
                gp->mig = mig;
                gp->pending = pending;
                json_array_foreach(insts, k, in)
                {
                        char where[64];

                        snprintf(where, sizeof(where), "gpus[%zu].instances[%zu]", i, k);
                        rc = load_gi(*out, in, &gp->gi[k], where, diag);
                        if (rc)
                                return rc;
                }
                gp->n = json_array_size(insts);
        }
        return 0;
}

int tsr_fake_gpus_load(const char *path, struct tsr_fake_gpus **out, struct tsr_diag *diag)
{
        json_error_t jerr;
        json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        struct tsr_fake_gpus *f = NULL;
        int rc;

        if (!root && json_error_code(&jerr) == json_error_cannot_open_file)
                return tsr_diag_set(diag, TSR_EIO, "%s", jerr.text);
        if (!root)
                return tsr_diag_set(diag, TSR_EPARSE, "line %d column %d: %s", jerr.line,
                                    jerr.column, jerr.text);
        rc = load_state(root, &f, diag);
        json_decref(root);
        if (rc) {
                tsr_fake_gpus_free(f);
                return rc;
        }
        *out = f;
        return 0;
}
