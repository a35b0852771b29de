/*
 * ram.c: what a train step needs in RAM and what may stay in flash.
 *
 * A device that trains holds, besides the arena, the parameters it
 * writes, the optimizer's state, the gradient buffer and the step's inputs
 * and outputs; every one of these is fixed by the graph and the optimizer,
 * so a bound on the whole (--max-ram) is a bound on the arena less them.
 * Parameters nothing writes (frozen weights, eval-mode BatchNorm
 * statistics) whose values the compiler knows, and int64 constants, are
 * read only: flash, where the emitter puts them (frozen_tensors). A frozen
 * parameter drawn at run time (no --seed) is in RAM, in the params buffer
 * init fills. docs/memory.md gives the formula term by term.
 */
#include "../remat.h"

#include <string.h>

char *updated_tensors(Ctx *c, const Graph *g)
{
    char *w = ctx_alloc(c, (size_t)g->ntensors + 1);
    memset(w, 0, (size_t)g->ntensors + 1);
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        for (int i = 0; i < n->nin; i++)
            if (node_updates(n) & NEED_IN(i))
                w[n->in[i]] = 1;
    }
    return w;
}

static int known_at_compile_time(const Graph *g, const Tensor *x)
{
    switch (x->init) {
    case INIT_ZEROS:
    case INIT_ONES:
    case INIT_CONSTANT:
    case INIT_FILE: return 1;
    case INIT_UNIFORM:
    case INIT_NORMAL: return g->has_seed;
    }
    return 0;
}

char *frozen_tensors(Ctx *c, const Graph *g)
{
    char *f = updated_tensors(c, g);    /* one pass, then turned over */
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        f[t] = (char)(x->kind == T_PARAM && !x->is_int && !x->trainable &&
                      !f[t] && known_at_compile_time(g, x));
    }
    return f;
}

/* The outputs buffer's floats, laid out as the emitter lays it out: an
 * int64 output two floats per element, at an even offset. */
static double output_bytes(const Graph *g)
{
    size_t at = 0;
    for (int i = 0; i < g->noutputs; i++) {
        const Tensor *x = &g->tensors[g->outputs[i]];
        if (x->is_int)
            at += at & 1;
        at += (size_t)x->numel * (x->is_int ? 2 : 1);
    }
    return (double)at * sizeof(float);
}

/* The optimizer's state floats per trainable float. */
static int state_per_float(const Optim *o)
{
    return o->adamw ? 2 : o->momentum > 0 ? 1 : 0;
}

void ram_fixed(const Graph *g, const Optim *o, Ram *r)
{
    *r = (Ram){0, 0, 0, 0, 0, 0};
    int trains = graph_trains(g);
    Ctx c;
    ctx_init(&c);
    const char *flash = frozen_tensors(&c, g);
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        double bytes = tensor_bytes(x);
        if (x->kind == T_INPUT)
            r->io += bytes;
        else if (x->kind != T_PARAM)
            continue;
        else if (x->is_int)
            r->flash += bytes;          /* a static const array */
        else if (trains && !flash[t])
            r->params += bytes;     /* trained, updated, or drawn at run time */
        else
            r->flash += bytes;
    }
    ctx_free(&c);
    r->io += output_bytes(g);
    if (!trains)
        return;
    double trainable = (double)trainable_floats(g) * sizeof(float);
    r->optimizer = trainable * state_per_float(o);
    r->grads = o->fused ? 0 : trainable;
}

void ram_of(const Compiled *m, Ram *r)
{
    ram_fixed(m->g, &m->optim, r);
    size_t fwd = m->fwd->arena_bytes, train = m->train->arena_bytes;
    size_t arena = train > fwd ? train : fwd;
    if (m->fused && m->optim.fused)
        arena = m->fused->arena_bytes > fwd ? m->fused->arena_bytes : fwd;
    r->arena = (double)arena;
}

double ram_total(const Ram *r)
{
    return r->params + r->optimizer + r->grads + r->io + r->arena;
}
