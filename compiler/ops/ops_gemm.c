/*
 * ops_gemm.c: Gemm and MatMul, the rows whose work is a GEMM (runtime
 * gemm.c: rt_gemm_* through rt_sgemm, and rt_bmm_* for a MatMul of two
 * N-D inputs, batch dimensions broadcast as numpy does). A MatMul of an
 * N-D input by a matrix folds its batch dimensions into the GEMM's M; one
 * with a third input (remat's own, middle/fuse.c) adds that vector to
 * every row, as a Gemm's C with beta 1.
 */
#include "ops.h"

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

/* A MatMul's bias: B's columns, one vector added to every row. */
static int shape_matmul_bias(Ctx *c, Graph *g, Node *n)
{
    const Tensor *b = IN(1), *bias = IN(2);
    if (b->rank != 2 || bias->rank != 1 || bias->dims[0] != b->dims[1])
        return node_error(c, g, n, ctx_printf(c, "MatMul's bias '%s' has "
            "shape %s; a bias (the third input) is one vector of input 1's "
            "columns, and input 1 '%s' (%s) must be a matrix", bias->name,
            shape_str(c, bias), b->name, shape_str(c, b)));
    return 0;
}

int shape_gemm(Ctx *c, Graph *g, Node *n)
{
    const char *op = n->row->name;
    if (n->op == OP_MATMUL && n->nin == 3 && shape_matmul_bias(c, g, n))
        return -1;
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
                "%s input 2 '%s' has shape %s, which does not broadcast to "
                "the output's %ldx%ld; C may be %ld, 1x%ld, %ldx1, %ldx%ld or "
                "a scalar", op, IN(2)->name, shape_str(c, IN(2)), m, nn, nn,
                nn, m, m, nn));
    }
    long dims[2] = {m, nn};
    set_shape(OUT(0), 2, dims);
    return 0;
}

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

void emit_matmul_static(Emit *e, const Node *n)
{
    if (is_bmm(e->g, n))
        emit_bmm_static(e, n);
}

double flops_gemm(const Graph *g, const Node *n)
{
    if (is_bmm(g, n))
        return 2.0 * OUT(0)->numel * IN(0)->dims[IN(0)->rank - 1];
    long m, nn, k;
    gemm_mnk(g, n, &m, &nn, &k);
    return 2.0 * m * nn * k + (n->nin == 3 ? (double)m * nn : 0);
}

/* The sizes and attributes both GEMM kernels take after their pointers:
 * "m, n, k, trans_a, trans_b, alpha, beta, c_rows, c_cols". MatMul is a
 * Gemm with alpha 1, and no C or its bias as C with beta 1. */
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
        fmt_float(e->ctx, n->nin < 3 ? 0.0f
                          : gemm ? node_float(n, "beta") : 1.0f),
        rows, cols);
}

void emit_gemm_fwd(Emit *e, const Node *n, const char *const *out,
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

void emit_gemm_bwd(Emit *e, const Node *n, const char *const *din,
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
