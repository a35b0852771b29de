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
 * back onto dx. The pooling kernels walk each window directly, visiting only
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

/* col (cg*kd*kh*kw x od*oh*ow) from the cg channels of one image at x:
 * row (ci, kz, ki, kj), column (oz, oy, ox). A 2-D window is the one
 * depth slice (kd = od = d = 1). */
static void im2col(float *col, const float *x, int cg, const rt_window *p)
{
    const size_t ohw = (size_t)p->oh * p->ow, ncol = ohw * (size_t)p->od;
    const size_t hw = (size_t)p->h * p->w;
    int ci, kz, ki, kj, oz, oy, ox;
    if (conv_is_run(p)) {
        im2col_runs(col, x, cg, p);
        return;
    }
    for (ci = 0; ci < cg; ci++)
        for (kz = 0; kz < p->kd; kz++) {
            const int offz = kz * p->dd - p->pad_front;
            int zlo, zhi;
            inside(offz, p->sd, p->d, p->od, &zlo, &zhi);
            for (ki = 0; ki < p->kh; ki++) {
                const int offy = ki * p->dh - p->pad_top;
                int ylo, yhi;
                inside(offy, p->sh, p->h, p->oh, &ylo, &yhi);
                for (kj = 0; kj < p->kw; kj++) {
                    const int offx = kj * p->dw - p->pad_left;
                    float *row = col + ((((size_t)ci * p->kd + kz) * p->kh + ki) *
                                            p->kw + kj) * ncol;
                    int xlo, xhi;
                    inside(offx, p->sw, p->w, p->ow, &xlo, &xhi);
                    for (oz = 0; oz < p->od; oz++) {
                        float *rz = row + (size_t)oz * ohw;
                        const float *xz;
                        if (oz < zlo || oz >= zhi) { /* a slice of padding */
                            memset(rz, 0, ohw * sizeof *rz);
                            continue;
                        }
                        xz = x + ((size_t)ci * p->d + (oz * p->sd + offz)) * hw;
                        for (oy = 0; oy < p->oh; oy++) {
                            float *r = rz + (size_t)oy * p->ow;
                            ox = 0;
                            if (oy >= ylo && oy < yhi && xlo < xhi) {
                                /* xr: the element output ox = xlo reads */
                                const float *xr =
                                    xz + (size_t)(oy * p->sh + offy) * p->w +
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
        }
}

/* dx (cg channels of one image) += col2im(col): im2col's transpose, each
 * column entry added to the input element it was read from. */
static void col2im_add(float *dx, float *col, int cg, const rt_window *p)
{
    const size_t ohw = (size_t)p->oh * p->ow, ncol = ohw * (size_t)p->od;
    const size_t hw = (size_t)p->h * p->w;
    int ci, kz, ki, kj, oz, oy;
    if (conv_is_run(p)) {
        col2im_runs(dx, col, cg, p);
        return;
    }
    for (ci = 0; ci < cg; ci++)
        for (kz = 0; kz < p->kd; kz++) {
            const int offz = kz * p->dd - p->pad_front;
            int zlo, zhi;
            inside(offz, p->sd, p->d, p->od, &zlo, &zhi);
            for (ki = 0; ki < p->kh; ki++) {
                const int offy = ki * p->dh - p->pad_top;
                int ylo, yhi;
                inside(offy, p->sh, p->h, p->oh, &ylo, &yhi);
                for (kj = 0; kj < p->kw; kj++) {
                    const int offx = kj * p->dw - p->pad_left;
                    const float *row =
                        col + ((((size_t)ci * p->kd + kz) * p->kh + ki) * p->kw +
                               kj) * ncol;
                    int xlo, xhi;
                    inside(offx, p->sw, p->w, p->ow, &xlo, &xhi);
                    if (xlo == xhi) /* no pointer into the padding is formed */
                        continue;
                    for (oz = zlo; oz < zhi; oz++) {
                        const float *rz = row + (size_t)oz * ohw;
                        float *dz = dx + ((size_t)ci * p->d + (oz * p->sd + offz)) * hw;
                        for (oy = ylo; oy < yhi; oy++) {
                            const float *r = rz + (size_t)oy * p->ow;
                            float *dr = dz + (size_t)(oy * p->sh + offy) * p->w +
                                        (offx + xlo * p->sw);
                            add_strided(dr, r + xlo, xhi - xlo, p->sw);
                        }
                    }
                }
            }
        }
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

/* One lane's im2col buffer: 0 where x is the column matrix. */
static size_t conv_col_floats(const rt_window *p)
{
    if (conv_is_pointwise(p))
        return 0;
    return (size_t)(p->c / p->group) * p->kd * p->kh * p->kw * p->od * p->oh *
           p->ow;
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
    return (size_t)conv_lanes(&q) * conv_col_floats(&q);
}

size_t rt_conv_backward_scratch(const rt_window *p)
{
    const rt_window q = window3(p);
    return rt_conv_scratch(&q) +
           (size_t)(conv_lanes(&q) - 1) * conv_partial_floats(&q);
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
    const int kk = cg * p->kd * p->kh * p->kw, ohw = p->od * p->oh * p->ow;
    const size_t hw = (size_t)p->d * p->h * p->w;
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
    const int kk = cg * p->kd * p->kh * p->kw, ohw = p->od * p->oh * p->ow;
    const size_t hw = (size_t)p->d * p->h * p->w;
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
