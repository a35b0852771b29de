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
 * its last): `fixed[j]`, and room[j] = max-arena - fixed[j]. On top of
 * that a plan holds, depending on its decisions:
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
 * best so far (the one reaching the bound is the answer when it fits);
 * then, if they leave a gap, solve.c's branch and bound over
 * every plan that recomputes less than the best so far, saves at most the
 * budget and max-arena bytes (every saved buffer is live where the forward
 * ends), and keeps a cruder bound of the same kind (keep(): a saved tensor
 * counts before the earliest statement that any plan could read it), each
 * one that reaches the end planned. When that walk ends the best is proven
 * too; it gives up after a number of steps and the answer then says so,
 * with the bound.
 */
#include "remat.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Counts, not clocks, so that the answer is the same on every machine:
 * the branch and bound's give-up point, in steps times backward statements
 * (keep() costs one per statement; about 0.3 s), and the plans it
 * schedules at most; the runs of statements live_bound solves; the
 * candidate plans scheduled before it (frontiers' plans). */
#define ARENA_WORK 400000000L
#define ARENA_LEAVES 400
#define BOUND_RUNS 24
#define IDLE_RUNS 8         /* runs in a row that do not raise the bound */
#define CANDIDATES 1024

typedef struct {
    const Graph *g;
    Remat *r;
    double max_arena, want;
    size_t fwd_arena;       /* the forward-only step's, the same every plan */
    int nb;                 /* backward statements */
    int *node;              /* per backward statement: its node */
    int *first;             /* per tensor: first_needs()'s */
    int *lo, *own;          /* per tensor: the first backward statement
                             * reading its buffer (-1: none), reading it
                             * itself (INT_MAX: none) */
    double *bytes;          /* per tensor, aligned */
    double *fixed;          /* per backward statement: held by every plan */
    double *room;           /* per backward statement: max_arena - fixed -
                             * the saved buffers the walk has counted */
    long leaves, searched;  /* plans planned; by the branch and bound */
    double least;           /* the smallest arena planned */
    int failed, measure;
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
    for (int i = 0; i < s->nvalues; i++) {
        const Value *v = &s->values[i];
        if ((v->kind == V_GRAD || v->kind == V_SCRATCH) && v->view == VIEW_NONE) {
            live[v->def] += aligned((double)v->bytes);
            live[v->last + 1] -= aligned((double)v->bytes);
        }
    }
    running_sum(live, s->nstmts);
    a->nb = 0;
    for (int i = 0; i < s->nstmts; i++)
        if (s->stmts[i].kind == S_BACKWARD) {
            a->node[a->nb] = s->stmts[i].node;
            at[a->nb++] = live[i];
        }
}

/* Tensor t read by backward statement j: its first reader, and the span
 * over which its buffer (its storage's) is read. */
static void read_at(Arena *a, int t, int j, int *lo, int *hi)
{
    int st = a->r->storage[t];
    if (a->own[t] == INT_MAX)
        a->own[t] = j;
    if (a->g->tensors[st].kind != T_ACT)
        return;             /* a view of the caller's memory */
    if (lo[st] < 0)
        lo[st] = j;
    hi[st] = j;
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
    int *need = ctx_alloc(c, (size_t)g->ntensors * sizeof *need);
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

/* The bytes every plan holds at each backward statement (the top). */
static void fixed_profile(Ctx *c, Arena *a, const Schedule *s)
{
    const Graph *g = a->g;
    int nt = g->ntensors;
    int *lo = a->lo = ctx_alloc(c, (size_t)nt * sizeof(int));
    int *hi = ctx_alloc(c, (size_t)nt * sizeof(int));
    a->own = ctx_alloc(c, (size_t)nt * sizeof(int));
    a->bytes = ctx_alloc(c, (size_t)nt * sizeof(double));
    for (int t = 0; t < nt; t++) {
        lo[t] = hi[t] = -1;
        a->own[t] = INT_MAX;
        a->bytes[t] = aligned((double)g->tensors[t].numel * sizeof(float));
    }
    a->node = ctx_alloc(c, ((size_t)s->nstmts + 1) * sizeof(int));
    a->fixed = zeros(c, s->nstmts);
    backward_buffers(c, a, s, a->fixed);
    for (int j = 0; j < a->nb; j++) {
        const Node *n = &g->nodes[a->node[j]];
        unsigned reads = node_backward_reads(g, n);
        for (int i = 0; i < n->nin; i++)
            if ((reads & NEED_IN(i)) && g->tensors[n->in[i]].kind == T_ACT)
                read_at(a, n->in[i], j, lo, hi);
        for (int o = 0; o < n->nout; o++)
            if (reads & NEED_OUT(o))
                read_at(a, n->out[o], j, lo, hi);
    }
    double *span = zeros(c, a->nb);
    for (int t = 0; t < nt; t++)
        if (lo[t] >= 0) {
            span[lo[t]] += a->bytes[t];
            span[hi[t] + 1] -= a->bytes[t];
        }
    running_sum(span, a->nb);
    a->room = zeros(c, a->nb);
    for (int j = 0; j < a->nb; j++) {
        a->fixed[j] += span[j];
        a->room[j] = a->max_arena - a->fixed[j];
    }
    first_needs(c, a);
}

/* ---- the walk's hooks ---------------------------------------------------- */

/* The plan saves t, a buffer of its own: live before its first reader. */
static int keep(void *ctx, int t, int sign)
{
    Arena *a = ctx;
    double b = sign * a->bytes[t];
    int fits = 1;
    for (int j = 0; j < a->first[t]; j++) {
        a->room[j] -= b;
        fits &= a->room[j] >= 0;
    }
    return fits;
}

/* A whole plan: scheduled and, unless its peak of live bytes already
 * exceeds the bound (the planned arena is at least the peak), planned; it
 * fits or not. a->measure: planned whatever its peak (a->least is the
 * smallest arena planned). */
static int leaf(void *ctx, const char *recompute)
{
    Arena *a = ctx;
    Ctx scratch;
    ctx_init(&scratch);
    remat_apply(a->g, a->r, recompute);
    Schedule s;
    memset(&s, 0, sizeof s);
    int fits = 0;
    if (schedule_build(&scratch, a->g, a->r, SCHED_TRAIN, &s)) {
        a->failed = 1;
    } else {
        double least_room = HUGE_VAL, peak = (double)schedule_peak(&scratch, &s);
        for (int j = 0; j < a->nb; j++)
            least_room = a->room[j] < least_room ? a->room[j] : least_room;
        assert((a->nb == 0 || a->max_arena - least_room <= peak) &&
               "the bound is below every plan's peak");
        /* (the forward's own arena fits: check_fixed) */
        if ((a->measure || peak <= a->max_arena) &&
            plan_arena(&scratch, &s) == 0) {
            double arena = (double)(s.arena_bytes > a->fwd_arena
                                        ? s.arena_bytes : a->fwd_arena);
            a->least = arena < a->least ? arena : a->least;
            fits = arena <= a->max_arena;
        }
    }
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
        if (leaf(a, f->plans[i].recompute) && a->r->saved_bytes <= a->want) {
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

/* The branch and bound's leaf: leaf(), until it has planned ARENA_LEAVES
 * plans; then every plan is refused and the answer is not proven. */
static int search_leaf(void *ctx, const char *recompute)
{
    Arena *a = ctx;
    return ++a->searched <= ARENA_LEAVES && leaf(a, recompute);
}

/* ---- the search ---------------------------------------------------------- */

/* The least arena of the frontier's plans, for a message. */
static double least_on_frontier(Arena *a, const Frontier *f)
{
    a->measure = 1;
    for (int i = 0; i < f->n; i++)
        leaf(a, f->plans[i].recompute);
    return a->least;
}

static int too_small(Ctx *c, Arena *a, const Frontier *f, const char *why)
{
    double least = least_on_frontier(a, f);
    return ctx_error(c, a->g->file, 0, "max-arena %.0f bytes cannot be met: "
                     "%s%s", a->max_arena, why, least == HUGE_VAL ? ""
                     : ctx_printf(c, "; the least arena of the saved-bytes "
                                  "frontier's plans is %.0f bytes", least));
}

/* A bound below what every plan holds: say where. */
static int check_fixed(Ctx *c, Arena *a, const Frontier *f)
{
    if ((double)a->fwd_arena > a->max_arena)
        return too_small(c, a, f, ctx_printf(c, "the forward alone needs %zu "
                                             "bytes", a->fwd_arena));
    int worst = -1;
    for (int j = 0; j < a->nb; j++)
        if (a->room[j] < 0 && (worst < 0 || a->room[j] < a->room[worst]))
            worst = j;
    if (worst < 0)
        return 0;
    return too_small(c, a, f, ctx_printf(c, "at the backward of node '%s' "
                                         "every plan holds at least %.0f "
                                         "bytes", a->g->nodes[a->node[worst]].name,
                                         a->fixed[worst]));
}

/* The profile from the policy's own plan (any plan gives the same). */
static int arena_init(Ctx *c, const Graph *g, Remat *r, double max_arena,
                      const Frontier *f, Arena *a)
{
    memset(a, 0, sizeof *a);
    a->g = g;
    a->r = r;
    a->max_arena = max_arena;
    a->least = HUGE_VAL;
    Schedule s, fwd;
    memset(&s, 0, sizeof s);
    memset(&fwd, 0, sizeof fwd);
    remat_apply(g, r, NULL);
    if (schedule_build(c, g, r, SCHED_TRAIN, &s) ||
        schedule_build(c, g, r, SCHED_FORWARD, &fwd) || plan_arena(c, &fwd))
        return -1;
    a->fwd_arena = fwd.arena_bytes;
    fixed_profile(c, a, &s);
    return check_fixed(c, a, f);
}

/* The saved-bytes frontier's least cost within cap, a bound too (every
 * plan that fits saves at most max-arena bytes); 0 when it is not exact,
 * HUGE_VAL when no plan is within cap. */
static double frontier_bound(const Frontier *f, double cap)
{
    if (!f->proven || f->overflow)
        return 0;
    for (int i = f->n - 1; i >= 0; i--)
        if (f->plans[i].bytes <= cap)
            return f->plans[i].cost;
    return HUGE_VAL;
}

/* The frontier's plan of least cost that fits when planned, among the
 * first CANDIDATES / 2 tried. */
static Plan first_fit(Arena *a, const Frontier *f)
{
    for (int i = f->n - 1; i >= 0 && a->leaves < CANDIDATES / 2; i--)
        if (leaf(a, f->plans[i].recompute))
            return f->plans[i];
    return (Plan){HUGE_VAL, HUGE_VAL, NULL};
}

int fit_arena(Ctx *c, const Graph *g, const Policy *p, Remat *r,
              const Frontier *f, double want, double max_arena,
              Compiled *out, int *proven, double *bound)
{
    Arena a;
    if (arena_init(c, g, r, max_arena, f, &a))
        return -1;
    double cap = want < max_arena ? want : max_arena;
    a.want = want;
    Plan best = first_fit(&a, f);
    double least = live_bound(c, &a, frontier_bound(f, cap), &best);
    assert((least < HUGE_VAL || !best.recompute) && "a bound above a plan");
    *proven = least == HUGE_VAL || (best.recompute && best.cost <= least);
    SearchHooks h = {keep, search_leaf, &a, ARENA_WORK / (a.nb + 1)};
    if (!*proven)
        search_hooked(c, g, r, cap, &h, &best, proven);
    *proven = *proven && a.searched <= ARENA_LEAVES;
    *bound = least;
    if (a.failed)
        return -1;
    if (best.recompute == NULL)
        return too_small(c, &a, f, *proven ? "no plan within the budget fits"
                                           : "no plan found fits (the search "
                                             "gave up)");
    remat_apply(g, r, best.recompute);
    return compile_decided(c, g, p, r, out);
}
