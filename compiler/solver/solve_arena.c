/*
 * solve_arena.c: the least recompute whose planned arena fits --max-arena,
 * and a proof that no plan recomputes less.
 *
 * The arena of a plan is known only once it is scheduled and planned, and
 * it is not a sum over decisions as saved bytes are. What can be said of
 * every plan before it is scheduled is a lower bound, at each statement of
 * the backward that runs a node's backward (the same statements in every
 * plan; recomputes only come between them). At such a statement j every
 * plan holds the gradients and scratch live there (no recompute decision
 * changes them) and every buffer a backward reads both at or before j and
 * at or after j, saved or recomputed (it exists from its first reader to
 * its last; a tensor rebuilt while a saved view keeps its forward buffer
 * is two, so there each reader's own span: storage_spans): `fixed[j]`,
 * and room[j] = max-arena - fixed[j]. On top of that a plan holds,
 * depending on its decisions:
 *
 *   - a saved tensor's forward buffer, when a backward reads it (or a view
 *     of it) after j, or none does and a recompute that reads it runs
 *     after j (a recompute runs just before the first statement needing
 *     what it rebuilds, which the decisions about its readers decide);
 *   - a rebuilt tensor's buffer, when it is rebuilt before j (for a
 *     recompute needing it then) and a backward reads it after j.
 *
 * A plan fits only if those bytes are within room[j] at every j, since the
 * planned arena is at least the peak of live bytes. For one j that is a
 * budget on a measure summed over the decisions, which solve.c's program
 * answers exactly (solve_live_at: its marks carry whether a tensor's
 * readers are rebuilt before j or after). So the least cost within
 * room[j], at the j where it is largest, is a lower bound on the answer
 * (live_bound). Each j's bound is a relaxation of the others; where the
 * best plan found reaches the bound, it is proven optimal.
 *
 * The plans tried: the saved-bytes frontier's, least cost first, until one
 * fits when planned; each statement's frontier's plans cheaper than the
 * best so far (the one reaching the bound is the answer when it fits).
 *
 * Where they leave a gap (the best plan for one statement overflows
 * another, as in a GPT whose layers are alike), the walk: solve.c's branch
 * and bound over the decisions, loss first, with hooks that count the same
 * live bytes at every statement at once, and at the recomputes between
 * two statements (decide()). Walking from the loss, a decision's readers
 * are decided before it, so it is known where each of them is rebuilt and
 * with that where the tensor's buffer is live. On reaching a node, the
 * statements before the first that an undecided tensor can reach other
 * than as a saved buffer live from the forward are closed: every buffer
 * the rest of the walk saves is live at each of them, so only their least
 * room matters (the slack). A partial plan whose cost, plus the least the
 * rest must recompute to keep within the slack (curve_below), reaches the
 * best so far is cut; so is one that another partial plan seen at the
 * same node, with the same room everywhere else and the same open
 * decisions (key_of), beat on slack, cost and saved bytes (visit()): its
 * futures are that one's, none better. What the rest must recompute is
 * bounded by the frontier, under the live bytes at the first statement,
 * of the components the rest decides alone (solve_prefix_curves). Each
 * whole plan reached is scheduled and planned; one that does not fit (the
 * count is a bound, not the arena) makes every partial plan above it
 * unfit to cut others (leave()). When the walk ends, the best is proven;
 * it gives up after ARENA_WORK and the answer then says so, with the
 * per-statement bound. The room at every point is kept in ranges.c's
 * tree, so that reaching a node costs O(log n).
 *
 * With block boundaries open (nested checkpointing, solve.c's
 * remat_budget) fit_arena runs twice: over the plans that keep every
 * boundary, then over every plan from that answer (the seed), which the
 * frontier's cheaper plans, the bound and an eighth of the walk may
 * better (none of the last two past SEEDED_BOUND_NODES). Where nothing
 * keeping the boundaries fits, evenly spaced kept boundaries (spaced_fit)
 * are candidates too.
 *
 * Every plan above recomputes a tensor once and keeps it to its last
 * reader, so a tensor rebuilt early for a later block's recompute stays
 * live until its own backward. The last resort, when none of them fits,
 * is the same spaced plans rebuilding (Remat.rebuild): each recomputed
 * tensor is rebuilt for every backward that reads it and forgotten after
 * (schedule.c), so the working set is a few buffers beside the kept
 * boundaries, for more recompute. The bounds above assume one rebuild per
 * tensor, so such an answer is never proven (rebuild_fit).
 */
#include "solver.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Counts, not clocks, so that the answer is the same on every machine:
 * the walk's give-up point, in nodes reached and decisions made (a
 * 4-layer GPT's hardest bound takes 2e5; a 96-layer GPT gives up after
 * about a second on this machine), and the plans it schedules at most;
 * the runs of statements live_bound solves; the candidate plans
 * scheduled before it (frontiers' plans); the partial plans the walk
 * remembers. */
#define ARENA_WORK 2000000L
#define ARENA_LEAVES 400
#define BOUND_RUNS 24
#define IDLE_RUNS 8         /* runs in a row that do not raise the bound */
#define CANDIDATES 1024
#define MEMO_SEEN (1 << 21) /* 40 bytes each */

/* One decision the walk made: the statements [from, to) whose buffers it
 * added `bytes` to, and its node's rebuild point before it. */
typedef struct {
    int from, to;           /* points (Walk.room), not statements */
    int rebuild, hold;      /* the node's before it */
    double bytes;
    int point;              /* where it raised a peak (Walk.peak), or -1 */
    double peak, top;       /* that peak before it; the node's top before */
} Step;

/* A partial plan seen on reaching a node (memo): its least room over the
 * statements only a saved buffer can still reach (closed), its cost and
 * its saved bytes; the next of the same key. */
typedef struct {
    double slack, cost, bytes;
    int next;
    long refused;           /* Walk.refused on reaching it; -1 when a plan
                             * below it was refused (it may not prune) */
} Seen;

typedef struct {
    uint64_t h1, h2;
    int first;              /* into Walk.seen, -1: an empty slot */
} Key;

typedef struct {
    int *cons, *cons_at;    /* per tensor, the nodes reading it (CSR) */
    int *rebuild;           /* per node: the first backward statement any of
                             * its rebuilt outputs is needed at (INT_MAX) */
    int *nrebuilt, *nhold;  /* per node: outputs rebuilt; views holding */
    int *hold_until;        /* per view kept: the last statement before
                             * which a recompute reads it (-1: not kept) */
    double *top;            /* per node: its largest rebuilt output, whose
                             * buffer is new where the node is rebuilt */
    int *rebuilt_for;       /* per tensor rebuilt in a buffer of its own:
                             * the statement it is rebuilt for (INT_MAX) */
    double *chain;          /* per such tensor: rebuilt_peak's */
    /* Per point: 2j is backward statement j, 2j - 1 the recomputes that
     * run just before it. left: max-arena less what is live there
     * throughout (every plan's, and the decisions') less peak, the most
     * the recomputes there hold at once (rebuilt_peak). */
    Ranges left;
    double *peak;
    Ranges peaks;           /* peak again, for key_of's hash: the same left
                             * can hide different peaks, and what a later
                             * decision does to left depends on which */
    int npoints;
    int *closed;            /* per walk position k: statements before it
                             * are reached by no undecided tensor but as a
                             * saved buffer live from the forward */
    int *cut, *cut_at;      /* per k: the decided nodes reading an
                             * undecided tensor (CSR) */
    Step *steps;
    int nsteps;
    Ctx memo;               /* keys and seen plans */
    Key *keys;
    int nkeys, capkeys;
    Seen *seen;
    int nseen, capseen;
    int *path, npath;       /* per node on the walk's path: its Seen, -1 */
    long refused;           /* plans the leaf refused so far */
    double unplanned;       /* the least cost refused past ARENA_LEAVES */
    long work;              /* nodes reached and decisions, to ARENA_WORK */
    int gave_up;
    double *later;          /* per k: the saved bytes the decisions at
                             * order[0..k] could add at most */
    Curve *curves;          /* per k: solve_prefix_curves' */
} Walk;

typedef struct {
    const Graph *g;
    Remat *r;
    double max_arena, want;
    double want_cap;        /* the walk's bound on saved bytes */
    size_t fwd_arena;       /* the forward-only step's, the same every plan */
    int step;               /* the step whose arena is bounded: SCHED_TRAIN,
                             * or SCHED_FUSED (its parameter gradients are
                             * values live where the backward writes them,
                             * the same in every plan, so the bounds hold) */
    int nb;                 /* backward statements */
    int *node;              /* per backward statement: its node */
    int *first;             /* per tensor: first_needs()'s */
    int *need;              /* per tensor: the first backward statement a
                             * tensor rebuilt from it could be needed at */
    int *lo, *own;          /* per tensor: the first backward statement
                             * reading its buffer (-1: none), reading it
                             * itself (INT_MAX: none) */
    double *bytes;          /* per tensor, aligned */
    double *fixed;          /* per backward statement: held by every plan */
    double *between;        /* per j: the buffers read by backwards both
                             * before and after the recomputes that run
                             * just before statement j */
    double *grad_between;   /* per j: the gradients and scratch live there */
    double *room;           /* per backward statement: max_arena - fixed */
    int rebuild_ok;         /* plans that rebuild at each use may answer */
    double floor;           /* what every plan holds at some statement,
                             * one that rebuilds at each use too: the
                             * statement's gradients, scratch and operands */
    int floor_at;           /* that statement (-1: none) */
    long leaves, searched;  /* plans planned; by the branch and bound */
    double least;           /* the smallest arena planned (note_arena) */
    double rebuilt;         /* the smallest arena of a plan that rebuilds */
    int failed, measure;
    double cost;            /* the last plan leaf() scheduled: its cost */
    long work_limit;        /* the walk's: ARENA_WORK, or less past a seed */
    Walk w;                 /* the branch and bound's own state */
} Arena;

static double aligned(double bytes)
{
    return ceil(bytes / ARENA_ALIGN) * ARENA_ALIGN;
}

static double *zeros(Ctx *c, int n)
{
    double *a = ctx_alloc(c, (size_t)(n + 1) * sizeof(double));
    memset(a, 0, (size_t)(n + 1) * sizeof(double));
    return a;
}

static void running_sum(double *a, int n)
{
    for (int i = 1; i < n; i++)
        a[i] += a[i - 1];
}

/* The backward statements of schedule s in order (a->node), and per
 * statement the gradient and scratch bytes live there (at[j]). */
static void backward_buffers(Ctx *c, Arena *a, const Schedule *s, double *at)
{
    double *live = zeros(c, s->nstmts);
    int *upto = ctx_alloc(c, ((size_t)s->nstmts + 1) * sizeof *upto);
    for (int i = 0, n = 0; i < s->nstmts; i++)
        upto[i + 1] = n += s->stmts[i].kind == S_BACKWARD;
    double *across = a->grad_between = zeros(c, s->nstmts);
    for (int i = 0; i < s->nvalues; i++) {
        const Value *v = &s->values[i];
        if ((v->kind == V_GRAD || v->kind == V_SCRATCH) && v->view == VIEW_NONE) {
            double b = aligned((double)v->bytes);
            live[v->def] += b;
            live[v->last + 1] -= b;
            /* the boundaries before j where the statements j-1 and j
             * both see it: j-1 at or after def, j at or before last */
            int from = upto[v->def] + 1, to = upto[v->last + 1] - 1;
            if (from <= to) {
                across[from] += b;
                across[to + 1] -= b;
            }
        }
    }
    running_sum(live, s->nstmts);
    running_sum(across, s->nstmts);
    a->nb = 0;
    for (int i = 0; i < s->nstmts; i++)
        if (s->stmts[i].kind == S_BACKWARD) {
            a->node[a->nb] = s->stmts[i].node;
            at[a->nb++] = live[i];
        }
}

/* Tensor t read by backward statement j: its first and last reader
 * (own, last), and the span over which its buffer (its storage's) is
 * read. */
static void read_at(Arena *a, int t, int j, int *lo, int *hi, int *last)
{
    int st = a->r->storage[t];
    if (a->own[t] == INT_MAX)
        a->own[t] = j;
    last[t] = j;
    if (a->g->tensors[st].kind != T_ACT)
        return;             /* a view of the caller's memory */
    if (lo[st] < 0)
        lo[st] = j;
    hi[st] = j;
}

static int by_start(const void *x, const void *y)
{
    const int *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Adds each storage's bytes where its buffer is surely live: to span over
 * the backward statements, to between over the boundaries before j with a
 * read on both sides. That is from the buffer's first backward read to its
 * last (lo, hi), unless the storage may be two buffers: rebuilt itself
 * while a view of it, read by a backward, keeps its forward buffer, so
 * that neither need be live between the view's last read and the rebuild.
 * Then it is the union of each reader tensor's own first-to-last reads
 * (own, last: one instance each). */
static void storage_spans(Ctx *c, const Arena *a, const int *lo,
                          const int *hi, const int *last, double *span,
                          double *between)
{
    const Graph *g = a->g;
    const Remat *r = a->r;
    int nt = g->ntensors;
    int *from = ctx_alloc(c, ((size_t)nt + 2) * sizeof *from);
    int *readers = ctx_alloc(c, ((size_t)nt + 1) * sizeof *readers);
    int (*iv)[2] = ctx_alloc(c, ((size_t)nt + 1) * sizeof *iv);
    for (int t = 0; t < nt; t++)    /* each storage's reader tensors (CSR) */
        if (a->own[t] != INT_MAX)
            from[r->storage[t] + 2]++;
    for (int t = 0; t < nt; t++)
        from[t + 2] += from[t + 1];
    for (int t = 0; t < nt; t++)
        if (a->own[t] != INT_MAX)
            readers[from[r->storage[t] + 1]++] = t;
    for (int st = 0; st < nt; st++) {
        if (lo[st] < 0)
            continue;
        int n = 0, one = from[st + 1] - from[st] <= 1 ||
                         (!r->free[st] && r->wanted[st] != KEEP_RECOMPUTE);
        for (int i = from[st]; i < from[st + 1] && !one; i++) {
            iv[n][0] = a->own[readers[i]];
            iv[n++][1] = last[readers[i]];
        }
        if (one) {
            iv[0][0] = lo[st];
            iv[0][1] = hi[st];
            n = 1;
        }
        qsort(iv, (size_t)n, sizeof *iv, by_start);
        for (int i = 0; i < n;) {   /* each run of touching intervals once */
            int start = iv[i][0], end = iv[i][1];
            for (i++; i < n && iv[i][0] <= end; i++)
                end = iv[i][1] > end ? iv[i][1] : end;
            span[start] += a->bytes[st];
            span[end + 1] -= a->bytes[st];
            if (start < end) {
                between[start + 1] += a->bytes[st];
                between[end + 1] -= a->bytes[st];
            }
        }
    }
}

/* Where a saved buffer is first read. A buffer that a backward reads (t
 * itself or a view of it) is read first at lo[t], the start of its span
 * (so the span and the saved part never count it twice). One that no
 * backward reads is needed only by recomputes, each run just before the
 * first statement that needs what it rebuilds: if saved, it lives at
 * least until the earliest backward statement that could need any tensor
 * rebuilt from it, through tensors that may be rebuilt (a block boundary
 * never is, which keeps this within a block). first[t] becomes that
 * statement (0 when none could). */
static void first_needs(Ctx *c, Arena *a)
{
    const Graph *g = a->g;
    int *need = a->need = ctx_alloc(c, (size_t)g->ntensors * sizeof *need);
    for (int t = 0; t < g->ntensors; t++)
        need[t] = INT_MAX;
    for (int k = g->nnodes - 1; k >= 0; k--) {
        const Node *n = &g->nodes[g->order[k]];
        int earliest = a->nb;
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            if (!a->r->free[t] && a->r->wanted[t] != KEEP_RECOMPUTE)
                continue;   /* never rebuilt: never reads its inputs */
            int e = a->own[t] < need[t] ? a->own[t] : need[t];
            earliest = e < earliest ? e : earliest;
        }
        for (int i = 0; i < n->nin; i++)
            if (earliest < need[n->in[i]])
                need[n->in[i]] = earliest;
    }
    a->first = ctx_alloc(c, (size_t)g->ntensors * sizeof *a->first);
    for (int t = 0; t < g->ntensors; t++)
        a->first[t] = a->lo[t] >= 0 ? a->lo[t] : need[t] < a->nb ? need[t] : 0;
}

/* a->fixed holding each statement's gradients and scratch: the most any
 * statement holds with its own operands added (each buffer once, a view
 * as its source's), which no plan escapes, however often it rebuilds. */
static void operands_floor(Ctx *c, Arena *a)
{
    const Graph *g = a->g;
    int *seen = ctx_alloc(c, (size_t)g->ntensors * sizeof *seen);
    a->floor = (double)a->fwd_arena;
    a->floor_at = -1;
    for (int j = 0; j < a->nb; j++) {
        int read[2 * MAX_IO];
        int k = node_backward_operands(g, &g->nodes[a->node[j]], read);
        double held = a->fixed[j];
        for (int i = 0; i < k; i++) {
            if (g->tensors[read[i]].kind != T_ACT)
                continue;
            int at = a->r->storage[read[i]];
            if (seen[at] == j + 1)
                continue;
            seen[at] = j + 1;
            held += aligned(tensor_bytes(&g->tensors[at]));
        }
        if (held > a->floor) {
            a->floor = held;
            a->floor_at = j;
        }
    }
}

/* The bytes every plan holds at each backward statement (the top). */
static void fixed_profile(Ctx *c, Arena *a, const Schedule *s)
{
    const Graph *g = a->g;
    int nt = g->ntensors;
    int *lo = a->lo = ctx_alloc(c, (size_t)nt * sizeof(int));
    int *hi = ctx_alloc(c, (size_t)nt * sizeof(int));
    int *last = ctx_alloc(c, (size_t)nt * sizeof(int));
    a->own = ctx_alloc(c, (size_t)nt * sizeof(int));
    a->bytes = ctx_alloc(c, (size_t)nt * sizeof(double));
    for (int t = 0; t < nt; t++) {
        lo[t] = hi[t] = -1;
        a->own[t] = INT_MAX;
        a->bytes[t] = aligned(tensor_bytes(&g->tensors[t]));
    }
    a->node = ctx_alloc(c, ((size_t)s->nstmts + 1) * sizeof(int));
    a->fixed = zeros(c, s->nstmts);
    backward_buffers(c, a, s, a->fixed);
    operands_floor(c, a);
    for (int j = 0; j < a->nb; j++) {
        int read[2 * MAX_IO];
        int k = node_backward_operands(g, &g->nodes[a->node[j]], read);
        for (int i = 0; i < k; i++)
            if (g->tensors[read[i]].kind == T_ACT)
                read_at(a, read[i], j, lo, hi, last);
    }
    double *span = zeros(c, a->nb);
    a->between = zeros(c, a->nb);
    storage_spans(c, a, lo, hi, last, span, a->between);
    running_sum(span, a->nb);
    a->room = zeros(c, a->nb);
    for (int j = 0; j < a->nb; j++) {
        a->fixed[j] += span[j];
        a->room[j] = a->max_arena - a->fixed[j];
    }
    running_sum(a->between, a->nb);
    first_needs(c, a);
}

/* ---- the walk's hooks ---------------------------------------------------- */

/* The walk decides a node's outputs after every reader's (reverse
 * topological order), so when it decides t it knows when t's readers are
 * rebuilt, and with that the statements where t's buffer is live in the
 * backward beyond what every plan holds (fixed_profile). The same count as
 * solve_live_at's, at every statement at once:
 *   - kept, read by a backward: before its first reader, lo[t];
 *   - kept, read only by recomputes: before the last of them runs (each
 *     runs just before the first statement needing what it rebuilds);
 *   - rebuilt, read by a backward itself: from where it is rebuilt (its
 *     first reader, or a rebuilt reader's rebuild point if earlier) to its
 *     buffer's first backward read.
 * A view holds no buffer of its own, and what a saved view holds of its
 * source is not counted (a bound may leave bytes out, never add them). */
static int rebuilt_at(const Arena *a, int t, int latest)
{
    const Walk *w = &a->w;
    int at = latest ? -1 : a->own[t];
    for (int i = w->cons_at[t]; i < w->cons_at[t + 1]; i++) {
        int m = w->cons[i], r = w->nrebuilt[m] ? w->rebuild[m]
                                 : latest ? w->hold_until[m] : INT_MAX;
        if (r == INT_MAX || r < 0)
            continue;   /* not rebuilt (nor a view kept), or not known
                         * where: leave it out */
        at = latest ? (r > at ? r : at) : (r < at ? r : at);
    }
    return at;
}

/* The point t's buffer, live from the forward or rebuilt, lives until:
 * its first backward read, or the last recompute reading it (exclusive). */
static int live_until(const Arena *a, int t)
{
    return a->lo[t] >= 0 ? 2 * a->lo[t] : 2 * rebuilt_at(a, t, 1) - 1;
}

static int add_room(Walk *w, const Step *st, int sign)
{
    w->work++;
    ranges_add(&w->left, st->from, st->to, (int64_t)(-sign * st->bytes));
    return st->from >= st->to || ranges_min(&w->left, st->from, st->to) >= 0;
}

static void set_peak(Walk *w, int p, double peak)
{
    ranges_add(&w->left, p, p + 1, (int64_t)(w->peak[p] - peak));
    ranges_add(&w->peaks, p, p + 1, (int64_t)(peak - w->peak[p]));
    w->peak[p] = peak;
}

/* What recompute m, rebuilt at the same point as its input t, adds to
 * t's bytes while it runs: its new output, less t's bytes where it may
 * write that output over t (schedule.c's forward_in_place). */
static double output_over(const Arena *a, int m, int t)
{
    const Node *n = &a->g->nodes[m];
    return op_table[n->op].fwd_in_place && n->in[0] == t
               ? fmax(a->w.top[m] - a->bytes[t], 0) : a->w.top[m];
}

/* The most bytes live at once, counting t, while the recomputes before
 * statement at run, along one chain of them from t: t = u0, read by m1,
 * whose output u1 is read by m2, ..., to mk, each rebuilt there. When mk
 * runs, its input u(k-1), its new output, and every earlier u that a
 * backward reads later are live. -1: no recompute there reads t. Each
 * u's best is kept (Walk.chain) when it is decided, after its readers,
 * so t's is one step from its readers' outputs'. */
static double rebuilt_peak(const Arena *a, int t, int at)
{
    const Walk *w = &a->w;
    const Graph *g = a->g;
    double peak = -1, held = a->lo[t] >= at ? a->bytes[t] : 0;
    for (int i = w->cons_at[t]; i < w->cons_at[t + 1]; i++) {
        int m = w->cons[i];
        if (!w->nrebuilt[m] || w->rebuild[m] != at)
            continue;
        double last = a->bytes[t] + output_over(a, m, t);
        peak = last > peak ? last : peak;
        for (int k = 0; k < g->nodes[m].nout && !op_table[g->nodes[m].op].alias;
             k++) {
            int o = g->nodes[m].out[k];
            if (w->rebuilt_for[o] == at && w->chain[o] >= 0 &&
                held + w->chain[o] > peak)
                peak = held + w->chain[o];
        }
    }
    return peak;
}

/* Rebuilt t at statement at, a buffer of its own: live from there to its
 * buffer's first backward read (through the recomputes before it), or,
 * read by none, to the last recompute reading it (not through those). And
 * while the recomputes there run, what rebuilt_peak counts is live at
 * once, on top of what lives through. */
static void rebuilt_step(Arena *a, int t, int at, Step *st)
{
    Walk *w = &a->w;
    if (at == INT_MAX)
        return;
    int to = live_until(a, t);
    if (to > 2 * at)
        *st = (Step){2 * at, to, st->rebuild, st->hold, a->bytes[t], -1, 0,
                     st->top};
    double peak = w->chain[t] = rebuilt_peak(a, t, at);
    int p = 2 * at - 1;
    if (p > 0 && peak > w->peak[p]) {
        st->point = p;
        st->peak = w->peak[p];
        set_peak(w, p, peak);
    }
}

static int decide(void *ctx, int node, int t, int how, int sign)
{
    Arena *a = ctx;
    Walk *w = &a->w;
    if (sign < 0) {
        Step *st = &w->steps[--w->nsteps];
        add_room(w, st, -1);
        if (st->point >= 0)
            set_peak(w, st->point, st->peak);
        w->top[node] = st->top;
        w->rebuilt_for[t] = INT_MAX;
        w->rebuild[node] = st->rebuild;
        w->hold_until[node] = st->hold;
        w->nrebuilt[node] -= (how & DECIDE_REBUILD) != 0;
        w->nhold[node] -= (how & DECIDE_HOLD) != 0;
        return 1;
    }
    Step st = {0, 0, w->rebuild[node], w->hold_until[node], 0, -1, 0,
               w->top[node]};
    int view = op_table[a->g->nodes[node].op].alias;
    if (how & DECIDE_REBUILD) {
        int at = rebuilt_at(a, t, 0);
        if (!view) {
            rebuilt_step(a, t, at, &st);
            w->rebuilt_for[t] = at;
            if ((a->lo[t] < 0 || a->lo[t] >= at) && a->bytes[t] > w->top[node])
                w->top[node] = a->bytes[t];
        }
        w->rebuild[node] = at < w->rebuild[node] ? at : w->rebuild[node];
        w->nrebuilt[node]++;
    } else if (view) {          /* kept: its source's buffer lives on */
        w->hold_until[node] = rebuilt_at(a, t, 1);
    } else {                    /* kept: live from the forward */
        int to = live_until(a, t);
        if (to > 0)
            st = (Step){0, to, st.rebuild, st.hold, a->bytes[t], -1, 0, st.top};
    }
    w->nhold[node] += (how & DECIDE_HOLD) != 0;
    w->steps[w->nsteps++] = st;
    int fits = add_room(w, &st, 1);
    return fits && (st.point < 0 ||
                    ranges_min(&w->left, st.point, st.point + 1) >= 0);
}

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 29);
}

/* The least room over the points closed at walk position k: every buffer
 * the rest of the walk saves is live at each of them. */
static double slack_at(const Walk *w, int k)
{
    int64_t least = ranges_min(&w->left, 0, 2 * w->closed[k] - 1);
    return least == INT64_MAX ? HUGE_VAL : (double)least;
}

/* What the rest of the walk depends on, past the closed points' least
 * room (slack_at): the room and the peak of every other point (a later
 * recompute's peak there adds only what exceeds the peak so far), and
 * per decided node reading an undecided tensor, whether and where it is
 * rebuilt, whether it holds its source, and what rebuilt_peak reads of it
 * and its outputs (top, and where each is rebuilt and its chain). Two
 * hashes (sums of each value times a random odd number per place), so
 * that telling two partial plans apart never rests on one 64-bit value. */
static Key key_of(const Arena *a, int k)
{
    const Walk *w = &a->w;
    uint64_t h1, h2, p1, p2;
    ranges_hash(&w->left, 2 * w->closed[k] - 1, &h1, &h2);
    ranges_hash(&w->peaks, 2 * w->closed[k] - 1, &p1, &p2);
    h1 = mix(h1, p1);
    h2 = mix(h2, p2);
    h1 = mix(h1, (uint64_t)k);
    h2 = mix(h2 ^ 0x5555, (uint64_t)k);
    for (int i = w->cut_at[k]; i < w->cut_at[k + 1]; i++) {
        int m = w->cut[i];
        uint64_t x = (uint64_t)(unsigned)w->rebuild[m] << 34 |
                     (uint64_t)(unsigned)(w->hold_until[m] + 1) << 2 |
                     (uint64_t)(w->nrebuilt[m] > 0) << 1 | (w->nhold[m] > 0);
        h1 = mix(h1, x);
        h2 = mix(h2 ^ 0xaaaa, x);
        /* what rebuilt_peak reads of it when its inputs are decided */
        const Node *n = &a->g->nodes[m];
        x = (uint64_t)llround(w->top[m]);
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            x = mix(x, (uint64_t)(unsigned)w->rebuilt_for[t]);
            x = mix(x, (uint64_t)llround(w->chain[t] + 1));
        }
        h1 = mix(h1, x);
        h2 = mix(h2 ^ 0x3333, x);
    }
    return (Key){h1, h2, -1};
}

static Key *key_slot(Walk *w, const Key *key)
{
    size_t i = key->h1 & (size_t)(w->capkeys - 1);
    while (w->keys[i].first >= 0 &&
           (w->keys[i].h1 != key->h1 || w->keys[i].h2 != key->h2))
        i = (i + 1) & (size_t)(w->capkeys - 1);
    return &w->keys[i];
}

static void keys_grow(Walk *w)
{
    Key *old = w->keys;
    int n = w->capkeys;
    w->capkeys = n ? 2 * n : 1 << 12;
    w->keys = ctx_alloc(&w->memo, (size_t)w->capkeys * sizeof *w->keys);
    for (int i = 0; i < w->capkeys; i++)
        w->keys[i].first = -1;
    for (int i = 0; i < n; i++)
        if (old[i].first >= 0)
            *key_slot(w, &old[i]) = old[i];
}

/* The least cost on k's curve of the components decided at order[0..k]
 * alone whose bytes live at the first statement are within slack (every
 * one is live at every closed point). */
static double curve_below(const Walk *w, int k, double slack)
{
    const Curve *cv = &w->curves[k];
    int lo = 0, hi = cv->n;     /* the first point above slack */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cv->bytes[mid] <= slack)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? cv->cost[lo - 1] : HUGE_VAL;
}

/* Whether the rest of the walk from here can be skipped: it gave up, or
 * no plan from here costs less than the best (curve_below; one that costs
 * the same is no better here, whatever its saved bytes: with alike layers
 * many partial plans reach the best's cost exactly, and walking them all
 * kept 48- and 96-layer GPTs from a proof), or a partial plan seen at the
 * same node with the same key did at least as well on every count (then
 * this one's futures are its futures: the closed statements lose the same
 * bytes to each; none better). Otherwise it is remembered, while
 * MEMO_SEEN last. */
static int visit(void *ctx, int k, double bytes, double cost, double best)
{
    Arena *a = ctx;
    Walk *w = &a->w;
    w->work++;
    /* the walk without its cut is a test's reference: more steps */
    if (w->work > (fit_arena_walk_only == 2 ? 4 : 1) * a->work_limit) {
        w->gave_up = 1;
        return 0;
    }
    double slack = slack_at(w, k);
    if (fit_arena_walk_only < 2 && cost + curve_below(w, k, slack) >= best)
        return 0;
    if (bytes + w->later[k] <= a->want_cap || a->want_cap == HUGE_VAL)
        bytes = -1;         /* no plan from here can reach the budget */
    Key key = key_of(a, k);
    if (2 * (w->nkeys + 1) > w->capkeys)
        keys_grow(w);
    Key *slot = key_slot(w, &key);
    for (int *at = &slot->first; *at >= 0;) {
        const Seen *p = &w->seen[*at];
        if (p->refused >= 0 && p->slack >= slack && p->cost <= cost &&
            p->bytes <= bytes)
            return 0;
        if (p->slack <= slack && p->cost >= cost && p->bytes >= bytes &&
            w->nseen < MEMO_SEEN)
            *at = p->next;  /* this one, remembered below, does as well */
        else
            at = &w->seen[*at].next;
    }
    w->path[w->npath++] = -1;
    if (w->nseen == MEMO_SEEN)
        return 1;
    if (w->nseen == w->capseen) {
        Seen *old = w->seen;
        w->capseen = w->capseen ? 2 * w->capseen : 1 << 12;
        w->seen = ctx_alloc(&w->memo, (size_t)w->capseen * sizeof *w->seen);
        if (w->nseen)
            memcpy(w->seen, old, (size_t)w->nseen * sizeof *w->seen);
    }
    if (slot->first < 0) {
        *slot = key;
        w->nkeys++;
    }
    w->seen[w->nseen] = (Seen){slack, cost, bytes, slot->first, w->refused};
    w->path[w->npath - 1] = w->nseen;
    slot->first = w->nseen++;
    return 1;
}

/* A partial plan below which a whole plan was refused (it did not fit
 * when planned, though within the bound) says nothing of the plans it
 * would skip: they might fit. It no longer prunes. */
static void leave(void *ctx)
{
    Walk *w = &((Arena *)ctx)->w;
    int i = w->path[--w->npath];
    if (i >= 0 && w->refused > w->seen[i].refused)
        w->seen[i].refused = -1;
}

/* A planned plan's arena, for the refusals' messages. a->rebuilt: every
 * rebuilding plan's (rebuild_fit measures them as it tries them, so that
 * its refusal need not schedule them again). a->least: the others', and a
 * rebuilding plan's only where its peak was within the bound (planned to
 * see whether it fits): measuring the rest must not move the number the
 * message gives as the frontier's least. */
static void note_arena(Arena *a, double arena, int within)
{
    if (a->r->rebuild)
        a->rebuilt = arena < a->rebuilt ? arena : a->rebuilt;
    if (!a->r->rebuild || within)
        a->least = arena < a->least ? arena : a->least;
}

/* A whole plan: scheduled and, unless its peak of live bytes already
 * exceeds the bound (the planned arena is at least the peak), planned; it
 * fits or not. a->measure: planned whatever its peak. */
static int leaf(void *ctx, const char *recompute)
{
    Arena *a = ctx;
    Ctx scratch;
    ctx_init(&scratch);
    remat_apply(a->g, a->r, recompute);
    Schedule s;
    memset(&s, 0, sizeof s);
    int fits = 0;
    if (schedule_build(&scratch, a->g, a->r, a->step, &s)) {
        a->failed = 1;
    } else {
        double least_room = HUGE_VAL, peak = (double)schedule_peak(&scratch, &s);
        for (int j = 0; j < a->nb; j++)
            least_room = a->room[j] < least_room ? a->room[j] : least_room;
        if (a->w.peak) {
            int64_t left = ranges_min(&a->w.left, 0, a->w.npoints);
            least_room = (double)left < least_room ? (double)left : least_room;
        }
        assert((a->nb == 0 || a->r->rebuild ||
                a->max_arena - least_room <= peak) &&
               "the bound is below every plan's peak");
        /* (the forward's own arena fits: check_fixed) */
        int within = peak <= a->max_arena;
        if ((a->measure || within) &&
            plan_arena(&scratch, &s, a->max_arena) == 0) {
            double arena = (double)(s.arena_bytes > a->fwd_arena
                                        ? s.arena_bytes : a->fwd_arena);
            note_arena(a, arena, within);
            fits = arena <= a->max_arena;
            /* then rebuild_fit answers with a plan: no refusal needs the
             * rest of the rebuilding plans measured */
            if (fits && a->r->rebuild)
                a->measure = 0;
        }
    }
    a->cost = s.recompute_cost;
    ctx_free(&scratch);
    a->leaves++;
    return fits;
}

/* ---- a bound on the answer's cost --------------------------------------- */

/* The first backward statement after j where what solve_live_at counts
 * can change (some tensor's first reader), or nb. */
static int segment_end(const Arena *a, int j)
{
    int end = a->nb;
    for (int t = 0; t < a->g->ntensors; t++) {
        if (a->lo[t] > j && a->lo[t] < end)
            end = a->lo[t];
        if (a->own[t] > j && a->own[t] < end)
            end = a->own[t];
    }
    return end;
}

/* f's plans that cost less than *fit, cheapest first, each scheduled
 * (while the candidates tried stay within CANDIDATES): the first that
 * fits and keeps within the budget becomes *fit (copied into c). */
static void try_plans(Ctx *c, Arena *a, const Frontier *f, Plan *fit)
{
    for (int i = f->n - 1; i >= 0 && f->plans[i].cost < fit->cost &&
                           a->leaves < CANDIDATES; i--)
        if (leaf(a, f->plans[i].recompute) &&   /* want leaves out compact */
            a->r->saved_bytes - a->r->compact_fixed <= a->want) {
            char *rec = ctx_alloc(c, (size_t)a->g->ntensors);
            memcpy(rec, f->plans[i].recompute, (size_t)a->g->ntensors);
            *fit = (Plan){(double)a->r->saved_bytes, f->plans[i].cost, rec};
            return;
        }
}

typedef struct {
    int j;                  /* the first statement of a run */
    double room;            /* the least room of the run */
    double excess;          /* what saving every tensor keeps live across j
                             * (by the cruder bound, first[]), beyond room */
} Segment;

static int more_excess(const void *x, const void *y)
{
    const Segment *p = x, *q = y;
    return p->excess > q->excess ? -1 : p->excess < q->excess ? 1
                                                               : p->j - q->j;
}

/* The runs of statements that count alike (segment_end), most excess
 * first: where the bound is likely to be largest. Returns how many. */
static int segments(Ctx *c, const Arena *a, Segment **out)
{
    Segment *seg = ctx_alloc(c, ((size_t)a->nb + 1) * sizeof *seg);
    int n = 0;
    for (int j = 0, end; j < a->nb; j = end, n++) {
        end = segment_end(a, j);
        seg[n] = (Segment){j, HUGE_VAL, 0};
        for (int i = j; i < end; i++)
            seg[n].room = a->room[i] < seg[n].room ? a->room[i] : seg[n].room;
        for (int t = 0; t < a->g->ntensors; t++)
            seg[n].excess += a->first[t] > j ? a->bytes[t] : 0;
        seg[n].excess -= seg[n].room;
    }
    qsort(seg, (size_t)n, sizeof *seg, more_excess);
    *out = seg;
    return n;
}

/* Every plan that fits keeps the bytes live across each backward
 * statement j beyond what every plan holds there within room[j] (the
 * top), so the least cost of a plan doing so at one j (solve_live_at's
 * frontier) bounds the answer's from below. Returns the largest such
 * bound over the runs of statements that count alike, and `bound`, the
 * one given (HUGE_VAL: no plan fits), at the least room of each run: the
 * runs of most excess first, until *best reaches the bound, IDLE_RUNS
 * in a row leave it where it was (on the shipped graphs and GPTs to 96
 * layers the largest comes within the first four) or BOUND_RUNS were
 * solved (each a program over the whole graph; a 96-layer GPT has 1,500
 * runs). The plans of each that cost less than *best are candidates. */
static double live_bound(Ctx *c, Arena *a, double bound, Plan *best)
{
    Segment *seg;
    int n = segments(c, a, &seg);
    for (int i = 0, idle = 0; i < n && i < BOUND_RUNS && idle < IDLE_RUNS &&
                              !(best->recompute && best->cost <= bound);
         i++, idle++) {
        Ctx x;
        ctx_init(&x);
        LiveAt at = {seg[i].j, a->lo, a->own, a->bytes};
        Frontier f;
        if (solve_live_at(&x, a->g, a->r, &at, seg[i].room, &f) == 0 &&
            f.proven && !f.overflow) {
            double least = f.n ? f.plans[f.n - 1].cost : HUGE_VAL;
            idle = least > bound ? -1 : idle;
            bound = least > bound ? least : bound;
            try_plans(c, a, &f, best);
        }
        ctx_free(&x);
    }
    return bound;
}

/* The branch and bound's leaf: leaf(). A plan that does not fit makes the
 * partial plans above it unfit to cut others (leave()), for the first
 * ARENA_LEAVES plans; past them a plan is refused unplanned and only its
 * cost is kept (Walk.unplanned): every plan the walk cut for a partial
 * plan that did at least as well costs at least the least of those, so
 * when the walk ends that is a bound, and the proof when the best is no
 * dearer. */
static int search_leaf(void *ctx, const char *recompute, double cost)
{
    Arena *a = ctx;
    if (++a->searched > ARENA_LEAVES) {
        a->w.unplanned = cost < a->w.unplanned ? cost : a->w.unplanned;
        return 0;
    }
    int fits = leaf(a, recompute);
    a->w.refused += !fits;
    return fits;
}

/* The nodes reading each tensor; per walk position k, the statements
 * closed there (before the first any undecided tensor can reach other
 * than as a saved buffer live from the forward: its first reader, or a
 * rebuild of a tensor it feeds) and the cut (decided nodes reading an
 * undecided tensor). */
static void walk_init(Ctx *c, Arena *a)
{
    const Graph *g = a->g;
    Walk *w = &a->w;
    int nn = g->nnodes, nt = g->ntensors;
    int *pos = ctx_alloc(c, (size_t)nn * sizeof *pos);
    for (int k = 0; k < nn; k++)
        pos[g->order[k]] = k;
    w->cons_at = ctx_alloc(c, ((size_t)nt + 1) * sizeof(int));
    for (int n = 0; n < nn; n++)
        for (int i = 0; i < g->nodes[n].nin; i++)
            w->cons_at[g->nodes[n].in[i] + 1]++;
    for (int t = 0; t < nt; t++)
        w->cons_at[t + 1] += w->cons_at[t];
    w->cons = ctx_alloc(c, ((size_t)w->cons_at[nt] + 1) * sizeof(int));
    int *fill = ctx_alloc(c, ((size_t)nt + 1) * sizeof(int));
    for (int n = 0; n < nn; n++)
        for (int i = 0; i < g->nodes[n].nin; i++) {
            int t = g->nodes[n].in[i];
            w->cons[w->cons_at[t] + fill[t]++] = n;
        }
    w->rebuild = ctx_alloc(c, (size_t)nn * sizeof(int));
    w->nrebuilt = ctx_alloc(c, (size_t)nn * sizeof(int));
    w->nhold = ctx_alloc(c, (size_t)nn * sizeof(int));
    w->hold_until = ctx_alloc(c, (size_t)nn * sizeof(int));
    w->rebuilt_for = ctx_alloc(c, (size_t)nt * sizeof(int));
    w->chain = zeros(c, nt);
    for (int t = 0; t < nt; t++)
        w->rebuilt_for[t] = INT_MAX;
    for (int n = 0; n < nn; n++) {
        w->rebuild[n] = INT_MAX;
        w->hold_until[n] = -1;
    }
    w->steps = ctx_alloc(c, ((size_t)nt + 1) * sizeof *w->steps);
    w->path = ctx_alloc(c, ((size_t)nn + 1) * sizeof *w->path);
    w->top = zeros(c, nn);
    w->curves = ctx_alloc(c, ((size_t)nn + 1) * sizeof *w->curves);
    LiveAt at = {0, a->lo, a->own, a->bytes};
    solve_prefix_curves(c, g, a->r, &at, a->max_arena, w->curves);
    w->later = zeros(c, nn);
    for (int k = 0; k < nn; k++) {
        const Node *n = &g->nodes[g->order[k]];
        w->later[k] = k ? w->later[k - 1] : 0;
        for (int o = 0; o < n->nout; o++)
            w->later[k] += tensor_bytes(&g->tensors[n->out[o]]);
    }
    w->npoints = 2 * a->nb;
    w->peak = zeros(c, w->npoints);
    int64_t *left = ctx_alloc(c, ((size_t)w->npoints + 1) * sizeof *left);
    for (int j = 0; j < a->nb; j++) {   /* whole bytes, so exact */
        left[2 * j] = llround(a->room[j]);
        left[2 * j + 1] = llround(a->max_arena);
        if (j > 0)
            left[2 * j - 1] -= llround(a->between[j] + a->grad_between[j]);
    }
    ranges_init(c, &w->left, left, w->npoints);
    memset(left, 0, (size_t)w->npoints * sizeof *left);
    ranges_init(c, &w->peaks, left, w->npoints);
    w->closed = ctx_alloc(c, ((size_t)nn + 1) * sizeof(int));
    for (int k = 0, least = a->nb; k < nn; k++) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o], e = a->own[t] < a->need[t] ? a->own[t] : a->need[t];
            e = a->lo[t] >= 0 && a->lo[t] < e ? a->lo[t] : e;
            least = e < least ? e : least;
        }
        w->closed[k] = least;
    }
    /* node n is in the cut from its earliest input's producer to itself */
    int *from = ctx_alloc(c, (size_t)nn * sizeof *from);
    w->cut_at = ctx_alloc(c, ((size_t)nn + 2) * sizeof(int));
    for (int n = 0; n < nn; n++) {
        from[n] = pos[n];
        for (int i = 0; i < g->nodes[n].nin; i++) {
            int p = g->tensors[g->nodes[n].in[i]].producer;
            if (p >= 0 && pos[p] < from[n])
                from[n] = pos[p];
        }
        for (int k = from[n]; k < pos[n]; k++)
            w->cut_at[k + 1]++;
    }
    for (int k = 0; k < nn; k++)
        w->cut_at[k + 1] += w->cut_at[k];
    w->cut = ctx_alloc(c, ((size_t)w->cut_at[nn] + 1) * sizeof(int));
    int *cfill = ctx_alloc(c, ((size_t)nn + 1) * sizeof(int));
    for (int n = 0; n < nn; n++)
        for (int k = from[n]; k < pos[n]; k++)
            w->cut[w->cut_at[k] + cfill[k]++] = n;
    w->unplanned = HUGE_VAL;
    ctx_init(&w->memo);
}

/* ---- the search ---------------------------------------------------------- */

/* With the boundaries open, each statement's program in live_bound (and
 * the walk's prefix curves) joins what the boundaries kept apart: on a
 * 96-layer GPT (2,599 nodes) one run took 340 MB and a second. Past this
 * many nodes, when the best plan that keeps every boundary is known (the
 * seed), neither runs: the answer is that plan or a frontier plan that
 * betters it, not proven. */
#define SEEDED_BOUND_NODES 700

/* Nested checkpointing's plans (Chen et al. 2016): of the n tensors the
 * structure would save and a budget opened (block boundaries, tensors
 * outside every block), in ngroups groups (group k: open[first[k]] up to
 * open[first[k + 1]]), keep `kept` groups spread evenly along the walk and
 * rebuild each other tensor from the kept ones before it, through the
 * blocks between; the other free tensors as the policy asks (inner 0) or
 * all rebuilt (inner 1, full checkpointing inside each block). */
static void spaced_plan(const Graph *g, const Remat *r, const int *open,
                        const int *first, int ngroups, int kept, int inner,
                        char *recompute)
{
    for (int t = 0; t < g->ntensors; t++)
        recompute[t] = r->free[t] && (inner || r->wanted[t] == KEEP_RECOMPUTE);
    for (int i = 0; i < first[ngroups]; i++)
        recompute[open[i]] = 1;
    for (int j = 0; j < kept; j++) {
        int k = (int)((long)j * ngroups / kept);
        for (int i = first[k]; i < first[k + 1]; i++)
            recompute[open[i]] = 0;
    }
}

/* Each of the SPACED_KEPT counts of kept groups (or all, if fewer), both
 * ways inside the blocks, handed to each() until it returns nonzero: the
 * open tensors one by one, then by block where a block has several. */
#define SPACED_KEPT 64
static int each_spaced(Ctx *c, const Graph *g, const Remat *r,
                       int (*each)(void *ctx, const char *recompute),
                       void *ctx)
{
    int n;
    int *open = solve_opened(c, g, r, &n), *first;
    char *recompute = ctx_alloc(c, (size_t)g->ntensors);
    for (int by_block = 0; by_block < 2; by_block++) {
        int ngroups = solve_groups(c, g, open, n, by_block, &first);
        if (by_block && ngroups == n)
            break;          /* the same groups as one by one */
        int counts = ngroups < SPACED_KEPT ? ngroups : SPACED_KEPT;
        for (int i = 0; i < counts; i++)
            for (int inner = 0; inner < 2; inner++) {
                spaced_plan(g, r, open, first, ngroups,
                            (int)((long)i * ngroups / counts), inner,
                            recompute);
                if (each(ctx, recompute))
                    return 1;
            }
    }
    return 0;
}

/* spaced_fit's leaf for each plan: the least cost that fits. */
typedef struct {
    Ctx *c;
    Arena *a;
    Plan best;
} SpacedFit;

static int spaced_leaf(void *ctx, const char *recompute)
{
    SpacedFit *s = ctx;
    Arena *a = s->a;
    if (!leaf(a, recompute) || a->cost >= s->best.cost)
        return 0;
    s->best = (Plan){(double)a->r->saved_bytes, a->cost,
                     ctx_alloc(s->c, (size_t)a->g->ntensors)};
    memcpy(s->best.recompute, recompute, (size_t)a->g->ntensors);
    return 0;
}

/* When no frontier plan fits (the frontier keeps most boundaries: saving
 * them is cheaper than rebuilding them), the least-cost of the spaced
 * plans that fits: a plan for the walk to better, and an answer when it
 * gives up. */
static Plan spaced_fit(Ctx *c, Arena *a)
{
    SpacedFit s = {c, a, {HUGE_VAL, HUGE_VAL, NULL}};
    each_spaced(c, a->g, a->r, spaced_leaf, &s);
    return s.best;
}

/* The least arena of the frontier's plans, for a message. */
static double least_on_frontier(Arena *a, const Frontier *f)
{
    a->measure = 1;
    for (int i = 0; i < f->n; i++)
        leaf(a, f->plans[i].recompute);
    return a->least;
}

/* The least arena of nested checkpointing's plans (HUGE_VAL: there are
 * none, the boundaries being kept), for a message. */
static double least_spaced(Arena *a)
{
    Ctx scratch;
    ctx_init(&scratch);
    a->measure = 1;
    a->least = HUGE_VAL;
    spaced_fit(&scratch, a);
    ctx_free(&scratch);
    return a->least;
}

/* why: what keeps every plan that recomputes each tensor once over the
 * bound. rebuilt: rebuilding plans were tried too, and none fits (the
 * refusal is then not a proof; rebuild_fit measured them, a->rebuilt). */
static int too_small(Ctx *c, Arena *a, const Frontier *f, const char *why,
                     int rebuilt)
{
    double least = least_on_frontier(a, f), spaced = least_spaced(a);
    double again = rebuilt ? a->rebuilt : HUGE_VAL;
    double best = least < spaced ? least : spaced;
    /* below what some statement holds in every plan: a proof */
    const char *floor = a->max_arena >= a->floor || a->floor_at < 0 ? NULL
        : ctx_printf(c, "; every plan, one that rebuilds at each use too, "
                     "holds %.0f bytes at the backward of node '%s'",
                     a->floor, a->g->nodes[a->node[a->floor_at]].name);
    return ctx_error(c, a->g->file, 0, "max-arena %.0f bytes cannot be met: "
                     "%s%s%s%s", a->max_arena, why, least == HUGE_VAL ? ""
                     : ctx_printf(c, "; the least arena of the saved-bytes "
                                  "frontier's plans is %.0f bytes%s", least,
                                  a->r->compact_fixed ? " (every compact form "
                                  "kept)" : ""),
                     spaced >= least ? "" : ctx_printf(c, ", of nested "
                     "checkpointing's (a few boundaries kept, the others "
                     "rebuilt from them) %.0f", spaced),
                     !rebuilt ? "" : floor ? floor
                     : again == HUGE_VAL || again >= best
                     ? "; plans that rebuild at each use were tried too "
                       "(not proven least)"
                     : ctx_printf(c, ", of plans that rebuild at each use "
                                  "%.0f (not proven least)", again));
}

/* A bound below what every plan that recomputes each tensor once holds:
 * where (NULL: none). */
static const char *fixed_over(Ctx *c, const Arena *a)
{
    if ((double)a->fwd_arena > a->max_arena)
        return ctx_printf(c, "the forward alone needs %zu bytes",
                          a->fwd_arena);
    int worst = -1;
    for (int j = 0; j < a->nb; j++)
        if (a->room[j] < 0 && (worst < 0 || a->room[j] < a->room[worst]))
            worst = j;
    if (worst < 0)
        return NULL;
    return ctx_printf(c, "at the backward of node '%s' every plan that "
                      "recomputes a tensor once holds at least %.0f bytes",
                      a->g->nodes[a->node[worst]].name, a->fixed[worst]);
}

/* Rebuilding plans are tried on graphs of at most this many nodes: each
 * is a schedule whose recomputes grow with the square of the depth. */
#define REBUILD_NODES 1000

/* solve_spaced_plans's plans of one Remat.rebuild, to its caller's each(). */
typedef struct {
    int (*each)(void *ctx, const char *recompute, int rebuild,
                const int *hold);
    void *ctx;
    int rebuild;
} SpacedMode;

static int spaced_mode(void *ctx, const char *recompute)
{
    const SpacedMode *m = ctx;
    return m->each(m->ctx, recompute, m->rebuild, NULL);
}

static int revolve_mode(void *ctx, const char *recompute, const int *hold)
{
    const SpacedMode *m = ctx;
    return m->each(m->ctx, recompute, REBUILD_BLOCK, hold);
}

int solve_spaced_plans(const Graph *g, const Remat *r,
                       int (*each)(void *ctx, const char *recompute,
                                   int rebuild, const int *hold), void *ctx)
{
    int last = g->nnodes > REBUILD_NODES ? REBUILD_NONE : REBUILD_BLOCK;
    for (int mode = REBUILD_NONE; mode <= last; mode++) {
        SpacedMode m = {each, ctx, mode};
        Ctx scratch;
        ctx_init(&scratch);
        int stop = each_spaced(&scratch, g, r, spaced_mode, &m);
        ctx_free(&scratch);
        if (stop)
            return 1;
    }
    if (last == REBUILD_NONE)
        return 0;
    SpacedMode m = {each, ctx, REBUILD_BLOCK};
    Ctx scratch;
    ctx_init(&scratch);
    int stop = revolve_plans(&scratch, g, r, revolve_mode, &m);
    ctx_free(&scratch);
    return stop;
}

/* revolve_fit's leaf for each plan: spaced_leaf's, with the holds of
 * the best kept beside its plan. */
typedef struct {
    SpacedFit fit;
    int *hold;
} RevolveFit;

static int revolve_leaf(void *ctx, const char *recompute, const int *hold)
{
    RevolveFit *s = ctx;
    const char *before = s->fit.best.recompute;
    s->fit.a->r->hold = hold;
    spaced_leaf(&s->fit, recompute);
    s->fit.a->r->hold = NULL;
    if (s->fit.best.recompute != before) {
        size_t bytes = (size_t)s->fit.a->g->ntensors * sizeof *s->hold;
        s->hold = ctx_alloc(s->fit.c, bytes);
        memcpy(s->hold, hold, bytes);
    }
    return 0;
}

/* The least cost of revolve's plans that fits, and its holds. */
static Plan revolve_fit(Ctx *c, Arena *a, int **hold)
{
    RevolveFit s = {{c, a, {HUGE_VAL, HUGE_VAL, NULL}}, NULL};
    Ctx scratch;
    ctx_init(&scratch);
    a->r->rebuild = REBUILD_BLOCK;
    revolve_plans(&scratch, a->g, a->r, revolve_leaf, &s);
    ctx_free(&scratch);
    *hold = s.hold;
    return s.fit.best;
}

/* The last resort: the least recompute of the rebuilding spaced plans
 * that fits (r->rebuild set), or the refusal. Never proven. Each plan is
 * measured (a->rebuilt) as it is tried, so that the refusal where none
 * fits has the least of them without scheduling them again. */
static int rebuild_fit(Ctx *c, Arena *a, const Frontier *f, const char *why,
                       int *proven)
{
    *proven = 0;
    if ((double)a->fwd_arena > a->max_arena || a->g->nnodes > REBUILD_NODES ||
        !a->rebuild_ok)
        return too_small(c, a, f, why, 0);
    a->measure = 1;
    Plan best = {HUGE_VAL, HUGE_VAL, NULL};
    int how = REBUILD_NONE, *hold = NULL, *held;
    a->r->hold = NULL;
    for (int mode = REBUILD_EACH; mode <= REBUILD_BLOCK; mode++) {
        a->r->rebuild = mode;
        Plan p = spaced_fit(c, a);
        if (a->failed)
            return -1;
        if (p.recompute && p.cost < best.cost) {
            best = p;
            how = mode;
        }
    }
    Plan p = revolve_fit(c, a, &held);
    if (a->failed)
        return -1;
    if (p.recompute && p.cost < best.cost) {
        best = p;
        how = REBUILD_BLOCK;
        hold = held;
    }
    a->r->rebuild = how;
    a->r->hold = hold;
    if (!best.recompute)
        return too_small(c, a, f, why, 1);
    remat_apply(a->g, a->r, best.recompute);
    a->r->floor = 0;
    return 0;
}

/* The profile from the policy's own plan (any plan gives the same). */
static int arena_init(Ctx *c, const Graph *g, Remat *r, double max_arena,
                      int step, const Frontier *f, Arena *a)
{
    memset(a, 0, sizeof *a);
    a->g = g;
    a->r = r;
    a->step = step;
    a->max_arena = max_arena;
    a->least = a->rebuilt = HUGE_VAL;
    Schedule s, fwd;
    memset(&s, 0, sizeof s);
    memset(&fwd, 0, sizeof fwd);
    r->rebuild = 0;
    r->hold = NULL;
    remat_apply(g, r, NULL);
    if (schedule_build(c, g, r, step, &s) ||
        schedule_build(c, g, r, SCHED_FORWARD, &fwd) ||
        plan_arena(c, &fwd, max_arena))
        return -1;
    a->fwd_arena = fwd.arena_bytes;
    fixed_profile(c, a, &s);
    (void)f;
    return 0;
}

/* The saved-bytes frontier's least cost within cap, a bound too (every
 * plan that fits saves at most max-arena bytes); 0 when it is not exact,
 * HUGE_VAL when no plan is within cap. */
double frontier_bound(const Frontier *f, double cap)
{
    if (!f->proven || f->overflow)
        return 0;
    for (int i = f->n - 1; i >= 0; i--)
        if (f->plans[i].bytes <= cap)
            return f->plans[i].cost;
    return HUGE_VAL;
}

/* The frontier's plan of least cost that fits when planned, among the
 * first CANDIDATES / 2 tried of those costing less than below and saving
 * at most the bound (every saved buffer is live where the backward
 * starts). */
static Plan first_fit(Arena *a, const Frontier *f, double below)
{
    for (int i = f->n - 1; i >= 0 && a->leaves < CANDIDATES / 2 &&
                           f->plans[i].cost < below; i--)
        if (f->plans[i].bytes <= a->max_arena && leaf(a, f->plans[i].recompute))
            return f->plans[i];
    return (Plan){HUGE_VAL, HUGE_VAL, NULL};
}

int fit_arena_walk_only;

int fit_arena(Ctx *c, const Graph *g, Remat *r, const Frontier *f,
              double want, double max_arena, int step, const char *seed,
              int rebuild_ok, int *proven, double *bound)
{
    Arena a;
    /* the search's schedules are the driver's, which plans the answer as
     * leaf() did: under a bound, one backward statement per node (no fused
     * or remade recompute, schedule.c), as the walk's per-backward profile
     * and cuts assume */
    r->max_arena = max_arena;
    if (arena_init(c, g, r, max_arena, step, f, &a))
        return -1;
    a.rebuild_ok = rebuild_ok;
    const char *over = fixed_over(c, &a);
    if (over) {
        *bound = 0;
        int rc = rebuild_fit(c, &a, f, over, proven);
        *proven = rc && !a.failed;  /* the refusal: a proof */
        return rc;
    }
    double cap = want < max_arena ? want : max_arena;
    a.want = want;
    Plan best = {HUGE_VAL, HUGE_VAL, NULL};
    double least = 0;
    if (seed && leaf(&a, seed))     /* the walk alone betters it too */
        best = (Plan){(double)r->saved_bytes, a.cost, (char *)seed};
    if (!fit_arena_walk_only) {
        Plan fit = first_fit(&a, f, best.cost);
        best = fit.recompute ? fit : best;
        if (!best.recompute)
            best = spaced_fit(c, &a);
        least = frontier_bound(f, cap);
        if (!seed || g->nnodes <= SEEDED_BOUND_NODES)
            least = live_bound(c, &a, least, &best);
    }
    assert((least < HUGE_VAL || !best.recompute) && "a bound above a plan");
    *proven = !fit_arena_walk_only &&
              (least == HUGE_VAL || (best.recompute && best.cost <= least));
    /* with a seed, the best plan keeping every block boundary, the walk
     * over every plan (which proves less often once they open) gets an
     * eighth of its steps, and none on a deep graph: where it gives up the
     * answer is the seed or a plan that betters it, not proven */
    int deep = seed && !fit_arena_walk_only && g->nnodes > SEEDED_BOUND_NODES;
    a.work_limit = seed && !fit_arena_walk_only ? ARENA_WORK / 8 : ARENA_WORK;
    if (!*proven && !deep) {
        /* every buffer saved is live where the backward starts, so a
         * bound on saved bytes of max-arena is the arena's own; without a
         * budget below it, the walk leaves saved bytes to the arena */
        a.want_cap = want < max_arena ? want : HUGE_VAL;
        walk_init(c, &a);
        SearchHooks h = {decide, visit, leave, search_leaf, &a, LONG_MAX};
        search_hooked(c, g, r, a.want_cap, &h, &best, proven);
        *proven = *proven && !a.w.gave_up;
        if (*proven && a.w.unplanned < best.cost) {
            *proven = 0;
            least = a.w.unplanned > least ? a.w.unplanned : least;
        }
        ctx_free(&a.w.memo);
    }
    /* a plan the walk found may meet the bound though the walk gave up */
    *proven = *proven || (best.recompute && best.cost <= least);
    *bound = least;
    if (a.failed)
        return -1;
    if (best.recompute == NULL && want < HUGE_VAL)
        return too_small(c, &a, f, "no plan within the budget fits", 0);
    if (best.recompute == NULL) {
        int searched = *proven;
        int rc = rebuild_fit(c, &a, f, !searched
                             ? "no plan found fits (the search gave up)"
                             : "no plan that recomputes a tensor once fits",
                             proven);
        if (rc)
            *proven = searched && !a.failed;
        return rc;
    }
    remat_apply(g, r, best.recompute);
    return 0;
}
