/*
 * test_keys.c - core/keys: the classification table of spec/upstream-behavior.md §1.2 (every fixed
 * suffix on every manufacturer, per-profile keys, visibility keys, and the names that must read
 * TSR_KEY_NONE: unknown sub-keys, an empty profile, credits and cpu, partition keys of a
 * manufacturer without a partition kind); composing names (tsr_key_format) including the refusal
 * of profiles whose key would not be a qualified name ("+me", "+me.all", "+gfx"); format/classify
 * round trips; family names; and Kubernetes resource-name validation (IsQualifiedName with an
 * optional DNS-1123 subdomain prefix).
 *
 * Expected names are typed from the spec's examples, never composed with the code under test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "core/keys.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

struct class_row {
        const char *name;
        enum tsr_key_kind kind;
        const char *mfr;     /* manufacturer key, NULL for NONE */
        const char *profile; /* profile keys only */
};

static const struct class_row class_rows[] = {
    /* NVIDIA: every fixed suffix. */
    {"nvidia.com/gpu", TSR_KEY_EXCLUSIVE, "nvidia", NULL},
    {"nvidia.com/gpu.shared", TSR_KEY_SHARED, "nvidia", NULL},
    {"nvidia.com/gpu.sliced", TSR_KEY_SLICED, "nvidia", NULL},
    {"nvidia.com/gpu.sliced.units", TSR_KEY_SLICED_UNITS, "nvidia", NULL},
    {"nvidia.com/gpu.sliced.cores-percentage", TSR_KEY_SLICED_CORES, "nvidia", NULL},
    {"nvidia.com/gpu.sliced.memory-percentage", TSR_KEY_SLICED_MEMORY_PERCENT, "nvidia", NULL},
    {"nvidia.com/gpu.sliced.memory-mib", TSR_KEY_SLICED_MEMORY_MIB, "nvidia", NULL},
    {"nvidia.com/gpu.partitioned", TSR_KEY_PARTITIONED, "nvidia", NULL},
    {"nvidia.com/gpu.partitioned.units", TSR_KEY_PARTITIONED_UNITS, "nvidia", NULL},
    /* Per-profile keys: prefix <base>.partitioned.<kind>- plus a non-empty profile. */
    {"nvidia.com/gpu.partitioned.mig-3g.40gb", TSR_KEY_PARTITIONED_PROFILE, "nvidia", "3g.40gb"},
    {"nvidia.com/gpu.partitioned.mig-1g.10gb", TSR_KEY_PARTITIONED_PROFILE, "nvidia", "1g.10gb"},
    {"nvidia.com/gpu.partitioned.mig-units", TSR_KEY_PARTITIONED_PROFILE, "nvidia", "units"},
    {"alibabacloud.com/ppu.partitioned.mig-4g.48gb", TSR_KEY_PARTITIONED_PROFILE, "thead",
     "4g.48gb"},
    {"hygon.com/dcu.partitioned.mig-2g.15gb", TSR_KEY_PARTITIONED_PROFILE, "hygon", "2g.15gb"},
    /* Other manufacturers' bases. */
    {"amd.com/gpu", TSR_KEY_EXCLUSIVE, "amd", NULL},
    {"amd.com/gpu.sliced.units", TSR_KEY_SLICED_UNITS, "amd", NULL},
    {"huawei.com/npu.shared", TSR_KEY_SHARED, "ascend", NULL},
    {"cambricon.com/mlu.sliced", TSR_KEY_SLICED, "cambricon", NULL},
    {"hygon.com/dcu.partitioned.units", TSR_KEY_PARTITIONED_UNITS, "hygon", NULL},
    {"iluvatar.com/gpu.sliced.memory-mib", TSR_KEY_SLICED_MEMORY_MIB, "iluvatar", NULL},
    {"metax-tech.com/gpu.sliced.cores-percentage", TSR_KEY_SLICED_CORES, "metax", NULL},
    {"mthreads.com/gpu.shared", TSR_KEY_SHARED, "mthreads", NULL},
    {"alibabacloud.com/ppu.partitioned", TSR_KEY_PARTITIONED, "thead", NULL},
    /* Visibility: device.gpustack.ai/<manufacturer>.visibility, known manufacturers only. */
    {"device.gpustack.ai/nvidia.visibility", TSR_KEY_VISIBILITY, "nvidia", NULL},
    {"device.gpustack.ai/amd.visibility", TSR_KEY_VISIBILITY, "amd", NULL},
    {"device.gpustack.ai/thead.visibility", TSR_KEY_VISIBILITY, "thead", NULL},
    {"device.gpustack.ai/bogus.visibility", TSR_KEY_NONE, NULL, NULL},
    {"device.gpustack.ai/NVIDIA.visibility", TSR_KEY_NONE, NULL, NULL},
    {"device.gpustack.ai/.visibility", TSR_KEY_NONE, NULL, NULL},
    {"device.gpustack.ai/nvidia.visibility.x", TSR_KEY_NONE, NULL, NULL},
    {"device.gpustack.ai/nvidia", TSR_KEY_NONE, NULL, NULL},
    {"gpustack.ai/nvidia.visibility", TSR_KEY_NONE, NULL, NULL},
    /* Unknown sub-keys and near misses (knowns_test.go cases). */
    {"nvidia.com/gpu.sliced.bogus", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.partitioned.bogus", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.partitioned.mig-", TSR_KEY_NONE, NULL, NULL},
    /* not a resource name at all: a "+me" profile has no key (excluded, never rewritten) */
    {"nvidia.com/gpu.partitioned.mig-1g.10gb+me", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.partitioned.mig", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.partitioned.", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.partitioned.hmig-1g.10gb", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.sliced.mig-1g.10gb", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.shared.units", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpus", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gp", TSR_KEY_NONE, NULL, NULL},
    {"nvidia.com/gpu.sliced.units.x", TSR_KEY_NONE, NULL, NULL},
    {"xnvidia.com/gpu", TSR_KEY_NONE, NULL, NULL},
    {"NVIDIA.com/gpu", TSR_KEY_NONE, NULL, NULL},
    {"credits.gpustack.ai/nvidia", TSR_KEY_NONE, NULL, NULL},
    {"cpu", TSR_KEY_NONE, NULL, NULL},
    {"memory", TSR_KEY_NONE, NULL, NULL},
    {"device.gpustack.ai/rdma", TSR_KEY_NONE, NULL, NULL},
    {"", TSR_KEY_NONE, NULL, NULL},
    /* A manufacturer without a partition kind has no .partitioned* keys at all. */
    {"amd.com/gpu.partitioned", TSR_KEY_NONE, NULL, NULL},
    {"amd.com/gpu.partitioned.units", TSR_KEY_NONE, NULL, NULL},
    {"amd.com/gpu.partitioned.mig-1g.10gb", TSR_KEY_NONE, NULL, NULL},
    {"huawei.com/npu.partitioned", TSR_KEY_NONE, NULL, NULL},
    {"cambricon.com/mlu.partitioned.units", TSR_KEY_NONE, NULL, NULL},
    {"metax-tech.com/gpu.partitioned.mig-2g.15gb", TSR_KEY_NONE, NULL, NULL},
    /* A profile key carries its own manufacturer's kind only. */
    {"hygon.com/dcu.partitioned.tpc-2g.15gb", TSR_KEY_NONE, NULL, NULL},
};

static void test_keys__classification_table(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(class_rows); i++) {
                const struct class_row *w = &class_rows[i];
                struct tsr_key_class c;

                memset(&c, 0xa5, sizeof(c));
                tsr_key_classify(w->name, &c);
                if (c.kind != w->kind)
                        fail_msg("classify(\"%s\") kind %d, want %d", w->name, c.kind, w->kind);
                if (!w->mfr) {
                        if (c.manufacturer || c.profile || c.profile_len)
                                fail_msg("classify(\"%s\"): NONE with leftovers", w->name);
                        continue;
                }
                if (!c.manufacturer || strcmp(c.manufacturer->key, w->mfr) != 0)
                        fail_msg("classify(\"%s\") manufacturer %s, want %s", w->name,
                                 c.manufacturer ? c.manufacturer->key : "(null)", w->mfr);
                if (!w->profile) {
                        if (c.profile || c.profile_len)
                                fail_msg("classify(\"%s\"): unexpected profile", w->name);
                        continue;
                }
                if (!c.profile || c.profile_len != strlen(w->profile) ||
                    memcmp(c.profile, w->profile, c.profile_len) != 0)
                        fail_msg("classify(\"%s\"): profile %.*s, want %s", w->name,
                                 (int)c.profile_len, c.profile ? c.profile : "", w->profile);
                /* The profile points into the classified name. */
                assert_ptr_equal(c.profile, w->name + strlen(w->name) - strlen(w->profile));
        }
}

static void test_keys__families(void **state)
{
        static const struct {
                enum tsr_key_kind kind;
                enum tsr_family family;
                const char *name;
        } rows[] = {
            {TSR_KEY_NONE, TSR_FAMILY_NONE, "none"},
            {TSR_KEY_EXCLUSIVE, TSR_FAMILY_EXCLUSIVE, "exclusive"},
            {TSR_KEY_SHARED, TSR_FAMILY_SHARED, "shared"},
            {TSR_KEY_SLICED, TSR_FAMILY_SLICED, "sliced"},
            {TSR_KEY_SLICED_UNITS, TSR_FAMILY_SLICED, "sliced"},
            {TSR_KEY_SLICED_CORES, TSR_FAMILY_SLICED, "sliced"},
            {TSR_KEY_SLICED_MEMORY_PERCENT, TSR_FAMILY_SLICED, "sliced"},
            {TSR_KEY_SLICED_MEMORY_MIB, TSR_FAMILY_SLICED, "sliced"},
            {TSR_KEY_PARTITIONED, TSR_FAMILY_PARTITIONED, "partitioned"},
            {TSR_KEY_PARTITIONED_UNITS, TSR_FAMILY_PARTITIONED, "partitioned"},
            {TSR_KEY_PARTITIONED_PROFILE, TSR_FAMILY_PARTITIONED, "partitioned"},
            {TSR_KEY_VISIBILITY, TSR_FAMILY_VISIBILITY, "visibility"},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                assert_int_equal(tsr_key_family(rows[i].kind), rows[i].family);
                assert_string_equal(tsr_family_name(rows[i].family), rows[i].name);
        }
}

struct format_row {
        enum tsr_manufacturer_id mfr;
        enum tsr_key_kind kind;
        const char *profile;
        const char *want;
};

static void test_keys__format(void **state)
{
        static const struct format_row rows[] = {
            {TSR_MFR_NVIDIA, TSR_KEY_EXCLUSIVE, NULL, "nvidia.com/gpu"},
            {TSR_MFR_NVIDIA, TSR_KEY_SHARED, NULL, "nvidia.com/gpu.shared"},
            {TSR_MFR_NVIDIA, TSR_KEY_SLICED, NULL, "nvidia.com/gpu.sliced"},
            {TSR_MFR_NVIDIA, TSR_KEY_SLICED_UNITS, NULL, "nvidia.com/gpu.sliced.units"},
            {TSR_MFR_NVIDIA, TSR_KEY_SLICED_CORES, NULL, "nvidia.com/gpu.sliced.cores-percentage"},
            {TSR_MFR_NVIDIA, TSR_KEY_SLICED_MEMORY_PERCENT, NULL,
             "nvidia.com/gpu.sliced.memory-percentage"},
            {TSR_MFR_NVIDIA, TSR_KEY_SLICED_MEMORY_MIB, NULL, "nvidia.com/gpu.sliced.memory-mib"},
            {TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED, NULL, "nvidia.com/gpu.partitioned"},
            {TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_UNITS, NULL, "nvidia.com/gpu.partitioned.units"},
            {TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, "3g.40gb",
             "nvidia.com/gpu.partitioned.mig-3g.40gb"},
            {TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, "1g.24gb-me",
             "nvidia.com/gpu.partitioned.mig-1g.24gb-me"},
            {TSR_MFR_NVIDIA, TSR_KEY_VISIBILITY, NULL, "device.gpustack.ai/nvidia.visibility"},
            {TSR_MFR_THEAD, TSR_KEY_PARTITIONED_PROFILE, "4g.48gb",
             "alibabacloud.com/ppu.partitioned.mig-4g.48gb"},
            {TSR_MFR_HYGON, TSR_KEY_PARTITIONED_PROFILE, "2g.15gb",
             "hygon.com/dcu.partitioned.mig-2g.15gb"},
            {TSR_MFR_HYGON, TSR_KEY_SLICED, NULL, "hygon.com/dcu.sliced"},
            {TSR_MFR_ASCEND, TSR_KEY_SHARED, NULL, "huawei.com/npu.shared"},
            {TSR_MFR_METAX, TSR_KEY_VISIBILITY, NULL, "device.gpustack.ai/metax.visibility"},
            {TSR_MFR_AMD, TSR_KEY_SLICED_UNITS, NULL, "amd.com/gpu.sliced.units"},
            /* The profile argument is ignored for every other kind. */
            {TSR_MFR_NVIDIA, TSR_KEY_SHARED, "3g.40gb", "nvidia.com/gpu.shared"},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                char out[TSR_KEY_MAX];
                int rc = tsr_key_format(out, tsr_catalog_manufacturer(rows[i].mfr), rows[i].kind,
                                        rows[i].profile);

                if (rc != 0)
                        fail_msg("format -> %s, want \"%s\"", tsr_err_name(rc), rows[i].want);
                assert_string_equal(out, rows[i].want);
        }
}

static void expect_format_refused(enum tsr_manufacturer_id mfr, enum tsr_key_kind kind,
                                  const char *profile)
{
        char out[TSR_KEY_MAX];
        int rc;

        memset(out, 'Z', sizeof(out));
        rc = tsr_key_format(out, tsr_catalog_manufacturer(mfr), kind, profile);
        if (rc != TSR_EINVAL)
                fail_msg("format(%d, %d, %s) = %s, want TSR_EINVAL", mfr, kind,
                         profile ? profile : "(null)", tsr_err_name(rc));
        for (size_t i = 0; i < sizeof(out); i++)
                if (out[i] != 'Z')
                        fail_msg("format(%d, %d, %s) wrote into out on failure", mfr, kind,
                                 profile ? profile : "(null)");
}

static void test_keys__format_refusals(void **state)
{
        (void)state;
        /* "+" is not a qualified-name character: such profiles are excluded, never rewritten. */
        expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, "1g.10gb+me");
        expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, "1g.24gb+me.all");
        expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, "2g.48gb+gfx");
        expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, "3g 40gb");
        expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, "3g.40gb.");
        expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, NULL);
        /* No partition kind, no partition keys. */
        expect_format_refused(TSR_MFR_AMD, TSR_KEY_PARTITIONED, NULL);
        expect_format_refused(TSR_MFR_AMD, TSR_KEY_PARTITIONED_UNITS, NULL);
        expect_format_refused(TSR_MFR_AMD, TSR_KEY_PARTITIONED_PROFILE, "1g.10gb");
        expect_format_refused(TSR_MFR_CAMBRICON, TSR_KEY_PARTITIONED, NULL);
        expect_format_refused(TSR_MFR_ASCEND, TSR_KEY_PARTITIONED_UNITS, NULL);
        /* NONE has no name. */
        expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_NONE, NULL);
}

/*
 * The name part after "nvidia.com/" is "gpu.partitioned.mig-" (20 characters) plus the profile,
 * and a qualified name part holds at most 63: a 43-character profile fits, 44 does not.
 */
static void test_keys__format_name_length_limit(void **state)
{
        char profile[64], out[TSR_KEY_MAX];

        (void)state;
        memset(profile, 'a', 43);
        profile[43] = '\0';
        assert_int_equal(tsr_key_format(out, tsr_catalog_manufacturer(TSR_MFR_NVIDIA),
                                        TSR_KEY_PARTITIONED_PROFILE, profile),
                         0);
        assert_int_equal(strlen(out), strlen("nvidia.com/") + 63);
        profile[43] = 'a';
        profile[44] = '\0';
        expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, profile);
        /* Past TSR_KEY_MAX itself: refused before anything is written. */
        {
                char longer[TSR_KEY_MAX + 8];

                memset(longer, 'a', sizeof(longer) - 1);
                longer[sizeof(longer) - 1] = '\0';
                expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, longer);
                longer[TSR_KEY_MAX - strlen("nvidia.com/gpu.partitioned.mig-") - 1] = '\0';
                expect_format_refused(TSR_MFR_NVIDIA, TSR_KEY_PARTITIONED_PROFILE, longer);
        }
}

/* Every composable key of every manufacturer classifies back to itself. */
static void test_keys__format_classify_round_trip(void **state)
{
        static const enum tsr_key_kind kinds[] = {
            TSR_KEY_EXCLUSIVE,           TSR_KEY_SHARED,       TSR_KEY_SLICED,
            TSR_KEY_SLICED_UNITS,        TSR_KEY_SLICED_CORES, TSR_KEY_SLICED_MEMORY_PERCENT,
            TSR_KEY_SLICED_MEMORY_MIB,   TSR_KEY_PARTITIONED,  TSR_KEY_PARTITIONED_UNITS,
            TSR_KEY_PARTITIONED_PROFILE, TSR_KEY_VISIBILITY,
        };
        unsigned composed = 0;

        (void)state;
        for (int id = 0; id < TSR_MFR__COUNT; id++) {
                const struct tsr_manufacturer *m = tsr_catalog_manufacturer(id);

                for (size_t k = 0; k < N_ELEMS(kinds); k++) {
                        char out[TSR_KEY_MAX];
                        struct tsr_key_class c;
                        bool partition = tsr_key_family(kinds[k]) == TSR_FAMILY_PARTITIONED;
                        int rc = tsr_key_format(out, m, kinds[k], "2g.20gb");

                        if (partition && !m->partition_kind) {
                                assert_int_equal(rc, TSR_EINVAL);
                                continue;
                        }
                        assert_int_equal(rc, 0);
                        assert_true(tsr_key_is_resource_name(out));
                        tsr_key_classify(out, &c);
                        if (c.kind != kinds[k] || c.manufacturer != m)
                                fail_msg("\"%s\" classified as kind %d of %s", out, c.kind,
                                         c.manufacturer ? c.manufacturer->key : "(null)");
                        if (kinds[k] == TSR_KEY_PARTITIONED_PROFILE)
                                assert_int_equal(c.profile_len, strlen("2g.20gb"));
                        composed++;
                }
        }
        /* 9 manufacturers x 8 non-partition kinds, plus 3 partition kinds on nvidia/hygon/thead. */
        assert_int_equal(composed, 9 * 8 + 3 * 3);
}

struct name_row {
        const char *s;
        bool valid;
};

static void test_keys__resource_name_validation(void **state)
{
        static const struct name_row rows[] = {
            {"cpu", true},
            {"nvidia.com/gpu", true},
            {"nvidia.com/gpu.partitioned.mig-3g.40gb", true},
            {"nvidia.com/gpu.partitioned.mig-1g.24gb-me", true},
            {"device.gpustack.ai/nvidia.visibility", true},
            {"metax-tech.com/gpu", true},
            {"example.com/Foo_Bar", true}, /* the name part may carry upper case and '_' */
            {"a/b", true},
            {"a", true},
            {"nvidia.com/gpu.partitioned.mig-1g.10gb+me", false},
            {"nvidia.com/gpu.partitioned.mig-1g.24gb+me.all", false},
            {"nvidia.com/gpu.partitioned.mig-2g.48gb+gfx", false},
            {"", false},
            {"/gpu", false},
            {"nvidia.com/", false},
            {"nvidia.com/gpu/x", false},
            {"Nvidia.com/gpu", false},  /* a DNS-1123 prefix is lower case */
            {"nvidia_com/gpu", false},  /* ... and has no '_' */
            {"-nvidia.com/gpu", false}, /* ... starts alphanumeric */
            {"nvidia.com-/gpu", false}, /* ... ends alphanumeric */
            {"nvidia..com/gpu", false}, /* ... has no empty label */
            {"nvidia.-com/gpu", false}, /* ... each label starts alphanumeric */
            {"nvidia-.com/gpu", false}, /* ... and ends alphanumeric */
            {"nvidia.com/-gpu", false},
            {"nvidia.com/gpu-", false},
            {"nvidia.com/.gpu", false},
            {"nvidia.com/gpu.", false},
            {"nvidia.com/g pu", false},
            {"gpu+me", false},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++)
                if (tsr_key_is_resource_name(rows[i].s) != rows[i].valid)
                        fail_msg("is_resource_name(\"%s\") = %d, want %d", rows[i].s,
                                 !rows[i].valid, rows[i].valid);
}

static void test_keys__name_segment_limits(void **state)
{
        char s[80], name[400];

        (void)state;
        memset(s, 'x', sizeof(s));
        assert_true(tsr_key_is_name_segment(s, 63));
        assert_false(tsr_key_is_name_segment(s, 64));
        assert_false(tsr_key_is_name_segment(s, 0));
        assert_true(tsr_key_is_name_segment("a", 1));
        assert_false(tsr_key_is_name_segment("-", 1));
        assert_true(tsr_key_is_name_segment("a-b_c.d", 7));
        assert_true(tsr_key_is_name_segment("A9", 2));
        assert_false(tsr_key_is_name_segment("ab_", 3));
        /* Only len characters are read: the '+' past them does not count. */
        assert_true(tsr_key_is_name_segment("1g.10gb+me", 7));
        assert_false(tsr_key_is_name_segment("1g.10gb+me", 10));

        /* Prefix: at most 253 characters. */
        memset(name, 'p', 253);
        strcpy(name + 253, "/gpu");
        assert_true(tsr_key_is_resource_name(name));
        memset(name, 'p', 254);
        strcpy(name + 254, "/gpu");
        assert_false(tsr_key_is_resource_name(name));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_keys__classification_table),
            cmocka_unit_test(test_keys__families),
            cmocka_unit_test(test_keys__format),
            cmocka_unit_test(test_keys__format_refusals),
            cmocka_unit_test(test_keys__format_name_length_limit),
            cmocka_unit_test(test_keys__format_classify_round_trip),
            cmocka_unit_test(test_keys__resource_name_validation),
            cmocka_unit_test(test_keys__name_segment_limits),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
