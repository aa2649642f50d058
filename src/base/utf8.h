/*
 * utf8.h - the one reading of "valid UTF-8" the project shares, jansson's: no overlong form, no
 * surrogate (U+D800..U+DFFF), nothing past U+10FFFF, continuation bytes where they belong.
 * Pure; thread-safe.
 */
#ifndef TSR_BASE_UTF8_H
#define TSR_BASE_UTF8_H

#include <stddef.h>

/* The length (1-4) of the valid UTF-8 sequence at s, n >= 1 bytes left, or 0 when none starts. */
size_t tsr_utf8_len(const unsigned char *s, size_t n);

#endif
