/*
 * test_webhook_instance.c - webhook/instance: the Instance validating and defaulting handlers
 * against a fixture of InstanceTypes read through the lookup.
 *
 * Fixture types: a CPU-only pool of 64 cores, one with no CPU capacity, an H100 pool (8 whole
 * cards, logical slicing), an H100 pool in MIG mode (profiles 1g.10gb and 3g.40gb, no whole card),
 * an AMD pool (no partition kind), an accelerated pool whose detail is not computed yet, a
 * CPU-only pool with a 10Gi local storage, and two MIG pools in older shapes: spec.memory as a
 * quantity string (an older upstream), and this project's former rendering (spec.memory in MiB,
 * unitResources.cpu a number, no detail manufacturer).
 *
 * Validating CREATE rows, accepted and refused with the exact text: the reserved namespaces, the
 * missing type (bare 403s), the 500 retry, then the 422 list - CPU against the pool's capacity
 * (a request above any node but within the total is admitted), the unit caps, whole counts against
 * status.accelerator.capacity, slices, partitions (mutual exclusion, unoffered with the offered
 * set, unpartitionable manufacturer, a pool without partitions, the single-card rule), the volume.
 * UPDATE rows: immutability while running, the start path re-running the resource rules, the
 * stop/start phase rules, and the deletion guard. Defaulting rows compare the object whole. An
 * allocation-failure loop ends every defaulting run in the unfailed result or TSR_ENOMEM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "webhook/instance.h"
#include "webhook/routes.h"

#include "support/failing_alloc.h"
#include "support/json_text.h"
#include "support/review_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define KIND "Instance.worker.gpustack.ai"

/* ---- the fixture -------------------------------------------------------------------------- */

static const char fixture_text[] =
    "{"
    "\"cpu\":{\"spec\":{\"acceleratable\":false,\"unitResources\":{\"cpu\":\"1\",\"ram\":\"2Gi\"},"
    "  \"localStorage\":\"100Gi\"},\"status\":{\"cpu\":{\"capacity\":\"64\",\"onceMaxRequest\":"
    "  \"16\"}}},"
    "\"cpu-empty\":{\"spec\":{\"unitResources\":{\"cpu\":\"1\",\"ram\":\"2Gi\"},"
    "  \"localStorage\":\"100Gi\"},\"status\":{\"cpu\":{\"capacity\":\"0\"}}},"
    "\"cpu-small-disk\":{\"spec\":{\"unitResources\":{\"cpu\":\"1\",\"ram\":\"2Gi\"},"
    "  \"localStorage\":\"10Gi\"},\"status\":{\"cpu\":{\"capacity\":\"8\"}}},"
    "\"h100\":{\"spec\":{\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100\","
    "  \"unitResources\":{\"cpu\":\"12\",\"ram\":\"192Gi\"},\"localStorage\":\"100Gi\"},"
    "  \"status\":{\"accelerator\":{\"capacity\":\"8\",\"onceMaxRequest\":\"2\"},\"detail\":{"
    "  \"manufacturer\":\"nvidia\",\"memory\":\"81920Mi\",\"slicedDetail\":{\"logical\":"
    "  {\"count\":128},\"physical\":{\"count\":0}}}}},"
    "\"h100-mig\":{\"spec\":{\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100\","
    "  \"unitResources\":{\"cpu\":\"12\",\"ram\":\"192Gi\"},\"localStorage\":\"100Gi\"},"
    "  \"status\":{\"accelerator\":{\"capacity\":\"0\"},\"detail\":{\"manufacturer\":\"nvidia\","
    "  \"memory\":\"81920Mi\",\"slicedDetail\":{\"logical\":{\"count\":0},\"physical\":{"
    "  \"count\":7,\"profiles\":[{\"name\":\"1g.10gb\",\"memoryMib\":10240},{\"name\":"
    "  \"3g.40gb\",\"memoryMib\":40960},{\"name\":\"+me\",\"memoryMib\":1024},{\"name\":"
    "  \"2g.20gb\"}]}}}}},"
    "\"mi300\":{\"spec\":{\"acceleratable\":true,\"acceleratorGroup\":\"amd-mi300x\","
    "  \"unitResources\":{\"cpu\":\"12\",\"ram\":\"192Gi\"},\"localStorage\":\"100Gi\"},"
    "  \"status\":{\"accelerator\":{\"capacity\":\"8\"},\"detail\":{\"manufacturer\":\"amd\","
    "  \"slicedDetail\":{\"logical\":{\"count\":128}}}}},"
    "\"h100-new\":{\"spec\":{\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100\","
    "  \"unitResources\":{\"cpu\":\"12\",\"ram\":\"192Gi\"},\"localStorage\":\"100Gi\"}},"
    "\"old-mig\":{\"spec\":{\"acceleratable\":true,\"acceleratorGroup\":\"nvidia-h100\","
    "  \"unitResources\":{\"cpu\":\"12\",\"ram\":\"192Gi\"},\"localStorage\":\"100Gi\","
    "  \"memory\":\"80Gi\"},\"status\":{\"accelerator\":{\"capacity\":\"0\"},\"detail\":{"
    "  \"manufacturer\":\"nvidia\",\"slicedDetail\":{\"physical\":{\"count\":7,"
    "  \"profiles\":[{\"name\":\"3g.40gb\",\"memoryMib\":40960}]}}}}},"
    "\"sim-mig\":{\"spec\":{\"acceleratable\":true,\"acceleratorGroup\":"
    "  \"nvidia-h100-80gb-hbm3\",\"unitResources\":{\"cpu\":12,\"ram\":\"192Gi\"},"
    "  \"localStorage\":\"100Gi\",\"memory\":81920},\"status\":{\"accelerator\":"
    "  {\"capacity\":\"0\"},\"detail\":{\"slicedDetail\":{\"logical\":{},\"physical\":"
    "  {\"count\":7,\"profiles\":[{\"name\":\"3g.40gb\",\"count\":2,\"memoryMib\":"
    "  40960}]}}}}}"
    "}";

static json_t *fixture;

static json_t *lookup_instancetype(void *ctx, const char *name)
{
        json_t *it = json_object_get(ctx, name);

        return it ? json_incref(it) : NULL;
}

static struct tsr_webhook_lookup lookup; /* set up with the defaults and the reader */

static int setup(void **state)
{
        (void)state;
        tsr_webhook_lookup_init(&lookup);
        lookup.instancetype = lookup_instancetype;
        fixture = json_fx_load(fixture_text);
        lookup.ctx = fixture;
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        json_decref(fixture);
        return 0;
}

/* An Instance named "i" in namespace ns with the given spec members. */
#define INST_NS(ns, spec)                                                                          \
        "{\"metadata\":{\"name\":\"i\",\"namespace\":\"" ns "\"},\"spec\":{" spec "}}"
#define INST(spec) INST_NS("team-a", spec)
#define EPH        "\"volume\":{\"ephemeral\":{\"capacity\":\"10Gi\"}}"
/* resources members, then the volume */
#define RES(type, res) "\"type\":\"" type "\",\"resources\":{" res "}," EPH

struct row {
        const char *name;
        const char *op;
        const char *obj, *old;
        int code;         /* 0: allowed */
        const char *want; /* the exact message of a denial */
};

static int run(tsr_webhook_handler h, const char *op, const char *obj, const char *old,
               struct tsr_verdict *v, struct tsr_diag *diag)
{
        return review_fx_run(h, &lookup, op, "team-a", obj, old, v, diag);
}

static void check_rows(const struct row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct tsr_verdict v;
                struct tsr_diag diag;
                int rc = run(tsr_webhook_instance_validate, rows[i].op, rows[i].obj, rows[i].old,
                             &v, &diag);

                if (rc)
                        fail_msg("%s: rc %s (%s)", rows[i].name, tsr_err_name(rc), diag.msg);
                if (v.patched)
                        fail_msg("%s: a validating handler patched", rows[i].name);
                if (!rows[i].code) {
                        if (!v.allowed)
                                fail_msg("%s: denied: %s", rows[i].name, v.message);
                        continue;
                }
                if (v.allowed)
                        fail_msg("%s: allowed, want %s", rows[i].name, rows[i].want);
                if (v.code != rows[i].code)
                        fail_msg("%s: code %d, want %d (%s)", rows[i].name, v.code, rows[i].code,
                                 v.message);
                if (strcmp(v.message, rows[i].want))
                        fail_msg("%s:\n got  %s\n want %s", rows[i].name, v.message, rows[i].want);
        }
}

#define INVALID(msg) KIND " \"i\" is invalid: " msg

static void test_instance__create(void **state)
{
        static const struct row rows[] = {
            {"cpu-only within the unit spec", "CREATE",
             INST(RES("cpu", "\"cpu\":\"4\",\"ram\":\"8Gi\",\"localStorage\":\"15Gi\"")), NULL, 0,
             NULL},
            {"cpu-only: above any node, within the pool's total (not onceMaxRequest 16)", "CREATE",
             INST(RES("cpu", "\"cpu\":\"64\",\"ram\":\"2Gi\"")), NULL, 0, NULL},
            {"h100: all eight cards (capacity, not onceMaxRequest 2)", "CREATE",
             INST(RES("h100", "\"accelerator\":\"8\",\"cpu\":\"96\",\"ram\":\"1536Gi\"")), NULL, 0,
             NULL},
            {"h100: a slice", "CREATE",
             INST(RES("h100", "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":50,"
                              "\"acceleratorSlicedCoresPercentage\":50,\"cpu\":\"6\",\"ram\":"
                              "\"96Gi\"")),
             NULL, 0, NULL},
            {"h100-mig: an offered partition", "CREATE",
             INST(RES("h100-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                                  "\"3g.40gb\",\"cpu\":\"6\",\"ram\":\"96Gi\"")),
             NULL, 0, NULL},
            {"this project's rendering: a partition (manufacturer from the group)", "CREATE",
             INST(RES("sim-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                                 "\"3g.40gb\",\"cpu\":\"6\",\"ram\":\"96Gi\"")),
             NULL, 0, NULL},
            {"a stopped Instance may name a missing type", "CREATE",
             INST("\"type\":\"gone\",\"stop\":true," EPH), NULL, 0, NULL},
            {"a persistent volume", "CREATE",
             INST("\"type\":\"cpu\",\"volume\":{\"persistent\":{\"name\":\"pv\"}}"), NULL, 0, NULL},
            {"kube-system is reserved", "CREATE", INST_NS("kube-system", RES("cpu", "")), NULL, 403,
             "metadata.namespace: Invalid value: \"kube-system\": cannot create instance in "
             "reserved namespace"},
            {"the system namespace is reserved", "CREATE",
             INST_NS("gpustack-system", RES("cpu", "")), NULL, 403,
             "metadata.namespace: Invalid value: \"gpustack-system\": cannot create instance in "
             "reserved namespace"},
            {"no type", "CREATE", INST(EPH), NULL, 403,
             "spec.type: Required value: type must be specified"},
            {"a missing type", "CREATE", INST(RES("nope", "")), NULL, 403,
             "spec.type: Not found: \"nope\""},
            {"a slice before the detail is computed: retry", "CREATE",
             INST(RES("h100-new", "\"acceleratorSlicedMemoryPercentage\":50")), NULL, 500,
             "Internal error occurred: instance type h100-new is not ready yet; retry"},
            {"cpu-only above the pool's capacity", "CREATE", INST(RES("cpu", "\"cpu\":\"65\"")),
             NULL, 422,
             INVALID("spec.resources.cpu: Invalid value: \"65\": exceeds the CPU capacity 64 of "
                     "instance type cpu")},
            {"cpu-only on a pool with no capacity", "CREATE",
             INST(RES("cpu-empty", "\"cpu\":\"1\"")), NULL, 422,
             INVALID("spec.resources.cpu: Invalid value: \"1\": instance type cpu-empty has no CPU "
                     "capacity: no managed node currently backs it")},
            {"cpu-only: RAM above unitRAM x cores, disk above localStorage", "CREATE",
             INST(RES("cpu", "\"cpu\":\"4\",\"ram\":\"9Gi\",\"localStorage\":\"101Gi\"")), NULL,
             422,
             INVALID("[spec.resources.ram: Invalid value: \"9Gi\": exceeds the maximum RAM 8Gi of "
                     "instance type cpu, spec.resources.localStorage: Invalid value: \"101Gi\": "
                     "exceeds the local storage 100Gi of instance type cpu]")},
            {"cpu-only: an accelerator", "CREATE", INST(RES("cpu", "\"accelerator\":\"1\"")), NULL,
             422,
             INVALID("spec.resources.accelerator: Invalid value: \"1\": accelerator request must "
                     "not be specified for non-acceleratable instance type")},
            {"negative requests", "CREATE",
             INST(RES("cpu", "\"cpu\":\"-1\",\"ram\":\"-1Gi\",\"localStorage\":\"-1\"")), NULL, 422,
             INVALID("[spec.resources.cpu: Invalid value: \"-1\": CPU request cannot be negative, "
                     "spec.resources.ram: Invalid value: \"-1Gi\": RAM request cannot be negative, "
                     "spec.resources.localStorage: Invalid value: \"-1\": local storage request "
                     "cannot be negative]")},
            {"h100: nine cards", "CREATE", INST(RES("h100", "\"accelerator\":\"9\"")), NULL, 422,
             INVALID("spec.resources.accelerator: Invalid value: \"9\": exceeds the accelerator "
                     "capacity 8 of instance type h100")},
            {"h100: a negative count", "CREATE", INST(RES("h100", "\"accelerator\":\"-1\"")), NULL,
             422,
             INVALID("spec.resources.accelerator: Invalid value: \"-1\": accelerator request "
                     "cannot be negative")},
            {"h100: a fractional count", "CREATE", INST(RES("h100", "\"accelerator\":\"1500m\"")),
             NULL, 422,
             INVALID("spec.resources.accelerator: Invalid value: \"1500m\": accelerator request "
                     "must be a whole number of cards")},
            {"h100: CPU and RAM above unit x count", "CREATE",
             INST(RES("h100", "\"accelerator\":\"2\",\"cpu\":\"25\",\"ram\":\"385Gi\"")), NULL, 422,
             INVALID("[spec.resources.cpu: Invalid value: \"25\": exceeds the maximum CPU 24 of "
                     "instance type h100, spec.resources.ram: Invalid value: \"385Gi\": exceeds "
                     "the maximum RAM 384Gi of instance type h100]")},
            {"mig: no whole card left (capacity 0)", "CREATE",
             INST(RES("h100-mig", "\"accelerator\":\"1\"")), NULL, 422,
             INVALID("spec.resources.accelerator: Invalid value: \"1\": exceeds the accelerator "
                     "capacity 0 of instance type h100-mig")},
            {"a slice out of range, on two cards", "CREATE",
             INST(RES("h100", "\"accelerator\":\"2\",\"acceleratorSlicedMemoryPercentage\":150,"
                              "\"acceleratorSlicedCoresPercentage\":-1")),
             NULL, 422,
             INVALID("[spec.resources.acceleratorSlicedMemoryPercentage: Invalid value: 150: must "
                     "be between 0 and 100, spec.resources.acceleratorSlicedCoresPercentage: "
                     "Invalid value: -1: must be between 0 and 100, spec.resources.accelerator: "
                     "Invalid value: \"2\": accelerator request must be exactly 1 for a sliced "
                     "request]")},
            {"a slice on a pool without logical slicing (partitions offered)", "CREATE",
             INST(RES("h100-mig", "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":"
                                  "50")),
             NULL, 422,
             INVALID("spec.resources.acceleratorPartitionedProfile: Forbidden: instance type "
                     "h100-mig does not offer logical slicing; request a hardware partition with "
                     "acceleratorPartitionedProfile")},
            {"a partition and a slice together", "CREATE",
             INST(RES("h100-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                                  "\"3g.40gb\",\"acceleratorSlicedMemoryPercentage\":50")),
             NULL, 422,
             INVALID("spec.resources.acceleratorPartitionedProfile: Forbidden: a hardware "
                     "partition and a logical slice percentage are mutually exclusive; clear "
                     "acceleratorSlicedMemoryPercentage and acceleratorSlicedCoresPercentage")},
            {"an unoffered profile names the offered set", "CREATE",
             INST(RES("h100-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                                  "\"7g.80gb\"")),
             NULL, 422,
             INVALID("spec.resources.acceleratorPartitionedProfile: Invalid value: \"7g.80gb\": "
                     "instance type h100-mig does not offer this partition profile; offered: "
                     "[1g.10gb 3g.40gb +me 2g.20gb]")},
            {"an offered profile that yields no resource name", "CREATE",
             INST(RES("h100-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                                  "\"+me\"")),
             NULL, 422,
             INVALID("spec.resources.acceleratorPartitionedProfile: Invalid value: \"+me\": "
                     "partition profile name does not yield a valid resource name")},
            {"this project's rendering: an unoffered profile", "CREATE",
             INST(RES("sim-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                                 "\"1g.10gb\"")),
             NULL, 422,
             INVALID("spec.resources.acceleratorPartitionedProfile: Invalid value: \"1g.10gb\": "
                     "instance type sim-mig does not offer this partition profile; offered: "
                     "[3g.40gb]")},
            {"a partition on two cards", "CREATE",
             INST(RES("h100-mig", "\"accelerator\":\"2\",\"acceleratorPartitionedProfile\":"
                                  "\"1g.10gb\"")),
             NULL, 422,
             INVALID("spec.resources.accelerator: Invalid value: \"2\": accelerator request must "
                     "be exactly 1 for a partitioned request")},
            {"a partition on a manufacturer without partitioning", "CREATE",
             INST(RES("mi300", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                               "\"3g.40gb\"")),
             NULL, 422,
             INVALID("spec.resources.acceleratorPartitionedProfile: Invalid value: \"3g.40gb\": "
                     "manufacturer amd does not support hardware partitioning")},
            {"a partition on a pool without partitions", "CREATE",
             INST(RES("h100", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":"
                              "\"3g.40gb\"")),
             NULL, 422,
             INVALID("spec.resources.acceleratorPartitionedProfile: Forbidden: instance type h100 "
                     "does not offer hardware partitioning")},
            {"both volumes", "CREATE",
             INST("\"type\":\"cpu\",\"volume\":{\"ephemeral\":{\"capacity\":\"1Gi\"},"
                  "\"persistent\":{\"name\":\"pv\"}}"),
             NULL, 422,
             INVALID("spec.volume: Forbidden: cannot specify both ephemeral and persistent of "
                     "volume")},
            {"no volume, and a resource error: all listed", "CREATE",
             INST("\"type\":\"cpu\",\"resources\":{\"cpu\":\"65\"}"), NULL, 422,
             INVALID("[spec.resources.cpu: Invalid value: \"65\": exceeds the CPU capacity 64 of "
                     "instance type cpu, spec.volume: Required value: either ephemeral or "
                     "persistent of volume should be specified]")},
            {"an empty ephemeral volume", "CREATE",
             INST("\"type\":\"cpu\",\"volume\":{\"ephemeral\":{\"capacity\":\"0\"}}"), NULL, 422,
             INVALID("spec.volume.ephemeral.capacity: Invalid value: \"0\": capacity of ephemeral "
                     "volume must be positive")},
            {"a nameless persistent volume", "CREATE",
             INST("\"type\":\"cpu\",\"volume\":{\"persistent\":{}}"), NULL, 422,
             INVALID("spec.volume.persistent.name: Required value: name of the persistent volume "
                     "must be specified")},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

#define RUNNING(extra)                                                                             \
        "{\"metadata\":{\"name\":\"i\",\"namespace\":\"team-a\"},\"spec\":{\"type\":\"cpu\","      \
        "\"image\":\"a\",\"resources\":{\"cpu\":\"4\",\"ram\":\"8Gi\"}," EPH extra "},"            \
        "\"status\":{\"phase\":\"Running\"}}"
#define STOPPED(res, phase)                                                                        \
        "{\"metadata\":{\"name\":\"i\",\"namespace\":\"team-a\"},\"spec\":{\"type\":\"cpu\","      \
        "\"image\":\"a\",\"stop\":true,\"resources\":{" res "}," EPH                               \
        "},\"status\":{\"phase\":\"" phase "\"}}"
#define STARTED(res)                                                                               \
        "{\"metadata\":{\"name\":\"i\",\"namespace\":\"team-a\"},\"spec\":{\"type\":\"cpu\","      \
        "\"image\":\"a\",\"stop\":false,\"resources\":{" res "}," EPH "}}"

static void test_instance__update(void **state)
{
        static const struct row rows[] = {
            {"running: a display name", "UPDATE", RUNNING(",\"displayName\":\"x\""), RUNNING(""), 0,
             NULL},
            {"running: an explicit zero equals the absent field", "UPDATE",
             RUNNING(",\"privileged\":false,\"command\":[]"), RUNNING(""), 0, NULL},
            {"running: image and resources", "UPDATE",
             "{\"metadata\":{\"name\":\"i\"},\"spec\":{\"type\":\"cpu\",\"image\":\"b\","
             "\"resources\":{\"cpu\":\"8\",\"ram\":\"8Gi\"}," EPH "}}",
             RUNNING(""), 422,
             INVALID("[spec.image: Forbidden: image is immutable, spec.resources: Forbidden: "
                     "resources is immutable]")},
            {"running: the node pin", "UPDATE", RUNNING(",\"nodeName\":\"n1\""), RUNNING(""), 422,
             INVALID("spec.nodeName: Forbidden: nodeName is immutable")},
            {"stopped: resources may change", "UPDATE",
             STOPPED("\"cpu\":\"8\",\"ram\":\"64Gi\"", "Stopped"),
             STOPPED("\"cpu\":\"4\"", "Stopped"), 0, NULL},
            {"stopped: the volume may not", "UPDATE",
             "{\"metadata\":{\"name\":\"i\"},\"spec\":{\"type\":\"cpu\",\"stop\":true,"
             "\"volume\":{\"ephemeral\":{\"capacity\":\"20Gi\"}}}}",
             STOPPED("", "Stopped"), 422, INVALID("spec.volume: Forbidden: volume is immutable")},
            {"start: the resource rules run again", "UPDATE",
             STARTED("\"cpu\":\"4\",\"ram\":\"9Gi\""), STOPPED("\"cpu\":\"4\"", "Stopped"), 422,
             INVALID("spec.resources.ram: Invalid value: \"9Gi\": exceeds the maximum RAM 8Gi of "
                     "instance type cpu")},
            {"start: the CPU capacity too", "UPDATE", STARTED("\"cpu\":\"65\""),
             STOPPED("\"cpu\":\"4\"", "Stopped"), 422,
             INVALID("spec.resources.cpu: Invalid value: \"65\": exceeds the CPU capacity 64 of "
                     "instance type cpu")},
            {"start: within the rules", "UPDATE", STARTED("\"cpu\":\"4\",\"ram\":\"8Gi\""),
             STOPPED("\"cpu\":\"4\"", "Stopped"), 0, NULL},
            {"start before it has stopped", "UPDATE", STARTED("\"cpu\":\"4\""),
             STOPPED("\"cpu\":\"4\"", "Stopping"), 422,
             INVALID("spec.stop: Forbidden: can only start stopped instance")},
            {"start against a deleted type", "UPDATE",
             "{\"metadata\":{\"name\":\"i\"},\"spec\":{\"type\":\"gone\"," EPH "}}",
             "{\"metadata\":{\"name\":\"i\"},\"spec\":{\"type\":\"gone\",\"stop\":true," EPH
             "},\"status\":{\"phase\":\"Stopped\"}}",
             422, INVALID("spec.type: Not found: \"gone\"")},
            {"stop while starting", "UPDATE", STOPPED("\"cpu\":\"4\",\"ram\":\"8Gi\"", "Starting"),
             "{\"metadata\":{\"name\":\"i\",\"namespace\":\"team-a\"},\"spec\":{\"type\":\"cpu\","
             "\"image\":\"a\",\"resources\":{\"cpu\":\"4\",\"ram\":\"8Gi\"}," EPH "},"
             "\"status\":{\"phase\":\"Starting\"}}",
             422, INVALID("spec.stop: Forbidden: cannot stop starting instance")},
            {"delete", "DELETE", NULL, RUNNING(""), 0, NULL},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_instance__wrong_shape(void **state)
{
        static const char *const objs[] = {
            INST("\"type\":\"cpu\",\"resources\":[]"),
            INST("\"type\":\"cpu\",\"resources\":{\"cpu\":\"four\"}"),
            INST("\"type\":\"h100\",\"resources\":{\"acceleratorSlicedMemoryPercentage\":\"50\"}"),
            INST("\"type\":\"cpu\",\"stop\":\"yes\""),
        };
        struct tsr_verdict v;
        struct tsr_diag diag;

        (void)state;
        for (size_t i = 0; i < N_ELEMS(objs); i++) {
                assert_int_equal(
                    run(tsr_webhook_instance_validate, "CREATE", objs[i], NULL, &v, &diag),
                    TSR_EPARSE);
                assert_true(diag.msg[0] != '\0');
                assert_int_equal(
                    run(tsr_webhook_instance_mutate, "CREATE", objs[i], NULL, &v, &diag),
                    TSR_EPARSE);
                assert_null(v.patched);
        }
}

/* ---- defaulting --------------------------------------------------------------------------- */

struct mrow {
        const char *name;
        bool overcommit;
        const char *op;
        const char *obj, *old;
        int code;         /* 0: allowed with the patch below */
        const char *want; /* the object after defaulting, or the denial */
};

#define DEFAULTS         "\"imagePullPolicy\":\"IfNotPresent\",\"volumeMount\":\"/workspace\","
#define PLAIN(type, res) "{\"spec\":{\"type\":\"" type "\",\"resources\":{" res "}}}"
#define DONE(type, res)                                                                            \
        "{\"spec\":{\"type\":\"" type "\",\"resources\":{" res "}," DEFAULTS "\"_\":0}}"

static const struct mrow mrows[] = {
    {"cpu-only, nothing asked", true, "CREATE", "{\"spec\":{\"type\":\"cpu\"}}", NULL, 0,
     DONE("cpu", "\"cpu\":\"1\",\"ram\":\"2Gi\",\"localStorage\":\"15Gi\"")},
    {"cpu-only, four cores: RAM is unitRAM x 4", true, "CREATE", PLAIN("cpu", "\"cpu\":\"4\""),
     NULL, 0, DONE("cpu", "\"cpu\":\"4\",\"ram\":\"8Gi\",\"localStorage\":\"15Gi\"")},
    {"overcommit on: an explicit RAM is rewritten", true, "CREATE",
     PLAIN("cpu", "\"cpu\":\"4\",\"ram\":\"3Gi\",\"localStorage\":\"20Gi\""), NULL, 0,
     DONE("cpu", "\"cpu\":\"4\",\"ram\":\"8Gi\",\"localStorage\":\"20Gi\"")},
    {"overcommit off: an explicit RAM is kept", false, "CREATE",
     PLAIN("cpu", "\"cpu\":\"4\",\"ram\":\"3Gi\""), NULL, 0,
     DONE("cpu", "\"cpu\":\"4\",\"ram\":\"3Gi\",\"localStorage\":\"15Gi\"")},
    {"local storage capped at the type's", true, "CREATE",
     "{\"spec\":{\"type\":\"cpu-small-disk\"}}", NULL, 0,
     DONE("cpu-small-disk", "\"cpu\":\"1\",\"ram\":\"2Gi\",\"localStorage\":\"10Gi\"")},
    {"h100, nothing asked: one card", true, "CREATE", "{\"spec\":{\"type\":\"h100\"}}", NULL, 0,
     DONE("h100", "\"accelerator\":\"1\",\"cpu\":\"12\",\"ram\":\"192Gi\",\"localStorage\":"
                  "\"15Gi\"")},
    {"h100, two cards", true, "CREATE", PLAIN("h100", "\"accelerator\":\"2\""), NULL, 0,
     DONE("h100", "\"accelerator\":\"2\",\"cpu\":\"24\",\"ram\":\"384Gi\",\"localStorage\":"
                  "\"15Gi\"")},
    {"h100, zero cards sized as one", true, "CREATE", PLAIN("h100", "\"accelerator\":\"0\""), NULL,
     0,
     DONE("h100", "\"accelerator\":\"0\",\"cpu\":\"12\",\"ram\":\"192Gi\",\"localStorage\":"
                  "\"15Gi\"")},
    {"h100, a 50% slice: cores copied, host sized by memory", true, "CREATE",
     PLAIN("h100", "\"accelerator\":\"0\",\"acceleratorSlicedMemoryPercentage\":50"), NULL, 0,
     DONE("h100", "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":50,"
                  "\"acceleratorSlicedCoresPercentage\":50,\"cpu\":\"6\",\"ram\":\"96Gi\","
                  "\"localStorage\":\"15Gi\"")},
    {"h100, a cores-only slice: memory copied", true, "CREATE",
     PLAIN("h100", "\"acceleratorSlicedCoresPercentage\":25"), NULL, 0,
     DONE("h100", "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":25,"
                  "\"acceleratorSlicedCoresPercentage\":25,\"cpu\":\"3\",\"ram\":\"48Gi\","
                  "\"localStorage\":\"15Gi\"")},
    {"h100, a 30% slice: a milli-core share", true, "CREATE",
     PLAIN("h100", "\"acceleratorSlicedMemoryPercentage\":30,"
                   "\"acceleratorSlicedCoresPercentage\":10"),
     NULL, 0,
     DONE("h100", "\"accelerator\":\"1\",\"acceleratorSlicedMemoryPercentage\":30,"
                  "\"acceleratorSlicedCoresPercentage\":10,\"cpu\":\"3600m\",\"ram\":"
                  "\"61847529062400m\",\"localStorage\":\"15Gi\"")},
    {"mig, 3g.40gb: half a card's VRAM", true, "CREATE",
     PLAIN("h100-mig", "\"acceleratorPartitionedProfile\":\"3g.40gb\""), NULL, 0,
     DONE("h100-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":\"3g.40gb\","
                      "\"cpu\":\"6\",\"ram\":\"96Gi\",\"localStorage\":\"15Gi\"")},
    {"an older upstream: VRAM from spec.memory, a quantity string", true, "CREATE",
     PLAIN("old-mig", "\"acceleratorPartitionedProfile\":\"3g.40gb\""), NULL, 0,
     DONE("old-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":\"3g.40gb\","
                     "\"cpu\":\"6\",\"ram\":\"96Gi\",\"localStorage\":\"15Gi\"")},
    {"this project's former rendering: VRAM from spec.memory in MiB, unit cores a number", true,
     "CREATE", PLAIN("sim-mig", "\"acceleratorPartitionedProfile\":\"3g.40gb\""), NULL, 0,
     DONE("sim-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":\"3g.40gb\","
                     "\"cpu\":\"6\",\"ram\":\"96Gi\",\"localStorage\":\"15Gi\"")},
    {"mig, an unoffered profile: sized as whole cards, refused by validation", true, "CREATE",
     PLAIN("h100-mig", "\"acceleratorPartitionedProfile\":\"7g.80gb\""), NULL, 0,
     DONE("h100-mig", "\"accelerator\":\"1\",\"acceleratorPartitionedProfile\":\"7g.80gb\","
                      "\"cpu\":\"12\",\"ram\":\"192Gi\",\"localStorage\":\"15Gi\"")},
    {"mig, an offered profile without its memory: retry", true, "CREATE",
     PLAIN("h100-mig", "\"acceleratorPartitionedProfile\":\"2g.20gb\""), NULL, 500,
     "Internal error occurred: instance type h100-mig is not ready yet (partition profile "
     "\"2g.20gb\" cannot be sized from the observed accelerator detail); retry"},
    {"a slice before the detail: retry", true, "CREATE",
     PLAIN("h100-new", "\"acceleratorSlicedMemoryPercentage\":50"), NULL, 500,
     "Internal error occurred: instance type h100-new is not ready yet; retry"},
    {"a missing type", true, "CREATE", "{\"spec\":{\"type\":\"nope\"}}", NULL, 403,
     "spec.type: Not found: \"nope\""},
    {"stopped: only the plain defaults", true, "CREATE",
     "{\"spec\":{\"type\":\"nope\",\"stop\":true,\"imagePullPolicy\":\"Always\"}}", NULL, 0,
     "{\"spec\":{\"type\":\"nope\",\"stop\":true,\"imagePullPolicy\":\"Always\",\"volumeMount\":"
     "\"/workspace\",\"resources\":{}}}"},
    {"no type: only the plain defaults", true, "CREATE", "{\"spec\":{}}", NULL, 0,
     "{\"spec\":{" DEFAULTS "\"resources\":{}}}"},
    {"update: defaulted again", true, "UPDATE", PLAIN("cpu", "\"cpu\":\"2\""),
     PLAIN("cpu", "\"cpu\":\"2\""), 0,
     DONE("cpu", "\"cpu\":\"2\",\"ram\":\"4Gi\",\"localStorage\":\"15Gi\"")},
};

/* The "_":0 member of DONE only closes the macro's member list: drop it before comparing. */
static json_t *load_want(const char *text)
{
        json_t *w = json_fx_load(text);

        json_object_del(json_object_get(w, "spec"), "_");
        return w;
}

static int mutate(const struct mrow *m, struct tsr_verdict *v, struct tsr_diag *diag)
{
        struct tsr_webhook_lookup x = lookup;
        struct tsr_review r;
        int rc;

        x.settings.value[TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT] = m->overcommit;
        memset(&r, 0, sizeof(r));
        memset(v, 0, sizeof(*v));
        tsr_diag_clear(diag);
        snprintf(r.operation, sizeof(r.operation), "%s", m->op);
        r.object = json_fx_load(m->obj);
        r.old_object = m->old ? json_fx_load(m->old) : NULL;
        rc = tsr_webhook_instance_mutate(&x, &r, v, diag);
        json_decref(r.object);
        json_decref(r.old_object);
        return rc;
}

static void test_instance__default(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(mrows); i++) {
                struct tsr_verdict v;
                struct tsr_diag diag;
                int rc = mutate(&mrows[i], &v, &diag);

                if (rc)
                        fail_msg("%s: rc %s (%s)", mrows[i].name, tsr_err_name(rc), diag.msg);
                if (mrows[i].code) {
                        if (v.allowed || v.patched || v.code != mrows[i].code ||
                            strcmp(v.message, mrows[i].want))
                                fail_msg("%s: allowed %d code %d\n got  %s\n want %s",
                                         mrows[i].name, v.allowed, v.code, v.message,
                                         mrows[i].want);
                        continue;
                }
                if (!v.allowed || !v.patched)
                        fail_msg("%s: denied (%d %s)", mrows[i].name, v.code, v.message);
                {
                        json_t *want = load_want(mrows[i].want);
                        char *got = json_fx_dump(v.patched);

                        if (!json_equal(v.patched, want))
                                fail_msg("%s:\n got  %s\n want %s", mrows[i].name, got,
                                         mrows[i].want);
                        free(got);
                        json_decref(want);
                }
                json_decref(v.patched);
        }
}

/*
 * Updating an Instance being deleted must read no InstanceType (its type may be gone): both
 * Instance routes carry the guard, and without it the same update is refused.
 */
static void test_instance__default_guard(void **state)
{
        static const char *const paths[] = {"/mutate-worker-gpustack-ai-v1alpha1-instance",
                                            "/validate-worker-gpustack-ai-v1alpha1-instance"};
        struct tsr_verdict v;
        struct tsr_diag diag;

        (void)state;
        for (size_t i = 0; i < 2; i++) {
                const struct tsr_webhook_route *route = tsr_webhook_route_find(paths[i]);

                assert_non_null(route);
                assert_true(route->deletion_guard);
                assert_string_equal(route->kind, "Instance");
        }
        assert_int_equal(run(tsr_webhook_instance_mutate, "UPDATE",
                             "{\"spec\":{\"type\":\"gone\"}}", "{\"spec\":{\"type\":\"gone\"}}", &v,
                             &diag),
                         0);
        assert_false(v.allowed);
        assert_int_equal(v.code, 403);
        assert_int_equal(run(tsr_webhook_instance_mutate, "DELETE", NULL,
                             "{\"spec\":{\"type\":\"gone\"}}", &v, &diag),
                         0);
        assert_true(v.allowed);
        assert_null(v.patched);
}

static void test_instance__alloc_failures(void **state)
{
        (void)state;
        for (size_t i = 0; i < N_ELEMS(mrows); i++) {
                struct tsr_webhook_lookup x = lookup;
                json_t *want;

                if (mrows[i].code)
                        continue;
                x.settings.value[TSR_SETTING_INSTANCE_GENERAL_RESOURCES_OVERCOMMIT] =
                    mrows[i].overcommit;
                want = load_want(mrows[i].want);
                review_fx_alloc_loop(tsr_webhook_instance_mutate, &x, mrows[i].op, NULL,
                                     mrows[i].obj, want, 120, mrows[i].name);
                json_decref(want);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_instance__create),
            cmocka_unit_test(test_instance__update),
            cmocka_unit_test(test_instance__wrong_shape),
            cmocka_unit_test(test_instance__default),
            cmocka_unit_test(test_instance__default_guard),
            cmocka_unit_test(test_instance__alloc_failures),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
