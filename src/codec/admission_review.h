/*
 * admission_review.h - admission.k8s.io/v1 AdmissionReview on the wire
 * (spec/kubernetes-contracts.md §1.2, §1.3): the request a webhook handler reads, the verdict it
 * gives, and the response the API server accepts.
 *
 * Decoding is strict about what the API server checks and tolerant of the rest: apiVersion
 * admission.k8s.io/v1, kind AdmissionReview, a request with a non-empty uid and an operation are
 * required; unknown fields are ignored; object and oldObject may be null. Encoding echoes the uid,
 * sets allowed, and for a denial a metav1.Status {code >= 400, reason, message, status Failure};
 * a message or warning that is not valid UTF-8 (a buffer cut inside a character) has each stray
 * byte written as U+FFFD, as Go's encoding/json writes it (codec/json_tree.h, which every message
 * the webhook answers with goes through).
 * A mutating verdict whose patched object differs from the request's object is answered with
 * patchType JSONPatch and the base64 of the RFC 6902 patch between them (codec/json_patch.h); a
 * validating verdict never carries a patch.
 *
 * Ownership: tsr_review_decode returns the parsed document in *doc (json_decref it after the
 * review is no longer used: review->object and ->old_object point into it). tsr_review_encode
 * returns a new string (free()). Pure; thread-safe.
 */
#ifndef TSR_CODEC_ADMISSION_REVIEW_H
#define TSR_CODEC_ADMISSION_REVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct tsr_diag;
struct tsr_json_pick;

#define TSR_REVIEW_FIELD_MAX    256
#define TSR_VERDICT_MESSAGE_MAX 4096
#define TSR_VERDICT_WARNINGS    4

/* The parts of an admission.k8s.io/v1 AdmissionReview request a handler reads. */
struct tsr_review {
        char uid[TSR_REVIEW_FIELD_MAX];
        char operation[16]; /* CREATE, UPDATE, DELETE, CONNECT */
        char group[TSR_REVIEW_FIELD_MAX], version[64], kind[TSR_REVIEW_FIELD_MAX];
        char resource[TSR_REVIEW_FIELD_MAX], subresource[64];
        char name[TSR_REVIEW_FIELD_MAX], ns[TSR_REVIEW_FIELD_MAX];
        bool dry_run;
        json_t *object;     /* null for DELETE */
        json_t *old_object; /* UPDATE and DELETE */
};

/* A handler's answer. */
struct tsr_verdict {
        bool allowed;
        int code;                              /* HTTP-style status of a denial: 400, 403 */
        char reason[64];                       /* metav1.StatusReason: "Forbidden", "Invalid" */
        char message[TSR_VERDICT_MESSAGE_MAX]; /* why it was denied; empty when allowed */
        char rule[48];                         /* what a denial breaks, for the denials metric */
        json_t *patched;                       /* mutating: the object after mutation, or NULL */
        size_t n_warnings;
        char warnings[TSR_VERDICT_WARNINGS][256];
};

/* Allows (no change). */
void tsr_verdict_allow(struct tsr_verdict *v);

/* Denies with code and a printf-style message (reason "Forbidden" for 403, "Invalid"...). */
void tsr_verdict_deny(struct tsr_verdict *v, int code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Adds a warning (dropped past TSR_VERDICT_WARNINGS; truncated to 255 bytes). */
void tsr_verdict_warn(struct tsr_verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Decodes the AdmissionReview body (len bytes) into *out and *doc. Returns 0, or TSR_EPARSE with
 * diag naming what is wrong (not JSON, wrong apiVersion or kind, no request, no uid, a field of
 * the wrong type, a field longer than its buffer); *out and *doc are untouched on failure.
 *
 * object_reads, when not NULL, names what the handler reads of object and oldObject
 * (codec/json_pick.h paths from the object): only that is built, the rest of the body is checked
 * and stepped over, and the answer (code, message, every field) is the one the whole tree would
 * give. A body the picker declines is read whole, as with NULL.
 */
int tsr_review_decode(const char *body, size_t len, const struct tsr_json_pick *object_reads,
                      struct tsr_review *out, json_t **doc, struct tsr_diag *diag);

/*
 * Encodes the response to review with verdict v into *out. mutating says whether the webhook may
 * patch: only then is v->patched compared with review->object. Returns 0 or TSR_ENOMEM.
 */
int tsr_review_encode(const struct tsr_review *review, const struct tsr_verdict *v, bool mutating,
                      char **out);

#endif
