/*
 * reduce.c: the reductions (rt_reduce_forward and _backward) over a map
 * whose second strides are y's (0 along a reduced dim): each y is the
 * rt_sum of its x in x's order (binary.c's rt_bc_sums), y's entries split
 * over the threads; the backward is walked with rt_bc_run.
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
