/*
 * log_limit.h - at most one log line per interval for an event that a client can repeat at will
 * (a refused connection, a failed handshake), with the number of lines held back since the last.
 *
 * Invariants: of any burst of events, the first within an interval passes and the rest are
 * counted; the count is handed to the next line that passes and then starts again from zero.
 * Thread-safety: lock-free; any thread may call tsr_log_limit_pass.
 */
#ifndef TSR_BASE_LOG_LIMIT_H
#define TSR_BASE_LOG_LIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct tsr_log_limit {
        _Atomic int64_t next_ms;    /* monotonic ms before which lines are held back */
        _Atomic unsigned long held; /* lines held back since the last that passed */
        unsigned every_ms;
};

#define TSR_LOG_LIMIT_INIT(every_ms)                                                               \
        {                                                                                          \
                0, 0, (every_ms)                                                                   \
        }

/* True when a line may be written now, with *held the lines held back before it. */
bool tsr_log_limit_pass(struct tsr_log_limit *l, unsigned long *held);

#endif
