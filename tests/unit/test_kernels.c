/*
 * test_kernels.c: unit tests of the runtime (runtime/remat_rt.c), with Check.
 *
 *   gcc -std=c99 -Wall -Wextra -O2 -Iruntime tests/unit/test_kernels.c \
 *       runtime/remat_rt.c $(pkg-config --cflags --libs check) -lopenblas -lm \
 *       -o build/test_kernels
 *
 * Gradients are checked against central finite differences of the forward
 * kernels (rt_testutil.h), with loss L = sum(dy * y) for a random upstream
 * gradient dy. Every gradient buffer starts from random values, and the
 * check is on (after - before), so accumulation is tested everywhere.
 * Forward values are checked against hand-worked numbers or plain double
 * formulas written here, not against the kernels themselves.
 */
#define _POSIX_C_SOURCE 200809L /* getpid */

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remat_rt.h"
#include "rt_testutil.h"

#define PY "/usr/bin/python3"

/* ---- helpers (the rest are in rt_testutil.h) ---------------------------- */


/* ---- memory, optimizer ---------------------------------------------------- */

START_TEST(memory_and_sgd)
{
    float x[5] = {1, 2, 3, 4, 5}, g[5] = {1, -1, 2, -2, 0}, z[5];
    rt_sgd(x, g, 5, 0.5f);
    ck_assert_float_eq(x[0], 0.5f);
    ck_assert_float_eq(x[1], 2.5f);
    ck_assert_float_eq(x[3], 5.0f);
    ck_assert_float_eq(x[4], 5.0f);
    rt_copy(z, x, 5);
    ck_assert(memcmp(z, x, sizeof z) == 0);
    rt_fill(z, 4, 7.0f);
    ck_assert_float_eq(z[3], 7.0f);
    ck_assert_float_eq(z[4], 5.0f); /* past n: untouched */
    rt_zero(z, 4);
    ck_assert_float_eq(z[0], 0.0f);
    ck_assert_float_eq(z[3], 0.0f);
    ck_assert_float_eq(z[4], 5.0f);
}
END_TEST

/* ---- suite ---------------------------------------------------------------- */

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("remat_rt");
    TCase *tc;

    tc = tcase_create("memory");
    tcase_add_test(tc, memory_and_sgd);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(kernels_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
