/*
 * test_kernels_optim.c: unit tests of the optimizer kernels (rt_sgd,
 * rt_sgd_update, rt_adamw_update, rt_optimizer_update, rt_grad_norm_sq,
 * rt_clip_coef, rt_scale) and the memory ones (rt_zero, rt_fill, rt_copy),
 * with Check.
 *
 * The expected values come from torch.optim's documented update rules
 * written here in double, one step at a time over several steps (so the
 * state's carry-over is tested), and from facts that do not depend on the
 * formulas' arrangement: SGD's first momentum buffer is the gradient
 * itself, AdamW's first step moves each element by lr * g / (|g| + eps),
 * clip_grad_norm_ leaves gradients under the norm alone. The memory kernels
 * and plain rt_sgd against values worked out by hand.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

#define N 37
#define STEPS 6

/* relative to the value, or to 0.1 where rounding cancels it towards 0 */
static void expect_close(const char *what, int step, const float *got,
                         const double *want, size_t n, double rtol)
{
    size_t i;
    for (i = 0; i < n; i++) {
        double tol = rtol * (fabs(want[i]) > 0.1 ? fabs(want[i]) : 0.1);
        ck_assert_msg(fabs((double)got[i] - want[i]) <= tol,
                      "%s step %d element %zu: got %.9g, want %.9g", what,
                      step, i, (double)got[i], want[i]);
    }
}

typedef struct {
    double momentum, dampening, wd;
    int nesterov;
} sgd_case;

static const sgd_case sgd_cases[] = {
    {0.0, 0.0, 0.0, 0},    /* plain */
    {0.9, 0.0, 0.0, 0},    /* momentum */
    {0.9, 0.0, 0.01, 1},   /* Nesterov and weight decay */
    {0.8, 0.3, 0.05, 0},   /* dampening */
    {0.0, 0.0, 0.1, 0},    /* weight decay alone */
};
#define N_SGD ((int)(sizeof sgd_cases / sizeof sgd_cases[0]))

START_TEST(sgd_matches_torch_rule)
{
    const sgd_case *k = &sgd_cases[_i];
    rt_sgd_config c;
    float p[N], g[N], buf[N];
    double pr[N], br[N];
    const float lr = 0.05f;
    int s;
    size_t i;
    c.momentum = k->momentum;
    c.dampening = k->dampening;
    c.weight_decay = k->wd;
    c.nesterov = k->nesterov;
    tseed(11 + (uint64_t)_i);
    fill(p, N, -1, 1);
    for (i = 0; i < N; i++) {
        pr[i] = p[i];
        br[i] = 0;
        buf[i] = 123.0f;   /* step 1 must not read it */
    }
    for (s = 1; s <= STEPS; s++) {
        fill(g, N, -1, 1);
        rt_sgd_update(p, g, k->momentum != 0 ? buf : NULL, N, lr, &c,
                      (uint64_t)s);
        for (i = 0; i < N; i++) {
            double d = (double)g[i] + k->wd * pr[i];
            if (k->momentum != 0) {
                br[i] = s == 1 ? d
                               : k->momentum * br[i] + (1 - k->dampening) * d;
                d = k->nesterov ? d + k->momentum * br[i] : br[i];
            }
            pr[i] -= (double)lr * d;
        }
        expect_close("sgd params", s, p, pr, N, 1e-5);
        if (k->momentum != 0)
            expect_close("sgd momentum buffer", s, buf, br, N, 1e-5);
    }
}
END_TEST

START_TEST(sgd_first_buffer_is_the_gradient)
{
    rt_sgd_config c = {0.9, 0.5, 0.0, 0};
    float p[4] = {1, 2, 3, 4}, g[4] = {0.5f, -1, 2, 0}, buf[4] = {9, 9, 9, 9};
    int i;
    rt_sgd_update(p, g, buf, 4, 0.1f, &c, 1);
    for (i = 0; i < 4; i++) {
        /* no dampening on the first step: torch clones the gradient */
        ck_assert_float_eq(buf[i], g[i]);
        ck_assert_float_eq_tol(p[i], (float)(i + 1) - 0.1f * g[i], 1e-7f);
    }
}
END_TEST

START_TEST(sgd_plain_equals_rt_sgd_bitwise)
{
    rt_sgd_config c = {0.0, 0.0, 0.0, 0};
    float p[N], q[N], g[N];
    tseed(5);
    fill(p, N, -1, 1);
    fill(g, N, -1, 1);
    memcpy(q, p, sizeof p);
    rt_sgd_update(p, g, NULL, N, 0.01f, &c, 7);
    rt_sgd(q, g, N, 0.01f);
    ck_assert(memcmp(p, q, sizeof p) == 0);
}
END_TEST

typedef struct {
    double b1, b2, eps, wd;
    float lr;
} adamw_case;

static const adamw_case adamw_cases[] = {
    {0.9, 0.999, 1e-8, 0.01, 1e-3f},   /* torch's defaults */
    {0.8, 0.99, 1e-6, 0.0, 0.01f},
    {0.5, 0.9, 1e-3, 0.1, 0.05f},
};
#define N_ADAMW ((int)(sizeof adamw_cases / sizeof adamw_cases[0]))

START_TEST(adamw_matches_torch_rule)
{
    const adamw_case *k = &adamw_cases[_i];
    rt_adamw_config c;
    float p[N], g[N], m[N], v[N];
    double pr[N], mr[N], vr[N];
    int s;
    size_t i;
    c.beta1 = k->b1;
    c.beta2 = k->b2;
    c.eps = k->eps;
    c.weight_decay = k->wd;
    tseed(21 + (uint64_t)_i);
    fill(p, N, -1, 1);
    for (i = 0; i < N; i++) {
        pr[i] = p[i];
        mr[i] = vr[i] = 0;
        m[i] = v[i] = 0;
    }
    for (s = 1; s <= STEPS; s++) {
        double bc1 = 1 - pow(k->b1, s), bc2 = 1 - pow(k->b2, s);
        fill(g, N, -1, 1);
        rt_adamw_update(p, g, m, v, N, k->lr, &c, (uint64_t)s);
        for (i = 0; i < N; i++) {
            double gi = g[i];
            pr[i] *= 1 - (double)k->lr * k->wd;
            mr[i] = k->b1 * mr[i] + (1 - k->b1) * gi;
            vr[i] = k->b2 * vr[i] + (1 - k->b2) * gi * gi;
            pr[i] -= (double)k->lr / bc1 * mr[i] /
                     (sqrt(vr[i]) / sqrt(bc2) + k->eps);
        }
        expect_close("adamw params", s, p, pr, N, 1e-5);
        expect_close("adamw exp_avg", s, m, mr, N, 1e-5);
        expect_close("adamw exp_avg_sq", s, v, vr, N, 1e-5);
    }
}
END_TEST

START_TEST(adamw_first_step_moves_by_lr)
{
    /* bias correction: m/(1-b1) = g and sqrt(v/(1-b2)) = |g| at step 1 */
    rt_adamw_config c = {0.9, 0.999, 1e-8, 0.0};
    float p[3] = {0, 1, -1}, g[3] = {0.25f, -3, 1e-2f}, m[3] = {0}, v[3] = {0};
    int i;
    rt_adamw_update(p, g, m, v, 3, 0.1f, &c, 1);
    ck_assert_float_eq_tol(p[0], -0.1f, 1e-6f);
    ck_assert_float_eq_tol(p[1], 1.1f, 1e-6f);
    ck_assert_float_eq_tol(p[2], -1.1f, 1e-6f);
    for (i = 0; i < 3; i++)
        ck_assert(isfinite(m[i]) && isfinite(v[i]));
}
END_TEST

START_TEST(adamw_decay_is_decoupled)
{
    /* a zero gradient leaves m, v at 0: only the decay moves p */
    rt_adamw_config c = {0.9, 0.999, 1e-8, 0.5};
    float p[2] = {2, -4}, g[2] = {0, 0}, m[2] = {0}, v[2] = {0};
    rt_adamw_update(p, g, m, v, 2, 0.1f, &c, 1);
    ck_assert_float_eq_tol(p[0], 2 * 0.95f, 1e-6f);
    ck_assert_float_eq_tol(p[1], -4 * 0.95f, 1e-6f);
}
END_TEST

START_TEST(clip_norm_and_coef)
{
    float g[4] = {3, 0, -4, 0}, norm, coef;
    double sq = rt_grad_norm_sq(g, 2) + rt_grad_norm_sq(g + 2, 2);
    ck_assert(sq == 25.0);
    coef = rt_clip_coef(sq, 1.0f, &norm);
    ck_assert_float_eq(norm, 5.0f);
    ck_assert_float_eq_tol(coef, 1.0f / (5.0f + 1e-6f), 1e-9f);
    rt_scale(g, 4, coef);
    ck_assert_float_eq_tol(g[0], 0.6f, 1e-6f);
    ck_assert_float_eq_tol(g[2], -0.8f, 1e-6f);
    /* under the norm: factor exactly 1 */
    coef = rt_clip_coef(sq, 10.0f, &norm);
    ck_assert(coef == 1.0f);
    ck_assert(rt_grad_norm_sq(g, 0) == 0.0);
}
END_TEST

/* The fused step's dispatch: SGD's buffer at state, AdamW's exp_avg at
 * state and exp_avg_sq `second` floats on (the gap between them is left
 * alone), each bitwise the direct call's. */
START_TEST(optimizer_update_dispatches)
{
    rt_optimizer o;
    float p[N], q[N], g[N], s[3 * N], m[N], v[N], buf[N];
    int k;
    tseed(6);
    fill(p, N, -1, 1);
    memcpy(q, p, sizeof p);
    memset(s, 0, sizeof s);
    memset(m, 0, sizeof m);
    memset(v, 0, sizeof v);
    memset(buf, 0, sizeof buf);
    memset(&o, 0, sizeof o);
    o.kind = RT_OPT_SGD;
    o.lr = 0.05f;
    o.sgd.momentum = 0.9;
    o.sgd.weight_decay = 0.01;
    for (k = 1; k <= 3; k++) {
        fill(g, N, -1, 1);
        o.step = (uint64_t)k;
        rt_optimizer_update(&o, p, g, s, 2 * N, N);
        rt_sgd_update(q, g, buf, N, o.lr, &o.sgd, o.step);
    }
    ck_assert(memcmp(p, q, sizeof p) == 0);
    ck_assert(memcmp(s, buf, sizeof buf) == 0);
    memset(s, 0, sizeof s);
    o.kind = RT_OPT_ADAMW;
    o.adamw.beta1 = 0.9;
    o.adamw.beta2 = 0.999;
    o.adamw.eps = 1e-8;
    o.adamw.weight_decay = 0.01;
    for (k = 1; k <= 3; k++) {
        fill(g, N, -1, 1);
        o.step = (uint64_t)k;
        rt_optimizer_update(&o, p, g, s, 2 * N, N);
        rt_adamw_update(q, g, m, v, N, o.lr, &o.adamw, o.step);
    }
    ck_assert(memcmp(p, q, sizeof p) == 0);
    ck_assert(memcmp(s, m, sizeof m) == 0);
    ck_assert(memcmp(s + 2 * N, v, sizeof v) == 0);
    for (k = N; k < 2 * N; k++)
        ck_assert(s[k] == 0.0f);
}
END_TEST

/* ---- memory, optimizer --------------------------------------------------- */

START_TEST(memory_and_sgd)
{
    float x[5] = {1, 2, 3, 4, 5}, g[5] = {1, -1, 2, -2, 0}, z[5];
    rt_sgd(x, g, 5, 0.5f);
    ck_assert_float_eq(x[0], 0.5f);
    ck_assert_float_eq(x[1], 2.5f);
    ck_assert_float_eq(x[3], 5.0f);
    ck_assert_float_eq(x[4], 5.0f);
    rt_copy(z, x, 5);
    ck_assert(memcmp(z, x, sizeof z) == 0);
    rt_fill(z, 4, 7.0f);
    ck_assert_float_eq(z[3], 7.0f);
    ck_assert_float_eq(z[4], 5.0f); /* past n: untouched */
    rt_zero(z, 4);
    ck_assert_float_eq(z[0], 0.0f);
    ck_assert_float_eq(z[3], 0.0f);
    ck_assert_float_eq(z[4], 5.0f);
}
END_TEST

static Suite *optim_suite(void)
{
    Suite *s = suite_create("remat_rt optim");
    TCase *tc;

    tc = tcase_create("optim");
    tcase_add_loop_test(tc, sgd_matches_torch_rule, 0, N_SGD);
    tcase_add_test(tc, sgd_first_buffer_is_the_gradient);
    tcase_add_test(tc, sgd_plain_equals_rt_sgd_bitwise);
    tcase_add_loop_test(tc, adamw_matches_torch_rule, 0, N_ADAMW);
    tcase_add_test(tc, adamw_first_step_moves_by_lr);
    tcase_add_test(tc, adamw_decay_is_decoupled);
    tcase_add_test(tc, clip_norm_and_coef);
    tcase_add_test(tc, optimizer_update_dispatches);
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_add_test(tc, memory_and_sgd);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(optim_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
