/*
 * onnx_attention.c: attention as exporters write it, rewritten as one
 * Attention node (compiler/ops/ops_attention.c), which keeps no
 * probabilities: Transpose(k), MatMul(q, .) or Einsum "bhqd,bhkd->bhqk",
 * an optional scale, additive mask and masking Where, Softmax over the
 * keys, and MatMul or Einsum with v. Over 4-D heads (torch, Hugging Face
 * GPT-2 and BERT) or 3-D with the heads in the batch (torch's
 * nn.MultiheadAttention). A mask that is computed (BERT's from its
 * attention_mask, a padded GPT's Where condition) becomes the node's mask
 * input when the node is lowered (attention_mask_input), where what it is
 * made of exists. The patterns are the onnx_rewrite.c kind: each matches
 * exactly or leaves the nodes as they are (docs/onnx.md).
 */
#include "onnx_impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The value's IR tensor if it is a float one of rank 3 or 4. */
static const Tensor *heads_rank(Im *m, int v)
{
    if (v < 0 || m->v[v].tensor < 0)
        return NULL;
    const Tensor *t = &m->g->tensors[m->v[v].tensor];
    return (t->rank == 4 || t->rank == 3) && !t->is_int ? t : NULL;
}

/* A constant mask whose last two axes (sq, skv) say, at every index of
 * the others, masked exactly where key j > query i (top-left causal):
 * want_true is what the mask holds there. */
static int is_causal_mask(const Val *c, long sq, long skv, int want_true)
{
    if (!c->known || c->rank < 2 || c->dims[c->rank - 2] != sq ||
        c->dims[c->rank - 1] != skv)
        return 0;
    for (long k = 0; k < c->numel; k++) {
        long j = k % skv, i = (k / skv) % sq;
        int v = val_get(c, k) != 0;
        if (v != ((j > i) == want_true))
            return 0;
    }
    return 1;
}

/* The fill of a causal Where: -inf, or the float's most negative value
 * (Hugging Face's torch.finfo(float32).min). With the diagonal never
 * masked a row's max is a real score, and exp(-FLT_MAX - max) is 0 in
 * float32 for any max above -FLT_MAX + 104: the same probabilities. */
static int is_mask_fill(const Im *m, int v)
{
    return is_const_scalar(m, v, -INFINITY, 0) ||
           is_const_scalar(m, v, -FLT_MAX, 0);
}

/* Folds value v now, with what it depends on, when it is a constant that
 * comes later in the file than a pattern that needs it (torch computes
 * attention's 1/sqrt(d) from Shape(k) after the MatMul it scales). */
static int fold_now(Im *m, int v, int depth)
{
    if (v < 0 || depth > 64)
        return 0;
    Val *x = &m->v[v];
    if (x->known || x->varying || x->producer < 0)
        return x->known;
    ONode *o = &m->nodes[x->producer];
    if (o->done)
        return x->known;
    int shape_op = !strcmp(o->op, "Shape") || !strcmp(o->op, "Size");
    for (int i = 0; i < o->nin && !shape_op; i++)
        if (o->in[i] >= 0 && !fold_now(m, o->in[i], depth + 1))
            return 0;
    /* a fold that fails is reported again when the walk gets there */
    if (onnx_fold(m, o) != 1)
        return 0;
    o->done = 1;
    for (int i = 0; i < o->nout; i++)
        if (o->out[i] >= 0)
            m->v[o->out[i]].const_name = m->v[o->out[i]].name;
    return x->known;
}

/* Which Transpose of k (rank 3 or 4) makes K^T for attention: 1, the
 * last two axes swapped (k is (.., T, D)); 2, k's sequence axis not yet
 * in place, which *move (the perm making k (.., T, D)) puts there; 0,
 * neither. torch folds x.transpose(1, 2).transpose(-2, -1) into one
 * (B, T, H, D) -> (B, H, D, T); nn.MultiheadAttention keeps heads in the
 * batch, (T, B*H, D) -> (B*H, D, T). */
static int key_transpose(const Onnx__AttributeProto *perm, int rank,
                         long *move)
{
    static const long last4[] = {0, 1, 3, 2}, later4[] = {0, 2, 3, 1},
                      move4[] = {0, 2, 1, 3}, last3[] = {0, 2, 1},
                      later3[] = {1, 2, 0}, move3[] = {1, 0, 2};
    const long *last = rank == 4 ? last4 : last3;
    const long *later = rank == 4 ? later4 : later3;
    if (!perm || perm->n_ints != (size_t)rank)
        return 0;
    int is_last = 1, is_later = 1;
    for (int i = 0; i < rank; i++) {
        is_last &= perm->ints[i] == last[i];
        is_later &= perm->ints[i] == later[i];
        move[i] = rank == 4 ? move4[i] : move3[i];
    }
    return is_last ? 1 : is_later ? 2 : 0;
}

/* The constant scale after MatMul(q, K^T), as *sc and *scale (1 and NULL
 * where there is none: torch's nn.MultiheadAttention scales q before the
 * product); 0 where a Mul or Div reads it but not by a positive constant. */
static int score_scale(Im *m, ONode *mm1, ONode **sc, float *scale)
{
    *scale = 1;
    *sc = only_reader(m, mm1->out[0], "Mul");
    if (!*sc)
        *sc = only_reader(m, mm1->out[0], "Div");
    if (!*sc)
        return 1;
    if ((*sc)->in[0] != mm1->out[0] || !fold_now(m, (*sc)->in[1], 0) ||
        !is_const_scalar(m, (*sc)->in[1], 0, INFINITY))
        return 0;
    double c = val_get(&m->v[(*sc)->in[1]], 0);
    *scale = (float)(strcmp((*sc)->op, "Div") ? c : 1.0 / c);
    return *scale > 0 && isfinite(*scale);
}

/* Whether value v can be Attention's mask over scores (b, h, sq, skv), or
 * the bool condition one is made from: its axes right-aligned to those,
 * 1 or b entries, 1 head, 1 or sq queries, skv keys (what
 * shape_attention asks). */
static int mask_fits(Im *m, int v, int cond, long b, long sq, long skv)
{
    const Val *x = &m->v[v];
    long want[4] = {b, 1, sq, skv};
    if ((x->dt != DT_F32 && !cond) || x->rank < 1 || x->rank > 4 ||
        x->dims[x->rank - 1] != skv)
        return 0;
    for (int i = 0; i < x->rank - 1; i++) {
        long d = x->dims[i], w = want[4 - x->rank + i];
        if (d != 1 && (d != w || 4 - x->rank + i == 1))
            return 0;
    }
    return 1;
}

/* A new value for IR tensor y (the output of node made), named name. */
static int made_val(Im *m, const ONode *o, const char *name, int y)
{
    int v = im_new_val(m, name, o->what);
    if (v < 0)
        return -1;
    m->v[v].tensor = y;
    m->v[v].varying = 1;
    shape_to_val(&m->v[v], &m->g->tensors[y]);
    return v;
}

/* k moved by perm into (.., T, D): a Transpose node of its own, named
 * after tr, whose value replaces k's. -1 on failure, else the value. */
static int moved_key(Im *m, ONode *tr, const long *perm, int rank)
{
    const char *name = ctx_printf(m->c, "%s_heads", m->v[tr->in[0]].name);
    Node *n;
    int t = node1(m, tr, tr->name, OP_TRANSPOSE, &m->v[tr->in[0]].tensor, 1,
                  name, &n);
    set_ints(n, "perm", perm, rank);
    return finish_node(m, n, tr) ? -1 : made_val(m, tr, name, t);
}

/* An attention pattern found: from the scores' product (first, q by K^T)
 * through the optional scale, additive mask and masking Where to the
 * Softmax and the product with v (second). */
typedef struct {
    ONode *first, *sc, *ad, *wh, *sm, *second;
    int rank, q, v, mask, causal, keep;
    long batch, sq, skv;    /* the scores' batch, queries and keys */
    float scale;
} AttnMatch;

/* Whether value v is, or is computed from, a trainable initializer:
 * such a mask would be owed a gradient that Attention does not give. */
static int trainable_under(Im *m, int v)
{
    char *seen = ctx_alloc(m->c, (size_t)m->nv + 1);
    int *stack = ctx_alloc(m->c, ((size_t)m->nv + 1) * sizeof *stack), n = 0;
    stack[n++] = v;
    seen[v] = 1;
    while (n) {
        const Val *x = &m->v[stack[--n]];
        if (x->init && x->trainable)
            return 1;
        const ONode *o = x->producer >= 0 ? &m->nodes[x->producer] : NULL;
        for (int i = 0; o && i < o->nin; i++)
            if (o->in[i] >= 0 && !seen[o->in[i]]) {
                seen[o->in[i]] = 1;
                stack[n++] = o->in[i];
            }
    }
    return 0;
}

/* The optional additive mask after the scores (a->at's reader): BERT's
 * from attention_mask, torch's key padding mask (baddbmm); its shape is
 * checked when the Attention is lowered where not known yet. */
static int match_mask_add(Im *m, AttnMatch *a, int *at)
{
    a->ad = only_reader(m, *at, "Add");
    if (!a->ad)
        return 1;
    a->mask = a->ad->in[0] == *at ? a->ad->in[1] : a->ad->in[0];
    const Val *x = &m->v[a->mask];
    if (a->ad->in[0] == a->ad->in[1] || (x->shaped && x->dt != DT_F32) ||
        trainable_under(m, a->mask) ||
        (x->shaped && a->rank == 4 &&
         !mask_fits(m, a->mask, 0, a->batch, a->sq, a->skv)))
        return 0;
    *at = a->ad->out[0];
    return 1;
}

/* The optional Where filling masked scores with -inf (or finfo.min): a
 * constant causal mask (is_causal), or a computed condition, the mask
 * input made when the Attention is lowered and the condition exists. */
static int match_where(Im *m, AttnMatch *a, int *at)
{
    ONode *wh = a->wh = only_reader(m, *at, "Where");
    if (!wh)
        return 1;
    for (int i = 0; i < 3 && i < wh->nin; i++)
        if (wh->in[i] != *at)
            fold_now(m, wh->in[i], 0);
    int masked_true = wh->in[2] == *at;     /* Where(mask, -inf, x) */
    a->keep = !masked_true;
    int fill = masked_true ? wh->in[1] : wh->in[2];
    /* finfo.min is -inf only where the diagonal is never masked: not
     * after an additive mask, which may mask it */
    if ((masked_true ? wh->in[2] : wh->in[1]) != *at || !is_mask_fill(m, fill) ||
        (a->ad && !is_const_scalar(m, fill, -INFINITY, 0)))
        return 0;
    const Val *cond = &m->v[wh->in[0]];
    a->causal = is_causal_mask(cond, a->sq, a->skv, masked_true);
    if (!a->causal && (cond->known || a->mask != -1 ||
                       (cond->shaped &&
                        !mask_fits(m, wh->in[0], 1, a->batch, a->sq, a->skv))))
        return 0;
    *at = wh->out[0];
    return 1;
}

/* Everything after a->first: scale, mask, Where, Softmax over the keys
 * (the last axis), and the product with v, whose op is second_op (MatMul
 * or Einsum; ok_second says whether it is the product p v). */
static int match_tail(Im *m, AttnMatch *a, const char *second_op,
                      int (*ok_second)(Im *m, const ONode *o, int p))
{
    if (!score_scale(m, a->first, &a->sc, &a->scale))
        return 0;
    int at = a->sc ? a->sc->out[0] : a->first->out[0];
    a->mask = -1;
    if (!match_mask_add(m, a, &at) || !match_where(m, a, &at))
        return 0;
    a->sm = only_reader(m, at, "Softmax");
    /* before opset 13 Softmax flattens from its axis (default 1) */
    long axis = a->sm ? onnx_attr_int(a->sm, "axis", m->opset < 13 ? 1 : -1)
                      : 0;
    if (!a->sm || (axis != -1 && axis != a->rank - 1))
        return 0;
    a->second = only_reader(m, a->sm->out[0], second_op);
    if (!a->second || a->second->in[0] != a->sm->out[0] ||
        !ok_second(m, a->second, a->sm->out[0]))
        return 0;
    const Tensor *v = heads_rank(m, a->second->in[1]);
    a->v = a->second->in[1];
    return v && v->rank == a->rank;
}

/* The matched nodes become one Attention node (the second product's),
 * of Q q, K k, V and the mask. */
static void rewrite_attention(Im *m, AttnMatch *a, int k, const char *what)
{
    ONode *o = a->second;
    ONode *gone[5] = {a->first, a->sm, a->sc, a->ad, a->wh};
    for (int i = 0; i < 5; i++)
        if (gone[i])
            gone[i]->done = 1;
    o->op = "Attention";
    o->p = NULL;
    /* room for Q, K, V and a mask (the product had two) */
    o->in = ctx_alloc(m->c, 5 * sizeof *o->in);
    o->in[0] = a->q;
    o->in[1] = k;
    o->in[2] = a->v;
    o->in[3] = a->mask;
    o->nin = a->mask >= 0 ? 4 : 3;
    o->mask_late = a->mask >= 0;
    o->causal = a->causal;
    o->scale = a->scale;
    if (a->wh && !a->causal) {
        o->cond_mask = 1 + a->wh->in[0];
        o->cond_keep = a->keep;
        o->cond_fill = (float)val_get(
            &m->v[a->keep ? a->wh->in[2] : a->wh->in[1]], 0);
    }
    log_rewrite(m, ctx_printf(m->c, "%s/scale/%sSoftmax/%s as Attention",
                              what, a->causal ? "causal mask/" : "", what), o);
}

static int is_pv_matmul(Im *m, const ONode *o, int p)
{
    (void)m;
    return o->in[0] == p;
}

/* Transpose(k) -> MatMul(q, .) -> [Mul/Div by a constant] -> [Add of a
 * mask] -> [Where with a causal mask and -inf] -> Softmax(last axis) ->
 * MatMul(., v), each read once: one Attention node, which keeps no
 * probabilities. Over 4-D heads (B, H, T, D), or 3-D with the heads in
 * the batch (B*H, T, D: torch's nn.MultiheadAttention, one head per
 * batch entry of ONNX's 3-D form). */
int try_attention(Im *m, ONode *tr)
{
    const Tensor *k = heads_rank(m, tr->in[0]);
    long move[4];
    int how = k ? key_transpose(onnx_attr(tr, "perm"), k->rank, move) : 0;
    if (!how)
        return 0;
    AttnMatch a = {0};
    a.rank = k->rank;
    int r = a.rank;
    a.first = only_reader(m, tr->out[0], "MatMul");
    if (!a.first || a.first->in[1] != tr->out[0])
        return 0;
    a.q = a.first->in[0];
    const Tensor *q = heads_rank(m, a.q);
    /* k's batch, heads (1 when 3-D), sequence and size */
    long kb = how == 2 && r == 3 ? k->dims[1] : k->dims[0];
    long kh = r == 3 ? 1 : how == 1 ? k->dims[1] : k->dims[2];
    long kt = how == 1 ? k->dims[r - 2] : k->dims[r == 3 ? 0 : 1];
    long kd = k->dims[r - 1];
    if (!q || q->rank != r || q->dims[0] != kb ||
        (r == 4 && q->dims[1] != kh) || q->dims[r - 1] != kd)
        return 0;
    a.batch = kb;
    a.sq = q->dims[r - 2];
    a.skv = kt;
    if (!match_tail(m, &a, "MatMul", is_pv_matmul))
        return 0;
    int kv = how == 2 ? moved_key(m, tr, move, r) : tr->in[0];
    if (kv < 0)
        return -1;
    tr->done = 1;
    rewrite_attention(m, &a, kv, "MatMul");
    return 1;
}

/* An Einsum's equation as its three subscripts, each of 4 letters. */
static int einsum_4(const ONode *o, char in1[5], char in2[5], char out[5])
{
    const Onnx__AttributeProto *eq = onnx_attr(o, "equation");
    char buf[64];
    if (!eq || eq->s.len == 0 || eq->s.len >= sizeof buf)
        return 0;
    int n = 0;
    for (size_t i = 0; i < eq->s.len; i++)
        if (eq->s.data[i] != ' ')
            buf[n++] = (char)eq->s.data[i];
    buf[n] = 0;
    return n == 15 && buf[4] == ',' && buf[9] == '-' && buf[10] == '>' &&
           sscanf(buf, "%4[a-zA-Z],%4[a-zA-Z]->%4[a-zA-Z]", in1, in2, out) == 3;
}

/* "bhqk,bhkd->bhqd" (any letters): p (b, h, q, k) by v (b, h, k, d). */
static int is_pv_einsum(Im *m, const ONode *o, int p)
{
    (void)m;
    char x[5], y[5], z[5];
    return o->in[0] == p && o->nin == 2 && einsum_4(o, x, y, z) &&
           x[0] == y[0] && x[1] == y[1] && x[3] == y[2] && z[0] == x[0] &&
           z[1] == x[1] && z[2] == x[2] && z[3] == y[3] && x[2] != x[3] &&
           y[3] != x[2] && y[3] != x[3] && x[0] != x[1];
}

/* einops-style attention: Einsum "bhqd,bhkd->bhqk"(q, k) -> [scale] ->
 * [mask] -> [Where] -> Softmax -> Einsum "bhqk,bhkd->bhqd"(., v), all 4-D
 * (batch, heads, sequence, size): one Attention node, as try_attention. */
int try_einsum_attention(Im *m, ONode *o)
{
    char x[5], y[5], z[5];
    if (o->nin != 2 || !einsum_4(o, x, y, z) || x[0] != y[0] ||
        x[1] != y[1] || x[3] != y[3] || z[0] != x[0] || z[1] != x[1] ||
        z[2] != x[2] || z[3] != y[2] || x[2] == y[2] || x[3] == x[2] ||
        x[3] == y[2] || x[0] == x[1])
        return 0;
    const Tensor *q = heads_rank(m, o->in[0]), *k = heads_rank(m, o->in[1]);
    if (!q || !k || q->rank != 4 || k->rank != 4 || k->dims[0] != q->dims[0] ||
        k->dims[1] != q->dims[1] || k->dims[3] != q->dims[3])
        return 0;
    AttnMatch a = {0};
    a.rank = 4;
    a.first = o;
    a.q = o->in[0];
    a.batch = q->dims[0];
    a.sq = q->dims[2];
    a.skv = k->dims[2];
    if (!match_tail(m, &a, "Einsum", is_pv_einsum))
        return 0;
    rewrite_attention(m, &a, o->in[1], "Einsum");
    return 1;
}

/* The additive mask Where(cond, fill, 0) (or Where(cond, 0, fill) where
 * the condition keeps) of try_attention's computed condition. */
static int mask_of_cond(Im *m, ONode *o, int cond)
{
    int fill = scalar_param(m, ctx_printf(m->c, "%s_fill", o->name),
                            o->cond_fill);
    int zero = scalar_param(m, ctx_printf(m->c, "%s_zero", o->name), 0.0f);
    int in[3] = {cond, o->cond_keep ? zero : fill, o->cond_keep ? fill : zero};
    Node *n;
    const char *name = ctx_printf(m->c, "%s_mask", o->name);
    int y = node1(m, o, name, OP_WHERE, in, 3, name, &n);
    return finish_node(m, n, o) ? -1 : made_val(m, o, name, y);
}

/* A 3-D mask (b, q, keys) of attention with its heads in the batch (3-D
 * Q, K, V, one head each) viewed as (b, 1, q, keys). */
static int mask_heads_view(Im *m, ONode *o, int mask)
{
    const Tensor *x = &m->g->tensors[m->v[mask].tensor];
    long shape[4] = {x->dims[0], 1, x->dims[1], x->dims[2]};
    Node *n;
    int y = node1(m, o, ctx_printf(m->c, "%s_mask4", o->name), OP_RESHAPE,
                  &m->v[mask].tensor, 1, ctx_printf(m->c, "%s_4d", x->name),
                  &n);
    set_ints(n, "shape", shape, 4);
    return finish_node(m, n, o) ? -1 : made_val(m, o, m->g->tensors[y].name, y);
}

/* One IR node of op over in[0..nin) named after o (suffix what), with
 * the ints attribute attr (NULL: none) set; its output tensor, -1 on
 * failure. */
static int step(Im *m, ONode *o, const char *what, OpKind op, const int *in,
                int nin, const char *attr, const long *ints, int nints)
{
    const char *name = ctx_printf(m->c, "%s/%s", o->name, what);
    Node *n;
    int y = node1(m, o, name, op, in, nin, name, &n);
    if (attr)
        set_ints(n, attr, ints, nints);
    return finish_node(m, n, o) ? -1 : y;
}

/* A mask that Attention cannot take after all (its shape known only now:
 * one per head, or of more axes than the scores): the pattern as it was,
 * scores = Q K^T [* scale] [+ mask] [masked by Where], Softmax, times V,
 * into o's output. Q K^T and the scale as one product then a Mul (the
 * file's Div by the constant becomes a Mul by its inverse). */
static int attention_unfused(Im *m, ONode *o, int cond_or_mask)
{
    int q = m->v[o->in[0]].tensor, k = m->v[o->in[1]].tensor;
    int v = m->v[o->in[2]].tensor, mt = m->v[cond_or_mask].tensor;
    int r = m->g->tensors[q].rank;
    long perm[4] = {0, 1, 2, 3};
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    long last = -1;
    int kt = step(m, o, "kT", OP_TRANSPOSE, &k, 1, "perm", perm, r);
    int in[3] = {q, kt, -1};
    int x = kt < 0 ? -1 : step(m, o, "scores", OP_MATMUL, in, 2, NULL, 0, 0);
    if (x >= 0 && o->scale != 1.0f) {
        in[0] = x;
        in[1] = scalar_param(m, ctx_printf(m->c, "%s/scale", o->name),
                             o->scale);
        x = step(m, o, "scaled", OP_MUL, in, 2, NULL, 0, 0);
    }
    if (x >= 0 && !o->cond_mask) {
        in[0] = x;
        in[1] = mt;
        x = step(m, o, "masked", OP_ADD, in, 2, NULL, 0, 0);
    } else if (x >= 0) {
        int fill = scalar_param(m, ctx_printf(m->c, "%s/fill", o->name),
                                o->cond_fill);
        int w[3] = {mt, o->cond_keep ? x : fill, o->cond_keep ? fill : x};
        x = step(m, o, "masked", OP_WHERE, w, 3, NULL, 0, 0);
    }
    if (x >= 0)
        x = step(m, o, "probs", OP_SOFTMAX, &x, 1, "axis", &last, 1);
    if (x < 0)
        return -1;
    Node *mm = new_node(m, o->name, OP_MATMUL);
    mm->in[mm->nin++] = x;
    mm->in[mm->nin++] = v;
    int y = add_out(m, mm, m->v[o->out[0]].name);
    if (finish_node(m, mm, o))
        return -1;
    m->v[o->out[0]].tensor = y;
    shape_to_val(&m->v[o->out[0]], &m->g->tensors[y]);
    log_rewrite(m, "attention left as it was: its mask fits no Attention", o);
    return 1;
}

/* Whether mask value x (shape now known) fits attention of Q tensor q and
 * K k: for 3-D heads in the batch, at most 3 axes, a 3-D one (b, q,
 * keys) viewed with a head axis; else mask_fits. */
static int late_fit(Im *m, int x, int cond, const Tensor *q, const Tensor *k)
{
    const Val *v = &m->v[x];
    int r = q->rank;
    long b = q->dims[0], sq = q->dims[r - 2], skv = k->dims[r - 2];
    if (r == 3 && v->rank > 3)
        return 0;
    if (r == 3 && v->rank == 3)
        return (cond || v->dt == DT_F32) && (v->dims[0] == 1 ||
               v->dims[0] == b) && (v->dims[1] == 1 || v->dims[1] == sq) &&
               v->dims[2] == skv;
    return mask_fits(m, x, cond, b, sq, skv);
}

/* try_attention's mask, when the Attention is lowered (what it is made
 * of exists then): from a computed condition, viewed with a head axis
 * for 3-D heads in the batch. One whose shape Attention cannot take
 * leaves the pattern as it was (attention_unfused). 0: done; 1: lowered
 * unfused; -1: failed. */
int attention_mask_input(Im *m, ONode *o)
{
    int qt = tensor_of(m, o->in[0], o), kt = tensor_of(m, o->in[1], o);
    int mask = o->cond_mask ? o->cond_mask - 1 : o->in[3];
    int mt = tensor_of(m, mask, o);
    if (qt < 0 || kt < 0 || mt < 0 || tensor_of(m, o->in[2], o) < 0)
        return -1;
    shape_to_val(&m->v[mask], &m->g->tensors[mt]);
    const Tensor *q = &m->g->tensors[qt], *k = &m->g->tensors[kt];
    if (!late_fit(m, mask, o->cond_mask != 0, q, k))
        return attention_unfused(m, o, mask);
    if (q->rank == 3 && m->v[mask].rank == 3)
        mask = mask_heads_view(m, o, mask);
    if (mask >= 0 && o->cond_mask)
        mask = mask_of_cond(m, o, m->v[mask].tensor);
    if (mask < 0)
        return -1;
    o->in[3] = mask;
    o->nin = 4;
    o->cond_mask = 0;
    o->mask_late = 0;
    return 0;
}
