/*
 * driver.c: the stages chained, from a graph file and a policy to the two
 * schedules with their arena plans, which every command starts from.
 */
#include "remat.h"

int compile_graph(Ctx *c, const char *file, const char *policy, Compiled *m)
{
    Graph *g;
    Policy *p;
    if (policy_load(c, policy, &p) || parse_graph(c, file, &g))
        return -1;
    return compile_parsed(c, g, p, m);
}

int compile_parsed(Ctx *c, Graph *g, const Policy *p, Compiled *m)
{
    Remat *r = ctx_alloc(c, sizeof *r);
    Schedule *fwd = ctx_alloc(c, sizeof *fwd);
    Schedule *train = ctx_alloc(c, sizeof *train);
    if (infer_shapes(c, g) || autodiff(c, g) || remat_decide(c, g, p, r) ||
        schedule_build(c, g, r, 0, fwd) || plan_arena(c, fwd) ||
        schedule_build(c, g, r, 1, train) || plan_arena(c, train))
        return -1;
    m->g = g;
    m->policy = p;
    m->remat = r;
    m->fwd = fwd;
    m->train = train;
    return 0;
}
