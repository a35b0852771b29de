/*
 * test_kernels_conv.c: unit tests of the runtime's convolution kernels
 * (rt_conv_forward, rt_conv_backward and their scratch sizes), with Check.
 *
 *   make build/test_kernels_conv && build/test_kernels_conv
 *
 * As in every test_kernels_*.c: gradients are checked against central
 * finite differences of the forward kernels (rt_testutil.h), with loss
 * L = sum(dy * y) for a random upstream gradient dy, summed in double;
 * every gradient buffer starts from random values and the check is on
 * (after - before), so accumulation is tested everywhere. Forward values
 * are checked against the definition written here as plain loops in double
 * (convolution as its seven nested loops), and against hand-worked numbers.
 * Buffers the kernels write carry a guard of sentinel values past their end
 * (rt_testutil.h's guarded), checked after every call.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#define RT_TEST_WINDOWS /* guarded, win_spec, window_of, tap_at */
#include "rt_testutil.h"

/* ---- convolution --------------------------------------------------------- */

/*                 name                 n  c  h  w oc kh kw sh sw dh dw pt pl pb pr g  b */
static const win_spec convs[] = {
    {"3x3 pad 1",                       2, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"3x3 stride 2",                    2, 2, 7, 6, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1},
    {"asymmetric pads, strides 1x2",    1, 2, 5, 4, 3, 3, 2, 1, 2, 1, 1, 2, 0, 1, 1, 1, 1},
    {"dilation 2",                      1, 2, 7, 7, 2, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, 1},
    {"group 2",                         2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1},
    {"depthwise",                       2, 3, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1},
    {"depthwise, multiplier 2, stride 2", 1, 3, 6, 5, 6, 3, 3, 2, 2, 1, 1, 1, 0, 0, 1, 3, 0},
    {"1x1, no bias",                    2, 3, 4, 4, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0},
    {"1x1 group 3",                     1, 6, 3, 4, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3, 1},
    {"1x1 stride 2",                    1, 3, 5, 4, 2, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1},
    {"1x1 pad 1",                       1, 2, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"2x3 mixed, group 2, no bias",     2, 4, 6, 7, 4, 2, 3, 2, 1, 1, 2, 1, 0, 0, 2, 2, 0},
    {"kernel wider than input, pads",   1, 1, 2, 3, 2, 3, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {"3x3 no pad, no bias",             1, 2, 4, 5, 3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0},
    {"taps wholly in the padding",      1, 2, 3, 1, 2, 3, 3, 1, 1, 1, 1, 1, 2, 1, 0, 1, 1},
    /* ow == w at stride 1: im2col's runs of a whole row of col */
    {"same, pads 2,2,2,0, dilation 2x1", 2, 3, 6, 5, 4, 3, 3, 1, 1, 2, 1, 2, 2, 2, 0, 1, 1},
    {"same 5x5 on 3x4",                 1, 2, 3, 4, 3, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1},
    /* an odd batch: lanes of 2 and 3 images (lane 1's dw, db partials) */
    {"5 images, 3x3 stride 2, group 2", 5, 4, 5, 6, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, 1},
    {"5 images, 1x1",                   5, 3, 3, 4, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
};
#define N_CONVS ((int)(sizeof convs / sizeof convs[0]))

typedef struct {
    const win_spec *s;
    rt_window p;
    size_t nx, nw, nb, ny, nfwd, nscratch; /* nfwd: the forward's scratch */
    float *x, *w, *b, *y, *dy, *scratch; /* b NULL without bias; y guarded */
} conv_case;

/* The column cap of variant v of a window: 0 (whole), 1 (one row of the
 * column matrix per band, the least there is) or half the whole columns
 * (bands of about half the rows). */
static int cap_of(const rt_window *p, int v)
{
    rt_window q = *p;
    q.col_cap = 0;
    return v == 0 ? 0 : v == 1 ? 1 : (int)(rt_conv_scratch(&q) / 2) + 1;
}

/* Case i of convs[] for i < N_CONVS; from there on the same windows again,
 * banded: N_CONVS to 2 N_CONVS - 1 under cap_of's variant 1, then 2. */
static conv_case conv_setup(int i, uint64_t seed)
{
    conv_case c;
    size_t nb;
    c.s = &convs[i % N_CONVS];
    c.p = window_of(c.s);
    c.p.col_cap = cap_of(&c.p, i / N_CONVS);
    c.nx = (size_t)c.p.n * c.p.c * c.p.h * c.p.w;
    c.nw = (size_t)c.p.oc * (c.p.c / c.p.group) * c.p.kh * c.p.kw;
    c.nb = (size_t)c.p.oc;
    c.ny = (size_t)c.p.n * c.p.oc * c.p.oh * c.p.ow;
    c.nfwd = rt_conv_scratch(&c.p);
    nb = rt_conv_backward_scratch(&c.p); /* banded, either may be larger */
    c.nscratch = c.nfwd > nb ? c.nfwd : nb;
    tseed(seed);
    c.x = guarded(c.nx);
    c.w = guarded(c.nw);
    c.b = c.s->bias ? guarded(c.nb) : NULL;
    c.y = guarded(c.ny);
    c.dy = guarded(c.ny);
    /* a window that needs no scratch must not touch it: pass NULL */
    c.scratch = c.nscratch ? guarded(c.nscratch) : NULL;
    fill(c.x, c.nx, -1, 1);
    fill(c.w, c.nw, -1, 1);
    if (c.b)
        fill(c.b, c.nb, -1, 1);
    fill(c.dy, c.ny, -1, 1);
    return c;
}

static void conv_free(conv_case *c)
{
    free(c->x), free(c->w), free(c->b), free(c->y), free(c->dy);
    free(c->scratch);
}

static void conv_check_guards(const conv_case *c)
{
    expect_guard("y", c->y, c->ny);
    if (c->scratch)
        expect_guard("scratch", c->scratch, c->nscratch);
}

static double conv_loss(void *v)
{
    conv_case *c = v;
    rt_conv_forward(c->y, c->x, c->w, c->b, &c->p, c->nfwd ? c->scratch : NULL);
    return dot(c->y, c->dy, c->ny);
}

/* The definition: seven nested loops, in double. */
static void conv_naive(double *want, const conv_case *c)
{
    const rt_window *p = &c->p;
    const int cg = p->c / p->group, og = p->oc / p->group;
    int i, o, oy, ox, ci, ki, kj;
    for (i = 0; i < p->n; i++)
        for (o = 0; o < p->oc; o++)
            for (oy = 0; oy < p->oh; oy++)
                for (ox = 0; ox < p->ow; ox++) {
                    const int g = o / og;
                    double s = c->b ? c->b[o] : 0.0;
                    for (ci = 0; ci < cg; ci++)
                        for (ki = 0; ki < p->kh; ki++)
                            for (kj = 0; kj < p->kw; kj++) {
                                const int iy = tap_at(oy, p->sh, p->pad_top, ki, p->dh);
                                const int ix = tap_at(ox, p->sw, p->pad_left, kj, p->dw);
                                if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w)
                                    continue;
                                s += (double)c->w[((o * cg + ci) * p->kh + ki) * p->kw + kj] *
                                     c->x[((i * p->c + g * cg + ci) * p->h + iy) * p->w + ix];
                            }
                    want[((i * p->oc + o) * p->oh + oy) * p->ow + ox] = s;
                }
}

START_TEST(conv_forward_matches_definition)
{
    conv_case c = conv_setup(_i, 500 + _i);
    double *want = malloc(c.ny * sizeof *want);
    size_t j;
    char what[96];
    for (j = 0; j < c.ny; j++)
        c.y[j] = NAN; /* overwritten, never read */
    if (c.scratch)
        for (j = 0; j < c.nscratch; j++)
            c.scratch[j] = NAN;
    conv_loss(&c);
    conv_naive(want, &c);
    snprintf(what, sizeof what, "conv %s, col_cap %d: y", c.s->name,
             c.p.col_cap);
    expect_near(what, c.y, want, c.ny, 1e-5, 1e-5);
    conv_check_guards(&c);
    free(want);
    conv_free(&c);
}
END_TEST

START_TEST(conv_grad)
{
    conv_case c = conv_setup(_i, 600 + _i);
    float *dx = guarded(c.nx), *dw = guarded(c.nw), *db = guarded(c.nb);
    float *px = malloc(c.nx * sizeof *px), *pw = malloc(c.nw * sizeof *pw),
          *pb = malloc(c.nb * sizeof *pb);
    float *diff = malloc((c.nx + c.nw + c.nb) * sizeof *diff);
    char what[96];
    fill(px, c.nx, -1, 1);
    fill(pw, c.nw, -1, 1);
    fill(pb, c.nb, -1, 1);
    memcpy(dx, px, c.nx * sizeof *dx);
    memcpy(dw, pw, c.nw * sizeof *dw);
    memcpy(db, pb, c.nb * sizeof *db);
    if (c.scratch)
        fill(c.scratch, c.nscratch, -9, 9); /* garbage the kernel overwrites */
    rt_conv_backward(dx, dw, c.b ? db : NULL, c.dy, c.x, c.w, &c.p, c.scratch);
    expect_guard("dx", dx, c.nx);
    expect_guard("dw", dw, c.nw);
    conv_check_guards(&c);

    snprintf(what, sizeof what, "conv %s, col_cap %d: dx", c.s->name,
             c.p.col_cap);
    added(diff, dx, px, c.nx);
    expect_grad(what, c.x, c.nx, diff, conv_loss, &c);
    what[strlen(what) - 1] = 'w';
    added(diff, dw, pw, c.nw);
    expect_grad(what, c.w, c.nw, diff, conv_loss, &c);
    if (c.b) {
        what[strlen(what) - 1] = 'b';
        added(diff, db, pb, c.nb);
        expect_grad(what, c.b, c.nb, diff, conv_loss, &c);
        expect_guard("db", db, c.nb);
    } else {
        ck_assert(memcmp(db, pb, c.nb * sizeof *db) == 0);
    }
    free(dx), free(dw), free(db), free(px), free(pw), free(pb), free(diff);
    conv_free(&c);
}
END_TEST

/* Every subset of (dx, dw, db): a NULL gradient is left alone, the others
 * get what the full call adds, and an input that only a NULL gradient would
 * need (x for dw, w for dx) may itself be NULL. */
START_TEST(conv_backward_skips_null)
{
    conv_case c = conv_setup(_i, 700 + _i);
    float *full[3], *part[3], *pre[3];
    const size_t n[3] = {c.nx, c.nw, c.nb};
    int mask, k;
    size_t j;
    for (k = 0; k < 3; k++) {
        full[k] = malloc(n[k] * sizeof(float));
        part[k] = malloc(n[k] * sizeof(float));
        pre[k] = malloc(n[k] * sizeof(float));
        fill(pre[k], n[k], -1, 1);
        memcpy(full[k], pre[k], n[k] * sizeof(float));
    }
    rt_conv_backward(full[0], full[1], full[2], c.dy, c.x, c.w, &c.p, c.scratch);
    for (mask = 0; mask < 8; mask++) {
        float *g[3];
        for (k = 0; k < 3; k++) {
            memcpy(part[k], pre[k], n[k] * sizeof(float));
            g[k] = (mask >> k) & 1 ? part[k] : NULL;
        }
        rt_conv_backward(g[0], g[1], g[2], c.dy, g[1] ? c.x : NULL,
                         g[0] ? c.w : NULL, &c.p, c.scratch);
        for (k = 0; k < 3; k++)
            for (j = 0; j < n[k]; j++) {
                const float want = g[k] ? full[k][j] : pre[k][j];
                ck_assert_msg(fabsf(part[k][j] - want) <= 1e-6f * (1 + fabsf(want)),
                              "conv %s, mask %d: d%c[%d] %.9g, want %.9g",
                              c.s->name, mask, "xwb"[k], (int)j,
                              (double)part[k][j], (double)want);
            }
    }
    for (k = 0; k < 3; k++)
        free(full[k]), free(part[k]), free(pre[k]);
    conv_free(&c);
}
END_TEST

START_TEST(conv_by_hand)
{
    /* x = [1 2 3; 4 5 6; 7 8 9], a 2x2 all-ones kernel: each output is the
     * sum of a 2x2 block, y = [12 16; 24 28] (+ 0.5 with the bias). With
     * dy all ones, dx adds how many windows cover each element, dw the sum
     * of x under each tap over the four windows (which is y again), db 4. */
    const win_spec s = {"by hand", 1, 1, 3, 3, 1, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1};
    const rt_window p = window_of(&s);
    const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1},
                b[1] = {0.5f}, dy[4] = {1, 1, 1, 1};
    float y[4], scratch[16], dx[9], dw[4] = {0, 0, 0, 0}, db[1] = {1};
    const double wy[4] = {12, 16, 24, 28}, wyb[4] = {12.5, 16.5, 24.5, 28.5},
                 wdx[9] = {11, 12, 11, 12, 14, 12, 11, 12, 11},
                 wdw[4] = {12, 16, 24, 28}, wdb[1] = {5};
    int j;
    ck_assert_int_eq(p.oh, 2);
    ck_assert_int_eq(p.ow, 2);
    ck_assert_uint_eq(rt_conv_scratch(&p), 16); /* 4 taps x 4 positions */
    rt_conv_forward(y, x, w, NULL, &p, scratch);
    expect_near("y", y, wy, 4, 0, 0);
    rt_conv_forward(y, x, w, b, &p, scratch);
    expect_near("y with bias", y, wyb, 4, 0, 0);
    for (j = 0; j < 9; j++)
        dx[j] = 10;
    rt_conv_backward(dx, dw, db, dy, x, w, &p, scratch);
    expect_near("dx", dx, wdx, 9, 0, 0);
    expect_near("dw", dw, wdw, 4, 0, 0);
    expect_near("db", db, wdb, 1, 0, 0);
}
END_TEST

START_TEST(conv_scratch_size)
{
    /* One lane's im2col buffer, (c/group) kh kw oh ow; 0 only for 1x1,
     * stride 1, no padding */
    static const int col[N_CONVS] = {
        3 * 9 * 5 * 5, 2 * 9 * 4 * 3, 2 * 6 * 6 * 2, 2 * 9 * 7 * 7,
        2 * 9 * 5 * 5, 1 * 9 * 5 * 5, 1 * 9 * 3 * 2, 0, 0, 3 * 1 * 3 * 2,
        2 * 1 * 5 * 5, 2 * 6 * 3 * 5, 1 * 12 * 2 * 2, 2 * 9 * 2 * 3,
        2 * 9 * 3 * 1, 3 * 9 * 6 * 5, 2 * 25 * 3 * 4, 2 * 9 * 3 * 3, 0};
    int i;
    for (i = 0; i < N_CONVS; i++) {
        const rt_window p = window_of(&convs[i]);
        /* two lanes from two images; the backward's lane 1 adds a dw, db */
        const size_t lanes = p.n >= 2 ? 2 : 1;
        const size_t fwd = lanes * (size_t)col[i];
        const size_t bwd = fwd + (lanes - 1) * ((size_t)p.oc * (p.c / p.group) *
                                                    p.kh * p.kw + (size_t)p.oc);
        ck_assert_msg(rt_conv_scratch(&p) == fwd, "%s: scratch %d, want %d",
                      convs[i].name, (int)rt_conv_scratch(&p), (int)fwd);
        ck_assert_msg(rt_conv_backward_scratch(&p) == bwd,
                      "%s: backward scratch %d, want %d", convs[i].name,
                      (int)rt_conv_backward_scratch(&p), (int)bwd);
    }
}
END_TEST

/* ---- 1-D and 3-D convolution --------------------------------------------- */

/* Axes in (depth, height, width) order; a 1-D conv is one row high. */
static const nd_spec conv_nds[] = {
    /* name                      n  c oc  g  b ceil  in         k        s        d        pads begin  pads end */
    {"1-D k3 pad 1",             2, 3, 4, 1, 1, 0, {1, 1, 9}, {1, 1, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 1}, {0, 0, 1}},
    {"1-D k3 dilation 2, causal pads 4,4", 1, 2, 3, 1, 1, 0, {1, 1, 7}, {1, 1, 3}, {1, 1, 1}, {1, 1, 2}, {0, 0, 4}, {0, 0, 4}},
    {"1-D depthwise x2, stride 2, dilation 2", 2, 3, 6, 3, 0, 0, {1, 1, 10}, {1, 1, 3}, {1, 1, 2}, {1, 1, 2}, {0, 0, 2}, {0, 0, 1}},
    {"1-D k1 (pointwise)",       2, 3, 2, 1, 1, 0, {1, 1, 5}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}},
    {"3-D 3x3x3 pad 1",          2, 2, 3, 1, 1, 0, {4, 5, 4}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
    {"3-D stride 2, dilation 2x1x1, pads 1,0,1/0,1,0, group 2", 1, 4, 4, 2, 1, 0, {6, 5, 5}, {2, 3, 2}, {2, 2, 1}, {2, 1, 1}, {1, 0, 1}, {0, 1, 0}},
    {"3-D depthwise 1x3x3",      2, 3, 3, 3, 1, 0, {3, 4, 4}, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},
    {"3-D 1x1x1, no bias",       2, 3, 2, 1, 0, 0, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}},
    {"3-D depth taps wholly in the padding", 1, 2, 2, 1, 1, 0, {2, 3, 3}, {3, 2, 2}, {1, 1, 1}, {1, 1, 1}, {2, 0, 1}, {2, 1, 0}},
    {"3-D 5 images, stride 1x2x2", 5, 2, 2, 1, 1, 0, {3, 4, 5}, {2, 2, 2}, {1, 2, 2}, {1, 1, 1}, {0, 1, 0}, {1, 0, 1}},
};
#define N_CONV_NDS ((int)(sizeof conv_nds / sizeof conv_nds[0]))

typedef struct {
    rt_window p;
    int bias;
    size_t nx, nw, ny, nfwd, nscratch;
    float *x, *w, *b, *y, *dy, *scratch;
} nd_case;

static nd_case nd_setup(int i, uint64_t seed)
{
    nd_case c;
    const rt_window *p = &c.p;
    c.p = window_nd(&conv_nds[i]);
    c.bias = conv_nds[i].bias;
    c.nx = (size_t)p->n * p->c * p->d * p->h * p->w;
    c.nw = (size_t)p->oc * (p->c / p->group) * p->kd * p->kh * p->kw;
    c.ny = (size_t)p->n * p->oc * p->od * p->oh * p->ow;
    c.nfwd = rt_conv_scratch(p);
    c.nscratch = rt_conv_backward_scratch(p);
    tseed(seed);
    c.x = guarded(c.nx), c.w = guarded(c.nw), c.b = guarded((size_t)p->oc);
    c.y = guarded(c.ny), c.dy = guarded(c.ny);
    c.scratch = c.nscratch ? guarded(c.nscratch) : NULL;
    fill(c.x, c.nx, -1, 1);
    fill(c.w, c.nw, -1, 1);
    fill(c.b, (size_t)p->oc, -1, 1);
    fill(c.dy, c.ny, -1, 1);
    return c;
}

static void nd_free(nd_case *c)
{
    free(c->x), free(c->w), free(c->b), free(c->y), free(c->dy);
    free(c->scratch);
}

static double nd_loss(void *v)
{
    nd_case *c = v;
    rt_conv_forward(c->y, c->x, c->w, c->bias ? c->b : NULL, &c->p,
                    c->nfwd ? c->scratch : NULL);
    return dot(c->y, c->dy, c->ny);
}

/* ONNX's definition over (depth, height, width), in double. */
static void nd_naive(double *want, const nd_case *c)
{
    const rt_window *p = &c->p;
    const int cg = p->c / p->group, og = p->oc / p->group;
    int i, o, oz, oy, ox, ci, kz, ki, kj;
    for (i = 0; i < p->n; i++)
        for (o = 0; o < p->oc; o++)
            for (oz = 0; oz < p->od; oz++)
                for (oy = 0; oy < p->oh; oy++)
                    for (ox = 0; ox < p->ow; ox++) {
                        const int g = o / og;
                        double s = c->bias ? c->b[o] : 0.0;
                        for (ci = 0; ci < cg; ci++)
                            for (kz = 0; kz < p->kd; kz++)
                                for (ki = 0; ki < p->kh; ki++)
                                    for (kj = 0; kj < p->kw; kj++) {
                                        const int iz = tap_at(oz, p->sd, p->pad_front, kz, p->dd);
                                        const int iy = tap_at(oy, p->sh, p->pad_top, ki, p->dh);
                                        const int ix = tap_at(ox, p->sw, p->pad_left, kj, p->dw);
                                        if (iz < 0 || iz >= p->d || iy < 0 || iy >= p->h ||
                                            ix < 0 || ix >= p->w)
                                            continue;
                                        s += (double)c->w[(((o * cg + ci) * p->kd + kz) * p->kh + ki) * p->kw + kj] *
                                             c->x[(((i * p->c + g * cg + ci) * p->d + iz) * p->h + iy) * p->w + ix];
                                    }
                        want[(((i * p->oc + o) * p->od + oz) * p->oh + oy) * p->ow + ox] = s;
                    }
}

START_TEST(conv_nd_forward_matches_definition)
{
    nd_case c = nd_setup(_i, 1500 + _i);
    double *want = malloc(c.ny * sizeof *want);
    char what[128];
    size_t j;
    for (j = 0; j < c.ny; j++)
        c.y[j] = NAN;
    if (c.scratch)
        for (j = 0; j < c.nscratch; j++)
            c.scratch[j] = NAN;
    nd_loss(&c);
    nd_naive(want, &c);
    snprintf(what, sizeof what, "conv %s: y", conv_nds[_i].name);
    expect_near(what, c.y, want, c.ny, 1e-5, 1e-5);
    expect_guard("y", c.y, c.ny);
    if (c.scratch)
        expect_guard("scratch", c.scratch, c.nscratch);
    free(want);
    nd_free(&c);
}
END_TEST

START_TEST(conv_nd_grad)
{
    nd_case c = nd_setup(_i, 1600 + _i);
    const size_t nb = (size_t)c.p.oc;
    float *dx = guarded(c.nx), *dw = guarded(c.nw), *db = guarded(nb);
    float *px = malloc(c.nx * sizeof *px), *pw = malloc(c.nw * sizeof *pw),
          *pb = malloc(nb * sizeof *pb);
    float *diff = malloc((c.nx + c.nw + nb) * sizeof *diff);
    char what[128];
    fill(px, c.nx, -1, 1);
    fill(pw, c.nw, -1, 1);
    fill(pb, nb, -1, 1);
    memcpy(dx, px, c.nx * sizeof *dx);
    memcpy(dw, pw, c.nw * sizeof *dw);
    memcpy(db, pb, nb * sizeof *db);
    if (c.scratch)
        fill(c.scratch, c.nscratch, -9, 9);
    rt_conv_backward(dx, dw, c.bias ? db : NULL, c.dy, c.x, c.w, &c.p,
                     c.scratch);
    expect_guard("dx", dx, c.nx);
    expect_guard("dw", dw, c.nw);
    expect_guard("db", db, nb);
    if (c.scratch)
        expect_guard("scratch", c.scratch, c.nscratch);
    snprintf(what, sizeof what, "conv %s: dx", conv_nds[_i].name);
    added(diff, dx, px, c.nx);
    expect_grad(what, c.x, c.nx, diff, nd_loss, &c);
    what[strlen(what) - 1] = 'w';
    added(diff, dw, pw, c.nw);
    expect_grad(what, c.w, c.nw, diff, nd_loss, &c);
    if (c.bias) {
        what[strlen(what) - 1] = 'b';
        added(diff, db, pb, nb);
        expect_grad(what, c.b, nb, diff, nd_loss, &c);
    } else {
        ck_assert(memcmp(db, pb, nb * sizeof *db) == 0);
    }
    free(dx), free(dw), free(db), free(px), free(pw), free(pb), free(diff);
    nd_free(&c);
}
END_TEST

/* A 2-D window written with its depth fields (d = od = kd = sd = dd = 1)
 * and the same window with them left 0 give the same bits. */
START_TEST(conv_depth_fields_default_to_one)
{
    const nd_spec s = {"2-D", 2, 3, 4, 1, 1, 0, {1, 5, 6}, {1, 3, 3},
                       {1, 2, 1}, {1, 1, 2}, {0, 1, 2}, {0, 1, 2}};
    rt_window full = window_nd(&s), bare = full;
    size_t nx, nw, ny, ns, j;
    float *x, *w, *b, *y1, *y2, *dy, *d1, *d2, *scr;
    bare.d = bare.od = bare.kd = bare.sd = bare.dd = 0;
    ck_assert(rt_conv_scratch(&full) == rt_conv_scratch(&bare));
    ck_assert(rt_conv_backward_scratch(&full) == rt_conv_backward_scratch(&bare));
    nx = (size_t)2 * 3 * 5 * 6, nw = (size_t)4 * 3 * 9;
    ny = (size_t)2 * 4 * full.oh * full.ow, ns = rt_conv_backward_scratch(&full);
    tseed(1700);
    x = rnd(nx), w = rnd(nw), b = rnd(4), dy = rnd(ny), scr = rnd(ns);
    y1 = rnd(ny), y2 = rnd(ny), d1 = zeros(nx), d2 = zeros(nx);
    rt_conv_forward(y1, x, w, b, &full, scr);
    rt_conv_forward(y2, x, w, b, &bare, scr);
    rt_conv_backward(d1, NULL, NULL, dy, x, w, &full, scr);
    rt_conv_backward(d2, NULL, NULL, dy, x, w, &bare, scr);
    for (j = 0; j < ny; j++)
        ck_assert(y1[j] == y2[j]);
    for (j = 0; j < nx; j++)
        ck_assert(d1[j] == d2[j]);
    free(x), free(w), free(b), free(dy), free(scr), free(y1), free(y2);
    free(d1), free(d2);
}
END_TEST

/* A bias gradient sums a whole output plane: in blocks folded with
 * compensation, a plane of 2^16 values of 0.1 gives 6553.6 to float's
 * precision, where a float running sum drifts by about 1e-3 relative. */
START_TEST(conv_bias_grad_does_not_drift)
{
    const nd_spec s = {"1x1 over 256x256", 1, 1, 1, 1, 1, 0, {1, 256, 256},
                       {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
    const rt_window p = window_nd(&s);
    const size_t n = (size_t)256 * 256;
    float *dy = malloc(n * sizeof *dy), db = 0.0f;
    size_t j;
    for (j = 0; j < n; j++)
        dy[j] = 0.1f;
    rt_conv_backward(NULL, NULL, &db, dy, NULL, NULL, &p, NULL);
    ck_assert_msg(fabs(db - (double)n * 0.1f) <= 1e-6 * (double)n * 0.1f,
                  "db %.9g, want %.9g", (double)db, (double)n * 0.1f);
    free(dy);
}
END_TEST

/* ---- bands: col_cap ------------------------------------------------------ */

/* What a forward and a backward of window p give on data seeded by seed:
 * y, and dx, dw, db added onto seeded values. The scratch starts as NaN,
 * so that a band reading columns it did not write shows. */
typedef struct {
    float *y, *dx, *dw, *db;
    size_t ny, nx, nw, nb;
} conv_out;

static conv_out conv_run(const rt_window *p, uint64_t seed)
{
    conv_out o;
    const size_t nf = rt_conv_scratch(p), nbk = rt_conv_backward_scratch(p);
    const size_t ns = nf > nbk ? nf : nbk;
    float *x, *w, *b, *dy, *scratch = ns ? malloc(ns * sizeof(float)) : NULL;
    size_t j;
    o.nx = (size_t)p->n * p->c * (p->d ? p->d : 1) * p->h * p->w;
    o.nw = (size_t)p->oc * (p->c / p->group) * (p->kd ? p->kd : 1) * p->kh *
           p->kw;
    o.nb = (size_t)p->oc;
    o.ny = (size_t)p->n * p->oc * (p->od ? p->od : 1) * p->oh * p->ow;
    tseed(seed);
    x = malloc(o.nx * sizeof *x), w = malloc(o.nw * sizeof *w);
    b = malloc(o.nb * sizeof *b), dy = malloc(o.ny * sizeof *dy);
    o.y = malloc(o.ny * sizeof *o.y), o.dx = malloc(o.nx * sizeof *o.dx);
    o.dw = malloc(o.nw * sizeof *o.dw), o.db = malloc(o.nb * sizeof *o.db);
    fill(x, o.nx, -1, 1), fill(w, o.nw, -1, 1), fill(b, o.nb, -1, 1);
    fill(dy, o.ny, -1, 1), fill(o.dx, o.nx, -1, 1), fill(o.dw, o.nw, -1, 1);
    fill(o.db, o.nb, -1, 1);
    for (j = 0; j < ns; j++)
        scratch[j] = NAN;
    rt_conv_forward(o.y, x, w, b, p, scratch);
    for (j = 0; j < ns; j++)
        scratch[j] = NAN;
    rt_conv_backward(o.dx, o.dw, o.db, dy, x, w, p, scratch);
    free(x), free(w), free(b), free(dy), free(scratch);
    return o;
}

/* With the portable GEMM (the _noblas build, and firmware) a band changes
 * no bit: each element of a GEMM's C is summed in one order whatever part
 * of C the call computes (gemm.c), and col2im adds the rows in the same
 * order. OpenBLAS's kernels on a part of C may round otherwise (as for
 * the threads' split, test_threads.sh), so there the bands are held to
 * float's precision. */
static void expect_banded(const char *what, const rt_window *p, const float *got,
                        const float *want, size_t n)
{
    size_t j;
    for (j = 0; j < n; j++) {
#ifdef RT_NO_BLAS
        ck_assert_msg(memcmp(&got[j], &want[j], sizeof *got) == 0,
                      "%s, col_cap %d: [%d] %.9g, whole %.9g", what,
                      p->col_cap, (int)j, (double)got[j], (double)want[j]);
#else
        ck_assert_msg(fabsf(got[j] - want[j]) <= 1e-5f * (1 + fabsf(want[j])),
                      "%s, col_cap %d: [%d] %.9g, whole %.9g", what,
                      p->col_cap, (int)j, (double)got[j], (double)want[j]);
#endif
    }
}

static void conv_out_free(conv_out *o)
{
    free(o->y), free(o->dx), free(o->dw), free(o->db);
}

/* Every window of convs[] and conv_nds[], under the two caps of cap_of,
 * against the whole columns. */
START_TEST(conv_banded_matches_whole)
{
    const int k = _i % (N_CONVS + N_CONV_NDS), v = 1 + _i / (N_CONVS + N_CONV_NDS);
    rt_window p = k < N_CONVS ? window_of(&convs[k])
                              : window_nd(&conv_nds[k - N_CONVS]);
    const char *name = k < N_CONVS ? convs[k].name : conv_nds[k - N_CONVS].name;
    conv_out whole, band;
    char what[128];
    whole = conv_run(&p, 2100 + (uint64_t)k);
    p.col_cap = cap_of(&p, v);
    band = conv_run(&p, 2100 + (uint64_t)k);
    snprintf(what, sizeof what, "conv %s: y", name);
    expect_banded(what, &p, band.y, whole.y, whole.ny);
    snprintf(what, sizeof what, "conv %s: dx", name);
    expect_banded(what, &p, band.dx, whole.dx, whole.nx);
    snprintf(what, sizeof what, "conv %s: dw", name);
    expect_banded(what, &p, band.dw, whole.dw, whole.nw);
    snprintf(what, sizeof what, "conv %s: db", name);
    expect_banded(what, &p, band.db, whole.db, whole.nb);
    conv_out_free(&whole);
    conv_out_free(&band);
}
END_TEST

/* The bands' scratch, worked by hand. A ResNet-8 3x3 conv, 16 -> 16
 * channels on 32x32, two images (two lanes): the whole columns are 16 * 9
 * = 144 rows of 32 * 32 = 1024 per lane, 2 * 144 * 1024 floats. A cap of
 * 2 * 144 * 32 * 4 gives each lane 18432 floats: four output rows of
 * 144 * 32 in the forward, and in the backward 18 of the 144 rows of 1024
 * (eight even bands), plus lane 1's dw, db partial (16 * 144 + 16). A
 * MobileNetV1 stem (3 -> 8 channels, 3x3 stride 2 pad 1, 96x96, one
 * image: one lane, output 48x48) has 27 rows of 2304; under a cap of 20
 * rows' worth the backward's bands are even, 14 + 13 rows, not 20 + 7,
 * and the forward's 20 * 2304 / (27 * 48) = 35 output rows become 24 + 24.
 * Below one row: one row (forward: one output row of 27 * 48). */
START_TEST(conv_scratch_banded)
{
    const win_spec res = {"resnet8 3x3", 2, 16, 32, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const win_spec stem = {"mobilenet stem", 1, 3, 96, 96, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};
    rt_window p = window_of(&res), q = window_of(&stem);
    ck_assert_uint_eq(rt_conv_scratch(&p), 2 * 144 * 1024);
    p.col_cap = 2 * 144 * 32 * 4;
    ck_assert_uint_eq(rt_conv_scratch(&p), 2 * 144 * 4 * 32);
    ck_assert_uint_eq(rt_conv_backward_scratch(&p), 2 * 18 * 1024 + 16 * 144 + 16);
    ck_assert_int_eq(q.oh, 48);
    ck_assert_uint_eq(rt_conv_scratch(&q), 27 * 2304);
    ck_assert_uint_eq(rt_conv_backward_scratch(&q), 27 * 2304);
    q.col_cap = 20 * 2304;
    ck_assert_uint_eq(rt_conv_backward_scratch(&q), 14 * 2304);
    ck_assert_uint_eq(rt_conv_scratch(&q), 27 * 24 * 48);
    q.col_cap = 1;
    ck_assert_uint_eq(rt_conv_backward_scratch(&q), 2304);
    ck_assert_uint_eq(rt_conv_scratch(&q), 27 * 48);
    /* a pointwise conv has no columns to bound */
    p = window_of(&convs[7]);
    p.col_cap = 1;
    ck_assert_uint_eq(rt_conv_scratch(&p), 0);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *conv_suite(void)
{
    Suite *s = suite_create("remat_rt conv");
    TCase *tc;

    tc = tcase_create("conv");
    tcase_add_loop_test(tc, conv_forward_matches_definition, 0, 3 * N_CONVS);
    tcase_add_loop_test(tc, conv_grad, 0, 3 * N_CONVS);
    tcase_add_loop_test(tc, conv_backward_skips_null, 0, N_CONVS);
    tcase_add_test(tc, conv_by_hand);
    tcase_add_test(tc, conv_scratch_size);
    suite_add_tcase(s, tc);

    tc = tcase_create("conv_nd");
    tcase_add_loop_test(tc, conv_nd_forward_matches_definition, 0, N_CONV_NDS);
    tcase_add_loop_test(tc, conv_nd_grad, 0, N_CONV_NDS);
    tcase_add_test(tc, conv_depth_fields_default_to_one);
    tcase_add_test(tc, conv_bias_grad_does_not_drift);
    suite_add_tcase(s, tc);

    tc = tcase_create("bands");
    tcase_add_loop_test(tc, conv_banded_matches_whole, 0,
                        2 * (N_CONVS + N_CONV_NDS));
    tcase_add_test(tc, conv_scratch_banded);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conv_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
