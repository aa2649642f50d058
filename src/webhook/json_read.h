/*
 * json_read.h - reading the fields of a decoded Kubernetes object (jansson) the way the API server
 * means them: a dotted path, a resource.Quantity written as a string or a number, and equality
 * that treats an absent field and its zero value alike (Go decodes both into the same struct).
 *
 * Ownership: every json_t returned is borrowed from the object passed in, valid while that object
 * is. Pure; safe from any thread on objects no other thread mutates.
 */
#ifndef TSR_WEBHOOK_JSON_READ_H
#define TSR_WEBHOOK_JSON_READ_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/quantity.h"

struct tsr_diag;

/*
 * Returns the value at the dotted path ("spec.unitResources.cpu") under root, or NULL when a step
 * is missing or not an object. A key holding '.' cannot be named this way: use json_object_get.
 */
json_t *tsr_json_at(json_t *root, const char *path);

/* The string at path, or NULL when absent or not a string. */
const char *tsr_json_str(json_t *root, const char *path);

/* The string at path, "" when absent, null or not a string. */
const char *tsr_json_str_or_empty(json_t *root, const char *path);

/* The boolean at path; false when absent or not a boolean. */
bool tsr_json_bool(json_t *root, const char *path);

/*
 * Typed reads for a field the CRD schema types: absent or null reads as "", 0 or false; any other
 * JSON type is TSR_EPARSE with diag "<path> is not a string" (an integer, a boolean).
 */
int tsr_json_read_string(json_t *root, const char *path, const char **out, struct tsr_diag *diag);
int tsr_json_read_int(json_t *root, const char *path, int64_t *out, struct tsr_diag *diag);
int tsr_json_read_bool(json_t *root, const char *path, bool *out, struct tsr_diag *diag);

/*
 * Reads the quantity at path: a string in Kubernetes quantity syntax or a JSON number. Returns 0
 * with *present false (and *out zero) when absent or null, 0 with *present true and *out, or
 * TSR_EPARSE with diag naming path when the value is not a quantity.
 */
int tsr_json_quantity(json_t *root, const char *path, struct tsr_quantity *out, bool *present,
                      struct tsr_diag *diag);

/* True when v is absent (NULL), null, false, 0, "", or an array/object of only zero values. */
bool tsr_json_is_zero(json_t *v);

/*
 * True when a and b decode to the same Go value: equal JSON, except that a member absent on one
 * side equals a zero value on the other (recursively), and 0 equals 0.0.
 */
bool tsr_json_equal_zero(json_t *a, json_t *b);

#endif
