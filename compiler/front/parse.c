/*
 * parse.c: graph format v1 (docs/graph-format.md) from XML to the IR.
 *
 * parse_graph_memory() (and parse_graph_imported(), for what the ONNX importer
 * wrote) returns 0 and a Graph whose tensors and nodes are all
 * resolved: every node input and output is a tensor index, every attribute is
 * typed by the op's schema (ONNX defaults filled in), every name is valid and
 * unique in its kind, every tensor has exactly one definition (an input, an
 * initializer, or one node's output), and inputs and initializers have their
 * shapes. Node order is file order; shapes.c sorts and types the rest.
 * On the first error it returns -1 with "file:line: element 'name': what is
 * wrong" in ctx->err.
 *
 * Two walks over the tree: the first counts elements so that every array is
 * allocated once at its size, the second fills them. Names resolve through a
 * hash table, so a large graph parses in linear time.
 */
#define _POSIX_C_SOURCE 200809L
#include "../remat.h"
#include "../../runtime/remat_rt.h"

#include <ctype.h>
#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- a name -> index table --------------------------------------------------- */

typedef struct {
    const char **keys;
    int *vals;
    size_t cap;
} Names;

static void names_init(Ctx *c, Names *t, size_t n)
{
    t->cap = 16;
    while (t->cap < 2 * n + 1)
        t->cap *= 2;
    t->keys = ctx_alloc(c, t->cap * sizeof *t->keys);
    t->vals = ctx_alloc(c, t->cap * sizeof *t->vals);
}

static size_t names_slot(const Names *t, const char *key)
{
    uint64_t h = 1469598103934665603ull;         /* FNV-1a */
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    size_t i = (size_t)h & (t->cap - 1);
    while (t->keys[i] && strcmp(t->keys[i], key) != 0)
        i = (i + 1) & (t->cap - 1);
    return i;
}

static int names_get(const Names *t, const char *key)
{
    size_t i = names_slot(t, key);
    return t->keys[i] ? t->vals[i] : -1;
}

/* Returns the index already there, or -1 after adding key -> val. */
static int names_add(Names *t, const char *key, int val)
{
    size_t i = names_slot(t, key);
    if (t->keys[i])
        return t->vals[i];
    t->keys[i] = key;
    t->vals[i] = val;
    return -1;
}

/* ---- parser state ---------------------------------------------------------------- */

typedef struct {
    Ctx *c;
    const char *file;
    Graph *g;               /* what a graph file fills */
    Policy *policy;         /* what a policy file fills */
    const char *dir;        /* the XML's folder, for init="file" paths */
    char xml_err[512];      /* libxml2's first complaint, and its line */
    int xml_err_line;
    Names tensors, nodes, blocks, cnames_t, cnames_n;
    const Imported *im;     /* an ONNX model's values, by init path */
    Names weights;          /* init path -> index into im->weights */
} Parser;

#define ELEM_ERROR(P, X, ...)                                                   \
    ctx_error((P)->c, (P)->file, (int)xmlGetLineNo(X), __VA_ARGS__)

static const char *attr(Parser *p, xmlNode *x, const char *name)
{
    xmlAttr *a = xmlHasProp(x, (const xmlChar *)name);
    if (!a)
        return NULL;
    xmlNode *t = a->children;
    /* the usual value is one text node: copy it straight into the context
     * (a large graph asks for millions of attributes) */
    if (!t)
        return "";
    if (!t->next && t->type == XML_TEXT_NODE)
        return ctx_strdup(p->c, (const char *)t->content);
    xmlChar *v = xmlNodeListGetString(x->doc, t, 1);
    char *s = ctx_strdup(p->c, v ? (const char *)v : "");
    xmlFree(v);
    return s;
}

static int is_elem(xmlNode *x) { return x->type == XML_ELEMENT_NODE; }
static const char *ename(xmlNode *x) { return (const char *)x->name; }

/* Text between elements is a mistake (a half-deleted element, an attribute
 * outside its tag); whitespace and comments are not. Returns the text's
 * first visible character and its line, or NULL. */
static const char *visible_text(xmlNode *x, int *line)
{
    if (x->type != XML_TEXT_NODE && x->type != XML_CDATA_SECTION_NODE)
        return NULL;
    const char *t = (const char *)x->content;
    while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')
        t++;
    if (!*t)
        return NULL;
    /* libxml2 numbers a text node by the line it ends on */
    *line = (int)xmlGetLineNo(x);
    for (const char *q = t; *q; q++)
        *line -= *q == '\n';
    return t;
}

static int stray_text(Parser *p, xmlNode *x, const char *where)
{
    int line;
    const char *t = visible_text(x, &line);
    if (!t)
        return 0;
    char shown[48];
    snprintf(shown, sizeof shown, "%.40s", t);
    shown[strcspn(shown, "\r\n")] = '\0';
    return ctx_error(p->c, p->file, line, "%s holds text \"%s\"; only elements "
                     "(and comments) go there", where, shown);
}

/* An element that takes no children: <input/>, <node/>, <rule/> ... */
static int check_leaf(Parser *p, xmlNode *x)
{
    for (xmlNode *y = x->children; y; y = y->next) {
        int line = (int)xmlGetLineNo(y);
        if (!is_elem(y) && !visible_text(y, &line))
            continue;
        xmlChar *nm = xmlGetProp(x, (const xmlChar *)"name");
        const char *who = nm ? ctx_printf(p->c, "%s '%s'", ename(x), (char *)nm)
                             : ctx_printf(p->c, "<%s>", ename(x));
        xmlFree(nm);
        const char *what = is_elem(y) ? ctx_printf(p->c, "<%s>", ename(y))
                                      : "text";
        return ctx_error(p->c, p->file, line, "%s: holds %s; <%s> takes "
                         "attributes only, written <%s ... />", who, what,
                         ename(x), ename(x));
    }
    return 0;
}

/* Rejects attributes outside `allowed` (NULL-terminated) and `extra`. */
static int check_attrs(Parser *p, xmlNode *x, const char *const *allowed,
                       const OpInfo *op)
{
    const char *names[16 + MAX_ATTRS];
    int k = 0;
    for (int i = 0; allowed[i]; i++)
        names[k++] = allowed[i];
    for (int i = 0; op && op->attrs[i].name; i++)
        names[k++] = op->attrs[i].name;
    for (xmlAttr *a = x->properties; a; a = a->next) {
        const char *n = (const char *)a->name;
        int ok = 0;
        for (int i = 0; !ok && i < k; i++)
            ok = strcmp(names[i], n) == 0;
        if (ok)
            continue;
        const char *nm = attr(p, x, "name");
        Buf b;
        buf_init(&b, p->c);
        for (int i = 0; i < k; i++)
            buf_printf(&b, "%s%s", i ? ", " : "", names[i]);
        const char *who = nm ? ctx_printf(p->c, "%s '%s'", ename(x), nm)
                             : ctx_printf(p->c, "<%s>", ename(x));
        return ELEM_ERROR(p, x, "%s: unknown attribute '%s'%s; %s takes %s",
                          who, n, did_you_mean(p->c, n, names, k),
                          op ? op->name : ename(x), b.data);
    }
    return 0;
}

/* What a required attribute holds, for the message when it is missing. */
static const char *attr_hint(const char *name)
{
    static const char *const hints[][2] = {
        {"name", "every <%s> has a name"},
        {"shape", "shape is the dimensions separated by spaces, such as "
                  "shape=\"32 256\" (shape=\"\" for a scalar)"},
        {"init", "init is zeros, ones, constant, uniform, normal or file"},
        {"op", "op is an ONNX op type such as MatMul"},
        {"in", "in lists the input tensors, separated by spaces"},
        {"out", "out lists the output tensors, separated by spaces"},
        {"decision", "decision is must_save, prefer_save, must_recompute or "
                     "prefer_recompute"},
    };
    for (size_t i = 0; i < sizeof hints / sizeof *hints; i++)
        if (strcmp(hints[i][0], name) == 0)
            return hints[i][1];
    return NULL;
}

static const char *need(Parser *p, xmlNode *x, const char *name)
{
    const char *v = attr(p, x, name);
    if (v)
        return v;
    const char *nm = attr(p, x, "name");
    const char *who = nm ? ctx_printf(p->c, "%s '%s'", ename(x), nm)
                         : ctx_printf(p->c, "<%s>", ename(x));
    const char *hint = attr_hint(name);
    ELEM_ERROR(p, x, "%s: missing attribute '%s'%s%s", who, name,
               hint ? "; " : "",
               hint ? ctx_printf(p->c, hint, ename(x)) : "");
    return NULL;
}

#define MAX_NAME 255

/* A leading '/' is allowed: torch names its ONNX nodes by module scope
 * ("/blocks.0/attn/MatMul"). */
static int valid_name(const char *s)
{
    if (!(*s == '_' || *s == '/' || (*s >= 'A' && *s <= 'Z') ||
          (*s >= 'a' && *s <= 'z')))
        return 0;
    for (s++; *s; s++)
        if (!(*s == '_' || *s == '.' || *s == ':' || *s == '/' || *s == '-' ||
              (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* What is wrong with a name, as "'NAME' is ...", or NULL. */
static const char *name_problem(Ctx *c, const char *s)
{
    if (strlen(s) > MAX_NAME)
        return ctx_printf(c, "'%.40s...' is %zu characters long; names have "
                          "at most %d", s, strlen(s), MAX_NAME);
    if (!valid_name(s))
        return ctx_printf(c, "'%s' is not valid; names match "
                          "[A-Za-z_/][A-Za-z0-9_.:/-]*", s);
    return NULL;
}

static const char *name_of(Parser *p, xmlNode *x)
{
    const char *n = need(p, x, "name");
    const char *bad = n ? name_problem(p->c, n) : NULL;
    if (bad) {
        ELEM_ERROR(p, x, "%s name %s", ename(x), bad);
        return NULL;
    }
    return n;
}

/* A C identifier part from a graph name: [.:/-] become '_', and a clash with
 * a name already given gets _2, _3, ... in file order, so `a.b` and `a_b`
 * stay distinct and the result depends only on the file. */
static const char *mangle(Parser *p, Names *taken, const char *name)
{
    char *s = ctx_strdup(p->c, name);
    for (char *q = s; *q; q++)
        if (*q == '.' || *q == ':' || *q == '/' || *q == '-')
            *q = '_';
    const char *m = s;
    for (int k = 2; names_get(taken, m) >= 0; k++)
        m = ctx_printf(p->c, "%s_%d", s, k);
    names_add(taken, m, 0);
    return m;
}

/* ---- numbers and shapes ------------------------------------------------------------ */

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno)
        return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || fabs(v) > 3.4e38)
        return -1;
    *out = (float)v;
    return 0;
}

/* "inf", "-inf" (any spelling strtod reads as an infinity, not an
 * overflow such as 1e39): the value of a constant that masks (Where's -inf,
 * an additive attention mask), which only a constant may hold. */
static int is_infinity(const char *s, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isinf(v))
        return 0;
    *out = v > 0 ? HUGE_VALF : -HUGE_VALF;
    return 1;
}

/* Space-separated integers; returns the count, or -1 on garbage / too many. */
/* parse_attr_value's message says how many ints an attribute holds */
_Static_assert(MAX_INTS == 12, "parse_attr_value's message says 12");

static int parse_ints(const char *s, long *out, int max)
{
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\n')
            s++;
        if (!*s)
            break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || n == max ||
            (*end && *end != ' ' && *end != '\t' && *end != '\n'))
            return -1;
        out[n++] = v;
        s = end;
    }
    return n;
}

static int parse_shape(Parser *p, xmlNode *x, const char *name, Tensor *t)
{
    const char *s = need(p, x, "shape");
    if (!s)
        return -1;
    long dims[MAX_RANK + 1];
    int rank = parse_ints(s, dims, MAX_RANK + 1);
    if (rank < 0 || rank > MAX_RANK)
        return ELEM_ERROR(p, x, "%s '%s': shape \"%s\" is not a list of at "
                          "most %d positive integers separated by spaces", ename(x), name, s,
                          MAX_RANK);
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] <= 0)
            return ELEM_ERROR(p, x, "%s '%s': shape \"%s\" has dimension %ld; "
                              "dimensions must be positive", ename(x), name,
                              s, dims[i]);
        if (dims[i] > MAX_NUMEL || t->numel > MAX_NUMEL / dims[i])
            return ELEM_ERROR(p, x, "%s '%s': shape \"%s\" has more than %ld "
                              "elements (1 GiB of float32)", ename(x), name, s, MAX_NUMEL);
        t->dims[i] = dims[i];
        t->numel *= dims[i];
    }
    return 0;
}

/* ---- tensors ------------------------------------------------------------------------- */

static Tensor *new_tensor(Parser *p, xmlNode *x, const char *name,
                          TensorKind kind)
{
    Graph *g = p->g;
    int prev = names_add(&p->tensors, name, g->ntensors);
    if (prev >= 0) {
        const Tensor *o = &g->tensors[prev];
        const char *what = o->kind == T_INPUT ? "a graph input"
                           : o->kind == T_PARAM ? "an initializer"
                           : "the output of another node";
        ELEM_ERROR(p, x, "%s '%s': tensor '%s' is already defined at line %d "
                   "as %s; every tensor has exactly one definition", ename(x),
                   attr(p, x, "name"), name, o->line, what);
        return NULL;
    }
    Tensor *t = &g->tensors[g->ntensors++];
    t->name = name;
    t->cname = mangle(p, &p->cnames_t, name);
    t->kind = kind;
    t->line = (int)xmlGetLineNo(x);
    t->producer = -1;
    return t;
}

static int parse_input(Parser *p, xmlNode *x)
{
    static const char *const ok[] = {"name", "shape", "dtype", NULL};
    if (check_leaf(p, x) || check_attrs(p, x, ok, NULL))
        return -1;
    const char *name = name_of(p, x);
    if (!name)
        return -1;
    const char *dtype = attr(p, x, "dtype");
    int is_int = dtype && strcmp(dtype, "int64") == 0;
    if (dtype && !is_int && strcmp(dtype, "float32") != 0)
        return ELEM_ERROR(p, x, "input '%s': dtype '%s' is not supported; "
                          "use float32 (data) or int64 (indices, labels)",
                          name, dtype);
    Tensor *t = new_tensor(p, x, name, T_INPUT);
    if (!t)
        return -1;
    t->is_int = is_int;
    return parse_shape(p, x, name, t);
}

/* Checked before the values are allocated: a regular file (a FIFO or a
 * terminal would block the compile in fopen, a folder holds no data), whose
 * header matches the shape, large enough for the values and the smallest
 * header (10 bytes): a shape of up to 1 GiB over a small or wrong file
 * allocates nothing. */
static int check_init_file(Parser *p, xmlNode *x, const Tensor *t,
                           const char *path, const int *dims)
{
    struct stat st;
    char why[256] = "";
    size_t need = (size_t)t->numel * (t->is_int ? 8 : sizeof(float)) + 10;
    int found = stat(path, &st) == 0;   /* else rt_npy_read says why */
    if (found && !S_ISREG(st.st_mode))
        return ELEM_ERROR(p, x, "initializer '%s': cannot use '%s': not a "
                          "regular file", t->name, path);
    if ((t->is_int ? rt_npy_read_i64(path, NULL, t->rank, dims, why, sizeof why)
                   : rt_npy_read(path, NULL, t->rank, dims, why, sizeof why)) != 0)
        return ELEM_ERROR(p, x, "initializer '%s': cannot use '%s': %s",
                          t->name, path, why);
    if (found && (size_t)st.st_size < need)
        return ELEM_ERROR(p, x, "initializer '%s': cannot use '%s': %lld "
                          "bytes cannot hold a .npy of shape %s (at least %zu "
                          "bytes)", t->name, path, (long long)st.st_size,
                          shape_str(p->c, t), need);
    return 0;
}

/* An imported model's values for t, if the importer gave them. */
static int imported_values(Parser *p, xmlNode *x, Tensor *t)
{
    int k = p->im ? names_get(&p->weights, t->path) : -1;
    if (k < 0)
        return 0;
    const Weight *w = &p->im->weights[k];
    int same = w->rank == t->rank;
    for (int d = 0; same && d < t->rank; d++)
        same = w->dims[d] == t->dims[d];
    if (!same || !w->idata != !t->is_int)
        return ELEM_ERROR(p, x, "initializer '%s': the model's values have "
                          "another shape or dtype", t->name);
    t->data = (float *)w->data;
    t->idata = (int64_t *)w->idata;
    return 1;
}

/* Parameters that train are finite; a constant may hold an infinity (a
 * mask's -inf), never NaN. */
static int check_values(Parser *p, xmlNode *x, const Tensor *t,
                        const char *path)
{
    for (long i = 0; i < t->numel && !t->is_int; i++)
        if (isnan(t->data[i]) || (t->trainable && !isfinite(t->data[i])))
            return ELEM_ERROR(p, x, "initializer '%s': '%s' holds %s at "
                              "element %ld; %s", t->name, path,
                              isnan(t->data[i]) ? "NaN" : "an infinity", i,
                              isnan(t->data[i]) ? "parameters and constants "
                                                  "must be numbers"
                              : "trainable parameters must be finite (a "
                                "constant, trainable=\"false\", may hold "
                                "an infinity)");
    return 0;
}

static int read_init_file(Parser *p, xmlNode *x, Tensor *t)
{
    int got = imported_values(p, x, t);
    if (got)
        return got < 0 ? -1 : check_values(p, x, t, t->path);
    const char *path = t->path[0] == '/' ? t->path
                       : ctx_printf(p->c, "%s/%s", p->dir, t->path);
    int dims[MAX_RANK];
    for (int i = 0; i < t->rank; i++)
        dims[i] = (int)t->dims[i];
    if (check_init_file(p, x, t, path, dims))
        return -1;
    char why[256] = "";
    int rc;
    if (t->is_int) {
        t->idata = ctx_alloc(p->c, (size_t)t->numel * sizeof(int64_t));
        rc = rt_npy_read_i64(path, t->idata, t->rank, dims, why, sizeof why);
    } else {
        t->data = ctx_alloc(p->c, (size_t)t->numel * sizeof(float));
        rc = rt_npy_read(path, t->data, t->rank, dims, why, sizeof why);
    }
    if (rc != 0)
        return ELEM_ERROR(p, x, "initializer '%s': cannot use '%s': %s",
                          t->name, path, why);
    return check_values(p, x, t, path);
}

typedef struct {
    const char *name;
    InitKind kind;
    const char *a, *b;      /* parameter names */
    float da, db;           /* their defaults (NAN: required) */
} InitSpec;

static const InitSpec init_specs[] = {
    {"zeros", INIT_ZEROS, NULL, NULL, 0, 0},
    {"ones", INIT_ONES, NULL, NULL, 0, 0},
    {"constant", INIT_CONSTANT, "value", NULL, NAN, 0},
    {"uniform", INIT_UNIFORM, "low", "high", 0, 1},
    {"normal", INIT_NORMAL, "mean", "std", 0, 1},
    {"file", INIT_FILE, "path", NULL, 0, 0},
};

static int init_param(Parser *p, xmlNode *x, Tensor *t, const char *pname,
                      float dflt, float *out)
{
    const char *v = attr(p, x, pname);
    if (!v && isnan(dflt))
        return ELEM_ERROR(p, x, "initializer '%s': missing attribute '%s'; "
                          "init=\"%s\" needs %s=\"NUMBER\"", t->name, pname,
                          attr(p, x, "init"), pname);
    int inf = v && is_infinity(v, out);
    if (inf && (t->trainable || t->init != INIT_CONSTANT))
        return ELEM_ERROR(p, x, "initializer '%s': %s=\"%s\" is not a finite "
                          "number; only a constant (init=\"constant\" "
                          "trainable=\"false\") may be infinite", t->name,
                          pname, v);
    if (v && !inf && parse_float(v, out))
        return ELEM_ERROR(p, x, "initializer '%s': %s=\"%s\" is not a finite "
                          "number", t->name, pname, v);
    if (!v)
        *out = dflt;
    return 0;
}

static int parse_init(Parser *p, xmlNode *x, Tensor *t)
{
    const char *init = need(p, x, "init");
    if (!init)
        return -1;
    const InitSpec *s = NULL;
    for (size_t i = 0; i < sizeof init_specs / sizeof *init_specs; i++)
        if (strcmp(init_specs[i].name, init) == 0)
            s = &init_specs[i];
    if (!s)
        return ELEM_ERROR(p, x, "initializer '%s': unknown init \"%s\"; use "
                          "zeros, ones, constant, uniform, normal or file",
                          t->name, init);
    const char *ok[] = {"name", "shape", "init", "trainable", "dtype", s->a,
                        s->b, NULL};
    if (check_attrs(p, x, ok, NULL))
        return -1;
    t->init = s->kind;
    if (t->is_int && s->kind != INIT_FILE)
        return ELEM_ERROR(p, x, "initializer '%s': dtype=\"int64\" takes "
                          "init=\"file\" (an int64 .npy), not init=\"%s\"",
                          t->name, init);
    if (t->is_int && t->trainable)
        return ELEM_ERROR(p, x, "initializer '%s': dtype=\"int64\" is a "
                          "constant: it needs trainable=\"false\" (integers "
                          "get no gradient)", t->name);
    if (s->kind == INIT_FILE) {
        t->path = attr(p, x, "path");
        if (!t->path)
            return ELEM_ERROR(p, x, "initializer '%s': missing attribute "
                              "'path'; init=\"file\" needs path=\"FILE.npy\" "
                              "(relative to the graph's folder)", t->name);
        return read_init_file(p, x, t);
    }
    if (s->a && init_param(p, x, t, s->a, s->da, &t->init_a))
        return -1;
    if (s->b && init_param(p, x, t, s->b, s->db, &t->init_b))
        return -1;
    if (s->kind == INIT_UNIFORM && !(t->init_a <= t->init_b))
        return ELEM_ERROR(p, x, "initializer '%s': uniform needs low <= high, "
                          "got low=%g high=%g", t->name, t->init_a, t->init_b);
    if (s->kind == INIT_NORMAL && !(t->init_b >= 0))
        return ELEM_ERROR(p, x, "initializer '%s': normal needs std >= 0, "
                          "got %g", t->name, t->init_b);
    return 0;
}

static int parse_bool(Parser *p, xmlNode *x, const char *name, int dflt,
                      int *out)
{
    const char *v = attr(p, x, name);
    *out = dflt;
    if (!v)
        return 0;
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = 1;
    else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = 0;
    else
        return ELEM_ERROR(p, x, "%s '%s': %s=\"%s\" must be true or false",
                          ename(x), attr(p, x, "name"), name, v);
    return 0;
}

static int parse_initializer(Parser *p, xmlNode *x)
{
    const char *name = check_leaf(p, x) ? NULL : name_of(p, x);
    if (!name)
        return -1;
    Tensor *t = new_tensor(p, x, name, T_PARAM);
    if (!t || parse_shape(p, x, name, t) ||
        parse_bool(p, x, "trainable", 1, &t->trainable))
        return -1;
    const char *dtype = attr(p, x, "dtype");
    t->is_int = dtype && strcmp(dtype, "int64") == 0;
    if (dtype && !t->is_int && strcmp(dtype, "float32") != 0)
        return ELEM_ERROR(p, x, "initializer '%s': dtype '%s' is not "
                          "supported; use float32 (the default) or int64 "
                          "(a constant of indices, ids or offsets)", name,
                          dtype);
    return parse_init(p, x, t);
}

/* ---- nodes -------------------------------------------------------------------------------- */

static int parse_attr_value(Parser *p, xmlNode *x, const char *node,
                            const AttrSpec *s, const char *v, Attr *a)
{
    const char *what = NULL;
    a->set = 1;
    switch (s->type) {
    case ATTR_INT:
        if (parse_long(v, &a->i))
            what = "an integer";
        break;
    case ATTR_FLOAT:
        if (parse_float(v, &a->f))
            what = "a finite number";
        break;
    case ATTR_INTS:
        a->nints = parse_ints(v, a->ints, MAX_INTS);
        if (a->nints < 0)
            what = "a list of at most 12 integers separated by spaces";
        break;
    case ATTR_STRING:
        a->s = v;
        for (int i = 0; s->choices && s->choices[i]; i++)
            if (strcmp(s->choices[i], v) == 0)
                return 0;
        if (s->choices)
            what = attr_choices(p->c, s);
        break;
    }
    if (what)
        return ELEM_ERROR(p, x, "node '%s': attribute %s=\"%s\" must be %s",
                          node, s->name, v, what);
    return 0;
}

static int parse_op_attrs(Parser *p, xmlNode *x, Node *n)
{
    const OpInfo *op = &op_table[n->op];
    for (int i = 0; op->attrs[i].name; i++) {
        const AttrSpec *s = &op->attrs[i];
        Attr *a = &n->attrs[i];
        a->i = s->i;
        a->f = s->f;
        a->s = s->s;
        const char *v = attr(p, x, s->name);
        if (v && parse_attr_value(p, x, n->name, s, v, a))
            return -1;
    }
    for (int i = 0; op->attrs[i].name; i++)    /* once every value parsed */
        if (op->attrs[i].flag && n->attrs[i].i != 0 && n->attrs[i].i != 1)
            return ELEM_ERROR(p, x, "node '%s': %s=\"%ld\" must be 0 or 1",
                              n->name, op->attrs[i].name, n->attrs[i].i);
    return 0;
}

static int parse_remat(Parser *p, xmlNode *x, Node *n)
{
    n->remat = REMAT_UNSET;
    const char *v = attr(p, x, "remat");
    if (!v)
        return 0;
    for (int d = 0; d < 4; d++)
        if (strcmp(v, decision_names[d]) == 0)
            n->remat = (Decision)d;
    if (n->remat == REMAT_UNSET)
        return ELEM_ERROR(p, x, "node '%s': remat=\"%s\" must be must_save, "
                          "prefer_save, must_recompute or prefer_recompute",
                          n->name, v);
    return 0;
}

/* Splits a space-separated list of names, keeping the first `max`;
 * returns how many there are. */
static int split_names(Parser *p, const char *s, const char **out, int max)
{
    char *copy = ctx_strdup(p->c, s);
    int n = 0;
    for (char *tok = strtok(copy, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
        if (n < max)
            out[n] = tok;
        n++;
    }
    return n;
}

static int parse_node_io(Parser *p, xmlNode *x, Node *n, const char *which,
                         const char **names, int *count)
{
    const OpInfo *op = &op_table[n->op];
    const char *s = need(p, x, which);
    if (!s)
        return -1;
    int in = which[0] == 'i';
    int lo = in ? op->min_in : op->min_out ? op->min_out : op->nout;
    int hi = in ? op->max_in : op->nout;
    *count = split_names(p, s, names, MAX_IO);
    if (*count < lo || *count > hi) {
        const char *want = lo == hi ? ctx_printf(p->c, "%d", lo)
                                    : ctx_printf(p->c, "%d to %d", lo, hi);
        return ELEM_ERROR(p, x, "node '%s': %s takes %s %s%s, got %d",
                          n->name, op->name, want, in ? "input" : "output",
                          hi == 1 ? "" : "s", *count);
    }
    for (int i = 0; i < *count; i++) {
        const char *bad = name_problem(p->c, names[i]);
        if (bad)
            return ELEM_ERROR(p, x, "node '%s': tensor name %s", n->name, bad);
    }
    return 0;
}

static const char *similar_op(Parser *p, const char *name)
{
    const char *names[OP_COUNT];
    for (int i = 0; i < OP_COUNT; i++)
        names[i] = op_table[i].name;
    return did_you_mean(p->c, name, names, OP_COUNT);
}

/* First walk over a node: its name, op, attributes and output tensors. */
static int parse_node(Parser *p, xmlNode *x, int block)
{
    static const char *const ok[] = {"name", "op", "in", "out", "remat", NULL};
    Graph *g = p->g;
    const char *name = check_leaf(p, x) ? NULL : name_of(p, x);
    const char *opname = name ? need(p, x, "op") : NULL;
    if (!opname)
        return -1;
    int op = op_lookup(opname);
    if (op < 0)     /* short: `remat ops` has the list */
        return ELEM_ERROR(p, x, "node '%s': unknown op '%s'%s; remat ops "
                          "lists the ops remat computes", name, opname,
                          similar_op(p, opname));
    int prev = names_add(&p->nodes, name, g->nnodes);
    if (prev >= 0)
        return ELEM_ERROR(p, x, "node '%s': a node of that name is already "
                          "defined at line %d; node names are unique", name,
                          g->nodes[prev].line);
    Node *n = &g->nodes[g->nnodes++];
    n->key = g->nnodes - 1;
    n->name = name;
    n->cname = mangle(p, &p->cnames_n, name);
    n->line = (int)xmlGetLineNo(x);
    n->op = (OpKind)op;
    n->row = &op_table[op];
    n->block = block;
    const char *outs[MAX_IO];
    if (check_attrs(p, x, ok, &op_table[op]) || parse_op_attrs(p, x, n) ||
        parse_remat(p, x, n) || parse_node_io(p, x, n, "out", outs, &n->nout))
        return -1;
    for (int i = 0; i < n->nout; i++) {
        int t = names_get(&p->tensors, outs[i]);
        if (t >= 0 && g->tensors[t].kind == T_INPUT)
            return ELEM_ERROR(p, x, "node '%s': writes '%s', which is a graph "
                              "input; a node output needs a name of its own",
                              name, outs[i]);
        Tensor *o = new_tensor(p, x, outs[i], T_ACT);
        if (!o)
            return -1;
        o->producer = (int)(n - g->nodes);
        n->out[i] = (int)(o - g->tensors);
    }
    return 0;
}

/* " (did you mean 'x'?)" for a name close to a defined tensor's. */
static const char *similar_tensor(Parser *p, const char *name)
{
    const Graph *g = p->g;
    const char **names = ctx_alloc(p->c, ((size_t)g->ntensors + 1) *
                                             sizeof *names);
    for (int i = 0; i < g->ntensors; i++)
        names[i] = g->tensors[i].name;
    return did_you_mean(p->c, name, names, g->ntensors);
}

/* Second walk: node inputs, now that every tensor exists. */
static int resolve_inputs(Parser *p, xmlNode *x, Node *n)
{
    const char *ins[MAX_IO];
    if (parse_node_io(p, x, n, "in", ins, &n->nin))
        return -1;
    for (int i = 0; i < n->nin; i++) {
        n->in[i] = names_get(&p->tensors, ins[i]);
        if (n->in[i] < 0)
            return ELEM_ERROR(p, x, "node '%s': input '%s' is not defined%s; "
                              "declare it as an <input>, an <initializer> or "
                              "another node's output", n->name, ins[i],
                              similar_tensor(p, ins[i]));
    }
    return 0;
}

int tensor_lookup(const Graph *g, const char *name)
{
    /* The parser's table is gone after parsing; later stages look up rarely
     * (tests and reports), so a scan is enough there. */
    for (int i = 0; i < g->ntensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- outputs and the loss ------------------------------------------------------------------ */

static int parse_output(Parser *p, xmlNode *x, int *nmarked)
{
    static const char *const ok[] = {"name", "loss", NULL};
    Graph *g = p->g;
    const char *name = check_leaf(p, x) ? NULL : name_of(p, x);
    int loss;
    if (!name || check_attrs(p, x, ok, NULL) ||
        parse_bool(p, x, "loss", 0, &loss))
        return -1;
    int t = names_get(&p->tensors, name);
    if (t < 0)
        return ELEM_ERROR(p, x, "output '%s': no node produces a tensor of that "
                          "name%s", name, similar_tensor(p, name));
    if (g->tensors[t].kind != T_ACT)
        return ELEM_ERROR(p, x, "output '%s': is a graph %s; an output must be "
                          "produced by a node", name,
                          g->tensors[t].kind == T_INPUT ? "input"
                                                        : "initializer");
    if (g->tensors[t].is_output)
        return ELEM_ERROR(p, x, "output '%s': already listed at line %d; list "
                          "each output once", name, g->tensors[t].output_line);
    g->tensors[t].is_output = 1;
    g->tensors[t].output_line = (int)xmlGetLineNo(x);
    g->tensors[t].is_loss = loss;
    g->tensors[t].not_loss = attr(p, x, "loss") && !loss;
    g->outputs[g->noutputs++] = t;
    *nmarked += loss;
    return 0;
}

/* ---- the tree ----------------------------------------------------------------------------------- */

typedef struct {
    int tensors, nodes, blocks, outputs;
} Counts;

static int count_outs(Parser *p, xmlNode *x)
{
    const char *s = attr(p, x, "out");
    const char *names[MAX_IO + 1];
    return s ? split_names(p, s, names, MAX_IO) : 0;
}

/* First walk: counts, and the structure check (which element goes where). */
static int count_graph(Parser *p, xmlNode *graph, Counts *k)
{
    for (xmlNode *x = graph->children; x; x = x->next) {
        if (stray_text(p, x, "<graph>"))
            return -1;
        if (!is_elem(x))
            continue;
        const char *e = ename(x);
        if (strcmp(e, "input") == 0 || strcmp(e, "initializer") == 0)
            k->tensors++;
        else if (strcmp(e, "output") == 0)
            k->outputs++;
        else if (strcmp(e, "node") == 0) {
            k->nodes++;
            k->tensors += count_outs(p, x);
        } else if (strcmp(e, "block") == 0) {
            k->blocks++;
            for (xmlNode *y = x->children; y; y = y->next) {
                if (stray_text(p, y, ctx_printf(p->c, "block '%s'",
                                                attr(p, x, "name"))))
                    return -1;
                if (!is_elem(y))
                    continue;
                if (strcmp(ename(y), "node") != 0)
                    return ELEM_ERROR(p, y, "block '%s': <%s> cannot appear "
                                      "in a block; a block holds <node>s "
                                      "only (blocks do not nest)",
                                      attr(p, x, "name"), ename(y));
                k->nodes++;
                k->tensors += count_outs(p, y);
            }
        } else
            return ELEM_ERROR(p, x, "unknown element <%s> in <graph>; expected "
                              "input, initializer, block, node or output", e);
    }
    return 0;
}

static int parse_block(Parser *p, xmlNode *x)
{
    static const char *const ok[] = {"name", NULL};
    Graph *g = p->g;
    const char *name = name_of(p, x);
    if (!name || check_attrs(p, x, ok, NULL))
        return -1;
    int prev = names_add(&p->blocks, name, g->nblocks);
    if (prev >= 0)
        return ELEM_ERROR(p, x, "block '%s': a block of that name is already "
                          "defined at line %d; block names are unique", name,
                          g->blocks[prev].line);
    Block *b = &g->blocks[g->nblocks++];
    b->name = name;
    b->line = (int)xmlGetLineNo(x);
    for (xmlNode *y = x->children; y; y = y->next)
        if (is_elem(y) && parse_node(p, y, g->nblocks - 1))
            return -1;
    return 0;
}

/* Second walk: definitions; third: node inputs and outputs. */
static int fill_graph(Parser *p, xmlNode *graph)
{
    for (xmlNode *x = graph->children; x; x = x->next) {
        if (!is_elem(x))
            continue;
        const char *e = ename(x);
        int bad = strcmp(e, "input") == 0         ? parse_input(p, x)
                  : strcmp(e, "initializer") == 0 ? parse_initializer(p, x)
                  : strcmp(e, "node") == 0        ? parse_node(p, x, -1)
                  : strcmp(e, "block") == 0       ? parse_block(p, x)
                                                  : 0;
        if (bad)
            return -1;
    }
    int k = 0;
    for (xmlNode *x = graph->children; x; x = x->next) {
        if (!is_elem(x))
            continue;
        if (strcmp(ename(x), "node") == 0 &&
            resolve_inputs(p, x, &p->g->nodes[k++]))
            return -1;
        for (xmlNode *y = x->children;
             strcmp(ename(x), "block") == 0 && y; y = y->next)
            if (is_elem(y) && resolve_inputs(p, y, &p->g->nodes[k++]))
                return -1;
    }
    return 0;
}

/* The marked loss; an unmarked one is found by shape, in shapes.c. */
static int find_loss(Parser *p, xmlNode *graph, int nmarked)
{
    Graph *g = p->g;
    g->loss = -1;
    g->line = (int)xmlGetLineNo(graph);
    if (nmarked > 1)
        return ELEM_ERROR(p, graph, "graph: %d outputs are marked loss=\"true\"; "
                          "exactly one is the loss", nmarked);
    for (int i = 0; i < g->noutputs; i++)
        if (g->tensors[g->outputs[i]].is_loss)
            g->loss = g->outputs[i];
    return 0;
}

static int parse_outputs(Parser *p, xmlNode *graph)
{
    int nmarked = 0;
    for (xmlNode *x = graph->children; x; x = x->next)
        if (is_elem(x) && strcmp(ename(x), "output") == 0 &&
            parse_output(p, x, &nmarked))
            return -1;
    return find_loss(p, graph, nmarked);
}

static int valid_c_identifier(const char *s)
{
    if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
        return 0;
    for (s++; *s; s++)
        if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* name is word, or word_ followed by anything */
static int has_prefix(const char *name, const char *word)
{
    size_t n = strlen(word);
    return strncmp(name, word, n) == 0 && (name[n] == '\0' || name[n] == '_');
}

/* The model's name prefixes every generated symbol (NAME_forward, ...),
 * beside the runtime's rt_ symbols and the generated file's own tables:
 * map_NODE (ops/emit_text.c), init_TENSOR (back/emit.c), bmm_NODE,
 * bmma_NODE and bmmb_NODE (ops_gemm.c), dims_NODE, perm_NODE and
 * slice*_NODE (ops_structural.c), win_NODE (ops_conv.c) and where_NODE
 * (ops_binary.c), all in ops/. A model named map, or map_x, could give one of its
 * functions a table's name: map_forward for a node named forward, which
 * the C compiler then refuses. A new table prefix belongs here too. */
static const char *const tables[][2] = {
    {"map", "a node"}, {"init", "an initializer"},
    {"bmm", "a MatMul node"}, {"bmma", "a MatMul node"},
    {"bmmb", "a MatMul node"}, {"dims", "a Transpose node"},
    {"perm", "a Transpose node"}, {"win", "a Conv or pooling node"},
    {"where", "a Where node"}, {"slicein", "a Slice node"},
    {"sliceout", "a Slice node"}, {"slicestart", "a Slice node"},
    {"slicestep", "a Slice node"},
};

const char *model_name_clash(const char *name)
{
    if (has_prefix(name, "rt"))
        return "rt";
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
        if (has_prefix(name, tables[i][0]))
            return tables[i][0];
    return NULL;
}

static int check_model_name(Parser *p, xmlNode *root, const char *name)
{
    if (!valid_c_identifier(name) || strlen(name) > 64)
        return ELEM_ERROR(p, root, "model name '%s' must be a C identifier of "
                          "at most 64 characters: it prefixes every generated "
                          "symbol", name);
    if (has_prefix(name, "rt"))
        return ELEM_ERROR(p, root, "model name '%s' would clash with the "
                          "runtime's rt_ symbols; choose a name that is not rt "
                          "and does not start with rt_", name);
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        const char *t = tables[i][0];
        if (!has_prefix(name, t))
            continue;
        /* the table that NAME_forward would also be */
        const char *rest = name + strlen(t) + (name[strlen(t)] == '_');
        const char *node = ctx_printf(p->c, "%s%sforward", rest,
                                      *rest ? "_" : "");
        return ELEM_ERROR(p, root, "model name '%s' could clash with the "
                          "generated %s_ tables (%s_forward for %s named "
                          "%s); choose a name that is not %s and does not "
                          "start with %s_", name, t, name, tables[i][1], node,
                          t, t);
    }
    return 0;
}

static xmlNode *the_graph(Parser *p, xmlNode *root)
{
    static const char *const ok[] = {"name", "format", NULL};
    if (strcmp(ename(root), "model") != 0) {
        ELEM_ERROR(p, root, "root element is <%s>; a graph file's root is "
                   "<model name=\"...\" format=\"1\">%s", ename(root),
                   strcmp(ename(root), "policy") == 0
                       ? " (is this a policy file? pass it with --policy)" : "");
        return NULL;
    }
    const char *name = need(p, root, "name");
    const char *format = name ? attr(p, root, "format") : NULL;
    if (name && !format)
        ELEM_ERROR(p, root, "model '%s': missing attribute 'format'; this "
                   "compiler reads format=\"1\"", name);
    if (!format || check_attrs(p, root, ok, NULL))
        return NULL;
    if (check_model_name(p, root, name))
        return NULL;
    if (strcmp(format, "1") != 0) {
        ELEM_ERROR(p, root, "model '%s': format=\"%s\" is not supported; this "
                   "compiler reads format=\"1\"", name, format);
        return NULL;
    }
    p->g->name = name;
    xmlNode *graph = NULL;
    for (xmlNode *x = root->children; x; x = x->next) {
        if (stray_text(p, x, "<model>"))
            return NULL;
        if (!is_elem(x))
            continue;
        if (strcmp(ename(x), "graph") != 0 || graph) {
            ELEM_ERROR(p, x, "model '%s': unexpected <%s>; a model holds "
                       "exactly one <graph>", name, ename(x));
            return NULL;
        }
        graph = x;
    }
    if (!graph)
        ELEM_ERROR(p, root, "model '%s': has no <graph>; a model holds "
                   "exactly one <graph>", name);
    else if (graph->properties)
        ELEM_ERROR(p, graph, "graph: unknown attribute '%s'; <graph> takes "
                   "none", (const char *)graph->properties->name);
    else
        return graph;
    return NULL;
}

static int parse_tree(Parser *p, xmlNode *root)
{
    xmlNode *graph = the_graph(p, root);
    Counts k = {0};
    if (!graph || count_graph(p, graph, &k))
        return -1;
    Graph *g = p->g;
    g->tensors = ctx_alloc(p->c, ((size_t)k.tensors + 1) * sizeof(Tensor));
    g->nodes = ctx_alloc(p->c, ((size_t)k.nodes + 1) * sizeof(Node));
    g->blocks = ctx_alloc(p->c, ((size_t)k.blocks + 1) * sizeof(Block));
    g->outputs = ctx_alloc(p->c, ((size_t)k.outputs + 1) * sizeof(int));
    names_init(p->c, &p->tensors, (size_t)k.tensors);
    names_init(p->c, &p->cnames_t, (size_t)k.tensors);
    names_init(p->c, &p->nodes, (size_t)k.nodes);
    names_init(p->c, &p->cnames_n, (size_t)k.nodes);
    names_init(p->c, &p->blocks, (size_t)k.blocks);
    if (fill_graph(p, graph) || parse_outputs(p, graph))
        return -1;
    if (g->nnodes == 0)
        return ELEM_ERROR(p, graph, "graph: has no nodes; a graph needs at "
                          "least one <node> to compute its outputs");
    return 0;
}

/* libxml2 keeps its last error, but after one mistake the parser stumbles
 * on and the last is often an echo ("Premature end of data") far from it;
 * the first is the one to show. */
/* libxml2's message, or plainer words where it names a parser option or
 * an internal step. */
static void explain_xml_error(const xmlError *e, char *out, size_t cap)
{
    char said[256];
    snprintf(said, sizeof said, "%s", e->message);
    said[strcspn(said, "\n")] = '\0';
    if (e->domain == XML_FROM_I18N)
        snprintf(out, cap, "bytes that the encoding <?xml?> declares cannot "
                 "hold (%s); declare the file's real encoding or save it as "
                 "UTF-8", said);
    else if (strncmp(said, "Input is not proper UTF-8", 25) == 0)
        snprintf(out, cap, "bytes that are not UTF-8; save the file as UTF-8 "
                 "or declare its encoding in <?xml?>");
    else if (strncmp(said, "Excessive depth", 15) == 0)
        snprintf(out, cap, "elements nest more than 256 deep; a graph file "
                 "nests four: model, graph, block, node");
    else
        snprintf(out, cap, "%s", said);
}

static void first_xml_error(void *data, xmlErrorPtr e)
{
    Parser *p = ((xmlParserCtxtPtr)data)->_private;
    if (!e || !e->message || e->level < XML_ERR_ERROR)
        return;
    if (p->xml_err[0]) {
        /* an encoding error has no line; where the parser stumbled has */
        if (!p->xml_err_line)
            p->xml_err_line = e->line;
        return;
    }
    explain_xml_error(e, p->xml_err, sizeof p->xml_err);
    p->xml_err_line = e->line;
}

static void xml_silent(void *data, const char *fmt, ...)
{
    (void)data;
    (void)fmt;
}

/* libxml2 reports bytes invalid in the declared encoding outside the
 * parser's context, through its global handlers, and the generic one
 * prints on stderr whatever XML_PARSE_NOERROR says. While a document
 * parses, those reports go to first_xml_error too (main.c alone prints);
 * the handlers from before are put back after. */
static xmlDocPtr read_xml(xmlParserCtxtPtr px, const char *data, size_t len,
                          const char *file)
{
    xmlGenericErrorFunc generic = xmlGenericError;
    void *generic_ctx = xmlGenericErrorContext;
    xmlStructuredErrorFunc structured = xmlStructuredError;
    void *structured_ctx = xmlStructuredErrorContext;
    xmlSetGenericErrorFunc(NULL, xml_silent);
    xmlSetStructuredErrorFunc(px, first_xml_error);
    /* No network, no entity expansion, no DTD loading: a graph file is data.
     * BIG_LINES: without it every line past 65535 is reported as 65535. */
    xmlDocPtr doc = xmlCtxtReadMemory(px, data, (int)len, file, NULL,
                                      XML_PARSE_NONET | XML_PARSE_NOERROR |
                                          XML_PARSE_NOWARNING |
                                          XML_PARSE_BIG_LINES);
    xmlSetStructuredErrorFunc(structured_ctx, structured);
    xmlSetGenericErrorFunc(generic_ctx, generic);
    return doc;
}

/* Parses XML bytes and hands the root element to `fn`. */
static int parse_xml(Parser *p, const char *data, size_t len,
                     int (*fn)(Parser *, xmlNode *))
{
    Ctx *c = p->c;
    if (len > MAX_FILE_BYTES)
        return file_too_big(c, p->file);
    xmlParserCtxtPtr px = xmlNewParserCtxt();
    if (!px)
        return ctx_error(c, p->file, 0, "cannot create an XML parser");
    px->_private = p;
    px->sax->serror = first_xml_error;
    xmlDocPtr doc = read_xml(px, data, len, p->file);
    int rc;
    if (!doc) {
        rc = ctx_error(c, p->file, p->xml_err_line, "XML error: %s",
                       p->xml_err[0] ? p->xml_err : "not well-formed XML");
    } else {
        xmlNode *root = xmlDocGetRootElement(doc);
        rc = root ? fn(p, root) : ctx_error(c, p->file, 0, "empty document");
        xmlFreeDoc(doc);
    }
    xmlFreeParserCtxt(px);
    return rc;
}

int parse_graph_memory(Ctx *c, const char *file, const char *data, size_t len,
                       Graph **out)
{
    Parser p = {.c = c, .file = ctx_strdup(c, file), .dir = path_dir(c, file)};
    p.g = ctx_alloc(c, sizeof(Graph));
    p.g->file = p.file;
    if (parse_xml(&p, data, len, parse_tree))
        return -1;
    *out = p.g;
    return 0;
}

int parse_graph_imported(Ctx *c, const char *file, const Imported *im,
                         Graph **out)
{
    Parser p = {.c = c, .file = ctx_strdup(c, file), .dir = path_dir(c, file),
                .im = im};
    names_init(c, &p.weights, (size_t)im->nweights);
    for (int k = 0; k < im->nweights; k++)
        names_add(&p.weights, im->weights[k].path, k);
    p.g = ctx_alloc(c, sizeof(Graph));
    p.g->file = p.file;
    if (parse_xml(&p, im->xml.data, im->xml.len, parse_tree))
        return -1;
    /* Lines of the XML the user never saw: messages name the node alone. */
    Graph *g = p.g;
    g->line = 0;
    for (int t = 0; t < g->ntensors; t++)
        g->tensors[t].line = g->tensors[t].output_line = 0;
    for (int n = 0; n < g->nnodes; n++)
        g->nodes[n].line = 0;
    for (int b = 0; b < g->nblocks; b++)
        g->blocks[b].line = 0;
    *out = g;
    return 0;
}

/* ---- --freeze: parameters made constants at compile time ------------------------ */

/* Edit distance from the glob's first literal run (up to a wildcard) to the
 * closest stretch of name, case-blind: its prefix when the glob starts
 * with the run, any substring after a leading wildcard. Ranks names for
 * a glob that matches nothing. */
static int glob_distance(const char *glob, const char *name)
{
    int anchored = *glob != '*' && *glob != '?';
    while (*glob == '*' || *glob == '?')
        glob++;
    size_t la = strcspn(glob, "*?"), lb = strlen(name);
    if (la > 64)
        la = 64;
    if (lb > 256)
        lb = 256;
    int col[65];                        /* over the run, per name character */
    for (size_t i = 0; i <= la; i++)
        col[i] = (int)i;
    int best = col[la];
    for (size_t j = 1; j <= lb; j++) {
        int diag = col[0];
        col[0] = anchored ? (int)j : 0;
        for (size_t i = 1; i <= la; i++) {
            int up = col[i];
            int sub = diag + (tolower((unsigned char)glob[i - 1]) !=
                              tolower((unsigned char)name[j - 1]));
            int ins = col[i - 1] + 1 < up + 1 ? col[i - 1] + 1 : up + 1;
            col[i] = sub < ins ? sub : ins;
            diag = up;
        }
        if (col[la] < best)
            best = col[la];
    }
    return best;
}

int freeze_params(Ctx *c, Graph *g, const char *const *globs)
{
    for (int k = 0; globs && globs[k]; k++) {
        int hit = 0;
        for (int t = 0; t < g->ntensors; t++) {
            Tensor *x = &g->tensors[t];
            if (x->kind == T_PARAM && glob_match(globs[k], x->name)) {
                x->trainable = 0;
                hit = 1;
            }
        }
        if (hit)
            continue;
        /* the three nearest parameter names, ties in file order */
        int near[3] = {-1, -1, -1}, nd[3] = {0, 0, 0};
        for (int t = 0; t < g->ntensors; t++) {
            if (g->tensors[t].kind != T_PARAM)
                continue;
            int d = glob_distance(globs[k], g->tensors[t].name), i = 3;
            while (i > 0 && (near[i - 1] < 0 || d < nd[i - 1]))
                i--;
            if (i == 3)
                continue;
            memmove(near + i + 1, near + i, (size_t)(2 - i) * sizeof *near);
            memmove(nd + i + 1, nd + i, (size_t)(2 - i) * sizeof *nd);
            near[i] = t;
            nd[i] = d;
        }
        Buf b;
        buf_init(&b, c);
        for (int i = 0; i < 3 && near[i] >= 0; i++)
            buf_printf(&b, "%s'%s'", i ? ", " : "; nearest: ",
                       g->tensors[near[i]].name);
        return ctx_error(c, g->file, 0, "--freeze '%s' matches no parameter "
                         "of model '%s'%s", globs[k], g->name,
                         near[0] < 0 ? " (it has none)" : b.data);
    }
    return 0;
}

/* ---- policy files ---------------------------------------------------------------------------------- */

static int parse_decision(Parser *p, xmlNode *x, Decision *d)
{
    const char *v = need(p, x, "decision");
    if (!v)
        return -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(v, decision_names[k]) == 0) {
            *d = (Decision)k;
            return 0;
        }
    return ELEM_ERROR(p, x, "<%s>: decision=\"%s\" must be must_save, "
                      "prefer_save, must_recompute or prefer_recompute%s",
                      ename(x), v, did_you_mean(p->c, v, decision_names, 4));
}

static int parse_rule(Parser *p, xmlNode *x, Rule *r)
{
    static const char *const ok[] = {"op", "category", "node", "decision", NULL};
    if (check_leaf(p, x) || check_attrs(p, x, ok, NULL) || parse_decision(p, x, &r->decision))
        return -1;
    r->line = (int)xmlGetLineNo(x);
    int given = 0;
    for (int k = 0; k < 3; k++) {
        const char *v = attr(p, x, ok[k]);
        if (v) {
            given++;
            r->kind = k == 0 ? RULE_OP : k == 1 ? RULE_CATEGORY : RULE_NODE;
            r->pattern = v;
        }
    }
    if (given != 1)
        return ELEM_ERROR(p, x, "<rule>: give exactly one of op, category or "
                          "node (got %d)%s", given, given ? "" :
                          "; a rule for everything else is <default "
                          "decision=\"...\"/>");
    if (r->kind == RULE_OP && op_lookup(r->pattern) < 0) {
        return ELEM_ERROR(p, x, "<rule>: unknown op '%s'%s; op matches an op "
                          "type such as Gemm or MatMul", r->pattern,
                          similar_op(p, r->pattern));
    }
    int cat = -1;
    for (int k = 0; r->kind == RULE_CATEGORY && k < CAT_COUNT; k++)
        if (strcmp(category_names[k], r->pattern) == 0)
            cat = k;
    if (r->kind == RULE_CATEGORY && cat < 0)
        return ELEM_ERROR(p, x, "<rule>: unknown category '%s'; use matmul, "
                          "conv, attention, pointwise, reduction, "
                          "normalization, shape, random or loss", r->pattern);
    return 0;
}

static int parse_policy_tree(Parser *p, xmlNode *root)
{
    static const char *const ok[] = {"name", NULL};
    if (strcmp(ename(root), "policy") != 0)
        return ELEM_ERROR(p, root, "root element is <%s>; a policy file's "
                          "root is <policy name=\"...\">%s", ename(root),
                          strcmp(ename(root), "model") == 0
                              ? " (is this a graph file? pass it as GRAPH.xml)"
                              : "");
    Policy *pol = p->policy;
    pol->name = need(p, root, "name");
    if (!pol->name || check_attrs(p, root, ok, NULL))
        return -1;
    const char *bad = name_problem(p->c, pol->name);
    if (bad)
        return ELEM_ERROR(p, root, "policy name %s", bad);
    int n = 0, seen_default = 0;
    for (xmlNode *x = root->children; x; x = x->next)
        n += is_elem(x);
    pol->rules = ctx_alloc(p->c, ((size_t)n + 1) * sizeof(Rule));
    for (xmlNode *x = root->children; x; x = x->next) {
        if (stray_text(p, x, "<policy>"))
            return -1;
        if (!is_elem(x))
            continue;
        Rule *r = &pol->rules[pol->nrules++];
        if (strcmp(ename(x), "rule") == 0) {
            if (seen_default)
                return ELEM_ERROR(p, x, "<rule> after <default> never "
                                  "matches; put <default> last");
            if (parse_rule(p, x, r))
                return -1;
        } else if (strcmp(ename(x), "default") == 0) {
            static const char *const dok[] = {"decision", NULL};
            if (seen_default++)
                return ELEM_ERROR(p, x, "a second <default>; a policy has at "
                                  "most one");
            r->kind = RULE_DEFAULT;
            r->line = (int)xmlGetLineNo(x);
            if (check_leaf(p, x) || check_attrs(p, x, dok, NULL) ||
                parse_decision(p, x, &r->decision))
                return -1;
        } else
            return ELEM_ERROR(p, x, "unknown element <%s> in <policy>; "
                              "expected rule or default", ename(x));
    }
    return 0;
}

int parse_policy_memory(Ctx *c, const char *file, const char *data,
                        size_t len, Policy *out)
{
    Parser p = {.c = c, .file = ctx_strdup(c, file), .dir = path_dir(c, file),
                .policy = out};
    out->file = p.file;
    return parse_xml(&p, data, len, parse_policy_tree);
}

int parse_policy(Ctx *c, const char *file, Policy *out)
{
    char *data;
    size_t len;
    if (read_whole_file(c, file, MAX_FILE_BYTES, NULL, &data, &len))
        return -1;
    return parse_policy_memory(c, file, data, len, out);
}
