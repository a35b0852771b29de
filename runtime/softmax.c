/*
 * softmax.c: Softmax and LogSoftmax along one axis: a lane function run
 * over every lane (outer x inner), the lanes split over the threads.
 * Sums along a lane are rt_sums (rt_impl.h).
 */
#include "rt_impl.h"

/* ---- normalizing along one axis: Softmax and LogSoftmax -------------- */

/* The lane of (o, i) starts at o * dim * inner + i and has stride inner;
 * for the usual last axis (inner 1) lanes are contiguous rows. Each kernel
 * is its lane function run over every lane. */
typedef void (*lane_fn)(float *y, const float *x, int dim, ptrdiff_t s);
typedef void (*back_lane_fn)(float *dx, const float *dy, const float *y,
                             int dim, ptrdiff_t s);

/* Lanes are independent: the threads split the outer index. */
typedef struct {
    lane_fn f;
    back_lane_fn bf;
    float *out;
    const float *a, *b;
    int dim, inner;
} lane_job;

static void lanes_part(void *ctx, size_t lo, size_t hi)
{
    const lane_job *j = ctx;
    size_t o;
    int i;
    for (o = lo; o < hi; o++) {
        const size_t base = o * (size_t)j->dim * (size_t)j->inner;
        for (i = 0; i < j->inner; i++) {
            if (j->f != NULL)
                j->f(j->out + base + i, j->a + base + i, j->dim, j->inner);
            else
                j->bf(j->out + base + i, j->a + base + i, j->b + base + i,
                      j->dim, j->inner);
        }
    }
}

static void lanes_run(lane_job *j, int outer)
{
    const size_t work = (size_t)outer * (size_t)j->dim * (size_t)j->inner;
    if (j->dim > 0 && outer > 0)
        rt_parallel_for((size_t)outer, 1, work, RT_PAR_COSTLY, lanes_part, j);
}

static void each_lane(lane_fn f, float *y, const float *x, int outer,
                      int dim, int inner)
{
    lane_job j;
    j.f = f;
    j.bf = NULL;
    j.out = y;
    j.a = x;
    j.b = NULL;
    j.dim = dim;
    j.inner = inner;
    lanes_run(&j, outer);
}

static void each_back_lane(back_lane_fn f, float *dx, const float *dy,
                           const float *y, int outer, int dim, int inner)
{
    lane_job j;
    if (dx == NULL)
        return;
    j.f = NULL;
    j.bf = f;
    j.out = dx;
    j.a = dy;
    j.b = y;
    j.dim = dim;
    j.inner = inner;
    lanes_run(&j, outer);
}

/* One lane as softmax_lane's: y = (x - max) - log(sum exp(x - max)); the
 * sum is >= 1 (the max's term is 1), so the log is finite. y may be x. */
static void log_softmax_lane(float *y, const float *x, int dim, ptrdiff_t s)
{
    float mx = x[0], lse;
    rt_sum sum;
    int d;
    for (d = 1; d < dim; d++)
        if (x[d * s] > mx)
            mx = x[d * s];
    rt_sum_init(&sum);
    for (d = 0; d < dim; d++)
        rt_sum_add(&sum, expf(x[d * s] - mx));
    lse = logf(rt_sum_value(&sum));
    for (d = 0; d < dim; d++)
        y[d * s] = (x[d * s] - mx) - lse;
}

/* dL/dx_d = dy_d - softmax_d * sum_e dy_e, and softmax = exp(y). */
static void log_softmax_back_lane(float *dx, const float *dy, const float *y,
                                  int dim, ptrdiff_t s)
{
    const float sum = rt_sum_strided(dy, (size_t)dim, s);
    int d;
    for (d = 0; d < dim; d++)
        dx[d * s] += dy[d * s] - expf(y[d * s]) * sum;
}

void rt_log_softmax_forward(float *y, const float *x, int outer, int dim,
                            int inner)
{
    each_lane(log_softmax_lane, y, x, outer, dim, inner);
}

void rt_log_softmax_backward(float *dx, const float *dy, const float *y,
                             int outer, int dim, int inner)
{
    each_back_lane(log_softmax_back_lane, dx, dy, y, outer, dim, inner);
}

/* Softmax of one lane: the `dim` values x[0], x[s], ..., x[(dim-1)s] into
 * the same places of y. After subtracting the max every exp is in (0, 1] and
 * the largest is exactly 1, so the sum is >= 1: no overflow for large x, no
 * division by zero. y may be x: each x is read before its y is written. */
static void softmax_lane(float *y, const float *x, int dim, ptrdiff_t s)
{
    float mx = x[0], sum;
    rt_sum acc;
    int d;
    for (d = 1; d < dim; d++)
        if (x[d * s] > mx)
            mx = x[d * s];
    rt_sum_init(&acc);
    for (d = 0; d < dim; d++) {
        y[d * s] = expf(x[d * s] - mx);
        rt_sum_add(&acc, y[d * s]);
    }
    sum = rt_sum_value(&acc);
    for (d = 0; d < dim; d++)
        y[d * s] /= sum;
}

/* dL/dx_d = sum_e dy_e y_e (delta_de - y_d) = y_d (dy_d - sum_e dy_e y_e). */
static void softmax_back_lane(float *dx, const float *dy, const float *y,
                              int dim, ptrdiff_t s)
{
    float dot;
    rt_sum acc;
    int d;
    rt_sum_init(&acc);
    for (d = 0; d < dim; d++)
        rt_sum_add(&acc, dy[d * s] * y[d * s]);
    dot = rt_sum_value(&acc);
    for (d = 0; d < dim; d++)
        dx[d * s] += y[d * s] * (dy[d * s] - dot);
}

void rt_softmax_forward(float *y, const float *x, int outer, int dim,
                        int inner)
{
    each_lane(softmax_lane, y, x, outer, dim, inner);
}

void rt_softmax_backward(float *dx, const float *dy, const float *y,
                         int outer, int dim, int inner)
{
    each_back_lane(softmax_back_lane, dx, dy, y, outer, dim, inner);
}
