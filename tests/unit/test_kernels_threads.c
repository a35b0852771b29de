/*
 * test_kernels_threads.c: the runtime's kernels give the same bits on 1, 2
 * and 3 threads (rt_set_threads).
 *
 * Each case seeds its inputs, runs kernels on tensors large enough to be
 * split (past the runtime's thresholds, with sizes that do not divide
 * evenly), and concatenates everything it wrote; the test runs it under
 * each thread count and compares the outputs with memcmp. Gradients start
 * from random values, so the accumulation (+=) is compared too. Sums over
 * a split dimension (a bias gradient over rows, LayerNorm's dscale, a
 * Gather's repeated rows, the loss) are the cases that would differ if a
 * kernel split them by thread.
 */
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

#define OUT_FLOATS (1u << 22)

/* Where a case appends what it computed. */
static float *out_buf;
static size_t out_len;

static void keep(const float *x, size_t n)
{
    ck_assert_uint_le(out_len + n, OUT_FLOATS);
    memcpy(out_buf + out_len, x, n * sizeof *x);
    out_len += n;
}

typedef void (*case_fn)(void);

/* Odd sizes, so no chunk edge falls where another thread count's does;
 * every kernel's tensors are past its threshold (RT_PAR_CHEAP: 128K
 * floats for plain arithmetic). */
#define N 200003
#define ROWS 301
#define COLS 197

static void case_pointwise(void)
{
    float *x = rnd(N), *dy = rnd(N), *y = rnd(N), *dx = rnd(N);
    int approx;
    rt_relu_forward(y, x, N);
    keep(y, N);
    rt_relu_backward(dx, dy, y, N);
    keep(dx, N);
    for (approx = 0; approx <= 1; approx++) {
        rt_gelu_forward(y, x, N, approx);
        keep(y, N);
        rt_gelu_backward(dx, dy, x, N, approx);
        keep(dx, N);
    }
    rt_dropout_forward(y, x, N, 0.3f, 5, 2, 7);
    keep(y, N);
    rt_dropout_backward(dx, dy, N, 0.3f, 5, 2, 7);
    keep(dx, N);
    rt_dropout_mask(y, N, 0.3f, 5, 2, 7);
    keep(y, N);
    free(x), free(dy), free(y), free(dx);
}

/* Equal shapes (one row), a row bias broadcast over rows (db sums over
 * them), and a rank-3 map with a middle broadcast. */
static void case_broadcast(void)
{
    const int d1[1] = {N}, s1[1] = {1};
    const int d2[2] = {3 * ROWS, COLS}, a2[2] = {COLS, 1}, b2[2] = {0, 1};
    const int d3[3] = {7, 61, 331}, a3[3] = {61 * 331, 331, 1};
    const int b3[3] = {331, 0, 1};
    const rt_bcast maps[3] = {make_bcast(1, d1, s1, s1), make_bcast(2, d2, a2, b2),
                              make_bcast(3, d3, a3, b3)};
    float *a = rnd(N), *b = rnd(N), *y = rnd(N), *dy = rnd(N);
    float *da = rnd(N), *db = rnd(N);
    int i;
    for (i = 0; i < 3; i++) {
        rt_add_forward(y, a, b, &maps[i]);
        keep(y, N);
        rt_mul_forward(y, a, b, &maps[i]);
        keep(y, N);
        rt_add_backward(da, db, dy, &maps[i]);
        rt_mul_backward(da, db, dy, a, b, &maps[i]);
        rt_sub_backward(da, NULL, dy, &maps[i]);
        keep(da, N);
        keep(db, N);
    }
    free(a), free(b), free(y), free(dy), free(da), free(db);
}

static void case_transpose(void)
{
    const int dims[3] = {13, 89, 131}, perm[3] = {2, 0, 1};
    const size_t n = 13 * 89 * 131;
    float *x = rnd(n), *y = rnd(n), *dx = rnd(n);
    rt_transpose_forward(y, x, 3, dims, perm);
    keep(y, n);
    rt_transpose_backward(dx, x, 3, dims, perm);
    keep(dx, n);
    free(x), free(y), free(dx);
}

/* Slice, split over the threads since issue 25: rows (a middle step 2,
 * the inner axis reversed), one long row (step 3), and int64 elements
 * (their values kept as floats: small integers, exact). */
static void case_slice(void)
{
    const int xd[3] = {13, 89, 131}, yd[3] = {12, 44, 131};
    const int st[3] = {1, 1, 130}, sp[3] = {1, 2, -1};
    const int xd1[1] = {150001}, yd1[1] = {50000}, st1[1] = {2}, sp1[1] = {3};
    const size_t n = 13 * 89 * 131, m = 12 * 44 * 131;
    float *x = rnd(n), *y = rnd(n), *dx = rnd(n), *f = rnd(n);
    int64_t *ix = malloc(n * sizeof *ix), *iy = malloc(n * sizeof *iy);
    size_t i;
    ck_assert_ptr_nonnull(ix);
    ck_assert_ptr_nonnull(iy);
    rt_slice_forward(y, x, 3, xd, yd, st, sp);
    keep(y, m);
    rt_slice_backward(dx, x, 3, xd, yd, st, sp);
    keep(dx, n);
    rt_slice_forward(y, x, 1, xd1, yd1, st1, sp1);
    keep(y, 50000);
    rt_slice_backward(dx, x, 1, xd1, yd1, st1, sp1);
    keep(dx, 150001);
    for (i = 0; i < n; i++)
        ix[i] = (int64_t)i * 7 % 1000003;
    rt_slice_i64_forward(iy, ix, 3, xd, yd, st, sp);
    for (i = 0; i < m; i++)
        f[i] = (float)iy[i];
    keep(f, m);
    free(x), free(y), free(dx), free(f), free(ix), free(iy);
}

static void case_layernorm(void)
{
    const size_t n = (size_t)ROWS * COLS;
    float *x = rnd(n), *y = rnd(n), *dy = rnd(n), *dx = rnd(n);
    float *scale = rnd(COLS), *bias = rnd(COLS);
    float *ds = rnd(COLS), *db = rnd(COLS);
    float *scratch = rnd(rt_layernorm_backward_scratch(COLS));
    rt_layernorm_forward(y, x, scale, bias, ROWS, COLS, 1e-5f);
    keep(y, n);
    rt_layernorm_backward(dx, ds, db, dy, x, scale, ROWS, COLS, 1e-5f,
                          scratch);
    keep(dx, n);
    keep(ds, COLS);
    keep(db, COLS);
    rt_layernorm_backward(NULL, ds, NULL, dy, x, scale, ROWS, COLS, 1e-5f,
                          scratch);
    keep(ds, COLS);
    rt_layernorm_backward(dx, NULL, NULL, dy, x, scale, ROWS, COLS, 1e-5f,
                          NULL);
    keep(dx, n);
    free(x), free(y), free(dy), free(dx);
    free(scale), free(bias), free(ds), free(db), free(scratch);
}

/* The last axis (inner 1) and a middle one (inner 5). */
static void case_softmax(void)
{
    const size_t n = (size_t)ROWS * COLS * 5;
    float *x = rnd(n), *y = rnd(n), *dy = rnd(n), *dx = rnd(n);
    int inner;
    for (inner = 1; inner <= 5; inner += 4) {
        rt_softmax_forward(y, x, ROWS, COLS, inner);
        keep(y, n);
        rt_softmax_backward(dx, dy, y, ROWS, COLS, inner);
        keep(dx, n);
        rt_log_softmax_forward(y, x, ROWS, COLS, inner);
        keep(y, n);
        rt_log_softmax_backward(dx, dy, y, ROWS, COLS, inner);
        keep(dx, n);
    }
    free(x), free(y), free(dy), free(dx);
}

/* Every reduction, with ignored and weighted positions. */
static void case_sce(void)
{
    const int n = ROWS, c = COLS, inner = 3;
    const size_t positions = (size_t)n * inner, m = positions * c;
    float *s = rnd(m), *ds = rnd(m), *w = rnd((size_t)c);
    float *loss = rnd(positions), *dl = rnd(positions);
    int64_t *lab = malloc(positions * sizeof *lab);
    size_t p;
    int red;
    ck_assert_ptr_nonnull(lab);
    for (p = 0; p < positions; p++)
        lab[p] = (int64_t)(trand(0, 1) * (float)(c + 2)) - 1; /* -1, c too */
    for (red = RT_SCE_NONE; red <= RT_SCE_MEAN; red++) {
        rt_sce_forward(loss, s, lab, w, n, c, inner, red, 1, 5);
        keep(loss, red == RT_SCE_NONE ? positions : 1);
        rt_sce_backward(ds, dl, s, lab, w, n, c, inner, red, 1, 5);
        keep(ds, m);
    }
    free(s), free(ds), free(w), free(loss), free(dl), free(lab);
}

/* Indices repeat (a table of 50 rows, 1100 lookups) and some are out of
 * range, so the backward sums rows. */
static void case_gather(void)
{
    const int rows = 50, n = 1100, width = 129;
    float *table = rnd((size_t)rows * width), *y = rnd((size_t)n * width);
    float *dt = rnd((size_t)rows * width);
    float *scratch = rnd(rt_gather_backward_scratch(n));
    int64_t idx[1100];
    int i;
    for (i = 0; i < n; i++)
        idx[i] = (int64_t)(trand(0, 1) * 120.0f) - 60;
    rt_gather_forward(y, table, idx, n, rows, width);
    keep(y, (size_t)n * width);
    rt_gather_backward(dt, y, idx, n, rows, width, scratch);
    keep(dt, (size_t)rows * width);
    free(table), free(y), free(dt), free(scratch);
}

/* The bias of a Gemm: per column (a Linear's), per row, and a scalar. */
static void case_gemm_bias(void)
{
    const int m = 3 * ROWS, n = COLS, k = 3;
    const int shapes[3][2] = {{1, COLS}, {3 * ROWS, 1}, {1, 1}};
    float *a = rnd((size_t)m * k), *b = rnd((size_t)k * n);
    float *c = rnd((size_t)m * n), *y = rnd((size_t)m * n);
    float *dy = rnd((size_t)m * n), *dc = rnd((size_t)m * n);
    int i;
    for (i = 0; i < 3; i++) {
        const int cr = shapes[i][0], cc = shapes[i][1];
        rt_gemm_forward(y, a, b, c, m, n, k, 0, 0, 1.0f, 0.5f, cr, cc);
        keep(y, (size_t)m * n);
        rt_gemm_backward(NULL, NULL, dc, dy, a, b, m, n, k, 0, 0, 1.0f, 0.5f,
                         cr, cc);
        keep(dc, (size_t)cr * cc);
    }
    free(a), free(b), free(c), free(y), free(dy), free(dc);
}

static void case_memory(void)
{
    const size_t n = ((size_t)1 << 19) + 13;
    float *x = rnd(n), *y = rnd(n);
    rt_copy(y, x, n);
    keep(y, n);
    rt_zero(x, n);
    keep(x, n);
    free(x), free(y);
}

/* MaxPool over planes: 2x2 stride 2 (the row kernels) and 3x3 stride 2
 * with padding (the generic walk at the edges, overlapping windows whose
 * backward adds twice into one element) on 37 planes of 61x59. */
static void case_pool(void)
{
    rt_window p;
    int k;
    for (k = 2; k <= 3; k++) {
        size_t nin, nout;
        float *x, *y, *dy, *dx;
        p = pool_window(1, 37, 61, 59, k);
        nin = (size_t)p.c * p.h * p.w;
        nout = (size_t)p.c * p.oh * p.ow;
        x = rnd(nin), dx = rnd(nin), y = rnd(nout), dy = rnd(nout);
        rt_maxpool_forward(y, x, &p);
        keep(y, nout);
        rt_maxpool_backward(dx, dy, x, &p);
        keep(dx, nin);
        free(x), free(dx), free(y), free(dy);
    }
}

/* Attention over 7 heads (two groups of unequal size), causal and not,
 * 70 queries against 67 keys (partial blocks), forward and backward with
 * random starting gradients. */
static void case_attention(void)
{
    const int bh = 7, sq = 70, skv = 67, e = 24, ev = 20;
    const size_t nq = (size_t)bh * sq * e, nk = (size_t)bh * skv * e;
    const size_t nv = (size_t)bh * skv * ev, ny = (size_t)bh * sq * ev;
    float *q = rnd(nq), *k = rnd(nk), *v = rnd(nv), *dy = rnd(ny);
    float *y = rnd(ny), *dq = rnd(nq), *dk = rnd(nk), *dv = rnd(nv);
    float *fs = rnd(rt_attention_scratch(skv, ev));
    float *bs = rnd(rt_attention_backward_scratch(skv, e));
    int causal;
    for (causal = 0; causal < 2; causal++) {
        rt_attention_forward(y, q, k, v, bh, sq, skv, e, ev, 0.2f, causal, fs);
        keep(y, ny);
        rt_attention_backward(dq, dk, dv, dy, q, k, v, bh, sq, skv, e, ev,
                              0.2f, causal, bs);
        keep(dq, nq);
        keep(dk, nk);
        keep(dv, nv);
    }
    free(q), free(k), free(v), free(dy), free(y), free(dq), free(dk);
    free(dv), free(fs), free(bs);
}

/* Convolutions over an odd batch, 5 images (lanes of 2 and 3): 3x3 pad 1
 * with group 1 and group 2, and a 1x1 (x is its own column matrix),
 * forward with and without bias, backward with dx, dw, db and with
 * subsets of them. Lane 1 sums dw and db into a partial of its own, added
 * after the lanes; the scratch starts as garbage. The GEMMs are past
 * rt_sgemm's split threshold (32 x 143 x 144 multiply-adds): inside a lane
 * they run whole on its thread, so even OpenBLAS's bits are the same on
 * any thread count. */
static void case_conv(void)
{
    /* c, oc, k, group */
    static const int shapes[3][4] = {{16, 32, 3, 1}, {32, 64, 3, 2},
                                     {48, 64, 1, 1}};
    int i;
    for (i = 0; i < 3; i++) {
        rt_window p;
        size_t nx, nw, ny, ns;
        float *x, *w, *b, *y, *dy, *dx, *dw, *db, *scratch;
        memset(&p, 0, sizeof p);
        p.n = 5, p.c = shapes[i][0], p.h = 13, p.w = 11, p.oc = shapes[i][1];
        p.kh = p.kw = shapes[i][2], p.sh = p.sw = 1, p.dh = p.dw = 1;
        p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = shapes[i][2] / 2;
        p.group = shapes[i][3];
        p.oh = p.h, p.ow = p.w;
        nx = (size_t)p.n * p.c * p.h * p.w;
        nw = (size_t)p.oc * (p.c / p.group) * p.kh * p.kw;
        ny = (size_t)p.n * p.oc * p.oh * p.ow;
        ns = rt_conv_backward_scratch(&p);
        x = rnd(nx), w = rnd(nw), b = rnd((size_t)p.oc), y = rnd(ny);
        dy = rnd(ny), dx = rnd(nx), dw = rnd(nw), db = rnd((size_t)p.oc);
        scratch = rnd(ns);
        rt_conv_forward(y, x, w, b, &p, scratch);
        keep(y, ny);
        rt_conv_forward(y, x, w, NULL, &p, scratch);
        keep(y, ny);
        rt_conv_backward(dx, dw, db, dy, x, w, &p, scratch);
        keep(dx, nx);
        keep(dw, nw);
        keep(db, (size_t)p.oc);
        rt_conv_backward(NULL, dw, NULL, dy, x, NULL, &p, scratch);
        keep(dw, nw);
        rt_conv_backward(dx, NULL, db, dy, NULL, w, &p, scratch);
        keep(dx, nx);
        keep(db, (size_t)p.oc);
        free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw);
        free(db), free(scratch);
    }
}

#ifdef RT_NO_BLAS
/* rt_sgemm cut by rows (m >= n) and by columns, each transpose, beta 0
 * and 1, with sizes no thread count divides: the portable GEMM computes an
 * element in one order whatever its part. (OpenBLAS's parts need not give
 * the whole's bits, so this case is for the portable build only.) */
static void case_gemm_split(void)
{
    static const int shapes[2][3] = {{301, 67, 53}, {45, 333, 61}};
    int i, t;
    for (i = 0; i < 2; i++)
        for (t = 0; t < 8; t++) {
            const int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
            const int ta = t & 1, tb = t >> 1 & 1;
            const float beta = (float)(t >> 2);
            float *a = rnd((size_t)m * k), *b = rnd((size_t)k * n);
            float *c = rnd((size_t)m * n);
            rt_sgemm(ta, tb, m, n, k, 0.75f, a, ta ? m : k, b, tb ? k : n,
                     beta, c, n);
            keep(c, (size_t)m * n);
            free(a), free(b), free(c);
        }
}
#endif

static const case_fn cases[] = {case_pointwise, case_broadcast,
                                case_transpose, case_layernorm, case_softmax,
                                case_sce,       case_gather,    case_gemm_bias,
                                case_memory,    case_pool,      case_attention,
                                case_conv,      case_slice
#ifdef RT_NO_BLAS
                                , case_gemm_split
#endif
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* The case's output under `threads` threads, into buf; returns its length. */
static size_t run_case(int i, int threads, float *buf)
{
    rt_set_threads(threads);
    ck_assert_int_eq(rt_threads(), threads);
    out_buf = buf;
    out_len = 0;
    tseed(11 + (uint64_t)i);
    cases[i]();
    return out_len;
}

START_TEST(same_bits_on_1_2_3_threads)
{
    float *one = malloc(OUT_FLOATS * sizeof *one);
    float *more = malloc(OUT_FLOATS * sizeof *more);
    const size_t len = run_case(_i, 1, one);
    int t;
    ck_assert_ptr_nonnull(one);
    ck_assert_ptr_nonnull(more);
    for (t = 2; t <= 3; t++) {
        ck_assert_uint_eq(run_case(_i, t, more), len);
        ck_assert_msg(memcmp(one, more, len * sizeof *one) == 0,
                      "case %d: %d threads differ from 1", _i, t);
    }
    /* back to 1 after the workers ran: they stop and the bits stay */
    ck_assert_uint_eq(run_case(_i, 1, more), len);
    ck_assert(memcmp(one, more, len * sizeof *one) == 0);
    free(one);
    free(more);
}
END_TEST

START_TEST(thread_count_is_clamped)
{
    rt_set_threads(0);
    ck_assert_int_eq(rt_threads(), 1);
    rt_set_threads(-3);
    ck_assert_int_eq(rt_threads(), 1);
    rt_set_threads(1000);
    ck_assert_int_eq(rt_threads(), RT_MAX_THREADS);
    rt_set_threads(1);
    ck_assert_int_eq(rt_threads(), 1);
}
END_TEST

static Suite *threads_suite(void)
{
    Suite *s = suite_create("remat_rt threads");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, same_bits_on_1_2_3_threads, 0, N_CASES);
    tcase_add_test(tc, thread_count_is_clamped);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(threads_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
