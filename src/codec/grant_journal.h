/*
 * grant_journal.h - the device manager's grant journal: every grant Allocate made that must
 * outlive the process until the Pod's allocation annotation shows it (or the Pod is gone), as one
 * JSON document the device manager rewrites atomically beside the MIG markers before it answers
 * the kubelet (devicemanager/agent.h says when).
 *
 * Shape: {"kind": "tessera.device-manager.grants", "version": 1, "grants": [GRANT...]}, each
 * GRANT {"podUID", "namespace", "name", "allocation"}, where allocation is the Pod's allocation
 * annotation value (codec/alloc_annotation.h) holding exactly the one container granted. Keys
 * sorted, compact.
 *
 * Decoding is FAIL-CLOSED and all or nothing: a journal that cannot be trusted in full is refused
 * (TSR_EPARSE, diag naming the grant and field), never partly loaded, because a grant dropped on
 * a guess is a GPU granted twice. Refused: not a JSON object, another kind or version, grants not
 * an array or longer than TSR_GRANT_JOURNAL_MAX, a grant whose podUID, namespace or name is
 * missing, empty, not a string or too long, whose allocation does not decode strictly or holds
 * other than one container, or that repeats an earlier grant's (podUID, container). Unknown keys
 * are ignored.
 *
 * Ownership: encode returns a new string (free with free()); decode returns a new array in *out
 * (free with free(); NULL when empty) and writes *out and *n only on success. Pure; thread-safe.
 */
#ifndef TSR_CODEC_GRANT_JOURNAL_H
#define TSR_CODEC_GRANT_JOURNAL_H

#include <stddef.h>

#include "codec/alloc_annotation.h"

struct tsr_diag;

#define TSR_GRANT_JOURNAL_KIND "tessera.device-manager.grants"
#define TSR_GRANT_JOURNAL_MAX  4096 /* grants in one journal */

/* One container's grant on one Pod. */
struct tsr_grant {
        char uid[128], ns[254], name[254];
        struct tsr_container_allocation alloc; /* alloc.container names the container */
};

/* Encodes g[0..n) into *out. Returns 0, TSR_ETOOBIG (n past TSR_GRANT_JOURNAL_MAX) or
 * TSR_ENOMEM. */
int tsr_grant_journal_encode(const struct tsr_grant *g, size_t n, char **out);

/* Decodes the len bytes of text. Returns 0 with *out and *n, TSR_EPARSE with diag (see the header
 * comment), or TSR_ENOMEM. */
int tsr_grant_journal_decode(const char *text, size_t len, struct tsr_grant **out, size_t *n,
                             struct tsr_diag *diag);

#endif
