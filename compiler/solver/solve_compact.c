/*
 * solve_compact.c: under an arena bound, plans that rebuild a compact
 * form instead of keeping it.
 *
 * The arena solver (solve_arena.c) chooses among plans that keep every
 * compact form (a Relu's 1-bit mask, a MaxPool's window winners): its
 * per-statement bounds and its walk count the forms as kept. A form whose
 * tensor is free and whose forms are all its producer's (what
 * remat_classify_budget makes a choice, Remat.compact_free) may instead
 * be rebuilt with its tensor just before the backward that reads it: no
 * bytes from the forward to there, for the recompute. Where the arena is
 * tight that can be the only plan that fits, or a cheaper one (the bytes
 * a mask frees let something dearer be kept).
 *
 * So after the arena solver has answered (or refused), the saved-bytes
 * frontier with that choice is tried, cheapest plan first, each scheduled
 * and planned, while it recomputes less than the answer: the first that
 * fits is the answer. What is proven of it comes from two bounds that
 * hold for every plan, whatever it does with the forms: every saved
 * buffer, kept forms included, is live where the backward starts, so no
 * plan that fits recomputes less than the frontier's least within the
 * arena; and a plan that rebuilds a form recomputes at least the cheapest
 * form's rebuild. With the arena solver's own bound on the plans keeping
 * every form, their least is a bound on every plan; an answer that meets
 * it is proven. One that does not, though the arena solver proved it
 * among the plans keeping every form, says so (Remat.forms_kept).
 */
#include "solver.h"

#include <math.h>
#include <string.h>

/* Frontier plans scheduled and planned at most. */
#define COMPACT_CANDIDATES 256

typedef struct {
    Ctx *c;
    const Graph *g;
    double max_arena;
    int step;
    size_t fwd_arena;       /* the forward-only step's, the same every plan */
} Fit;

/* The arena of the forward-only step (every plan's), -1 on failure. */
static int forward_arena(Fit *x, Remat *r)
{
    Ctx scratch;
    ctx_init(&scratch);
    Schedule s;
    memset(&s, 0, sizeof s);
    remat_apply(x->g, r, NULL);
    int rc = schedule_build(&scratch, x->g, r, SCHED_FORWARD, &s) ||
             plan_arena(&scratch, &s, x->max_arena) ? -1 : 0;
    x->fwd_arena = s.arena_bytes;
    ctx_free(&scratch);
    return rc;
}

/* r's plan `recompute` scheduled and planned: 1 when it fits, 0 when not,
 * -1 on failure; *cost, its recompute. */
static int fits(Fit *x, Remat *r, const char *recompute, double *cost)
{
    Ctx scratch;
    ctx_init(&scratch);
    Schedule s;
    memset(&s, 0, sizeof s);
    remat_apply(x->g, r, recompute);
    int rc = -1;
    if (schedule_build(&scratch, x->g, r, x->step, &s) == 0) {
        *cost = s.recompute_cost;
        rc = (double)schedule_peak(&scratch, &s) <= x->max_arena &&
             plan_arena(&scratch, &s, x->max_arena) == 0 &&
             (double)s.arena_bytes <= x->max_arena &&
             (double)x->fwd_arena <= x->max_arena;
    }
    ctx_free(&scratch);
    return rc;
}

/* The recompute of the answer the arena solver gave. */
static int answer_cost(Fit *x, const Remat *r, double *cost)
{
    Ctx scratch;
    ctx_init(&scratch);
    Schedule s;
    memset(&s, 0, sizeof s);
    int rc = schedule_build(&scratch, x->g, r, x->step, &s);
    *cost = s.recompute_cost;
    ctx_free(&scratch);
    return rc;
}

/* The least a plan rebuilding one of r's free forms recomputes: that
 * form's tensor rebuilt once (HUGE_VAL: r has no such form). */
static double cheapest_rebuild(const Graph *g, const Remat *r)
{
    double least = HUGE_VAL;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            double cost = output_cost(r->rates, g, n, o);
            if (r->compact_free[t] && !r->needed[t] && cost < least)
                least = cost;
        }
    }
    return least;
}

static double lesser(double a, double b) { return a < b ? a : b; }
static double greater(double a, double b) { return a > b ? a : b; }

int compact_fit(Ctx *c, const Graph *g, const Policy *p, const Budget *b,
                int refusal_proven, Remat **answer)
{
    Remat *r = ctx_alloc(c, sizeof *r);
    if (remat_classify_budget(c, g, p, r))
        return -1;
    if (b->rates)
        r->rates = b->rates;
    r->max_arena = b->max_arena;    /* fits() schedules as the driver will */
    double rebuild = cheapest_rebuild(g, r);
    if (rebuild == HUGE_VAL)
        return 0;                   /* no form is a choice */
    Fit x = {c, g, b->max_arena, b->fused_arena ? SCHED_FUSED : SCHED_TRAIN, 0};
    double want = budget_bytes(c, g, b) - (double)r->compact_fixed;
    double cap = lesser(want, b->max_arena - (double)r->compact_fixed);
    Frontier f;
    if (forward_arena(&x, r) || solve_frontier(c, g, r, want, &f))
        return -1;
    /* the arena solver's answer and what it proved of the plans keeping
     * every form: its cost where proven, its bound otherwise */
    Remat *kept = *answer;
    double cost = HUGE_VAL, kept_bound = refusal_proven ? HUGE_VAL : 0;
    if (kept && answer_cost(&x, kept, &cost))
        return -1;
    if (kept)
        kept_bound = kept->proven ? cost : kept->floor;
    double low = frontier_bound(&f, cap);
    double every = lesser(greater(kept_bound, low), greater(low, rebuild));
    int tried = 0;
    for (int i = f.n - 1; i >= 0 && f.plans[i].cost < cost &&
                          tried < COMPACT_CANDIDATES; i--) {
        if (f.plans[i].bytes > cap)
            continue;
        double got;
        int ok = fits(&x, r, f.plans[i].recompute, &got);
        tried++;
        if (ok < 0)
            return -1;
        if (!ok || got >= cost)
            continue;
        remat_apply(g, r, f.plans[i].recompute);
        r->budgeted = 1;
        r->budget_bytes = budget_bytes(c, g, b);
        r->proven = got <= every;
        r->floor = every;
        for (int t = 0; t < g->ntensors; t++)
            r->nfree += r->free[t] && r->keep[t] != KEEP_NONE;
        *answer = r;
        return 0;
    }
    /* the answer stands; proven among the plans keeping every form, it
     * is proven among all where no plan rebuilding one can beat it */
    if (kept && kept->proven && cost > every) {
        kept->proven = 0;
        kept->forms_kept = 1;
        kept->floor = every;
    }
    return 0;
}
