/*
 * test_kernels_integer.c: unit tests of the runtime's int64 and bool
 * kernels (integer.c: Slice, Concat, Transpose and Expand on int64, Cast,
 * the comparisons and logical ops, Where with an int64 condition, Where of
 * int64 values, int64 Add, Sub, Mul, Div and Mod, int64 ReduceSum), with
 * Check. The Makefile builds it twice, with BLAS and with -DRT_NO_BLAS.
 *
 * The int64 structural kernels are checked against the float kernels on
 * the same values (small integers, exact in float) and, for values no
 * float holds (above 2^53), against index arithmetic written here; the
 * comparisons against C's operators element by element through the
 * broadcast written out by hand; Where's backward against central finite
 * differences of its forward, from a random preset gradient so that `+=`
 * is tested, and with NULL gradients; int64 Add, Sub and Mul against C's
 * unsigned arithmetic element by element through the broadcast written
 * out by hand (values above 2^53, and a product that wraps); Div by
 * hand and against the definition of a truncated quotient (no division);
 * ReduceSum against sums written out here.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

#define BIG ((int64_t)1 << 60)    /* no float holds BIG + k exactly */

/* x[k] = BIG + k as int64, and k as float. */
static void ramp(int64_t *xi, float *xf, int n)
{
    int k;
    for (k = 0; k < n; k++) {
        xi[k] = BIG + k;
        xf[k] = (float)k;
    }
}

/* y (int64, BIG-offset) holds the positions yf (float) says. */
static void expect_positions(const char *what, const int64_t *y,
                             const float *yf, int n)
{
    int k;
    for (k = 0; k < n; k++)
        ck_assert_msg(y[k] == BIG + (int64_t)yf[k], "%s[%d]: got %lld, want "
                      "BIG + %g", what, k, (long long)(y[k] - BIG),
                      (double)yf[k]);
}

/* (3, 4) -> rows 2, 1, 0 with step -1, columns 1 and 3 with step 2 */
START_TEST(slice_i64_as_float)
{
    int64_t x[12], y[6];
    float xf[12], yf[6];
    const int xdims[] = {3, 4}, ydims[] = {3, 2}, starts[] = {2, 1},
              steps[] = {-1, 2};
    ramp(x, xf, 12);
    rt_slice_i64_forward(y, x, 2, xdims, ydims, starts, steps);
    rt_slice_forward(yf, xf, 2, xdims, ydims, starts, steps);
    expect_positions("y", y, yf, 6);
    ck_assert(y[0] == BIG + 9 && y[1] == BIG + 11 && y[5] == BIG + 3);
}
END_TEST

START_TEST(concat_i64_by_hand)
{
    const int64_t a[] = {1, 2, 3, 4}, b[] = {BIG, -BIG};
    const int64_t *xs[2];
    const int widths[] = {2, 1};
    const int64_t want[] = {1, 2, BIG, 3, 4, -BIG};
    int64_t y[6];
    int k;
    xs[0] = a;
    xs[1] = b;
    rt_concat_i64_forward(y, xs, 2, widths, 2);
    for (k = 0; k < 6; k++)
        ck_assert_msg(y[k] == want[k], "y[%d]", k);
}
END_TEST

/* (2, 3, 4) permuted (2, 0, 1): y[i][j][k] = x[j][k][i] */
START_TEST(transpose_i64_by_index)
{
    int64_t x[24], y[24];
    const int dims[] = {2, 3, 4}, perm[] = {2, 0, 1};
    int i, j, k;
    for (i = 0; i < 24; i++)
        x[i] = BIG + i;
    rt_transpose_i64_forward(y, x, 3, dims, perm);
    for (i = 0; i < 4; i++)
        for (j = 0; j < 2; j++)
            for (k = 0; k < 3; k++)
                ck_assert_msg(y[(i * 2 + j) * 3 + k] == x[(j * 3 + k) * 4 + i],
                              "y[%d][%d][%d]", i, j, k);
}
END_TEST

/* (3, 1) expanded to (2, 3, 4): y[i][j][k] = x[j] */
START_TEST(expand_i64_by_index)
{
    const int64_t x[] = {BIG, -7, 5};
    int64_t y[24];
    const int dims[] = {2, 3, 4}, sa[] = {0, 1, 0}, sb[] = {0, 0, 0};
    const rt_bcast m = make_bcast(3, dims, sa, sb);
    int i, j, k;
    rt_expand_i64_forward(y, x, &m);
    for (i = 0; i < 2; i++)
        for (j = 0; j < 3; j++)
            for (k = 0; k < 4; k++)
                ck_assert(y[(i * 3 + j) * 4 + k] == x[j]);
}
END_TEST

START_TEST(cast_rounds_to_nearest)
{
    const int64_t x[] = {0, 1, -3, 16777217, BIG};
    float y[5];
    rt_cast_i64_forward(y, x, 5);
    ck_assert(y[0] == 0.0f && y[1] == 1.0f && y[2] == -3.0f);
    ck_assert(y[3] == 16777216.0f);     /* 2^24 + 1: ties to even */
    ck_assert(y[4] == ldexpf(1.0f, 60));
}
END_TEST

/* a (2, 3) against b (3) broadcast along rows, every op */
START_TEST(compare_i64_broadcast)
{
    const int64_t a[] = {BIG, 0, -2, 1, 5, BIG + 1}, b[] = {BIG + 1, 0, 3};
    const int dims[] = {2, 3}, sa[] = {3, 1}, sb[] = {0, 1};
    const rt_bcast m = make_bcast(2, dims, sa, sb);
    int64_t y[6];
    int op, i, j;
    for (op = RT_CMP_EQUAL; op <= RT_CMP_XOR; op++) {
        rt_compare_i64_forward(y, a, b, op, &m);
        for (i = 0; i < 2; i++)
            for (j = 0; j < 3; j++) {
                const int64_t p = a[i * 3 + j], q = b[j];
                const int want =
                    op == RT_CMP_EQUAL ? p == q : op == RT_CMP_LESS ? p < q
                    : op == RT_CMP_GREATER ? p > q
                    : op == RT_CMP_LESS_EQUAL ? p <= q
                    : op == RT_CMP_GREATER_EQUAL ? p >= q
                    : op == RT_CMP_AND ? (p != 0 && q != 0)
                    : op == RT_CMP_OR ? (p != 0 || q != 0)
                                      : ((p != 0) != (q != 0));
                ck_assert_msg(y[i * 3 + j] == want, "op %d at (%d, %d): got "
                              "%lld", op, i, j, (long long)y[i * 3 + j]);
            }
    }
    /* BIG and BIG + 1 differ, which a comparison in double would miss */
    rt_compare_i64_forward(y, a, b, RT_CMP_EQUAL, &m);
    ck_assert(y[0] == 0 && y[5] == 0);
}
END_TEST

START_TEST(compare_f32_nan_and_order)
{
    const float a[] = {1.0f, NAN, -0.0f, 2.0f}, b[] = {2.0f, NAN, 0.0f, 2.0f};
    const int dims[] = {4}, s1[] = {1};
    const rt_bcast m = make_bcast(1, dims, s1, s1);
    int64_t y[4];
    rt_compare_f32_forward(y, a, b, RT_CMP_LESS, &m);
    ck_assert(y[0] == 1 && y[1] == 0 && y[2] == 0 && y[3] == 0);
    rt_compare_f32_forward(y, a, b, RT_CMP_EQUAL, &m);
    ck_assert(y[0] == 0 && y[1] == 0 && y[2] == 1 && y[3] == 1);
    rt_compare_f32_forward(y, a, b, RT_CMP_GREATER_EQUAL, &m);
    ck_assert(y[0] == 0 && y[1] == 0 && y[2] == 1 && y[3] == 1);
}
END_TEST

START_TEST(not_by_hand)
{
    const int64_t x[] = {0, 1, -5, BIG};
    int64_t y[4];
    rt_not_forward(y, x, 4);
    ck_assert(y[0] == 1 && y[1] == 0 && y[2] == 0 && y[3] == 0);
}
END_TEST

/* cond (2, 1) int64, a (2, 3), b (3): the three broadcast to (2, 3) */
enum { WR = 2, WC = 3 };
static int64_t wcond[WR] = {0, 7};
static rt_where wmap;
static float wa[WR * WC], wb[WC], wdy[WR * WC];

static void where_setup(void)
{
    int d;
    memset(&wmap, 0, sizeof wmap);
    wmap.rank = 2;
    wmap.dims[0] = WR;
    wmap.dims[1] = WC;
    wmap.sc[0] = 1;
    wmap.sa[0] = WC;
    wmap.sa[1] = 1;
    wmap.sb[1] = 1;
    for (d = 0; d < WR * WC; d++) {
        wa[d] = trand(-1, 1);
        wdy[d] = trand(-1, 1);
    }
    for (d = 0; d < WC; d++)
        wb[d] = trand(-1, 1);
}

static double where_loss(void *ctx)
{
    float y[WR * WC];
    (void)ctx;
    rt_where_i64_forward(y, wcond, wa, wb, &wmap);
    return dot(y, wdy, WR * WC);
}

START_TEST(where_i64_forward_by_hand)
{
    float y[WR * WC];
    int j;
    tseed(3);
    where_setup();
    rt_where_i64_forward(y, wcond, wa, wb, &wmap);
    for (j = 0; j < WC; j++) {
        ck_assert(y[j] == wb[j]);               /* row 0: cond 0 */
        ck_assert(y[WC + j] == wa[WC + j]);     /* row 1: cond 7 */
    }
}
END_TEST

START_TEST(where_i64_grad)
{
    float *da, *db, ga[WR * WC], gb[WC];
    tseed(4);
    where_setup();
    da = rnd(WR * WC);
    db = rnd(WC);
    {
        float *a0 = copy(da, WR * WC), *b0 = copy(db, WC);
        rt_where_i64_backward(da, db, wdy, wcond, &wmap);
        added(ga, da, a0, WR * WC);
        added(gb, db, b0, WC);
        expect_grad("da", wa, WR * WC, ga, where_loss, NULL);
        expect_grad("db", wb, WC, gb, where_loss, NULL);
        /* NULL gradients are skipped, the other still added */
        memcpy(da, a0, sizeof ga);
        rt_where_i64_backward(da, NULL, wdy, wcond, &wmap);
        added(ga, da, a0, WR * WC);
        expect_grad("da alone", wa, WR * WC, ga, where_loss, NULL);
        rt_where_i64_backward(NULL, NULL, wdy, wcond, &wmap);
        free(a0);
        free(b0);
    }
    free(da);
    free(db);
}
END_TEST

/* Where of int64 values: X (2, 3) and Y (3) by cond (2, 1), values no
 * double holds exactly */
START_TEST(where_i64_values_by_hand)
{
    const int64_t x[] = {BIG + 1, BIG + 2, BIG + 3, -4, -5, -6};
    const int64_t yv[] = {BIG - 1, BIG - 2, BIG - 3};
    int64_t y[WR * WC];
    int j;
    tseed(5);
    where_setup();      /* wmap: cond (2, 1), a (2, 3), b (3) */
    rt_where_i64_i64_forward(y, wcond, x, yv, &wmap);
    for (j = 0; j < WC; j++) {
        ck_assert(y[j] == yv[j]);               /* row 0: cond 0 */
        ck_assert(y[WC + j] == x[WC + j]);      /* row 1: cond 7 */
    }
}
END_TEST

/* a (2, 3) OP b (2, 1) broadcast along columns, every op, against C's
 * uint64 arithmetic (two's complement, as numpy's int64 wraps) */
START_TEST(arith_i64_broadcast)
{
    const int64_t a[] = {BIG + 1, -7, 0, 3, INT64_MAX, -BIG};
    const int64_t b[] = {BIG, 16};
    const int dims[] = {2, 3}, sa[] = {3, 1}, sb[] = {1, 0};
    const rt_bcast m = make_bcast(2, dims, sa, sb);
    int64_t y[6];
    int op, i, j;
    for (op = 0; op < 3; op++) {
        if (op == 0)
            rt_add_i64_forward(y, a, b, &m);
        else if (op == 1)
            rt_sub_i64_forward(y, a, b, &m);
        else
            rt_mul_i64_forward(y, a, b, &m);
        for (i = 0; i < 2; i++)
            for (j = 0; j < 3; j++) {
                const uint64_t p = (uint64_t)a[i * 3 + j], q = (uint64_t)b[i];
                const uint64_t want = op == 0 ? p + q : op == 1 ? p - q
                                                      : p * q;
                ck_assert_msg((uint64_t)y[i * 3 + j] == want, "op %d at "
                              "(%d, %d): got %lld", op, i, j,
                              (long long)y[i * 3 + j]);
            }
    }
    /* worked by hand: (BIG + 1) - BIG is 1, which a double would lose;
     * INT64_MAX + 16 wraps to INT64_MIN + 15; -BIG * 16 is -2^64, which
     * wraps to 0 */
    rt_sub_i64_forward(y, a, b, &m);
    ck_assert(y[0] == 1 && y[1] == -7 - BIG);
    rt_add_i64_forward(y, a, b, &m);
    ck_assert(y[4] == INT64_MIN + 15 && y[3] == 19);
    rt_mul_i64_forward(y, a, b, &m);
    ck_assert(y[1] == -7 * BIG && y[5] == 0);
}
END_TEST

/* ONNX integer Div truncates toward zero: by hand, then for many pairs
 * against the definition (a = q b + r, |r| < |b|, r zero or of a's sign),
 * which uses no division. x / 0 is 0 and INT64_MIN / -1 wraps. */
START_TEST(div_i64_truncates)
{
    const int64_t a[] = {7, -7, 7, -7, 5, INT64_MIN, BIG + 5, -1};
    const int64_t b[] = {2, 2, -2, -2, 0, -1, BIG, 3};
    const int64_t want[] = {3, -3, -3, 3, 0, INT64_MIN, 1, 0};
    const int dims[] = {8}, sa[] = {1}, sb[] = {1};
    const rt_bcast m = make_bcast(1, dims, sa, sb);
    const int d1[] = {1}, s0[] = {0};
    const rt_bcast one = make_bcast(1, d1, s0, s0);
    int64_t y[8];
    int k;
    rt_div_i64_forward(y, a, b, &m);
    for (k = 0; k < 8; k++)
        ck_assert_msg(y[k] == want[k], "%lld / %lld: got %lld",
                      (long long)a[k], (long long)b[k], (long long)y[k]);
    srand(25);
    for (k = 0; k < 2000; k++) {
        int64_t p = ((int64_t)rand() << 20) ^ rand(), q = rand() % 97 + 1;
        int64_t r;
        if (k & 1)
            p = -p;
        if (k & 2)
            q = -q;
        if (k & 4)
            q *= (int64_t)1 << 40;
        rt_div_i64_forward(y, &p, &q, &one);
        r = p - y[0] * q;
        ck_assert_msg((r >= 0 ? r : -r) < (q >= 0 ? q : -q) &&
                      (r == 0 || (r < 0) == (p < 0)),
                      "%lld / %lld: got %lld", (long long)p, (long long)q,
                      (long long)y[0]);
    }
}
END_TEST

/* ONNX Mod of int64: by hand (fmod 0, the divisor's sign, as Python's %;
 * fmod 1, the dividend's, as C's), x mod 0 and INT64_MIN mod -1 giving 0;
 * then for many pairs against the definition: |r| < |b|, r zero or of
 * b's sign (fmod 0) or a's (fmod 1), and a - r a multiple of b. */
START_TEST(mod_i64_both_signs)
{
    const int64_t a[] = {-4, 7, 5, -4, 7, 5, 9, INT64_MIN, BIG + 7};
    const int64_t b[] = {2, -3, 8, -2, 3, -8, 0, -1, BIG};
    const int64_t want0[] = {0, -2, 5, 0, 1, -3, 0, 0, 7};
    const int64_t want1[] = {0, 1, 5, 0, 1, 5, 0, 0, 7};
    const int dims[] = {9}, st[] = {1}, d1[] = {1}, s0[] = {0};
    const rt_bcast m = make_bcast(1, dims, st, st);
    const rt_bcast one = make_bcast(1, d1, s0, s0);
    int64_t y[9];
    int k, fm;
    rt_mod_i64_forward(y, a, b, 0, &m);
    for (k = 0; k < 9; k++)
        ck_assert_msg(y[k] == want0[k], "%lld mod %lld: got %lld",
                      (long long)a[k], (long long)b[k], (long long)y[k]);
    rt_mod_i64_forward(y, a, b, 1, &m);
    for (k = 0; k < 9; k++)
        ck_assert_msg(y[k] == want1[k], "fmod(%lld, %lld): got %lld",
                      (long long)a[k], (long long)b[k], (long long)y[k]);
    srand(26);
    for (k = 0; k < 4000; k++) {
        int64_t p = ((int64_t)rand() << 20) ^ rand(), q = rand() % 97 + 1;
        int64_t r, aq;
        if (k & 1)
            p = -p;
        if (k & 2)
            q = -q;
        if (k & 4)
            q *= (int64_t)1 << 30;
        fm = k >> 3 & 1;
        rt_mod_i64_forward(&r, &p, &q, fm, &one);
        aq = q >= 0 ? q : -q;
        ck_assert_msg((r >= 0 ? r : -r) < aq, "%lld mod %lld: got %lld",
                      (long long)p, (long long)q, (long long)r);
        ck_assert_msg(r == 0 || (r < 0) == (fm ? p < 0 : q < 0),
                      "%lld mod %lld (fmod %d): got %lld of the wrong sign",
                      (long long)p, (long long)q, fm, (long long)r);
        ck_assert((p - r) % q == 0);
    }
}
END_TEST

/* ReduceSum of int64 over x (2, 3, 4): along axis 1 (y (2, 1, 4)) and
 * along axes 0 and 2 (y (3)), against sums written here; values above
 * 2^53 stay exact, and a sum past INT64_MAX wraps as numpy's. */
START_TEST(reduce_sum_i64_by_axes)
{
    int64_t x[24], y[8], want[8];
    const int dims[] = {2, 3, 4}, sa[] = {12, 4, 1};
    const int sb1[] = {4, 0, 1}, sb02[] = {0, 1, 0};
    const rt_bcast m1 = make_bcast(3, dims, sa, sb1);
    const rt_bcast m02 = make_bcast(3, dims, sa, sb02);
    int i, j, k;
    for (k = 0; k < 24; k++)
        x[k] = (k % 5 == 0 ? BIG : 0) + k * (k % 2 ? -3 : 7);
    rt_reduce_sum_i64_forward(y, x, &m1, 8);
    for (i = 0; i < 2; i++)
        for (k = 0; k < 4; k++) {
            want[i * 4 + k] = 0;
            for (j = 0; j < 3; j++)
                want[i * 4 + k] += x[i * 12 + j * 4 + k];
            ck_assert_msg(y[i * 4 + k] == want[i * 4 + k], "axis 1 at "
                          "(%d, %d): got %lld, want %lld", i, k,
                          (long long)y[i * 4 + k], (long long)want[i * 4 + k]);
        }
    rt_reduce_sum_i64_forward(y, x, &m02, 3);
    for (j = 0; j < 3; j++) {
        want[j] = 0;
        for (i = 0; i < 2; i++)
            for (k = 0; k < 4; k++)
                want[j] += x[i * 12 + j * 4 + k];
        ck_assert(y[j] == want[j]);
    }
    /* a mask's lengths, by hand: rows of 1s then 0s */
    {
        const int64_t mask[] = {1, 1, 1, 0, 1, 0, 0, 0};
        const int md[] = {2, 4}, ms[] = {4, 1}, my[] = {1, 0};
        const rt_bcast mm = make_bcast(2, md, ms, my);
        rt_reduce_sum_i64_forward(y, mask, &mm, 2);
        ck_assert(y[0] == 3 && y[1] == 1);
    }
    /* INT64_MAX + 2 wraps to INT64_MIN + 1 */
    {
        const int64_t w[] = {INT64_MAX, 2};
        const int wd[] = {2}, ws[] = {1}, wy[] = {0};
        const rt_bcast mw = make_bcast(1, wd, ws, wy);
        rt_reduce_sum_i64_forward(y, w, &mw, 1);
        ck_assert(y[0] == INT64_MIN + 1);
    }
}
END_TEST

static Suite *integer_suite(void)
{
    Suite *s = suite_create("remat_rt integer");
    TCase *tc = tcase_create("structural");
    tcase_add_test(tc, slice_i64_as_float);
    tcase_add_test(tc, concat_i64_by_hand);
    tcase_add_test(tc, transpose_i64_by_index);
    tcase_add_test(tc, expand_i64_by_index);
    suite_add_tcase(s, tc);

    tc = tcase_create("cast and compare");
    tcase_add_test(tc, cast_rounds_to_nearest);
    tcase_add_test(tc, compare_i64_broadcast);
    tcase_add_test(tc, compare_f32_nan_and_order);
    tcase_add_test(tc, not_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("where");
    tcase_add_test(tc, where_i64_forward_by_hand);
    tcase_add_test(tc, where_i64_grad);
    tcase_add_test(tc, where_i64_values_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("int64 arithmetic");
    tcase_add_test(tc, arith_i64_broadcast);
    tcase_add_test(tc, div_i64_truncates);
    tcase_add_test(tc, mod_i64_both_signs);
    tcase_add_test(tc, reduce_sum_i64_by_axes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(integer_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
