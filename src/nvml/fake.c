/*
 * fake.c - in-memory GPUs for the simulator and tests. Placement legality and overlap use the
 * catalog's placement tables through core/geometry, the same rules the ledger counts with.
 */
#include "nvml/fake.h"

#include "base/err.h"
#include "base/fnv.h"
#include "core/geometry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fake_gpu {
        bool mig;
        size_t n;
        struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
};

struct tsr_fake_gpus {
        char node[128];
        const struct tsr_product *product;
        unsigned count;
        unsigned seq; /* instances ever created: feeds MIG UUIDs */
        struct fake_gpu *gpus;
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

int tsr_fake_gpus_new(const char *node_name, const struct tsr_product *product, unsigned count,
                      const bool *mig_on, struct tsr_fake_gpus **out)
{
        struct tsr_fake_gpus *f;

        if (!product || count == 0 || count > 64)
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
        for (unsigned i = 0; i < count; i++)
                f->gpus[i].mig = mig_on && mig_on[i] && tsr_product_has_mig(product);
        *out = f;
        return 0;
}

void tsr_fake_gpus_free(struct tsr_fake_gpus *f)
{
        if (!f)
                return;
        free(f->gpus);
        free(f);
}

const struct tsr_product *tsr_fake_gpus_product(const struct tsr_fake_gpus *f)
{
        return f->product;
}

static struct fake_gpu *gpu_of(void *be, unsigned gpu)
{
        struct tsr_fake_gpus *f = be;

        return gpu < f->count ? &f->gpus[gpu] : NULL;
}

static int fake_count(void *be, unsigned *out)
{
        *out = ((struct tsr_fake_gpus *)be)->count;
        return 0;
}

static int fake_info(void *be, unsigned gpu, struct tsr_gpu_info *out)
{
        struct tsr_fake_gpus *f = be;
        struct fake_gpu *g = gpu_of(be, gpu);

        if (!g)
                return TSR_ENOTFOUND;
        memset(out, 0, sizeof(*out));
        snprintf(out->name, sizeof(out->name), "%s", f->product->name);
        uuid_from(hash2(f->node, gpu, 0), hash2(f->node, gpu, 1), "GPU-", out->uuid);
        /* HGX-style bus numbers, deterministic per index. */
        snprintf(out->bus_id, sizeof(out->bus_id), "00000000:%02X:00.0", 0x8D + 4 * gpu);
        out->memory_mib = f->product->vram_mib;
        out->mig_current = g->mig;
        return 0;
}

static int fake_set_mig(void *be, unsigned gpu, bool on)
{
        struct tsr_fake_gpus *f = be;
        struct fake_gpu *g = gpu_of(be, gpu);

        if (!g)
                return TSR_ENOTFOUND;
        if (on && !tsr_product_has_mig(f->product))
                return TSR_EINVAL;
        if (g->n)
                return TSR_EINUSE;
        g->mig = on;
        return 0;
}

static int profile_by_id(const struct tsr_product *p, unsigned id)
{
        for (size_t i = 0; i < p->n_profiles; i++)
                if (p->profiles[i].gi_profile_id == id)
                        return (int)i;
        return -1;
}

static uint32_t occupied(const struct fake_gpu *g)
{
        uint32_t m = 0;

        for (size_t i = 0; i < g->n; i++)
                m |= tsr_geometry_span(g->inst[i].start, g->inst[i].size);
        return m;
}

static struct tsr_gpu_instance *find_gi(struct fake_gpu *g, unsigned gi_id)
{
        for (size_t i = 0; i < g->n; i++)
                if (g->inst[i].gi_id == gi_id)
                        return &g->inst[i];
        return NULL;
}

static int fake_gi_create(void *be, unsigned gpu, unsigned gi_profile_id, unsigned start,
                          unsigned *gi_id)
{
        struct tsr_fake_gpus *f = be;
        struct fake_gpu *g = gpu_of(be, gpu);
        const struct tsr_mig_profile *mp;
        struct tsr_gpu_instance *in;
        unsigned id = 1, live = 0;
        int p;

        if (!g || !g->mig)
                return g ? TSR_EINVAL : TSR_ENOTFOUND;
        p = profile_by_id(f->product, gi_profile_id);
        if (p < 0)
                return TSR_EINVAL;
        mp = &f->product->profiles[p];
        for (size_t i = 0; i < g->n; i++)
                live += g->inst[i].gi_profile_id == gi_profile_id;
        if (start >= TSR_MIG_AXIS_MAX || !((mp->starts >> start) & 1u) ||
            (occupied(g) & tsr_geometry_span(start, mp->size)) || live >= mp->max_instances ||
            g->n >= TSR_GPU_INSTANCES_MAX)
                return TSR_ENOSPC;
        while (find_gi(g, id))
                id++; /* the lowest unused instance id */
        /* Keep the list in placement order. */
        size_t at = 0;
        while (at < g->n && g->inst[at].start < start)
                at++;
        memmove(&g->inst[at + 1], &g->inst[at], (g->n - at) * sizeof(g->inst[0]));
        in = &g->inst[at];
        memset(in, 0, sizeof(*in));
        in->gi_id = id;
        in->gi_profile_id = gi_profile_id;
        in->start = start;
        in->size = mp->size;
        g->n++;
        *gi_id = id;
        return 0;
}

static int fake_ci_create(void *be, unsigned gpu, unsigned gi_id, unsigned *ci_id,
                          char uuid[TSR_GPU_UUID_MAX])
{
        struct tsr_fake_gpus *f = be;
        struct fake_gpu *g = gpu_of(be, gpu);
        struct tsr_gpu_instance *in = g ? find_gi(g, gi_id) : NULL;

        if (!in)
                return TSR_ENOTFOUND;
        if (in->n_ci)
                return TSR_ENOSPC; /* one compute instance covers the whole GPU instance */
        f->seq++;
        in->n_ci = 1;
        in->ci_id = 0;
        uuid_from(hash2(f->node, gpu, 1000 + f->seq), hash2(f->node, gi_id, 2000 + f->seq), "MIG-",
                  in->mig_uuid);
        *ci_id = in->ci_id;
        snprintf(uuid, TSR_GPU_UUID_MAX, "%s", in->mig_uuid);
        return 0;
}

static int fake_ci_destroy(void *be, unsigned gpu, unsigned gi_id, unsigned ci_id)
{
        struct fake_gpu *g = gpu_of(be, gpu);
        struct tsr_gpu_instance *in = g ? find_gi(g, gi_id) : NULL;

        if (!in || !in->n_ci || in->ci_id != ci_id)
                return TSR_ENOTFOUND;
        in->n_ci = 0;
        in->mig_uuid[0] = '\0';
        return 0;
}

static int fake_gi_destroy(void *be, unsigned gpu, unsigned gi_id)
{
        struct fake_gpu *g = gpu_of(be, gpu);
        struct tsr_gpu_instance *in = g ? find_gi(g, gi_id) : NULL;
        size_t at;

        if (!in)
                return TSR_ENOTFOUND;
        if (in->n_ci)
                return TSR_EINUSE;
        at = (size_t)(in - g->inst);
        memmove(&g->inst[at], &g->inst[at + 1], (g->n - at - 1) * sizeof(g->inst[0]));
        g->n--;
        return 0;
}

static int fake_gi_list(void *be, unsigned gpu, struct tsr_gpu_instance *out, size_t max, size_t *n)
{
        struct fake_gpu *g = gpu_of(be, gpu);

        if (!g)
                return TSR_ENOTFOUND;
        if (g->n > max)
                return TSR_ETOOBIG;
        memcpy(out, g->inst, g->n * sizeof(g->inst[0]));
        *n = g->n;
        return 0;
}

const struct tsr_gpu_ops tsr_fake_gpu_ops = {
    .device_count = fake_count,
    .device_info = fake_info,
    .set_mig_mode = fake_set_mig,
    .gi_create = fake_gi_create,
    .ci_create = fake_ci_create,
    .ci_destroy = fake_ci_destroy,
    .gi_destroy = fake_gi_destroy,
    .gi_list = fake_gi_list,
};
