/*
 * ops_reduce.c: ReduceSum, ReduceMean, ReduceMax and ReduceMin over any
 * set of axes, through the runtime's reduce.c and a broadcast map from
 * the input to the reduced output (the backward broadcasts the gradient
 * back; ReduceMax's and ReduceMin's to the extremes only); ReduceL1,
 * ReduceL2, ReduceSumSquare and ReduceLogSumExp over the same map, each
 * an rt_sum of a term of x (|x|, x^2, exp(x - max)); ArgMax and ArgMin,
 * the int64 index of the extreme along one axis, no backward; and CumSum,
 * a running sum along one axis (runtime reduce.c's rt_cumsum_*, each
 * prefix an rt_sum, so it does not drift with the axis's length), whose
 * backward is the same running sum of the gradient the other way.
 */
#include "ops.h"

#include <assert.h>

/* reduced[d] = 1 when input dimension d is reduced; -1 on a bad axis. */
static int reduced_axes(Ctx *c, const Graph *g, const Node *n, int *reduced)
{
    const Tensor *x = IN(0);
    const Attr *axes = node_attr(n, "axes");
    int none_given = !axes->set || axes->nints == 0;
    /* ONNX: no axes (or an empty list) reduces every axis, unless
     * noop_with_empty_axes makes it the identity */
    for (int d = 0; d < x->rank; d++)
        reduced[d] = none_given && !node_int(n, "noop_with_empty_axes");
    /* ONNX's text makes such a ReduceL1, ReduceL2 or ReduceSumSquare the
     * input unchanged (its reference returns x for the first two, x^2 for
     * the third): not a reduction remat computes */
    if (none_given && node_int(n, "noop_with_empty_axes") &&
        (n->op == OP_REDUCE_L1 || n->op == OP_REDUCE_L2 ||
         n->op == OP_REDUCE_SUM_SQUARE))
        return node_error(c, g, n, ctx_printf(c, "%s with no axes and "
            "noop_with_empty_axes=1 is ONNX's identity, which remat does not "
            "compute as a reduction; give axes, or use Identity",
            n->row->name));
    for (int i = 0; !none_given && i < axes->nints; i++) {
        long a = axes->ints[i];
        if (a < -x->rank || a >= x->rank)
            return node_error(c, g, n, ctx_printf(c,
                "%s axis %ld is out of range for input '%s' of rank %d; "
                "axes must be in [%d, %d]", n->row->name, a, x->name,
                x->rank, -x->rank, x->rank - 1));
        int d = (int)(a < 0 ? a + x->rank : a);
        if (reduced[d])
            return node_error(c, g, n, ctx_printf(c,
                "%s axis %ld is listed twice (axis %d names the same "
                "dimension)", n->row->name, a, d));
        reduced[d] = 1;
    }
    return 0;
}

int shape_reduce(Ctx *c, Graph *g, Node *n)
{
    int reduced[MAX_RANK];
    if (reduced_axes(c, g, n, reduced))
        return -1;
    long dims[MAX_RANK];
    int rank = 0, keep = node_int(n, "keepdims") != 0;
    for (int d = 0; d < IN(0)->rank; d++)
        if (!reduced[d] || keep)
            dims[rank++] = reduced[d] ? 1 : IN(0)->dims[d];
    set_shape(OUT(0), rank, dims);
    return 0;
}

static const char *reduce_scale(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    float scale = 1.0f;
    if (n->op == OP_REDUCE_MEAN)
        scale = (float)(1.0 / ((double)IN(0)->numel / (double)OUT(0)->numel));
    return fmt_float(e->ctx, scale);
}

void emit_reduce_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    int reduced[MAX_RANK];
    int bad = reduced_axes(e->ctx, g, n, reduced);
    assert(!bad && "shapes.c accepted the axes");
    (void)bad;
    emit_reduce_map(e, n, IN(0), reduced);
}

void emit_reduce_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in)
{
    const Graph *g = e->g;
    if (OUT(0)->is_int)     /* ReduceSum of int64 or bool (issue 25) */
        emit(e, "rt_reduce_sum_i64_forward(%s, %s, &map_%s, %ld);", out[0],
             in[0], n->cname, OUT(0)->numel);
    else
        emit(e, "rt_reduce_forward(%s, %s, &map_%s, %ld, %s);", out[0],
             in[0], n->cname, OUT(0)->numel, reduce_scale(e, n));
}

void emit_reduce_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_reduce_backward(%s, %s, &map_%s, %s);", din[0], dout[0],
         n->cname, reduce_scale(e, n));
}

/* ReduceMax, ReduceMin: the same map; the backward reads x and y to find
 * the extremes, and counts ties in scratch. */
void emit_extreme_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_%s_forward(%s, %s, &map_%s, %ld);", n->row->kernel, out[0],
         in[0], n->cname, OUT(0)->numel);
}

void emit_extreme_bwd(Emit *e, const Node *n, const char *const *din,
                      const char *const *dout, const char *const *in,
                      const char *const *out)
{
    const Graph *g = e->g;
    emit(e, "rt_reduce_extreme_backward(%s, %s, %s, %s, &map_%s, %ld, %s);",
         din[0], dout[0], in[0], out[0], n->cname, OUT(0)->numel, e->scratch);
}

/* a tie count per output element, in the backward */
long scratch_extreme(const Graph *g, const Node *n, int backward)
{
    return backward ? OUT(0)->numel : 0;
}

/* ---- ArgMax and ArgMin (issue 25) ------------------------------------------------- */

/* The input's axis, normalized; -1 with an error. */
static int arg_axis(Ctx *c, const Graph *g, const Node *n)
{
    const Tensor *x = IN(0);
    long a = node_int(n, "axis");
    if (x->rank < 1 || a < -x->rank || a >= x->rank)
        return node_error(c, g, n, ctx_printf(c, "%s axis %ld is out of "
            "range for input '%s' of rank %d; it must be in [%d, %d]",
            n->row->name, a, x->name, x->rank, -x->rank, x->rank - 1));
    return (int)(a < 0 ? a + x->rank : a);
}

int shape_arg(Ctx *c, Graph *g, Node *n)
{
    int a = arg_axis(c, g, n);
    if (a < 0)
        return -1;
    const Tensor *x = IN(0);
    long dims[MAX_RANK];
    int rank = 0, keep = node_int(n, "keepdims") != 0;
    for (int d = 0; d < x->rank; d++)
        if (d != a || keep)
            dims[rank++] = d == a ? 1 : x->dims[d];
    set_shape(OUT(0), rank, dims);
    return 0;
}

void emit_arg_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0);
    int a = arg_axis(e->ctx, g, n);
    assert(a >= 0 && "shapes.c accepted the axis");
    long outer = 1, inner = 1;
    for (int d = 0; d < a; d++)
        outer *= x->dims[d];
    for (int d = a + 1; d < x->rank; d++)
        inner *= x->dims[d];
    emit(e, "rt_%s_forward(%s, %s, %ld, %ld, %ld, %d);", n->row->kernel,
         out[0], in[0], outer, x->dims[a], inner,
         (int)node_int(n, "select_last_index"));
}

/* ---- CumSum (issue 25) ------------------------------------------------------------ */

/* ONNX CumSum with its axis input as the attribute `axis` (the importer
 * reads the constant): the input's shape. */
int shape_cumsum(Ctx *c, Graph *g, Node *n)
{
    if (IN(0)->rank == 0)
        return node_error(c, g, n, ctx_printf(c, "CumSum input '%s' is a "
            "scalar; it needs an axis to sum along", IN(0)->name));
    if (node_axis(c, g, n, IN(0)->rank, IN(0)->rank - 1) < 0)
        return -1;
    return shape_same(c, g, n);
}

/* "outer, n, inner, exclusive, reverse" around the axis */
static const char *cumsum_args(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0);
    long a = node_int(n, "axis");
    int ax = (int)(a < 0 ? a + x->rank : a);
    return ctx_printf(e->ctx, "%ld, %ld, %ld, %ld, %ld", dims_product(x, 0, ax),
                      x->dims[ax], dims_product(x, ax + 1, x->rank),
                      node_int(n, "exclusive"), node_int(n, "reverse"));
}

void emit_cumsum_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in)
{
    emit(e, "rt_cumsum_forward(%s, %s, %s);", out[0], in[0],
         cumsum_args(e, n));
}

void emit_cumsum_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_cumsum_backward(%s, %s, %s);", din[0], dout[0],
         cumsum_args(e, n));
}

/* ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSumExp (issue 25): the
 * same map; the kernel is the row's (rt_reduce_l1_forward, ...). The
 * backward reads x, and y where the row's needs mask says (ReduceL2's x / y,
 * ReduceLogSumExp's exp(x - y)); ReduceLogSumExp's forward sums in
 * scratch. */
void emit_reduce_term_fwd(Emit *e, const Node *n, const char *const *out,
                          const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_%s_forward(%s, %s, &map_%s, %ld%s%s);", n->row->kernel,
         out[0], in[0], n->cname, OUT(0)->numel,
         n->op == OP_REDUCE_LOG_SUM_EXP ? ", " : "",
         n->op == OP_REDUCE_LOG_SUM_EXP ? e->scratch : "");
}

void emit_reduce_term_bwd(Emit *e, const Node *n, const char *const *din,
                          const char *const *dout, const char *const *in,
                          const char *const *out)
{
    int reads_y = (n->row->needs[0] & NEED_OUT(0)) != 0;
    emit(e, "rt_%s_backward(%s, %s, %s%s%s, &map_%s);", n->row->kernel,
         din[0], dout[0], in[0], reads_y ? ", " : "", reads_y ? out[0] : "",
         n->cname);
}

/* ReduceLogSumExp's forward: the sums, one per output element */
long scratch_log_sum_exp(const Graph *g, const Node *n, int backward)
{
    return backward ? 0 : OUT(0)->numel;
}

/* A term and an add per input element; ReduceLogSumExp's exp counts four */
double flops_reduce_term(const Graph *g, const Node *n)
{
    return (n->op == OP_REDUCE_LOG_SUM_EXP ? 6.0 : 2.0) * IN(0)->numel;
}
