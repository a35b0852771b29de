/*
 * driver.c: the stages chained, from a graph file and a policy (and a
 * memory budget, which solve.c meets) to the schedules with their arena
 * plans, which every command starts from: the forward, the train step and
 * the fused train step. A forward-only graph (no loss)
 * has one schedule, the forward, which Compiled.train then points to too.
 */
#include "remat.h"

int compile_graph(Ctx *c, const char *file, const char *policy,
                  const Budget *budget, const char *const *freeze,
                  Compiled *m)
{
    Graph *g;
    Policy *p;
    if (policy_load(c, policy ? policy : "sac", &p) ||
        parse_graph(c, file, &g) || freeze_params(c, g, freeze))
        return -1;
    if (!policy)        /* a budget without a policy: matmuls may go too */
        p = policy_soften(c, p);
    return compile_parsed(c, g, p, budget, m);
}

int compile_parsed(Ctx *c, Graph *g, const Policy *p, const Budget *budget,
                   Compiled *m)
{
    if (infer_shapes(c, g) || autodiff(c, g))
        return -1;
    if (budget && (budget->kind != BUDGET_NONE || budget->max_arena > 0))
        return remat_budget(c, g, p, budget, m);
    Remat *r = ctx_alloc(c, sizeof *r);
    if (remat_decide(c, g, p, r))
        return -1;
    if (budget && budget->rates)    /* the report's recompute seconds */
        r->rates = budget->rates;
    return compile_decided(c, g, p, r, m);
}

int compile_decided(Ctx *c, const Graph *g, const Policy *p, Remat *r,
                    Compiled *m)
{
    Schedule *fwd = ctx_alloc(c, sizeof *fwd);
    Schedule *train = fwd;      /* forward only: the one schedule */
    Schedule *fused = NULL;
    if (schedule_build(c, g, r, SCHED_FORWARD, fwd) ||
        plan_arena(c, fwd, r->max_arena))
        return -1;
    if (graph_trains(g)) {
        train = ctx_alloc(c, sizeof *train);
        fused = ctx_alloc(c, sizeof *fused);
        if (schedule_build(c, g, r, SCHED_TRAIN, train) ||
            plan_arena(c, train, r->max_arena) ||
            schedule_build(c, g, r, SCHED_FUSED, fused) ||
            plan_arena(c, fused, r->max_arena))
            return -1;
    }
    m->g = g;
    m->policy = p;
    m->remat = r;
    m->fwd = fwd;
    m->train = train;
    m->fused = fused;
    return 0;
}
