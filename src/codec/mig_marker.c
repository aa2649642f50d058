/*
 * mig_marker.c - jansson encode and fail-closed decode of the MIG ownership marker.
 */
#include "codec/mig_marker.h"

#include "base/diag.h"
#include "base/err.h"

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int tsr_mig_marker_encode(const struct tsr_mig_marker *m, char **out)
{
        json_t *o =
            json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:I, s:I, s:I}", "podUID", m->pod_uid,
                      "container", m->container, "card", m->card, "profile", m->profile, "giID",
                      (json_int_t)m->gi_id, "ciID", (json_int_t)m->ci_id, "migUUID", m->mig_uuid,
                      "computeSlices", (json_int_t)m->compute_slices, "start", (json_int_t)m->start,
                      "length", (json_int_t)m->length);
        char *s;

        if (!o)
                return TSR_ENOMEM;
        s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(o);
        if (!s)
                return TSR_ENOMEM;
        *out = s;
        return 0;
}

static int get_str(json_t *o, const char *key, bool nonempty, char *dst, size_t len,
                   struct tsr_diag *diag)
{
        json_t *v = json_object_get(o, key);

        if (!json_is_string(v) || (nonempty && json_string_length(v) == 0))
                return tsr_diag_set(diag, TSR_EPARSE, "MIG marker: \"%s\" must be a %sstring", key,
                                    nonempty ? "non-empty " : "");
        if (json_string_length(v) >= len || strlen(json_string_value(v)) != json_string_length(v))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "MIG marker: \"%s\" is longer than %zu bytes or holds NUL", key,
                                    len - 1);
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

static int get_uint(json_t *o, const char *key, unsigned *dst, struct tsr_diag *diag)
{
        json_t *v = json_object_get(o, key);

        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > (json_int_t)UINT_MAX)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "MIG marker: \"%s\" must be a non-negative integer", key);
        *dst = (unsigned)json_integer_value(v);
        return 0;
}

int tsr_mig_marker_decode(const char *text, size_t len, const char *file_card,
                          struct tsr_mig_marker *out, struct tsr_diag *diag)
{
        struct tsr_mig_marker m;
        json_error_t jerr;
        json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        int rc;

        if (!o)
                return tsr_diag_set(diag, TSR_EPARSE, "MIG marker: not JSON: %s", jerr.text);
        if (!json_is_object(o)) {
                json_decref(o);
                return tsr_diag_set(diag, TSR_EPARSE, "MIG marker: not a JSON object");
        }
        memset(&m, 0, sizeof(m));
        rc = get_str(o, "podUID", true, m.pod_uid, sizeof(m.pod_uid), diag);
        if (!rc)
                rc = get_str(o, "container", false, m.container, sizeof(m.container), diag);
        if (!rc)
                rc = get_str(o, "card", true, m.card, sizeof(m.card), diag);
        if (!rc)
                rc = get_str(o, "profile", true, m.profile, sizeof(m.profile), diag);
        if (!rc)
                rc = get_str(o, "migUUID", true, m.mig_uuid, sizeof(m.mig_uuid), diag);
        if (!rc)
                rc = get_uint(o, "giID", &m.gi_id, diag);
        if (!rc)
                rc = get_uint(o, "ciID", &m.ci_id, diag);
        if (!rc)
                rc = get_uint(o, "computeSlices", &m.compute_slices, diag);
        if (!rc)
                rc = get_uint(o, "start", &m.start, diag);
        if (!rc)
                rc = get_uint(o, "length", &m.length, diag);
        json_decref(o);
        if (rc)
                return rc;
        if (!file_card || strcmp(m.card, file_card))
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "MIG marker: \"card\" %s differs from the card %s its file "
                                    "name encodes",
                                    m.card, file_card ? file_card : "(none)");
        *out = m;
        return 0;
}

int tsr_mig_marker_card_of_name(const char *name, char *card, size_t len)
{
        size_t n = strlen(name), pre = strlen(TSR_MIG_MARKER_PREFIX),
               suf = strlen(TSR_MIG_MARKER_SUFFIX);

        if (n <= pre + suf || strncmp(name, TSR_MIG_MARKER_PREFIX, pre) ||
            strcmp(name + n - suf, TSR_MIG_MARKER_SUFFIX) || n - pre - suf >= len)
                return TSR_EPARSE;
        memcpy(card, name + pre, n - pre - suf);
        card[n - pre - suf] = '\0';
        return 0;
}
