/*
 * resize.c: ONNX Resize (rt_resize_*), nearest, (multi)linear and cubic, over
 * tensors of any rank up to RT_RESIZE_MAX_RANK. The compiler works out,
 * per axis, which input indices each output index reads and with which
 * weights (the coordinate transformation, the rounding of nearest, the
 * clamping at the edges), and passes them as tables: the kernels only
 * gather (forward) and scatter-add (backward, the adjoint) along them.
 * Each output element is the sum over the corners of its cell (1, 2 or 4
 * taps per axis) of the product of the axes' weights times the input.
 * Serial, in one fixed order: the same bits on any thread count.
 */
#include "rt_impl.h"

/* ---- resize ---------------------------------------------------------------- */

/* Calls f(ctx, output index, input index, weight) for every tap of every
 * output element, output elements in row-major order and, within one,
 * corners with the last axis fastest. */
#define RESIZE_WALK(p, BODY)                                                   \
    do {                                                                       \
        int pos_[RT_RESIZE_MAX_RANK], taps_[RT_RESIZE_MAX_RANK];               \
        int istr_[RT_RESIZE_MAX_RANK], a_, total_ = 1, o_, ncorner_ = 1;       \
        for (a_ = (p)->rank - 1; a_ >= 0; a_--) {                              \
            istr_[a_] = a_ == (p)->rank - 1 ? 1                                \
                        : istr_[a_ + 1] * (p)->in[a_ + 1];                     \
            taps_[a_] = (p)->taps[a_] > 1 ? (p)->taps[a_] : 1;                 \
            ncorner_ *= taps_[a_];                                             \
            total_ *= (p)->out[a_];                                            \
            pos_[a_] = 0;                                                      \
        }                                                                      \
        for (o_ = 0; o_ < total_; o_++) {                                      \
            int c_;                                                            \
            for (c_ = 0; c_ < ncorner_; c_++) {                                \
                int rest_ = c_, off_ = 0;                                      \
                float wgt_ = 1.0f;                                             \
                for (a_ = (p)->rank - 1; a_ >= 0; a_--) {                      \
                    const int k_ = rest_ % taps_[a_];                          \
                    const int q_ = pos_[a_] * taps_[a_] + k_;                  \
                    rest_ /= taps_[a_];                                        \
                    off_ += ((p)->taps[a_] ? (p)->idx[a_][q_] : pos_[a_]) *    \
                            istr_[a_];                                         \
                    if ((p)->wt[a_])                                           \
                        wgt_ *= (p)->wt[a_][q_];                               \
                }                                                              \
                {                                                              \
                    const int out_ = o_, in_ = off_;                           \
                    const float w_ = wgt_;                                     \
                    BODY;                                                      \
                }                                                              \
            }                                                                  \
            for (a_ = (p)->rank - 1; a_ >= 0; a_--) {                          \
                if (++pos_[a_] < (p)->out[a_])                                 \
                    break;                                                     \
                pos_[a_] = 0;                                                  \
            }                                                                  \
        }                                                                      \
    } while (0)

void rt_resize_forward(float *y, const float *x, const rt_resize *p)
{
    int a, total = 1;
    for (a = 0; a < p->rank; a++)
        total *= p->out[a];
    for (a = 0; a < total; a++)
        y[a] = 0.0f;
    RESIZE_WALK(p, y[out_] += w_ * x[in_]);
}

void rt_resize_backward(float *dx, const float *dy, const rt_resize *p)
{
    if (dx)
        RESIZE_WALK(p, dx[in_] += w_ * dy[out_]);
}
