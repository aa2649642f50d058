/*
 * policy.c - the policy table and instances.
 */
#include "replay/policy_int.h"

#include "base/err.h"

#include <stdlib.h>
#include <strings.h>

static const struct tsr__policy_ops *const table[TSR_POLICY_COUNT] = {
    [TSR_POLICY_RANDOM] = &tsr__policy_random,
    [TSR_POLICY_DOTPROD] = &tsr__policy_dotprod,
    [TSR_POLICY_GPU_CLUSTERING] = &tsr__policy_gpu_clustering,
    [TSR_POLICY_GPU_PACKING] = &tsr__policy_gpu_packing,
    [TSR_POLICY_BEST_FIT] = &tsr__policy_best_fit,
    [TSR_POLICY_FGD] = &tsr__policy_fgd,
    [TSR_POLICY_TESSERA] = &tsr__policy_tessera,
};

struct tsr_policy {
        const struct tsr__policy_ops *ops;
        struct tsr_policy_env env;
        void *state;
};

const char *tsr_policy_name(enum tsr_policy_id id)
{
        return (unsigned)id < TSR_POLICY_COUNT ? table[id]->name : NULL;
}

int tsr_policy_by_name(const char *name)
{
        for (int i = 0; i < TSR_POLICY_COUNT; i++)
                if (!strcasecmp(table[i]->name, name))
                        return i;
        return -1;
}

int tsr_policy_new(enum tsr_policy_id id, const struct tsr_policy_env *env, struct tsr_policy **out,
                   struct tsr_diag *diag)
{
        struct tsr_policy *p = calloc(1, sizeof(*p));

        if (!p || (unsigned)id >= TSR_POLICY_COUNT) {
                free(p);
                return tsr_diag_set(diag, p ? TSR_EINVAL : TSR_ENOMEM, "cannot create policy %d",
                                    (int)id);
        }
        p->ops = table[id];
        p->env = *env;
        if (p->ops->start(&p->env, &p->state)) {
                free(p);
                return tsr_diag_set(diag, TSR_ENOMEM, "%s: out of memory", table[id]->name);
        }
        *out = p;
        return 0;
}

void tsr_policy_free(struct tsr_policy *p)
{
        if (!p)
                return;
        p->ops->stop(p->state);
        free(p);
}

bool tsr_policy_place(struct tsr_policy *p, const struct tsr_rpod *pod, struct tsr_rplace *out)
{
        return p->ops->place(&p->env, p->state, pod, out);
}

void tsr_policy_bound(struct tsr_policy *p, const struct tsr_rpod *pod, const struct tsr_rplace *pl)
{
        if (p->ops->bound)
                p->ops->bound(&p->env, p->state, pod, pl);
}
