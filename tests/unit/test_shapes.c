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
        ck_assert(op->emit_backward != NULL);
        ck_assert_int_eq(op_lookup(op->name), i);
        ck_assert_int_le(op->min_in, op->max_in);
        /* an op with int64 inputs says what values they take */
        ck_assert(!op->int_inputs == !op->int_range);
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
        {"2 3", "3", "training_mode='2'", NULL, "training_mode is 2; it must be 0 or 1"},
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
    tcase_add_test(t, empty_axes_follow_onnx);
    tcase_add_test(t, op_table_is_complete);
    tcase_add_test(t, int64_inputs_shape_gather_and_loss);
    tcase_add_test(t, batchnorm_keeps_shape_rank2_and_4);
    tcase_add_test(t, batchnorm_errors);
    tcase_add_test(t, pool_ceil_mode_and_auto_pad_sizes);
    tcase_add_test(t, pool_ceil_mode_and_auto_pad_errors);
    suite_add_tcase(s, t);
    return run_suite(s);
}
