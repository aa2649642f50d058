/*
 * fuzz_grant_journal.c - bytes as the device manager's grant journal. The decoder refuses with a
 * message or accepts whole; whatever it accepts encodes and decodes back to the same grants.
 */
#include "base/diag.h"
#include "codec/grant_journal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_grant *first = NULL, *second = NULL;
        struct tsr_diag diag;
        char *again = NULL;
        size_t n = 0, m = 0;

        if (size > 262144)
                return 0;
        tsr_diag_clear(&diag);
        if (tsr_grant_journal_decode((const char *)data, size, &first, &n, &diag)) {
                if (diag.msg[0] == '\0')
                        abort();
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                if (!first[i].uid[0] || !first[i].ns[0] || !first[i].name[0] ||
                    !first[i].alloc.container[0])
                        abort();
        if (tsr_grant_journal_encode(first, n, &again) ||
            tsr_grant_journal_decode(again, strlen(again), &second, &m, &diag) || m != n)
                abort();
        for (size_t i = 0; i < n; i++)
                if (strcmp(first[i].uid, second[i].uid) || strcmp(first[i].ns, second[i].ns) ||
                    strcmp(first[i].name, second[i].name) ||
                    strcmp(first[i].alloc.container, second[i].alloc.container) ||
                    first[i].alloc.n != second[i].alloc.n ||
                    first[i].alloc.n_device_ids != second[i].alloc.n_device_ids)
                        abort();
        free(again);
        free(first);
        free(second);
        return 0;
}
