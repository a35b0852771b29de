/*
 * gemm.c: the GEMM, rt_sgemm (OpenBLAS's cblas_sgemm, or without BLAS the
 * portable loops, which give the same bits on every machine as the plain
 * rt_sgemm_ref), split over the threads by rows or columns of C; the Gemm
 * op on top of it (rt_gemm_forward, rt_gemm_backward(_set): the bias
 * broadcast and its sum) and the batched MatMul (rt_bmm_*).
 */
#include "rt_impl.h"

#ifndef RT_NO_BLAS
#include <cblas.h>
#endif
#if defined(RT_TRACE_GEMM) && !defined(RT_NO_STDIO)
#include <stdio.h>
#endif

/* ---- GEMM ---------------------------------------------------------------- */

/* The portable GEMM. Every element of C is computed in one order, whatever
 * the path, the tile or the transposes:
 *
 *     c = beta * C[i,j]   (0 when beta == 0: C is not read, as in BLAS)
 *     for p = 0, 1, ..., k-1:   c += (alpha * op(A)[i,p]) * op(B)[p,j]
 *     C[i,j] = c
 *
 * each product and sum rounded to float (with -ffp-contract=off: no fused
 * multiply-add; alpha * x is skipped when alpha is 1, which changes no
 * bit). So rt_sgemm_ref, the plain loop, and rt_sgemm's kernels, the
 * register-blocked tiles and the row loop, give the same bits on every
 * machine whose float arithmetic is IEEE single.
 *
 * op(A)[i,p] is a[i * a_i + p * a_p] and op(B)[p,j] is b[p * b_p + j * b_j]:
 * (a_i, a_p) = (lda, 1), or (1, lda) when A is transposed; (b_p, b_j) =
 * (ldb, 1), or (1, ldb) when B is. */

/* C's starting value: beta * C, or 0 for beta == 0 (C unread: it may be
 * an uninitialised arena, even NaNs). */
static float gemm_start(float beta, const float *c)
{
    return beta == 0.0f ? 0.0f : beta * *c;
}

void rt_sgemm_ref(int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta,
                  float *c, int ldc)
{
    const size_t a_i = trans_a ? 1 : (size_t)lda, a_p = trans_a ? (size_t)lda : 1;
    const size_t b_p = trans_b ? 1 : (size_t)ldb, b_j = trans_b ? (size_t)ldb : 1;
    int i, j, p;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            float s = gemm_start(beta, &c[(size_t)i * ldc + j]);
            if (alpha != 0.0f)
                for (p = 0; p < k; p++)
                    s += alpha * a[i * a_i + p * a_p] * b[p * b_p + j * b_j];
            c[(size_t)i * ldc + j] = s;
        }
}

/* One 4 x 4 tile of C: sixteen sums in registers; each step p reads four
 * values of op(A)'s column p and four of op(B)'s row p and does sixteen
 * multiply-adds, every sum still in the order of p. With constant strides
 * the compiler walks each operand with a pointer and immediate offsets: on
 * a Cortex-M4, 8 loads, 16 multiplies, 16 adds and the pointer and loop
 * updates per step, 2.9 instructions a multiply-add (docs/firmware.md). */
#define RT_TILE_ROW(r)                                                     \
    s##r##0 += x##r * y0;                                                  \
    s##r##1 += x##r * y1;                                                  \
    s##r##2 += x##r * y2;                                                  \
    s##r##3 += x##r * y3
#define RT_TILE_LOAD(r)                                                    \
    s##r##0 = gemm_start(beta, &c[r * (size_t)ldc + 0]);                   \
    s##r##1 = gemm_start(beta, &c[r * (size_t)ldc + 1]);                   \
    s##r##2 = gemm_start(beta, &c[r * (size_t)ldc + 2]);                   \
    s##r##3 = gemm_start(beta, &c[r * (size_t)ldc + 3])
#define RT_TILE_STORE(r)                                                   \
    c[r * (size_t)ldc + 0] = s##r##0;                                      \
    c[r * (size_t)ldc + 1] = s##r##1;                                      \
    c[r * (size_t)ldc + 2] = s##r##2;                                      \
    c[r * (size_t)ldc + 3] = s##r##3

RT_INLINE void gemm_tile4x4(int k, int scaled, float alpha, const float *a,
                            size_t a_i, size_t a_p, const float *b,
                            size_t b_p, size_t b_j, float beta, float *c,
                            int ldc)
{
    float s00, s01, s02, s03, s10, s11, s12, s13;
    float s20, s21, s22, s23, s30, s31, s32, s33;
    int p;
    RT_TILE_LOAD(0);
    RT_TILE_LOAD(1);
    RT_TILE_LOAD(2);
    RT_TILE_LOAD(3);
    for (p = 0; p < k; p++) {
        float x0 = a[0], x1 = a[a_i], x2 = a[2 * a_i], x3 = a[3 * a_i];
        const float y0 = b[0], y1 = b[b_j], y2 = b[2 * b_j], y3 = b[3 * b_j];
        if (scaled) {
            x0 *= alpha;
            x1 *= alpha;
            x2 *= alpha;
            x3 *= alpha;
        }
        RT_TILE_ROW(0);
        RT_TILE_ROW(1);
        RT_TILE_ROW(2);
        RT_TILE_ROW(3);
        a += a_p;
        b += b_p;
    }
    RT_TILE_STORE(0);
    RT_TILE_STORE(1);
    RT_TILE_STORE(2);
    RT_TILE_STORE(3);
}

/* One element, the edges' path: the same sum. */
RT_INLINE float gemm_dot(int k, int scaled, float alpha, const float *a,
                         size_t a_p, const float *b, size_t b_p, float s)
{
    int p;
    for (p = 0; p < k; p++)
        s += (scaled ? alpha * a[p * a_p] : a[p * a_p]) * b[p * b_p];
    return s;
}

/* Where vector registers are wide and B is not transposed, a row of C at a
 * time: c_row += (alpha * op(A)[i,p]) * B[p,:] for p in order, the same
 * sums, which the compiler vectorizes along the row (x86-64 and AArch64;
 * define RT_GEMM_TILES to use the tiles there too). */
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(RT_GEMM_TILES)
#define RT_GEMM_ROWS 1
#else
#define RT_GEMM_ROWS 0
#endif

RT_INLINE void gemm_rows(int m, int n, int k, int scaled, float alpha,
                         const float *a, size_t a_i, size_t a_p,
                         const float *b, size_t b_p, float beta, float *c,
                         int ldc)
{
    int i, j, p;
    for (i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        for (j = 0; j < n; j++)
            ci[j] = gemm_start(beta, &ci[j]);
        for (p = 0; p < k; p++) {
            const float x = a[i * a_i + p * a_p],
                        aip = scaled ? alpha * x : x;
            const float *bp = b + p * b_p;
            for (j = 0; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
}

/* C over m x n in 4 x 4 tiles, the last rows and columns one element at a
 * time. */
RT_INLINE void gemm_blocked(int m, int n, int k, int scaled, float alpha,
                            const float *a, size_t a_i, size_t a_p,
                            const float *b, size_t b_p, size_t b_j,
                            float beta, float *c, int ldc)
{
    const int m4 = m - m % 4, n4 = n - n % 4;
    int i, j;
    if (RT_GEMM_ROWS && b_j == 1) {
        gemm_rows(m, n, k, scaled, alpha, a, a_i, a_p, b, b_p, beta, c, ldc);
        return;
    }
    for (i = 0; i < m4; i += 4)
        for (j = 0; j < n4; j += 4)
            gemm_tile4x4(k, scaled, alpha, a + i * a_i, a_i, a_p,
                         b + j * b_j, b_p, b_j, beta,
                         c + (size_t)i * ldc + j, ldc);
    for (i = 0; i < m; i++)
        for (j = i < m4 ? n4 : 0; j < n; j++) {
            float *cij = c + (size_t)i * ldc + j;
            *cij = gemm_dot(k, scaled, alpha, a + i * a_i, a_p, b + j * b_j,
                            b_p, gemm_start(beta, cij));
        }
}

/* rt_sgemm without BLAS: gemm_blocked with the strides a transpose makes 1
 * written as constants, and alpha == 1 apart, one instance per case. */
#define RT_GEMM_CASES(scaled)                                              \
    if (!trans_a && !trans_b)                                              \
        gemm_blocked(m, n, k, scaled, alpha, a, la, 1, b, lb, 1, beta, c, ldc); \
    else if (!trans_a)                                                     \
        gemm_blocked(m, n, k, scaled, alpha, a, la, 1, b, 1, lb, beta, c, ldc); \
    else if (!trans_b)                                                     \
        gemm_blocked(m, n, k, scaled, alpha, a, 1, la, b, lb, 1, beta, c, ldc); \
    else                                                                   \
        gemm_blocked(m, n, k, scaled, alpha, a, 1, la, b, 1, lb, beta, c, ldc)

#ifndef RT_GEMM_SMALL
static void gemm_portable(int trans_a, int trans_b, int m, int n, int k,
                          float alpha, const float *a, int lda,
                          const float *b, int ldb, float beta, float *c,
                          int ldc)
{
    const size_t la = (size_t)lda, lb = (size_t)ldb;
    if (alpha == 0.0f)
        k = 0;  /* C = beta * C: A and B unread */
    if (alpha == 1.0f) {
        RT_GEMM_CASES(0);
    } else {
        RT_GEMM_CASES(1);
    }
}
#endif

/* One GEMM on the calling thread: OpenBLAS's (which may use threads of
 * its own), or the portable one. */
static void sgemm_here(int trans_a, int trans_b, int m, int n, int k,
                       float alpha, const float *a, int lda, const float *b,
                       int ldb, float beta, float *c, int ldc)
{
#ifndef RT_NO_BLAS
    /* BLAS rejects (via xerbla) leading dimensions below 1, which callers
     * naturally pass for empty operands; the loops handle those cases. */
    if (m > 0 && n > 0 && k > 0) {
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
                    lda, b, ldb, beta, c, ldc);
        return;
    }
#endif
#ifdef RT_GEMM_SMALL
    rt_sgemm_ref(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                 ldc);
#else
    gemm_portable(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                  ldc);
#endif
}

/* A GEMM split over the runtime's threads: by rows of C (rows != 0) or by
 * its columns, each part a GEMM of its own on one thread. */
typedef struct {
    int trans_a, trans_b, m, n, k, lda, ldb, ldc, rows;
    float alpha, beta;
    const float *a, *b;
    float *c;
} gemm_split;

static void gemm_part(void *ctx, size_t lo, size_t hi)
{
    const gemm_split *g = ctx;
    const int w = (int)(hi - lo);
    if (g->rows)
        sgemm_here(g->trans_a, g->trans_b, w, g->n, g->k, g->alpha,
                   g->trans_a ? g->a + lo : g->a + lo * (size_t)g->lda,
                   g->lda, g->b, g->ldb, g->beta, g->c + lo * (size_t)g->ldc,
                   g->ldc);
    else
        sgemm_here(g->trans_a, g->trans_b, g->m, w, g->k, g->alpha, g->a,
                   g->lda,
                   g->trans_b ? g->b + lo * (size_t)g->ldb : g->b + lo,
                   g->ldb, g->beta, g->c + lo, g->ldc);
}

/* Below this many multiply-adds a GEMM stays whole on the calling thread:
 * measured on the 2-core EPYC, a 256x128x128 GEMM (4M) took 70 us whole
 * and 41 in two halves on two threads, where OpenBLAS's own two threads
 * gave none of it (68 us); a 32x144x196 (0.9M) 16 us whole. */
#define RT_PAR_GEMM ((size_t)1 << 19)

void rt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc)
{
    gemm_split g;
#if defined(RT_TRACE_GEMM) && !defined(RT_NO_STDIO)
    /* For the benchmark's GEMM floor: the calls a step makes, replayed
     * alone by bench/gemm_floor.c. */
    fprintf(stderr, "rt_sgemm %d %d %d %d %d %d %d %d %.9g %.9g %p %p %p\n",
            trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta,
            (const void *)a, (const void *)b, (void *)c);
#endif
    /* The larger side of C is split, into one part per thread: a part
     * packs the whole of the other operand again, so fewer and larger
     * parts waste less. Columns go in multiples of 16 floats (a cache
     * line) so that two threads do not write one. */
    if (rt_threads() == 1 || m <= 0 || n <= 0 || k <= 0 ||
        (size_t)m * (size_t)n * (size_t)k < RT_PAR_GEMM || (m < 32 && n < 32)) {
        sgemm_here(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                   ldc);
        return;
    }
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = m;
    g.n = n;
    g.k = k;
    g.lda = lda;
    g.ldb = ldb;
    g.ldc = ldc;
    g.rows = m >= n;
    g.alpha = alpha;
    g.beta = beta;
    g.a = a;
    g.b = b;
    g.c = c;
    rt_parallel_parts((size_t)(g.rows ? m : n), g.rows ? 1 : 16, 1, gemm_part,
                      &g);
}

/* Index into c (c_rows x c_cols) of output element (i, j). */
static size_t bias_at(int i, int j, int c_rows, int c_cols)
{
    return (size_t)(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j);
}

/* The bias's part of the forward, y = beta * c broadcast, by rows of y;
 * of the backward, dc += beta * dy summed over the broadcast dims (out is
 * dc, in is dy). */
typedef struct {
    float *out;
    const float *in;
    int m, n, c_rows, c_cols;
    float beta;
} bias_job;

static void bias_rows(void *ctx, size_t lo, size_t hi)
{
    const bias_job *b = ctx;
    int i, j;
    for (i = (int)lo; i < (int)hi; i++)
        for (j = 0; j < b->n; j++)
            b->out[(size_t)i * b->n + j] =
                b->beta * b->in[bias_at(i, j, b->c_rows, b->c_cols)];
}

/* The sum of beta * dy over rows [lo, hi) and columns [j0, j1), row by
 * row, an rt_sum (rt_impl.h) added to dc entry `at`. */
static void bias_back_sum(const bias_job *b, size_t at, int lo, int hi,
                          int j0, int j1)
{
    rt_sum s;
    int i, j;
    rt_sum_init(&s);
    for (i = lo; i < hi; i++)
        for (j = j0; j < j1; j++)
            rt_sum_add(&s, b->beta * b->in[(size_t)i * b->n + j]);
    b->out[at] += rt_sum_value(&s);
}

/* dc with one entry per row: rows [lo, hi), each summed over the columns
 * when dc has one column, else each entry dy's one term. */
static void bias_back_rows(void *ctx, size_t lo, size_t hi)
{
    const bias_job *b = ctx;
    int i, j;
    for (i = (int)lo; i < (int)hi; i++) {
        if (b->c_cols == 1) {
            bias_back_sum(b, (size_t)i, i, i + 1, 0, b->n);
            continue;
        }
        for (j = 0; j < b->n; j++)
            b->out[(size_t)i * b->n + j] +=
                b->beta * b->in[(size_t)i * b->n + j];
    }
}

/* dc one row (a Linear's bias): columns [lo, hi), each summed over the
 * rows. */
static void bias_back_cols(void *ctx, size_t lo, size_t hi)
{
    const bias_job *b = ctx;
    float part[32]; /* 32 columns at a time, rows in memory order: each */
    rt_sum acc[32]; /* column an rt_sum kept as arrays, the same bits */
    size_t j0, j, w;
    int i, n;
    for (j0 = lo; j0 < hi; j0 += w) {
        w = hi - j0 < 32 ? hi - j0 : 32;
        for (j = 0; j < w; j++) {
            rt_sum_init(&acc[j]);
            part[j] = 0.0f;
        }
        for (i = 0, n = 0; i < b->m; i++) {
            const float *row = b->in + (size_t)i * b->n + j0;
            for (j = 0; j < w; j++)
                part[j] += b->beta * row[j];
            if (++n == RT_SUM_BLOCK) {
                for (j = 0; j < w; j++) {
                    rt_sum_fold(&acc[j], part[j]);
                    part[j] = 0.0f;
                }
                n = 0;
            }
        }
        for (j = 0; j < w; j++) {
            acc[j].part = part[j];
            b->out[j0 + j] += rt_sum_value(&acc[j]);
        }
    }
}

/* Each dc entry is summed on one thread in row order, as one thread would:
 * split by rows when dc has one per row, by columns when it is one row
 * (a Linear's bias: column j sums over every row), not at all for a
 * scalar. */
static void bias_back(float *dc, const float *dy, int m, int n, float beta,
                      int c_rows, int c_cols)
{
    const bias_job job = {dc, dy, m, n, c_rows, c_cols, beta};
    const size_t work = (size_t)m * n;
    if (c_rows != 1)
        rt_parallel_for((size_t)m, 1, work, RT_PAR_CHEAP, bias_back_rows,
                        (void *)&job);
    else if (c_cols != 1)
        rt_parallel_for((size_t)n, 16, work, RT_PAR_CHEAP, bias_back_cols,
                        (void *)&job);
    else
        bias_back_sum(&job, 0, 0, m, 0, n);
}

void rt_gemm_forward(float *y, const float *a, const float *b, const float *c,
                     int m, int n, int k, int trans_a, int trans_b,
                     float alpha, float beta, int c_rows, int c_cols)
{
    float acc = 0.0f; /* sgemm's beta: 0 leaves y unread */
    /* beta == 0 skips c entirely, as BLAS does, rather than computing
     * 0 * c (which would turn an inf or NaN in c into NaN). */
    if (c != NULL && beta != 0.0f) {
        const bias_job job = {y, c, m, n, c_rows, c_cols, beta};
        rt_parallel_for((size_t)m, 1, (size_t)m * n, RT_PAR_CHEAP, bias_rows,
                        (void *)&job);
        acc = 1.0f;
    }
    rt_sgemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b,
             trans_b ? k : n, acc, y, n);
}

/* With y = alpha * opA * opB: d(opA) = alpha * dy * opB^T and
 * d(opB) = alpha * opA^T * dy. When an operand is stored transposed its
 * gradient is the transpose of that, which we get by swapping the product's
 * factors instead of transposing anything in memory. */
/* A written gradient is the GEMM's beta 0 (C unread); a written dc, a sum
 * over the broadcast dims, is zeroed and summed into. */
void rt_gemm_backward_set(float *da, float *db, float *dc, const float *dy,
                          const float *a, const float *b, int m, int n, int k,
                          int trans_a, int trans_b, float alpha, float beta,
                          int c_rows, int c_cols, unsigned set)
{
    const int lda = trans_a ? m : k, ldb = trans_b ? k : n;
    const float keep_a = set & 1u ? 0.0f : 1.0f, keep_b = set & 2u ? 0.0f : 1.0f;
    if (da != NULL) {
        if (!trans_a) /* da (m x k) += alpha * dy * opB^T */
            rt_sgemm(0, !trans_b, m, k, n, alpha, dy, n, b, ldb, keep_a, da, k);
        else          /* da (k x m) += alpha * opB * dy^T */
            rt_sgemm(trans_b, 1, k, m, n, alpha, b, ldb, dy, n, keep_a, da, m);
    }
    if (db != NULL) {
        if (!trans_b) /* db (k x n) += alpha * opA^T * dy */
            rt_sgemm(!trans_a, 0, k, n, m, alpha, a, lda, dy, n, keep_b, db, n);
        else          /* db (n x k) += alpha * dy^T * opA */
            rt_sgemm(1, trans_a, n, k, m, alpha, dy, n, a, lda, keep_b, db, k);
    }
    if (dc != NULL) {
        if (set & 4u)
            rt_zero(dc, (size_t)c_rows * (size_t)c_cols);
        bias_back(dc, dy, m, n, beta, c_rows, c_cols);
    }
}

void rt_gemm_backward(float *da, float *db, float *dc, const float *dy,
                      const float *a, const float *b,
                      int m, int n, int k, int trans_a, int trans_b,
                      float alpha, float beta, int c_rows, int c_cols)
{
    rt_gemm_backward_set(da, db, dc, dy, a, b, m, n, k, trans_a, trans_b,
                         alpha, beta, c_rows, c_cols, 0);
}

/* True when the batch is A's matrices in a row against one B, the shape of
 * a linear layer applied to a batch (x (B, T, k) times W (k, n)): A's
 * matrices are then one (batch*m x k) matrix and y one (batch*m x n), so a
 * single GEMM does the whole product, and BLAS gets one large call instead
 * of `batch` small ones. */
static int bmm_stacks_a(const rt_bmm *p)
{
    int i;
    for (i = 1; i < p->batch; i++)
        if (p->a_index[i] != p->a_index[0] + i ||
            p->b_index[i] != p->b_index[0])
            return 0;
    return 1;
}

static const float *bmm_a(const float *a, const rt_bmm *p, int i)
{
    return a + (size_t)p->a_index[i] * p->m * p->k;
}

static const float *bmm_b(const float *b, const rt_bmm *p, int i)
{
    return b + (size_t)p->b_index[i] * p->k * p->n;
}

void rt_bmm_forward(float *y, const float *a, const float *b, const rt_bmm *p)
{
    const int m = p->m, n = p->n, k = p->k;
    int i;
    if (p->batch <= 0)
        return;
    if (bmm_stacks_a(p)) {
        rt_sgemm(0, 0, p->batch * m, n, k, 1.0f, bmm_a(a, p, 0), k,
                 bmm_b(b, p, 0), n, 0.0f, y, n);
        return;
    }
    for (i = 0; i < p->batch; i++)
        rt_sgemm(0, 0, m, n, k, 1.0f, bmm_a(a, p, i), k, bmm_b(b, p, i), n,
                 0.0f, y + (size_t)i * m * n, n);
}

/* Gradients are written through index arithmetic on the (non-const) da and
 * db, the same offsets as bmm_a and bmm_b. Products are summed in order of
 * i, so a broadcast matrix accumulates every output's share. */
void rt_bmm_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bmm *p)
{
    const int m = p->m, n = p->n, k = p->k;
    const size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
    int i, rows = m, count = p->batch;
    if (p->batch <= 0)
        return;
    if (bmm_stacks_a(p)) { /* one GEMM each, as in the forward */
        rows = p->batch * m;
        count = 1;
    }
    for (i = 0; i < count; i++) {
        const float *dyi = dy + (size_t)i * mn;
        if (da != NULL) /* dA (rows x k) += dy (rows x n) * B^T */
            rt_sgemm(0, 1, rows, k, n, 1.0f, dyi, n, bmm_b(b, p, i), n, 1.0f,
                     da + (size_t)p->a_index[i] * mk, k);
        if (db != NULL) /* dB (k x n) += A^T (k x rows) * dy (rows x n) */
            rt_sgemm(1, 0, k, n, rows, 1.0f, bmm_a(a, p, i), k, dyi, n, 1.0f,
                     db + (size_t)p->b_index[i] * kn, n);
    }
}
