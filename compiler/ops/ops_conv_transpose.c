/*
 * ops_conv_transpose.c: ConvTranspose (runtime conv_transpose.c) in 1, 2
 * or 3 spatial dimensions, as ONNX defines it: X (N, C, in...), W (C,
 * M/group, k...), optional B (M); strides, dilations, pads (begin...,
 * end...), output_padding, output_shape and auto_pad set each spatial
 * axis's output size and begin padding:
 *   out = s * (in - 1) + output_padding + (k - 1) * d + 1 - pad_b - pad_e;
 * with output_shape (or auto_pad SAME_*, whose output is in * s) the pads
 * are what gives that size: total = s * (in - 1) + output_padding +
 * (k - 1) * d + 1 - out, split in two, the odd one at the end for
 * SAME_UPPER and at the beginning otherwise (floor division: a negative
 * total adds positions where only the bias lands); VALID: no pads.
 */
#include "ops.h"

#include <assert.h>
#include <string.h>

/* An ints attribute of `count` values (its default `dflt` for each when
 * not given), each at least `lo`. */
static int convt_ints(Ctx *c, const Graph *g, const Node *n, const char *name,
                      long dflt, int count, long lo, long *out)
{
    const Attr *a = node_attr(n, name);
    if (a->set && a->nints != count)
        return node_error(c, g, n, ctx_printf(c, "ConvTranspose %s has %d "
            "values; it takes %d for input '%s' of shape %s", name, a->nints,
            count, IN(0)->name, shape_str(c, IN(0))));
    for (int i = 0; i < count; i++) {
        out[i] = a->set ? a->ints[i] : dflt;
        if (out[i] < lo || out[i] > MAX_NUMEL)
            return node_error(c, g, n, ctx_printf(c, "ConvTranspose %s has "
                "%ld; values must be %ld to %ld", name, out[i], lo,
                (long)MAX_NUMEL));
    }
    return 0;
}

static long floor_div2(long v)
{
    return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

/* The node's geometry; -1 with ctx error (c may be NULL once shapes.c
 * has accepted it). */
static int convt_geometry(Ctx *c, const Graph *g, const Node *n, rt_convt *p)
{
    const Tensor *x = IN(0), *w = IN(1);
    memset(p, 0, sizeof *p);
    if (x->rank < 3 || x->rank > 5)
        return node_error(c, g, n, ctx_printf(c, "ConvTranspose input '%s' "
            "has shape %s but must be 3-D, 4-D or 5-D (N, C, then 1 to 3 "
            "spatial dimensions)", x->name, shape_str(c, x)));
    const int nd = x->rank - 2;
    long group = node_int(n, "group");
    if (w->rank != x->rank)
        return node_error(c, g, n, ctx_printf(c, "ConvTranspose weight '%s' "
            "has shape %s but must be %d-D (C, M/group, then the kernel's %d "
            "spatial sizes) for input '%s'", w->name, shape_str(c, w),
            x->rank, nd, x->name));
    if (group < 1 || x->dims[1] % group)
        return node_error(c, g, n, ctx_printf(c, "ConvTranspose group=%ld "
            "must be positive and divide the input's %ld channels", group,
            x->dims[1]));
    if (w->dims[0] != x->dims[1])
        return node_error(c, g, n, ctx_printf(c, "ConvTranspose weight '%s' "
            "has shape %s but input '%s' has %ld channels: dimension 0 must "
            "be %ld", w->name, shape_str(c, w), x->name, x->dims[1],
            x->dims[1]));
    long k[3], s[3], d[3], pads[6], op[3], shape[5];
    for (int a = 0; a < nd; a++)
        k[a] = w->dims[2 + a];
    const Attr *ks = node_attr(n, "kernel_shape");
    if (ks->set) {
        int same = ks->nints == nd;
        for (int a = 0; same && a < nd; a++)
            same = ks->ints[a] == k[a];
        if (!same)
            return node_error(c, g, n, ctx_printf(c, "ConvTranspose "
                "kernel_shape does not match weight '%s' of shape %s; give "
                "its last %d dimensions or leave kernel_shape out", w->name,
                shape_str(c, w), nd));
    }
    if (convt_ints(c, g, n, "strides", 1, nd, 1, s) ||
        convt_ints(c, g, n, "dilations", 1, nd, 1, d) ||
        convt_ints(c, g, n, "pads", 0, 2 * nd, 0, pads) ||
        convt_ints(c, g, n, "output_padding", 0, nd, 0, op))
        return -1;
    const Attr *os = node_attr(n, "output_shape");
    const char *auto_pad = node_attr(n, "auto_pad")->s;
    if (os->set) {
        if (os->nints != nd && os->nints != nd + 2)
            return node_error(c, g, n, ctx_printf(c, "ConvTranspose "
                "output_shape has %d values; it takes %d (the spatial sizes)",
                os->nints, nd));
        for (int a = 0; a < nd; a++) {
            shape[a] = os->ints[os->nints - nd + a];
            if (shape[a] < 1 || shape[a] > MAX_NUMEL)
                return node_error(c, g, n, ctx_printf(c, "ConvTranspose "
                    "output_shape has %ld; sizes must be 1 to %ld", shape[a],
                    (long)MAX_NUMEL));
        }
    }
    if (strcmp(auto_pad, "NOTSET") != 0 && node_attr(n, "pads")->set)
        return node_error(c, g, n, ctx_printf(c, "ConvTranspose has both "
            "pads and auto_pad=\"%s\"; give one of them (auto_pad=\"NOTSET\" "
            "uses pads)", auto_pad));
    *p = (rt_convt){.nd = nd, .n = (int)x->dims[0], .c = (int)x->dims[1],
                    .m = (int)(w->dims[1] * group), .group = (int)group};
    for (int a = 0; a < 3; a++) {
        p->in[a] = p->out[a] = p->k[a] = p->s[a] = p->d[a] = 1;
        p->pad[a] = 0;
    }
    for (int a = 0; a < nd; a++) {
        long in = x->dims[2 + a], ek = (k[a] - 1) * d[a] + 1;
        long full = s[a] * (in - 1) + op[a] + ek, out, pb;
        /* past MAX_NUMEL the begin pad that crops it to out would not
         * fit rt_convt's int */
        if (full > MAX_NUMEL)
            return node_error(c, g, n, ctx_printf(c, "ConvTranspose along "
                "spatial axis %d would make %ld positions before its pads "
                "crop them; at most %ld", a, full, (long)MAX_NUMEL));
        int same = strncmp(auto_pad, "SAME_", 5) == 0;
        if (os->set || same) {
            out = os->set ? shape[a] : in * s[a];
            long total = full - out;
            long half = floor_div2(total);
            pb = strcmp(auto_pad, "SAME_UPPER") == 0 ? half : total - half;
        } else if (strcmp(auto_pad, "VALID") == 0) {
            out = full, pb = 0;
        } else {
            out = full - pads[a] - pads[nd + a], pb = pads[a];
        }
        if (out > MAX_NUMEL)
            return node_error(c, g, n, ctx_printf(c, "ConvTranspose output "
                "along spatial axis %d would have %ld elements; at most %ld",
                a, out, (long)MAX_NUMEL));
        if (out < 1)
            return node_error(c, g, n, ctx_printf(c, "ConvTranspose output "
                "along spatial axis %d would have %ld elements; its pads "
                "(%ld, %ld) crop more than the %ld it makes", a, out,
                pads[a], pads[nd + a], full));
        p->in[a] = (int)in, p->out[a] = (int)out, p->k[a] = (int)k[a];
        p->s[a] = (int)s[a], p->d[a] = (int)d[a], p->pad[a] = (int)pb;
    }
    if (n->nin == 3 && (IN(2)->rank != 1 || IN(2)->dims[0] != p->m))
        return node_error(c, g, n, ctx_printf(c, "ConvTranspose bias '%s' has "
            "shape %s but must be (%d), one per output channel", IN(2)->name,
            shape_str(c, IN(2)), p->m));
    return 0;
}

int shape_conv_transpose(Ctx *c, Graph *g, Node *n)
{
    rt_convt p;
    if (convt_geometry(c, g, n, &p))
        return -1;
    long dims[5] = {p.n, p.m, p.out[0], p.out[1], p.out[2]};
    double numel = 1;
    for (int a = 0; a < p.nd + 2; a++)
        numel *= (double)dims[a];
    if (numel > (double)MAX_NUMEL)
        return node_error(c, g, n, ctx_printf(c, "ConvTranspose output would "
            "have %.0f elements; at most %ld", numel, (long)MAX_NUMEL));
    set_shape(OUT(0), p.nd + 2, dims);
    return 0;
}

static rt_convt convt_of(const Graph *g, const Node *n)
{
    rt_convt p;
    int bad = convt_geometry(NULL, g, n, &p);
    assert(!bad && "shapes.c accepted the ConvTranspose");
    (void)bad;
    return p;
}

void emit_conv_transpose_static(Emit *e, const Node *n)
{
    rt_convt p = convt_of(e->g, n);
    emit(e, "static const rt_convt convt_%s = {%d, %d, %d, %d, %d, {%d, %d, "
         "%d}, {%d, %d, %d}, {%d, %d, %d}, {%d, %d, %d}, {%d, %d, %d}, {%d, "
         "%d, %d}};", n->cname, p.nd, p.n, p.c, p.m, p.group, p.in[0],
         p.in[1], p.in[2], p.out[0], p.out[1], p.out[2], p.k[0], p.k[1],
         p.k[2], p.s[0], p.s[1], p.s[2], p.d[0], p.d[1], p.d[2], p.pad[0],
         p.pad[1], p.pad[2]);
}

/* A multiply-add per input element, output channel of its group and tap
 * (taps that land in the cropped padding counted too), plus the bias. */
double flops_conv_transpose(const Graph *g, const Node *n)
{
    rt_convt p = convt_of(g, n);
    return 2.0 * IN(0)->numel * (p.m / p.group) * p.k[0] * p.k[1] * p.k[2] +
           (n->nin == 3 ? (double)OUT(0)->numel : 0);
}

void emit_conv_transpose_fwd(Emit *e, const Node *n, const char *const *out,
                             const char *const *in)
{
    emit(e, "rt_convt_forward(%s, %s, %s, %s, &convt_%s);", out[0], in[0],
         in[1], n->nin == 3 ? in[2] : "NULL", n->cname);
}

void emit_conv_transpose_bwd(Emit *e, const Node *n, const char *const *din,
                             const char *const *dout, const char *const *in,
                             const char *const *out)
{
    (void)out;
    emit(e, "rt_convt_backward(%s, %s, %s, %s, %s, %s, &convt_%s);",
         or_null(din, 0, n->nin), or_null(din, 1, n->nin),
         or_null(din, 2, n->nin), dout[0], or_null(in, 0, n->nin),
         or_null(in, 1, n->nin), n->cname);
}
