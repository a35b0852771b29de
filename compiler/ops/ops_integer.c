/*
 * ops_integer.c: the rows of int64 and bool tensors (the runtime's
 * integer.c, issue 25): Cast of an int64 tensor to float32, the
 * comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual) of two
 * int64 or two float32 tensors, and the logical ops (Not, And, Or, Xor).
 * A bool is stored as an int64 0 or 1, so a comparison's output feeds
 * Where's condition, the logical ops, Cast, and the structural ops that
 * take int64 (Slice, Concat, Transpose, Expand and the views), like any
 * int64 tensor. None has a gradient: integers carry none (their rows set
 * no_grad where a float32 input could otherwise ask for one).
 *
 * Every one of them takes any int64 value (the logical ops and Where's
 * condition take nonzero as true), which the trainer draws from {0, 1}, a
 * mask, unless another reader narrows the range (the intersection,
 * emit.c), and checks no further.
 */
#include "ops.h"

#include <string.h>

/* ONNX's TensorProto.FLOAT: the one type remat casts to at run time. */
#define ONNX_FLOAT 1

int shape_cast(Ctx *c, Graph *g, Node *n)
{
    long to = node_int(n, "to");
    if (to != ONNX_FLOAT)
        return node_error(c, g, n, ctx_printf(c, "Cast to type %ld is not "
            "supported; remat casts int64 and bool tensors to float32 "
            "(to=\"1\") at run time, and folds other casts of constants",
            to));
    return shape_same(c, g, n);
}

void emit_cast_fwd(Emit *e, const Node *n, const char *const *out,
                   const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_cast_i64_forward(%s, %s, %ld);", out[0], in[0],
         IN(0)->numel);
}

/* Both operands one dtype (ONNX's T for both), broadcast as Add's. */
int shape_compare(Ctx *c, Graph *g, Node *n)
{
    if (IN(0)->is_int != IN(1)->is_int)
        return node_error(c, g, n, ctx_printf(c, "%s inputs '%s' (%s) and "
            "'%s' (%s) differ in dtype; both must be int64 (or bool) or both "
            "float32", n->row->name, IN(0)->name,
            IN(0)->is_int ? "int64" : "float32", IN(1)->name,
            IN(1)->is_int ? "int64" : "float32"));
    return shape_binary(c, g, n);
}

/* The runtime's RT_CMP_ code of the row's op, found by its ONNX name. */
static const char *cmp_code(const Node *n)
{
    static const char *const codes[][2] = {
        {"Equal", "RT_CMP_EQUAL"}, {"Less", "RT_CMP_LESS"},
        {"Greater", "RT_CMP_GREATER"}, {"LessOrEqual", "RT_CMP_LESS_EQUAL"},
        {"GreaterOrEqual", "RT_CMP_GREATER_EQUAL"}, {"And", "RT_CMP_AND"},
        {"Or", "RT_CMP_OR"}, {"Xor", "RT_CMP_XOR"},
    };
    for (size_t k = 0; k < sizeof codes / sizeof *codes; k++)
        if (!strcmp(codes[k][0], n->row->name))
            return codes[k][1];
    assert(!"a comparison row without an RT_CMP_ code");
    return "0";
}

void emit_compare_fwd(Emit *e, const Node *n, const char *const *out,
                      const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_compare_%s_forward(%s, %s, %s, %s, &map_%s);",
         IN(0)->is_int ? "i64" : "f32", out[0], in[0], in[1],
         cmp_code(n), n->cname);
}

void emit_not_fwd(Emit *e, const Node *n, const char *const *out,
                  const char *const *in)
{
    const Graph *g = e->g;
    emit(e, "rt_not_forward(%s, %s, %ld);", out[0], in[0], IN(0)->numel);
}

/* 2^62: beyond any index or label, and printable as a C constant. */
#define ANY_VALUE (1L << 62)

void range_any(const Graph *g, const Node *n, IntRange *r)
{
    (void)g;
    (void)n;
    r->lo = -ANY_VALUE;
    r->hi = ANY_VALUE;
    r->has_ignore = 0;
    r->ignore = 0;
}
