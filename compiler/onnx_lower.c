/*
 * onnx_lower.c: ONNX nodes that are not constants become IR nodes, and the
 * IR becomes the format's XML.
 *
 * Lowering is one table-driven walk. Each ONNX op maps to the IR op of
 * the same name; where ONNX passes as an input what the IR takes as an
 * attribute (Reshape's shape, Slice's starts, Unsqueeze's axes, Dropout's
 * ratio), the constant input becomes that attribute. Constant data inputs
 * become non-trainable parameters; trainable initializers become
 * parameters under their own names. Optional outputs nobody reads (a
 * Dropout's mask, a LayerNormalization's mean) are dropped; one that is
 * read is an error naming it. The IR node's shape rule runs as soon as the
 * node is made, so the importer always knows every value's shape.
 *
 * Rewrites, each only where the pattern matches exactly:
 *  - x/sqrt(2) -> Erf -> +1 -> *x -> *0.5 (torch's GELU) becomes Gelu;
 *  - MatMul(x, Transpose(W)) for a 2-D parameter W (torch's Linear on a
 *    3-D input) becomes Gemm(x, W, transB=1) on x viewed as 2-D: no copy
 *    of W and no copy of x;
 *  - Gather with constant indices that form a range becomes a Slice (and
 *    a Reshape view for a scalar index).
 *
 * Blocks come from what repeats: a node whose name has a scope component
 * NAME.N (torch's "/blocks.0/attn/MatMul"), or which reads a parameter
 * named NAME.N.*, belongs to block NAME.N when NAME occurs with at least
 * two indices.
 */
#include "onnx_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- unique, valid IR names ------------------------------------------------------ */

static size_t hs(const char *s)
{
    size_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static int set_has(const NameSet *t, const char *s)
{
    if (!t->cap)
        return 0;
    for (size_t k = hs(s) & (t->cap - 1); t->keys[k]; k = (k + 1) & (t->cap - 1))
        if (!strcmp(t->keys[k], s))
            return 1;
    return 0;
}

static void set_add(Ctx *c, NameSet *t, const char *s)
{
    if ((t->n + 1) * 2 > t->cap) {
        NameSet b = {ctx_alloc(c, (t->cap ? t->cap * 2 : 256) * sizeof(char *)),
                     t->cap ? t->cap * 2 : 256, 0};
        for (size_t k = 0; k < t->cap; k++)
            if (t->keys[k])
                set_add(c, &b, t->keys[k]);
        *t = b;
    }
    size_t k = hs(s) & (t->cap - 1);
    while (t->keys[k])
        k = (k + 1) & (t->cap - 1);
    t->keys[k] = s;
    t->n++;
}

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
    for (int k = 2; set_has(set, name); k++)
        name = ctx_printf(m->c, "%s_%d", s, k);
    set_add(m->c, set, name);
    return name;
}

/* ---- IR tensors and nodes --------------------------------------------------------- */

static int new_tensor(Im *m, const char *raw, TensorKind kind)
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

static void copy_shape(Tensor *t, const Val *v)
{
    t->rank = v->rank;
    t->numel = v->numel;
    for (int d = 0; d < v->rank; d++)
        t->dims[d] = v->dims[d];
}

static void shape_to_val(Val *v, const Tensor *t)
{
    v->rank = t->rank;
    v->numel = t->numel;
    for (int d = 0; d < t->rank; d++)
        v->dims[d] = t->dims[d];
    v->shaped = 1;
    v->dt = t->is_int ? DT_I64 : DT_F32;
}

static int lower_error(Im *m, const ONode *o, const char *what)
{
    return ctx_error(m->c, m->file, 0, "%s: %s", o->what, what);
}

/* A constant or parameter value as a parameter tensor (made once). */
static int param_of(Im *m, Val *v, const ONode *o)
{
    if (v->dt != DT_F32 && v->dt != DT_BOOL)
        return lower_error(m, o, ctx_printf(m->c, "int64 constant '%s' is "
            "read as data; remat reads int64 only as indices and labels that "
            "are graph inputs", v->name));
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] == 0)
            return lower_error(m, o, ctx_printf(m->c, "constant '%s' is "
                                                "empty", v->name));
    int t = new_tensor(m, v->const_name ? v->const_name : v->name, T_PARAM);
    Tensor *x = &m->g->tensors[t];
    copy_shape(x, v);
    x->trainable = v->trainable;
    x->init = INIT_FILE;
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

static int tensor_of(Im *m, int vi, const ONode *o)
{
    Val *v = &m->v[vi];
    if (v->tensor >= 0)
        return v->tensor;
    if (v->known)
        return param_of(m, v, o);
    return lower_error(m, o, ctx_printf(m->c, "input '%s' has no value "
                                        "remat can compute", v->name));
}

static Node *new_node(Im *m, const char *raw, OpKind op)
{
    Graph *g = m->g;
    assert(g->nnodes < m->ncap);
    Node *n = &g->nodes[g->nnodes++];
    n->name = ir_name(m, &m->node_names, raw);
    n->cname = n->name;
    n->op = op;
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
static int add_out(Im *m, Node *n, const char *raw)
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

static void set_ints(Node *n, const char *name, const long *v, int count)
{
    Attr *a = attr_of(n, name);
    assert(a && count <= MAX_INTS);
    a->set = 1;
    a->nints = count;
    for (int k = 0; k < count; k++)
        a->ints[k] = v[k];
}

static void set_int(Node *n, const char *name, long v)
{
    Attr *a = attr_of(n, name);
    assert(a);
    a->set = 1;
    a->i = v;
}

/* Runs the new node's shape rule and records its outputs' shapes. */
static int finish_node(Im *m, Node *n, const ONode *o)
{
    Graph *g = m->g;
    const OpInfo *info = &op_table[n->op];
    for (int i = 0; i < n->nin; i++)
        g->tensors[n->in[i]].nconsumers++;
    if (info->shape(m->c, g, n)) {
        /* the rule's message names the IR node; say which ONNX node */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", m->c->err);
        const char *tail = strstr(msg, ": node '");
        return ctx_error(m->c, m->file, 0, "%s: %s", o->what,
                         tail ? strchr(tail + 8, '\'') + 3 : msg);
    }
    if (info->alias && g->tensors[n->in[0]].is_int)
        g->tensors[n->out[0]].is_int = 1;
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
    };
    for (size_t k = 0; k < sizeof any / sizeof *any; k++)
        if (!strcmp(o->op, any[k][0]) && !strcmp(a->name, any[k][1]))
            return 1;
    if (!strcmp(a->name, "stash_type") && a->i == 1)
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
            char *v = ctx_alloc(m->c, a->s.len + 1);
            memcpy(v, a->s.data, a->s.len);
            t->s = v;
            int ok = !s->choices;
            for (int j = 0; s->choices && s->choices[j]; j++)
                ok |= !strcmp(s->choices[j], v);
            if (!ok)
                return lower_error(m, o, ctx_printf(m->c, "attribute %s="
                    "\"%s\" is not supported", a->name, v));
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
    {"Dropout", 1, 1, {0}},
    {"BatchNormalization", 5, 1, {0}},
    {"LayerNormalization", 3, 1, {0}},
    {"MaxPool", 1, 1, {0}},
    {"SoftmaxCrossEntropyLoss", 3, 1, {0}},
};

static int lower_plain(Im *m, ONode *o, OpKind op);
static void log_rewrite(Im *m, const char *what, const ONode *o);

/* A scalar constant as a non-trainable parameter. */
static int scalar_param(Im *m, const char *name, float v)
{
    int t = new_tensor(m, name, T_PARAM);
    Tensor *x = &m->g->tensors[t];
    x->numel = 1;
    x->init = INIT_FILE;
    float *d = ctx_alloc(m->c, sizeof(float));
    *d = v;
    x->data = d;
    return t;
}

/* One IR node of in[0..nin) and a new output named out; its tensor. */
static int node1(Im *m, const ONode *o, const char *name, OpKind op,
                 const int *in, int nin, const char *out, Node **made)
{
    Node *n = new_node(m, name, op);
    for (int i = 0; i < nin; i++)
        n->in[n->nin++] = in[i];
    int t = add_out(m, n, out);
    if (made)
        *made = n;
    return t;
    (void)o;
}

/* LayerNormalization whose Mean or InvStdDev is read (ONNX's optional
 * outputs 1 and 2): the normalization as one node, and the statistics
 * computed beside it from ReduceMean, Sub, Mul, Add, Sqrt and Div. */
static int lower_layer_norm_stats(Im *m, ONode *o)
{
    int nout = o->nout;
    o->nout = 1;
    int rc = lower_plain(m, o, OP_LAYER_NORM);
    o->nout = nout;
    if (rc)
        return -1;
    int x = m->v[o->in[0]].tensor;
    int rank = m->g->tensors[x].rank;
    long axis = onnx_attr_int(o, "axis", -1);
    const Onnx__AttributeProto *ea = onnx_attr(o, "epsilon");
    float eps = ea && ea->has_f ? ea->f : 1e-5f;
    if (axis < 0)
        axis += rank;
    long axes[MAX_RANK];
    int na = 0;
    for (long d = axis; d < rank; d++)
        axes[na++] = d;
    const char *b = o->name;
    Node *n;
    int mean = node1(m, o, ctx_printf(m->c, "%s/mean", b), OP_REDUCE_MEAN, &x,
                     1, o->out[1] >= 0 ? m->v[o->out[1]].name
                                       : ctx_printf(m->c, "%s_mean", b), &n);
    set_ints(n, "axes", axes, na);
    if (finish_node(m, n, o))
        return -1;
    int in2[2] = {x, mean};
    int d = node1(m, o, ctx_printf(m->c, "%s/centre", b), OP_SUB, in2, 2,
                  ctx_printf(m->c, "%s_centred", b), &n);
    if (finish_node(m, n, o))
        return -1;
    int dd[2] = {d, d};
    int sq = node1(m, o, ctx_printf(m->c, "%s/square", b), OP_MUL, dd, 2,
                   ctx_printf(m->c, "%s_squares", b), &n);
    if (finish_node(m, n, o))
        return -1;
    int var = node1(m, o, ctx_printf(m->c, "%s/var", b), OP_REDUCE_MEAN, &sq,
                    1, ctx_printf(m->c, "%s_var", b), &n);
    set_ints(n, "axes", axes, na);
    if (finish_node(m, n, o))
        return -1;
    int ve[2] = {var, scalar_param(m, ctx_printf(m->c, "%s_epsilon", b), eps)};
    int v2 = node1(m, o, ctx_printf(m->c, "%s/eps", b), OP_ADD, ve, 2,
                   ctx_printf(m->c, "%s_var_eps", b), &n);
    if (finish_node(m, n, o))
        return -1;
    int sd = node1(m, o, ctx_printf(m->c, "%s/sqrt", b), OP_SQRT, &v2, 1,
                   ctx_printf(m->c, "%s_std", b), &n);
    if (finish_node(m, n, o))
        return -1;
    int inv[2] = {scalar_param(m, ctx_printf(m->c, "%s_one", b), 1.0f), sd};
    int is = node1(m, o, ctx_printf(m->c, "%s/inv", b), OP_DIV, inv, 2,
                   o->nout > 2 && o->out[2] >= 0 ? m->v[o->out[2]].name
                   : ctx_printf(m->c, "%s_invstd", b), &n);
    if (finish_node(m, n, o))
        return -1;
    int made[2] = {mean, is};
    for (int i = 1; i < 3 && i < o->nout; i++)
        if (o->out[i] >= 0) {
            m->v[o->out[i]].tensor = made[i - 1];
            shape_to_val(&m->v[o->out[i]], &m->g->tensors[made[i - 1]]);
        }
    log_rewrite(m, "LayerNormalization's Mean and InvStdDev as their own "
                "nodes", o);
    return 0;
}

static int read_anywhere(const Im *m, const ONode *o, int i)
{
    return i < o->nout && o->out[i] >= 0 &&
           (m->v[o->out[i]].readers || m->v[o->out[i]].is_output);
}

/* SoftmaxCrossEntropyLoss whose log-probabilities (output 1) are read:
 * the loss as one node, and LogSoftmax over the class axis beside it. */
static int lower_sce_log_prob(Im *m, ONode *o)
{
    int nout = o->nout;
    o->nout = 1;
    int rc = lower_plain(m, o, OP_SOFTMAX_CROSS_ENTROPY);
    o->nout = nout;
    int ls = op_lookup("LogSoftmax");
    if (rc || ls < 0)
        return rc ? -1 : lower_error(m, o, "log_prob needs LogSoftmax");
    int x = m->v[o->in[0]].tensor;
    Node *n;
    int y = node1(m, o, ctx_printf(m->c, "%s/log_prob", o->name), (OpKind)ls,
                  &x, 1, m->v[o->out[1]].name, &n);
    set_int(n, "axis", 1);
    if (finish_node(m, n, o))
        return -1;
    m->v[o->out[1]].tensor = y;
    shape_to_val(&m->v[o->out[1]], &m->g->tensors[y]);
    return 0;
}

static int lower_plain(Im *m, ONode *o, OpKind op)
{
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
        int t = tensor_of(m, o->in[i], o);
        if (t < 0)
            return -1;
        n->in[n->nin++] = t;
    }
    if (copy_attrs(m, o, n))
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

/* ---- rewrites ------------------------------------------------------------------------- */

static int is_const_scalar(const Im *m, int v, double want, double tol)
{
    if (v < 0 || !m->v[v].known || m->v[v].numel != 1 || m->v[v].varying)
        return 0;
    double x = val_get(&m->v[v], 0);
    return isinf(want) ? x == want : fabs(x - want) <= tol;
}

/* The one node reading value v, if exactly one does and it is not a graph
 * output. */
static ONode *only_reader(Im *m, int v, const char *op)
{
    if (v < 0 || m->v[v].readers != 1 || m->v[v].is_output)
        return NULL;
    for (int k = m->v[v].producer + 1; k < m->nn; k++) {
        ONode *o = &m->nodes[k];
        for (int i = 0; i < o->nin; i++)
            if (o->in[i] == v)
                return !strcmp(o->op, op) && !o->done ? o : NULL;
    }
    return NULL;
}

/* x's other operand in a binary node */
static int other(const ONode *o, int v)
{
    return o->in[0] == v ? o->in[1] : o->in[1] == v ? o->in[0] : -2;
}

static void log_rewrite(Im *m, const char *what, const ONode *o)
{
    m->nrewritten++;
    buf_printf(&m->log, "  rewrote %s at %s\n", what, o->name);
}

/* Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5 (or x*0.5 first). */
static int try_gelu(Im *m, ONode *div)
{
    if (strcmp(div->op, "Div") || div->nin != 2 ||
        !is_const_scalar(m, div->in[1], sqrt(2.0), 1e-6))
        return 0;
    int x = div->in[0];
    ONode *erf = only_reader(m, div->out[0], "Erf");
    ONode *add = erf ? only_reader(m, erf->out[0], "Add") : NULL;
    if (!add || !is_const_scalar(m, other(add, erf->out[0]), 1.0, 0))
        return 0;
    ONode *m1 = only_reader(m, add->out[0], "Mul");
    if (!m1)
        return 0;
    int o1 = other(m1, add->out[0]);
    ONode *m2 = NULL;
    if (o1 == x) {      /* (x * (1 + erf)) * 0.5 */
        m2 = only_reader(m, m1->out[0], "Mul");
        if (!m2 || !is_const_scalar(m, other(m2, m1->out[0]), 0.5, 0))
            return 0;
    } else if (o1 >= 0 && m->v[o1].producer >= 0) {   /* (x * 0.5) * (1+erf) */
        ONode *half = &m->nodes[m->v[o1].producer];
        if (strcmp(half->op, "Mul") || half->done || m->v[o1].readers != 1 ||
            other(half, x) < 0 || !is_const_scalar(m, other(half, x), 0.5, 0))
            return 0;
        half->done = 1;
        m2 = m1;
        m1 = NULL;
    } else
        return 0;
    div->done = erf->done = add->done = 1;
    if (m1)
        m1->done = 1;
    /* the last Mul becomes the Gelu, keeping its output's name */
    m2->op = "Gelu";
    m2->p = NULL;
    m2->in[0] = x;
    m2->nin = 1;
    log_rewrite(m, "Div/Erf/Add/Mul/Mul as Gelu", m2);
    return 1;
}

/* The node producing v if it is an op not yet absorbed, read only once. */
static ONode *single_producer(Im *m, int v, const char *op)
{
    if (v < 0 || m->v[v].producer < 0 || m->v[v].readers != 1 ||
        m->v[v].is_output)
        return NULL;
    ONode *o = &m->nodes[m->v[v].producer];
    return !o->done && !strcmp(o->op, op) ? o : NULL;
}

/* Of a binary node's two inputs, the one that is a constant scalar near
 * want: the other one, or -1. */
static int const_operand(Im *m, const ONode *o, double want, double tol)
{
    if (o->nin != 2)
        return -1;
    if (is_const_scalar(m, o->in[0], want, tol))
        return o->in[1];
    if (is_const_scalar(m, o->in[1], want, tol))
        return o->in[0];
    return -1;
}

/* x*x*x as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x): x, or -1. */
static int cube_of(Im *m, int v, ONode **parts)
{
    ONode *p = single_producer(m, v, "Pow");
    if (p && is_const_scalar(m, p->in[1], 3.0, 0)) {
        parts[0] = p;
        return p->in[0];
    }
    ONode *o = single_producer(m, v, "Mul");
    if (!o)
        return -1;
    for (int side = 0; side < 2; side++) {
        ONode *sq = single_producer(m, o->in[side], "Mul");
        int x = o->in[1 - side];
        if (sq && sq->in[0] == x && sq->in[1] == x) {
            parts[0] = o;
            parts[1] = sq;
            return x;
        }
    }
    return -1;
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as torch writes it. */
static int try_gelu_tanh(Im *m, ONode *t)
{
    if (strcmp(t->op, "Tanh"))
        return 0;
    ONode *beta = single_producer(m, t->in[0], "Mul"), *parts[2] = {0};
    int s = beta ? const_operand(m, beta, 0.79788456080286536, 1e-6) : -1;
    ONode *add = single_producer(m, s, "Add");
    if (!add)
        return 0;
    int x = -1;
    ONode *kap = NULL;
    for (int side = 0; side < 2 && x < 0; side++) {
        kap = single_producer(m, add->in[side], "Mul");
        int c = kap ? const_operand(m, kap, 0.044715, 1e-7) : -1;
        if (c >= 0 && cube_of(m, c, parts) == add->in[1 - side])
            x = add->in[1 - side];
    }
    ONode *one = x >= 0 ? only_reader(m, t->out[0], "Add") : NULL;
    if (!one || const_operand(m, one, 1.0, 0) != t->out[0])
        return 0;
    ONode *m1 = only_reader(m, one->out[0], "Mul"), *m2 = NULL, *half = NULL;
    if (!m1)
        return 0;
    int o1 = other(m1, one->out[0]);
    if (o1 == x) {
        m2 = only_reader(m, m1->out[0], "Mul");
        if (!m2 || const_operand(m, m2, 0.5, 0) != m1->out[0])
            return 0;
    } else if ((half = single_producer(m, o1, "Mul")) &&
               const_operand(m, half, 0.5, 0) == x) {
        m2 = m1;
        m1 = NULL;
    } else
        return 0;
    beta->done = add->done = kap->done = t->done = one->done = 1;
    parts[0]->done = 1;
    if (parts[1])
        parts[1]->done = 1;
    if (m1)
        m1->done = 1;
    if (half)
        half->done = 1;
    m2->op = "Gelu";
    m2->p = NULL;
    m2->in[0] = x;
    m2->nin = 1;
    m2->approximate = "tanh";
    log_rewrite(m, "the tanh form of GELU as Gelu approximate=tanh", m2);
    return 1;
}

/* Negative trailing axes [-k .. -1] of a ReduceMean: -k, or 0. */
static long trailing_axes(const ONode *r)
{
    const Onnx__AttributeProto *a = onnx_attr(r, "axes");
    if (!a || !a->n_ints || r->nin > 1 || onnx_attr_int(r, "keepdims", 1) != 1)
        return 0;
    long k = (long)a->n_ints;
    for (size_t j = 0; j < a->n_ints; j++)
        if (a->ints[j] != -k + (long)j)
            return 0;
    return -k;
}

/* LayerNorm spelled out (opsets before 17): ReduceMean, Sub, Pow 2,
 * ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias. */
static int try_layer_norm(Im *m, ONode *r1)
{
    long axis = strcmp(r1->op, "ReduceMean") ? 0 : trailing_axes(r1);
    if (!axis)
        return 0;
    int x = r1->in[0];
    ONode *sub = only_reader(m, r1->out[0], "Sub");
    if (!sub || sub->in[0] != x || sub->in[1] != r1->out[0])
        return 0;
    int d = sub->out[0];
    ONode *pw = NULL, *div = NULL;
    if (m->v[d].readers != 2 || m->v[d].is_output)
        return 0;
    for (int k = m->v[d].producer + 1; k < m->nn; k++) {
        ONode *o = &m->nodes[k];
        if (o->done || o->nin < 1 || (o->in[0] != d && (o->nin < 2 || o->in[1] != d)))
            continue;
        if (!strcmp(o->op, "Pow") && o->in[0] == d &&
            is_const_scalar(m, o->in[1], 2.0, 0))
            pw = o;
        else if (!strcmp(o->op, "Div") && o->in[0] == d)
            div = o;
    }
    ONode *r2 = pw ? only_reader(m, pw->out[0], "ReduceMean") : NULL;
    if (!r2 || trailing_axes(r2) != axis)
        return 0;
    ONode *eps = only_reader(m, r2->out[0], "Add");
    int e = eps && other(eps, r2->out[0]) >= 0 ? other(eps, r2->out[0]) : -1;
    if (e < 0 || !is_const_scalar(m, e, 0, 1.0))
        return 0;
    ONode *sq = only_reader(m, eps->out[0], "Sqrt");
    if (!sq || !div || div->in[1] != sq->out[0])
        return 0;
    ONode *mul = only_reader(m, div->out[0], "Mul");
    int w = mul ? other(mul, div->out[0]) : -1;
    ONode *bias = mul ? only_reader(m, mul->out[0], "Add") : NULL;
    int b = bias ? other(bias, mul->out[0]) : -1;
    if (w < 0 || b < 0 || !m->v[w].init || !m->v[b].init)
        return 0;
    r1->done = sub->done = pw->done = r2->done = eps->done = sq->done = 1;
    div->done = mul->done = 1;
    bias->op = "LayerNormalization";
    bias->p = NULL;
    bias->in[0] = x;
    bias->in[1] = w;
    bias->in[2] = b;
    bias->nin = 3;
    bias->causal = (int)axis;    /* the axis, for lower_plain */
    bias->epsilon = (float)val_get(&m->v[e], 0);
    log_rewrite(m, "ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add as "
                "LayerNormalization", bias);
    return 1;
}

static void rewrite_patterns(Im *m)
{
    for (int k = 0; k < m->nn; k++) {
        ONode *o = &m->nodes[k];
        if (o->done || o->nout < 1 || o->out[0] < 0 || m->v[o->out[0]].known)
            continue;
        (void)(try_gelu(m, o) || try_gelu_tanh(m, o) || try_layer_norm(m, o));
    }
}

/* Transpose of a 2-D parameter read only by MatMuls as their B: kept as a
 * note on the value, for lower_matmul. */
static int keep_transposed(Im *m, ONode *o)
{
    if (strcmp(o->op, "Transpose") || o->in[0] < 0)
        return 0;
    Val *w = &m->v[o->in[0]];
    if (!w->init || w->rank != 2)
        return 0;
    int y = o->out[0];
    if (m->v[y].is_output)
        return 0;
    int readers = 0;
    for (int k = m->v[y].producer + 1; k < m->nn; k++) {
        ONode *r = &m->nodes[k];
        for (int i = 0; i < r->nin; i++)
            if (r->in[i] == y) {
                if (strcmp(r->op, "MatMul") || i != 1)
                    return 0;
                readers++;
            }
    }
    if (readers != m->v[y].readers)
        return 0;
    m->v[y].transposed_of = o->in[0];
    m->v[y].shaped = 1;
    m->v[y].rank = 2;
    m->v[y].dims[0] = w->dims[1];
    m->v[y].dims[1] = w->dims[0];
    return 1;
}

/* MatMul(x, Transpose(W)): Gemm(x, W, transB=1), x viewed as 2-D. */
static int lower_matmul_t(Im *m, ONode *o)
{
    int wv = m->v[o->in[1]].transposed_of;
    int xt = tensor_of(m, o->in[0], o), wt = tensor_of(m, wv, o);
    if (xt < 0 || wt < 0)
        return -1;
    Tensor *x = &m->g->tensors[xt];
    long k = m->v[wv].dims[1], nout = m->v[wv].dims[0];
    if (x->rank < 2 || x->dims[x->rank - 1] != k || x->is_int)
        return lower_error(m, o, ctx_printf(m->c, "MatMul of %s by the "
            "transpose of '%s' (%ldx%ld): the inner dimensions differ",
            shape_str(m->c, x), m->v[wv].name, nout, k));
    int in2d = xt;
    if (x->rank > 2) {
        Node *r = new_node(m, ctx_printf(m->c, "%s/flat", o->name), OP_RESHAPE);
        r->in[r->nin++] = xt;
        long shape[2] = {-1, k};
        set_ints(r, "shape", shape, 2);
        in2d = add_out(m, r, ctx_printf(m->c, "%s_2d", x->name));
        if (finish_node(m, r, o))
            return -1;
    }
    Node *gm = new_node(m, o->name, OP_GEMM);
    gm->in[gm->nin++] = in2d;
    gm->in[gm->nin++] = wt;
    set_int(gm, "transB", 1);
    const char *yname = m->v[o->out[0]].name;
    int y = add_out(m, gm, x->rank > 2 ? ctx_printf(m->c, "%s_2d", yname) : yname);
    if (finish_node(m, gm, o))
        return -1;
    if (x->rank > 2) {
        x = &m->g->tensors[xt];
        Node *r = new_node(m, ctx_printf(m->c, "%s/unflat", o->name),
                           OP_RESHAPE);
        r->in[r->nin++] = y;
        long shape[MAX_RANK];
        for (int d = 0; d < x->rank - 1; d++)
            shape[d] = x->dims[d];
        shape[x->rank - 1] = nout;
        set_ints(r, "shape", shape, x->rank);
        y = add_out(m, r, yname);
        if (finish_node(m, r, o))
            return -1;
    }
    m->v[o->out[0]].tensor = y;
    shape_to_val(&m->v[o->out[0]], &m->g->tensors[y]);
    log_rewrite(m, "MatMul by a transposed parameter as Gemm transB=1", o);
    return 0;
}

/* Gather(data, constant indices): a Slice when the indices are a range. */
static int lower_gather_const(Im *m, ONode *o)
{
    const Val *ix = &m->v[o->in[1]];
    int dt = tensor_of(m, o->in[0], o);
    if (dt < 0)
        return -1;
    const Tensor *x = &m->g->tensors[dt];
    long axis = onnx_attr_int(o, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    if (ix->rank > 1 || ix->numel == 0 || axis < 0 || axis >= x->rank)
        return lower_error(m, o, "Gather with constant indices is supported "
                           "for a scalar or a 1-D range of indices");
    long n = x->dims[axis];
    int64_t first = ix->i[0] < 0 ? ix->i[0] + n : ix->i[0];
    for (long k = 0; k < ix->numel; k++) {
        int64_t v = ix->i[k] < 0 ? ix->i[k] + n : ix->i[k];
        if (v != first + k || v < 0 || v >= n)
            return lower_error(m, o, "Gather with constant indices is "
                "supported where they are consecutive (a range): make them "
                "an int64 graph input otherwise");
    }
    int op = op_lookup("Slice");
    if (op < 0)
        return lower_error(m, o, "Gather with constant indices needs Slice");
    Node *s = new_node(m, ix->rank == 0 ? ctx_printf(m->c, "%s/slice", o->name)
                                       : o->name, (OpKind)op);
    s->in[s->nin++] = dt;
    long st = (long)first, en = (long)first + ix->numel, ax = axis;
    set_ints(s, "starts", &st, 1);
    set_ints(s, "ends", &en, 1);
    set_ints(s, "axes", &ax, 1);
    const char *yname = m->v[o->out[0]].name;
    int y = add_out(m, s, ix->rank == 0 ? ctx_printf(m->c, "%s_1", yname) : yname);
    if (finish_node(m, s, o))
        return -1;
    if (ix->rank == 0) {    /* the axis goes away: a Reshape view */
        Node *r = new_node(m, o->name, OP_RESHAPE);
        r->in[r->nin++] = y;
        long shape[MAX_RANK];
        int rk = 0;
        x = &m->g->tensors[dt];
        for (int d = 0; d < x->rank; d++)
            if (d != axis)
                shape[rk++] = x->dims[d];
        set_ints(r, "shape", shape, rk);
        y = add_out(m, r, yname);
        if (finish_node(m, r, o))
            return -1;
    }
    m->v[o->out[0]].tensor = y;
    shape_to_val(&m->v[o->out[0]], &m->g->tensors[y]);
    log_rewrite(m, "Gather of a constant range as Slice", o);
    return 0;
}

/* The value's IR tensor if it has one of rank 4. */
static const Tensor *rank4(Im *m, int v)
{
    if (v < 0 || m->v[v].tensor < 0)
        return NULL;
    const Tensor *t = &m->g->tensors[m->v[v].tensor];
    return t->rank == 4 && !t->is_int ? t : NULL;
}

/* A constant mask whose last two axes (sq, skv) say, at every index of
 * the others, masked exactly where key j > query i (top-left causal):
 * want_true is what the mask holds there. */
static int is_causal_mask(const Val *c, long sq, long skv, int want_true)
{
    if (!c->known || c->rank < 2 || c->dims[c->rank - 2] != sq ||
        c->dims[c->rank - 1] != skv)
        return 0;
    for (long k = 0; k < c->numel; k++) {
        long j = k % skv, i = (k / skv) % sq;
        int v = val_get(c, k) != 0;
        if (v != ((j > i) == want_true))
            return 0;
    }
    return 1;
}

/* Folds value v now, with what it depends on, when it is a constant that
 * comes later in the file than a pattern that needs it (torch computes
 * attention's 1/sqrt(d) from Shape(k) after the MatMul it scales). */
static int fold_now(Im *m, int v, int depth)
{
    if (v < 0 || depth > 64)
        return 0;
    Val *x = &m->v[v];
    if (x->known || x->varying || x->producer < 0)
        return x->known;
    ONode *o = &m->nodes[x->producer];
    if (o->done)
        return x->known;
    int shape_op = !strcmp(o->op, "Shape") || !strcmp(o->op, "Size");
    for (int i = 0; i < o->nin && !shape_op; i++)
        if (o->in[i] >= 0 && !fold_now(m, o->in[i], depth + 1))
            return 0;
    /* a fold that fails is reported again when the walk gets there */
    if (onnx_fold(m, o) != 1)
        return 0;
    o->done = 1;
    for (int i = 0; i < o->nout; i++)
        if (o->out[i] >= 0)
            m->v[o->out[i]].const_name = m->v[o->out[i]].name;
    return x->known;
}

/* Transpose(k) -> MatMul(q, .) -> Mul/Div by a constant -> [Where with a
 * causal mask and -inf] -> Softmax(last axis) -> MatMul(., v), all 4-D and
 * each read once: one Attention node, which keeps no probabilities. */
static int try_attention(Im *m, ONode *tr)
{
    const Onnx__AttributeProto *perm = onnx_attr(tr, "perm");
    const Tensor *k = rank4(m, tr->in[0]);
    /* K^T straight from (B, H, T, D), or from (B, T, H, D) heads not yet
     * moved (torch folds x.transpose(1, 2).transpose(-2, -1) into one) */
    int heads_first = perm && perm->n_ints == 4 && perm->ints[0] == 0 &&
                      perm->ints[1] == 1 && perm->ints[2] == 3 &&
                      perm->ints[3] == 2;
    int heads_later = perm && perm->n_ints == 4 && perm->ints[0] == 0 &&
                      perm->ints[1] == 2 && perm->ints[2] == 3 &&
                      perm->ints[3] == 1;
    if (!k || !(heads_first || heads_later))
        return 0;
    ONode *mm1 = only_reader(m, tr->out[0], "MatMul");
    if (!mm1 || mm1->in[1] != tr->out[0])
        return 0;
    const Tensor *q = rank4(m, mm1->in[0]);
    long kb = k->dims[0], kh = heads_first ? k->dims[1] : k->dims[2],
         kt = heads_first ? k->dims[2] : k->dims[1], kd = k->dims[3];
    if (!q || q->dims[0] != kb || q->dims[1] != kh || q->dims[3] != kd)
        return 0;
    ONode *sc = only_reader(m, mm1->out[0], "Mul");
    if (!sc)
        sc = only_reader(m, mm1->out[0], "Div");
    if (!q || !sc || sc->in[0] != mm1->out[0] || !fold_now(m, sc->in[1], 0) ||
        !is_const_scalar(m, sc->in[1], 0, INFINITY))
        return 0;
    double c = val_get(&m->v[sc->in[1]], 0);
    float scale = (float)(strcmp(sc->op, "Div") ? c : 1.0 / c);
    if (!(scale > 0) || !isfinite(scale))
        return 0;
    int at = sc->out[0], causal = 0;
    ONode *wh = only_reader(m, at, "Where");
    if (wh) {
        for (int i = 0; i < 3 && i < wh->nin; i++)
            if (wh->in[i] != at)
                fold_now(m, wh->in[i], 0);
        int masked_true = wh->in[2] == at;   /* Where(mask, -inf, x) */
        int fill = masked_true ? wh->in[1] : wh->in[2];
        if ((masked_true ? wh->in[2] : wh->in[1]) != at ||
            !is_const_scalar(m, fill, -INFINITY, 0) ||
            !is_causal_mask(&m->v[wh->in[0]], q->dims[2], kt, masked_true))
            return 0;
        at = wh->out[0];
        causal = 1;
    }
    ONode *sm = only_reader(m, at, "Softmax");
    long axis = sm ? onnx_attr_int(sm, "axis", -1) : 0;
    if (!sm || (axis != -1 && axis != 3))
        return 0;
    ONode *mm2 = only_reader(m, sm->out[0], "MatMul");
    if (!mm2 || mm2->in[0] != sm->out[0] || !rank4(m, mm2->in[1]))
        return 0;
    int kv = tr->in[0];
    if (heads_later) {      /* K itself: (B, T, H, D) -> (B, H, T, D) */
        kv = im_new_val(m, ctx_printf(m->c, "%s_heads", m->v[tr->in[0]].name),
                        tr->what);
        if (kv < 0)
            return -1;
        Node *n = new_node(m, tr->name, OP_TRANSPOSE);
        n->in[n->nin++] = m->v[tr->in[0]].tensor;
        long p[4] = {0, 2, 1, 3};
        set_ints(n, "perm", p, 4);
        int t = add_out(m, n, m->v[kv].name);
        if (finish_node(m, n, tr))
            return -1;
        m->v[kv].tensor = t;
        m->v[kv].varying = 1;
        shape_to_val(&m->v[kv], &m->g->tensors[t]);
    }
    tr->done = mm1->done = sc->done = sm->done = 1;
    if (wh)
        wh->done = 1;
    mm2->op = "Attention";
    mm2->p = NULL;
    mm2->in[0] = mm1->in[0];
    mm2->in[2] = mm2->in[1];
    mm2->in[1] = kv;
    mm2->nin = 3;
    mm2->causal = causal;
    mm2->scale = scale;
    log_rewrite(m, causal ? "MatMul/scale/causal mask/Softmax/MatMul as "
                "Attention" : "MatMul/scale/Softmax/MatMul as Attention", mm2);
    return 1;
}

/* Trilu of a computed tensor: a product with the constant 0/1 mask of
 * its last two axes (which the gradient then follows exactly). */
static int lower_trilu(Im *m, ONode *o)
{
    const Val *x = &m->v[o->in[0]];
    long k = 0;
    if (o->nin > 1 && o->in[1] >= 0) {
        const Val *kv = &m->v[o->in[1]];
        if (!kv->known || kv->numel != 1 || kv->dt == DT_F32)
            return lower_error(m, o, "k must be a constant int64 scalar");
        k = (long)kv->i[0];
    }
    if (!x->shaped || x->rank < 2 || x->dt != DT_F32)
        return lower_error(m, o, "Trilu needs a float32 input of rank 2 or "
                           "more");
    int upper = (int)onnx_attr_int(o, "upper", 1);
    long r = x->dims[x->rank - 2], c = x->dims[x->rank - 1];
    int t = new_tensor(m, ctx_printf(m->c, "%s_mask", o->name), T_PARAM);
    Tensor *mask = &m->g->tensors[t];
    long dims[2] = {r, c};
    set_shape(mask, 2, dims);
    mask->init = INIT_FILE;
    float *d = ctx_alloc(m->c, (size_t)(r * c > 0 ? r * c : 1) * sizeof(float));
    for (long i = 0; i < r; i++)
        for (long j = 0; j < c; j++)
            d[i * c + j] = (upper ? j - i >= k : j - i <= k) ? 1.0f : 0.0f;
    mask->data = d;
    int in[2] = {x->tensor, t};
    Node *n;
    int y = node1(m, o, o->name, OP_MUL, in, 2, m->v[o->out[0]].name, &n);
    if (finish_node(m, n, o))
        return -1;
    m->v[o->out[0]].tensor = y;
    shape_to_val(&m->v[o->out[0]], &m->g->tensors[y]);
    log_rewrite(m, "Trilu of a computed tensor as a product with its mask", o);
    return 0;
}

static int lower_node(Im *m, ONode *o)
{
    if (!strcmp(o->op, "Trilu") && o->in[0] >= 0 && m->v[o->in[0]].tensor >= 0)
        return lower_trilu(m, o);
    int known = op_lookup(o->op);
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
    if (!strcmp(op, "Cast")) {
        const Val *x = &m->v[o->in[0]];
        int to = dtype_of((int)onnx_attr_int(o, "to", 0));
        if (to != (int)x->dt)
            return lower_error(m, o, ctx_printf(m->c, "Cast of a computed "
                "tensor from %s to %s; remat casts only constants",
                x->dt == DT_F32 ? "float32" : "int64",
                onnx_dtype_name((int)onnx_attr_int(o, "to", 0))));
        op = "Identity";
        o->p = NULL;    /* `to` is the input's own type: nothing to keep */
    }
    int k = op_lookup(op);
    if (k < 0) {
        Buf b;
        buf_init(&b, m->c);
        for (int i = 0; i < OP_COUNT; i++)
            buf_printf(&b, "%s%s", i ? ", " : "", op_table[i].name);
        return lower_error(m, o, ctx_printf(m->c, "op %s is not supported; "
            "remat computes %s (and folds constant subgraphs of Shape, "
            "Constant, ConstantOfShape, Cast, Equal, Range, ...)", o->op,
            b.data));
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
    int p = param_of(m, x, &o);
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
        if (m->v[v].trainable && param_of(m, &m->v[v], &init_node) < 0)
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

/* ---- blocks --------------------------------------------------------------------------------- */

/* The NAME.N key in s, the first of the form IDENT.DIGITS ending at a '/'
 * or '.'; NULL if none. stem_len: the length of NAME. */
static const char *block_key(Ctx *c, const char *s, size_t *stem_len)
{
    for (const char *p = s; *p; p++) {
        if (*p != '.' || p == s || !(p[1] >= '0' && p[1] <= '9'))
            continue;
        const char *e = p + 1;
        while (*e >= '0' && *e <= '9')
            e++;
        if (*e && *e != '/' && *e != '.')
            continue;
        const char *b = p;
        while (b > s && b[-1] != '/')
            b--;
        if (b == p)
            continue;
        *stem_len = (size_t)(p - b);
        char *k = ctx_alloc(c, (size_t)(e - b) + 1);
        memcpy(k, b, (size_t)(e - b));
        return k;
    }
    return NULL;
}

static const char *node_key(Im *m, const Node *n, size_t *stem)
{
    const char *k = block_key(m->c, n->name, stem);
    for (int i = 0; !k && i < n->nin; i++) {
        const Tensor *t = &m->g->tensors[n->in[i]];
        if (t->kind == T_PARAM && t->trainable)
            k = block_key(m->c, t->name, stem);
    }
    return k;
}

static void find_blocks(Im *m)
{
    Graph *g = m->g;
    const char **key = ctx_alloc(m->c, ((size_t)g->nnodes + 1) * sizeof(char *));
    size_t *stem = ctx_alloc(m->c, ((size_t)g->nnodes + 1) * sizeof(size_t));
    for (int k = 0; k < g->nnodes; k++)
        key[k] = node_key(m, &g->nodes[k], &stem[k]);
    g->blocks = ctx_alloc(m->c, ((size_t)g->nnodes + 1) * sizeof(Block));
    for (int k = 0; k < g->nnodes; k++) {
        if (!key[k])
            continue;
        /* a stem with at least two indices repeats */
        int repeats = 0;
        for (int j = 0; j < g->nnodes && !repeats; j++)
            repeats = key[j] && stem[j] == stem[k] &&
                      !strncmp(key[j], key[k], stem[k]) && strcmp(key[j], key[k]);
        if (!repeats)
            continue;
        int b = -1;
        for (int j = 0; j < g->nblocks; j++)
            if (!strcmp(g->blocks[j].name, key[k]))
                b = j;
        if (b < 0) {
            b = g->nblocks++;
            g->blocks[b].name = key[k];
        }
        g->nodes[k].block = b;
    }
}

/* ---- the XML ------------------------------------------------------------------------------------ */

static const char *shape_attr(Ctx *c, const Tensor *t)
{
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "%s", "");
    for (int d = 0; d < t->rank; d++)
        buf_printf(&b, "%s%ld", d ? " " : "", t->dims[d]);
    return b.data;
}

static void write_node(Buf *b, Ctx *c, const Graph *g, const Node *n,
                       const char *indent)
{
    const OpInfo *info = &op_table[n->op];
    buf_printf(b, "%s<node name=\"%s\" op=\"%s\" in=\"", indent, n->name,
               info->name);
    for (int i = 0; i < n->nin; i++)
        buf_printf(b, "%s%s", i ? " " : "", g->tensors[n->in[i]].name);
    buf_printf(b, "\" out=\"");
    for (int i = 0; i < n->nout; i++)
        buf_printf(b, "%s%s", i ? " " : "", g->tensors[n->out[i]].name);
    buf_printf(b, "\"");
    for (int k = 0; info->attrs[k].name; k++) {
        const Attr *a = &n->attrs[k];
        if (!a->set)
            continue;
        buf_printf(b, " %s=\"", info->attrs[k].name);
        switch (info->attrs[k].type) {
        case ATTR_INT: buf_printf(b, "%ld", a->i); break;
        case ATTR_FLOAT: buf_printf(b, "%.9g", (double)a->f); break;
        case ATTR_STRING: buf_printf(b, "%s", a->s); break;
        case ATTR_INTS:
            for (int j = 0; j < a->nints; j++)
                buf_printf(b, "%s%ld", j ? " " : "", a->ints[j]);
            break;
        }
        buf_printf(b, "\"");
    }
    buf_printf(b, "/>\n");
    (void)c;
}

/* A C identifier from the file's stem, clear of the generated tables'
 * prefixes (parse.c's check_model_name). */
static const char *model_name(Ctx *c, const char *stem)
{
    char *s = ctx_printf(c, "%s%s", (stem[0] >= '0' && stem[0] <= '9') ||
                         !stem[0] ? "m_" : "", stem);
    for (char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              (*p >= '0' && *p <= '9') || *p == '_'))
            *p = '_';
    if (strlen(s) > 48)
        s[48] = '\0';
    static const char *const taken[] = {"rt", "map", "init", "bmm", "bmma",
                                        "bmmb", "dims", "perm", "win", NULL};
    for (int k = 0; taken[k]; k++) {
        size_t n = strlen(taken[k]);
        if (!strncmp(s, taken[k], n) && (s[n] == '\0' || s[n] == '_'))
            return ctx_printf(c, "model_%s", s);
    }
    return s;
}

static const char *weight_path(Im *m, const Tensor *t)
{
    char *s = ctx_strdup(m->c, t->name);
    for (char *p = s; *p; p++)
        if (*p == '/' || *p == ':')
            *p = '_';
    return ctx_printf(m->c, "%s/%s.npy", m->weights_dir, s);
}

static void write_summary(Im *m, Buf *b)
{
    buf_printf(b, "<!-- imported by remat import from an ONNX model (opset "
               "%ld):\n", m->opset);
    buf_printf(b, "  folded %d constant nodes at compile time", m->nfolded);
    for (int k = 0; k < m->nfold_ops; k++)
        buf_printf(b, "%s%s %d", k ? ", " : " (", m->fold_ops[k],
                   m->fold_counts[k]);
    buf_printf(b, "%s\n", m->nfold_ops ? ")" : "");
    buf_printf(b, "%s", m->log.data ? m->log.data : "");
    buf_printf(b, "  blocks:");
    for (int k = 0; k < m->g->nblocks; k++)
        buf_printf(b, " %s", m->g->blocks[k].name);
    buf_printf(b, "%s (from repeated NAME.N scopes and parameter names) -->\n",
               m->g->nblocks ? "" : " none");
}

int onnx_write(Im *m, const char *stem, Imported *out)
{
    Graph *g = m->g;
    Ctx *c = m->c;
    if (!m->opt || m->opt->blocks)
        find_blocks(m);
    memset(out, 0, sizeof *out);
    buf_init(&out->xml, c);
    buf_init(&out->report, c);
    Buf *b = &out->xml;
    buf_printf(b, "<?xml version=\"1.0\"?>\n");
    write_summary(m, b);
    write_summary(m, &out->report);
    buf_printf(b, "<model name=\"%s\" format=\"1\">\n  <graph>\n",
               model_name(c, stem));
    out->weights = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof(Weight));
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind == T_INPUT)
            buf_printf(b, "    <input name=\"%s\" shape=\"%s\"%s/>\n", x->name,
                       shape_attr(c, x), x->is_int ? " dtype=\"int64\"" : "");
    }
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind != T_PARAM)
            continue;
        const char *path = weight_path(m, x);
        buf_printf(b, "    <initializer name=\"%s\" shape=\"%s\" init=\"file\" "
                   "path=\"%s\"%s/>\n", x->name, shape_attr(c, x), path,
                   x->trainable ? "" : " trainable=\"false\"");
        Weight *w = &out->weights[out->nweights++];
        w->path = path;
        w->name = x->name;
        w->data = x->data;
        w->numel = x->numel;
        w->rank = x->rank;
        for (int d = 0; d < x->rank; d++)
            w->dims[d] = x->dims[d];
    }
    char *written = ctx_alloc(c, (size_t)g->nblocks + 1);
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        if (n->block < 0) {
            write_node(b, c, g, n, "    ");
            continue;
        }
        if (written[n->block])
            continue;
        written[n->block] = 1;
        buf_printf(b, "    <block name=\"%s\">\n", g->blocks[n->block].name);
        for (int j = k; j < g->nnodes; j++)
            if (g->nodes[j].block == n->block)
                write_node(b, c, g, &g->nodes[j], "      ");
        buf_printf(b, "    </block>\n");
    }
    for (int k = 0; k < m->noutputs; k++) {
        const Val *x = &m->v[m->outputs[k]];
        buf_printf(b, "    <output name=\"%s\"%s/>\n",
                   g->tensors[x->tensor].name,
                   m->outputs[k] == m->loss ? " loss=\"true\""
                                            : " loss=\"false\"");
    }
    buf_printf(b, "  </graph>\n</model>\n");
    return 0;
}
