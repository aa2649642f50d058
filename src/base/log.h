/*
 * log.h - one logfmt line per event on standard error: `time=... level=... msg="..." k=v ...`,
 * values quoted and escaped when they hold spaces, quotes or control characters; or, in the JSON
 * format, one object per line with the same keys: {"time":...,"level":...,"msg":...,"k":"v"}. A
 * line is written with one write(2) so concurrent threads never interleave within a line.
 * Thread-safe.
 */
#ifndef TSR_BASE_LOG_H
#define TSR_BASE_LOG_H

enum tsr_log_level { TSR_LOG_DEBUG, TSR_LOG_INFO, TSR_LOG_WARN, TSR_LOG_ERROR };

enum tsr_log_format { TSR_LOG_LOGFMT, TSR_LOG_JSON };

/* The line format (default TSR_LOG_LOGFMT); set once at startup. */
void tsr_log_set_format(enum tsr_log_format f);

/* Lines below level are dropped (default TSR_LOG_INFO). */
void tsr_log_set_level(enum tsr_log_level level);

/*
 * Writes one line: msg, then the key/value pairs given as a NULL-terminated list of
 * const char * (key, value, key, value, ..., NULL). A NULL value is written as "".
 */
void tsr_log(enum tsr_log_level level, const char *msg, ...);

#endif
