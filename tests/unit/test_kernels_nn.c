/*
 * test_kernels_nn.c: unit tests of the runtime's transformer kernels (the
 * "transformer ops" section of remat_rt.h), with Check. The Makefile builds
 * it twice, with BLAS and with -DRT_NO_BLAS, so that kernels calling
 * rt_sgemm are tested on both GEMM paths.
 *
 * Every backward is checked against central finite differences of its
 * forward (rt_testutil.h), from a random preset gradient so that `+=` is
 * tested too, and called with NULL gradients. Every forward is checked
 * against hand-worked numbers or a plain formula in double written here,
 * never against the kernels themselves.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- transpose ------------------------------------------------------------ */

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

/* ---- gather --------------------------------------------------------------- */

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
 * and 4, row 2 dy 3; rows 1 and 3 and the out-of-range dy are not used. */
START_TEST(gather_backward_scatter_adds)
{
    float dy[G_N * G_W], dt[G_ROWS * G_W], pre[G_ROWS * G_W];
    float want[G_ROWS * G_W];
    int i, j;
    tseed(2300);
    fill(dy, G_N * G_W, -1, 1);
    fill(pre, G_ROWS * G_W, -1, 1);
    memcpy(dt, pre, sizeof dt);
    memcpy(want, pre, sizeof want);
    for (i = 0; i < G_N; i++)
        if (g_row[i] >= 0)
            for (j = 0; j < G_W; j++)
                want[g_row[i] * G_W + j] += dy[i * G_W + j];
    rt_gather_backward(dt, dy, g_idx, G_N, G_ROWS, G_W);
    for (i = 0; i < G_ROWS * G_W; i++)
        ck_assert_msg(dt[i] == want[i], "dtable[%d] = %.9g, want %.9g", i,
                      (double)dt[i], (double)want[i]);
    rt_gather_backward(NULL, dy, g_idx, G_N, G_ROWS, G_W);
}
END_TEST

START_TEST(gather_grad)
{
    gather_case c;
    float dt[G_ROWS * G_W], pre[G_ROWS * G_W], diff[G_ROWS * G_W];
    tseed(2400);
    fill(c.table, G_ROWS * G_W, -1, 1);
    fill(c.dy, G_N * G_W, -1, 1);
    fill(pre, G_ROWS * G_W, -1, 1);
    memcpy(dt, pre, sizeof dt);
    rt_gather_backward(dt, c.dy, g_idx, G_N, G_ROWS, G_W);
    added(diff, dt, pre, G_ROWS * G_W);
    expect_grad("gather dtable", c.table, G_ROWS * G_W, diff, gather_loss, &c);
}
END_TEST

/* ---- suite ---------------------------------------------------------------- */

static Suite *nn_suite(void)
{
    Suite *s = suite_create("remat_rt transformer ops");
    TCase *tc;

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
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(nn_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
