/*
 * toy_model.c: a hand-written stand-in for a generated model, to test
 * runtime/trainer.c before the compiler exists.
 *
 *   input  x          (4 x 3)
 *   param  fc/W       (3 x 2), trainable, init uniform [-1, 1) (stream 0)
 *   param  loss_scale scalar,  not trainable, init 1
 *   output y = x W    (4 x 2)
 *   loss   = loss_scale * mean(y^2)
 *
 * The parameter table lists loss_scale first (offset 0) so that fc/W sits at
 * a nonzero offset in the parameters and at 0 in the gradients (which hold
 * the trainable parameters only), and fc/W's '/' exercises the %2F
 * file-name escape.
 */
#include "remat_rt.h"

#define M 4
#define K 3
#define N 2

#define OFF_SCALE 0
#define OFF_W 1
#define GRAD_W 0        /* fc/W's place in the gradient buffer */

static const rt_tensor_info toy_params[] = {
    {"loss_scale", OFF_SCALE, 1, 0, {0}, 0, 0, 0, 0, 0, 0, 0},
    {"fc/W", OFF_W, K * N, 2, {K, N}, 1, 0, 0, GRAD_W, 0, 0, 0},
};
static const rt_tensor_info toy_inputs[] = {
    {"x", 0, M * K, 2, {M, K}, 0, 0, 0, 0, 0, 0, 0},
};
static const rt_tensor_info toy_outputs[] = {
    {"y", 0, M * N, 2, {M, N}, 0, 0, 0, 0, 0, 0, 0},
};

static void toy_init(float *params, uint64_t seed)
{
    params[OFF_SCALE] = 1.0f;
    rt_init_uniform(params + OFF_W, K * N, -1.0f, 1.0f, seed, 0);
}

/* y = x W into the arena; returns the loss */
static float toy_fwd(const float *params, const float *inputs, float *y)
{
    const float *w = params + OFF_W;
    const float *x = inputs;
    float sum = 0.0f;
    int i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            float acc = 0.0f;
            for (k = 0; k < K; k++)
                acc += x[i * K + k] * w[k * N + j];
            y[i * N + j] = acc;
            sum += acc * acc;
        }
    return params[OFF_SCALE] * sum / (float)(M * N);
}

static float toy_forward(const float *params, const float *inputs,
                         const int64_t *ints, float *outputs, void *arena)
{
    float *y = arena;
    float loss = toy_fwd(params, inputs, y);
    int i;
    (void)ints;
    if (outputs)
        for (i = 0; i < M * N; i++)
            outputs[i] = y[i];
    return loss;
}

/* add 0 overwrites grads, 1 adds into them (accumulation) */
static float toy_step(float *params, const float *inputs, const int64_t *ints,
                      float *outputs, float *grads, void *arena, int add)
{
    float *y = arena;
    const float *x = inputs;
    float loss = toy_forward(params, inputs, ints, outputs, arena);
    float c = 2.0f * params[OFF_SCALE] / (float)(M * N);
    float *dw = grads + GRAD_W;
    int i, j, k;
    /* dW = c * x^T y */
    for (k = 0; k < K; k++)
        for (j = 0; j < N; j++) {
            float acc = 0.0f;
            for (i = 0; i < M; i++)
                acc += x[i * K + k] * y[i * N + j];
            dw[k * N + j] = (add ? dw[k * N + j] : 0.0f) + c * acc;
        }
    return loss;
}

static float toy_train_step(float *params, const float *inputs,
                            const int64_t *ints, float *outputs, float *grads,
                            uint64_t seed, uint64_t step, void *arena)
{
    (void)seed;
    (void)step;
    return toy_step(params, inputs, ints, outputs, grads, arena, 0);
}

static float toy_train_step_acc(float *params, const float *inputs,
                                const int64_t *ints, float *outputs,
                                float *grads, uint64_t seed, uint64_t step,
                                void *arena)
{
    (void)seed;
    (void)step;
    return toy_step(params, inputs, ints, outputs, grads, arena, 1);
}

static void toy_sgd(float *params, const float *grads, float lr)
{
    int i;
    for (i = 0; i < K * N; i++)
        params[OFF_W + i] -= lr * grads[GRAD_W + i];
}

/* the optimizers' state covers fc/W alone, the one trainable parameter */
static void toy_sgd_step(float *params, const float *grads, float *state,
                         float lr, const rt_sgd_config *c, uint64_t step)
{
    rt_sgd_update(params + OFF_W, grads + GRAD_W, state + GRAD_W, K * N, lr,
                  c, step);
}

static void toy_adamw_step(float *params, const float *grads, float *state,
                           float lr, const rt_adamw_config *c, uint64_t step)
{
    rt_adamw_update(params + OFF_W, grads + GRAD_W, state + GRAD_W,
                    state + K * N + GRAD_W, K * N, lr, c, step);
}

static float toy_clip_grad_norm(float *grads, float max_norm)
{
    float norm;
    float coef = rt_clip_coef(rt_grad_norm_sq(grads + GRAD_W, K * N),
                              max_norm, &norm);
    if (coef < 1.0f)
        rt_scale(grads + GRAD_W, K * N, coef);
    return norm;
}

/* fc/W's gradient, the only one, is final when the step ends */
static float toy_train_step_hooked(float *params, const float *inputs,
                                   const int64_t *ints, float *outputs,
                                   float *grads, uint64_t seed, uint64_t step,
                                   void *arena, int accumulate,
                                   rt_grad_hook *hook)
{
    float loss;
    (void)seed;
    (void)step;
    loss = toy_step(params, inputs, ints, outputs, grads, arena, accumulate);
    rt_grad_ready(hook, grads, GRAD_W, K * N);
    rt_grad_flush(hook, grads);
    return loss;
}

/* the gradient in the arena after y, then fc/W's update */
static float toy_train_step_fused(float *params, const float *inputs,
                                  const int64_t *ints, float *outputs,
                                  float *state, const rt_optimizer *opt,
                                  uint64_t seed, uint64_t step, void *arena)
{
    float *grads = (float *)arena + M * N;
    float loss;
    (void)seed;
    (void)step;
    loss = toy_step(params, inputs, ints, outputs, grads, arena, 0);
    rt_optimizer_update(opt, params + OFF_W, grads + GRAD_W, state + GRAD_W,
                        K * N, K * N);
    return loss;
}

const rt_model toy_model = {
    "toy",
    "hand-written",
    M * N * sizeof(float),
    1 + K * N,
    M * K,
    0,
    M * N,
    2, 1, 0, 1, 0,
    toy_params, toy_inputs, NULL, toy_outputs,
    NULL,
    toy_init,
    toy_forward,
    toy_train_step,
    toy_sgd,
    NULL,           /* initial values in the code */
    toy_train_step_acc,
    K * N,          /* SGD: the momentum buffer */
    2 * K * N,      /* AdamW: exp_avg, then exp_avg_sq */
    toy_sgd_step,
    toy_adamw_step,
    toy_clip_grad_norm,
    K * N,          /* gradients: fc/W alone */
    toy_train_step_fused,
    (M * N + K * N) * sizeof(float),   /* y, then fc/W's gradient */
    M * N * sizeof(float),             /* the forward: y */
    toy_train_step_hooked,
    0, 0, NULL, NULL,   /* nothing frozen compiled in */
};

/* the shim that a generated build links beside trainer.c */
const rt_model *const rt_trainer_model = &toy_model;
