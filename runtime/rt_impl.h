/*
 * rt_impl.h: what the runtime's family files share; private to them.
 *
 * The runtime behind remat_rt.h is one source file per kernel family
 * (threads.c, gemm.c, binary.c, ...), each including this header first.
 * C99, no allocation: every buffer, including scratch, is the caller's or a
 * small fixed array on the stack; the thread pool is a static struct. With
 * RT_NO_STDIO nothing from <stdio.h> is used, so the files build for
 * targets without a C library's I/O.
 *
 * Firmware and apps copy the runtime as one file, dist/remat_rt.c, which
 * scripts/amalgamate.sh makes (as SQLite ships its amalgamation): this
 * header, then every family file but npy.c, in a fixed order. There
 * RT_PRIVATE is `static`, so the functions declared with it below, which
 * one family defines and others call, stay inside that one file; built
 * file by file they are extern, and carry the rt_ prefix so that they
 * cannot clash with a caller's names. Everything else a family defines
 * is static and its names are distinct across the families, so that the
 * single file compiles.
 */
#ifndef RT_IMPL_H
#define RT_IMPL_H

/* The thread pool needs POSIX threads and GCC's __atomic builtins (gcc and
 * clang): a firmware build (RT_NO_STDIO, or a target that is not Unix)
 * leaves it out and runs every kernel on the calling thread. Here, before
 * any system header, because _POSIX_C_SOURCE must come first. */
#if !defined(RT_NO_THREADS) && (defined(RT_NO_STDIO) || !defined(__GNUC__) || \
    !(defined(__unix__) || defined(__APPLE__)))
#define RT_NO_THREADS
#endif
#if !defined(RT_NO_THREADS) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "remat_rt.h"

#include <math.h>
#include <string.h>

#ifndef RT_PRIVATE
#define RT_PRIVATE
#endif

/* Strict C99 has no M_PI & co.; spell the constants out (float-rounded). */
#define RT_INV_SQRT2      0.70710678118654752f /* 1/sqrt(2) */
#define RT_INV_SQRT_2PI   0.39894228040143268f /* 1/sqrt(2*pi) */
#define RT_SQRT_2_OVER_PI 0.79788456080286536f /* sqrt(2/pi) */
#define RT_GELU_CUBIC     0.044715f
#define RT_TWO_PI         6.28318530717958648f

/* The GEMM's tile and the loops around it must be inlined into each case
 * of gemm_portable for their constant strides and alpha to count (and
 * attention's exp into its row loops); compilers that do not know the
 * attribute get the same code, slower. */
#if defined(__GNUC__)
#define RT_INLINE static inline __attribute__((always_inline))
#else
#define RT_INLINE static inline
#endif

/* ---- sums that do not drift ------------------------------------------------ */

/* Every reduction of the runtime (norm statistics and their backward sums,
 * ReduceSum/ReduceMean, softmax and cross-entropy sums, bias gradients and
 * the sums over broadcast dims) adds its terms through rt_sum: in float in
 * blocks of RT_SUM_BLOCK terms, each block's sum then added to a running
 * total with Neumaier's compensation (hi + lo), all in float, so no soft
 * double on a Cortex-M4. A plain float loop's error grows with the count n
 * (n eps in the worst case, sqrt(n) eps typically); here it is bounded by
 * about RT_SUM_BLOCK eps of the sum of |terms| (sqrt(RT_SUM_BLOCK) eps
 * typically) whatever n, and costs one float add per term plus five float
 * operations per block. The terms are taken in the order given, so a sum is
 * the same bits whichever thread runs it. */
#define RT_SUM_BLOCK 32
typedef struct {
    float hi, lo;   /* the finished blocks: hi + lo */
    float part;     /* the current block's plain float sum */
    int k;          /* terms in part */
} rt_sum;

static inline void rt_sum_init(rt_sum *s)
{
    s->hi = s->lo = s->part = 0.0f;
    s->k = 0;
}

/* *hi + *lo += v, keeping the rounding error of *hi + v in *lo
 * (Neumaier's compensation, the error found by Knuth's TwoSum: exact
 * whichever of *hi and v is larger, with no comparison to branch on, so
 * the same bits as the textbook form at a lower cost on arrays). Also for
 * totals kept in arrays across calls of a loop: a gradient entry as hi
 * with its lo in scratch (LayerNorm's dscale over blocks of rows), a
 * row's softmax sum and y over key blocks (attention). */
static inline void rt_comp_add(float *hi, float *lo, float v)
{
    const float a = *hi, t = a + v;
    const float vb = t - a, va = t - vb;
    *lo += (a - va) + (v - vb);
    *hi = t;
}

/* hi + lo, or hi alone when it is infinite or NaN (lo would be NaN). */
static inline float rt_comp_value(float hi, float lo)
{
    return hi - hi == 0.0f ? hi + lo : hi;
}

/* hi + lo += v, keeping the rounding error of hi + v in lo. */
static inline void rt_sum_fold(rt_sum *s, float v)
{
    rt_comp_add(&s->hi, &s->lo, v);
}

static inline void rt_sum_add(rt_sum *s, float v)
{
    s->part += v;
    if (++s->k == RT_SUM_BLOCK) {
        rt_sum_fold(s, s->part);
        s->part = 0.0f;
        s->k = 0;
    }
}

/* The sum so far (s is left as it was). An infinite or NaN total is
 * returned as it is: its compensation would be NaN. */
static inline float rt_sum_value(const rt_sum *s)
{
    rt_sum t = *s;
    rt_sum_fold(&t, t.part);
    return rt_comp_value(t.hi, t.lo);
}

/* One block of RT_SUM_BLOCK (32) contiguous terms, summed in 16 lanes and
 * then pairwise: no chain of dependent adds, so the compiler vectorizes it
 * (a plain `part += t` loop it may not reorder), and a fixed order, so the
 * same bits on every machine and thread count. The error bound is rt_sum's
 * (a block's sum is a float sum of 32 terms in some order). */
static inline float rt_sum_block(const float *t)
{
    float lane[16];
    int l, w;
    for (l = 0; l < 16; l++)
        lane[l] = t[l] + t[l + 16];
    for (w = 8; w >= 1; w /= 2)
        for (l = 0; l < w; l++)
            lane[l] += lane[l + w];
    return lane[0];
}

/* x[0] + ... + x[n - 1], contiguous: whole blocks by rt_sum_block, the
 * rest in order (not rt_sum_strided's bits). */
static inline float rt_sum_contig(const float *x, size_t n)
{
    rt_sum s;
    size_t i = 0;
    rt_sum_init(&s);
    for (; n - i >= RT_SUM_BLOCK; i += RT_SUM_BLOCK)
        rt_sum_fold(&s, rt_sum_block(x + i));
    for (; i < n; i++)
        s.part += x[i];
    return rt_sum_value(&s);
}

/* e^x, written so that a loop of it vectorizes (libm's expf is a call),
 * and the same bits on every machine (float operations alone, no libm):
 * x = n ln2 + r with |r| <= ln2/2 (n rounded by the 1.5 * 2^23 trick, ln2
 * split in two for an exact product), e^r by its Taylor polynomial to r^7
 * (truncation < 1e-8 relative), 2^n built in the exponent bits. x is
 * clamped to [-87.3, 88.7], where 2^n stays a normal float. */
static inline float rt_exp_v(float x)
{
    float fn, r, p, scale;
    int32_t bits;
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
    fn = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    r = x - fn * 0.693359375f + fn * 2.12194440e-4f;
    p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    fn = fn == fn ? fn : 0.0f;  /* a NaN x: converting NaN is undefined;
                                 * p is NaN already, and so the result */
    bits = ((int32_t)fn + 127) * (1 << 23);
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* x[0], x[stride], ..., x[(n - 1) stride] added as rt_sum_add would, the
 * same bits, a block at a time. */
static inline float rt_sum_strided(const float *x, size_t n, ptrdiff_t stride)
{
    rt_sum s;
    size_t i = 0, e;
    rt_sum_init(&s);
    while (n - i >= RT_SUM_BLOCK) {
        float part = 0.0f;
        for (e = i + RT_SUM_BLOCK; i < e; i++)
            part += x[(ptrdiff_t)i * stride];
        rt_sum_fold(&s, part);
    }
    for (; i < n; i++)
        s.part += x[(ptrdiff_t)i * stride];
    return rt_sum_value(&s);
}

/* ---- threads.c ----------------------------------------------------------- */

/* A kernel's share of the work: items [lo, hi) of its own numbering (rows,
 * columns, elements). */
typedef void (*rt_chunk_fn)(void *ctx, size_t lo, size_t hi);

/* Below these many floats a kernel stays on the calling thread: a job
 * costs a few microseconds (waking a worker, the caller's wait), more than
 * a small loop. Measured on the 2-core EPYC: an Add of 32K floats took
 * 1.7 us alone and 3.4 on two threads, of 128K the same on both, of 1M
 * 100 us and 61; Gelu and LayerNorm (about 1 ns a float) gained from 32K
 * (33 us to 21). So ops with an exp, a hash or a row's statistics split
 * from 4K floats, plain arithmetic and copies from 128K. */
#define RT_PAR_CHEAP  ((size_t)1 << 17)
#define RT_PAR_COSTLY ((size_t)1 << 12)

/* fn over items [0, n) in per_thread chunks for each thread (align: chunk
 * edges a multiple of it), on every thread. */
RT_PRIVATE void rt_parallel_parts(size_t n, size_t align,
                                  size_t per_thread, rt_chunk_fn fn, void *ctx);
/* The same in chunks when the kernel touches at least min_work floats
 * (work); else all on the calling thread. */
RT_PRIVATE void rt_parallel_for(size_t n, size_t align, size_t work,
                                size_t min_work, rt_chunk_fn fn, void *ctx);

/* ---- binary.c: walking a broadcast map ------------------------------------ */

/* Everything a row kernel may touch; unused members are NULL. For the binary
 * ops y/dy are the output side and a/b (da/db) the inputs; the reductions put
 * x (or dx) in a (da) and y (or dy) in y (dy). */
typedef struct {
    float *y, *da, *db;
    const float *a, *b, *dy;
    float scale;
    unsigned set;   /* backward rows: bit 0 da, bit 1 db written, not added */
    int64_t *iy;    /* rt_bc_copy on int64 elements: y and a's twins */
    const int64_t *ia;
} bc_args;
/* A bc_args with every member NULL or 0, to fill in. */
#define BC_ARGS_NONE {NULL, NULL, NULL, NULL, NULL, NULL, 0.0f, 0u, NULL, NULL}

/* One innermost row of n elements: the output (walked in order) starts at
 * oy, a at oa with stride sa, b at ob with stride sb. Offsets, not pointers,
 * so that a NULL gradient never takes part in pointer arithmetic. */
typedef void (*bc_row)(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                       ptrdiff_t ob, int n, int sa, int sb);

/* `row` over every innermost row of m's index space, in order, on the
 * calling thread; and split over the threads, for a row function whose
 * elements are independent. */
RT_PRIVATE void rt_bc_run(const rt_bcast *m, const bc_args *p, bc_row row);
/* A Where's element count and one step of its odometer over y: idx and
 * the offsets off[0..2] of cond, a and b (binary.c; integer.c too). */
RT_PRIVATE size_t rt_where_count(const rt_where *m);
RT_PRIVATE void rt_where_step(const rt_where *m, int *idx, ptrdiff_t *off);
RT_PRIVATE void rt_bc_run_split(const rt_bcast *m, const bc_args *p,
                                bc_row row);
/* y[i] = x[the map's offset of i] over m's index space (sa strides x; y
 * is walked in order), split over the threads: the forward of Expand,
 * Transpose and Slice. Float32 elements (iy and ix NULL) or int64 ones
 * (y and x NULL), the one walk for both (binary.c). */
RT_PRIVATE void rt_bc_copy(const rt_bcast *m, float *y, const float *x,
                           int64_t *iy, const int64_t *ix);

/* Sums over broadcast dims, one gradient (or reduced) entry at a time. An
 * index space of `rank` dims walked in order (element e's offset in the
 * walked tensor is e itself) and ns (<= 3) further tensors with strides
 * st[k] (0 along a dim they are broadcast over). For each entry of tensor
 * `target` (one of them), the terms term(p, off) over every element that
 * lands on it (off[0] the walked offset, off[1 + k] tensor k's) are added
 * with an rt_sum in the walk's order and the total added to
 * grad[entry]; a NULL term is p->scale * p->dy[off[0]], summed by a
 * loop of its own. Unlike rt_bc_run with a stride-0 row, a sum's error does
 * not grow with its length. Entries split over the threads, each summed
 * on one, so the bits do not depend on the thread count. */
typedef float (*bc_term)(const bc_args *p, const ptrdiff_t *off);
RT_PRIVATE void rt_bc_sums(int rank, const int *dims, const int *const *st,
                           int ns, int target, float *grad, bc_term term,
                           const bc_args *p);

/* ---- conv.c and pool.c: window geometry ----------------------------------- */

/* The indices i in [0, count) with 0 <= off + i * step < size, as the range
 * [*lo, *hi), empty when *lo == *hi; step > 0. */
static inline void inside(int off, int step, int size, int count, int *lo,
                          int *hi)
{
    int a = off >= 0 ? 0 : (step - 1 - off) / step;
    int b = size - off <= 0 ? 0 : (size - off + step - 1) / step;
    if (b > count)
        b = count;
    if (a > b)
        a = b;
    *lo = a;
    *hi = b;
}

/* *p with its depth fields made explicit: 0 in d, od, kd, sd or dd means
 * 1 (a 2-D window), so that the kernels read one 3-D geometry. */
static inline rt_window window3(const rt_window *p)
{
    rt_window q = *p;
    q.d = q.d > 0 ? q.d : 1;
    q.od = q.od > 0 ? q.od : 1;
    q.kd = q.kd > 0 ? q.kd : 1;
    q.sd = q.sd > 0 ? q.sd : 1;
    q.dd = q.dd > 0 ? q.dd : 1;
    return q;
}

#endif /* RT_IMPL_H */
