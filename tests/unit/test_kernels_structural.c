/*
 * test_kernels_structural.c: unit tests of the runtime's structural
 * kernels (Concat, Split, Slice, Transpose, Gather, GatherElements,
 * OneHot, and Transpose's _set twin; DepthToSpace in both modes and
 * SpaceToDepth), with Check. The Makefile builds it twice, with BLAS and with
 * -DRT_NO_BLAS.
 *
 * Forwards are checked against numbers worked out by hand or index
 * arithmetic written here, never against the kernels themselves; backwards
 * against central finite differences of the forward (rt_testutil.h), from
 * a random preset gradient so that `+=` is tested, and with NULL
 * gradients. The _set twin is checked against the adding kernel as
 * rt_testutil.h's same_values says.
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

/* ---- Concat -------------------------------------------------------------- */

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

/* ---- Split --------------------------------------------------------------- */

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

/* ---- Slice --------------------------------------------------------------- */

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

/* ---- Transpose ----------------------------------------------------------- */

/* y's shape: ydims[d] = dims[perm[d]]. */
static int y_dims(int rank, const int *dims, const int *perm, int *ydims)
{
    int d, n = 1;
    for (d = 0; d < rank; d++) {
        ydims[d] = dims[perm[d]];
        n *= dims[d];
    }
    return n;
}

static void inverse_perm(int rank, const int *perm, int *inv)
{
    int d;
    for (d = 0; d < rank; d++)
        inv[perm[d]] = d;
}

/* (2,3,4,5) with perm (0 2 1 3): y[a][c][b][d] = x[a][b][c][d], y (2,4,3,5),
 * the swap of heads and sequence in attention. */
START_TEST(transpose_rank4_0213_by_index)
{
    const int dims[4] = {2, 3, 4, 5}, perm[4] = {0, 2, 1, 3};
    float x[120], y[120];
    int a, b, c, d;
    for (a = 0; a < 120; a++)
        x[a] = (float)a;
    rt_transpose_forward(y, x, 4, dims, perm);
    for (a = 0; a < 2; a++)
        for (b = 0; b < 3; b++)
            for (c = 0; c < 4; c++)
                for (d = 0; d < 5; d++)
                    ck_assert_float_eq(y[((a * 4 + c) * 3 + b) * 5 + d],
                                       x[((a * 3 + b) * 4 + c) * 5 + d]);
}
END_TEST

/* (2,3,4) with perm (2 0 1): y[k][i][j] = x[i][j][k], y (4,2,3). */
START_TEST(transpose_rank3_201_by_index)
{
    const int dims[3] = {2, 3, 4}, perm[3] = {2, 0, 1};
    float x[24], y[24];
    int i, j, k;
    for (i = 0; i < 24; i++)
        x[i] = (float)i;
    rt_transpose_forward(y, x, 3, dims, perm);
    for (i = 0; i < 2; i++)
        for (j = 0; j < 3; j++)
            for (k = 0; k < 4; k++)
                ck_assert_float_eq(y[(k * 2 + i) * 3 + j],
                                   x[(i * 3 + j) * 4 + k]);
}
END_TEST

typedef struct {
    int rank, dims[RT_MAX_RANK], perm[RT_MAX_RANK], n;
    float x[720], y[720], dy[720];
} tr_case;

static const tr_case tr_cases[] = {
    {4, {2, 3, 4, 5}, {0, 2, 1, 3}, 120, {0}, {0}, {0}},
    {3, {2, 3, 4}, {2, 0, 1}, 24, {0}, {0}, {0}},
    {2, {3, 5}, {1, 0}, 15, {0}, {0}, {0}},
    {1, {7}, {0}, 7, {0}, {0}, {0}},
    {6, {2, 1, 3, 2, 1, 2}, {5, 3, 0, 4, 2, 1}, 24, {0}, {0}, {0}},
};
#define N_TR ((int)(sizeof tr_cases / sizeof tr_cases[0]))

static double tr_loss(void *v)
{
    tr_case *c = v;
    rt_transpose_forward(c->y, c->x, c->rank, c->dims, c->perm);
    return dot(c->y, c->dy, c->n);
}

START_TEST(transpose_grad)
{
    static tr_case c;
    static float dx[720], px[720], diff[720];
    char what[32];
    c = tr_cases[_i];
    tseed(1700 + _i);
    fill(c.x, c.n, -1, 1);
    fill(c.dy, c.n, -1, 1);
    fill(px, c.n, -1, 1);
    memcpy(dx, px, sizeof dx);
    rt_transpose_backward(dx, c.dy, c.rank, c.dims, c.perm);
    added(diff, dx, px, c.n);
    snprintf(what, sizeof what, "transpose rank %d dx", c.rank);
    expect_grad(what, c.x, c.n, diff, tr_loss, &c);
    rt_transpose_backward(NULL, c.dy, c.rank, c.dims, c.perm);
}
END_TEST

/* The backward adds dy transposed by the inverse perm, on y's dims. */
START_TEST(transpose_backward_is_inverse_transpose)
{
    static tr_case c;
    static float dx[720], pre[720], back[720];
    int ydims[RT_MAX_RANK], inv[RT_MAX_RANK], i;
    c = tr_cases[_i];
    tseed(1800 + _i);
    fill(c.dy, c.n, -1, 1);
    fill(pre, c.n, -1, 1);
    memcpy(dx, pre, sizeof dx);
    rt_transpose_backward(dx, c.dy, c.rank, c.dims, c.perm);
    y_dims(c.rank, c.dims, c.perm, ydims);
    inverse_perm(c.rank, c.perm, inv);
    rt_transpose_forward(back, c.dy, c.rank, ydims, inv);
    for (i = 0; i < c.n; i++)
        ck_assert_msg(dx[i] == pre[i] + back[i], "rank %d [%d]: %g, want %g",
                      c.rank, i, (double)dx[i], (double)(pre[i] + back[i]));
}
END_TEST

/* All 24 perms of rank 4: the forward with perm then with its inverse is
 * the identity, and every element lands where index arithmetic says. */
START_TEST(transpose_all_rank4_perms)
{
    const int dims[4] = {2, 3, 1, 4};
    int perm[4], inv[4], ydims[4], j[4], i[4];
    float x[24], y[24], back[24];
    int p, d, e, n;
    for (e = 0; e < 24; e++)
        x[e] = (float)e;
    for (p = 0; p < 256; p++) {
        int seen = 0;
        for (d = 0; d < 4; d++) {
            perm[d] = p >> (2 * d) & 3;
            seen |= 1 << perm[d];
        }
        if (seen != 15)
            continue; /* not a permutation */
        n = y_dims(4, dims, perm, ydims);
        inverse_perm(4, perm, inv);
        rt_transpose_forward(y, x, 4, dims, perm);
        for (e = 0; e < n; e++) { /* y's multi-index j, then x's i */
            int r = e;
            for (d = 3; d >= 0; d--) {
                j[d] = r % ydims[d];
                r /= ydims[d];
            }
            for (d = 0; d < 4; d++)
                i[perm[d]] = j[d];
            ck_assert_float_eq(y[e],
                               x[((i[0] * 3 + i[1]) * 1 + i[2]) * 4 + i[3]]);
        }
        rt_transpose_forward(back, y, 4, ydims, inv);
        ck_assert(memcmp(back, x, sizeof x) == 0);
    }
}
END_TEST

START_TEST(transpose_rank0_copies_one)
{
    const float x[1] = {3.5f};
    float y[1] = {0}, dx[1] = {1};
    rt_transpose_forward(y, x, 0, NULL, NULL);
    ck_assert_float_eq(y[0], 3.5f);
    rt_transpose_backward(dx, x, 0, NULL, NULL);
    ck_assert_float_eq(dx[0], 4.5f);
}
END_TEST

/* ---- Gather -------------------------------------------------------------- */

enum { G_ROWS = 5, G_W = 3, G_N = 10 };
/* rows 0, 4, 4 (-1), 2, 4, 0 (-5), then four out of range */
static const int64_t g_idx[G_N] = {0, 4, -1, 2, 4, -5, 5, -6, INT64_MAX,
                                   INT64_MIN};
static const int g_row[G_N] = {0, 4, 4, 2, 4, 0, -1, -1, -1, -1};

typedef struct {
    float table[G_ROWS * G_W], y[G_N * G_W], dy[G_N * G_W];
} gather_case;

static double gather_loss(void *v)
{
    gather_case *c = v;
    rt_gather_forward(c->y, c->table, g_idx, G_N, G_ROWS, G_W);
    return dot(c->y, c->dy, G_N * G_W);
}

START_TEST(gather_forward_by_hand)
{
    float table[G_ROWS * G_W], y[G_N * G_W];
    int i, j;
    for (i = 0; i < G_ROWS * G_W; i++)
        table[i] = (float)(10 * (i / G_W) + i % G_W); /* t[r][j] = 10r + j */
    rt_fill(y, G_N * G_W, NAN);
    rt_gather_forward(y, table, g_idx, G_N, G_ROWS, G_W);
    for (i = 0; i < G_N; i++)
        for (j = 0; j < G_W; j++) {
            const float w = g_row[i] < 0 ? 0.0f : (float)(10 * g_row[i] + j);
            ck_assert_msg(y[i * G_W + j] == w, "y[%d][%d] = %g, want %g", i,
                          j, (double)y[i * G_W + j], (double)w);
        }
    /* an empty table: every index is out of range, nothing is read */
    rt_fill(y, G_N * G_W, NAN);
    rt_gather_forward(y, NULL, g_idx, G_N, 0, G_W);
    for (i = 0; i < G_N * G_W; i++)
        ck_assert_float_eq(y[i], 0.0f);
}
END_TEST

/* Repeated rows sum, in index order: row 0 gets dy 0 and 5, row 4 dy 1, 2
 * and 4, row 2 dy 3; rows 1 and 3 and the out-of-range dy are not used.
 * Each row's dy are summed first (fewer than 32: a plain float loop in
 * index order), then added to the preset gradient. */
START_TEST(gather_backward_scatter_adds)
{
    float dy[G_N * G_W], dt[G_ROWS * G_W], pre[G_ROWS * G_W];
    float want[G_ROWS * G_W], sum[G_ROWS * G_W] = {0};
    float scratch[2 * G_N];
    int i, j;
    ck_assert_uint_le(rt_gather_backward_scratch(G_N), 2 * G_N);
    tseed(2300);
    fill(dy, G_N * G_W, -1, 1);
    fill(pre, G_ROWS * G_W, -1, 1);
    memcpy(dt, pre, sizeof dt);
    for (i = 0; i < G_N; i++)
        if (g_row[i] >= 0)
            for (j = 0; j < G_W; j++)
                sum[g_row[i] * G_W + j] += dy[i * G_W + j];
    for (i = 0; i < G_ROWS * G_W; i++)
        want[i] = pre[i] + sum[i];
    rt_gather_backward(dt, dy, g_idx, G_N, G_ROWS, G_W, scratch);
    for (i = 0; i < G_ROWS * G_W; i++)
        ck_assert_msg(dt[i] == want[i], "dtable[%d] = %.9g, want %.9g", i,
                      (double)dt[i], (double)want[i]);
    rt_gather_backward(NULL, dy, g_idx, G_N, G_ROWS, G_W, scratch);
}
END_TEST

START_TEST(gather_grad)
{
    gather_case c;
    float dt[G_ROWS * G_W], pre[G_ROWS * G_W], diff[G_ROWS * G_W];
    float scratch[2 * G_N];
    tseed(2400);
    fill(c.table, G_ROWS * G_W, -1, 1);
    fill(c.dy, G_N * G_W, -1, 1);
    fill(pre, G_ROWS * G_W, -1, 1);
    memcpy(dt, pre, sizeof dt);
    rt_gather_backward(dt, c.dy, g_idx, G_N, G_ROWS, G_W, scratch);
    added(diff, dt, pre, G_ROWS * G_W);
    expect_grad("gather dtable", c.table, G_ROWS * G_W, diff, gather_loss, &c);
}
END_TEST

/* ---- GatherElements and OneHot (issue 25) --------------------------------- */

/* x (3, 4) with x[r][c] = 10r + c, along axis 1 with indices (2, 3) shorter
 * than x's rows: [[0, 3, -1], [2, 2, -4]] reads 0 3 3 / 12 12 10, and
 * along axis 0 with [[2, -3, 1, 7]]: 20 1 12 and 0 (out of range). */
START_TEST(gather_elements_forward_by_hand)
{
    const int xdims[2] = {3, 4}, i1[2] = {2, 3}, i0[2] = {1, 4};
    const int64_t idx1[6] = {0, 3, -1, 2, 2, -4}, idx0[4] = {2, -3, 1, 7};
    const float want1[6] = {0, 3, 3, 12, 12, 10}, want0[4] = {20, 1, 12, 0};
    float x[12], y[6];
    int i;
    for (i = 0; i < 12; i++)
        x[i] = (float)(10 * (i / 4) + i % 4);
    rt_fill(y, 6, NAN);
    rt_gather_elements_forward(y, x, idx1, 2, xdims, i1, 1);
    expect_same("gather_elements axis 1", y, want1, 6);
    rt_fill(y, 6, NAN);
    rt_gather_elements_forward(y, x, idx0, 2, xdims, i0, 0);
    expect_same("gather_elements axis 0", y, want0, 4);
}
END_TEST

enum { GE_A = 2, GE_B = 4, GE_C = 3, GE_X = GE_A * GE_B * GE_C };
enum { GE_IB = 5, GE_IC = 2, GE_N = GE_A * GE_IB * GE_IC };

/* x (2, 4, 3) gathered along axis 1 by indices (2, 5, 2): five indices per
 * lane out of four rows, so some repeat (and add); negative ones too. */
typedef struct {
    float x[GE_X], y[GE_N], dy[GE_N];
    int64_t idx[GE_N];
} gather_elements_case;

static const int ge_xdims[3] = {GE_A, GE_B, GE_C};
static const int ge_idims[3] = {GE_A, GE_IB, GE_IC};

static double gather_elements_loss(void *v)
{
    gather_elements_case *c = v;
    rt_gather_elements_forward(c->y, c->x, c->idx, 3, ge_xdims, ge_idims, 1);
    return dot(c->y, c->dy, GE_N);
}

static void gather_elements_fill(gather_elements_case *c)
{
    int i;
    fill(c->x, GE_X, -1, 1);
    fill(c->dy, GE_N, -1, 1);
    for (i = 0; i < GE_N; i++)
        c->idx[i] = (int64_t)(trand(0, 8)) - 4;     /* [-4, 4) */
}

/* The forward element by element from the definition, the backward as a
 * sum over the elements that read each x, and against central
 * differences; it adds, and a NULL gradient is skipped. */
START_TEST(gather_elements_backward_and_grad)
{
    gather_elements_case c;
    float dx[GE_X], pre[GE_X], diff[GE_X];
    double want[GE_X];
    int a, b, k, i;
    tseed(2500);
    gather_elements_fill(&c);
    fill(pre, GE_X, -1, 1);
    rt_gather_elements_forward(c.y, c.x, c.idx, 3, ge_xdims, ge_idims, 1);
    for (i = 0; i < GE_X; i++)
        want[i] = pre[i];
    for (a = 0; a < GE_A; a++)
        for (b = 0; b < GE_IB; b++)
            for (k = 0; k < GE_IC; k++) {
                const int at = (a * GE_IB + b) * GE_IC + k;
                const int r = (int)(c.idx[at] < 0 ? c.idx[at] + GE_B
                                                  : c.idx[at]);
                const int from = (a * GE_B + r) * GE_C + k;
                ck_assert_msg(c.y[at] == c.x[from], "y[%d] = %g, want x[%d] "
                              "= %g", at, (double)c.y[at], from,
                              (double)c.x[from]);
                want[from] += c.dy[at];
            }
    memcpy(dx, pre, sizeof dx);
    rt_gather_elements_backward(dx, c.dy, c.idx, 3, ge_xdims, ge_idims, 1);
    expect_near("gather_elements dx", dx, want, GE_X, 1e-6, 1e-6);
    added(diff, dx, pre, GE_X);
    expect_grad("gather_elements dx", c.x, GE_X, diff, gather_elements_loss,
                &c);
    rt_gather_elements_backward(NULL, c.dy, c.idx, 3, ge_xdims, ge_idims, 1);
}
END_TEST

/* indices (2, 2) [[1, -1], [3, 7]], depth 4, off 0.25, on 2: along the
 * last axis (outer 4, inner 1) rows 1, 3, 3 and none (7 is out of range);
 * along axis 1 (outer 2, inner 2) the same hits, transposed per row. */
START_TEST(one_hot_forward_by_hand)
{
    const int64_t idx[4] = {1, -1, 3, 7};
    const float o = 0.25f, l = 2.0f;
    const float last[16] = {o, l, o, o, o, o, o, l, o, o, o, l, o, o, o, o};
    const float mid[16] = {o, o, l, o, o, o, o, l,   /* index 0's row: 1, 3 */
                           o, o, o, o, o, o, l, o};  /* index 1's: 3, none */
    float y[16];
    rt_fill(y, 16, NAN);
    rt_one_hot_forward(y, idx, 4, 4, 1, o, l);
    expect_same("one_hot last axis", y, last, 16);
    rt_fill(y, 16, NAN);
    rt_one_hot_forward(y, idx, 2, 4, 2, o, l);
    expect_same("one_hot axis 1", y, mid, 16);
}
END_TEST

/* Many indices in a random order over few rows (the sort that groups them
 * is checked): 3000 lookups of 300 rows, some out of range, a width of 70
 * (two column chunks). Each row gets fewer than 32 terms here, so its sum
 * is the plain float loop in index order, bit for bit. */
START_TEST(gather_backward_random_order)
{
    enum { N = 3000, ROWS = 300, W = 70 };
    static int64_t idx[N];
    float *dy = malloc((size_t)N * W * sizeof *dy);
    float *sum = zeros((size_t)ROWS * W), *dt = zeros((size_t)ROWS * W);
    float *scratch = malloc(rt_gather_backward_scratch(N) * sizeof *scratch);
    int i, j, count[ROWS] = {0};
    ck_assert_ptr_nonnull(dy);
    ck_assert_ptr_nonnull(scratch);
    tseed(2450);
    fill(dy, (size_t)N * W, -1, 1);
    for (i = 0; i < N; i++) {
        int r;
        do {
            idx[i] = (int64_t)(trand(0, 1) * 2 * ROWS) - ROWS - 5;
            r = idx[i] < 0 ? (int)idx[i] + ROWS : (int)idx[i];
        } while (r >= 0 && r < ROWS && count[r] == 31);
        if (r >= 0 && r < ROWS) {
            count[r]++;
            for (j = 0; j < W; j++)
                sum[r * W + j] += dy[(size_t)i * W + j];
        }
    }
    rt_gather_backward(dt, dy, idx, N, ROWS, W, scratch);
    for (i = 0; i < ROWS * W; i++)
        ck_assert_msg(dt[i] == sum[i], "dtable[%d] = %.9g, want %.9g", i,
                      (double)dt[i], (double)sum[i]);
    free(dy), free(sum), free(dt), free(scratch);
}
END_TEST

/* One index repeated 2^k times (an embedding row every token names), dy
 * about 0.1, in two columns, against the double sum of the same floats.
 * The old scatter-add, one row at a time into the gradient, was off by
 * 1.9e-7, 8.5e-6 and 1.0e-4 relative at 2^12, 2^16 and 2^20 repeats; the
 * rt_sum per column stays within a few ulps (3e-8) at every length. */
static const int gather_drift_log2[] = {12, 16, 20};

START_TEST(gather_backward_repeats_do_not_drift)
{
    const int n = 1 << gather_drift_log2[_i];
    float *dy = drift_values(2 * (size_t)n, 40u + (unsigned)n, 0.05f);
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    float *scratch = malloc(rt_gather_backward_scratch(n) * sizeof *scratch);
    float dt[6] = {0, 0, 0, 0, 0, 0};
    double want[2] = {0, 0};
    int i, j;
    ck_assert_ptr_nonnull(idx);
    ck_assert_ptr_nonnull(scratch);
    for (i = 0; i < n; i++) {
        idx[i] = 1;
        for (j = 0; j < 2; j++)
            want[j] += dy[2 * i + j];
    }
    rt_gather_backward(dt, dy, idx, n, 3, 2, scratch);
    for (j = 0; j < 2; j++)
        ck_assert_msg(fabs(dt[2 + j] - want[j]) <= 1e-7 * want[j],
                      "%d repeats: dtable[1][%d] %.9g, double %.12g (%.3g "
                      "rel)", n, j, (double)dt[2 + j], want[j],
                      fabs(dt[2 + j] - want[j]) / want[j]);
    ck_assert(dt[0] == 0 && dt[1] == 0 && dt[4] == 0 && dt[5] == 0);
    free(dy), free(idx), free(scratch);
}
END_TEST

/* ---- _set twin ----------------------------------------------------------- */

START_TEST(transpose_writes)
{
    const int dims[3] = {4, 6, 5}, perm[3] = {2, 0, 1};
    const size_t n = 120;
    float *dy = rnd(n), *want = zeros(n), *got = nans(n);
    rt_transpose_backward(want, dy, 3, dims, perm);
    rt_transpose_backward_set(got, dy, 3, dims, perm, 1u);
    same_values("transpose", want, got, n);
    free(dy), free(want), free(got);
}
END_TEST

/* ---- DepthToSpace and SpaceToDepth (issue 25) ------------------------------ */

/* x (2, 8, 3, 2) with block 2 (DepthToSpace: y (2, 2, 6, 4)) or x
 * (2, 3, 4, 4) (SpaceToDepth: y (2, 12, 2, 2)): _i is the kind, 0 DCR,
 * 1 CRD, 2 SpaceToDepth. */
typedef struct {
    int kind;
    float x[96], y[96], dy[96];
} d2s_case;

static const int d2s_dims[3][4] = {{2, 8, 3, 2}, {2, 8, 3, 2}, {2, 3, 4, 4}};

static void d2s_forward(d2s_case *c)
{
    const int *d = d2s_dims[c->kind];
    if (c->kind == 2)
        rt_space_to_depth_forward(c->y, c->x, d[0], d[1], d[2], d[3], 2);
    else
        rt_depth_to_space_forward(c->y, c->x, d[0], d[1], d[2], d[3], 2,
                                  c->kind);
}

static double d2s_loss(void *v)
{
    d2s_case *c = v;
    memset(c->y, 0x7f, sizeof c->y);
    d2s_forward(c);
    return dot(c->y, c->dy, 96);
}

/* Each y element against ONNX's formula, written with indices: for
 * DepthToSpace y[i, k, r b + u, s b + v] = x[i, ch, r, s] with ch =
 * (u b + v) C' + k (DCR) or k b^2 + u b + v (CRD), C' = C / b^2; for
 * SpaceToDepth y[i, (u b + v) C + k, r, s] = x[i, k, r b + u, s b + v]. */
START_TEST(d2s_forward_by_index)
{
    d2s_case c;
    const int b = 2, *d = d2s_dims[_i];
    int i, k, r, s, u, v, checked = 0;
    c.kind = _i;
    for (i = 0; i < 96; i++)
        c.x[i] = (float)i;
    d2s_loss(&c);
    if (_i < 2) {
        const int cc = d[1] / (b * b), h = d[2], w = d[3];
        for (i = 0; i < d[0]; i++)
            for (k = 0; k < cc; k++)
                for (r = 0; r < h; r++)
                    for (u = 0; u < b; u++)
                        for (s = 0; s < w; s++)
                            for (v = 0; v < b; v++) {
                                const int ch = _i == 0 ? (u * b + v) * cc + k
                                                       : k * b * b + u * b + v;
                                const int yo = ((i * cc + k) * h * b + r * b + u)
                                               * w * b + s * b + v;
                                const int xo = ((i * d[1] + ch) * h + r) * w + s;
                                ck_assert_msg(c.y[yo] == c.x[xo], "kind %d y[%d]"
                                              " = %g, want x[%d]", _i, yo,
                                              (double)c.y[yo], xo);
                                checked++;
                            }
    } else {
        const int cc = d[1], h = d[2] / b, w = d[3] / b;
        for (i = 0; i < d[0]; i++)
            for (k = 0; k < cc; k++)
                for (r = 0; r < h; r++)
                    for (u = 0; u < b; u++)
                        for (s = 0; s < w; s++)
                            for (v = 0; v < b; v++) {
                                const int ch = (u * b + v) * cc + k;
                                const int yo = ((i * cc * b * b + ch) * h + r)
                                               * w + s;
                                const int xo = ((i * cc + k) * d[2] + r * b + u)
                                               * d[3] + s * b + v;
                                ck_assert_msg(c.y[yo] == c.x[xo], "s2d y[%d] ="
                                              " %g, want x[%d]", yo,
                                              (double)c.y[yo], xo);
                                checked++;
                            }
    }
    ck_assert_int_eq(checked, 96);
}
END_TEST

START_TEST(d2s_grad)
{
    d2s_case c;
    const int *d = d2s_dims[_i];
    float dx[96], px[96], diff[96];
    c.kind = _i;
    tseed(1700 + (uint64_t)_i);
    fill(c.x, 96, -1, 1);
    fill(c.dy, 96, -1, 1);
    fill(px, 96, -1, 1);
    memcpy(dx, px, sizeof dx);
    if (_i == 2) {
        rt_space_to_depth_backward(dx, c.dy, d[0], d[1], d[2], d[3], 2);
        rt_space_to_depth_backward(NULL, c.dy, d[0], d[1], d[2], d[3], 2);
    } else {
        rt_depth_to_space_backward(dx, c.dy, d[0], d[1], d[2], d[3], 2, _i);
        rt_depth_to_space_backward(NULL, c.dy, d[0], d[1], d[2], d[3], 2, _i);
    }
    added(diff, dx, px, 96);
    expect_grad(_i == 2 ? "space_to_depth" : "depth_to_space", c.x, 96, diff,
                d2s_loss, &c);
}
END_TEST

/* SpaceToDepth undoes DepthToSpace in mode DCR: ONNX's pair. */
START_TEST(d2s_dcr_round_trip)
{
    float x[96], y[96], z[96];
    int i;
    for (i = 0; i < 96; i++)
        x[i] = (float)(i * 7 % 96);
    rt_depth_to_space_forward(y, x, 2, 8, 3, 2, 2, 0);
    rt_space_to_depth_forward(z, y, 2, 2, 6, 4, 2);
    expect_floats("round trip", z, x, 96);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *structural_suite(void)
{
    Suite *s = suite_create("remat_rt structural");
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

    tc = tcase_create("transpose");
    tcase_add_test(tc, transpose_rank4_0213_by_index);
    tcase_add_test(tc, transpose_rank3_201_by_index);
    tcase_add_loop_test(tc, transpose_grad, 0, N_TR);
    tcase_add_loop_test(tc, transpose_backward_is_inverse_transpose, 0, N_TR);
    tcase_add_test(tc, transpose_all_rank4_perms);
    tcase_add_test(tc, transpose_rank0_copies_one);
    suite_add_tcase(s, tc);

    tc = tcase_create("gather");
    tcase_add_test(tc, gather_forward_by_hand);
    tcase_add_test(tc, gather_backward_scatter_adds);
    tcase_add_test(tc, gather_grad);
    tcase_add_test(tc, gather_backward_random_order);
    tcase_add_loop_test(tc, gather_backward_repeats_do_not_drift, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("gather_elements and one_hot");
    tcase_add_test(tc, gather_elements_forward_by_hand);
    tcase_add_test(tc, gather_elements_backward_and_grad);
    tcase_add_test(tc, one_hot_forward_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("depth_to_space");
    tcase_add_loop_test(tc, d2s_forward_by_index, 0, 3);
    tcase_add_loop_test(tc, d2s_grad, 0, 3);
    tcase_add_test(tc, d2s_dcr_round_trip);
    suite_add_tcase(s, tc);

    tc = tcase_create("set");
    tcase_add_checked_fixture(tc, set_seed, NULL);
    tcase_add_test(tc, transpose_writes);
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
