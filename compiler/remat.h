/*
 * remat.h: the contract between the compiler's stages. First the data
 * structures every stage reads and adds to, then what each file exports,
 * both in pipeline order:
 *
 *   front/ (XML parse.c, ONNX onnx*.c) -> IR -> middle/shapes -> autodiff
 *     -> remat (policy, cost; solver/ within a budget) -> schedule -> plan
 *     -> back/emit (and the reports)
 *
 * with main.c, pareto.c and driver.c at the top, chaining the stages, and
 * util.c and the op table (ops/) below everything. Files call down, never
 * back up: the front ends, the back end and the solver use the middle
 * stages and what is below them, never each other or the driver
 * (scripts/check_circles.py checks it on the objects; docs/layout.md).
 * A family's own helpers live in its private header (front/onnx_impl.h,
 * ops/ops.h, middle/middle.h, solver/solver.h, back/back.h); everything
 * else in a file is static. Every stage reads the IR the one before left
 * and adds one thing. Errors are values: a stage that fails records one
 * message in ctx->err and returns -1; only main.c prints it.
 */
#ifndef REMAT_H
#define REMAT_H

#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* The one place the version is defined. 0.x: the command line, the graph
 * format's optional parts and the generated code's API (NAME_ functions,
 * rt_model) may still change between versions; 1.0 will say they are kept.
 * It goes into every generated file (emit.c), so a firmware build knows
 * what wrote its code: a new version rewrites generated/ (make generated). */
#define REMAT_VERSION "0.1.0"

#define MAX_RANK 6
#define MAX_IO 8
#define MAX_ATTRS 8
#define MAX_INTS 12     /* 2 * MAX_RANK: Pad's begin and end for every axis */
#define MAX_NUMEL (1L << 28)    /* 1 GiB of floats: kernels index with int */
#define MAX_FILE_BYTES ((size_t)32 << 20)   /* graph and policy files */

/* ==== The data structures, in pipeline order ============================== */

/* ---- util.c: context, arena allocation, errors, strings ------------------------ */

typedef struct Chunk Chunk;
typedef struct Defer Defer;

typedef struct {
    Chunk *chunks;          /* every allocation of one compilation */
    Defer *defers;          /* what ctx_free runs first (ctx_defer) */
    char err[1024];         /* the one error message, if any */
    int progress;           /* 1: show progress (main: stderr is a terminal) */
    int progress_len;       /* characters of the progress line shown */
} Ctx;

/* A growing text buffer: the emitter and the reports write through it. */
typedef struct {
    Ctx *ctx;
    char *data;
    size_t len, cap;
} Buf;

/* A binary heap of ints; `before(ctx, a, b)` says a comes out first. */
typedef struct {
    int *v;
    int n;
    int (*before)(const void *ctx, int a, int b);
    const void *ctx;
} Heap;

/* ---- ops/ops.c: the op table --------------------------------------------------- */

typedef enum {
    OP_GEMM,
    OP_MATMUL,
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_RELU,
    OP_GELU,
    OP_TANH,
    OP_SIGMOID,
    OP_REDUCE_MEAN,
    OP_REDUCE_SUM,
    OP_EXP,
    OP_LOG,
    OP_SQRT,
    OP_NEG,
    OP_SOFTMAX,
    OP_LAYER_NORM,
    OP_TRANSPOSE,
    OP_RESHAPE,
    OP_FLATTEN,
    OP_CONV,
    OP_MAX_POOL,
    OP_AVERAGE_POOL,
    OP_GLOBAL_AVERAGE_POOL,
    OP_BATCH_NORM,
    OP_ATTENTION,
    OP_GATHER,
    OP_SOFTMAX_CROSS_ENTROPY,
    OP_DROPOUT,
    OP_ERF,
    OP_RECIPROCAL,
    OP_POW,
    OP_WHERE,
    OP_LOG_SOFTMAX,
    OP_EXPAND,
    /* structural ops */
    OP_IDENTITY,
    OP_UNSQUEEZE,
    OP_SQUEEZE,
    OP_CONCAT,
    OP_SPLIT,
    OP_SLICE,
    /* torch.nn's activations (ops_unary.c) */
    OP_LEAKY_RELU,
    OP_HARD_SWISH,
    OP_HARD_SIGMOID,
    OP_CLIP,
    OP_ELU,
    OP_SOFTPLUS,
    OP_ABS,
    OP_SELU,
    OP_CELU,
    OP_SOFTSIGN,
    OP_MISH,
    OP_SIN,
    OP_COS,
    /* Max, Min, PRelu (ops_binary.c); ReduceMax, ReduceMin (ops_reduce.c) */
    OP_MAX,
    OP_MIN,
    OP_PRELU,
    OP_REDUCE_MAX,
    OP_REDUCE_MIN,
    /* Pad (ops_pad.c), GroupNormalization and InstanceNormalization
     * (ops_norm.c): issue 25 */
    OP_PAD,
    OP_GROUP_NORM,
    OP_INSTANCE_NORM,
    /* loss family (ops_loss.c): NegativeLogLikelihoodLoss */
    OP_NLL_LOSS,
    /* ConvTranspose and Resize (ops_conv_transpose.c, ops_resize.c) */
    OP_CONV_TRANSPOSE,
    OP_RESIZE,
    /* convolution and pooling in 1-3 spatial dims (ops_pool.c) */
    OP_GLOBAL_MAX_POOL,
    /* int64 and bool tensors (ops_integer.c, issue 25) */
    OP_CAST,
    OP_EQUAL,
    OP_LESS,
    OP_GREATER,
    OP_LESS_OR_EQUAL,
    OP_GREATER_OR_EQUAL,
    OP_NOT,
    OP_AND,
    OP_OR,
    OP_XOR,
    /* ArgMax and ArgMin (ops_reduce.c, issue 25): int64 indices along one
     * axis, no gradient */
    OP_ARGMAX,
    OP_ARGMIN,
    /* ops users meet that were refused (issue 25, newops1): GatherElements
     * and OneHot (ops_structural.c), CumSum (ops_reduce.c), Tile
     * (ops_binary.c, beside Expand, whose kernels it runs) */
    OP_GATHER_ELEMENTS,
    OP_ONE_HOT,
    OP_CUMSUM,
    OP_TILE,
    /* ops users meet (issue 25, newops2): ReduceL1, ReduceL2,
     * ReduceSumSquare, ReduceLogSumExp (ops_reduce.c), Sign (ops_unary.c),
     * DepthToSpace, SpaceToDepth (ops_structural.c) */
    OP_REDUCE_L1,
    OP_REDUCE_L2,
    OP_REDUCE_SUM_SQUARE,
    OP_REDUCE_LOG_SUM_EXP,
    OP_SIGN,
    OP_DEPTH_TO_SPACE,
    OP_SPACE_TO_DEPTH,
    /* int64 arithmetic (issue 25, boolconst): Mod (ops_binary.c), of two
     * int64 tensors (fmod 0 or 1) or of two float32 ones (fmod 1) */
    OP_MOD,
    OP_COUNT
} OpKind;

typedef enum {
    CAT_MATMUL,
    CAT_CONV,
    CAT_ATTENTION,
    CAT_POINTWISE,
    CAT_REDUCTION,
    CAT_NORMALIZATION,
    CAT_SHAPE,
    CAT_RANDOM,
    CAT_LOSS,
    CAT_COUNT
} Category;

typedef enum { ATTR_INT, ATTR_FLOAT, ATTR_INTS, ATTR_STRING } AttrType;

typedef struct {
    int set;                /* given in the XML (else the default) */
    long i;
    float f;
    int nints;
    long ints[MAX_INTS];
    const char *s;
} Attr;

typedef struct {
    const char *name;
    AttrType type;
    long i;                 /* defaults */
    float f;
    const char *s;
    const char *const *choices;  /* allowed strings, NULL-terminated */
    int flag;               /* an int that must be 0 or 1 (Gemm's transA) */
} AttrSpec;

typedef struct Graph Graph;
typedef struct Node Node;
typedef struct Emit Emit;
typedef struct Compiled Compiled;

/* Bits of a backward-needs mask: which of the node's inputs and outputs the
 * gradient of one input reads. */
#define NEED_IN(i) (1u << (i))
#define NEED_OUT(i) (1u << (8 + (i)))

/* The int64 values an op's int input accepts: [lo, hi), and ignore too when
 * has_ignore (SoftmaxCrossEntropyLoss's and NegativeLogLikelihoodLoss's
 * ignore_index: labels are [0, C) and the ignore index, which may lie
 * anywhere, -100 usually; -50 beside it is no label). */
typedef struct {
    long lo, hi;
    int has_ignore;
    long ignore;
} IntRange;

typedef struct {
    const char *name;       /* ONNX op type */
    const char *kernel;     /* runtime kernel family: rt_<kernel>_forward */
    int min_in, max_in, nout;
    Category cat;
    const AttrSpec *attrs;  /* NULL-terminated by name */
    /* Fills the node's output shapes from its inputs; -1 with ctx error. */
    int (*shape)(Ctx *c, Graph *g, Node *n);
    /* Forward cost in floating-point operations. */
    double (*flops)(const Graph *g, const Node *n);
    /* needs[i]: what d(input i) reads, NEED_IN/NEED_OUT bits. */
    unsigned needs[MAX_IO];
    /* Writes the forward call: out[]/in[] are C expressions. */
    void (*emit_forward)(Emit *e, const Node *n, const char *const *out,
                         const char *const *in);
    /* Writes the backward call: din[i] is NULL where no gradient is wanted;
     * in[]/out[] are NULL where the backward does not read them. */
    void (*emit_backward)(Emit *e, const Node *n, const char *const *din,
                          const char *const *dout, const char *const *in,
                          const char *const *out);
    /* Writes file-scope data the calls refer to (broadcast maps), or NULL. */
    void (*emit_static)(Emit *e, const Node *n);
    /* Floats of scratch memory the forward (backward = 0) or backward call
     * needs for its own use (im2col columns, a row of probabilities), or
     * NULL for none. The plan gives it arena space for that statement only;
     * the emitters find it in Emit.scratch. */
    long (*scratch)(const Graph *g, const Node *n, int backward);
    /* Bit i: input i is int64 (indices, labels); every other is float32. */
    unsigned int_inputs;
    /* The int64 values the node's int input accepts: the trainer draws and
     * checks a graph's int64 inputs against them. */
    void (*int_range)(const Graph *g, const Node *n, IntRange *r);
    /* 1: output 0 is a view of input 0, the same floats in the same order
     * (Reshape, Flatten). It gets no buffer of its own: the schedule makes
     * its value share input 0's, the emitter names a pointer instead of
     * calling emit_forward (which may be NULL), and its gradient shares
     * input 0's where that is correct (schedule.c). An alias row passes
     * an int64 input on: its output is int64 too (shapes.c). */
    int alias;
    /* 0: exactly nout outputs; else from min_out to nout (Split). */
    int min_out;
    /* Bit i: the train step writes input i in place (BatchNormalization's
     * running statistics). Such an input must be a trainable="false"
     * parameter that no other node reads (shapes.c checks); train_step
     * gets a writable pointer to it, and the emitter writes it only where
     * Emit.update says so: in the node's one forward of the train step,
     * never in NAME_forward nor in a recompute. */
    unsigned updates;
    /* Bit i: input i gets no gradient even where it depends on a trainable
     * parameter (SoftmaxCrossEntropyLoss's class weights): autodiff neither
     * lets it make the outputs require a gradient nor asks the backward for
     * one, so the emitter's din[i] is always NULL. int64 inputs never have
     * one anyway (they are graph inputs or views of them). */
    unsigned no_grad;
    /* Bit i (within no_grad): input i may not depend on a trainable
     * parameter: its gradient is owed but not computed (Attention's
     * mask), so autodiff refuses such a graph with one line. */
    unsigned grad_refused;
    /* Bit i: the backward can write d(input i) instead of adding into it
     * (the runtime's _set twins), so the schedule skips zeroing an
     * activation's gradient whose first contribution this is; the emitter
     * then finds the bit in Emit.writes and must honor it (emit_unwritten
     * zeroes what a call cannot write). */
    unsigned bwd_writes;
    /* Bit i (within bwd_writes): the written d(input i) may be d(output
     * 0)'s own buffer, element i of one computed from element i of the
     * other alone (Relu, Gelu, Dropout, Add), when the two have one size
     * and d(output 0) has no reader after this call. */
    unsigned bwd_in_place;
    /* 1: the forward may write its output over input 0 (element i of y
     * from element i of x alone: Relu, Gelu, Dropout), which the schedule
     * does where input 0 is read by nothing after (schedule.c). */
    int fwd_in_place;
    /* 1: the forward's FLOPs run through rt_sgemm (Conv by im2col,
     * Attention's products), so cost.c prices them at the GEMM's rate. */
    int gemm_rate;
    /* 1: the forward draws a keep-mask from the step's seed with its
     * `ratio` attribute (Dropout): the generated NAME_dropouts table lists
     * the node, for the trainer's --dump of the masks. */
    int random_mask;
    /* Bit i: input i may be int64 (a bool is an int64 0 or 1) as well as
     * float32 (Slice, Concat, Transpose, Expand, the comparisons, Where's
     * condition); the emitter picks the kernel by the dtype. Such an input
     * never has a gradient. What the output is says int_out. */
    unsigned int_ok;
    /* The dtype of every output: INT_OUT_FLOAT (float32),
     * INT_OUT_PASS (int64 where input 0 is, and then every int_ok input
     * must be int64 too: Slice, Concat of int64), INT_OUT_BOOL (int64
     * always: the comparisons' and logical ops' 0/1, ArgMax's indices),
     * INT_OUT_SELECT (int64 where input 1 is, and then input 2 must be
     * too: Where's X and Y; input 0, the condition, is either). The
     * trainer's int64-input checks see through an INT_OUT_PASS row without
     * an int_range of its own to its readers (emit.c): a row that computes
     * with the values (int64 Add, Sub, Mul) gives their range itself. */
    int int_out;
    /* What the gradients of the wanted inputs read (want[i]: d(input i) is
     * wanted) where that depends on the node's attributes, or NULL: the
     * union of needs[] then (op_backward_needs). BatchNormalization in
     * eval mode reads the running statistics and not X for dX. */
    unsigned (*needs_of)(const Node *n, const int *want);
    /* One NEED_* bit: the operand whose compact form the row's backward can
     * read instead (Relu's output, LeakyRelu's and Clip's input: 1-bit
     * masks; MaxPool's input: each window's winning tap), written by the
     * node's own first forward; 0 for none. compact_bytes says its size, 0
     * where the node cannot (autodiff.c decides where it is used; the
     * emitters find it in Emit.compact). */
    unsigned compact;
    long (*compact_bytes)(const Graph *g, const Node *n);
    const char *compact_form;   /* what it is, for the report ("1-bit mask") */
    /* The `updates` inputs this node's train step writes where that depends
     * on its attributes, or NULL: `updates` then (node_updates).
     * BatchNormalization in eval mode writes nothing. */
    unsigned (*updates_of)(const Node *n);
    /* 1: the forward and backward are elementwise over the output's
     * elements when every float operand has the output's shape, their
     * calls taking the element count from Emit.count and the broadcast
     * map from map_ref (emit_text.c): a recompute of the node may then run
     * a chunk at a time inside such a node's backward, its output never
     * written whole (schedule.c's fuse_recomputes) */
    int chunked;
    /* 1: the backward computes each input's gradient by calls of its own
     * (a GEMM per operand), so it may run as two statements, each with
     * din[] NULL for the other's inputs, and give the same bits (the
     * schedule's remade recomputes) */
    int bwd_parts;
    /* 1: the backward can write the forward's output 0 as well, with the
     * forward's bits, from the work it does anyway (Gelu's Phi,
     * LayerNorm's moments), given every input (those its backward does not
     * read are passed where they are parameters); the emitter finds
     * where in Emit.remake */
    int bwd_remakes;
} OpInfo;

enum { INT_OUT_FLOAT, INT_OUT_PASS, INT_OUT_BOOL, INT_OUT_SELECT };

extern const OpInfo op_table[];
extern const char *const category_names[CAT_COUNT];

/* ---- front/onnx.c: an ONNX ModelProto as the format's XML ---------------------- */

/* An initializer's values, found by the path its XML names. */
typedef struct {
    const char *path, *name;
    const float *data;
    const int64_t *idata;   /* an int64 constant's values (data NULL) */
    long numel;
    int rank;
    long dims[MAX_RANK];
} Weight;

typedef struct {
    const char *xml_path;   /* where the XML goes: its weights go beside it */
    int blocks;             /* 1: derive blocks from repeated scopes */
} ImportOptions;

typedef struct {
    Buf xml;                /* the graph in the format's XML */
    Weight *weights;        /* every init="file" initializer's values */
    int nweights;
    Buf report;             /* what was folded and rewritten */
    Buf warnings;           /* export mismatches the import still takes,
                             * one line each ("warning: ...\n"); `remat
                             * import` prints them on stderr */
} Imported;

/* ---- the IR: tensors, nodes and the graph, which the front ends build ---------- */

typedef enum { T_INPUT, T_PARAM, T_ACT } TensorKind;
typedef enum { INIT_ZEROS, INIT_ONES, INIT_CONSTANT, INIT_UNIFORM, INIT_NORMAL,
               INIT_FILE } InitKind;

typedef struct {
    const char *name;
    const char *cname;      /* mangled, unique C identifier part */
    TensorKind kind;
    int line;
    int is_int;             /* int64 (else float32): an input of that dtype,
                             * an int64 constant (a T_PARAM with idata),
                             * or what the int64 rows make of them
                             * (shapes.c) */
    int rank;
    long dims[MAX_RANK];
    long numel;
    int producer;           /* node index, -1 for inputs and parameters */
    /* parameters */
    int trainable;
    InitKind init;
    float init_a, init_b;   /* value | low, high | mean, std */
    const char *path;
    float *data;            /* INIT_FILE: the values read at compile time */
    int64_t *idata;         /* an int64 constant's (is_int, trainable 0,
                             * INIT_FILE) values: not in the parameter
                             * buffer but a static array of the C file */
    /* set by shapes.c / autodiff.c */
    int nconsumers;
    int is_output, is_loss;
    int output_line;        /* of its <output> element */
    int not_loss;           /* an output marked loss="false" */
    int requires_grad;      /* depends on a trainable parameter */
    int has_grad;           /* requires_grad and the loss depends on it */
} Tensor;

typedef enum { REMAT_UNSET = -1, MUST_SAVE, PREFER_SAVE, MUST_RECOMPUTE,
               PREFER_RECOMPUTE } Decision;

struct Node {
    const char *name;
    const char *cname;
    int line;
    OpKind op;
    const OpInfo *row;      /* &op_table[op], set with op: an op family reads
                             * its node's row here, never op_table */
    int nin, nout;
    int in[MAX_IO], out[MAX_IO];
    Attr attrs[MAX_ATTRS];  /* in the order of the op's AttrSpec list */
    int block;              /* index into Graph.blocks, -1 outside */
    Decision remat;         /* the node's own `remat`, or REMAT_UNSET */
    int key;                /* its index in the file, kept when rewrites
                             * (fold.c, fuse.c) drop nodes before it: a
                             * Dropout's mask is drawn from it */
    /* set by autodiff.c, for node_has_backward and the two after it, which
     * every plan's schedule asks of every node */
    int has_backward;
    unsigned grad_inputs;   /* bit i: input i receives a gradient */
    unsigned backward_reads;    /* NEED_* bits */
    /* 1: the backward reads the row's compact form of its `compact`
     * operand, which backward_reads then leaves out (autodiff.c) */
    int compact;
};

typedef struct {
    const char *name;
    int line;
} Block;

struct Graph {
    const char *file;
    const char *name;
    Tensor *tensors;
    int ntensors;
    Node *nodes;
    int nnodes;
    Block *blocks;
    int nblocks;
    int *outputs;           /* tensor indices, in file order */
    int noutputs;
    int loss;               /* tensor index (-1 until found by shape, and
                               after it in a forward-only graph) */
    int line;               /* of <graph> */
    int *order;             /* node indices in topological order (shapes.c) */
    long conv_scratch;      /* bytes of im2col columns a Conv may hold at
                             * once (--conv-scratch; rt_window.col_cap); 0:
                             * no bound */
    /* --seed N of compile and build: init's seeded draws of frozen
     * parameters are made at compile time with it, so their values are
     * known and go to flash (ram.c's frozen_tensors, emit_params.c) */
    int has_seed;
    uint64_t seed;
};

/* ---- middle/policy.c: policies and their rules --------------------------------- */

typedef struct {
    int kind;               /* RULE_OP, RULE_CATEGORY, RULE_NODE, RULE_DEFAULT */
    const char *pattern;
    Decision decision;
    int line;
} Rule;

typedef struct {
    const char *name;       /* "none", "full", "sac", ... or the file's name */
    const char *file;       /* NULL for built-ins */
    Rule *rules;
    int nrules;
} Policy;

enum { RULE_OP, RULE_CATEGORY, RULE_NODE, RULE_DEFAULT };

/* ---- middle/cost.c: what a recompute costs, in time ---------------------------- */

/* How fast this machine runs the runtime's kernels (docs/cost-model.md). */
typedef struct {
    double gemm_flops_per_s;    /* the rows whose work runs rt_sgemm
                                 * (OpInfo.gemm_rate) */
    double other_flops_per_s;   /* every other op's FLOPs */
    double bytes_per_s;         /* inputs read plus outputs written */
} Rates;

#define PS_PER_S 1e12           /* costs are whole picoseconds */

/* ---- middle/remat.c: SAVE or RECOMPUTE for every needed forward tensor --------- */

/* KEEP_COMPACT: the backward reads only compact forms of the tensor
 * (Node.compact), which its readers' first forwards write and the arena
 * keeps to their backwards; the floats themselves are not kept. */
typedef enum { KEEP_NONE, KEEP_SAVE, KEEP_RECOMPUTE, KEEP_COMPACT } Keep;

/* Remat.rebuild: recomputed values live to their last reader (NONE), or
 * are forgotten after each backward (EACH), or after each backward unless
 * the next one reads them (NEXT: more live at once, less recompute), or as
 * NEXT but only once the backward leaves a block (BLOCK: a block's values
 * rebuilt once for all its backwards). */
enum { REBUILD_NONE, REBUILD_EACH, REBUILD_NEXT, REBUILD_BLOCK };

typedef struct {
    Keep *keep;             /* per tensor (activations only; else KEEP_NONE) */
    const char **why;       /* per tensor: the rule that decided it */
    Decision *decision;     /* per tensor: the decision that applied */
    /* Arena bytes the SAVE tensors hold for the backward, each buffer once:
     * a view (an alias op's output) holds its source's (remat.c). */
    size_t saved_bytes;
    /* of those, the compact forms' (Node.compact) this plan keeps; of
     * those, the ones every plan keeps (all but compact_free tensors') */
    size_t compact_bytes, compact_fixed;
    char *compact;          /* per tensor: some node keeps a compact form */
    /* per tensor, with remat_classify_budget: its compact forms are all its
     * producer's and it is free, so a plan may keep them (compact_size
     * bytes, no recompute) or rebuild them with the tensor in the backward
     * (no bytes); compact_rebuilt: this plan rebuilds them (KEEP_RECOMPUTE,
     * the recompute writes them, the first forward does not) */
    char *compact_free, *compact_rebuilt;
    double *compact_size;
    int compact_choice;     /* remat_classify_budget's: compact_free is set */
    /* remat_classify's, for every node output whether needed or not: */
    char *needed;           /* read by a backward (before any recompute) */
    char *free;             /* PREFER_*, or under a budget a structural
                             * save the policy does not must_save: a
                             * budget may turn it */
    char *boundary;         /* saved by structure (block edge, outside) */
    char *opened;           /* saved by structure, but free: a budget's
                             * (remat_classify_open) */
    Keep *wanted;           /* what structure or the policy asks */
    const char **rule;      /* and which rule asked it */
    const char **turned;    /* a free tensor's rule when a budget turns it */
    Decision *asked;
    char *scratch;          /* remat_apply's needed flags */
    int *storage;           /* per tensor: the buffer it is a view of, or itself */
    /* with a budget (solve.c) */
    int budgeted;
    double budget_bytes;    /* HUGE_VAL when only the arena is bounded */
    double max_arena;       /* 0: none */
    int proven;             /* the plan is proven optimal */
    int proven_kept;        /* not proven, but with max_arena it costs at
                             * most the least of the plans that keep every
                             * block boundary, which is proven */
    double floor;           /* not proven, with max_arena: no plan that
                             * fits costs less (picoseconds) */
    int forms_kept;         /* not proven, but the least of the plans that
                             * keep every compact form, which is proven
                             * (solve_compact.c) */
    int nfree;              /* free decisions among needed tensors */
    /* with max_arena, when no plan that recomputes each tensor once fits:
     * every recomputed tensor is rebuilt for each backward that reads it
     * and forgotten after (schedule.c), from the nearest kept tensor;
     * REBUILD_NEXT keeps one the next backward reads too, REBUILD_BLOCK
     * also every one while the backward stays in a block */
    int rebuild;
    /* with rebuild, NULL or per tensor: -1, or an index into g->order such
     * that a value of the tensor rebuilt for the backward of a node at or
     * before it is a checkpoint, kept to its last reader rather than
     * forgotten (revolve's rebuilt checkpoints: solve_arena.c) */
    const int *hold;
    /* how recompute is priced (cost.c): remat_classify sets the built-in
     * rates, a caller with others sets them after */
    const Rates *rates;
} Remat;

/* ---- solver/solve.c: the least recompute within a memory budget ---------------- */

/* A plan: its saved bytes (less the compact forms', Remat.compact_bytes,
 * which every plan keeps alike) and recompute cost (picoseconds at r->rates,
 * cost.c), and which free tensors it recomputes (per tensor, 1 =
 * recompute; the other free ones are saved). */
typedef struct {
    double bytes, cost;
    char *recompute;
} Plan;

/* Every optimal plan, bytes ascending and cost descending. */
typedef struct {
    Plan *plans;
    int n;
    int proven;             /* exact (no frontier was thinned) */
    const Node *overflow;   /* where the states outgrew their cap (n = 0) */
} Frontier;

#define MAX_FRONTIER_STATES 16384  /* per node; beyond, Frontier.overflow */

typedef enum { BUDGET_NONE, BUDGET_FRACTION, BUDGET_BYTES } BudgetKind;

/* The optimizer the trainer will use (its --optimizer, --momentum and
 * --fused): what state it keeps, whether a gradient buffer exists, and
 * which arena the step needs. The zero value is the trainer's default:
 * plain SGD (no state), gradients in their buffer. */
typedef struct {
    int adamw;              /* AdamW: two floats per trainable float */
    double momentum;        /* SGD: above 0, one float per trainable float */
    int fused;              /* the update inside the backward: no gradient
                             * buffer, the fused step's arena */
} Optim;

/* What a train step holds in RAM and what may stay in flash, in bytes
 * (middle/ram.c; docs/memory.md has the formula term by term). Every term
 * but the arena is fixed by the graph and the Optim. */
typedef struct {
    double params;          /* trainable parameters and the state a train
                             * step writes (BatchNorm's running statistics) */
    double optimizer;       /* the Optim's state */
    double grads;           /* the gradient buffer (0 when fused) */
    double io;              /* the step's float and int64 inputs, outputs */
    double arena;           /* the arena the step runs in */
    double flash;           /* frozen parameters and int64 constants */
} Ram;

typedef struct {
    BudgetKind kind;
    double value;           /* a fraction in [0, 1], or bytes */
    double max_arena;       /* bytes; 0: no bound */
    const Rates *rates;     /* how recompute is priced; NULL: built-in */
    double max_ram;         /* bytes (--max-ram); 0: no bound. The driver
                             * turns it into max_arena less the fixed terms */
    Optim optim;            /* the trainer's optimizer, for the RAM figures */
    int fused_arena;        /* 1: max_arena bounds the fused step's arena */
    double conv_scratch;    /* --conv-scratch bytes (Graph.conv_scratch),
                             * which compile_parsed gives the graph */
    int has_seed;           /* --seed N (Graph.has_seed and seed), likewise */
    uint64_t seed;
    int no_rebuild;         /* 1: a plan that rebuilds at each use is not
                             * tried (Remat.rebuild); --max-ram asks first
                             * with it, so that a smaller conv scratch wins
                             * over rebuilding */
    const char *name;       /* --name: the generated symbols' prefix
                             * (Graph.name); NULL: the model's own */
    int keep_compact;       /* 1: every compact form kept, as under an
                             * arena bound, even where max_arena is 0
                             * (--max-ram's plans, the driver's) */
} Budget;

/* ---- middle/schedule.c: one straight-line list of statements ------------------- */

typedef enum {
    S_FORWARD,              /* run node forward (first time, or a recompute) */
    S_OUTPUT,               /* copy graph output to the caller */
    S_SEED,                 /* d(loss) = 1 */
    S_ZERO,                 /* zero a gradient in the arena before it sums
                             * (an activation's; the fused step's
                             * parameters' too) */
    S_GRAD_VIEW,            /* d(view) named as d(its source): no work */
    S_BACKWARD,             /* run node backward */
    S_UPDATE                /* the fused step: the optimizer on a parameter
                             * whose gradient is final */
} StmtKind;

/* A value is one buffer in the arena, or a view of one: a tensor's forward
 * instance, a recomputed instance, or an activation's gradient. */
typedef enum { V_FWD, V_RECOMP, V_GRAD, V_SCRATCH, V_COMPACT } ValueKind;
typedef enum { VIEW_NONE, VIEW_VALUE, VIEW_CALLER } ViewKind;

typedef struct {
    int tensor;             /* -1 for a statement's scratch */
    ValueKind kind;
    int def, last;          /* statement indices: live on [def, last] */
    size_t bytes;
    size_t offset;          /* plan.c */
    /* A view (an alias op's output, or its gradient) has no buffer of its
     * own: it shares values[owner]'s (VIEW_VALUE; the owner is never itself
     * a view), or points into the caller's inputs, parameters or gradients
     * (VIEW_CALLER). Whatever reads a view keeps its owner live
     * (schedule.c); plan.c gives it the owner's offset. */
    ViewKind view;
    int owner;              /* VIEW_VALUE */
    int copy;               /* V_RECOMP: how many rebuilds of the tensor
                             * came before this one (Remat.rebuild) */
} Value;

typedef struct {
    StmtKind kind;
    int node;               /* S_FORWARD, S_BACKWARD */
    int tensor;             /* S_OUTPUT, S_SEED, S_ZERO, S_GRAD_VIEW */
    int recompute;
    int scratch;            /* S_FORWARD, S_BACKWARD: a value, or -1 */
    int out;                /* S_FORWARD: output 0's value (output o's is
                             * out + o); S_BACKWARD: the recomputed output
                             * 0 its call writes too (a remade recompute),
                             * or -1 */
    int compact;            /* the node's compact form the statement writes
                             * (S_FORWARD) or reads (S_BACKWARD), or -1 */
    /* S_BACKWARD: bit i, the call writes d(input i), its first
     * contribution; S_ZERO: 1 when that call writes the gradient, so
     * only its pointer is declared here */
    unsigned writes;
    /* S_BACKWARD of the train step (not fused): bit i, d(input i) is a
     * parameter's gradient in the caller's buffer and this its first
     * contribution, which the call writes unless the step accumulates */
    unsigned pwrites;
    /* a recompute fused into its one reader (schedule.c's
     * fuse_recomputes): S_FORWARD, the S_BACKWARD that runs it a chunk at
     * a time inside its loop (the recompute's own place emits nothing);
     * S_BACKWARD, that recompute; else -1 */
    int fuse;
    /* S_FORWARD, a recompute: its outputs are rebuilt checkpoints
     * (Remat.hold), kept to their last reader where the plan would forget
     * them after the backward that rebuilt them */
    int held;
    /* S_BACKWARD: bit i, the call computes d(input i) of the wanted ones,
     * the rest being another statement's (a row's bwd_parts); 0, all */
    unsigned part;
} Stmt;

typedef struct {
    Stmt *stmts;
    int nstmts;
    Value *values;
    int nvalues;
    int *fwd, *rec, *grad;  /* per tensor: value index or -1 */
    /* per node: its compact form's value (Node.compact; tensor is the one
     * it stands for), from its first forward (or, where the plan rebuilds
     * it, the last recompute that wrote it) to its backward, or -1 */
    int *compact;
    size_t arena_bytes;     /* plan.c */
    size_t peak_live_bytes; /* plan.c: the most bytes live at one statement */
    int forward_execs, recompute_execs;
    double recompute_flops;
    double recompute_cost;  /* picoseconds at the Remat's rates (cost.c) */
    double forward_flops;   /* of the forward's executions (not recomputes) */
    int fused_recomputes;   /* recomputes run inside their reader's loop */
    int remade_recomputes;  /* recomputes written by their producer's own
                             * backward (Stmt.out of an S_BACKWARD) */
} Schedule;

/* The floats a fused recompute computes at a time (Stmt.fuse): 4 KB, a
 * fraction of a microcontroller's RAM and of a host core's L1 cache. */
#define FUSE_CHUNK 1024

/* Forward only (train = 0), the train step (1: forward, loss, backward;
 * parameter gradients in the caller's buffer) or the fused train step (2:
 * each parameter's gradient in the arena from its first contribution to
 * its S_UPDATE, placed after the gradient is final and the parameter's last
 * read). */
enum { SCHED_FORWARD, SCHED_TRAIN, SCHED_FUSED };

/* ---- middle/plan.c: arena offsets from liveness -------------------------------- */

#define ARENA_ALIGN 64

/* ---- driver.c: the stages chained ---------------------------------------------- */

struct Compiled {
    const Graph *g;
    const Policy *policy;
    const Remat *remat;
    /* train is fwd itself when the graph is forward only (no loss): the
     * summary figures then describe the forward, and no train step is
     * emitted. */
    const Schedule *fwd, *train;
    /* the fused train step's (optimizer inside the backward); NULL when
     * forward only */
    const Schedule *fused;
    Optim optim;            /* the trainer's optimizer (ram_of) */
    double max_ram;         /* --max-ram's bytes, 0 without */
};

/* ---- back/emit.c: NAME.c and NAME.h -------------------------------------------- */

struct Emit {
    Buf *out;
    Ctx *ctx;
    const Graph *g;
    int indent;
    const size_t *offset;   /* per tensor: its place in the caller's buffer */
    const char *scratch;    /* the current call's scratch, or NULL */
    int train;              /* writing train_step (Dropout drops), not forward */
    int weights_file;       /* initial values in NAME.weights, not the code */
    int update;             /* this call updates the row's `updates` inputs:
                             * train_step's forward, not a recompute */
    const size_t *grad_offset;  /* per trainable parameter: its place in the
                                 * gradient buffer (and optimizer state) */
    int fused;              /* writing train_step_fused: parameter gradients
                             * are arena values, S_UPDATE steps them */
    size_t trainable;       /* floats of the trainable parameters: where
                             * AdamW's second state half starts */
    unsigned writes;        /* the backward call's Stmt.writes */
    unsigned pwrites;       /* and its Stmt.pwrites */
    /* writing the train schedule: per statement, the first trainable
     * parameter whose gradient is final after it (ready_next chains the
     * rest, in tensor order), -1 for none; NULL elsewhere */
    const int *ready_first, *ready_next;
    /* per tensor, 1 for a frozen parameter whose values are known at
     * compile time: it lives in the C file's static const NAME_frozen[]
     * (at offset[t] there), not in params (back/emit_params.c) */
    const char *frozen;
    /* the current call's compact form (Node.compact) as an unsigned char
     * pointer: the forward writes it (then NULL in a recompute and in
     * NAME_forward, which write the floats alone), the backward reads it */
    const char *compact;
    /* per tensor, the recomputed value the backward reads now: a plan
     * that rebuilds (Remat.rebuild) makes several, one after another */
    int *rec;
    /* a recompute fused into its reader's loop (Stmt.fuse): the chunk's
     * element count ("m"), which a chunked row's emitters print instead
     * of the tensor's (elems), and every operand a pointer into it;
     * NULL elsewhere */
    const char *count;
    /* the output a bwd_remakes row's backward writes too, or NULL */
    const char *remake;
};

/* ---- back/report.c: schedule and diff reports ---------------------------------- */

typedef struct {
    double saved_bytes, arena_bytes, recompute_flops, forward_flops,
        forward_execs, recompute_execs, saved_tensors, recomputed_tensors;
    /* the gradient buffer's bytes, and the arena of the fused train step,
     * which needs no gradient buffer (0 and 0 when forward only) */
    double grad_bytes, fused_arena_bytes;
    /* the most bytes live at one statement of the step whose arena
     * arena_bytes is: no plan of that schedule fits in less */
    double peak_live_bytes;
    /* the recomputes' estimated time (cost.c), seconds */
    double recompute_seconds;
    /* RAM and flash for the Compiled's optimizer (ram_of): the total and
     * its terms */
    double ram_bytes, flash_bytes, ram_params_bytes, ram_optimizer_bytes,
        ram_gradient_bytes, ram_arena_bytes, ram_io_bytes;
    /* of saved_bytes, the compact forms' (Remat.compact_bytes), and how
     * many nodes keep one */
    double compact_bytes, compact_forms;
} Summary;

/* ---- back/build.c: a trainer executable from a compiled model ------------------ */

typedef struct {
    int no_blas;            /* the portable GEMM instead of OpenBLAS */
    const char *cflags;     /* more C compiler flags, split on spaces; NULL */
    int mpi;                /* the data-parallel trainer: mpicc, -DRT_MPI and
                             * runtime/trainer_mpi.c */
    int fma;                /* -ffp-contract=fast: a * b + c may be one
                             * fused multiply-add, for speed, with bits
                             * that differ between machines; else off */
} BuildOptions;

/* ==== What each stage exports, in pipeline order ============================ */

/* ---- util.c: context, arena allocation, errors, strings ------------------------ */

void ctx_init(Ctx *c);
void ctx_free(Ctx *c);
/* ctx_free, but the current chunk is kept, zeroed, for what comes next: a
 * loop that allocates and frees as much each round then neither mallocs
 * nor clears a whole chunk for each (pareto.c's rows). */
void ctx_reset(Ctx *c);
/* Runs fn(p) when the context is freed (a library's own allocations). */
void ctx_defer(Ctx *c, void (*fn)(void *), void *p);
void *ctx_alloc(Ctx *c, size_t size);               /* zeroed, never NULL */
char *ctx_strdup(Ctx *c, const char *s);
char *ctx_printf(Ctx *c, const char *fmt, ...);
/* Records "file:line: message" (line 0: "file: message"); returns -1. */
int ctx_error(Ctx *c, const char *file, int line, const char *fmt, ...);
/* What a long step is doing, as one line on stderr rewritten in place,
 * when c->progress is set; progress_clear blanks it (before anything else
 * is printed, and at the end). */
void progress(Ctx *c, const char *fmt, ...);
void progress_clear(Ctx *c);

void buf_init(Buf *b, Ctx *c);
void buf_printf(Buf *b, const char *fmt, ...);
void buf_vprintf(Buf *b, const char *fmt, va_list ap);
/* Writes the buffer to path through a temporary file and a rename, so the
 * target is either untouched or complete. */
int buf_write_file(Buf *b, const char *path);
int write_file_atomic(Ctx *c, const char *path, const char *data, size_t len);
/* Two files replaced together (see util.c). */
int write_pair_atomic(Ctx *c, const char *p1, Buf *b1, const char *p2, Buf *b2);
/* s as a JSON string, quoted and escaped (control characters as \u00XX). */
void buf_json_string(Buf *b, const char *s);
/* A JSON number: an integer as digits, else the shortest "%.Ng" that reads
 * back to v; null for a NaN or an infinity, which JSON cannot write. */
void buf_json_number(Buf *b, double v);
/* "%.9g" plus what makes it a float literal: reads back to the same float;
 * an infinity as a constant expression, "(-1.0f / 0.0f)". */
const char *fmt_float(Ctx *c, float v);
int glob_match(const char *pattern, const char *s);
/* A set of strings (open addressing; the strings are not copied): the
 * ONNX front end's IR names and weight files. The zero value is empty. */
typedef struct {
    const char **keys;
    size_t cap, n;
} NameSet;
int nameset_has(const NameSet *t, const char *s);
void nameset_add(Ctx *c, NameSet *t, const char *s);
/* Reads a whole file into memory, NUL-terminated. One past MAX_FILE_BYTES
 * is refused as soon as that much is read, unless big_ok (may be NULL)
 * accepts what was read so far; none is read past max. */
int read_whole_file(Ctx *c, const char *file, size_t max,
                    int (*big_ok)(const char *data, size_t len),
                    char **data, size_t *len);
/* "file is larger than 32 MiB, ..." for file; returns -1. */
int file_too_big(Ctx *c, const char *file);
/* The folder of a file's path: "." for a bare name, "/" at the root. */
const char *path_dir(Ctx *c, const char *file);
/* The one candidate nearest to s within a typo's reach (case-blind: one
 * edit from 3 characters, two from 6), or NULL; for messages. */
const char *closest_name(const char *s, const char *const *cands, int n);
/* " (did you mean 'x'?)" when closest_name finds one, else "". */
const char *did_you_mean(Ctx *c, const char *s, const char *const *cands,
                         int n);

void heap_push(Heap *h, int x);
int heap_pop(Heap *h);

/* "32x256", "scalar" */
const char *shape_str(Ctx *c, const Tensor *t);
/* Per tensor, how many of g's nodes read it, plus 1000 when it is an
 * output; in *last (when not NULL) the last node reading it, -1 for none. */
int *graph_reader_counts(Ctx *c, const Graph *g, int **last);
/* The tensors and nodes marked 1 in dead_t and dead_n leave g, every
 * index renumbered (the rewrites of front/fold.c and middle/fuse.c). */
void graph_drop(Ctx *c, Graph *g, const char *dead_t, const char *dead_n);
/* An import's weights as .npy files at their paths beside xml_path. */
int write_weights(Ctx *c, const char *xml_path, const Imported *im);

/* ---- ops/ops.c: the op table --------------------------------------------------- */

int op_lookup(const char *name);                    /* -1 if unknown */
/* The needs mask of a node's backward, given which inputs want gradients. */
unsigned op_backward_needs(const Node *n, const int *want);
/* The NEED_IN bits of the inputs n's train step writes in place (the
 * row's `updates`, or what its updates_of says for these attributes). */
unsigned node_updates(const Node *n);

/* ops/node.c: an attribute by name (-1: the op has none of that name), and
 * a node's attribute through its row; t's rank, dims and numel. */
int attr_index(const OpInfo *op, const char *name);
/* A string attribute's allowed values for a message: "\"a\" or \"b\"". */
const char *attr_choices(Ctx *c, const AttrSpec *s);
long node_int(const Node *n, const char *name);
float node_float(const Node *n, const char *name);
const Attr *node_attr(const Node *n, const char *name);
void set_shape(Tensor *t, int rank, const long *dims);
/* t's bytes: numel floats, or int64s */
double tensor_bytes(const Tensor *t);
/* How many dimensions the runtime walks for Tile of x by repeats (one per
 * dimension of x, each >= 1; ops_binary.c): over MAX_RANK (the runtime's
 * RT_MAX_RANK), the shape rule refuses the node and the ONNX importer
 * splits it. */
int tile_walk(const Tensor *x, const long *repeats);
/* ONNX Slice's clamping along one dimension: the first index taken and
 * how many (ops_structural.c; the ONNX importer's folds use it too). */
void slice_axis(long dim, long start, long end, long step, long *first,
                long *count);
/* ops/emit_text.c: writes one line at the current indentation (the op
 * rows' emitters and back/emit.c write every line through it). */
void emit(Emit *e, const char *fmt, ...);

/* ---- front/onnx.c: an ONNX ModelProto as the format's XML ---------------------- */

/* Not XML: the first byte is not '<', a byte-order mark or white space. */
int onnx_is_model(const char *data, size_t len);
/* 0, or -1 with an error; 1 (the error set too) when the bytes are no
 * ModelProto and the file is not named .onnx: a caller may read them as
 * XML instead, so that a broken .xml gets the XML parser's message. */
int onnx_import(Ctx *c, const char *file, const char *data, size_t len,
                const ImportOptions *opt, Imported *out);

/* front/onnx_eval.c: the ONNX ops the importer evaluates at import (from
 * constants and static shapes) that the op table does not compute, in its
 * fold table's order, at most max; notes[k] is NULL, or how the importer
 * takes op k when an input is computed. Returns how many. */
int onnx_folded_ops(const char **names, const char **notes, int max);
#define MAX_FOLDED_OPS 64   /* room enough for every op the importer folds */
/* The ONNX ops the importer lowers into the op table's (onnx_rnn.c: LSTM,
 * GRU, RNN unrolled), with how[k] saying into what; how many (<= max). */
int onnx_lowered_ops(const char **names, const char **how, int max);

/* ---- front/parse.c: XML -> IR -------------------------------------------------- */

/* Parses an in-memory XML document named `file`. */
int parse_graph_memory(Ctx *c, const char *file, const char *data, size_t len,
                       Graph **out);
/* An imported graph: init="file" paths found in im's table take its values
 * instead of reading a file. */
int parse_graph_imported(Ctx *c, const char *file, const Imported *im,
                         Graph **out);
/* --freeze: every parameter whose name one of the globs (NULL-terminated,
 * or NULL for none) matches becomes non-trainable, as trainable="false"
 * in the file makes it: no gradient, no optimizer state. A glob matching
 * no parameter is an error naming it and the nearest names. Before shapes
 * and autodiff. */
int freeze_params(Ctx *c, Graph *g, const char *const *globs);
/* BatchNormalization in eval mode folded into the frozen Conv or Gemm
 * before it where every value involved is frozen and known at compile time
 * (front/fold.c); after freeze_params, before shapes. */
int fold_batch_norms(Ctx *c, Graph *g);
int tensor_lookup(const Graph *g, const char *name);    /* -1 if none */
/* The generated-symbol prefix (rt, map, win, ...) a model name would
 * clash with, or NULL. */
const char *model_name_clash(const char *name);
/* Policy files are XML too, read here: a policy file, or an in-memory
 * document named `file`. */
int parse_policy(Ctx *c, const char *file, Policy *out);
int parse_policy_memory(Ctx *c, const char *file, const char *data,
                        size_t len, Policy *out);

/* ---- middle/shapes.c: topological order and shape inference -------------------- */

int infer_shapes(Ctx *c, Graph *g);
/* Checks node n's input dtypes against its row (int_inputs, int_ok, alias)
 * and sets its outputs' is_int (int_out); -1 with the error. The ONNX
 * importer calls it as it makes each node. */
int node_dtypes(Ctx *c, Graph *g, const Node *n);
/* 1 when the graph has a loss, so a backward and a train step; 0 when it is
 * forward only (no output is the loss; see find_scalar_loss). */
int graph_trains(const Graph *g);
/* Floats of the trainable parameters: the gradient buffer's, one optimizer
 * state slot each. */
size_t trainable_floats(const Graph *g);

/* ---- middle/fuse.c: rewrites that need the shapes ------------------------------ */

/* After infer_shapes, before autodiff: an Attention between Reshape and
 * Transpose pairs reads and writes the projections' 3-D layout itself, the
 * pairs gone (so no transpose runs); a MatMul takes the vector the Add
 * after it added as its bias; shapes inferred again when anything
 * changed. */
int fuse_graph(Ctx *c, Graph *g);

/* ---- middle/ram.c: RAM and flash of a train step ------------------------------- */

/* The terms fixed by the graph and o (all but the arena, left 0); after
 * infer_shapes. */
void ram_fixed(const Graph *g, const Optim *o, Ram *r);
/* Per tensor, 1 where a node's row says the train step writes it in
 * place (running statistics: a parameter, shapes.c checks); one pass over
 * the nodes, so a graph of any size pays once. */
char *updated_tensors(Ctx *c, const Graph *g);
/* Per tensor, 1 for a parameter of a graph that trains that lives in
 * flash: a float no train step writes (not trainable, not updated in
 * place) whose values are known at compile time (a constant fill, data,
 * or a seeded draw with Graph.has_seed); the emitter puts exactly these
 * in NAME_frozen[] (emit_params.c). */
char *frozen_tensors(Ctx *c, const Graph *g);
/* The same with the arena of m's step for m->optim: the fused step's
 * when fused (at least the forward's), else the larger of the forward's
 * and the train step's. */
void ram_of(const Compiled *m, Ram *r);
/* params + optimizer + grads + io + arena */
double ram_total(const Ram *r);

/* ---- middle/autodiff.c: which tensors get gradients ---------------------------- */

/* Sets requires_grad and has_grad; a node's backward runs when
 * node_has_backward(). */
int autodiff(Ctx *c, Graph *g);
int node_has_backward(const Graph *g, const Node *n);
/* want[i] = input i receives a gradient */
void node_grad_inputs(const Graph *g, const Node *n, int *want);
/* The inputs/outputs (NEED_* bits) the node's backward reads. */
unsigned node_backward_reads(const Graph *g, const Node *n);
/* The tensors the node's backward reads, into t[0 .. 2 * MAX_IO): the
 * inputs, then the outputs, each in operand order (a tensor read as two
 * operands twice); returns how many. */
int node_backward_operands(const Graph *g, const Node *n, int *t);
/* 1 when the node's backward reads tensor t, as any operand. */
int node_backward_reads_tensor(const Graph *g, const Node *n, int t);
/* 1 when a backward of n reading `reads` (NEED_* bits: op_backward_needs
 * for some of its gradients) reads tensor t, as any operand. */
int needs_read_tensor(const Node *n, unsigned reads, int t);
/* The tensor a compact form of n's stands for (its row's `compact`
 * operand), or -1 where the row names none; n keeps one where n->compact. */
int compact_operand(const Node *n);

/* ---- middle/policy.c: policies and their rules --------------------------------- */

/* A built-in policy by name, or NULL. */
Policy *policy_builtin(Ctx *c, const char *name);
extern const char *const builtin_policies[];        /* NULL-terminated */
extern const char *const decision_names[4];         /* in Decision's order */
/* The same rules with MUST_SAVE turned PREFER_SAVE ("NAME-softened"). */
Policy *policy_soften(Ctx *c, const Policy *p);

/* ---- middle/cost.c: what a recompute costs, in time ---------------------------- */

/* The constants used where nothing was calibrated. */
const Rates *rates_builtin(void);
/* Picoseconds to run node n once at rt: FLOPs at the op's rate plus the
 * bytes it reads and writes; 0 for a view (cost.c). */
double node_cost(const Rates *rt, const Graph *g, const Node *n);
/* What rebuilding output o of n is charged: node_cost, or for a node of
 * several outputs (Split) that output's share of it (o < 0: the whole). */
double output_cost(const Rates *rt, const Graph *g, const Node *n, int o);
/* Where the rates file is: $REMAT_RATES, else
 * ${XDG_CONFIG_HOME:-$HOME/.config}/remat/rates; NULL when REMAT_RATES is
 * "builtin" (or no folder is known). */
const char *rates_path(Ctx *c);
/* The file's rates; -1 with "file:line: what is wrong" when malformed. */
int rates_read(Ctx *c, const char *file, Rates *rt);
/* rates_path's file, or the built-in rates where there is none (*from:
 * the path read, or "builtin"); -1 when the file is malformed. */
int rates_load(Ctx *c, Rates *rt, const char **from);
/* The file's text: a comment header, then `key value` lines. */
void rates_text(Buf *b, const Rates *rt);
/* Writes the file whole (temporary file and rename), its folder made. */
int rates_write(Ctx *c, const char *path, const Rates *rt);
/* Times the runtime's copy, Relu, Tanh and GEMM in this process. */
int rates_calibrate(Ctx *c, Rates *rt);

/* ---- middle/remat.c: SAVE or RECOMPUTE for every needed forward tensor --------- */

/* Classifies every tensor, then applies the policy's own decisions. */
int remat_decide(Ctx *c, const Graph *g, const Policy *p, Remat *r);
/* The two halves: classes and static needs; then the walk that keeps each
 * needed tensor, a free one as recompute[t] says (NULL: as asked). */
int remat_classify(Ctx *c, const Graph *g, const Policy *p, Remat *r);
/* The same with every save the structure asks (block boundaries, tensors
 * outside every block) free, as a budget sees them: a budget may recompute
 * a boundary from an earlier kept one (nested checkpointing). */
int remat_classify_open(Ctx *c, const Graph *g, const Policy *p, Remat *r);
/* Open, and a compact form a choice as well (Remat.compact_free): what a
 * saved-bytes budget and its frontier see. Not under an arena bound, whose
 * live-range bounds (solve_live_at) take compact forms as kept. */
int remat_classify_budget(Ctx *c, const Graph *g, const Policy *p, Remat *r);
void remat_apply(const Graph *g, Remat *r, const char *recompute);

/* ---- solver/solve.c: the least recompute within a memory budget ---------------- */

/* "0.4" (a fraction: 0 is full checkpointing's saved bytes, 1 none's),
 * "3MiB", "750KiB", "123456" (bytes). -1 with a message naming opt. */
int budget_parse(Ctx *c, const char *opt, const char *text, int fraction_ok,
                 BudgetKind *kind, double *value);
/* The saved bytes of fractions 0 and 1: full's and none's, the smaller
 * first. */
void budget_ends(Ctx *c, const Graph *g, double *lo, double *hi);
/* The frontier of plans whose saved bytes are at most cap_bytes (HUGE_VAL:
 * all of them), over r's free tensors (remat_classify). */
int solve_frontier(Ctx *c, const Graph *g, const Remat *r, double cap_bytes,
                   Frontier *f);
/* Nested checkpointing's evenly spaced plans, the candidates fit_arena
 * tries when the frontier's do not fit: of r's opened tensors (r from
 * remat_classify_open) a count kept, the others rebuilt from the kept one
 * before, each recomputing once (REBUILD_NONE) and, on graphs fit_arena
 * would rebuild, rebuilding at each use (REBUILD_EACH, REBUILD_NEXT,
 * REBUILD_BLOCK), and then revolve's plans (revolve.c: REBUILD_BLOCK
 * with rebuilt checkpoints). Each is handed to each() with its
 * Remat.rebuild and Remat.hold until it returns nonzero (then 1). For
 * `remat pareto --by arena`, whose curve they carry below the plans that
 * recompute each tensor once. */
int solve_spaced_plans(const Graph *g, const Remat *r,
                       int (*each)(void *ctx, const char *recompute,
                                   int rebuild, const int *hold),
                       void *ctx);
/* Decides g under p within the budget (the least recompute) into *out,
 * which the driver then schedules and plans (compile_budget); an error
 * when no plan fits. */
int remat_budget(Ctx *c, const Graph *g, const Policy *p, const Budget *b,
                 Remat **out);

/* ---- middle/schedule.c: one straight-line list of statements ------------------- */

int schedule_build(Ctx *c, const Graph *g, const Remat *r, int kind,
                   Schedule *s);

/* Per tensor, the statement of train schedule s after which a trainable
 * parameter's gradient is final (nothing later adds into it); -1 for
 * every other tensor. Where NAME_train_step_hooked calls its hook. */
int *grad_final_after(Ctx *c, const Graph *g, const Schedule *s);
/* What backward statement st computes and reads: want[i] = it computes
 * d(input i) (its part of the wanted ones); returns the NEED_* bits of
 * what it reads. */
unsigned stmt_backward(const Graph *g, const Stmt *st, int *want);

/* ---- middle/plan.c: arena offsets from liveness -------------------------------- */

/* Every value of s an offset (s->arena_bytes, s->peak_live_bytes). goal:
 * the arena the plan must fit (--max-arena's bytes), 0 for none; on large
 * schedules the planner works harder only when first fit misses it. */
int plan_arena(Ctx *c, Schedule *s, double goal);
/* The schedule's peak_live_bytes alone (plan_arena's lower bound), for a
 * plan that may be dropped before it is planned. */
size_t schedule_peak(Ctx *c, const Schedule *s);

/* ---- driver.c: the stages chained ---------------------------------------------- */

/* Compiles graph file + policy all the way to planned schedules; budget
 * may be NULL, and freeze (globs of parameters to freeze, NULL-terminated;
 * freeze_params). */
int compile_graph(Ctx *c, const char *file, const char *policy,
                  const Budget *budget, const char *const *freeze,
                  Compiled *out);
/* Shapes, the rewrites that need them (fuse_graph), then autodiff: what
 * every path from a parsed graph to a plan runs first, so that a frontier
 * and the plans compiled from it see the same graph. */
int analyze_graph(Ctx *c, Graph *g);
/* The same from a parsed graph (shapes onwards). */
int compile_parsed(Ctx *c, Graph *g, const Policy *p, const Budget *budget,
                   Compiled *out);
/* remat_budget's decision, scheduled and planned into m. */
int compile_budget(Ctx *c, const Graph *g, const Policy *p, const Budget *b,
                   Compiled *m);
/* Schedules and plans a decided graph (the tail of compile_parsed). */
int compile_decided(Ctx *c, const Graph *g, const Policy *p, Remat *r,
                    Compiled *out);
/* A built-in name or a policy XML file (which front/parse.c reads). */
int policy_load(Ctx *c, const char *name_or_file, Policy **out);
/* A graph file's bytes: up to 2 GiB for an ONNX model (protobuf's limit),
 * MAX_FILE_BYTES for anything else. */
int read_graph_file(Ctx *c, const char *file, char **data, size_t *len);
/* A graph file of either format, told apart by content: XML to
 * front/parse.c, ONNX through the importer (front/onnx.c) and then parse.c. */
int load_graph(Ctx *c, const char *file, Graph **out);

/* ---- back/emit.c: NAME.c and NAME.h -------------------------------------------- */

/* header_name: the file name the .c includes; weights, if not NULL, gets
 * NAME.weights's bytes (empty when the values are in the code). */
int emit_c(Ctx *c, const Compiled *m, const char *header_name, Buf *cfile,
           Buf *hfile, Buf *weights);

/* ---- back/report.c: schedule, diff and ops reports ----------------------------- */

void summarize(const Compiled *m, Summary *s);
void report_schedule(Buf *b, const Compiled *m);
void report_diff(Buf *b, const Compiled *a, const Compiled *bm);
/* The same figures as one JSON object (docs/memory.md lists the keys). */
void report_schedule_json(Buf *b, const Compiled *m);
void report_diff_json(Buf *b, const Compiled *a, const Compiled *bm);
/* `remat ops`: the op table's rows (ONNX name, category), then the n ops
 * the importer only folds (names, with notes[k] or NULL), then the nl it
 * lowers into the table's (lowered, with how[k]), as text or JSON. */
void report_ops(Buf *b, const char *const *names, const char *const *notes,
                int n, const char *const *lowered, const char *const *how,
                int nl, int json);

/* ---- pareto.c: every optimal plan as a table and a picture --------------------- */

/* One row per plan of g's frontier under p: budget, saved and arena bytes,
 * recompute FLOPs, RAM for the optimizer o (ram_of), and with timed the trainer's ms per step; with json, as
 * one JSON object with the built-in policies' points; with svg, the curve
 * drawn there too. by_arena: only the plans whose arena no plan with less
 * recompute matches, the curve of arena bytes against recompute. */
int report_pareto(Ctx *c, Graph *g, const Policy *p, const Rates *rates,
                  const Optim *o, int timed, int json, int by_arena,
                  const char *svg, Buf *out);

/* ---- back/svg.c: what the pictures share --------------------------------------- */

/* The <svg> element's opening and a white background. */
void svg_begin(Buf *s, int w, int h);
/* text with XML's special characters escaped (control characters: '?') */
void svg_escape(Buf *s, const char *text);
/* A round step (1, 2 or 5 x 10^k) giving about `ticks` steps over span. */
double nice_step(double span, int ticks);
/* "B", "KiB", "MiB" or "GiB", whichever max reads best in; *scale its bytes. */
const char *byte_unit(double max, double *scale);
/* The unit a time up to max picoseconds reads best in: µs, ms or s. */
const char *time_unit(double max, double *scale);

/* ---- back/memory.c: the bytes live at each statement, as text or a picture ----- */

/* What holds the bytes live at each statement of the train step (of the
 * forward when the graph is forward only), and the largest values at the
 * peak: a short text into out, or with svg the stacked-area picture
 * written there (and nothing into out); with json, the figures and each
 * kind's bytes at every statement as one JSON object into out, beside the
 * picture or instead of the text. */
int report_memory(Ctx *c, const Compiled *m, const char *svg, int json,
                  Buf *out);

/* ---- back/build.c: a trainer executable from a compiled model ------------------ */

int build_trainer(Ctx *c, const Compiled *m, const char *exe,
                  const BuildOptions *o);

#endif
