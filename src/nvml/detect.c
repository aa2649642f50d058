/*
 * detect.c - capability detection over a gpu_ops backend, with the driver cross-check.
 */
#include "nvml/detect.h"

#include "base/err.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

struct notes {
        tsr_detect_note_fn *fn;
        void *arg;
        unsigned gpu;
};

static void say(const struct notes *nt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const struct notes *nt, const char *fmt, ...)
{
        char msg[256];
        va_list ap;

        if (!nt->fn)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        nt->fn(nt->arg, nt->gpu, msg);
}

/* "0,2,4" for the set bits of starts. */
static void format_starts(uint32_t starts, char *out, size_t len)
{
        size_t at = 0;

        out[0] = '\0';
        for (unsigned s = 0; s < 32 && at < len; s++)
                if ((starts >> s) & 1u)
                        at += (size_t)snprintf(out + at, len - at, at ? ",%u" : "%u", s);
}

/*
 * True when the driver's answer for mp agrees with the catalog, or the driver did not answer;
 * false (with a note) when the profile must be excluded.
 */
static bool driver_agrees(const struct tsr_gpu_ops *ops, void *be, const struct notes *nt,
                          const struct tsr_mig_profile *mp)
{
        struct tsr_gpu_profile_info pi;
        struct tsr_gpu_placement pl[TSR_GPU_PLACEMENTS_MAX];
        char want[96], got[96];
        uint32_t starts = 0;
        bool sizes_ok = true;
        size_t n = 0;
        int rc = ops->profile_info(be, nt->gpu, mp->nvml_index, &pi);

        if (rc == TSR_ENOTSUP || rc == TSR_EINVAL || rc == TSR_ENOTFOUND) {
                say(nt, "profile %s excluded: the driver does not offer it", mp->name);
                return false;
        }
        if (!rc && (pi.id != mp->gi_profile_id || pi.slices != mp->compute_slices)) {
                say(nt,
                    "profile %s excluded: the driver reports id %u with %u compute slices, "
                    "the catalog id %u with %u",
                    mp->name, pi.id, pi.slices, mp->gi_profile_id, mp->compute_slices);
                return false;
        }
        if (!rc)
                rc = ops->placements(be, nt->gpu, pi.id, pl, TSR_GPU_PLACEMENTS_MAX, &n);
        if (rc) {
                say(nt,
                    "profile %s: the driver did not answer (%s); the catalog's placements stand",
                    mp->name, ops->error_detail(be));
                return true;
        }
        for (size_t i = 0; i < n; i++) {
                sizes_ok = sizes_ok && pl[i].size == mp->size && pl[i].start < 32;
                if (pl[i].start < 32)
                        starts |= UINT32_C(1) << pl[i].start;
        }
        if (sizes_ok && starts == mp->starts)
                return true;
        format_starts(mp->starts, want, sizeof(want));
        format_starts(starts, got, sizeof(got));
        say(nt,
            "profile %s excluded: the driver's placements (starts %s) differ from the catalog's "
            "(starts %s, size %u)",
            mp->name, got, want, mp->size);
        return false;
}

static int detect_gpu(const struct tsr_gpu_ops *ops, void *be, const struct notes *nt,
                      struct tsr_accel_cap *cap, bool *known, struct tsr_diag *diag)
{
        struct tsr_gpu_info info;
        const struct tsr_product *p;
        int rc = ops->device_info(be, nt->gpu, &info);

        if (rc)
                return tsr_diag_set(diag, rc, "GPU %u: %s", nt->gpu, ops->error_detail(be));
        p = tsr_catalog_product_by_name(info.name);
        *known = p != NULL;
        if (!p) {
                say(nt, "unknown product \"%s\": not advertised", info.name);
                return 0;
        }
        if (info.mig_pending != info.mig_current)
                say(nt,
                    "MIG mode %s is pending (current: %s): it takes effect after a GPU reset and "
                    "is detected when the device manager restarts",
                    info.mig_pending ? "on" : "off", info.mig_current ? "on" : "off");
        tsr_capability_detect(p, nt->gpu, info.uuid, info.mig_current, cap);
        tsr_capability_set_pci_bus_id(cap, info.bus_id);
        for (unsigned i = 0; cap->partitioned && i < p->n_profiles && i < TSR_MIG_PROFILES_MAX; i++)
                if ((cap->offered >> i) & 1u && !driver_agrees(ops, be, nt, &p->profiles[i]))
                        cap->offered &= ~(UINT32_C(1) << i);
        return 0;
}

int tsr_nvml_detect(const struct tsr_gpu_ops *ops, void *be, struct tsr_accel_cap *out, size_t max,
                    size_t *n, tsr_detect_note_fn *note, void *arg, struct tsr_diag *diag)
{
        struct notes nt = {note, arg, 0};
        unsigned count = 0;
        size_t k = 0;
        int rc = ops->device_count(be, &count);

        if (rc)
                return tsr_diag_set(diag, rc, "%s", ops->error_detail(be));
        for (nt.gpu = 0; nt.gpu < count; nt.gpu++) {
                struct tsr_accel_cap cap;
                bool known = false;

                rc = detect_gpu(ops, be, &nt, &cap, &known, diag);
                if (rc)
                        return rc;
                if (!known)
                        continue;
                if (k == max)
                        return tsr_diag_set(diag, TSR_ETOOBIG, "more than %zu GPUs", max);
                out[k++] = cap;
        }
        *n = k;
        return 0;
}
