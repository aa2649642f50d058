/*
 * message.h - gRPC length-prefixed messages (doc/PROTOCOL-HTTP2.md "Length-Prefixed-Message"):
 * a 1-byte compressed flag, a 4-byte big-endian length, then the message bytes.
 *
 * The reader reassembles messages from DATA frame payloads with no I/O. Frame boundaries are
 * unrelated to message boundaries: a message may span many feeds and one feed may hold many
 * messages; the reader delivers the same messages for any split of the same bytes. tessera
 * negotiates no compression, so a set compressed flag (or any flag byte other than 0 and 1) is
 * malformed; a length above the reader's ceiling is refused before any of the body is buffered.
 *
 * Ownership: a reader owns the partial message it buffers (release with tsr_grpc_reader_release).
 * A message handed to the callback is borrowed for the duration of the call. Not thread-safe:
 * one reader per stream direction.
 */
#ifndef TSR_GRPC_MESSAGE_H
#define TSR_GRPC_MESSAGE_H

#include "base/buf.h"

#include <stddef.h>
#include <stdint.h>

struct tsr_diag;

/* grpc-go's default receive ceiling, which is the kubelet's. */
#define TSR_GRPC_MESSAGE_MAX_DEFAULT ((size_t)4 << 20)

/* Bytes of the prefix in front of every message. */
#define TSR_GRPC_PREFIX_LEN 5

/*
 * Called for each complete message, in order. Returns 0 to go on; any other value stops the feed,
 * which returns that value unchanged.
 */
typedef int (*tsr_grpc_message_fn)(void *ctx, const uint8_t *msg, size_t len);

struct tsr_grpc_reader {
        uint8_t prefix[TSR_GRPC_PREFIX_LEN]; /* the prefix being read */
        size_t prefix_len;                   /* prefix bytes held, 0..5 */
        size_t want;                         /* the current message's length, once prefix is full */
        struct tsr_buf body;                 /* body bytes of the current message held so far */
        size_t max;                          /* ceiling on one message's length */
        size_t messages;                     /* messages delivered so far */
};

/* Initialises r, empty, refusing messages over max bytes (0: TSR_GRPC_MESSAGE_MAX_DEFAULT). */
void tsr_grpc_reader_init(struct tsr_grpc_reader *r, size_t max);

/* Frees r's buffered bytes; r may be initialised again. */
void tsr_grpc_reader_release(struct tsr_grpc_reader *r);

/*
 * Feeds len bytes. Returns 0 when all were consumed, the callback's non-zero value when it
 * stopped the feed, TSR_EPARSE (compressed or unknown flag) or TSR_ETOOBIG (length above max)
 * with diag set, or TSR_ENOMEM. After an error the reader must not be fed again.
 */
int tsr_grpc_reader_feed(struct tsr_grpc_reader *r, const uint8_t *data, size_t len,
                         tsr_grpc_message_fn fn, void *ctx, struct tsr_diag *diag);

/* At the end of the stream: 0 when no message is half-read, else TSR_EPARSE with diag. */
int tsr_grpc_reader_finish(const struct tsr_grpc_reader *r, struct tsr_diag *diag);

/* Appends msg framed (flag 0, big-endian length, bytes) to out. Returns 0, TSR_ENOMEM,
 * TSR_ETOOBIG (out's ceiling, or len above 4 GiB - 1); out is unchanged on failure. */
int tsr_grpc_message_frame(struct tsr_buf *out, const uint8_t *msg, size_t len);

#endif
