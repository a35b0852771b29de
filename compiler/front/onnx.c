/*
 * onnx.c: the ONNX front end. It reads a ModelProto (protobuf-c, on the
 * onnx.proto that Debian's libonnx-dev installs, generated at build time)
 * and writes the same graph as the format's XML plus a table of initial
 * values, which parse.c then reads like any graph file. `remat import`
 * writes that XML to disk, so compiling the XML and compiling the .onnx
 * cannot differ: they are one document read by one parser.
 *
 * The steps, each over the ONNX node list in file order (ONNX requires it
 * to be topologically sorted):
 *
 *  1. values: every graph input, initializer and node output becomes a Val
 *     with a dtype and, where known, a shape; initializers and Constant
 *     nodes hold their values.
 *  2. which initializers train: a float initializer is a parameter when the
 *     loss (the scalar float graph output) depends on it through inputs
 *     that carry gradients; every other initializer is a constant (running
 *     statistics, masks). A value that depends on no graph input and no
 *     parameter is a constant too.
 *  3. folding and lowering, one node at a time: a node whose inputs are all
 *     constants is evaluated here (onnx_eval.c), so the shape-computing
 *     subgraphs torch emits (Shape, Gather, Unsqueeze, Concat, ...) vanish;
 *     any other node becomes IR nodes (onnx_lower.c), whose shape rules run
 *     as they are made, so a later Shape sees a static shape.
 *  4. blocks from what repeats (layers.N / blocks.N / h.N scopes), then the
 *     XML (onnx_write in onnx_lower.c).
 */
#define _XOPEN_SOURCE 700      /* POSIX 2008 with realpath(3) */
#include "onnx_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the name -> value table ------------------------------------------------ */

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int im_find(const Im *m, const char *name)
{
    if (!m->cap)
        return -1;
    for (size_t k = hash_str(name) & (m->cap - 1);; k = (k + 1) & (m->cap - 1)) {
        int v = m->slots[k];
        if (v < 0)
            return -1;
        if (strcmp(m->v[v].name, name) == 0)
            return v;
    }
}

static void im_grow(Im *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    m->slots = ctx_alloc(m->c, cap * sizeof(int));
    for (size_t k = 0; k < cap; k++)
        m->slots[k] = -1;
    m->cap = cap;
    for (int v = 0; v < m->nv; v++) {
        size_t k = hash_str(m->v[v].name) & (cap - 1);
        while (m->slots[k] >= 0)
            k = (k + 1) & (cap - 1);
        m->slots[k] = v;
    }
    if ((size_t)m->vcap < cap) {
        Val *nv = ctx_alloc(m->c, cap * sizeof(Val));
        if (m->nv)
            memcpy(nv, m->v, (size_t)m->nv * sizeof(Val));
        m->v = nv;
        m->vcap = (int)cap;
    }
}

/* A new value named name; -1 with an error if the name is taken. */
int im_new_val(Im *m, const char *name, const char *what)
{
    if (im_find(m, name) >= 0)
        return ctx_error(m->c, m->file, 0, "%s: value '%s' is defined twice; "
                         "ONNX names each value once (SSA)", what, name);
    if ((size_t)(m->nv + 1) * 2 > m->cap)
        im_grow(m);
    int v = m->nv++;
    Val *x = &m->v[v];
    memset(x, 0, sizeof *x);
    x->name = name;
    x->producer = -1;
    x->tensor = -1;
    x->int_tensor = -1;
    x->transposed_of = -1;
    size_t k = hash_str(name) & (m->cap - 1);
    while (m->slots[k] >= 0)
        k = (k + 1) & (m->cap - 1);
    m->slots[k] = v;
    return v;
}

/* ---- tensors: dtypes and values ------------------------------------------------- */

const char *onnx_dtype_name(int t)
{
    static const char *const names[] = {
        "undefined", "float32", "uint8", "int8", "uint16", "int16", "int32",
        "int64", "string", "bool", "float16", "float64", "uint32", "uint64",
        "complex64", "complex128", "bfloat16"};
    return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t]
                                                              : "unknown";
}

/* The dtype remat holds an ONNX element type as: float32 and int64 as
 * themselves, bool as int64 0/1, int32 as int64 (constants only); -1 if
 * none. */
int dtype_of(int onnx_type)
{
    switch (onnx_type) {
    case 1: return DT_F32;
    case 7: case 6: return DT_I64;
    case 9: return DT_BOOL;
    case 11: return DT_F32;     /* float64 constants, rounded */
    default: return -1;
    }
}

int val_set_shape(Im *m, Val *x, int rank, const int64_t *dims, const char *what)
{
    if (rank > MAX_RANK)
        return ctx_error(m->c, m->file, 0, "%s: '%s' has rank %d; remat takes "
                         "tensors of rank at most %d", what, x->name, rank,
                         MAX_RANK);
    x->rank = rank;
    x->numel = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0 || dims[d] > MAX_NUMEL ||
            (dims[d] > 0 && x->numel > MAX_NUMEL / dims[d]))
            return ctx_error(m->c, m->file, 0, "%s: '%s' has dimension %lld; "
                             "dimensions are 0 or more and a tensor holds at "
                             "most %ld elements", what, x->name,
                             (long long)dims[d], MAX_NUMEL);
        x->dims[d] = (long)dims[d];
        x->numel *= (long)dims[d];
    }
    return 0;
}

void val_alloc(Im *m, Val *x)
{
    size_t n = (size_t)(x->numel ? x->numel : 1);
    x->known = 1;
    if (x->dt == DT_F32)
        x->f = ctx_alloc(m->c, n * sizeof(float));
    else
        x->i = ctx_alloc(m->c, n * sizeof(int64_t));
}

/* The real path of path (realpath(3): absolute, no link, no '.' or '..'),
 * in the compilation's arena; NULL with errno set if it has none. */
static const char *real_path(Ctx *c, const char *path)
{
    char *r = realpath(path, NULL);
    if (!r)
        return NULL;
    const char *copy = ctx_strdup(c, r);
    free(r);
    return copy;
}

/* External data must come from inside the model's folder. The textual
 * checks (no absolute path, no '..') do not see symbolic links, so the data
 * file's real path must lie below the folder's real path: a link (or a
 * linked folder on the way) that leads out is refused, and one that stays
 * inside is followed. On success *real is the real path, for the caller
 * to open: the file read is the file checked. */
static int real_path_inside(Im *m, const char *tensor, const char *loc,
                            const char *path, const char **real)
{
    const char *dir = real_path(m->c, m->dir);
    if (!dir)
        return ctx_error(m->c, m->file, 0, "initializer '%s': cannot resolve "
                         "the model's folder '%s' to find external data: %s",
                         tensor, m->dir, strerror(errno));
    const char *file = real_path(m->c, path);
    if (!file)
        return ctx_error(m->c, m->file, 0, "initializer '%s': cannot open "
                         "external data '%s': %s", tensor, path,
                         strerror(errno));
    size_t n = strlen(dir);
    if (n && dir[n - 1] == '/')     /* the folder is "/" */
        n--;
    if (strncmp(file, dir, n) == 0 && file[n] == '/' && file[n + 1]) {
        *real = file;
        return 0;
    }
    if (strcmp(file, dir) == 0)     /* ".", or a link to the folder */
        return ctx_error(m->c, m->file, 0, "initializer '%s': external data "
                         "location '%s' is the model's folder itself; it must "
                         "be a file inside that folder", tensor, loc);
    return ctx_error(m->c, m->file, 0, "initializer '%s': external data "
                     "location '%s' leads through a symbolic link to '%s', "
                     "outside the model's folder '%s'; it must be a file "
                     "inside that folder (a link there may point only within "
                     "it)", tensor, loc, file, dir);
}

/* Reads an external data file's bytes [offset, offset + len). */
static int read_external(Im *m, const Onnx__TensorProto *t, size_t want,
                         unsigned char **out)
{
    const char *loc = NULL;
    long long off = 0, len = -1;
    for (size_t k = 0; k < t->n_external_data; k++) {
        const char *key = t->external_data[k]->key;
        const char *val = t->external_data[k]->value;
        if (!key || !val)
            continue;
        if (strcmp(key, "location") == 0)
            loc = val;
        else if (strcmp(key, "offset") == 0)
            off = atoll(val);
        else if (strcmp(key, "length") == 0)
            len = atoll(val);
    }
    if (!loc)
        return ctx_error(m->c, m->file, 0, "initializer '%s': external data "
                         "without a 'location'; it needs location (a file "
                         "beside the model), and may give offset and length",
                         t->name);
    if (!loc[0] || loc[0] == '/' || strstr(loc, ".."))
        return ctx_error(m->c, m->file, 0, "initializer '%s': external data "
                         "location '%s' must be a path inside the model's "
                         "folder", t->name, loc);
    if (len >= 0 && (size_t)len != want)
        return ctx_error(m->c, m->file, 0, "initializer '%s': external data "
                         "length %lld does not match its shape (%zu bytes)",
                         t->name, len, want);
    const char *path = ctx_printf(m->c, "%s/%s", m->dir, loc);
    const char *real = NULL;
    if (real_path_inside(m, t->name, loc, path, &real))
        return -1;
    FILE *f = fopen(real, "rb");
    if (!f)
        return ctx_error(m->c, m->file, 0, "initializer '%s': cannot open "
                         "external data '%s': %s", t->name, path,
                         strerror(errno));
    unsigned char *d = ctx_alloc(m->c, want ? want : 1);
    int ok = fseek(f, (long)off, SEEK_SET) == 0 &&
             fread(d, 1, want, f) == want;
    fclose(f);
    if (!ok)
        return ctx_error(m->c, m->file, 0, "initializer '%s': external data "
                         "'%s' has no %zu bytes at offset %lld", t->name, path,
                         want, off);
    *out = d;
    return 0;
}

static float f32_le(const unsigned char *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t u64_le(const unsigned char *p, int n)
{
    uint64_t u = 0;
    for (int k = n - 1; k >= 0; k--)
        u = u << 8 | p[k];
    return u;
}

/* Fills x (shape set, dt set) with a TensorProto's values. */
int tensor_values(Im *m, const Onnx__TensorProto *t, Val *x)
{
    int et = t->data_type;
    size_t esize = et == 1 ? 4 : et == 7 || et == 11 ? 8 : et == 6 ? 4 : 1;
    size_t n = (size_t)x->numel;
    const unsigned char *raw = NULL;
    unsigned char *ext = NULL;
    if (t->has_data_location &&
        t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if (read_external(m, t, n * esize, &ext))
            return -1;
        raw = ext;
    } else if (t->has_raw_data) {
        if (t->raw_data.len != n * esize)
            return ctx_error(m->c, m->file, 0, "tensor '%s': raw_data holds "
                             "%zu bytes; its shape needs %zu", x->name,
                             t->raw_data.len, n * esize);
        raw = t->raw_data.data;
    }
    val_alloc(m, x);
    size_t have = et == 1 ? t->n_float_data : et == 7 ? t->n_int64_data
                  : et == 11 ? t->n_double_data : t->n_int32_data;
    if (!raw && have != n)
        return ctx_error(m->c, m->file, 0, "tensor '%s': holds %zu values; "
                         "its shape needs %zu", x->name, have, n);
    for (size_t k = 0; k < n; k++) {
        const unsigned char *p = raw ? raw + k * esize : NULL;
        switch (et) {
        case 1:
            x->f[k] = p ? f32_le(p) : t->float_data[k];
            break;
        case 11: {
            double d;
            uint64_t u = p ? u64_le(p, 8) : 0;
            if (p)
                memcpy(&d, &u, 8);
            else
                d = t->double_data[k];
            x->f[k] = (float)d;
            break;
        }
        case 7:
            x->i[k] = p ? (int64_t)u64_le(p, 8) : t->int64_data[k];
            break;
        case 6:
            x->i[k] = p ? (int32_t)(uint32_t)u64_le(p, 4) : t->int32_data[k];
            break;
        default:    /* bool */
            x->i[k] = (p ? p[0] : t->int32_data[k]) != 0;
            break;
        }
    }
    return 0;
}

/* A TensorProto as a new constant value named name. */
int const_from_tensor(Im *m, const Onnx__TensorProto *t, const char *name,
                      const char *what)
{
    int dt = t->has_data_type ? dtype_of(t->data_type) : -1;
    if (dt < 0)
        return ctx_error(m->c, m->file, 0, "%s: tensor '%s' has dtype %s; "
                         "remat takes float32, int64, int32 and bool "
                         "constants", what, name,
                         onnx_dtype_name(t->has_data_type ? t->data_type : 0));
    int v = im_new_val(m, name, what);
    if (v < 0)
        return -1;
    Val *x = &m->v[v];
    x->dt = dt;
    if (val_set_shape(m, x, (int)t->n_dims, t->dims, what) ||
        tensor_values(m, t, x))
        return -1;
    return v;
}

/* ---- reading the file ----------------------------------------------------------- */

int onnx_is_model(const char *data, size_t len)
{
    /* XML starts with '<', a UTF-8 byte-order mark or white space; a
     * ModelProto with a field key */
    unsigned char b = len ? (unsigned char)data[0] : '<';
    return !(b == '<' || b == 0xEF || b == ' ' || b == '\t' || b == '\r' ||
             b == '\n');
}

/* The declared shape of a graph input or output; -1 with an error for a
 * symbolic dimension. */
static int declared_shape(Im *m, const Onnx__ValueInfoProto *vi, Val *x,
                          const char *what, int need)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
        if (!need)
            return 0;
        return ctx_error(m->c, m->file, 0, "%s '%s': is not a tensor; remat "
                         "takes tensor inputs and outputs", what, vi->name);
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int dt = tt->has_elem_type ? dtype_of(tt->elem_type) : -1;
    /* a bool input is an int64 one holding 0 and 1 (remat's bools) */
    if (dt < 0 || (need && tt->elem_type != 1 && tt->elem_type != 7 &&
                   tt->elem_type != 9))
        return ctx_error(m->c, m->file, 0, "%s '%s': has dtype %s; graph "
                         "inputs are float32 (data), int64 (indices, labels) "
                         "or bool (masks, as int64 0 and 1)",
                         what, vi->name, onnx_dtype_name(tt->elem_type));
    x->dt = dt;
    if (!tt->shape) {
        if (!need)
            return 0;
        return ctx_error(m->c, m->file, 0, "%s '%s': has no shape; remat "
                         "compiles static shapes: export with fixed input "
                         "sizes", what, vi->name);
    }
    int64_t dims[MAX_RANK + 1];
    int rank = (int)tt->shape->n_dim;
    for (int d = 0; d < rank && d <= MAX_RANK; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (!need)
                return 0;
            return ctx_error(m->c, m->file, 0, "%s '%s': dimension %d is "
                             "symbolic ('%s'); remat compiles static shapes: "
                             "export without dynamic_axes, or give the size",
                             what, vi->name, d,
                             dim->value_case ==
                                     ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                     && dim->dim_param
                                 ? dim->dim_param : "?");
        }
        dims[d] = dim->dim_value;
    }
    if (val_set_shape(m, x, rank, dims, what))
        return -1;
    x->shaped = 1;
    return 0;
}

/* protobuf-c leaves an absent string NULL: every name is checked here
 * once, so that nothing after this file's reading sees a NULL. */
static int check_names(Im *m)
{
    const Onnx__GraphProto *gp = m->model->graph;
    for (size_t k = 0; k < gp->n_input; k++)
        if (!gp->input[k]->name || !*gp->input[k]->name)
            return ctx_error(m->c, m->file, 0, "graph input %zu has no name; "
                             "every input is named", k);
    for (size_t k = 0; k < gp->n_output; k++)
        if (!gp->output[k]->name || !*gp->output[k]->name)
            return ctx_error(m->c, m->file, 0, "graph output %zu has no name; "
                             "every output is named", k);
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *p = gp->node[k];
        if (!p->op_type || !*p->op_type)
            return ctx_error(m->c, m->file, 0, "node %zu has no op_type; every "
                             "node names its op", k);
        for (size_t a = 0; a < p->n_attribute; a++)
            if (!p->attribute[a]->name)
                return ctx_error(m->c, m->file, 0, "node %zu (%s): attribute "
                                 "%zu has no name", k, p->op_type, a);
    }
    return 0;
}

static int read_values(Im *m)
{
    const Onnx__GraphProto *gp = m->model->graph;
    if (check_names(m))
        return -1;
    for (size_t k = 0; k < gp->n_initializer; k++) {
        const Onnx__TensorProto *t = gp->initializer[k];
        if (!t->name || !*t->name)
            return ctx_error(m->c, m->file, 0, "initializer %zu has no name; "
                             "every initializer is named", k);
        int v = const_from_tensor(m, t, t->name, "initializer");
        if (v < 0)
            return -1;
        m->v[v].init = 1;
        m->v[v].shaped = 1;
    }
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *vi = gp->input[k];
        if (im_find(m, vi->name) >= 0)
            continue;   /* IR < 4 lists initializers as inputs too */
        int v = im_new_val(m, vi->name, "graph input");
        if (v < 0 || declared_shape(m, vi, &m->v[v], "graph input", 1))
            return -1;
        m->v[v].graph_input = 1;
        m->v[v].varying = 1;
    }
    return 0;
}

/* The node list: names made unique and valid, inputs resolved. */
static int read_nodes(Im *m)
{
    const Onnx__GraphProto *gp = m->model->graph;
    m->nn = (int)gp->n_node;
    m->nodes = ctx_alloc(m->c, ((size_t)m->nn + 1) * sizeof(ONode));
    for (int k = 0; k < m->nn; k++) {
        const Onnx__NodeProto *p = gp->node[k];
        ONode *o = &m->nodes[k];
        o->p = p;
        o->op = p->op_type ? p->op_type : "";
        o->name = p->name && *p->name ? p->name
                  : ctx_printf(m->c, "%s_%d", o->op, k);
        o->what = ctx_printf(m->c, "node '%s' (%s)", o->name, o->op);
        if (p->domain && *p->domain && strcmp(p->domain, "ai.onnx") != 0)
            return ctx_error(m->c, m->file, 0, "%s: is in domain '%s'; remat "
                             "takes ops of ONNX's default domain only", o->what,
                             p->domain);
        o->nin = (int)p->n_input;
        o->nout = (int)p->n_output;
        /* a recurrent layer may leave Y out and give only Y_h or Y_c */
        int named = 0, rnn = !strcmp(o->op, "LSTM") || !strcmp(o->op, "GRU") ||
                             !strcmp(o->op, "RNN");
        for (size_t i = 0; i < p->n_output; i++)
            named |= *p->output[i] && (i == 0 || rnn);
        if (!named)
            return ctx_error(m->c, m->file, 0, "%s: has no output; every node "
                             "computes at least one, named", o->what);
        o->in = ctx_alloc(m->c, ((size_t)o->nin + 1) * sizeof(int));
        o->out = ctx_alloc(m->c, ((size_t)o->nout + 1) * sizeof(int));
        for (int i = 0; i < o->nin; i++) {
            o->in[i] = -1;
            if (!*p->input[i])
                continue;       /* an optional input left out */
            o->in[i] = im_find(m, p->input[i]);
            if (o->in[i] < 0)
                return ctx_error(m->c, m->file, 0, "%s: input %d '%s' is not "
                                 "defined before it (not a graph input, an "
                                 "initializer or an earlier node's output)",
                                 o->what, i, p->input[i]);
            m->v[o->in[i]].readers++;
        }
        for (int i = 0; i < o->nout; i++) {
            o->out[i] = -1;
            if (!*p->output[i])
                continue;
            int v = im_new_val(m, p->output[i], o->what);
            if (v < 0)
                return -1;
            o->out[i] = v;
            m->v[v].producer = k;
        }
    }
    return 0;
}

static int read_outputs(Im *m)
{
    const Onnx__GraphProto *gp = m->model->graph;
    if (gp->n_output == 0)
        return ctx_error(m->c, m->file, 0, "graph: has no outputs; a model "
                         "computes at least one");
    m->outputs = ctx_alloc(m->c, gp->n_output * sizeof(int));
    m->noutputs = (int)gp->n_output;
    for (size_t k = 0; k < gp->n_output; k++) {
        int v = im_find(m, gp->output[k]->name);
        if (v < 0)
            return ctx_error(m->c, m->file, 0, "graph output '%s': is not "
                             "computed by any node", gp->output[k]->name);
        m->outputs[k] = v;
        m->v[v].is_output = 1;
        Val decl = {0};
        decl.name = gp->output[k]->name;
        if (declared_shape(m, gp->output[k], &decl, "graph output", 0))
            return -1;
        if (decl.shaped && decl.numel == 1 && decl.dt == DT_F32 &&
            m->loss < 0)
            m->loss = v;
    }
    return 0;
}

/* ---- which values vary, which initializers train -------------------------------- */

/* Inputs of an ONNX op through which no gradient flows (shapes, indices,
 * conditions, running statistics, ratios, a Cast to or from an integer). */
int onnx_input_differentiable(const ONode *o, int i)
{
    const char *op = o->op;
    if (!strcmp(op, "Cast")) {
        long to = onnx_attr_int(o, "to", 0);
        return i == 0 && (to == 1 || to == 10 || to == 11 || to == 16);
    }
    static const struct { const char *op; unsigned mask; } none[] = {
        {"Reshape", 1u << 1}, {"Expand", 1u << 1}, {"Unsqueeze", 1u << 1},
        {"Squeeze", 1u << 1}, {"Split", 1u << 1}, {"Tile", 1u << 1},
        {"Slice", 0x1eu}, {"Where", 1u << 0}, {"Gather", 1u << 1},
        {"BatchNormalization", 0x18u}, {"Dropout", 0x6u},
        {"SoftmaxCrossEntropyLoss", 0x6u}, {"ReduceSum", 1u << 1},
        {"NegativeLogLikelihoodLoss", 0x6u},
        {"ReduceMean", 1u << 1}, {"ConstantOfShape", 0x1u},
        {"Pad", 0xeu}, {"Trilu", 1u << 1},
        {"GatherElements", 1u << 1}, {"CumSum", 1u << 1},
    };
    static const char *const never[] = {
        "Shape", "Size", "Equal", "Less", "Greater", "LessOrEqual",
        "GreaterOrEqual", "Not", "And", "Or", "Range", "ArgMax", "ArgMin",
        "NonZero", "Floor", "Ceil", "Round", "Sign", "ConstantOfShape",
        "EyeLike", "OneHot", NULL};
    for (int k = 0; never[k]; k++)
        if (strcmp(op, never[k]) == 0)
            return 0;
    for (size_t k = 0; k < sizeof none / sizeof *none; k++)
        if (strcmp(op, none[k].op) == 0)
            return !((none[k].mask >> i) & 1);
    return 1;
}

static void find_trainable(Im *m)
{
    /* gradient reachability, backwards from the loss */
    if (m->loss >= 0)
        m->v[m->loss].grad = 1;
    for (int k = m->nn - 1; k >= 0; k--) {
        ONode *o = &m->nodes[k];
        int any = 0;
        for (int i = 0; i < o->nout; i++)
            any |= o->out[i] >= 0 && m->v[o->out[i]].grad;
        if (!any)
            continue;
        for (int i = 0; i < o->nin; i++)
            if (o->in[i] >= 0 && onnx_input_differentiable(o, i))
                m->v[o->in[i]].grad = 1;
    }
    for (int v = 0; v < m->nv; v++) {
        Val *x = &m->v[v];
        /* an initializer holding an infinity is a mask, never a weight */
        int finite = 1;
        for (long k = 0; x->init && x->dt == DT_F32 && k < x->numel; k++)
            finite &= isfinite(x->f[k]) != 0;
        if (x->init && x->dt == DT_F32 && x->grad && finite) {
            x->trainable = 1;
            x->varying = 1;
        }
    }
    /* what varies: anything downstream of an input or a parameter, except
     * a shape (static) */
    for (int k = 0; k < m->nn; k++) {
        ONode *o = &m->nodes[k];
        int vary = 0;
        for (int i = 0; i < o->nin; i++)
            vary |= o->in[i] >= 0 && m->v[o->in[i]].varying;
        if (strcmp(o->op, "Shape") == 0 || strcmp(o->op, "Size") == 0)
            vary = 0;
        for (int i = 0; i < o->nout; i++)
            if (o->out[i] >= 0)
                m->v[o->out[i]].varying = vary;
    }
}

/* ---- warnings: what imports but will not train as torch does ------------------- */

/* Up to three names of a list, then how many more, for a warning. */
static void name_list(Buf *b, const char **names, int n)
{
    for (int k = 0; k < n && k < 3; k++)
        buf_printf(b, "%s%s", k ? ", " : "", names[k]);
    if (n > 3)
        buf_printf(b, " and %d more", n - 3);
}

/* Patterns of an export that import and compile but do not train as the
 * torch module does (issue 25), one line each:
 * - trainable initializers named onnx::OP_N: torch's constant folding
 *   (do_constant_folding=True) replaced a parameter by a folded copy
 *   (a transposed weight) named after the op that reads it;
 * - an all-zero row of a trainable initializer that Gather reads along
 *   axis 0: what nn.Embedding(padding_idx=k) leaves, exported as a plain
 *   Gather, so the row trains here and not in torch.
 * A buffer (register_buffer) imported as trainable leaves no trace in
 * ONNX; docs/onnx.md says so instead. */
static void find_warnings(Im *m, Buf *w)
{
    const char **folded = ctx_alloc(m->c, ((size_t)m->nv + 1) * sizeof *folded);
    int nfolded = 0;
    for (int v = 0; v < m->nv; v++)
        if (m->v[v].init && m->v[v].trainable &&
            strncmp(m->v[v].name, "onnx::", 6) == 0)
            folded[nfolded++] = m->v[v].name;
    if (nfolded) {
        buf_printf(w, "warning: %d trainable initializer%s named after the "
                   "op that reads %s (", nfolded, nfolded > 1 ? "s" : "",
                   nfolded > 1 ? "them" : "it");
        name_list(w, folded, nfolded);
        buf_printf(w, ") look%s like weights torch folded at export "
                   "(do_constant_folding=True): %s train%s as %s whose "
                   "name%s match no state_dict entry (often transposed); "
                   "export with do_constant_folding=False\n",
                   nfolded > 1 ? "" : "s", nfolded > 1 ? "they" : "it",
                   nfolded > 1 ? "" : "s", nfolded > 1 ? "copies" : "a copy",
                   nfolded > 1 ? "s" : "");
    }
    char *seen = ctx_alloc(m->c, (size_t)m->nv + 1);   /* zeroed */
    for (int k = 0; k < m->nn; k++) {
        const ONode *o = &m->nodes[k];
        if (strcmp(o->op, "Gather") != 0 || o->nin < 1 || o->in[0] < 0 ||
            onnx_attr_int(o, "axis", 0) != 0 || seen[o->in[0]])
            continue;
        seen[o->in[0]] = 1;
        const Val *x = &m->v[o->in[0]];
        if (!x->init || !x->trainable || x->dt != DT_F32 || x->rank != 2 ||
            x->dims[0] < 2 || x->dims[1] < 1 || !x->f)
            continue;
        long row = x->dims[1];
        for (long r = 0; r < x->dims[0]; r++) {
            long j = 0;
            while (j < row && x->f[r * row + j] == 0.0f)
                j++;
            if (j < row)
                continue;
            buf_printf(w, "warning: row %ld of %s, which Gather reads, is "
                       "all zeros, as nn.Embedding(padding_idx=%ld) leaves "
                       "it; torch exports a plain Gather, so here that row "
                       "gets a gradient and trains where torch's stays "
                       "zero\n", r, x->name, r);
            break;
        }
    }
}

/* ---- the whole import ----------------------------------------------------------- */

static const char *stem_of(Ctx *c, const char *path)
{
    const char *s = strrchr(path, '/');
    s = s ? s + 1 : path;
    char *d = ctx_strdup(c, s);
    char *dot = strrchr(d, '.');
    if (dot && dot != d)
        *dot = '\0';
    return d;
}

static void free_model(void *p)
{
    onnx__model_proto__free_unpacked(p, NULL);
}

int onnx_import(Ctx *c, const char *file, const char *data, size_t len,
                const ImportOptions *opt, Imported *out)
{
    Im m = {0};
    m.c = c;
    m.file = file;
    m.dir = path_dir(c, file);
    m.loss = -1;
    m.opt = opt;
    m.weights_dir = ctx_printf(c, "%s.weights",
                               stem_of(c, opt && opt->xml_path ? opt->xml_path
                                                               : file));
    m.model = onnx__model_proto__unpack(NULL, len, (const uint8_t *)data);
    if (!m.model) {
        size_t n = strlen(file);
        ctx_error(c, file, 0, "not a graph file: neither XML (no '<' at the "
                  "start) nor an ONNX ModelProto (protobuf decoding failed); "
                  "give a graph in the format's XML or a .onnx from "
                  "torch.onnx.export");
        return n >= 5 && strcmp(file + n - 5, ".onnx") == 0 ? -1 : 1;
    }
    ctx_defer(c, free_model, m.model);
    if (!m.model->graph)
        return ctx_error(c, file, 0, "ONNX model has no graph");
    for (size_t k = 0; k < m.model->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = m.model->opset_import[k];
        if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) &&
            o->has_version)
            m.opset = (long)o->version;
    }
    if (m.opset > ONNX_MAX_OPSET)
        return ctx_error(c, file, 0, "the model imports opset %ld of ONNX's "
                         "default domain; remat implements ops as defined up "
                         "to opset %d: export with opset_version=%d or lower",
                         m.opset, ONNX_MAX_OPSET, ONNX_MAX_OPSET);
    buf_init(&m.log, c);
    if (read_values(&m) || read_nodes(&m) || read_outputs(&m))
        return -1;
    find_trainable(&m);
    if (onnx_lower(&m) || onnx_write(&m, stem_of(c, file), out))
        return -1;
    buf_init(&out->warnings, c);
    find_warnings(&m, &out->warnings);
    return 0;
}
