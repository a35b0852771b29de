/*
 * plan.c: every value an offset in one arena, from liveness.
 *
 * A value occupies its buffer on the closed interval [def, last] of
 * statement indices. The interval is closed at both ends on purpose: a
 * statement's outputs are live at the same statement as its inputs' last
 * read, so no kernel ever writes a buffer it is still reading.
 *
 * Values are placed in order of definition, first fit: values whose last
 * read is before the new value's definition are released (as ggml's
 * allocator releases a tensor when its consumer count reaches zero), and the
 * new one takes the lowest aligned gap that fits, or goes on top. The
 * arena's size is the highest end ever placed. Deterministic: the order is
 * the schedule's, ties go to the lower offset.
 *
 * A view (schedule.c) takes no space: it gets its owner's offset, and its
 * reads were counted as its owner's when the schedule was built, so the
 * owner is not released while any view of it is still read.
 *
 * The free space below the top is a list of gaps sorted by offset, merged
 * with their neighbours when a value is released. Which values are released
 * before a placement is all that matters, not their order: the gaps are
 * then the free bytes below the top as maximal runs, whatever order built
 * them. So releases come from the values bucketed by last read, each
 * bucket released once the definitions pass it (a value placed after its
 * bucket was passed waits in a short list for the next definition past its
 * last read). A plan costs O(values x gaps + statements), so a graph whose
 * whole forward is live at once (a long chain under `full`) plans as fast
 * as any other. (A heap ordered by last use released the same values; on
 * the 96-layer GPT's `remat pareto` it took a third of the time.)
 */
#include "../remat.h"

#include <stdlib.h>
#include <string.h>

static size_t align_up(size_t n)
{
    return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

typedef struct {
    size_t off, size;
} Gap;

typedef struct {
    Gap *gaps;              /* free space below top, sorted by offset */
    int ngaps;
    size_t top;
} Planner;

/* Returns [off, off + size) to the free space, merging neighbours; space
 * that reaches the top lowers it. */
static void release(Planner *p, size_t off, size_t size)
{
    int lo = 0, hi = p->ngaps;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (p->gaps[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&p->gaps[lo + 1], &p->gaps[lo], (size_t)(p->ngaps - lo) * sizeof(Gap));
    p->gaps[lo] = (Gap){off, size};
    p->ngaps++;
    if (lo + 1 < p->ngaps && p->gaps[lo].off + p->gaps[lo].size == p->gaps[lo + 1].off) {
        p->gaps[lo].size += p->gaps[lo + 1].size;
        memmove(&p->gaps[lo + 1], &p->gaps[lo + 2],
                (size_t)(p->ngaps - lo - 2) * sizeof(Gap));
        p->ngaps--;
    }
    if (lo > 0 && p->gaps[lo - 1].off + p->gaps[lo - 1].size == p->gaps[lo].off) {
        p->gaps[lo - 1].size += p->gaps[lo].size;
        memmove(&p->gaps[lo], &p->gaps[lo + 1],
                (size_t)(p->ngaps - lo - 1) * sizeof(Gap));
        p->ngaps--;
    }
    Gap *last = &p->gaps[p->ngaps - 1];
    if (last->off + last->size == p->top) {
        p->top = last->off;
        p->ngaps--;
    }
}

/* The lowest gap that fits, shrunk from its start; else the top. */
static size_t take(Planner *p, size_t size)
{
    for (int i = 0; i < p->ngaps; i++) {
        Gap *g = &p->gaps[i];
        if (g->size < size)
            continue;
        size_t off = g->off;
        g->off += size;
        g->size -= size;
        if (g->size == 0) {
            memmove(g, g + 1, (size_t)(p->ngaps - i - 1) * sizeof(Gap));
            p->ngaps--;
        }
        return off;
    }
    size_t off = p->top;
    p->top += size;
    return off;
}

/* The statements values live on: one past the latest last read. */
static int span(const Schedule *s)
{
    int n = s->nstmts;
    for (int k = 0; k < s->nvalues; k++)
        if (s->values[k].last >= n)
            n = s->values[k].last + 1;
    return n;
}

/* The lower bound of any plan of this schedule: the most bytes live at one
 * statement (each value's aligned size on [def, last]; views hold none),
 * since values live at one statement cannot share bytes; n = span(s). */
static size_t peak_live(Ctx *c, const Schedule *s, int n)
{
    double *delta, live = 0, peak = 0;
    delta = ctx_alloc(c, ((size_t)n + 1) * sizeof *delta);
    for (int k = 0; k < s->nvalues; k++) {
        const Value *v = &s->values[k];
        if (v->view != VIEW_NONE)
            continue;
        delta[v->def] += (double)align_up(v->bytes);
        delta[v->last + 1] -= (double)align_up(v->bytes);
    }
    for (int i = 0; i < n; i++) {
        live += delta[i];
        if (live > peak)
            peak = live;
    }
    return (size_t)peak;
}

/* The values that own a buffer bucketed by last read: those of statement i
 * are by_last[at[i] .. at[i + 1]), in index order (a counting sort). */
static void bucket_by_last(Ctx *c, const Schedule *s, int n, int **at,
                           int **by_last)
{
    int *count = ctx_alloc(c, ((size_t)n + 2) * sizeof *count);
    int *list = ctx_alloc(c, ((size_t)s->nvalues + 1) * sizeof *list);
    for (int k = 0; k < s->nvalues; k++)
        if (s->values[k].view == VIEW_NONE)
            count[s->values[k].last + 2]++;
    for (int i = 2; i <= n + 1; i++)
        count[i] += count[i - 1];
    for (int k = 0; k < s->nvalues; k++)    /* count[i + 1]: bucket i's fill */
        if (s->values[k].view == VIEW_NONE)
            list[count[s->values[k].last + 1]++] = k;
    *at = count;
    *by_last = list;
}

/* First fit in order of definition (the file's comment) over n = span(s)
 * statements; offsets into off. Before value k is placed, every value
 * placed before it whose last read is before k's definition is released. */
static size_t first_fit(Ctx *c, Schedule *s, int n, size_t *off)
{
    int *at, *by_last, *late = ctx_alloc(c, ((size_t)s->nvalues + 1) * sizeof(int));
    Planner p = {ctx_alloc(c, ((size_t)s->nvalues + 2) * sizeof(Gap)), 0, 0};
    int nlate = 0, passed = 0;      /* buckets below `passed` are released */
    size_t arena = 0;
    bucket_by_last(c, s, n, &at, &by_last);
    for (int k = 0; k < s->nvalues; k++) {
        const Value *v = &s->values[k];
        if (v->view != VIEW_NONE)
            continue;
        for (; passed < v->def; passed++)
            for (int j = at[passed]; j < at[passed + 1] && by_last[j] < k; j++)
                release(&p, off[by_last[j]], align_up(s->values[by_last[j]].bytes));
        for (int i = 0; i < nlate;) {
            const int u = late[i];
            if (s->values[u].last < v->def) {
                release(&p, off[u], align_up(s->values[u].bytes));
                late[i] = late[--nlate];
            } else {
                i++;
            }
        }
        off[k] = take(&p, align_up(v->bytes));
        if (v->last < passed)   /* its bucket is behind: released later */
            late[nlate++] = k;
        if (p.top > arena)
            arena = p.top;
    }
    return arena;
}

/* Greedy placement costs values^2: past this many values first fit alone
 * plans, as it did before, unless the caller needs the plan to fit an
 * arena first fit misses (plan_arena's goal) and no less than the peak of
 * live bytes, below which no placement fits (a 32-step LSTM's refusal
 * under --max-arena placed hundreds of rebuilding schedules that could
 * not fit three ways each: 124 s, 11 s without them). The 100,000-node chain's
 * schedule (about 400,000 values) took 1.0 s with first fit, 23.7 s with
 * the greedy orders (bench/run.py's compiler table); `remat pareto` on a
 * 96-layer GPT (1,441 plans of about 6,600 values) 12.6 s with them, 1.8
 * s without, its arenas at most 0.7% larger (scripts/make_gpt.py --layers 96). Then
 * seeded shuffles of the greedy placement, as many as SHUFFLE_WORK pair
 * checks allow (at most MAX_SHUFFLES): small graphs that the three orders
 * miss reach the bound with them (cnn under sac-aggressive, 40 values,
 * needed about a thousand); 20M pair checks made `remat pareto` on a
 * 24-level U-Net take 1.0 s where 4M take 0.2. */
#define MAX_GREEDY_VALUES 2500
#define SHUFFLE_WORK 4000000.0
#define MAX_SHUFFLES 5000

/* The orders greedy placement tries, each a total order (ties: earlier
 * definition, then index). */
enum { BY_SIZE, BY_LIFETIME, BY_AREA, NORDERS };
static const Schedule *order_sched;
static int order_key;

static uint64_t order_seed;

static double order_weight(const Value *v)
{
    if (order_key >= NORDERS) {   /* a shuffle: a hash of the value's place */
        uint64_t h = (uint64_t)(v - order_sched->values) * 0x9e3779b97f4a7c15u ^
                     order_seed;
        h ^= h >> 31;
        h *= 0xbf58476d1ce4e5b9u;
        h ^= h >> 29;
        return (double)(h >> 11);
    }
    const double size = (double)align_up(v->bytes);
    const double life = (double)(v->last - v->def + 1);
    return order_key == BY_SIZE ? size : order_key == BY_LIFETIME ? life
                                                                  : size * life;
}

static int heavier_first(const void *a, const void *b)
{
    const Value *x = &order_sched->values[*(const int *)a];
    const Value *y = &order_sched->values[*(const int *)b];
    const double wx = order_weight(x), wy = order_weight(y);
    if (wx != wy)
        return wx > wy ? -1 : 1;
    if (x->def != y->def)
        return x->def < y->def ? -1 : 1;
    return *(const int *)a < *(const int *)b ? -1 : 1;
}

/* Greedy placement (as TFLite's arena planner does by size): values in
 * the order key gives, each into the smallest gap between the values
 * already placed that live at the same time as it, or above them all.
 * O(values^2): the placed values are kept by offset, their lifetimes and
 * extents in arrays of their own, so the scan reads those alone (1.4x
 * faster than reading the values on a 96-layer GPT's `remat pareto`). */
static size_t greedy(Ctx *c, Schedule *s, int key, size_t *off)
{
    const size_t cap = (size_t)s->nvalues + 1;
    int *order = ctx_alloc(c, cap * sizeof *order);
    int *def = ctx_alloc(c, cap * sizeof *def);
    int *last = ctx_alloc(c, cap * sizeof *last);
    size_t *at = ctx_alloc(c, cap * sizeof *at);
    size_t *end = ctx_alloc(c, cap * sizeof *end);
    int n = 0, np = 0;
    size_t arena = 0;
    for (int k = 0; k < s->nvalues; k++)
        if (s->values[k].view == VIEW_NONE)
            order[n++] = k;
    order_sched = s;
    order_key = key;
    qsort(order, (size_t)n, sizeof *order, heavier_first);
    for (int i = 0; i < n; i++) {
        const Value *v = &s->values[order[i]];
        const size_t size = align_up(v->bytes);
        size_t top = 0, best = (size_t)-1, best_gap = (size_t)-1;
        for (int j = 0; j < np; j++) {  /* top: the highest end so far */
            if (def[j] > v->last || v->def > last[j])
                continue;
            if (at[j] >= top && at[j] - top >= size && at[j] - top < best_gap) {
                best_gap = at[j] - top;
                best = top;
            }
            if (end[j] > top)
                top = end[j];
        }
        const size_t place = best != (size_t)-1 ? best : top;
        int slot = np;
        while (slot > 0 && at[slot - 1] > place)
            slot--;
        const size_t move = (size_t)(np - slot);
        memmove(def + slot + 1, def + slot, move * sizeof *def);
        memmove(last + slot + 1, last + slot, move * sizeof *last);
        memmove(at + slot + 1, at + slot, move * sizeof *at);
        memmove(end + slot + 1, end + slot, move * sizeof *end);
        def[slot] = v->def;
        last[slot] = v->last;
        at[slot] = place;
        end[slot] = place + size;
        np++;
        off[order[i]] = place;
        if (place + size > arena)
            arena = place + size;
    }
    return arena;
}

size_t schedule_peak(Ctx *c, const Schedule *s)
{
    return peak_live(c, s, span(s));
}

/* First fit and the greedy orders; the smallest arena wins (ties: the
 * first tried). */
int plan_arena(Ctx *c, Schedule *s, double goal)
{
    size_t *best = ctx_alloc(c, ((size_t)s->nvalues + 1) * sizeof *best);
    size_t *off = ctx_alloc(c, ((size_t)s->nvalues + 1) * sizeof *off);
    const int n = span(s);
    s->peak_live_bytes = peak_live(c, s, n);
    s->arena_bytes = first_fit(c, s, n, best);
    const double pairs = (double)s->nvalues * (double)s->nvalues + 1.0;
    const int shuffles = SHUFFLE_WORK / pairs > MAX_SHUFFLES
                             ? MAX_SHUFFLES : (int)(SHUFFLE_WORK / pairs);
    const int needed = goal > 0 && (double)s->arena_bytes > goal &&
                       (double)s->peak_live_bytes <= goal;
    const int tries = s->nvalues > MAX_GREEDY_VALUES && !needed
                          ? 0 : NORDERS + shuffles;
    for (int key = 0; key < tries && s->arena_bytes > s->peak_live_bytes;
         key++) {
        order_seed = (uint64_t)key * 0x2545f4914f6cdd1du;
        const size_t a = greedy(c, s, key, off);
        if (a < s->arena_bytes) {
            size_t *t = best;
            s->arena_bytes = a;
            best = off;
            off = t;
        }
    }
    for (int k = 0; k < s->nvalues; k++)
        if (s->values[k].view == VIEW_NONE)
            s->values[k].offset = best[k];
    for (int k = 0; k < s->nvalues; k++) {  /* views: their owners' place */
        Value *v = &s->values[k];
        if (v->view != VIEW_NONE)
            v->offset = v->view == VIEW_VALUE ? s->values[v->owner].offset : 0;
    }
    return 0;
}
