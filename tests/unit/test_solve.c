/* The budget solver (compiler/solver/solve.c): answers worked out by hand, and
 * exhaustive search over every plan of random small graphs. */
#define _DEFAULT_SOURCE     /* popen: the generator scripts */
#include "testutil.h"
#include "solver/solver.h"

#include <math.h>

/* One FLOP a picosecond on every op and bytes free: a plan's cost
 * (cost.c) is its recompute FLOPs, which the answers worked by hand count. */
static const Rates flops_only = {1e12, 1e12, HUGE_VAL};

/* Compiles body under the default budget policy (sac, must_save softened),
 * pricing recompute in FLOPs alone. */
static Compiled budgeted(Ctx *c, const char *body, BudgetKind kind, double v)
{
    const char *xml = model_xml(c, body);
    Graph *g = NULL;
    Policy *p = NULL;
    Budget b = {kind, v, 0, &flops_only, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
    Compiled m;
    int rc = policy_load(c, "sac", &p) ||
             parse_graph_memory(c, "t.xml", xml, strlen(xml), &g) ||
             compile_parsed(c, g, policy_soften(c, p), &b, &m);
    ck_assert_msg(rc == 0, "compile failed: %s", c->err);
    return m;
}

/* x (2x4) through five (MatMul, Tanh) pairs of widths 4, 8, 2, 6, 4; the
 * loss is ReduceSum(a5), whose backward reads nothing.
 *
 * Worked by hand. Every a_i is read by a backward (Tanh's reads its output,
 * the next MatMul's weight gradient its input); no h_i is. Pair i's a_i is
 * either saved (8 w_i bytes: 2 rows of w_i floats) or recomputed with its
 * h_i (saving h_i instead costs the same bytes and Tanh's FLOPs, so it never
 * wins), which costs MatMul 2*2*w_{i-1}*w_i + Tanh 4*2*w_i FLOPs; a_{i-1}
 * is needed anyway, so the pairs are independent:
 *   pair   1    2    3    4    5
 *   bytes  32   64   16   48   32   (all: 192)
 *   flops  96   192  80   96   128  (all: 592)
 * Least recompute within B bytes = 592 - the most FLOPs a set of pairs of at
 * most B bytes saves (a knapsack):
 *   B = 0    save none            recompute 592
 *   B = 64   save {1, 5}  (224)   recompute 368  ({3,5}: 208, {2}: 192)
 *   B = 100  save {2, 5}  (320)   recompute 272  ({1,3,5}, {3,4,5}: 304)
 *   B = 150  all but 4    (496)   recompute 96   (all but 2: 192; 1,3: 176)
 *   B = 192  save all             recompute 0
 * Full checkpointing saves nothing here (no blocks: the graph is one block
 * whose inputs are x and the weights), none saves 192 bytes, so a fraction
 * f is 192 f bytes. */
static const char *five_pairs(Ctx *c)
{
    static const int w[6] = {4, 4, 8, 2, 6, 4};
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "<input name='x' shape='2 4'/>");
    for (int i = 1; i <= 5; i++)
        buf_printf(&b, "<initializer name='W%d' shape='%d %d' init='uniform'/>"
                   "<node name='mm%d' op='MatMul' in='%s W%d' out='h%d'/>"
                   "<node name='t%d' op='Tanh' in='h%d' out='a%d'/>",
                   i, w[i - 1], w[i], i, i == 1 ? "x" : ctx_printf(c, "a%d", i - 1),
                   i, i, i, i, i);
    buf_printf(&b, "<node name='s' op='ReduceSum' in='a5' out='loss' keepdims='0'/>"
                   "<output name='loss'/>");
    return b.data;
}

static void expect_saves(const Compiled *m, const char *saved, double flops)
{
    Summary s;
    summarize(m, &s);
    ck_assert_msg(s.recompute_flops == flops, "recompute %.0f, want %.0f",
                  s.recompute_flops, flops);
    for (int i = 1; i <= 5; i++) {
        char a[4], h[4];
        snprintf(a, sizeof a, "a%d", i);
        snprintf(h, sizeof h, "h%d", i);
        Keep want = strchr(saved, '0' + i) ? KEEP_SAVE : KEEP_RECOMPUTE;
        ck_assert_msg(keep_of(m, a) == want, "%s", a);
        ck_assert_int_ne(keep_of(m, h), KEEP_SAVE);
    }
    ck_assert(m->remat->proven);
}

START_TEST(five_pairs_by_hand)
{
    static const struct { double bytes; const char *saved; double flops; } cases[] = {
        {1, "", 592}, {64, "15", 368}, {100, "25", 272}, {150, "1235", 96},
        {192, "12345", 0}, {1e9, "12345", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Ctx c;
        ctx_init(&c);
        Compiled m = budgeted(&c, five_pairs(&c), BUDGET_BYTES, cases[i].bytes);
        expect_saves(&m, cases[i].saved, cases[i].flops);
        ctx_free(&c);
    }
    /* fractions of 192 bytes: 0.5 is 96, where {2, 5} (96 bytes) fits */
    static const struct { double f; const char *saved; double flops; } frac[] = {
        {0, "", 592}, {0.5, "25", 272}, {1, "12345", 0},
    };
    for (size_t i = 0; i < sizeof frac / sizeof *frac; i++) {
        Ctx c;
        ctx_init(&c);
        Compiled m = budgeted(&c, five_pairs(&c), BUDGET_FRACTION, frac[i].f);
        expect_saves(&m, frac[i].saved, frac[i].flops);
        ctx_free(&c);
    }
}
END_TEST

/* ---- exhaustive search on random graphs ------------------------------------ */

static unsigned long rng_state;

static int rnd(int n)
{
    rng_state = rng_state * 6364136223846793005UL + 1442695040888963407UL;
    return (int)((rng_state >> 33) % (unsigned long)n);
}

/* A random graph of k nodes over 3x4 activations: MatMuls by 4x4 weights,
 * pointwise ops, Flatten (a view: no buffer of its own), binary ops of two
 * earlier tensors, some nodes forced by a
 * remat attribute, consecutive runs of nodes in blocks; every tensor no
 * node reads is summed into the loss. */
static const char *random_graph(Ctx *c, int k)
{
    static const char *const unary[] = {"Tanh", "Relu", "Sigmoid", "Gelu", "Neg",
                                        "Flatten", "Flatten"};
    static const char *const binary[] = {"Add", "Mul", "Sub"};
    static const char *const forced[] = {"", "", "", "", " remat='must_save'",
                                         " remat='must_recompute'"};
    Buf b, w;
    buf_init(&b, c);
    buf_init(&w, c);
    buf_printf(&w, "<input name='x' shape='3 4'/>");
    char *read = ctx_alloc(c, (size_t)k + 1);
    int block = -1, open = 0;
    for (int i = 0; i < k; i++) {
        if (open && rnd(3) == 0) {
            buf_printf(&b, "</block>");
            open = 0;
        } else if (!open && rnd(3) == 0) {
            buf_printf(&b, "<block name='B%d'>", ++block);
            open = 1;
        }
        int a = rnd(i + 1), op = rnd(4);
        const char *in_a = a ? ctx_printf(c, "t%d", a - 1) : "x";
        read[a] = 1;
        const char *f = forced[rnd(6)];
        if (op == 0) {
            buf_printf(&w, "<initializer name='w%d' shape='4 4' init='uniform'/>", i);
            buf_printf(&b, "<node name='n%d' op='MatMul' in='%s w%d' out='t%d'%s/>",
                       i, in_a, i, i, f);
        } else if (op == 1) {
            int d = rnd(i + 1);
            read[d] = 1;
            buf_printf(&b, "<node name='n%d' op='%s' in='%s %s' out='t%d'%s/>", i,
                       binary[rnd(3)], in_a, d ? ctx_printf(c, "t%d", d - 1) : "x",
                       i, f);
        } else {
            buf_printf(&b, "<node name='n%d' op='%s' in='%s' out='t%d'%s/>", i,
                       unary[rnd(7)], in_a, i, f);
        }
    }
    if (open)
        buf_printf(&b, "</block>");
    const char *acc = NULL;
    for (int i = 0; i < k; i++) {
        if (read[i + 1])
            continue;
        const char *t = ctx_printf(c, "t%d", i);
        if (acc) {
            buf_printf(&b, "<node name='s%d' op='Add' in='%s %s' out='u%d'/>", i,
                       acc, t, i);
            acc = ctx_printf(c, "u%d", i);
        } else {
            acc = t;
        }
    }
    buf_printf(&b, "<node name='loss' op='ReduceSum' in='%s' out='l' "
               "keepdims='0'/><output name='l'/>", acc);
    return ctx_printf(c, "%s%s", w.data, b.data);
}

/* A plan's saved bytes as the solver counts them (less the compact forms
 * every plan keeps, Remat.compact_fixed) and recompute cost: picoseconds at the Remat's
 * rates (the built-in ones, bytes priced too: the solver's objective is
 * time, cost.c), as its schedule counts them. */
typedef struct {
    double bytes, cost;
} Cost;

/* A plan's saved bytes, recompute and planned arena; the fused step's
 * arena, at least the forward's (what --max-ram --fused bounds); closed:
 * it keeps every tensor the structure saves (no block boundary rebuilt). */
typedef struct {
    double bytes, cost, arena, fused;
    int closed;
} Fit;

/* Every plan of g's free decisions (tensor indices in free), scheduled,
 * planned and summarized. */
static Fit *every_plan(Ctx *c, const Graph *g, Remat *r, const Policy *p,
                       const int *free, int nfree)
{
    int n = 1 << nfree;
    Fit *all = ctx_alloc(c, (size_t)n * sizeof *all);
    char *rec = ctx_alloc(c, (size_t)g->ntensors);
    for (int mask = 0; mask < n; mask++) {
        int closed = 1;
        for (int i = 0; i < nfree; i++) {
            rec[free[i]] = (char)(mask >> i & 1);
            closed &= !(rec[free[i]] && r->opened[free[i]]);
        }
        remat_apply(g, r, rec);
        Compiled m;
        ck_assert(compile_decided(c, g, p, r, &m) == 0);
        Summary s;
        summarize(&m, &s);
        double fused = m.fused ? (double)m.fused->arena_bytes : 0;
        double fwd = (double)m.fwd->arena_bytes;
        all[mask] = (Fit){s.saved_bytes, m.train->recompute_cost,
                          s.arena_bytes, fused > fwd ? fused : fwd, closed};
    }
    return all;
}

/* Every assignment of the free tensors, scheduled: the least cost within
 * each budget, and the Pareto set. */
static int exhaustive(Ctx *c, const Graph *g, const Policy *p, Remat *r,
                      Cost *all)
{
    int free[64] = {0}, n = 0;
    for (int t = 0; t < g->ntensors; t++)
        if (r->free[t])
            free[n++] = t;
    const Fit *fit = every_plan(c, g, r, p, free, n);
    for (long mask = 0; mask < 1L << n; mask++)
        all[mask] = (Cost){fit[mask].bytes - (double)r->compact_fixed,
                           fit[mask].cost};
    return 1 << n;
}

static double least_cost(const Cost *all, int n, double budget)
{
    double best = HUGE_VAL;
    for (int i = 0; i < n; i++)
        if (all[i].bytes <= budget && all[i].cost < best)
            best = all[i].cost;
    return best;
}

/* f is the Pareto set of every plan (all, n of them): each point reached
 * by some plan and none beaten, the points rising in bytes and falling in
 * cost, and every plan matched or beaten by a point. */
static void is_pareto_set(const Frontier *f, const Cost *all, int n,
                          const char *what)
{
    for (int i = 0; i < f->n; i++) {
        ck_assert_msg(least_cost(all, n, f->plans[i].bytes) == f->plans[i].cost,
                      "%s: point %d", what, i);
        if (i > 0)
            ck_assert_msg(f->plans[i].bytes > f->plans[i - 1].bytes &&
                          f->plans[i].cost < f->plans[i - 1].cost,
                          "%s: point %d is not below point %d", what, i, i - 1);
    }
    for (int k = 0; k < n; k++) {
        int covered = 0;
        for (int i = 0; i < f->n && !covered; i++)
            covered = f->plans[i].bytes <= all[k].bytes &&
                      f->plans[i].cost <= all[k].cost;
        ck_assert_msg(covered, "%s: plan %d", what, k);
    }
}

/* A random graph of 4 to 16 nodes (rng_state seeded), parsed, shaped,
 * differentiated and classified under sac or none, must_save softened,
 * as an arena bound sees it (open) or, with compact, a saved-bytes budget
 * (a Relu's mask a choice too): that policy. */
static Policy *random_case(Ctx *c, const char **xml, Graph **g, Remat *r,
                           int compact)
{
    Policy *p;
    *xml = model_xml(c, random_graph(c, 4 + rnd(13)));
    ck_assert_msg(policy_load(c, rnd(2) ? "sac" : "none", &p) == 0 &&
                  parse_graph_memory(c, "t.xml", *xml, strlen(*xml), g) == 0 &&
                  analyze_graph(c, *g) == 0 &&
                  (compact ? remat_classify_budget : remat_classify_open)(
                      c, *g, policy_soften(c, p), r) == 0,
                  "%s\n%s", c->err, *xml);
    return policy_soften(c, p);
}

/* 300 graphs of 4 to 16 nodes with up to 14 free decisions (2^14 plans
 * each at most): the frontier is exactly the Pareto set of all plans, and
 * every budget gets the least recompute time any plan within it has; half
 * of them with compact forms a choice (remat_classify_budget), so a
 * Relu's mask kept or rebuilt is priced as its schedule keeps it. */
START_TEST(matches_exhaustive_search)
{
    int tried = 0, free_max = 0, compact_free = 0;
    for (unsigned long seed = 1; tried < 300; seed++) {
        rng_state = seed;
        Ctx c;
        ctx_init(&c);
        const char *xml;
        Graph *g;
        Remat r;
        Frontier f;
        Policy *p = random_case(&c, &xml, &g, &r, (int)(seed % 2));
        int nfree = 0, ncompact = 0;
        for (int t = 0; t < g->ntensors; t++) {
            nfree += r.free[t];
            ncompact += r.compact_free[t];
        }
        if (nfree > 14) {
            ctx_free(&c);
            continue;
        }
        tried++;
        compact_free += ncompact > 0;
        free_max = nfree > free_max ? nfree : free_max;
        ck_assert(solve_frontier(&c, g, &r, HUGE_VAL, &f) == 0 && f.proven);
        Cost *all = ctx_alloc(&c, ((size_t)1 << nfree) * sizeof *all);
        int n = exhaustive(&c, g, p, &r, all);
        is_pareto_set(&f, all, n, ctx_printf(&c, "seed %lu\n%s", seed, xml));
        /* branch and bound, the program's fallback, walks the same
         * choices: at each point's bytes, the point's cost, proven */
        for (int i = 0; ncompact && i < f.n; i++) {
            Plan pick;
            int proven;
            ck_assert_msg(search_budget(&c, g, &r, f.plans[i].bytes, &pick,
                                        &proven) == 0 && proven &&
                          pick.cost == f.plans[i].cost,
                          "seed %lu search at point %d\n%s", seed, i, xml);
        }
        /* split at hubs (solve.c), the same frontier, each point costing
         * what its schedule does */
        Frontier h;
        ck_assert(solve_frontier_hubs(&c, g, &r, HUGE_VAL, &h) == 0 && h.proven);
        ck_assert_msg(h.n == f.n, "seed %lu: hubs %d points, %d\n%s", seed,
                      h.n, f.n, xml);
        for (int i = 0; i < h.n; i++) {
            ck_assert_msg(h.plans[i].bytes == f.plans[i].bytes &&
                          h.plans[i].cost == f.plans[i].cost,
                          "seed %lu hubs point %d\n%s", seed, i, xml);
            Compiled m;
            remat_apply(g, &r, h.plans[i].recompute);
            ck_assert(compile_decided(&c, g, p, &r, &m) == 0);
            ck_assert_msg(m.train->recompute_cost == h.plans[i].cost &&
                          (double)(r.saved_bytes - r.compact_fixed) == h.plans[i].bytes,
                          "seed %lu hubs point %d's plan\n%s", seed, i, xml);
        }
        ctx_free(&c);
    }
    ck_assert_int_ge(free_max, 10);    /* the search met real choices */
    ck_assert_int_ge(compact_free, 10);     /* and masks to keep or rebuild
                                             * (16 of the 300 when written) */
}
END_TEST

/* --max-arena against every plan: 600 random graphs of up to 12 free
 * decisions (run once on 5,000, it passes; on 3,000 it found the walk
 * counting an in-place recompute twice: max_arena_hand_made_cases), each plan scheduled and planned; at every arena some plan
 * has, one byte below it, and halfway between two, alone and with a
 * saved-bytes budget too, the solver's plan is proven and has the least
 * cost of the plans that fit both (and no plan fits where it says none
 * does). Planning each leaf also checks solve_arena.c's bound against the
 * plan's peak (an assert). */

static double least_fitting(const Fit *all, int n, double want, double arena)
{
    double best = HUGE_VAL;
    for (int i = 0; i < n; i++)
        if (all[i].bytes <= want && all[i].arena <= arena && all[i].cost < best)
            best = all[i].cost;
    return best;
}

/* The same among the plans that keep every block boundary, which an arena
 * bound asks first (solve.c's remat_budget). */
static double least_closed(const Fit *all, int n, double want, double arena)
{
    double best = HUGE_VAL;
    for (int i = 0; i < n; i++)
        if (all[i].closed && all[i].bytes <= want && all[i].arena <= arena &&
            all[i].cost < best)
            best = all[i].cost;
    return best;
}

/* Bounds that only a plan rebuilding a block boundary meets: how many,
 * and how many of those the walk proved (check_max_arena). */
static int nested_bounds, nested_proven;

/* The answers that rebuild at each use (Remat.rebuild), counted: the last
 * resort where no plan that recomputes each tensor once was found. */
static int rebuilt_answers;

/* rc 0 with a plan that rebuilds: it is only given where every plan
 * (each recomputing a tensor once: `least`, HUGE_VAL for none) is over
 * the bound or the search gave up, fits `arena` (the step's planned arena,
 * `got`), within the budget, and is never called proven. */
static int rebuilt(const Compiled *m, int rc, double least, int gave_up,
                   double arena, double got)
{
    if (rc != 0 || !m->remat->rebuild)
        return 0;
    Summary s;
    summarize(m, &s);
    ck_assert_msg((least == HUGE_VAL || gave_up) && got <= arena &&
                  !m->remat->proven && s.saved_bytes <= m->remat->budget_bytes,
                  "max-arena %.0f: a plan that rebuilds (arena %.0f, proven "
                  "%d) where the least recompute of the others is %.0f",
                  arena, got, m->remat->proven, least);
    rebuilt_answers++;
    return 1;
}

/* Where only plans that rebuild a boundary fit: a plan within both bounds
 * costing at least the least, and the least when proven; or the walk gave
 * up. */
static void check_nested(Ctx *x, const Compiled *m, int rc, double least,
                         double want, double arena, const char *xml)
{
    nested_bounds++;
    if (rebuilt(m, rc, least, 1, arena, (double)m->train->arena_bytes))
        return;
    if (rc != 0) {
        ck_assert_msg(strstr(x->err, "gave up"), "max-arena %.0f: %s\n%s",
                      arena, x->err, xml);
        return;
    }
    Summary s;
    summarize(m, &s);
    ck_assert_msg(s.arena_bytes <= arena && s.saved_bytes <= want &&
                  m->train->recompute_cost >= least &&
                  (!m->remat->proven || m->train->recompute_cost == least),
                  "max-arena %.0f, budget %.0f: cost %.0f (proven %d), "
                  "exhaustive %.0f\n%s", arena, want, m->train->recompute_cost,
                  m->remat->proven, least, xml);
    nested_proven += m->remat->proven;
}

/* Every plan with a compact form a choice too (remat_classify_budget:
 * a Relu's mask rebuilt instead of kept), where the graph has one: what
 * an arena bound's second step (solve_compact.c) may answer; NULL where
 * it has none. Set by the random tests around their checks. */
static const Fit *forms_all;
static int forms_n, forms_cases, forms_proven, forms_better;

/* forms_all for g: every plan with the forms a choice, where some free
 * tensor's form could be rebuilt and the plans are at most 2^12. */
static void with_forms(Ctx *c, const Graph *g, const Policy *p)
{
    Remat *r = ctx_alloc(c, sizeof *r);
    forms_all = NULL;
    ck_assert(remat_classify_budget(c, g, p, r) == 0);
    int free[64], nfree = 0, choice = 0;
    for (int t = 0; t < g->ntensors; t++) {
        choice |= r->compact_free[t] && !r->needed[t];
        if (r->free[t] && nfree < 64)
            free[nfree++] = t;
    }
    if (!choice || nfree > 12)
        return;
    forms_n = 1 << nfree;
    forms_all = every_plan(c, g, r, p, free, nfree);
}

/* With a form a choice: a refusal only where no plan keeping every form
 * fits (or the walk gave up); an answer within both bounds costing at
 * least the least of every plan (least_all), that when proven; counted
 * where it beats every plan keeping the forms (least). */
static void check_forms(const Ctx *x, const Compiled *m, int rc, double least,
                        double least_all, double want, double arena,
                        double got, const char *xml)
{
    forms_cases++;
    if (rc != 0) {
        ck_assert_msg(least == HUGE_VAL || strstr(x->err, "gave up"),
                      "arena %.0f: refused where a plan keeping every form "
                      "recomputes %.0f: %s\n%s", arena, least, x->err, xml);
        return;
    }
    if (rebuilt(m, rc, least, 1, arena, got))
        return;
    Summary s;
    summarize(m, &s);
    double cost = m->train->recompute_cost;
    ck_assert_msg(got <= arena && s.saved_bytes <= want && cost >= least_all &&
                  (!m->remat->proven || cost == least_all),
                  "arena %.0f, budget %.0f, forms a choice: cost %.0f (proven "
                  "%d), exhaustive %.0f (keeping every form %.0f)\n%s", arena,
                  want, cost, m->remat->proven, least_all, least, xml);
    forms_proven += m->remat->proven;
    forms_better += cost < least;
}

/* Where a plan keeping every block boundary fits, the answer is no
 * dearer than the least of those (the seed of the search over every
 * plan, solve.c's remat_budget), at least the least of every plan, and
 * that when proven; not proven, it says so (proven_kept, counted). */
static int kept_only;

static void check_max_arena(Ctx *c, const Graph *g, const Policy *p,
                            const Fit *all, int n, double want, double arena,
                            const char *xml)
{
    Ctx x;
    ctx_init(&x);
    Budget b = {want == HUGE_VAL ? BUDGET_NONE : BUDGET_BYTES, want, arena,
                NULL, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
    Compiled m;
    double least = least_fitting(all, n, want, arena);
    double kept = least_closed(all, n, want, arena);
    int rc = compile_budget(&x, g, p, &b, &m);
    if (forms_all) {
        check_forms(&x, &m, rc, least,
                    least_fitting(forms_all, forms_n, want, arena), want,
                    arena, rc ? 0 : (double)m.train->arena_bytes, xml);
        ctx_free(&x);
        return;
    }
    if (rc == 0 && rebuilt(&m, rc, least, 0, arena,
                           (double)m.train->arena_bytes)) {
        ctx_free(&x);
        return;
    }
    if (kept == HUGE_VAL && least < HUGE_VAL) {
        check_nested(&x, &m, rc, least, want, arena, xml);
        ctx_free(&x);
        return;
    }
    ck_assert_msg((rc == 0) == (least < HUGE_VAL),
                  "max-arena %.0f, budget %.0f%s: rc %d, exhaustive %.0f: %s\n%s",
                  arena, want, fit_arena_walk_only ? " (walk alone)" : "", rc,
                  least, x.err, xml);
    if (rc == 0) {
        Summary s;
        summarize(&m, &s);
        double cost = m.train->recompute_cost;
        ck_assert_msg(s.arena_bytes <= arena && s.saved_bytes <= want &&
                      cost >= least && cost <= kept &&
                      (m.remat->proven ? cost == least : m.remat->proven_kept),
                      "max-arena %.0f, budget %.0f%s: cost %.0f (proven %d, "
                      "among those keeping the boundaries %d), exhaustive "
                      "%.0f, keeping every boundary %.0f\n%s", arena, want,
                      fit_arena_walk_only ? " (walk alone)" : "", cost,
                      m.remat->proven, m.remat->proven_kept, least, kept, xml);
        kept_only += !m.remat->proven;
    }
    (void)c;
    ctx_free(&x);
}

/* The fused step's arena bound (--max-ram with --fused: the solver
 * schedules and plans SCHED_FUSED, parameter gradients in the arena)
 * against every plan: 200 random graphs of up to 10 free decisions, at
 * some plans' fused arenas and a byte below, proven and the least cost of
 * the plans that fit, or refused exactly where none does. */
static void check_fused_arena(const Graph *g, const Policy *p, const Fit *all,
                              int n, double arena, const char *xml)
{
    Ctx x;
    ctx_init(&x);
    Budget b = {BUDGET_NONE, 0, arena, NULL, 0, {0, 0, 1}, 1, 0, 0, 0, 0, NULL, 0};
    double least = HUGE_VAL;
    for (int i = 0; i < n; i++)
        if (all[i].fused <= arena && all[i].cost < least)
            least = all[i].cost;
    Compiled m;
    int rc = compile_budget(&x, g, p, &b, &m);
    double got = 0;
    if (rc == 0) {
        double fused = (double)m.fused->arena_bytes;
        double fwd = (double)m.fwd->arena_bytes;
        got = fused > fwd ? fused : fwd;
    }
    if (forms_all) {
        double all_least = HUGE_VAL;
        for (int i = 0; i < forms_n; i++)
            if (forms_all[i].fused <= arena && forms_all[i].cost < all_least)
                all_least = forms_all[i].cost;
        check_forms(&x, &m, rc, least, all_least, HUGE_VAL, arena, got, xml);
        ctx_free(&x);
        return;
    }
    if (rc == 0 && m.remat->rebuild) {
        double fused = (double)m.fused->arena_bytes;
        double fwd = (double)m.fwd->arena_bytes;
        rebuilt(&m, rc, least, 0, arena, fused > fwd ? fused : fwd);
        ctx_free(&x);
        return;
    }
    ck_assert_msg((rc == 0) == (least < HUGE_VAL), "fused arena %.0f: rc %d, "
                  "exhaustive %.0f: %s\n%s", arena, rc, least, x.err, xml);
    if (rc == 0) {
        double fused = (double)m.fused->arena_bytes;
        double fwd = (double)m.fwd->arena_bytes;
        ck_assert_msg(m.remat->proven && m.train->recompute_cost == least &&
                      (fused > fwd ? fused : fwd) <= arena,
                      "fused arena %.0f: cost %.0f (proven %d), exhaustive "
                      "%.0f\n%s", arena, m.train->recompute_cost,
                      m.remat->proven, least, xml);
    }
    ctx_free(&x);
}

START_TEST(fused_arena_matches_exhaustive_search)
{
    int tried = 0, binding = 0;
    for (unsigned long seed = 7000; tried < 200; seed++) {
        rng_state = seed;
        Ctx c;
        ctx_init(&c);
        const char *xml;
        Graph *g;
        Remat r;
        Policy *p = random_case(&c, &xml, &g, &r, 0);
        int free[64], nfree = 0;
        for (int t = 0; t < g->ntensors; t++)
            if (r.free[t])
                free[nfree++] = t;
        if (nfree > 10 || !graph_trains(g)) {
            ctx_free(&c);
            continue;
        }
        tried++;
        int n = 1 << nfree;
        Fit *all = every_plan(&c, g, &r, p, free, nfree);
        with_forms(&c, g, p);
        double most = 0, cheapest = HUGE_VAL;
        for (int i = 0; i < n; i++)
            if (all[i].cost < cheapest || (all[i].cost == cheapest &&
                                           all[i].fused < most))
                cheapest = all[i].cost, most = all[i].fused;
        for (int i = 0; i < n; i += 1 + n / 5) {
            check_fused_arena(g, p, all, n, all[i].fused, xml);
            check_fused_arena(g, p, all, n, all[i].fused - 1, xml);
            binding += all[i].fused - 1 < most;
        }
        forms_all = NULL;
        ctx_free(&c);
    }
    ck_assert_int_ge(binding, 50);     /* the bound often decided */
}
END_TEST

START_TEST(max_arena_matches_exhaustive_search)
{
    int tried = 0, free_max = 0, binding = 0;
    for (unsigned long seed = 1000; tried < 600; seed++) {
        rng_state = seed;
        Ctx c;
        ctx_init(&c);
        const char *xml;
        Graph *g;
        Remat r;
        Policy *p = random_case(&c, &xml, &g, &r, 0);
        int free[64], nfree = 0;
        for (int t = 0; t < g->ntensors; t++)
            if (r.free[t])
                free[nfree++] = t;
        if (nfree > 12) {
            ctx_free(&c);
            continue;
        }
        tried++;
        free_max = nfree > free_max ? nfree : free_max;
        int n = 1 << nfree;
        Fit *all = every_plan(&c, g, &r, p, free, nfree);
        with_forms(&c, g, p);
        double mid_bytes = (all[0].bytes + all[n - 1].bytes) / 2;
        for (int i = 0; i < n; i += 1 + n / 6) {
            double a = all[i].arena, lower = all[(i * 7 + 3) % n].arena;
            double arenas[] = {a, a - 1, (a + lower) / 2};
            for (int k = 0; k < 3; k++) {
                /* as a user gets it, then the branch and bound alone */
                for (fit_arena_walk_only = 0; fit_arena_walk_only < 2;
                     fit_arena_walk_only++) {
                    check_max_arena(&c, g, p, all, n, HUGE_VAL, arenas[k], xml);
                    check_max_arena(&c, g, p, all, n, mid_bytes, arenas[k], xml);
                }
                fit_arena_walk_only = 0;
                binding += least_fitting(all, n, HUGE_VAL, arenas[k]) >
                           least_fitting(all, n, HUGE_VAL, HUGE_VAL);
            }
        }
        forms_all = NULL;
        ctx_free(&c);
    }
    ck_assert_int_ge(free_max, 10);    /* the search met real choices */
    ck_assert_int_ge(binding, 100);    /* and the arena often decided */
    fprintf(stderr, "max-arena: %d bounds met only by rebuilding a block "
            "boundary, %d of them proven; %d others proven only among the "
            "plans that keep every boundary\n", nested_bounds, nested_proven,
            kept_only);
    fprintf(stderr, "max-arena: %d bounds on graphs with a compact form a "
            "choice, %d answers proven, %d beating every plan keeping the "
            "forms\n", forms_cases, forms_proven, forms_better);
    ck_assert_int_ge(nested_bounds, 20);
    ck_assert_int_ge(forms_cases, 100);     /* forms were a choice */
    ck_assert_int_ge(forms_better, 1);      /* and rebuilding one won */
}
END_TEST

/* Graphs the random ones did not meet or met once, against every plan at
 * every plan's arena and one byte below, with and without a saved-bytes
 * budget, as a user gets it, from the walk alone and without its cut.
 *
 * In place: Relu writes its output over its input when nothing reads the
 * input after it (schedule.c's forward_in_place), in a recompute too.
 * Here t0 = x w0 must be rebuilt, and within 24 saved bytes so must t3 =
 * Relu(t0): the walk counted t0 and t3 both new where Relu is rebuilt, 64
 * bytes over, and answered that no plan fits (seed 3216 of the test above,
 * when it ran 3,000 graphs).
 *
 * A saved view of a rebuilt tensor (found by reading the code): v =
 * Flatten(u) is saved, so u's forward buffer lives until v's last
 * backward read, while u itself can be rebuilt for its own readers later.
 * Between the two neither buffer need be live, but the bound counted u's
 * bytes from its buffer's first backward read to its last: at
 * --max-arena 1000 it said every plan holds 1024 bytes where one plans
 * in 896, and at 1151 it proved a plan that recomputes more than one
 * that fits. */
static void check_every_bound(const char *body, double want)
{
    Ctx c;
    ctx_init(&c);
    const char *xml = model_xml(&c, body);
    Policy *p;
    Graph *g;
    Remat r;
    ck_assert(policy_load(&c, "none", &p) == 0 &&
              parse_graph_memory(&c, "t.xml", xml, strlen(xml), &g) == 0 &&
              analyze_graph(&c, g) == 0 &&
              remat_classify_open(&c, g, p = policy_soften(&c, p), &r) == 0);
    int free[64], nfree = 0;
    for (int t = 0; t < g->ntensors; t++)
        if (r.free[t])
            free[nfree++] = t;
    ck_assert_int_le(nfree, 12);
    int n = 1 << nfree;
    Fit *all = every_plan(&c, g, &r, p, free, nfree);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++)
            for (fit_arena_walk_only = 0; fit_arena_walk_only <= 2;
                 fit_arena_walk_only++) {
                check_max_arena(&c, g, p, all, n, HUGE_VAL, all[i].arena - k, xml);
                check_max_arena(&c, g, p, all, n, want, all[i].arena - k, xml);
            }
    fit_arena_walk_only = 0;
    ctx_free(&c);
}

START_TEST(max_arena_hand_made_cases)
{
    check_every_bound(
        "<input name='x' shape='3 4'/>"
        "<initializer name='w0' shape='4 4' init='uniform'/>"
        "<initializer name='w1' shape='4 4' init='uniform'/>"
        "<node name='n0' op='MatMul' in='x w0' out='t0' remat='must_recompute'/>"
        "<node name='n1' op='MatMul' in='x w1' out='t1'/>"
        "<node name='n2' op='Flatten' in='x' out='t2'/>"
        "<node name='n3' op='Relu' in='t0' out='t3'/>"
        "<node name='s2' op='Add' in='t1 t2' out='u2'/>"
        "<node name='s3' op='Add' in='u2 t3' out='u3'/>"
        "<node name='loss' op='ReduceSum' in='u3' out='l' keepdims='0'/>"
        "<output name='l'/>", 24);
    check_every_bound(
        "<input name='x' shape='3 4'/>"
        "<initializer name='w0' shape='4 8' init='uniform'/>"
        "<initializer name='w1' shape='8 4' init='uniform'/>"
        "<initializer name='w4' shape='8 4' init='uniform'/>"
        "<initializer name='wz' shape='4 16' init='uniform'/>"
        "<node name='n0' op='MatMul' in='x w0' out='u'/>"
        "<node name='n1' op='MatMul' in='u w1' out='c' remat='must_save'/>"
        "<node name='n2' op='Tanh' in='u' out='a'/>"
        "<node name='nz' op='MatMul' in='x wz' out='z' remat='must_recompute'/>"
        "<node name='nzt' op='Tanh' in='z' out='zt' remat='must_save'/>"
        "<node name='n3' op='Flatten' in='u' out='v' remat='must_save'/>"
        "<node name='n4' op='MatMul' in='v w4' out='d' remat='must_save'/>"
        "<node name='r1' op='ReduceSum' in='a' out='ra' keepdims='0' remat='must_save'/>"
        "<node name='r2' op='ReduceSum' in='zt' out='rz' keepdims='0' remat='must_save'/>"
        "<node name='r3' op='ReduceSum' in='c' out='rc' keepdims='0' remat='must_save'/>"
        "<node name='r4' op='ReduceSum' in='d' out='rd' keepdims='0' remat='must_save'/>"
        "<node name='s1' op='Add' in='ra rz' out='e' remat='must_save'/>"
        "<node name='s2' op='Add' in='e rc' out='f' remat='must_save'/>"
        "<node name='s3' op='Add' in='f rd' out='l'/>"
        "<output name='l'/>", 400);
}
END_TEST

/* Split has several outputs, each a decision of its own (the solver used
 * to take one output per node): its frontier is still exactly the Pareto
 * set of every plan, scheduled, and each point costs what its schedule
 * does. Mul reads two of the outputs, Tanh's output and Concat nothing. */
START_TEST(split_outputs_match_exhaustive_search)
{
    Ctx c;
    ctx_init(&c);
    const char *xml = model_xml(&c,
        "<input name='x' shape='2 8'/>"
        "<initializer name='w' shape='8 8' init='uniform'/>"
        "<node name='mm' op='MatMul' in='x w' out='h'/>"
        "<node name='t' op='Tanh' in='h' out='a'/>"
        "<node name='sp' op='Split' in='a' out='p0 p1 p2' axis='1' split='2 2 4'/>"
        "<node name='m' op='Mul' in='p0 p1' out='q'/>"
        "<node name='u' op='Tanh' in='p2' out='v'/>"
        "<node name='cat' op='Concat' in='q v p1' out='k' axis='-1'/>"
        "<node name='s' op='Sigmoid' in='k' out='z'/>"
        "<node name='r' op='ReduceSum' in='z' out='loss' keepdims='0'/>"
        "<output name='loss'/>");
    Graph *g;
    Policy *p;
    Remat r;
    Frontier f;
    ck_assert(policy_load(&c, "sac", &p) == 0);
    p = policy_soften(&c, p);
    ck_assert(parse_graph_memory(&c, "t.xml", xml, strlen(xml), &g) == 0 &&
              analyze_graph(&c, g) == 0 &&
              remat_classify(&c, g, p, &r) == 0 &&
              solve_frontier(&c, g, &r, HUGE_VAL, &f) == 0 && f.proven);
    int nfree = 0;
    for (int t = 0; t < g->ntensors; t++)
        nfree += r.free[t];
    ck_assert_int_ge(nfree, 6);
    Cost *all = ctx_alloc(&c, ((size_t)1 << nfree) * sizeof *all);
    int n = exhaustive(&c, g, p, &r, all);
    ck_assert_int_ge(f.n, 2);
    is_pareto_set(&f, all, n, "split");
    for (int i = 0; i < f.n; i++) {
        Compiled m;
        remat_apply(g, &r, f.plans[i].recompute);
        ck_assert(compile_decided(&c, g, p, &r, &m) == 0);
        Summary s;
        summarize(&m, &s);
        ck_assert(s.saved_bytes - s.compact_bytes == f.plans[i].bytes);
        ck_assert(m.train->recompute_cost == f.plans[i].cost);
    }
    ctx_free(&c);
}
END_TEST

/* What a frontier point says it costs is what its schedule costs. */
START_TEST(frontier_costs_are_the_schedules)
{
    Ctx c;
    ctx_init(&c);
    const char *xml = model_xml(&c, five_pairs(&c));
    Graph *g;
    Policy *p;
    Remat r;
    Frontier f;
    ck_assert(policy_load(&c, "sac", &p) == 0);
    p = policy_soften(&c, p);
    ck_assert(parse_graph_memory(&c, "t.xml", xml, strlen(xml), &g) == 0 &&
              analyze_graph(&c, g) == 0 &&
              remat_classify(&c, g, p, &r) == 0 &&
              solve_frontier(&c, g, &r, HUGE_VAL, &f) == 0);
    /* five independent pairs: 2^5 subsets, fewer distinct optima */
    ck_assert_int_ge(f.n, 6);
    for (int i = 0; i < f.n; i++) {
        Compiled m;
        remat_apply(g, &r, f.plans[i].recompute);
        ck_assert(compile_decided(&c, g, p, &r, &m) == 0);
        Summary s;
        summarize(&m, &s);
        ck_assert(s.saved_bytes - s.compact_bytes == f.plans[i].bytes);
        ck_assert(m.train->recompute_cost == f.plans[i].cost);
    }
    ctx_free(&c);
}
END_TEST

START_TEST(budget_too_small_names_what_forces_it)
{
    Ctx c;
    ctx_init(&c);
    const char *xml = model_xml(&c,
        "<input name='x' shape='2 4'/><initializer name='w' shape='4 4' init='zeros'/>"
        "<node name='mm' op='MatMul' in='x w' out='h' remat='must_save'/>"
        "<node name='sq' op='Mul' in='h h' out='q'/>"
        "<node name='s' op='ReduceSum' in='q' out='l' keepdims='0'/><output name='l'/>");
    Graph *g;
    Policy *p;
    Budget b = {BUDGET_BYTES, 16, 0, NULL, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
    Compiled m;
    ck_assert(policy_load(&c, "none", &p) == 0 &&
              parse_graph_memory(&c, "t.xml", xml, strlen(xml), &g) == 0);
    ck_assert(compile_parsed(&c, g, p, &b, &m) != 0);
    ck_assert_str_eq(c.err, "t.xml: budget 16 bytes cannot be met: the least "
                     "saved bytes of any plan is 32, forced by 0 block-boundary "
                     "tensors (0 bytes); must_save tensors: h [2x4] (node "
                     "remat=must_save)");
    ctx_free(&c);
}
END_TEST

START_TEST(budget_text)
{
    Ctx c;
    ctx_init(&c);
    BudgetKind k;
    double v;
    ck_assert(budget_parse(&c, "--budget", "0.4", 1, &k, &v) == 0 &&
              k == BUDGET_FRACTION && v == 0.4);
    ck_assert(budget_parse(&c, "--budget", "1", 1, &k, &v) == 0 &&
              k == BUDGET_FRACTION && v == 1);
    ck_assert(budget_parse(&c, "--budget", "3MiB", 1, &k, &v) == 0 &&
              k == BUDGET_BYTES && v == 3 * 1048576.0);
    ck_assert(budget_parse(&c, "--budget", "750KiB", 1, &k, &v) == 0 &&
              v == 750 * 1024.0);
    ck_assert(budget_parse(&c, "--budget", "123456", 1, &k, &v) == 0 &&
              k == BUDGET_BYTES && v == 123456);
    ck_assert(budget_parse(&c, "--budget", "0KiB", 1, &k, &v) == 0 &&
              k == BUDGET_BYTES && v == 0);
    ck_assert(budget_parse(&c, "--budget", "1.5", 1, &k, &v) != 0);
    ck_assert(budget_parse(&c, "--budget", " 1", 1, &k, &v) != 0);
    ck_assert(budget_parse(&c, "--budget", "0x10", 1, &k, &v) != 0);
    ck_assert(budget_parse(&c, "--budget", "1e-1", 1, &k, &v) != 0);
    ck_assert(budget_parse(&c, "--budget", "1..2", 1, &k, &v) != 0);
    ck_assert(budget_parse(&c, "--budget", "-3", 1, &k, &v) != 0);
    ck_assert(budget_parse(&c, "--budget", "3 MiB", 1, &k, &v) != 0);
    ck_assert(budget_parse(&c, "--budget", "3mb", 1, &k, &v) != 0);
    ck_assert(budget_parse(&c, "--max-arena", "0.5", 0, &k, &v) != 0);
    ck_assert_str_eq(c.err, "--max-arena: '0.5' is not a byte count; use e.g. "
                     "3MiB, 750KiB or 123456");
    ctx_free(&c);
}
END_TEST


/* Past the program's caps, branch and bound answers a single budget.
 *
 * pow2: 13 parameters p_i of 2^i floats, each through its own Tanh into
 * the loss. Every a_i = Tanh(p_i) is read by its backward; recomputing it
 * costs 4 FLOPs per float and saves 4 bytes per float, so every subset of
 * the 13 is Pareto-optimal: 8192 points, more than a frontier keeps. With
 * a budget of B bytes the best saves as many floats as fit, and any count
 * up to 8191 is a sum of distinct powers of two: at fraction 0.5 (full
 * saves 0, none 4 * 8191 = 32764, so B = 16382) it saves 4095 floats and
 * recomputes 4 * (8191 - 4095) = 16384 FLOPs.
 *
 * wide: 16 parameters w_i of 4 floats, p_i = Neg(w_i), a_i = Tanh(p_i).
 * Recomputing a_i makes p_i needed, so in one walk independent choices
 * would meet in the states: 2^16 of them, more than a layer keeps (each
 * pair is now a component of its own, summed). Per i: save a_i (16
 * bytes), or recompute a_i and p_i (0 bytes, Tanh 16 + Neg 4 FLOPs); saving
 * p_i instead costs the same bytes and more FLOPs. At fraction 0.5 (B = 128
 * of none's 256) it saves 8 and recomputes 8 * 20 = 160 FLOPs. */
static const char *independent(Ctx *c, int n, int pow2)
{
    Buf b;
    buf_init(&b, c);
    for (int i = 0; i < n; i++)
        buf_printf(&b, "<initializer name='w%d' shape='%d' init='uniform'/>", i,
                   pow2 ? 1 << i : 4);
    for (int i = 0; i < n; i++) {
        if (pow2)
            buf_printf(&b, "<node name='t%d' op='Tanh' in='w%d' out='a%d'/>", i, i, i);
        else
            buf_printf(&b, "<node name='n%d' op='Neg' in='w%d' out='p%d'/>"
                       "<node name='t%d' op='Tanh' in='p%d' out='a%d'/>",
                       i, i, i, i, i, i);
        buf_printf(&b, "<node name='s%d' op='ReduceSum' in='a%d' out='r%d' "
                   "keepdims='0'/>", i, i, i);
        if (i > 0)
            buf_printf(&b, "<node name='add%d' op='Add' in='%s r%d' out='u%d'/>",
                       i, i > 1 ? ctx_printf(c, "u%d", i - 1) : "r0", i, i);
    }
    buf_printf(&b, "<output name='u%d'/>", n - 1);
    return b.data;
}

START_TEST(beyond_the_caps_branch_and_bound)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = budgeted(&c, independent(&c, 13, 1), BUDGET_FRACTION, 0.5);
    Summary s;
    summarize(&m, &s);
    ck_assert_double_eq(s.saved_bytes, 16380);
    ck_assert_double_eq(s.recompute_flops, 16384);
    ck_assert(m.remat->proven);
    m = budgeted(&c, independent(&c, 16, 0), BUDGET_FRACTION, 0.5);
    summarize(&m, &s);
    ck_assert_double_eq(s.saved_bytes, 128);
    ck_assert_double_eq(s.recompute_flops, 160);
    ck_assert(m.remat->proven);
    ctx_free(&c);
}
END_TEST

/* ---- nested checkpointing: block boundaries rebuilt under a budget ------- */

/* An unrolled recurrence of n steps, each a block: a_i = Tanh(a_{i-1} W_i)
 * (a_0 = x, 4x16 floats, 256 bytes a state); the loss sums a_n. Every
 * state is read by a backward (Tanh's reads its output, the next MatMul's
 * weight gradient its input), so keeping every boundary holds all n of
 * them; rebuilding a_i from a kept a_j (j < i) runs the steps between. */
static const char *recurrence(Ctx *c, int n)
{
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "<input name='x' shape='4 16'/>");
    for (int i = 1; i <= n; i++)
        buf_printf(&b, "<initializer name='W%d' shape='16 16' init='uniform'/>"
                   "<block name='s%d'>"
                   "<node name='mm%d' op='MatMul' in='%s W%d' out='h%d'/>"
                   "<node name='t%d' op='Tanh' in='h%d' out='a%d'/></block>",
                   i, i, i, i == 1 ? "x" : ctx_printf(c, "a%d", i - 1), i, i,
                   i, i, i);
    buf_printf(&b, "<node name='s' op='ReduceSum' in='a%d' out='loss' "
               "keepdims='0'/><output name='loss'/>", n);
    return b.data;
}

/* A graph from its body, classified under sac softened with the block
 * boundaries open, as a budget sees it. */
static Graph *open_graph(Ctx *c, const char *body, Policy **p, Remat *r)
{
    const char *xml = model_xml(c, body);
    Graph *g;
    ck_assert(policy_load(c, "sac", p) == 0);
    *p = policy_soften(c, *p);
    ck_assert_msg(parse_graph_memory(c, "t.xml", xml, strlen(xml), &g) == 0 &&
                  analyze_graph(c, g) == 0 &&
                  remat_classify_open(c, g, *p, r) == 0, "%s", c->err);
    return g;
}

static Graph *recurrence_graph(Ctx *c, int n, Policy **p, Remat *r)
{
    return open_graph(c, recurrence(c, n), p, r);
}

/* Six steps, against every plan (the 6 states and the 6 MatMul outputs
 * free: 4,096 plans, each scheduled and planned): with the states free,
 * the least arena any plan reaches is below the least of the plans that
 * keep every state, the budget solver's --max-arena meets it with a plan
 * that fits (the least recompute there when it says proven) and says no
 * plan fits a byte below; and the saved-bytes frontier is exactly the
 * Pareto set of every plan, down to no state kept at all. */
START_TEST(nested_recurrence_matches_every_plan)
{
    Ctx c;
    ctx_init(&c);
    Policy *p;
    Remat r;
    Graph *g = recurrence_graph(&c, 6, &p, &r);
    /* the free tensors some plan needs: those needed when all are
     * rebuilt (the loss, outside every block and free, never is) */
    int free[64], nfree = 0, opened = 0;
    char *rec = ctx_alloc(&c, (size_t)g->ntensors);
    memset(rec, 1, (size_t)g->ntensors);
    remat_apply(g, &r, rec);
    for (int t = 0; t < g->ntensors; t++)
        if (r.free[t] && r.keep[t] != KEEP_NONE) {
            free[nfree++] = t;
            opened += r.opened[t];
        }
    ck_assert_int_eq(nfree, 12);
    ck_assert_int_eq(opened, 6);
    int n = 1 << nfree;
    Fit *all = every_plan(&c, g, &r, p, free, nfree);
    double least = HUGE_VAL, least_kept = HUGE_VAL, kept_all = 0;
    for (int i = 0; i < n; i++) {
        least = all[i].arena < least ? all[i].arena : least;
        if (all[i].closed && all[i].arena < least_kept)
            least_kept = all[i].arena;
        kept_all += all[i].closed;
    }
    ck_assert_int_eq(kept_all, 1 << 6);     /* the MatMul outputs' choices */
    ck_assert_msg(least < least_kept, "nested %.0f, keeping every state %.0f",
                  least, least_kept);
    nested_bounds = nested_proven = 0;
    for (double a = least; a <= least_kept; a += 256)
        check_max_arena(&c, g, p, all, n, HUGE_VAL, a, "recurrence of 6");
    ck_assert_int_ge(nested_bounds, 1);
    Ctx x;
    ctx_init(&x);
    Budget b = {BUDGET_NONE, 0, least - 1, NULL, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
    Compiled m;
    int rc = compile_budget(&x, g, p, &b, &m);
    ck_assert(rc != 0 || rebuilt(&m, rc, HUGE_VAL, 0, least - 1,
                                 (double)m.train->arena_bytes));
    ctx_free(&x);
    Frontier f;
    ck_assert(solve_frontier(&c, g, &r, HUGE_VAL, &f) == 0 && f.proven);
    Cost *cost = ctx_alloc(&c, (size_t)n * sizeof *cost);
    for (int i = 0; i < n; i++)
        cost[i] = (Cost){all[i].bytes, all[i].cost};
    is_pareto_set(&f, cost, n, "recurrence of 6");
    ck_assert_double_eq(f.plans[0].bytes, 0);
    ctx_free(&c);
}
END_TEST

/* 32 steps (an LSTM over 32 time steps unrolls to 32 such blocks,
 * onnx_rnn.c): keeping every state holds 32 x 256 bytes; under an arena
 * bound of a third of that, the least recompute, proven, keeps a handful
 * of states and rebuilds the others from them, as Chen et al.'s sqrt(n) checkpointing does (here
 * each rebuilt state lives from its rebuild to its own backward, so the
 * gaps between kept states shrink toward the end, as in Griewank's
 * revolve: kept k, the i-th gap from the end at most about k - i, 32 <=
 * k(k+1)/2 for k >= 8). */
START_TEST(nested_recurrence_of_32_steps)
{
    Ctx c;
    ctx_init(&c);
    Policy *p;
    Remat r;
    Graph *g = recurrence_graph(&c, 32, &p, &r);
    Budget b = {BUDGET_NONE, 0, 32 * 256 / 3, NULL, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
    Compiled m;
    ck_assert_msg(compile_budget(&c, g, p, &b, &m) == 0, "%s", c.err);
    Summary s;
    summarize(&m, &s);
    ck_assert(s.arena_bytes <= 32 * 256 / 3);
    ck_assert(m.remat->proven);
    int kept = 0;
    for (int i = 1; i <= 32; i++)
        kept += keep_of(&m, ctx_printf(&c, "a%d", i)) == KEEP_SAVE;
    ck_assert_msg(kept >= 4 && kept <= 10, "%d states kept", kept);
    ctx_free(&c);
}
END_TEST

/* Node n's index in g->order. */
static int order_pos(const Graph *g, int n)
{
    int k = 0;
    while (g->order[k] != n)
        k++;
    return k;
}

/* Below the least arena of every plan that recomputes each tensor once
 * (the 32-step recurrence proves 2,304 bytes, docs/solver.md), a bound
 * is met by rebuilding at each use: a rebuilt value is forgotten after
 * the backward it was rebuilt for (schedule.c), or under REBUILD_NEXT
 * kept past one only for the next to read it; every state a
 * backward reads that is not kept is rebuilt again for each reader, so
 * the step recomputes more than the forward computes, and the bound
 * holds. Below what every step's own backward holds (a state, its
 * gradient and the gradient it writes, 256 bytes each) no plan fits, and
 * the refusal says so as a proof. */
START_TEST(rebuilding_fits_below_every_plan)
{
    Ctx c;
    ctx_init(&c);
    Policy *p;
    Remat r;
    Graph *g = recurrence_graph(&c, 32, &p, &r);
    Budget b = {BUDGET_NONE, 0, 2048, NULL, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
    Compiled m;
    ck_assert_msg(compile_budget(&c, g, p, &b, &m) == 0, "%s", c.err);
    ck_assert(m.remat->rebuild && !m.remat->proven);
    const Schedule *s = m.train;
    ck_assert_uint_le(s->arena_bytes, 2048);
    ck_assert_int_gt(s->recompute_execs, s->forward_execs);
    for (int v = 0; v < s->nvalues; v++) {
        if (s->values[v].kind != V_RECOMP)
            continue;
        /* past a backward only to be read by the next (REBUILD_NEXT
         * and REBUILD_BLOCK, whose steps' two nodes are one block), or
         * as one of revolve's rebuilt checkpoints (Remat.hold: made for
         * a backward at or before its hold) */
        int t = s->values[v].tensor, d = s->values[v].def + 1;
        while (s->stmts[d].kind != S_BACKWARD)
            d++;
        if (m.remat->hold && m.remat->hold[t] >= 0 &&
            order_pos(g, s->stmts[d].node) <= m.remat->hold[t])
            continue;
        for (int i = s->values[v].def; i < s->values[v].last; i++) {
            if (s->stmts[i].kind != S_BACKWARD)
                continue;
            int j = i + 1;
            while (s->stmts[j].kind != S_BACKWARD)
                j++;
            ck_assert_msg(m.remat->rebuild >= REBUILD_NEXT &&
                          node_backward_reads_tensor(
                              g, &g->nodes[s->stmts[j].node], t),
                          "%s rebuilt, then live past the backward of %s",
                          g->tensors[t].name, g->nodes[s->stmts[i].node].name);
        }
    }
    Ctx x;
    ctx_init(&x);
    b.max_arena = 700;     /* the forward's 512 fit, no backward's 768 */
    ck_assert(compile_budget(&x, g, p, &b, &m) != 0);
    ck_assert_msg(strstr(x.err, "every plan, one that rebuilds at each use "
                         "too, holds 768 bytes at the backward of node"),
                  "%s", x.err);
    ctx_free(&x);
    ctx_free(&c);
}
END_TEST

/* A recurrence whose step is three nodes, a = Tanh(x W)^2: the Mul's
 * backward reads u, the Tanh's u, the MatMul's the step's input. */
static const char *recurrence3(Ctx *c, int n)
{
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "<input name='x' shape='4 16'/>");
    for (int i = 1; i <= n; i++)
        buf_printf(&b, "<initializer name='W%d' shape='16 16' init='uniform'/>"
                   "<block name='s%d'>"
                   "<node name='mm%d' op='MatMul' in='%s W%d' out='h%d'/>"
                   "<node name='t%d' op='Tanh' in='h%d' out='u%d'/>"
                   "<node name='m%d' op='Mul' in='u%d u%d' out='a%d'/></block>",
                   i, i, i, i == 1 ? "x" : ctx_printf(c, "a%d", i - 1), i, i,
                   i, i, i, i, i, i, i);
    buf_printf(&b, "<node name='s' op='ReduceSum' in='a%d' out='loss' "
               "keepdims='0'/><output name='loss'/>", n);
    return b.data;
}

/* The first statement of the backward of the node after backward
 * statement i (the schedule's length when there is none). */
static int next_backward(const Schedule *s, int i)
{
    int j = i + 1;
    while (j < s->nstmts && s->stmts[j].kind != S_BACKWARD)
        j++;
    return j;
}

/* Rebuilding once per block's backward (REBUILD_BLOCK), as revolve sweeps
 * forward once per step it reverses: on a recurrence of 32 three-node
 * steps, at 2,560 bytes, where the search proves that no plan recomputing
 * once fits (the least found is 4,352), the plan rebuilds no tensor twice
 * while the backward stays in one step, recomputes less than the same
 * kept tensors rebuilt for each backward (REBUILD_NEXT: the MatMul's
 * backward reruns the chain the Mul's ran) and than the same plan without
 * its rebuilt checkpoints (revolve.c), and a rebuilt value other than a
 * checkpoint outlives a backward only while the next is in its block or
 * reads it. */
START_TEST(rebuilding_once_per_block)
{
    Ctx c;
    ctx_init(&c);
    Policy *p;
    Remat r;
    Graph *g = open_graph(&c, recurrence3(&c, 32), &p, &r);
    Budget b = {BUDGET_NONE, 0, 2560, NULL, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
    Compiled m;
    ck_assert_msg(compile_budget(&c, g, p, &b, &m) == 0, "%s", c.err);
    ck_assert_int_eq(m.remat->rebuild, REBUILD_BLOCK);
    const Schedule *s = m.train;
    ck_assert_uint_le(s->arena_bytes, 2560);
    /* each recompute counts against the block of the backward it is
     * placed before */
    char *made = ctx_alloc(&c, (size_t)g->ntensors);
    int block = -2;
    for (int i = 0; i < s->nstmts; i++) {
        const Stmt *st = &s->stmts[i];
        if (st->kind != S_FORWARD || !st->recompute)
            continue;
        int j = next_backward(s, i - 1);
        ck_assert_int_lt(j, s->nstmts);
        if (g->nodes[s->stmts[j].node].block != block) {
            block = g->nodes[s->stmts[j].node].block;
            memset(made, 0, (size_t)g->ntensors);
        }
        int t = g->nodes[st->node].out[0];
        ck_assert_msg(!made[t], "%s rebuilt twice in one step's backward",
                      g->tensors[t].name);
        made[t] = 1;
    }
    for (int v = 0; v < s->nvalues; v++) {
        if (s->values[v].kind != V_RECOMP)
            continue;
        int t = s->values[v].tensor;
        int j = next_backward(s, s->values[v].def);
        if (m.remat->hold && m.remat->hold[t] >= 0 &&
            order_pos(g, s->stmts[j].node) <= m.remat->hold[t])
            continue;       /* a rebuilt checkpoint (revolve.c) */
        for (int i = s->values[v].def; i < s->values[v].last; i++) {
            if (s->stmts[i].kind != S_BACKWARD)
                continue;
            const Node *now = &g->nodes[s->stmts[i].node];
            const Node *next = &g->nodes[s->stmts[next_backward(s, i)].node];
            ck_assert_msg(next->block == now->block ||
                          node_backward_reads_tensor(g, next, t),
                          "%s rebuilt, then live past the backward of %s",
                          g->tensors[t].name, now->name);
        }
    }
    Remat each = *m.remat;
    each.rebuild = REBUILD_NEXT;
    each.hold = NULL;
    Schedule other;
    memset(&other, 0, sizeof other);
    ck_assert(schedule_build(&c, g, &each, SCHED_TRAIN, &other) == 0);
    ck_assert_int_lt(s->recompute_execs, other.recompute_execs);
    /* the plan is revolve's, and its rebuilt checkpoints save sweeps: the
     * same kept states without them recompute more */
    ck_assert_ptr_nonnull(m.remat->hold);
    Remat flat = *m.remat;
    flat.hold = NULL;
    memset(&other, 0, sizeof other);
    ck_assert(schedule_build(&c, g, &flat, SCHED_TRAIN, &other) == 0);
    ck_assert_int_lt(s->recompute_execs, other.recompute_execs);
    ctx_free(&c);
}
END_TEST

/* C(n, k) in whole numbers, 0 for k < 0. */
static double binomial(int n, int k)
{
    double b = 1;
    if (k < 0)
        return 0;
    for (int i = 1; i <= k; i++)
        b = b * (n - k + i) / i;
    return b;
}

/* revolve.c's program against Griewank's closed form (Griewank and
 * Walther, Algorithm 799, 2000): with c checkpoints, the starting state's
 * among them (revolve.c's slots + 1), l steps are reversed in
 * t l - C(c + t, t - 1) forward steps, t the least with C(c + t, c) >= l. */
START_TEST(revolve_counts_are_griewanks)
{
    Ctx c;
    ctx_init(&c);
    for (int l = 1; l <= 80; l++)
        for (int s = 0; s <= 8; s++) {
            int t = 0;
            while (binomial(s + 1 + t, s + 1) < l)
                t++;
            double want = (double)t * l - binomial(s + 1 + t, t - 1);
            ck_assert_msg(revolve_advances(&c, l, s, 0) == want,
                          "%d steps, %d slots: %.0f swept, Griewank %.0f", l,
                          s, revolve_advances(&c, l, s, 0), want);
        }
    ctx_free(&c);
}
END_TEST

/* revolve_plans' plans, scheduled: the steps they sweep, counted as the
 * rebuilds of each step's output (a_i, which the step's own backward
 * does not read), one per plan. */
typedef struct {
    Ctx *c;
    const Graph *g;
    Remat *r;
    int calls;
    double swept[64];
} Sweeps;

static int count_sweeps(void *ctx, const char *recompute, const int *hold)
{
    Sweeps *w = ctx;
    w->r->rebuild = REBUILD_BLOCK;
    w->r->hold = hold;
    remat_apply(w->g, w->r, recompute);
    Schedule s;
    memset(&s, 0, sizeof s);
    ck_assert(schedule_build(w->c, w->g, w->r, SCHED_TRAIN, &s) == 0);
    double n = 0;
    for (int i = 0; i < s.nstmts; i++)
        n += s.stmts[i].kind == S_FORWARD && s.stmts[i].recompute &&
             w->g->nodes[s.stmts[i].node].op == OP_MUL;
    ck_assert_int_lt(w->calls, 64);
    w->swept[w->calls++] = n;
    w->r->hold = NULL;
    return 0;
}

/* On the recurrence of 32 three-node steps the plans revolve.c makes
 * sweep as its program counts: with s slots, F(32, s) steps (the tail
 * after the last step reads no state), for every s, where everything
 * inside the steps is rebuilt too (where the policy's choice saves the
 * MatMul outputs, a state is rebuilt from its own step's, no sweep). A
 * hold one step off either way, or a state kept at the wrong level,
 * sweeps more or less than that. */
START_TEST(revolve_plans_sweep_as_counted)
{
    Ctx c;
    ctx_init(&c);
    Policy *p;
    Remat r;
    Graph *g = open_graph(&c, recurrence3(&c, 32), &p, &r);
    Sweeps w = {&c, g, &r, 0, {0}};
    revolve_plans(&c, g, &r, count_sweeps, &w);
    ck_assert_int_eq(w.calls, 48);     /* 24 slots, two choices each */
    for (int i = 1; i < w.calls; i += 2) {  /* everything inside rebuilt */
        int slots = i / 2 + 1;
        double want = revolve_advances(&c, 32, slots, 1);
        ck_assert_msg(w.swept[i] == want, "%d slots: %.0f steps swept, "
                      "revolve counts %.0f", slots, w.swept[i], want);
    }
    ck_assert(w.swept[1] > w.swept[2 * 23 + 1]);
    ctx_free(&c);
}
END_TEST

/* ---- generated graphs at depth: scripts/make_unet.py, make_gpt.py --------- */

/* The graph a generator script writes (cmd: its arguments after the
 * script's path), classified under sac softened, as a budget does. */
static Graph *generated(Ctx *c, const char *script, const char *args, Remat *r)
{
    const char *cmd = ctx_printf(c, "/usr/bin/python3 '%s/scripts/%s' %s",
                                 REMAT_SOURCE_DIR, script, args);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "%s", cmd);
    Buf b;
    buf_init(&b, c);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk - 1, p)) > 0) {
        chunk[n] = 0;
        buf_printf(&b, "%s", chunk);
    }
    ck_assert_msg(pclose(p) == 0 && b.data, "%s", cmd);
    Graph *g;
    Policy *pol;
    ck_assert_msg(policy_load(c, "sac", &pol) == 0 &&
                  parse_graph_memory(c, "gen.xml", b.data, strlen(b.data), &g) == 0 &&
                  analyze_graph(c, g) == 0 &&
                  remat_classify_open(c, g, policy_soften(c, pol), r) == 0,
                  "%s: %s", cmd, c->err);
    return g;
}

/* The least cost the frontier gives within want bytes (HUGE_VAL: none). */
static double frontier_least(const Frontier *f, double want)
{
    double best = HUGE_VAL;
    for (int i = 0; i < f->n; i++)
        if (f->plans[i].bytes <= want && f->plans[i].cost < best)
            best = f->plans[i].cost;
    return best;
}

static void same_frontier(const Frontier *f, const Frontier *w,
                          const char *what)
{
    ck_assert_msg(w->n == f->n, "%s: %d points, against %d", what, f->n, w->n);
    for (int i = 0; i < f->n; i++)
        ck_assert_msg(f->plans[i].bytes == w->plans[i].bytes &&
                      f->plans[i].cost == w->plans[i].cost,
                      "%s point %d: (%.0f, %.0f) against (%.0f, %.0f)", what,
                      i, f->plans[i].bytes, f->plans[i].cost,
                      w->plans[i].bytes, w->plans[i].cost);
}

/* The frontier, a sum of components' frontiers, against two answers that
 * split nothing: the program over the whole graph, point for point; and
 * at eleven budgets from the least saved bytes to the most and the
 * middles between neighbouring points, with search, branch and bound's
 * least FLOPs, run to the end (on a GPT it gives up after 10^8 visits at
 * most budgets, so there the program alone answers). Each point costs
 * what its schedule does. */
static void check_against_search(Ctx *c, const Graph *g, Remat *r,
                                 int search, const char *what)
{
    Frontier f, w;
    ck_assert(solve_frontier(c, g, r, HUGE_VAL, &f) == 0);
    ck_assert_msg(f.proven && !f.overflow && f.n >= 2, "%s", what);
    ck_assert(solve_frontier_whole(c, g, r, HUGE_VAL, &w) == 0);
    ck_assert_msg(w.proven && !w.overflow, "%s: whole", what);
    same_frontier(&f, &w, what);
    ck_assert(solve_frontier_hubs(c, g, r, HUGE_VAL, &w) == 0);
    ck_assert_msg(w.proven && !w.overflow, "%s: hubs", what);
    same_frontier(&f, &w, ctx_printf(c, "%s, split at hubs", what));
    double lo = f.plans[0].bytes, hi = f.plans[f.n - 1].bytes;
    double want[11 + 16];
    int nw = 0;
    for (int i = 0; i <= 10; i++)
        want[nw++] = floor(lo + (hi - lo) * i / 10);
    for (int i = 1; i < f.n && nw < 27; i += 1 + f.n / 16)
        want[nw++] = floor((f.plans[i - 1].bytes + f.plans[i].bytes) / 2);
    for (int i = 0; search && i < nw; i++) {
        Plan pick;
        int proven;
        ck_assert_msg(search_budget(c, g, r, want[i], &pick, &proven) == 0 &&
                      proven, "%s: %.0f bytes", what, want[i]);
        ck_assert_msg(pick.cost == frontier_least(&f, want[i]),
                      "%s: %.0f bytes: search %.0f, frontier %.0f", what,
                      want[i], pick.cost, frontier_least(&f, want[i]));
    }
    Policy *p;
    ck_assert(policy_load(c, "sac", &p) == 0);
    p = policy_soften(c, p);
    for (int i = 0; i < f.n; i += 1 + f.n / 8) {
        Ctx x;
        ctx_init(&x);
        Compiled m;
        remat_apply(g, r, f.plans[i].recompute);
        ck_assert(compile_decided(&x, g, p, r, &m) == 0);
        Summary s;
        summarize(&m, &s);
        ck_assert_msg(s.saved_bytes - s.compact_bytes == f.plans[i].bytes &&
                      m.train->recompute_cost == f.plans[i].cost, "%s point %d",
                      what, i);
        ctx_free(&x);
    }
}

/* U-Nets of depth 4 to 8, with and without the timestep embedding that
 * ties every level into one component (solve.c's hubs split it); with it,
 * branch and bound gives up at some budgets from depth 8, so it checks
 * depths 4 to 6 there. */
START_TEST(unets_match_branch_and_bound)
{
    for (int emb = 0; emb <= 1; emb++)
        for (int d = 4; d <= 8; d++) {
            Ctx c;
            ctx_init(&c);
            Remat r;
            const char *args = ctx_printf(&c, "%s%d", emb ? "--emb " : "", d);
            const Graph *g = generated(&c, "make_unet.py", args, &r);
            check_against_search(&c, g, &r, !emb || d <= 6,
                                 ctx_printf(&c, "unet %s", args));
            ctx_free(&c);
        }
}
END_TEST

START_TEST(gpts_match_branch_and_bound)
{
    for (int l = 2; l <= 4; l++) {
        Ctx c;
        ctx_init(&c);
        Remat r;
        const Graph *g = generated(&c, "make_gpt.py",
                                   ctx_printf(&c, "--layers %d", l), &r);
        check_against_search(&c, g, &r, 0,
                             ctx_printf(&c, "gpt %d layers", l));
        ctx_free(&c);
    }
}
END_TEST

/* The walk's cut on what the rest must recompute (solve_prefix_curves'
 * frontiers) removes no answer: on GPTs of 2 and 3 layers, too big for
 * every plan to be tried, at bounds from full's arena to none's, the walk
 * alone gives the same proven cost with the cut and without it. */
START_TEST(max_arena_cut_removes_no_answer)
{
    for (int l = 2; l <= 3; l++) {
        Ctx c;
        ctx_init(&c);
        Remat r;
        Graph *g = generated(&c, "make_gpt.py", ctx_printf(&c, "--layers %d", l),
                             &r);
        Policy *p;
        ck_assert(policy_load(&c, "sac", &p) == 0);
        p = policy_soften(&c, p);
        double arena[2];
        for (int end = 0; end < 2; end++) {
            Policy *q;
            Compiled m;
            Summary s;
            ck_assert(policy_load(&c, end ? "none" : "full", &q) == 0 &&
                      compile_parsed(&c, g, q, NULL, &m) == 0);
            summarize(&m, &s);
            arena[end] = s.arena_bytes;
        }
        for (int i = 0; i <= 8; i++) {
            double bound = arena[0] + (arena[1] - arena[0]) * i / 8 -
                           (i == 0) * (arena[1] - arena[0]) / 16;
            double cost[3];
            int rc[3], proven[3];
            for (fit_arena_walk_only = 1; fit_arena_walk_only <= 2;
                 fit_arena_walk_only++) {
                /* over the plans that keep every block boundary, as
                 * fit_arena sees them first (with them open the walk
                 * gives up on these GPTs) */
                Ctx x;
                ctx_init(&x);
                Remat kept;
                Frontier f;
                Compiled m;
                double floor_cost;
                int w = fit_arena_walk_only;
                ck_assert(remat_classify(&x, g, p, &kept) == 0 &&
                          solve_frontier(&x, g, &kept, HUGE_VAL, &f) == 0);
                rc[w] = fit_arena(&x, g, &kept, &f, HUGE_VAL, bound, SCHED_TRAIN, NULL, 1,
                                  &proven[w], &floor_cost);
                if (rc[w] == 0) {
                    kept.max_arena = bound;
                    ck_assert(compile_decided(&x, g, p, &kept, &m) == 0);
                }
                proven[w] = rc[w] == 0 && proven[w];
                cost[w] = rc[w] == 0 ? m.train->recompute_cost : -1;
                ctx_free(&x);
            }
            fit_arena_walk_only = 0;
            ck_assert_msg(rc[1] == rc[2] && cost[1] == cost[2] &&
                          (rc[1] || (proven[1] && proven[2])),
                          "gpt %d layers, max-arena %.0f: with the cut rc %d "
                          "cost %.0f proven %d, without rc %d cost %.0f "
                          "proven %d", l, bound, rc[1], cost[1], proven[1],
                          rc[2], cost[2], proven[2]);
        }
        ctx_free(&c);
    }
}
END_TEST

/* U-Net of depth 3: every plan of its free tensors that some plan needs
 * (those needed when all are recomputed; the others never count), walked
 * by remat.c (not solve.c): saved bytes from remat_apply, the cost the
 * producers' (cost.c) of the tensors recomputed (no node here has two
 * outputs).
 * The frontier is exactly the Pareto set of them. */
START_TEST(unet3_matches_every_plan)
{
    Ctx c;
    ctx_init(&c);
    Remat r;
    const Graph *g = generated(&c, "make_unet.py", "3", &r);
    int free[64], n = 0;
    char *rec = ctx_alloc(&c, (size_t)g->ntensors);
    memset(rec, 1, (size_t)g->ntensors);
    remat_apply(g, &r, rec);
    for (int t = 0; t < g->ntensors; t++)
        if (r.free[t] && r.keep[t] != KEEP_NONE)
            free[n++] = t;
    for (int t = 0; t < g->ntensors; t++)
        rec[t] = 0;
    ck_assert_int_le(n, 18);
    ck_assert_int_ge(n, 12);
    Frontier f;
    ck_assert(solve_frontier(&c, g, &r, HUGE_VAL, &f) == 0 && f.proven);
    Cost *all = ctx_alloc(&c, ((size_t)1 << n) * sizeof *all);
    for (long mask = 0; mask < 1L << n; mask++) {
        Ctx x;
        ctx_init(&x);
        for (int i = 0; i < n; i++)
            rec[free[i]] = (char)(mask >> i & 1);
        remat_apply(g, &r, rec);
        double cost = 0;
        for (int t = 0; t < g->ntensors; t++)
            if (r.keep[t] == KEEP_RECOMPUTE) {
                const Node *nd = &g->nodes[g->tensors[t].producer];
                cost += node_cost(r.rates, g, nd);
            }
        all[mask] = (Cost){(double)(r.saved_bytes - r.compact_fixed), cost};
        ctx_free(&x);
    }
    is_pareto_set(&f, all, 1 << n, "unet3");
    ctx_free(&c);
}
END_TEST

/* The depths of issue 14: a U-Net of depth 32 (its skips overflowed the
 * program's 16384 states from depth 15), with its timestep embedding too,
 * and a 96-layer GPT: the frontier and a single budget proven, and the
 * budget's answer the frontier's. */
START_TEST(at_depth_proven)
{
    static const struct { const char *script, *args; } graphs[] = {
        {"make_unet.py", "32"}, {"make_unet.py", "--emb 32"},
        {"make_gpt.py", "--layers 96"},
    };
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        Ctx c;
        ctx_init(&c);
        Remat r;
        Graph *g = generated(&c, graphs[i].script, graphs[i].args, &r);
        Frontier f;
        ck_assert(solve_frontier(&c, g, &r, HUGE_VAL, &f) == 0);
        ck_assert_msg(f.proven && !f.overflow && f.n >= 100, "%s %s: %d points",
                      graphs[i].script, graphs[i].args, f.n);
        Policy *p;
        Budget b = {BUDGET_FRACTION, 0.5, 0, NULL, 0, {0, 0, 0}, 0, 0, 0, 0, 0, NULL, 0};
        Compiled m;
        ck_assert(policy_load(&c, "sac", &p) == 0 &&
                  compile_parsed(&c, g, policy_soften(&c, p), &b, &m) == 0);
        ck_assert(m.remat->proven);
        double lo, hi;
        budget_ends(&c, g, &lo, &hi);
        ck_assert_double_eq(m.train->recompute_cost,
                            frontier_least(&f, floor(lo + 0.5 * (hi - lo))));
        ctx_free(&c);
    }
}
END_TEST

/* Past four hubs: a U-Net of depth 16 whose decoder adds five embeddings
 * at every level (e_j = MatMul(t, w_j), read by no backward), so that
 * after four hubs the fifth still ties every level's skip into one
 * component, whose states overflow. The frontier says where; a single
 * budget falls back to branch and bound, whose plan keeps within it. */
static const char *unet_five_embeddings(Ctx *c)
{
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "<input name='x' shape='2 8'/><input name='t' shape='2 4'/>");
    for (int j = 0; j < 5; j++)
        buf_printf(&b, "<initializer name='w%d' shape='4 1' init='uniform'/>"
                   "<node name='emb%d' op='MatMul' in='t w%d' out='e%d'/>",
                   j, j, j, j);
    const char *prev = "x";
    for (int i = 1; i <= 16; i++) {
        buf_printf(&b, "<initializer name='enc%d' shape='8 8' init='uniform'/>"
                   "<node name='enc%d.mm' op='MatMul' in='%s enc%d' out='h%d'/>"
                   "<node name='enc%d.act' op='Relu' in='h%d' out='a%d'/>",
                   i, i, prev, i, i, i, i, i);
        prev = ctx_printf(c, "a%d", i);
    }
    for (int i = 16; i >= 1; i--) {
        buf_printf(&b, "<initializer name='dec%d' shape='8 8' init='uniform'/>"
                   "<node name='dec%d.mm' op='MatMul' in='%s dec%d' out='u%d'/>"
                   "<node name='dec%d.skip' op='Add' in='u%d h%d' out='s%d_0'/>",
                   i, i, prev, i, i, i, i, i, i);
        for (int j = 0; j < 5; j++)
            buf_printf(&b, "<node name='dec%d.e%d' op='Add' in='s%d_%d e%d' "
                       "out='s%d_%d'/>", i, j, i, j, j, i, j + 1);
        buf_printf(&b, "<node name='dec%d.act' op='Relu' in='s%d_5' out='d%d'/>",
                   i, i, i);
        prev = ctx_printf(c, "d%d", i);
    }
    buf_printf(&b, "<node name='loss' op='ReduceSum' in='%s' out='l' "
               "keepdims='0'/><output name='l'/>", prev);
    return b.data;
}

START_TEST(past_the_hubs_branch_and_bound)
{
    Ctx c;
    ctx_init(&c);
    const char *xml = model_xml(&c, unet_five_embeddings(&c));
    Graph *g;
    Policy *p;
    Remat r;
    Frontier f;
    ck_assert(policy_load(&c, "sac", &p) == 0 &&
              parse_graph_memory(&c, "t.xml", xml, strlen(xml), &g) == 0 &&
              analyze_graph(&c, g) == 0 &&
              remat_classify(&c, g, policy_soften(&c, p), &r) == 0);
    ck_assert(solve_frontier(&c, g, &r, HUGE_VAL, &f) == 0);
    ck_assert(f.overflow != NULL && f.n == 0 && !f.proven);
    Compiled m = budgeted(&c, unet_five_embeddings(&c), BUDGET_FRACTION, 0.5);
    ck_assert_double_le(m.remat->saved_bytes, m.remat->budget_bytes);
    ctx_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("solve");
    TCase *t = tcase_create("solve");
    /* with block boundaries open each --max-arena check solves twice
     * (solve.c's remat_budget): the suite took 37 s of CPU where it took
     * 13, and at a load of 10 on two cores one case passed 300 s */
    tcase_set_timeout(t, 600);
    tcase_add_test(t, five_pairs_by_hand);
    tcase_add_test(t, matches_exhaustive_search);
    tcase_add_test(t, max_arena_matches_exhaustive_search);
    tcase_add_test(t, fused_arena_matches_exhaustive_search);
    tcase_add_test(t, max_arena_cut_removes_no_answer);
    tcase_add_test(t, max_arena_hand_made_cases);
    tcase_add_test(t, frontier_costs_are_the_schedules);
    tcase_add_test(t, split_outputs_match_exhaustive_search);
    tcase_add_test(t, budget_too_small_names_what_forces_it);
    tcase_add_test(t, budget_text);
    tcase_add_test(t, beyond_the_caps_branch_and_bound);
    tcase_add_test(t, unets_match_branch_and_bound);
    tcase_add_test(t, gpts_match_branch_and_bound);
    tcase_add_test(t, unet3_matches_every_plan);
    tcase_add_test(t, at_depth_proven);
    tcase_add_test(t, past_the_hubs_branch_and_bound);
    tcase_add_test(t, nested_recurrence_matches_every_plan);
    tcase_add_test(t, nested_recurrence_of_32_steps);
    tcase_add_test(t, rebuilding_fits_below_every_plan);
    tcase_add_test(t, rebuilding_once_per_block);
    tcase_add_test(t, revolve_counts_are_griewanks);
    tcase_add_test(t, revolve_plans_sweep_as_counted);
    suite_add_tcase(s, t);
    return run_suite(s);
}
