/*
 * gemm_m4.c: instructions per multiply-add of the portable GEMM (rt_sgemm
 * built with -DRT_NO_BLAS) on a Cortex-M4, for each of the four transpose
 * cases, 64 x 64 x 64 with alpha 1 and beta 1. Runs bare-metal under
 * `qemu-system-arm -M mps2-an386 -icount shift=0`, where every instruction
 * takes one virtual nanosecond; the board's CMSDK timer 0 counts at 25 MHz,
 * one tick per 40 instructions, so the count includes everything a call
 * does (loads, loop and pointer updates, edges) to within 40 instructions.
 * Linked with examples/cortex-m/startup.c and mps2-an386.ld; `make bench`
 * builds and runs it (the Makefile's build/gemm_m4.elf).
 */
#include <stdint.h>
#include <string.h>

#include "fw.h"
#include "remat_rt.h"

#define TIMER0 ((volatile uint32_t *)0x40000000u) /* CTRL, VALUE, RELOAD */
#define N 64

static float a[N * N], b[N * N], c[N * N];

static void put_line(const char *label, unsigned long v)
{
    char line[80], d[24];
    int n = 0, len = (int)strlen(label);
    memcpy(line, label, (size_t)len);
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    line[len++] = ' ';
    while (n)
        line[len++] = d[--n];
    line[len++] = '\n';
    line[len] = '\0';
    fw_puts(line);
}

int main(void)
{
    static const char *const names[4] = {
        "NN instructions per 1000 multiply-adds",
        "TN instructions per 1000 multiply-adds",
        "NT instructions per 1000 multiply-adds",
        "TT instructions per 1000 multiply-adds"};
    int t, i;
    for (i = 0; i < N * N; i++) {
        a[i] = (float)(i % 7) * 0.25f;
        b[i] = (float)(i % 5) * 0.5f;
    }
    for (t = 0; t < 4; t++) {
        const int ta = t & 1, tb = t >> 1;
        uint32_t t0, t1;
        TIMER0[2] = 0xFFFFFFFFu;
        TIMER0[1] = 0xFFFFFFFFu;
        TIMER0[0] = 1;
        t0 = TIMER0[1];
        rt_sgemm(ta, tb, N, N, N, 1.0f, a, N, b, N, 1.0f, c, N);
        t1 = TIMER0[1];
        put_line(names[t], (unsigned long)((uint64_t)(t0 - t1) * 40u * 1000u /
                                           ((uint64_t)N * N * N)));
    }
    return 0;
}
