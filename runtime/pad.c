/*
 * pad.c: ONNX Pad in its three modes (constant, reflect, edge) over any
 * rank, negative pads (cropping) included. Every output element comes
 * from one input element or is the constant, so the backward adds each
 * element of dy into the input element the forward read it from. Both
 * walk y in order on the calling thread: the backward's sums (an edge
 * element gathers a whole border) are then the same bits every time.
 */
#include "rt_impl.h"

/* The input index output index o reads along one axis of extent n with
 * `before` elements padded (negative: cropped) in front, or -1 for the
 * constant. Reflect mirrors about the first and last elements without
 * repeating them (numpy's and ONNX's "reflect"), as often as the pad
 * needs; edge repeats them. */
static long pad_source(long o, long n, long before, int mode)
{
    long i = o - before;
    if (i >= 0 && i < n)
        return i;
    if (mode == RT_PAD_CONSTANT)
        return -1;
    if (mode == RT_PAD_EDGE || n == 1)
        return i < 0 ? 0 : n - 1;
    {
        const long period = 2 * (n - 1);
        i %= period;
        if (i < 0)
            i += period;
        return i < n ? i : period - i;
    }
}

/* Walks y in order; for each element calls back with the offset of the
 * x element it reads, or -1 for the constant. Rows of the last axis are
 * handled at once: the outer coordinates fix the row of x (or the whole
 * row is the constant). */
static void pad_walk(float *y, const float *x, float *dx, const float *dy,
                     int rank, const int *xdims, const int *pads, int mode,
                     float value)
{
    int ydims[RT_MAX_RANK] = {0}, idx[RT_MAX_RANK] = {0}, d;
    long xstride[RT_MAX_RANK] = {0}, s = 1, rows = 1, r;
    int last, ylast;
    size_t oy = 0;
    if (rank == 0) {
        if (y != NULL)
            y[0] = x[0];
        else
            dx[0] += dy[0];
        return;
    }
    for (d = rank - 1; d >= 0; d--) {
        xstride[d] = s;
        s *= xdims[d];
        ydims[d] = xdims[d] + pads[d] + pads[rank + d];
        idx[d] = 0;
    }
    for (d = 0; d < rank - 1; d++)
        rows *= ydims[d];
    last = xdims[rank - 1];
    ylast = ydims[rank - 1];
    for (r = 0; r < rows; r++, oy += (size_t)ylast) {
        long base = 0;
        int j;
        for (d = 0; d < rank - 1 && base >= 0; d++) {
            long i = pad_source(idx[d], xdims[d], pads[d], mode);
            base = i < 0 ? -1 : base + i * xstride[d];
        }
        for (j = 0; j < ylast; j++) {
            long i = base < 0 ? -1 : pad_source(j, last, pads[rank - 1], mode);
            if (y != NULL)
                y[oy + (size_t)j] = i < 0 ? value : x[base + i];
            else if (i >= 0)
                dx[base + i] += dy[oy + (size_t)j];
        }
        for (d = rank - 2; d >= 0; d--) {   /* the next row's coordinates */
            if (++idx[d] < ydims[d])
                break;
            idx[d] = 0;
        }
    }
}

void rt_pad_forward(float *y, const float *x, int rank, const int *xdims,
                    const int *pads, int mode, float value)
{
    pad_walk(y, x, NULL, NULL, rank, xdims, pads, mode, value);
}

void rt_pad_backward(float *dx, const float *dy, int rank, const int *xdims,
                     const int *pads, int mode)
{
    if (dx != NULL)
        pad_walk(NULL, NULL, dx, dy, rank, xdims, pads, mode, 0.0f);
}
