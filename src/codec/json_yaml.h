/*
 * json_yaml.h - a JSON value (jansson) as block YAML text (libyaml's emitter), for what tessera
 * prints for people and for tools that read YAML (`tessera kueue-config -o yaml`).
 *
 * Objects become block mappings in their insertion order, arrays block sequences, empty ones
 * `{}` and `[]`. Numbers, booleans and null are plain scalars; a string is plain unless YAML
 * would read it as something else: empty, or a YAML 1.1 boolean or null (y, n, yes, no, on,
 * off, true, false, null, ~ in any case), or starting with a digit, '+', '-' or '.' (a number
 * to some parser) -- those are double-quoted, and libyaml quotes whatever its own grammar needs.
 * One document, no "---" or "...". Reading the text back with a YAML 1.1 or 1.2 parser gives v.
 *
 * Ownership: borrows v; appends to out (the caller's). Pure; thread-safe.
 */
#ifndef TSR_CODEC_JSON_YAML_H
#define TSR_CODEC_JSON_YAML_H

#include <jansson.h>

struct tsr_buf;
struct tsr_diag;

/*
 * Appends v as YAML to out. Returns 0, TSR_ENOMEM or out's TSR_ETOOBIG, with diag; on failure out
 * holds what it held before.
 */
int tsr_json_yaml_emit(const json_t *v, struct tsr_buf *out, struct tsr_diag *diag);

#endif
