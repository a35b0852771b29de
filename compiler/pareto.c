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
    const BuildOptions host = {0, NULL, 0};
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
                    Row *row)
{
    Schedule train;
    memset(&train, 0, sizeof train);
    if (schedule_build(x, g, r, SCHED_TRAIN, &train) || plan_arena(x, &train))
        return -1;
    const Schedule *big = train.arena_bytes > fwd->arena_bytes ? &train : fwd;
    *row = (Row){(double)r->saved_bytes, (double)big->arena_bytes,
                 train.recompute_flops, train.recompute_cost, 0};
    return 0;
}

/* A row from the whole compilation, and timed, its trainer's ms per step. */
static int full_row(Ctx *c, const Graph *g, const Policy *p, Remat *r,
                    int timed, Row *row)
{
    Compiled m;
    if (compile_decided(c, g, p, r, &m))
        return -1;
    Summary s;
    summarize(&m, &s);    /* as the fast rows: summarize's figures */
    *row = (Row){s.saved_bytes, s.arena_bytes, s.recompute_flops,
                 m.train->recompute_cost, 0};
    return timed && (row->ms = measure(c, &m)) < 0 ? -1 : 0;
}

/* Each plan's row. Unmeasured, only what a row shows is built: the
 * training schedule and its arena per plan, the forward schedule once (it
 * runs no recompute, so every plan's is the same), each plan's scratch in
 * a context reset after its row: a frontier of a thousand plans of a deep
 * model costs one plan's memory, not a thousand. */
static int rows_of(Ctx *c, const Graph *g, const Policy *p, Remat *r,
                   const Frontier *f, int timed, Row *rows)
{
    int fast = !timed && graph_trains(g);
    Schedule fwd;
    memset(&fwd, 0, sizeof fwd);
    if (fast && (schedule_build(c, g, r, SCHED_FORWARD, &fwd) ||
                 plan_arena(c, &fwd)))
        return -1;
    Ctx scratch;
    ctx_init(&scratch);
    for (int i = 0; i < f->n; i++) {
        remat_apply(g, r, f->plans[i].recompute);
        int rc = fast ? fast_row(&scratch, g, r, &fwd, &rows[i])
                      : full_row(c, g, p, r, timed, &rows[i]);
        ctx_reset(&scratch);
        if (rc) {
            ctx_free(&scratch);
            return -1;
        }
        assert(rows[i].bytes == f->plans[i].bytes &&
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

/* ---- the picture ---------------------------------------------------------- */

#define W 640
#define H 420
#define L 80                /* margins: left, right, top, bottom */
#define R 150
#define T 30
#define B 50

typedef struct {
    double x0, x1, y0, y1;  /* data ranges: picoseconds, bytes */
} Axes;

static double px(const Axes *a, double cost)
{
    double span = a->x1 > a->x0 ? a->x1 - a->x0 : 1;
    return L + (cost - a->x0) / span * (W - L - R);
}

static double py(const Axes *a, double bytes)
{
    double span = a->y1 > a->y0 ? a->y1 - a->y0 : 1;
    return H - B - (bytes - a->y0) / span * (H - T - B);
}

static void svg_axes(Buf *s, const Axes *a, const char *title,
                     const char *y_title)
{
    svg_begin(s, W, H);
    buf_printf(s, "<text x=\"%d\" y=\"18\">", L);
    svg_escape(s, title);
    buf_printf(s, "</text>\n");
    buf_printf(s, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
               "stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    buf_printf(s, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
               "stroke=\"black\"/>\n", L, T, L, H - B);
    for (int i = 0; i <= 4; i++) {
        double fx = a->x0 + (a->x1 - a->x0) * i / 4;
        double by = a->y0 + (a->y1 - a->y0) * i / 4;
        buf_printf(s, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">"
                   "%.3g</text>\n", px(a, fx), H - B + 16, fx / 1e9);
        buf_printf(s, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">"
                   "%.4g</text>\n", L - 6, py(a, by) + 4, by / 1024);
    }
    buf_printf(s, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">recompute "
               "ms per train step (estimated)</text>\n", (L + W - R) / 2,
               H - 12);
    buf_printf(s, "<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" "
               "text-anchor=\"middle\">%s KiB</text>\n", (T + H - B) / 2,
               (T + H - B) / 2, y_title);
}

static void svg_frontier(Buf *s, const Axes *a, const Row *rows, int n)
{
    buf_printf(s, "<polyline fill=\"none\" stroke=\"#1f77b4\" "
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

static void svg_policy(Buf *s, const Axes *a, const char *name, double bytes,
                       double cost, int k)
{
    double x = px(a, cost), y = py(a, bytes);
    buf_printf(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" "
               "fill=\"#d62728\"/>\n", x - 4, y - 4);
    buf_printf(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%d\" y2=\"%d\" "
               "stroke=\"#d62728\" stroke-dasharray=\"2,2\"/>\n", x, y,
               W - R + 10, T + 20 * k + 10);
    buf_printf(s, "<text x=\"%d\" y=\"%d\" fill=\"#d62728\">%s</text>\n",
               W - R + 14, T + 20 * k + 14, name);
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

static int write_svg(Ctx *c, const Graph *g, const Rates *rates,
                     const Row *given, int n, int by_arena, const char *path)
{
    double pb[MAX_MARKED], pf[MAX_MARKED], pc[MAX_MARKED];
    int np = policy_points(c, g, rates, by_arena, pb, pf, pc);
    Axes a = {0, 0, 0, 0};
    Row *rows = ctx_alloc(c, ((size_t)n + 1) * sizeof *rows);
    if (np < 0)
        return -1;
    for (int i = 0; i < n; i++) {   /* the curve's bytes: saved or arena */
        rows[i] = given[i];
        rows[i].bytes = by_arena ? given[i].arena : given[i].bytes;
        a.x1 = fmax(a.x1, rows[i].cost);
        a.y1 = fmax(a.y1, rows[i].bytes);
    }
    for (int k = 0; k < np; k++) {
        a.x1 = fmax(a.x1, pc[k]);
        a.y1 = fmax(a.y1, pb[k]);
    }
    a.x1 *= 1.05;
    a.y1 *= 1.05;
    Buf s;
    buf_init(&s, c);
    svg_axes(&s, &a,
             by_arena ? ctx_printf(c, "%s: arena bytes against recompute, "
                                   "the plans that lower the arena", g->name)
                      : ctx_printf(c, "%s: saved bytes against recompute, "
                                   "every optimal plan", g->name),
             by_arena ? "arena" : "saved");
    svg_frontier(&s, &a, rows, n);
    for (int k = 0; k < np; k++)
        svg_policy(&s, &a, builtin_policies[k], pb[k], pc[k], k);
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

/* The table's rows and the built-in policies' points, one JSON object. */
static int pareto_json(Ctx *c, const Graph *g, const Policy *p,
                       const Rates *rates, const Frontier *f, const Row *rows,
                       int n, double lo, double hi, int timed, int by_arena,
                       Buf *out)
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
    buf_printf(out, ", \"proven\": %s, \"by\": \"%s\",\n \"plans\": [",
               f->proven ? "true" : "false", by_arena ? "arena" : "saved");
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
                  int timed, int json, int by_arena, const char *svg, Buf *out)
{
    Remat *r = ctx_alloc(c, sizeof *r);
    Frontier f;
    if (!rates)
        rates = rates_builtin();
    if (infer_shapes(c, g) || autodiff(c, g) || remat_classify(c, g, p, r))
        return -1;
    r->rates = rates;
    if (solve_frontier(c, g, r, HUGE_VAL, &f))
        return -1;
    if (f.overflow)
        return ctx_error(c, g->file, f.overflow->line, "node '%s': the "
                         "frontier's states exceed %d here (too many "
                         "independent recompute choices meet); a single "
                         "--budget is still solved, by branch and bound",
                         f.overflow->name, MAX_FRONTIER_STATES);
    Row *rows = ctx_alloc(c, ((size_t)f.n + 1) * sizeof *rows);
    if (rows_of(c, g, p, r, &f, timed, rows))
        return -1;
    int n = by_arena ? arena_frontier(rows, f.n) : f.n;
    double lo, hi;
    budget_ends(c, g, &lo, &hi);
    if (json)
        return pareto_json(c, g, p, rates, &f, rows, n, lo, hi, timed,
                           by_arena, out) ||
               (svg && write_svg(c, g, rates, rows, n, by_arena, svg)) ? -1
                                                                       : 0;
    buf_printf(out, "# model %s, policy %s: %d optimal plans%s%s%s\n", g->name,
               p->name, f.n, f.proven ? ", proven" : " (not proven: a "
               "frontier was thinned)", by_arena ? ctx_printf(c, "; by arena "
               "%d, each needing less arena than every one with less "
               "recompute", n) : "", graph_trains(g) ? "" : "; forward "
               "only (no output is the loss): nothing is saved or recomputed");
    buf_printf(out, "%8s  %12s  %12s  %16s  %18s%s\n", "budget", "saved_bytes",
               "arena_bytes", "recompute_flops", "recompute_seconds",
               timed ? "  ms_per_step" : "");
    for (int i = 0; i < n; i++) {
        double frac = hi > lo ? (rows[i].bytes - lo) / (hi - lo) : 0;
        buf_printf(out, "%8.4f  %12.0f  %12.0f  %16.0f  %18.12f", frac,
                   rows[i].bytes, rows[i].arena, rows[i].flops,
                   rows[i].cost / PS_PER_S);
        if (timed)
            buf_printf(out, "  %11.3f", rows[i].ms);
        buf_printf(out, "\n");
    }
    return svg ? write_svg(c, g, rates, rows, n, by_arena, svg) : 0;
}
