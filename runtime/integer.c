/*
 * integer.c: the kernels of int64 and bool tensors (issue 25), where
 * models build masks, positions and shifted labels from integer graph
 * inputs: the structural ops on int64 (Slice, Concat, Transpose, Expand:
 * the same walks as the float kernels, on 8-byte elements), Cast of an
 * int64 tensor to float32, the comparisons and the logical ops, whose bool
 * results are stored as int64 0 or 1, Where with an int64 condition (of
 * float32 or of int64 values), and Add, Sub and Mul of two int64 tensors
 * (ids against an int64 constant, labels plus row offsets).
 * None of them has a backward but Where's: integers carry no gradient.
 */
#include "rt_impl.h"

/* ---- structural ops on int64 ----------------------------------------------- */

void rt_slice_i64_forward(int64_t *y, const int64_t *x, int rank,
                          const int *xdims, const int *ydims,
                          const int *starts, const int *steps)
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
        y[k] = x[at];
        for (d = rank - 1; d >= 0; d--) {   /* the next index of y */
            at += (long)steps[d] * stride[d];
            if (++j[d] < ydims[d])
                break;
            at -= (long)steps[d] * stride[d] * ydims[d];
            j[d] = 0;
        }
    }
}

void rt_concat_i64_forward(int64_t *y, const int64_t *const *xs, int n,
                           const int *widths, int outer)
{
    int i, r;
    size_t off = 0;
    for (r = 0; r < outer; r++)
        for (i = 0; i < n; i++) {
            memcpy(y + off, xs[i] + (size_t)r * widths[i],
                   (size_t)widths[i] * sizeof(int64_t));
            off += (size_t)widths[i];
        }
}

/* Walks the multi-index of an output of m->rank dims m->dims in order:
 * after each element, off[0] moves by m->sa and off[1] by m->sb. */
static void i64_step(const rt_bcast *m, int *idx, ptrdiff_t *off)
{
    int d;
    for (d = m->rank - 1; d >= 0; d--) {
        off[0] += m->sa[d];
        off[1] += m->sb[d];
        if (++idx[d] < m->dims[d])
            return;
        off[0] -= (ptrdiff_t)m->sa[d] * m->dims[d];
        off[1] -= (ptrdiff_t)m->sb[d] * m->dims[d];
        idx[d] = 0;
    }
}

static size_t i64_count(const rt_bcast *m)
{
    size_t n = 1;
    int d;
    for (d = 0; d < m->rank; d++)
        n *= (size_t)m->dims[d];
    return n;
}

void rt_transpose_i64_forward(int64_t *y, const int64_t *x, int rank,
                              const int *dims, const int *perm)
{
    rt_bcast m;
    int xs[RT_MAX_RANK], d, s = 1, idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[2] = {0, 0};
    size_t i, n;
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
    n = i64_count(&m);
    for (i = 0; i < n; i++) {
        y[i] = x[off[0]];
        i64_step(&m, idx, off);
    }
}

void rt_expand_i64_forward(int64_t *y, const int64_t *x, const rt_bcast *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[2] = {0, 0};
    size_t i, n = i64_count(m);
    for (i = 0; i < n; i++) {
        y[i] = x[off[0]];
        i64_step(m, idx, off);
    }
}

/* ---- Cast, comparisons, logic ------------------------------------------------ */

void rt_cast_i64_forward(float *y, const int64_t *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        y[i] = (float)x[i];
}

static int64_t compare(int op, double a, double b)
{
    switch (op) {
    case RT_CMP_EQUAL: return a == b;
    case RT_CMP_LESS: return a < b;
    case RT_CMP_GREATER: return a > b;
    case RT_CMP_LESS_EQUAL: return a <= b;
    case RT_CMP_GREATER_EQUAL: return a >= b;
    case RT_CMP_AND: return a != 0 && b != 0;
    case RT_CMP_OR: return a != 0 || b != 0;
    case RT_CMP_XOR: return (a != 0) != (b != 0);
    default: return 0;
    }
}

/* int64 operands compared as int64 (a double would round above 2^53). */
static int64_t compare_i64(int op, int64_t a, int64_t b)
{
    switch (op) {
    case RT_CMP_EQUAL: return a == b;
    case RT_CMP_LESS: return a < b;
    case RT_CMP_GREATER: return a > b;
    case RT_CMP_LESS_EQUAL: return a <= b;
    case RT_CMP_GREATER_EQUAL: return a >= b;
    default: return compare(op, (double)(a != 0), (double)(b != 0));
    }
}

void rt_compare_i64_forward(int64_t *y, const int64_t *a, const int64_t *b,
                            int op, const rt_bcast *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[2] = {0, 0};
    size_t i, n = i64_count(m);
    for (i = 0; i < n; i++) {
        y[i] = compare_i64(op, a[off[0]], b[off[1]]);
        i64_step(m, idx, off);
    }
}

void rt_compare_f32_forward(int64_t *y, const float *a, const float *b,
                            int op, const rt_bcast *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[2] = {0, 0};
    size_t i, n = i64_count(m);
    for (i = 0; i < n; i++) {
        y[i] = compare(op, (double)a[off[0]], (double)b[off[1]]);
        i64_step(m, idx, off);
    }
}

void rt_not_forward(int64_t *y, const int64_t *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        y[i] = x[i] == 0;
}

/* ---- Where with an int64 condition ------------------------------------------ */

void rt_where_i64_forward(float *y, const int64_t *cond, const float *a,
                          const float *b, const rt_where *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[3] = {0, 0, 0};
    size_t i, n = rt_where_count(m);
    for (i = 0; i < n; i++) {
        y[i] = cond[off[0]] != 0 ? a[off[1]] : b[off[2]];
        rt_where_step(m, idx, off);
    }
}

void rt_where_i64_backward(float *da, float *db, const float *dy,
                           const int64_t *cond, const rt_where *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[3] = {0, 0, 0};
    size_t i, n = rt_where_count(m);
    if (da == NULL && db == NULL)
        return;
    for (i = 0; i < n; i++) {
        if (cond[off[0]] != 0) {
            if (da != NULL)
                da[off[1]] += dy[i];
        } else if (db != NULL) {
            db[off[2]] += dy[i];
        }
        rt_where_step(m, idx, off);
    }
}

/* ---- Where of int64 values, int64 Add, Sub and Mul --------------------------- */

void rt_where_i64_i64_forward(int64_t *y, const int64_t *cond,
                              const int64_t *a, const int64_t *b,
                              const rt_where *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[3] = {0, 0, 0};
    size_t i, n = rt_where_count(m);
    for (i = 0; i < n; i++) {
        y[i] = cond[off[0]] != 0 ? a[off[1]] : b[off[2]];
        rt_where_step(m, idx, off);
    }
}

enum { I64_ADD, I64_SUB, I64_MUL };

/* Two's complement arithmetic, wrapping as numpy's int64 does (signed
 * overflow in C is undefined; unsigned wraps, and the conversion back
 * keeps the bits on every compiler remat's runtime builds with). */
static int64_t arith_i64(int op, int64_t a, int64_t b)
{
    uint64_t x = (uint64_t)a, z = (uint64_t)b;
    switch (op) {
    case I64_ADD: return (int64_t)(x + z);
    case I64_SUB: return (int64_t)(x - z);
    default: return (int64_t)(x * z);
    }
}

static void arith_i64_run(int64_t *y, const int64_t *a, const int64_t *b,
                          int op, const rt_bcast *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[2] = {0, 0};
    size_t i, n = i64_count(m);
    for (i = 0; i < n; i++) {
        y[i] = arith_i64(op, a[off[0]], b[off[1]]);
        i64_step(m, idx, off);
    }
}

void rt_add_i64_forward(int64_t *y, const int64_t *a, const int64_t *b,
                        const rt_bcast *m)
{
    arith_i64_run(y, a, b, I64_ADD, m);
}

void rt_sub_i64_forward(int64_t *y, const int64_t *a, const int64_t *b,
                        const rt_bcast *m)
{
    arith_i64_run(y, a, b, I64_SUB, m);
}

void rt_mul_i64_forward(int64_t *y, const int64_t *a, const int64_t *b,
                        const rt_bcast *m)
{
    arith_i64_run(y, a, b, I64_MUL, m);
}

/* ---- int64 graph outputs ------------------------------------------------------ */

void rt_store_i64(float *dst, const int64_t *x, size_t n)
{
    if (n > 0)
        memcpy(dst, x, n * sizeof(int64_t));
}
