/*
 * quantity.c - Kubernetes resource quantities as apimachinery's resource.Quantity: parsing
 * (ParseQuantity), the canonical string (String / CanonicalizeBytes), exact comparison and the
 * rounding integer accessors (Value, MilliValue).
 *
 * Invariants:
 *  - A parsed quantity is normalized: value 0 has scale 0; any other value has no trailing decimal
 *    zero in its mantissa, -9 <= scale <= 18 and |value * 10^scale| <= INT64_MAX. Hand-built
 *    quantities (tsr_quantity_from_int, or a struct filled in by a caller) need not be normalized:
 *    formatting, comparison and the accessors take any int64 mantissa at any int32 scale, work on
 *    uint64 magnitudes and int64 exponents, and so never overflow.
 *  - Parsing is exact and allocation-free for input of any length: each non-zero digit goes by its
 *    decimal weight into a fixed digit buffer (weights 10^37 .. 10^-70). A non-zero digit below the
 *    buffer only sets a sticky flag; that is exact for rounding up to nano even after the binary
 *    multiplication, because a dropped tail times 2^k (k <= 60) stays below the gap between
 *    representable fractions (see round_up_to_nano). The common case, an integer of at most 18
 *    digits with no suffix or an SI one, is computed in a uint64 first (parse_integer) and gives
 *    the buffer's result exactly; everything else goes to the buffer.
 *  - *out is written only on success; every failure fills diag.
 *
 * Deliberate differences from apimachinery, whose slow path keeps any precision in an inf.Dec:
 *  - a number whose magnitude exceeds INT64_MAX, or that needs more than 19 mantissa digits at
 *    nano precision, is refused with TSR_ERANGE ("12E", "1E100", "8Ei", "-9223372036854775808").
 *    apimachinery keeps such decimals and silently caps BinarySI at 2^63-1;
 *  - an e/E exponent outside int32 is TSR_ERANGE (apimachinery: error past int64, wraps int32);
 *  - the grammar is the documented one with a digit required somewhere and after any decimal
 *    point: "1.", ".", "1.G", "-", "k" are refused (apimachinery's scanner reads them as 1, 0, 1G,
 *    0, 0); ".5" is accepted, as upstream does.
 */
#include "base/quantity.h"

#include "base/diag.h"
#include "base/err.h"

#include <limits.h>
#include <string.h>

#define DIG_HI   37    /* weight of the highest slot: room for (10^19 - 1) * 2^60 */
#define DIG_LO   (-70) /* weight of the lowest slot: nano - 61 (see round_up_to_nano) */
#define DIG_N    (DIG_HI - DIG_LO + 1)
#define W_MAX    18   /* the highest weight an accepted quantity can have */
#define W_NANO   (-9) /* the finest weight a quantity keeps */
#define MANT_MAX 19   /* digits of INT64_MAX */
#define ECHO_MAX 64   /* bytes of the input quoted in a diagnostic */

struct digits {
        unsigned char d[DIG_N]; /* d[DIG_HI - w] is the digit of weight 10^w */
        bool sticky;            /* a non-zero digit below DIG_LO was dropped */
};

struct suffix {
        enum tsr_qformat format;
        int shift;     /* BinarySI: the value is multiplied by 2^shift */
        int64_t exp10; /* DecimalSI / DecimalExponent: the value is multiplied by 10^exp10 */
};

static const struct {
        char name[2];
        int exp10;
} dec_suffixes[] = {
    {"n", -9}, {"u", -6}, {"m", -3}, {"k", 3}, {"M", 6}, {"G", 9}, {"T", 12}, {"P", 15}, {"E", 18},
};

static const char bin_suffixes[][3] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* Fails with code, quoting the input when it is short printable ASCII. */
static int fail(struct tsr_diag *diag, int code, const char *s, size_t len, const char *why)
{
        size_t n = len < ECHO_MAX ? len : ECHO_MAX;

        for (size_t i = 0; i < n; i++) {
                if (s[i] < 0x20 || s[i] > 0x7e)
                        return tsr_diag_set(diag, code, "quantity: %s", why);
        }
        return tsr_diag_set(diag, code, "quantity \"%.*s\"%s: %s", (int)n, s, len > n ? "..." : "",
                            why);
}

/*
 * Reads the suffix s[0..len): "", a decimal SI letter, a binary SI pair, or e/E followed by a
 * signed decimal integer. Returns 0, TSR_EPARSE (unknown suffix) or TSR_ERANGE (exponent outside
 * int32).
 */
static int parse_suffix(const char *s, size_t len, struct suffix *sf)
{
        size_t i;
        bool neg = false;
        int64_t e = 0;

        sf->format = TSR_QF_DECIMAL_SI;
        sf->shift = 0;
        sf->exp10 = 0;
        if (len == 0)
                return 0;
        if (len == 1) {
                for (size_t k = 0; k < sizeof(dec_suffixes) / sizeof(dec_suffixes[0]); k++) {
                        if (s[0] == dec_suffixes[k].name[0]) {
                                sf->exp10 = dec_suffixes[k].exp10;
                                return 0;
                        }
                }
                return TSR_EPARSE;
        }
        if (len == 2 && s[1] == 'i') {
                for (size_t k = 1; k < sizeof(bin_suffixes) / sizeof(bin_suffixes[0]); k++) {
                        if (s[0] == bin_suffixes[k][0]) {
                                sf->format = TSR_QF_BINARY_SI;
                                sf->shift = (int)k * 10;
                                return 0;
                        }
                }
                return TSR_EPARSE;
        }
        if (s[0] != 'e' && s[0] != 'E')
                return TSR_EPARSE;
        i = 1;
        if (s[i] == '+' || s[i] == '-') {
                neg = s[i] == '-';
                i++;
        }
        if (i == len)
                return TSR_EPARSE;
        for (; i < len; i++) {
                if (!is_digit(s[i]))
                        return TSR_EPARSE;
                /* Saturate just past the int32 range; the whole suffix is still checked. */
                if (e <= (int64_t)INT32_MAX + 1)
                        e = e * 10 + (s[i] - '0');
        }
        if (neg)
                e = -e;
        if (e < INT32_MIN || e > INT32_MAX)
                return TSR_ERANGE;
        sf->format = TSR_QF_DECIMAL_EXPONENT;
        sf->exp10 = e;
        return 0;
}

/* Puts the non-zero digit c at weight w. Returns TSR_ERANGE when w is above W_MAX. */
static int place(struct digits *g, int64_t w, unsigned char c)
{
        if (w > W_MAX)
                return TSR_ERANGE;
        if (w < DIG_LO) {
                g->sticky = true;
                return 0;
        }
        g->d[DIG_HI - w] = c;
        return 0;
}

/* Multiplies the digit buffer by 1024. The caller guarantees the product fits (DIG_HI). */
static void mul1024(struct digits *g)
{
        unsigned carry = 0;

        for (size_t i = DIG_N; i-- > 0;) {
                unsigned t = (unsigned)g->d[i] * 1024u + carry;

                g->d[i] = (unsigned char)(t % 10u);
                carry = t / 10u;
        }
}

/*
 * Rounds the buffer away from zero to a multiple of 10^-9. Exact with the sticky flag: the buffer
 * times 10^70 is an integer, and after a multiplication by 2^k (k <= 60) a multiple of 2^k, so its
 * fraction of a nano is a multiple of 2^k * 10^-61 and at most 1 - 2^k * 10^-61; the dropped tail,
 * below 10^-70 before the multiplication, is below 2^k * 10^-61 nano after it, and so can never
 * carry into the next nano on its own. The rounded value is thus "truncate, add 1n if anything
 * non-zero lies below nano".
 */
static void round_up_to_nano(struct digits *g)
{
        bool up = g->sticky;

        for (int w = W_NANO - 1; w >= DIG_LO; w--) {
                if (g->d[DIG_HI - w] != 0) {
                        up = true;
                        g->d[DIG_HI - w] = 0;
                }
        }
        g->sticky = false;
        if (!up)
                return;
        for (int w = W_NANO; w <= DIG_HI; w++) {
                if (g->d[DIG_HI - w] < 9) {
                        g->d[DIG_HI - w]++;
                        return;
                }
                g->d[DIG_HI - w] = 0;
        }
}

int tsr_quantity_parse(const char *s, struct tsr_quantity *out, struct tsr_diag *diag)
{
        if (!s || !out)
                return tsr_diag_set(diag, TSR_EINVAL, "quantity: NULL argument");
        return tsr_quantity_parse_n(s, strlen(s), out, diag);
}

/*
 * The common case: an optional sign, at most 18 digits and no suffix or an SI one ("100",
 * "500m", "4Gi"). Exact in uint64, so it gives what the digit buffer below gives; returns false
 * for anything else (a decimal point, an exponent, more digits, a magnitude near the limit, an
 * error), which the digit buffer then takes.
 */
static bool parse_integer(const char *s, size_t len, struct tsr_quantity *out)
{
        size_t i = 0, start, digits = 1;
        bool neg = false;
        uint64_t n = 0;
        int64_t exp;
        struct suffix sf;

        if (s[0] == '+' || s[0] == '-') {
                neg = s[0] == '-';
                i++;
        }
        start = i;
        for (; i < len && is_digit(s[i]); i++) {
                if (i - start == 18)
                        return false;
                n = n * 10u + (uint64_t)(s[i] - '0');
        }
        if (i == start || parse_suffix(s + i, len - i, &sf) || sf.format == TSR_QF_DECIMAL_EXPONENT)
                return false;
        if (n == 0) {
                out->value = 0;
                out->scale = 0;
                out->format = sf.format;
                return true;
        }
        exp = sf.exp10;
        if (sf.format == TSR_QF_BINARY_SI) {
                if (n > ((uint64_t)INT64_MAX >> sf.shift))
                        return false;
                n <<= sf.shift;
                exp = 0;
        }
        for (; n % 10u == 0; n /= 10u)
                exp++;
        for (uint64_t t = n; t >= 10u; t /= 10u)
                digits++;
        /* The highest digit's weight: at 18 the whole part may pass INT64_MAX; let the buffer
         * decide. */
        if ((int64_t)digits - 1 + exp > 17)
                return false;
        out->value = neg ? -(int64_t)n : (int64_t)n;
        out->scale = (int32_t)exp;
        out->format = sf.format;
        return true;
}

int tsr_quantity_parse_n(const char *s, size_t len, struct tsr_quantity *out, struct tsr_diag *diag)
{
        struct digits g;
        struct suffix sf;
        size_t i = 0;
        size_t int_start, int_len, frac_start = 0, frac_len = 0;
        bool neg = false;
        bool nonzero = false;
        int64_t base_exp;
        int hi = INT_MIN, lo = INT_MAX;
        uint64_t mant = 0, whole = 0;
        int rc;

        if (!s || !out)
                return tsr_diag_set(diag, TSR_EINVAL, "quantity: NULL argument");
        if (len == 0)
                return tsr_diag_set(diag, TSR_EPARSE, "quantity: empty string");
        if (parse_integer(s, len, out))
                return 0;

        if (s[0] == '+' || s[0] == '-') {
                neg = s[0] == '-';
                i++;
        }
        int_start = i;
        while (i < len && is_digit(s[i]))
                i++;
        int_len = i - int_start;
        if (i < len && s[i] == '.') {
                i++;
                frac_start = i;
                while (i < len && is_digit(s[i]))
                        i++;
                frac_len = i - frac_start;
                if (frac_len == 0)
                        return fail(diag, TSR_EPARSE, s, len, "no digit after the decimal point");
        }
        if (int_len + frac_len == 0)
                return fail(diag, TSR_EPARSE, s, len, "no digits");

        rc = parse_suffix(s + i, len - i, &sf);
        if (rc == TSR_ERANGE)
                return fail(diag, rc, s, len, "exponent out of range");
        if (rc != 0)
                return fail(diag, rc, s, len,
                            "unknown suffix (want n u m k M G T P E, Ki..Ei or e<int>)");

        /* Place every non-zero digit by weight; a binary suffix is applied afterwards. */
        memset(&g, 0, sizeof(g));
        base_exp = sf.format == TSR_QF_BINARY_SI ? 0 : sf.exp10;
        for (size_t k = 0; k < int_len; k++) {
                unsigned char c = (unsigned char)(s[int_start + k] - '0');

                if (c == 0)
                        continue;
                nonzero = true;
                if (place(&g, base_exp + (int64_t)(int_len - 1 - k), c) != 0)
                        return fail(diag, TSR_ERANGE, s, len, "magnitude exceeds int64");
        }
        for (size_t k = 0; k < frac_len; k++) {
                unsigned char c = (unsigned char)(s[frac_start + k] - '0');

                if (c == 0)
                        continue;
                nonzero = true;
                if (place(&g, base_exp - 1 - (int64_t)k, c) != 0)
                        return fail(diag, TSR_ERANGE, s, len, "magnitude exceeds int64");
        }
        if (!nonzero) {
                out->value = 0;
                out->scale = 0;
                out->format = sf.format;
                return 0;
        }
        for (int k = 0; k < sf.shift / 10; k++)
                mul1024(&g);
        round_up_to_nano(&g);

        for (int w = W_NANO; w <= DIG_HI; w++) {
                if (g.d[DIG_HI - w] != 0) {
                        if (w < lo)
                                lo = w;
                        hi = w;
                }
        }
        if (hi > W_MAX)
                return fail(diag, TSR_ERANGE, s, len, "magnitude exceeds int64");
        if (hi - lo + 1 > MANT_MAX)
                return fail(diag, TSR_ERANGE, s, len, "too many significant digits for int64");
        for (int w = hi; w >= lo; w--)
                mant = mant * 10u + g.d[DIG_HI - w];
        for (int w = hi; w >= 0; w--)
                whole = whole * 10u + g.d[DIG_HI - w];
        if (mant > (uint64_t)INT64_MAX || whole > (uint64_t)INT64_MAX)
                return fail(diag, TSR_ERANGE, s, len, "magnitude exceeds int64");

        out->value = neg ? -(int64_t)mant : (int64_t)mant;
        out->scale = lo;
        out->format = sf.format;
        /* As upstream: a binary quantity strictly between -1 and 1 is kept as decimal. */
        if (sf.format == TSR_QF_BINARY_SI && hi < 0)
                out->format = TSR_QF_DECIMAL_SI;
        return 0;
}

struct tsr_quantity tsr_quantity_from_int(int64_t v, enum tsr_qformat f)
{
        struct tsr_quantity q;

        q.value = v;
        q.scale = 0;
        q.format = f;
        return q;
}

static uint64_t magnitude(int64_t v)
{
        return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/* Writes the decimal digits of v at p (no NUL) and returns the count. */
static size_t put_u64(char *p, uint64_t v)
{
        char tmp[20];
        size_t n = 0;

        do {
                tmp[n++] = (char)('0' + v % 10u);
                v /= 10u;
        } while (v);
        for (size_t i = 0; i < n; i++)
                p[i] = tmp[n - 1 - i];
        return n;
}

/* Writes "e<exp>" at p (no NUL) and returns the count. */
static size_t put_exp(char *p, int64_t exp)
{
        size_t n = 0;

        p[n++] = 'e';
        if (exp < 0) {
                p[n++] = '-';
                return n + put_u64(p + n, (uint64_t)0 - (uint64_t)exp);
        }
        return n + put_u64(p + n, (uint64_t)exp);
}

/* Appends the DecimalSI / DecimalExponent form of mag * 10^exp (mag > 0, no trailing zero). */
static size_t put_decimal(char *p, uint64_t mag, int64_t exp, enum tsr_qformat f)
{
        size_t n = put_u64(p, mag);

        /* Lower the exponent to a multiple of 3, padding the mantissa with zeros. */
        while (exp % 3 != 0) {
                p[n++] = '0';
                exp--;
        }
        if (f == TSR_QF_DECIMAL_SI) {
                if (exp == 0)
                        return n;
                for (size_t k = 0; k < sizeof(dec_suffixes) / sizeof(dec_suffixes[0]); k++) {
                        if (dec_suffixes[k].exp10 == exp) {
                                p[n++] = dec_suffixes[k].name[0];
                                return n;
                        }
                }
                /* No SI letter beyond E or below n: upstream falls back to an exponent. */
        } else if (exp == 0) {
                return n;
        }
        return n + put_exp(p + n, exp);
}

char *tsr_quantity_format(const struct tsr_quantity *q, char *buf)
{
        uint64_t mag = magnitude(q->value);
        int64_t exp = q->scale;
        enum tsr_qformat f = q->format;
        size_t n = 0;

        if (q->value == 0) {
                buf[0] = '0';
                buf[1] = '\0';
                return buf;
        }
        if (f != TSR_QF_DECIMAL_SI && f != TSR_QF_BINARY_SI && f != TSR_QF_DECIMAL_EXPONENT)
                f = TSR_QF_DECIMAL_EXPONENT; /* upstream's default for an unknown format */
        while (mag % 10u == 0) {
                mag /= 10u;
                exp++;
        }
        if (q->value < 0)
                buf[n++] = '-';

        if (f == TSR_QF_BINARY_SI) {
                uint64_t whole = mag;
                bool fits = exp >= 0;
                int times = 0;

                for (int64_t k = 0; fits && k < exp; k++) {
                        if (whole > UINT64_MAX / 10u)
                                fits = false;
                        else
                                whole *= 10u;
                }
                /*
                 * Non-integers and |v| < 1024 print as DecimalSI, as upstream. So does an integer
                 * beyond uint64, which no parse produces (upstream would go through inf.Dec).
                 */
                if (fits && whole >= 1024u) {
                        while (times < 6 && whole % 1024u == 0) {
                                whole /= 1024u;
                                times++;
                        }
                        n += put_u64(buf + n, whole);
                        memcpy(buf + n, bin_suffixes[times], strlen(bin_suffixes[times]));
                        n += strlen(bin_suffixes[times]);
                        buf[n] = '\0';
                        return buf;
                }
                f = TSR_QF_DECIMAL_SI;
        }
        n += put_decimal(buf + n, mag, exp, f);
        buf[n] = '\0';
        return buf;
}

/* Compares mag_a * 10^exp_a with mag_b * 10^exp_b, both magnitudes non-zero. */
static int cmp_magnitude(uint64_t ma, int64_t ea, uint64_t mb, int64_t eb)
{
        char da[20], db[20];
        size_t na, nb;
        int64_t top_a, top_b;

        while (ma % 10u == 0) {
                ma /= 10u;
                ea++;
        }
        while (mb % 10u == 0) {
                mb /= 10u;
                eb++;
        }
        na = put_u64(da, ma);
        nb = put_u64(db, mb);
        /* The leading digit of each has weight top - 1. */
        top_a = ea + (int64_t)na;
        top_b = eb + (int64_t)nb;
        if (top_a != top_b)
                return top_a < top_b ? -1 : 1;
        for (size_t i = 0; i < na || i < nb; i++) {
                char ca = i < na ? da[i] : '0';
                char cb = i < nb ? db[i] : '0';

                if (ca != cb)
                        return ca < cb ? -1 : 1;
        }
        return 0;
}

int tsr_quantity_cmp(const struct tsr_quantity *a, const struct tsr_quantity *b)
{
        int sa = (a->value > 0) - (a->value < 0);
        int sb = (b->value > 0) - (b->value < 0);
        int r;

        if (sa != sb)
                return sa < sb ? -1 : 1;
        if (sa == 0)
                return 0;
        r = cmp_magnitude(magnitude(a->value), a->scale, magnitude(b->value), b->scale);
        return sa > 0 ? r : -r;
}

bool tsr_quantity_is_int(const struct tsr_quantity *q, int64_t v)
{
        struct tsr_quantity t = tsr_quantity_from_int(v, TSR_QF_DECIMAL_SI);

        return tsr_quantity_cmp(q, &t) == 0;
}

/* q at scale target (q / 10^target), rounded away from zero, as upstream's ScaledValue. */
static int scaled_value(const struct tsr_quantity *q, int32_t target, int64_t *out)
{
        uint64_t mag = magnitude(q->value);
        uint64_t limit = q->value < 0 ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
        int64_t delta = (int64_t)q->scale - target;
        bool rest = false;

        if (q->value == 0) {
                *out = 0;
                return 0;
        }
        for (; delta > 0; delta--) {
                if (mag > UINT64_MAX / 10u)
                        return TSR_ERANGE;
                mag *= 10u;
        }
        /* Dividing a non-zero mag down to 0 always drops a non-zero digit, so rest is set. */
        for (; delta < 0 && mag != 0; delta++) {
                if (mag % 10u != 0)
                        rest = true;
                mag /= 10u;
        }
        if (rest)
                mag++;
        if (mag > limit)
                return TSR_ERANGE;
        if (q->value < 0)
                *out = mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag;
        else
                *out = (int64_t)mag;
        return 0;
}

int tsr_quantity_value(const struct tsr_quantity *q, int64_t *out)
{
        return scaled_value(q, 0, out);
}

int tsr_quantity_milli(const struct tsr_quantity *q, int64_t *out)
{
        return scaled_value(q, -3, out);
}
