/*
 * integer.c: the kernels of int64 and bool tensors (issue 25), where
 * models build masks, positions and shifted labels from integer graph
 * inputs: Cast of an int64 tensor to float32, the comparisons and the
 * logical ops, whose bool results are stored as int64 0 or 1, Where with
 * an int64 condition (of float32 or of int64 values), Add, Sub, Mul, Div
 * and Mod of two int64 tensors (ids against an int64 constant, labels plus
 * row offsets), and ReduceSum of one (a mask's length). None of them
 * has a backward but Where's: integers carry no gradient. Slice, Concat, Transpose and Expand on int64 are the float
 * kernels' walks with 8-byte elements, beside them in structural.c and
 * binary.c.
 */
#include "rt_impl.h"

/* ---- Cast, comparisons, logic ------------------------------------------------ */

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

enum { I64_ADD, I64_SUB, I64_MUL, I64_DIV, I64_MOD, I64_FMOD };

/* Two's complement arithmetic, wrapping as numpy's int64 does (signed
 * overflow in C is undefined; unsigned wraps, and the conversion back
 * keeps the bits on every compiler remat's runtime builds with). */
static int64_t arith_i64(int op, int64_t a, int64_t b)
{
    uint64_t x = (uint64_t)a, z = (uint64_t)b;
    switch (op) {
    case I64_ADD: return (int64_t)(x + z);
    case I64_SUB: return (int64_t)(x - z);
    case I64_MUL: return (int64_t)(x * z);
    case I64_MOD:
    case I64_FMOD: {
        /* C's % truncates (a's sign); fmod 0 moves a remainder of the
         * other sign to b's. x % 0 is 0, x % -1 is 0 (C leaves
         * INT64_MIN % -1 undefined). */
        int64_t r = b == 0 || b == -1 ? 0 : a % b;
        if (op == I64_MOD && r != 0 && (r < 0) != (b < 0))
            r += b;
        return r;
    }
    default:
        /* truncated toward zero; C leaves x / 0 and INT64_MIN / -1
         * undefined: 0 (numpy's) and the negation, wrapping */
        if (b == 0)
            return 0;
        if (b == -1)
            return (int64_t)(0u - x);
        return a / b;
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

void rt_div_i64_forward(int64_t *y, const int64_t *a, const int64_t *b,
                        const rt_bcast *m)
{
    arith_i64_run(y, a, b, I64_DIV, m);
}

void rt_mod_i64_forward(int64_t *y, const int64_t *a, const int64_t *b,
                        long fmod, const rt_bcast *m)
{
    arith_i64_run(y, a, b, fmod ? I64_FMOD : I64_MOD, m);
}

/* ---- int64 ReduceSum ------------------------------------------------------------ */

/* x walked in order; m->sb gives y's offset (0 along a reduced dim), as
 * rt_reduce_forward reads the map. Sums of integers are exact: no
 * pairing needed, only the wrap of unsigned arithmetic. */
void rt_reduce_sum_i64_forward(int64_t *y, const int64_t *x,
                               const rt_bcast *m, int ny)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[2] = {0, 0};
    size_t i, n = i64_count(m);
    int k;
    for (k = 0; k < ny; k++)
        y[k] = 0;
    for (i = 0; i < n; i++) {
        y[off[1]] = (int64_t)((uint64_t)y[off[1]] + (uint64_t)x[i]);
        i64_step(m, idx, off);
    }
}

/* ---- int64 graph outputs ------------------------------------------------------ */

void rt_store_i64(float *dst, const int64_t *x, size_t n)
{
    if (n > 0)
        memcpy(dst, x, n * sizeof(int64_t));
}
