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

/* BatchNormalization's backward reads by mode. The Gemm before it trains,
 * so dX is wanted. Training mode: dX and dscale read X (and scale for dX).
 * Eval mode (training_mode 0), statistics constant: dX = dY * scale /
 * sqrt(var + eps) reads scale and var, not X; a trainable scale adds X and
 * both statistics; a frozen scale and bias leave X unread. */
static const char *bn_graph(Ctx *c, const char *mode, const char *frozen)
{
    return ctx_printf(c,
        "<input name='x' shape='4 3'/>"
        "<initializer name='w' shape='3 3' init='ones'/>"
        "<initializer name='s' shape='3' init='ones' %s/>"
        "<initializer name='b' shape='3' init='zeros' %s/>"
        "<initializer name='m' shape='3' init='zeros' trainable='false'/>"
        "<initializer name='v' shape='3' init='ones' trainable='false'/>"
        "<node name='fc' op='MatMul' in='x w' out='h'/>"
        "<node name='bn' op='BatchNormalization' in='h s b m v' out='y' "
        "training_mode='%s'/>"
        "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/>"
        "<output name='l'/>", frozen, frozen, mode);
}

START_TEST(batchnorm_backward_reads_by_mode)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, bn_graph(&c, "1", ""), "none");
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "bn")),
                      NEED_IN(0) | NEED_IN(1));
    m = compile_body(&c, bn_graph(&c, "0", ""), "none");
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "bn")),
                      NEED_IN(0) | NEED_IN(1) | NEED_IN(3) | NEED_IN(4));
    m = compile_body(&c, bn_graph(&c, "0", "trainable='false'"), "none");
    ck_assert_uint_eq(node_backward_reads(m.g, N(&m, "bn")),
                      NEED_IN(1) | NEED_IN(4));
    ck_assert_int_eq(T(&m, "h")->has_grad, 1);
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

/* Two layers; `frozen` is spliced into w1's element (trainable='false'). */
static const char *two_layers =
    "<input name='x' shape='4 3'/>"
    "<initializer name='w1' shape='3 5' init='uniform' low='-1' high='1'%s/>"
    "<initializer name='w2' shape='5 2' init='uniform' low='-1' high='1'/>"
    "<initializer name='b2' shape='2' init='zeros'/>"
    "<node name='fc1' op='MatMul' in='x w1' out='h1'/>"
    "<node name='act1' op='Gelu' in='h1' out='g1'/>"
    "<node name='fc2' op='MatMul' in='g1 w2' out='h2'/>"
    "<node name='bias' op='Add' in='h2 b2' out='y'/>"
    "<node name='act2' op='Gelu' in='y' out='g2'/>"
    "<node name='r' op='ReduceSum' in='g2' out='l' keepdims='0'/>"
    "<output name='l'/>";

/* Compiles body with --freeze globs (NULL-terminated); -1 with c->err. */
static int compile_frozen(Ctx *c, const char *body, const char *const *globs,
                          Compiled *m)
{
    const char *xml = model_xml(c, body);
    Graph *g;
    Policy *p;
    return policy_load(c, "none", &p) ||
           parse_graph_memory(c, "t.xml", xml, strlen(xml), &g) ||
           freeze_params(c, g, globs) || compile_parsed(c, g, p, NULL, m);
}

static const char *c_file(Ctx *c, const Compiled *m)
{
    Buf cf, hf;
    buf_init(&cf, c);
    buf_init(&hf, c);
    ck_assert_int_eq(emit_c(c, m, "t.h", &cf, &hf, NULL), 0);
    return ctx_printf(c, "%s%s", cf.data, hf.data);
}

START_TEST(freeze_is_trainable_false)
{
    Ctx c;
    ctx_init(&c);
    const char *const globs[] = {"w?", "nothing*", NULL};
    Compiled f, x, full;
    /* a glob that matches nothing is an error even beside one that does */
    ck_assert_int_ne(compile_frozen(&c, ctx_printf(&c, two_layers, ""), globs,
                                    &f), 0);
    ck_assert_contains(c.err, "--freeze 'nothing*' matches no parameter of "
                       "model 't'");
    const char *const w1[] = {"w1", NULL};
    ck_assert_int_eq(compile_frozen(&c, ctx_printf(&c, two_layers, ""), w1,
                                    &f), 0);
    x = compile_body(&c, ctx_printf(&c, two_layers, " trainable='false'"),
                     "none");
    full = compile_body(&c, ctx_printf(&c, two_layers, ""), "none");
    ck_assert_int_eq(T(&f, "w1")->trainable, 0);
    ck_assert_int_eq(T(&f, "w2")->trainable, 1);
    /* the same code, byte for byte, as the file's own way */
    ck_assert_str_eq(c_file(&c, &f), c_file(&c, &x));
    ck_assert_str_ne(c_file(&c, &f), c_file(&c, &full));
    /* the backward stops at fc2: h1 fed only act1's backward, which fed
     * only w1's gradient, so it is neither saved nor recomputed */
    ck_assert_int_eq(keep_of(&full, "h1"), KEEP_SAVE);
    ck_assert_int_eq(keep_of(&f, "h1"), KEEP_NONE);
    ck_assert_int_eq(T(&f, "h1")->has_grad, 0);
    ck_assert_int_eq(T(&f, "g1")->has_grad, 0);
    ck_assert_int_eq(keep_of(&f, "g1"), KEEP_SAVE);    /* d(w2) reads it */
    ck_assert_int_eq(keep_of(&f, "y"), KEEP_SAVE);     /* act2's backward */
    ck_assert_int_lt(f.remat->saved_bytes, full.remat->saved_bytes);
    for (int i = 0; i < f.train->nstmts; i++) {
        const Stmt *st = &f.train->stmts[i];
        if (st->kind == S_BACKWARD) {
            const char *n = f.g->nodes[st->node].name;
            ck_assert_msg(strcmp(n, "fc1") && strcmp(n, "act1"),
                          "%s's backward runs", n);
        }
    }
    /* '?' and '*' over whole names; every matching parameter */
    const char *const all[] = {"?2", "w*", NULL};
    Compiled none;
    ck_assert_int_eq(compile_frozen(&c, ctx_printf(&c, two_layers, ""), all,
                                    &none), 0);
    ck_assert_int_eq(T(&none, "w1")->trainable + T(&none, "w2")->trainable +
                     T(&none, "b2")->trainable, 0);
    ck_assert_int_eq(none.remat->saved_bytes, 0);
    ctx_free(&c);
}
END_TEST

START_TEST(freeze_matching_nothing_names_the_nearest)
{
    Ctx c;
    ctx_init(&c);
    Compiled m;
    const char *const typo[] = {"fc1.*", NULL};
    ck_assert_int_ne(compile_frozen(&c, ctx_printf(&c, two_layers, ""), typo,
                                    &m), 0);
    ck_assert_str_eq(c.err, "t.xml: --freeze 'fc1.*' matches no parameter of "
                     "model 't'; nearest: 'w1', 'w2', 'b2'");
    const char *const bias[] = {"*.bais", NULL};
    ck_assert_int_ne(compile_frozen(&c, "<input name='x' shape='2'/>"
        "<initializer name='l0.weight' shape='2' init='zeros'/>"
        "<initializer name='l0.bias' shape='2' init='zeros'/>"
        "<initializer name='l1.weight' shape='2' init='zeros'/>"
        "<initializer name='l1.bias' shape='2' init='zeros'/>"
        "<initializer name='l1.scale' shape='2' init='zeros'/>"
        "<node name='a' op='Mul' in='x l0.weight' out='a0'/>"
        "<node name='b' op='Add' in='a0 l0.bias' out='a1'/>"
        "<node name='c' op='Mul' in='a1 l1.weight' out='a2'/>"
        "<node name='d' op='Add' in='a2 l1.bias' out='a3'/>"
        "<node name='e' op='Mul' in='a3 l1.scale' out='a4'/>"
        "<node name='r' op='ReduceSum' in='a4' out='l' keepdims='0'/>"
        "<output name='l'/>", bias, &m), 0);
    ck_assert_contains(c.err, "nearest: 'l0.bias', 'l1.bias', ");
    ctx_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("autodiff");
    TCase *t = tcase_create("autodiff");
    tcase_add_test(t, gradients_flow_where_the_loss_depends_on_parameters);
    tcase_add_test(t, backward_reads_only_what_the_wanted_gradients_need);
    tcase_add_test(t, batchnorm_backward_reads_by_mode);
    tcase_add_test(t, fan_out_sums_gradients);
    tcase_add_test(t, freeze_is_trainable_false);
    tcase_add_test(t, freeze_matching_nothing_names_the_nearest);
    suite_add_tcase(s, t);
    return run_suite(s);
}
