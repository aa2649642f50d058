/*
 * hex.h - the value of one hexadecimal digit, shared by every reader of hex escapes
 * (codec/json_pick's \uXXXX, grpc/status's percent-encoding, webhook/http_request's chunk
 * sizes). Pure.
 */
#ifndef TSR_BASE_HEX_H
#define TSR_BASE_HEX_H

/* 0-15 for '0'-'9', 'a'-'f', 'A'-'F'; -1 for any other byte. */
static inline int tsr_hex_value(unsigned char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

#endif
