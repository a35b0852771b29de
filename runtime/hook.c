/*
 * hook.c: the gradient hook. rt_grad_ready gathers the ranges of
 * gradients the backward has finished into buckets and hands each full
 * one to the caller's callback (an all-reduce: runtime/trainer_mpi.c);
 * rt_grad_flush hands over the rest.
 */
#include "rt_impl.h"

/* ---- the gradient hook ------------------------------------------------------ */

/* Drops waiting range i, keeping the others in arrival order. */
static void hook_remove(rt_grad_hook *h, int i)
{
    int k;
    for (k = i; k + 1 < h->n; k++) {
        h->lo[k] = h->lo[k + 1];
        h->hi[k] = h->hi[k + 1];
    }
    h->n--;
}

/* Hands waiting range i to the hook. */
static void hook_send(rt_grad_hook *h, float *grads, int i)
{
    size_t lo = h->lo[i], hi = h->hi[i];
    hook_remove(h, i);
    h->bucket(h->ctx, grads, lo, hi - lo);
}

/* The waiting range that [lo, hi) touches, or -1. */
static int hook_touching(const rt_grad_hook *h, size_t lo, size_t hi, int skip)
{
    int i;
    for (i = 0; i < h->n; i++)
        if (i != skip && (h->hi[i] == lo || h->lo[i] == hi))
            return i;
    return -1;
}

void rt_grad_flush(rt_grad_hook *h, float *grads)
{
    while (h && h->n > 0)
        hook_send(h, grads, 0);
}

/* The backward finishes parameters roughly in the reverse of their buffer
 * order, a weight before its bias after it: ranges meet from both sides, so
 * a few wait to be merged rather than going out one parameter at a time. */
void rt_grad_ready(rt_grad_hook *h, float *grads, size_t offset, size_t count)
{
    int i, j;
    if (!h)
        return;
    if (h->progress)
        h->progress(h->ctx);
    i = hook_touching(h, offset, offset + count, -1);
    if (i < 0) {
        if (h->n == RT_HOOK_RANGES)
            hook_send(h, grads, 0);
        i = h->n++;
        h->lo[i] = offset;
        h->hi[i] = offset + count;
    } else if (h->hi[i] == offset) {
        h->hi[i] = offset + count;
    } else {
        h->lo[i] = offset;
    }
    j = hook_touching(h, h->lo[i], h->hi[i], i);
    if (j >= 0) {   /* the new range bridged two */
        if (h->lo[j] < h->lo[i])
            h->lo[i] = h->lo[j];
        else
            h->hi[i] = h->hi[j];
        hook_remove(h, j);
        if (j < i)
            i--;
    }
    if (h->hi[i] - h->lo[i] >= h->bucket_floats)
        hook_send(h, grads, i);
}
