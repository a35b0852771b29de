/*
 * test_kernels_loss.c: unit tests of the runtime's loss kernel,
 * SoftmaxCrossEntropyLoss (rt_sce_forward, rt_sce_backward): reductions
 * mean and sum without weights, then class weights and reduction "none",
 * and NegativeLogLikelihoodLoss (rt_nll_forward, rt_nll_backward), with
 * Check.
 *
 * Forward values are checked against ONNX's definition written here in
 * double (log(sum_k exp(s_k)) - s_label per position, weighted by w[label]
 * and divided by the weights present for a weighted mean) and small cases
 * worked by hand, never against the kernels themselves. Gradients are
 * checked against central finite differences of the forward kernel
 * (rt_testutil.h) with L = sum(dloss * loss) for a random upstream dloss,
 * summed in double; every gradient buffer starts from random values and
 * the check is on (after - before), so that accumulation is tested too.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- SoftmaxCrossEntropyLoss --------------------------------------------- */

#define IGN (-100)

typedef struct {
    const char *name;
    int n, c, inner, mean, has_ignore;
    int64_t ignore_index;
    int64_t labels[8];
} sce_spec;

/* Out-of-range labels that are not ignored count towards the mean but add
 * nothing (the header's documented behaviour). */
static const sce_spec sces[] = {
    {"2-D mean", 4, 3, 1, 1, 0, 0, {0, 2, 1, 2}},
    {"2-D sum", 4, 3, 1, 0, 0, 0, {0, 2, 1, 2}},
    {"inner 3 mean", 2, 4, 3, 1, 0, 0, {3, 0, 1, 2, 2, 0}},
    {"inner 3 sum", 2, 4, 3, 0, 0, 0, {3, 0, 1, 2, 2, 0}},
    {"inner 3 mean ignore -100", 2, 4, 3, 1, 1, IGN, {3, IGN, 1, IGN, 2, 0}},
    {"inner 3 sum ignore -100", 2, 4, 3, 0, 1, IGN, {3, IGN, 1, IGN, 2, 0}},
    {"mean ignore class 1", 4, 3, 1, 1, 1, 1, {1, 0, 1, 2}},
    {"mean out of range", 4, 3, 1, 1, 0, 0, {0, 3, -1, 2}},
    {"sum out of range, ignore -100", 2, 3, 2, 0, 1, IGN, {7, IGN, 1, -5}},
    {"mean all ignored", 2, 3, 2, 1, 1, IGN, {IGN, IGN, IGN, IGN}},
    {"one class", 3, 1, 1, 1, 0, 0, {0, 0, 0}},
};
#define N_SCES ((int)(sizeof sces / sizeof sces[0]))

typedef struct {
    const sce_spec *s;
    float scores[32];
    float dloss;
} sce_case;

static float sce_run(const sce_case *t)
{
    const sce_spec *s = t->s;
    float loss = NAN;
    rt_sce_forward(&loss, t->scores, s->labels, NULL, s->n, s->c, s->inner,
                   s->mean, s->has_ignore, s->ignore_index);
    return loss;
}

static double sce_loss(void *v)
{
    sce_case *t = v;
    return (double)t->dloss * sce_run(t);
}

/* The definition in double: log(sum_k exp(s_k)) - s_label per position. */
static double sce_expect(const sce_case *t)
{
    const sce_spec *s = t->s;
    double total = 0;
    int i, d, k, count = 0;
    for (i = 0; i < s->n; i++)
        for (d = 0; d < s->inner; d++) {
            const int64_t label = s->labels[i * s->inner + d];
            double sum = 0;
            if (s->has_ignore && label == s->ignore_index)
                continue;
            count++;
            if (label < 0 || label >= s->c)
                continue;
            for (k = 0; k < s->c; k++)
                sum += exp((double)t->scores[(i * s->c + k) * s->inner + d]);
            total += log(sum) -
                     t->scores[(i * s->c + (int)label) * s->inner + d];
        }
    if (s->mean)
        return count > 0 ? total / count : 0;
    return total;
}

/* _i: the case in sces[]. */
START_TEST(sce_forward_and_grad)
{
    const sce_spec *s = &sces[_i];
    const int ns = s->n * s->c * s->inner;
    sce_case t;
    float ds[32], pre[32] = {0}, diff[32];
    char what[96];
    double want;
    t.s = s;
    tseed(600 + _i);
    fill(t.scores, ns, -3, 3);
    t.dloss = trand(0.5f, 2);
    want = sce_expect(&t);
    ck_assert_msg(fabs(sce_run(&t) - want) <= 1e-5 * (1 + fabs(want)),
                  "%s: loss %.9g, want %.9g", s->name, (double)sce_run(&t),
                  want);

    fill(pre, ns, -1, 1);
    memcpy(ds, pre, sizeof ds);
    rt_sce_backward(ds, &t.dloss, t.scores, s->labels, NULL, s->n, s->c,
                    s->inner, s->mean, s->has_ignore, s->ignore_index);
    added(diff, ds, pre, ns);
    snprintf(what, sizeof what, "sce %s: dscores", s->name);
    expect_grad(what, t.scores, ns, diff, sce_loss, &t);
    /* NULL dscores: nothing to do, nothing to crash */
    rt_sce_backward(NULL, &t.dloss, t.scores, s->labels, NULL, s->n, s->c,
                    s->inner, s->mean, s->has_ignore, s->ignore_index);
}
END_TEST

START_TEST(sce_by_hand)
{
    /* Scores (2, 2): row 0 = (0, 0), label 1: -log(1/2) = ln 2;
     * row 1 = (ln 3, 0), label 0: -log(3/4) = ln(4/3). Sum ln(8/3).
     * Backward, mean, dloss 2: row 0 += 2 (1/2 - 0, 1/2 - 1) / 2,
     * row 1 += 2 (3/4 - 1, 1/4) / 2. */
    const float s[4] = {0, 0, (float)log(3.0), 0};
    const int64_t lab[2] = {1, 0};
    const float dloss = 2;
    float loss, ds[4] = {1, 1, 1, 1};
    const double wsum = log(8.0 / 3), wds[4] = {1.5, 0.5, 0.75, 1.25};
    rt_sce_forward(&loss, s, lab, NULL, 2, 2, 1, 0, 0, 0);
    ck_assert_double_eq_tol(loss, wsum, 1e-6);
    rt_sce_forward(&loss, s, lab, NULL, 2, 2, 1, 1, 0, 0);
    ck_assert_double_eq_tol(loss, wsum / 2, 1e-6);
    rt_sce_backward(ds, &dloss, s, lab, NULL, 2, 2, 1, 1, 0, 0);
    expect_near("dscores", ds, wds, 4, 0, 1e-6);
}
END_TEST

/* All positions ignored: the mean is 0 and no gradient flows. */
START_TEST(sce_all_ignored)
{
    const float s[4] = {1, 2, 3, 4};
    const int64_t lab[2] = {-1, -1};
    const float dloss = 1;
    float loss = NAN, ds[4] = {5, 6, 7, 8};
    const double wds[4] = {5, 6, 7, 8};
    rt_sce_forward(&loss, s, lab, NULL, 2, 2, 1, 1, 1, -1);
    ck_assert_float_eq(loss, 0.0f);
    rt_sce_forward(&loss, s, lab, NULL, 2, 2, 1, 0, 1, -1);
    ck_assert_float_eq(loss, 0.0f);
    rt_sce_backward(ds, &dloss, s, lab, NULL, 2, 2, 1, 1, 1, -1);
    rt_sce_backward(ds, &dloss, s, lab, NULL, 2, 2, 1, 0, 1, -1);
    expect_near("dscores", ds, wds, 4, 0, 0);
}
END_TEST

/* Labels far outside [0, c), not ignored: buffers of exactly the right size
 * on the heap, so that under ASan or valgrind a read past them is caught.
 * Documented values: such a position adds 0 to the loss, counts towards the
 * mean, and gets no gradient. */
START_TEST(sce_label_out_of_range_is_not_an_index)
{
    const int n = 3, c = 2;
    float *s = malloc(sizeof *s * (size_t)(n * c));
    float *ds = malloc(sizeof *ds * (size_t)(n * c));
    int64_t *lab = malloc(sizeof *lab * (size_t)n);
    const float dloss = 1;
    float loss = NAN;
    int i;
    ck_assert(s != NULL && ds != NULL && lab != NULL);
    for (i = 0; i < n * c; i++)
        s[i] = 0.0f, ds[i] = 0.0f;
    lab[0] = INT64_MAX;
    lab[1] = INT64_MIN;
    lab[2] = 1; /* -log(1/2) */
    rt_sce_forward(&loss, s, lab, NULL, n, c, 1, 0, 0, 0);
    ck_assert_double_eq_tol(loss, log(2.0), 1e-6);
    rt_sce_forward(&loss, s, lab, NULL, n, c, 1, 1, 1, 0); /* ignore 0: none */
    ck_assert_double_eq_tol(loss, log(2.0) / 3, 1e-6);
    rt_sce_backward(ds, &dloss, s, lab, NULL, n, c, 1, 0, 0, 0);
    for (i = 0; i < 4; i++)
        ck_assert_float_eq(ds[i], 0.0f);
    ck_assert_float_eq_tol(ds[4], 0.5f, 1e-6f);
    ck_assert_float_eq_tol(ds[5], -0.5f, 1e-6f);
    free(s);
    free(ds);
    free(lab);
}
END_TEST

/* Scores of +-1000 (exp overflows without the max subtracted). */
START_TEST(sce_large_scores_stay_finite)
{
    const float s[6] = {1000, 0, -1000, -1000, 0, 1000};
    const int64_t lab[2] = {0, 0};
    const float dloss = 1;
    float loss, ds[6] = {0};
    int i;
    rt_sce_forward(&loss, s, lab, NULL, 2, 3, 1, 0, 0, 0);
    /* row 0: label is the max, loss ~0; row 1: loss ~ 2000 */
    ck_assert_double_eq_tol(loss, 2000.0, 1e-3);
    rt_sce_backward(ds, &dloss, s, lab, NULL, 2, 3, 1, 0, 0, 0);
    for (i = 0; i < 6; i++)
        ck_assert_msg(isfinite(ds[i]), "ds[%d] = %g", i, (double)ds[i]);
    ck_assert_float_eq_tol(ds[0], 0.0f, 1e-6f);
    ck_assert_float_eq_tol(ds[3], -1.0f, 1e-6f);
    ck_assert_float_eq_tol(ds[5], 1.0f, 1e-6f);
}
END_TEST

/* ---- SoftmaxCrossEntropyLoss: class weights, reduction none -------------- */

#define MAXP 8          /* positions (n * inner) */
#define MAXS 32         /* scores (n * c * inner) */

/* wsce_: these cases' spec and case, as sce_spec and sce_case are the
 * unweighted ones'. */
typedef struct {
    const char *name;
    int n, c, inner, reduction, has_ignore, weighted;
    int64_t ignore_index;
    int64_t labels[MAXP];
} wsce_spec;

static const wsce_spec specs[] = {
    {"2-D weights mean", 4, 3, 1, RT_SCE_MEAN, 0, 1, 0, {0, 2, 1, 2}},
    {"2-D weights sum", 4, 3, 1, RT_SCE_SUM, 0, 1, 0, {0, 2, 1, 2}},
    {"2-D weights none", 4, 3, 1, RT_SCE_NONE, 0, 1, 0, {0, 2, 1, 2}},
    {"2-D none", 4, 3, 1, RT_SCE_NONE, 0, 0, 0, {0, 2, 1, 2}},
    {"inner 3 weights mean ignore", 2, 4, 3, RT_SCE_MEAN, 1, 1, IGN,
     {3, IGN, 1, IGN, 2, 0}},
    {"inner 3 weights sum ignore", 2, 4, 3, RT_SCE_SUM, 1, 1, IGN,
     {3, IGN, 1, IGN, 2, 0}},
    {"inner 3 weights none ignore", 2, 4, 3, RT_SCE_NONE, 1, 1, IGN,
     {3, IGN, 1, IGN, 2, 0}},
    {"inner 3 none ignore", 2, 4, 3, RT_SCE_NONE, 1, 0, IGN,
     {3, IGN, 1, IGN, 2, 0}},
    {"weights mean ignore class 1", 4, 3, 1, RT_SCE_MEAN, 1, 1, 1,
     {1, 0, 1, 2}},
    {"inner 2 weights none ignore class 0", 2, 3, 2, RT_SCE_NONE, 1, 1, 0,
     {0, 2, 1, 0}},
};
#define N_SPECS ((int)(sizeof specs / sizeof specs[0]))

typedef struct {
    const wsce_spec *s;
    float scores[MAXS];
    float weights[8];
    float dloss[MAXP];
} wsce_case;

static int positions(const wsce_spec *s)
{
    return s->n * s->inner;
}

static const float *weights_of(const wsce_case *t)
{
    return t->s->weighted ? t->weights : NULL;
}

/* The kernel's output: one number, or one per position for none. */
static void run(const wsce_case *t, float *loss)
{
    const wsce_spec *s = t->s;
    rt_sce_forward(loss, t->scores, s->labels, weights_of(t), s->n, s->c,
                   s->inner, s->reduction, s->has_ignore, s->ignore_index);
}

static double weighted_loss(void *v)
{
    const wsce_case *t = v;
    float loss[MAXP];
    int p, np = t->s->reduction == RT_SCE_NONE ? positions(t->s) : 1;
    double sum = 0;
    run(t, loss);
    for (p = 0; p < np; p++)
        sum += (double)t->dloss[p] * loss[p];
    return sum;
}

/* ONNX's definition in double: l_p = -w[y] log softmax(x_p)[y], 0 where y
 * is ignored; none: l; sum: sum l; mean: sum l / sum of w[y] over the
 * labels not ignored. Fills want[] (one entry unless none). */
static void expect(const wsce_case *t, double *want)
{
    const wsce_spec *s = t->s;
    double total = 0, wsum = 0;
    int i, d, k;
    for (i = 0; i < s->n; i++)
        for (d = 0; d < s->inner; d++) {
            const int p = i * s->inner + d;
            const int64_t y = s->labels[p];
            double sum = 0, w, l;
            if (s->has_ignore && y == s->ignore_index) {
                want[p] = 0;
                continue;
            }
            w = s->weighted ? t->weights[y] : 1.0;
            for (k = 0; k < s->c; k++)
                sum += exp((double)t->scores[(i * s->c + k) * s->inner + d]);
            l = w * (log(sum) - t->scores[(i * s->c + (int)y) * s->inner + d]);
            if (s->reduction == RT_SCE_NONE)
                want[p] = l;
            total += l;
            wsum += w;
        }
    if (s->reduction == RT_SCE_SUM)
        want[0] = total;
    if (s->reduction == RT_SCE_MEAN)
        want[0] = total / wsum;
}

/* _i: the case in specs[]. */
START_TEST(sce_weights_none_forward_and_grad)
{
    const wsce_spec *s = &specs[_i];
    const int ns = s->n * s->c * s->inner;
    const int np = s->reduction == RT_SCE_NONE ? positions(s) : 1;
    wsce_case t;
    float loss[MAXP], ds[MAXS], pre[MAXS] = {0}, diff[MAXS], wcopy[8];
    double want[MAXP];
    char what[96];
    int p;
    t.s = s;
    tseed(900 + _i);
    fill(t.scores, ns, -3, 3);
    fill(t.weights, s->c, 0.25f, 3);
    fill(t.dloss, MAXP, -2, 2);
    memcpy(wcopy, t.weights, sizeof wcopy);
    for (p = 0; p < MAXP; p++)
        loss[p] = NAN;
    run(&t, loss);
    expect(&t, want);
    for (p = 0; p < np; p++)
        ck_assert_msg(fabs(loss[p] - want[p]) <= 1e-5 * (1 + fabs(want[p])),
                      "%s: loss[%d] %.9g, want %.9g", s->name, p,
                      (double)loss[p], want[p]);
    /* none writes its positions only; the others write loss[0] only */
    for (p = np; p < MAXP; p++)
        ck_assert_msg(isnan(loss[p]), "%s: loss[%d] written", s->name, p);

    fill(pre, ns, -1, 1);
    memcpy(ds, pre, sizeof ds);
    rt_sce_backward(ds, t.dloss, t.scores, s->labels, weights_of(&t), s->n,
                    s->c, s->inner, s->reduction, s->has_ignore,
                    s->ignore_index);
    added(diff, ds, pre, ns);
    snprintf(what, sizeof what, "sce %s: dscores", s->name);
    expect_grad(what, t.scores, ns, diff, weighted_loss, &t);
    /* the weights are read, never written (they get no gradient) */
    ck_assert(memcmp(wcopy, t.weights, sizeof wcopy) == 0);
    /* NULL dscores: nothing to do, nothing to crash */
    rt_sce_backward(NULL, t.dloss, t.scores, s->labels, weights_of(&t), s->n,
                    s->c, s->inner, s->reduction, s->has_ignore,
                    s->ignore_index);
}
END_TEST

START_TEST(sce_weights_by_hand)
{
    /* Scores (2, 2): row 0 = (0, 0), label 1: -log(1/2) = ln 2, weight
     * w[1] = 1/2; row 1 = (ln 3, 0), label 0: -log(3/4) = ln(4/3), weight
     * w[0] = 2. none: (ln 2 / 2, 2 ln(4/3)); sum: their sum; mean: the sum
     * over 1/2 + 2 = 5/2.
     * Backward, mean, dloss 2: g = 2 / (5/2) = 0.8; row 0 += 0.8 * 1/2 *
     * (1/2, 1/2 - 1) = (0.2, -0.2); row 1 += 0.8 * 2 * (3/4 - 1, 1/4) =
     * (-0.4, 0.4). Backward, none, dloss (3, -1): row 0 += 3 * 1/2 * (1/2,
     * -1/2) = (0.75, -0.75); row 1 += -1 * 2 * (-1/4, 1/4) = (0.5, -0.5). */
    const float s[4] = {0, 0, (float)log(3.0), 0};
    const int64_t lab[2] = {1, 0};
    const float w[2] = {2, 0.5f};
    const float dmean = 2, dnone[2] = {3, -1};
    const double l0 = log(2.0) / 2, l1 = 2 * log(4.0 / 3);
    const double wmean[4] = {1.2, 0.8, 0.6, 1.4};
    const double wnone[4] = {1.75, 0.25, 1.5, 0.5};
    float loss[2], ds[4] = {1, 1, 1, 1};
    rt_sce_forward(loss, s, lab, w, 2, 2, 1, RT_SCE_NONE, 0, 0);
    ck_assert_double_eq_tol(loss[0], l0, 1e-6);
    ck_assert_double_eq_tol(loss[1], l1, 1e-6);
    rt_sce_forward(loss, s, lab, w, 2, 2, 1, RT_SCE_SUM, 0, 0);
    ck_assert_double_eq_tol(loss[0], l0 + l1, 1e-6);
    rt_sce_forward(loss, s, lab, w, 2, 2, 1, RT_SCE_MEAN, 0, 0);
    ck_assert_double_eq_tol(loss[0], (l0 + l1) / 2.5, 1e-6);
    rt_sce_backward(ds, &dmean, s, lab, w, 2, 2, 1, RT_SCE_MEAN, 0, 0);
    expect_near("dscores mean", ds, wmean, 4, 0, 1e-6);
    ds[0] = ds[1] = ds[2] = ds[3] = 1;
    rt_sce_backward(ds, dnone, s, lab, w, 2, 2, 1, RT_SCE_NONE, 0, 0);
    expect_near("dscores none", ds, wnone, 4, 0, 1e-6);
}
END_TEST

/* Weights of 1 are no weights, bit for bit; none summed in order is sum. */
START_TEST(sce_unit_weights_and_none_agree_with_the_plain_loss)
{
    enum { N = 3, C = 4, INNER = 2, P = N * INNER };
    const int64_t lab[P] = {0, 3, IGN, 1, 2, 2};
    const float ones[C] = {1, 1, 1, 1};
    float s[N * C * INNER], plain, weighted, none[P], sum = 0;
    float d1[N * C * INNER] = {0}, d2[N * C * INNER] = {0};
    const float dl = 1.5f;
    int r, p;
    tseed(77);
    fill(s, N * C * INNER, -2, 2);
    for (r = RT_SCE_SUM; r <= RT_SCE_MEAN; r++) {
        rt_sce_forward(&plain, s, lab, NULL, N, C, INNER, r, 1, IGN);
        rt_sce_forward(&weighted, s, lab, ones, N, C, INNER, r, 1, IGN);
        ck_assert_msg(plain == weighted, "reduction %d: %.9g vs %.9g", r,
                      (double)plain, (double)weighted);
        rt_sce_backward(d1, &dl, s, lab, NULL, N, C, INNER, r, 1, IGN);
        rt_sce_backward(d2, &dl, s, lab, ones, N, C, INNER, r, 1, IGN);
        ck_assert(memcmp(d1, d2, sizeof d1) == 0);
    }
    rt_sce_forward(none, s, lab, ones, N, C, INNER, RT_SCE_NONE, 1, IGN);
    ck_assert_float_eq(none[2], 0.0f);      /* ignored: exactly 0 */
    for (p = 0; p < P; p++)
        sum += none[p];
    rt_sce_forward(&plain, s, lab, NULL, N, C, INNER, RT_SCE_SUM, 1, IGN);
    ck_assert_float_eq(sum, plain);
}
END_TEST

/* The mean divides by the weight of the labels present, not their count;
 * a label whose class weighs 0 adds nothing to either, and when nothing
 * weighs anything the loss is 0 and the backward adds nothing. */
START_TEST(sce_mean_divides_by_the_weights_present)
{
    const float s[6] = {0.5f, -1, 2, 1, 0, -0.5f};
    const int64_t lab[2] = {2, 0};
    const float w[3] = {0, 7, 4};
    const float dl = 1;
    float loss, only, ds[6] = {0}, zero[6] = {0};
    const int64_t lab1[1] = {2};
    const float wz[3] = {0, 7, 0};
    /* row 1's class 0 weighs 0: the mean is row 0's loss alone */
    rt_sce_forward(&loss, s, lab, w, 2, 3, 1, RT_SCE_MEAN, 0, 0);
    rt_sce_forward(&only, s, lab1, w, 1, 3, 1, RT_SCE_MEAN, 0, 0);
    ck_assert_float_eq_tol(loss, only, 1e-6f);
    ck_assert_double_eq_tol(only, log(exp(0.5) + exp(-1.0) + exp(2.0)) - 2,
                            1e-6);
    /* both labels' classes weigh 0: 0, not 0/0 */
    rt_sce_forward(&loss, s, lab, wz, 2, 3, 1, RT_SCE_MEAN, 0, 0);
    ck_assert_float_eq(loss, 0.0f);
    rt_sce_backward(ds, &dl, s, lab, wz, 2, 3, 1, RT_SCE_MEAN, 0, 0);
    ck_assert(memcmp(ds, zero, sizeof ds) == 0);
}
END_TEST

/* With weights a label outside [0, c) that is not ignored has no weight to
 * read: it adds 0 to the loss and 0 to the mean's denominator, and no
 * gradient; without weights it still counts 1 (test_kernels_loss.c). */
START_TEST(sce_weights_label_out_of_range_weighs_nothing)
{
    const float s[6] = {0, 1, 2, 2, 1, 0};
    const int64_t lab[2] = {1, 3};
    const int64_t lab1[1] = {1};
    const float w[3] = {1, 2, 3};
    const float dl[2] = {1, 1};
    float loss[2], one, ds[6] = {0};
    rt_sce_forward(loss, s, lab, w, 2, 3, 1, RT_SCE_MEAN, 0, 0);
    rt_sce_forward(&one, s, lab1, w, 1, 3, 1, RT_SCE_MEAN, 0, 0);
    ck_assert_float_eq(loss[0], one);
    rt_sce_forward(loss, s, lab, w, 2, 3, 1, RT_SCE_NONE, 0, 0);
    ck_assert_float_eq(loss[1], 0.0f);
    rt_sce_backward(ds, dl, s, lab, w, 2, 3, 1, RT_SCE_NONE, 0, 0);
    ck_assert_float_eq(ds[3], 0.0f);
    ck_assert_float_eq(ds[4], 0.0f);
    ck_assert_float_eq(ds[5], 0.0f);
}
END_TEST

/* Large scores: log-sum-exp keeps the per-sample losses finite. */
START_TEST(sce_none_large_scores_stay_finite)
{
    const float s[6] = {1000, 0, -1000, -1000, 0, 1000};
    const int64_t lab[2] = {0, 0};
    const float w[3] = {0.5f, 1, 1};
    const float dl[2] = {1, 1};
    float loss[2], ds[6] = {0};
    int i;
    rt_sce_forward(loss, s, lab, w, 2, 3, 1, RT_SCE_NONE, 0, 0);
    ck_assert_float_eq_tol(loss[0], 0.0f, 1e-6f);
    ck_assert_float_eq_tol(loss[1], 1000.0f, 1e-2f);    /* 0.5 * 2000 */
    rt_sce_backward(ds, dl, s, lab, w, 2, 3, 1, RT_SCE_NONE, 0, 0);
    for (i = 0; i < 6; i++)
        ck_assert_msg(isfinite(ds[i]), "ds[%d] = %g", i, (double)ds[i]);
    ck_assert_float_eq_tol(ds[3], -0.5f, 1e-6f);
    ck_assert_float_eq_tol(ds[5], 0.5f, 1e-6f);
}
END_TEST

/* ---- NegativeLogLikelihoodLoss ------------------------------------------- */

/* Cases of rt_nll_*: every reduction, with and without weights, 2-D and
 * inner positions, the ignore index -100 and a class as the ignore index. */
typedef struct {
    const char *name;
    int n, c, inner, reduction, weighted, has_ignore;
    int64_t ignore_index;
    int64_t labels[8];
} nll_spec;

static const nll_spec nlls[] = {
    {"2-D mean", 4, 3, 1, RT_SCE_MEAN, 0, 0, 0, {0, 2, 1, 2}},
    {"2-D sum", 4, 3, 1, RT_SCE_SUM, 0, 0, 0, {0, 2, 1, 2}},
    {"2-D none", 4, 3, 1, RT_SCE_NONE, 0, 0, 0, {0, 2, 1, 2}},
    {"2-D weighted mean ignore -100", 4, 3, 1, RT_SCE_MEAN, 1, 1, IGN,
     {0, IGN, 1, 2}},
    {"inner 3 weighted mean", 2, 4, 3, RT_SCE_MEAN, 1, 0, 0,
     {3, 0, 1, 2, 2, 0}},
    {"inner 3 weighted sum ignore -100", 2, 4, 3, RT_SCE_SUM, 1, 1, IGN,
     {3, IGN, 1, IGN, 2, 0}},
    {"inner 3 weighted none ignore class 1", 2, 4, 3, RT_SCE_NONE, 1, 1, 1,
     {3, 1, 1, 0, 2, 0}},
    {"inner 4 mean ignore class 0", 2, 2, 4, RT_SCE_MEAN, 0, 1, 0,
     {0, 1, 1, 0, 1, 1, 0, 1}},
};
#define N_NLLS ((int)(sizeof nlls / sizeof nlls[0]))

typedef struct {
    const nll_spec *s;
    float input[32], weights[8], dloss[8];
} nll_case;

static int nll_positions(const nll_spec *s) { return s->n * s->inner; }

/* L = sum_p dloss[p] loss[p] (none) or dloss[0] loss[0]. */
static double nll_loss(void *v)
{
    const nll_case *t = v;
    const nll_spec *s = t->s;
    float loss[8];
    double l = 0;
    int p;
    rt_nll_forward(loss, t->input, s->labels, s->weighted ? t->weights : NULL,
                   s->n, s->c, s->inner, s->reduction, s->has_ignore,
                   s->ignore_index);
    if (s->reduction != RT_SCE_NONE)
        return (double)t->dloss[0] * loss[0];
    for (p = 0; p < nll_positions(s); p++)
        l += (double)t->dloss[p] * loss[p];
    return l;
}

/* ONNX's definition in double: l_p = -w[y] x[i, y, d]; the mean divides
 * by the weights of the labels not ignored. */
static void nll_expect(const nll_case *t, double *want)
{
    const nll_spec *s = t->s;
    double total = 0, wsum = 0;
    int i, d;
    for (i = 0; i < s->n; i++)
        for (d = 0; d < s->inner; d++) {
            const int p = i * s->inner + d;
            const int64_t y = s->labels[p];
            double w, l;
            want[p] = 0;
            if (s->has_ignore && y == s->ignore_index)
                continue;
            w = s->weighted ? t->weights[y] : 1.0;
            l = -w * t->input[(i * s->c + (int)y) * s->inner + d];
            want[p] = l;
            total += l;
            wsum += w;
        }
    if (s->reduction == RT_SCE_SUM)
        want[0] = total;
    if (s->reduction == RT_SCE_MEAN)
        want[0] = total / wsum;
}

/* _i: the case in nlls[]. */
START_TEST(nll_forward_and_grad)
{
    const nll_spec *s = &nlls[_i];
    const int ns = s->n * s->c * s->inner;
    const int np = s->reduction == RT_SCE_NONE ? nll_positions(s) : 1;
    nll_case t;
    float loss[8], di[32], pre[32] = {0}, diff[32], wcopy[8];
    double want[8];
    char what[96];
    int p;
    t.s = s;
    tseed(1200 + _i);
    fill(t.input, ns, -4, 0);
    fill(t.weights, s->c, 0.25f, 3);
    fill(t.dloss, 8, 0.5f, 2);
    memcpy(wcopy, t.weights, sizeof wcopy);
    nll_expect(&t, want);
    rt_nll_forward(loss, t.input, s->labels, s->weighted ? t.weights : NULL,
                   s->n, s->c, s->inner, s->reduction, s->has_ignore,
                   s->ignore_index);
    for (p = 0; p < np; p++)
        ck_assert_msg(fabs(loss[p] - want[p]) <= 1e-5 * (1 + fabs(want[p])),
                      "nll %s: loss[%d] %.9g, want %.9g", s->name, p,
                      (double)loss[p], want[p]);

    fill(pre, ns, -1, 1);
    memcpy(di, pre, sizeof di);
    rt_nll_backward(di, t.dloss, s->labels, s->weighted ? t.weights : NULL,
                    s->n, s->c, s->inner, s->reduction, s->has_ignore,
                    s->ignore_index);
    added(diff, di, pre, ns);
    snprintf(what, sizeof what, "nll %s: dinput", s->name);
    expect_grad(what, t.input, ns, diff, nll_loss, &t);
    ck_assert_msg(memcmp(wcopy, t.weights, sizeof wcopy) == 0,
                  "nll %s: the weights changed", s->name);
    /* NULL dinput: nothing to do, nothing to crash */
    rt_nll_backward(NULL, t.dloss, s->labels, NULL, s->n, s->c, s->inner,
                    s->reduction, s->has_ignore, s->ignore_index);
}
END_TEST

START_TEST(nll_by_hand)
{
    /* log-probabilities (3, 2), labels 1, 0, -100 (ignored), weights
     * (2, 0.5): losses 0.5 * 0.25, 2 * 1.5, 0; mean over weights 2.5:
     * 3.125 / 2.5 = 1.25. Backward, dloss 2: -2 * w / 2.5 at each label. */
    const float x[6] = {-1, -0.25f, -1.5f, -3, -7, -9};
    const int64_t lab[3] = {1, 0, IGN};
    const float w[2] = {2, 0.5f}, dloss = 2;
    float loss = NAN, dx[6] = {0};
    rt_nll_forward(&loss, x, lab, w, 3, 2, 1, RT_SCE_MEAN, 1, IGN);
    ck_assert_float_eq_tol(loss, 1.25f, 1e-6f);
    rt_nll_backward(dx, &dloss, lab, w, 3, 2, 1, RT_SCE_MEAN, 1, IGN);
    ck_assert_float_eq_tol(dx[1], -0.4f, 1e-6f);
    ck_assert_float_eq_tol(dx[2], -1.6f, 1e-6f);
    ck_assert_float_eq(dx[0], 0.0f);
    ck_assert_float_eq(dx[3], 0.0f);
    ck_assert_float_eq(dx[4], 0.0f);
    ck_assert_float_eq(dx[5], 0.0f);
    /* every label ignored: the mean is 0 and the backward adds nothing */
    {
        const int64_t all[3] = {IGN, IGN, IGN};
        rt_nll_forward(&loss, x, all, w, 3, 2, 1, RT_SCE_MEAN, 1, IGN);
        ck_assert_float_eq(loss, 0.0f);
        rt_nll_backward(dx, &dloss, all, w, 3, 2, 1, RT_SCE_MEAN, 1, IGN);
        ck_assert_float_eq(dx[0], 0.0f);
    }
}
END_TEST

/* The mean of 100,000 equal losses is that loss: summed in double, no
 * drift with the number of positions. */
START_TEST(nll_long_mean_does_not_drift)
{
    enum { P = 100000 };
    static float x[2 * P];
    static int64_t lab[P];
    float loss = NAN;
    int p;
    for (p = 0; p < P; p++) {
        x[2 * p] = -0.1f;
        x[2 * p + 1] = -5;
        lab[p] = 0;
    }
    rt_nll_forward(&loss, x, lab, NULL, P, 2, 1, RT_SCE_MEAN, 0, 0);
    ck_assert_float_eq(loss, 0.1f);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

/* ---- a confident model (issue 25) ---------------------------------------- */

/* 64 rows of 10 classes, the label's score 30 and the others in [22, 26]:
 * the loss is log(1 + d) ~ d ~ 1e-2, and the label's gradient is q - 1 ~ -d.
 * Formed as m + log(sum) and then minus the score, log(sum)'s low bits go
 * with ulp(30) = 1.9e-6 (losses and gradients off by up to 9.5e-7, as the
 * old kernel was); as torch's (x - m) - log(sum), every loss and gradient
 * is within 2e-7 of float64. */
START_TEST(sce_confident_rows_match_double)
{
    enum { N = 64, C = 10 };
    float scores[N * C], loss[N], dscores[N * C], dloss[N];
    int64_t labels[N];
    double worst_loss = 0, worst_grad = 0;
    int i, k;
    tseed(25);
    for (i = 0; i < N; i++) {
        labels[i] = i % C;
        dloss[i] = 1.0f;
        for (k = 0; k < C; k++)
            scores[i * C + k] = k == labels[i] ? 30.0f : trand(22.0f, 26.0f);
    }
    memset(dscores, 0, sizeof dscores);
    rt_sce_forward(loss, scores, labels, NULL, N, C, 1, RT_SCE_NONE, 0, 0);
    rt_sce_backward(dscores, dloss, scores, labels, NULL, N, C, 1,
                    RT_SCE_NONE, 0, 0);
    for (i = 0; i < N; i++) {
        const float *x = scores + i * C;
        double sum = 0, want;
        for (k = 0; k < C; k++)
            sum += exp((double)x[k] - 30.0);
        want = log(sum) - ((double)x[labels[i]] - 30.0);
        if (fabs(loss[i] - want) > worst_loss)
            worst_loss = fabs(loss[i] - want);
        for (k = 0; k < C; k++) {
            const double g = exp((double)x[k] - 30.0) / sum -
                             (k == labels[i] ? 1.0 : 0.0);
            if (fabs(dscores[i * C + k] - g) > worst_grad)
                worst_grad = fabs(dscores[i * C + k] - g);
        }
    }
    ck_assert_msg(worst_loss <= 2e-7, "loss off by %.3g", worst_loss);
    ck_assert_msg(worst_grad <= 2e-7, "gradient off by %.3g", worst_grad);
}
END_TEST

/* The mean over 2^18 positions of losses ~0.1 to 2.4 (two classes): the
 * sum of the losses is an rt_sum, so it stays within a few ulps of float64
 * where a float loop drifts by ~1e-4 relative. */
START_TEST(sce_mean_over_many_positions_does_not_drift)
{
    const int n = 1 << 18, c = 2;
    float *scores = malloc((size_t)n * c * sizeof *scores), loss;
    int64_t *labels = malloc((size_t)n * sizeof *labels);
    double want = 0;
    int i;
    ck_assert_ptr_nonnull(scores);
    ck_assert_ptr_nonnull(labels);
    tseed(7);
    for (i = 0; i < n; i++) {
        const double a = trand(-1.0f, 1.0f);
        scores[2 * i] = (float)a;
        scores[2 * i + 1] = 0.0f;
        labels[i] = i % 2;
        /* -log softmax of the label, two classes */
        want += labels[i] == 0 ? log1p(exp(-(double)scores[2 * i]))
                               : log1p(exp((double)scores[2 * i]));
    }
    want /= n;
    rt_sce_forward(&loss, scores, labels, NULL, n, c, 1, RT_SCE_MEAN, 0, 0);
    ck_assert_msg(fabs(loss - want) <= 1e-6 * want, "mean loss %.9g, double %.12g",
                  loss, want);
    free(scores);
    free(labels);
}
END_TEST

static Suite *loss_suite(void)
{
    Suite *s = suite_create("remat_rt loss");
    TCase *tc;

    tc = tcase_create("sce");
    tcase_add_loop_test(tc, sce_forward_and_grad, 0, N_SCES);
    tcase_add_test(tc, sce_by_hand);
    tcase_add_test(tc, sce_all_ignored);
    tcase_add_test(tc, sce_label_out_of_range_is_not_an_index);
    tcase_add_test(tc, sce_large_scores_stay_finite);
    suite_add_tcase(s, tc);

    tc = tcase_create("sce_weights_none");
    tcase_add_loop_test(tc, sce_weights_none_forward_and_grad, 0, N_SPECS);
    tcase_add_test(tc, sce_weights_by_hand);
    tcase_add_test(tc, sce_unit_weights_and_none_agree_with_the_plain_loss);
    tcase_add_test(tc, sce_mean_divides_by_the_weights_present);
    tcase_add_test(tc, sce_weights_label_out_of_range_weighs_nothing);
    tcase_add_test(tc, sce_none_large_scores_stay_finite);
    suite_add_tcase(s, tc);

    tc = tcase_create("nll");
    tcase_add_loop_test(tc, nll_forward_and_grad, 0, N_NLLS);
    tcase_add_test(tc, nll_by_hand);
    tcase_add_test(tc, nll_long_mean_does_not_drift);
    suite_add_tcase(s, tc);

    tc = tcase_create("sums");
    tcase_add_test(tc, sce_confident_rows_match_double);
    tcase_add_test(tc, sce_mean_over_many_positions_does_not_drift);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(loss_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
