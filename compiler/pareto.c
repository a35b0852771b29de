/*
 * pareto.c: every optimal plan of a graph, as a table and a picture.
 *
 * solve.c's frontier holds, from the least saved bytes to the most, every
 * plan that no other beats on both saved bytes and recompute time (the
 * estimate of cost.c); each budget from 0 to 1 picks one of them. This
 * file schedules and plans each to get its arena, optionally builds and
 * times its trainer (--measure), and writes one row per plan: the budget
 * fraction at which it becomes optimal, saved bytes, arena bytes,
 * recompute FLOPs and estimated seconds (and measured ms per step).
 * With --by arena the rows are the arena curve instead, walked down by
 * --max-arena's solver (arena_curve) as far as a count allows.
 * The SVG draws saved bytes against recompute time as a staircase (a
 * budget between two plans gets the one to its left), with the built-in
 * policies marked where they fall; a policy off the staircase is beaten
 * by a plan on it. Both outputs depend only on the graph and the policy,
 * except the measured column.
 */
#define _DEFAULT_SOURCE
#include "remat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    double bytes, arena, flops;
    double cost;            /* the recompute's picoseconds (cost.c) */
    double ms;
    double ram;             /* ram_bytes for the trainer's optimizer */
    int proven;             /* arena_curve's: the least within its arena */
    int rebuild;            /* spaced_rows': its Remat.rebuild */
    char *recompute;        /* spaced_rows': its plan, to build when timed */
    int *hold;              /* and its Remat.hold (NULL: none) */
} Row;

/* Builds the plan's trainer in a temporary file and returns the median ms
 * per train step of `--bench 20`, or -1 with ctx error. */
static double measure(Ctx *c, const Compiled *m)
{
    const char *tmp = getenv("TMPDIR");
    char *exe = ctx_printf(c, "%s/remat-pareto-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(exe);
    if (fd < 0)
        return ctx_error(c, exe, 0, "cannot make a temporary file");
    close(fd);
    double ms = -1;
    const BuildOptions host = {0, NULL, 0, 0};
    if (build_trainer(c, m, exe, &host) == 0) {
        FILE *p = popen(ctx_printf(c, "'%s' --bench 20", exe), "r");
        if (p && fscanf(p, "median_ms %lf", &ms) != 1)
            ms = -1;
        if (p)
            pclose(p);
        if (ms < 0)
            ctx_error(c, exe, 0, "the trainer did not report its time");
    }
    remove(exe);
    return ms;
}

/* A row as `remat pareto` without --measure shows it: the training
 * schedule and its arena alone, in x; fwd is the forward's, every plan's. */
static int fast_row(Ctx *x, const Graph *g, Remat *r, const Schedule *fwd,
                    const Optim *o, Row *row)
{
    Schedule train, fused;
    memset(&train, 0, sizeof train);
    memset(&fused, 0, sizeof fused);
    if (schedule_build(x, g, r, SCHED_TRAIN, &train) ||
        plan_arena(x, &train, r->max_arena) ||
        (o->fused && (schedule_build(x, g, r, SCHED_FUSED, &fused) ||
                      plan_arena(x, &fused, r->max_arena))))
        return -1;
    /* the figures ram_of gives the whole compilation */
    Compiled m = {g, NULL, r, fwd, &train, o->fused ? &fused : NULL, *o, 0};
    Ram ram;
    ram_of(&m, &ram);
    const Schedule *big = train.arena_bytes > fwd->arena_bytes ? &train : fwd;
    *row = (Row){(double)r->saved_bytes, (double)big->arena_bytes,
                 train.recompute_flops, train.recompute_cost, 0,
                 ram_total(&ram), 0, r->rebuild, NULL, NULL};
    return 0;
}

/* A row from the whole compilation, and timed, its trainer's ms per step. */
static int full_row(Ctx *c, const Graph *g, const Policy *p, Remat *r,
                    const Optim *o, int timed, Row *row)
{
    Compiled m;
    if (compile_decided(c, g, p, r, &m))
        return -1;
    m.optim = *o;
    Summary s;
    summarize(&m, &s);    /* as the fast rows: summarize's figures */
    *row = (Row){s.saved_bytes, s.arena_bytes, s.recompute_flops,
                 m.train->recompute_cost, 0, s.ram_bytes, 0, r->rebuild,
                 NULL, NULL};
    return timed && (row->ms = measure(c, &m)) < 0 ? -1 : 0;
}

/* Each plan's row. Unmeasured, only what a row shows is built: the
 * training schedule and its arena per plan, the forward schedule once (it
 * runs no recompute, so every plan's is the same), each plan's scratch in
 * a context reset after its row: a frontier of a thousand plans of a deep
 * model costs one plan's memory, not a thousand. */
static int rows_of(Ctx *c, const Graph *g, const Policy *p, Remat *r,
                   const Optim *o, const Frontier *f, int timed, Row *rows)
{
    int fast = !timed && graph_trains(g);
    Schedule fwd;
    memset(&fwd, 0, sizeof fwd);
    if (fast && (schedule_build(c, g, r, SCHED_FORWARD, &fwd) ||
                 plan_arena(c, &fwd, 0)))
        return -1;
    Ctx scratch;
    ctx_init(&scratch);
    int every = f->n / 100 > 1 ? f->n / 100 : 1;    /* the line's updates */
    for (int i = 0; i < f->n; i++) {
        if (i % every == 0 || i == f->n - 1 || timed)
            progress(c, "remat pareto: %s plan %d of %d", timed ? "building "
                     "and timing" : "scheduling", i + 1, f->n);
        remat_apply(g, r, f->plans[i].recompute);
        int rc = fast ? fast_row(&scratch, g, r, &fwd, o, &rows[i])
                      : full_row(c, g, p, r, o, timed, &rows[i]);
        ctx_reset(&scratch);
        if (rc) {
            ctx_free(&scratch);
            return -1;
        }
        /* the solver leaves out the compact forms every plan keeps */
        assert(rows[i].bytes == f->plans[i].bytes + (double)r->compact_fixed &&
               rows[i].cost == f->plans[i].cost &&
               "the solver's costs are the schedule's");
    }
    ctx_free(&scratch);
    return 0;
}

/* The plans no plan with less recompute matches in arena bytes, in place
 * and in order (saved bytes rising, recompute falling): along them the
 * arena falls as recompute rises. Returns their number. */
static int arena_frontier(Row *rows, int n)
{
    double best = HUGE_VAL;
    int k = n;
    for (int i = n - 1; i >= 0; i--)    /* from the least recompute */
        if (rows[i].arena < best) {
            best = rows[i].arena;
            rows[--k] = rows[i];
        }
    memmove(rows, rows + k, (size_t)(n - k) * sizeof *rows);
    return n - k;
}

static int by_arena_then_cost(const void *x, const void *y)
{
    const Row *a = x, *b = y;
    if (a->arena != b->arena)
        return a->arena < b->arena ? -1 : 1;
    if (a->cost != b->cost)
        return a->cost < b->cost ? -1 : 1;
    if (a->proven != b->proven)
        return b->proven - a->proven;
    /* qsort is not stable: the rest decide every tie, so that the rows
     * kept are the same with any C library (a spaced plan and its
     * rebuilding twin often schedule alike) */
    if (a->rebuild != b->rebuild)
        return a->rebuild - b->rebuild;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? -1 : 1;
    return a->flops < b->flops ? -1 : a->flops > b->flops;
}

/* The rows no other beats on arena and recompute, least arena first (of
 * equal ones the proven); returns how many. */
static int staircase(Row *rows, int n)
{
    qsort(rows, (size_t)n, sizeof *rows, by_arena_then_cost);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || rows[i].cost < rows[k - 1].cost)
            rows[k++] = rows[i];
    return k;
}

/* The saved-bytes frontier of the plans that keep every block boundary,
 * its rows joined to *rows (arena_frontier's) as one staircase: with the
 * boundaries open the frontier's plans of few saved bytes rebuild many
 * boundaries at once and need much arena, and the plans keeping them may
 * need less. */
static int with_kept_rows(Ctx *c, Graph *g, const Policy *p,
                          const Rates *rates, const Optim *o, int timed,
                          Row **rows, int *n)
{
    Remat *k = ctx_alloc(c, sizeof *k);
    Frontier f;
    if (remat_classify(c, g, p, k))
        return -1;
    k->rates = rates;
    if (solve_frontier(c, g, k, HUGE_VAL, &f))
        return -1;
    Row *all = ctx_alloc(c, ((size_t)*n + (size_t)f.n + 1) * sizeof *all);
    memcpy(all, *rows, (size_t)*n * sizeof *all);
    if (rows_of(c, g, p, k, o, &f, timed, all + *n))
        return -1;
    *n = staircase(all, *n + f.n);
    *rows = all;
    return 0;
}

/* The exact arena curve, down from the last row (the least recompute):
 * each next point the least recompute whose planned arena is below the
 * one before's (--max-arena a byte under it: fit_arena's walk), until no
 * plan fits, one is not proven (it is kept, the last), or ARENA_CURVE_WORK
 * (solves times nodes, so that a deep graph stops early: a count, the same
 * on every machine) runs out. Then the saved-bytes rows beyond the last
 * point that still fall in arena and rise in recompute. rows (n of them,
 * arena_frontier's) are replaced; *exact: the points proven so. */
#define ARENA_CURVE_WORK 8000
static int arena_curve(Ctx *c, const Graph *g, const Policy *p,
                       const Rates *rates, const Optim *o, int timed,
                       Row **rows, int *n, int *exact)
{
    Row *old = *rows;
    int k = 0;
    Row *out = ctx_alloc(c, (2 * (size_t)*n + ARENA_CURVE_WORK /
                             (size_t)g->nnodes + 2) * sizeof *out);
    out[k] = old[*n - 1];
    out[k++].proven = 1;
    for (long work = g->nnodes; work <= ARENA_CURVE_WORK; work += g->nnodes) {
        progress(c, "remat pareto: the least recompute below arena %.0f",
                 out[k - 1].arena);
        Ctx x;         /* (its own progress off: ctx_init zeroes it) */
        ctx_init(&x);
        Budget b = {BUDGET_NONE, 0, out[k - 1].arena - 1, rates, 0, {0, 0, 0},
                    0, 0, 0, 0, 0, NULL, 0};
        Compiled m;
        int rc = compile_budget(&x, g, p, &b, &m), proven = rc == 0 &&
                                                         m.remat->proven;
        /* at most the proven least of the plans keeping the boundaries:
         * the curve goes on below it, the point not counted exact */
        int onward = proven || (rc == 0 && m.remat->proven_kept);
        if (rc == 0) {      /* a plan below, the least or not */
            m.optim = *o;
            Summary s;
            summarize(&m, &s);
            out[k] = (Row){s.saved_bytes, s.arena_bytes, s.recompute_flops,
                           m.train->recompute_cost, 0, s.ram_bytes, proven,
                           m.remat->rebuild, NULL, NULL};
            if (timed && (out[k].ms = measure(&x, &m)) < 0) {
                memcpy(c->err, x.err, sizeof c->err);
                ctx_free(&x);
                return -1;
            }
            k++;
        }
        ctx_free(&x);
        if (!onward)
            break;
    }
    /* with the rows, the staircase: a point not proven (once boundaries
     * open the search proves less) may be beaten by a row or a later one */
    memcpy(out + k, old, (size_t)*n * sizeof *old);
    k = staircase(out, k + *n);
    *exact = 0;
    for (int i = 0; i < k; i++)
        *exact += out[i].proven;
    *rows = out;
    *n = k;
    return 0;
}

/* ---- the picture ---------------------------------------------------------- */

/* The plot runs from 0 on both axes to a round value past the largest, with
 * ticks on 1-2-5 steps in a unit the numbers read well in (KiB or MiB, µs or
 * ms); the legend is on the right. Each policy is labelled beside its
 * marker; policies on the same point share one label, and a label that
 * would cover another moves to a free place nearby (with a line to its
 * marker), judged by boxes from an estimated character width. */
#define W 660
#define H 420
#define L 80                /* margins: left, right (legend), top, bottom */
#define R 170
#define T 40
#define B 50
#define CHAR_W 7.2          /* a 12px sans-serif character, about */
#define ROW 14              /* a line of 12px text */

typedef struct {
    double top, step, scale;    /* data units: axis end, tick step, per unit */
    const char *unit;
} Axis;

typedef struct {
    Axis x, y;              /* x: recompute picoseconds, y: bytes */
} Axes;

static void axis_fit(Axis *a, double max, double scale, const char *unit)
{
    double m = max > 0 ? max / scale : 1;
    double step = nice_step(m, 5);
    a->step = step * scale;
    a->top = ceil(m / step - 1e-9) * step * scale;
    a->scale = scale;
    a->unit = unit;
}

static double px(const Axes *a, double cost)
{
    return L + cost / a->x.top * (W - L - R);
}

static double py(const Axes *a, double bytes)
{
    return H - B - bytes / a->y.top * (H - T - B);
}

static void svg_axes(Buf *s, const Axes *a, const char *y_what)
{
    buf_printf(s, "<g id=\"x-axis\">\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
               "y2=\"%d\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    for (int k = 0; k * a->x.step <= a->x.top * (1 + 1e-9); k++)
        buf_printf(s, "<text class=\"tick\" x=\"%.1f\" y=\"%d\" text-anchor="
                   "\"middle\">%g</text>\n", px(a, k * a->x.step), H - B + 16,
                   k * a->x.step / a->x.scale);
    buf_printf(s, "<text class=\"axis-title\" x=\"%d\" y=\"%d\" text-anchor="
               "\"middle\">recompute time per train step (%s, estimated)"
               "</text>\n</g>\n", (L + W - R) / 2, H - 12, a->x.unit);
    buf_printf(s, "<g id=\"y-axis\">\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
               "y2=\"%d\" stroke=\"black\"/>\n", L, T, L, H - B);
    for (int k = 0; k * a->y.step <= a->y.top * (1 + 1e-9); k++) {
        double y = py(a, k * a->y.step);
        if (k > 0)
            buf_printf(s, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                       "stroke=\"#dddddd\"/>\n", L, y, W - R, y);
        buf_printf(s, "<text class=\"tick\" x=\"%d\" y=\"%.1f\" text-anchor="
                   "\"end\">%g</text>\n", L - 6, y + 4,
                   k * a->y.step / a->y.scale);
    }
    buf_printf(s, "<text class=\"axis-title\" x=\"16\" y=\"%d\" transform="
               "\"rotate(-90 16 %d)\" text-anchor=\"middle\">%s bytes (%s)"
               "</text>\n</g>\n", (T + H - B) / 2, (T + H - B) / 2, y_what,
               a->y.unit);
}

static void svg_frontier(Buf *s, const Axes *a, const Row *rows, int n)
{
    buf_printf(s, "<polyline id=\"frontier\" fill=\"none\" stroke=\"#1f77b4\" "
               "stroke-width=\"2\" points=\"");
    for (int i = 0; i < n; i++) {
        if (i > 0)      /* a step: the same cost until the next plan */
            buf_printf(s, "%.1f,%.1f ", px(a, rows[i - 1].cost),
                       py(a, rows[i].bytes));
        buf_printf(s, "%.1f,%.1f ", px(a, rows[i].cost), py(a, rows[i].bytes));
    }
    buf_printf(s, "\"/>\n");
    for (int i = 0; i < n; i++)
        buf_printf(s, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
                   "fill=\"#1f77b4\"/>\n", px(a, rows[i].cost),
                   py(a, rows[i].bytes));
}

static void svg_legend(Buf *s, const char *y_what)
{
    int x = W - R + 20, y = T + 10;
    buf_printf(s, "<g id=\"legend\">\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
               "y2=\"%d\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n<circle "
               "cx=\"%d\" cy=\"%d\" r=\"3\" fill=\"#1f77b4\"/>\n<text "
               "class=\"legend-item\" x=\"%d\" y=\"%d\">optimal plans</text>\n",
               x, y, x + 16, y, x + 8, y, x + 22, y + 4);
    buf_printf(s, "<rect x=\"%d\" y=\"%d\" width=\"8\" height=\"8\" "
               "fill=\"#d62728\"/>\n<text class=\"legend-item\" x=\"%d\" "
               "y=\"%d\">built-in policy</text>\n", x + 4, y + ROW + 6,
               x + 22, y + ROW + 14);
    /* what a plan is, under the entries (20 characters fit) */
    buf_printf(s, "<text class=\"legend-note\" x=\"%d\" y=\"%d\" fill=\"#555555\">"
               "plan: the least</text>\n<text class=\"legend-note\" x=\"%d\" "
               "y=\"%d\" fill=\"#555555\">recompute time for</text>\n<text "
               "class=\"legend-note\" x=\"%d\" y=\"%d\" fill=\"#555555\">its %s "
               "bytes</text>\n</g>\n", x, y + 3 * ROW + 10, x, y + 4 * ROW + 10,
               x, y + 5 * ROW + 10, y_what);
}

/* Where the built-in policies fall: pb[k] saved bytes (by_arena: arena
 * bytes), pf[k] recompute FLOPs and pc[k] picoseconds at rates of
 * builtin_policies[k]; returns their number, or -1. */
#define MAX_MARKED 8
static int policy_points(Ctx *c, const Graph *g, const Rates *rates,
                         int by_arena, double *pb, double *pf, double *pc)
{
    int np = 0;
    for (int k = 0; builtin_policies[k] && k < MAX_MARKED; k++, np++) {
        Compiled m;
        Policy *p;
        Remat *r = ctx_alloc(c, sizeof *r);
        if (policy_load(c, builtin_policies[k], &p) || remat_decide(c, g, p, r))
            return -1;
        r->rates = rates;
        if (compile_decided(c, g, p, r, &m))
            return -1;
        Summary s;
        summarize(&m, &s);
        pb[np] = by_arena ? s.arena_bytes : s.saved_bytes;
        pf[np] = m.train->recompute_flops;
        pc[np] = m.train->recompute_cost;
    }
    return np;
}

/* A label's box, from its left end and baseline. */
typedef struct {
    double x0, y0, x1, y1;
} Box;

static Box text_box(double x, double y, const char *text)
{
    return (Box){x, y - 10, x + strlen(text) * CHAR_W, y + 3};
}

static int overlaps(Box a, Box b)
{
    return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

/* Where a label of text for the marker at (mx, my) goes, its left end and
 * baseline: beside the marker if that is free and inside the plot, else
 * rows further down, then up. Returns 1 when it moved away (a line then
 * joins it to its marker). */
static int place_label(const Box *taken, int n, double mx, double my,
                       const char *text, double *lx, double *ly)
{
    double w = strlen(text) * CHAR_W;
    const double cand[][2] = {{mx + 8, my + 4}, {mx - 8 - w, my + 4},
                              {mx - w / 2, my - 8}, {mx - w / 2, my + 18}};
    for (int k = 0; k < 4 + 2 * 40; k++) {
        int r = k < 4 ? 0 : (k - 4) / 2 + 1;     /* rows away */
        double x = k < 4 ? cand[k][0] : mx + 8;
        double y = k < 4 ? cand[k][1] : my + 4 + ((k - 4) % 2 ? -r : r) * ROW;
        Box b = text_box(x, y, text);
        int free = b.x0 >= L + 2 && b.x1 <= W - R - 2 && b.y0 >= T - 12 &&
                   b.y1 <= H - B - 2;
        for (int i = 0; free && i < n; i++)
            free = !overlaps(b, taken[i]);
        if (free) {
            *lx = x;
            *ly = y;
            return k >= 4;
        }
    }
    *lx = mx + 8;       /* nowhere free: beside it all the same */
    *ly = my + 4;
    return 0;
}

static Box dot_box(double x, double y, double r)
{
    return (Box){x - r, y - r, x + r, y + r};
}

/* A straight line of the staircase, with its stroke's width. */
static Box line_box(double x0, double y0, double x1, double y1)
{
    return (Box){fmin(x0, x1) - 1.5, fmin(y0, y1) - 1.5, fmax(x0, x1) + 1.5,
                 fmax(y0, y1) + 1.5};
}

/* The built-in policies' markers and labels; np points at pb (bytes) and
 * pc (picoseconds). Policies on one point (within a pixel) share a label.
 * A label keeps off the other labels, every marker and the staircase (its
 * dots and lines, as svg_frontier draws them). */
static void svg_policies(Ctx *c, Buf *s, const Axes *a, const Row *rows,
                         int n, const double *pb, const double *pc, int np)
{
    Box *taken = ctx_alloc(c, (3 * (size_t)n + 2 * np) * sizeof *taken);
    int nt = 0;
    for (int k = 0; k < np; k++)
        taken[nt++] = dot_box(px(a, pc[k]), py(a, pb[k]), 5);
    for (int i = 0; i < n; i++) {
        double x = px(a, rows[i].cost), y = py(a, rows[i].bytes);
        taken[nt++] = dot_box(x, y, 3);
        if (i == 0)
            continue;
        double x0 = px(a, rows[i - 1].cost), y0 = py(a, rows[i - 1].bytes);
        taken[nt++] = line_box(x0, y0, x0, y);
        taken[nt++] = line_box(x0, y, x, y);
    }
    buf_printf(s, "<g id=\"policies\">\n");
    for (int k = 0; k < np; k++) {
        double x = px(a, pc[k]), y = py(a, pb[k]);
        int first = 1;
        for (int j = 0; j < k && first; j++)
            first = fabs(px(a, pc[j]) - x) >= 1 || fabs(py(a, pb[j]) - y) >= 1;
        if (!first)
            continue;
        char *text = ctx_strdup(c, builtin_policies[k]);
        for (int j = k + 1; j < np; j++)
            if (fabs(px(a, pc[j]) - x) < 1 && fabs(py(a, pb[j]) - y) < 1)
                text = ctx_printf(c, "%s, %s", text, builtin_policies[j]);
        buf_printf(s, "<rect class=\"policy\" data-name=\"%s\" x=\"%.1f\" "
                   "y=\"%.1f\" width=\"8\" height=\"8\" fill=\"#d62728\"/>\n",
                   text, x - 4, y - 4);
        double lx, ly;
        if (place_label(taken, nt, x, y, text, &lx, &ly))
            buf_printf(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                       "stroke=\"#d62728\" stroke-width=\"0.5\"/>\n", x, y,
                       lx - 2, ly - 4);
        taken[nt++] = text_box(lx, ly, text);
        buf_printf(s, "<text class=\"policy-label\" x=\"%.1f\" y=\"%.1f\" "
                   "fill=\"#d62728\">%s</text>\n", lx, ly, text);
    }
    buf_printf(s, "</g>\n");
}

static int write_svg(Ctx *c, const Graph *g, const Rates *rates,
                     const Row *given, int n, int by_arena, const char *path)
{
    double pb[MAX_MARKED], pf[MAX_MARKED], pc[MAX_MARKED];
    int np = policy_points(c, g, rates, by_arena, pb, pf, pc);
    if (np < 0)
        return -1;
    Row *rows = ctx_alloc(c, ((size_t)n + 1) * sizeof *rows);
    double xmax = 0, ymax = 0;
    for (int i = 0; i < n; i++) {   /* the curve's bytes: saved or arena */
        rows[i] = given[i];
        rows[i].bytes = by_arena ? given[i].arena : given[i].bytes;
        xmax = fmax(xmax, rows[i].cost);
        ymax = fmax(ymax, rows[i].bytes);
    }
    for (int k = 0; k < np; k++) {
        xmax = fmax(xmax, pc[k]);
        ymax = fmax(ymax, pb[k]);
    }
    Axes a;
    double scale;
    const char *unit = time_unit(xmax, &scale);
    axis_fit(&a.x, xmax, scale, unit);
    unit = byte_unit(ymax, &scale);
    axis_fit(&a.y, ymax, scale, unit);
    const char *what = by_arena ? "arena" : "saved";
    Buf s;
    buf_init(&s, c);
    svg_begin(&s, W, H);
    buf_printf(&s, "<text id=\"title\" x=\"%d\" y=\"20\">", L);
    svg_escape(&s, g->name);
    buf_printf(&s, by_arena ? ": arena bytes against recompute, the plans "
               "that lower the arena</text>\n" : ": saved bytes against "
               "recompute, every optimal plan</text>\n");
    svg_axes(&s, &a, what);
    svg_frontier(&s, &a, rows, n);
    svg_policies(c, &s, &a, rows, n, pb, pc, np);
    svg_legend(&s, what);
    buf_printf(&s, "</svg>\n");
    return buf_write_file(&s, path);
}

/* ---- the table ------------------------------------------------------------ */

/* A policy's point is on the staircase when no plan saves at most its
 * bytes with a cheaper recompute (it may be a plan itself). */
static int on_frontier(const Row *rows, int n, double bytes, double cost)
{
    for (int i = 0; i < n; i++)
        if (rows[i].bytes <= bytes && rows[i].cost < cost)
            return 0;
    return 1;
}

/* spaced_rows' walk over the spaced plans: every plan's row, and when
 * timed its plan too (the staircase then decides which are built). */
typedef struct {
    Ctx *c, *scratch;
    const Graph *g;
    Remat *r;
    const Schedule *fwd;
    const Optim *o;
    Row *rows;
    int n, cap, failed;
    int timed;              /* keep each row's plan, to build it */
} Spaced;

static int spaced_row(void *ctx, const char *recompute, int rebuild,
                      const int *hold)
{
    Spaced *s = ctx;
    s->r->rebuild = rebuild;
    s->r->hold = hold;
    remat_apply(s->g, s->r, recompute);
    Row row;
    int rc = fast_row(s->scratch, s->g, s->r, s->fwd, s->o, &row);
    s->r->hold = NULL;
    ctx_reset(s->scratch);
    if (rc) {
        memcpy(s->c->err, s->scratch->err, sizeof s->c->err);
        return s->failed = 1;
    }
    if (s->n == s->cap) {
        s->cap = 2 * s->cap + 16;
        Row *more = ctx_alloc(s->c, (size_t)s->cap * sizeof *more);
        memcpy(more, s->rows, (size_t)s->n * sizeof *more);
        s->rows = more;
    }
    row.rebuild = rebuild;
    row.hold = NULL;
    if (s->timed) {
        size_t nt = (size_t)s->g->ntensors;
        row.recompute = ctx_alloc(s->c, nt);
        memcpy(row.recompute, recompute, nt);
        if (hold) {
            row.hold = ctx_alloc(s->c, nt * sizeof *row.hold);
            memcpy(row.hold, hold, nt * sizeof *row.hold);
        }
    }
    s->rows[s->n++] = row;
    return 0;
}

/* Nested checkpointing's spaced plans (solve_spaced_plans) as rows too,
 * joined to *rows as one staircase: the walk down (arena_curve) proves
 * each point but stops where a proof gives out, and where no plan that
 * recomputes each tensor once fits (the boundaries' working set) only the
 * plans that rebuild at each use go lower. None of them is proven; timed,
 * the ones left on the staircase are built and timed. */
static int spaced_rows(Ctx *c, const Graph *g, const Policy *p, Remat *r,
                       const Optim *o, int timed, Row **rows, int *n,
                       int *exact)
{
    Schedule fwd;
    memset(&fwd, 0, sizeof fwd);
    r->rebuild = REBUILD_NONE;
    remat_apply(g, r, NULL);
    if (schedule_build(c, g, r, SCHED_FORWARD, &fwd) || plan_arena(c, &fwd, 0))
        return -1;
    Ctx scratch;
    ctx_init(&scratch);
    Spaced s = {c, &scratch, g, r, &fwd, o, NULL, 0, 0, 0, timed};
    progress(c, "remat pareto: nested checkpointing's spaced plans");
    solve_spaced_plans(g, r, spaced_row, &s);
    ctx_free(&scratch);
    r->rebuild = REBUILD_NONE;
    if (s.failed)
        return -1;
    Row *all = ctx_alloc(c, ((size_t)*n + (size_t)s.n + 1) * sizeof *all);
    memcpy(all, *rows, (size_t)*n * sizeof *all);
    memcpy(all + *n, s.rows, (size_t)s.n * sizeof *all);
    int k = staircase(all, *n + s.n);
    *exact = 0;
    for (int i = 0; i < k; i++) {
        *exact += all[i].proven;
        if (!timed || !all[i].recompute)
            continue;
        r->rebuild = all[i].rebuild;
        r->hold = all[i].hold;
        remat_apply(g, r, all[i].recompute);
        if (full_row(c, g, p, r, o, timed, &all[i]))
            return -1;
    }
    r->rebuild = REBUILD_NONE;
    r->hold = NULL;
    *rows = all;
    *n = k;
    return 0;
}

/* For the header: how many rows rebuild at each use, if any. */
static const char *rebuilding(Ctx *c, const Row *rows, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += rows[i].rebuild != REBUILD_NONE;
    return k ? ctx_printf(c, "; %d rebuilding at each use", k) : "";
}

/* The table's rows and the built-in policies' points, one JSON object. */
static int pareto_json(Ctx *c, const Graph *g, const Policy *p,
                       const Rates *rates, const Frontier *f, const Row *rows,
                       int n, double lo, double hi, int timed, int by_arena,
                       int exact, Buf *out)
{
    double pb[MAX_MARKED], pf[MAX_MARKED], pc[MAX_MARKED];
    int np = policy_points(c, g, rates, 0, pb, pf, pc);
    if (np < 0)
        return -1;
    buf_printf(out, "{\"graph\": ");
    buf_json_string(out, g->name);
    buf_printf(out, ", \"forward_only\": %s, \"policy\": ",
               graph_trains(g) ? "false" : "true");
    buf_json_string(out, p->name);
    buf_printf(out, ", \"proven\": %s, \"by\": \"%s\",",
               f->proven ? "true" : "false", by_arena ? "arena" : "saved");
    if (by_arena)   /* the rows proven the least recompute in their arena */
        buf_printf(out, " \"arena_rows_proven\": %d,", exact);
    buf_printf(out, "\n \"plans\": [");
    for (int i = 0; i < n; i++) {
        buf_printf(out, "%s\n  {\"budget\": ", i ? "," : "");
        buf_json_number(out, hi > lo ? (rows[i].bytes - lo) / (hi - lo) : 0);
        buf_printf(out, ", \"saved_bytes\": %.0f, \"arena_bytes\": %.0f, "
                   "\"recompute_flops\": %.0f, \"recompute_seconds\": ",
                   rows[i].bytes, rows[i].arena, rows[i].flops);
        buf_json_number(out, rows[i].cost / PS_PER_S);
        if (timed) {
            buf_printf(out, ", \"ms_per_step\": ");
            buf_json_number(out, rows[i].ms);
        }
        buf_printf(out, ", \"ram_bytes\": %.0f", rows[i].ram);
        if (by_arena)   /* as schedule --json's rebuild */
            buf_printf(out, ", \"rebuild\": \"%s\"",
                       rows[i].rebuild ? "yes" : "no");
        buf_printf(out, "}");
    }
    buf_printf(out, "],\n \"policies\": [");
    for (int k = 0; k < np; k++) {
        buf_printf(out, "%s\n  {\"name\": ", k ? "," : "");
        buf_json_string(out, builtin_policies[k]);
        buf_printf(out, ", \"saved_bytes\": %.0f, \"recompute_flops\": %.0f, "
                   "\"recompute_seconds\": ", pb[k], pf[k]);
        buf_json_number(out, pc[k] / PS_PER_S);
        buf_printf(out, ", \"on_frontier\": %s}",
                   on_frontier(rows, n, pb[k], pc[k]) ? "true" : "false");
    }
    buf_printf(out, "]}\n");
    return 0;
}

int report_pareto(Ctx *c, Graph *g, const Policy *p, const Rates *rates,
                  const Optim *o, int timed, int json, int by_arena,
                  const char *svg, Buf *out)
{
    Remat *r = ctx_alloc(c, sizeof *r);
    Frontier f;
    if (!rates)
        rates = rates_builtin();
    /* by arena, compact forms are kept (solve_live_at's bounds) */
    if (analyze_graph(c, g) ||
        (by_arena ? remat_classify_open : remat_classify_budget)(c, g, p, r))
        return -1;
    r->rates = rates;
    progress(c, "remat pareto: finding every optimal plan of %s", g->name);
    if (solve_frontier(c, g, r, HUGE_VAL, &f))
        return -1;
    if (f.overflow)
        return ctx_error(c, g->file, f.overflow->line, "node '%s': the "
                         "frontier's states exceed %d here (too many "
                         "independent recompute choices meet); a single "
                         "--budget is still solved, by branch and bound",
                         f.overflow->name, MAX_FRONTIER_STATES);
    Row *rows = ctx_alloc(c, ((size_t)f.n + 1) * sizeof *rows);
    if (rows_of(c, g, p, r, o, &f, timed, rows))
        return -1;
    int n = by_arena ? arena_frontier(rows, f.n) : f.n;
    int exact = graph_trains(g) ? 0 : n;    /* forward only: no recompute */
    if (by_arena && graph_trains(g) && g->nblocks > 0 && n > 0 &&
        with_kept_rows(c, g, p, rates, o, timed, &rows, &n))
        return -1;
    if (by_arena && graph_trains(g) && n > 0 &&
        (arena_curve(c, g, p, rates, o, timed, &rows, &n, &exact) ||
         spaced_rows(c, g, p, r, o, timed, &rows, &n, &exact)))
        return -1;
    double lo, hi;
    budget_ends(c, g, &lo, &hi);
    if (json)
        return pareto_json(c, g, p, rates, &f, rows, n, lo, hi, timed,
                           by_arena, exact, out) ||
               (svg && write_svg(c, g, rates, rows, n, by_arena, svg)) ? -1
                                                                       : 0;
    buf_printf(out, "# model %s, policy %s: %d optimal plans%s%s%s\n", g->name,
               p->name, f.n, f.proven ? ", proven" : " (not proven: a "
               "frontier was thinned)", by_arena ? ctx_printf(c, "; by arena "
               "%d, each needing less arena than every one with less "
               "recompute (%s%s)", n, exact == n ? "each the least recompute "
               "within its arena, proven" : ctx_printf(c, "%d of them proven "
               "the least recompute within their arena, the others the best "
               "plans found", exact), rebuilding(c, rows, n)) : "",
               graph_trains(g) ? "" :
               "; forward "
               "only (no output is the loss): nothing is saved or recomputed");
    buf_printf(out, "%8s  %12s  %12s  %16s  %18s%s  %12s\n", "budget",
               "saved_bytes", "arena_bytes", "recompute_flops",
               "recompute_seconds", timed ? "  ms_per_step" : "", "ram_bytes");
    for (int i = 0; i < n; i++) {
        double frac = hi > lo ? (rows[i].bytes - lo) / (hi - lo) : 0;
        buf_printf(out, "%8.4f  %12.0f  %12.0f  %16.0f  %18.12f", frac,
                   rows[i].bytes, rows[i].arena, rows[i].flops,
                   rows[i].cost / PS_PER_S);
        if (timed)
            buf_printf(out, "  %11.3f", rows[i].ms);
        buf_printf(out, "  %12.0f\n", rows[i].ram);
    }
    return svg ? write_svg(c, g, rates, rows, n, by_arena, svg) : 0;
}
