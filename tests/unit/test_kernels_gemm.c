/*
 * test_kernels_gemm.c: unit tests of the runtime's matrix products: the
 * GEMM itself (rt_sgemm, rt_sgemm_ref), ONNX Gemm (rt_gemm_forward,
 * rt_gemm_backward and its _set twin) and the batched MatMul (rt_bmm_*),
 * with Check. The Makefile builds it twice, with BLAS and with
 * -DRT_NO_BLAS, so that both GEMM paths are tested.
 *
 * Every backward is checked against central finite differences of its
 * forward (rt_testutil.h), with loss L = sum(dy * y) for a random upstream
 * gradient dy, from a random preset gradient so that `+=` is tested too,
 * and called with NULL gradients. Every forward is checked against
 * hand-worked numbers or the definition in double written here (ONNX
 * Gemm element by element, the naive triple loop matrix by matrix), never
 * against the kernels themselves; rt_sgemm against rt_sgemm_ref, bit for
 * bit without BLAS. The _set twin is checked against the adding kernel as
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

/* ---- GEMM ---------------------------------------------------------------- */

typedef struct {
    float a[64], b[64], c[64], y[64], dy[64];
    int m, n, k, ta, tb, cr, cc, has_c;
    float alpha, beta;
} gemm_case;

static double gemm_loss(void *v)
{
    gemm_case *g = v;
    rt_gemm_forward(g->y, g->a, g->b, g->has_c ? g->c : NULL, g->m, g->n, g->k,
                    g->ta, g->tb, g->alpha, g->beta, g->cr, g->cc);
    return dot(g->y, g->dy, g->m * g->n);
}

/* The ONNX definition, element by element, in double. */
static void gemm_expect(const gemm_case *g, double *want)
{
    int i, j, p;
    for (i = 0; i < g->m; i++)
        for (j = 0; j < g->n; j++) {
            double s = 0;
            for (p = 0; p < g->k; p++) {
                double av = g->ta ? g->a[p * g->m + i] : g->a[i * g->k + p];
                double bv = g->tb ? g->b[j * g->k + p] : g->b[p * g->n + j];
                s += av * bv;
            }
            s *= g->alpha;
            if (g->has_c)
                s += g->beta * g->c[(g->cr == 1 ? 0 : i) * g->cc +
                                    (g->cc == 1 ? 0 : j)];
            want[i * g->n + j] = s;
        }
}

/* _i = trans_a + 2 trans_b + 4 * bias shape (none, 1xn, mx1, mxn, 1x1). */
START_TEST(gemm_grad_all_trans_and_bias)
{
    static const int bias[5][2] = {{0, 0}, {1, 4}, {3, 1}, {3, 4}, {1, 1}};
    gemm_case g;
    float da[64], db[64], dc[64], pa[64], pb[64], pc[64], diff[64];
    double want[64];
    char what[64];
    memset(&g, 0, sizeof g);
    tseed(100 + _i);
    g.m = 3, g.n = 4, g.k = 5;
    g.ta = _i & 1, g.tb = (_i >> 1) & 1;
    g.cr = bias[_i >> 2][0], g.cc = bias[_i >> 2][1], g.has_c = g.cr > 0;
    g.alpha = 0.7f, g.beta = -1.3f;
    fill(g.a, 15, -1, 1);
    fill(g.b, 20, -1, 1);
    fill(g.c, 12, -1, 1);
    fill(g.dy, 12, -1, 1);
    fill(pa, 15, -1, 1);
    fill(pb, 20, -1, 1);
    fill(pc, 12, -1, 1);
    memcpy(da, pa, sizeof da);
    memcpy(db, pb, sizeof db);
    memcpy(dc, pc, sizeof dc);

    gemm_loss(&g);
    gemm_expect(&g, want);
    expect_near("gemm y", g.y, want, 12, 1e-5, 1e-5);

    rt_gemm_backward(da, db, g.has_c ? dc : NULL, g.dy, g.a, g.b, g.m, g.n,
                     g.k, g.ta, g.tb, g.alpha, g.beta, g.cr, g.cc);
    snprintf(what, sizeof what, "da (ta=%d tb=%d c=%dx%d)", g.ta, g.tb, g.cr, g.cc);
    added(diff, da, pa, 15);
    expect_grad(what, g.a, 15, diff, gemm_loss, &g);
    what[1] = 'b';
    added(diff, db, pb, 20);
    expect_grad(what, g.b, 20, diff, gemm_loss, &g);
    if (g.has_c) {
        what[1] = 'c';
        added(diff, dc, pc, g.cr * g.cc);
        expect_grad(what, g.c, g.cr * g.cc, diff, gemm_loss, &g);
    } else {
        ck_assert(memcmp(dc, pc, sizeof dc) == 0);
    }
}
END_TEST

START_TEST(gemm_forward_by_hand)
{
    /* A = [1 2; 3 4], B = [5 6; 7 8]: A B = [19 22; 43 50].
     * alpha 2, beta 1, c = [10 20] (1 x n): y = [48 64; 96 120].
     * A^T B = [1*5+3*7 1*6+3*8; 2*5+4*7 2*6+4*8] = [26 30; 38 44];
     * alpha 1, beta 0.5, c = [2; 4] (m x 1): y = [27 31; 40 46].
     * A B^T = [1*5+2*6 1*7+2*8; 3*5+4*6 3*7+4*8] = [17 23; 39 53], no c. */
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    const float crow[2] = {10, 20}, ccol[2] = {2, 4};
    float y[4] = {NAN, NAN, NAN, NAN}; /* must not be read */
    const double w1[4] = {48, 64, 96, 120}, w2[4] = {27, 31, 40, 46},
                 w3[4] = {17, 23, 39, 53};
    rt_gemm_forward(y, a, b, crow, 2, 2, 2, 0, 0, 2.0f, 1.0f, 1, 2);
    expect_near("y1", y, w1, 4, 0, 0);
    rt_gemm_forward(y, a, b, ccol, 2, 2, 2, 1, 0, 1.0f, 0.5f, 2, 1);
    expect_near("y2", y, w2, 4, 0, 0);
    y[0] = y[3] = NAN;
    rt_gemm_forward(y, a, b, NULL, 2, 2, 2, 0, 1, 1.0f, 1.0f, 0, 0);
    expect_near("y3", y, w3, 4, 0, 0);
}
END_TEST

START_TEST(gemm_backward_accumulates_and_skips_null)
{
    /* y = A B with A = [1 2], B = [3; 4] (m=1, k=2, n=1), dy = [1]:
     * dA = dy B^T = [3 4], dB = A^T dy = [1; 2], dc (1x1, beta 2) = 2. */
    const float a[2] = {1, 2}, b[2] = {3, 4}, dy[1] = {1};
    float da[2] = {10, 20}, db[2] = {-1, -1}, dc[1] = {5};
    const double wa[2] = {13, 24}, wa2[2] = {16, 28}, wb[2] = {0, 1}, wc[1] = {7};
    rt_gemm_backward(da, db, dc, dy, a, b, 1, 1, 2, 0, 0, 1.0f, 2.0f, 1, 1);
    expect_near("da", da, wa, 2, 0, 0);
    expect_near("db", db, wb, 2, 0, 0);
    expect_near("dc", dc, wc, 1, 0, 0);
    /* NULL gradients are skipped, and a/b need not be valid when unused. */
    rt_gemm_backward(da, NULL, NULL, dy, NULL, b, 1, 1, 2, 0, 0, 1.0f, 2.0f, 1, 1);
    expect_near("da again", da, wa2, 2, 0, 0);
    expect_near("db untouched", db, wb, 2, 0, 0);
}
END_TEST

/* rt_sgemm (BLAS unless RT_NO_BLAS) against rt_sgemm_ref, with padded
 * leading dimensions whose padding must survive untouched. */
START_TEST(sgemm_blas_matches_ref)
{
    enum { CAP = 48 * 52 };
    static float a[CAP], b[CAP], c0[CAP], c1[CAP], c2[CAP];
    int t;
    tseed(7);
    for (t = 0; t < 64; t++) {
        const int ta = t & 1, tb = (t >> 1) & 1;
        const int m = 1 + (int)trand(0, 40), n = 1 + (int)trand(0, 40),
                  k = 1 + (int)trand(0, 40);
        const int lda = (ta ? m : k) + (int)trand(0, 3),
                  ldb = (tb ? k : n) + (int)trand(0, 3),
                  ldc = n + (int)trand(0, 3);
        const float alpha = trand(-2, 2), beta = t % 5 == 0 ? 0.0f : trand(-2, 2);
        int i, j, p;
        fill(a, CAP, -1, 1);
        fill(b, CAP, -1, 1);
        fill(c0, CAP, -1, 1);
        memcpy(c1, c0, sizeof c0);
        memcpy(c2, c0, sizeof c0);
        rt_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c1, ldc);
        rt_sgemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c2, ldc);
#ifdef RT_NO_BLAS
        /* the register-blocked kernel sums every element in the plain
         * loop's order: the same bits, tiles and edges alike */
        ck_assert_msg(memcmp(c1, c2, sizeof c1) == 0,
                      "case %d (ta=%d tb=%d m=%d n=%d k=%d): the portable "
                      "GEMM differs from rt_sgemm_ref", t, ta, tb, m, n, k);
#endif
        for (i = 0; i < m; i++)
            for (j = 0; j < ldc; j++) {
                const int e = i * ldc + j;
                double scale = 1 + fabs(beta * c0[e]);
                if (j >= n) { /* padding */
                    ck_assert_msg(c1[e] == c0[e] && c2[e] == c0[e],
                                  "padding written at %d", e);
                    continue;
                }
                /* |terms| bounds the rounding of either summation order */
                for (p = 0; p < k; p++)
                    scale += fabs(alpha * (ta ? a[p * lda + i] : a[i * lda + p]) *
                                  (tb ? b[j * ldb + p] : b[p * ldb + j]));
                ck_assert_msg(fabs(c1[e] - c2[e]) <= 1e-5 * scale,
                              "case %d (ta=%d tb=%d m=%d n=%d k=%d) [%d,%d]: "
                              "sgemm %.8g ref %.8g", t, ta, tb, m, n, k, i, j,
                              (double)c1[e], (double)c2[e]);
            }
    }
}
END_TEST

START_TEST(sgemm_beta0_ignores_garbage_c)
{
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c1[4] = {NAN, INFINITY, NAN, -INFINITY}, c2[4];
    const double want[4] = {19, 22, 43, 50};
    memcpy(c2, c1, sizeof c1);
    rt_sgemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c1, 2);
    rt_sgemm_ref(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c2, 2);
    expect_near("sgemm", c1, want, 4, 0, 0);
    expect_near("ref", c2, want, 4, 0, 0);
}
END_TEST

/* ---- batched matmul ------------------------------------------------------ */

typedef struct {
    const char *name;
    int batch, na, nb; /* matrices in A and in B */
    int a_index[6], b_index[6];
} bmm_spec;

static const bmm_spec bmm_specs[] = {
    {"A 1 vs B 3", 3, 1, 3, {0, 0, 0}, {0, 1, 2}},
    {"A 3 vs B 1", 3, 3, 1, {0, 1, 2}, {0, 0, 0}},
    {"A 3 vs B 3", 3, 3, 3, {0, 1, 2}, {0, 1, 2}},
    {"(2,1) vs (1,3)", 6, 2, 3, {0, 0, 0, 1, 1, 1}, {0, 1, 2, 0, 1, 2}},
    {"A 1..2 of 3 vs B 1 of 2", 2, 3, 2, {1, 2}, {1, 1}},
    {"A permuted vs B 1", 3, 3, 1, {2, 0, 1}, {0, 0, 0}},
    {"single", 1, 1, 1, {0}, {0}},
};
#define N_BMM ((int)(sizeof bmm_specs / sizeof bmm_specs[0]))

enum { BM = 3, BN = 4, BK = 5 };

typedef struct {
    rt_bmm p;
    int na, nb, ny; /* element counts */
    float a[3 * BM * BK], b[3 * BK * BN], y[6 * BM * BN], dy[6 * BM * BN];
} bmm_case;

static void bmm_setup(bmm_case *c, const bmm_spec *s, uint64_t seed)
{
    c->p.batch = s->batch, c->p.m = BM, c->p.n = BN, c->p.k = BK;
    c->p.a_index = s->a_index, c->p.b_index = s->b_index;
    c->na = s->na * BM * BK, c->nb = s->nb * BK * BN;
    c->ny = s->batch * BM * BN;
    tseed(seed);
    fill(c->a, c->na, -1, 1);
    fill(c->b, c->nb, -1, 1);
    fill(c->dy, c->ny, -1, 1);
}

static double bmm_loss(void *v)
{
    bmm_case *c = v;
    rt_bmm_forward(c->y, c->a, c->b, &c->p);
    return dot(c->y, c->dy, c->ny);
}

/* The naive triple loop, in double, matrix by matrix. */
static void bmm_expect(const float *a, const float *b, const rt_bmm *p,
                       double *want)
{
    const int m = p->m, n = p->n, k = p->k;
    int bi, i, j, l;
    for (bi = 0; bi < p->batch; bi++) {
        const float *A = a + p->a_index[bi] * m * k,
                    *B = b + p->b_index[bi] * k * n;
        for (i = 0; i < m; i++)
            for (j = 0; j < n; j++) {
                double s = 0;
                for (l = 0; l < k; l++)
                    s += (double)A[i * k + l] * B[l * n + j];
                want[(bi * m + i) * n + j] = s;
            }
    }
}

START_TEST(bmm_forward_matches_naive)
{
    bmm_case c;
    double want[6 * BM * BN];
    bmm_setup(&c, &bmm_specs[_i], 1900 + _i);
    rt_fill(c.y, 6 * BM * BN, NAN); /* must not be read */
    bmm_loss(&c);
    bmm_expect(c.a, c.b, &c.p, want);
    expect_near(bmm_specs[_i].name, c.y, want, c.ny, 1e-5, 1e-6);
}
END_TEST

START_TEST(bmm_grad)
{
    bmm_case c;
    float da[64], db[64], pa[64], pb[64], diff[64];
    char what[64];
    bmm_setup(&c, &bmm_specs[_i], 2000 + _i);
    fill(pa, c.na, -1, 1);
    fill(pb, c.nb, -1, 1);
    memcpy(da, pa, sizeof da);
    memcpy(db, pb, sizeof db);
    rt_bmm_backward(da, db, c.dy, c.a, c.b, &c.p);
    snprintf(what, sizeof what, "bmm %s: da", bmm_specs[_i].name);
    added(diff, da, pa, c.na);
    expect_grad(what, c.a, c.na, diff, bmm_loss, &c);
    what[strlen(what) - 1] = 'b';
    added(diff, db, pb, c.nb);
    expect_grad(what, c.b, c.nb, diff, bmm_loss, &c);
}
END_TEST

/* da alone (with a NULL, which it must not read) and db alone (with b NULL)
 * add exactly what the call with both adds. */
START_TEST(bmm_backward_skips_null)
{
    bmm_case c;
    float da[64], db[64], da1[64], db1[64], pa[64], pb[64];
    bmm_setup(&c, &bmm_specs[_i], 2100 + _i);
    fill(pa, c.na, -1, 1);
    fill(pb, c.nb, -1, 1);
    memcpy(da, pa, sizeof da);
    memcpy(db, pb, sizeof db);
    memcpy(da1, pa, sizeof da);
    memcpy(db1, pb, sizeof db);
    rt_bmm_backward(da, db, c.dy, c.a, c.b, &c.p);
    rt_bmm_backward(da1, NULL, c.dy, NULL, c.b, &c.p);
    rt_bmm_backward(NULL, db1, c.dy, c.a, NULL, &c.p);
    ck_assert(memcmp(da, da1, (size_t)c.na * sizeof *da) == 0);
    ck_assert(memcmp(db, db1, (size_t)c.nb * sizeof *db) == 0);
    rt_bmm_backward(NULL, NULL, c.dy, NULL, NULL, &c.p);
}
END_TEST

/* Sizes where BLAS takes its blocked paths, both broadcast directions and
 * the stacked (linear layer) case; tolerance from the sum of |terms|. */
START_TEST(bmm_larger_matches_naive)
{
    enum { M = 17, N = 33, K = 29 };
    static const int a_idx[3][6] = {{0, 0, 0, 1, 1, 1}, {0, 1, 2, 3, 4, 5},
                                    {0, 0, 0, 0, 0, 0}};
    static const int b_idx[3][6] = {{0, 1, 2, 0, 1, 2}, {0, 0, 0, 0, 0, 0},
                                    {0, 1, 2, 3, 4, 5}};
    static float a[6 * M * K], b[6 * K * N], y[6 * M * N];
    static double want[6 * M * N];
    rt_bmm p;
    int t, e;
    tseed(2200);
    fill(a, 6 * M * K, -1, 1);
    fill(b, 6 * K * N, -1, 1);
    for (t = 0; t < 3; t++) {
        p.batch = 6, p.m = M, p.n = N, p.k = K;
        p.a_index = a_idx[t], p.b_index = b_idx[t];
        rt_bmm_forward(y, a, b, &p);
        bmm_expect(a, b, &p, want);
        for (e = 0; e < 6 * M * N; e++)
            ck_assert_msg(fabs(y[e] - want[e]) <= 1e-5 * K,
                          "case %d [%d]: %.9g, want %.9g", t, e, (double)y[e],
                          want[e]);
    }
}
END_TEST

/* A = [1 2], B_0 = [3; 4], B_1 = [5; 6], a broadcast over both (m 1, k 2,
 * n 1): y = {11, 17}. dy = {1, 2}: dA += 1*B_0^T + 2*B_1^T = [13 16];
 * dB_0 += A^T * 1 = [1; 2], dB_1 += A^T * 2 = [2; 4]; presets are 1. */
START_TEST(bmm_by_hand)
{
    const float a[2] = {1, 2}, b[4] = {3, 4, 5, 6}, dy[2] = {1, 2};
    const int ai[2] = {0, 0}, bi[2] = {0, 1};
    const rt_bmm p = {2, 1, 1, 2, ai, bi};
    const double wy[2] = {11, 17}, wa[2] = {14, 17}, wb[4] = {2, 3, 3, 5};
    float y[2], da[2] = {1, 1}, db[4] = {1, 1, 1, 1};
    rt_bmm_forward(y, a, b, &p);
    expect_near("y", y, wy, 2, 0, 0);
    rt_bmm_backward(da, db, dy, a, b, &p);
    expect_near("da", da, wa, 2, 0, 0);
    expect_near("db", db, wb, 4, 0, 0);
}
END_TEST

/* ---- _set twin ----------------------------------------------------------- */

START_TEST(gemm_writes_da_and_db)
{
    const int m = 37, n = 29, k = 41;
    float *a = rnd((size_t)m * k), *b = rnd((size_t)k * n);
    float *dy = rnd((size_t)m * n), *dc0 = rnd((size_t)n);
    int ta, tb;
    for (ta = 0; ta < 2; ta++)
        for (tb = 0; tb < 2; tb++) {
            float *da0 = zeros((size_t)m * k), *db0 = zeros((size_t)k * n);
            float *da1 = nans((size_t)m * k), *db1 = nans((size_t)k * n);
            float *dcz = copy(dc0, (size_t)n), *dcs = copy(dc0, (size_t)n);
            rt_gemm_backward(da0, db0, dcz, dy, a, b, m, n, k, ta, tb, 0.5f,
                             2.0f, 1, n);
            rt_gemm_backward_set(da1, db1, dcs, dy, a, b, m, n, k, ta, tb,
                                 0.5f, 2.0f, 1, n, 3u);
            same_values("gemm da", da0, da1, (size_t)m * k);
            same_values("gemm db", db0, db1, (size_t)k * n);
            /* dc was not asked to be written: it added, from the same start */
            ck_assert(memcmp(dcz, dcs, (size_t)n * sizeof *dcz) == 0);
            free(da0), free(db0), free(da1), free(db1), free(dcz), free(dcs);
        }
    {   /* dc written: the bias sum from zeros */
        float *dcz = zeros((size_t)n), *dcs = nans((size_t)n);
        rt_gemm_backward(NULL, NULL, dcz, dy, a, b, m, n, k, 0, 0, 1.0f, 2.0f,
                         1, n);
        rt_gemm_backward_set(NULL, NULL, dcs, dy, a, b, m, n, k, 0, 0, 1.0f,
                             2.0f, 1, n, 4u);
        same_values("gemm dc", dcz, dcs, (size_t)n);
        free(dcz), free(dcs);
    }
    free(a), free(b), free(dy), free(dc0);
}
END_TEST

/* ---- sums that do not drift (issue 25) ----------------------------------- */

/* A Linear's bias gradient, dc (1 x 24) = the column sums of dy over
 * m = 2^16 rows, and a scalar bias's (the sum of every dy): within a few
 * ulps of float64, the same bits on 1, 2 and 3 threads. */
START_TEST(bias_gradient_does_not_drift)
{
    const int m = 1 << 16, n = 24;
    float *dy = drift_values((size_t)m * n, 9, 0.02f);
    float dc[24], dc1[24], ds, ds1;
    double want[24], want_s = 0;
    int i, j, t;
    for (j = 0; j < n; j++)
        want[j] = 0;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++)
            want[j] += dy[(size_t)i * n + j];
    for (j = 0; j < n; j++)
        want_s += want[j];
    for (t = 1; t <= 3; t++) {
        rt_set_threads(t);
        memset(dc, 0, sizeof dc);
        ds = 0.0f;
        rt_gemm_backward(NULL, NULL, dc, dy, NULL, NULL, m, n, 1, 0, 0, 1.0f,
                         1.0f, 1, n);
        rt_gemm_backward(NULL, NULL, &ds, dy, NULL, NULL, m, n, 1, 0, 0, 1.0f,
                         1.0f, 1, 1);
        for (j = 0; j < n; j++)
            ck_assert_msg(fabs(dc[j] - want[j]) <= 4e-7 * want[j],
                          "dc %d: %.9g, double %.12g", j, dc[j], want[j]);
        ck_assert_msg(fabs(ds - want_s) <= 4e-7 * want_s,
                      "scalar dc %.9g, double %.12g", ds, want_s);
        if (t == 1) {
            memcpy(dc1, dc, sizeof dc);
            ds1 = ds;
        }
        ck_assert(memcmp(dc, dc1, sizeof dc) == 0);
        ck_assert(memcmp(&ds, &ds1, sizeof ds) == 0);
    }
    rt_set_threads(1);
    free(dy);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *gemm_suite(void)
{
    Suite *s = suite_create("remat_rt gemm");
    TCase *tc;

    tc = tcase_create("gemm");
    tcase_add_loop_test(tc, gemm_grad_all_trans_and_bias, 0, 20);
    tcase_add_test(tc, gemm_forward_by_hand);
    tcase_add_test(tc, gemm_backward_accumulates_and_skips_null);
    tcase_add_test(tc, sgemm_blas_matches_ref);
    tcase_add_test(tc, sgemm_beta0_ignores_garbage_c);
    suite_add_tcase(s, tc);

    tc = tcase_create("bmm");
    tcase_add_loop_test(tc, bmm_forward_matches_naive, 0, N_BMM);
    tcase_add_loop_test(tc, bmm_grad, 0, N_BMM);
    tcase_add_loop_test(tc, bmm_backward_skips_null, 0, N_BMM);
    tcase_add_test(tc, bmm_larger_matches_naive);
    tcase_add_test(tc, bmm_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("set");
    tcase_add_checked_fixture(tc, set_seed, NULL);
    tcase_add_test(tc, gemm_writes_da_and_db);
    suite_add_tcase(s, tc);
    tc = tcase_create("sums");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bias_gradient_does_not_drift);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gemm_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
