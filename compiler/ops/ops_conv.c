/*
 * ops_conv.c: Conv (runtime conv.c, im2col and a GEMM), and the window
 * every Conv and pool is described by: an rt_window with strides, pads,
 * dilations, ceil_mode and auto_pad over 1, 2 or 3 spatial axes, checked
 * and written here once for both families (ops_pool.c uses shape_window and emit_window_static).
 */
#include "ops.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <string.h>

/* An ints attribute of exactly `count` values, for a window over `sp`
 * spatial axes (the default, dflt[i] or else dflt1, when not given). */
static int ints_attr(Ctx *c, const Graph *g, const Node *n, const char *name,
                     long dflt1, const long *dflt, int count, int sp,
                     long *out)
{
    const Attr *a = node_attr(n, name);
    if (a->set && a->nints != count)
        return node_error(c, g, n, ctx_printf(c, "%s %s has %d values; it "
            "takes %d for a %d-D input", n->row->name, name, a->nints,
            count, sp));
    for (int i = 0; i < count; i++) {
        out[i] = a->set ? a->ints[i] : dflt ? dflt[i] : dflt1;
        /* past MAX_NUMEL no window fits an input, and the int fields
         * of rt_window would not hold the output's extent */
        if (out[i] < (dflt1 > 0) || out[i] > MAX_NUMEL)
            return node_error(c, g, n, ctx_printf(c, "%s %s has %ld; %s "
                "must be %d to %ld", n->row->name, name, out[i],
                dflt1 > 0 ? "values" : "pads", dflt1 > 0, MAX_NUMEL));
    }
    return 0;
}

/* "AxBxC": the sizes v[0..count) for a message. */
static const char *sizes_str(Ctx *c, const long *v, int count)
{
    const char *s = ctx_printf(c, "%ld", v[0]);
    for (int i = 1; i < count; i++)
        s = ctx_printf(c, "%sx%ld", s, v[i]);
    return s;
}

/* One spatial axis of a window: the input's extent `in`, the window's
 * extent with dilations `ek`, the stride; pads[0] and pads[1] (begin, end)
 * as given, or as auto_pad makes them; returns the output's extent, 0 when
 * the window does not fit (NOTSET and VALID only).
 *   NOTSET: floor((in + pads - ek) / s) + 1, or with ceil_mode rounded up
 *     and then, as ONNX and PyTorch do, less one when the last window
 *     would start in the end padding (past in + pads[0]): no window starts
 *     in the padding only;
 *   VALID: no pads, floor((in - ek) / s) + 1;
 *   SAME_UPPER, SAME_LOWER: ceil(in / s), with the pads that takes,
 *     (out - 1) * s + ek - in (0 if less), split in two halves, the odd
 *     one at the end (UPPER) or the beginning (LOWER). */
static long window_axis(const char *auto_pad, int ceil_mode, long in, long ek,
                        long s, long *pads)
{
    if (strcmp(auto_pad, "VALID") == 0)
        pads[0] = pads[1] = 0;
    if (strncmp(auto_pad, "SAME_", 5) == 0) {
        long out = (in + s - 1) / s, total = (out - 1) * s + ek - in;
        total = total > 0 ? total : 0;
        pads[0] = strcmp(auto_pad, "SAME_UPPER") == 0 ? total / 2
                                                      : total - total / 2;
        pads[1] = total - pads[0];
        return out;
    }
    long span = in + pads[0] + pads[1] - ek;
    if (span < 0)
        return 0;
    if (!ceil_mode)
        return span / s + 1;
    long out = (span + s - 1) / s + 1;
    if ((out - 1) * s >= in + pads[0])
        out--;
    return out;
}

/* rt_window.col_cap, in floats, from the graph's --conv-scratch bytes: 0
 * when unbounded, else at least 1 (a cap below one float still bounds). */
static int col_cap_of(const Graph *g)
{
    long f = g->conv_scratch / (long)sizeof(float);
    if (g->conv_scratch <= 0)
        return 0;
    return f < 1 ? 1 : f > INT_MAX ? INT_MAX : (int)f;
}

/* The geometry of a Conv or pool node from its shapes and attributes;
 * -1 with ctx error (c may be NULL once shapes.c has accepted it). The
 * input has 1, 2 or 3 spatial axes after (N, C); they are the last of
 * rt_window's (d, h, w), the others 1 with no pads: a 1-D window is a 2-D
 * one a row high, a 2-D one a single depth slice. */
static int node_window(Ctx *c, const Graph *g, const Node *n, rt_window *w)
{
    static const char *const kernel_names[] = {"kL", "kH kW", "kD kH kW"};
    const Tensor *x = IN(0);
    int conv = n->op == OP_CONV;
    if (x->rank < 3 || x->rank > 5)
        return node_error(c, g, n, ctx_printf(c, "%s input '%s' has shape %s "
            "but must be 3-D, 4-D or 5-D (N, C, then 1 to 3 spatial axes: "
            "N, C, H, W for 2-D)", n->row->name, x->name, shape_str(c, x)));
    const int sp = x->rank - 2;
    long k[3], s[3], d[3], p[6];
    if (conv && IN(1)->rank != x->rank)
        return node_error(c, g, n, ctx_printf(c, "Conv weight '%s' has shape "
            "%s but must be %d-D (M, C/group, %s) for input '%s' of shape %s",
            IN(1)->name, shape_str(c, IN(1)), x->rank, kernel_names[sp - 1],
            x->name, shape_str(c, x)));
    if (!conv && !node_attr(n, "kernel_shape")->set)
        return node_error(c, g, n, ctx_printf(c, "%s needs kernel_shape=\"%s\"",
            n->row->name, kernel_names[sp - 1]));
    if (ints_attr(c, g, n, "kernel_shape", 1, conv ? IN(1)->dims + 2 : NULL,
                  sp, sp, k) ||
        ints_attr(c, g, n, "strides", 1, NULL, sp, sp, s) ||
        ints_attr(c, g, n, "dilations", 1, NULL, sp, sp, d) ||
        ints_attr(c, g, n, "pads", 0, NULL, 2 * sp, sp, p))
        return -1;
    if (conv && node_attr(n, "kernel_shape")->set)
        for (int i = 0; i < sp; i++)
            if (k[i] != IN(1)->dims[2 + i])
                return node_error(c, g, n, ctx_printf(c, "Conv kernel_shape is "
                    "%s but weight '%s' is %s", sizes_str(c, k, sp),
                    IN(1)->name, shape_str(c, IN(1))));
    /* in long, before the window narrows it to int */
    long group = conv ? node_int(n, "group") : 1;
    if (conv && (group < 1 || x->dims[1] % group || IN(1)->dims[0] % group))
        return node_error(c, g, n, ctx_printf(c, "Conv group=%ld must divide "
            "the input's %ld channels and the weight's %ld filters", group,
            x->dims[1], IN(1)->dims[0]));
    const char *auto_pad = node_attr(n, "auto_pad")->s;
    long ceil_mode = conv ? 0 : node_int(n, "ceil_mode");
    if (strcmp(auto_pad, "NOTSET") != 0 && node_attr(n, "pads")->set)
        return node_error(c, g, n, ctx_printf(c, "%s has both pads and "
            "auto_pad=\"%s\"; give one of them (auto_pad=\"NOTSET\" uses "
            "pads)", n->row->name, auto_pad));
    if (ceil_mode != 0 && ceil_mode != 1)
        return node_error(c, g, n, ctx_printf(c, "%s ceil_mode is %ld; it "
            "must be 0 (floor) or 1 (ceil)", n->row->name,
            ceil_mode));
    /* axis a of (d, h, w): the input's spatial axis a - (3 - sp), if any */
    long in[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, ss[3] = {1, 1, 1},
         dd[3] = {1, 1, 1}, pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0},
         out[3] = {1, 1, 1}, ext[3], padded[3];
    for (int i = 0; i < sp; i++) {
        const int a = 3 - sp + i;
        in[a] = x->dims[2 + i], kk[a] = k[i], ss[a] = s[i], dd[a] = d[i];
        pb[a] = p[i], pe[a] = p[sp + i];
    }
    int empty = 0;
    for (int a = 3 - sp; a < 3; a++) {
        long pads[2] = {pb[a], pe[a]};
        ext[a] = dd[a] * (kk[a] - 1) + 1;
        out[a] = window_axis(auto_pad, (int)ceil_mode, in[a], ext[a], ss[a],
                             pads);
        if (pads[0] > MAX_NUMEL || pads[1] > MAX_NUMEL)
            return node_error(c, g, n, ctx_printf(c, "%s auto_pad=\"%s\" "
                "would pad an axis of input '%s' by %ld and %ld for its "
                "window of %ld (with dilations); pads are at most %ld",
                n->row->name, auto_pad, x->name, pads[0], pads[1], ext[a],
                MAX_NUMEL));
        pb[a] = pads[0], pe[a] = pads[1];
        padded[a] = in[a] + pads[0] + pads[1];
        empty |= out[a] < 1;
    }
    if (empty)
        return node_error(c, g, n, ctx_printf(c, "%s window %s (with "
            "dilations) is larger than input '%s' padded to %s",
            n->row->name, sizes_str(c, ext + 3 - sp, sp), x->name,
            sizes_str(c, padded + 3 - sp, sp)));
    *w = (rt_window){.n = (int)x->dims[0], .c = (int)x->dims[1],
                     .d = (int)in[0], .h = (int)in[1], .w = (int)in[2],
                     .oc = conv ? (int)IN(1)->dims[0] : (int)x->dims[1],
                     .od = (int)out[0], .oh = (int)out[1], .ow = (int)out[2],
                     .kd = (int)kk[0], .kh = (int)kk[1], .kw = (int)kk[2],
                     .sd = (int)ss[0], .sh = (int)ss[1], .sw = (int)ss[2],
                     .dd = (int)dd[0], .dh = (int)dd[1], .dw = (int)dd[2],
                     .pad_front = (int)pb[0], .pad_top = (int)pb[1],
                     .pad_left = (int)pb[2], .pad_back = (int)pe[0],
                     .pad_bottom = (int)pe[1], .pad_right = (int)pe[2],
                     .group = (int)group,
                     .col_cap = conv ? col_cap_of(g) : 0};
    return 0;
}

int shape_window(Ctx *c, Graph *g, Node *n)
{
    rt_window w;
    if (node_window(c, g, n, &w))
        return -1;
    if (n->op == OP_CONV) {
        const Tensor *wt = IN(1);
        if (wt->dims[1] != w.c / w.group)
            return node_error(c, g, n, ctx_printf(c, "Conv weight '%s' has "
                "shape %s but input '%s' has %d channels in %d group(s): "
                "dimension 1 must be %d", wt->name, shape_str(c, wt),
                IN(0)->name, w.c, w.group, w.c / w.group));
        if (n->nin == 3 && (IN(2)->rank != 1 || IN(2)->dims[0] != w.oc))
            return node_error(c, g, n, ctx_printf(c, "Conv bias '%s' has shape "
                "%s but must be %d, one per filter", IN(2)->name,
                shape_str(c, IN(2)), w.oc));
    }
    /* (N, M or C, then the output's last rank - 2 of (od, oh, ow)) */
    const int rank = IN(0)->rank;
    long all[3] = {w.od, w.oh, w.ow}, dims[5] = {w.n, w.oc};
    for (int i = 2; i < rank; i++)
        dims[i] = all[3 - (rank - 2) + i - 2];
    set_shape(OUT(0), rank, dims);
    return 0;
}

rt_window window_of(const Graph *g, const Node *n)
{
    rt_window w;
    int bad = node_window(NULL, g, n, &w);
    assert(!bad && "shapes.c accepted the window");
    (void)bad;
    return w;
}

/* The window as C99 designated initializers, one line per group of
 * rt_window's fields, so that an embedder reading the generated C sees
 * which number is which (every field written, the depth axis's too). */
void emit_window_static(Emit *e, const Node *n)
{
    rt_window w = window_of(e->g, n);
    emit(e, "static const rt_window win_%s = {", n->cname);
    emit(e, "    .n = %d, .c = %d, .h = %d, .w = %d,", w.n, w.c, w.h, w.w);
    emit(e, "    .oc = %d, .oh = %d, .ow = %d,", w.oc, w.oh, w.ow);
    emit(e, "    .kh = %d, .kw = %d, .sh = %d, .sw = %d, .dh = %d, .dw = %d,",
         w.kh, w.kw, w.sh, w.sw, w.dh, w.dw);
    emit(e, "    .pad_top = %d, .pad_left = %d, .pad_bottom = %d, "
         ".pad_right = %d,", w.pad_top, w.pad_left, w.pad_bottom, w.pad_right);
    emit(e, "    .group = %d,", w.group);
    emit(e, "    .d = %d, .od = %d, .kd = %d, .sd = %d, .dd = %d, "
         ".pad_front = %d, .pad_back = %d%s", w.d, w.od, w.kd, w.sd, w.dd,
         w.pad_front, w.pad_back, w.col_cap ? "," : "};");
    /* written only when bounded, so that an unbounded window's text is
     * what it was before the field */
    if (w.col_cap)
        emit(e, "    .col_cap = %d};", w.col_cap);
}

long scratch_conv(const Graph *g, const Node *n, int backward)
{
    rt_window w = window_of(g, n);
    return (long)(backward ? rt_conv_backward_scratch(&w) : rt_conv_scratch(&w));
}

double flops_conv(const Graph *g, const Node *n)
{
    rt_window w = window_of(g, n);
    return 2.0 * OUT(0)->numel * (w.c / w.group) * w.kd * w.kh * w.kw +
           (n->nin == 3 ? (double)OUT(0)->numel : 0);
}

void emit_conv_fwd(Emit *e, const Node *n, const char *const *out,
                   const char *const *in)
{
    emit(e, "rt_conv_forward(%s, %s, %s, %s, &win_%s, %s);", out[0], in[0],
         in[1], n->nin == 3 ? in[2] : "NULL", n->cname,
         e->scratch ? e->scratch : "NULL");
}

void emit_conv_bwd(Emit *e, const Node *n, const char *const *din,
                   const char *const *dout, const char *const *in,
                   const char *const *out)
{
    (void)out;
    emit(e, "rt_conv_backward(%s, %s, %s, %s, %s, %s, &win_%s, %s);",
         or_null(din, 0, n->nin), or_null(din, 1, n->nin),
         or_null(din, 2, n->nin), dout[0], or_null(in, 0, n->nin),
         or_null(in, 1, n->nin), n->cname, e->scratch ? e->scratch : "NULL");
}
