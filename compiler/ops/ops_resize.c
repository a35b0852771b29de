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
 *   tf_half_pixel_for_nn: (j + 0.5) / scale
 * nearest rounds it (nearest_mode: round_prefer_floor, round_prefer_ceil,
 * floor, ceil), linear reads floor(x) and floor(x) + 1 with weights
 * 1 - f and f (f = x - floor(x)); indices are clamped into [0, in), which
 * is ONNX's edge padding. The tables are worked out here in double and
 * written as static data; the kernels only follow them.
 */
#include "ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The `scales` attribute's values (the importer keeps ONNX's own where it
 * gave scales: the coordinates read them), or 0 when not given; -1 where
 * it is not `rank` positive numbers. */
static int resize_scales(const Node *n, int rank, double *sc)
{
    const Attr *a = node_attr(n, "scales");
    if (!a->set)
        return 0;
    const char *p = a->s;
    for (int i = 0; i < rank; i++) {
        char *end;
        sc[i] = strtod(p, &end);
        if (end == p || !(sc[i] > 0) || !isfinite(sc[i]))
            return -1;
        p = end;
    }
    while (*p == ' ')
        p++;
    return *p ? -1 : 1;
}

int shape_resize(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *s = node_attr(n, "sizes");
    double sc[MAX_RANK];
    if (x->rank < 1 || x->rank > RT_RESIZE_MAX_RANK)
        return node_error(c, g, n, ctx_printf(c, "Resize input '%s' has "
            "shape %s; remat resizes tensors of rank 1 to %d", x->name,
            shape_str(c, x), RT_RESIZE_MAX_RANK));
    if (!s->set || s->nints != x->rank)
        return node_error(c, g, n, ctx_printf(c, "Resize needs sizes=\"...\" "
            "with %d values, the output's shape, for input '%s' of shape %s",
            x->rank, x->name, shape_str(c, x)));
    int given = resize_scales(n, x->rank, sc);
    if (given < 0)
        return node_error(c, g, n, ctx_printf(c, "Resize scales=\"%s\" must "
            "be %d positive numbers, one per axis of input '%s'",
            node_attr(n, "scales")->s, x->rank, x->name));
    long dims[MAX_RANK];
    double numel = 1;
    for (int a = 0; a < x->rank; a++) {
        dims[a] = s->ints[a];
        if (dims[a] < 1)
            return node_error(c, g, n, ctx_printf(c, "Resize sizes has %ld "
                "for axis %d; sizes must be positive", dims[a], a));
        numel *= (double)dims[a];
        if (numel > (double)MAX_NUMEL)
            return node_error(c, g, n, ctx_printf(c, "Resize sizes give more "
                "than %ld elements", (long)MAX_NUMEL));
        if (given && floor((double)x->dims[a] * sc[a]) != (double)dims[a])
            return node_error(c, g, n, ctx_printf(c, "Resize sizes has %ld "
                "for axis %d but scale %g of its %ld elements gives %.0f "
                "(floor of the product)", dims[a], a, sc[a], x->dims[a],
                floor((double)x->dims[a] * sc[a])));
    }
    set_shape(OUT(0), x->rank, dims);
    return 0;
}

/* Output index j's coordinate in the input, per the transformation, with
 * ONNX's scale and resized length: the given scale and in * scale, or
 * out / in and out where only sizes were given. */
static double source_coord(const char *ctm, long j, long in, double scale,
                           double len)
{
    if (!strcmp(ctm, "align_corners"))
        return len == 1 ? 0.0 : (double)j * (double)(in - 1) / (len - 1);
    if (!strcmp(ctm, "asymmetric"))
        return (double)j / scale;
    if (!strcmp(ctm, "tf_half_pixel_for_nn"))
        return ((double)j + 0.5) / scale;
    if (!strcmp(ctm, "pytorch_half_pixel") && len == 1)
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

/* Output j's taps along one axis: the input indices (unclamped) and
 * weights, 1 (nearest), 2 (linear) or 4 (cubic); returns the count. With
 * r the coordinate's distance from the tap on its left (in (0, 1]: an
 * integer coordinate is r = 1 from the index below it, as ONNX's
 * reference takes it), linear weighs (1 - r, r) and cubic uses Keys'
 * kernel with a = cubic_coeff_a over the four taps around. */
static int taps_of(const Node *n, double x, long *ix, double *w)
{
    const char *mode = node_attr(n, "mode")->s;
    if (!strcmp(mode, "nearest")) {
        ix[0] = round_nearest(node_attr(n, "nearest_mode")->s, x);
        w[0] = 1;
        return 1;
    }
    double fl = floor(x), r = x - fl;
    if (r == 0)
        fl -= 1, r = 1;
    if (!strcmp(mode, "linear")) {
        ix[0] = (long)fl, ix[1] = (long)fl + 1;
        w[0] = 1 - r, w[1] = r;
        return 2;
    }
    const double A = node_float(n, "cubic_coeff_a"), q = 1 - r;
    w[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
    w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    w[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
    w[3] = ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A;
    for (int t = 0; t < 4; t++)
        ix[t] = (long)fl - 1 + t;
    return 4;
}

/* Axis a's tables: idx and wt (taps * out each); returns the taps per
 * output (0: the identity, no table; 1: an index alone). Indices outside
 * the input are clamped onto its edge (ONNX's edge padding), or, with
 * exclude_outside, lose their weight, the rest scaled to sum to 1. */
static int axis_table(const Node *n, long in, long out, double scale,
                      double len, long *idx, double *wt)
{
    const char *ctm = node_attr(n, "coordinate_transformation_mode")->s;
    int excl = (int)node_int(n, "exclude_outside"), taps = 1;
    int one = 1, identity = in == out;
    for (long j = 0; j < out; j++) {
        long ix[4];
        double w[4], sum = 0;
        taps = taps_of(n, source_coord(ctm, j, in, scale, len), ix, w);
        for (int t = 0; t < taps; t++) {
            if (excl && (ix[t] < 0 || ix[t] >= in))
                w[t] = 0;
            sum += w[t];
            ix[t] = ix[t] < 0 ? 0 : ix[t] >= in ? in - 1 : ix[t];
        }
        int ones = 0, hot = 0;
        for (int t = 0; t < taps; t++) {
            if (excl)
                w[t] /= sum;
            idx[j * taps + t] = ix[t];
            wt[j * taps + t] = w[t];
            if (w[t] == 1)
                ones++, hot = t;
            else if (w[t] != 0)
                ones = 2;
        }
        one &= ones == 1;
        identity &= ones == 1 && ix[hot] == j;
    }
    if (identity)
        return 0;
    if (one && taps > 1) {     /* each output reads one input whole */
        for (long j = 0; j < out; j++)
            for (int t = 0; t < taps; t++)
                if (wt[j * taps + t] == 1) {
                    idx[j] = idx[j * taps + t];
                    break;
                }
        return 1;
    }
    return taps;
}

void emit_resize_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0), *y = OUT(0);
    double sc[MAX_RANK];
    int given = resize_scales(n, x->rank, sc);
    Buf in, out, tp, idx, wt;
    buf_init(&in, e->ctx), buf_init(&out, e->ctx), buf_init(&tp, e->ctx);
    buf_init(&idx, e->ctx), buf_init(&wt, e->ctx);
    for (int a = 0; a < x->rank; a++) {
        long *ti = ctx_alloc(e->ctx, (size_t)(4 * y->dims[a]) * sizeof *ti);
        double *tw = ctx_alloc(e->ctx, (size_t)(4 * y->dims[a]) * sizeof *tw);
        double scale = given > 0 ? sc[a] : (double)y->dims[a] / (double)x->dims[a];
        double len = given > 0 ? (double)x->dims[a] * sc[a] : (double)y->dims[a];
        int taps = axis_table(n, x->dims[a], y->dims[a], scale, len, ti, tw);
        const char *sep = a ? ", " : "";
        buf_printf(&in, "%s%ld", sep, x->dims[a]);
        buf_printf(&out, "%s%ld", sep, y->dims[a]);
        buf_printf(&tp, "%s%d", sep, taps);
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
        for (long j = 0; j < taps * y->dims[a]; j++) {
            const char *v = ctx_printf(e->ctx, "%.9g", (double)(float)tw[j]);
            buf_printf(&w, "%s%s%sf", j ? ", " : "", v,
                       strpbrk(v, ".e") ? "" : ".0");
        }
        emit(e, "static const float %s[] = {%s};", wname, w.data);
        buf_printf(&wt, "%s%s", sep, wname);
    }
    emit(e, "static const rt_resize resize_%s = {%d, {%s}, {%s}, {%s}, {%s}, "
         "{%s}};", n->cname, x->rank, in.data, out.data, tp.data, idx.data,
         wt.data);
}

/* Per output element, a multiply-add per tap of every axis's corners. */
double flops_resize(const Graph *g, const Node *n)
{
    const char *mode = node_attr(n, "mode")->s;
    int taps = !strcmp(mode, "linear") ? 2 : !strcmp(mode, "cubic") ? 4 : 1;
    double corners = 1;
    for (int a = 0; a < IN(0)->rank; a++)
        corners *= IN(0)->dims[a] != OUT(0)->dims[a] ? taps : 1;
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
