/*
 * structural.c: the ops that move elements rather than compute them
 * (their backwards add): Concat, Split, Slice, Transpose, Gather, and
 * DepthToSpace and SpaceToDepth (Transposes of a 6-D view). Concat,
 * Slice and Transpose take int64 elements too (issue 25: masks, positions
 * and shifted labels), through the same walks: Concat's rows by their
 * element size, Slice and Transpose as maps that rt_bc_copy (binary.c)
 * copies along, float32 or int64.
 */
#include "rt_impl.h"

/* ---- structural ops: Concat, Split, Slice ---------------------------------- */

/* Copies (add = 0) or adds (add = 1, float32 only) n elements of es
 * bytes. */
static void move(unsigned char *dst, const unsigned char *src, int n,
                 size_t es, int add)
{
    int i;
    if (add) {
        float *d = (float *)(void *)dst;
        const float *s = (const float *)(const void *)src;
        for (i = 0; i < n; i++)
            d[i] += s[i];
    } else {
        memcpy(dst, src, (size_t)n * es);
    }
}

/* Walks the concatenated rows: piece i of row r is whole[r*total + off_i
 * ...] against part i's row r; to_whole says which way the data goes.
 * The parts are float32 (parts written, or cparts read) or, when iparts
 * is given, int64 ones read (Concat on int64): the walk is the same with
 * 8-byte elements. Inline, so that each caller's constant arguments leave
 * the float paths the instructions they had before. */
static inline void concat_walk(unsigned char *whole,
                               const unsigned char *cwhole,
                               float *const *parts, const float *const *cparts,
                               const int64_t *const *iparts, int n,
                               const int *widths, int outer, int to_whole,
                               int add)
{
    const size_t es = iparts != NULL ? sizeof(int64_t) : sizeof(float);
    int total = 0, i, r, off;
    for (i = 0; i < n; i++)
        total += widths[i];
    for (r = 0; r < outer; r++) {
        off = 0;
        for (i = 0; i < n; i++) {
            const size_t w = ((size_t)r * total + (size_t)off) * es;
            const size_t p = (size_t)r * widths[i] * es;
            const unsigned char *src =
                iparts != NULL ? (const unsigned char *)iparts[i]
                : cparts != NULL ? (const unsigned char *)cparts[i] : NULL;
            if (to_whole && src != NULL)
                move(whole + w, src + p, widths[i], es, add);
            else if (!to_whole && parts[i] != NULL)
                move((unsigned char *)parts[i] + p, cwhole + w, widths[i],
                     es, add);
            off += widths[i];
        }
    }
}

void rt_concat_forward(float *y, const float *const *xs, int n,
                       const int *widths, int outer)
{
    concat_walk((unsigned char *)y, NULL, NULL, xs, NULL, n, widths, outer,
                1, 0);
}

void rt_concat_i64_forward(int64_t *y, const int64_t *const *xs, int n,
                           const int *widths, int outer)
{
    concat_walk((unsigned char *)y, NULL, NULL, NULL, xs, n, widths, outer,
                1, 0);
}

void rt_concat_backward(float *const *dxs, const float *dy, int n,
                        const int *widths, int outer)
{
    concat_walk(NULL, (const unsigned char *)dy, dxs, NULL, NULL, n, widths,
                outer, 0, 1);
}

void rt_split_forward(float *const *ys, const float *x, int n,
                      const int *widths, int outer)
{
    concat_walk(NULL, (const unsigned char *)x, ys, NULL, NULL, n, widths,
                outer, 0, 0);
}

void rt_split_backward(float *dx, const float *const *dys, int n,
                       const int *widths, int outer)
{
    if (dx != NULL)
        concat_walk((unsigned char *)dx, NULL, NULL, dys, NULL, n, widths,
                    outer, 1, 1);
}

/* Scatters a row back along a map: dx[j * sa] = dy[j], or += unless
 * p->set: the backward of Transpose and Slice (each dx element is one
 * y element's, so the rows split over the threads). */
static void scatter_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
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

/* Slice as a map over y (rank >= 1): x's stride times the step along each
 * of y's dims (0 where y has one element: no step taken), and in *base
 * the offset of x's first element read. */
static rt_bcast slice_map(int rank, const int *xdims, const int *ydims,
                          const int *starts, const int *steps, ptrdiff_t *base)
{
    rt_bcast m;
    ptrdiff_t stride = 1;
    int d;
    memset(&m, 0, sizeof m);
    m.rank = rank;
    *base = 0;
    for (d = rank - 1; d >= 0; d--) {
        m.dims[d] = ydims[d];
        m.sa[d] = ydims[d] > 1 ? (int)(steps[d] * stride) : 0;
        *base += (ptrdiff_t)starts[d] * stride;
        stride *= xdims[d];
    }
    return m;
}

void rt_slice_forward(float *y, const float *x, int rank, const int *xdims,
                      const int *ydims, const int *starts, const int *steps)
{
    ptrdiff_t base;
    const rt_bcast m = slice_map(rank, xdims, ydims, starts, steps, &base);
    rt_bc_copy(&m, y, x + base, NULL, NULL);
}

void rt_slice_i64_forward(int64_t *y, const int64_t *x, int rank,
                          const int *xdims, const int *ydims,
                          const int *starts, const int *steps)
{
    ptrdiff_t base;
    const rt_bcast m = slice_map(rank, xdims, ydims, starts, steps, &base);
    rt_bc_copy(&m, NULL, NULL, y, x + base);
}

void rt_slice_backward(float *dx, const float *dy, int rank, const int *xdims,
                       const int *ydims, const int *starts, const int *steps)
{
    ptrdiff_t base;
    const rt_bcast m = slice_map(rank, xdims, ydims, starts, steps, &base);
    bc_args p = BC_ARGS_NONE;
    if (dx == NULL)
        return;
    p.da = dx + base;
    p.dy = dy;
    rt_bc_run_split(&m, &p, scatter_row);
}

/* Transpose walks y in order: the map's dims are y's, and its sa holds x's
 * stride along each of y's dims, so oa is x's offset of the element at
 * oy. */
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

void rt_transpose_forward(float *y, const float *x, int rank, const int *dims,
                          const int *perm)
{
    const rt_bcast m = transpose_map(rank, dims, perm);
    rt_bc_copy(&m, y, x, NULL, NULL);
}

void rt_transpose_i64_forward(int64_t *y, const int64_t *x, int rank,
                              const int *dims, const int *perm)
{
    const rt_bcast m = transpose_map(rank, dims, perm);
    rt_bc_copy(&m, NULL, NULL, y, x);
}

void rt_transpose_backward_set(float *dx, const float *dy, int rank,
                               const int *dims, const int *perm, unsigned set)
{
    const rt_bcast m = transpose_map(rank, dims, perm);
    bc_args p = BC_ARGS_NONE;
    if (dx == NULL)
        return;
    p.da = dx;
    p.dy = dy;
    p.set = set & 1u;   /* a permutation: every dx element written once */
    rt_bc_run_split(&m, &p, scatter_row);
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
 * columns of every table row. The backward's scratch holds perm, the
 * indices' positions sorted by table row (in index order within a row),
 * and row, each position's table row (-1 out of range). */
typedef struct {
    float *out;
    const float *in;
    const int64_t *idx;
    const int *perm, *row;
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

/* Positions a before b: by table row, then by position (so the order is
 * total and the sort's result does not depend on how it got there). */
static int gather_before(const int *row, int a, int b)
{
    return row[a] != row[b] ? row[a] < row[b] : a < b;
}

/* row[i] = idx[i]'s table row, and perm = 0..n-1 sorted by gather_before:
 * a heapsort, in place, O(n log n) whatever the indices. */
static void gather_sort(const gather_job *g, int *perm, int *row)
{
    int i, end;
    for (i = 0; i < g->n; i++) {
        perm[i] = i;
        row[i] = gather_row(g->idx[i], g->rows);
    }
    for (end = g->n, i = g->n / 2 - 1; end > 1; ) {
        int root, child, t;
        if (i >= 0) {           /* heapify: sift down from i */
            root = i--;
        } else {                /* move the largest past the heap */
            t = perm[0];
            perm[0] = perm[--end];
            perm[end] = t;
            root = 0;
        }
        while ((child = 2 * root + 1) < end) {
            if (child + 1 < end &&
                gather_before(row, perm[child], perm[child + 1]))
                child++;
            if (!gather_before(row, perm[root], perm[child]))
                break;
            t = perm[root];
            perm[root] = perm[child];
            perm[child] = t;
            root = child;
        }
    }
}

/* Columns [c0, c1) (at most RT_GATHER_COLS) of table row r, named at the
 * positions perm[k0..k1): their dy rows summed in index order as rt_sum
 * does (float blocks of RT_SUM_BLOCK terms, each folded into hi + lo with
 * compensation; a single block is its plain sum, as in rt_sum), the total
 * added to the gradient. */
#define RT_GATHER_COLS 64
static void gather_back_sum(const gather_job *g, int r, int k0, int k1,
                            size_t c0, size_t c1)
{
    const size_t w = (size_t)g->width, nc = c1 - c0;
    float hi[RT_GATHER_COLS], lo[RT_GATHER_COLS], part[RT_GATHER_COLS];
    float *restrict out = g->out + (size_t)r * w + c0;
    size_t j;
    int kb, k;
    if (k1 - k0 <= RT_SUM_BLOCK) {  /* one block: its plain float sum */
        for (j = 0; j < nc; j++)
            part[j] = 0.0f;
        for (k = k0; k < k1; k++) {
            const float *restrict dyk = g->in + (size_t)g->perm[k] * w + c0;
            for (j = 0; j < nc; j++)
                part[j] += dyk[j];
        }
        for (j = 0; j < nc; j++)
            out[j] += part[j];
        return;
    }
    for (j = 0; j < nc; j++)
        hi[j] = lo[j] = 0.0f;
    for (kb = k0; kb < k1; kb += RT_SUM_BLOCK) {
        const int ke = k1 - kb < RT_SUM_BLOCK ? k1 : kb + RT_SUM_BLOCK;
        for (j = 0; j < nc; j++)
            part[j] = 0.0f;
        for (k = kb; k < ke; k++) {
            const float *restrict dyk = g->in + (size_t)g->perm[k] * w + c0;
            for (j = 0; j < nc; j++)
                part[j] += dyk[j];
        }
        for (j = 0; j < nc; j++)
            rt_comp_add(&hi[j], &lo[j], part[j]);
    }
    for (j = 0; j < nc; j++)
        out[j] += rt_comp_value(hi[j], lo[j]);
}

/* Columns [lo, hi) of every table row some index names: a row named once
 * adds its dy row, a repeated one the sum of its dy rows. */
static void gather_back_part(void *ctx, size_t lo, size_t hi)
{
    const gather_job *g = ctx;
    const size_t w = (size_t)g->width;
    int k0 = 0, k1;
    while (k0 < g->n) {
        const int r = g->row[g->perm[k0]];
        size_t c0, j;
        for (k1 = k0 + 1; k1 < g->n && g->row[g->perm[k1]] == r; k1++)
            ;
        if (r >= 0 && k1 - k0 == 1) {
            const float *restrict dyi = g->in + (size_t)g->perm[k0] * w;
            float *restrict out = g->out + (size_t)r * w;
            for (j = lo; j < hi; j++)
                out[j] += dyi[j];
        } else if (r >= 0) {
            for (c0 = lo; c0 < hi; c0 += RT_GATHER_COLS)
                gather_back_sum(g, r, k0, k1, c0,
                                hi - c0 < RT_GATHER_COLS ? hi
                                                         : c0 + RT_GATHER_COLS);
        }
        k0 = k1;
    }
}

static void gather_run(rt_chunk_fn fn, size_t items, float *out,
                       const float *in, const int64_t *idx, int *perm,
                       int n, int rows, int width)
{
    gather_job g;
    g.out = out;
    g.in = in;
    g.idx = idx;
    g.perm = perm;
    g.row = perm != NULL ? perm + n : NULL;
    g.n = n;
    g.rows = rows;
    g.width = width;
    if (n > 0 && width > 0) {
        if (perm != NULL)
            gather_sort(&g, perm, perm + n);
        rt_parallel_for(items, 16, (size_t)n * width, RT_PAR_CHEAP, fn, &g);
    }
}

void rt_gather_forward(float *y, const float *table, const int64_t *idx, int n,
                       int rows, int width)
{
    gather_run(gather_fwd_part, (size_t)(n > 0 ? n : 0), y, table, idx, NULL,
               n, rows, width);
}

size_t rt_gather_backward_scratch(int n)
{
    return n > 0 ? (2 * (size_t)n * sizeof(int) + sizeof(float) - 1) /
                       sizeof(float)
                 : 0;
}

void rt_gather_backward(float *dtable, const float *dy, const int64_t *idx,
                        int n, int rows, int width, float *scratch)
{
    if (dtable != NULL && n > 0)
        gather_run(gather_back_part, (size_t)(width > 0 ? width : 0), dtable,
                   dy, idx, (int *)(void *)scratch, n, rows, width);
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
