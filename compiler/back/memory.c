/*
 * memory.c: what fills the arena at each statement of the train step.
 *
 * Every value of the schedule (schedule.c) holds its 64-byte aligned size
 * from the statement that defines it to the last that reads it, as plan.c
 * counts it for peak_live_bytes; a view holds nothing. Each value falls in
 * one of five kinds:
 *
 *   saved       a forward value the backward still reads (SAVE)
 *   forward     any other forward value (dead before the backward)
 *   recomputed  a value rebuilt in the backward (RECOMPUTE)
 *   gradient    an activation's gradient
 *   scratch     a kernel's own space for one statement
 *
 * Summed per statement they give a stacked area whose top is the live
 * total; its highest point is peak_live_bytes, the bound no layout of this
 * schedule beats, so the picture says which kind to shrink to lower it.
 * Without a picture the same figures come as `key: value` text.
 */
#include "back.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const hold_names[NHOLDS] = {
    "saved", "forward", "recomputed", "gradient", "scratch"};
static const char *const kind_colors[NHOLDS] = {
    "#1f77b4", "#aec7e8", "#ff7f0e", "#2ca02c", "#9467bd"};

#define TOP 5               /* the largest values named at the peak */

typedef struct {
    double bytes;
    int value;
} Held;

typedef struct {
    const Compiled *m;
    const Schedule *s;
    int n;                  /* statements */
    int boundary;           /* the first backward statement (n: none) */
    double *live[NHOLDS];   /* per statement, bytes of each kind */
    double *total;
    int peak;               /* the first statement with the most bytes */
    Held top[TOP];
    int ntop;
} Mem;

static double aligned(size_t bytes)
{
    return (double)((bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN);
}

static int kind_of(const Mem *x, const Value *v)
{
    switch (v->kind) {
    case V_FWD: return v->last >= x->boundary ? HOLD_SAVED : HOLD_FORWARD;
    case V_RECOMP: return HOLD_RECOMPUTED;
    case V_GRAD: return HOLD_GRADIENT;
    case V_SCRATCH: return HOLD_SCRATCH;
    case V_COMPACT:     /* kept for the backward alone, or rebuilt for it */
        return x->s->stmts[v->def].recompute ? HOLD_RECOMPUTED : HOLD_SAVED;
    }
    return HOLD_SCRATCH;
}

static int heavier(const void *a, const void *b)
{
    const Held *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->value < y->value ? -1 : x->value > y->value;
}

/* The TOP largest values live at the peak, ties to the earlier value. */
static void find_top(Ctx *c, Mem *x)
{
    const Schedule *s = x->s;
    Held *all = ctx_alloc(c, ((size_t)s->nvalues + 1) * sizeof *all);
    int n = 0;
    for (int k = 0; k < s->nvalues; k++) {
        const Value *v = &s->values[k];
        if (v->view == VIEW_NONE && v->def <= x->peak && x->peak <= v->last)
            all[n++] = (Held){aligned(v->bytes), k};
    }
    qsort(all, (size_t)n, sizeof *all, heavier);
    x->ntop = n < TOP ? n : TOP;
    memcpy(x->top, all, (size_t)x->ntop * sizeof *all);
}

/* Per-kind bytes at every statement of s (one of m's steps), from +size
 * at def and -size after last, as plan.c's peak_live sums them. */
static void measure(Ctx *c, const Compiled *m, const Schedule *s, Mem *x)
{
    x->m = m;
    x->s = s;
    x->n = s->nstmts;
    x->boundary = s->nstmts;
    for (int i = 0; i < s->nstmts; i++)
        if (s->stmts[i].kind == S_SEED) {
            x->boundary = i;
            break;
        }
    for (int k = 0; k < NHOLDS; k++)
        x->live[k] = ctx_alloc(c, ((size_t)x->n + 1) * sizeof(double));
    x->total = ctx_alloc(c, ((size_t)x->n + 1) * sizeof(double));
    for (int k = 0; k < s->nvalues; k++) {
        const Value *v = &s->values[k];
        if (v->view != VIEW_NONE)
            continue;
        double *d = x->live[kind_of(x, v)];
        d[v->def] += aligned(v->bytes);
        d[v->last + 1 < x->n ? v->last + 1 : x->n] -= aligned(v->bytes);
    }
    for (int k = 0; k < NHOLDS; k++)
        for (int i = 0; i < x->n; i++) {
            if (i > 0)
                x->live[k][i] += x->live[k][i - 1];
            x->total[i] += x->live[k][i];
        }
    x->peak = 0;
    for (int i = 1; i < x->n; i++)
        if (x->total[i] > x->total[x->peak])
            x->peak = i;
    assert(x->n == 0 || x->total[x->peak] == (double)s->peak_live_bytes);
    find_top(c, x);
}

static const char *value_name(Ctx *c, const Mem *x, const Value *v)
{
    const Graph *g = x->m->g;
    if (v->kind == V_SCRATCH)
        return ctx_printf(c, "scratch of %s",
                          g->nodes[x->s->stmts[v->def].node].name);
    const char *t = g->tensors[v->tensor].name;
    if (v->kind == V_COMPACT)
        return ctx_printf(c, "%s compact for %s",
                          t, g->nodes[x->s->stmts[v->def].node].name);
    return v->kind == V_GRAD ? ctx_printf(c, "d(%s)", t) : t;
}

/* What a statement does, for the peak's label and the text: a node's
 * forward, recompute or backward with its op ("backward MatMul l3.fc2"),
 * or what it does to a tensor ("zero d(x)"). */
static const char *stmt_text(Ctx *c, const Graph *g, const Stmt *st)
{
    const char *node = st->node >= 0 ? g->nodes[st->node].name : "";
    const char *op = st->node >= 0 ? op_table[g->nodes[st->node].op].name : "";
    const char *t = st->tensor >= 0 ? g->tensors[st->tensor].name : "";
    switch (st->kind) {
    case S_FORWARD:
        return ctx_printf(c, "%s %s %s", st->recompute ? "recompute" : "forward",
                          op, node);
    case S_BACKWARD: return ctx_printf(c, "backward %s %s", op, node);
    case S_OUTPUT: return ctx_printf(c, "output %s", t);
    case S_SEED: return ctx_printf(c, "seed d(%s)", t);
    case S_ZERO: return ctx_printf(c, "zero d(%s)", t);
    case S_GRAD_VIEW: return ctx_printf(c, "view d(%s)", t);
    case S_UPDATE: return ctx_printf(c, "update %s", t);
    }
    return "";
}

/* ---- the peak, for schedule's report too ----------------------------------- */

static void peak_of(Ctx *c, const Mem *x, Peak *p)
{
    memset(p, 0, sizeof *p);
    p->statement = -1;
    p->does = "";
    if (x->n == 0)
        return;
    p->statement = x->peak;
    p->does = stmt_text(c, x->m->g, &x->s->stmts[x->peak]);
    p->backward = x->peak >= x->boundary;
    for (int k = 0; k < NHOLDS; k++)
        p->bytes[k] = x->live[k][x->peak];
}

void find_peak(Ctx *c, const Compiled *m, const Schedule *s, Peak *p)
{
    Mem x;
    memset(&x, 0, sizeof x);
    measure(c, m, s, &x);
    peak_of(c, &x, p);
}

/* Why the arena peaks where it does, which is why a plan that saves less
 * can need more arena than one that saves more. Recomputed values at the
 * peak: each is rebuilt ahead of the backward that reads it, with the
 * inputs its rebuild needed, and stays live until read, so together they
 * can outweigh the saved bytes they replace. Else, in the backward, the
 * saved tensors still to be read: a plan saving fewer bytes in all can
 * hold more of them there (those its backward reads last). Else, in the
 * forward: which tensors are saved so far, and each buffer's rounding up
 * to ARENA_ALIGN, decide it rather than the saved bytes in all. */
const char *peak_note(Ctx *c, const Peak *p)
{
    if (p->statement < 0)
        return NULL;
    if (p->bytes[HOLD_RECOMPUTED] > 0)
        return ctx_printf(c, "%.0f bytes here are recomputed values, live "
                          "from their rebuild to their backward: they can "
                          "outweigh the saved bytes they replace, so saving "
                          "less can need a larger arena",
                          p->bytes[HOLD_RECOMPUTED]);
    if (p->backward)
        return ctx_printf(c, "no recomputed value is live here; %.0f bytes "
                          "of saved tensors still to be read are: the arena "
                          "follows the saved tensors live here (those the "
                          "backward reads last), not the saved bytes in all",
                          p->bytes[HOLD_SAVED]);
    return ctx_printf(c, "the peak is in the forward: %.0f bytes saved so "
                      "far and %.0f of values in flight; the arena follows "
                      "which tensors are saved, each buffer rounded up to "
                      "%d bytes, not the saved bytes in all",
                      p->bytes[HOLD_SAVED], p->bytes[HOLD_FORWARD],
                      ARENA_ALIGN);
}

void report_peak(Buf *b, const Peak *p)
{
    if (p->statement < 0)
        return;
    buf_printf(b, "peak_statement: %d\npeak_does: %s\n", p->statement, p->does);
    for (int k = 0; k < NHOLDS; k++)
        buf_printf(b, "peak_%s_bytes: %.0f\n", hold_names[k], p->bytes[k]);
    const char *note = peak_note(b->ctx, p);
    if (note)
        buf_printf(b, "peak_note: %s\n", note);
}

/* ---- the text ------------------------------------------------------------- */

static void memory_text(Ctx *c, const Mem *x, Buf *out)
{
    const Graph *g = x->m->g;
    buf_printf(out, "# model %s, policy %s: %s of %d statements", g->name,
               x->m->policy->name, graph_trains(g) ? "train step"
               : "forward (forward only: no output is the loss)", x->n);
    if (x->boundary < x->n)
        buf_printf(out, ", backward from statement %d", x->boundary);
    buf_printf(out, "\narena_bytes: %zu\npeak_live_bytes: %zu\n",
               x->s->arena_bytes, x->s->peak_live_bytes);
    Ram r;          /* what the device holds besides, as schedule says */
    ram_of(x->m, &r);
    buf_printf(out, "ram_bytes: %.0f\nflash_bytes: %.0f\n", ram_total(&r),
               r.flash);
    if (x->n == 0)
        return;
    Peak p;
    peak_of(c, x, &p);
    report_peak(out, &p);
    buf_printf(out, "largest at the peak:\n");
    for (int i = 0; i < x->ntop; i++) {
        const Value *v = &x->s->values[x->top[i].value];
        buf_printf(out, "  %10.0f  %-10s  %s\n", x->top[i].bytes,
                   hold_names[kind_of(x, v)], value_name(c, x, v));
    }
}

/* ---- the JSON ------------------------------------------------------------- */

static void json_peak(Ctx *c, const Mem *x, Buf *out)
{
    Peak p;
    peak_of(c, x, &p);
    buf_printf(out, " \"peak\": {\"statement\": %d, \"does\": ", p.statement);
    buf_json_string(out, p.does);
    for (int k = 0; k < NHOLDS; k++)
        buf_printf(out, ", \"%s_bytes\": %.0f", hold_names[k], p.bytes[k]);
    const char *note = peak_note(c, &p);
    buf_printf(out, ", \"note\": ");
    if (note)
        buf_json_string(out, note);
    else
        buf_printf(out, "null");
    buf_printf(out, "},\n \"largest\": [");
    for (int i = 0; i < x->ntop; i++) {
        const Value *v = &x->s->values[x->top[i].value];
        buf_printf(out, "%s{\"bytes\": %.0f, \"kind\": \"%s\", \"name\": ",
                   i ? ", " : "", x->top[i].bytes, hold_names[kind_of(x, v)]);
        buf_json_string(out, value_name(c, x, v));
        buf_printf(out, "}");
    }
    buf_printf(out, "],\n");
}

/* The text's figures, and per kind the bytes live at every statement (the
 * picture's stacked area), for a program that draws or compares them. */
static void memory_json(Ctx *c, const Mem *x, Buf *out)
{
    const Graph *g = x->m->g;
    Ram r;
    ram_of(x->m, &r);
    buf_printf(out, "{\"graph\": ");
    buf_json_string(out, g->name);
    buf_printf(out, ", \"policy\": ");
    buf_json_string(out, x->m->policy->name);
    buf_printf(out, ", \"forward_only\": %s, \"statements\": %d, "
               "\"backward_from\": ", graph_trains(g) ? "false" : "true", x->n);
    if (x->boundary < x->n)
        buf_printf(out, "%d", x->boundary);
    else
        buf_printf(out, "null");
    buf_printf(out, ",\n \"arena_bytes\": %zu, \"peak_live_bytes\": %zu, "
               "\"ram_bytes\": %.0f, \"flash_bytes\": %.0f,\n",
               x->s->arena_bytes, x->s->peak_live_bytes, ram_total(&r), r.flash);
    if (x->n > 0)
        json_peak(c, x, out);
    buf_printf(out, " \"live\": {");
    for (int k = 0; k < NHOLDS; k++) {
        buf_printf(out, "%s\n  \"%s\": [", k ? "," : "", hold_names[k]);
        for (int i = 0; i < x->n; i++)
            buf_printf(out, "%s%.0f", i ? ", " : "", x->live[k][i]);
        buf_printf(out, "]");
    }
    buf_printf(out, "}}\n");
}

/* ---- the picture ---------------------------------------------------------- */

#define W 900
#define H 480
#define L 90                /* margins: left, right (legend, list), top, bottom */
#define R 270
#define T 60
#define B 50

typedef struct {
    int n;                  /* statements: x runs over [0, n] */
    double ymax, scale;     /* top of the y axis; bytes per unit */
    const char *unit;
} Axes;

static double px(const Axes *a, double i)
{
    return L + i / (a->n > 0 ? a->n : 1) * (W - L - R);
}

static double py(const Axes *a, double bytes)
{
    return H - B - bytes / a->ymax * (H - T - B);
}

static void svg_title(Buf *s, const Mem *x)
{
    const Graph *g = x->m->g;
    buf_printf(s, "<text id=\"title\" x=\"%d\" y=\"20\" font-size=\"14\">", L);
    svg_escape(s, g->name);
    buf_printf(s, ", policy ");
    svg_escape(s, x->m->policy->name);
    buf_printf(s, ": arena_bytes %zu, peak_live_bytes %zu</text>\n",
               x->s->arena_bytes, x->s->peak_live_bytes);
    buf_printf(s, "<text x=\"%d\" y=\"38\">bytes live at each statement of "
               "the %s, by what holds them</text>\n", L,
               graph_trains(g) ? "train step" : "forward (forward only)");
}

static void svg_axes(Buf *s, const Axes *a, double ystep)
{
    buf_printf(s, "<g id=\"x-axis\">\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
               "y2=\"%d\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    double xstep = nice_step(a->n, 6);
    xstep = xstep < 1 ? 1 : xstep;
    for (double i = 0; i <= a->n; i += xstep)
        buf_printf(s, "<text class=\"tick\" x=\"%.1f\" y=\"%d\" "
                   "text-anchor=\"middle\">%.0f</text>\n", px(a, i),
                   H - B + 16, i);
    buf_printf(s, "<text class=\"axis-title\" x=\"%d\" y=\"%d\" "
               "text-anchor=\"middle\">statement (index in the step)</text>"
               "\n</g>\n", (L + W - R) / 2, H - 12);
    buf_printf(s, "<g id=\"y-axis\">\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
               "y2=\"%d\" stroke=\"black\"/>\n", L, T, L, H - B);
    for (double b = 0; b <= a->ymax * (1 + 1e-9); b += ystep) {
        buf_printf(s, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                   "stroke=\"#dddddd\"/>\n", L, py(a, b), W - R, py(a, b));
        buf_printf(s, "<text class=\"tick\" x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\">%g %s</text>\n", L - 6, py(a, b) + 4,
                   b / a->scale, a->unit);
    }
    buf_printf(s, "<text class=\"axis-title\" x=\"16\" y=\"%d\" "
               "transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">live "
               "bytes (%s)</text>\n</g>\n", (T + H - B) / 2, (T + H - B) / 2,
               a->unit);
}

/* A long step has more statements than the plot has room for (the
 * 100,000-node chain's picture was 29 MB): past MAX_COLUMNS statements,
 * statements are grouped into that many columns, and each column shows its
 * statement with the most live bytes, so the envelope and the peak are
 * drawn exactly. Column j covers statements [start[j], start[j + 1]). */
#define MAX_COLUMNS 1080    /* two per pixel of the plot's width */

typedef struct {
    int n;
    int *start;             /* n + 1 statement boundaries */
    int *pick;              /* the statement each column shows */
} Columns;

static void columns(Ctx *c, const Mem *x, Columns *col)
{
    col->n = x->n < MAX_COLUMNS ? x->n : MAX_COLUMNS;
    col->start = ctx_alloc(c, ((size_t)col->n + 1) * sizeof(int));
    col->pick = ctx_alloc(c, ((size_t)col->n + 1) * sizeof(int));
    for (int j = 0; j <= col->n; j++)
        col->start[j] = (int)((long long)j * x->n / col->n);
    for (int j = 0; j < col->n; j++) {
        col->pick[j] = col->start[j];
        for (int i = col->start[j] + 1; i < col->start[j + 1]; i++)
            if (x->total[i] > x->total[col->pick[j]])
                col->pick[j] = i;
    }
}

/* The outline of a step function v over the columns: each a flat stretch,
 * left to right or back; only changes make points. */
static void steps(Buf *s, const Axes *a, const double *v, const Columns *col,
                  int back)
{
    const int n = col->n, *at = col->start;
    if (!back) {
        buf_printf(s, "%.1f,%.1f ", px(a, 0), py(a, v[0]));
        for (int j = 1; j < n; j++)
            if (v[j] != v[j - 1])
                buf_printf(s, "%.1f,%.1f %.1f,%.1f ", px(a, at[j]),
                           py(a, v[j - 1]), px(a, at[j]), py(a, v[j]));
        buf_printf(s, "%.1f,%.1f ", px(a, at[n]), py(a, v[n - 1]));
        return;
    }
    buf_printf(s, "%.1f,%.1f ", px(a, at[n]), py(a, v[n - 1]));
    for (int j = n - 1; j > 0; j--)
        if (v[j] != v[j - 1])
            buf_printf(s, "%.1f,%.1f %.1f,%.1f ", px(a, at[j]), py(a, v[j]),
                       px(a, at[j]), py(a, v[j - 1]));
    buf_printf(s, "%.1f,%.1f", px(a, 0), py(a, v[0]));
}

/* Each kind between the sum of the kinds below it and that sum plus its
 * own bytes. */
static void svg_series(Ctx *c, Buf *s, const Axes *a, const Mem *x)
{
    Columns col;
    columns(c, x, &col);
    double *lo = ctx_alloc(c, (size_t)col.n * sizeof *lo);
    double *hi = ctx_alloc(c, (size_t)col.n * sizeof *hi);
    for (int k = 0; k < NHOLDS; k++) {
        for (int j = 0; j < col.n; j++)
            hi[j] = lo[j] + x->live[k][col.pick[j]];
        buf_printf(s, "<polygon id=\"series-%s\" class=\"series\" "
                   "fill=\"%s\" points=\"", hold_names[k], kind_colors[k]);
        steps(s, a, hi, &col, 0);
        steps(s, a, lo, &col, 1);
        buf_printf(s, "\"/>\n");
        memcpy(lo, hi, (size_t)col.n * sizeof *lo);
    }
}

static void svg_boundary(Buf *s, const Axes *a, const Mem *x)
{
    if (x->boundary >= x->n)
        return;
    double bx = px(a, x->boundary);
    /* data-saved: every saved value is live where the backward starts */
    buf_printf(s, "<g id=\"boundary\" data-statement=\"%d\" data-saved=\"%.0f\">"
               "\n<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
               "stroke=\"black\" stroke-dasharray=\"4,3\"/>\n", x->boundary,
               x->live[HOLD_SAVED][x->boundary], bx, T, bx, H - B);
    /* above the plot, where the peak's label never goes */
    buf_printf(s, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"end\">forward"
               "</text>\n<text x=\"%.1f\" y=\"%d\">backward</text>\n</g>\n",
               bx - 4, T - 4, bx + 4, T - 4);
}

/* The peak's label stays inside the plot, clear of the legend: beside the
 * marker on the side with room, cut (with "...") when even the plot's
 * width is too short, judged at CHAR_W a character (graph names are
 * ASCII, so a cut never splits a character). */
#define CHAR_W 7.2          /* a 12px sans-serif character, about */

static void svg_peak(Ctx *c, Buf *s, const Axes *a, const Mem *x)
{
    double cx = px(a, x->peak + 0.5), cy = py(a, x->total[x->peak]);
    buf_printf(s, "<g id=\"peak\" data-statement=\"%d\" data-bytes=\"%.0f\"",
               x->peak, x->total[x->peak]);
    for (int k = 0; k < NHOLDS; k++)
        buf_printf(s, " data-%s=\"%.0f\"", hold_names[k], x->live[k][x->peak]);
    buf_printf(s, ">\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%d\" "
               "stroke=\"#d62728\" stroke-dasharray=\"2,2\"/>\n<circle "
               "cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#d62728\"/>\n", cx, cy,
               cx, H - B, cx, cy);
    const char *text = ctx_printf(c, "peak %.0f bytes at statement %d (%s)",
                                  x->total[x->peak], x->peak,
                                  stmt_text(c, x->m->g, &x->s->stmts[x->peak]));
    int fit = (int)((W - R - L - 12) / CHAR_W);
    if ((int)strlen(text) > fit)
        text = ctx_printf(c, "%.*s...", fit - 3, text);
    double w = strlen(text) * CHAR_W;
    double lx = cx + 8 + w <= W - R - 4 ? cx + 8 : cx - 8 - w;
    lx = lx < L + 4 ? L + 4 : lx;
    buf_printf(s, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d62728\">", lx,
               cy < T + 20 ? cy + 16 : cy - 8);
    svg_escape(s, text);
    buf_printf(s, "</text>\n</g>\n");
}

/* The legend, top to bottom as stacked, then the largest values at the
 * peak. */
static void svg_side(Ctx *c, Buf *s, const Mem *x)
{
    int lx = W - R + 20, y = T;
    buf_printf(s, "<g id=\"legend\">\n");
    for (int k = NHOLDS - 1; k >= 0; k--, y += 18)
        buf_printf(s, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" "
                   "fill=\"%s\"/>\n<text class=\"legend-item\" x=\"%d\" "
                   "y=\"%d\">%s</text>\n", lx, y, kind_colors[k], lx + 18,
                   y + 10, hold_names[k]);
    buf_printf(s, "</g>\n<g id=\"peak-tensors\">\n<text x=\"%d\" y=\"%d\" "
               "font-weight=\"bold\">largest at the peak</text>\n", lx, y + 20);
    y += 40;
    for (int i = 0; i < x->ntop; i++, y += 32) {
        const Value *v = &x->s->values[x->top[i].value];
        buf_printf(s, "<text class=\"peak-tensor\" x=\"%d\" y=\"%d\" "
                   "data-bytes=\"%.0f\" data-kind=\"%s\" data-name=\"", lx, y,
                   x->top[i].bytes, hold_names[kind_of(x, v)]);
        svg_escape(s, value_name(c, x, v));
        buf_printf(s, "\">");
        svg_escape(s, value_name(c, x, v));
        double scale;       /* its own unit: the axis's may be far too big */
        const char *unit = byte_unit(x->top[i].bytes, &scale);
        buf_printf(s, "<tspan x=\"%d\" dy=\"14\" fill=\"#555555\">%.4g %s, "
                   "%s</tspan></text>\n", lx + 10, x->top[i].bytes / scale,
                   unit, hold_names[kind_of(x, v)]);
    }
    buf_printf(s, "</g>\n");
}

static int memory_svg(Ctx *c, const Mem *x, const char *path)
{
    Axes a = {x->n, 0, 1, "B"};
    double max = x->n ? x->total[x->peak] : 0;
    a.unit = byte_unit(max, &a.scale);
    double ystep = nice_step(max > 0 ? max / a.scale : 1, 5) * a.scale;
    a.ymax = max > 0 ? ceil(max / ystep) * ystep : ystep;
    Buf s;
    buf_init(&s, c);
    svg_begin(&s, W, H);
    svg_title(&s, x);
    svg_axes(&s, &a, ystep);
    if (x->n > 0) {
        svg_series(c, &s, &a, x);
        svg_boundary(&s, &a, x);
        svg_peak(c, &s, &a, x);
    }
    svg_side(c, &s, x);
    buf_printf(&s, "</svg>\n");
    return buf_write_file(&s, path);
}

int report_memory(Ctx *c, const Compiled *m, const char *svg, int json,
                  Buf *out)
{
    Mem x;
    memset(&x, 0, sizeof x);
    measure(c, m, m->train, &x);
    if (svg && memory_svg(c, &x, svg))
        return 1;
    if (json)
        memory_json(c, &x, out);
    else if (!svg)
        memory_text(c, &x, out);
    return 0;
}
