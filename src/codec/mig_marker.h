/*
 * mig_marker.h - the MIG ownership marker: the record the allocator writes with each MIG instance
 * it hands to a container, the one thing that drives reuse, reclaim and the sidecar's device
 * grant, and that survives a device-manager restart (seeds/nvidia-mig.md "Requesting a
 * partition", spec/upstream-behavior.md §8 "MIG ownership marker").
 *
 * File name: nvidia-mig-<cardUUID>.json under <podsDir>/<podUID>/c-<container>/. Body: a JSON
 * object {"podUID","container","card","profile","giID","ciID","migUUID","computeSlices","start",
 * "length"}, keys sorted, compact.
 *
 * Decoding is FAIL-CLOSED: a marker that cannot be trusted in full is corrupt, never guessed at.
 * Corrupt (TSR_EPARSE, diag naming the field) when the body is not a JSON object; when podUID,
 * card, profile or migUUID is missing, empty or not a string; when container is missing or not a
 * string; when giID, ciID, computeSlices, start or length is missing or not an integer in
 * [0, UINT_MAX]; when a string does not fit its field; or when card differs from the card the file
 * name encodes. Unknown keys are ignored (a newer writer may add some).
 *
 * Ownership: encode returns a new string (free with free()); decode writes *out only on success.
 * Pure; thread-safe.
 */
#ifndef TSR_CODEC_MIG_MARKER_H
#define TSR_CODEC_MIG_MARKER_H

#include <stddef.h>

struct tsr_diag;

#define TSR_MIG_MARKER_PREFIX      "nvidia-mig-"
#define TSR_MIG_MARKER_SUFFIX      ".json"
#define TSR_MIG_MARKER_UID_MAX     64 /* a Pod UID is 36 characters */
#define TSR_MIG_MARKER_NAME_MAX    64 /* a container name is at most 63 (DNS label) */
#define TSR_MIG_MARKER_UUID_MAX    96 /* == TSR_GPU_UUID_MAX */
#define TSR_MIG_MARKER_PROFILE_MAX 64

struct tsr_mig_marker {
        char pod_uid[TSR_MIG_MARKER_UID_MAX];
        char container[TSR_MIG_MARKER_NAME_MAX];
        char card[TSR_MIG_MARKER_UUID_MAX]; /* the parent GPU's UUID, "GPU-..." */
        char profile[TSR_MIG_MARKER_PROFILE_MAX];
        unsigned gi_id, ci_id;
        char mig_uuid[TSR_MIG_MARKER_UUID_MAX]; /* the compute instance's "MIG-..." */
        unsigned compute_slices;
        unsigned start, length; /* placement on the memory-slice axis */
};

/* Encodes m into *out (a new NUL-terminated string). Returns 0 or TSR_ENOMEM. */
int tsr_mig_marker_encode(const struct tsr_mig_marker *m, char **out);

/*
 * Decodes the len bytes of text as a marker read from a file whose name encodes file_card.
 * Returns 0 with *out, or TSR_EPARSE with diag naming the field (see the header comment).
 */
int tsr_mig_marker_decode(const char *text, size_t len, const char *file_card,
                          struct tsr_mig_marker *out, struct tsr_diag *diag);

/*
 * The card a marker file name encodes: "nvidia-mig-GPU-x.json" -> "GPU-x" into card[0..len).
 * Returns 0, or TSR_EPARSE when name is not a marker file name or the card does not fit.
 */
int tsr_mig_marker_card_of_name(const char *name, char *card, size_t len);

#endif
