/*
 * quantity.h - Kubernetes resource quantities, parsed and printed exactly as apimachinery's
 * k8s.io/apimachinery/pkg/api/resource.Quantity does.
 *
 * A quantity is a signed decimal number value * 10^scale together with the format it was written
 * in (DecimalSI "12800k", BinarySI "192Gi", DecimalExponent "12e6"). Values are held exactly while
 * they fit in int64 at some scale >= -9 (nano); parsing a number that does not fit is refused with
 * TSR_ERANGE, never wrapped. Precision below nano is rounded up, as apimachinery does.
 *
 * Printing is apimachinery's canonical form (String() / CanonicalizeBytes):
 *   DecimalSI: the largest exponent that is a multiple of 3 and leaves an integer mantissa:
 *              12800000 -> "12800k", 8000000 -> "8M", 64000 -> "64k", 102400 -> "102400",
 *              1600000 -> "1600k", 0.1 -> "100m", 1.5 -> "1500m", 0 -> "0".
 *   BinarySI:  integer values with |v| >= 1024 print in the largest power of 1024 that divides
 *              them ("192Gi", "2Ti", "1536Mi", "1025" stays "1025"); values strictly between -1024
 *              and 1024, and non-integers, print as DecimalSI.
 *   DecimalExponent: like DecimalSI but "e<exp>" instead of a suffix ("12e6").
 *
 * Pure value type: no allocation, safe from any thread.
 */
#ifndef TSR_BASE_QUANTITY_H
#define TSR_BASE_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tsr_diag;

enum tsr_qformat {
        TSR_QF_DECIMAL_SI,
        TSR_QF_BINARY_SI,
        TSR_QF_DECIMAL_EXPONENT,
};

struct tsr_quantity {
        int64_t value; /* mantissa */
        int32_t scale; /* the quantity is value * 10^scale; scale >= -9 */
        enum tsr_qformat format;
};

/* Longest canonical string tsr_quantity_format can produce, including the NUL. */
#define TSR_QUANTITY_STR_MAX 48

/*
 * Parses the NUL-terminated Kubernetes quantity s ("100m", "1.5Gi", "12e6", "-3", "+4k").
 * Grammar (apimachinery): sign? digits [. digits] suffix, where suffix is one of
 * n u m "" k M G T P E | Ki Mi Gi Ti Pi Ei | e<signed int> | E<signed int>; at least one digit;
 * no spaces. Returns 0 and writes *out, or TSR_EPARSE (not a quantity) / TSR_ERANGE (does not fit)
 * with a message in diag; *out is untouched on failure.
 */
int tsr_quantity_parse(const char *s, struct tsr_quantity *out, struct tsr_diag *diag);

/* As tsr_quantity_parse, for a string of len bytes (not NUL-terminated). */
int tsr_quantity_parse_n(const char *s, size_t len, struct tsr_quantity *out,
                         struct tsr_diag *diag);

/* Returns the integer quantity v in format f (scale 0). */
struct tsr_quantity tsr_quantity_from_int(int64_t v, enum tsr_qformat f);

/*
 * Writes the canonical form of q into buf (at least TSR_QUANTITY_STR_MAX bytes) and returns buf.
 */
char *tsr_quantity_format(const struct tsr_quantity *q, char *buf);

/* Compares two quantities by numeric value: <0, 0, >0. Exact at any scale. */
int tsr_quantity_cmp(const struct tsr_quantity *a, const struct tsr_quantity *b);

/* True when q is exactly the integer v ("1" and "1000m" are 1; "1m" is not). */
bool tsr_quantity_is_int(const struct tsr_quantity *q, int64_t v);

/*
 * Writes q rounded up to an integer (apimachinery Value()) into *out. Returns 0 or TSR_ERANGE.
 */
int tsr_quantity_value(const struct tsr_quantity *q, int64_t *out);

/* Writes q * 1000 rounded up (apimachinery MilliValue()) into *out. Returns 0 or TSR_ERANGE. */
int tsr_quantity_milli(const struct tsr_quantity *q, int64_t *out);

#endif
