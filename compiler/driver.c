/*
 * driver.c: the stages chained, from a graph file and a policy (and a
 * memory budget, which solve.c meets) to the schedules with their arena
 * plans, which every command starts from: the forward, the train step and
 * the fused train step. A forward-only graph (no loss)
 * has one schedule, the forward, which Compiled.train then points to too.
 *
 * It is also where the choices between front ends are made, so that no
 * stage calls back up the pipeline: which front end reads a graph file (by
 * its content), whether a policy is a built-in or a file, and, with a
 * budget, scheduling the plan the solver decided.
 */
#include "remat.h"

#include <math.h>
#include <string.h>

/* An ONNX model holds its weights: up to 2 GiB, protobuf's own limit; any
 * other file stops at MAX_FILE_BYTES, as soon as that much is read. */
int read_graph_file(Ctx *c, const char *file, char **data, size_t *len)
{
    return read_whole_file(c, file, (size_t)2 << 30, onnx_is_model, data, len);
}

/* The one place that tells the formats apart, by content: XML to parse.c,
 * an ONNX model through the importer (onnx.c) and then parse.c. */
int load_graph(Ctx *c, const char *file, Graph **out)
{
    char *data;
    size_t len;
    if (read_graph_file(c, file, &data, &len))
        return -1;
    if (!onnx_is_model(data, len))
        return parse_graph_memory(c, file, data, len, out);
    Imported im;
    ImportOptions opt = {NULL, 1};
    int rc = onnx_import(c, file, data, len, &opt, &im);
    if (rc > 0)     /* not ONNX after all */
        return parse_graph_memory(c, file, data, len, out);
    if (rc < 0)
        return -1;
    return parse_graph_imported(c, file, &im, out);
}

/* A built-in policy's name, else a policy file, which the XML parser reads. */
int policy_load(Ctx *c, const char *name, Policy **out)
{
    *out = policy_builtin(c, name);
    if (*out)
        return 0;
    if (!strchr(name, '/') && !strstr(name, ".xml"))
        return ctx_error(c, name, 0, "unknown policy%s; use none, full, sac, "
                         "sac-aggressive or a policy file (FILE.xml)",
                         did_you_mean(c, name, builtin_policies, 4));
    Policy *p = ctx_alloc(c, sizeof *p);
    if (parse_policy(c, name, p))
        return -1;
    *out = p;
    return 0;
}

int compile_graph(Ctx *c, const char *file, const char *policy,
                  const Budget *budget, const char *const *freeze,
                  Compiled *m)
{
    Graph *g;
    Policy *p;
    if (policy_load(c, policy ? policy : "sac", &p) ||
        load_graph(c, file, &g) || freeze_params(c, g, freeze) ||
        fold_batch_norms(c, g))
        return -1;
    if (!policy)        /* a budget without a policy: matmuls may go too */
        p = policy_soften(c, p);
    return compile_parsed(c, g, p, budget, m);
}

/* "params P, optimizer O, grads G, arena A, io I" */
static const char *ram_terms(Ctx *c, const Ram *r)
{
    return ctx_printf(c, "params %.0f, optimizer %.0f, grads %.0f, arena "
                      "%.0f, io %.0f", r->params, r->optimizer, r->grads,
                      r->arena, r->io);
}

/* Compiles under b; the plan's arena, or HUGE_VAL when none fits (then
 * *proven: the refusal is a proof, the search did not give up). */
static double arena_at(const Graph *g, const Policy *p, const Budget *b,
                       int *proven)
{
    Ctx x;
    Compiled m;
    Ram r;
    double arena = HUGE_VAL;
    ctx_init(&x);
    if (compile_budget(&x, g, p, b, &m) == 0) {
        m.optim = b->optim;
        ram_of(&m, &r);
        arena = r.arena;
    } else {
        *proven = strstr(x.err, "gave up") == NULL &&
                  strstr(x.err, "not proven") == NULL;
    }
    ctx_free(&x);
    return arena;
}

/* The least arena of any plan: from the plan of least recompute, a
 * bisection of the bound, each probe the least recompute within it,
 * until the bound a byte below the least arena found has no plan (one
 * step at a time, as `pareto --by arena` walks, took minutes on a
 * 32-step LSTM: a hundred compiles). A probe's plan may fit below a bound
 * an earlier probe failed (the search is not monotone in the bound);
 * the bisection then goes on below it. *proven: that last refusal was
 * proven (no plan fits, the search did not give up). */
static double least_arena(const Graph *g, const Policy *p,
                          const Budget *budget, int *proven)
{
    Budget b = *budget;     /* within --budget, if given */
    b.max_ram = 0;
    b.max_arena = 0;        /* first the least recompute, unbounded */
    *proven = 0;
    double least = arena_at(g, p, &b, proven), fail = 0;
    for (int k = 0; k < 1000 && least != HUGE_VAL && fail < least - 1; k++) {
        /* halves in whole arena alignments; the last probe a byte below */
        double mid = floor((fail + least) / 2 / ARENA_ALIGN) * ARENA_ALIGN;
        b.max_arena = mid > fail && mid < least - 1 ? mid : least - 1;
        const double a = arena_at(g, p, &b, proven);
        if (a == HUGE_VAL) {
            fail = b.max_arena;
        } else {
            least = a;
            if (fail >= least) {
                fail = 0;
                *proven = 0;
            }
        }
    }
    return least;
}

static int has_conv(const Graph *g)
{
    for (int k = 0; k < g->nnodes; k++)
        if (g->nodes[k].op == OP_CONV)
            return 1;
    return 0;
}

/* The bounds on a Conv's im2col columns --max-ram tries, in bytes, when
 * no plan fits with whole columns and --conv-scratch was not given: each
 * trades a little speed (more, smaller GEMMs) for RAM; the last is one
 * row of columns per lane, the least there is. */
static const long scratch_steps[] = {65536, 16384, 4096, 1};

/* --max-ram as --max-arena of what the fixed terms leave; with --fused
 * the bound is on the fused step's arena. Where no plan fits with a
 * Conv's whole columns, smaller column bounds (Graph.conv_scratch) are
 * tried in turn, the first that fits kept: first among the plans that
 * recompute each tensor once, then again letting a plan rebuild at each
 * use (a smaller scratch costs a little speed, rebuilding much more
 * recompute). No plan fits: one line with the least RAM and its terms,
 * at the least column bound tried. */
static int compile_max_ram(Ctx *c, Graph *g, const Policy *p,
                           const Budget *budget, Compiled *m)
{
    Budget b = *budget;
    Ram r;
    b.keep_compact = 1;     /* every plan here is an arena bound's */
    ram_fixed(g, &b.optim, &r);
    b.max_arena = b.max_ram - ram_total(&r);
    b.fused_arena = b.optim.fused && graph_trains(g);
    long given = g->conv_scratch;
    int steps = given == 0 && has_conv(g)
                    ? (int)(sizeof scratch_steps / sizeof *scratch_steps) : 0;
    for (int pass = steps ? 0 : 1; pass < 2; pass++) {
        b.no_rebuild = pass == 0 || budget->no_rebuild;
        g->conv_scratch = given;
        if (b.max_arena >= 1 && compile_budget(c, g, p, &b, m) == 0)
            return 0;
        for (int i = 0; i < steps; i++) {
            g->conv_scratch = scratch_steps[i];
            if (b.max_arena >= 1 && compile_budget(c, g, p, &b, m) == 0)
                return 0;
        }
    }
    int proven;
    r.arena = least_arena(g, p, &b, &proven);
    if (r.arena == HUGE_VAL) {  /* no plan at all (a --budget too low):
                                 * the solver's own message */
        b.max_arena = 0;
        return compile_budget(c, g, p, &b, m) ? -1 : ctx_error(c, g->file, 0,
            "max-ram %.0f bytes cannot be met", b.max_ram);
    }
    return ctx_error(c, g->file, 0, "max-ram %.0f bytes cannot be met: %s "
                     "%.0f bytes: %s%s", b.max_ram, proven ? "needs at least"
                     : "the least found (not proven) is",
                     ram_total(&r), ram_terms(c, &r),
                     steps ? " (convolution columns a row at a time)" : "");
}

int analyze_graph(Ctx *c, Graph *g)
{
    return infer_shapes(c, g) || fuse_graph(c, g) || autodiff(c, g) ? -1 : 0;
}

int compile_parsed(Ctx *c, Graph *g, const Policy *p, const Budget *budget,
                   Compiled *m)
{
    if (budget) {
        g->conv_scratch = (long)budget->conv_scratch;
        g->has_seed = budget->has_seed;
        g->seed = budget->seed;
        if (budget->name)
            g->name = budget->name;
    }
    if (analyze_graph(c, g))
        return -1;
    int rc;
    if (budget && budget->max_ram > 0)
        rc = compile_max_ram(c, g, p, budget, m);
    else if (budget && (budget->kind != BUDGET_NONE || budget->max_arena > 0))
        rc = compile_budget(c, g, p, budget, m);
    else {
        Remat *r = ctx_alloc(c, sizeof *r);
        if (remat_decide(c, g, p, r))
            return -1;
        if (budget && budget->rates)    /* the report's recompute seconds */
            r->rates = budget->rates;
        rc = compile_decided(c, g, p, r, m);
    }
    if (rc == 0 && budget) {
        m->optim = budget->optim;
        m->max_ram = budget->max_ram;
    }
    return rc;
}

int compile_budget(Ctx *c, const Graph *g, const Policy *p, const Budget *b,
                   Compiled *m)
{
    Remat *r;
    if (remat_budget(c, g, p, b, &r))
        return -1;
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
    m->optim = (Optim){0, 0, 0};    /* the trainer's default */
    m->max_ram = 0;
    m->g = g;
    m->policy = p;
    m->remat = r;
    m->fwd = fwd;
    m->train = train;
    m->fused = fused;
    return 0;
}
