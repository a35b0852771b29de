/*
 * test_kernels_attention.c: unit tests of the runtime's fused attention
 * kernels (rt_attention_forward, rt_attention_backward and their scratch
 * sizes), with Check.
 *
 * Gradients are checked against central finite differences of the forward
 * (rt_testutil.h), with loss L = sum(dy * y) for a random upstream dy
 * (summed in double); every gradient buffer starts from random values and
 * the check is on (after - before), so accumulation is tested everywhere.
 * Forward values are checked against the definition written here in double
 * (the full score matrix, the causal mask as -inf, softmax with its max)
 * and hand-worked numbers, never against the kernels themselves; the
 * blocked kernel over lengths around its blocks against a double reference
 * of the textbook formulas, forward and backward. Scratch buffers carry a
 * guard past the size the header promises.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- Attention ----------------------------------------------------------- */

typedef struct {
    const char *name;
    int bh, sq, skv, e, ev, causal;
    float scale;
} attn_spec;

static const attn_spec attns[] = {
    {"sq < skv", 2, 3, 4, 3, 2, 0, 0.57735027f},
    {"sq < skv causal", 2, 3, 4, 3, 2, 1, 0.57735027f},
    {"sq == skv", 2, 4, 4, 3, 2, 0, 0.9f},
    {"sq == skv causal", 2, 4, 4, 3, 2, 1, 0.9f},
    {"sq > skv", 2, 5, 3, 3, 2, 0, 1.3f},
    {"sq > skv causal", 2, 5, 3, 3, 2, 1, 0.57735027f},
    {"one key causal", 1, 3, 1, 2, 3, 1, 1.0f},
    {"e 1, ev 4", 3, 2, 3, 1, 4, 1, 2.0f},
};
#define N_ATTNS ((int)(sizeof attns / sizeof attns[0]))
#define ATTN_CAP 64
#define ATTN_SCRATCH_CAP 1024
#define GUARD 4
#define GUARD_VALUE 1234.5f

typedef struct {
    const attn_spec *s;
    float q[ATTN_CAP], k[ATTN_CAP], v[ATTN_CAP], y[ATTN_CAP], dy[ATTN_CAP];
    float scratch[ATTN_SCRATCH_CAP + GUARD];
    int nq, nk, nv, ny;
} attn_case;

static void attn_setup(attn_case *c, const attn_spec *s)
{
    c->s = s;
    c->nq = s->bh * s->sq * s->e;
    c->nk = s->bh * s->skv * s->e;
    c->nv = s->bh * s->skv * s->ev;
    c->ny = s->bh * s->sq * s->ev;
    ck_assert(c->nq <= ATTN_CAP && c->nk <= ATTN_CAP && c->nv <= ATTN_CAP &&
              c->ny <= ATTN_CAP);
    ck_assert(rt_attention_backward_scratch(s->skv, s->e) <= ATTN_SCRATCH_CAP);
}

/* Scratch of exactly the size the header promises, then a guard. */
static float *guarded_scratch(attn_case *c, size_t n)
{
    size_t i;
    for (i = 0; i < n + GUARD; i++)
        c->scratch[i] = i < n ? NAN : GUARD_VALUE;
    return c->scratch;
}

static void expect_guard(attn_case *c, size_t n)
{
    size_t i;
    for (i = n; i < n + GUARD; i++)
        ck_assert_msg(c->scratch[i] == GUARD_VALUE,
                      "scratch written past its %lu floats", (unsigned long)n);
}

static void attn_fwd(attn_case *c)
{
    const attn_spec *s = c->s;
    const size_t ns = rt_attention_scratch(s->skv, s->ev);
    int i;
    for (i = 0; i < c->ny; i++)
        c->y[i] = NAN; /* must not be read */
    rt_attention_forward(c->y, c->q, c->k, c->v, s->bh, s->sq, s->skv, s->e,
                         s->ev, s->scale, s->causal, guarded_scratch(c, ns));
    expect_guard(c, ns);
}

static void attn_bwd(attn_case *c, float *dq, float *dk, float *dv)
{
    const attn_spec *s = c->s;
    const size_t ns = rt_attention_backward_scratch(s->skv, s->e);
    rt_attention_backward(dq, dk, dv, c->dy, c->q, c->k, c->v, s->bh, s->sq,
                          s->skv, s->e, s->ev, s->scale, s->causal,
                          guarded_scratch(c, ns));
    expect_guard(c, ns);
}

static double attn_loss(void *v)
{
    attn_case *c = v;
    attn_fwd(c);
    return dot(c->y, c->dy, c->ny);
}

/* The definition in double: the full score matrix of a head, the causal
 * mask as -inf, softmax with its max, the weighted sum of v. */
static void attn_expect(const attn_case *c, double *want)
{
    const attn_spec *s = c->s;
    double sc[8][8], m, sum;
    int b, i, j, t, p;
    for (b = 0; b < s->bh; b++) {
        for (i = 0; i < s->sq; i++)
            for (j = 0; j < s->skv; j++) {
                double d = 0;
                for (p = 0; p < s->e; p++)
                    d += (double)c->q[(b * s->sq + i) * s->e + p] *
                         c->k[(b * s->skv + j) * s->e + p];
                sc[i][j] = s->scale * d +
                           (s->causal && j > i ? -INFINITY : 0.0);
            }
        for (i = 0; i < s->sq; i++) {
            double *w = want + (b * s->sq + i) * s->ev;
            for (t = 0; t < s->ev; t++)
                w[t] = 0;
            m = -INFINITY;
            for (j = 0; j < s->skv; j++)
                m = fmax(m, sc[i][j]);
            if (m == -INFINITY)
                continue; /* no visible key */
            sum = 0;
            for (j = 0; j < s->skv; j++)
                sum += exp(sc[i][j] - m);
            for (j = 0; j < s->skv; j++)
                for (t = 0; t < s->ev; t++)
                    w[t] += exp(sc[i][j] - m) / sum *
                            c->v[(b * s->skv + j) * s->ev + t];
        }
    }
}

/* _i: the case in attns[]. */
START_TEST(attention_forward_and_grad)
{
    const attn_spec *s = &attns[_i];
    attn_case c;
    float dq[ATTN_CAP], dk[ATTN_CAP], dv[ATTN_CAP];
    float pq[ATTN_CAP] = {0}, pk[ATTN_CAP] = {0}, pv[ATTN_CAP] = {0};
    float diff[ATTN_CAP];
    double want[ATTN_CAP];
    char what[80];
    attn_setup(&c, s);
    tseed(800 + _i);
    fill(c.q, c.nq, -1.5f, 1.5f);
    fill(c.k, c.nk, -1.5f, 1.5f);
    fill(c.v, c.nv, -1, 1);
    fill(c.dy, c.ny, -1, 1);
    fill(pq, c.nq, -1, 1);
    fill(pk, c.nk, -1, 1);
    fill(pv, c.nv, -1, 1);
    memcpy(dq, pq, sizeof dq);
    memcpy(dk, pk, sizeof dk);
    memcpy(dv, pv, sizeof dv);

    attn_fwd(&c);
    attn_expect(&c, want);
    snprintf(what, sizeof what, "attention %s: y", s->name);
    expect_near(what, c.y, want, c.ny, 1e-5, 1e-6);

    attn_bwd(&c, dq, dk, dv);
    snprintf(what, sizeof what, "attention %s: dq", s->name);
    added(diff, dq, pq, c.nq);
    expect_grad(what, c.q, c.nq, diff, attn_loss, &c);
    what[strlen(what) - 1] = 'k';
    added(diff, dk, pk, c.nk);
    expect_grad(what, c.k, c.nk, diff, attn_loss, &c);
    what[strlen(what) - 1] = 'v';
    added(diff, dv, pv, c.nv);
    expect_grad(what, c.v, c.nv, diff, attn_loss, &c);
}
END_TEST

/* Each gradient alone (the others NULL) is exactly what the full call adds;
 * all three NULL touches nothing (scratch included). */
START_TEST(attention_null_gradients_skipped)
{
    attn_case c;
    float full[3][ATTN_CAP], one[ATTN_CAP];
    int g;
    attn_setup(&c, &attns[3]);
    tseed(850);
    fill(c.q, c.nq, -1, 1);
    fill(c.k, c.nk, -1, 1);
    fill(c.v, c.nv, -1, 1);
    fill(c.dy, c.ny, -1, 1);
    memset(full, 0, sizeof full);
    attn_bwd(&c, full[0], full[1], full[2]);
    for (g = 0; g < 3; g++) {
        const int n = g == 0 ? c.nq : g == 1 ? c.nk : c.nv;
        memset(one, 0, sizeof one);
        attn_bwd(&c, g == 0 ? one : NULL, g == 1 ? one : NULL,
                 g == 2 ? one : NULL);
        expect_same(g == 0 ? "dq alone" : g == 1 ? "dk alone" : "dv alone",
                    one, full[g], n);
    }
    {
        const size_t ns = rt_attention_backward_scratch(c.s->skv, c.s->e);
        size_t i;
        for (i = 0; i < ns + GUARD; i++)
            c.scratch[i] = GUARD_VALUE;
        rt_attention_backward(NULL, NULL, NULL, c.dy, c.q, c.k, c.v, c.s->bh,
                              c.s->sq, c.s->skv, c.s->e, c.s->ev, c.s->scale,
                              c.s->causal, c.scratch);
        expect_guard(&c, 0);
    }
}
END_TEST

/* Scale 0 makes every visible key equally likely, so with causal query i
 * averages v_0..v_i: the mask by hand. sq 3, skv 2, e 1, ev 1. */
START_TEST(attention_causal_by_hand)
{
    const float q[3] = {1, 2, 3}, k[2] = {4, 5}, v[2] = {10, 20};
    const double want[3] = {10, 15, 15}, want_full[3] = {15, 15, 15};
    float y[3], scratch[ATTN_SCRATCH_CAP];
    ck_assert(rt_attention_scratch(2, 1) <= ATTN_SCRATCH_CAP);
    rt_attention_forward(y, q, k, v, 1, 3, 2, 1, 1, 0.0f, 1, scratch);
    expect_near("causal", y, want, 3, 0, 1e-6);
    rt_attention_forward(y, q, k, v, 1, 3, 2, 1, 1, 0.0f, 0, scratch);
    expect_near("full", y, want_full, 3, 0, 1e-6);
}
END_TEST

/* No keys (skv 0): no row sees one, so y is 0 and no gradient flows. */
START_TEST(attention_no_visible_key)
{
    const float q[4] = {1, 2, 3, 4}, dy[4] = {1, 1, 1, 1};
    float k[1] = {0}, v[1] = {0}, y[4] = {NAN, NAN, NAN, NAN};
    float dq[4] = {1, 2, 3, 4}, dk[1] = {5}, dv[1] = {6}, scratch[1] = {7};
    const double zeros[4] = {0, 0, 0, 0}, wdq[4] = {1, 2, 3, 4};
    int causal;
    ck_assert_uint_eq(rt_attention_scratch(0, 1), 0);
    ck_assert_uint_eq(rt_attention_backward_scratch(0, 1), 0);
    for (causal = 0; causal < 2; causal++) {
        rt_attention_forward(y, q, k, v, 2, 2, 0, 1, 1, 1.0f, causal, scratch);
        expect_near("y", y, zeros, 4, 0, 0);
        rt_attention_backward(dq, dk, dv, dy, q, k, v, 2, 2, 0, 1, 1, 1.0f,
                              causal, scratch);
        expect_near("dq", dq, wdq, 4, 0, 0);
        ck_assert_float_eq(dk[0], 5.0f);
        ck_assert_float_eq(dv[0], 6.0f);
        ck_assert_float_eq(scratch[0], 7.0f);
    }
}
END_TEST

/* Scores in the millions: without the max subtracted exp overflows. The
 * softmax is then one-hot on the largest score. */
START_TEST(attention_large_scores_stay_finite)
{
    /* one head, sq 2, skv 3, e 2, ev 1; scale 1.
     * q0 = (1000, 0): scores 1e6 * (1, -1, 0.5) -> key 0.
     * q1 = (-1000, 1000): scores 1e6 * (-1, 1, 1.5) -> key 2. */
    const float q[4] = {1000, 0, -1000, 1000};
    const float k[6] = {1000, 0, -1000, 0, 500, 2000};
    const float v[3] = {1, 2, 3}, dy[2] = {1, 1};
    const double want[2] = {1, 3};
    float y[2], dq[4] = {0}, dk[6] = {0}, dv[3] = {0};
    float scratch[ATTN_SCRATCH_CAP];
    int i;
    ck_assert(rt_attention_backward_scratch(3, 2) <= ATTN_SCRATCH_CAP);
    ck_assert(rt_attention_scratch(3, 1) <= ATTN_SCRATCH_CAP);
    rt_attention_forward(y, q, k, v, 1, 2, 3, 2, 1, 1.0f, 0, scratch);
    expect_near("y", y, want, 2, 0, 1e-6);
    rt_attention_backward(dq, dk, dv, dy, q, k, v, 1, 2, 3, 2, 1, 1.0f, 0,
                          scratch);
    for (i = 0; i < 4; i++)
        ck_assert_msg(isfinite(dq[i]), "dq[%d] = %g", i, (double)dq[i]);
    for (i = 0; i < 6; i++)
        ck_assert_msg(isfinite(dk[i]), "dk[%d] = %g", i, (double)dk[i]);
    for (i = 0; i < 3; i++)
        ck_assert_msg(isfinite(dv[i]), "dv[%d] = %g", i, (double)dv[i]);
    /* saturated softmax: dv is one-hot per query, dq and dk vanish */
    ck_assert_float_eq(dv[0], 1.0f);
    ck_assert_float_eq(dv[1], 0.0f);
    ck_assert_float_eq(dv[2], 1.0f);
    for (i = 0; i < 4; i++)
        ck_assert_float_eq(dq[i], 0.0f);
}
END_TEST

/* ---- blocked attention against a double reference ------------------------ */

/* Lengths around the kernel's blocks (not multiples of them, one block, a
 * block and one, two and a bit) and head dims from 1 to past a SIMD row. */
static const int attn_lens[] = {1, 7, 64, 65, 130};
static const int attn_dims[] = {1, 16, 32, 48};
#define N_LENS 5
#define N_DIMS 4
#define BIG_LEN 130
#define BIG_DIM 48
#define BIG_N (BIG_LEN * BIG_DIM)
#define BIG_SCRATCH 65536

typedef struct {
    int sq, skv, e, ev, causal;
    float scale;
    float q[BIG_N], k[BIG_N], v[BIG_N], y[BIG_N], dy[BIG_N];
    float g[3][BIG_N], g0[3][BIG_N], full[3][BIG_N];
    double p[BIG_LEN][BIG_LEN], ds[BIG_LEN][BIG_LEN];
    double wy[BIG_N], wg[3][BIG_N];
    float scratch[BIG_SCRATCH + GUARD];
} attn_big;

static attn_big big;

/* expect_near and expect_same, but one assertion per array: check logs
 * every assertion it passes, which over these sizes costs seconds. */
static void big_near(const char *what, const float *got, const double *want,
                     int n)
{
    int i = 0;
    while (i < n && fabs(got[i] - want[i]) <= 2e-5 + 1e-4 * fabs(want[i]))
        i++;
    ck_assert_msg(i == n, "%s[%d]: got %.9g, want %.9g", what, i,
                  i < n ? (double)got[i] : 0.0, i < n ? want[i] : 0.0);
}

static void big_same(const char *what, const float *got, const float *want,
                     int n)
{
    int i = 0;
    while (i < n && got[i] == want[i])
        i++;
    ck_assert_msg(i == n, "%s[%d]: got %.9g, want %.9g", what, i,
                  i < n ? (double)got[i] : 0.0, i < n ? (double)want[i] : 0.0);
}

/* p in double, the causal mask as "not summed", then y. */
static void big_ref_forward(attn_big *c)
{
    int i, j, t;
    for (i = 0; i < c->sq; i++) {
        const int nv = c->causal && i + 1 < c->skv ? i + 1 : c->skv;
        double m = -INFINITY, sum = 0;
        for (j = 0; j < c->skv; j++) {
            double d = 0;
            for (t = 0; t < c->e; t++)
                d += (double)c->q[i * c->e + t] * c->k[j * c->e + t];
            c->p[i][j] = j < nv ? c->scale * d : -INFINITY;
            m = fmax(m, c->p[i][j]);
        }
        for (j = 0; j < c->skv; j++)
            sum += c->p[i][j] = exp(c->p[i][j] - m);
        for (t = 0; t < c->ev; t++) {
            double acc = 0;
            for (j = 0; j < c->skv; j++)
                acc += c->p[i][j] / sum * c->v[j * c->ev + t];
            c->wy[i * c->ev + t] = acc;
        }
        for (j = 0; j < c->skv; j++)
            c->p[i][j] /= sum;
    }
}

/* The gradients by the textbook formulas: ds = scale p (dp - rowsum(p dp)). */
static void big_ref_backward(attn_big *c)
{
    int i, j, t;
    memset(c->wg, 0, sizeof c->wg);
    for (i = 0; i < c->sq; i++) {
        double dsum = 0;
        for (j = 0; j < c->skv; j++) {
            double dp = 0;
            for (t = 0; t < c->ev; t++)
                dp += (double)c->dy[i * c->ev + t] * c->v[j * c->ev + t];
            c->ds[i][j] = dp;
            dsum += c->p[i][j] * dp;
        }
        for (j = 0; j < c->skv; j++)
            c->ds[i][j] = c->scale * c->p[i][j] * (c->ds[i][j] - dsum);
    }
    for (i = 0; i < c->sq; i++)
        for (j = 0; j < c->skv; j++) {
            for (t = 0; t < c->e; t++) {
                c->wg[0][i * c->e + t] += c->ds[i][j] * c->k[j * c->e + t];
                c->wg[1][j * c->e + t] += c->ds[i][j] * c->q[i * c->e + t];
            }
            for (t = 0; t < c->ev; t++)
                c->wg[2][j * c->ev + t] += c->p[i][j] * c->dy[i * c->ev + t];
        }
}

/* The gradient g (NULL: skipped) added to g0, against the reference. */
static void big_expect_grad(attn_big *c, int g, int n, const char *what)
{
    double want[BIG_N];
    int i;
    for (i = 0; i < n; i++)
        want[i] = c->g0[g][i] + c->wg[g][i];
    big_near(what, c->g[g], want, n);
}

/* One case: forward, the full backward, then with the gradients in mask
 * `null` NULL, which must add bit for bit what the full call added. */
static void big_case(attn_big *c, int null)
{
    const int nq = c->sq * c->e, nk = c->skv * c->e, nv = c->skv * c->ev;
    const int n[3] = {nq, nk, nv};
    size_t ns;
    float *gp[3];
    int g;
    char what[96];
    fill(c->q, nq, -1.5f, 1.5f);
    fill(c->k, nk, -1.5f, 1.5f);
    fill(c->v, nv, -1, 1);
    fill(c->dy, c->sq * c->ev, -1, 1);
    big_ref_forward(c);
    big_ref_backward(c);
    ns = rt_attention_scratch(c->skv, c->ev);
    ck_assert(ns <= BIG_SCRATCH);
    c->scratch[ns] = GUARD_VALUE;
    rt_attention_forward(c->y, c->q, c->k, c->v, 1, c->sq, c->skv, c->e,
                         c->ev, c->scale, c->causal, c->scratch);
    ck_assert(c->scratch[ns] == GUARD_VALUE);
    snprintf(what, sizeof what, "sq %d skv %d e %d ev %d causal %d: y", c->sq,
             c->skv, c->e, c->ev, c->causal);
    big_near(what, c->y, c->wy, c->sq * c->ev);
    ns = rt_attention_backward_scratch(c->skv, c->e);
    ck_assert(ns <= BIG_SCRATCH);
    for (g = 0; g < 3; g++) {
        fill(c->g0[g], n[g], -1, 1);
        memcpy(c->g[g], c->g0[g], n[g] * sizeof(float));
    }
    c->scratch[ns] = GUARD_VALUE;
    rt_attention_backward(c->g[0], c->g[1], c->g[2], c->dy, c->q, c->k, c->v,
                          1, c->sq, c->skv, c->e, c->ev, c->scale, c->causal,
                          c->scratch);
    ck_assert(c->scratch[ns] == GUARD_VALUE);
    for (g = 0; g < 3; g++) {
        what[strlen(what) - 1] = "qkv"[g];
        big_expect_grad(c, g, n[g], what);
        memcpy(c->full[g], c->g[g], n[g] * sizeof(float));
        memcpy(c->g[g], c->g0[g], n[g] * sizeof(float));
        gp[g] = null >> g & 1 ? NULL : c->g[g];
    }
    rt_attention_backward(gp[0], gp[1], gp[2], c->dy, c->q, c->k, c->v, 1,
                          c->sq, c->skv, c->e, c->ev, c->scale, c->causal,
                          c->scratch);
    for (g = 0; g < 3; g++)
        big_same(null >> g & 1 ? "untouched" : "alone", c->g[g],
                 null >> g & 1 ? c->g0[g] : c->full[g], n[g]);
}

/* _i: sq, skv and causal; every e and ev, with NULL patterns cycling. */
START_TEST(attention_blocked_matches_reference)
{
    int de, dv;
    big.sq = attn_lens[_i / (2 * N_LENS)];
    big.skv = attn_lens[_i / 2 % N_LENS];
    big.causal = _i % 2;
    tseed(900 + _i);
    for (de = 0; de < N_DIMS; de++)
        for (dv = 0; dv < N_DIMS; dv++) {
            big.e = attn_dims[de];
            big.ev = attn_dims[dv];
            big.scale = 1.0f / sqrtf((float)big.e);
            big_case(&big, 1 + (de * N_DIMS + dv + _i) % 6);
        }
}
END_TEST

/* ---- sums over key blocks that do not drift (issue 25) -------------------- */

/* One query against 2^k keys (64 per block): scores k_j[0] in (-0.5, 0]
 * after a first key of 0.5 (the row's max from the start: no rescale), v
 * about 0.1, so y is a weighted mean and the softmax sum l, D and dq are
 * long sums across key blocks. Against the same formulas in double on the
 * same floats: y relative, dq relative to the sum of |terms| (dq's terms
 * cancel). The old kernel added each key block's sums and products in
 * float and failed here at every length (dq off by 3.2e-7 at 2^12 keys, y
 * by 3.6e-7 at 2^16, dq by 2.3e-7 at 2^18; 1.5e-6 and 1.8e-6 at 2^18 in
 * another draw); compensated, both stay within 1e-7 (7e-8 at worst). */
static const int attn_drift_log2[] = {12, 16, 18};

START_TEST(attention_key_sums_do_not_drift)
{
    const int n = 1 << attn_drift_log2[_i];
    const float q[2] = {1, 0}, dy[2] = {1, -0.5f};
    float *k = malloc(2 * (size_t)n * sizeof *k);
    float *v = drift_values(2 * (size_t)n, 60u + (unsigned)n, 0.05f);
    float *fs = malloc(rt_attention_scratch(n, 2) * sizeof *fs);
    float *bs = malloc(rt_attention_backward_scratch(n, 2) * sizeof *bs);
    double *p = malloc((size_t)n * sizeof *p), *dp = malloc((size_t)n * sizeof *dp);
    double l = 0, d = 0, wy[2] = {0, 0}, wdq[2] = {0, 0}, mag[2] = {0, 0};
    float y[2], dq[2] = {0, 0};
    int j, t;
    ck_assert(k && fs && bs && p && dp);
    tseed(61u + (unsigned)n);
    for (j = 0; j < n; j++) {
        k[2 * j] = j == 0 ? 0.5f : -0.5f * trand(0, 1);
        k[2 * j + 1] = trand(-1, 1);
    }
    for (j = 0; j < n; j++)
        l += p[j] = exp((double)k[2 * j] - 0.5);
    for (j = 0; j < n; j++) {
        p[j] /= l;
        dp[j] = 0;
        for (t = 0; t < 2; t++) {
            wy[t] += p[j] * v[2 * j + t];
            dp[j] += (double)dy[t] * v[2 * j + t];
        }
        d += p[j] * dp[j];
    }
    for (j = 0; j < n; j++)
        for (t = 0; t < 2; t++) {
            const double term = p[j] * (dp[j] - d) * k[2 * j + t];
            wdq[t] += term;
            mag[t] += fabs(term);
        }
    rt_attention_forward(y, q, k, v, 1, 1, n, 2, 2, 1.0f, 0, fs);
    rt_attention_backward(dq, NULL, NULL, dy, q, k, v, 1, 1, n, 2, 2, 1.0f, 0,
                          bs);
    for (t = 0; t < 2; t++) {
        ck_assert_msg(fabs(y[t] - wy[t]) <= 1e-7 * fabs(wy[t]),
                      "%d keys: y[%d] %.9g, double %.12g (%.3g rel)", n, t,
                      (double)y[t], wy[t], fabs(y[t] - wy[t]) / fabs(wy[t]));
        ck_assert_msg(fabs(dq[t] - wdq[t]) <= 1e-7 * mag[t],
                      "%d keys: dq[%d] %.9g, double %.12g (%.3g of the sum "
                      "of |terms|)", n, t, (double)dq[t], wdq[t],
                      fabs(dq[t] - wdq[t]) / mag[t]);
    }
    free(k), free(v), free(fs), free(bs), free(p), free(dp);
}
END_TEST

/* ---- the 3-D layout ------------------------------------------------------ */

static float *floats(size_t n)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    return x;
}

/* x (batch, heads, s, d) to (batch, s, heads * d), or back (back != 0). */
static void bhsd_to_bshd(float *to, const float *x, int batch, int heads,
                         int s, int d, int back)
{
    int b, h, i, t;
    for (b = 0; b < batch; b++)
        for (h = 0; h < heads; h++)
            for (i = 0; i < s; i++)
                for (t = 0; t < d; t++) {
                    const size_t a = (((size_t)b * heads + h) * s + i) * d + t;
                    const size_t c = (((size_t)b * s + i) * heads + h) * d + t;
                    if (back)
                        to[a] = x[c];
                    else
                        to[c] = x[a];
                }
}

typedef struct {
    int batch, heads, sq, skv, e, ev, causal, no_dk;
} attn3_spec;

/* Heads of one and of several, sequences of one key block and of three
 * (130: the compensated sums across key blocks), e != ev, a missing dk. */
static const attn3_spec attn3s[] = {
    {2, 3, 5, 7, 4, 6, 0, 0},  {1, 4, 65, 130, 16, 8, 1, 0},
    {3, 2, 130, 65, 8, 8, 0, 1}, {2, 1, 9, 9, 3, 3, 1, 0},
};
#define N_ATTN3 ((int)(sizeof attn3s / sizeof attn3s[0]))

/* The 3-D kernels against the 4-D ones on the same values transposed, bit
 * for bit: y, and dq, dk, dv added into random starting values. */
START_TEST(attention_3d_is_4d_transposed)
{
    const attn3_spec *a = &attn3s[_i];
    const int bh = a->batch * a->heads;
    const size_t nq = (size_t)bh * a->sq * a->e;
    const size_t nk = (size_t)bh * a->skv * a->e;
    const size_t nv = (size_t)bh * a->skv * a->ev;
    const size_t ny = (size_t)bh * a->sq * a->ev;
    const size_t ns = rt_attention_backward_scratch(a->skv, a->e) +
                      rt_attention_scratch(a->skv, a->ev);
    float *q = rnd(nq), *k = rnd(nk), *v = rnd(nv), *dy = rnd(ny);
    float *g4[3] = {rnd(nq), a->no_dk ? NULL : rnd(nk), rnd(nv)};
    float *y4 = floats(ny), *scratch = floats(ns), *y3 = floats(ny);
    float *q3 = floats(nq), *k3 = floats(nk), *v3 = floats(nv);
    float *dy3 = floats(ny), *back = floats(nq + nk + nv + ny);
    float *g3[3] = {floats(nq), a->no_dk ? NULL : floats(nk), floats(nv)};
    const size_t n[3] = {nq, nk, nv};
    const int len[3] = {a->sq, a->skv, a->skv}, dim[3] = {a->e, a->e, a->ev};
    const float scale = 0.37f;
    int t;
    bhsd_to_bshd(q3, q, a->batch, a->heads, a->sq, a->e, 0);
    bhsd_to_bshd(k3, k, a->batch, a->heads, a->skv, a->e, 0);
    bhsd_to_bshd(v3, v, a->batch, a->heads, a->skv, a->ev, 0);
    bhsd_to_bshd(dy3, dy, a->batch, a->heads, a->sq, a->ev, 0);
    for (t = 0; t < 3; t++)
        if (g4[t])
            bhsd_to_bshd(g3[t], g4[t], a->batch, a->heads, len[t], dim[t], 0);
    rt_attention_forward(y4, q, k, v, bh, a->sq, a->skv, a->e, a->ev, scale,
                         a->causal, scratch);
    rt_attention_forward_3d(y3, q3, k3, v3, a->batch, a->heads, a->sq, a->skv,
                            a->e, a->ev, scale, a->causal, scratch);
    bhsd_to_bshd(back, y3, a->batch, a->heads, a->sq, a->ev, 1);
    ck_assert_msg(memcmp(back, y4, ny * sizeof *y4) == 0, "case %d: y differs",
                  _i);
    rt_attention_backward(g4[0], g4[1], g4[2], dy, q, k, v, bh, a->sq, a->skv,
                          a->e, a->ev, scale, a->causal, scratch);
    rt_attention_backward_3d(g3[0], g3[1], g3[2], dy3, q3, k3, v3, a->batch,
                             a->heads, a->sq, a->skv, a->e, a->ev, scale,
                             a->causal, scratch);
    for (t = 0; t < 3; t++) {
        if (!g4[t])
            continue;
        bhsd_to_bshd(back, g3[t], a->batch, a->heads, len[t], dim[t], 1);
        ck_assert_msg(memcmp(back, g4[t], n[t] * sizeof *back) == 0,
                      "case %d: gradient %d differs", _i, t);
    }
    free(q), free(k), free(v), free(dy), free(y4), free(scratch);
    free(q3), free(k3), free(v3), free(dy3), free(y3), free(back);
    for (t = 0; t < 3; t++)
        free(g4[t]), free(g3[t]);
}
END_TEST

/* ---- an additive mask ---------------------------------------------------- */

/* The 4-D layout of batch 2, heads 2 (bh 4) with a mask served to each
 * batch entry's two heads (mask_heads 2): a key padding mask (2, 1, 1, 4:
 * mask_b 4, mask_q 0) of zeros and -1e9, or one (1, 1, 3, 4) of random
 * scores broadcast over the batch (mask_b 0, mask_q 4). */
typedef struct {
    attn_case c;
    float mask[12];
    size_t mb, mq;
} masked_case;

static const attn_spec masked_spec[2] = {
    {"masked", 4, 3, 4, 3, 2, 0, 0.57735027f},
    {"masked causal", 4, 3, 4, 3, 2, 1, 0.57735027f},
};

static void masked_fwd(masked_case *m)
{
    const attn_spec *s = m->c.s;
    rt_attention_forward_mask_3d(m->c.y, m->c.q, m->c.k, m->c.v, m->mask,
                                 m->mb, m->mq, 2, s->bh, 1, s->sq, s->skv,
                                 s->e, s->ev, s->scale, s->causal,
                                 guarded_scratch(&m->c, rt_attention_scratch(
                                     s->skv, s->ev)));
    expect_guard(&m->c, rt_attention_scratch(s->skv, s->ev));
}

static double masked_loss(void *v)
{
    masked_case *m = v;
    masked_fwd(m);
    return dot(m->c.y, m->c.dy, m->c.ny);
}

/* The definition in double, the mask added to each head's scores. */
static void masked_expect(const masked_case *m, double *want)
{
    const attn_spec *s = m->c.s;
    int b, i, j, t, p;
    for (b = 0; b < s->bh; b++)
        for (i = 0; i < s->sq; i++) {
            double sc[8], mx = -INFINITY, sum = 0;
            double *w = want + (b * s->sq + i) * s->ev;
            for (j = 0; j < s->skv; j++) {
                double d = 0;
                for (p = 0; p < s->e; p++)
                    d += (double)m->c.q[(b * s->sq + i) * s->e + p] *
                         m->c.k[(b * s->skv + j) * s->e + p];
                sc[j] = s->scale * d + m->mask[(b / 2) * m->mb + i * m->mq + j] +
                        (s->causal && j > i ? -INFINITY : 0.0);
                mx = fmax(mx, sc[j]);
            }
            for (j = 0; j < s->skv; j++)
                sum += exp(sc[j] - mx);
            for (t = 0; t < s->ev; t++) {
                w[t] = 0;
                for (j = 0; j < s->skv; j++)
                    w[t] += exp(sc[j] - mx) / sum *
                            m->c.v[(b * s->skv + j) * s->ev + t];
            }
        }
}

/* _i: bit 0 causal, bit 1 the per-query mask (else key padding). y
 * against the definition, dq, dk and dv against finite differences (the
 * mask gets none); a mask of zeros gives the plain kernels' bits. */
START_TEST(attention_additive_mask)
{
    masked_case m;
    float g[3][ATTN_CAP], p[3][ATTN_CAP], diff[ATTN_CAP], plain[ATTN_CAP];
    float *in[3] = {m.c.q, m.c.k, m.c.v};
    const int per_query = _i >> 1;
    double want[ATTN_CAP];
    int t, n[3];
    attn_setup(&m.c, &masked_spec[_i & 1]);
    n[0] = m.c.nq, n[1] = m.c.nk, n[2] = m.c.nv;
    tseed(900 + _i);
    fill(m.c.q, m.c.nq, -1.5f, 1.5f);
    fill(m.c.k, m.c.nk, -1.5f, 1.5f);
    fill(m.c.v, m.c.nv, -1, 1);
    fill(m.c.dy, m.c.ny, -1, 1);
    m.mb = per_query ? 0 : 4;
    m.mq = per_query ? 4 : 0;
    if (per_query) {
        fill(m.mask, 12, -2, 2);
    } else {        /* batch 0 pads its last key, batch 1 its second */
        memset(m.mask, 0, sizeof m.mask);
        m.mask[3] = m.mask[5] = -1e9f;
    }
    masked_fwd(&m);
    masked_expect(&m, want);
    expect_near("masked attention: y", m.c.y, want, m.c.ny, 1e-5, 1e-6);
    for (t = 0; t < 3; t++) {
        fill(p[t], n[t], -1, 1);
        memcpy(g[t], p[t], sizeof g[t]);
    }
    rt_attention_backward_mask_3d(g[0], g[1], g[2], m.c.dy, m.c.q, m.c.k,
                                  m.c.v, m.mask, m.mb, m.mq, 2, m.c.s->bh, 1,
                                  m.c.s->sq, m.c.s->skv, m.c.s->e, m.c.s->ev,
                                  m.c.s->scale, m.c.s->causal, m.c.scratch);
    for (t = 0; t < 3; t++) {
        added(diff, g[t], p[t], n[t]);
        expect_grad(t == 0 ? "masked attention: dq" : t == 1
                    ? "masked attention: dk" : "masked attention: dv",
                    in[t], n[t], diff, masked_loss, &m);
    }
    /* zeros: the bits of the kernels without a mask */
    memset(m.mask, 0, sizeof m.mask);
    masked_fwd(&m);
    memcpy(plain, m.c.y, sizeof plain);
    attn_fwd(&m.c);
    ck_assert(memcmp(plain, m.c.y, (size_t)m.c.ny * sizeof *plain) == 0);
}
END_TEST

/* Masked keys anywhere, a whole first block of them included (left
 * padding: keys 0..69 of 130 masked with -inf, past the first key block of
 * 64): the same as attention over the other keys alone (the kernels on
 * the sliced k and v, within rounding: the blocks fall differently), and
 * the masked keys get no dk or dv. A query whose every key is masked (row
 * 1, by a per-query mask) gives zeros and passes nothing back: no NaN. */
START_TEST(attention_mask_leading_block)
{
    enum { SQ = 3, SKV = 130, PAD = 70, E = 4, EV = 3 };
    const float scale = 0.5f;
    const size_t ns = rt_attention_backward_scratch(SKV, E) +
                      rt_attention_scratch(SKV, EV);
    float *q = rnd(SQ * E), *k = rnd(SKV * E), *v = rnd(SKV * EV);
    float *dy = rnd(SQ * EV), *mask = floats(SQ * SKV), *scratch = floats(ns);
    float y[SQ * EV], ys[SQ * EV], dq[SQ * E], dqs[SQ * E];
    float *dk = floats(SKV * E), *dv = floats(SKV * EV);
    float *dks = floats(SKV * E), *dvs = floats(SKV * EV);
    int i, j;
    for (i = 0; i < SQ; i++)
        for (j = 0; j < SKV; j++)
            mask[i * SKV + j] = i == 1 || j < PAD ? -INFINITY : 0.0f;
    memset(dq, 0, sizeof dq), memset(dqs, 0, sizeof dqs);
    memset(dk, 0, SKV * E * sizeof *dk), memset(dks, 0, SKV * E * sizeof *dk);
    memset(dv, 0, SKV * EV * sizeof *dv), memset(dvs, 0, SKV * EV * sizeof *dv);
    rt_attention_forward_mask_3d(y, q, k, v, mask, 0, SKV, 1, 1, 1, SQ, SKV,
                                 E, EV, scale, 0, scratch);
    rt_attention_backward_mask_3d(dq, dk, dv, dy, q, k, v, mask, 0, SKV, 1, 1,
                                  1, SQ, SKV, E, EV, scale, 0, scratch);
    rt_attention_forward(ys, q, k + PAD * E, v + PAD * EV, 1, SQ, SKV - PAD,
                         E, EV, scale, 0, scratch);
    rt_attention_backward(dqs, dks + PAD * E, dvs + PAD * EV, dy, q,
                          k + PAD * E, v + PAD * EV, 1, SQ, SKV - PAD, E, EV,
                          scale, 0, scratch);
    for (i = 0; i < SQ * EV; i++)
        ck_assert_msg(i / EV == 1 ? y[i] == 0.0f
                                  : fabsf(y[i] - ys[i]) <= 1e-5f,
                      "y[%d] %g, over the visible keys alone %g", i, y[i], ys[i]);
    for (i = 0; i < SQ * E; i++)
        ck_assert_msg(i / E == 1 ? dq[i] == 0.0f
                                 : fabsf(dq[i] - dqs[i]) <= 1e-5f,
                      "dq[%d] %g, over the visible keys alone %g", i, dq[i],
                      dqs[i]);
    for (i = 0; i < SKV * E; i++)   /* row 1 adds nothing to dks either */
        ck_assert_msg(i < PAD * E ? dk[i] == 0.0f : isfinite(dk[i]),
                      "dk[%d] %g", i, dk[i]);
    for (i = 0; i < SKV * EV; i++)
        ck_assert_msg(i < PAD * EV ? dv[i] == 0.0f : isfinite(dv[i]),
                      "dv[%d] %g", i, dv[i]);
    free(q), free(k), free(v), free(dy), free(mask), free(scratch);
    free(dk), free(dv), free(dks), free(dvs);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *attention_suite(void)
{
    Suite *s = suite_create("remat_rt attention");
    TCase *tc;

    tc = tcase_create("attention");
    tcase_add_loop_test(tc, attention_forward_and_grad, 0, N_ATTNS);
    tcase_add_test(tc, attention_null_gradients_skipped);
    tcase_add_test(tc, attention_causal_by_hand);
    tcase_add_test(tc, attention_no_visible_key);
    tcase_add_test(tc, attention_large_scores_stay_finite);
    tcase_add_loop_test(tc, attention_blocked_matches_reference, 0,
                        2 * N_LENS * N_LENS);
    tcase_add_loop_test(tc, attention_key_sums_do_not_drift, 0, 3);
    tcase_add_loop_test(tc, attention_3d_is_4d_transposed, 0, N_ATTN3);
    tcase_add_loop_test(tc, attention_additive_mask, 0, 4);
    tcase_add_test(tc, attention_mask_leading_block);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(attention_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
