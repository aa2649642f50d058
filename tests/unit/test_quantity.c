/*
 * test_quantity.c - cmocka suite for base/quantity: apimachinery's parse and canonical String()
 * round trips, the stored form of parsed values, refused inputs with their exact codes, exact
 * comparison across scales, is_int, and the rounding Value / MilliValue accessors.
 *
 * Invariants: every table row asserts an exact string, code or value, so a wrong implementation
 * fails the row and names the input; no test depends on another's state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

struct round_trip {
        const char *in;
        const char *want;
};

/* Parses in (which must parse) into *q, failing the test with the input named otherwise. */
static void must_parse(const char *in, struct tsr_quantity *q)
{
        struct tsr_diag d;
        int rc;

        tsr_diag_clear(&d);
        rc = tsr_quantity_parse(in, q, &d);
        if (rc != 0)
                fail_msg("parse(\"%s\") = %s (%s), want TSR_OK", in, tsr_err_name(rc), d.msg);
}

static void check_round_trips(const struct round_trip *t, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct tsr_quantity q, again;
                char buf[TSR_QUANTITY_STR_MAX];

                must_parse(t[i].in, &q);
                tsr_quantity_format(&q, buf);
                if (strcmp(buf, t[i].want) != 0)
                        fail_msg("format(parse(\"%s\")) = \"%s\", want \"%s\"", t[i].in, buf,
                                 t[i].want);
                /* The canonical form parses back to the same value. */
                must_parse(buf, &again);
                if (tsr_quantity_cmp(&q, &again) != 0)
                        fail_msg("canonical \"%s\" of \"%s\" changed the value", buf, t[i].in);
        }
}

/* The examples the header and apimachinery's documentation give. */
static void test_quantity__round_trip_documented_examples(void **state)
{
        static const struct round_trip t[] = {
            {"12800000", "12800k"}, {"8000000", "8M"},    {"64000", "64k"},
            {"102400", "102400"},   {"655360", "655360"}, {"1600000", "1600k"},
            {"0.1", "100m"},        {"1.5", "1500m"},     {"0", "0"},
            {"192Gi", "192Gi"},     {"2Ti", "2Ti"},       {"12e6", "12e6"},
            {"1.5Gi", "1536Mi"},    {"1000m", "1"},       {"0.5", "500m"},
            {"1e3", "1e3"},         {"100Mi", "100Mi"},   {"1024", "1024"},
            {"1Ki", "1Ki"},         {"1025", "1025"},     {"100m", "100m"},
            {"10M", "10M"},         {"1024Mi", "1Gi"},    {"1000M", "1G"},
            {"1000e6", "1e9"},      {"0.75Gi", "768Mi"},  {"100.035k", "100035"},
            {"-1.01", "-1010m"},    {"1E-3", "1e-3"},     {"1.2e3", "1200"},
        };

        (void)state;
        check_round_trips(t, N_ELEMS(t));
}

static void test_quantity__round_trip_every_decimal_suffix(void **state)
{
        static const struct round_trip t[] = {
            {"1n", "1n"},
            {"1u", "1u"},
            {"1m", "1m"},
            {"1", "1"},
            {"1k", "1k"},
            {"1M", "1M"},
            {"1G", "1G"},
            {"1T", "1T"},
            {"1P", "1P"},
            {"1E", "1E"},
            {"9E", "9E"},
            {"999n", "999n"},
            {"1000n", "1u"},
            {"1500n", "1500n"},
            {"1000u", "1m"},
            {"1000k", "1M"},
            {"5.444T", "5444G"},
            {"40.1T", "40100G"},
            {"2.5P", "2500T"},
            {"1.01E", "1010P"},
            {"7.123456M", "7123456"},
            {"6.987654321G", "6987654321"},
            {"8.1k", "8100"},
            {"9.01", "9010m"},
            {"10.035M", "10035k"},
            {"0.0005k", "500m"},
            {"50k", "50k"},
            {"300T", "300T"},
        };

        (void)state;
        check_round_trips(t, N_ELEMS(t));
}

static void test_quantity__round_trip_every_binary_suffix(void **state)
{
        static const struct round_trip t[] = {
            {"1Ki", "1Ki"},
            {"1Mi", "1Mi"},
            {"1Gi", "1Gi"},
            {"1Ti", "1Ti"},
            {"1Pi", "1Pi"},
            {"1Ei", "1Ei"},
            {"7Ei", "7Ei"},
            {"8191Pi", "8191Pi"},
            {"1023Ki", "1023Ki"},
            {"1024Ki", "1Mi"},
            {"1025Ki", "1025Ki"},
            {"2048Gi", "2Ti"},
            {"1.5Mi", "1536Ki"},
            {"1.5Ki", "1536"},
            {"0.5Mi", "512Ki"},
            {"0.5Ki", "512"},
            {"0.1Ki", "102400m"},
            {".001Ki", "1024m"},
            {".000001Ki", "1024u"},
            {".000000001Ki", "1024n"},
            {"1.0001Ki", "1024102400u"},
            {"100.035Ki", "102435840m"},
            {"0.05Gi", "53687091200m"},
            {"0.025Ti", "27487790694400m"},
            {"0Ki", "0"},
            {"0.00048828125Ki", "500m"},
            {"0.9765625Ki", "1k"},
        };

        (void)state;
        check_round_trips(t, N_ELEMS(t));
}

static void test_quantity__round_trip_signs_and_zeros(void **state)
{
        static const struct round_trip t[] = {
            {"-3", "-3"},
            {"+4k", "4k"},
            {"-0", "0"},
            {"+0", "0"},
            {"00", "0"},
            {"007", "7"},
            {"0.000", "0"},
            {"-0.0e5", "0"},
            {"0e100", "0"},
            {"-1Ki", "-1Ki"},
            {"-1.5Gi", "-1536Mi"},
            {"-0.5Ki", "-512"},
            {"-1023", "-1023"},
            {"-100m", "-100m"},
            {"-12e6", "-12e6"},
            {"-9E", "-9E"},
            {"+.5", "500m"},
            {".5", "500m"},
            {"0000000000000000000000000000000000000001", "1"},
            {"1.000000000000000000000000000000000000000", "1"},
            {"9223372036854775807", "9223372036854775807"},
            {"-9223372036854775807", "-9223372036854775807"},
        };

        (void)state;
        check_round_trips(t, N_ELEMS(t));
}

static void test_quantity__round_trip_exponents(void **state)
{
        static const struct round_trip t[] = {
            {"1e0", "1"},
            {"1E+6", "1e6"},
            {"1e+3", "1e3"},
            {"1e1", "10"},
            {"1e2", "100"},
            {"1e4", "10e3"},
            {"1e-1", "100e-3"},
            {"0.5e0", "500e-3"},
            {"0.5e-1", "50e-3"},
            {"0.5e-2", "5e-3"},
            {"1.3E+6", "1300e3"},
            {"1.40e9", "1400e6"},
            {"1.53E12", "1530e9"},
            {"1.7E18", "1700e15"},
            {"1e18", "1e18"},
            {"10e17", "1e18"},
            {"0.001e3", "1"},
            {"1e003", "1e3"},
            {"1e-0", "1"},
            {"1E-9", "1e-9"},
            {"12e-3", "12e-3"},
            {"1000000000000000000000e-3", "1e18"},
            {"1e-2147483648", "1e-9"},
        };

        (void)state;
        check_round_trips(t, N_ELEMS(t));
}

/* Precision below nano rounds away from zero, as upstream's inf.RoundUp. */
static void test_quantity__round_trip_rounds_up_below_nano(void **state)
{
        static const struct round_trip t[] = {
            {"3.001n", "4n"},
            {"0.9n", "1n"},
            {"0.0000000001", "1n"},
            {"0.0000000005", "1n"},
            {"0.00000000050", "1n"},
            {"0.00000012345", "124n"},
            {"0.00000012354", "124n"},
            {"1.1E-9", "2e-9"},
            {"0.5e-9", "1e-9"},
            {"1e-100", "1e-9"},
            {"-0.0000000001", "-1n"},
            {"-3.001n", "-4n"},
            {"0.000000000001Ki", "2n"},
            {"1.000000000000000000000000000001", "1000000001n"},
            {"9999999999.9999999991", "10G"},
            {"0.9999999999", "1"},
            {"1.0000000000000000000000000000000000000000000000000000000000000000000000000001Ki",
             "1024000000001n"},
            {"0.5000000000000000000000000000000000000000000000000000000000000000000000000001Ki",
             "512000000001n"},
        };

        (void)state;
        check_round_trips(t, N_ELEMS(t));
}

/*
 * As upstream, a BinarySI integer without a factor of 1024 prints as bare digits, which re-parse
 * as DecimalSI and then print with a decimal suffix: the canonical form settles after one round.
 */
static void test_quantity__binary_without_1024_factor_reprints_as_decimal(void **state)
{
        static const struct {
                const char *in, *first, *second;
        } t[] = {
            {"312.5Ki", "320000", "320k"},  {"1.5Ki", "1536", "1536"},
            {"1000Ki", "1000Ki", "1000Ki"}, {"0.5Ki", "512", "512"},
            {"1.953125Ki", "2000", "2k"},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(t); i++) {
                struct tsr_quantity q;
                char buf[TSR_QUANTITY_STR_MAX];

                must_parse(t[i].in, &q);
                tsr_quantity_format(&q, buf);
                if (strcmp(buf, t[i].first) != 0)
                        fail_msg("format(parse(\"%s\")) = \"%s\", want \"%s\"", t[i].in, buf,
                                 t[i].first);
                must_parse(t[i].first, &q);
                tsr_quantity_format(&q, buf);
                if (strcmp(buf, t[i].second) != 0)
                        fail_msg("format(parse(\"%s\")) = \"%s\", want \"%s\"", t[i].first, buf,
                                 t[i].second);
        }
}

struct stored {
        const char *in;
        int64_t value;
        int32_t scale;
        enum tsr_qformat format;
};

/* What parsing stores: the smallest mantissa, and the format upstream would keep. */
static void test_quantity__parse_stores_normalized_value_and_format(void **state)
{
        static const struct stored t[] = {
            {"100m", 1, -1, TSR_QF_DECIMAL_SI},
            {"8M", 8, 6, TSR_QF_DECIMAL_SI},
            {"1.5Gi", 1610612736, 0, TSR_QF_BINARY_SI},
            {"0.5Ki", 512, 0, TSR_QF_BINARY_SI},
            {"0.000000000001Ki", 2, -9, TSR_QF_DECIMAL_SI},
            {"-0.5Ki", -512, 0, TSR_QF_BINARY_SI},
            {"0.001Ki", 1024, -3, TSR_QF_BINARY_SI},
            {"0.0001Ki", 1024, -4, TSR_QF_DECIMAL_SI},
            {"-0.0001Ki", -1024, -4, TSR_QF_DECIMAL_SI},
            {"0Ki", 0, 0, TSR_QF_BINARY_SI},
            {"0", 0, 0, TSR_QF_DECIMAL_SI},
            {"0e5", 0, 0, TSR_QF_DECIMAL_EXPONENT},
            {"12e6", 12, 6, TSR_QF_DECIMAL_EXPONENT},
            {"1.2e3", 12, 2, TSR_QF_DECIMAL_EXPONENT},
            {"-7n", -7, -9, TSR_QF_DECIMAL_SI},
            {"7Ei", INT64_C(8070450532247928832), 0, TSR_QF_BINARY_SI},
            {"9223372036854775807", INT64_MAX, 0, TSR_QF_DECIMAL_SI},
            {"1234567890.123456789", INT64_C(1234567890123456789), -9, TSR_QF_DECIMAL_SI},
            {"9E", 9, 18, TSR_QF_DECIMAL_SI},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(t); i++) {
                struct tsr_quantity q;

                must_parse(t[i].in, &q);
                if (q.value != t[i].value || q.scale != t[i].scale || q.format != t[i].format)
                        fail_msg("parse(\"%s\") = {%lld, %d, %d}, want {%lld, %d, %d}", t[i].in,
                                 (long long)q.value, (int)q.scale, (int)q.format,
                                 (long long)t[i].value, (int)t[i].scale, (int)t[i].format);
        }
}

struct refused {
        const char *in;
        int code;
};

static void test_quantity__parse_refuses_malformed_and_out_of_range(void **state)
{
        static const struct refused t[] = {
            {"", TSR_EPARSE},
            {"1.", TSR_EPARSE},
            {".", TSR_EPARSE},
            {"abc", TSR_EPARSE},
            {"1 k", TSR_EPARSE},
            {"1kk", TSR_EPARSE},
            {"--1", TSR_EPARSE},
            {"1e", TSR_EPARSE},
            {" 1", TSR_EPARSE},
            {"1 ", TSR_EPARSE},
            {"-", TSR_EPARSE},
            {"+", TSR_EPARSE},
            {"-.", TSR_EPARSE},
            {"k", TSR_EPARSE},
            {"Ki", TSR_EPARSE},
            {"1K", TSR_EPARSE},
            {"1ki", TSR_EPARSE},
            {"1KI", TSR_EPARSE},
            {"1i", TSR_EPARSE},
            {"1mi", TSR_EPARSE},
            {"1.1.1", TSR_EPARSE},
            {"1e3.5", TSR_EPARSE},
            {"1e+", TSR_EPARSE},
            {"1e-", TSR_EPARSE},
            {"1Ki2", TSR_EPARSE},
            {"1e3k", TSR_EPARSE},
            {"0x10", TSR_EPARSE},
            {"1,5", TSR_EPARSE},
            {"1\n", TSR_EPARSE},
            {"1.G", TSR_EPARSE},
            {".5.5", TSR_EPARSE},
            {"+-1", TSR_EPARSE},
            {"1ee3", TSR_EPARSE},
            {"1E+-3", TSR_EPARSE},
            {"1eE3", TSR_EPARSE},
            {"1Eii", TSR_EPARSE},
            {"\xe2\x88\x9e", TSR_EPARSE},
            {"1Mb", TSR_EPARSE},
            {"1MiB", TSR_EPARSE},
            {"9999999999999999999", TSR_ERANGE},
            {"1E100", TSR_ERANGE},
            {"9223372036854775808", TSR_ERANGE},
            {"-9223372036854775808", TSR_ERANGE},
            {"12E", TSR_ERANGE},
            {"10E", TSR_ERANGE},
            {"8Ei", TSR_ERANGE},
            {"16Ei", TSR_ERANGE},
            {"8192Pi", TSR_ERANGE},
            {"9223372036854775807Ki", TSR_ERANGE},
            {"1e19", TSR_ERANGE},
            {"1e2147483647", TSR_ERANGE},
            {"1e2147483648", TSR_ERANGE},
            {"1e-2147483649", TSR_ERANGE},
            {"0e99999999999", TSR_ERANGE},
            {"12345678901.123456789", TSR_ERANGE},
            {"9999999999.999999999", TSR_ERANGE},
            {"92233720368.547758081", TSR_ERANGE}, /* 20 digits: 5 * 2^64 + 1 nano */
            {"9223372036854775810", TSR_ERANGE},
            {"9.3E", TSR_ERANGE},
            {"95367431640625Ei", TSR_ERANGE},      /* 2^40 * 10^20: few digits, huge */
            {"7450580596923828125Ei", TSR_ERANGE}, /* 10^27 * 2^33 */
            {"100000000000000000000000000000000000000000000000000", TSR_ERANGE},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(t); i++) {
                struct tsr_quantity q = {.value = 77, .scale = 5, .format = TSR_QF_BINARY_SI};
                struct tsr_diag d;
                int rc;

                tsr_diag_clear(&d);
                rc = tsr_quantity_parse(t[i].in, &q, &d);
                if (rc != t[i].code)
                        fail_msg("parse(\"%s\") = %s, want %s", t[i].in, tsr_err_name(rc),
                                 tsr_err_name(t[i].code));
                if (d.code != t[i].code || d.msg[0] == '\0')
                        fail_msg("parse(\"%s\") left diag {%s, \"%s\"}", t[i].in,
                                 tsr_err_name(d.code), d.msg);
                if (q.value != 77 || q.scale != 5 || q.format != TSR_QF_BINARY_SI)
                        fail_msg("parse(\"%s\") failed but wrote *out", t[i].in);
        }
}

static void test_quantity__parse_diag_quotes_input(void **state)
{
        struct tsr_quantity q;
        struct tsr_diag d;

        (void)state;
        tsr_diag_clear(&d);
        assert_int_equal(tsr_quantity_parse("1kk", &q, &d), TSR_EPARSE);
        assert_non_null(strstr(d.msg, "\"1kk\""));
        /* A NULL diag is allowed. */
        assert_int_equal(tsr_quantity_parse("1E100", &q, NULL), TSR_ERANGE);
}

static void test_quantity__parse_refuses_null_arguments(void **state)
{
        struct tsr_quantity q;

        (void)state;
        assert_int_equal(tsr_quantity_parse(NULL, &q, NULL), TSR_EINVAL);
        assert_int_equal(tsr_quantity_parse("1", NULL, NULL), TSR_EINVAL);
        assert_int_equal(tsr_quantity_parse_n(NULL, 1, &q, NULL), TSR_EINVAL);
}

static void test_quantity__parse_n_reads_only_len_bytes(void **state)
{
        static const char embedded[] = {'1', '\0', 'k'};
        struct tsr_quantity q;
        char buf[TSR_QUANTITY_STR_MAX];

        (void)state;
        assert_int_equal(tsr_quantity_parse_n("100Mi", 3, &q, NULL), 0);
        assert_string_equal(tsr_quantity_format(&q, buf), "100");
        assert_int_equal(tsr_quantity_parse_n("100Mi", 4, &q, NULL), 0);
        assert_string_equal(tsr_quantity_format(&q, buf), "100M");
        assert_int_equal(tsr_quantity_parse_n("1e3", 2, &q, NULL), TSR_EPARSE);
        assert_int_equal(tsr_quantity_parse_n("2Gixyz", 3, &q, NULL), 0);
        assert_string_equal(tsr_quantity_format(&q, buf), "2Gi");
        assert_int_equal(tsr_quantity_parse_n(embedded, sizeof(embedded), &q, NULL), TSR_EPARSE);
        assert_int_equal(tsr_quantity_parse_n("1", 0, &q, NULL), TSR_EPARSE);
}

struct formatted {
        struct tsr_quantity q;
        const char *want;
};

/* Hand-built values: BinarySI fallbacks, unnormalized mantissas, extreme scales. */
static void test_quantity__format_hand_built_values(void **state)
{
        static const struct formatted t[] = {
            {{1024, 0, TSR_QF_BINARY_SI}, "1Ki"},
            {{1023, 0, TSR_QF_BINARY_SI}, "1023"},
            {{1000, 0, TSR_QF_BINARY_SI}, "1k"},
            {{-1000, 0, TSR_QF_BINARY_SI}, "-1k"},
            {{2048000, 0, TSR_QF_BINARY_SI}, "2000Ki"},
            {{-1024, 0, TSR_QF_BINARY_SI}, "-1Ki"},
            {{-1023, 0, TSR_QF_BINARY_SI}, "-1023"},
            {{0, 0, TSR_QF_BINARY_SI}, "0"},
            {{0, 7, TSR_QF_DECIMAL_EXPONENT}, "0"},
            {{INT64_MIN, 0, TSR_QF_DECIMAL_SI}, "-9223372036854775808"},
            {{INT64_MIN, 0, TSR_QF_BINARY_SI}, "-8Ei"},
            {{INT64_MAX, 0, TSR_QF_BINARY_SI}, "9223372036854775807"},
            {{1000, -3, TSR_QF_BINARY_SI}, "1"},
            {{1, 4, TSR_QF_BINARY_SI}, "10000"},
            {{1024000, -3, TSR_QF_BINARY_SI}, "1Ki"},
            {{10245, -1, TSR_QF_BINARY_SI}, "1024500m"},
            {{1000, 0, TSR_QF_DECIMAL_SI}, "1k"},
            {{1000, 0, TSR_QF_DECIMAL_EXPONENT}, "1e3"},
            {{1, 21, TSR_QF_DECIMAL_SI}, "1e21"},
            {{1, -12, TSR_QF_DECIMAL_SI}, "1e-12"},
            {{5, -10, TSR_QF_DECIMAL_SI}, "500e-12"},
            {{1, 0, (enum tsr_qformat)42}, "1"},
            {{1000, 0, (enum tsr_qformat)42}, "1e3"},
            {{INT64_MIN, INT32_MIN, TSR_QF_DECIMAL_SI}, "-92233720368547758080e-2147483649"},
            {{INT64_MAX, INT32_MAX, TSR_QF_DECIMAL_EXPONENT}, "92233720368547758070e2147483646"},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(t); i++) {
                char buf[TSR_QUANTITY_STR_MAX];

                tsr_quantity_format(&t[i].q, buf);
                if (strcmp(buf, t[i].want) != 0)
                        fail_msg("format({%lld, %d, %d}) = \"%s\", want \"%s\"",
                                 (long long)t[i].q.value, (int)t[i].q.scale, (int)t[i].q.format,
                                 buf, t[i].want);
        }
}

static void test_quantity__from_int_formats_in_its_format(void **state)
{
        struct tsr_quantity q;
        char buf[TSR_QUANTITY_STR_MAX];

        (void)state;
        q = tsr_quantity_from_int(2048, TSR_QF_BINARY_SI);
        assert_int_equal(q.value, 2048);
        assert_int_equal(q.scale, 0);
        assert_string_equal(tsr_quantity_format(&q, buf), "2Ki");
        q = tsr_quantity_from_int(2048, TSR_QF_DECIMAL_SI);
        assert_string_equal(tsr_quantity_format(&q, buf), "2048");
        q = tsr_quantity_from_int(-64000, TSR_QF_DECIMAL_SI);
        assert_string_equal(tsr_quantity_format(&q, buf), "-64k");
        q = tsr_quantity_from_int(12000000, TSR_QF_DECIMAL_EXPONENT);
        assert_string_equal(tsr_quantity_format(&q, buf), "12e6");
}

struct compared {
        const char *a;
        const char *b;
        int want;
};

static void test_quantity__cmp_is_exact_across_scales(void **state)
{
        static const struct compared t[] = {
            {"1", "1000m", 0},
            {"1Ki", "1024", 0},
            {"1k", "1Ki", -1},
            {"0", "0", 0},
            {"0", "-0", 0},
            {"0Ki", "0m", 0},
            {"100m", "50m", 1},
            {"50m", "100m", -1},
            {"10000T", "100Gi", 1},
            {"-1", "1n", -1},
            {"1n", "0", 1},
            {"-1n", "0", -1},
            {"-2", "-1", -1},
            {"-1Ki", "-1k", -1},
            {"1E", "999999999999999999", 1},
            {"1e18", "1E", 0},
            {"1.5Gi", "1536Mi", 0},
            {"1.5", "1500000000n", 0},
            {"1.5", "1500000001n", -1},
            {"9223372036854775807", "9223372036854775806", 1},
            {"1234567890123456789n", "1234567890.123456788", 1},
            {"1m", "1", -1},
            {"12e6", "12M", 0},
            {"7Ei", "8070450532247928832", 0},
            {"-7Ei", "-8070450532247928831", -1},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(t); i++) {
                struct tsr_quantity a, b;
                int got, back;

                must_parse(t[i].a, &a);
                must_parse(t[i].b, &b);
                got = tsr_quantity_cmp(&a, &b);
                back = tsr_quantity_cmp(&b, &a);
                if ((got > 0) - (got < 0) != t[i].want || (back > 0) - (back < 0) != -t[i].want)
                        fail_msg("cmp(\"%s\", \"%s\") = %d (reverse %d), want %d", t[i].a, t[i].b,
                                 got, back, t[i].want);
        }
}

static void test_quantity__cmp_handles_extreme_hand_built_scales(void **state)
{
        static const struct {
                struct tsr_quantity a, b;
                int want;
        } t[] = {
            {{1, 1000, TSR_QF_DECIMAL_SI}, {INT64_MAX, 0, TSR_QF_DECIMAL_SI}, 1},
            {{1, -1000, TSR_QF_DECIMAL_SI}, {0, 0, TSR_QF_DECIMAL_SI}, 1},
            {{10, 0, TSR_QF_DECIMAL_SI}, {1, 1, TSR_QF_DECIMAL_SI}, 0},
            {{INT64_MIN, 0, TSR_QF_DECIMAL_SI}, {INT64_MAX, 0, TSR_QF_DECIMAL_SI}, -1},
            {{INT64_MIN, INT32_MAX, TSR_QF_DECIMAL_SI}, {-1, INT32_MAX, TSR_QF_DECIMAL_SI}, -1},
            {{1, INT32_MIN, TSR_QF_DECIMAL_SI}, {1, INT32_MAX, TSR_QF_DECIMAL_SI}, -1},
            {{100, INT32_MAX - 2, TSR_QF_DECIMAL_SI}, {1, INT32_MAX, TSR_QF_DECIMAL_SI}, 0},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(t); i++) {
                int got = tsr_quantity_cmp(&t[i].a, &t[i].b);

                if ((got > 0) - (got < 0) != t[i].want)
                        fail_msg("row %zu: cmp = %d, want %d", i, got, t[i].want);
        }
}

struct is_int_case {
        const char *in;
        int64_t v;
        bool want;
};

static void test_quantity__is_int_only_for_exact_integers(void **state)
{
        static const struct is_int_case t[] = {
            {"1", 1, true},
            {"1000m", 1, true},
            {"1m", 1, false},
            {"1m", 0, false},
            {"1Ki", 1024, true},
            {"-5", -5, true},
            {"0", 0, true},
            {"1k", 1000, true},
            {"1.5", 1, false},
            {"1.5", 2, false},
            {"1n", 0, false},
            {"-1n", 0, false},
            {"12e6", 12000000, true},
            {"9223372036854775807", INT64_MAX, true},
            {"9223372036854775807", INT64_MAX - 1, false},
            {"2Gi", 2147483648, true},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(t); i++) {
                struct tsr_quantity q;

                must_parse(t[i].in, &q);
                if (tsr_quantity_is_int(&q, t[i].v) != t[i].want)
                        fail_msg("is_int(\"%s\", %lld) = %d, want %d", t[i].in, (long long)t[i].v,
                                 !t[i].want, t[i].want);
        }
}

struct accessor {
        const char *in;
        int value_rc;
        int64_t value;
        int milli_rc;
        int64_t milli;
};

/* Value and MilliValue round away from zero and refuse overflow. */
static void test_quantity__value_and_milli_round_up(void **state)
{
        static const struct accessor t[] = {
            {"1.5", 0, 2, 0, 1500},
            {"-1.5", 0, -2, 0, -1500},
            {"1m", 0, 1, 0, 1},
            {"1n", 0, 1, 0, 1},
            {"-1n", 0, -1, 0, -1},
            {"100m", 0, 1, 0, 100},
            {"0", 0, 0, 0, 0},
            {"1Ki", 0, 1024, 0, 1024000},
            {"1.5Gi", 0, 1610612736, 0, 1610612736000},
            {"1001u", 0, 1, 0, 2},
            {"9E", 0, INT64_C(9000000000000000000), TSR_ERANGE, 0},
            {"9223372036854775807", 0, INT64_MAX, TSR_ERANGE, 0},
            {"9223372036854775n", 0, 9223373, 0, 9223372037},
            {"9223372036854775k", 0, INT64_C(9223372036854775000), TSR_ERANGE, 0},
            {"-9223372036854775807", 0, -INT64_MAX, TSR_ERANGE, 0},
            {"9223372036854775", 0, INT64_C(9223372036854775), 0, INT64_C(9223372036854775000)},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(t); i++) {
                struct tsr_quantity q;
                int64_t v = 12345, m = 12345;
                int rv, rm;

                must_parse(t[i].in, &q);
                rv = tsr_quantity_value(&q, &v);
                rm = tsr_quantity_milli(&q, &m);
                if (rv != t[i].value_rc || (rv == 0 && v != t[i].value))
                        fail_msg("value(\"%s\") = %s %lld, want %s %lld", t[i].in, tsr_err_name(rv),
                                 (long long)v, tsr_err_name(t[i].value_rc), (long long)t[i].value);
                if (rm != t[i].milli_rc || (rm == 0 && m != t[i].milli))
                        fail_msg("milli(\"%s\") = %s %lld, want %s %lld", t[i].in, tsr_err_name(rm),
                                 (long long)m, tsr_err_name(t[i].milli_rc), (long long)t[i].milli);
                if (rv != 0 && v != 12345)
                        fail_msg("value(\"%s\") failed but wrote *out", t[i].in);
                if (rm != 0 && m != 12345)
                        fail_msg("milli(\"%s\") failed but wrote *out", t[i].in);
        }
}

static void test_quantity__value_of_hand_built_extremes(void **state)
{
        struct tsr_quantity q;
        int64_t v = 0;

        (void)state;
        q = tsr_quantity_from_int(INT64_MIN, TSR_QF_DECIMAL_SI);
        assert_int_equal(tsr_quantity_value(&q, &v), 0);
        assert_true(v == INT64_MIN);
        assert_int_equal(tsr_quantity_milli(&q, &v), TSR_ERANGE);
        q.value = 1;
        q.scale = 19;
        assert_int_equal(tsr_quantity_value(&q, &v), TSR_ERANGE);
        q.scale = INT32_MAX;
        assert_int_equal(tsr_quantity_value(&q, &v), TSR_ERANGE);
        q.scale = -30;
        assert_int_equal(tsr_quantity_value(&q, &v), 0);
        assert_true(v == 1);
        q.value = -5;
        q.scale = INT32_MIN;
        assert_int_equal(tsr_quantity_milli(&q, &v), 0);
        assert_true(v == -1);
}

/*
 * The integer fast path against the general digit buffer: an integer of 1..20 digits (leading
 * zeros, values near 10^18 and INT64_MAX included) with no suffix or any SI one parses exactly
 * as the same text with ".0" after the digits, which only the digit buffer reads: the same
 * value, scale and format, or the same error code.
 */
static void test_quantity__integer_fast_path_matches_digit_buffer(void **state)
{
        static const char *const suffixes[] = {"",   "n",  "u",  "m",  "k",  "M",
                                               "G",  "T",  "P",  "E",  "Ki", "Mi",
                                               "Gi", "Ti", "Pi", "Ei", "e3", "E-2"};
        uint64_t x = 0x9e3779b97f4a7c15u;

        (void)state;
        for (int i = 0; i < 200000; i++) {
                char digits[24], fast_in[40], slow_in[40];
                struct tsr_quantity fast, slow;
                struct tsr_diag d;
                size_t n;
                int frc, src;

                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                n = 1 + (size_t)(x % 20u);
                for (size_t k = 0; k < n; k++) {
                        /* Mostly nines and zeros near the limits, any digit otherwise. */
                        unsigned r = (unsigned)((x >> (3 * (k % 20))) & 7u);

                        digits[k] = (char)(r < 2 ? '9' : r < 4 ? '0' : '0' + (x >> k) % 10u);
                }
                digits[n] = '\0';
                snprintf(fast_in, sizeof(fast_in), "%s%s%s", (x >> 60) % 3 == 0 ? "-" : "", digits,
                         suffixes[(x >> 40) % N_ELEMS(suffixes)]);
                snprintf(slow_in, sizeof(slow_in), "%s%s.0%s", (x >> 60) % 3 == 0 ? "-" : "",
                         digits, suffixes[(x >> 40) % N_ELEMS(suffixes)]);
                tsr_diag_clear(&d);
                frc = tsr_quantity_parse(fast_in, &fast, &d);
                src = tsr_quantity_parse(slow_in, &slow, &d);
                if (frc != src)
                        fail_msg("parse(\"%s\") = %s, parse(\"%s\") = %s", fast_in,
                                 tsr_err_name(frc), slow_in, tsr_err_name(src));
                if (!frc && (fast.value != slow.value || fast.scale != slow.scale ||
                             fast.format != slow.format))
                        fail_msg("parse(\"%s\") = %lld e%d f%d, parse(\"%s\") = %lld e%d f%d",
                                 fast_in, (long long)fast.value, fast.scale, (int)fast.format,
                                 slow_in, (long long)slow.value, slow.scale, (int)slow.format);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_quantity__round_trip_documented_examples),
            cmocka_unit_test(test_quantity__round_trip_every_decimal_suffix),
            cmocka_unit_test(test_quantity__round_trip_every_binary_suffix),
            cmocka_unit_test(test_quantity__round_trip_signs_and_zeros),
            cmocka_unit_test(test_quantity__round_trip_exponents),
            cmocka_unit_test(test_quantity__round_trip_rounds_up_below_nano),
            cmocka_unit_test(test_quantity__binary_without_1024_factor_reprints_as_decimal),
            cmocka_unit_test(test_quantity__parse_stores_normalized_value_and_format),
            cmocka_unit_test(test_quantity__parse_refuses_malformed_and_out_of_range),
            cmocka_unit_test(test_quantity__parse_diag_quotes_input),
            cmocka_unit_test(test_quantity__parse_refuses_null_arguments),
            cmocka_unit_test(test_quantity__parse_n_reads_only_len_bytes),
            cmocka_unit_test(test_quantity__format_hand_built_values),
            cmocka_unit_test(test_quantity__from_int_formats_in_its_format),
            cmocka_unit_test(test_quantity__cmp_is_exact_across_scales),
            cmocka_unit_test(test_quantity__cmp_handles_extreme_hand_built_scales),
            cmocka_unit_test(test_quantity__is_int_only_for_exact_integers),
            cmocka_unit_test(test_quantity__value_and_milli_round_up),
            cmocka_unit_test(test_quantity__value_of_hand_built_extremes),
            cmocka_unit_test(test_quantity__integer_fast_path_matches_digit_buffer),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
