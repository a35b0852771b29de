/*
 * emit_text.c: how an op's emitters write C, shared by the op families
 * (ops*.c) and the back end (emit.c): emit(), which writes one indented
 * line, and the file-scope data a call refers to (int arrays, the
 * broadcast and reduction maps an rt_bcast holds), and the zeroing of a
 * gradient a write-first backward could not write. It reads the Emit
 * context and the graph, and calls nothing but util.c, so the op table
 * can use it without reaching up into the back end.
 */
#include "ops.h"

#include <string.h>

void emit(Emit *e, const char *fmt, ...)
{
    for (int i = 0; *fmt && i < e->indent; i++)
        buf_printf(e->out, "    ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(e->out, fmt, ap);
    va_end(ap);
    buf_printf(e->out, "\n");
}

/* ---- broadcast maps ------------------------------------------------------------ */

static void contiguous_strides(const Tensor *t, long *st)
{
    long s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= t->dims[i];
    }
}

static int same_shape(const Tensor *a, const Tensor *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

void emit_map(Emit *e, const Node *n, int rank, const long *dims,
              const long *sa, const long *sb)
{
    Buf b;
    buf_init(&b, e->ctx);
    const long *rows[3] = {dims, sa, sb};
    for (int r = 0; r < 3; r++) {
        buf_printf(&b, ", {");
        for (int i = 0; i < rank; i++)
            buf_printf(&b, "%s%ld", i ? ", " : "", rows[r][i]);
        buf_printf(&b, rank ? "}" : "0}");     /* ISO C: no empty braces */
    }
    emit(e, "static const rt_bcast map_%s = {%d%s};", n->cname, rank, b.data);
}

void emit_int_array(Emit *e, const char *name, const long *v, int n)
{
    Buf b;
    buf_init(&b, e->ctx);
    for (int i = 0; i < n; i++)
        buf_printf(&b, "%s%ld", i ? ", " : "", v[i]);
    emit(e, "static const int %s[] = {%s};", name, n ? b.data : "0");
}

/* Strides of `t` seen from an output of `rank` dims `dims`: right-aligned,
 * 0 where t has extent 1 (or no dimension) and is broadcast. */
static void broadcast_strides(const Tensor *t, int rank, const long *dims,
                              long *st)
{
    long own[MAX_RANK];
    contiguous_strides(t, own);
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - t->rank);
        st[i] = j >= 0 && t->dims[j] == dims[i] && dims[i] != 1 ? own[j] : 0;
    }
}

const char *emit_bcast(Emit *e, const Node *n, const Tensor *y,
                       const Tensor *a, const Tensor *b)
{
    long dims[MAX_RANK], sa[MAX_RANK], sb[MAX_RANK];
    if (same_shape(a, y) && same_shape(b, y)) {
        /* the common case: one flat loop */
        dims[0] = y->numel;
        sa[0] = sb[0] = 1;
        emit_map(e, n, 1, dims, sa, sb);
    } else {
        memcpy(dims, y->dims, sizeof dims);
        broadcast_strides(a, y->rank, y->dims, sa);
        broadcast_strides(b, y->rank, y->dims, sb);
        emit_map(e, n, y->rank, dims, sa, sb);
    }
    return n->cname;
}

const char *emit_reduce_map(Emit *e, const Node *n, const Tensor *x,
                            const int *reduced)
{
    long sa[MAX_RANK], sb[MAX_RANK], s = 1;
    contiguous_strides(x, sa);
    for (int i = x->rank - 1; i >= 0; i--) {
        sb[i] = reduced[i] ? 0 : s;
        s *= reduced[i] ? 1 : x->dims[i];
    }
    emit_map(e, n, x->rank, x->dims, sa, sb);
    return n->cname;
}

/* ---- fused recomputes' chunks ------------------------------------------------- */

const char *elems(Emit *e, long numel)
{
    return e->count ? e->count : ctx_printf(e->ctx, "%ld", numel);
}

const char *map_ref(Emit *e, const Node *n)
{
    return e->count ? "&chunk_map" : ctx_printf(e->ctx, "&map_%s", n->cname);
}

/* ---- write-first gradients ----------------------------------------------------- */

void emit_unwritten(Emit *e, const Node *n, const char *const *din,
                    unsigned handled)
{
    for (int i = 0; i < n->nin; i++) {
        if (!din[i] || (handled >> i & 1))
            continue;
        if (e->writes >> i & 1)
            emit(e, "rt_zero(%s, %s);", din[i],
                 elems(e, e->g->tensors[n->in[i]].numel));
        else if (e->pwrites >> i & 1)
            emit(e, "if (!accumulate) rt_zero(%s, %s);", din[i],
                 elems(e, e->g->tensors[n->in[i]].numel));
    }
}
