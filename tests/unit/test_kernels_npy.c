/*
 * test_kernels_npy.c: unit tests of the runtime's .npy reader and writer
 * (rt_npy_read, rt_npy_write and their int64 forms), with Check.
 *
 * Files are checked both ways against numpy itself (python3 run on each
 * file: numpy reads ours, we read numpy's, including format version 2.0),
 * against a header written here by hand, and against the .npy format's
 * layout (the magic, the header padded to a multiple of 64 bytes); broken
 * files must be refused with the reason.
 */
#define _POSIX_C_SOURCE 200809L /* getpid */

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remat_rt.h"
#include "rt_testutil.h"

#define PY "/usr/bin/python3"

/* ---- .npy ---------------------------------------------------------------- */

static char npy_path[128];

static const char *tmp_npy(const char *tag)
{
    snprintf(npy_path, sizeof npy_path, "/tmp/remat_test_%ld_%s.npy",
             (long)getpid(), tag);
    return npy_path;
}

static int run_py(const char *code, const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, PY " -c \"import numpy as np; p = '%s'; %s\"",
             path, code);
    return system(cmd);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fclose(f);
    return n;
}

START_TEST(npy_round_trip)
{
    const int dims2[2] = {2, 3}, dims1[1] = {5}, dims3[3] = {2, 1, 3};
    const float data[6] = {1.5f, -2, 3.25f, 0, 1e-30f, -7e20f};
    float back[6];
    char why[128] = "";
    const char *p = tmp_npy("rt");
    unsigned char head[10];
    FILE *f;
    long hlen;
    ck_assert_int_eq(rt_npy_write(p, data, 2, dims2), 0);
    /* header: magic, version 1.0, and magic+len+dict a multiple of 64 */
    f = fopen(p, "rb");
    ck_assert(f != NULL && fread(head, 1, 10, f) == 10);
    fclose(f);
    ck_assert(memcmp(head, "\x93NUMPY\x01\x00", 8) == 0);
    hlen = head[8] | head[9] << 8;
    ck_assert_int_eq((10 + hlen) % 64, 0);
    ck_assert_int_eq(file_size(p), 10 + hlen + 6 * 4);
    ck_assert_int_eq(rt_npy_read(p, back, 2, dims2, why, sizeof why), 0);
    ck_assert(memcmp(back, data, sizeof data) == 0);
    /* numpy agrees on dtype, shape and values */
    ck_assert_int_eq(run_py("a = np.load(p); assert a.dtype == np.float32 and "
                            "a.shape == (2, 3) and a.flags.c_contiguous; "
                            "assert (a.ravel() == np.array([1.5, -2, 3.25, 0, "
                            "1e-30, -7e20], np.float32)).all()", p), 0);

    ck_assert_int_eq(rt_npy_write(p, data, 1, dims1), 0);
    ck_assert_int_eq(run_py("assert np.load(p).shape == (5,)", p), 0);
    ck_assert_int_eq(rt_npy_read(p, back, 1, dims1, why, sizeof why), 0);
    ck_assert(memcmp(back, data, 5 * sizeof *data) == 0);

    ck_assert_int_eq(rt_npy_write(p, data + 2, 0, NULL), 0);
    ck_assert_int_eq(run_py("a = np.load(p); assert a.shape == () and a == 3.25", p), 0);
    back[0] = 0;
    ck_assert_int_eq(rt_npy_read(p, back, 0, NULL, why, sizeof why), 0);
    ck_assert_float_eq(back[0], 3.25f);

    ck_assert_int_eq(rt_npy_write(p, data, 3, dims3), 0);
    ck_assert_int_eq(run_py("assert np.load(p).shape == (2, 1, 3)", p), 0);
    ck_assert_int_eq(rt_npy_read(p, back, 3, dims3, why, sizeof why), 0);
    ck_assert(memcmp(back, data, sizeof data) == 0);
    remove(p);
}
END_TEST

START_TEST(npy_wrong_shape)
{
    const int dims[2] = {3, 4}, want[2] = {4, 3}, want1[1] = {12};
    float data[12] = {0}, back[12];
    char why[128] = "";
    const char *p = tmp_npy("shape");
    ck_assert_int_eq(rt_npy_write(p, data, 2, dims), 0);
    ck_assert_int_eq(rt_npy_read(p, back, 2, want, why, sizeof why), -3);
    ck_assert_str_eq(why, "shape (3, 4) but expected (4, 3)");
    ck_assert_int_eq(rt_npy_read(p, back, 1, want1, why, sizeof why), -3);
    ck_assert_str_eq(why, "shape (3, 4) but expected (12,)");
    ck_assert_int_eq(rt_npy_read(p, back, 1, want1, NULL, 0), -3);
    /* data NULL: the header alone */
    ck_assert_int_eq(rt_npy_read(p, NULL, 2, want, why, sizeof why), -3);
    ck_assert_str_eq(why, "shape (3, 4) but expected (4, 3)");
    ck_assert_int_eq(rt_npy_read(p, NULL, 2, dims, why, sizeof why), 0);
    remove(p);
}
END_TEST

START_TEST(npy_reads_numpy_files)
{
    const int dims[2] = {2, 3};
    float back[6];
    char why[128] = "";
    const char *p = tmp_npy("np");
    int i;
    ck_assert_int_eq(run_py("np.save(p, np.arange(6, dtype=np.float32)"
                            ".reshape(2,3))", p), 0);
    ck_assert_msg(rt_npy_read(p, back, 2, dims, why, sizeof why) == 0, "%s", why);
    for (i = 0; i < 6; i++)
        ck_assert_float_eq(back[i], (float)i);
    /* format version 2.0 (4-byte header length) */
    ck_assert_int_eq(run_py("np.lib.format.write_array(open(p, 'wb'), "
                            "-np.arange(6, dtype=np.float32).reshape(2,3), "
                            "version=(2, 0))", p), 0);
    ck_assert_msg(rt_npy_read(p, back, 2, dims, why, sizeof why) == 0, "%s", why);
    for (i = 0; i < 6; i++)
        ck_assert_float_eq(back[i], -(float)i);
    remove(p);
}
END_TEST

/* int64 indices: numpy's file read back, ours read by numpy, and each
 * dtype refused where the other is wanted. */
START_TEST(npy_int64_both_ways)
{
    const int dims[2] = {2, 3};
    const int64_t vals[6] = {0, -1, 255, INT64_C(1) << 40, -(INT64_C(1) << 62), 7};
    int64_t back[6];
    float f[6];
    char why[128] = "";
    const char *p = tmp_npy("i64");
    int i;
    ck_assert_int_eq(run_py("np.save(p, np.array([0, -1, 255, 1 << 40, "
                            "-(1 << 62), 7], dtype=np.int64).reshape(2,3))", p), 0);
    ck_assert_msg(rt_npy_read_i64(p, back, 2, dims, why, sizeof why) == 0, "%s", why);
    for (i = 0; i < 6; i++)
        ck_assert(back[i] == vals[i]);
    ck_assert_int_eq(rt_npy_read(p, f, 2, dims, why, sizeof why), -2);
    ck_assert_str_eq(why, "dtype '<i8' is not float32 '<f4'");
    ck_assert_int_eq(rt_npy_write_i64(p, vals, 2, dims), 0);
    ck_assert_int_eq(run_py("a = np.load(p); assert a.dtype == np.int64; "
                            "assert a.tolist() == "
                            "[[0, -1, 255], [1 << 40, -(1 << 62), 7]]", p), 0);
    ck_assert_int_eq(run_py("np.save(p, np.zeros((2, 3), np.float32))", p), 0);
    ck_assert_int_eq(rt_npy_read_i64(p, back, 2, dims, why, sizeof why), -2);
    ck_assert_str_eq(why, "dtype '<f4' is not int64 '<i8'");
    remove(p);
}
END_TEST

/* A hand-made header: keys in another order, odd spacing, v1.0. */
START_TEST(npy_reads_reordered_header)
{
    const char dict[] = "{ \"shape\" :(3 ,) ,'fortran_order':False,"
                        "'descr':'<f4'}";
    const int dims[1] = {3};
    const float vals[3] = {1, 2, 3};
    float back[3];
    char head[128], why[128] = "";
    const char *p = tmp_npy("hand");
    FILE *f = fopen(p, "wb");
    size_t dl = strlen(dict);
    ck_assert(f != NULL && dl + 11 <= sizeof head);
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = 118, head[9] = 0;
    memset(head + 10, ' ', 118);
    memcpy(head + 10, dict, dl);
    head[127] = '\n';
    /* raw host floats: this test assumes a little-endian host */
    ck_assert(fwrite(head, 1, 128, f) == 128 && fwrite(vals, 4, 3, f) == 3);
    fclose(f);
    ck_assert_msg(rt_npy_read(p, back, 1, dims, why, sizeof why) == 0, "%s", why);
    ck_assert(memcmp(back, vals, sizeof vals) == 0);
    remove(p);
}
END_TEST

START_TEST(npy_rejects_bad_files)
{
    const int dims[2] = {2, 3};
    float back[6], data[6] = {0};
    char why[128] = "";
    const char *p = tmp_npy("bad");
    long n;
    ck_assert_int_eq(run_py("np.save(p, np.zeros((2, 3)))", p), 0);
    ck_assert_int_eq(rt_npy_read(p, back, 2, dims, why, sizeof why), -2);
    ck_assert_str_eq(why, "dtype '<f8' is not float32 '<f4'");
    ck_assert_int_eq(run_py("np.save(p, np.asfortranarray(np.zeros((2, 3), "
                            "np.float32)))", p), 0);
    ck_assert_int_eq(rt_npy_read(p, back, 2, dims, why, sizeof why), -2);
    ck_assert_msg(strstr(why, "fortran_order") != NULL, "%s", why);
    /* a file cut 8 bytes short */
    ck_assert_int_eq(rt_npy_write(p, data, 2, dims), 0);
    n = file_size(p);
    ck_assert_int_eq(run_py("import os; os.truncate(p, os.path.getsize(p) - 8)",
                            p), 0);
    ck_assert_int_eq(file_size(p), n - 8);
    ck_assert_int_eq(rt_npy_read(p, back, 2, dims, why, sizeof why), -2);
    ck_assert_str_eq(why, "truncated data: 16 of 24 bytes");
    /* not .npy at all */
    ck_assert_int_eq(run_py("open(p, 'w').write('hello, world')", p), 0);
    ck_assert_int_eq(rt_npy_read(p, back, 2, dims, why, sizeof why), -2);
    ck_assert_msg(strstr(why, "magic") != NULL, "%s", why);
    remove(p);
    /* missing */
    ck_assert_int_eq(rt_npy_read(p, back, 2, dims, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "cannot open") != NULL, "%s", why);
    ck_assert_int_eq(rt_npy_write("/nonexistent-dir/x.npy", data, 2, dims), -1);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *npy_suite(void)
{
    Suite *s = suite_create("remat_rt npy");
    TCase *tc;

    tc = tcase_create("npy");
    tcase_set_timeout(tc, 60); /* starts python */
    tcase_add_test(tc, npy_round_trip);
    tcase_add_test(tc, npy_wrong_shape);
    tcase_add_test(tc, npy_reads_numpy_files);
    tcase_add_test(tc, npy_int64_both_ways);
    tcase_add_test(tc, npy_reads_reordered_header);
    tcase_add_test(tc, npy_rejects_bad_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(npy_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
