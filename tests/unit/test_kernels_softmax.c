/*
 * test_kernels_softmax.c: unit tests of the runtime's softmax kernels,
 * Softmax and LogSoftmax over one axis (rt_softmax_*, rt_log_softmax_*),
 * with Check.
 *
 * Every backward is checked against central finite differences of its
 * forward (rt_testutil.h), from a random preset gradient so that `+=` is
 * tested too, and called with NULL gradients. Every forward is checked
 * against hand-worked numbers or a formula in double written here (libm's
 * exp and log over each lane, by plain index arithmetic), never against
 * the kernels themselves.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- softmax ------------------------------------------------------------- */

typedef struct {
    int outer, dim, inner;
} sm_layout;

/* Last axis of a matrix, a middle axis, a first axis, and dim 1 (y = 1). */
static const sm_layout sm_layouts[] = {
    {1, 7, 1}, {3, 5, 1}, {2, 4, 3}, {1, 6, 5}, {2, 3, 4}, {4, 1, 2},
};
#define N_SM ((int)(sizeof sm_layouts / sizeof sm_layouts[0]))

typedef struct {
    sm_layout l;
    int n;
    float x[32], y[32], dy[32];
} sm_case;

static double sm_loss(void *v)
{
    sm_case *c = v;
    rt_softmax_forward(c->y, c->x, c->l.outer, c->l.dim, c->l.inner);
    return dot(c->y, c->dy, c->n);
}

/* exp(x)/sum exp(x) over each lane, in double, by plain index arithmetic
 * (no max subtracted: the inputs here are small). */
static void sm_expect(const sm_case *c, double *want)
{
    int o, d, i;
    for (o = 0; o < c->l.outer; o++)
        for (i = 0; i < c->l.inner; i++) {
            double s = 0;
            for (d = 0; d < c->l.dim; d++)
                s += exp(c->x[(o * c->l.dim + d) * c->l.inner + i]);
            for (d = 0; d < c->l.dim; d++) {
                const int e = (o * c->l.dim + d) * c->l.inner + i;
                want[e] = exp(c->x[e]) / s;
            }
        }
}

static void sm_setup(sm_case *c, int layout, uint64_t seed)
{
    c->l = sm_layouts[layout];
    c->n = c->l.outer * c->l.dim * c->l.inner;
    ck_assert_int_le(c->n, 32);
    tseed(seed);
    fill(c->x, c->n, -2, 2);
    fill(c->dy, c->n, -1, 1);
}

START_TEST(softmax_grad)
{
    sm_case c;
    float dx[32], px[32], diff[32];
    char what[64];
    sm_setup(&c, _i, 1100 + _i);
    fill(px, c.n, -1, 1);
    memcpy(dx, px, sizeof dx);
    sm_loss(&c);
    rt_softmax_backward(dx, c.dy, c.y, c.l.outer, c.l.dim, c.l.inner);
    added(diff, dx, px, c.n);
    snprintf(what, sizeof what, "softmax (%d,%d,%d) dx", c.l.outer, c.l.dim,
             c.l.inner);
    expect_grad(what, c.x, c.n, diff, sm_loss, &c);
    rt_softmax_backward(NULL, c.dy, c.y, c.l.outer, c.l.dim, c.l.inner);
}
END_TEST

START_TEST(softmax_forward_matches_formula)
{
    sm_case c;
    double want[32];
    int o, d, i;
    sm_setup(&c, _i, 1200 + _i);
    memset(c.y, 0x7f, sizeof c.y); /* garbage: forward must overwrite */
    sm_loss(&c);
    sm_expect(&c, want);
    expect_near("softmax", c.y, want, c.n, 1e-6, 1e-7);
    for (o = 0; o < c.l.outer; o++) /* every lane sums to 1 */
        for (i = 0; i < c.l.inner; i++) {
            double s = 0;
            for (d = 0; d < c.l.dim; d++)
                s += c.y[(o * c.l.dim + d) * c.l.inner + i];
            ck_assert_msg(fabs(s - 1) < 1e-6, "lane (%d, %d) sums to %.9g", o,
                          i, s);
        }
}
END_TEST

/* Without the max subtracted, exp(1000) overflows to inf and inf/inf is NaN,
 * and exp(-1000) underflows to 0 and 0/0 is NaN. Lanes (dim 4, inner 1),
 * the max first, in the middle and last:
 * {1000, 1000, 1000, 1000} -> 1/4 each;
 * {0, 999, 1000, -1000} -> {0, 1/(1+e), e/(1+e), 0};
 * {-1000, -1000, -1000, -999} -> {1/(3+e) x 3, e/(3+e)}. */
START_TEST(softmax_large_inputs_stay_finite)
{
    const float x[12] = {1000, 1000, 1000, 1000, 0, 999, 1000, -1000,
                         -1000, -1000, -1000, -999};
    const double want[12] = {0.25, 0.25, 0.25, 0.25, 0, 0.2689414214,
                             0.7310585786, 0, 0.1748777045, 0.1748777045,
                             0.1748777045, 0.4753668864};
    float y[12], dy[12], dx[12] = {0};
    int i;
    rt_softmax_forward(y, x, 3, 4, 1);
    expect_near("softmax", y, want, 12, 1e-6, 1e-30);
    for (i = 0; i < 12; i++)
        dy[i] = (float)(i % 3) - 1.0f;
    rt_softmax_backward(dx, dy, y, 3, 4, 1);
    for (i = 0; i < 12; i++)
        ck_assert_msg(isfinite(dx[i]), "dx[%d] = %g", i, (double)dx[i]);
    /* the same lanes along a middle axis (inner 3, outer 1) */
    {
        float xt[12], yt[12];
        double wt[12];
        int l, d;
        for (l = 0; l < 3; l++)
            for (d = 0; d < 4; d++) {
                xt[d * 3 + l] = x[l * 4 + d];
                wt[d * 3 + l] = want[l * 4 + d];
            }
        rt_softmax_forward(yt, xt, 1, 4, 3);
        expect_near("softmax inner 3", yt, wt, 12, 1e-6, 1e-30);
    }
}
END_TEST

/* y = {0.5, 0.5}, dy = {1, 0}: s = 0.5, dx += y (dy - s) = {0.25, -0.25}
 * on a preset {1, 1}. */
START_TEST(softmax_backward_by_hand)
{
    const float y[2] = {0.5f, 0.5f}, dy[2] = {1, 0};
    const double want[2] = {1.25, 0.75};
    float dx[2] = {1, 1};
    rt_softmax_backward(dx, dy, y, 1, 2, 1);
    expect_near("dx", dx, want, 2, 0, 0);
}
END_TEST

/* ---- LogSoftmax ---------------------------------------------------------- */

typedef struct {
    int outer, dim, inner;
} lanes;

static const lanes lane_layouts[] = {
    {1, 7, 1}, {3, 5, 1}, {2, 4, 3}, {1, 6, 5}, {4, 1, 2},
};
#define N_LS ((int)(sizeof lane_layouts / sizeof lane_layouts[0]))

typedef struct {
    lanes l;
    int n;
    float x[32], y[32], dy[32];
} ls_case;

static double ls_loss(void *v)
{
    ls_case *c = v;
    rt_log_softmax_forward(c->y, c->x, c->l.outer, c->l.dim, c->l.inner);
    return dot(c->y, c->dy, (size_t)c->n);
}

static void ls_setup(ls_case *c, int k, uint64_t seed)
{
    c->l = lane_layouts[k];
    c->n = c->l.outer * c->l.dim * c->l.inner;
    ck_assert_int_le(c->n, 32);
    tseed(seed);
    fill(c->x, (size_t)c->n, -2, 2);
    fill(c->dy, (size_t)c->n, -1, 1);
}

START_TEST(log_softmax_grad)
{
    ls_case c;
    float dx[32], px[32], diff[32];
    ls_setup(&c, _i, 7500 + _i);
    fill(px, (size_t)c.n, -1, 1);
    memcpy(dx, px, sizeof dx);
    rt_log_softmax_forward(c.y, c.x, c.l.outer, c.l.dim, c.l.inner);
    rt_log_softmax_backward(dx, c.dy, c.y, c.l.outer, c.l.dim, c.l.inner);
    added(diff, dx, px, (size_t)c.n);
    expect_grad("log_softmax", c.x, (size_t)c.n, diff, ls_loss, &c);
    rt_log_softmax_backward(NULL, c.dy, c.y, c.l.outer, c.l.dim, c.l.inner);
}
END_TEST

/* x - log(sum over the lane of exp(x)) in double, by index arithmetic. */
START_TEST(log_softmax_forward_matches_formula)
{
    ls_case c;
    double want[32];
    int o, d, i;
    ls_setup(&c, _i, 7600 + _i);
    rt_log_softmax_forward(c.y, c.x, c.l.outer, c.l.dim, c.l.inner);
    for (o = 0; o < c.l.outer; o++)
        for (i = 0; i < c.l.inner; i++) {
            double s = 0;
            for (d = 0; d < c.l.dim; d++)
                s += exp(c.x[(o * c.l.dim + d) * c.l.inner + i]);
            for (d = 0; d < c.l.dim; d++) {
                const int e = (o * c.l.dim + d) * c.l.inner + i;
                want[e] = c.x[e] - log(s);
            }
        }
    expect_near("log_softmax", c.y, want, (size_t)c.n, 1e-6, 1e-6);
}
END_TEST

/* {1, 1}: -ln 2 each; {0, 1}: -ln(1 + e) and 1 - ln(1 + e); large inputs
 * stay finite; a -inf (a masked score) gives -inf there and leaves the rest
 * a log-softmax of the others, with a finite backward. Backward by hand:
 * y = {-ln 2, -ln 2}, dy = {1, 3}: dx = dy - 0.5 * 4 = {-1, 1} on preset 0. */
START_TEST(log_softmax_by_hand)
{
    const float x1[2] = {1, 1}, x2[2] = {0, 1}, big[3] = {1000, 999, -1000};
    const float masked[3] = {0, -HUGE_VALF, 0};
    const double w1[2] = {-0.6931471806, -0.6931471806},
                 w2[2] = {-1.3132616875, -0.3132616875},
                 wbig[3] = {-0.3132616875, -1.3132616875, -2000.3132616875},
                 wm[2] = {-0.6931471806, -0.6931471806}, wdx[2] = {-1, 1};
    const float dy[3] = {1, 3, 2};
    float y[3], dx[3], two[2];
    rt_log_softmax_forward(y, x1, 1, 2, 1);
    expect_near("{1,1}", y, w1, 2, 1e-6, 0);
    rt_log_softmax_forward(y, x2, 1, 2, 1);
    expect_near("{0,1}", y, w2, 2, 1e-6, 0);
    rt_log_softmax_forward(y, big, 1, 3, 1);
    expect_near("large", y, wbig, 3, 1e-6, 0);
    rt_log_softmax_forward(y, masked, 1, 3, 1);
    ck_assert(isinf(y[1]) && y[1] < 0);
    two[0] = y[0], two[1] = y[2];
    expect_near("masked", two, wm, 2, 1e-6, 0);
    rt_zero(dx, 3);
    rt_log_softmax_backward(dx, dy, y, 1, 3, 1);
    ck_assert(isfinite(dx[0]) && isfinite(dx[1]) && isfinite(dx[2]));
    ck_assert_float_eq(dx[1], 3.0f); /* exp(-inf) = 0: dx = dy */
    rt_log_softmax_forward(y, x1, 1, 2, 1);
    rt_zero(dx, 2);
    rt_log_softmax_backward(dx, dy, y, 1, 2, 1);
    expect_near("backward", dx, wdx, 2, 1e-6, 1e-6);
}
END_TEST

/* ---- long lanes (issue 25) ----------------------------------------------- */

/* One lane of 2^18 scores in [-4, 0]: every y is exp(x - max) / sum, so the
 * sum's relative error is every y's. A float loop adding 2^18 terms drifts
 * by ~1e-5 relative; the rt_sum stays within a few ulps of float64. The
 * same for LogSoftmax (y = (x - max) - log(sum)) and for the backward's
 * sums (dot(dy, y), sum(dy)). */
START_TEST(softmax_long_lane_matches_double)
{
    const int n = 1 << 18;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    float *ly = malloc((size_t)n * sizeof *ly), *dy = malloc((size_t)n * sizeof *dy);
    float *ldx = malloc((size_t)n * sizeof *ldx);
    double mx = -1e30, sum = 0, sum_dy = 0, worst = 0, worst_log = 0;
    double worst_back = 0;
    int i;
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(ly);
    ck_assert_ptr_nonnull(dy);
    ck_assert_ptr_nonnull(ldx);
    tseed(3);
    for (i = 0; i < n; i++) {
        x[i] = trand(-4.0f, 0.0f);
        dy[i] = trand(0.5f, 1.5f);
        ldx[i] = 0.0f;
        if (x[i] > mx)
            mx = x[i];
        sum_dy += dy[i];
    }
    for (i = 0; i < n; i++)
        sum += exp((double)x[i] - mx);
    rt_softmax_forward(y, x, 1, n, 1);
    rt_log_softmax_forward(ly, x, 1, n, 1);
    rt_log_softmax_backward(ldx, dy, ly, 1, n, 1);
    for (i = 0; i < n; i++) {
        const double p = exp((double)x[i] - mx) / sum;
        const double e = fabs(y[i] - p) / p;
        const double el = fabs(ly[i] - (((double)x[i] - mx) - log(sum)));
        /* dx = dy - softmax * sum(dy); softmax * sum(dy) ~ 4 */
        const double eb = fabs(ldx[i] - (dy[i] - p * sum_dy));
        if (e > worst)
            worst = e;
        if (el > worst_log)
            worst_log = el;
        if (eb > worst_back)
            worst_back = eb;
    }
    ck_assert_msg(worst <= 6e-7, "softmax off by %.3g relative", worst);
    ck_assert_msg(worst_log <= 1e-6, "log softmax off by %.3g", worst_log);
    ck_assert_msg(worst_back <= 8e-6, "log softmax backward off by %.3g",
                  worst_back);
    free(x);
    free(y);
    free(ly);
    free(dy);
    free(ldx);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *softmax_suite(void)
{
    Suite *s = suite_create("remat_rt softmax");
    TCase *tc;

    tc = tcase_create("softmax");
    tcase_add_loop_test(tc, softmax_grad, 0, N_SM);
    tcase_add_loop_test(tc, softmax_forward_matches_formula, 0, N_SM);
    tcase_add_test(tc, softmax_large_inputs_stay_finite);
    tcase_add_test(tc, softmax_backward_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("log_softmax");
    tcase_add_loop_test(tc, log_softmax_grad, 0, N_LS);
    tcase_add_loop_test(tc, log_softmax_forward_matches_formula, 0, N_LS);
    tcase_add_test(tc, log_softmax_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("sums");
    tcase_add_test(tc, softmax_long_lane_matches_double);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(softmax_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
