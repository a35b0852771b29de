/*
 * test_kernels_resize.c: unit tests of the runtime's Resize
 * (rt_resize_forward, rt_resize_backward), with Check.
 *
 * The tables a kernel reads are written here by hand, as the compiler
 * would for the case named: the forward is checked against values worked
 * by hand (linear half_pixel 2 -> 4, bilinear align_corners, nearest), the
 * backward against central finite differences of the forward and against
 * the adjoint identity <y, dy> = <x, dx> (rt_testutil.h), from preset
 * gradients so that `+=` is tested.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* 1-D linear, half_pixel, 2 -> 4: source coordinates -0.25, 0.25, 0.75,
 * 1.25; the ends clamp onto the edge elements. */
static const int lin_idx[8] = {0, 0, 0, 1, 0, 1, 1, 1};
static const float lin_wt[8] = {0.25f, 0.75f, 0.75f, 0.25f,
                                0.25f, 0.75f, 0.75f, 0.25f};
/* align_corners, 3 -> 5: source 0, 0.5, 1, 1.5, 2 */
static const int ac_idx[10] = {0, 1, 0, 1, 1, 2, 1, 2, 2, 2};
static const float ac_wt[10] = {1, 0, 0.5f, 0.5f, 1, 0, 0.5f, 0.5f, 1, 0};
/* nearest, asymmetric + floor, 3 -> 7 (scale 7/3): floor(j * 3 / 7) */
static const int near_idx[7] = {0, 0, 0, 1, 1, 2, 2};
/* four taps per output (a cubic's table; any weights do for the adjoint) */
static const int cub_idx[8] = {0, 0, 1, 2, 0, 1, 2, 2};
static const float cub_wt[8] = {-0.1f, 0.6f, 0.6f, -0.1f,
                                -0.05f, 0.3f, 0.8f, -0.05f};
/* nearest, downsampling 5 -> 2, half_pixel + round_prefer_ceil:
 * (j + 0.5) * 2.5 - 0.5 = 0.75, 3.25 -> 1, 3 */
static const int down_idx[2] = {1, 3};

START_TEST(resize_by_hand)
{
    const float x[2] = {1, 5};
    const float want[4] = {1, 2, 4, 5};
    rt_resize p;
    float y[4];
    memset(&p, 0, sizeof p);
    p.rank = 1, p.in[0] = 2, p.out[0] = 4, p.idx[0] = lin_idx;
    p.wt[0] = lin_wt, p.taps[0] = 2;
    rt_resize_forward(y, x, &p);
    expect_same("linear 2 -> 4", y, want, 4);
}
END_TEST

START_TEST(resize_bilinear_by_hand)
{
    /* (1, 1, 3, 3) x = 0..8 to 5x5, align_corners: bilinear of a linear
     * function is exact: y[i][j] = 3 * i / 2 + j / 2 */
    rt_resize p;
    float x[9], y[25];
    double want[25];
    int i;
    memset(&p, 0, sizeof p);
    p.rank = 4;
    p.in[0] = p.in[1] = p.out[0] = p.out[1] = 1;
    p.in[2] = p.in[3] = 3, p.out[2] = p.out[3] = 5;
    p.idx[2] = p.idx[3] = ac_idx, p.wt[2] = p.wt[3] = ac_wt;
    p.taps[2] = p.taps[3] = 2;
    for (i = 0; i < 9; i++)
        x[i] = (float)i;
    for (i = 0; i < 25; i++)
        want[i] = 1.5 * (i / 5) + 0.5 * (i % 5);
    rt_resize_forward(y, x, &p);
    expect_near("bilinear align_corners", y, want, 25, 0, 1e-6);
}
END_TEST

START_TEST(resize_nearest_by_hand)
{
    /* (2, 3) -> (2, 7) along the last axis, then (2, 5) -> (2, 2) */
    const float x[6] = {1, 2, 3, 4, 5, 6};
    const float want[14] = {1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 5, 5, 6, 6};
    const float x5[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const float want2[4] = {1, 3, 6, 8};
    rt_resize p;
    float y[14];
    memset(&p, 0, sizeof p);
    p.rank = 2, p.in[0] = p.out[0] = 2, p.in[1] = 3, p.out[1] = 7;
    p.idx[1] = near_idx, p.taps[1] = 1;
    rt_resize_forward(y, x, &p);
    expect_same("nearest 3 -> 7", y, want, 14);
    p.in[1] = 5, p.out[1] = 2, p.idx[1] = down_idx;
    rt_resize_forward(y, x5, &p);
    expect_same("nearest 5 -> 2", y, want2, 4);
}
END_TEST

typedef struct {
    const rt_resize *p;
    float *x, *y, *dy;
    int nx, ny;
} resize_case;

static double resize_loss(void *v)
{
    resize_case *c = v;
    rt_resize_forward(c->y, c->x, c->p);
    return dot(c->y, c->dy, c->ny);
}

/* The gradient of each table case: (2, 2, 2, 3) -> (2, 2, 4, 5) with
 * linear 2 -> 4 and align_corners 3 -> 5; (2, 3) -> (2, 7) nearest; a
 * 3-D trilinear (1, 1, 2, 3, 2) -> (1, 1, 4, 5, 4); four taps (2, 3) ->
 * (2, 2). */
START_TEST(resize_grad)
{
    rt_resize p;
    resize_case c;
    float *dx, *px, *diff;
    double lhs, rhs;
    int a;
    memset(&p, 0, sizeof p);
    if (_i == 0) {
        p.rank = 4;
        p.in[0] = p.out[0] = 2, p.in[1] = p.out[1] = 2;
        p.in[2] = 2, p.out[2] = 4, p.idx[2] = lin_idx, p.wt[2] = lin_wt;
        p.taps[2] = 2;
        p.in[3] = 3, p.out[3] = 5, p.idx[3] = ac_idx, p.wt[3] = ac_wt;
        p.taps[3] = 2;
    } else if (_i == 1) {
        p.rank = 2, p.in[0] = p.out[0] = 2, p.in[1] = 3, p.out[1] = 7;
        p.idx[1] = near_idx, p.taps[1] = 1;
    } else if (_i == 2) {
        p.rank = 5;
        p.in[0] = p.out[0] = p.in[1] = p.out[1] = 1;
        p.in[2] = 2, p.out[2] = 4, p.idx[2] = lin_idx, p.wt[2] = lin_wt;
        p.taps[2] = 2;
        p.in[3] = 3, p.out[3] = 5, p.idx[3] = ac_idx, p.wt[3] = ac_wt;
        p.taps[3] = 2;
        p.in[4] = 2, p.out[4] = 4, p.idx[4] = lin_idx, p.wt[4] = lin_wt;
        p.taps[4] = 2;
    } else {    /* 4 taps (cubic), 3 -> 2, with repeated clamped indices */
        p.rank = 2, p.in[0] = p.out[0] = 2, p.in[1] = 3, p.out[1] = 2;
        p.idx[1] = cub_idx, p.wt[1] = cub_wt, p.taps[1] = 4;
    }
    c.p = &p, c.nx = c.ny = 1;
    for (a = 0; a < p.rank; a++)
        c.nx *= p.in[a], c.ny *= p.out[a];
    tseed(900 + _i);
    c.x = rnd(c.nx), c.y = zeros(c.ny), c.dy = rnd(c.ny);
    px = rnd(c.nx), dx = copy(px, c.nx), diff = zeros(c.nx);
    rt_resize_backward(dx, c.dy, &p);
    added(diff, dx, px, c.nx);
    expect_grad("dx", c.x, c.nx, diff, resize_loss, &c);
    lhs = resize_loss(&c), rhs = dot(c.x, diff, c.nx);
    ck_assert_msg(fabs(lhs - rhs) <= 1e-4 * (1 + fabs(lhs)),
                  "adjoint: <y, dy> %g, <x, dx> %g", lhs, rhs);
    rt_resize_backward(NULL, c.dy, &p);     /* no gradient: nothing */
    free(c.x), free(c.y), free(c.dy), free(px), free(dx), free(diff);
}
END_TEST

static Suite *resize_suite(void)
{
    Suite *s = suite_create("remat_rt resize");
    TCase *tc = tcase_create("resize");
    tcase_add_test(tc, resize_by_hand);
    tcase_add_test(tc, resize_bilinear_by_hand);
    tcase_add_test(tc, resize_nearest_by_hand);
    tcase_add_loop_test(tc, resize_grad, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(resize_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
