/*
 * tiny.c: the program of the MLPerf Tiny firmware runs
 * (tests/e2e/test_tiny.sh). It does on a bare-metal Cortex-M4 with 256 KB
 * of RAM what `trainer --seed FW_SEED --steps FW_STEPS --bits` does on the
 * host, plain SGD at the trainer's lr 0.01 (runtime/trainer.c: init, which
 * copies an ONNX model's initial values from the C file, float inputs from
 * rt_init_uniform(seed, stream 1000 + i), integer inputs from
 * rt_init_int_uniform(seed, stream 2000 + i), then train step k - 1 and
 * the update, k = 1..N), and prints each loss as
 *     step K bits 0xXXXXXXXX
 * With -DFW_FUSED the update runs inside the backward, as `--fused` does:
 * no gradient buffer, an arena of NAME_FUSED_ARENA_BYTES. With
 * -DFW_WEIGHTS the parameters the C file does not hold (past 262,144
 * initial values remat writes NAME.weights) come from fw_weights, the
 * image linked into flash (the test assembles it with .incbin).
 *
 * Only what one training step needs is in RAM: the parameters, the
 * inputs, the outputs, the arena, the gradients when unfused (no SGD
 * state: plain SGD reads none, and the step takes NULL), and the stack.
 * Last it prints the most the stack held,
 *     stack N bytes
 * and fails when it reached the bottom of its section (the linker script
 * reserves it; a Cortex-M4 without an MPU would not fault).
 *
 * Built with -DFW_UPPER=NAME_IN_CAPITALS -DFW_LOWER=name for model.h.
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

/* +1: C has no zero-length arrays (no output, no integer input, no
 * gradient) */
static float params[UP(_PARAM_FLOATS) + 1];
static float inputs[UP(_INPUT_FLOATS) + 1];
static float outputs[UP(_OUTPUT_FLOATS) + 1];
static int64_t ints[UP(_INT_INPUT_COUNT) + 1];
#ifdef FW_FUSED
static unsigned char arena[UP(_FUSED_ARENA_BYTES)] __attribute__((aligned(64)));
#else
static float grads[UP(_GRAD_FLOATS) + 1];
static unsigned char arena[UP(_ARENA_BYTES)] __attribute__((aligned(64)));
#endif
#ifdef FW_WEIGHTS
extern const float fw_weights[];
#endif

extern uint32_t __stack_bottom[], __stack_top[];
#define STACK_PAINT 0x5AC3A55Cu

/* Fills the stack below the caller's frame with a pattern, so that the
 * end can tell whether anything reached the bottom. */
static void paint_stack(void)
{
    volatile uint32_t *p = __stack_bottom;
    uint32_t here;
    while ((uintptr_t)p + 256 < (uintptr_t)&here)
        *p++ = STACK_PAINT;
}

/* k in decimal at line + n; returns the new length */
static size_t put_decimal(char *line, size_t n, unsigned long k)
{
    char digits[24];
    int d = 0;
    do {
        digits[d++] = (char)('0' + k % 10);
        k /= 10;
    } while (k > 0);
    while (d > 0)
        line[n++] = digits[--d];
    return n;
}

/* Prints "stack N bytes", the most the stack held (the painted words
 * overwritten); fails when it reached the bottom of its section. */
static int check_stack(void)
{
    const uint32_t *p = __stack_bottom;
    char line[48] = "stack ";
    size_t n;
    uint32_t here;
    while ((uintptr_t)p < (uintptr_t)&here && *p == STACK_PAINT)
        p++;
    n = put_decimal(line, 6, (unsigned long)((uintptr_t)__stack_top -
                                             (uintptr_t)p));
    memcpy(line + n, " bytes\n", 8);
    fw_puts(line);
    if (p == __stack_bottom) {
        fw_puts("firmware: the stack overflowed its section\n");
        return 1;
    }
    return 0;
}

/* "step K bits 0xXXXXXXXX\n" */
static void print_step(long k, float v)
{
    static const char hex[] = "0123456789abcdef";
    char line[48] = "step ";
    size_t n = put_decimal(line, 5, (unsigned long)k);
    int i;
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    memcpy(line + n, " bits 0x", 8);
    n += 8;
    for (i = 7; i >= 0; i--)
        line[n++] = hex[(u >> (4 * i)) & 0xF];
    line[n++] = '\n';
    line[n] = '\0';
    fw_puts(line);
}

static float step(const rt_model *m, long k)
{
    const float lr = 0.01f;    /* the trainer's default for SGD */
#ifdef FW_FUSED
    rt_optimizer opt;
    memset(&opt, 0, sizeof opt);   /* torch.optim.SGD: no momentum */
    opt.kind = RT_OPT_SGD;
    opt.lr = lr;
    opt.step = (uint64_t)k;
    /* plain SGD keeps no state: NULL, as ram_bytes counts none */
    return m->train_step_fused(params, inputs, ints, outputs, NULL, &opt,
                               FW_SEED, (uint64_t)(k - 1), arena);
#else
    float loss = m->train_step(params, inputs, ints, outputs, grads, FW_SEED,
                               (uint64_t)(k - 1), arena);
    m->sgd(params, grads, lr);
    return loss;
#endif
}

int main(void)
{
    const rt_model *m = &LOW(_model);
    long k;
    int i;

    paint_stack();
    m->init(params, FW_SEED);
#ifdef FW_WEIGHTS
    m->load_weights(params, fw_weights);
#endif
    for (i = 0; i < m->n_inputs; i++)
        rt_init_uniform(inputs + m->inputs[i].offset, m->inputs[i].count,
                        -1.0f, 1.0f, FW_SEED, 1000 + (uint64_t)i);
    for (i = 0; i < m->n_int_inputs; i++)
        rt_init_int_uniform(&m->int_inputs[i], ints, FW_SEED,
                            2000 + (uint64_t)i);
    for (k = 1; k <= FW_STEPS; k++)
        print_step(k, step(m, k));
    return check_stack();
}
