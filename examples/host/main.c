/*
 * main.c: an application that trains the model remat_add_model compiled
 * (examples/host/CMakeLists.txt). Every buffer is static, sized by the
 * generated header: the parameters, one batch of inputs, the gradients
 * and the arena remat planned. Each step draws a batch of points x in
 * [-1, 1]^8 and their targets |x|^2 / 8, runs the train step (forward,
 * loss, backward with the recompute inlined) and plain SGD; it prints the
 * loss now and then, and exits 1 unless the loss fell to a fifth.
 */
#include <stdint.h>
#include <stdio.h>

#include "mlp.h"

#define STEPS 600
#define BATCH 16
#define DIM 8

static float params[MLP_PARAM_FLOATS];
static float inputs[MLP_INPUT_FLOATS];
static float outputs[MLP_OUTPUT_FLOATS];
static float grads[MLP_GRAD_FLOATS];
static unsigned char arena[MLP_ARENA_BYTES] __attribute__((aligned(64)));

/* A batch: x where the inputs table puts input 0, the targets input 1. */
static void batch(uint64_t step)
{
    float *x = inputs + mlp_inputs[0].offset;
    float *t = inputs + mlp_inputs[1].offset;
    int i, j;
    rt_init_uniform(x, BATCH * DIM, -1.0f, 1.0f, 7, step);
    for (i = 0; i < BATCH; i++) {
        float s = 0.0f;
        for (j = 0; j < DIM; j++)
            s += x[i * DIM + j] * x[i * DIM + j];
        t[i] = s / 8.0f;
    }
}

int main(void)
{
    float first = 0.0f, loss = 0.0f;
    uint64_t k;
    mlp_init(params, 1);
    for (k = 0; k < STEPS; k++) {
        batch(k);
        loss = mlp_train_step(params, inputs, NULL, outputs, grads, 1, k, arena);
        mlp_sgd(params, grads, 0.1f);
        if (k == 0)
            first = loss;
        if (k % 100 == 0 || k == STEPS - 1)
            printf("step %4lu loss %.6f\n", (unsigned long)k, loss);
    }
    return loss < first / 5.0f ? 0 : 1;
}
