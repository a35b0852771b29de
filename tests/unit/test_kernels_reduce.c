/*
 * test_kernels_reduce.c: unit tests of the runtime's reductions
 * (rt_reduce_forward, rt_reduce_backward: ReduceSum, and ReduceMean as a
 * scaled sum, over any of x's dimensions; ReduceMax and ReduceMin, whose
 * backward shares a tie's gradient; ReduceL1, ReduceL2, ReduceSumSquare
 * and ReduceLogSumExp, against double-precision formulas; ArgMax and
 * ArgMin, the index of the extreme along one axis; CumSum in its four
 * modes, and over 2^20 values without drift), with Check.
 *
 * The backward is checked against central finite differences of the
 * forward (rt_testutil.h), with loss L = sum(dy * y) for a random upstream
 * gradient dy, from a random preset gradient so that `+=` is tested. The
 * forward is checked against sums worked out by hand, not against the
 * kernels themselves.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- reductions ---------------------------------------------------------- */

typedef struct {
    const char *name;
    int sb[3]; /* y's strides over x's dims (2,3,4), 0 where reduced */
    int ny;
    float scale;
} reduce_spec;

static const int rdims[3] = {2, 3, 4}, rsa[3] = {12, 4, 1};
static const reduce_spec reduces[] = {
    {"sum axis 1", {4, 0, 1}, 8, 1.0f},
    {"mean axis 1", {4, 0, 1}, 8, 1.0f / 3},
    {"sum axes 0,2", {0, 1, 0}, 3, 1.0f},
    {"mean all", {0, 0, 0}, 1, 1.0f / 24},
    {"sum axis 2", {3, 1, 0}, 6, 1.0f},
};
#define N_REDUCES ((int)(sizeof reduces / sizeof reduces[0]))

typedef struct {
    rt_bcast m;
    float x[24], y[24], dy[24];
    int ny;
    float scale;
} reduce_case;

static double reduce_loss(void *v)
{
    reduce_case *c = v;
    memset(c->y, 0x7f, sizeof c->y); /* garbage: forward must overwrite */
    rt_reduce_forward(c->y, c->x, &c->m, c->ny, c->scale);
    return dot(c->y, c->dy, c->ny);
}

START_TEST(reduce_grad)
{
    const reduce_spec *r = &reduces[_i];
    reduce_case c;
    float dx[24], px[24], diff[24];
    c.m = make_bcast(3, rdims, rsa, r->sb);
    c.ny = r->ny, c.scale = r->scale;
    tseed(500 + _i);
    fill(c.x, 24, -1, 1);
    fill(c.dy, c.ny, -1, 1);
    fill(px, 24, -1, 1);
    memcpy(dx, px, sizeof dx);
    rt_reduce_backward(dx, c.dy, &c.m, c.scale);
    added(diff, dx, px, 24);
    expect_grad(r->name, c.x, 24, diff, reduce_loss, &c);
}
END_TEST

START_TEST(reduce_forward_by_hand)
{
    /* x = 0..23 as (2,3,4), x[i][j][l] = 12i + 4j + l.
     * axis 1: y[i][l] = 3(12i + l) + 12 -> {12 15 18 21; 48 51 54 57}
     * axes 0,2: y[j] = sum_i sum_l = 48 + 32j + 12 -> {60 92 124}
     * all: 276, mean 11.5; axis 2: 48i + 16j + 6 */
    const double w1[8] = {12, 15, 18, 21, 48, 51, 54, 57}, w02[3] = {60, 92, 124},
                 wall[1] = {11.5}, w2[6] = {6, 22, 38, 54, 70, 86};
    const double *want[5] = {w1, NULL, w02, wall, w2};
    reduce_case c;
    int i, r;
    for (i = 0; i < 24; i++)
        c.x[i] = (float)i;
    for (r = 0; r < N_REDUCES; r++) {
        if (want[r] == NULL)
            continue;
        c.m = make_bcast(3, rdims, rsa, reduces[r].sb);
        c.ny = reduces[r].ny, c.scale = reduces[r].scale;
        memset(c.dy, 0, sizeof c.dy);
        reduce_loss(&c);
        expect_near(reduces[r].name, c.y, want[r], c.ny, 1e-7, 0);
    }
}
END_TEST

START_TEST(reduce_backward_by_hand)
{
    /* mean over all 24 with dy = 2: dx += 2/24 on top of the preset 1. */
    const int sb[3] = {0, 0, 0};
    const rt_bcast m = make_bcast(3, rdims, rsa, sb);
    const float dy[1] = {2};
    float dx[24];
    int i;
    rt_fill(dx, 24, 1.0f);
    rt_reduce_backward(dx, dy, &m, 1.0f / 24);
    for (i = 0; i < 24; i++)
        ck_assert_float_eq_tol(dx[i], 1.0f + 2.0f / 24, 1e-7f);
}
END_TEST

/* ---- ReduceMax and ReduceMin --------------------------------------------- */

typedef struct {
    reduce_case r;
    int min;
} extreme_case;

static double extreme_loss(void *v)
{
    extreme_case *c = v;
    memset(c->r.y, 0x7f, sizeof c->r.y);
    if (c->min)
        rt_reduce_min_forward(c->r.y, c->r.x, &c->r.m, c->r.ny);
    else
        rt_reduce_max_forward(c->r.y, c->r.x, &c->r.m, c->r.ny);
    return dot(c->r.y, c->r.dy, c->r.ny);
}

/* x: the values -1.2, -1.1, ..., 1.1 in a random order, 0.1 apart, so a
 * finite-difference step never changes which one is the extreme. */
static void extreme_setup(extreme_case *c, int k, int min, uint64_t seed)
{
    int i;
    c->r.m = make_bcast(3, rdims, rsa, reduces[k].sb);
    c->r.ny = reduces[k].ny;
    c->min = min;
    tseed(seed);
    for (i = 0; i < 24; i++)
        c->r.x[i] = 0.1f * (float)(i - 12);
    for (i = 23; i > 0; i--) {
        const int j = (int)trand(0, (float)i + 0.999f);
        const float t = c->r.x[i];
        c->r.x[i] = c->r.x[j];
        c->r.x[j] = t;
    }
    fill(c->r.dy, (size_t)c->r.ny, -1, 1);
}

START_TEST(extreme_grad)
{
    extreme_case c;
    float dx[24], px[24], diff[24];
    extreme_setup(&c, _i / 2, _i % 2, 900 + _i);
    extreme_loss(&c);
    fill(px, 24, -1, 1);
    memcpy(dx, px, sizeof dx);
    rt_reduce_extreme_backward(dx, c.r.dy, c.r.x, c.r.y, &c.r.m, c.r.ny,
                               c.r.y + 12);
    added(diff, dx, px, 24);
    expect_grad(reduces[_i / 2].name, c.r.x, 24, diff, extreme_loss, &c);
}
END_TEST

/* Each output against the extreme of its group found by index arithmetic:
 * x[i][j][l] contributes to y at sum of coordinate * sb. */
START_TEST(extreme_forward_by_index)
{
    extreme_case c;
    double want[24];
    int i, j, l;
    extreme_setup(&c, _i / 2, _i % 2, 950 + _i);
    extreme_loss(&c);
    for (i = 0; i < c.r.ny; i++)
        want[i] = c.min ? 1e30 : -1e30;
    for (i = 0; i < 2; i++)
        for (j = 0; j < 3; j++)
            for (l = 0; l < 4; l++) {
                const int *sb = reduces[_i / 2].sb;
                const int o = i * sb[0] + j * sb[1] + l * sb[2];
                const double v = c.r.x[12 * i + 4 * j + l];
                if (c.min ? v < want[o] : v > want[o])
                    want[o] = v;
            }
    expect_near(reduces[_i / 2].name, c.r.y, want, (size_t)c.r.ny, 0, 0);
}
END_TEST

/* Ties share the gradient evenly (torch.amax); a NaN makes the group NaN;
 * an empty group is -inf. Worked by hand. */
START_TEST(extreme_ties_by_hand)
{
    const int dims[1] = {4}, sa[1] = {1}, sb[1] = {0}, d0[1] = {0};
    const float x[4] = {1, 3, 3, 2}, nan4[4] = {1, NAN, 5, 2}, dy[1] = {6};
    float y[1], dx[4] = {0, 0, 0, 0}, count[1];
    const double wdx[4] = {0, 3, 3, 0};
    rt_bcast m = make_bcast(1, dims, sa, sb), e = make_bcast(1, d0, sa, sb);
    rt_reduce_max_forward(y, x, &m, 1);
    ck_assert(y[0] == 3);
    rt_reduce_extreme_backward(dx, dy, x, y, &m, 1, count);
    expect_near("tied max dx", dx, wdx, 4, 0, 0);
    rt_reduce_min_forward(y, x, &m, 1);
    ck_assert(y[0] == 1);
    rt_reduce_max_forward(y, nan4, &m, 1);
    ck_assert(isnan(y[0]));
    rt_reduce_max_forward(y, x, &e, 1);
    ck_assert(isinf(y[0]) && y[0] < 0);
    rt_reduce_extreme_backward(NULL, dy, x, y, &m, 1, count);
}
END_TEST

/* ---- sums that do not drift (issue 25) ----------------------------------- */

/* x (2^17, 3) reduced over axis 0 (each y a strided sum of 2^17 values)
 * and over both (ReduceMean of all): within a few ulps of float64, and the
 * same bits on 1, 2 and 3 threads. */
START_TEST(reduce_long_sums_do_not_drift)
{
    const int rows = 1 << 17, dims[2] = {1 << 17, 3}, sa[2] = {3, 1};
    const int sb_axis0[2] = {0, 1}, sb_all[2] = {0, 0};
    const rt_bcast axis0 = make_bcast(2, dims, sa, sb_axis0);
    const rt_bcast all = make_bcast(2, dims, sa, sb_all);
    float *x = drift_values((size_t)rows * 3, 11, 0.02f);
    float y[3], mean, y1[3], mean1;
    double want[3] = {0, 0, 0}, want_mean;
    int i, j, t;
    for (i = 0; i < rows; i++)
        for (j = 0; j < 3; j++)
            want[j] += x[i * 3 + j];
    want_mean = (want[0] + want[1] + want[2]) / (3.0 * rows);
    for (t = 1; t <= 3; t++) {
        rt_set_threads(t);
        rt_reduce_forward(y, x, &axis0, 3, 1.0f);
        rt_reduce_forward(&mean, x, &all, 1, 1.0f / (3.0f * rows));
        for (j = 0; j < 3; j++)
            ck_assert_msg(fabs(y[j] - want[j]) <= 4e-7 * want[j],
                          "sum %d: %.9g, double %.12g", j, y[j], want[j]);
        ck_assert_msg(fabs(mean - want_mean) <= 4e-7 * want_mean,
                      "mean %.9g, double %.12g", mean, want_mean);
        if (t == 1) {
            memcpy(y1, y, sizeof y);
            mean1 = mean;
        }
        ck_assert(memcmp(y, y1, sizeof y) == 0);
        ck_assert(memcmp(&mean, &mean1, sizeof mean) == 0);
    }
    rt_set_threads(1);
    free(x);
}
END_TEST

/* ---- ArgMax and ArgMin (issue 25) ---------------------------------------- */

/* x (2, 3, 2) with ties and a NaN, each index worked by hand along each
 * axis, first and last among equals. */
START_TEST(arg_by_hand)
{
    const float nan = NAN;
    /* x[o][k][i]: o in 0..1, k in 0..2, i in 0..1 */
    const float x[12] = {1, 5, 3, 5, 3, -2,     /* o = 0: k0 (1,5) k1 (3,5) k2 (3,-2) */
                         0, nan, -1, 2, -1, nan}; /* o = 1: k0 (0,NaN) k1 (-1,2) k2 (-1,NaN) */
    int64_t y[12];
    /* along axis 1 (outer 2, n 3, inner 2) */
    const int64_t amax_first[4] = {1, 0, 0, 0}, amax_last[4] = {2, 1, 0, 2};
    const int64_t amin_first[4] = {0, 2, 1, 0}, amin_last[4] = {0, 2, 2, 2};
    /* along axis 2 (outer 6, n 2, inner 1): pairs (1,5) (3,5) (3,-2)
     * (0,NaN) (-1,2) (-1,NaN) */
    const int64_t amax2[6] = {1, 1, 0, 1, 1, 1}, amin2[6] = {0, 0, 1, 1, 0, 1};
    /* along axis 0 (outer 1, n 2, inner 6) */
    const int64_t amax0[6] = {0, 1, 0, 0, 0, 1}, amin0[6] = {1, 1, 1, 1, 1, 1};
    int i;

    rt_argmax_forward(y, x, 2, 3, 2, 0);
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(y[i], amax_first[i]);
    rt_argmax_forward(y, x, 2, 3, 2, 1);
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(y[i], amax_last[i]);
    rt_argmin_forward(y, x, 2, 3, 2, 0);
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(y[i], amin_first[i]);
    rt_argmin_forward(y, x, 2, 3, 2, 1);
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(y[i], amin_last[i]);
    rt_argmax_forward(y, x, 6, 2, 1, 0);
    for (i = 0; i < 6; i++)
        ck_assert_int_eq(y[i], amax2[i]);
    rt_argmin_forward(y, x, 6, 2, 1, 0);
    for (i = 0; i < 6; i++)
        ck_assert_int_eq(y[i], amin2[i]);
    rt_argmax_forward(y, x, 1, 2, 6, 0);
    for (i = 0; i < 6; i++)
        ck_assert_int_eq(y[i], amax0[i]);
    rt_argmin_forward(y, x, 1, 2, 6, 0);
    for (i = 0; i < 6; i++)
        ck_assert_int_eq(y[i], amin0[i]);
}
END_TEST

/* A row of random values: the index found is where the row's largest
 * (smallest) value is, compared with every other (an independent scan). */
START_TEST(arg_random_rows)
{
    enum { N = 37, ROWS = 5 };
    float x[ROWS * N];
    int64_t ymax[ROWS], ymin[ROWS];
    int r, k;
    fill(x, ROWS * N, -1.0f, 1.0f);
    rt_argmax_forward(ymax, x, ROWS, N, 1, 0);
    rt_argmin_forward(ymin, x, ROWS, N, 1, 0);
    for (r = 0; r < ROWS; r++) {
        ck_assert(ymax[r] >= 0 && ymax[r] < N && ymin[r] >= 0 && ymin[r] < N);
        for (k = 0; k < N; k++) {
            ck_assert(x[r * N + k] <= x[r * N + ymax[r]]);
            ck_assert(x[r * N + k] >= x[r * N + ymin[r]]);
        }
    }
}
END_TEST

/* ---- CumSum (issue 25) ---------------------------------------------------- */

/* x = 1 2 3 4 along the axis: the four modes worked by hand. */
START_TEST(cumsum_forward_by_hand)
{
    const float x[4] = {1, 2, 3, 4};
    static const float want[4][4] = {
        {1, 3, 6, 10}, /* inclusive */
        {0, 1, 3, 6},  /* exclusive */
        {10, 9, 7, 4}, /* reverse */
        {9, 7, 4, 0},  /* exclusive, reverse */
    };
    float y[4];
    int mode;
    for (mode = 0; mode < 4; mode++) {
        rt_fill(y, 4, NAN);
        rt_cumsum_forward(y, x, 1, 4, 1, mode & 1, mode >> 1);
        expect_same("cumsum", y, want[mode], 4);
    }
}
END_TEST

enum { CS_OUTER = 2, CS_N = 5, CS_INNER = 3, CS_SIZE = 30 };

/* ONNX's definition in double, lane by lane: y[o, k, i] = sum of x[o, j, i]
 * over the j the mode takes. */
static void cumsum_want(double *want, const float *x, int exclusive,
                        int reverse)
{
    int o, k, i, j;
    for (o = 0; o < CS_OUTER; o++)
        for (k = 0; k < CS_N; k++)
            for (i = 0; i < CS_INNER; i++) {
                double s = 0;
                for (j = 0; j < CS_N; j++) {
                    const int take = reverse ? (exclusive ? j > k : j >= k)
                                             : (exclusive ? j < k : j <= k);
                    if (take)
                        s += x[(o * CS_N + j) * CS_INNER + i];
                }
                want[(o * CS_N + k) * CS_INNER + i] = s;
            }
}

typedef struct {
    float x[CS_SIZE], y[CS_SIZE], dy[CS_SIZE];
    int exclusive, reverse;
} cumsum_case;

static double cumsum_loss(void *v)
{
    cumsum_case *c = v;
    rt_cumsum_forward(c->y, c->x, CS_OUTER, CS_N, CS_INNER, c->exclusive,
                      c->reverse);
    return dot(c->y, c->dy, CS_SIZE);
}

/* (2, 5, 3) along the middle axis (strided lanes), each mode (_i): the
 * forward against the definition, the backward against central
 * differences; it adds, and a NULL gradient is skipped. */
START_TEST(cumsum_strided_and_grad)
{
    cumsum_case c;
    float dx[CS_SIZE], pre[CS_SIZE], diff[CS_SIZE];
    double want[CS_SIZE];
    c.exclusive = _i & 1;
    c.reverse = _i >> 1;
    tseed(2600 + (unsigned)_i);
    fill(c.x, CS_SIZE, -1, 1);
    fill(c.dy, CS_SIZE, -1, 1);
    fill(pre, CS_SIZE, -1, 1);
    rt_cumsum_forward(c.y, c.x, CS_OUTER, CS_N, CS_INNER, c.exclusive,
                      c.reverse);
    cumsum_want(want, c.x, c.exclusive, c.reverse);
    expect_near("cumsum", c.y, want, CS_SIZE, 1e-6, 1e-6);
    memcpy(dx, pre, sizeof dx);
    rt_cumsum_backward(dx, c.dy, CS_OUTER, CS_N, CS_INNER, c.exclusive,
                       c.reverse);
    added(diff, dx, pre, CS_SIZE);
    expect_grad("cumsum dx", c.x, CS_SIZE, diff, cumsum_loss, &c);
    rt_cumsum_backward(NULL, c.dy, CS_OUTER, CS_N, CS_INNER, c.exclusive,
                       c.reverse);
}
END_TEST

/* 2^20 values of 0.1 + noise in each of 3 lanes: every prefix within a
 * few ulps of float64's (a plain float running sum is off by about 1e-3
 * relative near the end), and the same bits on 1, 2 and 3 threads. */
START_TEST(cumsum_long_does_not_drift)
{
    const int n = 1 << 20;
    const size_t size = (size_t)n * 3;
    float *x = drift_values(size, 12, 0.02f), *y = nans(size),
          *y1 = nans(size);
    double s[3] = {0, 0, 0}, worst = 0;
    int k, i, t;
    for (t = 1; t <= 3; t++) {
        rt_set_threads(t);
        rt_cumsum_forward(y, x, 1, n, 3, 0, 0);
        if (t == 1)
            memcpy(y1, y, size * sizeof *y);
        ck_assert(memcmp(y, y1, size * sizeof *y) == 0);
    }
    rt_set_threads(1);
    for (k = 0; k < n; k++)
        for (i = 0; i < 3; i++) {
            const size_t at = (size_t)k * 3 + i;
            double e;
            s[i] += x[at];
            e = fabs(y[at] - s[i]) / s[i];
            worst = e > worst ? e : worst;
        }
    ck_assert_msg(worst <= 4e-7, "worst relative error %.3g", worst);
    free(x);
    free(y);
    free(y1);
}
END_TEST

/* ---- ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSumExp (issue 25) ---- */

enum { T_L1, T_L2, T_SQUARE, T_LSE, T_COUNT };
static const char *const term_names[T_COUNT] = {"l1", "l2", "sum_square",
                                                "log_sum_exp"};

typedef struct {
    reduce_case r;
    int op;
    float sums[24];
} term_case;

static void term_forward(term_case *c)
{
    switch (c->op) {
    case T_L1: rt_reduce_l1_forward(c->r.y, c->r.x, &c->r.m, c->r.ny); break;
    case T_L2: rt_reduce_l2_forward(c->r.y, c->r.x, &c->r.m, c->r.ny); break;
    case T_SQUARE:
        rt_reduce_sum_square_forward(c->r.y, c->r.x, &c->r.m, c->r.ny);
        break;
    default:
        rt_reduce_log_sum_exp_forward(c->r.y, c->r.x, &c->r.m, c->r.ny,
                                      c->sums);
    }
}

static void term_backward(const term_case *c, float *dx)
{
    switch (c->op) {
    case T_L1: rt_reduce_l1_backward(dx, c->r.dy, c->r.x, &c->r.m); break;
    case T_L2:
        rt_reduce_l2_backward(dx, c->r.dy, c->r.x, c->r.y, &c->r.m);
        break;
    case T_SQUARE:
        rt_reduce_sum_square_backward(dx, c->r.dy, c->r.x, &c->r.m);
        break;
    default:
        rt_reduce_log_sum_exp_backward(dx, c->r.dy, c->r.x, c->r.y, &c->r.m);
    }
}

static double term_loss(void *v)
{
    term_case *c = v;
    memset(c->r.y, 0x7f, sizeof c->r.y); /* garbage: forward must overwrite */
    memset(c->sums, 0x7f, sizeof c->sums);
    term_forward(c);
    return dot(c->r.y, c->r.dy, (size_t)c->r.ny);
}

/* The reduction of x (2,3,4) by the map of reduces[k], in double: each
 * x[i][j][l] lands on y at i sb0 + j sb1 + l sb2. */
static void term_want(const term_case *c, int k, double *want)
{
    const int *sb = reduces[k].sb;
    double mx[24];
    int i, j, l, o;
    for (o = 0; o < c->r.ny; o++) {
        want[o] = 0;
        mx[o] = -INFINITY;
    }
    for (i = 0; i < 24; i++) {
        o = i / 12 * sb[0] + i / 4 % 3 * sb[1] + i % 4 * sb[2];
        if (c->r.x[i] > mx[o])
            mx[o] = c->r.x[i];
    }
    for (i = 0; i < 2; i++)
        for (j = 0; j < 3; j++)
            for (l = 0; l < 4; l++) {
                const double v = c->r.x[12 * i + 4 * j + l];
                o = i * sb[0] + j * sb[1] + l * sb[2];
                want[o] += c->op == T_L1 ? fabs(v)
                           : c->op == T_LSE ? exp(v - mx[o]) : v * v;
            }
    for (o = 0; o < c->r.ny; o++)
        want[o] = c->op == T_L2 ? sqrt(want[o])
                  : c->op == T_LSE ? mx[o] + log(want[o]) : want[o];
}

/* _i = map * T_COUNT + op; x away from 0 (|x|'s kink) */
static void term_setup(term_case *c, int i, uint64_t seed)
{
    const int k = i / T_COUNT;
    c->op = i % T_COUNT;
    c->r.m = make_bcast(3, rdims, rsa, reduces[k].sb);
    c->r.ny = reduces[k].ny;
    tseed(seed);
    fill_away(c->r.x, 24, 0.2f, 2);
    fill(c->r.dy, (size_t)c->r.ny, -1, 1);
}

START_TEST(term_grad)
{
    term_case c;
    float dx[24], px[24], diff[24];
    term_setup(&c, _i, 1300 + (uint64_t)_i);
    term_loss(&c);
    fill(px, 24, -1, 1);
    memcpy(dx, px, sizeof dx);
    term_backward(&c, dx);
    added(diff, dx, px, 24);
    expect_grad(term_names[c.op], c.r.x, 24, diff, term_loss, &c);
    term_backward(&c, NULL); /* no gradient wanted: nothing touched */
}
END_TEST

START_TEST(term_forward_vs_double)
{
    term_case c;
    double want[24];
    term_setup(&c, _i, 1400 + (uint64_t)_i);
    term_loss(&c);
    term_want(&c, _i / T_COUNT, want);
    expect_near(term_names[c.op], c.r.y, want, (size_t)c.r.ny, 2e-6, 1e-7);
}
END_TEST

/* By hand: x = (3, -4, 0, 12) over its one axis: L1 19, SumSquare 169,
 * L2 13; L2's gradient x / 13 and L1's sign(x), 0 at 0; an all-zero group
 * has L2 0 and gradient 0 (torch's norm), not NaN. LogSumExp of (1000,
 * 1000) is 1000 + ln 2 with no overflow, of (-inf, -inf) -inf, of (inf,
 * 1) inf; its gradient softmax(x) dy. */
START_TEST(term_by_hand)
{
    const int dims[1] = {4}, sa[1] = {1}, sb[1] = {0}, d2[1] = {2};
    const rt_bcast m = make_bcast(1, dims, sa, sb), m2 = make_bcast(1, d2, sa, sb);
    const float x[4] = {3, -4, 0, 12}, z[4] = {0, 0, 0, 0}, dy[1] = {26};
    const float big[2] = {1000, 1000}, ninf[2] = {-INFINITY, -INFINITY},
                pinf[2] = {INFINITY, 1}, two[2] = {0, 0.693147181f};
    float y[1], dx[4], sums[1];
    const double wl2[4] = {6, -8, 0, 24}, wl1[4] = {26, -26, 0, 26},
                 wsq[4] = {156, -208, 0, 624}, wz[4] = {0, 0, 0, 0},
                 wlse[2] = {26.0 / 3, 52.0 / 3};
    rt_reduce_l1_forward(y, x, &m, 1);
    ck_assert(y[0] == 19);
    rt_reduce_sum_square_forward(y, x, &m, 1);
    ck_assert(y[0] == 169);
    rt_reduce_l2_forward(y, x, &m, 1);
    ck_assert(y[0] == 13);
    memset(dx, 0, sizeof dx);
    rt_reduce_l2_backward(dx, dy, x, y, &m);
    expect_near("l2 dx", dx, wl2, 4, 1e-7, 0);
    memset(dx, 0, sizeof dx);
    rt_reduce_l1_backward(dx, dy, x, &m);
    expect_near("l1 dx", dx, wl1, 4, 0, 0);
    memset(dx, 0, sizeof dx);
    rt_reduce_sum_square_backward(dx, dy, x, &m);
    expect_near("sum_square dx", dx, wsq, 4, 0, 0);
    rt_reduce_l2_forward(y, z, &m, 1);
    ck_assert(y[0] == 0);
    memset(dx, 0, sizeof dx);
    rt_reduce_l2_backward(dx, dy, z, y, &m);
    expect_near("l2 dx at 0", dx, wz, 4, 0, 0);
    rt_reduce_log_sum_exp_forward(y, big, &m2, 1, sums);
    ck_assert_msg(y[0] == 1000.0f + 0.693147181f, "lse(1000, 1000) = %.9g",
                  (double)y[0]);
    rt_reduce_log_sum_exp_forward(y, ninf, &m2, 1, sums);
    ck_assert(isinf(y[0]) && y[0] < 0);
    rt_reduce_log_sum_exp_forward(y, pinf, &m2, 1, sums);
    ck_assert(isinf(y[0]) && y[0] > 0);
    /* softmax(0, ln 2) = (1/3, 2/3) */
    rt_reduce_log_sum_exp_forward(y, two, &m2, 1, sums);
    memset(dx, 0, sizeof dx);
    rt_reduce_log_sum_exp_backward(dx, dy, two, y, &m2);
    expect_near("lse dx", dx, wlse, 2, 1e-6, 0);
}
END_TEST

/* Over 2^17 rows (each y a strided sum of 2^17 terms): L1, SumSquare
 * and LogSumExp within a few ulps of double, the same bits on 1, 2 and
 * 3 threads. */
START_TEST(term_long_sums_do_not_drift)
{
    const int rows = 1 << 17, dims[2] = {1 << 17, 3}, sa[2] = {3, 1};
    const int sb[2] = {0, 1};
    const rt_bcast m = make_bcast(2, dims, sa, sb);
    float *x = drift_values((size_t)rows * 3, 12, 0.02f);
    float y[3][3], y1[3][3], sums[3];
    double want[3][3] = {{0}};
    int i, j, t, op;
    for (i = 0; i < rows; i++)
        for (j = 0; j < 3; j++) {
            const double v = x[i * 3 + j];
            want[0][j] += fabs(v);
            want[1][j] += v * v;
            want[2][j] += exp(v);
        }
    for (j = 0; j < 3; j++)
        want[2][j] = log(want[2][j]);
    for (t = 1; t <= 3; t++) {
        rt_set_threads(t);
        rt_reduce_l1_forward(y[0], x, &m, 3);
        rt_reduce_sum_square_forward(y[1], x, &m, 3);
        rt_reduce_log_sum_exp_forward(y[2], x, &m, 3, sums);
        for (op = 0; op < 3; op++)
            for (j = 0; j < 3; j++)
                ck_assert_msg(fabs(y[op][j] - want[op][j]) <=
                                  4e-7 * fabs(want[op][j]),
                              "op %d sum %d: %.9g, double %.12g", op, j,
                              (double)y[op][j], want[op][j]);
        if (t == 1)
            memcpy(y1, y, sizeof y);
        ck_assert(memcmp(y, y1, sizeof y) == 0);
    }
    rt_set_threads(1);
    free(x);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *reduce_suite(void)
{
    Suite *s = suite_create("remat_rt reduce");
    TCase *tc;

    tc = tcase_create("reduce");
    tcase_add_loop_test(tc, reduce_grad, 0, N_REDUCES);
    tcase_add_test(tc, reduce_forward_by_hand);
    tcase_add_test(tc, reduce_backward_by_hand);
    suite_add_tcase(s, tc);
    tc = tcase_create("extreme");
    tcase_add_loop_test(tc, extreme_grad, 0, 2 * N_REDUCES);
    tcase_add_loop_test(tc, extreme_forward_by_index, 0, 2 * N_REDUCES);
    tcase_add_test(tc, extreme_ties_by_hand);
    suite_add_tcase(s, tc);
    tc = tcase_create("arg");
    tcase_add_test(tc, arg_by_hand);
    tcase_add_test(tc, arg_random_rows);
    suite_add_tcase(s, tc);

    tc = tcase_create("terms");
    tcase_add_loop_test(tc, term_grad, 0, T_COUNT * N_REDUCES);
    tcase_add_loop_test(tc, term_forward_vs_double, 0, T_COUNT * N_REDUCES);
    tcase_add_test(tc, term_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("sums");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reduce_long_sums_do_not_drift);
    tcase_add_test(tc, term_long_sums_do_not_drift);
    suite_add_tcase(s, tc);

    tc = tcase_create("cumsum");
    tcase_add_test(tc, cumsum_forward_by_hand);
    tcase_add_loop_test(tc, cumsum_strided_and_grad, 0, 4);
    tcase_add_test(tc, cumsum_long_does_not_drift);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reduce_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
