/*
 * yaml_json.h - YAML (libyaml) to JSON values (jansson), keeping each value's source line.
 *
 * Scalars follow the YAML 1.2 core schema as Kubernetes reads manifests: plain null/true/false,
 * integers and floats become JSON values, everything else (and every quoted scalar) a string.
 * Anchors and aliases are refused, as are non-string mapping keys and duplicate keys. Only the
 * first document of the stream is read; tsr_yaml_load_all reads every document.
 * Ownership: returns new jansson references (json_decref) and a line table the caller releases
 * with tsr_yaml_lines_release.
 */
#ifndef TSR_SIM_YAML_JSON_H
#define TSR_SIM_YAML_JSON_H

#include <jansson.h>
#include <stddef.h>

struct tsr_diag;

struct tsr_yaml_lines {
        size_t n, cap;
        struct {
                const json_t *value;
                unsigned line;
        } * e;
};

/* Releases the line table. */
void tsr_yaml_lines_release(struct tsr_yaml_lines *lines);

/* The 1-based source line of value, or fallback when the table does not know it. */
unsigned tsr_yaml_line(const struct tsr_yaml_lines *lines, const json_t *value, unsigned fallback);

/*
 * Parses len bytes of YAML text into a JSON array of its documents (*out). first_line is added
 * to every recorded line (0 for a file; a step's line for its stdin). lines may be NULL. Returns
 * 0, or TSR_EPARSE with diag->line set and a message.
 */
int tsr_yaml_load_all(const char *text, size_t len, unsigned first_line, json_t **out,
                      struct tsr_yaml_lines *lines, struct tsr_diag *diag);

#endif
