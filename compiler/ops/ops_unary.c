/*
 * ops_unary.c: the one-input pointwise rows: Relu, Gelu (exact or tanh),
 * Tanh, Sigmoid, Exp, Log, Sqrt, Neg, Erf and Reciprocal, and torch.nn's
 * activations LeakyRelu, HardSwish, HardSigmoid, Clip, Elu, Softplus,
 * Abs, Selu, Celu, Softsign, Mish, Sin and Cos; and Sign, whose row has no
 * backward (its gradient is zero). Each writes rt_<kernel>_forward
 * over the output's elements, with its float attributes as literals after
 * the count; the backward reads what the row's needs mask says (Relu,
 * Tanh and Sigmoid their output, Gelu and Erf their input), or, where the
 * node keeps one (Node.compact), the 1-bit mask that Relu, LeakyRelu,
 * Clip and HardSigmoid name as their compact form: the forward's _mask
 * twin writes it, the backward's reads it.
 */
#include "ops.h"

#include <string.h>

double flops_relu(const Graph *g, const Node *n) { return (double)OUT(0)->numel; }
double flops_tanh(const Graph *g, const Node *n) { return 4.0 * OUT(0)->numel; }
double flops_gelu(const Graph *g, const Node *n) { return 8.0 * OUT(0)->numel; }
double flops_hard(const Graph *g, const Node *n) { return 2.0 * OUT(0)->numel; }

/* The float attributes a kernel takes after the element count, in the
 * order remat_rt.h declares them: ", alpha" and the like, or "". Clip's
 * missing bounds are infinities, which fmt_float writes as constant
 * expressions. HardSigmoid's backward reads its output and needs alpha
 * alone. */
static const char *unary_attrs(Emit *e, const Node *n, int backward)
{
    const char *alpha = "";
    if (n->op == OP_LEAKY_RELU || n->op == OP_ELU || n->op == OP_HARD_SIGMOID ||
        n->op == OP_SELU || n->op == OP_CELU)
        alpha = ctx_printf(e->ctx, ", %s",
                           fmt_float(e->ctx, node_float(n, "alpha")));
    if (n->op == OP_SELU)
        return ctx_printf(e->ctx, "%s, %s", alpha,
                          fmt_float(e->ctx, node_float(n, "gamma")));
    if (n->op == OP_HARD_SIGMOID && !backward)
        return ctx_printf(e->ctx, "%s, %s", alpha,
                          fmt_float(e->ctx, node_float(n, "beta")));
    if (n->op == OP_CLIP)
        return ctx_printf(e->ctx, ", %s, %s",
                          fmt_float(e->ctx, node_float(n, "min")),
                          fmt_float(e->ctx, node_float(n, "max")));
    return alpha;
}

static int gelu_tanh(const Node *n)
{
    return n->op == OP_GELU && strcmp(node_attr(n, "approximate")->s, "tanh") == 0;
}

long compact_mask(const Graph *g, const Node *n)
{
    return (OUT(0)->numel + 7) / 8;
}

void emit_unary_fwd(Emit *e, const Node *n, const char *const *out,
                    const char *const *in)
{
    const Graph *g = e->g;
    if (e->compact)     /* the _mask twin writes the bits too */
        emit(e, "rt_%s_forward_mask(%s, %s, %s, %ld%s);", n->row->kernel,
             out[0], e->compact, in[0], OUT(0)->numel, unary_attrs(e, n, 0));
    else if (n->op == OP_GELU)
        emit(e, "rt_gelu_forward(%s, %s, %s, %d);", out[0], in[0],
             elems(e, OUT(0)->numel), gelu_tanh(n));
    else
        emit(e, "rt_%s_forward(%s, %s, %s%s);", n->row->kernel, out[0],
             in[0], elems(e, OUT(0)->numel), unary_attrs(e, n, 0));
}

/* The backward reads what the row's needs mask says: the input (Gelu, Log),
 * the output (Relu, Tanh, Sigmoid, Exp, Sqrt) or nothing (Neg). */
void emit_unary_bwd(Emit *e, const Node *n, const char *const *din,
                    const char *const *dout, const char *const *in,
                    const char *const *out)
{
    const Graph *g = e->g;
    unsigned needs = n->row->needs[0];
    const char *read = needs & NEED_IN(0) ? ctx_printf(e->ctx, "%s, ", in[0])
                       : needs & NEED_OUT(0) ? ctx_printf(e->ctx, "%s, ", out[0])
                                             : "";
    /* the rows that write (Relu, Gelu) have a _set twin */
    const char *set = set_suffix(e);
    if (e->compact)     /* the mask where the operand was; Clip needs no
                         * bounds, LeakyRelu and HardSigmoid their alpha */
        emit(e, "rt_%s_backward_mask%s(%s, %s, %s, %ld%s%s);", n->row->kernel,
             set, din[0], dout[0], e->compact, OUT(0)->numel,
             n->op == OP_CLIP ? "" : unary_attrs(e, n, 1), set_arg(e));
    else if (n->op == OP_GELU && e->remake)   /* bwd_remakes: y beside dx */
        emit(e, "rt_gelu_backward_remake(%s, %s, %s, %s%s, %d%s);",
             din[0], e->remake, dout[0], read, elems(e, OUT(0)->numel),
             gelu_tanh(n), *set ? set_arg(e) : ", 0x0u");
    else if (n->op == OP_GELU)
        emit(e, "rt_gelu_backward%s(%s, %s, %s%s, %d%s);", set, din[0],
             dout[0], read, elems(e, OUT(0)->numel), gelu_tanh(n),
             set_arg(e));
    else
        emit(e, "rt_%s_backward%s(%s, %s, %s%s%s%s);", n->row->kernel,
             set, din[0], dout[0], read, elems(e, OUT(0)->numel),
             unary_attrs(e, n, 1), set_arg(e));
}

/* As Tanh, Exp and Log count a transcendental: 4 per element. */
double flops_erf(const Graph *g, const Node *n)
{
    return 4.0 * OUT(0)->numel;
}
