/* Parsing graph format v1: what the IR holds, and the errors bad input gets. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include <math.h>

#include <sys/stat.h>
#include <unistd.h>

static const char *mlp =
    "<input name='x' shape='4 3'/>\n"
    "<initializer name='w' shape='2 3' init='uniform' low='-1' high='2'/>\n"
    "<initializer name='b' shape='2' init='constant' value='0.5' trainable='false'/>\n"
    "<block name='blk'>\n"
    "  <node name='fc' op='Gemm' in='x w b' out='h' transB='1' remat='must_save'/>\n"
    "</block>\n"
    "<node name='act' op='Gelu' in='h' out='g' approximate='tanh'/>\n"
    "<node name='red' op='ReduceMean' in='g' out='loss' keepdims='0'/>\n"
    "<output name='loss' loss='true'/>";

START_TEST(parses_tensors_nodes_and_attributes)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, mlp, "none");
    const Graph *g = m.g;
    ck_assert_int_eq(g->nnodes, 3);
    ck_assert_int_eq(g->nblocks, 1);
    const Tensor *w = &g->tensors[tensor_id(&m, "w")];
    ck_assert_int_eq(w->kind, T_PARAM);
    ck_assert_int_eq(w->rank, 2);
    ck_assert_int_eq(w->dims[0], 2);
    ck_assert_int_eq(w->init, INIT_UNIFORM);
    ck_assert_float_eq(w->init_a, -1.0f);
    ck_assert_float_eq(w->init_b, 2.0f);
    ck_assert_int_eq(w->trainable, 1);
    const Tensor *b = &g->tensors[tensor_id(&m, "b")];
    ck_assert_int_eq(b->trainable, 0);
    ck_assert_float_eq(b->init_a, 0.5f);
    const Node *fc = &g->nodes[0];
    ck_assert_str_eq(fc->name, "fc");
    ck_assert_int_eq(fc->block, 0);
    ck_assert_int_eq(fc->remat, MUST_SAVE);
    ck_assert_int_eq(node_int(fc, "transB"), 1);
    ck_assert_int_eq(node_int(fc, "transA"), 0);        /* ONNX default */
    ck_assert_float_eq(node_float(fc, "alpha"), 1.0f);  /* ONNX default */
    ck_assert_int_eq(fc->nin, 3);
    ck_assert_int_eq(g->nodes[1].block, -1);
    ck_assert_str_eq(node_attr(&g->nodes[1], "approximate")->s, "tanh");
    ck_assert_int_eq(node_int(&g->nodes[2], "keepdims"), 0);
    ck_assert_int_eq(g->loss, tensor_id(&m, "loss"));
    ck_assert_int_eq(g->tensors[tensor_id(&m, "h")].line, 7); /* body starts on line 3 */
    ctx_free(&c);
}
END_TEST

START_TEST(optional_gemm_bias_may_be_left_out)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='4 3'/><initializer name='w' shape='3 2' init='zeros'/>"
        "<node name='fc' op='Gemm' in='x w' out='h'/>"
        "<node name='r' op='ReduceSum' in='h' out='l' keepdims='0'/><output name='l'/>",
        "none");
    ck_assert_int_eq(m.g->nodes[0].nin, 2);
    ctx_free(&c);
}
END_TEST

START_TEST(mangled_names_stay_distinct)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='a.b' shape='2'/><input name='a_b' shape='2'/>"
        "<input name='a:b' shape='2'/>"
        "<node name='n1' op='Add' in='a.b a_b' out='s'/>"
        "<node name='n2' op='Add' in='s a:b' out='s2'/>"
        "<node name='r' op='ReduceSum' in='s2' out='l' keepdims='0'/><output name='l'/>",
        "none");
    const char *x = m.g->tensors[tensor_id(&m, "a.b")].cname;
    const char *y = m.g->tensors[tensor_id(&m, "a_b")].cname;
    const char *z = m.g->tensors[tensor_id(&m, "a:b")].cname;
    ck_assert_str_ne(x, y);
    ck_assert_str_ne(y, z);
    ck_assert_str_ne(x, z);
    ctx_free(&c);
}
END_TEST

/* One bad graph per row, with the words its message must contain. */
static const struct {
    const char *body, *expect;
} bad[] = {
    {"<node name='n' op='Frob' in='x' out='y'/>", "t.xml:3: node 'n': unknown op 'Frob'"},
    {"<input name='x' shape='2 -3'/>", "shape \"2 -3\" has dimension -3"},
    {"<input name='x' shape='2 x'/>", "is not a list of at most 6 positive integers"},
    {"<input name='x' shape='2'/><input name='x' shape='3'/>", "tensor 'x' is already defined at line 3"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='q' out='y'/>", "input 'q' is not defined"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='x'/>", "writes 'x', which is a graph input"},
    {"<input name='x' shape='2'/><node name='n' op='Add' in='x' out='y'/>", "Add takes 2 inputs, got 1"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='y z'/>", "Relu takes 1 output, got 2"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='y' alpha='1'/>", "unknown attribute 'alpha'"},
    {"<input name='x' shape='2 2'/><node name='n' op='Gemm' in='x x' out='y' transB='2'/>", "transB=\"2\" must be 0 or 1"},
    {"<input name='x' shape='2 2'/><node name='n' op='Gemm' in='x x' out='y' alpha='fast'/>", "alpha=\"fast\" must be a finite number"},
    {"<input name='x' shape='2'/><node name='n' op='Gelu' in='x' out='y' approximate='erf'/>", "must be \"none\" or \"tanh\""},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='y' remat='always'/>", "remat=\"always\" must be"},
    {"<block name='b'><block name='c'/></block>", "blocks do not nest"},
    {"<frob/>", "unknown element <frob>"},
    {"<input name='9x' shape='2'/>", "name '9x' is not valid"},
    {"<initializer name='w' shape='2' init='gaussian'/>", "unknown init \"gaussian\""},
    {"<initializer name='w' shape='2' init='constant'/>", "missing attribute 'value'"},
    {"<initializer name='w' shape='2' init='zeros' low='1'/>", "unknown attribute 'low'"},
    {"<initializer name='w' shape='2' init='uniform' low='2' high='1'/>", "uniform needs low <= high"},
    {"<initializer name='w' shape='2' init='file' path='nope.npy'/>", "cannot use './nope.npy'"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='y'/><output name='y'/><output name='y'/>", "already listed at line 3; list each output once"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='y'/>", "has no <output>"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='y'/><output name='y' loss='true'/>", "the loss must be a scalar"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='y'/><node name='n' op='Relu' in='x' out='z'/>", "a node of that name is already defined"},
    {"<input name='x' shape='2'/><node name='n' op='Relu' in='x' out='y'/><node name='m' op='Relu' in='x' out='y'/>", "tensor 'y' is already defined"},
    {"<initializer name='w' shape='2 3' init='file' path='tests/unit/data/inf.npy'/>", "holds an infinity at element 5"},
    {"<initializer name='k' shape='2' dtype='int64' init='zeros' trainable='false'/>", "dtype=\"int64\" takes init=\"file\" (an int64 .npy), not init=\"zeros\""},
    {"<initializer name='k' shape='3' dtype='int64' init='file' path='tests/unit/data/int64.npy'/>", "is a constant: it needs trainable=\"false\" (integers get no gradient)"},
    {"<initializer name='k' shape='3' dtype='int8' init='file' path='tests/unit/data/int64.npy' trainable='false'/>", "dtype 'int8' is not supported"},
    {"<initializer name='k' shape='2 3' dtype='int64' init='file' path='tests/unit/data/inf.npy' trainable='false'/>", "initializer 'k': cannot use './tests/unit/data/inf.npy'"},
    {"<initializer name='k' shape='3' init='file' path='tests/unit/data/int64.npy'/>", "initializer 'k': cannot use './tests/unit/data/int64.npy'"},
    {"<input name='x' shape='2'/><node name='n' op='ReduceSum' in='x' out='y'/><node name='m' op='ReduceSum' in='x' out='z'/><output name='y'/><output name='z'/>", "more than one scalar output"},
};

START_TEST(bad_graphs_get_clear_errors)
{
    Ctx c;
    ctx_init(&c);
    const char *msg = error_of(&c, bad[_i].body);
    ck_assert_contains(msg, bad[_i].expect);
    ck_assert_msg(strncmp(msg, "t.xml:", 6) == 0, "no file:line in '%s'", msg);
    ctx_free(&c);
}
END_TEST

START_TEST(broken_xml_and_wrong_root)
{
    Ctx c;
    ctx_init(&c);
    Graph *g;
    const char *broken = "<model name='m' format='1'><graph>\n<input name='x'\n</model>";
    ck_assert_int_eq(parse_graph_memory(&c, "b.xml", broken, strlen(broken), &g), -1);
    ck_assert_contains(c.err, "b.xml:");
    ck_assert_contains(c.err, "XML error");
    const char *root = "<graph/>";
    ck_assert_int_eq(parse_graph_memory(&c, "r.xml", root, strlen(root), &g), -1);
    ck_assert_contains(c.err, "r.xml:1: root element is <graph>");
    const char *fmt = "<model name='m' format='2'><graph/></model>";
    ck_assert_int_eq(parse_graph_memory(&c, "f.xml", fmt, strlen(fmt), &g), -1);
    ck_assert_contains(c.err, "format=\"2\" is not supported");
    ck_assert_int_eq(load_graph(&c, "/nonexistent/g.xml", &g), -1);
    ck_assert_contains(c.err, "/nonexistent/g.xml: cannot open");
    ctx_free(&c);
}
END_TEST

/* A FIFO as init="file" blocked the compile in fopen until a writer came;
 * Check's timeout fails this test if it ever blocks again. */
START_TEST(init_file_must_be_a_regular_file)
{
    Ctx c;
    ctx_init(&c);
    const char *fifo = ctx_printf(&c, "build/test_fifo_%ld", (long)getpid());
    remove(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *body = ctx_printf(&c, "<initializer name='w' shape='2' "
                                  "init='file' path='%s/%s'/>", REMAT_SOURCE_DIR,
                                  fifo);
    const char *msg = error_of(&c, body);
    remove(fifo);
    ck_assert_contains(msg, "not a regular file");
    ctx_free(&c);
}
END_TEST

START_TEST(model_names_that_clash_with_the_runtime)
{
    Ctx c;
    ctx_init(&c);
    Graph *g;
    const char *xml = "<model name='rt_x' format='1'><graph/></model>";
    ck_assert_int_eq(parse_graph_memory(&c, "m.xml", xml, strlen(xml), &g), -1);
    ck_assert_contains(c.err, "would clash with the runtime's rt_ symbols");
    /* init_x_forward: the function, or the table of a parameter x_forward */
    xml = "<model name='init_x' format='1'><graph/></model>";
    ck_assert_int_eq(parse_graph_memory(&c, "m.xml", xml, strlen(xml), &g), -1);
    ck_assert_contains(c.err, "could clash with the generated init_ tables");
    xml = "<model name='mapping' format='1'><graph/></model>";
    ck_assert_int_eq(parse_graph_memory(&c, "m.xml", xml, strlen(xml), &g), -1);
    ck_assert_contains(c.err, "has no nodes");
    ctx_free(&c);
}
END_TEST

START_TEST(glob_patterns)
{
    ck_assert(glob_match("b1.*", "b1.fc1"));
    ck_assert(!glob_match("b1.*", "b10.fc1"));
    ck_assert(glob_match("b?.fc*", "b3.fc2"));
    ck_assert(glob_match("*", ""));
    ck_assert(glob_match("a*b*c", "axxbyyc"));
    ck_assert(!glob_match("a*b*c", "axxbyy"));
    ck_assert(glob_match("*.weight", "b0.fc1.weight"));
    /* exponential for a backtracking matcher; instant here (Check's
     * timeout would fail the test otherwise) */
    ck_assert(!glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*b",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}
END_TEST

START_TEST(policy_files)
{
    Ctx c;
    ctx_init(&c);
    Policy *p;
    ck_assert_int_eq(policy_load(&c, "tests/policies/keep_gelu.xml", &p), 0);
    ck_assert_str_eq(p->name, "keep-gelu");
    ck_assert_int_eq(p->nrules, 3);
    ck_assert_int_eq(p->rules[0].kind, RULE_OP);
    ck_assert_int_eq(p->rules[0].decision, MUST_SAVE);
    ck_assert_int_eq(p->rules[2].kind, RULE_DEFAULT);
    ck_assert_int_eq(policy_load(&c, "sac-lite", &p), -1);
    ck_assert_contains(c.err, "unknown policy");
    FILE *f = fopen("build/bad_policy.xml", "w");
    fputs("<policy name='my \"fast\" */ policy'><default decision='must_save'/></policy>", f);
    fclose(f);
    ck_assert_int_eq(policy_load(&c, "build/bad_policy.xml", &p), -1);
    ck_assert_contains(c.err, "build/bad_policy.xml:1: policy name 'my \"fast\" */ policy' is not valid");
    f = fopen("build/bad_policy.xml", "w");
    fputs("<policy name='p'><default op='Gemm' decision='must_save'/></policy>", f);
    fclose(f);
    ck_assert_int_eq(policy_load(&c, "build/bad_policy.xml", &p), -1);
    ck_assert_contains(c.err, "<default>: unknown attribute 'op'");
    ctx_free(&c);
}
END_TEST

/* A constant may be infinite (Where's -inf, an additive attention mask):
 * value="-inf" parses to -inf and is written as a C constant expression;
 * a trainable parameter may not be, nor may an overflow (1e39) or NaN. */
/* dtype="int64" (issue 25): a constant read from an int64 .npy, in no
 * buffer of the caller's but a static array of the C file */
START_TEST(int64_constants)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='3'/><input name='ids' shape='3' dtype='int64'/>"
        "<initializer name='k' shape='3' dtype='int64' init='file' "
        "path='tests/unit/data/int64.npy' trainable='false'/>"
        "<initializer name='w' shape='3' init='uniform'/>"
        "<node name='add' op='Add' in='ids k' out='s'/>"
        "<node name='eq' op='Equal' in='s k' out='b'/>"
        "<node name='f' op='Cast' in='b' out='bf' to='1'/>"
        "<node name='m' op='Mul' in='x w' out='xw'/>"
        "<node name='p' op='Mul' in='xw bf' out='y'/>"
        "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/>"
        "<output name='l'/>", "none");
    const Tensor *k = &m.g->tensors[tensor_id(&m, "k")];
    ck_assert(k->kind == T_PARAM && k->is_int && !k->trainable);
    ck_assert(k->idata[0] == 5 && k->idata[1] == -3 &&
              k->idata[2] == (int64_t)1 << 40);
    ck_assert(m.g->tensors[tensor_id(&m, "s")].is_int);
    ck_assert(!m.g->tensors[tensor_id(&m, "bf")].is_int);
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    ck_assert_int_eq(emit_c(&c, &m, "t.h", &cf, &hf, NULL), 0);
    ck_assert_contains(cf.data, "static const int64_t init_k[3] = {");
    ck_assert_contains(cf.data, "5,-3,INT64_C(1099511627776),");
    ck_assert_contains(cf.data, "const int64_t *v_k = init_k;");
    ck_assert_contains(cf.data, "rt_add_i64_forward(v_s, v_ids, v_k, ");
    ck_assert_contains(hf.data, "_PARAM_FLOATS 3\n");   /* w alone */
    ctx_free(&c);
}
END_TEST

START_TEST(constants_may_be_infinite)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='2 3'/><input name='mask' shape='2 3'/>"
        "<initializer name='ninf' shape='' init='constant' value='-inf' trainable='false'/>"
        "<initializer name='pinf' shape='' init='constant' value='inf' trainable='false'/>"
        "<initializer name='w' shape='3 3' init='uniform'/>"
        "<node name='mm' op='MatMul' in='x w' out='h'/>"
        "<node name='sel' op='Where' in='mask ninf h' out='s'/>"
        "<node name='sel2' op='Where' in='mask s pinf' out='s2'/>"
        "<node name='sm' op='Softmax' in='s2' out='p'/>"
        "<node name='r' op='ReduceSum' in='p' out='l' keepdims='0'/>"
        "<output name='l'/>", "none");
    const Tensor *t = &m.g->tensors[tensor_id(&m, "ninf")];
    ck_assert(isinf(t->init_a) && t->init_a < 0);
    ck_assert(isinf(m.g->tensors[tensor_id(&m, "pinf")].init_a));
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    ck_assert_int_eq(emit_c(&c, &m, "t.h", &cf, &hf, NULL), 0);
    /* both frozen constants, in file order, in the flash array (no init
     * call fills them) */
    ck_assert_contains(cf.data, "_frozen[2] = {\n    (-1.0f / 0.0f),(1.0f / 0.0f),\n};");
    ck_assert_str_eq(fmt_float(&c, -HUGE_VALF), "(-1.0f / 0.0f)");
    ck_assert_str_eq(fmt_float(&c, 0.5f), "0.5f");
    ctx_free(&c);
    static const struct {
        const char *body, *want;
    } bad_inf[] = {
        {"<initializer name='w' shape='' init='constant' value='-inf'/>",
         "value=\"-inf\" is not a finite number; only a constant "
         "(init=\"constant\" trainable=\"false\") may be infinite"},
        {"<initializer name='w' shape='' init='uniform' low='-inf' trainable='false'/>",
         "low=\"-inf\" is not a finite number; only a constant"},
        {"<initializer name='w' shape='' init='constant' value='1e39' trainable='false'/>",
         "value=\"1e39\" is not a finite number"},
        {"<initializer name='w' shape='' init='constant' value='nan' trainable='false'/>",
         "value=\"nan\" is not a finite number"},
    };
    for (size_t i = 0; i < sizeof bad_inf / sizeof bad_inf[0]; i++) {
        ctx_init(&c);
        const char *xml = model_xml(&c, bad_inf[i].body);
        Graph *g = NULL;
        ck_assert_int_eq(parse_graph_memory(&c, "t.xml", xml, strlen(xml), &g), -1);
        ck_assert_contains(c.err, bad_inf[i].want);
        ctx_free(&c);
    }
}
END_TEST

/* ---- eval-mode BatchNormalization folded into a frozen Gemm (fold.c) ---- */

/* x -> Gemm(w, c; transB, beta 0.5) -> BatchNormalization -> Tanh -> sum.
 * By hand: a = 3 / sqrt(3 + 1) = 1.5, so W' = 2 * 1.5 = 3 and b' = 0.5 * 1
 * * 1.5 + 0.25 - 1 * 1.5 = -0.5, beta then 1. `mode`, `wi` (w's init) and
 * `st` (scale's trainable) vary what stops the fold. */
static Graph *fold_graph(Ctx *c, const char *mode, const char *wi,
                         const char *st, const char *extra)
{
    const char *xml = model_xml(c, ctx_printf(c,
        "<input name='x' shape='4 3'/>"
        "<initializer name='w' shape='2 3' %s trainable='false'/>"
        "<initializer name='c' shape='2' init='ones' trainable='false'/>"
        "<initializer name='s' shape='2' init='constant' value='3' "
        "trainable='%s'/>"
        "<initializer name='b' shape='2' init='constant' value='0.25' "
        "trainable='false'/>"
        "<initializer name='m' shape='2' init='ones' trainable='false'/>"
        "<initializer name='v' shape='2' init='constant' value='3' "
        "trainable='false'/>"
        "<node name='fc' op='Gemm' in='x w c' out='h' transB='1' beta='0.5'/>"
        "<node name='bn' op='BatchNormalization' in='h s b m v' out='y' "
        "epsilon='1' training_mode='%s'/>"
        "<node name='t' op='Tanh' in='y' out='z'/>%s"
        "<node name='r' op='ReduceSum' in='z' out='l' keepdims='0'/>"
        "<output name='l'/>", wi, st, mode, extra));
    Graph *g = NULL;
    ck_assert_int_eq(parse_graph_memory(c, "t.xml", xml, strlen(xml), &g), 0);
    ck_assert_int_eq(fold_batch_norms(c, g), 0);
    return g;
}

static int has_op(const Graph *g, OpKind op)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == op)
            return 1;
    return 0;
}

START_TEST(eval_batchnorm_folds_into_frozen_gemm)
{
    Ctx c;
    ctx_init(&c);
    Graph *g = fold_graph(&c, "0", "init='constant' value='2'", "false", "");
    ck_assert(!has_op(g, OP_BATCH_NORM));
    ck_assert_int_eq(g->nnodes, 3);
    const Node *fc = &g->nodes[0];
    const Tensor *w = &g->tensors[fc->in[1]], *b = &g->tensors[fc->in[2]];
    ck_assert_str_eq(w->name, "w.folded");
    ck_assert_str_eq(b->name, "c.folded");
    ck_assert_str_eq(g->tensors[fc->out[0]].name, "y");
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq(w->data[i], 3.0f);
    ck_assert_float_eq(b->data[0], -0.5f);
    ck_assert_float_eq(b->data[1], -0.5f);
    ck_assert_float_eq(node_float(fc, "beta"), 1.0f);
    /* the input, the folded pair and the three nodes' outputs are left */
    ck_assert_int_eq(g->ntensors, 6);
    Policy *p;
    Compiled m;
    ck_assert_int_eq(policy_load(&c, "none", &p), 0);
    ck_assert_int_eq(compile_parsed(&c, g, p, NULL, &m), 0);
    ctx_free(&c);
}
END_TEST

/* Training mode, a weight drawn at run time, a trainable scale, or the
 * Gemm's output read by another node: nothing folds. */
START_TEST(batchnorm_folds_only_where_all_is_frozen_and_known)
{
    Ctx c;
    ctx_init(&c);
    const char *two = "init='constant' value='2'";
    ck_assert(has_op(fold_graph(&c, "1", two, "false", ""), OP_BATCH_NORM));
    ck_assert(has_op(fold_graph(&c, "0", "init='uniform' low='-1' high='1'",
                                "false", ""), OP_BATCH_NORM));
    ck_assert(has_op(fold_graph(&c, "0", two, "true", ""), OP_BATCH_NORM));
    ck_assert(has_op(fold_graph(&c, "0", two, "false",
                                "<output name='h'/>"), OP_BATCH_NORM));
    ctx_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("parse");
    TCase *t = tcase_create("parse");
    tcase_add_test(t, parses_tensors_nodes_and_attributes);
    tcase_add_test(t, optional_gemm_bias_may_be_left_out);
    tcase_add_test(t, mangled_names_stay_distinct);
    tcase_add_loop_test(t, bad_graphs_get_clear_errors, 0,
                        (int)(sizeof bad / sizeof *bad));
    tcase_add_test(t, broken_xml_and_wrong_root);
    tcase_add_test(t, init_file_must_be_a_regular_file);
    tcase_add_test(t, model_names_that_clash_with_the_runtime);
    tcase_add_test(t, glob_patterns);
    tcase_add_test(t, policy_files);
    tcase_add_test(t, int64_constants);
    tcase_add_test(t, constants_may_be_infinite);
    tcase_add_test(t, eval_batchnorm_folds_into_frozen_gemm);
    tcase_add_test(t, batchnorm_folds_only_where_all_is_frozen_and_known);
    suite_add_tcase(s, t);
    return run_suite(s);
}
