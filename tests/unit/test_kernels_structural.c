/*
 * test_kernels_structural.c: unit tests of the runtime's structural kernels
 * (the "structural ops" section of remat_rt.h: Concat, Split, Slice), with
 * Check. The Makefile builds it twice, with BLAS and with -DRT_NO_BLAS.
 *
 * Forwards are checked against numbers worked out by hand; backwards
 * against central finite differences of the forward (rt_testutil.h), from a
 * random preset gradient so that `+=` is tested, and with NULL gradients.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

static void expect_floats(const char *what, const float *got,
                          const float *want, int n)
{
    int i;
    for (i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%d]: got %g, want %g", what, i,
                      (double)got[i], (double)want[i]);
}

/* ---- Concat ---------------------------------------------------------------- */

/* (2, 2) and (2, 1) along axis 1: widths 2 and 1, 2 rows. */
START_TEST(concat_forward_by_hand)
{
    const float a[] = {1, 2, 3, 4}, b[] = {5, 6};
    const float *xs[2];
    const int widths[] = {2, 1};
    const float want[] = {1, 2, 5, 3, 4, 6};
    float y[6];
    xs[0] = a;
    xs[1] = b;
    memset(y, 0xff, sizeof y);      /* NaNs: every element must be written */
    rt_concat_forward(y, xs, 2, widths, 2);
    expect_floats("y", y, want, 6);
}
END_TEST

/* Axis 0 (one row): the inputs one after another, three of them. */
START_TEST(concat_axis0_three_inputs)
{
    const float a[] = {1, 2}, b[] = {3}, c[] = {4, 5, 6};
    const float *xs[3];
    const int widths[] = {2, 1, 3};
    const float want[] = {1, 2, 3, 4, 5, 6};
    float y[6];
    xs[0] = a;
    xs[1] = b;
    xs[2] = c;
    rt_concat_forward(y, xs, 3, widths, 1);
    expect_floats("y", y, want, 6);
}
END_TEST

/* Three inputs, shapes (3, a_i, 2) along axis 1: widths 2*a_i, 3 rows. */
enum { CC_N = 3, CC_OUTER = 3 };
static const int cc_widths[CC_N] = {2, 6, 4};
typedef struct {
    float x[CC_N][CC_OUTER * 6];
    float y[CC_OUTER * 12], dy[CC_OUTER * 12];
} cc_case;

static double cc_loss(void *v)
{
    cc_case *c = v;
    const float *xs[CC_N];
    int i;
    for (i = 0; i < CC_N; i++)
        xs[i] = c->x[i];
    rt_concat_forward(c->y, xs, CC_N, cc_widths, CC_OUTER);
    return dot(c->y, c->dy, CC_OUTER * 12);
}

/* Input 1's gradient left NULL: skipped, the others still accumulate. */
START_TEST(concat_grad)
{
    cc_case c;
    float dx[CC_N][CC_OUTER * 6], pre[CC_N][CC_OUTER * 6];
    float diff[CC_OUTER * 6];
    float *dxs[CC_N];
    int i;
    tseed(41);
    for (i = 0; i < CC_N; i++) {
        fill(c.x[i], CC_OUTER * 6, -1, 1);
        fill(pre[i], CC_OUTER * 6, -1, 1);
        memcpy(dx[i], pre[i], sizeof dx[i]);
        dxs[i] = i == 1 ? NULL : dx[i];
    }
    fill(c.dy, CC_OUTER * 12, -1, 1);
    rt_concat_backward(dxs, c.dy, CC_N, cc_widths, CC_OUTER);
    for (i = 0; i < CC_N; i += 2) {
        size_t n = (size_t)CC_OUTER * cc_widths[i];
        added(diff, dx[i], pre[i], n);
        expect_grad(i ? "dx2" : "dx0", c.x[i], n, diff, cc_loss, &c);
    }
    expect_floats("untouched dx1", dx[1], pre[1], CC_OUTER * 6);
}
END_TEST

/* ---- Split ----------------------------------------------------------------- */

/* The inverse of concat_forward_by_hand. */
START_TEST(split_forward_by_hand)
{
    const float x[] = {1, 2, 5, 3, 4, 6};
    const int widths[] = {2, 1};
    const float want_a[] = {1, 2, 3, 4}, want_b[] = {5, 6};
    float a[4], b[2];
    float *ys[2];
    ys[0] = a;
    ys[1] = b;
    rt_split_forward(ys, x, 2, widths, 2);
    expect_floats("a", a, want_a, 4);
    expect_floats("b", b, want_b, 2);
}
END_TEST

typedef struct {
    float x[CC_OUTER * 12];
    float y[CC_N][CC_OUTER * 6], dy[CC_N][CC_OUTER * 6];
    int skip;               /* the output without a gradient */
} sp_case;

/* L = sum over the outputs with a gradient of dot(dy_i, y_i). */
static double sp_loss(void *v)
{
    sp_case *c = v;
    float *ys[CC_N];
    double l = 0;
    int i;
    for (i = 0; i < CC_N; i++)
        ys[i] = c->y[i];
    rt_split_forward(ys, c->x, CC_N, cc_widths, CC_OUTER);
    for (i = 0; i < CC_N; i++)
        if (i != c->skip)
            l += dot(c->y[i], c->dy[i], (size_t)CC_OUTER * cc_widths[i]);
    return l;
}

/* A NULL d(output) counts as zero; NULL dx is a no-op. */
START_TEST(split_grad)
{
    sp_case c;
    float dx[CC_OUTER * 12], pre[CC_OUTER * 12], diff[CC_OUTER * 12];
    const float *dys[CC_N];
    int i;
    tseed(42 + _i);
    c.skip = _i;            /* 0..2: each output in turn, 3: none */
    fill(c.x, CC_OUTER * 12, -1, 1);
    for (i = 0; i < CC_N; i++) {
        fill(c.dy[i], CC_OUTER * 6, -1, 1);
        dys[i] = i == c.skip ? NULL : c.dy[i];
    }
    fill(pre, CC_OUTER * 12, -1, 1);
    memcpy(dx, pre, sizeof dx);
    rt_split_backward(dx, dys, CC_N, cc_widths, CC_OUTER);
    added(diff, dx, pre, CC_OUTER * 12);
    expect_grad("dx", c.x, CC_OUTER * 12, diff, sp_loss, &c);
    rt_split_backward(NULL, dys, CC_N, cc_widths, CC_OUTER);
}
END_TEST

/* Split's backward adds the douts into dx at the places Concat puts them. */
START_TEST(split_backward_by_hand)
{
    const float da[] = {1, 2, 3, 4};
    const int widths[] = {2, 1};
    const float *dys[2];
    float dx[6] = {10, 10, 10, 10, 10, 10};
    const float want[] = {11, 12, 10, 13, 14, 10};
    dys[0] = da;
    dys[1] = NULL;
    rt_split_backward(dx, dys, 2, widths, 2);
    expect_floats("dx", dx, want, 6);
}
END_TEST

/* ---- Slice ----------------------------------------------------------------- */

/* x (3, 4) holds 0..11. */
START_TEST(slice_forward_by_hand)
{
    float x[12], y[4];
    const int xdims[] = {3, 4}, ydims[] = {2, 2};
    /* rows 0 and 2, columns 1 and 3 (steps 2) */
    const int starts_a[] = {0, 1}, steps_a[] = {2, 2};
    const float want_a[] = {1, 3, 9, 11};
    /* backwards from (2, 3): rows 2, 1; columns 3, 1 */
    const int starts_b[] = {2, 3}, steps_b[] = {-1, -2};
    const float want_b[] = {11, 9, 7, 5};
    int i;
    for (i = 0; i < 12; i++)
        x[i] = (float)i;
    rt_slice_forward(y, x, 2, xdims, ydims, starts_a, steps_a);
    expect_floats("y (steps 2 2)", y, want_a, 4);
    rt_slice_forward(y, x, 2, xdims, ydims, starts_b, steps_b);
    expect_floats("y (steps -1 -2)", y, want_b, 4);
}
END_TEST

/* The backward adds dy where the forward read and leaves the rest. */
START_TEST(slice_backward_by_hand)
{
    float dx[12];
    const float dy[] = {1, 2, 3, 4};
    const int xdims[] = {3, 4}, ydims[] = {2, 2};
    const int starts[] = {2, 3}, steps[] = {-1, -2};
    /* dy[0] -> x[2,3] = 11, dy[1] -> x[2,1] = 9, dy[2] -> 7, dy[3] -> 5 */
    const float want[] = {1, 1, 1, 1, 1, 5, 1, 4, 1, 3, 1, 2};
    int i;
    for (i = 0; i < 12; i++)
        dx[i] = 1;
    rt_slice_backward(dx, dy, 2, xdims, ydims, starts, steps);
    expect_floats("dx", dx, want, 12);
    rt_slice_backward(NULL, dy, 2, xdims, ydims, starts, steps);
}
END_TEST

/* x (4, 5, 6) sliced to (2, 3, 2) three ways: inner steps +1/-1/+3. */
typedef struct {
    float x[120], y[12], dy[12];
    int starts[3], steps[3];
} sl_case;
static const int sl_xdims[3] = {4, 5, 6}, sl_ydims[3] = {2, 3, 2};

static double sl_loss(void *v)
{
    sl_case *c = v;
    rt_slice_forward(c->y, c->x, 3, sl_xdims, sl_ydims, c->starts, c->steps);
    return dot(c->y, c->dy, 12);
}

START_TEST(slice_grad)
{
    static const int starts[3][3] = {{1, 0, 2}, {3, 4, 5}, {0, 0, 0}};
    static const int steps[3][3] = {{2, 1, 1}, {-1, -2, -1}, {3, 2, 3}};
    sl_case c;
    float dx[120], pre[120], diff[120];
    tseed(60 + _i);
    memcpy(c.starts, starts[_i], sizeof c.starts);
    memcpy(c.steps, steps[_i], sizeof c.steps);
    fill(c.x, 120, -1, 1);
    fill(c.dy, 12, -1, 1);
    fill(pre, 120, -1, 1);
    memcpy(dx, pre, sizeof dx);
    rt_slice_backward(dx, c.dy, 3, sl_xdims, sl_ydims, c.starts, c.steps);
    added(diff, dx, pre, 120);
    expect_grad("dx", c.x, 120, diff, sl_loss, &c);
}
END_TEST

START_TEST(slice_rank0_copies_one)
{
    const float x = 2.5f;
    float y = 0, dx = 1;
    rt_slice_forward(&y, &x, 0, NULL, NULL, NULL, NULL);
    ck_assert(y == 2.5f);
    rt_slice_backward(&dx, &x, 0, NULL, NULL, NULL, NULL);
    ck_assert(dx == 3.5f);
}
END_TEST

static Suite *structural_suite(void)
{
    Suite *s = suite_create("kernels_structural");
    TCase *tc = tcase_create("concat");
    tcase_add_test(tc, concat_forward_by_hand);
    tcase_add_test(tc, concat_axis0_three_inputs);
    tcase_add_test(tc, concat_grad);
    suite_add_tcase(s, tc);

    tc = tcase_create("split");
    tcase_add_test(tc, split_forward_by_hand);
    tcase_add_loop_test(tc, split_grad, 0, CC_N + 1);
    tcase_add_test(tc, split_backward_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("slice");
    tcase_add_test(tc, slice_forward_by_hand);
    tcase_add_test(tc, slice_backward_by_hand);
    tcase_add_loop_test(tc, slice_grad, 0, 3);
    tcase_add_test(tc, slice_rank0_copies_one);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(structural_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
