/*
 * loss.c: SoftmaxCrossEntropyLoss (rt_sce_*), with ONNX's class weights,
 * ignore_index and reductions. Positions split over the threads; the
 * reduced loss is added up in position order, as one thread would.
 */
#include "rt_impl.h"

/* ---- loss, dropout, attention --------------------------------------------- */

/* log through double, rounded once to float. glibc's logf and newlib's (a
 * Cortex-M4's, fdlibm's) differ in the last bit on some arguments (the
 * MLPerf Tiny keyword spotter's loss did at its second step:
 * tests/e2e/test_tiny.sh); both libraries' double log is within an ulp of
 * double, so their results round to the same float unless the exact value
 * lies within a double ulp of a float rounding boundary, about 1 argument
 * in 2^28. One per position; the exps, one per class, are rt_exp_v's
 * (float operations alone, the same bits everywhere, and a loop of them
 * vectorizes). The loss is then the same bits on the host and on the
 * device (docs/firmware.md). */
static float log_f(float x)
{
    return (float)log((double)x);
}

/* The log-sum-exp of c >= 1 values x[0], x[stride], ..., as its two
 * parts: the max *m, taken out first so that no exp overflows and the
 * largest term is exactly 1, and the returned log(sum exp(x - m)) >= 0.
 * Callers form log-softmax as (x - m) - log(sum), as torch does: adding m
 * back first (lse = m + log(sum)) and then subtracting x would round away
 * log(sum)'s low bits, which are all there is when the model is confident
 * (log(sum) tiny next to m). The sum is an rt_sum, whole blocks of
 * classes through rt_sum_block. */
static float log_sum_exp(const float *x, int c, int stride, float *m)
{
    float t[RT_SUM_BLOCK], mx = x[0];
    rt_sum sum;
    int k, l;
    for (k = 1; k < c; k++)
        if (x[(size_t)k * stride] > mx)
            mx = x[(size_t)k * stride];
    rt_sum_init(&sum);
    for (k = 0; c - k >= RT_SUM_BLOCK; k += RT_SUM_BLOCK) {
        for (l = 0; l < RT_SUM_BLOCK; l++)
            t[l] = rt_exp_v(x[(size_t)(k + l) * stride] - mx);
        rt_sum_fold(&sum, rt_sum_block(t));
    }
    for (; k < c; k++)
        sum.part += rt_exp_v(x[(size_t)k * stride] - mx);
    *m = mx;
    return log_f(rt_sum_value(&sum));
}

/* drow[k] += gw * softmax_k over classes [k0, k1), none the label:
 * softmax_k = exp((s_k - m) - log_sum), the exponent <= 0. */
static void sce_back_classes(float *drow, const float *row, size_t inner,
                             int k0, int k1, float m, float log_sum, float gw)
{
    int k;
    for (k = k0; k < k1; k++)
        drow[(size_t)k * inner] +=
            gw * rt_exp_v((row[(size_t)k * inner] - m) - log_sum);
}

/* Whether a label selects a class: not ignored and inside [0, c). */
static int sce_takes_part(int64_t label, int c, int has_ignore,
                          int64_t ignore_index)
{
    return !(has_ignore && label == ignore_index) && label >= 0 && label < c;
}

/* w_p of the header: what a position weighs in the mean. */
static float sce_weight(int64_t label, const float *weights, int c,
                        int has_ignore, int64_t ignore_index)
{
    if (has_ignore && label == ignore_index)
        return 0.0f;
    if (weights == NULL)
        return 1.0f;
    return label >= 0 && label < c ? weights[label] : 0.0f;
}

/* The mean's denominator: the sum of w_p over every position. */
static float sce_total_weight(const int64_t *labels, const float *weights,
                              size_t positions, int c, int has_ignore,
                              int64_t ignore_index)
{
    size_t p;
    rt_sum total;
    rt_sum_init(&total);
    for (p = 0; p < positions; p++)
        rt_sum_add(&total, sce_weight(labels[p], weights, c, has_ignore,
                                      ignore_index));
    return rt_sum_value(&total);
}

/* The loss's operands. Positions are independent; the forward's sum over
 * them is not split: blocks of RT_SCE_BLOCK positions compute their losses
 * on the threads into `part`, then one thread adds them in position order,
 * as a single loop would. */
#define RT_SCE_BLOCK 256
typedef struct {
    float *out;        /* loss per position, or dscores */
    const float *scores, *weights, *dloss;
    const int64_t *labels;
    int c, inner, has_ignore, reduction;
    int64_t ignore_index;
    float g;           /* the backward's dloss / total weight */
    size_t p0;         /* the forward's block */
    float part[RT_SCE_BLOCK];
} sce_job;

/* Position p = (i, d) reads scores[(i c + k) inner + d] for class k. */
static float sce_loss_at(const sce_job *s, size_t p)
{
    const size_t i = p / (size_t)s->inner, d = p % (size_t)s->inner;
    const int64_t label = s->labels[p];
    const float *row = s->scores + i * (size_t)s->c * s->inner + d;
    float m, log_sum;
    if (!sce_takes_part(label, s->c, s->has_ignore, s->ignore_index))
        return 0.0f;
    log_sum = log_sum_exp(row, s->c, s->inner, &m);
    /* -log_softmax(x)_label = -((x_label - m) - log_sum) */
    return sce_weight(label, s->weights, s->c, s->has_ignore,
                      s->ignore_index) *
           -((row[(size_t)label * s->inner] - m) - log_sum);
}

static void sce_loss_part(void *ctx, size_t lo, size_t hi)
{
    sce_job *s = ctx;
    size_t p;
    for (p = lo; p < hi; p++) {
        if (s->reduction == RT_SCE_NONE)
            s->out[p] = sce_loss_at(s, p);
        else
            s->part[p] = sce_loss_at(s, s->p0 + p);
    }
}

/* The rt_sum of every position's loss, in position order. */
static float sce_sum(sce_job *s, size_t positions)
{
    const size_t work = positions * (size_t)s->c;
    rt_sum total;
    size_t p, k, nb;
    rt_sum_init(&total);
    if (work < RT_PAR_COSTLY || rt_threads() == 1) {
        for (p = 0; p < positions; p++)
            rt_sum_add(&total, sce_loss_at(s, p));
        return rt_sum_value(&total);
    }
    for (p = 0; p < positions; p += RT_SCE_BLOCK) {
        nb = positions - p < RT_SCE_BLOCK ? positions - p : RT_SCE_BLOCK;
        s->p0 = p;
        rt_parallel_for(nb, 1, 0, 0, sce_loss_part, s);
        for (k = 0; k < nb; k++)
            rt_sum_add(&total, s->part[k]);
    }
    return rt_sum_value(&total);
}

static void sce_setup(sce_job *s, const float *scores, const int64_t *labels,
                      const float *weights, int c, int inner, int reduction,
                      int has_ignore, int64_t ignore_index)
{
    s->scores = scores;
    s->labels = labels;
    s->weights = weights;
    s->c = c;
    s->inner = inner;
    s->reduction = reduction;
    s->has_ignore = has_ignore;
    s->ignore_index = ignore_index;
}

void rt_sce_forward(float *loss, const float *scores, const int64_t *labels,
                    const float *weights, int n, int c, int inner,
                    int reduction, int has_ignore, int64_t ignore_index)
{
    const size_t positions = (size_t)n * inner;
    sce_job s;
    float total;
    if (n <= 0 || inner <= 0) {
        if (reduction != RT_SCE_NONE)
            loss[0] = 0.0f;
        return;
    }
    sce_setup(&s, scores, labels, weights, c, inner, reduction, has_ignore,
              ignore_index);
    s.out = loss;
    if (reduction == RT_SCE_NONE) {
        rt_parallel_for(positions, 1, positions * (size_t)c, RT_PAR_COSTLY,
                        sce_loss_part, &s);
        return;
    }
    total = sce_sum(&s, positions);
    if (reduction == RT_SCE_MEAN) {
        const float w = sce_total_weight(labels, weights, positions, c,
                                         has_ignore, ignore_index);
        total = w != 0.0f ? total / w : 0.0f;
    }
    loss[0] = total;
}

/* Positions [lo, hi): d/ds_k of w (lse(s) - s_label) is
 * w (softmax(s)_k - [k == label]). */
static void sce_back_part(void *ctx, size_t lo, size_t hi)
{
    const sce_job *s = ctx;
    const int c = s->c;
    const size_t inner = (size_t)s->inner;
    size_t p;
    int k;
    for (p = lo; p < hi; p++) {
        const int64_t label = s->labels[p];
        const size_t base = p / inner * (size_t)c * inner + p % inner;
        const float *row = s->scores + base;
        float *drow = s->out + base;
        float m, log_sum, gw;
        if (!sce_takes_part(label, c, s->has_ignore, s->ignore_index))
            continue;
        gw = (s->reduction == RT_SCE_NONE ? s->dloss[p] : s->g) *
             sce_weight(label, s->weights, c, s->has_ignore, s->ignore_index);
        log_sum = log_sum_exp(row, c, s->inner, &m);
        /* the label's term apart, so the loops over the others have no
         * branch and vectorize */
        sce_back_classes(drow, row, inner, 0, (int)label, m, log_sum, gw);
        sce_back_classes(drow, row, inner, (int)label + 1, c, m, log_sum, gw);
        k = (int)label;
        drow[(size_t)k * inner] +=
            gw * (rt_exp_v((row[(size_t)k * inner] - m) - log_sum) - 1.0f);
    }
}

void rt_sce_backward(float *dscores, const float *dloss, const float *scores,
                     const int64_t *labels, const float *weights, int n,
                     int c, int inner, int reduction, int has_ignore,
                     int64_t ignore_index)
{
    float g = 0.0f;
    sce_job s;
    if (dscores == NULL)
        return;
    if (reduction != RT_SCE_NONE)
        g = dloss[0];
    if (reduction == RT_SCE_MEAN) {
        const float w = sce_total_weight(labels, weights, (size_t)n * inner,
                                         c, has_ignore, ignore_index);
        if (w == 0.0f)
            return;
        g /= w;
    }
    if (n <= 0 || inner <= 0)
        return;
    sce_setup(&s, scores, labels, weights, c, inner, reduction, has_ignore,
              ignore_index);
    s.out = dscores;
    s.dloss = dloss;
    s.g = g;
    rt_parallel_for((size_t)n * inner, 1, (size_t)n * inner * c, RT_PAR_COSTLY,
                    sce_back_part, &s);
}

/* ---- NegativeLogLikelihoodLoss (rt_nll_*) ---------------------------------
 * Its own region: it shares nothing with the softmax cross-entropy above.
 * One product per position, so no threads; the sums (of the losses and, for
 * the mean, of the weights) run in double in position order, so their
 * error does not grow with the number of positions and every thread count
 * gives the same bits. */

/* w_p: what position p's label weighs; 0 when ignored or not a class. */
static double nll_weight(int64_t label, const float *weights, int c,
                         int has_ignore, int64_t ignore_index)
{
    if ((has_ignore && label == ignore_index) || label < 0 || label >= c)
        return 0.0;
    return weights ? (double)weights[label] : 1.0;
}

/* The mean's denominator, sum of w_p. */
static double nll_total_weight(const int64_t *labels, const float *weights,
                               size_t positions, int c, int has_ignore,
                               int64_t ignore_index)
{
    double total = 0.0;
    size_t p;
    for (p = 0; p < positions; p++)
        total += nll_weight(labels[p], weights, c, has_ignore, ignore_index);
    return total;
}

void rt_nll_forward(float *loss, const float *input, const int64_t *labels,
                    const float *weights, int n, int c, int inner,
                    int reduction, int has_ignore, int64_t ignore_index)
{
    const size_t positions = n > 0 && inner > 0 ? (size_t)n * inner : 0;
    double total = 0.0;
    size_t p;
    for (p = 0; p < positions; p++) {
        const int64_t y = labels[p];
        const double w = nll_weight(y, weights, c, has_ignore, ignore_index);
        double l = 0.0;
        if (w != 0.0)
            l = -w * (double)input[(p / (size_t)inner * (size_t)c +
                                    (size_t)y) * (size_t)inner +
                                   p % (size_t)inner];
        if (reduction == RT_SCE_NONE)
            loss[p] = (float)l;
        else
            total += l;
    }
    if (reduction == RT_SCE_NONE)
        return;
    if (reduction == RT_SCE_MEAN) {
        const double w = nll_total_weight(labels, weights, positions, c,
                                          has_ignore, ignore_index);
        total = w != 0.0 ? total / w : 0.0;
    }
    loss[0] = (float)total;
}

void rt_nll_backward(float *dinput, const float *dloss, const int64_t *labels,
                     const float *weights, int n, int c, int inner,
                     int reduction, int has_ignore, int64_t ignore_index)
{
    const size_t positions = n > 0 && inner > 0 ? (size_t)n * inner : 0;
    double g = 0.0;
    size_t p;
    if (dinput == NULL || positions == 0)
        return;
    if (reduction != RT_SCE_NONE)
        g = (double)dloss[0];
    if (reduction == RT_SCE_MEAN) {
        const double w = nll_total_weight(labels, weights, positions, c,
                                          has_ignore, ignore_index);
        if (w == 0.0)
            return;
        g /= w;
    }
    for (p = 0; p < positions; p++) {
        const int64_t y = labels[p];
        const double w = nll_weight(y, weights, c, has_ignore, ignore_index);
        if (w == 0.0)
            continue;
        dinput[(p / (size_t)inner * (size_t)c + (size_t)y) * (size_t)inner +
               p % (size_t)inner] +=
            (float)(-w * (reduction == RT_SCE_NONE ? (double)dloss[p] : g));
    }
}
