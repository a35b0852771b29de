/* Which tensors get gradients, and what each backward reads. */
#include "testutil.h"

static const Tensor *T(const Compiled *m, const char *name)
{
    return &m->g->tensors[tensor_id(m, name)];
}

static const Node *N(const Compiled *m, const char *name)
{
    for (int i = 0; i < m->g->nnodes; i++)
        if (strcmp(m->g->nodes[i].name, name) == 0)
            return &m->g->nodes[i];
    ck_abort_msg("no node %s", name);
    return NULL;
}

static const char *graph =
    "<input name='x' shape='4 3'/>"
    "<initializer name='w' shape='3 2' init='zeros'/>"
    "<initializer name='k' shape='2' init='ones' trainable='false'/>"
    "<initializer name='u' shape='3 2' init='zeros'/>"
    "<node name='fc' op='MatMul' in='x w' out='h'/>"     /* h requires grad */
    "<node name='xs' op='Tanh' in='x' out='xt'/>"        /* input only: none */
    "<node name='g' op='Gelu' in='h' out='hg'/>"
    "<node name='t' op='Tanh' in='hg' out='ht'/>"
    "<node name='m' op='Mul' in='ht k' out='hk'/>"       /* k frozen */
    "<node name='fan' op='Add' in='hk h' out='s'/>"      /* h fans out */
    "<node name='side' op='MatMul' in='x u' out='dead'/>" /* not in the loss */
    "<node name='r' op='ReduceSum' in='s' out='l' keepdims='0'/>"
    "<output name='l'/><output name='dead'/><output name='xt'/>";

START_TEST(gradients_flow_where_the_loss_depends_on_parameters)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, graph, "none");
    ck_assert_int_eq(T(&m, "w")->has_grad, 1);
    ck_assert_int_eq(T(&m, "h")->has_grad, 1);
    ck_assert_int_eq(T(&m, "l")->has_grad, 1);
    ck_assert_int_eq(T(&m, "x")->requires_grad, 0);     /* inputs never */
    ck_assert_int_eq(T(&m, "xt")->requires_grad, 0);
    ck_assert_int_eq(T(&m, "k")->requires_grad, 0);     /* not trainable */
    ck_assert_int_eq(T(&m, "u")->requires_grad, 1);
    ck_assert_int_eq(T(&m, "u")->has_grad, 0);          /* loss ignores it */
    ck_assert_int_eq(node_has_backward(m.g, N(&m, "side")), 0);
    ck_assert_int_eq(node_has_backward(m.g, N(&m, "xs")), 0);
    ck_assert_int_eq(node_has_backward(m.g, N(&m, "fan")), 1);
    ctx_free(&c);
}
END_TEST

START_TEST(backward_reads_only_what_the_wanted_gradients_need)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, graph, "none");
    /* MatMul(x, w): only dw is wanted, and dw = x^T dy reads x, not w */
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "fc")), NEED_IN(0));
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "g")), NEED_IN(0));
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "t")), NEED_OUT(0));
    /* Mul(ht, k): only d(ht) = dy * k, which reads k */
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "m")), NEED_IN(1));
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "fan")), 0);
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "r")), 0);
    int want[MAX_IO];
    node_grad_inputs(m.g, N(&m, "m"), want);
    ck_assert_int_eq(want[0], 1);
    ck_assert_int_eq(want[1], 0);
    ctx_free(&c);
}
END_TEST

/* h fans out to Gelu and Add: its gradient is zeroed once and both
 * backwards add into it, before fc's backward reads it. */
START_TEST(fan_out_sums_gradients)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, graph, "none");
    const Schedule *s = m.train;
    int h = tensor_id(&m, "h"), zero = -1, adds = 0, read = -1;
    for (int i = 0; i < s->nstmts; i++) {
        const Stmt *st = &s->stmts[i];
        if (st->kind == S_ZERO && st->tensor == h) {
            ck_assert_int_eq(zero, -1);
            zero = i;
        }
        if (st->kind != S_BACKWARD)
            continue;
        const Node *n = &m.g->nodes[st->node];
        if (strcmp(n->name, "fc") == 0)
            read = i;
        else if (strcmp(n->name, "g") == 0 || strcmp(n->name, "fan") == 0) {
            ck_assert_int_gt(i, zero);
            adds++;
        }
    }
    ck_assert_int_eq(adds, 2);
    ck_assert_int_gt(read, zero);
    ck_assert_int_ge(s->values[s->grad[h]].last, read);
    ctx_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("autodiff");
    TCase *t = tcase_create("autodiff");
    tcase_add_test(t, gradients_flow_where_the_loss_depends_on_parameters);
    tcase_add_test(t, backward_reads_only_what_the_wanted_gradients_need);
    tcase_add_test(t, fan_out_sums_gradients);
    suite_add_tcase(s, t);
    return run_suite(s);
}
