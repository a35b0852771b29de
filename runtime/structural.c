/*
 * structural.c: the ops that move elements rather than compute them
 * (their backwards add): Concat, Split, Slice, Transpose, Gather, and
 * DepthToSpace and SpaceToDepth (Transposes of a 6-D view).
 */
#include "rt_impl.h"

/* ---- structural ops: Concat, Split, Slice ---------------------------------- */

/* Copies (add = 0) or adds (add = 1) n elements. */
static void move(float *dst, const float *src, int n, int add)
{
    int i;
    if (add)
        for (i = 0; i < n; i++)
            dst[i] += src[i];
    else
        memcpy(dst, src, (size_t)n * sizeof(float));
}

/* Walks the concatenated rows: piece i of row r is whole[r*total + off_i
 * ...] against part i's row r; to_whole says which way the data goes. */
static void concat_walk(float *whole, const float *cwhole, float *const *parts,
                        const float *const *cparts, int n, const int *widths,
                        int outer, int to_whole, int add)
{
    int total = 0, i, r, off;
    for (i = 0; i < n; i++)
        total += widths[i];
    for (r = 0; r < outer; r++) {
        off = 0;
        for (i = 0; i < n; i++) {
            const size_t w = (size_t)r * total + (size_t)off;
            const size_t p = (size_t)r * widths[i];
            if (to_whole && cparts[i] != NULL)
                move(whole + w, cparts[i] + p, widths[i], add);
            else if (!to_whole && parts[i] != NULL)
                move(parts[i] + p, cwhole + w, widths[i], add);
            off += widths[i];
        }
    }
}

void rt_concat_forward(float *y, const float *const *xs, int n,
                       const int *widths, int outer)
{
    concat_walk(y, NULL, NULL, xs, n, widths, outer, 1, 0);
}

void rt_concat_backward(float *const *dxs, const float *dy, int n,
                        const int *widths, int outer)
{
    concat_walk(NULL, dy, dxs, NULL, n, widths, outer, 0, 1);
}

void rt_split_forward(float *const *ys, const float *x, int n,
                      const int *widths, int outer)
{
    concat_walk(NULL, x, ys, NULL, n, widths, outer, 0, 0);
}

void rt_split_backward(float *dx, const float *const *dys, int n,
                       const int *widths, int outer)
{
    if (dx != NULL)
        concat_walk(dx, NULL, NULL, dys, n, widths, outer, 1, 1);
}

/* Every element of y in order with the offset of the x element it reads:
 * an odometer over y's index, x's offset moved by step * stride. */
static void slice_walk(float *y, const float *cy, float *x, const float *cx,
                       int rank, const int *xdims, const int *ydims,
                       const int *starts, const int *steps, int backward)
{
    long stride[RT_MAX_RANK], at = 0;
    int j[RT_MAX_RANK], d;
    size_t k, count = 1;
    for (d = rank - 1; d >= 0; d--) {
        stride[d] = d == rank - 1 ? 1 : stride[d + 1] * xdims[d + 1];
        at += (long)starts[d] * stride[d];
        j[d] = 0;
        count *= (size_t)ydims[d];
    }
    for (k = 0; k < count; k++) {
        if (backward)
            x[at] += cy[k];
        else
            y[k] = cx[at];
        for (d = rank - 1; d >= 0; d--) {   /* the next index of y */
            at += (long)steps[d] * stride[d];
            if (++j[d] < ydims[d])
                break;
            at -= (long)steps[d] * stride[d] * ydims[d];
            j[d] = 0;
        }
    }
}

void rt_slice_forward(float *y, const float *x, int rank, const int *xdims,
                      const int *ydims, const int *starts, const int *steps)
{
    slice_walk(y, NULL, NULL, x, rank, xdims, ydims, starts, steps, 0);
}

void rt_slice_backward(float *dx, const float *dy, int rank, const int *xdims,
                       const int *ydims, const int *starts, const int *steps)
{
    if (dx != NULL)
        slice_walk(NULL, dy, dx, NULL, rank, xdims, ydims, starts, steps, 1);
}

/* Transpose walks y in order with rt_bc_run: the map's dims are y's, and its
 * sa holds x's stride along each of y's dims, so oa is x's offset of the
 * element at oy. */
static rt_bcast transpose_map(int rank, const int *dims, const int *perm)
{
    rt_bcast m;
    int xs[RT_MAX_RANK], d, s = 1;
    memset(&m, 0, sizeof m);
    m.rank = rank;
    for (d = rank - 1; d >= 0; d--) {
        xs[d] = s;
        s *= dims[d];
    }
    for (d = 0; d < rank; d++) {
        m.dims[d] = dims[perm[d]];
        m.sa[d] = xs[perm[d]];
    }
    return m;
}

static void transpose_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                          ptrdiff_t ob, int n, int sa, int sb)
{
    float *y = p->y + oy;
    const float *x = p->a + oa;
    int j;
    (void)ob;
    (void)sb;
    for (j = 0; j < n; j++)
        y[j] = x[(ptrdiff_t)j * sa];
}

static void transpose_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                               ptrdiff_t ob, int n, int sa, int sb)
{
    float *dx = p->da + oa;
    const float *dy = p->dy + oy;
    int j;
    (void)ob;
    (void)sb;
    if (p->set)
        for (j = 0; j < n; j++)
            dx[(ptrdiff_t)j * sa] = dy[j];
    else
        for (j = 0; j < n; j++)
            dx[(ptrdiff_t)j * sa] += dy[j];
}

void rt_transpose_forward(float *y, const float *x, int rank, const int *dims,
                          const int *perm)
{
    const rt_bcast m = transpose_map(rank, dims, perm);
    bc_args p = {NULL, NULL, NULL, NULL, NULL, NULL, 0.0f, 0u};
    p.y = y;
    p.a = x;
    rt_bc_run_split(&m, &p, transpose_row);
}

void rt_transpose_backward_set(float *dx, const float *dy, int rank,
                               const int *dims, const int *perm, unsigned set)
{
    const rt_bcast m = transpose_map(rank, dims, perm);
    bc_args p = {NULL, NULL, NULL, NULL, NULL, NULL, 0.0f, 0u};
    if (dx == NULL)
        return;
    p.da = dx;
    p.dy = dy;
    p.set = set & 1u;   /* a permutation: every dx element written once */
    rt_bc_run_split(&m, &p, transpose_back_row);
}

void rt_transpose_backward(float *dx, const float *dy, int rank,
                           const int *dims, const int *perm)
{
    rt_transpose_backward_set(dx, dy, rank, dims, perm, 0);
}

/* The table row that idx names, or -1 when idx is outside [-rows, rows).
 * Compared as int64_t: a huge index must not wrap into range. */
static int gather_row(int64_t idx, int rows)
{
    if (idx < 0)
        idx += rows;
    return idx >= 0 && idx < rows ? (int)idx : -1;
}

/* Gather's operands: the forward splits the n indices; the backward, whose
 * rows may repeat an index (a sum), splits the width: each thread adds its
 * columns of every row, in index order. */
typedef struct {
    float *out;
    const float *in;
    const int64_t *idx;
    int n, rows, width;
} gather_job;

static void gather_fwd_part(void *ctx, size_t lo, size_t hi)
{
    const gather_job *g = ctx;
    size_t i;
    int j;
    for (i = lo; i < hi; i++) {
        const int r = gather_row(g->idx[i], g->rows);
        float *yi = g->out + i * (size_t)g->width;
        for (j = 0; j < g->width; j++)
            yi[j] = r < 0 ? 0.0f : g->in[(size_t)r * g->width + j];
    }
}

static void gather_back_part(void *ctx, size_t lo, size_t hi)
{
    const gather_job *g = ctx;
    size_t j;
    int i;
    for (i = 0; i < g->n; i++) {
        const int r = gather_row(g->idx[i], g->rows);
        const float *dyi = g->in + (size_t)i * g->width;
        if (r < 0)
            continue;
        for (j = lo; j < hi; j++)
            g->out[(size_t)r * g->width + j] += dyi[j];
    }
}

static void gather_run(rt_chunk_fn fn, size_t items, float *out,
                       const float *in, const int64_t *idx, int n, int rows,
                       int width)
{
    gather_job g;
    g.out = out;
    g.in = in;
    g.idx = idx;
    g.n = n;
    g.rows = rows;
    g.width = width;
    if (n > 0 && width > 0)
        rt_parallel_for(items, 16, (size_t)n * width, RT_PAR_CHEAP, fn, &g);
}

void rt_gather_forward(float *y, const float *table, const int64_t *idx, int n,
                       int rows, int width)
{
    gather_run(gather_fwd_part, (size_t)(n > 0 ? n : 0), y, table, idx, n,
               rows, width);
}

void rt_gather_backward(float *dtable, const float *dy, const int64_t *idx,
                        int n, int rows, int width)
{
    if (dtable != NULL)
        gather_run(gather_back_part, (size_t)(width > 0 ? width : 0), dtable,
                   dy, idx, n, rows, width);
}

/* ---- GatherElements and OneHot (issue 25) ---------------------------------- */

/* The offset in x of idx's element at multi-index c (idx's row-major
 * order), its coordinate along the axis replaced by the index; -1 when
 * the index is out of range. */
static ptrdiff_t gather_elements_at(const int *c, int rank, const int *xdims,
                                    int axis, int64_t v)
{
    ptrdiff_t off = 0;
    int d;
    if (v < 0)
        v += xdims[axis];
    if (v < 0 || v >= xdims[axis])
        return -1;
    for (d = 0; d < rank; d++)
        off = off * xdims[d] + (d == axis ? (ptrdiff_t)v : c[d]);
    return off;
}

/* Walks idx in order (one odometer), calling the forward (dx NULL) or
 * the backward (y NULL) for each element. Serial: a repeated index adds in
 * index order, the same bits on every thread count. */
static void gather_elements_walk(float *y, float *dx, const float *src,
                                 const int64_t *idx, int rank,
                                 const int *xdims, const int *idims, int axis)
{
    int c[RT_MAX_RANK] = {0};
    size_t count = 1, i;
    int d;
    for (d = 0; d < rank; d++)
        count *= (size_t)(idims[d] > 0 ? idims[d] : 0);
    for (i = 0; i < count; i++) {
        const ptrdiff_t at = gather_elements_at(c, rank, xdims, axis, idx[i]);
        if (y != NULL)
            y[i] = at < 0 ? 0.0f : src[at];
        else if (at >= 0)
            dx[at] += src[i];
        for (d = rank - 1; d >= 0 && ++c[d] == idims[d]; d--)
            c[d] = 0;
    }
}

void rt_gather_elements_forward(float *y, const float *x, const int64_t *idx,
                                int rank, const int *xdims, const int *idims,
                                int axis)
{
    gather_elements_walk(y, NULL, x, idx, rank, xdims, idims, axis);
}

void rt_gather_elements_backward(float *dx, const float *dy,
                                 const int64_t *idx, int rank,
                                 const int *xdims, const int *idims, int axis)
{
    if (dx != NULL)
        gather_elements_walk(NULL, dx, dy, idx, rank, xdims, idims, axis);
}

void rt_one_hot_forward(float *y, const int64_t *idx, int outer, int depth,
                        int inner, float off, float on)
{
    size_t o, i;
    int d;
    for (o = 0; o < (size_t)(outer > 0 ? outer : 0); o++)
        for (d = 0; d < depth; d++)
            for (i = 0; i < (size_t)(inner > 0 ? inner : 0); i++) {
                int64_t v = idx[o * (size_t)inner + i];
                if (v < 0)
                    v += depth;
                y[(o * (size_t)depth + (size_t)d) * (size_t)inner + i] =
                    v == d ? on : off;
            }
}

/* ---- DepthToSpace and SpaceToDepth (issue 25) ------------------------------ */

/* Each is a Transpose of x seen with six dims (ONNX's own definition):
 * DepthToSpace DCR x as (n, b, b, c/b^2, h, w), perm (0, 3, 4, 1, 5, 2);
 * CRD as (n, c/b^2, b, b, h, w), perm (0, 1, 4, 2, 5, 3); SpaceToDepth x
 * as (n, c, h/b, b, w/b, b), perm (0, 3, 5, 1, 2, 4). The result is y's
 * floats in order. */
static void d2s_view(int n, int c, int h, int w, int b, int mode, int *dims,
                     int *perm)
{
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3},
                     s2d[6] = {0, 3, 5, 1, 2, 4};
    const int *p = mode == 0 ? dcr : mode == 1 ? crd : s2d;
    int d;
    dims[0] = n;
    if (mode == 2) {
        dims[1] = c;
        dims[2] = h / b;
        dims[3] = b;
        dims[4] = w / b;
        dims[5] = b;
    } else {
        dims[mode == 0 ? 3 : 1] = c / (b * b);
        dims[mode == 0 ? 1 : 2] = b;
        dims[mode == 0 ? 2 : 3] = b;
        dims[4] = h;
        dims[5] = w;
    }
    for (d = 0; d < 6; d++)
        perm[d] = p[d];
}

void rt_depth_to_space_forward(float *y, const float *x, int n, int c, int h,
                               int w, int blocksize, int crd)
{
    int dims[6], perm[6];
    d2s_view(n, c, h, w, blocksize, crd ? 1 : 0, dims, perm);
    rt_transpose_forward(y, x, 6, dims, perm);
}

void rt_depth_to_space_backward(float *dx, const float *dy, int n, int c,
                                int h, int w, int blocksize, int crd)
{
    int dims[6], perm[6];
    d2s_view(n, c, h, w, blocksize, crd ? 1 : 0, dims, perm);
    rt_transpose_backward(dx, dy, 6, dims, perm);
}

void rt_space_to_depth_forward(float *y, const float *x, int n, int c, int h,
                               int w, int blocksize)
{
    int dims[6], perm[6];
    d2s_view(n, c, h, w, blocksize, 2, dims, perm);
    rt_transpose_forward(y, x, 6, dims, perm);
}

void rt_space_to_depth_backward(float *dx, const float *dy, int n, int c,
                                int h, int w, int blocksize)
{
    int dims[6], perm[6];
    d2s_view(n, c, h, w, blocksize, 2, dims, perm);
    rt_transpose_backward(dx, dy, 6, dims, perm);
}
