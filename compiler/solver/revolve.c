/*
 * revolve.c: the plans of Griewank's revolve over the chain of a graph's
 * opened groups, for --max-arena's last resort (solve_arena.c).
 *
 * The chain: group i (0 <= i < n) is the tensors one block makes that a
 * budget opened (an LSTM step's h and c), state i; step i reads state
 * i - 1 (step 0 the graph's inputs, always there) and makes state i; step
 * n is what follows the last group (the head and the loss). Reversing a
 * step is its nodes' backwards, which under REBUILD_BLOCK rebuild what
 * they read once, from the nearest state that is there.
 *
 * Revolve reverses steps a+1 .. b from state a with s free slots by
 * sweeping forward to a state m in between, keeping it in a slot,
 * reversing m+1 .. b with the s - 1 slots left, freeing the slot and
 * reversing a+1 .. m with s again. Counted in steps swept (each step's own
 * rerun, one per step whatever the plan, left out):
 *
 *   T(1, s) = 0,   T(l, 0) = l (l - 1) / 2 (every step from state a),
 *   T(l, s) = min over 0 < k < l of  k + T(l - k, s - 1) + T(k, s).
 *
 * The first level rides on the forward, which makes every state anyway:
 * the states it keeps are saved (SAVE), and cost nothing to reach:
 *
 *   F(l, s) = min(F(l, s - 1), min over k of F(l - k, s - 1) + T(k, s)).
 *
 * A state kept below the first level is a rebuilt value held to its last
 * reader (Remat.hold): the sweep that makes it is the first rebuild of it
 * during the backward of the last step of its segment or of any step
 * before, so its hold is the g->order index of that step's last node
 * (schedule.c keeps a value rebuilt for the backward of a node at or
 * before it). The sweeps themselves are schedule.c's: the backward of
 * step b asks for state b - 1 and rebuilds it from the nearest state
 * there, passing the states to be held on the way.
 *
 * The counts assume steps of one size and a slot per state; on another
 * chain they only propose plans, which solve_arena.c schedules and
 * plans like any other, keeping the least recompute that fits.
 *
 * The chain's links are nested checkpointing's too (solve_opened,
 * solve_groups), which solve_arena.c's evenly spaced plans choose among.
 */
#include "solver.h"

#include <limits.h>
#include <string.h>

typedef struct {
    int n, slots;
    double *t, *f;          /* T and F, [l * (slots + 1) + s] */
    int *tk, *fk;           /* their k; fk 0: F(l, s - 1) */
    const Graph *g;
    const int *open, *first;
    char *recompute;
    int *hold;
    int *end;               /* per step: its last node's g->order index */
} Revolve;

static int at(const Revolve *v, int l, int s)
{
    return l * (v->slots + 1) + s;
}

static void revolve_counts(Revolve *v)
{
    for (int l = 1; l <= v->n; l++)
        for (int s = 0; s <= v->slots; s++) {
            double best = (double)l * (l - 1) / 2, first = best;
            int bk = 0, fk = 0;
            if (s > 0) {
                first = v->f[at(v, l, s - 1)];
                for (int k = 1; k < l; k++) {
                    double c = k + v->t[at(v, l - k, s - 1)] + v->t[at(v, k, s)];
                    double d = v->f[at(v, l - k, s - 1)] + v->t[at(v, k, s)];
                    if (c < best)
                        best = c, bk = k;
                    if (d < first)
                        first = d, fk = k;
                }
            }
            v->t[at(v, l, s)] = best;
            v->tk[at(v, l, s)] = bk;
            v->f[at(v, l, s)] = first;
            v->fk[at(v, l, s)] = fk;
        }
}

/* State i's tensors: saved (hold < 0) or held from hold. */
static void keep_state(Revolve *v, int i, int hold)
{
    for (int j = v->first[i]; j < v->first[i + 1]; j++) {
        v->recompute[v->open[j]] = hold >= 0;
        v->hold[v->open[j]] = hold;
    }
}

/* Steps a+1 .. a+l from state a (-1: the inputs) with s slots, the sweeps
 * made for the backward of step a+l or before. */
static void held_level(Revolve *v, int a, int l, int s)
{
    while (l > 1 && s > 0) {
        int k = v->tk[at(v, l, s)];
        if (k == 0)
            return;
        int from = v->end[a + l];
        keep_state(v, a + k, from);
        held_level(v, a + k, l - k, s - 1);
        l = k;          /* then a+1 .. a+k with s: a tail call */
    }
}

static void first_level(Revolve *v, int a, int l, int s)
{
    while (l > 1 && s > 0) {
        int k = v->fk[at(v, l, s)];
        if (k == 0) {
            s--;
            continue;
        }
        keep_state(v, a + k, -1);
        held_level(v, a, k, s);
        a += k;
        l -= k;
        s--;
    }
}

/* The last node of each step in g->order: the latest producer of its
 * group's tensors; the step after the last group runs to the end. */
static int *step_ends(Ctx *c, const Graph *g, const int *open,
                      const int *first, int n)
{
    int *pos = ctx_alloc(c, (size_t)g->nnodes * sizeof *pos);
    int *end = ctx_alloc(c, ((size_t)n + 1) * sizeof *end);
    for (int k = 0; k < g->nnodes; k++)
        pos[g->order[k]] = k;
    for (int i = 0; i < n; i++) {
        end[i] = -1;
        for (int j = first[i]; j < first[i + 1]; j++) {
            int p = pos[g->tensors[open[j]].producer];
            end[i] = p > end[i] ? p : end[i];
        }
    }
    end[n] = INT_MAX;
    return end;
}

static void revolve_tables(Ctx *c, Revolve *v)
{
    size_t cells = ((size_t)v->n + 1) * ((size_t)v->slots + 1);
    v->t = ctx_alloc(c, cells * sizeof *v->t);
    v->f = ctx_alloc(c, cells * sizeof *v->f);
    v->tk = ctx_alloc(c, cells * sizeof *v->tk);
    v->fk = ctx_alloc(c, cells * sizeof *v->fk);
    revolve_counts(v);
}

double revolve_advances(Ctx *c, int steps, int slots, int first)
{
    Revolve v;
    memset(&v, 0, sizeof v);
    v.n = steps;
    v.slots = slots;
    revolve_tables(c, &v);
    return first ? v.f[at(&v, steps, slots)] : v.t[at(&v, steps, slots)];
}

int *solve_opened(Ctx *c, const Graph *g, const Remat *r, int *n)
{
    int *open = ctx_alloc(c, (size_t)g->ntensors * sizeof *open);
    *n = 0;
    for (int k = 0; k < g->nnodes; k++) {
        const Node *nd = &g->nodes[g->order[k]];
        for (int o = 0; o < nd->nout; o++)
            if (r->opened[nd->out[o]] && r->needed[nd->out[o]])
                open[(*n)++] = nd->out[o];
    }
    return open;
}

int solve_groups(Ctx *c, const Graph *g, const int *open, int n,
                 int by_block, int **first)
{
    int *f = ctx_alloc(c, ((size_t)n + 1) * sizeof *f), k = 0;
    for (int i = 0; i < n; i++) {
        int b = g->nodes[g->tensors[open[i]].producer].block;
        if (!by_block || i == 0 || b < 0 ||
            b != g->nodes[g->tensors[open[i - 1]].producer].block)
            f[k++] = i;
    }
    f[k] = n;
    *first = f;
    return k;
}

/* Plans for each count of slots up to this many. */
#define REVOLVE_SLOTS 24

int revolve_plans(Ctx *c, const Graph *g, const Remat *r,
                  int (*each)(void *ctx, const char *recompute,
                              const int *hold),
                  void *ctx)
{
    int nopen, *first;
    int *open = solve_opened(c, g, r, &nopen);
    int ngroups = solve_groups(c, g, open, nopen, 1, &first);
    int slots = ngroups < REVOLVE_SLOTS ? ngroups : REVOLVE_SLOTS;
    if (ngroups < 2)
        return 0;
    Revolve v = {ngroups + 1, slots, NULL, NULL, NULL, NULL, g, open, first,
                 NULL, NULL, NULL};
    revolve_tables(c, &v);
    v.recompute = ctx_alloc(c, (size_t)g->ntensors);
    v.hold = ctx_alloc(c, (size_t)g->ntensors * sizeof *v.hold);
    v.end = step_ends(c, g, open, first, ngroups);
    for (int s = 1; s <= slots; s++)
        for (int inner = 0; inner < 2; inner++) {
            for (int t = 0; t < g->ntensors; t++) {
                v.recompute[t] = r->free[t] &&
                                 (inner || r->wanted[t] == KEEP_RECOMPUTE);
                v.hold[t] = -1;
            }
            for (int j = 0; j < first[ngroups]; j++)
                v.recompute[open[j]] = 1;
            first_level(&v, -1, v.n, s);
            if (each(ctx, v.recompute, v.hold))
                return 1;
        }
    return 0;
}
