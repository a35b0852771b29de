/*
 * ops_pool.c: MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool
 * (runtime pool.c), over 1, 2 or 3 spatial dims. MaxPool's and
 * GlobalMaxPool's backward re-find each window's maximum in X, except
 * where MaxPool keeps its compact form (Node.compact): then the forward
 * writes each window's winning tap and the backward reads that. Their windows are ops_conv.c's.
 */
#include "ops.h"

double flops_pool(const Graph *g, const Node *n)
{
    rt_window w = window_of(g, n);
    return (double)OUT(0)->numel * (w.kd > 0 ? w.kd : 1) * w.kh * w.kw;
}

long compact_index(const Graph *g, const Node *n)
{
    rt_window w = window_of(g, n);
    return OUT(0)->numel * rt_maxpool_index_width(&w);
}

long compact_plane_index(const Graph *g, const Node *n)
{
    long hw = IN(0)->numel / OUT(0)->numel;
    return OUT(0)->numel * rt_global_maxpool_index_width((int)hw);
}

static const char *pool_kernel(const Node *n)
{
    return n->op == OP_MAX_POOL ? "maxpool" : "avgpool";
}

/* AveragePool's last argument: count_include_pad */
static const char *pool_tail(Emit *e, const Node *n)
{
    return n->op == OP_AVERAGE_POOL
               ? ctx_printf(e->ctx, ", %ld", node_int(n, "count_include_pad"))
               : "";
}

void emit_pool_fwd(Emit *e, const Node *n, const char *const *out,
                   const char *const *in)
{
    if (e->compact)     /* MaxPool's winners kept for the backward */
        emit(e, "rt_maxpool_forward_index(%s, %s, %s, &win_%s);", out[0],
             e->compact, in[0], n->cname);
    else
        emit(e, "rt_%s_forward(%s, %s, &win_%s%s);", pool_kernel(n), out[0],
             in[0], n->cname, pool_tail(e, n));
}

void emit_pool_bwd(Emit *e, const Node *n, const char *const *din,
                   const char *const *dout, const char *const *in,
                   const char *const *out)
{
    (void)out;
    if (n->op == OP_MAX_POOL && e->compact)
        emit(e, "rt_maxpool_backward_index%s(%s, %s, %s, &win_%s%s);",
             set_suffix(e), din[0], dout[0], e->compact, n->cname,
             set_arg(e));
    else if (n->op == OP_MAX_POOL)
        emit(e, "rt_maxpool_backward%s(%s, %s, %s, &win_%s%s);",
             set_suffix(e), din[0], dout[0], in[0], n->cname,
             set_arg(e));
    else
        emit(e, "rt_avgpool_backward(%s, %s, &win_%s%s);", din[0], dout[0],
             n->cname, pool_tail(e, n));
}

int shape_global_pool(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    if (x->rank < 3)
        return node_error(c, g, n, ctx_printf(c, "%s input '%s' has shape %s "
            "but needs (N, C, spatial...)", n->row->name, x->name,
            shape_str(c, x)));
    long dims[MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = d < 2 ? x->dims[d] : 1;
    set_shape(OUT(0), x->rank, dims);
    return 0;
}

void emit_global_pool_fwd(Emit *e, const Node *n,
                          const char *const *out, const char *const *in)
{
    const Graph *g = e->g;
    if (e->compact)
        emit(e, "rt_global_maxpool_forward_index(%s, %s, %s, %ld, %ld);",
             out[0], e->compact, in[0], OUT(0)->numel,
             IN(0)->numel / OUT(0)->numel);
    else
        emit(e, "rt_global_%s_forward(%s, %s, %ld, %ld);",
             n->op == OP_GLOBAL_MAX_POOL ? "maxpool" : "avgpool", out[0],
             in[0], OUT(0)->numel, IN(0)->numel / OUT(0)->numel);
}

void emit_global_pool_bwd(Emit *e, const Node *n,
                          const char *const *din,
                          const char *const *dout,
                          const char *const *in, const char *const *out)
{
    const Graph *g = e->g;
    (void)out;
    if (n->op == OP_GLOBAL_MAX_POOL && e->compact)
        emit(e, "rt_global_maxpool_backward_index(%s, %s, %s, %ld, %ld);",
             din[0], dout[0], e->compact, OUT(0)->numel,
             IN(0)->numel / OUT(0)->numel);
    else if (n->op == OP_GLOBAL_MAX_POOL)
        emit(e, "rt_global_maxpool_backward(%s, %s, %s, %ld, %ld);", din[0],
             dout[0], in[0], OUT(0)->numel, IN(0)->numel / OUT(0)->numel);
    else
        emit(e, "rt_global_avgpool_backward(%s, %s, %ld, %ld);", din[0],
             dout[0], OUT(0)->numel, IN(0)->numel / OUT(0)->numel);
}
