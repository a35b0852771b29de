/*
 * ops_softmax.c: Softmax and LogSoftmax along one axis, each seen as
 * (outer, axis, inner) so that one kernel (runtime softmax.c) serves any
 * axis.
 */
#include "ops.h"

#include <math.h>

/* Softmax and LogSoftmax: one axis normalized, the kernel family's
 * rt_<kernel>_forward/backward over (outer, dim, inner) lanes. */
int shape_softmax(Ctx *c, Graph *g, Node *n)
{
    if (IN(0)->rank == 0)
        return node_error(c, g, n, ctx_printf(c, "%s input '%s' is a "
            "scalar; it needs at least one dimension", n->row->name,
            IN(0)->name));
    if (node_axis(c, g, n, IN(0)->rank, IN(0)->rank - 1) < 0)
        return -1;
    return shape_same(c, g, n);
}

/* "outer, dim, inner" around the softmax axis */
static const char *softmax_sizes(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0);
    int a = (int)(node_int(n, "axis") < 0 ? node_int(n, "axis") + x->rank
                                          : node_int(n, "axis"));
    return ctx_printf(e->ctx, "%ld, %ld, %ld", dims_product(x, 0, a),
                      x->dims[a], dims_product(x, a + 1, x->rank));
}

void emit_softmax_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in)
{
    emit(e, "rt_%s_forward(%s, %s, %s);", n->row->kernel, out[0],
         in[0], softmax_sizes(e, n));
}

void emit_softmax_bwd(Emit *e, const Node *n, const char *const *din,
                      const char *const *dout, const char *const *in,
                      const char *const *out)
{
    (void)in;
    emit(e, "rt_%s_backward(%s, %s, %s, %s);", n->row->kernel, din[0],
         dout[0], out[0], softmax_sizes(e, n));
}

double flops_softmax(const Graph *g, const Node *n)
{
    /* max, exp, sum, divide (LogSoftmax: log, subtract) */
    return 5.0 * OUT(0)->numel;
}
