/*
 * node.c - reading a node's GPUs for the MIG adapter.
 */
#include "mig/node.h"

#include "base/err.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int backend_error(const struct tsr_mig_gpus *gpus, int rc, const char *what, unsigned gpu,
                         struct tsr_diag *diag)
{
        const char *detail = gpus->ops->error_detail ? gpus->ops->error_detail(gpus->be) : "";

        return tsr_diag_set(diag, rc, "GPU %u: %s: %s%s%s", gpu, what, tsr_mig_nvml_error(rc),
                            detail[0] ? ": " : "", detail);
}

int tsr_mig_card_read(const struct tsr_mig_gpus *gpus, unsigned gpu, struct tsr_mig_card *card,
                      struct tsr_diag *diag)
{
        struct tsr_gpu_info info;
        int rc = gpus->ops->device_info(gpus->be, gpu, &info);

        if (rc)
                return backend_error(gpus, rc, "reading the device", gpu, diag);
        memcpy(card->uuid, info.uuid, sizeof(card->uuid));
        card->mig = info.mig_current;
        card->n = 0;
        if (!card->mig)
                return 0;
        rc = gpus->ops->gi_list(gpus->be, gpu, card->inst, TSR_GPU_INSTANCES_MAX, &card->n);
        return rc ? backend_error(gpus, rc, "listing GPU instances", gpu, diag) : 0;
}

int tsr_mig_snapshot_new(const struct tsr_mig_gpus *gpus, struct tsr_mig_snapshot **out,
                         struct tsr_diag *diag)
{
        struct tsr_mig_snapshot *s;
        unsigned count;
        int rc = gpus->ops->device_count(gpus->be, &count);

        if (rc)
                return tsr_diag_set(diag, rc, "counting GPUs: %s", tsr_mig_nvml_error(rc));
        if (count > TSR_MIG_CARDS_MAX)
                return tsr_diag_set(diag, TSR_ETOOBIG, "%u GPUs, at most %d", count,
                                    TSR_MIG_CARDS_MAX);
        s = malloc(offsetof(struct tsr_mig_snapshot, card) + count * sizeof(s->card[0]));
        if (!s)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        s->n = count;
        for (unsigned g = 0; g < count; g++) {
                rc = tsr_mig_card_read(gpus, g, &s->card[g], diag);
                if (rc) {
                        free(s);
                        return rc;
                }
        }
        *out = s;
        return 0;
}

int tsr_mig_snapshot_find(const struct tsr_mig_snapshot *s, const char *uuid)
{
        for (unsigned g = 0; g < s->n; g++)
                if (!strcmp(s->card[g].uuid, uuid))
                        return (int)g;
        return -1;
}

const struct tsr_gpu_instance *tsr_mig_owned(const struct tsr_mig_card *card,
                                             const struct tsr_mig_marker *m, bool half_destroyed)
{
        for (size_t k = 0; k < card->n; k++) {
                const struct tsr_gpu_instance *in = &card->inst[k];

                if (in->gi_id != m->gi_id)
                        continue;
                if (in->n_ci > 0 && !strcmp(in->mig_uuid, m->mig_uuid))
                        return in;
                if (half_destroyed && in->n_ci == 0 && in->start == m->start)
                        return in;
        }
        return NULL;
}

const char *tsr_mig_nvml_error(int err)
{
        switch (err) {
        case TSR_EINUSE:
                return "In use by another client";
        case TSR_ENOSPC:
                return "Insufficient Resources";
        case TSR_EPERM:
                return "Insufficient Permissions";
        case TSR_ENOTSUP:
                return "Not Supported";
        case TSR_ENOTFOUND:
                return "Not Found";
        case TSR_EINVAL:
                return "Invalid Argument";
        default:
                return tsr_strerror(err);
        }
}
