/*
 * gemm_floor.c: the GEMM floor of a train step. Reads the rt_sgemm calls a
 * trainer built with -DRT_TRACE_GEMM printed for one step ("rt_sgemm ta tb m
 * n k lda ldb ldc alpha beta", one per line, on stdin), then runs exactly
 * those calls through the same rt_sgemm, alone, as one "step", and prints
 * the median milliseconds of N steps after 3 warm-up steps, as the trainer's
 * --bench does: the time a step would take if everything but the GEMMs were
 * free.
 *
 * Usage: gemm_floor N < calls.txt
 */
#define _POSIX_C_SOURCE 200809L
#include "remat_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    void *pa, *pb, *pc;     /* the trainer's pointers */
    float *a, *b, *c;       /* ours */
} Call;

/* One buffer per distinct traced pointer, as large as its largest use. */
typedef struct {
    void *key;
    size_t floats;
    float *data;
} Buffer;

static Buffer bufs[4096];
static int nbufs;

static void need(void *key, size_t floats)
{
    for (int i = 0; i < nbufs; i++)
        if (bufs[i].key == key) {
            if (floats > bufs[i].floats)
                bufs[i].floats = floats;
            return;
        }
    if (nbufs == 4096)
        exit(1);
    bufs[nbufs].key = key;
    bufs[nbufs++].floats = floats;
}

static float *data_of(void *key)
{
    for (int i = 0; i < nbufs; i++)
        if (bufs[i].key == key)
            return bufs[i].data;
    return NULL;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 50, n = 0, cap = 64;
    Call *calls = malloc((size_t)cap * sizeof *calls);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        Call c;
        if (sscanf(line, "rt_sgemm %d %d %d %d %d %d %d %d %f %f %p %p %p",
                   &c.ta, &c.tb, &c.m, &c.n, &c.k, &c.lda, &c.ldb, &c.ldc,
                   &c.alpha, &c.beta, &c.pa, &c.pb, &c.pc) != 13)
            continue;
        /* operand sizes from the leading dimensions, as BLAS reads them */
        need(c.pa, (size_t)(c.ta ? c.k : c.m) * c.lda);
        need(c.pb, (size_t)(c.tb ? c.n : c.k) * c.ldb);
        need(c.pc, (size_t)c.m * c.ldc);
        if (n == cap)
            calls = realloc(calls, (size_t)(cap *= 2) * sizeof *calls);
        calls[n++] = c;
    }
    if (n == 0 || steps < 1) {
        fprintf(stderr, "gemm_floor: no rt_sgemm calls on stdin\n");
        return 1;
    }
    for (int i = 0; i < nbufs; i++) {
        bufs[i].data = calloc(bufs[i].floats + 16, sizeof(float));
        for (size_t j = 0; j < bufs[i].floats; j++)
            bufs[i].data[j] = 0.01f * (float)(j % 97);
    }
    for (int i = 0; i < n; i++) {
        calls[i].a = data_of(calls[i].pa);
        calls[i].b = data_of(calls[i].pb);
        calls[i].c = data_of(calls[i].pc);
    }
    double *ms = malloc((size_t)steps * sizeof *ms);
    for (int s = -3; s < steps; s++) {
        double t0 = now_ms();
        for (int i = 0; i < n; i++) {
            Call *c = &calls[i];
            rt_sgemm(c->ta, c->tb, c->m, c->n, c->k, c->alpha, c->a, c->lda,
                     c->b, c->ldb, c->beta, c->c, c->ldc);
        }
        if (s >= 0)
            ms[s] = now_ms() - t0;
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp);
    printf("calls %d\nmedian_ms %.4f\n", n, ms[steps / 2]);
    return 0;
}
