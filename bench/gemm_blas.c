/*
 * gemm_blas.c: the runtime's portable GEMM (rt_sgemm built with
 * -DRT_NO_BLAS: the register-blocked kernel) against OpenBLAS's cblas_sgemm
 * on this machine, one thread, on the shapes a train step of the shipped
 * MLP makes and on square ones. For each: GFLOP/s of both (median of 9
 * timed runs after 2 warm-ups) and the ratio OpenBLAS / portable; and the
 * largest difference between the two results, relative to the sum of
 * |terms| (they sum in different orders, so not bitwise). `make bench` runs
 * it; build: see the Makefile's build/gemm_blas.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remat_rt.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    const char *what;
    int ta, tb, m, n, k;
} Shape;

static void blas(const Shape *s, const float *a, const float *b, float *c)
{
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, a,
                s->ta ? s->m : s->k, b, s->tb ? s->k : s->n, 0.0f, c, s->n);
}

static void portable(const Shape *s, const float *a, const float *b, float *c)
{
    rt_sgemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, s->ta ? s->m : s->k, b,
             s->tb ? s->k : s->n, 0.0f, c, s->n);
}

/* median seconds of one call, each timed run repeating it enough to last */
static double time_it(void (*f)(const Shape *, const float *, const float *,
                                 float *),
                      const Shape *s, const float *a, const float *b, float *c)
{
    double t[9];
    int reps = 1, r, i;
    double t0;
    for (;;) {   /* calibrate: about 20 ms a run */
        t0 = now_s();
        for (i = 0; i < reps; i++)
            f(s, a, b, c);
        if (now_s() - t0 > 0.02 || reps > 1 << 20)
            break;
        reps *= 2;
    }
    for (r = 0; r < 9; r++) {
        t0 = now_s();
        for (i = 0; i < reps; i++)
            f(s, a, b, c);
        t[r] = (now_s() - t0) / reps;
    }
    qsort(t, 9, sizeof *t, cmp_double);
    return t[4];
}

int main(void)
{
    static const Shape shapes[] = {
        {"mlp12 fwd x W^T", 0, 1, 32, 256, 256},
        {"mlp12 dx = dy W", 0, 0, 32, 256, 256},
        {"mlp12 dW = dy^T x", 1, 0, 256, 256, 32},
        {"square 64", 0, 0, 64, 64, 64},
        {"square 256", 0, 0, 256, 256, 256},
        {"square 512", 0, 0, 512, 512, 512},
    };
    size_t i;
    printf("%-22s %4s %4s %4s %9s %9s %7s %9s\n", "shape", "m", "n", "k",
           "portable", "OpenBLAS", "ratio", "max diff");
    for (i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const Shape *s = &shapes[i];
        size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n,
               nc = (size_t)s->m * s->n, j;
        float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b),
              *c1 = malloc(nc * sizeof *c1), *c2 = malloc(nc * sizeof *c2);
        double flops = 2.0 * s->m * s->n * s->k, tp, tb, worst = 0;
        if (!a || !b || !c1 || !c2)
            return 1;
        rt_init_uniform(a, na, -1.0f, 1.0f, 1, 1);
        rt_init_uniform(b, nb, -1.0f, 1.0f, 1, 2);
        portable(s, a, b, c1);
        blas(s, a, b, c2);
        for (j = 0; j < nc; j++) {
            double d = fabs((double)c1[j] - c2[j]) / s->k;   /* |terms| <= k */
            worst = d > worst ? d : worst;
        }
        tp = time_it(portable, s, a, b, c1);
        tb = time_it(blas, s, a, b, c2);
        printf("%-22s %4d %4d %4d %9.2f %9.2f %6.1fx %9.1e\n", s->what, s->m,
               s->n, s->k, flops / tp * 1e-9, flops / tb * 1e-9, tp / tb,
               worst);
        free(a);
        free(b);
        free(c1);
        free(c2);
    }
    return 0;
}
