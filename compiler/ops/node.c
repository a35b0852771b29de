/*
 * node.c: what every op family reads of a node and writes into its
 * outputs: its attributes (typed by its row's AttrSpec list, found through
 * Node.row, never through op_table), its errors, shapes and the generic
 * costs (one FLOP per output or input element, none for a view), the
 * `_set` spelling of a write-first backward, and the axis attribute's
 * checks. The op table's rows name some of these directly.
 */
#include "ops.h"

#include <assert.h>
#include <string.h>

/* numel saturates at MAX_NUMEL + 1 when the product (or any one
 * dimension, even beside a 0) exceeds MAX_NUMEL or a dimension is
 * negative (a rule's arithmetic gone wrong), so that no shape rule
 * multiplies past a long and shapes.c refuses the tensor; below that
 * bound every product of its dimensions fits. */
void set_shape(Tensor *t, int rank, const long *dims)
{
    int big = 0;
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        if (dims[i] < 0 || dims[i] > MAX_NUMEL ||
            (dims[i] > 0 && t->numel > MAX_NUMEL / dims[i]))
            big = 1;
        else
            t->numel *= dims[i];
    }
    if (big)
        t->numel = MAX_NUMEL + 1;
}

/* The product of t's dimensions [from, to). */
long dims_product(const Tensor *t, int from, int to)
{
    long p = 1;
    for (int d = from; d < to; d++)
        p *= t->dims[d];
    return p;
}

int node_error(Ctx *c, const Graph *g, const Node *n, const char *what)
{
    return ctx_error(c, g->file, n->line, "node '%s': %s", n->name, what);
}

/* "_set" when the call writes a gradient (the runtime's twin), else "". */
const char *set_suffix(const Emit *e)
{
    return e->writes || e->pwrites ? "_set" : "";
}

/* The _set twin's last argument, ", 0x1u", or "" for the plain call; a
 * parameter's gradient is written only when the step does not accumulate
 * (Emit.pwrites), so the mask then depends on `accumulate`. */
const char *set_arg(Emit *e)
{
    if (e->pwrites)
        return ctx_printf(e->ctx, ", accumulate ? 0x%xu : 0x%xu", e->writes,
                          e->writes | e->pwrites);
    return e->writes ? ctx_printf(e->ctx, ", 0x%xu", e->writes) : "";
}

const char *or_null(const char *const *v, int i, int n)
{
    return i < n && v[i] ? v[i] : "NULL";
}

double flops_out(const Graph *g, const Node *n)
{
    return (double)OUT(0)->numel;
}

int shape_same(Ctx *c, Graph *g, Node *n)
{
    (void)c;
    set_shape(OUT(0), IN(0)->rank, IN(0)->dims);
    return 0;
}

double flops_in(const Graph *g, const Node *n)
{
    return (double)IN(0)->numel;
}

/* ONNX's axis in [-rank, rank - 1] (Flatten: [-rank, rank]), made
 * non-negative; -1 with ctx error when out of range. */
int node_axis(Ctx *c, const Graph *g, const Node *n, int rank, int hi)
{
    long a = node_int(n, "axis");
    if (a < -rank || a > hi)
        return node_error(c, g, n, ctx_printf(c, "%s axis %ld is out of range "
            "for input '%s' of rank %d; axis must be in [%d, %d]",
            n->row->name, a, IN(0)->name, rank, -rank, hi));
    return (int)(a < 0 ? a + rank : a);
}

double flops_none(const Graph *g, const Node *n)
{
    (void)g;
    (void)n;
    return 0;
}

int attr_index(const OpInfo *op, const char *name)
{
    for (int i = 0; op->attrs[i].name; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return i;
    return -1;
}

double tensor_bytes(const Tensor *t)
{
    return (double)t->numel * (t->is_int ? 8 : 4);
}

const char *attr_choices(Ctx *c, const AttrSpec *s)
{
    Buf b;
    buf_init(&b, c);
    for (int i = 0; s->choices && s->choices[i]; i++)
        buf_printf(&b, "%s\"%s\"", i ? " or " : "", s->choices[i]);
    return b.len ? b.data : "";
}

const Attr *node_attr(const Node *n, const char *name)
{
    int i = attr_index(n->row, name);
    assert(i >= 0 && "asked for an attribute the op does not have");
    return &n->attrs[i];
}

long node_int(const Node *n, const char *name) { return node_attr(n, name)->i; }
float node_float(const Node *n, const char *name) { return node_attr(n, name)->f; }
