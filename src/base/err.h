/*
 * err.h - the one error table of tessera.
 *
 * Every fallible function returns int: 0 on success or a negative TSR_E* code from the table below.
 * A decision (admit, deny, retry) is never an error: errors mean "could not decide". The human
 * message travels separately in a struct tsr_diag (diag.h).
 *
 * Thread-safety: the table is immutable; every function here is safe from any thread.
 */
#ifndef TSR_BASE_ERR_H
#define TSR_BASE_ERR_H

#define TSR_ERRNO_MAP(XX)                                                                          \
        XX(EINVAL, "invalid argument")                                                             \
        XX(ENOMEM, "out of memory")                                                                \
        XX(ENOSPC, "no free accelerator capacity")                                                 \
        XX(EPARSE, "malformed input")                                                              \
        XX(ETOOBIG, "input exceeds a configured limit")                                            \
        XX(ERANGE, "value out of range")                                                           \
        XX(ENOTFOUND, "no such object")                                                            \
        XX(EEXIST, "object already exists")                                                        \
        XX(EINUSE, "resource in use")                                                              \
        XX(ESTALE, "state changed since snapshot")                                                 \
        XX(EBACKEND, "accelerator backend failure")                                                \
        XX(EIO, "input/output error")                                                              \
        XX(EPERM, "operation not permitted")                                                       \
        XX(ENOTSUP, "not supported by the accelerator")

enum tsr_err {
        TSR_OK = 0,
#define XX(name, msg) TSR_##name,
        TSR__ERR_FIRST = -1000,
        TSR_ERRNO_MAP(XX)
#undef XX
};

/* Returns the static description of err ("invalid argument"), or "unknown error". */
const char *tsr_strerror(int err);

/* Returns the static symbolic name of err ("TSR_EINVAL"), or "TSR_UNKNOWN". */
const char *tsr_err_name(int err);

#endif
