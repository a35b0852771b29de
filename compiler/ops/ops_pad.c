/*
 * ops_pad.c: Pad (runtime pad.c), ONNX's op in its three modes, over any
 * rank: constant (constant_value, 0 by default), reflect (mirrored about
 * the first and last elements, numpy's "reflect") and edge. ONNX's pads,
 * constant_value and axes are inputs since opset 11 (axes since 18); here
 * they are attributes, which the ONNX importer folds from constants:
 * pads lists the elements added before each axis, then after each (axes,
 * if given, names those axes, every other axis is not padded); a negative
 * pad removes that many elements (cropping). Every output element is one
 * input element or the constant, so the backward adds d(output) back into
 * the elements the forward read and reads no tensor at all.
 */
#include "ops.h"

#include <string.h>

static const char *const pad_modes[] = {"constant", "reflect", "edge", NULL};

const AttrSpec pad_attrs[] = {
    {.name = "mode", .type = ATTR_STRING, .s = "constant",
     .choices = pad_modes},
    {.name = "pads", .type = ATTR_INTS},
    {.name = "constant_value", .type = ATTR_FLOAT, .f = 0.0f},
    {.name = "axes", .type = ATTR_INTS},
    {0},
};

/* Every axis's pads before (p[d]) and after (p[rank + d]); the shape rule
 * has checked the attributes. */
static void pad_plan(const Tensor *x, const Node *n, long *p)
{
    const Attr *pads = node_attr(n, "pads"), *axes = node_attr(n, "axes");
    const int k = axes->set ? axes->nints : x->rank;
    for (int d = 0; d < 2 * x->rank; d++)
        p[d] = 0;
    for (int i = 0; i < k; i++) {
        long a = axes->set ? axes->ints[i] : i;
        int d = (int)(a < 0 ? a + x->rank : a);
        p[d] = pads->ints[i];
        p[x->rank + d] = pads->ints[k + i];
    }
}

int shape_pad(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *pads = node_attr(n, "pads"), *axes = node_attr(n, "axes");
    int seen[MAX_RANK] = {0};
    if (x->rank < 1)
        return node_error(c, g, n, ctx_printf(c, "Pad input 0 '%s' is a "
            "scalar; Pad needs at least one axis to pad", x->name));
    if (!pads->set)
        return node_error(c, g, n, "Pad needs pads=\"...\" (ONNX's pads "
                          "input, given as an attribute): the elements added "
                          "before each axis, then after each");
    int k = axes->set ? axes->nints : x->rank;
    if (pads->nints != 2 * k)
        return node_error(c, g, n, ctx_printf(c, "Pad pads has %d entries "
            "but input 0 '%s' (%s) has %d %saxes: pads must have %d, the "
            "begins then the ends", pads->nints, x->name, shape_str(c, x), k,
            axes->set ? "padded " : "", 2 * k));
    for (int i = 0; axes->set && i < k; i++) {
        long a = axes->ints[i];
        if (a < -x->rank || a >= x->rank)
            return node_error(c, g, n, ctx_printf(c, "Pad axis %ld is out of "
                "range for input '%s' of rank %d; axes must be in [%d, %d]",
                a, x->name, x->rank, -x->rank, x->rank - 1));
        if (seen[a < 0 ? a + x->rank : a]++)
            return node_error(c, g, n, ctx_printf(c, "Pad axis %ld is listed "
                "twice; each axis is padded once", a));
    }
    long p[2 * MAX_RANK], dims[MAX_RANK];
    pad_plan(x, n, p);
    for (int d = 0; d < x->rank; d++) {
        /* |pads| beyond MAX_NUMEL could only overflow: refuse them first */
        for (int e = 0; e < 2; e++)
            if (p[e * x->rank + d] < -MAX_NUMEL ||
                p[e * x->rank + d] > MAX_NUMEL)
                return node_error(c, g, n, ctx_printf(c, "Pad pads %ld %s "
                    "axis %d of input '%s'; a pad is at most %ld elements "
                    "either way", p[e * x->rank + d], e ? "after" : "before",
                    d, x->name, (long)MAX_NUMEL));
        if (x->dims[d] + p[d] + p[x->rank + d] < 1)
            return node_error(c, g, n, ctx_printf(c, "Pad pads %ld before and "
                "%ld after axis %d of input '%s' (%s) leave %ld elements; "
                "every axis must keep at least 1", p[d], p[x->rank + d], d,
                x->name, shape_str(c, x),
                x->dims[d] + p[d] + p[x->rank + d]));
        dims[d] = x->dims[d] + p[d] + p[x->rank + d];
    }
    long numel = 1;
    for (int d = 0; d < x->rank; d++) {
        if (dims[d] > MAX_NUMEL / numel)
            return node_error(c, g, n, ctx_printf(c, "Pad output would have "
                "more than %ld elements", (long)MAX_NUMEL));
        numel *= dims[d];
    }
    set_shape(OUT(0), x->rank, dims);
    return 0;
}

/* padin_ (x's dims) and pads_ (begins then ends), one word before the
 * node's name each, so no two nodes' arrays can collide. */
void emit_pad_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0);
    long p[2 * MAX_RANK];
    pad_plan(x, n, p);
    emit_int_array(e, ctx_printf(e->ctx, "padin_%s", n->cname), x->dims,
                   x->rank);
    emit_int_array(e, ctx_printf(e->ctx, "pads_%s", n->cname), p,
                   2 * x->rank);
}

static const char *pad_mode(const Node *n)
{
    const char *m = node_attr(n, "mode")->set ? node_attr(n, "mode")->s
                                              : "constant";
    return !strcmp(m, "reflect") ? "RT_PAD_REFLECT"
           : !strcmp(m, "edge") ? "RT_PAD_EDGE" : "RT_PAD_CONSTANT";
}

void emit_pad_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_pad_forward(%s, %s, %d, padin_%s, pads_%s, %s, %s);", out[0],
         in[0], IN(0)->rank, n->cname, n->cname, pad_mode(n),
         fmt_float(e->ctx, node_float(n, "constant_value")));
}

void emit_pad_bwd(Emit *e, const Node *n, const char *const *din,
                  const char *const *dout, const char *const *in,
                  const char *const *out)
{
    const Graph *g = e->g;
    (void)in;
    (void)out;
    emit(e, "rt_pad_backward(%s, %s, %d, padin_%s, pads_%s, %s);", din[0],
         dout[0], IN(0)->rank, n->cname, n->cname, pad_mode(n));
}
