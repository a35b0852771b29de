/*
 * test_kernels_hook.c: unit tests of the runtime's gradient hook
 * (rt_grad_hook, rt_grad_ready, rt_grad_flush: the gradient buffer handed
 * out in buckets as a backward finishes it), with Check.
 *
 * A hook that logs its calls is given a buffer laid out by hand (two
 * layers, each a weight then its bias, finished in backward order), and
 * the buckets it gets are checked against the ones worked out by hand for
 * each bucket size; past RT_HOOK_RANGES separate ranges, the oldest must
 * go out early.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

typedef struct {
    size_t off[16], count[16];
    int calls, progress;
} hook_log;

static void log_bucket(void *ctx, float *grads, size_t offset, size_t count)
{
    hook_log *l = ctx;
    (void)grads;
    ck_assert_int_lt(l->calls, 16);
    l->off[l->calls] = offset;
    l->count[l->calls++] = count;
}

static void log_progress(void *ctx)
{
    ((hook_log *)ctx)->progress++;
}

/* A hook that logs its buckets into l, of bucket_floats floats. */
static rt_grad_hook logging_hook(hook_log *l, size_t bucket_floats)
{
    rt_grad_hook h;
    memset(l, 0, sizeof *l);
    memset(&h, 0, sizeof h);
    h.bucket = log_bucket;
    h.ctx = l;
    h.bucket_floats = bucket_floats;
    return h;
}

/* Two layers, each a weight then its bias in the buffer (W1 [0,10), b1
 * [10,12), W2 [12,22), b2 [22,24)), finished as a backward finishes them:
 * W2, b2, W1, b1. Returns the hook's log for this bucket size. */
static hook_log two_layers(size_t bucket_floats)
{
    static const size_t off[] = {12, 22, 0, 10}, count[] = {10, 2, 10, 2};
    hook_log l;
    rt_grad_hook h = logging_hook(&l, bucket_floats);
    float g[24];
    int i;
    h.progress = log_progress;
    for (i = 0; i < 4; i++)
        rt_grad_ready(&h, g, off[i], count[i]);
    rt_grad_flush(&h, g);
    ck_assert_int_eq(h.n, 0);
    ck_assert_int_eq(l.progress, 4);
    return l;
}

START_TEST(grad_hook_buckets)
{
    hook_log l = two_layers(100);   /* b1 bridges the two: one range */
    ck_assert_int_eq(l.calls, 1);
    ck_assert(l.off[0] == 0 && l.count[0] == 24);
    l = two_layers(12);             /* a layer fills a bucket */
    ck_assert_int_eq(l.calls, 2);
    ck_assert(l.off[0] == 12 && l.count[0] == 12);
    ck_assert(l.off[1] == 0 && l.count[1] == 12);
    l = two_layers(0);              /* every range at once */
    ck_assert_int_eq(l.calls, 4);
    ck_assert(l.off[0] == 12 && l.off[1] == 22 && l.off[2] == 0 &&
              l.off[3] == 10);
    rt_grad_ready(NULL, NULL, 0, 1);   /* no hook: nothing happens */
    rt_grad_flush(NULL, NULL);
}
END_TEST

/* Past RT_HOOK_RANGES ranges apart, the oldest goes out early. */
START_TEST(grad_hook_too_many_ranges)
{
    hook_log l;
    rt_grad_hook h = logging_hook(&l, 1000);
    float g[64];
    int i;
    for (i = 0; i <= RT_HOOK_RANGES; i++)   /* every other float */
        rt_grad_ready(&h, g, 2 * (size_t)i, 1);
    ck_assert_int_eq(l.calls, 1);
    ck_assert(l.off[0] == 0 && l.count[0] == 1);
    rt_grad_flush(&h, g);
    ck_assert_int_eq(l.calls, RT_HOOK_RANGES + 1);
    ck_assert(l.off[RT_HOOK_RANGES] == 2 * RT_HOOK_RANGES);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *hook_suite(void)
{
    Suite *s = suite_create("remat_rt hook");
    TCase *tc;

    tc = tcase_create("hook");
    tcase_add_test(tc, grad_hook_buckets);
    tcase_add_test(tc, grad_hook_too_many_ranges);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(hook_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
