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
 * with their neighbours when a value is released; releases come from a heap
 * ordered by last use. A plan costs O(values x (log values + gaps)), so a
 * graph whose whole forward is live at once (a long chain under `full`)
 * plans as fast as any other.
 */
#include "remat.h"

#include <string.h>

static size_t align_up(size_t n)
{
    return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

typedef struct {
    size_t off, size;
} Gap;

typedef struct {
    Schedule *s;
    Heap live;              /* live values, the earliest last use on top */
    Gap *gaps;              /* free space below top, sorted by offset */
    int ngaps;
    size_t top;
} Planner;

static int dies_first(const void *ctx, int a, int b)
{
    const Value *x = &((const Schedule *)ctx)->values[a];
    const Value *y = &((const Schedule *)ctx)->values[b];
    return x->last < y->last || (x->last == y->last && a < b);
}

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

int plan_arena(Ctx *c, Schedule *s)
{
    Planner p = {s,
                 {ctx_alloc(c, ((size_t)s->nvalues + 1) * sizeof(int)), 0,
                  dies_first, s},
                 ctx_alloc(c, ((size_t)s->nvalues + 2) * sizeof(Gap)), 0, 0};
    s->arena_bytes = 0;
    for (int k = 0; k < s->nvalues; k++) {
        Value *v = &s->values[k];
        if (v->view != VIEW_NONE) {     /* its owner came first */
            v->offset = v->view == VIEW_VALUE ? s->values[v->owner].offset : 0;
            continue;
        }
        while (p.live.n > 0 && s->values[p.live.v[0]].last < v->def) {
            const Value *dead = &s->values[heap_pop(&p.live)];
            release(&p, dead->offset, align_up(dead->bytes));
        }
        v->offset = take(&p, align_up(v->bytes));
        heap_push(&p.live, k);
        if (p.top > s->arena_bytes)
            s->arena_bytes = p.top;
    }
    return 0;
}
