/*
 * test_kernels_conv_transpose.c: unit tests of the runtime's transposed
 * convolution (rt_convt_forward, rt_convt_backward) in 1, 2 and 3 spatial
 * dimensions, with Check.
 *
 * The forward is checked against a value worked by hand and against an
 * independent loop in double that gathers each output element from the
 * inputs that reach it (o = i * s - pad + t * d solved for i), where the
 * kernel scatters; the backward against central finite differences of the
 * forward (rt_testutil.h), from random preset gradients so that `+=` is
 * tested, and with NULL gradients skipped.
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
    const char *name;
    rt_convt p;
    int bias;
} convt_spec;

/* nd, n, c, m, group, in, out, k, s, d, pad; out = (in - 1) * s + (k - 1)
 * * d + 1 - pad_begin - pad_end + output_padding, worked per case */
static const convt_spec specs[] = {
    {"1-D k3 s2", {1, 2, 3, 2, 1, {4, 1, 1}, {9, 1, 1}, {3, 1, 1},
                   {2, 1, 1}, {1, 1, 1}, {0, 0, 0}}, 1},
    /* (5-1)*2 + 3 - 1 - 1 + 1 (output_padding) = 10 */
    {"1-D pads 1 1, output_padding 1", {1, 1, 2, 3, 1, {5, 1, 1},
                   {10, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 1, 1}, {1, 0, 0}}, 0},
    /* 2x2 kernel, stride 2 (the U-Net upsampler): 3x4 -> 6x8 */
    {"2-D k2 s2", {2, 2, 4, 3, 1, {3, 4, 1}, {6, 8, 1}, {2, 2, 1},
                   {2, 2, 1}, {1, 1, 1}, {0, 0, 0}}, 1},
    /* groups 2, 4 -> 6 channels, 3x3 kernel, pads 1: 4x3 -> 4x3 */
    {"2-D groups 2 pads 1", {2, 1, 4, 6, 2, {4, 3, 1}, {4, 3, 1}, {3, 3, 1},
                   {1, 1, 1}, {1, 1, 1}, {1, 1, 0}}, 1},
    /* dilation 2, stride (2, 1): h (3-1)*2 + 2*2+1 = 9, w 4-1 + 5 = 8 */
    {"2-D dilation 2 strides 2,1", {2, 1, 2, 2, 1, {3, 4, 1}, {9, 8, 1},
                   {3, 3, 1}, {2, 1, 1}, {2, 2, 1}, {0, 0, 0}}, 0},
    /* 3-D, stride 2, pads 1 each side, groups 2: (2-1)*2+3-2 = 3 */
    {"3-D s2 pads 1 groups 2", {3, 2, 2, 4, 2, {2, 3, 2}, {3, 5, 3},
                   {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}}, 1},
};
#define N_SPECS ((int)(sizeof specs / sizeof specs[0]))

static size_t nx(const rt_convt *p)
{
    return (size_t)p->n * p->c * p->in[0] * p->in[1] * p->in[2];
}
static size_t ny(const rt_convt *p)
{
    return (size_t)p->n * p->m * p->out[0] * p->out[1] * p->out[2];
}
static size_t nw(const rt_convt *p)
{
    return (size_t)p->c * (p->m / p->group) * p->k[0] * p->k[1] * p->k[2];
}

/* The gather form, in double: for each output element and tap, the input
 * position that reaches it, if any. */
static void gather_ref(double *y, const float *x, const float *w,
                       const float *b, const rt_convt *p)
{
    const int cg = p->c / p->group, mg = p->m / p->group;
    int n, ch, o0, o1, o2, ci, t0, t1, t2;
    for (n = 0; n < p->n; n++)
        for (ch = 0; ch < p->m; ch++)
            for (o0 = 0; o0 < p->out[0]; o0++)
                for (o1 = 0; o1 < p->out[1]; o1++)
                    for (o2 = 0; o2 < p->out[2]; o2++) {
                        const int g = ch / mg, mo = ch % mg;
                        double s = b ? b[ch] : 0;
                        for (ci = 0; ci < cg; ci++)
                            for (t0 = 0; t0 < p->k[0]; t0++)
                                for (t1 = 0; t1 < p->k[1]; t1++)
                                    for (t2 = 0; t2 < p->k[2]; t2++) {
                                        const int o[3] = {o0, o1, o2};
                                        const int t[3] = {t0, t1, t2};
                                        int i[3], a, ok = 1;
                                        for (a = 0; a < 3; a++) {
                                            const int num = o[a] + p->pad[a] -
                                                            t[a] * p->d[a];
                                            if (num < 0 || num % p->s[a]) {
                                                ok = 0;
                                                break;
                                            }
                                            i[a] = num / p->s[a];
                                            ok &= i[a] < p->in[a];
                                        }
                                        if (!ok)
                                            continue;
                                        s += (double)x[(((size_t)n * p->c + g * cg + ci) * p->in[0] + i[0]) * p->in[1] * p->in[2] + i[1] * p->in[2] + i[2]] *
                                             w[((((size_t)(g * cg + ci) * mg + mo) * p->k[0] + t0) * p->k[1] + t1) * p->k[2] + t2];
                                    }
                        y[(((size_t)n * p->m + ch) * p->out[0] + o0) * p->out[1] * p->out[2] + o1 * p->out[2] + o2] = s;
                    }
}

typedef struct {
    const rt_convt *p;
    float *x, *w, *b, *y, *dy;
} convt_case;

static double convt_loss(void *v)
{
    convt_case *c = v;
    rt_convt_forward(c->y, c->x, c->w, c->b, c->p);
    return dot(c->y, c->dy, ny(c->p));
}

START_TEST(convt_forward_gather)
{
    const convt_spec *s = &specs[_i];
    const rt_convt *p = &s->p;
    float *x, *w, *b, *y;
    double *want = malloc(ny(p) * sizeof *want);
    tseed(700 + _i);
    x = rnd(nx(p)), w = rnd(nw(p)), b = s->bias ? rnd(p->m) : NULL;
    y = nans(ny(p));    /* the forward must overwrite every element */
    rt_convt_forward(y, x, w, b, p);
    gather_ref(want, x, w, b, p);
    expect_near(s->name, y, want, ny(p), 1e-5, 1e-5);
    free(x), free(w), free(b), free(y), free(want);
}
END_TEST

START_TEST(convt_grad)
{
    const convt_spec *s = &specs[_i];
    const rt_convt *p = &s->p;
    convt_case c = {p, 0, 0, 0, 0, 0};
    float *dx, *dw, *db = NULL, *px, *pw, *pb = NULL, *diff;
    size_t big = nx(p) > nw(p) ? nx(p) : nw(p);
    tseed(800 + _i);
    c.x = rnd(nx(p)), c.w = rnd(nw(p)), c.b = s->bias ? rnd(p->m) : NULL;
    c.y = zeros(ny(p)), c.dy = rnd(ny(p));
    px = rnd(nx(p)), pw = rnd(nw(p)), dx = copy(px, nx(p)), dw = copy(pw, nw(p));
    if (s->bias)
        pb = rnd(p->m), db = copy(pb, p->m);
    diff = malloc((big > (size_t)p->m ? big : (size_t)p->m) * sizeof *diff);
    rt_convt_backward(dx, dw, db, c.dy, c.x, c.w, p);
    added(diff, dx, px, nx(p));
    expect_grad("dx", c.x, nx(p), diff, convt_loss, &c);
    added(diff, dw, pw, nw(p));
    expect_grad("dw", c.w, nw(p), diff, convt_loss, &c);
    if (s->bias) {
        added(diff, db, pb, p->m);
        expect_grad("db", c.b, p->m, diff, convt_loss, &c);
    }
    /* NULL gradients are skipped; the others come out the same */
    {
        float *dx2 = copy(px, nx(p));
        rt_convt_backward(dx2, NULL, NULL, c.dy, NULL, c.w, p);
        expect_same("dx alone", dx2, dx, (int)nx(p));
        free(dx2);
    }
    free(c.x), free(c.w), free(c.b), free(c.y), free(c.dy), free(dx), free(dw);
    free(db), free(px), free(pw), free(pb), free(diff);
}
END_TEST

START_TEST(convt_by_hand)
{
    /* one channel, x = (1, 2), w = (1, 10, 100), stride 2:
     * y = 1*(1,10,100) at 0 + 2*(1,10,100) at 2 = (1, 10, 102, 20, 200);
     * with pads (1, 1) the ends are cropped: (10, 102, 20); bias 0.5 */
    const rt_convt full = {1, 1, 1, 1, 1, {2, 1, 1}, {5, 1, 1}, {3, 1, 1},
                           {2, 1, 1}, {1, 1, 1}, {0, 0, 0}};
    const rt_convt crop = {1, 1, 1, 1, 1, {2, 1, 1}, {3, 1, 1}, {3, 1, 1},
                           {2, 1, 1}, {1, 1, 1}, {1, 0, 0}};
    const float x[2] = {1, 2}, w[3] = {1, 10, 100}, b[1] = {0.5f};
    const float want_full[5] = {1, 10, 102, 20, 200};
    const float want_crop[3] = {10.5f, 102.5f, 20.5f};
    float y[5];
    rt_convt_forward(y, x, w, NULL, &full);
    expect_same("full", y, want_full, 5);
    rt_convt_forward(y, x, w, b, &crop);
    expect_same("cropped, bias", y, want_crop, 3);
}
END_TEST

static Suite *convt_suite(void)
{
    Suite *s = suite_create("remat_rt conv_transpose");
    TCase *tc = tcase_create("conv_transpose");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, convt_by_hand);
    tcase_add_loop_test(tc, convt_forward_gather, 0, N_SPECS);
    tcase_add_loop_test(tc, convt_grad, 0, N_SPECS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(convt_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
