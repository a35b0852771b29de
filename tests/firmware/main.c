/*
 * main.c: the firmware test's program. It does on a bare-metal Cortex-M what
 * `trainer --seed FW_SEED --steps FW_STEPS --bits` does on the host
 * (runtime/trainer.c: init with the seed, float inputs from
 * rt_init_uniform(seed, stream 1000 + i) in [-1, 1), integer inputs from
 * rt_init_int_uniform(seed, stream 2000 + i), then train step k - 1 and
 * SGD at lr 0.01 for k = 1..N), and prints each loss as
 *     step K bits 0xXXXXXXXX
 * and, first, the inference forward's loss on the initial parameters (the
 * trainer's --dump writes it as forward.npy) as
 *     forward bits 0xXXXXXXXX
 * Then, from freshly initialised parameters and zeroed optimizer state, what
 * `trainer --seed FW_SEED --steps FW_ADAMW_STEPS --optimizer adamw
 * --clip-grad-norm FW_CLIP --bits` does: train step k - 1, NAME_clip_grad_norm
 * to FW_CLIP, NAME_adamw_step with torch.optim.AdamW's defaults (lr 0.001,
 * betas 0.9 and 0.999, eps 1e-8, weight decay 0.01; the trainer's defaults)
 * and step k, for k = 1..M, printing
 *     adamw step K bits 0xXXXXXXXX
 * Last, again from fresh parameters and state, what `trainer --seed FW_SEED
 * --steps FW_ADAMW_STEPS --optimizer adamw --fused --bits` does: AdamW
 * inside the backward (NAME_train_step_fused, no gradient buffer, an arena
 * of NAME_FUSED_ARENA_BYTES), printing
 *     fused step K bits 0xXXXXXXXX
 * Every buffer is static, sized by the generated header's macros; the
 * forward runs in an arena of NAME_FORWARD_ARENA_BYTES only.
 *
 * With -DFW_FUSED_ONLY the program does the forward and the fused run
 * alone, and has neither the gradient buffer nor the train step's arena:
 * the RAM an application that trains with the fused step needs (the test
 * compares the two images' sizes).
 *
 * Built with -DFW_UPPER=NAME_IN_CAPITALS -DFW_LOWER=name for the generated
 * model.h (remat compile ... -o model.c).
 */
#include <stdint.h>
#include <string.h>

#include "fw.h"
#include "model.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define UP(x) CAT(FW_UPPER, x)
#define LOW(x) CAT(FW_LOWER, x)

#ifndef FW_SEED
#define FW_SEED 3
#endif
#ifndef FW_STEPS
#define FW_STEPS 5
#endif
#ifndef FW_ADAMW_STEPS
#define FW_ADAMW_STEPS 5
#endif
#ifndef FW_CLIP
#define FW_CLIP 0.1   /* --clip-grad-norm's value, rounded to float as there */
#endif

/* +1: C has no zero-length arrays, and a model may have no output or no
 * integer input. */
static float params[UP(_PARAM_FLOATS) + 1];
static float inputs[UP(_INPUT_FLOATS) + 1];
static float outputs[UP(_OUTPUT_FLOATS) + 1];
static int64_t ints[UP(_INT_INPUT_COUNT) + 1];
static float adamw_state[UP(_ADAMW_STATE_FLOATS) + 1];
#ifdef FW_FUSED_ONLY
/* one arena for the forward and the fused step, the larger of the two */
#define FW_ARENA_BYTES (UP(_FUSED_ARENA_BYTES) > UP(_FORWARD_ARENA_BYTES) \
                        ? UP(_FUSED_ARENA_BYTES) : UP(_FORWARD_ARENA_BYTES))
static unsigned char arena[FW_ARENA_BYTES] __attribute__((aligned(64)));
#define forward_arena arena
#define fused_arena arena
#else
static float grads[UP(_GRAD_FLOATS) + 1];
static unsigned char arena[UP(_ARENA_BYTES)] __attribute__((aligned(64)));
static unsigned char forward_arena[UP(_FORWARD_ARENA_BYTES)]
    __attribute__((aligned(64)));
static unsigned char fused_arena[UP(_FUSED_ARENA_BYTES)]
    __attribute__((aligned(64)));
#endif

/* "LABEL bits 0xXXXXXXXX\n" */
static void print_bits(const char *label, float v)
{
    static const char hex[] = "0123456789abcdef";
    char line[64];
    size_t n = strlen(label);
    uint32_t u;
    int i;
    memcpy(&u, &v, sizeof u);
    memcpy(line, label, n);
    memcpy(line + n, " bits 0x", 8);
    n += 8;
    for (i = 7; i >= 0; i--)
        line[n++] = hex[(u >> (4 * i)) & 0xF];
    line[n++] = '\n';
    line[n] = '\0';
    fw_puts(line);
}

/* "PREFIXstep K bits 0x..." */
static void print_step(const char *prefix, long k, float loss)
{
    char label[48];
    char digits[24];
    size_t len = strlen(prefix);
    int n = 0;
    memcpy(label, prefix, len);
    memcpy(label + len, "step ", 5);
    len += 5;
    do {
        digits[n++] = (char)('0' + k % 10);
        k /= 10;
    } while (k > 0);
    while (n > 0)
        label[len++] = digits[--n];
    label[len] = '\0';
    print_bits(label, loss);
}

int main(void)
{
    const rt_model *m = &LOW(_model);
    const uint64_t seed = FW_SEED;
    /* torch.optim.AdamW's defaults, which the trainer's --optimizer adamw
     * takes too (lr 0.001 without --lr) */
    const float adamw_lr = 0.001f;
    const rt_adamw_config adamw = {
        .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
    rt_optimizer opt;
    long k;
    int i;

    m->init(params, seed);
    for (i = 0; i < m->n_inputs; i++)
        rt_init_uniform(inputs + m->inputs[i].offset, m->inputs[i].count,
                        -1.0f, 1.0f, seed, 1000 + (uint64_t)i);
    for (i = 0; i < m->n_int_inputs; i++)
        rt_init_int_uniform(&m->int_inputs[i], ints, seed, 2000 + (uint64_t)i);

    print_bits("forward", m->forward(params, inputs, ints, NULL,
                                     forward_arena));
#ifndef FW_FUSED_ONLY
    const float lr = 0.01f;
    const float clip = (float)FW_CLIP;
    for (k = 1; k <= FW_STEPS; k++) {
        float loss = m->train_step(params, inputs, ints, outputs, grads, seed,
                                   (uint64_t)(k - 1), arena);
        print_step("", k, loss);
        m->sgd(params, grads, lr);
    }

    /* AdamW as a new trainer run: the same initial parameters and batch
     * (the train step does not write the inputs), the state zeroed, the
     * gradient clipped before the update, the update counted from 1 */
    m->init(params, seed);
    memset(adamw_state, 0, sizeof adamw_state);
    for (k = 1; k <= FW_ADAMW_STEPS; k++) {
        float loss = m->train_step(params, inputs, ints, outputs, grads, seed,
                                   (uint64_t)(k - 1), arena);
        print_step("adamw ", k, loss);
        m->clip_grad_norm(grads, clip);
        m->adamw_step(params, grads, adamw_state, adamw_lr, &adamw,
                      (uint64_t)k);
    }
#endif

    /* AdamW inside the backward, as a new run again (no clipping: that
     * needs every gradient at once) */
    m->init(params, seed);
    memset(adamw_state, 0, sizeof adamw_state);
    memset(&opt, 0, sizeof opt);
    opt.kind = RT_OPT_ADAMW;
    opt.lr = adamw_lr;
    opt.adamw = adamw;
    for (k = 1; k <= FW_ADAMW_STEPS; k++) {
        float loss;
        opt.step = (uint64_t)k;
        loss = m->train_step_fused(params, inputs, ints, outputs, adamw_state,
                                   &opt, seed, (uint64_t)(k - 1), fused_arena);
        print_step("fused ", k, loss);
    }
    return 0;
}
