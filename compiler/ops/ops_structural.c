/*
 * ops_structural.c: the ops that move data without arithmetic (runtime
 * structural.c), for the op table's rows (ops.c): Transpose; Gather (an
 * embedding lookup, whose backward scatter-adds into the table); Reshape,
 * Flatten, Identity, Unsqueeze and Squeeze, which are
 * views (alias rows: the output is the input's floats, or int64s, with
 * another shape, and needs no rule beyond its shape), and Concat, Split
 * and Slice, which move data with the runtime's rt_concat_*, rt_split_* and
 * rt_slice_* kernels. GatherElements (torch.gather: one index per
 * output element, along one axis; the backward scatter-adds) and OneHot
 * (int64 indices to float32 rows of off and on values) read int64 indices
 * as Gather does. DepthToSpace and SpaceToDepth the runtime computes as
 * Transposes of a 6-D view of the input.
 *
 * ONNX gives Unsqueeze's and Squeeze's axes, Split's sizes and Slice's
 * starts, ends, axes and steps as inputs since opset 13; here they are
 * attributes (the ONNX importer turns constant inputs into them). Each
 * backward reads only shapes, never a value: the rows' needs masks are 0.
 *
 * Concat and Split see every tensor as (outer, width) around the axis:
 * outer the product of the dimensions before it, width the extent along it
 * times the product of those after, so that one call moves whole rows.
 * Slice's starts and steps are clamped here, by ONNX's rules, and the
 * kernel only walks them.
 */
#include "ops.h"

#include <string.h>

int shape_transpose(Ctx *c, Graph *g, Node *n)
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

void emit_transpose_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    long p[MAX_RANK];
    transpose_perm(n, IN(0)->rank, p);
    emit_int_array(e, ctx_printf(e->ctx, "dims_%s", n->cname), IN(0)->dims,
                   IN(0)->rank);
    emit_int_array(e, ctx_printf(e->ctx, "perm_%s", n->cname), p, IN(0)->rank);
}

void emit_transpose_fwd(Emit *e, const Node *n, const char *const *out,
                        const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_transpose%s_forward(%s, %s, %d, dims_%s, perm_%s);",
         IN(0)->is_int ? "_i64" : "", out[0], in[0], IN(0)->rank, n->cname,
         n->cname);
}

void emit_transpose_bwd(Emit *e, const Node *n, const char *const *din,
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

/* A shape attribute's entries as the XML spells them: "2 -1 16". */
static const char *ints_text(Ctx *c, const Attr *a)
{
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "%s", "");
    for (int d = 0; d < a->nints; d++)
        buf_printf(&b, "%s%ld", d ? " " : "", a->ints[d]);
    return b.data;
}

/* ONNX Reshape with its shape as an attribute: 0 copies the input's
 * dimension at that place (allowzero=0), one -1 takes what is left. */
int shape_reshape(Ctx *c, Graph *g, Node *n)
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
        if (v > MAX_NUMEL || (dims[d] > 0 && known > MAX_NUMEL / dims[d]))
            return node_error(c, g, n, ctx_printf(c, "Reshape shape \"%s\" "
                "holds more than %ld elements, the most supported; it must "
                "hold the %ld elements of input '%s'", ints_text(c, want),
                MAX_NUMEL, x->numel, x->name));
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
    return node_error(c, g, n, ctx_printf(c, "Reshape cannot make input '%s' "
        "(%s, %ld elements) into shape \"%s\"; the element count must stay "
        "the same", x->name, shape_str(c, x), x->numel, ints_text(c, want)));
}

int shape_flatten(Ctx *c, Graph *g, Node *n)
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

/* ONNX Gather on axis 0: y = table[idx] row by row, y's shape idx's shape
 * followed by table's without its first dimension. */
int shape_gather(Ctx *c, Graph *g, Node *n)
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

void emit_gather_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in)
{
    emit(e, "rt_gather_forward(%s, %s, %s, %s);", out[0], in[0], in[1],
         gather_sizes(e, n));
}

void emit_gather_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out)
{
    (void)out;
    emit(e, "rt_gather_backward(%s, %s, %s, %s, %s);", din[0], dout[0], in[1],
         gather_sizes(e, n), e->scratch);
}

/* The backward's positions sorted by table row and each one's row (2 n
 * ints), so that a repeated index's rows are summed without drift. */
long scratch_gather(const Graph *g, const Node *n, int backward)
{
    return backward ? (long)rt_gather_backward_scratch((int)IN(1)->numel) : 0;
}

/* ONNX accepts -rows..rows-1 (negative counts from the end). */
void range_gather(const Graph *g, const Node *n, IntRange *r)
{
    r->lo = -IN(0)->dims[0];
    r->hi = IN(0)->dims[0];
    r->has_ignore = 0;
    r->ignore = 0;
}

int shape_unsqueeze(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *axes = node_attr(n, "axes");
    int inserted[MAX_RANK] = {0};
    long dims[MAX_RANK];
    if (!axes->set || axes->nints == 0)
        return node_error(c, g, n, "Unsqueeze needs axes=\"A ...\" (ONNX's "
                          "axes input, given as an attribute)");
    int rank = x->rank + axes->nints;
    if (rank > MAX_RANK)
        return node_error(c, g, n, ctx_printf(c, "Unsqueeze of input '%s' "
            "(rank %d) at %d axes would make rank %d; at most %d dimensions "
            "are supported", x->name, x->rank, axes->nints, rank, MAX_RANK));
    for (int i = 0; i < axes->nints; i++) {
        long a = axes->ints[i];
        if (a < -rank || a >= rank)
            return node_error(c, g, n, ctx_printf(c, "Unsqueeze axis %ld is "
                "out of range for the output's rank %d (input '%s' of rank "
                "%d, plus one per axis); axes must be in [%d, %d]", a, rank,
                x->name, x->rank, -rank, rank - 1));
        int d = (int)(a < 0 ? a + rank : a);
        if (inserted[d])
            return node_error(c, g, n, ctx_printf(c, "Unsqueeze axis %ld is "
                "listed twice (axis %d names the same dimension)", a, d));
        inserted[d] = 1;
    }
    for (int d = 0, from = 0; d < rank; d++)
        dims[d] = inserted[d] ? 1 : x->dims[from++];
    set_shape(OUT(0), rank, dims);
    return 0;
}

/* Without axes, every dimension of 1 goes. */
int shape_squeeze(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *axes = node_attr(n, "axes");
    int removed[MAX_RANK] = {0}, all = !axes->set || axes->nints == 0;
    long dims[MAX_RANK];
    for (int d = 0; all && d < x->rank; d++)
        removed[d] = x->dims[d] == 1;
    for (int i = 0; !all && i < axes->nints; i++) {
        long a = axes->ints[i];
        if (a < -x->rank || a >= x->rank)
            return node_error(c, g, n, ctx_printf(c, "Squeeze axis %ld is out "
                "of range for input '%s' of rank %d; axes must be in [%d, %d]",
                a, x->name, x->rank, -x->rank, x->rank - 1));
        int d = (int)(a < 0 ? a + x->rank : a);
        if (removed[d])
            return node_error(c, g, n, ctx_printf(c, "Squeeze axis %ld is "
                "listed twice (axis %d names the same dimension)", a, d));
        if (x->dims[d] != 1)
            return node_error(c, g, n, ctx_printf(c, "Squeeze axis %ld names "
                "dimension %d of input '%s' (%s), which is %ld, not 1; only "
                "dimensions of 1 can be removed", a, d, x->name,
                shape_str(c, x), x->dims[d]));
        removed[d] = 1;
    }
    int rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!removed[d])
            dims[rank++] = x->dims[d];
    set_shape(OUT(0), rank, dims);
    return 0;
}

/* The axis, made non-negative (the shape rule has checked it). */
static int axis_of(const Node *n, int rank)
{
    long a = node_int(n, "axis");
    return (int)(a < 0 ? a + rank : a);
}

int shape_concat(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    if (!node_attr(n, "axis")->set)
        return node_error(c, g, n, "Concat needs axis=\"A\", the dimension "
                          "along which the inputs join (ONNX has no default)");
    if (x->rank == 0)
        return node_error(c, g, n, ctx_printf(c, "Concat input 0 '%s' is a "
            "scalar; inputs need at least one dimension", x->name));
    int a = node_axis(c, g, n, x->rank, x->rank - 1);
    if (a < 0)
        return -1;
    long dims[MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = x->dims[d];
    for (int i = 1; i < n->nin; i++) {
        const Tensor *t = IN(i);
        int same = t->rank == x->rank;
        for (int d = 0; same && d < x->rank; d++)
            same = d == a || t->dims[d] == x->dims[d];
        if (!same)
            return node_error(c, g, n, ctx_printf(c, "Concat input %d '%s' "
                "has shape %s but input 0 '%s' has %s; inputs have the same "
                "rank and the same dimensions except along axis %d", i,
                t->name, shape_str(c, t), x->name, shape_str(c, x), a));
        dims[a] += t->dims[a];
    }
    set_shape(OUT(0), x->rank, dims);
    return 0;
}

/* Split: the split attribute's sizes, or equal parts. */
int shape_split(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *split = node_attr(n, "split");
    if (x->rank == 0)
        return node_error(c, g, n, ctx_printf(c, "Split input '%s' is a "
            "scalar; it needs at least one dimension", x->name));
    int a = node_axis(c, g, n, x->rank, x->rank - 1);
    if (a < 0)
        return -1;
    long whole = x->dims[a], sum = 0;
    if (split->set && split->nints != n->nout)
        return node_error(c, g, n, ctx_printf(c, "Split has %d output%s but "
            "split lists %d size%s; it gives one size per output", n->nout,
            n->nout == 1 ? "" : "s", split->nints,
            split->nints == 1 ? "" : "s"));
    for (int o = 0; split->set && o < n->nout; o++) {
        if (split->ints[o] <= 0)
            return node_error(c, g, n, ctx_printf(c, "Split size %d is %ld; "
                "sizes are positive", o, split->ints[o]));
    }
    for (int o = 0; split->set && o < n->nout; o++) {
        if (split->ints[o] > whole)     /* and the sum cannot overflow */
            return node_error(c, g, n, ctx_printf(c, "Split size %d is %ld, "
                "more than input '%s' (%s) has along axis %d (%ld)", o,
                split->ints[o], x->name, shape_str(c, x), a, whole));
        sum += split->ints[o];
    }
    if (split->set && sum != whole)
        return node_error(c, g, n, ctx_printf(c, "Split sizes add up to %ld "
            "but input '%s' (%s) is %ld long along axis %d", sum, x->name,
            shape_str(c, x), whole, a));
    if (!split->set && whole % n->nout != 0)
        return node_error(c, g, n, ctx_printf(c, "Split cannot cut axis %d of "
            "input '%s' (%s, %ld long) into %d equal parts; give the sizes "
            "with split=\"...\"", a, x->name, shape_str(c, x), whole,
            n->nout));
    long dims[MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = x->dims[d];
    for (int o = 0; o < n->nout; o++) {
        dims[a] = split->set ? split->ints[o] : whole / n->nout;
        set_shape(OUT(o), x->rank, dims);
    }
    return 0;
}

/* "n, (const int[]){widths}, outer" for the tensors ts[0..count) joined or
 * cut along axis a. */
static const char *pieces(Emit *e, const Tensor *const *ts, int count, int a)
{
    Buf b;
    buf_init(&b, e->ctx);
    for (int i = 0; i < count; i++)
        buf_printf(&b, "%s%ld", i ? ", " : "",
                   dims_product(ts[i], a, ts[i]->rank));
    return ctx_printf(e->ctx, "%d, (const int[]){%s}, %ld", count, b.data,
                      dims_product(ts[0], 0, a));
}

/* "(TYPE[]){v0, v1, ...}", NULL for a missing one */
static const char *pointers(Emit *e, const char *type, const char *const *v,
                            int count)
{
    Buf b;
    buf_init(&b, e->ctx);
    for (int i = 0; i < count; i++)
        buf_printf(&b, "%s%s", i ? ", " : "", or_null(v, i, count));
    return ctx_printf(e->ctx, "(%s[]){%s}", type, b.data);
}

static const char *concat_pieces(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *ts[MAX_IO];
    for (int i = 0; i < n->nin; i++)
        ts[i] = IN(i);
    return pieces(e, ts, n->nin, axis_of(n, IN(0)->rank));
}

static const char *split_pieces(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *ts[MAX_IO];
    for (int o = 0; o < n->nout; o++)
        ts[o] = OUT(o);
    return pieces(e, ts, n->nout, axis_of(n, IN(0)->rank));
}

void emit_concat_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in)
{
    const Graph *g = e->g;
    int i64 = IN(0)->is_int;
    emit(e, "rt_concat%s_forward(%s, %s, %s);", i64 ? "_i64" : "", out[0],
         pointers(e, i64 ? "const int64_t *const" : "const float *const", in,
                  n->nin), concat_pieces(e, n));
}

void emit_concat_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_concat_backward(%s, %s, %s);",
         pointers(e, "float *const", din, n->nin), dout[0],
         concat_pieces(e, n));
}

void emit_split_fwd(Emit *e, const Node *n, const char *const *out,
                    const char *const *in)
{
    emit(e, "rt_split_forward(%s, %s, %s);",
         pointers(e, "float *const", out, n->nout), in[0],
         split_pieces(e, n));
}

/* An output without a gradient passes NULL: it adds nothing. */
void emit_split_bwd(Emit *e, const Node *n, const char *const *din,
                    const char *const *dout, const char *const *in,
                    const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_split_backward(%s, %s, %s);", din[0],
         pointers(e, "const float *const", dout, n->nout), split_pieces(e, n));
}

/* ONNX's clamping along one dimension of extent dim: a negative start or
 * end counts from the end; then a positive step clamps both to [0, dim], a
 * negative one the start to [0, dim - 1] and the end to [-1, dim - 1].
 * *first is the first index taken, *count how many (0: none). */
void slice_axis(long dim, long start, long end, long step, long *first,
                long *count)
{
    /* below -dim is as far below 0 as any: no overflow adding dim */
    start = start < 0 ? (start < -dim ? -1 : start + dim) : start;
    end = end < 0 ? (end < -dim ? -1 : end + dim) : end;
    long lo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
    start = start < 0 ? 0 : start > hi ? hi : start;
    end = end < lo ? lo : end > hi ? hi : end;
    /* a step longer than the dimension takes one element at most */
    if (step > dim)
        step = dim + 1;
    if (step < -dim)
        step = -(dim + 1);
    *first = start;
    if (step > 0)
        *count = end > start ? (end - start - 1) / step + 1 : 0;
    else
        *count = start > end ? (start - end - 1) / -step + 1 : 0;
}

/* Every dimension's first index, step and count; the dimensions Slice's
 * axes do not name are taken whole. The shape rule has checked the
 * attributes. */
static void slice_plan(const Tensor *x, const Node *n, long *first,
                       long *step, long *count)
{
    const Attr *starts = node_attr(n, "starts"), *ends = node_attr(n, "ends");
    const Attr *axes = node_attr(n, "axes"), *steps = node_attr(n, "steps");
    for (int d = 0; d < x->rank; d++) {
        first[d] = 0;
        step[d] = 1;
        count[d] = x->dims[d];
    }
    for (int i = 0; i < starts->nints; i++) {
        long a = axes->set ? axes->ints[i] : i;
        int d = (int)(a < 0 ? a + x->rank : a);
        step[d] = steps->set ? steps->ints[i] : 1;
        slice_axis(x->dims[d], starts->ints[i], ends->ints[i], step[d],
                   &first[d], &count[d]);
        if (count[d] == 1)      /* the step is never taken: keep it small */
            step[d] = 1;
    }
}

int shape_slice(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *starts = node_attr(n, "starts"), *ends = node_attr(n, "ends");
    const Attr *axes = node_attr(n, "axes"), *steps = node_attr(n, "steps");
    int seen[MAX_RANK] = {0};
    if (!starts->set || !ends->set)
        return node_error(c, g, n, "Slice needs starts=\"...\" and ends=\"...\" "
                          "(ONNX's starts and ends inputs, given as "
                          "attributes)");
    int k = starts->nints;
    if (ends->nints != k || (axes->set && axes->nints != k) ||
        (steps->set && steps->nints != k))
        return node_error(c, g, n, ctx_printf(c, "Slice starts has %d "
            "entries, ends %d, axes %d and steps %d; each gives one entry per "
            "sliced axis", k, ends->nints, axes->set ? axes->nints : k,
            steps->set ? steps->nints : k));
    for (int i = 0; i < k; i++) {
        long a = axes->set ? axes->ints[i] : i;
        if (a < -x->rank || a >= x->rank)
            return node_error(c, g, n, ctx_printf(c, "Slice axis %ld is out "
                "of range for input '%s' of rank %d; axes must be in [%d, %d]",
                a, x->name, x->rank, -x->rank, x->rank - 1));
        int d = (int)(a < 0 ? a + x->rank : a);
        if (seen[d]++)
            return node_error(c, g, n, ctx_printf(c, "Slice axis %ld is listed "
                "twice (axis %d names the same dimension)", a, d));
        if (steps->set && steps->ints[i] == 0)
            return node_error(c, g, n, ctx_printf(c, "Slice steps entry %d "
                "is 0; a step is positive or negative, never 0", i));
    }
    long first[MAX_RANK], step[MAX_RANK], count[MAX_RANK];
    slice_plan(x, n, first, step, count);
    for (int i = 0; i < k; i++) {
        long a = axes->set ? axes->ints[i] : i;
        int d = (int)(a < 0 ? a + x->rank : a);
        if (count[d] == 0)
            return node_error(c, g, n, ctx_printf(c, "Slice takes nothing "
                "along axis %d of input '%s' (%s): start %ld, end %ld, step "
                "%ld select no index of %ld; empty tensors are not supported",
                d, x->name, shape_str(c, x), starts->ints[i], ends->ints[i],
                steps->set ? steps->ints[i] : 1, x->dims[d]));
    }
    set_shape(OUT(0), x->rank, count);
    return 0;
}

/* slicein_, sliceout_ (the dims), slicestart_ and slicestep_: one word
 * before the node's name each, so no two nodes' arrays can collide. */
void emit_slice_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0);
    long first[MAX_RANK], step[MAX_RANK], count[MAX_RANK];
    slice_plan(x, n, first, step, count);
    emit_int_array(e, ctx_printf(e->ctx, "slicein_%s", n->cname), x->dims,
                   x->rank);
    emit_int_array(e, ctx_printf(e->ctx, "sliceout_%s", n->cname), count,
                   x->rank);
    emit_int_array(e, ctx_printf(e->ctx, "slicestart_%s", n->cname), first,
                   x->rank);
    emit_int_array(e, ctx_printf(e->ctx, "slicestep_%s", n->cname), step,
                   x->rank);
}

static const char *slice_args(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const char *m = n->cname;
    return ctx_printf(e->ctx, "%d, slicein_%s, sliceout_%s, slicestart_%s, "
                      "slicestep_%s", IN(0)->rank, m, m, m, m);
}

void emit_slice_fwd(Emit *e, const Node *n, const char *const *out,
                    const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_slice%s_forward(%s, %s, %s);", IN(0)->is_int ? "_i64" : "",
         out[0], in[0], slice_args(e, n));
}

void emit_slice_bwd(Emit *e, const Node *n, const char *const *din,
                    const char *const *dout, const char *const *in,
                    const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_slice_backward(%s, %s, %s);", din[0], dout[0],
         slice_args(e, n));
}

/* ---- GatherElements and OneHot (issue 25) -------------------------------------- */

/* ONNX GatherElements (torch.gather): indices of data's rank, each
 * dimension but the axis at most data's (torch's rule; ONNX's reference
 * reads the same), the output of the indices' shape. */
int shape_gather_elements(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0), *idx = IN(1);
    if (x->rank == 0)
        return node_error(c, g, n, ctx_printf(c, "GatherElements input 0 "
            "'%s' is a scalar; it needs an axis to gather along", x->name));
    if (node_axis(c, g, n, x->rank, x->rank - 1) < 0)
        return -1;
    if (idx->rank != x->rank)
        return node_error(c, g, n, ctx_printf(c, "GatherElements indices "
            "'%s' (%s) have rank %d but data '%s' (%s) has rank %d; they "
            "must have one rank", idx->name, shape_str(c, idx), idx->rank,
            x->name, shape_str(c, x), x->rank));
    int axis = axis_of(n, x->rank);
    for (int d = 0; d < x->rank; d++)
        if (d != axis && idx->dims[d] > x->dims[d])
            return node_error(c, g, n, ctx_printf(c, "GatherElements indices "
                "'%s' (%s) are longer than data '%s' (%s) along dimension "
                "%d; off the axis (%d) they may be at most data's extent",
                idx->name, shape_str(c, idx), x->name, shape_str(c, x), d,
                axis));
    set_shape(OUT(0), idx->rank, idx->dims);
    return 0;
}

/* xdims_NAME and idims_NAME: data's and the indices' dimensions */
void emit_gather_elements_static(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    emit_int_array(e, ctx_printf(e->ctx, "xdims_%s", n->cname), IN(0)->dims,
                   IN(0)->rank);
    emit_int_array(e, ctx_printf(e->ctx, "idims_%s", n->cname), IN(1)->dims,
                   IN(1)->rank);
}

static const char *gather_elements_sizes(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    return ctx_printf(e->ctx, "%d, xdims_%s, idims_%s, %d", IN(0)->rank,
                      n->cname, n->cname, axis_of(n, IN(0)->rank));
}

void emit_gather_elements_fwd(Emit *e, const Node *n, const char *const *out,
                              const char *const *in)
{
    emit(e, "rt_gather_elements_forward(%s, %s, %s, %s);", out[0], in[0],
         in[1], gather_elements_sizes(e, n));
}

void emit_gather_elements_bwd(Emit *e, const Node *n, const char *const *din,
                              const char *const *dout, const char *const *in,
                              const char *const *out)
{
    (void)out;
    emit(e, "rt_gather_elements_backward(%s, %s, %s, %s);", din[0], dout[0],
         in[1], gather_elements_sizes(e, n));
}

/* ONNX accepts -n..n-1 along the axis (negative counts from the end). */
void range_gather_elements(const Graph *g, const Node *n, IntRange *r)
{
    long extent = IN(0)->dims[axis_of(n, IN(0)->rank)];
    r->lo = -extent;
    r->hi = extent;
    r->has_ignore = 0;
    r->ignore = 0;
}

/* ONNX OneHot with depth and values as attributes (the importer reads
 * its constant inputs): the indices' shape with `depth` inserted at axis
 * (an axis of the output, rank + 1 of them). */
int shape_one_hot(Ctx *c, Graph *g, Node *n)
{
    const Tensor *idx = IN(0);
    long depth = node_int(n, "depth");
    int rank = idx->rank + 1;
    if (depth < 1 || depth > MAX_NUMEL)
        return node_error(c, g, n, ctx_printf(c, "OneHot depth is %ld; it "
            "must be given (depth=\"N\") and be at least 1", depth));
    if (rank > MAX_RANK)
        return node_error(c, g, n, ctx_printf(c, "OneHot of indices '%s' "
            "(rank %d) would have rank %d; at most %d is supported",
            idx->name, idx->rank, rank, MAX_RANK));
    long a = node_int(n, "axis");
    if (a < -rank || a >= rank)
        return node_error(c, g, n, ctx_printf(c, "OneHot axis %ld is out of "
            "range for the output's rank %d (indices '%s' of rank %d, and the "
            "new axis); axis must be in [%d, %d]", a, rank, idx->name,
            idx->rank, -rank, rank - 1));
    int axis = axis_of(n, rank);
    long dims[MAX_RANK];
    for (int d = 0, from = 0; d < rank; d++)
        dims[d] = d == axis ? depth : idx->dims[from++];
    set_shape(OUT(0), rank, dims);
    return 0;
}

void emit_one_hot_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in)
{
    const Graph *g = e->g;
    const Tensor *idx = IN(0);
    int axis = axis_of(n, idx->rank + 1);
    emit(e, "rt_one_hot_forward(%s, %s, %ld, %ld, %ld, %s, %s);", out[0],
         in[0], dims_product(idx, 0, axis), node_int(n, "depth"),
         dims_product(idx, axis, idx->rank),
         fmt_float(e->ctx, node_float(n, "off_value")),
         fmt_float(e->ctx, node_float(n, "on_value")));
}

/* ONNX accepts -depth..depth-1 (negative counts from the end); any other
 * index makes its row all off_value, which torch's one_hot refuses. */
void range_one_hot(const Graph *g, const Node *n, IntRange *r)
{
    (void)g;
    r->lo = -node_int(n, "depth");
    r->hi = node_int(n, "depth");
    r->has_ignore = 0;
    r->ignore = 0;
}

/* ---- DepthToSpace and SpaceToDepth (issue 25) ------------------------------ */

/* x is (N, C, H, W): DepthToSpace moves blocks of C into H and W,
 * (N, C/b^2, H b, W b), SpaceToDepth back, (N, C b^2, H/b, W/b). */
int shape_depth_to_space(Ctx *c, Graph *g, Node *n)
{
    const Tensor *x = IN(0);
    const Attr *bs = node_attr(n, "blocksize");
    int d2s = n->op == OP_DEPTH_TO_SPACE;
    if (!bs->set)
        return node_error(c, g, n, ctx_printf(c, "%s needs blocksize=\"B\" "
                          "(a positive integer)", n->row->name));
    long b = bs->i;
    if (b < 1 || b > 4096)
        return node_error(c, g, n, ctx_printf(c, "%s blocksize is %ld; it "
                          "must be a positive integer, at most 4096",
                          n->row->name, b));
    if (x->rank != 4)
        return node_error(c, g, n, ctx_printf(c, "%s input '%s' is %s; it "
            "must be 4-D (N, C, H, W)", n->row->name, x->name,
            shape_str(c, x)));
    long dims[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
    if (d2s && x->dims[1] % (b * b) != 0)
        return node_error(c, g, n, ctx_printf(c, "DepthToSpace input '%s' "
            "(%s) has %ld channels; blocksize %ld needs a multiple of %ld",
            x->name, shape_str(c, x), x->dims[1], b, b * b));
    if (!d2s && (x->dims[2] % b != 0 || x->dims[3] % b != 0))
        return node_error(c, g, n, ctx_printf(c, "SpaceToDepth input '%s' "
            "(%s): height and width must be multiples of blocksize %ld",
            x->name, shape_str(c, x), b));
    if (d2s) {
        dims[1] /= b * b;
        dims[2] *= b;
        dims[3] *= b;
    } else {
        dims[1] *= b * b;
        dims[2] /= b;
        dims[3] /= b;
    }
    set_shape(OUT(0), 4, dims);
    return 0;
}

/* "N, C, H, W, B" (x's dims) and DepthToSpace's ", crd" */
static const char *d2s_args(Emit *e, const Node *n)
{
    const Graph *g = e->g;
    const Tensor *x = IN(0);
    const char *args = ctx_printf(e->ctx, "%ld, %ld, %ld, %ld, %ld",
                                  x->dims[0], x->dims[1], x->dims[2],
                                  x->dims[3], node_int(n, "blocksize"));
    if (n->op != OP_DEPTH_TO_SPACE)
        return args;
    return ctx_printf(e->ctx, "%s, %d", args,
                      strcmp(node_attr(n, "mode")->s, "CRD") == 0);
}

void emit_depth_to_space_fwd(Emit *e, const Node *n, const char *const *out,
                             const char *const *in)
{
    emit(e, "rt_%s_forward(%s, %s, %s);", n->row->kernel, out[0], in[0],
         d2s_args(e, n));
}

void emit_depth_to_space_bwd(Emit *e, const Node *n, const char *const *din,
                             const char *const *dout, const char *const *in,
                             const char *const *out)
{
    (void)in;
    (void)out;
    emit(e, "rt_%s_backward(%s, %s, %s);", n->row->kernel, din[0], dout[0],
         d2s_args(e, n));
}
