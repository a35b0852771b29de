/*
 * norm.c: LayerNorm and BatchNormalization. Each computes a row's (a
 * channel's) moments in two passes, and its backward recomputes them with
 * the same function, so it sees exactly the statistics the forward used.
 * Every sum (moments, the backward's means, dscale and dbias) goes through
 * rt_sum (rt_impl.h), so its error does not grow with its length; LayerNorm's
 * dscale and dbias, summed over blocks of rows, keep their compensation
 * terms in the caller's scratch. A row's sums (LayerNorm's moments and its
 * backward's two means) take whole blocks of terms through rt_sum_block,
 * in lanes, so they vectorize: the terms of a block are formed into a
 * small array first.
 */
#include "rt_impl.h"

/* Mean and 1/sqrt(var + eps) of one row of cols > 0 values, var biased. Two
 * passes: summing (x - mean)^2 rather than forming E[x^2] - mean^2 avoids
 * the cancellation that makes the latter wrong (even negative) when
 * |mean| >> std. Forward and backward both call this, so the backward sees
 * exactly the statistics the forward used. */
static void row_moments(const float *x, int cols, float eps, float *mean,
                        float *rstd)
{
    float t[RT_SUM_BLOCK], m, d;
    rt_sum v;
    int j = 0, l;
    m = *mean = rt_sum_contig(x, (size_t)cols) / (float)cols;
    rt_sum_init(&v);
    for (; cols - j >= RT_SUM_BLOCK; j += RT_SUM_BLOCK) {
        for (l = 0; l < RT_SUM_BLOCK; l++) {
            d = x[j + l] - m;
            t[l] = d * d;
        }
        rt_sum_fold(&v, rt_sum_block(t));
    }
    for (; j < cols; j++) {
        d = x[j] - m;
        v.part += d * d;
    }
    *rstd = 1.0f / sqrtf(rt_sum_value(&v) / (float)cols + eps);
}

/* LayerNorm's operands; rows are independent except for the backward's
 * dscale and dbias, sums over rows (see rt_layernorm_backward). mean and
 * rstd hold the moments of rows [r0, r0 + RT_LN_BLOCK). Each block's rt_sum
 * of a column is folded into the gradient entry with Neumaier's
 * compensation (rt_comp_add): the entry is the total's hi, lo_s[j] and
 * lo_b[j] (the caller's scratch) its lo, added in at the end. So their
 * error does not grow with rows either (a plain float add per block grew
 * with rows / 128). */
#define RT_LN_BLOCK 128
typedef struct {
    float *y, *dx, *dscale, *dbias, *lo_s, *lo_b;
    const float *x, *dy, *scale, *bias;
    int cols, r0, nrows;
    float eps;
    float mean[RT_LN_BLOCK], rstd[RT_LN_BLOCK];
} ln_job;

/* The row at offset o of y from its moments: the forward's and a remade
 * recompute's (ln_back_rows) one expression, so the same bits. */
static void ln_y_row(const ln_job *l, size_t o, float mean, float rstd)
{
    const float *xr = l->x + o;
    float *yr = l->y + o;
    int j;
    for (j = 0; j < l->cols; j++)
        yr[j] = (xr[j] - mean) * rstd * l->scale[j] +
                (l->bias != NULL ? l->bias[j] : 0.0f);
}

static void ln_fwd_part(void *ctx, size_t lo, size_t hi)
{
    const ln_job *l = ctx;
    size_t r;
    for (r = lo; r < hi; r++) {
        const size_t o = r * (size_t)l->cols;
        float mean, rstd;
        row_moments(l->x + o, l->cols, l->eps, &mean, &rstd);
        ln_y_row(l, o, mean, rstd);
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
    rt_parallel_for((size_t)rows, 1, (size_t)rows * cols, RT_PAR_COSTLY,
                    ln_fwd_part, &l);
}

/* One row. With xhat = (x - mean) * rstd and g = dy * scale (the gradient
 * reaching xhat), dx = rstd * (g - mean(g) - xhat * mean(g * xhat)): the
 * two means are the paths through mean and variance, which depend on every
 * x of the row. */
static void layernorm_back_row(float *dx, const float *dy, const float *x,
                               const float *scale, int cols, float mean,
                               float rstd)
{
    rt_sum sum_g, sum_gx;
    float tg[RT_SUM_BLOCK], tgx[RT_SUM_BLOCK], mg, mgx;
    int j = 0, l;
    rt_sum_init(&sum_g);
    rt_sum_init(&sum_gx);
    for (; cols - j >= RT_SUM_BLOCK; j += RT_SUM_BLOCK) {
        for (l = 0; l < RT_SUM_BLOCK; l++) {
            const float g = dy[j + l] * scale[j + l];
            tg[l] = g;
            tgx[l] = g * ((x[j + l] - mean) * rstd);
        }
        rt_sum_fold(&sum_g, rt_sum_block(tg));
        rt_sum_fold(&sum_gx, rt_sum_block(tgx));
    }
    for (; j < cols; j++) {
        const float g = dy[j] * scale[j];
        sum_g.part += g;
        sum_gx.part += g * ((x[j] - mean) * rstd);
    }
    mg = rt_sum_value(&sum_g) / (float)cols;
    mgx = rt_sum_value(&sum_gx) / (float)cols;
    for (j = 0; j < cols; j++) {
        const float xhat = (x[j] - mean) * rstd;
        dx[j] += rstd * (dy[j] * scale[j] - mg - xhat * mgx);
    }
}

/* Rows [lo, hi) of the block at r0: their moments, kept for
 * ln_back_cols, their y when remade, and (when wanted) their dx. */
static void ln_back_rows(void *ctx, size_t lo, size_t hi)
{
    ln_job *l = ctx;
    size_t i;
    for (i = lo; i < hi; i++) {
        const size_t o = ((size_t)l->r0 + i) * (size_t)l->cols;
        if (l->x != NULL)
            row_moments(l->x + o, l->cols, l->eps, &l->mean[i], &l->rstd[i]);
        if (l->y != NULL)
            ln_y_row(l, o, l->mean[i], l->rstd[i]);
        if (l->dx != NULL)
            layernorm_back_row(l->dx + o, l->dy + o, l->x + o, l->scale,
                               l->cols, l->mean[i], l->rstd[i]);
    }
}

/* Columns [j0, j0 + w), w <= LN_COLS, of dscale (db NULL) or dbias (ds
 * NULL): each column the rt_sum of the block's rows in row order, with the
 * same xhat as layernorm_back_row, as rt_sum_add would take the terms (the
 * same bits: a block's plain float sum folded every RT_SUM_BLOCK rows),
 * then folded into the gradient's compensated total. The columns run side
 * by side, a row at a time, so the loop over them vectorizes and reads
 * rows contiguously. */
#define LN_COLS 16
static void ln_cols_sum(const ln_job *l, size_t j0, size_t w, float *grad,
                        float *lo)
{
    const size_t cols = (size_t)l->cols, o = (size_t)l->r0 * cols + j0;
    float part[LN_COLS];
    rt_sum s[LN_COLS];
    size_t c;
    int i;
    for (c = 0; c < w; c++) {
        rt_sum_init(&s[c]);
        part[c] = 0.0f;
    }
    for (i = 0; i < l->nrows; i++) {
        const float *dy = l->dy + o + (size_t)i * cols;
        const float *x = l->x + o + (size_t)i * cols;
        if (grad == l->dscale)
            for (c = 0; c < w; c++)
                part[c] += dy[c] * ((x[c] - l->mean[i]) * l->rstd[i]);
        else
            for (c = 0; c < w; c++)
                part[c] += dy[c];
        if ((i + 1) % RT_SUM_BLOCK == 0)
            for (c = 0; c < w; c++) {
                rt_sum_fold(&s[c], part[c]);
                part[c] = 0.0f;
            }
    }
    for (c = 0; c < w; c++) {
        s[c].part = part[c];
        rt_comp_add(&grad[j0 + c], &lo[j0 + c], rt_sum_value(&s[c]));
    }
}

/* Columns [lo, hi) of dscale and dbias, LN_COLS at a time. */
static void ln_back_cols(void *ctx, size_t lo, size_t hi)
{
    const ln_job *l = ctx;
    size_t j, w;
    for (j = lo; j < hi; j += w) {
        w = hi - j < LN_COLS ? hi - j : LN_COLS;
        if (l->dscale != NULL)
            ln_cols_sum(l, j, w, l->dscale, l->lo_s);
        if (l->dbias != NULL)
            ln_cols_sum(l, j, w, l->dbias, l->lo_b);
    }
}

/* grad[j] = grad[j] + lo[j], the compensated totals' values. */
static void ln_comp_finish(float *grad, const float *lo, int cols)
{
    int j;
    if (grad != NULL)
        for (j = 0; j < cols; j++)
            grad[j] = rt_comp_value(grad[j], lo[j]);
}

/* Blocks of rows, each first split by rows (moments, dx), then by columns
 * (dscale, dbias: sums over rows). One thread runs the same blocks, so the
 * bits do not depend on the thread count. */
static void layernorm_back_blocks(ln_job *l, int rows)
{
    const size_t cols = (size_t)l->cols;
    for (l->r0 = 0; l->r0 < rows; l->r0 += RT_LN_BLOCK) {
        size_t work;
        l->nrows = rows - l->r0 < RT_LN_BLOCK ? rows - l->r0 : RT_LN_BLOCK;
        work = (size_t)l->nrows * cols;
        rt_parallel_for((size_t)l->nrows, 1, work, RT_PAR_COSTLY,
                        ln_back_rows, l);
        if (l->dscale != NULL || l->dbias != NULL)
            rt_parallel_for(cols, 16, work, RT_PAR_COSTLY, ln_back_cols, l);
    }
}

/* Offsets, not pointers, for the same reason as bc_row: a NULL gradient
 * never takes part in pointer arithmetic. */
size_t rt_layernorm_backward_scratch(int cols)
{
    return cols > 0 ? 2 * (size_t)cols : 0;
}

void rt_layernorm_backward(float *dx, float *dscale, float *dbias,
                           const float *dy, const float *x, const float *scale,
                           int rows, int cols, float eps, float *scratch)
{
    rt_layernorm_backward_remake(dx, dscale, dbias, NULL, dy, x, scale, NULL,
                                 rows, cols, eps, scratch);
}

void rt_layernorm_backward_remake(float *dx, float *dscale, float *dbias,
                                  float *y, const float *dy, const float *x,
                                  const float *scale, const float *bias,
                                  int rows, int cols, float eps,
                                  float *scratch)
{
    ln_job l;
    if (cols <= 0 || rows <= 0 ||
        (dx == NULL && dscale == NULL && dbias == NULL && y == NULL))
        return;
    l.y = y;
    l.bias = bias;
    l.dx = dx;
    l.dscale = dscale;
    l.dbias = dbias;
    l.dy = dy;
    /* the bias alone (a frozen scale and input): x is not read */
    l.x = dx == NULL && dscale == NULL && y == NULL ? NULL : x;
    l.scale = scale;
    l.cols = cols;
    l.eps = eps;
    l.lo_s = dscale != NULL ? scratch : NULL;
    l.lo_b = dbias != NULL ? scratch + cols : NULL;
    if (l.lo_s != NULL)
        memset(l.lo_s, 0, (size_t)cols * sizeof *l.lo_s);
    if (l.lo_b != NULL)
        memset(l.lo_b, 0, (size_t)cols * sizeof *l.lo_b);
    layernorm_back_blocks(&l, rows);
    ln_comp_finish(dscale, l.lo_s, cols);
    ln_comp_finish(dbias, l.lo_b, cols);
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
    rt_sum s, v;
    int i, j;
    rt_sum_init(&s);
    rt_sum_init(&v);
    for (i = 0; i < n; i++) {
        const float *xc = x + ((size_t)i * c + ch) * inner;
        for (j = 0; j < inner; j++)
            rt_sum_add(&s, xc[j]);
    }
    *mean = rt_sum_value(&s) / m;
    for (i = 0; i < n; i++) {
        const float *xc = x + ((size_t)i * c + ch) * inner;
        for (j = 0; j < inner; j++)
            rt_sum_add(&v, (xc[j] - *mean) * (xc[j] - *mean));
    }
    *var = rt_sum_value(&v) / m;
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
        float mean, var, rstd, sum_dy, sum_dyx, mg, mgx;
        rt_sum s_dy, s_dyx;
        rt_sum_init(&s_dy);
        rt_sum_init(&s_dyx);
        if (dx == NULL && dscale == NULL) {     /* x is not read */
            for (i = 0; i < n; i++)
                for (j = 0; j < inner; j++)
                    rt_sum_add(&s_dy, dy[((size_t)i * c + ch) * inner + j]);
            dbias[ch] += rt_sum_value(&s_dy);
            continue;
        }
        channel_moments(x, n, c, inner, ch, &mean, &var);
        rstd = 1.0f / sqrtf(var + eps);
        for (i = 0; i < n; i++) {
            const size_t o = ((size_t)i * c + ch) * inner;
            for (j = 0; j < inner; j++) {
                rt_sum_add(&s_dy, dy[o + j]);
                rt_sum_add(&s_dyx, dy[o + j] * (x[o + j] - mean) * rstd);
            }
        }
        sum_dy = rt_sum_value(&s_dy);
        sum_dyx = rt_sum_value(&s_dyx);
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

/* Channel ch's sum of dy, and of dy * (x - mean) * rstd unless x is NULL
 * (compensated, so neither drifts with n * inner). */
static void channel_dy_sums(const float *dy, const float *x, int n, int c,
                            int inner, int ch, float mean, float rstd,
                            float *sum_dy, float *sum_dyx)
{
    rt_sum s_dy, s_dyx;
    int i, j;
    rt_sum_init(&s_dy);
    rt_sum_init(&s_dyx);
    for (i = 0; i < n; i++) {
        const size_t o = ((size_t)i * c + ch) * inner;
        for (j = 0; j < inner; j++) {
            rt_sum_add(&s_dy, dy[o + j]);
            if (x != NULL)
                rt_sum_add(&s_dyx, dy[o + j] * (x[o + j] - mean) * rstd);
        }
    }
    *sum_dy = rt_sum_value(&s_dy);
    *sum_dyx = rt_sum_value(&s_dyx);
}

/* The statistics are constants here, so dx is dy scaled per channel: no
 * term through a mean or a variance, unlike rt_batchnorm_backward. */
void rt_batchnorm_eval_backward(float *dx, float *dscale, float *dbias,
                                const float *dy, const float *x,
                                const float *scale, const float *mean,
                                const float *var, int n, int c, int inner,
                                float eps)
{
    int ch, i, j;
    if (n <= 0 || inner <= 0)
        return;
    for (ch = 0; ch < c; ch++) {
        const float rstd = dx != NULL || dscale != NULL
                               ? 1.0f / sqrtf(var[ch] + eps) : 0.0f;
        if (dscale != NULL || dbias != NULL) {
            float sum_dy, sum_dyx;
            channel_dy_sums(dy, dscale != NULL ? x : NULL, n, c, inner, ch,
                            dscale != NULL ? mean[ch] : 0.0f, rstd, &sum_dy,
                            &sum_dyx);
            if (dscale != NULL)
                dscale[ch] += sum_dyx;
            if (dbias != NULL)
                dbias[ch] += sum_dy;
        }
        if (dx == NULL)
            continue;
        for (i = 0; i < n; i++) {
            const size_t o = ((size_t)i * c + ch) * inner;
            const float a = scale[ch] * rstd;
            for (j = 0; j < inner; j++)
                dx[o + j] += dy[o + j] * a;
        }
    }
}

/* ---- GroupNormalization, and InstanceNormalization (one channel a group) --- */

/* Mean and 1/sqrt(var + eps) of one group's m > 0 values, both passes
 * summed in double (so that neither drifts with m), var biased. The
 * forward and the backward call this, so they see the same statistics. */
static void group_moments(const float *x, long m, float eps, double *mean,
                          double *rstd)
{
    double s = 0.0, v = 0.0;
    long j;
    for (j = 0; j < m; j++)
        s += x[j];
    *mean = s / (double)m;
    for (j = 0; j < m; j++) {
        const double d = x[j] - *mean;
        v += d * d;
    }
    *rstd = 1.0 / sqrt(v / (double)m + eps);
}

void rt_groupnorm_forward(float *y, const float *x, const float *scale,
                          const float *bias, int n, int c, int inner,
                          int groups, float eps)
{
    const int per = c / groups;
    const long m = (long)per * inner;
    int b, g, ch;
    long j;
    for (b = 0; b < n; b++)
        for (g = 0; g < groups; g++) {
            const size_t off = ((size_t)b * c + (size_t)g * per) * inner;
            double mean, rstd;
            group_moments(x + off, m, eps, &mean, &rstd);
            for (ch = 0; ch < per; ch++) {
                const int k = g * per + ch;
                const float *xr = x + off + (size_t)ch * inner;
                float *yr = y + off + (size_t)ch * inner;
                for (j = 0; j < inner; j++)
                    yr[j] = (float)((xr[j] - mean) * rstd * scale[k] +
                                    bias[k]);
            }
        }
}

/* dx: per (batch, group), with xhat = (x - mean) * rstd and g = dy * scale,
 * dx += rstd * (g - mean(g) - xhat * mean(g * xhat)). */
static void groupnorm_dx(float *dx, const float *dy, const float *x,
                         const float *scale, int n, int c, int inner,
                         int groups, float eps)
{
    const int per = c / groups;
    const long m = (long)per * inner;
    int b, g, ch;
    long j;
    for (b = 0; b < n; b++)
        for (g = 0; g < groups; g++) {
            const size_t off = ((size_t)b * c + (size_t)g * per) * inner;
            double mean, rstd, sg = 0.0, sgx = 0.0;
            group_moments(x + off, m, eps, &mean, &rstd);
            for (ch = 0; ch < per; ch++) {
                const double k = scale[g * per + ch];
                const size_t o = off + (size_t)ch * inner;
                for (j = 0; j < inner; j++) {
                    const double gr = dy[o + j] * k;
                    sg += gr;
                    sgx += gr * ((x[o + j] - mean) * rstd);
                }
            }
            sg /= (double)m;
            sgx /= (double)m;
            for (ch = 0; ch < per; ch++) {
                const double k = scale[g * per + ch];
                const size_t o = off + (size_t)ch * inner;
                for (j = 0; j < inner; j++) {
                    const double xh = (x[o + j] - mean) * rstd;
                    dx[o + j] += (float)(rstd * (dy[o + j] * k - sg -
                                                 xh * sgx));
                }
            }
        }
}

/* dscale[ch] += the sum over the batch and the spatial positions of
 * dy * xhat, in double: RT_GN_CHUNK channels at a time (a stack array,
 * no allocation), each group's statistics computed for every chunk it
 * reaches into. */
#define RT_GN_CHUNK 64
static void groupnorm_dscale(float *dscale, const float *dy, const float *x,
                             int n, int c, int inner, int groups, float eps)
{
    const int per = c / groups;
    const long m = (long)per * inner;
    double ds[RT_GN_CHUNK];
    int c0, b, g, ch;
    long j;
    for (c0 = 0; c0 < c; c0 += RT_GN_CHUNK) {
        const int c1 = c - c0 < RT_GN_CHUNK ? c : c0 + RT_GN_CHUNK;
        for (ch = c0; ch < c1; ch++)
            ds[ch - c0] = 0.0;
        for (b = 0; b < n; b++)
            for (g = c0 / per; g <= (c1 - 1) / per; g++) {
                const size_t off = ((size_t)b * c + (size_t)g * per) * inner;
                const int lo = g * per < c0 ? c0 : g * per;
                const int hi = (g + 1) * per > c1 ? c1 : (g + 1) * per;
                double mean, rstd;
                group_moments(x + off, m, eps, &mean, &rstd);
                for (ch = lo; ch < hi; ch++) {
                    const size_t o = ((size_t)b * c + ch) * inner;
                    double s = 0.0;
                    for (j = 0; j < inner; j++)
                        s += dy[o + j] * ((x[o + j] - mean) * rstd);
                    ds[ch - c0] += s;
                }
            }
        for (ch = c0; ch < c1; ch++)
            dscale[ch] += (float)ds[ch - c0];
    }
}

void rt_groupnorm_backward(float *dx, float *dscale, float *dbias,
                           const float *dy, const float *x,
                           const float *scale, int n, int c, int inner,
                           int groups, float eps)
{
    int b, ch;
    long j;
    if (dbias != NULL)      /* dy alone: x may be NULL */
        for (ch = 0; ch < c; ch++) {
            double s = 0.0;
            for (b = 0; b < n; b++) {
                const float *d = dy + ((size_t)b * c + ch) * inner;
                for (j = 0; j < inner; j++)
                    s += d[j];
            }
            dbias[ch] += (float)s;
        }
    if (dx != NULL)
        groupnorm_dx(dx, dy, x, scale, n, c, inner, groups, eps);
    if (dscale != NULL)
        groupnorm_dscale(dscale, dy, x, n, c, inner, groups, eps);
}
