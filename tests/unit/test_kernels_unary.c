/*
 * test_kernels_unary.c: unit tests of the runtime's unary pointwise
 * kernels (Relu, Gelu, Tanh, Sigmoid, Exp, Log, Sqrt, Neg, Erf,
 * Reciprocal: rt_relu_* ... rt_reciprocal_*; torch.nn's activations
 * LeakyRelu, HardSwish, HardSigmoid, Clip, Elu, Softplus, Abs, Selu, Celu,
 * Softsign, Mish, at their kinks too, where each must take torch's one-sided slope; Sign,
 * which has no backward; and the _set
 * twins of Relu and Gelu, with Dropout's alongside them in
 * pointwise_kernels_write), with Check.
 *
 * Every backward is checked against central finite differences of its
 * forward (rt_testutil.h), with loss L = sum(dy * y) for a random upstream
 * gradient dy, from a random preset gradient so that `+=` is tested too,
 * and called with a NULL gradient. Every forward is checked against
 * hand-worked numbers or formulas in double written here (libm's double
 * functions over grids; Gelu against the textbook formulas with erfc),
 * never against the kernels themselves. The _set twins are checked against
 * the adding kernels as rt_testutil.h's same_values says.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- Relu, Gelu, Tanh, Sigmoid ------------------------------------------- */

enum { U_RELU, U_GELU, U_GELU_TANH, U_TANH, U_SIGMOID, U_COUNT };
static const char *const unary_names[U_COUNT] = {"Relu", "Gelu", "Gelu(tanh)",
                                                 "Tanh", "Sigmoid"};

typedef struct {
    int op, n;
    float x[32], y[32], dy[32];
} unary_case;

static void unary_fwd(unary_case *c)
{
    switch (c->op) {
    case U_RELU: rt_relu_forward(c->y, c->x, c->n); break;
    case U_GELU: rt_gelu_forward(c->y, c->x, c->n, 0); break;
    case U_GELU_TANH: rt_gelu_forward(c->y, c->x, c->n, 1); break;
    case U_TANH: rt_tanh_forward(c->y, c->x, c->n); break;
    default: rt_sigmoid_forward(c->y, c->x, c->n); break;
    }
}

/* Relu, Tanh and Sigmoid take the output y; Gelu takes x. */
static void unary_bwd(unary_case *c, float *dx)
{
    unary_fwd(c);
    switch (c->op) {
    case U_RELU: rt_relu_backward(dx, c->dy, c->y, c->n); break;
    case U_GELU: rt_gelu_backward(dx, c->dy, c->x, c->n, 0); break;
    case U_GELU_TANH: rt_gelu_backward(dx, c->dy, c->x, c->n, 1); break;
    case U_TANH: rt_tanh_backward(dx, c->dy, c->y, c->n); break;
    default: rt_sigmoid_backward(dx, c->dy, c->y, c->n); break;
    }
}

static double unary_loss(void *v)
{
    unary_case *c = v;
    unary_fwd(c);
    return dot(c->y, c->dy, c->n);
}

START_TEST(unary_grad)
{
    unary_case c;
    float dx[32], px[32], diff[32];
    c.op = _i, c.n = 32;
    tseed(400 + _i);
    if (c.op == U_RELU)
        fill_away(c.x, c.n, 0.1f, 2.0f); /* h = 0.01 never crosses the kink */
    else
        fill(c.x, c.n, -4, 4);
    fill(c.dy, c.n, -1, 1);
    fill(px, c.n, -1, 1);
    memcpy(dx, px, sizeof dx);
    unary_bwd(&c, dx);
    added(diff, dx, px, c.n);
    expect_grad(unary_names[c.op], c.x, c.n, diff, unary_loss, &c);
    /* NULL dx: nothing to do, nothing to crash */
    unary_bwd(&c, NULL);
}
END_TEST

START_TEST(unary_forward_by_hand)
{
    const float x[5] = {-1, 0, 2, 1, 0.5f};
    float y[5];
    rt_relu_forward(y, x, 3);
    ck_assert_float_eq(y[0], 0.0f);
    ck_assert_float_eq(y[1], 0.0f);
    ck_assert_float_eq(y[2], 2.0f);
    rt_gelu_forward(y, x, 5, 0);
    ck_assert_float_eq_tol(y[3], 0.8413447f, 1e-6f);   /* 0.5(1+erf(1/sqrt2)) */
    ck_assert_float_eq_tol(y[0], -0.1586553f, 1e-6f);  /* -1 * Phi(-1) */
    ck_assert_float_eq(y[1], 0.0f);
    rt_gelu_forward(y, x, 5, 1);
    ck_assert_float_eq_tol(y[3], 0.8411920f, 1e-6f);   /* tanh(0.7978846*1.044715) */
    ck_assert_float_eq_tol(y[0], -0.1588080f, 1e-6f);
    rt_sigmoid_forward(y, x, 3);
    ck_assert_float_eq(y[1], 0.5f);
    ck_assert_float_eq_tol(y[2], 0.8807971f, 1e-6f);   /* 1/(1+e^-2) */
    ck_assert_float_eq_tol(y[0], 0.2689414f, 1e-6f);   /* 1/(1+e) */
    rt_tanh_forward(y, x, 5);
    ck_assert_float_eq(y[1], 0.0f);
    ck_assert_float_eq_tol(y[4], 0.4621172f, 1e-6f);
}
END_TEST

/* Over a grid, against the textbook formulas in double (erfc for Phi, and
 * x * sigmoid(2u) for the tanh form, which is exact algebra, not the kernel's
 * code). Relative accuracy must hold in the far negative tail too, where
 * 1 + erf(x/sqrt2) in float would be 0. There gelu is ill-conditioned:
 * d ln y / d ln x ~ 1 + x^2, so one rounding of x/sqrt2 (or of x itself)
 * moves y by ~(1 + x^2) float epsilons; the tolerance scales with that. */
START_TEST(gelu_accurate_over_grid)
{
    float x[161], y0[161], y1[161];
    int i;
    for (i = 0; i < 161; i++)
        x[i] = -8.0f + 0.1f * (float)i;
    rt_gelu_forward(y0, x, 161, 0);
    rt_gelu_forward(y1, x, 161, 1);
    for (i = 0; i < 161; i++) {
        const double xd = x[i];
        const double e = 0.5 * xd * erfc(-xd / sqrt(2.0));
        const double u = sqrt(2.0 / 3.14159265358979323846) *
                         (xd + 0.044715 * xd * xd * xd);
        const double t = xd / (1.0 + exp(-2.0 * u));
        const double cond = 1 + xd * xd;
        ck_assert_msg(fabs(y0[i] - e) <= 1e-6 * cond * fabs(e) + 1e-30,
                      "gelu(%g) = %.9g, want %.9g", xd, (double)y0[i], e);
        ck_assert_msg(fabs(y1[i] - t) <= 1e-6 * cond * fabs(t) + 1e-30,
                      "gelu_tanh(%g) = %.9g, want %.9g", xd, (double)y1[i], t);
    }
    x[0] = -10.0f;
    rt_gelu_forward(y0, x, 1, 0); /* -10 Phi(-10) = -7.6198530e-23 */
    ck_assert_msg(fabs(y0[0] / -7.6198530e-23 - 1) < 1e-4, "gelu(-10) = %g",
                  (double)y0[0]);
}
END_TEST

START_TEST(unary_large_inputs_stay_finite)
{
    const float x[6] = {-1e30f, -1000, -100, 100, 1000, 1e30f};
    float y[6], dx[6], dy[6] = {1, 1, 1, 1, 1, 1};
    int i, mode;
    rt_sigmoid_forward(y, x, 6);
    for (i = 0; i < 6; i++)
        ck_assert_msg(y[i] >= 0 && y[i] <= 1, "sigmoid(%g) = %g", (double)x[i],
                      (double)y[i]);
    ck_assert(y[2] > 0 && y[2] < 1e-40f); /* e^-100, subnormal, not 0/0 */
    ck_assert_float_eq(y[3], 1.0f);
    for (mode = 0; mode < 2; mode++) {
        memset(dx, 0, sizeof dx);
        rt_gelu_forward(y, x, 6, mode);
        rt_gelu_backward(dx, dy, x, 6, mode);
        for (i = 0; i < 6; i++) {
            ck_assert_msg(isfinite(y[i]) && isfinite(dx[i]),
                          "gelu mode %d at %g: y %g dx %g", mode, (double)x[i],
                          (double)y[i], (double)dx[i]);
            ck_assert_float_eq_tol(dx[i], x[i] > 0 ? 1.0f : 0.0f, 1e-6f);
            ck_assert_float_eq_tol(y[i], x[i] > 0 ? x[i] : 0.0f,
                                   x[i] > 0 ? 1e-6f * x[i] : 1e-6f);
        }
    }
}
END_TEST

START_TEST(unary_backward_accumulates)
{
    /* y = relu(x) for x = (-1, 2): dx = preset + dy * [y > 0]. */
    const float y[2] = {0, 2}, dy[2] = {5, 7};
    float dx[2] = {1, 1};
    rt_relu_backward(dx, dy, y, 2);
    ck_assert_float_eq(dx[0], 1.0f);
    ck_assert_float_eq(dx[1], 8.0f);
    /* sigmoid at y = 0.5: dy * 0.25 */
    rt_sigmoid_backward(dx, dy, (const float[]){0.5f, 0.5f}, 2);
    ck_assert_float_eq(dx[0], 2.25f);
    ck_assert_float_eq(dx[1], 9.75f);
    /* tanh at y = 0.5: dy * 0.75 */
    rt_tanh_backward(dx, dy, (const float[]){0.5f, 0.5f}, 2);
    ck_assert_float_eq(dx[0], 6.0f);
    ck_assert_float_eq(dx[1], 15.0f);
}
END_TEST

/* ---- Exp, Log, Sqrt, Neg ------------------------------------------------- */

enum { P_EXP, P_LOG, P_SQRT, P_NEG, P_COUNT };
static const char *const pw_names[P_COUNT] = {"Exp", "Log", "Sqrt", "Neg"};

typedef struct {
    int op, n;
    float x[32], y[32], dy[32];
} pw_case;

static void pw_fwd(pw_case *c)
{
    switch (c->op) {
    case P_EXP: rt_exp_forward(c->y, c->x, c->n); break;
    case P_LOG: rt_log_forward(c->y, c->x, c->n); break;
    case P_SQRT: rt_sqrt_forward(c->y, c->x, c->n); break;
    default: rt_neg_forward(c->y, c->x, c->n); break;
    }
}

/* Exp and Sqrt read the output y, Log the input x, Neg neither. */
static void pw_bwd(pw_case *c, float *dx)
{
    pw_fwd(c);
    switch (c->op) {
    case P_EXP: rt_exp_backward(dx, c->dy, c->y, c->n); break;
    case P_LOG: rt_log_backward(dx, c->dy, c->x, c->n); break;
    case P_SQRT: rt_sqrt_backward(dx, c->dy, c->y, c->n); break;
    default: rt_neg_backward(dx, c->dy, c->n); break;
    }
}

static double pw_loss(void *v)
{
    pw_case *c = v;
    pw_fwd(c);
    return dot(c->y, c->dy, c->n);
}

/* Log and Sqrt on positive inputs, away from 0 where they blow up. */
START_TEST(pointwise_grad)
{
    pw_case c;
    float dx[32], px[32], diff[32];
    c.op = _i, c.n = 32;
    tseed(1000 + _i);
    if (c.op == P_LOG || c.op == P_SQRT)
        fill(c.x, c.n, 0.5f, 3.0f);
    else
        fill(c.x, c.n, -2.0f, 2.0f);
    fill(c.dy, c.n, -1, 1);
    fill(px, c.n, -1, 1);
    memcpy(dx, px, sizeof dx);
    pw_bwd(&c, dx);
    added(diff, dx, px, c.n);
    expect_grad(pw_names[c.op], c.x, c.n, diff, pw_loss, &c);
    pw_bwd(&c, NULL); /* NULL dx: nothing to do, nothing to crash */
}
END_TEST

START_TEST(pointwise_forward_by_hand)
{
    const float x[4] = {0, 1, -1, 4}, pos[4] = {1, 2.7182818f, 0.5f, 4};
    float y[4] = {NAN, NAN, NAN, NAN}; /* forward must overwrite */
    const double w_exp[4] = {1, 2.718281828, 0.3678794412, 54.59815003},
                 w_log[4] = {0, 1, -0.6931471806, 1.386294361},
                 w_sqrt[4] = {1, 1.648721271, 0.7071067812, 2},
                 w_neg[4] = {0, -1, 1, -4};
    rt_exp_forward(y, x, 4);
    expect_near("exp", y, w_exp, 4, 1e-6, 0);
    rt_log_forward(y, pos, 4);
    expect_near("log", y, w_log, 4, 1e-6, 1e-7);
    rt_sqrt_forward(y, pos, 4);
    expect_near("sqrt", y, w_sqrt, 4, 1e-6, 0);
    rt_neg_forward(y, x, 4);
    expect_near("neg", y, w_neg, 4, 0, 0);
    ck_assert(signbit(y[0])); /* -0, as IEEE negation gives */
}
END_TEST

/* Over a grid, against libm's double functions. */
START_TEST(pointwise_forward_over_grid)
{
    float x[101], y[101];
    double want[101];
    int i;
    for (i = 0; i < 101; i++)
        x[i] = 0.05f + 0.2f * (float)i; /* (0, 20] */
    rt_exp_forward(y, x, 101);
    for (i = 0; i < 101; i++)
        want[i] = exp(x[i]);
    expect_near("exp", y, want, 101, 2e-7, 0);
    rt_log_forward(y, x, 101);
    for (i = 0; i < 101; i++)
        want[i] = log(x[i]);
    expect_near("log", y, want, 101, 2e-7, 1e-7);
    rt_sqrt_forward(y, x, 101);
    for (i = 0; i < 101; i++)
        want[i] = sqrt(x[i]);
    expect_near("sqrt", y, want, 101, 1e-7, 0);
}
END_TEST

/* dy = 2 on a preset dx = 1:
 * exp, y = {1, 2, 4}: dx = 1 + 2y = {3, 5, 9};
 * log, x = {1, 2, 4}: dx = 1 + 2/x = {3, 2, 1.5};
 * sqrt, y = {1, 2, 4}: dx = 1 + 2 * 0.5/y = {2, 1.5, 1.25};
 * neg: dx = 1 - 2 = -1. */
START_TEST(pointwise_backward_by_hand)
{
    const float v[3] = {1, 2, 4}, dy[3] = {2, 2, 2};
    const double w_exp[3] = {3, 5, 9}, w_log[3] = {3, 2, 1.5},
                 w_sqrt[3] = {2, 1.5, 1.25}, w_neg[3] = {-1, -1, -1};
    float dx[3];
    rt_fill(dx, 3, 1.0f);
    rt_exp_backward(dx, dy, v, 3);
    expect_near("exp", dx, w_exp, 3, 0, 0);
    rt_fill(dx, 3, 1.0f);
    rt_log_backward(dx, dy, v, 3);
    expect_near("log", dx, w_log, 3, 0, 0);
    rt_fill(dx, 3, 1.0f);
    rt_sqrt_backward(dx, dy, v, 3);
    expect_near("sqrt", dx, w_sqrt, 3, 0, 0);
    rt_fill(dx, 3, 1.0f);
    rt_neg_backward(dx, dy, 3);
    expect_near("neg", dx, w_neg, 3, 0, 0);
}
END_TEST

/* ---- Erf and Reciprocal -------------------------------------------------- */

typedef struct {
    int recip, n;
    float x[32], y[32], dy[32];
} un_case;

static void un_fwd(un_case *c)
{
    if (c->recip)
        rt_reciprocal_forward(c->y, c->x, c->n);
    else
        rt_erf_forward(c->y, c->x, c->n);
}

static double un_loss(void *v)
{
    un_case *c = v;
    un_fwd(c);
    return dot(c->y, c->dy, (size_t)c->n);
}

/* Erf reads x, Reciprocal y. Reciprocal's x away from 0 (either sign). */
START_TEST(erf_reciprocal_grad)
{
    un_case c;
    float dx[32], px[32], diff[32];
    c.recip = _i, c.n = 32;
    tseed(7000 + _i);
    if (c.recip)
        fill_away(c.x, 32, 0.5f, 2.0f);
    else
        fill(c.x, 32, -2.5f, 2.5f);
    fill(c.dy, 32, -1, 1);
    fill(px, 32, -1, 1);
    memcpy(dx, px, sizeof dx);
    un_fwd(&c);
    if (c.recip)
        rt_reciprocal_backward(dx, c.dy, c.y, c.n);
    else
        rt_erf_backward(dx, c.dy, c.x, c.n);
    added(diff, dx, px, 32);
    expect_grad(c.recip ? "reciprocal" : "erf", c.x, 32, diff, un_loss, &c);
    /* NULL dx: nothing to do, nothing to crash */
    rt_reciprocal_backward(NULL, c.dy, c.y, c.n);
    rt_erf_backward(NULL, c.dy, c.x, c.n);
}
END_TEST

/* erf(0.5) = 0.5204998778, erf(1) = 0.8427007929, odd, erf(3) = 0.9999779095;
 * and over a grid against libm's double erf. */
START_TEST(erf_forward)
{
    const float x[5] = {0, 0.5f, 1, -1, 3};
    const double want[5] = {0, 0.5204998778, 0.8427007929, -0.8427007929,
                            0.9999779095};
    float y[101], g[101];
    double w[101];
    int i;
    rt_erf_forward(y, x, 5);
    expect_near("erf", y, want, 5, 1e-6, 0);
    for (i = 0; i < 101; i++) {
        g[i] = -4.0f + 0.08f * (float)i;
        w[i] = erf(g[i]);
    }
    rt_erf_forward(y, g, 101);
    expect_near("erf grid", y, w, 101, 2e-7, 1e-7);
}
END_TEST

/* dy = 2 on a preset dx = 1: dx = 1 + 2 * 2/sqrt(pi) * exp(-x^2), so
 * x = 0: 3.2567583342, x = 1 and -1: 1.8302149948, x = 2: 1.0413339707. */
START_TEST(erf_backward_by_hand)
{
    const float x[4] = {0, 1, -1, 2}, dy[4] = {2, 2, 2, 2};
    const double want[4] = {3.2567583342, 1.8302149948, 1.8302149948,
                            1.0413339707};
    float dx[4];
    rt_fill(dx, 4, 1.0f);
    rt_erf_backward(dx, dy, x, 4);
    expect_near("erf'", dx, want, 4, 1e-6, 0);
}
END_TEST

/* 1/x, with 1/0 = +inf and 1/-0 = -inf as IEEE; the backward -dy y^2 on a
 * preset 1 with dy = 2: y = {0.5, -0.25, 4}: {0.5, 0.875, -31}. */
START_TEST(reciprocal_by_hand)
{
    const float x[5] = {2, -4, 0.25f, 0.0f, -0.0f};
    const double want[3] = {0.5, -0.25, 4};
    const float y3[3] = {0.5f, -0.25f, 4}, dy[3] = {2, 2, 2};
    const double wdx[3] = {0.5, 0.875, -31};
    float y[5], dx[3];
    rt_reciprocal_forward(y, x, 5);
    expect_near("1/x", y, want, 3, 0, 0);
    ck_assert(isinf(y[3]) && y[3] > 0);
    ck_assert(isinf(y[4]) && y[4] < 0);
    rt_fill(dx, 3, 1.0f);
    rt_reciprocal_backward(dx, dy, y3, 3);
    expect_near("-y^2", dx, wdx, 3, 0, 0);
}
END_TEST

/* ---- torch.nn's activations ---------------------------------------------- */

/* Each with attributes other than ONNX's defaults where it has any (so a
 * kernel that ignored them would fail), and its kinks: gradient points
 * stay 0.05 away from them (the finite difference steps 0.01). */
enum { A_LEAKY, A_HSWISH, A_HSIGMOID, A_CLIP, A_ELU, A_SOFTPLUS, A_ABS,
       A_SELU, A_CELU, A_SOFTSIGN, A_MISH, A_SIN, A_COS, A_COUNT };
static const char *const act_names[A_COUNT] = {
    "LeakyRelu", "HardSwish", "HardSigmoid", "Clip", "Elu", "Softplus", "Abs",
    "Selu", "Celu", "Softsign", "Mish", "Sin", "Cos"};
/* 99: smooth, no kink (Celu's first derivative is continuous at 0, but
 * its second is not: the points still straddle 0) */
static const float act_kinks[A_COUNT][2] = {
    {0, 0}, {-3, 3}, {-2, 2}, {-1, 1.5f}, {0, 0}, {99, 99}, {0, 0},
    {0, 0}, {0, 0}, {99, 99}, {99, 99}, {99, 99}, {99, 99}};
#define A_ALPHA_LEAKY 0.1f
#define A_ALPHA_HSIG  0.25f     /* with beta 0.5: kinks at -2 and 2 */
#define A_BETA_HSIG   0.5f
#define A_LO          -1.0f
#define A_HI          1.5f
#define A_ALPHA_ELU   0.7f      /* not 1: Elu then has a kink at 0 */
#define A_ALPHA_SELU  1.5f      /* not ONNX's 1.673..., 1.050... */
#define A_GAMMA_SELU  1.2f
#define A_ALPHA_CELU  0.5f      /* not 1: x/alpha differs from x */

typedef struct {
    int op, n;
    float x[32], y[32], dy[32];
} act_case;

static void act_fwd(act_case *c)
{
    switch (c->op) {
    case A_LEAKY: rt_leaky_relu_forward(c->y, c->x, c->n, A_ALPHA_LEAKY); break;
    case A_HSWISH: rt_hard_swish_forward(c->y, c->x, c->n); break;
    case A_HSIGMOID:
        rt_hard_sigmoid_forward(c->y, c->x, c->n, A_ALPHA_HSIG, A_BETA_HSIG);
        break;
    case A_CLIP: rt_clip_forward(c->y, c->x, c->n, A_LO, A_HI); break;
    case A_ELU: rt_elu_forward(c->y, c->x, c->n, A_ALPHA_ELU); break;
    case A_SOFTPLUS: rt_softplus_forward(c->y, c->x, c->n); break;
    case A_SELU:
        rt_selu_forward(c->y, c->x, c->n, A_ALPHA_SELU, A_GAMMA_SELU);
        break;
    case A_CELU: rt_celu_forward(c->y, c->x, c->n, A_ALPHA_CELU); break;
    case A_SOFTSIGN: rt_softsign_forward(c->y, c->x, c->n); break;
    case A_MISH: rt_mish_forward(c->y, c->x, c->n); break;
    case A_SIN: rt_sin_forward(c->y, c->x, c->n); break;
    case A_COS: rt_cos_forward(c->y, c->x, c->n); break;
    default: rt_abs_forward(c->y, c->x, c->n); break;
    }
}

/* HardSigmoid reads its output y, the others their input x. */
static void act_bwd(act_case *c, float *dx)
{
    act_fwd(c);
    switch (c->op) {
    case A_LEAKY:
        rt_leaky_relu_backward(dx, c->dy, c->x, c->n, A_ALPHA_LEAKY);
        break;
    case A_HSWISH: rt_hard_swish_backward(dx, c->dy, c->x, c->n); break;
    case A_HSIGMOID:
        rt_hard_sigmoid_backward(dx, c->dy, c->y, c->n, A_ALPHA_HSIG);
        break;
    case A_CLIP: rt_clip_backward(dx, c->dy, c->x, c->n, A_LO, A_HI); break;
    case A_ELU: rt_elu_backward(dx, c->dy, c->x, c->n, A_ALPHA_ELU); break;
    case A_SOFTPLUS: rt_softplus_backward(dx, c->dy, c->x, c->n); break;
    case A_SELU:
        rt_selu_backward(dx, c->dy, c->x, c->n, A_ALPHA_SELU, A_GAMMA_SELU);
        break;
    case A_CELU: rt_celu_backward(dx, c->dy, c->x, c->n, A_ALPHA_CELU); break;
    case A_SOFTSIGN: rt_softsign_backward(dx, c->dy, c->x, c->n); break;
    case A_MISH: rt_mish_backward(dx, c->dy, c->x, c->n); break;
    case A_SIN: rt_sin_backward(dx, c->dy, c->x, c->n); break;
    case A_COS: rt_cos_backward(dx, c->dy, c->x, c->n); break;
    default: rt_abs_backward(dx, c->dy, c->x, c->n); break;
    }
}

static double act_loss(void *v)
{
    act_case *c = v;
    act_fwd(c);
    return dot(c->y, c->dy, c->n);
}

/* x over [-5, 5], on both sides of every kink, none within 0.05 of one */
START_TEST(activation_grad)
{
    act_case c;
    float dx[32], px[32], diff[32];
    int i, k;
    c.op = _i, c.n = 32;
    tseed(1400 + _i);
    for (i = 0; i < c.n; i++) {
        do
            c.x[i] = trand(-5, 5);
        while (fabsf(c.x[i] - act_kinks[c.op][0]) < 0.05f ||
               fabsf(c.x[i] - act_kinks[c.op][1]) < 0.05f);
    }
    for (k = 0; k < 2; k++) {
        int below = 0, above = 0;
        for (i = 0; i < c.n; i++) {
            below += c.x[i] < act_kinks[c.op][k];
            above += c.x[i] > act_kinks[c.op][k];
        }
        ck_assert(act_kinks[c.op][k] == 99 || (below > 2 && above > 2));
    }
    fill(c.dy, c.n, -1, 1);
    fill(px, c.n, -1, 1);
    memcpy(dx, px, sizeof dx);
    act_bwd(&c, dx);
    added(diff, dx, px, c.n);
    expect_grad(act_names[c.op], c.x, c.n, diff, act_loss, &c);
    act_bwd(&c, NULL);
}
END_TEST

/* ONNX's definitions in double over a grid through every kink */
START_TEST(activation_forward_over_grid)
{
    act_case c;
    double want[32];
    int op, j, i;
    for (op = 0; op < A_COUNT; op++)
        for (j = 0; j < 8; j++) {
            c.op = op, c.n = 32;
            for (i = 0; i < 32; i++)
                c.x[i] = -8.0f + 0.0625f * (float)(32 * j + i);
            act_fwd(&c);
            for (i = 0; i < 32; i++) {
                const double x = c.x[i];
                double y;
                switch (op) {
                case A_LEAKY: y = x >= 0 ? x : 0.1 * x; break;
                case A_HSWISH: y = x * fmax(0, fmin(1, x / 6 + 0.5)); break;
                case A_HSIGMOID: y = fmax(0, fmin(1, 0.25 * x + 0.5)); break;
                case A_CLIP: y = fmin(fmax(x, -1), 1.5); break;
                case A_ELU: y = x > 0 ? x : 0.7 * (exp(x) - 1); break;
                case A_SOFTPLUS: y = log(1 + exp(x)); break;
                case A_SELU:
                    y = x > 0 ? 1.2 * x : 1.2 * (1.5 * exp(x) - 1.5);
                    break;
                case A_CELU:
                    y = fmax(0, x) + fmin(0, 0.5 * (exp(x / 0.5) - 1));
                    break;
                case A_SOFTSIGN: y = x / (1 + fabs(x)); break;
                case A_MISH: y = x * tanh(log(1 + exp(x))); break;
                case A_SIN: y = sin(x); break;
                case A_COS: y = cos(x); break;
                default: y = x < 0 ? -x : x; break;
                }
                want[i] = y;
            }
            expect_near(act_names[op], c.y, want, 32, 1e-6, 1e-7);
        }
}
END_TEST

START_TEST(activation_forward_by_hand)
{
    const float x[6] = {-4, -2, 0, 1, 4, -1};
    float y[6];
    rt_leaky_relu_forward(y, x, 6, 0.01f);
    ck_assert_float_eq(y[0], -0.04f);
    ck_assert_float_eq(y[3], 1.0f);
    rt_hard_swish_forward(y, x, 6);
    ck_assert_float_eq(y[0], 0.0f);                     /* below -3 */
    ck_assert_float_eq_tol(y[1], -0.3333333f, 1e-6f);   /* -2 * 1/6 */
    ck_assert_float_eq_tol(y[3], 0.6666667f, 1e-6f);    /* 1 * 4/6 */
    ck_assert_float_eq(y[4], 4.0f);                     /* above 3 */
    rt_hard_sigmoid_forward(y, x, 6, 0.2f, 0.5f);       /* ONNX's defaults */
    ck_assert_float_eq(y[0], 0.0f);                     /* -0.3 clamped */
    ck_assert_float_eq_tol(y[1], 0.1f, 1e-7f);
    ck_assert_float_eq(y[2], 0.5f);
    ck_assert_float_eq_tol(y[3], 0.7f, 1e-7f);
    ck_assert_float_eq(y[4], 1.0f);                     /* 1.3 clamped */
    rt_clip_forward(y, x, 6, 0.0f, 6.0f);               /* ReLU6 */
    ck_assert_float_eq(y[0], 0.0f);
    ck_assert_float_eq(y[4], 4.0f);
    rt_clip_forward(y, x, 6, -INFINITY, INFINITY);      /* no bounds */
    ck_assert(memcmp(y, x, sizeof y) == 0);
    rt_clip_forward(y, x, 6, 2.0f, 1.0f);               /* min > max: max */
    ck_assert_float_eq(y[0], 1.0f);
    ck_assert_float_eq(y[4], 1.0f);
    rt_elu_forward(y, x, 6, 1.0f);
    ck_assert_float_eq_tol(y[5], -0.6321206f, 1e-6f);   /* e^-1 - 1 */
    ck_assert_float_eq(y[2], 0.0f);
    ck_assert_float_eq(y[3], 1.0f);
    rt_softplus_forward(y, x, 6);
    ck_assert_float_eq_tol(y[2], 0.6931472f, 1e-6f);    /* ln 2 */
    ck_assert_float_eq_tol(y[3], 1.3132616f, 1e-6f);    /* ln(1 + e) */
    rt_abs_forward(y, x, 6);
    ck_assert_float_eq(y[0], 4.0f);
    ck_assert_float_eq(y[3], 1.0f);
    rt_selu_forward(y, x, 6, 1.67326319217681884765625f,
                    1.05070102214813232421875f);        /* ONNX's defaults */
    ck_assert_float_eq_tol(y[5], -1.1113307f, 1e-6f);   /* g a (e^-1 - 1) */
    ck_assert_float_eq(y[2], 0.0f);
    ck_assert_float_eq_tol(y[3], 1.0507010f, 1e-6f);    /* gamma */
    rt_celu_forward(y, x, 6, 1.0f);
    ck_assert_float_eq_tol(y[5], -0.6321206f, 1e-6f);   /* e^-1 - 1 */
    ck_assert_float_eq(y[3], 1.0f);
    rt_softsign_forward(y, x, 6);
    ck_assert_float_eq(y[0], -0.8f);
    ck_assert_float_eq(y[2], 0.0f);
    ck_assert_float_eq(y[3], 0.5f);
    rt_mish_forward(y, x, 6);
    ck_assert_float_eq(y[2], 0.0f);
    ck_assert_float_eq_tol(y[3], 0.8650984f, 1e-6f);    /* tanh(ln(1 + e)) */
    ck_assert_float_eq_tol(y[0], -0.0725917f, 1e-6f);
}
END_TEST

/* At the kinks, torch's one-sided slopes, added to dx = 1 (dy = 2). */
START_TEST(activation_backward_at_kinks)
{
    const float dy[2] = {2, 2};
    float dx[2];
    rt_fill(dx, 2, 1.0f);
    rt_leaky_relu_backward(dx, dy, (const float[]){0, 0}, 2, 0.25f);
    ck_assert_float_eq(dx[0], 1.5f);                     /* alpha at 0 */
    rt_fill(dx, 2, 1.0f);
    rt_hard_swish_backward(dx, dy, (const float[]){-3, 3}, 2);
    ck_assert_float_eq(dx[0], 0.0f);                     /* 1 + 2 * -1/2 */
    ck_assert_float_eq(dx[1], 4.0f);                     /* 1 + 2 * 3/2 */
    rt_fill(dx, 2, 1.0f);
    rt_hard_sigmoid_backward(dx, dy, (const float[]){0, 1}, 2, 0.25f);
    ck_assert_float_eq(dx[0], 1.0f);                     /* 0 at both ends */
    ck_assert_float_eq(dx[1], 1.0f);
    rt_hard_sigmoid_backward(dx, dy, (const float[]){0.5f, 0.5f}, 2, 0.25f);
    ck_assert_float_eq(dx[0], 1.5f);
    rt_fill(dx, 2, 1.0f);
    rt_clip_backward(dx, dy, (const float[]){0, 6}, 2, 0.0f, 6.0f);
    ck_assert_float_eq(dx[0], 3.0f);                     /* bounds included */
    ck_assert_float_eq(dx[1], 3.0f);
    rt_clip_backward(dx, dy, (const float[]){-1, 7}, 2, 0.0f, 6.0f);
    ck_assert_float_eq(dx[0], 3.0f);                     /* outside: 0 */
    ck_assert_float_eq(dx[1], 3.0f);
    rt_clip_backward(dx, dy, (const float[]){-1e30f, 1e30f}, 2, -INFINITY,
                     INFINITY);
    ck_assert_float_eq(dx[0], 5.0f);
    ck_assert_float_eq(dx[1], 5.0f);
    rt_clip_backward(dx, dy, (const float[]){1.5f, 1.5f}, 2, 2.0f, 1.0f);
    ck_assert_float_eq(dx[0], 5.0f);                     /* min > max: 0 */
    rt_fill(dx, 2, 1.0f);
    rt_elu_backward(dx, dy, (const float[]){0, -1}, 2, 0.5f);
    ck_assert_float_eq(dx[0], 2.0f);                     /* alpha e^0 */
    ck_assert_float_eq_tol(dx[1], 1.3678794f, 1e-6f);    /* 1 + 2 * e^-1/2 */
    rt_fill(dx, 2, 1.0f);
    rt_abs_backward(dx, dy, (const float[]){0, -5}, 2);
    ck_assert_float_eq(dx[0], 1.0f);                     /* sign(0) = 0 */
    ck_assert_float_eq(dx[1], -1.0f);
    rt_fill(dx, 2, 1.0f);
    rt_softplus_backward(dx, dy, (const float[]){0, 0}, 2);
    ck_assert_float_eq(dx[0], 2.0f);                     /* sigmoid(0) = 1/2 */
    rt_fill(dx, 2, 1.0f);
    rt_selu_backward(dx, dy, (const float[]){0, -1}, 2,
                     1.67326319217681884765625f, 1.05070102214813232421875f);
    ck_assert_float_eq_tol(dx[0], 4.5161987f, 1e-5f);    /* 1 + 2 g a at 0 */
    ck_assert_float_eq_tol(dx[1], 2.2935372f, 1e-5f);    /* 1 + 2 g a e^-1 */
    rt_fill(dx, 2, 1.0f);
    rt_celu_backward(dx, dy, (const float[]){0, -1}, 2, 0.5f);
    ck_assert_float_eq(dx[0], 3.0f);                     /* e^0 = 1 at 0 */
    ck_assert_float_eq_tol(dx[1], 1.2706706f, 1e-6f);    /* 1 + 2 e^-2 */
    rt_fill(dx, 2, 1.0f);
    rt_softsign_backward(dx, dy, (const float[]){0, -1}, 2);
    ck_assert_float_eq(dx[0], 3.0f);                     /* 1 / 1^2 */
    ck_assert_float_eq(dx[1], 1.5f);                     /* 1 / 2^2 */
    rt_fill(dx, 2, 1.0f);
    rt_mish_backward(dx, dy, (const float[]){0, 0}, 2);
    ck_assert_float_eq_tol(dx[0], 2.2f, 1e-6f);          /* tanh(ln 2) = 0.6 */
    rt_selu_backward(NULL, dy, (const float[]){0, -1}, 2, 1.0f, 1.0f);
    rt_celu_backward(NULL, dy, (const float[]){0, -1}, 2, 1.0f);
    rt_softsign_backward(NULL, dy, (const float[]){0, -1}, 2);
    rt_mish_backward(NULL, dy, (const float[]){0, -1}, 2);
}
END_TEST

START_TEST(activation_large_inputs_stay_finite)
{
    const float x[4] = {-1000, -100, 100, 1000};
    float y[4], dx[4] = {0, 0, 0, 0}, dy[4] = {1, 1, 1, 1};
    int i;
    rt_softplus_forward(y, x, 4);
    rt_softplus_backward(dx, dy, x, 4);
    for (i = 0; i < 4; i++)
        ck_assert_msg(isfinite(y[i]) && y[i] >= 0 && isfinite(dx[i]),
                      "softplus(%g) = %g, dx %g", (double)x[i], (double)y[i],
                      (double)dx[i]);
    ck_assert_float_eq(y[2], 100.0f);
    ck_assert_float_eq(y[3], 1000.0f);
    ck_assert_float_eq(dx[3], 1.0f);
    ck_assert_float_eq(dx[0], 0.0f);
    rt_elu_forward(y, x, 4, 2.0f);
    ck_assert_float_eq(y[0], -2.0f);
    rt_mish_forward(y, x, 4);
    rt_fill(dx, 4, 0.0f);
    rt_mish_backward(dx, dy, x, 4);
    for (i = 0; i < 4; i++)
        ck_assert_msg(isfinite(y[i]) && isfinite(dx[i]), "mish(%g) = %g, dx %g",
                      (double)x[i], (double)y[i], (double)dx[i]);
    ck_assert_float_eq(y[3], 1000.0f);
    ck_assert_float_eq(dx[3], 1.0f);
    ck_assert_float_eq(y[0], 0.0f);
    rt_softsign_forward(y, x, 4);
    ck_assert_float_eq_tol(y[3], 0.999001f, 1e-6f);
    rt_selu_forward(y, x, 4, 1.67326319217681884765625f,
                    1.05070102214813232421875f);
    ck_assert_float_eq_tol(y[0], -1.7580993f, 1e-6f);    /* -gamma alpha */
    rt_celu_forward(y, x, 4, 0.5f);
    ck_assert_float_eq(y[0], -0.5f);
}
END_TEST

/* ---- _set twins ---------------------------------------------------------- */

START_TEST(pointwise_kernels_write)
{
    const int n = 1000;
    float *x = rnd((size_t)n), *dy = rnd((size_t)n), *y = rnd((size_t)n);
    float *want = zeros((size_t)n), *got = nans((size_t)n);
    int approximate;
    x[0] = 0.0f;   /* ReLU's kink and Gelu's centre */
    y[0] = 0.0f;
    rt_relu_backward(want, dy, y, n);
    rt_relu_backward_set(got, dy, y, n, 1u);
    same_values("relu", want, got, (size_t)n);
    for (approximate = 0; approximate < 2; approximate++) {
        memset(want, 0, (size_t)n * sizeof *want);
        free(got);
        got = nans((size_t)n);
        rt_gelu_backward(want, dy, x, n, approximate);
        rt_gelu_backward_set(got, dy, x, n, approximate, 1u);
        same_values("gelu", want, got, (size_t)n);
    }
    memset(want, 0, (size_t)n * sizeof *want);
    free(got);
    got = nans((size_t)n);
    rt_dropout_backward(want, dy, n, 0.3f, 7, 2, 11);
    rt_dropout_backward_set(got, dy, n, 0.3f, 7, 2, 11, 1u);
    same_values("dropout", want, got, (size_t)n);
    free(x), free(dy), free(y), free(want), free(got);
}
END_TEST

/* set 0 is the plain kernel: it adds into what is there. */
START_TEST(set_zero_adds)
{
    const int n = 300;
    float *dy = rnd((size_t)n), *y = rnd((size_t)n), *start = rnd((size_t)n);
    float *a = copy(start, (size_t)n), *b = copy(start, (size_t)n);
    rt_relu_backward(a, dy, y, n);
    rt_relu_backward_set(b, dy, y, n, 0u);
    ck_assert(memcmp(a, b, (size_t)n * sizeof *a) == 0);
    ck_assert(memcmp(a, start, (size_t)n * sizeof *a) != 0);
    free(dy), free(y), free(start), free(a), free(b);
}
END_TEST

/* ---- masks kept instead of floats (compact residuals) -------------------- */

/* x over the kinks and the odd values: both zeros, NaN, infinities, a
 * denormal, Clip's bounds; the rest random. */
static float *mask_inputs(size_t n)
{
    static const float odd[10] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY,
                                  1e-45f, -1e-45f, 6.0f, 1.0f, -1.0f};
    float *x = rnd(n);
    size_t i;
    for (i = 0; i < n; i += 7)
        x[i] = odd[(i / 7) % 10];
    return x;
}

/* Bit for bit, but a NaN where the other has a NaN: which operand's NaN
 * an operation passes on (and so its sign) is the compiler's order of
 * operands, which inlining the same expression elsewhere may change. */
static int same_bits_or_nan(const float *a, const float *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0 &&
            !(isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

/* A remade recompute: rt_gelu_backward_remake writes the forward's y and
 * the backward's dx, each bit for bit what rt_gelu_forward and
 * rt_gelu_backward(_set) write, whether it adds into dx or writes it,
 * with dx in dy's own buffer (the schedule's in-place gradient), both
 * forms, over the odd values and a range where Phi is neither 0 nor 1;
 * 300001 elements split over the threads where there are any. */
START_TEST(gelu_remake_is_forward_and_backward)
{
    const size_t n = 300001;
    float *x = mask_inputs(n), *dy = rnd(n), *start = rnd(n);
    int approximate;
    unsigned set;
    size_t i;
    for (i = 1; i < n; i += 7)
        x[i] *= 8.0f;
    for (approximate = 0; approximate < 2; approximate++)
        for (set = 0; set < 2; set++) {
            float *y = nans(n), *y2 = nans(n);
            float *dx = copy(start, n), *dx2 = copy(start, n);
            float *inplace = copy(dy, n);
            rt_gelu_forward(y, x, (int)n, approximate);
            rt_gelu_backward_set(dx, dy, x, (int)n, approximate, set);
            rt_gelu_backward_remake(dx2, y2, dy, x, (int)n, approximate, set);
            ck_assert_msg(same_bits_or_nan(y, y2, n),
                          "approximate %d set %u: y differs", approximate, set);
            ck_assert_msg(same_bits_or_nan(dx, dx2, n),
                          "approximate %d set %u: dx differs", approximate,
                          set);
            if (set) {      /* dx written over dy, as in place */
                rt_gelu_backward_remake(inplace, y2, inplace, x, (int)n,
                                        approximate, 1u);
                ck_assert(same_bits_or_nan(dx, inplace, n));
            }
            free(y), free(y2), free(dx), free(dx2), free(inplace);
        }
    free(x), free(dy), free(start);
}
END_TEST

/* Forward and backward from the mask against the float kernels, bit for
 * bit: y, dx added into random values (a -0 there stays -0), and Relu's
 * _set twin from NaNs. n = 1001 is not a whole number of bytes; n =
 * 300001 splits over the threads where there are any. */
static void masks_match(int n)
{
    float *x = mask_inputs((size_t)n), *dy = rnd((size_t)n);
    float *start = rnd((size_t)n), *wy = nans((size_t)n), *y = nans((size_t)n);
    float *wdx = copy(start, (size_t)n), *dx = copy(start, (size_t)n);
    unsigned char *mask = malloc((size_t)n / 8 + 1);
    const size_t bytes = (size_t)n * sizeof(float);
    ck_assert_ptr_nonnull(mask);
    start[1] = -0.0f;
    wdx[1] = dx[1] = -0.0f;
    rt_relu_forward(wy, x, n);
    rt_relu_forward_mask(y, mask, x, n);
    ck_assert(memcmp(y, wy, bytes) == 0);
    rt_relu_backward(wdx, dy, wy, n);
    rt_relu_backward_mask(dx, dy, mask, n);
    ck_assert(memcmp(dx, wdx, bytes) == 0);
    memcpy(wdx, start, bytes), memcpy(dx, start, bytes);
    rt_relu_backward_set(wdx, dy, wy, n, 1u);
    for (int i = 0; i < n; i++)
        dx[i] = NAN;
    rt_relu_backward_mask_set(dx, dy, mask, n, 1u);
    ck_assert(memcmp(dx, wdx, bytes) == 0);
    rt_leaky_relu_forward(wy, x, n, 0.1f);
    rt_leaky_relu_forward_mask(y, mask, x, n, 0.1f);
    ck_assert(memcmp(y, wy, bytes) == 0);
    memcpy(wdx, start, bytes), memcpy(dx, start, bytes);
    rt_leaky_relu_backward(wdx, dy, x, n, 0.1f);
    rt_leaky_relu_backward_mask(dx, dy, mask, n, 0.1f);
    ck_assert(memcmp(dx, wdx, bytes) == 0);
    rt_hard_sigmoid_forward(wy, x, n, 0.2f, 0.5f);
    rt_hard_sigmoid_forward_mask(y, mask, x, n, 0.2f, 0.5f);
    ck_assert(memcmp(y, wy, bytes) == 0);
    memcpy(wdx, start, bytes), memcpy(dx, start, bytes);
    rt_hard_sigmoid_backward(wdx, dy, wy, n, 0.2f);
    rt_hard_sigmoid_backward_mask(dx, dy, mask, n, 0.2f);
    ck_assert(memcmp(dx, wdx, bytes) == 0);
    rt_clip_forward(wy, x, n, 0.0f, 6.0f);
    rt_clip_forward_mask(y, mask, x, n, 0.0f, 6.0f);
    ck_assert(memcmp(y, wy, bytes) == 0);
    memcpy(wdx, start, bytes), memcpy(dx, start, bytes);
    rt_clip_backward(wdx, dy, x, n, 0.0f, 6.0f);
    rt_clip_backward_mask(dx, dy, mask, n);
    ck_assert(memcmp(dx, wdx, bytes) == 0);
    free(x), free(dy), free(start), free(wy), free(y), free(wdx), free(dx);
    free(mask);
}

START_TEST(masks_match_float_kernels)
{
    set_seed();
    masks_match(1001);
    masks_match(300001);
}
END_TEST

/* By hand: x = [2, -1, 0, NaN, -0, 3, 0.5, -2, 7] gives Relu's mask bits
 * 1 0 0 0 0 1 1 0 | 1 (bytes 0x61, 0x01): y > 0 is false at 0, -0 and
 * NaN (y = 0 there). Clip(0, 6)'s bits are lo <= x <= hi: 1 0 1 0 1 1 1
 * 0 | 0 (0x75, 0x00). */
START_TEST(masks_by_hand)
{
    const float x[9] = {2, -1, 0, NAN, -0.0f, 3, 0.5f, -2, 7};
    float y[9];
    unsigned char mask[2];
    rt_relu_forward_mask(y, mask, x, 9);
    ck_assert_int_eq(mask[0], 0x61);
    ck_assert_int_eq(mask[1], 0x01);
    ck_assert(y[3] == 0.0f && y[0] == 2.0f);
    rt_clip_forward_mask(y, mask, x, 9, 0.0f, 6.0f);
    ck_assert_int_eq(mask[0], 0x75);
    ck_assert_int_eq(mask[1] & 1, 0);
    ck_assert(y[8] == 6.0f);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

/* ---- Sign (issue 25) ------------------------------------------------------ */

/* By hand: 1, -1, 0 for either zero, NaN for NaN (numpy.sign), and +-1 at
 * the extremes of float (denormals, infinities). */
START_TEST(sign_by_hand)
{
    const float x[9] = {2.5f, -0.001f, 0.0f, -0.0f, NAN, 1e-45f, -1e-45f,
                        INFINITY, -INFINITY};
    const float want[8] = {1, -1, 0, 0, 0, 1, -1, 1};
    float y[9];
    int i;
    memset(y, 0x7f, sizeof y);
    rt_sign_forward(y, x, 9);
    for (i = 0; i < 8; i++)
        if (i != 4)
            ck_assert_msg(y[i] == want[i], "sign(%g) = %g", (double)x[i],
                          (double)y[i]);
    ck_assert(isnan(y[4]));
    ck_assert(y[8] == -1.0f);
}
END_TEST

static Suite *unary_suite(void)
{
    Suite *s = suite_create("remat_rt unary");
    TCase *tc;

    tc = tcase_create("unary");
    tcase_add_loop_test(tc, unary_grad, 0, U_COUNT);
    tcase_add_test(tc, unary_forward_by_hand);
    tcase_add_test(tc, gelu_accurate_over_grid);
    tcase_add_test(tc, gelu_remake_is_forward_and_backward);
    tcase_add_test(tc, unary_large_inputs_stay_finite);
    tcase_add_test(tc, unary_backward_accumulates);
    suite_add_tcase(s, tc);

    tc = tcase_create("pointwise");
    tcase_add_loop_test(tc, pointwise_grad, 0, P_COUNT);
    tcase_add_test(tc, pointwise_forward_by_hand);
    tcase_add_test(tc, pointwise_forward_over_grid);
    tcase_add_test(tc, pointwise_backward_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("erf_reciprocal");
    tcase_add_loop_test(tc, erf_reciprocal_grad, 0, 2);
    tcase_add_test(tc, erf_forward);
    tcase_add_test(tc, erf_backward_by_hand);
    tcase_add_test(tc, reciprocal_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("activations");
    tcase_add_loop_test(tc, activation_grad, 0, A_COUNT);
    tcase_add_test(tc, activation_forward_over_grid);
    tcase_add_test(tc, activation_forward_by_hand);
    tcase_add_test(tc, activation_backward_at_kinks);
    tcase_add_test(tc, activation_large_inputs_stay_finite);
    tcase_add_test(tc, sign_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("set");
    tcase_add_checked_fixture(tc, set_seed, NULL);
    tcase_add_test(tc, pointwise_kernels_write);
    tcase_add_test(tc, set_zero_adds);
    tcase_add_test(tc, masks_match_float_kernels);
    tcase_add_test(tc, masks_by_hand);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(unary_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
