/*
 * ops_attention.c: Attention (ONNX opset 23, 4-D Q, K, V; runtime
 * attention.c): softmax(Q K^T * scale [+ causal mask]) V per batch and
 * head, the backward recomputing the probabilities from Q and K.
 */
#include "ops.h"

#include <math.h>

int shape_attention(Ctx *c, Graph *g, Node *n)
{
    const Tensor *q = IN(0), *k = IN(1), *v = IN(2);
    for (int i = 0; i < 3; i++)
        if (IN(i)->rank != 4)
            return node_error(c, g, n, ctx_printf(c, "Attention input %d '%s' "
                "has shape %s but must be 4-D (batch, heads, sequence, head "
                "size)", i, IN(i)->name, shape_str(c, IN(i))));
    if (k->dims[0] != q->dims[0] || k->dims[1] != q->dims[1] ||
        k->dims[3] != q->dims[3] || v->dims[0] != q->dims[0] ||
        v->dims[1] != q->dims[1] || v->dims[2] != k->dims[2])
        return node_error(c, g, n, ctx_printf(c, "Attention inputs Q '%s' (%s), "
            "K '%s' (%s) and V '%s' (%s) do not fit: K needs Q's batch, heads "
            "and head size, V K's batch, heads and sequence", q->name,
            shape_str(c, q), k->name, shape_str(c, k), v->name,
            shape_str(c, v)));
    long dims[4] = {q->dims[0], q->dims[1], q->dims[2], v->dims[3]};
    set_shape(OUT(0), 4, dims);
    return 0;
}

/* "bh, sq, skv, e, ev, scale, causal"; scale defaults to 1/sqrt(head size) */
static const char *attention_args(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *q = IN(0), *k = IN(1), *v = IN(2);
    const Attr *scale = node_attr(n, "scale");
    float s = scale->set ? scale->f : (float)(1.0 / sqrt((double)q->dims[3]));
    return ctx_printf(e->ctx, "%ld, %ld, %ld, %ld, %ld, %s, %ld",
                      q->dims[0] * q->dims[1], q->dims[2], k->dims[2],
                      q->dims[3], v->dims[3], fmt_float(e->ctx, s),
                      node_int(n, "is_causal"));
}

void emit_attention_fwd(Emit *e, const Node *n, const char *const *out,
                        const char *const *in)
{
    emit(e, "rt_attention_forward(%s, %s, %s, %s, %s, %s);", out[0], in[0],
         in[1], in[2], attention_args(e, n), e->scratch);
}

void emit_attention_bwd(Emit *e, const Node *n, const char *const *din,
                        const char *const *dout,
                        const char *const *in, const char *const *out)
{
    (void)out;
    emit(e, "rt_attention_backward(%s, %s, %s, %s, %s, %s, %s, %s, %s);",
         or_null(din, 0, 3), or_null(din, 1, 3), or_null(din, 2, 3), dout[0],
         in[0], in[1], in[2], attention_args(e, n), e->scratch);
}

/* A block of scores and its softmax statistics in the forward; scores,
 * their gradients and the statistics in the backward, which rebuilds the
 * probabilities from Q and K; past one key block, a block of y (dq) rows
 * and their compensation terms. Bounded in skv (blocks of keys). */
long scratch_attention(const Graph *g, const Node *n, int backward)
{
    int skv = (int)IN(1)->dims[2];
    return (long)(backward ? rt_attention_backward_scratch(
                                 skv, (int)IN(0)->dims[3])
                           : rt_attention_scratch(skv, (int)IN(2)->dims[3]));
}

double flops_attention(const Graph *g, const Node *n)
{
    const Tensor *q = IN(0), *k = IN(1), *v = IN(2);
    double rows = (double)q->dims[0] * q->dims[1] * q->dims[2];
    return rows * k->dims[2] * (2.0 * q->dims[3] + 2.0 * v->dims[3] + 5.0);
}
