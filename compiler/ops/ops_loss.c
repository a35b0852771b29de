/*
 * ops_loss.c: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss
 * (runtime loss.c). SoftmaxCrossEntropyLoss: scores (N, C) or
 * (N, C, D...), int64 labels, optional class weights that get no gradient,
 * ignore_index, and mean, sum or none. The backward recomputes the softmax
 * from the scores: no probabilities are kept. NegativeLogLikelihoodLoss
 * (torch's nn.NLLLoss after LogSoftmax) takes the same inputs and
 * attributes with log-probabilities for scores, loss -w[y] x[y]; its
 * backward reads the labels and weights alone.
 */
#include "ops.h"

#include <math.h>
#include <string.h>

/* Scores (N, C, D1, ...) and labels (N, D1, ...): the class dimension is 1.
 * NegativeLogLikelihoodLoss's input (log-probabilities) the same. */
int shape_sce(Ctx *c, Graph *g, Node *n)
{
    const Tensor *s = IN(0), *l = IN(1);
    const char *op = op_table[n->op].name;
    if (s->rank < 2)
        return node_error(c, g, n, ctx_printf(c, "%s input 0 '%s' has shape "
            "%s; %s must be (N, C) or (N, C, D1, ...)", op, s->name,
            shape_str(c, s), n->op == OP_NLL_LOSS ? "the log-probabilities"
            : "scores"));
    int same = l->rank == s->rank - 1 && l->dims[0] == s->dims[0];
    for (int d = 1; same && d < l->rank; d++)
        same = l->dims[d] == s->dims[d + 1];
    if (!same) {
        Tensor want = *s;
        want.rank = s->rank - 1;
        memmove(want.dims + 1, s->dims + 2, (size_t)(s->rank - 2) * sizeof s->dims[0]);
        return node_error(c, g, n, ctx_printf(c, "%s input 1 '%s' has shape "
            "%s but the labels of scores %s must have shape %s (the scores' "
            "without the class dimension 1)", op, l->name, shape_str(c, l),
            shape_str(c, s), shape_str(c, &want)));
    }
    if (n->nin == 3 && (IN(2)->rank != 1 || IN(2)->dims[0] != s->dims[1]))
        return node_error(c, g, n, ctx_printf(c, "%s input 2 '%s' has shape "
            "%s but the class weights of scores %s must have shape %ld (one "
            "weight per class, dimension 1)", op, IN(2)->name,
            shape_str(c, IN(2)), shape_str(c, s), s->dims[1]));
    const Attr *ig = node_attr(n, "ignore_index");
    if (ig->set && (ig->i < -(1L << 31) || ig->i >= (1L << 31)))
        return node_error(c, g, n, ctx_printf(c, "%s ignore_index %ld is out "
            "of range; it must fit in 32 bits (ONNX's usual value is -100)",
            op, ig->i));
    /* reduction none: one loss per label, the labels' shape */
    if (strcmp(node_attr(n, "reduction")->s, "none") == 0)
        set_shape(OUT(0), l->rank, l->dims);
    else
        set_shape(OUT(0), 0, NULL);
    return 0;
}

/* "weights, n, c, inner, reduction, has_ignore, ignore_index"; weights is
 * NULL without input 2 */
static const char *sce_args(Emit *e, const Node *n, const char *weights)
{
    const Graph *g = e->g;
    const Tensor *s = IN(0);
    const Attr *ig = node_attr(n, "ignore_index");
    const char *r = node_attr(n, "reduction")->s;
    return ctx_printf(e->ctx, "%s, %ld, %ld, %ld, %s, %d, %ld",
                      weights ? weights : "NULL", s->dims[0], s->dims[1],
                      dims_product(s, 2, s->rank),
                      !strcmp(r, "mean") ? "RT_SCE_MEAN"
                      : !strcmp(r, "sum") ? "RT_SCE_SUM" : "RT_SCE_NONE",
                      ig->set, ig->set ? ig->i : 0L);
}

void emit_sce_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in)
{
    emit(e, "rt_sce_forward(%s, %s, %s, %s);", out[0], in[0], in[1],
         sce_args(e, n, n->nin == 3 ? in[2] : NULL));
}

/* The weights get no gradient (the row's no_grad): din[2] is always NULL. */
void emit_sce_bwd(Emit *e, const Node *n, const char *const *din,
                  const char *const *dout, const char *const *in,
                  const char *const *out)
{
    (void)out;
    emit(e, "rt_sce_backward(%s, %s, %s, %s, %s);", din[0], dout[0], in[0],
         in[1], sce_args(e, n, n->nin == 3 ? in[2] : NULL));
}

double flops_sce(const Graph *g, const Node *n)
{
    return 4.0 * IN(0)->numel;      /* max, exp, sum, and the pick */
}

/* Classes 0..C-1, and ignore_index (when the node has one) wherever it
 * lies; -50 beside an ignore index of -100 is no label (torch: "Target -50
 * is out of bounds"). */
void range_sce(const Graph *g, const Node *n, IntRange *r)
{
    const Attr *ig = node_attr(n, "ignore_index");
    r->lo = 0;
    r->hi = IN(0)->dims[1];
    r->has_ignore = ig->set && (ig->i < r->lo || ig->i >= r->hi);
    r->ignore = r->has_ignore ? ig->i : 0;
}

/* ---- NegativeLogLikelihoodLoss (runtime loss.c's rt_nll_*) --------------- */

void emit_nll_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in)
{
    emit(e, "rt_nll_forward(%s, %s, %s, %s);", out[0], in[0], in[1],
         sce_args(e, n, n->nin == 3 ? in[2] : NULL));
}

/* d(input) = -w[y] g at each label; reads the labels and weights alone
 * (in[0] is NULL: the row's needs leave the log-probabilities out). */
void emit_nll_bwd(Emit *e, const Node *n, const char *const *din,
                  const char *const *dout, const char *const *in,
                  const char *const *out)
{
    (void)out;
    emit(e, "rt_nll_backward(%s, %s, %s, %s);", din[0], dout[0], in[1],
         sce_args(e, n, n->nin == 3 ? in[2] : NULL));
}

double flops_nll(const Graph *g, const Node *n)
{
    return 2.0 * IN(1)->numel;      /* a weight and a product per label */
}
