/*
 * read_file.c - reading an input file whole.
 */
#include "cli/read_file.h"

#include "base/err.h"

#include <stdio.h>

int cli_read_file(const char *path, size_t max, struct tsr_buf *out)
{
        FILE *f = fopen(path, "rb");
        char chunk[65536];
        size_t n;
        int rc = 0;

        if (!f)
                return TSR_EIO;
        out->max = max;
        while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                rc = tsr_buf_add(out, chunk, n);
        if (!rc && ferror(f))
                rc = TSR_EIO;
        fclose(f);
        return rc;
}
