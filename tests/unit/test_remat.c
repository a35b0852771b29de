/* Policy decisions on small graphs, and where the schedule puts recomputes. */
#include "testutil.h"

/* Two blocks of x + fc2(gelu(fc1(x))), MSE outside any block: mlp12 small. */
static const char *two_blocks(Ctx *c, const char *act0_remat, const char *fc1_remat)
{
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "<input name='x' shape='2 4'/><input name='target' shape='2 4'/>");
    for (int i = 0; i < 2; i++)
        buf_printf(&b,
            "<initializer name='w%d' shape='4 4' init='uniform' low='-1' high='1'/>"
            "<initializer name='v%d' shape='4 4' init='uniform' low='-1' high='1'/>",
            i, i);
    for (int i = 0; i < 2; i++)
        buf_printf(&b,
            "<block name='b%d'>"
            "<node name='b%d.fc1' op='Gemm' in='%s w%d' out='b%d.h1' transB='1' %s/>"
            "<node name='b%d.act' op='Gelu' in='b%d.h1' out='b%d.g' %s/>"
            "<node name='b%d.fc2' op='Gemm' in='b%d.g v%d' out='b%d.y' transB='1'/>"
            "<node name='b%d.res' op='Add' in='%s b%d.y' out='b%d.out'/>"
            "</block>",
            i, i, i ? "b0.out" : "x", i, i, i == 0 ? fc1_remat : "", i, i, i,
            i == 0 ? act0_remat : "", i, i, i, i, i, i ? "b0.out" : "x", i, i);
    buf_printf(&b, "<node name='diff' op='Sub' in='b1.out target' out='d'/>"
                   "<node name='sq' op='Mul' in='d d' out='d2'/>"
                   "<node name='mse' op='ReduceMean' in='d2' out='loss' keepdims='0'/>"
                   "<output name='loss'/>");
    return b.data;
}

START_TEST(none_saves_everything_needed)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, two_blocks(&c, "", ""), "none");
    ck_assert_int_eq(keep_of(&m, "b0.h1"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&m, "b0.g"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&m, "b0.y"), KEEP_NONE);   /* Add reads nothing */
    ck_assert_int_eq(keep_of(&m, "b0.out"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&m, "b1.out"), KEEP_NONE); /* Sub reads nothing */
    ck_assert_int_eq(keep_of(&m, "d"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&m, "d2"), KEEP_NONE);
    ck_assert_int_eq(m.train->recompute_execs, 0);
    ctx_free(&c);
}
END_TEST

START_TEST(full_keeps_only_block_boundaries)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, two_blocks(&c, "", ""), "full");
    ck_assert_int_eq(keep_of(&m, "b0.h1"), KEEP_RECOMPUTE);
    ck_assert_int_eq(keep_of(&m, "b0.g"), KEEP_RECOMPUTE);
    ck_assert_int_eq(keep_of(&m, "b1.h1"), KEEP_RECOMPUTE);
    ck_assert_int_eq(keep_of(&m, "b0.out"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&m, "d"), KEEP_SAVE);       /* outside blocks */
    /* fc1 and Gelu rerun per block; fc2 is not needed by any backward */
    ck_assert_int_eq(m.train->recompute_execs, 4);
    ctx_free(&c);
}
END_TEST

START_TEST(sac_saves_matmuls_and_recomputes_pointwise)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, two_blocks(&c, "", ""), "sac");
    ck_assert_int_eq(keep_of(&m, "b0.h1"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&m, "b0.g"), KEEP_RECOMPUTE);
    ck_assert_int_eq(m.remat->decision[tensor_id(&m, "b0.h1")], MUST_SAVE);
    ck_assert_int_eq(m.remat->decision[tensor_id(&m, "b0.g")], PREFER_RECOMPUTE);
    ck_assert_int_eq(m.train->recompute_execs, 2);
    ctx_free(&c);
}
END_TEST

START_TEST(node_remat_wins_over_the_policy)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, two_blocks(&c, "remat='must_save'", ""), "full");
    ck_assert_int_eq(keep_of(&m, "b0.g"), KEEP_SAVE);
    /* Gelu's backward still reads h1, which full recomputes */
    ck_assert_int_eq(keep_of(&m, "b0.h1"), KEEP_RECOMPUTE);
    ctx_free(&c);
    ctx_init(&c);
    m = compile_body(&c, two_blocks(&c, "", "remat='must_recompute'"), "sac");
    ck_assert_int_eq(keep_of(&m, "b0.h1"), KEEP_RECOMPUTE);
    ck_assert_str_eq(m.remat->why[tensor_id(&m, "b0.h1")], "node remat=must_recompute");
    ck_assert_int_eq(keep_of(&m, "b1.h1"), KEEP_SAVE);
    ctx_free(&c);
}
END_TEST

/* No blocks: the graph is one block, so full recomputes everything from the
 * inputs and parameters, the loss's own tensors included. */
START_TEST(a_graph_without_blocks_is_one_block)
{
    Ctx c;
    ctx_init(&c);
    const char *body =
        "<input name='x' shape='3 4'/><initializer name='w' shape='4 4' init='ones'/>"
        "<node name='fc' op='MatMul' in='x w' out='h'/>"
        "<node name='t' op='Tanh' in='h' out='a'/>"
        "<node name='sq' op='Mul' in='a a' out='s'/>"
        "<node name='r' op='ReduceSum' in='s' out='l' keepdims='0'/><output name='l'/>";
    Compiled m = compile_body(&c, body, "full");
    ck_assert_int_eq(keep_of(&m, "a"), KEEP_RECOMPUTE);
    /* Tanh's backward reads its output a, rebuilt from h: h too */
    ck_assert_int_eq(keep_of(&m, "h"), KEEP_RECOMPUTE);
    ck_assert_int_eq(m.train->recompute_execs, 2);
    m = compile_body(&c, body, "sac");
    ck_assert_int_eq(keep_of(&m, "h"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&m, "a"), KEEP_RECOMPUTE);
    ctx_free(&c);
}
END_TEST

/* Under full, a is read by two backwards (Mul's and Tanh's): it is
 * recomputed once, just before the first of them, and lives until the last. */
START_TEST(recompute_runs_once_just_before_its_first_use)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='3 4'/><initializer name='w' shape='4 4' init='ones'/>"
        "<node name='fc' op='MatMul' in='x w' out='h'/>"
        "<node name='t' op='Tanh' in='h' out='a'/>"
        "<node name='sq' op='Mul' in='a a' out='s'/>"
        "<node name='r' op='ReduceSum' in='s' out='l' keepdims='0'/><output name='l'/>",
        "full");
    const Schedule *s = m.train;
    int a = tensor_id(&m, "a"), rec = -1, first = -1, last = -1;
    for (int i = 0; i < s->nstmts; i++) {
        const Stmt *st = &s->stmts[i];
        const Node *n = st->node >= 0 ? &m.g->nodes[st->node] : NULL;
        if (st->kind == S_FORWARD && st->recompute && strcmp(n->name, "t") == 0) {
            ck_assert_int_eq(rec, -1);          /* once */
            rec = i;
        }
        if (st->kind == S_BACKWARD && (strcmp(n->name, "sq") == 0 ||
                                       strcmp(n->name, "t") == 0)) {
            first = first < 0 ? i : first;
            last = i;
        }
    }
    ck_assert_int_ge(rec, 0);
    ck_assert_int_lt(rec, first);
    for (int i = rec + 1; i < first; i++)       /* nothing else in between */
        ck_assert_int_ne(s->stmts[i].kind, S_BACKWARD);
    int seed = -1;                              /* in the backward phase */
    for (int i = 0; i < s->nstmts; i++)
        seed = s->stmts[i].kind == S_SEED ? i : seed;
    ck_assert_int_lt(seed, rec);
    ck_assert_int_eq(s->values[s->rec[a]].def, rec);
    ck_assert_int_eq(s->values[s->rec[a]].last, last);
    /* the forward value of a recomputed tensor dies in the forward */
    ck_assert_int_lt(s->values[s->fwd[a]].last, rec);
    ctx_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remat");
    TCase *t = tcase_create("remat");
    tcase_add_test(t, none_saves_everything_needed);
    tcase_add_test(t, full_keeps_only_block_boundaries);
    tcase_add_test(t, sac_saves_matmuls_and_recomputes_pointwise);
    tcase_add_test(t, node_remat_wins_over_the_policy);
    tcase_add_test(t, a_graph_without_blocks_is_one_block);
    tcase_add_test(t, recompute_runs_once_just_before_its_first_use);
    suite_add_tcase(s, t);
    return run_suite(s);
}
