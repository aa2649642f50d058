/*
 * decode_foreign.h - the decode benchmark's parsers other than jansson (Debian's json-c and
 * cJSON), kept apart from jansson.h: json-c's header declares json_object_get as jansson's does.
 *
 * Each decode parses text (n bytes) into its library's whole tree, copies the Pod's queue label
 * (request.object.metadata.labels["kueue.x-k8s.io/queue-name"]) into queue when queue is not NULL
 * ("" when absent), frees the tree, and returns false when the library refused the text. Not
 * thread-safe: one json-c tokener serves every call, from bench_foreign_init to _release.
 */
#ifndef TSR_BENCH_DECODE_FOREIGN_H
#define TSR_BENCH_DECODE_FOREIGN_H

#include <stdbool.h>
#include <stddef.h>

int bench_foreign_init(void);

void bench_foreign_release(void);

/* "json-c X, cJSON Y". */
const char *bench_foreign_versions(void);

bool bench_jsonc_decode(const char *text, size_t n, char *queue, size_t len);

bool bench_cjson_decode(const char *text, size_t n, char *queue, size_t len);

#endif
