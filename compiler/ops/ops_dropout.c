/*
 * ops_dropout.c: Dropout (runtime dropout.c). The mask is drawn from the
 * step's seed and the node's index, so a recompute redraws the same mask
 * and nothing is kept for the backward; in NAME_forward (inference) it is
 * the identity.
 */
#include "ops.h"

#include <assert.h>

int shape_dropout(Ctx *c, Graph *g, Node *n)
{
    float r = node_float(n, "ratio");
    if (!(r >= 0.0f && r < 1.0f))
        return node_error(c, g, n, ctx_printf(c, "Dropout ratio %g is out of "
            "range; it must be at least 0 and below 1", (double)r));
    return shape_same(c, g, n);
}

/* "n, ratio, seed, step, node": the mask is a function of these alone, so
 * a recompute draws the forward's mask again. The node's key is its index
 * in the file (< 2^24, RT_DROPOUT_STREAM's limit), which the rewrites that
 * drop nodes (fold.c, fuse.c) do not change. */
static const char *dropout_args(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    long key = n->key;
    assert(key < (1L << 24));
    return ctx_printf(e->ctx, "%ld, %s, seed, step, %ld", OUT(0)->numel,
                      fmt_float(e->ctx, node_float(n, "ratio")), key);
}

/* train_step drops; forward is inference, where Dropout is the identity. */
void emit_dropout_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in)
{
    const Graph *g = e->g;
    if (e->train)
        emit(e, "rt_dropout_forward(%s, %s, %s);", out[0], in[0],
             dropout_args(e, n));
    else
        emit(e, "rt_copy(%s, %s, %ld); /* inference: the identity */", out[0],
             in[0], OUT(0)->numel);
}

void emit_dropout_bwd(Emit *e, const Node *n, const char *const *din,
                      const char *const *dout, const char *const *in,
                      const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_dropout_backward%s(%s, %s, %s%s);", set_suffix(e),
         din[0], dout[0], dropout_args(e, n), set_arg(e));
}

double flops_dropout(const Graph *g, const Node *n)
{
    return 4.0 * OUT(0)->numel;     /* a counter hash, compare, multiply */
}
