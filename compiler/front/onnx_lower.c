/*
 * onnx_lower.c: ONNX nodes that are not constants become IR nodes; then
 * onnx_write.c writes the IR as the format's XML.
 *
 * Lowering is one table-driven walk. Each ONNX op maps to the IR op of
 * the same name; where ONNX passes as an input what the IR takes as an
 * attribute (Reshape's shape, Slice's starts, Unsqueeze's axes, Dropout's
 * ratio, Clip's min and max), the constant input becomes that attribute. Constant data inputs
 * become non-trainable parameters (an int64 one, read with a computed
 * int64 tensor, an int64 constant: param_of); trainable initializers
 * become parameters under their own names. Optional outputs nobody reads (a
 * Dropout's mask, a LayerNormalization's mean) are dropped; one that is
 * read is an error naming it. The IR node's shape rule runs as soon as the
 * node is made, so the importer always knows every value's shape.
 *
 * Rewrites (onnx_rewrite.c), each only where the pattern matches exactly:
 *  - x/sqrt(2) -> Erf -> +1 -> *x -> *0.5 (torch's GELU), and its tanh
 *    form, become Gelu; LayerNorm spelled out becomes LayerNormalization;
 *  - Transpose(k) -> MatMul -> scale -> [causal -inf mask] -> Softmax ->
 *    MatMul over 4-D heads becomes one Attention node;
 *  - MatMul(x, Transpose(W)) for a 2-D parameter W (torch's Linear on a
 *    3-D input) becomes Gemm(x, W, transB=1) on x viewed as 2-D: no copy
 *    of W and no copy of x;
 *  - Gather with constant indices that form a range becomes a Slice (and
 *    a Reshape view for a scalar index).
 * LSTM, GRU and RNN are unrolled over their sequence, one block per time
 * step (onnx_rnn.c, which lower_node asks first about every node);
 * Einsum becomes ReduceSum, Transpose, Reshape and MatMul (onnx_rewrite.c).
 * The walk is two passes: one that folds what it can and lets the
 * patterns see the constants they compare with, then one that folds the
 * rest (a Shape needs the shape of what it reads) and lowers the others.
 *
 * Blocks (onnx_write.c, with the XML) come from what repeats: a node
 * whose name has a scope component NAME.N (torch's "/blocks.0/attn/..."),
 * or which reads a parameter named NAME.N.*, belongs to block NAME.N when
 * NAME occurs with at least two indices.
 */
#include "onnx_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- unique, valid IR names ------------------------------------------------------ */

/* The format's names are [A-Za-z_/][A-Za-z0-9_.:/-]*, at most 255 long:
 * other characters become '_', a leading digit gets a '_' before it, and a
 * clash gets _2, _3, ... */
static const char *ir_name(Im *m, NameSet *set, const char *raw)
{
    size_t n = strlen(raw);
    if (n > 200)
        n = 200;
    char *s = ctx_alloc(m->c, n + 2);
    size_t j = 0;
    if (!n || !((raw[0] >= 'A' && raw[0] <= 'Z') || (raw[0] >= 'a' &&
              raw[0] <= 'z') || raw[0] == '_' || raw[0] == '/'))
        s[j++] = '_';
    for (size_t k = 0; k < n; k++) {
        char ch = raw[k];
        int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                 (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
                 ch == ':' || ch == '/' || ch == '-';
        s[j++] = ok ? ch : '_';
    }
    s[j] = '\0';
    const char *name = s;
    for (int k = 2; nameset_has(set, name); k++)
        name = ctx_printf(m->c, "%s_%d", s, k);
    nameset_add(m->c, set, name);
    return name;
}

/* ---- IR tensors and nodes --------------------------------------------------------- */

int new_tensor(Im *m, const char *raw, TensorKind kind)
{
    Graph *g = m->g;
    assert(g->ntensors < m->tcap);
    int t = g->ntensors++;
    Tensor *x = &g->tensors[t];
    x->name = ir_name(m, &m->tensor_names, raw);
    x->cname = x->name;
    x->kind = kind;
    x->producer = -1;
    return t;
}

/* Tensor t named after raw instead (the Einsum lowering names its last
 * step's output after the ONNX value once it knows which step is last;
 * the old name stays taken). */
void rename_tensor(Im *m, int t, const char *raw)
{
    Tensor *x = &m->g->tensors[t];
    x->name = ir_name(m, &m->tensor_names, raw);
    x->cname = x->name;
}

static void copy_shape(Tensor *t, const Val *v)
{
    t->rank = v->rank;
    t->numel = v->numel;
    for (int d = 0; d < v->rank; d++)
        t->dims[d] = v->dims[d];
}

void shape_to_val(Val *v, const Tensor *t)
{
    v->rank = t->rank;
    v->numel = t->numel;
    for (int d = 0; d < t->rank; d++)
        v->dims[d] = t->dims[d];
    v->shaped = 1;
    v->dt = t->is_int ? DT_I64 : DT_F32;
}

int lower_error(Im *m, const ONode *o, const char *what)
{
    return ctx_error(m->c, m->file, 0, "%s: %s", o->what, what);
}

/* A constant or parameter value as a parameter tensor (made once; a
 * bool constant once as float32 and once as int64: as_int). */
static int param_of(Im *m, Val *v, const ONode *o, int as_int)
{
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] == 0)
            return lower_error(m, o, ctx_printf(m->c, "constant '%s' is "
                                                "empty", v->name));
    int t = new_tensor(m, v->const_name ? v->const_name : v->name, T_PARAM);
    Tensor *x = &m->g->tensors[t];
    copy_shape(x, v);
    x->trainable = v->trainable;
    x->init = INIT_FILE;
    if (v->dt == DT_I64 || as_int) {
        /* an int64 constant read with a computed int64 tensor (ids !=
         * pad_id, y + offsets), or a bool one (0/1) read where a row
         * takes int64 (tensor_read): its values as they are, a static
         * array of the C file (emit.c); the rows that read it say
         * whether int64 may go there (shapes.c) */
        x->is_int = 1;
        x->trainable = 0;
        x->idata = v->i;
        *(as_int ? &v->int_tensor : &v->tensor) = t;
        return t;
    }
    if (v->dt == DT_BOOL) {
        float *f = ctx_alloc(m->c, (size_t)(v->numel ? v->numel : 1) * sizeof(float));
        for (long k = 0; k < v->numel; k++)
            f[k] = v->i[k] ? 1.0f : 0.0f;
        x->data = f;
    } else
        x->data = v->f;
    for (long k = 0; k < v->numel && v->trainable; k++)
        if (!isfinite(x->data[k]))
            return lower_error(m, o, ctx_printf(m->c, "parameter '%s' holds "
                "a NaN or an infinity at element %ld; trainable parameters "
                "are finite", v->name, k));
    for (long k = 0; k < v->numel; k++)
        if (isnan(x->data[k]))
            return lower_error(m, o, ctx_printf(m->c, "constant '%s' holds "
                "NaN at element %ld; constants hold numbers (a mask may hold "
                "an infinity)", v->name, k));
    v->tensor = t;
    return t;
}

int tensor_of(Im *m, int vi, const ONode *o)
{
    Val *v = &m->v[vi];
    if (v->tensor >= 0)
        return v->tensor;
    if (v->known)
        return param_of(m, v, o, 0);
    return lower_error(m, o, ctx_printf(m->c, "input '%s' has no value "
                                        "remat can compute", v->name));
}

/* Value vi read as input i of a node of row op. A bool constant is an
 * int64 constant of 0s and 1s, as remat's computed bools are, where the
 * row takes int64 at that input (And, Or, Xor and Equal with a computed
 * bool, Where's condition, X and Y, Concat, the views: int_inputs, int_ok
 * or an alias row's input 0), and a float32 one of 0s and 1s elsewhere,
 * as tensor_of makes it (issue 25: causal & padding_mask). */
int tensor_read(Im *m, int vi, const ONode *o, OpKind op, int i)
{
    Val *v = &m->v[vi];
    const OpInfo *r = &op_table[op];
    int takes_int = ((r->int_inputs | r->int_ok) >> i & 1) ||
                    (r->alias && i == 0);
    if (v->dt != DT_BOOL || !v->known || !takes_int ||
        (v->tensor >= 0 && m->g->tensors[v->tensor].kind != T_PARAM))
        return tensor_of(m, vi, o);
    if (v->int_tensor >= 0)
        return v->int_tensor;
    return param_of(m, v, o, 1);
}

Node *new_node(Im *m, const char *raw, OpKind op)
{
    Graph *g = m->g;
    assert(g->nnodes < m->ncap);
    Node *n = &g->nodes[g->nnodes++];
    n->name = ir_name(m, &m->node_names, raw);
    n->cname = n->name;
    n->op = op;
    n->row = &op_table[op];
    n->block = -1;
    n->remat = REMAT_UNSET;
    const OpInfo *info = &op_table[op];
    for (int i = 0; info->attrs[i].name; i++) {
        n->attrs[i].i = info->attrs[i].i;
        n->attrs[i].f = info->attrs[i].f;
        n->attrs[i].s = info->attrs[i].s;
    }
    return n;
}

/* Output o of n: a new activation named after raw. */
int add_out(Im *m, Node *n, const char *raw)
{
    int t = new_tensor(m, raw, T_ACT);
    m->g->tensors[t].producer = (int)(n - m->g->nodes);
    n->out[n->nout++] = t;
    return t;
}

static Attr *attr_of(Node *n, const char *name)
{
    int k = attr_index(&op_table[n->op], name);
    return k < 0 ? NULL : &n->attrs[k];
}

void set_ints(Node *n, const char *name, const long *v, int count)
{
    Attr *a = attr_of(n, name);
    assert(a && count <= MAX_INTS);
    a->set = 1;
    a->nints = count;
    for (int k = 0; k < count; k++)
        a->ints[k] = v[k];
}

void set_int(Node *n, const char *name, long v)
{
    Attr *a = attr_of(n, name);
    assert(a);
    a->set = 1;
    a->i = v;
}

/* Runs the new node's shape rule and records its outputs' shapes. */
int finish_node(Im *m, Node *n, const ONode *o)
{
    Graph *g = m->g;
    const OpInfo *info = &op_table[n->op];
    for (int i = 0; i < n->nin; i++)
        g->tensors[n->in[i]].nconsumers++;
    if (node_dtypes(m->c, g, n) || info->shape(m->c, g, n)) {
        /* the rule's message names the IR node; say which ONNX node */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", m->c->err);
        const char *tail = strstr(msg, ": node '");
        return ctx_error(m->c, m->file, 0, "%s: %s", o->what,
                         tail ? strchr(tail + 8, '\'') + 3 : msg);
    }
    return 0;
}

/* ---- attributes -------------------------------------------------------------------- */

/* ONNX attributes the IR's row does not have, accepted at these values. */
static int ignorable(const ONode *o, const Onnx__AttributeProto *a)
{
    if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && a->i == 0)
        return 1;
    if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING &&
        a->s.len == 6 && !memcmp(a->s.data, "NOTSET", 6))
        return 1;
    static const char *const any[][2] = {
        {"LayerNormalization", "stash_type"}, {"Dropout", "seed"},
        {"BatchNormalization", "training_mode"}, {"Split", "num_outputs"},
        {"Pad", "value"},   /* before opset 11: read by pad_inputs */
        /* Resize's extrapolation value acts only in tf_crop_and_resize,
         * which remat refuses */
        {"Resize", "extrapolation_value"},
    };
    for (size_t k = 0; k < sizeof any / sizeof *any; k++)
        if (!strcmp(o->op, any[k][0]) && !strcmp(a->name, any[k][1]))
            return 1;
    if (!strcmp(a->name, "stash_type") && a->i == 1)
        return 1;
    if (!strcmp(o->op, "Resize") && !strcmp(a->name, "keep_aspect_ratio_policy")
        && a->s.len == 7 && !memcmp(a->s.data, "stretch", 7))
        return 1;
    return 0;
}

static int copy_attrs(Im *m, const ONode *o, Node *n)
{
    const OpInfo *info = &op_table[n->op];
    for (size_t k = 0; o->p && k < o->p->n_attribute; k++) {
        const Onnx__AttributeProto *a = o->p->attribute[k];
        int idx = attr_index(info, a->name);
        if (idx < 0) {
            if (ignorable(o, a))
                continue;
            Buf b;
            buf_init(&b, m->c);
            for (int j = 0; info->attrs[j].name; j++)
                buf_printf(&b, "%s%s", j ? ", " : "", info->attrs[j].name);
            return lower_error(m, o, ctx_printf(m->c, "attribute '%s'%s is "
                "not supported; remat's %s takes %s", a->name,
                a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT
                    ? ctx_printf(m->c, " = %lld", (long long)a->i) : "",
                info->name, b.len ? b.data : "no attributes"));
        }
        const AttrSpec *s = &info->attrs[idx];
        Attr *t = &n->attrs[idx];
        t->set = 1;
        switch (s->type) {
        case ATTR_INT: t->i = (long)a->i; break;
        case ATTR_FLOAT: t->f = a->f; break;
        case ATTR_INTS:
            if (a->n_ints > MAX_INTS)
                return lower_error(m, o, ctx_printf(m->c, "attribute '%s' "
                    "has %zu values; remat takes at most %d", a->name,
                    a->n_ints, MAX_INTS));
            t->nints = (int)a->n_ints;
            for (size_t j = 0; j < a->n_ints; j++)
                t->ints[j] = (long)a->ints[j];
            break;
        case ATTR_STRING: {
            /* An empty string's data may be NULL, which memcpy must not
               be given even for no bytes. */
            char *v = ctx_alloc(m->c, a->s.len + 1);
            if (a->s.len)
                memcpy(v, a->s.data, a->s.len);
            t->s = v;
            int ok = !s->choices;
            for (int j = 0; s->choices && s->choices[j]; j++)
                ok |= !strcmp(s->choices[j], v);
            if (!ok)
                return lower_error(m, o, ctx_printf(m->c, "attribute %s="
                    "\"%s\" is not supported; remat takes %s", a->name, v,
                    attr_choices(m->c, s)));
            break;
        }
        }
    }
    return 0;
}

/* A constant int input as an ints attribute. */
static int ints_input(Im *m, const ONode *o, int i, Node *n, const char *attr)
{
    if (i >= o->nin || o->in[i] < 0)
        return 0;
    const Val *v = &m->v[o->in[i]];
    if (!v->known || v->dt == DT_F32 || v->rank > 1 || v->numel > MAX_INTS)
        return lower_error(m, o, ctx_printf(m->c, "input %d '%s' must be a "
            "constant 1-D int64 tensor of at most %d values (remat compiles "
            "static shapes)", i, v->name, MAX_INTS));
    long vals[MAX_INTS];
    for (long k = 0; k < v->numel; k++)
        vals[k] = (long)v->i[k];
    set_ints(n, attr, vals, (int)v->numel);
    return 0;
}

/* Clip's bounds (inputs 1 and 2 since opset 11) as its float attributes
 * min and max: each a constant float32 scalar. One left out, -inf as min
 * or +inf as max is no bound (the attribute stays unset, its default an
 * infinity, so the XML remat import writes never holds one). */
static int clip_bounds(Im *m, const ONode *o, Node *n)
{
    static const char *const names[2] = {"min", "max"};
    for (int i = 1; i <= 2 && i < o->nin; i++) {
        if (o->in[i] < 0)
            continue;
        const Val *v = &m->v[o->in[i]];
        if (!v->known || v->dt != DT_F32 || v->numel != 1)
            return lower_error(m, o, ctx_printf(m->c, "input %d '%s' (%s) "
                "must be a constant float32 scalar: remat's Clip takes its "
                "bounds as attributes, fixed when it compiles", i, v->name,
                names[i - 1]));
        const float f = v->f[0];
        if (i == 1 ? f == -INFINITY : f == INFINITY)
            continue;
        if (!isfinite(f))
            return lower_error(m, o, ctx_printf(m->c, "input %d '%s' (%s) is "
                "%g; a bound must be finite, or %sinf for none", i, v->name,
                names[i - 1], (double)f, i == 1 ? "-" : "+"));
        Attr *a = attr_of(n, names[i - 1]);
        a->set = 1;
        a->f = f;
    }
    return 0;
}

/* Pad's constant_value (input 2 since opset 11, the attribute `value`
 * before) and axes (input 3, opset 18) as its attributes; pads (input 1)
 * is folded by the Lowering table. Each must be a constant. */
static int pad_inputs(Im *m, const ONode *o, Node *n)
{
    float value = 0.0f;
    int given = 0;
    const Onnx__AttributeProto *va = onnx_attr(o, "value");
    if (va && va->has_f) {
        value = va->f;
        given = 1;
    }
    if (o->nin > 2 && o->in[2] >= 0) {
        const Val *v = &m->v[o->in[2]];
        if (!v->known || v->dt != DT_F32 || v->numel != 1)
            return lower_error(m, o, ctx_printf(m->c, "input 2 '%s' "
                "(constant_value) must be a constant float32 scalar: remat's "
                "Pad takes it as an attribute, fixed when it compiles",
                v->name));
        value = v->f[0];
        given = 1;
    }
    if (given) {
        if (isnan(value))
            return lower_error(m, o, "constant_value is NaN; remat pads with "
                               "a number or an infinity");
        Attr *a = attr_of(n, "constant_value");
        a->set = 1;
        a->f = value;
    }
    return ints_input(m, o, 3, n, "axes");
}

int apply_fold_pads(Im *m, const ONode *o, Node *n)
{
    if (!o->nfold_pads)
        return 0;
    Attr *a = attr_of(n, "pads");
    if (!a->set || !a->nints) {
        a->set = 1;
        a->nints = o->nfold_pads;
        for (int i = 0; i < a->nints; i++)
            a->ints[i] = 0;
    }
    if (a->nints != o->nfold_pads)
        return lower_error(m, o, ctx_printf(m->c, "pads has %d values; with "
            "the Pad before it folded in it needs %d", a->nints,
            o->nfold_pads));
    for (int i = 0; i < a->nints; i++)
        a->ints[i] += o->fold_pads[i];
    if (n->op == OP_AVERAGE_POOL)
        set_int(n, "count_include_pad", 1);
    return 0;
}

/* Resize's output shape (issue 25): from its constant sizes input (3), or
 * its constant scales input (2), as the IR's `sizes` attribute (each
 * floor(in * scale) for scales); given scales are also kept, as the
 * attribute `scales`, since ONNX's coordinates read them. The roi input
 * (1) matters only in tf_crop_and_resize, which remat refuses. */
static int resize_sizes(Im *m, const ONode *o, Node *n)
{
    const Tensor *x = &m->g->tensors[n->in[0]];
    const int up = !strcmp(o->op, "Upsample");
    if (m->opset < (up ? 9 : 11))
        return lower_error(m, o, ctx_printf(m->c, "%s at opset %ld is not "
            "supported; export at opset %d or later", o->op, m->opset,
            up ? 9 : 11));
    const Val *sz = !up && o->nin > 3 && o->in[3] >= 0 ? &m->v[o->in[3]]
                                                       : NULL;
    const int si = up ? 1 : 2;
    const Val *sc = o->nin > si && o->in[si] >= 0 ? &m->v[o->in[si]] : NULL;
    if (sz && sz->known && sz->numel == 0)
        sz = NULL;
    if (sc && sc->known && sc->numel == 0)
        sc = NULL;
    const Val *v = sz ? sz : sc;
    if (!v || !v->known)
        return lower_error(m, o, ctx_printf(m->c, "input %d '%s' (%s) must be "
            "a constant: remat compiles static shapes", sz ? 3 : si,
            v ? v->name : "", sz ? "sizes" : "scales"));
    if (v->numel != x->rank || (sz && sz->dt == DT_F32) ||
        (!sz && sc->dt != DT_F32))
        return lower_error(m, o, ctx_printf(m->c, "%s '%s' must be %d %s "
            "values, one per axis of input '%s' of shape %s", sz ? "sizes"
            : "scales", v->name, x->rank, sz ? "int64" : "float32", x->name,
            shape_str(m->c, x)));
    long out[MAX_RANK] = {0};
    Buf b;
    buf_init(&b, m->c);
    for (int a = 0; a < x->rank; a++) {
        if (sz) {
            out[a] = (long)sz->i[a];
            continue;
        }
        const double f = sc->f[a];
        if (!(f > 0) || !isfinite(f) || floor((double)x->dims[a] * f) < 1 ||
            floor((double)x->dims[a] * f) > 1e9)
            return lower_error(m, o, ctx_printf(m->c, "scales '%s' has %g "
                "for axis %d of %ld elements; a scale must be positive and "
                "leave at least one element", sc->name, f, a, x->dims[a]));
        out[a] = (long)floor((double)x->dims[a] * f);
        buf_printf(&b, "%s%.9g", a ? " " : "", f);
    }
    set_ints(n, "sizes", out, x->rank);
    if (up) {   /* Upsample: nearest by whole scales, each input repeated */
        for (int a = 0; a < x->rank; a++)
            if (sc->f[a] != floorf(sc->f[a]) || sc->f[a] < 1 ||
                strcmp(attr_of(n, "mode")->s ? attr_of(n, "mode")->s
                                             : "nearest", "nearest"))
                return lower_error(m, o, "Upsample is taken in mode nearest "
                    "with whole-number scales only (each element repeated); "
                    "export Resize (opset 11 or later) for the others");
        Attr *t = attr_of(n, "coordinate_transformation_mode");
        t->set = 1;
        t->s = "asymmetric";
        t = attr_of(n, "nearest_mode");
        t->set = 1;
        t->s = "floor";
        return 0;
    }
    if (!sz) {
        Attr *t = attr_of(n, "scales");
        t->set = 1;
        t->s = b.data;
    }
    return 0;
}

/* Constant input i as `count` numbers (any numeric type), or an error
 * naming what it is for. */
static int const_numbers(Im *m, const ONode *o, int i, long count,
                         const char *what, double *out)
{
    const Val *v = i < o->nin && o->in[i] >= 0 ? &m->v[o->in[i]] : NULL;
    if (!v || !v->known || v->numel != count || v->rank > 1)
        return lower_error(m, o, ctx_printf(m->c, "input %d%s%s%s (%s) must "
            "be a constant of %ld value%s: remat compiles it in", i,
            v ? " '" : "", v ? v->name : "", v ? "'" : "", what, count,
            count > 1 ? "s" : ""));
    for (long k = 0; k < count; k++)
        out[k] = v->dt == DT_F32 ? (double)v->f[k] : (double)v->i[k];
    return 0;
}

/* CumSum's axis (input 1) and OneHot's depth and values (inputs 1, 2) as
 * the IR's attributes (issue 25). OneHot's values may be int64 (torch's
 * F.one_hot: [0, 1], its output then Cast to float): the IR's OneHot
 * computes float32, exact for integers up to 2^24, so a Cast to float32 of
 * it is the identity (lower_cast). */
static int new_op_inputs(Im *m, const ONode *o, Node *n)
{
    double v[2];
    if (n->op == OP_CUMSUM) {
        if (const_numbers(m, o, 1, 1, "axis", v))
            return -1;
        set_int(n, "axis", (long)v[0]);
        return 0;
    }
    if (const_numbers(m, o, 1, 1, "depth", v))
        return -1;
    if (v[0] != floor(v[0]) || v[0] < 1 || v[0] > MAX_NUMEL)
        return lower_error(m, o, ctx_printf(m->c, "depth is %g; remat takes "
            "a whole number of classes from 1 to %ld", v[0], MAX_NUMEL));
    set_int(n, "depth", (long)v[0]);
    if (const_numbers(m, o, 2, 2, "values: off, on", v))
        return -1;
    for (int k = 0; k < 2; k++) {
        if (fabs(v[k]) > 16777216.0)
            return lower_error(m, o, ctx_printf(m->c, "value %g is beyond "
                "2^24; remat's OneHot computes float32, exact to 2^24", v[k]));
        Attr *a = attr_of(n, k ? "on_value" : "off_value");
        a->set = 1;
        a->f = (float)v[k];
    }
    return 0;
}

/* Tile whose walk is deeper than the runtime's (ONNX's test_tile: every
 * dimension of a rank-4 input repeated walks 8) as a chain of Tiles, each
 * repeating the next dimensions while its walk fits; the last has the
 * ONNX node's name and output. Anything else is one Tile (issue 25). */
static int lower_tile(Im *m, ONode *o)
{
    const Val *r = o->nin > 1 && o->in[1] >= 0 ? &m->v[o->in[1]] : NULL;
    int t = tensor_of(m, o->in[0], o);
    if (t < 0)
        return -1;
    Tensor cur = m->g->tensors[t];
    if (!r || !r->known || r->dt == DT_F32 || r->numel != cur.rank)
        return lower_plain(m, o, OP_TILE);      /* its errors */
    long rep[MAX_RANK], part[MAX_RANK], dims[MAX_RANK];
    for (int d = 0; d < cur.rank; d++) {
        rep[d] = (long)r->i[d];
        if (rep[d] < 1 || rep[d] > MAX_NUMEL)
            return lower_plain(m, o, OP_TILE);
    }
    if (tile_walk(&cur, rep) <= MAX_RANK)
        return lower_plain(m, o, OP_TILE);
    if (im_reserve(m, cur.rank))
        return -1;
    for (int d = 0; d < cur.rank; d++)
        part[d] = 1;
    int step = 0;
    for (int d = 0; d <= cur.rank; d++) {
        if (d < cur.rank) {
            if (rep[d] == 1)
                continue;
            part[d] = rep[d];
            if (tile_walk(&cur, part) <= MAX_RANK)
                continue;
            part[d] = 1;    /* dimension d starts the next Tile */
        }
        const int last = d == cur.rank;
        Node *n = new_node(m, last ? o->name : ctx_printf(m->c, "%s/tile%d",
                           o->name, step), OP_TILE);
        n->in[n->nin++] = t;
        set_ints(n, "repeats", part, cur.rank);
        t = add_out(m, n, last ? m->v[o->out[0]].name
                               : ctx_printf(m->c, "%s_tile%d",
                                            m->v[o->out[0]].name, step));
        if (finish_node(m, n, o))
            return -1;
        step++;
        for (int k = 0; k < cur.rank; k++)
            dims[k] = cur.dims[k] * part[k], part[k] = 1;
        set_shape(&cur, cur.rank, dims);
        if (!last)
            part[d] = rep[d];
    }
    m->v[o->out[0]].tensor = t;
    shape_to_val(&m->v[o->out[0]], &m->g->tensors[t]);
    m->nrewritten++;    /* as onnx_rewrite.c's log_rewrite */
    buf_printf(&m->log, "  rewrote a Tile deeper than the runtime walks as "
               "%d Tiles at %s\n", step, o->name);
    return 0;
}

/* ---- the generic lowering ------------------------------------------------------------ */

typedef struct {
    const char *op;
    int data_in;            /* inputs that are tensors; the rest are attrs */
    int outs;               /* outputs the IR computes */
    const char *attr_in[4]; /* inputs data_in.. as these attributes */
} Lowering;

static const Lowering lowerings[] = {
    {"Reshape", 1, 1, {"shape"}},
    {"Unsqueeze", 1, 1, {"axes"}},
    {"Squeeze", 1, 1, {"axes"}},
    {"Slice", 1, 1, {"starts", "ends", "axes", "steps"}},
    {"Split", 1, -1, {"split"}},
    {"Expand", 1, 1, {"shape"}},
    {"ReduceSum", 1, 1, {"axes"}},
    {"ReduceMean", 1, 1, {"axes"}},
    {"ReduceMax", 1, 1, {"axes"}},
    {"ReduceMin", 1, 1, {"axes"}},
    {"ReduceL1", 1, 1, {"axes"}},
    {"ReduceL2", 1, 1, {"axes"}},
    {"ReduceSumSquare", 1, 1, {"axes"}},
    {"ReduceLogSumExp", 1, 1, {"axes"}},
    {"Dropout", 1, 1, {0}},
    {"Clip", 1, 1, {0}},
    {"Pad", 1, 1, {"pads"}},    /* constant_value and axes: pad_inputs */
    {"BatchNormalization", 5, 1, {0}},
    {"LayerNormalization", 3, 1, {0}},
    {"MaxPool", 1, 1, {0}},
    {"SoftmaxCrossEntropyLoss", 3, 1, {0}},
    {"Resize", 1, 1, {0}},
    {"Upsample", 1, 1, {0}},
    /* issue 25 (newops1): CumSum's axis and OneHot's depth and values:
     * new_op_inputs; Tile's repeats */
    {"CumSum", 1, 1, {0}},
    {"OneHot", 1, 1, {0}},
    {"Tile", 1, 1, {"repeats"}},
};

static int read_anywhere(const Im *m, const ONode *o, int i)
{
    return i < o->nout && o->out[i] >= 0 &&
           (m->v[o->out[i]].readers || m->v[o->out[i]].is_output);
}

/* Softmax and LogSoftmax before opset 13 normalize over the input
 * flattened from their axis (default 1) on; remat's normalize along one
 * axis, which is the same only when that axis is the last. */
static int old_softmax(Im *m, const ONode *o, Node *n)
{
    const Tensor *x = &m->g->tensors[n->in[0]];
    long axis = onnx_attr_int(o, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis != x->rank - 1)
        return lower_error(m, o, ctx_printf(m->c, "%s at opset %ld normalizes "
            "over dimensions %ld.. of %s flattened together; remat's "
            "normalizes along one axis: export at opset 13 or later, or use "
            "the last axis", o->op, m->opset, axis, shape_str(m->c, x)));
    set_int(n, "axis", -1);
    return 0;
}

int lower_plain(Im *m, ONode *o, OpKind op)
{
    if (op == OP_ATTENTION && !o->p && (o->cond_mask || o->mask_late)) {
        int rc = attention_mask_input(m, o);
        if (rc)
            return rc < 0 ? -1 : 0;     /* 1: lowered as it was */
    }
    if (op == OP_SOFTMAX_CROSS_ENTROPY && o->p && read_anywhere(m, o, 1))
        return lower_sce_log_prob(m, o);
    if (op == OP_LAYER_NORM && o->p && (read_anywhere(m, o, 1) ||
                                        read_anywhere(m, o, 2)) && o->nout > 1)
        return lower_layer_norm_stats(m, o);
    const Lowering *l = NULL;
    for (size_t k = 0; k < sizeof lowerings / sizeof *lowerings; k++)
        if (!strcmp(lowerings[k].op, o->op))
            l = &lowerings[k];
    int data_in = l ? l->data_in : o->nin;
    int outs = l && l->outs > 0 ? l->outs : o->nout;
    if (data_in > o->nin)
        data_in = o->nin;
    while (data_in > 0 && o->in[data_in - 1] < 0)
        data_in--;      /* optional trailing inputs left out */
    if (data_in > MAX_IO || outs > MAX_IO)
        return lower_error(m, o, ctx_printf(m->c, "has more than %d inputs "
                                            "or outputs", MAX_IO));
    for (int i = outs; i < o->nout; i++) {
        const Val *v = o->out[i] >= 0 ? &m->v[o->out[i]] : NULL;
        if (v && (v->readers || v->is_output))
            return lower_error(m, o, ctx_printf(m->c, "output %d '%s' is "
                "read; remat computes %s's first %d output%s only, and drops "
                "the others where nothing reads them", i, v->name, o->op,
                outs, outs > 1 ? "s" : ""));
    }
    Node *n = new_node(m, o->name, op);
    for (int i = 0; i < data_in; i++) {
        if (o->in[i] < 0)
            return lower_error(m, o, ctx_printf(m->c, "input %d is left out; "
                               "remat needs it", i));
        int t = tensor_read(m, o->in[i], o, op, i);
        if (t < 0)
            return -1;
        n->in[n->nin++] = t;
    }
    if (copy_attrs(m, o, n))
        return -1;
    /* ONNX's default is eval mode (0), remat's XML default training (1);
     * before opset 14 a training export is told by its extra outputs */
    if (op == OP_BATCH_NORM && !attr_of(n, "training_mode")->set)
        set_int(n, "training_mode", m->opset < 14 && o->nout > 1);
    if ((op == OP_SOFTMAX || !strcmp(o->op, "LogSoftmax")) && o->p &&
        m->opset < 13 && old_softmax(m, o, n))
        return -1;
    for (int i = 0; l && i < 4 && l->attr_in[i]; i++)
        if (ints_input(m, o, data_in + i, n, l->attr_in[i]))
            return -1;
    if (!strcmp(o->op, "Gelu") && !o->p && o->approximate) {
        Attr *a = attr_of(n, "approximate");
        a->set = 1;
        a->s = o->approximate;
    }
    if (!strcmp(o->op, "LayerNormalization") && !o->p) {
        set_int(n, "axis", o->causal);
        Attr *a = attr_of(n, "epsilon");
        a->set = 1;
        a->f = o->epsilon;
    }
    if (!strcmp(o->op, "Attention") && !o->p) {
        /* 3-D from try_attention: heads in the batch, one each */
        if (m->g->tensors[n->in[0]].rank == 3) {
            set_int(n, "q_num_heads", 1);
            set_int(n, "kv_num_heads", 1);
        }
        set_int(n, "is_causal", o->causal);
        Attr *a = attr_of(n, "scale");
        a->set = 1;
        a->f = o->scale;
    }
    if (!strcmp(o->op, "Dropout") && o->nin > 1 && o->in[1] >= 0) {
        const Val *r = &m->v[o->in[1]];
        if (!r->known || r->dt != DT_F32 || r->numel != 1)
            return lower_error(m, o, "ratio must be a constant float");
        Attr *a = attr_of(n, "ratio");
        a->set = 1;
        a->f = r->f[0];
    }
    if (op == OP_CLIP && clip_bounds(m, o, n))
        return -1;
    if (op == OP_PAD && pad_inputs(m, o, n))
        return -1;
    if (apply_fold_pads(m, o, n))
        return -1;
    if (op == OP_GROUP_NORM && o->p && n->nin == 3) {
        const Tensor *x = &m->g->tensors[n->in[0]];
        const Tensor *sc = &m->g->tensors[n->in[1]];
        long groups = onnx_attr_int(o, "num_groups", 0);
        if (x->rank >= 2 && sc->numel == groups && groups != x->dims[1])
            return lower_error(m, o, ctx_printf(m->c, "scale '%s' holds %ld "
                "values, one per group (opset 18's GroupNormalization); "
                "remat's scale and bias are per channel (%ld), as opset 21 "
                "and torch's nn.GroupNorm define them", sc->name, sc->numel,
                x->dims[1]));
    }
    if (!strcmp(o->op, "GroupNormalization") && !o->p) {
        const Tensor *x = &m->g->tensors[n->in[0]];
        if (x->rank != o->causal)
            return lower_error(m, o, ctx_printf(m->c, "the GroupNorm pattern "
                "ending here normalizes '%s' of shape %s, but its weight and "
                "bias are unsqueezed to rank %d: they do not broadcast along "
                "its channels (axis 1)", x->name, shape_str(m->c, x),
                o->causal));
        set_int(n, "num_groups", o->num_groups);
        Attr *a = attr_of(n, "epsilon");
        a->set = 1;
        a->f = o->epsilon;
    }
    if (op == OP_RESIZE && resize_sizes(m, o, n))
        return -1;
    if ((op == OP_CUMSUM || op == OP_ONE_HOT) && new_op_inputs(m, o, n))
        return -1;
    for (int i = 0; i < outs; i++)
        add_out(m, n, o->out[i] >= 0 ? m->v[o->out[i]].name
                                     : ctx_printf(m->c, "%s_out%d", o->name, i));
    if (finish_node(m, n, o))
        return -1;
    for (int i = 0; i < outs; i++)
        if (o->out[i] >= 0) {
            m->v[o->out[i]].tensor = n->out[i];
            shape_to_val(&m->v[o->out[i]], &m->g->tensors[n->out[i]]);
        }
    return 0;
}

/* ONNX's Max and Min take one or more inputs; the table's rows take two.
 * One input is the identity; three or more a chain of pairs, left to
 * right (max(max(a, b), c)), each link a node of its own. */
static int lower_variadic(Im *m, ONode *o, OpKind op)
{
    if (o->nin == 1)
        return lower_plain(m, o, OP_IDENTITY);
    int t = -1;
    for (int i = 0; i < o->nin; i++)
        if (o->in[i] < 0)
            return lower_error(m, o, ctx_printf(m->c, "input %d is left out; "
                               "%s reads every input given", i, o->op));
    if (o->nout < 1 || o->out[0] < 0)
        return lower_error(m, o, "has no output 0");
    Val *y = &m->v[o->out[0]];
    for (int i = 1; i < o->nin; i++) {
        int a = i == 1 ? tensor_of(m, o->in[0], o) : t;
        int b = tensor_of(m, o->in[i], o);
        if (a < 0 || b < 0)
            return -1;
        Node *n = new_node(m, ctx_printf(m->c, "%s_%d", o->name, i), op);
        n->in[n->nin++] = a;
        n->in[n->nin++] = b;
        t = add_out(m, n, i == o->nin - 1 ? y->name
                                          : ctx_printf(m->c, "%s_%d_out", o->name, i));
        if (finish_node(m, n, o))
            return -1;
    }
    y->tensor = t;
    shape_to_val(y, &m->g->tensors[t]);
    return 0;
}

/* Grows the IR's node and tensor arrays so that `nodes` more of each fit
 * (a recurrent node unrolls into many). */
int im_reserve(Im *m, int nodes)
{
    Graph *g = m->g;
    if (nodes < 0 || nodes > 1000000)
        return ctx_error(m->c, m->file, 0, "graph: needs %d more nodes; remat "
                         "unrolls at most 1,000,000", nodes);
    if (g->nnodes + nodes > m->ncap) {
        int cap = g->nnodes + nodes + m->ncap;
        Node *n = ctx_alloc(m->c, (size_t)cap * sizeof(Node));
        if (g->nnodes)
            memcpy(n, g->nodes, (size_t)g->nnodes * sizeof(Node));
        g->nodes = n;
        m->ncap = cap;
    }
    if (g->ntensors + 2 * nodes > m->tcap) {
        int cap = g->ntensors + 2 * nodes + m->tcap;
        Tensor *t = ctx_alloc(m->c, (size_t)cap * sizeof(Tensor));
        if (g->ntensors)
            memcpy(t, g->tensors, (size_t)g->ntensors * sizeof(Tensor));
        g->tensors = t;
        m->tcap = cap;
    }
    return 0;
}

/* Cast of a computed tensor: an int64 or bool one to float32 at run time
 * (remat's Cast); to its own type, or a bool to int64 (remat's bools are
 * int64 0 and 1), an Identity; an int64 one to bool, x != 0, two Nots;
 * a float32 one to an integer is refused (constants were folded before
 * this). */
static int lower_cast(Im *m, ONode *o)
{
    const Val *x = &m->v[o->in[0]];
    long to_attr = onnx_attr_int(o, "to", 0);
    int to = dtype_of((int)to_attr), is_int = x->dt != DT_F32;
    if (to_attr == 1 && is_int) {
        o->p = NULL;    /* the row's `to` defaults to 1 */
        return lower_plain(m, o, OP_CAST);
    }
    if ((to == DT_F32 && !is_int) || (to == DT_I64 && is_int)) {
        o->p = NULL;    /* `to` is the input's own type: nothing to keep */
        return lower_plain(m, o, OP_IDENTITY);
    }
    if (to == DT_BOOL && is_int) {  /* x != 0, a bool: Not of Not */
        int x0 = tensor_of(m, o->in[0], o);
        if (x0 < 0)
            return -1;
        Node *n1, *n2;
        int t1 = node1(m, o, ctx_printf(m->c, "%s/not", o->name), OP_NOT,
                       &x0, 1, ctx_printf(m->c, "%s_not",
                                          m->v[o->out[0]].name), &n1);
        if (finish_node(m, n1, o))
            return -1;
        int y = node1(m, o, o->name, OP_NOT, &t1, 1, m->v[o->out[0]].name,
                      &n2);
        if (finish_node(m, n2, o))
            return -1;
        m->v[o->out[0]].tensor = y;
        shape_to_val(&m->v[o->out[0]], &m->g->tensors[y]);
        return 0;
    }
    return lower_error(m, o, ctx_printf(m->c, "Cast of a computed %s tensor "
        "to %s; remat casts int64 and bool to float32 at run time, and "
        "folds other casts of constants", is_int ? "int64" : "float32",
        onnx_dtype_name((int)to_attr)));
}

static int lower_node(Im *m, ONode *o)
{
    int rnn = lower_rnn(m, o);      /* issue 25: recurrent layers */
    if (rnn)
        return rnn < 0 ? -1 : 0;
    if (!strcmp(o->op, "Trilu") && o->in[0] >= 0 && m->v[o->in[0]].tensor >= 0)
        return lower_trilu(m, o);
    if (!strcmp(o->op, "Einsum")) { /* issue 25: lowered, onnx_rewrite.c */
        int rc = try_einsum_attention(m, o);
        return rc ? (rc < 0 ? -1 : 0) : lower_einsum(m, o);
    }
    int known = op_lookup(o->op);
    if ((known == OP_MAX || known == OP_MIN) && o->nin != 2 && o->nin > 0)
        return lower_variadic(m, o, (OpKind)known);
    for (int i = 0; known >= 0 && i < op_table[known].min_in; i++)
        if (i >= o->nin || o->in[i] < 0)
            return lower_error(m, o, ctx_printf(m->c, "input %d is left out; "
                               "%s takes at least %d", i, o->op,
                               op_table[known].min_in));
    if (o->nin < 1 || o->in[0] < 0)
        return lower_error(m, o, "has no input 0; remat's ops all read one");
    if (keep_transposed(m, o))
        return 0;
    if (!strcmp(o->op, "Transpose")) {
        int rc = try_attention(m, o);
        if (rc)
            return rc < 0 ? -1 : 0;
    }
    if (!strcmp(o->op, "MatMul") && o->in[1] >= 0 &&
        m->v[o->in[1]].transposed_of >= 0)
        return lower_matmul_t(m, o);
    if (!strcmp(o->op, "Gather") && o->in[1] >= 0 && m->v[o->in[1]].known &&
        !m->v[o->in[1]].varying)
        return lower_gather_const(m, o);
    const char *op = o->op;
    if (!strcmp(op, "Cast"))
        return lower_cast(m, o);
    if (!strcmp(op, "Tile") && o->nout == 1 && o->out[0] >= 0)
        return lower_tile(m, o);
    if (!strcmp(op, "Upsample"))   /* the deprecated Resize (opset 9) */
        return lower_plain(m, o, OP_RESIZE);
    int k = op_lookup(op);
    if (k < 0) {    /* short: `remat ops` has the lists */
        const char *names[MAX_FOLDED_OPS], *notes[MAX_FOLDED_OPS];
        int n = onnx_folded_ops(names, notes, MAX_FOLDED_OPS), folded = 0;
        for (int i = 0; i < n; i++)
            folded |= !strcmp(names[i], o->op);
        return lower_error(m, o, ctx_printf(m->c, "op %s is %s "
            "(remat ops lists the ops remat computes)", o->op, folded ?
            "folded from constants only, not computed" : "not supported"));
    }
    return lower_plain(m, o, (OpKind)k);
}

/* ---- the walk ----------------------------------------------------------------------------- */

static int fold_pass(Im *m, int final)
{
    for (int k = 0; k < m->nn; k++) {
        ONode *o = &m->nodes[k];
        if (o->done)
            continue;
        int vary = 0;
        for (int i = 0; i < o->nout; i++)
            vary |= o->out[i] >= 0 && m->v[o->out[i]].varying;
        if (vary) {
            if (final && lower_node(m, o))
                return -1;
            o->done = final;
            continue;
        }
        int rc = onnx_fold(m, o);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            o->done = 1;
            for (int i = 0; i < o->nout; i++)
                if (o->out[i] >= 0)
                    m->v[o->out[i]].const_name = m->v[o->out[i]].name;
        } else if (final) {
            if (lower_node(m, o))
                return -1;
            o->done = 1;
        }
    }
    return 0;
}

/* An output that depends on no input (a float32 constant): an Identity
 * of the constant, so that forward writes it like any other. */
static int constant_output(Im *m, Val *x)
{
    ONode o = {.name = x->name, .op = "Identity",
               .what = ctx_printf(m->c, "graph output '%s'", x->name)};
    const char *keep = x->name;
    x->const_name = ctx_printf(m->c, "%s_value", x->name);
    int p = param_of(m, x, &o, 0);
    if (p < 0)
        return -1;
    x->tensor = -1;
    Node *n;
    int y = node1(m, &o, ctx_printf(m->c, "%s/identity", keep), OP_IDENTITY,
                  &p, 1, keep, &n);
    if (finish_node(m, n, &o))
        return -1;
    x->tensor = y;
    return 0;
}

int onnx_lower(Im *m)
{
    ONode init_node = {.name = "", .op = "", .what = "initializer"};
    Graph *g = m->g = ctx_alloc(m->c, sizeof(Graph));
    g->file = m->file;
    g->loss = -1;
    m->tcap = 2 * m->nv + 64 + 4 * m->nn;
    m->ncap = 3 * m->nn + 64;
    g->tensors = ctx_alloc(m->c, (size_t)m->tcap * sizeof(Tensor));
    g->nodes = ctx_alloc(m->c, (size_t)m->ncap * sizeof(Node));
    for (int v = 0; v < m->nv; v++) {
        Val *x = &m->v[v];
        if (!x->graph_input)
            continue;
        int t = new_tensor(m, x->name, T_INPUT);
        copy_shape(&g->tensors[t], x);
        g->tensors[t].is_int = x->dt != DT_F32;
        x->tensor = t;
    }
    /* trainable initializers come first, in the file's order */
    for (int v = 0; v < m->nv; v++)
        if (m->v[v].trainable && param_of(m, &m->v[v], &init_node, 0) < 0)
            return -1;
    if (fold_pass(m, 0))
        return -1;
    rewrite_patterns(m);
    if (fold_pass(m, 1))
        return -1;
    for (int k = 0; k < m->noutputs; k++) {
        Val *x = &m->v[m->outputs[k]];
        if (x->tensor < 0 && x->known && x->dt == DT_F32 && x->numel > 0 &&
            constant_output(m, x))
            return -1;
        if (x->tensor < 0 || g->tensors[x->tensor].kind != T_ACT)
            return ctx_error(m->c, m->file, 0, "graph output '%s': is %s; "
                             "remat's outputs are computed from the inputs",
                             x->name, x->known ? "a constant (it depends on "
                             "no input)" : "a graph input or a parameter");
    }
    return 0;
}

