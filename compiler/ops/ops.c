/*
 * ops.c: the op table, the one place that knows an op.
 *
 * A row says the op's ONNX name, its arity, its cost category, its typed
 * attributes with ONNX's defaults, its shape rule, its FLOPs, which inputs
 * and outputs each input's gradient reads, and how its forward and backward
 * calls are written. Everything downstream (autodiff, remat, schedule, emit)
 * asks the table and never switches on the op.
 *
 * The needs masks are what makes rematerialization precise: Add's backward
 * reads nothing, so under any policy the output of the GEMM feeding an Add is
 * never kept for it; Gelu reads its input; Tanh, Sigmoid and Relu read their
 * output; a GEMM's weight gradient reads the activation, its input gradient
 * the weight.
 *
 * The functions a row names live in one file per op family, named as the
 * runtime's kernel file and the family's unit test are (ops_gemm.c,
 * runtime/gemm.c, tests/unit/test_kernels_gemm.c); what every family
 * reads of a node is in node.c, how they write C in emit_text.c. This file
 * keeps the rows and the lookups that read them. The families never read
 * op_table: a node reaches its own row through Node.row, so the table
 * calls down into the families and nothing calls back up.
 *
 * To add an op: see compiler/ADDING_AN_OP.md.
 */
#include "ops.h"

#include <math.h>
#include <string.h>

const char *const category_names[CAT_COUNT] = {
    [CAT_MATMUL] = "matmul",
    [CAT_CONV] = "conv",
    [CAT_ATTENTION] = "attention",
    [CAT_POINTWISE] = "pointwise",
    [CAT_REDUCTION] = "reduction",
    [CAT_NORMALIZATION] = "normalization",
    [CAT_SHAPE] = "shape",
    [CAT_RANDOM] = "random",
    [CAT_LOSS] = "loss",
};

static const char *const gelu_modes[] = {"none", "tanh", NULL};

static const AttrSpec gemm_attrs[] = {
    {.name = "alpha", .type = ATTR_FLOAT, .f = 1.0f},
    {.name = "beta", .type = ATTR_FLOAT, .f = 1.0f},
    {.name = "transA", .type = ATTR_INT, .i = 0, .flag = 1},
    {.name = "transB", .type = ATTR_INT, .i = 0, .flag = 1},
    {0},
};
static const AttrSpec gelu_attrs[] = {
    {.name = "approximate", .type = ATTR_STRING, .s = "none",
     .choices = gelu_modes},
    {0},
};
static const AttrSpec reduce_attrs[] = {
    {.name = "axes", .type = ATTR_INTS},
    {.name = "keepdims", .type = ATTR_INT, .i = 1},
    {.name = "noop_with_empty_axes", .type = ATTR_INT, .i = 0},
    {0},
};
static const AttrSpec no_attrs[] = {{0}};
/* ArgMax, ArgMin (issue 25) */
static const AttrSpec arg_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = 0},
    {.name = "keepdims", .type = ATTR_INT, .i = 1, .flag = 1},
    {.name = "select_last_index", .type = ATTR_INT, .i = 0, .flag = 1},
    {0},
};
/* Cast's target type as ONNX numbers it; remat computes 1 (float32) */
static const AttrSpec cast_attrs[] = {
    {.name = "to", .type = ATTR_INT, .i = 1},
    {0},
};
static const AttrSpec softmax_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = -1},
    {0},
};
static const AttrSpec layer_norm_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = -1},
    {.name = "epsilon", .type = ATTR_FLOAT, .f = 1e-5f},
    {0},
};
static const AttrSpec transpose_attrs[] = {
    {.name = "perm", .type = ATTR_INTS},
    {0},
};
static const AttrSpec reshape_attrs[] = {
    {.name = "shape", .type = ATTR_INTS},
    {0},
};
static const char *const auto_pads[] = {"NOTSET", "VALID", "SAME_UPPER",
                                        "SAME_LOWER", NULL};
static const AttrSpec conv_attrs[] = {
    {.name = "kernel_shape", .type = ATTR_INTS},
    {.name = "strides", .type = ATTR_INTS},
    {.name = "pads", .type = ATTR_INTS},
    {.name = "dilations", .type = ATTR_INTS},
    {.name = "group", .type = ATTR_INT, .i = 1},
    {.name = "auto_pad", .type = ATTR_STRING, .s = "NOTSET",
     .choices = auto_pads},
    {0},
};
static const AttrSpec max_pool_attrs[] = {
    {.name = "kernel_shape", .type = ATTR_INTS},
    {.name = "strides", .type = ATTR_INTS},
    {.name = "pads", .type = ATTR_INTS},
    {.name = "dilations", .type = ATTR_INTS},
    {.name = "auto_pad", .type = ATTR_STRING, .s = "NOTSET",
     .choices = auto_pads},
    {.name = "ceil_mode", .type = ATTR_INT, .i = 0},
    {0},
};
static const AttrSpec average_pool_attrs[] = {
    {.name = "kernel_shape", .type = ATTR_INTS},
    {.name = "strides", .type = ATTR_INTS},
    {.name = "pads", .type = ATTR_INTS},
    {.name = "dilations", .type = ATTR_INTS},
    {.name = "count_include_pad", .type = ATTR_INT, .i = 0},
    {.name = "auto_pad", .type = ATTR_STRING, .s = "NOTSET",
     .choices = auto_pads},
    {.name = "ceil_mode", .type = ATTR_INT, .i = 0},
    {0},
};
static const AttrSpec attention_attrs[] = {
    {.name = "is_causal", .type = ATTR_INT, .i = 0},
    {.name = "scale", .type = ATTR_FLOAT},
    {.name = "q_num_heads", .type = ATTR_INT, .i = 0},
    {.name = "kv_num_heads", .type = ATTR_INT, .i = 0},
    {0},
};
static const AttrSpec flatten_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = 1},
    {0},
};
static const AttrSpec gather_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = 0},
    {0},
};
static const char *const sce_reductions[] = {"mean", "sum", "none", NULL};
static const AttrSpec sce_attrs[] = {
    {.name = "reduction", .type = ATTR_STRING, .s = "mean",
     .choices = sce_reductions},
    {.name = "ignore_index", .type = ATTR_INT},
    {0},
};
static const AttrSpec dropout_attrs[] = {
    {.name = "ratio", .type = ATTR_FLOAT, .f = 0.5f},
    {0},
};
/* issue 25 (newops1): OneHot's depth and values (ONNX's inputs 1 and 2,
 * constants the importer reads) as attributes; CumSum's axis likewise,
 * Tile's repeats */
static const AttrSpec one_hot_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = -1},
    {.name = "depth", .type = ATTR_INT, .i = 0},
    {.name = "off_value", .type = ATTR_FLOAT, .f = 0.0f},
    {.name = "on_value", .type = ATTR_FLOAT, .f = 1.0f},
    {0},
};
static const AttrSpec cumsum_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = 0},
    {.name = "exclusive", .type = ATTR_INT, .i = 0, .flag = 1},
    {.name = "reverse", .type = ATTR_INT, .i = 0, .flag = 1},
    {0},
};
static const AttrSpec tile_attrs[] = {
    {.name = "repeats", .type = ATTR_INTS},
    {0},
};
static const AttrSpec axes_attrs[] = {
    {.name = "axes", .type = ATTR_INTS},
    {0},
};
static const AttrSpec concat_attrs[] = {
    {.name = "axis", .type = ATTR_INT},     /* required: shape_concat */
    {0},
};
static const AttrSpec split_attrs[] = {
    {.name = "axis", .type = ATTR_INT, .i = 0},
    {.name = "split", .type = ATTR_INTS},
    {0},
};
static const AttrSpec slice_attrs[] = {
    {.name = "starts", .type = ATTR_INTS},
    {.name = "ends", .type = ATTR_INTS},
    {.name = "axes", .type = ATTR_INTS},
    {.name = "steps", .type = ATTR_INTS},
    {0},
};

static const AttrSpec leaky_relu_attrs[] = {
    {.name = "alpha", .type = ATTR_FLOAT, .f = 0.01f},
    {0},
};
static const AttrSpec hard_sigmoid_attrs[] = {
    {.name = "alpha", .type = ATTR_FLOAT, .f = 0.2f},
    {.name = "beta", .type = ATTR_FLOAT, .f = 0.5f},
    {0},
};
/* ONNX's min and max are inputs since opset 11; remat's are attributes
 * (the importer folds constant ones), and one left out is no bound */
static const AttrSpec clip_attrs[] = {
    {.name = "min", .type = ATTR_FLOAT, .f = -INFINITY},
    {.name = "max", .type = ATTR_FLOAT, .f = INFINITY},
    {0},
};
static const AttrSpec elu_attrs[] = {
    {.name = "alpha", .type = ATTR_FLOAT, .f = 1.0f},
    {0},
};
/* ONNX's defaults, the float32 values of SELU's constants */
static const AttrSpec selu_attrs[] = {
    {.name = "alpha", .type = ATTR_FLOAT, .f = 1.67326319217681884765625f},
    {.name = "gamma", .type = ATTR_FLOAT, .f = 1.05070102214813232421875f},
    {0},
};
static const AttrSpec celu_attrs[] = {
    {.name = "alpha", .type = ATTR_FLOAT, .f = 1.0f},
    {0},
};

/* ConvTranspose and Resize (issue 25) */
static const AttrSpec conv_transpose_attrs[] = {
    {.name = "kernel_shape", .type = ATTR_INTS},
    {.name = "strides", .type = ATTR_INTS},
    {.name = "pads", .type = ATTR_INTS},
    {.name = "dilations", .type = ATTR_INTS},
    {.name = "group", .type = ATTR_INT, .i = 1},
    {.name = "auto_pad", .type = ATTR_STRING, .s = "NOTSET",
     .choices = auto_pads},
    {.name = "output_padding", .type = ATTR_INTS},
    {.name = "output_shape", .type = ATTR_INTS},
    {0},
};
static const char *const resize_modes[] = {"nearest", "linear", "cubic",
                                           NULL};
static const char *const resize_transforms[] = {
    "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
    "tf_half_pixel_for_nn", NULL};
static const char *const resize_roundings[] = {
    "round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
/* ONNX's defaults; `sizes` (the output's shape) is required: the
 * importer folds ONNX's constant scales or sizes inputs into it, and
 * keeps given scales as `scales` (numbers, one per axis: ONNX's
 * coordinates read them), a string the shape rule parses */
static const AttrSpec resize_attrs[] = {
    {.name = "mode", .type = ATTR_STRING, .s = "nearest",
     .choices = resize_modes},
    {.name = "coordinate_transformation_mode", .type = ATTR_STRING,
     .s = "half_pixel", .choices = resize_transforms},
    {.name = "nearest_mode", .type = ATTR_STRING, .s = "round_prefer_floor",
     .choices = resize_roundings},
    {.name = "sizes", .type = ATTR_INTS},
    {.name = "scales", .type = ATTR_STRING},
    {.name = "cubic_coeff_a", .type = ATTR_FLOAT, .f = -0.75f},
    {.name = "exclude_outside", .type = ATTR_INT, .i = 0, .flag = 1},
    {0},
};

/* ops users meet (issue 25, newops2): DepthToSpace's mode, ONNX's default;
 * blocksize is required (shape_depth_to_space) */
static const char *const d2s_modes[] = {"DCR", "CRD", NULL};
static const AttrSpec depth_to_space_attrs[] = {
    {.name = "blocksize", .type = ATTR_INT},
    {.name = "mode", .type = ATTR_STRING, .s = "DCR", .choices = d2s_modes},
    {0},
};
/* Mod (issue 25): 0, the divisor's sign (Python's %); 1, the dividend's (C's fmod) */
static const AttrSpec mod_attrs[] = {
    {.name = "fmod", .type = ATTR_INT, .i = 0, .flag = 1},
    {0},
};
static const AttrSpec space_to_depth_attrs[] = {
    {.name = "blocksize", .type = ATTR_INT},
    {0},
};

/* int64 and bool tensors (issue 25): a row that computes int64 from two
 * int64 operands as it does float32 from two float32 ones (Add, Sub, Mul,
 * Div) */
#define INT_INT64 .int_range = range_any, .int_ok = 3, .int_out = INT_OUT_PASS
#define BINARY(NAME, KERNEL, NEED0, NEED1)                                      \
    {NAME, KERNEL, 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary, flops_out, {NEED0, NEED1},  \
     emit_binary_fwd, emit_binary_bwd, emit_binary_static, .chunked = 1}
#define COMPARE(NAME)                                                            \
    {NAME, "compare", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_compare, flops_out, \
     {0, 0}, emit_compare_fwd, NULL, emit_binary_static, NULL, 0, range_any,     \
     .no_grad = 3, .int_ok = 3, .int_out = INT_OUT_BOOL}
#define LOGIC(NAME)                                                              \
    {NAME, "compare", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary, flops_out,  \
     {0, 0}, emit_compare_fwd, NULL, emit_binary_static, NULL, 3, range_any,    \
     .int_out = INT_OUT_BOOL}
#define UNARY(NAME, KERNEL, FLOPS, NEED)                                         \
    {NAME, KERNEL, 1, 1, 1, CAT_POINTWISE, no_attrs, shape_same, FLOPS, {NEED},       \
     emit_unary_fwd, emit_unary_bwd, NULL, .chunked = 1}
#define UNARY_ATTRS(NAME, KERNEL, ATTRS, FLOPS, NEED)                            \
    {NAME, KERNEL, 1, 1, 1, CAT_POINTWISE, ATTRS, shape_same, FLOPS, {NEED},          \
     emit_unary_fwd, emit_unary_bwd, NULL, .chunked = 1}

const OpInfo op_table[] = {
    [OP_GEMM] = {"Gemm", "gemm", 2, 3, 1, CAT_MATMUL, gemm_attrs, shape_gemm,
                 flops_gemm, {NEED_IN(1), NEED_IN(0), 0}, emit_gemm_fwd,
                 emit_gemm_bwd, NULL, .bwd_writes = 7, .gemm_rate = 1,
                 .bwd_parts = 1},
    /* A third input, a bias of B's columns added to every row, is
     * remat's own: what middle/fuse.c makes of a MatMul and the Add of a
     * vector after it */
    [OP_MATMUL] = {"MatMul", "gemm", 2, 3, 1, CAT_MATMUL, no_attrs, shape_gemm,
                   flops_gemm, {NEED_IN(1), NEED_IN(0), 0}, emit_gemm_fwd,
                   emit_gemm_bwd, emit_matmul_static, .bwd_writes = 7,
                   .gemm_rate = 1, .bwd_parts = 1},
    /* Add, Sub, Mul, Div (and Mod, below) also compute int64 from two int64 operands (ONNX:
     * one dtype, broadcast; y + arange * C, torch's advanced indexing):
     * INT_INT64 below, ops_integer.c's range_any */
    [OP_ADD] = {"Add", "add", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary,
                flops_out, {0, 0}, emit_binary_fwd, emit_binary_bwd,
                emit_binary_static, .bwd_writes = 3, .bwd_in_place = 3,
                INT_INT64, .chunked = 1},
    [OP_SUB] = {"Sub", "sub", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary,
                flops_out, {0, 0}, emit_binary_fwd, emit_binary_bwd,
                emit_binary_static, INT_INT64, .chunked = 1},
    [OP_MUL] = {"Mul", "mul", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary,
                flops_out, {NEED_IN(1), NEED_IN(0)}, emit_binary_fwd,
                emit_binary_bwd, emit_binary_static, INT_INT64, .chunked = 1},
    /* Div of two int64 tensors truncates toward zero (issue 25) */
    [OP_DIV] = {"Div", "div", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary,
                flops_out, {NEED_IN(1), NEED_IN(0) | NEED_IN(1)},
                emit_binary_fwd, emit_binary_bwd, emit_binary_static,
                INT_INT64, .chunked = 1},
    [OP_RELU] = {"Relu", "relu", 1, 1, 1, CAT_POINTWISE, no_attrs, shape_same,
                 flops_relu, {NEED_OUT(0)}, emit_unary_fwd, emit_unary_bwd,
                 NULL, .bwd_writes = 1, .bwd_in_place = 1, .fwd_in_place = 1,
                 .compact = NEED_OUT(0), .compact_bytes = compact_mask,
                 .compact_form = "1-bit mask", .chunked = 1},
    [OP_GELU] = {"Gelu", "gelu", 1, 1, 1, CAT_POINTWISE, gelu_attrs, shape_same,
                 flops_gelu, {NEED_IN(0)}, emit_unary_fwd, emit_unary_bwd,
                 NULL, .bwd_writes = 1, .bwd_in_place = 1, .fwd_in_place = 1,
                 .chunked = 1, .bwd_remakes = 1},
    [OP_TANH] = UNARY("Tanh", "tanh", flops_tanh, NEED_OUT(0)),
    [OP_SIGMOID] = UNARY("Sigmoid", "sigmoid", flops_tanh, NEED_OUT(0)),
    [OP_REDUCE_MEAN] = {"ReduceMean", "reduce", 1, 1, 1, CAT_REDUCTION, reduce_attrs,
                        shape_reduce, flops_in, {0}, emit_reduce_fwd,
                        emit_reduce_bwd, emit_reduce_static},
    /* ReduceSum also sums an int64 or bool tensor into int64 (issue 25:
     * lengths = mask.sum(-1)), with no gradient: int_ok, INT_OUT_PASS */
    [OP_REDUCE_SUM] = {"ReduceSum", "reduce", 1, 1, 1, CAT_REDUCTION, reduce_attrs,
                       shape_reduce, flops_in, {0}, emit_reduce_fwd,
                       emit_reduce_bwd, emit_reduce_static,
                       .int_range = range_any, .int_ok = 1,
                       .int_out = INT_OUT_PASS},
    [OP_EXP] = UNARY("Exp", "exp", flops_tanh, NEED_OUT(0)),
    [OP_LOG] = UNARY("Log", "log", flops_tanh, NEED_IN(0)),
    [OP_SQRT] = UNARY("Sqrt", "sqrt", flops_tanh, NEED_OUT(0)),
    [OP_NEG] = UNARY("Neg", "neg", flops_relu, 0),
    [OP_SOFTMAX] = {"Softmax", "softmax", 1, 1, 1, CAT_REDUCTION, softmax_attrs,
                    shape_softmax, flops_softmax, {NEED_OUT(0)},
                    emit_softmax_fwd, emit_softmax_bwd, NULL},
    /* the backward recomputes mean and 1/std from X: nothing else is kept */
    [OP_LAYER_NORM] = {"LayerNormalization", "layernorm", 2, 3, 1,
                       CAT_NORMALIZATION, layer_norm_attrs, shape_layer_norm,
                       flops_layer_norm,
                       {NEED_IN(0) | NEED_IN(1), NEED_IN(0), 0},
                       emit_layer_norm_fwd, emit_layer_norm_bwd, NULL,
                       scratch_layer_norm, .bwd_remakes = 1},
    [OP_TRANSPOSE] = {"Transpose", "transpose", 1, 1, 1, CAT_SHAPE,
                      transpose_attrs, shape_transpose, flops_none, {0},
                      emit_transpose_fwd, emit_transpose_bwd,
                      emit_transpose_static, .bwd_writes = 1, .int_ok = 1,
                      .int_out = INT_OUT_PASS},
    /* views: no forward call, the output is the input's floats */
    [OP_RESHAPE] = {"Reshape", "copy", 1, 1, 1, CAT_SHAPE, reshape_attrs,
                    shape_reshape, flops_none, {0}, NULL, emit_copy_bwd,
                    NULL, NULL, 0, NULL, 1},
    [OP_FLATTEN] = {"Flatten", "copy", 1, 1, 1, CAT_SHAPE, flatten_attrs,
                    shape_flatten, flops_none, {0}, NULL, emit_copy_bwd,
                    NULL, NULL, 0, NULL, 1},
    /* im2col columns in scratch, forward and backward alike */
    [OP_CONV] = {"Conv", "conv", 2, 3, 1, CAT_CONV, conv_attrs, shape_window,
                 flops_conv, {NEED_IN(1), NEED_IN(0), 0}, emit_conv_fwd,
                 emit_conv_bwd, emit_window_static, scratch_conv,
                 .gemm_rate = 1},
    /* the backward re-finds each window's maximum in X: no indices kept */
    [OP_MAX_POOL] = {"MaxPool", "maxpool", 1, 1, 1, CAT_CONV, max_pool_attrs,
                     shape_window, flops_pool, {NEED_IN(0)}, emit_pool_fwd,
                     emit_pool_bwd, emit_window_static, NULL, .bwd_writes = 1,
                     .compact = NEED_IN(0), .compact_bytes = compact_index,
                     .compact_form = "window winners"},
    [OP_AVERAGE_POOL] = {"AveragePool", "avgpool", 1, 1, 1, CAT_CONV,
                         average_pool_attrs, shape_window, flops_pool, {0},
                         emit_pool_fwd, emit_pool_bwd, emit_window_static,
                         NULL},
    [OP_GLOBAL_AVERAGE_POOL] = {"GlobalAveragePool", "global_avgpool", 1, 1, 1,
                                CAT_CONV, no_attrs, shape_global_pool,
                                flops_in, {0}, emit_global_pool_fwd,
                                emit_global_pool_bwd, NULL, NULL},
    /* train_step: batch statistics, and inputs 3 and 4 (the running mean
     * and variance) updated in place, PyTorch's way (unbiased variance;
     * ops_norm.c); forward: the running statistics. The backward recomputes
     * the batch statistics from X: it reads X and scale alone. */
    [OP_BATCH_NORM] = {"BatchNormalization", "batchnorm", 5, 5, 1,
                       CAT_NORMALIZATION, batch_norm_attrs, shape_batch_norm,
                       flops_batch_norm,
                       {NEED_IN(0) | NEED_IN(1), NEED_IN(0), 0, 0, 0},
                       emit_batch_norm_fwd, emit_batch_norm_bwd, NULL, NULL,
                       0, NULL, 0, 0, NEED_IN(3) | NEED_IN(4),
                       .needs_of = batch_norm_needs,
                       .updates_of = batch_norm_updates},
    /* The backward reads Q, K and V only and rebuilds the probabilities
     * block by block in scratch: neither the probability matrix nor softmax
     * statistics are kept between forward and backward. */
    /* the optional additive mask (input 3) gets no gradient: a mask that
     * depends on a trainable parameter is refused */
    [OP_ATTENTION] = {"Attention", "attention", 3, 4, 1, CAT_ATTENTION,
                      attention_attrs, shape_attention, flops_attention,
                      {NEED_IN(0) | NEED_IN(1) | NEED_IN(2) | NEED_IN(3),
                       NEED_IN(0) | NEED_IN(1) | NEED_IN(2) | NEED_IN(3),
                       NEED_IN(0) | NEED_IN(1) | NEED_IN(2) | NEED_IN(3)},
                      emit_attention_fwd, emit_attention_bwd, NULL,
                      scratch_attention, .gemm_rate = 1, .no_grad = 1u << 3,
                      .grad_refused = 1u << 3},
    /* the backward scatter-adds into the table: it reads the indices only */
    [OP_GATHER] = {"Gather", "gather", 2, 2, 1, CAT_SHAPE, gather_attrs,
                   shape_gather, flops_out, {NEED_IN(1), 0}, emit_gather_fwd,
                   emit_gather_bwd, NULL, scratch_gather, 1u << 1,
                   range_gather},
    /* the backward recomputes the softmax from the scores: no probabilities
     * are kept. The optional class weights (input 2) get no gradient: its
     * needs mask is 0, no_grad keeps autodiff from asking for one (even of
     * a trainable parameter), and the backward passes none */
    [OP_SOFTMAX_CROSS_ENTROPY] = {"SoftmaxCrossEntropyLoss", "sce", 2, 3, 1,
                                  CAT_LOSS, sce_attrs, shape_sce, flops_sce,
                                  {NEED_IN(0) | NEED_IN(1) | NEED_IN(2), 0, 0},
                                  emit_sce_fwd, emit_sce_bwd, NULL, NULL,
                                  1u << 1, range_sce, .no_grad = 1u << 2},
    /* the mask is drawn again from (seed, step, node), never stored: the
     * backward reads nothing */
    [OP_DROPOUT] = {"Dropout", "dropout", 1, 1, 1, CAT_RANDOM, dropout_attrs,
                    shape_dropout, flops_dropout, {0}, emit_dropout_fwd,
                    emit_dropout_bwd, NULL, NULL, 0, NULL, .bwd_writes = 1,
                    .bwd_in_place = 1, .fwd_in_place = 1, .random_mask = 1},
    /* erf'(x) = 2/sqrt(pi) exp(-x^2) reads the input */
    [OP_ERF] = UNARY("Erf", "erf", flops_erf, NEED_IN(0)),
    /* d(1/x) = -y^2 reads the output */
    [OP_RECIPROCAL] = UNARY("Reciprocal", "reciprocal", flops_relu,
                            NEED_OUT(0)),
    /* both gradients from X and Y (Y X^(Y-1), X^Y ln X): never the output */
    [OP_POW] = {"Pow", "pow", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_binary,
                flops_pow, {NEED_IN(0) | NEED_IN(1), NEED_IN(0) | NEED_IN(1)},
                emit_binary_fwd, emit_binary_bwd, emit_binary_static,
                .chunked = 1},
    /* the condition (float32, or int64/bool: int_ok; true where nonzero)
     * selects and is not differentiated; X and Y may be int64 (both, and
     * then the condition too: INT_OUT_SELECT), the output int64 then: no_grad, so a condition computed
     * from a parameter neither gets a zero gradient nor runs its
     * producers' backwards; X's and Y's gradients read the condition only */
    [OP_WHERE] = {"Where", "where", 3, 3, 1, CAT_POINTWISE, no_attrs,
                  shape_where, flops_out, {0, NEED_IN(0), NEED_IN(0)},
                  emit_where_fwd, emit_where_bwd, emit_where_static,
                  .int_range = range_any, .no_grad = 1u << 0, .int_ok = 7,
                  .int_out = INT_OUT_SELECT},
    [OP_LOG_SOFTMAX] = {"LogSoftmax", "log_softmax", 1, 1, 1, CAT_REDUCTION,
                        softmax_attrs, shape_softmax, flops_softmax,
                        {NEED_OUT(0)}, emit_softmax_fwd, emit_softmax_bwd,
                        NULL},
    /* `shape` as Reshape's; the backward sums dY back and reads nothing */
    [OP_EXPAND] = {"Expand", "expand", 1, 1, 1, CAT_SHAPE, reshape_attrs,
                   shape_expand, flops_none, {0}, emit_expand_fwd,
                   emit_expand_bwd, emit_expand_static, .int_ok = 1,
                   .int_out = INT_OUT_PASS},
    /* structural ops (ops_structural.c): Identity, Unsqueeze and Squeeze
     * are views, like Reshape, and pass int64 on; Concat, Split and Slice
     * move floats, and their backwards read only shapes */
    [OP_IDENTITY] = {"Identity", "copy", 1, 1, 1, CAT_SHAPE, no_attrs,
                     shape_same, flops_none, {0}, NULL, emit_copy_bwd, NULL,
                     NULL, 0, NULL, 1},
    [OP_UNSQUEEZE] = {"Unsqueeze", "copy", 1, 1, 1, CAT_SHAPE, axes_attrs,
                      shape_unsqueeze, flops_none, {0}, NULL, emit_copy_bwd,
                      NULL, NULL, 0, NULL, 1},
    [OP_SQUEEZE] = {"Squeeze", "copy", 1, 1, 1, CAT_SHAPE, axes_attrs,
                    shape_squeeze, flops_none, {0}, NULL, emit_copy_bwd, NULL,
                    NULL, 0, NULL, 1},
    [OP_CONCAT] = {"Concat", "concat", 1, MAX_IO, 1, CAT_SHAPE, concat_attrs,
                   shape_concat, flops_none, {0}, emit_concat_fwd,
                   emit_concat_bwd, NULL, NULL, 0, NULL, 0, .int_ok = 0xffu,
                   .int_out = INT_OUT_PASS},
    [OP_SPLIT] = {"Split", "split", 1, 1, MAX_IO, CAT_SHAPE, split_attrs,
                  shape_split, flops_none, {0}, emit_split_fwd, emit_split_bwd,
                  NULL, NULL, 0, NULL, 0, 1},
    [OP_SLICE] = {"Slice", "slice", 1, 1, 1, CAT_SHAPE, slice_attrs,
                  shape_slice, flops_none, {0}, emit_slice_fwd, emit_slice_bwd,
                  emit_slice_static, NULL, 0, NULL, 0, .int_ok = 1,
                  .int_out = INT_OUT_PASS},
    /* torch.nn's activations (ops_unary.c). Each backward reads what makes
     * its gradient exact for every attribute value: the input where the
     * output cannot tell the side of a kink (LeakyRelu with alpha <= 0,
     * Clip at its bounds, Abs) or f' needs x (HardSwish, Elu, Softplus);
     * HardSigmoid its output, which is strictly between 0 and 1 exactly
     * where the slope is alpha */
    [OP_LEAKY_RELU] = {"LeakyRelu", "leaky_relu", 1, 1, 1, CAT_POINTWISE,
                       leaky_relu_attrs, shape_same, flops_relu, {NEED_IN(0)},
                       emit_unary_fwd, emit_unary_bwd, NULL,
                       .compact = NEED_IN(0), .compact_bytes = compact_mask,
                       .compact_form = "1-bit mask", .chunked = 1},
    [OP_HARD_SWISH] = UNARY("HardSwish", "hard_swish", flops_hard, NEED_IN(0)),
    [OP_HARD_SIGMOID] = {"HardSigmoid", "hard_sigmoid", 1, 1, 1, CAT_POINTWISE,
                         hard_sigmoid_attrs, shape_same, flops_hard,
                         {NEED_OUT(0)}, emit_unary_fwd, emit_unary_bwd, NULL,
                         .compact = NEED_OUT(0), .compact_bytes = compact_mask,
                         .compact_form = "1-bit mask", .chunked = 1},
    [OP_CLIP] = {"Clip", "clip", 1, 1, 1, CAT_POINTWISE, clip_attrs,
                 shape_same, flops_hard, {NEED_IN(0)}, emit_unary_fwd,
                 emit_unary_bwd, NULL, .compact = NEED_IN(0),
                 .compact_bytes = compact_mask, .compact_form = "1-bit mask",
                 .chunked = 1},
    [OP_ELU] = UNARY_ATTRS("Elu", "elu", elu_attrs, flops_tanh, NEED_IN(0)),
    [OP_SOFTPLUS] = UNARY("Softplus", "softplus", flops_tanh, NEED_IN(0)),
    [OP_ABS] = UNARY("Abs", "abs", flops_relu, NEED_IN(0)),
    /* Selu, Celu, Softsign, Mish: f' needs x */
    [OP_SELU] = UNARY_ATTRS("Selu", "selu", selu_attrs, flops_tanh,
                            NEED_IN(0)),
    [OP_CELU] = UNARY_ATTRS("Celu", "celu", celu_attrs, flops_tanh,
                            NEED_IN(0)),
    [OP_SOFTSIGN] = UNARY("Softsign", "softsign", flops_hard, NEED_IN(0)),
    [OP_MISH] = UNARY("Mish", "mish", flops_gelu, NEED_IN(0)),
    /* Sin, Cos: f' is the other one, from x */
    [OP_SIN] = UNARY("Sin", "sin", flops_tanh, NEED_IN(0)),
    [OP_COS] = UNARY("Cos", "cos", flops_tanh, NEED_IN(0)),
    /* Max, Min and PRelu (ops_binary.c); each gradient reads both inputs
     * but PRelu's slope gradient, which reads x alone */
    [OP_MAX] = BINARY("Max", "max", NEED_IN(0) | NEED_IN(1),
                      NEED_IN(0) | NEED_IN(1)),
    [OP_MIN] = BINARY("Min", "min", NEED_IN(0) | NEED_IN(1),
                      NEED_IN(0) | NEED_IN(1)),
    [OP_PRELU] = {"PRelu", "prelu", 2, 2, 1, CAT_POINTWISE, no_attrs, shape_prelu,
                  flops_out, {NEED_IN(0) | NEED_IN(1), NEED_IN(0)},
                  emit_binary_fwd, emit_binary_bwd, emit_binary_static,
                  .chunked = 1},
    /* ReduceMax, ReduceMin (ops_reduce.c): the gradient reaches the
     * extremes, found by comparing x with y */
    [OP_REDUCE_MAX] = {"ReduceMax", "reduce_max", 1, 1, 1, CAT_REDUCTION,
                       reduce_attrs, shape_reduce, flops_in,
                       {NEED_IN(0) | NEED_OUT(0)}, emit_extreme_fwd,
                       emit_extreme_bwd, emit_reduce_static, scratch_extreme},
    [OP_REDUCE_MIN] = {"ReduceMin", "reduce_min", 1, 1, 1, CAT_REDUCTION,
                       reduce_attrs, shape_reduce, flops_in,
                       {NEED_IN(0) | NEED_OUT(0)}, emit_extreme_fwd,
                       emit_extreme_bwd, emit_reduce_static, scratch_extreme},
    /* Pad, GroupNormalization, InstanceNormalization (issue 25). Pad's
     * backward adds d(output) back where the forward read: it reads no
     * tensor. The norms recompute their group statistics from X, as
     * LayerNorm does: d(X) reads X and scale, d(scale) X, d(B) nothing */
    [OP_PAD] = {"Pad", "pad", 1, 1, 1, CAT_SHAPE, pad_attrs, shape_pad,
                flops_none, {0}, emit_pad_fwd, emit_pad_bwd, emit_pad_static},
    [OP_GROUP_NORM] = {"GroupNormalization", "groupnorm", 3, 3, 1,
                       CAT_NORMALIZATION, group_norm_attrs, shape_group_norm,
                       flops_layer_norm,
                       {NEED_IN(0) | NEED_IN(1), NEED_IN(0), 0},
                       emit_group_norm_fwd, emit_group_norm_bwd, NULL},
    [OP_INSTANCE_NORM] = {"InstanceNormalization", "groupnorm", 3, 3, 1,
                          CAT_NORMALIZATION, instance_norm_attrs,
                          shape_group_norm, flops_layer_norm,
                          {NEED_IN(0) | NEED_IN(1), NEED_IN(0), 0},
                          emit_group_norm_fwd, emit_group_norm_bwd, NULL},
    /* loss family (ops_loss.c). NegativeLogLikelihoodLoss: its backward
     * reads the labels and the class weights, never the log-probabilities;
     * the weights get no gradient (no_grad, as SoftmaxCrossEntropyLoss's),
     * the labels take [0, C) and ignore_index */
    [OP_NLL_LOSS] = {"NegativeLogLikelihoodLoss", "nll", 2, 3, 1, CAT_LOSS,
                     sce_attrs, shape_sce, flops_nll,
                     {NEED_IN(1) | NEED_IN(2), 0, 0}, emit_nll_fwd,
                     emit_nll_bwd, NULL, NULL, 1u << 1, range_sce,
                     .no_grad = 1u << 2},
    /* ConvTranspose and Resize (issue 25). ConvTranspose as Conv: dX reads
     * W, dW reads X, dB nothing; direct loops, no scratch. Resize is a
     * gather with weights (category shape, as Gather: cheap to recompute,
     * its output large); its backward scatters dY along the forward's
     * tables and reads nothing */
    [OP_CONV_TRANSPOSE] = {"ConvTranspose", "convt", 2, 3, 1, CAT_CONV,
                           conv_transpose_attrs, shape_conv_transpose,
                           flops_conv_transpose, {NEED_IN(1), NEED_IN(0), 0},
                           emit_conv_transpose_fwd, emit_conv_transpose_bwd,
                           emit_conv_transpose_static},
    [OP_RESIZE] = {"Resize", "resize", 1, 1, 1, CAT_SHAPE, resize_attrs,
                   shape_resize, flops_resize, {0}, emit_resize_fwd,
                   emit_resize_bwd, emit_resize_static},
    /* convolution and pooling in 1-3 spatial dims: the backward re-finds
     * each plane's maximum in X (ops_pool.c) */
    [OP_GLOBAL_MAX_POOL] = {"GlobalMaxPool", "global_maxpool", 1, 1, 1,
                            CAT_CONV, no_attrs, shape_global_pool, flops_in,
                            {NEED_IN(0)}, emit_global_pool_fwd,
                            emit_global_pool_bwd, NULL, NULL,
                            .compact = NEED_IN(0),
                            .compact_bytes = compact_plane_index,
                            .compact_form = "plane winners"},
    /* int64 and bool tensors (ops_integer.c, issue 25): a bool is an int64
     * 0 or 1; no row has a backward. Cast reads any int64 value; the
     * comparisons take two int64 or two float32 inputs (no_grad: a float32
     * operand computed from a parameter asks for no gradient); the logical
     * ops read bools */
    [OP_CAST] = {"Cast", "cast", 1, 1, 1, CAT_POINTWISE, cast_attrs,
                 shape_cast, flops_out, {0}, emit_cast_fwd, NULL, NULL, NULL,
                 1u << 0, range_any},
    [OP_EQUAL] = COMPARE("Equal"),
    [OP_LESS] = COMPARE("Less"),
    [OP_GREATER] = COMPARE("Greater"),
    [OP_LESS_OR_EQUAL] = COMPARE("LessOrEqual"),
    [OP_GREATER_OR_EQUAL] = COMPARE("GreaterOrEqual"),
    [OP_NOT] = {"Not", "not", 1, 1, 1, CAT_POINTWISE, no_attrs, shape_same,
                flops_out, {0}, emit_not_fwd, NULL, NULL, NULL, 1u << 0,
                range_any, .int_out = INT_OUT_BOOL},
    [OP_AND] = LOGIC("And"),
    [OP_OR] = LOGIC("Or"),
    [OP_XOR] = LOGIC("Xor"),
    /* ArgMax and ArgMin (ops_reduce.c, issue 25): the index of the largest
     * or smallest value along one axis, int64 (INT_OUT_BOOL: int64 always);
     * no backward, as the comparisons have none */
    [OP_ARGMAX] = {"ArgMax", "argmax", 1, 1, 1, CAT_REDUCTION, arg_attrs,
                   shape_arg, flops_in, {0}, emit_arg_fwd, NULL, NULL, NULL,
                   .no_grad = 1, .int_out = INT_OUT_BOOL},
    [OP_ARGMIN] = {"ArgMin", "argmin", 1, 1, 1, CAT_REDUCTION, arg_attrs,
                   shape_arg, flops_in, {0}, emit_arg_fwd, NULL, NULL, NULL,
                   .no_grad = 1, .int_out = INT_OUT_BOOL},
    /* ops users meet that were refused (issue 25, newops1).
     * GatherElements: the backward scatter-adds into the data, reading the
     * indices only (as Gather). OneHot: int64 indices in, float32 out, no
     * backward. CumSum: the backward is the running sum of dY the other
     * way, reading nothing. Tile: Expand's kernels over its own map (the
     * backward sums the tiles, reading nothing); int64 passes through */
    [OP_GATHER_ELEMENTS] = {"GatherElements", "gather_elements", 2, 2, 1,
                            CAT_SHAPE, gather_attrs, shape_gather_elements,
                            flops_out, {NEED_IN(1), 0},
                            emit_gather_elements_fwd, emit_gather_elements_bwd,
                            emit_gather_elements_static, NULL, 1u << 1,
                            range_gather_elements},
    [OP_ONE_HOT] = {"OneHot", "one_hot", 1, 1, 1, CAT_SHAPE, one_hot_attrs,
                    shape_one_hot, flops_out, {0}, emit_one_hot_fwd, NULL,
                    NULL, NULL, 1u << 0, range_one_hot},
    [OP_CUMSUM] = {"CumSum", "cumsum", 1, 1, 1, CAT_REDUCTION, cumsum_attrs,
                   shape_cumsum, flops_out, {0}, emit_cumsum_fwd,
                   emit_cumsum_bwd, NULL},
    [OP_TILE] = {"Tile", "expand", 1, 1, 1, CAT_SHAPE, tile_attrs, shape_tile,
                 flops_none, {0}, emit_expand_fwd, emit_expand_bwd,
                 emit_tile_static, .int_ok = 1, .int_out = INT_OUT_PASS},
    /* ops users meet (issue 25, newops2). ReduceL1, ReduceL2,
     * ReduceSumSquare and ReduceLogSumExp sum a term of x over the axes
     * (ops_reduce.c): each gradient reads x (sign(x), 2x), and ReduceL2's
     * (x / y) and ReduceLogSumExp's (exp(x - y)) y too. Sign's gradient is
     * zero: no_grad and no backward, so a Sign of a parameter asks nothing
     * of it. DepthToSpace and SpaceToDepth move elements: their backwards
     * move d(output) back and read nothing */
    [OP_REDUCE_L1] = {"ReduceL1", "reduce_l1", 1, 1, 1, CAT_REDUCTION,
                      reduce_attrs, shape_reduce, flops_reduce_term,
                      {NEED_IN(0)}, emit_reduce_term_fwd,
                      emit_reduce_term_bwd, emit_reduce_static},
    [OP_REDUCE_L2] = {"ReduceL2", "reduce_l2", 1, 1, 1, CAT_REDUCTION,
                      reduce_attrs, shape_reduce, flops_reduce_term,
                      {NEED_IN(0) | NEED_OUT(0)}, emit_reduce_term_fwd,
                      emit_reduce_term_bwd, emit_reduce_static},
    [OP_REDUCE_SUM_SQUARE] = {"ReduceSumSquare", "reduce_sum_square", 1, 1, 1,
                              CAT_REDUCTION, reduce_attrs, shape_reduce,
                              flops_reduce_term, {NEED_IN(0)},
                              emit_reduce_term_fwd, emit_reduce_term_bwd,
                              emit_reduce_static},
    [OP_REDUCE_LOG_SUM_EXP] = {"ReduceLogSumExp", "reduce_log_sum_exp", 1, 1,
                               1, CAT_REDUCTION, reduce_attrs, shape_reduce,
                               flops_reduce_term, {NEED_IN(0) | NEED_OUT(0)},
                               emit_reduce_term_fwd, emit_reduce_term_bwd,
                               emit_reduce_static, scratch_log_sum_exp},
    [OP_SIGN] = {"Sign", "sign", 1, 1, 1, CAT_POINTWISE, no_attrs, shape_same,
                 flops_relu, {0}, emit_unary_fwd, NULL, NULL, .no_grad = 1},
    [OP_DEPTH_TO_SPACE] = {"DepthToSpace", "depth_to_space", 1, 1, 1,
                           CAT_SHAPE, depth_to_space_attrs,
                           shape_depth_to_space, flops_none, {0},
                           emit_depth_to_space_fwd, emit_depth_to_space_bwd,
                           NULL},
    [OP_SPACE_TO_DEPTH] = {"SpaceToDepth", "space_to_depth", 1, 1, 1,
                           CAT_SHAPE, space_to_depth_attrs,
                           shape_depth_to_space, flops_none, {0},
                           emit_depth_to_space_fwd, emit_depth_to_space_bwd,
                           NULL},
    /* int64 arithmetic (issue 25, boolconst): Mod of two int64 tensors
     * (fmod 0 or 1) or of two float32 ones (fmod 1, as ONNX requires);
     * dA is dY, dB is -trunc(A / B) dY: both read A and B */
    [OP_MOD] = {"Mod", "mod", 2, 2, 1, CAT_POINTWISE, mod_attrs, shape_mod,
                flops_out, {0, NEED_IN(0) | NEED_IN(1)}, emit_mod_fwd,
                emit_mod_bwd, emit_binary_static, INT_INT64},
};

/* The last OpKind has a row (a unit test checks that every row is filled). */
_Static_assert(sizeof op_table / sizeof op_table[0] == OP_COUNT,
               "op_table must cover OpKind");

int op_lookup(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (op_table[i].name && strcmp(op_table[i].name, name) == 0)
            return i;
    return -1;
}

unsigned node_updates(const Node *n)
{
    const OpInfo *row = &op_table[n->op];
    return row->updates_of ? row->updates_of(n) : row->updates;
}

unsigned op_backward_needs(const Node *n, const int *want)
{
    unsigned mask = 0;
    if (op_table[n->op].needs_of)
        return op_table[n->op].needs_of(n, want);
    for (int i = 0; i < n->nin; i++)
        if (want[i])
            mask |= op_table[n->op].needs[i];
    return mask;
}
