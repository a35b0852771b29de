/*
 * ops.c: the op table, the one place that knows an op.
 *
 * A row says the op's ONNX name, its arity, its cost category, its typed
 * attributes with ONNX's defaults, its shape rule, its FLOPs, which inputs
 * and outputs each input's gradient reads, and how its forward and backward
 * calls are written. Everything downstream (autodiff, remat, schedule, emit)
 * asks the table and never switches on the op.
 *
 * The needs masks are what makes rematerialization precise: Add's backward
 * reads nothing, so under any policy the output of the GEMM feeding an Add is
 * never kept for it; Gelu reads its input; Tanh, Sigmoid and Relu read their
 * output; a GEMM's weight gradient reads the activation, its input gradient
 * the weight.
 *
 * To add an op: see compiler/ADDING_AN_OP.md.
 */
#include "remat.h"

#include <string.h>

#define IN(i) (&g->tensors[n->in[i]])
#define OUT(i) (&g->tensors[n->out[i]])

const char *const category_names[CAT_COUNT] = {
    [CAT_MATMUL] = "matmul",
    [CAT_CONV] = "conv",
    [CAT_ATTENTION] = "attention",
    [CAT_POINTWISE] = "pointwise",
    [CAT_REDUCTION] = "reduction",
    [CAT_NORMALIZATION] = "normalization",
    [CAT_SHAPE] = "shape",
    [CAT_RANDOM] = "random",
    [CAT_LOSS] = "loss",
};

/* ---- shape helpers ---------------------------------------------------------- */

static void set_shape(Tensor *t, int rank, const long *dims)
{
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        t->numel *= dims[i];
    }
}

static int node_error(Ctx *c, const Graph *g, const Node *n, const char *what)
{
    return ctx_error(c, g->file, n->line, "node '%s': %s", n->name, what);
}

/* ---- Gemm and MatMul ----------------------------------------------------------- */

/* Gemm's (M, N, K) from its inputs and attributes. */
static void gemm_mnk(const Graph *g, const Node *n, long *m, long *nn, long *k)
{
    int ta = n->op == OP_GEMM && node_int(n, "transA");
    int tb = n->op == OP_GEMM && node_int(n, "transB");
    *m = IN(0)->dims[ta ? 1 : 0];
    *k = IN(0)->dims[ta ? 0 : 1];
    *nn = IN(1)->dims[tb ? 0 : 1];
}

/* C's rows and columns as it broadcasts to (M, N): 1 or the full extent. */
static void gemm_c_dims(const Tensor *c, long *rows, long *cols)
{
    *rows = c->rank == 2 ? c->dims[0] : 1;
    *cols = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
}

static int shape_gemm(Ctx *c, Graph *g, Node *n)
{
    const char *op = op_table[n->op].name;
    for (int i = 0; i < 2; i++)
        if (IN(i)->rank != 2)
            return node_error(c, g, n, ctx_printf(c,
                "%s input %d '%s' has shape %s but must be 2-D", op, i,
                IN(i)->name, shape_str(c, IN(i))));
    int ta = n->op == OP_GEMM && node_int(n, "transA");
    int tb = n->op == OP_GEMM && node_int(n, "transB");
    long m, nn, k;
    gemm_mnk(g, n, &m, &nn, &k);
    long kb = IN(1)->dims[tb ? 1 : 0];
    if (k != kb && n->op == OP_MATMUL)
        return node_error(c, g, n, ctx_printf(c,
            "MatMul input 1 '%s' has shape %s but needs %ld rows to match "
            "input 0's %ld columns", IN(1)->name, shape_str(c, IN(1)), k, k));
    if (k != kb)
        return node_error(c, g, n, ctx_printf(c,
            "%s input 1 '%s' has shape %s but %s needs %ld %s to match "
            "input 0's %ld (transA=%d)", op, IN(1)->name, shape_str(c, IN(1)),
            tb ? "transB=1" : "transB=0", k, tb ? "columns" : "rows", k, ta));
    if (n->nin == 3) {
        long rows, cols;
        gemm_c_dims(IN(2), &rows, &cols);
        if (IN(2)->rank > 2 || (rows != 1 && rows != m) ||
            (cols != 1 && cols != nn))
            return node_error(c, g, n, ctx_printf(c,
                "Gemm input 2 '%s' has shape %s, which does not broadcast to "
                "the output's %ldx%ld; C may be %ld, 1x%ld, %ldx1, %ldx%ld or "
                "a scalar", IN(2)->name, shape_str(c, IN(2)), m, nn, nn, nn, m,
                m, nn));
    }
    long dims[2] = {m, nn};
    set_shape(OUT(0), 2, dims);
    return 0;
}

static double flops_gemm(const Graph *g, const Node *n)
{
    long m, nn, k;
    gemm_mnk(g, n, &m, &nn, &k);
    return 2.0 * m * nn * k + (n->nin == 3 ? (double)m * nn : 0);
}

/* The sizes and attributes both GEMM kernels take after their pointers:
 * "m, n, k, trans_a, trans_b, alpha, beta, c_rows, c_cols". MatMul is a
 * Gemm with alpha 1 and no C. */
static const char *gemm_args(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    long m, nn, k, rows = 0, cols = 0;
    gemm_mnk(g, n, &m, &nn, &k);
    if (n->nin == 3)
        gemm_c_dims(IN(2), &rows, &cols);
    int gemm = n->op == OP_GEMM;
    return ctx_printf(e->ctx, "%ld, %ld, %ld, %d, %d, %s, %s, %ld, %ld", m, nn,
        k, gemm ? (int)node_int(n, "transA") : 0,
        gemm ? (int)node_int(n, "transB") : 0,
        fmt_float(e->ctx, gemm ? node_float(n, "alpha") : 1.0f),
        fmt_float(e->ctx, gemm && n->nin == 3 ? node_float(n, "beta") : 0.0f),
        rows, cols);
}

static void emit_gemm_fwd(Emit *e, const Node *n, const char *const *out,
                          const char *const *in)
{
    emit(e, "rt_gemm_forward(%s, %s, %s, %s, %s);", out[0], in[0], in[1],
         n->nin == 3 ? in[2] : "NULL", gemm_args(e, n));
}

static const char *or_null(const char *const *v, int i, int n)
{
    return i < n && v[i] ? v[i] : "NULL";
}

static void emit_gemm_bwd(Emit *e, const Node *n, const char *const *din,
                          const char *const *dout, const char *const *in,
                          const char *const *out)
{
    (void)out;
    emit(e, "rt_gemm_backward(%s, %s, %s, %s, %s, %s, %s);",
         or_null(din, 0, n->nin), or_null(din, 1, n->nin),
         or_null(din, 2, n->nin), dout[0], or_null(in, 0, n->nin),
         or_null(in, 1, n->nin), gemm_args(e, n));
}

/* ---- broadcasting binary ops ------------------------------------------------ */

/* ONNX multidirectional (numpy) broadcasting. */
static int shape_binary(Ctx *c, Graph *g, Node *n)
{
    const Tensor *a = IN(0), *b = IN(1);
    int rank = a->rank > b->rank ? a->rank : b->rank;
    long dims[MAX_RANK];
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        long da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return node_error(c, g, n, ctx_printf(c,
                "%s inputs '%s' (%s) and '%s' (%s) do not broadcast: "
                "dimension %d is %ld against %ld; each pair of trailing "
                "dimensions must be equal or 1", op_table[n->op].name,
                a->name, shape_str(c, a), b->name, shape_str(c, b), i, da,
                db));
        dims[i] = da > db ? da : db;
    }
    set_shape(OUT(0), rank, dims);
    return 0;
}

static double flops_out(const Graph *g, const Node *n)
{
    return (double)OUT(0)->numel;
}

static void emit_binary_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    emit_bcast(e, n, OUT(0), IN(0), IN(1));
}

static void emit_binary_fwd(Emit *e, const Node *n, const char *const *out,
                            const char *const *in)
{
    emit(e, "rt_%s_forward(%s, %s, %s, &map_%s);", op_table[n->op].kernel, out[0],
         in[0], in[1], n->cname);
}

static void emit_binary_bwd(Emit *e, const Node *n, const char *const *din,
                            const char *const *dout, const char *const *in,
                            const char *const *out)
{
    (void)out;
    if (n->op == OP_ADD || n->op == OP_SUB)
        emit(e, "rt_%s_backward(%s, %s, %s, &map_%s);", op_table[n->op].kernel,
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0], n->cname);
    else
        emit(e, "rt_%s_backward(%s, %s, %s, %s, %s, &map_%s);", op_table[n->op].kernel,
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0],
             or_null(in, 0, 2), or_null(in, 1, 2), n->cname);
}

/* ---- unary pointwise --------------------------------------------------------- */

static int shape_same(Ctx *c, Graph *g, Node *n)
{
    (void)c;
    set_shape(OUT(0), IN(0)->rank, IN(0)->dims);
    return 0;
}

static double flops_relu(const Graph *g, const Node *n) { return (double)OUT(0)->numel; }
static double flops_tanh(const Graph *g, const Node *n) { return 4.0 * OUT(0)->numel; }
static double flops_gelu(const Graph *g, const Node *n) { return 8.0 * OUT(0)->numel; }

static int gelu_tanh(const Node *n)
{
    return n->op == OP_GELU && strcmp(node_attr(n, "approximate")->s, "tanh") == 0;
}

static void emit_unary_fwd(Emit *e, const Node *n, const char *const *out,
                           const char *const *in)
{
    const Graph *g = e->g;
    if (n->op == OP_GELU)
        emit(e, "rt_gelu_forward(%s, %s, %ld, %d);", out[0], in[0],
             OUT(0)->numel, gelu_tanh(n));
    else
        emit(e, "rt_%s_forward(%s, %s, %ld);", op_table[n->op].kernel, out[0], in[0],
             OUT(0)->numel);
}

static void emit_unary_bwd(Emit *e, const Node *n, const char *const *din,
                           const char *const *dout, const char *const *in,
                           const char *const *out)
{
    const Graph *g = e->g;
    if (n->op == OP_GELU)
        emit(e, "rt_gelu_backward(%s, %s, %s, %ld, %d);", din[0], dout[0],
             in[0], OUT(0)->numel, gelu_tanh(n));
    else
        emit(e, "rt_%s_backward(%s, %s, %s, %ld);", op_table[n->op].kernel, din[0],
             dout[0], out[0], OUT(0)->numel);
}

/* ---- reductions --------------------------------------------------------------- */

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
    for (int i = 0; !none_given && i < axes->nints; i++) {
        long a = axes->ints[i];
        if (a < -x->rank || a >= x->rank)
            return node_error(c, g, n, ctx_printf(c,
                "%s axis %ld is out of range for input '%s' of rank %d; "
                "axes must be in [%d, %d]", op_table[n->op].name, a, x->name,
                x->rank, -x->rank, x->rank - 1));
        int d = (int)(a < 0 ? a + x->rank : a);
        if (reduced[d])
            return node_error(c, g, n, ctx_printf(c,
                "%s axis %ld is listed twice (axis %d names the same "
                "dimension)", op_table[n->op].name, a, d));
        reduced[d] = 1;
    }
    return 0;
}

static int shape_reduce(Ctx *c, Graph *g, Node *n)
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

static double flops_in(const Graph *g, const Node *n)
{
    return (double)IN(0)->numel;
}

static const char *reduce_scale(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    float scale = 1.0f;
    if (n->op == OP_REDUCE_MEAN)
        scale = (float)(1.0 / ((double)IN(0)->numel / (double)OUT(0)->numel));
    return fmt_float(e->ctx, scale);
}

static void emit_reduce_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    int reduced[MAX_RANK];
    int bad = reduced_axes(e->ctx, g, n, reduced);
    assert(!bad && "shapes.c accepted the axes");
    (void)bad;
    emit_reduce_map(e, n, IN(0), reduced);
}

static void emit_reduce_fwd(Emit *e, const Node *n, const char *const *out,
                            const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_reduce_forward(%s, %s, &map_%s, %ld, %s);", out[0], in[0],
         n->cname, OUT(0)->numel, reduce_scale(e, n));
}

static void emit_reduce_bwd(Emit *e, const Node *n, const char *const *din,
                            const char *const *dout, const char *const *in,
                            const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_reduce_backward(%s, %s, &map_%s, %s);", din[0], dout[0],
         n->cname, reduce_scale(e, n));
}

/* ---- the table ------------------------------------------------------------------ */

static const char *const gelu_modes[] = {"none", "tanh", NULL};

static const AttrSpec gemm_attrs[] = {
    {.name = "alpha", .type = ATTR_FLOAT, .f = 1.0f},
    {.name = "beta", .type = ATTR_FLOAT, .f = 1.0f},
    {.name = "transA", .type = ATTR_INT, .i = 0},
    {.name = "transB", .type = ATTR_INT, .i = 0},
    {0},
};
static const AttrSpec gelu_attrs[] = {
    {.name = "approximate", .type = ATTR_STRING, .s = "none",
     .choices = gelu_modes},
    {0},
};
static const AttrSpec reduce_attrs[] = {
    {.name = "axes", .type = ATTR_INTS},
    {.name = "keepdims", .type = ATTR_INT, .i = 1},
    {.name = "noop_with_empty_axes", .type = ATTR_INT, .i = 0},
    {0},
};
static const AttrSpec no_attrs[] = {{0}};

#define BINARY(NAME, KERNEL, NEED0, NEED1)                                      \
    {NAME, KERNEL, 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary, flops_out, {NEED0, NEED1},  \
     emit_binary_fwd, emit_binary_bwd, emit_binary_static}
#define UNARY(NAME, KERNEL, FLOPS, NEED)                                         \
    {NAME, KERNEL, 1, 1, 1, CAT_POINTWISE, no_attrs, shape_same, FLOPS, {NEED},       \
     emit_unary_fwd, emit_unary_bwd, NULL}

const OpInfo op_table[] = {
    [OP_GEMM] = {"Gemm", "gemm", 2, 3, 1, CAT_MATMUL, gemm_attrs, shape_gemm,
                 flops_gemm, {NEED_IN(1), NEED_IN(0), 0}, emit_gemm_fwd,
                 emit_gemm_bwd, NULL},
    [OP_MATMUL] = {"MatMul", "gemm", 2, 2, 1, CAT_MATMUL, no_attrs, shape_gemm,
                   flops_gemm, {NEED_IN(1), NEED_IN(0)}, emit_gemm_fwd,
                   emit_gemm_bwd, NULL},
    [OP_ADD] = BINARY("Add", "add", 0, 0),
    [OP_SUB] = BINARY("Sub", "sub", 0, 0),
    [OP_MUL] = BINARY("Mul", "mul", NEED_IN(1), NEED_IN(0)),
    [OP_DIV] = BINARY("Div", "div", NEED_IN(1),
                      NEED_IN(0) | NEED_IN(1)),
    [OP_RELU] = UNARY("Relu", "relu", flops_relu, NEED_OUT(0)),
    [OP_GELU] = {"Gelu", "gelu", 1, 1, 1, CAT_POINTWISE, gelu_attrs, shape_same,
                 flops_gelu, {NEED_IN(0)}, emit_unary_fwd, emit_unary_bwd,
                 NULL},
    [OP_TANH] = UNARY("Tanh", "tanh", flops_tanh, NEED_OUT(0)),
    [OP_SIGMOID] = UNARY("Sigmoid", "sigmoid", flops_tanh, NEED_OUT(0)),
    [OP_REDUCE_MEAN] = {"ReduceMean", "reduce", 1, 1, 1, CAT_REDUCTION, reduce_attrs,
                        shape_reduce, flops_in, {0}, emit_reduce_fwd,
                        emit_reduce_bwd, emit_reduce_static},
    [OP_REDUCE_SUM] = {"ReduceSum", "reduce", 1, 1, 1, CAT_REDUCTION, reduce_attrs,
                       shape_reduce, flops_in, {0}, emit_reduce_fwd,
                       emit_reduce_bwd, emit_reduce_static},
};

/* The last OpKind has a row (a unit test checks that every row is filled). */
_Static_assert(sizeof op_table / sizeof op_table[0] == OP_COUNT,
               "op_table must cover OpKind");

int op_lookup(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (op_table[i].name && strcmp(op_table[i].name, name) == 0)
            return i;
    return -1;
}

int attr_index(const OpInfo *op, const char *name)
{
    for (int i = 0; op->attrs[i].name; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return i;
    return -1;
}

const Attr *node_attr(const Node *n, const char *name)
{
    int i = attr_index(&op_table[n->op], name);
    assert(i >= 0 && "asked for an attribute the op does not have");
    return &n->attrs[i];
}

long node_int(const Node *n, const char *name) { return node_attr(n, name)->i; }
float node_float(const Node *n, const char *name) { return node_attr(n, name)->f; }

unsigned op_backward_needs(const Node *n, const int *want)
{
    unsigned mask = 0;
    for (int i = 0; i < n->nin; i++)
        if (want[i])
            mask |= op_table[n->op].needs[i];
    return mask;
}
