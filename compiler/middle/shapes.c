/*
 * shapes.c: topological order and shape inference.
 *
 * Nodes may appear in any order in the file. infer_shapes() orders them with
 * Kahn's algorithm, always taking the ready node that comes first in the
 * file, so the order is stable (a file already in order keeps it) and never
 * depends on hashing or pointers. A node left over is on a cycle; the error
 * names the cycle. Then each node's shape rule, from the op table, types its
 * outputs from its inputs in that order, checking what the op requires.
 *
 * Afterwards: g->order holds every node once, producers before consumers;
 * every tensor has a shape and a consumer count; the loss is a scalar, or
 * there is none (g->loss == -1) and the graph is forward only.
 */
#include "../remat.h"

#include <string.h>

/* The ready node earliest in the file comes out first. */
static int earlier_in_file(const void *ctx, int a, int b)
{
    (void)ctx;
    return a < b;
}

/* Follows producers among the unsorted nodes until one repeats. */
static int cycle_error(Ctx *c, Graph *g, const int *pending)
{
    int start = 0;
    while (!pending[start])
        start++;
    int *seen = ctx_alloc(c, (size_t)g->nnodes * sizeof(int));
    int n = start;
    while (!seen[n]) {
        seen[n] = 1;
        const Node *nd = &g->nodes[n];
        for (int i = 0; i < nd->nin; i++) {
            int p = g->tensors[nd->in[i]].producer;
            if (p >= 0 && pending[p]) {
                n = p;
                break;
            }
        }
    }
    Buf b;
    buf_init(&b, c);
    int m = n;
    do {
        buf_printf(&b, "'%s' <- ", g->nodes[m].name);
        const Node *nd = &g->nodes[m];
        for (int i = 0; i < nd->nin; i++) {
            int p = g->tensors[nd->in[i]].producer;
            if (p >= 0 && pending[p] && seen[p]) {
                m = p;
                break;
            }
        }
    } while (m != n && b.len < 600);
    buf_printf(&b, "'%s'", g->nodes[n].name);
    return ctx_error(c, g->file, g->nodes[n].line, "node '%s': is on a cycle: "
                     "%s (each reads the next one's output); a graph must be "
                     "acyclic", g->nodes[n].name, b.data);
}

static int topo_sort(Ctx *c, Graph *g)
{
    int *waiting = ctx_alloc(c, (size_t)g->nnodes * sizeof(int));
    /* consumers[t]: the nodes reading tensor t, as CSR arrays */
    int *first = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof(int));
    int nedges = 0;
    /* counted afresh: a graph is sorted again after a rewrite drops nodes
     * (fuse.c), and every compile_parsed sorts it once more */
    for (int t = 0; t < g->ntensors; t++)
        g->tensors[t].nconsumers = 0;
    for (int n = 0; n < g->nnodes; n++)
        for (int i = 0; i < g->nodes[n].nin; i++) {
            Tensor *t = &g->tensors[g->nodes[n].in[i]];
            t->nconsumers++;
            first[g->nodes[n].in[i] + 1]++;
            nedges++;
            if (t->producer >= 0)
                waiting[n]++;
        }
    for (int t = 0; t < g->ntensors; t++)
        first[t + 1] += first[t];
    int *fill = ctx_alloc(c, (size_t)g->ntensors * sizeof(int));
    int *reader = ctx_alloc(c, ((size_t)nedges + 1) * sizeof(int));
    for (int n = 0; n < g->nnodes; n++)
        for (int i = 0; i < g->nodes[n].nin; i++) {
            int t = g->nodes[n].in[i];
            reader[first[t] + fill[t]++] = n;
        }
    Heap h = {ctx_alloc(c, (size_t)g->nnodes * sizeof(int)), 0,
              earlier_in_file, NULL};
    for (int n = 0; n < g->nnodes; n++)
        if (!waiting[n])
            heap_push(&h, n);
    g->order = ctx_alloc(c, (size_t)g->nnodes * sizeof(int));
    int k = 0;
    while (h.n) {
        int n = heap_pop(&h);
        g->order[k++] = n;
        waiting[n] = -1;
        for (int o = 0; o < g->nodes[n].nout; o++) {
            int t = g->nodes[n].out[o];
            for (int e = first[t]; e < first[t + 1]; e++)
                if (--waiting[reader[e]] == 0)
                    heap_push(&h, reader[e]);
        }
    }
    if (k < g->nnodes) {
        for (int n = 0; n < g->nnodes; n++)
            waiting[n] = waiting[n] > 0;
        return cycle_error(c, g, waiting);
    }
    return 0;
}

/* No output is marked as the loss: it is the only scalar output (one
 * element: a rank-0 tensor, or a keepdims reduction's 1x1) not marked
 * loss="false". With none, the graph is forward only (g->loss stays -1):
 * it compiles to NAME_forward alone, with no backward and no train step. */
static int find_scalar_loss(Ctx *c, Graph *g)
{
    int n = 0;
    if (g->noutputs == 0)
        return ctx_error(c, g->file, g->line, "graph: has no <output>; list "
                         "what the graph computes: its loss (a scalar output, "
                         "or one marked loss=\"true\") to train it, or any "
                         "node outputs for a forward-only model");
    for (int i = 0; i < g->noutputs; i++)
        if (g->tensors[g->outputs[i]].numel == 1 &&
            !g->tensors[g->outputs[i]].not_loss &&
            !g->tensors[g->outputs[i]].is_int) {    /* an int64 count */
            g->loss = g->outputs[i];
            n++;
        }
    if (n > 1)
        return ctx_error(c, g->file, g->line, "graph: more than one scalar "
                         "output and none marked as the loss; mark the loss "
                         "with <output name=\"...\" loss=\"true\"/>, or "
                         "every scalar output loss=\"false\" for a forward-only "
                         "model");
    if (n == 1)
        g->tensors[g->loss].is_loss = 1;
    return 0;
}

int graph_trains(const Graph *g)
{
    return g->loss >= 0;
}

size_t trainable_floats(const Graph *g)
{
    size_t n = 0;
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].kind == T_PARAM && g->tensors[t].trainable)
            n += (size_t)g->tensors[t].numel;
    return n;
}

/* int64 tensors are graph inputs, int64 constants and what the
 * integer-aware rows make of them (a bool is an int64 0 or 1;
 * ops_integer.c): read where an op's row says input i is int64
 * (int_inputs: Gather's indices, the loss's labels) or may be (int_ok:
 * Slice, Concat, Transpose, Expand, the comparisons, Add, Sub, Mul and
 * Div, ReduceSum, Where's condition, X and Y), or by a view (an alias row: Reshape,
 * Flatten, Identity, Unsqueeze, Squeeze), whose output is then int64 too;
 * the row's int_out says what its outputs are. Every other tensor is
 * float32. */
int node_dtypes(Ctx *c, Graph *g, const Node *n)
{
    const OpInfo *op = n->row;
    int sel = op->int_out == INT_OUT_SELECT && n->nin > 1;
    int lead = sel ? 1 : 0;     /* the input whose dtype the output takes */
    int pass = (op->alias || op->int_out == INT_OUT_PASS || sel) &&
               g->tensors[n->in[lead]].is_int;
    for (int i = 0; i < n->nin; i++) {
        const Tensor *t = &g->tensors[n->in[i]];
        int want = (op->int_inputs >> i) & 1;
        if (op->alias && i == 0)
            continue;
        if (op->int_ok >> i & 1) {
            if ((op->int_out != INT_OUT_PASS && !sel) || (sel && i == 0) ||
                t->is_int == pass)
                continue;
            return ctx_error(c, g->file, n->line, "node '%s': %s input %d "
                             "'%s' is %s but input %d '%s' is %s; the inputs "
                             "must have one dtype", n->name, op->name, i,
                             t->name, t->is_int ? "int64" : "float32", lead,
                             g->tensors[n->in[lead]].name,
                             pass ? "int64" : "float32");
        }
        if (t->is_int == want)
            continue;
        if (want && t->kind == T_INPUT)
            return ctx_error(c, g->file, n->line, "node '%s': %s input %d '%s' "
                             "is float32 but must be int64; declare it "
                             "<input name=\"%s\" ... dtype=\"int64\"/>",
                             n->name, op->name, i, t->name, t->name);
        if (want)
            return ctx_error(c, g->file, n->line, "node '%s': %s input %d '%s' "
                             "is a float32 %s but must be int64: a graph "
                             "input declared dtype=\"int64\" or an int64 "
                             "tensor made from one", n->name,
                             op->name, i, t->name,
                             t->kind == T_PARAM ? "initializer" : "activation");
        return ctx_error(c, g->file, n->line, "node '%s': %s input %d '%s' is "
                         "int64 but must be float32 (Cast it: to=\"1\")",
                         n->name, op->name, i, t->name);
    }
    for (int o = 0; o < n->nout; o++)
        g->tensors[n->out[o]].is_int =
            op->int_out == INT_OUT_BOOL || (pass && o == 0);
    return 0;
}

/* An input the train step updates in place (the row's `updates`: running
 * statistics) is a parameter outside the optimizer's reach, and nothing
 * else reads it: another reader would see it before or after the update
 * as the statement order fell, and a recompute of that reader after it. */
static int check_updates(Ctx *c, const Graph *g, const Node *n)
{
    const OpInfo *op = &op_table[n->op];
    for (int i = 0; i < n->nin; i++) {
        const Tensor *t = &g->tensors[n->in[i]];
        if (!(op->updates & NEED_IN(i)))
            continue;
        if (t->kind != T_PARAM || t->trainable)
            return ctx_error(c, g->file, n->line, "node '%s': %s input %d '%s' "
                             "is %s but must be an initializer with "
                             "trainable=\"false\": the train step updates it "
                             "in place (running statistics)", n->name,
                             op->name, i, t->name,
                             t->kind == T_INPUT ? "a graph input"
                             : t->kind == T_ACT ? "a node's output"
                                                : "a trainable parameter");
        if (t->nconsumers != 1)
            return ctx_error(c, g->file, n->line, "node '%s': %s input %d '%s' "
                             "is read %d times; the train step updates it in "
                             "place, so this input of this node must be its "
                             "only reader", n->name, op->name, i, t->name,
                             t->nconsumers);
    }
    return 0;
}

int infer_shapes(Ctx *c, Graph *g)
{
    if (topo_sort(c, g))
        return -1;
    for (int k = 0; k < g->nnodes; k++) {
        Node *n = &g->nodes[g->order[k]];
        if (node_dtypes(c, g, n) || check_updates(c, g, n) ||
            op_table[n->op].shape(c, g, n))
            return -1;
        for (int o = 0; o < n->nout; o++) {
            const Tensor *y = &g->tensors[n->out[o]];
            if (y->numel > MAX_NUMEL)
                return ctx_error(c, g->file, n->line, "node '%s': output '%s' "
                                 "would have shape (%s), more than %ld "
                                 "elements (1 GiB of float32), the most "
                                 "supported", n->name, y->name,
                                 shape_str(c, y), MAX_NUMEL);
        }
    }
    if (g->loss < 0 && find_scalar_loss(c, g))
        return -1;
    if (g->loss < 0)
        return 0;       /* forward only */
    Tensor *loss = &g->tensors[g->loss];
    if (loss->is_int)
        return ctx_error(c, g->file, loss->output_line, "output '%s': the "
                         "loss is int64 (made from int64 tensors); the loss "
                         "is a float32 scalar (Cast it: to=\"1\")",
                         loss->name);
    if (loss->numel != 1)
        return ctx_error(c, g->file, loss->output_line, "output '%s': the loss must "
                         "be a scalar (one element) but has shape %s",
                         loss->name, shape_str(c, loss));
    return 0;
}
