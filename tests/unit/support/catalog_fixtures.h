/*
 * catalog_fixtures.h - catalog lookups and small hardware fixtures for the unit tests: a product
 * by name, a MIG profile's index, two Hygon products the catalog lacks, and accelerators detected
 * and charged the way a node reports them.
 *
 * A lookup that misses fails the running cmocka test (fail_msg) with the message the tests have
 * always printed. Nothing here allocates.
 *
 * Ownership: a product or profile returned or declared here is static const (the built-in
 * catalog's, or this file's): never written, never freed. struct fx_node and the caps arrays are
 * the caller's storage, filled in place; the records handed to fx_node_build are only read.
 */
#ifndef TSR_TEST_SUPPORT_CATALOG_FIXTURES_H
#define TSR_TEST_SUPPORT_CATALOG_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

#include "core/capability.h"
#include "core/catalog.h"
#include "core/ledger.h"

/* The catalog product driver-named name; fails the test when the catalog has none. */
const struct tsr_product *fx_product(const char *name);

/* The index of p's MIG profile name in p->profiles; fails the test when p has none. */
int fx_pidx(const struct tsr_product *p, const char *name);

/*
 * A Hygon C-3000 with MIG, as spec/upstream-behavior.md §8 lists it: 4 memory units, profiles
 * 2g.15gb, 4g.31gb and 8g.63gb; its manufacturer row has 4 slice slots.
 */
extern const struct tsr_mig_profile fx_hygon_c3000_profiles[3];
extern const struct tsr_product fx_hygon_c3000;

/* A Hygon K100: no MIG table. */
extern const struct tsr_product fx_hygon_k100;

/* caps[0..n) of p with UUID "GPU", index i; those in parted (bit i) in MIG mode. */
void fx_detect(struct tsr_accel_cap *caps, size_t n, const struct tsr_product *p, uint32_t parted);

#define FX_NODE_ACCEL 8

/* One node: n accelerators of one product and the ledger its records build. */
struct fx_node {
        size_t n;
        struct tsr_accel_cap caps[FX_NODE_ACCEL];
        struct tsr_accel_ledger ledger[FX_NODE_ACCEL];
};

/*
 * Fills nd: n accelerators of p, those in parted (bit i) in MIG mode (fx_detect), the ledger
 * rebuilt from recs[0..nrec) with tsr_ledger_build; fails the test when that fails.
 */
void fx_node_build(struct fx_node *nd, const struct tsr_product *p, size_t n, uint32_t parted,
                   const struct tsr_alloc_record *recs, size_t nrec);

#endif
