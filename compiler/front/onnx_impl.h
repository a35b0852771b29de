/*
 * onnx_impl.h: what the ONNX front end's files (onnx.c, onnx_eval.c,
 * onnx_lower.c, onnx_rewrite.c, onnx_rnn.c, onnx_write.c) share. Nothing outside them includes it: the rest of the
 * compiler sees onnx_import() in remat.h and the XML it returns.
 */
#ifndef ONNX_IMPL_H
#define ONNX_IMPL_H

#include "../remat.h"
#include "onnx.pb-c.h"

/* The newest opset of the default domain whose op definitions the
 * importer follows (ONNX 1.13's); a model importing a newer one is
 * refused rather than read by older definitions. */
#define ONNX_MAX_OPSET 18

typedef enum { DT_F32, DT_I64, DT_BOOL } DType;  /* bool held as int64 0/1 */

/* One ONNX value: a graph input, an initializer or a node output. */
typedef struct {
    const char *name;
    DType dt;
    int shaped;             /* rank and dims are known */
    int rank;
    long dims[MAX_RANK];
    long numel;
    int known;              /* a constant: f (float32) or i holds it */
    float *f;
    int64_t *i;
    int init, graph_input, is_output;
    int producer;           /* ONNX node index, -1 */
    int readers;
    int varying;            /* depends on a graph input or a parameter */
    int grad;               /* the loss depends on it differentiably */
    int trainable;          /* a float initializer the gradient reaches */
    int tensor;             /* its IR tensor, -1 until made */
    int int_tensor;         /* a bool constant's int64 twin (0/1), -1 until
                             * a row taking int64 reads it (tensor_read) */
    int transposed_of;      /* a Transpose(W) kept for a MatMul: W, or -1 */
    const char *const_name; /* the name a folded constant takes as a param */
    struct RnnStack *stack; /* onnx_rnn.c: Y as its steps, not yet whole */
} Val;

typedef struct {
    const Onnx__NodeProto *p;
    const char *name, *op, *what;   /* what: "node 'n' (Op)" for messages */
    int nin, nout;
    int *in, *out;          /* value indices, -1 for an optional one left out */
    int done;               /* folded, or absorbed by a rewrite */
    /* a rewrite's Attention: its attributes (p is NULL then) */
    int causal;
    float scale;
    /* and its mask from a computed Where condition: 1 + the condition's
     * value (0: none), whether true keeps a score (cond_keep), the fill */
    int cond_mask, cond_keep;
    float cond_fill;
    int mask_late;          /* in[3] a mask attention_mask_input checks */
    const char *approximate;   /* a rewrite's Gelu: "tanh", or NULL */
    float epsilon;             /* a rewrite's LayerNormalization */
    long num_groups;           /* a rewrite's GroupNormalization */
    /* a zero Pad folded into this Conv or AveragePool (issue 25): added
     * to its pads (begins, then ends, spatial axes only) when lowered;
     * an AveragePool then counts the padding (count_include_pad 1) */
    int nfold_pads;
    long fold_pads[2 * MAX_RANK];
} ONode;

typedef struct {
    Ctx *c;
    const char *file, *dir, *weights_dir;
    const ImportOptions *opt;
    Onnx__ModelProto *model;
    long opset;
    Val *v;
    int nv, vcap;
    int *slots;
    size_t cap;
    ONode *nodes;
    int nn;
    int *outputs, noutputs;
    int loss;
    Graph *g;               /* the IR built for shape inference */
    NameSet tensor_names, node_names;   /* the IR's, made valid and unique */
    NameSet weight_files;   /* the .npy names under weights_dir */
    int tcap, ncap;
    Buf log;                /* folded and rewritten, for `remat import` */
    int nfolded, nrewritten;
    const char *fold_ops[64];
    int fold_counts[64];
    int nfold_ops;
} Im;

int im_find(const Im *m, const char *name);
int im_new_val(Im *m, const char *name, const char *what);
int dtype_of(int onnx_type);
const char *onnx_dtype_name(int t);
int val_set_shape(Im *m, Val *x, int rank, const int64_t *dims,
                  const char *what);
void val_alloc(Im *m, Val *x);
int tensor_values(Im *m, const Onnx__TensorProto *t, Val *x);
int const_from_tensor(Im *m, const Onnx__TensorProto *t, const char *name,
                      const char *what);
int onnx_input_differentiable(const ONode *o, int i);

/* onnx_eval.c: a node of constants evaluated; 1 if done, 0 if the op is
 * not one it folds, -1 on an error. */
int onnx_fold(Im *m, ONode *o);
const Onnx__AttributeProto *onnx_attr(const ONode *o, const char *name);
long onnx_attr_int(const ONode *o, const char *name, long dflt);
/* Element k of a constant as a double, or an int64. */
double val_get(const Val *x, long k);
int64_t val_geti(const Val *x, long k);

/* onnx_lower.c: the walk, and the IR builder the rewrites share. */
int onnx_lower(Im *m);
/* A new IR tensor named after raw (made valid and unique); its index. */
int new_tensor(Im *m, const char *raw, TensorKind kind);
/* Tensor t named after raw instead (its old name stays taken). */
void rename_tensor(Im *m, int t, const char *raw);
/* A new IR node named after raw, its attributes at their defaults. */
Node *new_node(Im *m, const char *raw, OpKind op);
/* A new output of n named after raw; its tensor. */
int add_out(Im *m, Node *n, const char *raw);
void set_ints(Node *n, const char *name, const long *v, int count);
void set_int(Node *n, const char *name, long v);
/* Runs n's shape rule (errors name the ONNX node o). */
int finish_node(Im *m, Node *n, const ONode *o);
void shape_to_val(Val *v, const Tensor *t);
/* The IR tensor of value vi: made a parameter if it is a constant. */
int tensor_of(Im *m, int vi, const ONode *o);
int tensor_read(Im *m, int vi, const ONode *o, OpKind op, int i);
int lower_error(Im *m, const ONode *o, const char *what);
/* ONNX node o as one IR node of op (constant inputs become attributes). */
int lower_plain(Im *m, ONode *o, OpKind op);

/* onnx_rewrite.c: patterns and decompositions. The try_ and keep_ ones
 * return 1 when they matched (try_attention -1 on an error), 0 when not;
 * the lower_ ones lower o (0) or fail (-1). */
int node1(Im *m, const ONode *o, const char *name, OpKind op, const int *in,
          int nin, const char *out, Node **made);
int lower_layer_norm_stats(Im *m, ONode *o);
int lower_sce_log_prob(Im *m, ONode *o);
void rewrite_patterns(Im *m);
int keep_transposed(Im *m, ONode *o);
int lower_matmul_t(Im *m, ONode *o);
int lower_gather_const(Im *m, ONode *o);
/* onnx_rewrite.c's helpers, shared with onnx_attention.c: a scalar
 * constant as a non-trainable parameter (its tensor); whether value v is
 * a known scalar constant within tol of want (an infinity exactly). */
int scalar_param(Im *m, const char *name, float v);
int is_const_scalar(const Im *m, int v, double want, double tol);
/* The one node of op reading value v, if exactly one does and it is not a
 * graph output; NULL otherwise. */
ONode *only_reader(Im *m, int v, const char *op);
void log_rewrite(Im *m, const char *what, const ONode *o);
/* onnx_attention.c: attention patterns as one Attention node */
int try_attention(Im *m, ONode *tr);
int try_einsum_attention(Im *m, ONode *o);
int attention_mask_input(Im *m, ONode *o);
int lower_trilu(Im *m, ONode *o);
/* Einsum as ReduceSum, Transpose, Reshape and MatMul (issue 25) */
int lower_einsum(Im *m, ONode *o);
/* o's pads and count_include_pad with a folded Pad's added (issue 25) */
int apply_fold_pads(Im *m, const ONode *o, Node *n);

/* onnx_rnn.c: LSTM, GRU and RNN unrolled over their sequence, one block
 * per time step, and a Squeeze of their Y; 1 when it lowered o, -1 on an
 * error, 0 when o is another op (whose inputs it then made whole). */
int lower_rnn(Im *m, ONode *o);
/* onnx_lower.c: room for `nodes` more IR nodes and tensors (the arrays
 * move: hold no Node or Tensor pointer across it). */
int im_reserve(Im *m, int nodes);

/* onnx_write.c */
int onnx_write(Im *m, const char *model_stem, Imported *out);

#endif
