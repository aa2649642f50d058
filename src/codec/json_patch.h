/*
 * json_patch.h - RFC 6902 JSON Patch, the `patchType: JSONPatch` body of an AdmissionReview
 * response (spec/kubernetes-contracts.md §1.3), made and applied with jansson.
 *
 * tsr_json_patch_diff writes the patch that turns one document into another, as
 * controller-runtime's PatchResponseFromRaw (gomodules jsonpatch) does: objects are compared key by
 * key (a key only in `from` is removed, one only in `to` is added, one whose values differ is
 * recursed into); arrays index by index (the common indices recursed into, then the extra
 * elements of `to` added in order or those of `from` removed from the last down); any other
 * difference, including a change of type, is a replace. So a fold that adds a key to one
 * container's limits patches that key, not the containers list. Keys are visited in sorted order,
 * so the patch is deterministic. Paths are RFC 6901 pointers ("~" as "~0", "/" as "~1").
 *
 * tsr_json_patch_apply applies the operations add, remove, replace and test (what an admission
 * patch carries) to a document in place, atomically: on any failure the document is unchanged.
 * move and copy are refused. test compares as RFC 6902 §4.6 says: numbers by value (1 equals
 * 1.0), objects regardless of key order, arrays element by element.
 * Ownership: diff returns a new array (json_decref); diff_text and apply borrow their arguments.
 */
#ifndef TSR_CODEC_JSON_PATCH_H
#define TSR_CODEC_JSON_PATCH_H

#include <jansson.h>

struct tsr_buf;
struct tsr_diag;

/* Writes the patch from `from` to `to` into *ops (an empty array when equal). 0 or TSR_ENOMEM. */
int tsr_json_patch_diff(json_t *from, json_t *to, json_t **ops);

/*
 * The same patch appended to text as JSON, the bytes tsr_json_write writes of diff's array
 * ("[]" when equal), without building that array; *n_ops is its length. 0 or TSR_ENOMEM (text
 * as it was).
 */
int tsr_json_patch_diff_text(json_t *from, json_t *to, struct tsr_buf *text, size_t *n_ops);

/*
 * Applies ops to *doc (which may be replaced, for a whole-document op). Returns 0, or TSR_EPARSE
 * (a malformed operation or pointer) / TSR_ENOTFOUND (a path that does not exist) /
 * TSR_ESTALE (a failed test) with diag naming the operation, leaving *doc unchanged.
 */
int tsr_json_patch_apply(json_t **doc, json_t *ops, struct tsr_diag *diag);

#endif
