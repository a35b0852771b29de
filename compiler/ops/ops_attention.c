/*
 * ops_attention.c: Attention (ONNX opset 23; runtime attention.c):
 * softmax(Q K^T * scale [+ mask] [+ causal mask]) V per batch and head, the
 * backward recomputing the probabilities from Q and K. Q, K and V are 4-D
 * (batch, heads, sequence, head size), or 3-D (batch, sequence, heads *
 * head size) with q_num_heads and kv_num_heads: the layout the projections
 * around attention write, read in place by the runtime's _3d kernels, so
 * that no transpose runs on either side (middle/fuse.c rewrites the 4-D
 * form between Reshape and Transpose pairs into it).
 */
#include "ops.h"

#include <math.h>

/* The sizes the kernels take: batch and heads (heads 1 for the 4-D form,
 * its batch the product of batch and heads), the two sequences and the two
 * head sizes. */
typedef struct {
    long batch, heads, sq, skv, e, ev;
} AttnDims;

static AttnDims attn_dims(const Graph *g, const Node *n)
{
    const Tensor *q = IN(0), *k = IN(1), *v = IN(2);
    AttnDims d;
    if (q->rank == 4) {
        d = (AttnDims){q->dims[0] * q->dims[1], 1, q->dims[2], k->dims[2],
                       q->dims[3], v->dims[3]};
    } else {
        long h = node_int(n, "q_num_heads");
        d = (AttnDims){q->dims[0], h, q->dims[1], k->dims[1], q->dims[2] / h,
                       v->dims[2] / h};
    }
    return d;
}

static int shape_attention_4d(Ctx *c, Graph *g, Node *n)
{
    const Tensor *q = IN(0), *k = IN(1), *v = IN(2);
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

static int shape_attention_3d(Ctx *c, Graph *g, Node *n)
{
    const Tensor *q = IN(0), *k = IN(1), *v = IN(2);
    long h = node_int(n, "q_num_heads"), hkv = node_int(n, "kv_num_heads");
    if (h <= 0 || hkv <= 0)
        return node_error(c, g, n, "3-D Attention inputs need q_num_heads "
                          "and kv_num_heads (the number of heads their last "
                          "axis holds), both positive");
    if (hkv != h)
        return node_error(c, g, n, ctx_printf(c, "Attention with q_num_heads "
            "%ld and kv_num_heads %ld: grouped-query attention is not "
            "supported; the two must be equal", h, hkv));
    if (q->dims[2] % h || v->dims[2] % h || k->dims[2] != q->dims[2] ||
        k->dims[0] != q->dims[0] || v->dims[0] != q->dims[0] ||
        v->dims[1] != k->dims[1])
        return node_error(c, g, n, ctx_printf(c, "Attention inputs Q '%s' (%s), "
            "K '%s' (%s) and V '%s' (%s) do not fit %ld heads: K needs Q's "
            "batch and last axis, V K's batch and sequence, and Q's and V's "
            "last axes must divide by the heads", q->name, shape_str(c, q),
            k->name, shape_str(c, k), v->name, shape_str(c, v), h));
    long dims[3] = {q->dims[0], q->dims[1], v->dims[2]};
    set_shape(OUT(0), 3, dims);
    return 0;
}

/* The mask's extent along axis a of (batch, heads, sq, skv), counted from
 * the right as broadcasting aligns it: 1 where it has no such axis. */
static long mask_dim(const Tensor *m, int a)
{
    int i = m->rank - (4 - a);
    return i >= 0 ? m->dims[i] : 1;
}

/* The optional additive mask (input 3): float, broadcast to (batch,
 * heads, sq, skv) from one mask per batch entry or for all, per query or
 * one row for all, never per head. */
static int shape_attention_mask(Ctx *c, Graph *g, Node *n)
{
    const Tensor *m = IN(3);
    const AttnDims d = attn_dims(g, n);
    long batch = IN(0)->rank == 4 ? IN(0)->dims[0] : d.batch;
    long b = mask_dim(m, 0), h = mask_dim(m, 1), q = mask_dim(m, 2);
    if (m->is_int || m->rank < 1 || m->rank > 4 || mask_dim(m, 3) != d.skv ||
        (q != 1 && q != d.sq) || h != 1 || (b != 1 && b != batch))
        return node_error(c, g, n, ctx_printf(c, "Attention mask '%s' (%s%s) "
            "does not fit: it is added to the scores (batch %ld, heads %ld, "
            "queries %ld, keys %ld), so it must be float with %ld keys last, "
            "1 or %ld queries before them, 1 head, and 1 or %ld batch entries "
            "(a key padding mask is (%ld, 1, 1, %ld))", m->name,
            shape_str(c, m), m->is_int ? ", int64" : "", batch,
            IN(0)->rank == 4 ? IN(0)->dims[1] : d.heads, d.sq, d.skv, d.skv,
            d.sq, batch, batch, d.skv));
    return 0;
}

int shape_attention(Ctx *c, Graph *g, Node *n)
{
    int rank = IN(0)->rank;
    for (int i = 0; i < 3; i++)
        if ((rank != 3 && rank != 4) || IN(i)->rank != rank)
            return node_error(c, g, n, ctx_printf(c, "Attention input %d '%s' "
                "has shape %s but Q, K and V must all be 4-D (batch, heads, "
                "sequence, head size) or all 3-D (batch, sequence, heads * "
                "head size)", i, IN(i)->name, shape_str(c, IN(i))));
    int rc = rank == 4 ? shape_attention_4d(c, g, n)
                       : shape_attention_3d(c, g, n);
    return rc || n->nin < 4 ? rc : shape_attention_mask(c, g, n);
}

/* "[batch, heads,] sq, skv, e, ev, scale, causal" after v (4-D: bh
 * first, no heads); scale defaults to 1/sqrt(head size). With a mask
 * (in[3]) the masked kernels' "mask, mask_b, mask_q, mask_heads, batch,
 * heads, " first: the 4-D layout as bh entries of one head, each batch
 * entry's mask serving its heads. */
static const char *attention_args(Emit *e, const Node *n,
                                  const char *const *in)
{
    const Graph *g = e->g;
    const AttnDims d = attn_dims(g, n);
    const Attr *scale = node_attr(n, "scale");
    float s = scale->set ? scale->f : (float)(1.0 / sqrt((double)d.e));
    const char *lead = IN(0)->rank == 4
                           ? ctx_printf(e->ctx, "%ld", d.batch)
                           : ctx_printf(e->ctx, "%ld, %ld", d.batch, d.heads);
    if (n->nin > 3) {
        const Tensor *m = IN(3);
        long sq = mask_dim(m, 2), skv = mask_dim(m, 3);
        long mb = mask_dim(m, 0) > 1 ? sq * skv : 0, mq = sq > 1 ? skv : 0;
        long per = IN(0)->rank == 4 ? IN(0)->dims[1] : d.heads;
        lead = ctx_printf(e->ctx, "%s, %ld, %ld, %ld, %ld, %ld", in[3], mb, mq,
                          per, d.batch, d.heads);
    }
    return ctx_printf(e->ctx, "%s, %ld, %ld, %ld, %ld, %s, %ld", lead, d.sq,
                      d.skv, d.e, d.ev, fmt_float(e->ctx, s),
                      node_int(n, "is_causal"));
}

static const char *attention_suffix(const Graph *g, const Node *n)
{
    return n->nin > 3 ? "_mask_3d" : IN(0)->rank == 4 ? "" : "_3d";
}

void emit_attention_fwd(Emit *e, const Node *n, const char *const *out,
                        const char *const *in)
{
    emit(e, "rt_attention_forward%s(%s, %s, %s, %s, %s, %s);",
         attention_suffix(e->g, n), out[0], in[0], in[1], in[2],
         attention_args(e, n, in), e->scratch);
}

void emit_attention_bwd(Emit *e, const Node *n, const char *const *din,
                        const char *const *dout,
                        const char *const *in, const char *const *out)
{
    (void)out;
    emit(e, "rt_attention_backward%s(%s, %s, %s, %s, %s, %s, %s, %s, %s);",
         attention_suffix(e->g, n), or_null(din, 0, 3), or_null(din, 1, 3),
         or_null(din, 2, 3), dout[0], in[0], in[1], in[2],
         attention_args(e, n, in), e->scratch);
}

/* A block of scores and its softmax statistics in the forward; scores,
 * their gradients and the statistics in the backward, which rebuilds the
 * probabilities from Q and K; past one key block, a block of y (dq) rows
 * and their compensation terms. Bounded in skv (blocks of keys). */
long scratch_attention(const Graph *g, const Node *n, int backward)
{
    const AttnDims d = attn_dims(g, n);
    return (long)(backward ? rt_attention_backward_scratch((int)d.skv,
                                                           (int)d.e)
                           : rt_attention_scratch((int)d.skv, (int)d.ev));
}

double flops_attention(const Graph *g, const Node *n)
{
    const AttnDims d = attn_dims(g, n);
    double rows = (double)d.batch * d.heads * d.sq;
    return rows * d.skv * (2.0 * d.e + 2.0 * d.ev + 5.0);
}
