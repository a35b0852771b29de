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
    tcase_add_test(t, pointwise_onnx_shapes);
    tcase_add_test(t, pointwise_onnx_backward_reads);
    tcase_add_test(t, pointwise_onnx_shape_errors);
    suite_add_tcase(s, t);
    return run_suite(s);
}
