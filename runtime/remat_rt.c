/*
 * remat_rt.c: the runtime behind remat_rt.h.
 *
 * C99, no allocation: every buffer, including scratch, is the caller's or a
 * small fixed array on the stack; the thread pool is a static struct. With
 * RT_NO_STDIO nothing from <stdio.h> is used, so the file builds for
 * targets without a C library's I/O.
 */
/* The thread pool needs POSIX threads and GCC's __atomic builtins (gcc and
 * clang): a firmware build (RT_NO_STDIO, or a target that is not Unix)
 * leaves it out and runs every kernel on the calling thread. */
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

#ifndef RT_NO_THREADS
#include <pthread.h>
#include <sched.h>
#endif

#ifndef RT_NO_BLAS
#include <cblas.h>
#endif

#ifndef RT_NO_STDIO
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#endif

/* Strict C99 has no M_PI & co.; spell the constants out (float-rounded). */
#define RT_INV_SQRT2      0.70710678118654752f /* 1/sqrt(2) */
#define RT_INV_SQRT_2PI   0.39894228040143268f /* 1/sqrt(2*pi) */
#define RT_SQRT_2_OVER_PI 0.79788456080286536f /* sqrt(2/pi) */
#define RT_GELU_CUBIC     0.044715f
#define RT_TWO_PI         6.28318530717958648f

/* ---- threads --------------------------------------------------------------- */

/* The runtime's kernels split their work over rt_set_threads' threads and
 * give the same bits for every count (remat_rt.h). What this does not
 * cover is cblas_sgemm: OpenBLAS splits a GEMM over threads of its own and
 * promises no bits across thread counts; on gpt its gradients do differ
 * between OPENBLAS_NUM_THREADS=1 and 2 (tests/e2e/test_threads.sh). The
 * trainer's --threads sets both counts; for bits that do not depend on it,
 * build with RT_NO_BLAS (the portable GEMM runs on the calling thread). */

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

#ifdef RT_NO_THREADS

void rt_set_threads(int n)
{
    (void)n;
}

int rt_threads(void)
{
    return 1;
}

static void parallel_for(size_t n, size_t align, size_t work, size_t min_work,
                         rt_chunk_fn fn, void *ctx)
{
    (void)align;
    (void)work;
    (void)min_work;
    fn(ctx, 0, n);
}

static void parallel_parts(size_t n, size_t align, size_t per_thread,
                           rt_chunk_fn fn, void *ctx)
{
    (void)align;
    (void)per_thread;
    fn(ctx, 0, n);
}

#else

/* Edge i of n items cut into parts contiguous chunks, rounded up to a
 * multiple of align (so two threads do not write one cache line). It
 * depends on the thread count, so a chunk function must compute each item
 * as it would alone: what the split changes is who does an item, never
 * how. */
static size_t chunk_edge(size_t n, size_t align, int i, int parts)
{
    size_t e = n / (size_t)parts * (size_t)i +
               n % (size_t)parts * (size_t)i / (size_t)parts;
    e = (e + align - 1) / align * align;
    return e < n ? e : n;
}

/* One job at a time. The caller publishes it by bumping gen under the
 * mutex; the caller and the workers then claim chunks (claim_chunk) until
 * none is left, and the caller waits for `left` (chunks not finished) to
 * reach 0. A worker spins on gen for a while after its last job (kernels
 * come back to back in a step), then sleeps on `work`; the caller waits
 * the same way (spin, then `done`). Claiming, rather than chunk i for
 * thread i, means a worker the system has not scheduled yet costs the
 * caller nothing: it does the chunks itself (a shared machine). A job has
 * 4 chunks per thread (at most 64: claim keeps the count in 8 bits), so
 * that a late worker still finds some. The job's fields are written before
 * claim's and gen's release stores. */
#define RT_CHUNKS_PER_THREAD 4
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t tid[RT_MAX_THREADS];
    unsigned born[RT_MAX_THREADS]; /* gen when worker i started */
    int want;                      /* rt_set_threads' n */
    int started;                   /* workers running: want - 1 once up */
    int busy;                      /* a job is running: no nesting */
    int stop;                      /* workers exit at the next gen */
    unsigned gen;
    unsigned claim;                /* parts << 8 | the next chunk */
    unsigned left;                 /* chunks not finished */
    rt_chunk_fn fn;
    void *ctx;
    size_t n, align;
} rt_pool;

static rt_pool pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .want = 1,
};

/* About 20-50 microseconds of pause: long enough to bridge the gap between
 * two kernels, short enough not to take a core from OpenBLAS's threads for
 * long while the step is in a GEMM. */
#ifndef RT_SPIN
#define RT_SPIN 4000
#endif

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Whether *word equals value (equal) or differs from it (!equal). */
static int word_is(unsigned *word, unsigned value, int equal)
{
    return (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value) == equal;
}

/* Spins, then sleeps on cv, until word_is(word, value, equal). Whoever
 * changes the word signals cv holding the mutex, so the sleeper, which
 * tests under the mutex, cannot miss it. */
static void wait_for(unsigned *word, unsigned value, int equal,
                     pthread_cond_t *cv)
{
    int i;
    for (i = 0; i < RT_SPIN; i++) {
        if (word_is(word, value, equal))
            return;
        if (i % 16 == 15)
            sched_yield();
        else
            cpu_relax();
    }
    pthread_mutex_lock(&pool.mu);
    while (!word_is(word, value, equal))
        pthread_cond_wait(cv, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
}

/* Claims a chunk of the current job: claim is parts << 8 | next, and a
 * compare-and-swap from (parts, i) to (parts, i + 1) with i < parts can
 * only succeed while that job is current with chunk i unclaimed. So a
 * worker that is late (it saw an older gen, or loaded claim before the
 * caller moved on) claims nothing, or a chunk of the job then running,
 * whose fields the successful exchange makes visible. */
static int claim_chunk(unsigned *chunk, unsigned *parts)
{
    unsigned w = __atomic_load_n(&pool.claim, __ATOMIC_ACQUIRE);
    for (;;) {
        if ((w & 0xffu) >= w >> 8)
            return 0;
        if (__atomic_compare_exchange_n(&pool.claim, &w, w + 1u, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            *chunk = w & 0xffu;
            *parts = w >> 8;
            return 1;
        }
    }
}

/* Claims and runs chunks until none is left; the one finishing the job's
 * last chunk wakes the caller. */
static void run_chunks(void)
{
    unsigned c, parts;
    while (claim_chunk(&c, &parts)) {
        const size_t lo = chunk_edge(pool.n, pool.align, (int)c, (int)parts);
        const size_t hi = chunk_edge(pool.n, pool.align, (int)c + 1,
                                     (int)parts);
        if (lo < hi)
            pool.fn(pool.ctx, lo, hi);
        if (__atomic_sub_fetch(&pool.left, 1u, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
}

static void *worker(void *arg)
{
    unsigned seen = pool.born[(size_t)arg];
    for (;;) {
        wait_for(&pool.gen, seen, 0, &pool.work);
        seen = __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&pool.stop, __ATOMIC_ACQUIRE))
            return NULL;
        run_chunks();
    }
}

/* Starts the missing workers (the first parallel job after
 * rt_set_threads); fewer threads if the system refuses more. */
static void start_workers(void)
{
    while (pool.started < pool.want - 1) {
        const int id = pool.started + 1;
        pool.born[id] = pool.gen;
        if (pthread_create(&pool.tid[id], NULL, worker, (void *)(size_t)id)) {
            pool.want = id;
            return;
        }
        pool.started = id;
    }
}

static void stop_workers(void)
{
    int i;
    if (pool.started == 0)
        return;
    pthread_mutex_lock(&pool.mu);
    __atomic_store_n(&pool.stop, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&pool.gen, pool.gen + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    for (i = 1; i <= pool.started; i++)
        pthread_join(pool.tid[i], NULL);
    __atomic_store_n(&pool.stop, 0, __ATOMIC_RELEASE);
    pool.started = 0;
}

void rt_set_threads(int n)
{
    n = n < 1 ? 1 : n > RT_MAX_THREADS ? RT_MAX_THREADS : n;
    if (n == pool.want)
        return;
    stop_workers();
    pool.want = n;
}

int rt_threads(void)
{
    return pool.want;
}

/* fn over items [0, n) in per_thread chunks for each thread, on every
 * thread (all on the calling thread when there is one, or a job is
 * already running). */
static void parallel_parts(size_t n, size_t align, size_t per_thread,
                           rt_chunk_fn fn, void *ctx)
{
    size_t parts = (size_t)pool.want * per_thread;
    if (pool.want == 1 || pool.busy || n < 2) {
        fn(ctx, 0, n);
        return;
    }
    start_workers();
    if (pool.started == 0) {
        fn(ctx, 0, n);
        return;
    }
    pool.busy = 1;
    pthread_mutex_lock(&pool.mu);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.align = align;
    if (parts > n)
        parts = n;
    __atomic_store_n(&pool.left, (unsigned)parts, __ATOMIC_RELEASE);
    __atomic_store_n(&pool.claim, (unsigned)parts << 8, __ATOMIC_RELEASE);
    __atomic_store_n(&pool.gen, pool.gen + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    run_chunks();
    wait_for(&pool.left, 0, 1, &pool.done);
    pool.busy = 0;
}

/* fn over items [0, n) in chunks, on every thread, when the kernel touches
 * at least min_work floats (work); else all on the calling thread. */
static void parallel_for(size_t n, size_t align, size_t work, size_t min_work,
                         rt_chunk_fn fn, void *ctx)
{
    if (work < min_work)
        fn(ctx, 0, n);
    else
        parallel_parts(n, align, RT_CHUNKS_PER_THREAD, fn, ctx);
}

#endif /* RT_NO_THREADS */

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

/* The tile and the loops around it must be inlined into each case of
 * gemm_portable for their constant strides and alpha to count; compilers
 * that do not know the attribute get the same code, slower. */
#if defined(__GNUC__)
#define RT_INLINE static inline __attribute__((always_inline))
#else
#define RT_INLINE static inline
#endif

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
    parallel_parts((size_t)(g.rows ? m : n), g.rows ? 1 : 16, 1, gemm_part,
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

/* Rows [lo, hi) and columns [j0, j1) of the backward's sum, row by row. */
static void bias_back_block(const bias_job *b, int lo, int hi, int j0, int j1)
{
    int i, j;
    for (i = lo; i < hi; i++)
        for (j = j0; j < j1; j++)
            b->out[bias_at(i, j, b->c_rows, b->c_cols)] +=
                b->beta * b->in[(size_t)i * b->n + j];
}

static void bias_back_rows(void *ctx, size_t lo, size_t hi)
{
    const bias_job *b = ctx;
    bias_back_block(b, (int)lo, (int)hi, 0, b->n);
}

static void bias_back_cols(void *ctx, size_t lo, size_t hi)
{
    const bias_job *b = ctx;
    bias_back_block(b, 0, b->m, (int)lo, (int)hi);
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
        parallel_for((size_t)m, 1, work, RT_PAR_CHEAP, bias_back_rows,
                     (void *)&job);
    else if (c_cols != 1)
        parallel_for((size_t)n, 16, work, RT_PAR_CHEAP, bias_back_cols,
                     (void *)&job);
    else
        bias_back_block(&job, 0, m, 0, n);
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
        parallel_for((size_t)m, 1, (size_t)m * n, RT_PAR_CHEAP, bias_rows,
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

/* ---- broadcasting binary ops ---------------------------------------------- */

/* Everything a row kernel may touch; unused members are NULL. For the binary
 * ops y/dy are the output side and a/b (da/db) the inputs; the reductions put
 * x (or dx) in a (da) and y (or dy) in y (dy). */
typedef struct {
    float *y, *da, *db;
    const float *a, *b, *dy;
    float scale;
    unsigned set;   /* backward rows: bit 0 da, bit 1 db written, not added */
} bc_args;

/* One innermost row of n elements: the output (walked in order) starts at
 * oy, a at oa with stride sa, b at ob with stride sb. Offsets, not pointers,
 * so that a NULL gradient never takes part in pointer arithmetic. */
typedef void (*bc_row)(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                       ptrdiff_t ob, int n, int sa, int sb);

/* Runs `row` over innermost rows [lo, hi) of m's index space (rank >= 1,
 * no empty dim), keeping the offsets of a and b up to date with an odometer
 * over the outer dims, started at row lo's digits. */
static void bc_rows(const rt_bcast *m, const bc_args *p, bc_row row,
                    size_t lo, size_t hi)
{
    int idx[RT_MAX_RANK] = {0};
    const int r = m->rank, n = m->dims[r - 1];
    ptrdiff_t oa = 0, ob = 0;
    size_t q = lo, k;
    int d;
    for (d = r - 2; d >= 0; d--) {
        idx[d] = (int)(q % (size_t)m->dims[d]);
        q /= (size_t)m->dims[d];
        oa += (ptrdiff_t)idx[d] * m->sa[d];
        ob += (ptrdiff_t)idx[d] * m->sb[d];
    }
    for (k = lo; k < hi; k++) {
        row(p, (ptrdiff_t)k * n, oa, ob, n, m->sa[r - 1], m->sb[r - 1]);
        for (d = r - 2; d >= 0; d--) {
            oa += m->sa[d];
            ob += m->sb[d];
            if (++idx[d] < m->dims[d])
                break;
            idx[d] = 0;
            oa -= (ptrdiff_t)m->dims[d] * m->sa[d];
            ob -= (ptrdiff_t)m->dims[d] * m->sb[d];
        }
    }
}

/* The number of innermost rows, 0 when a dim is empty; -1 for a scalar. */
static long bc_count_rows(const rt_bcast *m)
{
    long rows = 1;
    int d;
    if (m->rank <= 0)
        return -1;
    for (d = 0; d < m->rank; d++)
        if (m->dims[d] <= 0)
            return 0;
    for (d = 0; d < m->rank - 1; d++)
        rows *= m->dims[d];
    return rows;
}

/* Runs `row` over every innermost row of m's index space, in order. */
static void bc_run(const rt_bcast *m, const bc_args *p, bc_row row)
{
    const long rows = bc_count_rows(m);
    if (rows < 0) /* a scalar */
        row(p, 0, 0, 0, 1, 0, 0);
    else
        bc_rows(m, p, row, 0, (size_t)rows);
}

typedef struct {
    const rt_bcast *m;
    const bc_args *p;
    bc_row row;
} bc_job;

static void bc_part_rows(void *ctx, size_t lo, size_t hi)
{
    const bc_job *j = ctx;
    bc_rows(j->m, j->p, j->row, lo, hi);
}

/* Elements [lo, hi) of a map that is one row. */
static void bc_part_elems(void *ctx, size_t lo, size_t hi)
{
    const bc_job *j = ctx;
    const int r = j->m->rank, sa = j->m->sa[r - 1], sb = j->m->sb[r - 1];
    j->row(j->p, (ptrdiff_t)lo, (ptrdiff_t)lo * sa, (ptrdiff_t)lo * sb,
           (int)(hi - lo), sa, sb);
}

/* bc_run split over threads, for a row function whose elements are
 * independent: each writes its own output (not a sum over a broadcast
 * dim). Rows when there are several, else the one row's elements. */
static void bc_run_split(const rt_bcast *m, const bc_args *p, bc_row row)
{
    const long rows = bc_count_rows(m);
    bc_job job;
    size_t n;
    if (rows <= 0) {
        bc_run(m, p, row);
        return;
    }
    job.m = m;
    job.p = p;
    job.row = row;
    n = (size_t)m->dims[m->rank - 1];
    if (rows == 1)
        parallel_for(n, 16, n, RT_PAR_CHEAP, bc_part_elems, &job);
    else
        parallel_for((size_t)rows, 1, (size_t)rows * n, RT_PAR_CHEAP,
                     bc_part_rows, &job);
}

/* Whether a gradient written through strides s is a sum over some dim
 * (stride 0 along a dim longer than 1): then its elements are not
 * independent and the backward stays on one thread. */
static int bc_sums(const rt_bcast *m, const int *s)
{
    int d;
    for (d = 0; d < m->rank; d++)
        if (m->dims[d] > 1 && s[d] == 0)
            return 1;
    return 0;
}

/* Forward rows. The unit-stride branch is the plain loop that equal shapes
 * (collapsed by the compiler to rank 1) run, and that vectorises. */
#define RT_BINARY_ROW(name, OP)                                              \
    static void name(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,           \
                     ptrdiff_t ob, int n, int sa, int sb)                    \
    {                                                                        \
        float *y = p->y + oy;                                                \
        const float *a = p->a + oa, *b = p->b + ob;                          \
        int j;                                                               \
        if (sa == 1 && sb == 1) {                                            \
            for (j = 0; j < n; j++)                                          \
                y[j] = a[j] OP b[j];                                         \
        } else {                                                             \
            for (j = 0; j < n; j++)                                          \
                y[j] = a[(ptrdiff_t)j * sa] OP b[(ptrdiff_t)j * sb];         \
        }                                                                    \
    }

RT_BINARY_ROW(add_row, +)
RT_BINARY_ROW(sub_row, -)
RT_BINARY_ROW(mul_row, *)
RT_BINARY_ROW(div_row, /)

static void binary(float *y, const float *a, const float *b,
                   const rt_bcast *m, bc_row row)
{
    bc_args p = {NULL, NULL, NULL, NULL, NULL, NULL, 0.0f, 0u};
    p.y = y;
    p.a = a;
    p.b = b;
    bc_run_split(m, &p, row);
}

void rt_add_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, add_row);
}

void rt_sub_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, sub_row);
}

void rt_mul_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, mul_row);
}

void rt_div_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, div_row);
}

/* Backward rows. A stride of 0 makes every element of the row land on the
 * same gradient entry, which is exactly the sum over the broadcast dim.
 * Each update reads and writes memory afresh, so da == db (and a == b, as in
 * Mul(d, d)) simply accumulates both contributions. */
static void add_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        if (p->da != NULL)
            p->da[oa + (ptrdiff_t)j * sa] += dy[j];
        if (p->db != NULL)
            p->db[ob + (ptrdiff_t)j * sb] += p->scale * dy[j];
    }
}

static void mul_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        if (p->da != NULL)
            p->da[ia] += dy[j] * p->b[ib];
        if (p->db != NULL)
            p->db[ib] += dy[j] * p->a[ia];
    }
}

/* d(a/b)/db = -a/b^2, computed as (dy/b) * (a/b) so that b*b cannot
 * overflow or underflow on its own. */
static void div_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        const float q = dy[j] / p->b[ib];
        if (p->da != NULL)
            p->da[ia] += q;
        if (p->db != NULL)
            p->db[ib] -= q * (p->a[ia] / p->b[ib]);
    }
}

static void binary_back(float *da, float *db, const float *dy, const float *a,
                        const float *b, const rt_bcast *m, float scale,
                        bc_row row)
{
    bc_args p = {NULL, NULL, NULL, NULL, NULL, NULL, 0.0f, 0u};
    if (da == NULL && db == NULL)
        return;
    p.da = da;
    p.db = db;
    p.dy = dy;
    p.a = a;
    p.b = b;
    p.scale = scale;
    if ((da != NULL && bc_sums(m, m->sa)) || (db != NULL && bc_sums(m, m->sb)))
        bc_run(m, &p, row);
    else
        bc_run_split(m, &p, row);
}

void rt_add_backward(float *da, float *db, const float *dy, const rt_bcast *m)
{
    binary_back(da, db, dy, NULL, NULL, m, 1.0f, add_back_row);
}

/* Elements of an element count: the product of the map's dims where the
 * stride is not 0 (a broadcast input's own size). */
static size_t bc_numel(const rt_bcast *m, const int *stride)
{
    size_t n = 1;
    int d;
    for (d = 0; d < m->rank; d++)
        if (stride[d] != 0)
            n *= (size_t)m->dims[d];
    return n;
}

/* Written, an input of the output's shape gets a copy of dy (nothing at
 * all when it is dy's own buffer: the gradient written in place), and a
 * broadcast one is zeroed and summed into; the rest add as before. */
static float *add_write(float *d, const float *dy, const rt_bcast *m,
                        const int *stride)
{
    if (bc_sums(m, stride)) {
        rt_zero(d, bc_numel(m, stride));
        return d;
    }
    if (d != dy)
        rt_copy(d, dy, bc_numel(m, stride));
    return NULL;
}

void rt_add_backward_set(float *da, float *db, const float *dy,
                         const rt_bcast *m, unsigned set)
{
    if (da != NULL && (set & 1u))
        da = add_write(da, dy, m, m->sa);
    if (db != NULL && (set & 2u))
        db = add_write(db, dy, m, m->sb);
    rt_add_backward(da, db, dy, m);
}

/* Sub is Add with the second gradient negated (scale -1). */
void rt_sub_backward(float *da, float *db, const float *dy, const rt_bcast *m)
{
    binary_back(da, db, dy, NULL, NULL, m, -1.0f, add_back_row);
}

void rt_mul_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, 1.0f, mul_back_row);
}

void rt_div_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, 1.0f, div_back_row);
}

/* ---- unary pointwise ------------------------------------------------------ */

/* 1/(1+e^-x) without overflow: for x < 0 use e^x/(1+e^x), so exp's argument
 * is never positive. */
static float sigmoid1(float x)
{
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    {
        const float e = expf(x);
        return e / (1.0f + e);
    }
}

/* A pointwise kernel's operands, split by elements (aligned to 16: a cache
 * line of floats). out is y or dx; a, b the inputs (x; dy and x or y). */
typedef struct {
    float *out;
    const float *a, *b;
    int flag;
    int set;        /* a backward's dx written, not added to (_set) */
} pw_job;

static void pointwise_set(rt_chunk_fn fn, float *out, const float *a,
                          const float *b, int n, int flag, size_t min_work,
                          int set)
{
    pw_job job;
    job.out = out;
    job.a = a;
    job.b = b;
    job.flag = flag;
    job.set = set;
    if (n > 0)
        parallel_for((size_t)n, 16, (size_t)n, min_work, fn, &job);
}

static void pointwise(rt_chunk_fn fn, float *out, const float *a,
                      const float *b, int n, int flag, size_t min_work)
{
    pointwise_set(fn, out, a, b, n, flag, min_work, 0);
}

/* The job's pointers in locals: read through the struct, every store
 * could change them, and the loop would neither vectorize nor lose its
 * branch (a ReLU backward's taken half mispredicts: 40% of cnn's step). */
static void relu_fwd_part(void *ctx, size_t lo, size_t hi)
{
    const pw_job *p = ctx;
    float *y = p->out;
    const float *x = p->a;
    size_t i;
    for (i = lo; i < hi; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* dx += dy where y > 0; elsewhere dx is left as it is (not += 0, which
 * would turn a -0 into +0), a masked add once vectorized. */
static void relu_back_part(void *ctx, size_t lo, size_t hi)
{
    const pw_job *p = ctx;
    float *dx = p->out;
    const float *dy = p->a, *y = p->b;
    size_t i;
    if (p->set)
        for (i = lo; i < hi; i++)
            dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    else
        for (i = lo; i < hi; i++)
            dx[i] = y[i] > 0.0f ? dx[i] + dy[i] : dx[i];
}

void rt_relu_forward(float *y, const float *x, int n)
{
    pointwise(relu_fwd_part, y, x, NULL, n, 0, RT_PAR_CHEAP);
}

void rt_relu_backward(float *dx, const float *dy, const float *y, int n)
{
    rt_relu_backward_set(dx, dy, y, n, 0);
}

void rt_relu_backward_set(float *dx, const float *dy, const float *y, int n,
                          unsigned set)
{
    if (dx != NULL)
        pointwise_set(relu_back_part, dx, dy, y, n, 0, RT_PAR_CHEAP,
                      (int)(set & 1u));
}

/* The tanh-approximation's argument u(x) = sqrt(2/pi) (x + 0.044715 x^3). */
static float gelu_u(float x)
{
    return RT_SQRT_2_OVER_PI * (x + RT_GELU_CUBIC * x * x * x);
}

/* e^x, written so that a loop of it vectorizes (libm's expf is a call):
 * x = n ln2 + r with |r| <= ln2/2 (n rounded by the 1.5 * 2^23 trick, ln2
 * split in two for an exact product), e^r by its Taylor polynomial to r^7
 * (truncation < 1e-8 relative), 2^n built in the exponent bits. x is
 * clamped to [-87.3, 88.7], where 2^n stays a normal float. */
static inline float exp_v(float x)
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
    bits = ((int32_t)fn + 127) * (1 << 23);
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Phi(x) = erfc(-x/sqrt2)/2, the standard normal CDF. erfc(z) for z >= 0 is
 * t exp(-z^2 + P(t)) with t = 1/(1 + z/2) and the Chebyshev-fitted P of
 * Numerical Recipes' erfcc (fractional error < 1.2e-7 for every z), so Phi
 * keeps its relative accuracy where it is tiny (x << 0); erfc(-z) is
 * 2 - erfc(z). Branch-free, so the Gelu loops vectorize. */
static inline float phi_v(float x)
{
    const float z = -x * RT_INV_SQRT2, a = z < 0.0f ? -z : z;
    const float t = 1.0f / (1.0f + 0.5f * a);
    float p = 0.17087277f, e, neg;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    e = t * exp_v(p - a * a);
    neg = (float)(z < 0.0f);
    return 0.5f * (e + neg * (2.0f - 2.0f * e));
}

/* Tanh: 0.5 x (1 + tanh u) = x * sigmoid(2u), the same function without
 * the cancellation of 1 + tanh u near -1. */
static float gelu_tanh1(float x)
{
    return x * sigmoid1(2.0f * gelu_u(x));
}

/* d/dx [x s] with s = sigmoid(2u) is s + x * 2 s (1 - s) u'(x); 1 - s is
 * sigmoid(-2u), computed directly. Where s (1 - s) underflows the term is 0,
 * which also avoids 0 * inf when u' overflows for huge |x|. */
static float gelu_tanh_grad1(float x)
{
    const float u = gelu_u(x);
    const float s = sigmoid1(2.0f * u), t = s * sigmoid1(-2.0f * u);
    const float du = RT_SQRT_2_OVER_PI * (1.0f + 3.0f * RT_GELU_CUBIC * x * x);
    return t > 0.0f ? s + 2.0f * x * t * du : s;
}

/* Exact Gelu is x Phi(x); its derivative Phi(x) + x phi(x). flag is
 * `approximate`. */
static void gelu_fwd_part(void *ctx, size_t lo, size_t hi)
{
    const pw_job *p = ctx;
    float *y = p->out;
    const float *x = p->a;
    size_t i;
    if (p->flag) {
        for (i = lo; i < hi; i++)
            y[i] = gelu_tanh1(x[i]);
        return;
    }
    for (i = lo; i < hi; i++)
        y[i] = x[i] * phi_v(x[i]);
}

static inline float gelu_exact_grad1(float x)
{
    return phi_v(x) + x * RT_INV_SQRT_2PI * exp_v(-0.5f * x * x);
}

static void gelu_back_part(void *ctx, size_t lo, size_t hi)
{
    const pw_job *p = ctx;
    float *dx = p->out;
    const float *dy = p->a, *x = p->b;
    size_t i;
    if (p->flag && p->set)
        for (i = lo; i < hi; i++)
            dx[i] = dy[i] * gelu_tanh_grad1(x[i]);
    else if (p->flag)
        for (i = lo; i < hi; i++)
            dx[i] += dy[i] * gelu_tanh_grad1(x[i]);
    else if (p->set)
        for (i = lo; i < hi; i++)
            dx[i] = dy[i] * gelu_exact_grad1(x[i]);
    else
        for (i = lo; i < hi; i++)
            dx[i] += dy[i] * gelu_exact_grad1(x[i]);
}

void rt_gelu_forward(float *y, const float *x, int n, int approximate)
{
    pointwise(gelu_fwd_part, y, x, NULL, n, approximate, RT_PAR_COSTLY);
}

void rt_gelu_backward(float *dx, const float *dy, const float *x, int n,
                      int approximate)
{
    rt_gelu_backward_set(dx, dy, x, n, approximate, 0);
}

void rt_gelu_backward_set(float *dx, const float *dy, const float *x, int n,
                          int approximate, unsigned set)
{
    if (dx != NULL)
        pointwise_set(gelu_back_part, dx, dy, x, n, approximate,
                      RT_PAR_COSTLY, (int)(set & 1u));
}

void rt_tanh_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = tanhf(x[i]);
}

void rt_tanh_backward(float *dx, const float *dy, const float *y, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += dy[i] * (1.0f - y[i] * y[i]);
}

void rt_sigmoid_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = sigmoid1(x[i]);
}

void rt_sigmoid_backward(float *dx, const float *dy, const float *y, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}

/* ---- ONNX pointwise: Erf, Reciprocal, Pow, Where, LogSoftmax, Expand ------ */

#define RT_TWO_OVER_SQRT_PI 1.12837916709551257f /* 2/sqrt(pi) */

void rt_erf_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = erff(x[i]);
}

void rt_erf_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += dy[i] * RT_TWO_OVER_SQRT_PI * expf(-x[i] * x[i]);
}

void rt_reciprocal_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = 1.0f / x[i];
}

void rt_reciprocal_backward(float *dx, const float *dy, const float *y, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] -= dy[i] * y[i] * y[i];
}

/* a^b; b == 2 (x**2 as torch exports it) as one exact product. */
static float pow1(float a, float b)
{
    return b == 2.0f ? a * a : powf(a, b);
}

static void pow_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                    ptrdiff_t ob, int n, int sa, int sb)
{
    float *y = p->y + oy;
    const float *a = p->a + oa, *b = p->b + ob;
    int j;
    for (j = 0; j < n; j++)
        y[j] = pow1(a[(ptrdiff_t)j * sa], b[(ptrdiff_t)j * sb]);
}

void rt_pow_forward(float *y, const float *a, const float *b, const rt_bcast *m)
{
    binary(y, a, b, m, pow_row);
}

/* The two special cases keep 0 * inf from making a NaN: b == 0 (b * a^-1
 * at a == 0) and a == 0 with b >= 0 (a^b * ln a). */
static void pow_back_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                         ptrdiff_t ob, int n, int sa, int sb)
{
    const float *dy = p->dy + oy;
    int j;
    for (j = 0; j < n; j++) {
        const ptrdiff_t ia = oa + (ptrdiff_t)j * sa, ib = ob + (ptrdiff_t)j * sb;
        const float a = p->a[ia], b = p->b[ib];
        if (p->da != NULL && b != 0.0f)
            p->da[ia] += dy[j] * (b == 2.0f ? 2.0f * a : b * powf(a, b - 1.0f));
        if (p->db != NULL && !(a == 0.0f && b >= 0.0f))
            p->db[ib] += dy[j] * pow1(a, b) * logf(a);
    }
}

void rt_pow_backward(float *da, float *db, const float *dy, const float *a,
                     const float *b, const rt_bcast *m)
{
    binary_back(da, db, dy, a, b, m, 1.0f, pow_back_row);
}

/* Elements of a Where's output, and one step of its odometer: idx and the
 * offsets off[0..2] of cond, a and b move to the next element of y. */
static size_t where_count(const rt_where *m)
{
    size_t n = 1;
    int d;
    for (d = 0; d < m->rank; d++)
        n *= m->dims[d] > 0 ? (size_t)m->dims[d] : 0;
    return n;
}

static void where_step(const rt_where *m, int *idx, ptrdiff_t *off)
{
    int d;
    for (d = m->rank - 1; d >= 0; d--) {
        off[0] += m->sc[d];
        off[1] += m->sa[d];
        off[2] += m->sb[d];
        if (++idx[d] < m->dims[d])
            return;
        idx[d] = 0;
        off[0] -= (ptrdiff_t)m->dims[d] * m->sc[d];
        off[1] -= (ptrdiff_t)m->dims[d] * m->sa[d];
        off[2] -= (ptrdiff_t)m->dims[d] * m->sb[d];
    }
}

void rt_where_forward(float *y, const float *cond, const float *a,
                      const float *b, const rt_where *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[3] = {0, 0, 0};
    size_t i, n = where_count(m);
    for (i = 0; i < n; i++) {
        y[i] = cond[off[0]] != 0.0f ? a[off[1]] : b[off[2]];
        where_step(m, idx, off);
    }
}

void rt_where_backward(float *da, float *db, const float *dy,
                       const float *cond, const rt_where *m)
{
    int idx[RT_MAX_RANK] = {0};
    ptrdiff_t off[3] = {0, 0, 0};
    size_t i, n = where_count(m);
    if (da == NULL && db == NULL)
        return;
    for (i = 0; i < n; i++) {
        if (cond[off[0]] != 0.0f) {
            if (da != NULL)
                da[off[1]] += dy[i];
        } else if (db != NULL) {
            db[off[2]] += dy[i];
        }
        where_step(m, idx, off);
    }
}

/* ---- normalizing along one axis: Softmax and LogSoftmax -------------- */

/* The lane of (o, i) starts at o * dim * inner + i and has stride inner;
 * for the usual last axis (inner 1) lanes are contiguous rows. Each kernel
 * is its lane function run over every lane. */
typedef void (*lane_fn)(float *y, const float *x, int dim, ptrdiff_t s);
typedef void (*back_lane_fn)(float *dx, const float *dy, const float *y,
                             int dim, ptrdiff_t s);

/* Lanes are independent: the threads split the outer index. */
typedef struct {
    lane_fn f;
    back_lane_fn bf;
    float *out;
    const float *a, *b;
    int dim, inner;
} lane_job;

static void lanes_part(void *ctx, size_t lo, size_t hi)
{
    const lane_job *j = ctx;
    size_t o;
    int i;
    for (o = lo; o < hi; o++) {
        const size_t base = o * (size_t)j->dim * (size_t)j->inner;
        for (i = 0; i < j->inner; i++) {
            if (j->f != NULL)
                j->f(j->out + base + i, j->a + base + i, j->dim, j->inner);
            else
                j->bf(j->out + base + i, j->a + base + i, j->b + base + i,
                      j->dim, j->inner);
        }
    }
}

static void lanes_run(lane_job *j, int outer)
{
    const size_t work = (size_t)outer * (size_t)j->dim * (size_t)j->inner;
    if (j->dim > 0 && outer > 0)
        parallel_for((size_t)outer, 1, work, RT_PAR_COSTLY, lanes_part, j);
}

static void each_lane(lane_fn f, float *y, const float *x, int outer,
                      int dim, int inner)
{
    lane_job j;
    j.f = f;
    j.bf = NULL;
    j.out = y;
    j.a = x;
    j.b = NULL;
    j.dim = dim;
    j.inner = inner;
    lanes_run(&j, outer);
}

static void each_back_lane(back_lane_fn f, float *dx, const float *dy,
                           const float *y, int outer, int dim, int inner)
{
    lane_job j;
    if (dx == NULL)
        return;
    j.f = NULL;
    j.bf = f;
    j.out = dx;
    j.a = dy;
    j.b = y;
    j.dim = dim;
    j.inner = inner;
    lanes_run(&j, outer);
}

/* One lane as softmax_lane's: y = (x - max) - log(sum exp(x - max)); the
 * sum is >= 1 (the max's term is 1), so the log is finite. y may be x. */
static void log_softmax_lane(float *y, const float *x, int dim, ptrdiff_t s)
{
    float mx = x[0], sum = 0.0f, lse;
    int d;
    for (d = 1; d < dim; d++)
        if (x[d * s] > mx)
            mx = x[d * s];
    for (d = 0; d < dim; d++)
        sum += expf(x[d * s] - mx);
    lse = logf(sum);
    for (d = 0; d < dim; d++)
        y[d * s] = (x[d * s] - mx) - lse;
}

/* dL/dx_d = dy_d - softmax_d * sum_e dy_e, and softmax = exp(y). */
static void log_softmax_back_lane(float *dx, const float *dy, const float *y,
                                  int dim, ptrdiff_t s)
{
    float sum = 0.0f;
    int d;
    for (d = 0; d < dim; d++)
        sum += dy[d * s];
    for (d = 0; d < dim; d++)
        dx[d * s] += dy[d * s] - expf(y[d * s]) * sum;
}

void rt_log_softmax_forward(float *y, const float *x, int outer, int dim,
                            int inner)
{
    each_lane(log_softmax_lane, y, x, outer, dim, inner);
}

void rt_log_softmax_backward(float *dx, const float *dy, const float *y,
                             int outer, int dim, int inner)
{
    each_back_lane(log_softmax_back_lane, dx, dy, y, outer, dim, inner);
}

static void expand_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
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

void rt_expand_forward(float *y, const float *x, const rt_bcast *m)
{
    binary(y, x, NULL, m, expand_row);
}

/* Add's backward row with no second gradient: a stride of 0 sums. */
void rt_expand_backward(float *dx, const float *dy, const rt_bcast *m)
{
    binary_back(dx, NULL, dy, NULL, NULL, m, 1.0f, add_back_row);
}

/* ---- reductions ----------------------------------------------------------- */

/* x is walked in order (offset oy); y's offset comes from m->sb. */
static void reduce_row(const bc_args *p, ptrdiff_t oy, ptrdiff_t oa,
                       ptrdiff_t ob, int n, int sa, int sb)
{
    const float *x = p->a + oy;
    float *y = p->y + ob;
    int j;
    (void)oa;
    (void)sa;
    for (j = 0; j < n; j++)
        y[(ptrdiff_t)j * sb] += x[j];
}

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
    int i;
    for (i = 0; i < ny; i++)
        y[i] = 0.0f;
    p.y = y;
    p.a = x;
    bc_run(m, &p, reduce_row);
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
    bc_run(m, &p, reduce_back_row);
}

/* ---- transformer ops ------------------------------------------------------ */

void rt_exp_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

void rt_exp_backward(float *dx, const float *dy, const float *y, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += dy[i] * y[i];
}

void rt_log_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = logf(x[i]);
}

void rt_log_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += dy[i] / x[i];
}

void rt_sqrt_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = sqrtf(x[i]);
}

void rt_sqrt_backward(float *dx, const float *dy, const float *y, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += 0.5f * dy[i] / y[i];
}

void rt_neg_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = -x[i];
}

void rt_neg_backward(float *dx, const float *dy, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] -= dy[i];
}

/* Softmax of one lane: the `dim` values x[0], x[s], ..., x[(dim-1)s] into
 * the same places of y. After subtracting the max every exp is in (0, 1] and
 * the largest is exactly 1, so the sum is >= 1: no overflow for large x, no
 * division by zero. y may be x: each x is read before its y is written. */
static void softmax_lane(float *y, const float *x, int dim, ptrdiff_t s)
{
    float mx = x[0], sum = 0.0f;
    int d;
    for (d = 1; d < dim; d++)
        if (x[d * s] > mx)
            mx = x[d * s];
    for (d = 0; d < dim; d++) {
        y[d * s] = expf(x[d * s] - mx);
        sum += y[d * s];
    }
    for (d = 0; d < dim; d++)
        y[d * s] /= sum;
}

/* dL/dx_d = sum_e dy_e y_e (delta_de - y_d) = y_d (dy_d - sum_e dy_e y_e). */
static void softmax_back_lane(float *dx, const float *dy, const float *y,
                              int dim, ptrdiff_t s)
{
    float dot = 0.0f;
    int d;
    for (d = 0; d < dim; d++)
        dot += dy[d * s] * y[d * s];
    for (d = 0; d < dim; d++)
        dx[d * s] += y[d * s] * (dy[d * s] - dot);
}

void rt_softmax_forward(float *y, const float *x, int outer, int dim,
                        int inner)
{
    each_lane(softmax_lane, y, x, outer, dim, inner);
}

void rt_softmax_backward(float *dx, const float *dy, const float *y,
                         int outer, int dim, int inner)
{
    each_back_lane(softmax_back_lane, dx, dy, y, outer, dim, inner);
}

/* Mean and 1/sqrt(var + eps) of one row of cols > 0 values, var biased. Two
 * passes: summing (x - mean)^2 rather than forming E[x^2] - mean^2 avoids
 * the cancellation that makes the latter wrong (even negative) when
 * |mean| >> std. Forward and backward both call this, so the backward sees
 * exactly the statistics the forward used. */
static void row_moments(const float *x, int cols, float eps, float *mean,
                        float *rstd)
{
    float s = 0.0f, v = 0.0f;
    int j;
    for (j = 0; j < cols; j++)
        s += x[j];
    *mean = s / (float)cols;
    for (j = 0; j < cols; j++)
        v += (x[j] - *mean) * (x[j] - *mean);
    *rstd = 1.0f / sqrtf(v / (float)cols + eps);
}

/* LayerNorm's operands; rows are independent except for the backward's
 * dscale and dbias, sums over rows (see rt_layernorm_backward). mean and
 * rstd hold the moments of rows [r0, r0 + RT_LN_BLOCK). */
#define RT_LN_BLOCK 128
typedef struct {
    float *y, *dx, *dscale, *dbias;
    const float *x, *dy, *scale, *bias;
    int cols, r0, nrows;
    float eps;
    float mean[RT_LN_BLOCK], rstd[RT_LN_BLOCK];
} ln_job;

static void ln_fwd_part(void *ctx, size_t lo, size_t hi)
{
    const ln_job *l = ctx;
    size_t r;
    int j;
    for (r = lo; r < hi; r++) {
        const float *xr = l->x + r * (size_t)l->cols;
        float *yr = l->y + r * (size_t)l->cols;
        float mean, rstd;
        row_moments(xr, l->cols, l->eps, &mean, &rstd);
        for (j = 0; j < l->cols; j++)
            yr[j] = (xr[j] - mean) * rstd * l->scale[j] +
                    (l->bias != NULL ? l->bias[j] : 0.0f);
    }
}

void rt_layernorm_forward(float *y, const float *x, const float *scale,
                          const float *bias, int rows, int cols, float eps)
{
    ln_job l;
    if (cols <= 0 || rows <= 0)
        return;
    l.y = y;
    l.x = x;
    l.scale = scale;
    l.bias = bias;
    l.cols = cols;
    l.eps = eps;
    parallel_for((size_t)rows, 1, (size_t)rows * cols, RT_PAR_COSTLY,
                 ln_fwd_part, &l);
}

/* One row. With xhat = (x - mean) * rstd and g = dy * scale (the gradient
 * reaching xhat), dx = rstd * (g - mean(g) - xhat * mean(g * xhat)): the
 * two means are the paths through mean and variance, which depend on every
 * x of the row. */
static void layernorm_back_row(float *dx, float *dscale, float *dbias,
                               const float *dy, const float *x,
                               const float *scale, int cols, float mean,
                               float rstd)
{
    float sum_g = 0.0f, sum_gx = 0.0f, mg, mgx;
    int j;
    for (j = 0; j < cols; j++) {
        const float xhat = (x[j] - mean) * rstd;
        if (dscale != NULL)
            dscale[j] += dy[j] * xhat;
        if (dbias != NULL)
            dbias[j] += dy[j];
        if (dx != NULL) {
            sum_g += dy[j] * scale[j];
            sum_gx += dy[j] * scale[j] * xhat;
        }
    }
    if (dx == NULL)
        return;
    mg = sum_g / (float)cols;
    mgx = sum_gx / (float)cols;
    for (j = 0; j < cols; j++) {
        const float xhat = (x[j] - mean) * rstd;
        dx[j] += rstd * (dy[j] * scale[j] - mg - xhat * mgx);
    }
}

/* Rows [lo, hi) of the block at r0: their moments, kept for
 * ln_back_cols, and (when wanted) their dx. */
static void ln_back_rows(void *ctx, size_t lo, size_t hi)
{
    ln_job *l = ctx;
    size_t i;
    for (i = lo; i < hi; i++) {
        const size_t o = ((size_t)l->r0 + i) * (size_t)l->cols;
        row_moments(l->x + o, l->cols, l->eps, &l->mean[i], &l->rstd[i]);
        if (l->dx != NULL)
            layernorm_back_row(l->dx + o, NULL, NULL, l->dy + o, l->x + o,
                               l->scale, l->cols, l->mean[i], l->rstd[i]);
    }
}

/* Columns [lo, hi) of dscale and dbias over the block's rows, row by row
 * with the same xhat as layernorm_back_row: each entry gets the terms of
 * one thread's loop in the same order. */
static void ln_back_cols(void *ctx, size_t lo, size_t hi)
{
    const ln_job *l = ctx;
    size_t j;
    int i;
    for (i = 0; i < l->nrows; i++) {
        const size_t o = ((size_t)l->r0 + (size_t)i) * (size_t)l->cols;
        for (j = lo; j < hi; j++) {
            const float xhat = (l->x[o + j] - l->mean[i]) * l->rstd[i];
            if (l->dscale != NULL)
                l->dscale[j] += l->dy[o + j] * xhat;
            if (l->dbias != NULL)
                l->dbias[j] += l->dy[o + j];
        }
    }
}

/* Several threads: blocks of rows, each first split by rows (moments, dx),
 * then by columns (dscale, dbias: sums over rows). */
static void layernorm_back_split(ln_job *l, int rows)
{
    const size_t cols = (size_t)l->cols;
    for (l->r0 = 0; l->r0 < rows; l->r0 += RT_LN_BLOCK) {
        l->nrows = rows - l->r0 < RT_LN_BLOCK ? rows - l->r0 : RT_LN_BLOCK;
        parallel_for((size_t)l->nrows, 1, 0, 0, ln_back_rows, l);
        if (l->dscale != NULL || l->dbias != NULL)
            parallel_for(cols, 16, 0, 0, ln_back_cols, l);
    }
}

/* Offsets, not pointers, for the same reason as bc_row: a NULL gradient
 * never takes part in pointer arithmetic. */
void rt_layernorm_backward(float *dx, float *dscale, float *dbias,
                           const float *dy, const float *x, const float *scale,
                           int rows, int cols, float eps)
{
    int r, j;
    if (cols <= 0 || (dx == NULL && dscale == NULL && dbias == NULL))
        return;
    if (dx == NULL && dscale == NULL) {
        /* the bias alone (a frozen scale and input): x is not read, and
         * the sums are the same as layernorm_back_row's, in its order */
        for (r = 0; r < rows; r++)
            for (j = 0; j < cols; j++)
                dbias[j] += dy[(size_t)r * cols + j];
        return;
    }
    if (rt_threads() > 1 && (size_t)rows * cols >= RT_PAR_COSTLY) {
        ln_job l;
        l.dx = dx;
        l.dscale = dscale;
        l.dbias = dbias;
        l.dy = dy;
        l.x = x;
        l.scale = scale;
        l.cols = cols;
        l.eps = eps;
        layernorm_back_split(&l, rows);
        return;
    }
    for (r = 0; r < rows; r++) {
        const size_t o = (size_t)r * cols;
        float mean, rstd;
        row_moments(x + o, cols, eps, &mean, &rstd);
        layernorm_back_row(dx != NULL ? dx + o : NULL, dscale, dbias, dy + o,
                           x + o, scale, cols, mean, rstd);
    }
}

/* ---- batch normalization --------------------------------------------------- */

/* Channel ch's mean and biased variance over the n * inner values
 * x[i, ch, j], two passes as row_moments. The train forward and the
 * backward both call this, so the backward (and a recompute) sees exactly
 * the statistics the forward used. */
static void channel_moments(const float *x, int n, int c, int inner, int ch,
                            float *mean, float *var)
{
    const float m = (float)n * (float)inner;
    float s = 0.0f, v = 0.0f;
    int i, j;
    for (i = 0; i < n; i++) {
        const float *xc = x + ((size_t)i * c + ch) * inner;
        for (j = 0; j < inner; j++)
            s += xc[j];
    }
    *mean = s / m;
    for (i = 0; i < n; i++) {
        const float *xc = x + ((size_t)i * c + ch) * inner;
        for (j = 0; j < inner; j++)
            v += (xc[j] - *mean) * (xc[j] - *mean);
    }
    *var = v / m;
}

/* y[i, ch, j] = (x[i, ch, j] - mean) * rstd * scale[ch] + bias[ch] */
static void channel_normalize(float *y, const float *x, int n, int c,
                              int inner, int ch, float mean, float rstd,
                              float scale, float bias)
{
    int i, j;
    for (i = 0; i < n; i++) {
        const size_t o = ((size_t)i * c + ch) * inner;
        for (j = 0; j < inner; j++)
            y[o + j] = (x[o + j] - mean) * rstd * scale + bias;
    }
}

void rt_batchnorm_forward(float *y, const float *x, const float *scale,
                          const float *bias, const float *mean,
                          const float *var, int n, int c, int inner, float eps)
{
    int ch;
    for (ch = 0; ch < c; ch++)
        channel_normalize(y, x, n, c, inner, ch, mean[ch],
                          1.0f / sqrtf(var[ch] + eps), scale[ch], bias[ch]);
}

void rt_batchnorm_train_forward(float *y, float *running_mean,
                                float *running_var, const float *x,
                                const float *scale, const float *bias, int n,
                                int c, int inner, float eps, float momentum)
{
    const float m = (float)n * (float)inner;
    int ch;
    if (n <= 0 || inner <= 0)
        return;
    for (ch = 0; ch < c; ch++) {
        float mean, var;
        channel_moments(x, n, c, inner, ch, &mean, &var);
        channel_normalize(y, x, n, c, inner, ch, mean, 1.0f / sqrtf(var + eps),
                          scale[ch], bias[ch]);
        if (running_mean != NULL)
            running_mean[ch] = momentum * running_mean[ch] +
                               (1.0f - momentum) * mean;
        if (running_var != NULL)
            running_var[ch] = momentum * running_var[ch] +
                              (1.0f - momentum) *
                                  (m > 1.0f ? var * m / (m - 1.0f) : var);
    }
}

/* Per channel, as layernorm_back_row with the channel's n * inner values in
 * place of a row's: the means of g and g * xhat run over the batch and the
 * spatial positions. */
void rt_batchnorm_backward(float *dx, float *dscale, float *dbias,
                           const float *dy, const float *x, const float *scale,
                           int n, int c, int inner, float eps)
{
    const float m = (float)n * (float)inner;
    int ch, i, j;
    if (n <= 0 || inner <= 0 || (dx == NULL && dscale == NULL && dbias == NULL))
        return;
    for (ch = 0; ch < c; ch++) {
        float mean, var, rstd, sum_dy = 0.0f, sum_dyx = 0.0f, mg, mgx;
        if (dx == NULL && dscale == NULL) {     /* x is not read */
            for (i = 0; i < n; i++)
                for (j = 0; j < inner; j++)
                    sum_dy += dy[((size_t)i * c + ch) * inner + j];
            dbias[ch] += sum_dy;
            continue;
        }
        channel_moments(x, n, c, inner, ch, &mean, &var);
        rstd = 1.0f / sqrtf(var + eps);
        for (i = 0; i < n; i++) {
            const size_t o = ((size_t)i * c + ch) * inner;
            for (j = 0; j < inner; j++) {
                sum_dy += dy[o + j];
                sum_dyx += dy[o + j] * (x[o + j] - mean) * rstd;
            }
        }
        if (dscale != NULL)
            dscale[ch] += sum_dyx;
        if (dbias != NULL)
            dbias[ch] += sum_dy;
        if (dx == NULL)
            continue;
        mg = sum_dy * scale[ch] / m;
        mgx = sum_dyx * scale[ch] / m;
        for (i = 0; i < n; i++) {
            const size_t o = ((size_t)i * c + ch) * inner;
            for (j = 0; j < inner; j++) {
                const float xhat = (x[o + j] - mean) * rstd;
                dx[o + j] += rstd * (dy[o + j] * scale[ch] - mg - xhat * mgx);
            }
        }
    }
}

/* Transpose walks y in order with bc_run: the map's dims are y's, and its
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
    bc_run_split(&m, &p, transpose_row);
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
    bc_run_split(&m, &p, transpose_back_row);
}

void rt_transpose_backward(float *dx, const float *dy, int rank,
                           const int *dims, const int *perm)
{
    rt_transpose_backward_set(dx, dy, rank, dims, perm, 0);
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
        parallel_for(items, 16, (size_t)n * width, RT_PAR_CHEAP, fn, &g);
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

/* ---- convolution and pooling ---------------------------------------------- */

/* Convolution is a GEMM over im2col's column matrix: for one image and group,
 * row (ci, ki, kj) of col holds, for every output position, the input element
 * that tap reads (0 in the padding), so y_g (oc/group x oh*ow) = w_g
 * (oc/group x cg*kh*kw) * col. The backward is the two transposed products,
 * dw_g += dy_g * col^T and dcol = w_g^T * dy_g, with col2im scattering dcol
 * back onto dx. The pooling kernels walk each window directly, visiting only
 * its taps inside the input, with row kernels for the common windows (see
 * "pooling fast paths"). All geometry reduces to one question, which
 * indices of a strided run land inside [0, size): inside() answers it once
 * per row or window, so the inner loops have no bounds tests. */

/* The indices i in [0, count) with 0 <= off + i * step < size, as the range
 * [*lo, *hi), empty when *lo == *hi; step > 0. */
static void inside(int off, int step, int size, int count, int *lo, int *hi)
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

/* With a 1x1 kernel, stride 1 and no padding, one image-group's x (cg planes
 * of h*w = oh*ow) already is its column matrix. */
static int conv_is_pointwise(const rt_window *p)
{
    return p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 &&
           p->pad_top == 0 && p->pad_left == 0 && p->pad_bottom == 0 &&
           p->pad_right == 0;
}

/* dst[j] = src[j * step] for j < n; stride 1 (the usual convolution) is
 * its own loop, a plain copy the compiler vectorizes. */
static void copy_strided(float *dst, const float *src, int n, int step)
{
    int j;
    if (step == 1)
        for (j = 0; j < n; j++)
            dst[j] = src[j];
    else
        for (j = 0; j < n; j++)
            dst[j] = src[(size_t)j * step];
}

/* dst[j * step] += src[j] for j < n, stride 1 likewise apart. */
static void add_strided(float *dst, const float *src, int n, int step)
{
    int j;
    if (step == 1)
        for (j = 0; j < n; j++)
            dst[j] += src[j];
    else
        for (j = 0; j < n; j++)
            dst[(size_t)j * step] += src[j];
}

/* Where an output row is an input row (stride 1, no column dilation, ow ==
 * w: a "same" convolution of stride 1), a tap's whole row of col is one run
 * of the image's plane shifted by a constant d, except the columns that
 * wrap around a row's end, which read the padding. One long copy and a
 * zero per wrapped column replace im2col's copy per output row, which for
 * small planes (14 wide) cost more than the copying. */
static int conv_is_run(const rt_window *p)
{
    return p->sh == 1 && p->sw == 1 && p->dw == 1 && p->ow == p->w;
}

/* Tap (ki, kj)'s run: col[j] = x[j + d] for j in [j0, j1) (the rows
 * [ylo, yhi) that read the input) but the columns outside [xlo, xhi);
 * [a, b) is the part of the run with j + d inside the plane, the rest
 * being wrapped columns. */
typedef struct {
    ptrdiff_t d;
    int ylo, yhi, xlo, xhi, j0, j1, a, b;
} tap_run;

static tap_run tap_run_of(const rt_window *p, int ki, int kj)
{
    const int offy = ki * p->dh - p->pad_top, offx = kj - p->pad_left;
    const ptrdiff_t hw = (ptrdiff_t)p->h * p->w;
    tap_run t;
    t.d = (ptrdiff_t)offy * p->w + offx;
    inside(offy, 1, p->h, p->oh, &t.ylo, &t.yhi);
    inside(offx, 1, p->w, p->ow, &t.xlo, &t.xhi);
    if (t.xlo == t.xhi) /* every column in the padding */
        t.yhi = t.ylo;
    t.j0 = t.ylo * p->ow;
    t.j1 = t.yhi * p->ow;
    t.a = t.d < 0 && t.j0 < -t.d ? (int)-t.d : t.j0;
    t.b = hw - t.d < t.j1 ? (int)(hw - t.d) : t.j1;
    if (t.a > t.b || t.j0 == t.j1)
        t.a = t.b = t.j0;
    return t;
}

/* Zeroes run row r's columns outside [t->xlo, t->xhi) on rows [ylo, yhi),
 * and, with all, every element outside them too. */
static void zero_wrapped(float *r, const tap_run *t, const rt_window *p,
                         int all)
{
    int oy, ox;
    if (all) {
        memset(r, 0, (size_t)t->j0 * sizeof *r);
        memset(r + t->j1, 0, (size_t)(p->oh * p->ow - t->j1) * sizeof *r);
    }
    for (oy = t->ylo; oy < t->yhi; oy++) {
        float *ro = r + (size_t)oy * p->ow;
        for (ox = 0; ox < t->xlo; ox++)
            ro[ox] = 0.0f;
        for (ox = t->xhi; ox < p->ow; ox++)
            ro[ox] = 0.0f;
    }
}

static void im2col_runs(float *col, const float *x, int cg, const rt_window *p)
{
    const size_t ohw = (size_t)p->oh * p->ow, hw = (size_t)p->h * p->w;
    int ci, ki, kj;
    for (ki = 0; ki < p->kh; ki++)
        for (kj = 0; kj < p->kw; kj++) {
            const tap_run t = tap_run_of(p, ki, kj); /* the same per channel */
            for (ci = 0; ci < cg; ci++) {
                float *r = col + ((size_t)(ci * p->kh + ki) * p->kw + kj) * ohw;
                if (t.a < t.b)
                    memcpy(r + t.a, x + ci * hw + (t.a + t.d),
                           (size_t)(t.b - t.a) * sizeof *r);
                zero_wrapped(r, &t, p, 1);
            }
        }
}

/* col2im_add over runs: the wrapped columns of col (scratch, so ours to
 * clear) are zeroed first, so that one long add over each run adds
 * nothing where they land (x + 0.0f is x, but -0.0f becomes +0.0f). */
static void col2im_runs(float *dx, float *col, int cg, const rt_window *p)
{
    const size_t ohw = (size_t)p->oh * p->ow, hw = (size_t)p->h * p->w;
    int ci, ki, kj;
    for (ki = 0; ki < p->kh; ki++)
        for (kj = 0; kj < p->kw; kj++) {
            const tap_run t = tap_run_of(p, ki, kj);
            if (t.a == t.b)
                continue;
            for (ci = 0; ci < cg; ci++) {
                float *r = col + ((size_t)(ci * p->kh + ki) * p->kw + kj) * ohw;
                zero_wrapped(r, &t, p, 0);
                add_strided(dx + ci * hw + (t.a + t.d), r + t.a, t.b - t.a, 1);
            }
        }
}

/* col (cg*kh*kw x oh*ow) from the cg channels of one image at x. */
static void im2col(float *col, const float *x, int cg, const rt_window *p)
{
    const size_t ohw = (size_t)p->oh * p->ow;
    int ci, ki, kj, oy, ox;
    if (conv_is_run(p)) {
        im2col_runs(col, x, cg, p);
        return;
    }
    for (ci = 0; ci < cg; ci++)
        for (ki = 0; ki < p->kh; ki++) {
            const int offy = ki * p->dh - p->pad_top;
            int ylo, yhi;
            inside(offy, p->sh, p->h, p->oh, &ylo, &yhi);
            for (kj = 0; kj < p->kw; kj++) {
                const int offx = kj * p->dw - p->pad_left;
                float *row = col + ((size_t)(ci * p->kh + ki) * p->kw + kj) * ohw;
                int xlo, xhi;
                inside(offx, p->sw, p->w, p->ow, &xlo, &xhi);
                for (oy = 0; oy < p->oh; oy++) {
                    float *r = row + (size_t)oy * p->ow;
                    ox = 0;
                    if (oy >= ylo && oy < yhi && xlo < xhi) {
                        /* xr: the element output ox = xlo reads */
                        const float *xr =
                            x + ((size_t)ci * p->h + (oy * p->sh + offy)) * p->w +
                            (offx + xlo * p->sw);
                        for (; ox < xlo; ox++)
                            r[ox] = 0.0f;
                        copy_strided(r + xlo, xr, xhi - xlo, p->sw);
                        ox = xhi;
                    }
                    for (; ox < p->ow; ox++)
                        r[ox] = 0.0f;
                }
            }
        }
}

/* dx (cg channels of one image) += col2im(col): im2col's transpose, each
 * column entry added to the input element it was read from. */
static void col2im_add(float *dx, float *col, int cg, const rt_window *p)
{
    const size_t ohw = (size_t)p->oh * p->ow;
    int ci, ki, kj, oy;
    if (conv_is_run(p)) {
        col2im_runs(dx, col, cg, p);
        return;
    }
    for (ci = 0; ci < cg; ci++)
        for (ki = 0; ki < p->kh; ki++) {
            const int offy = ki * p->dh - p->pad_top;
            int ylo, yhi;
            inside(offy, p->sh, p->h, p->oh, &ylo, &yhi);
            for (kj = 0; kj < p->kw; kj++) {
                const int offx = kj * p->dw - p->pad_left;
                const float *row =
                    col + ((size_t)(ci * p->kh + ki) * p->kw + kj) * ohw;
                int xlo, xhi;
                inside(offx, p->sw, p->w, p->ow, &xlo, &xhi);
                if (xlo == xhi) /* no pointer into the padding is formed */
                    continue;
                for (oy = ylo; oy < yhi; oy++) {
                    const float *r = row + (size_t)oy * p->ow;
                    float *dr = dx + ((size_t)ci * p->h + (oy * p->sh + offy)) * p->w +
                                (offx + xlo * p->sw);
                    add_strided(dr, r + xlo, xhi - xlo, p->sw);
                }
            }
        }
}

/* The sum of x[0..n), in SUM_LANES interleaved partial sums added up at
 * the end: a sum the compiler vectorizes, where one running sum is a chain
 * of dependent adds. */
#define SUM_LANES 16
static float sum_lanes(const float *x, int n)
{
    float part[SUM_LANES] = {0};
    float s = 0.0f;
    int j = 0, l;
    for (; j + SUM_LANES <= n; j += SUM_LANES)
        for (l = 0; l < SUM_LANES; l++)
            part[l] += x[j + l];
    for (l = 0; l < SUM_LANES; l++)
        s += part[l];
    for (; j < n; j++)
        s += x[j];
    return s;
}

/* The per-image loop of a convolution runs in lanes: a fixed number of
 * them, RT_CONV_LANES (fewer only when there are fewer images), that does
 * not depend on the thread count. Lane l takes images [n * l / lanes,
 * n * (l + 1) / lanes) in order, with an im2col buffer of its own in the
 * scratch, and the lanes run through parallel_parts, one chunk each: side
 * by side on two or more threads, one after the other on one thread (or
 * RT_NO_THREADS), the same arithmetic either way. Inside a lane rt_sgemm
 * is a nested call and runs whole on that thread, as it does on one
 * thread, so a GEMM's bits do not depend on the count either, even
 * OpenBLAS's. (A one-image conv has one lane, on the calling thread: its
 * GEMMs are cut over the threads as any other's.) The backward's dw and
 * db are sums over images: lane 0 adds into dw and db as the single loop
 * did, lane l > 0 into a partial of its own in the scratch (its first
 * image writes it, beta 0), and after the lanes the partials are added
 * into dw and db in lane order. The lane count depends on the shape only:
 * a small conv with two images still takes two, which costs it a job's
 * few microseconds on two threads, and the scratch is sized for them. */
#define RT_CONV_LANES 2

static int conv_lanes(const rt_window *p)
{
    if (p->n >= RT_CONV_LANES)
        return RT_CONV_LANES;
    return p->n > 1 ? p->n : 1;
}

/* The first image of lane l (l == lanes: one past the last). */
static int conv_lane_start(const rt_window *p, int l)
{
    return (int)((size_t)p->n * (size_t)l / (size_t)conv_lanes(p));
}

/* One lane's im2col buffer: 0 where x is the column matrix. */
static size_t conv_col_floats(const rt_window *p)
{
    if (conv_is_pointwise(p))
        return 0;
    return (size_t)(p->c / p->group) * p->kh * p->kw * p->oh * p->ow;
}

/* One lane's partial dw (oc x c/group x kh x kw) and db (oc) after it. */
static size_t conv_partial_floats(const rt_window *p)
{
    return (size_t)p->oc * (p->c / p->group) * p->kh * p->kw + (size_t)p->oc;
}

size_t rt_conv_scratch(const rt_window *p)
{
    return (size_t)conv_lanes(p) * conv_col_floats(p);
}

size_t rt_conv_backward_scratch(const rt_window *p)
{
    return rt_conv_scratch(p) +
           (size_t)(conv_lanes(p) - 1) * conv_partial_floats(p);
}

/* A convolution's operands, for its lanes; the backward's gradients and
 * the forward's y are NULL in the other direction. */
typedef struct {
    const rt_window *p;
    float *y, *dx, *dw, *db;
    const float *x, *w, *b, *dy;
    float *scratch;
} conv_job;

/* Lane l's im2col buffer; NULL for a pointwise conv, where x is the
 * column matrix (the forward's scratch may then be NULL, and no pointer is
 * formed from it), or for an empty output, where no GEMM reads it. */
static float *conv_lane_col(const conv_job *j, size_t l)
{
    const size_t ncol = conv_col_floats(j->p);
    return ncol ? j->scratch + l * ncol : NULL;
}

/* y for images [i0, i1). */
static void conv_fwd_images(const conv_job *j, int i0, int i1, float *col)
{
    const rt_window *p = j->p;
    const int cg = p->c / p->group, og = p->oc / p->group;
    const int kk = cg * p->kh * p->kw, ohw = p->oh * p->ow;
    const size_t hw = (size_t)p->h * p->w;
    int i, g, o, k;
    for (i = i0; i < i1; i++)
        for (g = 0; g < p->group; g++) {
            const float *xg = j->x + ((size_t)i * p->c + (size_t)g * cg) * hw;
            float *yg = j->y + ((size_t)i * p->oc + (size_t)g * og) * ohw;
            const float *a = xg;
            float beta = 0.0f; /* 0: y is not read */
            if (col != NULL) {
                im2col(col, xg, cg, p);
                a = col;
            }
            if (j->b != NULL) {
                for (o = 0; o < og; o++)
                    for (k = 0; k < ohw; k++)
                        yg[(size_t)o * ohw + k] = j->b[g * og + o];
                beta = 1.0f;
            }
            rt_sgemm(0, 0, og, ohw, kk, 1.0f, j->w + (size_t)g * og * kk, kk, a,
                     ohw, beta, yg, ohw);
        }
}

static void conv_fwd_lanes(void *ctx, size_t lo, size_t hi)
{
    const conv_job *j = ctx;
    size_t l;
    for (l = lo; l < hi; l++)
        conv_fwd_images(j, conv_lane_start(j->p, (int)l),
                        conv_lane_start(j->p, (int)l + 1), conv_lane_col(j, l));
}

void rt_conv_forward(float *y, const float *x, const float *w, const float *b,
                     const rt_window *p, float *scratch)
{
    conv_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.y = y;
    j.x = x;
    j.w = w;
    j.b = b;
    j.scratch = scratch;
    parallel_parts((size_t)conv_lanes(p), 1, 1, conv_fwd_lanes, &j);
}

/* The backward of images [i0, i1) into dx and into dw, db: those of the
 * job (beta 1) or a lane's partials, which the first image writes (beta 0
 * on it, so the partial needs no zeroing). Pointers into x, w, dx, dw are
 * formed only when that gradient is wanted, so NULL never takes part in
 * pointer arithmetic. With both dw and dx, col holds im2col's columns for
 * dw first, then dcol for dx. */
static void conv_bwd_images(const conv_job *j, int i0, int i1, float *dw,
                            float *db, float first_beta, float *col)
{
    const rt_window *p = j->p;
    const int cg = p->c / p->group, og = p->oc / p->group;
    const int kk = cg * p->kh * p->kw, ohw = p->oh * p->ow;
    const size_t hw = (size_t)p->h * p->w;
    int i, g, o;
    for (i = i0; i < i1; i++) {
        const float beta = i == i0 ? first_beta : 1.0f;
        for (g = 0; g < p->group; g++) {
            const size_t xoff = ((size_t)i * p->c + (size_t)g * cg) * hw;
            const size_t woff = (size_t)g * og * kk;
            const float *dyg = j->dy + ((size_t)i * p->oc + (size_t)g * og) * ohw;
            if (db != NULL)
                for (o = 0; o < og; o++) {
                    const float s = sum_lanes(dyg + (size_t)o * ohw, ohw);
                    db[g * og + o] = beta == 0.0f ? s : db[g * og + o] + s;
                }
            if (dw != NULL) {
                const float *a = j->x + xoff;
                if (col != NULL) {
                    im2col(col, j->x + xoff, cg, p);
                    a = col;
                }
                rt_sgemm(0, 1, og, kk, ohw, 1.0f, dyg, ohw, a, ohw, beta,
                         dw + woff, kk);
            }
            if (j->dx != NULL) {
                if (col == NULL) {
                    rt_sgemm(1, 0, kk, ohw, og, 1.0f, j->w + woff, kk, dyg, ohw,
                             1.0f, j->dx + xoff, ohw);
                } else {
                    rt_sgemm(1, 0, kk, ohw, og, 1.0f, j->w + woff, kk, dyg, ohw,
                             0.0f, col, ohw);
                    col2im_add(j->dx + xoff, col, cg, p);
                }
            }
        }
    }
}

/* Lane l > 0's partial dw and db, after the lanes' im2col buffers. */
static float *conv_lane_partial(const conv_job *j, size_t l)
{
    return j->scratch + rt_conv_scratch(j->p) +
           (l - 1) * conv_partial_floats(j->p);
}

/* The dw part of a partial: oc * (c/group) * kh * kw floats. */
static size_t conv_dw_floats(const rt_window *p)
{
    return conv_partial_floats(p) - (size_t)p->oc;
}

static void conv_bwd_lanes(void *ctx, size_t lo, size_t hi)
{
    const conv_job *j = ctx;
    size_t l;
    for (l = lo; l < hi; l++) {
        const int i0 = conv_lane_start(j->p, (int)l);
        const int i1 = conv_lane_start(j->p, (int)l + 1);
        float *part = l > 0 && (j->dw || j->db) ? conv_lane_partial(j, l) : NULL;
        if (l == 0)
            conv_bwd_images(j, i0, i1, j->dw, j->db, 1.0f, conv_lane_col(j, l));
        else
            conv_bwd_images(j, i0, i1, j->dw ? part : NULL,
                            j->db ? part + conv_dw_floats(j->p) : NULL, 0.0f,
                            conv_lane_col(j, l));
    }
}

void rt_conv_backward(float *dx, float *dw, float *db, const float *dy,
                      const float *x, const float *w, const rt_window *p,
                      float *scratch)
{
    const size_t nw = conv_dw_floats(p);
    const int lanes = conv_lanes(p);
    conv_job j;
    size_t l, k;
    int o;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.dx = dx;
    j.dw = dw;
    j.db = db;
    j.dy = dy;
    j.x = x;
    j.w = w;
    j.scratch = scratch;
    parallel_parts((size_t)lanes, 1, 1, conv_bwd_lanes, &j);
    for (l = 1; l < (size_t)lanes && (dw || db); l++) {
        const float *part = conv_lane_partial(&j, l);
        if (dw != NULL)
            for (k = 0; k < nw; k++)
                dw[k] += part[k];
        if (db != NULL)
            for (o = 0; o < p->oc; o++)
                db[o] += part[nw + (size_t)o];
    }
}

/* The taps of window (oy, ox) inside the input: rows [*k0, *k1) of the
 * kernel, columns [*l0, *l1); returns their number. When it is not 0, *at
 * is the input offset (in its plane) of tap (*k0, *l0); otherwise *at is
 * not set and the caller forms no pointer from it. */
static int window_taps(const rt_window *p, int oy, int ox, int *k0, int *k1,
                       int *l0, int *l1, size_t *at)
{
    const int y0 = oy * p->sh - p->pad_top, x0 = ox * p->sw - p->pad_left;
    inside(y0, p->dh, p->h, p->kh, k0, k1);
    inside(x0, p->dw, p->w, p->kw, l0, l1);
    if (*k0 == *k1 || *l0 == *l1)
        return 0;
    *at = (size_t)(y0 + *k0 * p->dh) * p->w + (size_t)(x0 + *l0 * p->dw);
    return (*k1 - *k0) * (*l1 - *l0);
}

/* The plane offset of window (oy, ox)'s maximum, -1 if no tap is inside:
 * the first in row-major window order on ties, the first NaN if any. The
 * forward and the backward both use it, so they agree on the element. */
static ptrdiff_t window_argmax(const float *xq, const rt_window *p, int oy,
                               int ox)
{
    ptrdiff_t best = -1;
    float bv = 0.0f;
    size_t at = 0;
    int k0, k1, l0, l1, ki, kj;
    if (window_taps(p, oy, ox, &k0, &k1, &l0, &l1, &at) == 0)
        return -1;
    for (ki = k0; ki < k1; ki++)
        for (kj = l0; kj < l1; kj++) {
            const ptrdiff_t e = (ptrdiff_t)(at + (size_t)(ki - k0) * p->dh * p->w +
                                            (size_t)(kj - l0) * p->dw);
            const float v = xq[e];
            if (best < 0 || v > bv || (isnan(v) && !isnan(bv))) {
                best = e;
                bv = v;
            }
        }
    return best;
}

/* The outputs [*o0, *o1) along one axis whose every tap is inside: the
 * window starts at o * step - pad >= 0 and ends at or before size - 1. */
static void interior(int pad, int step, int dil, int k, int size, int out,
                     int *o0, int *o1)
{
    const int last = size - 1 - (k - 1) * dil + pad;  /* o * step <= last */
    *o0 = (pad + step - 1) / step;
    *o1 = last < 0 ? 0 : last / step + 1;
    if (*o1 > out)
        *o1 = out;
    if (*o0 > *o1)
        *o0 = *o1;
}

/* window_argmax where every tap is inside: no bounds to find, the same
 * order and the same rule on ties and NaN. */
static ptrdiff_t argmax_inside(const float *xq, const rt_window *p, int oy,
                               int ox)
{
    const ptrdiff_t base = (ptrdiff_t)(oy * p->sh - p->pad_top) * p->w +
                           (ox * p->sw - p->pad_left);
    ptrdiff_t best = base;
    float bv = xq[base];
    int ki, kj;
    for (ki = 0; ki < p->kh; ki++)
        for (kj = 0; kj < p->kw; kj++) {
            const ptrdiff_t e = base + (ptrdiff_t)ki * p->dh * p->w +
                                (ptrdiff_t)kj * p->dw;
            const float v = xq[e];
            if (v > bv || (isnan(v) && !isnan(bv))) {
                best = e;
                bv = v;
            }
        }
    return best;
}

/* ---- pooling fast paths ---------------------------------------------------- */

/* The common pooling windows, k x k with k 2 or 3, stride 2, no dilation,
 * get row kernels with the window shape fixed at compile time: no bounds
 * logic, no loops over taps, and for MaxPool's forward a branch-free max
 * the compiler can vectorize. They run on the interior box only (every tap
 * inside the input); the outputs around it, and every other window, take
 * the generic walk. Both visit the outputs of a row in the same order, so
 * a backward whose windows overlap (3x3) adds into dx in the same order
 * and the results are bitwise those of the generic walk. */

/* The interior box [y0, y1) x [x0, x1) of outputs, and the fast kernel's k
 * (0: none applies). */
typedef struct {
    int y0, y1, x0, x1, k;
} pool_plan;

static pool_plan pool_plan_of(const rt_window *p)
{
    pool_plan b;
    interior(p->pad_top, p->sh, p->dh, p->kh, p->h, p->oh, &b.y0, &b.y1);
    interior(p->pad_left, p->sw, p->dw, p->kw, p->w, p->ow, &b.x0, &b.x1);
    b.k = p->sh == 2 && p->sw == 2 && p->dh == 1 && p->dw == 1 &&
                  p->kh == p->kw && (p->kh == 2 || p->kh == 3)
              ? p->kh
              : 0;
    return b;
}

/* The outputs [*f0, *f1) of row oy that a fast kernel computes; both are
 * ow when none does, so that a caller's "before" span is the whole row. */
static void fast_span(const pool_plan *b, const rt_window *p, int oy, int *f0,
                      int *f1)
{
    const int on = b->k != 0 && oy >= b->y0 && oy < b->y1 && b->x0 < b->x1;
    *f0 = on ? b->x0 : p->ow;
    *f1 = on ? b->x1 : p->ow;
}

/* The input offset (in its plane) of window (oy, ox)'s tap (0, 0). Only for
 * interior windows, whose tap (0, 0) is inside. */
static size_t window_start(const rt_window *p, int oy, int ox)
{
    return (size_t)(oy * p->sh - p->pad_top) * p->w +
           (size_t)(ox * p->sw - p->pad_left);
}

/* window_argmax's rule: v replaces the best so far, m, unless m is a NaN
 * (the first NaN stays) or v <= m (a tie keeps the first); a NaN v fails
 * v <= m and so replaces a number. */
static inline int max_takes(float v, float m)
{
    return m == m && !(v <= m);
}

/* The k x k window at r (rows w apart): its maximum's offset from r, by
 * window_argmax's rule. k is a constant wherever this is inlined. */
static inline ptrdiff_t argmax_kk(const float *r, ptrdiff_t w, int k)
{
    ptrdiff_t best = 0;
    float m = r[0];
    int ki, kj;
    for (ki = 0; ki < k; ki++)
        for (kj = 0; kj < k; kj++) {
            const ptrdiff_t e = ki * w + kj;
            const int t = max_takes(r[e], m); /* selects, not a branch */
            best = t ? e : best;
            m = t ? r[e] : m;
        }
    return best;
}

/* The same window's maximum itself: the same rule, written as nested
 * selects, which gcc vectorizes (a select on max_takes it does not). */
static inline float max_kk(const float *r, ptrdiff_t w, int k)
{
    float m = r[0];
    int ki, kj;
    for (ki = 0; ki < k; ki++)
        for (kj = 0; kj < k; kj++) {
            const float v = r[ki * w + kj];
            m = m != m ? m : v <= m ? m : v;
        }
    return m;
}

/* n outputs of one row, the first window's tap (0, 0) at r; windows are 2
 * apart. One instance per k, so that each is unrolled. */
static void maxpool_row2(float *y, const float *r, ptrdiff_t w, int n)
{
    int j;
    for (j = 0; j < n; j++)
        y[j] = max_kk(r + 2 * j, w, 2);
}

static void maxpool_row3(float *y, const float *r, ptrdiff_t w, int n)
{
    int j;
    for (j = 0; j < n; j++)
        y[j] = max_kk(r + 2 * j, w, 3);
}

static void maxpool_back_row2(float *dx, const float *r, const float *dy,
                              ptrdiff_t w, int n)
{
    int j;
    for (j = 0; j < n; j++)
        dx[2 * j + argmax_kk(r + 2 * j, w, 2)] += dy[j];
}

static void maxpool_back_row3(float *dx, const float *r, const float *dy,
                              ptrdiff_t w, int n)
{
    int j;
    for (j = 0; j < n; j++)
        dx[2 * j + argmax_kk(r + 2 * j, w, 3)] += dy[j];
}

/* Window (oy, ox)'s maximum by the generic walk (-1 if no tap is inside). */
static ptrdiff_t pool_argmax(const float *xq, const rt_window *p,
                             const pool_plan *b, int oy, int ox)
{
    return oy >= b->y0 && oy < b->y1 && ox >= b->x0 && ox < b->x1
               ? argmax_inside(xq, p, oy, ox)
               : window_argmax(xq, p, oy, ox);
}

static void maxpool_span(float *yr, const float *xq, const rt_window *p,
                         const pool_plan *b, int oy, int from, int to)
{
    int ox;
    for (ox = from; ox < to; ox++) {
        const ptrdiff_t e = pool_argmax(xq, p, b, oy, ox);
        yr[ox] = e < 0 ? -INFINITY : xq[e];
    }
}

static void maxpool_back_span(float *dxq, const float *dyr, const float *xq,
                              const rt_window *p, const pool_plan *b, int oy,
                              int from, int to)
{
    int ox;
    for (ox = from; ox < to; ox++) {
        const ptrdiff_t e = pool_argmax(xq, p, b, oy, ox);
        if (e >= 0)
            dxq[e] += dyr[ox];
    }
}

/* A MaxPool over planes [lo, hi) of n * c: each plane's outputs (and in
 * the backward its dx) are its own, so planes split across threads with
 * the same bits. */
typedef struct {
    float *out;             /* y, or dx */
    const float *x, *dy;
    const rt_window *p;
    int set;                /* the backward's dx written, not added to */
} pool_job;

static void maxpool_fwd_planes(void *ctx, size_t lo, size_t hi)
{
    const pool_job *j = ctx;
    const rt_window *p = j->p;
    const size_t hw = (size_t)p->h * p->w, ohw = (size_t)p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    size_t q;
    int oy, f0, f1;
    for (q = lo; q < hi; q++) {
        const float *xq = j->x + q * hw;
        for (oy = 0; oy < p->oh; oy++) {
            float *yr = j->out + q * ohw + (size_t)oy * p->ow;
            fast_span(&b, p, oy, &f0, &f1);
            maxpool_span(yr, xq, p, &b, oy, 0, f0);
            if (f0 < f1) {
                const float *r = xq + window_start(p, oy, f0);
                if (b.k == 2)
                    maxpool_row2(yr + f0, r, p->w, f1 - f0);
                else
                    maxpool_row3(yr + f0, r, p->w, f1 - f0);
            }
            maxpool_span(yr, xq, p, &b, oy, f1, p->ow);
        }
    }
}

static void maxpool_back_planes(void *ctx, size_t lo, size_t hi)
{
    const pool_job *j = ctx;
    const rt_window *p = j->p;
    const size_t hw = (size_t)p->h * p->w, ohw = (size_t)p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    size_t q;
    int oy, f0, f1;
    /* written: the chunk's planes zeroed here, while they are in cache (a
     * memset inside the plane loop below made gcc compile it 5x slower) */
    if (j->set)
        memset(j->out + lo * hw, 0, (hi - lo) * hw * sizeof *j->out);
    for (q = lo; q < hi; q++) {
        const float *xq = j->x + q * hw;
        float *dxq = j->out + q * hw;
        for (oy = 0; oy < p->oh; oy++) {
            const float *dyr = j->dy + q * ohw + (size_t)oy * p->ow;
            fast_span(&b, p, oy, &f0, &f1);
            maxpool_back_span(dxq, dyr, xq, p, &b, oy, 0, f0);
            if (f0 < f1) {
                const size_t at = window_start(p, oy, f0);
                if (b.k == 2)
                    maxpool_back_row2(dxq + at, xq + at, dyr + f0, p->w, f1 - f0);
                else
                    maxpool_back_row3(dxq + at, xq + at, dyr + f0, p->w, f1 - f0);
            }
            maxpool_back_span(dxq, dyr, xq, p, &b, oy, f1, p->ow);
        }
    }
}

static void pool_run_set(rt_chunk_fn fn, float *out, const float *x,
                         const float *dy, const rt_window *p, int set)
{
    pool_job j;
    const size_t planes = (size_t)p->n * (size_t)p->c;
    j.out = out;
    j.x = x;
    j.dy = dy;
    j.p = p;
    j.set = set;
    if (planes > 0)
        parallel_for(planes, 1, planes * (size_t)p->h * (size_t)p->w,
                     RT_PAR_CHEAP, fn, &j);
}

void rt_maxpool_forward(float *y, const float *x, const rt_window *p)
{
    pool_run_set(maxpool_fwd_planes, y, x, NULL, p, 0);
}

void rt_maxpool_backward(float *dx, const float *dy, const float *x,
                         const rt_window *p)
{
    rt_maxpool_backward_set(dx, dy, x, p, 0);
}

void rt_maxpool_backward_set(float *dx, const float *dy, const float *x,
                             const rt_window *p, unsigned set)
{
    if (dx != NULL)
        pool_run_set(maxpool_back_planes, dx, x, dy, p, (int)(set & 1u));
}

/* count_include_pad's divisor for window (oy, ox): its taps inside the
 * padded input, rows [-pad_top, h + pad_bottom) and columns [-pad_left,
 * w + pad_right). That is kh * kw for every window of a floor-mode
 * geometry; a ceil_mode window that runs past the padding counts only its
 * taps within it (ONNX, and PyTorch's avg_pool2d). */
static int padded_taps(const rt_window *p, int oy, int ox)
{
    int k0, k1, l0, l1;
    inside(oy * p->sh, p->dh, p->h + p->pad_top + p->pad_bottom, p->kh, &k0,
           &k1);
    inside(ox * p->sw, p->dw, p->w + p->pad_left + p->pad_right, p->kw, &l0,
           &l1);
    return (k1 - k0) * (l1 - l0);
}

/* The fast AveragePool rows sum as the generic walk does, from 0.0f in
 * row-major window order, and divide (not multiply by a reciprocal) by
 * k * k, which is the divisor of an interior window with or without
 * count_include_pad. */
static inline float sum_kk(const float *r, ptrdiff_t w, int k)
{
    float s = 0.0f;
    int ki, kj;
    for (ki = 0; ki < k; ki++)
        for (kj = 0; kj < k; kj++)
            s += r[ki * w + kj];
    return s;
}

static void avgpool_row2(float *y, const float *r, ptrdiff_t w, int n)
{
    int j;
    for (j = 0; j < n; j++)
        y[j] = sum_kk(r + 2 * j, w, 2) / 4.0f;
}

static void avgpool_row3(float *y, const float *r, ptrdiff_t w, int n)
{
    int j;
    for (j = 0; j < n; j++)
        y[j] = sum_kk(r + 2 * j, w, 3) / 9.0f;
}

/* dx at r (rows w apart) += g over a k x k window, row-major. */
static inline void spread_kk(float *r, ptrdiff_t w, int k, float g)
{
    int ki, kj;
    for (ki = 0; ki < k; ki++)
        for (kj = 0; kj < k; kj++)
            r[ki * w + kj] += g;
}

static void avgpool_back_row2(float *dx, const float *dy, ptrdiff_t w, int n)
{
    int j;
    for (j = 0; j < n; j++)
        spread_kk(dx + 2 * j, w, 2, dy[j] / 4.0f);
}

static void avgpool_back_row3(float *dx, const float *dy, ptrdiff_t w, int n)
{
    int j;
    for (j = 0; j < n; j++)
        spread_kk(dx + 2 * j, w, 3, dy[j] / 9.0f);
}

/* The generic walk over outputs [from, to) of row oy: each window's taps
 * inside the input and its divisor, found per window. */
static void avgpool_span(float *yr, const float *xq, const rt_window *p,
                         int cip, int oy, int from, int to)
{
    int ox, ki, kj;
    for (ox = from; ox < to; ox++) {
        int k0, k1, l0, l1;
        size_t at = 0;
        const int taps = window_taps(p, oy, ox, &k0, &k1, &l0, &l1, &at);
        /* what the sum is divided by: the taps inside the input, or with
         * count_include_pad those inside the padded input */
        const int d = cip ? padded_taps(p, oy, ox) : taps;
        float s = 0.0f;
        if (taps > 0)
            for (ki = k0; ki < k1; ki++) {
                const float *r = xq + at + (size_t)(ki - k0) * p->dh * p->w;
                for (kj = l0; kj < l1; kj++)
                    s += r[(size_t)(kj - l0) * p->dw];
            }
        yr[ox] = d > 0 ? s / (float)d : 0.0f;
    }
}

static void avgpool_back_span(float *dxq, const float *dyr, const rt_window *p,
                              int cip, int oy, int from, int to)
{
    int ox, ki, kj;
    for (ox = from; ox < to; ox++) {
        int k0, k1, l0, l1;
        size_t at = 0;
        const int taps = window_taps(p, oy, ox, &k0, &k1, &l0, &l1, &at);
        const int d = cip ? padded_taps(p, oy, ox) : taps;
        float g;
        if (taps == 0)
            continue;
        g = dyr[ox] / (float)d;
        for (ki = k0; ki < k1; ki++) {
            float *r = dxq + at + (size_t)(ki - k0) * p->dh * p->w;
            for (kj = l0; kj < l1; kj++)
                r[(size_t)(kj - l0) * p->dw] += g;
        }
    }
}

void rt_avgpool_forward(float *y, const float *x, const rt_window *p,
                        int count_include_pad)
{
    const size_t hw = (size_t)p->h * p->w, ohw = (size_t)p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    int q, oy, f0, f1;
    for (q = 0; q < p->n * p->c; q++) {
        const float *xq = x + (size_t)q * hw;
        for (oy = 0; oy < p->oh; oy++) {
            float *yr = y + (size_t)q * ohw + (size_t)oy * p->ow;
            fast_span(&b, p, oy, &f0, &f1);
            avgpool_span(yr, xq, p, count_include_pad, oy, 0, f0);
            if (f0 < f1) {
                const float *r = xq + window_start(p, oy, f0);
                if (b.k == 2)
                    avgpool_row2(yr + f0, r, p->w, f1 - f0);
                else
                    avgpool_row3(yr + f0, r, p->w, f1 - f0);
            }
            avgpool_span(yr, xq, p, count_include_pad, oy, f1, p->ow);
        }
    }
}

void rt_avgpool_backward(float *dx, const float *dy, const rt_window *p,
                         int count_include_pad)
{
    const size_t hw = (size_t)p->h * p->w, ohw = (size_t)p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    int q, oy, f0, f1;
    if (dx == NULL)
        return;
    for (q = 0; q < p->n * p->c; q++) {
        float *dxq = dx + (size_t)q * hw;
        for (oy = 0; oy < p->oh; oy++) {
            const float *dyr = dy + (size_t)q * ohw + (size_t)oy * p->ow;
            fast_span(&b, p, oy, &f0, &f1);
            avgpool_back_span(dxq, dyr, p, count_include_pad, oy, 0, f0);
            if (f0 < f1) {
                float *r = dxq + window_start(p, oy, f0);
                if (b.k == 2)
                    avgpool_back_row2(r, dyr + f0, p->w, f1 - f0);
                else
                    avgpool_back_row3(r, dyr + f0, p->w, f1 - f0);
            }
            avgpool_back_span(dxq, dyr, p, count_include_pad, oy, f1, p->ow);
        }
    }
}

void rt_global_avgpool_forward(float *y, const float *x, int nc, int hw)
{
    int q, j;
    for (q = 0; q < nc; q++) {
        const float *xq = x + (size_t)q * hw;
        float s = 0.0f;
        for (j = 0; j < hw; j++)
            s += xq[j];
        y[q] = s / (float)hw;
    }
}

void rt_global_avgpool_backward(float *dx, const float *dy, int nc, int hw)
{
    int q, j;
    if (dx == NULL)
        return;
    for (q = 0; q < nc; q++) {
        float *dxq = dx + (size_t)q * hw;
        const float g = dy[q] / (float)hw;
        for (j = 0; j < hw; j++)
            dxq[j] += g;
    }
}

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

/* ---- memory, optimizer ---------------------------------------------------- */

typedef struct {
    float *dst;
    const float *src;
} copy_job;

static void zero_part(void *ctx, size_t lo, size_t hi)
{
    const copy_job *c = ctx;
    size_t i;
    for (i = lo; i < hi; i++)
        c->dst[i] = 0.0f;
}

static void copy_part(void *ctx, size_t lo, size_t hi)
{
    const copy_job *c = ctx;
    size_t i;
    for (i = lo; i < hi; i++)
        c->dst[i] = c->src[i];
}

/* Memory bound: only buffers well past a core's L2 gain from a second
 * core's bandwidth. */
#define RT_PAR_MEMORY ((size_t)1 << 18)

void rt_zero(float *x, size_t n)
{
    copy_job c;
    c.dst = x;
    c.src = NULL;
    parallel_for(n, 16, n, RT_PAR_MEMORY, zero_part, &c);
}

void rt_fill(float *x, size_t n, float value)
{
    size_t i;
    for (i = 0; i < n; i++)
        x[i] = value;
}

void rt_copy(float *dst, const float *src, size_t n)
{
    copy_job c;
    c.dst = dst;
    c.src = src;
    parallel_for(n, 16, n, RT_PAR_MEMORY, copy_part, &c);
}

void rt_accumulate(float *dst, const float *src, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        dst[i] += src[i];
}

void rt_sgd(float *p, const float *g, size_t n, float lr)
{
    size_t i;
    for (i = 0; i < n; i++)
        p[i] -= lr * g[i];
}

void rt_scale(float *x, size_t n, float s)
{
    size_t i;
    for (i = 0; i < n; i++)
        x[i] *= s;
}

/* Each line is one of torch's tensor operations, rounded to float as it
 * rounds them, so that the two agree to the last bits where they can. */
void rt_sgd_update(float *p, const float *g, float *buf, size_t n, float lr,
                   const rt_sgd_config *c, uint64_t step)
{
    size_t i;
    float mu = (float)c->momentum, damp = (float)(1.0 - c->dampening);
    float wd = (float)c->weight_decay, neg_lr = -lr;
    for (i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0.0f)
            d = d + wd * p[i];
        if (mu != 0.0f) {
            float b = step <= 1 ? d : mu * buf[i] + damp * d;
            buf[i] = b;
            d = c->nesterov ? d + mu * b : b;
        }
        p[i] = p[i] + neg_lr * d;
    }
}

void rt_adamw_update(float *p, const float *g, float *m, float *v, size_t n,
                     float lr, const rt_adamw_config *c, uint64_t step)
{
    size_t i;
    double t = (double)(step ? step : 1);
    /* torch computes these in Python floats (double) */
    double bc1 = 1.0 - pow(c->beta1, t);
    double bc2 = 1.0 - pow(c->beta2, t);
    float neg_step_size = (float)-((double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float decay = (float)(1.0 - (double)lr * c->weight_decay);
    float w1 = (float)(1.0 - c->beta1), b2 = (float)c->beta2;
    float w2 = (float)(1.0 - c->beta2), eps = (float)c->eps;
    for (i = 0; i < n; i++) {
        float gi = g[i], denom;
        if (c->weight_decay != 0.0)
            p[i] = p[i] * decay;
        m[i] = m[i] + w1 * (gi - m[i]);
        v[i] = v[i] * b2 + w2 * gi * gi;
        denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] + neg_step_size * (m[i] / denom);
    }
}

void rt_optimizer_update(const rt_optimizer *o, float *p, const float *g,
                         float *state, size_t second, size_t n)
{
    if (o->kind == RT_OPT_ADAMW)
        rt_adamw_update(p, g, state, state + second, n, o->lr, &o->adamw,
                        o->step);
    else
        rt_sgd_update(p, g, state, n, o->lr, &o->sgd, o->step);
}

double rt_grad_norm_sq(const float *g, size_t n)
{
    double s = 0.0;
    size_t i;
    for (i = 0; i < n; i++)
        s += (double)g[i] * (double)g[i];
    return s;
}

float rt_clip_coef(double norm_sq, float max_norm, float *norm)
{
    float total = (float)sqrt(norm_sq);
    float coef = max_norm / (total + 1e-6f);
    *norm = total;
    return coef < 1.0f ? coef : 1.0f;
}

/* ---- deterministic random numbers ----------------------------------------- */

#define RT_GOLDEN UINT64_C(0x9e3779b97f4a7c15) /* 2^64 / golden ratio */

/* A 64-bit finaliser (xor-shift / multiply rounds, splitmix64's constants):
 * a bijection in which every input bit affects every output bit. */
static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= UINT64_C(0xbf58476d1ce4e5b9);
    z ^= z >> 27;
    z *= UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return z;
}

/* Absorbs seed, stream and counter one at a time, each pre-mixed and then
 * mixed again with the state. Every step is a bijection of the word being
 * absorbed, so for fixed (seed, stream) distinct counters give distinct
 * 64-bit states; the counter passes through two full mixing rounds. */
uint32_t rt_rand_u32(uint64_t seed, uint64_t stream, uint64_t counter)
{
    uint64_t h = mix64(seed + RT_GOLDEN);
    h = mix64(h ^ mix64(stream + 2 * RT_GOLDEN));
    h = mix64(h ^ mix64(counter + 3 * RT_GOLDEN));
    return (uint32_t)(h >> 32);
}

/* 24 bits is what a float's significand holds, so every value is exact and
 * the result is < 1. */
float rt_rand_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return (float)(rt_rand_u32(seed, stream, counter) >> 8) *
           (1.0f / 16777216.0f);
}

void rt_init_uniform(float *x, size_t n, float low, float high, uint64_t seed,
                     uint64_t stream)
{
    const float span = high - low;
    size_t i;
    for (i = 0; i < n; i++)
        x[i] = low + span * rt_rand_uniform(seed, stream, i);
}

/* Element i uses counters 2i and 2i+1, so it can be regenerated alone.
 * 1 - u lies in [2^-24, 1], so the log is finite; the price is that |z|
 * never exceeds sqrt(2 * 24 ln 2) ~ 5.77, irrelevant for initialisation. */
void rt_init_normal(float *x, size_t n, float mean, float std, uint64_t seed,
                    uint64_t stream)
{
    size_t i;
    for (i = 0; i < n; i++) {
        const uint64_t c = 2 * (uint64_t)i;
        const float u1 = 1.0f - rt_rand_uniform(seed, stream, c);
        const float u2 = rt_rand_uniform(seed, stream, c + 1);
        const float z = sqrtf(-2.0f * logf(u1)) * cosf(RT_TWO_PI * u2);
        x[i] = mean + std * z;
    }
}

/* ---- loss, dropout, attention --------------------------------------------- */

/* The log-sum-exp of c >= 1 values x[0], x[stride], ...: the max m is
 * taken out first, so no exp overflows and the largest term is exactly 1. */
static float log_sum_exp(const float *x, int c, int stride)
{
    float m = x[0], sum = 0.0f;
    int k;
    for (k = 1; k < c; k++)
        if (x[(size_t)k * stride] > m)
            m = x[(size_t)k * stride];
    for (k = 0; k < c; k++)
        sum += expf(x[(size_t)k * stride] - m);
    return m + logf(sum);
}

/* Whether a label selects a class: not ignored and inside [0, c). */
static int sce_takes_part(int64_t label, int c, int has_ignore,
                          int64_t ignore_index)
{
    return !(has_ignore && label == ignore_index) && label >= 0 && label < c;
}

/* w_p of the header: what a position weighs in the mean. */
static float sce_weight(int64_t label, const float *weights, int c,
                        int has_ignore, int64_t ignore_index)
{
    if (has_ignore && label == ignore_index)
        return 0.0f;
    if (weights == NULL)
        return 1.0f;
    return label >= 0 && label < c ? weights[label] : 0.0f;
}

/* The mean's denominator: the sum of w_p over every position. */
static float sce_total_weight(const int64_t *labels, const float *weights,
                              size_t positions, int c, int has_ignore,
                              int64_t ignore_index)
{
    size_t p;
    float total = 0.0f;
    for (p = 0; p < positions; p++)
        total += sce_weight(labels[p], weights, c, has_ignore, ignore_index);
    return total;
}

/* The loss's operands. Positions are independent; the forward's sum over
 * them is not split: blocks of RT_SCE_BLOCK positions compute their losses
 * on the threads into `part`, then one thread adds them in position order,
 * as a single loop would. */
#define RT_SCE_BLOCK 256
typedef struct {
    float *out;        /* loss per position, or dscores */
    const float *scores, *weights, *dloss;
    const int64_t *labels;
    int c, inner, has_ignore, reduction;
    int64_t ignore_index;
    float g;           /* the backward's dloss / total weight */
    size_t p0;         /* the forward's block */
    float part[RT_SCE_BLOCK];
} sce_job;

/* Position p = (i, d) reads scores[(i c + k) inner + d] for class k. */
static float sce_loss_at(const sce_job *s, size_t p)
{
    const size_t i = p / (size_t)s->inner, d = p % (size_t)s->inner;
    const int64_t label = s->labels[p];
    const float *row = s->scores + i * (size_t)s->c * s->inner + d;
    if (!sce_takes_part(label, s->c, s->has_ignore, s->ignore_index))
        return 0.0f;
    return sce_weight(label, s->weights, s->c, s->has_ignore,
                      s->ignore_index) *
           (log_sum_exp(row, s->c, s->inner) - row[(size_t)label * s->inner]);
}

static void sce_loss_part(void *ctx, size_t lo, size_t hi)
{
    sce_job *s = ctx;
    size_t p;
    for (p = lo; p < hi; p++) {
        if (s->reduction == RT_SCE_NONE)
            s->out[p] = sce_loss_at(s, p);
        else
            s->part[p] = sce_loss_at(s, s->p0 + p);
    }
}

/* The sum of every position's loss, in position order. */
static float sce_sum(sce_job *s, size_t positions)
{
    const size_t work = positions * (size_t)s->c;
    float total = 0.0f;
    size_t p, k, nb;
    if (work < RT_PAR_COSTLY || rt_threads() == 1) {
        for (p = 0; p < positions; p++)
            total += sce_loss_at(s, p);
        return total;
    }
    for (p = 0; p < positions; p += RT_SCE_BLOCK) {
        nb = positions - p < RT_SCE_BLOCK ? positions - p : RT_SCE_BLOCK;
        s->p0 = p;
        parallel_for(nb, 1, 0, 0, sce_loss_part, s);
        for (k = 0; k < nb; k++)
            total += s->part[k];
    }
    return total;
}

static void sce_setup(sce_job *s, const float *scores, const int64_t *labels,
                      const float *weights, int c, int inner, int reduction,
                      int has_ignore, int64_t ignore_index)
{
    s->scores = scores;
    s->labels = labels;
    s->weights = weights;
    s->c = c;
    s->inner = inner;
    s->reduction = reduction;
    s->has_ignore = has_ignore;
    s->ignore_index = ignore_index;
}

void rt_sce_forward(float *loss, const float *scores, const int64_t *labels,
                    const float *weights, int n, int c, int inner,
                    int reduction, int has_ignore, int64_t ignore_index)
{
    const size_t positions = (size_t)n * inner;
    sce_job s;
    float total;
    if (n <= 0 || inner <= 0) {
        if (reduction != RT_SCE_NONE)
            loss[0] = 0.0f;
        return;
    }
    sce_setup(&s, scores, labels, weights, c, inner, reduction, has_ignore,
              ignore_index);
    s.out = loss;
    if (reduction == RT_SCE_NONE) {
        parallel_for(positions, 1, positions * (size_t)c, RT_PAR_COSTLY,
                     sce_loss_part, &s);
        return;
    }
    total = sce_sum(&s, positions);
    if (reduction == RT_SCE_MEAN) {
        const float w = sce_total_weight(labels, weights, positions, c,
                                         has_ignore, ignore_index);
        total = w != 0.0f ? total / w : 0.0f;
    }
    loss[0] = total;
}

/* Positions [lo, hi): d/ds_k of w (lse(s) - s_label) is
 * w (softmax(s)_k - [k == label]). */
static void sce_back_part(void *ctx, size_t lo, size_t hi)
{
    const sce_job *s = ctx;
    const int c = s->c;
    const size_t inner = (size_t)s->inner;
    size_t p;
    int k;
    for (p = lo; p < hi; p++) {
        const int64_t label = s->labels[p];
        const size_t base = p / inner * (size_t)c * inner + p % inner;
        const float *row = s->scores + base;
        float *drow = s->out + base;
        float lse, gw;
        if (!sce_takes_part(label, c, s->has_ignore, s->ignore_index))
            continue;
        gw = (s->reduction == RT_SCE_NONE ? s->dloss[p] : s->g) *
             sce_weight(label, s->weights, c, s->has_ignore, s->ignore_index);
        /* softmax_k = exp(s_k - lse), with s_k - lse <= 0 */
        lse = log_sum_exp(row, c, s->inner);
        for (k = 0; k < c; k++) {
            const float q = expf(row[(size_t)k * inner] - lse);
            drow[(size_t)k * inner] += gw * (k == label ? q - 1.0f : q);
        }
    }
}

void rt_sce_backward(float *dscores, const float *dloss, const float *scores,
                     const int64_t *labels, const float *weights, int n,
                     int c, int inner, int reduction, int has_ignore,
                     int64_t ignore_index)
{
    float g = 0.0f;
    sce_job s;
    if (dscores == NULL)
        return;
    if (reduction != RT_SCE_NONE)
        g = dloss[0];
    if (reduction == RT_SCE_MEAN) {
        const float w = sce_total_weight(labels, weights, (size_t)n * inner,
                                         c, has_ignore, ignore_index);
        if (w == 0.0f)
            return;
        g /= w;
    }
    if (n <= 0 || inner <= 0)
        return;
    sce_setup(&s, scores, labels, weights, c, inner, reduction, has_ignore,
              ignore_index);
    s.out = dscores;
    s.dloss = dloss;
    s.g = g;
    parallel_for((size_t)n * inner, 1, (size_t)n * inner * c, RT_PAR_COSTLY,
                 sce_back_part, &s);
}

/* Element i's fate; the stream and the threshold are the caller's. */
static int dropout_keeps(uint64_t seed, uint64_t stream, int i, float ratio)
{
    return rt_rand_uniform(seed, stream, (uint64_t)i) >= ratio;
}

/* Element i's mask is a hash of (seed, stream, i): a chunk draws its own
 * elements' exactly as one pass over all of them would. mode: 0 forward
 * (out = x * s or 0), 1 backward (out += dy * s where kept), 2 the mask. */
typedef struct {
    float *out;
    const float *in;
    float ratio, s;
    uint64_t seed, stream;
    int mode;
} dropout_job;

/* One loop per mode, the job's fields in locals: so each loop is a
 * straight hash-and-select the compiler can vectorize. */
static void dropout_part(void *ctx, size_t lo, size_t hi)
{
    const dropout_job *d = ctx;
    float *out = d->out;
    const float *in = d->in;
    const float ratio = d->ratio, s = d->s;
    const uint64_t seed = d->seed, stream = d->stream;
    int i;
    if (d->mode == 0)
        for (i = (int)lo; i < (int)hi; i++)
            out[i] = dropout_keeps(seed, stream, i, ratio) ? in[i] * s : 0.0f;
    else if (d->mode == 2)
        for (i = (int)lo; i < (int)hi; i++)
            out[i] = dropout_keeps(seed, stream, i, ratio) ? 1.0f : 0.0f;
    else /* not += 0 where dropped: that would turn a -0 gradient into +0 */
        for (i = (int)lo; i < (int)hi; i++)
            out[i] = dropout_keeps(seed, stream, i, ratio) ? out[i] + in[i] * s
                                                           : out[i];
}

static void dropout_run(float *out, const float *in, int n, float ratio,
                        uint64_t seed, uint64_t step, uint32_t node, int mode)
{
    dropout_job d;
    d.out = out;
    d.in = in;
    d.ratio = ratio;
    d.s = 1.0f / (1.0f - ratio);
    d.seed = seed;
    d.stream = RT_DROPOUT_STREAM(step, node);
    d.mode = mode;
    if (n > 0)
        parallel_for((size_t)n, 16, (size_t)n, RT_PAR_COSTLY, dropout_part,
                     &d);
}

void rt_dropout_forward(float *y, const float *x, int n, float ratio,
                        uint64_t seed, uint64_t step, uint32_t node)
{
    dropout_run(y, x, n, ratio, seed, step, node, 0);
}

void rt_dropout_backward(float *dx, const float *dy, int n, float ratio,
                         uint64_t seed, uint64_t step, uint32_t node)
{
    rt_dropout_backward_set(dx, dy, n, ratio, seed, step, node, 0);
}

/* Written, the gradient is the forward's own loop on dy: dy * s where
 * kept, 0 where dropped. */
void rt_dropout_backward_set(float *dx, const float *dy, int n, float ratio,
                             uint64_t seed, uint64_t step, uint32_t node,
                             unsigned set)
{
    if (dx != NULL)
        dropout_run(dx, dy, n, ratio, seed, step, node, set & 1u ? 0 : 1);
}

void rt_dropout_mask(float *mask, int n, float ratio, uint64_t seed,
                     uint64_t step, uint32_t node)
{
    dropout_run(mask, NULL, n, ratio, seed, step, node, 2);
}

/* Attention works on blocks of RT_ATTN_BQ queries against blocks of up to
 * RT_ATTN_BK keys (FlashAttention's tiling): each product of a block pair is
 * one small GEMM, and the softmax statistics (row max m, row sum l) live per
 * query block, updated key block by key block (online softmax). Scratch
 * therefore grows with neither sq nor, past RT_ATTN_BK, skv. With causal a
 * query block stops at the key of its last row (the upper half is skipped
 * block-wise); inside a block each row masks the keys after its own. */
#ifndef RT_ATTN_BQ
#define RT_ATTN_BQ 32
#endif
#ifndef RT_ATTN_BK
#define RT_ATTN_BK 64
#endif

/* Heads are independent, so the kernels run them in RT_ATTN_LANES groups
 * (heads [L bh / lanes, (L + 1) bh / lanes) for lane L), each with its own
 * part of the scratch, on the runtime's threads; a head is computed the
 * same whichever lane or thread runs it. Fixed rather than the thread
 * count, because the scratch is sized when the graph is compiled. */
#define RT_ATTN_LANES 2

/* Below this many score entries (bh sq skv) the heads stay on the calling
 * thread: gpt's 16 heads of 64x64 (64K) gain from two. */
#define RT_PAR_ATTN ((size_t)1 << 14)

static int attn_min(int a, int b)
{
    return a < b ? a : b;
}

/* The lanes' ranges of heads [lo, hi) of lane jobs [lo, hi), one lane at
 * a time; run(ctx, lane, b0, b1) does heads [b0, b1) with lane's scratch. */
typedef struct {
    void (*run)(void *ctx, int lane, int b0, int b1);
    void *ctx;
    int bh;
} attn_lanes;

static void attn_lane_part(void *ctx, size_t lo, size_t hi)
{
    const attn_lanes *j = ctx;
    size_t lane;
    for (lane = lo; lane < hi; lane++)
        j->run(j->ctx, (int)lane, (int)(lane * (size_t)j->bh / RT_ATTN_LANES),
               (int)((lane + 1) * (size_t)j->bh / RT_ATTN_LANES));
}

static void attn_run_lanes(void (*run)(void *, int, int, int), void *ctx,
                           int bh, int sq, int skv)
{
    attn_lanes j;
    j.run = run;
    j.ctx = ctx;
    j.bh = bh;
    if ((size_t)bh * (size_t)sq * (size_t)skv < RT_PAR_ATTN)
        run(ctx, 0, 0, bh);
    else
        parallel_parts(RT_ATTN_LANES, 1, 1, attn_lane_part, &j);
}

/* Keys 0..end-1 are the ones some query of rows i0..i0+mq-1 sees. */
static int attn_keys_end(int i0, int mq, int skv, int causal)
{
    return causal ? attn_min(skv, i0 + mq) : skv;
}

/* How many keys of the block j0..j0+nk-1 query i sees (a prefix). */
static int attn_row_keys(int i, int j0, int nk, int causal)
{
    int n = causal ? i + 1 - j0 : nk;
    return n < 0 ? 0 : attn_min(n, nk);
}

/* s = scale * Q K^T for query rows i0.. (mq) and keys j0.. (nk), stride nk. */
static void attn_scores(float *s, const float *q, const float *k, int i0,
                        int mq, int j0, int nk, int e, float scale)
{
    rt_sgemm(0, 1, mq, nk, e, scale, q + (size_t)i0 * e, e,
             k + (size_t)j0 * e, e, 0.0f, s, nk);
}

/* exp(x) for x <= 0 without a libm call, so that a row's loop vectorizes:
 * x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial to r^6
 * (relative error about 1e-7), 2^n built in the exponent bits. Below -87
 * the result would leave the normal range: 0 there (under 1e-38, nothing
 * against a row whose largest term is 1; a saturated softmax stays exactly
 * one-hot), computed on the clamped x so that no lane overflows. */
RT_INLINE float attn_exp(float x)
{
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds */
    const float under = x < -87.0f ? 0.0f : 1.0f;
    float n, r, p, two_n;
    int32_t bits;
    x = x < -87.0f ? -87.0f : x;
    n = (x * 1.44269504f + round) - round;
    r = (x - n * 0.693145752f) - n * 1.42860677e-6f; /* ln2, hi + lo */
    p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +
        r * (1.0f / 120 + r * (1.0f / 720))))));
    bits = ((int32_t)n + 127) * (1 << 23);
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n * under;
}

/* Reductions over a row in 8 interleaved lanes, so that they vectorize
 * (a single running float would fix the order and forbid it). */
#define ATTN_LANES 8

static float attn_row_max(const float *s, int n, float m)
{
    float lane[ATTN_LANES];
    int j, t;
    for (t = 0; t < ATTN_LANES; t++)
        lane[t] = m;
    for (j = 0; j + ATTN_LANES <= n; j += ATTN_LANES)
        for (t = 0; t < ATTN_LANES; t++)
            lane[t] = s[j + t] > lane[t] ? s[j + t] : lane[t];
    for (; j < n; j++)
        m = s[j] > m ? s[j] : m;
    for (t = 0; t < ATTN_LANES; t++)
        m = lane[t] > m ? lane[t] : m;
    return m;
}

static float attn_lanes_sum(const float *lane, float sum)
{
    int t;
    for (t = 0; t < ATTN_LANES; t++)
        sum += lane[t];
    return sum;
}

static float attn_row_sum(const float *a, int n)
{
    float lane[ATTN_LANES] = {0}, sum = 0.0f;
    int j, t;
    for (j = 0; j + ATTN_LANES <= n; j += ATTN_LANES)
        for (t = 0; t < ATTN_LANES; t++)
            lane[t] += a[j + t];
    for (; j < n; j++)
        sum += a[j];
    return attn_lanes_sum(lane, sum);
}

static float attn_row_dot(const float *a, const float *b, int n)
{
    float lane[ATTN_LANES] = {0}, sum = 0.0f;
    int j, t;
    for (j = 0; j + ATTN_LANES <= n; j += ATTN_LANES)
        for (t = 0; t < ATTN_LANES; t++)
            lane[t] += a[j + t] * b[j + t];
    for (; j < n; j++)
        sum += a[j] * b[j];
    return attn_lanes_sum(lane, sum);
}

/* s[j] = exp(s[j] - m) * c for the nv visible keys, 0 for the rest. */
static void attn_exp_row(float *s, int nv, int nk, float m, float c)
{
    int j;
    for (j = 0; j < nv; j++)
        s[j] = attn_exp(s[j] - m) * c;
    for (; j < nk; j++)
        s[j] = 0.0f;
}

/* Folds a key block into one row's statistics: the nv visible scores of s
 * become exp(s - m) against the new running max m, the masked rest 0, and l
 * gains their sum. Returns the factor exp(m_old - m) that sums taken against
 * the old max need (0 while the row had seen nothing, m_old = -inf). */
static float attn_fold_row(float *s, int nv, int nk, float *m, float *l)
{
    const float mx = attn_row_max(s, nv, *m);
    const float c = nv > 0 ? expf(*m - mx) : 1.0f;
    attn_exp_row(s, nv, nk, mx, 1.0f);
    *l = *l * c + attn_row_sum(s, nv);
    *m = mx;
    return c;
}

static void attn_scale_row(float *x, int n, float c)
{
    int t;
    for (t = 0; t < n; t++)
        x[t] *= c;
}

/* One lane's: a score block, then m and l per query. */
static size_t attn_lane_scratch(int skv)
{
    return skv > 0 ? (size_t)RT_ATTN_BQ * attn_min(skv, RT_ATTN_BK) +
                         2 * RT_ATTN_BQ
                   : 0;
}

size_t rt_attention_scratch(int skv)
{
    return RT_ATTN_LANES * attn_lane_scratch(skv);
}

/* One query block of one head: y rows accumulate P V unnormalized, rescaled
 * whenever a row's max grows, and are divided by l at the end. */
static void attn_forward_block(float *y, const float *q, const float *k,
                               const float *v, int i0, int mq, int skv, int e,
                               int ev, float scale, int causal, float *scratch)
{
    float *s = scratch;
    float *m = s + (size_t)RT_ATTN_BQ * attn_min(skv, RT_ATTN_BK);
    float *l = m + RT_ATTN_BQ;
    const int end = attn_keys_end(i0, mq, skv, causal);
    int i, j0;
    memset(y + (size_t)i0 * ev, 0, (size_t)mq * ev * sizeof *y);
    for (i = 0; i < mq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    for (j0 = 0; j0 < end; j0 += RT_ATTN_BK) {
        const int nk = attn_min(RT_ATTN_BK, end - j0);
        attn_scores(s, q, k, i0, mq, j0, nk, e, scale);
        for (i = 0; i < mq; i++) {
            const float c =
                attn_fold_row(s + (size_t)i * nk,
                              attn_row_keys(i0 + i, j0, nk, causal), nk,
                              &m[i], &l[i]);
            if (c != 1.0f && j0 > 0)
                attn_scale_row(y + (size_t)(i0 + i) * ev, ev, c);
        }
        rt_sgemm(0, 0, mq, ev, nk, 1.0f, s, nk, v + (size_t)j0 * ev, ev,
                 1.0f, y + (size_t)i0 * ev, ev);
    }
    for (i = 0; i < mq; i++)
        if (l[i] > 0.0f)
            attn_scale_row(y + (size_t)(i0 + i) * ev, ev, 1.0f / l[i]);
}

typedef struct {
    float *y;
    const float *q, *k, *v;
    int sq, skv, e, ev, causal;
    float scale, *scratch;
} attn_fwd;

static void attn_forward_heads(void *ctx, int lane, int b0, int b1)
{
    const attn_fwd *a = ctx;
    float *scratch = a->scratch + (size_t)lane * attn_lane_scratch(a->skv);
    int b, i0;
    for (b = b0; b < b1; b++) {
        const float *qb = a->q + (size_t)b * a->sq * a->e;
        const float *kb = a->k + (size_t)b * a->skv * a->e;
        const float *vb = a->v + (size_t)b * a->skv * a->ev;
        float *yb = a->y + (size_t)b * a->sq * a->ev;
        for (i0 = 0; i0 < a->sq; i0 += RT_ATTN_BQ)
            attn_forward_block(yb, qb, kb, vb, i0,
                               attn_min(RT_ATTN_BQ, a->sq - i0), a->skv, a->e,
                               a->ev, a->scale, a->causal, scratch);
    }
}

void rt_attention_forward(float *y, const float *q, const float *k,
                          const float *v, int bh, int sq, int skv, int e,
                          int ev, float scale, int causal, float *scratch)
{
    attn_fwd a;
    if (skv <= 0) { /* no query sees a key: zeros, and scratch is empty */
        memset(y, 0, (size_t)bh * sq * ev * sizeof *y);
        return;
    }
    a.y = y;
    a.q = q;
    a.k = k;
    a.v = v;
    a.sq = sq;
    a.skv = skv;
    a.e = e;
    a.ev = ev;
    a.causal = causal;
    a.scale = scale;
    a.scratch = scratch;
    attn_run_lanes(attn_forward_heads, &a, bh, sq, skv);
}

/* The backward of one head, FlashAttention-2's way without a stored
 * logsumexp: per query block a first pass over its key blocks rebuilds m, l
 * and D_i = sum_j p_ij dp_ij (= dy_i . y_i) online, a second turns each key
 * block's scores into p and ds = scale p (dp - D) and adds the four GEMMs.
 * When the block sees one key block only, the second pass reuses the first's
 * scores and dp instead of recomputing them. */
typedef struct {
    float *dq, *dk, *dv;
    const float *dy, *q, *k, *v; /* the head's */
    int sq, skv, e, ev, causal;
    float scale;
    float *s, *dp, *m, *l, *d; /* scratch: 2 blocks, 3 rows of stats */
} attn_bwd;

/* One lane's: p, then ds, two score blocks; m, l and D per query. */
static size_t attn_bwd_lane_scratch(int skv)
{
    return skv > 0 ? (size_t)2 * RT_ATTN_BQ * attn_min(skv, RT_ATTN_BK) +
                         3 * RT_ATTN_BQ
                   : 0;
}

size_t rt_attention_backward_scratch(int skv)
{
    return RT_ATTN_LANES * attn_bwd_lane_scratch(skv);
}

static int attn_bwd_needs_ds(const attn_bwd *a)
{
    return a->dq != NULL || a->dk != NULL;
}

/* dp = dY V^T for the block pair (stride nk). */
static void attn_dp(const attn_bwd *a, int i0, int mq, int j0, int nk)
{
    rt_sgemm(0, 1, mq, nk, a->ev, 1.0f, a->dy + (size_t)i0 * a->ev, a->ev,
             a->v + (size_t)j0 * a->ev, a->ev, 0.0f, a->dp, nk);
}

/* First pass: m, l and D of rows i0.. from scratch; leaves the last key
 * block's exp(s - m) in a->s and its dp in a->dp. */
static void attn_bwd_stats(const attn_bwd *a, int i0, int mq, int end)
{
    const int ds = attn_bwd_needs_ds(a);
    int i, j0;
    for (i = 0; i < mq; i++) {
        a->m[i] = -INFINITY;
        a->l[i] = a->d[i] = 0.0f;
    }
    for (j0 = 0; j0 < end; j0 += RT_ATTN_BK) {
        const int nk = attn_min(RT_ATTN_BK, end - j0);
        attn_scores(a->s, a->q, a->k, i0, mq, j0, nk, a->e, a->scale);
        if (ds)
            attn_dp(a, i0, mq, j0, nk);
        for (i = 0; i < mq; i++) {
            float *si = a->s + (size_t)i * nk;
            const int nv = attn_row_keys(i0 + i, j0, nk, a->causal);
            const float c = attn_fold_row(si, nv, nk, &a->m[i], &a->l[i]);
            if (ds)
                a->d[i] = a->d[i] * c +
                          attn_row_dot(si, a->dp + (size_t)i * nk, nv);
        }
    }
    for (i = 0; i < mq; i++)
        a->d[i] = a->l[i] > 0.0f ? a->d[i] / a->l[i] : 0.0f;
}

/* p = exp(s - m) / l in a->s for the block pair; recomputed from q, k (and
 * dp from dy, v) unless the first pass's single block is still there. */
static void attn_bwd_probs(const attn_bwd *a, int i0, int mq, int j0, int nk,
                           int reuse)
{
    int i;
    if (!reuse) {
        attn_scores(a->s, a->q, a->k, i0, mq, j0, nk, a->e, a->scale);
        if (attn_bwd_needs_ds(a))
            attn_dp(a, i0, mq, j0, nk);
    }
    for (i = 0; i < mq; i++) {
        float *si = a->s + (size_t)i * nk;
        const int nv = attn_row_keys(i0 + i, j0, nk, a->causal);
        const float inv = 1.0f / a->l[i], mi = a->m[i];
        if (reuse)
            attn_scale_row(si, nk, inv);
        else
            attn_exp_row(si, nv, nk, mi, inv);
    }
}

/* Second pass over one key block: dv += p^T dy, then ds (in a->dp),
 * dq += ds k, dk += ds^T q. */
static void attn_bwd_block(const attn_bwd *a, int i0, int mq, int j0, int nk)
{
    const float *p = a->s;
    int i, j;
    if (a->dv != NULL)
        rt_sgemm(1, 0, nk, a->ev, mq, 1.0f, p, nk, a->dy + (size_t)i0 * a->ev,
                 a->ev, 1.0f, a->dv + (size_t)j0 * a->ev, a->ev);
    if (!attn_bwd_needs_ds(a))
        return;
    for (i = 0; i < mq; i++) {
        const float *pi = p + (size_t)i * nk;
        float *dsi = a->dp + (size_t)i * nk;
        for (j = 0; j < nk; j++)
            dsi[j] = a->scale * pi[j] * (dsi[j] - a->d[i]);
    }
    if (a->dq != NULL)
        rt_sgemm(0, 0, mq, a->e, nk, 1.0f, a->dp, nk, a->k + (size_t)j0 * a->e,
                 a->e, 1.0f, a->dq + (size_t)i0 * a->e, a->e);
    if (a->dk != NULL)
        rt_sgemm(1, 0, nk, a->e, mq, 1.0f, a->dp, nk, a->q + (size_t)i0 * a->e,
                 a->e, 1.0f, a->dk + (size_t)j0 * a->e, a->e);
}

static void attn_bwd_query_block(const attn_bwd *a, int i0, int mq)
{
    const int end = attn_keys_end(i0, mq, a->skv, a->causal);
    const int reuse = end <= RT_ATTN_BK;
    int j0;
    attn_bwd_stats(a, i0, mq, end);
    for (j0 = 0; j0 < end; j0 += RT_ATTN_BK) {
        const int nk = attn_min(RT_ATTN_BK, end - j0);
        attn_bwd_probs(a, i0, mq, j0, nk, reuse);
        attn_bwd_block(a, i0, mq, j0, nk);
    }
}

/* The arguments of rt_attention_backward, for its lanes. */
typedef struct {
    float *dq, *dk, *dv, *scratch;
    const float *dy, *q, *k, *v;
    int sq, skv, e, ev, causal;
    float scale;
} attn_bwd_args;

static void attn_backward_heads(void *ctx, int lane, int b0, int b1)
{
    const attn_bwd_args *w = ctx;
    const size_t blk = (size_t)RT_ATTN_BQ * attn_min(w->skv, RT_ATTN_BK);
    attn_bwd a;
    int b, i0;
    a.sq = w->sq;
    a.skv = w->skv;
    a.e = w->e;
    a.ev = w->ev;
    a.causal = w->causal;
    a.scale = w->scale;
    a.s = w->scratch + (size_t)lane * attn_bwd_lane_scratch(w->skv);
    a.dp = a.s + blk;
    a.m = a.dp + blk;
    a.l = a.m + RT_ATTN_BQ;
    a.d = a.l + RT_ATTN_BQ;
    for (b = b0; b < b1; b++) {
        const size_t oq = (size_t)b * a.sq, ok = (size_t)b * a.skv;
        a.dq = w->dq != NULL ? w->dq + oq * a.e : NULL;
        a.dk = w->dk != NULL ? w->dk + ok * a.e : NULL;
        a.dv = w->dv != NULL ? w->dv + ok * a.ev : NULL;
        a.dy = w->dy + oq * a.ev;
        a.q = w->q + oq * a.e;
        a.k = w->k + ok * a.e;
        a.v = w->v + ok * a.ev;
        for (i0 = 0; i0 < a.sq; i0 += RT_ATTN_BQ)
            attn_bwd_query_block(&a, i0, attn_min(RT_ATTN_BQ, a.sq - i0));
    }
}

void rt_attention_backward(float *dq, float *dk, float *dv, const float *dy,
                           const float *q, const float *k, const float *v,
                           int bh, int sq, int skv, int e, int ev, float scale,
                           int causal, float *scratch)
{
    attn_bwd_args w;
    /* without keys no query sees one: nothing flows back */
    if ((dq == NULL && dk == NULL && dv == NULL) || skv <= 0)
        return;
    w.dq = dq;
    w.dk = dk;
    w.dv = dv;
    w.scratch = scratch;
    w.dy = dy;
    w.q = q;
    w.k = k;
    w.v = v;
    w.sq = sq;
    w.skv = skv;
    w.e = e;
    w.ev = ev;
    w.causal = causal;
    w.scale = scale;
    attn_run_lanes(attn_backward_heads, &w, bh, sq, skv);
}

/* ---- .npy files ----------------------------------------------------------- */

#ifndef RT_NO_STDIO

#define NPY_MAGIC       "\x93NUMPY"
#define NPY_MAGIC_LEN   6
#define NPY_ALIGN       64   /* magic + length + dict is padded to this */
#define NPY_MAX_HEADER  4096 /* numpy's own float headers are < 256 bytes */
#define NPY_MAX_DIMS    32   /* numpy's limit; parsed only to report it */
#define NPY_CHUNK       256  /* floats converted per fread / fwrite */

/* Writes a formatted reason into `why`, if the caller gave one. */
static void say(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    if (why == NULL || whylen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* Python's tuple spelling, as numpy writes it: (), (5,), (3, 4). */
static void shape_str(char *s, size_t len, int rank, const long long *dims)
{
    size_t used = 0;
    int d;
    s[0] = '\0';
    for (d = 0; d < rank && used < len; d++)
        used += (size_t)snprintf(s + used, len - used, "%s%lld",
                                 d == 0 ? "(" : ", ", dims[d]);
    if (used < len)
        snprintf(s + used, len - used, rank == 0 ? "()" : rank == 1 ? ",)" : ")");
}

/* Elements are stored little-endian whatever the host's byte order. */
static void put_le(unsigned char *p, uint64_t u, size_t size)
{
    size_t b;
    for (b = 0; b < size; b++)
        p[b] = (unsigned char)(u >> (8 * b));
}

static uint64_t get_le(const unsigned char *p, size_t size)
{
    uint64_t u = 0;
    size_t b;
    for (b = 0; b < size; b++)
        u |= (uint64_t)p[b] << (8 * b);
    return u;
}

/* The two element types: float32 parameters and data, int64 indices. */
typedef struct {
    const char *descr;
    const char *what;
    size_t size;
} npy_type;

static const npy_type npy_f32 = {"<f4", "float32", 4};
static const npy_type npy_i64 = {"<i8", "int64", 8};

static void put_elem(unsigned char *p, const void *data, size_t i,
                     const npy_type *t)
{
    uint32_t u;
    if (t->size == 8) {
        put_le(p, (uint64_t)((const int64_t *)data)[i], 8);
        return;
    }
    memcpy(&u, (const float *)data + i, sizeof u);
    put_le(p, u, 4);
}

static void get_elem(void *data, size_t i, const unsigned char *p,
                     const npy_type *t)
{
    uint32_t u;
    if (t->size == 8) {
        uint64_t v = get_le(p, 8);
        int64_t x;
        memcpy(&x, &v, sizeof x);   /* two's complement, as numpy wrote it */
        ((int64_t *)data)[i] = x;
        return;
    }
    u = (uint32_t)get_le(p, 4);
    memcpy((float *)data + i, &u, sizeof u);
}

/* Fills head with magic, version 1.0, length and the padded dict; returns
 * the total header size, a multiple of NPY_ALIGN. */
static size_t npy_make_header(char *head, size_t cap, int rank,
                              const long long *dims, const npy_type *t)
{
    char shape[RT_MAX_RANK * 24 + 8];
    size_t len, total;
    shape_str(shape, sizeof shape, rank, dims);
    len = NPY_MAGIC_LEN + 4 +
          (size_t)snprintf(head + NPY_MAGIC_LEN + 4, cap - NPY_MAGIC_LEN - 4,
                           "{'descr': '%s', 'fortran_order': False, "
                           "'shape': %s, }", t->descr, shape);
    total = (len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN; /* +1: '\n' */
    memcpy(head, NPY_MAGIC, NPY_MAGIC_LEN);
    head[6] = 1;
    head[7] = 0;
    head[8] = (char)((total - 10) & 0xff);
    head[9] = (char)((total - 10) >> 8);
    memset(head + len, ' ', total - 1 - len);
    head[total - 1] = '\n';
    return total;
}

static int npy_write(const char *path, const void *data, int rank,
                     const int *dims, const npy_type *t)
{
    char head[256]; /* the dict for RT_MAX_RANK 10-digit dims fits in 192 */
    unsigned char buf[NPY_CHUNK * 8];
    long long ldims[RT_MAX_RANK];
    size_t count = 1, total, i, j, k;
    FILE *f;
    int d, ok;
    if (rank < 0 || rank > RT_MAX_RANK) {
        errno = EINVAL;
        return -1;
    }
    for (d = 0; d < rank; d++) {
        if (dims[d] < 0) {
            errno = EINVAL;
            return -1;
        }
        ldims[d] = dims[d];
        count *= (size_t)dims[d];
    }
    total = npy_make_header(head, sizeof head, rank, ldims, t);
    f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    ok = fwrite(head, 1, total, f) == total;
    for (i = 0; ok && i < count; i += k) {
        k = count - i < NPY_CHUNK ? count - i : NPY_CHUNK;
        for (j = 0; j < k; j++)
            put_elem(buf + t->size * j, data, i + j, t);
        ok = fwrite(buf, t->size, k, f) == k;
    }
    if (fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

int rt_npy_write(const char *path, const float *data, int rank, const int *dims)
{
    return npy_write(path, data, rank, dims, &npy_f32);
}

int rt_npy_write_i64(const char *path, const int64_t *data, int rank,
                     const int *dims)
{
    return npy_write(path, data, rank, dims, &npy_i64);
}

/* What rt_npy_read needs from the header dict; -1 / "" until seen. */
typedef struct {
    char descr[16];
    int fortran;
    int rank;
    long long dims[NPY_MAX_DIMS];
} npy_header;

static void skip_ws(const char **s)
{
    while (**s == ' ' || **s == '\t' || **s == '\n' || **s == '\r')
        (*s)++;
}

/* A Python string literal in ' or " (numpy never needs escapes here). */
static int parse_str(const char **s, char *out, size_t cap)
{
    const char q = **s;
    size_t n = 0;
    if (q != '\'' && q != '"')
        return -1;
    for ((*s)++; **s != q; (*s)++) {
        if (**s == '\0' || n + 1 >= cap)
            return -1;
        out[n++] = **s;
    }
    (*s)++;
    out[n] = '\0';
    return 0;
}

static int parse_bool(const char **s, int *v)
{
    if (strncmp(*s, "True", 4) == 0) {
        *v = 1;
        *s += 4;
    } else if (strncmp(*s, "False", 5) == 0) {
        *v = 0;
        *s += 5;
    } else {
        return -1;
    }
    return 0;
}

/* A non-negative integer; Python 2 era files may carry an 'L' suffix. */
static int parse_dim(const char **s, long long *v)
{
    if (**s < '0' || **s > '9')
        return -1;
    for (*v = 0; **s >= '0' && **s <= '9'; (*s)++) {
        if (*v > (LLONG_MAX - 9) / 10)
            return -1;
        *v = *v * 10 + (**s - '0');
    }
    if (**s == 'L')
        (*s)++;
    return 0;
}

/* A tuple of dims: (), (5,), (3, 4), with any spacing and a trailing comma. */
static int parse_shape(const char **s, npy_header *h)
{
    if (**s != '(')
        return -1;
    (*s)++;
    for (h->rank = 0;; h->rank++) {
        skip_ws(s);
        if (**s == ')')
            break;
        if (h->rank == NPY_MAX_DIMS || parse_dim(s, &h->dims[h->rank]) != 0)
            return -1;
        skip_ws(s);
        if (**s == ',')
            (*s)++;
        else if (**s != ')')
            return -1;
    }
    (*s)++;
    return 0;
}

static int parse_value(const char **s, const char *key, npy_header *h)
{
    if (strcmp(key, "descr") == 0)
        return parse_str(s, h->descr, sizeof h->descr);
    if (strcmp(key, "fortran_order") == 0)
        return parse_bool(s, &h->fortran);
    return parse_shape(s, h);
}

/* The header dict, keys in any order; numpy writes exactly these three. */
static int parse_dict(const char *s, npy_header *h, char *why, size_t whylen)
{
    char key[32];
    h->descr[0] = '\0';
    h->fortran = h->rank = -1;
    skip_ws(&s);
    if (*s != '{')
        return say(why, whylen, "header is not a dict"), -2;
    for (s++;; s++) {
        skip_ws(&s);
        if (*s == '}')
            break;
        if (parse_str(&s, key, sizeof key) != 0)
            return say(why, whylen, "malformed key in header"), -2;
        if (strcmp(key, "descr") && strcmp(key, "fortran_order") &&
            strcmp(key, "shape"))
            return say(why, whylen, "unexpected key '%s' in header", key), -2;
        skip_ws(&s);
        if (*s != ':')
            return say(why, whylen, "expected ':' after '%s'", key), -2;
        s++;
        skip_ws(&s);
        if (parse_value(&s, key, h) != 0)
            return say(why, whylen, "malformed value for '%s'", key), -2;
        skip_ws(&s);
        if (*s == '}')
            break;
        if (*s != ',')
            return say(why, whylen, "expected ',' or '}' after '%s'", key), -2;
    }
    if (h->descr[0] == '\0' || h->fortran < 0 || h->rank < 0)
        return say(why, whylen, "header lacks 'descr', 'fortran_order' "
                   "or 'shape'"), -2;
    return 0;
}

/* Reads magic, version and header length, then the dict text into buf. */
static int read_header_text(FILE *f, char *buf, size_t cap, char *why,
                            size_t whylen)
{
    unsigned char pre[12];
    size_t hlen, lenbytes;
    if (fread(pre, 1, 8, f) != 8 && ferror(f))    /* a folder: EISDIR */
        return say(why, whylen, "read error: %s", strerror(errno)), -1;
    if (feof(f) || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return say(why, whylen, "not a .npy file (no \\x93NUMPY magic)"), -2;
    if (pre[6] < 1 || pre[6] > 3) /* 3.0 only allows utf-8 in the dict */
        return say(why, whylen, "unsupported .npy version %d.%d", pre[6],
                   pre[7]), -2;
    lenbytes = pre[6] == 1 ? 2 : 4;
    if (fread(pre + 8, 1, lenbytes, f) != lenbytes)
        return say(why, whylen, "truncated header"), -2;
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    if (lenbytes == 4)
        hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if (hlen >= cap)
        return say(why, whylen, "header of %lu bytes is longer than %lu",
                   (unsigned long)hlen, (unsigned long)(cap - 1)), -2;
    if (fread(buf, 1, hlen, f) != hlen)
        return say(why, whylen, "truncated header"), -2;
    buf[hlen] = '\0';
    return 0;
}

/* dtype, order, then the shape against (rank, dims). */
static int check_header(const npy_header *h, int rank, const int *dims,
                        const npy_type *t, char *why, size_t whylen)
{
    long long want[RT_MAX_RANK];
    char got_s[NPY_MAX_DIMS * 24 + 8], want_s[RT_MAX_RANK * 24 + 8];
    int d, same = h->rank == rank;
    if (strcmp(h->descr, t->descr) != 0)
        return say(why, whylen, "dtype '%s' is not %s '%s'", h->descr, t->what,
                   t->descr), -2;
    if (h->fortran)
        return say(why, whylen, "fortran_order is True; only C order is "
                   "supported"), -2;
    for (d = 0; d < rank; d++) {
        want[d] = dims[d];
        if (same && h->dims[d] != want[d])
            same = 0;
    }
    if (same)
        return 0;
    shape_str(got_s, sizeof got_s, h->rank, h->dims);
    shape_str(want_s, sizeof want_s, rank, want);
    return say(why, whylen, "shape %s but expected %s", got_s, want_s), -3;
}

/* count little-endian elements into data; a short read is an I/O error if
 * the stream says so, otherwise a file that ends early. */
static int read_elems(FILE *f, void *data, size_t count, const npy_type *t,
                      char *why, size_t whylen)
{
    const size_t z = t->size;
    unsigned char buf[NPY_CHUNK * 8];
    size_t i, j, k, got;
    for (i = 0; i < count; i += k) {
        k = count - i < NPY_CHUNK ? count - i : NPY_CHUNK;
        got = fread(buf, 1, z * k, f);
        if (got != z * k) {
            if (ferror(f))
                return say(why, whylen, "read error: %s", strerror(errno)), -1;
            return say(why, whylen, "truncated data: %lu of %lu bytes",
                       (unsigned long)(z * i + got),
                       (unsigned long)(z * count)), -2;
        }
        for (j = 0; j < k; j++)
            get_elem(data, i + j, buf + z * j, t);
    }
    /* bytes past the data mean the header's shape is not the file's */
    got = fread(buf, 1, sizeof buf, f);
    if (got > 0) {
        unsigned long extra = (unsigned long)got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0)
            extra += (unsigned long)got;
        return say(why, whylen, "%lu bytes after the data; the file holds "
                   "more than its shape says", extra), -2;
    }
    return 0;
}

static int npy_read(const char *path, void *data, int rank, const int *dims,
                    const npy_type *t, char *why, size_t whylen)
{
    char text[NPY_MAX_HEADER];
    npy_header h;
    size_t count = 1;
    FILE *f;
    int d, rc;
    if (rank < 0 || rank > RT_MAX_RANK)
        return say(why, whylen, "expected rank %d is outside 0..%d", rank,
                   RT_MAX_RANK), -3;
    for (d = 0; d < rank; d++)
        count *= dims[d] > 0 ? (size_t)dims[d] : 0;
    f = fopen(path, "rb");
    if (f == NULL)
        return say(why, whylen, "cannot open %s: %s", path, strerror(errno)), -1;
    rc = read_header_text(f, text, sizeof text, why, whylen);
    if (rc == 0)
        rc = parse_dict(text, &h, why, whylen);
    if (rc == 0)
        rc = check_header(&h, rank, dims, t, why, whylen);
    if (rc == 0 && data != NULL)
        rc = read_elems(f, data, count, t, why, whylen);
    fclose(f);
    return rc;
}

int rt_npy_read(const char *path, float *data, int rank, const int *dims,
                char *why, size_t whylen)
{
    return npy_read(path, data, rank, dims, &npy_f32, why, whylen);
}

int rt_npy_read_i64(const char *path, int64_t *data, int rank,
                    const int *dims, char *why, size_t whylen)
{
    return npy_read(path, data, rank, dims, &npy_i64, why, whylen);
}

#endif /* RT_NO_STDIO */

/* ---- the gradient hook ------------------------------------------------------ */

/* Drops waiting range i, keeping the others in arrival order. */
static void hook_remove(rt_grad_hook *h, int i)
{
    int k;
    for (k = i; k + 1 < h->n; k++) {
        h->lo[k] = h->lo[k + 1];
        h->hi[k] = h->hi[k + 1];
    }
    h->n--;
}

/* Hands waiting range i to the hook. */
static void hook_send(rt_grad_hook *h, float *grads, int i)
{
    size_t lo = h->lo[i], hi = h->hi[i];
    hook_remove(h, i);
    h->bucket(h->ctx, grads, lo, hi - lo);
}

/* The waiting range that [lo, hi) touches, or -1. */
static int hook_touching(const rt_grad_hook *h, size_t lo, size_t hi, int skip)
{
    int i;
    for (i = 0; i < h->n; i++)
        if (i != skip && (h->hi[i] == lo || h->lo[i] == hi))
            return i;
    return -1;
}

void rt_grad_flush(rt_grad_hook *h, float *grads)
{
    while (h && h->n > 0)
        hook_send(h, grads, 0);
}

/* The backward finishes parameters roughly in the reverse of their buffer
 * order, a weight before its bias after it: ranges meet from both sides, so
 * a few wait to be merged rather than going out one parameter at a time. */
void rt_grad_ready(rt_grad_hook *h, float *grads, size_t offset, size_t count)
{
    int i, j;
    if (!h)
        return;
    if (h->progress)
        h->progress(h->ctx);
    i = hook_touching(h, offset, offset + count, -1);
    if (i < 0) {
        if (h->n == RT_HOOK_RANGES)
            hook_send(h, grads, 0);
        i = h->n++;
        h->lo[i] = offset;
        h->hi[i] = offset + count;
    } else if (h->hi[i] == offset) {
        h->hi[i] = offset + count;
    } else {
        h->lo[i] = offset;
    }
    j = hook_touching(h, h->lo[i], h->hi[i], i);
    if (j >= 0) {   /* the new range bridged two */
        if (h->lo[j] < h->lo[i])
            h->lo[i] = h->lo[j];
        else
            h->hi[i] = h->hi[j];
        hook_remove(h, j);
        if (j < i)
            i--;
    }
    if (h->hi[i] - h->lo[i] >= h->bucket_floats)
        hook_send(h, grads, i);
}
