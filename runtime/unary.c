/*
 * unary.c: the pointwise ops of one input: Relu, Gelu (exact, and the tanh
 * approximation), Tanh, Sigmoid, Erf, Reciprocal, Exp, Log, Sqrt, Neg, and
 * torch.nn's activations as ONNX defines them: LeakyRelu, HardSwish,
 * HardSigmoid, Clip, Elu, Softplus, Abs, Selu, Celu, Softsign, Mish, Sin,
 * Cos, and Sign (no backward: its gradient is zero). Relu, LeakyRelu,
 * Clip and HardSigmoid have _mask twins that keep one bit per element
 * for the backward instead of a float tensor (compact residuals).
 * Relu and Gelu split over the threads by elements; Gelu's exact form uses
 * a branch-free erfc and e^x of its own (phi_g, rt_impl.h's rt_exp_v) so that its loops
 * vectorize.
 */
#include "rt_impl.h"

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
    unsigned char *mask;    /* Relu's mask: written by the forward, read
                             * by the backward (then not written) */
    float *remade;  /* a backward's forward output, written beside dx
                     * (rt_gelu_backward_remake), or NULL */
} pw_job;

/* A job of these operands, with no mask and no remade output. */
static pw_job pw_make(float *out, const float *a, const float *b, int flag,
                      int set)
{
    pw_job job;
    job.out = out;
    job.a = a;
    job.b = b;
    job.flag = flag;
    job.set = set;
    job.mask = NULL;
    job.remade = NULL;
    return job;
}

/* The job's n elements, in chunks of 16 over the threads. */
static void pw_run(rt_chunk_fn fn, pw_job *job, int n, size_t min_work)
{
    if (n > 0)
        rt_parallel_for((size_t)n, 16, (size_t)n, min_work, fn, job);
}

static void pointwise_set(rt_chunk_fn fn, float *out, const float *a,
                          const float *b, int n, int flag, size_t min_work,
                          int set)
{
    pw_job job = pw_make(out, a, b, flag, set);
    pw_run(fn, &job, n, min_work);
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

/* ---- Relu with its output's sign as a mask ------------------------------------ */

/* Bit i of mask (byte i / 8, bit i % 8) is y[i] > 0: all the backward asks
 * of y. Chunks are 16 elements aligned (pointwise_set), so each thread
 * writes whole bytes of its own. A block of y as relu_fwd_part writes it
 * (a loop gcc vectorizes into max instructions), then a byte 0 or 1 per
 * element (a vectorized compare), then each eight of those bytes, read as
 * one little-endian 64-bit word w, packed into a mask byte by one
 * multiply: w * 0x0102040810204080 carries byte k's bit to bit 56 + k and
 * nothing else there, since every other product of a byte and a term lands
 * below bit 56 or past bit 63, each on a bit of its own (no carries). The
 * sign's branch in one loop that did both mispredicted on every other
 * element (3 ns each); a compare and shift per bit was 3 times this. */
#define RELU_MASK_BLOCK 256

static unsigned pack_bits(const unsigned char *on)
{
    const uint32_t one = 1;
    unsigned char first;
    uint64_t w = 0;
    int k;
    memcpy(&first, &one, 1);    /* folded: is the host little-endian? */
    if (first)
        memcpy(&w, on, sizeof w);
    else
        for (k = 7; k >= 0; k--)
            w = w << 8 | on[k];
    return (unsigned)((w * 0x0102040810204080u) >> 56);
}

static void relu_mask_fwd_part(void *ctx, size_t lo, size_t hi)
{
    const pw_job *p = ctx;
    float *y = p->out;
    const float *x = p->a;
    unsigned char *mask = p->mask, on[RELU_MASK_BLOCK];
    size_t i, k, len;
    for (i = lo; i < hi; i += len) {
        len = hi - i < RELU_MASK_BLOCK ? hi - i : RELU_MASK_BLOCK;
        for (k = 0; k < len; k++)
            y[i + k] = x[i + k] > 0.0f ? x[i + k] : 0.0f;
        for (k = 0; k < len; k++)
            on[k] = (unsigned char)(y[i + k] > 0.0f);
        for (; k % 8; k++)
            on[k] = 0;
        for (k = 0; k < len; k += 8)
            mask[(i + k) >> 3] = (unsigned char)pack_bits(on + k);
    }
}

/* relu_back_part with the mask's bit for y > 0: the same sums, selected by
 * the bit as a 32-bit and-mask rather than a branch (set: dy or +0; else
 * dx + dy or dx, unchanged). */
static void relu_mask_back_part(void *ctx, size_t lo, size_t hi)
{
    const pw_job *p = ctx;
    float *dx = p->out;
    const float *dy = p->a;
    const unsigned char *mask = p->mask;
    size_t i = lo, k;
    for (; hi - i >= 8; i += 8) {
        const unsigned m = mask[i >> 3];
        if (p->set)
            for (k = 0; k < 8; k++) {
                uint32_t d, on = 0u - (m >> k & 1u);
                memcpy(&d, &dy[i + k], sizeof d);
                d &= on;
                memcpy(&dx[i + k], &d, sizeof d);
            }
        else
            for (k = 0; k < 8; k++) {
                const float sum = dx[i + k] + dy[i + k];
                uint32_t a, b, on = 0u - (m >> k & 1u);
                memcpy(&a, &sum, sizeof a);
                memcpy(&b, &dx[i + k], sizeof b);
                a = (a & on) | (b & ~on);
                memcpy(&dx[i + k], &a, sizeof a);
            }
    }
    for (; i < hi; i++) {
        const unsigned bit = mask[i >> 3] >> (i & 7) & 1u;
        dx[i] = p->set ? (bit ? dy[i] : 0.0f) : (bit ? dx[i] + dy[i] : dx[i]);
    }
}

/* pointwise_set with a mask; the backward's is read only (cast back) */
static void pointwise_mask(rt_chunk_fn fn, float *out, const float *a,
                           unsigned char *mask, int n, int set)
{
    pw_job job = pw_make(out, a, NULL, 0, set);
    job.mask = mask;
    pw_run(fn, &job, n, RT_PAR_CHEAP);
}

void rt_relu_forward_mask(float *y, unsigned char *mask, const float *x, int n)
{
    pointwise_mask(relu_mask_fwd_part, y, x, mask, n, 0);
}

void rt_relu_backward_mask(float *dx, const float *dy,
                           const unsigned char *mask, int n)
{
    rt_relu_backward_mask_set(dx, dy, mask, n, 0);
}

void rt_relu_backward_mask_set(float *dx, const float *dy,
                               const unsigned char *mask, int n, unsigned set)
{
    if (dx != NULL)
        pointwise_mask(relu_mask_back_part, dx, dy, (unsigned char *)mask, n,
                       (int)(set & 1u));
}

/* The tanh-approximation's argument u(x) = sqrt(2/pi) (x + 0.044715 x^3). */
static float gelu_u(float x)
{
    return RT_SQRT_2_OVER_PI * (x + RT_GELU_CUBIC * x * x * x);
}

/* Phi(x) = erfc(-x/sqrt2)/2, the standard normal CDF, and *g =
 * e^(-x^2/2), which the derivative's density needs too: one exp for both.
 * erfc(a) for a >= 0 is e^(-a^2) erfcx(a), and erfcx(a) = t R(t) with
 * t = 1/(1 + a/2) in (0, 1] and R a degree-10 polynomial fitted to it in
 * relative error (under 1.1e-8 over every a; fitted for this runtime by
 * weighted least squares on Chebyshev nodes), so Phi keeps its relative
 * accuracy where it is tiny (x << 0); erfc(-a) is 2 - erfc(a). The error
 * left is the float rounding of a^2 in the exponent, as in any
 * exp(-a^2) form. Branch-free, so the Gelu loops vectorize. */
static inline float phi_g(float x, float *g)
{
    const float z = -x * RT_INV_SQRT2, a = z < 0.0f ? -z : z;
    const float t = 1.0f / (1.0f + 0.5f * a);
    const float ex = rt_exp_v(-(a * a));
    float p = 0.0423682885f, e, neg;
    p = p * t - 0.230934807f;
    p = p * t + 0.486340408f;
    p = p * t - 0.447165427f;
    p = p * t + 0.127222511f;
    p = p * t - 0.0572914055f;
    p = p * t + 0.0930167751f;
    p = p * t + 0.175374188f;
    p = p * t + 0.24688082f;
    p = p * t + 0.282093843f;
    p = p * t + 0.282094795f;
    e = p * t * ex;
    neg = (float)(z < 0.0f);
    *g = ex;
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
    for (i = lo; i < hi; i++) {
        float g;
        y[i] = x[i] * phi_g(x[i], &g);
    }
}

/* Exact Gelu's dy/dx, Phi(x) + x phi(x), and *y = x Phi(x), the
 * forward's expression, from one Phi and density. */
static inline float gelu_exact_remake1(float x, float *y)
{
    float g;
    const float phi = phi_g(x, &g);
    *y = x * phi;
    return phi + x * RT_INV_SQRT_2PI * g;
}

static inline float gelu_exact_grad1(float x)
{
    float y;    /* unused: the store goes once inlined */
    return gelu_exact_remake1(x, &y);
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

/* The backward that also writes the forward's y (a recompute the schedule
 * folded into it): exact Gelu's y and dx share Phi(x) and its density,
 * one exp for both, where a recompute and a backward apart take two. Each
 * y[i] is the expression gelu_fwd_part computes, so the same bits. Four
 * loops, no branch in any, so each vectorizes. */
static void gelu_back_remake_part(void *ctx, size_t lo, size_t hi)
{
    const pw_job *p = ctx;
    float *dx = p->out, *y = p->remade;
    const float *dy = p->a, *x = p->b;
    size_t i;
    if (p->flag && p->set)
        for (i = lo; i < hi; i++) {
            y[i] = gelu_tanh1(x[i]);
            dx[i] = dy[i] * gelu_tanh_grad1(x[i]);
        }
    else if (p->flag)
        for (i = lo; i < hi; i++) {
            y[i] = gelu_tanh1(x[i]);
            dx[i] += dy[i] * gelu_tanh_grad1(x[i]);
        }
    else if (p->set)
        for (i = lo; i < hi; i++)
            dx[i] = dy[i] * gelu_exact_remake1(x[i], &y[i]);
    else
        for (i = lo; i < hi; i++)
            dx[i] += dy[i] * gelu_exact_remake1(x[i], &y[i]);
}

void rt_gelu_backward_remake(float *dx, float *y, const float *dy,
                             const float *x, int n, int approximate,
                             unsigned set)
{
    pw_job job = pw_make(dx, dy, x, approximate, (int)(set & 1u));
    job.remade = y;
    pw_run(gelu_back_remake_part, &job, n, RT_PAR_COSTLY);
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

/* tanh(x) by the runtime's own arithmetic, so that its bits are the same
 * wherever it runs: glibc's and newlib's tanhf differ in the last bit on
 * some inputs (over 2^21 points of [-10, 10] their results' hashes
 * differ), which put mlp_tiny's fifth fused AdamW step an ulp apart on the
 * Cortex-M4. |x| < 0.55: x + x^3 Q(x^2), Q of degree 4 fitted for this
 * runtime to a relative error under 1.1e-9 (weighted least squares on
 * Chebyshev nodes); beyond, (1 - e) / (1 + e) with e = e^(-2|x|) from
 * rt_exp_v (at most 1/3 there, so no cancellation), the sign put back.
 * Both are computed and one selected: no branch, so the loop vectorizes. */
static inline float tanh_v(float x)
{
    const float a = x < 0.0f ? -x : x, s = x * x;
    const float e = rt_exp_v(-2.0f * a);
    float q = -0.00627422996f, big;
    q = q * s + 0.0210716717f;
    q = q * s - 0.0538523079f;
    q = q * s + 0.133325861f;
    q = q * s - 0.333333176f;
    big = (1.0f - e) / (1.0f + e);
    big = x < 0.0f ? -big : big;
    return a == 0.0f ? x : a < 0.55f ? x + x * s * q : big;   /* -0 kept */
}

void rt_tanh_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = tanh_v(x[i]);
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

/* ---- torch.nn's activations, as ONNX defines them -------------------------- */

/* At a kink each backward takes the one-sided slope torch's autograd takes,
 * so that a gradient compared with torch's agrees even there (remat_rt.h
 * says which side). */

void rt_leaky_relu_forward(float *y, const float *x, int n, float alpha)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
}

void rt_leaky_relu_backward(float *dx, const float *dy, const float *x, int n,
                            float alpha)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += x[i] > 0.0f ? dy[i] : alpha * dy[i];
}

/* Bit i of mask (byte i / 8, bit i % 8) set: the branch the backward
 * takes for element i (x > 0 for LeakyRelu, lo <= x <= hi for Clip), so
 * that a backward from it adds what the one from x adds. */
static void set_bit(unsigned char *mask, int i, int on)
{
    if (i % 8 == 0)
        mask[i / 8] = 0;
    mask[i / 8] = (unsigned char)(mask[i / 8] | (unsigned)(on != 0) << (i % 8));
}

static int get_bit(const unsigned char *mask, int i)
{
    return mask[i / 8] >> (i % 8) & 1;
}

void rt_leaky_relu_forward_mask(float *y, unsigned char *mask, const float *x,
                                int n, float alpha)
{
    int i;
    for (i = 0; i < n; i++) {
        const int pos = x[i] > 0.0f;
        y[i] = pos ? x[i] : alpha * x[i];
        set_bit(mask, i, pos);
    }
}

void rt_leaky_relu_backward_mask(float *dx, const float *dy,
                                 const unsigned char *mask, int n, float alpha)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += get_bit(mask, i) ? dy[i] : alpha * dy[i];
}

/* x * min(max(x/6 + 1/2, 0), 1): ONNX's alpha = 1/6, beta = 1/2, written as
 * (x + 3)/6 so that the slope term below is exact where it is 0 or 1. */
void rt_hard_swish_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        const float t = x[i] + 3.0f;
        y[i] = t <= 0.0f ? 0.0f : t >= 6.0f ? x[i] : x[i] * t / 6.0f;
    }
}

void rt_hard_swish_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += x[i] < -3.0f ? 0.0f
                 : x[i] <= 3.0f ? dy[i] * (x[i] / 3.0f + 0.5f) : dy[i];
}

void rt_hard_sigmoid_forward(float *y, const float *x, int n, float alpha,
                             float beta)
{
    int i;
    for (i = 0; i < n; i++) {
        const float z = alpha * x[i] + beta;
        y[i] = z < 0.0f ? 0.0f : z > 1.0f ? 1.0f : z;
    }
}

void rt_hard_sigmoid_forward_mask(float *y, unsigned char *mask,
                                  const float *x, int n, float alpha,
                                  float beta)
{
    int i;
    for (i = 0; i < n; i++) {
        const float z = alpha * x[i] + beta;
        y[i] = z < 0.0f ? 0.0f : z > 1.0f ? 1.0f : z;
        set_bit(mask, i, y[i] > 0.0f && y[i] < 1.0f);
    }
}

void rt_hard_sigmoid_backward_mask(float *dx, const float *dy,
                                   const unsigned char *mask, int n,
                                   float alpha)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        if (get_bit(mask, i))
            dx[i] += alpha * dy[i];
}

void rt_hard_sigmoid_backward(float *dx, const float *dy, const float *y,
                              int n, float alpha)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        if (y[i] > 0.0f && y[i] < 1.0f)
            dx[i] += alpha * dy[i];
}

void rt_clip_forward(float *y, const float *x, int n, float lo, float hi)
{
    int i;
    for (i = 0; i < n; i++) {
        const float v = x[i] < lo ? lo : x[i];
        y[i] = v > hi ? hi : v;
    }
}

void rt_clip_backward(float *dx, const float *dy, const float *x, int n,
                      float lo, float hi)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        if (x[i] >= lo && x[i] <= hi)
            dx[i] += dy[i];
}

void rt_clip_forward_mask(float *y, unsigned char *mask, const float *x,
                          int n, float lo, float hi)
{
    int i;
    for (i = 0; i < n; i++) {
        const float v = x[i] < lo ? lo : x[i];
        set_bit(mask, i, x[i] >= lo && x[i] <= hi);
        y[i] = v > hi ? hi : v;
    }
}

void rt_clip_backward_mask(float *dx, const float *dy,
                           const unsigned char *mask, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        if (get_bit(mask, i))
            dx[i] += dy[i];
}

/* alpha (e^x - 1) as alpha * expm1(x): no cancellation near 0 */
void rt_elu_forward(float *y, const float *x, int n, float alpha)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : alpha * expm1f(x[i]);
}

void rt_elu_backward(float *dx, const float *dy, const float *x, int n,
                     float alpha)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += x[i] > 0.0f ? dy[i] : dy[i] * alpha * expf(x[i]);
}

/* ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): e^ never overflows */
void rt_softplus_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        const float a = x[i] < 0.0f ? -x[i] : x[i];
        y[i] = (x[i] > 0.0f ? x[i] : 0.0f) + log1pf(expf(-a));
    }
}

void rt_softplus_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += dy[i] * sigmoid1(x[i]);
}

void rt_abs_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = fabsf(x[i]);
}

void rt_abs_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += x[i] > 0.0f ? dy[i] : x[i] < 0.0f ? -dy[i] : 0.0f;
}

/* gamma alpha (e^x - 1) as gamma alpha expm1(x): no cancellation near 0 */
void rt_selu_forward(float *y, const float *x, int n, float alpha,
                     float gamma)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? gamma * x[i] : gamma * alpha * expm1f(x[i]);
}

void rt_selu_backward(float *dx, const float *dy, const float *x, int n,
                      float alpha, float gamma)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += x[i] > 0.0f ? gamma * dy[i]
                             : dy[i] * gamma * alpha * expf(x[i]);
}

void rt_celu_forward(float *y, const float *x, int n, float alpha)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : alpha * expm1f(x[i] / alpha);
}

void rt_celu_backward(float *dx, const float *dy, const float *x, int n,
                      float alpha)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += x[i] > 0.0f ? dy[i] : dy[i] * expf(x[i] / alpha);
}

/* Sin and Cos (a diffusion model's timestep embedding, rotary position
 * angles computed at run time): f' is the other, read from x. */
void rt_sin_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = sinf(x[i]);
}

void rt_sin_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] += dy[i] * cosf(x[i]);
}

void rt_cos_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = cosf(x[i]);
}

void rt_cos_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++)
        dx[i] -= dy[i] * sinf(x[i]);
}

void rt_softsign_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = x[i] / (1.0f + fabsf(x[i]));
}

void rt_softsign_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++) {
        const float d = 1.0f + fabsf(x[i]);
        dx[i] += dy[i] / (d * d);
    }
}

/* tanh(ln(1 + e^x)) = t / (t + 2) with t = e^x (e^x + 2): no cancellation
 * for x very negative (t ~ 2 e^x); above 20 it is 1 in float, and e^x is
 * never taken where it could overflow. 1 - tanh^2 = 4 (t + 1) / (t + 2)^2,
 * exact where tanh rounds to 1. */
#define MISH_BIG 20.0f

void rt_mish_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        if (x[i] > MISH_BIG) {
            y[i] = x[i];
        } else {
            const float e = expf(x[i]), t = e * (e + 2.0f);
            y[i] = x[i] * (t / (t + 2.0f));
        }
    }
}

void rt_mish_backward(float *dx, const float *dy, const float *x, int n)
{
    int i;
    if (dx == NULL)
        return;
    for (i = 0; i < n; i++) {
        if (x[i] > MISH_BIG) {
            dx[i] += dy[i];
        } else {
            const float e = expf(x[i]), t = e * (e + 2.0f), u = t + 2.0f;
            const float sech2 = 4.0f * (t + 1.0f) / (u * u);
            dx[i] += dy[i] * (t / u + x[i] * sigmoid1(x[i]) * sech2);
        }
    }
}

/* ---- Sign (issue 25) ------------------------------------------------------- */

void rt_sign_forward(float *y, const float *x, int n)
{
    int i;
    for (i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? 1.0f : x[i] < 0.0f ? -1.0f
               : x[i] == 0.0f ? 0.0f : x[i];
}
