/*
 * fuzz_quantity.c - libFuzzer target for base/quantity. Any bytes either fail to parse with
 * TSR_EPARSE or TSR_ERANGE, or parse to a quantity whose canonical string (a) fits in
 * TSR_QUANTITY_STR_MAX, (b) parses again to the same value, (c) settles after one more round
 * (upstream's canonical form is not always a fixed point: BinarySI 320000 prints "320000", which
 * re-parses as DecimalSI and prints "320k"; that second string must then be stable), and (d) whose
 * Value always fits and MilliValue succeeds or reports TSR_ERANGE. (e) An input with digits and no
 * decimal point, which the integer fast path may take, gives exactly what the same input with
 * ".0" after its digits gives, which only the general digit buffer takes: same result or same
 * error. Any violation abort()s, so the fuzzer and the corpus replay both flag it.
 */
#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Property (e): data's digits, then ".0", then the rest, parsed by the general path. */
static void check_general_path(const uint8_t *data, size_t size, int rc,
                               const struct tsr_quantity *q)
{
        struct tsr_quantity g;
        struct tsr_diag diag;
        char text[64];
        size_t i = 0, end;
        int grc;

        if (size > sizeof(text) - 3 || memchr(data, '.', size))
                return;
        if (i < size && (data[i] == '+' || data[i] == '-'))
                i++;
        for (end = i; end < size && data[end] >= '0' && data[end] <= '9'; end++)
                ;
        if (end == i)
                return;
        memcpy(text, data, end);
        memcpy(text + end, ".0", 2);
        memcpy(text + end + 2, data + end, size - end);
        tsr_diag_clear(&diag);
        grc = tsr_quantity_parse_n(text, size + 2, &g, &diag);
        if (grc != rc)
                abort();
        if (!rc && (g.value != q->value || g.scale != q->scale || g.format != q->format))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_quantity q, again, third;
        struct tsr_diag diag;
        char text[TSR_QUANTITY_STR_MAX];
        char text2[TSR_QUANTITY_STR_MAX];
        char text3[TSR_QUANTITY_STR_MAX];
        int64_t v;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_quantity_parse_n((const char *)data, size, &q, &diag);
        check_general_path(data, size, rc, &q);
        if (rc != 0) {
                if (rc != TSR_EPARSE && rc != TSR_ERANGE)
                        abort();
                if (diag.code != rc || diag.msg[0] == '\0')
                        abort();
                return 0;
        }
        if (q.scale < -9 || q.scale > 18 || (q.value == 0 && q.scale != 0))
                abort();

        tsr_quantity_format(&q, text);
        if (memchr(text, '\0', sizeof(text)) == NULL)
                abort();
        rc = tsr_quantity_parse(text, &again, &diag);
        if (rc != 0)
                abort();
        if (tsr_quantity_cmp(&q, &again) != 0 || tsr_quantity_cmp(&again, &q) != 0)
                abort();
        tsr_quantity_format(&again, text2);
        rc = tsr_quantity_parse(text2, &third, &diag);
        if (rc != 0 || tsr_quantity_cmp(&q, &third) != 0)
                abort();
        tsr_quantity_format(&third, text3);
        if (strcmp(text2, text3) != 0)
                abort();

        /* Every accepted quantity has |q| <= INT64_MAX, so Value() always fits. */
        rc = tsr_quantity_value(&q, &v);
        if (rc != 0)
                abort();
        if (q.value > 0 && v <= 0)
                abort();
        if (q.value < 0 && v >= 0)
                abort();
        rc = tsr_quantity_milli(&q, &v);
        if (rc != 0 && rc != TSR_ERANGE)
                abort();
        return 0;
}
