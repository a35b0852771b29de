/*
 * conv_transpose.c: ONNX ConvTranspose in 1, 2 or 3 spatial dimensions
 * (rt_convt_*), by direct loops: every input element scatters its products
 * with the kernel's taps onto the output. One code path for every rank:
 * a missing spatial dimension is one of size 1 with a kernel, stride and
 * dilation of 1 and no padding. The backward's sums (each element of dx,
 * dw and db) accumulate in double, so their error does not grow with the
 * number of terms, and every element is summed in one fixed order: the
 * bits do not depend on the thread count (the kernel runs on the calling
 * thread).
 */
#include "rt_impl.h"

/* ---- transposed convolution ------------------------------------------------ */

static int convt_ksize(const rt_convt *p)
{
    return p->k[0] * p->k[1] * p->k[2];
}

static int convt_isize(const rt_convt *p)
{
    return p->in[0] * p->in[1] * p->in[2];
}

static int convt_osize(const rt_convt *p)
{
    return p->out[0] * p->out[1] * p->out[2];
}

/* Loops over every input position (i0, i1, i2) in row-major order, flat
 * index i, and within it every kernel tap (t0, t1, t2), flat index t,
 * whose output position lands inside the output, flat index o: BODY runs
 * with i, t and o set. Per axis a, o_a = i_a * s - pad + t_a * d. */
#define CONVT_EACH_TAP(p, BODY)                                                \
    do {                                                                       \
        int i0_, i1_, i2_, t0_, t1_, t2_, i = 0;                               \
        for (i0_ = 0; i0_ < (p)->in[0]; i0_++)                                 \
            for (i1_ = 0; i1_ < (p)->in[1]; i1_++)                             \
                for (i2_ = 0; i2_ < (p)->in[2]; i2_++, i++)                    \
                    for (t0_ = 0; t0_ < (p)->k[0]; t0_++) {                    \
                        const int o0_ = i0_ * (p)->s[0] - (p)->pad[0] +        \
                                        t0_ * (p)->d[0];                       \
                        if (o0_ < 0 || o0_ >= (p)->out[0])                     \
                            continue;                                          \
                        for (t1_ = 0; t1_ < (p)->k[1]; t1_++) {                \
                            const int o1_ = i1_ * (p)->s[1] - (p)->pad[1] +    \
                                            t1_ * (p)->d[1];                   \
                            if (o1_ < 0 || o1_ >= (p)->out[1])                 \
                                continue;                                      \
                            for (t2_ = 0; t2_ < (p)->k[2]; t2_++) {            \
                                const int o2_ = i2_ * (p)->s[2] -              \
                                                (p)->pad[2] + t2_ * (p)->d[2]; \
                                if (o2_ < 0 || o2_ >= (p)->out[2])             \
                                    continue;                                  \
                                {                                              \
                                    const int t = (t0_ * (p)->k[1] + t1_) *    \
                                                  (p)->k[2] + t2_;             \
                                    const int o = (o0_ * (p)->out[1] + o1_) *  \
                                                  (p)->out[2] + o2_;           \
                                    BODY;                                      \
                                }                                              \
                            }                                                  \
                        }                                                      \
                    }                                                          \
    } while (0)

void rt_convt_forward(float *y, const float *x, const float *w,
                      const float *b, const rt_convt *p)
{
    const int cg = p->c / p->group, mg = p->m / p->group;
    const int isz = convt_isize(p), osz = convt_osize(p), ksz = convt_ksize(p);
    int n, ch, g, ci, mo, j;
    for (n = 0; n < p->n; n++)
        for (ch = 0; ch < p->m; ch++) {
            float *yc = y + ((size_t)n * p->m + ch) * osz;
            const float v = b ? b[ch] : 0.0f;
            for (j = 0; j < osz; j++)
                yc[j] = v;
        }
    for (n = 0; n < p->n; n++)
        for (g = 0; g < p->group; g++)
            for (mo = 0; mo < mg; mo++) {
                float *yc = y + ((size_t)n * p->m + g * mg + mo) * osz;
                for (ci = 0; ci < cg; ci++) {
                    const int cin = g * cg + ci;
                    const float *xc = x + ((size_t)n * p->c + cin) * isz;
                    const float *wk = w + ((size_t)cin * mg + mo) * ksz;
                    CONVT_EACH_TAP(p, yc[o] += xc[i] * wk[t]);
                }
            }
}

/* Output position of input position ia through tap ta along every axis,
 * flat, or -1 where it falls outside the output. */
static int convt_out_at(const rt_convt *p, const int *ia, const int *ta)
{
    int a, at = 0;
    for (a = 0; a < 3; a++) {
        const int o = ia[a] * p->s[a] - p->pad[a] + ta[a] * p->d[a];
        if (o < 0 || o >= p->out[a])
            return -1;
        at = at * p->out[a] + o;
    }
    return at;
}

/* dx[n, cin, i] += the sum over mo, then taps, of dy * w; dw[cin, mo, t]
 * += the sum over n, then positions, of x * dy; db[j] += the sum of dy
 * over n and positions: each element's sum in double, in that order. */
void rt_convt_backward(float *dx, float *dw, float *db, const float *dy,
                       const float *x, const float *w, const rt_convt *p)
{
    const int cg = p->c / p->group, mg = p->m / p->group;
    const int isz = convt_isize(p), osz = convt_osize(p), ksz = convt_ksize(p);
    int n, g, ci, mo, i, j, ia[3], ta[3];
    if (db)
        for (j = 0; j < p->m; j++) {
            double s = 0;
            for (n = 0; n < p->n; n++) {
                const float *d = dy + ((size_t)n * p->m + j) * osz;
                for (i = 0; i < osz; i++)
                    s += d[i];
            }
            db[j] += (float)s;
        }
    for (g = 0; g < p->group; g++)
        for (ci = 0; ci < cg; ci++) {
            const int cin = g * cg + ci;
            if (dx)
                for (n = 0; n < p->n; n++) {
                    float *dxc = dx + ((size_t)n * p->c + cin) * isz;
                    i = 0;
                    for (ia[0] = 0; ia[0] < p->in[0]; ia[0]++)
                    for (ia[1] = 0; ia[1] < p->in[1]; ia[1]++)
                    for (ia[2] = 0; ia[2] < p->in[2]; ia[2]++, i++) {
                        double s = 0;
                        for (mo = 0; mo < mg; mo++) {
                            const float *d = dy + ((size_t)n * p->m + g * mg +
                                                   mo) * osz;
                            const float *wk = w + ((size_t)cin * mg + mo) * ksz;
                            int t = 0;
                            for (ta[0] = 0; ta[0] < p->k[0]; ta[0]++)
                            for (ta[1] = 0; ta[1] < p->k[1]; ta[1]++)
                            for (ta[2] = 0; ta[2] < p->k[2]; ta[2]++, t++) {
                                const int o = convt_out_at(p, ia, ta);
                                if (o >= 0)
                                    s += (double)d[o] * wk[t];
                            }
                        }
                        dxc[i] += (float)s;
                    }
                }
            if (dw)
                for (mo = 0; mo < mg; mo++) {
                    float *dwk = dw + ((size_t)cin * mg + mo) * ksz;
                    int t = 0;
                    for (ta[0] = 0; ta[0] < p->k[0]; ta[0]++)
                    for (ta[1] = 0; ta[1] < p->k[1]; ta[1]++)
                    for (ta[2] = 0; ta[2] < p->k[2]; ta[2]++, t++) {
                        double s = 0;
                        for (n = 0; n < p->n; n++) {
                            const float *xc = x + ((size_t)n * p->c + cin) * isz;
                            const float *d = dy + ((size_t)n * p->m + g * mg +
                                                   mo) * osz;
                            i = 0;
                            for (ia[0] = 0; ia[0] < p->in[0]; ia[0]++)
                            for (ia[1] = 0; ia[1] < p->in[1]; ia[1]++)
                            for (ia[2] = 0; ia[2] < p->in[2]; ia[2]++, i++) {
                                const int o = convt_out_at(p, ia, ta);
                                if (o >= 0)
                                    s += (double)xc[i] * d[o];
                            }
                        }
                        dwk[t] += (float)s;
                    }
                }
        }
}
