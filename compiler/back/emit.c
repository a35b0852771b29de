/*
 * emit.c: NAME.c and NAME.h from the schedules and the arena plan.
 *
 * The .c file is, in order: a comment block that summarises the plan; the
 * static data the kernels read (broadcast maps, initializer values from
 * files); the parameter, input and output tables; NAME_init; NAME_forward
 * (the forward schedule); NAME_train_step, NAME_train_step_acc and
 * NAME_train_step_hooked (the train schedule, once, with a call to the
 * gradient hook after each statement that makes a parameter's gradient
 * final: grad_final_after); NAME_train_step_fused (the fused schedule: the optimizer inside the
 * backward); NAME_sgd and the optimizers' steps; and the rt_model
 * descriptor. A forward-only graph (no loss) has no train step
 * and no SGD: its header says NAME_HAS_TRAIN_STEP 0 and its descriptor holds
 * NULL for both. Every function body is straight-line: one
 * statement per schedule entry, each under a comment naming the node, its
 * op, its output's shape and whether it is a recompute.
 *
 * C names come from the parser's mangled names with a prefix for what the
 * pointer holds: v_ a forward value (inputs, parameters, activations), r_ a
 * recomputed value, d_ a gradient, map_ a node's broadcast map. Arena
 * pointers are declared where their value is defined, at the offset plan.c
 * gave it; a view (an alias op's output) is a const pointer to its input's
 * floats, and its gradient a pointer to its input's gradient. Parameters
 * are read through const pointers, except in train_step those a row's
 * `updates` names (BatchNormalization's running statistics), which its
 * first forward writes in place (Emit.update; never a recompute). A frozen
 * parameter whose values are known at compile time is read from the file's
 * static const NAME_frozen[] instead of params (emit_params.c).
 *
 * Output depends only on the input graph and policy: no time, path or
 * version, floats printed with 9 significant digits (they read back to the
 * same float), everything in schedule or file order.
 */
#include "back.h"

#include <ctype.h>
#include <string.h>

static const char *upper(Ctx *c, const char *s)
{
    char *u = ctx_strdup(c, s);
    for (char *p = u; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return u;
}

/* Text for a C comment: a star-slash inside would end it early, and a
 * slash-star is a warning (-Wcomment) that -Werror makes an error. */
static const char *comment_safe(Ctx *c, const char *s)
{
    char *d = ctx_strdup(c, s);
    for (char *p = d; (p = strstr(p, "*/")) != NULL;)
        *p = '?';
    for (char *p = d; (p = strstr(p, "/*")) != NULL;)
        p[1] = '?';
    return d;
}

/* ---- names ------------------------------------------------------------------------ */

static const char *value_name(Emit *e, const Schedule *s, int v)
{
    const Value *val = &s->values[v];
    const char *pre = val->kind == V_FWD ? "v" : val->kind == V_RECOMP ? "r" : "d";
    if (val->copy)          /* a plan that rebuilds: r2_x, r3_x, ... */
        return ctx_printf(e->ctx, "%s%d_%s", pre, val->copy + 1,
                          e->g->tensors[val->tensor].cname);
    return ctx_printf(e->ctx, "%s_%s", pre, e->g->tensors[val->tensor].cname);
}

/* What a statement reads for tensor t: in the forward (or a recompute's
 * inputs) the forward value; in the backward the value the plan keeps. */
static const char *read_name(Emit *e, const Compiled *m, const Schedule *s,
                             int t, int backward_phase)
{
    const Tensor *x = &e->g->tensors[t];
    if (x->kind != T_ACT || !backward_phase ||
        m->remat->keep[t] != KEEP_RECOMPUTE)
        return ctx_printf(e->ctx, "v_%s", x->cname);
    return value_name(e, s, e->rec[t]);
}

/* int64 for an int64 tensor's forward value (a gradient is float) */
static void declare(Emit *e, const Schedule *s, int v)
{
    const Value *val = &s->values[v];
    const char *type = val->kind != V_GRAD &&
                       e->g->tensors[val->tensor].is_int ? "int64_t" : "float";
    emit(e, "%s *%s = (%s *)(void *)(a + %zu);", type, value_name(e, s, v),
         type, val->offset);
}

/* A statement's scratch, used in its one call and so never named. */
static const char *scratch_expr(Emit *e, const Schedule *s, const Stmt *st)
{
    if (st->scratch < 0)
        return NULL;
    return ctx_printf(e->ctx, "(float *)(void *)(a + %zu)",
                      s->values[st->scratch].offset);
}

/* The node's compact form where this statement writes or reads it (Stmt.
 * compact): its first forward, or the recompute that rebuilds it, and its
 * backward in a train step. */
static const char *compact_expr(Emit *e, const Schedule *s, const Stmt *st)
{
    int v = st->compact;
    if (v < 0)
        return NULL;
    return ctx_printf(e->ctx, "(unsigned char *)(a + %zu)",
                      s->values[v].offset);
}

/* ---- statements ---------------------------------------------------------------- */

/* Inside a fused recompute's loop (Emit.count), an operand is a pointer
 * to the chunk's first element, "name + o"; the chunk itself (tensor
 * `plain`, the recompute's output) is its own buffer. */
static const char *at_chunk(Emit *e, const char *name, int t, int plain)
{
    if (!name || !e->count || t == plain)
        return name;
    return ctx_printf(e->ctx, "%s + o", name);
}

static void emit_forward_stmt(Emit *e, const Compiled *m, const Schedule *s,
                              const Stmt *st)
{
    const Graph *g = e->g;
    const Node *n = &g->nodes[st->node];
    const char *out[MAX_IO], *in[MAX_IO];
    const Tensor *y = &g->tensors[n->out[0]];
    int view = op_table[n->op].alias;
    int v0 = st->recompute ? st->out : s->fwd[n->out[0]];
    for (int o = 0; st->recompute && o < n->nout; o++)
        e->rec[n->out[o]] = st->out + o;
    /* written over its input's buffer (fwd_in_place), which the reader
     * sees as two names for one address */
    int in_place = !view && s->values[v0].view == VIEW_VALUE;
    Buf outs;               /* "y [shape]", every output named */
    buf_init(&outs, e->ctx);
    for (int o = 0; o < n->nout; o++)
        buf_printf(&outs, "%s%s [%s]", o ? ", " : "",
                   g->tensors[n->out[o]].name,
                   shape_str(e->ctx, &g->tensors[n->out[o]]));
    emit(e, "/* %s: %s -> %s%s%s%s */", n->name, op_table[n->op].name,
         outs.data, !st->recompute ? "" : st->held
             ? " recompute, kept to its last reader (a rebuilt checkpoint)"
             : " recompute",
         view ? " view, no copy" : "", in_place ? ", in place" : "");
    if (view) {
        /* read-only: a view may point into the caller's const inputs */
        const char *name = value_name(e, s, v0);
        emit(e, "const %s *%s = %s;", y->is_int ? "int64_t" : "float", name,
             read_name(e, m, s, n->in[0], st->recompute));
        if (y->nconsumers == 0 && !y->is_output)
            emit(e, "(void)%s;", name);
        return;
    }
    for (int o = 0; o < n->nout; o++) {
        int v = st->recompute ? st->out + o : s->fwd[n->out[o]];
        declare(e, s, v);
        out[o] = value_name(e, s, v);
    }
    for (int i = 0; i < n->nin; i++)
        in[i] = at_chunk(e, read_name(e, m, s, n->in[i], st->recompute),
                         n->in[i], -1);
    e->scratch = scratch_expr(e, s, st);
    e->compact = compact_expr(e, s, st);
    /* the row's `updates` inputs change once per step, never in a recompute */
    e->update = e->train && !st->recompute;
    op_table[n->op].emit_forward(e, n, out, in);
    e->update = 0;
    e->compact = NULL;
}

static const char *grad_name(Emit *e, int t)
{
    return ctx_printf(e->ctx, "d_%s", e->g->tensors[t].cname);
}

/* "node: Op backward", and which part of it a split backward is (want:
 * its gradients, stmt_backward's), or what a backward remaking its output
 * writes besides (schedule.c's remake_split). */
static void emit_backward_comment(Emit *e, const Schedule *s, const Stmt *st,
                                  const int *want)
{
    const Graph *g = e->g;
    const Node *n = &g->nodes[st->node];
    Buf parts;
    buf_init(&parts, e->ctx);
    for (int i = 0; st->part && i < n->nin; i++)
        if (want[i])
            buf_printf(&parts, "%sd(%s)", parts.len ? ", " : "",
                       g->tensors[n->in[i]].name);
    if (st->part)
        emit(e, "/* %s: %s backward, %s alone */", n->name,
             op_table[n->op].name, parts.data);
    else if (st->out >= 0)
        emit(e, "/* %s: %s backward, %s recomputed beside it */", n->name,
             op_table[n->op].name,
             g->tensors[s->values[st->out].tensor].name);
    else
        emit(e, "/* %s: %s backward */", n->name, op_table[n->op].name);
}

/* plain: the tensor a fused recompute computes in the loop around this
 * call (then Emit.count is set), or -1. */
static void emit_backward_stmt(Emit *e, const Compiled *m, const Schedule *s,
                               const Stmt *st, int plain)
{
    const Graph *g = e->g;
    const Node *n = &g->nodes[st->node];
    const char *din[MAX_IO] = {0}, *dout[MAX_IO] = {0};
    const char *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    int want[MAX_IO];
    unsigned reads = stmt_backward(g, st, want);
    emit_backward_comment(e, s, st, want);
    for (int i = 0; i < n->nin; i++) {
        din[i] = at_chunk(e, want[i] ? grad_name(e, n->in[i]) : NULL, -1, 0);
        /* a remade output needs every input: an unread one is a
         * parameter (schedule.c's remake_split) */
        in[i] = at_chunk(e, reads & NEED_IN(i) || st->out >= 0
                                ? read_name(e, m, s, n->in[i], 1) : NULL,
                         n->in[i], plain);
    }
    for (int o = 0; o < n->nout; o++) {
        dout[o] = at_chunk(e, g->tensors[n->out[o]].has_grad
                                  ? grad_name(e, n->out[o]) : NULL, -1, 0);
        out[o] = at_chunk(e, reads & NEED_OUT(o)
                                 ? read_name(e, m, s, n->out[o], 1) : NULL,
                          n->out[o], plain);
    }
    e->scratch = scratch_expr(e, s, st);
    e->writes = st->writes;
    e->pwrites = st->pwrites;
    e->compact = compact_expr(e, s, st);
    if (st->out >= 0) {     /* a remade recompute: the later part reads it */
        declare(e, s, st->out);
        e->rec[n->out[0]] = st->out;
        e->remake = value_name(e, s, st->out);
    }
    op_table[n->op].emit_backward(e, n, din, dout, in, out);
    e->writes = e->pwrites = 0;
    e->compact = e->remake = NULL;
}

/* A backward with the recompute fused into it (Stmt.fuse): one loop over
 * the elements, FUSE_CHUNK at a time, each chunk recomputed into the
 * recompute's value (a chunk's room) and read there by the backward's
 * call on the same elements. A chunked row with static data (a binary
 * op's map) takes the chunk's flat map. */
static void emit_fused_backward(Emit *e, const Compiled *m,
                                const Schedule *s, const Stmt *st)
{
    const Stmt *rs = &s->stmts[st->fuse];
    const Node *rn = &e->g->nodes[rs->node], *bn = &e->g->nodes[st->node];
    const Tensor *t = &e->g->tensors[rn->out[0]];
    long chunk = (long)(s->values[rs->out].bytes / sizeof(float));
    emit(e, "/* %s recomputed inside %s's backward, %ld of its %ld floats at "
         "a time: never written whole */", t->name, bn->name, chunk,
         t->numel);
    emit(e, "{");
    e->indent++;
    if (op_table[rn->op].emit_static || op_table[bn->op].emit_static)
        emit(e, "rt_bcast chunk_map = {1, {0}, {1}, {1}};");
    emit(e, "long o;");
    emit(e, "for (o = 0; o < %ld; o += %ld) {", t->numel, chunk);
    e->indent++;
    emit(e, "const int m = %ld - o < %ld ? (int)(%ld - o) : %ld;", t->numel,
         chunk, t->numel, chunk);
    if (op_table[rn->op].emit_static || op_table[bn->op].emit_static)
        emit(e, "chunk_map.dims[0] = m;");
    e->count = "m";
    emit_forward_stmt(e, m, s, rs);
    emit_backward_stmt(e, m, s, st, rn->out[0]);
    e->count = NULL;
    e->indent--;
    emit(e, "}");
    e->indent--;
    emit(e, "}");
}

static void emit_stmt(Emit *e, const Compiled *m, const Schedule *s,
                      const Stmt *st)
{
    const Graph *g = e->g;
    const Tensor *t = st->tensor >= 0 ? &g->tensors[st->tensor] : NULL;
    switch (st->kind) {
    case S_FORWARD:
        if (st->fuse >= 0)  /* its reader's loop runs it */
            emit(e, "/* %s: recomputed inside %s's backward, below */",
                 g->nodes[st->node].name,
                 g->nodes[s->stmts[st->fuse].node].name);
        else
            emit_forward_stmt(e, m, s, st);
        break;
    case S_OUTPUT:
        emit(e, "/* output %s [%s] */", t->name, shape_str(e->ctx, t));
        emit(e, "if (outputs)");
        if (t->is_int)      /* its int64s' bytes, two floats each */
            emit(e, "    rt_store_i64(outputs + %zu, v_%s, %ld);",
                 e->offset[st->tensor], t->cname, t->numel);
        else
            emit(e, "    rt_copy(outputs + %zu, v_%s, %ld);",
                 e->offset[st->tensor], t->cname, t->numel);
        if (t->is_loss)
            emit(e, "loss = v_%s[0];", t->cname);
        break;
    case S_SEED:
        emit(e, "/* backward: d(%s) = 1 */", t->name);
        declare(e, s, s->grad[st->tensor]);
        emit(e, "rt_fill(d_%s, %ld, 1.0f);", t->cname, t->numel);
        break;
    case S_ZERO:
        if (st->writes) {
            const Value *v = &s->values[s->grad[st->tensor]];
            emit(e, "/* d(%s): its first contribution writes it%s%s%s */",
                 t->name, v->view == VIEW_VALUE ? ", in d(" : "",
                 v->view == VIEW_VALUE
                     ? g->tensors[s->values[v->owner].tensor].name : "",
                 v->view == VIEW_VALUE ? ")'s buffer" : "");
            declare(e, s, s->grad[st->tensor]);
            break;
        }
        emit(e, "/* d(%s) sums over its readers */", t->name);
        declare(e, s, s->grad[st->tensor]);
        emit(e, "rt_zero(d_%s, %ld);", t->cname, t->numel);
        break;
    case S_GRAD_VIEW: {
        const Node *n = &g->nodes[t->producer];
        emit(e, "/* d(%s) is d(%s): %s moves no data */", t->name,
             g->tensors[n->in[0]].name, op_table[n->op].name);
        emit(e, "float *d_%s = d_%s;", t->cname,
             g->tensors[n->in[0]].cname);
        break;
    }
    case S_BACKWARD:
        if (st->fuse >= 0)
            emit_fused_backward(e, m, s, st);
        else
            emit_backward_stmt(e, m, s, st, -1);
        break;
    case S_UPDATE:
        emit(e, "/* d(%s) is final and nothing reads %s again: step it */",
             t->name, t->name);
        emit(e, "rt_optimizer_update(opt, params + %zu, d_%s, "
             "state ? state + %zu : NULL, %zu, %ld);", e->offset[st->tensor],
             t->cname,
             e->grad_offset[st->tensor], e->trainable, t->numel);
        break;
    }
}

/* ---- functions ------------------------------------------------------------------- */

/* The caller's buffers that hold graph tensors from the start. */
typedef enum { BUF_INPUTS, BUF_INT_INPUTS, BUF_PARAMS, BUF_FROZEN,
               BUF_NONE } Buffer;

/* The tables' names (NAME_params[], ...) and, but for the frozen
 * parameters, which live in NAME_frozen[], the buffers' argument names. */
static const char *const buffer_names[] = {"inputs", "int_inputs", "params",
                                           "frozen_params"};

/* An int64 constant (a T_PARAM with is_int: ids != pad_id's pad_id)
 * is in no buffer: it is a static const array of the C file, init_NAME,
 * which v_NAME points at, not state that trains or a checkpoint holds. */
static int int_constant(const Tensor *x)
{
    return x->kind == T_PARAM && x->is_int;
}

/* frozen: Emit.frozen (emit_params.c), or NULL for none. */
static Buffer buffer_of(const char *frozen, const Graph *g, int t)
{
    const Tensor *x = &g->tensors[t];
    if (x->kind == T_INPUT)
        return x->is_int ? BUF_INT_INPUTS : BUF_INPUTS;
    if (frozen && frozen[t])
        return BUF_FROZEN;
    return x->kind == T_PARAM && !x->is_int ? BUF_PARAMS : BUF_NONE;
}

/* Output i's offset in the outputs buffer, in floats, from *next (the
 * floats of the outputs before it), which it moves past the output. An
 * int64 (or bool) output takes two floats per element, their bytes its
 * int64s, at an even offset: a buffer aligned for int64 holds it aligned
 * (issue 25: ids != pad_id, a mask a model returns). */
static size_t output_place(const Graph *g, int i, size_t *next)
{
    const Tensor *x = &g->tensors[g->outputs[i]];
    size_t at = *next;
    if (x->is_int)
        at += at & 1;
    *next = at + (size_t)x->numel * (x->is_int ? 2 : 1);
    return at;
}

/* The caller's buffers, laid out once: float inputs, int64 inputs and
 * parameters (and frozen ones in NAME_frozen) each in file order in their
 * own buffer, graph outputs in output order in theirs. offset[t] is tensor
 * t's place in its buffer, in elements. */
static size_t *layout(Ctx *c, const Graph *g, const char *frozen)
{
    size_t *offset = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof *offset);
    size_t next[BUF_NONE] = {0}, outputs = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        Buffer b = buffer_of(frozen, g, t);
        if (b != BUF_NONE) {
            offset[t] = next[b];
            next[b] += (size_t)x->numel;
        }
    }
    for (int i = 0; i < g->noutputs; i++)
        offset[g->outputs[i]] = output_place(g, i, &outputs);
    return offset;
}

/* The gradient buffer: the trainable parameters alone, in file order, so a
 * frozen parameter (trainable="false", --freeze) has no slot. The
 * optimizer state has this layout too (AdamW: twice over). */
static size_t *grad_layout(Ctx *c, const Graph *g)
{
    size_t *offset = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof *offset);
    size_t next = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind == T_PARAM && x->trainable) {
            offset[t] = next;
            next += (size_t)x->numel;
        }
    }
    return offset;
}

static void emit_buffer_pointers(Emit *e, int train)
{
    const Graph *g = e->g;
    const char *updated = train ? updated_tensors(e->ctx, g) : NULL;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind == T_ACT || x->nconsumers == 0)
            continue;
        int write = train && updated[t];
        if (int_constant(x)) {
            emit(e, "const int64_t *v_%s = init_%s;", x->cname, x->cname);
            continue;
        }
        Buffer b = buffer_of(e->frozen, g, t);
        emit(e, "%s%s *v_%s = %s + %zu;%s", write ? "" : "const ",
             x->is_int ? "int64_t" : "float", x->cname,
             b == BUF_FROZEN ? ctx_printf(e->ctx, "%s_frozen", g->name)
                             : buffer_names[b], e->offset[t],
             write ? " /* updated in place */" : "");
    }
    for (int t = 0; train && !e->fused && t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind == T_PARAM && x->has_grad)
            emit(e, "float *d_%s = grads + %zu;", x->cname,
                 e->grad_offset[t]);
    }
}

/* The hook calls after statement i: each parameter whose gradient it
 * finished, so that a data-parallel trainer starts reducing it while the
 * rest of the backward runs. */
static void emit_ready(Emit *e, int i)
{
    for (int t = e->ready_first ? e->ready_first[i] : -1; t >= 0;
         t = e->ready_next[t]) {
        const Tensor *x = &e->g->tensors[t];
        emit(e, "rt_grad_ready(hook, grads, %zu, %ld); /* d(%s) is final */",
             e->grad_offset[t], x->numel, x->name);
    }
}

static void emit_body(Emit *e, const Compiled *m, const Schedule *s)
{
    e->rec = ctx_alloc(e->ctx, (size_t)e->g->ntensors * sizeof *e->rec);
    for (int i = 0; i < s->nstmts; i++) {
        emit(e, "");
        emit_stmt(e, m, s, &s->stmts[i]);
        emit_ready(e, i);
    }
}

/* grad_final_after turned into per-statement lists for emit_ready. */
static void index_ready(Emit *e, const Schedule *s)
{
    const Graph *g = e->g;
    int *after = grad_final_after(e->ctx, g, s);
    int *first = ctx_alloc(e->ctx, (size_t)(s->nstmts + 1) * sizeof(int));
    int *next = ctx_alloc(e->ctx, (size_t)(g->ntensors + 1) * sizeof(int));
    for (int i = 0; i < s->nstmts; i++)
        first[i] = -1;
    for (int t = g->ntensors - 1; t >= 0; t--) {
        next[t] = -1;
        if (after[t] >= 0) {
            next[t] = first[after[t]];
            first[after[t]] = t;
        }
    }
    e->ready_first = first;
    e->ready_next = next;
}

/* train 1: NAME_train_step's, 2: NAME_train_step_acc's, 3: the static
 * function all three call (the train schedule, once), with its flag and
 * hook; 4: NAME_train_step_fused's; 5: NAME_train_step_hooked's. */
static const char *signature(Ctx *c, const char *name, int train)
{
    static const char *const fn[] = {"", "float %s_train_step",
                                     "float %s_train_step_acc",
                                     "static float %s_train_schedule", "",
                                     "float %s_train_step_hooked"};
    if (train == 4)
        return ctx_printf(c, "float %s_train_step_fused(float *params, "
                          "const float *inputs,\n    const int64_t "
                          "*int_inputs, float *outputs, float *state,\n"
                          "    const rt_optimizer *opt, uint64_t seed, "
                          "uint64_t step, void *arena)", name);
    if (train)
        return ctx_printf(c, "%s(float *params, const float *inputs, "
                          "const int64_t *int_inputs, float *outputs, "
                          "float *grads, uint64_t seed, uint64_t step, "
                          "void *arena%s)",
                          ctx_printf(c, fn[train], name),
                          train == 3 || train == 5
                              ? ",\n    int accumulate, rt_grad_hook *hook"
                              : "");
    return ctx_printf(c, "float %s_forward(const float *params, const float "
                      "*inputs, const int64_t *int_inputs, float *outputs, "
                      "void *arena)", name);
}

/* The declarations every function body starts with. */
static void emit_prologue(Emit *e, int train)
{
    /* byte offsets into the 64-byte aligned arena; every planned offset is
     * a multiple of 64, so the casts through void * (which keep
     * -Wcast-align quiet) never misalign a float */
    emit(e, "unsigned char *a = arena;");
    if (graph_trains(e->g))
        emit(e, "float loss;");
    emit(e, "(void)params; /* a graph may read no parameter or input */");
    emit(e, "(void)inputs;");
    emit(e, "(void)int_inputs;");
    if (train)
        emit(e, "(void)seed; /* read by Dropout only */");
    if (train)
        emit(e, "(void)step;");
    emit_buffer_pointers(e, train);
}

/* NAME_train_step_fused: the fused schedule, each parameter stepped by
 * opt where its S_UPDATE stands. */
static void emit_fused(Emit *e, const Compiled *m)
{
    emit(e, "%s", signature(e->ctx, e->g->name, 4));
    emit(e, "{");
    e->indent++;
    e->train = 1;
    e->fused = 1;
    emit_prologue(e, 1);
    if (e->trainable == 0)
        emit(e, "(void)state; (void)opt; /* nothing trainable */");
    emit_body(e, m, m->fused);
    emit(e, "return loss;");
    e->fused = 0;
    e->indent--;
    emit(e, "}");
    emit(e, "");
}

/* Unless the step accumulates, the gradient buffer is zeroed but for
 * the parameters whose first contribution a backward writes (Stmt.
 * pwrites): one rt_zero per run of the others, adjacent in the buffer. */
static void emit_grad_zeroing(Emit *e, const Schedule *s)
{
    const Graph *g = e->g;
    char *written = ctx_alloc(e->ctx, (size_t)g->ntensors);
    for (int i = 0; i < s->nstmts; i++) {
        const Stmt *st = &s->stmts[i];
        for (int k = 0; st->kind == S_BACKWARD && k < MAX_IO; k++)
            if (st->pwrites >> k & 1)
                written[g->nodes[st->node].in[k]] = 1;
    }
    size_t lo = 0, hi = 0;     /* the run being gathered */
    Buf b;
    buf_init(&b, e->ctx);
    for (size_t at = 0; at < e->trainable;) {  /* by offset */
        int t = -1;
        for (int u = 0; u < g->ntensors && t < 0; u++)
            if (g->tensors[u].kind == T_PARAM && g->tensors[u].trainable &&
                e->grad_offset[u] == at && g->tensors[u].numel > 0)
                t = u;
        assert(t >= 0 && "the gradient buffer is every trainable parameter's");
        size_t n = (size_t)g->tensors[t].numel;
        if (!written[t] && hi == at)
            hi = at + n;
        if ((written[t] || at + n == e->trainable) && hi > lo)
            buf_printf(&b, "\n        rt_zero(grads + %zu, %zu);", lo,
                       hi - lo);
        at += n;
        if (written[t] || at == e->trainable)
            lo = hi = at;
    }
    if (b.len)
        emit(e, "if (!accumulate) {%s\n    }", b.data);
    else
        emit(e, "(void)accumulate; /* every gradient written first */");
}

static void emit_function(Emit *e, const Compiled *m, int train)
{
    const char *name = e->g->name;
    const Schedule *s = train ? m->train : m->fwd;
    if (train)
        emit(e, "/* The train schedule: grads += every gradient, after zeroing "
             "grads\n * unless accumulate is 1 (a parameter's first "
             "contribution, where a call\n * can write it, is written "
             "instead: no zeroing). */");
    emit(e, "%s", signature(e->ctx, name, train ? 3 : 0));
    emit(e, "{");
    e->indent++;
    e->train = train;
    emit_prologue(e, train);
    if (train) {
        emit_grad_zeroing(e, s);
        index_ready(e, s);
    }
    emit_body(e, m, s);
    e->ready_first = e->ready_next = NULL;
    if (train)
        emit(e, "rt_grad_flush(hook, grads);");
    emit(e, graph_trains(e->g) ? "return loss;"
                               : "return 0.0f; /* forward only: no loss */");
    e->indent--;
    emit(e, "}");
    emit(e, "");
    for (int acc = 0; train && acc <= 1; acc++) {
        emit(e, "%s", signature(e->ctx, name, 1 + acc));
        emit(e, "{");
        emit(e, "    return %s_train_schedule(params, inputs, int_inputs, "
             "outputs, grads,\n        seed, step, "
             "arena, %d, NULL);", name, acc);
        emit(e, "}");
        emit(e, "");
    }
    if (train) {
        emit(e, "%s", signature(e->ctx, name, 5));
        emit(e, "{");
        emit(e, "    return %s_train_schedule(params, inputs, int_inputs, "
             "outputs, grads,\n        seed, step, "
             "arena, accumulate, hook);", name);
        emit(e, "}");
        emit(e, "");
    }
}

static void emit_init(Emit *e)
{
    const Graph *g = e->g;
    emit(e, "void %s_init(float *params, uint64_t seed)", g->name);
    emit(e, "{");
    e->indent++;
    emit(e, "(void)params;");
    emit(e, "(void)seed;");
    int stream = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind != T_PARAM || int_constant(x))
            continue;
        if (e->frozen[t]) {         /* in NAME_frozen: its stream unused */
            stream++;
            continue;
        }
        const char *p = ctx_printf(e->ctx, "params + %zu", e->offset[t]);
        const char *a = fmt_float(e->ctx, x->init_a);
        const char *b = fmt_float(e->ctx, x->init_b);
        emit(e, "/* %s [%s] */", x->name, shape_str(e->ctx, x));
        switch (x->init) {
        case INIT_ZEROS: emit(e, "rt_zero(%s, %ld);", p, x->numel); break;
        case INIT_ONES: emit(e, "rt_fill(%s, %ld, 1.0f);", p, x->numel); break;
        case INIT_CONSTANT: emit(e, "rt_fill(%s, %ld, %s);", p, x->numel, a); break;
        case INIT_UNIFORM:
            emit(e, "rt_init_uniform(%s, %ld, %s, %s, seed, %d);", p, x->numel,
                 a, b, stream);
            break;
        case INIT_NORMAL:
            emit(e, "rt_init_normal(%s, %ld, %s, %s, seed, %d);", p, x->numel,
                 a, b, stream);
            break;
        case INIT_FILE:
            if (e->weights_file)
                emit(e, "/* from OUT.weights: %s_load_weights */", g->name);
            else
                emit(e, "rt_copy(%s, init_%s, %ld);", p, x->cname, x->numel);
            break;
        }
        stream++;
    }
    e->indent--;
    emit(e, "}");
    emit(e, "");
}

static void emit_sgd(Emit *e)
{
    const Graph *g = e->g;
    emit(e, "void %s_sgd(float *params, const float *grads, float lr)",
         g->name);
    emit(e, "{");
    e->indent++;
    int any = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind == T_PARAM && x->trainable) {
            emit(e, "rt_sgd(params + %zu, grads + %zu, %ld, lr); /* %s */",
                 e->offset[t], e->grad_offset[t], x->numel,
                 comment_safe(e->ctx, x->name));
            any = 1;
        }
    }
    if (!any)
        emit(e, "(void)params; (void)grads; (void)lr;");
    e->indent--;
    emit(e, "}");
    emit(e, "");
}

/* NAME_sgd_step, NAME_adamw_step and NAME_clip_grad_norm: one runtime call
 * per trainable parameter's range. The state has the gradient buffer's
 * layout (the trainable parameters' slots in table order): SGD's momentum
 * buffer, AdamW's exp_avg (all of it) then exp_avg_sq (all of it). */
static void emit_optimizers(Emit *e)
{
    const Graph *g = e->g;
    const char *n = g->name;
    size_t tf = e->trainable;
    for (int adam = 0; adam <= 1; adam++) {
        emit(e, "void %s_%s_step(float *params, const float *grads, "
             "float *state, float lr,", n, adam ? "adamw" : "sgd");
        emit(e, "    const rt_%s_config *c, uint64_t step)",
             adam ? "adamw" : "sgd");
        emit(e, "{");
        e->indent++;
        if (tf == 0)
            emit(e, "(void)params; (void)grads; (void)state; (void)lr; "
                 "(void)c; (void)step; /* nothing trainable */");
        for (int t = 0; t < g->ntensors; t++) {
            const Tensor *x = &g->tensors[t];
            if (x->kind != T_PARAM || !x->trainable)
                continue;
            size_t off = e->offset[t], go = e->grad_offset[t];
            emit(e, "/* %s */", comment_safe(e->ctx, x->name));
            if (adam)
                emit(e, "rt_adamw_update(params + %zu, grads + %zu, state + "
                     "%zu, state + %zu, %ld, lr, c, step);", off, go, go,
                     tf + go, x->numel);
            else
                emit(e, "rt_sgd_update(params + %zu, grads + %zu, state ? "
                     "state + %zu : NULL, %ld, lr, c, step);", off, go, go,
                     x->numel);
        }
        e->indent--;
        emit(e, "}");
        emit(e, "");
    }
    emit(e, "float %s_clip_grad_norm(float *grads, float max_norm)", n);
    emit(e, "{");
    e->indent++;
    emit(e, "double norm_sq = 0.0;");
    emit(e, "float norm, coef;");
    if (tf == 0)
        emit(e, "(void)grads; /* nothing trainable */");
    for (int pass = 0; pass <= 1; pass++) {
        if (pass == 1) {
            emit(e, "coef = rt_clip_coef(norm_sq, max_norm, &norm);");
            emit(e, "if (coef < 1.0f) {");
            e->indent++;
        }
        for (int t = 0; t < g->ntensors; t++) {
            const Tensor *x = &g->tensors[t];
            if (x->kind != T_PARAM || !x->trainable)
                continue;
            if (pass == 0)
                emit(e, "norm_sq += rt_grad_norm_sq(grads + %zu, %ld); /* %s */",
                     e->grad_offset[t], x->numel,
                     comment_safe(e->ctx, x->name));
            else
                emit(e, "rt_scale(grads + %zu, %ld, coef);",
                     e->grad_offset[t], x->numel);
        }
    }
    e->indent--;
    emit(e, "}");
    emit(e, "return norm;");
    e->indent--;
    emit(e, "}");
    emit(e, "");
}

/* ---- tables and data ------------------------------------------------------------ */

/* An int64 value as a C constant: INT64_MIN has no literal of its own. */
static const char *fmt_int64(Ctx *c, int64_t v)
{
    if (v == INT64_MIN)
        return "INT64_MIN";
    if (v >= -2147483647 && v <= 2147483647)
        return ctx_printf(c, "%lld", (long long)v);
    return ctx_printf(c, "INT64_C(%lld)", (long long)v);
}

/* Tensors in buffer b, and their elements. */
static int count_buffer(const Emit *e, Buffer b, size_t *elems)
{
    const Graph *g = e->g;
    int n = 0;
    *elems = 0;
    for (int t = 0; t < g->ntensors; t++)
        if (buffer_of(e->frozen, g, t) == b) {
            n++;
            *elems += (size_t)g->tensors[t].numel;
        }
    return n;
}

static int count_dropouts(const Graph *g)
{
    int n = 0;
    for (int k = 0; k < g->nnodes; k++)
        n += op_table[g->nodes[k].op].random_mask;
    return n;
}

static int in_range(const IntRange *r, long v)
{
    return (v >= r->lo && v < r->hi) || (r->has_ignore && v == r->ignore);
}

/* The values every reader of int64 tensor t accepts (the intersection of
 * their op rows' ranges), down through views of t and the rows that pass
 * int64 on (Slice, Concat, Transpose, Expand: INT_OUT_PASS without an
 * int_range; int64 Add, Sub, Mul, Div and ReduceSum compute new values and give their
 * own, any value); *any = 0
 * when nothing reads it. An ignore index survives when every other reader
 * accepts it too (labels read by two losses with the same ignore_index). */
static void int_readers(const Graph *g, int t, IntRange *acc, int *any)
{
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        for (int i = 0; i < n->nin; i++) {
            IntRange r, m;
            if (n->in[i] != t)
                continue;
            if ((op_table[n->op].alias && i == 0) ||
                (op_table[n->op].int_out == INT_OUT_PASS &&
                 !op_table[n->op].int_range &&
                 op_table[n->op].int_ok >> i & 1)) {
                int_readers(g, n->out[0], acc, any);
                continue;
            }
            if (!((op_table[n->op].int_inputs | op_table[n->op].int_ok) >> i
                  & 1) || !op_table[n->op].int_range)
                continue;
            op_table[n->op].int_range(g, n, &r);
            if (!*any) {
                *acc = r;
                *any = 1;
                continue;
            }
            m.lo = acc->lo > r.lo ? acc->lo : r.lo;
            m.hi = acc->hi < r.hi ? acc->hi : r.hi;
            m.has_ignore = 0;
            m.ignore = 0;
            if (acc->has_ignore && in_range(&r, acc->ignore))
                m.ignore = acc->ignore, m.has_ignore = 1;
            else if (r.has_ignore && in_range(acc, r.ignore))
                m.ignore = r.ignore, m.has_ignore = 1;
            if (m.hi < m.lo)
                m.hi = m.lo;                /* nothing but the ignore index */
            if (m.has_ignore && m.ignore >= m.lo && m.ignore < m.hi)
                m.has_ignore = 0;
            *acc = m;
        }
    }
}

/* What int64 input t accepts (rt_tensor_info's lo, hi, has_ignore and
 * ignore): [0, 1) for an input nothing reads. */
IntRange int_input_range(const Graph *g, int t)
{
    int any = 0;
    IntRange r = {0, 1, 0, 0};
    int_readers(g, t, &r, &any);
    if (!r.has_ignore)
        r.ignore = 0;               /* whatever a row left there */
    return r;
}

static const char *dims_list(Emit *e, int rank, const long *dims)
{
    Buf b;
    buf_init(&b, e->ctx);
    for (int i = 0; i < rank; i++)
        buf_printf(&b, "%s%ld", i ? ", " : "", dims[i]);
    return rank ? b.data : "0";     /* ISO C: no empty braces */
}

static void emit_info(Emit *e, int t, size_t off)
{
    const Tensor *x = &e->g->tensors[t];
    IntRange r = {0, 0, 0, 0};
    if (x->is_int && x->kind == T_INPUT)
        r = int_input_range(e->g, t);
    int trainable = x->kind == T_PARAM && x->trainable;
    emit(e, "    {\"%s\", %zu, %ld, %d, {%s}, %d, %ld, %ld, %zu, %d, %ld, %d},",
         x->name, off, x->numel, x->rank, dims_list(e, x->rank, x->dims),
         trainable, r.lo, r.hi, trainable ? e->grad_offset[t] : (size_t)0,
         r.has_ignore, r.ignore, x->is_int);
}

static void emit_dropout_table(Emit *e)
{
    const Graph *g = e->g;
    int n = count_dropouts(g);
    emit(e, "const rt_dropout_info %s_dropouts[%d] = {", g->name, n ? n : 1);
    for (int k = 0; k < g->nnodes; k++) {
        const Node *d = &g->nodes[k];
        const Tensor *y = &g->tensors[d->out[0]];
        if (op_table[d->op].random_mask)
            emit(e, "    {\"%s\", %ld, %d, {%s}, %s, %d},", d->name, y->numel,
                 y->rank, dims_list(e, y->rank, y->dims),
                 fmt_float(e->ctx, node_float(d, "ratio")), d->key);
    }
    if (!n)
        emit(e, "    {\"\", 0, 0, {0}, 0.0f, 0},");
    emit(e, "};");
}

static void emit_tables(Emit *e)
{
    const Graph *g = e->g;
    for (Buffer b = 0; b < BUF_NONE; b++) {
        size_t elems;
        int n = count_buffer(e, b, &elems);
        if (b == BUF_FROZEN && n == 0)
            continue;           /* nothing frozen: no table, as before */
        emit(e, "const rt_tensor_info %s_%s[%d] = {", g->name,
             buffer_names[b], n ? n : 1);
        for (int t = 0; t < g->ntensors; t++)
            if (buffer_of(e->frozen, g, t) == b)
                emit_info(e, t, e->offset[t]);
        if (!n)
            emit(e, "    {\"\", 0, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0},");
        emit(e, "};");
    }
    emit(e, "const rt_tensor_info %s_outputs[%d] = {", g->name, g->noutputs);
    for (int i = 0; i < g->noutputs; i++)
        emit_info(e, g->outputs[i], e->offset[g->outputs[i]]);
    emit(e, "};");
    emit_dropout_table(e);
    emit(e, "");
}

static void emit_statics(Emit *e)
{
    const Graph *g = e->g;
    int any = 0;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        if (op_table[n->op].emit_static) {
            op_table[n->op].emit_static(e, n);
            any = 1;
        }
    }
    if (any)
        emit(e, "");
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (int_constant(x) && x->nconsumers) {
            emit(e, "/* %s: an int64 constant */",
                 comment_safe(e->ctx, x->name));
            emit(e, "static const int64_t init_%s[%ld] = {", x->cname,
                 x->numel);
            for (long i = 0; i < x->numel; i += 8) {
                Buf b;
                buf_init(&b, e->ctx);
                for (long j = i; j < i + 8 && j < x->numel; j++)
                    buf_printf(&b, "%s,", fmt_int64(e->ctx, x->idata[j]));
                emit(e, "    %s", b.data);
            }
            emit(e, "};");
            emit(e, "");
        }
        if (e->weights_file || x->kind != T_PARAM || x->init != INIT_FILE ||
            int_constant(x) || e->frozen[t])
            continue;
        /* no path: the same values give the same file wherever they are */
        emit(e, "/* %s: its initial values */", comment_safe(e->ctx, x->name));
        emit(e, "static const float init_%s[%ld] = {", x->cname, x->numel);
        for (long i = 0; i < x->numel; i += 8) {
            Buf b;
            buf_init(&b, e->ctx);
            for (long j = i; j < i + 8 && j < x->numel; j++)
                buf_printf(&b, "%s,", fmt_float(e->ctx, x->data[j]));
            emit(e, "    %s", b.data);
        }
        emit(e, "};");
        emit(e, "");
    }
}

/* The initial values that live in NAME.weights: copied from the image,
 * which has the parameter buffer's layout. */
static void emit_load_weights(Emit *e)
{
    const Graph *g = e->g;
    emit(e, "void %s_load_weights(float *params, const float *image)", g->name);
    emit(e, "{");
    e->indent++;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind == T_PARAM && x->init == INIT_FILE && !int_constant(x) &&
            !e->frozen[t])
            emit(e, "rt_copy(params + %zu, image + %zu, %ld); /* %s */",
                 e->offset[t], e->offset[t], x->numel,
                 comment_safe(e->ctx, x->name));
    }
    e->indent--;
    emit(e, "}");
    emit(e, "");
}

/* Initial values given as data stay in the C file up to this many floats;
 * a model with more has them in NAME.weights, the parameter buffer's
 * image (a 10M-parameter model would be 150 MB of C text). */
#define WEIGHTS_EMBED_MAX ((size_t)1 << 18)

/* 1 when the initial values given as data go to NAME.weights (never
 * the frozen ones, which are in flash whatever their size). */
static int weights_in_file(const Graph *g, const char *frozen)
{
    size_t n = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind == T_PARAM && !int_constant(x) && x->init == INIT_FILE &&
            !frozen[t])
            n += (size_t)x->numel;
    }
    return n > WEIGHTS_EMBED_MAX;
}

static void emit_descriptor(Emit *e, const Compiled *m)
{
    const char *n = e->g->name, *u = upper(e->ctx, n);
    emit(e, "const rt_model %s_model = {", n);
    emit(e, "    \"%s\", \"%s\", %s_ARENA_BYTES,", n, m->policy->name, u);
    emit(e, "    %s_PARAM_FLOATS, %s_INPUT_FLOATS, %s_INT_INPUT_COUNT, "
         "%s_OUTPUT_FLOATS,", u, u, u, u);
    emit(e, "    %s_N_PARAMS, %s_N_INPUTS, %s_N_INT_INPUTS, %s_N_OUTPUTS, "
         "%s_N_DROPOUTS,", u, u, u, u, u);
    emit(e, "    %s_params, %s_inputs, %s_int_inputs, %s_outputs, %s_dropouts,",
         n, n, n, n, n);
    if (graph_trains(e->g))
        emit(e, "    %s_init, %s_forward, %s_train_step, %s_sgd,", n, n, n, n);
    else
        emit(e, "    %s_init, %s_forward, NULL, NULL, /* forward only */", n, n);
    if (e->weights_file)
        emit(e, "    %s_load_weights,", n);
    else
        emit(e, "    NULL, /* initial values in this file */");
    if (graph_trains(e->g)) {
        emit(e, "    %s_train_step_acc, %s_SGD_STATE_FLOATS, "
             "%s_ADAMW_STATE_FLOATS,", n, u, u);
        emit(e, "    %s_sgd_step, %s_adamw_step, %s_clip_grad_norm,", n, n, n);
        emit(e, "    %s_GRAD_FLOATS, %s_train_step_fused, "
             "%s_FUSED_ARENA_BYTES,", u, n, u);
    } else {
        emit(e, "    NULL, 0, 0, NULL, NULL, NULL, /* forward only */");
        emit(e, "    0, NULL, 0,");
    }
    emit(e, "    %s_FORWARD_ARENA_BYTES,", u);
    if (graph_trains(e->g))
        emit(e, "    %s_train_step_hooked,", n);
    else
        emit(e, "    NULL, /* forward only */");
    size_t ff;
    int nf = count_buffer(e, BUF_FROZEN, &ff);
    if (nf)
        emit(e, "    %s_FROZEN_FLOATS, %s_N_FROZEN, %s_frozen_params, "
             "%s_frozen,", u, u, n, n);
    else
        emit(e, "    0, 0, NULL, NULL, /* nothing frozen in this file */");
    emit(e, "};");
}

/* ---- files ----------------------------------------------------------------------- */

static void emit_summary(Emit *e, const Compiled *m)
{
    const Graph *g = e->g;
    Summary s;
    summarize(m, &s);
    emit(e, " * policy:          %s", m->policy->name);
    if (!graph_trains(g))
        emit(e, " * forward only:    no output is the loss, so no backward, "
             "train step or SGD");
    if (s.compact_bytes > 0)
        emit(e, " * saved bytes:     %.0f (activations kept for the backward, "
             "%.0f of them in compact forms)", s.saved_bytes, s.compact_bytes);
    else
        emit(e, " * saved bytes:     %.0f (activations kept for the backward)",
             s.saved_bytes);
    emit(e, " * arena bytes:     %.0f", s.arena_bytes);
    if (m->fused)
        emit(e, " * fused step:      %.0f arena bytes, no gradient buffer "
             "(%.0f bytes)", s.fused_arena_bytes, s.grad_bytes);
    emit(e, " * recompute:       %.0f FLOPs in %.0f node executions",
         s.recompute_flops, s.recompute_execs);
    int held = 0;
    for (int i = 0; i < m->train->nstmts; i++)
        held += m->train->stmts[i].held;
    if (held)
        emit(e, " * rebuilt checkpoints: %d recomputes keep their outputs to "
             "the last reader (revolve)", held);
    emit(e, " * saved tensors:");
    for (int t = 0; t < g->ntensors; t++)
        if (m->remat->keep[t] == KEEP_SAVE)
            emit(e, " *   %s [%s]", g->tensors[t].name,
                 shape_str(e->ctx, &g->tensors[t]));
    emit(e, " * recomputed tensors:");
    for (int t = 0; t < g->ntensors; t++)
        if (m->remat->keep[t] == KEEP_RECOMPUTE)
            emit(e, " *   %s [%s]", g->tensors[t].name,
                 shape_str(e->ctx, &g->tensors[t]));
    int forms = 0;          /* kept or rebuilt */
    for (int k = 0; k < g->nnodes; k++)
        forms |= g->nodes[k].compact;
    if (forms && graph_trains(g))
        emit(e, " * compact forms (what the backward reads of a tensor):");
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[g->order[k]];
        int v = n->compact ? m->train->compact[n - g->nodes] : -1;
        if (v >= 0)
            emit(e, " *   %s: %s of %s (%zu bytes%s)",
                 comment_safe(e->ctx, g->tensors[m->train->values[v].tensor].name),
                 n->row->compact_form, comment_safe(e->ctx, n->name),
                 m->train->values[v].bytes,
                 m->remat->compact_rebuilt[compact_operand(n)]
                     ? ", rebuilt in the backward" : "");
    }
}

/* What the device holds, for the optimizer remat was told (remat
 * schedule prints the terms; docs/memory.md has the formula). */
static void emit_ram(Emit *e, const Compiled *m, const char *u)
{
    Ram r;
    ram_of(m, &r);
    const Optim *o = &m->optim;
    emit(e, "/* Bytes of RAM a %s step needs with %s%s%s: the parameters it "
         "writes,", graph_trains(e->g) ? "train" : "forward",
         o->adamw ? "AdamW" : o->momentum > 0 ? "SGD with momentum"
         : "plain SGD", o->fused ? ", fused" : "",
         graph_trains(e->g) ? "" : " (unused: forward only)");
    emit(e, " * the optimizer's state, the gradient buffer (none when fused), "
         "the arena");
    emit(e, " * and the inputs and outputs; and bytes that may stay in "
         "flash: frozen");
    emit(e, " * parameters and int64 constants (docs/memory.md). */");
    emit(e, "#define %s_RAM_BYTES %.0f", u, ram_total(&r));
    emit(e, "#define %s_FLASH_BYTES %.0f", u, r.flash);
}

/* The frozen parameters' sizes: always defined, 0 when nothing frozen
 * is in the file, so that firmware may size by them unconditionally. */
static void emit_frozen_macros(Emit *e, int nf, size_t ff)
{
    const char *n = e->g->name, *u = upper(e->ctx, n);
    emit(e, "/* Floats of the frozen parameters whose values are compiled "
         "into the C file");
    emit(e, " * (a static const array, so in flash), not in the parameter "
         "buffer;");
    emit(e, " * %s_frozen_params[] names them when there are any. */", n);
    emit(e, "#define %s_FROZEN_FLOATS %zu", u, ff);
    emit(e, "#define %s_N_FROZEN %d", u, nf);
}

static void emit_header(Emit *e, const Compiled *m, const char *guard)
{
    const Graph *g = e->g;
    const char *n = g->name, *u = upper(e->ctx, n);
    size_t pf, inf, iin, ff;
    int np = count_buffer(e, BUF_PARAMS, &pf);
    int ni = count_buffer(e, BUF_INPUTS, &inf);
    int nii = count_buffer(e, BUF_INT_INPUTS, &iin);
    int nf = count_buffer(e, BUF_FROZEN, &ff);
    size_t of = 0;
    for (int i = 0; i < g->noutputs; i++)
        output_place(g, i, &of);
    size_t arena = m->train->arena_bytes > m->fwd->arena_bytes
                       ? m->train->arena_bytes : m->fwd->arena_bytes;
    emit(e, "/* Generated by remat %s from model '%s' under policy '%s'. */",
         REMAT_VERSION, n, m->policy->name);
    emit(e, "#ifndef %s", guard);
    emit(e, "#define %s", guard);
    emit(e, "");
    emit(e, "/* The remat that wrote this code (a firmware build may check it). */");
    emit(e, "#define %s_REMAT_VERSION \"%s\"", u, REMAT_VERSION);
    emit(e, "");
    emit(e, "#include \"remat_rt.h\"");
    emit(e, "");
    emit(e, "#ifdef __cplusplus");
    emit(e, "extern \"C\" {");
    emit(e, "#endif");
    emit(e, "");
    int trains = graph_trains(g);
    emit(e, "/* Bytes of the one arena forward%s work%s in. */",
         trains ? " and train_step" : "", trains ? "" : "s");
    emit(e, "#define %s_ARENA_BYTES %zu", u, arena);
    emit(e, "/* Bytes %s_forward alone needs (inference; at most %s_ARENA_BYTES). */",
         n, u);
    emit(e, "#define %s_FORWARD_ARENA_BYTES %zu", u, m->fwd->arena_bytes);
    if (trains)
        emit(e, "/* 1: NAME_train_step and NAME_sgd exist (the graph has a "
             "loss). */");
    else
        emit(e, "/* 0: forward only. No output is the loss, so there is no "
             "train step,\n * no SGD and no gradient buffer. */");
    emit(e, "#define %s_HAS_TRAIN_STEP %d", u, trains);
    if (trains) {
        emit(e, "/* Bytes of the arena %s_train_step_fused works in: the "
             "train step's", n);
        emit(e, " * with each parameter's gradient in it while it is summed, "
             "instead of a");
        emit(e, " * gradient buffer of %s_GRAD_FLOATS floats. */", u);
        emit(e, "#define %s_FUSED_ARENA_BYTES %zu", u, m->fused->arena_bytes);
    }
    emit(e, "/* Floats in the parameter buffer. */");
    emit(e, "#define %s_PARAM_FLOATS %zu", u, pf);
    emit_frozen_macros(e, nf, ff);
    if (trains) {
        emit(e, "/* Floats in the gradient buffer: the trainable parameters "
             "only, each at");
        emit(e, " * its grad_offset in %s_params[] (a frozen parameter has "
             "no slot). */", n);
        emit(e, "#define %s_GRAD_FLOATS %zu", u, e->trainable);
    }
    emit(e, "#define %s_INPUT_FLOATS %zu", u, inf);
    emit(e, "/* int64 elements in the int_inputs buffer (indices, labels). */");
    emit(e, "#define %s_INT_INPUT_COUNT %zu", u, iin);
    emit(e, "#define %s_OUTPUT_FLOATS %zu", u, of);
    emit(e, "#define %s_N_PARAMS %d", u, np);
    emit(e, "#define %s_N_INPUTS %d", u, ni);
    emit(e, "#define %s_N_INT_INPUTS %d", u, nii);
    emit(e, "#define %s_N_OUTPUTS %d", u, g->noutputs);
    emit(e, "#define %s_N_DROPOUTS %d", u, count_dropouts(g));
    emit_ram(e, m, u);
    emit(e, "");
    emit(e, "/* Where each tensor lives in its buffer, and its shape; an int64");
    emit(e, " * input's table row also says which values its readers accept. An");
    emit(e, " * int64 (or bool: 0 or 1) output, is_int 1, holds its int64s' bytes in");
    emit(e, " * the outputs buffer, two floats each, at an even offset. */");
    emit(e, "extern const rt_tensor_info %s_params[];", n);
    if (nf)
        emit(e, "extern const rt_tensor_info %s_frozen_params[];", n);
    emit(e, "extern const rt_tensor_info %s_inputs[];", n);
    emit(e, "extern const rt_tensor_info %s_int_inputs[];", n);
    emit(e, "extern const rt_tensor_info %s_outputs[];", n);
    emit(e, "/* The Dropout nodes, in file order. */");
    emit(e, "extern const rt_dropout_info %s_dropouts[];", n);
    emit(e, "");
    emit(e, "/* Fills params from the graph's initializers (seeded draws). */");
    emit(e, "void %s_init(float *params, uint64_t seed);", n);
    if (e->weights_file) {
        emit(e, "/* The initial values given as data (init=\"file\", an ONNX "
             "model's");
        emit(e, " * initializers) are not in this code: %s_WEIGHTS_BYTES "
             "bytes of", u);
        emit(e, " * OUT.weights (written beside OUT.c; by remat build, beside "
             "the trainer) hold them. It is the");
        emit(e, " * parameter buffer's image: %s_PARAM_FLOATS float32 "
             "values, little-endian,", u);
        emit(e, " * each parameter at its %s_params[] offset (0 where a "
             "parameter is", n);
        emit(e, " * drawn by %s_init). After %s_init, %s_load_weights copies "
             "those", n, n, n);
        emit(e, " * parameters from the image (in memory, or mapped from "
             "flash). */");
        emit(e, "#define %s_WEIGHTS_BYTES %zu", u, pf * sizeof(float));
        emit(e, "void %s_load_weights(float *params, const float *image);", n);
    }
    emit(e, "/* Forward only, in inference mode (Dropout passes its input");
    if (trains) {
        emit(e, " * through, BatchNormalization uses the running statistics); returns");
        emit(e, " * the loss. outputs may be NULL, and int_inputs when the model has");
        emit(e, " * no int64 input. */");
    } else {
        emit(e, " * through, BatchNormalization uses the running statistics); fills");
        emit(e, " * outputs and returns 0 (the model has no loss). int_inputs may be");
        emit(e, " * NULL when the model has no int64 input. */");
    }
    emit(e, "%s;", signature(e->ctx, n, 0));
    if (trains) {
        emit(e, "/* Forward in training mode, loss, backward: overwrites grads and");
        emit(e, " * returns the loss. Dropout's masks are a function of (seed, step,");
        emit(e, " * node): the same arguments give the same masks and gradients.");
        emit(e, " * BatchNormalization (training mode) uses the batch's statistics and");
        emit(e, " * updates its running statistics in params, the only parameters");
        emit(e, " * a train step writes. */");
        emit(e, "%s;", signature(e->ctx, n, 1));
        emit(e, "/* The same, but adds into grads instead of overwriting them:");
        emit(e, " * gradient accumulation (scale the sum by 1/k after k "
             "micro-batches). */");
        emit(e, "%s;", signature(e->ctx, n, 2));
        emit(e, "/* train_step (accumulate 0) or train_step_acc (1) that hands "
             "each");
        emit(e, " * trainable gradient to hook as soon as it is final, in "
             "buckets");
        emit(e, " * (rt_grad_hook in remat_rt.h): a data-parallel trainer "
             "reduces them");
        emit(e, " * across processes while the backward goes on. hook may "
             "be NULL. */");
        emit(e, "%s;", signature(e->ctx, n, 5));
        emit(e, "/* params -= lr * grads, over the trainable parameters. */");
        emit(e, "void %s_sgd(float *params, const float *grads, float lr);", n);
        emit(e, "/* Optimizer state: a slot per trainable parameter float, the "
             "gradient");
        emit(e, " * buffer's layout (AdamW: every exp_avg, then every "
             "exp_avg_sq). Zero it");
        emit(e, " * before the first step; step counts updates from 1. "
             "Plain SGD (momentum");
        emit(e, " * 0) keeps none: its state may be NULL. */");
        emit(e, "#define %s_SGD_STATE_FLOATS %zu", u, e->trainable);
        emit(e, "#define %s_ADAMW_STATE_FLOATS %zu", u,
             2 * e->trainable);
        emit(e, "/* torch.optim.SGD (momentum, dampening, Nesterov, weight "
             "decay) */");
        emit(e, "void %s_sgd_step(float *params, const float *grads, "
             "float *state, float lr,", n);
        emit(e, "    const rt_sgd_config *c, uint64_t step);");
        emit(e, "/* torch.optim.AdamW (decoupled weight decay, bias "
             "correction) */");
        emit(e, "void %s_adamw_step(float *params, const float *grads, "
             "float *state, float lr,", n);
        emit(e, "    const rt_adamw_config *c, uint64_t step);");
        emit(e, "/* torch.nn.utils.clip_grad_norm_ over the trainable "
             "gradients: scales them");
        emit(e, " * by max_norm / (norm + 1e-6) when that is below 1; returns "
             "the norm. */");
        emit(e, "float %s_clip_grad_norm(float *grads, float max_norm);", n);
        emit(e, "/* The train step with the optimizer inside the backward: "
             "each trainable");
        emit(e, " * parameter is stepped by opt (its kind, hyperparameters, "
             "lr and step");
        emit(e, " * set by the caller) as soon as its gradient is final, so "
             "no gradient");
        emit(e, " * buffer exists; state as for %s_sgd_step or "
             "%s_adamw_step. The", n, n);
        emit(e, " * parameters after it are those of train_step then the "
             "optimizer's step.");
        emit(e, " * Needs %s_FUSED_ARENA_BYTES of arena. No accumulation "
             "and no clipping", u);
        emit(e, " * by the global norm: both need every gradient at once. */");
        emit(e, "%s;", signature(e->ctx, n, 4));
    }
    emit(e, "");
    if (!trains)
        emit(e, "/* Its train_step and sgd are NULL: forward only. */");
    emit(e, "extern const rt_model %s_model;", n);
    emit(e, "");
    emit(e, "#ifdef __cplusplus");
    emit(e, "}");
    emit(e, "#endif");
    emit(e, "");
    emit(e, "#endif");
}

/* The weights image: the parameter buffer, little-endian float32, with
 * the data-initialized parameters at their offsets and 0 elsewhere. */
static void weights_image(Ctx *c, const Graph *g, const char *frozen,
                          const size_t *offset, size_t floats, Buf *out)
{
    unsigned char *img = ctx_alloc(c, floats * 4 + 1);
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind != T_PARAM || x->init != INIT_FILE || int_constant(x) ||
            frozen[t])
            continue;
        for (long i = 0; i < x->numel; i++) {
            uint32_t u;
            memcpy(&u, &x->data[i], 4);
            unsigned char *p = img + (offset[t] + (size_t)i) * 4;
            for (int b = 0; b < 4; b++)
                p[b] = (unsigned char)(u >> (8 * b));
        }
    }
    out->data = (char *)img;
    out->len = floats * 4;
    out->cap = floats * 4 + 1;
}

int emit_c(Ctx *c, const Compiled *m, const char *header_name, Buf *cfile,
           Buf *hfile, Buf *weights)
{
    const char *frozen = frozen_tensors(c, m->g);
    int in_file = weights_in_file(m->g, frozen);
    Emit e = {cfile, c, m->g, 0, layout(c, m->g, frozen), NULL, 0, in_file,
              0, grad_layout(c, m->g), 0, trainable_floats(m->g), 0, 0, NULL,
              NULL, frozen, NULL, NULL, NULL, NULL};
    size_t wf = 0, ff;
    if (in_file)
        count_buffer(&e, BUF_PARAMS, &wf);
    count_buffer(&e, BUF_FROZEN, &ff);
    if (weights) {
        buf_init(weights, c);
        if (wf)
            weights_image(c, m->g, frozen, e.offset, wf, weights);
    }
    char *gd = (char *)upper(c, header_name);
    for (char *p = gd; *p; p++)
        if (!isalnum((unsigned char)*p))
            *p = '_';
    emit(&e, "/*");
    emit(&e, " * Generated by remat %s from model '%s'. Do not edit.",
         REMAT_VERSION, m->g->name);
    emit(&e, " *");
    emit_summary(&e, m);
    emit(&e, " */");
    emit(&e, "#include \"%s\"", header_name);
    emit(&e, "");
    emit_statics(&e);
    emit_frozen_data(&e, m, ff);
    emit_tables(&e);
    emit_init(&e);
    if (e.weights_file)
        emit_load_weights(&e);
    emit_function(&e, m, 0);
    if (graph_trains(m->g)) {
        emit_function(&e, m, 1);
        emit_fused(&e, m);
        emit_sgd(&e);
        emit_optimizers(&e);
    }
    emit_descriptor(&e, m);
    Emit h = {hfile, c, m->g, 0, e.offset, NULL, 0, e.weights_file, 0,
              e.grad_offset, 0, e.trainable, 0, 0, NULL, NULL, frozen, NULL,
              NULL, NULL, NULL};
    /* not REMAT_..., which the runtime's own header guard uses */
    emit_header(&h, m, ctx_printf(c, "GENERATED_%s", gd));
    return 0;
}
