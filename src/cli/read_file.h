/*
 * read_file.h - a whole input file into a buffer, for the subcommands that read one (scenarios,
 * traces). Ownership: the caller's buffer; on failure it may hold a prefix (release it).
 */
#ifndef TSR_CLI_READ_FILE_H
#define TSR_CLI_READ_FILE_H

#include <stddef.h>

#include "base/buf.h"

/* Reads path into out, at most max bytes. 0, TSR_EIO (cannot read) or TSR_ETOOBIG. */
int cli_read_file(const char *path, size_t max, struct tsr_buf *out);

#endif
