/*
 * report.c: what the compiler decided, as text that `diff` can compare.
 *
 * The schedule report lists every forward tensor (node outputs, in
 * topological order) with its node, op, shape, bytes, decision (SAVE,
 * RECOMPUTE, or "-" when the backward never reads it) and the rule that
 * decided it, then summary lines of the form `key: value`. The diff report
 * lists the tensors whose decision differs between two policies and each
 * summary figure's change. Both depend only on the inputs. `remat ops`
 * lists the op table's rows and the ops the ONNX importer only folds.
 *
 * saved_bytes counts each kept buffer once: a saved Reshape or Flatten
 * output is a view of its source's buffer, and a view of a graph input or
 * parameter holds no arena bytes at all (remat.c says exactly what counts).
 * The per-tensor bytes column is each tensor's own size, views included.
 */
#include "back.h"

#include <math.h>
#include <string.h>

/* The step whose arena is the model's: the train step's, or the
 * forward's only when that one needs more. A tie is the train step's:
 * its peak is the one `remat memory` draws, and there a forward value
 * the backward reads is saved, where in the forward step alone (no
 * backward) every value is a forward one. */
static const Schedule *arena_step(const Compiled *m)
{
    return m->fwd->arena_bytes > m->train->arena_bytes ? m->fwd : m->train;
}

void summarize(const Compiled *m, Summary *s)
{
    const Graph *g = m->g;
    memset(s, 0, sizeof *s);
    s->saved_bytes = (double)m->remat->saved_bytes;
    s->compact_bytes = (double)m->remat->compact_bytes;
    for (int k = 0; k < g->nnodes; k++)     /* kept, not rebuilt */
        s->compact_forms += g->nodes[k].compact &&
            !m->remat->compact_rebuilt[compact_operand(&g->nodes[k])];
    for (int t = 0; t < g->ntensors; t++) {
        s->saved_tensors += m->remat->keep[t] == KEEP_SAVE;
        s->recomputed_tensors += m->remat->keep[t] == KEEP_RECOMPUTE;
    }
    const Schedule *big = arena_step(m);
    s->arena_bytes = (double)big->arena_bytes;
    s->peak_live_bytes = (double)big->peak_live_bytes;
    if (m->fused)
        s->grad_bytes = (double)trainable_floats(g) * sizeof(float);
    s->fused_arena_bytes = m->fused ? (double)m->fused->arena_bytes : 0;
    s->recompute_flops = m->train->recompute_flops;
    s->recompute_seconds = m->train->recompute_cost / PS_PER_S;
    s->forward_flops = m->train->forward_flops;
    s->forward_execs = m->train->forward_execs;
    s->recompute_execs = m->train->recompute_execs;
    Ram r;
    ram_of(m, &r);
    s->ram_bytes = ram_total(&r);
    s->flash_bytes = r.flash;
    s->ram_params_bytes = r.params;
    s->ram_optimizer_bytes = r.optimizer;
    s->ram_gradient_bytes = r.grads;
    s->ram_arena_bytes = r.arena;
    s->ram_io_bytes = r.io;
}

static const char *keep_name(Keep k)
{
    return k == KEEP_SAVE ? "SAVE" : k == KEEP_RECOMPUTE ? "RECOMPUTE"
           : k == KEEP_COMPACT ? "COMPACT" : "-";
}

typedef struct {
    const char *name;
    size_t off;
    int digits;             /* after the point in the text reports */
} Field;

static const Field fields[] = {
    {"saved_bytes", offsetof(Summary, saved_bytes), 0},
    {"compact_bytes", offsetof(Summary, compact_bytes), 0},
    {"compact_forms", offsetof(Summary, compact_forms), 0},
    {"arena_bytes", offsetof(Summary, arena_bytes), 0},
    {"peak_live_bytes", offsetof(Summary, peak_live_bytes), 0},
    {"recompute_flops", offsetof(Summary, recompute_flops), 0},
    /* the estimate the budget solver minimizes (cost.c): whole
     * picoseconds, so 12 digits print it exactly */
    {"recompute_seconds", offsetof(Summary, recompute_seconds), 12},
    {"forward_flops", offsetof(Summary, forward_flops), 0},
    {"forward_executions", offsetof(Summary, forward_execs), 0},
    {"recompute_executions", offsetof(Summary, recompute_execs), 0},
    {"saved_tensors", offsetof(Summary, saved_tensors), 0},
    {"recomputed_tensors", offsetof(Summary, recomputed_tensors), 0},
    {"gradient_bytes", offsetof(Summary, grad_bytes), 0},
    {"fused_arena_bytes", offsetof(Summary, fused_arena_bytes), 0},
    /* RAM for the trainer's optimizer, its terms, and flash (ram.c) */
    {"ram_bytes", offsetof(Summary, ram_bytes), 0},
    {"ram_params_bytes", offsetof(Summary, ram_params_bytes), 0},
    {"ram_optimizer_bytes", offsetof(Summary, ram_optimizer_bytes), 0},
    {"ram_gradient_bytes", offsetof(Summary, ram_gradient_bytes), 0},
    {"ram_arena_bytes", offsetof(Summary, ram_arena_bytes), 0},
    {"ram_io_bytes", offsetof(Summary, ram_io_bytes), 0},
    {"flash_bytes", offsetof(Summary, flash_bytes), 0},
};
#define NFIELDS ((int)(sizeof fields / sizeof *fields))

static double field(const Summary *s, int i)
{
    return *(const double *)((const char *)s + fields[i].off);
}

/* b's figure less a's, to the field's digits: the text's change and the
 * JSON's read back the same (0.3 - 0.1 is not 0.2 in binary). */
static double change(const Summary *a, const Summary *b, int i)
{
    double scale = pow(10, fields[i].digits);
    return nearbyint((field(b, i) - field(a, i)) * scale) / scale;
}

/* Widest entry of each column, so the table lines up. */
static void widths(const Compiled *m, Ctx *c, int *w)
{
    const Graph *g = m->g;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++) {
            const Tensor *t = &g->tensors[n->out[o]];
            int len[4] = {(int)strlen(t->name), (int)strlen(n->name),
                          (int)strlen(op_table[n->op].name),
                          (int)strlen(shape_str(c, t))};
            for (int i = 0; i < 4; i++)
                if (len[i] > w[i])
                    w[i] = len[i];
        }
    }
}

static const char *proven_text(Ctx *c, const Remat *r)
{
    return r->proven ? "yes" : r->rebuild
           ? "no (no plan that recomputes a tensor once fits: this one "
             "rebuilds at each use, the best of those found)"
           : r->forms_kept
           ? ctx_printf(c, "no (the proven least recompute of the plans that "
                        "keep every compact form; none rebuilding one that "
                        "fits was found, and no plan that fits recomputes in "
                        "under %.12f s)", r->floor / PS_PER_S)
           : r->proven_kept
           ? ctx_printf(c, "no (at most the proven least recompute of the "
                        "plans that keep every block boundary; no plan that "
                        "fits recomputes in under %.12f s)", r->floor / PS_PER_S)
           : r->max_arena > 0
           ? ctx_printf(c, "no (the best plan found; no plan that fits "
                        "recomputes in under %.12f s)", r->floor / PS_PER_S)
           : "no (a frontier was thinned)";
}

/* The optimizer ram_bytes is for: "sgd", "sgd momentum 0.9" or "adamw",
 * and ", fused" when the update is inside the backward. */
static const char *optim_text(Ctx *c, const Optim *o)
{
    return ctx_printf(c, "%s%s%s", o->adamw ? "adamw" : "sgd",
                      !o->adamw && o->momentum > 0
                          ? ctx_printf(c, " momentum %g", o->momentum) : "",
                      o->fused ? ", fused" : "");
}

/* Revolve's rebuilt checkpoints in the plan (Remat.hold): recomputed
 * tensors whose rebuilt value is kept to its last reader. */
static int rebuilt_checkpoints(const Compiled *m)
{
    const Remat *r = m->remat;
    int n = 0;
    for (int t = 0; r->hold && t < m->g->ntensors; t++)
        n += r->hold[t] >= 0 && r->keep[t] == KEEP_RECOMPUTE;
    return n;
}

/* With a budget: what it asked and whether the plan is proven optimal.
 * Under --max-ram, max_arena_bytes is what it leaves the arena. */
static void report_budget(Buf *b, const Compiled *m)
{
    const Remat *r = m->remat;
    if (m->g->conv_scratch > 0)
        buf_printf(b, "conv_scratch_bytes: %ld\n", m->g->conv_scratch);
    if (!r->budgeted)
        return;
    if (r->budget_bytes < 1e300)
        buf_printf(b, "budget_bytes: %.0f\n", r->budget_bytes);
    if (m->max_ram > 0)
        buf_printf(b, "max_ram_bytes: %.0f\n", m->max_ram);
    if (r->max_arena > 0)
        buf_printf(b, "max_arena_bytes: %.0f\n", r->max_arena);
    buf_printf(b, "free_decisions: %d\n", r->nfree);
    buf_printf(b, "rebuild: %s\n", r->rebuild ? "yes" : "no");
    if (r->rebuild)
        buf_printf(b, "rebuilt_checkpoints: %d\n", rebuilt_checkpoints(m));
    buf_printf(b, "proven_optimal: %s\n", proven_text(b->ctx, r));
}

static void report_files(Buf *b, const Compiled *m, int json);

static void report_compact(Buf *b, const Compiled *m, int json);

static void report_fused(Buf *b, const Compiled *m, int json);

void report_schedule(Buf *b, const Compiled *m)
{
    const Graph *g = m->g;
    int w[4] = {6, 4, 2, 5};
    widths(m, b->ctx, w);
    buf_printf(b, "# model %s, policy %s%s\n", g->name, m->policy->name,
               graph_trains(g) ? "" : ", forward only (no output is the loss)");
    report_files(b, m, 0);
    buf_printf(b, "%-*s  %-*s  %-*s  %-*s  %10s  %-9s  %s\n", w[0], "tensor",
               w[1], "node", w[2], "op", w[3], "shape", "bytes", "decision",
               "rule");
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            const Tensor *x = &g->tensors[t];
            long bytes = x->numel * (x->is_int ? 8 : 4);  /* int64 views */
            buf_printf(b, "%-*s  %-*s  %-*s  %-*s  %10ld  %-9s  %s\n", w[0],
                       x->name, w[1], n->name, w[2], op_table[n->op].name,
                       w[3], shape_str(b->ctx, x), bytes,
                       keep_name(m->remat->keep[t]), m->remat->why[t]);
        }
    }
    report_compact(b, m, 0);
    report_fused(b, m, 0);
    Summary s;
    summarize(m, &s);
    for (int i = 0; i < NFIELDS; i++)
        buf_printf(b, "%s: %.*f\n", fields[i].name, fields[i].digits,
                   field(&s, i));
    Peak peak;
    find_peak(b->ctx, m, arena_step(m), &peak);
    buf_printf(b, "optimizer: %s\n", optim_text(b->ctx, &m->optim));
    report_peak(b, &peak);
    report_budget(b, m);
}

void report_diff(Buf *b, const Compiled *x, const Compiled *y)
{
    const Graph *g = x->g;
    int w[4] = {6, 4, 2, 5};
    widths(x, b->ctx, w);
    buf_printf(b, "# model %s: policy %s -> policy %s\n", g->name,
               x->policy->name, y->policy->name);
    int changed = 0;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            Keep a = x->remat->keep[t], c = y->remat->keep[t];
            if (a == c)
                continue;
            changed++;
            buf_printf(b, "%-*s  %-9s -> %-9s  (%s -> %s)\n", w[0],
                       g->tensors[t].name, keep_name(a), keep_name(c),
                       x->remat->why[t], y->remat->why[t]);
        }
    }
    if (!changed)
        buf_printf(b, "no tensor's decision differs\n");
    Summary sa, sb;
    summarize(x, &sa);
    summarize(y, &sb);
    for (int i = 0; i < NFIELDS; i++)
        buf_printf(b, "%s: %.*f -> %.*f (%+.*f)\n", fields[i].name,
                   fields[i].digits, field(&sa, i), fields[i].digits,
                   field(&sb, i), fields[i].digits, change(&sa, &sb, i));
}

/* ---- the same as JSON ----------------------------------------------------- */

/* `"key": ` for an object's member; first says no comma comes before. */
static void json_key(Buf *b, const char *key, int first)
{
    buf_printf(b, "%s", first ? "" : ", ");
    buf_json_string(b, key);
    buf_printf(b, ": ");
}

static void json_str_member(Buf *b, const char *key, const char *v, int first)
{
    json_key(b, key, first);
    buf_json_string(b, v);
}

static void json_num_member(Buf *b, const char *key, double v, int first)
{
    json_key(b, key, first);
    buf_json_number(b, v);
}

/* "graph", "policy" (or "policies") and "forward_only", opening the object. */
static void json_head(Buf *b, const Graph *g)
{
    buf_printf(b, "{");
    json_str_member(b, "graph", g->name, 1);
    json_key(b, "forward_only", 0);
    buf_printf(b, "%s", graph_trains(g) ? "false" : "true");
}

static void json_tensor(Buf *b, const Compiled *m, const Node *n, int t)
{
    const Tensor *x = &m->g->tensors[t];
    buf_printf(b, "{");
    json_str_member(b, "name", x->name, 1);
    json_str_member(b, "node", n->name, 0);
    json_str_member(b, "op", op_table[n->op].name, 0);
    json_str_member(b, "shape", shape_str(b->ctx, x), 0);
    json_num_member(b, "bytes", (double)x->numel * (x->is_int ? 8 : 4), 0);
    json_str_member(b, "decision", keep_name(m->remat->keep[t]), 0);
    json_str_member(b, "rule", m->remat->why[t], 0);
    buf_printf(b, "}");
}

/* report_peak's lines as members of the summary object. */
static void json_peak(Buf *b, const Compiled *m)
{
    Peak p;
    find_peak(b->ctx, m, arena_step(m), &p);
    if (p.statement < 0)
        return;
    json_num_member(b, "peak_statement", p.statement, 0);
    json_str_member(b, "peak_does", p.does, 0);
    for (int k = 0; k < NHOLDS; k++)
        json_num_member(b, ctx_printf(b->ctx, "peak_%s_bytes", hold_names[k]),
                        p.bytes[k], 0);
    const char *note = peak_note(b->ctx, &p);
    if (note)
        json_str_member(b, "peak_note", note, 0);
}

/* report_budget's lines as members of the summary object. */
static void json_budget(Buf *b, const Compiled *m)
{
    const Remat *r = m->remat;
    if (m->g->conv_scratch > 0)
        json_num_member(b, "conv_scratch_bytes", (double)m->g->conv_scratch,
                        0);
    if (!r->budgeted)
        return;
    if (r->budget_bytes < 1e300)
        json_num_member(b, "budget_bytes", r->budget_bytes, 0);
    if (m->max_ram > 0)
        json_num_member(b, "max_ram_bytes", m->max_ram, 0);
    if (r->max_arena > 0)
        json_num_member(b, "max_arena_bytes", r->max_arena, 0);
    json_num_member(b, "free_decisions", r->nfree, 0);
    json_str_member(b, "rebuild", r->rebuild ? "yes" : "no", 0);
    if (r->rebuild)
        json_num_member(b, "rebuilt_checkpoints", rebuilt_checkpoints(m), 0);
    json_str_member(b, "proven_optimal", proven_text(b->ctx, r), 0);
}

/* The file the trainer reads or writes for tensor x: PREFIX.NAME.npy,
 * each '/' of the name written %2F (runtime/trainer_io.c's tensor_path). */
static const char *npy_name(Ctx *c, const char *prefix, const char *name)
{
    Buf f;
    buf_init(&f, c);
    buf_printf(&f, "%s.", prefix);
    for (const char *s = name; *s; s++)
        buf_printf(&f, *s == '/' ? "%%2F" : "%c", *s);
    buf_printf(&f, ".npy");
    return f.data;
}

/* The graph's inputs (float32 first, then int64, the trainer's order) and
 * outputs, each once: role, name, dtype, shape, file, and for int64 what
 * it accepts. */
static void report_files(Buf *b, const Compiled *m, int json)
{
    const Graph *g = m->g;
    int w = 4;
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].kind == T_INPUT &&
            (int)strlen(g->tensors[t].name) > w)
            w = (int)strlen(g->tensors[t].name);
    for (int i = 0; i < g->noutputs; i++)
        if ((int)strlen(g->tensors[g->outputs[i]].name) > w)
            w = (int)strlen(g->tensors[g->outputs[i]].name);
    for (int pass = 0; pass < 3; pass++) {
        int n = pass < 2 ? g->ntensors : g->noutputs;
        for (int i = 0; i < n; i++) {
            int t = pass < 2 ? i : g->outputs[i];
            const Tensor *x = &g->tensors[t];
            if (pass < 2 && (x->kind != T_INPUT || x->is_int != (pass == 1)))
                continue;
            const char *role = pass < 2 ? "input" : "output";
            const char *dtype = x->is_int ? "int64" : "float32";
            const char *file = npy_name(b->ctx, role, x->name);
            IntRange r = {0, 0, 0, 0};
            if (x->is_int)
                r = int_input_range(g, t);
            if (json) {
                buf_printf(b, "%s\n  {", json++ > 1 ? "," : "");
                json_str_member(b, "role", role, 1);
                json_str_member(b, "name", x->name, 0);
                json_str_member(b, "dtype", dtype, 0);
                json_str_member(b, "shape", shape_str(b->ctx, x), 0);
                json_str_member(b, "file", file, 0);
                if (x->is_int) {
                    json_num_member(b, "lo", (double)r.lo, 0);
                    json_num_member(b, "hi", (double)r.hi, 0);
                }
                if (r.has_ignore)
                    json_num_member(b, "ignore", (double)r.ignore, 0);
                buf_printf(b, "}");
                continue;
            }
            buf_printf(b, "# %-6s  %-*s  %-7s  %-12s  %s", role, w, x->name,
                       dtype, shape_str(b->ctx, x), file);
            if (x->is_int)
                buf_printf(b, "  values [%ld, %ld)", r.lo, r.hi);
            if (r.has_ignore)
                buf_printf(b, " or %ld", r.ignore);
            buf_printf(b, "\n");
        }
    }
}

/* The compact forms the backward reads, one per node that keeps one (in
 * topological order): its tensor, node, op, form and bytes, and whether
 * the plan rebuilds it in the backward (Remat.compact_rebuilt) rather
 * than keep it; as text lines, or as JSON objects of an array. */
static void report_compact(Buf *b, const Compiled *m, int json)
{
    const Graph *g = m->g;
    int first = 1;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        if (!n->compact)
            continue;
        int t = compact_operand(n);
        long bytes = n->row->compact_bytes(g, n);
        int rebuilt = m->remat->compact_rebuilt[t];
        if (!json) {
            buf_printf(b, "compact: %s, %s of %s (%s), %ld bytes%s\n",
                       g->tensors[t].name, n->row->compact_form, n->name,
                       n->row->name, bytes,
                       rebuilt ? ", rebuilt in the backward, not kept" : "");
            continue;
        }
        buf_printf(b, "%s\n  {", first ? "" : ",");
        json_str_member(b, "tensor", g->tensors[t].name, 1);
        json_str_member(b, "node", n->name, 0);
        json_str_member(b, "op", n->row->name, 0);
        json_str_member(b, "form", n->row->compact_form, 0);
        json_num_member(b, "bytes", (double)bytes, 0);
        buf_printf(b, ", \"rebuilt\": %s}", rebuilt ? "true" : "false");
        first = 0;
    }
}

/* One recompute run inside a backward: the tensor, its node and op, the
 * backward that computes it and the floats at a time; a remade one
 * (written whole by its own node's backward) says so. */
static void report_one_fused(Buf *b, const Graph *g, const Node *n,
                             const Node *in, long floats, int remade,
                             int json, int *first)
{
    const char *t = g->tensors[n->out[0]].name;
    if (!json) {
        if (remade)
            buf_printf(b, "fused: %s, %s (%s) remade by its own backward, "
                       "%ld floats written whole\n",
                       t, n->name, n->row->name, floats);
        else
            buf_printf(b, "fused: %s, %s (%s) recomputed inside %s's %s "
                       "backward, %ld floats at a time\n", t, n->name,
                       n->row->name, in->name, in->row->name, floats);
        return;
    }
    buf_printf(b, "%s\n  {", *first ? "" : ",");
    json_str_member(b, "tensor", t, 1);
    json_str_member(b, "node", n->name, 0);
    json_str_member(b, "op", n->row->name, 0);
    json_str_member(b, "reader", in->name, 0);
    json_num_member(b, "chunk_floats", (double)floats, 0);
    buf_printf(b, ", \"remade\": %s}", remade ? "true" : "false");
    *first = 0;
}

/* The train step's recomputes fused into their reader (Stmt.fuse) or
 * remade by their producer's backward (an S_BACKWARD's Stmt.out), in
 * statement order; as text lines, or as JSON objects of an array. */
static void report_fused(Buf *b, const Compiled *m, int json)
{
    const Graph *g = m->g;
    const Schedule *s = m->train;
    int first = 1;
    for (int i = 0; i < s->nstmts; i++) {
        const Stmt *st = &s->stmts[i];
        const Node *bn = &g->nodes[st->node];
        if (st->kind == S_BACKWARD && st->out >= 0)
            report_one_fused(b, g, bn, bn,
                             g->tensors[bn->out[0]].numel, 1, json, &first);
        if (st->kind != S_BACKWARD || st->fuse < 0)
            continue;
        const Stmt *rs = &s->stmts[st->fuse];
        long chunk = (long)(s->values[rs->out].bytes / sizeof(float));
        report_one_fused(b, g, &g->nodes[rs->node], bn, chunk, 0, json,
                         &first);
    }
}

void report_schedule_json(Buf *b, const Compiled *m)
{
    const Graph *g = m->g;
    json_head(b, g);
    json_str_member(b, "policy", m->policy->name, 0);
    buf_printf(b, ",\n \"files\": [");
    report_files(b, m, 1);
    buf_printf(b, "],\n \"tensors\": [");
    int first = 1;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++, first = 0) {
            buf_printf(b, "%s\n  ", first ? "" : ",");
            json_tensor(b, m, n, n->out[o]);
        }
    }
    buf_printf(b, "],\n \"compact\": [");
    report_compact(b, m, 1);
    buf_printf(b, "],\n \"fused\": [");
    report_fused(b, m, 1);
    buf_printf(b, "],\n \"summary\": {");
    Summary s;
    summarize(m, &s);
    for (int i = 0; i < NFIELDS; i++)
        json_num_member(b, fields[i].name, field(&s, i), i == 0);
    json_str_member(b, "optimizer", optim_text(b->ctx, &m->optim), 0);
    json_peak(b, m);
    json_budget(b, m);
    buf_printf(b, "}}\n");
}

void report_diff_json(Buf *b, const Compiled *x, const Compiled *y)
{
    const Graph *g = x->g;
    json_head(b, g);
    buf_printf(b, ", \"policies\": [");
    buf_json_string(b, x->policy->name);
    buf_printf(b, ", ");
    buf_json_string(b, y->policy->name);
    buf_printf(b, "],\n \"changed\": [");
    int first = 1;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        for (int o = 0; o < n->nout; o++) {
            int t = n->out[o];
            if (x->remat->keep[t] == y->remat->keep[t])
                continue;
            buf_printf(b, "%s\n  {", first ? "" : ",");
            first = 0;
            json_str_member(b, "name", g->tensors[t].name, 1);
            json_str_member(b, "from", keep_name(x->remat->keep[t]), 0);
            json_str_member(b, "to", keep_name(y->remat->keep[t]), 0);
            json_str_member(b, "rule_from", x->remat->why[t], 0);
            json_str_member(b, "rule_to", y->remat->why[t], 0);
            buf_printf(b, "}");
        }
    }
    buf_printf(b, "],\n \"summary\": {");
    Summary sa, sb;
    summarize(x, &sa);
    summarize(y, &sb);
    for (int i = 0; i < NFIELDS; i++) {
        buf_printf(b, "%s\n  ", i ? "," : "");
        json_key(b, fields[i].name, 1);
        buf_printf(b, "{");
        json_num_member(b, "from", field(&sa, i), 1);
        json_num_member(b, "to", field(&sb, i), 0);
        json_num_member(b, "change", change(&sa, &sb, i), 0);
        buf_printf(b, "}");
    }
    buf_printf(b, "}}\n");
}

/* ---- remat ops: what remat computes and what it only folds ---------------- */

static void ops_text(Buf *b, const char *const *names,
                     const char *const *notes, int n,
                     const char *const *lowered, const char *const *how,
                     int nl)
{
    buf_printf(b, "computed, forward and backward (ONNX name, category):\n");
    for (int i = 0; i < OP_COUNT; i++)
        buf_printf(b, "  %-26s %s\n", op_table[i].name,
                   category_names[op_table[i].cat]);
    buf_printf(b, "\nfolded only, at import from constants and static "
               "shapes (ONNX name, note):\n");
    for (int k = 0; k < n; k++) {
        if (notes[k])
            buf_printf(b, "  %-26s %s\n", names[k], notes[k]);
        else
            buf_printf(b, "  %s\n", names[k]);
    }
    buf_printf(b, "\nlowered, at import into the ops above (ONNX name, "
               "how):\n");
    for (int k = 0; k < nl; k++)
        buf_printf(b, "  %-26s %s\n", lowered[k], how[k]);
}

static void ops_json(Buf *b, const char *const *names,
                     const char *const *notes, int n,
                     const char *const *lowered, const char *const *how,
                     int nl)
{
    buf_printf(b, "{");
    json_num_member(b, "computed_count", OP_COUNT, 1);
    buf_printf(b, ",\n \"computed\": [");
    for (int i = 0; i < OP_COUNT; i++) {
        buf_printf(b, "%s\n  {", i ? "," : "");
        json_str_member(b, "op", op_table[i].name, 1);
        json_str_member(b, "category", category_names[op_table[i].cat], 0);
        buf_printf(b, "}");
    }
    buf_printf(b, "],\n ");
    json_num_member(b, "folded_count", n, 1);
    buf_printf(b, ",\n \"folded\": [");
    for (int k = 0; k < n; k++) {
        buf_printf(b, "%s\n  {", k ? "," : "");
        json_str_member(b, "op", names[k], 1);
        if (notes[k])
            json_str_member(b, "note", notes[k], 0);
        buf_printf(b, "}");
    }
    buf_printf(b, "],\n ");
    json_num_member(b, "lowered_count", nl, 1);
    buf_printf(b, ",\n \"lowered\": [");
    for (int k = 0; k < nl; k++) {
        buf_printf(b, "%s\n  {", k ? "," : "");
        json_str_member(b, "op", lowered[k], 1);
        json_str_member(b, "how", how[k], 0);
        buf_printf(b, "}");
    }
    buf_printf(b, "]}\n");
}

void report_ops(Buf *b, const char *const *names, const char *const *notes,
                int n, const char *const *lowered, const char *const *how,
                int nl, int json)
{
    if (json)
        ops_json(b, names, notes, n, lowered, how, nl);
    else
        ops_text(b, names, notes, n, lowered, how, nl);
}
