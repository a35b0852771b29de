/*
 * dropout.c: the deterministic random numbers (rt_rand_u32,
 * rt_rand_uniform, and the initialisers rt_init_uniform, rt_init_normal,
 * rt_init_int_uniform: a hash of seed, stream and counter, so any element
 * can be drawn alone)
 * and Dropout, whose mask is that hash of each element's index: a thread's
 * chunk, a recompute and the backward draw the same mask, never stored.
 */
#include "rt_impl.h"

/* ---- deterministic random numbers ----------------------------------------- */

#define RT_GOLDEN UINT64_C(0x9e3779b97f4a7c15) /* 2^64 / golden ratio */

/* A 64-bit finaliser (xor-shift / multiply rounds, splitmix64's constants):
 * a bijection in which every input bit affects every output bit. */
static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= UINT64_C(0xbf58476d1ce4e5b9);
    z ^= z >> 27;
    z *= UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return z;
}

/* Absorbs seed, stream and counter one at a time, each pre-mixed and then
 * mixed again with the state. Every step is a bijection of the word being
 * absorbed, so for fixed (seed, stream) distinct counters give distinct
 * 64-bit states; the counter passes through two full mixing rounds. */
uint32_t rt_rand_u32(uint64_t seed, uint64_t stream, uint64_t counter)
{
    uint64_t h = mix64(seed + RT_GOLDEN);
    h = mix64(h ^ mix64(stream + 2 * RT_GOLDEN));
    h = mix64(h ^ mix64(counter + 3 * RT_GOLDEN));
    return (uint32_t)(h >> 32);
}

/* 24 bits is what a float's significand holds, so every value is exact and
 * the result is < 1. */
float rt_rand_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return (float)(rt_rand_u32(seed, stream, counter) >> 8) *
           (1.0f / 16777216.0f);
}

void rt_init_uniform(float *x, size_t n, float low, float high, uint64_t seed,
                     uint64_t stream)
{
    const float span = high - low;
    size_t i;
    for (i = 0; i < n; i++)
        x[i] = low + span * rt_rand_uniform(seed, stream, i);
}

/* Element i uses counters 2i and 2i+1, so it can be regenerated alone.
 * 1 - u lies in [2^-24, 1], so the log is finite; the price is that |z|
 * never exceeds sqrt(2 * 24 ln 2) ~ 5.77, irrelevant for initialisation. */
void rt_init_normal(float *x, size_t n, float mean, float std, uint64_t seed,
                    uint64_t stream)
{
    size_t i;
    for (i = 0; i < n; i++) {
        const uint64_t c = 2 * (uint64_t)i;
        const float u1 = 1.0f - rt_rand_uniform(seed, stream, c);
        const float u2 = rt_rand_uniform(seed, stream, c + 1);
        const float z = sqrtf(-2.0f * logf(u1)) * cosf(RT_TWO_PI * u2);
        x[i] = mean + std * z;
    }
}

/* The span is a double: hi - lo may pass what an int holds. A range wider
 * than 2^32 belongs to an input that every reader takes whole
 * (remat_rt.h), which gets a mask of 0s and 1s. */
void rt_init_int_uniform(const rt_tensor_info *t, int64_t *base,
                         uint64_t seed, uint64_t stream)
{
    const int64_t lo = t->lo > 0 || t->hi <= 0 ? t->lo : 0;
    double span = (double)(t->hi - lo);
    size_t j;
    if (span > 4294967296.0)
        span = 2;
    for (j = 0; j < t->count; j++) {
        int64_t v = lo + (int64_t)(rt_rand_uniform(seed, stream, j) * span);
        base[t->offset + j] = v < t->hi ? v : t->hi - 1;
    }
}

/* Element i's fate; the stream and the threshold are the caller's. */
static int dropout_keeps(uint64_t seed, uint64_t stream, int i, float ratio)
{
    return rt_rand_uniform(seed, stream, (uint64_t)i) >= ratio;
}

/* Element i's mask is a hash of (seed, stream, i): a chunk draws its own
 * elements' exactly as one pass over all of them would. mode: 0 forward
 * (out = x * s or 0), 1 backward (out += dy * s where kept), 2 the mask. */
typedef struct {
    float *out;
    const float *in;
    float ratio, s;
    uint64_t seed, stream;
    int mode;
} dropout_job;

/* One loop per mode, the job's fields in locals: so each loop is a
 * straight hash-and-select the compiler can vectorize. */
static void dropout_part(void *ctx, size_t lo, size_t hi)
{
    const dropout_job *d = ctx;
    float *out = d->out;
    const float *in = d->in;
    const float ratio = d->ratio, s = d->s;
    const uint64_t seed = d->seed, stream = d->stream;
    int i;
    if (d->mode == 0)
        for (i = (int)lo; i < (int)hi; i++)
            out[i] = dropout_keeps(seed, stream, i, ratio) ? in[i] * s : 0.0f;
    else if (d->mode == 2)
        for (i = (int)lo; i < (int)hi; i++)
            out[i] = dropout_keeps(seed, stream, i, ratio) ? 1.0f : 0.0f;
    else /* not += 0 where dropped: that would turn a -0 gradient into +0 */
        for (i = (int)lo; i < (int)hi; i++)
            out[i] = dropout_keeps(seed, stream, i, ratio) ? out[i] + in[i] * s
                                                           : out[i];
}

static void dropout_run(float *out, const float *in, int n, float ratio,
                        uint64_t seed, uint64_t step, uint32_t node, int mode)
{
    dropout_job d;
    d.out = out;
    d.in = in;
    d.ratio = ratio;
    d.s = 1.0f / (1.0f - ratio);
    d.seed = seed;
    d.stream = RT_DROPOUT_STREAM(step, node);
    d.mode = mode;
    if (n > 0)
        rt_parallel_for((size_t)n, 16, (size_t)n, RT_PAR_COSTLY, dropout_part,
                        &d);
}

void rt_dropout_forward(float *y, const float *x, int n, float ratio,
                        uint64_t seed, uint64_t step, uint32_t node)
{
    dropout_run(y, x, n, ratio, seed, step, node, 0);
}

void rt_dropout_backward(float *dx, const float *dy, int n, float ratio,
                         uint64_t seed, uint64_t step, uint32_t node)
{
    rt_dropout_backward_set(dx, dy, n, ratio, seed, step, node, 0);
}

/* Written, the gradient is the forward's own loop on dy: dy * s where
 * kept, 0 where dropped. */
void rt_dropout_backward_set(float *dx, const float *dy, int n, float ratio,
                             uint64_t seed, uint64_t step, uint32_t node,
                             unsigned set)
{
    if (dx != NULL)
        dropout_run(dx, dy, n, ratio, seed, step, node, set & 1u ? 0 : 1);
}

void rt_dropout_mask(float *mask, int n, float ratio, uint64_t seed,
                     uint64_t step, uint32_t node)
{
    dropout_run(mask, NULL, n, ratio, seed, step, node, 2);
}
