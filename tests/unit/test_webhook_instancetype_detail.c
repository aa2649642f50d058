/*
 * test_webhook_instancetype_detail.c - webhook/instancetype_detail: an InstanceType's
 * per-accelerator VRAM in every shape upstream has stored it, and its status.detail read with
 * absent fields.
 *
 * Memory rows: status.detail.memory "81920Mi" and "80Gi", spec.memory "80Gi" and 81920 (MiB) all
 * read 81920; status.detail.memory wins over spec.memory; absent, null and "" read 0 (not computed
 * yet) and fall through to spec.memory; a malformed value is refused with the exact message,
 * naming the field (not a quantity, not positive, not whole MiB, too large, the wrong JSON type),
 * and a malformed status.detail.memory is not passed over for a good spec.memory; *mib is
 * untouched on failure. Detail rows: the full upstream detail, an empty object, profiles without
 * a name or a memoryMib, a profile list of the wrong type.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "webhook/instancetype_detail.h"

#include "support/json_text.h"

#include <stdio.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define IT(spec, detail)                                                                           \
        "{\"metadata\":{\"name\":\"h100\"},\"spec\":{" spec "},\"status\":{\"detail\":{" detail    \
        "}}}"

#define FORMAT_WRONG                                                                               \
        "quantities must match the regular expression "                                            \
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

struct mrow {
        const char *name, *it;
        uint64_t mib;    /* when msg is NULL */
        const char *msg; /* the refusal */
};

static const struct mrow mrows[] = {
    {"detail 81920Mi", IT("", "\"memory\":\"81920Mi\""), 81920, NULL},
    {"detail 80Gi", IT("", "\"memory\":\"80Gi\""), 81920, NULL},
    {"spec 80Gi (older upstream)", IT("\"memory\":\"80Gi\"", ""), 81920, NULL},
    {"spec 81920 (MiB)", IT("\"memory\":81920", ""), 81920, NULL},
    {"detail wins over spec", IT("\"memory\":\"40Gi\"", "\"memory\":\"80Gi\""), 81920, NULL},
    {"bytes that are whole MiB", IT("", "\"memory\":\"85899345920\""), 81920, NULL},
    {"a decimal exponent", IT("", "\"memory\":\"1048576e0\""), 1, NULL},
    {"no status, no spec.memory", "{\"spec\":{}}", 0, NULL},
    {"absent everywhere", IT("", ""), 0, NULL},
    {"null everywhere", IT("\"memory\":null", "\"memory\":null"), 0, NULL},
    {"\"\" everywhere", IT("\"memory\":\"\"", "\"memory\":\"\""), 0, NULL},
    {"detail \"\" falls to spec", IT("\"memory\":\"80Gi\"", "\"memory\":\"\""), 81920, NULL},
    {"not a quantity", IT("", "\"memory\":\"eighty\""), 0,
     "parse memory \"eighty\" of instance type h100 (status.detail.memory): " FORMAT_WRONG},
    {"a bad detail is not passed over", IT("\"memory\":\"80Gi\"", "\"memory\":\"80 Gi\""), 0,
     "parse memory \"80 Gi\" of instance type h100 (status.detail.memory): " FORMAT_WRONG},
    {"spec not a quantity", IT("\"memory\":\"eighty\"", ""), 0,
     "parse memory \"eighty\" of instance type h100 (spec.memory): " FORMAT_WRONG},
    {"zero", IT("", "\"memory\":\"0\""), 0,
     "instance type h100 has non-positive memory \"0\" (status.detail.memory)"},
    {"negative", IT("", "\"memory\":\"-80Gi\""), 0,
     "instance type h100 has non-positive memory \"-80Gi\" (status.detail.memory)"},
    {"spec zero MiB", IT("\"memory\":0", ""), 0,
     "instance type h100 has non-positive memory 0 (spec.memory, MiB)"},
    {"decimal SI, not whole MiB", IT("", "\"memory\":\"80G\""), 0,
     "instance type h100 has memory \"80G\" (status.detail.memory) that is not a whole number "
     "of MiB"},
    {"half a MiB", IT("", "\"memory\":\"0.5Mi\""), 0,
     "instance type h100 has memory \"0.5Mi\" (status.detail.memory) that is not a whole "
     "number of MiB"},
    {"a fraction of a byte", IT("", "\"memory\":\"1048576.5\""), 0,
     "instance type h100 has memory \"1048576.5\" (status.detail.memory) that is not a whole "
     "number of MiB"},
    {"too large", IT("", "\"memory\":\"8Ei\""), 0,
     "instance type h100 has memory \"8Ei\" (status.detail.memory) too large to count in bytes"},
    {"spec MiB too large", IT("\"memory\":9223372036854775807", ""), 0,
     "instance type h100 has memory 9223372036854775807 (spec.memory, MiB) too large to count "
     "in bytes"},
    {"detail a number", IT("", "\"memory\":81920"), 0,
     "status.detail.memory of instance type h100 is not a string"},
    {"spec a boolean", IT("\"memory\":true", ""), 0,
     "spec.memory of instance type h100 is neither a quantity string nor an integer"},
    {"no name", "{\"status\":{\"detail\":{\"memory\":\"x\"}}}", 0,
     "parse memory \"x\" of instance type (unnamed) (status.detail.memory): " FORMAT_WRONG},
};

static void test_detail__memory(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(mrows); i++) {
                const struct mrow *r = &mrows[i];
                json_t *it = json_fx_load(r->it);
                uint64_t mib = 77;
                struct tsr_diag d;
                int rc;

                tsr_diag_clear(&d);
                rc = tsr_instancetype_detail_memory_mib(it, &mib, &d);
                json_decref(it);
                if (!r->msg && (rc || mib != r->mib))
                        fail_msg("%s: rc %s (%s), %llu MiB, want %llu", r->name, tsr_err_name(rc),
                                 d.msg, (unsigned long long)mib, (unsigned long long)r->mib);
                if (r->msg && (rc != TSR_EPARSE || mib != 77 || strcmp(d.msg, r->msg)))
                        fail_msg("%s: rc %s, %llu MiB\n got  %s\n want %s", r->name,
                                 tsr_err_name(rc), (unsigned long long)mib, d.msg, r->msg);
        }
}

static void test_detail__read(void **state)
{
        struct tsr_instancetype_detail d;
        struct tsr_diag diag;
        json_t *it;

        (void)state;
        it = json_fx_load(
            IT("", "\"manufacturer\":\"nvidia\",\"product\":\"NVIDIA H100 80GB HBM3\","
                   "\"memory\":\"81920Mi\",\"slicedDetail\":{\"logical\":{"
                   "\"coresPercentageOvercommit\":true,\"count\":1024},\"physical\":{\"count\":56,"
                   "\"profiles\":[{\"name\":\"1g.10gb\",\"count\":56,\"memoryMib\":10240},"
                   "{\"count\":3},{\"name\":\"\"},{\"name\":\"2g.20gb\"},"
                   "{\"name\":\"3g.40gb\",\"count\":16,\"memoryMib\":-5}]}}"));
        assert_int_equal(tsr_instancetype_detail_read(it, &d, &diag), 0);
        assert_string_equal(d.manufacturer, "nvidia");
        assert_true(d.sliced_detail);
        assert_true(d.logical_overcommit);
        assert_int_equal(d.logical_count, 1024);
        assert_int_equal(d.physical_count, 56);
        assert_int_equal(d.n_profiles, 3);
        assert_string_equal(d.profiles[0].name, "1g.10gb");
        assert_int_equal(d.profiles[0].count, 56);
        assert_int_equal(d.profiles[0].memory_mib, 10240);
        assert_string_equal(d.profiles[1].name, "2g.20gb");
        assert_int_equal(d.profiles[1].count, 0);
        assert_int_equal(d.profiles[1].memory_mib, 0); /* not sized yet */
        assert_int_equal(d.profiles[2].memory_mib, 0);
        assert_ptr_equal(tsr_instancetype_detail_profile(&d, "3g.40gb"), &d.profiles[2]);
        assert_null(tsr_instancetype_detail_profile(&d, "7g.80gb"));
        json_decref(it);

        /* Nothing computed yet. */
        it = json_fx_load("{\"spec\":{}}");
        assert_int_equal(tsr_instancetype_detail_read(it, &d, &diag), 0);
        assert_string_equal(d.manufacturer, "");
        assert_false(d.sliced_detail);
        assert_int_equal(d.logical_count, 0);
        assert_int_equal(d.n_profiles, 0);
        json_decref(it);
        it = json_fx_load(IT("", "\"slicedDetail\":{\"logical\":{},\"physical\":{}}"));
        assert_int_equal(tsr_instancetype_detail_read(it, &d, &diag), 0);
        assert_true(d.sliced_detail);
        assert_int_equal(d.physical_count, 0);
        json_decref(it);

        /* The wrong JSON type is refused, *out untouched. */
        memset(&d, 0x5a, sizeof(d));
        it = json_fx_load(IT("", "\"slicedDetail\":{\"physical\":{\"profiles\":{}}}"));
        assert_int_equal(tsr_instancetype_detail_read(it, &d, &diag), TSR_EPARSE);
        assert_string_equal(diag.msg,
                            "status.detail.slicedDetail.physical.profiles is not an array");
        assert_true(d.n_profiles == (size_t)0x5a5a5a5a5a5a5a5aULL);
        json_decref(it);
        it = json_fx_load(IT("", "\"manufacturer\":1"));
        assert_int_equal(tsr_instancetype_detail_read(it, &d, &diag), TSR_EPARSE);
        json_decref(it);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_detail__memory),
            cmocka_unit_test(test_detail__read),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
