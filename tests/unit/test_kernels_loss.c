/*
 * test_kernels_loss.c: unit tests of the runtime's loss, dropout and
 * attention kernels (runtime/remat_rt.c), with Check.
 *
 * As in test_kernels.c: gradients are checked against central finite
 * differences of the forward kernels, with loss L = sum(dy * y) for a random
 * upstream dy (summed in double); every gradient buffer starts from random
 * values and the check is on (after - before), so accumulation is tested
 * everywhere. Forward values are checked against formulas written here in
 * double, never against the kernels themselves.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- SoftmaxCrossEntropyLoss ---------------------------------------------- */

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

/* ---- suite ---------------------------------------------------------------- */

static Suite *loss_suite(void)
{
    Suite *s = suite_create("remat_rt loss, dropout, attention");
    TCase *tc;

    tc = tcase_create("sce");
    tcase_add_loop_test(tc, sce_forward_and_grad, 0, N_SCES);
    tcase_add_test(tc, sce_by_hand);
    tcase_add_test(tc, sce_all_ignored);
    tcase_add_test(tc, sce_label_out_of_range_is_not_an_index);
    tcase_add_test(tc, sce_large_scores_stay_finite);
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
