/*
 * ops_binary.c: the broadcasting ops: Add, Sub, Mul, Div, Pow, Max, Min
 * and PRelu (one rt_bcast map each, the runtime's binary.c), Where (three inputs through
 * its own stride table) and Expand (its input broadcast to a shape, the
 * backward summing the gradient back over the broadcast dimensions), and
 * Tile, which runs Expand's kernels over a map of its own: each repeated
 * dimension split in two, the repeat (stride 0) and the input's extent.
 *
 * Broadcasting is ONNX's multidirectional (numpy) rule: shapes align on
 * their last dimension, and each dimension is 1 or the largest extent there.
 */
#include "ops.h"

#include <math.h>
#include <string.h>

/* ONNX multidirectional (numpy) broadcasting. */
int shape_binary(Ctx *c, Graph *g, Node *n)
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
                "dimensions must be equal or 1", n->row->name,
                a->name, shape_str(c, a), b->name, shape_str(c, b), i, da,
                db));
        dims[i] = da > db ? da : db;
    }
    set_shape(OUT(0), rank, dims);
    return 0;
}

void emit_binary_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    emit_bcast(e, n, OUT(0), IN(0), IN(1));
}

/* Two int64 operands (Add, Sub, Mul: the row's int_ok) make an int64
 * output, computed by the runtime's integer.c */
void emit_binary_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_%s%s_forward(%s, %s, %s, %s);", n->row->kernel,
         OUT(0)->is_int ? "_i64" : "", out[0], in[0], in[1], map_ref(e, n));
}

void emit_binary_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out)
{
    (void)out;
    const char *map = map_ref(e, n);
    if (n->op == OP_ADD && (e->writes || e->pwrites))
        emit(e, "rt_add_backward_set(%s, %s, %s, %s%s);",
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0], map,
             set_arg(e));
    else if (n->op == OP_ADD || n->op == OP_SUB)
        emit(e, "rt_%s_backward(%s, %s, %s, %s);", n->row->kernel,
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0], map);
    else
        emit(e, "rt_%s_backward(%s, %s, %s, %s, %s, %s);", n->row->kernel,
             or_null(din, 0, 2), or_null(din, 1, 2), dout[0],
             or_null(in, 0, 2), or_null(in, 1, 2), map);
}

/* ONNX Mod (issue 25): fmod 0 takes the divisor's sign, defined for
 * integers only; fmod 1 the dividend's (C's fmod), for both. */
int shape_mod(Ctx *c, Graph *g, Node *n)
{
    if (!IN(0)->is_int && node_int(n, "fmod") == 0)
        return node_error(c, g, n, ctx_printf(c, "Mod of float32 tensors "
            "'%s' and '%s' needs fmod=\"1\" (the dividend's sign, C's fmod); "
            "ONNX defines fmod=\"0\" for integers only", IN(0)->name,
            IN(1)->name));
    return shape_binary(c, g, n);
}

void emit_mod_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in)
{
    const Graph *g = e->g;
    if (OUT(0)->is_int)
        emit(e, "rt_mod_i64_forward(%s, %s, %s, %ld, &map_%s);", out[0],
             in[0], in[1], node_int(n, "fmod"), n->cname);
    else
        emit(e, "rt_fmod_forward(%s, %s, %s, &map_%s);", out[0], in[0],
             in[1], n->cname);
}

void emit_mod_bwd(Emit *e, const Node *n, const char *const *din,
                  const char *const *dout, const char *const *in,
                  const char *const *out)
{
    (void)out;
    emit(e, "rt_fmod_backward(%s, %s, %s, %s, %s, &map_%s);",
         or_null(din, 0, 2), or_null(din, 1, 2), dout[0], or_null(in, 0, 2),
         or_null(in, 1, 2), n->cname);
}

/* PRelu broadcasts its slope to x (ONNX's unidirectional rule): the
 * output is x's shape. */
int shape_prelu(Ctx *c, Graph *g, Node *n)
{
    if (shape_binary(c, g, n))
        return -1;
    const Tensor *x = IN(0), *y = OUT(0);
    if (y->rank != x->rank || y->numel != x->numel)
        return node_error(c, g, n, ctx_printf(c, "PRelu slope '%s' (%s) does "
            "not broadcast to input '%s' (%s); the slope's shape must "
            "broadcast to the input's, as (C, 1, 1) for a 4-D input's "
            "channels", IN(1)->name, shape_str(c, IN(1)), x->name,
            shape_str(c, x)));
    return 0;
}

/* powf is a log and an exp: twice a transcendental. */
double flops_pow(const Graph *g, const Node *n)
{
    return 8.0 * OUT(0)->numel;
}

/* The multidirectional broadcast of `count` shapes into dims/rank; -1 with
 * *bad the first output dimension where two extents above 1 differ. */
static int broadcast_shapes(const Tensor *const *ts, int count, long *dims,
                            int *rank, int *bad)
{
    int r = 0;
    for (int k = 0; k < count; k++)
        r = ts[k]->rank > r ? ts[k]->rank : r;
    *rank = r;
    for (int d = 0; d < r; d++) {
        dims[d] = 1;
        for (int k = 0; k < count; k++) {
            int j = d - (r - ts[k]->rank);
            long v = j >= 0 ? ts[k]->dims[j] : 1;
            if (v != 1 && dims[d] != 1 && v != dims[d]) {
                *bad = d;
                return -1;
            }
            if (v != 1)
                dims[d] = v;
        }
    }
    return 0;
}

/* t's extent at output dimension d of an output of rank r (1 if none). */
static long extent_at(const Tensor *t, int r, int d)
{
    int j = d - (r - t->rank);
    return j >= 0 ? t->dims[j] : 1;
}

/* t's strides seen from output y: right-aligned, 0 where t is broadcast. */
static void strides_from(const Tensor *t, const Tensor *y, long *st)
{
    long s = 1;
    for (int d = y->rank - 1; d >= 0; d--) {
        int j = d - (y->rank - t->rank);
        long v = j >= 0 ? t->dims[j] : 1;
        st[d] = v == y->dims[d] && v != 1 ? s : 0;
        s *= v;
    }
}

static int same_dims(const Tensor *a, const Tensor *b)
{
    return a->rank == b->rank &&
           memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0;
}

/* "{1, 2, 3}", or "{0}" for none (ISO C has no empty braces). */
static const char *brace_list(Ctx *c, const long *v, int n)
{
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "{");
    for (int i = 0; i < n; i++)
        buf_printf(&b, "%s%ld", i ? ", " : "", v[i]);
    buf_printf(&b, n ? "}" : "0}");
    return b.data;
}

int shape_where(Ctx *c, Graph *g, Node *n)
{
    const Tensor *ts[3] = {IN(0), IN(1), IN(2)};
    if (IN(1)->is_int && !IN(0)->is_int)
        return node_error(c, g, n, ctx_printf(c, "Where selects int64 X "
            "'%s' and Y '%s' by a float32 condition '%s'; the condition of "
            "int64 values must be a bool (a comparison) or int64",
            IN(1)->name, IN(2)->name, IN(0)->name));
    long dims[MAX_RANK];
    int rank, bad;
    if (broadcast_shapes(ts, 3, dims, &rank, &bad) == 0) {
        set_shape(OUT(0), rank, dims);
        return 0;
    }
    return node_error(c, g, n, ctx_printf(c, "Where inputs '%s' (%s), '%s' "
        "(%s) and '%s' (%s) do not broadcast: dimension %d is %ld, %ld and "
        "%ld; each of the three must be 1 or the largest",
        ts[0]->name, shape_str(c, ts[0]), ts[1]->name, shape_str(c, ts[1]),
        ts[2]->name, shape_str(c, ts[2]), bad, extent_at(ts[0], rank, bad),
        extent_at(ts[1], rank, bad), extent_at(ts[2], rank, bad)));
}

/* where_NAME: the condition's, X's and Y's strides over the output; one
 * flat loop when all three have the output's shape. ("where_" is no
 * other static's prefix: maps are map_NAME.) */
void emit_where_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *y = OUT(0);
    long dims[MAX_RANK], st[3][MAX_RANK];
    int rank = y->rank;
    if (same_dims(IN(0), y) && same_dims(IN(1), y) && same_dims(IN(2), y)) {
        rank = 1;
        dims[0] = y->numel;
        st[0][0] = st[1][0] = st[2][0] = 1;
    } else {
        memcpy(dims, y->dims, sizeof dims);
        for (int i = 0; i < 3; i++)
            strides_from(IN(i), y, st[i]);
    }
    emit(e, "static const rt_where where_%s = {%d, %s, %s, %s, %s};",
         n->cname, rank, brace_list(e->ctx, dims, rank),
         brace_list(e->ctx, st[0], rank), brace_list(e->ctx, st[1], rank),
         brace_list(e->ctx, st[2], rank));
}

void emit_where_fwd(Emit *e, const Node *n, const char *const *out,
                    const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_where%s%s_forward(%s, %s, %s, %s, &where_%s);",
         IN(0)->is_int ? "_i64" : "", OUT(0)->is_int ? "_i64" : "", out[0],
         in[0], in[1], in[2], n->cname);
}

/* The condition gets no gradient (it is a selector, piecewise constant):
 * din[0], if the graph asks for one, stays as zeroed. */
void emit_where_bwd(Emit *e, const Node *n, const char *const *din,
                    const char *const *dout, const char *const *in,
                    const char *const *out)
{
    const Graph *g = e->g;
    (void)out;
    emit(e, "rt_where%s_backward(%s, %s, %s, %s, &where_%s);",
         IN(0)->is_int ? "_i64" : "", or_null(din, 1, 3), or_null(din, 2, 3),
         dout[0], in[0], n->cname);
}

/* ONNX Expand with its shape input as an attribute: the output is the
 * bidirectional broadcast of the input's shape and `shape`, so `shape` may
 * hold 1 where the input is larger, and fewer or more dimensions. */
int shape_expand(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *want = node_attr(n, "shape");
    if (!want->set)
        return node_error(c, g, n, "Expand needs shape=\"D0 D1 ...\" (ONNX's "
                          "shape input, given as an attribute)");
    if (want->nints > MAX_RANK)
        return node_error(c, g, n, ctx_printf(c, "Expand shape has %d "
            "dimensions; at most %d are supported", want->nints, MAX_RANK));
    Tensor t;
    memset(&t, 0, sizeof t);
    t.name = "shape";
    for (int d = 0; d < want->nints; d++) {
        if (want->ints[d] < 1)
            return node_error(c, g, n, ctx_printf(c, "Expand shape entry %d "
                "is %ld; entries are positive (1 keeps the input's "
                "dimension)", d, want->ints[d]));
        t.dims[d] = want->ints[d];
    }
    set_shape(&t, want->nints, t.dims);
    const Tensor *ts[2] = {x, &t};
    long dims[MAX_RANK];
    int rank, bad;
    if (broadcast_shapes(ts, 2, dims, &rank, &bad) == 0) {
        set_shape(OUT(0), rank, dims);
        return 0;
    }
    Buf b;
    buf_init(&b, c);
    for (int d = 0; d < want->nints; d++)
        buf_printf(&b, "%s%ld", d ? " " : "", want->ints[d]);
    return node_error(c, g, n, ctx_printf(c, "Expand cannot broadcast input "
        "'%s' (%s) to shape \"%s\": dimension %d is %ld against %ld; each "
        "pair must be equal or 1", x->name, shape_str(c, x),
        b.len ? b.data : "", bad, extent_at(x, rank, bad),
        extent_at(&t, rank, bad)));
}

/* map_NAME: the output's dims, and the input's strides in sa (sb too). */
void emit_expand_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    emit_bcast(e, n, OUT(0), IN(0), IN(0));
}

void emit_expand_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_expand%s_forward(%s, %s, &map_%s);",
         IN(0)->is_int ? "_i64" : "", out[0], in[0], n->cname);
}

void emit_expand_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_expand_backward(%s, %s, &map_%s);", din[0], dout[0],
         n->cname);
}

/* ---- Tile (issue 25) ------------------------------------------------------------- */

/* Tile's map: y's dimension d, x_d * r_d, walked as (r_d, x_d), x's stride
 * 0 along the repeat and its own along x_d. Dimensions of extent 1 are
 * dropped and neighbours that walk x (or its repeats) in one stride are
 * merged, so an (a, b) input tiled (2, 1) is a map of rank 2. Returns the
 * map's rank, which may exceed the runtime's RT_MAX_RANK (the shape rule
 * refuses that). */
static int tile_map(const Tensor *x, const long *rep, long *dims, long *st)
{
    long own[MAX_RANK], s = 1;
    long d2[2 * MAX_RANK], s2[2 * MAX_RANK];
    int k = 0, r = 0;
    for (int d = x->rank - 1; d >= 0; d--) {
        own[d] = s;
        s *= x->dims[d];
    }
    for (int d = 0; d < x->rank; d++) {
        d2[k] = rep[d], s2[k++] = 0;
        d2[k] = x->dims[d], s2[k++] = own[d];
    }
    for (int i = 0; i < k; i++) {
        if (d2[i] == 1)
            continue;
        if (r > 0 && st[r - 1] == s2[i] * d2[i]) {
            dims[r - 1] *= d2[i];
            st[r - 1] = s2[i];
            continue;
        }
        if (r == 2 * MAX_RANK)
            return r + 1;
        dims[r] = d2[i], st[r++] = s2[i];
    }
    if (r == 0)
        dims[r] = 1, st[r++] = 1;
    return r;
}

/* ONNX Tile with its repeats input as the attribute `repeats`: one
 * positive count per input dimension, the output x_d * r_d. */
int shape_tile(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *rep = node_attr(n, "repeats");
    long dims[2 * MAX_RANK], st[2 * MAX_RANK];
    if (!rep->set || rep->nints != x->rank)
        return node_error(c, g, n, ctx_printf(c, "Tile needs repeats=\"R0 "
            "...\" with one count per dimension of input '%s' (%s): %d, "
            "not %d", x->name, shape_str(c, x), x->rank,
            rep->set ? rep->nints : 0));
    for (int d = 0; d < x->rank; d++) {
        if (rep->ints[d] < 1 || rep->ints[d] > MAX_NUMEL)
            return node_error(c, g, n, ctx_printf(c, "Tile repeats entry %d "
                "is %ld; each count must be at least 1 (1 keeps the "
                "dimension)", d, rep->ints[d]));
        dims[d] = x->dims[d] * rep->ints[d];
        if (dims[d] > MAX_NUMEL)
            return node_error(c, g, n, ctx_printf(c, "Tile output dimension "
                "%d would be %ld * %ld, more than %ld", d, x->dims[d],
                rep->ints[d], MAX_NUMEL));
    }
    set_shape(OUT(0), x->rank, dims);
    int walk = tile_map(x, rep->ints, dims, st);
    if (walk > RT_MAX_RANK)
        return node_error(c, g, n, ctx_printf(c, "Tile of input '%s' (%s) "
            "would walk %d dimensions (each repeated one as two); the "
            "runtime walks at most %d: tile in two steps, or Reshape first",
            x->name, shape_str(c, x), walk, RT_MAX_RANK));
    return 0;
}

/* map_NAME: y walked as tile_map's split dims, x's strides in sa (and sb,
 * unused) */
void emit_tile_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    long dims[2 * MAX_RANK], st[2 * MAX_RANK];
    int r = tile_map(IN(0), node_attr(n, "repeats")->ints, dims, st);
    emit_map(e, n, r, dims, st, st);
}

int tile_walk(const Tensor *x, const long *repeats)
{
    long dims[2 * MAX_RANK], st[2 * MAX_RANK];
    return tile_map(x, repeats, dims, st);
}
