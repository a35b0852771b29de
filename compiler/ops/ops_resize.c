/*
 * ops_resize.c: Resize (runtime resize.c) as ONNX defines it for modes
 * nearest and linear (linear, bilinear, trilinear: linear along every axis
 * whose size changes), over any rank up to RT_RESIZE_MAX_RANK. remat's
 * Resize takes the output's shape as the attribute `sizes` (the importer
 * folds ONNX's constant scales or sizes into it). Per axis, with
 * scale = out / in, output index j maps to the input coordinate
 *   half_pixel:                (j + 0.5) / scale - 0.5
 *   pytorch_half_pixel:        the same, or 0 where out is 1
 *   align_corners:             j * (in - 1) / (out - 1), or 0 where out is 1
 *   asymmetric:                j / scale
 *   tf_half_pixel_for_nearest: (j + 0.5) / scale
 * nearest rounds it (nearest_mode: round_prefer_floor, round_prefer_ceil,
 * floor, ceil), linear reads floor(x) and floor(x) + 1 with weights
 * 1 - f and f (f = x - floor(x)); indices are clamped into [0, in), which
 * is ONNX's edge padding. The tables are worked out here in double and
 * written as static data; the kernels only follow them.
 */
#include "ops.h"

#include <math.h>
#include <string.h>

int shape_resize(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *s = node_attr(n, "sizes");
    if (x->rank < 1 || x->rank > RT_RESIZE_MAX_RANK)
        return node_error(c, g, n, ctx_printf(c, "Resize input '%s' has "
            "shape %s; remat resizes tensors of rank 1 to %d", x->name,
            shape_str(c, x), RT_RESIZE_MAX_RANK));
    if (!s->set || s->nints != x->rank)
        return node_error(c, g, n, ctx_printf(c, "Resize needs sizes=\"...\" "
            "with %d values, the output's shape, for input '%s' of shape %s",
            x->rank, x->name, shape_str(c, x)));
    long dims[MAX_RANK];
    for (int a = 0; a < x->rank; a++) {
        dims[a] = s->ints[a];
        if (dims[a] < 1)
            return node_error(c, g, n, ctx_printf(c, "Resize sizes has %ld "
                "for axis %d; sizes must be positive", dims[a], a));
    }
    set_shape(OUT(0), x->rank, dims);
    return 0;
}

/* Output index j's coordinate in the input, per the transformation. */
static double source_coord(const char *ctm, long j, long in, long out)
{
    const double scale = (double)out / (double)in;
    if (!strcmp(ctm, "align_corners"))
        return out == 1 ? 0.0 : (double)j * (double)(in - 1) / (double)(out - 1);
    if (!strcmp(ctm, "asymmetric"))
        return (double)j / scale;
    if (!strcmp(ctm, "tf_half_pixel_for_nearest"))
        return ((double)j + 0.5) / scale;
    if (!strcmp(ctm, "pytorch_half_pixel") && out == 1)
        return 0.0;
    return ((double)j + 0.5) / scale - 0.5;    /* half_pixel */
}

static long round_nearest(const char *mode, double x)
{
    double fl = floor(x);
    if (!strcmp(mode, "floor"))
        return (long)fl;
    if (!strcmp(mode, "ceil"))
        return (long)ceil(x);
    if (x - fl == 0.5)
        return (long)(strcmp(mode, "round_prefer_ceil") == 0 ? fl + 1 : fl);
    return (long)floor(x + 0.5);
}

static long clamp_index(long i, long in)
{
    return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* Axis a's tables: idx (out or 2 * out ints) and, for two taps, wt;
 * returns the taps (0: the identity, no table). */
static int axis_table(const Node *n, long in, long out, long *idx, double *wt)
{
    const char *mode = node_attr(n, "mode")->s;
    const char *ctm = node_attr(n, "coordinate_transformation_mode")->s;
    const char *nm = node_attr(n, "nearest_mode")->s;
    int identity = in == out, two = 0;
    for (long j = 0; j < out; j++) {
        double x = source_coord(ctm, j, in, out);
        if (!strcmp(mode, "nearest")) {
            idx[j] = clamp_index(round_nearest(nm, x), in);
            identity &= idx[j] == j;
            continue;
        }
        double fl = floor(x), f = x - fl;
        idx[2 * j] = clamp_index((long)fl, in);
        idx[2 * j + 1] = clamp_index((long)fl + 1, in);
        wt[2 * j] = 1.0 - f;
        wt[2 * j + 1] = f;
        two |= f != 0.0;
        identity &= f == 0.0 && idx[2 * j] == j;
    }
    if (identity)
        return 0;
    if (!strcmp(mode, "nearest"))
        return 1;
    if (!two)       /* every weight on the first tap: one tap */
        for (long j = 0; j < out; j++)
            idx[j] = idx[2 * j];
    return two ? 2 : 1;
}

void emit_resize_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0), *y = OUT(0);
    Buf in, out, idx, wt;
    buf_init(&in, e->ctx), buf_init(&out, e->ctx);
    buf_init(&idx, e->ctx), buf_init(&wt, e->ctx);
    for (int a = 0; a < x->rank; a++) {
        long *ti = ctx_alloc(e->ctx, (size_t)(2 * y->dims[a]) * sizeof *ti);
        double *tw = ctx_alloc(e->ctx, (size_t)(2 * y->dims[a]) * sizeof *tw);
        int taps = axis_table(n, x->dims[a], y->dims[a], ti, tw);
        const char *sep = a ? ", " : "";
        buf_printf(&in, "%s%ld", sep, x->dims[a]);
        buf_printf(&out, "%s%ld", sep, y->dims[a]);
        if (taps == 0) {
            buf_printf(&idx, "%sNULL", sep);
            buf_printf(&wt, "%sNULL", sep);
            continue;
        }
        const char *iname = ctx_printf(e->ctx, "resize_idx_%s_%d", n->cname, a);
        emit_int_array(e, iname, ti, (int)(taps * y->dims[a]));
        buf_printf(&idx, "%s%s", sep, iname);
        if (taps == 1) {
            buf_printf(&wt, "%sNULL", sep);
            continue;
        }
        const char *wname = ctx_printf(e->ctx, "resize_wt_%s_%d", n->cname, a);
        Buf w;
        buf_init(&w, e->ctx);
        for (long j = 0; j < 2 * y->dims[a]; j++) {
            const char *v = ctx_printf(e->ctx, "%.9g", (double)(float)tw[j]);
            buf_printf(&w, "%s%s%sf", j ? ", " : "", v,
                       strpbrk(v, ".e") ? "" : ".0");
        }
        emit(e, "static const float %s[] = {%s};", wname, w.data);
        buf_printf(&wt, "%s%s", sep, wname);
    }
    emit(e, "static const rt_resize resize_%s = {%d, {%s}, {%s}, {%s}, {%s}};",
         n->cname, x->rank, in.data, out.data, idx.data, wt.data);
}

/* Per output element, a multiply-add per tap of every axis's corners. */
double flops_resize(const Graph *g, const Node *n)
{
    int linear = !strcmp(node_attr(n, "mode")->s, "linear");
    double corners = 1;
    for (int a = 0; linear && a < IN(0)->rank; a++)
        corners *= IN(0)->dims[a] != OUT(0)->dims[a] ? 2 : 1;
    return 2.0 * corners * (double)OUT(0)->numel;
}

void emit_resize_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in)
{
    emit(e, "rt_resize_forward(%s, %s, &resize_%s);", out[0], in[0],
         n->cname);
}

void emit_resize_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_resize_backward(%s, %s, &resize_%s);", or_null(din, 0, n->nin),
         dout[0], n->cname);
}
