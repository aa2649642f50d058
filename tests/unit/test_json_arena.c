/*
 * test_json_arena.c - cmocka suite for codec/json_arena: nothing changes before the install;
 * under an arena every jansson allocation is counted and the end takes them back; values made
 * outside it are freed as before; a document larger than a block, json_dumps text, a begin that
 * would nest, zero-byte allocations up to a block's end; and threads each running their own arenas
 * while another uses jansson without one (suite webhook too, so CI's ThreadSanitizer stage runs
 * it).
 *
 * Invariants: the tests run in the order listed (the first one runs before the install, which is
 * once per process); every value built is checked against its expected text, so an allocator
 * that handed out overlapping memory fails on the content.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec/json_arena.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A document of n members, each an array of strings and numbers, as its compact text. */
static json_t *build(unsigned n, unsigned salt)
{
        json_t *o = json_object();

        for (unsigned i = 0; o && i < n; i++) {
                char key[32], text[48];

                snprintf(key, sizeof(key), "k%u-%u", i, salt);
                snprintf(text, sizeof(text), "value %u of %u", i * salt, n);
                if (json_object_set_new(
                        o, key,
                        json_pack("[s, i, {s: b}]", text, (json_int_t)i, "flag", (int)(i & 1)))) {
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}

static void check_built(json_t *o, unsigned n, unsigned salt)
{
        char key[32], text[48];

        assert_non_null(o);
        assert_int_equal(json_object_size(o), n);
        for (unsigned i = 0; i < n; i += 97) {
                json_t *a;

                snprintf(key, sizeof(key), "k%u-%u", i, salt);
                snprintf(text, sizeof(text), "value %u of %u", i * salt, n);
                a = json_object_get(o, key);
                assert_non_null(a);
                assert_string_equal(json_string_value(json_array_get(a, 0)), text);
                assert_int_equal(json_integer_value(json_array_get(a, 1)), i);
        }
}

static void test_arena__before_the_install_nothing_changes(void **state)
{
        json_t *o;

        (void)state;
        tsr_json_arena_begin();
        o = build(50, 1);
        check_built(o, 50, 1);
        assert_int_equal(tsr_json_arena_live(), 0);
        json_decref(o);
        assert_int_equal(tsr_json_arena_end(), 0);
}

static void test_arena__counts_and_takes_back(void **state)
{
        json_t *o, *copy;

        (void)state;
        tsr_json_arena_install();
        tsr_json_arena_install(); /* once per process */
        for (int round = 0; round < 3; round++) {
                tsr_json_arena_begin();
                o = build(2000, 3);
                check_built(o, 2000, 3);
                assert_true(tsr_json_arena_live() > 2000);
                copy = json_deep_copy(o);
                assert_true(json_equal(o, copy));
                json_decref(o);
                check_built(copy, 2000, 3);
                json_decref(copy);
                assert_int_equal(tsr_json_arena_live(), 0);
                assert_int_equal(tsr_json_arena_end(), 0);
        }
        assert_int_equal(tsr_json_arena_live(), 0);
}

static void test_arena__values_from_outside_are_freed_as_before(void **state)
{
        json_t *outside, *inside;
        size_t live;

        (void)state;
        outside = build(100, 5); /* malloc'd: no arena */
        tsr_json_arena_begin();
        inside = json_object();
        assert_int_equal(json_object_set(inside, "outside", outside), 0);
        live = tsr_json_arena_live();
        assert_true(live > 0);
        json_decref(outside); /* inside still holds it: nothing of the arena's is freed */
        assert_int_equal(tsr_json_arena_live(), live);
        check_built(json_object_get(inside, "outside"), 100, 5);
        json_decref(inside); /* frees outside through free(), inside through the arena */
        assert_int_equal(tsr_json_arena_live(), 0);
        assert_int_equal(tsr_json_arena_end(), 0);
        /* A value made after the end is malloc'd again and outlives every arena. */
        outside = build(10, 6);
        tsr_json_arena_begin();
        assert_int_equal(tsr_json_arena_end(), 0);
        check_built(outside, 10, 6);
        json_decref(outside);
}

static void test_arena__larger_than_a_block(void **state)
{
        size_t n = 3 * TSR_JSON_ARENA_KEEP;
        char *big = malloc(n + 1);
        json_t *s, *o;

        (void)state;
        assert_non_null(big);
        memset(big, 'x', n);
        big[n] = '\0';
        for (int round = 0; round < 2; round++) {
                tsr_json_arena_begin();
                o = build(3000, 7); /* several blocks */
                s = json_string(big);
                assert_non_null(s);
                assert_int_equal(json_string_length(s), n);
                check_built(o, 3000, 7);
                json_decref(s);
                json_decref(o);
                assert_int_equal(tsr_json_arena_end(), 0);
        }
        free(big);
}

static void test_arena__dumped_text_goes_back_through_tsr_json_free(void **state)
{
        json_t *o;
        char *text;

        (void)state;
        tsr_json_arena_begin();
        o = json_pack("{s: [i, s]}", "a", 1, "b");
        text = json_dumps(o, JSON_COMPACT);
        assert_string_equal(text, "{\"a\":[1,\"b\"]}");
        json_decref(o);
        assert_int_equal(tsr_json_arena_live(), 1);
        tsr_json_free(text);
        assert_int_equal(tsr_json_arena_end(), 0);
        /* Outside an arena it is free(). */
        o = json_pack("[i]", 2);
        text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        assert_string_equal(text, "[2]");
        tsr_json_free(text);
}

static void test_arena__a_nested_begin_does_nothing(void **state)
{
        json_t *o;

        (void)state;
        tsr_json_arena_begin();
        o = build(20, 8);
        tsr_json_arena_begin(); /* still the first arena: the count goes on */
        assert_true(tsr_json_arena_live() > 20);
        json_decref(o);
        assert_int_equal(tsr_json_arena_end(), 0);
        assert_int_equal(tsr_json_arena_end(), 0); /* nothing left to end */
}

/*
 * Zero-byte allocations through jansson's allocator fill a thread's first block to its very end;
 * each is still known as the arena's when freed (a pointer one past the block would go to free(),
 * which AddressSanitizer reports). A fresh thread, so that no kept block is larger.
 */
#define ZERO_N (TSR_JSON_ARENA_BLOCK / 16 + 3)

static void *zero_bytes_thread(void *arg)
{
        static void *p[ZERO_N];
        json_malloc_t m;
        json_free_t f;
        bool ok = true;

        (void)arg;
        json_get_alloc_funcs(&m, &f);
        tsr_json_arena_begin();
        for (size_t i = 0; i < ZERO_N; i++) {
                p[i] = m(0);
                ok = ok && p[i] && (i == 0 || p[i] != p[i - 1]);
        }
        ok = ok && tsr_json_arena_live() == ZERO_N;
        for (size_t i = 0; i < ZERO_N; i++)
                f(p[i]);
        ok = tsr_json_arena_end() == 0 && ok;
        return ok ? NULL : (void *)1;
}

static void test_arena__zero_bytes_to_the_end_of_a_block(void **state)
{
        pthread_t t;
        void *res;

        (void)state;
        assert_int_equal(pthread_create(&t, NULL, zero_bytes_thread, NULL), 0);
        assert_int_equal(pthread_join(t, &res), 0);
        assert_null(res);
}

#define ROUNDS 300

static void *arena_thread(void *arg)
{
        unsigned salt = (unsigned)(uintptr_t)arg;

        for (unsigned r = 0; r < ROUNDS; r++) {
                json_t *o, *copy;
                bool ok;

                tsr_json_arena_begin();
                o = build(200, salt + r);
                copy = json_deep_copy(o);
                ok = o && copy && json_equal(o, copy) && json_object_size(o) == 200;
                json_decref(o);
                json_decref(copy);
                if (!ok || tsr_json_arena_end() != 0)
                        return (void *)1;
        }
        return NULL;
}

static void *plain_thread(void *arg)
{
        (void)arg;
        for (unsigned r = 0; r < ROUNDS; r++) {
                json_t *o = build(100, r);
                bool ok = o && json_object_size(o) == 100;

                json_decref(o);
                if (!ok)
                        return (void *)1;
        }
        return NULL;
}

static void test_arena__threads_keep_their_own(void **state)
{
        pthread_t t[5];
        void *res;

        (void)state;
        for (uintptr_t i = 0; i < 4; i++)
                assert_int_equal(pthread_create(&t[i], NULL, arena_thread, (void *)(i * 1000)), 0);
        assert_int_equal(pthread_create(&t[4], NULL, plain_thread, NULL), 0);
        for (int i = 0; i < 5; i++) {
                assert_int_equal(pthread_join(t[i], &res), 0);
                assert_null(res);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_arena__before_the_install_nothing_changes),
            cmocka_unit_test(test_arena__counts_and_takes_back),
            cmocka_unit_test(test_arena__values_from_outside_are_freed_as_before),
            cmocka_unit_test(test_arena__larger_than_a_block),
            cmocka_unit_test(test_arena__dumped_text_goes_back_through_tsr_json_free),
            cmocka_unit_test(test_arena__a_nested_begin_does_nothing),
            cmocka_unit_test(test_arena__zero_bytes_to_the_end_of_a_block),
            cmocka_unit_test(test_arena__threads_keep_their_own),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
