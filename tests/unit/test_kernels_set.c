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
