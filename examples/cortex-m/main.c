/*
 * main.c: firmware that trains the model remat_add_model compiled
 * (CMakeLists.txt) and prints each step's loss through semihosting
 * (startup.c; qemu -semihosting shows it). Every buffer is static, sized
 * by the generated header (the arena 64-byte aligned): nothing allocates,
 * and the linker says when the RAM is too small.
 *
 * The parameters and the batch are drawn from SEED as the host trainer
 * draws them (`trainer --seed 3 --steps 5`: each float input uniform in
 * [-1, 1) from stream 1000 + i; an int64 input would come from
 * rt_init_int_uniform, stream 2000 + i), so the losses can be checked
 * against the host's bit for bit. An application fills inputs with its own
 * data instead, at the offsets mlp_tiny_inputs[] gives.
 */
#include <stdint.h>
#include <string.h>

#include "fw.h"
#include "mlp_tiny.h"

#define SEED 3
#define STEPS 5
#define LR 0.01f   /* plain SGD at the trainer's default rate */

static float params[MLP_TINY_PARAM_FLOATS];
static float inputs[MLP_TINY_INPUT_FLOATS];
static float grads[MLP_TINY_GRAD_FLOATS];
static unsigned char arena[MLP_TINY_ARENA_BYTES] __attribute__((aligned(64)));

/* v in decimal at s, at least `digits` of them; returns the end */
static char *put_uint(char *s, uint32_t v, int digits)
{
    char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 || n < digits);
    while (n > 0)
        *s++ = tmp[--n];
    return s;
}

/* "step K loss 0.692975 bits 0x3f3166ce": the decimals for people (a
 * loss in [0, 4294); outside it, or NaN, the decimals read 4294.967295),
 * the float's bits for an exact comparison. Not printf: its %f would pull
 * newlib's float formatting, and its heap, into the image. */
static void print_loss(int k, float loss)
{
    static const char hex[] = "0123456789abcdef";
    char line[64] = "step ", *s;
    int shown = loss >= 0.0f && loss < 4294.0f;   /* false for NaN too */
    uint32_t bits, micro = shown ? (uint32_t)(loss * 1e6f + 0.5f) : 0xffffffffu;
    int i;
    memcpy(&bits, &loss, sizeof bits);
    s = put_uint(line + 5, (uint32_t)k, 1);
    memcpy(s, " loss ", 6);
    s = put_uint(s + 6, micro / 1000000, 1);
    *s++ = '.';
    s = put_uint(s, micro % 1000000, 6);
    memcpy(s, " bits 0x", 8);
    s += 8;
    for (i = 7; i >= 0; i--)
        *s++ = hex[(bits >> (4 * i)) & 0xF];
    memcpy(s, "\n", 2);
    fw_puts(line);
}

int main(void)
{
    int i, k;
    mlp_tiny_init(params, SEED);
    for (i = 0; i < MLP_TINY_N_INPUTS; i++)
        rt_init_uniform(inputs + mlp_tiny_inputs[i].offset,
                        mlp_tiny_inputs[i].count, -1.0f, 1.0f, SEED,
                        1000 + (uint64_t)i);
    for (k = 1; k <= STEPS; k++) {
        /* forward, loss and backward, the recomputes inlined; no int64
         * inputs, and the outputs not wanted */
        float loss = mlp_tiny_train_step(params, inputs, NULL, NULL, grads,
                                         SEED, (uint64_t)(k - 1), arena);
        mlp_tiny_sgd(params, grads, LR);
        print_loss(k, loss);
    }
    return 0;
}
