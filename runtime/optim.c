/*
 * optim.c: memory helpers (rt_zero, rt_fill, rt_copy, rt_accumulate,
 * rt_scale), the optimizers (rt_sgd, rt_sgd_update, rt_adamw_update,
 * rt_optimizer_update), and gradient clipping (rt_grad_norm_sq,
 * rt_clip_coef). The updates round each step as torch does.
 */
#include "rt_impl.h"

/* ---- memory, optimizer ---------------------------------------------------- */

typedef struct {
    float *dst;
    const float *src;
} copy_job;

static void zero_part(void *ctx, size_t lo, size_t hi)
{
    const copy_job *c = ctx;
    size_t i;
    for (i = lo; i < hi; i++)
        c->dst[i] = 0.0f;
}

static void copy_part(void *ctx, size_t lo, size_t hi)
{
    const copy_job *c = ctx;
    size_t i;
    for (i = lo; i < hi; i++)
        c->dst[i] = c->src[i];
}

/* Memory bound: only buffers well past a core's L2 gain from a second
 * core's bandwidth. */
#define RT_PAR_MEMORY ((size_t)1 << 18)

void rt_zero(float *x, size_t n)
{
    copy_job c;
    c.dst = x;
    c.src = NULL;
    rt_parallel_for(n, 16, n, RT_PAR_MEMORY, zero_part, &c);
}

void rt_fill(float *x, size_t n, float value)
{
    size_t i;
    for (i = 0; i < n; i++)
        x[i] = value;
}

void rt_copy(float *dst, const float *src, size_t n)
{
    copy_job c;
    c.dst = dst;
    c.src = src;
    rt_parallel_for(n, 16, n, RT_PAR_MEMORY, copy_part, &c);
}

void rt_accumulate(float *dst, const float *src, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        dst[i] += src[i];
}

void rt_sgd(float *p, const float *g, size_t n, float lr)
{
    size_t i;
    for (i = 0; i < n; i++)
        p[i] -= lr * g[i];
}

void rt_scale(float *x, size_t n, float s)
{
    size_t i;
    for (i = 0; i < n; i++)
        x[i] *= s;
}

/* Each line is one of torch's tensor operations, rounded to float as it
 * rounds them, so that the two agree to the last bits where they can. */
void rt_sgd_update(float *p, const float *g, float *buf, size_t n, float lr,
                   const rt_sgd_config *c, uint64_t step)
{
    size_t i;
    float mu = (float)c->momentum, damp = (float)(1.0 - c->dampening);
    float wd = (float)c->weight_decay, neg_lr = -lr;
    for (i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0.0f)
            d = d + wd * p[i];
        if (mu != 0.0f) {
            float b = step <= 1 ? d : mu * buf[i] + damp * d;
            buf[i] = b;
            d = c->nesterov ? d + mu * b : b;
        }
        p[i] = p[i] + neg_lr * d;
    }
}

void rt_adamw_update(float *p, const float *g, float *m, float *v, size_t n,
                     float lr, const rt_adamw_config *c, uint64_t step)
{
    size_t i;
    double t = (double)(step ? step : 1);
    /* torch computes these in Python floats (double) */
    double bc1 = 1.0 - pow(c->beta1, t);
    double bc2 = 1.0 - pow(c->beta2, t);
    float neg_step_size = (float)-((double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float decay = (float)(1.0 - (double)lr * c->weight_decay);
    float w1 = (float)(1.0 - c->beta1), b2 = (float)c->beta2;
    float w2 = (float)(1.0 - c->beta2), eps = (float)c->eps;
    for (i = 0; i < n; i++) {
        float gi = g[i], denom;
        if (c->weight_decay != 0.0)
            p[i] = p[i] * decay;
        m[i] = m[i] + w1 * (gi - m[i]);
        v[i] = v[i] * b2 + w2 * gi * gi;
        denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] + neg_step_size * (m[i] / denom);
    }
}

void rt_optimizer_update(const rt_optimizer *o, float *p, const float *g,
                         float *state, size_t second, size_t n)
{
    if (o->kind == RT_OPT_ADAMW)
        rt_adamw_update(p, g, state, state + second, n, o->lr, &o->adamw,
                        o->step);
    else
        rt_sgd_update(p, g, state, n, o->lr, &o->sgd, o->step);
}

double rt_grad_norm_sq(const float *g, size_t n)
{
    double s = 0.0;
    size_t i;
    for (i = 0; i < n; i++)
        s += (double)g[i] * (double)g[i];
    return s;
}

float rt_clip_coef(double norm_sq, float max_norm, float *norm)
{
    float total = (float)sqrt(norm_sq);
    float coef = max_norm / (total + 1e-6f);
    *norm = total;
    return coef < 1.0f ? coef : 1.0f;
}
