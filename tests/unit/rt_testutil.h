/*
 * rt_testutil.h: helpers for the runtime's Check tests (test_kernels*.c).
 *
 * Gradients are checked against central finite differences of the forward
 * kernels, with loss L = sum(dy * y) for a random upstream gradient dy, the
 * loss summed in double. Tests start every gradient buffer from random
 * values and check (after - before), so accumulation is tested everywhere.
 * Counts are size_t, as in remat_rt.h's element counts.
 */
#ifndef RT_TESTUTIL_H
#define RT_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"

/* The tests' own generator (xorshift64*), independent of rt_rand_*. */
static uint64_t trng = 1;

/* A broadcast map of `rank` dimensions: y's dims and a's and b's strides
 * (0 where that operand is broadcast). */
static inline rt_bcast make_bcast(int rank, const int *dims, const int *sa,
                                  const int *sb)
{
    rt_bcast m;
    int d;
    memset(&m, 0, sizeof m);
    m.rank = rank;
    for (d = 0; d < rank; d++) {
        m.dims[d] = dims[d];
        m.sa[d] = sa[d];
        m.sb[d] = sb[d];
    }
    return m;
}

/* A pooling window k x k, stride 2, padding k - 2 on every side, over n
 * images of c planes h x w: 2x2 (every input in one window) or 3x3
 * (overlapping windows), the cases the fast pool kernels cover. */
static inline rt_window pool_window(int n, int c, int h, int w, int k)
{
    rt_window p;
    memset(&p, 0, sizeof p);
    p.n = n, p.c = c, p.h = h, p.w = w, p.oc = c;
    p.kh = p.kw = k, p.sh = p.sw = 2, p.dh = p.dw = 1, p.group = 1;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = k - 2;
    p.oh = (p.h + 2 * (k - 2) - k) / 2 + 1;
    p.ow = (p.w + 2 * (k - 2) - k) / 2 + 1;
    return p;
}

static inline void tseed(uint64_t s)
{
    trng = s * 2654435761u + 0x9e3779b97f4a7c15u;
}

static inline float trand(float lo, float hi)
{
    trng ^= trng >> 12;
    trng ^= trng << 25;
    trng ^= trng >> 27;
    return lo + (hi - lo) * (float)((trng * 2685821657736338717u) >> 40) /
                    16777216.0f;
}

static inline void fill(float *x, size_t n, float lo, float hi)
{
    size_t i;
    for (i = 0; i < n; i++)
        x[i] = trand(lo, hi);
}

/* Magnitude in [lo, hi], random sign: keeps values away from 0 (Relu's kink,
 * Div's denominator). */
static inline void fill_away(float *x, size_t n, float lo, float hi)
{
    size_t i;
    for (i = 0; i < n; i++)
        x[i] = trand(0, 1) < 0.5f ? -trand(lo, hi) : trand(lo, hi);
}

static inline double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    size_t i;
    for (i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

typedef double (*loss_fn)(void *ctx);

#define FD_H    1e-2f
#define FD_RTOL 1e-2
#define FD_ATOL 2e-3

/* Compares grad (the analytic dL/dx, from accumulated - preset) with central
 * differences of f over every element of x. The step actually taken is
 * measured in float, so x +- h rounding does not bias the quotient. */
static inline void expect_grad(const char *what, float *x, size_t n,
                               const float *grad, loss_fn f, void *ctx)
{
    size_t i;
    for (i = 0; i < n; i++) {
        const float save = x[i];
        double lp, lm, fd, xp, xm;
        x[i] = save + FD_H;
        xp = x[i];
        lp = f(ctx);
        x[i] = save - FD_H;
        xm = x[i];
        lm = f(ctx);
        x[i] = save;
        fd = (lp - lm) / (xp - xm);
        ck_assert_msg(fabs(grad[i] - fd) <= FD_ATOL + FD_RTOL * fabs(fd),
                      "%s[%d]: analytic %.7g, finite difference %.7g", what,
                      (int)i, (double)grad[i], fd);
    }
}

/* out = after - before: what a backward call added. */
static inline void added(float *out, const float *after, const float *before,
                         size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        out[i] = after[i] - before[i];
}

static inline void expect_near(const char *what, const float *got,
                               const double *want, size_t n, double rtol,
                               double atol)
{
    size_t i;
    for (i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i]),
                      "%s[%d]: got %.9g, want %.9g", what, (int)i,
                      (double)got[i], want[i]);
}

/* got == want as floats, element by element. */
static inline void expect_same(const char *what, const float *got,
                               const float *want, int n)
{
    int i;
    for (i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%d]: got %.9g, want %.9g", what,
                      i, (double)got[i], (double)want[i]);
}

/* Heap buffers of n floats: random in [-2, 2) (from trng), NaN, zero, or a
 * copy of x; the caller frees them. */
static inline float *rnd(size_t n)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    fill(x, n, -2.0f, 2.0f);
    return x;
}

/* n values 0.1 + noise from seed: a float loop adding them drifts
 * (adding 0.1 to a total near 1e4 rounds by up to 5e-4, the same way each
 * time), which the "sums" test cases hold the kernels against. */
static inline float *drift_values(size_t n, unsigned seed, float noise)
{
    float *x = malloc(n * sizeof *x);
    size_t i;
    ck_assert_ptr_nonnull(x);
    tseed(seed);
    for (i = 0; i < n; i++)
        x[i] = 0.1f + trand(-noise, noise);
    return x;
}

static inline float *nans(size_t n)
{
    float *x = malloc(n * sizeof *x);
    size_t i;
    ck_assert_ptr_nonnull(x);
    for (i = 0; i < n; i++)
        x[i] = NAN;
    return x;
}

static inline float *zeros(size_t n)
{
    float *x = calloc(n, sizeof *x);
    ck_assert_ptr_nonnull(x);
    return x;
}

static inline float *copy(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* The _set twins' tests (the "set" test case of a family's file). A
 * backward kernel's _set twin writes the gradient it is told to
 * (remat_rt.h): the same values as the adding kernel on a zeroed buffer,
 * without reading the buffer's old contents. Every case runs the plain
 * kernel into zeros and the _set twin into a buffer of NaNs: a twin that
 * read (or added into) its old contents would leave NaNs. Values must be
 * equal as floats (a zero's sign may differ: adding a -0 contribution into
 * +0 gives +0, writing it keeps -0). A gradient the twin is not told to
 * write still adds: it starts from random values in both runs and must come
 * out bitwise the same. The inputs are rnd()'s, from set_seed's seed.
 *
 * Written (want, from zeros) against got (from NaNs): equal floats. */
static inline void same_values(const char *what, const float *want,
                               const float *got, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        ck_assert_msg(want[i] == got[i], "%s: element %zu is %g, want %g",
                      what, i, (double)got[i], (double)want[i]);
}

/* The "set" test cases' checked fixture: each _set test draws its inputs
 * (rnd) from this seed. */
static inline void set_seed(void)
{
    tseed(5);
}

/* ---- windows, for test_kernels_conv.c and _pool.c ------------------------ */

/* Only where RT_TEST_WINDOWS is defined before the #include:
 * test_kernels_attention.c has a GUARD and an expect_guard of its own, for
 * its scratch. */
#ifdef RT_TEST_WINDOWS

/* Buffers of n floats followed by GUARD sentinels that no kernel may write. */
#define GUARD 16
#define SENTINEL 12345.0f

/* Not inline: inlined into test_kernels_pool.c's fast-path test, gcc 12
 * warns of an impossible malloc size (-Walloc-size-larger-than). */
static float *guarded(size_t n)
{
    float *p = malloc((n + GUARD) * sizeof *p);
    size_t i;
    ck_assert(p != NULL);
    for (i = 0; i < n + GUARD; i++)
        p[i] = SENTINEL;
    return p;
}

static inline void expect_guard(const char *what, const float *p, size_t n)
{
    size_t i;
    for (i = n; i < n + GUARD; i++)
        ck_assert_msg(p[i] == SENTINEL, "%s: written past its %d floats",
                      what, (int)n);
}

typedef struct {
    const char *name;
    int n, c, h, w, oc;
    int kh, kw, sh, sw, dh, dw;
    int pt, pl, pb, pr;
    int group, bias; /* conv only */
} win_spec;

/* ONNX's output size, floor mode. */
static inline int out_size(int in, int pad0, int pad1, int k, int s, int d)
{
    return (in + pad0 + pad1 - (d * (k - 1) + 1)) / s + 1;
}

static inline rt_window window_of(const win_spec *s)
{
    rt_window p;
    memset(&p, 0, sizeof p);
    p.n = s->n, p.c = s->c, p.h = s->h, p.w = s->w;
    p.oc = s->oc ? s->oc : s->c;
    p.kh = s->kh, p.kw = s->kw, p.sh = s->sh, p.sw = s->sw;
    p.dh = s->dh, p.dw = s->dw;
    p.pad_top = s->pt, p.pad_left = s->pl;
    p.pad_bottom = s->pb, p.pad_right = s->pr;
    p.group = s->group ? s->group : 1;
    p.oh = out_size(s->h, s->pt, s->pb, s->kh, s->sh, s->dh);
    p.ow = out_size(s->w, s->pl, s->pr, s->kw, s->sw, s->dw);
    ck_assert_msg(p.oh > 0 && p.ow > 0, "%s: empty output", s->name);
    return p;
}

/* Input row (or column) that output position o reads for tap k. */
static inline int tap_at(int o, int stride, int pad, int k, int dil)
{
    return o * stride - pad + k * dil;
}

/* A window over 1 to 3 spatial axes, each axis's numbers in (depth,
 * height, width) order: a 1-D window is one row high (the compiler's
 * form), a 2-D one a single depth slice. ceil: ceil_mode's output size. */
typedef struct {
    const char *name;
    int n, c, oc, group, bias, ceil;
    int in[3], k[3], s[3], d[3], pb[3], pe[3];
} nd_spec;

/* ONNX's output size with ceil_mode: rounded up, less one where the last
 * window would start in the end padding. */
static inline int out_size_ceil_mode(int in, int pad0, int pad1, int k,
                                     int s, int d)
{
    const int span = in + pad0 + pad1 - (d * (k - 1) + 1);
    int o = (span + s - 1) / s + 1;
    if ((o - 1) * s >= in + pad0)
        o--;
    return o;
}

static inline rt_window window_nd(const nd_spec *s)
{
    rt_window p;
    int o[3], a;
    for (a = 0; a < 3; a++)
        o[a] = (s->ceil ? out_size_ceil_mode : out_size)(
            s->in[a], s->pb[a], s->pe[a], s->k[a], s->s[a], s->d[a]);
    memset(&p, 0, sizeof p);
    p.n = s->n, p.c = s->c, p.oc = s->oc ? s->oc : s->c;
    p.group = s->group ? s->group : 1;
    p.d = s->in[0], p.h = s->in[1], p.w = s->in[2];
    p.od = o[0], p.oh = o[1], p.ow = o[2];
    p.kd = s->k[0], p.kh = s->k[1], p.kw = s->k[2];
    p.sd = s->s[0], p.sh = s->s[1], p.sw = s->s[2];
    p.dd = s->d[0], p.dh = s->d[1], p.dw = s->d[2];
    p.pad_front = s->pb[0], p.pad_top = s->pb[1], p.pad_left = s->pb[2];
    p.pad_back = s->pe[0], p.pad_bottom = s->pe[1], p.pad_right = s->pe[2];
    ck_assert_msg(p.od > 0 && p.oh > 0 && p.ow > 0, "%s: empty output",
                  s->name);
    return p;
}

#endif /* RT_TEST_WINDOWS */

#endif
