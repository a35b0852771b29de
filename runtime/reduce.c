/*
 * reduce.c: the reductions (rt_reduce_forward and _backward) over a map
 * whose second strides are y's (0 along a reduced dim): each y is the
 * rt_sum of its x in x's order (binary.c's rt_bc_sums), y's entries split
 * over the threads; the backward is walked with rt_bc_run. ReduceMax and
 * ReduceMin walk the map with rt_bc_run; ReduceL1, ReduceL2,
 * ReduceSumSquare and ReduceLogSumExp (its shift the group's maximum) sum
 * a term of x with rt_bc_sums, their backwards split over the threads.
 */
#include "rt_impl.h"

/* ---- reductions ----------------------------------------------------------- */


static void reduce_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                            ptrdiff_t ob, int n, int sa, int sb)
{
    float *dx = p->da + oy;
    const float *dy = p->dy + ob;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++)
        dx[j] += p->scale * dy[(ptrdiff_t)j * sb];
}

void rt_reduce_forward(float *y, const float *x, const rt_bcast *m, int ny,
                       float scale)
{
    bc_args p = BC_ARGS_NONE;
    const int *const st[1] = {m->sb};
    int i;
    for (i = 0; i < ny; i++)
        y[i] = 0.0f;
    /* the terms are 1 * x, x walked in order; y's offsets from m->sb */
    p.dy = x;
    p.scale = 1.0f;
    rt_bc_sums(m->rank, m->dims, st, 1, 0, y, NULL, &p);
    if (scale != 1.0f)
        for (i = 0; i < ny; i++)
            y[i] *= scale;
}

void rt_reduce_backward(float *dx, const float *dy, const rt_bcast *m,
                        float scale)
{
    bc_args p = BC_ARGS_NONE;
    if (dx == NULL)
        return;
    p.da = dx;
    p.dy = dy;
    p.scale = scale;
    rt_bc_run(m, &p, reduce_back_row);
}

/* ---- ReduceMax and ReduceMin ---------------------------------------------- */

/* y = the largest (sign 1) or smallest (sign -1) x over the reduced dims;
 * a NaN anywhere in the group makes it NaN, as in torch.amax. The sign
 * rides in p->scale. */
static void extreme_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                        ptrdiff_t ob, int n, int sa, int sb)
{
    const float *x = p->a + oy;
    float *y = p->y + ob;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++) {
        float *t = &y[(ptrdiff_t)j * sb];
        const float v = x[j];
        if (v != v || (p->scale > 0.0f ? v > *t : v < *t))
            *t = v;
    }
}

static void extreme_forward(float *y, const float *x, const rt_bcast *m,
                            int ny, float sign)
{
    bc_args p = BC_ARGS_NONE;
    int i;
    for (i = 0; i < ny; i++)
        y[i] = -sign * INFINITY;
    p.y = y;
    p.a = x;
    p.scale = sign;
    rt_bc_run(m, &p, extreme_row);
}

void rt_reduce_max_forward(float *y, const float *x, const rt_bcast *m, int ny)
{
    extreme_forward(y, x, m, ny, 1.0f);
}

void rt_reduce_min_forward(float *y, const float *x, const rt_bcast *m, int ny)
{
    extreme_forward(y, x, m, ny, -1.0f);
}

/* count[o] = how many x of group o equal its extreme y[o] (p->y is count,
 * p->b is y). */
static void ties_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                     ptrdiff_t ob, int n, int sa, int sb)
{
    const float *x = p->a + oy, *y = p->b + ob;
    float *count = p->y + ob;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++)
        if (x[j] == y[(ptrdiff_t)j * sb])
            count[(ptrdiff_t)j * sb] += 1.0f;
}

/* dx += dy / count where x is its group's extreme, as torch.amax's
 * backward shares the gradient evenly among ties. */
static void extreme_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                             ptrdiff_t ob, int n, int sa, int sb)
{
    const float *x = p->a + oy, *y = p->b + ob, *dy = p->dy + ob;
    const float *count = p->y + ob;
    float *dx = p->da + oy;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++) {
        const ptrdiff_t o = (ptrdiff_t)j * sb;
        if (x[j] == y[o])
            dx[j] += dy[o] / count[o];
    }
}

void rt_reduce_extreme_backward(float *dx, const float *dy, const float *x,
                                const float *y, const rt_bcast *m, int ny,
                                float *count)
{
    bc_args p = BC_ARGS_NONE;
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < ny; i++)
        count[i] = 0.0f;
    p.y = count;
    p.a = x;
    p.b = y;
    rt_bc_run(m, &p, ties_row);
    p.da = dx;
    p.dy = dy;
    rt_bc_run(m, &p, extreme_back_row);
}

/* ---- ArgMax and ArgMin (issue 25) ----------------------------------------- */

/* y[o][i] = the k of the largest (sign 1) or smallest (sign -1) x[o][k][i];
 * the first among equals, or the last with `last`. A NaN counts as beyond
 * every number, as numpy's and torch's argmax and argmin take it. */
static void arg_extreme(int64_t *y, const float *x, long outer, long n,
                        long inner, int last, float sign)
{
    long o, i, k;
    for (o = 0; o < outer; o++)
        for (i = 0; i < inner; i++) {
            const float *p = x + o * n * inner + i;
            long best = 0;
            float b = p[0];
            for (k = 1; k < n; k++) {
                const float v = p[k * inner];
                int take;
                if (b != b)
                    take = last && v != v;
                else if (v != v)
                    take = 1;
                else
                    take = sign * v > sign * b || (last && v == b);
                if (take) {
                    best = k;
                    b = v;
                }
            }
            y[o * inner + i] = (int64_t)best;
        }
}

void rt_argmax_forward(int64_t *y, const float *x, long outer, long n,
                       long inner, int last)
{
    arg_extreme(y, x, outer, n, inner, last, 1.0f);
}

void rt_argmin_forward(int64_t *y, const float *x, long outer, long n,
                       long inner, int last)
{
    arg_extreme(y, x, outer, n, inner, last, -1.0f);
}

/* ---- CumSum (issue 25) ----------------------------------------------------- */

/* One job for both ways: the lanes (o, i) split over the threads, each
 * walked along the axis in the sum's direction with one rt_sum, so a lane
 * gives the same bits whichever thread runs it. add: the backward adds
 * into out instead of writing it. */
typedef struct {
    float *out;
    const float *in;
    int n, inner, exclusive, reverse, add;
} cumsum_job;

static void cumsum_part(void *ctx, size_t lo, size_t hi)
{
    const cumsum_job *c = ctx;
    size_t lane;
    for (lane = lo; lane < hi; lane++) {
        const size_t o = lane / (size_t)c->inner, i = lane % (size_t)c->inner;
        const size_t base = o * (size_t)c->n * (size_t)c->inner + i;
        rt_sum s;
        int j;
        rt_sum_init(&s);
        for (j = 0; j < c->n; j++) {
            const int k = c->reverse ? c->n - 1 - j : j;
            const size_t at = base + (size_t)k * (size_t)c->inner;
            float v;
            if (!c->exclusive)
                rt_sum_add(&s, c->in[at]);
            v = rt_sum_value(&s);
            if (c->exclusive)
                rt_sum_add(&s, c->in[at]);
            if (c->add)
                c->out[at] += v;
            else
                c->out[at] = v;
        }
    }
}

static void cumsum_run(float *out, const float *in, int outer, int n,
                       int inner, int exclusive, int reverse, int add)
{
    cumsum_job c;
    size_t lanes = (size_t)(outer > 0 ? outer : 0) *
                   (size_t)(inner > 0 ? inner : 0);
    c.out = out;
    c.in = in;
    c.n = n;
    c.inner = inner;
    c.exclusive = exclusive;
    c.reverse = reverse;
    c.add = add;
    if (lanes > 0 && n > 0)
        rt_parallel_for(lanes, 1, lanes * (size_t)n, RT_PAR_COSTLY,
                        cumsum_part, &c);
}

void rt_cumsum_forward(float *y, const float *x, int outer, int n, int inner,
                       int exclusive, int reverse)
{
    cumsum_run(y, x, outer, n, inner, exclusive != 0, reverse != 0, 0);
}

void rt_cumsum_backward(float *dx, const float *dy, int outer, int n,
                        int inner, int exclusive, int reverse)
{
    if (dx != NULL)
        cumsum_run(dx, dy, outer, n, inner, exclusive != 0, reverse == 0, 1);
}

/* ---- ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSumExp (issue 25) ------ */

/* Each y is an rt_sum of a term of its x, in x's order (rt_bc_sums, as
 * ReduceSum's forward): |x|, x^2, or exp(x - shift), the shift its group's
 * maximum, read at y's offset (off[1]) from p->b. */
static float l1_term(const bc_args *p, const ptrdiff_t *off)
{
    return fabsf(p->a[off[0]]);
}

static float square_term(const bc_args *p, const ptrdiff_t *off)
{
    const float v = p->a[off[0]];
    return v * v;
}

static float exp_term(const bc_args *p, const ptrdiff_t *off)
{
    return expf(p->a[off[0]] - p->b[off[1]]);
}

/* y = the sum of term(x) over each group, y overwritten. */
static void term_sums(float *y, const float *x, const float *shift,
                      const rt_bcast *m, int ny, bc_term term)
{
    bc_args p = BC_ARGS_NONE;
    const int *const st[1] = {m->sb};
    int i;
    for (i = 0; i < ny; i++)
        y[i] = 0.0f;
    p.a = x;
    p.b = shift;
    rt_bc_sums(m->rank, m->dims, st, 1, 0, y, term, &p);
}

void rt_reduce_l1_forward(float *y, const float *x, const rt_bcast *m, int ny)
{
    term_sums(y, x, NULL, m, ny, l1_term);
}

void rt_reduce_sum_square_forward(float *y, const float *x, const rt_bcast *m,
                                  int ny)
{
    term_sums(y, x, NULL, m, ny, square_term);
}

void rt_reduce_l2_forward(float *y, const float *x, const rt_bcast *m, int ny)
{
    int i;
    term_sums(y, x, NULL, m, ny, square_term);
    for (i = 0; i < ny; i++)
        y[i] = sqrtf(y[i]);
}

/* y = shift + log(sum exp(x - shift)), the shift each group's maximum (0
 * where that is infinite, as torch.logsumexp: a group of -inf gives -inf,
 * one holding +inf gives +inf); sums is scratch of ny floats. */
void rt_reduce_log_sum_exp_forward(float *y, const float *x,
                                   const rt_bcast *m, int ny, float *sums)
{
    int i;
    extreme_forward(y, x, m, ny, 1.0f);
    for (i = 0; i < ny; i++)
        if (isinf(y[i]))
            y[i] = 0.0f;
    term_sums(sums, x, y, m, ny, exp_term);
    for (i = 0; i < ny; i++)
        y[i] += logf(sums[i]);
}

/* Backward rows: x (and dx) walked at oy, y and dy at ob with stride sb;
 * every dx element its own, so the rows split over the threads. */
static void l1_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                        ptrdiff_t ob, int n, int sa, int sb)
{
    const float *x = p->a + oy, *dy = p->dy + ob;
    float *dx = p->da + oy;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++) {
        const float v = x[j], g = dy[(ptrdiff_t)j * sb];
        dx[j] += v > 0.0f ? g : v < 0.0f ? -g : 0.0f;
    }
}

static void square_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                            ptrdiff_t ob, int n, int sa, int sb)
{
    const float *x = p->a + oy, *dy = p->dy + ob;
    float *dx = p->da + oy;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++)
        dx[j] += 2.0f * x[j] * dy[(ptrdiff_t)j * sb];
}

static void l2_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                        ptrdiff_t ob, int n, int sa, int sb)
{
    const float *x = p->a + oy, *y = p->b + ob, *dy = p->dy + ob;
    float *dx = p->da + oy;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++) {
        const ptrdiff_t o = (ptrdiff_t)j * sb;
        if (y[o] != 0.0f)
            dx[j] += x[j] * (dy[o] / y[o]);
    }
}

static void lse_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *x = p->a + oy, *y = p->b + ob, *dy = p->dy + ob;
    float *dx = p->da + oy;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++) {
        const ptrdiff_t o = (ptrdiff_t)j * sb;
        dx[j] += dy[o] * expf(x[j] - y[o]);
    }
}

static void term_backward(float *dx, const float *dy, const float *x,
                          const float *y, const rt_bcast *m, bc_row row)
{
    bc_args p = BC_ARGS_NONE;
    if (dx == NULL)
        return;
    p.da = dx;
    p.dy = dy;
    p.a = x;
    p.b = y;
    rt_bc_run_split(m, &p, row);
}

void rt_reduce_l1_backward(float *dx, const float *dy, const float *x,
                           const rt_bcast *m)
{
    term_backward(dx, dy, x, NULL, m, l1_back_row);
}

void rt_reduce_sum_square_backward(float *dx, const float *dy, const float *x,
                                   const rt_bcast *m)
{
    term_backward(dx, dy, x, NULL, m, square_back_row);
}

void rt_reduce_l2_backward(float *dx, const float *dy, const float *x,
                           const float *y, const rt_bcast *m)
{
    term_backward(dx, dy, x, y, m, l2_back_row);
}

void rt_reduce_log_sum_exp_backward(float *dx, const float *dy,
                                    const float *x, const float *y,
                                    const rt_bcast *m)
{
    term_backward(dx, dy, x, y, m, lse_back_row);
}
