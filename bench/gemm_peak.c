/*
 * gemm_peak.c: the sgemm peak the benchmark's model FLOP utilization is
 * measured against: OpenBLAS's cblas_sgemm on square N x N matrices
 * (N = 1024 unless given), with as many threads as OPENBLAS_NUM_THREADS
 * says. Prints "gflops G": 2 N^3 over the fastest of 7 timed calls after
 * one warm-up (a peak: the fastest call is the one least disturbed by
 * whatever else the machine runs). bench/run.py builds and runs it in
 * every round.
 * Usage: gemm_peak [N]
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024, r;
    size_t nn = (size_t)n * n, i;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b),
          *c = malloc(nn * sizeof *c);
    double best = 0;
    if (n <= 0 || !a || !b || !c)
        return 1;
    for (i = 0; i < nn; i++) {
        a[i] = (float)(i % 17) / 17.0f - 0.5f;
        b[i] = (float)(i % 13) / 13.0f - 0.5f;
    }
    for (r = -1; r < 7; r++) {
        double t0 = now_s(), dt;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                    a, n, b, n, 0.0f, c, n);
        dt = now_s() - t0;
        if (r == 0 || (r > 0 && dt < best))   /* r = -1: the warm-up */
            best = dt;
    }
    printf("gflops %.2f\n", 2.0 * n * n * n / best * 1e-9);
    free(a);
    free(b);
    free(c);
    return 0;
}
