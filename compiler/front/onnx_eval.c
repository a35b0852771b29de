/*
 * onnx_eval.c: constant folding for the ONNX front end. A node whose
 * inputs are all known at compile time (initializers that do not train,
 * Constant nodes, the static shapes Shape reads) is evaluated here and its
 * outputs become constants, so that the shape arithmetic torch exports
 * (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) leaves no trace in
 * the IR. Float results are computed in double and rounded once to float,
 * which for + - * / and sqrt gives the float operation's own result.
 *
 * onnx_fold returns 1 when it evaluated the node, 0 when the op is not one
 * it knows (the node is then lowered as any other), -1 on an error.
 * onnx_folded_ops names the ops it folds that the op table does not
 * compute, for `remat ops`.
 */
#include "onnx_impl.h"

#include <math.h>
#include <string.h>

const Onnx__AttributeProto *onnx_attr(const ONode *o, const char *name)
{
    for (size_t k = 0; k < o->p->n_attribute; k++)
        if (strcmp(o->p->attribute[k]->name, name) == 0)
            return o->p->attribute[k];
    return NULL;
}

long onnx_attr_int(const ONode *o, const char *name, long dflt)
{
    const Onnx__AttributeProto *a = onnx_attr(o, name);
    return a && a->has_i ? (long)a->i : dflt;
}

double val_get(const Val *x, long k)
{
    return x->dt == DT_F32 ? (double)x->f[k] : (double)x->i[k];
}

int64_t val_geti(const Val *x, long k)
{
    if (x->dt != DT_F32)
        return x->i[k];
    float f = x->f[k];
    return f != f ? 0 : f >= 9.2233720e18f ? INT64_MAX
           : f <= -9.2233720e18f ? INT64_MIN : (int64_t)f;
}

/* A double as int64, saturating (out of range it is undefined in C). */
static int64_t to_i64(double d)
{
    if (d != d)
        return 0;
    if (d >= 9.2233720368547758e18)
        return INT64_MAX;
    if (d <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)d;
}

static void val_put(Val *x, long k, double d)
{
    if (x->dt == DT_F32)
        x->f[k] = (float)d;
    else
        x->i[k] = to_i64(d);
}

static Val *IV(Im *m, ONode *o, int i)
{
    return i < o->nin && o->in[i] >= 0 ? &m->v[o->in[i]] : NULL;
}

/* Output i shaped and allocated. */
static Val *make_out(Im *m, ONode *o, int i, DType dt, int rank,
                     const long *dims)
{
    if (i >= o->nout || o->out[i] < 0) {
        ctx_error(m->c, m->file, 0, "%s: output %d is left out; the value it "
                  "computes needs a name", o->what, i);
        return NULL;
    }
    Val *y = &m->v[o->out[i]];
    int64_t d64[MAX_RANK];
    for (int k = 0; k < rank; k++)
        d64[k] = dims[k];
    y->dt = dt;
    if (val_set_shape(m, y, rank, d64, o->what))
        return NULL;
    y->shaped = 1;
    val_alloc(m, y);
    return y;
}

static int fold_error(Im *m, ONode *o, const char *what)
{
    return ctx_error(m->c, m->file, 0, "%s: %s", o->what, what);
}

/* ---- broadcasting ------------------------------------------------------------- */

static int bcast_shape(Im *m, ONode *o, Val **in, int nin, int *rank,
                       long *dims)
{
    int r = 0;
    for (int k = 0; k < nin; k++)
        if (in[k]->rank > r)
            r = in[k]->rank;
    for (int d = 0; d < r; d++) {
        long n = 1;
        for (int k = 0; k < nin; k++) {
            int dd = d - (r - in[k]->rank);
            long s = dd >= 0 ? in[k]->dims[dd] : 1;
            if (s != 1 && n != 1 && s != n)
                return fold_error(m, o, "input shapes do not broadcast");
            if (s != 1)
                n = s;
            if (s == 0)
                n = 0;
        }
        dims[d] = n;
    }
    *rank = r;
    return 0;
}

/* The flat index into x of output element k (output shape rank/dims). */
static long bcast_at(const Val *x, int rank, const long *dims, long k)
{
    long idx = 0, stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        long c = k % dims[d];
        k /= dims[d];
        int dd = d - (rank - x->rank);
        if (dd >= 0) {
            if (x->dims[dd] != 1)
                idx += c * stride;
            stride *= x->dims[dd];
        }
    }
    return idx;
}

static double binary(const char *op, double a, double b, int is_int)
{
    if (!strcmp(op, "Add")) return a + b;
    if (!strcmp(op, "Sub")) return a - b;
    if (!strcmp(op, "Mul")) return a * b;
    if (!strcmp(op, "Div"))
        return is_int ? (b != 0 ? (double)((int64_t)a / (int64_t)b) : 0) : a / b;
    if (!strcmp(op, "Pow")) return pow(a, b);
    if (!strcmp(op, "Max")) return a > b ? a : b;
    if (!strcmp(op, "Min")) return a < b ? a : b;
    if (!strcmp(op, "Mod")) {
        if (!is_int)
            return fmod(a, b);
        if (b == 0)
            return 0;
        int64_t r = (int64_t)a % (int64_t)b;  /* ONNX: the divisor's sign */
        return (double)(r != 0 && (r < 0) != (b < 0) ? r + (int64_t)b : r);
    }
    if (!strcmp(op, "Equal")) return a == b;
    if (!strcmp(op, "Less")) return a < b;
    if (!strcmp(op, "Greater")) return a > b;
    if (!strcmp(op, "LessOrEqual")) return a <= b;
    if (!strcmp(op, "GreaterOrEqual")) return a >= b;
    if (!strcmp(op, "And")) return a != 0 && b != 0;
    if (!strcmp(op, "Or")) return a != 0 || b != 0;
    return NAN;
}

static const char *const binary_ops[] = {
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Less",
    "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", NULL};

static int is_in(const char *op, const char *const *list)
{
    for (int k = 0; list[k]; k++)
        if (strcmp(op, list[k]) == 0)
            return 1;
    return 0;
}

static int fold_binary(Im *m, ONode *o)
{
    Val *in[2] = {IV(m, o, 0), IV(m, o, 1)};
    int rank;
    long dims[MAX_RANK];
    if (bcast_shape(m, o, in, 2, &rank, dims))
        return -1;
    int cmp = strcmp(o->op, "Equal") == 0 || strncmp(o->op, "Less", 4) == 0 ||
              strncmp(o->op, "Greater", 7) == 0 || !strcmp(o->op, "And") ||
              !strcmp(o->op, "Or");
    DType dt = cmp ? DT_BOOL : in[0]->dt;
    int is_int = in[0]->dt != DT_F32;
    Val *y = make_out(m, o, 0, dt, rank, dims);
    if (!y)
        return -1;
    for (long k = 0; k < y->numel; k++) {
        long a = bcast_at(in[0], rank, dims, k), b = bcast_at(in[1], rank, dims, k);
        if (is_int && in[1]->dt != DT_F32 && !cmp) {
            int64_t x = in[0]->i[a], z = in[1]->i[b], r;
            /* two's complement wrap, as int64 arithmetic does in ONNX
             * runtimes, without C's signed overflow */
            if (!strcmp(o->op, "Add")) r = (int64_t)((uint64_t)x + (uint64_t)z);
            else if (!strcmp(o->op, "Sub")) r = (int64_t)((uint64_t)x - (uint64_t)z);
            else if (!strcmp(o->op, "Mul")) r = (int64_t)((uint64_t)x * (uint64_t)z);
            else {
                val_put(y, k, binary(o->op, (double)x, (double)z, 1));
                continue;
            }
            y->i[k] = r;
        } else {
            val_put(y, k, binary(o->op, val_get(in[0], a), val_get(in[1], b),
                                 is_int));
        }
    }
    return 1;
}

static double unary(const char *op, double x)
{
    if (!strcmp(op, "Neg")) return -x;
    if (!strcmp(op, "Sqrt")) return sqrt(x);
    if (!strcmp(op, "Abs")) return fabs(x);
    if (!strcmp(op, "Reciprocal")) return 1.0 / x;
    if (!strcmp(op, "Exp")) return exp(x);
    if (!strcmp(op, "Log")) return log(x);
    if (!strcmp(op, "Erf")) return erf(x);
    if (!strcmp(op, "Relu")) return x > 0 ? x : 0;
    if (!strcmp(op, "Tanh")) return tanh(x);
    if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(op, "Floor")) return floor(x);
    if (!strcmp(op, "Ceil")) return ceil(x);
    if (!strcmp(op, "Sin")) return sin(x);
    if (!strcmp(op, "Cos")) return cos(x);
    if (!strcmp(op, "Sign")) return x > 0 ? 1 : x < 0 ? -1 : x;
    if (!strcmp(op, "Not")) return x == 0;
    if (!strcmp(op, "Identity")) return x;
    return NAN;
}

static const char *const unary_ops[] = {
    "Neg", "Sqrt", "Abs", "Reciprocal", "Exp", "Log", "Erf", "Relu", "Tanh",
    "Sigmoid", "Floor", "Ceil", "Not", "Identity", "Sin", "Cos", "Sign", NULL};

static int fold_unary(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    Val *y = make_out(m, o, 0, x->dt, x->rank, x->dims);
    if (!y)
        return -1;
    for (long k = 0; k < y->numel; k++) {
        if (x->dt != DT_F32 && !strcmp(o->op, "Neg"))
            y->i[k] = -x->i[k];
        else if (x->dt != DT_F32 && !strcmp(o->op, "Identity"))
            y->i[k] = x->i[k];
        else
            val_put(y, k, unary(o->op, val_get(x, k)));
    }
    return 1;
}

/* ---- shape ops ---------------------------------------------------------------- */

static Val *ints_out(Im *m, ONode *o, int i, long n)
{
    long d[1] = {n};
    return make_out(m, o, i, DT_I64, 1, d);
}

static int fold_shape(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    if (!x->shaped)
        return 0;
    long start = onnx_attr_int(o, "start", 0), end = onnx_attr_int(o, "end",
                                                                   x->rank);
    if (start < 0) start += x->rank;
    if (end < 0) end += x->rank;
    if (start < 0) start = 0;
    if (end > x->rank) end = x->rank;
    if (end < start) end = start;
    Val *y;
    if (!strcmp(o->op, "Size")) {
        if (!(y = make_out(m, o, 0, DT_I64, 0, NULL)))
            return -1;
        y->i[0] = x->numel;
        return 1;
    }
    if (!(y = ints_out(m, o, 0, end - start)))
        return -1;
    for (long d = start; d < end; d++)
        y->i[d - start] = x->dims[d];
    return 1;
}

/* ReduceProd of a constant over every axis: torch's x.var() and x.std()
 * count the reduced elements as ReduceProd(Gather(Shape(x))), static.
 * The product over some axes only is left to the refusal. */
static int fold_reduce_prod(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    const Onnx__AttributeProto *a = onnx_attr(o, "axes");
    int all = x->rank <= 1 || (!a && (o->nin < 2 || o->in[1] < 0));
    if (!all)
        return 0;
    long ones[MAX_RANK];
    int keep = onnx_attr_int(o, "keepdims", 1) != 0;
    for (int d = 0; d < x->rank; d++)
        ones[d] = 1;
    Val *y = make_out(m, o, 0, x->dt, keep ? x->rank : 0, ones);
    if (!y)
        return -1;
    double p = 1.0;
    int64_t q = 1;
    for (long k = 0; k < x->numel; k++) {
        if (x->dt == DT_F32)
            p *= x->f[k];
        else if (__builtin_mul_overflow(q, x->i[k], &q))
            return fold_error(m, o, "the product of the int64 constant's "
                              "entries passes 2^63");
    }
    if (x->dt == DT_F32)
        y->f[0] = (float)p;
    else
        y->i[0] = q;
    return 1;
}

/* A constant 1-D int input as longs; -1 on a bad one. */
static int ints_of(Im *m, ONode *o, const Val *x, long *out, int max)
{
    if (x->rank > 1 || x->numel > max || x->dt == DT_F32)
        return fold_error(m, o, ctx_printf(m->c, "'%s' must be a 1-D int64 "
                                           "tensor of at most %d values",
                                           x->name, max));
    for (long k = 0; k < x->numel; k++)
        out[k] = (long)x->i[k];
    return (int)x->numel;
}

static int fold_constant(Im *m, ONode *o)
{
    const Onnx__AttributeProto *a = NULL;
    for (size_t k = 0; k < o->p->n_attribute && !a; k++)
        a = o->p->attribute[k];
    if (!a)
        return fold_error(m, o, "Constant has no value attribute");
    Val *y;
    const char *n = a->name;
    if (!strcmp(n, "value") && a->t) {
        int dt = a->t->has_data_type ? dtype_of(a->t->data_type) : -1;
        if (dt < 0)
            return fold_error(m, o, ctx_printf(m->c, "Constant of dtype %s; "
                "remat takes float32, int64, int32 and bool constants",
                onnx_dtype_name(a->t->data_type)));
        y = &m->v[o->out[0]];
        y->dt = dt;
        if (val_set_shape(m, y, (int)a->t->n_dims, a->t->dims, o->what) ||
            tensor_values(m, a->t, y))
            return -1;
        y->shaped = 1;
        return 1;
    }
    long one = 1;
    if (!strcmp(n, "value_float") || !strcmp(n, "value_int")) {
        int f = n[6] == 'f';
        if (!(y = make_out(m, o, 0, f ? DT_F32 : DT_I64, 0, NULL)))
            return -1;
        val_put(y, 0, f ? a->f : (double)a->i);
        if (!f)
            y->i[0] = a->i;
        return 1;
    }
    if (!strcmp(n, "value_floats") || !strcmp(n, "value_ints")) {
        int f = n[6] == 'f';
        one = f ? (long)a->n_floats : (long)a->n_ints;
        if (!(y = make_out(m, o, 0, f ? DT_F32 : DT_I64, 1, &one)))
            return -1;
        for (long k = 0; k < one; k++) {
            if (f)
                y->f[k] = a->floats[k];
            else
                y->i[k] = a->ints[k];
        }
        return 1;
    }
    return fold_error(m, o, ctx_printf(m->c, "Constant's '%s' is not "
                                       "supported; use value, value_float(s) "
                                       "or value_int(s)", n));
}

static int fold_cast(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    int to = (int)onnx_attr_int(o, "to", 1);
    int dt = dtype_of(to);
    if (dt < 0)
        return fold_error(m, o, ctx_printf(m->c, "Cast to %s; remat holds "
                                           "float32, int64 and bool",
                                           onnx_dtype_name(to)));
    Val *y = make_out(m, o, 0, dt, x->rank, x->dims);
    if (!y)
        return -1;
    for (long k = 0; k < y->numel; k++) {
        if (dt == DT_BOOL)
            y->i[k] = val_get(x, k) != 0;
        else if (dt == DT_I64 && x->dt != DT_F32)
            y->i[k] = x->i[k];
        else if (dt == DT_I64)
            y->i[k] = to_i64(x->f[k]);
        else
            y->f[k] = (float)val_get(x, k);
    }
    return 1;
}

/* Copies x into y with dims only changed (Reshape, Unsqueeze, ...). */
static int same_data(Im *m, ONode *o, const Val *x, int rank, const long *dims)
{
    Val *y = make_out(m, o, 0, x->dt, rank, dims);
    if (!y)
        return -1;
    if (y->numel != x->numel)
        return fold_error(m, o, "the new shape does not hold the input's "
                          "elements");
    for (long k = 0; k < x->numel; k++) {
        if (x->dt == DT_F32)
            y->f[k] = x->f[k];
        else
            y->i[k] = x->i[k];
    }
    return 1;
}

static int fold_reshape(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    long s[MAX_RANK];
    int r = ints_of(m, o, IV(m, o, 1), s, MAX_RANK);
    if (r < 0)
        return -1;
    long known = 1;
    int infer = -1;
    for (int d = 0; d < r; d++) {
        if (s[d] == 0 && !onnx_attr_int(o, "allowzero", 0))
            s[d] = d < x->rank ? x->dims[d] : 1;
        if (s[d] < -1 || s[d] > MAX_NUMEL ||
            (s[d] > 0 && known > MAX_NUMEL / s[d]))
            return fold_error(m, o, "a shape entry is below -1, or the "
                              "shape holds more elements than a tensor may");
        if (s[d] == -1)
            infer = d;
        else
            known *= s[d];
    }
    if (infer >= 0)
        s[infer] = known ? x->numel / known : 0;
    return same_data(m, o, x, r, s);
}

static int norm_axes(Im *m, ONode *o, long *ax, int n, int rank)
{
    for (int k = 0; k < n; k++) {
        if (ax[k] < 0)
            ax[k] += rank;
        if (ax[k] < 0 || ax[k] >= rank)
            return fold_error(m, o, "an axis is out of range");
    }
    return 0;
}

static int fold_unsqueeze(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    long ax[MAX_RANK];
    int n;
    const Onnx__AttributeProto *a = onnx_attr(o, "axes");
    if (IV(m, o, 1))
        n = ints_of(m, o, IV(m, o, 1), ax, MAX_RANK);
    else {
        n = a ? (int)a->n_ints : 0;
        for (int k = 0; k < n && k < MAX_RANK; k++)
            ax[k] = (long)a->ints[k];
    }
    int sq = !strcmp(o->op, "Squeeze");
    if (n < 0)
        return -1;
    if (n > MAX_RANK || (!IV(m, o, 1) && a && (int)a->n_ints > MAX_RANK))
        return fold_error(m, o, ctx_printf(m->c, "axes lists more than %d "
                                           "values", MAX_RANK));
    int rank = sq ? x->rank : x->rank + n;
    if (rank > MAX_RANK)
        return fold_error(m, o, ctx_printf(m->c, "the result would have rank "
                                           "%d; remat takes at most %d", rank,
                                           MAX_RANK));
    if (norm_axes(m, o, ax, n, rank))
        return -1;
    long dims[MAX_RANK];
    int r = 0, src = 0;
    for (int d = 0; d < rank; d++) {
        int hit = 0;
        for (int k = 0; k < n; k++)
            hit |= ax[k] == d;
        if (sq) {
            if ((n ? hit : x->dims[d] == 1))
                continue;
            dims[r++] = x->dims[d];
        } else
            dims[r++] = hit ? 1 : x->dims[src++];
    }
    return same_data(m, o, x, r, dims);
}

static int fold_flatten(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    long axis = onnx_attr_int(o, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return fold_error(m, o, "Flatten's axis is out of range");
    long d[2] = {1, 1};
    for (int k = 0; k < x->rank; k++)
        d[k >= axis] *= x->dims[k];
    return same_data(m, o, x, 2, d);
}

static int fold_gather(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0), *ix = IV(m, o, 1);
    long axis = onnx_attr_int(o, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank || x->rank + ix->rank - 1 > MAX_RANK)
        return fold_error(m, o, "Gather's axis is out of range");
    long dims[MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++)
        dims[r++] = x->dims[d];
    for (int d = 0; d < ix->rank; d++)
        dims[r++] = ix->dims[d];
    for (int d = (int)axis + 1; d < x->rank; d++)
        dims[r++] = x->dims[d];
    Val *y = make_out(m, o, 0, x->dt, r, dims);
    if (!y)
        return -1;
    long outer = 1, inner = 1, n = x->dims[axis];
    for (int d = 0; d < axis; d++)
        outer *= x->dims[d];
    for (int d = (int)axis + 1; d < x->rank; d++)
        inner *= x->dims[d];
    long k = 0;
    for (long a = 0; a < outer; a++)
        for (long j = 0; j < ix->numel; j++) {
            int64_t i = val_geti(ix, j);
            if (i < 0)
                i += n;
            if (i < 0 || i >= n)
                return fold_error(m, o, "an index is out of range");
            for (long b = 0; b < inner; b++, k++) {
                long s = (a * n + i) * inner + b;
                if (x->dt == DT_F32)
                    y->f[k] = x->f[s];
                else
                    y->i[k] = x->i[s];
            }
        }
    return 1;
}

static int fold_concat(Im *m, ONode *o)
{
    Val *x0 = IV(m, o, 0);
    long axis = onnx_attr_int(o, "axis", 0);
    if (axis < 0)
        axis += x0->rank;
    if (axis < 0 || axis >= x0->rank)
        return fold_error(m, o, "Concat's axis is out of range");
    long dims[MAX_RANK];
    memcpy(dims, x0->dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < o->nin; i++) {
        Val *x = IV(m, o, i);
        if (!x || x->rank != x0->rank || x->dt != x0->dt)
            return fold_error(m, o, "Concat's inputs differ in rank or dtype");
        for (int d = 0; d < x->rank; d++)
            if (d != axis && x->dims[d] != x0->dims[d])
                return fold_error(m, o, "Concat's inputs differ in a "
                                  "dimension other than the axis");
        dims[axis] += x->dims[axis];
    }
    Val *y = make_out(m, o, 0, x0->dt, x0->rank, dims);
    if (!y)
        return -1;
    long outer = 1;
    for (int d = 0; d < axis; d++)
        outer *= dims[d];
    long k = 0;
    for (long a = 0; a < outer; a++)
        for (int i = 0; i < o->nin; i++) {
            Val *x = IV(m, o, i);
            long chunk = x->numel / (outer ? outer : 1);
            for (long b = 0; b < chunk; b++, k++) {
                if (y->dt == DT_F32)
                    y->f[k] = (float)val_get(x, a * chunk + b);
                else
                    y->i[k] = val_geti(x, a * chunk + b);
            }
        }
    return 1;
}

static int fold_slice(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    long st[MAX_RANK], en[MAX_RANK], ax[MAX_RANK], sp[MAX_RANK];
    int n = ints_of(m, o, IV(m, o, 1), st, MAX_RANK);
    int ne = n < 0 ? -1 : ints_of(m, o, IV(m, o, 2), en, MAX_RANK);
    if (n < 0 || ne < 0)
        return -1;
    for (int k = 0; k < n; k++) {
        ax[k] = k;
        sp[k] = 1;
    }
    int na = IV(m, o, 3) ? ints_of(m, o, IV(m, o, 3), ax, MAX_RANK) : n;
    int ns = IV(m, o, 4) ? ints_of(m, o, IV(m, o, 4), sp, MAX_RANK) : n;
    if (na < 0 || ns < 0)
        return -1;
    if (ne != n || na != n || ns != n)
        return fold_error(m, o, ctx_printf(m->c, "starts has %d values, ends "
                          "%d, axes %d and steps %d; they must be as many",
                          n, ne, na, ns));
    if (norm_axes(m, o, ax, n, x->rank))
        return -1;
    long first[MAX_RANK], step[MAX_RANK], dims[MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        first[d] = 0;
        step[d] = 1;
        dims[d] = x->dims[d];
    }
    for (int k = 0; k < n; k++) {
        if (sp[k] == 0)
            return fold_error(m, o, "a Slice step is 0");
        step[ax[k]] = sp[k];
        slice_axis(x->dims[ax[k]], st[k], en[k], sp[k], &first[ax[k]],
                   &dims[ax[k]]);
    }
    Val *y = make_out(m, o, 0, x->dt, x->rank, dims);
    if (!y)
        return -1;
    for (long k = 0; k < y->numel; k++) {
        long r = k, src = 0, stride = 1;
        for (int d = x->rank - 1; d >= 0; d--) {
            long c = r % dims[d];
            r /= dims[d];
            src += (first[d] + c * step[d]) * stride;
            stride *= x->dims[d];
        }
        if (x->dt == DT_F32)
            y->f[k] = x->f[src];
        else
            y->i[k] = x->i[src];
    }
    return 1;
}

/* Split of a constant (issue 25: torch's repeat_interleave splits a
 * constant of repeats): the sizes from input 1 (opset 13 on) or the
 * attribute, else as many equal parts as outputs, the last one smaller
 * when they do not divide (opset 18's num_outputs). */
static int fold_split(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    long axis = onnx_attr_int(o, "axis", 0), sizes[MAX_IO];
    if (x->rank == 0)
        return fold_error(m, o, "Split of a scalar; it needs a dimension");
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return fold_error(m, o, "Split's axis is out of range");
    if (o->nout > MAX_IO)
        return fold_error(m, o, ctx_printf(m->c, "Split has %d outputs; "
                                           "remat takes at most %d", o->nout,
                                           MAX_IO));
    const Onnx__AttributeProto *a = onnx_attr(o, "split");
    int n = o->nout;
    if (IV(m, o, 1)) {
        n = ints_of(m, o, IV(m, o, 1), sizes, MAX_IO);
        if (n < 0)
            return -1;
    } else if (a) {
        if ((int)a->n_ints != o->nout)
            return fold_error(m, o, "Split's split lists a size per output");
        for (int k = 0; k < n; k++)
            sizes[k] = (long)a->ints[k];
    } else {
        long whole = x->dims[axis], part = n ? (whole + n - 1) / n : 0;
        if (m->opset < 18 && n && whole % n)
            return fold_error(m, o, ctx_printf(m->c, "Split cannot cut an "
                "axis of %ld into %d equal parts; before opset 18 they must "
                "divide it", whole, n));
        for (int k = 0; k < n; k++)
            sizes[k] = whole - part * k < part ? whole - part * k : part;
    }
    long sum = 0;
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 0 || sizes[k] > x->dims[axis])
            return fold_error(m, o, "Split's sizes must be in [0, the axis's "
                              "extent]");
        sum += sizes[k];
    }
    if (n != o->nout || sum != x->dims[axis])
        return fold_error(m, o, ctx_printf(m->c, "Split's %d sizes must be "
            "one per output (%d) and add up to the axis's extent %ld", n,
            o->nout, x->dims[axis]));
    long outer = 1, inner = 1, first = 0;
    for (int d = 0; d < axis; d++)
        outer *= x->dims[d];
    for (int d = (int)axis + 1; d < x->rank; d++)
        inner *= x->dims[d];
    for (int k = 0; k < n; k++) {
        long dims[MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[k];
        if (o->out[k] < 0) {    /* an output left out: nothing to keep */
            first += sizes[k];
            continue;
        }
        Val *y = make_out(m, o, k, x->dt, x->rank, dims);
        if (!y)
            return -1;
        long at = 0;
        for (long p = 0; p < outer; p++)
            for (long i = 0; i < sizes[k] * inner; i++, at++) {
                long src = (p * x->dims[axis] + first) * inner + i;
                if (x->dt == DT_F32)
                    y->f[at] = x->f[src];
                else
                    y->i[at] = x->i[src];
            }
        first += sizes[k];
    }
    return 1;
}

static int fold_where(Im *m, ONode *o)
{
    Val *in[3] = {IV(m, o, 0), IV(m, o, 1), IV(m, o, 2)};
    int rank;
    long dims[MAX_RANK];
    if ((in[1]->dt == DT_F32) != (in[2]->dt == DT_F32))
        return fold_error(m, o, "Where's X and Y differ in dtype");
    if (bcast_shape(m, o, in, 3, &rank, dims))
        return -1;
    Val *y = make_out(m, o, 0, in[1]->dt, rank, dims);
    if (!y)
        return -1;
    for (long k = 0; k < y->numel; k++) {
        int c = val_get(in[0], bcast_at(in[0], rank, dims, k)) != 0;
        Val *s = in[c ? 1 : 2];
        long at = bcast_at(s, rank, dims, k);
        if (y->dt == DT_F32)
            y->f[k] = s->f[at];
        else
            y->i[k] = s->i[at];
    }
    return 1;
}

static int fold_expand(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    long s[MAX_RANK];
    int r = ints_of(m, o, IV(m, o, 1), s, MAX_RANK);
    if (r < 0)
        return -1;
    Val shape = {0};
    shape.rank = r;
    for (int d = 0; d < r; d++)
        shape.dims[d] = s[d];
    Val *in[2] = {x, &shape};
    int rank;
    long dims[MAX_RANK];
    if (bcast_shape(m, o, in, 2, &rank, dims))
        return -1;
    Val *y = make_out(m, o, 0, x->dt, rank, dims);
    if (!y)
        return -1;
    for (long k = 0; k < y->numel; k++) {
        long at = bcast_at(x, rank, dims, k);
        if (x->dt == DT_F32)
            y->f[k] = x->f[at];
        else
            y->i[k] = x->i[at];
    }
    return 1;
}

static int fold_constant_of_shape(Im *m, ONode *o)
{
    long s[MAX_RANK];
    int r = ints_of(m, o, IV(m, o, 0), s, MAX_RANK);
    if (r < 0)
        return -1;
    const Onnx__AttributeProto *a = onnx_attr(o, "value");
    Val fill = {0};
    fill.dt = DT_F32;
    float zero = 0;
    fill.f = &zero;
    if (a && a->t) {
        fill.name = "value";
        fill.dt = dtype_of(a->t->data_type);
        fill.numel = 1;
        if ((int)fill.dt < 0 || tensor_values(m, a->t, &fill))
            return fold_error(m, o, "ConstantOfShape's value must be one "
                              "float32, int64 or bool");
    }
    Val *y = make_out(m, o, 0, fill.dt, r, s);
    if (!y)
        return -1;
    for (long k = 0; k < y->numel; k++) {
        if (y->dt == DT_F32)
            y->f[k] = fill.f[0];
        else
            y->i[k] = fill.i[0];
    }
    return 1;
}

static int fold_range(Im *m, ONode *o)
{
    Val *a = IV(m, o, 0), *b = IV(m, o, 1), *d = IV(m, o, 2);
    double start = val_get(a, 0), limit = val_get(b, 0), delta = val_get(d, 0);
    if (delta == 0)
        return fold_error(m, o, "Range's delta is 0");
    double n = ceil((limit - start) / delta);
    /* past MAX_NUMEL make_out refuses it; a larger double is no long */
    long count = n > 0 ? (n > (double)MAX_NUMEL ? MAX_NUMEL + 1 : (long)n) : 0;
    Val *y = make_out(m, o, 0, a->dt == DT_F32 ? DT_F32 : DT_I64, 1, &count);
    if (!y)
        return -1;
    for (long k = 0; k < count; k++) {
        if (y->dt == DT_F32)
            y->f[k] = (float)(start + (double)k * delta);
        else
            y->i[k] = val_geti(a, 0) + k * val_geti(d, 0);
    }
    return 1;
}

static int fold_transpose(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    const Onnx__AttributeProto *a = onnx_attr(o, "perm");
    long perm[MAX_RANK], dims[MAX_RANK];
    int seen[MAX_RANK] = {0};
    if (a && (int)a->n_ints != x->rank)
        return fold_error(m, o, "Transpose's perm must name every dimension "
                          "once");
    for (int d = 0; d < x->rank; d++) {
        perm[d] = a ? (long)a->ints[d] : x->rank - 1 - d;
        if (perm[d] < 0 || perm[d] >= x->rank || seen[perm[d]]++)
            return fold_error(m, o, "Transpose's perm must name every "
                              "dimension once");
        dims[d] = x->dims[perm[d]];
    }
    Val *y = make_out(m, o, 0, x->dt, x->rank, dims);
    if (!y)
        return -1;
    long xs[MAX_RANK];
    long st = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        xs[d] = st;
        st *= x->dims[d];
    }
    for (long k = 0; k < y->numel; k++) {
        long r = k, src = 0;
        for (int d = x->rank - 1; d >= 0; d--) {
            src += (r % dims[d]) * xs[perm[d]];
            r /= dims[d];
        }
        if (x->dt == DT_F32)
            y->f[k] = x->f[src];
        else
            y->i[k] = x->i[src];
    }
    return 1;
}

static int fold_trilu(Im *m, ONode *o)
{
    Val *x = IV(m, o, 0);
    long kk = IV(m, o, 1) ? (long)val_geti(IV(m, o, 1), 0) : 0;
    int upper = (int)onnx_attr_int(o, "upper", 1);
    if (x->rank < 2)
        return fold_error(m, o, "Trilu needs rank 2 or more");
    Val *y = make_out(m, o, 0, x->dt, x->rank, x->dims);
    if (!y)
        return -1;
    long r = x->dims[x->rank - 2], c = x->dims[x->rank - 1];
    for (long k = 0; k < y->numel; k++) {
        long j = k % c, i = (k / c) % r;
        int keep = upper ? j - i >= kk : j - i <= kk;
        if (x->dt == DT_F32)
            y->f[k] = keep ? x->f[k] : 0.0f;
        else
            y->i[k] = keep ? x->i[k] : 0;
    }
    return 1;
}

static void count_fold(Im *m, const char *op)
{
    m->nfolded++;
    for (int k = 0; k < m->nfold_ops; k++)
        if (!strcmp(m->fold_ops[k], op)) {
            m->fold_counts[k]++;
            return;
        }
    if (m->nfold_ops < 64) {
        m->fold_ops[m->nfold_ops] = op;
        m->fold_counts[m->nfold_ops++] = 1;
    }
}

/* The folds by op name; binary_ops and unary_ops fold arithmetic too. */
static const struct {
    const char *op;
    int (*fn)(Im *, ONode *);
    int need;               /* inputs that must be known (bits) */
} folds[] = {
    {"Constant", fold_constant, 0}, {"Shape", fold_shape, 0},
    {"Size", fold_shape, 0}, {"Cast", fold_cast, 1},
    {"Reshape", fold_reshape, 3}, {"Unsqueeze", fold_unsqueeze, 1},
    {"Squeeze", fold_unsqueeze, 1}, {"Flatten", fold_flatten, 1},
    {"Gather", fold_gather, 3}, {"Concat", fold_concat, -1},
    {"Slice", fold_slice, -1}, {"Where", fold_where, 7},
    {"Expand", fold_expand, 3}, {"ConstantOfShape", fold_constant_of_shape, 1},
    {"Range", fold_range, 7}, {"Transpose", fold_transpose, 1},
    {"Trilu", fold_trilu, -1}, {"ReduceProd", fold_reduce_prod, 1},
    {"Split", fold_split, 3},
};

/* How the importer takes a folded op the op table lacks when an input is
 * computed (onnx_lower.c), or NULL: it is then refused. */
static const char *computed_as(const char *op)
{
    if (!strcmp(op, "Cast"))
        return "on a computed tensor, only to its own type (an Identity)";
    if (!strcmp(op, "Trilu"))
        return "on a computed float tensor, a Mul by its 0/1 mask";
    return NULL;
}

static int add_folded(const char *op, const char **names, const char **notes,
                      int n, int max)
{
    if (op_lookup(op) >= 0 || n >= max)
        return n;
    for (int k = 0; k < n; k++)
        if (!strcmp(names[k], op))
            return n;
    names[n] = op;
    notes[n] = computed_as(op);
    return n + 1;
}

int onnx_folded_ops(const char **names, const char **notes, int max)
{
    int n = 0;
    for (size_t k = 0; k < sizeof folds / sizeof *folds; k++)
        n = add_folded(folds[k].op, names, notes, n, max);
    for (int k = 0; binary_ops[k]; k++)
        n = add_folded(binary_ops[k], names, notes, n, max);
    for (int k = 0; unary_ops[k]; k++)
        n = add_folded(unary_ops[k], names, notes, n, max);
    return n;
}

int onnx_fold(Im *m, ONode *o)
{
    int (*fn)(Im *, ONode *) = NULL;
    int need = -1;
    for (size_t k = 0; k < sizeof folds / sizeof *folds; k++)
        if (!strcmp(o->op, folds[k].op)) {
            fn = folds[k].fn;
            need = folds[k].need;
        }
    if (!fn && is_in(o->op, binary_ops) && o->nin == 2)
        fn = fold_binary;
    if (!fn && is_in(o->op, unary_ops) && o->nin == 1)
        fn = fold_unary;
    if (!fn)
        return 0;
    if (o->nout < 1 || o->out[0] < 0)
        return fold_error(m, o, "has no output; every node computes one");
    /* the inputs every fold reads: the first of all, the second of
     * binary ones and of those that take a shape, indices or ends */
    int least = fn == fold_constant ? 0 : fn == fold_where || fn == fold_range
                ? 3 : fn == fold_binary || fn == fold_reshape ||
                fn == fold_gather || fn == fold_expand ? 2
                : fn == fold_slice ? 3 : 1;
    if (o->nin < least)
        return fold_error(m, o, ctx_printf(m->c, "has %d inputs; %s takes at "
                                           "least %d", o->nin, o->op, least));
    for (int i = 0; i < least; i++)
        if (o->in[i] < 0)
            return fold_error(m, o, ctx_printf(m->c, "input %d is left out; "
                                               "%s needs it", i, o->op));
    /* Shape reads only the shape; everything else needs known inputs */
    if (strcmp(o->op, "Shape") && strcmp(o->op, "Size"))
        for (int i = 0; i < o->nin; i++) {
            if (o->in[i] < 0)
                continue;
            if (((need >> i) & 1) && !m->v[o->in[i]].known)
                return 0;
        }
    else if (!m->v[o->in[0]].shaped)
        return 0;
    int rc = fn(m, o);
    if (rc == 1)
        count_fold(m, o->op);
    return rc;
}
