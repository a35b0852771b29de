/*
 * fuse.c: rewrites of the IR that need its shapes, after infer_shapes and
 * before autodiff, for either front end.
 *
 * Attention's layout. Multi-head attention is written (by hand, and by
 * torch's export) as projections to (batch, sequence, heads * size), a
 * Reshape to (batch, sequence, heads, size) and a Transpose to ONNX's 4-D
 * (batch, heads, sequence, size) for each of Q, K and V, and the output
 * transposed and reshaped back. The transposes are copies: on gpt, 16
 * each way a step. ONNX's 3-D Attention reads the projections' layout
 * itself (q_num_heads, kv_num_heads), and the runtime's _3d kernels give
 * the 4-D kernels' bits head for head; so where each of Q, K and V comes
 * through such a pair that nothing else reads, and the output leaves
 * through the mirror pair, the Attention node takes the 3-D tensors and
 * writes the final Reshape's output, and the eight nodes leave. Nodes that
 * carry their own `remat`, or that lie in another block than the
 * Attention, are left alone.
 *
 * A MatMul's bias. A linear layer is written as a MatMul and an Add of a
 * vector of its columns (ONNX has no N-D Gemm): the Add reads the product
 * back, writes it again, and under sac is recomputed at every use. Where
 * nothing else reads the product, the vector becomes the MatMul's third
 * input, added in the GEMM as a Gemm's C with beta 1 (the bias first,
 * then the product: torch's addmm order, whose bits differ from the sum
 * after the product where the GEMM splits K), and the Add leaves.
 */
#include "../remat.h"

#include <string.h>

static int is_perm_0213(const Node *n)
{
    static const long swap[4] = {0, 2, 1, 3};
    const Attr *perm = node_attr(n, "perm");
    if (n->op != OP_TRANSPOSE || !perm->set || perm->nints != 4)
        return 0;
    for (int i = 0; i < 4; i++)
        if (perm->ints[i] != swap[i])
            return 0;
    return 1;
}

/* One pass's state: the graph, each tensor's reader count (plus 1000 for
 * an output) and its last reader, counted once before the pass (a count
 * per query scanned every node: minutes on a graph of 100,000 nodes), and
 * what the rewrites mark dead. */
typedef struct {
    Graph *g;
    int *readers, *reader;
    char *dead_t, *dead_n;
} Fuse;

/* A node when it is of op, in block and without its own remat; else NULL. */
static Node *plain(Node *n, OpKind op, int block)
{
    return n->op == op && n->block == block && n->remat == REMAT_UNSET ? n
                                                                       : NULL;
}

/* The node producing t, when t has one reader and the node is plain. */
static Node *sole_producer(const Fuse *f, int t, OpKind op, int block)
{
    int p = f->g->tensors[t].producer;
    return p >= 0 && f->readers[t] == 1 ? plain(&f->g->nodes[p], op, block)
                                        : NULL;
}

/* The one node reading t (no output), when it is plain. */
static Node *sole_reader(const Fuse *f, int t, OpKind op, int block)
{
    return f->readers[t] == 1 ? plain(&f->g->nodes[f->reader[t]], op, block)
                              : NULL;
}

/* Whether 4-D t (b, h, s, d) is a Transpose 0 2 1 3 of a Reshape of 3-D
 * (b, s, h * d): then *from is that 3-D tensor and tr, rs the two nodes. */
static int split_heads(const Fuse *f, int t, int block, int *from, Node **tr,
                       Node **rs)
{
    const Graph *g = f->g;
    *tr = sole_producer(f, t, OP_TRANSPOSE, block);
    if (!*tr || !is_perm_0213(*tr))
        return 0;
    *rs = sole_producer(f, (*tr)->in[0], OP_RESHAPE, block);
    if (!*rs)
        return 0;
    const Tensor *x = &g->tensors[(*rs)->in[0]], *u = &g->tensors[(*tr)->in[0]];
    *from = (*rs)->in[0];
    return x->rank == 3 && u->rank == 4 && !x->is_int &&
           x->dims[0] == u->dims[0] && x->dims[1] == u->dims[1] &&
           x->dims[2] == u->dims[2] * u->dims[3];
}

/* The mirror: 4-D y read only by a Transpose 0 2 1 3 whose output only a
 * Reshape to 3-D (b, s, h * d) reads; *to is that Reshape's output. */
static int merge_heads(const Fuse *f, int y, int block, int *to, Node **tr,
                       Node **rs)
{
    const Graph *g = f->g;
    *tr = sole_reader(f, y, OP_TRANSPOSE, block);
    if (!*tr || !is_perm_0213(*tr))
        return 0;
    *rs = sole_reader(f, (*tr)->out[0], OP_RESHAPE, block);
    if (!*rs)
        return 0;
    const Tensor *z = &g->tensors[(*tr)->out[0]], *w = &g->tensors[(*rs)->out[0]];
    *to = (*rs)->out[0];
    return w->rank == 3 && w->dims[0] == z->dims[0] &&
           w->dims[1] == z->dims[1] && w->dims[2] == z->dims[2] * z->dims[3];
}

static void set_int(Node *n, const char *name, long v)
{
    for (int k = 0; n->row->attrs[k].name; k++)
        if (!strcmp(n->row->attrs[k].name, name)) {
            n->attrs[k].set = 1;
            n->attrs[k].i = v;
        }
}

/* Rewrites Attention node n when all four pairs are there; 1 if it did. */
static int fuse_attention(Fuse *f, Node *n)
{
    Graph *g = f->g;
    const int self = (int)(n - g->nodes);
    Node *tr[4], *rs[4];
    int from[3], to;
    if (g->tensors[n->in[0]].rank != 4)
        return 0;
    for (int i = 0; i < 3; i++)
        if (!split_heads(f, n->in[i], n->block, &from[i], &tr[i], &rs[i]))
            return 0;
    if (!merge_heads(f, n->out[0], n->block, &to, &tr[3], &rs[3]))
        return 0;
    long heads = g->tensors[n->in[0]].dims[1];
    for (int i = 0; i < 4; i++) {
        f->dead_n[tr[i] - g->nodes] = f->dead_n[rs[i] - g->nodes] = 1;
        f->dead_t[tr[i]->in[0]] = f->dead_t[tr[i]->out[0]] = 1;
    }
    f->dead_t[n->out[0]] = 1;
    for (int i = 0; i < 3; i++) {
        n->in[i] = from[i];
        f->reader[from[i]] = self;     /* was the Reshape */
    }
    n->out[0] = to;
    g->tensors[to].producer = self;
    set_int(n, "q_num_heads", heads);
    set_int(n, "kv_num_heads", heads);
    return 1;
}

/* MatMul m (B a matrix) folds the Add reading its product when the Add's
 * other operand is a float vector of B's columns; 1 if it did. */
static int fuse_bias(Fuse *f, Node *m)
{
    Graph *g = f->g;
    if (m->nin != 2 || g->tensors[m->in[1]].rank != 2 ||
        g->tensors[m->out[0]].is_int)
        return 0;
    int y = m->out[0];
    Node *add = sole_reader(f, y, OP_ADD, m->block);
    if (!add || add->in[0] == add->in[1])
        return 0;
    int b = add->in[0] == y ? add->in[1] : add->in[0];
    const Tensor *bias = &g->tensors[b];
    if (bias->rank != 1 || bias->is_int ||
        bias->dims[0] != g->tensors[m->in[1]].dims[1])
        return 0;
    m->in[m->nin++] = b;
    m->out[0] = add->out[0];
    g->tensors[add->out[0]].producer = (int)(m - g->nodes);
    f->dead_n[add - g->nodes] = 1;
    f->dead_t[y] = 1;
    return 1;
}

int fuse_graph(Ctx *c, Graph *g)
{
    Fuse f = {g, NULL, NULL, ctx_alloc(c, (size_t)g->ntensors + 1),
              ctx_alloc(c, (size_t)g->nnodes + 1)};
    f.readers = graph_reader_counts(c, g, &f.reader);
    memset(f.dead_t, 0, (size_t)g->ntensors + 1);
    memset(f.dead_n, 0, (size_t)g->nnodes + 1);
    int fused = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == OP_ATTENTION)
            fused += fuse_attention(&f, &g->nodes[i]);
        else if (g->nodes[i].op == OP_MATMUL)
            fused += fuse_bias(&f, &g->nodes[i]);
    if (!fused)
        return 0;
    graph_drop(c, g, f.dead_t, f.dead_n);
    return infer_shapes(c, g);
}
