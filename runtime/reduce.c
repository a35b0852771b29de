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
    bc_args p = {NULL, NULL, NULL, NULL, NULL, NULL, 0.0f, 0u};
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
    bc_args p = {NULL, NULL, NULL, NULL, NULL, NULL, 0.0f, 0u};
    if (dx == NULL)
        return;
    p.da = dx;
    p.dy = dy;
    p.scale = scale;
    rt_bc_run(m, &p, reduce_back_row);
}
