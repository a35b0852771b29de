/*
 * test_kernels_pad.c: unit tests of the runtime's Pad kernels
 * (rt_pad_forward, rt_pad_backward), with Check. Built twice like every
 * test_kernels*.c (with and without BLAS), though Pad calls no GEMM.
 *
 * The forward is checked against numbers worked out by hand from ONNX's
 * definition (numpy.pad's modes: constant, reflect, edge; negative pads
 * crop) and against an independent per-element formula written here
 * (coordinates decoded one element at a time, reflection by repeated
 * mirroring rather than a modulus); the backward against central finite
 * differences of the forward, from a random preset gradient so that `+=`
 * is tested, and with a NULL gradient.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- by hand ------------------------------------------------------------- */

/* np.pad([1, 2, 3], (2, 3), mode) for each mode; constant 7. */
START_TEST(pad_1d_by_hand)
{
    const float x[3] = {1, 2, 3};
    const int dims[1] = {3}, pads[2] = {2, 3};
    const float want[3][8] = {
        {7, 7, 1, 2, 3, 7, 7, 7},
        {3, 2, 1, 2, 3, 2, 1, 2},
        {1, 1, 1, 2, 3, 3, 3, 3},
    };
    const char *names[3] = {"constant", "reflect", "edge"};
    int mode;
    for (mode = 0; mode < 3; mode++) {
        float y[8];
        memset(y, 0x7f, sizeof y);
        rt_pad_forward(y, x, 1, dims, pads, mode, 7.0f);
        expect_same(names[mode], y, want[mode], 8);
    }
}
END_TEST

/* Reflect beyond one mirror: np.pad([1, 2], (3, 2), 'reflect')
 * = [2, 1, 2, 1, 2, 1, 2]; an axis of one element repeats it. */
START_TEST(pad_reflect_far_and_single)
{
    const float x[2] = {1, 2}, one[1] = {5};
    const int dims[1] = {2}, pads[2] = {3, 2}, d1[1] = {1};
    const float want[7] = {2, 1, 2, 1, 2, 1, 2}, want1[4] = {5, 5, 5, 5};
    const int p1[2] = {1, 2};
    float y[7];
    rt_pad_forward(y, x, 1, dims, pads, RT_PAD_REFLECT, 0.0f);
    expect_same("reflect (3, 2) of 2 elements", y, want, 7);
    rt_pad_forward(y, one, 1, d1, p1, RT_PAD_REFLECT, 0.0f);
    expect_same("reflect of 1 element", y, want1, 4);
}
END_TEST

/* 2 x 3 [[1, 2, 3], [4, 5, 6]]: pads (1, 0) before, (0, 1) after; then a
 * crop of the first column with a reflected row after. */
START_TEST(pad_2d_by_hand)
{
    const float x[6] = {1, 2, 3, 4, 5, 6};
    const int dims[2] = {2, 3};
    const int pads[4] = {1, 0, 0, 1};
    const float con[12] = {0, 0, 0, 0, 1, 2, 3, 0, 4, 5, 6, 0};
    const float edge[12] = {1, 2, 3, 3, 1, 2, 3, 3, 4, 5, 6, 6};
    const float refl[12] = {4, 5, 6, 5, 1, 2, 3, 2, 4, 5, 6, 5};
    const int crop[4] = {0, -1, 1, 0};     /* rows +1 after, column 0 off */
    const float cropped[6] = {2, 3, 5, 6, 2, 3};
    float y[12];
    rt_pad_forward(y, x, 2, dims, pads, RT_PAD_CONSTANT, 0.0f);
    expect_same("2-D constant", y, con, 12);
    rt_pad_forward(y, x, 2, dims, pads, RT_PAD_EDGE, 0.0f);
    expect_same("2-D edge", y, edge, 12);
    rt_pad_forward(y, x, 2, dims, pads, RT_PAD_REFLECT, 0.0f);
    expect_same("2-D reflect", y, refl, 12);
    rt_pad_forward(y, x, 2, dims, crop, RT_PAD_REFLECT, 0.0f);
    expect_same("2-D crop + reflect", y, cropped, 6);
}
END_TEST

/* Edge on [1, 2, 3] with pads (2, 0): the backward gives x[0] three
 * elements' gradients. */
START_TEST(pad_backward_by_hand)
{
    const int dims[1] = {3}, pads[2] = {2, 0};
    const float dy[5] = {1, 10, 100, 1000, 10000};
    float dx[3] = {0.5f, 0, 0};
    const float want[3] = {111.5f, 1000, 10000};
    rt_pad_backward(dx, dy, 1, dims, pads, RT_PAD_EDGE);
    expect_same("edge backward", dx, want, 3);
    rt_pad_backward(NULL, dy, 1, dims, pads, RT_PAD_EDGE);   /* no crash */
}
END_TEST

/* ---- against a formula, and finite differences ----------------------------- */

typedef struct {
    int rank, dims[6], pads[12], mode;
} pad_spec;

static const pad_spec pad_specs[] = {
    {2, {3, 4}, {1, 2, 2, 1}, RT_PAD_CONSTANT},
    {2, {3, 4}, {2, 3, 2, 3}, RT_PAD_REFLECT},
    {2, {3, 4}, {0, 5, 4, 0}, RT_PAD_EDGE},
    {3, {2, 3, 3}, {1, 0, 1, 0, 2, 1}, RT_PAD_REFLECT},
    {3, {2, 3, 3}, {0, -1, 1, 1, 1, -1}, RT_PAD_EDGE},
    {4, {2, 2, 3, 3}, {1, 0, 1, 1, 0, 1, 1, 1}, RT_PAD_CONSTANT},
    {4, {1, 2, 3, 4}, {0, 0, 2, 3, 0, 0, 2, 3}, RT_PAD_REFLECT},
    {4, {2, 1, 3, 2}, {0, 2, -1, 1, 1, 0, 0, 2}, RT_PAD_EDGE},
    {1, {5}, {-2, -1}, RT_PAD_CONSTANT},
    {5, {2, 1, 2, 2, 3}, {0, 1, 0, 1, 1, 1, 0, 1, 0, -1}, RT_PAD_EDGE},
    {6, {1, 2, 1, 2, 2, 2}, {1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0},
     RT_PAD_REFLECT},
    {6, {2, 1, 2, 1, 2, 2}, {0, 1, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1},
     RT_PAD_CONSTANT},
};
#define N_PAD ((int)(sizeof pad_specs / sizeof pad_specs[0]))

static int numel(int rank, const int *dims)
{
    int n = 1, d;
    for (d = 0; d < rank; d++)
        n *= dims[d];
    return n;
}

/* The input index for output index o, by repeated mirroring. */
static int mirror(int i, int n, int mode)
{
    if (mode == RT_PAD_EDGE)
        return i < 0 ? 0 : i >= n ? n - 1 : i;
    while (i < 0 || i >= n) {
        if (n == 1)
            return 0;
        i = i < 0 ? -i : 2 * (n - 1) - i;
    }
    return i;
}

/* y, element by element from its flat index. */
static void pad_expect(const pad_spec *s, const float *x, float value,
                       double *want)
{
    int ydims[6], d, k;
    for (d = 0; d < s->rank; d++)
        ydims[d] = s->dims[d] + s->pads[d] + s->pads[s->rank + d];
    for (k = 0; k < numel(s->rank, ydims); k++) {
        int rest = k, off = 0, stride = 1, inside = 1;
        for (d = s->rank - 1; d >= 0; d--) {
            int o = rest % ydims[d], i = o - s->pads[d];
            rest /= ydims[d];
            if (i < 0 || i >= s->dims[d]) {
                if (s->mode == RT_PAD_CONSTANT)
                    inside = 0;
                else
                    i = mirror(i, s->dims[d], s->mode);
            }
            off += i * stride;
            stride *= s->dims[d];
        }
        want[k] = inside ? x[off] : value;
    }
}

typedef struct {
    const pad_spec *s;
    int nx, ny;
    float x[256], y[1024], dy[1024];
} pad_case;

static double pad_loss(void *v)
{
    pad_case *c = v;
    rt_pad_forward(c->y, c->x, c->s->rank, c->s->dims, c->s->pads, c->s->mode,
                   0.25f);
    return dot(c->y, c->dy, c->ny);
}

static void pad_setup(pad_case *c, int spec, uint64_t seed)
{
    int ydims[6], d;
    c->s = &pad_specs[spec];
    for (d = 0; d < c->s->rank; d++)
        ydims[d] = c->s->dims[d] + c->s->pads[d] + c->s->pads[c->s->rank + d];
    c->nx = numel(c->s->rank, c->s->dims);
    c->ny = numel(c->s->rank, ydims);
    ck_assert(c->nx <= 256 && c->ny <= 1024);
    tseed(seed);
    fill(c->x, c->nx, -1, 1);
    fill(c->dy, c->ny, -1, 1);
}

START_TEST(pad_forward_matches_formula)
{
    pad_case c;
    double want[1024];
    char what[48];
    pad_setup(&c, _i, 2100 + _i);
    memset(c.y, 0x7f, sizeof c.y);
    pad_loss(&c);
    pad_expect(c.s, c.x, 0.25f, want);
    snprintf(what, sizeof what, "pad spec %d", _i);
    expect_near(what, c.y, want, c.ny, 0, 0);
}
END_TEST

START_TEST(pad_grad)
{
    pad_case c;
    float dx[256], pre[256], diff[256];
    char what[48];
    pad_setup(&c, _i, 2200 + _i);
    fill(pre, c.nx, -1, 1);
    memcpy(dx, pre, sizeof dx);
    rt_pad_backward(dx, c.dy, c.s->rank, c.s->dims, c.s->pads, c.s->mode);
    added(diff, dx, pre, c.nx);
    snprintf(what, sizeof what, "pad spec %d: dx", _i);
    expect_grad(what, c.x, c.nx, diff, pad_loss, &c);
}
END_TEST

/* The backward's total is dy's over the elements that read x (all of them
 * unless constant): nothing lost, nothing counted twice. */
START_TEST(pad_backward_conserves_sum)
{
    pad_case c;
    float dx[256];
    double sx = 0, sy = 0, want[1024];
    int k;
    pad_setup(&c, _i, 2300 + _i);
    memset(dx, 0, sizeof dx);
    rt_pad_backward(dx, c.dy, c.s->rank, c.s->dims, c.s->pads, c.s->mode);
    for (k = 0; k < c.nx; k++)
        c.x[k] = 1.0f;
    pad_expect(c.s, c.x, 0.0f, want);    /* 1 where y reads x */
    for (k = 0; k < c.nx; k++)
        sx += dx[k];
    for (k = 0; k < c.ny; k++)
        sy += want[k] * c.dy[k];
    ck_assert_msg(fabs(sx - sy) < 1e-4, "spec %d: sum dx %g, want %g", _i, sx,
                  sy);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *pad_suite(void)
{
    Suite *s = suite_create("remat_rt pad");
    TCase *tc = tcase_create("pad");
    tcase_add_test(tc, pad_1d_by_hand);
    tcase_add_test(tc, pad_reflect_far_and_single);
    tcase_add_test(tc, pad_2d_by_hand);
    tcase_add_test(tc, pad_backward_by_hand);
    tcase_add_loop_test(tc, pad_forward_matches_formula, 0, N_PAD);
    tcase_add_loop_test(tc, pad_grad, 0, N_PAD);
    tcase_add_loop_test(tc, pad_backward_conserves_sum, 0, N_PAD);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pad_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
