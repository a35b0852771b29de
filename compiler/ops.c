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
 * Op families with many functions live in their own files (ops_conv.c:
 * Conv, the pools, Attention; ops_norm.c, ops_pointwise.c,
 * ops_structural.c); this file keeps the smaller families and every row.
 *
 * To add an op: see compiler/ADDING_AN_OP.md.
 */
#include "remat.h"
#include "../runtime/remat_rt.h"

#include <math.h>
#include <string.h>

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

void set_shape(Tensor *t, int rank, const long *dims)
{
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        t->numel *= dims[i];
    }
}

/* The product of t's dimensions [from, to). */
long dims_product(const Tensor *t, int from, int to)
{
    long p = 1;
    for (int d = from; d < to; d++)
        p *= t->dims[d];
    return p;
}

int node_error(Ctx *c, const Graph *g, const Node *n, const char *what)
{
    return ctx_error(c, g->file, n->line, "node '%s': %s", n->name, what);
}

/* ---- Gemm and MatMul ----------------------------------------------------------- */

/* Gemm's (M, N, K) from its inputs and attributes. A MatMul of an N-D
 * input by a matrix is one GEMM too: its batch dimensions fold into M. */
static void gemm_mnk(const Graph *g, const Node *n, long *m, long *nn, long *k)
{
    int ta = n->op == OP_GEMM && node_int(n, "transA");
    int tb = n->op == OP_GEMM && node_int(n, "transB");
    const Tensor *a = IN(0), *b = IN(1);
    *k = a->dims[ta ? a->rank - 2 : a->rank - 1];
    *m = ta ? a->dims[a->rank - 1] : a->numel / *k;
    *nn = b->dims[tb ? b->rank - 2 : b->rank - 1];
}

/* MatMul with a B of more than two dimensions: a batch of GEMMs. */
static int is_bmm(const Graph *g, const Node *n)
{
    return n->op == OP_MATMUL && IN(1)->rank > 2;
}

/* C's rows and columns as it broadcasts to (M, N): 1 or the full extent. */
static void gemm_c_dims(const Tensor *c, long *rows, long *cols)
{
    *rows = c->rank == 2 ? c->dims[0] : 1;
    *cols = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
}

static int shape_bmm(Ctx *c, Graph *g, Node *n);

static int shape_gemm(Ctx *c, Graph *g, Node *n)
{
    const char *op = op_table[n->op].name;
    if (n->op == OP_MATMUL && (IN(0)->rank > 2 || IN(1)->rank > 2))
        return shape_bmm(c, g, n);
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

/* ---- MatMul over N-D inputs ----------------------------------------------------- */

/* ONNX MatMul, N-D: the last two dimensions multiply as matrices, the ones
 * before broadcast as numpy's do. A 2-D B is one folded GEMM (gemm_mnk);
 * a B with batch dimensions is a batch of GEMMs (rt_bmm). */
static int shape_bmm(Ctx *c, Graph *g, Node *n)
{
    const Tensor *a = IN(0), *b = IN(1);
    for (int i = 0; i < 2; i++)
        if (IN(i)->rank < 2)
            return node_error(c, g, n, ctx_printf(c, "MatMul input %d '%s' "
                "has shape %s; this version multiplies inputs of 2 or more "
                "dimensions", i, IN(i)->name, shape_str(c, IN(i))));
    long k = a->dims[a->rank - 1];
    if (b->dims[b->rank - 2] != k)
        return node_error(c, g, n, ctx_printf(c, "MatMul input 1 '%s' has "
            "shape %s but needs %ld rows to match input 0's %ld columns",
            b->name, shape_str(c, b), k, k));
    int rank = a->rank > b->rank ? a->rank : b->rank;
    long dims[MAX_RANK];
    for (int i = 0; i < rank - 2; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        long da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return node_error(c, g, n, ctx_printf(c, "MatMul inputs '%s' (%s) "
                "and '%s' (%s) have batch dimensions that do not broadcast: "
                "dimension %d is %ld against %ld; each pair must be equal or 1",
                a->name, shape_str(c, a), b->name, shape_str(c, b), i, da, db));
        dims[i] = da > db ? da : db;
    }
    dims[rank - 2] = a->dims[a->rank - 2];
    dims[rank - 1] = b->dims[b->rank - 1];
    set_shape(OUT(0), rank, dims);
    return 0;
}

/* Which matrix of t each of the output's `batch` matrices reads: the
 * output's batch index taken apart and put together again with t's
 * extents, 1-extents broadcasting. */
static void batch_index(const Tensor *y, const Tensor *t, long *index)
{
    int yb = y->rank - 2, tb = t->rank - 2;
    long batch = dims_product(y, 0, yb);
    for (long i = 0; i < batch; i++) {
        long rest = i, at = 0, stride = 1;
        for (int d = yb - 1; d >= 0; d--) {
            long coord = rest % y->dims[d];
            rest /= y->dims[d];
            int td = d - (yb - tb);
            if (td < 0)
                continue;
            if (t->dims[td] != 1)
                at += coord * stride;
            stride *= t->dims[td];
        }
        index[i] = at;
    }
}

static void emit_bmm_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *y = OUT(0);
    long batch = dims_product(y, 0, y->rank - 2);
    long *index = ctx_alloc(e->ctx, (size_t)batch * sizeof(long));
    /* bmma_, not bmm_a_: node a_x's bmm_a_x would be node x's A index */
    for (int i = 0; i < 2; i++) {
        batch_index(y, IN(i), index);
        emit_int_array(e, ctx_printf(e->ctx, "bmm%s_%s", i ? "b" : "a",
                                     n->cname), index, (int)batch);
    }
    emit(e, "static const rt_bmm bmm_%s = {%ld, %ld, %ld, %ld, bmma_%s, "
         "bmmb_%s};", n->cname, batch, y->dims[y->rank - 2],
         y->dims[y->rank - 1], IN(0)->dims[IN(0)->rank - 1], n->cname,
         n->cname);
}

static void emit_matmul_static(Emit *e, const Node *n)
{
    if (is_bmm(e->g, n))
        emit_bmm_static(e, n);
}

static double flops_gemm(const Graph *g, const Node *n)
{
    if (is_bmm(g, n))
        return 2.0 * OUT(0)->numel * IN(0)->dims[IN(0)->rank - 1];
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
    if (is_bmm(e->g, n)) {
        emit(e, "rt_bmm_forward(%s, %s, %s, &bmm_%s);", out[0], in[0], in[1],
             n->cname);
        return;
    }
    emit(e, "rt_gemm_forward(%s, %s, %s, %s, %s);", out[0], in[0], in[1],
         n->nin == 3 ? in[2] : "NULL", gemm_args(e, n));
}

/* "_set" when the call writes a gradient (the runtime's twin), else "". */
const char *set_suffix(const Emit *e)
{
    return e->writes ? "_set" : "";
}

/* The _set twin's last argument, ", 0x1u", or "" for the plain call. */
const char *set_arg(Emit *e)
{
    return e->writes ? ctx_printf(e->ctx, ", 0x%xu", e->writes) : "";
}

const char *or_null(const char *const *v, int i, int n)
{
    return i < n && v[i] ? v[i] : "NULL";
}

static void emit_gemm_bwd(Emit *e, const Node *n, const char *const *din,
                          const char *const *dout, const char *const *in,
                          const char *const *out)
{
    (void)out;
    if (is_bmm(e->g, n)) {
        emit_unwritten(e, n, din, 0);
        emit(e, "rt_bmm_backward(%s, %s, %s, %s, %s, &bmm_%s);",
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0],
             or_null(in, 0, 2), or_null(in, 1, 2), n->cname);
        return;
    }
    emit(e, "rt_gemm_backward%s(%s, %s, %s, %s, %s, %s, %s%s);",
         set_suffix(e), or_null(din, 0, n->nin),
         or_null(din, 1, n->nin), or_null(din, 2, n->nin), dout[0],
         or_null(in, 0, n->nin), or_null(in, 1, n->nin), gemm_args(e, n),
         set_arg(e));
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

double flops_out(const Graph *g, const Node *n)
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
    if (n->op == OP_ADD && e->writes)
        emit(e, "rt_add_backward_set(%s, %s, %s, &map_%s%s);",
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0], n->cname,
             set_arg(e));
    else if (n->op == OP_ADD || n->op == OP_SUB)
        emit(e, "rt_%s_backward(%s, %s, %s, &map_%s);", op_table[n->op].kernel,
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0], n->cname);
    else
        emit(e, "rt_%s_backward(%s, %s, %s, %s, %s, &map_%s);", op_table[n->op].kernel,
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0],
             or_null(in, 0, 2), or_null(in, 1, 2), n->cname);
}

/* ---- unary pointwise --------------------------------------------------------- */

int shape_same(Ctx *c, Graph *g, Node *n)
{
    (void)c;
    set_shape(OUT(0), IN(0)->rank, IN(0)->dims);
    return 0;
}

double flops_relu(const Graph *g, const Node *n) { return (double)OUT(0)->numel; }
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

/* The backward reads what the row's needs mask says: the input (Gelu, Log),
 * the output (Relu, Tanh, Sigmoid, Exp, Sqrt) or nothing (Neg). */
static void emit_unary_bwd(Emit *e, const Node *n, const char *const *din,
                           const char *const *dout, const char *const *in,
                           const char *const *out)
{
    const Graph *g = e->g;
    unsigned needs = op_table[n->op].needs[0];
    const char *read = needs & NEED_IN(0) ? ctx_printf(e->ctx, "%s, ", in[0])
                       : needs & NEED_OUT(0) ? ctx_printf(e->ctx, "%s, ", out[0])
                                             : "";
    /* the rows that write (Relu, Gelu) have a _set twin */
    const char *set = set_suffix(e);
    if (n->op == OP_GELU)
        emit(e, "rt_gelu_backward%s(%s, %s, %s%ld, %d%s);", set, din[0],
             dout[0], read, OUT(0)->numel, gelu_tanh(n), set_arg(e));
    else
        emit(e, "rt_%s_backward%s(%s, %s, %s%ld%s);", op_table[n->op].kernel,
             set, din[0], dout[0], read, OUT(0)->numel, set_arg(e));
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

double flops_in(const Graph *g, const Node *n)
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

/* ---- softmax and layer normalization ---------------------------------------------- */

/* ONNX's axis in [-rank, rank - 1] (Flatten: [-rank, rank]), made
 * non-negative; -1 with ctx error when out of range. */
int node_axis(Ctx *c, const Graph *g, const Node *n, int rank, int hi)
{
    long a = node_int(n, "axis");
    if (a < -rank || a > hi)
        return node_error(c, g, n, ctx_printf(c, "%s axis %ld is out of range "
            "for input '%s' of rank %d; axis must be in [%d, %d]",
            op_table[n->op].name, a, IN(0)->name, rank, -rank, hi));
    return (int)(a < 0 ? a + rank : a);
}

/* Softmax and LogSoftmax: one axis normalized, the kernel family's
 * rt_<kernel>_forward/backward over (outer, dim, inner) lanes. */
static int shape_softmax(Ctx *c, Graph *g, Node *n)
{
    if (IN(0)->rank == 0)
        return node_error(c, g, n, ctx_printf(c, "%s input '%s' is a "
            "scalar; it needs at least one dimension", op_table[n->op].name,
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

static void emit_softmax_fwd(Emit *e, const Node *n, const char *const *out,
                             const char *const *in)
{
    emit(e, "rt_%s_forward(%s, %s, %s);", op_table[n->op].kernel, out[0],
         in[0], softmax_sizes(e, n));
}

static void emit_softmax_bwd(Emit *e, const Node *n, const char *const *din,
                             const char *const *dout, const char *const *in,
                             const char *const *out)
{
    (void)in;
    emit(e, "rt_%s_backward(%s, %s, %s, %s);", op_table[n->op].kernel, din[0],
         dout[0], out[0], softmax_sizes(e, n));
}

static double flops_softmax(const Graph *g, const Node *n)
{
    /* max, exp, sum, divide (LogSoftmax: log, subtract) */
    return 5.0 * OUT(0)->numel;
}

/* Scale and bias hold exactly the normalized dimensions (x's from axis). */
static int shape_layer_norm(Ctx *c, Graph *g, Node *n)
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

static void emit_layer_norm_fwd(Emit *e, const Node *n, const char *const *out,
                                const char *const *in)
{
    emit(e, "rt_layernorm_forward(%s, %s, %s, %s, %s);", out[0], in[0], in[1],
         n->nin == 3 ? in[2] : "NULL", layer_norm_sizes(e, n));
}

static void emit_layer_norm_bwd(Emit *e, const Node *n, const char *const *din,
                                const char *const *dout, const char *const *in,
                                const char *const *out)
{
    (void)out;
    emit(e, "rt_layernorm_backward(%s, %s, %s, %s, %s, %s, %s);",
         or_null(din, 0, n->nin), or_null(din, 1, n->nin),
         or_null(din, 2, n->nin), dout[0], or_null(in, 0, n->nin),
         or_null(in, 1, n->nin), layer_norm_sizes(e, n));
}

static double flops_layer_norm(const Graph *g, const Node *n)
{
    return 8.0 * OUT(0)->numel;
}

/* ---- shape ops: Transpose, Reshape, Flatten ---------------------------------------- */

static int shape_transpose(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *perm = node_attr(n, "perm");
    long p[MAX_RANK], dims[MAX_RANK];
    int seen[MAX_RANK] = {0};
    if (perm->set && perm->nints != x->rank)
        return node_error(c, g, n, ctx_printf(c, "Transpose perm has %d "
            "entries but input '%s' has rank %d; perm lists every dimension "
            "once", perm->nints, x->name, x->rank));
    for (int d = 0; d < x->rank; d++) {
        p[d] = perm->set ? perm->ints[d] : x->rank - 1 - d;
        if (p[d] < 0 || p[d] >= x->rank || seen[p[d]]++)
            return node_error(c, g, n, ctx_printf(c, "Transpose perm is not a "
                "permutation of 0..%d; perm lists every dimension once",
                x->rank - 1));
        dims[d] = x->dims[p[d]];
    }
    set_shape(OUT(0), x->rank, dims);
    return 0;
}

static void transpose_perm(const Node *n, int rank, long *p)
{
    const Attr *perm = node_attr(n, "perm");
    for (int d = 0; d < rank; d++)
        p[d] = perm->set ? perm->ints[d] : rank - 1 - d;
}

static void emit_transpose_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    long p[MAX_RANK];
    transpose_perm(n, IN(0)->rank, p);
    emit_int_array(e, ctx_printf(e->ctx, "dims_%s", n->cname), IN(0)->dims,
                   IN(0)->rank);
    emit_int_array(e, ctx_printf(e->ctx, "perm_%s", n->cname), p, IN(0)->rank);
}

static void emit_transpose_fwd(Emit *e, const Node *n, const char *const *out,
                               const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_transpose_forward(%s, %s, %d, dims_%s, perm_%s);", out[0],
         in[0], IN(0)->rank, n->cname, n->cname);
}

static void emit_transpose_bwd(Emit *e, const Node *n, const char *const *din,
                               const char *const *dout, const char *const *in,
                               const char *const *out)
{
    const Graph *g = e->g;
    (void)in;
    (void)out;
    emit(e, "rt_transpose_backward%s(%s, %s, %d, dims_%s, perm_%s%s);",
         set_suffix(e), din[0], dout[0], IN(0)->rank, n->cname,
         n->cname, set_arg(e));
}

/* ONNX Reshape with its shape as an attribute: 0 copies the input's
 * dimension at that place (allowzero=0), one -1 takes what is left. */
static int shape_reshape(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *want = node_attr(n, "shape");
    long dims[MAX_RANK], known = 1;
    int infer = -1;
    if (!want->set)
        return node_error(c, g, n, "Reshape needs shape=\"D0 D1 ...\" (ONNX's "
                          "shape input, given as an attribute)");
    if (want->nints > MAX_RANK)
        return node_error(c, g, n, ctx_printf(c, "Reshape shape has %d "
            "dimensions; at most %d are supported", want->nints, MAX_RANK));
    for (int d = 0; d < want->nints; d++) {
        long v = want->ints[d];
        if (v == 0 && d >= x->rank)
            return node_error(c, g, n, ctx_printf(c, "Reshape shape entry %d "
                "is 0 (copy the input's dimension) but input '%s' has rank %d",
                d, x->name, x->rank));
        dims[d] = v == 0 ? x->dims[d] : v;
        if (v == -1 && infer >= 0)
            return node_error(c, g, n, "Reshape shape has more than one -1; "
                              "at most one dimension is inferred");
        if (v < -1)
            return node_error(c, g, n, ctx_printf(c, "Reshape shape entry %d "
                "is %ld; entries are positive, 0 (copy) or -1 (infer)", d, v));
        if (v == -1)
            infer = d;
        else
            known *= dims[d];
    }
    if (infer >= 0 && known > 0 && x->numel % known == 0)
        dims[infer] = x->numel / known;
    else if (infer >= 0)
        known = -1;
    if (known != -1 && (infer >= 0 || known == x->numel)) {
        set_shape(OUT(0), want->nints, dims);
        return 0;
    }
    Buf b;
    buf_init(&b, c);
    for (int d = 0; d < want->nints; d++)
        buf_printf(&b, "%s%ld", d ? " " : "", want->ints[d]);
    return node_error(c, g, n, ctx_printf(c, "Reshape cannot make input '%s' "
        "(%s, %ld elements) into shape \"%s\"; the element count must stay "
        "the same", x->name, shape_str(c, x), x->numel, b.len ? b.data : ""));
}

static int shape_flatten(Ctx *c, Graph *g, Node *n)
{
    int a = node_axis(c, g, n, IN(0)->rank, IN(0)->rank);
    if (a < 0)
        return -1;
    long dims[2] = {dims_product(IN(0), 0, a),
                    dims_product(IN(0), a, IN(0)->rank)};
    set_shape(OUT(0), 2, dims);
    return 0;
}

/* Reshape and Flatten move no data: their rows are alias rows, so the
 * output is a pointer to the input's floats and no forward call is written
 * (emit.c). Where the gradient cannot share storage with the input's
 * (schedule.c says when), the backward adds it back unchanged. */
void emit_copy_bwd(Emit *e, const Node *n, const char *const *din,
                          const char *const *dout, const char *const *in,
                          const char *const *out)
{
    const Graph *g = e->g;
    (void)in;
    (void)out;
    emit(e, "rt_accumulate(%s, %s, %ld);", din[0], dout[0], OUT(0)->numel);
}

double flops_none(const Graph *g, const Node *n)
{
    (void)g;
    (void)n;
    return 0;
}

/* ---- Gather, SoftmaxCrossEntropyLoss, Dropout ---------------------------------------- */

/* ONNX Gather on axis 0: y = table[idx] row by row, y's shape idx's shape
 * followed by table's without its first dimension. */
static int shape_gather(Ctx *c, Graph *g, Node *n)
{
    const Tensor *t = IN(0), *idx = IN(1);
    long axis = node_int(n, "axis");
    if (t->rank == 0)
        return node_error(c, g, n, ctx_printf(c, "Gather input 0 '%s' is a "
            "scalar; it needs a first dimension to index", t->name));
    if (axis != 0 && axis != -t->rank)
        return node_error(c, g, n, ctx_printf(c, "Gather axis %ld is not "
            "supported; this version gathers rows, axis 0", axis));
    if (idx->rank + t->rank - 1 > MAX_RANK)
        return node_error(c, g, n, ctx_printf(c, "Gather output would have "
            "rank %d; at most %d is supported", idx->rank + t->rank - 1,
            MAX_RANK));
    long dims[MAX_RANK];
    memcpy(dims, idx->dims, (size_t)idx->rank * sizeof dims[0]);
    memcpy(dims + idx->rank, t->dims + 1, (size_t)(t->rank - 1) * sizeof dims[0]);
    set_shape(OUT(0), idx->rank + t->rank - 1, dims);
    return 0;
}

/* "n, rows, width": indices, the table's rows, floats per row */
static const char *gather_sizes(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    return ctx_printf(e->ctx, "%ld, %ld, %ld", IN(1)->numel, IN(0)->dims[0],
                      dims_product(IN(0), 1, IN(0)->rank));
}

static void emit_gather_fwd(Emit *e, const Node *n, const char *const *out,
                            const char *const *in)
{
    emit(e, "rt_gather_forward(%s, %s, %s, %s);", out[0], in[0], in[1],
         gather_sizes(e, n));
}

static void emit_gather_bwd(Emit *e, const Node *n, const char *const *din,
                            const char *const *dout, const char *const *in,
                            const char *const *out)
{
    (void)out;
    emit(e, "rt_gather_backward(%s, %s, %s, %s);", din[0], dout[0], in[1],
         gather_sizes(e, n));
}

/* ONNX accepts -rows..rows-1 (negative counts from the end). */
static void range_gather(const Graph *g, const Node *n, long *lo, long *hi)
{
    *lo = -IN(0)->dims[0];
    *hi = IN(0)->dims[0];
}

/* Scores (N, C, D1, ...) and labels (N, D1, ...): the class dimension is 1. */
static int shape_sce(Ctx *c, Graph *g, Node *n)
{
    const Tensor *s = IN(0), *l = IN(1);
    if (s->rank < 2)
        return node_error(c, g, n, ctx_printf(c, "SoftmaxCrossEntropyLoss "
            "input 0 '%s' has shape %s; scores must be (N, C) or (N, C, D1, "
            "...)", s->name, shape_str(c, s)));
    int same = l->rank == s->rank - 1 && l->dims[0] == s->dims[0];
    for (int d = 1; same && d < l->rank; d++)
        same = l->dims[d] == s->dims[d + 1];
    if (!same) {
        Tensor want = *s;
        want.rank = s->rank - 1;
        memmove(want.dims + 1, s->dims + 2, (size_t)(s->rank - 2) * sizeof s->dims[0]);
        return node_error(c, g, n, ctx_printf(c, "SoftmaxCrossEntropyLoss "
            "input 1 '%s' has shape %s but the labels of scores %s must have "
            "shape %s (the scores' without the class dimension 1)", l->name,
            shape_str(c, l), shape_str(c, s), shape_str(c, &want)));
    }
    if (n->nin == 3 && (IN(2)->rank != 1 || IN(2)->dims[0] != s->dims[1]))
        return node_error(c, g, n, ctx_printf(c, "SoftmaxCrossEntropyLoss "
            "input 2 '%s' has shape %s but the class weights of scores %s "
            "must have shape %ld (one weight per class, dimension 1)",
            IN(2)->name, shape_str(c, IN(2)), shape_str(c, s), s->dims[1]));
    const Attr *ig = node_attr(n, "ignore_index");
    if (ig->set && (ig->i < -(1L << 31) || ig->i >= (1L << 31)))
        return node_error(c, g, n, ctx_printf(c, "SoftmaxCrossEntropyLoss "
            "ignore_index %ld is out of range; it must fit in 32 bits "
            "(ONNX's usual value is -100)", ig->i));
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

static void emit_sce_fwd(Emit *e, const Node *n, const char *const *out,
                         const char *const *in)
{
    emit(e, "rt_sce_forward(%s, %s, %s, %s);", out[0], in[0], in[1],
         sce_args(e, n, n->nin == 3 ? in[2] : NULL));
}

/* The weights get no gradient (the row's no_grad): din[2] is always NULL. */
static void emit_sce_bwd(Emit *e, const Node *n, const char *const *din,
                         const char *const *dout, const char *const *in,
                         const char *const *out)
{
    (void)out;
    emit(e, "rt_sce_backward(%s, %s, %s, %s, %s);", din[0], dout[0], in[0],
         in[1], sce_args(e, n, n->nin == 3 ? in[2] : NULL));
}

static double flops_sce(const Graph *g, const Node *n)
{
    return 4.0 * IN(0)->numel;      /* max, exp, sum, and the pick */
}

/* Classes 0..C-1, and ignore_index wherever it lies. */
static void range_sce(const Graph *g, const Node *n, long *lo, long *hi)
{
    const Attr *ig = node_attr(n, "ignore_index");
    *lo = 0;
    *hi = IN(0)->dims[1];
    if (ig->set && ig->i < *lo)
        *lo = ig->i;
    if (ig->set && ig->i >= *hi)
        *hi = ig->i + 1;
}

static int shape_dropout(Ctx *c, Graph *g, Node *n)
{
    float r = node_float(n, "ratio");
    if (!(r >= 0.0f && r < 1.0f))
        return node_error(c, g, n, ctx_printf(c, "Dropout ratio %g is out of "
            "range; it must be at least 0 and below 1", (double)r));
    return shape_same(c, g, n);
}

/* "n, ratio, seed, step, node": the mask is a function of these alone, so
 * a recompute draws the forward's mask again. The node's key is its index
 * in the file (< 2^24, RT_DROPOUT_STREAM's limit). */
static const char *dropout_args(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    long key = (long)(n - g->nodes);
    assert(key < (1L << 24));
    return ctx_printf(e->ctx, "%ld, %s, seed, step, %ld", OUT(0)->numel,
                      fmt_float(e->ctx, node_float(n, "ratio")), key);
}

/* train_step drops; forward is inference, where Dropout is the identity. */
static void emit_dropout_fwd(Emit *e, const Node *n, const char *const *out,
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

static void emit_dropout_bwd(Emit *e, const Node *n, const char *const *din,
                             const char *const *dout, const char *const *in,
                             const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_dropout_backward%s(%s, %s, %s%s);", set_suffix(e),
         din[0], dout[0], dropout_args(e, n), set_arg(e));
}

static double flops_dropout(const Graph *g, const Node *n)
{
    return 4.0 * OUT(0)->numel;     /* a counter hash, compare, multiply */
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
static const AttrSpec softmax_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = -1},
    {0},
};
static const AttrSpec layer_norm_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = -1},
    {.name = "epsilon", .type = ATTR_FLOAT, .f = 1e-5f},
    {0},
};
static const AttrSpec transpose_attrs[] = {
    {.name = "perm", .type = ATTR_INTS},
    {0},
};
static const AttrSpec reshape_attrs[] = {
    {.name = "shape", .type = ATTR_INTS},
    {0},
};
static const char *const auto_pads[] = {"NOTSET", "VALID", "SAME_UPPER",
                                        "SAME_LOWER", NULL};
static const AttrSpec conv_attrs[] = {
    {.name = "kernel_shape", .type = ATTR_INTS},
    {.name = "strides", .type = ATTR_INTS},
    {.name = "pads", .type = ATTR_INTS},
    {.name = "dilations", .type = ATTR_INTS},
    {.name = "group", .type = ATTR_INT, .i = 1},
    {.name = "auto_pad", .type = ATTR_STRING, .s = "NOTSET",
     .choices = auto_pads},
    {0},
};
static const AttrSpec max_pool_attrs[] = {
    {.name = "kernel_shape", .type = ATTR_INTS},
    {.name = "strides", .type = ATTR_INTS},
    {.name = "pads", .type = ATTR_INTS},
    {.name = "dilations", .type = ATTR_INTS},
    {.name = "auto_pad", .type = ATTR_STRING, .s = "NOTSET",
     .choices = auto_pads},
    {.name = "ceil_mode", .type = ATTR_INT, .i = 0},
    {0},
};
static const AttrSpec average_pool_attrs[] = {
    {.name = "kernel_shape", .type = ATTR_INTS},
    {.name = "strides", .type = ATTR_INTS},
    {.name = "pads", .type = ATTR_INTS},
    {.name = "dilations", .type = ATTR_INTS},
    {.name = "count_include_pad", .type = ATTR_INT, .i = 0},
    {.name = "auto_pad", .type = ATTR_STRING, .s = "NOTSET",
     .choices = auto_pads},
    {.name = "ceil_mode", .type = ATTR_INT, .i = 0},
    {0},
};
static const AttrSpec attention_attrs[] = {
    {.name = "is_causal", .type = ATTR_INT, .i = 0},
    {.name = "scale", .type = ATTR_FLOAT},
    {0},
};
static const AttrSpec flatten_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = 1},
    {0},
};
static const AttrSpec gather_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = 0},
    {0},
};
static const char *const sce_reductions[] = {"mean", "sum", "none", NULL};
static const AttrSpec sce_attrs[] = {
    {.name = "reduction", .type = ATTR_STRING, .s = "mean",
     .choices = sce_reductions},
    {.name = "ignore_index", .type = ATTR_INT},
    {0},
};
static const AttrSpec dropout_attrs[] = {
    {.name = "ratio", .type = ATTR_FLOAT, .f = 0.5f},
    {0},
};
static const AttrSpec axes_attrs[] = {
    {.name = "axes", .type = ATTR_INTS},
    {0},
};
static const AttrSpec concat_attrs[] = {
    {.name = "axis", .type = ATTR_INT},     /* required: shape_concat */
    {0},
};
static const AttrSpec split_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = 0},
    {.name = "split", .type = ATTR_INTS},
    {0},
};
static const AttrSpec slice_attrs[] = {
    {.name = "starts", .type = ATTR_INTS},
    {.name = "ends", .type = ATTR_INTS},
    {.name = "axes", .type = ATTR_INTS},
    {.name = "steps", .type = ATTR_INTS},
    {0},
};

#define BINARY(NAME, KERNEL, NEED0, NEED1)                                      \
    {NAME, KERNEL, 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary, flops_out, {NEED0, NEED1},  \
     emit_binary_fwd, emit_binary_bwd, emit_binary_static}
#define UNARY(NAME, KERNEL, FLOPS, NEED)                                         \
    {NAME, KERNEL, 1, 1, 1, CAT_POINTWISE, no_attrs, shape_same, FLOPS, {NEED},       \
     emit_unary_fwd, emit_unary_bwd, NULL}

const OpInfo op_table[] = {
    [OP_GEMM] = {"Gemm", "gemm", 2, 3, 1, CAT_MATMUL, gemm_attrs, shape_gemm,
                 flops_gemm, {NEED_IN(1), NEED_IN(0), 0}, emit_gemm_fwd,
                 emit_gemm_bwd, NULL, .bwd_writes = 7},
    [OP_MATMUL] = {"MatMul", "gemm", 2, 2, 1, CAT_MATMUL, no_attrs, shape_gemm,
                   flops_gemm, {NEED_IN(1), NEED_IN(0)}, emit_gemm_fwd,
                   emit_gemm_bwd, emit_matmul_static, .bwd_writes = 3},
    [OP_ADD] = {"Add", "add", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary,
                flops_out, {0, 0}, emit_binary_fwd, emit_binary_bwd,
                emit_binary_static, .bwd_writes = 3, .bwd_in_place = 3},
    [OP_SUB] = BINARY("Sub", "sub", 0, 0),
    [OP_MUL] = BINARY("Mul", "mul", NEED_IN(1), NEED_IN(0)),
    [OP_DIV] = BINARY("Div", "div", NEED_IN(1),
                      NEED_IN(0) | NEED_IN(1)),
    [OP_RELU] = {"Relu", "relu", 1, 1, 1, CAT_POINTWISE, no_attrs, shape_same,
                 flops_relu, {NEED_OUT(0)}, emit_unary_fwd, emit_unary_bwd,
                 NULL, .bwd_writes = 1, .bwd_in_place = 1, .fwd_in_place = 1},
    [OP_GELU] = {"Gelu", "gelu", 1, 1, 1, CAT_POINTWISE, gelu_attrs, shape_same,
                 flops_gelu, {NEED_IN(0)}, emit_unary_fwd, emit_unary_bwd,
                 NULL, .bwd_writes = 1, .bwd_in_place = 1, .fwd_in_place = 1},
    [OP_TANH] = UNARY("Tanh", "tanh", flops_tanh, NEED_OUT(0)),
    [OP_SIGMOID] = UNARY("Sigmoid", "sigmoid", flops_tanh, NEED_OUT(0)),
    [OP_REDUCE_MEAN] = {"ReduceMean", "reduce", 1, 1, 1, CAT_REDUCTION, reduce_attrs,
                        shape_reduce, flops_in, {0}, emit_reduce_fwd,
                        emit_reduce_bwd, emit_reduce_static},
    [OP_REDUCE_SUM] = {"ReduceSum", "reduce", 1, 1, 1, CAT_REDUCTION, reduce_attrs,
                       shape_reduce, flops_in, {0}, emit_reduce_fwd,
                       emit_reduce_bwd, emit_reduce_static},
    [OP_EXP] = UNARY("Exp", "exp", flops_tanh, NEED_OUT(0)),
    [OP_LOG] = UNARY("Log", "log", flops_tanh, NEED_IN(0)),
    [OP_SQRT] = UNARY("Sqrt", "sqrt", flops_tanh, NEED_OUT(0)),
    [OP_NEG] = UNARY("Neg", "neg", flops_relu, 0),
    [OP_SOFTMAX] = {"Softmax", "softmax", 1, 1, 1, CAT_REDUCTION, softmax_attrs,
                    shape_softmax, flops_softmax, {NEED_OUT(0)},
                    emit_softmax_fwd, emit_softmax_bwd, NULL},
    /* the backward recomputes mean and 1/std from X: nothing else is kept */
    [OP_LAYER_NORM] = {"LayerNormalization", "layernorm", 2, 3, 1,
                       CAT_NORMALIZATION, layer_norm_attrs, shape_layer_norm,
                       flops_layer_norm,
                       {NEED_IN(0) | NEED_IN(1), NEED_IN(0), 0},
                       emit_layer_norm_fwd, emit_layer_norm_bwd, NULL},
    [OP_TRANSPOSE] = {"Transpose", "transpose", 1, 1, 1, CAT_SHAPE,
                      transpose_attrs, shape_transpose, flops_none, {0},
                      emit_transpose_fwd, emit_transpose_bwd,
                      emit_transpose_static, .bwd_writes = 1},
    /* views: no forward call, the output is the input's floats */
    [OP_RESHAPE] = {"Reshape", "copy", 1, 1, 1, CAT_SHAPE, reshape_attrs,
                    shape_reshape, flops_none, {0}, NULL, emit_copy_bwd,
                    NULL, NULL, 0, NULL, 1},
    [OP_FLATTEN] = {"Flatten", "copy", 1, 1, 1, CAT_SHAPE, flatten_attrs,
                    shape_flatten, flops_none, {0}, NULL, emit_copy_bwd,
                    NULL, NULL, 0, NULL, 1},
    /* im2col columns in scratch, forward and backward alike */
    [OP_CONV] = {"Conv", "conv", 2, 3, 1, CAT_CONV, conv_attrs, shape_window,
                 flops_conv, {NEED_IN(1), NEED_IN(0), 0}, emit_conv_fwd,
                 emit_conv_bwd, emit_window_static, scratch_conv},
    /* the backward re-finds each window's maximum in X: no indices kept */
    [OP_MAX_POOL] = {"MaxPool", "maxpool", 1, 1, 1, CAT_CONV, max_pool_attrs,
                     shape_window, flops_pool, {NEED_IN(0)}, emit_pool_fwd,
                     emit_pool_bwd, emit_window_static, NULL, .bwd_writes = 1},
    [OP_AVERAGE_POOL] = {"AveragePool", "avgpool", 1, 1, 1, CAT_CONV,
                         average_pool_attrs, shape_window, flops_pool, {0},
                         emit_pool_fwd, emit_pool_bwd, emit_window_static,
                         NULL},
    [OP_GLOBAL_AVERAGE_POOL] = {"GlobalAveragePool", "global_avgpool", 1, 1, 1,
                                CAT_CONV, no_attrs, shape_global_pool,
                                flops_in, {0}, emit_global_pool_fwd,
                                emit_global_pool_bwd, NULL, NULL},
    /* train_step: batch statistics, and inputs 3 and 4 (the running mean
     * and variance) updated in place, PyTorch's way (unbiased variance;
     * ops_norm.c); forward: the running statistics. The backward recomputes
     * the batch statistics from X: it reads X and scale alone. */
    [OP_BATCH_NORM] = {"BatchNormalization", "batchnorm", 5, 5, 1,
                       CAT_NORMALIZATION, batch_norm_attrs, shape_batch_norm,
                       flops_batch_norm,
                       {NEED_IN(0) | NEED_IN(1), NEED_IN(0), 0, 0, 0},
                       emit_batch_norm_fwd, emit_batch_norm_bwd, NULL, NULL,
                       0, NULL, 0, 0, NEED_IN(3) | NEED_IN(4)},
    /* The backward reads Q, K and V only and rebuilds the probabilities
     * block by block in scratch: neither the probability matrix nor softmax
     * statistics are kept between forward and backward. */
    [OP_ATTENTION] = {"Attention", "attention", 3, 3, 1, CAT_ATTENTION,
                      attention_attrs, shape_attention, flops_attention,
                      {NEED_IN(0) | NEED_IN(1) | NEED_IN(2),
                       NEED_IN(0) | NEED_IN(1) | NEED_IN(2),
                       NEED_IN(0) | NEED_IN(1) | NEED_IN(2)},
                      emit_attention_fwd, emit_attention_bwd, NULL,
                      scratch_attention},
    /* the backward scatter-adds into the table: it reads the indices only */
    [OP_GATHER] = {"Gather", "gather", 2, 2, 1, CAT_SHAPE, gather_attrs,
                   shape_gather, flops_out, {NEED_IN(1), 0}, emit_gather_fwd,
                   emit_gather_bwd, NULL, NULL, 1u << 1, range_gather},
    /* the backward recomputes the softmax from the scores: no probabilities
     * are kept. The optional class weights (input 2) get no gradient: its
     * needs mask is 0, no_grad keeps autodiff from asking for one (even of
     * a trainable parameter), and the backward passes none */
    [OP_SOFTMAX_CROSS_ENTROPY] = {"SoftmaxCrossEntropyLoss", "sce", 2, 3, 1,
                                  CAT_LOSS, sce_attrs, shape_sce, flops_sce,
                                  {NEED_IN(0) | NEED_IN(1) | NEED_IN(2), 0, 0},
                                  emit_sce_fwd, emit_sce_bwd, NULL, NULL,
                                  1u << 1, range_sce, .no_grad = 1u << 2},
    /* the mask is drawn again from (seed, step, node), never stored: the
     * backward reads nothing */
    [OP_DROPOUT] = {"Dropout", "dropout", 1, 1, 1, CAT_RANDOM, dropout_attrs,
                    shape_dropout, flops_dropout, {0}, emit_dropout_fwd,
                    emit_dropout_bwd, NULL, NULL, 0, NULL, .bwd_writes = 1,
                    .bwd_in_place = 1, .fwd_in_place = 1},
    /* erf'(x) = 2/sqrt(pi) exp(-x^2) reads the input */
    [OP_ERF] = UNARY("Erf", "erf", flops_erf, NEED_IN(0)),
    /* d(1/x) = -y^2 reads the output */
    [OP_RECIPROCAL] = UNARY("Reciprocal", "reciprocal", flops_relu,
                            NEED_OUT(0)),
    /* both gradients from X and Y (Y X^(Y-1), X^Y ln X): never the output */
    [OP_POW] = {"Pow", "pow", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary,
                flops_pow, {NEED_IN(0) | NEED_IN(1), NEED_IN(0) | NEED_IN(1)},
                emit_binary_fwd, emit_binary_bwd, emit_binary_static},
    /* the condition (float, true where nonzero) selects and is not
     * differentiated: no_grad, so a condition computed from a parameter
     * neither gets a zero gradient nor runs its producers' backwards; X's
     * and Y's gradients read the condition only */
    [OP_WHERE] = {"Where", "where", 3, 3, 1, CAT_POINTWISE, no_attrs,
                  shape_where, flops_out, {0, NEED_IN(0), NEED_IN(0)},
                  emit_where_fwd, emit_where_bwd, emit_where_static,
                  .no_grad = 1u << 0},
    [OP_LOG_SOFTMAX] = {"LogSoftmax", "log_softmax", 1, 1, 1, CAT_REDUCTION,
                        softmax_attrs, shape_softmax, flops_softmax,
                        {NEED_OUT(0)}, emit_softmax_fwd, emit_softmax_bwd,
                        NULL},
    /* `shape` as Reshape's; the backward sums dY back and reads nothing */
    [OP_EXPAND] = {"Expand", "expand", 1, 1, 1, CAT_SHAPE, reshape_attrs,
                   shape_expand, flops_none, {0}, emit_expand_fwd,
                   emit_expand_bwd, emit_expand_static},
    /* structural ops (ops_structural.c): Identity, Unsqueeze and Squeeze
     * are views, like Reshape, and pass int64 on; Concat, Split and Slice
     * move floats, and their backwards read only shapes */
    [OP_IDENTITY] = {"Identity", "copy", 1, 1, 1, CAT_SHAPE, no_attrs,
                     shape_same, flops_none, {0}, NULL, emit_copy_bwd, NULL,
                     NULL, 0, NULL, 1},
    [OP_UNSQUEEZE] = {"Unsqueeze", "copy", 1, 1, 1, CAT_SHAPE, axes_attrs,
                      shape_unsqueeze, flops_none, {0}, NULL, emit_copy_bwd,
                      NULL, NULL, 0, NULL, 1},
    [OP_SQUEEZE] = {"Squeeze", "copy", 1, 1, 1, CAT_SHAPE, axes_attrs,
                    shape_squeeze, flops_none, {0}, NULL, emit_copy_bwd, NULL,
                    NULL, 0, NULL, 1},
    [OP_CONCAT] = {"Concat", "concat", 1, MAX_IO, 1, CAT_SHAPE, concat_attrs,
                   shape_concat, flops_none, {0}, emit_concat_fwd,
                   emit_concat_bwd, NULL, NULL, 0, NULL, 0},
    [OP_SPLIT] = {"Split", "split", 1, 1, MAX_IO, CAT_SHAPE, split_attrs,
                  shape_split, flops_none, {0}, emit_split_fwd, emit_split_bwd,
                  NULL, NULL, 0, NULL, 0, 1},
    [OP_SLICE] = {"Slice", "slice", 1, 1, 1, CAT_SHAPE, slice_attrs,
                  shape_slice, flops_none, {0}, emit_slice_fwd, emit_slice_bwd,
                  emit_slice_static, NULL, 0, NULL, 0},
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
