/* Topological order and shape inference. */
#include "testutil.h"

static const Tensor *T(const Compiled *m, const char *name)
{
    return &m->g->tensors[tensor_id(m, name)];
}

static void assert_shape(const Tensor *t, int rank, long d0, long d1, long d2)
{
    long want[3] = {d0, d1, d2};
    ck_assert_int_eq(t->rank, rank);
    for (int i = 0; i < rank; i++)
        ck_assert_int_eq(t->dims[i], want[i]);
}

START_TEST(order_is_topological_and_stable)
{
    Ctx c;
    ctx_init(&c);
    /* file order: c (reads b), a, b (reads a), d (reads x only) */
    Compiled m = compile_body(&c,
        "<input name='x' shape='3'/>"
        "<node name='c' op='Add' in='vb x' out='vc'/>"
        "<node name='a' op='Relu' in='x' out='va'/>"
        "<node name='b' op='Tanh' in='va' out='vb'/>"
        "<node name='d' op='Sigmoid' in='x' out='vd'/>"
        "<node name='e' op='Add' in='vc vd' out='ve'/>"
        "<node name='r' op='ReduceSum' in='ve' out='l' keepdims='0'/><output name='l'/>",
        "none");
    /* Kahn's with the earliest ready node first: a(1) b(2) c(0) d(3) e(4) r(5) */
    int want[] = {1, 2, 0, 3, 4, 5};
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(m.g->order[k], want[k]);
    ctx_free(&c);
}
END_TEST

START_TEST(cycles_are_named)
{
    Ctx c;
    ctx_init(&c);
    const char *msg = error_of(&c,
        "<input name='x' shape='3'/>"
        "<node name='p' op='Add' in='x r' out='vp'/>"
        "<node name='q' op='Relu' in='vp' out='vq'/>"
        "<node name='s' op='Tanh' in='vq' out='r'/>"
        "<node name='l' op='ReduceSum' in='vq' out='loss' keepdims='0'/><output name='loss'/>");
    ck_assert_contains(msg, "is on a cycle");
    ck_assert_contains(msg, "'p'");
    ck_assert_contains(msg, "'q'");
    ck_assert_contains(msg, "'s'");
    ctx_free(&c);
}
END_TEST

START_TEST(gemm_shapes_follow_trans_flags)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='a' shape='4 6'/><input name='at' shape='6 4'/>"
        "<initializer name='b' shape='6 5' init='zeros'/>"
        "<initializer name='bt' shape='5 6' init='zeros'/>"
        "<initializer name='col' shape='4 1' init='zeros'/>"
        "<node name='n0' op='Gemm' in='a b' out='y0'/>"
        "<node name='n1' op='Gemm' in='a bt col' out='y1' transB='1'/>"
        "<node name='n2' op='Gemm' in='at b' out='y2' transA='1'/>"
        "<node name='n3' op='Gemm' in='at bt' out='y3' transA='1' transB='1'/>"
        "<node name='n4' op='MatMul' in='a b' out='y4'/>"
        "<node name='s' op='Add' in='y0 y1' out='s1'/><node name='s2' op='Add' in='y2 y3' out='s3'/>"
        "<node name='s4' op='Add' in='s1 s3' out='s5'/><node name='s6' op='Add' in='s5 y4' out='s7'/>"
        "<node name='r' op='ReduceSum' in='s7' out='l' keepdims='0'/><output name='l'/>",
        "none");
    for (int i = 0; i < 5; i++) {
        char name[4];
        snprintf(name, sizeof name, "y%d", i);
        assert_shape(T(&m, name), 2, 4, 5, 0);
    }
    ctx_free(&c);
}
END_TEST

START_TEST(gemm_mismatch_says_what_would_fit)
{
    Ctx c;
    ctx_init(&c);
    const char *msg = error_of(&c,
        "<input name='x' shape='32 256'/><initializer name='w' shape='128 256' init='zeros'/>"
        "<node name='b0.fc1' op='Gemm' in='x w' out='y' transB='0'/>");
    ck_assert_contains(msg, "node 'b0.fc1': Gemm input 1 'w' has shape 128x256 but "
                            "transB=0 needs 256 rows to match input 0's 256");
    ctx_free(&c);
}
END_TEST

START_TEST(broadcasting_follows_numpy)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='4 5'/><input name='r' shape='5'/><input name='s' shape=''/>"
        "<input name='c' shape='4 1'/><input name='l' shape='1 5'/><input name='z' shape='2 4 5'/>"
        "<node name='n0' op='Add' in='x r' out='y0'/>"
        "<node name='n1' op='Mul' in='s x' out='y1'/>"
        "<node name='n2' op='Sub' in='c l' out='y2'/>"
        "<node name='n3' op='Div' in='z c' out='y3'/>"
        "<node name='n4' op='ReduceSum' in='y3' out='y4' axes='0 -1' keepdims='1'/>"
        "<node name='n5' op='ReduceMean' in='y3' out='y5' axes='1' keepdims='0'/>"
        "<node name='n6' op='Add' in='y0 y1' out='y6'/><node name='n7' op='Add' in='y6 y2' out='y7'/>"
        "<node name='n8' op='Add' in='y7 y4' out='y8'/>"
        "<node name='r' op='ReduceSum' in='y8' out='loss' keepdims='0'/><output name='loss'/>"
        "<output name='y5'/>",
        "none");
    assert_shape(T(&m, "y0"), 2, 4, 5, 0);
    assert_shape(T(&m, "y1"), 2, 4, 5, 0);
    assert_shape(T(&m, "y2"), 2, 4, 5, 0);
    assert_shape(T(&m, "y3"), 3, 2, 4, 5);
    assert_shape(T(&m, "y4"), 3, 1, 4, 1);
    assert_shape(T(&m, "y5"), 2, 2, 5, 0);
    assert_shape(T(&m, "loss"), 0, 0, 0, 0);
    ctx_free(&c);
}
END_TEST

START_TEST(broadcast_that_does_not_fit)
{
    Ctx c;
    ctx_init(&c);
    const char *msg = error_of(&c,
        "<input name='x' shape='4 5'/><input name='y' shape='4'/>"
        "<node name='n' op='Add' in='x y' out='z'/>");
    ck_assert_contains(msg, "Add inputs 'x' (4x5) and 'y' (4) do not broadcast");
    ctx_free(&c);
    ctx_init(&c);
    msg = error_of(&c, "<input name='x' shape='4 5'/>"
                       "<node name='n' op='ReduceSum' in='x' out='z' axes='2'/>");
    ck_assert_contains(msg, "axis 2 is out of range");
    ctx_free(&c);
}
END_TEST

START_TEST(loss_found_by_shape_when_unmarked)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='4 5'/>"
        "<node name='n' op='Relu' in='x' out='y'/>"
        "<node name='r' op='ReduceMean' in='y' out='l'/>"     /* keepdims=1: 1x1 */
        "<output name='y'/><output name='l'/>",
        "none");
    ck_assert_int_eq(m.g->loss, tensor_id(&m, "l"));
    assert_shape(T(&m, "l"), 2, 1, 1, 0);
    ctx_free(&c);
}
END_TEST

/* No output is the loss (none is a scalar; the one scalar is marked
 * loss="false"): the graph is forward only, with no gradient anywhere, one
 * schedule and nothing kept for a backward. */
START_TEST(no_loss_compiles_forward_only)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='4 5'/>"
        "<initializer name='w' shape='5 3' init='uniform'/>"
        "<node name='f' op='MatMul' in='x w' out='y'/>"
        "<node name='n' op='Tanh' in='y' out='z'/>"
        "<node name='r' op='ReduceSum' in='z' out='l' keepdims='0'/>"
        "<output name='z'/><output name='y'/><output name='l' loss='false'/>",
        "none");
    ck_assert_int_eq(m.g->loss, -1);
    ck_assert_int_eq(graph_trains(m.g), 0);
    ck_assert_ptr_eq(m.train, m.fwd);
    for (int t = 0; t < m.g->ntensors; t++) {
        ck_assert_int_eq(m.g->tensors[t].has_grad, 0);
        ck_assert_int_eq(m.remat->keep[t], KEEP_NONE);
    }
    ck_assert_uint_eq(m.remat->saved_bytes, 0);
    for (int i = 0; i < m.fwd->nstmts; i++)
        ck_assert(m.fwd->stmts[i].kind == S_FORWARD ||
                  m.fwd->stmts[i].kind == S_OUTPUT);
    ctx_free(&c);
}
END_TEST

/* ONNX ReduceSum/ReduceMean: axes="" is no axes, which reduces all, unless
 * noop_with_empty_axes=1 makes it the identity. */
START_TEST(empty_axes_follow_onnx)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='2 3'/>"
        "<node name='a' op='ReduceSum' in='x' out='ya' axes=''/>"
        "<node name='b' op='ReduceSum' in='x' out='yb' noop_with_empty_axes='1'/>"
        "<node name='c' op='ReduceMean' in='yb' out='l' keepdims='0'/>"
        "<output name='l' loss='true'/><output name='ya'/>",
        "none");
    assert_shape(T(&m, "ya"), 2, 1, 1, 0);
    assert_shape(T(&m, "yb"), 2, 2, 3, 0);
    ctx_free(&c);
}
END_TEST

START_TEST(op_table_is_complete)
{
    for (int i = 0; i < OP_COUNT; i++) {
        const OpInfo *op = &op_table[i];
        ck_assert_ptr_nonnull(op->name);
        ck_assert_ptr_nonnull(op->kernel);
        ck_assert(op->shape != NULL);
        ck_assert(op->flops != NULL);
        ck_assert(op->emit_forward != NULL || op->alias);   /* a view: none */
        /* no backward only where no input can take a gradient: each is
         * int64 or no_grad (Cast, the comparisons and logical ops) */
        ck_assert(op->emit_backward != NULL ||
                  ((op->int_inputs | op->no_grad) + 1) >> op->max_in == 1);
        ck_assert_int_eq(op_lookup(op->name), i);
        ck_assert_int_le(op->min_in, op->max_in);
        ck_assert_int_le(op->min_out, op->nout);      /* 0: exactly nout */
        ck_assert_int_le(op->nout, MAX_IO);
        /* an op that reads int64 inputs says what values they take, unless
         * it passes them on (Slice: its readers say); one that computes
         * int64 from them (Add) says so too; one that reads none, never */
        if (op->int_inputs || (op->int_ok && op->int_out != INT_OUT_PASS))
            ck_assert(op->int_range != NULL);
        if (!op->int_inputs && !op->int_ok)
            ck_assert(op->int_range == NULL);
    }
    ck_assert_int_eq(op_lookup("Convolution"), -1);
    ck_assert_int_eq(op_lookup("conv"), -1);     /* op names are case-sensitive */
}
END_TEST

/* ONNX: Gather's output is the indices' shape then the table's rows';
 * SoftmaxCrossEntropyLoss's labels are the scores without dimension 1. */
START_TEST(int64_inputs_shape_gather_and_loss)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='tok' shape='3 5' dtype='int64'/>"
        "<input name='lab' shape='3 4' dtype='int64'/>"
        "<initializer name='emb' shape='7 2 6' init='zeros'/>"
        "<node name='g' op='Gather' in='emb tok' out='y'/>"
        "<node name='r' op='Reshape' in='y' out='s' shape='3 5 3 4'/>"
        "<node name='sum' op='ReduceSum' in='s' out='s3' axes='1' keepdims='0'/>"
        "<node name='d' op='Dropout' in='s3' out='sd' ratio='0.2'/>"
        "<node name='ce' op='SoftmaxCrossEntropyLoss' in='sd lab' out='l'/>"
        "<output name='l'/>", "sac");
    const Tensor *y = &m.g->tensors[tensor_id(&m, "y")];
    ck_assert_int_eq(y->rank, 4);
    ck_assert_int_eq(y->dims[0], 3);
    ck_assert_int_eq(y->dims[1], 5);
    ck_assert_int_eq(y->dims[2], 2);
    ck_assert_int_eq(y->dims[3], 6);
    ck_assert(m.g->tensors[tensor_id(&m, "tok")].is_int);
    ck_assert(!m.g->tensors[tensor_id(&m, "s3")].is_int);
    ck_assert_int_eq(m.g->tensors[tensor_id(&m, "l")].rank, 0);
    /* the loss's backward reads the dropped scores: sac recomputes them */
    ck_assert_int_eq(keep_of(&m, "sd"), KEEP_RECOMPUTE);
    ctx_free(&c);
}
END_TEST

/* ---- structural ops ------------------------------------------------------ */

static void assert_dims(const Tensor *t, int rank, const long *want)
{
    ck_assert_int_eq(t->rank, rank);
    for (int i = 0; i < rank; i++)
        ck_assert_msg(t->dims[i] == want[i], "%s dim %d: %ld, want %ld",
                      t->name, i, t->dims[i], want[i]);
}

/* ONNX: Unsqueeze's axes index the output; Squeeze without axes drops every
 * 1; Concat adds up the axis; Split by sizes or in equal parts. */
START_TEST(structural_view_and_join_shapes)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='2 3'/><input name='o' shape='1 2 1 3'/>"
        "<input name='z' shape='2 5'/><input name='q' shape='4 6'/>"
        "<node name='u' op='Unsqueeze' in='x' out='xu' axes='0 -1'/>"
        "<node name='s' op='Squeeze' in='xu' out='xs' axes='-1'/>"
        "<node name='all' op='Squeeze' in='o' out='os'/>"
        "<node name='i' op='Identity' in='os' out='oi'/>"
        "<node name='cat' op='Concat' in='x z oi' out='c' axis='-1'/>"
        "<node name='sp' op='Split' in='c' out='c0 c1' axis='1' split='4 7'/>"
        "<node name='eq' op='Split' in='q' out='q0 q1 q2' axis='-1'/>"
        "<node name='r0' op='ReduceSum' in='c0' out='l0' keepdims='0'/>"
        "<node name='r1' op='ReduceSum' in='c1' out='l1' keepdims='0'/>"
        "<node name='r2' op='ReduceSum' in='q1' out='l2' keepdims='0'/>"
        "<node name='r3' op='ReduceSum' in='xs' out='l3' keepdims='0'/>"
        "<node name='a' op='Add' in='l0 l1' out='a1'/><node name='b' op='Add' in='l2 l3' out='a2'/>"
        "<node name='t' op='Add' in='a1 a2' out='l'/><output name='l'/>", "none");
    assert_dims(T(&m, "xu"), 4, (long[]){1, 2, 3, 1});
    assert_dims(T(&m, "xs"), 3, (long[]){1, 2, 3});
    assert_dims(T(&m, "os"), 2, (long[]){2, 3});
    assert_dims(T(&m, "oi"), 2, (long[]){2, 3});
    assert_dims(T(&m, "c"), 2, (long[]){2, 11});
    assert_dims(T(&m, "c0"), 2, (long[]){2, 4});
    assert_dims(T(&m, "c1"), 2, (long[]){2, 7});
    for (int i = 0; i < 3; i++)
        assert_dims(T(&m, (const char *[]){"q0", "q1", "q2"}[i]), 2,
                    (long[]){4, 2});
    /* views move nothing; Concat and Split are data movement: 0 FLOPs, and
     * no backward reads a value */
    for (int k = 0; k < m.g->nnodes; k++) {
        const Node *n = &m.g->nodes[k];
        if (op_table[n->op].cat == CAT_SHAPE) {
            ck_assert(op_table[n->op].flops(m.g, n) == 0);
            ck_assert_int_eq(node_backward_reads(m.g, n), 0);
        }
    }
    ctx_free(&c);
}
END_TEST

/* ONNX Slice: negative starts and ends count from the end, then clamp
 * ([0, n] for a positive step; [0, n-1] and [-1, n-1] for a negative one);
 * axes default to 0, 1, ...; the full range of int64 is accepted. */
START_TEST(slice_clamps_like_onnx)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='5 7'/>"
        "<node name='a' op='Slice' in='x' out='ya' starts='-2' ends='100' axes='0'/>"
        "<node name='b' op='Slice' in='x' out='yb' starts='-1 6' ends='-100 -1000' "
        "axes='0 -1' steps='-2 -3'/>"
        "<node name='c' op='Slice' in='x' out='yc' starts='1 2' ends='3 4'/>"
        "<node name='d' op='Slice' in='x' out='yd' starts='-9223372036854775808' "
        "ends='9223372036854775807' axes='1' steps='9223372036854775807'/>"
        "<node name='e' op='Slice' in='x' out='ye' starts='9223372036854775807' "
        "ends='-9223372036854775808' axes='1' steps='-9223372036854775808'/>"
        "<node name='f' op='Slice' in='x' out='yf' starts='100' ends='-100' axes='1' steps='-1'/>"
        "<node name='r0' op='ReduceSum' in='ya' out='l0' keepdims='0'/>"
        "<node name='r1' op='ReduceSum' in='yb' out='l1' keepdims='0'/>"
        "<node name='r2' op='ReduceSum' in='yc' out='l2' keepdims='0'/>"
        "<node name='r3' op='ReduceSum' in='yd' out='l3' keepdims='0'/>"
        "<node name='r4' op='ReduceSum' in='ye' out='l4' keepdims='0'/>"
        "<node name='r5' op='ReduceSum' in='yf' out='l5' keepdims='0'/>"
        "<node name='s0' op='Add' in='l0 l1' out='s1'/><node name='s2' op='Add' in='l2 l3' out='s3'/>"
        "<node name='s4' op='Add' in='l4 l5' out='s5'/><node name='s6' op='Add' in='s1 s3' out='s7'/>"
        "<node name='s8' op='Add' in='s7 s5' out='l'/><output name='l'/>", "none");
    assert_dims(T(&m, "ya"), 2, (long[]){2, 7});       /* rows 3, 4 */
    assert_dims(T(&m, "yb"), 2, (long[]){3, 3});       /* 4 2 0; 6 3 0 */
    assert_dims(T(&m, "yc"), 2, (long[]){2, 2});
    assert_dims(T(&m, "yd"), 2, (long[]){5, 1});       /* column 0 */
    assert_dims(T(&m, "ye"), 2, (long[]){5, 1});       /* column 6 */
    assert_dims(T(&m, "yf"), 2, (long[]){5, 7});       /* reversed */
    ctx_free(&c);
}
END_TEST

/* torch's cross_entropy(logits.view(-1, V), targets.view(-1)): an int64
 * input through views is int64, and the trainer's range for the input is
 * its reader's, found through the views. */
START_TEST(int64_labels_through_views)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='4 64 7'/><input name='lab' shape='4 64' dtype='int64'/>"
        "<node name='v' op='Reshape' in='x' out='logits' shape='-1 7'/>"
        "<node name='f' op='Reshape' in='lab' out='t' shape='-1'/>"
        "<node name='u' op='Unsqueeze' in='t' out='tu' axes='1'/>"
        "<node name='fl' op='Flatten' in='tu' out='tf' axis='0'/>"
        "<node name='sq' op='Squeeze' in='tf' out='ts'/>"
        "<node name='i' op='Identity' in='ts' out='ti'/>"
        "<node name='ce' op='SoftmaxCrossEntropyLoss' in='logits ti' out='l'/>"
        "<output name='l'/>", "full");
    const char *views[] = {"t", "tu", "tf", "ts", "ti"};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(T(&m, views[i])->is_int, "%s is not int64", views[i]);
    assert_dims(T(&m, "ti"), 1, (long[]){256});
    ck_assert(!T(&m, "logits")->is_int);
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    ck_assert_int_eq(emit_c(&c, &m, "t.h", &cf, &hf, NULL), 0);
    ck_assert_contains(cf.data, "{\"lab\", 0, 256, 2, {4, 64}, 0, 0, 7, 0, 0, 0, 1},");
    ck_assert_contains(cf.data, "const int64_t *v_ti = v_ts;");
    ctx_free(&c);
}
END_TEST

/* Issue 25: Slice, Concat, Transpose and Expand pass int64 on (8 bytes an
 * element in the arena), the comparisons and logical ops make bools
 * (int64), Cast makes float32, Where reads an int64 condition; the labels'
 * range is found through the Slice, and a mask read by Cast alone takes
 * any value. */
START_TEST(int64_through_shape_ops_and_masks)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='2 5 7'/><input name='lab' shape='2 5' dtype='int64'/>"
        "<input name='mask' shape='2 5' dtype='int64'/>"
        "<node name='s' op='Slice' in='lab' out='ls' starts='1' ends='5' axes='1'/>"
        "<node name='j' op='Concat' in='ls ls' out='lc' axis='1'/>"
        "<node name='tr' op='Transpose' in='lc' out='lt' perm='1 0'/>"
        "<node name='e' op='Expand' in='ls' out='le' shape='3 2 4'/>"
        "<node name='eq' op='Equal' in='lab mask' out='b'/>"
        "<node name='gt' op='Greater' in='x x' out='fb'/>"
        "<node name='no' op='Not' in='b' out='nb'/>"
        "<node name='cm' op='Cast' in='mask' out='mf'/>"
        "<node name='u' op='Unsqueeze' in='nb' out='nbu' axes='2'/>"
        "<node name='w' op='Where' in='nbu x x' out='xw'/>"
        "<node name='xs' op='Slice' in='xw' out='xs2' starts='0' ends='4' axes='1'/>"
        "<node name='r' op='Reshape' in='xs2' out='logits' shape='-1 7'/>"
        "<node name='f' op='Reshape' in='ls' out='t' shape='-1'/>"
        "<node name='ce' op='SoftmaxCrossEntropyLoss' in='logits t' out='l'/>"
        "<output name='l'/>", "none");
    const char *ints[] = {"ls", "lc", "lt", "le", "b", "fb", "nb", "t"};
    for (int i = 0; i < 8; i++)
        ck_assert_msg(T(&m, ints[i])->is_int, "%s is not int64", ints[i]);
    ck_assert(!T(&m, "mf")->is_int && !T(&m, "xw")->is_int);
    assert_dims(T(&m, "le"), 3, (long[]){3, 2, 4});
    ck_assert(!T(&m, "x")->has_grad && !T(&m, "b")->requires_grad);
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    ck_assert_int_eq(emit_c(&c, &m, "t.h", &cf, &hf, NULL), 0);
    /* lab: [0, 7) through the Slice and the Reshape, narrowed from the
     * comparison's any; mask: any */
    ck_assert_contains(cf.data, "{\"lab\", 0, 10, 2, {2, 5}, 0, 0, 7, 0, 0, 0, 1},");
    ck_assert_contains(cf.data, "{\"mask\", 10, 10, 2, {2, 5}, 0, "
                                "-4611686018427387904, 4611686018427387904, 0, 0, "
                                "0, 1},");
    ck_assert_contains(cf.data, "rt_slice_i64_forward(v_ls, v_lab,");
    ck_assert_contains(cf.data, "rt_compare_f32_forward(v_fb, v_x, v_x, "
                                "RT_CMP_GREATER,");
    ck_assert_contains(cf.data, "rt_where_i64_forward(v_xw, v_nbu,");
    ck_assert_contains(cf.data, "rt_cast_i64_forward(v_mf, v_mask, 10);");
    ctx_free(&c);
}
END_TEST

/* Misuse of an int64 view keeps the messages of int64 inputs. */
START_TEST(int64_views_refused_elsewhere)
{
    Ctx c;
    ctx_init(&c);
    const char *msg = error_of(&c,
        "<input name='lab' shape='4 3' dtype='int64'/>"
        "<initializer name='w' shape='3 2' init='zeros'/>"
        "<node name='v' op='Identity' in='lab' out='t'/>"
        "<node name='fc' op='MatMul' in='t w' out='y'/>"
        "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/><output name='l'/>");
    ck_assert_contains(msg, "node 'fc': MatMul input 0 't' is int64 but must be "
                            "float32 (Cast it: to=\"1\")");
    ctx_free(&c);
    ctx_init(&c);
    msg = error_of(&c,
        "<input name='lab' shape='4 3' dtype='int64'/><input name='x' shape='4 3'/>"
        "<node name='v' op='Concat' in='lab x' out='t' axis='0'/>"
        "<node name='r' op='ReduceSum' in='x' out='l' keepdims='0'/><output name='l'/>");
    ck_assert_contains(msg, "Concat input 1 'x' is float32 but input 0 'lab' "
                            "is int64; the inputs must have one dtype");
    ctx_free(&c);
    /* an int64 output (issue 25): its int64s' bytes in the outputs
     * buffer, two floats each from an even offset, is_int 1 in its row */
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='lab' shape='4 3' dtype='int64'/><input name='x' shape='2'/>"
        "<node name='v' op='Reshape' in='lab' out='t' shape='12'/>"
        "<node name='r' op='ReduceSum' in='x' out='l' keepdims='0'/>"
        "<output name='l' loss='true'/><output name='t'/>", "none");
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    ck_assert_int_eq(emit_c(&c, &m, "t.h", &cf, &hf, NULL), 0);
    ck_assert_contains(cf.data, "{\"t\", 2, 12, 1, {12}, 0, 0, 0, 0, 0, 0, 1},");
    ck_assert_contains(cf.data, "rt_store_i64(outputs + 2, v_t, 12);");
    ck_assert_contains(hf.data, "_OUTPUT_FLOATS 26\n");
    ctx_free(&c);
    /* an int64 scalar is never the loss */
    ctx_init(&c);
    msg = error_of(&c,
        "<input name='lab' shape='1' dtype='int64'/>"
        "<node name='v' op='Identity' in='lab' out='t'/>"
        "<output name='t' loss='true'/>");
    ck_assert_contains(msg, "output 't': the loss is int64 (made from int64 "
                            "tensors); the loss is a float32 scalar");
    ctx_free(&c);
}
END_TEST

/* int64 arithmetic (issue 25): Add, Sub and Mul of two int64 tensors are
 * int64, Where of int64 X and Y too; the int64 input read only through
 * them takes any value (their own range), not the Gather's it feeds. */
START_TEST(int64_arithmetic_dtypes)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='y' shape='4' dtype='int64'/><input name='x' shape='8 2'/>"
        "<input name='off' shape='4' dtype='int64'/>"
        "<node name='a' op='Add' in='y off' out='s'/>"
        "<node name='m' op='Mul' in='s s' out='p'/>"
        "<node name='d' op='Sub' in='p y' out='q'/>"
        "<node name='e' op='Equal' in='q y' out='b'/>"
        "<node name='w' op='Where' in='b q y' out='z'/>"
        "<node name='g' op='Gather' in='x z' out='h'/>"
        "<node name='r' op='ReduceSum' in='h' out='l' keepdims='0'/>"
        "<output name='l'/>", "none");
    const char *ints[] = {"s", "p", "q", "b", "z"};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(T(&m, ints[i])->is_int, "%s is not int64", ints[i]);
    ck_assert(!T(&m, "h")->is_int);
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    ck_assert_int_eq(emit_c(&c, &m, "t.h", &cf, &hf, NULL), 0);
    ck_assert_contains(cf.data, "rt_add_i64_forward(v_s, v_y, v_off, ");
    ck_assert_contains(cf.data, "rt_mul_i64_forward(v_p, v_s, v_s, ");
    ck_assert_contains(cf.data, "rt_sub_i64_forward(v_q, v_p, v_y, ");
    ck_assert_contains(cf.data, "rt_where_i64_i64_forward(v_z, v_b, v_q, v_y, ");
    /* y: any value (through Add, Sub, Where), not Gather's [-8, 8) */
    ck_assert_contains(cf.data, "{\"y\", 0, 4, 1, {4}, 0, "
                                "-4611686018427387904, 4611686018427387904, 0, 0, "
                                "0, 1},");
    ctx_free(&c);
    ctx_init(&c);
    const char *msg = error_of(&c,
        "<input name='y' shape='4' dtype='int64'/><input name='x' shape='4'/>"
        "<node name='w' op='Where' in='y x y' out='z'/>"
        "<node name='r' op='ReduceSum' in='x' out='l' keepdims='0'/><output name='l'/>");
    ck_assert_contains(msg, "Where input 2 'y' is int64 but input 1 'x' is "
                            "float32; the inputs must have one dtype");
    ctx_free(&c);
    ctx_init(&c);
    msg = error_of(&c,
        "<input name='y' shape='4' dtype='int64'/><input name='x' shape='4'/>"
        "<node name='w' op='Sub' in='x y' out='z'/>"
        "<node name='r' op='ReduceSum' in='z' out='l' keepdims='0'/><output name='l'/>");
    ck_assert_contains(msg, "Sub input 1 'y' is int64 but input 0 'x' is "
                            "float32; the inputs must have one dtype");
    ctx_free(&c);
}
END_TEST

/* int64 ReduceSum, Div and Mod (issue 25): a mask's lengths are int64,
 * summed, divided and taken modulo by the int64 kernels; the mask read only through them takes
 * any value; ReduceMean of int64 and Div of int64 by float32 are refused. */
START_TEST(int64_reduce_sum_and_div_dtypes)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='mask' shape='2 4' dtype='int64'/><input name='x' shape='8 2'/>"
        "<node name='n' op='ReduceSum' in='mask' out='len' axes='1' keepdims='0'/>"
        "<node name='d' op='Div' in='len len' out='q0'/>"
        "<node name='o' op='Mod' in='q0 len' out='q1' fmod='1'/>"
        "<node name='p' op='Mod' in='q1 len' out='q'/>"
        "<node name='g' op='Gather' in='x q' out='h'/>"
        "<node name='r' op='ReduceSum' in='h' out='l' keepdims='0'/>"
        "<output name='l'/>", "none");
    ck_assert(T(&m, "len")->is_int && T(&m, "q")->is_int && T(&m, "q1")->is_int);
    assert_dims(T(&m, "len"), 1, (long[]){2});
    ck_assert(!T(&m, "h")->is_int && !T(&m, "l")->is_int);
    Buf cf, hf;
    buf_init(&cf, &c);
    buf_init(&hf, &c);
    ck_assert_int_eq(emit_c(&c, &m, "t.h", &cf, &hf, NULL), 0);
    ck_assert_contains(cf.data, "rt_reduce_sum_i64_forward(v_len, v_mask, &map_n, 2);");
    ck_assert_contains(cf.data, "rt_div_i64_forward(v_q0, v_len, v_len, ");
    ck_assert_contains(cf.data, "rt_mod_i64_forward(v_q1, v_q0, v_len, 1, ");
    ck_assert_contains(cf.data, "rt_mod_i64_forward(v_q, v_q1, v_len, 0, ");
    ck_assert_contains(cf.data, "rt_reduce_forward(v_l, v_h, &map_r, 1, ");
    /* mask: any value (through ReduceSum), not Gather's [-8, 8) */
    ck_assert_contains(cf.data, "{\"mask\", 0, 8, 2, {2, 4}, 0, "
                                "-4611686018427387904, 4611686018427387904, 0, 0, "
                                "0, 1},");
    ctx_free(&c);
    ctx_init(&c);
    const char *msg = error_of(&c,
        "<input name='mask' shape='2 4' dtype='int64'/>"
        "<node name='n' op='ReduceMean' in='mask' out='l' keepdims='0'/>"
        "<output name='l'/>");
    ck_assert_contains(msg, "ReduceMean input 0 'mask' is int64 but must be "
                            "float32 (Cast it: to=\"1\")");
    ctx_free(&c);
    ctx_init(&c);
    msg = error_of(&c,
        "<input name='y' shape='4' dtype='int64'/><input name='x' shape='4'/>"
        "<node name='w' op='Div' in='y x' out='z'/>"
        "<node name='r' op='ReduceSum' in='x' out='l' keepdims='0'/><output name='l'/>");
    ck_assert_contains(msg, "Div input 1 'x' is float32 but input 0 'y' is "
                            "int64; the inputs must have one dtype");
    ctx_free(&c);
}
END_TEST

/* ArgMax and ArgMin (issue 25): int64 indices along one axis, kept as 1 or
 * dropped, negative axes from the end; no gradient; the axis out of range
 * refused, and a float32 input required. */
START_TEST(argmax_shapes_and_errors)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='2 5 7'/><input name='lab' shape='2 7' dtype='int64'/>"
        "<initializer name='w' shape='7' init='uniform' low='-1' high='1'/>"
        "<node name='m' op='Mul' in='x w' out='h'/>"
        "<node name='a' op='ArgMax' in='h' out='i1' axis='1' keepdims='0'/>"
        "<node name='b' op='ArgMin' in='h' out='i2' axis='-1' select_last_index='1'/>"
        "<node name='c' op='ArgMax' in='h' out='i3'/>"
        "<node name='eq' op='Equal' in='i1 lab' out='hit'/>"
        "<node name='f' op='Cast' in='hit' out='hf'/>"
        "<node name='g' op='Cast' in='i2' out='i2f'/>"
        "<node name='k' op='Cast' in='i3' out='i3f'/>"
        "<node name='r' op='ReduceSum' in='h' out='l' keepdims='0'/>"
        "<output name='l' loss='true'/><output name='hf'/><output name='i2f'/>"
        "<output name='i3f'/>", "none");
    assert_dims(T(&m, "i1"), 2, (long[]){2, 7});
    assert_dims(T(&m, "i2"), 3, (long[]){2, 5, 1});
    assert_dims(T(&m, "i3"), 3, (long[]){1, 5, 7});
    ck_assert(T(&m, "i1")->is_int && T(&m, "i2")->is_int && T(&m, "i3")->is_int);
    ck_assert(!T(&m, "i1")->requires_grad && !T(&m, "hf")->requires_grad);
    ctx_free(&c);
    ctx_init(&c);
    const char *msg = error_of(&c,
        "<input name='x' shape='2 3'/>"
        "<node name='a' op='ArgMin' in='x' out='i' axis='-3'/>"
        "<node name='f' op='Cast' in='i' out='y'/><output name='y'/>");
    ck_assert_contains(msg, "node 'a': ArgMin axis -3 is out of range for input "
                            "'x' of rank 2; it must be in [-2, 1]");
    ctx_free(&c);
    ctx_init(&c);
    msg = error_of(&c,
        "<input name='lab' shape='2 3' dtype='int64'/>"
        "<node name='a' op='ArgMax' in='lab' out='i'/>"
        "<node name='f' op='Cast' in='i' out='y'/><output name='y'/>");
    ck_assert_contains(msg, "ArgMax input 0 'lab' is int64 but must be float32");
    ctx_free(&c);
}
END_TEST

/* Every error the structural shape rules give, by a piece of its text. */
START_TEST(structural_shape_errors)
{
    static const char *const cases[][2] = {
        {"<node name='n' op='Unsqueeze' in='x' out='y'/>",
         "Unsqueeze needs axes="},
        {"<node name='n' op='Unsqueeze' in='x' out='y' axes='0 1 2 3 4'/>",
         "Unsqueeze of input 'x' (rank 2) at 5 axes would make rank 7"},
        {"<node name='n' op='Unsqueeze' in='x' out='y' axes='3'/>",
         "Unsqueeze axis 3 is out of range for the output's rank 3"},
        {"<node name='n' op='Unsqueeze' in='x' out='y' axes='1 -3'/>",
         "Unsqueeze axis -3 is listed twice (axis 1"},
        {"<node name='n' op='Squeeze' in='x' out='y' axes='2'/>",
         "Squeeze axis 2 is out of range for input 'x' of rank 2; axes must be in [-2, 1]"},
        {"<node name='n' op='Squeeze' in='o' out='y' axes='0 -2'/>",
         "Squeeze axis -2 is listed twice"},
        {"<node name='n' op='Squeeze' in='x' out='y' axes='1'/>",
         "dimension 1 of input 'x' (4x6), which is 6, not 1"},
        {"<node name='n' op='Concat' in='x x' out='y'/>",
         "Concat needs axis="},
        {"<node name='n' op='Concat' in='s x' out='y' axis='0'/>",
         "Concat input 0 's' is a scalar"},
        {"<node name='n' op='Concat' in='x x' out='y' axis='-3'/>",
         "Concat axis -3 is out of range"},
        {"<node name='n' op='Concat' in='x o' out='y' axis='1'/>",
         "Concat input 1 'o' has shape 1x4 but input 0 'x' has 4x6"},
        {"<node name='n' op='Split' in='s' out='y z'/>",
         "Split input 's' is a scalar"},
        {"<node name='n' op='Split' in='x' out='y z' axis='2'/>",
         "Split axis 2 is out of range"},
        {"<node name='n' op='Split' in='x' out='y z' axis='1' split='6'/>",
         "Split has 2 outputs but split lists 1 size; it gives one size per output"},
        {"<node name='n' op='Split' in='x' out='y z' axis='1' split='7 -1'/>",
         "Split size 1 is -1; sizes are positive"},
        {"<node name='n' op='Split' in='x' out='y z' axis='1' split='2 3'/>",
         "Split sizes add up to 5 but input 'x' (4x6) is 6 long along axis 1"},
        {"<node name='n' op='Split' in='x' out='y z w v' axis='1'/>",
         "Split cannot cut axis 1 of input 'x' (4x6, 6 long) into 4 equal parts"},
        {"<node name='n' op='Slice' in='x' out='y' starts='0'/>",
         "Slice needs starts="},
        {"<node name='n' op='Slice' in='x' out='y' starts='0 0' ends='1' axes='0 1'/>",
         "Slice starts has 2 entries, ends 1, axes 2 and steps 2"},
        {"<node name='n' op='Slice' in='x' out='y' starts='0' ends='1' axes='2'/>",
         "Slice axis 2 is out of range for input 'x' of rank 2"},
        {"<node name='n' op='Slice' in='x' out='y' starts='0 0' ends='1 1' axes='1 -1'/>",
         "Slice axis -1 is listed twice"},
        {"<node name='n' op='Slice' in='x' out='y' starts='0' ends='1' steps='0'/>",
         "Slice steps entry 0 is 0"},
        {"<node name='n' op='Slice' in='x' out='y' starts='3' ends='1' axes='1'/>",
         "Slice takes nothing along axis 1 of input 'x' (4x6): start 3, end 1, step 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Ctx c;
        ctx_init(&c);
        const char *body = ctx_printf(&c,
            "<input name='x' shape='4 6'/><input name='o' shape='1 4'/>"
            "<input name='s' shape=''/>%s"
            "<node name='r' op='ReduceSum' in='x' out='l' keepdims='0'/>"
            "<output name='l'/>", cases[i][0]);
        ck_assert_contains(error_of(&c, body), cases[i][1]);
        ctx_free(&c);
    }
}
END_TEST

/* ONNX's rules for the pointwise family: Erf and Reciprocal keep the shape;
 * Pow and Where broadcast (Where all three inputs together); LogSoftmax
 * keeps the shape; Expand broadcasts its input with `shape` both ways (a 1
 * where the input is larger, fewer or more dimensions). */
START_TEST(pointwise_onnx_shapes)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='4 5'/><input name='col' shape='4 1'/>"
        "<input name='row' shape='1 5'/><input name='c3' shape='2 1 1'/>"
        "<input name='v' shape='3'/><input name='m' shape='2 3'/>"
        "<initializer name='two' shape='' init='constant' value='2' trainable='false'/>"
        "<node name='n0' op='Erf' in='x' out='y0'/>"
        "<node name='n1' op='Reciprocal' in='col' out='y1'/>"
        "<node name='n2' op='Pow' in='x two' out='y2'/>"
        "<node name='n3' op='Pow' in='col row' out='y3'/>"
        "<node name='n4' op='Where' in='col two row' out='y4'/>"
        "<node name='n5' op='Where' in='c3 x col' out='y5'/>"
        "<node name='n6' op='LogSoftmax' in='y5' out='y6' axis='0'/>"
        "<node name='n7' op='Expand' in='col' out='y7' shape='2 1 6'/>"
        "<node name='n8' op='Expand' in='v' out='y8' shape='2 1'/>"
        "<node name='n9' op='Expand' in='m' out='y9' shape='3'/>"
        "<node name='s0' op='ReduceSum' in='y6' out='l' keepdims='0'/>"
        "<output name='l' loss='true'/><output name='y0'/><output name='y1'/>"
        "<output name='y2'/><output name='y3'/><output name='y4'/>"
        "<output name='y7'/><output name='y8'/><output name='y9'/>",
        "none");
    assert_shape(T(&m, "y0"), 2, 4, 5, 0);
    assert_shape(T(&m, "y1"), 2, 4, 1, 0);
    assert_shape(T(&m, "y2"), 2, 4, 5, 0);
    assert_shape(T(&m, "y3"), 2, 4, 5, 0);
    assert_shape(T(&m, "y4"), 2, 4, 5, 0);
    assert_shape(T(&m, "y5"), 3, 2, 4, 5);
    assert_shape(T(&m, "y6"), 3, 2, 4, 5);
    assert_shape(T(&m, "y7"), 3, 2, 4, 6);
    assert_shape(T(&m, "y8"), 2, 2, 3, 0);
    assert_shape(T(&m, "y9"), 2, 2, 3, 0);
    ck_assert_int_eq(op_table[op_lookup("Where")].cat, CAT_POINTWISE);
    ck_assert_int_eq(op_table[op_lookup("LogSoftmax")].cat, CAT_REDUCTION);
    ck_assert_int_eq(op_table[op_lookup("Expand")].cat, CAT_SHAPE);
    ctx_free(&c);
}
END_TEST

/* What each backward reads, seen in what `none` keeps: Erf keeps its input,
 * Reciprocal and LogSoftmax their outputs, Pow its base (never its
 * output), Where neither branch, Expand nothing. */
START_TEST(pointwise_onnx_backward_reads)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='3 4'/><input name='mask' shape='3 1'/>"
        "<initializer name='w' shape='4 4' init='uniform'/>"
        "<initializer name='two' shape='' init='constant' value='2' trainable='false'/>"
        "<node name='mm' op='MatMul' in='x w' out='h'/>"
        "<node name='n0' op='Neg' in='h' out='a'/>"
        "<node name='n1' op='Erf' in='a' out='b'/>"
        "<node name='n2' op='Neg' in='b' out='c'/>"
        "<node name='n3' op='Reciprocal' in='c' out='d'/>"
        "<node name='n4' op='Neg' in='d' out='e'/>"
        "<node name='n5' op='Pow' in='e two' out='f'/>"
        "<node name='n6' op='Neg' in='f' out='f1'/>"
        "<node name='n7' op='Neg' in='f' out='f2'/>"
        "<node name='n8' op='Where' in='mask f1 f2' out='g'/>"
        "<node name='n9' op='Expand' in='g' out='i' shape='2 1 1'/>"
        "<node name='n10' op='LogSoftmax' in='i' out='j'/>"
        "<node name='n11' op='ReduceSum' in='j' out='l' keepdims='0'/>"
        "<output name='l'/>", "none");
    ck_assert_int_eq(keep_of(&m, "a"), KEEP_SAVE);     /* Erf's input */
    ck_assert_int_eq(keep_of(&m, "b"), KEEP_NONE);     /* Erf's output */
    ck_assert_int_eq(keep_of(&m, "c"), KEEP_NONE);     /* Reciprocal's input */
    ck_assert_int_eq(keep_of(&m, "d"), KEEP_SAVE);     /* Reciprocal's output */
    ck_assert_int_eq(keep_of(&m, "e"), KEEP_SAVE);     /* Pow's base */
    ck_assert_int_eq(keep_of(&m, "f"), KEEP_NONE);     /* Pow's output */
    ck_assert_int_eq(keep_of(&m, "f1"), KEEP_NONE);    /* Where's branches */
    ck_assert_int_eq(keep_of(&m, "f2"), KEEP_NONE);
    ck_assert_int_eq(keep_of(&m, "g"), KEEP_NONE);     /* Expand's input */
    ck_assert_int_eq(keep_of(&m, "i"), KEEP_NONE);     /* LogSoftmax's input */
    ck_assert_int_eq(keep_of(&m, "j"), KEEP_SAVE);     /* and its output */
    ctx_free(&c);
}
END_TEST

/* Pad's output shape (axes, a crop, rank 6) and what its backward and the
 * group normalizations' read under `none`: Pad nothing, GroupNormalization
 * and InstanceNormalization their input (issue 25). */
START_TEST(pad_and_group_norm_shapes_and_reads)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='2 4 3'/><input name='x6' shape='1 2 1 2 1 2'/>"
        "<initializer name='w' shape='3 3' init='uniform'/>"
        "<initializer name='s' shape='5' init='ones'/>"
        "<initializer name='b' shape='5' init='zeros'/>"
        "<node name='mm' op='MatMul' in='x w' out='h'/>"
        "<node name='pad' op='Pad' in='h' out='p' pads='1 1 1 0' axes='-1 1'/>"
        "<node name='gn' op='GroupNormalization' in='p s b' out='g' num_groups='5'/>"
        "<node name='neg' op='Neg' in='g' out='n'/>"
        "<node name='in' op='InstanceNormalization' in='n s b' out='i'/>"
        "<node name='r0' op='ReduceSum' in='i' out='l0' keepdims='0'/>"
        "<node name='pad6' op='Pad' in='x6' out='p6' mode='edge' "
        "pads='0 0 0 0 0 -1 1 1 1 1 1 1'/>"
        "<node name='r1' op='ReduceSum' in='p6' out='l1' keepdims='0'/>"
        "<node name='sum' op='Add' in='l0 l1' out='l'/><output name='l'/>", "none");
    assert_dims(T(&m, "p"), 3, (long[]){2, 5, 5});
    assert_dims(T(&m, "p6"), 6, (long[]){2, 3, 2, 3, 2, 2});
    ck_assert_int_eq(keep_of(&m, "h"), KEEP_NONE);     /* Pad reads nothing */
    ck_assert_int_eq(keep_of(&m, "p"), KEEP_SAVE);     /* GroupNorm's X */
    ck_assert_int_eq(keep_of(&m, "g"), KEEP_NONE);     /* its output */
    ck_assert_int_eq(keep_of(&m, "n"), KEEP_SAVE);     /* InstanceNorm's X */
    ctx_free(&c);
}
END_TEST

/* issue 25 (newops2): ReduceL1/L2/SumSquare/LogSumExp reduce as
 * ReduceSum; DepthToSpace and SpaceToDepth move blocks between channels
 * and space; what each backward reads (a Sign reads nothing: it has no
 * backward, and asks no gradient of its input's producer). */
START_TEST(newops2_shapes_and_reads)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='2 8 3 2'/>"
        "<initializer name='w' shape='2 2' init='uniform'/>"
        "<node name='mm' op='MatMul' in='x w' out='h'/>"
        "<node name='d2s' op='DepthToSpace' in='h' out='d' blocksize='2' mode='CRD'/>"
        "<node name='s2d' op='SpaceToDepth' in='d' out='s' blocksize='2'/>"
        "<node name='tanh' op='Tanh' in='s' out='t'/>"
        "<node name='l1' op='ReduceL1' in='t' out='a' axes='1' keepdims='0'/>"
        "<node name='l2' op='ReduceL2' in='a' out='b' axes='-1'/>"
        "<node name='neg' op='Neg' in='b' out='nb'/>"
        "<node name='sq' op='ReduceSumSquare' in='nb' out='q' axes='0 2'/>"
        "<node name='exp' op='Exp' in='q' out='e'/>"
        "<node name='sign' op='Sign' in='e' out='g'/>"
        "<node name='mul' op='Mul' in='e g' out='eg'/>"
        "<node name='lse' op='ReduceLogSumExp' in='eg' out='l' keepdims='0'/>"
        "<output name='l'/>", "none");
    assert_dims(T(&m, "d"), 4, (long[]){2, 2, 6, 4});
    assert_dims(T(&m, "s"), 4, (long[]){2, 8, 3, 2});
    assert_dims(T(&m, "a"), 3, (long[]){2, 3, 2});
    assert_dims(T(&m, "b"), 3, (long[]){2, 3, 1});
    assert_dims(T(&m, "q"), 3, (long[]){1, 3, 1});
    assert_dims(T(&m, "l"), 0, (long[]){0});
    ck_assert_int_eq(keep_of(&m, "h"), KEEP_NONE);     /* DepthToSpace: nothing */
    ck_assert_int_eq(keep_of(&m, "t"), KEEP_SAVE);     /* ReduceL1's x, Tanh's y */
    ck_assert_int_eq(keep_of(&m, "a"), KEEP_SAVE);     /* ReduceL2's x */
    ck_assert_int_eq(keep_of(&m, "b"), KEEP_SAVE);     /* ReduceL2's y */
    ck_assert_int_eq(keep_of(&m, "nb"), KEEP_SAVE);    /* ReduceSumSquare's x */
    ck_assert_int_eq(keep_of(&m, "g"), KEEP_SAVE);     /* Mul's other input */
    ck_assert_int_eq(keep_of(&m, "l"), KEEP_SAVE);     /* LogSumExp's y */
    ctx_free(&c);
}
END_TEST

/* Every error the family's shape rules give, with what would be right. */
START_TEST(pointwise_onnx_shape_errors)
{
    static const struct {
        const char *body, *want;
    } cases[] = {
        {"<input name='x' shape='4 5'/><input name='y' shape='4'/>"
         "<node name='n' op='Pow' in='x y' out='z'/>",
         "Pow inputs 'x' (4x5) and 'y' (4) do not broadcast: dimension 1 is "
         "5 against 4"},
        {"<input name='c' shape='3 1'/><input name='x' shape='4 5'/>"
         "<input name='y' shape='5'/><node name='n' op='Where' in='c x y' out='z'/>",
         "Where inputs 'c' (3x1), 'x' (4x5) and 'y' (5) do not broadcast: "
         "dimension 0 is 3, 4 and 1; each of the three must be 1 or the largest"},
        {"<input name='x' shape=''/><node name='n' op='LogSoftmax' in='x' out='z'/>",
         "LogSoftmax input 'x' is a scalar; it needs at least one dimension"},
        {"<input name='x' shape='2 3'/>"
         "<node name='n' op='LogSoftmax' in='x' out='z' axis='2'/>",
         "LogSoftmax axis 2 is out of range for input 'x' of rank 2; axis must "
         "be in [-2, 1]"},
        {"<input name='x' shape='2 3'/><node name='n' op='Expand' in='x' out='z'/>",
         "Expand needs shape=\"D0 D1 ...\""},
        {"<input name='x' shape='2 3'/>"
         "<node name='n' op='Expand' in='x' out='z' shape='2 0'/>",
         "Expand shape entry 1 is 0; entries are positive"},
        {"<input name='x' shape='2 3'/>"
         "<node name='n' op='Expand' in='x' out='z' shape='4 3'/>",
         "Expand cannot broadcast input 'x' (2x3) to shape \"4 3\": dimension "
         "0 is 2 against 4"},
        {"<input name='x' shape='2 3'/>"
         "<node name='n' op='Expand' in='x' out='z' shape='1 1 1 1 1 2 3'/>",
         "Expand shape has 7 dimensions; at most 6 are supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Ctx c;
        ctx_init(&c);
        ck_assert_contains(error_of(&c, cases[i].body), cases[i].want);
        ctx_free(&c);
    }
}
END_TEST

/* ---- BatchNormalization ------------------------------------------------------ */

/* x, the four per-channel tensors (running ones trainable="false"), and a
 * loss; `shape` is x's, `c` the channels' count, `attrs` the node's. */
static const char *bn_body(Ctx *c, const char *shape, const char *ch,
                           const char *attrs, const char *stats)
{
    return ctx_printf(c,
        "<input name='x' shape='%s'/>"
        "<initializer name='s' shape='%s' init='ones'/>"
        "<initializer name='b' shape='%s' init='zeros'/>"
        "%s"
        "<node name='bn' op='BatchNormalization' in='x s b m v' out='y' %s/>"
        "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/>"
        "<output name='l'/>", shape, ch, ch,
        stats ? stats : ctx_printf(c,
            "<initializer name='m' shape='%s' init='zeros' trainable='false'/>"
            "<initializer name='v' shape='%s' init='ones' trainable='false'/>",
            ch, ch), attrs);
}

START_TEST(batchnorm_keeps_shape_rank2_and_4)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, bn_body(&c, "4 3 5 2", "3", "", NULL), "none");
    const Tensor *y = T(&m, "y");
    long want[4] = {4, 3, 5, 2};
    ck_assert_int_eq(y->rank, 4);
    for (int d = 0; d < 4; d++)
        ck_assert_int_eq(y->dims[d], want[d]);
    Compiled m2 = compile_body(&c, bn_body(&c, "6 5", "5",
        "epsilon='0.01' momentum='0.5' training_mode='1'", NULL), "none");
    assert_shape(T(&m2, "y"), 2, 6, 5, 0);
    /* the running statistics get no gradient; the backward reads x and s */
    ck_assert(!T(&m2, "m")->has_grad && !T(&m2, "v")->has_grad);
    ck_assert(T(&m2, "s")->has_grad && T(&m2, "b")->has_grad);
    /* eval mode normalizes with the running statistics: one value per
     * channel is enough (training mode refuses it, batchnorm_errors) */
    Compiled m3 = compile_body(&c, bn_body(&c, "1 3", "3",
        "training_mode='0'", NULL), "none");
    assert_shape(T(&m3, "y"), 2, 1, 3, 0);
    ctx_free(&c);
}
END_TEST

START_TEST(batchnorm_errors)
{
    static const struct {
        const char *shape, *ch, *attrs, *stats, *want;
    } cases[] = {
        {"4", "4", "", NULL, "must be (N, C) or (N, C, D1, ...)"},
        {"4 3 2", "2", "", NULL, "input 1 (scale) 's' has shape 2 but must be 3"},
        {"1 3", "3", "", NULL, "the train step's batch statistics need at least 2"},
        {"2 3", "3", "training_mode='2'", NULL, "training_mode is 2; it must be 1 (train_step"},
        {"2 3", "3", "momentum='1.5'", NULL, "momentum 1.5 is out of range"},
        {"2 3", "3", "epsilon='-1'", NULL, "epsilon -1 is negative"},
        {"2 3", "3", "", "<initializer name='m' shape='3' init='zeros'/>"
            "<initializer name='v' shape='3' init='ones' trainable='false'/>",
         "input 3 'm' is a trainable parameter but must be an initializer with "
         "trainable=\"false\""},
        {"2 3", "3", "", "<input name='m' shape='3'/>"
            "<initializer name='v' shape='3' init='ones' trainable='false'/>",
         "input 3 'm' is a graph input"},
        {"2 3", "3", "", "<initializer name='m' shape='3' init='zeros' trainable='false'/>"
            "<initializer name='v' shape='3' init='ones' trainable='false'/>"
            "<node name='other' op='Neg' in='v' out='nv'/><output name='nv'/>",
         "input 4 'v' is read 2 times"},
        {"2 3", "3", "", "<initializer name='m' shape='2' init='zeros' trainable='false'/>"
            "<initializer name='v' shape='3' init='ones' trainable='false'/>",
         "input 3 (input_mean) 'm' has shape 2 but must be 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Ctx c;
        ctx_init(&c);
        const char *msg = error_of(&c, bn_body(&c, cases[i].shape, cases[i].ch,
                                              cases[i].attrs, cases[i].stats));
        ck_assert_contains(msg, cases[i].want);
        ctx_free(&c);
    }
}
END_TEST


/* ---- pools' ceil_mode and auto_pad, Conv's auto_pad ------------------------------ */

/* The output's H and W of one window node over x (N, C, h, w). */
static void window_hw(const char *op, const char *x, const char *attrs,
                      long oh, long ow)
{
    Ctx c;
    ctx_init(&c);
    int conv = strcmp(op, "Conv") == 0;
    Compiled m = compile_body(&c, ctx_printf(&c,
        "<input name='x' shape='%s'/>%s"
        "<node name='p' op='%s' in='x%s' out='y' %s/>"
        "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/>"
        "<output name='l'/>", x,
        conv ? "<initializer name='w' shape='2 1 3 3' init='ones'/>" : "",
        op, conv ? " w" : "", attrs), "none");
    const Tensor *y = T(&m, "y");
    ck_assert_msg(y->rank == 4 && y->dims[2] == oh && y->dims[3] == ow,
                  "%s %s on %s: got %s, want ..x%ldx%ld", op, attrs, x,
                  shape_str(&c, y), oh, ow);
    ctx_free(&c);
}

START_TEST(pool_ceil_mode_and_auto_pad_sizes)
{
    /* 2x2 stride 2 on 5x7: floor 2x3, ceil 3x4 */
    window_hw("MaxPool", "1 2 5 7", "kernel_shape='2 2' strides='2 2'", 2, 3);
    window_hw("MaxPool", "1 2 5 7", "kernel_shape='2 2' strides='2 2' "
              "ceil_mode='0' auto_pad='NOTSET'", 2, 3);
    window_hw("MaxPool", "1 2 5 7", "kernel_shape='2 2' strides='2 2' "
              "ceil_mode='1'", 3, 4);
    /* 1x1 stride 2 with pads 1 on 3: floor 3, and ceil 3 less the window
     * that starts in the end padding: 2 */
    window_hw("AveragePool", "1 2 3 3", "kernel_shape='1 1' strides='2 2' "
              "pads='1 1 1 1'", 3, 3);
    window_hw("AveragePool", "1 2 3 3", "kernel_shape='1 1' strides='2 2' "
              "pads='1 1 1 1' ceil_mode='1'", 2, 2);
    /* SAME: ceil(in / stride), whatever the kernel; VALID: no pads */
    window_hw("AveragePool", "1 2 7 5", "kernel_shape='3 2' strides='2 3' "
              "auto_pad='SAME_UPPER'", 4, 2);
    window_hw("MaxPool", "1 2 7 5", "kernel_shape='3 2' strides='2 3' "
              "auto_pad='SAME_LOWER'", 4, 2);
    window_hw("MaxPool", "1 2 7 5", "kernel_shape='3 2' strides='2 3' "
              "auto_pad='VALID'", 3, 2);
    window_hw("Conv", "1 1 6 5", "auto_pad='SAME_UPPER'", 6, 5);
    window_hw("Conv", "1 1 6 5", "auto_pad='SAME_LOWER' strides='2 2'", 3, 3);
    window_hw("Conv", "1 1 6 5", "auto_pad='VALID'", 4, 3);
    window_hw("Conv", "1 1 6 5", "auto_pad='NOTSET' pads='1 1 1 1'", 6, 5);
}
END_TEST

/* The output shape of one window node over x with weight w (Conv) in 1, 2
 * or 3 spatial dims, as "AxBx..". */
static void window_nd_shape(const char *op, const char *x, const char *w,
                            const char *attrs, const char *want)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, ctx_printf(&c,
        "<input name='x' shape='%s'/>%s"
        "<node name='p' op='%s' in='x%s' out='y' %s/>"
        "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/>"
        "<output name='l'/>", x,
        w ? ctx_printf(&c, "<initializer name='w' shape='%s' init='ones'/>", w)
          : "", op, w ? " w" : "", attrs), "none");
    const char *got = shape_str(&c, T(&m, "y"));
    ck_assert_msg(strcmp(got, want) == 0, "%s %s on %s: got %s, want %s", op,
                  attrs, x, got, want);
    ctx_free(&c);
}

START_TEST(window_1d_and_3d_sizes)
{
    /* 1-D: (9 + 2 - 3) / 2 + 1 = 5; dilation 2 causal pads 4,4: 7 + 8 - 5
     * + 1 = 11; ceil: (8 - 2) / 4 rounds up to 2, + 1 = 3, less the
     * window that would start at 8, past the input: 2 */
    window_nd_shape("Conv", "2 3 9", "4 3 3", "pads='1 1' strides='2'", "2x4x5");
    window_nd_shape("Conv", "1 2 7", "3 2 3", "pads='4 4' dilations='2'",
                    "1x3x11");
    window_nd_shape("Conv", "1 4 7", "4 1 3", "group='4' auto_pad='SAME_UPPER' "
                    "strides='2'", "1x4x4");
    window_nd_shape("MaxPool", "1 2 8", NULL, "kernel_shape='2' strides='4' "
                    "ceil_mode='1'", "1x2x2");
    window_nd_shape("AveragePool", "1 2 8", NULL, "kernel_shape='3' "
                    "auto_pad='VALID'", "1x2x6");
    /* 3-D: per axis as 2-D's */
    window_nd_shape("Conv", "1 2 4 5 6", "3 2 3 3 3", "pads='1 1 1 1 1 1'",
                    "1x3x4x5x6");
    window_nd_shape("Conv", "1 2 6 5 5", "2 1 2 3 2", "group='2' strides='2 2 1' "
                    "dilations='2 1 1' pads='1 0 1 0 1 0'", "1x2x3x2x5");
    window_nd_shape("MaxPool", "1 2 5 5 5", NULL, "kernel_shape='2 2 2' "
                    "strides='2 2 2' ceil_mode='1'", "1x2x3x3x3");
    window_nd_shape("AveragePool", "1 2 5 6 7", NULL, "kernel_shape='3 3 3' "
                    "strides='2 2 2' auto_pad='SAME_LOWER'", "1x2x3x3x4");
    window_nd_shape("GlobalMaxPool", "2 3 4 5 6", NULL, "", "2x3x1x1x1");
    window_nd_shape("GlobalMaxPool", "2 3 7", NULL, "", "2x3x1");
}
END_TEST

START_TEST(pool_ceil_mode_and_auto_pad_errors)
{
    static const struct {
        const char *op, *attrs, *want;
    } cases[] = {
        {"MaxPool", "kernel_shape='2 2' ceil_mode='2'",
         "MaxPool ceil_mode is 2; it must be 0 (floor) or 1 (ceil)"},
        {"AveragePool", "kernel_shape='2 2' pads='1 1 1 1' auto_pad='VALID'",
         "AveragePool has both pads and auto_pad=\"VALID\""},
        {"Conv", "pads='0 0 0 0' auto_pad='SAME_UPPER'",
         "Conv has both pads and auto_pad=\"SAME_UPPER\""},
        {"MaxPool", "kernel_shape='2 2' auto_pad='SAME'",
         "auto_pad=\"SAME\" must be \"NOTSET\" or \"VALID\" or \"SAME_UPPER\" or "
         "\"SAME_LOWER\""},
        {"MaxPool", "kernel_shape='5 5' auto_pad='VALID'",
         "window 5x5 (with dilations) is larger than input 'x' padded to 4x4"},
        {"Conv", "ceil_mode='1'", "attribute 'ceil_mode'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Ctx c;
        ctx_init(&c);
        int conv = strcmp(cases[i].op, "Conv") == 0;
        const char *msg = error_of(&c, ctx_printf(&c,
            "<input name='x' shape='1 1 4 4'/>%s"
            "<node name='p' op='%s' in='x%s' out='y' %s/>"
            "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/>"
            "<output name='l'/>",
            conv ? "<initializer name='w' shape='1 1 3 3' init='ones'/>" : "",
            cases[i].op, conv ? " w" : "", cases[i].attrs));
        ck_assert_contains(msg, cases[i].want);
        ctx_free(&c);
    }
}
END_TEST


/* ---- ConvTranspose and Resize (issue 25) ---------------------------------- */

/* y's shape after one node `op` on x (and W of shape w, if any). */
static void convt_resize_shape(const char *op, const char *x, const char *w,
                               const char *attrs, const char *want)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, ctx_printf(&c,
        "<input name='x' shape='%s'/>%s%s%s"
        "<node name='p' op='%s' in='x%s' out='y' %s/>"
        "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/>"
        "<output name='l'/>", x, w ? "<initializer name='w' shape='" : "",
        w ? w : "", w ? "' init='ones'/>" : "", op, w ? " w" : "", attrs),
        "none");
    const char *got = shape_str(&c, T(&m, "y"));
    ck_assert_msg(strcmp(got, want) == 0, "%s %s on %s: got %s, want %s", op,
                  attrs, x, got, want);
    ctx_free(&c);
}

START_TEST(conv_transpose_and_resize_shapes)
{
    /* ONNX: s (in - 1) + output_padding + (k - 1) d + 1 - pads */
    convt_resize_shape("ConvTranspose", "2 4 3 5", "4 3 2 2",
                       "strides='2 2'", "2x3x6x10");
    convt_resize_shape("ConvTranspose", "2 4 3 5", "4 3 2 2",
                       "strides='2 2' group='2'", "2x6x6x10");
    convt_resize_shape("ConvTranspose", "1 2 5", "2 1 3",
                       "strides='2' pads='1 1' output_padding='1'", "1x1x10");
    convt_resize_shape("ConvTranspose", "1 2 4 4", "2 1 3 3",
                       "dilations='2 1' pads='1 0 1 0'", "1x1x6x6");
    convt_resize_shape("ConvTranspose", "1 1 2 3 4", "1 1 3 3 3",
                       "strides='2 2 2' auto_pad='SAME_LOWER'", "1x1x4x6x8");
    convt_resize_shape("ConvTranspose", "1 1 2 3 4", "1 1 3 3 3",
                       "strides='2 2 2' auto_pad='VALID'", "1x1x5x7x9");
    convt_resize_shape("ConvTranspose", "1 1 3 3", "1 2 3 3",
                       "strides='3 2' output_shape='10 8'", "1x2x10x8");
    convt_resize_shape("Resize", "1 2 3 4", NULL, "sizes='1 2 6 9'",
                       "1x2x6x9");
    convt_resize_shape("Resize", "1 2 3 4", NULL,
                       "sizes='2 1 1 2' mode='linear' scales='2 0.5 0.4 0.6'",
                       "2x1x1x2");
}
END_TEST

/* issue 25: GatherElements, OneHot, CumSum and Tile. y's shape after the
 * one node `node` (reading x float32 and k int64) and its dtype. */
static void new_op_shape(const char *x, const char *k, const char *node,
                         const char *want, int want_int)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c, ctx_printf(&c,
        "<input name='x' shape='%s'/><input name='k' shape='%s' "
        "dtype='int64'/>%s<node name='c' op='Cast' in='k' out='kf'/>"
        "<node name='r' op='ReduceSum' in='y' out='l0' keepdims='0'/>"
        "<node name='r2' op='ReduceSum' in='x' out='l1' keepdims='0'/>"
        "<node name='a' op='Add' in='l0 l1' out='l'/>"
        "<output name='l'/>", x, k, node), "none");
    const char *got = shape_str(&c, T(&m, "y"));
    ck_assert_msg(strcmp(got, want) == 0, "%s: got %s, want %s", node, got,
                  want);
    ck_assert_int_eq(T(&m, "y")->is_int, want_int);
    ctx_free(&c);
}

START_TEST(gather_elements_one_hot_cumsum_tile_shapes)
{
    /* GatherElements: the indices' shape, shorter than data off the axis */
    new_op_shape("3 4", "2 6", "<node name='g' op='GatherElements' "
                 "in='x k' out='y' axis='-1'/>", "2x6", 0);
    new_op_shape("3 4 5", "7 2 1", "<node name='g' op='GatherElements' "
                 "in='x k' out='y'/>", "7x2x1", 0);
    /* OneHot: depth inserted at axis, of the output's rank */
    new_op_shape("1", "2 3", "<node name='o' op='OneHot' in='k' out='y' "
                 "depth='5'/>", "2x3x5", 0);
    new_op_shape("1", "2 3", "<node name='o' op='OneHot' in='k' out='y' "
                 "depth='5' axis='-3'/>", "5x2x3", 0);
    new_op_shape("1", "2 3", "<node name='o' op='OneHot' in='k' out='y' "
                 "depth='4' axis='1'/>", "2x4x3", 0);
    /* CumSum: the input's shape */
    new_op_shape("2 3 4", "1", "<node name='s' op='CumSum' in='x' out='y' "
                 "axis='-2' exclusive='1' reverse='1'/>", "2x3x4", 0);
    /* Tile: x_d r_d; int64 passes through */
    new_op_shape("2 1 3", "1", "<node name='t' op='Tile' in='x' out='y' "
                 "repeats='2 4 1'/>", "4x4x3", 0);
    new_op_shape("1", "3 2", "<node name='t' op='Tile' in='k' out='ki' "
                 "repeats='1 2'/><node name='c2' op='Cast' in='ki' out='y'/>",
                 "3x4", 0);
}
END_TEST

START_TEST(conv_transpose_and_resize_errors)
{
    static const struct {
        const char *op, *w, *attrs, *want;
    } cases[] = {
        {"ConvTranspose", "1 2 3 3", "strides='2'",
         "ConvTranspose strides has 1 values; it takes 2"},
        {"ConvTranspose", "1 2 3 3", "pads='0 0 0 0' auto_pad='VALID'",
         "ConvTranspose has both pads and auto_pad=\"VALID\""},
        {"ConvTranspose", "1 2 3 3", "pads='3 0 3 0'",
         "its pads (3, 3) crop more than the 6 it makes"},
        {"ConvTranspose", "2 2 3 3", "",
         "dimension 0 must be 1"},
        {"ConvTranspose", "1 2 3 3", "output_padding='-1 0'",
         "ConvTranspose output_padding has -1; values must be 0 to 268435456"},
        {"Resize", NULL, "sizes='1 1 0 4'",
         "Resize sizes has 0 for axis 2; sizes must be positive"},
        {"Resize", NULL, "mode='linear'", "Resize needs sizes=\"...\" with 4"},
        {"Resize", NULL, "sizes='1 1 8 8' scales='1 1 2'",
         "Resize scales=\"1 1 2\" must be 4 positive numbers"},
        {"Resize", NULL, "sizes='1 1 8 8' scales='1 1 2 2.5'",
         "Resize sizes has 8 for axis 3 but scale 2.5 of its 4 elements "
         "gives 10"},
        {"Resize", NULL, "sizes='1 1 8 8' mode='area'",
         "mode=\"area\" must be \"nearest\" or \"linear\" or \"cubic\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Ctx c;
        ctx_init(&c);
        const char *w = cases[i].w;
        const char *msg = error_of(&c, ctx_printf(&c,
            "<input name='x' shape='1 1 4 4'/>%s%s%s"
            "<node name='p' op='%s' in='x%s' out='y' %s/>"
            "<node name='r' op='ReduceSum' in='y' out='l' keepdims='0'/>"
            "<output name='l'/>", w ? "<initializer name='w' shape='" : "",
            w ? w : "", w ? "' init='ones'/>" : "", cases[i].op,
            w ? " w" : "", cases[i].attrs));
        ck_assert_contains(msg, cases[i].want);
        ctx_free(&c);
    }
}
END_TEST

/* ---- SoftmaxCrossEntropyLoss: class weights, reduction none -------------- */

/* ONNX: reduction none gives one loss per label, the labels' shape (a
 * tensor, not the loss: the ReduceSum of it is); the class weights are (C)
 * and get no gradient, even as a trainable parameter, so the backward does
 * not ask for one and the parameter's gradient stays unwritten. */
START_TEST(sce_weights_and_reduction_none_shapes)
{
    Ctx c;
    ctx_init(&c);
    Compiled m = compile_body(&c,
        "<input name='x' shape='3 5 4'/>"
        "<input name='lab' shape='3 4' dtype='int64'/>"
        "<initializer name='w' shape='4 4' init='uniform'/>"
        "<initializer name='cw' shape='5' init='ones'/>"
        "<node name='f' op='MatMul' in='x w' out='s'/>"
        "<node name='ce' op='SoftmaxCrossEntropyLoss' in='s lab cw' out='per'"
        " reduction='none' ignore_index='-1'/>"
        "<node name='r' op='ReduceSum' in='per' out='l' keepdims='0'/>"
        "<output name='l'/>", "none");
    assert_shape(T(&m, "per"), 2, 3, 4, 0);
    ck_assert_int_eq(m.g->loss, tensor_id(&m, "l"));
    ck_assert_int_eq(T(&m, "per")->has_grad, 1);
    ck_assert_int_eq(T(&m, "s")->has_grad, 1);
    ck_assert_int_eq(T(&m, "w")->has_grad, 1);
    /* cw is trainable, but the loss takes no gradient through the weights */
    ck_assert_int_eq(T(&m, "cw")->requires_grad, 1);
    ck_assert_int_eq(T(&m, "cw")->has_grad, 0);
    const Node *ce = NULL;
    for (int i = 0; i < m.g->nnodes; i++)
        if (strcmp(m.g->nodes[i].name, "ce") == 0)
            ce = &m.g->nodes[i];
    ck_assert_ptr_nonnull(ce);
    int want[MAX_IO];
    node_grad_inputs(m.g, ce, want);
    ck_assert_int_eq(want[0], 1);
    ck_assert_int_eq(want[2], 0);
    /* d(scores) reads the scores, the labels and the weights */
    ck_assert_uint_eq(node_backward_reads(m.g, ce),
                      NEED_IN(0) | NEED_IN(1) | NEED_IN(2));
    ctx_free(&c);

    /* weights alone (a trainable parameter) do not make the loss trainable:
     * nothing else depends on a parameter, so there is no gradient at all */
    ctx_init(&c);
    m = compile_body(&c,
        "<input name='s' shape='3 5'/>"
        "<input name='lab' shape='3' dtype='int64'/>"
        "<initializer name='cw' shape='5' init='ones'/>"
        "<node name='ce' op='SoftmaxCrossEntropyLoss' in='s lab cw' out='l'/>"
        "<output name='l'/>", "none");
    ck_assert_int_eq(T(&m, "l")->requires_grad, 0);
    ck_assert_int_eq(T(&m, "cw")->has_grad, 0);
    ctx_free(&c);

    /* a graph whose only output is the per-sample loss has no loss */
    ctx_init(&c);
    m = compile_body(&c,
        "<input name='s' shape='3 5 2'/>"
        "<input name='lab' shape='3 2' dtype='int64'/>"
        "<node name='ce' op='SoftmaxCrossEntropyLoss' in='s lab' out='per'"
        " reduction='none'/>"
        "<output name='per'/>", "none");
    assert_shape(T(&m, "per"), 2, 3, 2, 0);
    ck_assert_int_eq(m.g->loss, -1);
    ck_assert_int_eq(graph_trains(m.g), 0);
    ctx_free(&c);
}
END_TEST

START_TEST(sce_weights_and_reduction_errors)
{
    static const char *const cases[][2] = {
        {"<node name='n' op='SoftmaxCrossEntropyLoss' in='s lab w4' out='l'/>",
         "SoftmaxCrossEntropyLoss input 2 'w4' has shape 4 but the class "
         "weights of scores 3x5 must have shape 5"},
        {"<node name='n' op='SoftmaxCrossEntropyLoss' in='s lab w15' out='l'/>",
         "input 2 'w15' has shape 1x5 but the class weights"},
        {"<node name='n' op='SoftmaxCrossEntropyLoss' in='s lab il' out='l'/>",
         "input 2 'il' is int64 but must be float32"},
        {"<node name='n' op='SoftmaxCrossEntropyLoss' in='s lab w5 w5' out='l'/>",
         "SoftmaxCrossEntropyLoss takes 2 to 3 inputs, got 4"},
        {"<node name='n' op='SoftmaxCrossEntropyLoss' in='s lab' out='l'"
         " reduction='mean_of_weights'/>",
         "must be \"mean\" or \"sum\" or \"none\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Ctx c;
        ctx_init(&c);
        const char *body = ctx_printf(&c,
            "<input name='s' shape='3 5'/>"
            "<input name='lab' shape='3' dtype='int64'/>"
            "<input name='il' shape='5' dtype='int64'/>"
            "<input name='w4' shape='4'/><input name='w5' shape='5'/>"
            "<input name='w15' shape='1 5'/>%s"
            "<output name='l'/>", cases[i][0]);
        ck_assert_contains(error_of(&c, body), cases[i][1]);
        ctx_free(&c);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shapes");
    TCase *t = tcase_create("shapes");
    tcase_add_test(t, order_is_topological_and_stable);
    tcase_add_test(t, cycles_are_named);
    tcase_add_test(t, gemm_shapes_follow_trans_flags);
    tcase_add_test(t, gemm_mismatch_says_what_would_fit);
    tcase_add_test(t, broadcasting_follows_numpy);
    tcase_add_test(t, broadcast_that_does_not_fit);
    tcase_add_test(t, loss_found_by_shape_when_unmarked);
    tcase_add_test(t, no_loss_compiles_forward_only);
    tcase_add_test(t, empty_axes_follow_onnx);
    tcase_add_test(t, op_table_is_complete);
    tcase_add_test(t, int64_inputs_shape_gather_and_loss);
    tcase_add_test(t, structural_view_and_join_shapes);
    tcase_add_test(t, slice_clamps_like_onnx);
    tcase_add_test(t, int64_labels_through_views);
    tcase_add_test(t, int64_views_refused_elsewhere);
    tcase_add_test(t, argmax_shapes_and_errors);
    tcase_add_test(t, int64_arithmetic_dtypes);
    tcase_add_test(t, int64_reduce_sum_and_div_dtypes);
    tcase_add_test(t, int64_through_shape_ops_and_masks);
    tcase_add_test(t, structural_shape_errors);
    tcase_add_test(t, pointwise_onnx_shapes);
    tcase_add_test(t, pointwise_onnx_backward_reads);
    tcase_add_test(t, pointwise_onnx_shape_errors);
    tcase_add_test(t, batchnorm_keeps_shape_rank2_and_4);
    tcase_add_test(t, batchnorm_errors);
    tcase_add_test(t, pool_ceil_mode_and_auto_pad_sizes);
    tcase_add_test(t, pool_ceil_mode_and_auto_pad_errors);
    tcase_add_test(t, window_1d_and_3d_sizes);
    tcase_add_test(t, sce_weights_and_reduction_none_shapes);
    tcase_add_test(t, sce_weights_and_reduction_errors);
    tcase_add_test(t, pad_and_group_norm_shapes_and_reads);
    tcase_add_test(t, newops2_shapes_and_reads);
    tcase_add_test(t, conv_transpose_and_resize_shapes);
    tcase_add_test(t, gather_elements_one_hot_cumsum_tile_shapes);
    tcase_add_test(t, conv_transpose_and_resize_errors);
    suite_add_tcase(s, t);
    return run_suite(s);
}
