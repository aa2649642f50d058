/*
 * err.c - descriptions and names for the TSR_ERRNO_MAP table. Pure lookups, no state.
 */
#include "base/err.h"

const char *tsr_strerror(int err)
{
        switch (err) {
        case TSR_OK:
                return "success";
#define XX(name, msg)                                                                              \
        case TSR_##name:                                                                           \
                return msg;
                TSR_ERRNO_MAP(XX)
#undef XX
        default:
                return "unknown error";
        }
}

const char *tsr_err_name(int err)
{
        switch (err) {
        case TSR_OK:
                return "TSR_OK";
#define XX(name, msg)                                                                              \
        case TSR_##name:                                                                           \
                return "TSR_" #name;
                TSR_ERRNO_MAP(XX)
#undef XX
        default:
                return "TSR_UNKNOWN";
        }
}
