/*
 * fold.c: BatchNormalization in eval mode folded into the frozen Conv or
 * Gemm before it, at compile time, on the IR either front end built and
 * after --freeze (driver.c calls it after freeze_params).
 *
 * Eval mode is an affine map per channel, y = x * a + c with a = scale /
 * sqrt(var + eps) and c = B - mean * a. Where x is a Conv's or a Gemm's
 * output that nothing else reads and every value on the way is frozen and
 * known now (init="file" data, zeros, ones or a constant: ONNX
 * initializers, or the XML's own), the map moves into the weights:
 *   W'[o, ...] = W[o, ...] * a[o]   (a Gemm's output column o)
 *   b'[o]      = b[o] * a[o] + c[o] (b 0 where the node has no bias)
 * and the BatchNormalization node, its four inputs and the node's old
 * weight and bias leave the graph. The new weight and bias are named
 * after the old ones (`conv1.weight.folded`, `conv1.bias.folded`, or
 * `conv1.weight.folded_bias` for a Conv that had none), frozen, with
 * their values in the C file.
 *
 * a and b' are worked out in double and each product rounded once to
 * float, so W' is the float nearest W * a; the step computes x * W' where
 * the unfolded graph computed (x * W) * a: the two differ by rounding
 * (docs/training.md gives the measured error). Values drawn at run time
 * (init="uniform" or "normal") are not known here: such a node is left as
 * it is, and the train step runs the affine map.
 */
#include "../remat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A frozen float parameter whose values are known at compile time, read by
 * one node only (so that it can leave the graph with the fold). */
static int known(const Graph *g, const int *readers, int t)
{
    const Tensor *x = &g->tensors[t];
    if (x->kind != T_PARAM || x->trainable || x->is_int || readers[t] != 1)
        return 0;
    return x->init == INIT_ZEROS || x->init == INIT_ONES ||
           x->init == INIT_CONSTANT || (x->init == INIT_FILE && x->data);
}

static double value(const Tensor *x, long i)
{
    if (x->init == INIT_ZEROS || x->init == INIT_ONES)
        return x->init == INIT_ONES;
    return x->init == INIT_CONSTANT ? (double)x->init_a : (double)x->data[i];
}

/* The producer's output channels (a Conv's axis 0 of W, a Gemm's columns
 * of B), -1 where it cannot take the fold. */
static long out_channels(const Graph *g, const Node *p)
{
    if (p->op == OP_CONV && p->nin >= 2 && g->tensors[p->in[1]].rank >= 3)
        return g->tensors[p->in[1]].dims[0];
    if (p->op != OP_GEMM || g->tensors[p->in[1]].rank != 2)
        return -1;
    const Tensor *w = &g->tensors[p->in[1]];
    return node_int(p, "transB") ? w->dims[0] : w->dims[1];
}

/* The producer of the BatchNormalization's input when the two can fold
 * (readers: graph_reader_counts, taken before any fold). */
static Node *foldable(Graph *g, const int *readers, const Node *n)
{
    if (n->op != OP_BATCH_NORM || node_int(n, "training_mode") != 0)
        return NULL;
    for (int i = 1; i < 5; i++)
        if (!known(g, readers, n->in[i]))
            return NULL;
    const Tensor *x = &g->tensors[n->in[0]];
    if (x->kind != T_ACT || x->producer < 0 || readers[n->in[0]] != 1)
        return NULL;
    Node *p = &g->nodes[x->producer];
    long ch = out_channels(g, p);
    if (ch < 0 || ch != g->tensors[n->in[1]].numel ||
        !known(g, readers, p->in[1]))
        return NULL;
    if (p->nin < 3)
        return p;
    const Tensor *b = &g->tensors[p->in[2]];
    return known(g, readers, p->in[2]) && b->rank == 1 && b->numel == ch ? p : NULL;
}

/* A name (and C name) no tensor has yet: base, else base_2, base_3, ... */
static void fresh_name(Ctx *c, const Graph *g, Tensor *t, const char *base,
                       const char *cbase)
{
    const char *name = base, *cname = cbase;
    for (int k = 2;; k++) {
        int taken = 0;
        for (int i = 0; i < g->ntensors; i++)
            taken |= !strcmp(g->tensors[i].name, name) ||
                     !strcmp(g->tensors[i].cname, cname);
        if (!taken)
            break;
        name = ctx_printf(c, "%s_%d", base, k);
        cname = ctx_printf(c, "%s_%d", cbase, k);
    }
    t->name = name;
    t->cname = cname;
}

/* W * a per output channel, in place of W's values, in t. */
static void fold_weight(Ctx *c, const Graph *g, const Node *p, Tensor *t,
                        const double *a)
{
    const Tensor *w = &g->tensors[p->in[1]];
    float *d = ctx_alloc(c, (size_t)w->numel * sizeof *d);
    long ch = out_channels(g, p), inner = w->numel / ch;
    int by_row = p->op == OP_CONV || node_int(p, "transB");
    for (long i = 0; i < w->numel; i++) {
        long o = by_row ? i / inner : i % ch;
        d[i] = (float)(value(w, i) * a[o]);
    }
    t->data = d;
    t->init = INIT_FILE;
}

/* The new bias b * a + B - mean * a (a Gemm's beta taken in, then 1). */
static float *fold_bias(Ctx *c, const Graph *g, Node *p, const Node *n,
                        const double *a, long ch)
{
    const Tensor *b = p->nin >= 3 ? &g->tensors[p->in[2]] : NULL;
    double beta = p->op == OP_GEMM ? node_float(p, "beta") : 1.0;
    float *d = ctx_alloc(c, (size_t)ch * sizeof *d);
    for (long o = 0; o < ch; o++) {
        double bo = b ? beta * value(b, o) : 0.0;
        d[o] = (float)(bo * a[o] + value(&g->tensors[n->in[2]], o) -
                       value(&g->tensors[n->in[3]], o) * a[o]);
    }
    for (int k = 0; p->op == OP_GEMM && p->row->attrs[k].name; k++)
        if (!strcmp(p->row->attrs[k].name, "beta")) {
            p->attrs[k].set = 1;
            p->attrs[k].f = 1.0f;
        }
    return d;
}

/* Folds n into p: p's weight slot takes W', its bias slot (or the BN's
 * scale's, when p had none) b'; p writes the BN's output. */
static void fold_one(Ctx *c, Graph *g, Node *p, Node *n, char *dead_t)
{
    long ch = g->tensors[n->in[1]].numel;
    double *a = ctx_alloc(c, (size_t)ch * sizeof *a);
    const Tensor *s = &g->tensors[n->in[1]], *v = &g->tensors[n->in[4]];
    for (long o = 0; o < ch; o++)
        a[o] = value(s, o) / sqrt(value(v, o) + (double)node_float(n, "epsilon"));
    Tensor *w = &g->tensors[p->in[1]];
    float *bias = fold_bias(c, g, p, n, a, ch);
    fold_weight(c, g, p, w, a);
    int bslot = p->nin >= 3 ? p->in[2] : n->in[1];
    Tensor *b = &g->tensors[bslot];
    const char *bbase = p->nin >= 3 ? b->name : ctx_printf(c, "%s_bias", w->name);
    const char *cbase = p->nin >= 3 ? b->cname : ctx_printf(c, "%s_bias", w->cname);
    fresh_name(c, g, w, ctx_printf(c, "%s.folded", w->name),
               ctx_printf(c, "%s_folded", w->cname));
    fresh_name(c, g, b, ctx_printf(c, "%s.folded", bbase),
               ctx_printf(c, "%s_folded", cbase));
    b->data = bias;
    b->init = INIT_FILE;
    b->rank = 1;
    b->dims[0] = ch;
    b->numel = ch;
    b->trainable = 0;
    w->trainable = 0;
    if (p->nin < 3)
        p->in[p->nin++] = bslot;
    for (int i = 0; i < 5; i++)
        if (n->in[i] != bslot)
            dead_t[n->in[i]] = 1;
    p->out[0] = n->out[0];
    g->tensors[n->out[0]].producer = (int)(p - g->nodes);
}

int fold_batch_norms(Ctx *c, Graph *g)
{
    const int *readers = graph_reader_counts(c, g, NULL);
    char *dead_t = ctx_alloc(c, (size_t)g->ntensors + 1);
    char *dead_n = ctx_alloc(c, (size_t)g->nnodes + 1);
    memset(dead_t, 0, (size_t)g->ntensors + 1);
    memset(dead_n, 0, (size_t)g->nnodes + 1);
    int folded = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *p = foldable(g, readers, &g->nodes[i]);
        if (!p)
            continue;
        fold_one(c, g, p, &g->nodes[i], dead_t);
        dead_n[i] = 1;
        folded++;
    }
    if (!folded)
        return 0;
    graph_drop(c, g, dead_t, dead_n);
    return 0;
}
