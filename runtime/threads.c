/*
 * threads.c: rt_set_threads, rt_threads, and the worker pool behind
 * rt_parallel_for and rt_parallel_parts (rt_impl.h), with which the other
 * families split a kernel's independent outputs over the threads. With
 * RT_NO_THREADS (implied on targets that are not Unix) both run the whole
 * job on the calling thread.
 */
#include "rt_impl.h"

#ifndef RT_NO_THREADS
#include <pthread.h>
#include <sched.h>
#endif

/* ---- threads --------------------------------------------------------------- */

/* The runtime's kernels split their work over rt_set_threads' threads and
 * give the same bits for every count (remat_rt.h). What this does not
 * cover is cblas_sgemm: OpenBLAS splits a GEMM over threads of its own and
 * promises no bits across thread counts; on gpt its gradients do differ
 * between OPENBLAS_NUM_THREADS=1 and 2 (tests/e2e/test_threads.sh). The
 * trainer's --threads sets both counts; for bits that do not depend on it,
 * build with RT_NO_BLAS (the portable GEMM runs on the calling thread). */

#ifdef RT_NO_THREADS

void rt_set_threads(int n)
{
    (void)n;
}

int rt_threads(void)
{
    return 1;
}

RT_PRIVATE void rt_parallel_for(size_t n, size_t align, size_t work,
                                size_t min_work, rt_chunk_fn fn, void *ctx)
{
    (void)align;
    (void)work;
    (void)min_work;
    fn(ctx, 0, n);
}

RT_PRIVATE void rt_parallel_parts(size_t n, size_t align,
                                  size_t per_thread, rt_chunk_fn fn, void *ctx)
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
RT_PRIVATE void rt_parallel_parts(size_t n, size_t align,
                                  size_t per_thread, rt_chunk_fn fn, void *ctx)
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
RT_PRIVATE void rt_parallel_for(size_t n, size_t align, size_t work,
                                size_t min_work, rt_chunk_fn fn, void *ctx)
{
    if (work < min_work)
        fn(ctx, 0, n);
    else
        rt_parallel_parts(n, align, RT_CHUNKS_PER_THREAD, fn, ctx);
}

#endif /* RT_NO_THREADS */
