/*
 * test_kernels_pool.c: unit tests of the runtime's pooling kernels
 * (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool: rt_maxpool_*,
 * rt_avgpool_*, rt_global_avgpool_*, rt_global_maxpool_*, and
 * rt_maxpool_backward_set, over 1, 2 and 3 spatial dims), with Check.
 *
 * As in every test_kernels_*.c: gradients are checked against central
 * finite differences of the forward kernels (rt_testutil.h), with loss
 * L = sum(dy * y) for a random upstream gradient dy, summed in double;
 * every gradient buffer starts from random values and the check is on
 * (after - before), so accumulation is tested everywhere. Forward values
 * are checked against the definitions written here as plain loops in
 * double, and against hand-worked numbers; the fast paths bit for bit
 * against the generic walk's definition written here in float. Buffers the
 * kernels write carry a guard of sentinel values past their end
 * (rt_testutil.h's guarded), checked after every call. The _set twin is
 * checked against the adding kernel as rt_testutil.h's same_values says.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#define RT_TEST_WINDOWS /* guarded, win_spec, window_of, tap_at */
#include "rt_testutil.h"

/* ---- helpers (the rest are rt_testutil.h's) ------------------------------ */

/* Distinct values, all negative, at least 0.05 apart in random order: a
 * finite-difference step (0.01) never changes which is a window's maximum,
 * and a kernel that let a 0 of the padding win would be caught. */
static void fill_distinct_negative(float *x, size_t n)
{
    size_t i, j;
    for (i = 0; i < n; i++)
        x[i] = -0.05f * (float)(i + 1);
    for (i = n; i > 1; i--) { /* Fisher-Yates */
        const float t = x[i - 1];
        j = (size_t)trand(0, (float)i);
        if (j >= i)
            j = i - 1;
        x[i - 1] = x[j];
        x[j] = t;
    }
}

/* ---- pooling ------------------------------------------------------------- */

/* oc 0 means c; group 1, no bias.
 *                 name                       n  c  h  w oc kh kw sh sw dh dw pt pl pb pr g  b */
static const win_spec pools[] = {
    {"2x2 stride 2",                          2, 2, 4, 4, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0},
    {"3x3 stride 2, pads 1",                  1, 2, 5, 5, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0},
    {"2x3, strides 1x2, asymmetric pads",     1, 1, 4, 5, 0, 2, 3, 1, 2, 1, 1, 1, 0, 0, 2, 1, 0},
    {"2x2 dilation 2, pads 1",                1, 2, 6, 6, 0, 2, 2, 1, 1, 2, 2, 1, 1, 1, 1, 1, 0},
    {"3x3, windows mostly padding",           1, 1, 3, 3, 0, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 1, 0},
    {"3x3 stride 1, overlapping",             2, 1, 4, 4, 0, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0},
    {"3x2 stride 3x1, pads 0,1,2,0",          1, 2, 7, 3, 0, 3, 2, 3, 1, 1, 1, 0, 1, 2, 0, 1, 0},
};
#define N_POOLS ((int)(sizeof pools / sizeof pools[0]))

/* ceil_mode=1 geometries (window_ceil): the last window runs past the
 * padded input, and count_include_pad divides by the taps inside it. */
static const win_spec ceil_pools[] = {
    {"2x2 stride 2 on 5x5, ceil",             1, 2, 5, 5, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0},
    {"3x3 stride 2, pads 1, 6x6, ceil",       1, 1, 6, 6, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0},
    {"3x2 strides 2x3, pads 1,0,0,1, ceil",   2, 1, 6, 7, 0, 3, 2, 2, 3, 1, 1, 1, 0, 0, 1, 1, 0},
    {"2x2 dilation 2 stride 2, ceil",         1, 1, 6, 5, 0, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 1, 0},
};
#define N_CEIL ((int)(sizeof ceil_pools / sizeof ceil_pools[0]))

/* ONNX's (and PyTorch's) output size with ceil_mode: rounded up, less one
 * where the last window would start in the end padding. */
static int out_size_ceil(int in, int pad0, int pad1, int k, int s, int d)
{
    const int span = in + pad0 + pad1 - (d * (k - 1) + 1);
    int o = (span + s - 1) / s + 1;
    if ((o - 1) * s >= in + pad0)
        o--;
    return o;
}

static rt_window window_ceil(const win_spec *s)
{
    rt_window p = window_of(s);
    p.oh = out_size_ceil(s->h, s->pt, s->pb, s->kh, s->sh, s->dh);
    p.ow = out_size_ceil(s->w, s->pl, s->pr, s->kw, s->sw, s->dw);
    return p;
}

/* 1-D and 3-D windows, axes in (depth, height, width) order (a 1-D window
 * is one row high, as the compiler writes it); ceil: ceil_mode. */
static const nd_spec nd_pools[] = {
    /* name                             n  c oc g b ceil in          k          s          d          pads begin pads end */
    {"1-D k3 stride 2 pads 1",          2, 3, 0, 0, 0, 0, {1, 1, 9}, {1, 1, 3}, {1, 1, 2}, {1, 1, 1}, {0, 0, 1}, {0, 0, 1}},
    {"1-D k2 dilation 2, ceil",         1, 2, 0, 0, 0, 1, {1, 1, 8}, {1, 1, 2}, {1, 1, 3}, {1, 1, 2}, {0, 0, 0}, {0, 0, 1}},
    {"1-D k4 pads 0,3 stride 3, ceil",  1, 1, 0, 0, 0, 1, {1, 1, 10}, {1, 1, 4}, {1, 1, 3}, {1, 1, 1}, {0, 0, 0}, {0, 0, 3}},
    {"3-D 2x2x2 stride 2",              1, 2, 0, 0, 0, 0, {4, 4, 6}, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}},
    {"3-D 3x3x3 stride 2 pads 1",       1, 2, 0, 0, 0, 0, {5, 5, 4}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
    {"3-D 2x3x2 strides 1x2x3, dilation 2x1x1, ceil", 2, 1, 0, 0, 0, 1, {5, 6, 7}, {2, 3, 2}, {1, 2, 3}, {2, 1, 1}, {1, 0, 1}, {0, 1, 1}},
    {"3-D 1x2x2 stride 1x2x2 (fast rows per slice)", 1, 2, 0, 0, 0, 0, {3, 6, 6}, {1, 2, 2}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}},
    {"3-D 1x3x3 stride 2 pads 0,1,1",   1, 1, 0, 0, 0, 0, {5, 7, 7}, {1, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},
    {"3-D 2x3x3 stride 1x2x2 pads 1,1,1, ceil", 1, 2, 0, 0, 0, 1, {3, 6, 6}, {2, 3, 3}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
};
#define N_ND ((int)(sizeof nd_pools / sizeof nd_pools[0]))

/* kind: 0 MaxPool, 1 AveragePool, 2 AveragePool with count_include_pad */
typedef struct {
    const char *name;
    rt_window p;
    int kind;
    size_t nx, ny;
    float *x, *y, *dy;
} pool_case;

/* i < N_POOLS: pools[i], floor mode; then ceil_pools[i - N_POOLS]; then
 * nd_pools[i - N_POOLS - N_CEIL]. */
static pool_case pool_setup(int i, int kind, uint64_t seed)
{
    pool_case c;
    if (i < N_POOLS + N_CEIL) {
        const win_spec *s = i < N_POOLS ? &pools[i] : &ceil_pools[i - N_POOLS];
        c.name = s->name;
        c.p = i < N_POOLS ? window_of(s) : window_ceil(s);
        c.p.d = c.p.od = c.p.kd = c.p.sd = c.p.dd = 1; /* as the compiler */
    } else {
        c.name = nd_pools[i - N_POOLS - N_CEIL].name;
        c.p = window_nd(&nd_pools[i - N_POOLS - N_CEIL]);
    }
    c.kind = kind;
    c.nx = (size_t)c.p.n * c.p.c * c.p.d * c.p.h * c.p.w;
    c.ny = (size_t)c.p.n * c.p.c * c.p.od * c.p.oh * c.p.ow;
    tseed(seed);
    c.x = guarded(c.nx);
    c.y = guarded(c.ny);
    c.dy = guarded(c.ny);
    if (kind == 0)
        fill_distinct_negative(c.x, c.nx);
    else
        fill(c.x, c.nx, -1, 1);
    fill(c.dy, c.ny, -1, 1);
    return c;
}

static void pool_free(pool_case *c)
{
    free(c->x), free(c->y), free(c->dy);
}

static void pool_forward(pool_case *c)
{
    if (c->kind == 0)
        rt_maxpool_forward(c->y, c->x, &c->p);
    else
        rt_avgpool_forward(c->y, c->x, &c->p, c->kind == 2);
}

static void pool_backward(pool_case *c, float *dx)
{
    if (c->kind == 0)
        rt_maxpool_backward(dx, c->dy, c->x, &c->p);
    else
        rt_avgpool_backward(dx, c->dy, &c->p, c->kind == 2);
}

static double pool_loss(void *v)
{
    pool_case *c = v;
    pool_forward(c);
    return dot(c->y, c->dy, c->ny);
}

/* The definitions, in double: the maximum over the taps inside the input
 * (the padding is -inf), or their mean, or their sum over the taps inside
 * the padded input (kh * kw but where a ceil_mode window runs past it). */
static void pool_naive(double *want, const pool_case *c)
{
    const rt_window *p = &c->p;
    int q, oz, oy, ox, kz, ki, kj;
    for (q = 0; q < p->n * p->c; q++)
        for (oz = 0; oz < p->od; oz++)
            for (oy = 0; oy < p->oh; oy++)
                for (ox = 0; ox < p->ow; ox++) {
                    double m = -INFINITY, s = 0;
                    int count = 0, padded = 0;
                    for (kz = 0; kz < p->kd; kz++)
                        for (ki = 0; ki < p->kh; ki++)
                            for (kj = 0; kj < p->kw; kj++) {
                                const int iz = tap_at(oz, p->sd, p->pad_front, kz, p->dd);
                                const int iy = tap_at(oy, p->sh, p->pad_top, ki, p->dh);
                                const int ix = tap_at(ox, p->sw, p->pad_left, kj, p->dw);
                                double v;
                                padded += iz >= -p->pad_front && iz < p->d + p->pad_back &&
                                          iy >= -p->pad_top && iy < p->h + p->pad_bottom &&
                                          ix >= -p->pad_left && ix < p->w + p->pad_right;
                                if (iz < 0 || iz >= p->d || iy < 0 || iy >= p->h ||
                                    ix < 0 || ix >= p->w)
                                    continue;
                                v = c->x[((q * p->d + iz) * p->h + iy) * p->w + ix];
                                m = v > m ? v : m;
                                s += v;
                                count++;
                            }
                    want[((q * p->od + oz) * p->oh + oy) * p->ow + ox] =
                        c->kind == 0 ? m
                        : c->kind == 2 ? s / padded
                                       : s / count;
                }
}

static const char *const pool_names[3] = {"MaxPool", "AveragePool",
                                          "AveragePool count_include_pad"};

/* _i = kind + 3 * pool case. */
START_TEST(pool_forward_matches_definition)
{
    pool_case c = pool_setup(_i / 3, _i % 3, 800 + _i);
    double *want = malloc(c.ny * sizeof *want);
    char what[96];
    size_t j;
    for (j = 0; j < c.ny; j++)
        c.y[j] = NAN;
    pool_forward(&c);
    pool_naive(want, &c);
    snprintf(what, sizeof what, "%s %s: y", pool_names[c.kind], c.name);
    expect_near(what, c.y, want, c.ny, c.kind == 0 ? 0 : 1e-6, c.kind == 0 ? 0 : 1e-6);
    expect_guard("y", c.y, c.ny);
    free(want);
    pool_free(&c);
}
END_TEST

START_TEST(pool_grad)
{
    pool_case c = pool_setup(_i / 3, _i % 3, 900 + _i);
    float *dx = guarded(c.nx), *pre = malloc(c.nx * sizeof *pre),
          *diff = malloc(c.nx * sizeof *diff);
    char what[96];
    fill(pre, c.nx, -1, 1);
    memcpy(dx, pre, c.nx * sizeof *dx);
    pool_backward(&c, dx);
    expect_guard("dx", dx, c.nx);
    snprintf(what, sizeof what, "%s %s: dx", pool_names[c.kind], c.name);
    added(diff, dx, pre, c.nx);
    expect_grad(what, c.x, c.nx, diff, pool_loss, &c);
    pool_backward(&c, NULL); /* skipped, not a crash */
    free(dx), free(pre), free(diff);
    pool_free(&c);
}
END_TEST

START_TEST(maxpool_ties_by_hand)
{
    /* x = [1 7 7; 7 2 7; 3 7 0], 2x2 windows, stride 1. Windows (0,0)
     * [1 7; 7 2] and (0,1) [7 7; 2 7] both pick x[0][1], the first 7 in
     * row-major window order; (1,0) [7 2; 3 7] picks x[1][0]; (1,1)
     * [2 7; 7 0] picks x[1][2]. dy = [1 2 4 8] lands there, two windows
     * summing on x[0][1], on top of dx's 100. */
    const win_spec s = {"ties", 1, 1, 3, 3, 0, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0};
    const rt_window p = window_of(&s);
    const float x[9] = {1, 7, 7, 7, 2, 7, 3, 7, 0}, dy[4] = {1, 2, 4, 8};
    float y[4], dx[9];
    const double wy[4] = {7, 7, 7, 7},
                 wdx[9] = {100, 103, 100, 104, 100, 108, 100, 100, 100};
    int j;
    rt_maxpool_forward(y, x, &p);
    expect_near("y", y, wy, 4, 0, 0);
    for (j = 0; j < 9; j++)
        dx[j] = 100;
    rt_maxpool_backward(dx, dy, x, &p);
    expect_near("dx", dx, wdx, 9, 0, 0);
}
END_TEST

START_TEST(maxpool_padding_by_hand)
{
    /* x = [-3 -1; -2 -4], 2x2 windows, stride 2, pads 1 all round: every
     * window holds one input element and three of padding, which never wins
     * even though every element is negative. */
    const win_spec s = {"pads", 1, 1, 2, 2, 0, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0};
    const rt_window p = window_of(&s);
    const float x[4] = {-3, -1, -2, -4}, dy[4] = {1, 2, 3, 4};
    float y[4], dx[4] = {0, 0, 0, 0};
    const double wy[4] = {-3, -1, -2, -4}, wdx[4] = {1, 2, 3, 4};
    ck_assert_int_eq(p.oh, 2);
    rt_maxpool_forward(y, x, &p);
    expect_near("y", y, wy, 4, 0, 0);
    rt_maxpool_backward(dx, dy, x, &p);
    expect_near("dx", dx, wdx, 4, 0, 0);
}
END_TEST

START_TEST(maxpool_nan_and_empty_windows)
{
    /* A NaN in a window is its maximum, wherever it is. */
    const win_spec s1 = {"nan", 1, 1, 1, 4, 0, 1, 2, 1, 2, 1, 1, 0, 0, 0, 0, 1, 0};
    const rt_window p1 = window_of(&s1);
    const float x1[4] = {1, NAN, NAN, 5};
    float y1[2];
    /* One element, 1x1 windows, pads 1: only the centre window holds an
     * input element; the others are -inf and send nothing back. */
    const win_spec s2 = {"empty", 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    const rt_window p2 = window_of(&s2);
    const float x2[1] = {-7}, dy2[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float y2[9], dx2[1] = {0}, ya[9];
    int j;
    rt_maxpool_forward(y1, x1, &p1);
    ck_assert(isnan(y1[0]) && isnan(y1[1]));
    ck_assert_int_eq(p2.oh * p2.ow, 9);
    rt_maxpool_forward(y2, x2, &p2);
    for (j = 0; j < 9; j++)
        ck_assert(j == 4 ? y2[j] == -7 : y2[j] == -INFINITY);
    rt_maxpool_backward(dx2, dy2, x2, &p2);
    ck_assert_float_eq(dx2[0], 5);
    /* AveragePool: 0 for an empty window without count_include_pad, and
     * with it the padding's zeros over the one-tap window. */
    rt_avgpool_forward(ya, x2, &p2, 0);
    for (j = 0; j < 9; j++)
        ck_assert_float_eq(ya[j], j == 4 ? -7 : 0);
    rt_avgpool_forward(ya, x2, &p2, 1);
    for (j = 0; j < 9; j++)
        ck_assert_float_eq(ya[j], j == 4 ? -7 : 0);
    dx2[0] = 0;
    rt_avgpool_backward(dx2, dy2, &p2, 0);
    ck_assert_float_eq(dx2[0], 5);
}
END_TEST

/* ceil_mode by hand. x = [1 2 3; 4 5 6; 7 8 9], 2x2 windows, stride 2, no
 * pads: ceil gives 2x2 windows at rows/columns 0 and 2, the second ones
 * running past the input. MaxPool: 5, 6, 8, 9. AveragePool: (1+2+4+5)/4,
 * (3+6)/2, (7+8)/2, 9/1, with or without count_include_pad (nothing of
 * those windows lies in padding). With pads 1 all round and a 3x3 window,
 * stride 2: ceil((5 - 3) / 2) + 1 = 2 outputs, no drop; the second window
 * covers rows 1..3, row 3 being padding, inside the padded input: its
 * count_include_pad divisor is 9. Then h = 3, 1x1 windows, stride 2, pads
 * 1: floor and ceil both give 3, but the third window starts in the end
 * padding (row 3), so ceil_mode drops it: 2 outputs. */
START_TEST(pool_ceil_mode_by_hand)
{
    const win_spec s = {"ceil", 1, 1, 3, 3, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0};
    const rt_window p = window_ceil(&s);
    const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, dy[4] = {1, 2, 3, 4};
    float y[4], dx[9];
    const double wmax[4] = {5, 6, 8, 9}, wavg[4] = {3, 4.5, 7.5, 9},
                 wdavg[9] = {0.25, 0.25, 1, 0.25, 0.25, 1, 1.5, 1.5, 4};
    const win_spec s2 = {"ceil pads", 1, 1, 3, 3, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0};
    const rt_window p2 = window_ceil(&s2);
    const win_spec s3 = {"drop", 1, 1, 3, 3, 0, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0};
    const rt_window p3 = window_ceil(&s3);
    float y2[4];
    int j;
    ck_assert_int_eq(p.oh, 2);
    ck_assert_int_eq(p.ow, 2);
    rt_maxpool_forward(y, x, &p);
    expect_near("max y", y, wmax, 4, 0, 0);
    rt_avgpool_forward(y, x, &p, 0);
    expect_near("avg y", y, wavg, 4, 0, 0);
    rt_avgpool_forward(y, x, &p, 1);
    expect_near("avg y count_include_pad", y, wavg, 4, 0, 0);
    memset(dx, 0, sizeof dx);
    rt_avgpool_backward(dx, dy, &p, 1);
    expect_near("avg dx", dx, wdavg, 9, 0, 0);
    ck_assert_int_eq(p2.oh, 2);
    rt_avgpool_forward(y2, x, &p2, 1);
    /* window (1, 1) covers x rows and columns 1..2 and padding: (5+6+8+9)/9 */
    ck_assert_float_eq_tol(y2[3], 28.0f / 9.0f, 1e-6f);
    /* window (0, 0): rows and columns -1..1, all inside the padded input */
    ck_assert_float_eq_tol(y2[0], 12.0f / 9.0f, 1e-6f);
    ck_assert_int_eq(out_size(3, 1, 1, 1, 2, 1), 3);
    ck_assert_int_eq(p3.oh, 2);
    ck_assert_int_eq(p3.ow, 2);
    for (j = 0; j < 4; j++)
        y2[j] = NAN;
    rt_maxpool_forward(y2, x, &p3);
    /* windows at -1 (padding) and 1: -inf, then x[1][1] = 5 */
    ck_assert(y2[0] == -INFINITY);
    ck_assert_float_eq(y2[3], 5);
}
END_TEST

/* A ceil_mode window past the padded input, count_include_pad: 1x3
 * windows, stride 2, on a row of 5 with pad_right 1 (padded 6): ceil((6 -
 * 3) / 2) + 1 = 3 windows, at 0, 2 and 4, the last covering x4, the
 * padding and a column past it, so it divides by 2: y = (1+2+3)/3,
 * (3+4+5)/3, (5+0)/2. Without count_include_pad it is 5/1. A window that
 * starts in the padding would be dropped: stride 2 on 4 with pad_right 1
 * gives 2 outputs, not ceil((5 - 2) / 2) + 1 = 3. */
START_TEST(avgpool_ceil_clips_to_padded_input)
{
    const win_spec s = {"clip", 1, 1, 1, 5, 0, 1, 3, 1, 2, 1, 1, 0, 0, 0, 1, 1, 0};
    const win_spec s2 = {"drop", 1, 1, 1, 4, 0, 1, 2, 1, 2, 1, 1, 0, 0, 0, 1, 1, 0};
    const rt_window p = window_ceil(&s);
    const float x[5] = {1, 2, 3, 4, 5}, dy[3] = {1, 1, 1};
    float y[3], dx[5] = {0, 0, 0, 0, 0};
    const double wy[3] = {2, 4, 2.5}, wyex[3] = {2, 4, 5},
                 wdx[5] = {1.0 / 3, 1.0 / 3, 2.0 / 3, 1.0 / 3, 1.0 / 3 + 0.5};
    ck_assert_int_eq(p.ow, 3);
    rt_avgpool_forward(y, x, &p, 1);
    expect_near("y", y, wy, 3, 1e-6, 0);
    rt_avgpool_forward(y, x, &p, 0);
    expect_near("y without count_include_pad", y, wyex, 3, 1e-6, 0);
    rt_avgpool_backward(dx, dy, &p, 1);
    expect_near("dx", dx, wdx, 5, 1e-6, 0);
    ck_assert_int_eq(window_ceil(&s2).ow, 2);
}
END_TEST

START_TEST(avgpool_by_hand)
{
    /* x = [1 2; 3 4], 2x2 windows, stride 1, pads 1: a 3x3 output whose
     * windows hold 1, 2 or 4 elements. Without count_include_pad each is
     * their mean; with it their sum / 4. With dy all ones, each element
     * gets 1 + 1/2 + 1/2 + 1/4 (one window of each size in which it lies)
     * or, dividing by 4 throughout, 4 * 1/4. */
    const win_spec s = {"avg", 1, 1, 2, 2, 0, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    const rt_window p = window_of(&s);
    const float x[4] = {1, 2, 3, 4},
                dy[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float y[9], dx[4];
    const double wex[9] = {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4},
                 win[9] = {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1},
                 wdex[4] = {3.25, 3.25, 3.25, 3.25}, wdin[4] = {2, 2, 2, 2};
    int j;
    ck_assert_int_eq(p.oh, 3);
    ck_assert_int_eq(p.ow, 3);
    rt_avgpool_forward(y, x, &p, 0);
    expect_near("y", y, wex, 9, 0, 0);
    rt_avgpool_forward(y, x, &p, 1);
    expect_near("y count_include_pad", y, win, 9, 0, 0);
    for (j = 0; j < 4; j++)
        dx[j] = 1;
    rt_avgpool_backward(dx, dy, &p, 0);
    expect_near("dx", dx, wdex, 4, 0, 0);
    for (j = 0; j < 4; j++)
        dx[j] = 1;
    rt_avgpool_backward(dx, dy, &p, 1);
    expect_near("dx count_include_pad", dx, wdin, 4, 0, 0);
}
END_TEST

/* ---- pooling fast paths -------------------------------------------------- */

/* The kernels run k x k windows of stride 2 (k 2 or 3) through row kernels
 * on the interior and the generic walk around it. These references are the
 * generic walk's definition in float, the same operations in the same
 * order, so the kernels must match them bit for bit: MaxPool's first
 * maximum in row-major window order on ties, the first NaN if any;
 * AveragePool's sum from 0.0f in row-major order divided by the divisor;
 * the backwards adding into dx window by window in (oy, ox) order. */

/* ceil 1: window_ceil's geometry. */
typedef struct {
    win_spec s;
    int ceil;
} fast_spec;

/*                        name                 n  c  h   w oc kh kw sh sw dh dw pt pl pb pr g  b  ceil */
static const fast_spec fast_pools[] = {
    {{"2x2 s2 on 8x8",                         2, 3, 8,  8, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"2x2 s2 on 7x9, last row/column unread", 2, 3, 7,  9, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"2x2 s2 on 7x9, ceil",                   2, 3, 7,  9, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 1},
    {{"2x2 s2 pads 1 on 6x7",                  1, 2, 6,  7, 0, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}, 0},
    {{"3x3 s2 on 9x9",                         2, 3, 9,  9, 0, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"3x3 s2 on 8x10",                        1, 2, 8, 10, 0, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"3x3 s2 pads 1 on 7x7",                  2, 2, 7,  7, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}, 0},
    {{"3x3 s2 pads 1 on 8x8, ceil",            1, 2, 8,  8, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}, 1},
    {{"3x3 s2 on 3x3, one window",             1, 1, 3,  3, 0, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"3x3 s2 on 2x2 pads 1, no interior",     1, 1, 2,  2, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}, 0},
    {{"2x2 s2 on 4x30, rows of 15: 8 + 8 overlapping",
                                               1, 2, 4, 30, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"2x2 s2 on 4x14, rows of 7: 4 + 4 overlapping",
                                               2, 2, 4, 14, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"2x2 s2 on 3x6, rows of 3",              1, 2, 3,  6, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"3x3 s2 pads 1 on 5x37, interiors of 17", 1, 2, 5, 37, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}, 0},
    {{"3x3 s2 on 5x33, rows of 16",            1, 1, 5, 33, 0, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"2x2 s1 (generic)",                      1, 2, 5,  6, 0, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
    {{"3x3 s2 dilation 2 (generic)",           1, 2, 9,  9, 0, 3, 3, 2, 2, 2, 2, 0, 0, 0, 0, 1, 0}, 0},
    {{"3x2 s2 (generic)",                      1, 2, 7,  8, 0, 3, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, 0},
};
#define N_FAST ((int)(sizeof fast_pools / sizeof fast_pools[0]))

/* A NaN whose payload says which one it is, so that "the first NaN" is
 * checked too. */
static float nan_numbered(uint32_t k)
{
    const uint32_t bits = 0x7fc00000u | (k & 0x3fffffu);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Values full of ties: a few small integers, both zeros, some NaNs. */
static void fill_ties(float *x, size_t n)
{
    static const float vals[6] = {-2.0f, -1.0f, -0.0f, 0.0f, 1.0f, 2.0f};
    size_t i;
    for (i = 0; i < n; i++) {
        const float u = trand(0, 1);
        x[i] = u < 0.05f ? nan_numbered((uint32_t)i + 1)
                         : vals[(int)(trand(0, 6)) % 6];
    }
}

/* Window (oy, ox)'s taps inside the input, row-major, into off[]; their
 * count, and in *padded the count inside the padded input. */
static int ref_taps(const rt_window *p, int oy, int ox, int *off, int *padded)
{
    int ki, kj, n = 0;
    *padded = 0;
    for (ki = 0; ki < p->kh; ki++)
        for (kj = 0; kj < p->kw; kj++) {
            const int iy = tap_at(oy, p->sh, p->pad_top, ki, p->dh);
            const int ix = tap_at(ox, p->sw, p->pad_left, kj, p->dw);
            *padded += iy >= -p->pad_top && iy < p->h + p->pad_bottom &&
                       ix >= -p->pad_left && ix < p->w + p->pad_right;
            if (iy >= 0 && iy < p->h && ix >= 0 && ix < p->w)
                off[n++] = iy * p->w + ix;
        }
    return n;
}

/* kind as pool_case's; y and dx (accumulated) as the generic walk gives. */
static void pool_ref(float *y, float *dx, const float *x, const float *dy,
                     const rt_window *p, int kind)
{
    int q, oy, ox, t, off[64];
    for (q = 0; q < p->n * p->c; q++)
        for (oy = 0; oy < p->oh; oy++)
            for (ox = 0; ox < p->ow; ox++) {
                const float *xq = x + (size_t)q * p->h * p->w;
                float *dxq = dx + (size_t)q * p->h * p->w;
                const size_t o = ((size_t)q * p->oh + oy) * p->ow + ox;
                int padded;
                const int n = ref_taps(p, oy, ox, off, &padded);
                if (kind == 0) {
                    int best = -1;
                    for (t = 0; t < n; t++)
                        if (best < 0 || xq[off[t]] > xq[best] ||
                            (isnan(xq[off[t]]) && !isnan(xq[best])))
                            best = off[t];
                    y[o] = best < 0 ? -INFINITY : xq[best];
                    if (best >= 0)
                        dxq[best] += dy[o];
                } else {
                    /* these kernels have at most 16 taps: summed in float */
                    const int d = kind == 2 ? padded : n;
                    float s = 0.0f;
                    ck_assert(p->kh * p->kw <= 16);
                    for (t = 0; t < n; t++)
                        s += xq[off[t]];
                    y[o] = d > 0 ? s / (float)d : 0.0f;
                    for (t = 0; t < n; t++)
                        dxq[off[t]] += dy[o] / (float)d;
                }
            }
}

/* _i = kind + 3 * fast_pools index. */
START_TEST(pool_fast_paths_match_generic)
{
    const fast_spec *f = &fast_pools[_i / 3];
    const int kind = _i % 3;
    const rt_window p = f->ceil ? window_ceil(&f->s) : window_of(&f->s);
    const size_t nx = (size_t)p.n * p.c * p.h * p.w,
                 ny = (size_t)p.n * p.c * p.oh * p.ow;
    float *x = guarded(nx), *dy = guarded(ny), *y = guarded(ny),
          *dx = guarded(nx), *wy = malloc(ny * sizeof *wy),
          *wdx = malloc(nx * sizeof *wdx);
    size_t j;
    tseed(1100 + _i);
    if (kind == 0)
        fill_ties(x, nx);
    else
        fill(x, nx, -1, 1);
    fill(dy, ny, -1, 1);
    fill(dx, nx, -1, 1);
    memcpy(wdx, dx, nx * sizeof *dx);
    pool_ref(wy, wdx, x, dy, &p, kind);
    if (kind == 0) {
        rt_maxpool_forward(y, x, &p);
        rt_maxpool_backward(dx, dy, x, &p);
    } else {
        rt_avgpool_forward(y, x, &p, kind == 2);
        rt_avgpool_backward(dx, dy, &p, kind == 2);
    }
    for (j = 0; j < ny; j++)
        ck_assert_msg(memcmp(&y[j], &wy[j], sizeof *y) == 0,
                      "%s %s: y[%d] %g, want %g", pool_names[kind], f->s.name,
                      (int)j, (double)y[j], (double)wy[j]);
    for (j = 0; j < nx; j++)
        ck_assert_msg(memcmp(&dx[j], &wdx[j], sizeof *dx) == 0,
                      "%s %s: dx[%d] %.9g, want %.9g", pool_names[kind],
                      f->s.name, (int)j, (double)dx[j], (double)wdx[j]);
    expect_guard("y", y, ny);
    expect_guard("dx", dx, nx);
    free(x), free(dy), free(y), free(dx), free(wy), free(wdx);
}
END_TEST

/* Ties across both zeros, and NaNs, by hand, in a 2x2 stride 2 pool that
 * the fast kernel runs. x, row by row:
 *   -0   0   0  -0
 *    1   1  -1  -1
 *   N1  N2   3  N3
 *    5   5  N4   7
 * (Nk a NaN with payload k). Windows: [-0 0; 1 1] -> the first 1 (x[4]);
 * [0 -0; -1 -1] -> +0 (x[2]), the first of two equal zeros; [N1 N2; 5 5]
 * -> N1 (x[8]); [3 N3; N4 7] -> N3 (x[11]). */
START_TEST(maxpool_fast_ties_by_hand)
{
    const win_spec s = {"fast ties", 1, 1, 4, 4, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0};
    const rt_window p = window_of(&s);
    float x[16] = {-0.0f, 0.0f, 0.0f, -0.0f, 1, 1, -1, -1,
                   0, 0, 3, 0, 5, 5, 0, 7};
    float y[4], dx[16];
    const float dy[4] = {1, 2, 3, 4};
    int j;
    x[8] = nan_numbered(1), x[9] = nan_numbered(2);
    x[11] = nan_numbered(3), x[14] = nan_numbered(4);
    rt_maxpool_forward(y, x, &p);
    ck_assert_float_eq(y[0], 1.0f);
    ck_assert(y[1] == 0.0f && !signbit(y[1]));
    ck_assert(memcmp(&y[2], &x[8], sizeof *y) == 0);
    ck_assert(memcmp(&y[3], &x[11], sizeof *y) == 0);
    memset(dx, 0, sizeof dx);
    rt_maxpool_backward(dx, dy, x, &p);
    for (j = 0; j < 16; j++)
        ck_assert_float_eq(dx[j], j == 4 ? 1 : j == 2 ? 2 : j == 8 ? 3
                                  : j == 11 ? 4 : 0);
}
END_TEST

/* ---- global average pool ------------------------------------------------- */

typedef struct {
    float x[60], y[8], dy[8];
    int nc, hw;
} gap_case;

static double gap_loss(void *v)
{
    gap_case *c = v;
    rt_global_avgpool_forward(c->y, c->x, c->nc, c->hw);
    return dot(c->y, c->dy, (size_t)c->nc);
}

START_TEST(global_avgpool)
{
    gap_case c;
    float dx[60], pre[60], diff[60];
    double want[8];
    int q, j;
    c.nc = 6, c.hw = 10;
    tseed(1000);
    fill(c.x, 60, -1, 1);
    fill(c.dy, 6, -1, 1);
    fill(pre, 60, -1, 1);
    c.y[6] = SENTINEL;
    gap_loss(&c);
    for (q = 0; q < c.nc; q++) {
        double s = 0;
        for (j = 0; j < c.hw; j++)
            s += c.x[q * c.hw + j];
        want[q] = s / c.hw;
    }
    expect_near("y", c.y, want, 6, 1e-6, 1e-6);
    ck_assert(c.y[6] == SENTINEL);
    memcpy(dx, pre, sizeof dx);
    rt_global_avgpool_backward(dx, c.dy, c.nc, c.hw);
    added(diff, dx, pre, 60);
    expect_grad("GlobalAveragePool dx", c.x, 60, diff, gap_loss, &c);
    rt_global_avgpool_backward(NULL, c.dy, c.nc, c.hw);
}
END_TEST

START_TEST(global_avgpool_by_hand)
{
    /* planes [1 2 3] and [4 5 9]: means 2 and 6; dy = [3 6] adds 1 and 2 to
     * every element of each plane. */
    const float x[6] = {1, 2, 3, 4, 5, 9}, dy[2] = {3, 6};
    float y[2], dx[6] = {1, 1, 1, 1, 1, 1};
    const double wy[2] = {2, 6}, wdx[6] = {2, 2, 2, 3, 3, 3};
    rt_global_avgpool_forward(y, x, 2, 3);
    expect_near("y", y, wy, 2, 0, 0);
    rt_global_avgpool_backward(dx, dy, 2, 3);
    expect_near("dx", dx, wdx, 6, 0, 0);
}
END_TEST

/* An AveragePool window of 256x256 summed through rt_sum: 2^16 values of
 * 0.1f average to 0.1f to float's precision (a float running sum drifts by
 * about 1e-3 relative). */
START_TEST(avgpool_large_window_does_not_drift)
{
    const nd_spec sp = {"256x256 window", 1, 1, 0, 0, 0, 0, {1, 256, 256},
                        {1, 256, 256}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0},
                        {0, 0, 0}};
    const rt_window p = window_nd(&sp);
    const size_t n = (size_t)256 * 256;
    float *x = malloc(n * sizeof *x), y;
    size_t j;
    for (j = 0; j < n; j++)
        x[j] = 0.1f;
    rt_avgpool_forward(&y, x, &p, 0);
    ck_assert_msg(fabs(y - (double)0.1f) <= 1e-7, "y %.9g", (double)y);
    free(x);
}
END_TEST

/* A mean over a large plane summed through rt_sum: 2^20 values of 0.1f
 * give 0.1f to float's precision, where a float running sum drifts by
 * about 1e-3 relative. */
START_TEST(global_avgpool_does_not_drift)
{
    const int hw = 1 << 20;
    float *x = malloc((size_t)hw * sizeof *x), y;
    int j;
    for (j = 0; j < hw; j++)
        x[j] = 0.1f;
    rt_global_avgpool_forward(&y, x, 1, hw);
    ck_assert_msg(fabs(y - (double)0.1f) <= 1e-7, "y %.9g", (double)y);
    free(x);
}
END_TEST

/* ---- global max pool ----------------------------------------------------- */

static double gmp_loss(void *v)
{
    gap_case *c = v;
    rt_global_maxpool_forward(c->y, c->x, c->nc, c->hw);
    return dot(c->y, c->dy, (size_t)c->nc);
}

START_TEST(global_maxpool)
{
    gap_case c;
    float dx[60], pre[60], diff[60];
    double want[8];
    int q, j;
    c.nc = 6, c.hw = 10;
    tseed(1100);
    fill_distinct_negative(c.x, 60);
    fill(c.dy, 6, -1, 1);
    fill(pre, 60, -1, 1);
    c.y[6] = SENTINEL;
    gmp_loss(&c);
    for (q = 0; q < c.nc; q++) {
        double m = -INFINITY;
        for (j = 0; j < c.hw; j++)
            m = c.x[q * c.hw + j] > m ? c.x[q * c.hw + j] : m;
        want[q] = m;
    }
    expect_near("y", c.y, want, 6, 0, 0);
    ck_assert(c.y[6] == SENTINEL);
    memcpy(dx, pre, sizeof dx);
    rt_global_maxpool_backward(dx, c.dy, c.x, c.nc, c.hw);
    added(diff, dx, pre, 60);
    expect_grad("GlobalMaxPool dx", c.x, 60, diff, gmp_loss, &c);
    rt_global_maxpool_backward(NULL, c.dy, c.x, c.nc, c.hw);
}
END_TEST

START_TEST(global_maxpool_by_hand)
{
    /* planes [1 7 7], [4 NaN 9 NaN] as 3 planes of 3: [1 7 7] ties on the
     * first 7; [4 NaN 9] gives NaN, its gradient on the NaN; [-2 -5 -1]
     * gives -1. dy = [1 2 4] lands on x[1], x[4], x[8], on top of 10. */
    const float x[9] = {1, 7, 7, 4, NAN, 9, -2, -5, -1}, dy[3] = {1, 2, 4};
    float y[3], dx[9];
    const double wdx[9] = {10, 11, 10, 10, 12, 10, 10, 10, 14};
    int j;
    rt_global_maxpool_forward(y, x, 3, 3);
    ck_assert(y[0] == 7 && isnan(y[1]) && y[2] == -1);
    for (j = 0; j < 9; j++)
        dx[j] = 10;
    rt_global_maxpool_backward(dx, dy, x, 3, 3);
    expect_near("dx", dx, wdx, 9, 0, 0);
}
END_TEST

/* ---- _set twin ----------------------------------------------------------- */

/* 2x2 stride 2 (every input in one window) and 3x3 stride 2 with padding
 * (overlapping windows, inputs in none: their gradient is 0). */
START_TEST(maxpool_writes)
{
    int k;
    for (k = 2; k <= 3; k++) {
        const rt_window p = pool_window(2, 3, 9, 11, k);
        size_t nin, nout;
        float *x, *dy, *want, *got;
        nin = (size_t)p.n * p.c * p.h * p.w;
        nout = (size_t)p.n * p.c * p.oh * p.ow;
        x = rnd(nin), dy = rnd(nout), want = zeros(nin), got = nans(nin);
        rt_maxpool_backward(want, dy, x, &p);
        rt_maxpool_backward_set(got, dy, x, &p, 1u);
        same_values("maxpool", want, got, nin);
        free(x), free(dy), free(want), free(got);
    }
}
END_TEST

/* ---- MaxPool's winners kept (compact residuals) ---------------------------- */

/* The window winners' forward and backward against the float kernels, bit
 * for bit, on every fast-path geometry with ties across both zeros and
 * numbered NaNs, then on every pool_setup geometry (floor, ceil, 1-D, 3-D):
 * y, dx added into random values, and the _set twins from NaNs. */
static void index_matches_float(const char *name, const rt_window *p,
                                const float *x)
{
    const size_t nx = (size_t)p->n * p->c * (p->d ? p->d : 1) * p->h * p->w;
    const size_t ny = (size_t)p->n * p->c * (p->od ? p->od : 1) * p->oh * p->ow;
    float *dy = rnd(ny), *wy = nans(ny), *y = nans(ny), *start = rnd(nx);
    float *wdx = copy(start, nx), *dx = copy(start, nx);
    unsigned char *idx = malloc(ny * (size_t)rt_maxpool_index_width(p));
    ck_assert_ptr_nonnull(idx);
    rt_maxpool_forward(wy, x, p);
    rt_maxpool_forward_index(y, idx, x, p);
    ck_assert_msg(memcmp(y, wy, ny * sizeof *y) == 0, "%s: y differs", name);
    rt_maxpool_backward(wdx, dy, x, p);
    rt_maxpool_backward_index(dx, dy, idx, p);
    ck_assert_msg(memcmp(dx, wdx, nx * sizeof *dx) == 0, "%s: dx differs",
                  name);
    free(wdx), free(dx);
    wdx = nans(nx), dx = nans(nx);
    rt_maxpool_backward_set(wdx, dy, x, p, 1u);
    rt_maxpool_backward_index_set(dx, dy, idx, p, 1u);
    ck_assert_msg(memcmp(dx, wdx, nx * sizeof *dx) == 0,
                  "%s: written dx differs", name);
    free(dy), free(wy), free(y), free(start), free(wdx), free(dx), free(idx);
}

START_TEST(maxpool_index_matches_float)
{
    int i;
    set_seed();
    for (i = 0; i < N_FAST; i++) {
        const fast_spec *f = &fast_pools[i];
        const rt_window p = f->ceil ? window_ceil(&f->s) : window_of(&f->s);
        const size_t nx = (size_t)p.n * p.c * p.h * p.w;
        float *x = malloc(nx * sizeof *x);
        ck_assert_ptr_nonnull(x);
        fill_ties(x, nx);
        index_matches_float(f->s.name, &p, x);
        free(x);
    }
    for (i = 0; i < N_POOLS + N_CEIL + N_ND; i++) {
        pool_case c = pool_setup(i, 0, 1200 + (uint64_t)i);
        index_matches_float(c.name, &c.p, c.x);
        pool_free(&c);
    }
}
END_TEST

/* GlobalMaxPool's plane winners against the float kernels, bit for bit,
 * on ties, both zeros and numbered NaNs; planes of 300 take two bytes. */
START_TEST(global_maxpool_index_matches_float)
{
    const int shapes[3][2] = {{6, 49}, {3, 300}, {2, 1}};
    int s;
    set_seed();
    for (s = 0; s < 3; s++) {
        const int nc = shapes[s][0], hw = shapes[s][1];
        const size_t nx = (size_t)nc * hw;
        float *x = malloc(nx * sizeof *x), *dy = rnd((size_t)nc);
        float *wy = nans((size_t)nc), *y = nans((size_t)nc), *start = rnd(nx);
        float *wdx = copy(start, nx), *dx = copy(start, nx);
        unsigned char *idx = malloc((size_t)nc * 4);
        ck_assert(x != NULL && idx != NULL);
        fill_ties(x, nx);
        ck_assert_int_eq(rt_global_maxpool_index_width(hw), hw > 256 ? 2 : 1);
        rt_global_maxpool_forward(wy, x, nc, hw);
        rt_global_maxpool_forward_index(y, idx, x, nc, hw);
        ck_assert(memcmp(y, wy, (size_t)nc * sizeof *y) == 0);
        rt_global_maxpool_backward(wdx, dy, x, nc, hw);
        rt_global_maxpool_backward_index(dx, dy, idx, nc, hw);
        ck_assert(memcmp(dx, wdx, nx * sizeof *dx) == 0);
        free(x), free(dy), free(wy), free(y), free(start), free(wdx), free(dx);
        free(idx);
    }
}
END_TEST

/* By hand: 1x1 windows with pads 1 over one element (the empty windows
 * send nothing back; the centre's tap 0 wins), a 2x2 window's winners as
 * tap numbers (ties to the first: x = [3 3; 1 3] -> tap 0), and the widths:
 * 16x16 = 256 taps in one byte, 17x16 = 272 in two. */
START_TEST(maxpool_index_by_hand)
{
    const win_spec s1 = {"empty", 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    const win_spec s2 = {"2x2", 1, 1, 2, 4, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0};
    const win_spec s3 = {"16x16", 1, 1, 16, 16, 0, 16, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0};
    const win_spec s4 = {"17x16", 1, 1, 17, 16, 0, 17, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0};
    const rt_window p1 = window_of(&s1), p2 = window_of(&s2),
                    p3 = window_of(&s3), p4 = window_of(&s4);
    const float x1[1] = {-7}, dy1[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    /* rows [3 3 0 -1; 1 3 -2 5]: windows [3 3; 1 3] and [0 -1; -2 5] */
    const float x2[8] = {3, 3, 0, -1, 1, 3, -2, 5}, dy2[2] = {10, 20};
    const float wdx2[8] = {10, 0, 0, 0, 0, 0, 0, 20};
    float y1[9], dx1[1] = {0}, y2[2], dx2[8] = {0};
    unsigned char idx1[9], idx2[2];
    int j;
    ck_assert_int_eq(rt_maxpool_index_width(&p1), 1);
    rt_maxpool_forward_index(y1, idx1, x1, &p1);
    for (j = 0; j < 9; j++)
        ck_assert(j == 4 ? y1[j] == -7 : y1[j] == -INFINITY);
    ck_assert_int_eq(idx1[4], 0);
    rt_maxpool_backward_index(dx1, dy1, idx1, &p1);
    ck_assert_float_eq(dx1[0], 5);
    rt_maxpool_forward_index(y2, idx2, x2, &p2);
    ck_assert(y2[0] == 3 && y2[1] == 5);
    ck_assert(idx2[0] == 0 && idx2[1] == 3);
    rt_maxpool_backward_index(dx2, dy2, idx2, &p2);
    for (j = 0; j < 8; j++)
        ck_assert_float_eq(dx2[j], wdx2[j]);
    ck_assert_int_eq(rt_maxpool_index_width(&p3), 1);
    ck_assert_int_eq(rt_maxpool_index_width(&p4), 2);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *pool_suite(void)
{
    Suite *s = suite_create("remat_rt pool");
    TCase *tc;

    tc = tcase_create("pool");
    tcase_add_loop_test(tc, pool_forward_matches_definition, 0,
                        3 * (N_POOLS + N_CEIL + N_ND));
    tcase_add_loop_test(tc, pool_grad, 0, 3 * (N_POOLS + N_CEIL + N_ND));
    tcase_add_test(tc, pool_ceil_mode_by_hand);
    tcase_add_test(tc, avgpool_ceil_clips_to_padded_input);
    tcase_add_test(tc, maxpool_ties_by_hand);
    tcase_add_test(tc, maxpool_padding_by_hand);
    tcase_add_test(tc, maxpool_nan_and_empty_windows);
    tcase_add_test(tc, avgpool_by_hand);
    tcase_add_loop_test(tc, pool_fast_paths_match_generic, 0, 3 * N_FAST);
    tcase_add_test(tc, maxpool_fast_ties_by_hand);
    tcase_add_test(tc, maxpool_index_matches_float);
    tcase_add_test(tc, maxpool_index_by_hand);
    tcase_add_test(tc, global_maxpool_index_matches_float);
    suite_add_tcase(s, tc);

    tc = tcase_create("global_avgpool");
    tcase_add_test(tc, global_avgpool);
    tcase_add_test(tc, global_avgpool_by_hand);
    tcase_add_test(tc, global_avgpool_does_not_drift);
    tcase_add_test(tc, avgpool_large_window_does_not_drift);
    tcase_add_test(tc, global_maxpool);
    tcase_add_test(tc, global_maxpool_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("set");
    tcase_add_checked_fixture(tc, set_seed, NULL);
    tcase_add_test(tc, maxpool_writes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pool_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
