/*
 * test_kernels_set.c: a backward kernel's _set twin writes the gradient it
 * is told to (remat_rt.h): the same values as the adding kernel on a zeroed
 * buffer, without reading the buffer's old contents.
 *
 * Every case runs the plain kernel into zeros and the _set twin into a
 * buffer of NaNs: a twin that read (or added into) its old contents would
 * leave NaNs. Values must be equal as floats (a zero's sign may differ:
 * adding a -0 contribution into +0 gives +0, writing it keeps -0). A
 * gradient the twin is not told to write still adds: it starts from random
 * values in both runs and must come out bitwise the same.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remat_rt.h"
#include "rt_testutil.h"

START_TEST(gemm_writes_da_and_db)
{
    const int m = 37, n = 29, k = 41;
    float *a = rnd((size_t)m * k), *b = rnd((size_t)k * n);
    float *dy = rnd((size_t)m * n), *dc0 = rnd((size_t)n);
    int ta, tb;
    for (ta = 0; ta < 2; ta++)
        for (tb = 0; tb < 2; tb++) {
            float *da0 = zeros((size_t)m * k), *db0 = zeros((size_t)k * n);
            float *da1 = nans((size_t)m * k), *db1 = nans((size_t)k * n);
            float *dcz = copy(dc0, (size_t)n), *dcs = copy(dc0, (size_t)n);
            rt_gemm_backward(da0, db0, dcz, dy, a, b, m, n, k, ta, tb, 0.5f,
                             2.0f, 1, n);
            rt_gemm_backward_set(da1, db1, dcs, dy, a, b, m, n, k, ta, tb,
                                 0.5f, 2.0f, 1, n, 3u);
            same_values("gemm da", da0, da1, (size_t)m * k);
            same_values("gemm db", db0, db1, (size_t)k * n);
            /* dc was not asked to be written: it added, from the same start */
            ck_assert(memcmp(dcz, dcs, (size_t)n * sizeof *dcz) == 0);
            free(da0), free(db0), free(da1), free(db1), free(dcz), free(dcs);
        }
    {   /* dc written: the bias sum from zeros */
        float *dcz = zeros((size_t)n), *dcs = nans((size_t)n);
        rt_gemm_backward(NULL, NULL, dcz, dy, a, b, m, n, k, 0, 0, 1.0f, 2.0f,
                         1, n);
        rt_gemm_backward_set(NULL, NULL, dcs, dy, a, b, m, n, k, 0, 0, 1.0f,
                             2.0f, 1, n, 4u);
        same_values("gemm dc", dcz, dcs, (size_t)n);
        free(dcz), free(dcs);
    }
    free(a), free(b), free(dy), free(dc0);
}
END_TEST

START_TEST(transpose_writes)
{
    const int dims[3] = {4, 6, 5}, perm[3] = {2, 0, 1};
    const size_t n = 120;
    float *dy = rnd(n), *want = zeros(n), *got = nans(n);
    rt_transpose_backward(want, dy, 3, dims, perm);
    rt_transpose_backward_set(got, dy, 3, dims, perm, 1u);
    same_values("transpose", want, got, n);
    free(dy), free(want), free(got);
}
END_TEST

static Suite *set_suite(void)
{
    Suite *s = suite_create("remat_rt _set twins");
    TCase *tc = tcase_create("set");
    tcase_add_test(tc, gemm_writes_da_and_db);
    tcase_add_test(tc, transpose_writes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(set_suite());
    int failed;
    tseed(5);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
