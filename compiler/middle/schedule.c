/*
 * schedule.c: one straight-line list of statements, recompute inlined.
 *
 * The train step is: every node's forward in topological order; the copies
 * of the graph outputs (the loss among them); d(loss) = 1; then, for every
 * node with a backward in reverse topological order, the recomputes that
 * backward needs followed by the backward itself. A recompute is placed just
 * before the first statement that reads it and runs once per pass: the
 * producer's inputs are rebuilt first (depth first, in input order) when
 * they are RECOMPUTE too, and every rebuilt tensor is remembered, so a
 * second reader reuses it. Recompute is a pass over the graph, not logic in
 * the emitter: the emitter only prints these statements.
 *
 * A plan that rebuilds (Remat.rebuild, the last resort of --max-arena)
 * forgets every recomputed value once the backward it was rebuilt for has
 * run: the next backward that reads the tensor rebuilds it again, from the
 * nearest kept tensor. So no recomputed value outlives one backward, and a
 * chain of rebuilt blocks is walked with two of its buffers live at a time
 * (Chen et al.'s quadratic checkpointing, and with some boundaries kept,
 * revolve's repeated forward sweeps); two variants keep a value for the
 * next backward that reads it, or for the rest of a block's backward
 * (forget_rebuilt). Each rebuild is a value of its own
 * (Value.copy counts them per tensor, for the emitter's names).
 *
 * Every buffer in the arena is a Value with the statements that define and
 * last read it; plan.c turns those intervals into offsets. A SAVE tensor's
 * forward value lives until its last reader in the backward; a RECOMPUTE
 * tensor's forward value dies in the forward, and its recomputed value lives
 * from the recompute to its last reader. An activation's gradient is zeroed
 * just before the first backward that adds into it and lives until its
 * producer's backward has read it. Parameter gradients live in the caller's
 * gradient buffer, not in the arena (zeroed by the step unless it
 * accumulates, but for those a backward writes first: param_first_writes),
 * except in the fused train step: there a
 * parameter's gradient is an arena value like an activation's, zeroed where
 * the first backward adds into it, and an S_UPDATE statement runs the
 * optimizer on the parameter as soon as nothing later adds into the
 * gradient or reads the parameter; so only the gradients being summed at
 * one statement exist at once, never a buffer of all of them.
 *
 * An alias op's output (Reshape, Flatten: the op table's `alias`) is a view:
 * a value with no buffer of its own that shares its input's, the forward
 * instance's in the forward, the instance the backward reads (recomputed or
 * saved) in a recompute, or the caller's input or parameter floats. Reading
 * a view keeps its owner live, so a source lives until the last read of
 * every view of it, down any chain of views. A view's gradient is a view of
 * its source's gradient, made (with the source's, zeroed, if that is not
 * there yet) where the first backward adds into it; the alias op's backward
 * then has nothing left to do and is left out. That is correct whatever
 * else adds into d(source), before or after: d(view) is read by nothing but
 * that backward, which would only add it into d(source) unchanged, so the
 * same terms are summed, in the backward's statement order, which no policy
 * changes (gradients stay bitwise identical across policies). Only where
 * d(view) is the seed (the loss is a view) does it get a buffer of its own,
 * and the backward adds it into d(source).
 *
 * A node whose backward reads a compact form (Node.compact: a Relu's
 * mask, a MaxPool's winners) gets one more value, written by its first
 * forward beside its outputs and live until its backward; a recompute of
 * the node writes the floats alone. Where the plan rebuilds the form
 * (Remat.compact_rebuilt) it is the other way round: the first forward
 * writes the floats alone, and the backward has the node recomputed
 * first, which writes the form too. The forward-only schedule has none.
 *
 * A recompute for a GEMM's weight gradient whose producer's backward runs
 * next and can write the tensor as it works (Gelu's Phi serves both) is
 * remade there: the GEMM's backward runs in two parts around it
 * (remake_split), and the tensor is never recomputed apart.
 *
 * The forward-only schedule is the first two parts alone.
 */
#include "../remat.h"

#include <string.h>

typedef struct {
    Ctx *c;
    const Graph *g;
    const Remat *r;
    Schedule *s;
    int *stack;             /* materialize's work list */
    int fused;              /* parameter gradients in the arena, updated */
    int train;              /* a train step: compact forms are made */
    int cap_stmts, cap_values;  /* room in s->stmts, s->values */
    int *copies;            /* per tensor: recomputed values made so far */
    int next;               /* the node whose backward runs after the one
                             * being placed, or -1 */
    int *held, nheld;       /* a plan that rebuilds: the tensors whose
                             * rebuilt value is remembered (rec[t] >= 0) */
    int at;                 /* the backward being placed: its g->order index */
    int *made_at;           /* with Remat.hold: per tensor, `at` when its
                             * remembered value was rebuilt */
    /* the train step's parameter gradients in the caller's buffer, per
     * tensor: 1, a backward has added into it; -1, it is never written
     * first (a view of it adds through the view: see param_first_writes) */
    signed char *padded;
    /* a backward split around a remade recompute (remake_split): the
     * reader's node, the inputs its second part computes, and the tensor
     * its producer's backward remakes; later_node -1 when none waits */
    int later_node, later_tensor;
    unsigned later_part;
} Sched;

/* Room for one more of n items of size bytes at *items, doubling (a plan
 * that rebuilds makes a statement per rebuild, unknown in advance). */
static void *room_for(Ctx *c, void *items, int n, int *cap, size_t size)
{
    if (n < *cap)
        return items;
    void *more = ctx_alloc(c, 2 * (size_t)*cap * size);
    memcpy(more, items, (size_t)n * size);
    *cap *= 2;
    return more;
}

static Value *next_value(Sched *x)
{
    Schedule *s = x->s;
    s->values = room_for(x->c, s->values, s->nvalues, &x->cap_values,
                         sizeof *s->values);
    return &s->values[s->nvalues];
}

static int add_stmt(Sched *x, StmtKind kind, int node, int tensor, int recompute)
{
    Schedule *s = x->s;
    s->stmts = room_for(x->c, s->stmts, s->nstmts, &x->cap_stmts,
                        sizeof *s->stmts);
    Stmt *st = &s->stmts[s->nstmts];
    st->kind = kind;
    st->node = node;
    st->tensor = tensor;
    st->recompute = recompute;
    st->scratch = -1;
    st->out = -1;
    st->compact = -1;
    st->writes = 0;
    st->pwrites = 0;
    st->fuse = -1;
    st->held = 0;
    st->part = 0;
    return s->nstmts++;
}

/* Arena space for statement st's own use, live during st alone. */
static void add_scratch(Sched *x, int st, const Node *n, int backward)
{
    long (*need)(const Graph *, const Node *, int) = op_table[n->op].scratch;
    long floats = need ? need(x->g, n, backward) : 0;
    if (floats <= 0)
        return;
    Schedule *s = x->s;
    Value *v = next_value(x);
    v->tensor = -1;
    v->kind = V_SCRATCH;
    v->def = v->last = st;
    v->bytes = (size_t)floats * sizeof(float);
    s->stmts[st].scratch = s->nvalues++;
}

/* The node's compact form, written by its first forward (statement st)
 * and read by its backward, which marks its last use. */
static void add_compact(Sched *x, int st, const Node *n)
{
    Schedule *s = x->s;
    Value *v = next_value(x);
    v->tensor = compact_operand(n);
    v->kind = V_COMPACT;
    v->def = v->last = st;
    v->bytes = (size_t)n->row->compact_bytes(x->g, n);
    s->stmts[st].compact = s->nvalues;
    s->compact[n - x->g->nodes] = s->nvalues++;
}

/* The plan rebuilds n's compact form with its recompute (the form's
 * tensor is n's output: remat.c's compact_free). */
static int compact_rebuilt(const Sched *x, const Node *n)
{
    return n->compact && x->r->compact_rebuilt[compact_operand(n)];
}

static int new_value(Sched *x, int tensor, ValueKind kind, int def)
{
    Schedule *s = x->s;
    Value *v = next_value(x);
    v->tensor = tensor;
    v->kind = kind;
    v->copy = kind == V_RECOMP ? x->copies[tensor]++ : 0;
    v->def = v->last = def;
    v->bytes = (size_t)x->g->tensors[tensor].numel *
               (x->g->tensors[tensor].is_int ? sizeof(int64_t) : sizeof(float));
    int *slot = kind == V_FWD ? s->fwd : kind == V_RECOMP ? s->rec : s->grad;
    slot[tensor] = s->nvalues;
    return s->nvalues++;
}

/* Reading a view reads its owner's buffer: both stay live. */
static void use(Sched *x, int value, int stmt)
{
    assert(value >= 0 && "a statement reads a value nobody defined");
    Value *v = &x->s->values[value];
    if (v->last < stmt)
        v->last = stmt;
    if (v->view == VIEW_VALUE && x->s->values[v->owner].last < stmt)
        x->s->values[v->owner].last = stmt;
}

/* Makes value v a view of value `of`'s buffer (of that buffer's owner when
 * `of` is a view itself, so an owner is never a view), or of the caller's
 * memory when of < 0. */
static void make_view(Sched *x, int v, int of)
{
    Value *val = &x->s->values[v];
    const Value *src = of >= 0 ? &x->s->values[of] : NULL;
    val->view = !src || src->view == VIEW_CALLER ? VIEW_CALLER : VIEW_VALUE;
    val->owner = !src ? -1 : src->view == VIEW_VALUE ? src->owner : of;
}

static int is_act(const Sched *x, int t)
{
    return x->g->tensors[t].kind == T_ACT;
}

/* t's gradient is a value in the arena: an activation's always, a
 * parameter's in the fused step (else it is the caller's gradient slot). */
static int grad_in_arena(const Sched *x, int t)
{
    const Tensor *y = &x->g->tensors[t];
    return y->kind == T_ACT || (x->fused && y->kind == T_PARAM && y->has_grad);
}

/* The value a backward-phase statement reads for forward tensor t. */
static int instance(const Sched *x, int t)
{
    return x->r->keep[t] == KEEP_RECOMPUTE ? x->s->rec[t] : x->s->fwd[t];
}

static void count_recompute(Sched *x, const Node *nd)
{
    x->s->recompute_execs++;
    x->s->recompute_flops += op_table[nd->op].flops(x->g, nd);
    /* as the solver charges it: each rebuilt output its share */
    for (int o = 0; o < nd->nout; o++)
        if (x->r->keep[nd->out[o]] == KEEP_RECOMPUTE)
            x->s->recompute_cost += output_cost(x->r->rates, x->g, nd, o);
}

static void run_forward(Sched *x, int n, int recompute)
{
    const Node *nd = &x->g->nodes[n];
    int s = add_stmt(x, S_FORWARD, n, -1, recompute);
    add_scratch(x, s, nd, 0);
    for (int i = 0; i < nd->nin; i++)
        if (is_act(x, nd->in[i]))
            use(x, recompute ? instance(x, nd->in[i]) : x->s->fwd[nd->in[i]], s);
    for (int o = 0; o < nd->nout; o++) {
        int v = new_value(x, nd->out[o], recompute ? V_RECOMP : V_FWD, s);
        x->s->stmts[s].out = o ? x->s->stmts[s].out : v;
        if (recompute && x->r->rebuild) {
            x->held[x->nheld++] = nd->out[o];
            if (x->made_at)
                x->made_at[nd->out[o]] = x->at;
            x->s->stmts[s].held |= x->r->hold &&
                                   x->at <= x->r->hold[nd->out[o]];
        }
    }
    if (nd->compact && x->train && recompute == compact_rebuilt(x, nd))
        add_compact(x, s, nd);
    if (op_table[nd->op].alias) {
        int src = nd->in[0];
        make_view(x, recompute ? x->s->rec[nd->out[0]] : x->s->fwd[nd->out[0]],
                  !is_act(x, src) ? -1
                  : recompute ? instance(x, src) : x->s->fwd[src]);
    }
    if (recompute) {
        count_recompute(x, nd);
    } else {
        x->s->forward_execs++;
        x->s->forward_flops += op_table[nd->op].flops(x->g, nd);
    }
}

/* t still has to be rebuilt in this backward pass. */
static int pending(const Sched *x, int t)
{
    return is_act(x, t) && x->r->keep[t] == KEEP_RECOMPUTE && x->s->rec[t] < 0;
}

/* Rebuilds t and what it needs, producers first, depth first in input
 * order. Iterative, with an explicit stack, so that a chain of any length
 * cannot overflow the C stack. A tensor stays on the stack until all its
 * producer's pending inputs are built above it; a tensor already built
 * when it comes back to the top is dropped. Only a pending tensor pushes
 * its inputs, once, so the stack never holds more than one entry per input
 * edge. */
static void materialize(Sched *x, int t)
{
    if (!pending(x, t))
        return;
    int *stack = x->stack, top = 0;
    stack[top++] = t;
    while (top > 0) {
        const Node *n = &x->g->nodes[x->g->tensors[stack[top - 1]].producer];
        int ready = 1;
        for (int i = n->nin - 1; i >= 0; i--)
            if (pending(x, n->in[i])) {
                stack[top++] = n->in[i];
                ready = 0;
            }
        if (!ready)
            continue;
        if (pending(x, stack[--top]))   /* else built through another path */
            run_forward(x, (int)(n - x->g->nodes), 1);
    }
}

/* t is an alias op's output: its gradient can be its source's. */
static int grad_view_of(const Sched *x, int t)
{
    int p = x->g->tensors[t].producer;
    return p >= 0 && op_table[x->g->nodes[p].op].alias ? x->g->nodes[p].in[0]
                                                        : -1;
}

/* Gives activation t its gradient value, about to be added into: zeroed,
 * or, when t is a view, a view of its source's gradient (made first the
 * same way, up a chain of views; a parameter's is in the caller's gradient
 * buffer). Iterative, on the materialize stack, as a chain may be long. */
static int need_grad(Sched *x, int t)
{
    int *chain = x->stack, n = 0;
    while (x->s->grad[t] < 0) {
        chain[n++] = t;
        int src = grad_view_of(x, t);
        if (src < 0 || !grad_in_arena(x, src))
            break;
        t = src;
    }
    while (n > 0) {
        t = chain[--n];
        int src = grad_view_of(x, t);
        if (src < 0) {
            new_value(x, t, V_GRAD, add_stmt(x, S_ZERO, -1, t, 0));
            continue;
        }
        int v = new_value(x, t, V_GRAD, add_stmt(x, S_GRAD_VIEW, -1, t, 0));
        make_view(x, v, grad_in_arena(x, src) ? x->s->grad[src] : -1);
        if (grad_in_arena(x, src))
            use(x, x->s->grad[src], x->s->values[v].def);
    }
    return x->s->grad[t];
}

/* A written d(input i) of an elementwise backward takes d(output 0)'s
 * buffer (a view of it) when they have one size: d(output 0) is complete
 * and read by this call alone, so the call turns it into d(input i) in
 * place, and the two never need room side by side. One input per call:
 * two written in place would share a buffer. */
static int take_in_place(Sched *x, const Node *nd, int i, int v)
{
    Schedule *sc = x->s;
    if (!(op_table[nd->op].bwd_in_place & (1u << i)) ||
        !x->g->tensors[nd->out[0]].has_grad)
        return 0;
    int go = sc->grad[nd->out[0]];
    if (go < 0 || sc->values[go].view == VIEW_CALLER ||
        sc->values[go].bytes != sc->values[v].bytes)
        return 0;
    make_view(x, v, go);
    return 1;
}

/* The backward at statement s may write, not add, d(input i) when that is
 * an activation's gradient zeroed for this very call (made since statement
 * `first`), read by nothing yet (no view of it), and the node's other
 * inputs are other tensors (Add(x, x) adds twice into one buffer): the
 * zeroing is then dropped and the gradient's life starts at the call. */
static void take_first_writes(Sched *x, int n, const int *want, int first,
                              int s)
{
    const Graph *g = x->g;
    const Node *nd = &g->nodes[n];
    Schedule *sc = x->s;
    int in_place = 0;
    for (int i = 0; i < nd->nin; i++) {
        int t = nd->in[i], twice = 0;
        if (!want[i] || !(op_table[nd->op].bwd_writes & (1u << i)) ||
            !grad_in_arena(x, t) || g->tensors[t].kind != T_ACT)
            continue;
        for (int j = 0; j < nd->nin; j++)
            twice |= j != i && want[j] && nd->in[j] == t;
        Value *v = &sc->values[sc->grad[t]];
        if (twice || v->view != VIEW_NONE || v->def < first ||
            sc->stmts[v->def].kind != S_ZERO || v->last != v->def)
            continue;
        sc->stmts[v->def].writes = 1;
        sc->stmts[s].writes |= 1u << i;
        v->def = v->last = s;
        if (!in_place)
            in_place = take_in_place(x, nd, i, sc->grad[t]);
    }
}

/* A plan that rebuilds, after the backward of node n: every rebuilt
 * value is forgotten, so that the next reader rebuilds its own; under
 * REBUILD_NEXT not one the very next backward reads (a block's input, read
 * by its first node's backward and by the backward of the node that made
 * it, is then rebuilt once for both, at the price of more live at once
 * where the two are far apart in the graph); under REBUILD_BLOCK none
 * while the next backward is in n's block either, so that a block's
 * backward rebuilds it once, from the nearest kept tensor, as revolve
 * sweeps forward once per step it reverses. */
static void forget_rebuilt(Sched *x, int n)
{
    const Node *next = x->next >= 0 ? &x->g->nodes[x->next] : NULL;
    const int *hold = x->r->hold;
    int mode = x->r->rebuild, k = 0;
    if (mode == REBUILD_BLOCK && next && next->block >= 0 &&
        next->block == x->g->nodes[n].block)
        return;
    for (int i = 0; i < x->nheld; i++) {
        int t = x->held[i];
        if (hold && x->made_at[t] <= hold[t])
            continue;       /* a checkpoint: kept to its last reader */
        if (mode != REBUILD_EACH && next &&
            node_backward_reads_tensor(x->g, next, t))
            x->held[k++] = t;
        else
            x->s->rec[t] = -1;
    }
    x->nheld = k;
}

/* The train step's backward at statement s (not fused: parameter
 * gradients are the caller's) writes d(input i) of a trainable parameter
 * whose first contribution it is, when the row can write that input and
 * the node reads the parameter once; the step then leaves that gradient
 * out of the zeroing unless it accumulates (emit.c). A parameter some view
 * reads gets contributions through the view's gradient, a view of its
 * slot, which this does not follow: it is never written first. */
static void param_first_writes(Sched *x, const Node *nd, const int *want,
                               int s)
{
    const Graph *g = x->g;
    for (int i = 0; i < nd->nin; i++) {
        int t = nd->in[i], twice = 0;
        if (!want[i] || g->tensors[t].kind != T_PARAM || x->padded[t])
            continue;
        for (int j = 0; j < nd->nin; j++)
            twice |= j != i && want[j] && nd->in[j] == t;
        if ((op_table[nd->op].bwd_writes >> i & 1) && !twice)
            x->s->stmts[s].pwrites |= 1u << i;
        x->padded[t] = 1;
    }
}

unsigned stmt_backward(const Graph *g, const Stmt *st, int *want)
{
    const Node *n = &g->nodes[st->node];
    node_grad_inputs(g, n, want);
    if (!st->part)
        return node_backward_reads(g, n);
    for (int i = 0; i < n->nin; i++)
        want[i] &= (int)(st->part >> i & 1);
    return op_backward_needs(n, want);
}

/* The backward of node n for the wanted inputs in `part` (0: all of
 * them) at a new statement, what it reads rebuilt first; its index. */
static int backward_part(Sched *x, int n, unsigned part)
{
    const Graph *g = x->g;
    const Node *nd = &g->nodes[n];
    Stmt probe = {.node = n, .part = part};
    int want[MAX_IO];
    unsigned reads = stmt_backward(g, &probe, want);
    for (int i = 0; i < nd->nin; i++)
        if (reads & NEED_IN(i))
            materialize(x, nd->in[i]);
    for (int o = 0; o < nd->nout; o++)
        if (reads & NEED_OUT(o))
            materialize(x, nd->out[o]);
    if (compact_rebuilt(x, nd))
        materialize(x, compact_operand(nd));
    int first = x->s->nstmts;
    for (int i = 0; i < nd->nin; i++)
        if (want[i] && grad_in_arena(x, nd->in[i]))
            need_grad(x, nd->in[i]);
    int s = add_stmt(x, S_BACKWARD, n, -1, 0);
    x->s->stmts[s].part = part;
    take_first_writes(x, n, want, first, s);
    if (x->padded)
        param_first_writes(x, nd, want, s);
    add_scratch(x, s, nd, 1);
    if (nd->compact) {
        x->s->stmts[s].compact = x->s->compact[n];
        use(x, x->s->compact[n], s);
    }
    for (int o = 0; o < nd->nout; o++) {
        if (g->tensors[nd->out[o]].has_grad)
            use(x, x->s->grad[nd->out[o]], s);
        if (reads & NEED_OUT(o))
            use(x, instance(x, nd->out[o]), s);
    }
    for (int i = 0; i < nd->nin; i++) {
        if ((reads & NEED_IN(i)) && is_act(x, nd->in[i]))
            use(x, instance(x, nd->in[i]), s);
        if (want[i] && grad_in_arena(x, nd->in[i]))
            use(x, x->s->grad[nd->in[i]], s);
    }
    return s;
}

/* t, or an alias op's source, down a chain of them: the tensor whose
 * memory (and gradient buffer) t's is. */
static int alias_root(const Graph *g, int t)
{
    for (;;) {
        int p = g->tensors[t].producer;
        if (p < 0 || !op_table[g->nodes[p].op].alias)
            return t;
        t = g->nodes[p].in[0];
    }
}

/* The parameter whose memory tensor t is: t, or a view's source down a
 * chain of views; -1 for anything else. */
static int param_under(const Graph *g, int t)
{
    int root = alias_root(g, t);
    return g->tensors[root].kind == T_PARAM ? root : -1;
}

/* 1 when d(input i) of n shares its gradient buffer with a gradient that
 * p's backward or n's other wanted inputs add into. */
static int grad_shared(const Graph *g, const Node *n, int i, const Node *p,
                       const int *want)
{
    int root = alias_root(g, n->in[i]);
    for (int k = 0; k < p->nin; k++)
        if (alias_root(g, p->in[k]) == root)
            return 1;
    for (int j = 0; j < n->nin; j++)
        if (j != i && want[j] && alias_root(g, n->in[j]) == root)
            return 1;
    return 0;
}

/* A remade recompute. Node n's backward reads a recomputed tensor t only
 * for some inputs' gradients (a Gemm's weight gradient reads the
 * activation it multiplied, the input's gradient does not), and t's
 * producer p, whose backward runs next, can write t as it computes its
 * own gradient from the same inputs (Gelu's Phi serves both): then n's
 * backward runs in two parts, the gradients that do not read t first
 * (d(t) among them, which p's backward needs), then p's backward writing
 * t beside d(p's input), then the rest, reading that t. The recompute
 * costs a store where it cost a second pass of Phi. The returned t's
 * reader parts go in *later; -1 where the split does not apply. A
 * deferred gradient shares no buffer (through views either) with p's
 * inputs' or n's other ones (the terms of a sum would change order), and,
 * as with fused recomputes, no split under an arena bound or a plan that
 * rebuilds, whose solvers count one backward per node. */
static int remake_split(const Sched *x, int n, unsigned *later)
{
    const Graph *g = x->g;
    const Node *nd = &g->nodes[n];
    if (!x->train || x->r->rebuild || x->r->max_arena > 0 ||
        !op_table[nd->op].bwd_parts || nd->compact || x->next < 0)
        return -1;
    const Node *p = &g->nodes[x->next];
    unsigned preads = node_backward_reads(g, p);
    int t = p->out[0], at = -1, want[MAX_IO];
    if (!op_table[p->op].bwd_remakes || p->nout != 1 || p->compact ||
        (preads & NEED_OUT(0)) || !pending(x, t) ||
        g->tensors[t].nconsumers != 1 || g->tensors[t].is_output)
        return -1;
    for (int k = 0; k < p->nin; k++)     /* a parameter is always there */
        if (!(preads & NEED_IN(k)) && is_act(x, p->in[k]))
            return -1;
    node_grad_inputs(g, nd, want);
    *later = 0;
    for (int i = 0; i < nd->nin; i++) {
        int one[MAX_IO] = {0};
        one[i] = 1;
        if (nd->in[i] == t) {
            if (at >= 0 || !want[i] ||
                needs_read_tensor(nd, op_backward_needs(nd, one), t))
                return -1;
            at = i;
        } else if (want[i] &&
                   needs_read_tensor(nd, op_backward_needs(nd, one), t)) {
            if (grad_shared(g, nd, i, p, want))
                return -1;
            *later |= 1u << i;
        }
    }
    return at >= 0 && *later ? t : -1;
}

static void run_backward(Sched *x, int n)
{
    const Graph *g = x->g;
    const Node *nd = &g->nodes[n];
    /* d(view) is d(source): everything was added where it belongs */
    if (op_table[nd->op].alias) {
        assert(x->s->grad[nd->out[0]] >= 0 && "a backward without d(output)");
        if (x->s->values[x->s->grad[nd->out[0]]].view != VIEW_NONE)
            return;
    }
    unsigned later = 0;     /* one split waits at a time */
    int t = x->later_node < 0 ? remake_split(x, n, &later) : -1;
    if (t >= 0) {
        backward_part(x, n, ((1u << nd->nin) - 1) & ~later);
        x->later_node = n;
        x->later_part = later;
        x->later_tensor = t;
        return;
    }
    int s = backward_part(x, n, 0);
    if (x->later_node >= 0 && g->tensors[x->later_tensor].producer == n) {
        int v = new_value(x, x->later_tensor, V_RECOMP, s);
        x->s->stmts[s].out = v;
        count_recompute(x, nd);
        x->s->remade_recomputes++;
        backward_part(x, x->later_node, x->later_part);
        x->later_node = -1;
    }
    if (x->r->rebuild)
        forget_rebuilt(x, n);
}

static int *filled(Ctx *c, int n, int v)
{
    int *a = ctx_alloc(c, (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        a[i] = v;
    return a;
}


/* The fused step's updates: each trainable parameter's S_UPDATE goes right
 * after the last statement that adds into its gradient or reads the
 * parameter (a recompute or a backward may read it after its gradient is
 * final: a Where's condition computed from it has no gradient), so nothing
 * ever sees a parameter half-way through the step. A trainable parameter
 * the loss does not reach gets a zero gradient, as in the gradient buffer
 * of the unfused step, whose optimizer steps it too (weight decay,
 * momentum). The statements are then renumbered around the insertions. */
static void place_updates(Sched *x)
{
    const Graph *g = x->g;
    Schedule *s = x->s;
    int *after = filled(x->c, g->ntensors, -1);
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *p = &g->tensors[t];
        if (p->kind != T_PARAM || !p->trainable)
            continue;
        if (s->grad[t] < 0)
            new_value(x, t, V_GRAD, add_stmt(x, S_ZERO, -1, t, 0));
        after[t] = s->values[s->grad[t]].last;
    }
    for (int i = 0; i < s->nstmts; i++) {
        const Stmt *st = &s->stmts[i];
        if (st->kind != S_FORWARD && st->kind != S_BACKWARD)
            continue;
        const Node *n = &g->nodes[st->node];
        int at = st->kind == S_FORWARD && st->fuse >= 0 ? st->fuse : i;
        for (int k = 0; k < n->nin; k++) {
            int p = param_under(g, n->in[k]);
            if (p >= 0 && after[p] >= 0 && after[p] < at)
                after[p] = at;
        }
    }
    /* shift[i]: the updates placed before old statement i, so its new
     * index is i + shift[i]; the parameters bucketed by statement, in file
     * order within one, from shift's prefix sums */
    int n = s->nstmts;
    int *shift = filled(x->c, n + 1, 0);
    for (int t = 0; t < g->ntensors; t++)
        if (after[t] >= 0)
            shift[after[t] + 1]++;
    for (int i = 1; i <= n; i++)
        shift[i] += shift[i - 1];
    int *bucket = filled(x->c, shift[n] + 1, -1);
    int *fill = filled(x->c, n + 1, 0);
    for (int t = 0; t < g->ntensors; t++)
        if (after[t] >= 0)
            bucket[shift[after[t]] + fill[after[t]]++] = t;
    Stmt *old = s->stmts;
    s->stmts = ctx_alloc(x->c, (size_t)(n + shift[n]) * sizeof(Stmt));
    s->nstmts = 0;
    for (int i = 0; i < n; i++) {
        s->stmts[s->nstmts++] = old[i];
        for (int k = shift[i]; k < shift[i + 1]; k++)
            use(x, s->grad[bucket[k]],
                add_stmt(x, S_UPDATE, -1, bucket[k], 0));
    }
    for (int i = 0; i < s->nstmts; i++)
        if (s->stmts[i].fuse >= 0)
            s->stmts[i].fuse += shift[s->stmts[i].fuse];
    for (int v = 0; v < s->nvalues; v++) {
        Value *val = &s->values[v];
        int stepped = val->kind == V_GRAD && val->tensor >= 0 &&
                      g->tensors[val->tensor].kind == T_PARAM;
        val->def += shift[val->def];
        if (!stepped)       /* a stepped gradient's last is its S_UPDATE's */
            val->last += shift[val->last];
    }
}

/* The statement after which each trainable parameter's gradient in the
 * caller's buffer is final in a train schedule: the last backward that adds
 * into it or into a view of it (a gradient made a view of the parameter's
 * writes through to it). One the loss does not reach is final from the
 * start (zeroed): its statement is the seed's. -1 for every other tensor. */
int *grad_final_after(Ctx *c, const Graph *g, const Schedule *s)
{
    int *after = filled(c, g->ntensors, -1), seed = 0;
    for (int i = 0; i < s->nstmts; i++)
        if (s->stmts[i].kind == S_SEED)
            seed = i;
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].kind == T_PARAM && g->tensors[t].trainable)
            after[t] = seed;
    for (int i = 0; i < s->nstmts; i++) {
        if (s->stmts[i].kind != S_BACKWARD)
            continue;
        const Node *n = &g->nodes[s->stmts[i].node];
        int want[MAX_IO];
        stmt_backward(g, &s->stmts[i], want);
        for (int k = 0; k < n->nin; k++) {
            int p = want[k] ? param_under(g, n->in[k]) : -1;
            if (p >= 0 && after[p] >= 0)
                after[p] = i;
        }
    }
    return after;
}

/* ---- recomputes fused into their reader ------------------------------------ */

/* n's call runs a chunk at a time: a chunked row whose every operand is
 * float32 with `numel` elements (no broadcasting). */
static int chunk_fits(const Graph *g, const Node *n, long numel)
{
    if (!op_table[n->op].chunked || op_table[n->op].alias)
        return 0;
    for (int i = 0; i < n->nin + n->nout; i++) {
        const Tensor *t = &g->tensors[i < n->nin ? n->in[i]
                                                 : n->out[i - n->nin]];
        if (t->is_int || t->numel != numel)
            return 0;
    }
    return 1;
}

/* Counts a read of value v at statement i: readers[v] and where. */
static void count_read(const Schedule *s, int v, int i, int *readers,
                       int *where)
{
    if (v < 0)
        return;
    if (s->values[v].view == VIEW_VALUE)
        v = s->values[v].owner;
    if (where[v] != i)
        readers[v]++;
    where[v] = i;
}

/* How many statements read each value (a view's reads its owner's), and
 * the last that does. A plan that rebuilds has no fusion, so each
 * recomputed tensor has one instance. */
static void count_readers(const Sched *x, int *readers, int *where)
{
    const Schedule *s = x->s;
    for (int i = 0; i < s->nstmts; i++) {
        const Stmt *st = &s->stmts[i];
        if (st->kind != S_FORWARD && st->kind != S_BACKWARD)
            continue;
        const Node *n = &x->g->nodes[st->node];
        int want[MAX_IO];
        unsigned reads = st->kind == S_FORWARD ? 0
                         : stmt_backward(x->g, st, want);
        for (int k = 0; k < n->nin; k++)
            if (is_act(x, n->in[k]) &&
                (st->kind == S_FORWARD || (reads & NEED_IN(k))))
                count_read(s, st->kind == S_FORWARD && !st->recompute
                                  ? s->fwd[n->in[k]] : instance(x, n->in[k]),
                           i, readers, where);
        for (int o = 0; st->kind == S_BACKWARD && o < n->nout; o++)
            if (reads & NEED_OUT(o))
                count_read(s, instance(x, n->out[o]), i, readers, where);
    }
}

/* Bytes live at each statement: every value with a buffer of its own,
 * from its definition to its last reader. */
static double *live_bytes(const Sched *x)
{
    const Schedule *s = x->s;
    double *live = ctx_alloc(x->c, ((size_t)s->nstmts + 1) * sizeof *live);
    for (int i = 0; i <= s->nstmts; i++)
        live[i] = 0;
    for (int k = 0; k < s->nvalues; k++) {
        const Value *v = &s->values[k];
        if (v->view != VIEW_NONE)
            continue;
        live[v->def] += (double)v->bytes;
        live[v->last + 1] -= (double)v->bytes;
    }
    for (int i = 1; i <= s->nstmts; i++)
        live[i] += live[i - 1];
    return live;
}

/* The value holding the buffer the recompute at statement r reads as
 * its k-th input, or -1 (a parameter or the caller's input). */
static int input_buffer(const Sched *x, const Node *n, int k)
{
    if (!is_act(x, n->in[k]))
        return -1;
    int v = instance(x, n->in[k]);
    const Value *val = &x->s->values[v];
    return val->view == VIEW_VALUE ? val->owner
           : val->view == VIEW_NONE ? v : -1;
}

/* The bytes live at statement j (in [r, b]) were the recompute at r run
 * inside its reader at b: its output a chunk of `chunk` bytes at b
 * alone, and what it reads (each buffer once) live until b. */
static double live_fused(const Sched *x, const double *live, int r, int b,
                         int j, double chunk)
{
    const Schedule *s = x->s;
    const Node *n = &x->g->nodes[s->stmts[r].node];
    double bytes = live[j] - (double)s->values[s->stmts[r].out].bytes;
    bytes += j == b ? chunk : 0;
    for (int k = 0; k < n->nin; k++) {
        int v = input_buffer(x, n, k), dup = 0;
        for (int i = 0; i < k; i++)
            dup |= v >= 0 && input_buffer(x, n, i) == v;
        if (v >= 0 && !dup && s->values[v].last < j)
            bytes += (double)s->values[v].bytes;
    }
    return bytes;
}

/* Recompute statement r, whose one reader is statement b, can run inside
 * b's loop, FUSE_CHUNK elements at a time: both elementwise over one
 * count larger than a chunk, neither with a compact form or scratch, b
 * neither remaking its output nor a part of a split backward (a remade
 * output is written whole, for a later statement), and with what the
 * recompute reads kept live until b, no statement between has more bytes
 * live than the most there had before. */
static int fusable(const Sched *x, const double *live, int r, int b)
{
    const Schedule *s = x->s;
    const Stmt *rs = &s->stmts[r], *bs = &s->stmts[b];
    const Graph *g = x->g;
    const Node *rn = &g->nodes[rs->node], *bn = &g->nodes[bs->node];
    long numel = g->tensors[rn->out[0]].numel;
    if (bs->kind != S_BACKWARD || bs->fuse >= 0 || bs->out >= 0 ||
        bs->part || rn->nout != 1 ||
        rs->compact >= 0 || rs->scratch >= 0 || bs->compact >= 0 ||
        bs->scratch >= 0 || s->values[rs->out].view != VIEW_NONE ||
        numel <= FUSE_CHUNK || !chunk_fits(g, rn, numel) ||
        !chunk_fits(g, bn, numel))
        return 0;
    double was = 0, now = 0;
    for (int j = r; j <= b; j++) {
        was = live[j] > was ? live[j] : was;
        double f = live_fused(x, live, r, b, j, FUSE_CHUNK * sizeof(float));
        now = f > now ? f : now;
    }
    return now <= was;
}

/* A recomputed pointwise tensor that one pointwise backward alone reads
 * is computed inside that backward's loop, a chunk at a time, and never
 * written whole (issue 28): the recompute's place emits nothing, its
 * value shrinks to a chunk live at the reader, and what it reads lives
 * until there. The same kernels run on the same elements, so the bits
 * are the unfused schedule's. Not under an arena bound: the arena
 * solver's lower bounds count a rebuilt tensor whole at its reader. */
static void fuse_recomputes(Sched *x)
{
    Schedule *s = x->s;
    int *readers = filled(x->c, s->nvalues, 0);
    int *where = filled(x->c, s->nvalues, -1);
    count_readers(x, readers, where);
    double *live = live_bytes(x);
    for (int r = 0; r < s->nstmts; r++) {
        Stmt *rs = &s->stmts[r];
        if (rs->kind != S_FORWARD || !rs->recompute || rs->out < 0 ||
            readers[rs->out] != 1 || !fusable(x, live, r, where[rs->out]))
            continue;
        int b = where[rs->out];
        for (int j = r; j <= b; j++)
            live[j] = live_fused(x, live, r, b, j, FUSE_CHUNK * sizeof(float));
        const Node *rn = &x->g->nodes[rs->node];
        for (int k = 0; k < rn->nin; k++)
            if (is_act(x, rn->in[k]))
                use(x, instance(x, rn->in[k]), b);
        Value *v = &s->values[rs->out];
        v->def = v->last = b;
        v->bytes = FUSE_CHUNK * sizeof(float);
        rs->fuse = b;
        s->stmts[b].fuse = r;
        s->fused_recomputes++;
    }
}

/* An elementwise forward (fwd_in_place) whose input's buffer is read by
 * nothing after it writes its output over that buffer: the output becomes
 * a view of the input's value, which then lives as long as the output is
 * read (the output's last use covers its views' reads). A pass over the
 * finished schedule, since only then is each value's last reader known;
 * then one more re-points the output's views at the input's value, as an
 * owner is never a view (an output turned view is never an input turned
 * owner: that needs an input that is no view). */
static void forward_in_place(Sched *x)
{
    Schedule *s = x->s;
    int *rec = filled(x->c, x->g->ntensors, -1);    /* as of statement i */
    for (int i = 0; i < s->nstmts; i++) {
        const Stmt *st = &s->stmts[i];
        if (st->kind != S_FORWARD)
            continue;
        const Node *nd = &x->g->nodes[st->node];
        for (int o = 0; st->recompute && o < nd->nout; o++)
            rec[nd->out[o]] = st->out + o;
        if (!op_table[nd->op].fwd_in_place || !is_act(x, nd->in[0]) ||
            st->fuse >= 0)
            continue;
        int vin = !st->recompute ? s->fwd[nd->in[0]]
                  : x->r->keep[nd->in[0]] == KEEP_RECOMPUTE ? rec[nd->in[0]]
                                                             : s->fwd[nd->in[0]];
        int vout = st->out;
        Value *in = &s->values[vin], *out = &s->values[vout];
        if (in->view != VIEW_NONE || out->view != VIEW_NONE ||
            in->last != i || in->bytes != out->bytes)
            continue;
        out->view = VIEW_VALUE;
        out->owner = vin;
        in->last = out->last;
    }
    for (int k = 0; k < s->nvalues; k++) {
        Value *v = &s->values[k];
        if (v->view == VIEW_VALUE && s->values[v->owner].view == VIEW_VALUE)
            v->owner = s->values[v->owner].owner;
    }
}

int schedule_build(Ctx *c, const Graph *g, const Remat *r, int kind,
                   Schedule *s)
{
    Sched x = {c, g, r, s, NULL, kind == SCHED_FUSED, kind != SCHED_FORWARD,
               0, 0, NULL, -1, NULL, 0, 0, NULL, NULL, -1, -1, 0};
    size_t nt = (size_t)g->ntensors, nn = (size_t)g->nnodes;
    s->fused_recomputes = s->remade_recomputes = 0;
    /* enough unless the plan rebuilds (room_for grows them then) */
    x.cap_stmts = (int)(3 * nn + nt + (size_t)g->noutputs + 1);
    s->stmts = ctx_alloc(c, (size_t)x.cap_stmts * sizeof(Stmt));
    /* per tensor: forward, recompute, gradient; per node: the scratch of
     * its forward, recompute and backward, and its compact form */
    x.cap_values = (int)(3 * nt + 4 * nn);
    s->values = ctx_alloc(c, (size_t)x.cap_values * sizeof(Value));
    x.copies = filled(c, g->ntensors, 0);
    /* a tensor is held at most once: rebuilt only when not remembered */
    x.held = ctx_alloc(c, nt * sizeof *x.held);
    if (r->rebuild && r->hold)
        x.made_at = filled(c, g->ntensors, 0);
    s->fwd = filled(c, g->ntensors, -1);
    s->rec = filled(c, g->ntensors, -1);
    s->grad = filled(c, g->ntensors, -1);
    s->compact = filled(c, g->nnodes, -1);
    /* each tensor is pushed at most once per input edge reading it */
    size_t edges = 1;
    for (int k = 0; k < g->nnodes; k++)
        edges += (size_t)g->nodes[k].nin;
    x.stack = ctx_alloc(c, (edges + nt) * sizeof(int));
    for (int k = 0; k < g->nnodes; k++)
        run_forward(&x, g->order[k], 0);
    for (int i = 0; i < g->noutputs; i++)
        use(&x, s->fwd[g->outputs[i]],
            add_stmt(&x, S_OUTPUT, -1, g->outputs[i], 0));
    if (kind == SCHED_FORWARD || g->loss < 0 || !g->tensors[g->loss].has_grad) {
        forward_in_place(&x);
        return 0;
    }
    new_value(&x, g->loss, V_GRAD, add_stmt(&x, S_SEED, -1, g->loss, 0));
    if (!x.fused) {
        x.padded = ctx_alloc(c, nt);
        for (int k = 0; k < g->nnodes; k++)
            if (op_table[g->nodes[k].op].alias)
                x.padded[g->nodes[k].in[0]] = -1;
    }
    for (int k = g->nnodes - 1; k >= 0; k--) {
        if (!node_has_backward(g, &g->nodes[g->order[k]]))
            continue;
        x.next = -1;
        for (int j = k - 1; j >= 0 && x.next < 0; j--)
            if (node_has_backward(g, &g->nodes[g->order[j]]))
                x.next = g->order[j];
        x.at = k;
        run_backward(&x, g->order[k]);
    }
    if (!r->rebuild && r->max_arena <= 0)
        fuse_recomputes(&x);
    if (x.fused)
        place_updates(&x);
    forward_in_place(&x);
    return 0;
}
