/*
 * grpc_int.h - internals shared by the files of src/grpc/.
 *
 * tsr__grpc_buf_clear empties a buffer without writing to one that never allocated: base's
 * tsr_buf_reset stores the NUL into the shared static "" of every unallocated buffer, a store
 * that ThreadSanitizer reports when connections on several threads do it at once.
 */
#ifndef TSR_GRPC_INT_H
#define TSR_GRPC_INT_H

#include "base/buf.h"

static inline void tsr__grpc_buf_clear(struct tsr_buf *b)
{
        if (b->cap)
                tsr_buf_reset(b);
}

#endif
