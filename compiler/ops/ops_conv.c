/*
 * ops_conv.c: Conv (runtime conv.c, im2col and a GEMM), and the window
 * every Conv and pool is described by: an rt_window with strides, pads,
 * dilations, ceil_mode and auto_pad, checked and written here once for both
 * families (ops_pool.c uses shape_window and emit_window_static).
 */
#include "ops.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* An ints attribute of exactly two values (the default when not given). */
static int pair_attr(Ctx *c, const Graph *g, const Node *n, const char *name,
                     long dflt, int count, long *out)
{
    const Attr *a = node_attr(n, name);
    if (a->set && a->nints != count)
        return node_error(c, g, n, ctx_printf(c, "%s %s has %d values; it "
            "takes %d for a 2-D input", n->row->name, name, a->nints,
            count));
    for (int i = 0; i < count; i++) {
        out[i] = a->set ? a->ints[i] : dflt;
        if (out[i] < (dflt > 0) || (dflt > 0 && out[i] < 1))
            return node_error(c, g, n, ctx_printf(c, "%s %s has %ld; %s",
                n->row->name, name, out[i], dflt > 0
                    ? "values must be positive" : "pads must be 0 or more"));
    }
    return 0;
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

/* The geometry of a Conv or pool node from its shapes and attributes;
 * -1 with ctx error (c may be NULL once shapes.c has accepted it). */
static int node_window(Ctx *c, const Graph *g, const Node *n, rt_window *w)
{
    const Tensor *x = IN(0);
    int conv = n->op == OP_CONV;
    if (x->rank != 4)
        return node_error(c, g, n, ctx_printf(c, "%s input '%s' has shape %s "
            "but must be 4-D (N, C, H, W)", n->row->name, x->name,
            shape_str(c, x)));
    long k[2], s[2], d[2], p[4];
    if (conv && IN(1)->rank != 4)
        return node_error(c, g, n, ctx_printf(c, "Conv weight '%s' has shape "
            "%s but must be 4-D (M, C/group, kH, kW)", IN(1)->name,
            shape_str(c, IN(1))));
    if (!conv && !node_attr(n, "kernel_shape")->set)
        return node_error(c, g, n, ctx_printf(c, "%s needs kernel_shape=\"kH "
            "kW\"", n->row->name));
    if (pair_attr(c, g, n, "kernel_shape", conv ? IN(1)->dims[2] : 1, 2, k) ||
        pair_attr(c, g, n, "strides", 1, 2, s) ||
        pair_attr(c, g, n, "dilations", 1, 2, d) ||
        pair_attr(c, g, n, "pads", 0, 4, p))
        return -1;
    if (conv && node_attr(n, "kernel_shape")->set &&
        (k[0] != IN(1)->dims[2] || k[1] != IN(1)->dims[3]))
        return node_error(c, g, n, ctx_printf(c, "Conv kernel_shape is "
            "%ldx%ld but weight '%s' is %s", k[0], k[1], IN(1)->name,
            shape_str(c, IN(1))));
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
    *w = (rt_window){.n = (int)x->dims[0], .c = (int)x->dims[1],
                     .h = (int)x->dims[2], .w = (int)x->dims[3],
                     .oc = conv ? (int)IN(1)->dims[0] : (int)x->dims[1],
                     .kh = (int)k[0], .kw = (int)k[1], .sh = (int)s[0],
                     .sw = (int)s[1], .dh = (int)d[0], .dw = (int)d[1],
                     .pad_top = (int)p[0], .pad_left = (int)p[1],
                     .pad_bottom = (int)p[2], .pad_right = (int)p[3],
                     .group = conv ? (int)node_int(n, "group") : 1};
    long eh = (long)w->dh * (w->kh - 1) + 1, ew = (long)w->dw * (w->kw - 1) + 1;
    long ph[2] = {p[0], p[2]}, pw[2] = {p[1], p[3]};
    long oh = window_axis(auto_pad, (int)ceil_mode, x->dims[2], eh, s[0], ph);
    long ow = window_axis(auto_pad, (int)ceil_mode, x->dims[3], ew, s[1], pw);
    if (oh < 1 || ow < 1)
        return node_error(c, g, n, ctx_printf(c, "%s window %ldx%ld (with "
            "dilations) is larger than input '%s' padded to %ldx%ld",
            n->row->name, eh, ew, x->name, x->dims[2] + ph[0] + ph[1],
            x->dims[3] + pw[0] + pw[1]));
    w->pad_top = (int)ph[0], w->pad_bottom = (int)ph[1];
    w->pad_left = (int)pw[0], w->pad_right = (int)pw[1];
    w->oh = (int)oh;
    w->ow = (int)ow;
    return 0;
}

int shape_window(Ctx *c, Graph *g, Node *n)
{
    rt_window w;
    if (node_window(c, g, n, &w))
        return -1;
    if (n->op == OP_CONV) {
        const Tensor *wt = IN(1);
        if (w.group < 1 || w.c % w.group || w.oc % w.group)
            return node_error(c, g, n, ctx_printf(c, "Conv group=%d must divide "
                "the input's %d channels and the weight's %d filters", w.group,
                w.c, w.oc));
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
    long dims[4] = {w.n, w.oc, w.oh, w.ow};
    set_shape(OUT(0), 4, dims);
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

void emit_window_static(Emit *e, const Node *n)
{
    rt_window w = window_of(e->g, n);
    emit(e, "static const rt_window win_%s = {%d, %d, %d, %d, %d, %d, %d, %d, "
         "%d, %d, %d, %d, %d, %d, %d, %d, %d, %d};", n->cname, w.n, w.c, w.h,
         w.w, w.oc, w.oh, w.ow, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, w.pad_top,
         w.pad_left, w.pad_bottom, w.pad_right, w.group);
}

long scratch_conv(const Graph *g, const Node *n, int backward)
{
    rt_window w = window_of(g, n);
    return (long)(backward ? rt_conv_backward_scratch(&w) : rt_conv_scratch(&w));
}

double flops_conv(const Graph *g, const Node *n)
{
    rt_window w = window_of(g, n);
    return 2.0 * OUT(0)->numel * (w.c / w.group) * w.kh * w.kw +
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
