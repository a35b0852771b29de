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

/* ---- random numbers ------------------------------------------------------- */

START_TEST(rng_deterministic_and_streams_differ)
{
    int i, same_stream = 0, same_seed = 0, same_next = 0;
    for (i = 0; i < 1000; i++) {
        const uint32_t v = rt_rand_u32(42, 3, (uint64_t)i);
        ck_assert_uint_eq(v, rt_rand_u32(42, 3, (uint64_t)i));
        same_stream += v == rt_rand_u32(42, 4, (uint64_t)i);
        same_seed += v == rt_rand_u32(43, 3, (uint64_t)i);
        same_next += v == rt_rand_u32(42, 3, (uint64_t)i + 1);
        ck_assert(rt_rand_uniform(42, 3, (uint64_t)i) ==
                  (float)(v >> 8) / 16777216.0f);
    }
    /* 32-bit values from independent draws agree with probability 2^-32 */
    ck_assert_int_le(same_stream, 1);
    ck_assert_int_le(same_seed, 1);
    ck_assert_int_le(same_next, 1);
    /* seed and stream are not interchangeable */
    ck_assert_uint_ne(rt_rand_u32(1, 2, 0), rt_rand_u32(2, 1, 0));
}
END_TEST

START_TEST(rng_uniform_moments)
{
    enum { N = 100000 };
    static float x[N];
    double s = 0, s2 = 0;
    int i, bits = 0;
    uint32_t or_all = 0, and_all = 0xffffffffu;
    rt_init_uniform(x, N, 0.0f, 1.0f, 9, 1);
    for (i = 0; i < N; i++) {
        ck_assert(x[i] >= 0.0f && x[i] < 1.0f);
        ck_assert(x[i] == rt_rand_uniform(9, 1, (uint64_t)i)); /* regenerable */
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    s /= N;
    /* sd of the mean is 0.289/sqrt(N) = 0.0009; variance should be 1/12 */
    ck_assert_msg(fabs(s - 0.5) < 0.005, "mean %g", s);
    ck_assert_msg(fabs(s2 / N - s * s - 1.0 / 12) < 0.003, "var %g", s2 / N - s * s);
    for (i = 0; i < 1000; i++) { /* every output bit varies */
        const uint32_t v = rt_rand_u32(9, 2, (uint64_t)i);
        or_all |= v, and_all &= v;
    }
    for (i = 0; i < 32; i++)
        bits += (int)((or_all >> i) & 1) - (int)((and_all >> i) & 1);
    ck_assert_int_eq(bits, 32);
    rt_init_uniform(x, 1000, -3.0f, -1.0f, 9, 1);
    for (i = 0; i < 1000; i++)
        ck_assert(x[i] >= -3.0f && x[i] <= -1.0f);
}
END_TEST

START_TEST(rng_normal_moments)
{
    enum { N = 100000 };
    static float x[N], y[10];
    double s = 0, s2 = 0, sd;
    int i, tail = 0;
    rt_init_normal(x, N, 0.0f, 1.0f, 5, 7);
    for (i = 0; i < N; i++) {
        ck_assert(isfinite(x[i]));
        s += x[i];
        s2 += (double)x[i] * x[i];
        tail += fabs(x[i]) > 1.959964;
    }
    s /= N;
    sd = sqrt(s2 / N - s * s);
    ck_assert_msg(fabs(s) < 0.015, "mean %g", s);
    ck_assert_msg(fabs(sd - 1) < 0.015, "std %g", sd);
    /* 5% outside +-1.96 sd: binomial sd 0.0007 */
    ck_assert_msg(fabs(tail / (double)N - 0.05) < 0.004, "tail %g", tail / (double)N);
    /* element i depends on i only: a prefix regenerates the same values */
    rt_init_normal(y, 10, 0.0f, 1.0f, 5, 7);
    ck_assert(memcmp(y, x, sizeof y) == 0);
    rt_init_normal(y, 10, 3.0f, 0.5f, 5, 7);
    for (i = 0; i < 10; i++)
        ck_assert_float_eq_tol(y[i], 3.0f + 0.5f * x[i], 1e-6f);
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

    tc = tcase_create("rng");
    tcase_add_test(tc, rng_deterministic_and_streams_differ);
    tcase_add_test(tc, rng_uniform_moments);
    tcase_add_test(tc, rng_normal_moments);
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
