/*
 * ops.h: what the op families share among themselves and with the table
 * (ops.c), and no other stage needs: the IN/OUT shorthands, node.c's
 * helpers, the emitters' text helpers that only op rows call, and each
 * family's row functions. A family exports only what its rows name.
 * remat.h holds the contract every stage sees: OpInfo, op_table, the
 * attribute lookups and emit().
 */
#ifndef OPS_H
#define OPS_H

#include "../remat.h"
#include "../../runtime/remat_rt.h"

/* The node's input and output tensors, where `g` and `n` are in scope. */
#define IN(i) (&g->tensors[n->in[i]])
#define OUT(i) (&g->tensors[n->out[i]])

/* ---- node.c: what every family reads of a node --------------------------------- */

/* The product of t's dimensions [from, to). */
long dims_product(const Tensor *t, int from, int to);
/* "file:line: node 'name': what"; returns -1. */
int node_error(Ctx *c, const Graph *g, const Node *n, const char *what);
/* v[i] when i < n and v[i] is set, else "NULL": an optional argument. */
const char *or_null(const char *const *v, int i, int n);
/* The last argument of a backward's _set twin (", 0x1u"), or "" when the
 * call writes nothing. */
const char *set_arg(Emit *e);
/* "_set" when the call writes (the twin's name), else "". */
const char *set_suffix(const Emit *e);
/* The node's `axis` attribute, checked to be in [-rank, hi] (hi: rank - 1,
 * or rank where an axis may be one past the last), made non-negative. */
int node_axis(Ctx *c, const Graph *g, const Node *n, int rank, int hi);
/* Output 0 with input 0's shape (Identity and the pointwise rows). */
int shape_same(Ctx *c, Graph *g, Node *n);
/* FLOPs: none (a view), one per output element, one per input element. */
double flops_none(const Graph *g, const Node *n);
double flops_out(const Graph *g, const Node *n);
double flops_in(const Graph *g, const Node *n);


/* ---- emit_text.c: the static data a call refers to --------------------------- */

/* `static const int name[] = {...};` */
void emit_int_array(Emit *e, const char *name, const long *v, int n);
/* Node n's rt_bcast map_NAME with these dims and strides, as given. */
void emit_map(Emit *e, const Node *n, int rank, const long *dims,
              const long *sa, const long *sb);
/* Node n's rt_bcast map_NAME from y's shape to a's and b's strides (one
 * flat loop when all three are alike); returns the map's name. */
const char *emit_bcast(Emit *e, const Node *n, const Tensor *y,
                       const Tensor *a, const Tensor *b);
/* The map from x to x reduced over the axes `reduced` marks. */
const char *emit_reduce_map(Emit *e, const Node *n, const Tensor *x,
                            const int *reduced);
/* The element count of a chunked row's call (OpInfo.chunked): inside a
 * fused recompute's loop the chunk's (Emit.count), else numel. */
const char *elems(Emit *e, long numel);
/* The broadcast map a binary call takes: "&map_NAME", or inside a fused
 * recompute's loop "&chunk_map", the chunk's flat one (the operands then
 * all have the output's shape). */
const char *map_ref(Emit *e, const Node *n);
/* Zeroes din[i] for the bits of Emit.writes not in `handled`: a gradient
 * the schedule left unzeroed for a call that, on this node, only adds. */
void emit_unwritten(Emit *e, const Node *n, const char *const *din,
                    unsigned handled);

/* ---- ops_gemm.c: Gemm, MatMul -------------------------------------------------- */

int shape_gemm(Ctx *c, Graph *g, Node *n);
void emit_matmul_static(Emit *e, const Node *n);
double flops_gemm(const Graph *g, const Node *n);
void emit_gemm_fwd(Emit *e, const Node *n, const char *const *out,
                   const char *const *in);
void emit_gemm_bwd(Emit *e, const Node *n, const char *const *din,
                   const char *const *dout, const char *const *in,
                   const char *const *out);

/* ---- ops_binary.c: Add, Sub, Mul, Div, Mod, Pow, Max, Min, PRelu, Where, Expand ----- */

int shape_binary(Ctx *c, Graph *g, Node *n);
int shape_prelu(Ctx *c, Graph *g, Node *n);
void emit_binary_static(Emit *e, const Node *n);
void emit_binary_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in);
void emit_binary_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out);
double flops_pow(const Graph *g, const Node *n);
/* Mod (issue 25): fmod 0 (the divisor's sign) of int64 only */
int shape_mod(Ctx *c, Graph *g, Node *n);
void emit_mod_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in);
void emit_mod_bwd(Emit *e, const Node *n, const char *const *din,
                  const char *const *dout, const char *const *in,
                  const char *const *out);
int shape_where(Ctx *c, Graph *g, Node *n);
void emit_where_static(Emit *e, const Node *n);
void emit_where_fwd(Emit *e, const Node *n, const char *const *out,
                    const char *const *in);
void emit_where_bwd(Emit *e, const Node *n, const char *const *din,
                    const char *const *dout, const char *const *in,
                    const char *const *out);
int shape_expand(Ctx *c, Graph *g, Node *n);
void emit_expand_static(Emit *e, const Node *n);
void emit_expand_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in);
void emit_expand_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out);
/* Tile (issue 25): Expand's kernels over a map that splits each repeated
 * dimension in two (the repeat, stride 0, and the input's extent) */
int shape_tile(Ctx *c, Graph *g, Node *n);
void emit_tile_static(Emit *e, const Node *n);

/* ---- ops_unary.c: the one-input pointwise rows --------------------------------- */

/* Per output element: one (Relu's, and any row as cheap), four (a
 * transcendental: Tanh), eight (Gelu). */
double flops_relu(const Graph *g, const Node *n);
double flops_tanh(const Graph *g, const Node *n);
double flops_gelu(const Graph *g, const Node *n);
void emit_unary_fwd(Emit *e, const Node *n, const char *const *out,
                    const char *const *in);
void emit_unary_bwd(Emit *e, const Node *n, const char *const *din,
                    const char *const *dout, const char *const *in,
                    const char *const *out);
double flops_erf(const Graph *g, const Node *n);
/* Relu's, LeakyRelu's and Clip's compact form: a bit per element. */
long compact_mask(const Graph *g, const Node *n);
/* Two per element: a clamp and a multiply-add (HardSwish, HardSigmoid,
 * Clip). */
double flops_hard(const Graph *g, const Node *n);

/* ---- ops_reduce.c: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceL1, ... --- */

int shape_reduce(Ctx *c, Graph *g, Node *n);
void emit_reduce_static(Emit *e, const Node *n);
void emit_reduce_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in);
void emit_reduce_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out);
void emit_extreme_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in);
void emit_extreme_bwd(Emit *e, const Node *n, const char *const *din,
                      const char *const *dout, const char *const *in,
                      const char *const *out);
long scratch_extreme(const Graph *g, const Node *n, int backward);
/* ArgMax, ArgMin (issue 25) */
int shape_arg(Ctx *c, Graph *g, Node *n);
void emit_arg_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in);
/* CumSum (issue 25): a running rt_sum along one axis */
int shape_cumsum(Ctx *c, Graph *g, Node *n);
void emit_cumsum_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in);
void emit_cumsum_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out);
/* ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSumExp (issue 25) */
void emit_reduce_term_fwd(Emit *e, const Node *n, const char *const *out,
                          const char *const *in);
void emit_reduce_term_bwd(Emit *e, const Node *n, const char *const *din,
                          const char *const *dout, const char *const *in,
                          const char *const *out);
long scratch_log_sum_exp(const Graph *g, const Node *n, int backward);
double flops_reduce_term(const Graph *g, const Node *n);

/* ---- ops_softmax.c: Softmax, LogSoftmax ---------------------------------------- */

int shape_softmax(Ctx *c, Graph *g, Node *n);
void emit_softmax_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in);
void emit_softmax_bwd(Emit *e, const Node *n, const char *const *din,
                      const char *const *dout, const char *const *in,
                      const char *const *out);
double flops_softmax(const Graph *g, const Node *n);

/* ---- ops_norm.c: LayerNormalization, BatchNormalization ------------------------ */

extern const AttrSpec batch_norm_attrs[];
int shape_layer_norm(Ctx *c, Graph *g, Node *n);
void emit_layer_norm_fwd(Emit *e, const Node *n, const char *const *out,
                         const char *const *in);
void emit_layer_norm_bwd(Emit *e, const Node *n, const char *const *din,
                         const char *const *dout, const char *const *in,
                         const char *const *out);
double flops_layer_norm(const Graph *g, const Node *n);
long scratch_layer_norm(const Graph *g, const Node *n, int backward);
int shape_batch_norm(Ctx *c, Graph *g, Node *n);
double flops_batch_norm(const Graph *g, const Node *n);
unsigned batch_norm_needs(const Node *n, const int *want);
unsigned batch_norm_updates(const Node *n);
void emit_batch_norm_fwd(Emit *e, const Node *n, const char *const *out,
                         const char *const *in);
void emit_batch_norm_bwd(Emit *e, const Node *n, const char *const *din,
                         const char *const *dout, const char *const *in,
                         const char *const *out);

/* GroupNormalization, InstanceNormalization (issue 25) */
extern const AttrSpec group_norm_attrs[];
extern const AttrSpec instance_norm_attrs[];
int shape_group_norm(Ctx *c, Graph *g, Node *n);
void emit_group_norm_fwd(Emit *e, const Node *n, const char *const *out,
                         const char *const *in);
void emit_group_norm_bwd(Emit *e, const Node *n, const char *const *din,
                         const char *const *dout, const char *const *in,
                         const char *const *out);

/* ---- ops_structural.c: views, Transpose, Gather, Concat, Split, Slice ---------- */

int shape_transpose(Ctx *c, Graph *g, Node *n);
void emit_transpose_static(Emit *e, const Node *n);
void emit_transpose_fwd(Emit *e, const Node *n, const char *const *out,
                        const char *const *in);
void emit_transpose_bwd(Emit *e, const Node *n, const char *const *din,
                        const char *const *dout, const char *const *in,
                        const char *const *out);
int shape_reshape(Ctx *c, Graph *g, Node *n);
int shape_flatten(Ctx *c, Graph *g, Node *n);
void emit_copy_bwd(Emit *e, const Node *n, const char *const *din,
                   const char *const *dout, const char *const *in,
                   const char *const *out);
int shape_gather(Ctx *c, Graph *g, Node *n);
void emit_gather_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in);
void emit_gather_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out);
void range_gather(const Graph *g, const Node *n, IntRange *r);
/* GatherElements and OneHot (issue 25) */
int shape_gather_elements(Ctx *c, Graph *g, Node *n);
void emit_gather_elements_static(Emit *e, const Node *n);
void emit_gather_elements_fwd(Emit *e, const Node *n, const char *const *out,
                              const char *const *in);
void emit_gather_elements_bwd(Emit *e, const Node *n, const char *const *din,
                              const char *const *dout, const char *const *in,
                              const char *const *out);
void range_gather_elements(const Graph *g, const Node *n, IntRange *r);
int shape_one_hot(Ctx *c, Graph *g, Node *n);
void emit_one_hot_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in);
void range_one_hot(const Graph *g, const Node *n, IntRange *r);
long scratch_gather(const Graph *g, const Node *n, int backward);
int shape_unsqueeze(Ctx *c, Graph *g, Node *n);
int shape_squeeze(Ctx *c, Graph *g, Node *n);
int shape_concat(Ctx *c, Graph *g, Node *n);
int shape_split(Ctx *c, Graph *g, Node *n);
void emit_concat_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in);
void emit_concat_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out);
void emit_split_fwd(Emit *e, const Node *n, const char *const *out,
                    const char *const *in);
void emit_split_bwd(Emit *e, const Node *n, const char *const *din,
                    const char *const *dout, const char *const *in,
                    const char *const *out);
/* DepthToSpace, SpaceToDepth (issue 25) */
int shape_depth_to_space(Ctx *c, Graph *g, Node *n);
void emit_depth_to_space_fwd(Emit *e, const Node *n, const char *const *out,
                             const char *const *in);
void emit_depth_to_space_bwd(Emit *e, const Node *n, const char *const *din,
                             const char *const *dout, const char *const *in,
                             const char *const *out);
int shape_slice(Ctx *c, Graph *g, Node *n);
void emit_slice_static(Emit *e, const Node *n);
void emit_slice_fwd(Emit *e, const Node *n, const char *const *out,
                    const char *const *in);
void emit_slice_bwd(Emit *e, const Node *n, const char *const *din,
                    const char *const *dout, const char *const *in,
                    const char *const *out);

/* ---- ops_loss.c: SoftmaxCrossEntropyLoss --------------------------------------- */

int shape_sce(Ctx *c, Graph *g, Node *n);
void emit_sce_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in);
void emit_sce_bwd(Emit *e, const Node *n, const char *const *din,
                  const char *const *dout, const char *const *in,
                  const char *const *out);
double flops_sce(const Graph *g, const Node *n);
void range_sce(const Graph *g, const Node *n, IntRange *r);
/* NegativeLogLikelihoodLoss: shape_sce's shapes, sce's attributes and
 * labels (range_sce) */
void emit_nll_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in);
void emit_nll_bwd(Emit *e, const Node *n, const char *const *din,
                  const char *const *dout, const char *const *in,
                  const char *const *out);
double flops_nll(const Graph *g, const Node *n);

/* ---- ops_dropout.c: Dropout ---------------------------------------------------- */

int shape_dropout(Ctx *c, Graph *g, Node *n);
void emit_dropout_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in);
void emit_dropout_bwd(Emit *e, const Node *n, const char *const *din,
                      const char *const *dout, const char *const *in,
                      const char *const *out);
double flops_dropout(const Graph *g, const Node *n);

/* ---- ops_conv.c: Conv and the window of every Conv and pool -------------------- */

int shape_window(Ctx *c, Graph *g, Node *n);
void emit_window_static(Emit *e, const Node *n);
/* The node's window, once shapes.c has accepted it. */
rt_window window_of(const Graph *g, const Node *n);
long scratch_conv(const Graph *g, const Node *n, int backward);
double flops_conv(const Graph *g, const Node *n);
void emit_conv_fwd(Emit *e, const Node *n, const char *const *out,
                   const char *const *in);
void emit_conv_bwd(Emit *e, const Node *n, const char *const *din,
                   const char *const *dout, const char *const *in,
                   const char *const *out);

/* ---- ops_pool.c: the pools ----------------------------------------------------- */

double flops_pool(const Graph *g, const Node *n);
/* MaxPool's compact form: each window's winning tap, in
 * rt_maxpool_index_width bytes. */
long compact_index(const Graph *g, const Node *n);
/* GlobalMaxPool's: each plane's winner, in rt_global_maxpool_index_width
 * bytes. */
long compact_plane_index(const Graph *g, const Node *n);
void emit_pool_fwd(Emit *e, const Node *n, const char *const *out,
                   const char *const *in);
void emit_pool_bwd(Emit *e, const Node *n, const char *const *din,
                   const char *const *dout, const char *const *in,
                   const char *const *out);
int shape_global_pool(Ctx *c, Graph *g, Node *n);
void emit_global_pool_fwd(Emit *e, const Node *n,
                          const char *const *out, const char *const *in);
void emit_global_pool_bwd(Emit *e, const Node *n,
                          const char *const *din,
                          const char *const *dout,
                          const char *const *in, const char *const *out);

/* ---- ops_pad.c: Pad ------------------------------------------------------------ */

extern const AttrSpec pad_attrs[];
int shape_pad(Ctx *c, Graph *g, Node *n);
void emit_pad_static(Emit *e, const Node *n);
void emit_pad_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in);
void emit_pad_bwd(Emit *e, const Node *n, const char *const *din,
                  const char *const *dout, const char *const *in,
                  const char *const *out);

/* ---- ops_attention.c: Attention ------------------------------------------------ */

int shape_attention(Ctx *c, Graph *g, Node *n);
void emit_attention_fwd(Emit *e, const Node *n, const char *const *out,
                        const char *const *in);
void emit_attention_bwd(Emit *e, const Node *n, const char *const *din,
                        const char *const *dout,
                        const char *const *in, const char *const *out);
long scratch_attention(const Graph *g, const Node *n, int backward);
double flops_attention(const Graph *g, const Node *n);

/* ---- ops_conv_transpose.c: ConvTranspose (issue 25) ---------------------------- */

int shape_conv_transpose(Ctx *c, Graph *g, Node *n);
void emit_conv_transpose_static(Emit *e, const Node *n);
double flops_conv_transpose(const Graph *g, const Node *n);
void emit_conv_transpose_fwd(Emit *e, const Node *n, const char *const *out,
                             const char *const *in);
void emit_conv_transpose_bwd(Emit *e, const Node *n, const char *const *din,
                             const char *const *dout, const char *const *in,
                             const char *const *out);

/* ---- ops_resize.c: Resize (issue 25) ------------------------------------------- */

int shape_resize(Ctx *c, Graph *g, Node *n);
void emit_resize_static(Emit *e, const Node *n);
double flops_resize(const Graph *g, const Node *n);
void emit_resize_fwd(Emit *e, const Node *n, const char *const *out,
                     const char *const *in);
void emit_resize_bwd(Emit *e, const Node *n, const char *const *din,
                     const char *const *dout, const char *const *in,
                     const char *const *out);
/* ---- ops_integer.c: Cast, the comparisons and logical ops (issue 25) ----------- */

int shape_cast(Ctx *c, Graph *g, Node *n);
void emit_cast_fwd(Emit *e, const Node *n, const char *const *out,
                   const char *const *in);
int shape_compare(Ctx *c, Graph *g, Node *n);
void emit_compare_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in);
void emit_not_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in);
void range_any(const Graph *g, const Node *n, IntRange *r);

#endif
