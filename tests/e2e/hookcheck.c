/*
 * hookcheck.c: a generated model's gradient hook (NAME_train_step_hooked,
 * rt_grad_hook) against the plain train step.
 *
 * For several bucket sizes it runs the hooked step with a hook that copies
 * each bucket's floats at the moment it is handed on, and checks:
 *   - every trainable float is handed on exactly once per step;
 *   - what the hook saw is bitwise what the step ends with: each gradient
 *     was final when handed on (a hook placed too early would see a partial
 *     sum);
 *   - the gradients equal NAME_train_step's bitwise, with and without a
 *     hook, and with accumulate 1 equal train_step_acc's;
 *   - buckets hold at least bucket_floats floats, except where the next
 *     range did not join them or at the end;
 *   - a hook that writes its range (the all-reduce's average) changes the
 *     gradients the step leaves by exactly that and nothing else.
 * Prints one line per bucket size (buckets, the share of the floats handed
 * on before the last bucket) and exits 1 on any failure. Links against a
 * generated model through rt_trainer_model, like the trainer.
 */
#define _POSIX_C_SOURCE 200809L
#include "remat_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const rt_model *const rt_trainer_model;

typedef struct {
    float *seen;            /* each float as the hook saw it */
    unsigned char *times;   /* how often each float was handed on */
    size_t calls, small, last_count;
    size_t bucket_floats;
    float scale;            /* the hook multiplies its range by this */
} record;

static void on_bucket(void *ctx, float *grads, size_t offset, size_t count)
{
    record *r = ctx;
    size_t i;
    for (i = 0; i < count; i++) {
        r->times[offset + i]++;
        grads[offset + i] *= r->scale;
        r->seen[offset + i] = grads[offset + i];
    }
    if (count < r->bucket_floats)
        r->small++;
    r->calls++;
    r->last_count = count;
}

static void *zalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "hookcheck: out of memory\n");
        exit(1);
    }
    return p;
}

static int failed;

static void check(int ok, const char *what, size_t bucket)
{
    if (!ok) {
        printf("FAIL bucket_floats %zu: %s\n", bucket, what);
        failed = 1;
    }
}

typedef struct {
    float *params, *inputs, *outputs, *grads;
    int64_t *ints;
    void *arena;
} bufs;

static float step(const rt_model *m, bufs *b, int acc, rt_grad_hook *h)
{
    return m->train_step_hooked(b->params, b->inputs, b->ints, b->outputs,
                                b->grads, 1, 0, b->arena, acc, h);
}

static void one_size(const rt_model *m, bufs *b, const float *ref,
                     size_t bucket, float scale)
{
    size_t n = m->grad_floats, i, once = 1, final = 1, equal = 1;
    record r;
    rt_grad_hook h;
    memset(&r, 0, sizeof r);
    memset(&h, 0, sizeof h);
    r.seen = zalloc(n * sizeof(float));
    r.times = zalloc(n);
    r.bucket_floats = bucket;
    r.scale = scale;
    h.bucket = on_bucket;
    h.ctx = &r;
    h.bucket_floats = bucket;
    step(m, b, 0, &h);
    for (i = 0; i < n; i++) {
        once &= r.times[i] == 1;
        final &= memcmp(&r.seen[i], &b->grads[i], sizeof(float)) == 0;
        equal &= b->grads[i] == ref[i] * scale;
    }
    check(once, "a trainable float was not handed on exactly once", bucket);
    check(final, "a gradient changed after the hook was handed it", bucket);
    check(equal, "the hooked step's gradients differ from train_step's",
          bucket);
    check(h.n == 0, "ranges left waiting after the step", bucket);
    printf("bucket_floats %zu: %zu buckets (%zu below the size), %.3f of "
           "the floats handed on before the last bucket\n", bucket, r.calls,
           r.small, n ? 1.0 - (double)r.last_count / (double)n : 0.0);
    free(r.seen);
    free(r.times);
}

int main(void)
{
    const rt_model *m = rt_trainer_model;
    bufs b;
    float *ref;
    size_t n = m->grad_floats, i, same = 1;
    int k;
    if (!m->train_step_hooked) {
        printf("forward only: no hook\n");
        return 0;
    }
    b.params = zalloc(m->param_floats * sizeof(float));
    b.inputs = zalloc(m->input_floats * sizeof(float));
    b.outputs = zalloc(m->output_floats * sizeof(float));
    b.grads = zalloc(n * sizeof(float));
    b.ints = zalloc(m->int_input_count * sizeof(int64_t));
    b.arena = NULL;
    if (posix_memalign(&b.arena, 64, m->arena_bytes ? m->arena_bytes : 64))
        return 1;
    ref = zalloc(n * sizeof(float));
    m->init(b.params, 1);
    rt_init_uniform(b.inputs, m->input_floats, -1.0f, 1.0f, 1, 1000);
    for (k = 0; k < m->n_int_inputs; k++) {   /* lo: a value every reader takes */
        const rt_tensor_info *t = &m->int_inputs[k];
        for (i = 0; i < t->count; i++)
            b.ints[t->offset + i] = t->lo > 0 ? t->lo : 0;
    }
    m->train_step(b.params, b.inputs, b.ints, b.outputs, ref, 1, 0, b.arena);
    step(m, &b, 0, NULL);
    for (i = 0; i < n; i++)
        same &= memcmp(&b.grads[i], &ref[i], sizeof(float)) == 0;
    check(same, "train_step_hooked without a hook differs from train_step", 0);
    /* accumulate 1: the same sum as train_step_acc's */
    m->train_step_acc(b.params, b.inputs, b.ints, b.outputs, b.grads, 1, 0,
                      b.arena);
    memcpy(ref, b.grads, n * sizeof(float));
    m->train_step(b.params, b.inputs, b.ints, b.outputs, b.grads, 1, 0,
                  b.arena);
    step(m, &b, 1, NULL);
    same = 1;
    for (i = 0; i < n; i++)
        same &= memcmp(&b.grads[i], &ref[i], sizeof(float)) == 0;
    check(same, "train_step_hooked accumulating differs from train_step_acc",
          0);
    m->train_step(b.params, b.inputs, b.ints, b.outputs, ref, 1, 0, b.arena);
    one_size(m, &b, ref, 0, 1.0f);
    one_size(m, &b, ref, 1000, 1.0f);
    one_size(m, &b, ref, 100000, 1.0f);
    one_size(m, &b, ref, n + 1, 1.0f);
    one_size(m, &b, ref, 100000, 0.5f);   /* a hook that averages over 2 */
    free(ref);
    free(b.arena);
    return failed;
}
