/*
 * status.h - gRPC status codes (grpc doc/statuscodes.md), the grpc-message percent-encoding and
 * the grpc-timeout header (doc/PROTOCOL-HTTP2.md), as pure functions over strings.
 *
 * A gRPC status is data, not an error: a call that ends with NOT_FOUND completed. The message is
 * kept in a fixed array inside the status (truncated at TSR_GRPC_STATUS_MSG_MAX - 1 bytes), so a
 * status can be copied by value and owns nothing. Thread-safety: every function is reentrant.
 */
#ifndef TSR_GRPC_STATUS_H
#define TSR_GRPC_STATUS_H

#include "base/buf.h"

#include <stddef.h>
#include <stdint.h>

#define TSR_GRPC_CODE_MAP(XX)                                                                      \
        XX(OK, 0)                                                                                  \
        XX(CANCELLED, 1)                                                                           \
        XX(UNKNOWN, 2)                                                                             \
        XX(INVALID_ARGUMENT, 3)                                                                    \
        XX(DEADLINE_EXCEEDED, 4)                                                                   \
        XX(NOT_FOUND, 5)                                                                           \
        XX(ALREADY_EXISTS, 6)                                                                      \
        XX(PERMISSION_DENIED, 7)                                                                   \
        XX(RESOURCE_EXHAUSTED, 8)                                                                  \
        XX(FAILED_PRECONDITION, 9)                                                                 \
        XX(ABORTED, 10)                                                                            \
        XX(OUT_OF_RANGE, 11)                                                                       \
        XX(UNIMPLEMENTED, 12)                                                                      \
        XX(INTERNAL, 13)                                                                           \
        XX(UNAVAILABLE, 14)                                                                        \
        XX(DATA_LOSS, 15)                                                                          \
        XX(UNAUTHENTICATED, 16)

enum tsr_grpc_code {
#define XX(name, value) TSR_GRPC_##name = value,
        TSR_GRPC_CODE_MAP(XX)
#undef XX
};

#define TSR_GRPC_STATUS_MSG_MAX 512

struct tsr_grpc_status {
        int code;                          /* an enum tsr_grpc_code value (0..16) */
        char msg[TSR_GRPC_STATUS_MSG_MAX]; /* decoded UTF-8 message, NUL-terminated, may be "" */
};

/* The code's name as grpc spells it ("UNIMPLEMENTED"), or "?" outside 0..16. */
const char *tsr_grpc_code_name(int code);

/* Sets st to code with a printf-style message (truncated to fit). */
void tsr_grpc_status_set(struct tsr_grpc_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Appends msg (len bytes) percent-encoded for the grpc-message header: bytes outside 0x20..0x7E
 * and '%' itself become %XX (upper-case hex). Returns 0, TSR_ENOMEM or TSR_ETOOBIG.
 */
int tsr_grpc_percent_encode(struct tsr_buf *out, const char *msg, size_t len);

/*
 * Appends the decoding of a grpc-message value. As the protocol asks, a '%' not followed by two
 * hex digits is kept literally rather than refused. Returns 0, TSR_ENOMEM or TSR_ETOOBIG.
 */
int tsr_grpc_percent_decode(struct tsr_buf *out, const char *value, size_t len);

/*
 * Parses a grpc-status value: 1 to 3 decimal digits, 0..999 (codes above 16 are kept; callers map
 * them to UNKNOWN). Writes *code only on success. Returns 0 or TSR_EPARSE.
 */
int tsr_grpc_status_code_parse(const char *value, size_t len, int *code);

/*
 * Parses a grpc-timeout value: 1 to 8 ASCII digits and a unit (H hours, M minutes, S seconds,
 * m milliseconds, u microseconds, n nanoseconds) into milliseconds, rounding sub-millisecond
 * remainders up. Writes *ms only on success. Returns 0 or TSR_EPARSE.
 */
int tsr_grpc_timeout_parse(const char *value, size_t len, uint64_t *ms);

/*
 * Formats a timeout of ms milliseconds (> 0) as a grpc-timeout value ("250m", or whole seconds
 * rounded up when ms needs more than 8 digits) into out[16]. Returns 0 or TSR_ERANGE.
 */
int tsr_grpc_timeout_format(uint64_t ms, char out[16]);

#endif
