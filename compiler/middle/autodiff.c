/*
 * autodiff.c: reverse mode over the graph.
 *
 * Two sweeps decide where gradients flow. Forward, in topological order: a
 * tensor requires a gradient when it is a trainable parameter or a node
 * output with an input that requires one (graph inputs never do). Backward,
 * in reverse order from the loss: a tensor has a gradient when it requires
 * one and the loss depends on it through nodes whose outputs have gradients.
 *
 * An input that the op table marks no_grad (class weights) takes part in
 * neither sweep: it never makes an output require a gradient, nor gets one;
 * one it marks grad_refused too (Attention's mask) must not depend on a
 * trainable parameter, or the graph is refused.
 *
 * A node's backward then runs when one of its outputs has a gradient, and
 * computes the gradient of exactly the inputs that require one. What it
 * reads comes from the op table's needs masks, restricted to those inputs:
 * the remat pass keeps nothing a backward does not read. Where every
 * backward that reads an activation can read a compact form of it instead
 * (a Relu's mask, a MaxPool's winners: the op table's `compact`), they do
 * (choose_compact), and its floats are read by no backward. Where a tensor fans
 * out, each consumer's backward adds into its gradient (the runtime's
 * backward kernels accumulate), so the sum needs no extra node. A graph
 * without a loss (forward only) has no gradient anywhere.
 */
#include "../remat.h"

/* Whether the op differentiates with respect to its input i at all. */
static int takes_grad(const Node *n, int i)
{
    return !(op_table[n->op].no_grad >> i & 1);
}

/* What a node's backward does, from the gradients that flow: whether it
 * runs, which inputs it gives gradients, which values it reads. */
static void backward_facts(Graph *g, Node *n)
{
    n->has_backward = 0;
    for (int o = 0; o < n->nout; o++)
        n->has_backward |= g->tensors[n->out[o]].has_grad;
    int want[MAX_IO];
    n->grad_inputs = 0;
    for (int i = 0; i < MAX_IO; i++) {
        want[i] = n->has_backward && i < n->nin && takes_grad(n, i) &&
                  g->tensors[n->in[i]].requires_grad;
        n->grad_inputs |= (unsigned)want[i] << i;
    }
    n->backward_reads = op_backward_needs(n, want);
}

/* The tensor a NEED_* bit of n names. */
static int operand(const Node *n, unsigned bit)
{
    for (int i = 0; i < n->nin; i++)
        if (bit == NEED_IN(i))
            return n->in[i];
    for (int o = 0; o < n->nout; o++)
        if (bit == NEED_OUT(o))
            return n->out[o];
    return -1;
}

int compact_operand(const Node *n)
{
    return operand(n, n->row->compact);
}

/* Whether n's backward can read its compact form of activation t (no view:
 * the floats then are the view's source's too). */
static int reads_compact(const Graph *g, const Node *n, int t, const int *viewed)
{
    unsigned bit = n->row->compact;
    return bit && (n->backward_reads & bit) && operand(n, bit) == t &&
           !viewed[t] && n->row->compact_bytes(g, n) > 0;
}

/* Where every backward that reads activation t can read a compact form of
 * it instead, each does (Node.compact), and t's floats are needed by no
 * backward. Where one cannot (a Gemm's weight gradient reads a Relu's
 * output whole), none does: the floats are kept anyway, and a compact
 * form beside them would only add bytes. */
static void choose_compact(Ctx *c, Graph *g)
{
    int *viewed = ctx_alloc(c, (size_t)g->ntensors * sizeof(int));
    int *all = ctx_alloc(c, (size_t)g->ntensors * sizeof(int));
    for (int k = 0; k < g->nnodes; k++)
        if (g->nodes[k].row->alias)
            viewed[g->nodes[k].in[0]] = 1;
    for (int t = 0; t < g->ntensors; t++)
        all[t] = g->tensors[t].kind == T_ACT ? 1 : 0;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        for (int i = 0; i < n->nin + n->nout; i++) {
            unsigned bit = i < n->nin ? NEED_IN(i) : NEED_OUT(i - n->nin);
            int t = i < n->nin ? n->in[i] : n->out[i - n->nin];
            if ((n->backward_reads & bit) && !reads_compact(g, n, t, viewed))
                all[t] = 0;
        }
    }
    for (int k = 0; k < g->nnodes; k++) {
        Node *n = &g->nodes[k];
        n->compact = 0;
        int t = operand(n, n->row->compact);
        if (t >= 0 && all[t] && reads_compact(g, n, t, viewed)) {
            n->compact = 1;
            n->backward_reads &= ~n->row->compact;
        }
    }
}

int autodiff(Ctx *c, Graph *g)
{
    for (int t = 0; t < g->ntensors; t++)
        g->tensors[t].has_grad = 0;
    for (int t = 0; t < g->ntensors; t++)
        g->tensors[t].requires_grad =
            g->tensors[t].kind == T_PARAM && g->tensors[t].trainable;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        int any = 0;
        for (int i = 0; i < n->nin; i++) {
            any |= takes_grad(n, i) && g->tensors[n->in[i]].requires_grad;
            if ((n->row->grad_refused >> i & 1) &&
                g->tensors[n->in[i]].requires_grad)
                return ctx_error(c, g->file, n->line, "node '%s': its input "
                                 "%d '%s' depends on a trainable parameter, "
                                 "but %s gives it no gradient; make what it "
                                 "depends on trainable=\"false\"", n->name, i,
                                 g->tensors[n->in[i]].name, n->row->name);
        }
        for (int o = 0; o < n->nout; o++)
            g->tensors[n->out[o]].requires_grad = any;
    }
    if (g->loss >= 0) {     /* else forward only: no tensor has a gradient */
        Tensor *loss = &g->tensors[g->loss];
        loss->has_grad = loss->requires_grad;
    }
    for (int k = g->nnodes - 1; k >= 0; k--) {
        Node *n = &g->nodes[g->order[k]];
        backward_facts(g, n);   /* its outputs' gradients are final */
        for (int i = 0; i < n->nin; i++)
            if (n->grad_inputs >> i & 1)
                g->tensors[n->in[i]].has_grad = 1;
    }
    choose_compact(c, g);
    return 0;
}

int node_has_backward(const Graph *g, const Node *n)
{
    (void)g;
    return n->has_backward;
}

void node_grad_inputs(const Graph *g, const Node *n, int *want)
{
    (void)g;
    for (int i = 0; i < MAX_IO; i++)
        want[i] = n->grad_inputs >> i & 1;
}

unsigned node_backward_reads(const Graph *g, const Node *n)
{
    (void)g;
    return n->backward_reads;
}

/* The one walk from the NEED_* bits to tensors, which the schedule, the
 * solver's bounds and the tests all ask of a node's backward. */
int node_backward_operands(const Graph *g, const Node *n, int *t)
{
    unsigned reads = node_backward_reads(g, n);
    int k = 0;
    for (int i = 0; i < n->nin; i++)
        if (reads & NEED_IN(i))
            t[k++] = n->in[i];
    for (int o = 0; o < n->nout; o++)
        if (reads & NEED_OUT(o))
            t[k++] = n->out[o];
    return k;
}

int needs_read_tensor(const Node *n, unsigned reads, int t)
{
    for (int i = 0; i < n->nin; i++)
        if ((reads & NEED_IN(i)) && n->in[i] == t)
            return 1;
    for (int o = 0; o < n->nout; o++)
        if ((reads & NEED_OUT(o)) && n->out[o] == t)
            return 1;
    return 0;
}

int node_backward_reads_tensor(const Graph *g, const Node *n, int t)
{
    return needs_read_tensor(n, node_backward_reads(g, n), t);
}
