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
 * new one takes the lowest aligned gap among the live ones that fits. The
 * arena's size is the highest end ever placed. Deterministic: the order is
 * the schedule's, ties go to the lower offset.
 */
#include "remat.h"

#include <string.h>

static size_t align_up(size_t n)
{
    return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

/* The lowest offset where `bytes` fits between the live values, which are
 * kept sorted by offset in live[0..n). */
static size_t first_fit(const Schedule *s, const int *live, int n,
                        size_t bytes, int *at)
{
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const Value *v = &s->values[live[i]];
        if (v->offset >= off + bytes) {
            *at = i;
            return off;
        }
        size_t end = align_up(v->offset + v->bytes);
        if (end > off)
            off = end;
    }
    *at = n;
    return off;
}

int plan_arena(Ctx *c, Schedule *s)
{
    int *live = ctx_alloc(c, ((size_t)s->nvalues + 1) * sizeof(int));
    int nlive = 0;
    s->arena_bytes = 0;
    for (int k = 0; k < s->nvalues; k++) {
        Value *v = &s->values[k];
        int kept = 0;
        for (int i = 0; i < nlive; i++)
            if (s->values[live[i]].last >= v->def)
                live[kept++] = live[i];
        nlive = kept;
        int at;
        v->offset = first_fit(s, live, nlive, v->bytes, &at);
        memmove(&live[at + 1], &live[at], (size_t)(nlive - at) * sizeof(int));
        live[at] = k;
        nlive++;
        if (align_up(v->offset + v->bytes) > s->arena_bytes)
            s->arena_bytes = align_up(v->offset + v->bytes);
    }
    return 0;
}
