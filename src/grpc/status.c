/*
 * status.c - gRPC status names, grpc-message percent-encoding, grpc-timeout (see status.h).
 */
#include "grpc/status.h"

#include "base/err.h"
#include "base/hex.h"

#include <stdarg.h>
#include <stdio.h>

const char *tsr_grpc_code_name(int code)
{
        switch (code) {
#define XX(name, value)                                                                            \
        case value:                                                                                \
                return #name;
                TSR_GRPC_CODE_MAP(XX)
#undef XX
        default:
                return "?";
        }
}

void tsr_grpc_status_set(struct tsr_grpc_status *st, int code, const char *fmt, ...)
{
        va_list ap;

        st->code = code;
        va_start(ap, fmt);
        vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
        va_end(ap);
}

int tsr_grpc_percent_encode(struct tsr_buf *out, const char *msg, size_t len)
{
        size_t start = out->len;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)msg[i];
                int rc;

                if (c >= 0x20 && c <= 0x7e && c != '%')
                        rc = tsr_buf_addch(out, (char)c);
                else
                        rc = tsr_buf_addf(out, "%%%02X", c);
                if (rc) {
                        out->len = start;
                        if (out->cap)
                                out->ptr[start] = '\0';
                        return rc;
                }
        }
        return 0;
}

int tsr_grpc_percent_decode(struct tsr_buf *out, const char *value, size_t len)
{
        size_t start = out->len;

        for (size_t i = 0; i < len; i++) {
                char c = value[i];
                int rc;

                if (c == '%' && i + 2 < len && tsr_hex_value((unsigned char)value[i + 1]) >= 0 &&
                    tsr_hex_value((unsigned char)value[i + 2]) >= 0) {
                        c = (char)(tsr_hex_value((unsigned char)value[i + 1]) * 16 +
                                   tsr_hex_value((unsigned char)value[i + 2]));
                        i += 2;
                }
                rc = tsr_buf_addch(out, c);
                if (rc) {
                        out->len = start;
                        if (out->cap)
                                out->ptr[start] = '\0';
                        return rc;
                }
        }
        return 0;
}

int tsr_grpc_status_code_parse(const char *value, size_t len, int *code)
{
        int v = 0;

        if (len < 1 || len > 3)
                return TSR_EPARSE;
        for (size_t i = 0; i < len; i++) {
                if (value[i] < '0' || value[i] > '9')
                        return TSR_EPARSE;
                v = v * 10 + (value[i] - '0');
        }
        *code = v;
        return 0;
}

int tsr_grpc_timeout_parse(const char *value, size_t len, uint64_t *ms)
{
        uint64_t v = 0, r;

        if (len < 2 || len > 9)
                return TSR_EPARSE;
        for (size_t i = 0; i + 1 < len; i++) {
                if (value[i] < '0' || value[i] > '9')
                        return TSR_EPARSE;
                v = v * 10 + (uint64_t)(value[i] - '0');
        }
        switch (value[len - 1]) {
        case 'H':
                r = v * 3600000;
                break;
        case 'M':
                r = v * 60000;
                break;
        case 'S':
                r = v * 1000;
                break;
        case 'm':
                r = v;
                break;
        case 'u':
                r = (v + 999) / 1000;
                break;
        case 'n':
                r = (v + 999999) / 1000000;
                break;
        default:
                return TSR_EPARSE;
        }
        *ms = r;
        return 0;
}

int tsr_grpc_timeout_format(uint64_t ms, char out[16])
{
        if (ms == 0)
                return TSR_ERANGE;
        if (ms <= 99999999) {
                snprintf(out, 16, "%llum", (unsigned long long)ms);
                return 0;
        }
        if ((ms + 999) / 1000 <= 99999999) {
                snprintf(out, 16, "%lluS", (unsigned long long)((ms + 999) / 1000));
                return 0;
        }
        return TSR_ERANGE;
}
