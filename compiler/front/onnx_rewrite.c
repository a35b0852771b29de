/*
 * onnx_rewrite.c: the ONNX front end's rewrites (see onnx_lower.c's essay):
 * patterns torch spells out that become the op they stand for (GELU in
 * both forms, LayerNorm before opset 17, causal attention, a transposed
 * weight under MatMul, Gather of a constant range, Trilu of a computed
 * tensor, torch's GroupNorm, a zero Pad before a Conv or an AveragePool),
 * and the optional outputs computed beside the node that has
 * them (LayerNormalization's statistics, SoftmaxCrossEntropyLoss's
 * log-probabilities). Each matches exactly or leaves the nodes alone.
 * Einsum is lowered here too, into ReduceSum, Transpose, Reshape and
 * MatMul (issue 25; the section at the end).
 */
#include "onnx_impl.h"

#include <math.h>
#include <string.h>

/* A scalar constant as a non-trainable parameter. */
int scalar_param(Im *m, const char *name, float v)
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
int node1(Im *m, const ONode *o, const char *name, OpKind op,
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
int lower_layer_norm_stats(Im *m, ONode *o)
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


/* SoftmaxCrossEntropyLoss whose log-probabilities (output 1) are read:
 * the loss as one node, and LogSoftmax over the class axis beside it. */
int lower_sce_log_prob(Im *m, ONode *o)
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

/* ---- rewrites ------------------------------------------------------------------------- */

int is_const_scalar(const Im *m, int v, double want, double tol)
{
    /* rank 0 or 1: a (1, 1, 1) constant would broadcast x to rank 3 */
    if (v < 0 || !m->v[v].known || m->v[v].numel != 1 || m->v[v].varying ||
        m->v[v].rank > 1)
        return 0;
    double x = val_get(&m->v[v], 0);
    return isinf(want) ? x == want : fabs(x - want) <= tol;
}

/* The one node reading value v, if exactly one does and it is not a graph
 * output. */
ONode *only_reader(Im *m, int v, const char *op)
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

void log_rewrite(Im *m, const char *what, const ONode *o)
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
    /* scale and bias over exactly the normalized axes: LayerNormalization
     * takes nothing that broadcasts otherwise */
    const Val *wv = &m->v[w], *bv = &m->v[b], *xv = &m->v[x];
    if (wv->rank != -axis || bv->rank != -axis)
        return 0;
    for (int d = 0; d < wv->rank; d++)
        if (wv->dims[d] != bv->dims[d] ||
            (xv->shaped && wv->dims[d] != xv->dims[xv->rank + axis + d]))
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

/* ---- issue 25: torch's GroupNorm, and zero Pads before a Conv or pool ----------- */

/* The values of v, a known 1-D int64 constant of at most max values (a
 * Shape of a computed tensor too: shapes are static), into out: their
 * count, or -1. */
static int const_ints(const Im *m, int v, long *out, int max)
{
    if (v < 0 || !m->v[v].known || m->v[v].dt == DT_F32 ||
        m->v[v].rank != 1 || m->v[v].numel > max)
        return -1;
    for (long k = 0; k < m->v[v].numel; k++)
        out[k] = (long)val_geti(&m->v[v], k);
    return (int)m->v[v].numel;
}

/* v is a known float constant of n values, each exactly want. */
static int const_fill(const Im *m, int v, long n, double want)
{
    if (v < 0 || !m->v[v].known || m->v[v].varying || m->v[v].dt != DT_F32 ||
        m->v[v].numel != n)
        return 0;
    for (long k = 0; k < n; k++)
        if (val_get(&m->v[v], k) != want)
            return 0;
    return 1;
}

/* v = Unsqueeze(W), read only here, W a float initializer of c values
 * made (c, 1, ..., 1) by the axes 1 .. rank - 2, so that it broadcasts
 * per channel against a (N, c, ...) tensor of `rank` dims: W, or -1. A
 * *c or *rank of -1 is taken from W and the axes. */
static int unsqueezed_param(Im *m, int v, long *c, int *rank, ONode **uq)
{
    ONode *u = single_producer(m, v, "Unsqueeze");
    if (!u || u->nin < 1 || u->in[0] < 0)
        return -1;
    const Val *w = &m->v[u->in[0]];
    if (!w->init || w->dt != DT_F32 || w->rank != 1 ||
        (*c >= 0 && w->dims[0] != *c))
        return -1;
    long axes[MAX_RANK];
    int na = -1;
    if (u->nin > 1 && u->in[1] >= 0)
        na = const_ints(m, u->in[1], axes, MAX_RANK - 2);
    else {
        const Onnx__AttributeProto *a = onnx_attr(u, "axes");
        if (a && a->n_ints <= MAX_RANK - 2) {
            na = (int)a->n_ints;
            for (int k = 0; k < na; k++)
                axes[k] = (long)a->ints[k];
        }
    }
    if (na < 0 || (*rank >= 0 && na != *rank - 2))
        return -1;
    int seen[MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
        long a = axes[k] < 0 ? axes[k] + na + 1 : axes[k];
        if (a < 1 || a > na || seen[a]++)
            return -1;
    }
    *c = w->dims[0];
    *rank = na + 2;
    *uq = u;
    return u->in[0];
}

/* torch 1.13's nn.GroupNorm(G, C): Reshape x to (0, G, -1),
 * InstanceNormalization with constant ones and zeros (G of each), Reshape
 * back to Shape(x), Mul by Unsqueeze(weight), Add Unsqueeze(bias): one
 * GroupNormalization of x, weight and bias (per channel), the Add's
 * output keeping its name and the parameters theirs. x's shape is not
 * known yet (shapes come as the nodes are lowered): the channels are the
 * weight's length, and lower_plain checks x's rank against the rank the
 * Unsqueezes broadcast to (a pattern that broadcasts elsewhere is
 * refused, never compiled to something else). */
static int try_group_norm(Im *m, ONode *in)
{
    if (strcmp(in->op, "InstanceNormalization") || in->nin != 3)
        return 0;
    ONode *r1 = single_producer(m, in->in[0], "Reshape");
    ONode *r2 = r1 && r1->nin >= 2 ? only_reader(m, in->out[0], "Reshape")
                                   : NULL;
    if (!r2 || r2->nin < 2 || r2->in[0] != in->out[0] || r2->in[1] < 0 ||
        m->v[r2->in[1]].producer < 0)
        return 0;
    int x = r1->in[0];
    const ONode *sh = &m->nodes[m->v[r2->in[1]].producer];
    long grouped[3];
    if (strcmp(sh->op, "Shape") || sh->nin < 1 || sh->in[0] != x ||
        onnx_attr(sh, "start") || onnx_attr(sh, "end") ||
        const_ints(m, r1->in[1], grouped, 3) != 3 || grouped[0] != 0 ||
        grouped[2] != -1)
        return 0;
    long c = -1, groups = grouped[1];
    int rank = -1;
    ONode *mul = only_reader(m, r2->out[0], "Mul"), *uw = NULL, *ub = NULL;
    int w = mul ? unsqueezed_param(m, other(mul, r2->out[0]), &c, &rank, &uw)
                : -1;
    ONode *add = w >= 0 ? only_reader(m, mul->out[0], "Add") : NULL;
    int b = add ? unsqueezed_param(m, other(add, mul->out[0]), &c, &rank, &ub)
                : -1;
    if (b < 0 || uw == ub || groups < 1 || c % groups ||
        !const_fill(m, in->in[1], groups, 1.0) ||
        !const_fill(m, in->in[2], groups, 0.0))
        return 0;
    const Onnx__AttributeProto *ea = onnx_attr(in, "epsilon");
    r1->done = in->done = r2->done = mul->done = uw->done = ub->done = 1;
    add->op = "GroupNormalization";
    add->p = NULL;
    add->in[0] = x;
    add->in[1] = w;
    add->in[2] = b;
    add->nin = 3;
    add->num_groups = groups;
    add->causal = rank;     /* x's rank, for lower_plain to check */
    add->epsilon = ea && ea->has_f ? ea->f : 1e-5f;
    log_rewrite(m, "Reshape/InstanceNormalization/Reshape/Mul/Add (torch's "
                "GroupNorm) as GroupNormalization", add);
    return 1;
}

/* A Pad of zeros (constant mode, value 0) of the spatial axes alone, by
 * no negative amount, whose output only a Conv or an AveragePool reads,
 * as its input 0, with explicit pads (no auto_pad): the Pad goes, and
 * its amounts are added to that node's pads when it is lowered. torch
 * 1.13 exports nn.AvgPool2d with count_include_pad=True so, even with
 * zero padding: the AveragePool then counts the padding
 * (count_include_pad 1), which is what it did to the Pad's zeros; one
 * that did not count its own nonzero pads is left alone, and so is one
 * with ceil_mode (which treats a window starting in the padding apart). */
static int try_fold_pad(Im *m, ONode *pad)
{
    if (strcmp(pad->op, "Pad") || pad->nin < 2 || m->opset < 11 ||
        (pad->nin > 3 && pad->in[3] >= 0) ||
        (pad->nin > 2 && pad->in[2] >= 0 &&
         !is_const_scalar(m, pad->in[2], 0.0, 0)))
        return 0;
    const Onnx__AttributeProto *mode = onnx_attr(pad, "mode");
    if (mode && !(mode->s.len == 8 && !memcmp(mode->s.data, "constant", 8)))
        return 0;
    long p[2 * MAX_RANK];
    int k = const_ints(m, pad->in[1], p, 2 * MAX_RANK), rank = k / 2;
    if (k < 6 || k % 2 || p[0] || p[1] || p[rank] || p[rank + 1])
        return 0;
    for (int i = 0; i < k; i++)
        if (p[i] < 0)
            return 0;
    ONode *next = only_reader(m, pad->out[0], "Conv");
    if (!next)
        next = only_reader(m, pad->out[0], "AveragePool");
    if (!next || next->in[0] != pad->out[0] || next->nfold_pads || !next->p)
        return 0;
    const Onnx__AttributeProto *ap = onnx_attr(next, "auto_pad");
    if (ap && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6)))
        return 0;
    int pool = !strcmp(next->op, "AveragePool");
    /* ceil_mode drops a last window that would start in the end padding:
     * the Pad's zeros would become such padding, so the shape could change */
    if (pool && onnx_attr_int(next, "ceil_mode", 0))
        return 0;
    const Onnx__AttributeProto *own = onnx_attr(next, "pads");
    if (own && own->n_ints != (size_t)(k - 4))
        return 0;
    if (pool && !onnx_attr_int(next, "count_include_pad", 0))
        for (size_t i = 0; own && i < own->n_ints; i++)
            if (own->ints[i])
                return 0;
    next->nfold_pads = k - 4;
    for (int d = 0; d < rank - 2; d++) {
        next->fold_pads[d] = p[2 + d];
        next->fold_pads[rank - 2 + d] = p[rank + 2 + d];
    }
    next->in[0] = pad->in[0];
    pad->done = 1;
    log_rewrite(m, pool ? "a zero Pad folded into AveragePool's pads "
                "(count_include_pad=1)" : "a zero Pad folded into Conv's "
                "pads", next);
    return 1;
}

void rewrite_patterns(Im *m)
{
    for (int k = 0; k < m->nn; k++) {
        ONode *o = &m->nodes[k];
        if (o->done || o->nout < 1 || o->out[0] < 0 || m->v[o->out[0]].known)
            continue;
        (void)(try_gelu(m, o) || try_gelu_tanh(m, o) || try_layer_norm(m, o) ||
               try_group_norm(m, o) || try_fold_pad(m, o));
    }
}

/* Transpose of a 2-D parameter read only by MatMuls as their B: kept as a
 * note on the value, for lower_matmul. */
int keep_transposed(Im *m, ONode *o)
{
    if (strcmp(o->op, "Transpose") || o->in[0] < 0)
        return 0;
    Val *w = &m->v[o->in[0]];
    const Onnx__AttributeProto *perm = onnx_attr(o, "perm");
    if (!w->init || w->rank != 2 ||
        (perm && (perm->n_ints != 2 || perm->ints[0] != 1 || perm->ints[1] != 0)))
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
int lower_matmul_t(Im *m, ONode *o)
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

/* Gather(data, constant indices of any shape) where the indices,
 * flattened, are a range (Hugging Face's position ids, a (1, T) buffer of
 * 0 .. T-1, or torch.arange(T).unsqueeze(0)) or one index repeated (BERT's
 * token type ids, a buffer of zeros): a Slice of those rows of data along
 * the axis, then a Reshape view to Gather's output shape (data's
 * dimensions before the axis, the indices' shape, data's after it) where
 * it differs, and for a repeated index an Expand to that shape. Other
 * indices along axis 0 stay a Gather, of an int64 constant. Negative
 * indices count from the end; one outside [-n, n) is an error. */
int lower_gather_const(Im *m, ONode *o)
{
    const Val *ix = &m->v[o->in[1]];
    int dt = tensor_of(m, o->in[0], o);
    if (dt < 0)
        return -1;
    const Tensor *x = &m->g->tensors[dt];
    long axis = onnx_attr_int(o, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    if (ix->dt == DT_F32)
        return lower_error(m, o, "Gather's indices are float; ONNX takes "
                           "int64 or int32 indices");
    if (ix->numel == 0 || axis < 0 || axis >= x->rank)
        return lower_error(m, o, "Gather with constant indices needs at least "
                           "one index and an axis of the data");
    if (x->rank - 1 + ix->rank > MAX_RANK)
        return lower_error(m, o, ctx_printf(m->c, "Gather's output would have "
                           "rank %d; remat takes at most %d",
                           x->rank - 1 + ix->rank, MAX_RANK));
    long n = x->dims[axis];
    int64_t first = ix->i[0] < 0 ? ix->i[0] + n : ix->i[0];
    int range = 1, same = 1;
    for (long k = 0; k < ix->numel; k++) {
        int64_t v = ix->i[k] < 0 ? ix->i[k] + n : ix->i[k];
        if (v < 0 || v >= n)
            return lower_error(m, o, ctx_printf(m->c, "Gather index %lld is "
                "outside [-%ld, %ld), the data's extent along axis %ld",
                (long long)ix->i[k], n, n, axis));
        range &= v == first + k;
        same &= v == first;
    }
    /* other indices along axis 0: a Gather reading them as an int64
     * constant (a static array of the C file) */
    if (!range && !same && axis == 0)
        return lower_plain(m, o, OP_GATHER);
    if (!range && !same)
        return lower_error(m, o, ctx_printf(m->c, "Gather with constant "
            "indices along axis %ld is supported where they are consecutive "
            "(a range) or all one index; along axis 0 any indices are",
            axis));
    /* Gather's output shape */
    long out[MAX_RANK], mid[MAX_RANK];
    int rank = 0;
    for (int d = 0; d < axis; d++)
        mid[rank] = out[rank] = x->dims[d], rank++;
    for (int d = 0; d < ix->rank; d++)
        mid[rank] = range ? ix->dims[d] : 1, out[rank++] = ix->dims[d];
    for (int d = (int)axis + 1; d < x->rank; d++)
        mid[rank] = out[rank] = x->dims[d], rank++;
    const char *yname = m->v[o->out[0]].name;
    long count = range ? ix->numel : 1;
    int reshape = x->rank != rank, expand = !range && ix->numel > 1;
    for (int d = 0; !reshape && d < rank; d++)
        reshape = (d == axis ? count : x->dims[d]) != mid[d];
    /* the last node has the ONNX node's name and output's; those before
     * it, these with a suffix */
    Node *s = new_node(m, reshape || expand ? ctx_printf(m->c, "%s/slice",
                       o->name) : o->name, OP_SLICE);
    s->in[s->nin++] = dt;
    long st = (long)first, en = (long)first + count, ax = axis;
    set_ints(s, "starts", &st, 1);
    set_ints(s, "ends", &en, 1);
    set_ints(s, "axes", &ax, 1);
    int y = add_out(m, s, reshape || expand ? ctx_printf(m->c, "%s_rows",
                    yname) : yname);
    if (finish_node(m, s, o))
        return -1;
    if (reshape) {          /* the indices' dimensions: a Reshape view */
        Node *r = new_node(m, expand ? ctx_printf(m->c, "%s/reshape", o->name)
                                     : o->name, OP_RESHAPE);
        r->in[r->nin++] = y;
        set_ints(r, "shape", mid, rank);
        y = add_out(m, r, expand ? ctx_printf(m->c, "%s_view", yname) : yname);
        if (finish_node(m, r, o))
            return -1;
    }
    if (expand) {           /* one row, repeated */
        Node *e = new_node(m, o->name, OP_EXPAND);
        e->in[e->nin++] = y;
        set_ints(e, "shape", out, rank);
        y = add_out(m, e, yname);
        if (finish_node(m, e, o))
            return -1;
    }
    m->v[o->out[0]].tensor = y;
    shape_to_val(&m->v[o->out[0]], &m->g->tensors[y]);
    log_rewrite(m, range ? "Gather of a constant range as Slice"
                         : "Gather of one constant index as Slice and Expand", o);
    return 0;
}

/* Trilu of a computed tensor: a product with the constant 0/1 mask of
 * its last two axes (which the gradient then follows exactly). */
int lower_trilu(Im *m, ONode *o)
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


/* ---- Einsum (issue 25) --------------------------------------------------------------- */

/* Einsum is lowered at import into the IR's own ops, whose backward
 * passes give its gradient. Labels are codes: the ellipsis's dimensions
 * 0 .. EIN_ELL-1 (aligned to the right across the inputs, as numpy
 * broadcasts them), then 'A'-'Z' and 'a'-'z' in ASCII order, so that
 * sorted codes order an implicit output as numpy does (ellipsis first).
 * One input: ReduceSum over the letters the output lacks, then a
 * Transpose to the output's order. Two: each input sums out the letters
 * that neither the other nor the output has (and a dimension of 1 that
 * another input broadcasts), is transposed to (batch, free, contracted)
 * letters and reshaped to one free and one contracted dimension; MatMul
 * multiplies them over the batch letters; a Reshape and a Transpose give
 * the output's order. Steps that would change nothing are left out (a
 * Reshape is a view anyway). More inputs fold from the left, each partial
 * product keeping the letters the output or a later input has. A letter
 * twice in one term (a diagonal or a trace) is refused. */
#define EIN_ELL MAX_RANK
#define EIN_CODES (EIN_ELL + 52)

typedef struct {
    int rank;
    int lab[MAX_RANK];
    int t;                  /* its IR tensor */
} EinVal;

typedef struct {
    Im *m;
    ONode *o;
    const char *eq;         /* the equation, for messages */
    const char *out;        /* the ONNX output's name */
    long size[EIN_CODES];   /* each label's size, broadcast */
    int used[5];            /* the ops made: ein_ops's order */
} Ein;

static const OpKind ein_ops[5] = {OP_REDUCE_SUM, OP_TRANSPOSE, OP_RESHAPE,
                                  OP_MATMUL, OP_IDENTITY};

static int ein_code(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return EIN_ELL + (ch - 'A');
    if (ch >= 'a' && ch <= 'z')
        return EIN_ELL + 26 + (ch - 'a');
    return -1;
}

static char ein_char(int code)
{
    code -= EIN_ELL;
    return (char)(code < 26 ? 'A' + code : 'a' + code - 26);
}

static int ein_error(Ein *e, const char *what)
{
    return lower_error(e->m, e->o, ctx_printf(e->m->c, "equation '%s' %s",
                                              e->eq, what));
}

/* Term s[0..len) as labels, -1 where the ellipsis stands: the count, or
 * -1 on an error. */
static int ein_term(Ein *e, const char *s, size_t len, int *lab)
{
    int n = 0, ell = 0;
    for (size_t k = 0; k < len; k++) {
        if (len - k >= 3 && !strncmp(s + k, "...", 3) && !ell) {
            lab[n++] = -1;
            ell = 1;
            k += 2;
        } else if (ein_code(s[k]) >= 0) {
            if (n - ell == MAX_RANK)
                return ein_error(e, ctx_printf(e->m->c, "has a term of more "
                                 "than %d letters, remat's highest rank",
                                 MAX_RANK));
            lab[n++] = ein_code(s[k]);
        } else {
            return ein_error(e, ctx_printf(e->m->c, "has '%c' in a term; "
                             "a term is letters and at most one '...'", s[k]));
        }
    }
    return n;
}

/* Term lab[0..n) of an operand of rank `rank` (ell: the most dimensions
 * any input's ellipsis stands for) as x's labels; which: "input 1". */
static int ein_expand(Ein *e, const int *lab, int n, int rank, int ell,
                      EinVal *x, const char *which)
{
    int letters = 0, has_ell = 0;
    for (int k = 0; k < n; k++)
        lab[k] < 0 ? (void)(has_ell = 1) : (void)letters++;
    int mine = rank - letters;      /* dimensions its ellipsis stands for */
    if (mine < 0 || (!has_ell && mine))
        return ein_error(e, ctx_printf(e->m->c, "has %d letter%s%s for %s, "
                         "of rank %d", letters, letters == 1 ? "" : "s",
                         has_ell ? " and '...'" : "", which, rank));
    x->rank = 0;
    for (int k = 0; k < n; k++) {
        if (lab[k] >= 0) {
            for (int j = 0; j < x->rank; j++)
                if (x->lab[j] == lab[k])
                    return ein_error(e, ctx_printf(e->m->c, "repeats '%c' in "
                        "%s (a diagonal or a trace); remat lowers Einsum with "
                        "each letter once per term", ein_char(lab[k]), which));
            x->lab[x->rank++] = lab[k];
        } else {
            for (int j = ell - mine; j < ell; j++)
                x->lab[x->rank++] = j;
        }
    }
    return 0;
}

static int ein_has(const EinVal *x, int code)
{
    for (int d = 0; d < x->rank; d++)
        if (x->lab[d] == code)
            return 1;
    return 0;
}

/* A node of op reading in0 (and in1 unless -1), named after the Einsum
 * with the suffix what, its output after the Einsum's output; shape
 * inference runs once the caller has set its attributes (ein_done). */
static Node *ein_node(Ein *e, OpKind op, int in0, int in1, const char *what)
{
    Im *m = e->m;
    Node *n = new_node(m, ctx_printf(m->c, "%s/%s", e->o->name, what), op);
    for (int k = 0; k < 5; k++)
        e->used[k] |= ein_ops[k] == op;
    n->in[n->nin++] = in0;
    if (in1 >= 0)
        n->in[n->nin++] = in1;
    add_out(m, n, ctx_printf(m->c, "%s_%s", e->out, what));
    return n;
}

static int ein_done(Ein *e, Node *n, EinVal *x)
{
    if (finish_node(e->m, n, e->o))
        return -1;
    x->t = n->out[0];
    return 0;
}

/* x's labels that keep[] does not hold summed out, and so is a dimension
 * of 1 that another input broadcasts to more. */
static int ein_sum(Ein *e, EinVal *x, const int *keep, const char *what)
{
    const Tensor *t = &e->m->g->tensors[x->t];
    long axes[MAX_RANK];
    int na = 0, r = 0;
    for (int d = 0; d < x->rank; d++)
        if (!keep[x->lab[d]] || (t->dims[d] == 1 && e->size[x->lab[d]] > 1))
            axes[na++] = d;
        else
            x->lab[r++] = x->lab[d];
    if (!na)
        return 0;
    Node *n = ein_node(e, OP_REDUCE_SUM, x->t, -1, what);
    set_ints(n, "axes", axes, na);
    set_int(n, "keepdims", 0);
    x->rank = r;
    return ein_done(e, n, x);
}

/* x transposed so that its labels run as order[0..x->rank). */
static int ein_transpose(Ein *e, EinVal *x, const int *order, const char *what)
{
    long perm[MAX_RANK];
    int same = 1;
    for (int k = 0; k < x->rank; k++) {
        perm[k] = -1;
        for (int d = 0; d < x->rank; d++)
            if (x->lab[d] == order[k])
                perm[k] = d;
        assert(perm[k] >= 0);
        same &= perm[k] == k;
    }
    if (same)
        return 0;
    Node *n = ein_node(e, OP_TRANSPOSE, x->t, -1, what);
    set_ints(n, "perm", perm, x->rank);
    for (int k = 0; k < x->rank; k++)
        x->lab[k] = order[k];
    return ein_done(e, n, x);
}

/* x's floats as shape dims[0..rank) (a view; none where it has it). */
static int ein_reshape(Ein *e, EinVal *x, int rank, const long *dims,
                       const char *what)
{
    const Tensor *t = &e->m->g->tensors[x->t];
    int same = t->rank == rank;
    for (int d = 0; same && d < rank; d++)
        same = t->dims[d] == dims[d];
    if (same)
        return 0;
    Node *n = ein_node(e, OP_RESHAPE, x->t, -1, what);
    set_ints(n, "shape", dims, rank);
    return ein_done(e, n, x);
}

/* The product of a and b keeping the labels need[] holds, as r. */
static int ein_pair(Ein *e, EinVal *a, EinVal *b, const int *need, EinVal *r)
{
    int keep[EIN_CODES];
    for (int c = 0; c < EIN_CODES; c++)
        keep[c] = need[c] || ein_has(b, c);
    if (ein_sum(e, a, keep, "sum_a"))
        return -1;
    for (int c = 0; c < EIN_CODES; c++)
        keep[c] = need[c] || ein_has(a, c);
    if (ein_sum(e, b, keep, "sum_b"))
        return -1;
    /* batch letters (both, kept), a's free, contracted (both, not kept),
     * b's free; ordered as they come in a, then in b */
    int bat[MAX_RANK], fa[MAX_RANK], ct[MAX_RANK], fb[MAX_RANK];
    int nb = 0, nfa = 0, nct = 0, nfb = 0;
    for (int d = 0; d < a->rank; d++) {
        int c = a->lab[d];
        if (!ein_has(b, c))
            fa[nfa++] = c;
        else if (need[c])
            bat[nb++] = c;
        else
            ct[nct++] = c;
    }
    for (int d = 0; d < b->rank; d++)
        if (!ein_has(a, b->lab[d]))
            fb[nfb++] = b->lab[d];
    if (nb + nfa + nfb > MAX_RANK)
        return ein_error(e, ctx_printf(e->m->c, "makes a product of rank %d; "
                         "remat's rank is at most %d", nb + nfa + nfb,
                         MAX_RANK));
    int oa[MAX_RANK], ob[MAX_RANK], na = 0, nob = 0;
    long pfa = 1, pct = 1, pfb = 1;
    for (int k = 0; k < nb; k++)
        oa[na++] = ob[nob++] = bat[k];
    for (int k = 0; k < nfa; k++)
        pfa *= e->size[oa[na++] = fa[k]];
    for (int k = 0; k < nct; k++)
        pct *= e->size[oa[na++] = ob[nob++] = ct[k]];
    for (int k = 0; k < nfb; k++)
        pfb *= e->size[ob[nob++] = fb[k]];
    if (ein_transpose(e, a, oa, "t_a") || ein_transpose(e, b, ob, "t_b"))
        return -1;
    /* the batch letters as they are, or as one where 2 more would not fit */
    long da[MAX_RANK], db[MAX_RANK], dr[MAX_RANK];
    int rb = nb + 2 <= MAX_RANK ? nb : 1;
    for (int k = 0; k < rb; k++)
        da[k] = db[k] = dr[k] = 1;
    for (int k = 0; k < nb; k++)
        da[rb == nb ? k : 0] *= e->size[bat[k]];
    for (int k = 0; k < rb; k++)
        db[k] = da[k];
    da[rb] = pfa;
    da[rb + 1] = db[rb] = pct;
    db[rb + 1] = pfb;
    if (ein_reshape(e, a, rb + 2, da, "a_3d") ||
        ein_reshape(e, b, rb + 2, db, "b_3d"))
        return -1;
    Node *n = ein_node(e, OP_MATMUL, a->t, b->t, "matmul");
    if (ein_done(e, n, r))
        return -1;
    r->rank = 0;
    for (int k = 0; k < nb; k++)
        r->lab[r->rank++] = bat[k];
    for (int k = 0; k < nfa; k++)
        r->lab[r->rank++] = fa[k];
    for (int k = 0; k < nfb; k++)
        r->lab[r->rank++] = fb[k];
    for (int k = 0; k < r->rank; k++)
        dr[k] = e->size[r->lab[k]];
    return ein_reshape(e, r, r->rank, dr, "unflat");
}

/* The equation's terms as each input's labels (x[0..nin)) and the
 * output's (out, its count *nout): checked, and each label's size. */
static int ein_parse(Ein *e, EinVal *x, int *out, int *nout)
{
    Im *m = e->m;
    const char *eq = e->eq, *arrow = strstr(eq, "->");
    const char *end = arrow ? arrow : eq + strlen(eq);
    int lab[MAX_IO][MAX_RANK + 1], n[MAX_IO], ell = 0, ni = 0;
    for (const char *s = eq; ; ni++) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *stop = comma ? comma : end;
        if (ni == e->o->nin)
            return ein_error(e, ctx_printf(m->c, "has more terms than the "
                             "node's %d input%s", e->o->nin,
                             e->o->nin == 1 ? "" : "s"));
        if ((n[ni] = ein_term(e, s, (size_t)(stop - s), lab[ni])) < 0)
            return -1;
        int letters = 0;
        for (int k = 0; k < n[ni]; k++)
            letters += lab[ni][k] >= 0;
        int mine = m->g->tensors[x[ni].t].rank - letters;
        if (letters < n[ni] && mine > ell)
            ell = mine;
        if (!comma)
            break;
        s = comma + 1;
    }
    if (++ni != e->o->nin)
        return ein_error(e, ctx_printf(m->c, "has %d term%s for the node's %d "
                         "inputs", ni, ni == 1 ? "" : "s", e->o->nin));
    int count[EIN_CODES] = {0}, from[EIN_CODES] = {0};
    for (int i = 0; i < ni; i++) {
        if (ein_expand(e, lab[i], n[i], m->g->tensors[x[i].t].rank, ell, &x[i],
                       ctx_printf(m->c, "input %d", i)))
            return -1;
        const Tensor *t = &m->g->tensors[x[i].t];
        for (int d = 0; d < x[i].rank; d++) {
            int c = x[i].lab[d];
            long s = t->dims[d];
            count[c]++;
            if (count[c] > 1 && s != e->size[c] && s != 1 && e->size[c] != 1)
                return ein_error(e, ctx_printf(m->c, "gives %s size %ld in "
                    "input %d and %ld in input %d, which do not broadcast",
                    c < EIN_ELL ? "'...'" : ctx_printf(m->c, "'%c'",
                    ein_char(c)), e->size[c], from[c], s, i));
            if (count[c] == 1 || e->size[c] == 1) {
                e->size[c] = s;
                from[c] = i;
            }
        }
    }
    *nout = 0;
    if (!arrow) {   /* implicit: the ellipsis, then letters met once, sorted */
        for (int c = 0; c < EIN_CODES; c++) {
            if (!(c < ell || (c >= EIN_ELL && count[c] == 1)))
                continue;
            if (*nout == MAX_RANK)
                return ein_error(e, ctx_printf(m->c, "has an output of rank "
                                 "more than %d, remat's highest", MAX_RANK));
            out[(*nout)++] = c;
        }
        return 0;
    }
    int ol[MAX_RANK + 1], no = ein_term(e, arrow + 2, strlen(arrow + 2), ol);
    if (no < 0)
        return -1;
    int has_ell = 0;
    for (int k = 0; k < no; k++) {
        if (ol[k] < 0) {
            has_ell = 1;
            if (*nout + ell > MAX_RANK)
                return ein_error(e, ctx_printf(m->c, "has an output of rank "
                                 "more than %d, remat's highest", MAX_RANK));
            for (int j = 0; j < ell; j++)
                out[(*nout)++] = j;
            continue;
        }
        for (int j = 0; j < *nout; j++)
            if (out[j] == ol[k])
                return ein_error(e, ctx_printf(m->c, "repeats '%c' in its "
                                 "output", ein_char(ol[k])));
        if (!count[ol[k]])
            return ein_error(e, ctx_printf(m->c, "has '%c' in its output but "
                             "in no input", ein_char(ol[k])));
        if (*nout == MAX_RANK)
            return ein_error(e, ctx_printf(m->c, "has an output of rank more "
                             "than %d, remat's highest", MAX_RANK));
        out[(*nout)++] = ol[k];
    }
    if (ell && !has_ell)
        return ein_error(e, "has '...' standing for dimensions in an input "
                         "but not in its output; ONNX and numpy refuse that");
    return 0;
}

int lower_einsum(Im *m, ONode *o)
{
    const Onnx__AttributeProto *a = onnx_attr(o, "equation");
    if (!a || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
        return lower_error(m, o, "has no equation attribute (a string)");
    if (o->nin < 1 || o->nin > MAX_IO || o->nout != 1 || o->out[0] < 0)
        return lower_error(m, o, ctx_printf(m->c, "has %d inputs and %d "
                           "outputs; remat lowers Einsum of 1 to %d inputs "
                           "with its one output", o->nin, o->nout, MAX_IO));
    /* the equation without its spaces */
    char *eq = ctx_alloc(m->c, a->s.len + 1);
    size_t len = 0;
    for (size_t k = 0; k < a->s.len; k++)
        if (a->s.data[k] != ' ')
            eq[len++] = (char)a->s.data[k];
    eq[len] = '\0';
    Ein e = {.m = m, .o = o, .eq = eq, .out = m->v[o->out[0]].name};
    if (im_reserve(m, 10 * o->nin + 2))
        return -1;
    EinVal x[MAX_IO];
    for (int i = 0; i < o->nin; i++) {
        if (o->in[i] < 0)
            return lower_error(m, o, ctx_printf(m->c, "input %d is left out; "
                               "Einsum reads every input given", i));
        if ((x[i].t = tensor_of(m, o->in[i], o)) < 0)
            return -1;
        if (m->g->tensors[x[i].t].is_int)
            return lower_error(m, o, ctx_printf(m->c, "input %d '%s' is "
                "int64; remat computes Einsum in float32", i,
                m->g->tensors[x[i].t].name));
    }
    int out[MAX_RANK], nout = 0, first = m->g->ntensors;
    if (ein_parse(&e, x, out, &nout))
        return -1;
    int need[EIN_CODES] = {0};
    for (int k = 0; k < nout; k++)
        need[out[k]] = 1;
    EinVal acc = x[0];
    if (o->nin == 1) {
        if (ein_sum(&e, &acc, need, "sum"))
            return -1;
    }
    for (int i = 1; i < o->nin; i++) {
        int later[EIN_CODES];
        for (int c = 0; c < EIN_CODES; c++) {
            later[c] = need[c];
            for (int j = i + 1; j < o->nin; j++)
                later[c] |= ein_has(&x[j], c);
        }
        EinVal r;
        if (ein_pair(&e, &acc, &x[i], later, &r))
            return -1;
        acc = r;
    }
    if (ein_transpose(&e, &acc, out, "t"))
        return -1;
    if (acc.t < first) {    /* the output is an input as it is */
        Node *n = ein_node(&e, OP_IDENTITY, acc.t, -1, "identity");
        if (ein_done(&e, n, &acc))
            return -1;
    }
    rename_tensor(m, acc.t, e.out);
    m->v[o->out[0]].tensor = acc.t;
    shape_to_val(&m->v[o->out[0]], &m->g->tensors[acc.t]);
    const char *ops = "";
    int nused = 0;
    for (int k = 0; k < 5; k++)
        nused += e.used[k];
    for (int k = 0, j = 0; k < 5; k++)
        if (e.used[k])
            ops = ctx_printf(m->c, "%s%s%s", ops, !j++ ? "" : j == nused ?
                             " and " : ", ", op_table[ein_ops[k]].name);
    log_rewrite(m, ctx_printf(m->c, "Einsum '%s' as %s", eq, ops), o);
    return 0;
}
