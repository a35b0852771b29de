/*
 * ops_norm.c: LayerNormalization and BatchNormalization (runtime norm.c).
 *
 * LayerNormalization normalizes over the axes from `axis` on; its
 * backward reads X and scale and recomputes the mean and 1/std from X.
 *
 * BatchNormalization(X, scale, B, input_mean, input_var) over X of shape
 * (N, C, D1, ...), or (N, C): every channel is normalized on its own. The
 * two functions that run it differ, as PyTorch's train() and eval() do:
 *
 *   - NAME_forward (inference) normalizes with input_mean and input_var,
 *     the running statistics: y = scale * (x - mean) / sqrt(var + eps) + B.
 *   - NAME_train_step, where training_mode is 1 (the XML's default; an
 *     ONNX export gives it for a module in train()), normalizes with the
 *     batch's statistics (the mean and the biased variance over N and the
 *     spatial dimensions), and its backward is the full batch-statistics
 *     gradient. The node's forward then updates the running statistics in
 *     place, as PyTorch does: running = momentum * running + (1 - momentum)
 *     * batch, with the UNBIASED batch variance for running_var (ONNX's
 *     reference uses the biased one; PyTorch's trainers and checkpoints
 *     expect the unbiased). The row's `updates` names inputs 3 and 4, so
 *     train_step gets a writable pointer to them (emit.c).
 *
 * Rematerialization stays exact: a recompute in the backward calls the
 * same training kernel on the same X, so it gets the same statistics bit
 * for bit, and passes NULL running statistics (Emit.update is 0), so they
 * are updated once per step under every policy. The backward reads X and
 * scale alone and recomputes the batch mean and 1/std from X, as
 * LayerNormalization's does: nothing else is kept.
 *
 * With training_mode 0 (a BatchNorm a user keeps in eval() while the rest
 * trains, as partial fine-tuning does) train_step runs the inference
 * forward too: per channel an affine map y = x * a + b with a = scale /
 * sqrt(var + eps) and b = B - mean * a, the running statistics never
 * updated. Its backward (rt_batchnorm_eval_backward) has no terms through
 * the statistics: dX = dY * a reads scale and var, not X; dscale reads X
 * and the statistics; dB reads nothing. Where scale and B are frozen too
 * and the node follows a frozen Conv or Gemm whose values are known at
 * compile time, front/fold.c folds it into that node instead.
 *
 * ONNX's optional outputs 1 and 2 (the updated running statistics) are not
 * outputs here: the update is in place.
 */
#include "ops.h"

/* Scale and bias hold exactly the normalized dimensions (x's from axis). */
int shape_layer_norm(Ctx *c, Graph *g, Node *n)
{
    int a = node_axis(c, g, n, IN(0)->rank, IN(0)->rank - 1);
    if (a < 0)
        return -1;
    long cols = dims_product(IN(0), a, IN(0)->rank);
    for (int i = 1; i < n->nin; i++)
        if (IN(i)->numel != cols)
            return node_error(c, g, n, ctx_printf(c,
                "LayerNormalization input %d '%s' has shape %s but must hold "
                "the %ld elements of input 0's dimensions from axis %d on",
                i, IN(i)->name, shape_str(c, IN(i)), cols, a));
    return shape_same(c, g, n);
}

static const char *layer_norm_sizes(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0);
    long a = node_int(n, "axis");
    int axis = (int)(a < 0 ? a + x->rank : a);
    return ctx_printf(e->ctx, "%ld, %ld, %s", dims_product(x, 0, axis),
                      dims_product(x, axis, x->rank),
                      fmt_float(e->ctx, node_float(n, "epsilon")));
}

void emit_layer_norm_fwd(Emit *e, const Node *n, const char *const *out,
                         const char *const *in)
{
    emit(e, "rt_layernorm_forward(%s, %s, %s, %s, %s);", out[0], in[0], in[1],
         n->nin == 3 ? in[2] : "NULL", layer_norm_sizes(e, n));
}

void emit_layer_norm_bwd(Emit *e, const Node *n, const char *const *din,
                         const char *const *dout, const char *const *in,
                         const char *const *out)
{
    (void)out;
    if (e->remake) {    /* bwd_remakes: y from the moments, beside dx */
        emit(e, "rt_layernorm_backward_remake(%s, %s, %s, %s, %s, %s, %s, "
             "%s, %s, %s);", or_null(din, 0, n->nin), or_null(din, 1, n->nin),
             or_null(din, 2, n->nin), e->remake, dout[0], in[0], in[1],
             or_null(in, 2, n->nin), layer_norm_sizes(e, n), e->scratch);
        return;
    }
    emit(e, "rt_layernorm_backward(%s, %s, %s, %s, %s, %s, %s, %s);",
         or_null(din, 0, n->nin), or_null(din, 1, n->nin),
         or_null(din, 2, n->nin), dout[0], or_null(in, 0, n->nin),
         or_null(in, 1, n->nin), layer_norm_sizes(e, n), e->scratch);
}

/* The backward's compensation terms of dscale and dbias (2 cols floats):
 * their sums over rows do not drift with the number of rows. */
long scratch_layer_norm(const Graph *g, const Node *n, int backward)
{
    const Tensor *x = IN(0);
    long a = node_int(n, "axis");
    int axis = (int)(a < 0 ? a + x->rank : a);
    return backward ? (long)rt_layernorm_backward_scratch(
                          (int)dims_product(x, axis, x->rank))
                    : 0;
}

double flops_layer_norm(const Graph *g, const Node *n)
{
    return 8.0 * OUT(0)->numel;
}

const AttrSpec batch_norm_attrs[] = {
    {.name = "epsilon", .type = ATTR_FLOAT, .f = 1e-5f},
    {.name = "momentum", .type = ATTR_FLOAT, .f = 0.9f},
    /* ONNX's default is 0; the XML's is 1, the meaning its graphs had
     * before eval mode existed (the ONNX importer writes the attribute) */
    {.name = "training_mode", .type = ATTR_INT, .i = 1},
    {0},
};

/* X's (N, C, inner): inner the product of the spatial dimensions. */
static void bn_dims(const Graph *g, const Node *n, long *nb, long *ch,
                    long *inner)
{
    const Tensor *x = IN(0);
    *nb = x->dims[0];
    *ch = x->dims[1];
    *inner = dims_product(x, 2, x->rank);
}

static const char *const bn_input_names[] = {"X", "scale", "B", "input_mean",
                                             "input_var"};

int shape_batch_norm(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    if (x->rank < 2)
        return node_error(c, g, n, ctx_printf(c, "BatchNormalization input 0 "
            "'%s' has shape %s but must be (N, C) or (N, C, D1, ...)",
            x->name, shape_str(c, x)));
    long nb, ch, inner;
    bn_dims(g, n, &nb, &ch, &inner);
    for (int i = 1; i < 5; i++)
        if (IN(i)->rank != 1 || IN(i)->dims[0] != ch)
            return node_error(c, g, n, ctx_printf(c, "BatchNormalization "
                "input %d (%s) '%s' has shape %s but must be %ld, one value "
                "per channel of input 0 '%s' (%s)", i, bn_input_names[i],
                IN(i)->name, shape_str(c, IN(i)), ch, x->name,
                shape_str(c, x)));
    long mode = node_int(n, "training_mode");
    if (mode != 0 && mode != 1)
        return node_error(c, g, n, ctx_printf(c, "BatchNormalization "
            "training_mode is %ld; it must be 1 (train_step normalizes with "
            "the batch's statistics) or 0 (eval mode: the running ones)",
            mode));
    if (mode == 1 && nb * inner < 2)
        return node_error(c, g, n, ctx_printf(c, "BatchNormalization input 0 "
            "'%s' has shape %s: one value per channel, and the train step's "
            "batch statistics need at least 2 (N times the spatial size; "
            "training_mode=\"0\" normalizes with the running ones)",
            x->name, shape_str(c, x)));
    float m = node_float(n, "momentum"), eps = node_float(n, "epsilon");
    if (!(m >= 0.0f && m <= 1.0f))
        return node_error(c, g, n, ctx_printf(c, "BatchNormalization momentum "
            "%g is out of range; it must be in [0, 1] (ONNX's weight of the "
            "running statistics, 0.9 by default)", (double)m));
    if (!(eps >= 0.0f))
        return node_error(c, g, n, ctx_printf(c, "BatchNormalization epsilon "
            "%g is negative; it must be 0 or more", (double)eps));
    return shape_same(c, g, n);
}

static int bn_eval(const Node *n)
{
    return node_int(n, "training_mode") == 0;
}

/* Eval mode normalizes with the running statistics and leaves them be:
 * they are then constants, which may stay in flash (ram.c). */
unsigned batch_norm_updates(const Node *n)
{
    return bn_eval(n) ? 0 : n->row->updates;
}

/* Eval mode: dX reads scale and var, dscale X and both statistics, dB
 * nothing. Training mode: the row's needs[] (X and scale for dX, X for
 * dscale). */
unsigned batch_norm_needs(const Node *n, const int *want)
{
    if (!bn_eval(n))
        return (want[0] ? n->row->needs[0] : 0) |
               (want[1] ? n->row->needs[1] : 0);
    return (want[0] ? NEED_IN(1) | NEED_IN(4) : 0) |
           (want[1] ? NEED_IN(0) | NEED_IN(3) | NEED_IN(4) : 0);
}

/* Mean, variance, normalize, scale and shift. */
double flops_batch_norm(const Graph *g, const Node *n)
{
    return 8.0 * OUT(0)->numel;
}

/* "n, c, inner, eps" */
static const char *bn_sizes(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    long nb, ch, inner;
    bn_dims(g, n, &nb, &ch, &inner);
    return ctx_printf(e->ctx, "%ld, %ld, %ld, %s", nb, ch, inner,
                      fmt_float(e->ctx, node_float(n, "epsilon")));
}

void emit_batch_norm_fwd(Emit *e, const Node *n, const char *const *out,
                         const char *const *in)
{
    if (!e->train || bn_eval(n)) {     /* the running statistics, as read */
        emit(e, "rt_batchnorm_forward(%s, %s, %s, %s, %s, %s, %s);", out[0],
             in[0], in[1], in[2], in[3], in[4], bn_sizes(e, n));
        return;
    }
    /* batch statistics; the running ones updated once, not in a recompute */
    emit(e, "rt_batchnorm_train_forward(%s, %s, %s, %s, %s, %s, %s, %s);",
         out[0], e->update ? in[3] : "NULL", e->update ? in[4] : "NULL",
         in[0], in[1], in[2], bn_sizes(e, n),
         fmt_float(e->ctx, node_float(n, "momentum")));
}

void emit_batch_norm_bwd(Emit *e, const Node *n, const char *const *din,
                         const char *const *dout, const char *const *in,
                         const char *const *out)
{
    (void)out;
    if (bn_eval(n)) {
        emit(e, "rt_batchnorm_eval_backward(%s, %s, %s, %s, %s, %s, %s, %s, "
             "%s);", or_null(din, 0, n->nin), or_null(din, 1, n->nin),
             or_null(din, 2, n->nin), dout[0], or_null(in, 0, n->nin),
             or_null(in, 1, n->nin), or_null(in, 3, n->nin),
             or_null(in, 4, n->nin), bn_sizes(e, n));
        return;
    }
    emit(e, "rt_batchnorm_backward(%s, %s, %s, %s, %s, %s, %s);",
         or_null(din, 0, n->nin), or_null(din, 1, n->nin),
         or_null(din, 2, n->nin), dout[0], or_null(in, 0, n->nin),
         or_null(in, 1, n->nin),
         bn_sizes(e, n));
}

/* ---- GroupNormalization and InstanceNormalization ------------------------------- */

/* GroupNormalization(X, scale, B) over X of shape (N, C, D1, ...): the C
 * channels form num_groups groups of C / num_groups consecutive channels,
 * and each sample's group is normalized with its own mean and biased
 * variance; then y = xhat * scale[ch] + B[ch], scale and bias PER CHANNEL
 * as torch's nn.GroupNorm and ONNX opset 21 define them (opset 18 gave
 * one per group; the ONNX importer refuses that form where it differs).
 * InstanceNormalization(X, scale, B) is the same with one channel a group.
 * Both run rt_groupnorm_*, whose statistics are summed in double; the
 * backward reads X and scale and recomputes them, as LayerNorm's does. */

const AttrSpec group_norm_attrs[] = {
    {.name = "epsilon", .type = ATTR_FLOAT, .f = 1e-5f},
    {.name = "num_groups", .type = ATTR_INT},     /* required: shape rule */
    /* opset 21: the precision of the statistics, 1 (float32) by default;
     * remat's are double, at least as precise: 1 and 11 (double) accepted */
    {.name = "stash_type", .type = ATTR_INT, .i = 1},
    {0},
};
const AttrSpec instance_norm_attrs[] = {
    {.name = "epsilon", .type = ATTR_FLOAT, .f = 1e-5f},
    {0},
};

static long norm_groups(const Graph *g, const Node *n)
{
    return n->op == OP_GROUP_NORM ? node_int(n, "num_groups") : IN(0)->dims[1];
}

int shape_group_norm(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const char *op = n->row->name;
    const int min_rank = n->op == OP_GROUP_NORM ? 2 : 3;
    if (x->rank < min_rank)
        return node_error(c, g, n, ctx_printf(c, "%s input 0 '%s' has shape "
            "%s but must be %s", op, x->name, shape_str(c, x),
            min_rank == 2 ? "(N, C) or (N, C, D1, ...)" : "(N, C, D1, ...)"));
    long ch = x->dims[1];
    if (n->op == OP_GROUP_NORM) {
        const Attr *ng = node_attr(n, "num_groups");
        if (!ng->set)
            return node_error(c, g, n, "GroupNormalization needs "
                              "num_groups=\"...\", the number of groups of "
                              "channels");
        if (ng->i < 1 || ng->i > ch || ch % ng->i)
            return node_error(c, g, n, ctx_printf(c, "GroupNormalization "
                "num_groups %ld does not divide the %ld channels of input 0 "
                "'%s' (%s); it must be a divisor of %ld", ng->i, ch, x->name,
                shape_str(c, x), ch));
        long st = node_int(n, "stash_type");
        if (st != 1 && st != 11)
            return node_error(c, g, n, ctx_printf(c, "GroupNormalization "
                "stash_type %ld is not supported; remat computes the "
                "statistics in double: 1 (float32) or 11 (double)", st));
    }
    for (int i = 1; i < 3; i++)
        if (IN(i)->rank != 1 || IN(i)->dims[0] != ch)
            return node_error(c, g, n, ctx_printf(c, "%s input %d (%s) '%s' "
                "has shape %s but must be %ld, one value per channel of input "
                "0 '%s' (%s)", op, i, i == 1 ? "scale" : "B", IN(i)->name,
                shape_str(c, IN(i)), ch, x->name, shape_str(c, x)));
    if (!(node_float(n, "epsilon") >= 0.0f))
        return node_error(c, g, n, ctx_printf(c, "%s epsilon %g is negative; "
            "it must be 0 or more", op, (double)node_float(n, "epsilon")));
    return shape_same(c, g, n);
}

/* "n, c, inner, groups, eps" */
static const char *gn_sizes(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0);
    return ctx_printf(e->ctx, "%ld, %ld, %ld, %ld, %s", x->dims[0],
                      x->dims[1], dims_product(x, 2, x->rank),
                      norm_groups(g, n),
                      fmt_float(e->ctx, node_float(n, "epsilon")));
}

void emit_group_norm_fwd(Emit *e, const Node *n, const char *const *out,
                         const char *const *in)
{
    emit(e, "rt_groupnorm_forward(%s, %s, %s, %s, %s);", out[0], in[0], in[1],
         in[2], gn_sizes(e, n));
}

void emit_group_norm_bwd(Emit *e, const Node *n, const char *const *din,
                         const char *const *dout, const char *const *in,
                         const char *const *out)
{
    (void)out;
    emit(e, "rt_groupnorm_backward(%s, %s, %s, %s, %s, %s, %s);",
         or_null(din, 0, n->nin), or_null(din, 1, n->nin),
         or_null(din, 2, n->nin), dout[0], or_null(in, 0, n->nin),
         or_null(in, 1, n->nin), gn_sizes(e, n));
}
