/* The arena plan never puts two live buffers in the same bytes. */
#include "testutil.h"

#include <glob.h>

/* Every pair of buffers whose [def, last] intervals meet must not overlap
 * in memory; every offset is aligned; the arena holds every value. A view
 * is no buffer of its own: it sits at its owner's offset, inside its
 * owner's lifetime, and its owner is no view. */
static void assert_plan_sound(const Schedule *s)
{
    for (int i = 0; i < s->nvalues; i++) {
        const Value *a = &s->values[i];
        if (a->view == VIEW_VALUE) {
            const Value *o = &s->values[a->owner];
            ck_assert_int_lt(a->owner, i);
            ck_assert_int_eq(o->view, VIEW_NONE);
            ck_assert_uint_eq(a->offset, o->offset);
            ck_assert_uint_eq(a->bytes, o->bytes);
            ck_assert_int_le(o->def, a->def);
            ck_assert_int_ge(o->last, a->last);
        }
        if (a->view != VIEW_NONE)
            continue;
        ck_assert_uint_eq(a->offset % ARENA_ALIGN, 0);
        ck_assert_uint_le(a->offset + a->bytes, s->arena_bytes);
        for (int j = i + 1; j < s->nvalues; j++) {
            const Value *b = &s->values[j];
            if (b->view != VIEW_NONE)
                continue;
            int live_together = a->def <= b->last && b->def <= a->last;
            int share = a->offset < b->offset + b->bytes &&
                        b->offset < a->offset + a->bytes;
            ck_assert_msg(!(live_together && share),
                          "values %d [%d,%d]@%zu+%zu and %d [%d,%d]@%zu+%zu "
                          "overlap", i, a->def, a->last, a->offset, a->bytes,
                          j, b->def, b->last, b->offset, b->bytes);
        }
    }
}

START_TEST(shipped_and_test_graphs_under_every_policy)
{
    glob_t gl;
    ck_assert_int_eq(glob("graphs/*.xml", 0, NULL, &gl), 0);
    ck_assert_int_eq(glob("tests/graphs/*.xml", GLOB_APPEND, NULL, &gl), 0);
    ck_assert_int_ge(gl.gl_pathc, 2);
    for (size_t k = 0; k < gl.gl_pathc; k++)
        for (int p = 0; builtin_policies[p]; p++) {
            Ctx c;
            ctx_init(&c);
            Compiled m;
            ck_assert_msg(compile_graph(&c, gl.gl_pathv[k], builtin_policies[p],
                                        &m) == 0, "%s", c.err);
            assert_plan_sound(m.fwd);
            assert_plan_sound(m.train);
            ctx_free(&c);
        }
    globfree(&gl);
}
END_TEST

/* Random intervals and sizes: the invariant, and reuse actually happening. */
START_TEST(random_intervals)
{
    Ctx c;
    ctx_init(&c);
    for (int round = 0; round < 50; round++) {
        Schedule s;
        memset(&s, 0, sizeof s);
        s.nvalues = 60;
        s.values = ctx_alloc(&c, (size_t)s.nvalues * sizeof(Value));
        uint64_t r = 88172645463325252ull + (uint64_t)round;
        size_t total = 0;
        for (int i = 0; i < s.nvalues; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            Value *v = &s.values[i];
            v->def = i;             /* defined in order, as the schedule does */
            v->last = i + (int)(r % 12);
            v->bytes = 4 * (1 + (size_t)(r >> 20) % 500);
            total += (v->bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        }
        ck_assert_int_eq(plan_arena(&c, &s), 0);
        assert_plan_sound(&s);
        ck_assert_uint_lt(s.arena_bytes, total);    /* something was reused */
    }
    ctx_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan");
    TCase *t = tcase_create("plan");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, shipped_and_test_graphs_under_every_policy);
    tcase_add_test(t, random_intervals);
    suite_add_tcase(s, t);
    return run_suite(s);
}
