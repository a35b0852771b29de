/*
 * test_kernels_norm.c: unit tests of the runtime's normalization kernels,
 * LayerNormalization (rt_layernorm_*) and BatchNormalization
 * (rt_batchnorm_*), with Check. Built twice like every test_kernels*.c
 * (with and without BLAS), though these kernels call no GEMM.
 *
 * Every backward is checked against central finite differences of its
 * forward (rt_testutil.h; BatchNorm's of the training forward), from a
 * random preset gradient so that `+=` is tested, and with NULL gradients.
 * The forwards are checked against the ONNX formulas in double written
 * here (LayerNorm's two-pass mean and biased variance) and hand-worked
 * numbers, never against the kernels themselves; BatchNorm's
 * running-statistics update against values worked out by hand, PyTorch's
 * rule (unbiased variance). BatchNorm's eval-mode backward (a frozen
 * BatchNorm in the train step) against finite differences of the
 * inference forward, which reads the given statistics.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- layernorm ----------------------------------------------------------- */

typedef struct {
    int rows, cols, has_bias;
    float eps;
} ln_spec;

/* cols 1: every x is its row's mean, so y = bias and dx = 0. */
static const ln_spec ln_specs[] = {
    {3, 8, 1, 1e-5f}, {2, 5, 0, 0.5f}, {1, 16, 1, 1e-3f}, {2, 1, 1, 1e-5f},
};
#define N_LN ((int)(sizeof ln_specs / sizeof ln_specs[0]))

typedef struct {
    ln_spec s;
    int n;
    float x[32], scale[16], bias[16], y[32], dy[32];
} ln_case;

static double ln_loss(void *v)
{
    ln_case *c = v;
    memset(c->y, 0x7f, sizeof c->y); /* garbage: forward must overwrite */
    rt_layernorm_forward(c->y, c->x, c->scale, c->s.has_bias ? c->bias : NULL,
                         c->s.rows, c->s.cols, c->s.eps);
    return dot(c->y, c->dy, c->n);
}

static void ln_setup(ln_case *c, int spec, uint64_t seed)
{
    c->s = ln_specs[spec];
    c->n = c->s.rows * c->s.cols;
    tseed(seed);
    fill(c->x, c->n, -1, 1);
    fill_away(c->scale, c->s.cols, 0.5f, 1.5f);
    fill(c->bias, c->s.cols, -1, 1);
    fill(c->dy, c->n, -1, 1);
}

START_TEST(layernorm_grad)
{
    ln_case c;
    float dx[32], dscale[16], dbias[16], px[32], ps[16], pb[16], diff[32];
    float scratch[32];
    char what[64];
    ln_setup(&c, _i, 1300 + _i);
    fill(px, c.n, -1, 1);
    fill(ps, c.s.cols, -1, 1);
    fill(pb, c.s.cols, -1, 1);
    memcpy(dx, px, sizeof dx);
    memcpy(dscale, ps, sizeof dscale);
    memcpy(dbias, pb, sizeof dbias);
    ck_assert_uint_le(rt_layernorm_backward_scratch(c.s.cols), 32);
    rt_layernorm_backward(dx, dscale, dbias, c.dy, c.x, c.scale, c.s.rows,
                          c.s.cols, c.s.eps, scratch);
    snprintf(what, sizeof what, "layernorm (%d,%d) eps %g: dx", c.s.rows,
             c.s.cols, (double)c.s.eps);
    added(diff, dx, px, c.n);
    expect_grad(what, c.x, c.n, diff, ln_loss, &c);
    strcpy(what + strlen(what) - 2, "dscale");
    added(diff, dscale, ps, c.s.cols);
    expect_grad(what, c.scale, c.s.cols, diff, ln_loss, &c);
    if (c.s.has_bias) {
        strcpy(what + strlen(what) - 6, "dbias");
        added(diff, dbias, pb, c.s.cols);
        expect_grad(what, c.bias, c.s.cols, diff, ln_loss, &c);
    }
}
END_TEST

/* The ONNX formula in double: two-pass mean and biased variance. */
static void ln_expect(const ln_case *c, double *want)
{
    const int cols = c->s.cols;
    int r, j;
    for (r = 0; r < c->s.rows; r++) {
        const float *x = c->x + r * cols;
        double mean = 0, var = 0;
        for (j = 0; j < cols; j++)
            mean += x[j];
        mean /= cols;
        for (j = 0; j < cols; j++)
            var += (x[j] - mean) * (x[j] - mean);
        var /= cols;
        for (j = 0; j < cols; j++)
            want[r * cols + j] = (x[j] - mean) / sqrt(var + c->s.eps) *
                                     c->scale[j] +
                                 (c->s.has_bias ? c->bias[j] : 0);
    }
}

START_TEST(layernorm_forward_matches_formula)
{
    ln_case c;
    double want[32];
    ln_setup(&c, _i, 1400 + _i);
    ln_loss(&c);
    ln_expect(&c, want);
    expect_near("layernorm", c.y, want, c.n, 1e-5, 1e-5);
}
END_TEST

/* With scale 1 and no bias every row has mean 0 and variance
 * var / (var + eps): 1 when eps is 0. */
START_TEST(layernorm_rows_have_mean_0_variance_1)
{
    enum { R = 4, C = 24 };
    float x[R * C], y[R * C], one[C];
    int r, j, e;
    tseed(1500);
    fill(x, R * C, -3, 5);
    rt_fill(one, C, 1.0f);
    for (e = 0; e < 2; e++) {
        const float eps = e == 0 ? 0.0f : 1e-2f;
        rt_layernorm_forward(y, x, one, NULL, R, C, eps);
        for (r = 0; r < R; r++) {
            double xm = 0, xv = 0, m = 0, v = 0;
            for (j = 0; j < C; j++)
                xm += x[r * C + j], m += y[r * C + j];
            xm /= C, m /= C;
            for (j = 0; j < C; j++) {
                xv += (x[r * C + j] - xm) * (x[r * C + j] - xm);
                v += (y[r * C + j] - m) * (y[r * C + j] - m);
            }
            xv /= C, v /= C;
            ck_assert_msg(fabs(m) < 1e-6, "row %d mean %g", r, m);
            ck_assert_msg(fabs(v - xv / (xv + eps)) < 1e-5,
                          "row %d eps %g: variance %.9g, want %.9g", r,
                          (double)eps, v, xv / (xv + eps));
        }
    }
}
END_TEST

/* x = {1, 2, 3, 4}, eps 0: mean 2.5, var 1.25, 1/std = 0.894427191,
 * xhat = {-1.341640786, -0.4472135955, 0.4472135955, 1.341640786};
 * scale {2, 1, 1, 1}, bias {0, 0, 0, 10}. The second row is the same plus
 * 10000: the normalisation must not lose it to cancellation (float's
 * spacing there is 2^-10, so xhat is exact to ~1e-3). */
START_TEST(layernorm_forward_by_hand)
{
    const float x[8] = {1, 2, 3, 4, 10001, 10002, 10003, 10004},
                scale[4] = {2, 1, 1, 1}, bias[4] = {0, 0, 0, 10};
    const double w[4] = {-2.683281573, -0.4472135955, 0.4472135955,
                         11.34164079};
    float y[8];
    rt_layernorm_forward(y, x, scale, bias, 2, 4, 0.0f);
    expect_near("row 0", y, w, 4, 1e-6, 0);
    expect_near("row 1 (mean 10002.5)", y + 4, w, 4, 0, 1e-3);
}
END_TEST

/* Every subset of (dx, dscale, dbias) as NULL: from the same presets, the
 * others end exactly where the call with all three leaves them, scale
 * may be NULL when dx is, and x when dx and dscale are (a frozen scale:
 * the backward reads nothing for the bias alone). */
START_TEST(layernorm_backward_skips_null)
{
    ln_case c;
    float full[3][32], got[3][32], pre[3][32], scratch[32];
    const int len[3] = {24, 8, 8};
    int mask, g, i;
    ln_setup(&c, 0, 1600);
    for (g = 0; g < 3; g++)
        fill(pre[g], len[g], -1, 1);
    memcpy(full, pre, sizeof full);
    rt_layernorm_backward(full[0], full[1], full[2], c.dy, c.x, c.scale,
                          c.s.rows, c.s.cols, c.s.eps, scratch);
    for (mask = 0; mask < 8; mask++) {
        memcpy(got, pre, sizeof got);
        rt_layernorm_backward(mask & 1 ? got[0] : NULL,
                              mask & 2 ? got[1] : NULL,
                              mask & 4 ? got[2] : NULL, c.dy,
                              mask & 3 ? c.x : NULL,
                              mask & 1 ? c.scale : NULL, c.s.rows, c.s.cols,
                              c.s.eps, mask & 6 ? scratch : NULL);
        for (g = 0; g < 3; g++)
            for (i = 0; i < len[g]; i++) {
                const float w = mask >> g & 1 ? full[g][i] : pre[g][i];
                ck_assert_msg(got[g][i] == w, "mask %d gradient %d [%d]: "
                              "%.9g, want %.9g", mask, g, i,
                              (double)got[g][i], (double)w);
            }
    }
}
END_TEST

/* A remade recompute: rt_layernorm_backward_remake writes the forward's y
 * and the backward's three gradients, each bit for bit what
 * rt_layernorm_forward and rt_layernorm_backward write, with and without
 * a bias, over rows in several of the backward's blocks (split over the
 * threads where there are any) and rows of a whole and a part sum block. */
START_TEST(layernorm_remake_is_forward_and_backward)
{
    static const int shapes[][2] = {{300, 37}, {257, 128}, {3, 1}};
    int k, has_bias;
    tseed(1700);
    for (k = 0; k < 3; k++)
        for (has_bias = 0; has_bias < 2; has_bias++) {
            const int rows = shapes[k][0], cols = shapes[k][1];
            const size_t n = (size_t)rows * cols;
            float *x = rnd(n), *dy = rnd(n), *scale = rnd((size_t)cols);
            float *bias = has_bias ? rnd((size_t)cols) : NULL;
            float *y = nans(n), *y2 = nans(n), *pre = rnd(n);
            float *dx = copy(pre, n), *dx2 = copy(pre, n);
            float *ds = rnd((size_t)cols), *ds2 = copy(ds, (size_t)cols);
            float *db = rnd((size_t)cols), *db2 = copy(db, (size_t)cols);
            float *scratch = nans(rt_layernorm_backward_scratch(cols));
            rt_layernorm_forward(y, x, scale, bias, rows, cols, 1e-5f);
            rt_layernorm_backward(dx, ds, db, dy, x, scale, rows, cols, 1e-5f,
                                  scratch);
            rt_layernorm_backward_remake(dx2, ds2, db2, y2, dy, x, scale, bias,
                                         rows, cols, 1e-5f, scratch);
            ck_assert_msg(memcmp(y, y2, n * sizeof *y) == 0,
                          "%dx%d bias %d: y differs", rows, cols, has_bias);
            ck_assert(memcmp(dx, dx2, n * sizeof *dx) == 0);
            ck_assert(memcmp(ds, ds2, (size_t)cols * sizeof *ds) == 0);
            ck_assert(memcmp(db, db2, (size_t)cols * sizeof *db) == 0);
            free(x), free(dy), free(scale), free(bias), free(y), free(y2);
            free(pre), free(dx), free(dx2), free(ds), free(ds2), free(db);
            free(db2), free(scratch);
        }
}
END_TEST

/* ---- batchnorm ----------------------------------------------------------- */

typedef struct {
    int n, c, inner;
    float eps;
} bn_spec;

/* rank 2 (inner 1), rank 4, one image with spatial positions, a large eps */
static const bn_spec bn_specs[] = {
    {4, 3, 1, 1e-5f}, {2, 3, 4, 1e-5f}, {1, 2, 6, 1e-3f}, {3, 2, 2, 0.5f},
};
#define N_BN ((int)(sizeof bn_specs / sizeof bn_specs[0]))

typedef struct {
    bn_spec s;
    int len;
    float x[32], scale[4], bias[4], y[32], dy[32];
} bn_case;

static double bn_loss(void *v)
{
    bn_case *c = v;
    memset(c->y, 0x7f, sizeof c->y); /* garbage: forward must overwrite */
    rt_batchnorm_train_forward(c->y, NULL, NULL, c->x, c->scale, c->bias,
                               c->s.n, c->s.c, c->s.inner, c->s.eps, 0.9f);
    return dot(c->y, c->dy, c->len);
}

static void bn_setup(bn_case *c, int spec, uint64_t seed)
{
    c->s = bn_specs[spec];
    c->len = c->s.n * c->s.c * c->s.inner;
    tseed(seed);
    fill(c->x, c->len, -1, 2);
    fill_away(c->scale, c->s.c, 0.5f, 1.5f);
    fill(c->bias, c->s.c, -1, 1);
    fill(c->dy, c->len, -1, 1);
}

START_TEST(batchnorm_grad)
{
    bn_case c;
    float dx[32], dscale[4], dbias[4], px[32], ps[4], pb[4], diff[32];
    char what[80];
    bn_setup(&c, _i, 2100 + _i);
    fill(px, c.len, -1, 1);
    fill(ps, c.s.c, -1, 1);
    fill(pb, c.s.c, -1, 1);
    memcpy(dx, px, sizeof dx);
    memcpy(dscale, ps, sizeof dscale);
    memcpy(dbias, pb, sizeof dbias);
    rt_batchnorm_backward(dx, dscale, dbias, c.dy, c.x, c.scale, c.s.n, c.s.c,
                          c.s.inner, c.s.eps);
    snprintf(what, sizeof what, "batchnorm (%d,%d,%d) eps %g: dx", c.s.n,
             c.s.c, c.s.inner, (double)c.s.eps);
    added(diff, dx, px, c.len);
    expect_grad(what, c.x, c.len, diff, bn_loss, &c);
    strcpy(what + strlen(what) - 2, "dscale");
    added(diff, dscale, ps, c.s.c);
    expect_grad(what, c.scale, c.s.c, diff, bn_loss, &c);
    strcpy(what + strlen(what) - 6, "dbias");
    added(diff, dbias, pb, c.s.c);
    expect_grad(what, c.bias, c.s.c, diff, bn_loss, &c);
}
END_TEST

/* The batch gradient is not the per-element one: the paths through the
 * batch mean and variance make dx sum to 0 over each channel, and dx
 * orthogonal to xhat, whatever dy. A backward that treated the statistics
 * as constants fails both. */
START_TEST(batchnorm_dx_sums_to_zero_per_channel)
{
    bn_case c;
    float dx[32] = {0};
    int ch, i, j;
    bn_setup(&c, 1, 2200);
    rt_batchnorm_backward(dx, NULL, NULL, c.dy, c.x, c.scale, c.s.n, c.s.c,
                          c.s.inner, 0.0f);
    for (ch = 0; ch < c.s.c; ch++) {
        double s = 0, sx = 0, mean = 0, var = 0, m = c.s.n * c.s.inner;
        for (i = 0; i < c.s.n; i++)
            for (j = 0; j < c.s.inner; j++)
                mean += c.x[(i * c.s.c + ch) * c.s.inner + j];
        mean /= m;
        for (i = 0; i < c.s.n; i++)
            for (j = 0; j < c.s.inner; j++) {
                double d = c.x[(i * c.s.c + ch) * c.s.inner + j] - mean;
                var += d * d;
            }
        var /= m;
        for (i = 0; i < c.s.n; i++)
            for (j = 0; j < c.s.inner; j++) {
                int k = (i * c.s.c + ch) * c.s.inner + j;
                s += dx[k];
                sx += dx[k] * (c.x[k] - mean) / sqrt(var);
            }
        ck_assert_msg(fabs(s) < 1e-5, "channel %d: sum dx %g", ch, s);
        ck_assert_msg(fabs(sx) < 1e-5, "channel %d: sum dx*xhat %g", ch, sx);
    }
}
END_TEST

/* The ONNX formula in double; mean and var NULL: the batch's. */
static void bn_expect(const bn_case *c, const float *mean_in,
                      const float *var_in, double *want)
{
    const int n = c->s.n, C = c->s.c, inner = c->s.inner;
    int ch, i, j;
    for (ch = 0; ch < C; ch++) {
        double mean = 0, var = 0, m = (double)n * inner;
        for (i = 0; i < n; i++)
            for (j = 0; j < inner; j++)
                mean += c->x[(i * C + ch) * inner + j];
        mean /= m;
        for (i = 0; i < n; i++)
            for (j = 0; j < inner; j++) {
                double d = c->x[(i * C + ch) * inner + j] - mean;
                var += d * d;
            }
        var /= m;
        if (mean_in) {
            mean = mean_in[ch];
            var = var_in[ch];
        }
        for (i = 0; i < n; i++)
            for (j = 0; j < inner; j++) {
                int k = (i * C + ch) * inner + j;
                want[k] = (c->x[k] - mean) / sqrt(var + c->s.eps) *
                              c->scale[ch] + c->bias[ch];
            }
    }
}

START_TEST(batchnorm_train_forward_matches_formula)
{
    bn_case c;
    double want[32];
    bn_setup(&c, _i, 2300 + _i);
    bn_loss(&c);
    bn_expect(&c, NULL, NULL, want);
    expect_near("batchnorm train", c.y, want, c.len, 1e-5, 1e-5);
}
END_TEST

/* Inference reads the given statistics, never the batch's. */
START_TEST(batchnorm_inference_uses_given_statistics)
{
    bn_case c;
    double want[32];
    float mean[4], var[4];
    bn_setup(&c, _i, 2400 + _i);
    fill(mean, c.s.c, -0.5f, 0.5f);
    fill(var, c.s.c, 0.2f, 3.0f);
    memset(c.y, 0x7f, sizeof c.y);
    rt_batchnorm_forward(c.y, c.x, c.scale, c.bias, mean, var, c.s.n, c.s.c,
                         c.s.inner, c.s.eps);
    bn_expect(&c, mean, var, want);
    expect_near("batchnorm inference", c.y, want, c.len, 1e-5, 1e-5);
}
END_TEST

/* By hand: y = scale * (x - mean) / sqrt(var + eps) + bias with mean 1,
 * var 3, eps 1, scale 2, bias 0.5: x = 5 gives 2 * 4 / 2 + 0.5 = 4.5. */
START_TEST(batchnorm_inference_by_hand)
{
    const float x[2] = {5.0f, -1.0f}, scale = 2.0f, bias = 0.5f, mean = 1.0f,
                var = 3.0f;
    float y[2];
    rt_batchnorm_forward(y, x, &scale, &bias, &mean, &var, 2, 1, 1, 1.0f);
    ck_assert_float_eq(y[0], 4.5f);
    ck_assert_float_eq(y[1], -1.5f);
}
END_TEST

/* x (2, 2, 2): channel 0 holds {1, 3, 5, 7} (mean 4, biased var 5,
 * unbiased 20/3), channel 1 {2, 2, 2, 6} (mean 3, biased var 3, unbiased 4).
 * With momentum 0.9 from running (0.5, 1) and (2, 10):
 *   mean: 0.9*0.5 + 0.1*4 = 0.85,  0.9*1 + 0.1*3 = 1.2
 *   var:  0.9*2 + 0.1*20/3 = 2.4666..,  0.9*10 + 0.1*4 = 9.4
 * (ONNX's reference, with the biased variance, would give 2.3 and 9.3.) */
START_TEST(batchnorm_running_update_by_hand)
{
    const float x[8] = {1, 3, 2, 2, 5, 7, 2, 6};
    const float scale[2] = {1, 1}, bias[2] = {0, 0};
    float y[8], rm[2] = {0.5f, 1.0f}, rv[2] = {2.0f, 10.0f};
    rt_batchnorm_train_forward(y, rm, rv, x, scale, bias, 2, 2, 2, 0.0f, 0.9f);
    ck_assert_float_eq_tol(rm[0], 0.85f, 1e-6f);
    ck_assert_float_eq_tol(rm[1], 1.2f, 1e-6f);
    ck_assert_float_eq_tol(rv[0], 2.0f * 0.9f + 0.1f * 20.0f / 3.0f, 1e-6f);
    ck_assert_float_eq_tol(rv[1], 9.4f, 1e-6f);
    /* and the output used the batch's statistics: channel 0's x = 1 is
     * (1 - 4) / sqrt(5) */
    ck_assert_float_eq_tol(y[0], (float)(-3.0 / sqrt(5.0)), 1e-6f);
    ck_assert_float_eq_tol(y[2], (float)(-1.0 / sqrt(3.0)), 1e-6f);
}
END_TEST

/* momentum 1 keeps the running statistics; momentum 0 replaces them with
 * the batch's (unbiased variance); NULL pointers leave them alone, and the
 * output is the same whether or not they are updated. */
START_TEST(batchnorm_running_update_momentum_ends)
{
    bn_case c;
    float rm[4], rv[4], y0[32];
    double want[32];
    int ch;
    bn_setup(&c, 1, 2500);
    bn_expect(&c, NULL, NULL, want);
    for (ch = 0; ch < c.s.c; ch++)
        rm[ch] = 7.0f, rv[ch] = 9.0f;
    rt_batchnorm_train_forward(y0, rm, rv, c.x, c.scale, c.bias, c.s.n, c.s.c,
                               c.s.inner, c.s.eps, 1.0f);
    for (ch = 0; ch < c.s.c; ch++) {
        ck_assert_float_eq(rm[ch], 7.0f);
        ck_assert_float_eq(rv[ch], 9.0f);
    }
    bn_loss(&c);   /* NULL running statistics */
    ck_assert_int_eq(memcmp(y0, c.y, (size_t)c.len * sizeof(float)), 0);
    rt_batchnorm_train_forward(y0, rm, rv, c.x, c.scale, c.bias, c.s.n, c.s.c,
                               c.s.inner, c.s.eps, 0.0f);
    for (ch = 0; ch < c.s.c; ch++) {
        const double m = c.s.n * c.s.inner;
        double mean = 0, var = 0;
        int i, j;
        for (i = 0; i < c.s.n; i++)
            for (j = 0; j < c.s.inner; j++)
                mean += c.x[(i * c.s.c + ch) * c.s.inner + j];
        mean /= m;
        for (i = 0; i < c.s.n; i++)
            for (j = 0; j < c.s.inner; j++) {
                double d = c.x[(i * c.s.c + ch) * c.s.inner + j] - mean;
                var += d * d;
            }
        ck_assert_float_eq_tol(rm[ch], (float)mean, 1e-6f);
        ck_assert_float_eq_tol(rv[ch], (float)(var / (m - 1)), 1e-5f);
    }
}
END_TEST

START_TEST(batchnorm_backward_skips_null)
{
    bn_case c;
    float dx[32], dscale[4], dbias[4], ref_dx[32], ref_ds[4], ref_db[4];
    bn_setup(&c, 1, 2600);
    memset(ref_dx, 0, sizeof ref_dx);
    memset(ref_ds, 0, sizeof ref_ds);
    memset(ref_db, 0, sizeof ref_db);
    rt_batchnorm_backward(ref_dx, ref_ds, ref_db, c.dy, c.x, c.scale, c.s.n,
                          c.s.c, c.s.inner, c.s.eps);
    /* each gradient alone is the same as with the others */
    memset(dx, 0, sizeof dx);
    rt_batchnorm_backward(dx, NULL, NULL, c.dy, c.x, c.scale, c.s.n, c.s.c,
                          c.s.inner, c.s.eps);
    ck_assert_int_eq(memcmp(dx, ref_dx, sizeof dx), 0);
    memset(dscale, 0, sizeof dscale);
    memset(dbias, 0, sizeof dbias);
    /* scale is read only for dx */
    rt_batchnorm_backward(NULL, dscale, dbias, c.dy, c.x, NULL, c.s.n, c.s.c,
                          c.s.inner, c.s.eps);
    ck_assert_int_eq(memcmp(dscale, ref_ds, sizeof dscale), 0);
    ck_assert_int_eq(memcmp(dbias, ref_db, sizeof dbias), 0);
    /* x is read only for dx and dscale */
    memset(dbias, 0, sizeof dbias);
    rt_batchnorm_backward(NULL, NULL, dbias, c.dy, NULL, NULL, c.s.n, c.s.c,
                          c.s.inner, c.s.eps);
    ck_assert_int_eq(memcmp(dbias, ref_db, sizeof dbias), 0);
    rt_batchnorm_backward(NULL, NULL, NULL, c.dy, c.x, c.scale, c.s.n, c.s.c,
                          c.s.inner, c.s.eps);
}
END_TEST

/* ---- batchnorm in eval mode (a frozen BatchNorm in the train step) ------- */

/* The eval forward with fixed running statistics, whose gradient
 * rt_batchnorm_eval_backward must be. */
typedef struct {
    bn_case b;
    float mean[4], var[4];
} bn_eval_case;

static double bn_eval_loss(void *v)
{
    bn_eval_case *c = v;
    memset(c->b.y, 0x7f, sizeof c->b.y);
    rt_batchnorm_forward(c->b.y, c->b.x, c->b.scale, c->b.bias, c->mean,
                         c->var, c->b.s.n, c->b.s.c, c->b.s.inner, c->b.s.eps);
    return dot(c->b.y, c->b.dy, c->b.len);
}

static void bn_eval_setup(bn_eval_case *c, int spec, uint64_t seed)
{
    bn_setup(&c->b, spec, seed);
    fill(c->mean, c->b.s.c, -0.5f, 0.5f);
    fill(c->var, c->b.s.c, 0.2f, 3.0f);
}

START_TEST(batchnorm_eval_grad)
{
    bn_eval_case c;
    float dx[32], dscale[4], dbias[4], px[32], ps[4], pb[4], diff[32];
    bn_eval_setup(&c, _i, 2700 + _i);
    fill(px, c.b.len, -1, 1);
    fill(ps, c.b.s.c, -1, 1);
    fill(pb, c.b.s.c, -1, 1);
    memcpy(dx, px, sizeof dx);
    memcpy(dscale, ps, sizeof dscale);
    memcpy(dbias, pb, sizeof dbias);
    rt_batchnorm_eval_backward(dx, dscale, dbias, c.b.dy, c.b.x, c.b.scale,
                               c.mean, c.var, c.b.s.n, c.b.s.c, c.b.s.inner,
                               c.b.s.eps);
    added(diff, dx, px, c.b.len);
    expect_grad("batchnorm eval: dx", c.b.x, c.b.len, diff, bn_eval_loss, &c);
    added(diff, dscale, ps, c.b.s.c);
    expect_grad("batchnorm eval: dscale", c.b.scale, c.b.s.c, diff,
                bn_eval_loss, &c);
    added(diff, dbias, pb, c.b.s.c);
    expect_grad("batchnorm eval: dbias", c.b.bias, c.b.s.c, diff,
                bn_eval_loss, &c);
}
END_TEST

/* By hand: var 3, eps 1 (rstd 1/2), scale 2, mean 1; x = {5, -1}, dy =
 * {1, 3}: dx = dy * 2 / 2 = dy, dscale = 1 * 4/2 + 3 * (-2)/2 = -1, dbias
 * = 4. Unlike the batch gradient, dx does not sum to 0 over the channel. */
START_TEST(batchnorm_eval_backward_by_hand)
{
    const float x[2] = {5.0f, -1.0f}, dy[2] = {1.0f, 3.0f}, scale = 2.0f,
                mean = 1.0f, var = 3.0f;
    float dx[2] = {0.5f, 0.0f}, dscale = 0.0f, dbias = 10.0f;
    rt_batchnorm_eval_backward(dx, &dscale, &dbias, dy, x, &scale, &mean, &var,
                               2, 1, 1, 1.0f);
    ck_assert_float_eq(dx[0], 1.5f);
    ck_assert_float_eq(dx[1], 3.0f);
    ck_assert_float_eq(dscale, -1.0f);
    ck_assert_float_eq(dbias, 14.0f);
}
END_TEST

/* Each gradient alone is the one of the full call, and reads only what
 * the header says: dx neither x nor mean, dbias neither scale nor var. */
START_TEST(batchnorm_eval_backward_skips_null)
{
    bn_eval_case c;
    float dx[32] = {0}, ds[4] = {0}, db[4] = {0}, rdx[32] = {0}, rds[4] = {0},
          rdb[4] = {0};
    bn_eval_setup(&c, 1, 2800);
    rt_batchnorm_eval_backward(rdx, rds, rdb, c.b.dy, c.b.x, c.b.scale, c.mean,
                               c.var, c.b.s.n, c.b.s.c, c.b.s.inner, c.b.s.eps);
    rt_batchnorm_eval_backward(dx, NULL, NULL, c.b.dy, NULL, c.b.scale, NULL,
                               c.var, c.b.s.n, c.b.s.c, c.b.s.inner, c.b.s.eps);
    ck_assert_int_eq(memcmp(dx, rdx, sizeof dx), 0);
    rt_batchnorm_eval_backward(NULL, ds, NULL, c.b.dy, c.b.x, NULL, c.mean,
                               c.var, c.b.s.n, c.b.s.c, c.b.s.inner, c.b.s.eps);
    ck_assert_int_eq(memcmp(ds, rds, sizeof ds), 0);
    rt_batchnorm_eval_backward(NULL, NULL, db, c.b.dy, NULL, NULL, NULL, NULL,
                               c.b.s.n, c.b.s.c, c.b.s.inner, c.b.s.eps);
    ck_assert_int_eq(memcmp(db, rdb, sizeof db), 0);
}
END_TEST

/* ---- sums that do not drift (issue 25) ----------------------------------- */

/* Lengths 2^16, 2^18, 2^20 of values 0.1 + noise: a float loop's error grows
 * with the length (adding 0.1 to a total near 1e5 rounds by up to 4e-3), so
 * the one-value-at-a-time sums these kernels had miss every bound below by
 * orders of magnitude; the blocked, compensated rt_sum stays within a few
 * ulps of the double sum of the same floats at every length. */
static const int drift_log2[] = {16, 18, 20};
#define N_DRIFT ((int)(sizeof drift_log2 / sizeof drift_log2[0]))

static void double_moments(const float *x, size_t n, double *mean,
                           double *var)
{
    double s = 0, v = 0;
    size_t i;
    for (i = 0; i < n; i++)
        s += x[i];
    *mean = s / (double)n;
    for (i = 0; i < n; i++)
        v += (x[i] - *mean) * (x[i] - *mean);
    *var = v / (double)n;
}

/* One channel of n = 2^k values (batch 1, one spatial dim): the running
 * statistics with momentum 0 are the batch mean and the unbiased variance. */
START_TEST(batchnorm_statistics_do_not_drift)
{
    const size_t n = (size_t)1 << drift_log2[_i];
    float *x = drift_values(n, (unsigned)n, 0.01f), *y = malloc(n * sizeof *y);
    const float scale = 1.0f, bias = 0.0f;
    float rm = 5.0f, rv = 5.0f;
    double mean, var;
    ck_assert_ptr_nonnull(y);
    double_moments(x, n, &mean, &var);
    var = var * (double)n / (double)(n - 1);
    rt_batchnorm_train_forward(y, &rm, &rv, x, &scale, &bias, 1, 1, (int)n,
                               0.0f, 0.0f);
    /* a float ulp of 0.1 is 7.5e-9; of var (~3.3e-5) 3.6e-12 */
    ck_assert_msg(fabs(rm - mean) <= 3.0e-8, "n %zu: mean %.9g, double %.12g",
                  n, rm, mean);
    ck_assert_msg(fabs(rv - var) <= 4.0e-6 * var,
                  "n %zu: var %.9g, double %.12g", n, rv, var);
    free(x);
    free(y);
}
END_TEST

/* dbias is the sum of dy over the channel, with dx wanted (the path that
 * also sums dy * xhat) and alone. */
START_TEST(batchnorm_backward_sums_do_not_drift)
{
    const size_t n = (size_t)1 << drift_log2[_i];
    float *x = drift_values(n, (unsigned)n, 0.01f);
    float *dy = drift_values(n, (unsigned)n, 0.05f);
    float *dx = zeros(n);
    const float scale = 1.0f;
    float dscale = 0.0f, dbias = 0.0f, dbias_only = 0.0f;
    double want = 0;
    size_t i;
    for (i = 0; i < n; i++)
        want += dy[i];
    rt_batchnorm_backward(dx, &dscale, &dbias, dy, x, &scale, 1, 1, (int)n,
                          1e-5f);
    rt_batchnorm_backward(NULL, NULL, &dbias_only, dy, x, &scale, 1, 1,
                          (int)n, 1e-5f);
    ck_assert_msg(fabs(dbias - want) <= 4e-7 * want,
                  "n %zu: dbias %.9g, double %.12g", n, dbias, want);
    ck_assert_msg(fabs(dbias_only - want) <= 4e-7 * want,
                  "n %zu: dbias alone %.9g, double %.12g", n, dbias_only,
                  want);
    free(x);
    free(dy);
    free(dx);
}
END_TEST

/* One LayerNorm row of n = 2^k values with std ~5.8e-3: y = (x - mean) *
 * rstd carries the mean's error times rstd (~170), so a mean off by the
 * old loop's ~1e-6 puts y off by ~1e-4; a mean within an ulp, by ~1e-6. */
START_TEST(layernorm_statistics_do_not_drift)
{
    const size_t n = (size_t)1 << drift_log2[_i];
    float *x = drift_values(n, (unsigned)n, 0.01f), *y = malloc(n * sizeof *y);
    float *scale = malloc(n * sizeof *scale);
    double mean, var, rstd, worst = 0;
    size_t i;
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(scale);
    for (i = 0; i < n; i++)
        scale[i] = 1.0f;
    double_moments(x, n, &mean, &var);
    rstd = 1.0 / sqrt(var + 1e-5);
    rt_layernorm_forward(y, x, scale, NULL, 1, (int)n, 1e-5f);
    for (i = 0; i < n; i++) {
        const double e = fabs(y[i] - (x[i] - mean) * rstd);
        if (e > worst)
            worst = e;
    }
    ck_assert_msg(worst <= 1e-5, "n %zu: y off by %.3g", n, worst);
    free(x);
    free(y);
    free(scale);
}
END_TEST

/* LayerNorm's dscale and dbias over 2^k rows of 2 columns, x[r] = (0, 1)
 * + noise (xhat about (-1, 1)) and dy about 0.1: totals that grow with the
 * rows, summed in blocks of 128 rows. Against the sums in double of the
 * same floats (xhat from x in double). The old kernel added each block's
 * sum to the gradient in float: off by up to 5.8e-7, 3.6e-7 and 1.2e-6
 * relative at 2^16, 2^18 and 2^20 rows; folded with compensation, within
 * 4e-8 at every length. */
START_TEST(layernorm_param_grads_do_not_drift)
{
    const int rows = 1 << drift_log2[_i];
    const size_t n = 2 * (size_t)rows;
    float *x = drift_values(n, 7u + (unsigned)rows, 0.01f);
    float *dy = drift_values(n, 11u + (unsigned)rows, 0.05f);
    float *scratch = malloc(rt_layernorm_backward_scratch(2) * sizeof *scratch);
    const float scale[2] = {1.0f, 1.0f};
    float ds[2] = {0, 0}, db[2] = {0, 0}, ds_only[2] = {0, 0};
    double want_s[2] = {0, 0}, want_b[2] = {0, 0};
    int r, j;
    ck_assert_ptr_nonnull(scratch);
    for (r = 0; r < rows; r++) {
        double mean, var, rstd;
        x[2 * r + 1] += 0.9f;
        double_moments(x + 2 * r, 2, &mean, &var);
        rstd = 1.0 / sqrt(var + 1e-5);
        for (j = 0; j < 2; j++) {
            want_s[j] += dy[2 * r + j] * ((x[2 * r + j] - mean) * rstd);
            want_b[j] += dy[2 * r + j];
        }
    }
    rt_layernorm_backward(NULL, ds, db, dy, x, scale, rows, 2, 1e-5f,
                          scratch);
    rt_layernorm_backward(NULL, ds_only, NULL, dy, x, scale, rows, 2, 1e-5f,
                          scratch);
    for (j = 0; j < 2; j++) {
        ck_assert_msg(fabs(ds[j] - want_s[j]) <= 1e-7 * fabs(want_s[j]),
                      "rows %d: dscale[%d] %.9g, double %.12g (%.3g rel)",
                      rows, j, ds[j], want_s[j],
                      fabs(ds[j] - want_s[j]) / fabs(want_s[j]));
        ck_assert_msg(ds_only[j] == ds[j], "rows %d: dscale alone [%d] "
                      "%.9g, with dbias %.9g", rows, j, ds_only[j], ds[j]);
        ck_assert_msg(fabs(db[j] - want_b[j]) <= 1e-7 * want_b[j],
                      "rows %d: dbias[%d] %.9g, double %.12g (%.3g rel)",
                      rows, j, db[j], want_b[j],
                      fabs(db[j] - want_b[j]) / want_b[j]);
    }
    free(x);
    free(dy);
    free(scratch);
}
END_TEST

/* ---- groupnorm (and instancenorm: one channel a group) -------------------- */

typedef struct {
    int n, c, inner, groups;
    float eps;
} gn_spec;

/* groups == c is InstanceNormalization; groups 1 normalizes each sample
 * whole; inner 1 with groups == c: every x is its group's mean. */
static const gn_spec gn_specs[] = {
    {2, 4, 6, 2, 1e-5f}, {2, 3, 5, 3, 1e-5f}, {1, 6, 4, 1, 0.1f},
    {3, 4, 3, 4, 1e-3f}, {2, 2, 1, 2, 1e-5f}, {2, 6, 2, 3, 0.5f},
};
#define N_GN ((int)(sizeof gn_specs / sizeof gn_specs[0]))

typedef struct {
    gn_spec s;
    int nx;
    float x[64], scale[8], bias[8], y[64], dy[64];
} gn_case;

static double gn_loss(void *v)
{
    gn_case *c = v;
    memset(c->y, 0x7f, sizeof c->y);
    rt_groupnorm_forward(c->y, c->x, c->scale, c->bias, c->s.n, c->s.c,
                         c->s.inner, c->s.groups, c->s.eps);
    return dot(c->y, c->dy, c->nx);
}

static void gn_setup(gn_case *c, int spec, uint64_t seed)
{
    c->s = gn_specs[spec];
    c->nx = c->s.n * c->s.c * c->s.inner;
    ck_assert(c->nx <= 64 && c->s.c <= 8);
    tseed(seed);
    fill(c->x, c->nx, -1, 1);
    fill_away(c->scale, c->s.c, 0.5f, 1.5f);
    fill(c->bias, c->s.c, -1, 1);
    fill(c->dy, c->nx, -1, 1);
}

START_TEST(groupnorm_grad)
{
    gn_case c;
    float dx[64], ds[8], db[8], px[64], ps[8], pb[8], diff[64];
    char what[80];
    gn_setup(&c, _i, 3100 + _i);
    fill(px, c.nx, -1, 1);
    fill(ps, c.s.c, -1, 1);
    fill(pb, c.s.c, -1, 1);
    memcpy(dx, px, sizeof dx);
    memcpy(ds, ps, sizeof ds);
    memcpy(db, pb, sizeof db);
    rt_groupnorm_backward(dx, ds, db, c.dy, c.x, c.scale, c.s.n, c.s.c,
                          c.s.inner, c.s.groups, c.s.eps);
    snprintf(what, sizeof what, "groupnorm (%d,%d,%d) groups %d: dx", c.s.n,
             c.s.c, c.s.inner, c.s.groups);
    added(diff, dx, px, c.nx);
    expect_grad(what, c.x, c.nx, diff, gn_loss, &c);
    strcpy(what + strlen(what) - 2, "dscale");
    added(diff, ds, ps, c.s.c);
    expect_grad(what, c.scale, c.s.c, diff, gn_loss, &c);
    strcpy(what + strlen(what) - 6, "dbias");
    added(diff, db, pb, c.s.c);
    expect_grad(what, c.bias, c.s.c, diff, gn_loss, &c);
}
END_TEST

/* The definition in double: each (sample, group) of c / groups channels
 * normalized with its mean and biased variance, then per-channel affine. */
static void gn_expect(const gn_case *c, double *want)
{
    const int per = c->s.c / c->s.groups, m = per * c->s.inner;
    int b, g, j;
    for (b = 0; b < c->s.n; b++)
        for (g = 0; g < c->s.groups; g++) {
            const int off = (b * c->s.c + g * per) * c->s.inner;
            double mean = 0, var = 0;
            for (j = 0; j < m; j++)
                mean += c->x[off + j];
            mean /= m;
            for (j = 0; j < m; j++)
                var += (c->x[off + j] - mean) * (c->x[off + j] - mean);
            var /= m;
            for (j = 0; j < m; j++) {
                const int ch = g * per + j / c->s.inner;
                want[off + j] = (c->x[off + j] - mean) /
                                sqrt(var + c->s.eps) * c->scale[ch] +
                                c->bias[ch];
            }
        }
}

START_TEST(groupnorm_forward_matches_formula)
{
    gn_case c;
    double want[64];
    gn_setup(&c, _i, 3200 + _i);
    gn_loss(&c);
    gn_expect(&c, want);
    expect_near("groupnorm", c.y, want, c.nx, 1e-5, 1e-6);
}
END_TEST

/* x = {1, 2, 3, 4} as one group of 2 channels of 2, eps 0: mean 2.5,
 * var 1.25, xhat = +-1.341640786, +-0.4472135955; channel scales {2, 1},
 * biases {0, 10}. As instance norm (2 groups): each channel of 2 values
 * normalizes to -1, 1 (eps 0). */
START_TEST(groupnorm_forward_by_hand)
{
    const float x[4] = {1, 2, 3, 4}, scale[2] = {2, 1}, bias[2] = {0, 10};
    const double w[4] = {-2.683281573, -0.894427191, 10.4472135955,
                         11.341640786},
                 wi[4] = {-2, 2, 9, 11};
    float y[4];
    rt_groupnorm_forward(y, x, scale, bias, 1, 2, 2, 1, 0.0f);
    expect_near("one group", y, w, 4, 1e-6, 0);
    rt_groupnorm_forward(y, x, scale, bias, 1, 2, 2, 2, 0.0f);
    expect_near("instance", y, wi, 4, 1e-6, 1e-6);
}
END_TEST

/* 2^20 values of mean 1000 and spread 1 in one group: float32 running sums
 * would be off by ~1e-3 relative; the double sums give each y within 1e-5
 * of the definition in double. */
START_TEST(groupnorm_no_drift)
{
    enum { M = 1 << 20 };
    float *x = malloc(M * sizeof *x), *y = malloc(M * sizeof *y);
    const float one = 1.0f, zero = 0.0f;
    double mean = 0, var = 0;
    int j;
    ck_assert(x != NULL && y != NULL);
    tseed(3300);
    for (j = 0; j < M; j++)
        x[j] = 1000.0f + trand(-1, 1);
    rt_groupnorm_forward(y, x, &one, &zero, 1, 1, M, 1, 1e-5f);
    for (j = 0; j < M; j++)
        mean += x[j];
    mean /= M;
    for (j = 0; j < M; j++)
        var += (x[j] - mean) * (x[j] - mean);
    var /= M;
    for (j = 0; j < M; j += 997) {
        const double want = (x[j] - mean) / sqrt(var + 1e-5);
        ck_assert_msg(fabs(y[j] - want) < 1e-5, "y[%d] %.9g, want %.9g", j,
                      (double)y[j], want);
    }
    free(x);
    free(y);
}
END_TEST

/* Every subset of (dx, dscale, dbias) as NULL gives the same values in
 * the others as the call with all three; x and scale may be NULL where
 * nothing reads them. More than RT_GN_CHUNK (64) channels, so dscale's
 * chunks meet inside a group. */
START_TEST(groupnorm_backward_skips_null)
{
    enum { N = 2, C = 90, I = 3, G = 9 };
    float *x = rnd(N * C * I), *dy = rnd(N * C * I), *scale = rnd(C);
    float *pre[3], *full[3], *got[3];
    const size_t len[3] = {N * C * I, C, C};
    int mask, g;
    tseed(3400);
    for (g = 0; g < 3; g++) {
        pre[g] = rnd(len[g]);
        full[g] = copy(pre[g], len[g]);
    }
    rt_groupnorm_backward(full[0], full[1], full[2], dy, x, scale, N, C, I, G,
                          1e-5f);
    for (mask = 0; mask < 8; mask++) {
        for (g = 0; g < 3; g++)
            got[g] = copy(pre[g], len[g]);
        rt_groupnorm_backward(mask & 1 ? got[0] : NULL,
                              mask & 2 ? got[1] : NULL,
                              mask & 4 ? got[2] : NULL, dy,
                              mask & 3 ? x : NULL, mask & 1 ? scale : NULL, N,
                              C, I, G, 1e-5f);
        for (g = 0; g < 3; g++) {
            expect_same(mask & (1 << g) ? "computed" : "left alone", got[g],
                        mask & (1 << g) ? full[g] : pre[g], (int)len[g]);
            free(got[g]);
        }
    }
    for (g = 0; g < 3; g++) {
        free(pre[g]);
        free(full[g]);
    }
    free(x);
    free(dy);
    free(scale);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *norm_suite(void)
{
    Suite *s = suite_create("remat_rt norm");
    TCase *tc;

    tc = tcase_create("layernorm");
    tcase_add_loop_test(tc, layernorm_grad, 0, N_LN);
    tcase_add_loop_test(tc, layernorm_forward_matches_formula, 0, N_LN);
    tcase_add_test(tc, layernorm_rows_have_mean_0_variance_1);
    tcase_add_test(tc, layernorm_forward_by_hand);
    tcase_add_test(tc, layernorm_backward_skips_null);
    tcase_add_test(tc, layernorm_remake_is_forward_and_backward);
    suite_add_tcase(s, tc);

    tc = tcase_create("batchnorm");
    tcase_add_loop_test(tc, batchnorm_grad, 0, N_BN);
    tcase_add_test(tc, batchnorm_dx_sums_to_zero_per_channel);
    tcase_add_loop_test(tc, batchnorm_train_forward_matches_formula, 0, N_BN);
    tcase_add_loop_test(tc, batchnorm_inference_uses_given_statistics, 0, N_BN);
    tcase_add_test(tc, batchnorm_inference_by_hand);
    tcase_add_test(tc, batchnorm_running_update_by_hand);
    tcase_add_test(tc, batchnorm_running_update_momentum_ends);
    tcase_add_test(tc, batchnorm_backward_skips_null);
    tcase_add_loop_test(tc, batchnorm_eval_grad, 0, N_BN);
    tcase_add_test(tc, batchnorm_eval_backward_by_hand);
    tcase_add_test(tc, batchnorm_eval_backward_skips_null);
    suite_add_tcase(s, tc);

    tc = tcase_create("groupnorm");
    tcase_add_loop_test(tc, groupnorm_grad, 0, N_GN);
    tcase_add_loop_test(tc, groupnorm_forward_matches_formula, 0, N_GN);
    tcase_add_test(tc, groupnorm_forward_by_hand);
    tcase_add_test(tc, groupnorm_no_drift);
    tcase_add_test(tc, groupnorm_backward_skips_null);
    suite_add_tcase(s, tc);

    tc = tcase_create("sums");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, batchnorm_statistics_do_not_drift, 0, N_DRIFT);
    tcase_add_loop_test(tc, batchnorm_backward_sums_do_not_drift, 0, N_DRIFT);
    tcase_add_loop_test(tc, layernorm_statistics_do_not_drift, 0, N_DRIFT);
    tcase_add_loop_test(tc, layernorm_param_grads_do_not_drift, 0, N_DRIFT);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(norm_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
