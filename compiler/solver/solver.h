/*
 * solver.h: what the solver's files (solve.c, solve_arena.c,
 * solve_compact.c, revolve.c, ranges.c) share, and the tests that check
 * them, beyond the contract in remat.h (solve_frontier, remat_budget):
 * the frontier's other programs, the walk and its hooks, the live-bytes
 * measure, the compact forms' second step, revolve's plans and the
 * segment tree.
 */
#ifndef SOLVER_H
#define SOLVER_H

#include "../remat.h"

/* solve_frontier's answer by one program over the whole graph, the
 * components not split (its marks may then outgrow MAX_FRONTIER_STATES):
 * the tests' second opinion on the components' sum. */
int solve_frontier_whole(Ctx *c, const Graph *g, const Remat *r,
                         double cap_bytes, Frontier *f);
/* The same, split at up to 4 hubs (solve.c) whether or not a component
 * outgrows its states, so that the tests check the hubs' cases on graphs
 * small enough to check. */
int solve_frontier_hubs(Ctx *c, const Graph *g, const Remat *r,
                        double cap_bytes, Frontier *f);
/* The frontier of another measure than saved bytes (solve_arena.c's
 * bound): the bytes of the kept tensors live across backward statement j
 * (the j-th that runs a node's backward) and not read by a backward around
 * it. Per tensor: lo, the first backward statement reading its buffer (-1:
 * none); own, the first reading the tensor itself (INT_MAX: none); bytes,
 * what keeping it counts (aligned). Which recompute reads a kept tensor
 * when depends on the plan: the program carries it in its marks. */
typedef struct {
    int j;
    const int *lo, *own;
    const double *bytes;
} LiveAt;
int solve_live_at(Ctx *c, const Graph *g, const Remat *r, const LiveAt *at,
                  double cap, Frontier *f);
/* revolve.c: the tensors a budget opened (block boundaries, tensors
 * outside every block) that a backward reads, in the walk's order
 * (nested checkpointing's candidates choose among them), and their
 * groups: each its own (by_block 0), or a run of them that one block's
 * nodes make together (an LSTM step's h and c, kept or rebuilt as one);
 * first[] has ngroups + 1 starts into open[]. */
int *solve_opened(Ctx *c, const Graph *g, const Remat *r, int *n);
int solve_groups(Ctx *c, const Graph *g, const int *open, int n,
                 int by_block, int **first);
/* revolve.c: revolve's plans over the chain of r's opened groups by
 * block, one per count of slots and per choice inside the blocks (as the
 * policy asks, or all rebuilt), each a recompute flag and a Remat.hold per
 * tensor, handed to each() until it returns nonzero (then 1). */
int revolve_plans(Ctx *c, const Graph *g, const Remat *r,
                  int (*each)(void *ctx, const char *recompute,
                              const int *hold),
                  void *ctx);
/* T(steps, slots) of revolve.c: the steps swept to reverse a chain of
 * `steps` from a kept state with `slots` free (Griewank's count); with
 * first, F(steps, slots): the same after a forward that may keep states
 * on its way at no cost. */
double revolve_advances(Ctx *c, int steps, int slots, int first);
/* ranges.c: whole numbers at points 0..n-1 under additions over ranges,
 * with the least over a range and a hash of a suffix in O(log n) each. */
typedef struct {
    int n;
    int64_t *least, *add;   /* segment tree */
    uint64_t *w[2];         /* per family, prefix sums of the weights */
    uint64_t *base[2];      /* per family, prefix hashes of the start */
    uint64_t *d, *dw[2];    /* Fenwick trees of the additions' ends */
} Ranges;
void ranges_init(Ctx *c, Ranges *r, const int64_t *values, int n);
void ranges_add(Ranges *r, int from, int to, int64_t d);   /* [from, to) */
int64_t ranges_min(const Ranges *r, int from, int to);  /* INT64_MAX: none */
void ranges_hash(const Ranges *r, int from, uint64_t *h1, uint64_t *h2);

/* Per walk position k (g->order[k]), the frontier under at's measure
 * within cap of the components (solve.c) whose decisions all lie at
 * order[0..k]: a bound below every plan on what those decisions cost for
 * the bytes they hold (solve_arena.c's walk). A component whose states
 * overflow, or whose frontier or sum would be thinned, is left out. */
typedef struct {
    int n;
    double *bytes, *cost;   /* bytes ascending, cost falling */
} Curve;
int solve_prefix_curves(Ctx *c, const Graph *g, const Remat *r,
                        const LiveAt *at, double cap, Curve *per_k);
/* The least-cost plan within want bytes by branch and bound over the
 * whole walk (no components), the answer where the frontier's caps are
 * hit, and the tests' second opinion; *proven when it ran to the end. 0,
 * or -1 when no plan fits. */
int search_budget(Ctx *c, const Graph *g, const Remat *r, double want,
                  Plan *out, int *proven);
/* The same walk with a second bound and a last word (solve_arena.c):
 * decide(ctx, node, t, how, +1) on every decision about an output t that
 * is needed or holds a buffer (how: DECIDE_* bits), returning 0 when no
 * plan deciding so can fit (decide(..., -1) undoes it, in reverse order);
 * visit(ctx, k, bytes, cost, best) on reaching node order[k] with the
 * decisions after it made (best: the least cost found so far), returning
 * 0 when the rest of the walk can be skipped (no plan from here costs
 * less, or another partial plan seen there does at least as well), else followed
 * by leave(ctx) when the walk below it is done; and
 * leaf(ctx, recompute, cost) on every whole plan better than the best so
 * far, 0 to reject it. */
enum { DECIDE_REBUILD = 1, DECIDE_NEEDED = 2, DECIDE_HOLD = 4 };
typedef struct {
    int (*decide)(void *ctx, int node, int t, int how, int sign);
    int (*visit)(void *ctx, int k, double bytes, double cost, double best);
    void (*leave)(void *ctx);
    int (*leaf)(void *ctx, const char *recompute, double cost);
    void *ctx;
    long max_visits;
} SearchHooks;
/* Starts from *best (HUGE_VAL figures: none) and replaces it with a better
 * plan: 0 when one was found, else -1; *proven when the walk ended. */
int search_hooked(Ctx *c, const Graph *g, const Remat *r, double want,
                  const SearchHooks *h, Plan *best, int *proven);

/* solve_arena.c: the least-recompute plan within want saved bytes whose
 * planned arena (of step: SCHED_TRAIN, or SCHED_FUSED for --max-ram with
 * --fused; at least the forward's) is at most max_arena (f: the
 * saved-bytes frontier within want; seed, NULL or a plan to better, per
 * tensor 1 = recompute), applied to r; *proven when it is the least, else
 * *bound, a cost no plan that fits has less of. Where no plan that
 * recomputes each tensor once fits, and rebuild_ok, a plan that rebuilds
 * at each use (Remat.rebuild). An error when no plan fits, with *proven
 * where that is a proof: no plan that recomputes each tensor once (and
 * keeps every compact form) fits. */
int fit_arena(Ctx *c, const Graph *g, Remat *r, const Frontier *f,
              double want, double max_arena, int step, const char *seed,
              int rebuild_ok, int *proven, double *bound);
/* The saved-bytes frontier's least cost within cap saved bytes, a bound
 * on every plan whose arena is cap (every saved buffer is live where the
 * backward starts); 0 when the frontier is not exact, HUGE_VAL when no
 * plan is within cap (solve_arena.c). */
double frontier_bound(const Frontier *f, double cap);
/* After remat_budget's arena answer (*answer; NULL where it refused),
 * the plans that rebuild a compact form instead of keeping it
 * (solve_compact.c; refusal_proven: the refusal was a proof): *answer
 * becomes the first of them that fits and recomputes less, or stays, its
 * proof qualified where such a plan could beat it (Remat.forms_kept). -1
 * on failure only. */
int compact_fit(Ctx *c, const Graph *g, const Policy *p, const Budget *b,
                int refusal_proven, Remat **answer);
/* For the tests: fit_arena answers by its branch and bound alone (no
 * candidate plans, no per-statement bound), so that they check it; at 2,
 * without its cut on the cost still to come either. */
extern int fit_arena_walk_only;

/* Saved bytes of a fraction: lo + f * (hi - lo). */
double budget_bytes(Ctx *c, const Graph *g, const Budget *b);

#endif
