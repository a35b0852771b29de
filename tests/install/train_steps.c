/*
 * train_steps.c: what an application writes against an installed remat
 * (tests/e2e/test_install.sh): the generated header and `pkg-config
 * --cflags --libs remat-rt`, nothing from the source tree. It trains
 * STEPS steps of plain SGD as `trainer --seed SEED --steps STEPS --bits`
 * does (runtime/trainer.c: init, float inputs from rt_init_uniform(seed,
 * stream 1000 + i), integer inputs from rt_init_int_uniform(seed, stream
 * 2000 + i), then train step k - 1 and the update at the trainer's lr
 * 0.01) and prints each loss as
 *     step K bits 0xXXXXXXXX
 * Built with -DM_UPPER=NAME_IN_CAPITALS -DM_LOWER=name for model.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define UP(x) CAT(M_UPPER, x)
#define LOW(x) CAT(M_LOWER, x)

#define SEED 3
#define STEPS 5

/* +1: C has no zero-length arrays */
static float params[UP(_PARAM_FLOATS) + 1];
static float inputs[UP(_INPUT_FLOATS) + 1];
static float outputs[UP(_OUTPUT_FLOATS) + 1];
static int64_t ints[UP(_INT_INPUT_COUNT) + 1];
static float grads[UP(_GRAD_FLOATS) + 1];
static unsigned char arena[UP(_ARENA_BYTES)] __attribute__((aligned(64)));

int main(void)
{
    const rt_model *m = &LOW(_model);
    long k;
    int i;
    m->init(params, SEED);
    for (i = 0; i < m->n_inputs; i++)
        rt_init_uniform(inputs + m->inputs[i].offset, m->inputs[i].count,
                        -1.0f, 1.0f, SEED, 1000 + (uint64_t)i);
    for (i = 0; i < m->n_int_inputs; i++)
        rt_init_int_uniform(&m->int_inputs[i], ints, SEED, 2000 + (uint64_t)i);
    for (k = 1; k <= STEPS; k++) {
        float loss = m->train_step(params, inputs, ints, outputs, grads, SEED,
                                   (uint64_t)(k - 1), arena);
        uint32_t u;
        m->sgd(params, grads, 0.01f);
        memcpy(&u, &loss, sizeof u);
        printf("step %ld bits 0x%08lx\n", k, (unsigned long)u);
    }
    return 0;
}
