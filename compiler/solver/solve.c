/*
 * solve.c: the least recompute time within a memory budget, exactly.
 *
 * A plan turns every free tensor (a PREFER_* decision inside a block; see
 * remat.c) to SAVE or RECOMPUTE. Its cost is the estimated time of its
 * recomputes: the sum, over the tensors it recomputes (each is rebuilt
 * once per backward), of the producer's FLOPs at its rate plus the bytes
 * it reads and writes at the memory rate (cost.c: whole picoseconds, so
 * that sums are exact and ties stay ties, at r->rates, which `remat
 * calibrate` measures). So a Transpose or a Concat, which do no arithmetic,
 * are not free to rebuild. Its memory is the saved bytes, the sum over the
 * tensors it saves. Both count only needed tensors, and what is needed
 * depends on the plan: recomputing t makes its producer's inputs needed.
 * A compact_free tensor (remat.c) is a decision even where no float of it
 * is needed: keep its compact forms (their bytes) or rebuild it (its
 * recompute writes them); saved, it keeps floats and forms.
 *
 * The solver is a dynamic program over the nodes in reverse topological
 * order, the order remat_apply walks them. When a node is reached every
 * reader of its output has been seen, so whether the output is needed is
 * known: it is read by a backward (fixed for the graph), or it is in the
 * state, the set of tensors that recomputes decided so far have made
 * needed (or whose buffer a saved view holds) and that are not yet reached. Plans that reach a node with the
 * same state have the same futures, so the program keeps, per state, only
 * the Pareto frontier of (saved bytes, recompute time) of the part decided
 * so far: a plan that another beats on both can never become optimal.
 * At the last node the states are empty, and the union of their frontiers
 * is the frontier of the whole graph: every optimal plan of every budget.
 *
 * The program runs once per component (components()): the decisions split
 * into groups that no recompute connects, whose costs add up, so the
 * frontier of the graph is the sum of theirs (every pair of points, the
 * Pareto-optimal kept; sum_frontiers). A component's walk visits only its
 * own nodes and its state holds only its own marks. This is what keeps a
 * long skip cheap: a U-Net's skip source, needed only when the decoder's
 * skip Add is rebuilt, is one component with that Add, not a mark carried
 * across the whole middle of the graph (2^depth states); and a GPT's
 * layers, their recomputes stopping at block inputs, are summed, not
 * merged into every state's frontier. Where one tensor ties a component
 * together (a hub: a diffusion U-Net's timestep embedding, read at every
 * level), the frontier is the union of two cases, the hub needed and not,
 * in each of which it ties nothing (solve_cases).
 *
 * Within a component the state stays small when recomputes reach back only
 * a few nodes, as in a block-structured graph. It grows with independent
 * choices that meet in one component (many recomputes, each making its own
 * input needed, all of it read by one rebuilt node), and the frontier with
 * independent choices of different sizes. Past MAX_POINTS per state (or
 * per sum) the frontier is thinned; past MAX_STATES per node it is
 * abandoned. For one budget the answer is then found by branch and bound
 * over the whole walk (search), which is exact when it runs to the end;
 * the report says whether the plan is proven optimal.
 *
 * Among plans of equal bytes and cost the one merged first is kept (the
 * branch the policy asked for is merged first; in a sum, the pair whose
 * part nearer the loss saves the more; in a union, the hub-needed case's):
 * deterministic, but not a promise that an unbinding budget gives the
 * policy's plan; a budget of 1 may well save more than the policy. The
 * sum's rule is the single walk's habit (recompute in the early layers,
 * save in the late ones), which the arena tends to prefer: against the
 * single walk, 11 of 216 pairs of a shipped or test graph and a budget
 * from 0 to 1 get another plan of the same bytes and cost, 3 of them a
 * smaller arena, none a larger one; the other rule made 3 arenas larger
 * (counted when the cost was FLOPs alone).
 */
#include "solver.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_POINTS 4096     /* per state */
#define MAX_STATES MAX_FRONTIER_STATES   /* a power of two: layers double */
#define HUB_STATES 1024     /* where a component with a hub is split first */
#define MAX_VISITS 100000000L   /* branch and bound's give-up point */

/* The free tensors a plan recomputes, as a list shared between plans. */
typedef struct Trail {
    int tensor;             /* -1: a join, the plans of prev and join */
    const struct Trail *prev, *join;
} Trail;

typedef struct {
    double bytes, cost;
    const Trail *trail;
} Point;

typedef struct {
    int *marks;             /* sorted tensor indices */
    int nmarks;
    Point *pts;             /* bytes ascending, cost descending */
    int npts;
} State;

typedef struct {
    State *v;
    int n, cap;
    int *index;             /* open addressing over v, -1 empty */
    int nindex;
} Layer;

typedef struct {
    Ctx *c;
    const Graph *g;
    const Remat *r;
    double cap_bytes;       /* points above are dropped (a budget) */
    int thinned;
    const int *comp;        /* per tensor, its component (components()) */
    int which;              /* the component the program walks */
    /* per tensor, a hub's case (solve_cases): needed whatever the plan;
     * an output that may not be rebuilt where needed (it would need a hub
     * that is not) */
    const char *as_needed, *no_rebuild;
    int eager;              /* split at hubs before any overflow (tests) */
    int max_states;         /* per node: MAX_STATES, or HUB_STATES */
    const LiveAt *at;       /* NULL, or the bytes to count are those live
                             * across a backward statement (solve_live_at) */
} Solver;

static unsigned hash_marks(const int *m, int n)
{
    unsigned h = 2166136261u;
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned)m[i]) * 16777619u;
    return h;
}

static void layer_init(Solver *s, Layer *l, int cap)
{
    l->cap = cap;
    l->n = 0;
    l->v = ctx_alloc(s->c, (size_t)cap * sizeof *l->v);
    l->nindex = 2 * cap;
    l->index = ctx_alloc(s->c, (size_t)l->nindex * sizeof *l->index);
    memset(l->index, -1, (size_t)l->nindex * sizeof *l->index);
}

static void layer_index(Layer *l, int i)
{
    unsigned h = hash_marks(l->v[i].marks, l->v[i].nmarks) % (unsigned)l->nindex;
    while (l->index[h] >= 0)
        h = (h + 1) % (unsigned)l->nindex;
    l->index[h] = i;
}

/* Twice the room, the index rebuilt; 0 when already at s->max_states. */
static int layer_grow(Solver *s, Layer *l)
{
    if (l->cap >= s->max_states)
        return 0;
    State *v = l->v;
    int n = l->n;
    layer_init(s, l, 2 * l->cap);
    memcpy(l->v, v, (size_t)n * sizeof *v);
    l->n = n;
    for (int i = 0; i < n; i++)
        layer_index(l, i);
    return 1;
}

/* The state with these marks, created empty if new; NULL when full. */
static State *layer_get(Solver *s, Layer *l, const int *marks, int n)
{
    unsigned h = hash_marks(marks, n) % (unsigned)l->nindex;
    for (;; h = (h + 1) % (unsigned)l->nindex) {
        int i = l->index[h];
        if (i < 0)
            break;
        if (l->v[i].nmarks == n &&
            memcmp(l->v[i].marks, marks, (size_t)n * sizeof *marks) == 0)
            return &l->v[i];
    }
    if (l->n == l->cap)
        return layer_grow(s, l) ? layer_get(s, l, marks, n) : NULL;
    State *st = &l->v[l->n];
    l->index[h] = l->n++;
    st->marks = ctx_alloc(s->c, ((size_t)n + 1) * sizeof *marks);
    memcpy(st->marks, marks, (size_t)n * sizeof *marks);
    st->nmarks = n;
    st->pts = NULL;
    st->npts = 0;
    return st;
}

/* st's frontier merged with pts shifted by (db, dc) (and, with push >= 0,
 * that tensor recorded as recomputed): the Pareto-optimal points of both,
 * bytes ascending. On a tie st's own points win. */
static void merge(Solver *s, State *st, const Point *pts, int n, double db,
                  double dc, int push)
{
    Point *out = ctx_alloc(s->c, ((size_t)st->npts + (size_t)n + 1) * sizeof *out);
    int i = 0, j = 0, k = 0;
    while (i < st->npts || j < n) {
        Point p;
        if (j == n || (i < st->npts && (st->pts[i].bytes < pts[j].bytes + db ||
                                        (st->pts[i].bytes == pts[j].bytes + db &&
                                         st->pts[i].cost <= pts[j].cost + dc)))) {
            p = st->pts[i++];
        } else {
            p = pts[j++];
            p.bytes += db;
            p.cost += dc;
            if (push >= 0) {
                Trail *t = ctx_alloc(s->c, sizeof *t);
                t->tensor = push;
                t->prev = p.trail;
                t->join = NULL;
                p.trail = t;
            }
        }
        if (p.bytes > s->cap_bytes)
            continue;
        if (k > 0 && out[k - 1].cost <= p.cost)
            continue;               /* dominated by a point of fewer bytes */
        out[k++] = p;
    }
    if (k > MAX_POINTS) {           /* keep the ends and an even spread */
        for (int a = 0; a < MAX_POINTS; a++)
            out[a] = out[(long)a * (k - 1) / (MAX_POINTS - 1)];
        k = MAX_POINTS;
        s->thinned = 1;
    }
    st->pts = out;
    st->npts = k;
}

/* Marks are 16 t + bits: NEEDED, tensor t is read by a recompute decided so
 * far; HELD, its buffer is kept by a saved view of it (a Reshape's output),
 * which costs its bytes whatever t's own decision. Under solve_live_at
 * only: LATE, a recompute that reads t runs after statement at->j (so t,
 * if saved, is live there); EARLY, one runs before it (so t, if rebuilt,
 * is rebuilt before it too). */
enum { HELD = 1, NEEDED = 2, LATE = 4, EARLY = 8 };
#define MARK_OF(m) ((m) >> 4)

static int add_mark(int *m, int k, int u, int bits)
{
    int at = 0;
    while (at < k && MARK_OF(m[at]) < u)
        at++;
    if (at < k && MARK_OF(m[at]) == u) {
        m[at] |= bits;
        return k;
    }
    memmove(m + at + 1, m + at, (size_t)(k - at) * sizeof *m);
    m[at] = 16 * u + bits;
    return k + 1;
}

/* Whether t can be rebuilt in some plan. */
static int rebuildable(const Solver *s, int t)
{
    return (s->r->free[t] || s->r->wanted[t] == KEEP_RECOMPUTE) &&
           !s->no_rebuild[t];
}

/* What a decision about node n's output t leaves marked: the marks but t,
 * plus, for a recompute, the inputs no backward reads (the rest are needed
 * anyway), and for a view kept (or held), its source held. Under
 * solve_live_at, a recompute marks its inputs LATE or EARLY as it runs
 * after at->j or not (early: t rebuilt before j), and a backward's input
 * that could be rebuilt EARLY too; a view kept passes its LATE to the
 * source it holds (marks: t's). */
static int next_marks(const Solver *s, const State *st, int t, const Node *n,
                      int recompute, int hold_source, int early, int marks,
                      int *out)
{
    int k = 0;
    for (int i = 0; i < st->nmarks; i++)
        if (MARK_OF(st->marks[i]) != t)
            out[k++] = st->marks[i];
    int when = !s->at ? 0 : early ? EARLY : LATE;
    for (int i = 0; recompute && i < n->nin; i++) {
        int u = n->in[i];
        if (s->g->tensors[u].kind != T_ACT)
            continue;
        if (!s->r->needed[u] && !s->as_needed[u])
            k = add_mark(out, k, u, NEEDED | when);
        else if (when == EARLY && s->at->own[u] > s->at->j && rebuildable(s, u))
            k = add_mark(out, k, u, EARLY);
    }
    if (hold_source && s->g->tensors[n->in[0]].kind == T_ACT)
        k = add_mark(out, k, n->in[0], HELD | (marks & LATE));
    return k;
}

/* One branch into next: (db, dc) added, push >= 0 recorded as recomputed. */
static int add_branch(Solver *s, Layer *next, const State *st, int t,
                      const Node *n, int recompute, int hold_source, int early,
                      int marks, double db, double dc, int push, int *buf)
{
    int k = next_marks(s, st, t, n, recompute, hold_source, early, marks, buf);
    State *to = layer_get(s, next, buf, k);
    if (!to)
        return -1;
    merge(s, to, st->pts, st->npts, db, dc, push);
    return 0;
}

/* The bytes a plan keeping t counts: its own; or under solve_live_at,
 * its own when it is live across statement at->j and no backward's read
 * of it there already counts it (solve_arena.c's span): a backward reads
 * it (or a view of it) after j, or none does and a recompute after j
 * reads it, or a saved view of it (marks LATE). */
static double kept_bytes(const Solver *s, int t, int marks)
{
    double bytes = tensor_bytes(&s->g->tensors[t]);
    if (!s->at)
        return bytes;
    int lo = s->at->lo[t];
    return lo > s->at->j || (lo < 0 && (marks & LATE)) ? s->at->bytes[t] : 0;
}

/* Under solve_live_at, the bytes a plan rebuilding t counts: its rebuilt
 * buffer when it is rebuilt before statement at->j (early) for a backward
 * that reads it after j, and nothing reads its buffer at j already. */
static double rebuilt_bytes(const Solver *s, int t, int early)
{
    const LiveAt *at = s->at;
    return at && early && at->lo[t] > at->j && at->own[t] < INT_MAX
               ? at->bytes[t] : 0;
}

/* What rebuilding node n's output t costs (cost.c's output_cost). */
static double rebuild_cost(const Graph *g, const Remat *r, const Node *n,
                           int t)
{
    int o = 0;
    while (n->out[o] != t)
        o++;
    return output_cost(r->rates, g, n, o);
}

/* Node n's output t, needed, kept (recompute = 0) or rebuilt: its cost. A
 * view holds no buffer: keeping it holds its source's, rebuilding it is a
 * pointer (cost 0). A held tensor costs its bytes either way (under
 * solve_live_at, as rebuilt_bytes says when rebuilt). marks: t's mark
 * bits. */
static int branch(Solver *s, Layer *next, const State *st, int t,
                  const Node *n, int recompute, int held, int marks, int push,
                  int *buf)
{
    double bytes = kept_bytes(s, t, marks);
    double cost = recompute ? rebuild_cost(s->g, s->r, n, t) : 0;
    if (s->r->compact_free[t] && !recompute)
        bytes += s->r->compact_size[t];
    int early = s->at && (s->at->own[t] <= s->at->j || (marks & EARLY));
    if (op_table[n->op].alias)
        return add_branch(s, next, st, t, n, recompute, !recompute || held,
                          early, marks, 0, cost, push, buf);
    if (recompute)
        bytes = s->at ? rebuilt_bytes(s, t, early) : held ? bytes : 0;
    return add_branch(s, next, st, t, n, recompute, 0, early, marks, bytes,
                      cost, push, buf);
}

/* One output t of node n: every state of cur carried into next. */
static int step_output(Solver *s, const Layer *cur, Layer *next,
                       const Node *n, int t, int *buf)
{
    const Remat *r = s->r;
    for (int i = 0; i < cur->n; i++) {
        const State *st = &cur->v[i];
        int needed = r->needed[t] || s->as_needed[t], held = 0, marks = 0;
        for (int m = 0; m < st->nmarks; m++)
            if (MARK_OF(st->marks[m]) == t) {
                marks = st->marks[m];
                needed |= (marks & NEEDED) != 0;
                held = marks & HELD;
            }
        int rc, rec_first = r->wanted[t] == KEEP_RECOMPUTE;
        if (!needed && !held && r->compact_free[t])    /* forms or rebuild */
            rc = add_branch(s, next, st, t, n, 0, 0, 0, 0, r->compact_size[t],
                            0, -1, buf) ||
                 (!s->no_rebuild[t] &&
                  branch(s, next, st, t, n, 1, 0, marks, t, buf));
        else if (!needed && !held)
            rc = add_branch(s, next, st, t, n, 0, 0, 0, 0, 0, 0, -1, buf);
        else if (!needed)       /* only a saved view's storage */
            rc = branch(s, next, st, t, n, 0, held, marks, -1, buf);
        else if (s->no_rebuild[t] && !r->free[t] && rec_first)
            rc = 0;             /* no plan of this case */
        else if (s->no_rebuild[t])
            rc = branch(s, next, st, t, n, 0, held, marks, -1, buf);
        else if (!r->free[t])
            rc = branch(s, next, st, t, n, rec_first, held, marks, -1, buf);
        else if (rec_first)
            rc = branch(s, next, st, t, n, 1, held, marks, t, buf) ||
                 branch(s, next, st, t, n, 0, held, marks, -1, buf);
        else
            rc = branch(s, next, st, t, n, 0, held, marks, -1, buf) ||
                 branch(s, next, st, t, n, 1, held, marks, t, buf);
        if (rc)
            return -1;
    }
    return 0;
}

/* One node: each output of the component in hand a decision of its own,
 * one after another (a node of several outputs, Split, is recomputed
 * whole; each output rebuilt is charged its share, output_cost). */
static int step(Solver *s, const Layer *cur, Layer *next, const Node *n,
                int *buf)
{
    int outs[MAX_IO], nout = 0;
    for (int o = 0; o < n->nout; o++)
        if (s->comp[n->out[o]] == s->which)
            outs[nout++] = n->out[o];
    Layer mid[2];
    const Layer *from = cur;
    for (int o = 0; o < nout; o++) {
        Layer *to = o == nout - 1 ? next : &mid[o % 2];
        if (to != next)
            layer_init(s, to, 8);
        if (step_output(s, from, to, n, outs[o], buf))
            return -1;
        from = to;
    }
    return 0;
}

/* ---- components: decisions that cannot meet -------------------------------- */

/* Whether a tensor is needed, and what keeping it costs, depends on the
 * decisions about the outputs of its readers that may be rebuilt (each
 * rebuild reads it), and for a view's source, on the view's. A tensor a
 * backward reads is needed whatever they decide, so no reader's decision
 * reaches it. Joining each tensor with the decisions that reach it splits
 * the node outputs into components whose costs add up independently: the
 * frontier of the graph is the sum of the components' frontiers (every
 * pair of points, the Pareto-optimal ones kept). A long skip whose source
 * only a rebuild would need (a U-Net's) joins its two ends and nothing in
 * between, so the program never carries it across the middle as a mark;
 * a block's recomputes stay in the block. */
static int find(int *up, int t)
{
    while (up[t] != t)
        t = up[t] = up[up[t]];
    return t;
}

static void join(int *up, int a, int b)
{
    a = find(up, a);
    b = find(up, b);
    if (a != b)
        up[a < b ? b : a] = a < b ? a : b;
}

/* comp[t] for every tensor: its component, numbered from 0 in the order
 * of the walk; returns how many. */
static int components(Ctx *c, const Solver *s, int *comp)
{
    const Graph *g = s->g;
    const Remat *r = s->r;
    int *up = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof *up);
    for (int t = 0; t < g->ntensors; t++) {
        up[t] = t;
        comp[t] = -1;
    }
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            int rebuilt = rebuildable(s, t);
            for (int i = 0; rebuilt && i < n->nin; i++) {
                int u = n->in[i];
                if (g->tensors[u].kind == T_ACT &&
                    ((!r->needed[u] && !s->as_needed[u]) ||
                     (s->at && rebuildable(s, u))))    /* its EARLY mark */
                    join(up, u, t);
            }
            if (op_table[n->op].alias && g->tensors[n->in[0]].kind == T_ACT)
                join(up, n->in[0], t);
        }
    }
    int ncomp = 0;
    for (int k = g->nnodes - 1; k >= 0; k--) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++) {
            int root = find(up, n->out[o]);
            if (comp[root] < 0)
                comp[root] = ncomp++;
            comp[n->out[o]] = comp[root];
        }
    }
    return ncomp;
}

/* ---- the frontier: each component's, then their sum -------------------------- */

/* The frontier of component s->which: the program over its nodes (order
 * positions, the walk's order), its scratch in a context of its own; the
 * points and their trails copied into c. NULL with *overflow where the
 * states outgrew their cap. */
static Point *solve_component(Ctx *c, Solver *s, const int *ks, int nk,
                              int *npts, const Node **overflow)
{
    Ctx scratch;
    ctx_init(&scratch);
    s->c = &scratch;
    Layer cur, next;
    int *buf = ctx_alloc(&scratch, ((size_t)s->g->ntensors + 1) * sizeof *buf);
    layer_init(s, &cur, 1);
    State *start = layer_get(s, &cur, buf, 0);
    Point zero = {0, 0, NULL};
    merge(s, start, &zero, 1, 0, 0, -1);
    Point *out = NULL;
    *npts = 0;
    *overflow = NULL;
    for (int i = 0; i < nk; i++) {
        const Node *n = &s->g->nodes[s->g->order[ks[i]]];
        layer_init(s, &next, 8);
        if (step(s, &cur, &next, n, buf)) {
            *overflow = n;
            goto done;
        }
        cur = next;
    }
    assert(cur.n <= 1 && "every mark is reached by its producer");
    *npts = cur.n ? cur.v[0].npts : 0;
    out = ctx_alloc(c, ((size_t)*npts + 1) * sizeof *out);
    for (int i = 0; i < *npts; i++) {
        out[i] = cur.v[0].pts[i];
        out[i].trail = NULL;
        for (const Trail *t = cur.v[0].pts[i].trail; t; t = t->prev) {
            Trail *copy = ctx_alloc(c, sizeof *copy);
            *copy = (Trail){t->tensor, out[i].trail, NULL};
            out[i].trail = copy;
        }
    }
done:
    ctx_free(&scratch);
    s->c = c;
    return out;
}

typedef struct {
    Point p;
    int ia, ib;
} Pair;

static int pair_order(const void *x, const void *y)
{
    const Pair *a = x, *b = y;
    if (a->p.bytes != b->p.bytes)
        return a->p.bytes < b->p.bytes ? -1 : 1;
    if (a->p.cost != b->p.cost)
        return a->p.cost < b->p.cost ? -1 : 1;
    if (a->ia != b->ia)
        return a->ia < b->ia ? -1 : 1;
    return (a->ib > b->ib) - (a->ib < b->ib);
}

/* sum_frontiers' heap: a's point i paired with b's point j[i]. */
typedef struct {
    const Point *a, *b;
    const int *j;
} Pairing;

static int pair_before(const void *ctx, int x, int y)
{
    const Pairing *p = ctx;
    double bx = p->a[x].bytes + p->b[p->j[x]].bytes;
    double by = p->a[y].bytes + p->b[p->j[y]].bytes;
    if (bx != by)
        return bx < by;
    double fx = p->a[x].cost + p->b[p->j[x]].cost;
    double fy = p->a[y].cost + p->b[p->j[y]].cost;
    if (fx != fy)
        return fx < fy;
    return x > y;
}

/* The first j in [from, nb) whose pair with a point of `cost` costs less
 * than `best`, or nb: b's costs fall as j rises. */
static int first_below(const Point *b, int from, int nb, double cost,
                       double best)
{
    int lo = from, hi = nb;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cost + b[mid].cost < best)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The frontier of two independent parts: every pair of their points,
 * those within the cap and beaten by none kept, bytes ascending. On a tie
 * the pair of a's later point (a saving more) wins: a is the part nearer
 * the loss, the walk's order (see the top). The pairs come out of a heap of one
 * per point of a, in order, so the memory is the two parts' and the
 * result's, not the product's. A pair that comes out with no fewer FLOPs
 * than the last kept is beaten by it, and so is every later pair of the
 * same point of a that has no fewer: those are skipped, by bisection, not
 * taken out of the heap one by one (the heap was a fifth of a 96-layer
 * GPT's `remat pareto`); the pairs kept are the same. */
static Point *sum_frontiers(Solver *s, const Point *a, int na, const Point *b,
                            int nb, int *n)
{
    int *j = calloc((size_t)na + 1, sizeof *j);
    int *v = malloc(((size_t)na + 1) * sizeof *v);
    size_t room = (size_t)na + (size_t)nb + 1, k = 0;
    Point *out = malloc(room * sizeof *out);
    assert(j && v && out && "frontiers fit in memory");
    Pairing pr = {a, b, j};
    Heap h = {v, 0, pair_before, &pr};
    for (int i = 0; i < na; i++)
        if (nb > 0 && a[i].bytes + b[0].bytes <= s->cap_bytes)
            heap_push(&h, i);
    while (h.n > 0) {
        int i = heap_pop(&h);
        const Point *pa = &a[i], *pb = &b[j[i]];
        double cost = pa->cost + pb->cost;
        if (k == 0 || out[k - 1].cost > cost) {
            if (k == room) {
                room *= 2;
                out = realloc(out, room * sizeof *out);
                assert(out && "frontiers fit in memory");
            }
            Point p = {pa->bytes + pb->bytes, cost, NULL};
            if (pa->trail && pb->trail) {
                Trail *t = ctx_alloc(s->c, sizeof *t);
                *t = (Trail){-1, pa->trail, pb->trail};
                p.trail = t;
            } else {
                p.trail = pa->trail ? pa->trail : pb->trail;
            }
            out[k++] = p;
        }
        j[i] = first_below(b, j[i] + 1, nb, a[i].cost, out[k - 1].cost);
        if (j[i] < nb && a[i].bytes + b[j[i]].bytes <= s->cap_bytes)
            heap_push(&h, i);
    }
    free(j);
    free(v);
    if (k > MAX_POINTS) {           /* as merge() thins */
        for (int i = 0; i < MAX_POINTS; i++)
            out[i] = out[(long)i * ((long)k - 1) / (MAX_POINTS - 1)];
        k = MAX_POINTS;
        s->thinned = 1;
    }
    Point *kept = ctx_alloc(s->c, (k + 1) * sizeof *kept);
    memcpy(kept, out, k * sizeof *kept);
    free(out);
    *n = (int)k;
    return kept;
}

static void mark_trail(const Trail *t, char *recompute)
{
    for (; t; t = t->prev) {
        if (t->tensor >= 0)
            recompute[t->tensor] = 1;
        else
            mark_trail(t->join, recompute);
    }
}

/* Each of the ncomp components' nodes (s->comp), as walk positions in the
 * walk's order, the last first (CSR: ks[start[x] .. start[x + 1])). */
static void component_nodes(const Solver *s, int ncomp, int **start_out,
                            int **ks_out)
{
    Ctx *c = s->c;
    const Graph *g = s->g;
    const int *comp = s->comp;
    int *start = ctx_alloc(c, ((size_t)ncomp + 2) * sizeof *start);
    int *seen = ctx_alloc(c, ((size_t)ncomp + 1) * sizeof *seen);
    for (int i = 0; i < ncomp; i++)
        seen[i] = -1;
    int total = 0;
    for (int k = g->nnodes - 1; k >= 0; k--) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++) {
            int x = comp[n->out[o]];
            if (seen[x] != k) {
                seen[x] = k;
                start[x + 1]++;
                total++;
            }
        }
    }
    for (int i = 0; i < ncomp; i++)
        start[i + 1] += start[i];
    int *ks = ctx_alloc(c, ((size_t)total + 1) * sizeof *ks);
    int *fill = ctx_alloc(c, ((size_t)ncomp + 1) * sizeof *fill);
    memcpy(fill, start, (size_t)ncomp * sizeof *fill);
    for (int i = 0; i < ncomp; i++)
        seen[i] = -1;
    for (int k = g->nnodes - 1; k >= 0; k--) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++) {
            int x = comp[n->out[o]];
            if (seen[x] != k) {
                seen[x] = k;
                ks[fill[x]++] = k;
            }
        }
    }
    *start_out = start;
    *ks_out = ks;
}

/* The frontier under s's case: each component's, summed (comp: each
 * tensor's component, filled here). 0, with no points when the case has no
 * plan; or -1 with *over, the node where a component's states outgrew
 * s->max_states. */
static int sum_components(Solver *s, int whole, int *comp, Point **out,
                          int *nout, const Node **over)
{
    Ctx *c = s->c;
    int ncomp = whole ? 1 : components(c, s, comp);
    s->comp = comp;
    int *start, *ks;
    component_nodes(s, ncomp, &start, &ks);
    /* the components' frontiers; those of one point of no cost drop out */
    Point **fr = ctx_alloc(c, ((size_t)ncomp + 1) * sizeof *fr);
    int *nfr = ctx_alloc(c, ((size_t)ncomp + 1) * sizeof *nfr);
    int nparts = 0;
    *out = NULL;
    *nout = 0;
    for (int x = 0; x < ncomp; x++) {
        int np;
        s->which = x;
        Point *p = solve_component(c, s, ks + start[x], start[x + 1] - start[x],
                                   &np, over);
        if (*over)
            return -1;
        if (np == 0)
            return 0;       /* no plan in this case */
        if (np == 1 && p[0].bytes == 0 && p[0].cost == 0 && !p[0].trail)
            continue;
        fr[nparts] = p;
        nfr[nparts++] = np;
    }
    /* their sum, pairwise, neighbours first */
    if (nparts == 0) {
        fr[0] = ctx_alloc(c, sizeof *fr[0]);
        nfr[0] = 1;
        nparts = 1;
    }
    for (; nparts > 1; nparts = (nparts + 1) / 2) {
        for (int i = 0; i + 1 < nparts; i += 2)
            fr[i / 2] = sum_frontiers(s, fr[i], nfr[i], fr[i + 1], nfr[i + 1],
                                      &nfr[i / 2]);
        if (nparts % 2) {
            fr[nparts / 2] = fr[nparts - 1];
            nfr[nparts / 2] = nfr[nparts - 1];
        }
    }
    *out = fr[0];
    *nout = nfr[0];
    return 0;
}

/* Both frontiers' points, the Pareto-optimal kept: the frontier of plans
 * that are in either case. */
static Point *union_frontiers(Solver *s, const Point *a, int na,
                              const Point *b, int nb, int *n)
{
    Pair *all = malloc(((size_t)na + (size_t)nb + 1) * sizeof *all);
    assert(all && "frontiers fit in memory");
    int m = 0;
    for (int i = 0; i < na; i++)
        all[m++] = (Pair){a[i], i, 0};
    for (int j = 0; j < nb; j++)
        all[m++] = (Pair){b[j], na + j, 0};
    qsort(all, (size_t)m, sizeof *all, pair_order);
    Point *out = ctx_alloc(s->c, ((size_t)m + 1) * sizeof *out);
    int k = 0;
    for (int i = 0; i < m; i++)
        if (k == 0 || out[k - 1].cost > all[i].p.cost)
            out[k++] = all[i].p;
    free(all);
    *n = k;
    return out;
}

/* Hubs: where a component outgrows its states, it is often because one
 * tensor that no backward reads is read by many nodes that may be
 * rebuilt (a diffusion U-Net's timestep embedding, added at every level):
 * it joins them all into one component, and with them every long skip.
 * Every plan either needs the hub or not, so the frontier is the union of
 * two cases' frontiers: the hub needed whatever the plan (exact for the
 * plans that need it, and no cheaper than the truth for the others); and
 * the hub needed by no plan (no reader's output rebuilt where needed:
 * exact for the plans that do not need it). In both the hub joins nothing,
 * and the component splits. A plan of the first case that does not need
 * the hub is counted at least a save or a rebuild too dear, so the second
 * case's copy of it beats it unless that costs nothing: the points kept
 * cost what their schedules do. Up to MAX_HUBS hubs, 2^MAX_HUBS cases. */
#define MAX_HUBS 4

/* The tensor of component x (x < 0: of any) that the most rebuildable
 * outputs read, when a recompute would make it needed and it is no view's
 * source nor a view; -1 when none is read by two. */
static int pick_hub(const Solver *s, const int *comp, int x)
{
    const Graph *g = s->g;
    const Remat *r = s->r;
    int best = -1, most = 1;
    int *readers = calloc((size_t)g->ntensors + 1, sizeof *readers);
    char *viewed = calloc((size_t)g->ntensors + 1, 1);
    assert(readers && viewed && "counts fit in memory");
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        if (op_table[n->op].alias) {
            viewed[n->in[0]] = 1;
            viewed[n->out[0]] = 1;
        }
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            if (!(r->free[t] || r->wanted[t] == KEEP_RECOMPUTE) ||
                s->no_rebuild[t])
                continue;
            for (int i = 0; i < n->nin; i++) {
                int dup = 0;    /* a node reading u twice counts once */
                for (int j = 0; j < i; j++)
                    dup |= n->in[j] == n->in[i];
                if (!dup)
                    readers[n->in[i]]++;
            }
        }
    }
    for (int u = 0; u < g->ntensors; u++)
        if (g->tensors[u].kind == T_ACT && g->tensors[u].producer >= 0 &&
            (x < 0 || comp[u] == x) && !r->needed[u] && !s->as_needed[u] && !viewed[u] &&
            readers[u] > most) {
            best = u;
            most = readers[u];
        }
    free(readers);
    free(viewed);
    return best;
}

/* The frontier of s's case, splitting at hubs where a component overflows.
 * 0, or -1 with *over. */
static int solve_cases(Solver *s, int whole, int hubs, Point **out, int *n,
                       const Node **over)
{
    Ctx *c = s->c;
    const Graph *g = s->g;
    int *comp = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof *comp);
    int hub = -1, splits = !whole && hubs < MAX_HUBS;
    *over = NULL;
    if (s->eager && splits) {
        components(c, s, comp);
        hub = pick_hub(s, comp, -1);
    }
    /* a component that passes HUB_STATES is split at a hub if it has one,
     * else walked again up to MAX_STATES */
    s->max_states = splits ? HUB_STATES : MAX_STATES;
    while (hub < 0) {
        int rc = sum_components(s, whole, comp, out, n, over);
        int cap = s->max_states;
        s->max_states = MAX_STATES;
        if (rc == 0)
            return 0;
        hub = splits ? pick_hub(s, comp, comp[(*over)->out[0]]) : -1;
        if (hub < 0 && cap == MAX_STATES)
            return -1;
    }
    size_t nt = (size_t)g->ntensors + 1;
    const char *as_needed = s->as_needed, *no_rebuild = s->no_rebuild;
    char *needed_case = ctx_alloc(c, nt), *unneeded_case = ctx_alloc(c, nt);
    memcpy(needed_case, as_needed, nt);
    needed_case[hub] = 1;
    memcpy(unneeded_case, no_rebuild, nt);
    for (int k = 0; k < g->nnodes; k++) {
        const Node *nd = &g->nodes[k];
        int reads = 0;
        for (int i = 0; i < nd->nin; i++)
            reads |= nd->in[i] == hub;
        for (int o = 0; reads && o < nd->nout; o++)
            unneeded_case[nd->out[o]] = 1;
    }
    Point *a, *b;
    int na, nb, rc;
    s->as_needed = needed_case;
    rc = solve_cases(s, 0, hubs + 1, &a, &na, over);
    s->as_needed = as_needed;
    if (rc)
        return -1;
    s->no_rebuild = unneeded_case;
    rc = solve_cases(s, 0, hubs + 1, &b, &nb, over);
    s->no_rebuild = no_rebuild;
    if (rc)
        return -1;
    *out = union_frontiers(s, a, na, b, nb, n);
    return 0;
}

/* A solver for g within cap_bytes, no hub case taken yet. */
static Solver solver_of(Ctx *c, const Graph *g, const Remat *r,
                        double cap_bytes, int eager, const LiveAt *at)
{
    Solver s = {c, g, r, cap_bytes, 0, NULL, 0, NULL, NULL, eager, MAX_STATES,
                at};
    s.as_needed = ctx_alloc(c, (size_t)g->ntensors + 1);
    s.no_rebuild = ctx_alloc(c, (size_t)g->ntensors + 1);
    return s;
}

static int frontier(Ctx *c, const Graph *g, const Remat *r, double cap_bytes,
                    int whole, int eager, const LiveAt *at, Frontier *f)
{
    Solver s = solver_of(c, g, r, cap_bytes, eager, at);
    Point *pts;
    int n;
    const Node *over;
    if (solve_cases(&s, whole, 0, &pts, &n, &over)) {
        f->n = 0;
        f->plans = NULL;
        f->proven = 0;
        f->overflow = over;
        return 0;
    }
    f->overflow = NULL;
    f->n = n;
    f->plans = ctx_alloc(c, ((size_t)f->n + 1) * sizeof *f->plans);
    for (int i = 0; i < f->n; i++) {
        const Point *p = &pts[i];
        Plan *pl = &f->plans[i];
        pl->bytes = p->bytes;
        pl->cost = p->cost;
        pl->recompute = ctx_alloc(c, (size_t)g->ntensors);
        mark_trail(p->trail, pl->recompute);
        /* free tensors not on the trail: saved when reached */
    }
    f->proven = !s.thinned;
    return 0;
}

int solve_frontier(Ctx *c, const Graph *g, const Remat *r, double cap_bytes,
                   Frontier *f)
{
    return frontier(c, g, r, cap_bytes, 0, 0, NULL, f);
}

int solve_frontier_whole(Ctx *c, const Graph *g, const Remat *r,
                         double cap_bytes, Frontier *f)
{
    return frontier(c, g, r, cap_bytes, 1, 0, NULL, f);
}

int solve_frontier_hubs(Ctx *c, const Graph *g, const Remat *r,
                        double cap_bytes, Frontier *f)
{
    return frontier(c, g, r, cap_bytes, 0, 1, NULL, f);
}

int solve_live_at(Ctx *c, const Graph *g, const Remat *r, const LiveAt *at,
                  double cap, Frontier *f)
{
    assert(!r->compact_choice && "live ranges take compact forms as kept");
    return frontier(c, g, r, cap, 0, 0, at, f);
}

/* A component's frontier as a curve (bytes ascending, cost falling). */
static Curve as_curve(Ctx *c, const Point *p, int n)
{
    Curve cv = {n, ctx_alloc(c, ((size_t)n + 1) * sizeof(double)),
                ctx_alloc(c, ((size_t)n + 1) * sizeof(double))};
    for (int i = 0; i < n; i++) {
        cv.bytes[i] = p[i].bytes;
        cv.cost[i] = p[i].cost;
    }
    return cv;
}

int solve_prefix_curves(Ctx *c, const Graph *g, const Remat *r,
                        const LiveAt *at, double cap, Curve *per_k)
{
    Solver s = solver_of(c, g, r, cap, 0, at);
    int *comp = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof *comp);
    int ncomp = components(c, &s, comp);
    s.comp = comp;
    int *start, *ks;
    component_nodes(&s, ncomp, &start, &ks);
    /* the components by their last node (the walk's first): a
     * counting sort, ks[start[x]] being x's last */
    int *at_k = ctx_alloc(c, ((size_t)g->nnodes + 2) * sizeof *at_k);
    int *byk = ctx_alloc(c, ((size_t)ncomp + 1) * sizeof *byk);
    for (int x = 0; x < ncomp; x++)
        at_k[ks[start[x]] + 1]++;
    for (int k = 0; k < g->nnodes; k++)
        at_k[k + 1] += at_k[k];
    int *fill = ctx_alloc(c, ((size_t)g->nnodes + 1) * sizeof *fill);
    for (int x = 0; x < ncomp; x++) {
        int k = ks[start[x]];
        byk[at_k[k] + fill[k]++] = x;
    }
    Point zero = {0, 0, NULL}, *sum = &zero;
    int nsum = 1;
    Curve cur = as_curve(c, sum, nsum);
    for (int k = 0; k < g->nnodes; k++) {
        for (int i = at_k[k]; i < at_k[k + 1]; i++) {
            int x = byk[i], np;
            const Node *over;
            s.which = x;
            s.thinned = 0;
            Point *p = solve_component(c, &s, ks + start[x],
                                       start[x + 1] - start[x], &np, &over);
            if (over || s.thinned || np == 0)
                continue;   /* left out: the curve stays below the truth */
            Point *more = sum_frontiers(&s, sum, nsum, p, np, &np);
            if (s.thinned)
                continue;
            sum = more;
            nsum = np;
            cur = as_curve(c, sum, nsum);
        }
        per_k[k] = cur;
    }
    return 0;
}

/* ---- branch and bound: one budget, when the program's caps are hit -------- */

/* The same walk and the same costs as the program, one plan at a time,
 * depth first, abandoning a partial plan once its bytes exceed the budget
 * or its cost reaches the best found (both only grow). Exponential in the
 * worst case, so it is the fallback where the frontier is too wide (many
 * independent choices of different sizes) or the states too many; it gives
 * up after MAX_VISITS and then returns the best it found, unproven. */
typedef struct {
    const Graph *g;
    const Remat *r;
    double want;
    char *needed, *held;    /* marks, per tensor */
    char *rec, *best;       /* the free choices: current, best */
    double best_cost, best_bytes;
    long visits, max_visits;
    const SearchHooks *hooks;   /* NULL: the bytes bound alone */
} Search;

static void search(Search *s, int k, int o, double bytes, double cost);

/* The walk from the decision after node order[k]'s output o. */
static void search_next(Search *s, int k, int o, double bytes, double cost)
{
    if (o + 1 < s->g->nodes[s->g->order[k]].nout)
        search(s, k, o + 1, bytes, cost);
    else
        search(s, k - 1, 0, bytes, cost);
}

/* One decision about node n's output o, t, then the rest of the walk. */
static void try_branch(Search *s, int k, int o, const Node *n, int t,
                       int recompute, int held, double bytes, double cost)
{
    const Graph *g = s->g;
    int undo[MAX_IO + 1], nundo = 0, src = n->in[0];
    int alias = op_table[n->op].alias;
    /* kept: its floats where needed, its compact forms where a choice */
    double size = s->r->needed[t] || s->needed[t] || held
                      ? tensor_bytes(&g->tensors[t]) : 0;
    if (s->r->compact_free[t] && !recompute)
        size += s->r->compact_size[t];
    for (int i = 0; recompute && i < n->nin; i++) {
        int u = n->in[i];
        if (g->tensors[u].kind == T_ACT && !s->r->needed[u] && !s->needed[u]) {
            s->needed[u] = 1;
            undo[nundo++] = u;
        }
    }
    int hold = alias && (!recompute || held) && g->tensors[src].kind == T_ACT &&
               !s->held[src];
    s->held[src] |= (char)hold;
    s->rec[t] = (char)recompute;
    /* the hooks' bound may rule the rest out */
    int how = (recompute ? DECIDE_REBUILD : 0) | (hold ? DECIDE_HOLD : 0) |
              (s->r->needed[t] || s->needed[t] ? DECIDE_NEEDED : 0);
    int told = s->hooks && (how & (DECIDE_NEEDED | DECIDE_HOLD) || held);
    int node = (int)(n - g->nodes);
    if (!told || s->hooks->decide(s->hooks->ctx, node, t, how, 1))
        search_next(s, k, o, bytes + (alias || (recompute && !held) ? 0 : size),
                    cost + (recompute ? output_cost(s->r->rates, g, n, o) : 0));
    if (told)
        s->hooks->decide(s->hooks->ctx, node, t, how, -1);
    if (hold)
        s->held[src] = 0;
    while (nundo)
        s->needed[undo[--nundo]] = 0;
}

/* Node order[k]'s output o and every decision before it in the walk. */
static void search(Search *s, int k, int o, double bytes, double cost)
{
    if (bytes > s->want || cost > s->best_cost ||
        (cost == s->best_cost && bytes >= s->best_bytes) ||
        ++s->visits > s->max_visits)
        return;
    if (k < 0) {
        if (s->hooks && !s->hooks->leaf(s->hooks->ctx, s->rec, cost))
            return;
        s->best_cost = cost;
        s->best_bytes = bytes;
        memcpy(s->best, s->rec, (size_t)s->g->ntensors);
        return;
    }
    int visited = o == 0 && s->hooks && s->hooks->visit;
    if (visited &&
        !s->hooks->visit(s->hooks->ctx, k, bytes, cost, s->best_cost))
        return;
    const Node *n = &s->g->nodes[s->g->order[k]];
    int t = n->out[o], held = s->held[t];
    int needed = s->r->needed[t] || s->needed[t];
    if (!needed && !held && s->r->compact_free[t]) {   /* forms or rebuild */
        try_branch(s, k, o, n, t, 0, 0, bytes, cost);
        try_branch(s, k, o, n, t, 1, 0, bytes, cost);
    } else if (!needed && !held)
        search_next(s, k, o, bytes, cost);
    else if (!needed || !s->r->free[t])
        try_branch(s, k, o, n, t, needed && s->r->wanted[t] == KEEP_RECOMPUTE,
                   held, bytes, cost);
    else {
        try_branch(s, k, o, n, t, 0, held, bytes, cost);
        try_branch(s, k, o, n, t, 1, held, bytes, cost);
    }
    if (visited)
        s->hooks->leave(s->hooks->ctx);
}

/* The least-cost plan within want bytes, by branch and bound; *proven
 * when the search ran to the end. 0, or -1 when no plan was found. */
int search_hooked(Ctx *c, const Graph *g, const Remat *r, double want,
                  const SearchHooks *h, Plan *best, int *proven)
{
    size_t nt = (size_t)g->ntensors;
    Search s = {g, r, want, ctx_alloc(c, nt), ctx_alloc(c, nt),
                ctx_alloc(c, nt), ctx_alloc(c, nt), best->cost, best->bytes,
                0, h ? h->max_visits : MAX_VISITS, h};
    search(&s, g->nnodes - 1, 0, 0, 0);
    *proven = s.visits <= s.max_visits;
    if (s.best_cost == best->cost && s.best_bytes == best->bytes)
        return -1;
    *best = (Plan){s.best_bytes, s.best_cost, s.best};
    return 0;
}

int search_budget(Ctx *c, const Graph *g, const Remat *r, double want,
                  Plan *out, int *proven)
{
    *out = (Plan){HUGE_VAL, HUGE_VAL, NULL};
    return search_hooked(c, g, r, want, NULL, out, proven);
}

/* ---- budgets ------------------------------------------------------------------ */

/* A plain decimal number, digits with at most one point: "0.4", "3",
 * "1.5"; *end after it. No sign, space, exponent or hex. */
static int decimal(const char *s, double *v, const char **end)
{
    const char *p = s;
    int digits = 0, points = 0;
    for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
        digits += *p != '.';
        points += *p == '.';
    }
    if (!digits || points > 1)
        return -1;
    *v = strtod(s, NULL);
    *end = p;
    return 0;
}

/* A byte count with an optional unit: 123456, 750KiB, 3MiB, 1GiB, 2kB. */
static int parse_bytes(const char *s, double *v)
{
    static const struct { const char *unit; double mult; } units[] = {
        {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0},
        {"GiB", 1073741824.0}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6},
        {"GB", 1e9},
    };
    const char *end;
    double x;
    if (decimal(s, &x, &end))
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcmp(end, units[i].unit) == 0) {
            if (units[i].mult == 1 && strchr(s, '.'))
                return -1;      /* a part of a byte */
            *v = floor(x * units[i].mult);
            return 0;
        }
    return -1;
}

int budget_parse(Ctx *c, const char *opt, const char *text, int fraction_ok,
                 BudgetKind *kind, double *value)
{
    const char *end;
    double f;
    int plain = decimal(text, &f, &end) == 0 && *end == '\0';
    /* a fraction has a decimal point (0.4, 1.0) or is 0 or 1 */
    if (fraction_ok && plain && (strchr(text, '.') || f == 0 || f == 1)) {
        if (f > 1)
            return ctx_error(c, opt, 0, "'%s' is not a fraction from 0 to 1 "
                             "nor a byte count; use e.g. 0.4, 3MiB, 750KiB or "
                             "123456", text);
        *kind = BUDGET_FRACTION;
        *value = f;
        return 0;
    }
    if (parse_bytes(text, value) == 0) {
        *kind = BUDGET_BYTES;
        return 0;
    }
    return ctx_error(c, opt, 0, "'%s' is not %sa byte count; use e.g. %s3MiB, "
                     "750KiB or 123456", text,
                     fraction_ok ? "a fraction from 0 to 1 nor " : "",
                     fraction_ok ? "0.4, " : "");
}

static double bytes_under(Ctx *c, const Graph *g, const char *policy)
{
    Remat r;
    int bad = remat_decide(c, g, policy_builtin(c, policy), &r);
    assert(!bad && "a built-in policy decides any graph");
    (void)bad;
    return (double)r.saved_bytes;
}

void budget_ends(Ctx *c, const Graph *g, double *lo, double *hi)
{
    double full = bytes_under(c, g, "full"), none = bytes_under(c, g, "none");
    /* full may save more: a block input that only its recomputes read */
    *lo = full < none ? full : none;
    *hi = full < none ? none : full;
}

double budget_bytes(Ctx *c, const Graph *g, const Budget *b)
{
    if (b->kind == BUDGET_BYTES)
        return b->value;
    if (b->kind == BUDGET_NONE)
        return HUGE_VAL;
    double lo, hi;
    budget_ends(c, g, &lo, &hi);
    return floor(lo + b->value * (hi - lo));
}

static int count_free(const Graph *g, const Remat *r)
{
    int n = 0;
    for (int t = 0; t < g->ntensors; t++)
        n += r->free[t] && r->keep[t] != KEEP_NONE;
    return n;
}

/* No plan keeps within the budget: say the least figure any plan reaches
 * and what that plan saves (block boundaries, must_save tensors, and
 * tensors whose recompute would need as much saved). */
static int budget_error(Ctx *c, const Graph *g, Remat *r, const Budget *b,
                        double want)
{
    const char *asked = b->kind == BUDGET_FRACTION
                            ? ctx_printf(c, "budget %g (%.0f bytes)", b->value, want)
                            : ctx_printf(c, "budget %.0f bytes", want);
    Frontier f;
    if (solve_frontier(c, g, r, HUGE_VAL, &f) || f.n == 0)
        return ctx_error(c, g->file, 0, "%s cannot be met", asked);
    remat_apply(g, r, f.plans[0].recompute);
    Buf must, other;
    buf_init(&must, c);
    buf_init(&other, c);
    int nb = 0, nm = 0, no = 0;
    double boundary = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (r->keep[t] != KEEP_SAVE)
            continue;
        if (r->boundary[t]) {
            nb++;
            boundary += tensor_bytes(x);
        } else if (!r->free[t] && nm++ < 6) {
            buf_printf(&must, "%s%s [%s] (%s)", nm > 1 ? ", " : "", x->name,
                       shape_str(c, x), r->rule[t]);
        } else if (r->free[t] && no++ < 6) {
            buf_printf(&other, "%s%s [%s]", no > 1 ? ", " : "", x->name,
                       shape_str(c, x));
        }
    }
    if (nm > 6)
        buf_printf(&must, " and %d more", nm - 6);
    if (no > 6)
        buf_printf(&other, " and %d more", no - 6);
    return ctx_error(c, g->file, 0, "%s cannot be met: the least saved bytes "
                     "of any plan is %.0f, forced by %d block-boundary "
                     "tensor%s (%.0f bytes)%s%s%s%s%s", asked,
                     f.plans[0].bytes + (double)r->compact_fixed,
                     nb, nb == 1 ? "" : "s", boundary,
                     r->compact_choice || r->compact_fixed == 0 ? ""
                     : ctx_printf(c, " and compact forms (%zu bytes; the plans "
                                  "rebuilding some of them that were tried do "
                                  "not fit the arena)", r->compact_fixed),
                     nm ? "; must_save tensors: " : "", nm ? must.data : "",
                     no ? "; saved because recomputing them needs as much "
                          "saved: " : "", no ? other.data : "");
}

/* The least-cost plan within want: the program's, or where its caps were
 * hit, branch and bound's. 0 with *proven; -1 when no plan fits (no
 * message). */
static int least_recompute(Ctx *c, const Graph *g, const Remat *r,
                           const Frontier *f, double want, Plan *pick,
                           int *proven)
{
    if (f->proven && !f->overflow) {
        *proven = 1;
        if (f->n == 0)
            return -1;
        *pick = f->plans[f->n - 1];
        return 0;
    }
    if (search_budget(c, g, r, want, pick, proven) == 0)
        return 0;
    if (f->n == 0)
        return -1;
    *pick = f->plans[f->n - 1];     /* search gave up first: unproven */
    *proven = 0;
    return 0;
}

/* remat_budget over the plans that keep every block boundary (nested 0)
 * or over all of them (nested 1); with an arena bound, seed (NULL: none)
 * is a plan for its search to better. */
static int budget_within(Ctx *c, const Graph *g, const Policy *p,
                         const Budget *b, int nested, const char *seed,
                         Remat **out, int *refusal_proven)
{
    *refusal_proven = 0;
    Remat *r = ctx_alloc(c, sizeof *r);
    Frontier f;
    Plan pick;
    double want = budget_bytes(c, g, b);
    /* a compact form is a choice where saved bytes alone are bounded */
    if ((!nested ? remat_classify
         : b->max_arena > 0 || b->keep_compact ? remat_classify_open
                                               : remat_classify_budget)(
            c, g, p, r))
        return -1;
    if (b->rates)
        r->rates = b->rates;
    /* set before the search: its schedules must be the driver's (an
     * arena-bounded plan has no fused recomputes, schedule.c) */
    r->max_arena = b->max_arena;
    /* the frontier's bytes leave out the compact forms every plan keeps */
    double plans = want - (double)r->compact_fixed;
    if (solve_frontier(c, g, r, plans, &f))
        return -1;
    int proven;
    if (least_recompute(c, g, r, &f, plans, &pick, &proven))
        return budget_error(c, g, r, b, want);
    int rc;
    if (b->max_arena > 0) {
        rc = fit_arena(c, g, r, &f, plans, b->max_arena,
                       b->fused_arena ? SCHED_FUSED : SCHED_TRAIN, seed,
                       !b->no_rebuild, &proven, &r->floor);
    } else {
        remat_apply(g, r, pick.recompute);
        rc = 0;
    }
    if (rc) {
        *refusal_proven = proven;
        return -1;
    }
    r->budgeted = 1;
    r->budget_bytes = want;
    r->proven = proven;
    r->nfree = count_free(g, r);
    *out = r;
    return 0;
}

/* The plans above keep every compact form: under an arena bound those
 * rebuilding one are tried too (solve_compact.c), where one fits and the
 * answer recomputes more, or there is none (rc: a refusal, proof: it was
 * a proof); the refusal stands where none does. */
static int with_forms(Ctx *c, const Graph *g, const Policy *p,
                      const Budget *b, int rc, int proof, Remat **out)
{
    char refusal[sizeof c->err];
    memcpy(refusal, c->err, sizeof refusal);
    Remat *answer = rc == 0 ? *out : NULL;
    if (compact_fit(c, g, p, b, rc != 0 && proof, &answer) || !answer) {
        memcpy(c->err, refusal, sizeof refusal);
        return rc == 0 ? 0 : -1;    /* the first answer stands */
    }
    c->err[0] = 0;
    *out = answer;
    return 0;
}

/* Every budget opens the boundaries (remat_classify_open). An arena bound
 * first finds the best plan that keeps them all, as before they opened,
 * and hands it to the search over every plan as the one to better: the
 * answer is never worse than that plan, though with the boundaries free
 * the walk proves less often (docs/solver.md). */
int remat_budget(Ctx *c, const Graph *g, const Policy *p, const Budget *b,
                 Remat **out)
{
    Remat *kept = NULL;
    char *seed = NULL;
    int proof = 0;
    if (b->max_arena > 0 &&
        budget_within(c, g, p, b, 0, NULL, &kept, &proof) == 0) {
        if (g->nblocks == 0) {      /* nothing to open */
            *out = kept;
            return with_forms(c, g, p, b, 0, 0, out);
        }
        /* a plan that rebuilds is the last resort of the search over
         * every plan too, not a seed to better */
        seed = kept->rebuild ? NULL : ctx_alloc(c, (size_t)g->ntensors);
        for (int t = 0; seed && t < g->ntensors; t++)
            seed[t] = kept->keep[t] == KEEP_RECOMPUTE;
    }
    *out = NULL;
    int rc = budget_within(c, g, p, b, 1, seed, out, &proof);
    if (rc == 0)
        (*out)->proven_kept = seed && kept->proven && !(*out)->proven;
    return b->max_arena > 0 ? with_forms(c, g, p, b, rc, proof, out) : rc;
}
