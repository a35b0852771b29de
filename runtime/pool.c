/*
 * pool.c: MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool, in 1,
 * 2 or 3 spatial dimensions (one geometry: rt_window's, a 2-D window one
 * depth slice, a 1-D one a row high). Each window is walked
 * directly, visiting only its taps inside the input (inside(), rt_impl.h),
 * with row kernels for the common 2x2 and 3x3 windows of stride 2 (the
 * fast paths) that give the generic walk's bits. MaxPool and
 * GlobalMaxPool have _index twins that keep which element won each window
 * (or plane) for the backward instead of the input (compact residuals).
 */
#include "rt_impl.h"

/* A window's taps inside the input: depth slices [z0, z1) of the kernel,
 * rows [k0, k1), columns [l0, l1); at is the input offset (in its volume
 * of d * h * w) of tap (z0, k0, l0) when there is one. A 2-D window has
 * the one slice z0 = 0, z1 = 1. */
typedef struct {
    int z0, z1, k0, k1, l0, l1;
    size_t at;
} win_taps;

/* A 2-D window (one depth slice, no depth pads): its one slice is inside,
 * found without inside()'s divisions. */
static int flat_window(const rt_window *p)
{
    return p->d == 1 && p->kd == 1 && p->pad_front == 0 && p->pad_back == 0;
}

/* Window (oz, oy, ox)'s taps inside the input; returns their number. When
 * it is 0, t->at is not set and the caller forms no pointer from it. */
static int window_taps(const rt_window *p, int oz, int oy, int ox, win_taps *t)
{
    const int z0 = oz * p->sd - p->pad_front;
    const int y0 = oy * p->sh - p->pad_top, x0 = ox * p->sw - p->pad_left;
    if (flat_window(p))
        t->z0 = 0, t->z1 = 1;
    else
        inside(z0, p->dd, p->d, p->kd, &t->z0, &t->z1);
    inside(y0, p->dh, p->h, p->kh, &t->k0, &t->k1);
    inside(x0, p->dw, p->w, p->kw, &t->l0, &t->l1);
    if (t->z0 == t->z1 || t->k0 == t->k1 || t->l0 == t->l1)
        return 0;
    t->at = ((size_t)(z0 + t->z0 * p->dd) * p->h + (size_t)(y0 + t->k0 * p->dh)) *
                p->w + (size_t)(x0 + t->l0 * p->dw);
    return (t->z1 - t->z0) * (t->k1 - t->k0) * (t->l1 - t->l0);
}

/* The offset of tap (kz, ki, kj) of t's window from its first tap inside. */
static size_t tap_offset(const rt_window *p, const win_taps *t, int kz,
                         int ki, int kj)
{
    return ((size_t)(kz - t->z0) * p->dd * p->h + (size_t)(ki - t->k0) * p->dh) *
               p->w + (size_t)(kj - t->l0) * p->dw;
}

/* The plane offset of window (oz, oy, ox)'s maximum, -1 if no tap is
 * inside: the first in row-major window order on ties, the first NaN if
 * any. The forward and the backward both use it, so they agree on the
 * element. */
static ptrdiff_t window_argmax(const float *xq, const rt_window *p, int oz,
                               int oy, int ox)
{
    ptrdiff_t best = -1;
    float bv = 0.0f;
    win_taps t;
    int kz, ki, kj;
    if (window_taps(p, oz, oy, ox, &t) == 0)
        return -1;
    for (kz = t.z0; kz < t.z1; kz++)
        for (ki = t.k0; ki < t.k1; ki++)
            for (kj = t.l0; kj < t.l1; kj++) {
                const ptrdiff_t e = (ptrdiff_t)(t.at + tap_offset(p, &t, kz, ki, kj));
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
static ptrdiff_t argmax_inside(const float *xq, const rt_window *p, int oz,
                               int oy, int ox)
{
    const ptrdiff_t base =
        ((ptrdiff_t)(oz * p->sd - p->pad_front) * p->h +
         (oy * p->sh - p->pad_top)) * p->w + (ox * p->sw - p->pad_left);
    ptrdiff_t best = base;
    float bv = xq[base];
    int kz, ki, kj;
    for (kz = 0; kz < p->kd; kz++)
        for (ki = 0; ki < p->kh; ki++)
            for (kj = 0; kj < p->kw; kj++) {
                const ptrdiff_t e = base +
                    ((ptrdiff_t)kz * p->dd * p->h + (ptrdiff_t)ki * p->dh) * p->w +
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

/* The interior box [z0, z1) x [y0, y1) x [x0, x1) of outputs, and the fast
 * kernel's k (0: none applies). A fast kernel walks one depth slice: it
 * applies to a 3-D window of depth 1 too (kd == 1), slice by slice. */
typedef struct {
    int z0, z1, y0, y1, x0, x1, k;
} pool_plan;

static pool_plan pool_plan_of(const rt_window *p)
{
    pool_plan b;
    interior(p->pad_front, p->sd, p->dd, p->kd, p->d, p->od, &b.z0, &b.z1);
    interior(p->pad_top, p->sh, p->dh, p->kh, p->h, p->oh, &b.y0, &b.y1);
    interior(p->pad_left, p->sw, p->dw, p->kw, p->w, p->ow, &b.x0, &b.x1);
    b.k = p->kd == 1 && p->sh == 2 && p->sw == 2 && p->dh == 1 && p->dw == 1 &&
                  p->kh == p->kw && (p->kh == 2 || p->kh == 3)
              ? p->kh
              : 0;
    return b;
}

/* The outputs [*f0, *f1) of row (oz, oy) that a fast kernel computes; both
 * are ow when none does, so that a caller's "before" span is the whole
 * row. */
static void fast_span(const pool_plan *b, const rt_window *p, int oz, int oy,
                      int *f0, int *f1)
{
    const int on = b->k != 0 && oz >= b->z0 && oz < b->z1 && oy >= b->y0 &&
                   oy < b->y1 && b->x0 < b->x1;
    *f0 = on ? b->x0 : p->ow;
    *f1 = on ? b->x1 : p->ow;
}

/* The input offset (in its volume) of window (oz, oy, ox)'s tap (0, 0, 0).
 * Only for interior windows, whose tap (0, 0, 0) is inside. */
static size_t window_start(const rt_window *p, int oz, int oy, int ox)
{
    return ((size_t)(oz * p->sd - p->pad_front) * p->h +
            (size_t)(oy * p->sh - p->pad_top)) * p->w +
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

/* Window (oz, oy, ox)'s maximum by the generic walk (-1 if no tap is
 * inside). */
static ptrdiff_t pool_argmax(const float *xq, const rt_window *p,
                             const pool_plan *b, int oz, int oy, int ox)
{
    return oz >= b->z0 && oz < b->z1 && oy >= b->y0 && oy < b->y1 &&
                   ox >= b->x0 && ox < b->x1
               ? argmax_inside(xq, p, oz, oy, ox)
               : window_argmax(xq, p, oz, oy, ox);
}

static void maxpool_span(float *yr, const float *xq, const rt_window *p,
                         const pool_plan *b, int oz, int oy, int from, int to)
{
    int ox;
    for (ox = from; ox < to; ox++) {
        const ptrdiff_t e = pool_argmax(xq, p, b, oz, oy, ox);
        yr[ox] = e < 0 ? -INFINITY : xq[e];
    }
}

static void maxpool_back_span(float *dxq, const float *dyr, const float *xq,
                              const rt_window *p, const pool_plan *b, int oz,
                              int oy, int from, int to)
{
    int ox;
    for (ox = from; ox < to; ox++) {
        const ptrdiff_t e = pool_argmax(xq, p, b, oz, oy, ox);
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
    const size_t hw = (size_t)p->d * p->h * p->w;
    const size_t ohw = (size_t)p->od * p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    size_t q;
    int oz, oy, f0, f1;
    for (q = lo; q < hi; q++) {
        const float *xq = j->x + q * hw;
        for (oz = 0; oz < p->od; oz++)
            for (oy = 0; oy < p->oh; oy++) {
                float *yr = j->out + q * ohw +
                            ((size_t)oz * p->oh + (size_t)oy) * p->ow;
                fast_span(&b, p, oz, oy, &f0, &f1);
                maxpool_span(yr, xq, p, &b, oz, oy, 0, f0);
                if (f0 < f1) {
                    const float *r = xq + window_start(p, oz, oy, f0);
                    if (b.k == 2)
                        maxpool_row2(yr + f0, r, p->w, f1 - f0);
                    else
                        maxpool_row3(yr + f0, r, p->w, f1 - f0);
                }
                maxpool_span(yr, xq, p, &b, oz, oy, f1, p->ow);
            }
    }
}

static void maxpool_back_planes(void *ctx, size_t lo, size_t hi)
{
    const pool_job *j = ctx;
    const rt_window *p = j->p;
    const size_t hw = (size_t)p->d * p->h * p->w;
    const size_t ohw = (size_t)p->od * p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    size_t q;
    int oz, oy, f0, f1;
    /* written: the chunk's planes zeroed here, while they are in cache (a
     * memset inside the plane loop below made gcc compile it 5x slower) */
    if (j->set)
        memset(j->out + lo * hw, 0, (hi - lo) * hw * sizeof *j->out);
    for (q = lo; q < hi; q++) {
        const float *xq = j->x + q * hw;
        float *dxq = j->out + q * hw;
        for (oz = 0; oz < p->od; oz++)
            for (oy = 0; oy < p->oh; oy++) {
                const float *dyr = j->dy + q * ohw +
                                   ((size_t)oz * p->oh + (size_t)oy) * p->ow;
                fast_span(&b, p, oz, oy, &f0, &f1);
                maxpool_back_span(dxq, dyr, xq, p, &b, oz, oy, 0, f0);
                if (f0 < f1) {
                    const size_t at = window_start(p, oz, oy, f0);
                    if (b.k == 2)
                        maxpool_back_row2(dxq + at, xq + at, dyr + f0, p->w,
                                          f1 - f0);
                    else
                        maxpool_back_row3(dxq + at, xq + at, dyr + f0, p->w,
                                          f1 - f0);
                }
                maxpool_back_span(dxq, dyr, xq, p, &b, oz, oy, f1, p->ow);
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
        rt_parallel_for(planes, 1,
                        planes * (size_t)p->d * (size_t)p->h * (size_t)p->w,
                        RT_PAR_CHEAP, fn, &j);
}

void rt_maxpool_forward(float *y, const float *x, const rt_window *p)
{
    const rt_window q = window3(p);
    pool_run_set(maxpool_fwd_planes, y, x, NULL, &q, 0);
}

void rt_maxpool_backward(float *dx, const float *dy, const float *x,
                         const rt_window *p)
{
    rt_maxpool_backward_set(dx, dy, x, p, 0);
}

void rt_maxpool_backward_set(float *dx, const float *dy, const float *x,
                             const rt_window *p, unsigned set)
{
    const rt_window q = window3(p);
    if (dx != NULL)
        pool_run_set(maxpool_back_planes, dx, x, dy, &q, (int)(set & 1u));
}

/* ---- MaxPool keeping each window's winner --------------------------------- */

/* Window (oz, oy, ox)'s winning tap as (kz * kh + ki) * kw + kj, -1 if no
 * tap is inside: window_argmax's walk, order and rule, so the same element
 * (that of the fast paths too). */
static long window_argtap(const float *xq, const rt_window *p, int oz, int oy,
                          int ox)
{
    long best = -1;
    float bv = 0.0f;
    win_taps t;
    int kz, ki, kj;
    if (window_taps(p, oz, oy, ox, &t) == 0)
        return -1;
    for (kz = t.z0; kz < t.z1; kz++)
        for (ki = t.k0; ki < t.k1; ki++)
            for (kj = t.l0; kj < t.l1; kj++) {
                const float v = xq[t.at + tap_offset(p, &t, kz, ki, kj)];
                if (best < 0 || v > bv || (isnan(v) && !isnan(bv))) {
                    best = ((long)kz * p->kh + ki) * p->kw + kj;
                    bv = v;
                }
            }
    return best;
}

/* The plane offset of window (oz, oy, ox)'s tap k, -1 when that tap is
 * outside the input (a window with no tap inside stores tap 0, outside). */
static ptrdiff_t tap_at(const rt_window *p, int oz, int oy, int ox, long k)
{
    const long kz = k / ((long)p->kh * p->kw), ki = k / p->kw % p->kh,
               kj = k % p->kw;
    const long z = (long)oz * p->sd - p->pad_front + kz * p->dd;
    const long y = (long)oy * p->sh - p->pad_top + ki * p->dh;
    const long x = (long)ox * p->sw - p->pad_left + kj * p->dw;
    if (z < 0 || z >= p->d || y < 0 || y >= p->h || x < 0 || x >= p->w)
        return -1;
    return ((ptrdiff_t)z * p->h + y) * p->w + x;
}

int rt_maxpool_index_width(const rt_window *p)
{
    const rt_window q = window3(p);
    const long taps = (long)q.kd * q.kh * q.kw;
    return taps <= 256 ? 1 : taps <= 65536 ? 2 : 4;
}

/* Index j of a width-byte little-endian array (bytes, so any alignment) */
static void index_put(unsigned char *idx, size_t j, int width, long k)
{
    int b;
    for (b = 0; b < width; b++)
        idx[j * (size_t)width + (size_t)b] =
            (unsigned char)((unsigned long)k >> (8 * b) & 0xffu);
}

static long index_get(const unsigned char *idx, size_t j, int width)
{
    unsigned long k = 0;
    int b;
    for (b = 0; b < width; b++)
        k |= (unsigned long)idx[j * (size_t)width + (size_t)b] << (8 * b);
    return (long)k;
}

typedef struct {
    float *out;             /* y, or dx */
    const float *x, *dy;
    unsigned char *idx;
    const rt_window *p;
    int width, set;
} index_job;

/* The k x k window at r: its maximum (*y) and winning tap (ki * k + kj)
 * by window_argmax's rule, as max_kk's nested selects on the tap number
 * too, which gcc vectorizes along a row for k = 2 (max_takes's branches
 * mispredicted on every other window of a ReLU's output: 16 ns a window). */
static inline float argtap_kk(const float *r, ptrdiff_t w, int k, float *y)
{
    float m = r[0], t = 0.0f;   /* the tap a float: selects on floats
                                 * alone, which gcc vectorizes */
    int ki, kj;
    for (ki = 0; ki < k; ki++)
        for (kj = 0; kj < k; kj++) {
            const float v = r[ki * w + kj];
            t = m != m ? t : v <= m ? t : (float)(ki * k + kj);
            m = m != m ? m : v <= m ? m : v;
        }
    *y = m;
    return t;
}

/* n (8 or 4, a constant wherever this is inlined) outputs of one interior
 * row, the first window's tap (0, 0) at r. A constant count is one vector
 * (256 or 128 bits) with no scalar tail: gcc's scalar argtap_kk branches
 * on the data, mispredicting about every other window of a ReLU's output
 * (cnn's rows are 14 and 7 windows long). The taps go through a float
 * buffer: a byte store in the same loop (a char may alias anything) kept
 * gcc from vectorizing it. */
static inline void index_chunk(float *restrict y, unsigned char *restrict idx,
                               const float *restrict r, ptrdiff_t w, int k,
                               int n)
{
    float taps[8];
    int j;
    for (j = 0; j < n; j++)
        taps[j] = argtap_kk(r + 2 * j, w, k, &y[j]);
    for (j = 0; j < n; j++)
        idx[j] = (unsigned char)taps[j];
}

/* n outputs of one interior row (pool_plan's fast kernels' windows, at
 * most 9 taps: one index byte each), eight (or four) at a time; a row
 * whose length is not a multiple ends with the last eight (four),
 * overlapping the ones before: the same windows computed again, the same
 * values. */
static inline void index_row(float *y, unsigned char *idx, const float *r,
                             ptrdiff_t w, int n, int k)
{
    int j;
    if (n < 4) {
        for (j = 0; j < n; j++)
            idx[j] = (unsigned char)argtap_kk(r + 2 * j, w, k, &y[j]);
    } else if (n < 8) {
        index_chunk(y, idx, r, w, k, 4);
        index_chunk(y + n - 4, idx + n - 4, r + 2 * (n - 4), w, k, 4);
    } else {
        for (j = 0; j + 8 <= n; j += 8)
            index_chunk(y + j, idx + j, r + 2 * j, w, k, 8);
        if (j < n)
            index_chunk(y + n - 8, idx + n - 8, r + 2 * (n - 8), w, k, 8);
    }
}

/* One instance per k, so that each is unrolled. */
static void index_row2(float *y, unsigned char *idx, const float *r,
                       ptrdiff_t w, int n)
{
    index_row(y, idx, r, w, n, 2);
}

static void index_row3(float *y, unsigned char *idx, const float *r,
                       ptrdiff_t w, int n)
{
    index_row(y, idx, r, w, n, 3);
}

/* Outputs [from, to) of row (oz, oy), o the row's first, by the generic
 * walk */
static void index_fwd_span(const index_job *j, const float *xq, size_t o,
                           int oz, int oy, int from, int to)
{
    int ox;
    for (ox = from; ox < to; ox++) {
        const long k = window_argtap(xq, j->p, oz, oy, ox);
        j->out[o + (size_t)ox] =
            k < 0 ? -INFINITY : xq[tap_at(j->p, oz, oy, ox, k)];
        index_put(j->idx, o + (size_t)ox, j->width, k < 0 ? 0 : k);
    }
}

static void index_fwd_planes(void *ctx, size_t lo, size_t hi)
{
    const index_job *j = ctx;
    const rt_window *p = j->p;
    const size_t hw = (size_t)p->d * p->h * p->w;
    const size_t ohw = (size_t)p->od * p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    size_t q;
    int oz, oy, f0, f1;
    for (q = lo; q < hi; q++) {
        const float *xq = j->x + q * hw;
        for (oz = 0; oz < p->od; oz++)
            for (oy = 0; oy < p->oh; oy++) {
                const size_t o = q * ohw +
                                 ((size_t)oz * p->oh + (size_t)oy) * p->ow;
                fast_span(&b, p, oz, oy, &f0, &f1);
                index_fwd_span(j, xq, o, oz, oy, 0, f0);
                if (f0 < f1) {
                    const float *r = xq + window_start(p, oz, oy, f0);
                    if (b.k == 2)
                        index_row2(j->out + o + f0, j->idx + o + f0, r, p->w,
                                   f1 - f0);
                    else
                        index_row3(j->out + o + f0, j->idx + o + f0, r, p->w,
                                   f1 - f0);
                }
                index_fwd_span(j, xq, o, oz, oy, f1, p->ow);
            }
    }
}

/* dy added at the winners of outputs [from, to) of row (oz, oy) */
static void index_back_span(const index_job *j, float *dxq, size_t o, int oz,
                            int oy, int from, int to)
{
    int ox;
    for (ox = from; ox < to; ox++) {
        const ptrdiff_t e = tap_at(j->p, oz, oy, ox,
                                   index_get(j->idx, o + (size_t)ox, j->width));
        if (e >= 0)
            dxq[e] += j->dy[o + (size_t)ox];
    }
}

/* An interior row's: window j's tap t at 2 j + (t / k) w + t % k. With k
 * a constant the division is a shift or a multiply, where a variable k
 * made it a division per window (most of this loop's time on cnn). */
static void index_back_row(float *dx, const unsigned char *idx,
                           const float *dy, ptrdiff_t w, int k, int n)
{
    int j;
    if (k == 2)
        for (j = 0; j < n; j++)
            dx[2 * j + idx[j] / 2 * w + idx[j] % 2] += dy[j];
    else
        for (j = 0; j < n; j++)
            dx[2 * j + idx[j] / 3 * w + idx[j] % 3] += dy[j];
}

/* dy added at each window's winner in the order of maxpool_back_planes
 * (outputs row by row), so overlapping windows sum in the same order */
static void index_back_planes(void *ctx, size_t lo, size_t hi)
{
    const index_job *j = ctx;
    const rt_window *p = j->p;
    const size_t hw = (size_t)p->d * p->h * p->w;
    const size_t ohw = (size_t)p->od * p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    size_t q;
    int oz, oy, f0, f1;
    if (j->set)
        memset(j->out + lo * hw, 0, (hi - lo) * hw * sizeof *j->out);
    for (q = lo; q < hi; q++) {
        float *dxq = j->out + q * hw;
        for (oz = 0; oz < p->od; oz++)
            for (oy = 0; oy < p->oh; oy++) {
                const size_t o = q * ohw +
                                 ((size_t)oz * p->oh + (size_t)oy) * p->ow;
                fast_span(&b, p, oz, oy, &f0, &f1);
                index_back_span(j, dxq, o, oz, oy, 0, f0);
                if (f0 < f1)
                    index_back_row(dxq + window_start(p, oz, oy, f0),
                                   j->idx + o + f0, j->dy + o + f0, p->w, b.k,
                                   f1 - f0);
                index_back_span(j, dxq, o, oz, oy, f1, p->ow);
            }
    }
}

static void index_run(rt_chunk_fn fn, float *out, const float *x,
                      const float *dy, unsigned char *idx, const rt_window *p,
                      int set)
{
    index_job j;
    const size_t planes = (size_t)p->n * (size_t)p->c;
    j.out = out;
    j.x = x;
    j.dy = dy;
    j.idx = idx;
    j.p = p;
    j.width = rt_maxpool_index_width(p);
    j.set = set;
    if (planes > 0)
        rt_parallel_for(planes, 1,
                        planes * (size_t)p->d * (size_t)p->h * (size_t)p->w,
                        RT_PAR_CHEAP, fn, &j);
}

void rt_maxpool_forward_index(float *y, unsigned char *idx, const float *x,
                              const rt_window *p)
{
    const rt_window q = window3(p);
    index_run(index_fwd_planes, y, x, NULL, idx, &q, 0);
}

void rt_maxpool_backward_index(float *dx, const float *dy,
                               const unsigned char *idx, const rt_window *p)
{
    rt_maxpool_backward_index_set(dx, dy, idx, p, 0);
}

void rt_maxpool_backward_index_set(float *dx, const float *dy,
                                   const unsigned char *idx,
                                   const rt_window *p, unsigned set)
{
    const rt_window q = window3(p);
    if (dx != NULL)
        index_run(index_back_planes, dx, NULL, dy, (unsigned char *)idx, &q,
                  (int)(set & 1u));
}

/* count_include_pad's divisor for window (oz, oy, ox): its taps inside
 * the padded input, slices [-pad_front, d + pad_back), rows [-pad_top, h +
 * pad_bottom) and columns [-pad_left, w + pad_right). That is kd * kh * kw
 * for every window of a floor-mode geometry; a ceil_mode window that runs
 * past the padding counts only its taps within it (ONNX, and PyTorch's
 * avg_pool2d). */
static int padded_taps(const rt_window *p, int oz, int oy, int ox)
{
    int z0 = 0, z1 = 1, k0, k1, l0, l1;
    if (!flat_window(p))
        inside(oz * p->sd, p->dd, p->d + p->pad_front + p->pad_back, p->kd,
               &z0, &z1);
    inside(oy * p->sh, p->dh, p->h + p->pad_top + p->pad_bottom, p->kh, &k0,
           &k1);
    inside(ox * p->sw, p->dw, p->w + p->pad_left + p->pad_right, p->kw, &l0,
           &l1);
    return (z1 - z0) * (k1 - k0) * (l1 - l0);
}

/* An AveragePool window's sum: a plain float loop for a kernel of at most
 * AVG_FLOAT_TAPS taps (kd * kh * kw), whose error that bounds (and which
 * keeps the fast rows' speed and the 2-D results' bits of old), an rt_sum
 * for a larger one, so that the error does not grow with the window (all
 * float: no soft double on a Cortex-M4). */
#define AVG_FLOAT_TAPS 16

static int avg_wide(const rt_window *p)
{
    return (long)p->kd * p->kh * p->kw > AVG_FLOAT_TAPS;
}

/* The fast AveragePool rows (k * k <= AVG_FLOAT_TAPS: float) sum as the
 * generic walk does, from 0.0f in row-major window order, and divide (not
 * multiply by a reciprocal) by k * k, which is the divisor of an interior
 * window with or without count_include_pad. */
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

/* Window t's sum over its taps inside the input, in float (a kernel of at
 * most AVG_FLOAT_TAPS taps) or through rt_sum. */
static float window_sum(const float *xq, const rt_window *p, const win_taps *t)
{
    float s = 0.0f;
    int kz, ki, kj;
    for (kz = t->z0; kz < t->z1; kz++)
        for (ki = t->k0; ki < t->k1; ki++) {
            const float *r = xq + t->at + tap_offset(p, t, kz, ki, t->l0);
            for (kj = t->l0; kj < t->l1; kj++)
                s += r[(size_t)(kj - t->l0) * p->dw];
        }
    return s;
}

static float window_sum_wide(const float *xq, const rt_window *p,
                             const win_taps *t)
{
    rt_sum s;
    int kz, ki, kj;
    rt_sum_init(&s);
    for (kz = t->z0; kz < t->z1; kz++)
        for (ki = t->k0; ki < t->k1; ki++) {
            const float *r = xq + t->at + tap_offset(p, t, kz, ki, t->l0);
            for (kj = t->l0; kj < t->l1; kj++)
                rt_sum_add(&s, r[(size_t)(kj - t->l0) * p->dw]);
        }
    return rt_sum_value(&s);
}

/* The generic walk over outputs [from, to) of row (oz, oy): each window's
 * taps inside the input and its divisor, found per window. */
static void avgpool_span(float *yr, const float *xq, const rt_window *p,
                         int cip, int oz, int oy, int from, int to)
{
    const int wide = avg_wide(p);
    int ox;
    for (ox = from; ox < to; ox++) {
        win_taps t;
        const int taps = window_taps(p, oz, oy, ox, &t);
        /* what the sum is divided by: the taps inside the input, or with
         * count_include_pad those inside the padded input */
        const int d = cip ? padded_taps(p, oz, oy, ox) : taps;
        if (d <= 0)
            yr[ox] = 0.0f;
        else if (taps == 0)
            yr[ox] = 0.0f;
        else if (wide)
            yr[ox] = window_sum_wide(xq, p, &t) / (float)d;
        else
            yr[ox] = window_sum(xq, p, &t) / (float)d;
    }
}

static void avgpool_back_span(float *dxq, const float *dyr, const rt_window *p,
                              int cip, int oz, int oy, int from, int to)
{
    int ox, kz, ki, kj;
    for (ox = from; ox < to; ox++) {
        win_taps t;
        const int taps = window_taps(p, oz, oy, ox, &t);
        const int d = cip ? padded_taps(p, oz, oy, ox) : taps;
        float g;
        if (taps == 0)
            continue;
        g = dyr[ox] / (float)d;
        for (kz = t.z0; kz < t.z1; kz++)
            for (ki = t.k0; ki < t.k1; ki++) {
                float *r = dxq + t.at + tap_offset(p, &t, kz, ki, t.l0);
                for (kj = t.l0; kj < t.l1; kj++)
                    r[(size_t)(kj - t.l0) * p->dw] += g;
            }
    }
}

void rt_avgpool_forward(float *y, const float *x, const rt_window *win,
                        int count_include_pad)
{
    const rt_window q3 = window3(win), *p = &q3;
    const size_t hw = (size_t)p->d * p->h * p->w;
    const size_t ohw = (size_t)p->od * p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    int q, oz, oy, f0, f1;
    for (q = 0; q < p->n * p->c; q++) {
        const float *xq = x + (size_t)q * hw;
        for (oz = 0; oz < p->od; oz++)
            for (oy = 0; oy < p->oh; oy++) {
                float *yr = y + (size_t)q * ohw +
                            ((size_t)oz * p->oh + (size_t)oy) * p->ow;
                fast_span(&b, p, oz, oy, &f0, &f1);
                avgpool_span(yr, xq, p, count_include_pad, oz, oy, 0, f0);
                if (f0 < f1) {
                    const float *r = xq + window_start(p, oz, oy, f0);
                    if (b.k == 2)
                        avgpool_row2(yr + f0, r, p->w, f1 - f0);
                    else
                        avgpool_row3(yr + f0, r, p->w, f1 - f0);
                }
                avgpool_span(yr, xq, p, count_include_pad, oz, oy, f1, p->ow);
            }
    }
}

void rt_avgpool_backward(float *dx, const float *dy, const rt_window *win,
                         int count_include_pad)
{
    const rt_window q3 = window3(win), *p = &q3;
    const size_t hw = (size_t)p->d * p->h * p->w;
    const size_t ohw = (size_t)p->od * p->oh * p->ow;
    const pool_plan b = pool_plan_of(p);
    int q, oz, oy, f0, f1;
    if (dx == NULL)
        return;
    for (q = 0; q < p->n * p->c; q++) {
        float *dxq = dx + (size_t)q * hw;
        for (oz = 0; oz < p->od; oz++)
            for (oy = 0; oy < p->oh; oy++) {
                const float *dyr = dy + (size_t)q * ohw +
                                   ((size_t)oz * p->oh + (size_t)oy) * p->ow;
                fast_span(&b, p, oz, oy, &f0, &f1);
                avgpool_back_span(dxq, dyr, p, count_include_pad, oz, oy, 0, f0);
                if (f0 < f1) {
                    float *r = dxq + window_start(p, oz, oy, f0);
                    if (b.k == 2)
                        avgpool_back_row2(r, dyr + f0, p->w, f1 - f0);
                    else
                        avgpool_back_row3(r, dyr + f0, p->w, f1 - f0);
                }
                avgpool_back_span(dxq, dyr, p, count_include_pad, oz, oy, f1,
                                  p->ow);
            }
    }
}

/* The planes' sums through rt_sum: the error of a mean over a large plane
 * (a global pool over 32x32) then does not grow with its size, in float.
 * In order, one sum per plane, so the bits do not depend on the thread
 * count. */
void rt_global_avgpool_forward(float *y, const float *x, int nc, int hw)
{
    int q;
    for (q = 0; q < nc; q++)
        y[q] = rt_sum_strided(x + (size_t)q * hw, (size_t)hw, 1) / (float)hw;
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

/* Plane q's maximum's offset, by window_argmax's rule (first on ties, the
 * first NaN if any); hw > 0. */
static int plane_argmax(const float *xq, int hw)
{
    int best = 0, j;
    for (j = 1; j < hw; j++)
        if (max_takes(xq[j], xq[best]))
            best = j;
    return best;
}

void rt_global_maxpool_forward(float *y, const float *x, int nc, int hw)
{
    int q;
    for (q = 0; q < nc; q++) {
        const float *xq = x + (size_t)q * hw;
        y[q] = hw > 0 ? xq[plane_argmax(xq, hw)] : -INFINITY;
    }
}

void rt_global_maxpool_backward(float *dx, const float *dy, const float *x,
                                int nc, int hw)
{
    int q;
    if (dx == NULL || hw <= 0)
        return;
    for (q = 0; q < nc; q++)
        dx[(size_t)q * hw + (size_t)plane_argmax(x + (size_t)q * hw, hw)] += dy[q];
}

/* GlobalMaxPool keeping each plane's winner, as MaxPool's indices */
int rt_global_maxpool_index_width(int hw)
{
    return hw <= 256 ? 1 : hw <= 65536 ? 2 : 4;
}

void rt_global_maxpool_forward_index(float *y, unsigned char *idx,
                                     const float *x, int nc, int hw)
{
    const int width = rt_global_maxpool_index_width(hw);
    int q;
    for (q = 0; q < nc; q++) {
        const float *xq = x + (size_t)q * hw;
        const int k = hw > 0 ? plane_argmax(xq, hw) : 0;
        y[q] = hw > 0 ? xq[k] : -INFINITY;
        index_put(idx, (size_t)q, width, k);
    }
}

void rt_global_maxpool_backward_index(float *dx, const float *dy,
                                      const unsigned char *idx, int nc, int hw)
{
    const int width = rt_global_maxpool_index_width(hw);
    int q;
    if (dx == NULL || hw <= 0)
        return;
    for (q = 0; q < nc; q++)
        dx[(size_t)q * hw + (size_t)index_get(idx, (size_t)q, width)] += dy[q];
}
