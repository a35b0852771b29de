/*
 * test_kernels_dropout.c: unit tests of the runtime's Dropout kernels
 * (rt_dropout_*) and of the deterministic random numbers they and the
 * initializers draw (rt_rand_u32, rt_rand_uniform, rt_init_uniform,
 * rt_init_normal, rt_init_int_uniform), with Check.
 *
 * Dropout's mask is checked against the header's rule spelled out here
 * (kept where the element's own uniform draw >= ratio), its backward
 * against central finite differences of the forward (rt_testutil.h) from a
 * random preset gradient. The generator is checked for determinism, for
 * streams and seeds that differ, and against the moments of the uniform
 * and normal distributions (mean, variance, the 5% tail) and binomial
 * bounds on the kept fraction, never against its own code.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- Dropout ------------------------------------------------------------- */

/* The header's mask, spelled out here rather than through the macro. */
static int test_keeps(uint64_t seed, uint64_t step, uint32_t node, int i,
                      float ratio)
{
    const uint64_t stream = (UINT64_C(1) << 63) | (step << 24) | node;
    return rt_rand_uniform(seed, stream, (uint64_t)i) >= ratio;
}

START_TEST(dropout_stream_layout)
{
    ck_assert(RT_DROPOUT_STREAM(0, 0) == UINT64_C(0x8000000000000000));
    ck_assert(RT_DROPOUT_STREAM(3, 5) == UINT64_C(0x8000000003000005));
    ck_assert(RT_DROPOUT_STREAM(1, 0xffffff) == UINT64_C(0x8000000001ffffff));
    /* never an initializer's stream (< 2^32) */
    ck_assert(RT_DROPOUT_STREAM(0, 1) > UINT64_C(0xffffffff));
}
END_TEST

typedef struct {
    float x[48], y[48], dy[48];
    int n;
    float ratio;
    uint64_t seed, step;
    uint32_t node;
} dropout_case;

static double dropout_loss(void *v)
{
    dropout_case *c = v;
    rt_dropout_forward(c->y, c->x, c->n, c->ratio, c->seed, c->step, c->node);
    return dot(c->y, c->dy, c->n);
}

/* _i picks a ratio: 0, 0.1, 0.5, 0.9. */
START_TEST(dropout_forward_mask_backward_agree)
{
    static const float ratios[4] = {0.0f, 0.1f, 0.5f, 0.9f};
    dropout_case c;
    float mask[48], dx[48], pre[48], diff[48];
    char what[64];
    float s;
    int i;
    c.n = 48, c.ratio = ratios[_i], c.seed = 11, c.step = 7, c.node = 3;
    s = 1.0f / (1.0f - c.ratio);
    tseed(700 + _i);
    fill(c.x, c.n, -2, 2);
    fill(c.dy, c.n, -1, 1);
    fill(pre, c.n, -1, 1);
    memcpy(dx, pre, sizeof dx);
    memset(mask, 0x7f, sizeof mask); /* garbage: must be overwritten */
    rt_dropout_forward(c.y, c.x, c.n, c.ratio, c.seed, c.step, c.node);
    rt_dropout_mask(mask, c.n, c.ratio, c.seed, c.step, c.node);
    rt_dropout_backward(dx, c.dy, c.n, c.ratio, c.seed, c.step, c.node);
    for (i = 0; i < c.n; i++) {
        const int keep = test_keeps(c.seed, c.step, c.node, i, c.ratio);
        ck_assert_msg(mask[i] == (keep ? 1.0f : 0.0f), "mask[%d] = %g", i,
                      (double)mask[i]);
        ck_assert_msg(c.y[i] == c.x[i] * mask[i] * s, "y[%d] = %.9g, x %.9g",
                      i, (double)c.y[i], (double)c.x[i]);
        ck_assert_msg(dx[i] == pre[i] + c.dy[i] * mask[i] * s,
                      "dx[%d] = %.9g", i, (double)dx[i]);
        if (c.ratio == 0.0f) {
            ck_assert(c.y[i] == c.x[i]);
            ck_assert(dx[i] == pre[i] + c.dy[i]);
        }
    }
    added(diff, dx, pre, c.n);
    snprintf(what, sizeof what, "dropout ratio %g: dx", (double)c.ratio);
    expect_grad(what, c.x, c.n, diff, dropout_loss, &c);
    /* in place: y may be x (the finite differences left a stale c.y) */
    rt_dropout_forward(c.y, c.x, c.n, c.ratio, c.seed, c.step, c.node);
    memcpy(mask, c.x, sizeof mask);
    rt_dropout_forward(mask, mask, c.n, c.ratio, c.seed, c.step, c.node);
    expect_same("in place", mask, c.y, c.n);
    /* NULL dx: nothing to do, nothing to crash */
    rt_dropout_backward(NULL, c.dy, c.n, c.ratio, c.seed, c.step, c.node);
}
END_TEST

START_TEST(dropout_deterministic_and_keys_differ)
{
    enum { N = 1000 };
    static float m0[N], m1[N], x[N], y0[N], y1[N];
    int i, d_step = 0, d_node = 0, d_seed = 0;
    rt_dropout_mask(m0, N, 0.5f, 1, 2, 3);
    rt_dropout_mask(m1, N, 0.5f, 1, 2, 3);
    expect_same("same key", m1, m0, N);
    tseed(77);
    fill(x, N, -1, 1);
    rt_dropout_forward(y0, x, N, 0.5f, 1, 2, 3);
    rt_dropout_forward(y1, x, N, 0.5f, 1, 2, 3);
    expect_same("same key forward", y1, y0, N);
    /* Independent masks at ratio 0.5 differ in half the places (sd 16). */
    rt_dropout_mask(m1, N, 0.5f, 1, 3, 3);
    for (i = 0; i < N; i++)
        d_step += m0[i] != m1[i];
    rt_dropout_mask(m1, N, 0.5f, 1, 2, 4);
    for (i = 0; i < N; i++)
        d_node += m0[i] != m1[i];
    rt_dropout_mask(m1, N, 0.5f, 2, 2, 3);
    for (i = 0; i < N; i++)
        d_seed += m0[i] != m1[i];
    ck_assert_msg(d_step > 400 && d_step < 600, "step: %d differ", d_step);
    ck_assert_msg(d_node > 400 && d_node < 600, "node: %d differ", d_node);
    ck_assert_msg(d_seed > 400 && d_seed < 600, "seed: %d differ", d_seed);
    /* a prefix is the same mask: element i depends on i alone */
    rt_dropout_mask(m1, 10, 0.5f, 1, 2, 3);
    expect_same("prefix", m1, m0, 10);
}
END_TEST

/* Kept means u >= ratio: with ratio equal to element i's own draw, i stays. */
START_TEST(dropout_threshold_is_inclusive)
{
    const uint64_t stream = RT_DROPOUT_STREAM(9, 2);
    float m[8];
    int i;
    for (i = 0; i < 8; i++) {
        const float u = rt_rand_uniform(4, stream, (uint64_t)i);
        rt_dropout_mask(m, 8, u, 4, 9, 2);
        ck_assert_msg(m[i] == 1.0f, "u[%d] = %.9g == ratio: dropped", i,
                      (double)u);
    }
}
END_TEST

/* The kept fraction is binomial: within 3 sigma of 1 - ratio. */
START_TEST(dropout_kept_fraction)
{
    enum { N = 100000 };
    static float m[N];
    static const float ratios[3] = {0.1f, 0.5f, 0.9f};
    int r, i;
    for (r = 0; r < 3; r++) {
        const double p = 1.0 - ratios[r], sigma = sqrt(p * (1 - p) / N);
        double kept = 0;
        rt_dropout_mask(m, N, ratios[r], 5, 100, (uint32_t)r);
        for (i = 0; i < N; i++)
            kept += m[i];
        kept /= N;
        ck_assert_msg(fabs(kept - p) <= 3 * sigma,
                      "ratio %g: kept %.5f, want %.5f +- %.5f",
                      (double)ratios[r], kept, p, 3 * sigma);
    }
}
END_TEST

/* ---- random numbers ------------------------------------------------------ */

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

/* Draws 1000 values of a tensor [lo, hi) at offset 3 of a buffer of 1006
 * and checks them against [want_lo, want_hi), every value of it seen;
 * the elements around the tensor stay untouched. */
static void check_int_draws(int64_t lo, int64_t hi, int has_ignore,
                            int64_t want_lo, int64_t want_hi)
{
    enum { N = 1000, AT = 3 };
    static int64_t buf[N + 6], again[N + 6];
    rt_tensor_info t;
    int64_t v;
    int j, seen = 0;
    memset(&t, 0, sizeof t);
    t.offset = AT, t.count = N, t.lo = lo, t.hi = hi;
    t.has_ignore = has_ignore, t.ignore = -100;
    for (j = 0; j < N + 6; j++)
        buf[j] = again[j] = 77;
    rt_init_int_uniform(&t, buf, 4, 2000);
    rt_init_int_uniform(&t, again, 4, 2000);
    ck_assert(memcmp(buf, again, sizeof buf) == 0);
    ck_assert(buf[AT - 1] == 77 && buf[AT + N] == 77);
    for (j = AT; j < AT + N; j++)
        ck_assert_msg(buf[j] >= want_lo && buf[j] < want_hi, "%lld",
                      (long long)buf[j]);
    for (v = want_lo; v < want_hi; v++)
        for (j = AT; j < AT + N; j++)
            if (buf[j] == v) {
                seen++;
                break;
            }
    ck_assert_int_eq(seen, (int)(want_hi - want_lo));
}

START_TEST(rng_int_uniform_ranges)
{
    check_int_draws(0, 10, 1, 0, 10);     /* labels: never the ignore index */
    check_int_draws(-7, 7, 0, 0, 7);      /* Gather rows: never a negative alias */
    check_int_draws(3, 9, 0, 3, 9);
    check_int_draws(-9, -4, 0, -9, -4);   /* nothing non-negative accepted */
    check_int_draws(INT64_MIN, INT64_MAX, 0, 0, 2);   /* read whole: a mask */
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *dropout_suite(void)
{
    Suite *s = suite_create("remat_rt dropout");
    TCase *tc;

    tc = tcase_create("dropout");
    tcase_add_test(tc, dropout_stream_layout);
    tcase_add_loop_test(tc, dropout_forward_mask_backward_agree, 0, 4);
    tcase_add_test(tc, dropout_deterministic_and_keys_differ);
    tcase_add_test(tc, dropout_threshold_is_inclusive);
    tcase_add_test(tc, dropout_kept_fraction);
    suite_add_tcase(s, tc);

    tc = tcase_create("rng");
    tcase_add_test(tc, rng_deterministic_and_streams_differ);
    tcase_add_test(tc, rng_uniform_moments);
    tcase_add_test(tc, rng_normal_moments);
    tcase_add_test(tc, rng_int_uniform_ranges);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(dropout_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
