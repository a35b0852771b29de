/*
 * test_kernels_binary.c: unit tests of the runtime's broadcasting binary
 * kernels (Add, Sub, Mul, Div over an rt_bcast map, and Add's _set twin),
 * Pow, Mod (fmod=1), Max, Min, PRelu, Where and Expand (and Tile, Expand over a split
 * map), with Check.
 *
 * Every backward is checked against central finite differences of its
 * forward (rt_testutil.h), with loss L = sum(dy * y) for a random upstream
 * gradient dy, from a random preset gradient so that `+=` is tested too
 * (summed over the broadcast dimensions), and called with NULL gradients.
 * Every forward is checked against hand-worked numbers or a formula in
 * double written here (libm's pow, each output element's operands found by
 * index arithmetic), never against the kernels themselves. The _set twin
 * is checked against the adding kernel as rt_testutil.h's same_values says.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

/* ---- broadcasting binary ops --------------------------------------------- */

typedef struct {
    const char *name;
    int rank, dims[3], sa[3], sb[3], na, nb, ny;
} shape_case;

static const shape_case shapes[] = {
    {"(12) op (12)", 1, {12}, {1}, {1}, 12, 12, 12},
    {"(3,4) op (4)", 2, {3, 4}, {4, 1}, {0, 1}, 12, 4, 12},
    {"(3,4) op ()", 2, {3, 4}, {4, 1}, {0, 0}, 12, 1, 12},
    {"(3,1) op (1,4)", 2, {3, 4}, {1, 0}, {0, 1}, 3, 4, 12},
    {"(4) op (3,4)", 2, {3, 4}, {0, 1}, {4, 1}, 4, 12, 12},
    {"(2,3,4) op (2,1,4)", 3, {2, 3, 4}, {12, 4, 1}, {4, 0, 1}, 24, 8, 24},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))
static const char *const op_names[4] = {"Add", "Sub", "Mul", "Div"};

typedef struct {
    int op;
    rt_bcast m;
    float *a, *b; /* may be the same buffer */
    float y[32], dy[32];
    int ny;
} binary_case;

static void binary_fwd(binary_case *c)
{
    switch (c->op) {
    case 0: rt_add_forward(c->y, c->a, c->b, &c->m); break;
    case 1: rt_sub_forward(c->y, c->a, c->b, &c->m); break;
    case 2: rt_mul_forward(c->y, c->a, c->b, &c->m); break;
    default: rt_div_forward(c->y, c->a, c->b, &c->m); break;
    }
}

static void binary_bwd(binary_case *c, float *da, float *db)
{
    switch (c->op) {
    case 0: rt_add_backward(da, db, c->dy, &c->m); break;
    case 1: rt_sub_backward(da, db, c->dy, &c->m); break;
    case 2: rt_mul_backward(da, db, c->dy, c->a, c->b, &c->m); break;
    default: rt_div_backward(da, db, c->dy, c->a, c->b, &c->m); break;
    }
}

static double binary_loss(void *v)
{
    binary_case *c = v;
    binary_fwd(c);
    return dot(c->y, c->dy, c->ny);
}

/* _i = op + 4 * shape case. */
START_TEST(binary_grad)
{
    const shape_case *s = &shapes[_i / 4];
    binary_case c;
    float a[32] = {0}, b[32] = {0}, da[32], db[32], pa[32] = {0}, pb[32] = {0},
          diff[32] = {0};
    char what[80];
    c.op = _i % 4;
    c.m = make_bcast(s->rank, s->dims, s->sa, s->sb);
    c.a = a, c.b = b, c.ny = s->ny;
    tseed(200 + _i);
    fill(a, s->na, -1.5f, 1.5f);
    fill_away(b, s->nb, 0.5f, 1.5f);
    fill(c.dy, s->ny, -1, 1);
    fill(pa, s->na, -1, 1);
    fill(pb, s->nb, -1, 1);
    memcpy(da, pa, sizeof da);
    memcpy(db, pb, sizeof db);
    binary_bwd(&c, da, db);
    snprintf(what, sizeof what, "%s %s: da", op_names[c.op], s->name);
    added(diff, da, pa, s->na);
    expect_grad(what, a, s->na, diff, binary_loss, &c);
    what[strlen(what) - 1] = 'b';
    added(diff, db, pb, s->nb);
    expect_grad(what, b, s->nb, diff, binary_loss, &c);
}
END_TEST

/* Mul(d, d) and Div(d, d): a == b and da == db; both contributions add up
 * (d(d*d)/dd = 2d, d(d/d)/dd = 0), and only one of two NULLs is skipped. */
START_TEST(binary_grad_aliased_operands)
{
    const int dims[1] = {10}, one[1] = {1};
    binary_case c;
    float d[32], dd[32], pd[32], diff[32];
    c.op = 2 + _i;
    c.m = make_bcast(1, dims, one, one);
    c.a = c.b = d, c.ny = 10;
    tseed(300 + _i);
    fill_away(d, 10, 0.5f, 1.5f);
    fill(c.dy, 10, -1, 1);
    fill(pd, 10, -1, 1);
    memcpy(dd, pd, sizeof dd);
    binary_bwd(&c, dd, dd);
    added(diff, dd, pd, 10);
    expect_grad(op_names[c.op], d, 10, diff, binary_loss, &c);
    if (c.op == 2) { /* with db NULL only the da half (dy * d) is added */
        int i;
        memcpy(dd, pd, sizeof dd);
        binary_bwd(&c, dd, NULL);
        for (i = 0; i < 10; i++)
            ck_assert_float_eq_tol(dd[i] - pd[i], c.dy[i] * d[i], 1e-6);
    }
}
END_TEST

START_TEST(binary_forward_by_hand)
{
    const int d23[2] = {2, 3}, s23[2] = {3, 1}, s03[2] = {0, 1},
              s10[2] = {1, 0}, d4[1] = {4}, one[1] = {1}, zero[1] = {0},
              d222[3] = {2, 2, 2}, s421[3] = {4, 2, 1}, s201[3] = {2, 0, 1};
    const float a6[6] = {1, 2, 3, 4, 5, 6}, b3[3] = {10, 20, 30},
                a2[2] = {1, 2}, a4[4] = {1, 2, 3, 4}, b4[4] = {2, 4, 8, 16},
                s3[1] = {3}, a8[8] = {0, 1, 2, 3, 4, 5, 6, 7},
                b4b[4] = {100, 200, 300, 400};
    float y[8];
    rt_bcast m;
    /* (2,3) + (3): rows of a plus b */
    const double w_add[6] = {11, 22, 33, 14, 25, 36};
    /* (2,1) - (1,3): y[i][j] = a[i] - b[j] */
    const double w_sub[6] = {-9, -19, -29, -8, -18, -28};
    /* (4) * () */
    const double w_mul[4] = {3, 6, 9, 12};
    /* (4) / (4) */
    const double w_div[4] = {0.5, 0.5, 0.375, 0.25};
    /* (2,2,2) + (2,1,2): y[i][j][l] = a[i][j][l] + b[i][l] */
    const double w_add3[8] = {100, 201, 102, 203, 304, 405, 306, 407};

    m = make_bcast(2, d23, s23, s03);
    rt_add_forward(y, a6, b3, &m);
    expect_near("add", y, w_add, 6, 0, 0);
    m = make_bcast(2, d23, s10, s03);
    rt_sub_forward(y, a2, b3, &m);
    expect_near("sub", y, w_sub, 6, 0, 0);
    m = make_bcast(1, d4, one, zero);
    rt_mul_forward(y, a4, s3, &m);
    expect_near("mul", y, w_mul, 4, 0, 0);
    m = make_bcast(1, d4, one, one);
    rt_div_forward(y, a4, b4, &m);
    expect_near("div", y, w_div, 4, 0, 0);
    m = make_bcast(3, d222, s421, s201);
    rt_add_forward(y, a8, b4b, &m);
    expect_near("add rank 3", y, w_add3, 8, 0, 0);
    /* rank 0: scalars */
    m = make_bcast(0, d4, one, one);
    rt_mul_forward(y, s3, s3, &m);
    ck_assert_float_eq(y[0], 9.0f);
}
END_TEST

START_TEST(binary_backward_by_hand)
{
    /* (3,4) - (4), dy = 1: da += 1 everywhere, db -= 3 (summed over rows). */
    const int dims[2] = {3, 4}, sa[2] = {4, 1}, sb[2] = {0, 1};
    const rt_bcast m = make_bcast(2, dims, sa, sb);
    float dy[12], da[12], db[4] = {1, 1, 1, 1};
    double wa[12], wb[4] = {-2, -2, -2, -2};
    int i;
    for (i = 0; i < 12; i++)
        dy[i] = 1, da[i] = (float)i, wa[i] = i + 1;
    rt_sub_backward(da, db, dy, &m);
    expect_near("da", da, wa, 12, 0, 0);
    expect_near("db", db, wb, 4, 0, 0);
    rt_add_backward(NULL, db, dy, &m);
    for (i = 0; i < 4; i++)
        wb[i] = 1;
    expect_near("db after add", db, wb, 4, 0, 0);
}
END_TEST

/* ---- broadcast layouts --------------------------------------------------- */

/* Output dims, a's and b's dims right-aligned to them (1 = broadcast). */
typedef struct {
    int rank;
    int dims[3];
    int da[3], db[3];
} layout;

static const layout layouts[] = {
    {1, {12, 1, 1}, {12, 1, 1}, {12, 1, 1}},   /* same shape */
    {2, {3, 4, 1}, {3, 4, 1}, {1, 1, 1}},      /* scalar b (x ** 2) */
    {2, {4, 5, 1}, {4, 1, 1}, {1, 5, 1}},      /* two-sided */
    {3, {2, 3, 4}, {1, 3, 1}, {2, 1, 4}},      /* rank 3, both broadcast */
    {2, {3, 4, 1}, {1, 1, 1}, {3, 4, 1}},      /* scalar a (2 ** x) */
};
#define N_LAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

static size_t count_of(const int *dims, int rank)
{
    size_t n = 1;
    int d;
    for (d = 0; d < rank; d++)
        n *= (size_t)dims[d];
    return n;
}

/* Contiguous strides of an operand with dims `own` seen from the output,
 * 0 where it has extent 1: what the compiler's emit_bcast writes. */
static void strides(const int *own, const int *out, int rank, int *st)
{
    int s = 1, d;
    for (d = rank - 1; d >= 0; d--) {
        st[d] = own[d] == out[d] && own[d] != 1 ? s : 0;
        s *= own[d];
    }
}

static rt_bcast map_of(const layout *l)
{
    rt_bcast m;
    memset(&m, 0, sizeof m);
    m.rank = l->rank;
    memcpy(m.dims, l->dims, sizeof l->dims);
    strides(l->da, l->dims, l->rank, m.sa);
    strides(l->db, l->dims, l->rank, m.sb);
    return m;
}

/* The operand element that output element i reads, by index arithmetic. */
static size_t src_index(size_t i, const int *own, const int *out, int rank)
{
    size_t at = 0, stride = 1;
    int d;
    for (d = rank - 1; d >= 0; d--) {
        size_t coord = i % (size_t)out[d];
        i /= (size_t)out[d];
        if (own[d] != 1)
            at += coord * stride;
        stride *= (size_t)own[d];
    }
    return at;
}

/* ---- Pow ----------------------------------------------------------------- */

typedef struct {
    const layout *l;
    rt_bcast m;
    size_t n, na, nb;
    float a[24], b[24], y[24], dy[24];
} pow_case;

static double pow_loss(void *v)
{
    pow_case *c = v;
    rt_pow_forward(c->y, c->a, c->b, &c->m);
    return dot(c->y, c->dy, c->n);
}

static void pow_setup(pow_case *c, int k, uint64_t seed)
{
    c->l = &layouts[k];
    c->m = map_of(c->l);
    c->n = count_of(c->l->dims, c->l->rank);
    c->na = count_of(c->l->da, c->l->rank);
    c->nb = count_of(c->l->db, c->l->rank);
    tseed(seed);
    fill(c->a, c->na, 0.5f, 2.0f);  /* positive: ln a is real */
    fill(c->b, c->nb, -1.5f, 2.5f);
    fill(c->dy, c->n, -1, 1);
}

/* Both gradients, summed over broadcast dimensions, against finite
 * differences, from random presets; then NULL one at a time and both. */
START_TEST(pow_grad)
{
    pow_case c;
    float da[24], db[24], pa[24], pb[24], diff[24], keep[24];
    pow_setup(&c, _i, 7100 + _i);
    fill(pa, c.na, -1, 1);
    fill(pb, c.nb, -1, 1);
    memcpy(da, pa, sizeof da);
    memcpy(db, pb, sizeof db);
    rt_pow_backward(da, db, c.dy, c.a, c.b, &c.m);
    added(diff, da, pa, c.na);
    expect_grad("pow da", c.a, c.na, diff, pow_loss, &c);
    added(diff, db, pb, c.nb);
    expect_grad("pow db", c.b, c.nb, diff, pow_loss, &c);
    /* a NULL gradient leaves the other exactly as with both */
    memcpy(keep, da, sizeof keep);
    memcpy(da, pa, sizeof da);
    rt_pow_backward(da, NULL, c.dy, c.a, c.b, &c.m);
    added(diff, da, pa, c.na);
    added(pa, keep, pa, c.na);
    ck_assert_mem_eq(diff, pa, c.na * sizeof(float));
    rt_pow_backward(NULL, db, c.dy, c.a, c.b, &c.m);
    rt_pow_backward(NULL, NULL, c.dy, c.a, c.b, &c.m);
}
END_TEST

/* Every output element against pow() in double at the element's own a and
 * b, found by index arithmetic. */
START_TEST(pow_forward_matches_formula)
{
    pow_case c;
    double want[24];
    size_t i;
    pow_setup(&c, _i, 7200 + _i);
    rt_pow_forward(c.y, c.a, c.b, &c.m);
    for (i = 0; i < c.n; i++)
        want[i] = pow(c.a[src_index(i, c.l->da, c.l->dims, c.l->rank)],
                      c.b[src_index(i, c.l->db, c.l->dims, c.l->rank)]);
    expect_near("pow", c.y, want, c.n, 1e-6, 0);
}
END_TEST

/* ---- Mod, fmod=1 (issue 25) ---------------------------------------------- */

static double fmod_loss(void *v)
{
    pow_case *c = v;
    rt_fmod_forward(c->y, c->a, c->b, &c->m);
    return dot(c->y, c->dy, c->n);
}

/* a near k + 1/2 for integers k in [-3, 3], b of either sign with |b| in
 * [1, 1.1]: every a / b is 0.13 or more from an integer, where fmod jumps,
 * so central differences (step 1e-2) see the smooth piece. */
static void fmod_setup(pow_case *c, int k, uint64_t seed)
{
    size_t i;
    c->l = &layouts[k];
    c->m = map_of(c->l);
    c->n = count_of(c->l->dims, c->l->rank);
    c->na = count_of(c->l->da, c->l->rank);
    c->nb = count_of(c->l->db, c->l->rank);
    tseed(seed);
    fill(c->a, c->na, -0.05f, 0.05f);
    for (i = 0; i < c->na; i++)
        c->a[i] += (float)((int)(i * 5 % 7) - 3) + 0.5f;
    fill_away(c->b, c->nb, 1.0f, 1.1f);
    fill(c->dy, c->n, -1, 1);
}

/* Both gradients, summed over broadcast dimensions, against finite
 * differences, from random presets, and a NULL gradient skipped. */
START_TEST(fmod_grad)
{
    pow_case c;
    float da[24], db[24], pa[24], pb[24], diff[24];
    fmod_setup(&c, _i, 7300 + _i);
    fill(pa, c.na, -1, 1);
    fill(pb, c.nb, -1, 1);
    memcpy(da, pa, sizeof da);
    memcpy(db, pb, sizeof db);
    rt_fmod_backward(da, db, c.dy, c.a, c.b, &c.m);
    added(diff, da, pa, c.na);
    expect_grad("fmod da", c.a, c.na, diff, fmod_loss, &c);
    added(diff, db, pb, c.nb);
    expect_grad("fmod db", c.b, c.nb, diff, fmod_loss, &c);
    memcpy(db, pb, sizeof db);
    rt_fmod_backward(NULL, db, c.dy, c.a, c.b, &c.m);
    added(diff, db, pb, c.nb);
    expect_grad("fmod db alone", c.b, c.nb, diff, fmod_loss, &c);
    rt_fmod_backward(NULL, NULL, c.dy, c.a, c.b, &c.m);
}
END_TEST

/* By hand: the dividend's sign; 0.9f / 0.1f rounds to 9 in float, but
 * 0.9f is just under 9 * 0.1f, so the remainder is 0.1f less a little and
 * the quotient fmod takes is 8: db is -8 dy (a naive trunc(a / b), 9,
 * would be wrong). Then every element against a - trunc(a / b) b in
 * double at the element's own operands. */
START_TEST(fmod_forward_by_hand)
{
    const float a[] = {5.5f, -5.5f, 5.5f, -5.5f, 7.0f, 0.25f, 0.9f};
    const float b[] = {2.0f, 2.0f, -2.0f, -2.0f, 7.0f, 3.0f, 0.1f};
    const double want[] = {1.5, -1.5, 1.5, -1.5, 0.0, 0.25,
                           (double)0.9f - 8.0 * (double)0.1f};
    const int dims[] = {7}, st[] = {1};
    const rt_bcast m = make_bcast(1, dims, st, st);
    float y[7], dy[7] = {1, 1, 1, 1, 1, 1, 1}, da[7] = {0}, db[7] = {0};
    pow_case c;
    double w[24];
    size_t i;
    rt_fmod_forward(y, a, b, &m);
    expect_near("fmod", y, want, 7, 0, 1e-9);
    rt_fmod_backward(da, db, dy, a, b, &m);
    ck_assert(da[6] == 1.0f && db[6] == -8.0f);
    ck_assert(db[0] == -2.0f && db[1] == 2.0f && db[2] == 2.0f &&
              db[3] == -2.0f && db[4] == -1.0f && db[5] == 0.0f);
    for (i = 0; i < (size_t)N_LAYOUTS; i++) {
        size_t j;
        fmod_setup(&c, (int)i, 7400 + i);
        rt_fmod_forward(c.y, c.a, c.b, &c.m);
        for (j = 0; j < c.n; j++) {
            const double p = c.a[src_index(j, c.l->da, c.l->dims, c.l->rank)];
            const double q = c.b[src_index(j, c.l->db, c.l->dims, c.l->rank)];
            w[j] = p - trunc(p / q) * q;
        }
        expect_near("fmod by layout", c.y, w, c.n, 1e-6, 1e-6);
    }
}
END_TEST

/* A scalar exponent as torch exports x**2 and x**0.5: x**2 is exact and
 * right for negative x, with dx = 2x exactly; x**0.5 is sqrt. */
START_TEST(pow_scalar_exponents)
{
    const float x[5] = {-3, -0.1f, 0, 1.5f, 7}, two = 2, half = 0.5f;
    const float pos[4] = {0, 0.25f, 2, 9};
    const int dims[1] = {5}, d4[1] = {4};
    rt_bcast m;
    float y[5], dx[5], dy[5] = {1, 1, 1, 1, 1};
    double want[5], wd[5];
    int i;
    memset(&m, 0, sizeof m);
    m.rank = 1;
    m.dims[0] = dims[0];
    m.sa[0] = 1;
    m.sb[0] = 0;
    rt_pow_forward(y, x, &two, &m);
    for (i = 0; i < 5; i++) {
        want[i] = (double)x[i] * x[i];
        wd[i] = 2.0 * x[i];
        ck_assert_float_eq(y[i], x[i] * x[i]); /* bit for bit */
    }
    expect_near("x**2", y, want, 5, 1e-7, 0);
    rt_zero(dx, 5);
    rt_pow_backward(dx, NULL, dy, x, &two, &m);
    expect_near("d x**2", dx, wd, 5, 0, 0);
    m.dims[0] = d4[0];
    rt_pow_forward(y, pos, &half, &m);
    for (i = 0; i < 4; i++)
        want[i] = sqrt(pos[i]);
    expect_near("x**0.5", y, want, 4, 1e-7, 0);
}
END_TEST

/* Where 0 * inf would be NaN, the gradient is what the limit says:
 * d(a^0)/da = 0 at a = 0; d(a^b)/db = 0 at a = 0 for b >= 0; and
 * y = 0^b: 0 for b > 0, 1 for b = 0, inf for b < 0 (C's pow). */
START_TEST(pow_zero_base_no_nan)
{
    const float a[4] = {0, 0, 0, 0}, b[4] = {0, 2, 0.5f, 3};
    const float dy[4] = {1, 1, 1, 1};
    const int dims[1] = {4};
    rt_bcast m;
    float y[4], da[4], db[4];
    const double wy[4] = {1, 0, 0, 0}, wda[4] = {0, 0, 0, 0};
    const float nb = -1;
    int i;
    memset(&m, 0, sizeof m);
    m.rank = 1;
    m.dims[0] = dims[0];
    m.sa[0] = m.sb[0] = 1;
    rt_pow_forward(y, a, b, &m);
    expect_near("0^b", y, wy, 4, 0, 0);
    rt_zero(da, 4);
    rt_zero(db, 4);
    rt_pow_backward(da, db, dy, a, b, &m);
    /* b = 0.5: b * 0^(-0.5) is inf, which is the true derivative */
    ck_assert(isinf(da[2]));
    da[2] = 0;
    expect_near("d/da at 0", da, wda, 4, 0, 0);
    expect_near("d/db at 0", db, wda, 4, 0, 0);
    m.sb[0] = 0;
    rt_pow_forward(y, a, &nb, &m);
    for (i = 0; i < 4; i++)
        ck_assert(isinf(y[i]));
}
END_TEST

/* ---- Max, Min and PRelu -------------------------------------------------- */

typedef void (*fwd2)(float *, const float *, const float *, const rt_bcast *);
typedef void (*bwd2)(float *, float *, const float *, const float *,
                     const float *, const rt_bcast *);
static const char *const ext_names[3] = {"Max", "Min", "PRelu"};
static const fwd2 ext_fwd[3] = {rt_max_forward, rt_min_forward, rt_prelu_forward};
static const bwd2 ext_bwd[3] = {rt_max_backward, rt_min_backward,
                                rt_prelu_backward};

typedef struct {
    int op;
    pow_case p;
} ext_case;

static double ext_loss(void *v)
{
    ext_case *c = v;
    ext_fwd[c->op](c->p.y, c->p.a, c->p.b, &c->p.m);
    return dot(c->p.y, c->p.dy, c->p.n);
}

/* No a within 0.05 of any b (Max, Min), no x within 0.05 of 0 (PRelu): a
 * finite-difference step of 0.01 never crosses a kink. */
static void ext_setup(ext_case *c, int op, int k, uint64_t seed)
{
    size_t i, j;
    pow_setup(&c->p, k, seed);
    c->op = op;
    if (op == 2) {
        fill_away(c->p.a, c->p.na, 0.05f, 1.5f);
        fill(c->p.b, c->p.nb, 0.05f, 0.6f);
        return;
    }
    fill(c->p.a, c->p.na, -1, 1);
    fill(c->p.b, c->p.nb, -1, 1);
    for (i = 0; i < c->p.na; i++)
        for (j = 0; j < c->p.nb; j++)
            if (fabsf(c->p.a[i] - c->p.b[j]) < 0.05f) {
                c->p.a[i] += 0.11f;
                j = (size_t)-1;     /* look again from the first b */
            }
}

/* op, layout: PRelu takes the layouts whose output is a's shape (its
 * slope broadcasts one way) */
static const int ext_runs[][2] = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4},
                                  {1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4},
                                  {2, 0}, {2, 1}};
#define N_EXT ((int)(sizeof ext_runs / sizeof ext_runs[0]))

START_TEST(extreme_grad)
{
    ext_case c;
    float da[24], db[24], pa[24], pb[24], diff[24], keep[24];
    const int op = ext_runs[_i][0];
    ext_setup(&c, op, ext_runs[_i][1], 7600 + _i);
    fill(pa, c.p.na, -1, 1);
    fill(pb, c.p.nb, -1, 1);
    memcpy(da, pa, sizeof da);
    memcpy(db, pb, sizeof db);
    ext_bwd[op](da, db, c.p.dy, c.p.a, c.p.b, &c.p.m);
    added(diff, da, pa, c.p.na);
    expect_grad(ext_names[op], c.p.a, c.p.na, diff, ext_loss, &c);
    added(diff, db, pb, c.p.nb);
    expect_grad(ext_names[op], c.p.b, c.p.nb, diff, ext_loss, &c);
    /* one gradient alone is what it was beside the other */
    memcpy(keep, da, sizeof keep);
    memcpy(da, pa, sizeof da);
    ext_bwd[op](da, NULL, c.p.dy, c.p.a, c.p.b, &c.p.m);
    ck_assert_mem_eq(da, keep, c.p.na * sizeof(float));
    ext_bwd[op](NULL, NULL, c.p.dy, c.p.a, c.p.b, &c.p.m);
}
END_TEST

/* Each output element by index arithmetic against its definition. */
START_TEST(extreme_forward_by_index)
{
    ext_case c;
    double want[24];
    size_t i;
    const int op = ext_runs[_i][0];
    ext_setup(&c, op, ext_runs[_i][1], 7700 + _i);
    ext_fwd[op](c.p.y, c.p.a, c.p.b, &c.p.m);
    for (i = 0; i < c.p.n; i++) {
        const double a = c.p.a[src_index(i, c.p.l->da, c.p.l->dims, c.p.l->rank)];
        const double b = c.p.b[src_index(i, c.p.l->db, c.p.l->dims, c.p.l->rank)];
        want[i] = op == 0 ? (a > b ? a : b) : op == 1 ? (a < b ? a : b)
                                                     : (a > 0 ? a : b * a);
    }
    /* PRelu rounds one float product: half an ulp */
    expect_near(ext_names[op], c.p.y, want, c.p.n, op == 2 ? 6e-8 : 0, 0);
}
END_TEST

/* Worked by hand: a tie sends half the gradient each way (torch.maximum);
 * a NaN on either side is NaN; PRelu at 0 gives 0 and a slope gradient
 * of 0. */
START_TEST(extreme_ties_nan_by_hand)
{
    const float a[3] = {1, 2, NAN}, b[3] = {1, 3, 0}, dy[3] = {4, 4, 4};
    float y[3], da[3] = {0, 0, 0}, db[3] = {0, 0, 0};
    const double wda[2] = {2, 0}, wdb[2] = {2, 4};
    const float x[3] = {0, -2, 3}, s[3] = {0.5f, 0.25f, 0.75f};
    const double wy[3] = {0, -0.5, 3}, wdx[3] = {2, 1, 4}, wds[3] = {0, -8, 0};
    rt_bcast m;
    memset(&m, 0, sizeof m);
    m.rank = 1;
    m.dims[0] = 3;
    m.sa[0] = m.sb[0] = 1;
    rt_max_forward(y, a, b, &m);
    ck_assert(y[0] == 1 && y[1] == 3 && isnan(y[2]));
    rt_min_forward(y, a, b, &m);
    ck_assert(y[0] == 1 && y[1] == 2 && isnan(y[2]));
    rt_max_backward(da, db, dy, a, b, &m);
    expect_near("max da", da, wda, 2, 0, 0);
    expect_near("max db", db, wdb, 2, 0, 0);
    rt_prelu_forward(y, x, s, &m);
    expect_near("prelu y", y, wy, 3, 0, 0);
    memset(da, 0, sizeof da);
    memset(db, 0, sizeof db);
    rt_prelu_backward(da, db, dy, x, s, &m);
    expect_near("prelu dx", da, wdx, 3, 0, 0);
    expect_near("prelu dslope", db, wds, 3, 0, 0);
}
END_TEST

/* ---- Where --------------------------------------------------------------- */

/* Output dims; cond's, a's and b's dims right-aligned (1 = broadcast). */
typedef struct {
    int rank;
    int dims[3], dc[3], da[3], db[3];
} wlayout;

static const wlayout wlayouts[] = {
    {1, {10, 1, 1}, {10, 1, 1}, {10, 1, 1}, {10, 1, 1}},
    {2, {4, 5, 1}, {4, 1, 1}, {1, 5, 1}, {4, 5, 1}},
    {2, {4, 5, 1}, {4, 5, 1}, {1, 1, 1}, {4, 5, 1}},   /* causal mask form */
    {3, {2, 3, 4}, {1, 3, 4}, {2, 1, 4}, {2, 3, 1}},
};
#define N_WL ((int)(sizeof wlayouts / sizeof wlayouts[0]))

typedef struct {
    const wlayout *l;
    rt_where m;
    size_t n, nc, na, nb;
    float c[24], a[24], b[24], y[24], dy[24];
} where_case;

static double where_loss(void *v)
{
    where_case *w = v;
    rt_where_forward(w->y, w->c, w->a, w->b, &w->m);
    return dot(w->y, w->dy, w->n);
}

/* A mixed 0/1 condition (and one 2.5 and one -1: nonzero is true). */
static void where_setup(where_case *w, int k, uint64_t seed)
{
    size_t i;
    w->l = &wlayouts[k];
    memset(&w->m, 0, sizeof w->m);
    w->m.rank = w->l->rank;
    memcpy(w->m.dims, w->l->dims, sizeof w->l->dims);
    strides(w->l->dc, w->l->dims, w->l->rank, w->m.sc);
    strides(w->l->da, w->l->dims, w->l->rank, w->m.sa);
    strides(w->l->db, w->l->dims, w->l->rank, w->m.sb);
    w->n = count_of(w->l->dims, w->l->rank);
    w->nc = count_of(w->l->dc, w->l->rank);
    w->na = count_of(w->l->da, w->l->rank);
    w->nb = count_of(w->l->db, w->l->rank);
    tseed(seed);
    for (i = 0; i < w->nc; i++)
        w->c[i] = trand(0, 1) < 0.5f ? 0.0f : 1.0f;
    w->c[0] = 2.5f;
    if (w->nc > 1)
        w->c[1] = -1.0f;
    if (w->nc > 2)
        w->c[2] = 0.0f;
    fill(w->a, w->na, -2, 2);
    fill(w->b, w->nb, -2, 2);
    fill(w->dy, w->n, -1, 1);
}

START_TEST(where_forward_by_index)
{
    where_case w;
    double want[24];
    size_t i;
    where_setup(&w, _i, 7300 + _i);
    rt_where_forward(w.y, w.c, w.a, w.b, &w.m);
    for (i = 0; i < w.n; i++) {
        const float c = w.c[src_index(i, w.l->dc, w.l->dims, w.l->rank)];
        want[i] = c != 0 ? w.a[src_index(i, w.l->da, w.l->dims, w.l->rank)]
                         : w.b[src_index(i, w.l->db, w.l->dims, w.l->rank)];
    }
    expect_near("where", w.y, want, w.n, 0, 0);
}
END_TEST

START_TEST(where_grad)
{
    where_case w;
    float da[24], db[24], pa[24], pb[24], diff[24], keep[24];
    where_setup(&w, _i, 7400 + _i);
    fill(pa, w.na, -1, 1);
    fill(pb, w.nb, -1, 1);
    memcpy(da, pa, sizeof da);
    memcpy(db, pb, sizeof db);
    rt_where_backward(da, db, w.dy, w.c, &w.m);
    added(diff, da, pa, w.na);
    expect_grad("where da", w.a, w.na, diff, where_loss, &w);
    added(diff, db, pb, w.nb);
    expect_grad("where db", w.b, w.nb, diff, where_loss, &w);
    memcpy(keep, db, sizeof keep);
    memcpy(db, pb, sizeof db);
    rt_where_backward(NULL, db, w.dy, w.c, &w.m);
    ck_assert_mem_eq(db, keep, w.nb * sizeof(float));
    rt_where_backward(da, NULL, w.dy, w.c, &w.m);
    rt_where_backward(NULL, NULL, w.dy, w.c, &w.m);
}
END_TEST

/* Where(mask, -inf, scores), a causal mask over 3x3: -inf exactly where the
 * mask holds, the scores elsewhere; the backward gives the scores dy where
 * the mask is off and the -inf scalar the sum of dy where it is on, with no
 * NaN anywhere (a select, not inf * 0). And +inf in the other branch. */
START_TEST(where_infinities_flow)
{
    const float mask[9] = {0, 1, 1, 0, 0, 1, 0, 0, 0};
    const float s[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const float dy[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const float ninf = -HUGE_VALF, pinf = HUGE_VALF;
    rt_where m;
    float y[9], ds[9], dn = 0;
    int i;
    memset(&m, 0, sizeof m);
    m.rank = 2;
    m.dims[0] = m.dims[1] = 3;
    m.sc[0] = m.sb[0] = 3;
    m.sc[1] = m.sb[1] = 1;
    rt_where_forward(y, mask, &ninf, s, &m);
    for (i = 0; i < 9; i++) {
        if (mask[i] != 0)
            ck_assert(isinf(y[i]) && y[i] < 0);
        else
            ck_assert_float_eq(y[i], s[i]);
    }
    rt_zero(ds, 9);
    rt_where_backward(&dn, ds, dy, mask, &m);
    for (i = 0; i < 9; i++)
        ck_assert_float_eq(ds[i], mask[i] != 0 ? 0.0f : dy[i]);
    ck_assert_float_eq(dn, 2 + 3 + 6);
    /* the other way round: +inf where the mask is off */
    m.sa[0] = 3;
    m.sa[1] = 1;
    m.sb[0] = m.sb[1] = 0;
    rt_where_forward(y, mask, s, &pinf, &m);
    for (i = 0; i < 9; i++)
        ck_assert(mask[i] != 0 ? y[i] == s[i] : isinf(y[i]));
}
END_TEST

/* ---- Expand -------------------------------------------------------------- */

/* Output (2, 3, 4) from x of shape (3, 1) (right-aligned: 1, 3, 1), and
 * from (2, 1, 4); and a scalar to (5). */
typedef struct {
    int rank;
    int dims[3], dx[3];
} elayout;

static const elayout elayouts[] = {
    {3, {2, 3, 4}, {1, 3, 1}},
    {3, {2, 3, 4}, {2, 1, 4}},
    {1, {5, 1, 1}, {1, 1, 1}},
    {2, {3, 4, 1}, {3, 4, 1}},   /* no broadcast: a copy */
};
#define N_EX ((int)(sizeof elayouts / sizeof elayouts[0]))

typedef struct {
    const elayout *l;
    rt_bcast m;
    size_t n, nx;
    float x[24], y[24], dy[24];
} ex_case;

static double ex_loss(void *v)
{
    ex_case *c = v;
    rt_expand_forward(c->y, c->x, &c->m);
    return dot(c->y, c->dy, c->n);
}

static void ex_setup(ex_case *c, int k, uint64_t seed)
{
    c->l = &elayouts[k];
    memset(&c->m, 0, sizeof c->m);
    c->m.rank = c->l->rank;
    memcpy(c->m.dims, c->l->dims, sizeof c->l->dims);
    strides(c->l->dx, c->l->dims, c->l->rank, c->m.sa);
    memcpy(c->m.sb, c->m.sa, sizeof c->m.sa);
    c->n = count_of(c->l->dims, c->l->rank);
    c->nx = count_of(c->l->dx, c->l->rank);
    tseed(seed);
    fill(c->x, c->nx, -2, 2);
    fill(c->dy, c->n, -1, 1);
}

START_TEST(expand_forward_by_index)
{
    ex_case c;
    double want[24];
    size_t i;
    ex_setup(&c, _i, 7700 + _i);
    rt_expand_forward(c.y, c.x, &c.m);
    for (i = 0; i < c.n; i++)
        want[i] = c.x[src_index(i, c.l->dx, c.l->dims, c.l->rank)];
    expect_near("expand", c.y, want, c.n, 0, 0);
}
END_TEST

START_TEST(expand_grad)
{
    ex_case c;
    float dx[24], px[24], diff[24];
    ex_setup(&c, _i, 7800 + _i);
    fill(px, c.nx, -1, 1);
    memcpy(dx, px, sizeof dx);
    rt_expand_backward(dx, c.dy, &c.m);
    added(diff, dx, px, c.nx);
    expect_grad("expand", c.x, c.nx, diff, ex_loss, &c);
    rt_expand_backward(NULL, c.dy, &c.m);
}
END_TEST

/* (3, 1) to (2, 3, 4) by hand: x = {1, 2, 3}; dy = 1 everywhere sums to 8
 * per element on a preset 1: dx = {9, 9, 9}. */
START_TEST(expand_by_hand)
{
    const float x[3] = {1, 2, 3};
    float y[24], dy[24], dx[3] = {1, 1, 1};
    const double wdx[3] = {9, 9, 9};
    ex_case c;
    int i;
    ex_setup(&c, 0, 1);
    rt_expand_forward(y, x, &c.m);
    for (i = 0; i < 24; i++)
        ck_assert_float_eq(y[i], (float)(1 + (i / 4) % 3));
    rt_fill(dy, 24, 1.0f);
    rt_expand_backward(dx, dy, &c.m);
    expect_near("sum", dx, wdx, 3, 0, 0);
}
END_TEST

/* ---- Tile (issue 25): Expand's kernels over a split map ------------------ */

/* The maps ops_binary.c's tile_map makes: x (3, 4) tiled (2, 2), walked
 * as (2, 3, 2, 4) with x's strides (0, 4, 0, 1); x (2, 1, 3) tiled
 * (2, 2, 3), walked as (2, 2, 6, 3), strides (0, 3, 0, 1) (the extent-1
 * dimension dropped, two repeats merged). */
typedef struct {
    int xrank, xdims[3], rep[3];
    int rank, dims[4], sa[4];
} tlayout;

static const tlayout tlayouts[] = {
    {2, {3, 4, 1}, {2, 2, 1}, 4, {2, 3, 2, 4}, {0, 4, 0, 1}},
    {3, {2, 1, 3}, {2, 2, 3}, 4, {2, 2, 6, 3}, {0, 3, 0, 1}},
};

typedef struct {
    rt_bcast m;
    size_t n, nx;
    float x[12], y[72], dy[72];
} tile_case;

static double tile_loss(void *v)
{
    tile_case *c = v;
    rt_expand_forward(c->y, c->x, &c->m);
    return dot(c->y, c->dy, c->n);
}

/* The forward against ONNX's definition, out[i] = x[i mod x's shape] over
 * the output's (x_d * r_d) dimensions; the backward (the tiles summed)
 * against central differences. */
START_TEST(tile_forward_and_grad)
{
    const tlayout *l = &tlayouts[_i];
    tile_case c;
    int ydims[3], d;
    double want[72];
    float dx[12], px[12], diff[12];
    size_t i;
    c.m = make_bcast(l->rank, l->dims, l->sa, l->sa);
    c.nx = count_of(l->xdims, l->xrank);
    for (d = 0; d < l->xrank; d++)
        ydims[d] = l->xdims[d] * l->rep[d];
    c.n = count_of(ydims, l->xrank);
    tseed(7900 + (unsigned)_i);
    fill(c.x, c.nx, -2, 2);
    fill(c.dy, c.n, -1, 1);
    rt_expand_forward(c.y, c.x, &c.m);
    for (i = 0; i < c.n; i++) {
        size_t q = i, from = 0, scale = 1;
        for (d = l->xrank - 1; d >= 0; d--) {
            from += (q % (size_t)ydims[d]) % (size_t)l->xdims[d] * scale;
            scale *= (size_t)l->xdims[d];
            q /= (size_t)ydims[d];
        }
        want[i] = c.x[from];
    }
    expect_near("tile", c.y, want, c.n, 0, 0);
    fill(px, c.nx, -1, 1);
    memcpy(dx, px, sizeof dx);
    rt_expand_backward(dx, c.dy, &c.m);
    added(diff, dx, px, c.nx);
    expect_grad("tile dx", c.x, c.nx, diff, tile_loss, &c);
}
END_TEST

/* ---- _set twin ----------------------------------------------------------- */

/* Add (5, 7, 3) + b broadcast over the middle dim (5, 1, 3): da written
 * element by element, db written as a sum over the broadcast dim. */
START_TEST(add_writes_plain_and_broadcast_inputs)
{
    const int dims[3] = {5, 7, 3}, sa[3] = {21, 3, 1}, sb[3] = {3, 0, 1};
    const rt_bcast m = make_bcast(3, dims, sa, sb);
    const size_t ny = 105, nb = 15;
    float *dy = rnd(ny);
    unsigned set;
    for (set = 1; set <= 3; set++) {
        float *da0 = zeros(ny), *db0 = zeros(nb);
        float *da1 = set & 1u ? nans(ny) : zeros(ny);
        float *db1 = set & 2u ? nans(nb) : zeros(nb);
        rt_add_backward(da0, db0, dy, &m);
        rt_add_backward_set(da1, db1, dy, &m, set);
        same_values("add da", da0, da1, ny);
        same_values("add db", db0, db1, nb);
        free(da0), free(db0), free(da1), free(db1);
    }
    free(dy);
}
END_TEST

/* In place: da is dy's own buffer (the schedule's in-place gradient), db
 * the bias's, broadcast over the rows and added into. */
START_TEST(add_writes_in_place)
{
    const int dims[2] = {6, 5}, sa[2] = {5, 1}, sb[2] = {0, 1};
    const rt_bcast m = make_bcast(2, dims, sa, sb);
    float *dy = rnd(30), *want_da = copy(dy, 30), *db0 = rnd(5);
    float *want_db = copy(db0, 5), *db1 = copy(db0, 5);
    float *zero = zeros(30);
    rt_add_backward(zero, want_db, dy, &m);
    rt_add_backward_set(dy, db1, dy, &m, 1u);
    same_values("add in place da", want_da, dy, 30);
    same_values("add in place db", want_db, db1, 5);
    free(dy), free(want_da), free(db0), free(want_db), free(db1), free(zero);
}
END_TEST

/* ---- sums that do not drift (issue 25) ----------------------------------- */

/* y = a (2^17, 4) + b (1, 4) and y = a * c (a scalar): db and dc are sums
 * over 2^17 rows (and every element), within a few ulps of float64 and the
 * same bits on 1, 2 and 3 threads; da, not a sum, is dy (Add). */
START_TEST(broadcast_backward_sums_do_not_drift)
{
    const int rows = 1 << 17, n = rows * 4;
    const int dims[2] = {1 << 17, 4}, sa[2] = {4, 1}, sb[2] = {0, 1};
    const int s0[2] = {0, 0};
    const rt_bcast row_b = make_bcast(2, dims, sa, sb);
    const rt_bcast scalar_c = make_bcast(2, dims, sa, s0);
    float *dy = drift_values((size_t)n, 5, 0.02f);
    float *a = drift_values((size_t)n, 6, 0.5f);
    float *da = malloc((size_t)n * sizeof *da);
    float db[4], dc, db1[4], dc1, c = 2.0f;
    double want_b[4] = {0, 0, 0, 0}, want_c = 0;
    int i, t;
    ck_assert_ptr_nonnull(da);
    for (i = 0; i < n; i++) {
        want_b[i % 4] += dy[i];
        want_c += (double)dy[i] * a[i];
    }
    for (t = 1; t <= 3; t++) {
        rt_set_threads(t);
        memset(db, 0, sizeof db);
        memset(da, 0, (size_t)n * sizeof *da);
        dc = 0.0f;
        rt_add_backward(da, db, dy, &row_b);
        rt_mul_backward(NULL, &dc, dy, a, &c, &scalar_c);
        for (i = 0; i < 4; i++)
            ck_assert_msg(fabs(db[i] - want_b[i]) <= 4e-7 * want_b[i],
                          "db %d: %.9g, double %.12g", i, db[i], want_b[i]);
        ck_assert_msg(fabs(dc - want_c) <= 4e-7 * fabs(want_c),
                      "dc %.9g, double %.12g", dc, want_c);
        ck_assert(memcmp(da, dy, (size_t)n * sizeof *da) == 0);
        if (t == 1) {
            memcpy(db1, db, sizeof db);
            dc1 = dc;
        }
        ck_assert(memcmp(db, db1, sizeof db) == 0);
        ck_assert(memcmp(&dc, &dc1, sizeof dc) == 0);
    }
    rt_set_threads(1);
    free(dy);
    free(a);
    free(da);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *binary_suite(void)
{
    Suite *s = suite_create("remat_rt binary");
    TCase *tc;

    tc = tcase_create("binary");
    tcase_add_loop_test(tc, binary_grad, 0, 4 * N_SHAPES);
    tcase_add_loop_test(tc, binary_grad_aliased_operands, 0, 2);
    tcase_add_test(tc, binary_forward_by_hand);
    tcase_add_test(tc, binary_backward_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("pow");
    tcase_add_loop_test(tc, pow_grad, 0, N_LAYOUTS);
    tcase_add_loop_test(tc, pow_forward_matches_formula, 0, N_LAYOUTS);
    tcase_add_test(tc, pow_scalar_exponents);
    tcase_add_test(tc, pow_zero_base_no_nan);
    suite_add_tcase(s, tc);

    tc = tcase_create("mod");
    tcase_add_loop_test(tc, fmod_grad, 0, N_LAYOUTS);
    tcase_add_test(tc, fmod_forward_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("extreme");
    tcase_add_loop_test(tc, extreme_grad, 0, N_EXT);
    tcase_add_loop_test(tc, extreme_forward_by_index, 0, N_EXT);
    tcase_add_test(tc, extreme_ties_nan_by_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("where");
    tcase_add_loop_test(tc, where_forward_by_index, 0, N_WL);
    tcase_add_loop_test(tc, where_grad, 0, N_WL);
    tcase_add_test(tc, where_infinities_flow);
    suite_add_tcase(s, tc);

    tc = tcase_create("expand");
    tcase_add_loop_test(tc, expand_forward_by_index, 0, N_EX);
    tcase_add_loop_test(tc, expand_grad, 0, N_EX);
    tcase_add_test(tc, expand_by_hand);
    tcase_add_loop_test(tc, tile_forward_and_grad, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("set");
    tcase_add_checked_fixture(tc, set_seed, NULL);
    tcase_add_test(tc, add_writes_plain_and_broadcast_inputs);
    tcase_add_test(tc, add_writes_in_place);
    suite_add_tcase(s, tc);
    tc = tcase_create("sums");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, broadcast_backward_sums_do_not_drift);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(binary_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
