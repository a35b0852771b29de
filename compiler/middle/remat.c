/*
 * remat.c: SAVE or RECOMPUTE for every forward tensor the backward needs.
 *
 * A tensor is needed when a backward reads it (the op table's needs masks,
 * restricted to the gradients that are wanted), or when a recompute that is
 * needed reads it. Walking the nodes in reverse topological order visits
 * every consumer before its producer, so when a tensor is reached, all that
 * can make it needed has been seen; deciding RECOMPUTE then marks the
 * producer's inputs needed in turn.
 *
 * The structural rules come first and no policy overrides them, as with
 * PyTorch's checkpoint(): a tensor read by a node outside the block that
 * produced it is a block boundary and is saved; a tensor produced outside
 * every block (in a graph that has blocks) is saved, as under `none`. A graph
 * without blocks is one block. Inside a block the node's own `remat`
 * attribute, else the policy's first matching rule, decides: *_SAVE saves,
 * *_RECOMPUTE recomputes. (A memory budget may later turn PREFER_*, and
 * under a budget the structure's saves are PREFER_SAVE too, unless the
 * policy says must_save: remat_classify_open.)
 *
 * Invariant: a RECOMPUTE tensor's producer reads only inputs, parameters,
 * SAVE tensors and RECOMPUTE tensors, so the schedule can rebuild it.
 *
 * What is saved costs the bytes of the buffers it keeps, each counted once
 * (saved_bytes, which the report and the generated file's summary print).
 * An alias op's output (Reshape, Flatten) is a view with no buffer of its
 * own (schedule.c): saving it keeps its storage, the first tensor up its
 * chain of views that is not one. So a storage is counted once when it or
 * any view of it is SAVE, even where the storage itself is RECOMPUTE (its
 * forward buffer stays live for the saved view), and a view of a graph
 * input or parameter costs nothing: those floats are the caller's, never
 * the arena's. The per-tensor lines of the report still give each tensor's
 * own size, and saved_tensors counts SAVE tensors, views among them.
 *
 * A compact form (Node.compact: a Relu's 1-bit mask, a MaxPool's window
 * winners) is kept from its node's forward to its backward: its bytes count
 * in saved_bytes (and compact_bytes), and a tensor that no backward reads
 * but through compact forms is KEEP_COMPACT (no float kept, nothing
 * recomputed) unless a recompute needs it. Every policy keeps them. Under a
 * saved-bytes budget (remat_classify_budget) a free tensor whose compact
 * forms are all its producer's (a Relu's mask of its output, not a
 * MaxPool's winners of its input) is a choice too: keep the forms, or
 * rebuild them with the tensor (KEEP_RECOMPUTE: the producer's recompute
 * writes its mask again, no byte kept). So a budget's curve goes below the
 * masks, down to what the floats' recomputes need. A needed tensor so
 * chosen works the same way: saved, its floats and forms are kept;
 * recomputed, the recompute writes both.
 */
#include "middle.h"

#include <string.h>

/* reader_block[t]: the block every reader of t is in; -2 when readers are
 * in different blocks or outside, -3 when unread. */
static int *reader_blocks(Ctx *c, const Graph *g)
{
    int *rb = ctx_alloc(c, (size_t)g->ntensors * sizeof(int));
    for (int t = 0; t < g->ntensors; t++)
        rb[t] = -3;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        for (int i = 0; i < n->nin; i++) {
            int *b = &rb[n->in[i]];
            *b = *b == -3 || *b == n->block ? n->block : -2;
        }
    }
    for (int t = 0; t < g->ntensors; t++) {
        int p = g->tensors[t].producer;
        if (p >= 0 && rb[t] != -3 && rb[t] != g->nodes[p].block)
            rb[t] = -2;
    }
    return rb;
}

static void mark_needed(const Node *n, unsigned mask,
                        char *needed)
{
    for (int i = 0; i < n->nin; i++)
        if (mask & NEED_IN(i))
            needed[n->in[i]] = 1;
    for (int o = 0; o < n->nout; o++)
        if (mask & NEED_OUT(o))
            needed[n->out[o]] = 1;
}

/* Saved by structure; the report says so, and names a MUST_RECOMPUTE the
 * structure overrides, so that it is never dropped silently. */
static void save_by_structure(Ctx *c, const Policy *p, const Node *n, int t,
                              const char *what, Remat *r)
{
    const char *rule;
    Decision asked = policy_decide(c, p, n, &rule);
    r->keep[t] = KEEP_SAVE;
    r->decision[t] = MUST_SAVE;
    r->boundary[t] = 1;
    r->why[t] = asked == MUST_RECOMPUTE
                    ? ctx_printf(c, "%s (overrides must_recompute of %s)", what,
                                 rule)
                    : what;
}

/* Under a budget a tensor the structure saves is a free decision that
 * asks to be saved, so that the budget may recompute it from an earlier
 * kept tensor through the blocks between (nested checkpointing); a
 * must_save of the policy still holds. */
static void open_structure(Ctx *c, const Policy *p, const Node *n, int t,
                           const char *what, Remat *r)
{
    const char *rule;
    if (policy_decide(c, p, n, &rule) == MUST_SAVE) {
        save_by_structure(c, p, n, t, what, r);
        return;
    }
    r->keep[t] = KEEP_SAVE;
    r->decision[t] = PREFER_SAVE;
    r->why[t] = what;
    r->free[t] = 1;
    r->opened[t] = 1;
}

/* The class of a needed tensor: fixed by structure or a MUST_* decision,
 * or free (PREFER_*), which a budget may turn either way; with open, a
 * block boundary and a tensor outside every block are free too. */
static void classify_tensor(Ctx *c, const Graph *g, const Policy *p,
                            const Node *n, int t, const int *rb, int open,
                            Remat *r)
{
    const char *what = NULL;
    if (g->nblocks > 0 && rb[t] == -2)
        what = "block boundary: a block input or output";
    else if (g->nblocks > 0 && n->block < 0)
        what = "outside every block: saved as under none";
    if (what) {
        (open ? open_structure : save_by_structure)(c, p, n, t, what, r);
        return;
    }
    Decision d = policy_decide(c, p, n, &r->why[t]);
    r->decision[t] = d;
    r->keep[t] = d == MUST_SAVE || d == PREFER_SAVE ? KEEP_SAVE
                                                    : KEEP_RECOMPUTE;
    r->free[t] = d == PREFER_SAVE || d == PREFER_RECOMPUTE;
}

/* storage[t]: the first tensor up t's chain of views that is not one (t
 * itself for most); fixed by the graph, so found once. */
static int *storages(Ctx *c, const Graph *g)
{
    int *storage = ctx_alloc(c, (size_t)g->ntensors * sizeof(int));
    for (int t = 0; t < g->ntensors; t++)
        storage[t] = t;
    for (int k = 0; k < g->nnodes; k++) {    /* sources before their views */
        const Node *n = &g->nodes[g->order[k]];
        if (op_table[n->op].alias)
            storage[n->out[0]] = storage[n->in[0]];
    }
    return storage;
}

/* The bytes of the buffers SAVE tensors keep, each once (see the top);
 * held is ntensors bytes of scratch. */
static size_t saved_bytes(const Graph *g, const Remat *r, char *held)
{
    size_t bytes = 0;
    memset(held, 0, (size_t)g->ntensors);
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *s = &g->tensors[r->storage[t]];
        if (r->keep[t] == KEEP_SAVE && s->kind == T_ACT && !held[r->storage[t]]) {
            held[r->storage[t]] = 1;
            bytes += (size_t)s->numel * (s->is_int ? 8 : 4);
        }
    }
    return bytes;
}

/* The compact forms the backward reads (Node.compact): compact[t], a
 * compact form of t is kept, and compact_size[t] their bytes; a tensor
 * some other node keeps one of is not compact_free. */
static void compact_forms(const Graph *g, Remat *r)
{
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        if (!n->compact)
            continue;
        int t = compact_operand(n);
        r->compact[t] = 1;
        r->compact_size[t] += (double)n->row->compact_bytes(g, n);
        if (g->tensors[t].producer != k)
            r->compact_free[t] = -1;
    }
}

/* With compact_choice, which compact tensors are a choice (after the
 * classes: a free one); compact_fixed, the bytes every plan keeps. */
static void compact_choices(const Graph *g, Remat *r)
{
    r->compact_fixed = 0;
    for (int t = 0; t < g->ntensors; t++) {
        r->compact_free[t] = r->compact_choice && r->compact[t] &&
                             r->compact_free[t] == 0 && r->free[t];
        if (r->compact[t] && !r->compact_free[t])
            r->compact_fixed += (size_t)r->compact_size[t];
    }
}

/* The compact bytes this plan keeps, and which tensors' forms it rebuilds. */
static size_t kept_compact(const Graph *g, Remat *r)
{
    size_t bytes = r->compact_fixed;
    for (int t = 0; t < g->ntensors; t++) {
        r->compact_rebuilt[t] = r->compact_free[t] &&
                                r->keep[t] == KEEP_RECOMPUTE;
        if (r->compact_free[t] && !r->compact_rebuilt[t])
            bytes += (size_t)r->compact_size[t];
    }
    return bytes;
}

static int classify(Ctx *c, const Graph *g, const Policy *p, int open,
                    int compact_choice, Remat *r)
{
    size_t nt = (size_t)g->ntensors;
    r->keep = ctx_alloc(c, nt * sizeof *r->keep);
    r->why = ctx_alloc(c, nt * sizeof *r->why);
    r->decision = ctx_alloc(c, nt * sizeof *r->decision);
    r->free = ctx_alloc(c, nt);
    r->boundary = ctx_alloc(c, nt);
    r->opened = ctx_alloc(c, nt);
    r->wanted = ctx_alloc(c, nt * sizeof *r->wanted);
    r->needed = ctx_alloc(c, nt);
    r->rule = ctx_alloc(c, nt * sizeof *r->rule);
    r->asked = ctx_alloc(c, nt * sizeof *r->asked);
    r->scratch = ctx_alloc(c, nt);
    r->storage = storages(c, g);
    r->compact = ctx_alloc(c, nt);
    r->compact_free = ctx_alloc(c, nt);
    r->compact_rebuilt = ctx_alloc(c, nt);
    r->compact_size = ctx_alloc(c, nt * sizeof *r->compact_size);
    r->compact_choice = compact_choice;
    compact_forms(g, r);
    r->rates = rates_builtin();
    r->rebuild = 0;         /* each recompute runs once, until fit_arena */
    r->hold = NULL;
    int *rb = reader_blocks(c, g);
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        mark_needed(n, node_backward_reads(g, n), r->needed);
        for (int o = 0; o < n->nout; o++)
            classify_tensor(c, g, p, n, n->out[o], rb, open, r);
    }
    compact_choices(g, r);
    memcpy(r->wanted, r->keep, nt * sizeof *r->keep);
    memcpy(r->rule, r->why, nt * sizeof *r->why);
    memcpy(r->asked, r->decision, nt * sizeof *r->decision);
    /* a budget can only turn a free tensor the other way: its rule then,
     * written once here rather than on every plan remat_apply walks (a
     * 96-layer GPT's `remat pareto` walks 1,441) */
    r->turned = ctx_alloc(c, nt * sizeof *r->turned);
    for (size_t t = 0; t < nt; t++)
        if (r->free[t])
            r->turned[t] = ctx_printf(c, "budget: turned to %s (asked: %s)",
                                      r->wanted[t] == KEEP_SAVE ? "recompute"
                                                                : "save",
                                      r->rule[t]);
    return 0;
}

int remat_classify(Ctx *c, const Graph *g, const Policy *p, Remat *r)
{
    return classify(c, g, p, 0, 0, r);
}

int remat_classify_open(Ctx *c, const Graph *g, const Policy *p, Remat *r)
{
    return classify(c, g, p, 1, 0, r);
}

int remat_classify_budget(Ctx *c, const Graph *g, const Policy *p, Remat *r)
{
    return classify(c, g, p, 1, 1, r);
}

/* The walk: in reverse topological order, a tensor is needed when a
 * backward reads it (r->needed) or a needed recompute does; a needed
 * tensor is kept as its class says, a free one as recompute[t] says (NULL:
 * as the policy asked); one the backward reads only compactly is
 * KEEP_COMPACT, or rebuilt where it is compact_free and recompute[t]. */
void remat_apply(const Graph *g, Remat *r, const char *recompute)
{
    size_t nt = (size_t)g->ntensors;
    char *needed = r->scratch;
    memcpy(needed, r->needed, nt);
    for (int k = g->nnodes - 1; k >= 0; k--) {
        const Node *n = &g->nodes[g->order[k]];
        int again = 0;
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            Keep want = r->wanted[t];
            if (r->free[t] && recompute)
                want = recompute[t] ? KEEP_RECOMPUTE : KEEP_SAVE;
            int rebuilt = !needed[t] && r->compact_free[t] && recompute &&
                          recompute[t];
            r->keep[t] = needed[t] ? want
                         : rebuilt ? KEEP_RECOMPUTE
                         : r->compact[t] ? KEEP_COMPACT : KEEP_NONE;
            r->decision[t] = needed[t] || rebuilt ? r->asked[t] : REMAT_UNSET;
            r->why[t] = !graph_trains(g) ? "forward only: no backward"
                        : rebuilt ? "budget: its compact form rebuilt with it "
                                    "in the backward, not kept"
                        : !needed[t] && r->compact[t]
                            ? "the backward reads only its compact form"
                        : !needed[t] ? "not read by the backward"
                        : want == r->wanted[t] ? r->rule[t] : r->turned[t];
            again |= r->keep[t] == KEEP_RECOMPUTE;
        }
        if (again)
            mark_needed(n, (1u << n->nin) - 1, needed);
    }
    /* the walk is done with needed */
    r->compact_bytes = kept_compact(g, r);
    r->saved_bytes = saved_bytes(g, r, needed) + r->compact_bytes;
}

int remat_decide(Ctx *c, const Graph *g, const Policy *p, Remat *r)
{
    if (remat_classify(c, g, p, r))
        return -1;
    remat_apply(g, r, NULL);
    return 0;
}
