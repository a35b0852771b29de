/*
 * structural.c: the ops that move elements rather than compute them
 * (their backwards add): Concat, Split, Slice, Transpose, Gather.
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
