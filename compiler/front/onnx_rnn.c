/*
 * onnx_rnn.c: ONNX's recurrent layers (LSTM, GRU, RNN) unrolled over
 * their static sequence into the IR's own ops, one block per time step.
 *
 * A recurrent node becomes, for each direction, the gate arithmetic of
 * every time step written out: x_t sliced from X (Slice, Squeeze), the
 * gates as Gemm(x_t, W, bias, transB=1) and Gemm(h, R, that, transB=1),
 * split per gate (Split), Sigmoid and Tanh (or Relu for an RNN), Mul,
 * Add and Sub. W, R and B stay whatever the model feeds the node: the
 * model's initializers, or torch's Slice/Concat/Unsqueeze of them that
 * reorders the gates; the per-direction rows come from Squeeze or Slice
 * of them, so every gradient reaches the original tensors and no value
 * is copied at import. Y, Y_h and Y_c are built (Unsqueeze views and
 * Concat) only where something reads them; a one-direction Y waits as its
 * steps until a reader needs it whole, so a stacked layer reads each h_t
 * as its x_t (struct RnnStack below).
 *
 * Names: the node "/lstm/LSTM" (scope "/lstm/") unrolls into nodes named
 * "/lstm.t7/..." for time step 7, so onnx_write.c's block_key makes each
 * step its own block, `lstm.t7`. Several recurrent nodes in one scope
 * (torch's stacked layers) are told apart as lstm.l0, lstm.l1, ...; the
 * reverse direction of a node is lstm.rev (its step t is the one that
 * reads x_t). What a layer computes once (a direction's W and R, the
 * summed biases, the Concat of Y) is named "/lstm/..." and lies outside
 * every block. Since a tensor crossing a block edge is always saved,
 * h_t and c_t are each step's boundaries, and the policies and the budget
 * solver decide inside each step what backpropagation through time keeps.
 *
 * Taken: direction forward, reverse and bidirectional; layout 0 and 1;
 * initial_h and initial_c given or absent (a constant all-zero one is
 * absent too); sequence_lens absent or a constant equal to the sequence
 * length everywhere; GRU linear_before_reset 0 and 1; the default
 * activations (RNN: Tanh or Relu). Anything else (other activations,
 * activation_alpha/beta, clip, input_forget, peepholes, ragged
 * sequence_lens) is refused with one line naming the node and what.
 */
#include "onnx_impl.h"

#include <stdio.h>
#include <string.h>

typedef enum { K_LSTM, K_GRU, K_RNN } RKind;

/* One recurrent node being unrolled. */
typedef struct {
    Im *m;
    ONode *o;
    RKind kind;
    int gates;              /* 4 (LSTM), 3 (GRU), 1 (RNN) */
    int dirs, reverse;      /* reverse: the one direction is reverse */
    int layout;
    long T, B, I, H;
    int lbr;                /* GRU linear_before_reset */
    int relu[2];            /* RNN: Relu (1) or Tanh (0) per direction */
    const char *pre;        /* the scope before the base ("/") */
    const char *base;       /* "lstm", "lstm.l1" */
    int X, W, R, Bias, h0, c0;      /* IR tensors, -1 if absent */
    const int *Xs;          /* X as the steps of an earlier layer's Y */
} Rnn;

/* ---- building nodes ------------------------------------------------------------ */

static Node *begin(Rnn *r, const char *name, OpKind op, int a, int b, int c)
{
    Node *n = new_node(r->m, name, op);
    int in[3] = {a, b, c};
    for (int i = 0; i < 3 && in[i] >= 0; i++)
        n->in[n->nin++] = in[i];
    return n;
}

/* Finishes n with one output named out; its tensor, or -1. */
static int end(Rnn *r, Node *n, const char *out)
{
    int t = add_out(r->m, n, out);
    return finish_node(r->m, n, r->o) ? -1 : t;
}

static int op1(Rnn *r, const char *name, OpKind op, int a, int b)
{
    if (a < 0)
        return -1;
    return end(r, begin(r, name, op, a, b, -1), name);
}

static int axes_op(Rnn *r, const char *name, OpKind op, int x, long a0,
                   long a1, int na, const char *out)
{
    if (x < 0)
        return -1;
    Node *n = begin(r, name, op, x, -1, -1);
    long axes[2] = {a0, a1};
    set_ints(n, "axes", axes, na);
    return end(r, n, out ? out : name);
}

/* x[.., lo:hi, ..] along axis. */
static int slice(Rnn *r, const char *name, int x, long axis, long lo, long hi)
{
    if (x < 0)
        return -1;
    Node *n = begin(r, name, OP_SLICE, x, -1, -1);
    set_ints(n, "starts", &lo, 1);
    set_ints(n, "ends", &hi, 1);
    set_ints(n, "axes", &axis, 1);
    return end(r, n, name);
}

/* Index d of x along axis, that axis dropped: a Squeeze view when the
 * axis has length 1, else a Slice and a Squeeze. */
static int take(Rnn *r, const char *name, int x, long axis, long d)
{
    if (x < 0)
        return -1;
    if (r->m->g->tensors[x].dims[axis] != 1)
        x = slice(r, ctx_printf(r->m->c, "%s_slice", name), x, axis, d, d + 1);
    return axes_op(r, name, OP_SQUEEZE, x, axis, 0, 1, NULL);
}

/* x split along axis into n equal parts (out[0..n)); 0 or -1. */
static int split(Rnn *r, const char *name, int x, long axis, int n, int *out)
{
    if (x < 0)
        return -1;
    Node *s = begin(r, name, OP_SPLIT, x, -1, -1);
    set_int(s, "axis", axis);
    for (int k = 0; k < n; k++)
        add_out(r->m, s, ctx_printf(r->m->c, "%s_%d", name, k));
    if (finish_node(r->m, s, r->o))
        return -1;
    for (int k = 0; k < n; k++)
        out[k] = s->out[k];
    return 0;
}

/* Gemm(a, w, c, transB=1): a [B, K] times w [N, K] transposed, plus c. */
static int gemm(Rnn *r, const char *name, int a, int w, int c)
{
    if (a < 0 || w < 0)
        return -1;
    Node *n = begin(r, name, OP_GEMM, a, w, c);
    set_int(n, "transB", 1);
    return end(r, n, name);
}

/* Concat of in[0..n) along axis, in groups of at most MAX_IO; the last
 * output named out. */
static int concat(Rnn *r, const char *name, int *in, int n, long axis,
                  const char *out)
{
    for (int round = 0; n > 1; round++) {
        int m = 0;
        for (int k = 0; k < n; k += MAX_IO) {
            int cnt = n - k < MAX_IO ? n - k : MAX_IO;
            if (cnt == 1) {
                in[m++] = in[k];
                continue;
            }
            Node *c = new_node(r->m, name, OP_CONCAT);
            for (int j = 0; j < cnt; j++) {
                if (in[k + j] < 0)
                    return -1;
                c->in[c->nin++] = in[k + j];
            }
            set_int(c, "axis", axis);
            int last = n <= MAX_IO;
            int t = end(r, c, last && out ? out
                        : ctx_printf(r->m->c, "%s_%d_%d", name, round, k));
            if (t < 0)
                return -1;
            in[m++] = t;
        }
        n = m;
    }
    return in[0];
}

/* ---- Y held as its steps ------------------------------------------------------------ */

/* A one-direction Y (or a Squeeze of it) is not concatenated when made:
 * its Val holds the steps' h tensors, and the whole tensor is built only
 * for a reader that needs it (whole). A recurrent layer that reads it as X
 * along its time axis (torch's stacked layers: Y, Squeeze, the next LSTM)
 * takes each step's h itself, with no Concat, no Slice and no copy of the
 * sequence kept for the backward beside the h_t every step keeps. */
struct RnnStack {
    int n;                  /* steps, in time order */
    int *t;                 /* their IR tensors, each [B, H] */
    long axis;              /* the whole value's axis they stack along */
    long ins[2];            /* the axes each step gains (Unsqueeze) */
    int nins;
    const char *name;       /* what the nodes that make it whole are named */
};

/* v's shape from its stack. */
static void stack_shape(Val *v, const Tensor *step, const struct RnnStack *s)
{
    int rank = step->rank + s->nins, j = 0;
    v->rank = rank;
    v->numel = 1;
    for (int d = 0; d < rank; d++) {
        int in = (s->nins > 0 && d == s->ins[0]) || (s->nins > 1 &&
                                                      d == s->ins[1]);
        v->dims[d] = d == s->axis ? s->n : in ? 1 : step->dims[j++];
        v->numel *= v->dims[d];
    }
    v->shaped = 1;
    v->dt = DT_F32;
}

/* Builds value vi whole from its stack, if it has one and is not yet. */
static int whole(Im *m, int vi, ONode *o)
{
    Val *v = &m->v[vi];
    struct RnnStack *s = v->stack;
    if (!s || v->tensor >= 0)
        return 0;
    if (im_reserve(m, 2 * s->n + 16))
        return -1;
    Rnn r = {0};
    r.m = m;
    r.o = o;
    int *u = ctx_alloc(m->c, (size_t)s->n * sizeof(int));
    for (int k = 0; k < s->n; k++) {
        u[k] = axes_op(&r, ctx_printf(m->c, "%s_%d", s->name, k), OP_UNSQUEEZE,
                       s->t[k], s->ins[0], s->ins[1], s->nins,
                       s->n == 1 ? v->name : NULL);
        if (u[k] < 0)
            return -1;
    }
    int y = concat(&r, s->name, u, s->n, s->axis, v->name);
    if (y < 0)
        return -1;
    v->tensor = y;
    shape_to_val(v, &m->g->tensors[y]);
    return 0;
}

/* Squeeze(Y, axes) of a stacked Y, an axis each step gained: stacked too. */
static int squeeze_stack(Im *m, ONode *o)
{
    const Val *x = &m->v[o->in[0]];
    const struct RnnStack *s = x->stack;
    if (!s || x->tensor >= 0 || o->nout != 1 || o->out[0] < 0 ||
        m->v[o->out[0]].is_output)
        return 0;
    long axis;
    const Onnx__AttributeProto *a = o->p ? onnx_attr(o, "axes") : NULL;
    if (o->nin > 1 && o->in[1] >= 0) {
        const Val *ax = &m->v[o->in[1]];
        if (!ax->known || ax->dt == DT_F32 || ax->numel != 1)
            return 0;
        axis = (long)ax->i[0];
    } else if (a && a->n_ints == 1) {
        axis = (long)a->ints[0];
    } else {
        return 0;
    }
    if (axis < 0)
        axis += x->rank;
    int k = s->nins > 0 && s->ins[0] == axis ? 0
            : s->nins > 1 && s->ins[1] == axis ? 1 : -1;
    if (k < 0 || axis == s->axis)
        return 0;
    struct RnnStack *q = ctx_alloc(m->c, sizeof *q);
    *q = *s;
    q->nins = 0;
    for (int j = 0; j < s->nins; j++)
        if (j != k)
            q->ins[q->nins++] = s->ins[j] > axis ? s->ins[j] - 1 : s->ins[j];
    if (q->axis > axis)
        q->axis--;
    Val *y = &m->v[o->out[0]];
    y->stack = q;
    stack_shape(y, &m->g->tensors[s->t[0]], q);
    return 1;
}

/* ---- checks ----------------------------------------------------------------------- */

static int fail(Rnn *r, const char *what)
{
    return lower_error(r->m, r->o, what);
}

static int attr_is(const Onnx__AttributeProto *a, const char *name)
{
    return !strcmp(a->name, name);
}

static int str_eq(const ProtobufCBinaryData *s, const char *v)
{
    return s->len == strlen(v) && (!s->len || !memcmp(s->data, v, s->len));
}

/* A string attribute for a message: at most 40 bytes, NUL-terminated (an
 * empty one's data may be NULL). */
static const char *str_shown(Ctx *c, const ProtobufCBinaryData *s)
{
    return s->len ? ctx_printf(c, "%.*s", (int)(s->len > 40 ? 40 : s->len),
                               (const char *)s->data) : "";
}

/* The attributes: refused where remat would compute something else. */
static int read_attrs(Rnn *r)
{
    Im *m = r->m;
    const Onnx__NodeProto *p = r->o->p;
    static const char *const dflt[3][3] = {
        {"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh", NULL}, {"Tanh", 0, 0}};
    r->dirs = 1;
    for (size_t k = 0; k < p->n_attribute; k++) {
        const Onnx__AttributeProto *a = p->attribute[k];
        if (attr_is(a, "direction")) {
            if (str_eq(&a->s, "bidirectional"))
                r->dirs = 2;
            else if (str_eq(&a->s, "reverse"))
                r->reverse = 1;
            else if (!str_eq(&a->s, "forward"))
                return fail(r, ctx_printf(m->c, "attribute direction=\"%s\""
                    " is not one of forward, reverse, bidirectional",
                    str_shown(m->c, &a->s)));
        }
    }
    for (size_t k = 0; k < p->n_attribute; k++) {
        const Onnx__AttributeProto *a = p->attribute[k];
        if (attr_is(a, "direction"))
            continue;
        if (attr_is(a, "hidden_size")) {
            if (a->i != r->H)
                return fail(r, ctx_printf(m->c, "attribute hidden_size=%lld "
                    "does not match R's %ld rows per gate", (long long)a->i,
                    r->H));
        } else if (attr_is(a, "layout")) {
            if (a->i != 0 && a->i != 1)
                return fail(r, ctx_printf(m->c, "attribute layout=%lld; "
                    "ONNX defines 0 and 1", (long long)a->i));
        } else if (attr_is(a, "linear_before_reset") && r->kind == K_GRU) {
            if (a->i != 0 && a->i != 1)
                return fail(r, ctx_printf(m->c, "attribute linear_before_"
                    "reset=%lld; it is 0 or 1", (long long)a->i));
            r->lbr = (int)a->i;
        } else if (attr_is(a, "input_forget") && r->kind == K_LSTM) {
            if (a->i != 0)
                return fail(r, "attribute input_forget=1 (coupled input and "
                            "forget gates) is not supported; remat takes 0");
        } else if (attr_is(a, "activations")) {
            int per = r->gates == 4 ? 3 : r->gates == 3 ? 2 : 1;
            if (a->n_strings != (size_t)(per * r->dirs))
                return fail(r, ctx_printf(m->c, "attribute activations has "
                    "%zu names; it needs %d (%d per direction)", a->n_strings,
                    per * r->dirs, per));
            for (size_t j = 0; j < a->n_strings; j++) {
                const char *want = dflt[r->kind][j % per];
                if (str_eq(&a->strings[j], want))
                    continue;
                if (r->kind == K_RNN && str_eq(&a->strings[j], "Relu")) {
                    r->relu[j] = 1;
                    continue;
                }
                return fail(r, ctx_printf(m->c, "attribute activations[%zu]="
                    "\"%s\" is not supported; remat takes %s's default%s",
                    j, str_shown(m->c, &a->strings[j]), r->o->op,
                    r->kind == K_RNN ? " (Tanh) or Relu" : " activations"));
            }
        } else {
            return fail(r, ctx_printf(m->c, "attribute '%s' is not supported;"
                " remat's %s takes direction, hidden_size, layout%s and the "
                "default activations", a->name, r->o->op,
                r->kind == K_GRU ? ", linear_before_reset" : r->kind == K_LSTM
                ? ", input_forget=0" : ""));
        }
    }
    return 0;
}

/* Input i has shape d0 x d1 (x d2); else an error naming it. */
static int check_shape(Rnn *r, int i, const char *what, long d0, long d1,
                       long d2, int rank)
{
    const Val *x = &r->m->v[r->o->in[i]];
    long want[3] = {d0, d1, d2};
    int ok = x->shaped && x->rank == rank;
    for (int d = 0; ok && d < rank; d++)
        ok = x->dims[d] == want[d];
    if (ok)
        return 0;
    Buf b, h;
    buf_init(&b, r->m->c);
    buf_init(&h, r->m->c);
    buf_printf(&b, "%s", "");
    buf_printf(&h, "%s", x->rank ? "" : "scalar");
    for (int d = 0; d < rank; d++)
        buf_printf(&b, "%s%ld", d ? "x" : "", want[d]);
    for (int d = 0; d < x->rank; d++)
        buf_printf(&h, "%s%ld", d ? "x" : "", x->dims[d]);
    return fail(r, ctx_printf(r->m->c, "%s '%s' has shape %s; it must be %s",
                              what, x->name, h.data, b.data));
}

/* A float input of the given shape: its IR tensor; -1 absent (and *bad 1
 * on an error). An initial state that is a constant of zeros and does not
 * train is absent, as ONNX's default. */
static int state_input(Rnn *r, int i, int *bad, const char *what, long d0,
                       long d1, long d2, int rank)
{
    if (i >= r->o->nin || r->o->in[i] < 0)
        return -1;
    if (check_shape(r, i, what, d0, d1, d2, rank)) {
        *bad = 1;
        return -1;
    }
    Val *v = &r->m->v[r->o->in[i]];
    if (i >= 5 && v->known && !v->trainable && v->dt == DT_F32) {
        int zero = 1;
        for (long k = 0; k < v->numel && zero; k++)
            zero = v->f[k] == 0.0f;
        if (zero)
            return -1;
    }
    int t = tensor_of(r->m, r->o->in[i], r->o);
    *bad |= t < 0;
    return t;
}

static int read_inputs(Rnn *r)
{
    Im *m = r->m;
    ONode *o = r->o;
    if (o->nin < 3 || o->in[1] < 0 || o->in[2] < 0)
        return fail(r, "inputs X, W and R are required");
    r->layout = (int)onnx_attr_int(o, "layout", 0);
    const Val *xv = &m->v[o->in[0]];
    const struct RnnStack *st = xv->stack;
    long ta = r->layout ? 1 : 0;
    r->X = -1;
    if (st && xv->tensor < 0 && st->nins == 1 && st->ins[0] == ta &&
        st->axis == ta)
        r->Xs = st->t;      /* x_t is the earlier layer's h_t */
    for (int i = r->Xs ? 1 : 0; i < o->nin; i++)
        if (o->in[i] >= 0 && whole(m, o->in[i], o))
            return -1;
    if (!r->Xs && (r->X = tensor_of(m, o->in[0], o)) < 0)
        return -1;
    r->W = tensor_of(m, o->in[1], o);
    r->R = tensor_of(m, o->in[2], o);
    if (r->W < 0 || r->R < 0)
        return -1;
    const Tensor *rt = &m->g->tensors[r->R];
    if (xv->dt != DT_F32 || xv->rank != 3)
        return fail(r, ctx_printf(m->c, "X '%s' has %d dimensions; it must "
            "be a 3-D float tensor", xv->name, xv->rank));
    if (rt->rank != 3 || rt->dims[1] % r->gates)
        return fail(r, ctx_printf(m->c, "R '%s' has shape %s; it must be "
            "directions x %d*hidden x hidden", rt->name, shape_str(m->c, rt),
            r->gates));
    r->H = rt->dims[1] / r->gates;
    r->T = xv->dims[r->layout ? 1 : 0];
    r->B = xv->dims[r->layout ? 0 : 1];
    r->I = xv->dims[2];
    if (read_attrs(r))
        return -1;
    long G = r->gates * r->H;
    if (check_shape(r, 1, "W", r->dirs, G, r->I, 3) ||
        check_shape(r, 2, "R", r->dirs, G, r->H, 3))
        return -1;
    int bad = 0;
    r->Bias = state_input(r, 3, &bad, "B", r->dirs, 2 * G, 0, 2);
    if (bad)
        return -1;
    if (o->nin > 4 && o->in[4] >= 0) {
        const Val *s = &m->v[o->in[4]];
        int all = s->known && s->dt != DT_F32 && s->numel == r->B;
        for (long k = 0; all && k < s->numel; k++)
            all = s->i[k] == r->T;
        if (!all)
            return fail(r, ctx_printf(m->c, "sequence_lens '%s' is not a "
                "constant %ld everywhere; remat unrolls every sequence over "
                "all %ld steps (leave sequence_lens out)", s->name, r->T,
                r->T));
    }
    long s0 = r->layout ? r->B : r->dirs, s1 = r->layout ? r->dirs : r->B;
    r->h0 = state_input(r, 5, &bad, "initial_h", s0, s1, r->H, 3);
    if (!bad && r->kind == K_LSTM)
        r->c0 = state_input(r, 6, &bad, "initial_c", s0, s1, r->H, 3);
    else
        r->c0 = -1;
    if (bad)
        return -1;
    if (r->kind == K_LSTM && o->nin > 7 && o->in[7] >= 0) {
        const Val *pv = &m->v[o->in[7]];
        int zero = pv->known && !pv->trainable && pv->dt == DT_F32;
        for (long k = 0; zero && k < pv->numel; k++)
            zero = pv->f[k] == 0.0f;
        if (!zero)
            return fail(r, ctx_printf(m->c, "input P '%s' (peepholes) is "
                "given; remat's LSTM has none (leave P out)", pv->name));
    }
    if (r->T < 1 || r->B < 1 || r->H < 1)
        return fail(r, "has an empty sequence, batch or hidden size");
    return 0;
}

/* ---- one direction ----------------------------------------------------------------- */

typedef struct {
    int w, r, bias;         /* [G*H, I], [G*H, H], Wb + Rb [G*H] (LSTM, RNN) */
    int wb, rb;             /* GRU: Wb, Rb [3H] */
    int rbz, rbr, rbn;      /* GRU: Rb per gate [H] */
    int rzr, rh, rbzr;      /* GRU linear_before_reset=0: R's rows */
    const char *tag;        /* "lstm", "lstm.rev" */
} Dir;

static const char *nm(Rnn *r, const char *scope, long t, const char *what)
{
    if (t < 0)
        return ctx_printf(r->m->c, "%s%s/%s", r->pre, scope, what);
    return ctx_printf(r->m->c, "%s%s.t%ld/%s", r->pre, scope, t, what);
}

static int setup_dir(Rnn *r, Dir *d, int k)
{
    const char *s = d->tag;
    d->w = take(r, nm(r, s, -1, "W"), r->W, 0, k);
    d->r = take(r, nm(r, s, -1, "R"), r->R, 0, k);
    d->bias = d->wb = d->rb = d->rbz = d->rbr = d->rbn = -1;
    d->rzr = d->rh = d->rbzr = -1;
    if (d->w < 0 || d->r < 0)
        return -1;
    if (r->Bias >= 0) {
        int b = take(r, nm(r, s, -1, "B"), r->Bias, 0, k), wr[2];
        if (split(r, nm(r, s, -1, "B_split"), b, 0, 2, wr))
            return -1;
        d->wb = wr[0];
        d->rb = wr[1];
        if (r->kind != K_GRU) {
            d->bias = op1(r, nm(r, s, -1, "bias"), OP_ADD, wr[0], wr[1]);
            if (d->bias < 0)
                return -1;
        } else {
            int g[3];
            if (split(r, nm(r, s, -1, "Rb_split"), d->rb, 0, 3, g))
                return -1;
            d->rbz = g[0], d->rbr = g[1], d->rbn = g[2];
        }
    }
    if (r->kind == K_GRU && !r->lbr) {
        long H = r->H;
        d->rzr = slice(r, nm(r, s, -1, "R_zr"), d->r, 0, 0, 2 * H);
        d->rh = slice(r, nm(r, s, -1, "R_h"), d->r, 0, 2 * H, 3 * H);
        if (d->rzr < 0 || d->rh < 0)
            return -1;
        if (r->Bias >= 0 &&
            (d->rbzr = slice(r, nm(r, s, -1, "Rb_zr"), d->rb, 0, 0, 2 * H)) < 0)
            return -1;
    }
    return 0;
}

/* sigmoid or tanh of a + b (b may be absent). */
static int act_sum(Rnn *r, const char *scope, long t, const char *what,
                   OpKind op, int a, int b)
{
    if (b >= 0)
        a = op1(r, nm(r, scope, t, ctx_printf(r->m->c, "%s_in", what)),
                OP_ADD, a, b);
    return op1(r, nm(r, scope, t, what), op, a, -1);
}

/* One time step t of direction d: h (and c) from x, h, c (-1: zeros). */
static int step(Rnn *r, Dir *d, int k, long t, int *h, int *c)
{
    const char *s = d->tag;
    long ta = r->layout ? 1 : 0;
    int x = r->Xs ? r->Xs[t]    /* the layer below's h_t */
            : r->T == 1 ? axes_op(r, nm(r, s, t, "x"), OP_SQUEEZE, r->X, ta,
                                  0, 1, NULL)
                        : take(r, nm(r, s, t, "x"), r->X, ta, t);
    if (x < 0)
        return -1;
    if (r->kind != K_GRU) {
        int g = gemm(r, nm(r, s, t, "gates_x"), x, d->w, d->bias);
        if (*h >= 0)
            g = gemm(r, nm(r, s, t, "gates"), *h, d->r, g);
        if (g < 0)
            return -1;
        if (r->kind == K_RNN) {
            *h = op1(r, nm(r, s, t, "h"), r->relu[k] ? OP_RELU : OP_TANH, g,
                     -1);
            return *h < 0 ? -1 : 0;
        }
        int q[4];   /* ONNX's order: i, o, f, c */
        if (split(r, nm(r, s, t, "gate"), g, 1, 4, q))
            return -1;
        int i = op1(r, nm(r, s, t, "i"), OP_SIGMOID, q[0], -1);
        int o = op1(r, nm(r, s, t, "o"), OP_SIGMOID, q[1], -1);
        int u = op1(r, nm(r, s, t, "u"), OP_TANH, q[3], -1);
        int cn = op1(r, nm(r, s, t, *c >= 0 ? "iu" : "c"), OP_MUL, i, u);
        if (*c >= 0) {
            int f = op1(r, nm(r, s, t, "f"), OP_SIGMOID, q[2], -1);
            int fc = op1(r, nm(r, s, t, "fc"), OP_MUL, f, *c);
            cn = op1(r, nm(r, s, t, "c"), OP_ADD, fc, cn);
        }
        int tc = op1(r, nm(r, s, t, "tanh_c"), OP_TANH, cn, -1);
        *h = op1(r, nm(r, s, t, "h"), OP_MUL, o, tc);
        *c = cn;
        return *h < 0 || *c < 0 ? -1 : 0;
    }
    /* GRU, ONNX's order z, r, h */
    int gx[3], hz = d->rbz, hr = d->rbr, hn = -1, n;
    if (split(r, nm(r, s, t, "gx"), gemm(r, nm(r, s, t, "gates_x"), x, d->w,
                                          d->wb), 1, 3, gx))
        return -1;
    if (*h >= 0 && r->lbr) {
        int gh[3];
        if (split(r, nm(r, s, t, "gh"), gemm(r, nm(r, s, t, "gates_h"), *h,
                                              d->r, d->rb), 1, 3, gh))
            return -1;
        hz = gh[0], hr = gh[1], hn = gh[2];
    } else if (*h >= 0) {
        int gh[2];
        if (split(r, nm(r, s, t, "gh"), gemm(r, nm(r, s, t, "gates_h"), *h,
                                              d->rzr, d->rbzr), 1, 2, gh))
            return -1;
        hz = gh[0], hr = gh[1];
    } else if (r->lbr) {
        hn = d->rbn;        /* R * 0 + Rb */
    }
    int z = act_sum(r, s, t, "z", OP_SIGMOID, gx[0], hz);
    if (*h >= 0 || (r->lbr && hn >= 0)) {
        int rr = act_sum(r, s, t, "r", OP_SIGMOID, gx[1], hr);
        if (*h >= 0 && !r->lbr)     /* (r * h) R_h^T + Rb_h */
            hn = gemm(r, nm(r, s, t, "gates_hn"),
                      op1(r, nm(r, s, t, "rh"), OP_MUL, rr, *h), d->rh, d->rbn);
        else                        /* r * (h R_h^T + Rb_h) */
            hn = op1(r, nm(r, s, t, "rhn"), OP_MUL, rr, hn);
        if (hn < 0)
            return -1;
    } else if (!r->lbr) {
        hn = d->rbn;        /* (r * 0) R_h^T + Rb_h */
    }
    n = act_sum(r, s, t, "n", OP_TANH, gx[2], hn);
    if (z < 0 || n < 0)
        return -1;
    /* h' = (1 - z) n + z h = n + z (h - n) */
    int diff = *h >= 0 ? op1(r, nm(r, s, t, "h_minus_n"), OP_SUB, *h, n)
                       : op1(r, nm(r, s, t, "minus_n"), OP_NEG, n, -1);
    int zd = op1(r, nm(r, s, t, "z_diff"), OP_MUL, z, diff);
    *h = op1(r, nm(r, s, t, "h"), OP_ADD, n, zd);
    return *h < 0 ? -1 : 0;
}

/* ---- remat ops ------------------------------------------------------------------------- */

int onnx_lowered_ops(const char **names, const char **how, int max)
{
    static const char *const ops[][2] = {
        {"LSTM", "unrolled over its sequence, one block per step: Gemm, "
                 "Split, Sigmoid, Tanh, Mul, Add"},
        {"GRU", "unrolled over its sequence, one block per step: Gemm, "
                "Split, Sigmoid, Tanh, Add, Sub, Mul, Neg"},
        {"RNN", "unrolled over its sequence, one block per step: Gemm, "
                "Tanh or Relu"},
        {"Einsum", "ReduceSum, Transpose, Reshape, MatMul (no repeated "
                   "letter in a term)"},
    };
    int n = 0;
    for (size_t k = 0; k < sizeof ops / sizeof *ops && n < max; k++) {
        names[n] = ops[k][0];
        how[n++] = ops[k][1];
    }
    return n;
}

/* ---- the node ------------------------------------------------------------------------ */

static int read_anywhere(const Im *m, const ONode *o, int i)
{
    return i < o->nout && o->out[i] >= 0 &&
           (m->v[o->out[i]].readers || m->v[o->out[i]].is_output);
}

/* The scope before the base and the base: "/a/lstm/LSTM" -> "/a/", "lstm";
 * a layer's index among the recurrent nodes of one scope. */
static void names(Rnn *r)
{
    Im *m = r->m;
    const char *name = r->o->name;
    const char *last = strrchr(name, '/');
    const char *b = NULL;
    size_t blen = 0;
    if (last && last > name) {
        const char *q = last;
        while (q > name && q[-1] != '/')
            q--;
        if (q < last) {
            b = q;
            blen = (size_t)(last - q);
        }
    }
    if (!b) {
        b = last ? last + 1 : name;
        blen = strlen(b);
    }
    size_t plen = (size_t)(b - name);
    r->pre = ctx_printf(m->c, "%.*s", (int)plen, name);
    r->base = ctx_printf(m->c, "%.*s", (int)blen, b);
    /* stacked layers: the recurrent nodes named in the same scope */
    const char *scope = ctx_printf(m->c, "%.*s", (int)(last ? last - name + 1
                                                         : 0), name);
    int index = 0, count = 0;
    for (int k = 0; k < m->nn; k++) {
        const ONode *q = &m->nodes[k];
        if (strcmp(q->op, "LSTM") && strcmp(q->op, "GRU") &&
            strcmp(q->op, "RNN"))
            continue;
        const char *ql = strrchr(q->name, '/');
        size_t qn = ql ? (size_t)(ql - q->name + 1) : 0;
        if (qn != strlen(scope) || strncmp(q->name, scope, qn))
            continue;
        if (q == r->o)
            index = count;
        count++;
    }
    if (count > 1)
        r->base = ctx_printf(m->c, "%s.l%d", r->base, index);
}

static int unroll(Im *m, ONode *o)
{
    Rnn r = {0};
    r.m = m;
    r.o = o;
    r.kind = !strcmp(o->op, "LSTM") ? K_LSTM : !strcmp(o->op, "GRU") ? K_GRU
                                                                    : K_RNN;
    r.gates = r.kind == K_LSTM ? 4 : r.kind == K_GRU ? 3 : 1;
    if (o->nin < 1 || o->in[0] < 0)
        return fail(&r, "input X is required");
    if (!o->p)
        return fail(&r, "has no attributes");
    /* X's shape and R's tell T and H; read_inputs checks the rest */
    const Val *xv = &m->v[o->in[0]];
    if (o->nin > 2 && o->in[2] >= 0 && xv->shaped && xv->rank == 3) {
        long layout = onnx_attr_int(o, "layout", 0), T = xv->dims[layout ? 1
                                                                       : 0];
        if (T > 10000)
            return fail(&r, ctx_printf(m->c, "X '%s' is a sequence of %ld "
                "steps; remat unrolls at most 10,000", xv->name, T));
        /* room for every step's nodes and tensors */
        if (im_reserve(m, (int)(2 * (T + 2) * 32 + 64)))
            return -1;
    }
    names(&r);
    if (read_inputs(&r))
        return -1;
    int want_y = read_anywhere(m, o, 0), want_h = read_anywhere(m, o, 1),
        want_c = r.kind == K_LSTM && read_anywhere(m, o, 2);
    long T = r.T;
    int *hs = ctx_alloc(m->c, (size_t)(2 * T + 2) * sizeof(int));
    int last_h[2], last_c[2];
    for (int k = 0; k < r.dirs; k++) {
        Dir d;
        int rev = r.reverse || k == 1;
        d.tag = rev ? ctx_printf(m->c, "%s.rev", r.base) : r.base;
        if (setup_dir(&r, &d, k))
            return -1;
        int h = -1, c = -1;
        if (r.h0 >= 0 &&
            (h = take(&r, nm(&r, d.tag, -1, "h0"), r.h0, r.layout, k)) < 0)
            return -1;
        if (r.c0 >= 0 &&
            (c = take(&r, nm(&r, d.tag, -1, "c0"), r.c0, r.layout, k)) < 0)
            return -1;
        for (long s = 0; s < T; s++) {
            long t = rev ? T - 1 - s : s;
            if (step(&r, &d, k, t, &h, &c))
                return -1;
            hs[k * T + t] = h;
        }
        last_h[k] = h;
        last_c[k] = c;
    }
    /* Y: [T, dirs, B, H] (layout 1: [B, T, dirs, H]); one direction's
     * is held as its steps until a reader needs it whole */
    if (want_y && r.dirs == 1) {
        struct RnnStack *s = ctx_alloc(m->c, sizeof *s);
        s->n = (int)T;
        s->t = hs;
        s->axis = r.layout ? 1 : 0;
        s->ins[0] = s->axis;
        s->ins[1] = s->axis + 1;
        s->nins = 2;
        s->name = nm(&r, r.reverse ? ctx_printf(m->c, "%s.rev", r.base)
                                   : r.base, -1, "Y");
        Val *y = &m->v[o->out[0]];
        y->stack = s;
        stack_shape(y, &m->g->tensors[hs[0]], s);
        if (y->is_output && whole(m, o->out[0], o))
            return -1;
    } else if (want_y) {
        long ta = r.layout ? 1 : 0, da = r.layout ? 2 : 1;
        int per_dir[2];
        for (int k = 0; k < r.dirs; k++) {
            const char *tag = r.reverse || k == 1
                                  ? ctx_printf(m->c, "%s.rev", r.base)
                                  : r.base;
            for (long t = 0; t < T; t++) {
                int u = axes_op(&r, nm(&r, tag, -1, ctx_printf(m->c, "y%ld", t)),
                                OP_UNSQUEEZE, hs[k * T + t], ta, da, 2,
                                T == 1 && r.dirs == 1 ? m->v[o->out[0]].name
                                                      : NULL);
                if (u < 0)
                    return -1;
                hs[k * T + t] = u;
            }
            per_dir[k] = concat(&r, nm(&r, tag, -1, "Y"), hs + k * T, (int)T,
                                ta, r.dirs == 1 ? m->v[o->out[0]].name : NULL);
            if (per_dir[k] < 0)
                return -1;
        }
        int y = r.dirs == 1 ? per_dir[0]
                : concat(&r, nm(&r, r.base, -1, "Y"), per_dir, 2, da,
                         m->v[o->out[0]].name);
        if (y < 0)
            return -1;
        m->v[o->out[0]].tensor = y;
        shape_to_val(&m->v[o->out[0]], &m->g->tensors[y]);
    }
    /* Y_h, Y_c: [dirs, B, H] (layout 1: [B, dirs, H]) */
    for (int w = 1; w <= 2; w++) {
        if (!(w == 1 ? want_h : want_c))
            continue;
        int *src = w == 1 ? last_h : last_c, u[2];
        const char *out = m->v[o->out[w]].name;
        for (int k = 0; k < r.dirs; k++) {
            u[k] = axes_op(&r, nm(&r, r.base, -1, ctx_printf(m->c, "%s%d",
                           w == 1 ? "Y_h" : "Y_c", k)), OP_UNSQUEEZE, src[k],
                           r.layout, 0, 1, r.dirs == 1 ? out : NULL);
            if (u[k] < 0)
                return -1;
        }
        int y = r.dirs == 1 ? u[0] : concat(&r, nm(&r, r.base, -1, w == 1
                                                   ? "Y_h" : "Y_c"), u, 2,
                                            r.layout, out);
        if (y < 0)
            return -1;
        m->v[o->out[w]].tensor = y;
        shape_to_val(&m->v[o->out[w]], &m->g->tensors[y]);
    }
    m->nrewritten++;
    buf_printf(&m->log, "  unrolled %s over %ld steps at %s: blocks %s%s.t0 "
               "to .t%ld%s\n", o->op, T, o->name, r.base,
               r.reverse ? ".rev" : "", T - 1,
               r.dirs == 2 ? ctx_printf(m->c, ", and %s.rev.t0 to .t%ld",
                                        r.base, T - 1) : "");
    return 0;
}

int lower_rnn(Im *m, ONode *o)
{
    if (!strcmp(o->op, "LSTM") || !strcmp(o->op, "GRU") ||
        !strcmp(o->op, "RNN"))
        return unroll(m, o) ? -1 : 1;
    if (!strcmp(o->op, "Squeeze") && o->nin > 0 && o->in[0] >= 0 &&
        squeeze_stack(m, o))
        return 1;
    for (int i = 0; i < o->nin; i++)
        if (o->in[i] >= 0 && whole(m, o->in[i], o))
            return -1;
    return 0;
}
