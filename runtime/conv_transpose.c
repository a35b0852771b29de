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

/* The output element (flat, within one plane) that input position i
 * (flat) reaches through kernel tap t (flat), or -1 where it falls
 * outside the output (in the padding that is cropped). */
static int convt_target(const rt_convt *p, int i, int t)
{
    int at = 0, a, ia[3], ta[3];
    ia[2] = i % p->in[2], i /= p->in[2];
    ia[1] = i % p->in[1], ia[0] = i / p->in[1];
    ta[2] = t % p->k[2], t /= p->k[2];
    ta[1] = t % p->k[1], ta[0] = t / p->k[1];
    for (a = 0; a < 3; a++) {
        int o = ia[a] * p->s[a] - p->pad[a] + ta[a] * p->d[a];
        if (o < 0 || o >= p->out[a])
            return -1;
        at = at * p->out[a] + o;
    }
    return at;
}

void rt_convt_forward(float *y, const float *x, const float *w,
                      const float *b, const rt_convt *p)
{
    const int cg = p->c / p->group, mg = p->m / p->group;
    const int isz = convt_isize(p), osz = convt_osize(p), ksz = convt_ksize(p);
    int n, ch, g, ci, mo, i, t, j;
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
                    for (i = 0; i < isz; i++)
                        for (t = 0; t < ksz; t++) {
                            const int o = convt_target(p, i, t);
                            if (o >= 0)
                                yc[o] += xc[i] * wk[t];
                        }
                }
            }
}

void rt_convt_backward(float *dx, float *dw, float *db, const float *dy,
                       const float *x, const float *w, const rt_convt *p)
{
    const int cg = p->c / p->group, mg = p->m / p->group;
    const int isz = convt_isize(p), osz = convt_osize(p), ksz = convt_ksize(p);
    int n, g, ci, mo, i, t, j;
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
            if (dx)     /* dx[n, cin, i] = sum over mo, t of dy * w */
                for (n = 0; n < p->n; n++) {
                    float *dxc = dx + ((size_t)n * p->c + cin) * isz;
                    for (i = 0; i < isz; i++) {
                        double s = 0;
                        for (mo = 0; mo < mg; mo++) {
                            const float *d = dy + ((size_t)n * p->m + g * mg +
                                                   mo) * osz;
                            const float *wk = w + ((size_t)cin * mg + mo) * ksz;
                            for (t = 0; t < ksz; t++) {
                                const int o = convt_target(p, i, t);
                                if (o >= 0)
                                    s += (double)d[o] * wk[t];
                            }
                        }
                        dxc[i] += (float)s;
                    }
                }
            if (dw)     /* dw[cin, mo, t] = sum over n, i of x * dy */
                for (mo = 0; mo < mg; mo++)
                    for (t = 0; t < ksz; t++) {
                        double s = 0;
                        for (n = 0; n < p->n; n++) {
                            const float *xc = x + ((size_t)n * p->c + cin) * isz;
                            const float *d = dy + ((size_t)n * p->m + g * mg +
                                                   mo) * osz;
                            for (i = 0; i < isz; i++) {
                                const int o = convt_target(p, i, t);
                                if (o >= 0)
                                    s += (double)xc[i] * d[o];
                            }
                        }
                        dw[((size_t)cin * mg + mo) * ksz + t] += (float)s;
                    }
        }
}
