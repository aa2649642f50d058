/*
 * json_text.h - JSON text in and out for the unit tests (jansson).
 *
 * json_fx_load parses a test's literal (any JSON value, duplicate keys refused) and fails the
 * running cmocka test, quoting the text and jansson's error, when it does not parse.
 * json_fx_dump serializes compactly and keeps insertion order, so that "byte-identical" means
 * what it says; it fails the test when jansson cannot serialize.
 *
 * Ownership: json_fx_load returns a new reference, released by the caller with json_decref;
 * json_fx_dump returns a string from jansson's allocator, released by the caller with free (the
 * tests pair any allocator they install with free).
 */
#ifndef TSR_TEST_SUPPORT_JSON_TEXT_H
#define TSR_TEST_SUPPORT_JSON_TEXT_H

#include <jansson.h>

json_t *json_fx_load(const char *text);

char *json_fx_dump(json_t *v);

#endif
