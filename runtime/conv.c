/*
 * conv.c: convolution (rt_conv_*), a GEMM over im2col's columns, its
 * images in a fixed number of lanes so that its bits do not depend on the
 * thread count. The geometry helper inside() is in rt_impl.h: pool.c
 * shares it.
 */
#include "rt_impl.h"

/* ---- convolution and pooling ---------------------------------------------- */

/* Convolution is a GEMM over im2col's column matrix: for one image and group,
 * row (ci, ki, kj) of col holds, for every output position, the input element
 * that tap reads (0 in the padding), so y_g (oc/group x oh*ow) = w_g
 * (oc/group x cg*kh*kw) * col; a 3-D window adds its depth to both, row
 * (ci, kz, ki, kj) and column (oz, oy, ox), and a 1-D one is a 2-D one
 * row high, so one code path serves the three. The backward is the two transposed products,
 * dw_g += dy_g * col^T and dcol = w_g^T * dy_g, with col2im scattering dcol
 * back onto dx. Under rt_window.col_cap the matrix is built in bands (see
 * "Bands" below): of its columns in the forward, of its rows in the
 * backward, so that no GEMM's sum is cut. The pooling kernels walk each window directly, visiting only
 * its taps inside the input, with row kernels for the common windows (see
 * "pooling fast paths"). All geometry reduces to one question, which
 * indices of a strided run land inside [0, size): inside() answers it once
 * per row or window, so the inner loops have no bounds tests. */

/* With a 1x1 kernel, stride 1 and no padding, one image-group's x (cg planes
 * of h*w = oh*ow) already is its column matrix. */
static int conv_is_pointwise(const rt_window *p)
{
    return p->kd == 1 && p->kh == 1 && p->kw == 1 && p->sd == 1 &&
           p->sh == 1 && p->sw == 1 && p->pad_front == 0 && p->pad_back == 0 &&
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
    return p->d == 1 && p->od == 1 && p->kd == 1 && p->pad_front == 0 &&
           p->sh == 1 && p->sw == 1 && p->dw == 1 && p->ow == p->w;
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

/* The largest of two ints, and the smallest. */
static int imax(int a, int b) { return a > b ? a : b; }
static int imin(int a, int b) { return a < b ? a : b; }

/* A run row r holding output rows [r0, r1) (so r[0] is column r0 * ow of
 * the whole row): zeroes its columns outside [t->xlo, t->xhi) on rows
 * [ylo, yhi), and, with all, every element outside rows [ylo, yhi) too. */
static void zero_wrapped(float *r, const tap_run *t, const rt_window *p,
                         int r0, int r1, int all)
{
    const int ylo = imax(t->ylo, r0), yhi = imin(t->yhi, r1);
    int oy, ox;
    if (all && ylo >= yhi) {
        memset(r, 0, (size_t)(r1 - r0) * p->ow * sizeof *r);
        return;
    }
    if (all) {
        memset(r, 0, (size_t)(ylo - r0) * p->ow * sizeof *r);
        memset(r + (size_t)(yhi - r0) * p->ow, 0,
               (size_t)(r1 - yhi) * p->ow * sizeof *r);
    }
    for (oy = ylo; oy < yhi; oy++) {
        float *ro = r + (size_t)(oy - r0) * p->ow;
        for (ox = 0; ox < t->xlo; ox++)
            ro[ox] = 0.0f;
        for (ox = t->xhi; ox < p->ow; ox++)
            ro[ox] = 0.0f;
    }
}

/* The channels ci whose column row ci * taps + t (t: a tap's index among
 * the taps of one channel) lies in a band of rows [k0, k1): [*lo, *hi). */
static void tap_channels(int k0, int k1, int t, int taps, int *lo, int *hi)
{
    *lo = k0 > t ? (k0 - t + taps - 1) / taps : 0;
    *hi = k1 > t ? (k1 - 1 - t) / taps + 1 : 0;
    if (*hi < *lo)
        *hi = *lo;
}

/* Rows [k0, k1) of im2col over output rows [r0, r1), by runs: the taps
 * outer, so that each tap's run is found once for all its channels. */
static void im2col_runs(float *col, const float *x, const rt_window *p,
                        int k0, int k1, int r0, int r1)
{
    const size_t hw = (size_t)p->h * p->w, ncol = (size_t)(r1 - r0) * p->ow;
    const int taps = p->kh * p->kw, b0 = r0 * p->ow;
    int ci, ki, kj, lo, hi;
    for (ki = 0; ki < p->kh; ki++)
        for (kj = 0; kj < p->kw; kj++) {
            const int t = ki * p->kw + kj;
            const tap_run u = tap_run_of(p, ki, kj); /* the same per channel */
            const int a = imax(u.a, b0), b = imin(u.b, r1 * p->ow);
            tap_channels(k0, k1, t, taps, &lo, &hi);
            for (ci = lo; ci < hi; ci++) {
                float *r = col + (size_t)(ci * taps + t - k0) * ncol;
                if (a < b)
                    memcpy(r + (a - b0), x + ci * hw + (a + u.d),
                           (size_t)(b - a) * sizeof *r);
                zero_wrapped(r, &u, p, r0, r1, 1);
            }
        }
}

/* col2im_add over runs, for rows [k0, k1) of the column matrix (all
 * output rows): the wrapped columns of col (scratch, so ours to clear)
 * are zeroed first, so that one long add over each run adds nothing where
 * they land (x + 0.0f is x, but -0.0f becomes +0.0f). */
static void col2im_runs(float *dx, float *col, const rt_window *p, int k0,
                        int k1)
{
    const size_t ohw = (size_t)p->oh * p->ow, hw = (size_t)p->h * p->w;
    const int taps = p->kh * p->kw;
    int ci, ki, kj, lo, hi;
    for (ki = 0; ki < p->kh; ki++)
        for (kj = 0; kj < p->kw; kj++) {
            const int t = ki * p->kw + kj;
            const tap_run u = tap_run_of(p, ki, kj);
            if (u.a == u.b)
                continue;
            tap_channels(k0, k1, t, taps, &lo, &hi);
            for (ci = lo; ci < hi; ci++) {
                float *r = col + (size_t)(ci * taps + t - k0) * ohw;
                zero_wrapped(r, &u, p, 0, p->oh, 0);
                add_strided(dx + ci * hw + (u.a + u.d), r + u.a, u.b - u.a, 1);
            }
        }
}

/* One tap of the window: its offsets and, per axis, the outputs whose
 * read lands inside the input, [zlo, zhi), [ylo, yhi), [xlo, xhi). */
typedef struct {
    int offz, offy, offx, zlo, zhi, ylo, yhi, xlo, xhi;
} tap_span;

/* Row dst of im2col for tap s over output rows [r0, r1) (counted over
 * depth and height, r = oz * oh + oy), from the channel at xc. */
static void im2col_line(float *dst, const float *xc, const rt_window *p,
                        const tap_span *s, int r0, int r1)
{
    const size_t hw = (size_t)p->h * p->w;
    int oz = r0 / p->oh, oy = r0 % p->oh, r;
    for (r = r0; r < r1; r++) {
        float *o = dst + (size_t)(r - r0) * p->ow;
        int ox = 0;
        if (oz >= s->zlo && oz < s->zhi && oy >= s->ylo && oy < s->yhi &&
            s->xlo < s->xhi) {
            /* xr: the element output ox = xlo reads */
            const float *xr = xc + (size_t)(oz * p->sd + s->offz) * hw +
                              (size_t)(oy * p->sh + s->offy) * p->w +
                              (s->offx + s->xlo * p->sw);
            for (; ox < s->xlo; ox++)
                o[ox] = 0.0f;
            copy_strided(o + s->xlo, xr, s->xhi - s->xlo, p->sw);
            ox = s->xhi;
        }
        for (; ox < p->ow; ox++)
            o[ox] = 0.0f;
        if (++oy == p->oh)
            oy = 0, oz++;
    }
}

/* dx (the channel at dc) += col2im of row for tap s (all output rows). */
static void col2im_line(float *dc, const float *row, const rt_window *p,
                        const tap_span *s)
{
    const size_t hw = (size_t)p->h * p->w, ohw = (size_t)p->oh * p->ow;
    int oz, oy;
    if (s->xlo == s->xhi) /* no pointer into the padding is formed */
        return;
    for (oz = s->zlo; oz < s->zhi; oz++)
        for (oy = s->ylo; oy < s->yhi; oy++)
            add_strided(dc + (size_t)(oz * p->sd + s->offz) * hw +
                            (size_t)(oy * p->sh + s->offy) * p->w +
                            (s->offx + s->xlo * p->sw),
                        row + oz * ohw + (size_t)oy * p->ow + s->xlo,
                        s->xhi - s->xlo, p->sw);
}

/* Rows [k0, k1) of an image-group's column matrix, row k = ((ci * kd +
 * kz) * kh + ki) * kw + kj, each tap's reach found once per axis as the
 * loops reach it: im2col of them over output rows [r0, r1) into col
 * (dx NULL), or col2im of them (all output rows) added to dx. The run
 * path does either by runs. */
static void col_rows(float *col, const float *x, float *dx, const rt_window *p,
                     int k0, int k1, int r0, int r1)
{
    const size_t dhw = (size_t)p->d * p->h * p->w;
    const size_t ncol = (size_t)(r1 - r0) * p->ow;
    const int taps = p->kd * p->kh * p->kw;
    int ci, kz, ki, kj;
    tap_span s;
    if (conv_is_run(p)) {
        if (dx != NULL)
            col2im_runs(dx, col, p, k0, k1);
        else
            im2col_runs(col, x, p, k0, k1, r0, r1);
        return;
    }
    for (ci = k0 / taps; ci <= (k1 - 1) / taps; ci++)
        for (kz = 0; kz < p->kd; kz++) {
            s.offz = kz * p->dd - p->pad_front;
            inside(s.offz, p->sd, p->d, p->od, &s.zlo, &s.zhi);
            for (ki = 0; ki < p->kh; ki++) {
                s.offy = ki * p->dh - p->pad_top;
                inside(s.offy, p->sh, p->h, p->oh, &s.ylo, &s.yhi);
                for (kj = 0; kj < p->kw; kj++) {
                    const int k = ((ci * p->kd + kz) * p->kh + ki) * p->kw + kj;
                    if (k < k0 || k >= k1)
                        continue;
                    s.offx = kj * p->dw - p->pad_left;
                    inside(s.offx, p->sw, p->w, p->ow, &s.xlo, &s.xhi);
                    if (dx != NULL)
                        col2im_line(dx + ci * dhw, col + (size_t)(k - k0) * ncol,
                                    p, &s);
                    else
                        im2col_line(col + (size_t)(k - k0) * ncol, x + ci * dhw,
                                    p, &s, r0, r1);
                }
            }
        }
}

/* col (rows [k0, k1) of im2col, over output rows [r0, r1)): row k - k0
 * holds (r1 - r0) * ow columns. */
static void im2col(float *col, const float *x, const rt_window *p, int k0,
                   int k1, int r0, int r1)
{
    col_rows(col, x, NULL, p, k0, k1, r0, r1);
}

/* dx (the cg channels of one image) += col2im of rows [k0, k1) of the
 * column matrix (all od * oh * ow output columns), at col: im2col's
 * transpose, each entry added to the input element it was read from, a
 * channel's taps in row order (so in the same order whatever the band). */
static void col2im_add(float *dx, float *col, const rt_window *p, int k0,
                       int k1)
{
    col_rows(col, NULL, dx, p, k0, k1, 0, p->od * p->oh);
}

/* The sum of x[0..n), in SUM_LANES interleaved float partial sums added
 * up at the end: a sum the compiler vectorizes, where one running sum is a
 * chain of dependent adds. */
#define SUM_LANES 16
static float sum_lanes_f(const float *x, int n)
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

/* The sum of x[0..n) (a bias gradient's output plane): sum_lanes_f over
 * blocks of SUM_BLOCK, each block's sum folded into a compensated float
 * total (rt_comp_add), so that the error does not grow with n (each lane
 * adds SUM_BLOCK / SUM_LANES values at most) at float's speed, with no
 * soft double on a Cortex-M4. A plane of SUM_BLOCK or fewer gets
 * sum_lanes_f's bits. */
#define SUM_BLOCK 256
static float sum_lanes(const float *x, int n)
{
    float hi = 0.0f, lo = 0.0f;
    int j = 0;
    if (n <= SUM_BLOCK)
        return sum_lanes_f(x, n);
    for (; j < n; j += SUM_BLOCK)
        rt_comp_add(&hi, &lo,
                    sum_lanes_f(x + j, n - j < SUM_BLOCK ? n - j : SUM_BLOCK));
    return rt_comp_value(hi, lo);
}

/* The per-image loop of a convolution runs in lanes: a fixed number of
 * them, RT_CONV_LANES (fewer only when there are fewer images), that does
 * not depend on the thread count. Lane l takes images [n * l / lanes,
 * n * (l + 1) / lanes) in order, with an im2col buffer of its own in the
 * scratch, and the lanes run through rt_parallel_parts, one chunk each: side
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

/* The rows of one image-group's column matrix, (c/group) * kd * kh * kw,
 * and its output rows over depth and height, od * oh, each ow columns. */
static int conv_kk(const rt_window *p)
{
    return p->c / p->group * p->kd * p->kh * p->kw;
}

static int conv_out_rows(const rt_window *p)
{
    return p->od * p->oh;
}

/* Bands: a lane need not hold an image-group's whole column matrix. With
 * col_cap set, the forward builds and multiplies it a band of output rows
 * at a time (columns of the matrix: y's columns split, each element's sum
 * over the taps unchanged), the backward a band of its rows (taps) at a
 * time: dw's columns and dcol's rows split, each element's sum over the
 * output positions and the filters unchanged, and col2im adding the rows
 * in the same order. So the bits are those of the whole matrix wherever a
 * GEMM's element does not depend on which other rows and columns of C the
 * call computes (the portable GEMM by its definition; OpenBLAS as the
 * thread split already assumes). A band is at least one row; the bands
 * of a total are as even as the cap allows (27 taps under a cap of 20 are
 * 14 + 13, not 20 + 7), so that the scratch is no larger than it must
 * be. */
static int even_band(int total, size_t most)
{
    size_t parts;
    if (most < 1)
        most = 1;
    if (most >= (size_t)total)
        return total;
    parts = ((size_t)total + most - 1) / most;
    return (int)(((size_t)total + parts - 1) / parts);
}

/* The forward's band, in output rows, and the backward's, in column rows:
 * each lane's share of col_cap, or everything when col_cap is 0. */
static int conv_band(const rt_window *p, int backward)
{
    size_t cap = p->col_cap > 0
                     ? (size_t)p->col_cap / (size_t)conv_lanes(p) : 0;
    const size_t ohw = (size_t)conv_out_rows(p) * p->ow;
    if (p->col_cap > 0 && cap == 0) /* a cap below one float per lane */
        cap = 1;
    if (backward)
        return cap && ohw ? even_band(conv_kk(p), cap / ohw) : conv_kk(p);
    return cap && ohw ? even_band(conv_out_rows(p),
                                  cap / ((size_t)conv_kk(p) * p->ow))
                      : conv_out_rows(p);
}

/* One lane's im2col buffer (a band), forward or backward: 0 where x is the
 * column matrix. */
static size_t conv_col_floats(const rt_window *p, int backward)
{
    if (conv_is_pointwise(p))
        return 0;
    if (backward)
        return (size_t)conv_band(p, 1) * conv_out_rows(p) * p->ow;
    return (size_t)conv_kk(p) * conv_band(p, 0) * p->ow;
}

/* One lane's partial dw (oc x c/group x kh x kw) and db (oc) after it. */
static size_t conv_partial_floats(const rt_window *p)
{
    return (size_t)p->oc * (p->c / p->group) * p->kd * p->kh * p->kw +
           (size_t)p->oc;
}

size_t rt_conv_scratch(const rt_window *p)
{
    const rt_window q = window3(p);
    return (size_t)conv_lanes(&q) * conv_col_floats(&q, 0);
}

size_t rt_conv_backward_scratch(const rt_window *p)
{
    const rt_window q = window3(p);
    return (size_t)conv_lanes(&q) * conv_col_floats(&q, 1) +
           (size_t)(conv_lanes(&q) - 1) * conv_partial_floats(&q);
}

/* A convolution's operands, for its lanes; the backward's gradients and
 * the forward's y are NULL in the other direction. */
typedef struct {
    const rt_window *p;
    float *y, *dx, *dw, *db;
    const float *x, *w, *b, *dy;
    float *scratch;
    int backward;
} conv_job;

/* Lane l's im2col buffer; NULL for a pointwise conv, where x is the
 * column matrix (the forward's scratch may then be NULL, and no pointer is
 * formed from it), or for an empty output, where no GEMM reads it. */
static float *conv_lane_col(const conv_job *j, size_t l)
{
    const size_t ncol = conv_col_floats(j->p, j->backward);
    return ncol ? j->scratch + l * ncol : NULL;
}

/* One image-group's y (og x ohw at yg) from its input xg, through col
 * a band of output rows at a time (x itself when col is NULL). */
static void conv_fwd_group(const conv_job *j, const float *xg, const float *wg,
                           const float *bg, float *yg, float *col)
{
    const rt_window *p = j->p;
    const int og = p->oc / p->group, kk = conv_kk(p), rows = conv_out_rows(p);
    const int ohw = rows * p->ow, band = col ? conv_band(p, 0) : rows;
    int r0, o, k;
    for (r0 = 0; r0 < rows; r0 += band) {
        const int r1 = imin(r0 + band, rows), nb = (r1 - r0) * p->ow;
        float *yb = yg + (size_t)r0 * p->ow;
        float beta = 0.0f; /* 0: y is not read */
        if (col != NULL)
            im2col(col, xg, p, 0, kk, r0, r1);
        if (bg != NULL) {
            for (o = 0; o < og; o++)
                for (k = 0; k < nb; k++)
                    yb[(size_t)o * ohw + k] = bg[o];
            beta = 1.0f;
        }
        rt_sgemm(0, 0, og, nb, kk, 1.0f, wg, kk, col ? col : xg, col ? nb : ohw,
                 beta, yb, ohw);
    }
}

/* y for images [i0, i1). */
static void conv_fwd_images(const conv_job *j, int i0, int i1, float *col)
{
    const rt_window *p = j->p;
    const int cg = p->c / p->group, og = p->oc / p->group, kk = conv_kk(p);
    const size_t hw = (size_t)p->d * p->h * p->w;
    const size_t ohw = (size_t)conv_out_rows(p) * p->ow;
    int i, g;
    for (i = i0; i < i1; i++)
        for (g = 0; g < p->group; g++)
            conv_fwd_group(j, j->x + ((size_t)i * p->c + (size_t)g * cg) * hw,
                           j->w + (size_t)g * og * kk,
                           j->b ? j->b + g * og : NULL,
                           j->y + ((size_t)i * p->oc + (size_t)g * og) * ohw,
                           col);
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
                     const rt_window *win, float *scratch)
{
    const rt_window q = window3(win), *p = &q;
    conv_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.y = y;
    j.x = x;
    j.w = w;
    j.b = b;
    j.scratch = scratch;
    rt_parallel_parts((size_t)conv_lanes(p), 1, 1, conv_fwd_lanes, &j);
}

/* One image-group's part of the backward, given its offsets into x (and
 * dx) and w (and dw): dw += dy_g * col^T (beta: 0 on a lane's first
 * image) and dx += col2im(w_g^T * dy_g), a band of the column matrix's
 * rows at a time, col holding that band's columns for dw and then its
 * dcol for dx. A pointwise conv (col NULL) multiplies x and dx directly. */
static void conv_bwd_group(const conv_job *j, size_t xoff, size_t woff,
                           const float *dyg, float *dw, float beta, float *col)
{
    const rt_window *p = j->p;
    const int og = p->oc / p->group, kk = conv_kk(p);
    const int ohw = conv_out_rows(p) * p->ow;
    const int band = col ? conv_band(p, 1) : kk;
    int k0;
    for (k0 = 0; k0 < kk; k0 += band) {
        const int k1 = imin(k0 + band, kk), nk = k1 - k0;
        if (dw != NULL) {
            if (col != NULL)
                im2col(col, j->x + xoff, p, k0, k1, 0, conv_out_rows(p));
            rt_sgemm(0, 1, og, nk, ohw, 1.0f, dyg, ohw,
                     col ? col : j->x + xoff, ohw, beta, dw + woff + k0, kk);
        }
        if (j->dx == NULL)
            continue;
        if (col == NULL) {
            rt_sgemm(1, 0, kk, ohw, og, 1.0f, j->w + woff, kk, dyg, ohw, 1.0f,
                     j->dx + xoff, ohw);
            continue;
        }
        rt_sgemm(1, 0, nk, ohw, og, 1.0f, j->w + woff + k0, kk, dyg, ohw, 0.0f,
                 col, ohw);
        col2im_add(j->dx + xoff, col, p, k0, k1);
    }
}

/* The backward of images [i0, i1) into dx and into dw, db: those of the
 * job (beta 1) or a lane's partials, which the first image writes (beta 0
 * on it, so the partial needs no zeroing). Pointers into x, w, dx, dw are
 * formed only when that gradient is wanted, so NULL never takes part in
 * pointer arithmetic. */
static void conv_bwd_images(const conv_job *j, int i0, int i1, float *dw,
                            float *db, float first_beta, float *col)
{
    const rt_window *p = j->p;
    const int cg = p->c / p->group, og = p->oc / p->group, kk = conv_kk(p);
    const int ohw = conv_out_rows(p) * p->ow;
    const size_t hw = (size_t)p->d * p->h * p->w;
    int i, g, o;
    for (i = i0; i < i1; i++) {
        const float beta = i == i0 ? first_beta : 1.0f;
        for (g = 0; g < p->group; g++) {
            const float *dyg = j->dy + ((size_t)i * p->oc + (size_t)g * og) * ohw;
            if (db != NULL)
                for (o = 0; o < og; o++) {
                    const float s = sum_lanes(dyg + (size_t)o * ohw, ohw);
                    db[g * og + o] = beta == 0.0f ? s : db[g * og + o] + s;
                }
            if (dw != NULL || j->dx != NULL)
                conv_bwd_group(j, ((size_t)i * p->c + (size_t)g * cg) * hw,
                               (size_t)g * og * kk, dyg, dw, beta, col);
        }
    }
}

/* Lane l > 0's partial dw and db, after the lanes' im2col buffers. */
static float *conv_lane_partial(const conv_job *j, size_t l)
{
    return j->scratch + (size_t)conv_lanes(j->p) * conv_col_floats(j->p, 1) +
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
                      const float *x, const float *w, const rt_window *win,
                      float *scratch)
{
    const rt_window q = window3(win), *p = &q;
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
    j.backward = 1;
    rt_parallel_parts((size_t)lanes, 1, 1, conv_bwd_lanes, &j);
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
